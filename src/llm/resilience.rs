//! Getting an answer out of an HTTP model API that fails now and then: a bounded number
//! of attempts, exponential backoff on 5xx, timeouts and per-minute rate limits (the
//! server's Retry-After honoured), and key failover: a key whose daily budget is spent
//! is set aside at once and the next key tried without waiting.
//!
//! What each failure means, from the status and the words of the error body (Anthropic's
//! `{"type":"error","error":{"type","message"}}` and OpenAI's `{"error":{"message","type",
//! "code"}}` are both read):
//!
//! | reply | meaning | action |
//! |---|---|---|
//! | 429 naming a day ("per day", "daily", RPD/TPD) or a budget ("quota", "billing", "credit") | this key's daily budget is spent | next key at once; none left: `QuotaExhausted` |
//! | 402; 400/403 about credit balance or usage limits | this key's budget is spent | same |
//! | 429 otherwise (per minute, unrecognised) | slow down | back off (Retry-After if given) |
//! | 401, other 403 | the key is refused | next key at once; none left: `Authentication` |
//! | 408, 409, 425, 5xx, 529 (Anthropic overloaded) | transient | back off |
//! | timeout, connection failure | transient | back off |
//! | other 4xx | the request is wrong | fail at once: `BadRequest` |
//!
//! Key switches do not count against the attempts; everything else does.

use std::future::Future;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};

use super::keys::{ApiKey, KeyRing};
use super::LlmError;

/// How hard to try.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (key switches not counted).
    pub max_attempts: u32,
    /// The first backoff; each later one doubles, up to `max_delay`.
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// The longest Retry-After askdb waits; a server asking for more gets a failure now.
    pub max_retry_after: Duration,
    /// Per attempt, from sending to the last byte of the reply. Generous by default: a
    /// local model on two cores takes tens of seconds for a long prompt.
    pub timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(20),
            max_retry_after: Duration::from_secs(60),
            timeout: Duration::from_secs(300),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `failed_attempts + 1`: doubling from `base_delay`, capped,
    /// with up to a fifth added so clients that failed together do not retry together.
    pub fn backoff(&self, failed_attempts: u32) -> Duration {
        let exponent = failed_attempts.saturating_sub(1).min(16);
        let delay = self
            .base_delay
            .saturating_mul(1u32 << exponent)
            .min(self.max_delay);
        // Jitter from the clock's low digits: enough to spread retries, no RNG state.
        let jitter_per_mille = crate::calendar::unix_millis() % 200;
        let jitter = delay.mul_f64(jitter_per_mille as f64 / 1000.0);
        delay + jitter
    }
}

/// A reply as read off the wire.
#[derive(Debug, Clone)]
pub(crate) struct HttpReply {
    pub status: u16,
    pub retry_after: Option<Duration>,
    pub body: String,
}

/// A request that got no HTTP reply.
#[derive(Debug, Clone)]
pub(crate) struct TransportFailure {
    pub timed_out: bool,
    pub message: String,
}

/// A header value that carries a key, marked sensitive so no log or debug output shows
/// it. `text` is the whole value (`Bearer <key>`, or the key itself).
pub(crate) fn secret_header(key: &ApiKey, text: &str) -> Result<HeaderValue, TransportFailure> {
    let mut value = HeaderValue::from_str(text).map_err(|_| TransportFailure {
        timed_out: false,
        message: format!("{key} holds characters not allowed in a header"),
    })?;
    value.set_sensitive(true);
    Ok(value)
}

/// Reads a success body with the provider's parser; a body it cannot read is a
/// `MalformedResponse` whose message never shows a key.
pub(crate) fn read_success<T>(
    provider: &str,
    keys: &KeyRing,
    body: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, LlmError> {
    parse(body).map_err(|message| LlmError::MalformedResponse {
        provider: provider.to_string(),
        message: keys.scrub(&format!(
            "{message}; body began: {:?}",
            crate::text::cut_text(body, 200)
        )),
    })
}

/// The error an API put in its body, from either provider's format.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ApiErrorBody {
    /// `error.type` (Anthropic `rate_limit_error`, OpenAI `invalid_request_error`...).
    pub error_type: Option<String>,
    /// `error.code` (OpenAI `insufficient_quota`, `rate_limit_exceeded`...).
    pub code: Option<String>,
    pub message: String,
}

