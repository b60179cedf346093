//! What the gate returns, as MCP tool results. Every result carries both forms a
//! client may want: a text block for a person or a model to read (a small table from
//! [`crate::text_table`], the SQL that ran) and structured content holding the gate's
//! own JSON ([`QueryResult`], [`QueryError`], [`TableDescription`], the table list),
//! so a program reads the same fields `askdb --json` prints.
//!
//! A refused or failed query, and an unknown table, become a tool error result
//! (`isError: true`) with the structured error, never a protocol error and never a
//! stack trace: the caller's model sees why and can repair its query.

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::json;

use crate::gate::{
    ErrorType, GateError, QueryError, QueryOutcome, QueryResult, TableDescription, TableSummary,
    SAMPLE_TEXT_CHARS,
};
use crate::text_table;

/// list_tables: one line per visible table, and `{"tables": [...]}` (structured
/// content must be a JSON object). Not a text table: its cells are cut at 60
/// characters, and a table's description (its conventions, what it does not hold) is
/// what a model needs whole.
pub fn tables(tables: &[TableSummary]) -> CallToolResult {
    let mut text = format!("{}:\n", count(tables.len(), "table"));
    for table in tables {
        let rows = table.row_count.map_or_else(
            || "rows unknown".to_string(),
            |rows| format!("~{rows} rows"),
        );
        text.push_str(&format!("- {} ({rows})", table.name));
        if !table.description.is_empty() {
            text.push_str(&format!(": {}", table.description));
        }
        text.push('\n');
    }
    success(text, json!({ "tables": tables }))
}

/// describe_table: the table as the CLI shows it (description, CREATE TABLE, column
/// notes) and the gate's [`TableDescription`].
pub fn description(described: Result<TableDescription, GateError>) -> CallToolResult {
    let table = match described {
        Ok(table) => table,
        Err(error) => return gate_error(&error),
    };
    let mut text = String::new();
    if !table.description.is_empty() {
        text.push_str(&format!("-- {}\n", table.description));
    }
    text.push_str(&table.create_table);
    for column in &table.columns {
        if let Some(note) = &column.description {
            text.push_str(&format!("\n-- {}: {note}", column.name));
        }
    }
    success(text, &table)
}

/// sample_rows: the rows as a text table and the gate's [`QueryResult`].
pub fn sample(sampled: Result<QueryResult, GateError>) -> CallToolResult {
    match sampled {
        Ok(result) => {
            let text = format!(
                "{}({}; text cut to {SAMPLE_TEXT_CHARS} characters)\nran: {}",
                text_table::render(&result.columns, &result.rows),
                count(result.row_count, "row"),
                result.sql
            );
            success(text, &result)
        }
        Err(error) => gate_error(&error),
    }
}

/// run_query: rows ([`QueryResult`]) or the structured error ([`QueryError`]) as a tool
/// error.
pub fn outcome(outcome: QueryOutcome) -> CallToolResult {
    match outcome {
        QueryOutcome::Rows(result) => {
            let more = if result.truncated {
                "; reached the row cap, more rows may exist"
            } else {
                ""
            };
            let text = format!(
                "{}({}{more})\nran: {}",
                text_table::render(&result.columns, &result.rows),
                count(result.row_count, "row"),
                result.sql
            );
            success(text, &result)
        }
        QueryOutcome::Failed(error) => query_error(&error),
    }
}

fn query_error(error: &QueryError) -> CallToolResult {
    let mut text = format!("error: {error}");
    if let Some(reason) = &error.reason {
        text.push_str(&format!("\nreason: {}", reason.as_str()));
    }
    text.push_str(&format!(
        "\nrepairable: {}\nsql: {}",
        error.repairable, error.sql
    ));
    failure(text, error)
}

/// Any tool, when the database's catalogs could not be read after it answered: the
/// reason, as a tool error in the shape of a [`QueryError`], not repairable by a query.
pub fn unavailable(why: &str) -> CallToolResult {
    failure(
        format!("error: {why}"),
        json!({
            "ok": false,
            "error_type": ErrorType::ConnectionError.as_str(),
            "message": why,
            "repairable": false,
        }),
    )
}

/// A gate error of describe_table or sample_rows, in the shape of a [`QueryError`]
/// (`ok`, `error_type`, `message`, `repairable`) so a client handles both alike.
fn gate_error(error: &GateError) -> CallToolResult {
    let (error_type, message) = match error {
        // The gate's own wording points at the CLI; an MCP client has list_tables.
        GateError::UnknownTable(name) => (
            ErrorType::UnknownTable,
            format!("no table named {name:?}; list_tables lists the tables"),
        ),
        other => (ErrorType::Unknown, other.to_string()),
    };
    let repairable = error_type.repairable();
    failure(
        format!("error: {message}"),
        json!({
            "ok": false,
            "error_type": error_type,
            "message": message,
            "repairable": repairable,
        }),
    )
}

/// "1 row", "2 rows".
fn count(n: usize, noun: &str) -> String {
    crate::text::counted(n as u64, noun, &format!("{noun}s"))
}

fn success(text: String, structured: impl Serialize) -> CallToolResult {
    match serde_json::to_value(structured) {
        Ok(structured) => {
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            result.structured_content = Some(structured);
            result
        }
        Err(error) => unencodable(&error),
    }
}

fn failure(text: String, structured: impl Serialize) -> CallToolResult {
    match serde_json::to_value(structured) {
        Ok(structured) => {
            let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
            result.structured_content = Some(structured);
            result
        }
        Err(error) => unencodable(&error),
    }
}

/// The gate's types serialize infallibly (strings, numbers, JSON values); should that
/// ever change, the client gets a tool error saying so rather than a dropped reply.
fn unencodable(error: &serde_json::Error) -> CallToolResult {
    let message = format!("cannot encode the result as JSON: {error}");
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!("error: {message}"))]);
    result.structured_content = Some(json!({
        "ok": false,
        "error_type": ErrorType::Unknown,
        "message": message,
        "repairable": false,
    }));
    result
}
