//! Tool-call round trips over MCP stdio: the real `askdb mcp` binary (or, for the side
//! by side comparison, another MCP server given as a command), driven by one minimal
//! JSON-RPC client (benches/support/mcp_client.rs): cold starts (spawn to the
//! `initialize` reply), then N sequential `tools/call`s of one query. Prints the
//! median / p95 / p99 / max round trip, errors, and the server's resident memory
//! (VmRSS after initialize, half way and at the end; the peak VmHWM) from /proc.
//!
//! `cargo bench --bench mcp_latency` (release build). Settings by environment:
//! `ASKDB_BENCH_N` (calls, default 1000), `ASKDB_BENCH_SQL` (the query),
//! `ASKDB_BENCH_DB` (askdb's database URL; default: the demo written to a temporary
//! file), `ASKDB_BENCH_STARTS` (cold starts timed, default 5), `ASKDB_BENCH_SERVER`
//! (another server's command as a JSON array, with `ASKDB_BENCH_TOOL` and
//! `ASKDB_BENCH_ARG`, the tool and its SQL argument, and `ASKDB_BENCH_NAME`), and
//! `ASKDB_BENCH_JSON` (a file to write the figures to). Not a timed test: it reports
//! figures and asserts nothing about them.

#[path = "support/mcp_client.rs"]
mod mcp_client;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use mcp_client::{micros, percentile, proc_kib, McpServer};
use serde_json::json;

const DEFAULT_CALLS: usize = 1000;
const WARMUP_CALLS: usize = 20;
const DEFAULT_SQL: &str = "SELECT status, count(*) AS bills FROM bills GROUP BY status";

fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| default.to_string())
}

