//! askdb side by side with the tools a user would otherwise pick, in one run:
//!
//! 1. the guard vs a sqlglot guard of the same checks (scripts/peers/sqlglot_guard.py)
//!    over the same external gold queries (Spider dev via spiderman, defog's SQLite
//!    gold): microseconds per query and the ratio, the parser check alone and with the
//!    database check (first sight and remembered); and the guard's MySQL dialect vs
//!    sqlglot's over Spider's MySQL-style gold on copies of its databases on MySQL or
//!    MariaDB (`ASKDB_TEST_MYSQL_URL`, the development server by default; skipped, and
//!    said so, when none answers);
//! 2. `askdb mcp` vs the reference PostgreSQL MCP server and DBHub, the same query on
//!    the same scratch PostgreSQL database (the same read-only role) through the same
//!    client (benches/support/mcp_client.rs): cold start to `initialize`, median and
//!    p95 per call, resident memory;
//! 3. askdb's own overhead per `POST /api/sql` call and per scripted question over the
//!    database's own execution of the same query (tokio-postgres, same role).
//!
//! Run by scripts/bench-peers.sh, which installs the peers and sets
//! `ASKDB_PEERS_PYTHON` (a Python with sqlglot) and `ASKDB_PEERS_NODE_MODULES` (the
//! npm folder holding both servers). Also: `ASKDB_PEERS_N` (calls per server, 1000),
//! `ASKDB_PEERS_STARTS` (cold starts per server, 10), `ASKDB_PEERS_OUT` (a Markdown
//! file for the table, with date, machine and versions), `ASKDB_TEST_POSTGRES_URL`
//! (the admin URL for the scratch database). Not a timed test: figures only.

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
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use askdb::database::DatabaseUrl;
use askdb::eval::external::{self, ExternalDialect};
use askdb::gate::{Gate, GateOptions};
use harness::{postgres_scratch, sequential, start_serve};
use mcp_client::{load_average, machine, micros, percentile, proc_kib, utc_now, McpServer};
use serde_json::{json, Value};

const QUERY: &str = "SELECT status, count(*) AS bills FROM bills GROUP BY status ORDER BY status";
const QUESTION: &str = "How many bills are there per status?";
const GUARD_ROUNDS: usize = 5;
const WARMUP_CALLS: usize = 20;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn required(name: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|value| !value.is_empty())
        .unwrap_or_else(|| panic!("{name} is not set: run scripts/bench-peers.sh"))
}

/// A server to measure: its name, its command line and the environment it gets.
type ServerCommand = (String, Vec<String>, Vec<(String, String)>);

/// One MCP server's figures.
struct McpFigures {
    name: String,
    tool: String,
    cold_start: Duration,
    median: Duration,
    p95: Duration,
    errors: usize,
    rss_kib: u64,
    anon_kib: u64,
    peak_kib: u64,
}

fn measure_mcp(
    name: &str,
    argv: &[String],
    env: &[(String, String)],
    calls: usize,
    starts: usize,
) -> McpFigures {
    let mut cold = Vec::new();
    for _ in 0..starts.max(1) {
        let server = McpServer::start(argv, env).unwrap_or_else(|error| panic!("{name}: {error}"));
        cold.push(server.cold_start);
    }
    cold.sort();
    let mut server = McpServer::start(argv, env).unwrap_or_else(|error| panic!("{name}: {error}"));
    let tools = server.tools().unwrap_or_default();
    let tool = ["run_query", "query", "execute_sql"]
        .into_iter()
        .find(|candidate| tools.iter().any(|tool| tool == candidate))
        .unwrap_or_else(|| panic!("{name}: no SQL tool among {tools:?}"))
        .to_string();
    let arguments = json!({ "sql": QUERY });
    server
        .call(&tool, &arguments)
        .unwrap_or_else(|error| panic!("{name}: the query failed: {error}"));
    for _ in 0..WARMUP_CALLS {
        let _ = server.call(&tool, &arguments);
    }
    let mut times = Vec::with_capacity(calls);
    let mut errors = 0;
    for _ in 0..calls {
        let started = Instant::now();
        if server.call(&tool, &arguments).is_err() {
            errors += 1;
        }
        times.push(started.elapsed());
    }
    times.sort();
    let pid = server.pid();
    McpFigures {
        name: name.to_string(),
        tool,
        cold_start: percentile(&cold, 0.5),
        median: percentile(&times, 0.5),
        p95: percentile(&times, 0.95),
        errors,
        rss_kib: proc_kib(pid, "VmRSS:").unwrap_or(0),
        anon_kib: proc_kib(pid, "RssAnon:").unwrap_or(0),
        peak_kib: proc_kib(pid, "VmHWM:").unwrap_or(0),
    }
}

