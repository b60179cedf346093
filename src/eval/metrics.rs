//! Metrics of one run in one mode, computed from per-question outcomes
//! ([`QuestionOutcome`]), and the paired agent-vs-baseline difference.
//!
//! Every number below can be recomputed by hand from the per-question file.
//!
//! **Which questions count.** A question whose decision is `infrastructure_failure`
//! (model unreachable, rate limit, ...) is *not scored*: it is counted in
//! `infrastructure_failures` and left out of every rate, never scored as wrong. Every other
//! question is *scored*. A question is *answerable* when `expected` is `answer`, and
//! *unanswerable* when it is `refuse`, `clarify` or `refuse_or_clarify`.
//!
//! **Success** ([`is_success`]), the one notion every accuracy uses:
//!
//! | expected | success when the decision is |
//! |---|---|
//! | `answer` | `answer` and `correct` (the final result matched the gold) |
//! | `refuse` | `decline` |
//! | `clarify` | `clarify` |
//! | `refuse_or_clarify` | `decline` or `clarify` |
//!
//! An infrastructure failure is never a success (and is never scored anyway).
//!
//! **Summary fields** ([`summarize`]); "scored" restricts to scored questions throughout:
//!
//! - `questions`: all outcomes; `scored`: those not `infrastructure_failure`;
//!   `infrastructure_failures`: the rest.
//! - `accuracy`: successes / scored questions, answerable and unanswerable alike (a success
//!   is the right answer or the right refusal or clarification), with a Wilson 95% interval.
//! - `answerable_accuracy`: successes / scored answerable questions (execution accuracy in
//!   the benchmarks' sense), with its Wilson interval.
//! - `by_category`: per category, successes / scored questions of that category, with its
//!   Wilson interval (a category whose questions all failed on infrastructure shows 0/0).
//! - `decisions`: scored questions by decision (answered, clarified, declined, gave_up).
//! - `unanswerable`: scored unanswerable questions; of these, `correct_refusals` are the
//!   successes (declined when a refusal was expected, clarified when a clarification was,
//!   either for `refuse_or_clarify`), `wrong_form_abstentions` declined where only a
//!   clarification was expected or clarified where only a refusal was, and
//!   `invented_answers` answered anyway. The remainder gave up.
//! - `false_refusals`: scored answerable questions whose decision is `decline` or `clarify`
//!   (giving up after failed attempts is not a refusal: it is in `decisions.gave_up`);
//!   `false_refusal_rate` = false_refusals / scored answerable questions.
//! - Clarifications: a clarification is *expected* when `expected` is `clarify` or
//!   `refuse_or_clarify` (`refuse_or_clarify` counts as an expected refusal and as an
//!   expected clarification). `clarifications_made` = scored questions with decision
//!   `clarify`; `clarifications_expected` = scored questions whose clarification is expected;
//!   `expected_clarifications_made` = scored questions with both.
//!   `clarification_precision` = expected_clarifications_made / clarifications_made;
//!   `clarification_recall` = expected_clarifications_made / clarifications_expected (so
//!   declining a `refuse_or_clarify` question is a success but lowers the recall).
//! - `first_attempt_failures`: scored questions whose first attempt raised a database error
//!   or was refused by the guard (`first_attempt_failed`).
//! - Rescue, over scored answerable questions only: the first attempt is *correct* when
//!   `first_attempt_correct` is `Some(true)`, otherwise (wrong, no result, failed) it is
//!   *not correct*. `first_attempt_correct` counts the former, `first_attempt_not_correct`
//!   the latter; `rescued` = first attempt not correct and success; `broken` = first attempt
//!   correct and not success; `rescue_rate` = rescued / first_attempt_not_correct. Hence
//!   answerable successes = first_attempt_correct − broken + rescued.
//! - `mean_attempts_to_success`: the mean of `attempts` over scored answerable successes.
//! - `latency_p50_ms`, `latency_p95_ms`: nearest-rank percentiles of `latency_ms` over
//!   scored questions (an outage's latency measures the outage, not the agent): with the
//!   n latencies sorted ascending, the p-th percentile is the value at 1-based rank
//!   ⌈p·n/100⌉ (at least 1), see [`percentile_nearest_rank`].
//! - `input_tokens`, `output_tokens`, `cost_usd`: sums over *all* questions, infrastructure
//!   failures included (a failed call may still have cost tokens). A non-finite cost adds 0.
//! - `model_speed`, over scored questions whose calls the model server timed (llama.cpp
//!   reports its own clock; None when no question has it): `ms_per_generated_token` =
//!   the server's generation milliseconds summed / generated tokens summed, over calls
//!   that wrote one reply (sampled candidates decode side by side, slower a step; their
//!   milliseconds a step are `ms_per_side_by_side_step`),
//!   `ms_per_prompt_token` = its prompt milliseconds summed / the prompt tokens it read
//!   (those its cache lacked) summed, `server_ms_p50` = the nearest-rank median of each
//!   question's server milliseconds (reading and writing, every call).
//!
//! A ratio with a zero denominator is `None` (null in JSON), never NaN.
//!
//! The Wilson 95% interval and the percentiles are defined in [`intervals`], the paired
//! difference and its bootstrap in [`paired`].

