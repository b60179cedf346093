//! The gate: the one route to a database. Every caller (CLI, agent, MCP server, HTTP
//! API) uses these four functions and nothing else:
//!
//! | function | returns |
//! |---|---|
//! | [`Gate::list_tables`] | visible tables, one-line description, approximate row count |
//! | [`Gate::describe_table`] | columns, types, nullability, keys, as CREATE TABLE |
//! | [`Gate::sample_rows`] | a few real rows, text cut to 40 characters, restricted columns never shown |
//! | [`Gate::run_query`] | rows, or a structured error ([`QueryError`]), never a stack trace |
//!
//! `run_query` passes every statement through the [`guard`] first and runs only the
//! guard's re-rendered text on a read-only executor; [`Gate::run`] runs a
//! [`CheckedQuery`] the guard already made (only the guard can make one). The executors
//! are a private module: nothing outside the gate can name them. Hidden tables are never
//! listed or described; restricted columns never leave the gate.
//!
//! The gate opens a database that is already resolved ([`Database`]): building the demo
//! and choosing its notes happen above it, in [`crate::database`].

pub mod guard;
mod narrow;
pub mod taxonomy;
pub mod user;
mod verdicts;

mod executor;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value as JsonValue;

use crate::schema::{ForeignKey, SchemaNotes, TableSchema};
use crate::sql_text::quote_name;
use crate::text::{cut_text, redact_password};
use executor::mysql::MysqlExecutor;
use executor::postgres::PostgresExecutor;
use executor::sqlite::SqliteExecutor;
use executor::{ExecFailure, ExecLimits, RawRows, Stage};
pub use guard::{
    table_factor_table_alias, CheckedQuery, GuardPolicy, LimitAction, Refusal, RefusalReason,
    SqlDialect, RUNTIME_STACK_BYTES,
};
pub use narrow::{PolicyError, PolicyLimit, UserPolicy};
pub use taxonomy::ErrorType;
pub use verdicts::{database_check_counts, DatabaseCheckCounts};

/// The query-log table: always hidden, whatever the notes say.
pub const QUERY_LOG_TABLE: &str = "askdb_query_log";

/// Sample values longer than this many characters are cut.
pub const SAMPLE_TEXT_CHARS: usize = 40;

/// The most rows `sample_rows` returns.
pub const MAX_SAMPLE_ROWS: u32 = 20;

/// The default statement timeout.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

/// The harmless write [`Gate::probe_read_only`] attempts below the guard.
const READ_ONLY_PROBE_SQL: &str = "CREATE TEMP TABLE askdb_health_probe (x INTEGER)";

/// The same probe in MySQL's words (MySQL has no `TEMP` abbreviation).
const READ_ONLY_PROBE_SQL_MYSQL: &str = "CREATE TEMPORARY TABLE askdb_health_probe (x INTEGER)";

/// A database the gate can open: a SQLite file or a PostgreSQL URL. (The user-facing
/// URL, with `demo`, is [`crate::database::DatabaseUrl`]; it resolves to one of these.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    Sqlite(PathBuf),
    Postgres(String),
    /// A `mysql://USER:PASS@HOST:PORT/DB` URL (MySQL or MariaDB).
    Mysql(String),
}

impl fmt::Display for Database {
    /// Shows the location without any password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Database::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            Database::Postgres(url) | Database::Mysql(url) => f.write_str(&redact_password(url)),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error("cannot open the database: {0}")]
    Open(String),
    #[error("no table named {0:?}; `askdb schema tables` lists the tables")]
    UnknownTable(String),
    #[error("{0}")]
    Query(String),
}

/// Settings of one gate.
#[derive(Debug, Clone)]
pub struct GateOptions {
    pub row_cap: u64,
    pub statement_timeout: Duration,
    /// Notes for this database (the query log stays hidden either way).
    pub notes: Option<SchemaNotes>,
    /// Notes to use when `notes` is None and the database holds every table they
    /// describe (the demo's built-in notes, also when the demo is loaded into
    /// PostgreSQL); otherwise the database gets no notes.
    pub default_notes: Option<SchemaNotes>,
    /// How the database is named in messages and results (`demo`); by default its
    /// location without a password.
    pub label: Option<String>,
}

