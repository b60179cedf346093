//! The OpenAI-compatible chat-completions client: `POST {base}/chat/completions`, with
//! `Authorization: Bearer <key>` when a key is configured (local servers need none).
//! One client for OpenAI, Groq, OpenRouter, Ollama, vLLM and llama.cpp's server.
//!
//! A JSON schema goes out as `response_format: {"type": "json_schema", ...}`: OpenAI
//! enforces it, llama.cpp turns it into a grammar. Messages keep the caller's order;
//! callers put the stable prefix (instructions, schema block) first, which is what lets
//! llama.cpp and OpenAI reuse their prompt caches across questions.
//!
//! Compatible backends differ in small ways (an integer `error.code`, `content` as a list
//! of parts, missing `usage`), so the response types are lenient and only the parts
//! askdb uses are read.

use reqwest::header::{HeaderMap, AUTHORIZATION};
use serde::Deserialize;
use serde_json::{json, Value};

use super::config::{is_loopback, ProviderConfig};
use super::keys::{ApiKey, KeyRing};
use super::resilience::{self, RetryPolicy};
use super::{BoxFuture, CallPermit, Completion, LlmError, ModelRequest, Provider, Role};

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_MODEL: &str = "gpt-4.1-mini";
const NAME: &str = "openai";

/// Talks to any OpenAI-compatible chat-completions endpoint.
#[derive(Debug)]
pub struct OpenAiProvider {
    model: String,
    base_url: String,
    url: String,
    keys: KeyRing,
    policy: RetryPolicy,
    metered: bool,
    /// OpenAI's own API wants `max_completion_tokens` (its newer models refuse
    /// `max_tokens`); compatible servers know `max_tokens`.
    use_max_completion_tokens: bool,
    /// Compatible servers (llama.cpp among them) continue a trailing assistant turn, so a
    /// prefill is sent as one; OpenAI's own API answers it with a new turn instead.
    continues_prefill: bool,
    /// Whether `{root}/tokenize` answered, once asked (llama.cpp's tokenizer).
    tokenizer: tokio::sync::OnceCell<bool>,
    client: reqwest::Client,
}

impl OpenAiProvider {
    pub fn new(config: &ProviderConfig) -> Result<OpenAiProvider, LlmError> {
        let base_url = config.base_url.trim_end_matches('/').to_string();
        let local = is_loopback(&base_url);
        if config.keys.is_empty() && base_url == DEFAULT_BASE_URL {
            return Err(LlmError::Config(
                "no OpenAI key: set OPENAI_API_KEY (or OPENAI_API_KEYS, comma-separated), or point ASKDB_BASE_URL at a local server".to_string(),
            ));
        }
        Ok(OpenAiProvider {
            model: config.model.clone(),
            url: format!("{base_url}/chat/completions"),
            use_max_completion_tokens: base_url.contains("://api.openai.com"),
            continues_prefill: !base_url.contains("://api.openai.com"),
            tokenizer: tokio::sync::OnceCell::new(),
            base_url,
            keys: KeyRing::new(config.keys.clone()),
            policy: config.retry.clone(),
            metered: config.metered.unwrap_or(!local),
            client: resilience::http_client(&config.retry)?,
        })
    }

    pub fn keys(&self) -> &KeyRing {
        &self.keys
    }

