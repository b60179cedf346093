//! The per-question overhead of tracing, the query log and the metrics on the scripted
//! provider: the same question asked through the whole router (`app(state).oneshot`, no
//! socket) with tracing and the log off, with the SQLite log on, and with both on
//! (traces exported over OTLP/HTTP to a collector stand-in on loopback that accepts every
//! export), interleaved so drift in the machine's load hits every arm alike; then the
//! cost on the request path alone: one question's whole trace (the root span, a span per
//! step event, the end), `QueryLog::record` (one channel send), and the metrics
//! observer per event. Prints figures; asserts nothing about time. Run: `cargo bench
//! --bench observability` (ASKDB_BENCH_QUESTIONS sets how many questions per arm, 300
//! by default).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use askdb::agent::events::{AgentEvent, Observer, SchemaMode};
use askdb::database::{open_gate, DatabaseUrl};
use askdb::gate::{ErrorType, GateOptions};
use askdb::llm::scripted::ScriptedProvider;
use askdb::llm::{ModelClient, PriceTable, Purpose, SpendLedger};
use askdb::querylog::{LogRecord, LogTarget, QueryLog};
use askdb::server::metrics::Metrics;
use askdb::server::monitor::QueryLogSetting;
use askdb::server::{app, AppState, ServerConfig};
use askdb::telemetry::{Telemetry, TelemetryConfig};
use axum::body::Body;
use axum::http::{header, Request};
use tower::ServiceExt;

const QUESTION: &str = "How many customers are there?";

fn client(lines: usize) -> Result<ModelClient, Box<dyn std::error::Error>> {
    let line = r#"{"question": "*", "purpose": "write_sql", "reply": {"sql": "SELECT count(*) AS customers FROM customers"}}
"#;
    let provider = ScriptedProvider::parse(&line.repeat(lines), "scripted")?;
    Ok(ModelClient::new(
        Arc::new(provider),
        &PriceTable::built_in()?,
        Arc::new(SpendLedger::in_memory(None)),
        None,
    )?)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index].as_secs_f64() * 1e3
}

fn report(name: &str, mut times: Vec<Duration>) -> f64 {
    times.sort();
    let p50 = percentile(&times, 0.5);
    println!(
        "{name:<28} n={:<5} p50 {p50:.3} ms  p95 {:.3} ms  p99 {:.3} ms",
        times.len(),
        percentile(&times, 0.95),
        percentile(&times, 0.99)
    );
    p50
}

fn record() -> LogRecord {
    LogRecord {
        question: QUESTION.to_string(),
        asked_at: SystemTime::now(),
        sql: Some("SELECT count(*) AS customers FROM customers LIMIT 200".to_string()),
        attempts: 1,
        error_types: Vec::new(),
        decision: "answer".to_string(),
        row_count: 1,
        latency_ms: 1,
        input_tokens: 900,
        output_tokens: 12,
        cost_usd: 0.0,
        model: Some("scripted".to_string()),
        trace_id: None,
        mode: "agent".to_string(),
        conversation_id: None,
        turn: None,
        examples: Vec::new(),
        rerun_example: None,
        user: None,
    }
}