impl Default for GateOptions {
    fn default() -> Self {
        GateOptions {
            row_cap: guard::DEFAULT_ROW_CAP,
            statement_timeout: DEFAULT_STATEMENT_TIMEOUT,
            notes: None,
            default_notes: None,
            label: None,
        }
    }
}

/// One line of `list_tables`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableSummary {
    pub name: String,
    pub description: String,
    pub row_count: Option<i64>,
}

/// One column of `describe_table`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnDescription {
    pub name: String,
    pub data_type: String,
    pub nullable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// What `describe_table` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TableDescription {
    pub name: String,
    pub description: String,
    pub columns: Vec<ColumnDescription>,
    pub primary_key: Vec<String>,
    pub foreign_keys: Vec<ForeignKey>,
    pub row_count: Option<i64>,
    /// The table as CREATE TABLE, restricted columns left out.
    pub create_table: String,
}

/// Rows returned by `run_query` or `sample_rows`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryResult {
    /// Always true; lets a JSON reader tell rows from an error by one field.
    pub ok: bool,
    /// The statement that actually ran (re-rendered by the guard, LIMIT included).
    pub sql: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<JsonValue>>,
    pub row_count: usize,
    /// The result reached the row cap: more rows exist (the executor saw one more) or
    /// may exist (the guard imposed the cap and exactly that many rows came back).
    pub truncated: bool,
    pub limit: LimitAction,
    pub tables: Vec<String>,
    pub elapsed_ms: u64,
}

/// The structured error of `run_query`: what went wrong, in the database's words,
/// classified by the taxonomy. Never a stack trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueryError {
    /// Always false.
    pub ok: bool,
    pub error_type: ErrorType,
    pub message: String,
    pub hint: Option<String>,
    pub sqlstate: Option<String>,
    /// Why the guard refused, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<RefusalReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u32>,
    pub repairable: bool,
    /// The statement as it was sent to the database (re-rendered), or as received when
    /// the guard refused it.
    pub sql: String,
}

impl QueryError {
    /// The error a guard refusal becomes: `rejected`; `syntax_error` when the
    /// statement did not parse, and `unknown_column` when a qualified column resolved
    /// to nothing (worded as the database words it, so it is repaired the same way).
    pub fn from_refusal(refusal: Refusal, sql: &str) -> Self {
        let error_type = match refusal.reason {
            RefusalReason::ParseError => ErrorType::SyntaxError,
            RefusalReason::UnknownColumn => ErrorType::UnknownColumn,
            _ => ErrorType::Rejected,
        };
        QueryError {
            ok: false,
            error_type,
            message: refusal.message,
            hint: None,
            sqlstate: None,
            reason: Some(refusal.reason),
            position: None,
            repairable: refusal.repairable,
            sql: sql.to_string(),
        }
    }

    fn from_failure(failure: ExecFailure, sql: &str) -> Self {
        QueryError {
            ok: false,
            error_type: failure.error_type,
            repairable: failure.error_type.repairable(),
            message: failure.message,
            hint: failure.hint,
            sqlstate: failure.sqlstate,
            reason: None,
            position: failure.position,
            sql: sql.to_string(),
        }
    }
}

impl fmt::Display for QueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.error_type, self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

/// Rows of a benchmark gold query run as written ([`Gate::run_benchmark_gold_as_written`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GoldRows {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<JsonValue>>,
    /// More rows existed than the row cap allowed.
    pub truncated: bool,
}

/// What `run_query` returns: rows or a structured error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum QueryOutcome {
    Rows(QueryResult),
    Failed(QueryError),
}

impl QueryOutcome {
    pub fn is_ok(&self) -> bool {
        matches!(self, QueryOutcome::Rows(_))
    }
}

