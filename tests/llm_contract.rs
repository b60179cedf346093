//! The model clients against local HTTP servers that replay each provider's documented
//! wire format, success and failure bodies alike: the Anthropic Messages API
//! (`POST /v1/messages`, its error types and statuses) and OpenAI chat completions
//! (`POST /chat/completions`, its error objects). What is asserted is what the server
//! saw (paths, headers, bodies, which key, how many requests) and what askdb made of
//! the replies: retries, key rotation, the spend cap, the cache, and that no key is
//! ever printed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use askdb::llm::{
    ApiKey, CallLog, LlmError, Message, ModelClient, ModelRequest, ProviderConfig, ProviderKind,
    Purpose, RetryPolicy,
};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------
// A tiny HTTP/1.1 server: one request per connection, replies chosen by a handler.

/// One request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HashMap<String, String>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

#[derive(Debug, Clone)]
enum Reply {
    Respond {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// Read the request and never answer.
    Hang,
}

fn reply(status: u16, body: impl Into<String>) -> Reply {
    Reply::Respond {
        status,
        headers: Vec::new(),
        body: body.into(),
    }
}

fn reply_with(status: u16, headers: &[(&'static str, &str)], body: impl Into<String>) -> Reply {
    Reply::Respond {
        status,
        headers: headers
            .iter()
            .map(|(name, value)| (*name, value.to_string()))
            .collect(),
        body: body.into(),
    }
}

type Handler = dyn Fn(usize, &Seen) -> Reply + Send + Sync;

struct MockServer {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl MockServer {
    /// A server that answers request number n (from 0) with `handler(n, request)`.
    async fn start(handler: impl Fn(usize, &Seen) -> Reply + Send + Sync + 'static) -> MockServer {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let address = listener.local_addr().expect("local address");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let handler: Arc<Handler> = Arc::new(handler);
        let accept_seen = seen.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let seen = accept_seen.clone();
                let handler = handler.clone();
                tokio::spawn(async move {
                    let _ = serve_one(stream, seen, handler).await;
                });
            }
        });
        MockServer {
            base: format!("http://{address}"),
            seen,
            accept,
        }
    }

    /// A server that gives the replies in order, then 500s.
    async fn replay(replies: Vec<Reply>) -> MockServer {
        MockServer::start(move |index, _| {
            replies.get(index).cloned().unwrap_or_else(|| {
                reply(500, r#"{"error": {"message": "the test script ran out"}}"#)
            })
        })
        .await
    }

    fn requests(&self) -> Vec<Seen> {
        self.seen.lock().expect("lock").clone()
    }
}

async fn serve_one(
    mut stream: TcpStream,
    seen: Arc<Mutex<Vec<Seen>>>,
    handler: Arc<Handler>,
) -> std::io::Result<()> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let header_end = loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..read]);
        if let Some(position) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break position + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let path = request_line
        .split(' ')
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let headers: HashMap<String, String> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|value| value.parse().ok())
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = serde_json::from_slice(&buffer[header_end..]).unwrap_or(Value::Null);
    let request = Seen {
        path,
        headers,
        body,
    };
    let index = {
        let mut seen = seen.lock().expect("lock");
        seen.push(request.clone());
        seen.len() - 1
    };
    match handler(index, &request) {
        Reply::Hang => {
            tokio::time::sleep(Duration::from_secs(120)).await;
            Ok(())
        }
        Reply::Respond {
            status,
            headers,
            body,
        } => {
            let mut response = format!(
                "HTTP/1.1 {status} Whatever\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                response.push_str(&format!("{name}: {value}\r\n"));
            }
            response.push_str("\r\n");
            response.push_str(&body);
            stream.write_all(response.as_bytes()).await?;
            stream.shutdown().await
        }
    }
}

// ---------------------------------------------------------------------------------------
// Documented bodies.

const KEY_ONE: &str = "sk-ant-test-KEY-ONE-8d1f0b2c4e6a";
const KEY_TWO: &str = "sk-ant-test-KEY-TWO-93c7e5a1f0d2";

fn anthropic_success(text: &str) -> String {
    json!({
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 2095, "output_tokens": 503, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    })
    .to_string()
}

fn anthropic_error(error_type: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": error_type, "message": message}}).to_string()
}

