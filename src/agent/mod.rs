//! The agent: a question in, an answer out, with the SQL behind it and every attempt that
//! failed. It is an explicit state machine, one node per step:
//!
//! ```text
//! check_ambiguity -> select_schema -> generate -> guard -> execute -> inspect
//!   inspect: ok -> answer | error -> prepare_repair | empty/all-NULL -> one diagnostic
//!   prepare_repair -> (select_schema when retrieval widens) -> generate
//!   attempts exhausted or not repairable -> give_up
//! ```
//!
//! The state carries the question, the selected tables, the current SQL, the attempt
//! count and the full history of failed attempts, which every repair prompt includes.
//! Repairs are chosen by the error type of the taxonomy alone ([`prompts::repair_instruction`]);
//! an unknown column gets a schema-aware repair (which tables own that column and the
//! foreign-key path to them); a reply identical to an already-failed attempt is never
//! executed again. At most [`MAX_ATTEMPTS`] statements are tried. Every database access
//! goes through the gate; every model call goes through [`ModelClient::call`].
//!
//! Baseline mode uses the same retrieval, prompt, model and safety envelope with one
//! attempt, no repair and no diagnostic: the difference between the modes is the loop.

pub mod ambiguity;
pub mod answer;
pub mod empty;
pub mod prompts;
mod render;
pub mod scope;

pub use render::{render_plan, render_text};

use std::collections::BTreeSet;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value as JsonValue;

use crate::gate::{
    CheckedQuery, ErrorType, Gate, GateError, QueryError, QueryOutcome, QueryResult, RefusalReason,
};
use crate::linking::cards::{schema_block, TableCard};
use crate::linking::{SchemaIndex, SelectOptions, Selection};
use crate::llm::{CallLog, LlmError, Message, ModelClient, ModelRequest, Purpose};
use answer::ChartSpec;

/// The most statements the agent tries for one question. The one place this cap lives.
pub const MAX_ATTEMPTS: u32 = 3;

/// A reply identical to a failed attempt is pointed out to the model at most this many
/// times per question before the agent gives up; such replies are never executed.
pub const MAX_IDENTICAL_NUDGES: u32 = 2;

/// After this many failures naming columns that no table has (not even by a near
/// spelling), the question needs data the database does not hold: the agent declines
/// instead of letting the model invent a third stand-in.
pub const ABSENT_COLUMNS_TO_DECLINE: usize = 2;

/// The longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 2_000;

/// How much of a malformed reply a repair prompt quotes back.
const MALFORMED_SHOWN_CHARS: usize = 160;

/// Rows shown to the model when it writes the explanation.
const ROWS_FOR_EXPLANATION: usize = 20;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Repair loop, empty-result diagnostic, up to three attempts.
    #[default]
    Agent,
    /// One attempt, no repair, no diagnostic.
    Baseline,
    /// The reference prompt a plain demo would send: every table as CREATE TABLE with
    /// three sample rows, the question, a one-field `{"sql"}` reply; no rules, notes,
    /// linking, ambiguity checks or repair; one attempt through the same gate. What
    /// askdb's own prompt and loop must beat.
    Plain,
}

impl Mode {
    /// Modes that make exactly one attempt.
    pub fn is_single_attempt(self) -> bool {
        matches!(self, Mode::Baseline | Mode::Plain)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Agent => "agent",
            Mode::Baseline => "baseline",
            Mode::Plain => "plain",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(text: &str) -> Result<Mode, String> {
        match text.trim() {
            "agent" => Ok(Mode::Agent),
            "baseline" => Ok(Mode::Baseline),
            "plain" => Ok(Mode::Plain),
            other => Err(format!(
                "unknown mode {other:?}: use agent, baseline or plain"
            )),
        }
    }
}

/// Settings of one question.
#[derive(Debug, Clone, Default)]
pub struct AskOptions {
    pub mode: Mode,
    /// Ask the model for a short explanation of the answer (one more call).
    pub explain: bool,
    pub select: SelectOptions,
}

/// How the question ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Answer,
    Clarify,
    Decline,
    GiveUp,
}

/// One failed attempt, as the history shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedAttempt {
    pub sql: String,
    /// A taxonomy type, or `malformed_reply`, `identical_to_failed`, `empty_result`.
    pub error_type: String,
    pub message: String,
}

/// A clarification question with its options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClarifyRequest {
    pub question: String,
    pub options: Vec<String>,
}

/// One step the state machine took.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceStep {
    pub node: String,
    pub note: String,
    pub elapsed_ms: u64,
}

/// Tokens, cost and latency of one model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelStep {
    pub purpose: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub latency_ms: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
}

