//! `askdb serve` when what it depends on fails, each fault made on the real component:
//! a private PostgreSQL server restarted under load and its connection pool exhausted;
//! an OpenAI-compatible model server killed in the middle of a question, or one that
//! accepts and never answers; the SQLite file removed, replaced by garbage, put back
//! and replaced by another database; the spend ledger made unwritable and the disk
//! full (`/dev/full`); and SIGTERM while requests are in flight. Each test asserts what
//! the client sees (status, error code, error type), that the server lives on, and that
//! it recovers by itself once the fault is gone. Durations are printed, not asserted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

#[path = "support/ci.rs"]
mod ci;
#[path = "support/fake_model.rs"]
mod fake_model;
#[path = "support/private_postgres.rs"]
mod private_postgres;
#[path = "support/serve.rs"]
mod serve;

use fake_model::{Behaviour, FakeModel};
use private_postgres::PrivatePostgres;
use serve::{get_json as get, http_client as client, Server};

/// (status, body, Retry-After) of one request; panics when no answer comes.
async fn send(
    http: &reqwest::Client,
    url: &str,
    body: &Value,
) -> (StatusCode, Value, Option<String>) {
    let response = http
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap_or_else(|error| panic!("POST {url} got no answer: {error}"));
    let status = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    (
        status,
        response.json().await.unwrap_or(Value::Null),
        retry_after,
    )
}

async fn post(http: &reqwest::Client, url: &str, body: &Value) -> (StatusCode, Value) {
    let (status, body, _) = send(http, url, body).await;
    (status, body)
}

/// A private PostgreSQL with the demo loaded and the two roles proven; the URL is the
/// read-only role's. None (SKIPPED) when PostgreSQL's tools are missing, outside CI.
async fn private_demo(test: &str) -> Option<(PrivatePostgres, String)> {
    let server = match PrivatePostgres::start() {
        Ok(server) => server,
        Err(why) => {
            ci::skip_or_fail(test, &format!("cannot start a private PostgreSQL ({why})"));
            return None;
        }
    };
    let options = askdb::admin::SetupOptions {
        admin_url: server.admin_url(),
        database: "askdb_demo".to_string(),
        read_only_role: askdb::admin::RoleSpec::new("askdb_ro"),
        log_role: askdb::admin::RoleSpec::new("askdb_log"),
        example_rls: Vec::new(),
    };
    let report = askdb::admin::setup(&options)
        .await
        .unwrap_or_else(|error| panic!("db setup on the private server: {error}"));
    let url = report.read_only.connection_url().to_string();
    Some((server, url))
}

/// One request of a load loop: when it was sent, its status (0: no answer at all),
/// and the error type of a failed statement.
#[derive(Debug, Clone)]
struct Outcome {
    sent: Instant,
    status: u16,
    error_type: Option<String>,
}

/// `workers` loops posting `sql` to /api/sql until `stop` is set.
fn sql_load(
    server_url: &str,
    sql: &str,
    workers: usize,
    stop: &Arc<AtomicBool>,
) -> (Arc<Mutex<Vec<Outcome>>>, Vec<tokio::task::JoinHandle<()>>) {
    let outcomes: Arc<Mutex<Vec<Outcome>>> = Arc::default();
    let mut handles = Vec::new();
    for _ in 0..workers {
        let http = client();
        let url = format!("{server_url}/api/sql");
        let body = json!({ "sql": sql });
        let stop = Arc::clone(stop);
        let outcomes = Arc::clone(&outcomes);
        handles.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let sent = Instant::now();
                let outcome = match http.post(&url).json(&body).send().await {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        let value: Value = response.json().await.unwrap_or(Value::Null);
                        Outcome {
                            sent,
                            status,
                            error_type: value["error_type"].as_str().map(str::to_string),
                        }
                    }
                    Err(_) => Outcome {
                        sent,
                        status: 0,
                        error_type: None,
                    },
                };
                if let Ok(mut list) = outcomes.lock() {
                    list.push(outcome);
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }
    (outcomes, handles)
}