/// A repaired question's step events, as the agent emits them.
fn repaired_question_events() -> Vec<AgentEvent> {
    use askdb::agent::events::ChosenTable;
    let generation = |purpose: Purpose| AgentEvent::ModelCall {
        started_ms: 1,
        elapsed_ms: 12,
        purpose,
        model: "scripted".to_string(),
        input_tokens: 3400,
        output_tokens: 40,
        cost_usd: 0.0,
        candidates: 1,
        truncated: 0,
        prompt: vec!["system".to_string(), QUESTION.to_string()],
        replies: vec!["{\"sql\": \"SELECT 1\"}".to_string()],
    };
    let guard = AgentEvent::Guard {
        started_ms: 2,
        elapsed_ms: 0,
        candidate: 0,
        sql: "SELECT count(*) FROM customers".to_string(),
        accepted: true,
        detail: "SELECT count(*) FROM customers LIMIT 200".to_string(),
    };
    let executed = |failed: bool| AgentEvent::Executed {
        started_ms: 3,
        elapsed_ms: 1,
        candidate: 0,
        sql: "SELECT count(*) FROM customers LIMIT 200".to_string(),
        rows: (!failed).then_some(1),
        error_type: failed.then_some(ErrorType::UnknownColumn),
        error: failed.then(|| "no such column: c.customer_name".to_string()),
        sqlstate: None,
        hint: None,
    };
    vec![
        AgentEvent::SchemaSelected {
            started_ms: 0,
            elapsed_ms: 0,
            mode: SchemaMode::Whole,
            tables: (0..15)
                .map(|index| ChosenTable {
                    table: format!("table_{index}"),
                    score: f64::from(index) / 3.0,
                })
                .collect(),
            prompt_tokens: 2176,
        },
        generation(Purpose::WriteSql),
        guard.clone(),
        executed(true),
        generation(Purpose::RepairSql),
        guard,
        executed(false),
        generation(Purpose::WriteAnswer),
    ]
}

