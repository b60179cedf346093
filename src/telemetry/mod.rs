//! Traces: one OpenTelemetry trace per question, shaped like the agent's state machine
//! and exported over OTLP/HTTP (protobuf) in the background.
//!
//! The agent knows nothing of OpenTelemetry: a [`QuestionTrace`] is one more
//! [`Observer`](crate::agent::events::Observer) of the agent's step events, and turns
//! each into a span under one root (`agent`): `select-schema` (retriever), one
//! generation span per model call named by its purpose (`write-sql`, `repair-sql`,
//! `write-answer`), `validate-sql` (guardrail), `execute-sql` (tool; a database error
//! sets the span's status to ERROR) and `empty-result-probe`. Attribute names are in
//! [`spans`]: OpenInference (`openinference.span.kind`, `llm.token_count.*`) and the
//! OpenTelemetry GenAI conventions (`gen_ai.usage.*`), so Phoenix, Langfuse and any
//! OTLP backend read them as they are. Cost is askdb's own figure (from its price
//! table), never the backend's guess.
//!
//! Configuration is the standard `OTEL_EXPORTER_OTLP_ENDPOINT` and
//! `OTEL_EXPORTER_OTLP_HEADERS` ([`TelemetryConfig::from_env`]); prompt and reply text
//! go on the spans only with `ASKDB_TRACE_CONTENT=1`. Unset means off, with the same
//! code path: spans are built and handed to the same batch processor, whose exporter
//! then drops them ([`export`]). The batch processor's queue is bounded and its
//! exports run on a thread of their own (the HTTP request itself on the tokio runtime),
//! so a collector that is down, slow or answers garbage never fails or slows an answer:
//! spans past the queue are dropped, failed exports are counted ([`TracingStatus`]).

pub mod export;
pub mod spans;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use opentelemetry_sdk::Resource;

pub use export::{ExportCounters, TracingStatus};
pub use spans::QuestionTrace;

/// The base URL of the OTLP collector (`/v1/traces` is appended).
pub const ENDPOINT_ENV: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `key=value` pairs, comma-separated, values percent-encoded (`Authorization=Basic%20...`).
pub const HEADERS_ENV: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// `1` (or `true`) puts prompt and reply text on the generation spans.
pub const CONTENT_ENV: &str = "ASKDB_TRACE_CONTENT";

/// Spans waiting to be exported; past this they are dropped, never waited for.
pub const QUEUE_CAPACITY: usize = 2048;
/// How long spans wait before a batch is sent (unless `OTEL_BSP_SCHEDULE_DELAY` says).
const SCHEDULE_DELAY: Duration = Duration::from_millis(500);
/// The longest one export (or the health probe) may take.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the tracing configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("{ENDPOINT_ENV} must be an http:// or https:// URL, not {0:?}")]
    Endpoint(String),
    #[error("{HEADERS_ENV} entry {0:?} is not key=value")]
    Header(String),
    #[error("the trace exporter cannot be built: {0}")]
    Exporter(String),
}

/// Where traces go, and what they may carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The collector's base URL; None: tracing is off (spans are built, then dropped).
    pub endpoint: Option<String>,
    /// Headers sent with each export (authentication), decoded.
    pub headers: BTreeMap<String, String>,
    /// Prompt and reply text on the generation spans.
    pub record_content: bool,
    /// Why tracing is off when a setting was given but could not be used.
    pub problem: Option<String>,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig::off()
    }
}

impl TelemetryConfig {
    /// Tracing off.
    pub fn off() -> TelemetryConfig {
        TelemetryConfig {
            endpoint: None,
            headers: BTreeMap::new(),
            record_content: false,
            problem: None,
        }
    }

    /// Traces to `endpoint` (the collector's base URL) with these headers.
    pub fn to_endpoint(
        endpoint: &str,
        headers: Option<&str>,
    ) -> Result<TelemetryConfig, TelemetryError> {
        let endpoint = endpoint.trim().trim_end_matches('/');
        if !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
            || endpoint.len() <= "https://".len()
        {
            return Err(TelemetryError::Endpoint(endpoint.to_string()));
        }
        Ok(TelemetryConfig {
            endpoint: Some(endpoint.to_string()),
            headers: parse_headers(headers.unwrap_or_default())?,
            record_content: false,
            problem: None,
        })
    }

