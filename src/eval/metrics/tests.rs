//! The metrics' definitions checked on hand-made outcomes: every count, rate and
//! interval of the module doc, the paired difference and the server's speed.

use super::*;

#[test]
fn the_agents_decisions_keep_their_names_in_run_records() {
    for decision in Decision::ALL {
        let recorded = serde_json::to_value(RunOutcome::Decided(decision)).ok();
        assert_eq!(
            recorded.as_ref().and_then(|value| value.as_str()),
            Some(decision.as_str())
        );
    }
    for outcome in RunOutcome::ALL {
        let text = serde_json::to_string(&outcome).unwrap_or_default();
        assert_eq!(text, format!("\"{}\"", outcome.as_str()));
        assert_eq!(
            serde_json::from_str::<RunOutcome>(&text).ok(),
            Some(outcome)
        );
    }
    let unknown = serde_json::from_str::<RunOutcome>("\"shrug\"")
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
    assert!(
        unknown.starts_with("unknown variant `shrug`, expected one of `answer`"),
        "{unknown}"
    );
}

#[allow(clippy::too_many_arguments)]
fn outcome(
    id: &str,
    category: &str,
    expected: Expected,
    decision: impl Into<RunOutcome>,
    correct: bool,
    first_attempt_correct: Option<bool>,
    first_attempt_failed: bool,
    attempts: u32,
    latency_ms: u64,
    input_tokens: u64,
) -> QuestionOutcome {
    QuestionOutcome {
        id: id.to_string(),
        category: category.to_string(),
        expected,
        decision: decision.into(),
        correct,
        first_attempt_correct,
        first_attempt_failed,
        attempts,
        latency_ms,
        input_tokens,
        output_tokens: input_tokens / 10,
        cost_usd: input_tokens as f64 / 100_000.0,
        server_timings: None,
    }
}

/// Success or failure on an answerable question, for the paired tests.
fn simple(id: &str, success: bool, decision: impl Into<RunOutcome>) -> QuestionOutcome {
    outcome(
        id,
        "c",
        Expected::Answer,
        decision,
        success,
        Some(success),
        false,
        1,
        10,
        0,
    )
}

fn assert_close(actual: Option<f64>, expected: f64) {
    let actual = actual.expect("a value");
    assert!((actual - expected).abs() < 1e-12, "{actual} != {expected}");
}

/// Twelve outcomes; the comment on each says what it counts for.
fn hand_made() -> Vec<QuestionOutcome> {
    use Decision as D;
    use Expected as E;
    vec![
        // right at once
        outcome(
            "q1",
            "simple",
            E::Answer,
            D::Answer,
            true,
            Some(true),
            false,
            1,
            100,
            1000,
        ),
        // wrong first, right at the end: rescued
        outcome(
            "q2",
            "simple",
            E::Answer,
            D::Answer,
            true,
            Some(false),
            false,
            2,
            300,
            2000,
        ),
        // right first, wrong at the end: broken
        outcome(
            "q3",
            "simple",
            E::Answer,
            D::Answer,
            false,
            Some(true),
            false,
            2,
            250,
            1500,
        ),
        // first attempt failed, right at the end: rescued, first-attempt failure
        outcome(
            "q4",
            "join",
            E::Answer,
            D::Answer,
            true,
            None,
            true,
            3,
            900,
            3000,
        ),
        // first attempt failed, gave up
        outcome(
            "q5",
            "join",
            E::Answer,
            D::GiveUp,
            false,
            None,
            true,
            4,
            1200,
            4000,
        ),
        // declined an answerable question: false refusal
        outcome(
            "q6",
            "join",
            E::Answer,
            D::Decline,
            false,
            None,
            false,
            1,
            50,
            500,
        ),
        // right refusal
        outcome(
            "q7",
            "unanswerable",
            E::Refuse,
            D::Decline,
            false,
            None,
            false,
            1,
            80,
            800,
        ),
        // right clarification
        outcome(
            "q8",
            "unanswerable",
            E::Clarify,
            D::Clarify,
            false,
            None,
            false,
            1,
            60,
            600,
        ),
        // invented an answer
        outcome(
            "q9",
            "unanswerable",
            E::RefuseOrClarify,
            D::Answer,
            false,
            Some(false),
            false,
            1,
            400,
            1000,
        ),
        // clarified where a refusal was expected: wrong form
        outcome(
            "q10",
            "unanswerable",
            E::Refuse,
            D::Clarify,
            false,
            None,
            false,
            1,
            70,
            700,
        ),
        // infrastructure failure: counted apart
        outcome(
            "q11",
            "join",
            E::Answer,
            RunOutcome::InfrastructureFailure,
            false,
            None,
            false,
            0,
            5000,
            0,
        ),
        // clarified an answerable question: false refusal, unexpected clarification
        outcome(
            "q12",
            "simple",
            E::Answer,
            D::Clarify,
            false,
            None,
            false,
            1,
            40,
            400,
        ),
    ]
}

