//! The SQLite executor, read-only in layers that each hold alone:
//! the file is opened read-only; `PRAGMA query_only` is set; defensive mode is on and
//! no database may be attached (limit 0); an authorizer allows only reads, SELECT,
//! recursion and ordinary functions, and denies ATTACH, DETACH, PRAGMA, transactions,
//! reads of `sqlite_*` tables and reads of restricted columns; a statement that the
//! engine itself calls writable is refused before its first step; and a progress
//! handler aborts any statement past its deadline.
//!
//! Introspection uses a separate read-only connection without the authorizer (it must
//! read `sqlite_master` and run table-info pragmas) and only ever runs fixed SQL.
//!
//! Idle connections are kept for reuse, at most [`MAX_IDLE_CONNECTIONS`] of them, and
//! each remembers which file it opened (device and inode). An open connection keeps
//! reading the file it opened even after that file is removed or replaced, so before
//! every statement the path is looked at again: a missing file is a clear
//! `connection_error`, and connections to a file that is no longer at the path are
//! closed and new ones opened on the file that is there now.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::limits::Limit;
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use serde_json::Value as JsonValue;

use super::{ExecFailure, ExecLimits, RawRows};
use crate::gate::guard::resolution::{Resolution, SqliteAccess};
use crate::gate::taxonomy::{self, ErrorType};
use crate::schema::{ColumnSchema, ForeignKey, TableSchema};
use crate::sql_text::quote_ident;

/// How many virtual-machine steps pass between deadline checks. Small enough that a
/// runaway statement is stopped within milliseconds of its deadline.
const PROGRESS_STEPS: i32 = 1_000;

/// Functions the authorizer refuses even if the guard were bypassed.
const DENIED_SQLITE_FUNCTIONS: &[&str] = &[
    "load_extension",
    "readfile",
    "writefile",
    "fts3_tokenizer",
    "edit",
];

/// Table-valued functions the allow-list admits, registered on the resolver connection
/// before its first statement.
const TABLE_VALUED_FUNCTIONS: &[&str] = &["json_each", "json_tree"];

/// The most memory SQLite may hold in askdb's process (`PRAGMA hard_heap_limit`).
const SQLITE_HEAP_LIMIT_BYTES: i64 = 256 * 1024 * 1024;

/// Idle connections kept for reuse. More can be open at once (one per statement in
/// flight); past this many, a connection is closed when its statement ends, so memory
/// (each connection has its own page cache) falls back after a burst.
pub(crate) const MAX_IDLE_CONNECTIONS: usize = 8;

/// Which file a path names: (device, inode) on Unix; elsewhere every file looks the
/// same, so only a missing file is noticed.
type FileIdentity = (u64, u64);

#[cfg(unix)]
fn file_identity(path: &Path) -> Option<FileIdentity> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .ok()
        .filter(|metadata| metadata.is_file())
        .map(|metadata| (metadata.dev(), metadata.ino()))
}

#[cfg(not(unix))]
fn file_identity(path: &Path) -> Option<FileIdentity> {
    path.is_file().then_some((0, 0))
}

/// One locked-down connection and the deadline its progress handler watches.
struct LockedConnection {
    connection: Connection,
    /// Deadline in milliseconds since the Unix epoch; 0 means none.
    deadline_ms: Arc<AtomicU64>,
    /// The file the connection opened.
    file: FileIdentity,
}

pub(crate) struct SqliteExecutor {
    path: PathBuf,
    lockdown: Arc<Lockdown>,
    idle: Mutex<Vec<LockedConnection>>,
    /// The connection statements are prepared on for the guard's check of what SQLite
    /// resolves them to: read-only, never stepped, its authorizer only recording.
    resolver: Mutex<Option<Resolver>>,
}

/// A connection that records every authorizer call while a statement is prepared.
struct Resolver {
    connection: Connection,
    record: Arc<Mutex<Vec<SqliteAccess>>>,
    file: FileIdentity,
}

/// What the authorizer denies besides writes: restricted columns and hidden tables.
struct Lockdown {
    restricted: BTreeMap<String, BTreeSet<String>>,
    hidden: BTreeSet<String>,
}