/// The version in an installed npm package's package.json.
fn npm_version(modules: &Path, package: &str) -> String {
    std::fs::read_to_string(
        modules
            .join("node_modules")
            .join(package)
            .join("package.json"),
    )
    .ok()
    .and_then(|text| serde_json::from_str::<Value>(&text).ok())
    .and_then(|value| value["version"].as_str().map(str::to_string))
    .unwrap_or_else(|| "?".to_string())
}

/// The entry point of an installed npm package's command.
fn npm_bin(modules: &Path, package: &str) -> PathBuf {
    let dir = modules.join("node_modules").join(package);
    let manifest: Value = std::fs::read_to_string(dir.join("package.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| panic!("{package} is not installed under {}", modules.display()));
    let relative = match &manifest["bin"] {
        Value::String(path) => path.clone(),
        Value::Object(map) => map
            .values()
            .next()
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        _ => manifest["main"].as_str().unwrap_or("index.js").to_string(),
    };
    dir.join(relative)
}

/// The guard's MySQL dialect beside sqlglot's, over the same gold.
struct MysqlGuardFigures {
    server: String,
    queries: usize,
    askdb_us: f64,
    askdb_accepted: usize,
    sqlglot_us: f64,
    sqlglot_accepted: u64,
}

/// Spider's databases copied into scratch databases on the development MySQL or MariaDB
/// server (dropped afterwards), the guard's MySQL dialect timed on its gold as written,
/// then the sqlglot guard on the same text with the `mysql` dialect. None when no server
/// answers.
fn mysql_dialect_figures(
    runtime: &tokio::runtime::Runtime,
    data_dir: &Path,
    python: &str,
    scratch_dir: &Path,
) -> Option<MysqlGuardFigures> {
    let admin = std::env::var("ASKDB_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/".to_string());
    if let Err(error) = runtime.block_on(askdb::admin::mysql_reachable(&admin)) {
        eprintln!("the MySQL dialect is not measured: {error}");
        return None;
    }
    let queries = external::load_spiderman(data_dir).expect("spiderman");
    let names: std::collections::BTreeSet<String> =
        queries.iter().map(|query| query.db_name.clone()).collect();
    let suffix = format!("{}", std::process::id());
    let mut urls: BTreeMap<String, String> = BTreeMap::new();
    let mut created = Vec::new();
    for name in &names {
        let database = format!("askdb_peers_{name}_{suffix}");
        created.push(database.clone());
        runtime
            .block_on(askdb::admin::copy_sqlite_into_mysql(
                &external::spiderman_db_path(data_dir, name),
                &admin,
                &database,
            ))
            .unwrap_or_else(|error| panic!("copy {name}: {error}"));
        urls.insert(
            name.clone(),
            askdb::admin::url_with_database(&admin, &database),
        );
    }
    // Fresh gates for each round, as for SQLite above: a gate remembers what its parser
    // check made of a text, so a second round on the same gates would time that memory.
    let fresh_gates = || -> BTreeMap<String, Gate> {
        urls.iter()
            .map(|(name, url)| {
                let gate = runtime
                    .block_on(askdb::database::open_gate(
                        &DatabaseUrl::Mysql(url.clone()),
                        GateOptions::default(),
                    ))
                    .unwrap_or_else(|error| panic!("gate on {name}: {error}"));
                (name.clone(), gate)
            })
            .collect()
    };
    let corpus: Vec<(String, String)> = queries
        .iter()
        .flat_map(|query| {
            external::concrete_golds(query)
                .into_iter()
                .map(|sql| (query.db_name.clone(), sql))
        })
        .collect();
    let mut askdb_accepted = 0;
    let mut elapsed = Duration::ZERO;
    for round in 0..GUARD_ROUNDS {
        let gates = fresh_gates();
        let started = Instant::now();
        for (name, sql) in &corpus {
            if gates[name].check(sql).is_ok() && round == 0 {
                askdb_accepted += 1;
            }
        }
        elapsed += started.elapsed();
    }
    let askdb_us = elapsed.as_secs_f64() * 1e6 / (corpus.len() * GUARD_ROUNDS) as f64;
    for database in created {
        let _ = runtime.block_on(askdb::admin::drop_mysql_database(&admin, &database));
    }
    let corpus_file = scratch_dir.join("corpus-mysql.jsonl");
    let lines: String = corpus
        .iter()
        .map(|(name, sql)| {
            let path = external::spiderman_db_path(data_dir, name);
            format!(
                "{}\n",
                json!({"db_path": path, "sql": sql, "dialect": "mysql"})
            )
        })
        .collect();
    std::fs::write(&corpus_file, lines).expect("corpus");
    let out = scratch_dir.join("sqlglot-mysql.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/peers/sqlglot_guard.py");
    let status = Command::new(python)
        .arg(&script)
        .arg(&corpus_file)
        .arg(&out)
        .arg(GUARD_ROUNDS.to_string())
        .status()
        .expect("python runs");
    assert!(status.success(), "the sqlglot guard failed: {status}");
    let sqlglot: Value = serde_json::from_str(&std::fs::read_to_string(&out).expect("figures"))
        .expect("sqlglot JSON");
    Some(MysqlGuardFigures {
        server: askdb::text::redact_password(&admin),
        queries: corpus.len(),
        askdb_us,
        askdb_accepted,
        sqlglot_us: sqlglot["mean_us"].as_f64().unwrap_or(f64::NAN),
        sqlglot_accepted: sqlglot["accepted"].as_u64().unwrap_or(0),
    })
}

fn main() {
    askdb::llm::install_tls_provider();
    let python = required("ASKDB_PEERS_PYTHON");
    let modules = PathBuf::from(required("ASKDB_PEERS_NODE_MODULES"));
    let calls = setting("ASKDB_PEERS_N", 1000);
    let starts = setting("ASKDB_PEERS_STARTS", 10);
    let bin = env!("CARGO_BIN_EXE_askdb");
    let scratch_dir = tempfile::tempdir().expect("temp dir");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    // 1. The guard.
    let data_dir = askdb::home::shared_data_dir().expect("the external data (../shared/data)");
    let mut corpus: Vec<(PathBuf, String)> = Vec::new();
    for query in external::load_spiderman(&data_dir).expect("spiderman") {
        let path = external::spiderman_db_path(&data_dir, &query.db_name);
        for sql in external::concrete_golds(&query) {
            corpus.push((path.clone(), sql));
        }
    }
    for query in external::load_defog(&data_dir, ExternalDialect::Sqlite).expect("defog") {
        let path = external::defog_sqlite_path(&data_dir, &query.db_name);
        for sql in external::concrete_golds(&query) {
            corpus.push((path.clone(), sql));
        }
    }
    // A gate remembers what both checks accepted, so every first-sight round is timed on
    // gates opened afresh (opening is outside the timing).
    let fresh_gates = || {
        let mut gates: BTreeMap<PathBuf, Gate> = BTreeMap::new();
        for (path, _) in &corpus {
            if !gates.contains_key(path) {
                let gate = runtime
                    .block_on(askdb::database::open_gate(
                        &DatabaseUrl::Sqlite(path.clone()),
                        GateOptions::default(),
                    ))
                    .expect("gate");
                gates.insert(path.clone(), gate);
            }
        }
        gates
    };
    let per_query_us = |elapsed: Duration, rounds: usize| {
        elapsed.as_secs_f64() * 1e6 / (corpus.len() * rounds) as f64
    };
    // The parser check alone, each statement seen for the first time.
    let mut askdb_accepted = 0;
    let mut elapsed = Duration::ZERO;
    for round in 0..GUARD_ROUNDS {
        let gates = fresh_gates();
        let started = Instant::now();
        for (path, sql) in &corpus {
            let verdict = gates[path].check(sql);
            if round == 0 && verdict.is_ok() {
                askdb_accepted += 1;
            }
        }
        elapsed += started.elapsed();
    }
    let askdb_guard_us = per_query_us(elapsed, GUARD_ROUNDS);
    // The same gold with the guard's database check after the parser check (SQLite
    // prepares each statement on a connection that records what it reads): first the
    // statement the gate has never seen, then the same statements again, which the gate
    // accepts from its memory of both checks.
    let checked_and_verified = |gate: &Gate, sql: &str| match gate.check(sql) {
        Ok(checked) => runtime.block_on(gate.verify(&checked)).is_ok(),
        Err(_) => false,
    };
    let mut verified_accepted = 0;
    let mut elapsed = Duration::ZERO;
    let mut gates = BTreeMap::new();
    for round in 0..GUARD_ROUNDS {
        gates = fresh_gates();
        let started = Instant::now();
        for (path, sql) in &corpus {
            if checked_and_verified(&gates[path], sql) && round == 0 {
                verified_accepted += 1;
            }
        }
        elapsed += started.elapsed();
    }
    let first_verify_us = per_query_us(elapsed, GUARD_ROUNDS);
    let started = Instant::now();
    for _ in 0..GUARD_ROUNDS {
        for (path, sql) in &corpus {
            checked_and_verified(&gates[path], sql);
        }
    }
    let repeated_verify_us = per_query_us(started.elapsed(), GUARD_ROUNDS);
    let corpus_file = scratch_dir.path().join("corpus.jsonl");
    let lines: String = corpus
        .iter()
        .map(|(path, sql)| format!("{}\n", json!({"db_path": path, "sql": sql})))
        .collect();
    std::fs::write(&corpus_file, lines).expect("corpus");
    let sqlglot_out = scratch_dir.path().join("sqlglot.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/peers/sqlglot_guard.py");
    let status = Command::new(&python)
        .arg(&script)
        .arg(&corpus_file)
        .arg(&sqlglot_out)
        .arg(GUARD_ROUNDS.to_string())
        .status()
        .expect("python runs");
    assert!(status.success(), "the sqlglot guard failed: {status}");
    let sqlglot: Value =
        serde_json::from_str(&std::fs::read_to_string(&sqlglot_out).expect("sqlglot figures"))
            .expect("sqlglot JSON");
    let sqlglot_us = sqlglot["mean_us"].as_f64().unwrap_or(f64::NAN);

    let mysql_guard = mysql_dialect_figures(&runtime, &data_dir, &python, scratch_dir.path());

    // 2. MCP servers on one scratch PostgreSQL database, as its read-only role.
    let scratch = runtime.block_on(postgres_scratch("peers"));
    let url = scratch.read_only_url.clone();
    let askdb_env = vec![
        ("ASKDB_DATABASE_URL".to_string(), url.clone()),
        (
            "ASKDB_HOME".to_string(),
            scratch_dir.path().display().to_string(),
        ),
    ];
    let node = "node".to_string();
    let reference_pkg = "@modelcontextprotocol/server-postgres";
    let dbhub_pkg = "@bytebase/dbhub";
    let servers: Vec<ServerCommand> = vec![
        (
            "askdb mcp".to_string(),
            vec![bin.to_string(), "mcp".to_string()],
            askdb_env.clone(),
        ),
        (
            format!("{reference_pkg} {}", npm_version(&modules, reference_pkg)),
            vec![
                node.clone(),
                npm_bin(&modules, reference_pkg).display().to_string(),
                url.clone(),
            ],
            Vec::new(),
        ),
        (
            format!("{dbhub_pkg} {}", npm_version(&modules, dbhub_pkg)),
            vec![
                node.clone(),
                npm_bin(&modules, dbhub_pkg).display().to_string(),
                "--transport".to_string(),
                "stdio".to_string(),
                "--dsn".to_string(),
                url.clone(),
            ],
            Vec::new(),
        ),
    ];
    let mcp: Vec<McpFigures> = servers
        .iter()
        .map(|(name, argv, env)| measure_mcp(name, argv, env, calls, starts))
        .collect();

    // 3. Overhead over the database's own execution, same database, same role.
    let script_file = scratch_dir.path().join("script.jsonl");
    let line =
        json!({"question": "*", "purpose": "write_sql", "reply": {"sql": QUERY}}).to_string();
    std::fs::write(&script_file, format!("{line}\n").repeat(calls + 100)).expect("script");
    let serve = start_serve(bin, &url, scratch_dir.path(), &script_file);
    let (direct, via_sql, via_ask) = runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .expect("direct connection");
        tokio::spawn(connection);
        let http = reqwest::Client::new();
        let sql_url = format!("{}/api/sql", serve.url);
        let ask_url = format!("{}/api/ask", serve.url);
        for _ in 0..50 {
            let _ = client.query(QUERY, &[]).await;
            let _ = http
                .post(&sql_url)
                .json(&json!({ "sql": QUERY }))
                .send()
                .await;
        }
        let direct = sequential(calls, || async {
            client.query(QUERY, &[]).await.expect("direct query");
        })
        .await;
        let via_sql = sequential(calls, || async {
            let response = http
                .post(&sql_url)
                .json(&json!({ "sql": QUERY }))
                .send()
                .await
                .expect("sql");
            let _: Value = response.json().await.expect("json");
        })
        .await;
        let via_ask = sequential(calls, || async {
            let response = http
                .post(&ask_url)
                .json(&json!({ "question": QUESTION }))
                .send()
                .await
                .expect("ask");
            assert_eq!(response.status(), 200);
            let _: Value = response.json().await.expect("json");
        })
        .await;
        (direct, via_sql, via_ask)
    });
    drop(serve);
    drop(scratch);

    let node_version = Command::new("node")
        .arg("--version")
        .output()
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
        .unwrap_or_default();
    let ms = |duration: Duration| micros(duration) / 1000.0;
    let mut report = String::new();
    let _ = writeln!(report, "# askdb side by side with its peers\n");
    let _ = writeln!(
        report,
        "Generated by `scripts/bench-peers.sh` (`cargo bench --bench peers`, release build) on {}, {}; load average at the end {}. sqlglot {} on Python {}; Node.js {node_version}.\n",
        utc_now(),
        machine(),
        load_average(),
        sqlglot["sqlglot"].as_str().unwrap_or("?"),
        sqlglot["python"].as_str().unwrap_or("?"),
    );
    let _ = writeln!(
        report,
        "## The guard vs a sqlglot guard of the same checks\n"
    );
    let _ = writeln!(
        report,
        "{} gold queries (Spider dev via spiderman, defog's SQLite gold), each checked {GUARD_ROUNDS} times: parse, one statement, a query only, no data-modifying CTE / INTO / locking, denied functions, no catalogs, known tables, forced LIMIT, re-render. The rows with the database check add SQLite's prepare on a connection that records every table, column and function the statement resolves to, and the verdict on that record; the sqlglot guard has no such step.\n",
        corpus.len()
    );
    let _ = writeln!(report, "| guard | mean per query | accepted | ratio |");
    let _ = writeln!(report, "|---|---:|---:|---:|");
    let _ = writeln!(
        report,
        "| askdb parser check (sqlparser-rs, in process), a statement seen the first time | {askdb_guard_us:.1} us | {askdb_accepted} | 1 |"
    );
    let _ = writeln!(
        report,
        "| askdb parser check and database check, a statement seen the first time | {first_verify_us:.1} us | {verified_accepted} | {:.1}x |",
        first_verify_us / askdb_guard_us
    );
    let _ = writeln!(
        report,
        "| askdb parser check and database check, the statement repeated (both remembered) | {repeated_verify_us:.1} us | {verified_accepted} | {:.1}x |",
        repeated_verify_us / askdb_guard_us
    );
    let _ = writeln!(
        report,
        "| sqlglot (Python) | {sqlglot_us:.1} us | {} | {:.1}x slower |",
        sqlglot["accepted"],
        sqlglot_us / askdb_guard_us
    );
    match &mysql_guard {
        Some(figures) => {
            let _ = writeln!(
                report,
                "\n### The MySQL dialect\n\n{} Spider gold queries as written for MySQL (backquotes), each checked {GUARD_ROUNDS} times by askdb's guard in its MySQL dialect (`/*!` comments, backslash escapes, `#` comments, system variables, the MySQL catalogs, the function allow-list) on copies of Spider's databases on {}, and by the sqlglot guard reading the `mysql` dialect.\n",
                figures.queries, figures.server
            );
            let _ = writeln!(report, "| guard | mean per query | accepted | ratio |");
            let _ = writeln!(report, "|---|---:|---:|---:|");
            let _ = writeln!(
                report,
                "| askdb parser check, MySQL dialect, a statement seen the first time | {:.1} us | {} | 1 |",
                figures.askdb_us, figures.askdb_accepted
            );
            let _ = writeln!(
                report,
                "| sqlglot (Python), `mysql` dialect | {:.1} us | {} | {:.1}x slower |",
                figures.sqlglot_us,
                figures.sqlglot_accepted,
                figures.sqlglot_us / figures.askdb_us
            );
        }
        None => {
            let _ = writeln!(
                report,
                "\nThe MySQL dialect was not measured: no MySQL or MariaDB server answered."
            );
        }
    }
    let _ = writeln!(report, "\n## MCP servers on the same PostgreSQL database\n");
    let _ = writeln!(
        report,
        "The same client (one JSON-RPC request in flight over stdio), the same read-only role, the query `{QUERY}`; cold start is spawn to the `initialize` reply (median of {starts}), then {calls} calls after {WARMUP_CALLS} warm-up calls; memory is VmRSS after the calls (RssAnon: heap and stacks, the rest is the program's mapped code) and the peak VmHWM.\n"
    );
    let _ = writeln!(
        report,
        "| server | tool | cold start | median | p95 | errors | VmRSS (RssAnon) | peak |"
    );
    let _ = writeln!(report, "|---|---|---:|---:|---:|---:|---:|---:|");
    for figures in &mcp {
        let _ = writeln!(
            report,
            "| {} | `{}` | {:.1} ms | {:.3} ms | {:.3} ms | {} | {:.1} MiB ({:.1}) | {:.1} MiB |",
            figures.name,
            figures.tool,
            ms(figures.cold_start),
            ms(figures.median),
            ms(figures.p95),
            figures.errors,
            figures.rss_kib as f64 / 1024.0,
            figures.anon_kib as f64 / 1024.0,
            figures.peak_kib as f64 / 1024.0,
        );
    }
    let askdb = &mcp[0];
    let reference = &mcp[1];
    let _ = writeln!(
        report,
        "\naskdb's median is {:.2} of the reference server's ({:.2} of DBHub's).\n",
        askdb.median.as_secs_f64() / reference.median.as_secs_f64(),
        askdb.median.as_secs_f64() / mcp[2].median.as_secs_f64(),
    );
    let _ = writeln!(report, "## askdb's overhead over the database itself\n");
    let _ = writeln!(
        report,
        "{calls} sequential runs each on the same database and role, p50; askdb's figures include the HTTP round trip over loopback and the JSON on both sides.\n"
    );
    let _ = writeln!(report, "| path | p50 | over the database |");
    let _ = writeln!(report, "|---|---:|---:|");
    let _ = writeln!(
        report,
        "| PostgreSQL directly (tokio-postgres, prepare + execute) | {:.3} ms | |",
        ms(direct)
    );
    let _ = writeln!(
        report,
        "| `POST /api/sql`, the same statement each time (both checks remembered after the first) | {:.3} ms | +{:.3} ms |",
        ms(via_sql),
        ms(via_sql) - ms(direct)
    );
    let _ = writeln!(
        report,
        "| `POST /api/ask`, scripted model, no explanation | {:.3} ms | +{:.3} ms |",
        ms(via_ask),
        ms(via_ask) - ms(direct)
    );
    print!("{report}");
    if let Ok(path) = std::env::var("ASKDB_PEERS_OUT") {
        if !path.is_empty() {
            std::fs::write(&path, &report)
                .unwrap_or_else(|error| panic!("cannot write {path}: {error}"));
            println!("written to {path}");
        }
    }
}