// ---- PostgreSQL ----

const PG_QUERY: &str = "SELECT status, count(*) AS bills FROM bills GROUP BY status";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarted_under_load_gives_connection_errors_and_the_pool_recovers_by_itself() {
    let test =
        "postgres_restarted_under_load_gives_connection_errors_and_the_pool_recovers_by_itself";
    let Some((postgres, url)) = private_demo(test).await else {
        return;
    };
    let server = Server::start(&["--db", &url], &[]);
    let http = client();
    let (status, body) = post(&http, &server.at("/api/sql"), &json!({ "sql": PG_QUERY })).await;
    assert_eq!(status, StatusCode::OK, "{body}\n{}", server.log());
    assert_eq!(body["ok"], true, "{body}");

    let stop = Arc::new(AtomicBool::new(false));
    let (outcomes, workers) = sql_load(&server.url, PG_QUERY, 8, &stop);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let postgres = Arc::new(postgres);
    let restarting = Arc::clone(&postgres);
    let restart_started = Instant::now();
    tokio::task::spawn_blocking(move || restarting.restart())
        .await
        .expect("restart task")
        .unwrap_or_else(|error| panic!("pg_ctl restart: {error}"));
    let back = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.expect("worker");
    }
    let outcomes = outcomes.lock().expect("outcomes").clone();

    let unanswered = outcomes.iter().filter(|o| o.status == 0).count();
    assert_eq!(unanswered, 0, "every request is answered\n{}", server.log());
    let not_ok: Vec<&Outcome> = outcomes.iter().filter(|o| o.status != 200).collect();
    assert!(
        not_ok.is_empty(),
        "a lost connection is data (200, ok: false), never a 5xx: {not_ok:?}"
    );
    let failures: Vec<&Outcome> = outcomes.iter().filter(|o| o.error_type.is_some()).collect();
    assert!(
        !failures.is_empty(),
        "the restart was seen by the requests in flight ({} requests)",
        outcomes.len()
    );
    for failure in &failures {
        assert_eq!(
            failure.error_type.as_deref(),
            Some("connection_error"),
            "{failure:?}"
        );
    }
    let after: Vec<&Outcome> = outcomes.iter().filter(|o| o.sent >= back).collect();
    assert!(!after.is_empty(), "requests were sent after the restart");
    let failed_after: Vec<&&Outcome> = after.iter().filter(|o| o.error_type.is_some()).collect();
    assert!(
        failed_after.is_empty(),
        "the pool recovers by itself: every request sent once PostgreSQL accepts connections again succeeds ({} of {} failed)",
        failed_after.len(),
        after.len()
    );
    // The service is whole again: health passes its database checks.
    let (_, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(health["database_reachable"], true, "{health}");
    assert_eq!(health["read_only_confirmed"], true, "{health}");
    eprintln!(
        "fault figure: PostgreSQL restarted under load (8 clients): {} requests, {} answered connection_error while it restarted ({} ms until it accepted connections again), all {} sent after that answered with rows",
        outcomes.len(),
        failures.len(),
        (back - restart_started).as_millis(),
        after.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_postgres_pool_is_a_503_with_retry_after_not_an_endless_wait() {
    let test = "an_exhausted_postgres_pool_is_a_503_with_retry_after_not_an_endless_wait";
    let Some((_postgres, url)) = private_demo(test).await else {
        return;
    };
    // Statements may run 9 s, longer than a caller waits for a connection (5 s).
    let server = Server::start(&["--db", &url, "--timeout-ms", "9000"], &[]);
    let http = client();
    // 2.7 billion rows: runs until the statement timeout, holding its connection.
    let slow = json!({"sql": "SELECT count(*) AS n FROM bills a, bills b, bills c"});
    let mut holders = Vec::new();
    for _ in 0..4 {
        let http = http.clone();
        let url = server.at("/api/sql");
        let slow = slow.clone();
        holders.push(tokio::spawn(async move { post(&http, &url, &slow).await }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let sent = Instant::now();
    let (status, body, retry_after) = send(
        &http,
        &server.at("/api/sql"),
        &json!({"sql": "SELECT 1 AS one"}),
    )
    .await;
    let waited = sent.elapsed();
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "every connection is held: {body}\n{}",
        server.log()
    );
    assert_eq!(body["error"], "database_busy", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("connection")),
        "the detail says why: {body}"
    );
    assert_eq!(retry_after.as_deref(), Some("1"), "Retry-After is set");
    for holder in holders {
        let (status, body) = holder.await.expect("holder");
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["error_type"], "timeout", "{body}");
    }
    let (status, body) = post(
        &http,
        &server.at("/api/sql"),
        &json!({"sql": "SELECT 1 AS one"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rows"], json!([[1]]), "the pool is free again");
    eprintln!(
        "fault figure: PostgreSQL pool exhausted (4 statements holding the 4 connections): the fifth caller was answered 503 database_busy after {} ms",
        waited.as_millis()
    );
}

// ---- The model server ----

const QUESTION: &str = "How many customers are there?";
const COUNT_REPLY: &str = r#"{"sql": "SELECT count(*) AS customers FROM customers"}"#;

fn model_env(model: &FakeModel) -> Vec<(&'static str, String)> {
    vec![
        ("ASKDB_PROVIDER", "openai".to_string()),
        ("ASKDB_BASE_URL", model.base_url()),
        ("ASKDB_MODEL", "fake-model".to_string()),
        ("ASKDB_MODEL_MAX_ATTEMPTS", "2".to_string()),
        ("ASKDB_MODEL_TIMEOUT_SECS", "30".to_string()),
    ]
}

fn start_with_model(args: &[&str], env: &[(&'static str, String)]) -> Server {
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Server::start(args, &pairs)
}

async fn wait_for_requests(model: &FakeModel, count: usize) {
    for _ in 0..600 {
        if model.received() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the model server never got request {count}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_server_killed_during_a_question_is_a_502_the_slot_comes_back_and_the_next_question_is_answered(
) {
    let model = FakeModel::start(Behaviour::Hang).await;
    let server = start_with_model(
        &[
            "--max-concurrent-asks",
            "1",
            "--asks-per-minute",
            "0",
            "--explain",
            "false",
        ],
        &model_env(&model),
    );
    let http = client();
    let asking = {
        let http = http.clone();
        let url = server.at("/api/ask");
        tokio::spawn(async move { post(&http, &url, &json!({ "question": QUESTION })).await })
    };
    wait_for_requests(&model, 1).await;
    let killed = Instant::now();
    model.kill();
    let (status, body) = asking.await.expect("ask");
    let answered_after = killed.elapsed();
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}\n{}", server.log());
    assert_eq!(body["error"], "model_unavailable", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("could not be asked")),
        "{body}"
    );
    // The one slot was given back: with the model still down the next question is
    // told the model is unavailable, not that askdb is busy.
    let (status, body) = post(
        &http,
        &server.at("/api/ask"),
        &json!({ "question": QUESTION }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{body}");
    assert_eq!(body["error"], "model_unavailable");

    model.set(Behaviour::Answer(COUNT_REPLY.to_string()));
    model.restart().await;
    let (status, body) = post(
        &http,
        &server.at("/api/ask"),
        &json!({ "question": QUESTION }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}\n{}", server.log());
    assert_eq!(body["decision"], "answer", "{body}");
    assert_eq!(body["rows"], json!([[120]]));
    eprintln!(
        "fault figure: the model server killed during a question: 502 model_unavailable {} ms after the kill (2 attempts), the slot free, the next question answered once it was back",
        answered_after.as_millis()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_accepts_and_never_answers_is_a_504_at_the_ask_timeout_and_the_slot_comes_back(
) {
    let model = FakeModel::start(Behaviour::Hang).await;
    let server = start_with_model(
        &[
            "--max-concurrent-asks",
            "1",
            "--asks-per-minute",
            "0",
            "--ask-timeout-secs",
            "2",
            "--explain",
            "false",
        ],
        &model_env(&model),
    );
    let http = client();
    let sent = Instant::now();
    let (status, body) = post(
        &http,
        &server.at("/api/ask"),
        &json!({ "question": QUESTION }),
    )
    .await;
    let took = sent.elapsed();
    assert_eq!(
        status,
        StatusCode::GATEWAY_TIMEOUT,
        "{body}\n{}",
        server.log()
    );
    assert_eq!(body["error"], "ask_timeout", "{body}");
    assert!(model.received() >= 1, "the model was asked");
    // The abandoned call does not stay open on the model server: its connection is
    // closed, which is what stops a llama.cpp generation.
    let gave_up = Instant::now();
    while model.abandoned() < model.received() && gave_up.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        model.abandoned(),
        model.received(),
        "every call the question gave up on was closed on the model server"
    );

    model.set(Behaviour::Answer(COUNT_REPLY.to_string()));
    let (status, body) = post(
        &http,
        &server.at("/api/ask"),
        &json!({ "question": QUESTION }),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the slot came back after the timeout: {body}\n{}",
        server.log()
    );
    assert_eq!(body["rows"], json!([[120]]));
    eprintln!(
        "fault figure: a model that never answers: 504 ask_timeout after {} ms (--ask-timeout-secs 2), the next question answered",
        took.as_millis()
    );
}

// ---- The spend ledger ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unwritable_spend_ledger_or_a_full_disk_refuses_calls_and_every_call_made_is_counted() {
    let model = FakeModel::start(Behaviour::Answer(COUNT_REPLY.to_string())).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let folder = dir.path().join("ledger");
    let ledger = folder.join("spend.jsonl");
    let mut env = model_env(&model);
    env.push(("ASKDB_SPEND_LEDGER", ledger.display().to_string()));
    let server = start_with_model(&["--asks-per-minute", "0", "--explain", "false"], &env);
    let http = client();
    let ask = |n: u32| {
        let http = http.clone();
        let url = server.at("/api/ask");
        async move {
            post(
                &http,
                &url,
                &json!({ "question": format!("{QUESTION} ({n})") }),
            )
            .await
        }
    };

    let (status, body) = ask(1).await;
    assert_eq!(status, StatusCode::OK, "{body}\n{}", server.log());
    let made = model.received();
    assert!(made >= 1);

    // Unwritable: the ledger's folder is replaced by a file (which holds even for root).
    let aside = dir.path().join("ledger-aside");
    std::fs::rename(&folder, &aside).expect("move the folder");
    std::fs::write(&folder, "not a folder").expect("file in its place");
    let (status, body) = ask(2).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{body}\n{}",
        server.log()
    );
    assert_eq!(body["error"], "spend_ledger_unavailable", "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|detail| detail.contains("spend ledger")),
        "{body}"
    );
    assert_eq!(
        model.received(),
        made,
        "no call is made that the ledger cannot count"
    );
    std::fs::remove_file(&folder).expect("remove the file");
    std::fs::rename(&aside, &folder).expect("folder back");

    // A full disk: every write to /dev/full fails with ENOSPC.
    #[cfg(unix)]
    if std::path::Path::new("/dev/full").exists() {
        let real = folder.join("spend.real");
        std::fs::rename(&ledger, &real).expect("move the ledger");
        std::os::unix::fs::symlink("/dev/full", &ledger).expect("symlink");
        let (status, body) = ask(3).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["error"], "spend_ledger_unavailable", "{body}");
        assert_eq!(model.received(), made, "a full disk makes no call either");
        let log = server.log_containing("No space left on device", Duration::from_secs(5));
        assert!(
            log.contains("No space left on device"),
            "the server log says why: {log}"
        );
        std::fs::remove_file(&ledger).expect("remove the symlink");
        std::fs::rename(&real, &ledger).expect("ledger back");
    }

    let (status, body) = ask(4).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "writable again: {body}\n{}",
        server.log()
    );
    let made = model.received();
    let counted = askdb::llm::SpendLedger::open(&ledger, None)
        .expect("the ledger reads")
        .calls();
    assert_eq!(
        counted, made as u64,
        "every call the model server received is in the ledger"
    );
    eprintln!(
        "fault figure: spend ledger unwritable, then on a full disk: both refused 503 spend_ledger_unavailable with no model call; {made} calls received by the model, {counted} counted by the ledger"
    );
}

// ---- The SQLite file ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_file_removed_or_replaced_while_serving_gives_clear_errors_then_recovers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("demo.sqlite");
    askdb::demo::write_sqlite(&path).expect("demo");
    let server = Server::start(&["--db", &format!("sqlite:{}", path.display())], &[]);
    let http = client();
    const COUNT: &str = "SELECT count(*) AS n FROM customers";
    let count = || {
        let http = http.clone();
        let url = server.at("/api/sql");
        async move { post(&http, &url, &json!({ "sql": COUNT })).await }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let (outcomes, workers) = sql_load(&server.url, COUNT, 4, &stop);

    let (status, body) = count().await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["rows"], json!([[120]]), "{body}");

    // Removed (moved away): a clear connection_error, and health says so.
    let aside = dir.path().join("aside.sqlite");
    std::fs::rename(&path, &aside).expect("move away");
    let (status, body) = count().await;
    assert_eq!(status, StatusCode::OK, "a failure is data: {body}");
    assert_eq!(
        body["ok"], false,
        "an open connection must not keep reading the removed file: {body}"
    );
    assert_eq!(body["error_type"], "connection_error", "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("missing")),
        "{body}"
    );
    let (_, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(health["database_reachable"], false, "{health}");

    // Replaced by something that is not a database.
    std::fs::write(&path, "this is not a SQLite database").expect("garbage");
    let (_, body) = count().await;
    assert_eq!(body["error_type"], "connection_error", "{body}");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.contains("not a readable SQLite database")),
        "{body}"
    );

    // Back: answered again, no restart.
    std::fs::rename(&aside, &path).expect("put back");
    let (_, body) = count().await;
    assert_eq!(body["rows"], json!([[120]]), "{body}");
    let (_, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(health["database_reachable"], true, "{health}");

    // Replaced by another database: its rows, not the old file's.
    let other = dir.path().join("other.sqlite");
    askdb::demo::write_sqlite(&other).expect("demo");
    {
        let connection = rusqlite::Connection::open(&other).expect("open");
        connection
            .execute_batch("PRAGMA foreign_keys = OFF")
            .expect("pragma");
        connection
            .execute(
                "DELETE FROM customers WHERE rowid IN (SELECT rowid FROM customers LIMIT 20)",
                [],
            )
            .expect("delete");
    }
    std::fs::rename(&other, &path).expect("replace");
    let (_, body) = count().await;
    assert_eq!(
        body["rows"],
        json!([[100]]),
        "the replacement is read: {body}"
    );

    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.expect("worker");
    }
    let outcomes = outcomes.lock().expect("outcomes").clone();
    let bad: Vec<&Outcome> = outcomes.iter().filter(|o| o.status != 200).collect();
    assert!(
        bad.is_empty(),
        "no 5xx, no dropped request: {bad:?}\n{}",
        server.log()
    );
    let types: std::collections::BTreeSet<String> = outcomes
        .iter()
        .filter_map(|o| o.error_type.clone())
        .collect();
    assert!(
        types.iter().all(|t| t == "connection_error"),
        "only connection errors while the file was away: {types:?}"
    );
    assert!(!server.log().contains("panicked"), "{}", server.log());
    eprintln!(
        "fault figure: SQLite file moved away, replaced by text, put back, replaced by another database, under load (4 clients): {} requests, all 200, error types {types:?}, no panic",
        outcomes.len()
    );
}

// ---- SIGTERM ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_finishes_the_requests_in_flight_refuses_new_ones_and_exits_0() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("script.jsonl");
    let lines: String = (1..=4)
        .map(|n| {
            format!(
                "{}\n",
                json!({"question": format!("Slow question {n}"), "purpose": "write_sql", "delay_ms": 2500,
                       "reply": {"sql": "SELECT count(*) AS customers FROM customers"}})
            )
        })
        .collect();
    std::fs::write(&script, lines).expect("script");
    let script = script.display().to_string();
    let mut server = Server::start(
        &[
            "--max-concurrent-asks",
            "4",
            "--asks-per-minute",
            "0",
            "--explain",
            "false",
        ],
        &[("ASKDB_PROVIDER", "scripted"), ("ASKDB_SCRIPT", &script)],
    );
    let http = client();
    let mut asks = Vec::new();
    for n in 1..=4 {
        let http = http.clone();
        let url = server.at("/api/ask");
        asks.push(tokio::spawn(async move {
            post(
                &http,
                &url,
                &json!({ "question": format!("Slow question {n}") }),
            )
            .await
        }));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (outcomes, workers) = sql_load(&server.url, "SELECT count(*) FROM bills", 2, &stop);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let terminated = Instant::now();
    server.terminate();

    // New connections are refused once the server stops accepting.
    let mut refused = false;
    for _ in 0..50 {
        let fresh = client();
        match fresh
            .post(server.at("/api/sql"))
            .json(&json!({"sql": "SELECT 1"}))
            .send()
            .await
        {
            Err(error) if error.is_connect() => {
                refused = true;
                break;
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    assert!(
        refused,
        "new connections are refused after SIGTERM\n{}",
        server.log()
    );

    for ask in asks {
        let (status, body) = ask.await.expect("ask");
        assert_eq!(
            status,
            StatusCode::OK,
            "a question in flight is finished: {body}\n{}",
            server.log()
        );
        assert_eq!(body["rows"], json!([[120]]));
    }
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        worker.await.expect("worker");
    }
    let status = server
        .wait_exit(Duration::from_secs(60))
        .expect("the server exits after the requests in flight");
    let exited_after = terminated.elapsed();
    assert_eq!(status.code(), Some(0), "exit 0: {status}\n{}", server.log());
    assert!(server.log().contains("shutting down"), "{}", server.log());
    let outcomes = outcomes.lock().expect("outcomes").clone();
    let answered: Vec<&Outcome> = outcomes.iter().filter(|o| o.status != 0).collect();
    assert!(
        answered.iter().all(|o| o.status == 200),
        "every answered SQL request is a 200: {answered:?}"
    );
    eprintln!(
        "fault figure: SIGTERM with 4 questions (2.5 s each) and 2 SQL clients in flight: the 4 questions answered 200, new connections refused, exit 0 after {} ms, {} SQL requests answered 200",
        exited_after.as_millis(),
        answered.len()
    );
}

// ---- The warm-up at start ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_warms_an_unmetered_model_once_at_start_and_the_flag_turns_it_off() {
    let model = FakeModel::start(Behaviour::Answer(COUNT_REPLY.to_string())).await;
    let env = model_env(&model);
    let server = start_with_model(&["--warm-up", "true"], &env);
    wait_for_requests(&model, 1).await;
    let log = server.log_containing("the model has read the schema", Duration::from_secs(10));
    assert!(log.contains("the model has read the schema"), "{log}");
    assert_eq!(model.received(), 1, "one warm-up call, no more");
    drop(server);

    let quiet = FakeModel::start(Behaviour::Answer(COUNT_REPLY.to_string())).await;
    let env = model_env(&quiet);
    let server = start_with_model(&["--warm-up", "false"], &env);
    let (status, body) = post(
        &client(),
        &server.at("/api/ask"),
        &json!({ "question": QUESTION, "explain": false }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(quiet.received(), 1, "only the question's own call");
}
