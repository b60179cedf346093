//! The Anthropic Messages API client: `POST {base}/v1/messages` with `x-api-key` and
//! `anthropic-version: 2023-06-01`.
//!
//! System messages become the `system` array of text blocks; the last stable one (the
//! instructions and schema block that stay the same across questions) carries
//! `cache_control: {"type": "ephemeral"}`, so Anthropic caches the prompt up to it and
//! later questions pay the cache-read rate for it. A JSON schema is asked for in words,
//! in a block after the cached prefix (so the cache still matches); the reply is read
//! with the tolerant parser, which accepts fenced JSON.
//!
//! Response types are lenient: missing fields become defaults, unknown ones are ignored.

use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::{json, Value};

use super::config::ProviderConfig;
use super::keys::{ApiKey, KeyRing};
use super::resilience::{self, RetryPolicy};
use super::{BoxFuture, CallPermit, Completion, LlmError, ModelRequest, Provider, Role};

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
pub const API_VERSION: &str = "2023-06-01";
const NAME: &str = "anthropic";

/// Talks to the Anthropic Messages API (or anything that speaks it).
#[derive(Debug)]
pub struct AnthropicProvider {
    model: String,
    base_url: String,
    url: String,
    keys: KeyRing,
    policy: RetryPolicy,
    client: reqwest::Client,
}

impl AnthropicProvider {
    pub fn new(config: &ProviderConfig) -> Result<AnthropicProvider, LlmError> {
        if config.keys.is_empty() && !super::config::is_loopback(&config.base_url) {
            return Err(LlmError::Config(
                "no Anthropic key: set ANTHROPIC_API_KEY (or ANTHROPIC_API_KEYS, comma-separated)"
                    .to_string(),
            ));
        }
        let base_url = config.base_url.trim_end_matches('/').to_string();
        Ok(AnthropicProvider {
            model: config.model.clone(),
            url: format!("{base_url}/v1/messages"),
            base_url,
            keys: KeyRing::new(config.keys.clone()),
            policy: config.retry.clone(),
            client: resilience::http_client(&config.retry)?,
        })
    }

    pub fn keys(&self) -> &KeyRing {
        &self.keys
    }

    /// The request body for `request`, as sent.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let last_stable_system = request
            .messages
            .iter()
            .rposition(|message| message.role == Role::System && message.stable);
        let last_stable_turn = request
            .messages
            .iter()
            .rposition(|message| message.role != Role::System && message.stable);
        let mut system: Vec<Value> = Vec::new();
        let mut turns: Vec<Value> = Vec::new();
        for (index, message) in request.messages.iter().enumerate() {
            let mut block = json!({"type": "text", "text": message.content});
            let breakpoint = Some(index) == last_stable_system || Some(index) == last_stable_turn;
            if breakpoint {
                block["cache_control"] = json!({"type": "ephemeral"});
            }
            match message.role {
                Role::System => system.push(block),
                Role::User => turns.push(json!({"role": "user", "content": [block]})),
                Role::Assistant => turns.push(json!({"role": "assistant", "content": [block]})),
            }
        }
        if let Some(instruction) = &request.json_instruction {
            system.push(json!({"type": "text", "text": instruction}));
        }
        // The Messages API continues a final assistant turn: the prefill. (It has no `n`;
        // a request for several candidates gets one.)
        if let Some(prefill) = &request.prefill {
            turns.push(json!({"role": "assistant", "content": [{"type": "text", "text": prefill.trim_end()}]}));
        }
        let mut body = json!({
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": rounded(request.temperature),
            "messages": turns,
        });
        if !system.is_empty() {
            body["system"] = Value::Array(system);
        }
        if !request.stop.is_empty() {
            body["stop_sequences"] = json!(request.stop);
        }
        body
    }

    async fn complete_inner(&self, request: &ModelRequest) -> Result<Completion, LlmError> {
        let body = self.request_body(request);
        let (reply, attempts) =
            resilience::send_with_retries(NAME, &self.policy, &self.keys, |key: Option<ApiKey>| {
                let body = &body;
                async move {
                    let mut headers = HeaderMap::new();
                    headers.insert("anthropic-version", HeaderValue::from_static(API_VERSION));
                    if let Some(key) = key {
                        headers.insert("x-api-key", resilience::secret_header(&key, key.expose())?);
                    }
                    resilience::post_json(&self.client, &self.url, headers, body).await
                }
            })
            .await?;
        // Anthropic refuses a prefill that ends in white space, so it is sent trimmed and
        // the reply continues from the trimmed text.
        let prefill = request.prefill.as_deref().map(str::trim_end).unwrap_or("");
        resilience::read_success(NAME, &self.keys, &reply.body, |body| {
            parse_response(body, &self.model, attempts).map(|mut completion| {
                if !prefill.is_empty() && !completion.text.starts_with(prefill) {
                    completion.text = format!("{prefill}{}", completion.text);
                }
                completion
            })
        })
    }
}

