//! The state of one question as the state machine carries it between steps: the nodes,
//! how a round asks, and everything the question has gathered and spent so far.

use std::collections::BTreeSet;
use std::time::Instant;

use super::conversation::Context;
use super::events::{AgentEvent, Observer, UsedExample};
use super::failure::Failure;
use super::failure::{Progress, Spent};
use super::prompts::RepairTurn;
use super::strategy::{SampleWhen, Strategy};
use super::{plausibility, AgentResult, FailedAttempt, Mode, TraceStep, MAX_ATTEMPTS};
use crate::gate::QueryResult;
use crate::linking::Selection;
use crate::llm::Confidence;

/// How a generation round asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Round {
    /// One reply at temperature 0.
    Greedy,
    /// The strategy's number of candidates at its temperature.
    Sampled,
}

/// One candidate of a round after the gate.
pub(super) struct Tried {
    pub(super) sql: String,
    pub(super) outcome: Result<QueryResult, Failure>,
}

pub(super) enum Node {
    Rules,
    /// The verified examples like the question: a re-run, or worked examples.
    Examples,
    SelectSchema,
    Generate(Round),
    Try(Vec<String>, Round),
    Inspect(QueryResult),
    Failed(Failure, Option<String>),
    /// A column no table has, named twice: look for the concept under another name.
    SearchConcept(Failure),
    Answer(QueryResult),
    Done,
}

/// A reply that wrote SQL, as the model wrote it.
pub(super) struct Written {
    /// Its SQL, whitespace-folded.
    pub(super) sql: String,
    pub(super) text: String,
    /// Its restatement (a follow-up's "Understood as").
    pub(super) understood_as: Option<String>,
}

pub(super) struct State<'o> {
    /// The question as the prompt asks it (a reply to a clarification is the earlier
    /// question with the option chosen).
    pub(super) question: String,
    /// The earlier turns of the conversation it continues (none for a first question).
    pub(super) context: Context,
    /// The standalone restatement of a follow-up, from the reply whose rows answered it
    /// (else the latest reply that gave one).
    pub(super) understood_as: Option<String>,
    /// Each reply that wrote SQL, once per whitespace-folded SQL: the vote's choice
    /// brings its own restatement, and an assistant turn shows a reply as written, so a
    /// server that kept its tokens reads them from the prompt cache instead of again.
    pub(super) written: Vec<Written>,
    /// Each statement the guard passed as it ran (re-rendered, LIMIT included) to the
    /// SQL as written, both whitespace-folded: a failure names what ran.
    pub(super) rendered: Vec<(String, String)>,
    /// The user message the question was first asked with (examples, earlier turns'
    /// shape and all): a later follow-up shows it again byte for byte.
    pub(super) asked: Option<String>,
    pub(super) mode: Mode,
    pub(super) strategy: Strategy,
    pub(super) started: Instant,
    /// When the latest generation round began (ms since `started`): the round's length
    /// estimates the next one's against the time budget.
    pub(super) round_started_ms: u64,
    /// The question is asked with a compact prompt ([`AskOptions::compact_prompt`]).
    pub(super) compact: bool,
    pub(super) observer: &'o dyn Observer,
    pub(super) selection: Option<Selection>,
    pub(super) widen: usize,
    pub(super) forced_tables: BTreeSet<String>,
    pub(super) assumptions: Vec<String>,
    pub(super) attempts: u32,
    pub(super) candidates_tried: u32,
    pub(super) history: Vec<FailedAttempt>,
    /// The conversation of failed attempts the next round continues.
    pub(super) repairs: Vec<RepairTurn>,
    pub(super) failed_sql: Vec<String>,
    pub(super) absent_columns: Vec<String>,
    /// What the question has spent of the things it gets once.
    pub(super) spent: Spent,
    /// The latest answer the rule checks found suspect, with what they found: answered
    /// with warnings when its repair is spent or cannot finish.
    pub(super) suspect: Option<(QueryResult, Vec<plausibility::Finding>)>,
    /// The warnings the answer is shown with.
    pub(super) warnings: Vec<plausibility::Finding>,
    /// An answer the round kept while it sampled a second opinion (an empty result or a
    /// hesitant reply under doubt): it votes with the samples.
    pub(super) kept: Option<QueryResult>,
    /// The confidence of the question's first greedy reply, when it was asked for.
    pub(super) first_confidence: Option<Confidence>,
    pub(super) first_attempt_ok: Option<bool>,
    pub(super) first_sql: Option<String>,
    pub(super) trace: Vec<TraceStep>,
    pub(super) result: Option<AgentResult>,
    /// The verified examples the prompt shows, best first.
    pub(super) worked_examples: Vec<crate::examples::Example>,
    /// Every verified example the question used, with its role.
    pub(super) used_examples: Vec<UsedExample>,
    /// The verified example whose SQL answered without the model.
    pub(super) answered_from_example: Option<i64>,
}

