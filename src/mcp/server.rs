//! The MCP tool registry: the gate's four functions as MCP tools, with their
//! descriptions and input schemas. Each tool body calls exactly one gate function and
//! hands the answer to [`super::content`]; nothing else happens here, so a tool can do
//! no more than the gate allows.

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ServerHandler};
use schemars::JsonSchema;
use serde::Deserialize;

use super::content;
use crate::gate::{Gate, SqlDialect, MAX_SAMPLE_ROWS};

/// Input of describe_table.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TableName {
    /// A table name exactly as list_tables shows it (case does not matter).
    pub name: String,
}

/// Input of sample_rows.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SampleRequest {
    /// A table name exactly as list_tables shows it (case does not matter).
    pub name: String,
    /// How many rows to show, 1 to 20.
    #[serde(default = "default_sample_rows")]
    #[schemars(range(min = 1, max = MAX_SAMPLE_ROWS))]
    pub n: u32,
}

fn default_sample_rows() -> u32 {
    3
}

/// Input of run_query.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct QueryRequest {
    // A doc comment would keep its line break in the schema's description.
    #[schemars(
        description = "Exactly one read-only SQL query (SELECT, or WITH ... SELECT) in the database's dialect; a LIMIT is forced onto it."
    )]
    pub sql: String,
}

/// The MCP server: one gate, and the router built from the tools below.
#[derive(Clone)]
pub struct AskdbServer {
    gate: Gate,
    tool_router: ToolRouter<Self>,
}

impl AskdbServer {
    pub fn new(gate: Gate) -> Self {
        AskdbServer {
            gate,
            tool_router: Self::tool_router(),
        }
    }
}

#[tool_router]
impl AskdbServer {
    #[tool(
        description = "List the tables you may query, with a one-line description and an approximate row count each. Start here.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_tables(&self) -> CallToolResult {
        content::tables(&self.gate.list_tables())
    }

    #[tool(
        description = "Describe one table: its columns with types and nullability, primary and foreign keys, notes on what columns mean, and the table as CREATE TABLE. Columns you may not read are left out.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn describe_table(&self, params: Parameters<TableName>) -> CallToolResult {
        content::description(self.gate.describe_table(&params.0.name))
    }

    #[tool(
        description = "Show a few real rows of one table (n rows, default 3, at most 20) to see what the values look like. Text is cut to 40 characters; columns you may not read are left out.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn sample_rows(&self, params: Parameters<SampleRequest>) -> CallToolResult {
        let SampleRequest { name, n } = params.0;
        content::sample(self.gate.sample_rows(&name, n).await)
    }

    #[tool(
        description = "Run one read-only SQL query (SELECT or WITH ... SELECT) and get its rows: columns, row_count, truncated (true when the row cap was reached, so more rows may exist) and sql, the statement that actually ran with its forced LIMIT. Anything else (writes, several statements, system catalogs, hidden tables, restricted columns, dangerous functions) is refused with a structured error (error_type, reason, message, repairable) as a tool error; a failing query returns the database's message the same way.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn run_query(&self, params: Parameters<QueryRequest>) -> CallToolResult {
        content::outcome(self.gate.run_query(&params.0.sql).await)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for AskdbServer {
    fn get_info(&self) -> ServerConfig {
        let dialect = match self.gate.dialect() {
            SqlDialect::Postgres => "PostgreSQL",
            SqlDialect::Sqlite => "SQLite",
        };
        let instructions = format!(
            "askdb is a read-only window onto a {dialect} database. Call list_tables, then \
             describe_table (and sample_rows to see values) for the tables you need, then \
             run_query with one SELECT in {dialect} SQL. At most {cap} rows come back (the \
             LIMIT is forced; truncated says when the cap was reached). Samples show at most \
             {MAX_SAMPLE_ROWS} rows. Some tables and columns are not available at all; a \
             refused or failing query returns a structured error saying why.",
            cap = self.gate.policy().row_cap,
        );
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("askdb", env!("CARGO_PKG_VERSION"))
                    .with_title("askdb: safe SQL over the gate"),
            )
            .with_instructions(instructions)
    }
}
