//! One question's trace: the root `agent` span, started when the question arrives and
//! ended by [`QuestionTrace::finish`] (or [`QuestionTrace::fail`], or when dropped
//! unfinished), and one child span per step event, built when the event arrives with the
//! step's own start and end.
//!
//! | span | `openinference.span.kind` | carries |
//! |---|---|---|
//! | `agent` | AGENT | the question, mode, decision, attempts, rows, cost, token totals; each failed attempt and each vote as a span event; an evaluation's verdict |
//! | `select-schema` | RETRIEVER | the selection mode and each table with its score (`retrieval.documents.N.document.*`) |
//! | `write-sql`, `repair-sql`, `write-answer` | LLM | model, input/output tokens (`llm.token_count.*`, `gen_ai.usage.*`), cost, latency, candidates; prompt and replies only with `ASKDB_TRACE_CONTENT=1` |
//! | `validate-sql` | GUARDRAIL | the candidate SQL; allowed, or the refusal (status ERROR) |
//! | `execute-sql` | TOOL | the SQL that ran; rows, or the error type, message, SQLSTATE and hint (status ERROR) |
//! | `empty-result-probe` | TOOL | the probe's SQL and its finding |

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::{SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Array, Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::SdkTracer;

use crate::agent::events::{AgentEvent, Observer};
use crate::agent::{AgentResult, Decision};
use crate::llm::Purpose;

/// The attribute names, one home each.
pub mod attr {
    pub const SPAN_KIND: &str = "openinference.span.kind";
    pub const INPUT: &str = "input.value";
    pub const INPUT_MIME: &str = "input.mime_type";
    pub const OUTPUT: &str = "output.value";
    pub const OUTPUT_MIME: &str = "output.mime_type";
    pub const MODEL_NAME: &str = "llm.model_name";
    pub const PROMPT_TOKENS: &str = "llm.token_count.prompt";
    pub const COMPLETION_TOKENS: &str = "llm.token_count.completion";
    pub const TOTAL_TOKENS: &str = "llm.token_count.total";
    pub const COST_TOTAL: &str = "llm.cost.total";
    pub const GEN_AI_OPERATION: &str = "gen_ai.operation.name";
    pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
    pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
    pub const GEN_AI_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    pub const GEN_AI_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    pub const TOOL_NAME: &str = "tool.name";
    pub const DB_SYSTEM: &str = "db.system";
    pub const DB_QUERY: &str = "db.query.text";
    pub const COST_USD: &str = "askdb.cost_usd";
    pub const LATENCY_MS: &str = "askdb.latency_ms";
    pub const QUESTION: &str = "askdb.question";
    /// OpenInference's session: Phoenix groups a conversation's traces by it.
    pub const SESSION_ID: &str = "session.id";
    pub const TURN: &str = "askdb.conversation.turn";
    pub const UNDERSTOOD_AS: &str = "askdb.understood_as";
    pub const MODE: &str = "askdb.mode";
    pub const DECISION: &str = "askdb.decision";
    pub const ATTEMPTS: &str = "askdb.attempts";
    pub const ROWS: &str = "askdb.rows";
    pub const REASON: &str = "askdb.reason";
    pub const SQL: &str = "askdb.sql";
    pub const ASSUMPTIONS: &str = "askdb.assumptions";
    pub const RULES: &str = "askdb.rules.outcome";
    pub const SCHEMA_MODE: &str = "askdb.schema.mode";
    pub const SCHEMA_TABLES: &str = "askdb.schema.tables";
    pub const SCHEMA_TOKENS: &str = "askdb.schema.prompt_tokens";
    pub const CANDIDATE: &str = "askdb.candidate";
    pub const CANDIDATES: &str = "askdb.candidates";
    pub const TRUNCATED: &str = "askdb.truncated_replies";
    pub const GUARD_ALLOWED: &str = "askdb.guard.allowed";
    pub const GUARD_REASON: &str = "askdb.guard.reason";
    pub const ERROR_TYPE: &str = "askdb.error.type";
    pub const ERROR_MESSAGE: &str = "askdb.error.message";
    pub const ERROR_SQLSTATE: &str = "askdb.error.sqlstate";
    pub const ERROR_HINT: &str = "askdb.error.hint";
    pub const FINDING: &str = "askdb.empty.finding";
    pub const EVAL_CORRECT: &str = "askdb.eval.correct";
    pub const EVAL_VERDICT: &str = "askdb.eval.verdict";
    pub const EVAL_ID: &str = "askdb.eval.id";
}

/// Wall-clock times for the agent's monotonic instants.
#[derive(Debug, Clone, Copy)]
struct Clock {
    wall: SystemTime,
    at: Instant,
}

impl Clock {
    fn now() -> Clock {
        Clock {
            wall: SystemTime::now(),
            at: Instant::now(),
        }
    }

    fn wall_now(&self) -> SystemTime {
        self.wall + self.at.elapsed()
    }

    /// The step that ended now and took `elapsed_ms`: (start, end), never before
    /// `after` (the end of the step before: the agent's steps run one after another,
    /// and a difference of whole milliseconds can overstate a short step by one).
    fn step(&self, elapsed_ms: u64, after: SystemTime) -> (SystemTime, SystemTime) {
        let now = self.wall_now();
        // Strictly after the step before, so a backend sorting by start keeps the order.
        let floor = after + Duration::from_micros(1);
        let start = now
            .checked_sub(Duration::from_millis(elapsed_ms))
            .unwrap_or(self.wall)
            .max(floor);
        (start, now.max(start))
    }

    /// When the root ends: now, and never before its last step.
    fn root_end(&self, last_step: Option<SystemTime>) -> SystemTime {
        let now = self.wall_now();
        last_step.map_or(now, |last| now.max(last))
    }
}

fn count(value: impl TryInto<i64>) -> Value {
    Value::I64(value.try_into().unwrap_or(i64::MAX))
}

fn strings<I: IntoIterator<Item = String>>(items: I) -> Value {
    Value::Array(Array::String(
        items.into_iter().map(StringValue::from).collect(),
    ))
}

/// A model call's span name: its purpose with hyphens (`write-sql`).
pub fn generation_name(purpose: Purpose) -> String {
    purpose.as_str().replace('_', "-")
}

/// The trace of one question, fed by the agent's events.
pub struct QuestionTrace {
    tracer: SdkTracer,
    cx: Context,
    clock: Clock,
    content: bool,
    enabled: bool,
    ended: AtomicBool,
    /// When the last step span ended.
    last_end: Mutex<SystemTime>,
}

impl QuestionTrace {
    pub(super) fn start(
        tracer: &SdkTracer,
        question: &str,
        mode: &str,
        content: bool,
        enabled: bool,
    ) -> QuestionTrace {
        let clock = Clock::now();
        let root = tracer
            .span_builder("agent")
            .with_kind(SpanKind::Server)
            .with_start_time(clock.wall)
            .with_attributes([
                KeyValue::new(attr::SPAN_KIND, "AGENT"),
                KeyValue::new(attr::INPUT, question.to_string()),
                KeyValue::new(attr::INPUT_MIME, "text/plain"),
                KeyValue::new(attr::QUESTION, question.to_string()),
                KeyValue::new(attr::MODE, mode.to_string()),
            ])
            .start(tracer);
        QuestionTrace {
            tracer: tracer.clone(),
            cx: Context::new().with_span(root),
            clock,
            content,
            enabled,
            ended: AtomicBool::new(false),
            last_end: Mutex::new(clock.wall),
        }
    }

    /// The trace id (32 hex digits) when the trace is exported; None with tracing off.
    pub fn trace_id(&self) -> Option<String> {
        self.enabled
            .then(|| self.cx.span().span_context().trace_id().to_string())
    }

    /// The conversation the question belongs to and its turn there (1 for the first).
    pub fn conversation(&self, id: &str, turn: u32) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(attr::SESSION_ID, id.to_string()));
        span.set_attribute(KeyValue::new(attr::TURN, i64::from(turn)));
    }

    /// An evaluation's verdict on the answer: whether it was correct, and why not.
    pub fn verdict(&self, id: &str, correct: bool, why: Option<&str>) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(attr::EVAL_ID, id.to_string()));
        span.set_attribute(KeyValue::new(attr::EVAL_CORRECT, correct));
        let why = match (correct, why) {
            (_, Some(why)) if !why.trim().is_empty() => why.to_string(),
            (true, _) => "correct: the rows match the gold query's".to_string(),
            (false, _) => "incorrect".to_string(),
        };
        span.set_attribute(KeyValue::new(attr::EVAL_VERDICT, why));
    }

    /// Ends the root span with the question's outcome: decision, cost and tokens as
    /// askdb counted them.
    pub fn finish(&self, result: &AgentResult) {
        if self.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        let span = self.cx.span();
        let input = result.tokens.input;
        let output = result.tokens.output;
        let mut attributes = vec![
            KeyValue::new(attr::DECISION, result.decision.as_str()),
            KeyValue::new(attr::ATTEMPTS, i64::from(result.attempts)),
            KeyValue::new(attr::ROWS, count(result.row_count)),
            KeyValue::new(attr::COST_USD, result.cost_usd),
            KeyValue::new(attr::COST_TOTAL, result.cost_usd),
            KeyValue::new(attr::LATENCY_MS, count(result.latency_ms)),
            KeyValue::new(attr::PROMPT_TOKENS, count(input)),
            KeyValue::new(attr::COMPLETION_TOKENS, count(output)),
            KeyValue::new(attr::TOTAL_TOKENS, count(input.saturating_add(output))),
            KeyValue::new(attr::GEN_AI_INPUT_TOKENS, count(input)),
            KeyValue::new(attr::GEN_AI_OUTPUT_TOKENS, count(output)),
        ];
        let output_text = match (&result.sql, &result.reason, &result.clarify) {
            (Some(sql), _, _) if result.decision == Decision::Answer => sql.clone(),
            (_, Some(reason), _) => reason.clone(),
            (_, _, Some(clarify)) => clarify.question.clone(),
            _ => result.decision.as_str().to_string(),
        };
        if let Some(sql) = &result.sql {
            attributes.push(KeyValue::new(attr::SQL, sql.clone()));
        }
        if let Some(reason) = &result.reason {
            attributes.push(KeyValue::new(attr::REASON, reason.clone()));
        }
        if let Some(understood) = &result.understood_as {
            attributes.push(KeyValue::new(attr::UNDERSTOOD_AS, understood.clone()));
        }
        attributes.push(KeyValue::new(attr::OUTPUT, output_text));
        attributes.push(KeyValue::new(attr::OUTPUT_MIME, "text/plain"));
        span.set_attributes(attributes);
        span.set_status(match result.decision {
            Decision::GiveUp => Status::error(
                result
                    .reason
                    .clone()
                    .unwrap_or_else(|| "askdb gave up".to_string()),
            ),
            _ => Status::Ok,
        });
        span.end_with_timestamp(
            self.clock
                .root_end(self.last_end.lock().ok().map(|last| *last)),
        );
    }

    /// Ends the root span as failed: the question did not come to a decision (the model
    /// could not be asked, the time ran out).
    pub fn fail(&self, why: &str) {
        if self.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        let span = self.cx.span();
        span.set_attribute(KeyValue::new(attr::REASON, why.to_string()));
        span.set_status(Status::error(why.to_string()));
        span.end_with_timestamp(
            self.clock
                .root_end(self.last_end.lock().ok().map(|last| *last)),
        );
    }

    /// A child of the root that took `elapsed_ms` and ended now.
    fn child(
        &self,
        name: String,
        kind: SpanKind,
        elapsed_ms: u64,
        attributes: Vec<KeyValue>,
        status: Status,
    ) {
        if self.ended.load(Ordering::SeqCst) {
            return;
        }
        let (start, end) = match self.last_end.lock() {
            Ok(mut last) => {
                let (start, end) = self.clock.step(elapsed_ms, *last);
                *last = end;
                (start, end)
            }
            Err(_) => self.clock.step(elapsed_ms, self.clock.wall),
        };
        let mut span = self
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &self.cx);
        opentelemetry::trace::Span::set_status(&mut span, status);
        opentelemetry::trace::Span::end_with_timestamp(&mut span, end);
    }

    fn generation(&self, event: &AgentEvent) {
        let AgentEvent::ModelCall {
            elapsed_ms,
            purpose,
            model,
            input_tokens,
            output_tokens,
            cost_usd,
            candidates,
            truncated,
            prompt,
            replies,
            ..
        } = event
        else {
            return;
        };
        let mut attributes = vec![
            KeyValue::new(attr::SPAN_KIND, "LLM"),
            KeyValue::new(attr::MODEL_NAME, model.clone()),
            KeyValue::new(attr::GEN_AI_OPERATION, "chat"),
            KeyValue::new(attr::GEN_AI_REQUEST_MODEL, model.clone()),
            KeyValue::new(attr::GEN_AI_RESPONSE_MODEL, model.clone()),
            KeyValue::new(attr::PROMPT_TOKENS, count(*input_tokens)),
            KeyValue::new(attr::COMPLETION_TOKENS, count(*output_tokens)),
            KeyValue::new(
                attr::TOTAL_TOKENS,
                count(input_tokens.saturating_add(*output_tokens)),
            ),
            KeyValue::new(attr::GEN_AI_INPUT_TOKENS, count(*input_tokens)),
            KeyValue::new(attr::GEN_AI_OUTPUT_TOKENS, count(*output_tokens)),
            KeyValue::new(attr::COST_TOTAL, *cost_usd),
            KeyValue::new(attr::COST_USD, *cost_usd),
            KeyValue::new(attr::LATENCY_MS, count(*elapsed_ms)),
            KeyValue::new(attr::CANDIDATES, i64::from(*candidates)),
            KeyValue::new(attr::TRUNCATED, i64::from(*truncated)),
        ];
        if self.content {
            attributes.push(KeyValue::new(attr::INPUT, prompt.join("\n\n")));
            attributes.push(KeyValue::new(attr::INPUT_MIME, "text/plain"));
            for (index, text) in prompt.iter().enumerate() {
                attributes.push(KeyValue::new(
                    format!("llm.input_messages.{index}.message.content"),
                    text.clone(),
                ));
            }
            if let Some(first) = replies.first() {
                attributes.push(KeyValue::new(attr::OUTPUT, first.clone()));
                attributes.push(KeyValue::new(attr::OUTPUT_MIME, "text/plain"));
            }
            for (index, text) in replies.iter().enumerate() {
                attributes.push(KeyValue::new(
                    format!("llm.output_messages.{index}.message.role"),
                    "assistant",
                ));
                attributes.push(KeyValue::new(
                    format!("llm.output_messages.{index}.message.content"),
                    text.clone(),
                ));
            }
        }
        self.child(
            generation_name(*purpose),
            SpanKind::Client,
            *elapsed_ms,
            attributes,
            Status::Ok,
        );
    }
}

