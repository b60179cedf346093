//! Traces against a real Arize Phoenix (`phoenix serve`, offline, scratch storage):
//! `askdb serve` and `askdb eval run` run as a user runs them (the scripted model
//! provider, the demo database), export over OTLP/HTTP, and the spans are read back
//! through Phoenix's REST API. Then the collector is stopped: asks still answer, at once,
//! and health says the collector no longer accepts exports.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

#[path = "support/ci.rs"]
mod ci;
#[path = "support/phoenix.rs"]
mod phoenix;
#[path = "support/serve.rs"]
mod serve;
use phoenix::{attribute, Phoenix};
use serve::{get_json as get, http_client as client, post_json as post, Server};

const REPAIRED: &str = "How many bills does each customer have?";
const BROKEN_SQL: &str = "SELECT customer_name AS customer, count(*) AS bills FROM bills b LEFT JOIN customers c ON c.cust_id = b.cust_id GROUP BY 1 ORDER BY bills DESC LIMIT 6";
const FIXED_SQL: &str = "SELECT c.cust_name AS customer, count(*) AS bills FROM bills b LEFT JOIN customers c ON c.cust_id = b.cust_id GROUP BY c.cust_name ORDER BY bills DESC LIMIT 6";
const COUNT: &str = "How many customers are there?";
const COUNT_SQL: &str = "SELECT count(*) AS customers FROM customers";
const WRONG: &str = "How many suppliers are there?";

fn write_lines(path: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(path, text).expect("written");
}

/// The repaired question for the server (failing once, repaired, explained), then two
/// asks of COUNT for when the collector is down.
fn serve_script() -> Vec<Value> {
    vec![
        json!({"question": "*", "purpose": "check", "reply": "ok"}),
        json!({"question": "*", "purpose": "check", "reply": "ok"}),
        json!({"question": "*", "purpose": "check", "reply": "ok"}),
        json!({"question": REPAIRED, "purpose": "write_sql", "reply": {"sql": BROKEN_SQL}}),
        json!({"question": REPAIRED, "purpose": "repair_sql", "reply": {"sql": FIXED_SQL}}),
        json!({"question": REPAIRED, "purpose": "write_answer", "reply": "Walk-in sales make up 980 bills; Sharma Constructions has the most with 15."}),
        json!({"question": COUNT, "purpose": "write_sql", "reply": {"sql": COUNT_SQL}}),
        json!({"question": COUNT, "purpose": "write_answer", "reply": "There are 120 customers."}),
        json!({"question": COUNT, "purpose": "write_sql", "reply": {"sql": COUNT_SQL}}),
        json!({"question": COUNT, "purpose": "write_answer", "reply": "There are 120 customers."}),
    ]
}

fn by_name(spans: &[Value]) -> BTreeMap<String, Vec<&Value>> {
    let mut map: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for span in spans {
        let name = span["name"].as_str().unwrap_or_default().to_string();
        map.entry(name).or_default().push(span);
    }
    map
}

fn int(value: &Value) -> i64 {
    value
        .as_i64()
        .or_else(|| value.as_f64().map(|number| number as i64))
        .or_else(|| value.as_str().and_then(|text| text.parse().ok()))
        .unwrap_or(-1)
}

/// The start time as sortable text (Python's isoformat leaves out `.000000`).
fn start_time(span: &Value) -> String {
    span_time(span, "start_time")
}

/// A span's start or end as text that sorts in time order (a whole second gets its
/// microseconds written out).
fn span_time(span: &Value, field: &str) -> String {
    let text = span[field].as_str().unwrap_or_default();
    match text.split_once('+') {
        Some((time, zone)) if !time.contains('.') => format!("{time}.000000+{zone}"),
        _ => text.to_string(),
    }
}