#[derive(Clone)]
enum Backend {
    Sqlite(Arc<SqliteExecutor>),
    Postgres(Arc<PostgresExecutor>),
    Mysql(Arc<MysqlExecutor>),
}

struct GateInner {
    label: String,
    backend: Backend,
    policy: Arc<GuardPolicy>,
    /// Visible tables with restricted columns removed, in name order.
    tables: Vec<TableSchema>,
    notes: SchemaNotes,
    limits: ExecLimits,
    /// Statements the database check accepted, so a repeat is not planned again.
    verdicts: verdicts::Verdicts,
}

/// The gate to one database. Cheap to clone; clones share the connections.
#[derive(Clone)]
pub struct Gate {
    inner: Arc<GateInner>,
}

/// A gate whose database has answered and whose catalogs are still to be read
/// ([`Gate::connect`]). `askdb mcp` answers its client's `initialize` while this
/// finishes: the catalog reads of a new PostgreSQL session are most of a cold start.
pub struct OpeningGate {
    dialect: SqlDialect,
    rest: std::pin::Pin<Box<dyn std::future::Future<Output = Result<Gate, GateError>> + Send>>,
}

impl OpeningGate {
    /// The SQL dialect of the database, known before its catalogs are read.
    pub fn dialect(&self) -> SqlDialect {
        self.dialect
    }

    /// Reads the catalogs and builds the gate.
    pub async fn finish(self) -> Result<Gate, GateError> {
        self.rest.await
    }
}

/// Leaves a table's restricted columns out of what a gate shows of it: the columns, every
/// unique constraint and foreign key that names one, and their place in the primary key
/// (which `describe_table`'s CREATE TABLE and `sample_rows`' order read). The gate as
/// opened and a user's narrowed gate both shape their tables here.
fn leave_out_restricted(table: &mut TableSchema, policy: &GuardPolicy) {
    let name = table.name.clone();
    let restricted_key = |columns: &[String]| {
        columns
            .iter()
            .any(|column| policy.is_restricted(&name, column))
    };
    table
        .columns
        .retain(|column| !policy.is_restricted(&name, &column.name));
    table.unique.retain(|columns| !restricted_key(columns));
    table
        .primary_key
        .retain(|column| !policy.is_restricted(&name, column));
    table
        .foreign_keys
        .retain(|key| !restricted_key(&key.columns));
}

impl Gate {
    /// Opens a database behind the gate: connects read-only, introspects the schema,
    /// applies the notes (restricted columns, hidden tables) and builds the guard's
    /// policy from what it found.
    pub async fn open(database: &Database, options: GateOptions) -> Result<Gate, GateError> {
        Self::connect(database, options).await?.finish().await
    }