/// Everything the agent returns for one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResult {
    pub question: String,
    pub mode: Mode,
    pub decision: Decision,
    /// The SQL that produced the answer (as it ran, LIMIT included).
    pub sql: Option<String>,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<JsonValue>>,
    pub row_count: usize,
    pub truncated: bool,
    /// Statements tried (executed or refused by the guard).
    pub attempts: u32,
    /// Every failed attempt, in order.
    pub history: Vec<FailedAttempt>,
    pub tables_used: Vec<String>,
    pub assumptions: Vec<String>,
    pub explanation: Option<String>,
    /// Numbers in the explanation that are not in the rows: shown flagged, not as fact.
    pub unverified_numbers: Vec<String>,
    pub chart: ChartSpec,
    pub clarify: Option<ClarifyRequest>,
    /// Why the question was declined or given up.
    pub reason: Option<String>,
    /// Whether the schema went whole or linked, and which tables.
    pub schema_mode: String,
    pub schema_tables: Vec<String>,
    pub tokens: Tokens,
    pub cost_usd: f64,
    pub latency_ms: u64,
    pub model_calls: Vec<ModelStep>,
    pub trace: Vec<TraceStep>,
    /// Whether the first statement tried returned rows without error.
    pub first_attempt_ok: Option<bool>,
    /// The SQL of the first attempt, for rescue/broken accounting.
    pub first_sql: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("the question is empty")]
    EmptyQuestion,
    #[error("the question is {0} characters long; the limit is {MAX_QUESTION_CHARS}")]
    QuestionTooLong(usize),
    /// The model could not be asked (infrastructure, never a wrong answer).
    #[error("model: {0}")]
    Model(#[from] LlmError),
    #[error("database: {0}")]
    Gate(#[from] GateError),
}

/// What `plan` shows before any model call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub question: String,
    pub ambiguity: ambiguity::AmbiguityDecision,
    pub selection: Selection,
    /// Estimated prompt tokens of the generation call.
    pub prompt_tokens: usize,
}

/// A parsed generation reply.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Sql {
        sql: String,
        assumptions: Vec<String>,
    },
    Clarify(ClarifyRequest),
    Decline(String),
    Malformed(String),
}

#[derive(Debug, Default, Deserialize)]
struct RawReply {
    action: Option<String>,
    sql: Option<String>,
    question: Option<String>,
    #[serde(default)]
    options: Vec<String>,
    reason: Option<String>,
    #[serde(default)]
    assumptions: Vec<String>,
}

/// Reads a generation reply tolerantly: JSON (fenced or not), or bare SQL from a model
/// that ignored the format.
fn parse_reply(text: &str) -> Reply {
    if let Ok(raw) = crate::llm::json::parse_json_reply_as::<RawReply>(text) {
        let action = raw.action.as_deref().map(str::trim).unwrap_or_default();
        let sql = raw.sql.filter(|sql| !sql.trim().is_empty());
        return match (action, sql) {
            ("clarify", _) => match raw.question {
                Some(question) if !question.trim().is_empty() => Reply::Clarify(ClarifyRequest {
                    question,
                    options: raw.options.into_iter().take(4).collect(),
                }),
                _ => Reply::Malformed("a clarify reply without a question".to_string()),
            },
            ("decline", _) => Reply::Decline(
                raw.reason
                    .unwrap_or_else(|| "the model declined without a reason".to_string()),
            ),
            (_, Some(sql)) => Reply::Sql {
                sql,
                assumptions: raw.assumptions,
            },
            _ => Reply::Malformed("the reply has no SQL, clarification or reason".to_string()),
        };
    }
    // A model that answered with SQL instead of JSON: take the statement.
    let trimmed = text.trim();
    let body = trimmed
        .strip_prefix("```sql")
        .or_else(|| trimmed.strip_prefix("```"))
        .map(|rest| rest.trim_end_matches('`').trim())
        .unwrap_or(trimmed);
    let upper = body.to_uppercase();
    if upper.starts_with("SELECT") || upper.starts_with("WITH") {
        return Reply::Sql {
            sql: body.to_string(),
            assumptions: Vec::new(),
        };
    }
    let shown: String = text.chars().take(200).collect();
    Reply::Malformed(format!("the reply is not the JSON asked for: {shown}"))
}

/// No rows, only NULLs, or one row of zeros and NULLs (`count(*)` = 0, `SUM` = NULL):
/// what a filter that matched nothing looks like.
fn looks_empty(rows: &[Vec<JsonValue>]) -> bool {
    let zero_or_null =
        |value: &JsonValue| value.is_null() || value.as_f64().is_some_and(|number| number == 0.0);
    rows.is_empty()
        || rows.iter().all(|row| row.iter().all(JsonValue::is_null))
        || (rows.len() == 1 && rows[0].iter().all(zero_or_null))
}

/// Whitespace-folded SQL, to spot a reply identical to a failed one. Case is kept:
/// `status = 'paid'` and `status = 'PAID'` are different queries.
fn normalise_sql(sql: &str) -> String {
    sql.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(';')
        .to_string()
}

enum Node {
    CheckAmbiguity,
    SelectSchema,
    Generate,
    Guard(String),
    Execute(CheckedQuery),
    Inspect(QueryOutcome),
    PrepareRepair(Feedback),
    GiveUp(String),
    Answer(QueryResult),
    Done,
}

/// What the next generation call must be told.
struct Feedback {
    error_type: String,
    message: String,
    instruction: String,
    /// Schema-aware details (owner tables, join paths, types and samples).
    details: Option<String>,
}

