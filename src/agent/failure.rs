//! Why an attempt failed, as a type, and the one function that decides what happens
//! after any attempt ([`next_step`]): of a failure (repair, resample, the rules' rewrite,
//! decline, give up, answer with warnings, and whether the schema is selected again), and
//! of rows the agent doubts (a sampled second look, or the answer). What a question gets
//! once is one [`Spent`] record. Every failure the agent can meet has a kind here; a kind
//! without a next step does not compile, and a test walks every kind.
//!
//! Kinds serialize as the stable snake_case names the run records and the API have always
//! used: a database error by its taxonomy name (`unknown_column`), a guard refusal as
//! `rejected` (or `syntax_error` when it did not parse), and the agent's own kinds
//! (`malformed_reply`, `cut_off`, `identical_to_failed`, `empty_result`,
//! `case_mismatch`, `absent_column`, `suspect`).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::plausibility::RuleFix;
use crate::gate::{ErrorType, RefusalReason};

/// What went wrong with one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// The database (or the guard, as `Rejected` / `SyntaxError`) refused or failed it.
    Database(ErrorType),
    /// The reply held no SQL the agent could read.
    MalformedReply,
    /// The reply stopped at the token limit.
    CutOff,
    /// The reply repeated a query that already failed; it was not run again.
    IdenticalToFailed,
    /// No rows (or only NULLs), and the one diagnostic found nothing to fix.
    EmptyResult,
    /// No rows, but the text filters match when case and spaces are ignored.
    CaseMismatch,
    /// No rows, and a text filter's value is stored in another column than the one
    /// compared with it.
    ValueElsewhere,
    /// A column no table has, not even by a near spelling: data the database lacks.
    AbsentColumn,
    /// Rows came back, but a rule check says they do not answer the question (another
    /// period, a table that does not hold it, the wrong breakdown, another currency:
    /// [`super::plausibility`]).
    Suspect,
}

impl FailureKind {
    /// Every kind the agent meets: the database's and the guard's, then its own.
    pub fn all() -> Vec<FailureKind> {
        let mut kinds: Vec<FailureKind> = ErrorType::ALL
            .into_iter()
            .map(FailureKind::Database)
            .collect();
        kinds.extend([
            FailureKind::MalformedReply,
            FailureKind::CutOff,
            FailureKind::IdenticalToFailed,
            FailureKind::EmptyResult,
            FailureKind::CaseMismatch,
            FailureKind::ValueElsewhere,
            FailureKind::AbsentColumn,
            FailureKind::Suspect,
        ]);
        kinds
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Database(error_type) => error_type.as_str(),
            FailureKind::MalformedReply => "malformed_reply",
            FailureKind::CutOff => "cut_off",
            FailureKind::IdenticalToFailed => "identical_to_failed",
            FailureKind::EmptyResult => "empty_result",
            FailureKind::CaseMismatch => "case_mismatch",
            FailureKind::ValueElsewhere => "value_elsewhere",
            FailureKind::AbsentColumn => "absent_column",
            FailureKind::Suspect => "suspect",
        }
    }

    pub fn parse(text: &str) -> Option<FailureKind> {
        FailureKind::all()
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }

    /// Whether a failure of this kind can have reached the database (a refusal, an
    /// unreadable reply or a repeat never did). The guard also words some refusals as the
    /// database would (`syntax_error`, `unknown_column`), so whether one attempt ran is
    /// [`super::FailedAttempt::was_executed`], which also knows who refused it.
    pub fn can_have_run(self) -> bool {
        !matches!(
            self,
            FailureKind::Database(ErrorType::Rejected)
                | FailureKind::MalformedReply
                | FailureKind::CutOff
                | FailureKind::IdenticalToFailed
        )
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FailureKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FailureKind {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        FailureKind::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown failure kind {text:?}")))
    }
}

/// One failure, with what the next attempt must be told.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub kind: FailureKind,
    /// The guard's reason, when the guard refused.
    pub refusal: Option<RefusalReason>,
    /// The database's (or the agent's) words.
    pub message: String,
    /// The statement, or the reply when there was no statement.
    pub sql: String,
    /// Whether the database calls this error repairable (false for permission and
    /// read-only failures, connection errors, writes the guard refused).
    pub repairable: bool,
    /// The fix the rules wrote for this failure, when they wrote one: a suspect answer's
    /// (the rule checks), or a join on a column its table lacks rewritten on the foreign
    /// key. [`next_step`] decides whether it is taken.
    pub fix: Option<RuleFix>,
}

