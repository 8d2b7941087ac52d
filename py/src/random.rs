//! Python's `random.Random`, exactly: MT19937 (the `rand_mt` crate) seeded as CPython seeds an
//! integer, with CPython's `random()`, `getrandbits`, `_randbelow`, `shuffle` and `expovariate`.
//! The reference draws its sample order and Poisson gaps from it, so the same seeds give the
//! same run here.

use rand_mt::Mt;

/// A `random.Random(seed)`.
#[derive(Clone)]
pub struct PyRandom {
    mt: Mt,
}

impl std::fmt::Debug for PyRandom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PyRandom")
    }
}

impl PyRandom {
    /// `random.Random(seed)` for a non-negative integer seed: CPython's `init_by_array` over the
    /// seed's 32-bit words, least significant first (`[0]` for 0).
    pub fn new(seed: u64) -> PyRandom {
        let (low, high) = (seed as u32, (seed >> 32) as u32);
        let key: Vec<u32> = if high == 0 { vec![low] } else { vec![low, high] };
        PyRandom { mt: Mt::new_with_key(key) }
    }

    /// `random()`: 53 bits from two draws, uniform in [0, 1).
    pub fn random(&mut self) -> f64 {
        let a = self.mt.next_u32() >> 5;
        let b = self.mt.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `getrandbits(k)` for 1 ≤ k ≤ 32.
    fn getrandbits(&mut self, k: u32) -> u32 {
        debug_assert!((1..=32).contains(&k));
        self.mt.next_u32() >> (32 - k)
    }

    /// `_randbelow(n)` for 1 ≤ n < 2^32: rejection sampling over `n.bit_length()` bits.
    pub fn randbelow(&mut self, n: u32) -> u32 {
        let k = 32 - n.leading_zeros();
        loop {
            let r = self.getrandbits(k);
            if r < n {
                return r;
            }
        }
    }

    /// `shuffle(x)`: Fisher–Yates from the end, as CPython.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.randbelow(i as u32 + 1) as usize;
            items.swap(i, j);
        }
    }

    /// `randbytes(8)`: `getrandbits(64).to_bytes(8, "little")`, so the first draw's bytes, least
    /// significant first, then the second's.
    pub fn randbytes8(&mut self) -> [u8; 8] {
        let (a, b) = (self.mt.next_u32(), self.mt.next_u32());
        let mut out = [0u8; 8];
        out[..4].copy_from_slice(&a.to_le_bytes());
        out[4..].copy_from_slice(&b.to_le_bytes());
        out
    }

    /// `expovariate(lambd)`: `-log(1 - random()) / lambd`.
    pub fn expovariate(&mut self, lambd: f64) -> f64 {
        -(1.0 - self.random()).ln() / lambd
    }
}

/// The reference's Poisson gap in nanoseconds at `target_qps`: `max(1, int(expovariate(qps / 1e9)))`.
pub fn poisson_gap_ns(rng: &mut PyRandom, target_qps: f64) -> u64 {
    let lambd = target_qps / 1_000_000_000.0;
    (rng.expovariate(lambd) as u64).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values computed once with CPython 3's `random` module:
    //   r = random.Random(seed); l = list(range(1000)); r.shuffle(l)
    //   r = random.Random(seed); [max(1, int(r.expovariate(1000 / 1e9))) for _ in range(6)]
    const SHUFFLES: [(u64, [u32; 10], [u32; 3]); 3] = [
        (0, [439, 621, 160, 549, 237, 389, 658, 507, 124, 290], [776, 394, 864]),
        (42, [776, 507, 895, 922, 33, 483, 85, 750, 354, 523], [25, 114, 654]),
        (12345, [669, 944, 291, 633, 922, 752, 781, 258, 657, 615], [10, 750, 426]),
    ];
    const GAPS_AT_1000_QPS: [(u64, [u64; 6]); 3] = [
        (0, [1860607, 1418629, 545713, 299642, 715954, 519083]),
        (42, [1020060, 25328, 321624, 252586, 1333592, 1129173]),
        (12345, [538916, 10221, 1744150, 354733, 459517, 215251]),
    ];

    #[test]
    fn shuffles_equal_pythons_for_seeds_0_42_and_12345() {
        for (seed, head, tail) in SHUFFLES {
            let mut rows: Vec<u32> = (0..1000).collect();
            PyRandom::new(seed).shuffle(&mut rows);
            assert_eq!(rows[..10], head, "seed {seed}");
            assert_eq!(rows[997..], tail, "seed {seed}");
        }
    }

    #[test]
    fn poisson_gaps_equal_pythons_for_seeds_0_42_and_12345() {
        for (seed, gaps) in GAPS_AT_1000_QPS {
            let mut rng = PyRandom::new(seed);
            let got: Vec<u64> = (0..6).map(|_| poisson_gap_ns(&mut rng, 1000.0)).collect();
            assert_eq!(got, gaps, "seed {seed}");
        }
    }

    /// `repr(random.Random(2**32 + 7).random())` in CPython.
    const PY_RANDOM_2_POW_32_PLUS_7: f64 = 0.22550888929893187;

    #[test]
    fn randbytes_equal_pythons_for_the_warm_up_salt() {
        // Python: [random.Random(s).randbytes(8).hex() ...] (the reference's salt, seed 42 + 2).
        let hex = |b: [u8; 8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        let mut r = PyRandom::new(44);
        let got: Vec<String> = (0..3).map(|_| hex(r.randbytes8())).collect();
        assert_eq!(got, ["a8ce956811102085", "78adbe8a4bfd9cb3", "9f6eaedc0621dd1d"]);
        let mut r = PyRandom::new(0);
        assert_eq!(hex(r.randbytes8()), "cd072cd8be6f9f62");
        assert_eq!(hex(PyRandom::new(12345).randbytes8()), "8799a76a3a4391bb");
    }

    #[test]
    fn seeds_past_32_bits_use_both_words() {
        let mut rng = PyRandom::new((1 << 32) + 7);
        assert_eq!(rng.random(), PY_RANDOM_2_POW_32_PLUS_7);
    }
}
