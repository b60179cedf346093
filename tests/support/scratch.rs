//! A test's own PostgreSQL database and role names, created by the test and dropped when
//! it ends, pass or fail. Shared by the library's unit tests (included with `#[path]`)
//! and the integration tests, so there is one way to make and clean up scratch state on
//! the shared server. The server is `ASKDB_TEST_POSTGRES_URL`, else the development and
//! CI server at 127.0.0.1:5432.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::ci::skip_or_fail;

const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

static SCRATCH_COUNTER: AtomicU32 = AtomicU32::new(0);

/// The superuser URL the tests use.
pub fn admin_url() -> String {
    std::env::var("ASKDB_TEST_POSTGRES_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_ADMIN_URL.to_string())
}

/// Connects with a short timeout; the connection task runs on the current runtime.
pub async fn pg_connect(url: &str) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let mut config: tokio_postgres::Config = url.parse()?;
    config.connect_timeout(Duration::from_secs(3));
    let (client, connection) = config.connect(tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// Runs `work` on a thread of its own with its own runtime: callable from a test's
/// runtime, from a plain test, and from `Drop` while a failed test unwinds.
fn on_own_runtime<T: Send + 'static>(
    work: impl FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = T>>> + Send + 'static,
) -> Option<T> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        Some(runtime.block_on(work()))
    })
    .join()
    .ok()
    .flatten()
}

/// One test's database and role names. Nothing is created here: the test creates what
/// it needs (usually with `askdb db setup`); Drop removes the database and the roles.
pub struct Scratch {
    pub admin_url: String,
    pub database: String,
    pub read_only_role: String,
    pub log_role: String,
    /// For the replicas' shared state (`askdb_state` in production).
    pub state_role: String,
}

impl Scratch {
    /// Names for this test (prefix `askdb_<kind>_`), or None after a SKIPPED line when
    /// no server answers (a failure under CI).
    pub fn new(test: &str, kind: &str) -> Option<Scratch> {
        let admin_url = admin_url();
        let probe = admin_url.clone();
        let reachable = on_own_runtime(move || {
            Box::pin(async move {
                pg_connect(&probe)
                    .await
                    .map(|_| ())
                    .map_err(|error| error.to_string())
            })
        })
        .unwrap_or_else(|| Err("the connection check could not run".to_string()));
        if let Err(error) = reachable {
            skip_or_fail(
                test,
                &format!("PostgreSQL is not reachable at the test server: {error}"),
            );
            return None;
        }
        let suffix = format!(
            "{}_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos() % 1_000_000_000_000),
            SCRATCH_COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        Some(Scratch {
            admin_url,
            database: format!("askdb_{kind}_test_{suffix}"),
            read_only_role: format!("askdb_ro_{kind}{suffix}"),
            log_role: format!("askdb_log_{kind}{suffix}"),
            state_role: format!("askdb_st_{kind}{suffix}"),
        })
    }

    pub fn roles(&self) -> [String; 3] {
        [
            self.read_only_role.clone(),
            self.log_role.clone(),
            self.state_role.clone(),
        ]
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let database = self.database.clone();
        let roles = self.roles();
        let cleaned = on_own_runtime(move || {
            Box::pin(async move {
                let admin = pg_connect(&admin_url)
                    .await
                    .map_err(|error| error.to_string())?;
                admin
                    .execute(
                        "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity \
                         WHERE datname = $1 AND pid <> pg_catalog.pg_backend_pid()",
                        &[&database],
                    )
                    .await
                    .map_err(|error| error.to_string())?;
                // The names are this module's own (letters, digits, underscores).
                admin
                    .batch_execute(&format!("DROP DATABASE IF EXISTS \"{database}\""))
                    .await
                    .map_err(|error| error.to_string())?;
                for role in roles {
                    admin
                        .batch_execute(&format!("DROP ROLE IF EXISTS \"{role}\""))
                        .await
                        .map_err(|error| error.to_string())?;
                }
                Ok::<(), String>(())
            })
        });
        match cleaned {
            Some(Ok(())) => {}
            Some(Err(error)) => eprintln!("WARNING: scratch cleanup failed: {error}"),
            None => eprintln!("WARNING: scratch cleanup could not run"),
        }
    }
}

impl Scratch {
    /// Creates this test's database, empty (no demo, no roles).
    pub async fn create_empty_database(&self) {
        let admin = pg_connect(&self.admin_url)
            .await
            .expect("the admin connects");
        admin
            .batch_execute(&format!("CREATE DATABASE \"{}\"", self.database))
            .await
            .expect("the scratch database is created");
    }

    /// A connection pool on this test's database as the admin: what askdb's shared
    /// state hands its stores.
    pub fn pool(&self) -> deadpool_postgres::Pool {
        let mut config: tokio_postgres::Config =
            self.admin_url.parse().expect("the admin URL parses");
        config.dbname(&self.database);
        config.connect_timeout(Duration::from_secs(3));
        let manager = deadpool_postgres::Manager::from_config(
            config,
            tokio_postgres::NoTls,
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        deadpool_postgres::Pool::builder(manager)
            .max_size(4)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .expect("the pool builds")
    }
}