/// What an attempt came to, where what follows is not simply the answer: a failure, or
/// rows the agent doubts. The state machine reports it; [`next_step`] decides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome<'a> {
    /// The attempt failed.
    Failed(&'a Failure),
    /// Rows from the question's first greedy reply, written with a token less likely than
    /// the strategy's confidence floor.
    Hesitant,
    /// No rows (or only NULLs), before any diagnostic.
    Empty,
    /// No rows, and the one diagnostic found nothing that explains or mends them.
    EmptyStands,
}

/// What the state machine does next.
#[derive(Debug, Clone, PartialEq)]
pub enum NextStep {
    /// Ask again with the failure and the instruction for its kind.
    Repair,
    /// Ask again for several sampled candidates: the same reply twice means the prompt
    /// alone will not change it; of doubted rows, a second look in which they vote too.
    Resample,
    /// End with a decline: the intent is refused (a write) or the data is not held.
    Decline(String),
    /// End with an honest give-up that lists every attempt.
    GiveUp(String),
    /// Answer with the suspect rows after all, each failed check shown as a warning:
    /// the one suspect repair is spent, or no attempt remains, or the repair of a
    /// suspect answer ended in a give-up (rows with a warning say more than no answer).
    AnswerWithWarnings,
    /// Run the rules' own fix instead of asking the model: of a suspect answer (a join
    /// that repeats rows taken out, a column of years compared as the year), its one
    /// suspect repair; of a join on a column its table lacks, the join on the foreign
    /// key. It costs no model call.
    Rewrite(RuleFix),
    /// Run the one empty-result diagnostic (a probe of the text filters) on rows that
    /// look empty.
    Diagnose,
    /// Answer with the rows as they are: a doubt with no round left to settle it.
    Answer,
    /// Before declining for a column no table has, look for the concept under another
    /// name (the columns' names and descriptions, then one small model call): repair
    /// with the column found, or decline saying what was looked for and where.
    SearchConcept,
}

impl NextStep {
    /// The step's name, without what it carries.
    pub fn kind(&self) -> NextKind {
        match self {
            NextStep::Repair => NextKind::Repair,
            NextStep::Resample => NextKind::Resample,
            NextStep::Decline(_) => NextKind::Decline,
            NextStep::GiveUp(_) => NextKind::GiveUp,
            NextStep::AnswerWithWarnings => NextKind::AnswerWithWarnings,
            NextStep::Rewrite(_) => NextKind::Rewrite,
            NextStep::Diagnose => NextKind::Diagnose,
            NextStep::Answer => NextKind::Answer,
            NextStep::SearchConcept => NextKind::SearchConcept,
        }
    }
}

/// The name of a [`NextStep`], as step events, traces and metrics carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NextKind {
    Repair,
    Resample,
    Decline,
    GiveUp,
    AnswerWithWarnings,
    Rewrite,
    Diagnose,
    Answer,
    SearchConcept,
}

impl NextKind {
    pub const ALL: [NextKind; 9] = [
        NextKind::Repair,
        NextKind::Resample,
        NextKind::Decline,
        NextKind::GiveUp,
        NextKind::AnswerWithWarnings,
        NextKind::Rewrite,
        NextKind::Diagnose,
        NextKind::Answer,
        NextKind::SearchConcept,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NextKind::Repair => "repair",
            NextKind::Resample => "resample",
            NextKind::Decline => "decline",
            NextKind::GiveUp => "give_up",
            NextKind::AnswerWithWarnings => "answer_with_warnings",
            NextKind::Rewrite => "rewrite",
            NextKind::Diagnose => "diagnose",
            NextKind::Answer => "answer",
            NextKind::SearchConcept => "search_concept",
        }
    }
}

impl fmt::Display for NextKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a question has spent of the things it gets once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// A reply has repeated a failed query (the one resample it earns is taken).
    pub repeat: bool,
    /// A reply has been cut off at the token limit (the one retry is taken).
    pub cut_off: bool,
    /// The one repair of a suspect answer (the model's or the rules' rewrite).
    pub suspect_repair: bool,
    /// The one rewrite of a join on its foreign key: a second unknown column is the
    /// model's to repair.
    pub join_rewrite: bool,
    /// The empty-result diagnostic, or a vote that already took a second look at an
    /// empty answer: an answer is not doubted twice.
    pub diagnostic: bool,
    /// The first greedy reply's confidence has been judged (it is judged once).
    pub confidence_judged: bool,
    /// The concept of a column no table has was looked for under another name.
    pub concept_search: bool,
}

