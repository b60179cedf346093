//! Why an attempt failed, as a type, and the one function that decides what happens
//! next ([`next_step`]). Every failure the agent can meet has a kind here; a kind without
//! a next step does not compile, and a test walks every kind.
//!
//! Kinds serialize as the stable snake_case names the run records and the API have always
//! used: a database error by its taxonomy name (`unknown_column`), a guard refusal as
//! `rejected` (or `syntax_error` when it did not parse), and the agent's own kinds
//! (`malformed_reply`, `cut_off`, `identical_to_failed`, `empty_result`,
//! `case_mismatch`, `absent_column`, `suspect`).

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
}

/// What the state machine does after a failure.
#[derive(Debug, Clone, PartialEq)]
pub enum NextStep {
    /// Ask again with the failure and the instruction for its kind.
    Repair,
    /// Ask again for several sampled candidates: the same reply twice means the prompt
    /// alone will not change it.
    Resample,
    /// End with a decline: the intent is refused (a write) or the data is not held.
    Decline(String),
    /// End with an honest give-up that lists every attempt.
    GiveUp(String),
    /// Answer with the suspect rows after all, each failed check shown as a warning:
    /// the one suspect repair is spent, or no attempt remains.
    AnswerWithWarnings,
    /// Run the rules' own fix instead of asking the model: of a suspect answer (a join
    /// that repeats rows taken out, a column of years compared as the year), its one
    /// suspect repair; of a join on a column its table lacks, the join on the foreign
    /// key. It costs no model call.
    Rewrite,
}

/// How far the question has got, as far as the next step depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Generation rounds made so far (the attempt cap counts these).
    pub attempts: u32,
    pub max_attempts: u32,
    /// This question has already repeated a failed query once.
    pub repeated_before: bool,
    /// This question has already had a reply cut off at the token limit.
    pub cut_off_before: bool,
    /// Failures that named columns no table has, so far (this one included).
    pub absent_columns: usize,
    /// One-attempt modes (baseline, plain) never repair.
    pub single_attempt: bool,
    /// This question has already had its one suspect repair.
    pub suspect_before: bool,
    /// The rule checks that found this answer suspect also wrote its fix.
    pub rewrite_ready: bool,
    /// Another model round, taking as long as the last one, would end past the
    /// question's time budget.
    pub out_of_time: bool,
}

/// After this many failures naming columns no table has, the question needs data the
/// database does not hold: decline instead of letting the model invent a third.
pub const ABSENT_COLUMNS_TO_DECLINE: usize = 2;