/// The longest string or blob any value may be (`SQLITE_LIMIT_LENGTH`, 1 GB by
/// default): a function building a larger one (`randomblob`, `printf` widths,
/// `zeroblob`) fails at once with "string or blob too big", because the progress
/// handler cannot interrupt one long function call.
pub(crate) const MAX_VALUE_BYTES: i32 = 4 * 1024 * 1024;

fn now_ms() -> u64 {
    crate::calendar::unix_millis()
}

fn failure_from(error: rusqlite::Error) -> ExecFailure {
    match error {
        rusqlite::Error::SqliteFailure(code, message) => {
            let primary = code.extended_code & 0xff;
            let message = message.unwrap_or_else(|| code.to_string());
            ExecFailure::new(taxonomy::from_sqlite(primary, &message), message)
        }
        rusqlite::Error::SqlInputError {
            error, msg, offset, ..
        } => {
            let primary = error.extended_code & 0xff;
            let mut failure = ExecFailure::new(taxonomy::from_sqlite(primary, &msg), msg);
            failure.position = u32::try_from(offset).ok().map(|offset| offset + 1);
            failure
        }
        rusqlite::Error::MultipleStatement => ExecFailure::new(
            ErrorType::Rejected,
            "more than one statement: send exactly one SELECT",
        ),
        rusqlite::Error::Empty => ExecFailure::new(ErrorType::SyntaxError, "empty statement"),
        other => ExecFailure::new(ErrorType::Unknown, other.to_string()),
    }
}

/// One authorizer call as the guard's resolution reads it.
fn access_of(context: &AuthContext<'_>) -> SqliteAccess {
    match context.action {
        AuthAction::Read {
            table_name,
            column_name,
        } => SqliteAccess::Read {
            table: table_name.to_string(),
            column: column_name.to_string(),
            database: context.database_name.map(str::to_string),
        },
        AuthAction::Function { function_name } => SqliteAccess::Function(function_name.into()),
        AuthAction::Pragma { pragma_name, .. } => SqliteAccess::Pragma(pragma_name.into()),
        AuthAction::Select | AuthAction::Recursive => SqliteAccess::Query {
            cte: context.accessor.map(str::to_string),
        },
        other => SqliteAccess::Other(format!("{other:?}")),
    }
}

fn authorize(context: AuthContext<'_>, lockdown: &Lockdown) -> Authorization {
    match context.action {
        AuthAction::Select | AuthAction::Recursive => Authorization::Allow,
        AuthAction::Read {
            table_name,
            column_name,
        } => {
            let table = table_name.to_lowercase();
            if table.starts_with("sqlite_") || lockdown.hidden.contains(&table) {
                return Authorization::Deny;
            }
            let column = column_name.to_lowercase();
            if lockdown
                .restricted
                .get(&table)
                .is_some_and(|columns| columns.contains(&column))
            {
                return Authorization::Deny;
            }
            Authorization::Allow
        }
        AuthAction::Function { function_name } => {
            let name = function_name.to_lowercase();
            if DENIED_SQLITE_FUNCTIONS.contains(&name.as_str()) {
                Authorization::Deny
            } else {
                Authorization::Allow
            }
        }
        // Writes, schema changes, ATTACH/DETACH, PRAGMA, transactions, savepoints,
        // and anything a future SQLite adds: denied.
        _ => Authorization::Deny,
    }
}

impl SqliteExecutor {
    /// Opens the database file read-only. Fails clearly when the file is missing or
    /// not a SQLite database, without creating anything.
    pub fn open(
        path: &Path,
        restricted: BTreeMap<String, BTreeSet<String>>,
        hidden: BTreeSet<String>,
    ) -> Result<Self, ExecFailure> {
        if !path.is_file() {
            return Err(ExecFailure::new(
                ErrorType::ConnectionError,
                format!("no SQLite database file at {}", path.display()),
            ));
        }
        let executor = SqliteExecutor {
            path: path.to_path_buf(),
            lockdown: Arc::new(Lockdown { restricted, hidden }),
            idle: Mutex::new(Vec::new()),
            resolver: Mutex::new(None),
        };
        // Open one connection now so a bad file fails at startup, not at first query.
        let first = executor.open_locked()?;
        executor.give_back(first);
        Ok(executor)
    }

