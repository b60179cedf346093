//! The HTTP API over real HTTP: `askdb serve --addr 127.0.0.1:0` started as a user
//! starts it (its own ASKDB_HOME, where the demo database is built; the scripted model
//! provider), then every endpoint, every bad input, the rate limit, the cap on
//! questions in flight, and health reporting false when the database is writable (a
//! test hook, in-process) or unreachable (PostgreSQL behind a relay this test cuts) or
//! when no model is configured.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use askdb::gate::GateOptions;
use askdb::llm::{ModelClient, ProviderConfig};
use askdb::server::{AppState, ServerConfig};
use reqwest::StatusCode;
use serde_json::{json, Value};

#[path = "support/ci.rs"]
mod ci;
#[path = "support/serve.rs"]
mod serve;
use serve::{get_json as get, http_client as client, post_json as post, Server};

fn write_script(dir: &Path, lines: &[Value]) -> String {
    let path = dir.join("script.jsonl");
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(&path, text).expect("script");
    path.display().to_string()
}

const REPAIRED: &str = "How many bills does each customer have?";
const BROKEN_SQL: &str = "SELECT c.customer_name AS customer, count(*) AS bills FROM bills b LEFT JOIN customers c ON c.cust_id = b.cust_id GROUP BY 1 ORDER BY bills DESC LIMIT 6";
const FIXED_SQL: &str = "SELECT c.cust_name AS customer, count(*) AS bills FROM bills b LEFT JOIN customers c ON c.cust_id = b.cust_id GROUP BY c.cust_name ORDER BY bills DESC LIMIT 6";

fn check_line() -> Value {
    json!({"question": "*", "purpose": "check", "reply": "ok"})
}

