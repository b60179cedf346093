//! The query log: one row per question answered through `POST /api/ask` (evaluation
//! runs never write it), kept for monitoring. On PostgreSQL, MySQL and MariaDB it is
//! written over a connection of its own as the insert-only `askdb_log` role or user
//! (`ASKDB_LOG_DATABASE_URL`; MySQL's writer in `mysql.rs`), never by the gate's
//! read-only connection; for SQLite databases (the demo included, whose file stays
//! read-only) into a log database in askdb's data directory.
//!
//! Writing happens off the request path: [`QueryLog::record`] puts the row on a bounded
//! channel and returns at once; a background task inserts it. A row that cannot be
//! written (the channel full, the database down, the grant revoked) never fails the
//! answer: it is counted ([`LogCounters`]) and health shows it. Like `askdb db setup`
//! this is administration outside the gate: it writes only its own table, with the
//! extended protocol and bound parameters, and never runs model or user SQL.

mod mysql;
pub mod stats;
pub mod usage;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::mpsc;

use crate::gate::QUERY_LOG_TABLE;
use crate::text::redact_password;
pub use mysql::mysql_create_sql;

/// The environment variable naming the log role's URL (PostgreSQL, MySQL and MariaDB
/// databases).
pub const LOG_DATABASE_URL_ENV: &str = "ASKDB_LOG_DATABASE_URL";

/// The SQLite log's file name in askdb's data directory.
pub const SQLITE_LOG_FILE: &str = "query_log.sqlite";

/// Rows waiting to be written; past this, a row is dropped and counted as failed.
pub const QUEUE_CAPACITY: usize = 1024;

/// The longest one connection attempt or write may take.
const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// The columns `askdb db setup` adds to a PostgreSQL log beyond the original ones
/// (`id`, `asked_at`, `question`, `sql`, `decision`, `error_type`, `latency_ms`).
pub const POSTGRES_LOG_COLUMNS: [(&str, &str); 14] = [
    ("attempts", "integer"),
    ("error_types", "text"),
    ("row_count", "bigint"),
    ("input_tokens", "bigint"),
    ("output_tokens", "bigint"),
    ("cost_usd", "double precision"),
    ("model", "text"),
    ("trace_id", "text"),
    ("mode", "text"),
    ("conversation_id", "text"),
    ("turn", "integer"),
    ("examples", "text"),
    ("rerun_example", "bigint"),
    ("user_name", "text"),
];

const INSERT_COLUMNS: &str = "asked_at, question, sql, decision, error_type, latency_ms, \
     attempts, error_types, row_count, input_tokens, output_tokens, cost_usd, model, \
     trace_id, mode, conversation_id, turn, examples, rerun_example, user_name";

/// One answered question.
#[derive(Debug, Clone, Serialize)]
pub struct LogRecord {
    pub question: String,
    /// When the question arrived.
    #[serde(skip)]
    pub asked_at: SystemTime,
    /// The SQL that produced the answer, as it ran.
    pub sql: Option<String>,
    pub attempts: u32,
    /// The error type of each failed attempt, in order.
    pub error_types: Vec<String>,
    /// `answer`, `clarify`, `decline` or `give_up`.
    pub decision: String,
    pub row_count: u64,
    pub latency_ms: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub model: Option<String>,
    pub trace_id: Option<String>,
    /// `agent` or `baseline`.
    pub mode: String,
    /// The conversation the question was asked in, and its turn there (1 for the
    /// first), when it was asked through the HTTP API.
    pub conversation_id: Option<String>,
    pub turn: Option<u32>,
    /// The ids of the verified examples the question used (shown to the model or run
    /// again), what `askdb examples` prunes by.
    pub examples: Vec<i64>,
    /// The verified example whose SQL answered without the model, when one did.
    pub rerun_example: Option<i64>,
    /// The user `askdb serve` signed the question in as; None without users.
    pub user: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("the query log URL is not valid: {0}")]
    BadUrl(String),
    #[error("cannot connect to the query log as the log role: {0}")]
    Connect(String),
    #[error("cannot write the query log: {0}")]
    Write(String),
    #[error("cannot read the query log: {0}")]
    Read(String),
    #[error("the query log did not answer within {} s", WRITE_TIMEOUT.as_secs())]
    Timeout,
}

/// Where the log is written.
#[derive(Clone, PartialEq, Eq)]
pub enum LogTarget {
    /// The log role's URL.
    Postgres(String),
    /// The log user's `mysql://` (or `mariadb://`) URL.
    Mysql(String),
    /// askdb's own SQLite log file; `database` names the database the questions were about.
    Sqlite { path: PathBuf, database: String },
}

