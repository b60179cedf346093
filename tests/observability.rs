//! The query log, schema drift, health and metrics on the real components: `askdb
//! serve` and the CLI run as a user runs them (the scripted model provider), real
//! PostgreSQL with the roles `askdb db setup` creates (a scratch database per test),
//! and Prometheus's own checker (`promtool check metrics`) for the metrics text.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

#[path = "support/ci.rs"]
mod ci;
#[path = "support/scratch.rs"]
mod scratch;
#[path = "support/serve.rs"]
mod serve;
use scratch::{pg_connect, Scratch};
use serve::{get_json as get, http_client as client, Server};

async fn ask(http: &reqwest::Client, server: &Server, question: &str) -> (StatusCode, Value) {
    let response = http
        .post(server.at("/api/ask"))
        .json(&json!({ "question": question }))
        .send()
        .await
        .expect("POST answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn write_script(dir: &Path, lines: &[Value]) -> String {
    let path = dir.join("script.jsonl");
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&path, text).expect("script");
    path.display().to_string()
}

const COUNT: &str = "How many customers are there?";
const COUNT_SQL: &str = "SELECT count(*) AS customers FROM customers";
const REPAIRED: &str = "How many bills does each customer have?";
const BROKEN_SQL: &str = "SELECT c.customer_name AS customer, count(*) AS bills FROM bills b LEFT JOIN customers c ON c.cust_id = b.cust_id GROUP BY 1 ORDER BY bills DESC LIMIT 6";
const FIXED_SQL: &str = "SELECT c.cust_name AS customer, count(*) AS bills FROM bills b LEFT JOIN customers c ON c.cust_id = b.cust_id GROUP BY c.cust_name ORDER BY bills DESC LIMIT 6";

/// Script lines: COUNT answered `count_answers` times, REPAIRED failing once and repaired.
fn script_lines(count_answers: usize) -> Vec<Value> {
    let mut lines = vec![
        json!({"question": "*", "purpose": "check", "reply": "ok"}),
        json!({"question": REPAIRED, "purpose": "write_sql", "reply": {"sql": BROKEN_SQL}}),
        json!({"question": REPAIRED, "purpose": "repair_sql", "reply": {"sql": FIXED_SQL}}),
    ];
    for _ in 0..count_answers {
        lines.push(json!({"question": COUNT, "purpose": "write_sql", "reply": {"sql": COUNT_SQL}}));
    }
    lines
}

/// The binary as a user runs it, with only the askdb variables given; (exit code,
/// stdout, stderr).
fn askdb(home: &Path, args: &[&str]) -> (i32, String, String) {
    askdb_with(home, args, &[])
}