/// f32 temperatures print as 0.699999988; two decimals are what was meant.
pub(crate) fn rounded(temperature: f32) -> f64 {
    (f64::from(temperature) * 100.0).round() / 100.0
}

#[derive(Debug, Deserialize)]
struct MessagesResponse {
    content: Vec<ContentBlock>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
struct ContentBlock {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

/// Reads a Messages API success body. Anthropic's `input_tokens` leaves out the cached
/// ones; the completion counts all prompt tokens and the cached ones apart.
fn parse_response(body: &str, model: &str, attempts: u32) -> Result<Completion, String> {
    let response: MessagesResponse =
        serde_json::from_str(body).map_err(|error| error.to_string())?;
    let text: String = response
        .content
        .iter()
        .filter(|block| block.kind == "text")
        .filter_map(|block| block.text.as_deref())
        .collect();
    let usage = response.usage.unwrap_or_default();
    let cache_read = usage.cache_read_input_tokens.unwrap_or(0);
    let cache_write = usage.cache_creation_input_tokens.unwrap_or(0);
    let (input_tokens, output_tokens, estimated) = match (usage.input_tokens, usage.output_tokens) {
        (Some(input), Some(output)) => (input + cache_read + cache_write, output, false),
        _ => (0, super::estimate_tokens(&text), true),
    };
    Ok(Completion {
        truncated: response.stop_reason.as_deref() == Some("max_tokens"),
        model: response.model.unwrap_or_else(|| model.to_string()),
        text,
        input_tokens,
        output_tokens,
        cache_read_tokens: cache_read,
        cache_write_tokens: cache_write,
        tokens_estimated: estimated,
        attempts,
        alternatives: Vec::new(),
        confidence: None,
        server_timings: None,
    })
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        NAME
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn endpoint(&self) -> &str {
        &self.base_url
    }

    fn is_metered(&self) -> bool {
        true
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
        _permit: CallPermit,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(self.complete_inner(request))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Message, Purpose};

    fn provider() -> AnthropicProvider {
        let config = ProviderConfig {
            base_url: "http://127.0.0.1:9".to_string(),
            ..ProviderConfig::for_kind(crate::llm::ProviderKind::Anthropic)
        };
        AnthropicProvider::new(&config).expect("provider")
    }

    #[test]
    fn the_stable_system_block_carries_cache_control_and_the_schema_comes_after_it() {
        let request = ModelRequest::new(
            Purpose::WriteSql,
            "q",
            vec![
                Message::stable_system("instructions and schema"),
                Message::system("today's notes"),
                Message::user("q"),
            ],
        )
        .with_json_schema(
            json!({"type": "object"}),
            "Reply with JSON matching the JSON schema",
        );
        let body = provider().request_body(&request);
        let system = body["system"].as_array().expect("system blocks");
        assert_eq!(system.len(), 3);
        assert_eq!(system[0]["cache_control"], json!({"type": "ephemeral"}));
        assert!(system[1].get("cache_control").is_none());
        assert!(system[2]["text"]
            .as_str()
            .unwrap_or("")
            .contains("JSON schema"));
        assert_eq!(body["messages"][0]["role"], "user");
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(body["temperature"], 0.0);
    }

    #[test]
    fn usage_counts_cached_prompt_tokens_in_the_input() {
        let body = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
            "content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn",
            "usage":{"input_tokens":10,"cache_creation_input_tokens":200,"cache_read_input_tokens":1000,"output_tokens":5}}"#;
        let completion = parse_response(body, "m", 1).expect("parses");
        assert_eq!(completion.text, "hello");
        assert_eq!(completion.input_tokens, 1210);
        assert_eq!(completion.cache_read_tokens, 1000);
        assert_eq!(completion.cache_write_tokens, 200);
        assert_eq!(completion.model, "claude-sonnet-4-5-20250929");
        assert!(!completion.truncated);
    }
}