    /// The request body for `request`, as sent.
    pub fn request_body(&self, request: &ModelRequest) -> Value {
        let mut messages: Vec<Value> = request
            .messages
            .iter()
            .map(|message| {
                let role = match message.role {
                    Role::System => "system",
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                json!({"role": role, "content": message.content})
            })
            .collect();
        if let (Some(prefill), true) = (&request.prefill, self.continues_prefill) {
            messages.push(json!({"role": "assistant", "content": prefill}));
        }
        let mut body = json!({
            "model": self.model,
            "messages": messages,
            "temperature": super::anthropic::rounded(request.temperature),
        });
        if request.candidates > 1 {
            body["n"] = json!(request.candidates);
        }
        if request.logprobs {
            body["logprobs"] = json!(true);
        }
        // Only a llama.cpp server (it answered /tokenize) is told which slot to use.
        if let (Some(slot), Some(true)) = (request.cache_slot, self.tokenizer.get()) {
            body["id_slot"] = json!(slot);
        }
        if !request.stop.is_empty() {
            body["stop"] = json!(request.stop);
        }
        let limit_field = if self.use_max_completion_tokens {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[limit_field] = json!(request.max_tokens);
        // A reply begun for the model is continued without the schema's grammar, which
        // would have to start where the reply did.
        let begun = request.prefill.is_some() && self.continues_prefill;
        if let (Some(schema), false) = (&request.json_schema, begun) {
            body["response_format"] = json!({
                "type": "json_schema",
                "json_schema": {"name": "askdb_reply", "schema": schema, "strict": false},
            });
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
                    if let Some(key) = key {
                        let bearer = format!("Bearer {}", key.expose());
                        headers.insert(AUTHORIZATION, resilience::secret_header(&key, &bearer)?);
                    }
                    resilience::post_json(&self.client, &self.url, headers, body).await
                }
            })
            .await?;
        let prefill = request
            .prefill
            .as_deref()
            .filter(|_| self.continues_prefill)
            .unwrap_or("");
        resilience::read_success(NAME, &self.keys, &reply.body, |body| {
            parse_response(body, &self.model, attempts, prefill)
        })
    }

    /// `POST {root}/tokenize` with `{"content": text}`, llama.cpp's tokenizer endpoint
    /// (`root` is the base URL without `/v1`). Asked once per server: an endpoint that
    /// does not answer it is not asked again.
    async fn tokenize(&self, text: &str) -> Option<u64> {
        #[derive(Deserialize)]
        struct Tokens {
            tokens: Vec<Value>,
        }
        let root = self.base_url.trim_end_matches("/v1");
        let url = format!("{root}/tokenize");
        let ask = || async {
            let response = self
                .client
                .post(&url)
                .json(&json!({"content": text}))
                .timeout(std::time::Duration::from_secs(10))
                .send()
                .await
                .ok()?;
            if !response.status().is_success() {
                return None;
            }
            let tokens: Tokens = response.json().await.ok()?;
            Some(tokens.tokens.len() as u64)
        };
        let available = *self
            .tokenizer
            .get_or_init(|| async { ask().await.is_some() })
            .await;
        if available {
            ask().await
        } else {
            None
        }
    }
}

impl OpenAiProvider {
    /// `POST {root}/slots/{slot}?action=ACTION` with `{"filename": name}`: llama.cpp's
    /// save and restore of a slot's prompt cache, in the folder its `slot_save_path`
    /// names. Only asked of a server that answered /tokenize (llama.cpp); a server
    /// without a save path refuses, and the answer is false.
    async fn slot_action(&self, slot: u32, action: &str, name: &str) -> bool {
        if self.tokenize("askdb").await.is_none() {
            return false;
        }
        let root = self.base_url.trim_end_matches("/v1");
        let url = format!("{root}/slots/{slot}?action={action}");
        match self
            .client
            .post(&url)
            .json(&json!({"filename": name}))
            .timeout(std::time::Duration::from_secs(60))
            .send()
            .await
        {
            Ok(response) => response.status().is_success(),
            Err(_) => false,
        }
    }
}

#[derive(Debug, Deserialize)]
struct ChatResponse {
    choices: Vec<Choice>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
    /// llama.cpp's own clock for the request (absent from other servers).
    #[serde(default)]
    timings: Option<LlamaTimings>,
}

/// llama.cpp's `timings`: the prompt tokens it read past its cache and the tokens it
/// generated, with the milliseconds each took.
#[derive(Debug, Deserialize)]
struct LlamaTimings {
    #[serde(default)]
    prompt_n: Option<u64>,
    #[serde(default)]
    prompt_ms: Option<f64>,
    #[serde(default)]
    predicted_n: Option<u64>,
    #[serde(default)]
    predicted_ms: Option<f64>,
}