struct State {
    question: String,
    mode: Mode,
    started: Instant,
    selection: Option<Selection>,
    widen: usize,
    forced_tables: BTreeSet<String>,
    assumptions: Vec<String>,
    attempts: u32,
    history: Vec<FailedAttempt>,
    failed_sql: Vec<String>,
    feedback: Option<Feedback>,
    identical_nudges: u32,
    /// Column names the model used that no table has, not even by a near spelling.
    absent_columns: Vec<String>,
    diagnostic_used: bool,
    first_attempt_ok: Option<bool>,
    first_sql: Option<String>,
    trace: Vec<TraceStep>,
    result: Option<AgentResult>,
}

impl State {
    fn note(&mut self, node: &str, note: impl Into<String>) {
        self.trace.push(TraceStep {
            node: node.to_string(),
            note: note.into(),
            elapsed_ms: self.started.elapsed().as_millis() as u64,
        });
    }

    fn fail(&mut self, sql: &str, error_type: &str, message: &str) {
        self.history.push(FailedAttempt {
            sql: sql.to_string(),
            error_type: error_type.to_string(),
            message: message.to_string(),
        });
        self.failed_sql.push(normalise_sql(sql));
    }
}

/// The agent over one database and one model.
pub struct Agent {
    gate: Gate,
    client: ModelClient,
    cards: Vec<TableCard>,
    index: SchemaIndex,
    /// Every table as CREATE TABLE with three sample rows: the plain reference prompt's
    /// schema.
    plain_schema: String,
}

