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

impl ModelSpeed {
    /// A speed in milliseconds to one decimal, `-` where the run had none of its calls.
    pub fn ms_text(ms: Option<f64>) -> String {
        ms.map_or_else(|| "-".to_string(), |ms| format!("{ms:.1}"))
    }
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
mod tests;