impl std::fmt::Debug for LogTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl LogTarget {
    /// The SQLite log in askdb's data directory, for questions about `database`.
    pub fn sqlite_in_data_dir(database: &str) -> LogTarget {
        LogTarget::Sqlite {
            path: crate::home::data_dir().join(SQLITE_LOG_FILE),
            database: database.to_string(),
        }
    }

    /// The log target a log user's URL names: MySQL for `mysql://` and `mariadb://`,
    /// else PostgreSQL.
    pub fn for_url(url: String) -> LogTarget {
        if crate::text::mysql_url(&url).is_some() {
            LogTarget::Mysql(url)
        } else {
            LogTarget::Postgres(url)
        }
    }

    /// The target without any password, for messages and health.
    pub fn describe(&self) -> String {
        match self {
            LogTarget::Postgres(url) | LogTarget::Mysql(url) => redact_password(url),
            LogTarget::Sqlite { path, .. } => format!("sqlite:{}", path.display()),
        }
    }
}

/// What the background writer has done so far.
#[derive(Debug, Default)]
pub struct LogCounters {
    written: AtomicU64,
    failed: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl LogCounters {
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Rows that were not written: dropped with the queue full, or refused by the database.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|guard| guard.clone())
    }

    fn fail(&self, error: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut guard) = self.last_error.lock() {
            *guard = Some(error);
        }
    }
}

/// The log's sending side, shared by the request handlers. Cheap to clone.
#[derive(Clone)]
pub struct QueryLog {
    sender: mpsc::Sender<LogRecord>,
    counters: Arc<LogCounters>,
    target: LogTarget,
}

impl QueryLog {
    /// Starts the background writer on the current runtime. Nothing is connected yet:
    /// the writer connects on its first row (and again after a failure), so a log that
    /// is down at start costs the server nothing but counted failures.
    pub fn start(target: LogTarget) -> QueryLog {
        let (sender, mut receiver) = mpsc::channel::<LogRecord>(QUEUE_CAPACITY);
        let counters = Arc::new(LogCounters::default());
        let task_counters = Arc::clone(&counters);
        let mut writer = Writer::new(target.clone());
        tokio::spawn(async move {
            while let Some(record) = receiver.recv().await {
                match writer.write(&record).await {
                    Ok(()) => {
                        task_counters.written.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(error) => {
                        eprintln!("askdb serve: query log: {error}");
                        task_counters.fail(error.to_string());
                    }
                }
            }
        });
        QueryLog {
            sender,
            counters,
            target,
        }
    }

    /// Queues one row; never waits. A full queue drops the row and counts it.
    pub fn record(&self, record: LogRecord) {
        if let Err(error) = self.sender.try_send(record) {
            let why = match error {
                mpsc::error::TrySendError::Full(_) => "the write queue is full",
                mpsc::error::TrySendError::Closed(_) => "the writer has stopped",
            };
            self.counters.fail(format!("a row was dropped: {why}"));
        }
    }

    pub fn counters(&self) -> &LogCounters {
        &self.counters
    }

    pub fn target(&self) -> &LogTarget {
        &self.target
    }

    /// Whether a row can be written now: one insert over a fresh connection, rolled
    /// back, so the log gains nothing.
    pub async fn probe(&self) -> Result<(), LogError> {
        match tokio::time::timeout(WRITE_TIMEOUT * 2, probe(&self.target)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(LogError::Timeout),
        }
    }
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) for a time.
pub fn format_utc(time: SystemTime) -> String {
    let seconds = time
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0);
    let days = i64::try_from(seconds / 86_400).unwrap_or(0);
    crate::calendar::format_timestamp(days, u32::try_from(seconds % 86_400).unwrap_or(0))
}

fn joined_error_types(record: &LogRecord) -> Option<String> {
    (!record.error_types.is_empty()).then(|| record.error_types.join(","))
}

/// The examples' ids as the log keeps them: `3,7`, or nothing.
fn joined_examples(record: &LogRecord) -> Option<String> {
    (!record.examples.is_empty()).then(|| {
        record
            .examples
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    })
}

fn saturating_i32(value: u64) -> i32 {
    i32::try_from(value).unwrap_or(i32::MAX)
}

fn saturating_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// How many columns an insert names: the placeholders are counted from the list, so a
/// column added to it cannot leave them one short.
fn insert_column_count() -> usize {
    INSERT_COLUMNS.split(',').count()
}

fn postgres_insert_sql() -> String {
    let placeholders: Vec<String> = (1..=insert_column_count())
        .map(|n| format!("${n}"))
        .collect();
    format!(
        "INSERT INTO {QUERY_LOG_TABLE} ({INSERT_COLUMNS}) VALUES ({})",
        placeholders.join(", ")
    )
}

fn sqlite_insert_sql() -> String {
    let placeholders: Vec<String> = (1..=insert_column_count() + 1)
        .map(|n| format!("?{n}"))
        .collect();
    format!(
        "INSERT INTO {QUERY_LOG_TABLE} ({INSERT_COLUMNS}, database) VALUES ({})",
        placeholders.join(", ")
    )
}

