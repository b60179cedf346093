//! Tests of the next-step decision: every failure kind and every doubt, each step's
//! conditions, and what a question spends.

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
fn a_first_failure_gets_its_repair_whatever_the_time_budget_says() {
    let slow_first_round = Progress {
        out_of_time: true,
        ..fresh()
    };
    assert_eq!(fresh().attempts, 1);
    for kind in [
        FailureKind::Database(ErrorType::UnknownColumn),
        FailureKind::Database(ErrorType::UnknownTable),
        FailureKind::MalformedReply,
    ] {
        assert_eq!(
            next_step(&failure(kind), &slow_first_round),
            NextStep::Repair,
            "{kind}"
        );
    }
    assert_eq!(
        next_step(&failure(FailureKind::Suspect), &slow_first_round),
        NextStep::Repair
    );
    assert!(slow_first_round.may_start_round());
}

#[test]
fn no_model_round_starts_past_the_time_budget_but_a_rule_rewrite_still_runs() {
    let late = Progress {
        attempts: 2,
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
            NextStep::SearchConcept => {
                panic!("{kind}: a fresh question has named no column twice")
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
        let reselects = super::next_step(&Outcome::Failed(&failure(kind)), &linked).reselect_schema;
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
fn the_second_absent_column_searches_for_the_concept_then_declines_and_the_cap_gives_up() {
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
    assert_eq!(next_step(&absent, &twice), NextStep::SearchConcept);
    let mut spent = Spent::default();
    spent.record(FailureKind::AbsentColumn, &NextStep::SearchConcept);
    let searched = Progress {
        absent_columns: 3,
        spent,
        ..fresh()
    };
    assert!(matches!(
        next_step(&absent, &searched),
        NextStep::Decline(_)
    ));
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
