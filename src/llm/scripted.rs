//! The scripted provider: replies read from a JSONL file instead of a model, for tests,
//! for replaying a run, and for the harness identity check. `ASKDB_PROVIDER=scripted`
//! with `ASKDB_SCRIPT=path`.
//!
//! Each line is one reply for one (question, purpose):
//!
//! ```text
//! {"question": "How many bills are there?", "purpose": "write_sql", "reply": {"sql": "SELECT count(*) FROM bills"}}
//! {"question": "How many bills are there?", "purpose": "write_answer", "reply": "There are 1400 bills.", "output_tokens": 7}
//! {"question": "How many bills are there?", "purpose": "repair_sql", "error": {"kind": "timeout", "message": "no reply in 30 s"}}
//! {"question": "*", "purpose": "check", "reply": "ok"}
//! ```
//!
//! - `question` is matched exactly after trimming; `"*"` matches any question that has
//!   no line of its own left for that purpose.
//! - `purpose` is one of `write_sql`, `repair_sql`, `write_answer`, `clarify`, `check`.
//! - `reply` is the text; a JSON object or array is sent as its JSON text.
//! - `error` simulates a failure instead; `kind` is one of `timeout`, `server_error`,
//!   `rate_limited` (every key's daily quota spent), `authentication`, `bad_request`,
//!   `malformed_response`.
//! - Optional: `input_tokens`, `output_tokens` (else estimated from the text, about four
//!   characters a token), `delay_ms` (wait before replying), `truncated`, and
//!   `alternatives` (more replies, returned as the other candidates of a request for
//!   several, as many as it asks for), `confidence` (the first reply's
//!   `{"mean_logprob", "min_logprob", "tokens"}`, as a server giving log-probabilities
//!   reports it), `prompt_contains` (a text the request's messages must hold: when they
//!   do not, the call fails with a `script` error naming it, so a test can tell what the
//!   prompt carried, such as a follow-up's earlier turns), `continues` (true: the
//!   reply continues the start the request wrote for the model, its prefill, which is
//!   put before it, as a server that continues a begun reply returns it).
//! - Blank lines and lines starting with `#` are ignored.
//!
//! Scripted replies are free unless `ASKDB_MODEL_METERED=true` (or
//! [`ScriptedProvider::metered`]): then each is priced by its tokens at the prices
//! file's `provider = "scripted"` line (`ASKDB_PRICES`), and a spend cap holds, so the
//! ledger can be measured without a paid model.
//!
//! Replies for the same (question, purpose) are used in file order, each once; asking
//! once more than the file has lines is a [`LlmError::ScriptExhausted`] error.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

use super::{
    estimate_tokens, BoxFuture, CallPermit, Completion, LlmError, ModelRequest, Provider, Purpose,
};

