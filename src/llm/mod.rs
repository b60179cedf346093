//! The language-model seam: the [`Provider`] trait, its three implementations
//! ([`anthropic`], [`openai`] for every OpenAI-compatible server, [`scripted`] for tests
//! and replays), and [`ModelClient::call`], the one function through which every model
//! call in askdb passes.
//!
//! `ModelClient::call` is where the figures of a call are taken, so no call site can skip
//! them: it consults the optional on-disk [`cache`], reserves the call's worst-case cost
//! in the [`ledger`] (which refuses once the dollar cap would be crossed), calls the
//! provider, measures latency, prices the tokens ([`prices`]) and records everything in
//! the caller's [`CallLog`] and in the ledger. Providers cannot be called around it: the
//! trait's method takes a [`CallPermit`], which only this module can make.
//!
//! Configuration comes from the environment ([`ProviderConfig::from_env`]); keys are held
//! as [`ApiKey`], whose Debug and Display never show the secret. Every [`LlmError`] is an
//! infrastructure failure (the model could not be asked), never a wrong answer.
//!
//! How the agent calls a model:
//!
//! ```no_run
//! # async fn example() -> Result<(), askdb::llm::LlmError> {
//! use askdb::llm::{CallLog, Message, ModelClient, ModelRequest, ProviderConfig, Purpose};
//! let client = ModelClient::from_config(&ProviderConfig::from_env()?)?;
//! let log = CallLog::default(); // one per question
//! let request = ModelRequest::new(
//!     Purpose::WriteSql,
//!     "How many bills are there?",
//!     vec![
//!         Message::stable_system("You write one SQLite SELECT. Schema: ..."),
//!         Message::user("How many bills are there?"),
//!     ],
//! )
//! .with_json_schema(
//!     serde_json::json!({"type": "object", "properties": {"sql": {"type": "string"}}}),
//!     "Reply with one JSON object with the field sql.",
//! );
//! let reply = client.call(&request, &log).await?;
//! let value = reply.json()?; // tolerant of markdown fences
//! # let _ = value; Ok(()) }
//! ```

pub mod anthropic;
pub mod cache;
pub mod config;
pub mod json;
pub mod keys;
pub mod ledger;
pub mod openai;
pub mod prices;
pub mod resilience;
pub mod scripted;
pub mod timings;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use cache::ResponseCache;
pub use config::{build_provider, ProviderConfig, ProviderKind};
pub use json::{parse_json_reply, JsonReplyError};
pub use keys::{ApiKey, KeyRing};
pub use ledger::{LedgerEntry, SharedSpend, SpendLedger, SpendTotals};
pub use prices::{ModelPrice, PriceTable};
pub use resilience::RetryPolicy;
pub use timings::ServerTimings;

/// Why askdb is asking the model: recorded with every call, used by the scripted
/// provider to pick a reply and by the metrics to split spend by step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Purpose {
    WriteSql,
    RepairSql,
    WriteAnswer,
    Clarify,
    /// A tiny call that proves the provider answers (`askdb model check`).
    Check,
    /// Which column holds a concept the model named under a name no table has.
    FindColumn,
}

impl Purpose {
    pub const ALL: [Purpose; 6] = [
        Purpose::WriteSql,
        Purpose::RepairSql,
        Purpose::WriteAnswer,
        Purpose::Clarify,
        Purpose::Check,
        Purpose::FindColumn,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::WriteSql => "write_sql",
            Purpose::RepairSql => "repair_sql",
            Purpose::WriteAnswer => "write_answer",
            Purpose::Clarify => "clarify",
            Purpose::Check => "check",
            Purpose::FindColumn => "find_column",
        }
    }

    pub fn parse(text: &str) -> Option<Purpose> {
        Purpose::ALL
            .into_iter()
            .find(|purpose| purpose.as_str() == text.trim())
    }
}

