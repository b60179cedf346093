//! The agent: a question in, an answer out, with the SQL behind it and every attempt that
//! failed. This module is the state machine and nothing else:
//!
//! ```text
//! rules -> select_schema -> generate -> try (guard, execute, vote) -> inspect
//!   inspect: rows -> the rule checks -> answer, or suspect (a failure)
//!            | empty -> the one diagnostic -> answer or a failure
//!   failure -> failure::next_step: repair | resample | decline | give up
//!              | answer with warnings (a suspect answer whose one repair is spent)
//!              | rewrite (the rules' own fix of a suspect answer) -> try
//!   repair / resample -> (select_schema when retrieval widens) -> generate
//! ```
//!
//! Each step's logic has its own home: the rules before any model call in
//! [`ambiguity`] and [`scope`]; every word sent to the model in [`prompts`]; reading the
//! reply in [`reply`]; the vote among candidates in [`candidates`]; the empty-result
//! diagnostic in [`empty`]; the rule checks of an answer in [`plausibility`]; the schema
//! facts of a repair in [`repair`]; what follows a
//! failure in [`failure::next_step`]; the knobs in [`strategy`]. Every database access
//! goes through the gate; every model call through [`ModelClient::call`]; every step is
//! reported to the caller's [`events::Observer`].
//!
//! Baseline mode is the first attempt alone (same prompt, same candidates, no repair, no
//! diagnostic); plain mode is the reference prompt ([`prompts::plain_request`]).

pub mod ambiguity;
pub mod answer;
pub mod candidates;
pub mod empty;
pub mod events;
pub mod failure;
pub mod plausibility;
pub mod prompts;
mod render;
pub mod repair;
pub mod reply;
pub mod scope;
pub mod strategy;

pub use render::{render_plan, render_text};

use std::collections::BTreeSet;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value as JsonValue;

use crate::gate::{
    ErrorType, Gate, GateError, QueryError, QueryOutcome, QueryResult, RefusalReason,
};
use crate::linking::cards::{schema_block, TableCard};
use crate::linking::{SchemaIndex, SelectOptions, Selection};
use crate::llm::{
    CallLog, Confidence, LlmError, ModelClient, ModelReply, ModelRequest, Purpose, Warmed,
};
use answer::ChartSpec;
use events::{AgentEvent, ChosenTable, NoObserver, Observer, RulesOutcome, SchemaMode};
use failure::{Failure, FailureKind, NextKind, NextStep, Outcome, Progress, Spent};
use prompts::RepairTurn;
use reply::{normalise_sql, Reply};
use strategy::{CardFormat, SampleWhen, SchemaScope, Strategy};

/// The most generation rounds (model calls for SQL) one question gets. The one place
/// this cap lives.
pub const MAX_ATTEMPTS: u32 = 3;

/// The longest question accepted, in characters.
pub const MAX_QUESTION_CHARS: usize = 2_000;

/// Rows shown to the model when it writes the explanation.
const ROWS_FOR_EXPLANATION: usize = 20;

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Repairs, the empty-result diagnostic, sampled candidates, up to three attempts.
    #[default]
    Agent,
    /// The first attempt alone: no repair, no diagnostic.
    Baseline,
    /// The reference prompt a plain demo would send: every table as CREATE TABLE with
    /// three sample rows, the question, a one-field `{"sql"}` reply; no rules, notes,
    /// linking, ambiguity checks or repair; one attempt through the same gate. What
    /// askdb's own prompt and loop must beat.
    Plain,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Agent, Mode::Baseline, Mode::Plain];

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
    /// The model has not read this database's schema yet (a server's first read is
    /// still under way): ask with the few tables the question links to and only the
    /// notes they need, so the question does not wait a minute for a long prompt.
    pub compact_prompt: bool,
}

/// Tables a compact prompt ([`AskOptions::compact_prompt`]) keeps by score.
pub const COMPACT_PROMPT_TABLES: usize = 3;

/// How the question ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Answer,
    Clarify,
    Decline,
    GiveUp,
}

impl Decision {
    pub const ALL: [Decision; 4] = [
        Decision::Answer,
        Decision::Clarify,
        Decision::Decline,
        Decision::GiveUp,
    ];

