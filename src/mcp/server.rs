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
use std::sync::Arc;

use tokio::sync::{Mutex, OnceCell};
use tokio::task::JoinHandle;

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

/// The task that reads the catalogs and builds the gate (or says why it could not).
type CatalogRead = JoinHandle<Result<Gate, String>>;

/// The gate while its catalogs are read: the first tool call waits for them, later calls
/// find the gate (or the reason there is none) at once.
#[derive(Clone)]
pub struct PendingGate {
    gate: Arc<OnceCell<Result<Gate, String>>>,
    reading: Arc<Mutex<Option<CatalogRead>>>,
}

impl PendingGate {
    /// The gate the task `reading` builds.
    pub fn new(reading: CatalogRead) -> Self {
        PendingGate {
            gate: Arc::new(OnceCell::new()),
            reading: Arc::new(Mutex::new(Some(reading))),
        }
    }

    /// A gate already open (the tests' way to skip the catalog task).
    #[cfg(test)]
    pub fn ready(gate: Gate) -> Self {
        PendingGate {
            gate: Arc::new(OnceCell::new_with(Some(Ok(gate)))),
            reading: Arc::new(Mutex::new(None)),
        }
    }

    async fn get(&self) -> Result<&Gate, &str> {
        self.gate
            .get_or_init(|| async {
                let reading = self.reading.lock().await.take();
                match reading {
                    Some(task) => task.await.unwrap_or_else(|error| {
                        Err(format!("reading the database's catalogs failed: {error}"))
                    }),
                    None => Err("the database's catalogs were never read".to_string()),
                }
            })
            .await
            .as_ref()
            .map_err(String::as_str)
    }
}

/// The MCP server: one gate, and the router built from the tools below.
#[derive(Clone)]
pub struct AskdbServer {
    gate: PendingGate,
    /// Known before the catalogs are read, for `initialize`.
    dialect: SqlDialect,
    row_cap: u64,
    tool_router: ToolRouter<Self>,
}

impl AskdbServer {
    pub fn new(gate: PendingGate, dialect: SqlDialect, row_cap: u64) -> Self {
        AskdbServer {
            gate,
            dialect,
            row_cap,
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
        match self.gate.get().await {
            Ok(gate) => content::tables(&gate.list_tables()),
            Err(why) => content::unavailable(why),
        }
    }

    #[tool(
        description = "Describe one table: its columns with types and nullability, primary and foreign keys, notes on what columns mean, and the table as CREATE TABLE. Columns you may not read are left out.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn describe_table(&self, params: Parameters<TableName>) -> CallToolResult {
        match self.gate.get().await {
            Ok(gate) => content::description(gate.describe_table(&params.0.name)),
            Err(why) => content::unavailable(why),
        }
    }