impl fmt::Display for Purpose {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
    /// The message is part of the stable prompt prefix (instructions, the schema block)
    /// that stays the same across questions: Anthropic gets a cache_control breakpoint
    /// after it; OpenAI-compatible servers (llama.cpp included) reuse their cache for
    /// it as long as it comes first, which is why stable messages should lead.
    #[serde(default)]
    pub stable: bool,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Message {
        Message {
            role: Role::System,
            content: content.into(),
            stable: false,
        }
    }

    /// A system message that stays the same across questions (instructions, the schema
    /// block), marked for the provider's prompt cache.
    pub fn stable_system(content: impl Into<String>) -> Message {
        Message {
            stable: true,
            ..Message::system(content)
        }
    }

    pub fn user(content: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: content.into(),
            stable: false,
        }
    }

    pub fn assistant(content: impl Into<String>) -> Message {
        Message {
            role: Role::Assistant,
            content: content.into(),
            stable: false,
        }
    }
}

/// Everything a model call needs. The whole request (question included) keys the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    pub purpose: Purpose,
    /// The user's question this call serves. Not sent by itself (the messages carry what
    /// the model sees); the scripted provider picks replies by it and logs show it.
    pub question: String,
    pub messages: Vec<Message>,
    pub temperature: f32,
    pub max_tokens: u32,
    /// A JSON schema the reply must follow: sent as response_format json_schema to
    /// OpenAI-compatible servers; Anthropic, which has no such parameter, is sent
    /// `json_instruction` instead. Parse the reply with [`ModelReply::json`] either way.
    pub json_schema: Option<serde_json::Value>,
    /// The words asking for the schema's JSON, for a provider with no schema parameter
    /// (written by `agent::prompts`, like every word the model reads). Not serialized:
    /// they follow from the schema, so the response cache's key stays what it was.
    #[serde(skip)]
    pub json_instruction: Option<String>,
    /// How many replies to sample from the one prompt (`n`): servers that decode them in
    /// parallel (llama.cpp slots, OpenAI) read the prompt once. A provider that cannot
    /// returns fewer; the first is always [`Completion::text`].
    #[serde(default = "one")]
    pub candidates: u32,
    /// The start of the reply, written for the model (`\u{60}\u{60}\u{60}sql\n`): providers
    /// that continue an assistant turn send it as one and the reply text begins with it;
    /// others ignore it.
    #[serde(default)]
    pub prefill: Option<String>,
    /// Texts that end the reply where they appear (not included in it).
    #[serde(default)]
    pub stop: Vec<String>,
    /// Ask for the log-probability of each generated token, from which each reply's
    /// [`Confidence`] is computed (servers without them leave it None). Left out of the
    /// serialized request when false, so response-cache keys of requests without it stay
    /// what they were.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub logprobs: bool,
    /// Where a server with several prompt caches should keep this prompt (llama.cpp's
    /// slot id), so that it can be saved afterwards ([`ModelClient::warm_prefix`]).
    /// Ignored by servers without slots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_slot: Option<u32>,
}

impl ModelRequest {
    /// A request at temperature 0 with 1024 output tokens at most.
    pub fn new(purpose: Purpose, question: impl Into<String>, messages: Vec<Message>) -> Self {
        ModelRequest {
            purpose,
            question: question.into(),
            messages,
            temperature: 0.0,
            max_tokens: 1024,
            json_schema: None,
            json_instruction: None,
            candidates: 1,
            prefill: None,
            stop: Vec::new(),
            logprobs: false,
            cache_slot: None,
        }
    }

    /// Asks for each reply's [`Confidence`].
    pub fn with_logprobs(mut self) -> Self {
        self.logprobs = true;
        self
    }

    /// Asks for `n` sampled replies (at least one).
    pub fn with_candidates(mut self, n: u32) -> Self {
        self.candidates = n.max(1);
        self
    }

    /// Writes the start of the reply for the model.
    pub fn with_prefill(mut self, prefill: impl Into<String>) -> Self {
        self.prefill = Some(prefill.into());
        self
    }