mod intervals;
mod paired;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use intervals::{percentile_nearest_rank, wilson_interval, Interval, Z_95};
pub use paired::{only_wins, paired_difference, PairedDifference};

/// What the question called for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Expected {
    Answer,
    Refuse,
    Clarify,
    RefuseOrClarify,
}

impl Expected {
    fn is_answerable(self) -> bool {
        self == Expected::Answer
    }

    fn expects_clarification(self) -> bool {
        matches!(self, Expected::Clarify | Expected::RefuseOrClarify)
    }
}

use crate::agent::Decision;
use crate::llm::ServerTimings;

/// How a question ended in a run: the agent's decision, or one of the two ways of
/// reaching none. Records carry it by one name (`answer`, `clarify`, `decline`,
/// `give_up`, `infrastructure_failure`, `agent_error`), the decision's own for the four.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    Decided(Decision),
    /// The model or its service failed (unreachable, rate limited): not scored.
    InfrastructureFailure,
    /// askdb itself failed on the question (a database error outside a query, an
    /// internal error): an agent defect, scored as wrong, never hidden as
    /// infrastructure.
    AgentError,
}

impl RunOutcome {
    pub const ALL: [RunOutcome; 6] = [
        RunOutcome::Decided(Decision::Answer),
        RunOutcome::Decided(Decision::Clarify),
        RunOutcome::Decided(Decision::Decline),
        RunOutcome::Decided(Decision::GiveUp),
        RunOutcome::InfrastructureFailure,
        RunOutcome::AgentError,
    ];

    /// The outcome's name, as run records carry it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Decided(decision) => decision.as_str(),
            RunOutcome::InfrastructureFailure => "infrastructure_failure",
            RunOutcome::AgentError => "agent_error",
        }
    }

    pub fn parse(text: &str) -> Option<RunOutcome> {
        RunOutcome::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == text)
    }

    /// The agent's decision, when it reached one.
    pub fn decision(self) -> Option<Decision> {
        match self {
            RunOutcome::Decided(decision) => Some(decision),
            RunOutcome::InfrastructureFailure | RunOutcome::AgentError => None,
        }
    }
}

impl From<Decision> for RunOutcome {
    fn from(decision: Decision) -> RunOutcome {
        RunOutcome::Decided(decision)
    }
}

/// `outcome == Decision::Answer`: whether the agent reached that decision.
impl PartialEq<Decision> for RunOutcome {
    fn eq(&self, decision: &Decision) -> bool {
        self.decision() == Some(*decision)
    }
}

impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The flat name (`Answer`, `InfrastructureFailure`), not `Decided(Answer)`: the run's
/// progress line shows it, and in lower case it keys `agent_failures_by_type` in every
/// summary written so far.
impl std::fmt::Debug for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunOutcome::Decided(decision) => std::fmt::Debug::fmt(decision, f),
            RunOutcome::InfrastructureFailure => f.write_str("InfrastructureFailure"),
            RunOutcome::AgentError => f.write_str("AgentError"),
        }
    }
}

impl Serialize for RunOutcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for RunOutcome {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<RunOutcome, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        RunOutcome::parse(&text).ok_or_else(|| {
            let names: Vec<String> = RunOutcome::ALL
                .iter()
                .map(|outcome| format!("`{}`", outcome.as_str()))
                .collect();
            serde::de::Error::custom(format!(
                "unknown variant `{text}`, expected one of {}",
                names.join(", ")
            ))
        })
    }
}

/// One question's outcome in one run and mode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuestionOutcome {
    pub id: String,
    pub category: String,
    pub expected: Expected,
    pub decision: RunOutcome,
    /// The final answer matched the gold; only meaningful when the decision is Answer.
    pub correct: bool,
    /// Whether the first attempt's result matched the gold; None when the first attempt
    /// produced no result.
    pub first_attempt_correct: Option<bool>,
    /// The first attempt raised a database error or was refused by the guard.
    pub first_attempt_failed: bool,
    pub attempts: u32,
    pub latency_ms: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    /// The model server's clock summed over the question's calls (None where it reports
    /// none, and in records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimings>,
}

