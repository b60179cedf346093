//! The PostgreSQL executor, read-only in layers that each hold alone:
//! every statement runs through the extended protocol (one Parse message, so the server
//! itself refuses a second statement stacked behind the first), inside a transaction
//! started READ ONLY, under `SET LOCAL statement_timeout` and `SET LOCAL lock_timeout`,
//! and that transaction is always rolled back, on success and failure alike: this file
//! has no code path that makes anything permanent. At most the row cap plus one rows
//! are read (the guard has already written the cap into the statement's LIMIT), and
//! reading stops at the byte cap.
//!
//! A statement costs two round trips that the caller waits for: the transaction's start
//! with its settings, the backend's pid and the statement's Parse are sent together, then
//! its Bind and Execute. The rollback and the session's cleaning (RESET ALL, advisory
//! locks released, temporary objects and SQL-level prepared statements dropped, in case a
//! statement run without the guard left something behind) are one more, sent after the
//! caller has its rows: a connection goes back to the pool only once it is clean, and one
//! whose statement was interrupted (a timeout, a caller that went away) is closed instead
//! ([`Session`]). Pooled sessions never carry state from one statement to the next.
//!
//! Values are decoded from PostgreSQL's binary format by column type into JSON
//! ([`PgCell`], [`PgNumeric`]): numbers stay numbers when they round-trip exactly,
//! dates and times become ISO text, and any type without a decoder becomes a
//! `"<type name>"` placeholder instead of an error.
//!
//! Introspection reads the catalogs (pg_class, pg_attribute, pg_constraint) of the
//! `public` schema over the same read-only path. The executor may read catalogs; the
//! guard still refuses them to the model.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::str::FromStr;
#[cfg(test)]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime, TimeoutType,
    Transaction,
};
use futures_core::Stream;
use serde_json::Value as JsonValue;
use tokio_postgres::error::ErrorPosition;
use tokio_postgres::types::{FromSql, Kind, ToSql, Type};
use tokio_postgres::{Config, NoTls};

use super::{value_bytes, ExecFailure, ExecLimits, RawRows};
use crate::gate::guard::{postgres_plan, resolution, GuardPolicy, Refusal};
use crate::gate::taxonomy::{self, ErrorType};
use crate::schema::{ColumnSchema, ForeignKey, TableSchema};
use crate::text::redact_password;

/// Connections kept open per gate. Small: askdb runs one question at a time per user,
/// and the server's connection slots are shared with everyone else.
const POOL_SIZE: usize = 4;

/// How long to wait for a new connection before calling the server unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a caller waits for a free pooled connection before it is told that askdb
/// is busy (`ErrorType::Busy`). Long enough to queue behind a burst of short
/// statements (the pool turns over in milliseconds), short enough that a caller stuck
/// behind statements running to their timeout hears so promptly instead of waiting
/// without end.
pub(crate) const POOL_WAIT: Duration = Duration::from_secs(5);

/// Beyond the server-side statement timeout, how long the client waits before it
/// gives up on the server itself (a hung network, a server that never answers, a
/// statement that ignores the timeout): a caller hears within the timeout plus this.
pub(crate) const CLIENT_GRACE: Duration = Duration::from_secs(1);

/// After the client gave up on a statement, how long its backend has to stop after
/// the cancel request before it is terminated, and again after the termination
/// before it is reported as still running.
const BACKEND_STOP_WAIT: Duration = Duration::from_secs(1);

/// What became of a backend whose statement outran the client's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BackendEnd {
    /// It stopped after the cancel request (or the closed connection).
    Gone,
    /// It ignored the cancel and was terminated.
    Terminated,
    /// Still running after the termination, or it could not be checked.
    Unconfirmed,
}

/// The longest a statement waits for a lock. A read that waits longer is queued
/// behind someone's schema change; failing fast beats holding a connection.
const MAX_LOCK_WAIT: Duration = Duration::from_secs(1);

/// The schema whose tables and views the gate sees.
const SCHEMA: &str = "public";

type BoxError = Box<dyn StdError + Sync + Send>;

pub(crate) struct PostgresExecutor {
    pool: Pool,
    /// The URL with its password replaced, for messages.
    shown_url: String,
    /// The password, only so that it can be scrubbed from any message that might
    /// echo it; never printed.
    password: Option<String>,
    /// Whether transactions start READ ONLY. Always true in the product; the layer
    /// tests switch it off to show the database role holding on its own.
    #[cfg(test)]
    read_only: AtomicBool,
}

