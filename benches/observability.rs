//! The per-question overhead of the query log and the metrics on the scripted provider:
//! the same question asked through the whole router (`app(state).oneshot`, no socket)
//! with the log off and with the SQLite log on, interleaved so drift in the machine's
//! load hits both alike; then the cost on the request path alone (`QueryLog::record`,
//! one channel send) and the metrics observer's cost per event. Prints figures; asserts
//! nothing about time. Run: `cargo bench --bench observability` (ASKDB_BENCH_QUESTIONS
//! sets how many questions per arm, 300 by default).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use askdb::agent::events::{AgentEvent, Observer};
use askdb::database::{open_gate, DatabaseUrl};
use askdb::gate::GateOptions;
use askdb::llm::scripted::ScriptedProvider;
use askdb::llm::{ModelClient, PriceTable, SpendLedger};
use askdb::querylog::{LogRecord, LogTarget, QueryLog};
use askdb::server::metrics::Metrics;
use askdb::server::monitor::QueryLogSetting;
use askdb::server::{app, AppState, ServerConfig};
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
    }
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
        let state = |query_log: QueryLogSetting| {
            let url = url.clone();
            async move {
                let gate = open_gate(&url, GateOptions::default()).await?;
                let config = ServerConfig {
                    asks_per_minute: 0,
                    explain: false,
                    query_log,
                    ..ServerConfig::default()
                };
                let model = client(questions + 20)?;
                Ok::<_, Box<dyn std::error::Error>>(AppState::new(gate, Ok(model), config).await?)
            }
        };
        let off = state(QueryLogSetting::Off("bench".to_string())).await?;
        let on = state(QueryLogSetting::On(LogTarget::Sqlite {
            path: dir.path().join("query_log.sqlite"),
            database: "demo".to_string(),
        }))
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
        // Warm both (the agent's first question builds caches).
        for _ in 0..10 {
            ask(off.clone()).await?;
            ask(on.clone()).await?;
        }
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for _ in 0..questions {
            without.push(ask(off.clone()).await?);
            with.push(ask(on.clone()).await?);
        }
        println!("per question through POST /api/ask (scripted provider, demo SQLite):");
        let base = report("query log off", without);
        let logged = report("query log on (SQLite)", with);
        println!(
            "{:<28} {:+.3} ms at p50 (noise of the same order: compare the path cost below)",
            "difference",
            logged - base
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
        let metrics = Metrics::default();
        let event = AgentEvent::ModelCall {
            started_ms: 0,
            elapsed_ms: 12,
            purpose: "write_sql".to_string(),
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
