//! What the agent is doing, as it does it: one [`AgentEvent`] per step, handed to an
//! [`Observer`] the caller chooses. The page's live steps (server-sent events), the CLI's
//! progress on stderr and the traces (`crate::telemetry`) are all observers of the same events, so what a user
//! watches and what a trace records cannot disagree. Each event carries when its step
//! began (milliseconds since the question arrived) and how long it took.
//!
//! Observers must not block: they are called on the agent's task, between steps.

use serde::Serialize;

use super::failure::FailureKind;
use super::Decision;

/// One table the schema selection chose, with its score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChosenTable {
    pub table: String,
    pub score: f64,
}

/// A step of the state machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum AgentEvent {
    /// The rules run before any model call (restricted columns, writes, vague words).
    Rules {
        started_ms: u64,
        elapsed_ms: u64,
        /// What the rules decided: `continue`, `decline` or `clarify`.
        outcome: String,
        assumptions: Vec<String>,
    },
    /// Which tables the model will read.
    SchemaSelected {
        started_ms: u64,
        elapsed_ms: u64,
        /// `whole`, `linked` or `plain`.
        mode: String,
        tables: Vec<ChosenTable>,
        prompt_tokens: usize,
    },
    /// One model call.
    ModelCall {
        started_ms: u64,
        elapsed_ms: u64,
        /// `write_sql`, `repair_sql`, `write_answer`.
        purpose: String,
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
        error_type: Option<String>,
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
        /// `repair`, `resample`, `decline` or `give_up`.
        next: String,
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