    pub fn with_stop(mut self, stop: &[&str]) -> Self {
        self.stop = stop.iter().map(|text| text.to_string()).collect();
        self
    }

    /// The reply must follow `schema`; `instruction` says so in words, for a provider
    /// that cannot be given the schema as a parameter.
    pub fn with_json_schema(
        mut self,
        schema: serde_json::Value,
        instruction: impl Into<String>,
    ) -> Self {
        self.json_schema = Some(schema);
        self.json_instruction = Some(instruction.into());
        self
    }

    pub fn with_temperature(mut self, temperature: f32) -> Self {
        self.temperature = temperature;
        self
    }

    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = max_tokens;
        self
    }

    /// Characters across all messages: the base of the cost estimate made before a call.
    pub fn prompt_chars(&self) -> usize {
        self.messages
            .iter()
            .map(|message| message.content.len())
            .sum::<usize>()
            + self
                .json_schema
                .as_ref()
                .map(|schema| schema.to_string().len())
                .unwrap_or(0)
    }
}

/// What a provider returns: the text and the token counts the provider reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub text: String,
    /// Prompt tokens in total, cached ones included.
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's prompt cache (billed cheaper).
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's prompt cache (Anthropic bills them dearer).
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// The server reported no usage; the counts are estimates from the text lengths.
    #[serde(default)]
    pub tokens_estimated: bool,
    /// The reply stopped at the token limit.
    #[serde(default)]
    pub truncated: bool,
    /// The model the server says answered.
    pub model: String,
    /// HTTP attempts it took (1 when the first succeeded).
    #[serde(default = "one")]
    pub attempts: u32,
    /// The other sampled replies when more than one was asked for, in the server's order.
    #[serde(default)]
    pub alternatives: Vec<Alternative>,
    /// How sure the model was of the first reply, when logprobs were asked for and given.
    #[serde(default)]
    pub confidence: Option<Confidence>,
    /// The server's own clock for the call, where it reports one (llama.cpp does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimings>,
}

/// One more sampled reply of a request for several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    pub text: String,
    /// This reply stopped at the token limit.
    pub truncated: bool,
    #[serde(default)]
    pub confidence: Option<Confidence>,
}

/// How sure a model was of the reply it wrote, from the log-probabilities of the tokens
/// it generated (natural log; 0 is certain).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Confidence {
    /// The mean log-probability per token.
    pub mean_logprob: f32,
    /// The least likely token's log-probability: one forced choice among close
    /// alternatives (a column, a table, a join) shows here.
    pub min_logprob: f32,
    /// Tokens counted.
    pub tokens: u32,
}

impl Confidence {
    /// The confidence of a reply from its tokens' log-probabilities; None for no tokens.
    pub fn from_logprobs(logprobs: impl IntoIterator<Item = f64>) -> Option<Confidence> {
        let mut sum = 0.0_f64;
        let mut min = 0.0_f64;
        let mut tokens = 0_u32;
        for logprob in logprobs.into_iter().filter(|value| value.is_finite()) {
            sum += logprob;
            min = min.min(logprob);
            tokens = tokens.saturating_add(1);
        }
        (tokens > 0).then(|| Confidence {
            mean_logprob: (sum / f64::from(tokens)) as f32,
            min_logprob: min as f32,
            tokens,
        })
    }
}

fn one() -> u32 {
    1
}

/// What [`ModelClient::call`] returns: the completion with the figures measured around it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelReply {
    pub text: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub tokens_estimated: bool,
    pub truncated: bool,
    pub model: String,
    pub attempts: u32,
    /// The other sampled replies (see [`ModelRequest::candidates`]).
    pub alternatives: Vec<Alternative>,
    /// How sure the model was of `text` (see [`ModelRequest::logprobs`]).
    #[serde(default)]
    pub confidence: Option<Confidence>,
    /// Wall time of the call, retries and backoff included (near zero from the cache).
    pub latency: Duration,
    /// Dollars, from the price table; zero for a cached reply or an unmetered provider.
    pub cost_usd: f64,
    pub from_cache: bool,
    /// The server's clock for the call (None from the response cache or a server that
    /// does not report it).
    #[serde(default)]
    pub server_timings: Option<ServerTimings>,
}