impl PostgresExecutor {
    /// Builds the pool and opens one connection, so a wrong URL, a refused login or an
    /// unreachable server fails at startup with a clear message (never the password).
    pub async fn connect(url: &str) -> Result<Self, ExecFailure> {
        let shown_url = redact_password(url);
        let mut config = Config::from_str(url).map_err(|error| {
            ExecFailure::new(
                ErrorType::ConnectionError,
                format!(
                    "{shown_url} is not a valid PostgreSQL URL: {}",
                    describe(&error)
                ),
            )
        })?;
        let password = config
            .get_password()
            .map(|bytes| String::from_utf8_lossy(bytes).into_owned());
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("askdb");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                // Sessions are cleaned after use, before they go back ([`Session`]).
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|error| {
                ExecFailure::new(
                    ErrorType::ConnectionError,
                    format!("cannot build the connection pool for {shown_url}: {error}"),
                )
            })?;
        let executor = PostgresExecutor {
            pool,
            shown_url,
            password,
            #[cfg(test)]
            read_only: AtomicBool::new(true),
        };
        // Open one connection now so a bad URL fails here, not at the first question.
        drop(executor.checkout().await?);
        Ok(executor)
    }

    /// Switches the READ ONLY transaction off (tests of the database role only).
    #[cfg(test)]
    pub fn set_read_only_for_tests(&self, read_only: bool) {
        self.read_only.store(read_only, Ordering::SeqCst);
    }

    #[cfg(test)]
    fn read_only(&self) -> bool {
        self.read_only.load(Ordering::SeqCst)
    }

    #[cfg(not(test))]
    fn read_only(&self) -> bool {
        true
    }

    async fn checkout(&self) -> Result<Object, ExecFailure> {
        self.pool.get().await.map_err(|error| {
            let reason = match &error {
                PoolError::Timeout(TimeoutType::Wait) => {
                    // Not a connection problem: every connection is taken.
                    return ExecFailure::new(
                        ErrorType::Busy,
                        format!(
                            "all {POOL_SIZE} connections to PostgreSQL were in use for {} s; nothing ran, try again",
                            POOL_WAIT.as_secs()
                        ),
                    );
                }
                PoolError::Backend(error) => describe(error),
                PoolError::Timeout(_) => format!(
                    "no connection within {} s (server unreachable or not answering)",
                    CONNECT_TIMEOUT.as_secs()
                ),
                other => other.to_string(),
            };
            ExecFailure::new(
                ErrorType::ConnectionError,
                self.scrub(format!(
                    "cannot connect to PostgreSQL at {}: {reason}",
                    self.shown_url
                )),
            )
        })
    }

    /// Removes the password from a message, should anything ever echo it.
    fn scrub(&self, message: String) -> String {
        match &self.password {
            Some(password) if !password.is_empty() && message.contains(password.as_str()) => {
                message.replace(password.as_str(), "***")
            }
            _ => message,
        }
    }

    /// Runs one statement in a READ ONLY transaction that is always rolled back, and
    /// returns at most `row_cap` rows (with `truncated` when the server had more).
    ///
    /// With `verify`, the statement is first compiled by the server inside the same
    /// transaction (`EXPLAIN (VERBOSE, FORMAT JSON)`, sent in the same round trip as its
    /// Parse) and the plan judged by the guard against that policy; a refusal ends it
    /// before it is bound or executed.
    pub async fn execute(
        &self,
        sql: &str,
        limits: ExecLimits,
        verify: Option<&GuardPolicy>,
    ) -> Result<RawRows, ExecFailure> {
        let session = Session::new(self.checkout().await?);
        let deadline = limits.statement_timeout + CLIENT_GRACE;
        let backend_pid = Arc::new(AtomicI32::new(0));
        let outcome = tokio::time::timeout(
            deadline,
            run_statement(
                session.client(),
                sql,
                limits,
                self.read_only(),
                &backend_pid,
                verify,
            ),
        )
        .await;
        match outcome {
            Ok(Ok(rows)) => {
                if rows.truncated {
                    // Cut at a cap with more on the way: closing the connection stops
                    // the server producing the rest, which a rollback would wait for.
                    drop(session);
                } else {
                    session.roll_back_and_clean_in_background();
                }
                Ok(rows)
            }
            Ok(Err(failure)) => {
                session.roll_back_and_clean_in_background();
                Err(self.scrubbed(failure))
            }
            Err(_elapsed) => {
                // The server did not answer in time, not even with its own timeout:
                // ask it to cancel, throw the connection away, and make sure the
                // backend stops (a closed socket alone does not stop a statement that
                // never writes to it).
                let token = session.client().cancel_token();
                drop(session);
                let pid = backend_pid.load(Ordering::SeqCst);
                let pool = self.pool.clone();
                tokio::spawn(async move {
                    let _ = token.cancel_query(NoTls).await;
                    if pid != 0 {
                        end_backend(&pool, pid).await;
                    }
                });
                Err(ExecFailure::new(
                    ErrorType::Timeout,
                    format!(
                        "the statement did not finish within {} ms and was cancelled",
                        deadline.as_millis()
                    ),
                ))
            }
        }
    }

    /// Starts the transaction every statement runs in: READ ONLY (unless a test
    /// switched it off to exercise the database role alone).
    async fn begin<'c>(&self, client: &'c mut Object) -> Result<Transaction<'c>, ExecFailure> {
        client
            .build_transaction()
            .read_only(self.read_only())
            .start()
            .await
            .map_err(|error| failure_from(&error))
    }

    fn scrubbed(&self, mut failure: ExecFailure) -> ExecFailure {
        failure.message = self.scrub(failure.message);
        failure.hint = failure.hint.map(|hint| self.scrub(hint));
        failure
    }

    /// Reads the visible tables and views of the `public` schema with their columns,
    /// keys and approximate row counts, in a read-only transaction rolled back after.
    pub async fn introspect(&self) -> Result<Vec<TableSchema>, ExecFailure> {
        let mut client = self.checkout().await?;
        let outcome = async {
            let transaction = self.begin(&mut client).await?;
            let result = introspect(&transaction).await;
            let rolled_back = transaction.rollback().await.is_ok();
            Ok::<_, ExecFailure>((result, rolled_back))
        }
        .await;
        match outcome {
            Ok((result, true)) => result.map_err(|failure| self.scrubbed(failure)),
            Ok((result, false)) => {
                drop(Object::take(client));
                result.map_err(|failure| self.scrubbed(failure))
            }
            Err(failure) => {
                drop(Object::take(client));
                Err(self.scrubbed(failure))
            }
        }
    }
}

/// Drops prepared statements created with SQL `PREPARE` (they survive ROLLBACK),
/// leaving the protocol-level ones tokio-postgres caches for its own type lookups.
const DEALLOCATE_SQL_PREPARED: &str = "DO $$DECLARE s record; BEGIN \
    FOR s IN SELECT name FROM pg_catalog.pg_prepared_statements WHERE from_sql LOOP \
    EXECUTE pg_catalog.format('DEALLOCATE %I', s.name); END LOOP; END$$;";