    #[tool(
        description = "Show a few real rows of one table (n rows, default 3, at most 20) to see what the values look like. Text is cut to 40 characters; columns you may not read are left out.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn sample_rows(&self, params: Parameters<SampleRequest>) -> CallToolResult {
        let SampleRequest { name, n } = params.0;
        match self.gate.get().await {
            Ok(gate) => content::sample(gate.sample_rows(&name, n).await),
            Err(why) => content::unavailable(why),
        }
    }

    #[tool(
        description = "Run one read-only SQL query (SELECT or WITH ... SELECT) and get its rows: columns, row_count, truncated (true when the row cap was reached, so more rows may exist) and sql, the statement that actually ran with its forced LIMIT. Anything else (writes, several statements, system catalogs, hidden tables, restricted columns, dangerous functions) is refused with a structured error (error_type, reason, message, repairable) as a tool error; a failing query returns the database's message the same way.",
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn run_query(&self, params: Parameters<QueryRequest>) -> CallToolResult {
        match self.gate.get().await {
            Ok(gate) => content::outcome(gate.run_query(&params.0.sql).await),
            Err(why) => content::unavailable(why),
        }
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for AskdbServer {
    fn get_info(&self) -> ServerConfig {
        let dialect = match self.dialect {
            SqlDialect::Postgres => "PostgreSQL",
            SqlDialect::Sqlite => "SQLite",
            SqlDialect::Mysql => "MySQL",
        };
        let instructions = format!(
            "askdb is a read-only window onto a {dialect} database. Call list_tables, then \
             describe_table (and sample_rows to see values) for the tables you need, then \
             run_query with one SELECT in {dialect} SQL. At most {cap} rows come back (the \
             LIMIT is forced; truncated says when the cap was reached). Samples show at most \
             {MAX_SAMPLE_ROWS} rows. Some tables and columns are not available at all; a \
             refused or failing query returns a structured error saying why.",
            cap = self.row_cap,
        );
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("askdb", env!("CARGO_PKG_VERSION"))
                    .with_title("askdb: safe SQL over the gate"),
            )
            .with_instructions(instructions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gate::{Database, GateOptions};

    async fn one_table_gate(dir: &std::path::Path) -> Gate {
        let path = dir.join("one.sqlite");
        let connection = rusqlite::Connection::open(&path).expect("creates the file");
        connection
            .execute_batch("CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (7);")
            .expect("the table is written");
        drop(connection);
        Gate::open(&Database::Sqlite(path), GateOptions::default())
            .await
            .expect("the gate opens")
    }

    /// The tool result as the client reads it: whether it is an error, and its text.
    fn seen(result: &CallToolResult) -> (bool, String) {
        let json = serde_json::to_value(result).expect("serializes");
        let error = json["isError"].as_bool().unwrap_or(false);
        (
            error,
            json["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        )
    }

    #[tokio::test]
    async fn a_tool_call_waits_for_the_catalogs_then_uses_the_gate() {
        let dir = tempfile::tempdir().expect("temp dir");
        let gate = one_table_gate(dir.path()).await;
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let reading = tokio::spawn(async move {
            let _ = released.await;
            Ok(gate)
        });
        let server = AskdbServer::new(PendingGate::new(reading), SqlDialect::Sqlite, 200);
        let call = tokio::spawn({
            let server = server.clone();
            async move {
                server
                    .run_query(Parameters(QueryRequest {
                        sql: "SELECT id FROM t".to_string(),
                    }))
                    .await
            }
        });
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!call.is_finished(), "the call waits for the catalogs");
        release.send(()).expect("the reader waits");
        let (error, text) = seen(&call.await.expect("the call ends"));
        assert!(!error, "{text}");
        assert!(text.contains('7'), "{text}");
        // Later calls find the gate at once.
        let (error, text) = seen(&server.list_tables().await);
        assert!(!error && text.contains("- t"), "{text}");
    }

    #[tokio::test]
    async fn catalogs_that_could_not_be_read_are_every_tools_error() {
        let reading =
            tokio::spawn(async { Err("permission denied for table pg_class".to_string()) });
        let server = AskdbServer::new(PendingGate::new(reading), SqlDialect::Postgres, 200);
        let calls = [
            server.list_tables().await,
            server
                .run_query(Parameters(QueryRequest {
                    sql: "SELECT 1".to_string(),
                }))
                .await,
            server.list_tables().await,
        ];
        for result in &calls {
            let (error, text) = seen(result);
            assert!(error, "{text}");
            assert!(
                text.contains("permission denied for table pg_class"),
                "{text}"
            );
        }
        let json = serde_json::to_value(&calls[1]).expect("serializes");
        assert_eq!(json["structuredContent"]["error_type"], "connection_error");
        assert_eq!(json["structuredContent"]["repairable"], false);
    }

    #[tokio::test]
    async fn a_ready_gate_answers_without_waiting() {
        let dir = tempfile::tempdir().expect("temp dir");
        let gate = one_table_gate(dir.path()).await;
        let server = AskdbServer::new(PendingGate::ready(gate), SqlDialect::Sqlite, 200);
        let (error, text) = seen(&server.list_tables().await);
        assert!(!error && text.contains("- t"), "{text}");
    }
}
