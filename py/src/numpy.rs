//! numpy's `np.random.default_rng(seed)` exactly: PCG64 (XSL-RR 128/64) seeded through
//! `SeedSequence`, with `Generator.random()` and `Generator.integers(low, high, n)` for int64,
//! so the `random` predefined dataset draws the reference's lengths and start tokens.

/// PCG's default 128-bit multiplier (`PCG_DEFAULT_MULTIPLIER_128`).
const PCG_MULTIPLIER: u128 = 0x2360_ED05_1FC6_5DA4_4385_DF64_9FCC_F645;

// SeedSequence's hashing constants (numpy/random/bit_generator.pyx).
const INIT_A: u32 = 0x43b0_d7e5;
const MULT_A: u32 = 0x931e_8875;
const INIT_B: u32 = 0x8b51_f9dd;
const MULT_B: u32 = 0x58f3_8ded;
const MIX_MULT_L: u32 = 0xca01_f9dd;
const MIX_MULT_R: u32 = 0x4973_f715;
const XSHIFT: u32 = 16;
const POOL_SIZE: usize = 4;

/// `Generator(PCG64(SeedSequence(seed)))`, with PCG64's buffered 32-bit half, which
/// carries over between calls as numpy's does.
#[derive(Debug, Clone)]
pub struct NumpyRng {
    state: u128,
    inc: u128,
    /// The upper half of the last 64-bit draw, not yet used by a 32-bit draw.
    spare_u32: Option<u32>,
}

impl NumpyRng {
    /// `np.random.default_rng(seed)` for a non-negative integer seed.
    pub fn new(seed: u64) -> NumpyRng {
        let words = seed_sequence_state(seed);
        let u64_at = |i: usize| u64::from(words[2 * i]) | (u64::from(words[2 * i + 1]) << 32);
        // `pcg64_set_seed`: the 128-bit state and increment, high word first.
        let init_state = (u128::from(u64_at(0)) << 64) | u128::from(u64_at(1));
        let init_seq = (u128::from(u64_at(2)) << 64) | u128::from(u64_at(3));
        let mut rng = NumpyRng { state: 0, inc: (init_seq << 1) | 1, spare_u32: None };
        rng.step();
        rng.state = rng.state.wrapping_add(init_state);
        rng.step();
        rng
    }

    fn step(&mut self) {
        self.state = self.state.wrapping_mul(PCG_MULTIPLIER).wrapping_add(self.inc);
    }

    /// The next 64 random bits (XSL-RR output of the advanced state).
    pub fn next_u64(&mut self) -> u64 {
        self.step();
        let s = self.state;
        let xored = ((s >> 64) as u64) ^ (s as u64);
        xored.rotate_right((s >> 122) as u32)
    }

    /// The next 32 random bits: the low half of a 64-bit draw, then its high half.
    pub fn next_u32(&mut self) -> u32 {
        if let Some(spare) = self.spare_u32.take() {
            return spare;
        }
        let next = self.next_u64();
        self.spare_u32 = Some((next >> 32) as u32);
        next as u32
    }

    /// `Generator.random()`: a double in [0, 1) from the top 53 bits (the published
    /// outputs that check this generator are of `random()`).
    #[cfg(test)]
    pub fn random(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `Generator.integers(low, high, n)` (int64, high exclusive); `None` when
    /// `low >= high`, which numpy refuses.
    pub fn integers(&mut self, low: i64, high: i64, n: usize) -> Option<Vec<i64>> {
        if low >= high {
            return None;
        }
        let range = (high as i128 - 1 - low as i128) as u64;
        let mut draw: Box<dyn FnMut(&mut NumpyRng) -> u64> = match range {
            // A range of one value draws nothing, as numpy's fill does.
            0 => Box::new(|_| 0),
            r if r == u64::from(u32::MAX) => Box::new(|g| u64::from(g.next_u32())),
            r if r < u64::from(u32::MAX) => Box::new(move |g| u64::from(g.lemire_u32(r as u32))),
            u64::MAX => Box::new(|g| g.next_u64()),
            r => Box::new(move |g| g.lemire_u64(r)),
        };
        Some((0..n).map(|_| (low as i128 + draw(self) as i128) as i64).collect())
    }

    /// Lemire's bounded draw in [0, range] from 32-bit words (`buffered_bounded_lemire_uint32`).
    fn lemire_u32(&mut self, range: u32) -> u32 {
        let excl = range + 1;
        let mut m = u64::from(self.next_u32()) * u64::from(excl);
        let mut leftover = m as u32;
        if leftover < excl {
            let threshold = (u32::MAX - range) % excl;
            while leftover < threshold {
                m = u64::from(self.next_u32()) * u64::from(excl);
                leftover = m as u32;
            }
        }
        (m >> 32) as u32
    }

    /// Lemire's bounded draw in [0, range] from 64-bit words (`bounded_lemire_uint64`).
    fn lemire_u64(&mut self, range: u64) -> u64 {
        let excl = range + 1;
        let mut m = u128::from(self.next_u64()) * u128::from(excl);
        let mut leftover = m as u64;
        if leftover < excl {
            let threshold = (u64::MAX - range) % excl;
            while leftover < threshold {
                m = u128::from(self.next_u64()) * u128::from(excl);
                leftover = m as u64;
            }
        }
        (m >> 64) as u64
    }
}

/// `SeedSequence(seed).generate_state(4, np.uint64)` as eight 32-bit words, low word first.
fn seed_sequence_state(seed: u64) -> [u32; 8] {
    // The entropy as 32-bit words, least significant first (`_coerce_to_uint32_array`).
    let entropy: Vec<u32> =
        if seed >> 32 == 0 { vec![seed as u32] } else { vec![seed as u32, (seed >> 32) as u32] };
    let pool = mix_entropy(&entropy);
    let mut out = [0u32; 8];
    let mut hash_const = INIT_B;
    for (i, word) in out.iter_mut().enumerate() {
        let mut v = pool[i % POOL_SIZE] ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_B);
        v = v.wrapping_mul(hash_const);
        *word = v ^ (v >> XSHIFT);
    }
    out
}

