//! The one random-number generator: splitmix64 (Steele, Lea and Flood; Vigna's reference
//! constants), written out here because the `rand` crate does not promise the same stream
//! across versions. The demo data and the evaluation samples and bootstraps must never
//! change under a dependency bump.

/// A splitmix64 stream.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0) as ⌊u·n / 2^64⌋: multiply-shift rather than
    /// modulo, bias at most n/2^64, and fully deterministic.
    pub fn below(&mut self, n: u64) -> u64 {
        let wide = u128::from(self.next_u64()) * u128::from(n);
        // The high half of a 64x64 product always fits in 64 bits.
        u64::try_from(wide >> 64).unwrap_or(0)
    }

    /// A uniform index into a slice of length `len` (0 when `len` is 0).
    pub fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(len as u64)).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_matches_the_reference_values() {
        // Vigna's splitmix64 with seed 0 starts with these outputs.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn below_stays_in_range_and_handles_zero() {
        let mut rng = SplitMix64::new(7);
        assert!((0..1000).all(|_| rng.below(10) < 10));
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.index(0), 0);
    }
}