    /// The first half of [`Gate::open`]: the database answers (a bad URL, an unreachable
    /// server or a refused login fail here), and what is left, reading the catalogs and
    /// building the guard's policy from them, is an [`OpeningGate`] to finish. A SQLite
    /// file is opened whole here (its catalogs are a local read).
    pub async fn connect(
        database: &Database,
        options: GateOptions,
    ) -> Result<OpeningGate, GateError> {
        let limits = ExecLimits {
            row_cap: options.row_cap,
            statement_timeout: options.statement_timeout,
            byte_cap: executor::DEFAULT_RESULT_BYTE_CAP,
        };
        let label = options
            .label
            .clone()
            .unwrap_or_else(|| database.to_string());
        match database {
            Database::Sqlite(path) => {
                let gate = Self::open_sqlite(label, path, options, limits).await?;
                Ok(OpeningGate {
                    dialect: SqlDialect::Sqlite,
                    rest: Box::pin(async move { Ok(gate) }),
                })
            }
            Database::Postgres(text) => {
                let executor = PostgresExecutor::connect(text)
                    .await
                    .map_err(|failure| GateError::Open(failure.message))?;
                let rest = async move {
                    let schema = executor
                        .introspect()
                        .await
                        .map_err(|failure| GateError::Open(failure.message))?;
                    let notes = choose_notes(&options, &schema);
                    // The restricted columns reach PostgreSQL through the guard (built in
                    // `assemble` from the same notes) and through the role's column
                    // grants (`askdb db setup`); the executor has no authorizer to hand
                    // them to.
                    Ok(Self::assemble(
                        label,
                        Backend::Postgres(Arc::new(executor)),
                        SqlDialect::Postgres,
                        schema,
                        notes,
                        options,
                        limits,
                    ))
                };
                Ok(OpeningGate {
                    dialect: SqlDialect::Postgres,
                    rest: Box::pin(rest),
                })
            }
            Database::Mysql(text) => {
                let executor = MysqlExecutor::connect(text)
                    .await
                    .map_err(|failure| GateError::Open(failure.message))?;
                let rest = async move {
                    let schema = executor
                        .introspect()
                        .await
                        .map_err(|failure| GateError::Open(failure.message))?;
                    let notes = choose_notes(&options, &schema);
                    Ok(Self::assemble(
                        label,
                        Backend::Mysql(Arc::new(executor)),
                        SqlDialect::Mysql,
                        schema,
                        notes,
                        options,
                        limits,
                    ))
                };
                Ok(OpeningGate {
                    dialect: SqlDialect::Mysql,
                    rest: Box::pin(rest),
                })
            }
        }
    }

    async fn open_sqlite(
        label: String,
        path: &Path,
        options: GateOptions,
        limits: ExecLimits,
    ) -> Result<Gate, GateError> {
        let path = path.to_path_buf();
        let choice = options.clone();
        let (executor, schema, notes) = tokio::task::spawn_blocking(move || {
            // Introspect first (its own connection) so the notes, and from them the
            // restricted columns the authorizer enforces, are known before the
            // locked-down connections open.
            let probe = SqliteExecutor::open(&path, BTreeMap::new(), BTreeSet::new())?;
            let schema = probe.introspect()?;
            drop(probe);
            let notes = choose_notes(&choice, &schema);
            let executor =
                SqliteExecutor::open(&path, restricted_map(&notes), hidden_tables(&notes))?;
            Ok::<_, ExecFailure>((executor, schema, notes))
        })
        .await
        .map_err(|error| GateError::Open(error.to_string()))?
        .map_err(|failure| GateError::Open(failure.message))?;
        Ok(Self::assemble(
            label,
            Backend::Sqlite(Arc::new(executor)),
            SqlDialect::Sqlite,
            schema,
            notes,
            options,
            limits,
        ))
    }

    fn assemble(
        label: String,
        backend: Backend,
        dialect: SqlDialect,
        schema: Vec<TableSchema>,
        notes: SchemaNotes,
        options: GateOptions,
        limits: ExecLimits,
    ) -> Gate {
        let mut policy = GuardPolicy::new(dialect);
        policy.row_cap = options.row_cap;
        let hidden = hidden_tables(&notes);
        for name in &hidden {
            policy.hide_table(name);
        }
        for (table, columns) in restricted_map(&notes) {
            for column in columns {
                policy.restrict_column(&table, &column);
            }
        }
        for function in &notes.allowed_functions {
            policy.allow_function(function);
        }
        let mut tables: Vec<TableSchema> = schema
            .into_iter()
            .filter(|table| !hidden.contains(&table.name.to_lowercase()))
            .collect();
        for table in &mut tables {
            policy.allow_table(&table.name, table.columns.iter().map(|c| c.name.as_str()));
            leave_out_restricted(table, &policy);
        }
        tables.sort_by(|a, b| a.name.cmp(&b.name));
        Gate {
            inner: Arc::new(GateInner {
                label,
                backend,
                policy: Arc::new(policy),
                tables,
                notes,
                limits,
                verdicts: verdicts::Verdicts::default(),
            }),
        }
    }

