//! Load on askdb, over loopback only: the real `askdb serve` (scripted model, rate limit
//! off, no explanation call) and `askdb mcp`, on the demo database (SQLite) or on a
//! scratch PostgreSQL database as a read-only role, then askdb's own overhead over the
//! database's own execution of the same query.
//!
//! Phases, each bounded in count and time:
//! 1. `POST /api/sql`, `ASKDB_LOAD_SQL_N` small queries (20,000) at concurrency
//!    `ASKDB_LOAD_SQL_CONCURRENCY` (32), run `ASKDB_LOAD_SQL_RUNS` times (5): memory
//!    settles over the first runs, and the last against the one before shows whether it
//!    keeps growing with the number of requests;
//! 2. `POST /api/ask`, `ASKDB_LOAD_ASK_N` questions (2,000) at concurrency
//!    `ASKDB_LOAD_ASK_CONCURRENCY` (16) against the default two ask slots, so most are
//!    answered 503 busy at once, by design;
//! 3. `askdb mcp`, `ASKDB_LOAD_MCP_N` run_query calls (10,000), one at a time;
//! 4. overhead, `ASKDB_LOAD_OVERHEAD_N` (500) sequential runs each of the query on the
//!    database directly (rusqlite / tokio-postgres, the same role), through
//!    `POST /api/sql`, and as a scripted question through `POST /api/ask`.
//!
//! It prints throughput, p50/p99, answers by status, the server's resident memory
//! (VmRSS) before, during (the peak sampled every 50 ms) and after each phase, and checks
//! the requirements: every request answered within its timeout, no 5xx but the
//! designed 503s, and memory flat (VmRSS after the last /api/sql run at most
//! `FLAT_BOUND_KIB` above the run before; for MCP, the end at most that above half way).
//! Exits 1 when one fails.
//!
//! `cargo bench --bench load` (release build). `ASKDB_LOAD_DB=postgres` uses the server
//! at `ASKDB_TEST_POSTGRES_URL` (default postgres://postgres@127.0.0.1:5432/postgres)
//! to create a uniquely named scratch database and roles with `askdb db setup`'s code,
//! dropped at the end. `ASKDB_LOAD_OUT=FILE` also writes the report as Markdown, with the
//! date, machine and settings.

#[path = "../tests/support/ci.rs"]
mod ci;
#[path = "support/harness.rs"]
mod harness;
#[path = "support/mcp_client.rs"]
mod mcp_client;
#[path = "../tests/support/scratch.rs"]
mod scratch;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::{postgres_scratch, sequential, start_serve, ASK_TIMEOUT_SECS};
use mcp_client::{load_average, machine, micros, percentile, proc_kib, utc_now, McpServer};
use serde_json::{json, Value};

/// The small query every phase runs.
const QUERY: &str = "SELECT status, count(*) AS bills FROM bills GROUP BY status ORDER BY status";
/// The question the scripted model answers with [`QUERY`].
const QUESTION: &str = "How many bills are there per status?";
/// How much VmRSS may grow between two identical runs before it counts as a leak.
const FLAT_BOUND_KIB: u64 = 4 * 1024;
/// The longest a /api/sql request may take before it counts as a hang: the statement
/// timeout (5 s), the pool wait (5 s) and slack.
const SQL_TIMEOUT: Duration = Duration::from_secs(15);

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

/// What one phase saw.
#[derive(Default)]
struct Phase {
    name: String,
    requests: usize,
    concurrency: usize,
    elapsed: Duration,
    /// Latencies of every answered request.
    latencies: Vec<Duration>,
    /// Answers by status (and error code for non-200s).
    by_status: BTreeMap<String, usize>,
    /// Requests with no answer within the client's timeout, or a broken connection.
    unanswered: usize,
    rss_before: u64,
    rss_peak: u64,
    rss_after: u64,
}

