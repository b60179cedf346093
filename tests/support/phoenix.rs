//! A real Arize Phoenix for the trace tests: installed once by `scripts/install-phoenix.sh`
//! into askdb's data directory, started here with `phoenix serve` on free loopback ports,
//! offline (no telemetry of its own), with a scratch working directory (its SQLite
//! storage), and stopped when dropped. Spans are read back through its REST API.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::ci;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join("install-phoenix.sh")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port")
}

/// `phoenix serve`, killed on drop.
pub struct Phoenix {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`: OTLP at `/v1/traces`, the REST API at `/v1/...`.
    pub url: String,
    log: PathBuf,
    _work: tempfile::TempDir,
}

impl Phoenix {
    /// Installs (once) and starts Phoenix. None means "skip" (said on stderr): outside
    /// CI unless ASKDB_TEST_EXTERNAL=1. In CI a failed install or start fails the test.
    pub fn start(test: &str) -> Option<Phoenix> {
        if !ci::wants_external(
            test,
            "Arize Phoenix (scripts/install-phoenix.sh installs it once; a long install the first time)",
        ) {
            return None;
        }
        let install = Command::new("bash")
            .arg(script())
            .arg("install")
            .output()
            .unwrap_or_else(|error| panic!("cannot run {}: {error}", script().display()));
        assert!(
            install.status.success(),
            "{test}: installing Phoenix failed:\n{}",
            String::from_utf8_lossy(&install.stderr)
        );
        let bin = Command::new("bash")
            .arg(script())
            .arg("bin")
            .output()
            .expect("the script runs");
        assert!(bin.status.success(), "{test}: Phoenix is not installed");
        let bin = String::from_utf8_lossy(&bin.stdout).trim().to_string();
        let work = tempfile::tempdir().expect("a working directory for Phoenix");
        let port = free_port();
        let grpc_port = free_port();
        let log = work.path().join("phoenix.log");
        let log_file = std::fs::File::create(&log).expect("log file");
        let mut command = Command::new(&bin);
        for (name, _) in std::env::vars_os() {
            if name
                .to_str()
                .is_some_and(|name| name.starts_with("PHOENIX_"))
            {
                command.env_remove(name);
            }
        }
        let child = command
            .arg("serve")
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", grpc_port.to_string())
            .env("PHOENIX_WORKING_DIR", work.path())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .current_dir(work.path())
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log file"))
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|error| panic!("{test}: cannot start {bin}: {error}"));
        let phoenix = Phoenix {
            child: Some(child),
            url: format!("http://127.0.0.1:{port}"),
            log,
            _work: work,
        };
        phoenix.wait_until_up(test, Duration::from_secs(240));
        Some(phoenix)
    }

    fn wait_until_up(&self, test: &str, limit: Duration) {
        let started = Instant::now();
        loop {
            if self.answers() {
                eprintln!(
                    "Phoenix answers at {} after {:.1} s",
                    self.url,
                    started.elapsed().as_secs_f64()
                );
                return;
            }
            assert!(
                started.elapsed() < limit,
                "{test}: Phoenix did not answer within {} s:\n{}",
                limit.as_secs(),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `GET /v1/projects` answers 200 (plain HTTP/1.0 over a socket: no client needed).
    fn answers(&self) -> bool {
        use std::io::{Read, Write};
        let Some(address) = self.url.strip_prefix("http://") else {
            return false;
        };
        let Ok(mut stream) = std::net::TcpStream::connect(address) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
        let request = format!("GET /v1/projects HTTP/1.0\r\nHost: {address}\r\n\r\n");
        if stream.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).is_ok() && head.ends_with(b" 200")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the server (the collector goes down).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Every span of one trace, through `GET /v1/projects/default/spans?trace_id=`.
    pub async fn spans(&self, http: &reqwest::Client, trace_id: &str) -> Vec<Value> {
        self.spans_where(http, &[("trace_id", trace_id)]).await
    }

    /// Spans of the default project matching the query (all pages).
    pub async fn spans_where(&self, http: &reqwest::Client, query: &[(&str, &str)]) -> Vec<Value> {
        let mut spans = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut pairs: Vec<(&str, &str)> = query.to_vec();
            pairs.push(("limit", "100"));
            if let Some(cursor) = &cursor {
                pairs.push(("cursor", cursor.as_str()));
            }
            let query: Vec<String> = pairs
                .iter()
                .map(|(key, value)| format!("{key}={}", encode(value)))
                .collect();
            let url = format!("{}/v1/projects/default/spans?{}", self.url, query.join("&"));
            let response = http.get(&url).send().await.expect("Phoenix answers");
            assert!(
                response.status().is_success(),
                "GET spans: {}",
                response.status()
            );
            let body: Value = response.json().await.expect("JSON spans");
            if let Some(page) = body["data"].as_array() {
                spans.extend(page.iter().cloned());
            }
            match body["next_cursor"].as_str() {
                Some(next) if !next.is_empty() => cursor = Some(next.to_string()),
                _ => return spans,
            }
        }
    }

    /// Waits until the trace has at least `count` spans (exports are batched).
    pub async fn wait_for_spans(
        &self,
        http: &reqwest::Client,
        trace_id: &str,
        count: usize,
    ) -> Vec<Value> {
        let started = Instant::now();
        loop {
            let spans = self.spans(http, trace_id).await;
            if spans.len() >= count || started.elapsed() > Duration::from_secs(30) {
                return spans;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A query value percent-encoded (everything but unreserved characters).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (byte as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// A span attribute by its dotted name, whether the backend keeps attributes flat
/// (`"llm.token_count.prompt"`) or nested (`{"llm": {"token_count": ...}}`).
pub fn attribute<'a>(span: &'a Value, name: &str) -> &'a Value {
    let attributes = &span["attributes"];
    if let Some(value) = attributes.get(name) {
        return value;
    }
    let mut current = attributes;
    for part in name.split('.') {
        current = &current[part];
    }
    current
}