impl ModelReply {
    /// The reply as JSON, tolerating markdown fences and prose around the object.
    pub fn json(&self) -> Result<serde_json::Value, JsonReplyError> {
        parse_json_reply(&self.text)
    }

    /// The reply deserialized into `T`, tolerating markdown fences.
    pub fn json_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, JsonReplyError> {
        json::parse_json_reply_as(&self.text)
    }
}

/// Why a model could not be asked. Every variant is an infrastructure failure: the
/// evaluation counts it apart from wrong answers. No variant ever holds a key.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    #[error(
        "no model provider is configured: set ASKDB_PROVIDER to anthropic, openai or scripted"
    )]
    NotConfigured,
    #[error("model configuration: {0}")]
    Config(String),
    #[error("spend cap reached: ${spent_usd:.4} spent (plus ${reserved_usd:.4} reserved by calls in flight) of a ${cap_usd:.2} cap; this call could cost up to ${estimate_usd:.4}, so it was not made")]
    SpendCapReached {
        cap_usd: f64,
        spent_usd: f64,
        reserved_usd: f64,
        estimate_usd: f64,
    },
    #[error("{provider}: every key has used up its daily quota ({keys} key(s)): {message}")]
    QuotaExhausted {
        provider: String,
        keys: usize,
        message: String,
    },
    #[error("{provider}: rejected the key (HTTP {status}): {message}")]
    Authentication {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("{provider}: rejected the request (HTTP {status}): {message}")]
    BadRequest {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("{provider}: gave up after {attempts} attempt(s); last: {last}")]
    GaveUp {
        provider: String,
        attempts: u32,
        last: String,
        /// The last failure was a timeout.
        timed_out: bool,
    },
    #[error("{provider}: the reply is not what the API documents: {message}")]
    MalformedResponse { provider: String, message: String },
    #[error("scripted provider: {0}")]
    Script(String),
    #[error("scripted provider: no reply left for question {question:?} and purpose {purpose} (each scripted reply is used once, in file order)")]
    ScriptExhausted { question: String, purpose: Purpose },
    #[error("scripted provider: simulated {kind} failure: {message}")]
    Simulated { kind: String, message: String },
    #[error("response cache: {0}")]
    Cache(String),
    #[error("spend ledger: {0}")]
    Ledger(String),
    #[error(transparent)]
    Json(#[from] JsonReplyError),
}

impl LlmError {
    /// A stable snake_case name for metrics and JSON output.
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::NotConfigured => "not_configured",
            LlmError::Config(_) => "config",
            LlmError::SpendCapReached { .. } => "spend_cap_reached",
            LlmError::QuotaExhausted { .. } => "quota_exhausted",
            LlmError::Authentication { .. } => "authentication",
            LlmError::BadRequest { .. } => "bad_request",
            LlmError::GaveUp {
                timed_out: true, ..
            } => "timeout",
            LlmError::GaveUp { .. } => "gave_up",
            LlmError::MalformedResponse { .. } => "malformed_response",
            LlmError::Script(_) => "script",
            LlmError::ScriptExhausted { .. } => "script_exhausted",
            LlmError::Simulated { .. } => "simulated",
            LlmError::Cache(_) => "cache",
            LlmError::Ledger(_) => "ledger",
            LlmError::Json(_) => "unparseable_reply",
        }
    }

    /// True for every failure to reach or pay for the model, which is all of them except
    /// a reply that is not JSON: that one is the model's fault and may count against it.
    pub fn is_infrastructure(&self) -> bool {
        !matches!(self, LlmError::Json(_))
    }
}

/// A boxed future: keeps [`Provider`] object-safe without an extra crate.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Proof that a provider is being called through [`ModelClient::call`]. Only this
/// module can make one, so code elsewhere cannot call a provider around the recording.
#[derive(Debug)]
pub struct CallPermit(());

