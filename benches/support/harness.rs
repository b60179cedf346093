//! What the load and peer benches share: `askdb serve` started with the scripted
//! model on a free port, a scratch PostgreSQL database with the demo and uniquely named
//! roles (made by `askdb db setup`'s code and dropped afterwards), and the median of
//! sequential runs. A bench that includes it also includes tests/support/ci.rs and
//! scratch.rs as `ci` and `scratch`.

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

/// A scratch PostgreSQL database with the demo and uniquely named roles (the tests'
/// scratch helper, tests/support/scratch.rs), dropped on drop.
pub struct Scratch {
    _names: crate::scratch::Scratch,
    pub read_only_url: String,
}

pub async fn postgres_scratch(kind: &str) -> Scratch {
    let names = crate::scratch::Scratch::new(&format!("{kind} bench"), kind)
        .unwrap_or_else(|| panic!("the {kind} bench needs PostgreSQL (ASKDB_TEST_POSTGRES_URL)"));
    let options = askdb::admin::SetupOptions {
        admin_url: names.admin_url.clone(),
        database: names.database.clone(),
        read_only_role: askdb::admin::RoleSpec::new(&names.read_only_role),
        log_role: askdb::admin::RoleSpec::new(&names.log_role),
        example_rls: Vec::new(),
    };
    let report = askdb::admin::setup(&options)
        .await
        .unwrap_or_else(|error| panic!("db setup: {error}"));
    Scratch {
        read_only_url: report.read_only.connection_url().to_string(),
        _names: names,
    }
}
