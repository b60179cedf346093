//! The paired agent-vs-baseline difference on the same questions, with its seeded
//! bootstrap interval.
//!
//! **Paired difference** ([`paired_difference`]): agent and baseline outcomes are joined on
//! `id` (the first outcome of an id in each list counts; later duplicates are counted in
//! `duplicate_ids` and ignored). An id present in only one list counts in `unpaired`; a
//! pair where either side is an infrastructure failure counts in `excluded_infrastructure`;
//! every other pair is *paired*. For the n pairs, sorted by id, d = success(agent) −
//! success(baseline) ∈ {−1, 0, 1}; `mean_difference` = Σd / n = (agent_only_wins −
//! baseline_only_wins) / n. The bootstrap draws `resamples` samples of n pairs with
//! replacement, the pair index being ⌊u·n / 2^64⌋ for u the next output of splitmix64
//! seeded with `seed` (indices drawn sample by sample, pair by pair), and takes each
//! sample's mean; the 95% interval is the nearest-rank 2.5th and 97.5th percentiles of
//! those means (1-based ranks ⌈0.025·B⌉ and ⌈0.975·B⌉ of the B sorted means). Same inputs
//! and seed, same interval, on every machine.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::intervals::{nearest_rank_index, Interval};
use super::{is_scored, is_success, ratio, QuestionOutcome};

/// The paired agent-vs-baseline comparison on the same questions (definitions in the
/// module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    pub paired: u64,
    /// Ids present in only one of the two lists.
    pub unpaired: u64,
    /// Pairs left out because either side failed on infrastructure.
    pub excluded_infrastructure: u64,
    /// Outcomes ignored because their id had already appeared in the same list.
    pub duplicate_ids: u64,
    pub agent_successes: u64,
    pub baseline_successes: u64,
    pub agent_only_wins: u64,
    pub baseline_only_wins: u64,
    pub both_succeeded: u64,
    pub neither_succeeded: u64,
    pub agent_accuracy: Option<f64>,
    pub baseline_accuracy: Option<f64>,
    /// Mean of success(agent) − success(baseline) over the pairs.
    pub mean_difference: Option<f64>,
    /// Bootstrap percentile interval of the mean difference; None without pairs or
    /// resamples.
    pub bootstrap95: Option<Interval>,
    pub resamples: u32,
    pub seed: u64,
}

fn by_id(outcomes: &[QuestionOutcome]) -> (BTreeMap<&str, &QuestionOutcome>, u64) {
    let mut map = BTreeMap::new();
    let mut duplicates = 0u64;
    for outcome in outcomes {
        if map.contains_key(outcome.id.as_str()) {
            duplicates += 1;
        } else {
            map.insert(outcome.id.as_str(), outcome);
        }
    }
    (map, duplicates)
}

/// The pairs of two outcome lists as the paired difference counts them (module doc):
/// each scored pair's id and the two successes, in id order, and what was left out.
struct Pairs<'a> {
    scored: Vec<(&'a str, bool, bool)>,
    unpaired: u64,
    excluded_infrastructure: u64,
    duplicate_ids: u64,
}

fn pairs<'a>(agent: &'a [QuestionOutcome], baseline: &'a [QuestionOutcome]) -> Pairs<'a> {
    let (agent_by_id, agent_duplicates) = by_id(agent);
    let (baseline_by_id, baseline_duplicates) = by_id(baseline);
    let agent_ids: BTreeSet<&str> = agent_by_id.keys().copied().collect();
    let baseline_ids: BTreeSet<&str> = baseline_by_id.keys().copied().collect();
    let mut excluded_infrastructure = 0u64;
    let mut scored = Vec::new();
    // In id order (BTreeMap), so the bootstrap does not depend on the input order.
    for (id, agent_outcome) in &agent_by_id {
        let Some(baseline_outcome) = baseline_by_id.get(id) else {
            continue;
        };
        if !is_scored(agent_outcome) || !is_scored(baseline_outcome) {
            excluded_infrastructure += 1;
            continue;
        }
        scored.push((*id, is_success(agent_outcome), is_success(baseline_outcome)));
    }
    Pairs {
        scored,
        unpaired: agent_ids.symmetric_difference(&baseline_ids).count() as u64,
        excluded_infrastructure,
        duplicate_ids: agent_duplicates + baseline_duplicates,
    }
}

/// The ids of the pairs only the agent got right and of those only the baseline did,
/// counted as [`paired_difference`] counts `agent_only_wins` and `baseline_only_wins`.
pub fn only_wins(
    agent: &[QuestionOutcome],
    baseline: &[QuestionOutcome],
) -> (Vec<String>, Vec<String>) {
    let mut agent_only = Vec::new();
    let mut baseline_only = Vec::new();
    for (id, agent_success, baseline_success) in pairs(agent, baseline).scored {
        match (agent_success, baseline_success) {
            (true, false) => agent_only.push(id.to_string()),
            (false, true) => baseline_only.push(id.to_string()),
            _ => {}
        }
    }
    (agent_only, baseline_only)
}

/// Joins agent and baseline outcomes by id and compares their successes, with a seeded
/// bootstrap interval of the mean difference.
pub fn paired_difference(
    agent: &[QuestionOutcome],
    baseline: &[QuestionOutcome],
    resamples: u32,
    seed: u64,
) -> PairedDifference {
    let pairs = pairs(agent, baseline);
    let mut counts = [[0u64; 2]; 2];
    let mut differences: Vec<i64> = Vec::new();
    for &(_, agent_success, baseline_success) in &pairs.scored {
        counts[usize::from(agent_success)][usize::from(baseline_success)] += 1;
        differences.push(i64::from(agent_success) - i64::from(baseline_success));
    }

    let paired = differences.len() as u64;
    let agent_only_wins = counts[1][0];
    let baseline_only_wins = counts[0][1];
    let both_succeeded = counts[1][1];
    let neither_succeeded = counts[0][0];
    let agent_successes = both_succeeded + agent_only_wins;
    let baseline_successes = both_succeeded + baseline_only_wins;
    let mean_difference =
        (paired > 0).then(|| (agent_only_wins as f64 - baseline_only_wins as f64) / paired as f64);

    PairedDifference {
        paired,
        unpaired: pairs.unpaired,
        excluded_infrastructure: pairs.excluded_infrastructure,
        duplicate_ids: pairs.duplicate_ids,
        agent_successes,
        baseline_successes,
        agent_only_wins,
        baseline_only_wins,
        both_succeeded,
        neither_succeeded,
        agent_accuracy: ratio(agent_successes, paired),
        baseline_accuracy: ratio(baseline_successes, paired),
        mean_difference,
        bootstrap95: bootstrap_interval(&differences, resamples, seed),
        resamples,
        seed,
    }
}

fn bootstrap_interval(differences: &[i64], resamples: u32, seed: u64) -> Option<Interval> {
    let n = differences.len();
    if n == 0 || resamples == 0 {
        return None;
    }
    let mut rng = crate::rng::SplitMix64::new(seed);
    // Sample sums are integers: sorting them is exact, and dividing by n afterwards gives
    // the sample means.
    let mut sums: Vec<i64> = (0..resamples)
        .map(|_| (0..n).map(|_| differences[rng.index(n)]).sum())
        .collect();
    sums.sort_unstable();
    let lower = sums[nearest_rank_index(sums.len(), 25)?];
    let upper = sums[nearest_rank_index(sums.len(), 975)?];
    Some(Interval {
        lower: lower as f64 / n as f64,
        upper: upper as f64 / n as f64,
    })
}