impl CallPermit {
    /// For the provider tests inside this module.
    #[cfg(test)]
    pub(crate) fn for_tests() -> CallPermit {
        CallPermit(())
    }
}

/// A language model that answers [`ModelRequest`]s.
pub trait Provider: Send + Sync + fmt::Debug {
    /// `anthropic`, `openai` or `scripted`: keys the price table.
    fn name(&self) -> &str;
    /// The configured model name.
    fn model(&self) -> &str;
    /// Where requests go (empty for the scripted provider): part of the cache key.
    fn endpoint(&self) -> &str;
    /// Whether calls cost money. Local servers (loopback) and scripts do not.
    fn is_metered(&self) -> bool;
    /// The prompt's real token count from the server's own tokenizer (llama.cpp's
    /// `/tokenize`), or None where the endpoint offers none. Not a model call: nothing
    /// is generated or billed.
    fn count_tokens<'a>(&'a self, _text: &'a str) -> BoxFuture<'a, Option<u64>> {
        Box::pin(async { None })
    }
    /// Restores a prompt prefix the server saved earlier under `name` into its cache
    /// slot `slot` (llama.cpp's slot restore); false where there is no such copy or the
    /// endpoint keeps none. Not a model call.
    fn restore_prefix<'a>(&'a self, _slot: u32, _name: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }
    /// Saves what cache slot `slot` holds under `name`, for [`Provider::restore_prefix`]
    /// after a restart; false where the endpoint keeps no copies.
    fn save_prefix<'a>(&'a self, _slot: u32, _name: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async { false })
    }
    /// Asks the model. Callable only by [`ModelClient::call`].
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
        permit: CallPermit,
    ) -> BoxFuture<'a, Result<Completion, LlmError>>;
}

/// The prompt cache slot warm-ups read into and save from: the slot a server with one
/// database's prefix keeps it in.
pub const WARM_SLOT: u32 = 0;

/// What every log line about how a warm-up ended begins with (after the program's own
/// prefix), so a script or the evaluation's serve path can wait for it.
pub const WARM_UP_LOG_PREFIX: &str = "warm-up: ";

/// What [`ModelClient::warm_prefix`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Warmed {
    /// Restored from the server's saved copy: nothing was read again.
    Restored,
    /// Read by one call; `saved` when the server kept a copy for the next start.
    Read { saved: bool },
}

/// The name a prefix's saved copy goes by: the model and the whole request, hashed, so
/// a copy is only ever restored for the very prompt it was made from.
pub fn prefix_copy_name(model: &str, request: &ModelRequest) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    hasher.update(model.as_bytes());
    hasher.update([0]);
    for message in &request.messages {
        hasher.update(format!("{:?}", message.role).as_bytes());
        hasher.update([0]);
        hasher.update(message.content.as_bytes());
        hasher.update([0]);
    }
    if let Some(prefill) = &request.prefill {
        hasher.update(prefill.as_bytes());
    }
    let digest: String = hasher
        .finalize()
        .iter()
        .take(16)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("askdb-prefix-{digest}.bin")
}

/// One model call as recorded: what was asked for, what came back, what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    pub purpose: Purpose,
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    pub latency_ms: u64,
    pub cost_usd: f64,
    pub attempts: u32,
    pub from_cache: bool,
    /// The failure's kind (see [`LlmError::kind`]) when the call failed.
    pub error_kind: Option<String>,
    pub error: Option<String>,
    /// The server's clock for the call, where it reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimings>,
}

/// The sums over a [`CallLog`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageTotals {
    pub calls: usize,
    pub failed_calls: usize,
    pub cached_calls: usize,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub latency_ms: u64,
    pub cost_usd: f64,
}

/// The model calls made for one question (or any unit of work the caller chooses).
/// Cheap to clone; clones share the records.
#[derive(Debug, Clone, Default)]
pub struct CallLog {
    records: Arc<Mutex<Vec<CallRecord>>>,
}