impl ApiErrorBody {
    pub fn parse(body: &str) -> ApiErrorBody {
        let text_of = |value: &serde_json::Value| match value {
            serde_json::Value::String(text) => Some(text.clone()),
            serde_json::Value::Null => None,
            other => Some(other.to_string()),
        };
        if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
            let error = value.get("error").unwrap_or(&value);
            if let Some(error) = error.as_object() {
                let message = error.get("message").and_then(text_of);
                if message.is_some() || error.contains_key("type") {
                    return ApiErrorBody {
                        error_type: error.get("type").and_then(text_of),
                        code: error.get("code").and_then(text_of),
                        message: message.unwrap_or_default(),
                    };
                }
            }
            if let Some(message) = error.as_str() {
                return ApiErrorBody {
                    message: message.to_string(),
                    ..ApiErrorBody::default()
                };
            }
        }
        ApiErrorBody {
            message: crate::text::cut_text(body.trim(), 300),
            ..ApiErrorBody::default()
        }
    }

    /// `type (code): message`, whichever parts exist.
    pub fn describe(&self) -> String {
        let mut text = String::new();
        if let Some(error_type) = &self.error_type {
            text.push_str(error_type);
        }
        if let Some(code) = &self.code {
            if self.error_type.as_deref() != Some(code.as_str()) {
                text.push_str(&format!(" ({code})"));
            }
        }
        if !self.message.is_empty() {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&self.message);
        }
        if text.is_empty() {
            text.push_str("(no message)");
        }
        text
    }

    fn words(&self) -> String {
        format!(
            "{} {} {}",
            self.error_type.as_deref().unwrap_or(""),
            self.code.as_deref().unwrap_or(""),
            self.message
        )
        .to_lowercase()
    }
}

/// What a failed reply means for the next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureClass {
    /// The key's daily (or paid) budget is spent: switch keys now.
    KeyBudgetSpent,
    /// The key is invalid or revoked: switch keys now.
    KeyRefused,
    /// Wait and try again.
    Transient,
    /// The request itself is wrong: trying again changes nothing.
    Fatal,
}

/// Words of a rate-limit message that name a day or a budget rather than a minute. A
/// message naming a day wins over one naming a minute ("quota ... per minute" is still
/// per minute).
fn names_daily_budget(words: &str) -> bool {
    const DAY: [&str; 6] = ["per day", "daily", "(rpd)", "(tpd)", " rpd", " tpd"];
    const MINUTE: [&str; 6] = [
        "per min",
        "per minute",
        "(rpm)",
        "(tpm)",
        "per second",
        "per hour",
    ];
    const BUDGET: [&str; 7] = [
        "quota",
        "billing",
        "credit balance",
        "credits",
        "usage limit",
        "spend limit",
        "insufficient_quota",
    ];
    if DAY.iter().any(|word| words.contains(word)) {
        return true;
    }
    if MINUTE.iter().any(|word| words.contains(word)) {
        return false;
    }
    BUDGET.iter().any(|word| words.contains(word))
}

pub(crate) fn classify(status: u16, error: &ApiErrorBody) -> FailureClass {
    let words = error.words();
    match status {
        429 => {
            if names_daily_budget(&words) {
                FailureClass::KeyBudgetSpent
            } else {
                FailureClass::Transient
            }
        }
        402 => FailureClass::KeyBudgetSpent,
        400 | 403
            if [
                "credit balance",
                "usage limit",
                "insufficient_quota",
                "billing",
            ]
            .iter()
            .any(|word| words.contains(word)) =>
        {
            FailureClass::KeyBudgetSpent
        }
        401 | 403 => FailureClass::KeyRefused,
        408 | 409 | 425 | 500..=599 => FailureClass::Transient,
        _ => FailureClass::Fatal,
    }
}

/// Reads Retry-After: OpenAI's `retry-after-ms` first, then `retry-after` in seconds
/// (an HTTP date is ignored, and the backoff used instead).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(millis) = header("retry-after-ms").and_then(|text| text.trim().parse::<f64>().ok())
    {
        if millis.is_finite() && millis >= 0.0 {
            return Some(Duration::from_secs_f64(millis / 1000.0));
        }
    }
    let seconds = header("retry-after")?.trim().parse::<f64>().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds))
}