/// A reply as text: a JSON object or array is sent as its JSON text.
fn reply_text(reply: Value) -> String {
    match reply {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

/// Matches any question.
pub const ANY_QUESTION: &str = "*";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptLine {
    question: String,
    purpose: Purpose,
    #[serde(default)]
    reply: Option<Value>,
    #[serde(default)]
    error: Option<ScriptedError>,
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    delay_ms: Option<u64>,
    #[serde(default)]
    truncated: bool,
    /// More sampled replies, for a request that asks for several candidates.
    #[serde(default)]
    alternatives: Vec<Value>,
    /// The first reply's confidence, as a server that gives token log-probabilities
    /// would report it.
    #[serde(default)]
    confidence: Option<super::Confidence>,
    /// A text the prompt must hold for this reply to be given.
    #[serde(default)]
    prompt_contains: Option<String>,
    /// The reply continues the start the request wrote for the model (its prefill),
    /// which is put before it, as a server that continues a begun reply returns it.
    #[serde(default)]
    continues: bool,
}

/// A failure the script asks for.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedError {
    kind: String,
    #[serde(default)]
    message: String,
}

const ERROR_KINDS: [&str; 6] = [
    "timeout",
    "server_error",
    "rate_limited",
    "authentication",
    "bad_request",
    "malformed_response",
];

impl ScriptedError {
    fn to_error(&self) -> LlmError {
        let provider = "scripted".to_string();
        let message = if self.message.is_empty() {
            format!("simulated {}", self.kind)
        } else {
            self.message.clone()
        };
        match self.kind.as_str() {
            "timeout" => LlmError::GaveUp {
                provider,
                attempts: 1,
                last: message,
                timed_out: true,
            },
            "server_error" => LlmError::GaveUp {
                provider,
                attempts: 1,
                last: message,
                timed_out: false,
            },
            "rate_limited" => LlmError::QuotaExhausted {
                provider,
                keys: 1,
                message,
            },
            "authentication" => LlmError::Authentication {
                provider,
                status: 401,
                message,
            },
            "bad_request" => LlmError::BadRequest {
                provider,
                status: 400,
                message,
            },
            _ => LlmError::MalformedResponse { provider, message },
        }
    }
}

#[derive(Debug, Clone)]
enum ScriptedOutcome {
    Reply {
        text: String,
        input_tokens: Option<u64>,
        output_tokens: Option<u64>,
        truncated: bool,
        alternatives: Vec<String>,
        confidence: Option<super::Confidence>,
    },
    Failure(ScriptedError),
}

#[derive(Debug, Clone)]
struct ScriptedReply {
    outcome: ScriptedOutcome,
    delay: Option<Duration>,
    prompt_contains: Option<String>,
    continues: bool,
}

type ScriptKey = (String, Purpose);

/// Replies from a JSONL script (format in the module doc).
#[derive(Debug)]
pub struct ScriptedProvider {
    model: String,
    /// Whether replies cost money (at the prices file's `scripted` price).
    metered: bool,
    path: PathBuf,
    replies: Mutex<HashMap<ScriptKey, VecDeque<ScriptedReply>>>,
}

impl ScriptedProvider {
    /// Reads a script file.
    pub fn load(path: &Path, model: &str) -> Result<ScriptedProvider, LlmError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            LlmError::Script(format!("cannot read {}: {error}", path.display()))
        })?;
        let mut provider = ScriptedProvider::parse(&text, model)
            .map_err(|error| LlmError::Script(format!("{}: {error}", path.display())))?;
        provider.path = path.to_path_buf();
        Ok(provider)
    }

    /// Reads a script from text; errors name the line.
    pub fn parse(text: &str, model: &str) -> Result<ScriptedProvider, String> {
        let mut replies: HashMap<ScriptKey, VecDeque<ScriptedReply>> = HashMap::new();
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let trimmed = line.trim();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                continue;
            }
            let parsed: ScriptLine =
                serde_json::from_str(trimmed).map_err(|error| format!("line {number}: {error}"))?;
            let outcome = match (parsed.reply, parsed.error) {
                (Some(_), Some(_)) => {
                    return Err(format!("line {number}: has both reply and error; give one"))
                }
                (None, None) => return Err(format!("line {number}: has neither reply nor error")),
                (None, Some(error)) => {
                    if !ERROR_KINDS.contains(&error.kind.as_str()) {
                        return Err(format!(
                            "line {number}: error kind {:?} is not one of {}",
                            error.kind,
                            ERROR_KINDS.join(", ")
                        ));
                    }
                    ScriptedOutcome::Failure(error)
                }
                (Some(reply), None) => ScriptedOutcome::Reply {
                    text: reply_text(reply),
                    input_tokens: parsed.input_tokens,
                    output_tokens: parsed.output_tokens,
                    truncated: parsed.truncated,
                    alternatives: parsed.alternatives.into_iter().map(reply_text).collect(),
                    confidence: parsed.confidence,
                },
            };
            replies
                .entry((parsed.question.trim().to_string(), parsed.purpose))
                .or_default()
                .push_back(ScriptedReply {
                    outcome,
                    delay: parsed.delay_ms.map(Duration::from_millis),
                    prompt_contains: parsed.prompt_contains,
                    continues: parsed.continues,
                });
        }
        Ok(ScriptedProvider {
            model: model.to_string(),
            metered: false,
            path: PathBuf::new(),
            replies: Mutex::new(replies),
        })
    }

    /// The same provider with replies that cost money, priced by their tokens.
    pub fn metered(mut self, metered: bool) -> ScriptedProvider {
        self.metered = metered;
        self
    }

    /// Replies not yet used, over all questions and purposes.
    pub fn remaining(&self) -> usize {
        self.lock().values().map(VecDeque::len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ScriptKey, VecDeque<ScriptedReply>>> {
        self.replies
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn next_reply(&self, question: &str, purpose: Purpose) -> Option<ScriptedReply> {
        let mut replies = self.lock();
        let own = (question.trim().to_string(), purpose);
        if let Some(reply) = replies.get_mut(&own).and_then(VecDeque::pop_front) {
            return Some(reply);
        }
        replies
            .get_mut(&(ANY_QUESTION.to_string(), purpose))
            .and_then(VecDeque::pop_front)
    }

    async fn complete_inner(&self, request: &ModelRequest) -> Result<Completion, LlmError> {
        let reply = self
            .next_reply(&request.question, request.purpose)
            .ok_or_else(|| LlmError::ScriptExhausted {
                question: request.question.clone(),
                purpose: request.purpose,
            })?;
        if let Some(delay) = reply.delay {
            tokio::time::sleep(delay).await;
        }
        let prompt: String = request
            .messages
            .iter()
            .map(|message| message.content.as_str())
            .collect();
        if let Some(wanted) = &reply.prompt_contains {
            if !prompt.contains(wanted.as_str()) {
                return Err(LlmError::Script(format!(
                    "the {} prompt for {:?} does not contain {wanted:?}",
                    request.purpose.as_str(),
                    request.question
                )));
            }
        }
        match reply.outcome {
            ScriptedOutcome::Failure(error) => Err(error.to_error()),
            ScriptedOutcome::Reply {
                text,
                input_tokens,
                output_tokens,
                truncated,
                alternatives,
                confidence,
            } => {
                // Counted before the prefill is put back: a server reports only the
                // tokens it generated.
                let generated = output_tokens.unwrap_or_else(|| estimate_tokens(&text));
                let text = match (&request.prefill, reply.continues) {
                    (Some(start), true) => format!("{start}{text}"),
                    _ => text,
                };
                Ok(Completion {
                    input_tokens: input_tokens.unwrap_or_else(|| estimate_tokens(&prompt)),
                    output_tokens: generated,
                    tokens_estimated: input_tokens.is_none() || output_tokens.is_none(),
                    text,
                    cache_read_tokens: 0,
                    cache_write_tokens: 0,
                    truncated,
                    model: self.model.clone(),
                    attempts: 1,
                    // As many as were asked for beyond the first, if the script has them.
                    alternatives: alternatives
                        .into_iter()
                        .take(request.candidates.saturating_sub(1) as usize)
                        .map(|text| super::Alternative {
                            text,
                            truncated: false,
                            confidence: None,
                        })
                        .collect(),
                    confidence,
                    server_timings: None,
                })
            }
        }
    }
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn endpoint(&self) -> &str {
        self.path.to_str().unwrap_or("")
    }

    fn is_metered(&self) -> bool {
        self.metered
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
    use crate::llm::Message;

    fn request(question: &str, purpose: Purpose) -> ModelRequest {
        ModelRequest::new(purpose, question, vec![Message::user(question)])
    }

    async fn ask(
        provider: &ScriptedProvider,
        question: &str,
        purpose: Purpose,
    ) -> Result<Completion, LlmError> {
        provider
            .complete(&request(question, purpose), CallPermit::for_tests())
            .await
    }

    const SCRIPT: &str = r#"
# two tries at the same question, then an answer
{"question": "How many bills?", "purpose": "write_sql", "reply": {"sql": "SELECT count(*) FROM bill"}}
{"question": "How many bills?", "purpose": "write_sql", "reply": "{\"sql\": \"SELECT count(*) FROM bills\"}", "input_tokens": 100, "output_tokens": 9}
{"question": "How many bills?", "purpose": "repair_sql", "error": {"kind": "timeout", "message": "slow"}}
{"question": "*", "purpose": "check", "reply": "ok"}
"#;

    #[tokio::test]
    async fn replies_are_used_in_file_order_then_run_out() {
        let provider = ScriptedProvider::parse(SCRIPT, "scripted").expect("parses");
        assert_eq!(provider.remaining(), 4);
        let first = ask(&provider, "How many bills?", Purpose::WriteSql)
            .await
            .expect("reply");
        assert_eq!(first.text, r#"{"sql":"SELECT count(*) FROM bill"}"#);
        assert!(first.tokens_estimated);
        let second = ask(&provider, " How many bills? ", Purpose::WriteSql)
            .await
            .expect("reply");
        assert!(second.text.contains("FROM bills"));
        assert_eq!((second.input_tokens, second.output_tokens), (100, 9));
        let third = ask(&provider, "How many bills?", Purpose::WriteSql).await;
        assert_eq!(third.expect_err("used up").kind(), "script_exhausted");
    }

    #[tokio::test]
    async fn errors_are_simulated_and_the_wildcard_answers_any_question() {
        let provider = ScriptedProvider::parse(SCRIPT, "scripted").expect("parses");
        let error = ask(&provider, "How many bills?", Purpose::RepairSql)
            .await
            .expect_err("simulated");
        assert_eq!(error.kind(), "timeout");
        let check = ask(&provider, "anything at all", Purpose::Check)
            .await
            .expect("wildcard");
        assert_eq!(check.text, "ok");
    }

    #[tokio::test]
    async fn a_reply_can_require_what_the_prompt_holds() {
        let script = r#"
{"question": "And in 2024?", "purpose": "write_sql", "reply": "SELECT 1", "prompt_contains": "voided in 2025"}
{"question": "And in 2024?", "purpose": "write_sql", "reply": "SELECT 2", "prompt_contains": "voided in 2025"}
"#;
        let provider = ScriptedProvider::parse(script, "scripted").expect("parses");
        let carried = ModelRequest::new(
            Purpose::WriteSql,
            "And in 2024?",
            vec![Message::user(
                "Earlier: bills voided in 2025?\nNow: And in 2024?",
            )],
        );
        let reply = provider
            .complete(&carried, CallPermit::for_tests())
            .await
            .expect("the prompt holds it");
        assert_eq!(reply.text, "SELECT 1");
        let error = ask(&provider, "And in 2024?", Purpose::WriteSql)
            .await
            .expect_err("the prompt lacks it");
        assert_eq!(error.kind(), "script");
        assert!(error.to_string().contains("voided in 2025"), "{error}");
    }

    #[test]
    fn bad_lines_are_named() {
        for (script, words) in [
            (r#"{"question": "q", "purpose": "write_sql"}"#, "neither"),
            (
                r#"{"question": "q", "purpose": "guess", "reply": "x"}"#,
                "line 1",
            ),
            (
                r#"{"question": "q", "purpose": "check", "error": {"kind": "meteor"}}"#,
                "meteor",
            ),
            ("\n{not json", "line 2"),
        ] {
            let error = ScriptedProvider::parse(script, "m").expect_err(script);
            assert!(error.contains(words), "{error}");
        }
    }
}