/// The model server's speed over a run's scored questions, by its own clock: what tells
/// a slower machine (more milliseconds a token) from a longer prompt or reply (more
/// tokens) when two runs' latencies differ.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelSpeed {
    /// Questions whose calls the server timed.
    pub questions: u64,
    /// Every call's, sampled ones included.
    pub generated_tokens: u64,
    /// Calls that wrote one reply only: the machine's speed.
    pub ms_per_generated_token: Option<f64>,
    /// A step of calls that decoded sampled candidates side by side (None without any).
    #[serde(default)]
    pub ms_per_side_by_side_step: Option<f64>,
    pub prompt_tokens_read: u64,
    pub ms_per_prompt_token: Option<f64>,
    /// The median over those questions of the server's time (reading and writing): set
    /// beside `latency_p50_ms`, the rest of a question's wait is askdb's and the path's.
    pub server_ms_p50: Option<u64>,
}

/// Whether the outcome counts in the rates (everything but infrastructure failures).
pub fn is_scored(outcome: &QuestionOutcome) -> bool {
    outcome.decision != RunOutcome::InfrastructureFailure
}

/// The right answer for an answerable question, the right refusal or clarification for
/// an unanswerable one (table in the module doc).
pub fn is_success(outcome: &QuestionOutcome) -> bool {
    let Some(decision) = outcome.decision.decision() else {
        return false;
    };
    match (outcome.expected, decision) {
        (Expected::Answer, Decision::Answer) => outcome.correct,
        (Expected::Refuse, Decision::Decline) => true,
        (Expected::Clarify, Decision::Clarify) => true,
        (Expected::RefuseOrClarify, Decision::Decline | Decision::Clarify) => true,
        _ => false,
    }
}

/// k successes out of n, with the rate and its Wilson 95% interval (None when n = 0).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    pub successes: u64,
    pub total: u64,
    pub rate: Option<f64>,
    pub wilson95: Option<Interval>,
}

impl Rate {
    pub fn new(successes: u64, total: u64) -> Self {
        Rate {
            successes,
            total,
            rate: ratio(successes, total),
            wilson95: wilson_interval(successes, total),
        }
    }
}

/// Scored questions by final decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DecisionCounts {
    pub answered: u64,
    pub clarified: u64,
    pub declined: u64,
    pub gave_up: u64,
    /// Questions askdb itself failed on ([`RunOutcome::AgentError`]).
    #[serde(default)]
    pub failed: u64,
}

/// The metrics of one run in one mode; every field is defined in the module doc.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub questions: u64,
    pub scored: u64,
    pub infrastructure_failures: u64,
    pub accuracy: Rate,
    pub answerable_accuracy: Rate,
    pub by_category: BTreeMap<String, Rate>,
    pub decisions: DecisionCounts,
    pub unanswerable: u64,
    pub correct_refusals: u64,
    pub wrong_form_abstentions: u64,
    pub invented_answers: u64,
    pub false_refusals: u64,
    pub false_refusal_rate: Option<f64>,
    pub clarifications_made: u64,
    pub clarifications_expected: u64,
    pub expected_clarifications_made: u64,
    pub clarification_precision: Option<f64>,
    pub clarification_recall: Option<f64>,
    pub first_attempt_failures: u64,
    pub first_attempt_correct: u64,
    pub first_attempt_not_correct: u64,
    pub rescued: u64,
    pub broken: u64,
    pub rescue_rate: Option<f64>,
    pub mean_attempts_to_success: Option<f64>,
    pub latency_p50_ms: Option<u64>,
    pub latency_p95_ms: Option<u64>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    /// None where the server timed no call (and in summaries written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_speed: Option<ModelSpeed>,
}

/// The server's speed over the scored questions that carry its clock.
pub fn model_speed(outcomes: &[QuestionOutcome]) -> Option<ModelSpeed> {
    let timed: Vec<ServerTimings> = outcomes
        .iter()
        .filter(|outcome| is_scored(outcome))
        .filter_map(|outcome| outcome.server_timings)
        .collect();
    let server_ms: Vec<u64> = timed
        .iter()
        .map(|timings| (timings.prompt_ms + timings.generation_ms).round() as u64)
        .collect();
    let total = ServerTimings::total(timed.iter().copied())?;
    Some(ModelSpeed {
        questions: timed.len() as u64,
        generated_tokens: total.generated_tokens,
        ms_per_generated_token: total.ms_per_generated_token(),
        ms_per_side_by_side_step: total.ms_per_side_by_side_step(),
        prompt_tokens_read: total.prompt_tokens_read,
        ms_per_prompt_token: total.ms_per_prompt_token(),
        server_ms_p50: percentile_nearest_rank(&server_ms, 50),
    })
}