fn openai_success(text: &str) -> String {
    json!({
        "id": "chatcmpl-abc123",
        "object": "chat.completion",
        "created": 1_741_569_952,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": null, "annotations": []},
            "logprobs": null,
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
        },
        "service_tier": "default"
    })
    .to_string()
}

fn openai_error(message: &str, error_type: &str, code: Option<&str>) -> String {
    json!({"error": {"message": message, "type": error_type, "param": null, "code": code}})
        .to_string()
}

// ---------------------------------------------------------------------------------------
// Clients.

fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(40),
        max_retry_after: Duration::from_secs(5),
        timeout: Duration::from_secs(10),
    }
}

fn config(kind: ProviderKind, server: &MockServer, keys: &[&str]) -> ProviderConfig {
    askdb::llm::install_tls_provider();
    let base_url = match kind {
        ProviderKind::OpenAi => format!("{}/v1", server.base),
        _ => server.base.clone(),
    };
    let model = match kind {
        ProviderKind::OpenAi => "gpt-4.1-mini",
        _ => "claude-sonnet-4-5",
    };
    ProviderConfig {
        model: model.to_string(),
        base_url,
        keys: keys.iter().filter_map(|key| ApiKey::new(*key)).collect(),
        retry: fast_retries(),
        ..ProviderConfig::for_kind(kind)
    }
}

fn client(config: &ProviderConfig) -> ModelClient {
    ModelClient::from_config(config).expect("client")
}

fn request() -> ModelRequest {
    ModelRequest::new(
        Purpose::WriteSql,
        "How many bills are there?",
        vec![
            Message::stable_system(
                "You write one SQLite SELECT.\n<schema>CREATE TABLE bills (id INTEGER);</schema>",
            ),
            Message::user("How many bills are there?"),
        ],
    )
    .with_max_tokens(300)
}

async fn ask(client: &ModelClient) -> Result<askdb::llm::ModelReply, LlmError> {
    client.call(&request(), &CallLog::default()).await
}

// ---------------------------------------------------------------------------------------
// Anthropic.