fn main() {
    let calls: usize = env_or("ASKDB_BENCH_N", &DEFAULT_CALLS.to_string())
        .parse()
        .expect("ASKDB_BENCH_N is a number");
    assert!(calls > 0, "ASKDB_BENCH_N must be at least 1");
    let starts: usize = env_or("ASKDB_BENCH_STARTS", "5")
        .parse()
        .expect("ASKDB_BENCH_STARTS is a number");
    let sql = env_or("ASKDB_BENCH_SQL", DEFAULT_SQL);
    let bin = env!("CARGO_BIN_EXE_askdb");
    let scratch = tempfile::tempdir().expect("temp dir");

    let (name, argv, tool, argument, env) = match std::env::var("ASKDB_BENCH_SERVER") {
        Ok(command) if !command.is_empty() => {
            let argv: Vec<String> =
                serde_json::from_str(&command).expect("ASKDB_BENCH_SERVER is a JSON array");
            (
                env_or("ASKDB_BENCH_NAME", &argv.join(" ")),
                argv,
                env_or("ASKDB_BENCH_TOOL", "query"),
                env_or("ASKDB_BENCH_ARG", "sql"),
                Vec::new(),
            )
        }
        _ => {
            let db = match std::env::var("ASKDB_BENCH_DB") {
                Ok(url) if !url.is_empty() => url,
                _ => {
                    let path = scratch.path().join("demo.sqlite");
                    build_demo(bin, &path);
                    format!("sqlite:{}", path.display())
                }
            };
            let argv = vec![bin.to_string(), "mcp".to_string()];
            // The URL through the environment, as the README advises (no password on
            // the command line).
            let env = vec![
                ("ASKDB_DATABASE_URL".to_string(), db.clone()),
                (
                    "ASKDB_HOME".to_string(),
                    scratch.path().display().to_string(),
                ),
            ];
            (
                format!("askdb mcp ({})", askdb::text::redact_password(&db)),
                argv,
                "run_query".to_string(),
                "sql".to_string(),
                env,
            )
        }
    };

    let mut cold_starts = Vec::new();
    for _ in 0..starts.max(1) {
        let server = McpServer::start(&argv, &env).unwrap_or_else(|error| panic!("{error}"));
        cold_starts.push(server.cold_start);
    }
    cold_starts.sort();
    let mut server = McpServer::start(&argv, &env).unwrap_or_else(|error| panic!("{error}"));
    let pid = server.pid();
    let rss_initialized = proc_kib(pid, "VmRSS:");
    let arguments = json!({ argument.as_str(): sql });
    let first_started = Instant::now();
    server
        .call(&tool, &arguments)
        .unwrap_or_else(|error| panic!("the first call failed: {error}"));
    let first_call = first_started.elapsed();
    for _ in 0..WARMUP_CALLS {
        let _ = server.call(&tool, &arguments);
    }
    let mut times = Vec::with_capacity(calls);
    let mut errors = 0usize;
    let mut rss_half = None;
    let run_started = Instant::now();
    for index in 0..calls {
        let call_started = Instant::now();
        let outcome = server.call(&tool, &arguments);
        times.push(call_started.elapsed());
        if outcome.is_err() {
            errors += 1;
        }
        if index + 1 == calls / 2 {
            rss_half = proc_kib(pid, "VmRSS:");
        }
    }
    let total = run_started.elapsed();
    let rss_end = proc_kib(pid, "VmRSS:");
    let peak = proc_kib(pid, "VmHWM:");
    drop(server);

    times.sort();
    let median = percentile(&times, 0.5);
    let p95 = percentile(&times, 0.95);
    let p99 = percentile(&times, 0.99);
    let max = times.last().copied().unwrap_or(Duration::ZERO);
    let cold = percentile(&cold_starts, 0.5);
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release (cargo bench)"
    };
    let kib = |value: Option<u64>| value.map_or("unavailable".to_string(), |v| format!("{v} kB"));
    println!("mcp_latency: {tool} round trips over MCP stdio");
    println!("  server:   {name}");
    println!("  build:    {profile}");
    println!("  client:   minimal JSON-RPC over pipes, one request in flight");
    println!("  query:    {sql}");
    println!("  calls:    {calls} measured after {WARMUP_CALLS} warm-up calls, {errors} errors");
    println!(
        "  cold start: median {:.1} ms of {} (spawn to initialize reply), min {:.1} ms",
        cold.as_secs_f64() * 1e3,
        cold_starts.len(),
        cold_starts[0].as_secs_f64() * 1e3
    );
    println!("  first:    {:.0} us", micros(first_call));
    println!(
        "  latency:  median {:.0} us, p95 {:.0} us, p99 {:.0} us, max {:.0} us, {:.0} calls/s",
        micros(median),
        micros(p95),
        micros(p99),
        micros(max),
        calls as f64 / total.as_secs_f64()
    );
    println!(
        "  memory:   VmRSS {} after initialize, {} half way, {} at the end, peak VmHWM {}",
        kib(rss_initialized),
        kib(rss_half),
        kib(rss_end),
        kib(peak)
    );
    if let Ok(path) = std::env::var("ASKDB_BENCH_JSON") {
        if !path.is_empty() {
            let figures = json!({
                "generated_by": "cargo bench --bench mcp_latency",
                "generated_at": mcp_client::utc_now(),
                "machine": mcp_client::machine(),
                "load_average": mcp_client::load_average(),
                "server": name,
                "tool": tool,
                "sql": sql,
                "calls": calls,
                "errors": errors,
                "cold_start_ms": cold.as_secs_f64() * 1e3,
                "cold_starts": cold_starts.len(),
                "median_us": micros(median),
                "p95_us": micros(p95),
                "p99_us": micros(p99),
                "max_us": micros(max),
                "calls_per_second": calls as f64 / total.as_secs_f64(),
                "rss_initialized_kib": rss_initialized,
                "rss_half_kib": rss_half,
                "rss_end_kib": rss_end,
                "rss_peak_kib": peak,
                "build": profile,
            });
            std::fs::write(&path, format!("{figures:#}\n"))
                .unwrap_or_else(|error| panic!("cannot write {path}: {error}"));
        }
    }
}

fn build_demo(bin: &str, path: &Path) {
    let output = Command::new(bin)
        .args(["demo", "build", "--out"])
        .arg(path)
        .output()
        .expect("askdb demo build runs");
    assert!(output.status.success(), "demo build failed: {output:?}");
}
