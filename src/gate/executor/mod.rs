//! The executors: the second safety layer. Each runs one already-checked statement on
//! a connection that cannot write (SQLite: read-only file, query_only, authorizer,
//! progress deadline; PostgreSQL: READ ONLY transaction, statement timeout, always
//! rolled back), fetches at most cap + 1 rows to report truncation, and reports
//! failures with the database's own code. Executors are private to the gate: nothing
//! outside `crate::gate` can reach a database without passing the guard.

pub(crate) mod postgres;
pub(crate) mod sqlite;

use std::time::Duration;

use serde_json::Value as JsonValue;

use crate::gate::taxonomy::ErrorType;

/// Rows as the database returned them, before the gate wraps them.
#[derive(Debug, Clone, PartialEq)]
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
}

impl ExecFailure {
    pub fn new(error_type: ErrorType, message: impl Into<String>) -> Self {
        ExecFailure {
            error_type,
            message: message.into(),
            sqlstate: None,
            hint: None,
            position: None,
        }
    }
}

/// Limits applied to every statement an executor runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ExecLimits {
    pub row_cap: u64,
    pub statement_timeout: Duration,
}

/// Quotes an identifier for SQL the executors write themselves (introspection and
/// samples), doubling embedded quotes. Both dialects accept double quotes.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