impl LlamaTimings {
    /// The clock of a call that came back with `replies` choices (llama.cpp times the
    /// first; the others were decoded beside it).
    fn server_timings(&self, replies: usize) -> Option<super::ServerTimings> {
        let finite = |ms: Option<f64>| ms.filter(|ms| ms.is_finite() && *ms >= 0.0);
        let generated_tokens = self.predicted_n?;
        let generation_ms = finite(self.predicted_ms)?;
        let one_reply = replies == 1;
        Some(super::ServerTimings {
            prompt_tokens_read: self.prompt_n?,
            prompt_ms: finite(self.prompt_ms)?,
            generated_tokens,
            generation_ms,
            one_reply_generated_tokens: if one_reply { generated_tokens } else { 0 },
            one_reply_generation_ms: if one_reply { generation_ms } else { 0.0 },
        })
    }
}

#[derive(Debug, Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<ChoiceMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    logprobs: Option<ChoiceLogprobs>,
}

/// `choices[].logprobs` of a request with `"logprobs": true`.
#[derive(Debug, Deserialize)]
struct ChoiceLogprobs {
    #[serde(default)]
    content: Option<Vec<TokenLogprob>>,
}

#[derive(Debug, Deserialize)]
struct TokenLogprob {
    logprob: f64,
}

fn choice_confidence(choice: &Choice) -> Option<super::Confidence> {
    let tokens = choice.logprobs.as_ref()?.content.as_ref()?;
    super::Confidence::from_logprobs(tokens.iter().map(|token| token.logprob))
}

#[derive(Debug, Deserialize)]
struct ChoiceMessage {
    /// A string from most servers; a list of `{"type": "text", "text": ...}` parts from
    /// some; null when the model refused or only called tools.
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Debug, Default, Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    }
}

fn choice_text(choice: &Choice, prefill: &str) -> Option<String> {
    let message = choice.message.as_ref()?;
    let mut text = message
        .content
        .as_ref()
        .map(content_text)
        .unwrap_or_default();
    if text.is_empty() {
        if let Some(refusal) = &message.refusal {
            text = refusal.clone();
        }
    }
    // A continued assistant turn comes back without the part written for the model.
    if !prefill.is_empty() && !text.starts_with(prefill) {
        text = format!("{prefill}{text}");
    }
    Some(text)
}

fn parse_response(
    body: &str,
    model: &str,
    attempts: u32,
    prefill: &str,
) -> Result<Completion, String> {
    let response: ChatResponse = serde_json::from_str(body).map_err(|error| error.to_string())?;
    let mut choices = response.choices.iter();
    let Some(choice) = choices.next() else {
        return Err("the reply has no choices".to_string());
    };
    let text = choice_text(choice, prefill).ok_or("the first choice has no message")?;
    let alternatives = choices
        .filter_map(|other| {
            Some(super::Alternative {
                text: choice_text(other, prefill)?,
                truncated: other.finish_reason.as_deref() == Some("length"),
                confidence: choice_confidence(other),
            })
        })
        .collect();
    let usage = response.usage.unwrap_or_default();
    let cache_read = usage
        .prompt_tokens_details
        .and_then(|details| details.cached_tokens)
        .unwrap_or(0);
    let (input_tokens, output_tokens, estimated) =
        match (usage.prompt_tokens, usage.completion_tokens) {
            (Some(input), Some(output)) => (input, output, false),
            _ => (0, super::estimate_tokens(&text), true),
        };
    Ok(Completion {
        truncated: choice.finish_reason.as_deref() == Some("length"),
        model: response.model.unwrap_or_else(|| model.to_string()),
        text,
        input_tokens,
        output_tokens,
        cache_read_tokens: cache_read,
        cache_write_tokens: 0,
        tokens_estimated: estimated,
        attempts,
        alternatives,
        confidence: choice_confidence(choice),
        server_timings: response
            .timings
            .as_ref()
            .and_then(|timings| timings.server_timings(response.choices.len())),
    })
}