impl CallLog {
    fn lock(&self) -> MutexGuard<'_, Vec<CallRecord>> {
        // A panic elsewhere while holding the lock leaves the records intact: keep them.
        self.records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn push(&self, record: CallRecord) {
        self.lock().push(record);
    }

    pub fn records(&self) -> Vec<CallRecord> {
        self.lock().clone()
    }

    pub fn totals(&self) -> UsageTotals {
        let records = self.lock();
        let mut totals = UsageTotals::default();
        for record in records.iter() {
            totals.calls += 1;
            totals.failed_calls += usize::from(record.error_kind.is_some());
            totals.cached_calls += usize::from(record.from_cache);
            totals.input_tokens += record.input_tokens;
            totals.output_tokens += record.output_tokens;
            totals.latency_ms += record.latency_ms;
            totals.cost_usd += record.cost_usd;
        }
        totals
    }
}

/// A provider with its price, ledger and cache: the only way askdb calls a model.
/// Cheap to clone; clones share the ledger.
#[derive(Debug, Clone)]
pub struct ModelClient {
    provider: Arc<dyn Provider>,
    price: Option<ModelPrice>,
    prices_as_of: String,
    ledger: Arc<SpendLedger>,
    cache: Option<Arc<ResponseCache>>,
}

impl ModelClient {
    /// A client over `provider`. A metered provider whose model has no price cannot be
    /// held to a spend cap, so that combination is refused here rather than at the
    /// first call.
    pub fn new(
        provider: Arc<dyn Provider>,
        prices: &PriceTable,
        ledger: Arc<SpendLedger>,
        cache: Option<Arc<ResponseCache>>,
    ) -> Result<ModelClient, LlmError> {
        let price = if provider.is_metered() {
            prices.find(provider.name(), provider.model()).cloned()
        } else {
            Some(ModelPrice::free(provider.name(), provider.model()))
        };
        if price.is_none() {
            if let Some(cap) = ledger.cap_usd() {
                return Err(LlmError::Config(format!(
                    "no price for {} model {:?} (prices as of {}), so the ${cap:.2} spend cap cannot be enforced; add the model to a prices file (ASKDB_PRICES) or unset ASKDB_SPEND_CAP_USD",
                    provider.name(),
                    provider.model(),
                    prices.prices_as_of
                )));
            }
        }
        Ok(ModelClient {
            provider,
            price,
            prices_as_of: prices.prices_as_of.clone(),
            ledger,
            cache,
        })
    }

    /// Builds the provider, prices, ledger and cache that `config` describes.
    pub fn from_config(config: &ProviderConfig) -> Result<ModelClient, LlmError> {
        let provider = build_provider(config)?;
        let prices = match &config.prices_file {
            Some(path) => PriceTable::load(path)?,
            None => PriceTable::built_in()?,
        };
        let ledger = match &config.ledger_file {
            Some(path) => SpendLedger::open(path, config.spend_cap_usd)?,
            None => SpendLedger::in_memory(config.spend_cap_usd),
        };
        let cache = match &config.cache_dir {
            Some(dir) => Some(Arc::new(ResponseCache::open(dir)?)),
            None => None,
        };
        ModelClient::new(provider, &prices, Arc::new(ledger), cache)
    }

    /// Whether replies are cached on disk.
    pub fn has_cache(&self) -> bool {
        self.cache.is_some()
    }

    /// The same client with replies cached in `cache`.
    pub fn with_cache(mut self, cache: ResponseCache) -> ModelClient {
        self.cache = Some(Arc::new(cache));
        self
    }

    pub fn provider(&self) -> &dyn Provider {
        self.provider.as_ref()
    }

    pub fn ledger(&self) -> &SpendLedger {
        &self.ledger
    }

    /// The same client booking its calls in `ledger` (the replicas' shared ledger).
    pub fn with_ledger(mut self, ledger: Arc<SpendLedger>) -> ModelClient {
        self.ledger = ledger;
        self
    }