impl Spent {
    /// Records what a failure and the step taken after it spend.
    pub fn record(&mut self, kind: FailureKind, step: &NextStep) {
        match kind {
            FailureKind::IdenticalToFailed => self.repeat = true,
            FailureKind::Suspect => self.suspect_repair = true,
            FailureKind::CutOff => self.cut_off = true,
            _ if matches!(step, NextStep::Rewrite(_)) => self.join_rewrite = true,
            _ if matches!(step, NextStep::SearchConcept) => self.concept_search = true,
            _ => {}
        }
    }
}

/// How far the question has got, as far as the next step depends on it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Progress {
    /// Generation rounds made so far (the attempt cap counts these).
    pub attempts: u32,
    pub max_attempts: u32,
    /// What the question has spent of the things it gets once.
    pub spent: Spent,
    /// Failures that named columns no table has, so far (this one included).
    pub absent_columns: usize,
    /// The latest column no table has: a failure naming it asks for absent data.
    pub last_absent_column: Option<String>,
    /// One-attempt modes (baseline, plain) never repair.
    pub single_attempt: bool,
    /// An earlier answer the rule checks found suspect is held, to be answered with
    /// warnings should its repair end in a give-up.
    pub suspect_held: bool,
    /// The schema the model reads was linked, not whole: a missing name is looked for
    /// again with a wider selection.
    pub linked_schema: bool,
    /// The strategy samples a second look at an answer it doubts.
    pub samples_on_doubt: bool,
    /// Another model round, taking as long as the last one, would end past the
    /// question's time budget.
    pub out_of_time: bool,
}

impl Progress {
    /// Whether a further model round may start: an attempt is left and it would end
    /// within the time budget.
    pub fn may_start_round(&self) -> bool {
        self.attempts < self.max_attempts && !self.budget_spent()
    }

    /// Whether the time budget stops the next model round. Never the first repair: the
    /// promise is three attempts, and a budget may shorten the wait for the third, not
    /// take away the repair of a first failure (on a slow machine one round can take
    /// most of the budget).
    pub fn budget_spent(&self) -> bool {
        self.out_of_time && self.attempts >= 2
    }
}

/// What [`next_step`] decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Next {
    /// The failure's kind as it is recorded (an unknown column no table has is an absent
    /// column); None for doubted rows.
    pub kind: Option<FailureKind>,
    pub step: NextStep,
    /// The repair selects the schema again, widened, before the model is asked.
    pub reselect_schema: bool,
}

/// After this many failures naming columns no table has, the question needs data the
/// database does not hold: decline instead of letting the model invent a third.
pub const ABSENT_COLUMNS_TO_DECLINE: usize = 2;

/// The one place an attempt's outcome is mapped to what happens next.
pub fn next_step(outcome: &Outcome<'_>, progress: &Progress) -> Next {
    let failure = match outcome {
        Outcome::Failed(failure) => failure,
        Outcome::Hesitant | Outcome::Empty | Outcome::EmptyStands => {
            return Next {
                kind: None,
                step: after_doubt(outcome, progress),
                reselect_schema: false,
            }
        }
    };
    let kind = recorded_kind(failure, progress);
    let step = match after_failure(failure, kind, progress) {
        // The repair of a suspect answer failed for good: its rows, with their warnings,
        // say more than no answer.
        NextStep::GiveUp(_) if progress.suspect_held => NextStep::AnswerWithWarnings,
        step => step,
    };
    // A name the linked schema left out is looked for again with a wider selection.
    let reselect_schema = step == NextStep::Repair
        && progress.linked_schema
        && matches!(
            kind,
            FailureKind::Database(ErrorType::UnknownColumn | ErrorType::UnknownTable)
                | FailureKind::AbsentColumn
        );
    Next {
        kind: Some(kind),
        step,
        reselect_schema,
    }
}

/// An unknown column that no table has, not even by a near spelling, is data the
/// database lacks.
fn recorded_kind(failure: &Failure, progress: &Progress) -> FailureKind {
    let absent = progress
        .last_absent_column
        .as_deref()
        .is_some_and(|column| failure.message.contains(column));
    if failure.kind == FailureKind::Database(ErrorType::UnknownColumn) && absent {
        FailureKind::AbsentColumn
    } else {
        failure.kind
    }
}

/// Doubted rows get one sampled second look, in which they vote too, while an attempt
/// is left within the time budget (rows in hand are an answer: unlike a failure's
/// repair, a second look is not owed past the budget); the first reply's confidence is
/// judged once, in the first round only. Rows that look empty get the one diagnostic
/// first.
fn after_doubt(outcome: &Outcome<'_>, progress: &Progress) -> NextStep {
    let doubting = !progress.single_attempt
        && progress.samples_on_doubt
        && progress.attempts < progress.max_attempts
        && !progress.out_of_time;
    let second_look = match outcome {
        // An empty result is looked into once (the diagnostic, or the vote of a second
        // look that already took it); one-attempt modes answer it as it is.
        Outcome::Empty => {
            return if progress.single_attempt || progress.spent.diagnostic {
                NextStep::Answer
            } else {
                NextStep::Diagnose
            };
        }
        Outcome::Hesitant => {
            doubting && !progress.spent.confidence_judged && progress.attempts == 1
        }
        Outcome::EmptyStands => doubting,
        Outcome::Failed(_) => false,
    };
    if second_look {
        NextStep::Resample
    } else {
        NextStep::Answer
    }
}