impl Provider for OpenAiProvider {
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
        self.metered
    }

    fn count_tokens<'a>(&'a self, text: &'a str) -> BoxFuture<'a, Option<u64>> {
        Box::pin(self.tokenize(text))
    }

    fn restore_prefix<'a>(&'a self, slot: u32, name: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(self.slot_action(slot, "restore", name))
    }

    fn save_prefix<'a>(&'a self, slot: u32, name: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(self.slot_action(slot, "save", name))
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
    use crate::llm::{Message, ProviderKind, Purpose};

    fn provider(base_url: &str) -> OpenAiProvider {
        let config = ProviderConfig {
            base_url: base_url.to_string(),
            keys: vec![ApiKey::new("k").expect("key")],
            ..ProviderConfig::for_kind(ProviderKind::OpenAi)
        };
        OpenAiProvider::new(&config).expect("provider")
    }

    #[test]
    fn a_schema_becomes_response_format_and_the_order_is_kept() {
        let request = ModelRequest::new(
            Purpose::WriteSql,
            "q",
            vec![Message::stable_system("schema"), Message::user("q")],
        )
        .with_json_schema(
            json!({"type": "object"}),
            "Reply with JSON matching the JSON schema",
        )
        .with_temperature(0.7);
        let local = provider("http://127.0.0.1:8080/v1").request_body(&request);
        assert_eq!(local["response_format"]["type"], "json_schema");
        assert_eq!(
            local["response_format"]["json_schema"]["schema"],
            json!({"type": "object"})
        );
        assert_eq!(local["messages"][0]["role"], "system");
        assert_eq!(local["messages"][1]["role"], "user");
        assert_eq!(local["max_tokens"], 1024);
        assert_eq!(local["temperature"], 0.7);
        let hosted = provider(DEFAULT_BASE_URL).request_body(&request);
        assert_eq!(hosted["max_completion_tokens"], 1024);
        assert!(hosted.get("max_tokens").is_none());
    }

    #[test]
    fn a_begun_reply_is_continued_without_the_schemas_grammar_where_the_server_continues_it() {
        let request = ModelRequest::new(Purpose::WriteSql, "q", vec![Message::user("q")])
            .with_json_schema(json!({"type": "object"}), "Reply with JSON")
            .with_prefill("{\"sql\": \"");
        let local = provider("http://127.0.0.1:8080/v1").request_body(&request);
        assert!(local.get("response_format").is_none(), "{local}");
        assert_eq!(local["messages"][1]["content"], "{\"sql\": \"");
        // A server that answers a trailing assistant turn with a new one writes it all,
        // under the grammar.
        let hosted = provider(DEFAULT_BASE_URL).request_body(&request);
        assert_eq!(hosted["response_format"]["type"], "json_schema");
        assert_eq!(hosted["messages"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn lenient_parsing_accepts_what_compatible_servers_send() {
        let parts = r#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},"finish_reason":"length"}]}"#;
        let completion = parse_response(parts, "m", 1, "").expect("parses");
        assert_eq!(completion.text, "ab");
        assert!(completion.truncated);
        assert!(completion.tokens_estimated);
        assert_eq!(completion.model, "m");
        let llama = r#"{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"{\"sql\": \"SELECT 1\"}"}}],"created":1,"model":"qwen","object":"chat.completion","usage":{"completion_tokens":18,"prompt_tokens":44,"total_tokens":62,"prompt_tokens_details":{"cached_tokens":40}},"timings":{"prompt_n":44}}"#;
        let completion = parse_response(llama, "m", 2, "").expect("parses");
        assert_eq!(
            (completion.input_tokens, completion.output_tokens),
            (44, 18)
        );
        assert_eq!(completion.cache_read_tokens, 40);
        assert_eq!(completion.attempts, 2);
        // A partial clock (no generation figures) is no clock.
        assert_eq!(completion.server_timings, None);
        assert!(parse_response(r#"{"choices":[]}"#, "m", 1, "").is_err());
        assert!(parse_response("{\"choices\": [", "m", 1, "").is_err());
    }

    #[test]
    fn llama_cpps_own_clock_is_read_for_the_tokens_it_read_and_wrote() {
        let timed = r#"{"choices":[{"finish_reason":"stop","message":{"content":"SELECT 1"}}],"usage":{"completion_tokens":9,"prompt_tokens":900,"prompt_tokens_details":{"cached_tokens":880}},"timings":{"cache_n":880,"prompt_n":20,"prompt_ms":412.5,"prompt_per_token_ms":20.6,"predicted_n":9,"predicted_ms":693.0,"predicted_per_token_ms":77.0}}"#;
        let timings = parse_response(timed, "m", 1, "")
            .expect("parses")
            .server_timings
            .expect("llama.cpp's timings");
        assert_eq!(
            (timings.prompt_tokens_read, timings.generated_tokens),
            (20, 9)
        );
        assert_eq!(timings.ms_per_generated_token(), Some(77.0));
        assert_eq!(timings.ms_per_prompt_token(), Some(20.625));
        // Replies decoded side by side count in the server's time, not in its speed.
        let sampled = timed.replace(
            r#"[{"finish_reason":"stop","message":{"content":"SELECT 1"}}]"#,
            r#"[{"message":{"content":"SELECT 1"}},{"message":{"content":"SELECT 2"}}]"#,
        );
        let side_by_side = parse_response(&sampled, "m", 1, "")
            .expect("parses")
            .server_timings
            .expect("llama.cpp's timings");
        assert_eq!(side_by_side.generation_ms, 693.0);
        assert_eq!(side_by_side.ms_per_generated_token(), None);
        assert_eq!(timings.ms_per_side_by_side_step(), None);
        let both = timings.plus(side_by_side);
        assert_eq!(both.generated_tokens, 18);
        assert_eq!(both.ms_per_generated_token(), Some(77.0));
        assert_eq!(both.ms_per_side_by_side_step(), Some(77.0));
        // Alone, a sampled call's clock reads as one recorded before the split: no speed.
        assert_eq!(side_by_side.ms_per_side_by_side_step(), None);
        let broken = timed.replace("\"predicted_ms\":693.0", "\"predicted_ms\":-1");
        assert_eq!(
            parse_response(&broken, "m", 1, "")
                .expect("parses")
                .server_timings,
            None
        );
    }

    #[test]
    fn candidates_stops_and_a_prefill_are_sent_and_every_choice_comes_back() {
        let request = ModelRequest::new(Purpose::WriteSql, "q", vec![Message::user("q")])
            .with_candidates(3)
            .with_prefill("```sql\n")
            .with_stop(&["```"]);
        let local = provider("http://127.0.0.1:8080/v1").request_body(&request);
        assert_eq!(local["n"], 3);
        assert_eq!(local["stop"], json!(["```"]));
        assert_eq!(
            local["messages"][1],
            json!({"role": "assistant", "content": "```sql\n"})
        );
        // OpenAI's own API answers a trailing assistant turn with a new one: no prefill.
        let hosted = provider(DEFAULT_BASE_URL).request_body(&request);
        assert_eq!(hosted["messages"].as_array().map(Vec::len), Some(1));
        let body = r#"{"choices":[
            {"index":0,"finish_reason":"stop","message":{"content":"SELECT 1\n"}},
            {"index":1,"finish_reason":"length","message":{"content":"SELECT 2 +"}},
            {"index":2,"finish_reason":"stop","message":{"content":"SELECT 3"}}]}"#;
        let completion = parse_response(body, "m", 1, "```sql\n").expect("parses");
        assert_eq!(completion.text, "```sql\nSELECT 1\n");
        assert!(!completion.truncated);
        let alternatives: Vec<(&str, bool)> = completion
            .alternatives
            .iter()
            .map(|choice| (choice.text.as_str(), choice.truncated))
            .collect();
        assert_eq!(
            alternatives,
            vec![("```sql\nSELECT 2 +", true), ("```sql\nSELECT 3", false)]
        );
    }

    #[test]
    fn local_servers_need_no_key_and_cost_nothing() {
        let config = ProviderConfig {
            base_url: "http://127.0.0.1:8080/v1".to_string(),
            ..ProviderConfig::for_kind(ProviderKind::OpenAi)
        };
        let local = OpenAiProvider::new(&config).expect("no key needed");
        assert!(!local.is_metered());
        let hosted = ProviderConfig::for_kind(ProviderKind::OpenAi);
        assert!(
            OpenAiProvider::new(&hosted).is_err(),
            "OpenAI itself needs a key"
        );
    }
}