    /// From the standard variables. A setting that cannot be used turns tracing off
    /// with the reason in [`TelemetryConfig::problem`] (shown at start and in health):
    /// a tracing mistake never stops askdb from answering.
    pub fn from_env() -> TelemetryConfig {
        let variable = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|value| !value.trim().is_empty())
        };
        let record_content = variable(CONTENT_ENV)
            .is_some_and(|value| matches!(value.trim(), "1" | "true" | "yes" | "on"));
        let disabled = variable("OTEL_SDK_DISABLED").is_some_and(|value| value.trim() == "true");
        let mut config = match variable(ENDPOINT_ENV) {
            Some(_) if disabled => TelemetryConfig::off(),
            Some(endpoint) => {
                match TelemetryConfig::to_endpoint(&endpoint, variable(HEADERS_ENV).as_deref()) {
                    Ok(config) => config,
                    Err(error) => TelemetryConfig {
                        problem: Some(error.to_string()),
                        ..TelemetryConfig::off()
                    },
                }
            }
            None => TelemetryConfig::off(),
        };
        config.record_content = record_content;
        config
    }

    /// The OTLP/HTTP traces URL: the endpoint with `/v1/traces` (kept when given).
    pub fn traces_url(&self) -> Option<String> {
        self.endpoint.as_ref().map(|endpoint| {
            if endpoint.ends_with("/v1/traces") {
                endpoint.clone()
            } else {
                format!("{endpoint}/v1/traces")
            }
        })
    }
}

/// `k1=v1,k2=v2` with percent-encoded values, as the OTLP exporter specification
/// writes `OTEL_EXPORTER_OTLP_HEADERS`.
pub fn parse_headers(text: &str) -> Result<BTreeMap<String, String>, TelemetryError> {
    let mut headers = BTreeMap::new();
    for entry in text
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
    {
        let Some((key, value)) = entry.split_once('=') else {
            return Err(TelemetryError::Header(redact_value(entry)));
        };
        let key = key.trim();
        let value = percent_decode(value.trim());
        if key.is_empty() || value.is_empty() {
            return Err(TelemetryError::Header(redact_value(entry)));
        }
        headers.insert(key.to_string(), value);
    }
    Ok(headers)
}

/// A header entry as an error may show it: the key, never the secret.
fn redact_value(entry: &str) -> String {
    match entry.split_once('=') {
        Some((key, _)) => format!("{}=...", key.trim()),
        None if entry.len() > 12 => format!("{}...", entry.chars().take(8).collect::<String>()),
        None => entry.to_string(),
    }
}

/// `%20` and friends decoded; a malformed escape is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' && index + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).ok();
            if let Some(byte) = hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                out.push(byte);
                index += 3;
                continue;
            }
        }
        out.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The tracer and its exporter: started once per process (`askdb serve`, `askdb eval
/// run`), shared by every question. Cheap to clone.
#[derive(Clone)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    tracer: opentelemetry_sdk::trace::SdkTracer,
    config: Arc<TelemetryConfig>,
    counters: Arc<ExportCounters>,
    probe: Option<export::Probe>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("endpoint", &self.config.endpoint)
            .field("record_content", &self.config.record_content)
            .finish()
    }
}

