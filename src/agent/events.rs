//! What the agent is doing, as it does it: one [`AgentEvent`] per step, handed to an
//! [`Observer`] the caller chooses. The page's live steps (server-sent events), the CLI's
//! progress on stderr and the traces (`crate::telemetry`) are all observers of the same events, so what a user
//! watches and what a trace records cannot disagree. Each event carries when its step
//! began (milliseconds since the question arrived) and how long it took.
//!
//! Observers must not block: they are called on the agent's task, between steps.

use serde::{Deserialize, Serialize};

use super::failure::{FailureKind, NextKind};
use super::Decision;
use crate::gate::ErrorType;
use crate::llm::Purpose;

/// What the rules before any model call decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RulesOutcome {
    /// No rule stops the question.
    Continue,
    /// A restricted column or a write: the question is declined.
    Decline,
    /// A vague word the notes do not resolve: the user is asked.
    Clarify,
}

impl RulesOutcome {
    pub const ALL: [RulesOutcome; 3] = [
        RulesOutcome::Continue,
        RulesOutcome::Decline,
        RulesOutcome::Clarify,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RulesOutcome::Continue => "continue",
            RulesOutcome::Decline => "decline",
            RulesOutcome::Clarify => "clarify",
        }
    }
}

/// How the schema the model reads was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SchemaMode {
    /// Every card fits the budget: the schema went whole.
    Whole,
    /// Tables were linked to the question.
    Linked,
    /// The plain reference prompt: every table with three sample rows.
    Plain,
    /// No schema was chosen: the rules ended the question first (results only).
    None,
}

impl SchemaMode {
    pub const ALL: [SchemaMode; 4] = [
        SchemaMode::Whole,
        SchemaMode::Linked,
        SchemaMode::Plain,
        SchemaMode::None,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SchemaMode::Whole => "whole",
            SchemaMode::Linked => "linked",
            SchemaMode::Plain => "plain",
            SchemaMode::None => "none",
        }
    }
}

impl From<crate::linking::SelectionMode> for SchemaMode {
    fn from(mode: crate::linking::SelectionMode) -> SchemaMode {
        match mode {
            crate::linking::SelectionMode::Whole => SchemaMode::Whole,
            crate::linking::SelectionMode::Linked => SchemaMode::Linked,
        }
    }
}

impl std::fmt::Display for SchemaMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One table the schema selection chose, with its score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChosenTable {
    pub table: String,
    pub score: f64,
}

/// How a verified example served a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExampleRole {
    /// Shown to the model as a worked example.
    Prompt,
    /// The same question: its verified SQL was run again, without the model.
    Rerun,
}

impl ExampleRole {
    pub const ALL: [ExampleRole; 2] = [ExampleRole::Prompt, ExampleRole::Rerun];

    pub fn as_str(self) -> &'static str {
        match self {
            ExampleRole::Prompt => "prompt",
            ExampleRole::Rerun => "rerun",
        }
    }
}

/// One verified example a question used, with how alike it was (0 to 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsedExample {
    pub id: i64,
    pub question: String,
    pub score: f64,
    pub role: ExampleRole,
}

/// A step of the state machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The rules run before any model call (restricted columns, writes, vague words).
    Rules {
        started_ms: u64,
        elapsed_ms: u64,
        /// What the rules decided.
        outcome: RulesOutcome,
        assumptions: Vec<String>,
    },
    /// The verified examples found for the question: shown to the model, or one run
    /// again for the same question.
    Examples {
        started_ms: u64,
        elapsed_ms: u64,
        /// Examples of the database in use (set-aside ones are never counted).
        available: usize,
        used: Vec<UsedExample>,
    },
    /// Which tables the model will read.
    SchemaSelected {
        started_ms: u64,
        elapsed_ms: u64,
        mode: SchemaMode,
        tables: Vec<ChosenTable>,
        prompt_tokens: usize,
    },
    /// One model call.
    ModelCall {
        started_ms: u64,
        elapsed_ms: u64,
        /// Why the model was asked.
        purpose: Purpose,
        model: String,
        input_tokens: u64,
        output_tokens: u64,
        cost_usd: f64,
        /// Replies asked for from the one prompt.
        candidates: u32,
        /// Replies that stopped at the token limit.
        truncated: u32,
        /// The messages sent, and the replies (first, then the alternatives).
        prompt: Vec<String>,
        replies: Vec<String>,
    },
    /// The guard's verdict on one candidate.
    Guard {
        started_ms: u64,
        elapsed_ms: u64,
        candidate: usize,
        sql: String,
        accepted: bool,
        /// The text that will run, or the refusal.
        detail: String,
    },
    /// One candidate run on the database.
    Executed {
        started_ms: u64,
        elapsed_ms: u64,
        candidate: usize,
        sql: String,
        rows: Option<usize>,
        error_type: Option<ErrorType>,
        error: Option<String>,
        /// The database's SQLSTATE and hint, when it gave them.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sqlstate: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hint: Option<String>,
    },
    /// Candidates grouped by their results.
    Vote {
        started_ms: u64,
        chosen: usize,
        agreeing: usize,
        voters: usize,
        groups: Vec<usize>,
    },
    /// The one diagnostic of an empty result.
    EmptyProbe {
        started_ms: u64,
        elapsed_ms: u64,
        sql: Option<String>,
        finding: String,
    },
    /// A failed attempt and what comes next.
    Failed {
        started_ms: u64,
        kind: FailureKind,
        message: String,
        /// What follows: one of [`NextKind::ALL`] but `diagnose` and `answer`, which
        /// follow only rows, never a failure.
        next: NextKind,
        /// What the rules' own rewrite changes ("without the repeating join"), when the
        /// next step is a rewrite.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rewrite: Option<String>,
    },
    /// How the question ended.
    Finished {
        started_ms: u64,
        decision: Decision,
        attempts: u32,
        rows: usize,
    },
}

impl AgentEvent {
    /// The step's name (`model_call`, `executed`, ...), as serialized.
    pub fn step(&self) -> &'static str {
        match self {
            AgentEvent::Rules { .. } => "rules",
            AgentEvent::Examples { .. } => "examples",
            AgentEvent::SchemaSelected { .. } => "schema_selected",
            AgentEvent::ModelCall { .. } => "model_call",
            AgentEvent::Guard { .. } => "guard",
            AgentEvent::Executed { .. } => "executed",
            AgentEvent::Vote { .. } => "vote",
            AgentEvent::EmptyProbe { .. } => "empty_probe",
            AgentEvent::Failed { .. } => "failed",
            AgentEvent::Finished { .. } => "finished",
        }
    }
}

/// Receives the agent's events.
pub trait Observer: Send + Sync {
    fn observe(&self, event: &AgentEvent);
}

/// Watches nothing: for callers that only want the result.
pub struct NoObserver;

impl Observer for NoObserver {
    fn observe(&self, _event: &AgentEvent) {}
}

/// Keeps every event, in order (tests and replays).
#[derive(Default)]
pub struct Recorder {
    events: std::sync::Mutex<Vec<AgentEvent>>,
}

impl Recorder {
    pub fn events(&self) -> Vec<AgentEvent> {
        self.events
            .lock()
            .map(|events| events.clone())
            .unwrap_or_default()
    }
}

impl Observer for Recorder {
    fn observe(&self, event: &AgentEvent) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event.clone());
        }
    }
}