    /// How the database is named in messages (`demo`, `sqlite:PATH`, a PostgreSQL URL
    /// without its password).
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    pub fn dialect(&self) -> SqlDialect {
        self.inner.policy.dialect
    }

    pub fn notes(&self) -> &SchemaNotes {
        &self.inner.notes
    }

    pub fn policy(&self) -> &GuardPolicy {
        &self.inner.policy
    }

    /// The visible tables' structures, restricted columns removed.
    pub fn schema(&self) -> &[TableSchema] {
        &self.inner.tables
    }

    /// Visible tables with their descriptions and approximate row counts.
    pub fn list_tables(&self) -> Vec<TableSummary> {
        self.inner
            .tables
            .iter()
            .map(|table| TableSummary {
                name: table.name.clone(),
                description: self.table_description(&table.name),
                row_count: table.row_count,
            })
            .collect()
    }

    fn table_description(&self, table: &str) -> String {
        self.inner
            .notes
            .tables
            .get(&table.to_lowercase())
            .map(|note| note.description.clone())
            .unwrap_or_default()
    }

    fn find_table(&self, name: &str) -> Result<&TableSchema, GateError> {
        let wanted = name.trim().to_lowercase();
        self.inner
            .tables
            .iter()
            .find(|table| table.name.to_lowercase() == wanted)
            .ok_or_else(|| GateError::UnknownTable(name.to_string()))
    }

    /// One visible table's columns and keys, as structured data and as CREATE TABLE.
    pub fn describe_table(&self, name: &str) -> Result<TableDescription, GateError> {
        let table = self.find_table(name)?;
        let column_notes = self
            .inner
            .notes
            .tables
            .get(&table.name.to_lowercase())
            .map(|note| &note.columns);
        Ok(TableDescription {
            name: table.name.clone(),
            description: self.table_description(&table.name),
            columns: table
                .columns
                .iter()
                .map(|column| ColumnDescription {
                    name: column.name.clone(),
                    data_type: column.data_type.clone(),
                    nullable: column.nullable,
                    description: column_notes
                        .and_then(|notes| notes.get(&column.name.to_lowercase()))
                        .cloned(),
                })
                .collect(),
            primary_key: table.primary_key.clone(),
            foreign_keys: table.foreign_keys.clone(),
            row_count: table.row_count,
            create_table: table.create_table_sql(),
        })
    }

    /// A few real rows of a visible table, restricted columns left out and every text
    /// value cut to [`SAMPLE_TEXT_CHARS`] characters. The query goes through the guard
    /// like any other.
    ///
    /// Rows come in primary-key order where the table has a key (its shown columns: a
    /// restricted one is never part of it here, so never ordered by): without an
    /// order each engine returns its own (SQLite the file's, InnoDB the key's, PostgreSQL
    /// the heap's, which an UPDATE rearranges), and these rows are written into the
    /// model's prompt, so the same data would be shown differently on two engines and
    /// differently after a write on one. The key's index makes the order cheap.
    pub async fn sample_rows(&self, name: &str, rows: u32) -> Result<QueryResult, GateError> {
        let table = self.find_table(name)?;
        if table.columns.is_empty() {
            return Err(GateError::Query(format!(
                "table {} has no columns that may be shown",
                table.name
            )));
        }
        let quote = |name: &str| quote_name(self.dialect(), name);
        let columns: Vec<String> = table
            .columns
            .iter()
            .map(|column| quote(&column.name))
            .collect();
        let key: Vec<String> = table.primary_key.iter().map(|part| quote(part)).collect();
        let order = if key.is_empty() {
            String::new()
        } else {
            format!(" ORDER BY {}", key.join(", "))
        };
        let sql = format!(
            "SELECT {} FROM {}{order} LIMIT {}",
            columns.join(", "),
            quote(&table.name),
            rows.clamp(1, MAX_SAMPLE_ROWS)
        );
        match self.run_query(&sql).await {
            QueryOutcome::Rows(mut result) => {
                for row in &mut result.rows {
                    for value in row.iter_mut() {
                        if let JsonValue::String(text) = value {
                            *text = cut_text(text, SAMPLE_TEXT_CHARS);
                        }
                    }
                }
                Ok(result)
            }
            QueryOutcome::Failed(error) => Err(GateError::Query(error.to_string())),
        }
    }