impl Telemetry {
    /// Starts the tracer. Must run inside a tokio runtime when an endpoint is set (the
    /// exports' HTTP requests run on it); without one, tracing is off with the reason.
    pub fn start(config: TelemetryConfig) -> Telemetry {
        let counters = Arc::new(ExportCounters::default());
        let mut config = config;
        let (exporter, probe) = match export::Export::new(&config, Arc::clone(&counters)) {
            Ok(pair) => pair,
            Err(error) => {
                config = TelemetryConfig {
                    problem: Some(error.to_string()),
                    record_content: config.record_content,
                    ..TelemetryConfig::off()
                };
                (export::Export::dropping(Arc::clone(&counters)), None)
            }
        };
        let mut batch = BatchConfigBuilder::default().with_max_queue_size(QUEUE_CAPACITY);
        if std::env::var_os("OTEL_BSP_SCHEDULE_DELAY").is_none() {
            batch = batch.with_scheduled_delay(SCHEDULE_DELAY);
        }
        let processor = BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch.build())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(
                Resource::builder()
                    .with_service_name("askdb")
                    .with_attribute(opentelemetry::KeyValue::new(
                        "service.version",
                        env!("CARGO_PKG_VERSION"),
                    ))
                    .build(),
            )
            .build();
        let tracer = provider.tracer("askdb");
        Telemetry {
            provider,
            tracer,
            config: Arc::new(config),
            counters,
            probe,
        }
    }

    /// Tracing off (spans built, then dropped by the exporter).
    pub fn off() -> Telemetry {
        Telemetry::start(TelemetryConfig::off())
    }

    /// Whether spans leave the process.
    pub fn enabled(&self) -> bool {
        self.probe.is_some()
    }

    pub fn config(&self) -> &TelemetryConfig {
        &self.config
    }

    pub fn counters(&self) -> &ExportCounters {
        &self.counters
    }

    /// The trace of one question; its root span starts now.
    pub fn question(&self, question: &str, mode: &str) -> QuestionTrace {
        QuestionTrace::start(
            &self.tracer,
            question,
            mode,
            self.config.record_content,
            self.enabled(),
        )
    }

    /// Whether the collector accepts an export now: one empty OTLP request with the
    /// configured headers (no span is stored), answered 2xx within the export timeout.
    /// The presence of a key proves nothing; this does.
    pub async fn check(&self) -> TracingStatus {
        let last = self.counters.last();
        match &self.probe {
            None => TracingStatus {
                enabled: false,
                authenticated: false,
                detail: match &self.config.problem {
                    Some(problem) => format!("tracing is off: {problem}"),
                    None => format!("tracing is off ({ENDPOINT_ENV} is not set)"),
                },
                exported: self.counters.exported(),
                failed: self.counters.failed(),
                last_error: last,
            },
            Some(probe) => {
                let outcome = probe.send().await;
                let accepted = outcome.is_ok();
                let detail = match outcome {
                    Ok(status) => format!(
                        "the collector at {} accepted an export ({status}); {} span(s) exported, {} failed",
                        probe.url(),
                        self.counters.exported(),
                        self.counters.failed()
                    ),
                    Err(why) => format!("the collector at {} refused an export: {why}", probe.url()),
                };
                TracingStatus {
                    enabled: true,
                    authenticated: accepted,
                    detail,
                    exported: self.counters.exported(),
                    failed: self.counters.failed(),
                    last_error: last,
                }
            }
        }
    }

    /// Sends the spans still queued, waiting at most `limit` (a collector that is down
    /// cannot hold a command's exit).
    pub async fn flush(&self, limit: Duration) {
        let provider = self.provider.clone();
        let flushing = tokio::task::spawn_blocking(move || provider.force_flush());
        let _ = tokio::time::timeout(limit, flushing).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_split_trimmed_and_percent_decoded() {
        let headers = parse_headers(" Authorization=Basic%20cGs6c2s= , x-team = a%2Cb ").unwrap();
        assert_eq!(headers["Authorization"], "Basic cGs6c2s=");
        assert_eq!(headers["x-team"], "a,b");
        assert!(parse_headers("").unwrap().is_empty());
        // A malformed escape is kept as written; a broken entry names its key, never the secret.
        assert_eq!(parse_headers("k=100%").unwrap()["k"], "100%");
        // An entry without `=` might be a bare secret: only its first characters show.
        let error = parse_headers("Basicc2VjcmV0c2VjcmV0")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("Basicc2V") && !error.contains("c2VjcmV0c2Vj"),
            "{error}"
        );
        let error = parse_headers("Authorization=").unwrap_err().to_string();
        assert!(!error.contains("Basic"), "{error}");
    }

    #[test]
    fn the_endpoint_gets_the_traces_path_once() {
        let config = TelemetryConfig::to_endpoint("http://127.0.0.1:6006/", None).unwrap();
        assert_eq!(
            config.traces_url().as_deref(),
            Some("http://127.0.0.1:6006/v1/traces")
        );
        let given = TelemetryConfig::to_endpoint("https://otel.example/v1/traces", None).unwrap();
        assert_eq!(
            given.traces_url().as_deref(),
            Some("https://otel.example/v1/traces")
        );
        assert!(TelemetryConfig::to_endpoint("127.0.0.1:6006", None).is_err());
        assert_eq!(TelemetryConfig::off().traces_url(), None);
    }

    #[tokio::test]
    async fn off_builds_the_same_spans_and_drops_them() {
        let telemetry = Telemetry::off();
        assert!(!telemetry.enabled());
        let trace = telemetry.question("How many?", "agent");
        assert_eq!(trace.trace_id(), None, "no id for a trace nobody can see");
        trace.fail("test");
        telemetry.flush(Duration::from_secs(5)).await;
        assert_eq!(telemetry.counters().dropped(), 1, "the root span was built");
        let status = telemetry.check().await;
        assert!(!status.enabled && !status.authenticated, "{status:?}");
    }
}
