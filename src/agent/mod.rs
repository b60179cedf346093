//! The agent: a question in, an answer out, with the SQL behind it and every attempt that
//! failed. This module is the state machine's entry and its nodes outside a round:
//!
//! ```text
//! rules -> select_schema -> generate -> try (guard, execute, vote) -> inspect
//!   inspect: rows -> the rule checks -> answer, or suspect (a failure)
//!            | hesitant rows or an empty result that stands -> next_step:
//!              a sampled second look, or the answer as it is
//!            | empty -> next_step: the one diagnostic -> answer or a failure
//!   failure -> failure::next_step: repair | resample | decline | give up
//!              | answer with warnings (a suspect answer whose one repair is spent)
//!              | rewrite (the rules' own fix, carried by the step) -> try
//!   repair / resample -> (select_schema when next_step widens it) -> generate
//! ```
//!
//! Each step's logic has its own home: the rules before any model call in
//! [`ambiguity`] and [`question_rules`]; every word sent to the model in [`prompts`];
//! one generation round (the request, the replies read, the candidates run and voted
//! on, the rows inspected) in `attempt`; the question's state in `state`; reading the
//! reply in [`reply`]; the vote among candidates in [`candidates`]; the empty-result
//! diagnostic in [`empty`]; the rule checks of an answer in [`plausibility`]; the schema
//! facts of a repair in [`repair_facts`]; what follows an attempt in
//! [`failure::next_step`]; the knobs in [`strategy`]; what a question returns in
//! `result`. Every database access goes through the gate; every model call through
//! [`ModelClient::call`]; every step is reported to the caller's [`events::Observer`].
//!
//! Baseline mode is the first attempt alone (same prompt, same candidates, no repair, no
//! diagnostic); plain mode is the reference prompt ([`prompts::plain_request`]).

pub mod ambiguity;
pub mod answer;
mod attempt;
pub mod candidates;
pub mod concept;
pub mod conversation;
pub mod empty;
pub mod events;
pub mod failure;
mod mysql_readings;
pub mod plausibility;
pub mod prompts;
pub mod question_rules;
mod render;
pub mod repair_facts;
pub mod reply;
mod result;
mod state;
pub mod strategy;
mod verified;

pub use mysql_readings::as_mysql_reads;
pub use render::{render_plan, render_text};
pub use result::{
    AgentResult, ClarifyRequest, Decision, FailedAttempt, FirstRound, ModelStep, Plan, Tokens,
    TraceStep,
};

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value as JsonValue;