/// [`askdb`] with these variables set (the developer's ASKDB_* and OTEL_* removed).
fn askdb_with(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_askdb"));
    for (name, _) in std::env::vars_os() {
        if name
            .to_str()
            .is_some_and(|name| name.starts_with("ASKDB_") || name.starts_with("OTEL_"))
        {
            command.env_remove(name);
        }
    }
    let output = command
        .env("ASKDB_HOME", home)
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("askdb runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn options(scratch: &Scratch) -> askdb::admin::SetupOptions {
    askdb::admin::SetupOptions {
        admin_url: scratch.admin_url.clone(),
        database: scratch.database.clone(),
        read_only_role: askdb::admin::RoleSpec::new(&scratch.read_only_role),
        log_role: askdb::admin::RoleSpec::new(&scratch.log_role),
        example_rls: Vec::new(),
    }
}

async fn log_rows(admin: &tokio_postgres::Client) -> i64 {
    admin
        .query_one(
            "SELECT count(*) FROM askdb_query_log WHERE decision <> 'proof'",
            &[],
        )
        .await
        .expect("the admin reads the log")
        .get(0)
}

/// Waits until `done` holds or `limit` passes; the log is written in the background.
async fn eventually<F, Fut>(limit: Duration, mut done: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while started.elapsed() < limit {
        if done().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn postgres_asks_write_one_row_each_as_the_log_role_and_a_broken_log_never_fails_an_answer() {
    let test =
        "postgres_asks_write_one_row_each_as_the_log_role_and_a_broken_log_never_fails_an_answer";
    let Some(scratch) = Scratch::new(test, "qlog") else {
        return;
    };
    let report = askdb::admin::setup(&options(&scratch))
        .await
        .unwrap_or_else(|error| panic!("db setup: {error}"));
    let read_only_url = report.read_only.connection_url().to_string();
    let log_url = report.log.connection_url().to_string();
    let admin_url = askdb::admin::url_with_database(&scratch.admin_url, &scratch.database);
    let admin = pg_connect(&admin_url).await.expect("admin connects");
    let before = log_rows(&admin).await;

    let files = tempfile::tempdir().expect("temp dir");
    let script = write_script(files.path(), &script_lines(3));
    let server = Server::start(
        &["--db", &read_only_url, "--explain", "false"],
        &[
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script),
            ("ASKDB_LOG_DATABASE_URL", &log_url),
        ],
    );
    let http = client();
    for question in [COUNT, REPAIRED, COUNT] {
        let (status, body) = ask(&http, &server, question).await;
        assert_eq!(status, StatusCode::OK, "{body}\n{}", server.log());
        assert_eq!(body["decision"], "answer", "{body}");
    }
    let written = eventually(Duration::from_secs(15), || async {
        log_rows(&admin).await - before >= 3
    })
    .await;
    assert!(written, "3 rows in the log\n{}", server.log());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        log_rows(&admin).await - before,
        3,
        "one row per question, no more"
    );
    let rows = admin
        .query(
            "SELECT question, decision, attempts, error_types, row_count, model, mode, sql, \
             input_tokens, latency_ms FROM askdb_query_log WHERE decision <> 'proof' ORDER BY id",
            &[],
        )
        .await
        .expect("rows");
    let repaired = rows
        .iter()
        .find(|row| row.get::<_, String>(0) == REPAIRED)
        .expect("the repaired question is logged");
    assert_eq!(repaired.get::<_, String>(1), "answer");
    assert_eq!(repaired.get::<_, i32>(2), 2);
    // The database said unknown_column; no table has `customer_name`, so the agent
    // types the failure absent_column (the log keeps the agent's kinds).
    assert_eq!(
        repaired.get::<_, Option<String>>(3).as_deref(),
        Some("absent_column")
    );
    assert_eq!(repaired.get::<_, i64>(4), 6);
    assert_eq!(repaired.get::<_, String>(5), "scripted");
    assert_eq!(repaired.get::<_, String>(6), "agent");
    assert!(repaired.get::<_, String>(7).contains("cust_name"));
    assert!(repaired.get::<_, i64>(8) > 0);
    // The writer's connection is the log role's own, never the read-only one.
    let writers: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE usename = $1 AND datname = $2",
            &[&scratch.log_role, &scratch.database],
        )
        .await
        .expect("activity")
        .get(0);
    assert!(
        writers >= 1,
        "the log is written over a connection as the log role"
    );

    // The read-only role cannot read what was asked.
    let read_only = pg_connect(&read_only_url).await.expect("askdb_ro connects");
    let refused = read_only
        .query("SELECT count(*) FROM askdb_query_log", &[])
        .await
        .expect_err("askdb_ro may not read the log");
    assert_eq!(
        refused.code(),
        Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE),
        "{refused}"
    );

    let (status, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["query_log_enabled"], true);
    assert_eq!(health["query_log_writable"], true, "{health}");
    assert_eq!(health["query_log_rows_written"], 3);
    // The probe's insert was rolled back.
    assert_eq!(log_rows(&admin).await - before, 3);

    // `askdb log stats` with a URL that may read the log.
    let home = tempfile::tempdir().expect("home");
    let (code, stdout, stderr) = askdb(
        home.path(),
        &["--json", "log", "stats", "--from", &admin_url],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let stats: Value = serde_json::from_str(&stdout).expect("JSON stats");
    assert_eq!(stats["questions"], 3, "{stats}");
    assert_eq!(stats["decisions"]["answer"], 3);
    assert_eq!(stats["give_up_rate"], 0.0);
    assert_eq!(stats["error_types"][0]["error_type"], "absent_column");
    assert_eq!(stats["error_types"][0]["count"], 1);
    let mean = stats["attempts_per_success_by_day"][0]["mean_attempts"]
        .as_f64()
        .expect("a mean");
    assert!((mean - 4.0 / 3.0).abs() < 1e-9, "{stats}");
    let (code, text, stderr) = askdb(home.path(), &["log", "stats", "--from", &admin_url]);
    assert_eq!(code, 0, "{stderr}");
    assert!(text.contains("questions: 3"), "{text}");
    assert!(text.contains("absent_column"), "{text}");
    assert!(text.contains("give-up rate: 0.0%"), "{text}");

    // Break the log: the grant is revoked and the writer's connection cut.
    admin
        .batch_execute(&format!(
            "REVOKE INSERT ON askdb_query_log FROM \"{}\"",
            scratch.log_role
        ))
        .await
        .expect("revoke");
    admin
        .execute(
            "SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity \
             WHERE usename = $1",
            &[&scratch.log_role],
        )
        .await
        .expect("terminate");
    let (status, body) = ask(&http, &server, COUNT).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the answer does not depend on the log: {body}"
    );
    assert_eq!(body["decision"], "answer");
    let counted = eventually(Duration::from_secs(15), || async {
        let (_, health) = get(&http, &server.at("/api/health")).await;
        health["query_log_write_failures"].as_u64().unwrap_or(0) >= 1
    })
    .await;
    assert!(counted, "the failed write is counted\n{}", server.log());
    let (status, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["ok"], false);
    assert_eq!(health["query_log_writable"], false, "{health}");
    assert_eq!(health["database_reachable"], true, "only the log is broken");
    let detail = health["details"]["query_log"].as_str().unwrap_or_default();
    assert!(detail.contains("1 failed"), "{detail}");
    assert!(
        !detail.contains(report.log.password.expose()),
        "no password in health"
    );
    assert_eq!(log_rows(&admin).await - before, 3);
}