    /// Checks a statement with the guard only, without running it.
    pub fn check(&self, sql: &str) -> Result<CheckedQuery, Refusal> {
        let policy = &self.inner.policy;
        if let Some(checked) = self.inner.verdicts.parsed_before(policy.id(), sql) {
            return Ok(checked);
        }
        let checked = guard::check(sql, policy)?;
        self.inner.verdicts.remember_parsed(sql, &checked);
        Ok(checked)
    }

    /// Runs one statement through the whole gate: guard, then the read-only executor.
    pub async fn run_query(&self, sql: &str) -> QueryOutcome {
        match self.check(sql) {
            Ok(checked) => self.run(&checked).await,
            Err(refusal) => QueryOutcome::Failed(QueryError::from_refusal(refusal, sql)),
        }
    }

    /// Runs a query the guard already checked, keeping its limit facts (so a result that
    /// stopped at the forced cap says `truncated`). A query checked under another gate's
    /// policy is refused, never run: its tables and columns were checked against another
    /// database.
    pub async fn run(&self, checked: &CheckedQuery) -> QueryOutcome {
        if checked.policy_id() != self.inner.policy.id() {
            return QueryOutcome::Failed(QueryError::from_refusal(
                Refusal::foreign_policy(),
                checked.sql(),
            ));
        }
        let started = Instant::now();
        match self.judged(checked, Stage::Execute).await {
            Ok(raw) => QueryOutcome::Rows(QueryResult {
                ok: true,
                row_count: raw.rows.len(),
                truncated: raw.truncated || reached_forced_cap(checked.limit(), raw.rows.len()),
                columns: raw.columns,
                rows: raw.rows,
                limit: checked.limit(),
                tables: checked.tables().to_vec(),
                elapsed_ms: started.elapsed().as_millis() as u64,
                sql: checked.sql().to_string(),
            }),
            Err(ExecFailure {
                refusal: Some(refusal),
                ..
            }) => QueryOutcome::Failed(QueryError::from_refusal(refusal, checked.sql())),
            Err(failure) => QueryOutcome::Failed(QueryError::from_failure(failure, checked.sql())),
        }
    }

    /// The guard's database check of a checked query, without running it: the database
    /// compiles the text (PostgreSQL plans it; SQLite prepares it) and the guard judges
    /// what it resolved to. A statement accepted before under this policy is accepted
    /// from memory, as `run` would.
    pub async fn verify(&self, checked: &CheckedQuery) -> Result<(), Refusal> {
        if checked.policy_id() != self.inner.policy.id() {
            return Err(Refusal::foreign_policy());
        }
        match self.judged(checked, Stage::Verdict).await {
            Ok(_) => Ok(()),
            Err(ExecFailure {
                refusal: Some(refusal),
                ..
            }) => Err(refusal),
            // Not a verdict (the database could not be asked, or the statement does not
            // compile): nothing was accepted, and running it would report the error.
            Err(failure) => Err(Refusal::unreadable_resolution(&failure.message)),
        }
    }

    /// The database check of a checked query, from memory when this policy accepted the
    /// text before, then (at `Stage::Execute`) the run. The one place the memory is
    /// filled and a disagreement between the two checks is counted.
    async fn judged(&self, checked: &CheckedQuery, stage: Stage) -> Result<RawRows, ExecFailure> {
        let policy = &self.inner.policy;
        let verify = (!self
            .inner
            .verdicts
            .accepted_before(policy.id(), checked.sql()))
        .then(|| Arc::clone(policy));
        if verify.is_none() && stage == Stage::Verdict {
            return Ok(RawRows::default());
        }
        let verified = verify.is_some();
        let outcome = self.execute_with(checked.sql(), verify, stage).await;
        match &outcome {
            Ok(_) if verified => self
                .inner
                .verdicts
                .remember_accepted(policy.id(), checked.sql()),
            // The parser check accepted it; the database's own resolution did not.
            Err(ExecFailure {
                refusal: Some(_), ..
            }) => self.inner.verdicts.count_disagreement(),
            _ => {}
        }
        outcome
    }