/// The binary as a user runs it, with only the variables given (askdb's, the model's
/// and the tracing ones of the developer are removed); (exit code, stdout, stderr).
fn askdb(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_askdb"));
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_some_and(|name| {
            ["ASKDB_", "OPENAI_", "ANTHROPIC_", "OTEL_"]
                .iter()
                .any(|prefix| name.starts_with(prefix))
        }) {
            command.env_remove(name);
        }
    }
    let output = command
        .env("ASKDB_HOME", home)
        .current_dir(home)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phoenix_shows_a_repaired_question_as_one_trace_and_eval_verdicts_and_asks_survive_its_stop(
) {
    let test = "phoenix_shows_a_repaired_question_as_one_trace_and_eval_verdicts_and_asks_survive_its_stop";
    let Some(mut phoenix) = Phoenix::start(test) else {
        return;
    };
    let http = client();

    // Phoenix itself: OTLP/HTTP at /v1/traces takes protobuf, the REST API lists spans.
    let accepted = http
        .post(format!("{}/v1/traces", phoenix.url))
        .header("content-type", "application/x-protobuf")
        .body(Vec::<u8>::new())
        .send()
        .await
        .expect("Phoenix answers OTLP");
    assert_eq!(accepted.status(), StatusCode::OK, "OTLP at /v1/traces");
    let (status, listed) = get(&http, &format!("{}/v1/projects/default/spans", phoenix.url)).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert!(listed["data"].is_array(), "{listed}");

    let files = tempfile::tempdir().expect("files");
    let script = files.path().join("serve.jsonl");
    write_lines(&script, &serve_script());
    let script_text = script.display().to_string();
    let server = Server::start(
        &["--explain", "true"],
        &[
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script_text),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &phoenix.url),
        ],
    );
    let (status, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::OK, "{health}\n{}", server.log());
    assert!(
        server.log().contains("traces to"),
        "serve says where traces go:\n{}",
        server.log()
    );
    assert_eq!(health["tracing_enabled"], true, "{health}");
    assert_eq!(health["tracing_authenticated"], true, "{health}");

    // ---- A question that fails once and is repaired: one trace, shaped like the agent.
    let (status, body) = post(
        &http,
        &server.at("/api/ask"),
        &json!({"question": REPAIRED}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}\n{}", server.log());
    assert_eq!(body["decision"], "answer", "{body}");
    assert_eq!(body["attempts"], 2, "{body}");
    let trace_id = body["trace_id"].as_str().expect("a trace id").to_string();
    assert!(
        trace_id.len() == 32 && trace_id.chars().all(|c| c.is_ascii_hexdigit()),
        "{trace_id}"
    );
    // agent, select-schema, write-sql, validate-sql, execute-sql (failed), repair-sql,
    // validate-sql, execute-sql, write-answer.
    let spans = phoenix.wait_for_spans(&http, &trace_id, 9).await;
    let names = by_name(&spans);
    assert_eq!(
        spans.len(),
        9,
        "spans: {:?}\n{}",
        names.keys().collect::<Vec<_>>(),
        server.log()
    );
    let count = |name: &str| names.get(name).map(Vec::len).unwrap_or(0);
    assert_eq!(count("agent"), 1);
    assert_eq!(count("select-schema"), 1);
    assert_eq!(count("write-sql"), 1);
    assert_eq!(count("repair-sql"), 1);
    assert_eq!(count("write-answer"), 1);
    assert_eq!(count("validate-sql"), 2);
    assert_eq!(count("execute-sql"), 2);

    let root = names["agent"][0];
    assert_eq!(root["span_kind"], "AGENT", "{root}");
    assert!(
        root["parent_id"].is_null(),
        "the agent span is the root: {root}"
    );
    let root_id = root["context"]["span_id"].as_str().expect("span id");
    for span in &spans {
        assert_eq!(span["context"]["trace_id"], trace_id.as_str());
        if span["name"] != "agent" {
            assert_eq!(
                span["parent_id"].as_str(),
                Some(root_id),
                "every step is a child of the agent span: {span}"
            );
        }
    }
    assert_eq!(attribute(root, "askdb.question"), REPAIRED);
    // The conversation is OpenInference's session, so Phoenix groups its turns.
    assert_eq!(attribute(root, "session.id"), &body["conversation_id"]);
    assert_eq!(int(attribute(root, "askdb.conversation.turn")), 1);
    assert_eq!(attribute(root, "askdb.decision"), "answer");
    assert_eq!(int(attribute(root, "askdb.attempts")), 2);
    assert_eq!(int(attribute(root, "askdb.rows")), 6);
    assert_eq!(
        attribute(root, "askdb.cost_usd").as_f64(),
        body["cost_usd"].as_f64(),
        "the cost is askdb's own figure"
    );
    assert_eq!(root["status_code"], "OK", "{root}");

    let kinds = [
        ("select-schema", "RETRIEVER"),
        ("write-sql", "LLM"),
        ("repair-sql", "LLM"),
        ("write-answer", "LLM"),
        ("validate-sql", "GUARDRAIL"),
        ("execute-sql", "TOOL"),
    ];
    // Phoenix takes its span kind from `openinference.span.kind` (and keeps it there,
    // not among the attributes it lists).
    for (name, kind) in kinds {
        for span in &names[name] {
            assert_eq!(span["span_kind"], kind, "{name}: {span}");
        }
    }
    let schema = names["select-schema"][0];
    assert!(
        attribute(schema, "retrieval.documents.0.document.id").is_string()
            || attribute(schema, "retrieval.documents").is_array(),
        "the chosen tables: {schema}"
    );
    let tables = attribute(schema, "askdb.schema.tables").to_string();
    assert!(
        tables.contains("bills") && tables.contains("customers"),
        "{schema}"
    );

    // Token counts: on every generation, both conventions, summing to the root's.
    let (mut input, mut output) = (0, 0);
    for name in ["write-sql", "repair-sql", "write-answer"] {
        let span = names[name][0];
        let prompt = int(attribute(span, "llm.token_count.prompt"));
        let completion = int(attribute(span, "llm.token_count.completion"));
        assert!(prompt > 0 && completion > 0, "{name}: {span}");
        assert_eq!(int(attribute(span, "gen_ai.usage.input_tokens")), prompt);
        assert_eq!(
            int(attribute(span, "gen_ai.usage.output_tokens")),
            completion
        );
        assert_eq!(
            int(attribute(span, "llm.token_count.total")),
            prompt + completion
        );
        assert_eq!(attribute(span, "llm.model_name"), "scripted", "{span}");
        assert!(attribute(span, "llm.cost.total").is_number(), "{span}");
        assert!(int(attribute(span, "askdb.latency_ms")) >= 0, "{span}");
        // No prompt or reply text without ASKDB_TRACE_CONTENT (Phoenix fills
        // `output.value` with the model's name when a span has none).
        let text = format!(
            "{} {}",
            attribute(span, "input.value"),
            attribute(span, "output.value")
        );
        assert!(
            !text.contains("bills") && !text.contains("SELECT") && !text.contains("980"),
            "{name}: {span}"
        );
        input += prompt;
        output += completion;
    }
    assert_eq!(int(attribute(root, "llm.token_count.prompt")), input);
    assert_eq!(int(attribute(root, "llm.token_count.completion")), output);
    assert_eq!(int(attribute(root, "gen_ai.usage.input_tokens")), input);
    assert_eq!(
        body["tokens"]["input"].as_i64(),
        Some(input),
        "the trace and the answer count the same tokens"
    );

    // The failed run is red, with its structured error; the repaired one is not.
    let mut executed = names["execute-sql"].clone();
    executed.sort_by_key(|span| start_time(span));
    let (failed, repaired) = (executed[0], executed[1]);
    assert_eq!(failed["status_code"], "ERROR", "{failed}");
    assert_eq!(
        attribute(failed, "askdb.error.type"),
        "unknown_column",
        "{failed}"
    );
    assert!(
        attribute(failed, "askdb.error.message")
            .as_str()
            .is_some_and(|message| message.contains("customer_name")),
        "{failed}"
    );
    assert!(
        failed["status_message"]
            .as_str()
            .is_some_and(|message| message.contains("unknown_column")),
        "{failed}"
    );
    assert!(attribute(failed, "input.value")
        .as_str()
        .is_some_and(|sql| sql.contains("customer_name")));
    assert_ne!(repaired["status_code"], "ERROR", "{repaired}");
    assert_eq!(int(attribute(repaired, "askdb.rows")), 6, "{repaired}");
    for guard in &names["validate-sql"] {
        assert_eq!(attribute(guard, "askdb.guard.allowed"), true, "{guard}");
    }
    // The steps come in the order they ran.
    let mut ordered: Vec<&Value> = spans.iter().filter(|s| s["name"] != "agent").collect();
    // Steps that start in the same microsecond (a scripted reply takes none) come in
    // the order they ended.
    ordered.sort_by_key(|span| (start_time(span), span_time(span, "end_time")));
    let order: Vec<String> = ordered
        .iter()
        .map(|span| {
            format!(
                "{} {}..{}",
                span["name"],
                start_time(span),
                span["end_time"]
            )
        })
        .collect();
    assert_eq!(ordered[0]["name"], "select-schema", "{order:#?}");
    assert_eq!(ordered[1]["name"], "write-sql", "{order:#?}");
    assert_eq!(
        ordered.last().map(|s| &s["name"]),
        Some(&json!("write-answer")),
        "{order:#?}"
    );

    // ---- An evaluation run: each question's verdict on its trace.
    let home = tempfile::tempdir().expect("home");
    let questions = home.path().join("questions.jsonl");
    write_lines(
        &questions,
        &[
            json!({"id": "right", "question": COUNT, "category": "simple", "expected": "answer",
                   "golds": ["SELECT count(*) FROM customers"], "ordered": false, "db": "demo"}),
            json!({"id": "wrong", "question": WRONG, "category": "simple", "expected": "answer",
                   "golds": ["SELECT count(*) FROM suppliers"], "ordered": false, "db": "demo"}),
        ],
    );
    let eval_script = home.path().join("eval.jsonl");
    write_lines(
        &eval_script,
        &[
            json!({"question": COUNT, "purpose": "write_sql", "reply": {"sql": COUNT_SQL}}),
            // Counts customers when asked about suppliers: wrong rows.
            json!({"question": WRONG, "purpose": "write_sql", "reply": {"sql": COUNT_SQL}}),
        ],
    );
    let questions_text = questions.display().to_string();
    let eval_script_text = eval_script.display().to_string();
    let runs = home.path().join("runs").display().to_string();
    let (code, stdout, stderr) = askdb(
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
            ("ASKDB_SCRIPT", &eval_script_text),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &phoenix.url),
            ("ASKDB_TRACE_CONTENT", "1"),
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let run_dir = stdout
        .lines()
        .find_map(|line| line.strip_prefix("run folder: "))
        .map(|path| home.path().join(path.trim()))
        .unwrap_or_else(|| panic!("the run folder is named: {stdout}"));
    let records: Vec<Value> = std::fs::read_to_string(run_dir.join("questions.jsonl"))
        .expect("records")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a record"))
        .collect();
    assert_eq!(records.len(), 2);
    for record in &records {
        let trace = record["trace_id"]
            .as_str()
            .expect("the record names its trace");
        let spans = phoenix.wait_for_spans(&http, trace, 5).await;
        let names = by_name(&spans);
        let root = names.get("agent").and_then(|roots| roots.first()).copied();
        let root = root.unwrap_or_else(|| panic!("an agent span for {record}: {spans:?}"));
        let correct = record["correct"].as_bool().expect("graded");
        assert_eq!(attribute(root, "askdb.eval.correct"), correct, "{root}");
        assert_eq!(attribute(root, "askdb.eval.id"), &record["id"], "{root}");
        let verdict = attribute(root, "askdb.eval.verdict")
            .as_str()
            .unwrap_or_default();
        if correct {
            assert!(verdict.starts_with("correct"), "{verdict}");
        } else {
            assert!(verdict.starts_with("incorrect"), "{verdict}");
        }
        // With ASKDB_TRACE_CONTENT=1 the prompt and the reply are on the generation.
        let generation = names["write-sql"][0];
        assert!(
            attribute(generation, "input.value")
                .as_str()
                .is_some_and(|prompt| prompt.contains(record["question"].as_str().unwrap_or("?"))),
            "the prompt is recorded: {generation}"
        );
        assert!(
            attribute(generation, "output.value")
                .as_str()
                .is_some_and(|reply| reply.contains("count(*)")),
            "the reply is recorded: {generation}"
        );
    }
    assert_eq!(
        records
            .iter()
            .filter(|record| record["correct"] == true)
            .count(),
        1,
        "{records:?}"
    );
    // A backend can filter the failures.
    let failures = phoenix
        .spans_where(&http, &[("attribute", "askdb.eval.correct:false")])
        .await;
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(attribute(&failures[0], "askdb.eval.id"), "wrong");
    assert!(
        attribute(&failures[0], "askdb.eval.verdict")
            .as_str()
            .is_some_and(|why| why.starts_with("incorrect")),
        "{failures:?}"
    );

    // ---- The collector goes down: asks still answer at once; health says so.
    phoenix.stop();
    for _ in 0..2 {
        let started = Instant::now();
        let (status, body) = post(&http, &server.at("/api/ask"), &json!({"question": COUNT})).await;
        let took = started.elapsed();
        assert_eq!(status, StatusCode::OK, "{body}\n{}", server.log());
        assert_eq!(body["decision"], "answer", "{body}");
        assert!(body["trace_id"].is_string(), "{body}");
        assert!(
            took < Duration::from_secs(2),
            "an ask does not wait for the collector: {took:?}"
        );
    }
    let (status, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["ok"], false);
    assert_eq!(health["tracing_enabled"], true, "{health}");
    assert_eq!(health["tracing_authenticated"], false, "{health}");
    assert_eq!(
        health["database_reachable"], true,
        "only the collector is down"
    );
    let detail = health["details"]["tracing"].as_str().unwrap_or_default();
    assert!(detail.contains("refused an export"), "{detail}");
}