use crate::examples::ExampleStore;
use crate::gate::{ErrorType, Gate, GateError, QueryResult};
use crate::linking::cards::TableCard;
use crate::linking::{SchemaIndex, SelectOptions, Selection};
use crate::llm::{CallLog, LlmError, ModelClient, ModelRequest, Warmed};
use conversation::Context;
use events::{AgentEvent, ChosenTable, NoObserver, Observer, RulesOutcome, SchemaMode};
use failure::{Failure, FailureKind, NextKind, NextStep, Outcome, Spent};
use prompts::{system_prompt_for, RepairTurn};
use reply::normalise_sql;
use state::{Node, Round, State};
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

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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
    schema_terms: ambiguity::SchemaTerms,
    /// Where the database's verified examples are kept, when questions use them.
    examples: Option<Arc<dyn ExampleStore>>,
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
            schema_terms: ambiguity::SchemaTerms::new(gate.schema(), gate.notes()),
            gate,
            client,
            cards,
            index,
            strategy,
            plain_schema,
            examples: None,
        })
    }

    /// The agent using the verified examples in `store`: like ones shown to the model,
    /// the same question answered by running its verified SQL again.
    pub fn with_examples(mut self, store: Arc<dyn ExampleStore>) -> Agent {
        self.examples = Some(store);
        self
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
            context: Context::default(),
            understood_as: None,
            written: Vec::new(),
            rendered: Vec::new(),
            asked: None,
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
            worked_examples: Vec::new(),
            used_examples: Vec::new(),
            answered_from_example: None,
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

    /// Reads the database's stable prompt prefix into the model server's prompt cache
    /// (llama.cpp) before the first question: restored from the copy the server saved at
    /// an earlier start, or sent once with a one-token reply and saved. Only for the
    /// whole schema: a linked prompt differs per question (None then).
    pub async fn warm_up(&self) -> Result<Option<Warmed>, AgentError> {
        let selection = self.index.select("warm-up", &SelectOptions::default());
        if selection.mode != crate::linking::SelectionMode::Whole {
            return Ok(None);
        }
        let request = self.first_warm_up_request(&selection);
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
            self.first_warm_up_request(&selection)
        };
        self.client.restore_prefix(&request).await
    }

    /// The warm-up of the prefix every first question's first round reads (under
    /// `first=`, that round's form, not the repairs').
    fn first_warm_up_request(&self, selection: &Selection) -> ModelRequest {
        let first = self.strategy.for_first_round();
        prompts::warm_up_request(
            &first,
            system_prompt_for(&self.gate, &self.cards, &first, selection),
        )
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
        if !matches!(self.rules(&mut state), Node::Examples | Node::SelectSchema) {
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
        self.ask_in_conversation(question, &Context::default(), options, observer)
            .await
    }

    /// Answers a question that continues the earlier turns of `context` (a first
    /// question when it has none): the rules judge it in that context, the model reads
    /// the turns after the schema and restates it as one standalone question
    /// (`understood_as`), and every step after is a first question's: the guard,
    /// repairs, candidates and the answer checks (which read the restatement).
    pub async fn ask_in_conversation(
        &self,
        question: &str,
        context: &Context,
        options: &AskOptions,
        observer: &dyn Observer,
    ) -> Result<AgentResult, AgentError> {
        let asked = Self::validate(question)?;
        let log = CallLog::default();
        // A reply naming an option of the clarification just asked is that earlier
        // question, clarified: it is asked in the earlier turns' context.
        let (question, context) = match context.clarified(&asked) {
            Some(clarified) => (
                clarified,
                Context::new(context.turns[..context.turns.len().saturating_sub(1)].to_vec()),
            ),
            None => (asked.clone(), context.clone()),
        };
        let clarified = question != asked;
        let mut state = self.new_state(question, options.mode, observer);
        state.context = context;
        let mut node = Node::Rules;
        loop {
            node = match node {
                Node::Rules => self.rules(&mut state),
                Node::Examples => self.find_examples(&mut state).await,
                Node::SelectSchema => self.select_schema(&mut state, options),
                Node::Generate(round) => self.generate(&mut state, round, &log).await?,
                Node::Try(sqls, round) => self.try_candidates(&mut state, sqls, round).await,
                Node::Inspect(result) => self.inspect(&mut state, result).await,
                Node::Failed(failure, facts) => self.after_failure(&mut state, failure, facts),
                Node::SearchConcept(failure) => {
                    self.search_concept(&mut state, failure, &log).await?
                }
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
                cache_read_tokens: record.cache_read_tokens,
                output_tokens: record.output_tokens,
                cost_usd: record.cost_usd,
                latency_ms: record.latency_ms,
                server_timings: record.server_timings,
            })
            .collect();
        let totals = log.totals();
        result.tokens = Tokens {
            input: totals.input_tokens,
            output: totals.output_tokens,
        };
        result.cost_usd = totals.cost_usd;
        result.latency_ms = state.ms();
        // The turn is recorded as asked; what it was understood as says the rest.
        result.question = asked;
        result.understood_as = match (state.understood_as.take(), clarified) {
            (Some(understood), _) if state.context.is_follow_up() || clarified => Some(understood),
            (_, true) => Some(state.question.clone()),
            _ => None,
        };
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
        let decision = ambiguity::check_in_context(
            &state.question,
            &state.context,
            self.gate.notes(),
            &self.schema_terms,
        );
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
        Node::Examples
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
        let mut selection = self.index.select(&state.linking_text(), &select);
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
            match &step {
                // The trace names a rewrite; its fix is noted when it runs.
                NextStep::Rewrite(_) => format!("{}: {} -> Rewrite", failure.kind, failure.message),
                _ => format!("{}: {} -> {step:?}", failure.kind, failure.message),
            },
        );
        let round = match step {
            NextStep::Decline(reason) => return self.decline(state, reason),
            NextStep::SearchConcept => return Node::SearchConcept(failure),
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
            // failure is never answered as is nor diagnosed: no decision, which the
            // caller reports.
            NextStep::AnswerWithWarnings | NextStep::Answer | NextStep::Diagnose => {
                return Node::Done
            }
        };
        // A repeat is not shown again: the conversation already holds the attempt.
        if failure.kind != FailureKind::IdenticalToFailed {
            state.repairs.push(RepairTurn {
                reply: state.failed_reply(failure.kind, &failure.sql),
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
        } else if options.explain && state.answered_from_example.is_none() {
            // A re-run of verified SQL asks no model, not even for the explanation.
            let shown: Vec<&Vec<JsonValue>> =
                result.rows.iter().take(ROWS_FOR_EXPLANATION).collect();
            let request = prompts::explanation_request(
                state.question_in_context(),
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
                state.question_in_context(),
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
            unverified =
                answer::unverified_numbers(&text, state.question_in_context(), &result.rows);
            explanation = Some(text);
        }
        state.note(
            "answer",
            format!("{} row(s), chart {}", result.row_count, chart.kind),
        );
        let mut agent_result = self.base_result(state, Decision::Answer);
        // The reply that wrote the SQL answered with, as the model wrote it: the answer
        // may be rows held from an earlier round (a suspect answer whose repair
        // failed), not the latest reply chosen.
        agent_result.answered_reply = state.written_reply(&result.sql);
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
            understood_as: None,
            examples: state.used_examples.clone(),
            answered_from_example: state.answered_from_example,
            asked: state.asked.clone(),
            answered_reply: None,
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
    let ambiguity = ambiguity::check(
        &question,
        gate.notes(),
        &ambiguity::SchemaTerms::new(gate.schema(), gate.notes()),
    );
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