/// Computes the metrics of one run in one mode (definitions in the module doc).
pub fn summarize(outcomes: &[QuestionOutcome]) -> Summary {
    let mut scored = 0u64;
    let mut successes = 0u64;
    let mut answerable = 0u64;
    let mut answerable_successes = 0u64;
    let mut categories: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut decisions = DecisionCounts::default();
    let mut unanswerable = 0u64;
    let mut correct_refusals = 0u64;
    let mut wrong_form_abstentions = 0u64;
    let mut invented_answers = 0u64;
    let mut false_refusals = 0u64;
    let mut clarifications_made = 0u64;
    let mut clarifications_expected = 0u64;
    let mut expected_clarifications_made = 0u64;
    let mut first_attempt_failures = 0u64;
    let mut first_attempt_correct = 0u64;
    let mut first_attempt_not_correct = 0u64;
    let mut rescued = 0u64;
    let mut broken = 0u64;
    let mut attempts_of_successes = 0u64;
    let mut latencies: Vec<u64> = Vec::new();
    let mut input_tokens = 0u64;
    let mut output_tokens = 0u64;
    let mut cost_usd = 0.0f64;

    for outcome in outcomes {
        input_tokens = input_tokens.saturating_add(outcome.input_tokens);
        output_tokens = output_tokens.saturating_add(outcome.output_tokens);
        if outcome.cost_usd.is_finite() {
            cost_usd += outcome.cost_usd;
        }
        // Created even for infrastructure failures, so a category that only failed shows 0/0.
        let category = categories.entry(outcome.category.clone()).or_default();
        if !is_scored(outcome) {
            continue;
        }
        scored += 1;
        latencies.push(outcome.latency_ms);
        let success = is_success(outcome);
        category.1 += 1;
        if success {
            successes += 1;
            category.0 += 1;
        }
        match outcome.decision {
            RunOutcome::Decided(Decision::Answer) => decisions.answered += 1,
            RunOutcome::Decided(Decision::Clarify) => decisions.clarified += 1,
            RunOutcome::Decided(Decision::Decline) => decisions.declined += 1,
            RunOutcome::Decided(Decision::GiveUp) => decisions.gave_up += 1,
            RunOutcome::AgentError => decisions.failed += 1,
            RunOutcome::InfrastructureFailure => {}
        }
        let abstained = matches!(
            outcome.decision.decision(),
            Some(Decision::Decline | Decision::Clarify)
        );
        if outcome.first_attempt_failed {
            first_attempt_failures += 1;
        }
        if outcome.decision == Decision::Clarify {
            clarifications_made += 1;
        }
        if outcome.expected.expects_clarification() {
            clarifications_expected += 1;
            if outcome.decision == Decision::Clarify {
                expected_clarifications_made += 1;
            }
        }
        if outcome.expected.is_answerable() {
            answerable += 1;
            if abstained {
                false_refusals += 1;
            }
            let first_correct = outcome.first_attempt_correct == Some(true);
            if first_correct {
                first_attempt_correct += 1;
                if !success {
                    broken += 1;
                }
            } else {
                first_attempt_not_correct += 1;
                if success {
                    rescued += 1;
                }
            }
            if success {
                answerable_successes += 1;
                attempts_of_successes += u64::from(outcome.attempts);
            }
        } else {
            unanswerable += 1;
            if success {
                correct_refusals += 1;
            } else if abstained {
                wrong_form_abstentions += 1;
            } else if outcome.decision == Decision::Answer {
                invented_answers += 1;
            }
        }
    }

    Summary {
        questions: outcomes.len() as u64,
        scored,
        infrastructure_failures: outcomes.len() as u64 - scored,
        accuracy: Rate::new(successes, scored),
        answerable_accuracy: Rate::new(answerable_successes, answerable),
        by_category: categories
            .into_iter()
            .map(|(name, (hits, total))| (name, Rate::new(hits, total)))
            .collect(),
        decisions,
        unanswerable,
        correct_refusals,
        wrong_form_abstentions,
        invented_answers,
        false_refusals,
        false_refusal_rate: ratio(false_refusals, answerable),
        clarifications_made,
        clarifications_expected,
        expected_clarifications_made,
        clarification_precision: ratio(expected_clarifications_made, clarifications_made),
        clarification_recall: ratio(expected_clarifications_made, clarifications_expected),
        first_attempt_failures,
        first_attempt_correct,
        first_attempt_not_correct,
        rescued,
        broken,
        rescue_rate: ratio(rescued, first_attempt_not_correct),
        mean_attempts_to_success: ratio(attempts_of_successes, answerable_successes),
        latency_p50_ms: percentile_nearest_rank(&latencies, 50),
        latency_p95_ms: percentile_nearest_rank(&latencies, 95),
        input_tokens,
        output_tokens,
        cost_usd,
        model_speed: model_speed(outcomes),
    }
}

fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

#[cfg(test)]
mod tests {
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
        let timed =
            |id: &str, decision: RunOutcome, timings: Option<ServerTimings>| QuestionOutcome {
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
}