    /// Runs text on the executor with no check of any kind. Private: the only callers
    /// are the doors below and the layer tests, which switch the guard off on purpose.
    async fn execute(&self, sql: &str) -> Result<RawRows, ExecFailure> {
        self.execute_with(sql, None, Stage::Execute).await
    }

    /// Runs text on the executor; with `verify`, the database first compiles it and the
    /// guard judges what the database resolved against that policy, and nothing runs on
    /// a refusal. At `Stage::Verdict` nothing runs at all.
    async fn execute_with(
        &self,
        sql: &str,
        verify: Option<Arc<GuardPolicy>>,
        stage: Stage,
    ) -> Result<RawRows, ExecFailure> {
        let limits = self.inner.limits;
        match &self.inner.backend {
            Backend::Sqlite(executor) => {
                let executor = Arc::clone(executor);
                let sql = sql.to_string();
                tokio::task::spawn_blocking(move || {
                    if let Some(policy) = verify {
                        sqlite_verdict(&executor, &sql, &policy)?;
                    }
                    match stage {
                        Stage::Verdict => Ok(RawRows::default()),
                        Stage::Execute => executor.execute(&sql, limits),
                    }
                })
                .await
                .unwrap_or_else(|error| {
                    Err(ExecFailure::new(
                        ErrorType::Unknown,
                        format!("the query task failed: {error}"),
                    ))
                })
            }
            Backend::Postgres(executor) => {
                executor
                    .execute(sql, limits, verify.as_deref(), stage)
                    .await
            }
            Backend::Mysql(executor) => {
                executor
                    .execute(sql, limits, verify.as_deref(), stage)
                    .await
            }
        }
    }

    /// The one door below the guard that takes text from outside the gate: a
    /// benchmark's gold query, run as written on the same read-only executor, so the
    /// guard-equivalence check (`eval::guard_check`, its only caller; an architecture
    /// test holds it to that) can compare it with the guard's re-rendering. Gold text
    /// comes from the benchmark files, never from a model or a user.
    pub async fn run_benchmark_gold_as_written(&self, gold: &str) -> Result<GoldRows, QueryError> {
        self.execute(gold)
            .await
            .map(|raw| GoldRows {
                columns: raw.columns,
                rows: raw.rows,
                truncated: raw.truncated,
            })
            .map_err(|failure| QueryError::from_failure(failure, gold))
    }

    /// Proves, rather than assumes, that the connection cannot write (the health check
    /// of `askdb serve`): sends one harmless write, a temporary table, straight to the
    /// executor below the guard, so what is tested is the read-only connection (and on
    /// PostgreSQL the role), not the guard. `Ok(true)`: the database refused it as a
    /// write; `Ok(false)`: it went through, so a read-only layer is missing (PostgreSQL
    /// still rolls the transaction back; SQLite is asked to drop the table again);
    /// `Err`: the database could not be asked or failed in another way. The statement is
    /// a fixed constant, never user or model text.
    pub async fn probe_read_only(&self) -> Result<bool, GateError> {
        let probe = match self.dialect() {
            SqlDialect::Mysql => READ_ONLY_PROBE_SQL_MYSQL,
            SqlDialect::Postgres | SqlDialect::Sqlite => READ_ONLY_PROBE_SQL,
        };
        match self.execute(probe).await {
            Ok(_) => {
                if self.dialect() == SqlDialect::Sqlite {
                    // Best effort: the verdict is already "writable" either way.
                    let _ = self
                        .execute("DROP TABLE IF EXISTS temp.askdb_health_probe")
                        .await;
                }
                Ok(false)
            }
            Err(failure) => match failure.error_type {
                ErrorType::ReadOnlyViolation | ErrorType::PermissionDenied => Ok(true),
                ErrorType::ConnectionError | ErrorType::Busy | ErrorType::Timeout => {
                    Err(GateError::Open(failure.message))
                }
                _ => Err(GateError::Query(format!(
                    "the read-only probe failed in an unexpected way ({}): {}",
                    failure.error_type, failure.message
                ))),
            },
        }
    }
}