#[tokio::test]
async fn postgres_an_eval_run_writes_no_log_rows_and_an_ask_logs_its_trace_id() {
    let test = "postgres_an_eval_run_writes_no_log_rows_and_an_ask_logs_its_trace_id";
    let Some(scratch) = Scratch::new(test, "evlog") else {
        return;
    };
    let report = askdb::admin::setup(&options(&scratch))
        .await
        .unwrap_or_else(|error| panic!("db setup: {error}"));
    let read_only_url = report.read_only.connection_url().to_string();
    let log_url = report.log.connection_url().to_string();
    let admin_url = askdb::admin::url_with_database(&scratch.admin_url, &scratch.database);
    let admin = pg_connect(&admin_url).await.expect("admin connects");
    let before = log_rows(&admin).await;

    // An evaluation run over the same database, with the log role's URL in its
    // environment: graded, and not one row in the log.
    let home = tempfile::tempdir().expect("home");
    let questions = home.path().join("questions.jsonl");
    let items = [
        json!({"id": "count", "question": COUNT, "category": "simple", "expected": "answer",
               "golds": ["SELECT count(*) FROM customers"], "ordered": false, "db": read_only_url}),
        json!({"id": "repaired", "question": REPAIRED, "category": "join", "expected": "answer",
               "golds": [FIXED_SQL], "ordered": false, "db": read_only_url}),
    ];
    let text: String = items.iter().map(|item| format!("{item}\n")).collect();
    std::fs::write(&questions, text).expect("questions");
    let script = write_script(home.path(), &script_lines(1));
    let questions_text = questions.display().to_string();
    let runs = home.path().join("runs").display().to_string();
    let (code, stdout, stderr) = askdb_with(
        home.path(),
        &[
            "eval",
            "run",
            "--questions",
            &questions_text,
            "--mode",
            "agent",
            "--runs-dir",
            &runs,
        ],
        &[
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script),
            ("ASKDB_LOG_DATABASE_URL", &log_url),
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("agent"), "a report: {stdout}");
    let run_dir = stdout
        .lines()
        .find_map(|line| line.strip_prefix("run folder: "))
        .map(|path| home.path().join(path.trim()))
        .expect("the run folder is named");
    let records = std::fs::read_to_string(run_dir.join("questions.jsonl")).expect("records");
    assert_eq!(
        records.lines().count(),
        2,
        "both questions were asked: {records}"
    );
    assert!(
        records
            .lines()
            .all(|line| line.contains("\"correct\":true")),
        "both graded correct (the repaired one after a failure): {records}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        log_rows(&admin).await - before,
        0,
        "an evaluation run writes no query-log row"
    );

    // The same database asked through the server does write the row, with the trace id
    // of the answer (traces on, to a collector that is down: the id is still the
    // question's, and nothing waits for the failed export).
    let files = tempfile::tempdir().expect("files");
    let script = write_script(files.path(), &script_lines(1));
    let nowhere = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        format!("http://{}", listener.local_addr().expect("address"))
    };
    let server = Server::start(
        &["--db", &read_only_url, "--explain", "false"],
        &[
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script),
            ("ASKDB_LOG_DATABASE_URL", &log_url),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &nowhere),
        ],
    );
    let http = client();
    let (status, body) = ask(&http, &server, COUNT).await;
    assert_eq!(status, StatusCode::OK, "{body}\n{}", server.log());
    let trace_id = body["trace_id"].as_str().expect("a trace id").to_string();
    let written = eventually(Duration::from_secs(15), || async {
        log_rows(&admin).await - before >= 1
    })
    .await;
    assert!(written, "the ask is logged\n{}", server.log());
    let logged: Option<String> = admin
        .query_one(
            "SELECT trace_id FROM askdb_query_log WHERE decision <> 'proof' ORDER BY id DESC LIMIT 1",
            &[],
        )
        .await
        .expect("the row")
        .get(0);
    assert_eq!(logged.as_deref(), Some(trace_id.as_str()));
    assert_eq!(log_rows(&admin).await - before, 1);
}