    /// The decision's name, as results, the query log and traces carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Answer => "answer",
            Decision::Clarify => "clarify",
            Decision::Decline => "decline",
            Decision::GiveUp => "give_up",
        }
    }

    pub fn parse(text: &str) -> Option<Decision> {
        Decision::ALL
            .into_iter()
            .find(|decision| decision.as_str() == text)
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One failed attempt, as the history shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedAttempt {
    pub sql: String,
    pub error_type: FailureKind,
    pub message: String,
    /// Why the guard refused, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<RefusalReason>,
}

impl FailedAttempt {
    /// Whether this statement reached the database: not refused by the guard (even a
    /// refusal worded as a database error), and of a kind that runs.
    pub fn was_executed(&self) -> bool {
        self.reason.is_none() && self.error_type.can_have_run()
    }
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
    pub purpose: Purpose,
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
    /// Generation rounds made (each may try several candidates).
    pub attempts: u32,
    /// Candidate statements run or refused, over every round.
    #[serde(default)]
    pub candidates_tried: u32,
    /// Every failed attempt, in order.
    pub history: Vec<FailedAttempt>,
    pub tables_used: Vec<String>,
    pub assumptions: Vec<String>,
    pub explanation: Option<String>,
    /// Numbers in the explanation that are not in the rows: shown flagged, not as fact.
    pub unverified_numbers: Vec<String>,
    /// The rule checks the answer still fails (after its one suspect repair, or with no
    /// attempt left), each with its check id and the fact: shown as a warning, never as
    /// a plain answer. Empty for an answer that passed them.
    #[serde(default)]
    pub warnings: Vec<plausibility::Finding>,
    pub chart: ChartSpec,
    pub clarify: Option<ClarifyRequest>,
    /// Why the question was declined or given up.
    pub reason: Option<String>,
    /// Whether the schema went whole or linked (or plain, or none when the rules ended
    /// the question first), and which tables.
    pub schema_mode: SchemaMode,
    pub schema_tables: Vec<String>,
    /// The strategy the question was asked with (`reply=sql,...`).
    #[serde(default)]
    pub strategy: String,
    pub tokens: Tokens,
    pub cost_usd: f64,
    pub latency_ms: u64,
    pub model_calls: Vec<ModelStep>,
    pub trace: Vec<TraceStep>,
    /// The OpenTelemetry trace of this question (32 hex digits), when the caller traced
    /// it and traces are exported; the agent itself leaves it empty.
    #[serde(default)]
    pub trace_id: Option<String>,
    /// Whether the first round's answer returned rows without error.
    pub first_attempt_ok: Option<bool>,
    /// The SQL of the first round's answer (or its first failure), for rescue/broken
    /// accounting.
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

/// The requests of a question's first round ([`Agent::first_round_requests`]).
#[derive(Debug, Clone)]
pub struct FirstRound {
    /// The one reply at temperature 0.
    pub greedy: ModelRequest,
    /// The strategy's candidates at its temperature.
    pub sampled: ModelRequest,
    /// The plain reference prompt.
    pub plain: ModelRequest,
}

/// How a generation round asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// One reply at temperature 0.
    Greedy,
    /// The strategy's number of candidates at its temperature.
    Sampled,
}

/// One candidate of a round after the gate.
struct Tried {
    sql: String,
    outcome: Result<QueryResult, Failure>,
}

enum Node {
    Rules,
    SelectSchema,
    Generate(Round),
    Try(Vec<String>, Round),
    Inspect(QueryResult),
    Failed(Failure, Option<String>),
    Answer(QueryResult),
    Done,
}

struct State<'o> {
    question: String,
    mode: Mode,
    strategy: Strategy,
    started: Instant,
    /// When the latest generation round began (ms since `started`): the round's length
    /// estimates the next one's against the time budget.
    round_started_ms: u64,
    /// The question is asked with a compact prompt ([`AskOptions::compact_prompt`]).
    compact: bool,
    observer: &'o dyn Observer,
    selection: Option<Selection>,
    widen: usize,
    forced_tables: BTreeSet<String>,
    assumptions: Vec<String>,
    attempts: u32,
    candidates_tried: u32,
    history: Vec<FailedAttempt>,
    /// The conversation of failed attempts the next round continues.
    repairs: Vec<RepairTurn>,
    failed_sql: Vec<String>,
    absent_columns: Vec<String>,
    /// What the question has spent of the things it gets once.
    spent: Spent,
    /// The latest answer the rule checks found suspect, with what they found: answered
    /// with warnings when its repair is spent or cannot finish.
    suspect: Option<(QueryResult, Vec<plausibility::Finding>)>,
    /// The warnings the answer is shown with.
    warnings: Vec<plausibility::Finding>,
    /// An answer the round kept while it sampled a second opinion (an empty result or a
    /// hesitant reply under doubt): it votes with the samples.
    kept: Option<QueryResult>,
    /// The confidence of the question's first greedy reply, when it was asked for.
    first_confidence: Option<Confidence>,
    first_attempt_ok: Option<bool>,
    first_sql: Option<String>,
    trace: Vec<TraceStep>,
    result: Option<AgentResult>,
}

impl State<'_> {
    fn ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn note(&mut self, node: &str, note: impl Into<String>) {
        let elapsed_ms = self.ms();
        self.trace.push(TraceStep {
            node: node.to_string(),
            note: note.into(),
            elapsed_ms,
        });
    }

    fn emit(&self, event: AgentEvent) {
        self.observer.observe(&event);
    }

    fn progress(&self) -> Progress {
        Progress {
            attempts: self.attempts,
            max_attempts: MAX_ATTEMPTS,
            spent: self.spent,
            absent_columns: self.absent_columns.len(),
            last_absent_column: self.absent_columns.last().cloned(),
            single_attempt: self.mode.is_single_attempt(),
            suspect_held: self.suspect.is_some(),
            linked_schema: self
                .selection
                .as_ref()
                .is_some_and(|selection| selection.mode != crate::linking::SelectionMode::Whole),
            samples_on_doubt: self.strategy.samples()
                && self.strategy.sample_when == SampleWhen::Doubt,
            out_of_time: self.out_of_time(),
        }
    }

    /// Whether another round, as long as the latest one, would end past the strategy's
    /// time budget.
    fn out_of_time(&self) -> bool {
        let Some(budget_s) = self.strategy.time_budget_s else {
            return false;
        };
        let now = self.ms();
        let last_round = now.saturating_sub(self.round_started_ms);
        now.saturating_add(last_round) > u64::from(budget_s) * 1000
    }

    fn first_round(&mut self, ok: bool, sql: &str) {
        if self.first_attempt_ok.is_none() {
            self.first_attempt_ok = Some(ok);
            self.first_sql = Some(sql.to_string());
        }
    }
}

/// The agent over one database and one model.
pub struct Agent {
    gate: Gate,
    client: ModelClient,
    cards: Vec<TableCard>,
    index: SchemaIndex,
    strategy: Strategy,
    /// Every table as CREATE TABLE with three sample rows: the plain reference prompt's
    /// schema.
    plain_schema: String,
    /// The words of the table and column names, for the vague-word rules.
    schema_words: BTreeSet<String>,
}

impl Agent {
    /// Builds the schema cards and the linking index through the gate, with the default
    /// strategy.
    pub async fn new(gate: Gate, client: ModelClient) -> Result<Agent, AgentError> {
        Agent::with_strategy(gate, client, Strategy::default()).await
    }

