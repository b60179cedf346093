//! GET /api/health: every claim checked, none assumed. The database is asked `SELECT 1`
//! through the whole gate; a harmless write is attempted below the guard and must be
//! refused ([`Gate::probe_read_only`]); the model gets one tiny `check` call, whose
//! outcome is kept for [`MODEL_CHECK_TTL`] so polling health costs almost nothing.
//! Health also says whether sign-in is configured and, for replicas, whether the
//! shared state answers (one `SELECT 1` round trip; its URL shown without password).
//! `ok` is true only when every check passed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::agent::prompts;
use crate::gate::{Gate, QueryOutcome};
use crate::llm::{CallLog, ModelClient};
use crate::querylog::QueryLog;

/// The query log's part of health.
#[derive(Debug, Clone)]
pub struct QueryLogCheck {
    pub enabled: bool,
    pub writable: bool,
    pub written: u64,
    pub failed: u64,
    pub detail: String,
}

/// The query log check: an insert over a fresh connection (as the log role on
/// PostgreSQL), rolled back; with the rows written and failed since start.
pub async fn check_query_log(log: Option<&QueryLog>, off_reason: Option<&String>) -> QueryLogCheck {
    let Some(log) = log else {
        return QueryLogCheck {
            enabled: false,
            writable: false,
            written: 0,
            failed: 0,
            detail: off_reason
                .cloned()
                .unwrap_or_else(|| "the query log is off".to_string()),
        };
    };
    let counters = log.counters();
    let (written, failed) = (counters.written(), counters.failed());
    let (writable, mut detail) = match log.probe().await {
        Ok(()) => (
            true,
            format!(
                "a row inserted into {} was accepted (and rolled back)",
                log.target().describe()
            ),
        ),
        Err(error) => (
            false,
            format!(
                "a row could not be inserted into {}: {error}",
                log.target().describe()
            ),
        ),
    };
    detail.push_str(&format!(
        "; {written} row(s) written, {failed} failed since start"
    ));
    if let (Some(last), true) = (counters.last_error(), failed > 0) {
        detail.push_str(&format!(" (last: {last})"));
    }
    QueryLogCheck {
        enabled: true,
        writable,
        written,
        failed,
        detail,
    }
}

/// How long a model check's outcome is reused.
pub const MODEL_CHECK_TTL: Duration = Duration::from_secs(60);

/// The longest the model check may take: a health check must answer promptly even when
/// the model is slow (it then reports the model as unreachable, with the reason).
pub const MODEL_CHECK_TIMEOUT: Duration = Duration::from_secs(20);

/// The longest each database check may take.
const DATABASE_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// What GET /api/health returns.
#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    pub ok: bool,
    pub read_only_confirmed: bool,
    pub database_reachable: bool,
    pub model_configured: bool,
    pub model_reachable: bool,
    /// Visible tables.
    pub tables: usize,
    /// The database URL without its password.
    pub database: String,
    pub dialect: String,
    pub provider: Option<String>,
    pub model: Option<String>,
    /// Answered questions are written to the query log.
    pub query_log_enabled: bool,
    /// A row could be inserted just now (as the log role on PostgreSQL), then rolled back.
    pub query_log_writable: bool,
    pub query_log_rows_written: u64,
    /// Rows not written since start (each counted; an answer never fails for it).
    pub query_log_write_failures: u64,
    /// A schema snapshot exists to check drift against.
    pub schema_snapshot: bool,
    /// The last drift check found differences (each in `schema_differences`).
    pub schema_drifted: bool,
    pub schema_differences: Vec<String>,
    /// Traces are exported (`OTEL_EXPORTER_OTLP_ENDPOINT` is set and usable).
    pub tracing_enabled: bool,
    /// The collector accepted an export just now, with the configured headers: false
    /// when it is down, unreachable or refuses the credentials.
    pub tracing_authenticated: bool,
    /// Spans the collector accepted since start.
    pub traces_exported: u64,
    /// Spans whose export failed since start (counted; an answer never waits for it).
    pub trace_export_failures: u64,
    /// One sentence per check: what was done and what came back.
    pub details: BTreeMap<String, String>,
    /// The local model this server offers or runs (None when another model is
    /// configured): its phase, download progress and load time.
    pub local_model: Option<crate::local_model::LocalModelStatus>,
    /// Requests must sign in (a user exists, or a trusted proxy names users); None
    /// (null) when the users could not be read (the shared state is down), since
    /// either answer would be a guess.
    pub authentication_configured: Option<bool>,
    /// The ledger, pace and sessions are shared with other replicas (`--state-url`).
    pub shared_state_enabled: bool,
    /// The shared state answered a round trip just now (false when not enabled).
    pub shared_state_reachable: bool,
}

