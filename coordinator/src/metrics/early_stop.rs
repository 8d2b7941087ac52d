//! MLPerf LoadGen early-stopping percentile estimates (confidence 0.99, tolerance 0).
//!
//! For a target percentile p and n sorted latencies, the estimate is the t-th highest
//! value, where t is the largest number of over-latency samples whose binomial bound
//! still holds at the confidence. The binomial tail is the regularized incomplete beta
//! function, evaluated with the Numerical Recipes continued fraction.

/// The confidence every estimate is made at.
pub const CONFIDENCE: f64 = 0.99;

const BETACF_ITERATIONS_MAX: u32 = 400;

/// ln Γ(x) for x > 0: Stirling's series above 15, the recurrence below it.
fn ln_gamma(x: f64) -> f64 {
    debug_assert!(x > 0.0);
    let mut shift = 0.0;
    let mut z = x;
    let mut product = 1.0;
    while z < 15.0 {
        product *= z;
        z += 1.0;
    }
    if product != 1.0 {
        shift = product.ln();
    }
    let inv = 1.0 / z;
    let inv2 = inv * inv;
    // Bernoulli terms B2k / (2k (2k-1) z^(2k-1)), enough for double precision at z >= 15.
    let series = inv
        * (1.0 / 12.0
            - inv2
                * (1.0 / 360.0
                    - inv2 * (1.0 / 1260.0 - inv2 * (1.0 / 1680.0 - inv2 * (1.0 / 1188.0)))));
    (z - 0.5) * z.ln() - z + 0.5 * (2.0 * std::f64::consts::PI).ln() + series - shift
}

fn clamp_tiny(v: f64) -> f64 {
    const FPMIN: f64 = 1e-300;
    if v.abs() < FPMIN {
        FPMIN
    } else {
        v
    }
}

/// The continued fraction of the incomplete beta function (Numerical Recipes `betacf`).
fn beta_continued_fraction(a: f64, b: f64, x: f64) -> f64 {
    const EPS: f64 = 3e-16;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / clamp_tiny(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..BETACF_ITERATIONS_MAX {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / clamp_tiny(1.0 + aa * d);
        c = clamp_tiny(1.0 + aa / c);
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / clamp_tiny(1.0 + aa * d);
        c = clamp_tiny(1.0 + aa / c);
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// The regularized incomplete beta function I_x(a, b).
pub fn regularized_incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    let front = ln_front.exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_continued_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_continued_fraction(b, a, 1.0 - x) / b
    }
}

/// P(at most t over-latency samples among h + t) at percentile fraction `p`.
fn odds(h: u64, t: u64, p: f64) -> f64 {
    regularized_incomplete_beta(h as f64, 1.0 + t as f64, p)
}

/// The smallest h with `odds(h, t, p) <= 1 − confidence` (odds fall as h grows).
pub fn find_min_passing(t: u64, p: f64) -> u64 {
    let target = 1.0 - CONFIDENCE;
    let mut hi = 2u64;
    while odds(hi, t, p) > target {
        hi *= 2;
    }
    let mut lo = 1u64;
    while lo < hi {
        let mid = (lo + hi) / 2;
        if odds(mid, t, p) <= target {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// The fewest samples for which percentile fraction `p` has an estimate.
pub fn min_queries(p: f64) -> u64 {
    find_min_passing(1, p) + 1
}

/// The largest t ≥ 1 with `find_min_passing(t) + t <= n`, or 0 when even t = 1 fails.
fn discard_count(n: u64, p: f64) -> u64 {
    let passes = |t: u64| find_min_passing(t, p) + t <= n;
    if !passes(1) {
        return 0;
    }
    let mut hi = 2u64;
    while passes(hi) {
        hi *= 2;
    }
    let mut lo = 1u64;
    while lo < hi - 1 {
        let mid = (lo + hi) / 2;
        if passes(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The index into ascending `n` values of the estimate for percentile `percentile`
/// (in percent, e.g. 99.0), or `None` when there are too few samples.
pub fn estimate_index(n: usize, percentile: f64) -> Option<usize> {
    let p = percentile / 100.0;
    let n = n as u64;
    if n < min_queries(p) {
        return None;
    }
    let t = discard_count(n, p);
    usize::try_from(n - t).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimum_samples_per_percentile() {
        let cases =
            [(50.0, 11), (75.0, 24), (80.0, 31), (90.0, 64), (95.0, 130), (97.0, 219), (99.0, 662)];
        for (percentile, expected) in cases {
            assert_eq!(min_queries(percentile / 100.0), expected, "p{percentile}");
            assert_eq!(estimate_index(expected as usize - 1, percentile), None);
            assert!(estimate_index(expected as usize, percentile).is_some());
        }
        assert_eq!(min_queries(99.9 / 100.0), 6636);
    }

    #[test]
    fn estimates_match_the_reference_run() {
        // n = 200 in the reference's observed run: p95 is sorted[197]
        // (ttft 133686623 = its p99 value), p99 and above have no estimate.
        assert_eq!(estimate_index(200, 99.9), None);
        assert_eq!(estimate_index(200, 99.0), None);
        assert_eq!(estimate_index(200, 97.0), None);
        assert_eq!(estimate_index(200, 95.0), Some(197));
        // The estimate is never below the empirical percentile.
        for p in [50.0, 75.0, 80.0, 90.0, 95.0] {
            let index = estimate_index(200, p).unwrap();
            assert!(index >= crate::metrics::stats::lower_percentile_index(200, p));
        }
    }

    #[test]
    fn incomplete_beta_known_values() {
        // I_x(1, 1) = x; I_x(a, 1) = x^a; I_0.5(a, a) = 0.5.
        assert!((regularized_incomplete_beta(1.0, 1.0, 0.3) - 0.3).abs() < 1e-14);
        assert!((regularized_incomplete_beta(3.0, 1.0, 0.5) - 0.125).abs() < 1e-14);
        assert!((regularized_incomplete_beta(7.0, 7.0, 0.5) - 0.5).abs() < 1e-14);
        assert_eq!(regularized_incomplete_beta(2.0, 2.0, 0.0), 0.0);
        assert_eq!(regularized_incomplete_beta(2.0, 2.0, 1.0), 1.0);
        // ln Γ(n) = ln (n-1)!
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-13);
        assert!((ln_gamma(20.0) - 121645100408832000f64.ln()).abs() < 1e-12);
    }
}
