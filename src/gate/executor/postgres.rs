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
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
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

use super::{value_bytes, ExecFailure, ExecLimits, RawRows, Stage};
use crate::gate::guard::{postgres_plan, resolution, GuardPolicy, Refusal};
use crate::gate::taxonomy::{self, ErrorType};
use crate::schema::{ColumnSchema, ForeignKey, TableSchema};
use crate::text::redact_password;

mod decode;
mod introspect;

use decode::{PgCell, WireLength};
use introspect::*;

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

/// The largest plan the guard reads. A plan past it holds a constant the planner folded
/// from the statement's own values (`replace(repeat(...), ...)` planned as its result),
/// which would cost askdb its size several times over to read.
const MAX_PLAN_BYTES: u64 = 4 * 1024 * 1024;

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
    /// before it is bound or executed. At `Stage::Verdict` it ends after the verdict.
    pub async fn execute(
        &self,
        sql: &str,
        limits: ExecLimits,
        verify: Option<&GuardPolicy>,
        stage: Stage,
    ) -> Result<RawRows, ExecFailure> {
        let session = Session::new(self.checkout().await?);
        let Some(client) = session.client() else {
            return Err(ExecFailure::new(
                ErrorType::ConnectionError,
                "the connection closed before the statement was sent",
            ));
        };
        let deadline = limits.statement_timeout + CLIENT_GRACE;
        let backend_pid = Arc::new(AtomicI32::new(0));
        let outcome = tokio::time::timeout(
            deadline,
            run_statement(
                client,
                sql,
                limits,
                self.read_only(),
                &backend_pid,
                verify,
                stage,
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
                let token = session.client().map(|client| client.cancel_token());
                drop(session);
                let pid = backend_pid.load(Ordering::SeqCst);
                let pool = self.pool.clone();
                tokio::spawn(async move {
                    if let Some(token) = token {
                        let _ = token.cancel_query(NoTls).await;
                    }
                    if pid != 0 {
                        count_backend_end(end_backend(&pool, pid).await);
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

    /// The connection, until the session ends (only `Drop` and the cleaning take it).
    fn client(&self) -> Option<&Object> {
        self.client.as_ref()
    }

    /// Rolls back and cleans without making the caller wait, then returns the
    /// connection to the pool (or closes it when that fails).
    fn roll_back_and_clean_in_background(mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        tokio::spawn(async move {
            let mut session = Session::new(client);
            let cleaned = match session.client() {
                Some(client) => clean(client).await,
                None => false,
            };
            if cleaned {
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
static BACKENDS_TERMINATED: AtomicU64 = AtomicU64::new(0);
static BACKENDS_UNCONFIRMED: AtomicU64 = AtomicU64::new(0);

/// Backends that outran the client's deadline and did not stop at the cancel, since the
/// process started: (terminated, still running or unknown after the termination).
pub(crate) fn stubborn_backends() -> (u64, u64) {
    (
        BACKENDS_TERMINATED.load(Ordering::Relaxed),
        BACKENDS_UNCONFIRMED.load(Ordering::Relaxed),
    )
}

fn count_backend_end(end: BackendEnd) {
    match end {
        BackendEnd::Gone => {}
        BackendEnd::Terminated => {
            BACKENDS_TERMINATED.fetch_add(1, Ordering::Relaxed);
        }
        BackendEnd::Unconfirmed => {
            BACKENDS_UNCONFIRMED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

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

/// Sets the signed-in user's name for the transaction alone (`is_local`), as
/// [`crate::gate::user::USER_SETTING`].
const USER_SETTING_SQL: &str = "SELECT pg_catalog.set_config('askdb.user', $1, true)";

async fn run_statement(
    client: &Object,
    sql: &str,
    limits: ExecLimits,
    read_only: bool,
    backend_pid: &AtomicI32,
    verify: Option<&GuardPolicy>,
    stage: Stage,
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
    // The signed-in user, for the database's row-level security: set by askdb alone,
    // bound as a parameter, local to this transaction (empty when nobody signed in).
    let user = crate::gate::user::current();
    let user_text: &str = user.as_deref().unwrap_or("");
    let user_param: [(&(dyn ToSql + Sync), Type); 1] = [(&user_text, Type::TEXT)];
    let explained = async {
        match &explain {
            Some(explain) => Some(client.query_typed(explain.as_str(), &[]).await),
            None => None,
        }
    };
    let (begun, statement_timeout_set, lock_timeout_set, user_set, pid, prepared, explained) = tokio::join!(
        client.query_typed(begin, &[]),
        client.query_typed(statement_timeout.as_str(), &[]),
        client.query_typed(lock_timeout.as_str(), &[]),
        client.query_typed(USER_SETTING_SQL, &user_param),
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
    user_set.map_err(|error| failure_from(&error))?;
    if let Ok(pid) = pid.and_then(|row| row.try_get::<_, i32>(0)) {
        backend_pid.store(pid, Ordering::SeqCst);
    }
    if let (Some(policy), Some(explained)) = (verify, explained) {
        let rows = explained.map_err(|error| denied_plan(failure_from(&error), policy))?;
        let plan_bytes = rows
            .first()
            .and_then(|row| row.try_get::<_, WireLength>(0).ok())
            .map_or(0, |length| length.0);
        if plan_bytes > MAX_PLAN_BYTES {
            return Err(ExecFailure::refused(Refusal::plan_too_large(
                plan_bytes,
                MAX_PLAN_BYTES,
            )));
        }
        let plan = rows
            .first()
            .and_then(|row| row.try_get::<_, PgCell>(0).ok())
            .map(|cell| cell.0)
            .unwrap_or(JsonValue::Null);
        judge_plan(&plan, policy)?;
    }
    if stage == Stage::Verdict {
        return Ok(RawRows {
            columns: Vec::new(),
            rows: Vec::new(),
            truncated: false,
        });
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
        // The row's size on the wire first: a row past the cap ends the read before any
        // of its values is decoded (a decoded value is a second copy, larger as JSON).
        let wire: u64 = (0..row.len())
            .map(|index| {
                row.try_get::<_, WireLength>(index)
                    .map_or(0, |length| length.0)
            })
            .sum();
        if bytes + wire > limits.byte_cap {
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

/// A plan the server refused for want of a privilege (the role's column grants leave
/// restricted columns out; it has no grant on hidden tables): the guard's refusal of the
/// relation it names, in the guard's words, so the answer does not depend on which layer
/// saw it first. Any other failure stands as it is.
fn denied_plan(failure: ExecFailure, policy: &GuardPolicy) -> ExecFailure {
    if failure.error_type != ErrorType::PermissionDenied {
        return failure;
    }
    // "permission denied for table customers", "... for sequence askdb_query_log_id_seq"
    let relation = failure
        .message
        .strip_prefix("permission denied for ")
        .and_then(|rest| rest.rsplit(' ').next())
        .map(|name| name.trim_matches('"').to_lowercase());
    match relation.and_then(|name| Refusal::for_denied_relation(&name, policy)) {
        Some(refusal) => ExecFailure::refused(refusal),
        None => failure,
    }
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
