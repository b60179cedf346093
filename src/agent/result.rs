//! What the agent returns: the decision a question ended with, the answer's rows and
//! SQL, every failed attempt, the model calls with their tokens and cost, and the trace
//! of the steps taken; and what `plan` shows before any model call.

use serde::{Deserialize, Serialize};
use serde_json::Value as JsonValue;

use super::ambiguity;
use super::answer::ChartSpec;
use super::events::{SchemaMode, UsedExample};
use super::failure::FailureKind;
use super::plausibility;
use super::Mode;
use crate::gate::RefusalReason;
use crate::linking::Selection;
use crate::llm::{ModelRequest, Purpose};

/// How the question ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Answer,
    Clarify,
    Decline,
    GiveUp,
}

impl Decision {
    pub const ALL: [Decision; 4] = [
        Decision::Answer,
        Decision::Clarify,
        Decision::Decline,
        Decision::GiveUp,
    ];

    /// The decision's name, as results, the query log and traces carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Answer => "answer",
            Decision::Clarify => "clarify",
            Decision::Decline => "decline",
            Decision::GiveUp => "give_up",
        }
    }

    pub fn parse(text: &str) -> Option<Decision> {
        Decision::ALL
            .into_iter()
            .find(|decision| decision.as_str() == text)
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One failed attempt, as the history shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedAttempt {
    pub sql: String,
    pub error_type: FailureKind,
    pub message: String,
    /// Why the guard refused, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<RefusalReason>,
}

impl FailedAttempt {
    /// Whether this statement reached the database: not refused by the guard (even a
    /// refusal worded as a database error), and of a kind that runs.
    pub fn was_executed(&self) -> bool {
        self.reason.is_none() && self.error_type.can_have_run()
    }
}

/// A clarification question with its options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClarifyRequest {
    pub question: String,
    pub options: Vec<String>,
}

/// One step the state machine took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceStep {
    pub node: String,
    pub note: String,
    pub elapsed_ms: u64,
}

/// Tokens, cost and latency of one model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelStep {
    pub purpose: Purpose,
    /// Prompt tokens in total, the ones read from the server's prompt cache included.
    pub input_tokens: u64,
    /// Prompt tokens the server read from its prompt cache instead of computing them:
    /// what a cached prefix saved (0 where the server does not say).
    #[serde(default)]
    pub cache_read_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub latency_ms: u64,
    /// The model server's own clock for the call, where it reports one: how long it
    /// took to read the prompt tokens its cache lacked and to write the reply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<crate::llm::ServerTimings>,
}