/// What runs on a connection after every statement, before it goes back to the pool,
/// one statement per message: the rollback, deadpool's Clean list (CLOSE ALL, SET
/// SESSION AUTHORIZATION DEFAULT, RESET ALL, UNLISTEN *, advisory locks released, DISCARD
/// TEMP and SEQUENCES) and the SQL-level prepared statements dropped, so no session state
/// left by one statement, even one run without the guard, reaches the next. They are
/// sent together (pipelined, each in its own implicit transaction after the rollback);
/// a connection where one fails is closed, not reused.
const CLEANUP_STATEMENTS: [&str; 9] = [
    "ROLLBACK",
    "CLOSE ALL",
    "SET SESSION AUTHORIZATION DEFAULT",
    "RESET ALL",
    "UNLISTEN *",
    "SELECT pg_catalog.pg_advisory_unlock_all()",
    "DISCARD TEMP",
    "DISCARD SEQUENCES",
    DEALLOCATE_SQL_PREPARED,
];

/// Runs [`CLEANUP_STATEMENTS`], all sent before the first answer is awaited.
async fn clean(client: &Object) -> bool {
    let [a, b, c, d, e, f, g, h, i] = CLEANUP_STATEMENTS;
    let results = tokio::join!(
        client.query_typed(a, &[]),
        client.query_typed(b, &[]),
        client.query_typed(c, &[]),
        client.query_typed(d, &[]),
        client.query_typed(e, &[]),
        client.query_typed(f, &[]),
        client.query_typed(g, &[]),
        client.query_typed(h, &[]),
        client.query_typed(i, &[]),
    );
    results.0.is_ok()
        && results.1.is_ok()
        && results.2.is_ok()
        && results.3.is_ok()
        && results.4.is_ok()
        && results.5.is_ok()
        && results.6.is_ok()
        && results.7.is_ok()
        && results.8.is_ok()
}

/// A pooled connection while one statement uses it. It goes back to the pool only
/// through [`Session::roll_back_and_clean_in_background`], once its transaction is rolled
/// back and its session cleaned; dropped any other way (a timeout, a caller that went
/// away mid-statement, a failed cleaning) it is closed, so an open transaction or a
/// changed setting never reaches the next caller.
struct Session {
    client: Option<Object>,
}

impl Session {
    fn new(client: Object) -> Self {
        Session {
            client: Some(client),
        }
    }

    fn client(&self) -> &Object {
        // Some until the session ends: only `Drop` and the cleaning take it.
        self.client
            .as_ref()
            .unwrap_or_else(|| unreachable!("a session's client is taken only when it ends"))
    }

    /// Rolls back and cleans without making the caller wait, then returns the
    /// connection to the pool (or closes it when that fails).
    fn roll_back_and_clean_in_background(mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        tokio::spawn(async move {
            let mut session = Session::new(client);
            if clean(session.client()).await {
                // Clean: dropping the pool object returns it.
                drop(session.client.take());
            }
        });
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            drop(Object::take(client));
        }
    }
}

/// Whether backend `pid` is still there, or None when that cannot be checked.
async fn backend_running(pool: &Pool, pid: i32) -> Option<bool> {
    let client = pool.get().await.ok()?;
    let row = client
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE pid = $1",
            &[&pid],
        )
        .await
        .ok()?;
    Some(row.try_get::<_, i64>(0).ok()? > 0)
}

