//! ModelClient::call: what it records, when the cache answers, when the ledger refuses.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;

/// A metered provider that always answers the same, counting its calls.
#[derive(Debug)]
struct FixedProvider {
    calls: AtomicUsize,
    fail: bool,
}

impl FixedProvider {
    fn new(fail: bool) -> Arc<FixedProvider> {
        Arc::new(FixedProvider {
            calls: AtomicUsize::new(0),
            fail,
        })
    }
}

impl Provider for FixedProvider {
    fn name(&self) -> &str {
        "anthropic"
    }
    fn model(&self) -> &str {
        "claude-sonnet-4-5"
    }
    fn endpoint(&self) -> &str {
        "test"
    }
    fn is_metered(&self) -> bool {
        true
    }
    fn complete<'a>(
        &'a self,
        _request: &'a ModelRequest,
        _permit: CallPermit,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let fail = self.fail;
        Box::pin(async move {
            if fail {
                return Err(LlmError::GaveUp {
                    provider: "anthropic".into(),
                    attempts: 4,
                    last: "HTTP 529: overloaded_error: Overloaded".into(),
                    timed_out: false,
                });
            }
            Ok(completion(
                "```json\n{\"sql\": \"SELECT 1\"}\n```",
                "claude-sonnet-4-5-20250929",
                (1_000, 100),
            ))
        })
    }
}

/// A completion of one attempt, nothing cached, for the tests of the llm module.
pub(super) fn completion(text: &str, model: &str, (input, output): (u64, u64)) -> Completion {
    Completion {
        text: text.into(),
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: 0,
        cache_write_tokens: 0,
        tokens_estimated: false,
        truncated: false,
        model: model.into(),
        attempts: 1,
        alternatives: Vec::new(),
        confidence: None,
        server_timings: None,
    }
}

fn request(question: &str) -> ModelRequest {
    ModelRequest::new(
        Purpose::WriteSql,
        question,
        vec![Message::stable_system("schema"), Message::user(question)],
    )
    .with_max_tokens(200)
}

fn client(
    provider: Arc<FixedProvider>,
    cap: Option<f64>,
    cache: Option<&std::path::Path>,
) -> ModelClient {
    let prices = PriceTable::built_in().expect("prices");
    let cache = cache.map(|dir| Arc::new(ResponseCache::open(dir).expect("cache")));
    ModelClient::new(
        provider,
        &prices,
        Arc::new(SpendLedger::in_memory(cap)),
        cache,
    )
    .expect("client")
}

#[tokio::test]
async fn a_call_is_recorded_with_tokens_latency_and_cost() {
    let provider = FixedProvider::new(false);
    let client = client(provider.clone(), None, None);
    let log = CallLog::default();
    let reply = client.call(&request("q"), &log).await.expect("reply");
    // Sonnet: $3 in, $15 out per million.
    let expected = 1_000.0 * 3.0 / 1e6 + 100.0 * 15.0 / 1e6;
    assert!(
        (reply.cost_usd - expected).abs() < 1e-12,
        "{}",
        reply.cost_usd
    );
    assert_eq!(
        reply.json().expect("fenced JSON"),
        serde_json::json!({"sql": "SELECT 1"})
    );
    let records = log.records();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].purpose, Purpose::WriteSql);
    assert_eq!(
        (records[0].input_tokens, records[0].output_tokens),
        (1_000, 100)
    );
    assert!((client.ledger().spent_usd() - expected).abs() < 1e-12);
    let totals = log.totals();
    assert_eq!((totals.calls, totals.failed_calls), (1, 0));
}

#[tokio::test]
async fn a_failed_call_is_recorded_at_no_cost() {
    let client = client(FixedProvider::new(true), Some(1.0), None);
    let log = CallLog::default();
    let error = client.call(&request("q"), &log).await.expect_err("fails");
    assert!(error.is_infrastructure());
    let records = log.records();
    assert_eq!(records[0].error_kind.as_deref(), Some("gave_up"));
    assert_eq!(records[0].cost_usd, 0.0);
    assert_eq!(client.ledger().spent_usd(), 0.0);
}

#[tokio::test]
async fn the_cap_refuses_the_call_before_the_provider_sees_it() {
    let provider = FixedProvider::new(false);
    // One call costs $0.0045; its worst case (200 output tokens) a little more.
    let client = client(provider.clone(), Some(0.006), None);
    let log = CallLog::default();
    client.call(&request("q"), &log).await.expect("first fits");
    let error = client
        .call(&request("q"), &log)
        .await
        .expect_err("second would cross");
    assert_eq!(error.kind(), "spend_cap_reached");
    assert!(error.is_infrastructure());
    assert_eq!(provider.calls.load(Ordering::SeqCst), 1);
    assert_eq!(log.totals().failed_calls, 1);
}

#[tokio::test]
async fn the_cache_answers_an_identical_request_for_free() {
    let dir = tempfile::tempdir().expect("temp dir");
    let provider = FixedProvider::new(false);
    let client = client(provider.clone(), None, Some(dir.path()));
    let log = CallLog::default();
    let first = client.call(&request("q"), &log).await.expect("reply");
    let second = client.call(&request("q"), &log).await.expect("cached");
    assert!(!first.from_cache && second.from_cache);
    assert_eq!(first.text, second.text);
    assert_eq!(second.cost_usd, 0.0);
    client.call(&request("another"), &log).await.expect("reply");
    assert_eq!(provider.calls.load(Ordering::SeqCst), 2);
    assert_eq!(log.totals().cached_calls, 1);
}

#[test]
fn a_capped_metered_model_without_a_price_is_refused_up_front() {
    #[derive(Debug)]
    struct Unpriced;
    impl Provider for Unpriced {
        fn name(&self) -> &str {
            "openai"
        }
        fn model(&self) -> &str {
            "some-new-model"
        }
        fn endpoint(&self) -> &str {
            "test"
        }
        fn is_metered(&self) -> bool {
            true
        }
        fn complete<'a>(
            &'a self,
            _request: &'a ModelRequest,
            _permit: CallPermit,
        ) -> BoxFuture<'a, Result<Completion, LlmError>> {
            Box::pin(async { Err(LlmError::NotConfigured) })
        }
    }
    let prices = PriceTable::built_in().expect("prices");
    let capped = ModelClient::new(
        Arc::new(Unpriced),
        &prices,
        Arc::new(SpendLedger::in_memory(Some(5.0))),
        None,
    );
    let error = capped.expect_err("cannot enforce the cap").to_string();
    assert!(
        error.contains("some-new-model") && error.contains("ASKDB_PRICES"),
        "{error}"
    );
    let uncapped = ModelClient::new(
        Arc::new(Unpriced),
        &prices,
        Arc::new(SpendLedger::in_memory(None)),
        None,
    );
    assert!(uncapped.is_ok());
}

#[test]
fn purposes_have_snake_case_names() {
    for purpose in Purpose::ALL {
        let json = serde_json::to_string(&purpose).expect("serializes");
        assert_eq!(json, format!("\"{}\"", purpose.as_str()));
        assert_eq!(Purpose::parse(purpose.as_str()), Some(purpose));
    }
}
