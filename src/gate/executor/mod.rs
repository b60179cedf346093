//! The executors: the second safety layer. Each runs one already-checked statement on
//! a connection that cannot write (SQLite: read-only file, query_only, authorizer,
//! progress deadline; PostgreSQL and MySQL: READ ONLY transaction, statement timeout,
//! always rolled back), fetches at most cap + 1 rows to report truncation, and reports
//! failures with the database's own code. Executors are private to the gate: nothing
//! outside `crate::gate` can reach a database without passing the guard.

pub(crate) mod mysql;
pub(crate) mod postgres;
pub(crate) mod sqlite;

use std::time::Duration;

use serde_json::Value as JsonValue;

use crate::gate::guard::Refusal;
use crate::gate::taxonomy::ErrorType;

/// How far a statement goes on the executor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Compiled by the database and judged by the guard, never executed.
    Verdict,
    /// Executed, after the verdict when one is asked for.
    Execute,
}

/// Rows as the database returned them, before the gate wraps them.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct RawRows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<JsonValue>>,
    /// More rows existed than the cap allowed.
    pub truncated: bool,
}

/// A failure with the database's own words and code.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ExecFailure {
    pub error_type: ErrorType,
    pub message: String,
    pub sqlstate: Option<String>,
    pub hint: Option<String>,
    /// 1-based character position in the statement, when the database gives one.
    pub position: Option<u32>,
    /// Set when nothing ran because the guard's check of the database's own
    /// resolution refused the statement.
    pub refusal: Option<Refusal>,
}

impl ExecFailure {
    pub fn new(error_type: ErrorType, message: impl Into<String>) -> Self {
        ExecFailure {
            error_type,
            message: message.into(),
            sqlstate: None,
            hint: None,
            position: None,
            refusal: None,
        }
    }

    /// The statement was compiled by the database and its resolution refused by the
    /// guard: nothing ran.
    pub fn refused(refusal: Refusal) -> Self {
        let mut failure = ExecFailure::new(ErrorType::Rejected, refusal.message.clone());
        failure.refusal = Some(refusal);
        failure
    }
}

/// Limits applied to every statement an executor runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ExecLimits {
    pub row_cap: u64,
    pub statement_timeout: Duration,
    /// The most bytes of values a result may hold: past it no further row is read and
    /// the result is `truncated`, so a few huge values cannot exhaust memory where a
    /// row cap alone would let them through.
    pub byte_cap: u64,
}

/// The default [`ExecLimits::byte_cap`]: 8 MiB of values, far above any answer a person
/// reads (200 rows of 40 KiB each) and far below what would strain a server.
pub(crate) const DEFAULT_RESULT_BYTE_CAP: u64 = 8 * 1024 * 1024;

/// What one value costs against [`ExecLimits::byte_cap`]: the length of text, eight
/// bytes for anything else (numbers, booleans, nulls, placeholders of the same order).
pub(crate) fn value_bytes(value: &JsonValue) -> u64 {
    match value {
        JsonValue::String(text) => text.len() as u64,
        JsonValue::Array(items) => items.iter().map(value_bytes).sum(),
        JsonValue::Object(fields) => fields
            .iter()
            .map(|(key, value)| key.len() as u64 + value_bytes(value))
            .sum(),
        _ => 8,
    }
}