impl Observer for QuestionTrace {
    fn observe(&self, event: &AgentEvent) {
        match event {
            AgentEvent::Rules {
                outcome,
                assumptions,
                ..
            } => {
                let span = self.cx.span();
                span.set_attribute(KeyValue::new(attr::RULES, outcome.as_str()));
                if !assumptions.is_empty() {
                    span.set_attribute(KeyValue::new(
                        attr::ASSUMPTIONS,
                        strings(assumptions.iter().cloned()),
                    ));
                }
            }
            AgentEvent::SchemaSelected {
                elapsed_ms,
                mode,
                tables,
                prompt_tokens,
                ..
            } => {
                let mut attributes = vec![
                    KeyValue::new(attr::SPAN_KIND, "RETRIEVER"),
                    KeyValue::new(attr::SCHEMA_MODE, mode.as_str()),
                    KeyValue::new(attr::SCHEMA_TOKENS, count(*prompt_tokens)),
                    KeyValue::new(
                        attr::SCHEMA_TABLES,
                        strings(tables.iter().map(|table| table.table.clone())),
                    ),
                    KeyValue::new(
                        attr::OUTPUT,
                        tables
                            .iter()
                            .map(|table| format!("{} ({:.3})", table.table, table.score))
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                ];
                for (index, table) in tables.iter().enumerate() {
                    let key = |field: &str| format!("retrieval.documents.{index}.document.{field}");
                    attributes.push(KeyValue::new(key("id"), table.table.clone()));
                    attributes.push(KeyValue::new(key("score"), table.score));
                    attributes.push(KeyValue::new(key("content"), table.table.clone()));
                }
                self.child(
                    "select-schema".to_string(),
                    SpanKind::Internal,
                    *elapsed_ms,
                    attributes,
                    Status::Ok,
                );
            }
            AgentEvent::Examples {
                elapsed_ms, used, ..
            } => {
                let mut attributes = vec![
                    KeyValue::new(attr::SPAN_KIND, "RETRIEVER"),
                    KeyValue::new(
                        attr::OUTPUT,
                        used.iter()
                            .map(|example| {
                                format!(
                                    "{} {} ({:.3})",
                                    example.role.as_str(),
                                    example.id,
                                    example.score
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                ];
                for (index, example) in used.iter().enumerate() {
                    let key = |field: &str| format!("retrieval.documents.{index}.document.{field}");
                    attributes.push(KeyValue::new(key("id"), example.id.to_string()));
                    attributes.push(KeyValue::new(key("score"), example.score));
                    // A verified question is text people wrote, exported only with content.
                    if self.content {
                        attributes.push(KeyValue::new(key("content"), example.question.clone()));
                    }
                }
                self.child(
                    "verified-examples".to_string(),
                    SpanKind::Internal,
                    *elapsed_ms,
                    attributes,
                    Status::Ok,
                );
            }
            AgentEvent::ModelCall { .. } => self.generation(event),
            AgentEvent::Guard {
                elapsed_ms,
                candidate,
                sql,
                accepted,
                detail,
                ..
            } => {
                let mut attributes = vec![
                    KeyValue::new(attr::SPAN_KIND, "GUARDRAIL"),
                    KeyValue::new(attr::INPUT, sql.clone()),
                    KeyValue::new(attr::INPUT_MIME, "text/plain"),
                    KeyValue::new(attr::CANDIDATE, count(*candidate)),
                    KeyValue::new(attr::GUARD_ALLOWED, *accepted),
                ];
                let status = if *accepted {
                    attributes.push(KeyValue::new(attr::OUTPUT, detail.clone()));
                    Status::Ok
                } else {
                    attributes.push(KeyValue::new(attr::GUARD_REASON, detail.clone()));
                    attributes.push(KeyValue::new(attr::OUTPUT, format!("refused: {detail}")));
                    Status::error(detail.clone())
                };
                self.child(
                    "validate-sql".to_string(),
                    SpanKind::Internal,
                    *elapsed_ms,
                    attributes,
                    status,
                );
            }
            AgentEvent::Executed {
                elapsed_ms,
                candidate,
                sql,
                rows,
                error_type,
                error,
                sqlstate,
                hint,
                ..
            } => {
                let mut attributes = vec![
                    KeyValue::new(attr::SPAN_KIND, "TOOL"),
                    KeyValue::new(attr::TOOL_NAME, "run_query"),
                    KeyValue::new(attr::INPUT, sql.clone()),
                    KeyValue::new(attr::INPUT_MIME, "text/plain"),
                    KeyValue::new(attr::DB_QUERY, sql.clone()),
                    KeyValue::new(attr::CANDIDATE, count(*candidate)),
                ];
                let status = match rows {
                    Some(rows) => {
                        attributes.push(KeyValue::new(attr::ROWS, count(*rows)));
                        attributes.push(KeyValue::new(attr::OUTPUT, format!("{rows} row(s)")));
                        Status::Ok
                    }
                    None => {
                        let kind = error_type.map_or("error", |error_type| error_type.as_str());
                        let message = error.clone().unwrap_or_default();
                        attributes.push(KeyValue::new(attr::ERROR_TYPE, kind));
                        attributes.push(KeyValue::new(attr::ERROR_MESSAGE, message.clone()));
                        if let Some(sqlstate) = sqlstate {
                            attributes.push(KeyValue::new(attr::ERROR_SQLSTATE, sqlstate.clone()));
                        }
                        if let Some(hint) = hint {
                            attributes.push(KeyValue::new(attr::ERROR_HINT, hint.clone()));
                        }
                        attributes.push(KeyValue::new(attr::OUTPUT, format!("{kind}: {message}")));
                        Status::error(format!("{kind}: {message}"))
                    }
                };
                self.child(
                    "execute-sql".to_string(),
                    SpanKind::Client,
                    *elapsed_ms,
                    attributes,
                    status,
                );
            }
            AgentEvent::Vote {
                chosen,
                agreeing,
                voters,
                ..
            } => {
                self.cx.span().add_event(
                    "vote",
                    vec![
                        KeyValue::new("askdb.vote.chosen", count(*chosen)),
                        KeyValue::new("askdb.vote.agreeing", count(*agreeing)),
                        KeyValue::new("askdb.vote.voters", count(*voters)),
                    ],
                );
            }
            AgentEvent::EmptyProbe {
                elapsed_ms,
                sql,
                finding,
                ..
            } => {
                let mut attributes = vec![
                    KeyValue::new(attr::SPAN_KIND, "TOOL"),
                    KeyValue::new(attr::TOOL_NAME, "empty_result_probe"),
                    KeyValue::new(attr::FINDING, finding.clone()),
                    KeyValue::new(attr::OUTPUT, finding.clone()),
                ];
                if let Some(sql) = sql {
                    attributes.push(KeyValue::new(attr::INPUT, sql.clone()));
                    attributes.push(KeyValue::new(attr::DB_QUERY, sql.clone()));
                }
                self.child(
                    "empty-result-probe".to_string(),
                    SpanKind::Internal,
                    *elapsed_ms,
                    attributes,
                    Status::Ok,
                );
            }
            AgentEvent::Failed {
                kind,
                message,
                next,
                ..
            } => {
                self.cx.span().add_event(
                    "attempt failed",
                    vec![
                        KeyValue::new(attr::ERROR_TYPE, kind.as_str()),
                        KeyValue::new(attr::ERROR_MESSAGE, message.clone()),
                        KeyValue::new("askdb.next", next.as_str()),
                    ],
                );
            }
            AgentEvent::Finished {
                decision,
                attempts,
                rows,
                ..
            } => {
                let span = self.cx.span();
                span.set_attribute(KeyValue::new(attr::DECISION, decision.as_str()));
                span.set_attribute(KeyValue::new(attr::ATTEMPTS, i64::from(*attempts)));
                span.set_attribute(KeyValue::new(attr::ROWS, count(*rows)));
            }
        }
    }
}

impl Drop for QuestionTrace {
    /// A question dropped before it finished (the client went away, the task was
    /// aborted) still ends its root span, marked so.
    fn drop(&mut self) {
        self.fail("the question was abandoned before it finished");
    }
}
