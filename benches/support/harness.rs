//! What the load and peer benches share: `askdb serve` started with the scripted
//! model on a free port, a scratch PostgreSQL database with the demo and uniquely named
//! roles (made by `askdb db setup`'s code and dropped afterwards), and the median of
//! sequential runs.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::mcp_client::percentile;

/// The ask timeout the server is started with.
pub const ASK_TIMEOUT_SECS: u64 = 30;

pub struct Serve {
    pub child: Child,
    pub url: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn start_serve(bin: &str, db: &str, home: &std::path::Path, script: &std::path::Path) -> Serve {
    let log = std::fs::File::create(home.join("serve.log")).expect("log file");
    let mut child = Command::new(bin)
        .args(["serve", "--addr", "127.0.0.1:0", "--asks-per-minute", "0"])
        .args(["--explain", "false", "--ask-timeout-secs"])
        .arg(ASK_TIMEOUT_SECS.to_string())
        .env("ASKDB_DATABASE_URL", db)
        .env("ASKDB_HOME", home)
        .env("ASKDB_PROVIDER", "scripted")
        .env("ASKDB_SCRIPT", script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("askdb serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let url = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(url) = line.strip_prefix("askdb serve: listening on ") {
                    break url.trim().trim_end_matches('/').to_string();
                }
            }
            _ => panic!(
                "askdb serve printed no address; see {}",
                home.join("serve.log").display()
            ),
        }
    };
    Serve { child, url }
}

/// p50 of `n` sequential runs of `step`.
pub async fn sequential<F, Fut>(n: usize, mut step: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        step().await;
        times.push(started.elapsed());
    }
    times.sort();
    percentile(&times, 0.5)
}

/// A scratch PostgreSQL database with the demo and uniquely named roles, dropped on drop.
pub struct Scratch {
    admin_url: String,
    database: String,
    roles: Vec<String>,
    pub read_only_url: String,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(error) =
            askdb::db_setup::drop_scratch_with_roles(&self.admin_url, &self.database, &self.roles)
        {
            eprintln!("load: could not drop the scratch database: {error}");
        }
    }
}

pub async fn postgres_scratch(prefix: &str) -> Scratch {
    let admin_url = std::env::var("ASKDB_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let suffix = format!(
        "{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis() % 1_000_000_000)
    );
    let database = format!("askdb_{prefix}_{suffix}");
    let roles = vec![
        format!("askdb_ro_l{suffix}"),
        format!("askdb_log_l{suffix}"),
    ];
    let options = askdb::db_setup::SetupOptions {
        admin_url: admin_url.clone(),
        database: database.clone(),
        read_only_role: askdb::db_setup::RoleSpec::new(&roles[0]),
        log_role: askdb::db_setup::RoleSpec::new(&roles[1]),
    };
    let mut scratch = Scratch {
        admin_url,
        database,
        roles,
        read_only_url: String::new(),
    };
    let report = askdb::db_setup::setup(&options)
        .await
        .unwrap_or_else(|error| panic!("db setup: {error}"));
    scratch.read_only_url = report.read_only.connection_url().to_string();
    scratch
}