/// The guard's verdict on what SQLite resolves a statement to, as an execution failure
/// carrying the refusal; a statement SQLite cannot compile is refused by its record
/// first, and an unknown table in it in the words of any unknown table.
fn sqlite_verdict(
    executor: &SqliteExecutor,
    sql: &str,
    policy: &GuardPolicy,
) -> Result<(), ExecFailure> {
    let (resolution, not_compiled) = executor.resolve(sql)?;
    guard::resolution::verdict(&resolution, policy, "").map_err(ExecFailure::refused)?;
    match not_compiled {
        None => Ok(()),
        Some(failure) => Err(match sqlite_missing_table(&failure) {
            // A table the policy holds as visible and the file lacks is a schema that
            // changed under the gate (drift), not a name the parser check missed: the
            // database's own error stands, repairable, and no disagreement is counted.
            Some(name) if !policy.is_visible(name) => {
                ExecFailure::refused(Refusal::missing_table(name, policy))
            }
            _ => failure,
        }),
    }
}

/// The table SQLite's "no such table: main.x" names, without its database.
fn sqlite_missing_table(failure: &ExecFailure) -> Option<&str> {
    if failure.error_type != ErrorType::UnknownTable {
        return None;
    }
    let name = failure.message.strip_prefix("no such table: ")?;
    Some(name.strip_prefix("main.").unwrap_or(name))
}

/// Whether a result stopped at a LIMIT the guard imposed, so more rows may exist.
fn reached_forced_cap(limit: LimitAction, rows: usize) -> bool {
    match limit {
        LimitAction::Capped(cap) | LimitAction::Wrapped(cap) => rows as u64 >= cap,
        LimitAction::Kept(_) => false,
    }
}

/// The notes to use: explicit ones, else the default notes when the database holds
/// every table they describe, else none.
fn choose_notes(options: &GateOptions, schema: &[TableSchema]) -> SchemaNotes {
    if let Some(notes) = &options.notes {
        return notes.clone();
    }
    let Some(default) = &options.default_notes else {
        return SchemaNotes::default();
    };
    let present: BTreeSet<String> = schema
        .iter()
        .map(|table| table.name.to_lowercase())
        .collect();
    let applies =
        !default.tables.is_empty() && default.tables.keys().all(|table| present.contains(table));
    if applies {
        default.clone()
    } else {
        SchemaNotes::default()
    }
}

/// The tables no query may read, lower-cased: the notes' hidden tables and always the
/// query log. The guard refuses them and the SQLite authorizer denies reading them.
fn hidden_tables(notes: &SchemaNotes) -> BTreeSet<String> {
    notes
        .hidden_tables
        .iter()
        .map(|name| name.to_lowercase())
        .chain(std::iter::once(QUERY_LOG_TABLE.to_string()))
        .collect()
}

/// `table.column` notes as a map from table to its restricted columns.
fn restricted_map(notes: &SchemaNotes) -> BTreeMap<String, BTreeSet<String>> {
    let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in &notes.restricted_columns {
        // The column is after the last dot: `schema.table.column` names a table outside
        // the default schema.
        if let Some((table, column)) = entry.rsplit_once('.') {
            map.entry(table.trim().to_lowercase())
                .or_default()
                .insert(column.trim().to_lowercase());
        }
    }
    map
}

#[cfg(test)]
mod mysql_role_tests;
#[cfg(test)]
mod mysql_tests;
#[cfg(test)]
mod postgres_tests;
#[cfg(test)]
mod tests;