    fn open_plain_read_only(path: &Path) -> Result<Connection, ExecFailure> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let connection = Connection::open_with_flags(path, flags).map_err(|error| {
            ExecFailure::new(
                ErrorType::ConnectionError,
                format!("cannot open {} read-only: {error}", path.display()),
            )
        })?;
        // Touch the schema so "file is not a database" shows up here.
        connection
            .query_row("SELECT count(*) FROM sqlite_master", [], |row| {
                row.get::<_, i64>(0)
            })
            .map_err(|error| {
                ExecFailure::new(
                    ErrorType::ConnectionError,
                    format!(
                        "{} is not a readable SQLite database: {error}",
                        path.display()
                    ),
                )
            })?;
        Ok(connection)
    }

    fn open_locked(&self) -> Result<LockedConnection, ExecFailure> {
        // Looked at before opening: should the file be swapped in between, the
        // connection is taken for the old file and closed at its next use.
        let file = self.current_file()?;
        let mut connection = Self::open_plain_read_only(&self.path)?;
        let setup_error = |error: rusqlite::Error| {
            ExecFailure::new(
                ErrorType::ConnectionError,
                format!("cannot lock down the SQLite connection: {error}"),
            )
        };
        // query_only must be set before the authorizer, which denies PRAGMA.
        connection
            .pragma_update(None, "query_only", true)
            .map_err(setup_error)?;
        // All of SQLite's memory in this process, every connection together: a statement
        // whose values or sorts would pass it fails with "out of memory" instead of
        // growing askdb (one row of 120 values of 4 MiB each would be 480 MB).
        connection
            .pragma_update(None, "hard_heap_limit", SQLITE_HEAP_LIMIT_BYTES)
            .map_err(setup_error)?;
        connection
            .set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)
            .map_err(setup_error)?;
        connection
            .set_limit(Limit::SQLITE_LIMIT_ATTACHED, 0)
            .map_err(setup_error)?;
        connection
            .set_limit(Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
            .map_err(setup_error)?;
        let lockdown = Arc::clone(&self.lockdown);
        connection
            .authorizer(Some(move |context: AuthContext<'_>| {
                authorize(context, &lockdown)
            }))
            .map_err(setup_error)?;
        let deadline_ms = Arc::new(AtomicU64::new(0));
        let watched = Arc::clone(&deadline_ms);
        connection
            .progress_handler(
                PROGRESS_STEPS,
                Some(move || {
                    let deadline = watched.load(Ordering::Relaxed);
                    deadline != 0 && now_ms() >= deadline
                }),
            )
            .map_err(setup_error)?;
        Ok(LockedConnection {
            connection,
            deadline_ms,
            file,
        })
    }

    /// The identity of the file at the path now, or a clear error when there is none.
    fn current_file(&self) -> Result<FileIdentity, ExecFailure> {
        file_identity(&self.path).ok_or_else(|| {
            ExecFailure::new(
                ErrorType::ConnectionError,
                format!(
                    "the SQLite database file {} is missing (removed or moved); queries work again once it is back",
                    self.path.display()
                ),
            )
        })
    }

    /// An idle connection to the file at the path now, or a new one. Connections to a
    /// file that is no longer there are closed, not reused.
    fn take(&self) -> Result<LockedConnection, ExecFailure> {
        let current = self.current_file()?;
        let pooled = self.idle.lock().ok().and_then(|mut idle| {
            idle.retain(|connection| connection.file == current);
            idle.pop()
        });
        match pooled {
            Some(connection) => Ok(connection),
            None => self.open_locked(),
        }
    }

    fn give_back(&self, connection: LockedConnection) {
        connection.deadline_ms.store(0, Ordering::Relaxed);
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() < MAX_IDLE_CONNECTIONS {
                idle.push(connection);
            }
        }
    }

    /// What SQLite resolves one statement to: it is prepared (compiled, never stepped)
    /// on the resolver connection, whose authorizer records every table and column read
    /// and every function called. Blocking: call from `spawn_blocking`.
    ///
    /// A statement SQLite cannot compile still made its reads on the way to the error
    /// (`(1, 'x') IN hidden_table` fails on the hidden table's column count): that error
    /// comes back beside the resolution, to be reported only if the resolution passes,
    /// so it cannot tell anything about what the resolution refuses.
    pub fn resolve(&self, sql: &str) -> Result<(Resolution, Option<ExecFailure>), ExecFailure> {
        let current = self.current_file()?;
        let mut slot = self.resolver.lock().map_err(|_| {
            ExecFailure::new(ErrorType::Unknown, "the statement resolver is unavailable")
        })?;
        if slot
            .as_ref()
            .is_none_or(|resolver| resolver.file != current)
        {
            *slot = Some(self.open_resolver(current)?);
        }
        let Some(resolver) = slot.as_ref() else {
            return Err(ExecFailure::new(
                ErrorType::Unknown,
                "the statement resolver could not be opened",
            ));
        };
        if let Ok(mut record) = resolver.record.lock() {
            record.clear();
        }
        let prepared = resolver.connection.prepare(sql).map(drop);
        let accesses = resolver
            .record
            .lock()
            .map(|mut record| std::mem::take(&mut *record))
            .unwrap_or_default();
        Ok((
            Resolution::from_sqlite(&accesses),
            prepared.err().map(failure_from),
        ))
    }

    fn open_resolver(&self, file: FileIdentity) -> Result<Resolver, ExecFailure> {
        let mut connection = Self::open_plain_read_only(&self.path)?;
        let record: Arc<Mutex<Vec<SqliteAccess>>> = Arc::new(Mutex::new(Vec::new()));
        let recording = Arc::clone(&record);
        connection
            .authorizer(Some(move |context: AuthContext<'_>| {
                if let Ok(mut record) = recording.lock() {
                    record.push(access_of(&context));
                }
                // Recording only: what is allowed is judged on the whole record, and
                // nothing prepared here is ever stepped.
                Authorization::Allow
            }))
            .map_err(|error| {
                ExecFailure::new(
                    ErrorType::ConnectionError,
                    format!("cannot set up the statement resolver: {error}"),
                )
            })?;
        // A table-valued function's first use on a connection registers it in the
        // schema, which the authorizer sees as writes to sqlite_master: done here once,
        // so the record of a statement shows only what the statement itself does.
        for function in TABLE_VALUED_FUNCTIONS {
            let _ = connection.prepare(&format!("SELECT * FROM {function}('[]')"));
        }
        if let Ok(mut record) = record.lock() {
            record.clear();
        }
        Ok(Resolver {
            connection,
            record,
            file,
        })
    }

    /// Idle connections kept now (tests).
    #[cfg(test)]
    pub fn idle_connections(&self) -> usize {
        self.idle.lock().map(|idle| idle.len()).unwrap_or(0)
    }

    /// Runs one statement on a locked-down connection. Blocking: call from
    /// `spawn_blocking`.
    pub fn execute(&self, sql: &str, limits: ExecLimits) -> Result<RawRows, ExecFailure> {
        let locked = self.take()?;
        let deadline = now_ms() + limits.statement_timeout.as_millis() as u64;
        locked.deadline_ms.store(deadline.max(1), Ordering::Relaxed);
        let result = run_statement(&locked.connection, sql, limits);
        self.give_back(locked);
        result.map_err(|failure| self.as_missing_if_hidden(failure))
    }

    /// The authorizer's refusal of a hidden table (`access to askdb_query_log.question
    /// is prohibited`) in the words SQLite uses for a table that does not exist, so
    /// this layer alone does not reveal that the table is there either.
    fn as_missing_if_hidden(&self, failure: ExecFailure) -> ExecFailure {
        let message = failure.message.to_lowercase();
        let hidden = self.lockdown.hidden.iter().find(|table| {
            message.contains(&format!("access to {table}."))
                || message.contains(&format!("access to main.{table}."))
        });
        match hidden {
            Some(table) => {
                ExecFailure::new(ErrorType::UnknownTable, format!("no such table: {table}"))
            }
            None => failure,
        }
    }

    /// Reads every table's structure and size from the catalog.
    pub fn introspect(&self) -> Result<Vec<TableSchema>, ExecFailure> {
        let connection = Self::open_plain_read_only(&self.path)?;
        introspect(&connection).map_err(failure_from)
    }
}