fn after_failure(failure: &Failure, kind: FailureKind, progress: &Progress) -> NextStep {
    use FailureKind as K;
    // Refused intent first: a write or lock the guard refused ends in a decline in every
    // mode, and errors the database says are not the query's to fix end the question.
    if let K::Database(ErrorType::Rejected) = kind {
        if matches!(
            failure.refusal,
            Some(
                RefusalReason::NotAQuery
                    | RefusalReason::DataModifyingCte
                    | RefusalReason::SelectInto
                    | RefusalReason::LockingClause
            )
        ) {
            return NextStep::Decline(format!(
                "askdb only reads data; the statement was refused ({})",
                failure
                    .refusal
                    .map(RefusalReason::as_str)
                    .unwrap_or("not a query")
            ));
        }
    }
    // The rules' own fix, where they wrote one and it is not spent: a suspect answer's
    // one repair, or the one rewrite of a join on its foreign key.
    let rule_fix = match kind {
        K::Suspect => failure.fix.as_ref(),
        K::Database(ErrorType::UnknownColumn) if !progress.spent.join_rewrite => {
            failure.fix.as_ref()
        }
        _ => None,
    };
    // A suspect answer ran and has rows: it earns one repair, and is never given up. A
    // fix the rules wrote is that repair, and needs no attempt left, as it asks no model.
    if kind == K::Suspect {
        if progress.single_attempt || progress.spent.suspect_repair {
            return NextStep::AnswerWithWarnings;
        }
        if let Some(fix) = rule_fix {
            return NextStep::Rewrite(fix.clone());
        }
        if progress.attempts >= progress.max_attempts || progress.budget_spent() {
            return NextStep::AnswerWithWarnings;
        }
    }
    if progress.single_attempt {
        return NextStep::GiveUp(format!("one attempt only: {}: {}", kind, failure.message));
    }
    // A fix the rules wrote (a join rewritten on its foreign key) asks no model: it is
    // taken before any repair, whatever attempts or time are left.
    if let Some(fix) = rule_fix {
        return NextStep::Rewrite(fix.clone());
    }
    if !failure.repairable {
        return NextStep::GiveUp(format!("{} is never repaired: {}", kind, failure.message));
    }
    if kind == K::AbsentColumn && progress.absent_columns >= ABSENT_COLUMNS_TO_DECLINE {
        // "Not in the database" must be true: the concept is looked for under another
        // name once before the decline.
        if !progress.spent.concept_search {
            return NextStep::SearchConcept;
        }
        return NextStep::Decline(format!(
            "the question needs data this database does not hold ({}); askdb declines \
             rather than invent it",
            failure.message
        ));
    }
    if progress.attempts >= progress.max_attempts {
        return NextStep::GiveUp(format!(
            "{} attempts failed; the last: {}: {}",
            progress.max_attempts, kind, failure.message
        ));
    }
    // A round that would end past the time budget is not started: the user gets the
    // honest give-up now rather than, most often, the same give-up later.
    if progress.budget_spent() {
        return NextStep::GiveUp(format!(
            "another attempt would run past the question's time budget after {} of {} attempts; the last: {}: {}",
            progress.attempts,
            progress.max_attempts,
            kind,
            failure.message
        ));
    }
    match kind {
        // The same query twice: a third nudge would bring it back again. Sample instead;
        // a second repeat after sampling ends the question.
        K::IdenticalToFailed if progress.spent.repeat => NextStep::GiveUp(
            "the model kept sending back a query that had already failed".to_string(),
        ),
        K::IdenticalToFailed => NextStep::Resample,
        // A reply cut off at the token limit gets one retry asking for a short query;
        // it never reaches the cap a third time.
        K::CutOff if progress.spent.cut_off => {
            NextStep::GiveUp("the model's replies ran to the token limit twice".to_string())
        }
        K::CutOff
        | K::MalformedReply
        | K::CaseMismatch
        | K::ValueElsewhere
        | K::AbsentColumn
        | K::Suspect
        | K::Database(_)
        | K::EmptyResult => NextStep::Repair,
    }
}

#[cfg(test)]
#[path = "failure_tests.rs"]
mod tests;
