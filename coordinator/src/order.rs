//! Sample order: which dataset row each issued sample uses: seeded, without replacement, drawn
//! exactly as the reference draws it (Python's `random.Random(seed).shuffle`, see
//! `loadgen_py::random`).

use loadgen_py::random::PyRandom;

/// A small, fast, seedable generator (SplitMix64) for test fixtures. Not cryptographic.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, bound) without modulo bias worth mentioning (Lemire's multiply-shift).
    pub fn below(&mut self, bound: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(bound)) >> 64) as u64
    }
}

/// Rows in a seeded random order, each row once per pass; reshuffled when a pass ends (the
/// reference's `WithoutReplacementSampleOrder`).
#[derive(Debug)]
pub struct SampleOrder {
    rows: Vec<u32>,
    position: usize,
    /// `None`: a listed order, repeated as given.
    rng: Option<PyRandom>,
    /// Rows of the underlying order per row given: 1, or a shard's count (`strided`).
    step: u64,
}

impl SampleOrder {
    pub fn new(row_count: usize, seed: u64) -> SampleOrder {
        assert!(row_count > 0, "a sample order needs at least one row");
        let rows = (0..row_count as u32).collect();
        let mut order = SampleOrder { rows, position: 0, rng: Some(PyRandom::new(seed)), step: 1 };
        order.shuffle();
        order
    }

    /// Rows in the order given, pass after pass, never shuffled (a warm-up's drawn rows, or
    /// the salted copies the binary appended to the request tables).
    pub fn listed(rows: Vec<u32>) -> SampleOrder {
        assert!(!rows.is_empty(), "a sample order needs at least one row");
        SampleOrder { rows, position: 0, rng: None, step: 1 }
    }

    /// The first `n` rows `new(row_count, seed)` gives, pass after pass.
    pub fn first_rows(row_count: usize, seed: u64, n: u64) -> Vec<u32> {
        let mut order = SampleOrder::new(row_count, seed);
        (0..n).map(|_| order.next_row()).collect()
    }

    fn shuffle(&mut self) {
        if let Some(rng) = &mut self.rng {
            rng.shuffle(&mut self.rows);
        }
        self.position = 0;
    }

    /// A shard's part of this order: rows `first`, `first + step`, `first + 2 step`, … of it,
    /// so the shards of one plan (first = 0..step) together issue exactly its rows, pass
    /// after pass. `strided(0, 1)` is the order itself.
    pub fn strided(mut self, first: u64, step: u64) -> SampleOrder {
        for _ in 0..first {
            self.advance();
        }
        self.step = step.max(1);
        self
    }

    /// The next row to issue.
    pub fn next_row(&mut self) -> u32 {
        let row = self.advance();
        // The rows the other shards issue are drawn and passed over, so each pass's shuffle
        // happens where the single-host order has it.
        for _ in 1..self.step {
            self.advance();
        }
        row
    }

    fn advance(&mut self) -> u32 {
        if self.position == self.rows.len() {
            self.shuffle();
        }
        let row = self.rows[self.position];
        self.position += 1;
        row
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_order_repeats_as_given() {
        let mut order = SampleOrder::listed(vec![5, 1, 9]);
        let got: Vec<u32> = (0..7).map(|_| order.next_row()).collect();
        assert_eq!(got, [5, 1, 9, 5, 1, 9, 5]);
        let first = SampleOrder::first_rows(1000, 42, 5);
        assert_eq!(first, [776, 507, 895, 922, 33], "Random(42).shuffle, as the reference");
    }

    #[test]
    fn rows_come_in_the_references_order_pass_after_pass() {
        // CPython: r = random.Random(42); l = list(range(1000)); r.shuffle(l) (then again).
        let mut order = SampleOrder::new(1000, 42);
        let first: Vec<u32> = (0..1000).map(|_| order.next_row()).collect();
        assert_eq!(first[..5], [776, 507, 895, 922, 33]);
        let second: Vec<u32> = (0..5).map(|_| order.next_row()).collect();
        assert_eq!(second, [134, 114, 160, 755, 441]);
        // random.Random(7), four passes over three rows.
        let mut order = SampleOrder::new(3, 7);
        let rows: Vec<u32> = (0..12).map(|_| order.next_row()).collect();
        assert_eq!(rows, [2, 0, 1, 1, 2, 0, 2, 0, 1, 1, 2, 0]);
    }

    #[test]
    fn every_row_once_per_pass_then_a_new_order() {
        let mut order = SampleOrder::new(100, 42);
        let first: Vec<u32> = (0..100).map(|_| order.next_row()).collect();
        let second: Vec<u32> = (0..100).map(|_| order.next_row()).collect();
        let mut sorted = first.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        let mut sorted2 = second.clone();
        sorted2.sort_unstable();
        assert_eq!(sorted2, sorted);
        assert_ne!(first, second, "a wrap reshuffles");
        assert_ne!(first, (0..100).collect::<Vec<_>>(), "the order is shuffled");
    }

    #[test]
    fn same_seed_same_order_other_seed_other_order() {
        let take = |seed| {
            let mut o = SampleOrder::new(50, seed);
            (0..50).map(|_| o.next_row()).collect::<Vec<_>>()
        };
        assert_eq!(take(7), take(7));
        assert_ne!(take(7), take(8));
    }

    #[test]
    fn strided_orders_of_every_shard_interleave_into_the_whole_order() {
        // 7 rows, 3 passes, 3 shards: sample k of the whole order is sample k / 3 of shard k % 3.
        let whole = SampleOrder::first_rows(7, 42, 21);
        for shards in 1..=4u64 {
            let mut parts: Vec<SampleOrder> =
                (0..shards).map(|i| SampleOrder::new(7, 42).strided(i, shards)).collect();
            let merged: Vec<u32> =
                (0..21).map(|k| parts[(k % shards) as usize].next_row()).collect();
            assert_eq!(merged, whole, "{shards} shards");
        }
    }

    #[test]
    fn uniform_floats_stay_in_range() {
        let mut rng = SplitMix64::new(1);
        for _ in 0..10_000 {
            let x = rng.next_f64();
            assert!((0.0..1.0).contains(&x));
        }
    }
}