#[tokio::test]
async fn a_collector_that_refuses_the_credentials_is_not_authenticated_and_off_means_off() {
    // A collector that answers every export with 401, as Langfuse does to a wrong key.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let address = listener.local_addr().expect("address");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = std::sync::Arc::clone(&seen);
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut socket, _)) = listener.accept().await {
            let sink = std::sync::Arc::clone(&sink);
            tokio::spawn(async move {
                let mut buffer = vec![0u8; 65536];
                let read = socket.read(&mut buffer).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buffer[..read]).to_string();
                if let Ok(mut seen) = sink.lock() {
                    seen.push(head);
                }
                let _ = socket
                    .write_all(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 12\r\nconnection: close\r\n\r\nunauthorized")
                    .await;
            });
        }
    });
    let files = tempfile::tempdir().expect("files");
    let script = files.path().join("serve.jsonl");
    write_lines(&script, &serve_script());
    let script_text = script.display().to_string();
    let endpoint = format!("http://{address}");
    let server = Server::start(
        &["--explain", "false"],
        &[
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script_text),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "Authorization=Basic%20d3Jvbmc6a2V5",
            ),
        ],
    );
    let http = client();
    let (status, health) = get(&http, &server.at("/api/health")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{health}");
    assert_eq!(health["tracing_enabled"], true, "{health}");
    assert_eq!(
        health["tracing_authenticated"], false,
        "a key is not proof: {health}"
    );
    let detail = health["details"]["tracing"].as_str().unwrap_or_default();
    assert!(detail.contains("401"), "{detail}");
    assert!(!detail.contains("d3Jvbmc6a2V5"), "no secret in health");
    let requests = seen.lock().map(|seen| seen.clone()).unwrap_or_default();
    let probe = requests
        .iter()
        .find(|head| head.starts_with("POST /v1/traces"))
        .expect("the probe posted to /v1/traces");
    assert!(
        probe
            .to_lowercase()
            .contains("authorization: basic d3jvbmc6a2v5"),
        "the header is sent decoded: {probe}"
    );
    let (status, body) = post(
        &http,
        &server.at("/api/ask"),
        &json!({"question": REPAIRED}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"], "answer");

    // Without an endpoint: no trace id, and health has nothing to fail.
    let plain = Server::start(
        &["--explain", "false"],
        &[
            ("ASKDB_PROVIDER", "scripted"),
            ("ASKDB_SCRIPT", &script_text),
        ],
    );
    let (status, health) = get(&http, &plain.at("/api/health")).await;
    assert_eq!(status, StatusCode::OK, "{health}");
    assert_eq!(health["tracing_enabled"], false);
    assert_eq!(health["tracing_authenticated"], false);
    let (status, body) = post(&http, &plain.at("/api/ask"), &json!({"question": REPAIRED})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["trace_id"].is_null(), "{body}");
}
