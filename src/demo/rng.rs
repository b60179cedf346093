//! The generator's random numbers: the shared splitmix64 stream ([`crate::rng`]) seeded
//! per label, with the draws the generator needs (ranges, chances, picks, shuffles,
//! weights). The demo data must never change under a dependency bump: golden answers
//! depend on it.

use crate::rng::SplitMix64;

/// The fixed seed of the demo database. Changing it changes every golden answer.
pub const DEMO_SEED: u64 = 0x4153_4B44_4221_2025;

/// A splitmix64 stream for one part of the data.
#[derive(Debug, Clone)]
pub struct Rng {
    stream: SplitMix64,
}

impl Rng {
    /// A stream for one part of the data, derived from the fixed seed and a label, so
    /// that changing how one table is generated leaves the other tables' rows alone.
    pub fn for_label(label: &str) -> Rng {
        // FNV-1a of the label, mixed into the seed.
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in label.bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
        Rng {
            stream: SplitMix64::new(DEMO_SEED ^ hash),
        }
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.stream.below(n)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        let span = hi.abs_diff(lo) + 1;
        lo.wrapping_add_unsigned(self.below(span))
    }

    /// Uniform index into a slice of length `len` (`len` must be non-zero to be useful).
    pub fn index(&mut self, len: usize) -> usize {
        self.stream.index(len)
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// A uniformly chosen element.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.index(items.len())]
    }

    /// Fisher-Yates shuffle in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.index(i + 1));
        }
    }

    /// An index chosen with probability proportional to `weights[i]`. All-zero weights
    /// fall back to the first index.
    pub fn weighted(&mut self, weights: &[u64]) -> usize {
        let total: u64 = weights.iter().sum();
        if total == 0 {
            return 0;
        }
        let mut target = self.below(total);
        for (i, &w) in weights.iter().enumerate() {
            if target < w {
                return i;
            }
            target -= w;
        }
        weights.len() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_is_fixed() {
        let mut a = Rng::for_label("bills");
        let mut b = Rng::for_label("bills");
        for _ in 0..100 {
            let x = a.range(-5, 5);
            assert_eq!(x, b.range(-5, 5));
            assert!((-5..=5).contains(&x));
        }
    }
}