#[test]
fn hand_made_outcomes_give_hand_computed_metrics() {
    let summary = summarize(&hand_made());
    assert_eq!(summary.questions, 12);
    assert_eq!(summary.scored, 11);
    assert_eq!(summary.infrastructure_failures, 1);
    // Successes: q1, q2, q4 (answers), q7 (refusal), q8 (clarification).
    assert_eq!(summary.accuracy, Rate::new(5, 11));
    assert_eq!(
        (summary.accuracy.successes, summary.accuracy.total),
        (5, 11)
    );
    assert_close(summary.accuracy.rate, 5.0 / 11.0);
    // Answerable scored: q1-q6, q12; successes q1, q2, q4.
    assert_eq!(
        (
            summary.answerable_accuracy.successes,
            summary.answerable_accuracy.total
        ),
        (3, 7)
    );
    let category = |name: &str| {
        let rate = summary.by_category[name];
        (rate.successes, rate.total)
    };
    assert_eq!(category("simple"), (2, 4));
    assert_eq!(category("join"), (1, 3));
    assert_eq!(category("unanswerable"), (2, 4));
    assert_eq!(summary.by_category.len(), 3);
    assert_eq!(
        summary.decisions,
        DecisionCounts {
            answered: 5,
            clarified: 3,
            declined: 2,
            gave_up: 1,
            failed: 0,
        }
    );
    assert_eq!(summary.unanswerable, 4);
    assert_eq!(summary.correct_refusals, 2);
    assert_eq!(summary.wrong_form_abstentions, 1);
    assert_eq!(summary.invented_answers, 1);
    assert_eq!(summary.false_refusals, 2);
    assert_close(summary.false_refusal_rate, 2.0 / 7.0);
    // Clarifications made: q8, q10, q12; expected: q8, q9; both: q8.
    assert_eq!(summary.clarifications_made, 3);
    assert_eq!(summary.clarifications_expected, 2);
    assert_eq!(summary.expected_clarifications_made, 1);
    assert_close(summary.clarification_precision, 1.0 / 3.0);
    assert_close(summary.clarification_recall, 0.5);
    assert_eq!(summary.first_attempt_failures, 2);
    // First attempt correct: q1, q3; not: q2, q4, q5, q6, q12.
    assert_eq!(summary.first_attempt_correct, 2);
    assert_eq!(summary.first_attempt_not_correct, 5);
    assert_eq!(summary.rescued, 2);
    assert_eq!(summary.broken, 1);
    assert_close(summary.rescue_rate, 2.0 / 5.0);
    assert_eq!(
        summary.answerable_accuracy.successes,
        summary.first_attempt_correct - summary.broken + summary.rescued
    );
    // Attempts of q1, q2, q4: 1, 2, 3.
    assert_close(summary.mean_attempts_to_success, 2.0);
    // Scored latencies sorted: 40 50 60 70 80 100 250 300 400 900 1200 (q11's 5000 left
    // out); rank ceil(5.5) = 6 and ceil(10.45) = 11.
    assert_eq!(summary.latency_p50_ms, Some(100));
    assert_eq!(summary.latency_p95_ms, Some(1200));
    assert_eq!(summary.input_tokens, 15_500);
    assert_eq!(summary.output_tokens, 1_550);
    assert!((summary.cost_usd - 0.155).abs() < 1e-9);
}