/// One answered question's result, to end the benchmark's traces with.
async fn one_result(
    state: &AppState,
) -> Result<askdb::agent::AgentResult, Box<dyn std::error::Error>> {
    let request = Request::post("/api/ask")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(format!("{{\"question\": \"{QUESTION}\"}}")))?;
    let response = app(state.clone()).oneshot(request).await?;
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 22).await?;
    Ok(serde_json::from_slice(&bytes)?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let questions: usize = std::env::var("ASKDB_BENCH_QUESTIONS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(300);
    let runtime = tokio::runtime::Runtime::new()?;
    let dir = tempfile::tempdir()?;
    runtime.block_on(async {
        let path = dir.path().join("demo.sqlite");
        askdb::demo::write_sqlite(&path)?;
        let url = DatabaseUrl::Sqlite(path);
        // A collector stand-in: accepts every OTLP export, counts the requests.
        let exports = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = Arc::clone(&exports);
        let collector = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let counted = Arc::clone(&counted);
                async move {
                    if !body.is_empty() {
                        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    ""
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, collector).await });
        let traced = TelemetryConfig::to_endpoint(&endpoint, None)?;
        let state = |query_log: QueryLogSetting, telemetry: TelemetryConfig| {
            let url = url.clone();
            async move {
                let gate = open_gate(&url, GateOptions::default()).await?;
                let config = ServerConfig {
                    asks_per_minute: 0,
                    explain: false,
                    query_log,
                    telemetry,
                    ..ServerConfig::default()
                };
                let model = client(questions + 20)?;
                Ok::<_, Box<dyn std::error::Error>>(AppState::new(gate, Ok(model), config).await?)
            }
        };
        let off = state(
            QueryLogSetting::Off("bench".to_string()),
            TelemetryConfig::off(),
        )
        .await?;
        let on = state(
            QueryLogSetting::On(LogTarget::Sqlite {
                path: dir.path().join("query_log.sqlite"),
                database: "demo".to_string(),
            }),
            TelemetryConfig::off(),
        )
        .await?;
        let both = state(
            QueryLogSetting::On(LogTarget::Sqlite {
                path: dir.path().join("query_log_traced.sqlite"),
                database: "demo".to_string(),
            }),
            traced.clone(),
        )
        .await?;
        let ask = |state: AppState| async move {
            let request = Request::post("/api/ask")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(format!("{{\"question\": \"{QUESTION}\"}}")))?;
            let started = Instant::now();
            let response = app(state).oneshot(request).await?;
            let status = response.status();
            axum::body::to_bytes(response.into_body(), 1 << 22).await?;
            let elapsed = started.elapsed();
            if !status.is_success() {
                return Err(format!("ask answered {status}").into());
            }
            Ok::<_, Box<dyn std::error::Error>>(elapsed)
        };
        // Warm every arm (the agent's first question builds caches).
        for _ in 0..10 {
            ask(off.clone()).await?;
            ask(on.clone()).await?;
            ask(both.clone()).await?;
        }
        let (mut without, mut with, mut traced_times) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..questions {
            without.push(ask(off.clone()).await?);
            with.push(ask(on.clone()).await?);
            traced_times.push(ask(both.clone()).await?);
        }
        println!("per question through POST /api/ask (scripted provider, demo SQLite):");
        let base = report("log off, tracing off", without);
        let logged = report("log on (SQLite)", with);
        let all = report("log on + tracing on", traced_times);
        println!(
            "{:<28} log {:+.3} ms, log + tracing {:+.3} ms at p50 (noise of the same order: compare the path costs below)",
            "difference",
            logged - base,
            all - base
        );
        both.telemetry().flush(Duration::from_secs(10)).await;
        println!(
            "{:<28} {} span(s) exported in {} request(s), {} failed",
            "trace exporter",
            both.telemetry().counters().exported(),
            exports.load(std::sync::atomic::Ordering::Relaxed),
            both.telemetry().counters().failed()
        );
        if let Some(log) = on.query_log() {
            let started = Instant::now();
            while log.counters().written() < (questions + 10) as u64
                && started.elapsed() < Duration::from_secs(30)
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            println!(
                "{:<28} {} written, {} failed",
                "background writer",
                log.counters().written(),
                log.counters().failed()
            );
        }

        // The request path's share: one record() per question.
        let log = QueryLog::start(LogTarget::Sqlite {
            path: dir.path().join("path_cost.sqlite"),
            database: "demo".to_string(),
        });
        let mut sends = Vec::new();
        for _ in 0..questions {
            let row = record();
            let started = Instant::now();
            log.record(row);
            sends.push(started.elapsed());
            // Let the writer keep up, as it does between real questions.
            tokio::task::yield_now().await;
        }
        sends.sort();
        println!(
            "{:<28} p50 {:.1} us  p99 {:.1} us",
            "QueryLog::record (path)",
            percentile(&sends, 0.5) * 1e3,
            percentile(&sends, 0.99) * 1e3
        );
        // The request path's share of tracing: one question's whole trace, fed the
        // events of a repaired question (nine spans), ended with its result.
        let telemetry = Telemetry::start(traced);
        let events = repaired_question_events();
        let result = one_result(&off).await?;
        let mut traces = Vec::new();
        for _ in 0..questions {
            let started = Instant::now();
            let trace = telemetry.question(QUESTION, "agent");
            for event in &events {
                trace.observe(event);
            }
            trace.finish(&result);
            let id = trace.trace_id();
            traces.push(started.elapsed());
            std::hint::black_box(id);
            tokio::task::yield_now().await;
        }
        traces.sort();
        println!(
            "{:<28} p50 {:.1} us  p99 {:.1} us  ({} events, tracing on)",
            "one question's trace (path)",
            percentile(&traces, 0.5) * 1e3,
            percentile(&traces, 0.99) * 1e3,
            events.len()
        );
        telemetry.flush(Duration::from_secs(10)).await;
        let metrics = Metrics::default();
        let event = AgentEvent::ModelCall {
            started_ms: 0,
            elapsed_ms: 12,
            purpose: Purpose::WriteSql,
            model: "scripted".to_string(),
            input_tokens: 900,
            output_tokens: 12,
            cost_usd: 0.0,
            candidates: 1,
            truncated: 0,
            prompt: Vec::new(),
            replies: Vec::new(),
        };
        let rounds = 100_000;
        let started = Instant::now();
        for _ in 0..rounds {
            metrics.observe(&event);
        }
        println!(
            "{:<28} {:.3} us per event",
            "metrics observer",
            started.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)
        );
        Ok::<_, Box<dyn std::error::Error>>(())
    })?;
    Ok(())
}