    /// The real token count of `text` where the provider's endpoint has a tokenizer,
    /// else the estimate (about four characters a token). `true` when it is real.
    pub async fn count_tokens(&self, text: &str) -> (u64, bool) {
        match self.provider.count_tokens(text).await {
            Some(tokens) => (tokens, true),
            None => (estimate_tokens(text), false),
        }
    }

    /// The price used for this model, if known (always known for unmetered providers).
    pub fn price(&self) -> Option<&ModelPrice> {
        self.price.as_ref()
    }

    pub fn prices_as_of(&self) -> &str {
        &self.prices_as_of
    }

    /// Reads a stable prompt prefix into the provider's prompt cache before a question
    /// needs it: restored from a copy the server saved at an earlier start (named from
    /// the model and the whole request, so any change to the prompt makes a new name),
    /// or read by sending `request` (one recorded call, past the response cache, whose
    /// reply should be one token) and then saved for the next start. Only servers that
    /// keep such copies (llama.cpp with a slot save path) restore or save; others just
    /// read it.
    pub async fn warm_prefix(
        &self,
        request: &ModelRequest,
        log: &CallLog,
    ) -> Result<Warmed, LlmError> {
        let name = prefix_copy_name(self.provider.model(), request);
        if self.provider.restore_prefix(WARM_SLOT, &name).await {
            return Ok(Warmed::Restored);
        }
        let mut pinned = request.clone();
        pinned.cache_slot = Some(WARM_SLOT);
        self.call_with(&pinned, log, false).await?;
        let saved = self.provider.save_prefix(WARM_SLOT, &name).await;
        Ok(Warmed::Read { saved })
    }

    /// Puts a prefix that [`ModelClient::warm_prefix`] saved earlier back into the
    /// provider's prompt cache (true), without reading anything; false when there is no
    /// saved copy or the provider keeps none. An evaluation that asks several prompts of
    /// one database in turn restores each before its question, as a server answering one
    /// prompt keeps it cached.
    pub async fn restore_prefix(&self, request: &ModelRequest) -> bool {
        let name = prefix_copy_name(self.provider.model(), request);
        self.provider.restore_prefix(WARM_SLOT, &name).await
    }

    /// Asks the model and records the call: the one route to a model in askdb.
    ///
    /// Order: cache (a hit costs nothing and is recorded as cached), then the ledger's
    /// reservation of the worst-case cost (refused past the cap), then the provider, then
    /// the record in `log` and the ledger. A failed call is recorded too, at no cost.
    pub async fn call(
        &self,
        request: &ModelRequest,
        log: &CallLog,
    ) -> Result<ModelReply, LlmError> {
        self.call_with(request, log, true).await
    }

    async fn call_with(
        &self,
        request: &ModelRequest,
        log: &CallLog,
        use_cache: bool,
    ) -> Result<ModelReply, LlmError> {
        let started = Instant::now();
        let cache = self.cache.as_ref().filter(|_| use_cache);
        let cache_key = cache.map(|cache| {
            cache.key(
                self.provider.name(),
                self.provider.model(),
                self.provider.endpoint(),
                request,
            )
        });
        if let (Some(cache), Some(key)) = (cache, &cache_key) {
            if let Some(completion) = cache.get(key) {
                let reply = self.reply(completion, started.elapsed(), 0.0, true);
                log.push(self.record(request.purpose, &reply, None));
                return Ok(reply);
            }
        }
        let estimate = self.worst_case_cost(request);
        let reservation = match self.ledger.reserve_call(estimate, request.purpose).await {
            Ok(reservation) => reservation,
            Err(error) => {
                log.push(self.failure_record(request.purpose, started.elapsed(), &error));
                return Err(error);
            }
        };
        let outcome = self.provider.complete(request, CallPermit(())).await;
        let latency = started.elapsed();
        match outcome {
            Ok(completion) => {
                let cost = self.cost(&completion);
                if let Err(error) = reservation
                    .settle_call(cost, request.purpose, self.provider.name(), &completion)
                    .await
                {
                    log.push(self.failure_record(request.purpose, latency, &error));
                    return Err(error);
                }
                if let (Some(cache), Some(key)) = (cache, &cache_key) {
                    // The cache is an optimisation: a reply that cannot be stored is still
                    // a good reply, so a write failure does not fail the call.
                    let _ = cache.put(key, &completion);
                }
                let reply = self.reply(completion, latency, cost, false);
                log.push(self.record(request.purpose, &reply, None));
                Ok(reply)
            }
            Err(error) => {
                drop(reservation);
                log.push(self.failure_record(request.purpose, latency, &error));
                Err(error)
            }
        }
    }