#[test]
fn infrastructure_failures_are_counted_but_never_scored() {
    let outcomes = vec![
        simple("a", true, Decision::Answer),
        simple("b", false, RunOutcome::InfrastructureFailure),
        simple("c", false, RunOutcome::InfrastructureFailure),
    ];
    let summary = summarize(&outcomes);
    assert_eq!(summary.infrastructure_failures, 2);
    assert_eq!(summary.scored, 1);
    assert_eq!((summary.accuracy.successes, summary.accuracy.total), (1, 1));
    assert_eq!(summary.accuracy.rate, Some(1.0));
    assert_eq!(summary.first_attempt_not_correct, 0);
    assert_eq!(summary.latency_p95_ms, Some(10));
    // Had they been scored as wrong, accuracy would be 1/3.
}

#[test]
fn success_definition_per_expected_decision() {
    use Decision as D;
    use Expected as E;
    let with = |expected, decision, correct| {
        is_success(&outcome(
            "x", "c", expected, decision, correct, None, false, 1, 1, 0,
        ))
    };
    assert!(with(E::Answer, D::Answer, true));
    assert!(!with(E::Answer, D::Answer, false));
    assert!(!with(E::Answer, D::Decline, true));
    assert!(with(E::Refuse, D::Decline, false));
    assert!(!with(E::Refuse, D::Clarify, false));
    assert!(!with(E::Refuse, D::Answer, true));
    assert!(with(E::Clarify, D::Clarify, false));
    assert!(!with(E::Clarify, D::Decline, false));
    assert!(with(E::RefuseOrClarify, D::Decline, false));
    assert!(with(E::RefuseOrClarify, D::Clarify, false));
    assert!(!with(E::RefuseOrClarify, D::GiveUp, false));
    assert!(!is_success(&outcome(
        "x",
        "c",
        E::Answer,
        RunOutcome::InfrastructureFailure,
        true,
        None,
        false,
        1,
        1,
        0,
    )));
}

#[test]
fn empty_input_gives_zeros_and_nulls() {
    let summary = summarize(&[]);
    assert_eq!(summary.questions, 0);
    assert_eq!(summary.accuracy.rate, None);
    assert_eq!(summary.accuracy.wilson95, None);
    assert_eq!(summary.rescue_rate, None);
    assert_eq!(summary.mean_attempts_to_success, None);
    assert_eq!(summary.latency_p50_ms, None);
    let json = serde_json::to_string(&summary).expect("serialises");
    assert!(!json.contains("NaN"));
    assert!(json.contains("\"rate\":null"));
    let paired = paired_difference(&[], &[], 1000, 1);
    assert_eq!(paired.paired, 0);
    assert_eq!(paired.mean_difference, None);
    assert_eq!(paired.bootstrap95, None);
}