impl Phase {
    fn line(&self) -> String {
        let mut latencies = self.latencies.clone();
        latencies.sort();
        let statuses: Vec<String> = self
            .by_status
            .iter()
            .map(|(status, count)| format!("{status}: {count}"))
            .collect();
        format!(
            "| {} | {} at {} | {:.0}/s | {:.2} ms | {:.2} ms | {} | {} | {:.1} / {:.1} / {:.1} MiB |",
            self.name,
            self.requests,
            self.concurrency,
            self.requests as f64 / self.elapsed.as_secs_f64(),
            micros(percentile(&latencies, 0.5)) / 1000.0,
            micros(percentile(&latencies, 0.99)) / 1000.0,
            statuses.join(", "),
            self.unanswered,
            self.rss_before as f64 / 1024.0,
            self.rss_peak as f64 / 1024.0,
            self.rss_after as f64 / 1024.0,
        )
    }
}

/// Samples VmRSS every 50 ms until stopped; returns the peak.
fn sample_rss(
    pid: u32,
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            if let Some(rss) = proc_kib(pid, "VmRSS:") {
                peak.fetch_max(rss, Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
}

/// Sends `requests` POSTs of `body` with `concurrency` in flight, measuring each.
async fn run_http(
    name: &str,
    url: &str,
    body: Value,
    requests: usize,
    concurrency: usize,
    timeout: Duration,
    pid: u32,
) -> Phase {
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .pool_max_idle_per_host(concurrency)
        .build()
        .expect("client");
    let rss_before = proc_kib(pid, "VmRSS:").unwrap_or(0);
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(rss_before));
    let sampler = sample_rss(pid, Arc::clone(&stop), Arc::clone(&peak));
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let http = http.clone();
        let url = url.to_string();
        let body = body.clone();
        let next = Arc::clone(&next);
        workers.push(tokio::spawn(async move {
            let mut seen: Vec<(Option<Duration>, String)> = Vec::new();
            while next.fetch_add(1, Ordering::SeqCst) < requests as u64 {
                let sent = Instant::now();
                match http.post(&url).json(&body).send().await {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let value: Value = response.json().await.unwrap_or(Value::Null);
                        let took = sent.elapsed();
                        let label = if status == 200 {
                            match value["ok"].as_bool() {
                                Some(false) => format!(
                                    "200 ok:false {}",
                                    value["error_type"].as_str().unwrap_or("?")
                                ),
                                _ => "200".to_string(),
                            }
                        } else {
                            format!("{status} {}", value["error"].as_str().unwrap_or("?"))
                        };
                        seen.push((Some(took), label));
                    }
                    Err(_) => seen.push((None, String::new())),
                }
            }
            seen
        }));
    }
    let mut phase = Phase {
        name: name.to_string(),
        requests,
        concurrency,
        rss_before,
        ..Phase::default()
    };
    for worker in workers {
        for (took, label) in worker.await.expect("worker") {
            match took {
                Some(took) => {
                    phase.latencies.push(took);
                    *phase.by_status.entry(label).or_default() += 1;
                }
                None => phase.unanswered += 1,
            }
        }
    }
    phase.elapsed = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    let _ = sampler.join();
    // Let the server settle (connections closed, buffers returned) before reading.
    tokio::time::sleep(Duration::from_secs(1)).await;
    phase.rss_after = proc_kib(pid, "VmRSS:").unwrap_or(0);
    phase.rss_peak = peak.load(Ordering::SeqCst).max(phase.rss_after);
    phase
}