    /// The most this request can cost: prompt tokens estimated generously (one token per
    /// two characters, all billed at the uncached rate) plus every allowed output token.
    fn worst_case_cost(&self, request: &ModelRequest) -> f64 {
        let Some(price) = &self.price else {
            return 0.0;
        };
        let input_tokens = request.prompt_chars().div_ceil(2) as u64 + 16;
        price.cost(input_tokens, u64::from(request.max_tokens), 0, 0)
    }

    fn cost(&self, completion: &Completion) -> f64 {
        match &self.price {
            Some(price) => price.cost(
                completion.input_tokens,
                completion.output_tokens,
                completion.cache_read_tokens,
                completion.cache_write_tokens,
            ),
            None => 0.0,
        }
    }

    fn reply(
        &self,
        completion: Completion,
        latency: Duration,
        cost_usd: f64,
        from_cache: bool,
    ) -> ModelReply {
        ModelReply {
            text: completion.text,
            input_tokens: completion.input_tokens,
            output_tokens: completion.output_tokens,
            cache_read_tokens: completion.cache_read_tokens,
            cache_write_tokens: completion.cache_write_tokens,
            tokens_estimated: completion.tokens_estimated,
            truncated: completion.truncated,
            model: completion.model,
            attempts: if from_cache { 0 } else { completion.attempts },
            alternatives: completion.alternatives,
            confidence: completion.confidence,
            latency,
            cost_usd,
            // A reply from the response cache took the server no time now.
            server_timings: completion.server_timings.filter(|_| !from_cache),
            from_cache,
        }
    }

    fn record(&self, purpose: Purpose, reply: &ModelReply, error: Option<&LlmError>) -> CallRecord {
        CallRecord {
            purpose,
            provider: self.provider.name().to_string(),
            model: reply.model.clone(),
            input_tokens: reply.input_tokens,
            output_tokens: reply.output_tokens,
            cache_read_tokens: reply.cache_read_tokens,
            cache_write_tokens: reply.cache_write_tokens,
            latency_ms: millis(reply.latency),
            cost_usd: reply.cost_usd,
            attempts: reply.attempts,
            from_cache: reply.from_cache,
            error_kind: error.map(|error| error.kind().to_string()),
            error: error.map(|error| error.to_string()),
            server_timings: reply.server_timings,
        }
    }

    fn failure_record(&self, purpose: Purpose, latency: Duration, error: &LlmError) -> CallRecord {
        CallRecord {
            purpose,
            provider: self.provider.name().to_string(),
            model: self.provider.model().to_string(),
            input_tokens: 0,
            output_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            latency_ms: millis(latency),
            cost_usd: 0.0,
            attempts: 0,
            from_cache: false,
            error_kind: Some(error.kind().to_string()),
            error: Some(error.to_string()),
            server_timings: None,
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Installs rustls' ring crypto provider for the process. reqwest is built without a
/// provider of its own (ring compiles far faster than aws-lc) and panics on first use
/// without one; main and the tests call this first, and the HTTP providers call it
/// again to be safe. Installing twice is harmless.
pub fn install_tls_provider() {
    // Err means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// The rough token count of a text, as the u64 the call records use: only when a
/// server reports no usage.
pub(crate) fn estimate_tokens(text: &str) -> u64 {
    crate::words::estimate_tokens(text) as u64
}

#[cfg(test)]
mod tests;