fn run_statement(
    connection: &Connection,
    sql: &str,
    limits: ExecLimits,
) -> Result<RawRows, ExecFailure> {
    let mut statement = connection.prepare(sql).map_err(failure_from)?;
    if !statement.readonly() {
        return Err(ExecFailure::new(
            ErrorType::ReadOnlyViolation,
            "the statement would write; this connection only reads",
        ));
    }
    let columns: Vec<String> = statement.column_names().map(str::to_string).collect();
    let column_count = columns.len();
    let mut rows_out = Vec::new();
    let mut truncated = false;
    let mut bytes = 0u64;
    let mut rows = statement.query([]).map_err(failure_from)?;
    while let Some(row) = rows.next().map_err(failure_from)? {
        if rows_out.len() as u64 >= limits.row_cap || bytes > limits.byte_cap {
            truncated = true;
            break;
        }
        let mut values = Vec::with_capacity(column_count);
        for index in 0..column_count {
            let raw = row.get_ref(index).map_err(failure_from)?;
            // Counted before it is copied out of SQLite: a row of many large values stops
            // at the value that passes the cap, not after all of them are in memory twice.
            bytes += raw_bytes(raw);
            if bytes > limits.byte_cap {
                truncated = true;
                break;
            }
            values.push(json_of(raw));
        }
        if truncated {
            break;
        }
        rows_out.push(values);
    }
    Ok(RawRows {
        columns,
        rows: rows_out,
        truncated,
    })
}

