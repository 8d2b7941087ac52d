//! xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift generators,
//! scrambled", 2016): the small seeded generator behind the synthetic sample table and the
//! worker's property tests, so a seed gives the same rows and cases on every machine.
//!
//! It imitates nothing in Python. It lives in this crate because `loadgen-py` is the leaf of the
//! workspace that both the coordinator (whose fixture is library code) and the worker's tests
//! (as a dev-dependency, so the worker itself still depends on nothing of ours) can reach, and it
//! is this crate's subject: a generator whose every draw is fixed by its seed.

/// An xorshift64* generator. Its state is never zero (zero would stay zero).
#[derive(Debug, Clone)]
pub struct Xorshift64Star {
    state: u64,
}

impl Xorshift64Star {
    /// A generator from `seed`; a zero seed is taken as 1.
    pub fn new(seed: u64) -> Xorshift64Star {
        Xorshift64Star { state: seed.max(1) }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A draw in `0..n` (`n > 0`), by remainder: a bias of at most n / 2^64, which no test here
    /// can see.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first draws from seed 1, computed once in Python with the paper's algorithm:
    /// `x ^= x >> 12; x ^= x << 25 & M; x ^= x >> 27; (x * 0x2545F4914F6CDD1D) & M`.
    #[test]
    fn draws_follow_the_reference_algorithm() {
        let mut rng = Xorshift64Star::new(1);
        let draws = [rng.next_u64(), rng.next_u64(), rng.next_u64()];
        assert_eq!(draws, [0x47e4_ce4b_896c_dd1d, 0xabcf_a6a8_e079_651d, 0xb9d1_0d8f_eb73_1f57]);
        assert_eq!(Xorshift64Star::new(0).next_u64(), draws[0]);
        assert!((0..1000).all(|_| rng.below(7) < 7));
    }
}
