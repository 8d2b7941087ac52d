//! The arithmetic behind the pictures, as pure functions over sorted values and timestamps:
//! histogram bins, percentile-curve points, per-second buckets and the unit of an axis.

use loadgen_coordinator::metrics::stats::lower_percentile_index;

/// Bars of every distribution histogram.
pub const HISTOGRAM_BINS: usize = 40;

/// Points of every percentile curve.
pub const CURVE_POINTS: usize = 200;

/// The percentiles a curve labels on its axis (those its values reach), as (nines x,
/// percentile): the curve passes through each at its exact lower-method value.
pub const CURVE_TICKS: [(f64, f64); 8] = [
    (0.0, 0.0),
    (std::f64::consts::LOG10_2, 50.0),
    (1.0, 90.0),
    (2.0, 99.0),
    (3.0, 99.9),
    (4.0, 99.99),
    (5.0, 99.999),
    (6.0, 99.9999),
];

/// Equal-width bins over the body of a distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Left edge of the first bin and right edge of the last, in the values' unit.
    pub lo: f64,
    pub hi: f64,
    pub counts: Vec<u64>,
    /// Values past `hi`: the far tail, which the percentile curve shows instead.
    pub above: u64,
}

impl Histogram {
    /// Width of one bin.
    pub fn bin_width(&self) -> f64 {
        (self.hi - self.lo) / self.counts.len() as f64
    }
}

/// Bins `sorted` (ascending, not empty) into `bins` equal bins from the minimum to the far-out
/// fence (Tukey's q3 + 3 IQR, the IQR at least 5% of the median so a near-constant series
/// keeps its few slow values on the axis), or to the maximum when nothing is past the fence.
/// One value a thousand times the rest would otherwise squeeze the whole body into one bar.
pub fn histogram(sorted: &[f64], bins: usize) -> Histogram {
    debug_assert!(!sorted.is_empty() && bins > 0);
    let n = sorted.len();
    let at = |p: f64| sorted[lower_percentile_index(n, p)];
    let (lo, max) = (sorted[0], sorted[n - 1]);
    let (q1, median, q3) = (at(25.0), at(50.0), at(75.0));
    let spread = (q3 - q1).max(0.05 * median.abs());
    let mut hi = max.min(q3 + 3.0 * spread);
    if hi <= lo {
        // Every value equal: one narrow bar in the middle of an axis around it.
        hi = lo + (lo.abs() * 0.01).max(1.0);
    }
    let width = (hi - lo) / bins as f64;
    let mut counts = vec![0u64; bins];
    let mut above = 0;
    for &v in sorted {
        if v > hi {
            above += 1;
            continue;
        }
        let bin = (((v - lo) / width) as usize).min(bins - 1);
        counts[bin] += 1;
    }
    Histogram { lo, hi, counts, above }
}

/// The x coordinate of percentile `p` (0–100) on a "nines" axis: 0 at p0, 1 at p90, 2 at p99,
/// 3 at p99.9, so the tail gets as much room as the body.
#[cfg(test)]
pub fn nines(p: f64) -> f64 {
    -(1.0 - p / 100.0).max(1e-12).log10()
}

/// The percentile at nines coordinate `x` (the inverse of [`nines`]).
pub fn percentile_at(x: f64) -> f64 {
    100.0 * (1.0 - 10f64.powf(-x))
}

/// The end of the nines axis for `n` values: `log10(n)`, p = 1 − 1/n, the last rank the
/// "lower" method tells from the next (the maximum itself is p100, off any nines axis).
pub fn curve_x_max(n: usize) -> f64 {
    (n.max(1) as f64).log10()
}

/// The labelled percentiles of a curve of `n` values: those of [`CURVE_TICKS`] on its axis.
pub fn curve_ticks(n: usize) -> Vec<(f64, f64)> {
    let x_max = curve_x_max(n);
    CURVE_TICKS.iter().copied().filter(|(x, _)| *x <= x_max + 1e-9).collect()
}

