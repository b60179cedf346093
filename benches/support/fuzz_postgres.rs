//! The PostgreSQL mode's server: a scratch database of the run's own on the development
//! server, with askdb's demo loaded by `db setup` (`askdb::admin::setup`) under role
//! names of the run's own, so runs beside other people's tests and runs never share
//! state. The supervising process makes it (a worker that crashes and restarts reuses
//! it) and drops the database and the roles when the run ends, pass, fail or
//! interrupted. Workers open a gate on it with the superuser URL, so the guard is the
//! only layer between a statement and the data, and compile statements with `EXPLAIN`
//! to tell a refusal of a statement PostgreSQL compiles from one of a statement that
//! fails anyway.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use askdb::admin::{self, RoleSpec, SetupOptions};

/// The development and CI server, as in the PostgreSQL tests.
const DEFAULT_ADMIN_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The superuser URL (any database): `ASKDB_TEST_POSTGRES_URL` as the tests read it,
/// else the development server.
pub fn admin_url() -> String {
    std::env::var("ASKDB_TEST_POSTGRES_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| DEFAULT_ADMIN_URL.to_string())
}

/// The URL without its password, for messages.
pub fn display_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    }
}

/// The superuser URL of a scratch database.
pub fn database_url(database: &str) -> String {
    admin::url_with_database(&admin_url(), database)
}

/// Runs `work` on a thread of its own with a runtime of its own: callable from inside
/// another runtime, from a signal handler's thread and from `Drop` while unwinding.
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

/// The run's database and roles; dropping it drops them.
pub struct Scratch {
    pub database: String,
    roles: [String; 2],
    admin_url: String,
}

impl Scratch {
    /// Creates the database and roles and loads the demo, or says why not (no server,
    /// a failed setup: whatever it made is dropped again).
    pub fn create() -> Result<Scratch, String> {
        let admin_url = admin_url();
        let probe = admin_url.clone();
        on_own_runtime(move || Box::pin(async move { admin::url_reachable(&probe).await }))
            .ok_or_else(|| "the connection check could not run".to_string())?
            .map_err(|error| {
                format!(
                    "PostgreSQL is not reachable at {}: {error}",
                    display_url(&admin_url)
                )
            })?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos() % 1_000_000_000_000);
        let suffix = format!("{}_{nanos}", std::process::id());
        let scratch = Scratch {
            database: format!("askdb_fuzz_{suffix}"),
            roles: [
                format!("askdb_ro_fuzz{suffix}"),
                format!("askdb_log_fuzz{suffix}"),
            ],
            admin_url,
        };
        let options = SetupOptions {
            admin_url: scratch.admin_url.clone(),
            database: scratch.database.clone(),
            read_only_role: RoleSpec::new(&scratch.roles[0]),
            log_role: RoleSpec::new(&scratch.roles[1]),
            example_rls: Vec::new(),
        };
        // On failure `scratch` is dropped here, and with it what setup made.
        on_own_runtime(move || Box::pin(async move { admin::setup(&options).await.map(|_| ()) }))
            .ok_or_else(|| "db setup could not run".to_string())?
            .map_err(|error| format!("db setup failed: {error}"))?;
        Ok(scratch)
    }

    fn drop_everything(&self) -> Result<(), String> {
        let admin_url = self.admin_url.clone();
        let database = self.database.clone();
        let roles = self.roles.clone();
        on_own_runtime(move || {
            Box::pin(async move {
                admin::drop_database(&admin_url, &database)
                    .await
                    .map_err(|error| error.to_string())?;
                let client = connect(&admin_url).await?;
                for role in roles {
                    // The names are this module's own (letters, digits, underscores).
                    client
                        .batch_execute(&format!("DROP ROLE IF EXISTS \"{role}\""))
                        .await
                        .map_err(|error| error.to_string())?;
                }
                Ok::<(), String>(())
            })
        })
        .unwrap_or_else(|| Err("the cleanup could not run".to_string()))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        match self.drop_everything() {
            Ok(()) => eprintln!(
                "dropped the scratch database {} and its roles",
                self.database
            ),
            Err(error) => eprintln!(
                "WARNING: the scratch database {} or its roles were not dropped: {error}",
                self.database
            ),
        }
    }
}

/// Drops the scratch database when the run is interrupted (SIGINT, SIGTERM), which
/// would otherwise end the process without unwinding, after `before` (which ends what
/// still uses it): the slot is emptied, so the database is dropped once, either here or
/// when the run ends.
pub fn drop_on_signal(slot: Arc<Mutex<Option<Scratch>>>, before: impl FnOnce() + Send + 'static) {
    std::thread::spawn(move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        runtime.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let (Ok(mut interrupt), Ok(mut terminate)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        });
        before();
        drop(slot.lock().ok().and_then(|mut scratch| scratch.take()));
        std::process::exit(130);
    });
}

async fn connect(url: &str) -> Result<tokio_postgres::Client, String> {
    let mut config: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
    config.connect_timeout(CONNECT_TIMEOUT);
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .map_err(|error| error.to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

/// A connection that compiles statements (`EXPLAIN`, never run) in read-only
/// transactions under the fuzzer's statement timeout: whether PostgreSQL itself can
/// plan what the database check refused.
pub struct Compiler {
    client: tokio_postgres::Client,
}

impl Compiler {
    pub fn connect(
        runtime: &tokio::runtime::Runtime,
        url: &str,
        timeout: Duration,
    ) -> Result<Compiler, String> {
        runtime.block_on(async {
            let client = connect(url).await?;
            client
                .batch_execute(&format!(
                    "SET default_transaction_read_only = on; SET statement_timeout = {}",
                    timeout.as_millis()
                ))
                .await
                .map_err(|error| error.to_string())?;
            Ok(Compiler { client })
        })
    }

    /// PostgreSQL's error for the statement, or None when it plans.
    pub fn compile_error(&self, runtime: &tokio::runtime::Runtime, sql: &str) -> Option<String> {
        runtime.block_on(async {
            let explained = self.client.batch_execute(&format!("EXPLAIN {sql}")).await;
            explained.err().map(|error| match error.as_db_error() {
                Some(db) => db.message().to_string(),
                None => error.to_string(),
            })
        })
    }
}