#[tokio::test]
async fn every_endpoint_answers_over_real_http() {
    let files = tempfile::tempdir().expect("temp dir");
    let script = write_script(
        files.path(),
        &[
            json!({"question": REPAIRED, "purpose": "write_sql", "reply": {"sql": BROKEN_SQL}}),
            json!({"question": REPAIRED, "purpose": "repair_sql", "reply": {"sql": FIXED_SQL}}),
            json!({"question": REPAIRED, "purpose": "write_answer", "reply": "Walk-in sales make up 980 bills."}),
            // Baseline mode: the same broken query, and no second chance.
            json!({"question": "Which customer has the most bills?", "purpose": "write_sql", "reply": {"sql": BROKEN_SQL}}),
            // One check line only: the second health request must use the cached check.
            check_line(),
        ],
    );
    let eval_dir = files.path().join("results");
    let summary = "{\n  \"set\": \"demo\",\n  \"generated_at\": \"2026-11-30 09:00:00\",\n  \"modes\": {}\n}\n";
    std::fs::create_dir_all(eval_dir.join("demo/run-2")).expect("mkdir");
    std::fs::write(eval_dir.join("demo/run-2/summary.json"), summary).expect("write");
    std::fs::create_dir_all(eval_dir.join("demo/run-1")).expect("mkdir");
    std::fs::write(
        eval_dir.join("demo/run-1/summary.json"),
        r#"{"generated_at": "2026-11-01 09:00:00"}"#,
    )
    .expect("write");
    let eval_dir = eval_dir.display().to_string();
    let server = Server::start(
        &["--db", "demo"],
        &[
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script),
            ("ASKDB_EVAL_DIR", &eval_dir),
        ],
    );
    let http = client();

    // The page and its embedded files.
    let page = http.get(server.at("/")).send().await.expect("page");
    assert_eq!(page.status(), StatusCode::OK);
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap_or_default()
        .starts_with("text/html"));
    assert!(page
        .text()
        .await
        .unwrap_or_default()
        .contains("/assets/app.js"));
    for asset in [
        "/assets/app.js",
        "/assets/style.css",
        "/assets/vendor/chart.umd.min.js",
    ] {
        let response = http.get(server.at(asset)).send().await.expect("asset");
        assert_eq!(response.status(), StatusCode::OK, "{asset}");
    }

    // The JSON API as a table of exchanges, asked in order (the scripted replies are
    // consumed in this order): request, expected status, and the values expected at
    // JSON pointers of the reply.
    let exchanges: Vec<Exchange> = vec![
        Exchange::get("/api/openapi.json", 200, &[("/openapi", json!("3.1.0"))]),
        Exchange::get(
            "/api/schema",
            200,
            &[("/database", json!("demo")), ("/dialect", json!("sqlite"))],
        ),
        Exchange::post(
            "/api/sql",
            json!({"sql": "SELECT status, count(*) AS bills FROM bills GROUP BY status ORDER BY status"}),
            200,
            &[
                ("/ok", json!(true)),
                ("/rows/0", json!(["PAID", 1300])),
                ("/limit/action", json!("capped")),
            ],
        ),
        // A refused statement is data, not an HTTP error.
        Exchange::post(
            "/api/sql",
            json!({"sql": "DELETE FROM bills"}),
            200,
            &[("/ok", json!(false)), ("/error_type", json!("rejected"))],
        ),
        // Agent mode: the unknown column is repaired; the answer keeps the failed attempt.
        Exchange::post(
            "/api/ask",
            json!({"question": REPAIRED, "mode": "agent"}),
            200,
            &[
                ("/decision", json!("answer")),
                ("/mode", json!("agent")),
                ("/attempts", json!(2)),
                // customer_name is not within two edits of any column: data no table holds.
                ("/history/0/error_type", json!("absent_column")),
                ("/sql", json!(FIXED_SQL)),
                ("/rows/0", json!([null, 980])),
                ("/columns", json!(["customer", "bills"])),
                ("/chart/kind", json!("bar")),
                ("/explanation", json!("Walk-in sales make up 980 bills.")),
                ("/tables_used", json!(["bills", "customers"])),
            ],
        ),
        // Baseline mode: one attempt, an honest give-up.
        Exchange::post(
            "/api/ask",
            json!({"question": "Which customer has the most bills?", "mode": "baseline"}),
            200,
            &[
                ("/mode", json!("baseline")),
                ("/decision", json!("give_up")),
                ("/attempts", json!(1)),
                ("/history/0/error_type", json!("absent_column")),
            ],
        ),
    ];
    let mut replies = BTreeMap::new();
    for exchange in &exchanges {
        let reply = exchange.run(&http, &server).await;
        replies.insert(exchange.path, reply);
    }

    // What a table row cannot say in one value.
    let schema = &replies["/api/schema"];
    let tables = schema["tables"].as_array().expect("tables");
    assert_eq!(tables.len(), 15, "the demo's visible tables");
    let bills = tables
        .iter()
        .find(|table| table["name"] == "bills")
        .expect("bills");
    assert_eq!(bills["row_count"], 1400);
    assert!(bills["description"]
        .as_str()
        .is_some_and(|text| !text.is_empty()));
    assert!(bills["columns"]
        .as_array()
        .expect("columns")
        .iter()
        .any(|column| column["name"] == "status" && column["data_type"] == "TEXT"));
    assert!(
        !tables
            .iter()
            .any(|table| table["name"] == "askdb_query_log"),
        "hidden tables stay hidden"
    );
    assert!(replies["/api/openapi.json"]["paths"]["/api/ask"]["post"].is_object());

    // The newest committed summary, byte for byte.
    let response = http.get(server.at("/api/eval")).send().await.expect("eval");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["x-askdb-eval-source"],
        "demo/run-2/summary.json"
    );
    assert_eq!(response.text().await.expect("body"), summary);

    // Health: every check passes; the second request reuses the model check (the
    // script has one check reply, so a second call would fail).
    let healthy = Exchange::get(
        "/api/health",
        200,
        &[
            ("/ok", json!(true)),
            ("/read_only_confirmed", json!(true)),
            ("/database_reachable", json!(true)),
            ("/model_configured", json!(true)),
            ("/model_reachable", json!(true)),
            ("/tables", json!(15)),
            ("/provider", json!("scripted")),
        ],
    );
    for _round in 0..2 {
        healthy.run(&http, &server).await;
    }
}

/// One server-sent event as the stream sent it, and when it arrived.
struct StreamEvent {
    event: String,
    data: Value,
    at: Duration,
}

