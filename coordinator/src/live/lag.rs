//! The live Poisson issue lag: a lock-free log-linear histogram the scheduler records into and
//! the live view reads, so neither ever waits on the other.

use std::sync::atomic::{AtomicU64, Ordering};

/// Sub-buckets per power of two: 8, so a bucket is at most 12.5% wide.
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets for every u64: 8 exact ones below 8, then 8 per octave up to 2^64.
pub const LAG_BUCKETS: usize = ((64 - SUB_BITS as usize) * SUB as usize) + SUB as usize;

/// Issue lags (issued − scheduled, ns) of the open-loop samples issued so far.
pub struct LiveLag {
    counts: Box<[AtomicU64]>,
    total: AtomicU64,
}

impl Default for LiveLag {
    fn default() -> Self {
        LiveLag::new()
    }
}

impl LiveLag {
    pub fn new() -> LiveLag {
        LiveLag {
            counts: (0..LAG_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            total: AtomicU64::new(0),
        }
    }

    /// One sample's lag. Relaxed: the view reads an approximate picture and needs no order
    /// with the scheduler's other writes.
    #[inline]
    pub fn record(&self, lag_ns: u64) {
        self.counts[bucket_of(lag_ns)].fetch_add(1, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
    }

    /// Samples recorded so far.
    pub fn count(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// The lag at quantile `q` (0..=1), as its bucket's midpoint; `None` before any sample.
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        quantile_of(&counts, q)
    }
}

/// The bucket that holds `v`: `v` itself below 8, else 8 per power of two.
pub fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let octave = 63 - v.leading_zeros();
    let shift = octave - SUB_BITS;
    ((u64::from(shift) * SUB) + (v >> shift)) as usize
}

/// The smallest value bucket `i` holds, and one past its largest.
pub fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i + 1);
    }
    let shift = i / SUB - 1;
    let mantissa = i % SUB + SUB;
    let low = mantissa << shift;
    (low, low.saturating_add(1 << shift))
}

/// The midpoint of the bucket where the cumulative count first reaches `q` of the total.
pub fn quantile_of(counts: &[u64], q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0u64;
    for (i, &c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            let (low, high) = bucket_range(i);
            return Some(low + (high - low) / 2);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_a_bucket_whose_range_holds_it() {
        for v in (0..5_000u64).chain([1 << 20, (1 << 20) + 12_345, u64::MAX / 3, u64::MAX]) {
            let (low, high) = bucket_range(bucket_of(v));
            assert!(low <= v && (v < high || high == u64::MAX), "{v} in [{low}, {high})");
        }
        assert!(bucket_of(u64::MAX) < LAG_BUCKETS);
    }

    #[test]
    fn buckets_are_at_most_an_eighth_wide() {
        for i in 8..LAG_BUCKETS - 1 {
            let (low, high) = bucket_range(i);
            assert!((high - low) * 8 <= low, "bucket {i}: [{low}, {high})");
        }
    }

    #[test]
    fn lag_quantiles_are_within_the_bucket_width_of_the_truth() {
        let lag = LiveLag::new();
        // 1..=1000 µs: p50 = 500 µs, p99 = 990 µs.
        (1..=1000u64).for_each(|us| lag.record(us * 1_000));
        let p50 = lag.quantile_ns(0.5).unwrap() as f64;
        let p99 = lag.quantile_ns(0.99).unwrap() as f64;
        assert!((p50 - 500_000.0).abs() <= 500_000.0 * 0.125, "p50 {p50}");
        assert!((p99 - 990_000.0).abs() <= 990_000.0 * 0.125, "p99 {p99}");
        assert_eq!(lag.count(), 1000);
    }

    #[test]
    fn no_lag_before_the_first_sample() {
        assert_eq!(LiveLag::new().quantile_ns(0.5), None);
    }
}