/// `points` (x, value) along the percentile curve of `sorted` (ascending, not empty): x on the
/// nines axis from p0 to [`curve_x_max`], every value the report's "lower" percentile at its
/// x. The grid point nearest each labelled tick ([`curve_ticks`]) is moved onto it, with the
/// tick's exact percentile, so the curve passes through the values its axis names; the
/// maximum (p100) is not on the curve but drawn beside it.
pub fn percentile_curve(sorted: &[f64], points: usize) -> Vec<(f64, f64)> {
    debug_assert!(!sorted.is_empty() && points >= 2);
    let n = sorted.len();
    if n == 1 {
        return vec![(0.0, sorted[0])];
    }
    let x_max = curve_x_max(n);
    let step = x_max / (points - 1) as f64;
    let at = |p: f64| sorted[lower_percentile_index(n, p)];
    let mut out: Vec<(f64, f64)> = (0..points)
        .map(|i| {
            let x = step * i as f64;
            (x, at(percentile_at(x)))
        })
        .collect();
    for (x, p) in curve_ticks(n) {
        let i = ((x / step).round() as usize).min(points - 1);
        out[i] = (x, at(p));
    }
    out
}

/// Nanoseconds in a second.
const SECOND_NS: u64 = 1_000_000_000;

/// Points a time series has at most: one a second up to an hour of run, then one per k whole
/// seconds, the fewest that keep to this bound, so a series costs the same whatever the
/// log's span (its stamps may span days: `report::replay::stamps::LOG_SPAN_DAYS_MAX`).
pub const TIMELINE_BUCKETS_MAX: u64 = 3_600;

/// The run's time buckets: their edges and each one's whole seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buckets {
    pub edges: Vec<u64>,
    pub seconds: u64,
}

/// The buckets from `t0_ns` to `end_ns`: one a second (k seconds each past
/// [`TIMELINE_BUCKETS_MAX`] seconds), `round(span / k)` of them (at least one), the last
/// stretched or cut to end at `end_ns`, so no sliver of a second at the end makes a rate spike
/// out of two completions. No bucket is empty of time, even for a span of nothing at the end
/// of the clock.
pub fn time_buckets(t0_ns: u64, end_ns: u64) -> Buckets {
    let last = end_ns.max(t0_ns.saturating_add(1));
    let first = t0_ns.min(last - 1);
    let span_ns = last - first;
    let round =
        |width_ns: u64| span_ns / width_ns + u64::from(span_ns % width_ns >= width_ns.div_ceil(2));
    let seconds = round(SECOND_NS).div_ceil(TIMELINE_BUCKETS_MAX).max(1);
    let width_ns = seconds * SECOND_NS;
    let n = round(width_ns).max(1);
    let mut edges: Vec<u64> = (0..n).map(|k| first + k * width_ns).collect();
    edges.push(last);
    Buckets { edges, seconds }
}

/// The bucket of `edges` that time `t_ns` falls in (times outside go to the first or last).
fn bucket_of(edges: &[u64], t_ns: u64) -> usize {
    let buckets = edges.len() - 1;
    edges.partition_point(|&e| e <= t_ns).saturating_sub(1).min(buckets - 1)
}

/// Events per second in each bucket of `edges` (each divided by its own width).
pub fn rate_per_bucket(times_ns: &[u64], edges: &[u64]) -> Vec<f64> {
    let mut counts = vec![0u64; edges.len() - 1];
    for &t in times_ns {
        counts[bucket_of(edges, t)] += 1;
    }
    counts
        .iter()
        .zip(edges.windows(2))
        .map(|(&c, w)| c as f64 / ((w[1] - w[0]) as f64 / 1e9))
        .collect()
}

/// Samples in flight in one bucket: the time-weighted mean and the most at once.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct InFlight {
    pub mean: f64,
    pub max: u64,
}