/// The SQLite log's table: the PostgreSQL columns, plus the database asked about.
fn sqlite_create_sql() -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {QUERY_LOG_TABLE} (\
         id INTEGER PRIMARY KEY AUTOINCREMENT, asked_at TEXT NOT NULL, question TEXT, \
         sql TEXT, decision TEXT, error_type TEXT, latency_ms INTEGER, attempts INTEGER, \
         error_types TEXT, row_count INTEGER, input_tokens INTEGER, output_tokens INTEGER, \
         cost_usd REAL, model TEXT, trace_id TEXT, mode TEXT, database TEXT, \
         conversation_id TEXT, turn INTEGER, examples TEXT, rerun_example INTEGER, \
         user_name TEXT)"
    )
}

/// The columns a SQLite log made by an older askdb lacks, added when it is opened so
/// it keeps its rows.
const SQLITE_LATER_COLUMNS: [(&str, &str); 5] = [
    ("conversation_id", "TEXT"),
    ("turn", "INTEGER"),
    ("examples", "TEXT"),
    ("rerun_example", "INTEGER"),
    ("user_name", "TEXT"),
];

fn add_later_sqlite_columns(connection: &rusqlite::Connection) -> rusqlite::Result<()> {
    let mut statement = connection.prepare(&format!("PRAGMA table_info({QUERY_LOG_TABLE})"))?;
    let present: Vec<String> = statement
        .query_map([], |row| row.get::<_, String>(1))?
        .collect::<rusqlite::Result<_>>()?;
    for (column, data_type) in SQLITE_LATER_COLUMNS {
        if !present.iter().any(|name| name == column) {
            connection.execute(
                &format!("ALTER TABLE {QUERY_LOG_TABLE} ADD COLUMN {column} {data_type}"),
                [],
            )?;
        }
    }
    Ok(())
}

async fn connect_postgres(url: &str) -> Result<tokio_postgres::Client, LogError> {
    let mut config: tokio_postgres::Config = url
        .parse()
        .map_err(|error: tokio_postgres::Error| LogError::BadUrl(error.to_string()))?;
    config.connect_timeout(WRITE_TIMEOUT);
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|error| LogError::Connect(crate::text::error_chain(&error)))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

async fn insert_postgres<C: tokio_postgres::GenericClient>(
    client: &C,
    record: &LogRecord,
) -> Result<(), LogError> {
    let error_types = joined_error_types(record);
    let last_error = record.error_types.last().cloned();
    let latency = saturating_i32(record.latency_ms);
    let attempts = saturating_i32(u64::from(record.attempts));
    let rows = saturating_i64(record.row_count);
    let input = saturating_i64(record.input_tokens);
    let output = saturating_i64(record.output_tokens);
    let insert = postgres_insert_sql();
    let turn = record.turn.map(|turn| saturating_i32(u64::from(turn)));
    let examples = joined_examples(record);
    let params: [&(dyn tokio_postgres::types::ToSql + Sync); 20] = [
        &record.asked_at,
        &record.question,
        &record.sql,
        &record.decision,
        &last_error,
        &latency,
        &attempts,
        &error_types,
        &rows,
        &input,
        &output,
        &record.cost_usd,
        &record.model,
        &record.trace_id,
        &record.mode,
        &record.conversation_id,
        &turn,
        &examples,
        &record.rerun_example,
        &record.user,
    ];
    client
        .execute(insert.as_str(), &params)
        .await
        .map(|_| ())
        .map_err(|error| LogError::Write(crate::text::error_chain(&error)))
}

fn open_sqlite(path: &Path) -> Result<rusqlite::Connection, LogError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| LogError::Connect(format!("{}: {error}", parent.display())))?;
    }
    let connection = rusqlite::Connection::open(path)
        .map_err(|error| LogError::Connect(format!("{}: {error}", path.display())))?;
    connection
        .busy_timeout(WRITE_TIMEOUT)
        .and_then(|()| connection.execute(&sqlite_create_sql(), []).map(|_| ()))
        .and_then(|()| add_later_sqlite_columns(&connection))
        .map_err(|error| LogError::Connect(format!("{}: {error}", path.display())))?;
    Ok(connection)
}

fn insert_sqlite(
    connection: &rusqlite::Connection,
    record: &LogRecord,
    database: &str,
) -> Result<(), LogError> {
    connection
        .execute(
            &sqlite_insert_sql(),
            rusqlite::params![
                format_utc(record.asked_at),
                record.question,
                record.sql,
                record.decision,
                record.error_types.last(),
                saturating_i64(record.latency_ms),
                record.attempts,
                joined_error_types(record),
                saturating_i64(record.row_count),
                saturating_i64(record.input_tokens),
                saturating_i64(record.output_tokens),
                record.cost_usd,
                record.model,
                record.trace_id,
                record.mode,
                record.conversation_id,
                record.turn,
                joined_examples(record),
                record.rerun_example,
                record.user,
                database,
            ],
        )
        .map(|_| ())
        .map_err(|error| LogError::Write(error.to_string()))
}

