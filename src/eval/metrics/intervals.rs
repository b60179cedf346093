//! Intervals and percentiles of the metrics: the Wilson 95% interval of a rate and the
//! nearest-rank percentile (also the bootstrap's quantiles).
//!
//! **Wilson 95% interval** ([`wilson_interval`]) of k successes in n trials, p = k/n,
//! z = 1.959964: centre = (p + z²/2n) / (1 + z²/n), half-width =
//! z·√(p(1−p)/n + z²/4n²) / (1 + z²/n); the interval is centre ± half-width, clamped to
//! [0, 1], the lower bound being exactly 0 when k = 0 and the upper exactly 1 when k = n.
//! None when n = 0.

use serde::{Deserialize, Serialize};

/// z for a two-sided 95% interval.
pub const Z_95: f64 = 1.959964;

/// A closed interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lower: f64,
    pub upper: f64,
}

/// The Wilson score 95% interval of `successes` out of `total` (formula in the module
/// doc); None when `total` is 0 or `successes` exceeds it.
pub fn wilson_interval(successes: u64, total: u64) -> Option<Interval> {
    if total == 0 || successes > total {
        return None;
    }
    let n = total as f64;
    let p = successes as f64 / n;
    let z2 = Z_95 * Z_95;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z_95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    // At k = 0 and k = n the bounds are exactly 0 and 1 in exact arithmetic; set them so
    // rounding error cannot report 0.9999999999999999.
    let lower = if successes == 0 {
        0.0
    } else {
        (centre - half).clamp(0.0, 1.0)
    };
    let upper = if successes == total {
        1.0
    } else {
        (centre + half).clamp(0.0, 1.0)
    };
    Some(Interval { lower, upper })
}

/// The 0-based index of the nearest-rank `per_mille`/1000 quantile of n sorted values:
/// rank ⌈per_mille·n/1000⌉, at least 1 and at most n. Integer arithmetic, so 95% of 20 is
/// exactly rank 19.
pub(super) fn nearest_rank_index(n: usize, per_mille: u64) -> Option<usize> {
    if n == 0 {
        return None;
    }
    let rank = (per_mille.saturating_mul(n as u64)).div_ceil(1000);
    Some((rank.clamp(1, n as u64) - 1) as usize)
}

/// The nearest-rank `percent`-th percentile: the value at 1-based rank ⌈percent·n/100⌉ (at
/// least 1, at most n) of the values sorted ascending; None for no values.
pub fn percentile_nearest_rank(values: &[u64], percent: u32) -> Option<u64> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let index = nearest_rank_index(sorted.len(), u64::from(percent) * 10)?;
    sorted.get(index).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round4(value: f64) -> f64 {
        (value * 10_000.0).round() / 10_000.0
    }

    #[test]
    fn wilson_matches_known_values() {
        let eight = wilson_interval(8, 10).expect("interval");
        assert_eq!((round4(eight.lower), round4(eight.upper)), (0.4902, 0.9433));
        let five_of_eleven = wilson_interval(5, 11).expect("interval");
        assert_eq!(
            (round4(five_of_eleven.lower), round4(five_of_eleven.upper)),
            (0.2127, 0.7199)
        );
    }

    #[test]
    fn wilson_edge_cases() {
        let none = wilson_interval(0, 10).expect("interval");
        assert_eq!(none.lower, 0.0);
        assert_eq!(round4(none.upper), 0.2775);
        let all = wilson_interval(10, 10).expect("interval");
        assert_eq!(round4(all.lower), 0.7225);
        assert_eq!(all.upper, 1.0);
        assert_eq!(wilson_interval(0, 0), None);
        assert_eq!(wilson_interval(3, 2), None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        // The worked example of the nearest-rank method.
        let values = [35, 20, 15, 50, 40];
        assert_eq!(percentile_nearest_rank(&values, 5), Some(15));
        assert_eq!(percentile_nearest_rank(&values, 30), Some(20));
        assert_eq!(percentile_nearest_rank(&values, 40), Some(20));
        assert_eq!(percentile_nearest_rank(&values, 50), Some(35));
        assert_eq!(percentile_nearest_rank(&values, 100), Some(50));
        assert_eq!(percentile_nearest_rank(&values, 0), Some(15));
        assert_eq!(percentile_nearest_rank(&values, 250), Some(50));
        assert_eq!(percentile_nearest_rank(&[], 50), None);
        // 95% of 20 values is rank 19 exactly, no floating-point drift to 20.
        let twenty: Vec<u64> = (1..=20).collect();
        assert_eq!(percentile_nearest_rank(&twenty, 95), Some(19));
        assert_eq!(percentile_nearest_rank(&twenty, 50), Some(10));
    }
}