#[test]
fn the_servers_speed_is_its_time_over_its_tokens_on_scored_questions_only() {
    let timed = |id: &str, decision: RunOutcome, timings: Option<ServerTimings>| QuestionOutcome {
        server_timings: timings,
        ..simple(id, true, decision)
    };
    let clock = |read: u64, prompt_ms: f64, written: u64, generation_ms: f64| {
        Some(ServerTimings {
            prompt_tokens_read: read,
            prompt_ms,
            generated_tokens: written,
            generation_ms,
            one_reply_generated_tokens: written,
            one_reply_generation_ms: generation_ms,
        })
    };
    let answered = RunOutcome::Decided(Decision::Answer);
    let summary = summarize(&[
        timed("q1", answered, clock(20, 400.0, 10, 700.0)),
        timed("q2", answered, clock(80, 2_000.0, 30, 2_300.0)),
        // No clock (another provider, a reply from the response cache): left out.
        timed("q3", answered, None),
        // An outage measures the outage, as for the latencies.
        timed(
            "q4",
            RunOutcome::InfrastructureFailure,
            clock(1, 90_000.0, 1, 90_000.0),
        ),
    ]);
    let speed = summary.model_speed.expect("two questions were timed");
    assert_eq!(speed.questions, 2);
    assert_eq!(
        (speed.generated_tokens, speed.prompt_tokens_read),
        (40, 100)
    );
    assert_close(speed.ms_per_generated_token, 3_000.0 / 40.0);
    assert_close(speed.ms_per_prompt_token, 2_400.0 / 100.0);
    // Server times 1,100 and 4,300 ms; rank ceil(1.0) = 1.
    assert_eq!(speed.server_ms_p50, Some(1_100));
    let untimed = summarize(&[timed("q1", answered, None)]);
    assert_eq!(untimed.model_speed, None);
    let json = serde_json::to_string(&untimed).expect("serialises");
    assert!(!json.contains("model_speed"), "{json}");
}

#[test]
fn outcomes_round_trip_through_json_in_snake_case() {
    let original = outcome(
        "q9",
        "hard",
        Expected::RefuseOrClarify,
        RunOutcome::InfrastructureFailure,
        false,
        None,
        true,
        2,
        5,
        7,
    );
    let json = serde_json::to_string(&original).expect("serialises");
    assert!(json.contains("\"expected\":\"refuse_or_clarify\""));
    assert!(json.contains("\"decision\":\"infrastructure_failure\""));
    let back: QuestionOutcome = serde_json::from_str(&json).expect("parses");
    assert_eq!(back, original);
}

fn paired_sets() -> (Vec<QuestionOutcome>, Vec<QuestionOutcome>) {
    use Decision as D;
    let mut agent = Vec::new();
    let mut baseline = Vec::new();
    // 20 pairs: 6 agent-only wins, 2 baseline-only wins, 8 both, 4 neither.
    for index in 0..20 {
        let id = format!("p{index:02}");
        let (a, b) = match index {
            0..=5 => (true, false),
            6..=7 => (false, true),
            8..=15 => (true, true),
            _ => (false, false),
        };
        agent.push(simple(&id, a, D::Answer));
        baseline.push(simple(&id, b, D::Answer));
    }
    // Left out: only in agent, only in baseline, infrastructure on either side, and a
    // duplicate id.
    agent.push(simple("only-agent", true, D::Answer));
    baseline.push(simple("only-baseline", true, D::Answer));
    agent.push(simple("infra-a", false, RunOutcome::InfrastructureFailure));
    baseline.push(simple("infra-a", true, D::Answer));
    agent.push(simple("infra-b", true, D::Answer));
    baseline.push(simple("infra-b", false, RunOutcome::InfrastructureFailure));
    agent.push(simple("p00", false, D::Answer));
    (agent, baseline)
}

#[test]
fn paired_difference_counts_by_hand() {
    let (agent, baseline) = paired_sets();
    let result = paired_difference(&agent, &baseline, 2000, 42);
    assert_eq!(result.paired, 20);
    assert_eq!(result.unpaired, 2);
    assert_eq!(result.excluded_infrastructure, 2);
    assert_eq!(result.duplicate_ids, 1);
    assert_eq!(result.agent_only_wins, 6);
    assert_eq!(result.baseline_only_wins, 2);
    assert_eq!(result.both_succeeded, 8);
    assert_eq!(result.neither_succeeded, 4);
    assert_eq!(result.agent_successes, 14);
    assert_eq!(result.baseline_successes, 10);
    assert_close(result.agent_accuracy, 0.7);
    assert_close(result.baseline_accuracy, 0.5);
    assert_close(result.mean_difference, 0.2);
}