/// The background writer's connection, opened on first use and again after a failure.
enum Writer {
    Postgres {
        url: String,
        client: Option<tokio_postgres::Client>,
    },
    Mysql {
        url: String,
        conn: Option<mysql_async::Conn>,
    },
    Sqlite {
        path: PathBuf,
        database: String,
        connection: Option<rusqlite::Connection>,
    },
}

impl Writer {
    fn new(target: LogTarget) -> Writer {
        match target {
            LogTarget::Postgres(url) => Writer::Postgres { url, client: None },
            LogTarget::Mysql(url) => Writer::Mysql { url, conn: None },
            LogTarget::Sqlite { path, database } => Writer::Sqlite {
                path,
                database,
                connection: None,
            },
        }
    }

    async fn write(&mut self, record: &LogRecord) -> Result<(), LogError> {
        match self {
            Writer::Postgres { url, client } => {
                let connected = match client.take() {
                    Some(open) if !open.is_closed() => open,
                    _ => connect_postgres(url).await?,
                };
                let outcome =
                    match tokio::time::timeout(WRITE_TIMEOUT, insert_postgres(&connected, record))
                        .await
                    {
                        Ok(outcome) => outcome,
                        Err(_) => Err(LogError::Timeout),
                    };
                if outcome.is_ok() {
                    *client = Some(connected);
                }
                outcome
            }
            Writer::Mysql { url, conn } => {
                let mut connected = match conn.take() {
                    Some(open) => open,
                    None => mysql::connect(url).await?,
                };
                let outcome = match tokio::time::timeout(
                    WRITE_TIMEOUT,
                    mysql::insert(&mut connected, record),
                )
                .await
                {
                    Ok(outcome) => outcome,
                    Err(_) => Err(LogError::Timeout),
                };
                // A connection whose write failed is dropped, and the next row opens a
                // fresh one (the server may have gone or the grant changed).
                if outcome.is_ok() {
                    *conn = Some(connected);
                }
                outcome
            }
            Writer::Sqlite {
                path,
                database,
                connection,
            } => {
                let open = connection.take();
                let path = path.clone();
                let name = database.clone();
                let row = record.clone();
                let (kept, outcome) = tokio::task::spawn_blocking(move || {
                    let connection = match open {
                        Some(connection) => connection,
                        None => match open_sqlite(&path) {
                            Ok(connection) => connection,
                            Err(error) => return (None, Err(error)),
                        },
                    };
                    let outcome = insert_sqlite(&connection, &row, &name);
                    let kept = outcome.is_ok().then_some(connection);
                    (kept, outcome)
                })
                .await
                .map_err(|error| LogError::Write(error.to_string()))?;
                *connection = kept;
                outcome
            }
        }
    }
}

fn probe_record() -> LogRecord {
    LogRecord {
        question: "askdb health: write probe (rolled back)".to_string(),
        asked_at: SystemTime::now(),
        sql: None,
        attempts: 0,
        error_types: Vec::new(),
        decision: "probe".to_string(),
        row_count: 0,
        latency_ms: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: 0.0,
        model: None,
        trace_id: None,
        mode: "probe".to_string(),
        conversation_id: None,
        turn: None,
        examples: Vec::new(),
        rerun_example: None,
        user: None,
    }
}

async fn probe(target: &LogTarget) -> Result<(), LogError> {
    let record = probe_record();
    match target {
        LogTarget::Postgres(url) => {
            let mut client = connect_postgres(url).await?;
            let transaction = client
                .transaction()
                .await
                .map_err(|error| LogError::Write(crate::text::error_chain(&error)))?;
            insert_postgres(&transaction, &record).await?;
            transaction
                .rollback()
                .await
                .map_err(|error| LogError::Write(crate::text::error_chain(&error)))
        }
        LogTarget::Mysql(url) => mysql::probe(url, &record).await,
        LogTarget::Sqlite { path, database } => {
            let path = path.clone();
            let database = database.clone();
            tokio::task::spawn_blocking(move || {
                let mut connection = open_sqlite(&path)?;
                let transaction = connection
                    .transaction()
                    .map_err(|error| LogError::Write(error.to_string()))?;
                insert_sqlite(&transaction, &record, &database)?;
                transaction
                    .rollback()
                    .map_err(|error| LogError::Write(error.to_string()))
            })
            .await
            .map_err(|error| LogError::Write(error.to_string()))?
        }
    }
}

#[cfg(test)]
mod tests;
