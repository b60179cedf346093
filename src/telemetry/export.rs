//! The exporter behind the batch processor: OTLP/HTTP protobuf through
//! `opentelemetry-otlp` on askdb's own reqwest, or, with tracing off, nothing (the
//! batch is dropped and counted). Every export's outcome is counted; none is ever an
//! error to the SDK, so a failing collector never surfaces anywhere but health.
//!
//! The batch processor exports from a thread of its own; the HTTP request is spawned on
//! the tokio runtime askdb runs (reqwest needs its reactor), and that thread only waits
//! for it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use serde::Serialize;

use super::{TelemetryConfig, TelemetryError, EXPORT_TIMEOUT};

/// Export outcomes since start.
#[derive(Debug, Default)]
pub struct ExportCounters {
    exported: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl ExportCounters {
    /// Spans the collector accepted.
    pub fn exported(&self) -> u64 {
        self.exported.load(Ordering::Relaxed)
    }

    /// Spans whose export failed (refused, unreachable, timed out).
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Spans dropped because tracing is off.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The last export error, if the last export failed.
    pub fn last(&self) -> Option<String> {
        self.last_error
            .lock()
            .map(|last| last.clone())
            .unwrap_or_default()
    }

    fn set_last(&self, error: Option<String>) {
        if let Ok(mut last) = self.last_error.lock() {
            *last = error;
        }
    }
}

/// What health says about tracing.
#[derive(Debug, Clone, Serialize)]
pub struct TracingStatus {
    /// An endpoint is configured and usable.
    pub enabled: bool,
    /// The collector accepted an export just now (with the configured headers).
    pub authenticated: bool,
    pub detail: String,
    pub exported: u64,
    pub failed: u64,
    pub last_error: Option<String>,
}

/// The span exporter the batch processor owns.
#[derive(Debug)]
pub struct Export {
    target: Option<(
        Arc<opentelemetry_otlp::SpanExporter>,
        tokio::runtime::Handle,
    )>,
    counters: Arc<ExportCounters>,
}

impl Export {
    /// The exporter for `config`, and the health probe (None when tracing is off).
    pub fn new(
        config: &TelemetryConfig,
        counters: Arc<ExportCounters>,
    ) -> Result<(Export, Option<Probe>), TelemetryError> {
        let Some(url) = config.traces_url() else {
            return Ok((Export::dropping(counters), None));
        };
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            TelemetryError::Exporter("no tokio runtime to send exports from".to_string())
        })?;
        crate::llm::install_tls_provider();
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .connect_timeout(EXPORT_TIMEOUT / 2)
            .build()
            .map_err(|error| TelemetryError::Exporter(error.to_string()))?;
        let headers: HashMap<String, String> = config
            .headers
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client.clone())
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(url.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .with_headers(headers)
            .build()
            .map_err(|error| TelemetryError::Exporter(error.to_string()))?;
        let probe = Probe::new(client, url, &config.headers)?;
        Ok((
            Export {
                target: Some((Arc::new(exporter), runtime)),
                counters,
            },
            Some(probe),
        ))
    }

    /// Tracing off: every batch is dropped (and counted).
    pub fn dropping(counters: Arc<ExportCounters>) -> Export {
        Export {
            target: None,
            counters,
        }
    }
}

impl SpanExporter for Export {
    fn export(
        &self,
        batch: Vec<SpanData>,
    ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
        let target = self.target.clone();
        let counters = Arc::clone(&self.counters);
        async move {
            let count = batch.len() as u64;
            let Some((exporter, runtime)) = target else {
                counters.dropped.fetch_add(count, Ordering::Relaxed);
                return Ok(());
            };
            let sent = runtime.spawn(async move { exporter.export(batch).await });
            let outcome = match sent.await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(error.to_string()),
                Err(error) => Err(format!("the export task ended: {error}")),
            };
            match outcome {
                Ok(()) => {
                    counters.exported.fetch_add(count, Ordering::Relaxed);
                    counters.set_last(None);
                }
                Err(error) => {
                    counters.failed.fetch_add(count, Ordering::Relaxed);
                    counters.set_last(Some(crate::text::cut_text(&error, 300)));
                }
            }
            // Counted, never raised: the SDK would only print it.
            Ok(())
        }
    }
}

/// One empty OTLP export request: what the collector answers to it is whether it
/// accepts askdb's exports (its address, its TLS, its authentication).
#[derive(Debug, Clone)]
pub struct Probe {
    client: reqwest::Client,
    url: String,
    headers: reqwest::header::HeaderMap,
}

impl Probe {
    fn new(
        client: reqwest::Client,
        url: String,
        headers: &std::collections::BTreeMap<String, String>,
    ) -> Result<Probe, TelemetryError> {
        let mut map = reqwest::header::HeaderMap::new();
        for (key, value) in headers {
            let name = reqwest::header::HeaderName::from_bytes(key.as_bytes())
                .map_err(|_| TelemetryError::Header(format!("{key}=...")))?;
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| TelemetryError::Header(format!("{key}=...")))?;
            map.insert(name, value);
        }
        Ok(Probe {
            client,
            url,
            headers: map,
        })
    }

    /// The traces URL, without any credentials.
    pub fn url(&self) -> String {
        crate::text::redact_password(&self.url)
    }

    /// Ok(status) when the collector answered 2xx.
    pub async fn send(&self) -> Result<u16, String> {
        let response = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/x-protobuf")
            .body(Vec::<u8>::new())
            .send()
            .await
            .map_err(|error| crate::text::error_chain(&error))?;
        let status = response.status();
        if status.is_success() {
            Ok(status.as_u16())
        } else {
            let body = response.text().await.unwrap_or_default();
            Err(format!(
                "HTTP {status}{}",
                if body.trim().is_empty() {
                    String::new()
                } else {
                    format!(": {}", crate::text::cut_text(body.trim(), 200))
                }
            ))
        }
    }
}
