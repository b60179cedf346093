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
}

impl NextKind {
    pub const ALL: [NextKind; 8] = [
        NextKind::Repair,
        NextKind::Resample,
        NextKind::Decline,
        NextKind::GiveUp,
        NextKind::AnswerWithWarnings,
        NextKind::Rewrite,
        NextKind::Diagnose,
        NextKind::Answer,
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
}

impl Spent {
    /// Records what a failure and the step taken after it spend.
    pub fn record(&mut self, kind: FailureKind, step: &NextStep) {
        match kind {
            FailureKind::IdenticalToFailed => self.repeat = true,
            FailureKind::Suspect => self.suspect_repair = true,
            FailureKind::CutOff => self.cut_off = true,
            _ if matches!(step, NextStep::Rewrite(_)) => self.join_rewrite = true,
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
        self.attempts < self.max_attempts && !self.out_of_time
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

/// Doubted rows get one sampled second look, in which they vote too, while a round may
/// start; the first reply's confidence is judged once, in the first round only. Rows
/// that look empty get the one diagnostic first.
fn after_doubt(outcome: &Outcome<'_>, progress: &Progress) -> NextStep {
    let doubting =
        !progress.single_attempt && progress.samples_on_doubt && progress.may_start_round();
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
        if progress.attempts >= progress.max_attempts || progress.out_of_time {
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
    if progress.out_of_time {
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
        | K::AbsentColumn
        | K::Suspect
        | K::Database(_)
        | K::EmptyResult => NextStep::Repair,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(kind: FailureKind) -> Failure {
        Failure {
            kind,
            refusal: None,
            message: "m".to_string(),
            sql: "SELECT 1".to_string(),
            repairable: match kind {
                FailureKind::Database(error_type) => error_type.repairable(),
                _ => true,
            },
            fix: None,
        }
    }

    fn with_fix(failure: Failure) -> Failure {
        Failure {
            fix: Some(fix()),
            ..failure
        }
    }

    fn fix() -> RuleFix {
        RuleFix {
            sql: "SELECT 2".to_string(),
            change: "the rules' fix".to_string(),
        }
    }

    /// The step after a failure.
    fn next_step(failure: &Failure, progress: &Progress) -> NextStep {
        super::next_step(&Outcome::Failed(failure), progress).step
    }

    fn fresh() -> Progress {
        Progress {
            attempts: 1,
            max_attempts: 3,
            ..Progress::default()
        }
    }

    #[test]
    fn no_model_round_starts_past_the_time_budget_but_a_rule_rewrite_still_runs() {
        let late = Progress {
            out_of_time: true,
            ..fresh()
        };
        for kind in [
            FailureKind::Database(ErrorType::UnknownColumn),
            FailureKind::EmptyResult,
            FailureKind::MalformedReply,
            FailureKind::IdenticalToFailed,
        ] {
            assert!(
                matches!(
                    next_step(&failure(kind), &fresh()),
                    NextStep::Repair | NextStep::Resample
                ),
                "{kind}"
            );
            match next_step(&failure(kind), &late) {
                NextStep::GiveUp(reason) => assert!(reason.contains("time budget"), "{reason}"),
                other => panic!("{kind}: {other:?}"),
            }
        }
        let suspect = failure(FailureKind::Suspect);
        assert_eq!(next_step(&suspect, &late), NextStep::AnswerWithWarnings);
        assert_eq!(
            next_step(&with_fix(suspect), &late),
            NextStep::Rewrite(fix())
        );
        // A write the guard refused is still declined, not given up for want of time.
        let write = Failure {
            refusal: Some(RefusalReason::NotAQuery),
            ..failure(FailureKind::Database(ErrorType::Rejected))
        };
        assert!(matches!(next_step(&write, &late), NextStep::Decline(_)));
    }

    #[test]
    fn every_failure_kind_has_a_next_step_and_a_stable_name() {
        for kind in FailureKind::all() {
            let step = next_step(&failure(kind), &fresh());
            let repairable = failure(kind).repairable;
            match &step {
                NextStep::Repair
                | NextStep::Resample
                | NextStep::AnswerWithWarnings
                | NextStep::Rewrite(_) => {
                    assert!(repairable, "{kind}")
                }
                NextStep::GiveUp(reason) | NextStep::Decline(reason) => {
                    assert!(!repairable, "{kind} ends a fresh question: {reason}");
                    assert!(!reason.is_empty());
                }
                NextStep::Answer | NextStep::Diagnose => {
                    panic!("{kind}: a failure is never answered as is nor diagnosed")
                }
            }
            // A fix the rules wrote is taken only for the two failures they write one
            // for; any other kind goes its ordinary way.
            let fixed = super::next_step(&Outcome::Failed(&with_fix(failure(kind))), &fresh());
            let rewrites = matches!(
                kind,
                FailureKind::Suspect | FailureKind::Database(ErrorType::UnknownColumn)
            );
            assert_eq!(
                fixed.step == NextStep::Rewrite(fix()),
                rewrites,
                "{kind}: {fixed:?}"
            );
            if !rewrites {
                assert_eq!(fixed.step, step, "{kind}");
            }
            // A give-up after a suspect answer's repair answers the held rows instead.
            let held = Progress {
                suspect_held: true,
                ..fresh()
            };
            let after_suspect = next_step(&failure(kind), &held);
            match &step {
                NextStep::GiveUp(_) => {
                    assert_eq!(after_suspect, NextStep::AnswerWithWarnings, "{kind}")
                }
                other => assert_eq!(&after_suspect, other, "{kind}"),
            }
            // Only a repair of a missing name reselects, and only a linked schema.
            let linked = Progress {
                linked_schema: true,
                ..fresh()
            };
            let reselects =
                super::next_step(&Outcome::Failed(&failure(kind)), &linked).reselect_schema;
            let missing_name = matches!(
                kind,
                FailureKind::Database(ErrorType::UnknownColumn | ErrorType::UnknownTable)
                    | FailureKind::AbsentColumn
            );
            assert_eq!(
                reselects,
                missing_name && step == NextStep::Repair,
                "{kind}"
            );
            assert!(
                !super::next_step(&Outcome::Failed(&failure(kind)), &fresh()).reselect_schema,
                "{kind}: a whole schema has every name already"
            );
            assert_eq!(
                NextKind::ALL
                    .into_iter()
                    .filter(|name| *name == step.kind())
                    .count(),
                1
            );
            if step == NextStep::Repair {
                assert!(
                    super::super::prompts::repair_instruction(kind).is_some(),
                    "{kind} is repaired, so it needs an instruction"
                );
            }
            assert_eq!(FailureKind::parse(kind.as_str()), Some(kind));
            let json = serde_json::to_string(&kind).expect("serializes");
            assert_eq!(serde_json::from_str::<FailureKind>(&json).ok(), Some(kind));
        }
    }

    #[test]
    fn a_repeat_is_resampled_once_then_given_up() {
        let repeat = failure(FailureKind::IdenticalToFailed);
        assert_eq!(next_step(&repeat, &fresh()), NextStep::Resample);
        let again = Progress {
            spent: Spent {
                repeat: true,
                ..Spent::default()
            },
            ..fresh()
        };
        assert!(matches!(next_step(&repeat, &again), NextStep::GiveUp(_)));
    }

    #[test]
    fn a_suspect_answer_is_repaired_once_then_answered_with_warnings() {
        let suspect = failure(FailureKind::Suspect);
        assert_eq!(next_step(&suspect, &fresh()), NextStep::Repair);
        assert!(FailureKind::Suspect.can_have_run());
        for spent in [
            Progress {
                spent: Spent {
                    suspect_repair: true,
                    ..Spent::default()
                },
                ..fresh()
            },
            Progress {
                attempts: 3,
                ..fresh()
            },
            Progress {
                single_attempt: true,
                ..fresh()
            },
        ] {
            assert_eq!(
                next_step(&suspect, &spent),
                NextStep::AnswerWithWarnings,
                "{spent:?}"
            );
        }
        // The rules' own fix is taken first, even with no attempt left (it asks no
        // model), but never twice and never in a one-attempt mode.
        let fixable = with_fix(suspect.clone());
        assert_eq!(next_step(&fixable, &fresh()), NextStep::Rewrite(fix()));
        let capped = Progress {
            attempts: 3,
            ..fresh()
        };
        assert_eq!(next_step(&fixable, &capped), NextStep::Rewrite(fix()));
        for spent in [
            Progress {
                spent: Spent {
                    suspect_repair: true,
                    ..Spent::default()
                },
                ..fresh()
            },
            Progress {
                single_attempt: true,
                ..fresh()
            },
        ] {
            assert_eq!(next_step(&fixable, &spent), NextStep::AnswerWithWarnings);
        }
        // Another failure the rules wrote a fix for (a join rewritten on its foreign
        // key) takes it before any repair, at the cap or past the time budget too, but
        // never in a one-attempt mode; without one it is repaired.
        let column = failure(FailureKind::Database(ErrorType::UnknownColumn));
        assert_eq!(next_step(&column, &fresh()), NextStep::Repair);
        let fixable_column = with_fix(column.clone());
        assert_eq!(
            next_step(&fixable_column, &fresh()),
            NextStep::Rewrite(fix())
        );
        assert_eq!(
            next_step(&fixable_column, &capped),
            NextStep::Rewrite(fix())
        );
        let late = Progress {
            out_of_time: true,
            ..fresh()
        };
        assert_eq!(next_step(&fixable_column, &late), NextStep::Rewrite(fix()));
        let single = Progress {
            single_attempt: true,
            ..fresh()
        };
        assert!(matches!(
            next_step(&fixable_column, &single),
            NextStep::GiveUp(_)
        ));
        // The join's rewrite is taken once: a second unknown column is repaired.
        let rejoined = Progress {
            spent: Spent {
                join_rewrite: true,
                ..Spent::default()
            },
            ..fresh()
        };
        assert_eq!(next_step(&fixable_column, &rejoined), NextStep::Repair);
        // Only a suspect answer is answered anyway: any other failure at the cap gives up.
        let empty = failure(FailureKind::EmptyResult);
        let capped = Progress {
            attempts: 3,
            spent: Spent {
                suspect_repair: true,
                ..Spent::default()
            },
            ..fresh()
        };
        assert!(matches!(next_step(&empty, &capped), NextStep::GiveUp(_)));
    }

    #[test]
    fn a_cut_off_reply_is_retried_once() {
        let cut = failure(FailureKind::CutOff);
        assert_eq!(next_step(&cut, &fresh()), NextStep::Repair);
        let again = Progress {
            spent: Spent {
                cut_off: true,
                ..Spent::default()
            },
            ..fresh()
        };
        assert!(matches!(next_step(&cut, &again), NextStep::GiveUp(_)));
    }

    #[test]
    fn writes_decline_in_every_mode_and_single_attempt_modes_never_repair() {
        let write = Failure {
            refusal: Some(RefusalReason::NotAQuery),
            repairable: false,
            ..failure(FailureKind::Database(ErrorType::Rejected))
        };
        let single = Progress {
            single_attempt: true,
            ..fresh()
        };
        assert!(matches!(next_step(&write, &single), NextStep::Decline(_)));
        assert!(matches!(next_step(&write, &fresh()), NextStep::Decline(_)));
        let column = failure(FailureKind::Database(ErrorType::UnknownColumn));
        assert!(matches!(next_step(&column, &single), NextStep::GiveUp(_)));
    }

    #[test]
    fn the_second_absent_column_declines_and_the_cap_gives_up() {
        let absent = failure(FailureKind::AbsentColumn);
        let once = Progress {
            absent_columns: 1,
            ..fresh()
        };
        assert_eq!(next_step(&absent, &once), NextStep::Repair);
        let twice = Progress {
            absent_columns: 2,
            ..fresh()
        };
        assert!(matches!(next_step(&absent, &twice), NextStep::Decline(_)));
        let capped = Progress {
            attempts: 3,
            ..fresh()
        };
        let column = failure(FailureKind::Database(ErrorType::UnknownColumn));
        assert!(matches!(next_step(&column, &capped), NextStep::GiveUp(_)));
    }

    #[test]
    fn an_unknown_column_named_before_as_absent_is_recorded_as_absent() {
        let column = Failure {
            message: "no such column: c.loyalty_tier".to_string(),
            ..failure(FailureKind::Database(ErrorType::UnknownColumn))
        };
        let after = |last: Option<&str>| {
            super::next_step(
                &Outcome::Failed(&column),
                &Progress {
                    absent_columns: 1,
                    last_absent_column: last.map(str::to_string),
                    ..fresh()
                },
            )
            .kind
        };
        assert_eq!(after(Some("loyalty_tier")), Some(FailureKind::AbsentColumn));
        assert_eq!(
            after(Some("segment")),
            Some(FailureKind::Database(ErrorType::UnknownColumn))
        );
        assert_eq!(
            after(None),
            Some(FailureKind::Database(ErrorType::UnknownColumn))
        );
        // An absent column is never rewritten on a foreign key: it is no join's mistake.
        let fixable = with_fix(column.clone());
        let step = next_step(
            &fixable,
            &Progress {
                absent_columns: 1,
                last_absent_column: Some("loyalty_tier".to_string()),
                ..fresh()
            },
        );
        assert_eq!(step, NextStep::Repair);
    }

    #[test]
    fn doubted_rows_get_one_second_look_while_a_round_may_start() {
        let doubting = Progress {
            samples_on_doubt: true,
            ..fresh()
        };
        for outcome in [Outcome::Hesitant, Outcome::EmptyStands] {
            let next = super::next_step(&outcome, &doubting);
            assert_eq!(next.step, NextStep::Resample, "{outcome:?}");
            assert_eq!(next.kind, None);
            for settled in [
                fresh(),
                Progress {
                    attempts: 3,
                    ..doubting.clone()
                },
                Progress {
                    out_of_time: true,
                    ..doubting.clone()
                },
                Progress {
                    single_attempt: true,
                    ..doubting.clone()
                },
            ] {
                assert_eq!(
                    super::next_step(&outcome, &settled).step,
                    NextStep::Answer,
                    "{outcome:?} {settled:?}"
                );
            }
        }
        // An empty result gets the one diagnostic, never twice, never in one attempt.
        assert_eq!(
            super::next_step(&Outcome::Empty, &fresh()).step,
            NextStep::Diagnose
        );
        for spent in [
            Progress {
                spent: Spent {
                    diagnostic: true,
                    ..Spent::default()
                },
                ..fresh()
            },
            Progress {
                single_attempt: true,
                ..fresh()
            },
        ] {
            assert_eq!(
                super::next_step(&Outcome::Empty, &spent).step,
                NextStep::Answer
            );
        }
        // The first reply's confidence is judged once, in the first round.
        for judged in [
            Progress {
                spent: Spent {
                    confidence_judged: true,
                    ..Spent::default()
                },
                ..doubting.clone()
            },
            Progress {
                attempts: 2,
                ..doubting.clone()
            },
        ] {
            assert_eq!(
                super::next_step(&Outcome::Hesitant, &judged).step,
                NextStep::Answer
            );
        }
        assert_eq!(
            super::next_step(
                &Outcome::EmptyStands,
                &Progress {
                    attempts: 2,
                    ..doubting
                }
            )
            .step,
            NextStep::Resample
        );
    }

    #[test]
    fn each_failure_spends_what_it_gets_once() {
        let mut spent = Spent::default();
        spent.record(
            FailureKind::Database(ErrorType::UnknownColumn),
            &NextStep::Repair,
        );
        assert_eq!(spent, Spent::default());
        spent.record(
            FailureKind::Database(ErrorType::UnknownColumn),
            &NextStep::Rewrite(fix()),
        );
        assert!(spent.join_rewrite);
        spent.record(FailureKind::Suspect, &NextStep::Rewrite(fix()));
        assert!(spent.suspect_repair);
        spent.record(FailureKind::IdenticalToFailed, &NextStep::Resample);
        spent.record(FailureKind::CutOff, &NextStep::Repair);
        assert!(spent.repeat && spent.cut_off);
        for name in NextKind::ALL {
            let json = serde_json::to_string(&name).expect("serializes");
            assert_eq!(json, format!("\"{}\"", name.as_str()));
        }
    }
}