/// Reads a server-sent-event body chunk by chunk, noting when each event arrived.
async fn read_events(mut response: reqwest::Response) -> Vec<StreamEvent> {
    let started = Instant::now();
    let mut buffer = String::new();
    let mut events = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("the stream reads") {
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let mut event = "message".to_string();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event:") {
                    event = value.trim().to_string();
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push(value.strip_prefix(' ').unwrap_or(value).to_string());
                }
            }
            if data.is_empty() {
                continue; // a keep-alive comment
            }
            let data = serde_json::from_str(&data.join("\n"))
                .unwrap_or_else(|error| panic!("event data is JSON ({error}): {block}"));
            events.push(StreamEvent {
                event,
                data,
                at: started.elapsed(),
            });
        }
    }
    events
}

/// The keys of a JSON object, sorted.
fn keys(value: &Value) -> Vec<String> {
    let mut keys: Vec<String> = value
        .as_object()
        .map(|object| object.keys().cloned().collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

#[tokio::test]
async fn the_stream_sends_each_step_as_it_happens_then_the_ask_result() {
    let files = tempfile::tempdir().expect("temp dir");
    // The same repaired question twice: once streamed, once through POST /api/ask. The
    // first model reply waits, so the steps before it must arrive well before the end.
    let mut lines = Vec::new();
    for delay in [900, 0] {
        lines.push(json!({"question": REPAIRED, "purpose": "write_sql", "delay_ms": delay, "reply": {"sql": BROKEN_SQL,
            "assumptions": ["walk-in bills are counted together", "Walk-in bills are counted together."]}}));
        lines.push(
            json!({"question": REPAIRED, "purpose": "repair_sql", "reply": {"sql": FIXED_SQL}}),
        );
        lines.push(json!({"question": REPAIRED, "purpose": "write_answer", "reply": "Walk-in sales make up 980 bills."}));
    }
    lines.push(json!({"question": "Which customer has the most bills?", "purpose": "write_sql", "error": {"kind": "authentication", "message": "bad key"}}));
    let script = write_script(files.path(), &lines);
    let server = Server::start(
        &["--db", "demo"],
        &[("ASKDB_PROVIDER", "scripted"), ("ASKDB_SCRIPT", &script)],
    );
    let http = client();

    let response = http
        .post(server.at("/api/ask/stream"))
        .json(&json!({"question": REPAIRED, "mode": "agent"}))
        .send()
        .await
        .expect("the stream answers");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap_or_default()
        .starts_with("text/event-stream"));
    let events = read_events(response).await;
    let names: Vec<String> = events
        .iter()
        .map(|event| match event.event.as_str() {
            "step" => event.data["step"].as_str().unwrap_or("?").to_string(),
            other => other.to_string(),
        })
        .collect();
    // Rules, the tables, the broken SQL written, guarded, failing in the database (or
    // refused by the repair rules as data the database lacks), the repair, the fixed SQL
    // guarded and run, the answer written, finished, and the result last.
    let expected_order = [
        "rules",
        "schema_selected",
        "model_call",
        "guard",
        "failed",
        "model_call",
        "guard",
        "executed",
        "model_call",
        "finished",
        "result",
    ];
    let mut position = 0;
    for name in &names {
        if position < expected_order.len() && name == expected_order[position] {
            position += 1;
        }
    }
    assert_eq!(
        position,
        expected_order.len(),
        "the steps arrive in order: {names:?}"
    );
    assert_eq!(
        names.last().map(String::as_str),
        Some("result"),
        "{names:?}"
    );
    assert_eq!(
        names.iter().filter(|name| *name == "result").count(),
        1,
        "{names:?}"
    );
    for event in events.iter().filter(|event| event.event == "step") {
        assert!(event.data["started_ms"].is_u64(), "{}", event.data);
        assert!(
            event.data["summary"]
                .as_str()
                .is_some_and(|text| !text.is_empty()),
            "every step has its sentence: {}",
            event.data
        );
        assert!(event.data.get("prompt").is_none(), "no prompt is streamed");
    }
    let failed = events
        .iter()
        .find(|event| event.data["step"] == "failed")
        .expect("the failed attempt is a step");
    assert_eq!(failed.data["next"], "repair", "{}", failed.data);
    let calls: Vec<&Value> = events
        .iter()
        .filter(|event| event.data["step"] == "model_call")
        .map(|event| &event.data["purpose"])
        .collect();
    assert_eq!(
        calls,
        [
            &json!("write_sql"),
            &json!("repair_sql"),
            &json!("write_answer")
        ]
    );
    // Streamed as they happened: the tables were chosen before the delayed model reply.
    let schema = events
        .iter()
        .find(|event| event.data["step"] == "schema_selected")
        .expect("schema step");
    let result = events.last().expect("result");
    assert!(
        result.at >= schema.at + Duration::from_millis(600),
        "the schema step arrived {:?}, the result {:?}: not streamed",
        schema.at,
        result.at
    );

    // The same question through POST /api/ask: the same JSON shape, the same answer.
    let (status, posted) = post(
        &http,
        &server.at("/api/ask"),
        &json!({"question": REPAIRED, "mode": "agent"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{posted}");
    let streamed = &result.data;
    assert_eq!(keys(streamed), keys(&posted));
    for field in [
        "decision",
        "sql",
        "columns",
        "rows",
        "attempts",
        "history",
        "explanation",
        "chart",
        "tables_used",
        "assumptions",
    ] {
        assert_eq!(streamed[field], posted[field], "{field}");
    }
    assert_eq!(
        posted["assumptions"],
        json!(["walk-in bills are counted together"]),
        "each assumption is listed once"
    );

    // A failure after the stream began is its last event, with the status POST would
    // have had.
    let response = http
        .post(server.at("/api/ask/stream"))
        .json(&json!({"question": "Which customer has the most bills?"}))
        .send()
        .await
        .expect("the stream answers");
    assert_eq!(response.status(), StatusCode::OK);
    let events = read_events(response).await;
    let last = events.last().expect("an event");
    assert_eq!(last.event, "error", "{}", last.data);
    assert_eq!(last.data["status"], 502, "{}", last.data);
    assert_eq!(last.data["error"], "model_unavailable");

    // Bad input is refused before any stream, as POST /api/ask refuses it.
    let (status, body) = post(
        &http,
        &server.at("/api/ask/stream"),
        &json!({"question": "  "}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "empty_question");
}

/// One request of a table-driven test and what its reply must hold.
struct Exchange {
    method: &'static str,
    path: &'static str,
    body: Option<Value>,
    status: u16,
    /// (JSON pointer, expected value) pairs.
    expect: Vec<(&'static str, Value)>,
}

impl Exchange {
    fn get(path: &'static str, status: u16, expect: &[(&'static str, Value)]) -> Exchange {
        Exchange {
            method: "GET",
            path,
            body: None,
            status,
            expect: expect.to_vec(),
        }
    }

    fn post(
        path: &'static str,
        body: Value,
        status: u16,
        expect: &[(&'static str, Value)],
    ) -> Exchange {
        Exchange {
            method: "POST",
            path,
            body: Some(body),
            status,
            expect: expect.to_vec(),
        }
    }

    /// Sends the request and checks the reply; returns the reply's JSON.
    async fn run(&self, http: &reqwest::Client, server: &Server) -> Value {
        let (status, reply) = match &self.body {
            None => get(http, &server.at(self.path)).await,
            Some(body) => post(http, &server.at(self.path), body).await,
        };
        let request = format!(
            "{} {} {}",
            self.method,
            self.path,
            self.body.clone().unwrap_or_default()
        );
        assert_eq!(
            status.as_u16(),
            self.status,
            "{request}: {reply}\n{}",
            server.log()
        );
        for (pointer, expected) in &self.expect {
            assert_eq!(
                reply.pointer(pointer),
                Some(expected),
                "{request}: {pointer} in {reply}"
            );
        }
        reply
    }
}

/// (method, path, content type, body, expected status, expected error code)
type BadInput = (
    &'static str,
    &'static str,
    Option<&'static str>,
    String,
    u16,
    &'static str,
);

#[tokio::test]
async fn bad_input_gets_a_clear_json_4xx_and_costs_no_rate_token() {
    let files = tempfile::tempdir().expect("temp dir");
    let script = write_script(
        files.path(),
        &[
            json!({"question": "How many customers are there?", "purpose": "write_sql", "reply": {"sql": "SELECT count(*) FROM customers"}}),
        ],
    );
    // One ask a minute: the valid question at the end must still get through.
    let server = Server::start(
        &["--asks-per-minute", "1", "--explain", "false"],
        &[("ASKDB_PROVIDER", "scripted"), ("ASKDB_SCRIPT", &script)],
    );
    let http = client();
    let too_long = "x".repeat(askdb::agent::MAX_QUESTION_CHARS + 1);
    let oversized = json!({"question": "y".repeat(80 * 1024)}).to_string();
    let cases: Vec<BadInput> = vec![
        (
            "POST",
            "/api/ask",
            Some("application/json"),
            json!({"question": ""}).to_string(),
            400,
            "empty_question",
        ),
        (
            "POST",
            "/api/ask",
            Some("application/json"),
            json!({"question": " \n\t "}).to_string(),
            400,
            "empty_question",
        ),
        (
            "POST",
            "/api/ask",
            Some("application/json"),
            json!({"question": too_long}).to_string(),
            400,
            "question_too_long",
        ),
        (
            "POST",
            "/api/ask",
            Some("application/json"),
            json!({"question": "How many?", "mode": "fast"}).to_string(),
            400,
            "unknown_mode",
        ),
        (
            "POST",
            "/api/ask",
            Some("application/json"),
            "{\"question\": \"How many".to_string(),
            400,
            "malformed_json",
        ),
        (
            "POST",
            "/api/ask",
            Some("application/json"),
            "".to_string(),
            400,
            "malformed_json",
        ),
        (
            "POST",
            "/api/ask",
            Some("application/json"),
            json!({"query": "How many?"}).to_string(),
            422,
            "invalid_request",
        ),
        (
            "POST",
            "/api/ask",
            Some("application/json"),
            json!({"question": 42}).to_string(),
            422,
            "invalid_request",
        ),
        (
            "POST",
            "/api/ask",
            Some("text/plain"),
            json!({"question": "How many?"}).to_string(),
            415,
            "unsupported_media_type",
        ),
        (
            "POST",
            "/api/ask",
            Some("application/json"),
            oversized,
            413,
            "payload_too_large",
        ),
        (
            "POST",
            "/api/sql",
            Some("application/json"),
            json!({"sql": "  "}).to_string(),
            400,
            "empty_sql",
        ),
        (
            "POST",
            "/api/sql",
            Some("application/json"),
            "{\"sql\": \"SELECT".to_string(),
            400,
            "malformed_json",
        ),
        (
            "GET",
            "/api/ask",
            None,
            String::new(),
            405,
            "method_not_allowed",
        ),
        ("GET", "/api/tables", None, String::new(), 404, "not_found"),
    ];
    for (method, path, content_type, body, want_status, want_code) in cases {
        let mut request = match method {
            "GET" => http.get(server.at(path)),
            _ => http.post(server.at(path)).body(body.clone()),
        };
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let response = request.send().await.expect("answers");
        let status = response.status().as_u16();
        let json_type = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("application/json"));
        let value: Value = response.json().await.unwrap_or(Value::Null);
        let shown: String = body.chars().take(60).collect();
        assert_eq!(status, want_status, "{method} {path} {shown:?}: {value}");
        assert!(json_type, "{method} {path}: the error is JSON");
        assert_eq!(value["error"], want_code, "{method} {path} {shown:?}");
        assert!(
            value["detail"]
                .as_str()
                .is_some_and(|detail| detail.len() > 10),
            "{method} {path}: a detail says what went wrong: {value}"
        );
    }
    let (status, answer) = post(
        &http,
        &server.at("/api/ask"),
        &json!({"question": "How many customers are there?"}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "bad input took no token: {answer}\n{}",
        server.log()
    );
    assert_eq!(answer["rows"], json!([[120]]));
}

#[tokio::test]
async fn the_rate_limit_answers_429_with_retry_after() {
    let files = tempfile::tempdir().expect("temp dir");
    let any_count = json!({"question": "*", "purpose": "write_sql", "reply": {"sql": "SELECT count(*) FROM bills"}});
    let script = write_script(
        files.path(),
        &[any_count.clone(), any_count.clone(), any_count],
    );
    let server = Server::start(
        &["--asks-per-minute", "2", "--explain", "false"],
        &[("ASKDB_PROVIDER", "scripted"), ("ASKDB_SCRIPT", &script)],
    );
    let http = client();
    for n in 1..=2 {
        let (status, body) = post(
            &http,
            &server.at("/api/ask"),
            &json!({"question": format!("How many bills are there? ({n})")}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "ask {n}: {body}");
    }
    let response = http
        .post(server.at("/api/ask"))
        .json(&json!({"question": "How many bills are there? (3)"}))
        .send()
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = response.headers()["retry-after"]
        .to_str()
        .ok()
        .and_then(|text| text.parse().ok())
        .expect("Retry-After in seconds");
    // Two a minute: one token every 30 s.
    assert!((1..=30).contains(&wait), "Retry-After {wait}");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["error"], "rate_limited");
    // The limit guards the model, not the rest of the API.
    let (status, _) = post(&http, &server.at("/api/sql"), &json!({"sql": "SELECT 1"})).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_full_server_answers_503_at_once_instead_of_queueing() {
    let files = tempfile::tempdir().expect("temp dir");
    let script = write_script(
        files.path(),
        &[
            json!({"question": "Slow question", "purpose": "write_sql", "delay_ms": 6000, "reply": {"sql": "SELECT count(*) FROM bills"}}),
            json!({"question": "*", "purpose": "write_sql", "reply": {"sql": "SELECT count(*) FROM customers"}}),
        ],
    );
    let server = Server::start(
        &[
            "--max-concurrent-asks",
            "1",
            "--asks-per-minute",
            "0",
            "--explain",
            "false",
        ],
        &[("ASKDB_PROVIDER", "scripted"), ("ASKDB_SCRIPT", &script)],
    );
    let http = client();
    let slow_started = Instant::now();
    let slow = {
        let http = http.clone();
        let url = server.at("/api/ask");
        tokio::spawn(async move { post(&http, &url, &json!({"question": "Slow question"})).await })
    };
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let sent = Instant::now();
    let response = http
        .post(server.at("/api/ask"))
        .json(&json!({"question": "Another question"}))
        .send()
        .await
        .expect("answers");
    let took = sent.elapsed();
    let status = response.status();
    let retry_after = response.headers().get("retry-after").cloned();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "the slot is taken: {body}"
    );
    assert_eq!(body["error"], "busy");
    assert!(retry_after.is_some(), "Retry-After is set");
    assert!(took < Duration::from_secs(2), "answered at once: {took:?}");
    assert!(
        slow_started.elapsed() < Duration::from_secs(6),
        "the slow question was still in flight"
    );
    let (status, body) = slow.await.expect("task");
    assert_eq!(status, StatusCode::OK, "{body}");
    // The slot is free again.
    let (status, body) = post(
        &http,
        &server.at("/api/ask"),
        &json!({"question": "Another question"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rows"], json!([[120]]));
}

#[tokio::test]
async fn run_away_from_the_source_tree_the_server_serves_its_built_in_evaluation_card() {
    // No --eval-dir, working directory outside the repository: what an installed
    // `askdb serve` does.
    let server = Server::start(&[], &[]);
    let http = client();
    let response = http.get(server.at("/api/eval")).send().await.expect("eval");
    assert_eq!(response.status(), StatusCode::OK, "{}", server.log());
    let source = response.headers()["x-askdb-eval-source"]
        .to_str()
        .unwrap_or_default()
        .to_string();
    assert!(source.starts_with("evals/results/"), "{source}");
    let summary: Value = response.json().await.expect("JSON");
    assert!(summary["modes"].is_object(), "a run summary: {summary}");
    let page = http.get(server.at("/")).send().await.expect("page");
    assert_eq!(page.status(), StatusCode::OK);
    let (status, schema) = get(&http, &server.at("/api/schema")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        schema["database"], "demo",
        "the demo is built in the data directory"
    );
}

#[tokio::test]
async fn without_a_model_ask_is_503_with_how_to_configure_one_and_the_rest_works() {
    let server = Server::start(&[], &[]);
    let http = client();
    let (status, body) = post(
        &http,
        &server.at("/api/ask"),
        &json!({"question": "How many customers are there?"}),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"], "model_not_configured");
    let detail = body["detail"].as_str().unwrap_or_default();
    for needle in [
        "ASKDB_PROVIDER",
        "--local-model",
        "ANTHROPIC_API_KEY",
        "ASKDB_BASE_URL",
    ] {
        assert!(detail.contains(needle), "{needle} in {detail}");
    }
    let (status, _) = get(&http, &server.at("/api/schema")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, rows) = post(
        &http,
        &server.at("/api/sql"),
        &json!({"sql": "SELECT count(*) FROM customers"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(rows["rows"], json!([[120]]));
    let (status, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["ok"], false);
    assert_eq!(health["model_configured"], false);
    assert_eq!(health["model_reachable"], false);
    assert_eq!(health["database_reachable"], true);
    assert_eq!(health["read_only_confirmed"], true);
    assert!(health["details"]["model"]
        .as_str()
        .unwrap_or_default()
        .contains("ASKDB_PROVIDER"));
    // With nothing configured, the local model is offered and not started unasked.
    assert_eq!(health["local_model"]["phase"], "not_started", "{health}");
    let (status, local) = get(&http, &server.at("/api/local-model")).await;
    assert_eq!(status, StatusCode::OK, "{local}");
    assert_eq!(local["started_by_askdb"], false);
}

#[tokio::test]
async fn health_is_false_when_the_database_accepts_a_write() {
    // The gate cannot be made writable (that is the point of it), so the test hook
    // substitutes the probe's result in an in-process server; the rest is real HTTP.
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("demo.sqlite");
    askdb::demo::write_sqlite(&path).expect("demo");
    let gate = askdb::database::open_gate(
        &askdb::database::DatabaseUrl::Sqlite(path),
        GateOptions::default(),
    )
    .await
    .expect("gate");
    let script = write_script(dir.path(), &[check_line(), check_line()]);
    let config = ProviderConfig::from_lookup(|name| match name {
        "ASKDB_PROVIDER" => Some("scripted".to_string()),
        "ASKDB_SCRIPT" => Some(script.clone()),
        _ => None,
    })
    .expect("config");
    // Clones share the script: one check reply for each server.
    let model = ModelClient::from_config(&config).expect("client");
    let mut urls = Vec::new();
    let mut servers = Vec::new();
    for substitute in [None, Some(false)] {
        let state = AppState::new(gate.clone(), Ok(model.clone()), ServerConfig::default())
            .await
            .expect("state");
        if let Some(refused) = substitute {
            state.substitute_read_only_probe(refused);
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        urls.push(format!("http://{addr}/api/health"));
        servers.push(tokio::spawn(askdb::server::serve(
            listener,
            state,
            std::future::pending(),
        )));
    }
    let http = client();
    let (status, honest) = get(&http, &urls[0]).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the real probe is refused: {honest}"
    );
    assert_eq!(honest["read_only_confirmed"], true);
    let (status, writable) = get(&http, &urls[1]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{writable}");
    assert_eq!(writable["ok"], false);
    assert_eq!(writable["read_only_confirmed"], false);
    assert_eq!(
        writable["database_reachable"], true,
        "only the write check fails"
    );
    assert!(writable["details"]["read_only"]
        .as_str()
        .unwrap_or_default()
        .contains("test hook"));
    for server in servers {
        server.abort();
    }
}

// ---- An unreachable database: PostgreSQL behind a relay that the test cuts ----

/// A TCP relay to PostgreSQL: the database stays up for everyone else, and for askdb it
/// goes away when the relay stops (listener closed, every relayed connection dropped).
struct Relay {
    port: u16,
    tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Relay {
    async fn start(upstream: SocketAddr) -> Relay {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let tasks: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>> = Arc::default();
        let registry = Arc::clone(&tasks);
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let connection = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                if let Ok(mut tasks) = registry.lock() {
                    tasks.push(connection);
                }
            }
        });
        if let Ok(mut list) = tasks.lock() {
            list.push(accept);
        }
        Relay { port, tasks }
    }

    fn stop(&self) {
        if let Ok(tasks) = self.tasks.lock() {
            for task in tasks.iter() {
                task.abort();
            }
        }
    }
}

// Several threads: the relay runs on this runtime while the test blocks on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_false_when_the_database_becomes_unreachable() {
    let test = "health_is_false_when_the_database_becomes_unreachable";
    let admin = std::env::var("ASKDB_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_string());
    let config: tokio_postgres::Config = admin.parse().expect("a PostgreSQL URL");
    let reachable = tokio::time::timeout(
        Duration::from_secs(3),
        config.connect(tokio_postgres::NoTls),
    )
    .await;
    if !matches!(reachable, Ok(Ok(_))) {
        ci::skip_or_fail(
            test,
            &format!(
                "no PostgreSQL at {} (set ASKDB_TEST_POSTGRES_URL)",
                askdb::text::redact_password(&admin)
            ),
        );
        return;
    }
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let upstream = tokio::net::lookup_host((host.as_str(), port))
        .await
        .expect("resolves")
        .next()
        .expect("an address");
    let relay = Relay::start(upstream).await;
    let user = config.get_user().unwrap_or("postgres");
    let password = config
        .get_password()
        .map(|bytes| format!(":{}", String::from_utf8_lossy(bytes)))
        .unwrap_or_default();
    let database = config.get_dbname().unwrap_or("postgres");
    let url = format!(
        "postgres://{user}{password}@127.0.0.1:{}/{database}",
        relay.port
    );
    let files = tempfile::tempdir().expect("temp dir");
    let script = write_script(files.path(), &[check_line()]);
    let server = Server::start(
        &["--db", &url],
        &[("ASKDB_PROVIDER", "scripted"), ("ASKDB_SCRIPT", &script)],
    );
    let http = client();
    let (status, before) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::OK, "{before}\n{}", server.log());
    assert_eq!(before["dialect"], "postgres");
    assert_eq!(before["database_reachable"], true);
    assert_eq!(
        before["read_only_confirmed"], true,
        "the READ ONLY transaction refuses the write"
    );

    relay.stop();
    let (status, after) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{after}");
    assert_eq!(after["ok"], false);
    assert_eq!(after["database_reachable"], false);
    assert_eq!(
        after["read_only_confirmed"], false,
        "an unreachable database proves nothing"
    );
    assert_eq!(
        after["model_reachable"], true,
        "only the database checks fail"
    );
    let detail = after["details"]["database"].as_str().unwrap_or_default();
    assert!(detail.contains("connection_error"), "{detail}");
    assert!(
        !detail.contains(&relay.port.to_string()),
        "no connection details reach the client: {detail}"
    );
}

#[tokio::test]
async fn a_follow_up_over_real_http_continues_its_conversation_and_a_race_is_refused() {
    let files = tempfile::tempdir().expect("temp dir");
    let first = "How many bills were voided in 2025?";
    let follow = "And in 2026?";
    let follow_up_reply = "```sql\n-- Understood as: the number of bills voided in 2026\nSELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2026'\n```";
    let script = write_script(
        files.path(),
        &[
            json!({"question": first, "purpose": "write_sql", "reply": "```sql\nSELECT COUNT(*) AS voided FROM bills WHERE status = 'VOID' AND strftime('%Y', txn_dt) = '2025'\n```"}),
            json!({"question": follow, "purpose": "write_sql", "delay_ms": 1500, "reply": follow_up_reply}),
        ],
    );
    let server = Server::start(
        &[
            "--asks-per-minute",
            "0",
            "--explain",
            "false",
            "--conversation-ttl-mins",
            "5",
        ],
        &[("ASKDB_PROVIDER", "scripted"), ("ASKDB_SCRIPT", &script)],
    );
    let http = client();
    let (status, body) = post(&http, &server.at("/api/ask"), &json!({"question": first})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = body["conversation_id"].as_str().expect("an id").to_string();
    assert_eq!(body["turn"], 1);
    let follow_up = {
        let (http, url, id) = (http.clone(), server.at("/api/ask"), id.clone());
        tokio::spawn(async move {
            post(
                &http,
                &url,
                &json!({"question": follow, "conversation_id": id}),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (status, racing) = post(
        &http,
        &server.at("/api/ask/stream"),
        &json!({"question": follow, "conversation_id": id}),
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT, "{racing}");
    assert_eq!(racing["error"], "conversation_busy");
    let (status, body) = follow_up.await.expect("the follow-up ends");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["conversation_id"], id.as_str());
    assert_eq!(body["turn"], 2);
    assert_eq!(body["understood_as"], "the number of bills voided in 2026");
    let (status, body) = post(
        &http,
        &server.at("/api/ask"),
        &json!({"question": follow, "conversation_id": "ffffffffffffffffffffffffffffffff"}),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"], "unknown_conversation");
}