/// In-flight samples per bucket of `edges`, from each sample's (issued, complete) span. At
/// equal times a completion counts before an issue, so a closed loop that starts the next
/// sample as one ends is not counted one over its concurrency.
pub fn in_flight_per_bucket(spans: &[(u64, u64)], edges: &[u64]) -> Vec<InFlight> {
    let (start, end) = (edges[0], edges[edges.len() - 1]);
    let mut steps: Vec<(u64, i64)> = Vec::with_capacity(spans.len() * 2);
    for &(issued, complete) in spans {
        steps.push((issued.clamp(start, end), 1));
        steps.push((complete.clamp(start, end), -1));
    }
    steps.sort_unstable();
    let mut out = vec![InFlight::default(); edges.len() - 1];
    let mut area = vec![0f64; out.len()];
    let (mut bucket, mut cursor, mut now) = (0usize, start, 0i64);
    for &(t, delta) in &steps {
        while bucket + 1 < out.len() && t >= edges[bucket + 1] {
            area[bucket] += now as f64 * (edges[bucket + 1] - cursor) as f64;
            cursor = edges[bucket + 1];
            bucket += 1;
            out[bucket].max = out[bucket].max.max(now.max(0) as u64);
        }
        area[bucket] += now as f64 * (t - cursor) as f64;
        cursor = t;
        now += delta;
        out[bucket].max = out[bucket].max.max(now.max(0) as u64);
    }
    area[bucket] += now as f64 * (end - cursor) as f64;
    for ((slot, a), w) in out.iter_mut().zip(area).zip(edges.windows(2)) {
        slot.mean = a / (w[1] - w[0]) as f64;
    }
    out
}

/// The median and largest issue lag of the samples issued in each bucket of `edges`, from
/// (issued, lag) pairs; `None` for a bucket in which nothing was issued.
pub fn lag_per_bucket(lags: &[(u64, u64)], edges: &[u64]) -> Vec<Option<(u64, u64)>> {
    let mut groups: Vec<Vec<u64>> = vec![Vec::new(); edges.len() - 1];
    for &(issued, lag) in lags {
        groups[bucket_of(edges, issued)].push(lag);
    }
    groups
        .into_iter()
        .map(|mut g| {
            g.sort_unstable();
            (!g.is_empty()).then(|| (g[lower_percentile_index(g.len(), 50.0)], g[g.len() - 1]))
        })
        .collect()
}

/// A time axis's unit: its name and nanoseconds per unit, chosen by the median so the labels
/// read as small numbers (µs below a millisecond, s from ten seconds).
pub fn time_unit(median_ns: f64) -> (&'static str, f64) {
    if median_ns < 1e6 {
        ("µs", 1e3)
    } else if median_ns < 1e10 {
        ("ms", 1e6)
    } else {
        ("s", 1e9)
    }
}

/// A time axis's unit chosen by its largest value, so its ticks stay below 1000: µs below a
/// millisecond, ms below a second, s from there.
pub fn axis_time_unit(max_ns: f64) -> (&'static str, f64) {
    if max_ns < 1e6 {
        ("µs", 1e3)
    } else if max_ns < 1e9 {
        ("ms", 1e6)
    } else {
        ("s", 1e9)
    }
}

