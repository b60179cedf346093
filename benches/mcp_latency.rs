//! run_query round trips over MCP stdio: the real `askdb mcp` binary, driven by a
//! minimal JSON-RPC client of its own (initialize, notifications/initialized, then N
//! sequential tools/call run_query of one small query). Prints the setup, the startup
//! time (spawn to the initialize reply), median / p95 / p99 / max round-trip latency,
//! and the server's resident memory (VmRSS and its peak VmHWM from /proc/PID/status).
//!
//! `cargo bench --bench mcp_latency` (release build). Settings by environment:
//! `ASKDB_BENCH_N` (calls, default 1000), `ASKDB_BENCH_SQL` (the query), and
//! `ASKDB_BENCH_DB` (a database URL; default: the demo written to a temporary file).
//! Not a timed test: it reports figures and asserts nothing about them.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const DEFAULT_CALLS: usize = 1000;
const WARMUP_CALLS: usize = 20;
const DEFAULT_SQL: &str = "SELECT status, count(*) AS bills FROM bills GROUP BY status";

struct Client {
    stdin: ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    next_id: u64,
}

impl Client {
    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").expect("request written to the server");
        self.stdin.flush().expect("request flushed");
    }

    /// Sends a request and reads lines until its reply (skipping notifications).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            let read = self.stdout.read_line(&mut line).expect("server stdout");
            assert!(read > 0, "the server closed stdout");
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|error| panic!("not JSON-RPC ({error}): {line}"));
            if message["id"] == id {
                return message;
            }
        }
    }
}

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| default.to_string())
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * fraction).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn micros(duration: Duration) -> String {
    format!("{:.0} us", duration.as_secs_f64() * 1e6)
}

/// A `Vm*:` line of /proc/PID/status, e.g. "14512 kB".
fn proc_status(pid: u32, field: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with(field))
                .map(|line| line[field.len()..].trim().to_string())
        })
        .unwrap_or_else(|| "unavailable".to_string())
}

fn main() {
    let calls: usize = env_or("ASKDB_BENCH_N", &DEFAULT_CALLS.to_string())
        .parse()
        .expect("ASKDB_BENCH_N is a number");
    assert!(calls > 0, "ASKDB_BENCH_N must be at least 1");
    let sql = env_or("ASKDB_BENCH_SQL", DEFAULT_SQL);
    let bin = env!("CARGO_BIN_EXE_askdb");
    let scratch = tempfile::tempdir().expect("temp dir");
    let db = match std::env::var("ASKDB_BENCH_DB") {
        Ok(url) if !url.is_empty() => url,
        _ => {
            let path = scratch.path().join("demo.sqlite");
            build_demo(bin, &path);
            format!("sqlite:{}", path.display())
        }
    };

    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(["mcp", "--db", &db])
        .env("ASKDB_HOME", scratch.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("askdb mcp starts");
    let pid = child.id();
    let mut client = Client {
        stdin: child.stdin.take().expect("stdin"),
        stdout: BufReader::new(child.stdout.take().expect("stdout")),
        next_id: 0,
    };
    let init = client.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "mcp_latency", "version": "0"}}),
    );
    let startup = started.elapsed();
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let rss_idle = proc_status(pid, "VmRSS:");

    let arguments = json!({"name": "run_query", "arguments": {"sql": sql}});
    let first_started = Instant::now();
    let first = client.request("tools/call", arguments.clone());
    let first_call = first_started.elapsed();
    assert_eq!(
        first["result"]["isError"], false,
        "the query failed: {first}"
    );
    let rows = first["result"]["structuredContent"]["row_count"].clone();
    for _ in 0..WARMUP_CALLS {
        client.request("tools/call", arguments.clone());
    }
    let mut times = Vec::with_capacity(calls);
    let run_started = Instant::now();
    for _ in 0..calls {
        let call_started = Instant::now();
        let reply = client.request("tools/call", arguments.clone());
        times.push(call_started.elapsed());
        assert_eq!(reply["result"]["isError"], false, "{reply}");
    }
    let total = run_started.elapsed();
    let rss = proc_status(pid, "VmRSS:");
    let peak = proc_status(pid, "VmHWM:");
    drop(client);
    let _ = child.wait();

    times.sort();
    let mean = total / calls as u32;
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release (cargo bench)"
    };
    println!("mcp_latency: run_query round trips over MCP stdio");
    println!("  server:   {bin} mcp --db {}", redact(&db));
    println!("  build:    {profile}");
    println!("  client:   minimal JSON-RPC over pipes, one request in flight");
    println!("  query:    {sql} ({rows} rows)");
    println!("  calls:    {calls} measured after {WARMUP_CALLS} warm-up calls");
    println!(
        "  startup:  {} (spawn to initialize reply, gate opened)",
        micros(startup)
    );
    println!("  first:    {}", micros(first_call));
    println!(
        "  latency:  median {}, p95 {}, p99 {}, max {}, mean {}",
        micros(percentile(&times, 0.5)),
        micros(percentile(&times, 0.95)),
        micros(percentile(&times, 0.99)),
        micros(times[times.len() - 1]),
        micros(mean)
    );
    println!(
        "  memory:   VmRSS {rss_idle} after initialize, {rss} after the calls, peak VmHWM {peak}"
    );
}

fn build_demo(bin: &str, path: &Path) {
    let output = Command::new(bin)
        .args(["demo", "build", "--out"])
        .arg(path)
        .output()
        .expect("askdb demo build runs");
    assert!(output.status.success(), "demo build failed: {output:?}");
}

/// A URL as printed: without its password.
fn redact(url: &str) -> String {
    askdb::text::redact_password(url)
}
