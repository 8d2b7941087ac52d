//! Exact series statistics: percentiles ("lower" method), rollups, log-spaced histograms.
//!
//! Every function here works on values sorted once, ascending, and reproduces the
//! reference's floating-point results bit for bit where the reference is exact.

/// The reference's percentile grid, in its order (keys are `str(float)`).
pub const PERCENTILE_GRID: [f64; 12] =
    [99.9, 99.0, 97.0, 95.0, 90.0, 80.0, 75.0, 50.0, 25.0, 10.0, 5.0, 1.0];

/// The grid keys, as Python writes `str(float)` of each grid entry.
pub const PERCENTILE_KEYS: [&str; 12] =
    ["99.9", "99.0", "97.0", "95.0", "90.0", "80.0", "75.0", "50.0", "25.0", "10.0", "5.0", "1.0"];

/// Number of histogram buckets in every series.
pub const HISTOGRAM_BUCKET_COUNT: usize = 30;

/// Index of the value numpy's `percentile(sorted, p, method="lower")` returns.
///
/// numpy divides the percentile by 100 first, then floors `(n - 1) * q`.
pub fn lower_percentile_index(n: usize, percentile: f64) -> usize {
    debug_assert!(n > 0);
    let q = percentile / 100.0;
    let index = ((n - 1) as f64 * q).floor();
    (index as usize).min(n - 1)
}

/// `a / b` rounded once to the nearest f64, as Python's `int / int` true division.
pub fn div_round(a: u128, b: u128) -> f64 {
    assert!(b != 0, "division by zero");
    if a == 0 {
        return 0.0;
    }
    // Scale the dividend until the quotient carries at least 56 significant bits, so
    // the remainder can be folded into a sticky bit below the rounding position and
    // one u128 -> f64 conversion (round to nearest even) rounds correctly.
    let mut shift = 0i32;
    let mut num = a;
    while num / b < (1u128 << 55) {
        if num.leading_zeros() == 0 {
            break;
        }
        num <<= 1;
        shift += 1;
    }
    let q = num / b;
    let sticky = u128::from(num % b != 0);
    let mut value = (q | sticky) as f64;
    // Dividing by a power of two is exact (no subnormals at these magnitudes).
    while shift > 0 {
        let step = shift.min(60);
        value /= (1u64 << step) as f64;
        shift -= step;
    }
    value
}