/// A reqwest client for a model API, after installing the TLS provider.
pub(crate) fn http_client(policy: &RetryPolicy) -> Result<reqwest::Client, LlmError> {
    super::install_tls_provider();
    reqwest::Client::builder()
        .connect_timeout(policy.timeout.min(Duration::from_secs(15)))
        .timeout(policy.timeout)
        .build()
        .map_err(|error| LlmError::Config(format!("cannot build the HTTP client: {error}")))
}

/// POSTs `body` as JSON and reads the whole reply as text.
pub(crate) async fn post_json(
    client: &reqwest::Client,
    url: &str,
    headers: HeaderMap,
    body: &serde_json::Value,
) -> Result<HttpReply, TransportFailure> {
    let response = client
        .post(url)
        .headers(headers)
        .json(body)
        .send()
        .await
        .map_err(transport_failure)?;
    let status = response.status().as_u16();
    let retry_after = retry_after(response.headers());
    let body = response.text().await.map_err(transport_failure)?;
    Ok(HttpReply {
        status,
        retry_after,
        body,
    })
}

fn transport_failure(error: reqwest::Error) -> TransportFailure {
    let timed_out = error.is_timeout();
    // The URL is left out: the provider's name says where, and a base URL may hold
    // credentials. Keys travel in headers, which reqwest never prints.
    let error = error.without_url();
    // reqwest's own text is terse ("error sending request"); the causes say what failed
    // (connection refused, timed out, ...).
    let mut message = crate::text::error_chain(&error);
    if timed_out && !message.contains("timed out") {
        message.push_str(" (timed out)");
    }
    TransportFailure { timed_out, message }
}