impl ModelStep {
    /// The model server's clock summed over `calls` (None where it timed none).
    pub fn server_timings_of(calls: &[ModelStep]) -> Option<crate::llm::ServerTimings> {
        crate::llm::ServerTimings::total(calls.iter().filter_map(|call| call.server_timings))
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
}

/// Everything the agent returns for one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResult {
    pub question: String,
    pub mode: Mode,
    pub decision: Decision,
    /// The SQL that produced the answer (as it ran, LIMIT included).
    pub sql: Option<String>,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<JsonValue>>,
    pub row_count: usize,
    pub truncated: bool,
    /// Generation rounds made (each may try several candidates).
    pub attempts: u32,
    /// Candidate statements run or refused, over every round.
    #[serde(default)]
    pub candidates_tried: u32,
    /// Every failed attempt, in order.
    pub history: Vec<FailedAttempt>,
    pub tables_used: Vec<String>,
    pub assumptions: Vec<String>,
    pub explanation: Option<String>,
    /// Numbers in the explanation that are not in the rows: shown flagged, not as fact.
    pub unverified_numbers: Vec<String>,
    /// The rule checks the answer still fails (after its one suspect repair, or with no
    /// attempt left), each with its check id and the fact: shown as a warning, never as
    /// a plain answer. Empty for an answer that passed them.
    #[serde(default)]
    pub warnings: Vec<plausibility::Finding>,
    pub chart: ChartSpec,
    pub clarify: Option<ClarifyRequest>,
    /// Why the question was declined or given up.
    pub reason: Option<String>,
    /// Whether the schema went whole or linked (or plain, or none when the rules ended
    /// the question first), and which tables.
    pub schema_mode: SchemaMode,
    pub schema_tables: Vec<String>,
    /// The strategy the question was asked with (`reply=sql,...`).
    #[serde(default)]
    pub strategy: String,
    pub tokens: Tokens,
    pub cost_usd: f64,
    pub latency_ms: u64,
    pub model_calls: Vec<ModelStep>,
    pub trace: Vec<TraceStep>,
    /// The OpenTelemetry trace of this question (32 hex digits), when the caller traced
    /// it and traces are exported; the agent itself leaves it empty.
    #[serde(default)]
    pub trace_id: Option<String>,
    /// Whether the first round's answer returned rows without error.
    pub first_attempt_ok: Option<bool>,
    /// The SQL of the first round's answer (or its first failure), for rescue/broken
    /// accounting.
    pub first_sql: Option<String>,
    /// A follow-up as one standalone question ("the number of bills voided in 2024"),
    /// so the user sees what was answered; None for a conversation's first question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub understood_as: Option<String>,
    /// The verified examples the question used: shown to the model, or run again.
    #[serde(default)]
    pub examples: Vec<UsedExample>,
    /// The verified example whose SQL answered the question without the model (the same
    /// question confirmed before), when one did.
    #[serde(default)]
    pub answered_from_example: Option<i64>,
    /// The user message the question was first asked with, kept by its conversation's
    /// turn (not part of the answer a client reads).
    #[serde(skip)]
    pub asked: Option<String>,
    /// The reply that answered, as the model wrote it (the same).
    #[serde(skip)]
    pub answered_reply: Option<String>,
}

impl AgentResult {
    /// The model server's clock summed over the question's calls (None where it timed
    /// none).
    pub fn server_timings(&self) -> Option<crate::llm::ServerTimings> {
        ModelStep::server_timings_of(&self.model_calls)
    }
}

#[cfg(test)]
impl AgentResult {
    /// A result with nothing in it but its question and decision.
    pub(crate) fn for_tests(question: &str, decision: Decision) -> AgentResult {
        AgentResult {
            question: question.to_string(),
            mode: Mode::Agent,
            decision,
            sql: None,
            columns: Vec::new(),
            rows: Vec::new(),
            row_count: 0,
            truncated: false,
            attempts: 0,
            candidates_tried: 0,
            history: Vec::new(),
            tables_used: Vec::new(),
            assumptions: Vec::new(),
            explanation: None,
            unverified_numbers: Vec::new(),
            warnings: Vec::new(),
            chart: super::answer::choose_chart(&[], &[]),
            clarify: None,
            reason: None,
            schema_mode: SchemaMode::None,
            schema_tables: Vec::new(),
            strategy: String::new(),
            tokens: Tokens::default(),
            cost_usd: 0.0,
            latency_ms: 0,
            model_calls: Vec::new(),
            trace: Vec::new(),
            trace_id: None,
            first_attempt_ok: None,
            first_sql: None,
            understood_as: None,
            examples: Vec::new(),
            answered_from_example: None,
            asked: None,
            answered_reply: None,
        }
    }
}

/// What `plan` shows before any model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub question: String,
    pub ambiguity: ambiguity::AmbiguityDecision,
    pub selection: Selection,
    /// Estimated prompt tokens of the generation call.
    pub prompt_tokens: usize,
}

/// The requests of a question's first round ([`Agent::first_round_requests`]).
#[derive(Debug, Clone)]
pub struct FirstRound {
    /// The one reply at temperature 0.
    pub greedy: ModelRequest,
    /// The strategy's candidates at its temperature.
    pub sampled: ModelRequest,
    /// The plain reference prompt.
    pub plain: ModelRequest,
}