fn main() {
    askdb::llm::install_tls_provider();
    let sql_n = setting("ASKDB_LOAD_SQL_N", 20_000);
    let sql_c = setting("ASKDB_LOAD_SQL_CONCURRENCY", 32);
    let sql_rounds = setting("ASKDB_LOAD_SQL_RUNS", 5).max(2);
    let ask_n = setting("ASKDB_LOAD_ASK_N", 2_000);
    let ask_c = setting("ASKDB_LOAD_ASK_CONCURRENCY", 16);
    let mcp_n = setting("ASKDB_LOAD_MCP_N", 10_000);
    let overhead_n = setting("ASKDB_LOAD_OVERHEAD_N", 500);
    let postgres = std::env::var("ASKDB_LOAD_DB").is_ok_and(|value| value == "postgres");
    let bin = env!("CARGO_BIN_EXE_askdb");
    let home = tempfile::tempdir().expect("temp dir");
    // One client thread: the server gets the rest of the machine.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let mut scratch = None;
    let (db_url, db_label) = if postgres {
        let made = runtime.block_on(postgres_scratch("load"));
        let url = made.read_only_url.clone();
        let label = format!(
            "PostgreSQL scratch database as its read-only role ({})",
            askdb::text::redact_password(&url)
        );
        scratch = Some(made);
        (url, label)
    } else {
        let path = home.path().join("demo.sqlite");
        let built = Command::new(bin)
            .args(["demo", "build", "--out"])
            .arg(&path)
            .output()
            .expect("demo build");
        assert!(built.status.success(), "demo build failed: {built:?}");
        (
            format!("sqlite:{}", path.display()),
            "the demo database (SQLite)".to_string(),
        )
    };

    // One scripted reply per question that can reach the model.
    let script = home.path().join("script.jsonl");
    let line =
        json!({"question": "*", "purpose": "write_sql", "reply": {"sql": QUERY}}).to_string();
    let lines = ask_n + overhead_n + 100;
    std::fs::write(&script, format!("{line}\n").repeat(lines)).expect("script");

    let serve = start_serve(bin, &db_url, home.path(), &script);
    let pid = serve.child.id();
    let sql_url = format!("{}/api/sql", serve.url);
    let ask_url = format!("{}/api/ask", serve.url);
    let rss_started = proc_kib(pid, "VmRSS:").unwrap_or(0);

    let (sql_runs, asks) = runtime.block_on(async {
        // Warm-up: connections, caches.
        let _ = run_http(
            "warm-up",
            &sql_url,
            json!({ "sql": QUERY }),
            200,
            8,
            SQL_TIMEOUT,
            pid,
        )
        .await;
        let mut rounds = Vec::new();
        for round in 1..=sql_rounds {
            rounds.push(
                run_http(
                    &format!("POST /api/sql, run {round}"),
                    &sql_url,
                    json!({ "sql": QUERY }),
                    sql_n,
                    sql_c,
                    SQL_TIMEOUT,
                    pid,
                )
                .await,
            );
        }
        let asks = run_http(
            "POST /api/ask",
            &ask_url,
            json!({ "question": QUESTION }),
            ask_n,
            ask_c,
            Duration::from_secs(ASK_TIMEOUT_SECS + 5),
            pid,
        )
        .await;
        (rounds, asks)
    });

    // Overhead: the same query directly, through /api/sql, and as a scripted question.
    let (direct_p50, sql_p50, ask_p50) = runtime.block_on(async {
        let direct = if postgres {
            let (client, connection) = tokio_postgres::connect(&db_url, tokio_postgres::NoTls)
                .await
                .expect("direct connection");
            tokio::spawn(connection);
            sequential(overhead_n, || async {
                client.query(QUERY, &[]).await.expect("direct query");
            })
            .await
        } else {
            let path = db_url.trim_start_matches("sqlite:").to_string();
            let connection = rusqlite::Connection::open_with_flags(
                &path,
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .expect("direct open");
            sequential(overhead_n, || {
                let mut statement = connection.prepare(QUERY).expect("prepare");
                let rows: Vec<(String, i64)> = statement
                    .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
                    .expect("query")
                    .collect::<Result<_, _>>()
                    .expect("rows");
                assert!(!rows.is_empty());
                async {}
            })
            .await
        };
        let http = reqwest::Client::new();
        let sql = sequential(overhead_n, || async {
            let response = http
                .post(&sql_url)
                .json(&json!({ "sql": QUERY }))
                .send()
                .await
                .expect("sql");
            let _: Value = response.json().await.expect("json");
        })
        .await;
        let ask = sequential(overhead_n, || async {
            let response = http
                .post(&ask_url)
                .json(&json!({ "question": QUESTION }))
                .send()
                .await
                .expect("ask");
            assert_eq!(response.status(), 200, "a sequential question is answered");
            let _: Value = response.json().await.expect("json");
        })
        .await;
        (direct, sql, ask)
    });
    let rss_end = proc_kib(pid, "VmRSS:").unwrap_or(0);
    let serve_peak = proc_kib(pid, "VmHWM:").unwrap_or(0);
    drop(serve);

    // askdb mcp: run_query calls one at a time.
    let mcp_env = vec![
        ("ASKDB_DATABASE_URL".to_string(), db_url.clone()),
        ("ASKDB_HOME".to_string(), home.path().display().to_string()),
    ];
    let mut mcp = McpServer::start(&[bin.to_string(), "mcp".to_string()], &mcp_env)
        .unwrap_or_else(|error| panic!("askdb mcp: {error}"));
    let mcp_pid = mcp.pid();
    let arguments = json!({ "sql": QUERY });
    for _ in 0..100 {
        let _ = mcp.call("run_query", &arguments);
    }
    let mcp_before = proc_kib(mcp_pid, "VmRSS:").unwrap_or(0);
    let mut mcp_times = Vec::with_capacity(mcp_n);
    let mut mcp_errors = 0usize;
    let mut mcp_half = 0;
    let mcp_started = Instant::now();
    for index in 0..mcp_n {
        let started = Instant::now();
        if mcp.call("run_query", &arguments).is_err() {
            mcp_errors += 1;
        }
        mcp_times.push(started.elapsed());
        if index + 1 == mcp_n / 2 {
            mcp_half = proc_kib(mcp_pid, "VmRSS:").unwrap_or(0);
        }
    }
    let mcp_elapsed = mcp_started.elapsed();
    let mcp_end = proc_kib(mcp_pid, "VmRSS:").unwrap_or(0);
    let mcp_peak = proc_kib(mcp_pid, "VmHWM:").unwrap_or(0);
    drop(mcp);
    mcp_times.sort();
    drop(scratch);

    // Requirements.
    let mut failures = Vec::new();
    for phase in sql_runs.iter().chain([&asks]) {
        if phase.unanswered > 0 {
            failures.push(format!(
                "{}: {} requests unanswered",
                phase.name, phase.unanswered
            ));
        }
        for (status, count) in &phase.by_status {
            let designed = status == "200"
                || (phase.name == "POST /api/ask" && status == "503 busy")
                || status == "503 database_busy";
            if !designed {
                failures.push(format!("{}: {count} answered {status}", phase.name));
            }
        }
    }
    // Memory settles over the first runs (connections, allocator arenas); what must not
    // happen is growth that goes on: the last run against the one before it.
    let last = &sql_runs[sql_runs.len() - 1];
    let before_last = &sql_runs[sql_runs.len().saturating_sub(2)];
    let growth = last.rss_after.saturating_sub(before_last.rss_after);
    if growth > FLAT_BOUND_KIB {
        failures.push(format!(
            "serve memory grew {growth} KiB between the last two identical /api/sql runs (bound {FLAT_BOUND_KIB} KiB)"
        ));
    }
    let mcp_growth = mcp_end.saturating_sub(mcp_half);
    if mcp_growth > FLAT_BOUND_KIB {
        failures.push(format!(
            "mcp memory grew {mcp_growth} KiB over the second half of the calls (bound {FLAT_BOUND_KIB} KiB)"
        ));
    }
    if mcp_errors > 0 {
        failures.push(format!("mcp: {mcp_errors} run_query calls failed"));
    }

    let mut report = String::new();
    let _ = writeln!(report, "# Load: askdb serve and askdb mcp on {db_label}\n");
    let _ = writeln!(
        report,
        "Generated by `cargo bench --bench load`{} on {}, {}; load average at the end {}.\n",
        if postgres {
            " with ASKDB_LOAD_DB=postgres"
        } else {
            ""
        },
        utc_now(),
        machine(),
        load_average()
    );
    let _ = writeln!(
        report,
        "Settings: release build; `askdb serve --asks-per-minute 0 --explain false --ask-timeout-secs {ASK_TIMEOUT_SECS}` (two ask slots, the default), scripted model; one client thread on the same machine (reqwest, keep-alive); query `{QUERY}`; memory is the server's VmRSS (before / peak sampled every 50 ms / 1 s after).\n"
    );
    let _ = writeln!(
        report,
        "| phase | requests at concurrency | throughput | p50 | p99 | answers by status | unanswered | VmRSS before / peak / after |"
    );
    let _ = writeln!(report, "|---|---:|---:|---:|---:|---|---:|---|");
    for phase in sql_runs.iter().chain([&asks]) {
        let _ = writeln!(report, "{}", phase.line());
    }
    let _ = writeln!(
        report,
        "| askdb mcp run_query | {mcp_n} at 1 | {:.0}/s | {:.2} ms | {:.2} ms | {} ok, {mcp_errors} errors | 0 | {:.1} / {:.1} (VmHWM) / {:.1} MiB |",
        mcp_n as f64 / mcp_elapsed.as_secs_f64(),
        micros(percentile(&mcp_times, 0.5)) / 1000.0,
        micros(percentile(&mcp_times, 0.99)) / 1000.0,
        mcp_n - mcp_errors,
        mcp_before as f64 / 1024.0,
        mcp_peak as f64 / 1024.0,
        mcp_end as f64 / 1024.0,
    );
    let _ = writeln!(
        report,
        "\nServe memory: {:.1} MiB at start, {:.1} MiB after everything (peak VmHWM {:.1} MiB); growth between the last two identical /api/sql runs {:.1} MiB (bound {:.0} MiB). MCP: {:.1} MiB half way, {:.1} MiB at the end.\n",
        rss_started as f64 / 1024.0,
        rss_end as f64 / 1024.0,
        serve_peak as f64 / 1024.0,
        growth as f64 / 1024.0,
        FLAT_BOUND_KIB as f64 / 1024.0,
        mcp_half as f64 / 1024.0,
        mcp_end as f64 / 1024.0,
    );
    let _ = writeln!(
        report,
        "Overhead ({overhead_n} sequential runs each, p50): the database itself {:.3} ms ({}), `POST /api/sql` {:.3} ms (+{:.3} ms), a scripted question through `POST /api/ask` {:.3} ms (+{:.3} ms). askdb's figures include the HTTP round trip over loopback and the JSON on both sides.\n",
        micros(direct_p50) / 1000.0,
        if postgres { "tokio-postgres, same role, prepare + execute" } else { "rusqlite, read-only, prepare + step" },
        micros(sql_p50) / 1000.0,
        (micros(sql_p50) - micros(direct_p50)) / 1000.0,
        micros(ask_p50) / 1000.0,
        (micros(ask_p50) - micros(direct_p50)) / 1000.0,
    );
    if failures.is_empty() {
        let _ = writeln!(
            report,
            "Requirements: every request answered within its timeout, no 5xx but the designed 503s, memory flat: **pass**."
        );
    } else {
        let _ = writeln!(report, "Requirements **failed**:");
        for failure in &failures {
            let _ = writeln!(report, "- {failure}");
        }
    }
    print!("{report}");
    if let Ok(path) = std::env::var("ASKDB_LOAD_OUT") {
        if !path.is_empty() {
            std::fs::write(&path, &report)
                .unwrap_or_else(|error| panic!("cannot write {path}: {error}"));
            println!("written to {path}");
        }
    }
    if !failures.is_empty() {
        std::process::exit(1);
    }
}