/// Sends with retries, backoff and key failover. `send` makes one attempt with the key
/// given (None when the ring is empty: local servers need no key). Returns the first 2xx
/// reply and the number of HTTP attempts made.
pub(crate) async fn send_with_retries<F, Fut>(
    provider: &str,
    policy: &RetryPolicy,
    keys: &KeyRing,
    mut send: F,
) -> Result<(HttpReply, u32), LlmError>
where
    F: FnMut(Option<ApiKey>) -> Fut,
    Fut: Future<Output = Result<HttpReply, TransportFailure>>,
{
    let max_attempts = policy.max_attempts.max(1);
    let mut http_attempts = 0u32;
    let mut counted_attempts = 0u32;
    loop {
        let key = if keys.is_empty() {
            None
        } else {
            match keys.current() {
                Some(found) => Some(found),
                None => {
                    return Err(LlmError::QuotaExhausted {
                        provider: provider.to_string(),
                        keys: keys.len(),
                        message: "no key is usable today".to_string(),
                    })
                }
            }
        };
        http_attempts += 1;
        counted_attempts += 1;
        let outcome = send(key.as_ref().map(|(_, key)| key.clone())).await;
        let (last, timed_out, server_wait) = match outcome {
            Ok(reply) if (200..300).contains(&reply.status) => return Ok((reply, http_attempts)),
            Ok(reply) => {
                let error = ApiErrorBody::parse(&reply.body);
                let message = keys.scrub(&error.describe());
                match classify(reply.status, &error) {
                    FailureClass::KeyBudgetSpent => {
                        if let Some((index, _)) = &key {
                            keys.mark_exhausted(*index);
                        }
                        if key.is_some() && keys.current().is_some() {
                            counted_attempts -= 1;
                            continue;
                        }
                        return Err(LlmError::QuotaExhausted {
                            provider: provider.to_string(),
                            keys: keys.len(),
                            message,
                        });
                    }
                    FailureClass::KeyRefused => {
                        if let Some((index, _)) = &key {
                            keys.mark_rejected(*index);
                        }
                        if key.is_some() && keys.current().is_some() {
                            counted_attempts -= 1;
                            continue;
                        }
                        return Err(LlmError::Authentication {
                            provider: provider.to_string(),
                            status: reply.status,
                            message,
                        });
                    }
                    FailureClass::Fatal => {
                        return Err(LlmError::BadRequest {
                            provider: provider.to_string(),
                            status: reply.status,
                            message,
                        })
                    }
                    FailureClass::Transient => (
                        format!("HTTP {}: {message}", reply.status),
                        false,
                        reply.retry_after,
                    ),
                }
            }
            Err(failure) => (keys.scrub(&failure.message), failure.timed_out, None),
        };
        if counted_attempts >= max_attempts {
            return Err(LlmError::GaveUp {
                provider: provider.to_string(),
                attempts: http_attempts,
                last,
                timed_out,
            });
        }
        let wait = match server_wait {
            Some(wait) if wait > policy.max_retry_after => {
                return Err(LlmError::GaveUp {
                    provider: provider.to_string(),
                    attempts: http_attempts,
                    last: format!(
                    "{last} (the server asked to wait {:.0}s, longer than the {:.0}s askdb waits)",
                    wait.as_secs_f64(),
                    policy.max_retry_after.as_secs_f64()
                ),
                    timed_out,
                })
            }
            Some(wait) => wait,
            None => policy.backoff(counted_attempts),
        };
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(json: &str) -> ApiErrorBody {
        ApiErrorBody::parse(json)
    }

    #[test]
    fn reads_both_providers_error_bodies() {
        let anthropic =
            body(r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#);
        assert_eq!(anthropic.error_type.as_deref(), Some("overloaded_error"));
        assert_eq!(anthropic.message, "Overloaded");
        let openai = body(
            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
        );
        assert_eq!(openai.code.as_deref(), Some("insufficient_quota"));
        let llama =
            body(r#"{"error":{"code":400,"message":"bad","type":"invalid_request_error"}}"#);
        assert_eq!(llama.code.as_deref(), Some("400"));
        assert_eq!(
            body("<html>bad gateway</html>").message,
            "<html>bad gateway</html>"
        );
    }

    #[test]
    fn a_daily_429_spends_the_key_and_a_per_minute_one_backs_off() {
        let daily = body(
            r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on requests per day (RPD): Limit 10000, Used 10000, Requested 1.","type":"requests","code":"rate_limit_exceeded"}}"#,
        );
        assert_eq!(classify(429, &daily), FailureClass::KeyBudgetSpent);
        let minute = body(
            r#"{"error":{"message":"Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000.","type":"tokens","code":"rate_limit_exceeded"}}"#,
        );
        assert_eq!(classify(429, &minute), FailureClass::Transient);
        let anthropic_minute = body(
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit of 50 requests per minute."}}"#,
        );
        assert_eq!(classify(429, &anthropic_minute), FailureClass::Transient);
        let quota = body(
            r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}"#,
        );
        assert_eq!(classify(429, &quota), FailureClass::KeyBudgetSpent);
        let quota_per_minute = body(
            r#"{"error":{"message":"Quota exceeded for metric: generate_content_requests per minute"}}"#,
        );
        assert_eq!(classify(429, &quota_per_minute), FailureClass::Transient);
        let unknown = body("slow down");
        assert_eq!(classify(429, &unknown), FailureClass::Transient);
    }

    #[test]
    fn statuses_map_to_actions() {
        let empty = ApiErrorBody::default();
        assert_eq!(classify(529, &empty), FailureClass::Transient);
        assert_eq!(classify(500, &empty), FailureClass::Transient);
        assert_eq!(classify(401, &empty), FailureClass::KeyRefused);
        assert_eq!(classify(400, &empty), FailureClass::Fatal);
        assert_eq!(classify(404, &empty), FailureClass::Fatal);
        let credit = body(
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}"#,
        );
        assert_eq!(classify(400, &credit), FailureClass::KeyBudgetSpent);
    }

    #[test]
    fn retry_after_reads_milliseconds_first_then_seconds() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "2".parse().expect("header"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", "150".parse().expect("header"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        let mut date = HeaderMap::new();
        date.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().expect("header"),
        );
        assert_eq!(retry_after(&date), None);
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            ..RetryPolicy::default()
        };
        let first = policy.backoff(1);
        assert!(first >= Duration::from_millis(100) && first < Duration::from_millis(121));
        let second = policy.backoff(2);
        assert!(second >= Duration::from_millis(200) && second < Duration::from_millis(241));
        let capped = policy.backoff(9);
        assert!(capped >= Duration::from_millis(350) && capped < Duration::from_millis(421));
    }
}