#[test]
fn the_win_lists_name_the_pairs_the_counts_count() {
    let (agent, baseline) = paired_sets();
    let (agent_only, baseline_only) = only_wins(&agent, &baseline);
    let expected: Vec<String> = (0..6).map(|index| format!("p{index:02}")).collect();
    assert_eq!(
        agent_only, expected,
        "infrastructure pairs, unpaired ids and the later duplicate left out"
    );
    assert_eq!(baseline_only, vec!["p06".to_string(), "p07".to_string()]);
    let counted = paired_difference(&agent, &baseline, 0, 0);
    assert_eq!(agent_only.len() as u64, counted.agent_only_wins);
    assert_eq!(baseline_only.len() as u64, counted.baseline_only_wins);
    // The first outcome of an id counts: with the wrong p00 first, p00 is no win.
    let mut wrong_first = agent.clone();
    wrong_first.insert(0, simple("p00", false, Decision::Answer));
    assert!(!only_wins(&wrong_first, &baseline)
        .0
        .contains(&"p00".to_string()));
}

#[test]
fn bootstrap_is_deterministic_and_contains_the_estimate() {
    let (agent, baseline) = paired_sets();
    let first = paired_difference(&agent, &baseline, 2000, 42);
    let again = paired_difference(&agent, &baseline, 2000, 42);
    assert_eq!(first, again);
    // The input order does not matter: pairs are taken in id order.
    let mut reversed_agent = agent.clone();
    reversed_agent.reverse();
    // Drop the duplicate p00, which the reversal would put first (the first one counts).
    reversed_agent.retain(|o| o.id != "p00" || o.correct);
    let mut reversed_baseline = baseline.clone();
    reversed_baseline.reverse();
    let reordered = paired_difference(&reversed_agent, &reversed_baseline, 2000, 42);
    assert_eq!(reordered.bootstrap95, first.bootstrap95);

    let interval = first.bootstrap95.expect("interval");
    let estimate = first.mean_difference.expect("estimate");
    assert!(
        interval.lower <= estimate && estimate <= interval.upper,
        "{interval:?}"
    );
    assert!(interval.lower < interval.upper);
    // Means of 20 differences are multiples of 1/20.
    assert!(((interval.lower * 20.0).round() - interval.lower * 20.0).abs() < 1e-9);
    assert!(interval.lower >= -1.0 && interval.upper <= 1.0);
    let other_seed = paired_difference(&agent, &baseline, 2000, 43);
    assert_eq!(other_seed.mean_difference, first.mean_difference);
}

#[test]
fn bootstrap_of_identical_systems_is_a_point() {
    let agent: Vec<_> = (0..10)
        .map(|i| simple(&format!("q{i}"), i % 2 == 0, Decision::Answer))
        .collect();
    let result = paired_difference(&agent, &agent, 500, 9);
    assert_eq!(result.mean_difference, Some(0.0));
    assert_eq!(
        result.bootstrap95,
        Some(Interval {
            lower: 0.0,
            upper: 0.0
        })
    );
    assert_eq!(paired_difference(&agent, &agent, 0, 9).bootstrap95, None);
}

#[test]
fn an_agent_error_is_scored_as_wrong_while_infrastructure_is_left_out() {
    let outcomes = vec![
        simple("right", true, Decision::Answer),
        simple("defect", false, RunOutcome::AgentError),
        simple("outage", false, RunOutcome::InfrastructureFailure),
    ];
    let summary = summarize(&outcomes);
    assert_eq!(summary.scored, 2, "the agent's own failure counts");
    assert_eq!(summary.infrastructure_failures, 1);
    assert_eq!(summary.decisions.failed, 1);
    assert_close(summary.accuracy.rate, 0.5);
}