    /// Builds the agent with a chosen strategy. Card sizes are counted by the model
    /// server's own tokenizer where it has one, so the whole-or-linked decision uses
    /// real token counts.
    pub async fn with_strategy(
        gate: Gate,
        client: ModelClient,
        strategy: Strategy,
    ) -> Result<Agent, AgentError> {
        let mut cards = crate::linking::cards::build_cards(&gate).await?;
        for card in &mut cards {
            let text = match strategy.cards {
                CardFormat::Notes => &card.text,
                CardFormat::Rows => &card.rows_text,
            };
            let (tokens, _) = client.count_tokens(text).await;
            card.tokens = usize::try_from(tokens).unwrap_or(usize::MAX);
        }
        let index = SchemaIndex::build(&gate, &cards).await?;
        let plain_schema = crate::linking::cards::sample_rows_schema(&gate).await?;
        Ok(Agent {
            schema_words: schema_words_of(&gate),
            gate,
            client,
            cards,
            index,
            strategy,
            plain_schema,
        })
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    pub fn client(&self) -> &ModelClient {
        &self.client
    }

    pub fn strategy(&self) -> &Strategy {
        &self.strategy
    }

    fn new_state<'o>(&self, question: String, mode: Mode, observer: &'o dyn Observer) -> State<'o> {
        State {
            question,
            mode,
            strategy: self.strategy,
            started: Instant::now(),
            round_started_ms: 0,
            compact: false,
            observer,
            selection: None,
            widen: 0,
            forced_tables: BTreeSet::new(),
            assumptions: Vec::new(),
            attempts: 0,
            candidates_tried: 0,
            history: Vec::new(),
            repairs: Vec::new(),
            failed_sql: Vec::new(),
            absent_columns: Vec::new(),
            spent: Spent::default(),
            suspect: None,
            warnings: Vec::new(),
            kept: None,
            first_confidence: None,
            first_attempt_ok: None,
            first_sql: None,
            trace: Vec::new(),
            result: None,
        }
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
        system_prompt_for(&self.gate, &self.cards, &self.strategy, selection)
    }

    /// Reads the database's stable prompt prefix into the model server's prompt cache
    /// (llama.cpp) before the first question: restored from the copy the server saved at
    /// an earlier start, or sent once with a one-token reply and saved. Only for the
    /// whole schema: a linked prompt differs per question (None then).
    pub async fn warm_up(&self) -> Result<Option<Warmed>, AgentError> {
        let selection = self.index.select("warm-up", &SelectOptions::default());
        if selection.mode != crate::linking::SelectionMode::Whole {
            return Ok(None);
        }
        let request = prompts::warm_up_request(&self.strategy, self.system_prompt_for(&selection));
        Ok(Some(
            self.client
                .warm_prefix(&request, &CallLog::default())
                .await?,
        ))
    }

    /// Puts the prefix [`Agent::warm_up`] (or, with `plain`, [`Agent::warm_up_plain`])
    /// read back into the model server's cache from its saved copy; false when there is
    /// none (a linked schema has no prefix of its own). For evaluations, which ask
    /// several prompts of one database in turn.
    pub async fn restore_prefix(&self, plain: bool) -> bool {
        let request = if plain {
            self.plain_warm_up_request()
        } else {
            let selection = self.index.select("warm-up", &SelectOptions::default());
            if selection.mode != crate::linking::SelectionMode::Whole {
                return false;
            }
            prompts::warm_up_request(&self.strategy, self.system_prompt_for(&selection))
        };
        self.client.restore_prefix(&request).await
    }

    fn plain_warm_up_request(&self) -> ModelRequest {
        prompts::plain_request(
            self.gate.dialect(),
            &self.plain_schema,
            "How many tables are there?",
        )
        .with_max_tokens(1)
    }

    /// The same for the plain reference prompt's prefix (every table with three sample
    /// rows), so an evaluation treats the reference prompt as it treats the agent's.
    pub async fn warm_up_plain(&self) -> Result<Warmed, AgentError> {
        let request = self.plain_warm_up_request();
        Ok(self
            .client
            .warm_prefix(&request, &CallLog::default())
            .await?)
    }

    /// The requests of a question's first round as the agent would send them (its rules
    /// and schema selection applied), each asking for its replies' confidence, and the
    /// plain reference prompt's request: what `askdb eval pool` asks to measure how
    /// candidates should be chosen. None for a question the rules end before any call.
    pub fn first_round_requests(&self, question: &str) -> Result<Option<FirstRound>, AgentError> {
        let question = Self::validate(question)?;
        let mut state = self.new_state(question, Mode::Agent, &NoObserver);
        if !matches!(self.rules(&mut state), Node::SelectSchema) {
            return Ok(None);
        }
        self.select_schema(&mut state, &AskOptions::default());
        let plain_state = self.new_state(state.question.clone(), Mode::Plain, &NoObserver);
        let (Some(greedy), Some(sampled), Some(plain)) = (
            self.request(&state, Round::Greedy),
            self.request(&state, Round::Sampled),
            self.request(&plain_state, Round::Greedy),
        ) else {
            return Ok(None);
        };
        Ok(Some(FirstRound {
            greedy: greedy.with_logprobs(),
            sampled: sampled.with_logprobs(),
            plain: plain.with_logprobs(),
        }))
    }

    /// Answers one question.
    pub async fn ask(
        &self,
        question: &str,
        options: &AskOptions,
    ) -> Result<AgentResult, AgentError> {
        self.ask_observed(question, options, &NoObserver).await
    }

    /// Answers one question, reporting each step to `observer` as it happens.
    pub async fn ask_observed(
        &self,
        question: &str,
        options: &AskOptions,
        observer: &dyn Observer,
    ) -> Result<AgentResult, AgentError> {
        let question = Self::validate(question)?;
        let log = CallLog::default();
        let mut state = self.new_state(question, options.mode, observer);
        let mut node = Node::Rules;
        loop {
            node = match node {
                Node::Rules => self.rules(&mut state),
                Node::SelectSchema => self.select_schema(&mut state, options),
                Node::Generate(round) => self.generate(&mut state, round, &log).await?,
                Node::Try(sqls, round) => self.try_candidates(&mut state, sqls, round).await,
                Node::Inspect(result) => self.inspect(&mut state, result).await,
                Node::Failed(failure, facts) => self.after_failure(&mut state, failure, facts),
                Node::Answer(result) => self.answer(&mut state, result, options, &log).await?,
                Node::Done => break,
            };
        }
        let mut result = state.result.take().ok_or_else(|| {
            AgentError::Gate(GateError::Query(
                "the agent stopped without a decision".to_string(),
            ))
        })?;
        result.model_calls = log
            .records()
            .iter()
            .map(|record| ModelStep {
                purpose: record.purpose,
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
        result.latency_ms = state.ms();
        state.emit(AgentEvent::Finished {
            started_ms: result.latency_ms,
            decision: result.decision,
            attempts: result.attempts,
            rows: result.row_count,
        });
        Ok(result)
    }

    /// The rules that decide before any model call: restricted columns and writes are
    /// declined, unresolved vague words asked about, named periods stated.
    fn rules(&self, state: &mut State) -> Node {
        if state.mode == Mode::Plain {
            // The reference prompt has no rules of askdb's: straight to the model.
            return Node::SelectSchema;
        }
        let started_ms = state.ms();
        let decision = ambiguity::check(&state.question, self.gate.notes(), &self.schema_words);
        state
            .assumptions
            .extend(decision.assumptions.iter().cloned());
        let outcome = if decision.restricted_column.is_some() || decision.write_request.is_some() {
            RulesOutcome::Decline
        } else if decision.clarify.is_some() {
            RulesOutcome::Clarify
        } else {
            RulesOutcome::Continue
        };
        state.emit(AgentEvent::Rules {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            outcome,
            assumptions: state.assumptions.clone(),
        });
        if let Some(column) = decision.restricted_column {
            state.note("rules", format!("asks for restricted {column}"));
            return self.decline(
                state,
                format!("{column} is restricted on this database: askdb never reads or shows it"),
            );
        }
        if let Some(reason) = decision.write_request {
            state.note("rules", "asks to change data");
            return self.decline(state, reason);
        }
        if let Some(clarify) = decision.clarify {
            state.note(
                "rules",
                format!("unresolved vague word: {}", clarify.question),
            );
            let request = ClarifyRequest {
                question: clarify.question,
                options: clarify.options,
            };
            self.finish(state, Decision::Clarify, None, Some(request));
            return Node::Done;
        }
        state.note(
            "rules",
            format!("{} assumption(s)", state.assumptions.len()),
        );
        Node::SelectSchema
    }

    fn select_schema(&self, state: &mut State, options: &AskOptions) -> Node {
        let started_ms = state.ms();
        if state.mode == Mode::Plain {
            state.note("select_schema", "plain: every table with three sample rows");
            state.emit(AgentEvent::SchemaSelected {
                started_ms,
                elapsed_ms: 0,
                mode: SchemaMode::Plain,
                tables: self
                    .cards
                    .iter()
                    .map(|card| ChosenTable {
                        table: card.table.clone(),
                        score: 0.0,
                    })
                    .collect(),
                prompt_tokens: crate::words::estimate_tokens(&self.plain_schema),
            });
            return Node::Generate(Round::Greedy);
        }
        let mut select = options.select;
        select.widen = select.widen.max(state.widen);
        select.force_linking |= self.strategy.schema == SchemaScope::Linked;
        if options.compact_prompt {
            state.compact = true;
            select.force_linking = true;
            select.k = select.k.min(COMPACT_PROMPT_TABLES);
        }
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
        state.emit(AgentEvent::SchemaSelected {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            mode: selection.mode.into(),
            tables: selection
                .tables
                .iter()
                .map(|table| ChosenTable {
                    table: table.table.clone(),
                    score: table.score,
                })
                .collect(),
            prompt_tokens: selection.prompt_tokens,
        });
        state.selection = Some(selection);
        let first = if state.attempts == 0
            && self.strategy.samples()
            && self.strategy.sample_when == SampleWhen::Always
        {
            Round::Sampled
        } else {
            Round::Greedy
        };
        // A widened retry keeps the round its failure asked for.
        if state.attempts > 0 {
            return Node::Generate(self.repair_round());
        }
        Node::Generate(first)
    }

    /// How a repair round asks: sampled when the strategy samples at all and does not
    /// ask for greedy repairs.
    fn repair_round(&self) -> Round {
        if self.strategy.samples() && !self.strategy.greedy_repairs {
            Round::Sampled
        } else {
            Round::Greedy
        }
    }

    fn request(&self, state: &State, round: Round) -> Option<ModelRequest> {
        if state.mode == Mode::Plain {
            return Some(prompts::plain_request(
                self.gate.dialect(),
                &self.plain_schema,
                &state.question,
            ));
        }
        let selection = state.selection.as_ref()?;
        let system = if state.compact {
            compact_system_prompt(
                &self.gate,
                &self.cards,
                &self.strategy,
                selection,
                &state.question,
            )
        } else {
            self.system_prompt_for(selection)
        };
        let request = prompts::generation_request(
            &self.strategy,
            &state.question,
            system,
            prompts::question_message(&state.question, &state.assumptions),
            &state.repairs,
        );
        Some(match round {
            Round::Greedy if self.strategy.confidence_floor.is_some() => request.with_logprobs(),
            Round::Greedy => request,
            Round::Sampled => request
                .with_candidates(self.strategy.candidates)
                .with_temperature(self.strategy.temperature),
        })
    }

    async fn call(
        &self,
        state: &State<'_>,
        request: &ModelRequest,
        log: &CallLog,
    ) -> Result<ModelReply, AgentError> {
        let started_ms = state.ms();
        let reply = self.client.call(request, log).await?;
        let truncated = u32::from(reply.truncated)
            + reply
                .alternatives
                .iter()
                .map(|alternative| u32::from(alternative.truncated))
                .sum::<u32>();
        state.emit(AgentEvent::ModelCall {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            purpose: request.purpose,
            model: reply.model.clone(),
            input_tokens: reply.input_tokens,
            output_tokens: reply.output_tokens,
            cost_usd: reply.cost_usd,
            candidates: request.candidates,
            truncated,
            prompt: request
                .messages
                .iter()
                .map(|message| message.content.clone())
                .collect(),
            replies: std::iter::once(reply.text.clone())
                .chain(
                    reply
                        .alternatives
                        .iter()
                        .map(|alternative| alternative.text.clone()),
                )
                .collect(),
        });
        Ok(reply)
    }

    async fn generate(
        &self,
        state: &mut State<'_>,
        round: Round,
        log: &CallLog,
    ) -> Result<Node, AgentError> {
        let Some(request) = self.request(state, round) else {
            return Ok(Node::SelectSchema);
        };
        state.round_started_ms = state.ms();
        let reply = self.call(state, &request, log).await?;
        if state.attempts == 0 && round == Round::Greedy {
            state.first_confidence = reply.confidence;
        }
        state.attempts += 1;
        let replies: Vec<(String, bool)> = std::iter::once((reply.text.clone(), reply.truncated))
            .chain(
                reply
                    .alternatives
                    .iter()
                    .map(|alternative| (alternative.text.clone(), alternative.truncated)),
            )
            .collect();
        let mut sqls: Vec<String> = Vec::new();
        let mut declines = Vec::new();
        let mut repeats = 0;
        let mut unreadable = None;
        for (index, (text, truncated)) in replies.iter().enumerate() {
            match reply::parse_reply(text) {
                // A cut-off reply's SQL is incomplete however it parses.
                _ if *truncated => {
                    unreadable.get_or_insert((FailureKind::CutOff, text.clone()));
                }
                Reply::Sql { sql, assumptions } => {
                    for assumption in assumptions {
                        if !state.assumptions.contains(&assumption) {
                            state.assumptions.push(assumption);
                        }
                    }
                    let normal = normalise_sql(&sql);
                    if state.failed_sql.contains(&normal) {
                        repeats += 1;
                    } else if !sqls.iter().any(|seen| normalise_sql(seen) == normal) {
                        sqls.push(sql);
                    }
                }
                Reply::Clarify(request) if index == 0 && round == Round::Greedy => {
                    state.note("generate", "the model asks for clarification");
                    self.finish(state, Decision::Clarify, None, Some(request));
                    return Ok(Node::Done);
                }
                Reply::Clarify(_) => {}
                Reply::Decline(reason) => declines.push(reason),
                Reply::Malformed(message) => {
                    unreadable.get_or_insert((FailureKind::MalformedReply, message));
                }
            }
        }
        state.note(
            "generate",
            format!(
                "{}: {} candidate(s), {} new SQL",
                request.purpose,
                replies.len(),
                sqls.len()
            ),
        );
        if !sqls.is_empty() {
            return Ok(Node::Try(sqls, round));
        }
        // No new SQL: the most telling reason, in this order.
        if declines.len() * 2 > replies.len() || (round == Round::Greedy && !declines.is_empty()) {
            state.note("generate", "the model declines");
            let reason = declines.swap_remove(0);
            return Ok(self.decline(state, reason));
        }
        let (kind, message, text) = if repeats > 0 {
            (
                FailureKind::IdenticalToFailed,
                "the same query that already failed".to_string(),
                reply.text.clone(),
            )
        } else {
            let (kind, detail) = unreadable.unwrap_or((
                FailureKind::MalformedReply,
                "the reply holds no SQL".to_string(),
            ));
            let message = if kind == FailureKind::CutOff {
                "the reply was cut off at the token limit".to_string()
            } else {
                detail
            };
            (kind, message, reply.text.clone())
        };
        state.first_round(false, &text);
        Ok(Node::Failed(
            Failure {
                kind,
                refusal: None,
                message,
                sql: text,
                repairable: true,
                fix: None,
            },
            None,
        ))
    }

    /// Runs every candidate of a round through the gate and keeps the one the vote
    /// chooses (the only one, when there is one).
    async fn try_candidates(&self, state: &mut State<'_>, sqls: Vec<String>, round: Round) -> Node {
        let mut tried = Vec::new();
        for (index, sql) in sqls.into_iter().enumerate() {
            state.candidates_tried += 1;
            let candidate = self.try_one(state, index, sql).await;
            if candidate.outcome.is_err() {
                // As written, so a later reply of the same text is known for a repeat.
                state.failed_sql.push(normalise_sql(&candidate.sql));
            }
            tried.push(candidate);
        }
        // The answer kept from the greedy round (an empty result under doubt) votes too.
        let kept = state.kept.take();
        let mut results: Vec<&QueryResult> = kept.iter().collect();
        let mut origin: Vec<Option<usize>> = kept.iter().map(|_| None).collect();
        for (index, candidate) in tried.iter().enumerate() {
            if let Ok(result) = &candidate.outcome {
                results.push(result);
                origin.push(Some(index));
            }
        }
        let voters: Vec<candidates::Voter<'_>> = results
            .iter()
            .enumerate()
            .map(|(index, result)| candidates::Voter { index, result })
            .collect();
        if let Some(vote) = candidates::choose(&voters) {
            if round == Round::Sampled || voters.len() > 1 {
                state.note(
                    "vote",
                    format!(
                        "{} of {} candidate(s) agree (groups {:?})",
                        vote.agreeing, vote.voters, vote.groups
                    ),
                );
                state.emit(AgentEvent::Vote {
                    started_ms: state.ms(),
                    chosen: vote.chosen,
                    agreeing: vote.agreeing,
                    voters: vote.voters,
                    groups: vote.groups.clone(),
                });
            }
            let chosen = results[vote.chosen].clone();
            if let Some(Some(index)) = origin.get(vote.chosen) {
                state.first_round(true, &tried[*index].sql);
            }
            if round == Round::Sampled {
                // A vote already took a second look: its answer is not doubted again.
                state.spent.diagnostic |= kept.is_some();
            }
            return Node::Inspect(chosen);
        }
        // Nothing ran: the first candidate's failure speaks for the round.
        let Some(first) = tried.into_iter().next() else {
            return Node::Failed(
                Failure {
                    kind: FailureKind::MalformedReply,
                    refusal: None,
                    message: "no candidate to run".to_string(),
                    sql: String::new(),
                    repairable: true,
                    fix: None,
                },
                None,
            );
        };
        let Err(mut failure) = first.outcome else {
            return Node::Done;
        };
        state.first_round(false, &first.sql);
        let facts = self.repair_facts(state, &failure);
        if failure.kind == FailureKind::Database(ErrorType::UnknownColumn) {
            // A join on a column one of its tables lacks, where one foreign key links the
            // two: the rules write the join on that key; next_step decides if it runs.
            failure.fix =
                repair::join_on_foreign_key(&failure.sql, self.gate.dialect(), self.gate.schema())
                    .map(|sql| plausibility::RuleFix {
                        sql,
                        change: "with the join on the foreign key that links its tables"
                            .to_string(),
                    });
        }
        Node::Failed(failure, facts)
    }

    async fn try_one(&self, state: &mut State<'_>, index: usize, sql: String) -> Tried {
        let started_ms = state.ms();
        let checked = self.gate.check(&sql);
        state.emit(AgentEvent::Guard {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            candidate: index,
            sql: sql.clone(),
            accepted: checked.is_ok(),
            detail: match &checked {
                Ok(checked) => checked.sql().to_string(),
                Err(refusal) => refusal.to_string(),
            },
        });
        let checked = match checked {
            Ok(checked) => checked,
            Err(refusal) => {
                state.note("guard", format!("refused: {refusal}"));
                let error = QueryError::from_refusal(refusal, &sql);
                return Tried {
                    outcome: Err(failure_of(&error)),
                    sql,
                };
            }
        };
        state.note("guard", format!("accepted: {}", checked.sql()));
        let started_ms = state.ms();
        let outcome = self.gate.run(&checked).await;
        let (rows, error_type, error, sqlstate, hint) = match &outcome {
            QueryOutcome::Rows(rows) => (Some(rows.row_count), None, None, None, None),
            QueryOutcome::Failed(error) => (
                None,
                Some(error.error_type),
                Some(error.message.clone()),
                error.sqlstate.clone(),
                error.hint.clone(),
            ),
        };
        state.emit(AgentEvent::Executed {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            candidate: index,
            sql: checked.sql().to_string(),
            rows,
            error_type,
            error,
            sqlstate,
            hint,
        });
        match outcome {
            QueryOutcome::Rows(result) => {
                state.note("execute", format!("{} row(s)", result.row_count));
                Tried {
                    sql,
                    outcome: Ok(result),
                }
            }
            QueryOutcome::Failed(error) => {
                state.note(
                    "execute",
                    format!("{}: {}", error.error_type, error.message),
                );
                Tried {
                    sql,
                    outcome: Err(failure_of(&error)),
                }
            }
        }
    }

    /// Rows came back: an answer, unless a rule check finds them suspect (one repair
    /// naming the fact) or they look empty, where the one diagnostic (and under a
    /// doubting strategy, one sampled second look) decides.
    async fn inspect(&self, state: &mut State<'_>, result: QueryResult) -> Node {
        let empty = empty::looks_empty(&result.rows);
        // The checks come first: an empty sum over another year is suspect for its
        // filter, before the empty-result diagnostic looks at its text filters.
        if state.mode != Mode::Plain {
            let answer = plausibility::Answer {
                question: &state.question,
                sql: &result.sql,
                dialect: self.gate.dialect(),
                columns: &result.columns,
                rows: &result.rows,
                tables: &result.tables,
                notes: self.gate.notes(),
                schema: self.gate.schema(),
                cards: &self.cards,
            };
            let findings = plausibility::check_result(&answer);
            if !findings.is_empty() {
                // Repeated rows and years read as dates have a fix the rules write
                // themselves; any other finding needs the model's repair, which is told
                // every fact at once.
                let fix = plausibility::rule_fix(&answer, &findings);
                return self.suspect(state, result, findings, fix);
            }
        }
        if !empty {
            let hesitant = self.hesitant(state)
                && failure::next_step(&Outcome::Hesitant, &state.progress()).step
                    == NextStep::Resample;
            state.spent.confidence_judged = true;
            if hesitant {
                // Rows, but the model hesitated while writing them: one sampled second
                // look, in which this answer votes too.
                state.note(
                    "inspect",
                    "the reply's least likely token is under the confidence floor; sampling a second look",
                );
                state.kept = Some(result);
                return Node::Generate(Round::Sampled);
            }
        }
        if !empty || state.mode.is_single_attempt() || state.spent.diagnostic {
            state.note(
                "inspect",
                if empty { "empty: answered as is" } else { "ok" },
            );
            return Node::Answer(result);
        }
        state.spent.diagnostic = true;
        let started_ms = state.ms();
        let (diagnosis, probe_sql) = empty::diagnose(&self.gate, &result).await;
        let finding = match &diagnosis {
            empty::Diagnosis::Explained(why) | empty::Diagnosis::Stands(why) => why.clone(),
            empty::Diagnosis::CaseMismatch { findings, .. } => {
                format!("case-insensitive probe matches: {}", findings.join(" "))
            }
        };
        state.emit(AgentEvent::EmptyProbe {
            started_ms,
            elapsed_ms: state.ms() - started_ms,
            sql: probe_sql,
            finding: finding.clone(),
        });
        match diagnosis {
            empty::Diagnosis::CaseMismatch { findings, .. } => {
                state.note("inspect", format!("empty; {finding}"));
                Node::Failed(
                    Failure {
                        kind: FailureKind::CaseMismatch,
                        refusal: None,
                        message: "no rows; the text filters match only when case and spaces \
                                  are ignored"
                            .to_string(),
                        sql: result.sql.clone(),
                        repairable: true,
                        fix: None,
                    },
                    Some(prompts::case_mismatch_facts(&findings)),
                )
            }
            empty::Diagnosis::Explained(why) => {
                state.note("inspect", format!("empty: {why}"));
                Node::Answer(result)
            }
            empty::Diagnosis::Stands(why) => {
                let doubt = failure::next_step(&Outcome::EmptyStands, &state.progress()).step
                    == NextStep::Resample;
                if doubt {
                    // An empty answer is doubtful: one sampled second look, in which the
                    // empty answer votes too.
                    state.note("inspect", format!("empty ({why}); sampling a second look"));
                    state.kept = Some(result);
                    return Node::Generate(Round::Sampled);
                }
                state.note("inspect", format!("empty: {why}"));
                Node::Answer(result)
            }
        }
    }

    /// Whether the question's first greedy reply was written with a token less likely
    /// than the strategy's confidence floor (whether that earns a second look is
    /// [`failure::next_step`]'s to say).
    fn hesitant(&self, state: &State<'_>) -> bool {
        match (self.strategy.confidence_floor, state.first_confidence) {
            (Some(floor), Some(confidence)) => confidence.min_logprob < floor,
            _ => false,
        }
    }

    /// Rows that fail a rule check: a `suspect` failure naming each fact, with the
    /// periods the notes give the tables as schema facts.
    fn suspect(
        &self,
        state: &mut State<'_>,
        result: QueryResult,
        findings: Vec<plausibility::Finding>,
        fix: Option<plausibility::RuleFix>,
    ) -> Node {
        let message = findings
            .iter()
            .map(|finding| format!("{} ({})", finding.message, finding.check))
            .collect::<Vec<_>>()
            .join("; ");
        state.note("inspect", format!("suspect: {message}"));
        let periods: Vec<(String, Option<String>, Option<String>)> = self
            .gate
            .notes()
            .tables
            .iter()
            .filter_map(|(table, note)| {
                let holds = note.holds.as_ref()?;
                Some((table.clone(), holds.from.clone(), holds.to.clone()))
            })
            .collect();
        let failure = Failure {
            kind: FailureKind::Suspect,
            refusal: None,
            message,
            sql: result.sql.clone(),
            repairable: true,
            fix,
        };
        let checks: Vec<plausibility::Check> =
            findings.iter().map(|finding| finding.check).collect();
        state.suspect = Some((result, findings));
        Node::Failed(failure, prompts::suspect_facts(&checks, &periods))
    }

    /// Schema facts for the repair of a failure (who owns an unknown column, how to
    /// join it; the cards of the tables in a type mismatch), and the retrieval changes
    /// the failure asks for.
    fn repair_facts(&self, state: &mut State, failure: &Failure) -> Option<String> {
        match failure.kind {
            FailureKind::Database(ErrorType::UnknownColumn) => {
                // Every column the error names gets its facts, so one repair can mend
                // them all instead of meeting them one attempt at a time.
                let mut texts = Vec::new();
                let mut absent_here = false;
                for column in repair::unknown_columns(&failure.message) {
                    let fact = repair::column_fact(
                        &column,
                        &failure.sql,
                        self.gate.dialect(),
                        &self.index,
                    );
                    for table in fact.owner_tables() {
                        state.forced_tables.insert(table.to_string());
                    }
                    // Absent columns are counted per failure (the decline rule counts
                    // failures that invent columns), so only the first is recorded.
                    if fact.is_absent() && !absent_here {
                        absent_here = true;
                        state.absent_columns.push(column.column.clone());
                        state.widen += 2;
                    }
                    texts.push(prompts::column_fact_text(&fact));
                }
                (!texts.is_empty()).then(|| texts.join("\n"))
            }
            FailureKind::Database(ErrorType::UnknownTable) => {
                state.widen += 3;
                let names: Vec<&str> = self.cards.iter().map(|card| card.table.as_str()).collect();
                Some(format!("The tables are: {}.", names.join(", ")))
            }
            FailureKind::Database(ErrorType::TypeMismatch) => {
                let used: Vec<String> = self
                    .gate
                    .check(&failure.sql)
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

    /// Records a failure and follows [`failure::next_step`].
    fn after_failure(
        &self,
        state: &mut State,
        mut failure: Failure,
        facts: Option<String>,
    ) -> Node {
        let next = failure::next_step(&Outcome::Failed(&failure), &state.progress());
        failure.kind = next.kind.unwrap_or(failure.kind);
        let step = next.step;
        if step == NextStep::AnswerWithWarnings {
            if let Some(node) = self.answer_suspect(state, &failure) {
                return node;
            }
        }
        state.history.push(FailedAttempt {
            sql: failure.sql.clone(),
            error_type: failure.kind,
            message: failure.message.clone(),
            reason: failure.refusal,
        });
        if failure.kind.can_have_run() || failure.kind == FailureKind::Database(ErrorType::Rejected)
        {
            state.failed_sql.push(normalise_sql(&failure.sql));
        }
        state.spent.record(failure.kind, &step);
        state.emit(AgentEvent::Failed {
            started_ms: state.ms(),
            kind: failure.kind,
            message: failure.message.clone(),
            next: step.kind(),
            rewrite: match &step {
                NextStep::Rewrite(fix) => Some(fix.change.clone()),
                _ => None,
            },
        });
        state.note(
            "failed",
            format!("{}: {} -> {step:?}", failure.kind, failure.message),
        );
        let round = match step {
            NextStep::Decline(reason) => return self.decline(state, reason),
            NextStep::GiveUp(reason) => {
                self.finish(state, Decision::GiveUp, Some(reason), None);
                return Node::Done;
            }
            NextStep::Repair => self.repair_round(),
            NextStep::Resample => Round::Sampled,
            NextStep::Rewrite(fix) => {
                state.note("rewrite", format!("{}: {}", fix.change, fix.sql));
                return Node::Try(vec![fix.sql], Round::Greedy);
            }
            // Only held suspect rows are answered with warnings (answer_suspect), and a
            // failure is never answered as is: no decision, which the caller reports.
            NextStep::AnswerWithWarnings | NextStep::Answer => return Node::Done,
        };
        // A repeat is not shown again: the conversation already holds the attempt.
        if failure.kind != FailureKind::IdenticalToFailed {
            state.repairs.push(RepairTurn {
                reply: prompts::quoted_reply(failure.kind, &failure.sql),
                feedback: prompts::feedback_message(
                    failure.kind,
                    &failure.message,
                    facts.as_deref(),
                ),
            });
        }
        if next.reselect_schema {
            return Node::SelectSchema;
        }
        Node::Generate(round)
    }

    /// The held suspect rows, answered with warnings instead of the failure: when their
    /// one repair is spent or no attempt is left, or when their repair ended in a
    /// give-up. None when no suspect answer is held.
    fn answer_suspect(&self, state: &mut State<'_>, failure: &Failure) -> Option<Node> {
        let (result, findings) = state.suspect.take()?;
        if failure.kind != FailureKind::Suspect {
            // The repair failed: the failure is history, the earlier rows the answer.
            state.history.push(FailedAttempt {
                sql: failure.sql.clone(),
                error_type: failure.kind,
                message: failure.message.clone(),
                reason: failure.refusal,
            });
        }
        state.emit(AgentEvent::Failed {
            started_ms: state.ms(),
            kind: failure.kind,
            message: failure.message.clone(),
            next: NextKind::AnswerWithWarnings,
            rewrite: None,
        });
        state.note(
            "failed",
            format!(
                "{}: {} -> answered with {} warning(s)",
                failure.kind,
                failure.message,
                findings.len()
            ),
        );
        state.warnings = findings;
        Some(Node::Answer(result))
    }

    async fn answer(
        &self,
        state: &mut State<'_>,
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
            let request = prompts::explanation_request(
                &state.question,
                &result.sql,
                &result.columns,
                &serde_json::to_string(&shown).unwrap_or_default(),
                shown.len(),
                result.row_count,
                self.gate.notes().currency.as_deref(),
            );
            let reply = self.call(state, &request, log).await?;
            let (text, findings) = plausibility::check_explanation(
                reply.text.trim(),
                &state.question,
                &result.rows,
                self.gate.notes(),
            );
            for finding in findings {
                if finding.check == plausibility::Check::ExplanationCurrency {
                    // Corrected in the text: the notes say what the money is.
                    state.note("answer", finding.message);
                } else if !state.warnings.contains(&finding) {
                    state.warnings.push(finding);
                }
            }
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
        agent_result.warnings = std::mem::take(&mut state.warnings);
        state.result = Some(agent_result);
        Ok(Node::Done)
    }

    fn base_result(&self, state: &State, decision: Decision) -> AgentResult {
        let (schema_mode, schema_tables) = match (&state.selection, state.mode) {
            (_, Mode::Plain) => (
                SchemaMode::Plain,
                self.cards.iter().map(|card| card.table.clone()).collect(),
            ),
            (Some(selection), _) => (
                selection.mode.into(),
                selection
                    .tables
                    .iter()
                    .map(|table| table.table.clone())
                    .collect(),
            ),
            (None, _) => (SchemaMode::None, Vec::new()),
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
            candidates_tried: state.candidates_tried,
            history: state.history.clone(),
            tables_used: Vec::new(),
            assumptions: state.assumptions.clone(),
            explanation: None,
            unverified_numbers: Vec::new(),
            warnings: Vec::new(),
            chart: answer::choose_chart(&[], &[]),
            clarify: None,
            reason: None,
            schema_mode,
            schema_tables,
            strategy: if state.mode == Mode::Plain {
                "plain".to_string()
            } else {
                state.strategy.to_string()
            },
            tokens: Tokens::default(),
            cost_usd: 0.0,
            latency_ms: 0,
            model_calls: Vec::new(),
            trace: state.trace.clone(),
            trace_id: None,
            first_attempt_ok: state.first_attempt_ok,
            first_sql: state.first_sql.clone(),
        }
    }

    /// Ends the question with a decline and its reason; nothing more runs.
    fn decline(&self, state: &mut State, reason: String) -> Node {
        self.finish(state, Decision::Decline, Some(reason), None);
        Node::Done
    }

    fn finish(
        &self,
        state: &mut State,
        decision: Decision,
        reason: Option<String>,
        clarify: Option<ClarifyRequest>,
    ) {
        if decision == Decision::GiveUp {
            state.note("give_up", reason.clone().unwrap_or_default());
        }
        let mut result = self.base_result(state, decision);
        result.reason = reason;
        result.clarify = clarify;
        state.result = Some(result);
    }
}

/// The words of a database's visible table and column names.
fn schema_words_of(gate: &Gate) -> BTreeSet<String> {
    ambiguity::schema_words(gate.schema().iter().flat_map(|table| {
        std::iter::once(table.name.as_str())
            .chain(table.columns.iter().map(|column| column.name.as_str()))
    }))
}

/// A gate failure as the agent's typed failure.
fn failure_of(error: &QueryError) -> Failure {
    Failure {
        kind: FailureKind::Database(error.error_type),
        refusal: error.reason,
        message: error.message.clone(),
        sql: error.sql.clone(),
        repairable: error.repairable,
        fix: None,
    }
}

/// The stable system prompt for a selection: instructions and the chosen cards.
fn system_prompt_for(
    gate: &Gate,
    cards: &[TableCard],
    strategy: &Strategy,
    selection: &Selection,
) -> String {
    system_prompt_with_notes(gate, cards, strategy, selection, gate.notes())
}

/// The system prompt of a compact question: the selection's tables with only the notes
/// they and the question need ([`crate::linking::cards::notes_for`]).
fn compact_system_prompt(
    gate: &Gate,
    cards: &[TableCard],
    strategy: &Strategy,
    selection: &Selection,
    question: &str,
) -> String {
    let chosen: BTreeSet<&str> = selection.tables.iter().map(|t| t.table.as_str()).collect();
    let notes = crate::linking::cards::notes_for(gate.notes(), &chosen, question);
    system_prompt_with_notes(gate, cards, strategy, selection, &notes)
}

fn system_prompt_with_notes(
    gate: &Gate,
    cards: &[TableCard],
    strategy: &Strategy,
    selection: &Selection,
    notes: &crate::schema::SchemaNotes,
) -> String {
    let chosen: BTreeSet<&str> = selection.tables.iter().map(|t| t.table.as_str()).collect();
    let chosen_cards: Vec<&TableCard> = cards
        .iter()
        .filter(|card| chosen.contains(card.table.as_str()))
        .collect();
    let block = schema_block(
        &chosen_cards,
        notes,
        gate.dialect().as_str(),
        strategy.cards == CardFormat::Rows,
    );
    let holds_dates = chosen_cards.iter().any(|card| {
        let columns = gate
            .schema()
            .iter()
            .find(|table| table.name == card.table)
            .map(|table| table.columns.as_slice())
            .unwrap_or_default();
        card.holds_dates(columns)
    });
    prompts::system_prompt(gate.dialect(), strategy, &block, holds_dates)
}

/// What the agent would do with a question, before any model call: the rules' decision,
/// the selected tables with their scores, whole or linked, prompt tokens.
pub fn plan(
    gate: &Gate,
    cards: &[TableCard],
    index: &SchemaIndex,
    question: &str,
    options: &AskOptions,
) -> Result<Plan, AgentError> {
    let question = Agent::validate(question)?;
    let ambiguity = ambiguity::check(&question, gate.notes(), &schema_words_of(gate));
    let selection = index.select(&question, &options.select);
    let system = system_prompt_for(gate, cards, &Strategy::default(), &selection);
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

#[cfg(test)]
mod tests;
