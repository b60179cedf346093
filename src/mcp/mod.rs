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

use crate::gate::OpeningGate;
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

/// Serves the gate `opening` finishes over stdin/stdout until the client closes the
/// connection.
///
/// The database has answered before this is called (a bad URL, an unreachable server or
/// a refused login is reported on stderr, with a non-zero exit, before a single protocol
/// byte is written). Its catalogs are read while the client initializes: a tool call
/// waits for them, and should reading them fail, every tool says why as a tool error
/// (and stderr says it once).
pub async fn serve_stdio(opening: OpeningGate, row_cap: u64) -> Result<(), McpError> {
    use rmcp::ServiceExt;

    let dialect = opening.dialect();
    let catalogs = tokio::spawn(async move {
        let finished = opening.finish().await;
        match &finished {
            Ok(gate) => log(&format!(
                "serving {} over stdio (tools: list_tables, describe_table, sample_rows, run_query)",
                gate.label()
            )),
            Err(error) => log(&format!("the database's catalogs could not be read: {error}")),
        }
        finished.map_err(|error| error.to_string())
    });
    let running = AskdbServer::new(server::PendingGate::new(catalogs), dialect, row_cap)
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