/// At most `limit` of `n` items, evenly spread: every `step`-th index (a scatter of millions of
/// samples would be a file of hundreds of megabytes and no clearer).
pub fn thin(n: usize, limit: usize) -> (usize, impl Iterator<Item = usize>) {
    let step = n.div_ceil(limit.max(1)).max(1);
    (step, (0..n).step_by(step))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_bins_cover_the_body_and_count_every_value_once() {
        let values: Vec<f64> = (0..100).map(f64::from).collect();
        let h = histogram(&values, 10);
        assert_eq!((h.lo, h.hi, h.above), (0.0, 99.0, 0));
        assert_eq!(h.counts, vec![10, 10, 10, 10, 10, 10, 10, 10, 10, 10]);
        assert_eq!(h.counts.iter().sum::<u64>(), 100);
    }

    #[test]
    fn a_far_outlier_is_past_the_fence_not_on_the_axis() {
        let mut values: Vec<f64> = (0..99).map(|i| 50.0 + f64::from(i % 10)).collect();
        values.push(50_000.0);
        values.sort_by(f64::total_cmp);
        let h = histogram(&values, 20);
        assert_eq!(h.above, 1, "{h:?}");
        assert!(h.hi < 100.0 && h.hi >= 59.0, "the fence {} keeps the body", h.hi);
        assert_eq!(h.counts.iter().sum::<u64>() + h.above, 100);
    }

    #[test]
    fn a_constant_series_is_one_bar_on_a_narrow_axis() {
        let h = histogram(&[50e6; 30], HISTOGRAM_BINS);
        assert_eq!(h.counts[0], 30);
        assert!(h.hi > h.lo && h.hi - h.lo <= 0.5e6 + 1.0, "{} .. {}", h.lo, h.hi);
    }

    #[test]
    fn the_percentile_curve_passes_through_every_percentile_it_labels_not_the_maximum() {
        // The observed case: 100 samples flat at 189.6 ms with a tail; p99 is 200.9 ms and the
        // maximum 222.8 ms. The curve ends at p99 (log10(100) = 2) on p99's value.
        let mut values = vec![189.6; 90];
        values.extend([190.0, 191.0, 192.0, 193.0, 194.0, 195.0, 196.0, 197.0, 200.9, 222.8]);
        let curve = percentile_curve(&values, CURVE_POINTS);
        assert_eq!(curve.len(), CURVE_POINTS);
        let ticks = curve_ticks(values.len());
        assert_eq!(ticks.iter().map(|t| t.1).collect::<Vec<_>>(), [0.0, 50.0, 90.0, 99.0]);
        for (x, p) in ticks {
            let want = values[lower_percentile_index(values.len(), p)];
            assert!(curve.contains(&(x, want)), "p{p} at x = {x}: {want} on {curve:?}");
        }
        assert_eq!(*curve.last().unwrap(), (2.0, 200.9), "p99, not the maximum, at the end");
        assert!(curve.iter().all(|p| p.1 < 222.8), "the maximum is off the curve");
        for &(x, v) in &curve {
            let p = percentile_at(x);
            let near = [p - 1e-6, p, p + 1e-6].map(|p| values[lower_percentile_index(100, p)]);
            assert!(near.contains(&v), "({x}, {v}) is the lower percentile at its x");
        }
    }

    #[test]
    fn the_percentile_curve_runs_from_the_minimum_on_the_nines_axis() {
        let values: Vec<f64> = (1..=1000).map(f64::from).collect();
        let curve = percentile_curve(&values, CURVE_POINTS);
        assert_eq!(curve.len(), CURVE_POINTS);
        assert_eq!(curve[0], (0.0, 1.0));
        assert_eq!(curve[CURVE_POINTS - 1], (3.0, 999.0), "the lower p99.9 of 1..=1000");
        assert!(curve.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        // p90 sits at x = 1: the lower-method p90 of 1..=1000 is 900.
        assert!(curve.contains(&(1.0, 900.0)), "p90 on its tick");
        assert_eq!(percentile_curve(&[7.0], CURVE_POINTS), vec![(0.0, 7.0)]);
    }

    #[test]
    fn nines_and_percentile_at_are_inverses() {
        for (x, p) in CURVE_TICKS {
            assert!((nines(p) - x).abs() < 1e-9, "tick p{p} at {x}");
        }
        for (p, x) in [(0.0, 0.0), (90.0, 1.0), (99.0, 2.0), (99.9, 3.0)] {
            assert!((nines(p) - x).abs() < 1e-9, "nines({p})");
            assert!((percentile_at(x) - p).abs() < 1e-9, "percentile_at({x})");
        }
    }

    #[test]
    fn a_run_gets_one_bucket_per_second_rounded_and_the_last_ends_with_it() {
        let s = 1_000_000_000u64;
        let edges = |t0, end| time_buckets(t0, end).edges;
        assert_eq!(edges(10, 10 + 3 * s), vec![10, 10 + s, 10 + 2 * s, 10 + 3 * s]);
        // 3.2 s: three buckets, the last 1.2 s long; 3.6 s: four, the last 0.6 s.
        assert_eq!(edges(0, 3_200_000_000), vec![0, s, 2 * s, 3_200_000_000]);
        assert_eq!(edges(0, 3_600_000_000).len(), 5);
        assert_eq!(edges(0, 100_000_000), vec![0, 100_000_000], "a short run: one");
        assert_eq!(edges(5, 5), vec![5, 6], "no span: one bucket, never zero width");
        assert_eq!(time_buckets(0, 3_600 * s).seconds, 1, "an hour: one a second");
    }

    #[test]
    fn a_long_span_gets_at_most_the_bucket_limit_and_a_degenerate_one_never_an_empty_bucket() {
        let s = 1_000_000_000u64;
        // Seven days: 168-second buckets, 3,600 of them, whatever the samples.
        let week = time_buckets(0, 7 * 86_400 * s);
        assert_eq!((week.seconds, week.edges.len() - 1), (168, 3_600));
        assert!(week.edges.windows(2).all(|w| w[0] < w[1]), "increasing");
        // An hour and a half: two-second buckets.
        let b = time_buckets(0, 5_400 * s);
        assert_eq!((b.seconds, b.edges.len() - 1), (2, 2_700));
        // Stamps at the end of the clock: one bucket of one nanosecond, not of none.
        assert_eq!(time_buckets(u64::MAX, u64::MAX).edges, vec![u64::MAX - 1, u64::MAX]);
        let far = time_buckets(0, u64::MAX);
        assert!(far.edges.len() - 1 <= TIMELINE_BUCKETS_MAX as usize);
        assert_eq!(*far.edges.last().unwrap(), u64::MAX);
        let rates = rate_per_bucket(&[u64::MAX; 3], &time_buckets(u64::MAX, u64::MAX).edges);
        assert!(rates.iter().all(|r| r.is_finite()), "{rates:?}");
    }

    #[test]
    fn rates_divide_each_bucket_by_its_own_width() {
        let s = 1_000_000_000u64;
        let edges = vec![0, s, 2 * s + s / 2];
        let times = [1, 2, 3, s, s + 1, 2 * s, 2 * s + s / 2];
        assert_eq!(rate_per_bucket(&times, &edges), vec![3.0, 4.0 / 1.5]);
    }

    #[test]
    fn in_flight_is_the_time_weighted_mean_and_the_peak_of_each_bucket() {
        let edges = vec![0, 100, 200];
        // One sample over the whole run, one over the second half of bucket 0, one at the
        // start of bucket 1 that another replaces at the same instant.
        let spans = [(0, 200), (50, 100), (100, 150), (150, 200)];
        let got = in_flight_per_bucket(&spans, &edges);
        assert_eq!(got[0], InFlight { mean: 1.5, max: 2 });
        assert_eq!(got[1], InFlight { mean: 2.0, max: 2 }, "150: one ends as one starts");
    }

    #[test]
    fn issue_lag_per_bucket_gives_median_and_max_and_none_where_nothing_was_issued() {
        let edges = vec![0, 100, 200, 300];
        let lags = [(10, 5), (20, 7), (30, 100), (250, 3)];
        assert_eq!(lag_per_bucket(&lags, &edges), vec![Some((7, 100)), None, Some((3, 3))]);
    }

    #[test]
    fn the_time_unit_follows_the_median() {
        assert_eq!(time_unit(80e3), ("µs", 1e3));
        assert_eq!(time_unit(50e6), ("ms", 1e6));
        assert_eq!(time_unit(20e9), ("s", 1e9));
    }

    #[test]
    fn an_axis_unit_keeps_the_largest_value_below_a_thousand() {
        assert_eq!(axis_time_unit(999_999.0), ("µs", 1e3));
        assert_eq!(axis_time_unit(200e6), ("ms", 1e6), "200000 µs reads as 200 ms");
        assert_eq!(axis_time_unit(5e9), ("s", 1e9));
    }

    #[test]
    fn thinning_keeps_at_most_the_limit_evenly() {
        let (step, kept) = thin(10_000, 3_000);
        assert_eq!((step, kept.count()), (4, 2_500));
        let (step, kept) = thin(50, 3_000);
        assert_eq!((step, kept.count()), (1, 50));
    }
}