/// Polls until backend `pid` is gone or `wait` has passed.
async fn backend_stops_within(pool: &Pool, pid: i32, wait: Duration) -> bool {
    let started = std::time::Instant::now();
    loop {
        if backend_running(pool, pid).await == Some(false) {
            return true;
        }
        if started.elapsed() >= wait {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Confirms that a backend whose statement outran the client's deadline has stopped,
/// and terminates it when the cancel did not take (a statement that catches
/// query_canceled, or one busy in a function that never checks for interrupts). A
/// role may terminate its own backends, so askdb_ro needs no extra privilege.
pub(crate) async fn end_backend(pool: &Pool, pid: i32) -> BackendEnd {
    if backend_stops_within(pool, pid, BACKEND_STOP_WAIT).await {
        return BackendEnd::Gone;
    }
    if let Ok(client) = pool.get().await {
        let _ = client
            .query_one("SELECT pg_catalog.pg_terminate_backend($1)", &[&pid])
            .await;
    }
    if backend_stops_within(pool, pid, BACKEND_STOP_WAIT).await {
        BackendEnd::Terminated
    } else {
        BackendEnd::Unconfirmed
    }
}

async fn run_statement(
    client: &Object,
    sql: &str,
    limits: ExecLimits,
    read_only: bool,
    backend_pid: &AtomicI32,
    verify: Option<&GuardPolicy>,
) -> Result<RawRows, ExecFailure> {
    let timeout_ms = limits
        .statement_timeout
        .as_millis()
        .clamp(1, i32::MAX as u128);
    let lock_ms = timeout_ms.min(MAX_LOCK_WAIT.as_millis()).max(1);
    // SET cannot take bind parameters; these are integers formatted here, never text
    // from a caller. LOCAL: the settings end with the transaction.
    let begin = if read_only {
        "BEGIN TRANSACTION READ ONLY"
    } else {
        // Only the layer tests: READ WRITE explicitly, overriding even a role's
        // default_transaction_read_only, so the privileges stand alone.
        "BEGIN TRANSACTION READ WRITE"
    };
    let statement_timeout = format!("SET LOCAL statement_timeout = {timeout_ms}");
    let lock_timeout = format!("SET LOCAL lock_timeout = {lock_ms}");
    // One round trip: the transaction's start, its two settings, the backend's pid and
    // the statement's Parse, each its own extended-protocol message (never a stacked
    // simple query), are sent together, pipelined on the connection; the server handles
    // them in order. The pid names the backend to confirm stopped, should the statement
    // outrun the client's deadline. Being a query, it also takes the transaction's
    // snapshot before the statement runs, so a statement can no longer switch the
    // transaction to READ WRITE (`SET TRANSACTION READ WRITE`).
    // The plan, when the guard asks for it, follows the Parse: if the statement does
    // not parse, its own error is the one reported.
    let explain = verify.map(|_| format!("EXPLAIN (VERBOSE, FORMAT JSON) {sql}"));
    let explained = async {
        match &explain {
            Some(explain) => Some(client.query_typed(explain.as_str(), &[]).await),
            None => None,
        }
    };
    let (begun, statement_timeout_set, lock_timeout_set, pid, prepared, explained) = tokio::join!(
        client.query_typed(begin, &[]),
        client.query_typed(statement_timeout.as_str(), &[]),
        client.query_typed(lock_timeout.as_str(), &[]),
        client.query_typed_one("SELECT pg_catalog.pg_backend_pid()", &[]),
        client.prepare(sql),
        explained
    );
    // The statement's own error first: when its Parse fails, the transaction is
    // aborted and nothing runs. Then the transaction's start and settings: the statement
    // is bound and executed only inside a transaction known to have started READ ONLY
    // under its timeouts.
    let statement = prepared.map_err(|error| failure_from(&error))?;
    begun.map_err(|error| failure_from(&error))?;
    statement_timeout_set.map_err(|error| failure_from(&error))?;
    lock_timeout_set.map_err(|error| failure_from(&error))?;
    if let Ok(pid) = pid.and_then(|row| row.try_get::<_, i32>(0)) {
        backend_pid.store(pid, Ordering::SeqCst);
    }
    if let (Some(policy), Some(explained)) = (verify, explained) {
        let rows = explained.map_err(|error| failure_from(&error))?;
        let plan = rows
            .first()
            .and_then(|row| row.try_get::<_, PgCell>(0).ok())
            .map(|cell| cell.0)
            .unwrap_or(JsonValue::Null);
        judge_plan(&plan, policy)?;
    }
    let columns: Vec<String> = statement
        .columns()
        .iter()
        .map(|column| column.name().to_string())
        .collect();
    // The second round trip: Bind and Execute. Rows are read as they arrive, never
    // more than cap + 1 of them, and reading stops once the values pass the byte cap;
    // whatever the server sends beyond that is dropped unread (the guard's LIMIT keeps
    // it to the cap).
    let stream = client
        .query_raw(&statement, std::iter::empty::<&(dyn ToSql + Sync)>())
        .await
        .map_err(|error| failure_from(&error))?;
    let mut stream = std::pin::pin!(stream);
    let cap = usize::try_from(limits.row_cap).unwrap_or(usize::MAX);
    let mut rows: Vec<Vec<JsonValue>> = Vec::new();
    let mut bytes = 0u64;
    let mut truncated = false;
    while let Some(row) = std::future::poll_fn(|context| stream.as_mut().poll_next(context)).await {
        let row = row.map_err(|error| failure_from(&error))?;
        if rows.len() >= cap || bytes > limits.byte_cap {
            truncated = true;
            break;
        }
        let mut values = Vec::with_capacity(columns.len());
        for index in 0..row.len() {
            let cell: PgCell = row
                .try_get(index)
                .map_err(|error| ExecFailure::new(ErrorType::Unknown, describe(&error)))?;
            bytes += value_bytes(&cell.0);
            values.push(cell.0);
        }
        rows.push(values);
    }
    // `truncated` means a row arrived past a cap: the result was not read to its end.
    Ok(RawRows {
        columns,
        rows,
        truncated,
    })
}

/// The guard's verdict on the server's plan of the statement, as an execution failure
/// carrying the refusal. A plan that cannot be read is refused, never taken on trust.
fn judge_plan(plan: &JsonValue, policy: &GuardPolicy) -> Result<(), ExecFailure> {
    let resolution = postgres_plan::resolve(plan, SCHEMA).map_err(|unreadable| {
        ExecFailure::refused(Refusal::unreadable_resolution(&unreadable.0))
    })?;
    resolution::verdict(&resolution, policy, SCHEMA).map_err(ExecFailure::refused)
}

/// A database error with its SQLSTATE, message, hint and position; anything else is a
/// lost connection or an unknown failure.
fn failure_from(error: &tokio_postgres::Error) -> ExecFailure {
    if let Some(db) = error.as_db_error() {
        let code = db.code().code();
        return ExecFailure {
            error_type: taxonomy::from_sqlstate(code),
            message: db.message().to_string(),
            sqlstate: Some(code.to_string()),
            hint: db.hint().map(str::to_string),
            position: match db.position() {
                Some(ErrorPosition::Original(position)) => Some(*position),
                _ => None,
            },
            refusal: None,
        };
    }
    let lost = error.is_closed()
        || error
            .source()
            .is_some_and(|source| source.is::<std::io::Error>());
    if lost {
        ExecFailure::new(
            ErrorType::ConnectionError,
            format!("the connection to PostgreSQL was lost: {}", describe(error)),
        )
    } else {
        ExecFailure::new(ErrorType::Unknown, describe(error))
    }
}

fn describe(error: &dyn StdError) -> String {
    crate::text::error_chain(error)
}

// ---------------------------------------------------------------------------------
// Introspection

/// Tables and views of every user schema (those of `public` by their bare name, others
/// as `schema.table`) that the connected role may read at all: a table
/// it cannot read would only produce permission errors. Partitions are left out
/// (their parent is listed). `reltuples` is -1 until the table is first analysed.
const TABLES_SQL: &str = "\
SELECT CASE WHEN n.nspname = $1 THEN c.relname::text ELSE n.nspname::text || '.' || c.relname::text END, c.relkind::text, c.reltuples::float8 \
FROM pg_catalog.pg_class c \
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' \
  AND c.relkind IN ('r', 'p', 'v', 'm', 'f') \
  AND NOT c.relispartition \
  AND (pg_catalog.has_table_privilege(c.oid, 'SELECT') \
       OR pg_catalog.has_any_column_privilege(c.oid, 'SELECT')) \
ORDER BY c.relname";

const COLUMNS_SQL: &str = "\
SELECT CASE WHEN n.nspname = $1 THEN c.relname::text ELSE n.nspname::text || '.' || c.relname::text END, a.attname::text, \
       pg_catalog.format_type(a.atttypid, a.atttypmod), NOT a.attnotnull \
FROM pg_catalog.pg_attribute a \
JOIN pg_catalog.pg_class c ON c.oid = a.attrelid \
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' AND a.attnum > 0 AND NOT a.attisdropped \
ORDER BY c.relname, a.attnum";

/// Primary, unique and foreign keys, one row per key column in key order. A
/// referenced table outside the schema keeps its schema name.
const KEYS_SQL: &str = "\
SELECT CASE WHEN n.nspname = $1 THEN c.relname::text ELSE n.nspname::text || '.' || c.relname::text END, con.conname::text, con.contype::text, a.attname::text, \
       CASE WHEN fn.nspname = $1 THEN fc.relname::text \
            ELSE fn.nspname::text || '.' || fc.relname::text END, \
       fa.attname::text \
FROM pg_catalog.pg_constraint con \
JOIN pg_catalog.pg_class c ON c.oid = con.conrelid \
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord) \
JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum \
LEFT JOIN pg_catalog.pg_class fc ON fc.oid = con.confrelid \
LEFT JOIN pg_catalog.pg_namespace fn ON fn.oid = fc.relnamespace \
LEFT JOIN pg_catalog.pg_attribute fa \
       ON fa.attrelid = con.confrelid AND fa.attnum = con.confkey[k.ord] \
WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' AND con.contype IN ('p', 'u', 'f') \
ORDER BY c.relname, con.conname, k.ord";

async fn introspect(transaction: &Transaction<'_>) -> Result<Vec<TableSchema>, ExecFailure> {
    let fail = |error: tokio_postgres::Error| failure_from(&error);
    // The three catalog reads go out together (pipelined on the one connection), each
    // as one unnamed statement: one round trip for all of them instead of three per
    // query (parse, execute, close), which a cold `askdb mcp` start waits for.
    let schema: [(&(dyn ToSql + Sync), Type); 1] = [(&SCHEMA, Type::NAME)];
    let (table_rows, column_rows, key_rows) = tokio::try_join!(
        transaction.query_typed(TABLES_SQL, &schema),
        transaction.query_typed(COLUMNS_SQL, &schema),
        transaction.query_typed(KEYS_SQL, &schema),
    )
    .map_err(fail)?;
    let mut tables: BTreeMap<String, TableSchema> = BTreeMap::new();
    for row in table_rows {
        let name: String = row.try_get(0).map_err(fail)?;
        let kind: String = row.try_get(1).map_err(fail)?;
        let tuples: f64 = row.try_get(2).map_err(fail)?;
        // Views and never-analysed tables have no estimate.
        let row_count = (kind != "v" && tuples >= 0.0).then(|| tuples.round() as i64);
        tables.insert(
            name.clone(),
            TableSchema {
                name,
                columns: Vec::new(),
                primary_key: Vec::new(),
                unique: Vec::new(),
                foreign_keys: Vec::new(),
                row_count,
            },
        );
    }
    for row in column_rows {
        let table: String = row.try_get(0).map_err(fail)?;
        if let Some(schema) = tables.get_mut(&table) {
            schema.columns.push(ColumnSchema {
                name: row.try_get(1).map_err(fail)?,
                data_type: row.try_get(2).map_err(fail)?,
                nullable: row.try_get(3).map_err(fail)?,
            });
        }
    }
    // (table, constraint) -> (kind, columns, referenced table, referenced columns)
    type Key = (String, Vec<String>, Option<String>, Vec<String>);
    let mut keys: BTreeMap<(String, String), Key> = BTreeMap::new();
    for row in key_rows {
        let table: String = row.try_get(0).map_err(fail)?;
        let name: String = row.try_get(1).map_err(fail)?;
        let kind: String = row.try_get(2).map_err(fail)?;
        let column: String = row.try_get(3).map_err(fail)?;
        let target: Option<String> = row.try_get(4).map_err(fail)?;
        let target_column: Option<String> = row.try_get(5).map_err(fail)?;
        let entry = keys
            .entry((table, name))
            .or_insert_with(|| (kind, Vec::new(), target, Vec::new()));
        entry.1.push(column);
        if let Some(target_column) = target_column {
            entry.3.push(target_column);
        }
    }
    for ((table, _name), (kind, columns, target, target_columns)) in keys {
        let Some(schema) = tables.get_mut(&table) else {
            continue;
        };
        match kind.as_str() {
            "p" => schema.primary_key = columns,
            "u" => schema.unique.push(columns),
            "f" => {
                if let Some(references_table) = target {
                    schema.foreign_keys.push(ForeignKey {
                        columns,
                        references_table,
                        references_columns: target_columns,
                    });
                }
            }
            _ => {}
        }
    }
    Ok(tables.into_values().collect())
}

// ---------------------------------------------------------------------------------
// Values: PostgreSQL's binary format to JSON

/// One result cell as JSON, decoded by its column type. Accepts every type, so no
/// column can make a row fail; unknown types become a `"<type name>"` placeholder.
pub(crate) struct PgCell(pub JsonValue);

impl<'a> FromSql<'a> for PgCell {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(PgCell(decode(ty, raw)))
    }

    fn from_sql_null(_ty: &Type) -> Result<Self, BoxError> {
        Ok(PgCell(JsonValue::Null))
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }
}

/// A NUMERIC as exact decimal text ("12.30", "-0.05", "NaN", "Infinity"), with as
/// many fraction digits as the value's display scale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PgNumeric {
    pub text: String,
    /// Digits after the decimal point.
    pub scale: u16,
}

impl<'a> FromSql<'a> for PgNumeric {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        decode_numeric(raw).ok_or_else(|| "malformed NUMERIC value".into())
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
}

impl PgNumeric {
    /// A JSON number when converting to f64 and back gives the same decimal text
    /// (integers when the scale is 0), else the exact text as a JSON string.
    pub fn to_json(&self) -> JsonValue {
        let text = self.text.as_str();
        if self.scale == 0 {
            if let Ok(integer) = text.parse::<i64>() {
                return JsonValue::from(integer);
            }
            if let Ok(integer) = text.parse::<u64>() {
                return JsonValue::from(integer);
            }
            return JsonValue::String(self.text.clone());
        }
        if let Ok(float) = text.parse::<f64>() {
            let back = format!("{:.*}", usize::from(self.scale), float);
            if float.is_finite() && back == text {
                if let Some(number) = serde_json::Number::from_f64(float) {
                    return JsonValue::Number(number);
                }
            }
        }
        JsonValue::String(self.text.clone())
    }
}

/// Decodes NUMERIC's binary form: digit count, weight (base-10000 exponent of the
/// first digit), sign, display scale, then base-10000 digits.
fn decode_numeric(raw: &[u8]) -> Option<PgNumeric> {
    let word = |index: usize| {
        raw.get(index * 2..index * 2 + 2)
            .map(|bytes| u16::from_be_bytes([bytes[0], bytes[1]]))
    };
    let digit_count = usize::from(word(0)?);
    let weight = i64::from(word(1)? as i16);
    let sign = word(2)?;
    let scale = word(3)?;
    let special = |text: &str| {
        Some(PgNumeric {
            text: text.to_string(),
            scale: 0,
        })
    };
    let negative = match sign {
        0x0000 => false,
        0x4000 => true,
        0xC000 => return special("NaN"),
        0xD000 => return special("Infinity"),
        0xF000 => return special("-Infinity"),
        _ => return None,
    };
    let mut digits = Vec::with_capacity(digit_count);
    for index in 0..digit_count {
        let digit = word(4 + index)?;
        if digit > 9999 {
            return None;
        }
        digits.push(digit);
    }
    if raw.len() != 8 + digit_count * 2 {
        return None;
    }
    // Digit i stands for digit * 10000^(weight - i).
    let digit_at = |position: i64| -> u16 {
        let index = weight - position;
        if index < 0 {
            return 0;
        }
        usize::try_from(index)
            .ok()
            .and_then(|index| digits.get(index).copied())
            .unwrap_or(0)
    };
    let mut text = String::new();
    if negative {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        text.push_str(&digit_at(weight).to_string());
        for power in (0..weight).rev() {
            text.push_str(&format!("{:04}", digit_at(power)));
        }
    }
    if scale > 0 {
        let mut fraction = String::new();
        let mut power = -1;
        while fraction.len() < usize::from(scale) {
            fraction.push_str(&format!("{:04}", digit_at(power)));
            power -= 1;
        }
        fraction.truncate(usize::from(scale));
        text.push('.');
        text.push_str(&fraction);
    }
    Some(PgNumeric { text, scale })
}

fn decode(ty: &Type, raw: &[u8]) -> JsonValue {
    decode_known(ty, raw).unwrap_or_else(|| placeholder(ty))
}

fn placeholder(ty: &Type) -> JsonValue {
    match ty.kind() {
        Kind::Array(element) => JsonValue::String(format!("<{}[]>", element.name())),
        _ => JsonValue::String(format!("<{}>", ty.name())),
    }
}

fn be<const N: usize>(raw: &[u8]) -> Option<[u8; N]> {
    raw.try_into().ok()
}

fn text_of(raw: &[u8]) -> JsonValue {
    JsonValue::String(String::from_utf8_lossy(raw).into_owned())
}

fn float_json(value: f64) -> JsonValue {
    if value.is_nan() {
        JsonValue::String("NaN".to_string())
    } else if value.is_infinite() {
        JsonValue::String(if value > 0.0 { "Infinity" } else { "-Infinity" }.to_string())
    } else {
        serde_json::Number::from_f64(value)
            .map(JsonValue::Number)
            .unwrap_or(JsonValue::Null)
    }
}

/// The value by type, or None when the type has no decoder (or the bytes are not
/// what the type promises), which becomes a placeholder.
fn decode_known(ty: &Type, raw: &[u8]) -> Option<JsonValue> {
    let value = match *ty {
        Type::BOOL => JsonValue::Bool(be::<1>(raw)?[0] != 0),
        Type::INT2 => JsonValue::from(i16::from_be_bytes(be(raw)?)),
        Type::INT4 => JsonValue::from(i32::from_be_bytes(be(raw)?)),
        Type::INT8 => JsonValue::from(i64::from_be_bytes(be(raw)?)),
        Type::OID => JsonValue::from(u32::from_be_bytes(be(raw)?)),
        Type::FLOAT4 => float_json(f64::from(f32::from_be_bytes(be(raw)?))),
        Type::FLOAT8 => float_json(f64::from_be_bytes(be(raw)?)),
        Type::NUMERIC => PgNumeric::from_sql(ty, raw).ok()?.to_json(),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::CHAR => {
            text_of(raw)
        }
        Type::JSON => serde_json::from_slice(raw).unwrap_or_else(|_| text_of(raw)),
        Type::JSONB => {
            // Version byte 1, then the JSON text.
            let (&version, body) = raw.split_first()?;
            if version != 1 {
                return None;
            }
            serde_json::from_slice(body).unwrap_or_else(|_| text_of(body))
        }
        Type::UUID => JsonValue::String(uuid_text(&be::<16>(raw)?)),
        Type::DATE => JsonValue::String(date_text(i32::from_be_bytes(be(raw)?))),
        Type::TIMESTAMP => JsonValue::String(timestamp_text(i64::from_be_bytes(be(raw)?), "")),
        Type::TIMESTAMPTZ => {
            JsonValue::String(timestamp_text(i64::from_be_bytes(be(raw)?), "+00:00"))
        }
        Type::TIME => JsonValue::String(time_text(i64::from_be_bytes(be(raw)?))),
        Type::TIMETZ => {
            let (time, zone) = raw.split_at_checked(8)?;
            let micros = i64::from_be_bytes(be(time)?);
            // Stored as seconds west of UTC; printed the ISO way (east positive).
            let east = -i64::from(i32::from_be_bytes(be(zone)?));
            JsonValue::String(format!("{}{}", time_text(micros), offset_text(east)))
        }
        Type::INTERVAL => {
            let micros = i64::from_be_bytes(be(raw.get(0..8)?)?);
            let days = i32::from_be_bytes(be(raw.get(8..12)?)?);
            let months = i32::from_be_bytes(be(raw.get(12..16)?)?);
            if raw.len() != 16 {
                return None;
            }
            JsonValue::String(interval_text(months, days, micros))
        }
        Type::BYTEA => JsonValue::String(format!("<bytea, {} bytes>", raw.len())),
        _ => match ty.kind() {
            Kind::Domain(inner) => decode_known(inner, raw)?,
            // An enum's binary form is its label.
            Kind::Enum(_) => text_of(raw),
            Kind::Array(element) => decode_array(element, raw)?,
            _ => return None,
        },
    };
    Some(value)
}

/// An array as nested JSON arrays: dimension count, null flag, element type, then
/// (length, lower bound) per dimension, then each element as length + bytes (-1 for
/// NULL).
fn decode_array(element: &Type, raw: &[u8]) -> Option<JsonValue> {
    let int = |at: usize| {
        raw.get(at..at + 4)
            .and_then(be::<4>)
            .map(i32::from_be_bytes)
    };
    let dimensions = usize::try_from(int(0)?).ok()?;
    if dimensions == 0 {
        return Some(JsonValue::Array(Vec::new()));
    }
    if dimensions > 6 {
        return None;
    }
    let mut lengths = Vec::with_capacity(dimensions);
    for dimension in 0..dimensions {
        lengths.push(usize::try_from(int(12 + dimension * 8)?).ok()?);
    }
    let mut at = 12 + dimensions * 8;
    let total: usize = lengths
        .iter()
        .try_fold(1usize, |acc, n| acc.checked_mul(*n))?;
    let mut flat = Vec::with_capacity(total.min(10_000));
    for _ in 0..total {
        let length = int(at)?;
        at += 4;
        if length < 0 {
            flat.push(JsonValue::Null);
        } else {
            let length = usize::try_from(length).ok()?;
            let bytes = raw.get(at..at + length)?;
            at += length;
            flat.push(decode(element, bytes));
        }
    }
    // Fold the flat list into nested arrays, innermost dimension first.
    let mut level = flat;
    for length in lengths.iter().skip(1).rev() {
        if *length == 0 {
            break;
        }
        level = level
            .chunks(*length)
            .map(|chunk| JsonValue::Array(chunk.to_vec()))
            .collect();
    }
    Some(JsonValue::Array(level))
}

fn uuid_text(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Days between 1970-01-01 and 2000-01-01, PostgreSQL's epoch for dates and times.
const PG_EPOCH_DAYS: i64 = 10_957;
const MICROS_PER_DAY: i64 = 86_400_000_000;

/// 'YYYY-MM-DD' for a day count since 2000-01-01, and whether the year is BC (as
/// PostgreSQL writes it: year 0 is 1 BC).
fn civil_text(days_since_2000: i64) -> (String, bool) {
    let (year, month, day) = crate::calendar::civil_from_days(days_since_2000 + PG_EPOCH_DAYS);
    if year <= 0 {
        (format!("{:04}-{month:02}-{day:02}", 1 - year), true)
    } else {
        (format!("{year:04}-{month:02}-{day:02}"), false)
    }
}

fn date_text(days: i32) -> String {
    match days {
        i32::MAX => "infinity".to_string(),
        i32::MIN => "-infinity".to_string(),
        _ => {
            let (text, bc) = civil_text(i64::from(days));
            if bc {
                format!("{text} BC")
            } else {
                text
            }
        }
    }
}

/// 'HH:MM:SS', with the microseconds when there are any (trailing zeros dropped).
fn clock_text(micros_of_day: i64) -> String {
    let seconds = micros_of_day / 1_000_000;
    let fraction = micros_of_day % 1_000_000;
    let mut text = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if fraction != 0 {
        let digits = format!("{fraction:06}");
        text.push('.');
        text.push_str(digits.trim_end_matches('0'));
    }
    text
}

/// 'YYYY-MM-DD HH:MM:SS[.ffffff]' plus `zone`, the form PostgreSQL prints (and the
/// form SQLite stores), for microseconds since 2000-01-01 00:00:00.
fn timestamp_text(micros: i64, zone: &str) -> String {
    match micros {
        i64::MAX => "infinity".to_string(),
        i64::MIN => "-infinity".to_string(),
        _ => {
            let days = micros.div_euclid(MICROS_PER_DAY);
            let (date, bc) = civil_text(days);
            let clock = clock_text(micros.rem_euclid(MICROS_PER_DAY));
            let era = if bc { " BC" } else { "" };
            format!("{date} {clock}{zone}{era}")
        }
    }
}

fn time_text(micros: i64) -> String {
    clock_text(micros.rem_euclid(MICROS_PER_DAY + 1))
}

/// '+HH:MM' for an offset in seconds east of UTC.
fn offset_text(east_seconds: i64) -> String {
    let sign = if east_seconds < 0 { '-' } else { '+' };
    let seconds = east_seconds.abs();
    let mut text = format!("{sign}{:02}:{:02}", seconds / 3600, seconds / 60 % 60);
    if seconds % 60 != 0 {
        text.push_str(&format!(":{:02}", seconds % 60));
    }
    text
}

/// An interval as an ISO 8601 duration, the way PostgreSQL's `iso_8601` interval
/// style writes it: each part carries its own sign ("P1Y2M3DT4H5M6.5S", "P-1D",
/// "PT0S" for zero).
fn interval_text(months: i32, days: i32, micros: i64) -> String {
    let mut text = String::from("P");
    let years = months / 12;
    let months = months % 12;
    if years != 0 {
        text.push_str(&format!("{years}Y"));
    }
    if months != 0 {
        text.push_str(&format!("{months}M"));
    }
    if days != 0 {
        text.push_str(&format!("{days}D"));
    }
    if micros != 0 {
        text.push('T');
        let hours = micros / 3_600_000_000;
        let minutes = micros / 60_000_000 % 60;
        let second_micros = micros % 60_000_000;
        if hours != 0 {
            text.push_str(&format!("{hours}H"));
        }
        if minutes != 0 {
            text.push_str(&format!("{minutes}M"));
        }
        if second_micros != 0 {
            let sign = if second_micros < 0 { "-" } else { "" };
            let magnitude = second_micros.unsigned_abs();
            let whole = magnitude / 1_000_000;
            let fraction = magnitude % 1_000_000;
            text.push_str(&format!("{sign}{whole}"));
            if fraction != 0 {
                let digits = format!("{fraction:06}");
                text.push('.');
                text.push_str(digits.trim_end_matches('0'));
            }
            text.push('S');
        }
    }
    if text == "P" {
        text.push_str("T0S");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numeric(words: &[u16]) -> Vec<u8> {
        words.iter().flat_map(|word| word.to_be_bytes()).collect()
    }

    #[test]
    fn numeric_binary_decodes_to_exact_decimal_text() {
        // 12.30: one integer digit 12, one fraction digit 3000, scale 2.
        let value = decode_numeric(&numeric(&[2, 0, 0, 2, 12, 3000])).expect("decodes");
        assert_eq!(value.text, "12.30");
        assert_eq!(value.to_json(), serde_json::json!(12.3));
        // -0.05: weight -1, digit 500, scale 2, negative.
        let value = decode_numeric(&numeric(&[1, (-1i16) as u16, 0x4000, 2, 500])).expect("ok");
        assert_eq!(value.text, "-0.05");
        // 0 with scale 2.
        let value = decode_numeric(&numeric(&[0, 0, 0, 2])).expect("zero");
        assert_eq!(value.text, "0.00");
        // 10000000 (weight 1, digits [1000, 0] trimmed to [1000]).
        let value = decode_numeric(&numeric(&[1, 1, 0, 0, 1000])).expect("ok");
        assert_eq!(value.text, "10000000");
        assert_eq!(value.to_json(), serde_json::json!(10_000_000));
        // 0.00001234: weight -2 (first digit is 10000^-2), digits 1234, scale 8.
        let value = decode_numeric(&numeric(&[1, (-2i16) as u16, 0, 8, 1234])).expect("ok");
        assert_eq!(value.text, "0.00001234");
        // Too many digits for f64: stays exact text.
        let value =
            decode_numeric(&numeric(&[6, 4, 0, 8, 1, 2345, 6789, 123, 4567, 8901])).expect("ok");
        assert_eq!(value.text, "12345678901234567.89010000");
        assert_eq!(value.to_json(), serde_json::json!(value.text));
        assert_eq!(
            decode_numeric(&numeric(&[0, 0, 0xC000, 0])).map(|n| n.text),
            Some("NaN".to_string())
        );
        assert_eq!(
            decode_numeric(&numeric(&[0, 0, 0xF000, 0])).map(|n| n.text),
            Some("-Infinity".to_string())
        );
        // The FromSql impl is the path result cells take.
        let bytes = numeric(&[2, 0, 0, 2, 12, 3000]);
        assert!(<PgNumeric as FromSql>::accepts(&Type::NUMERIC));
        assert!(!<PgNumeric as FromSql>::accepts(&Type::FLOAT8));
        let value = <PgNumeric as FromSql>::from_sql(&Type::NUMERIC, &bytes).expect("decodes");
        assert_eq!(value.text, "12.30");
        assert_eq!(decode(&Type::NUMERIC, &bytes), serde_json::json!(12.3));
        // Malformed input never panics.
        assert!(decode_numeric(&[0, 1]).is_none());
        assert!(decode_numeric(&numeric(&[2, 0, 0, 0, 1])).is_none());
        assert!(decode_numeric(&numeric(&[1, 0, 0, 0, 10000])).is_none());
    }

    #[test]
    fn dates_times_and_intervals_print_as_iso_text() {
        assert_eq!(date_text(0), "2000-01-01");
        assert_eq!(date_text(9132), "2025-01-01");
        assert_eq!(date_text(-1), "1999-12-31");
        assert_eq!(date_text(i32::MAX), "infinity");
        assert_eq!(date_text(-730_485), "0001-01-01 BC");
        assert_eq!(date_text(-730_119), "0001-01-01");
        let micros = 9132 * MICROS_PER_DAY + (10 * 3600 + 5 * 60 + 9) * 1_000_000;
        assert_eq!(timestamp_text(micros, ""), "2025-01-01 10:05:09");
        assert_eq!(
            timestamp_text(micros + 500_000, "+00:00"),
            "2025-01-01 10:05:09.5+00:00"
        );
        assert_eq!(timestamp_text(-1, ""), "1999-12-31 23:59:59.999999");
        assert_eq!(time_text(3_600_000_000 + 1), "01:00:00.000001");
        assert_eq!(offset_text(19_800), "+05:30");
        assert_eq!(offset_text(-3600), "-01:00");
        assert_eq!(interval_text(0, 0, 0), "PT0S");
        assert_eq!(
            interval_text(14, 3, (4 * 3600 + 5 * 60 + 6) * 1_000_000 + 500_000),
            "P1Y2M3DT4H5M6.5S"
        );
        assert_eq!(interval_text(0, -1, 0), "P-1D");
        assert_eq!(interval_text(0, 0, -90 * 1_000_000), "PT-1M-30S");
    }

    #[test]
    fn unknown_types_become_placeholders_and_never_panic() {
        assert_eq!(
            decode(&Type::INET, &[2, 32, 0, 4, 127, 0, 0, 1]),
            JsonValue::String("<inet>".into())
        );
        assert_eq!(
            decode(&Type::INT4, &[1, 2]),
            JsonValue::String("<int4>".into())
        );
        assert_eq!(
            decode(&Type::INT4_ARRAY, &[0, 0]),
            JsonValue::String("<int4[]>".into())
        );
        assert_eq!(
            decode(&Type::UUID, &[0xab; 16]),
            JsonValue::String("abababab-abab-abab-abab-abababababab".into())
        );
    }
}