/// The shared state's part of health: (enabled, reachable, detail).
pub async fn check_shared_state(state: Option<&crate::state::SharedState>) -> (bool, bool, String) {
    let Some(state) = state else {
        return (
            false,
            false,
            "no --state-url: the spend ledger, pace and sessions are this server's own".to_string(),
        );
    };
    match tokio::time::timeout(DATABASE_CHECK_TIMEOUT, state.ping()).await {
        Ok(Ok(took)) => (
            true,
            true,
            format!(
                "SELECT 1 on the shared state at {} answered in {} ms",
                state.shown_url(),
                took.as_millis()
            ),
        ),
        Ok(Err(error)) => {
            eprintln!("askdb serve: shared state check failed: {error}");
            (
                true,
                false,
                format!("the shared state at {} did not answer", state.shown_url()),
            )
        }
        Err(_) => (
            true,
            false,
            format!(
                "the shared state at {} did not answer within {} s",
                state.shown_url(),
                DATABASE_CHECK_TIMEOUT.as_secs()
            ),
        ),
    }
}

/// The outcome of one model check, kept for a while.
#[derive(Debug, Clone)]
pub struct ModelCheck {
    pub reachable: bool,
    pub detail: String,
    pub at: Instant,
}

/// The model check: one tiny call through the recording client.
pub async fn check_model(client: &ModelClient) -> ModelCheck {
    let request = prompts::model_check_request("health check");
    let started = Instant::now();
    let outcome = tokio::time::timeout(
        MODEL_CHECK_TIMEOUT,
        client.call(&request, &CallLog::default()),
    )
    .await;
    let (reachable, detail) = match outcome {
        Ok(Ok(reply)) => (
            true,
            format!(
                "a check call was answered by {} in {} ms",
                reply.model,
                started.elapsed().as_millis()
            ),
        ),
        Ok(Err(error)) => {
            eprintln!("askdb serve: model check failed: {error}");
            (false, format!("the check call failed ({})", error.kind()))
        }
        Err(_) => (
            false,
            format!(
                "no reply to the check call within {} s (the model is busy or down)",
                MODEL_CHECK_TIMEOUT.as_secs()
            ),
        ),
    };
    ModelCheck {
        reachable,
        detail,
        at: Instant::now(),
    }
}

/// `SELECT 1` through the gate (guard, read-only executor).
pub async fn check_database(gate: &Gate) -> (bool, String) {
    match tokio::time::timeout(DATABASE_CHECK_TIMEOUT, gate.run_query("SELECT 1")).await {
        Ok(QueryOutcome::Rows(_)) => (true, "SELECT 1 through the gate returned a row".to_string()),
        Ok(QueryOutcome::Failed(error)) => {
            eprintln!("askdb serve: health SELECT 1 failed: {error}");
            (
                false,
                format!("SELECT 1 through the gate failed ({})", error.error_type),
            )
        }
        Err(_) => (
            false,
            format!(
                "SELECT 1 did not return within {} s",
                DATABASE_CHECK_TIMEOUT.as_secs()
            ),
        ),
    }
}

/// The write probe, or the value a test substituted for it.
pub async fn check_read_only(gate: &Gate, substitute: Option<bool>) -> (bool, String) {
    if let Some(refused) = substitute {
        let verdict = if refused { "refused" } else { "accepted" };
        return (
            refused,
            format!("probe result substituted by a test hook: the write counts as {verdict}"),
        );
    }
    match tokio::time::timeout(DATABASE_CHECK_TIMEOUT, gate.probe_read_only()).await {
        Ok(Ok(true)) => (
            true,
            "a write below the guard (CREATE TEMP TABLE) was refused by the database".to_string(),
        ),
        Ok(Ok(false)) => (
            false,
            "a write below the guard (CREATE TEMP TABLE) was ACCEPTED: the connection can write"
                .to_string(),
        ),
        Ok(Err(error)) => {
            eprintln!("askdb serve: read-only probe: {error}");
            (
                false,
                "the write probe could not be run, so read-only is not confirmed".to_string(),
            )
        }
        Err(_) => (
            false,
            format!(
                "the write probe did not return within {} s",
                DATABASE_CHECK_TIMEOUT.as_secs()
            ),
        ),
    }
}