#[tokio::test]
async fn anthropic_sends_the_documented_request_and_reads_the_reply() {
    let server = MockServer::replay(vec![reply(
        200,
        anthropic_success("SELECT count(*) FROM bills"),
    )])
    .await;
    let client = client(&config(ProviderKind::Anthropic, &server, &[KEY_ONE]));
    let log = CallLog::default();
    let answer = client
        .call(
            &request().with_json_schema(
                json!({"type": "object"}),
                "Reply with JSON matching the JSON schema",
            ),
            &log,
        )
        .await
        .expect("reply");
    assert_eq!(answer.text, "SELECT count(*) FROM bills");
    assert_eq!((answer.input_tokens, answer.output_tokens), (2095, 503));
    let expected_cost = 2095.0 * 3.0 / 1e6 + 503.0 * 15.0 / 1e6;
    assert!(
        (answer.cost_usd - expected_cost).abs() < 1e-12,
        "{}",
        answer.cost_usd
    );
    assert_eq!(log.records().len(), 1);

    let seen = &server.requests()[0];
    assert_eq!(seen.path, "/v1/messages");
    assert_eq!(seen.header("x-api-key"), Some(KEY_ONE));
    assert_eq!(seen.header("anthropic-version"), Some("2023-06-01"));
    assert!(seen.header("authorization").is_none());
    assert_eq!(seen.body["model"], "claude-sonnet-4-5");
    assert_eq!(seen.body["max_tokens"], 300);
    assert_eq!(
        seen.body["system"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert!(seen.body["system"][1]["text"]
        .as_str()
        .unwrap_or("")
        .contains("JSON schema"));
    assert_eq!(seen.body["messages"][0]["role"], "user");
}

#[tokio::test]
async fn anthropic_fenced_json_replies_are_parsed() {
    let fenced = "Here is the query:\n```json\n{\"sql\": \"SELECT count(*) FROM bills\"}\n```";
    let server = MockServer::replay(vec![reply(200, anthropic_success(fenced))]).await;
    let client = client(&config(ProviderKind::Anthropic, &server, &[KEY_ONE]));
    let answer = ask(&client).await.expect("reply");
    assert_eq!(
        answer.json().expect("JSON"),
        json!({"sql": "SELECT count(*) FROM bills"})
    );
}

#[tokio::test]
async fn anthropic_overloaded_529_and_api_error_500_are_retried() {
    let server = MockServer::replay(vec![
        reply(529, anthropic_error("overloaded_error", "Overloaded")),
        reply(500, anthropic_error("api_error", "Internal server error")),
        reply(200, anthropic_success("ok")),
    ])
    .await;
    let client = client(&config(ProviderKind::Anthropic, &server, &[KEY_ONE]));
    let answer = ask(&client).await.expect("third attempt succeeds");
    assert_eq!(answer.attempts, 3);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn attempts_are_bounded() {
    let server =
        MockServer::start(|_, _| reply(500, anthropic_error("api_error", "Internal server error")))
            .await;
    let client = client(&config(ProviderKind::Anthropic, &server, &[KEY_ONE]));
    let error = ask(&client).await.expect_err("always 500");
    assert_eq!(error.kind(), "gave_up");
    assert!(error.to_string().contains("api_error"), "{error}");
    assert!(error.is_infrastructure());
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn anthropic_rate_limit_429_with_retry_after_waits_as_told() {
    let server = MockServer::replay(vec![
        reply_with(
            429,
            &[("retry-after", "1")],
            anthropic_error(
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
        ),
        reply(200, anthropic_success("ok")),
    ])
    .await;
    let client = client(&config(
        ProviderKind::Anthropic,
        &server,
        &[KEY_ONE, KEY_TWO],
    ));
    let started = Instant::now();
    ask(&client).await.expect("second attempt succeeds");
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    let keys: Vec<_> = server
        .requests()
        .iter()
        .map(|seen| seen.header("x-api-key").map(str::to_string))
        .collect();
    assert_eq!(
        keys,
        [Some(KEY_ONE.to_string()), Some(KEY_ONE.to_string())],
        "a per-minute limit keeps the key"
    );
}

#[tokio::test]
async fn a_429_without_retry_after_backs_off_on_the_same_key() {
    let server = MockServer::replay(vec![
        reply(429, anthropic_error("rate_limit_error", "Rate limited")),
        reply(200, anthropic_success("ok")),
    ])
    .await;
    let client = client(&config(
        ProviderKind::Anthropic,
        &server,
        &[KEY_ONE, KEY_TWO],
    ));
    ask(&client).await.expect("second attempt succeeds");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests
        .iter()
        .all(|seen| seen.header("x-api-key") == Some(KEY_ONE)));
}

#[tokio::test]
async fn a_retry_after_longer_than_askdb_waits_fails_at_once() {
    let server = MockServer::replay(vec![reply_with(
        429,
        &[("retry-after", "3600")],
        anthropic_error("rate_limit_error", "Rate limited"),
    )])
    .await;
    let client = client(&config(ProviderKind::Anthropic, &server, &[KEY_ONE]));
    let started = Instant::now();
    let error = ask(&client).await.expect_err("will not wait an hour");
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(error.to_string().contains("3600"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn anthropic_daily_cap_rotates_to_the_second_key_at_once_and_remembers() {
    let server = MockServer::start(|_, seen| {
        if seen.header("x-api-key") == Some(KEY_ONE) {
            reply(
                429,
                anthropic_error("rate_limit_error", "This request would exceed your organization's daily token limit. Please try again tomorrow."),
            )
        } else {
            reply(200, anthropic_success("ok"))
        }
    })
    .await;
    let client = client(&config(
        ProviderKind::Anthropic,
        &server,
        &[KEY_ONE, KEY_TWO],
    ));
    let started = Instant::now();
    let answer = ask(&client).await.expect("the second key answers");
    assert_eq!(answer.attempts, 2);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "rotation does not back off"
    );
    ask(&client).await.expect("still the second key");
    let keys: Vec<_> = server
        .requests()
        .iter()
        .filter_map(|seen| seen.header("x-api-key").map(str::to_string))
        .collect();
    assert_eq!(keys, [KEY_ONE, KEY_TWO, KEY_TWO]);
}

#[tokio::test]
async fn when_every_key_is_spent_for_the_day_the_error_says_so() {
    let server = MockServer::start(|_, _| {
        reply(
            429,
            openai_error(
                "You exceeded your current quota, please check your plan and billing details.",
                "insufficient_quota",
                Some("insufficient_quota"),
            ),
        )
    })
    .await;
    let client = client(&config(ProviderKind::OpenAi, &server, &[KEY_ONE, KEY_TWO]));
    let error = ask(&client).await.expect_err("no key left");
    assert_eq!(error.kind(), "quota_exhausted");
    assert!(error.is_infrastructure());
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn anthropic_authentication_error_401_is_not_retried() {
    let server = MockServer::replay(vec![reply(
        401,
        anthropic_error("authentication_error", "invalid x-api-key"),
    )])
    .await;
    let client = client(&config(ProviderKind::Anthropic, &server, &[KEY_ONE]));
    let error = ask(&client).await.expect_err("bad key");
    assert_eq!(error.kind(), "authentication");
    assert!(error.to_string().contains("invalid x-api-key"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_refused_key_fails_over_to_the_next_one() {
    let server = MockServer::start(|_, seen| {
        if seen.header("x-api-key") == Some(KEY_ONE) {
            reply(
                401,
                anthropic_error("authentication_error", "invalid x-api-key"),
            )
        } else {
            reply(200, anthropic_success("ok"))
        }
    })
    .await;
    let client = client(&config(
        ProviderKind::Anthropic,
        &server,
        &[KEY_ONE, KEY_TWO],
    ));
    ask(&client).await.expect("the second key works");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn anthropic_invalid_request_error_400_is_not_retried() {
    let server = MockServer::replay(vec![reply(
        400,
        anthropic_error("invalid_request_error", "max_tokens: Field required"),
    )])
    .await;
    let client = client(&config(ProviderKind::Anthropic, &server, &[KEY_ONE]));
    let error = ask(&client).await.expect_err("bad request");
    assert_eq!(error.kind(), "bad_request");
    assert!(
        error.to_string().contains("max_tokens: Field required"),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_malformed_success_body_is_an_error_not_an_answer() {
    let server = MockServer::replay(vec![reply(
        200,
        "{\"id\": \"msg_1\", \"content\": [{\"type\": \"te",
    )])
    .await;
    let client = client(&config(ProviderKind::Anthropic, &server, &[KEY_ONE]));
    let error = ask(&client).await.expect_err("truncated body");
    assert_eq!(error.kind(), "malformed_response");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_and_is_retried() {
    let server = MockServer::start(|_, _| Reply::Hang).await;
    let mut config = config(ProviderKind::OpenAi, &server, &[]);
    config.retry.timeout = Duration::from_millis(300);
    config.retry.max_attempts = 2;
    let client = client(&config);
    let started = Instant::now();
    let error = ask(&client).await.expect_err("no answer");
    assert_eq!(error.kind(), "timeout", "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_reported() {
    // Bind and drop to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port();
    askdb::llm::install_tls_provider();
    let config = ProviderConfig {
        model: "local".into(),
        base_url: format!("http://127.0.0.1:{port}/v1"),
        retry: fast_retries(),
        ..ProviderConfig::for_kind(ProviderKind::OpenAi)
    };
    let error = ask(&client(&config)).await.expect_err("nobody there");
    assert_eq!(error.kind(), "gave_up");
    assert!(error.to_string().contains("3 attempt"), "{error}");
}

// ---------------------------------------------------------------------------------------
// OpenAI-compatible.

#[tokio::test]
async fn openai_sends_bearer_and_response_format_and_reads_the_reply() {
    let server =
        MockServer::replay(vec![reply(200, openai_success("{\"sql\": \"SELECT 1\"}"))]).await;
    let client = client(&config(ProviderKind::OpenAi, &server, &[KEY_ONE]));
    let schema =
        json!({"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]});
    let answer = client
        .call(
            &request().with_json_schema(schema.clone(), "Reply with JSON matching the JSON schema"),
            &CallLog::default(),
        )
        .await
        .expect("reply");
    assert_eq!(answer.json().expect("JSON"), json!({"sql": "SELECT 1"}));
    assert_eq!((answer.input_tokens, answer.output_tokens), (19, 10));
    assert_eq!(answer.model, "gpt-4.1-mini-2025-04-14");
    let seen = &server.requests()[0];
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(
        seen.header("authorization"),
        Some(format!("Bearer {KEY_ONE}").as_str())
    );
    assert_eq!(seen.body["response_format"]["type"], "json_schema");
    assert_eq!(
        seen.body["response_format"]["json_schema"]["schema"],
        schema
    );
    assert_eq!(
        seen.body["messages"][0]["role"], "system",
        "the stable prefix comes first"
    );
    assert_eq!(seen.body["max_tokens"], 300);
}

#[tokio::test]
async fn openai_compatible_local_servers_get_no_authorization_header() {
    let server = MockServer::replay(vec![reply(200, openai_success("ok"))]).await;
    let client = client(&config(ProviderKind::OpenAi, &server, &[]));
    let answer = ask(&client).await.expect("reply");
    assert_eq!(answer.cost_usd, 0.0, "a loopback server is not metered");
    assert!(server.requests()[0].header("authorization").is_none());
}

#[tokio::test]
async fn openai_per_minute_429_with_retry_after_ms_backs_off() {
    let server = MockServer::replay(vec![
        reply_with(
            429,
            &[("retry-after-ms", "200"), ("retry-after", "1")],
            openai_error("Rate limit reached for gpt-4.1-mini in organization org-abc on tokens per min (TPM): Limit 200000, Used 199000, Requested 1500. Please try again in 200ms.", "tokens", Some("rate_limit_exceeded")),
        ),
        reply(200, openai_success("ok")),
    ])
    .await;
    let client = client(&config(ProviderKind::OpenAi, &server, &[KEY_ONE, KEY_TWO]));
    let started = Instant::now();
    ask(&client).await.expect("second attempt");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(190) && waited < Duration::from_millis(900),
        "{waited:?}"
    );
    let requests = server.requests();
    assert!(requests
        .iter()
        .all(|seen| seen.header("authorization") == Some(format!("Bearer {KEY_ONE}").as_str())));
}

#[tokio::test]
async fn openai_requests_per_day_429_rotates_keys() {
    let server = MockServer::start(|_, seen| {
        if seen.header("authorization") == Some(format!("Bearer {KEY_ONE}").as_str()) {
            reply(
                429,
                openai_error("Rate limit reached for gpt-4.1-mini in organization org-abc on requests per day (RPD): Limit 10000, Used 10000, Requested 1.", "requests", Some("rate_limit_exceeded")),
            )
        } else {
            reply(200, openai_success("ok"))
        }
    })
    .await;
    let client = client(&config(ProviderKind::OpenAi, &server, &[KEY_ONE, KEY_TWO]));
    ask(&client).await.expect("the second key answers");
    let auth: Vec<_> = server
        .requests()
        .iter()
        .filter_map(|seen| seen.header("authorization").map(str::to_string))
        .collect();
    assert_eq!(
        auth,
        [format!("Bearer {KEY_ONE}"), format!("Bearer {KEY_TWO}")]
    );
}

#[tokio::test]
async fn openai_server_error_then_success_is_retried() {
    let server = MockServer::replay(vec![
        reply(
            500,
            openai_error(
                "The server had an error while processing your request. Sorry about that!",
                "server_error",
                None,
            ),
        ),
        reply(503, "<html><body>upstream connect error</body></html>"),
        reply(200, openai_success("ok")),
    ])
    .await;
    let client = client(&config(ProviderKind::OpenAi, &server, &[KEY_ONE]));
    assert_eq!(ask(&client).await.expect("third attempt").attempts, 3);
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn openai_invalid_request_is_not_retried_and_keeps_the_message() {
    let server = MockServer::replay(vec![reply(
        400,
        openai_error(
            "Invalid schema for response_format 'askdb_reply'.",
            "invalid_request_error",
            None,
        ),
    )])
    .await;
    let client = client(&config(ProviderKind::OpenAi, &server, &[KEY_ONE]));
    let error = ask(&client).await.expect_err("bad request");
    assert_eq!(error.kind(), "bad_request");
    assert!(error.to_string().contains("Invalid schema"), "{error}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn openai_malformed_json_is_an_error() {
    let server = MockServer::replay(vec![reply(200, "not json at all")]).await;
    let client = client(&config(ProviderKind::OpenAi, &server, &[KEY_ONE]));
    assert_eq!(
        ask(&client).await.expect_err("malformed").kind(),
        "malformed_response"
    );
}

// ---------------------------------------------------------------------------------------
// Ledger and cache.

#[tokio::test]
async fn the_spend_cap_refuses_a_call_before_it_reaches_the_server() {
    let server = MockServer::start(|_, _| reply(200, anthropic_success("ok"))).await;
    let mut config = config(ProviderKind::Anthropic, &server, &[KEY_ONE]);
    // One reply costs 2095 * $3/M + 503 * $15/M = $0.01383; the worst case of the next
    // call (300 output tokens) no longer fits under $0.015.
    config.spend_cap_usd = Some(0.015);
    let client = client(&config);
    let log = CallLog::default();
    client
        .call(&request(), &log)
        .await
        .expect("the first call fits");
    let error = client
        .call(&request(), &log)
        .await
        .expect_err("the cap is reached");
    assert_eq!(error.kind(), "spend_cap_reached");
    assert!(error.is_infrastructure());
    assert!(error.to_string().contains("cap"), "{error}");
    assert_eq!(
        server.requests().len(),
        1,
        "the refused call never left askdb"
    );
    let totals = log.totals();
    assert_eq!((totals.calls, totals.failed_calls), (2, 1));
}

#[tokio::test]
async fn the_cache_serves_an_identical_request_without_the_server() {
    let cache = tempfile::tempdir().expect("temp dir");
    let server = MockServer::start(|_, _| reply(200, anthropic_success("SELECT 1"))).await;
    let mut config = config(ProviderKind::Anthropic, &server, &[KEY_ONE]);
    config.cache_dir = Some(cache.path().to_path_buf());
    let first = ask(&client(&config)).await.expect("from the server");
    // A new client (a new run) over the same cache directory.
    let second = ask(&client(&config)).await.expect("from the cache");
    assert!(!first.from_cache && second.from_cache);
    assert_eq!(first.text, second.text);
    assert_eq!(second.cost_usd, 0.0);
    assert_eq!(server.requests().len(), 1);
    let changed = request().with_temperature(0.5);
    client(&config)
        .call(&changed, &CallLog::default())
        .await
        .expect("a different request");
    assert_eq!(server.requests().len(), 2);
}

// ---------------------------------------------------------------------------------------
// Keys stay secret.

#[tokio::test]
async fn the_key_is_never_printed() {
    // A hostile server echoes the key back in its error and in a success body.
    let server = MockServer::start(|index, seen| {
        let sent = seen.header("x-api-key").unwrap_or_default().to_string();
        match index {
            0 => reply(
                401,
                anthropic_error("authentication_error", &format!("invalid x-api-key {sent}")),
            ),
            1..=3 => reply(
                500,
                anthropic_error("api_error", &format!("crashed while handling {sent}")),
            ),
            _ => reply(200, format!("{{\"broken\": \"{sent}")),
        }
    })
    .await;
    let config = config(ProviderKind::Anthropic, &server, &[KEY_ONE, KEY_TWO]);
    let client = client(&config);
    let log = CallLog::default();
    // Key one refused (401), key two: three 500s, so the error carries the last message.
    let error = client
        .call(&request(), &log)
        .await
        .expect_err("401 then 500s");
    assert_eq!(error.kind(), "gave_up");
    let mut printed = vec![
        format!("{error}"),
        format!("{error:?}"),
        format!("{config:?}"),
        format!("{client:?}"),
        format!("{:?}", client.provider()),
        format!("{:?}", log.records()),
        serde_json::to_string(&log.records()).expect("records serialize"),
    ];
    let malformed = client
        .call(&request(), &log)
        .await
        .expect_err("malformed body with the key");
    printed.push(format!("{malformed} {malformed:?}"));
    for key in [&config.keys[0], &config.keys[1]] {
        printed.push(format!("{key} {key:?}"));
    }
    // The server did receive the keys: the test would prove nothing otherwise.
    let sent: Vec<_> = server
        .requests()
        .iter()
        .filter_map(|seen| seen.header("x-api-key").map(str::to_string))
        .collect();
    assert!(
        sent.contains(&KEY_ONE.to_string()) && sent.contains(&KEY_TWO.to_string()),
        "{sent:?}"
    );
    for text in &printed {
        for secret in [KEY_ONE, KEY_TWO] {
            assert!(!text.contains(secret), "a key leaked into: {text}");
            // Not even a recognisable piece of it.
            assert!(
                !text.contains(&secret[12..24]),
                "part of a key leaked into: {text}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// `askdb model check`, as a user runs it.

/// Runs `askdb model check` with only the given model variables set.
async fn model_check(vars: &[(&str, &str)], json: bool) -> std::process::Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_askdb"));
    command.args(["model", "check"]);
    if json {
        command.arg("--json");
    }
    for name in [
        "ASKDB_PROVIDER",
        "ASKDB_MODEL",
        "ASKDB_BASE_URL",
        "ASKDB_SCRIPT",
        "ASKDB_SPEND_CAP_USD",
        "ASKDB_SPEND_LEDGER",
        "ASKDB_CACHE_DIR",
        "ASKDB_PRICES",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_API_KEYS",
        "OPENAI_API_KEY",
        "OPENAI_API_KEYS",
    ] {
        command.env_remove(name);
    }
    command.envs(vars.iter().copied());
    command.output().await.expect("askdb runs")
}

#[tokio::test]
async fn model_check_reports_provider_model_latency_and_tokens_without_the_key() {
    let server = MockServer::start(|_, _| reply(200, anthropic_success("ok"))).await;
    let output = model_check(
        &[
            ("ASKDB_PROVIDER", "anthropic"),
            ("ASKDB_BASE_URL", &server.base),
            ("ANTHROPIC_API_KEYS", &format!("{KEY_ONE},{KEY_TWO}")),
            ("ASKDB_SPEND_CAP_USD", "1"),
        ],
        false,
    )
    .await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}{stderr}");
    for words in [
        "provider: anthropic",
        "model:    claude-sonnet-4-5",
        "2095 input + 503 output tokens",
        " ms,",
        "cap $1.00",
        "prices as of",
    ] {
        assert!(stdout.contains(words), "{words:?} missing from:\n{stdout}");
    }
    for secret in [KEY_ONE, KEY_TWO] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{stdout}{stderr}"
        );
    }
    let seen = &server.requests()[0];
    assert_eq!(seen.body["max_tokens"], 8, "the check is a tiny call");
}

#[tokio::test]
async fn model_check_with_a_script_prints_json() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("replies.jsonl");
    std::fs::write(&script, "{\"question\": \"*\", \"purpose\": \"check\", \"reply\": \"ok\", \"input_tokens\": 12, \"output_tokens\": 1}\n").expect("script");
    let script = script.to_string_lossy().to_string();
    let output = model_check(
        &[("ASKDB_PROVIDER", "scripted"), ("ASKDB_SCRIPT", &script)],
        true,
    )
    .await;
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["ok"], true);
    assert_eq!(report["provider"], "scripted");
    assert_eq!(report["reply"], "ok");
    assert_eq!(
        (
            report["input_tokens"].as_u64(),
            report["output_tokens"].as_u64()
        ),
        (Some(12), Some(1))
    );
    assert!(report["latency_ms"].is_u64());
}

#[tokio::test]
async fn model_check_without_a_provider_says_how_to_set_one() {
    let output = model_check(&[], false).await;
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("ASKDB_PROVIDER"), "{stderr}");
}

#[tokio::test]
async fn model_check_fails_with_exit_3_when_the_model_cannot_be_reached() {
    let server = MockServer::start(|_, _| {
        reply(
            401,
            anthropic_error("authentication_error", "invalid x-api-key"),
        )
    })
    .await;
    let output = model_check(
        &[
            ("ASKDB_PROVIDER", "anthropic"),
            ("ASKDB_BASE_URL", &server.base),
            ("ANTHROPIC_API_KEY", KEY_ONE),
        ],
        false,
    )
    .await;
    assert_eq!(output.status.code(), Some(3));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("call failed (authentication)"), "{stdout}");
    assert!(!stdout.contains(KEY_ONE));
}