/// What a value will cost against the byte cap, read from SQLite's own length before
/// it is copied: the bytes of text; eight for anything else, a blob included (it is
/// shown as a short placeholder), as [`super::value_bytes`] counts them.
fn raw_bytes(value: ValueRef<'_>) -> u64 {
    match value {
        ValueRef::Text(text) => text.len() as u64,
        _ => 8,
    }
}

fn json_of(value: ValueRef<'_>) -> JsonValue {
    match value {
        ValueRef::Null => JsonValue::Null,
        ValueRef::Integer(integer) => JsonValue::from(integer),
        ValueRef::Real(real) => serde_json::Number::from_f64(real)
            .map(JsonValue::Number)
            .unwrap_or(JsonValue::Null),
        ValueRef::Text(bytes) => JsonValue::String(String::from_utf8_lossy(bytes).into_owned()),
        ValueRef::Blob(bytes) => JsonValue::String(format!("<blob, {} bytes>", bytes.len())),
    }
}

fn introspect(connection: &Connection) -> Result<Vec<TableSchema>, rusqlite::Error> {
    let mut names_statement = connection.prepare(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') \
         AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
    )?;
    let names: Vec<String> = names_statement
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    let mut tables = Vec::with_capacity(names.len());
    for name in names {
        tables.push(introspect_table(connection, &name)?);
    }
    // Foreign keys that name no column refer to the target's primary key.
    let primary_keys: BTreeMap<String, Vec<String>> = tables
        .iter()
        .map(|table| (table.name.to_lowercase(), table.primary_key.clone()))
        .collect();
    for table in &mut tables {
        for key in &mut table.foreign_keys {
            if key.references_columns.iter().all(String::is_empty) {
                if let Some(target) = primary_keys.get(&key.references_table.to_lowercase()) {
                    key.references_columns = target.clone();
                }
            }
        }
    }
    Ok(tables)
}