/// `askdb schema drift` against the snapshot: (exit code, output).
fn drift(home: &Path, url: &str, snapshot: &Path) -> (i32, String) {
    let snapshot = snapshot.display().to_string();
    let (code, stdout, stderr) = askdb(
        home,
        &["--db", url, "schema", "drift", "--snapshot", &snapshot],
    );
    (code, format!("{stdout}{stderr}"))
}

fn snapshot(home: &Path, url: &str, out: &Path) {
    let out = out.display().to_string();
    let (code, stdout, stderr) = askdb(home, &["--db", url, "schema", "snapshot", "--out", &out]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("schema snapshot written"), "{stdout}");
}

#[tokio::test]
async fn postgres_drift_catches_renames_drops_and_rescaling_but_not_a_widened_varchar() {
    let test = "postgres_drift_catches_renames_drops_and_rescaling_but_not_a_widened_varchar";
    let Some(scratch) = Scratch::new(test, "drift") else {
        return;
    };
    let report = askdb::admin::setup(&options(&scratch))
        .await
        .unwrap_or_else(|error| panic!("db setup: {error}"));
    let url = report.read_only.connection_url().to_string();
    let admin_url = askdb::admin::url_with_database(&scratch.admin_url, &scratch.database);
    let admin = pg_connect(&admin_url).await.expect("admin connects");
    let home = tempfile::tempdir().expect("home");
    let snap = home.path().join("demo.snapshot.json");
    snapshot(home.path(), &url, &snap);
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(&snap).expect("snapshot")).expect("JSON");
    let customers = saved["tables"]
        .as_array()
        .and_then(|tables| tables.iter().find(|t| t["name"] == "customers"))
        .expect("customers in the snapshot");
    assert!(
        customers["columns"]
            .as_array()
            .is_some_and(|columns| columns
                .iter()
                .any(|c| c["name"] == "credit_limit" && c["data_type"] == "numeric(12,2)")),
        "types keep precision and scale: {customers}"
    );
    assert!(
        !customers.to_string().contains("\"phone\""),
        "restricted columns stay out"
    );
    let (code, text) = drift(home.path(), &url, &snap);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("no drift"), "{text}");

    let alter = |sql: &'static str| {
        let admin = &admin;
        async move { admin.batch_execute(sql).await.expect(sql) }
    };
    alter("ALTER TABLE suppliers ALTER COLUMN city TYPE varchar(120)").await;
    let (code, text) = drift(home.path(), &url, &snap);
    assert_eq!(code, 0, "a widened VARCHAR is not drift: {text}");

    alter("ALTER TABLE customers ALTER COLUMN credit_limit TYPE numeric(12,0)").await;
    let (code, text) = drift(home.path(), &url, &snap);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "column customers.credit_limit changed type from numeric(12,2) to numeric(12,0)"
        ),
        "{text}"
    );
    alter("ALTER TABLE customers ALTER COLUMN credit_limit TYPE numeric(12,2)").await;
    assert_eq!(drift(home.path(), &url, &snap).0, 0);

    alter("ALTER TABLE suppliers RENAME COLUMN city TO town").await;
    let (code, text) = drift(home.path(), &url, &snap);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("column suppliers.city was renamed to town"),
        "{text}"
    );
    // A snapshot taken after the rename matches the table, not the notes.
    let renamed = home.path().join("renamed.snapshot.json");
    snapshot(home.path(), &url, &renamed);
    let (code, text) = drift(home.path(), &url, &renamed);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("the notes describe column suppliers.city, which no longer exists"),
        "{text}"
    );
    alter("ALTER TABLE suppliers RENAME COLUMN town TO city").await;
    assert_eq!(drift(home.path(), &url, &snap).0, 0);

    alter("DROP TABLE tbl_prod_master_old CASCADE").await;
    let (code, text) = drift(home.path(), &url, &snap);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("table tbl_prod_master_old was dropped"),
        "{text}"
    );

    let (code, text) = drift(home.path(), &url, &home.path().join("missing.json"));
    assert_eq!(code, 3, "no snapshot is an error, not a verdict: {text}");
}