/// The one place a failure is mapped to what happens next.
pub fn next_step(failure: &Failure, progress: &Progress) -> NextStep {
    use FailureKind as K;
    // Refused intent first: a write or lock the guard refused ends in a decline in every
    // mode, and errors the database says are not the query's to fix end the question.
    if let K::Database(ErrorType::Rejected) = failure.kind {
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
    // A suspect answer ran and has rows: it earns one repair, and is never given up. A
    // fix the rules wrote is that repair, and needs no attempt left, as it asks no model.
    if failure.kind == K::Suspect {
        if progress.single_attempt || progress.suspect_before {
            return NextStep::AnswerWithWarnings;
        }
        if progress.rewrite_ready {
            return NextStep::Rewrite;
        }
        if progress.attempts >= progress.max_attempts || progress.out_of_time {
            return NextStep::AnswerWithWarnings;
        }
    }
    if progress.single_attempt {
        return NextStep::GiveUp(format!(
            "one attempt only: {}: {}",
            failure.kind, failure.message
        ));
    }
    // A fix the rules wrote (a join rewritten on its foreign key) asks no model: it is
    // taken before any repair, whatever attempts or time are left.
    if progress.rewrite_ready {
        return NextStep::Rewrite;
    }
    if !failure.repairable {
        return NextStep::GiveUp(format!(
            "{} is never repaired: {}",
            failure.kind, failure.message
        ));
    }
    if failure.kind == K::AbsentColumn && progress.absent_columns >= ABSENT_COLUMNS_TO_DECLINE {
        return NextStep::Decline(format!(
            "the question needs data this database does not hold ({}); askdb declines \
             rather than invent it",
            failure.message
        ));
    }
    if progress.attempts >= progress.max_attempts {
        return NextStep::GiveUp(format!(
            "{} attempts failed; the last: {}: {}",
            progress.max_attempts, failure.kind, failure.message
        ));
    }
    // A round that would end past the time budget is not started: the user gets the
    // honest give-up now rather than, most often, the same give-up later.
    if progress.out_of_time {
        return NextStep::GiveUp(format!(
            "another attempt would run past the question's time budget after {} of {} attempts; the last: {}: {}",
            progress.attempts,
            progress.max_attempts,
            failure.kind,
            failure.message
        ));
    }
    match failure.kind {
        // The same query twice: a third nudge would bring it back again. Sample instead;
        // a second repeat after sampling ends the question.
        K::IdenticalToFailed if progress.repeated_before => NextStep::GiveUp(
            "the model kept sending back a query that had already failed".to_string(),
        ),
        K::IdenticalToFailed => NextStep::Resample,
        // A reply cut off at the token limit gets one retry asking for a short query;
        // it never reaches the cap a third time.
        K::CutOff if progress.cut_off_before => {
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
        }
    }

    fn fresh() -> Progress {
        Progress {
            attempts: 1,
            max_attempts: 3,
            repeated_before: false,
            cut_off_before: false,
            absent_columns: 0,
            single_attempt: false,
            suspect_before: false,
            rewrite_ready: false,
            out_of_time: false,
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
        let rewritable = Progress {
            rewrite_ready: true,
            ..late
        };
        assert_eq!(next_step(&suspect, &rewritable), NextStep::Rewrite);
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
                | NextStep::Rewrite => {
                    assert!(repairable, "{kind}")
                }
                NextStep::GiveUp(reason) | NextStep::Decline(reason) => {
                    assert!(!repairable, "{kind} ends a fresh question: {reason}");
                    assert!(!reason.is_empty());
                }
            }
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
            repeated_before: true,
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
                suspect_before: true,
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
        let fixable = Progress {
            rewrite_ready: true,
            ..fresh()
        };
        assert_eq!(next_step(&suspect, &fixable), NextStep::Rewrite);
        let capped_fixable = Progress {
            attempts: 3,
            ..fixable
        };
        assert_eq!(next_step(&suspect, &capped_fixable), NextStep::Rewrite);
        for spent in [
            Progress {
                suspect_before: true,
                ..fixable
            },
            Progress {
                single_attempt: true,
                ..fixable
            },
        ] {
            assert_eq!(next_step(&suspect, &spent), NextStep::AnswerWithWarnings);
        }
        // Another failure the rules wrote a fix for (a join rewritten on its foreign
        // key) takes it before any repair, at the cap or past the time budget too, but
        // never in a one-attempt mode; without one it is repaired.
        let column = failure(FailureKind::Database(ErrorType::UnknownColumn));
        assert_eq!(next_step(&column, &fresh()), NextStep::Repair);
        assert_eq!(next_step(&column, &fixable), NextStep::Rewrite);
        assert_eq!(next_step(&column, &capped_fixable), NextStep::Rewrite);
        let late_fixable = Progress {
            out_of_time: true,
            ..fixable
        };
        assert_eq!(next_step(&column, &late_fixable), NextStep::Rewrite);
        let single_fixable = Progress {
            single_attempt: true,
            ..fixable
        };
        assert!(matches!(
            next_step(&column, &single_fixable),
            NextStep::GiveUp(_)
        ));
        // Only a suspect answer is answered anyway: any other failure at the cap gives up.
        let empty = failure(FailureKind::EmptyResult);
        let capped = Progress {
            attempts: 3,
            suspect_before: true,
            ..fresh()
        };
        assert!(matches!(next_step(&empty, &capped), NextStep::GiveUp(_)));
    }

    #[test]
    fn a_cut_off_reply_is_retried_once() {
        let cut = failure(FailureKind::CutOff);
        assert_eq!(next_step(&cut, &fresh()), NextStep::Repair);
        let again = Progress {
            cut_off_before: true,
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
}
