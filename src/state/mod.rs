//! The state `askdb serve` replicas share (`--state-url postgres://...`, decision 0079):
//! the connection pool to the PostgreSQL database holding the schema `askdb_state`
//! ([`schema`]), and the shared halves of what a single server keeps in memory: the
//! spend ledger's reservations ([`ledger`]), the askers' token buckets ([`pace`]), the
//! page's sessions and the revoked users ([`sign_in`]), and the users themselves
//! ([`users`], a `crate::users::UserStore`). Each is one statement or one
//! short transaction on the pool; nothing here knows about requests. Without a state
//! URL none of this is used.
//!
//! This is administration, not a query route: it never runs model or user SQL.

pub mod ledger;
pub mod pace;
pub mod schema;
pub mod sign_in;
pub mod users;

use std::time::{Duration, Instant};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio_postgres::NoTls;

/// Connections one replica holds to the state: a reservation, a settlement and a
/// bucket check each take one for a few milliseconds.
const POOL_SIZE: usize = 8;
/// How long a request waits for a connection, or for one to be made.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// What went wrong with the shared state. URLs are shown with the password redacted.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("--state-url {url}: {reason}")]
    BadUrl { url: String, reason: String },
    #[error("the shared state at {url} does not answer: {detail}")]
    Unreachable { url: String, detail: String },
    #[error("the shared state at {url} has no {table} table: run `askdb db setup` against that database (again), which creates the askdb_state schema, what it lacks, and its role")]
    NoSchema { url: String, table: &'static str },
    #[error("shared state: {0}")]
    Query(String),
}

impl From<tokio_postgres::Error> for StateError {
    fn from(error: tokio_postgres::Error) -> Self {
        StateError::Query(crate::text::error_chain(&error))
    }
}

impl From<deadpool_postgres::PoolError> for StateError {
    fn from(error: deadpool_postgres::PoolError) -> Self {
        StateError::Query(format!(
            "no connection: {}",
            crate::text::error_chain(&error)
        ))
    }
}

/// The pool to the shared state's database. Cheap to clone: clones share the pool.
#[derive(Clone)]
pub struct SharedState {
    pool: Pool,
    /// The URL with its password redacted: the only form that is ever shown.
    shown_url: String,
}

impl std::fmt::Debug for SharedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedState")
            .field("url", &self.shown_url)
            .finish()
    }
}

impl SharedState {
    /// Connects to `url` and checks that the schema is there (one round trip each), so
    /// a replica with a wrong URL stops before it listens.
    pub async fn connect(url: &str) -> Result<SharedState, StateError> {
        let shown_url = crate::text::redact_password(url);
        let is_postgres = url.starts_with("postgres://") || url.starts_with("postgresql://");
        if !is_postgres {
            return Err(StateError::BadUrl {
                url: shown_url,
                reason: "the shared state is kept in PostgreSQL: give a postgres:// URL"
                    .to_string(),
            });
        }
        let mut config: tokio_postgres::Config =
            url.parse()
                .map_err(|error: tokio_postgres::Error| StateError::BadUrl {
                    url: shown_url.clone(),
                    reason: crate::text::error_chain(&error),
                })?;
        config.connect_timeout(CONNECT_TIMEOUT);
        if config.get_application_name().is_none() {
            config.application_name("askdb state");
        }
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|error| StateError::BadUrl {
                url: shown_url.clone(),
                reason: error.to_string(),
            })?;
        let state = SharedState { pool, shown_url };
        let client = state
            .pool
            .get()
            .await
            .map_err(|error| StateError::Unreachable {
                url: state.shown_url.clone(),
                detail: crate::text::error_chain(&error),
            })?;
        drop(client);
        state.require_table(schema::PROBE_TABLE).await?;
        Ok(state)
    }

    /// Ok when `table` exists: a state made by an older `askdb db setup` lacks the
    /// tables added since, and is told to run it again (its statements only create what
    /// is missing) rather than failing later on a query.
    pub async fn require_table(&self, table: &'static str) -> Result<(), StateError> {
        let client = self.pool.get().await?;
        let found: Option<String> = client
            .query_one("SELECT to_regclass($1)::text", &[&table])
            .await?
            .get(0);
        match found {
            Some(_) => Ok(()),
            None => Err(StateError::NoSchema {
                url: self.shown_url.clone(),
                table,
            }),
        }
    }

    /// Ok when every table a replica uses exists ([`schema::REPLICA_TABLES`]); else the
    /// first one missing, with the command that makes it.
    pub async fn require_replica_tables(&self) -> Result<(), StateError> {
        for table in schema::REPLICA_TABLES {
            self.require_table(table).await?;
        }
        Ok(())
    }

    pub fn pool(&self) -> &deadpool_postgres::Pool {
        &self.pool
    }

    /// The URL with its password redacted.
    pub fn shown_url(&self) -> &str {
        &self.shown_url
    }

    /// One round trip (`SELECT 1`) and how long it took: health's check.
    pub async fn ping(&self) -> Result<Duration, StateError> {
        let started = Instant::now();
        let client = self.pool.get().await?;
        client.query_one("SELECT 1", &[]).await?;
        Ok(started.elapsed())
    }
}

/// Creates the schema and its tables ([`schema::STATEMENTS`], in order) over an
/// administrator's connection; safe to run again.
pub async fn apply_schema(client: &impl tokio_postgres::GenericClient) -> Result<(), StateError> {
    for statement in schema::STATEMENTS {
        client.execute(*statement, &[]).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