impl Agent {
    /// Builds the schema cards and the linking index through the gate.
    pub async fn new(gate: Gate, client: ModelClient) -> Result<Agent, AgentError> {
        let cards = crate::linking::cards::build_cards(&gate).await?;
        let index = SchemaIndex::build(&gate, &cards).await?;
        let plain_schema = crate::linking::cards::sample_rows_schema(&gate).await?;
        Ok(Agent {
            gate,
            client,
            cards,
            index,
            plain_schema,
        })
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    pub fn client(&self) -> &ModelClient {
        &self.client
    }

    fn validate(question: &str) -> Result<String, AgentError> {
        let question = question.trim();
        if question.is_empty() {
            return Err(AgentError::EmptyQuestion);
        }
        let length = question.chars().count();
        if length > MAX_QUESTION_CHARS {
            return Err(AgentError::QuestionTooLong(length));
        }
        Ok(question.to_string())
    }

    fn system_prompt_for(&self, selection: &Selection) -> String {
        system_prompt_for(&self.gate, &self.cards, selection)
    }

    /// Answers one question.
    pub async fn ask(
        &self,
        question: &str,
        options: &AskOptions,
    ) -> Result<AgentResult, AgentError> {
        let question = Self::validate(question)?;
        let log = CallLog::default();
        let mut state = State {
            question,
            mode: options.mode,
            started: Instant::now(),
            selection: None,
            widen: 0,
            forced_tables: BTreeSet::new(),
            assumptions: Vec::new(),
            attempts: 0,
            history: Vec::new(),
            failed_sql: Vec::new(),
            feedback: None,
            identical_nudges: 0,
            absent_columns: Vec::new(),
            diagnostic_used: false,
            first_attempt_ok: None,
            first_sql: None,
            trace: Vec::new(),
            result: None,
        };
        let mut node = Node::CheckAmbiguity;
        loop {
            node = match node {
                Node::CheckAmbiguity => self.check_ambiguity(&mut state),
                Node::SelectSchema => self.select_schema(&mut state, options),
                Node::Generate => self.generate(&mut state, &log).await?,
                Node::Guard(sql) => self.guard(&mut state, sql),
                Node::Execute(checked) => self.execute(&mut state, checked).await,
                Node::Inspect(outcome) => self.inspect(&mut state, outcome).await,
                Node::PrepareRepair(feedback) => self.prepare_repair(&mut state, feedback),
                Node::GiveUp(reason) => {
                    state.note("give_up", &reason);
                    self.finish(&mut state, Decision::GiveUp, None, Some(reason), None);
                    Node::Done
                }
                Node::Answer(result) => self.answer(&mut state, result, options, &log).await?,
                Node::Done => break,
            };
        }
        let mut result = match state.result.take() {
            Some(result) => result,
            None => {
                return Err(AgentError::Gate(GateError::Query(
                    "the agent stopped without a decision".to_string(),
                )))
            }
        };
        let records = log.records();
        result.model_calls = records
            .iter()
            .map(|record| ModelStep {
                purpose: record.purpose.as_str().to_string(),
                input_tokens: record.input_tokens,
                output_tokens: record.output_tokens,
                cost_usd: record.cost_usd,
                latency_ms: record.latency_ms,
            })
            .collect();
        let totals = log.totals();
        result.tokens = Tokens {
            input: totals.input_tokens,
            output: totals.output_tokens,
        };
        result.cost_usd = totals.cost_usd;
        result.latency_ms = state.started.elapsed().as_millis() as u64;
        Ok(result)
    }

    fn check_ambiguity(&self, state: &mut State) -> Node {
        if state.mode == Mode::Plain {
            // The reference prompt has no rules of askdb's: straight to the model.
            return Node::SelectSchema;
        }
        let decision = ambiguity::check(&state.question, self.gate.notes());
        if let Some(column) = decision.restricted_column {
            state.note("check_ambiguity", format!("asks for restricted {column}"));
            return self.decline(
                state,
                format!("{column} is restricted on this database: askdb never reads or shows it"),
            );
        }

        state
            .assumptions
            .extend(decision.assumptions.iter().cloned());
        if let Some(clarify) = decision.clarify {
            state.note(
                "check_ambiguity",
                format!("unresolved vague word: {}", clarify.question),
            );
            let request = ClarifyRequest {
                question: clarify.question,
                options: clarify.options,
            };
            self.finish(state, Decision::Clarify, None, None, Some(request));
            return Node::Done;
        }
        state.note(
            "check_ambiguity",
            format!(
                "{} assumption(s) from the glossary",
                decision.assumptions.len()
            ),
        );
        Node::SelectSchema
    }

    fn select_schema(&self, state: &mut State, options: &AskOptions) -> Node {
        if state.mode == Mode::Plain {
            state.note("select_schema", "plain: every table with three sample rows");
            return Node::Generate;
        }
        let mut select = options.select;
        select.widen = select.widen.max(state.widen);
        let mut selection = self.index.select(&state.question, &select);
        // Tables a schema-aware repair asked for are always included.
        for table in &state.forced_tables {
            let tokens = self.index.card(table).map(|card| card.tokens).unwrap_or(0);
            selection.add_repair_table(table, tokens);
        }
        state.note(
            "select_schema",
            format!(
                "{} with {} table(s), about {} tokens",
                selection.mode.as_str(),
                selection.tables.len(),
                selection.prompt_tokens
            ),
        );
        state.selection = Some(selection);
        Node::Generate
    }

    async fn generate(&self, state: &mut State, log: &CallLog) -> Result<Node, AgentError> {
        let purpose = match &state.feedback {
            None => Purpose::WriteSql,
            Some(_) => Purpose::RepairSql,
        };
        let request = if state.mode == Mode::Plain {
            prompts::plain_request(self.gate.dialect(), &self.plain_schema, &state.question)
        } else {
            let Some(selection) = state.selection.as_ref() else {
                return Ok(Node::SelectSchema);
            };
            let system = self.system_prompt_for(selection);
            let mut messages = vec![
                Message::stable_system(system),
                Message::user(prompts::question_message(
                    &state.question,
                    &state.assumptions,
                )),
            ];
            if let Some(feedback) = &state.feedback {
                messages.push(Message::user(repair_message(state, feedback)));
            }
            ModelRequest::new(purpose, state.question.clone(), messages)
                .with_json_schema(prompts::generation_schema())
                .with_max_tokens(prompts::GENERATION_MAX_TOKENS)
        };
        let reply = self.client.call(&request, log).await?;
        state.feedback = None;
        let node = match parse_reply(&reply.text) {
            Reply::Clarify(request) => {
                state.note("generate", "the model asks for clarification");
                self.finish(state, Decision::Clarify, None, None, Some(request));
                Node::Done
            }
            Reply::Decline(reason) => {
                state.note("generate", "the model declines");
                self.decline(state, reason)
            }
            Reply::Sql { sql, assumptions } => {
                for assumption in assumptions {
                    if !state.assumptions.contains(&assumption) {
                        state.assumptions.push(assumption);
                    }
                }
                state.note("generate", format!("{purpose}: SQL"));
                Node::Guard(sql)
            }
            Reply::Malformed(message) => {
                state.attempts += 1;
                // A reply cut off at the token limit is its own failure: small models
                // sometimes keep extending the SQL string, and quoting that text back
                // only invites more of it.
                let (message, instruction) = if reply.truncated {
                    (
                        "the reply was cut off at the token limit".to_string(),
                        "Your reply was too long and was cut off. Write a shorter, simpler \
                         query (join only the tables you need), then close the JSON object."
                            .to_string(),
                    )
                } else {
                    (
                        message,
                        "Reply with exactly one JSON object as described: \
                         {\"action\": \"sql\", \"sql\": \"SELECT ...\"}."
                            .to_string(),
                    )
                };
                state.note("generate", format!("malformed reply: {message}"));
                if state.first_attempt_ok.is_none() {
                    state.first_attempt_ok = Some(false);
                }
                state.fail(&reply.text, "malformed_reply", &message);
                self.after_failure(
                    state,
                    Feedback {
                        error_type: "malformed_reply".to_string(),
                        message,
                        instruction,
                        details: None,
                    },
                    true,
                )
            }
        };
        Ok(node)
    }

    fn guard(&self, state: &mut State, sql: String) -> Node {
        let checked = self.gate.check(&sql);
        let rendered = checked
            .as_ref()
            .map(|checked| checked.sql().to_string())
            .unwrap_or_else(|_| sql.clone());
        // A reply identical to a failed attempt would fail the same way: never run it.
        if state.failed_sql.contains(&normalise_sql(&sql))
            || state.failed_sql.contains(&normalise_sql(&rendered))
        {
            state.identical_nudges += 1;
            state.note(
                "guard",
                "identical to an attempt that already failed; not run",
            );
            if state.identical_nudges > MAX_IDENTICAL_NUDGES || state.mode.is_single_attempt() {
                return Node::GiveUp(
                    "the model kept sending back a query that had already failed".to_string(),
                );
            }
            let earlier = state
                .history
                .iter()
                .rev()
                .find(|attempt| {
                    normalise_sql(&attempt.sql) == normalise_sql(&sql)
                        || normalise_sql(&attempt.sql) == normalise_sql(&rendered)
                })
                .map(|attempt| format!("{}: {}", attempt.error_type, attempt.message))
                .unwrap_or_default();
            state.feedback = Some(Feedback {
                error_type: "identical_to_failed".to_string(),
                message: format!("you sent back the same query that already failed ({earlier})"),
                instruction: "That exact query fails. Do not send it again: change the part \
                              the error names, or take a different approach."
                    .to_string(),
                details: None,
            });
            return Node::Generate;
        }
        state.attempts += 1;
        if state.first_sql.is_none() {
            state.first_sql = Some(rendered.clone());
        }
        match checked {
            Ok(checked) => {
                state.note("guard", format!("accepted: {}", checked.sql()));
                Node::Execute(checked)
            }
            Err(refusal) => {
                state.note("guard", format!("refused: {refusal}"));
                if state.first_attempt_ok.is_none() {
                    state.first_attempt_ok = Some(false);
                }
                state.fail(&sql, ErrorType::Rejected.as_str(), &refusal.to_string());
                let writes = matches!(
                    refusal.reason,
                    RefusalReason::NotAQuery
                        | RefusalReason::DataModifyingCte
                        | RefusalReason::SelectInto
                        | RefusalReason::LockingClause
                );
                if writes {
                    return self.decline(
                        state,
                        format!(
                            "askdb only reads data; the statement was refused ({})",
                            refusal.reason.as_str()
                        ),
                    );
                }
                if !refusal.repairable {
                    return Node::GiveUp(format!("the guard refused the query: {refusal}"));
                }
                let error_type = if refusal.reason == RefusalReason::ParseError {
                    ErrorType::SyntaxError
                } else {
                    ErrorType::Rejected
                };
                self.after_failure(
                    state,
                    Feedback {
                        error_type: error_type.as_str().to_string(),
                        message: refusal.message.clone(),
                        instruction: prompts::repair_instruction(error_type)
                            .unwrap_or_default()
                            .to_string(),
                        details: None,
                    },
                    true,
                )
            }
        }
    }

    async fn execute(&self, state: &mut State, checked: CheckedQuery) -> Node {
        let outcome = self.gate.run(&checked).await;
        state.note(
            "execute",
            match &outcome {
                QueryOutcome::Rows(rows) => format!("{} row(s)", rows.row_count),
                QueryOutcome::Failed(error) => format!("{}: {}", error.error_type, error.message),
            },
        );
        Node::Inspect(outcome)
    }

    async fn inspect(&self, state: &mut State, outcome: QueryOutcome) -> Node {
        match outcome {
            QueryOutcome::Failed(error) => {
                if state.first_attempt_ok.is_none() {
                    state.first_attempt_ok = Some(false);
                }
                state.fail(&error.sql, error.error_type.as_str(), &error.to_string());
                state.note("inspect", format!("error: {}", error.error_type));
                match prompts::repair_instruction(error.error_type) {
                    Some(instruction) if error.repairable => {
                        let details = self.repair_details(state, &error);
                        self.after_failure(
                            state,
                            Feedback {
                                error_type: error.error_type.as_str().to_string(),
                                message: error.to_string(),
                                instruction: instruction.to_string(),
                                details,
                            },
                            true,
                        )
                    }
                    _ => Node::GiveUp(format!(
                        "{} is never repaired: {}",
                        error.error_type, error.message
                    )),
                }
            }
            QueryOutcome::Rows(result) => {
                let empty = looks_empty(&result.rows);
                if state.first_attempt_ok.is_none() {
                    state.first_attempt_ok = Some(true);
                }
                if !empty || state.mode.is_single_attempt() || state.diagnostic_used {
                    state.note(
                        "inspect",
                        if empty { "empty: answered as is" } else { "ok" },
                    );
                    return Node::Answer(result);
                }
                state.diagnostic_used = true;
                self.diagnose_empty(state, result).await
            }
        }
    }

    /// The one diagnostic of an empty (or all-NULL) result.
    async fn diagnose_empty(&self, state: &mut State, result: QueryResult) -> Node {
        let Some(analysis) = empty::analyse(&result.sql, self.gate.dialect()) else {
            state.note(
                "inspect",
                "empty; the query could not be analysed; answered as is",
            );
            return Node::Answer(result);
        };
        if analysis.anti_join {
            state.note(
                "inspect",
                "empty anti-join: nothing may be the right answer",
            );
            return Node::Answer(result);
        }
        let Some(probe_sql) = analysis.case_insensitive_sql.clone() else {
            state.note("inspect", "empty without text filters: no rows match");
            return Node::Answer(result);
        };
        let keys = self.key_columns(&result.tables);
        let only_key_lookups = analysis
            .text_filters
            .iter()
            .all(|filter| !filter.is_like && keys.contains(&filter.column.to_lowercase()));
        if only_key_lookups && !analysis.other_filters {
            state.note("inspect", "empty exact-key lookup: no such row");
            return Node::Answer(result);
        }
        let probe = self.gate.run_query(&probe_sql).await;
        let matched = matches!(&probe, QueryOutcome::Rows(rows) if !looks_empty(&rows.rows));
        if !matched {
            state.note(
                "inspect",
                "empty; the case-insensitive probe finds nothing either: no rows match",
            );
            return Node::Answer(result);
        }
        let mut findings = Vec::new();
        for filter in &analysis.text_filters {
            if let Some(finding) = self.stored_spelling(&result.tables, filter).await {
                findings.push(finding);
            }
        }
        state.note(
            "inspect",
            format!(
                "empty; case-insensitive probe matches: {}",
                findings.join(" ")
            ),
        );
        state.fail(
            &result.sql,
            "empty_result",
            "no rows; the text filters match only when case and spaces are ignored",
        );
        self.after_failure(
            state,
            Feedback {
                error_type: "empty_result".to_string(),
                message: "the query returned no rows".to_string(),
                instruction: prompts::case_mismatch_instruction(&findings),
                details: None,
            },
            true,
        )
    }

    /// Single-column primary and unique keys of the given tables (lower-cased).
    fn key_columns(&self, tables: &[String]) -> BTreeSet<String> {
        let mut keys = BTreeSet::new();
        for table in self.gate.schema() {
            if !tables
                .iter()
                .any(|name| name.eq_ignore_ascii_case(&table.name))
            {
                continue;
            }
            if table.primary_key.len() == 1 {
                keys.insert(table.primary_key[0].to_lowercase());
            }
            for unique in &table.unique {
                if unique.len() == 1 {
                    keys.insert(unique[0].to_lowercase());
                }
            }
        }
        keys
    }

    /// How a filter's value is really spelled in the table that owns the column.
    async fn stored_spelling(
        &self,
        tables: &[String],
        filter: &empty::TextFilter,
    ) -> Option<String> {
        let owner = self.gate.schema().iter().find(|table| {
            tables
                .iter()
                .any(|name| name.eq_ignore_ascii_case(&table.name))
                && table
                    .columns
                    .iter()
                    .any(|column| column.name.eq_ignore_ascii_case(&filter.column))
        })?;
        let column = format!("\"{}\"", filter.column.replace('"', "\"\""));
        let literal = format!("'{}'", filter.value.replace('\'', "''"));
        let condition = if filter.is_like {
            format!("LOWER(TRIM(CAST({column} AS TEXT))) LIKE LOWER({literal})")
        } else {
            format!("LOWER(TRIM(CAST({column} AS TEXT))) = LOWER(TRIM({literal}))")
        };
        let sql = format!(
            "SELECT DISTINCT {column} FROM \"{}\" WHERE {condition} LIMIT 5",
            owner.name.replace('"', "\"\"")
        );
        let QueryOutcome::Rows(rows) = self.gate.run_query(&sql).await else {
            return None;
        };
        let values: Vec<String> = rows
            .rows
            .iter()
            .filter_map(|row| row.first())
            .map(|value| match value {
                JsonValue::String(text) => format!("'{text}'"),
                other => other.to_string(),
            })
            .collect();
        if values.is_empty() {
            return None;
        }
        Some(format!(
            "{}.{} {} '{}' matches the stored value(s) {}.",
            owner.name,
            filter.column,
            if filter.is_like { "LIKE" } else { "=" },
            filter.value,
            values.join(", ")
        ))
    }

    /// Schema-aware details for a repair: who owns an unknown column and how to join to
    /// it; the types and samples of the tables involved in a type mismatch.
    fn repair_details(&self, state: &mut State, error: &QueryError) -> Option<String> {
        match error.error_type {
            ErrorType::UnknownColumn => {
                let column = unknown_column_name(&error.message)?;
                let owners = self.index.owners_of_column(&column);
                let used: Vec<String> = crate::gate::guard::check(&error.sql, self.gate.policy())
                    .map(|checked| checked.tables().to_vec())
                    .unwrap_or_default();
                let mut details = Vec::new();
                if owners.is_empty() {
                    details.push(format!(
                        "No table has a column named {column} or anything close to it. If \
                         the question needs data this database does not hold, reply with \
                         action \"decline\" and say what is missing."
                    ));
                    state.absent_columns.push(column.clone());
                    state.widen += 2;
                }
                for owner in owners.iter().take(3) {
                    state.forced_tables.insert(owner.clone());
                    let mut line = format!("Column {column} is in table {owner}.");
                    if !used.iter().any(|table| table == owner) {
                        if let Some(path) = self.index.join_path(&used, owner) {
                            let hops: Vec<String> = path
                                .iter()
                                .map(|(from, from_column, to, to_column)| {
                                    format!("{from}.{from_column} = {to}.{to_column}")
                                })
                                .collect();
                            line.push_str(&format!(" Join it via {}.", hops.join(", then ")));
                        }
                    }
                    if let Some(card) = self.cards.iter().find(|card| &card.table == owner) {
                        line.push('\n');
                        line.push_str(&card.text);
                    }
                    details.push(line);
                }
                Some(details.join("\n"))
            }
            ErrorType::UnknownTable => {
                state.widen += 3;
                let names: Vec<&str> = self.cards.iter().map(|card| card.table.as_str()).collect();
                Some(format!("The tables are: {}.", names.join(", ")))
            }
            ErrorType::TypeMismatch => {
                let used: Vec<String> = crate::gate::guard::check(&error.sql, self.gate.policy())
                    .map(|checked| checked.tables().to_vec())
                    .unwrap_or_default();
                let cards: Vec<&str> = self
                    .cards
                    .iter()
                    .filter(|card| used.contains(&card.table.to_lowercase()))
                    .map(|card| card.text.as_str())
                    .collect();
                (!cards.is_empty()).then(|| cards.join("\n"))
            }
            _ => None,
        }
    }

    /// Chooses what follows a failed attempt: a repair while attempts remain in agent
    /// mode, else an honest give-up.
    fn after_failure(&self, state: &mut State, feedback: Feedback, repairable: bool) -> Node {
        if state.mode.is_single_attempt() {
            return Node::GiveUp(format!(
                "{} mode makes one attempt: {}",
                state.mode.as_str(),
                feedback.message
            ));
        }
        if !repairable {
            return Node::GiveUp(feedback.message);
        }
        if state.absent_columns.len() >= ABSENT_COLUMNS_TO_DECLINE {
            let missing = state.absent_columns.join(", ");
            state.note(
                "inspect",
                format!("asked twice for columns no table has: {missing}"),
            );
            return self.decline(
                state,
                format!(
                    "the question needs data this database does not hold (no table has \
                     {missing}); askdb declines rather than invent it"
                ),
            );
        }
        if state.attempts >= MAX_ATTEMPTS {
            return Node::GiveUp(format!(
                "{MAX_ATTEMPTS} attempts failed; the last: {}",
                feedback.message
            ));
        }
        Node::PrepareRepair(feedback)
    }

    fn prepare_repair(&self, state: &mut State, feedback: Feedback) -> Node {
        state.note(
            "prepare_repair",
            format!(
                "strategy for {}: {}",
                feedback.error_type, feedback.instruction
            ),
        );
        let widens = feedback.error_type == ErrorType::UnknownColumn.as_str()
            || feedback.error_type == ErrorType::UnknownTable.as_str();
        state.feedback = Some(feedback);
        if widens {
            Node::SelectSchema
        } else {
            Node::Generate
        }
    }

    async fn answer(
        &self,
        state: &mut State,
        result: QueryResult,
        options: &AskOptions,
        log: &CallLog,
    ) -> Result<Node, AgentError> {
        let chart = answer::choose_chart(&result.columns, &result.rows);
        let mut explanation = None;
        let mut unverified = Vec::new();
        if result.rows.is_empty() {
            explanation = Some("No rows match.".to_string());
        } else if options.explain {
            let shown: Vec<&Vec<JsonValue>> =
                result.rows.iter().take(ROWS_FOR_EXPLANATION).collect();
            let prompt = format!(
                "Question: {}\nSQL: {}\nColumns: {}\nRows ({} of {}): {}\n\nAnswer the question in one to \
                 three plain sentences using only numbers that appear in the rows. No SQL, no \
                 markdown.",
                state.question,
                result.sql,
                result.columns.join(", "),
                shown.len(),
                result.row_count,
                serde_json::to_string(&shown).unwrap_or_default()
            );
            let request = ModelRequest::new(
                Purpose::WriteAnswer,
                state.question.clone(),
                vec![Message::user(prompt)],
            )
            .with_max_tokens(200);
            let reply = self.client.call(&request, log).await?;
            let text = reply.text.trim().to_string();
            unverified = answer::unverified_numbers(&text, &state.question, &result.rows);
            explanation = Some(text);
        }
        state.note(
            "answer",
            format!("{} row(s), chart {}", result.row_count, chart.kind),
        );
        let mut agent_result = self.base_result(state, Decision::Answer);
        agent_result.sql = Some(result.sql.clone());
        agent_result.columns = result.columns;
        agent_result.row_count = result.row_count;
        agent_result.truncated = result.truncated;
        agent_result.rows = result.rows;
        agent_result.tables_used = result.tables;
        agent_result.chart = chart;
        agent_result.explanation = explanation;
        agent_result.unverified_numbers = unverified;
        state.result = Some(agent_result);
        Ok(Node::Done)
    }

    fn base_result(&self, state: &State, decision: Decision) -> AgentResult {
        let (schema_mode, schema_tables) = match &state.selection {
            Some(selection) => (
                selection.mode.as_str().to_string(),
                selection
                    .tables
                    .iter()
                    .map(|table| table.table.clone())
                    .collect(),
            ),
            None => ("none".to_string(), Vec::new()),
        };
        AgentResult {
            question: state.question.clone(),
            mode: state.mode,
            decision,
            sql: None,
            columns: Vec::new(),
            rows: Vec::new(),
            row_count: 0,
            truncated: false,
            attempts: state.attempts,
            history: state.history.clone(),
            tables_used: Vec::new(),
            assumptions: state.assumptions.clone(),
            explanation: None,
            unverified_numbers: Vec::new(),
            chart: answer::choose_chart(&[], &[]),
            clarify: None,
            reason: None,
            schema_mode,
            schema_tables,
            tokens: Tokens::default(),
            cost_usd: 0.0,
            latency_ms: 0,
            model_calls: Vec::new(),
            trace: state.trace.clone(),
            first_attempt_ok: state.first_attempt_ok,
            first_sql: state.first_sql.clone(),
        }
    }

    /// Ends the question with a decline and its reason; nothing more runs.
    fn decline(&self, state: &mut State, reason: String) -> Node {
        self.finish(state, Decision::Decline, None, Some(reason), None);
        Node::Done
    }

    fn finish(
        &self,
        state: &mut State,
        decision: Decision,
        sql: Option<String>,
        reason: Option<String>,
        clarify: Option<ClarifyRequest>,
    ) {
        let mut result = self.base_result(state, decision);
        result.sql = sql;
        result.reason = reason;
        result.clarify = clarify;
        state.result = Some(result);
    }
}

/// The stable system prompt for a selection: instructions and the chosen cards.
fn system_prompt_for(gate: &Gate, cards: &[TableCard], selection: &Selection) -> String {
    let chosen: BTreeSet<&str> = selection.tables.iter().map(|t| t.table.as_str()).collect();
    let chosen_cards: Vec<&TableCard> = cards
        .iter()
        .filter(|card| chosen.contains(card.table.as_str()))
        .collect();
    let block = schema_block(&chosen_cards, gate.notes(), gate.dialect().as_str());
    prompts::system_prompt(gate.dialect(), &block)
}

/// What the agent would do with a question, before any model call: the ambiguity
/// decision, the selected tables with their scores, whole or linked, prompt tokens.
pub fn plan(
    gate: &Gate,
    cards: &[TableCard],
    index: &SchemaIndex,
    question: &str,
    options: &AskOptions,
) -> Result<Plan, AgentError> {
    let question = Agent::validate(question)?;
    let ambiguity = ambiguity::check(&question, gate.notes());
    let selection = index.select(&question, &options.select);
    let system = system_prompt_for(gate, cards, &selection);
    let prompt_tokens = crate::words::estimate_tokens(&system)
        + crate::words::estimate_tokens(&prompts::question_message(
            &question,
            &ambiguity.assumptions,
        ));
    Ok(Plan {
        question,
        ambiguity,
        selection,
        prompt_tokens,
    })
}

/// The repair prompt: the failure, what to do about it, schema-aware details, and every
/// earlier failed attempt so the model does not repeat one.
fn repair_message(state: &State, feedback: &Feedback) -> String {
    let mut text = format!(
        "Your query failed ({}): {}\nWhat to do: {}\n",
        feedback.error_type, feedback.message, feedback.instruction
    );
    if let Some(details) = &feedback.details {
        text.push_str(&format!("Schema facts:\n{details}\n"));
    }
    if !state.history.is_empty() {
        text.push_str("Failed attempts so far (do not repeat any):\n");
        for (number, attempt) in state.history.iter().enumerate() {
            // A malformed reply is shown shortened: the repair needs to know it failed,
            // not to read the runaway text again.
            let shown = if attempt.error_type == "malformed_reply" {
                crate::text::cut_text(&attempt.sql, MALFORMED_SHOWN_CHARS)
            } else {
                attempt.sql.clone()
            };
            text.push_str(&format!(
                "{}. {}\n   -> {}: {}\n",
                number + 1,
                shown,
                attempt.error_type,
                attempt.message
            ));
        }
    }
    text.push_str("Write a corrected query. Reply with the JSON object only.");
    text
}

/// The column an unknown-column error names: SQLite says `no such column: b.cust_nme`,
/// PostgreSQL says `column "cust_nme" does not exist` or `column b.cust_nme does not exist`.
fn unknown_column_name(message: &str) -> Option<String> {
    let tail = if let Some(rest) = message.split("no such column:").nth(1) {
        rest.split_whitespace().next()?.to_string()
    } else if let Some(rest) = message.split("column ").nth(1) {
        rest.split(" does not exist").next()?.trim().to_string()
    } else {
        return None;
    };
    let name = tail
        .trim_matches('"')
        .rsplit('.')
        .next()?
        .trim_matches('"')
        .to_string();
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests;