/// SeedSequence's `mix_entropy` over a pool of four words.
fn mix_entropy(entropy: &[u32]) -> [u32; POOL_SIZE] {
    let mut hash_const = INIT_A;
    let mut hashmix = |value: u32| {
        let mut v = value ^ hash_const;
        hash_const = hash_const.wrapping_mul(MULT_A);
        v = v.wrapping_mul(hash_const);
        v ^ (v >> XSHIFT)
    };
    let mix = |x: u32, y: u32| {
        let r = MIX_MULT_L.wrapping_mul(x).wrapping_sub(MIX_MULT_R.wrapping_mul(y));
        r ^ (r >> XSHIFT)
    };
    let mut pool = [0u32; POOL_SIZE];
    for (i, slot) in pool.iter_mut().enumerate() {
        *slot = hashmix(entropy.get(i).copied().unwrap_or(0));
    }
    for src in 0..POOL_SIZE {
        for dst in 0..POOL_SIZE {
            if src != dst {
                let h = hashmix(pool[src]);
                pool[dst] = mix(pool[dst], h);
            }
        }
    }
    for &word in entropy.iter().skip(POOL_SIZE) {
        for slot in pool.iter_mut() {
            let h = hashmix(word);
            *slot = mix(*slot, h);
        }
    }
    pool
}

#[cfg(test)]
mod tests {
    use super::*;

    /// numpy's documented `np.random.default_rng(42).random()`, the next four as its docs print
    /// `rng.random(5)`, and `default_rng(42).integers(0, 10, 10)` as tutorials print it.
    #[test]
    fn default_rng_42_random_is_numpys_published_value() {
        let mut rng = NumpyRng::new(42);
        assert_eq!(rng.random(), 0.7739560485559633);
        let rest: Vec<String> = (0..4).map(|_| format!("{:.8}", rng.random())).collect();
        assert_eq!(rest, ["0.43887844", "0.85859792", "0.69736803", "0.09417735"]);
        assert_eq!(NumpyRng::new(42).integers(0, 10, 10).unwrap(), [0, 7, 6, 4, 4, 8, 0, 6, 2, 0]);
    }

    #[test]
    fn default_rng_658_random_and_integers_match_published_outputs() {
        let mut rng = NumpyRng::new(658);
        assert_eq!(rng.random(), 0.13691146845619506);
        let grid: Vec<String> = (0..8).map(|_| format!("{:.8}", rng.random())).collect();
        let published = ["0.01942912", "0.66771210", "0.53724923", "0.96555969"];
        assert_eq!(grid[..4], published);
        assert_eq!(grid[4..], ["0.96332317", "0.99939053", "0.21081741", "0.89918228"]);
        let mut rng = NumpyRng::new(658);
        assert_eq!(rng.integers(0, 10, 5).unwrap(), [4, 1, 6, 0, 0]);
    }

    /// A 32-bit draw uses one half of a 64-bit word and keeps the other for the next call, and
    /// a one-value range draws nothing, as numpy's generator does.
    #[test]
    fn integers_carry_the_spare_half_and_a_single_value_draws_nothing() {
        let mut split = NumpyRng::new(7);
        let mut parts = split.integers(0, 1000, 1).unwrap();
        parts.extend(split.integers(0, 1000, 2).unwrap());
        assert_eq!(parts, NumpyRng::new(7).integers(0, 1000, 3).unwrap());
        let mut rng = NumpyRng::new(7);
        assert_eq!(rng.integers(5, 6, 3).unwrap(), [5, 5, 5]);
        assert_eq!(rng.random(), NumpyRng::new(7).random());
        assert_eq!(rng.integers(3, 3, 1), None, "low >= high is refused");
    }
}