fn introspect_table(connection: &Connection, name: &str) -> Result<TableSchema, rusqlite::Error> {
    let mut columns = Vec::new();
    let mut primary: Vec<(i64, String)> = Vec::new();
    let mut info = connection
        .prepare("SELECT name, type, \"notnull\", pk FROM pragma_table_info(?1) ORDER BY cid")?;
    let mut rows = info.query([name])?;
    while let Some(row) = rows.next()? {
        let column: String = row.get(0)?;
        let data_type: String = row.get(1)?;
        let not_null: i64 = row.get(2)?;
        let pk_position: i64 = row.get(3)?;
        if pk_position > 0 {
            primary.push((pk_position, column.clone()));
        }
        columns.push(ColumnSchema {
            name: column,
            data_type: if data_type.is_empty() {
                "ANY".to_string()
            } else {
                data_type
            },
            // A primary key column is NOT NULL in practice even when undeclared.
            nullable: not_null == 0 && pk_position == 0,
        });
    }
    primary.sort();

    let mut foreign: BTreeMap<i64, ForeignKey> = BTreeMap::new();
    let mut fk_statement = connection.prepare(
        "SELECT id, \"table\", \"from\", \"to\" FROM pragma_foreign_key_list(?1) ORDER BY id, seq",
    )?;
    let mut rows = fk_statement.query([name])?;
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let target: String = row.get(1)?;
        let from: String = row.get(2)?;
        let to: Option<String> = row.get(3)?;
        let key = foreign.entry(id).or_insert_with(|| ForeignKey {
            columns: Vec::new(),
            references_table: target,
            references_columns: Vec::new(),
        });
        key.columns.push(from);
        key.references_columns.push(to.unwrap_or_default());
    }

    let mut unique = Vec::new();
    let mut index_list = connection
        .prepare("SELECT name FROM pragma_index_list(?1) WHERE \"unique\" = 1 AND origin = 'u'")?;
    let index_names: Vec<String> = index_list
        .query_map([name], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for index in index_names {
        let mut index_info =
            connection.prepare("SELECT name FROM pragma_index_info(?1) ORDER BY seqno")?;
        let index_columns: Vec<String> = index_info
            .query_map([index], |row| row.get(0))?
            .collect::<Result<_, _>>()?;
        unique.push(index_columns);
    }

    let row_count: i64 = connection.query_row(
        &format!("SELECT count(*) FROM {}", quote_ident(name)),
        [],
        |row| row.get(0),
    )?;
    Ok(TableSchema {
        name: name.to_string(),
        columns,
        primary_key: primary.into_iter().map(|(_, column)| column).collect(),
        unique,
        foreign_keys: foreign.into_values().collect(),
        row_count: Some(row_count),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn database(path: &Path, rows: i64) {
        let connection = Connection::open(path).expect("create");
        connection
            .execute_batch("CREATE TABLE t (x INTEGER);")
            .expect("table");
        for x in 0..rows {
            connection
                .execute("INSERT INTO t VALUES (?1)", [x])
                .expect("row");
        }
    }

    fn limits() -> ExecLimits {
        ExecLimits {
            row_cap: 10,
            statement_timeout: Duration::from_secs(5),
            byte_cap: super::super::DEFAULT_RESULT_BYTE_CAP,
        }
    }

    fn count(executor: &SqliteExecutor) -> Result<JsonValue, ExecFailure> {
        executor
            .execute("SELECT count(*) FROM t", limits())
            .map(|rows| rows.rows[0][0].clone())
    }

    #[test]
    fn a_replaced_file_is_read_instead_of_the_one_the_idle_connections_opened() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.sqlite");
        database(&path, 1);
        let executor =
            SqliteExecutor::open(&path, BTreeMap::new(), BTreeSet::new()).expect("opens");
        assert_eq!(count(&executor).expect("rows"), JsonValue::from(1));

        let replacement = dir.path().join("new.sqlite");
        database(&replacement, 3);
        std::fs::rename(&replacement, &path).expect("replace");
        assert_eq!(
            count(&executor).expect("rows"),
            JsonValue::from(3),
            "the new file, not the old one an idle connection still has open"
        );
    }

    #[test]
    fn a_removed_file_is_a_connection_error_until_it_is_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.sqlite");
        database(&path, 2);
        let executor =
            SqliteExecutor::open(&path, BTreeMap::new(), BTreeSet::new()).expect("opens");
        assert!(count(&executor).is_ok());
        let aside = dir.path().join("aside.sqlite");
        std::fs::rename(&path, &aside).expect("remove");
        let failure = count(&executor).expect_err("no file");
        assert_eq!(failure.error_type, ErrorType::ConnectionError);
        assert!(failure.message.contains("missing"), "{}", failure.message);
        std::fs::write(&path, b"this is not a database, just text").expect("garbage");
        let failure = count(&executor).expect_err("not a database");
        assert_eq!(failure.error_type, ErrorType::ConnectionError);
        std::fs::rename(&aside, &path).expect("back");
        assert_eq!(count(&executor).expect("rows"), JsonValue::from(2));
    }

    #[test]
    fn idle_connections_are_capped() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.sqlite");
        database(&path, 1);
        let executor =
            SqliteExecutor::open(&path, BTreeMap::new(), BTreeSet::new()).expect("opens");
        let held: Vec<LockedConnection> = (0..MAX_IDLE_CONNECTIONS + 5)
            .map(|_| executor.take().expect("connection"))
            .collect();
        for connection in held {
            executor.give_back(connection);
        }
        assert_eq!(executor.idle_connections(), MAX_IDLE_CONNECTIONS);
    }

    #[test]
    fn the_authorizer_alone_denies_reading_a_hidden_table() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.sqlite");
        database(&path, 1);
        Connection::open(&path)
            .and_then(|connection| {
                connection.execute_batch(
                    "CREATE TABLE askdb_query_log (question TEXT);
                     INSERT INTO askdb_query_log VALUES ('secret');",
                )
            })
            .expect("hidden table");
        let hidden = BTreeSet::from(["askdb_query_log".to_string()]);
        let executor = SqliteExecutor::open(&path, BTreeMap::new(), hidden).expect("opens");
        // No guard here: the statements go straight to the locked-down connection.
        for sql in [
            "SELECT question FROM askdb_query_log",
            "SELECT count(*) FROM t WHERE EXISTS (SELECT question FROM askdb_query_log)",
            "SELECT * FROM (SELECT * FROM ASKDB_QUERY_LOG)",
        ] {
            let failure = executor.execute(sql, limits()).expect_err(sql);
            // In the words of a table that does not exist.
            assert_eq!(failure.message, "no such table: askdb_query_log", "{sql}");
            assert_eq!(failure.error_type, ErrorType::UnknownTable, "{sql}");
        }
        assert_eq!(
            count(&executor).expect("other tables read"),
            JsonValue::from(1)
        );
    }

    #[test]
    fn a_value_past_the_length_limit_fails_at_once_instead_of_outrunning_the_deadline() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.sqlite");
        database(&path, 1);
        let executor =
            SqliteExecutor::open(&path, BTreeMap::new(), BTreeSet::new()).expect("opens");
        for sql in [
            "SELECT length(randomblob(250000000))",
            "SELECT instr(printf('%.*c', 8000000, 'a'), 'b')",
            "SELECT length(zeroblob(100000000))",
        ] {
            let failure = executor.execute(sql, limits()).expect_err(sql);
            assert!(
                failure.message.contains("too big"),
                "{sql}: {}",
                failure.message
            );
        }
        let within = format!("SELECT length(randomblob({}))", MAX_VALUE_BYTES / 2);
        let rows = executor
            .execute(&within, limits())
            .expect("within the limit");
        assert_eq!(rows.rows[0][0], JsonValue::from(MAX_VALUE_BYTES / 2));
    }

    #[test]
    fn a_result_stops_at_its_byte_cap_and_says_truncated() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.sqlite");
        database(&path, 10);
        let executor =
            SqliteExecutor::open(&path, BTreeMap::new(), BTreeSet::new()).expect("opens");
        let limits = ExecLimits {
            byte_cap: 2_500,
            ..limits()
        };
        // Ten rows of 1,000 bytes each: the row that would pass 2,500 bytes is not kept.
        let rows = executor
            .execute("SELECT printf('%.*c', 1000, 'a') FROM t", limits)
            .expect("rows");
        assert_eq!(rows.rows.len(), 2);
        assert!(rows.truncated);
        // One row whose values together pass the cap ends the read at the value that
        // passes it: nothing of it is kept.
        let wide = executor
            .execute(
                "SELECT printf('%.*c', 1000, 'a'), printf('%.*c', 1000, 'b'), printf('%.*c', 1000, 'c') FROM t",
                limits,
            )
            .expect("rows");
        assert!(wide.rows.is_empty(), "{} rows", wide.rows.len());
        assert!(wide.truncated);
        let small = executor
            .execute("SELECT x FROM t", limits)
            .expect("small rows");
        assert_eq!(small.rows.len(), 10);
        assert!(!small.truncated);
    }
}