#[tokio::test]
async fn postgres_health_turns_false_after_drift() {
    let test = "postgres_health_turns_false_after_drift";
    let Some(scratch) = Scratch::new(test, "hdrift") else {
        return;
    };
    let report = askdb::admin::setup(&options(&scratch))
        .await
        .unwrap_or_else(|error| panic!("db setup: {error}"));
    let url = report.read_only.connection_url().to_string();
    let admin_url = askdb::admin::url_with_database(&scratch.admin_url, &scratch.database);
    let admin = pg_connect(&admin_url).await.expect("admin connects");
    let files = tempfile::tempdir().expect("files");
    let snap = files.path().join("snapshot.json");
    snapshot(files.path(), &url, &snap);
    let script = write_script(files.path(), &script_lines(0));
    let snap_arg = snap.display().to_string();
    let server = Server::start(
        &[
            "--db",
            &url,
            "--schema-snapshot",
            &snap_arg,
            "--drift-check-secs",
            "1",
        ],
        &[("ASKDB_PROVIDER", "scripted"), ("ASKDB_SCRIPT", &script)],
    );
    let http = client();
    let (status, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::OK, "{health}\n{}", server.log());
    assert_eq!(health["schema_snapshot"], true);
    assert_eq!(health["schema_drifted"], false);
    assert_eq!(
        health["query_log_enabled"], false,
        "no log role URL was given"
    );

    admin
        .batch_execute("ALTER TABLE bills ALTER COLUMN total_amt TYPE numeric(12,0)")
        .await
        .expect("alter");
    let drifted = eventually(Duration::from_secs(20), || async {
        let (_, health) = get(&http, &server.at("/api/health")).await;
        health["schema_drifted"] == true
    })
    .await;
    assert!(
        drifted,
        "the periodic check finds the drift\n{}",
        server.log()
    );
    let (status, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["ok"], false);
    let differences = health["schema_differences"].to_string();
    assert!(
        differences.contains("bills.total_amt changed type from numeric(12,2) to numeric(12,0)"),
        "{differences}"
    );
    let metrics = http
        .get(server.at("/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(metrics.contains("\naskdb_schema_drifted 1\n"), "{metrics}");
}

/// The value of one sample line (`name{labels} value`) in the text format; 0 when absent.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            (name == series)
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .unwrap_or(0.0)
}

async fn metrics_text(http: &reqwest::Client, server: &Server) -> String {
    let response = http
        .get(server.at("/metrics"))
        .send()
        .await
        .expect("metrics");
    assert_eq!(response.status(), StatusCode::OK);
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    response.text().await.expect("text")
}

/// `promtool check metrics` on the text, or None when promtool is not installed.
fn promtool(text: &str) -> Option<(bool, String)> {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(text.as_bytes()).ok()?;
    let output = child.wait_with_output().ok()?;
    Some((
        output.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    ))
}

#[tokio::test]
async fn metrics_pass_promtool_and_move_by_the_right_amounts_and_sqlite_asks_are_logged() {
    let test = "metrics_pass_promtool_and_move_by_the_right_amounts_and_sqlite_asks_are_logged";
    let files = tempfile::tempdir().expect("files");
    let script = write_script(files.path(), &script_lines(1));
    let server = Server::start(
        &["--explain", "false", "--asks-per-minute", "2"],
        &[("ASKDB_PROVIDER", "scripted"), ("ASKDB_SCRIPT", &script)],
    );
    let http = client();
    let before = metrics_text(&http, &server).await;
    for question in [COUNT, REPAIRED] {
        let (status, body) = ask(&http, &server, question).await;
        assert_eq!(status, StatusCode::OK, "{body}\n{}", server.log());
    }
    let (status, _) = ask(&http, &server, COUNT).await;
    assert_eq!(
        status,
        StatusCode::TOO_MANY_REQUESTS,
        "the third ask in a minute"
    );
    // A statement the parser check lets through and the database check refuses
    // (`x IN customers` compares with the whole row, phone and address included), twice:
    // a refusal is not remembered, so both are checked and both disagree.
    for _ in 0..2 {
        let refused: Value = http
            .post(server.at("/api/sql"))
            .json(&json!({"sql": "SELECT '555-0101' IN customers"}))
            .send()
            .await
            .expect("sql")
            .json()
            .await
            .expect("json");
        assert_eq!(refused["reason"], "restricted_column", "{refused}");
    }
    let logged = eventually(Duration::from_secs(15), || async {
        let text = metrics_text(&http, &server).await;
        sample(&text, "askdb_query_log_rows_total") >= 2.0
    })
    .await;
    assert!(
        logged,
        "both answers are logged into the data directory\n{}",
        server.log()
    );
    let after = metrics_text(&http, &server).await;
    let moved = |series: &str| sample(&after, series) - sample(&before, series);
    assert_eq!(
        moved("askdb_questions_total{decision=\"answer\"}"),
        2.0,
        "{after}"
    );
    assert_eq!(moved("askdb_questions_total{decision=\"give_up\"}"), 0.0);
    assert_eq!(moved("askdb_question_attempts_sum"), 3.0);
    assert_eq!(moved("askdb_question_attempts_count"), 2.0);
    assert_eq!(
        moved("askdb_repairs_total{error_type=\"absent_column\"}"),
        1.0,
        "{after}"
    );
    // The repaired question's column is one its table does not have: the guard refuses
    // it (in the database's words) before it reaches the database.
    assert_eq!(
        moved("askdb_guard_refusals_total{reason=\"unknown_column\"}"),
        1.0,
        "{after}"
    );
    assert_eq!(
        moved("askdb_database_errors_total{error_type=\"unknown_column\"}"),
        0.0
    );
    assert_eq!(
        moved("askdb_model_calls_total{purpose=\"write_sql\"}"),
        2.0,
        "{after}"
    );
    assert_eq!(
        moved("askdb_model_calls_total{purpose=\"repair_sql\"}"),
        1.0
    );
    assert_eq!(
        moved("askdb_model_latency_seconds_count{policy=\"\",user=\"\"}"),
        3.0
    );
    assert!(moved("askdb_model_tokens_total{direction=\"input\"}") > 0.0);
    assert_eq!(
        moved("askdb_refused_requests_total{reason=\"rate_limited\"}"),
        1.0
    );
    assert_eq!(moved("askdb_refused_requests_total{reason=\"busy\"}"), 0.0);
    assert_eq!(
        moved("askdb_guard_check_disagreements_total"),
        2.0,
        "{after}"
    );
    assert!(moved("askdb_guard_database_checks_total") >= 4.0, "{after}");
    assert_eq!(moved("askdb_query_log_rows_total"), 2.0);
    assert_eq!(moved("askdb_query_log_failures_total"), 0.0);

    let (status, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["query_log_enabled"], true);
    assert_eq!(health["query_log_writable"], true);
    assert_eq!(health["schema_snapshot"], false, "no snapshot was taken");

    match promtool(&after) {
        Some((ok, output)) => assert!(ok, "promtool rejects the metrics: {output}\n{after}"),
        None => ci::skip_or_fail(
            test,
            "promtool is not installed (scripts/install-test-tools.sh installs it)",
        ),
    }
}

/// A logged question of `user` with `decision`.
fn user_record(question: &str, user: Option<&str>, decision: &str) -> askdb::querylog::LogRecord {
    askdb::querylog::LogRecord {
        question: question.to_string(),
        asked_at: std::time::SystemTime::now(),
        sql: Some(COUNT_SQL.to_string()),
        attempts: 1,
        error_types: Vec::new(),
        decision: decision.to_string(),
        row_count: 1,
        latency_ms: 5,
        input_tokens: 10,
        output_tokens: 2,
        cost_usd: 0.0,
        model: Some("scripted".to_string()),
        trace_id: None,
        mode: "agent".to_string(),
        conversation_id: None,
        turn: None,
        examples: Vec::new(),
        rerun_example: None,
        user: user.map(str::to_string),
    }
}

/// Writes ana's three questions (one declined), ben's one and one without a user into
/// `target`, then checks what `askdb log stats --user` reads from `from`.
async fn stats_by_user(target: askdb::querylog::LogTarget, from: &str) {
    let log = askdb::querylog::QueryLog::start(target);
    let records = [
        user_record("q1", Some("ana"), "answer"),
        user_record("q2", Some("ben"), "answer"),
        user_record("q3", Some("ana"), "decline"),
        user_record("q4", None, "answer"),
        user_record("q5", Some("ana"), "answer"),
    ];
    for record in records {
        log.record(record);
    }
    let written = eventually(Duration::from_secs(15), || async {
        log.counters().written() + log.counters().failed() >= 5
    })
    .await;
    assert!(
        written && log.counters().failed() == 0,
        "{:?}",
        log.counters().last_error()
    );
    let home = tempfile::tempdir().expect("home");
    for (user, questions, declined) in [("ana", 3, 1), ("ben", 1, 0), ("carla", 0, 0)] {
        let (code, stdout, stderr) = askdb(
            home.path(),
            &["--json", "log", "stats", "--from", from, "--user", user],
        );
        assert_eq!(code, 0, "{stdout}{stderr}");
        let stats: Value = serde_json::from_str(&stdout).expect("JSON stats");
        assert_eq!(stats["user"], user, "{stats}");
        assert_eq!(stats["questions"], questions, "{user}: {stats}");
        assert_eq!(
            stats["decisions"]["decline"].as_u64().unwrap_or(0),
            declined,
            "{stats}"
        );
    }
    let (code, stdout, _) = askdb(home.path(), &["--json", "log", "stats", "--from", from]);
    assert_eq!(code, 0);
    let everyone: Value = serde_json::from_str(&stdout).expect("JSON stats");
    assert_eq!(everyone["questions"], 5, "{everyone}");
    assert!(everyone.get("user").is_none(), "{everyone}");
    let (code, text, _) = askdb(
        home.path(),
        &["log", "stats", "--from", from, "--user", "ana"],
    );
    assert_eq!(code, 0);
    assert!(text.contains("questions asked by ana: 3"), "{text}");
    // A name is a bound parameter: quotes are a name no one has, not SQL.
    let (code, stdout, stderr) = askdb(
        home.path(),
        &[
            "--json",
            "log",
            "stats",
            "--from",
            from,
            "--user",
            "ana' OR '1'='1",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let none: Value = serde_json::from_str(&stdout).expect("JSON stats");
    assert_eq!(none["questions"], 0, "{none}");
}

#[tokio::test]
async fn log_stats_by_user_on_a_sqlite_log() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("query_log.sqlite");
    stats_by_user(
        askdb::querylog::LogTarget::Sqlite {
            path: path.clone(),
            database: "demo".to_string(),
        },
        &path.display().to_string(),
    )
    .await;
}

#[tokio::test]
async fn postgres_log_stats_by_user() {
    let test = "postgres_log_stats_by_user";
    let Some(scratch) = Scratch::new(test, "qlogu") else {
        return;
    };
    let report = askdb::admin::setup(&options(&scratch))
        .await
        .unwrap_or_else(|error| panic!("db setup: {error}"));
    let log_url = report.log.connection_url().to_string();
    let admin_url = askdb::admin::url_with_database(&scratch.admin_url, &scratch.database);
    stats_by_user(askdb::querylog::LogTarget::Postgres(log_url), &admin_url).await;
}
