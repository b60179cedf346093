//! What `askdb serve` watches besides requests: the query log (a row per answered
//! question, written in the background) and schema drift (the live schema against the
//! snapshot, checked at start and every few minutes). Both report into health; neither
//! can fail an answer.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::agent::AgentResult;
use crate::database::DatabaseUrl;
use crate::drift::{self, Difference};
use crate::gate::GateOptions;
use crate::querylog::{LogRecord, LogTarget};

/// How often `askdb serve` compares the live schema with the snapshot by default.
pub const DEFAULT_DRIFT_CHECK_SECS: u64 = 300;

/// Whether answered questions are logged, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueryLogSetting {
    On(LogTarget),
    /// Not logged, and why (shown in health).
    Off(String),
}

impl Default for QueryLogSetting {
    fn default() -> Self {
        QueryLogSetting::Off("the query log is not configured".to_string())
    }
}

/// How `askdb serve` checks for drift: the snapshot, and how to see the live schema
/// again (a fresh gate over the same database, opened for each check and dropped).
#[derive(Clone)]
pub struct DriftWatch {
    pub snapshot: PathBuf,
    pub url: DatabaseUrl,
    pub options: GateOptions,
    pub every: Duration,
}

impl std::fmt::Debug for DriftWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriftWatch")
            .field("snapshot", &self.snapshot)
            .field("url", &self.url.to_string())
            .field("every", &self.every)
            .finish()
    }
}

/// The last drift check.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DriftStatus {
    /// A snapshot exists to compare with.
    pub enabled: bool,
    pub drifted: bool,
    pub differences: Vec<Difference>,
    /// The check could not run (no snapshot is not an error).
    pub error: Option<String>,
    pub detail: String,
}

/// One drift check: the snapshot read again (a new `askdb schema snapshot` clears
/// drift without a restart), the live schema through a fresh gate.
pub async fn check_drift(watch: &DriftWatch) -> DriftStatus {
    if !watch.snapshot.is_file() {
        return DriftStatus {
            detail: format!(
                "no schema snapshot at {} (`askdb schema snapshot` writes one)",
                watch.snapshot.display()
            ),
            ..DriftStatus::default()
        };
    }
    let saved = match drift::read(&watch.snapshot) {
        Ok(saved) => saved,
        Err(error) => {
            return DriftStatus {
                enabled: true,
                error: Some(error.to_string()),
                detail: error.to_string(),
                ..DriftStatus::default()
            }
        }
    };
    let gate = match crate::database::open_gate(&watch.url, watch.options.clone()).await {
        Ok(gate) => gate,
        Err(error) => {
            let why = format!("the live schema could not be read: {error}");
            return DriftStatus {
                enabled: true,
                error: Some(why.clone()),
                detail: why,
                ..DriftStatus::default()
            };
        }
    };
    let differences = drift::check(&gate, &saved);
    let detail = if differences.is_empty() {
        format!(
            "the live schema matches the snapshot taken {} ({})",
            saved.taken_at,
            watch.snapshot.display()
        )
    } else {
        let listed: Vec<String> = differences.iter().map(ToString::to_string).collect();
        format!(
            "the schema drifted from the snapshot taken {}: {}",
            saved.taken_at,
            listed.join("; ")
        )
    };
    DriftStatus {
        enabled: true,
        drifted: !differences.is_empty(),
        differences,
        error: None,
        detail,
    }
}

/// The query log's row for one answered question.
pub fn log_record(result: &AgentResult, asked_at: SystemTime, model: Option<String>) -> LogRecord {
    LogRecord {
        question: result.question.clone(),
        asked_at,
        sql: result.sql.clone(),
        attempts: result.attempts,
        error_types: result
            .history
            .iter()
            .map(|attempt| attempt.error_type.as_str().to_string())
            .collect(),
        decision: result.decision.as_str().to_string(),
        row_count: u64::try_from(result.row_count).unwrap_or(u64::MAX),
        latency_ms: result.latency_ms,
        input_tokens: result.tokens.input,
        output_tokens: result.tokens.output,
        cost_usd: result.cost_usd,
        model,
        trace_id: result.trace_id.clone(),
        mode: result.mode.as_str().to_string(),
        // Set by the caller that knows the conversation (the HTTP API).
        conversation_id: None,
        turn: None,
        examples: result.examples.iter().map(|example| example.id).collect(),
        rerun_example: result.answered_from_example,
        // Set by the HTTP API, which knows who signed in.
        user: None,
    }
}

#[cfg(test)]
mod tests {
    use crate::agent::Decision;
    use crate::querylog::stats::DECISIONS;

    #[test]
    fn the_log_stats_count_every_decision_the_monitor_writes() {
        let written: Vec<&str> = Decision::ALL.into_iter().map(Decision::as_str).collect();
        assert_eq!(written, DECISIONS);
    }
}