/// Signed `a / b` with one rounding.
pub fn div_round_signed(a: i128, b: u128) -> f64 {
    let magnitude = div_round(a.unsigned_abs(), b);
    if a < 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// Sample standard deviation (n − 1) from the rollups, as the reference report computes
/// it from a snapshot: `sqrt(max(0, (sum_sq − total²/n) / (n − 1)))`, 0 for n ≤ 1.
///
/// `total_sq_over_n` is `total² / n` rounded once (exact for integer series).
pub fn std_dev(count: u64, sum_sq: f64, total_sq_over_n: f64) -> f64 {
    if count <= 1 {
        return 0.0;
    }
    let var_num = sum_sq - total_sq_over_n;
    (var_num / (count - 1) as f64).max(0.0).sqrt()
}

/// The 31 edges of the 30 log-spaced buckets over `[max(min, 1), max(max, 10·max(min, 1))]`.
pub fn log_spaced_edges(min: f64, max: f64) -> [f64; HISTOGRAM_BUCKET_COUNT + 1] {
    let low = min.max(1.0);
    let high = max.max(low * 10.0);
    let log_low = low.ln();
    let log_high = high.ln();
    let step = (log_high - log_low) / HISTOGRAM_BUCKET_COUNT as f64;
    let mut edges = [0.0; HISTOGRAM_BUCKET_COUNT + 1];
    for (i, edge) in edges.iter_mut().enumerate() {
        *edge = (log_low + i as f64 * step).exp();
    }
    edges
}

/// Bucket counts of ascending `sorted` values (as f64 through `to_f64`) over `edges`.
///
/// Values are clipped into `[edges[0], edges[30]]`, buckets are half-open and the
/// last is closed, so the counts always sum to the number of values.
pub fn histogram_counts<T: Copy>(
    sorted: &[T],
    edges: &[f64; HISTOGRAM_BUCKET_COUNT + 1],
    to_f64: impl Fn(T) -> f64,
) -> [u64; HISTOGRAM_BUCKET_COUNT] {
    // below[j] = number of clipped values < edges[j]; clipping makes below[0] = 0 and
    // the last bucket take everything at or above edges[29].
    let mut below = [0usize; HISTOGRAM_BUCKET_COUNT + 1];
    for j in 1..HISTOGRAM_BUCKET_COUNT {
        below[j] = sorted.partition_point(|&v| to_f64(v) < edges[j]);
    }
    below[HISTOGRAM_BUCKET_COUNT] = sorted.len();
    let mut counts = [0u64; HISTOGRAM_BUCKET_COUNT];
    for (i, count) in counts.iter_mut().enumerate() {
        *count = (below[i + 1] - below[i]) as u64;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lower_method_picks_observed_values() {
        // (n, percentile, expected index), checked against numpy method="lower".
        let cases = [
            (1, 99.9, 0),
            (2, 50.0, 0),
            (2, 99.9, 0),
            (10, 50.0, 4),
            (10, 99.0, 8),
            (10, 1.0, 0),
            (200, 99.9, 198),
            (200, 99.0, 197),
            (200, 50.0, 99),
            (200, 25.0, 49),
            (200, 1.0, 1),
            (1000, 99.9, 998),
            (1001, 99.9, 999),
            (101, 97.0, 97),
        ];
        for (n, p, expected) in cases {
            assert_eq!(lower_percentile_index(n, p), expected, "n={n} p={p}");
        }
    }

    #[test]
    fn division_rounds_once() {
        assert_eq!(div_round(10441, 200), 52.205);
        assert_eq!(div_round(14869082848, 200), 74345414.24);
        assert_eq!(div_round(1, 3), 1.0 / 3.0);
        assert_eq!(div_round(0, 7), 0.0);
        // 2^53 + 1 is not representable; the exact quotient rounds to even.
        assert_eq!(div_round((1u128 << 53) + 1, 1), 9007199254740992.0);
        assert_eq!(div_round((1u128 << 53) + 3, 1), 9007199254740996.0);
        // A huge numerator: (2^100 + 1) / 3 rounded once.
        let expected = 2f64.powi(100) / 3.0;
        assert_eq!(div_round((1u128 << 100) + 1, 3), expected);
        assert_eq!(div_round_signed(-7, 2), -3.5);
    }

    #[test]
    fn std_dev_matches_reference_rollups() {
        // (count, total, sum_sq, observed std_dev) from the reference's observed run.
        let int_cases: [(u64, u128, f64, f64); 3] = [
            (200, 14869082848, 1.396597839942673e18, 38250018.3097952),
            (200, 14838637289, 1.393369510389741e18, 38334924.93058178),
            (200, 10441, 554157.0, 6.756569481310671),
        ];
        for (n, total, sum_sq, expected) in int_cases {
            let t2n = div_round(total * total, u128::from(n));
            assert_eq!(std_dev(n, sum_sq, t2n), expected);
        }
        let total = 669574.1138080745f64;
        assert_eq!(std_dev(200, 39013858074.245964, total * total / 200.0), 13593.56384153);
        assert_eq!(std_dev(1, 4.0, 4.0), 0.0);
        assert_eq!(std_dev(0, 0.0, 0.0), 0.0);
        // Two values 1 and 3: sample variance 2.
        assert_eq!(std_dev(2, 10.0, div_round(16, 2)), 2f64.sqrt());
    }

    #[test]
    fn histogram_edges_match_reference() {
        let edges = log_spaced_edges(8729395.0, 134757691.0);
        assert_eq!(edges[0], 8729395.000000002);
        assert_eq!(edges[1], 9563197.523483062);
        assert_eq!(edges[30], 134757690.99999988);
        // The x10 floor: a narrow range still spans a decade.
        let edges = log_spaced_edges(45.0, 67.0);
        assert_eq!(edges[0], 44.99999999999999);
        assert_eq!(edges[1], 48.58988230474692);
        assert_eq!(edges[30], 450.00000000000006);
        // Values below 1 floor the range at 1.
        let edges = log_spaced_edges(-7473.128205128205, 124594.97368421052);
        assert_eq!(edges[0], 1.0);
        assert_eq!(edges[1], 1.4785976697618926);
        assert_eq!(edges[30], 124594.97368421042);
        let edges = log_spaced_edges(0.0, 0.0);
        assert_eq!(edges[0], 1.0);
        assert!((edges[30] - 10.0).abs() < 1e-12);
    }

    #[test]
    fn histogram_counts_clip_and_close_the_last_bucket() {
        let edges = log_spaced_edges(1.0, 1000.0);
        // Below the first edge, on an edge, the max, above the last edge.
        let values = [0.5f64, 1.0, 10.0, 1000.0, 5000.0];
        let counts = histogram_counts(&values, &edges, |v| v);
        assert_eq!(counts.iter().sum::<u64>(), 5);
        assert_eq!(counts[0], 2);
        assert_eq!(counts[29], 2);
        // 10.0 sits on edge 10 (10^(10/30 * 3)) or just beside it, never in bucket 0 or 29.
        assert_eq!(counts[1..29].iter().sum::<u64>(), 1);
        let ints = [45u64, 45, 46, 67];
        let counts = histogram_counts(&ints, &log_spaced_edges(45.0, 67.0), |v| v as f64);
        assert_eq!(counts[0], 3);
        assert_eq!(counts[5], 1);
    }
}