impl State<'_> {
    pub(super) fn ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    pub(super) fn note(&mut self, node: &str, note: impl Into<String>) {
        let elapsed_ms = self.ms();
        self.trace.push(TraceStep {
            node: node.to_string(),
            note: note.into(),
            elapsed_ms,
        });
    }

    pub(super) fn emit(&self, event: AgentEvent) {
        self.observer.observe(&event);
    }

    pub(super) fn progress(&self) -> Progress {
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
    pub(super) fn out_of_time(&self) -> bool {
        let Some(budget_s) = self.strategy.time_budget_s else {
            return false;
        };
        let now = self.ms();
        let last_round = now.saturating_sub(self.round_started_ms);
        now.saturating_add(last_round) > u64::from(budget_s) * 1000
    }

    /// The question as the rule checks of an answer read it: a follow-up as understood
    /// in its context, else as asked.
    pub(super) fn question_in_context(&self) -> &str {
        match (&self.understood_as, self.context.is_follow_up()) {
            (Some(understood), true) => understood,
            _ => &self.question,
        }
    }

    /// What schema linking reads: a follow-up with the earlier questions it continues,
    /// so "only the ones in Pune" still links the tables of the bills it narrows.
    pub(super) fn linking_text(&self) -> String {
        let mut text = self.context.earlier_questions().join(" ");
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(&self.question);
        text
    }

    /// Keeps a reply that wrote `sql` as the model wrote it, and its restatement, which
    /// becomes the question's until a chosen reply brings its own.
    pub(super) fn wrote(&mut self, sql: &str, text: &str, understood_as: Option<String>) {
        if self.understood_as.is_none() {
            self.understood_as.clone_from(&understood_as);
        }
        let sql = super::reply::normalise_sql(sql);
        match self.written.iter_mut().find(|written| written.sql == sql) {
            Some(written) => {
                if written.understood_as.is_none() {
                    written.understood_as = understood_as;
                }
            }
            None => self.written.push(Written {
                sql,
                text: text.to_string(),
                understood_as,
            }),
        }
    }

    /// The chosen reply's restatement becomes the question's.
    pub(super) fn chosen(&mut self, sql: &str) {
        let normal = super::reply::normalise_sql(sql);
        if let Some(text) = self
            .written
            .iter()
            .find(|written| written.sql == normal)
            .and_then(|written| written.understood_as.clone())
        {
            self.understood_as = Some(text);
        }
    }

    /// A failed attempt as its repair's assistant turn shows it: the reply as written
    /// where a reply wrote this SQL, else as [`super::prompts::quoted_reply`] quotes it
    /// (a malformed or runaway reply, which wrote no SQL, shortened).
    pub(super) fn failed_reply(&self, kind: super::failure::FailureKind, sql: &str) -> String {
        self.written_reply(sql)
            .unwrap_or_else(|| super::prompts::quoted_reply(kind, sql))
    }

    /// Keeps which SQL as written ran as `ran`.
    pub(super) fn ran_as(&mut self, sql: &str, ran: &str) {
        let ran = super::reply::normalise_sql(ran);
        if !self.rendered.iter().any(|(key, _)| *key == ran) {
            self.rendered.push((ran, super::reply::normalise_sql(sql)));
        }
    }

    /// The reply whose SQL is `sql` as the model wrote it, its SQL block closed (see
    /// [`super::prompts::closed_reply`]); None when no reply wrote it.
    pub(super) fn written_reply(&self, sql: &str) -> Option<String> {
        let mut normal = super::reply::normalise_sql(sql);
        if let Some((_, written)) = self.rendered.iter().find(|(ran, _)| *ran == normal) {
            normal = written.clone();
        }
        self.written
            .iter()
            .find(|written| written.sql == normal)
            .map(|written| super::prompts::closed_reply(&written.text))
    }

    pub(super) fn first_round(&mut self, ok: bool, sql: &str) {
        if self.first_attempt_ok.is_none() {
            self.first_attempt_ok = Some(ok);
            self.first_sql = Some(sql.to_string());
        }
    }
}
