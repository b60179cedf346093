//! `askdb mcp`: the gate's four functions served to any MCP client (Claude Desktop,
//! Claude Code, MCP Inspector, an agent framework) over stdio.
//!
//! This module owns the MCP protocol side and nothing else. [`server`] registers the
//! tools (list_tables, describe_table, sample_rows, run_query), whose bodies are the
//! gate's functions; [`content`] turns what the gate returns into tool results (a small
//! text table for people, the gate's JSON as structured content for programs, and
//! `isError` for refusals and failures). There is no second route to the database: a
//! tool can only do what the gate does, so the guard, the read-only connection, the row
//! cap, hidden tables and restricted columns hold whatever client is calling.
//!
//! stdout belongs to the protocol. Nothing here prints to it; the few lines askdb says
//! about itself go to stderr. rmcp is pinned to one minor in Cargo.toml and used only
//! inside this module, because its API changes often.

pub mod content;
pub mod server;

use std::io::Write;

use crate::gate::Gate;
pub use server::AskdbServer;

/// Why the MCP server stopped with an error. A client closing the connection is not
/// one: that is how a session ends.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("the MCP session did not start: {0}")]
    Initialize(String),
    #[error("the MCP session ended abnormally: {0}")]
    Session(String),
}

/// Serves `gate` over stdin/stdout until the client closes the connection.
///
/// The gate is opened by the caller first, so a bad URL or an unreachable database is
/// reported (on stderr, with a non-zero exit) before a single protocol byte is written.
pub async fn serve_stdio(gate: Gate) -> Result<(), McpError> {
    use rmcp::ServiceExt;

    let url = gate.label().to_string();
    log(&format!(
        "serving {url} over stdio (tools: list_tables, describe_table, sample_rows, run_query)"
    ));
    let running = AskdbServer::new(gate)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|error| McpError::Initialize(error.to_string()))?;
    let reason = running
        .waiting()
        .await
        .map_err(|error| McpError::Session(error.to_string()))?;
    log(&format!("session ended ({reason:?})"));
    Ok(())
}

/// One line about the server itself, to stderr (never stdout, which carries the
/// protocol). A failed write to stderr is ignored: there is nowhere else to report it.
fn log(message: &str) {
    let _ = writeln!(std::io::stderr(), "askdb mcp: {message}");
}
