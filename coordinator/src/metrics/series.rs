//! One series' exact statistics, computed from its raw values sorted once.

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use super::early_stop;
use super::stats::{self, HISTOGRAM_BUCKET_COUNT, PERCENTILE_GRID, PERCENTILE_KEYS};

/// Number of grid percentiles with an early-stopping estimate (p ≥ 50).
pub const EARLY_STOPPING_COUNT: usize = 8;

/// A number that keeps Python's int/float identity when written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    /// Written without a fraction (`200`).
    Int(i128),
    /// Written as Python's float repr (`200.0`).
    Float(f64),
}

impl Num {
    /// The value as f64.
    pub fn as_f64(self) -> f64 {
        match self {
            Num::Int(v) => v as f64,
            Num::Float(v) => v,
        }
    }
}

impl Serialize for Num {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            Num::Int(v) => serializer.serialize_i128(v),
            Num::Float(v) => serializer.serialize_f64(v),
        }
    }
}

/// What selection gives a series: its ordered values and histogram.
pub(crate) struct Picked {
    pub min: f64,
    pub max: f64,
    pub min_key: u64,
    pub max_key: u64,
    pub percentiles: [f64; 12],
    pub early_stopping: Option<[Option<f64>; EARLY_STOPPING_COUNT]>,
    pub histogram: Vec<([f64; 2], u64)>,
}

/// Exact statistics of one series, as the reference's COMPLETE snapshot holds them.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesStat {
    /// The series name (`sample_latency_ns`, `isl_server`, ...).
    pub name: String,
    /// Number of values.
    pub count: u64,
    /// Sum of the values.
    pub total: Num,
    /// Smallest value (`Int(0)` when empty).
    pub min: Num,
    /// Largest value (`Int(0)` when empty).
    pub max: Num,
    /// Sum of squares, written as a float (as the reference does), `Int(0)` when an
    /// integer series is empty.
    pub sum_sq: Num,
    /// Values at [`PERCENTILE_GRID`], "lower" method; all 0.0 when empty.
    pub percentiles: [f64; 12],
    /// Early-stopping estimates for the first eight grid entries, when enabled.
    pub early_stopping: Option<[Option<f64>; EARLY_STOPPING_COUNT]>,
    /// `((low, high), count)` per bucket; empty when the series is.
    pub histogram: Vec<([f64; 2], u64)>,
    /// `total² / count` rounded once (for the standard deviation).
    total_sq_over_n: f64,
}

impl SeriesStat {
    /// An empty series (`float` picks the reference's float dtype zeros).
    pub fn empty(name: &str, float: bool, early_stopping: bool) -> SeriesStat {
        let zero = if float { Num::Float(0.0) } else { Num::Int(0) };
        SeriesStat {
            name: name.to_string(),
            count: 0,
            total: zero,
            min: Num::Int(0),
            max: Num::Int(0),
            sum_sq: zero,
            percentiles: [0.0; 12],
            early_stopping: early_stopping.then_some([None; EARLY_STOPPING_COUNT]),
            histogram: Vec::new(),
            total_sq_over_n: 0.0,
        }
    }

    /// Statistics of integer values (ns or token counts); sorts `values` in place.
    pub fn from_ints(name: &str, values: &mut [u64], early_stopping: bool) -> SeriesStat {
        sort_u64(values);
        SeriesStat::from_sorted_ints(name, values, early_stopping)
    }

    /// Statistics of integer values already in ascending order (their sums are exact, so the
    /// order they were taken in does not matter).
    pub fn from_sorted_ints(name: &str, values: &[u64], early_stopping: bool) -> SeriesStat {
        debug_assert!(values.is_sorted(), "{name}: values not sorted");
        if values.is_empty() {
            return SeriesStat::empty(name, false, early_stopping);
        }
        let n = values.len();
        let mut total: u128 = 0;
        let mut sum_sq: u128 = 0;
        for &v in values.iter() {
            total += u128::from(v);
            sum_sq += u128::from(v) * u128::from(v);
        }
        let mut stat = SeriesStat {
            name: name.to_string(),
            count: n as u64,
            total: Num::Int(total as i128),
            min: Num::Int(i128::from(values[0])),
            max: Num::Int(i128::from(values[n - 1])),
            sum_sq: Num::Float(sum_sq as f64),
            percentiles: [0.0; 12],
            early_stopping: None,
            histogram: Vec::new(),
            total_sq_over_n: total_sq_over_n_int(total, n as u128),
        };
        stat.fill_from_sorted(values, |v| v as f64, early_stopping);
        stat
    }

    /// Statistics of float values (TPOT); sums in the given order, then sorts in place.
    pub fn from_floats(name: &str, values: &mut [f64], early_stopping: bool) -> SeriesStat {
        if values.is_empty() {
            return SeriesStat::empty(name, true, early_stopping);
        }
        let n = values.len();
        let mut total = 0.0;
        let mut sum_sq = 0.0;
        for &v in values.iter() {
            total += v;
            sum_sq += v * v;
        }
        sort_f64(values);
        let mut stat = SeriesStat {
            name: name.to_string(),
            count: n as u64,
            total: Num::Float(total),
            min: Num::Float(values[0]),
            max: Num::Float(values[n - 1]),
            sum_sq: Num::Float(sum_sq),
            percentiles: [0.0; 12],
            early_stopping: None,
            histogram: Vec::new(),
            total_sq_over_n: total * total / n as f64,
        };
        stat.fill_from_sorted(values, |v| v, early_stopping);
        stat
    }

    /// An integer series from its rollups and selected values (a column in a file:
    /// `select::int_column_stat`).
    pub(crate) fn from_rollups(
        name: &str,
        count: u64,
        (total, sum_sq): (Num, u128),
        picked: Picked,
    ) -> SeriesStat {
        let total_int = match total {
            Num::Int(t) => t.unsigned_abs(),
            Num::Float(t) => t as u128,
        };
        SeriesStat {
            name: name.to_string(),
            count,
            total,
            min: Num::Int(i128::from(picked.min_key)),
            max: Num::Int(i128::from(picked.max_key)),
            sum_sq: Num::Float(sum_sq as f64),
            percentiles: picked.percentiles,
            early_stopping: picked.early_stopping,
            histogram: picked.histogram,
            total_sq_over_n: total_sq_over_n_int(total_int, u128::from(count)),
        }
    }

    /// A float series from its rollups (summed in the column's order) and selected values.
    pub(crate) fn from_float_rollups(
        name: &str,
        count: u64,
        (total, sum_sq): (f64, f64),
        picked: Picked,
    ) -> SeriesStat {
        SeriesStat {
            name: name.to_string(),
            count,
            total: Num::Float(total),
            min: Num::Float(picked.min),
            max: Num::Float(picked.max),
            sum_sq: Num::Float(sum_sq),
            percentiles: picked.percentiles,
            early_stopping: picked.early_stopping,
            histogram: picked.histogram,
            total_sq_over_n: total * total / count as f64,
        }
    }

    fn fill_from_sorted<T: Copy>(&mut self, sorted: &[T], to_f64: impl Fn(T) -> f64, es: bool) {
        let n = sorted.len();
        for (slot, &p) in self.percentiles.iter_mut().zip(PERCENTILE_GRID.iter()) {
            *slot = to_f64(sorted[stats::lower_percentile_index(n, p)]);
        }
        if es {
            let mut estimates = [None; EARLY_STOPPING_COUNT];
            for (slot, &p) in estimates.iter_mut().zip(PERCENTILE_GRID.iter()) {
                *slot = early_stop::estimate_index(n, p).map(|i| to_f64(sorted[i]));
            }
            self.early_stopping = Some(estimates);
        }
        let edges = stats::log_spaced_edges(to_f64(sorted[0]), to_f64(sorted[n - 1]));
        let counts = stats::histogram_counts(sorted, &edges, &to_f64);
        self.histogram =
            (0..HISTOGRAM_BUCKET_COUNT).map(|i| ([edges[i], edges[i + 1]], counts[i])).collect();
    }

    /// Rebuilds a series from stored rollups (a `final_snapshot.json` entry).
    #[allow(clippy::too_many_arguments, reason = "one argument per stored field")]
    pub fn from_parts(
        name: &str,
        count: u64,
        total: Num,
        min: Num,
        max: Num,
        sum_sq: Num,
        percentiles: [f64; 12],
        early_stopping: Option<[Option<f64>; EARLY_STOPPING_COUNT]>,
        histogram: Vec<([f64; 2], u64)>,
    ) -> SeriesStat {
        let total_sq_over_n = match (total, count) {
            (_, 0) => 0.0,
            (Num::Int(t), n) => total_sq_over_n_int(t.unsigned_abs(), u128::from(n)),
            (Num::Float(t), n) => t * t / n as f64,
        };
        SeriesStat {
            name: name.to_string(),
            count,
            total,
            min,
            max,
            sum_sq,
            percentiles,
            early_stopping,
            histogram,
            total_sq_over_n,
        }
    }

    /// Mean (`total / count`, rounded once), 0.0 when empty.
    pub fn avg(&self) -> f64 {
        match (self.total, self.count) {
            (_, 0) => 0.0,
            (Num::Int(total), n) => stats::div_round_signed(total, u128::from(n)),
            (Num::Float(total), n) => total / n as f64,
        }
    }

    /// Sample standard deviation (n − 1) as the reference's report computes it.
    pub fn std_dev(&self) -> f64 {
        stats::std_dev(self.count, self.sum_sq.as_f64(), self.total_sq_over_n)
    }

    /// The median: the p50 grid entry.
    pub fn median(&self) -> f64 {
        self.percentiles[7]
    }
}

fn total_sq_over_n_int(total: u128, n: u128) -> f64 {
    match total.checked_mul(total) {
        Some(square) => stats::div_round(square, n),
        // Beyond u128 (sums over 1.8e19) one extra rounding is immaterial.
        None => (total as f64) * (total as f64) / n as f64,
    }
}

/// Sorts u64 values: an LSD radix sort for large inputs (an order of magnitude faster
/// than a comparison sort on millions of values), the standard sort otherwise.
pub fn sort_u64(values: &mut [u64]) {
    const RADIX_MIN_LEN: usize = 4096;
    if values.len() < RADIX_MIN_LEN {
        values.sort_unstable();
        return;
    }
    let (min, max) = values.iter().fold((u64::MAX, 0), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    if max - min < COUNTING_RANGE_MAX {
        counting_sort(values, min, max);
        return;
    }
    let passes = ((64 - max.leading_zeros()).div_ceil(RADIX_BITS)) as usize;
    // All digit histograms in one read of the data.
    let mut counts = vec![[0usize; RADIX_BUCKETS]; passes];
    for &v in values.iter() {
        for (pass, histogram) in counts.iter_mut().enumerate() {
            histogram[digit(v, pass)] += 1;
        }
    }
    let mut scratch: Vec<u64> = Vec::new();
    let mut in_values = true;
    for (pass, histogram) in counts.iter_mut().enumerate() {
        // A digit every value shares leaves the order unchanged.
        if histogram.contains(&values.len()) {
            continue;
        }
        if scratch.is_empty() {
            scratch = values.to_vec();
        }
        let (src, dst): (&[u64], &mut [u64]) =
            if in_values { (&*values, &mut scratch[..]) } else { (&scratch[..], &mut *values) };
        radix_pass(src, dst, pass, histogram);
        in_values = !in_values;
    }
    if !in_values {
        values.copy_from_slice(&scratch);
    }
}

/// Sorts f64 values ascending; non-negative values sort as their bit patterns do.
pub fn sort_f64(values: &mut [f64]) {
    if !values.iter().all(|v| v.is_sign_positive() && !v.is_nan()) {
        values.sort_unstable_by(f64::total_cmp);
        return;
    }
    let mut bits: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
    sort_u64(&mut bits);
    for (slot, b) in values.iter_mut().zip(bits) {
        *slot = f64::from_bits(b);
    }
}

/// Values spanning fewer than this many integers (token counts) are counting-sorted:
/// two sequential sweeps and no scratch copy.
const COUNTING_RANGE_MAX: u64 = 1 << 16;

fn counting_sort(values: &mut [u64], min: u64, max: u64) {
    let mut counts = vec![0usize; (max - min) as usize + 1];
    for &v in values.iter() {
        counts[(v - min) as usize] += 1;
    }
    let mut slots = values.iter_mut();
    for (offset, &count) in counts.iter().enumerate() {
        let value = min + offset as u64;
        for slot in slots.by_ref().take(count) {
            *slot = value;
        }
    }
}

const RADIX_BITS: u32 = 11;
const RADIX_BUCKETS: usize = 1 << RADIX_BITS;

fn digit(v: u64, pass: usize) -> usize {
    ((v >> (pass as u32 * RADIX_BITS)) as usize) & (RADIX_BUCKETS - 1)
}

fn radix_pass(src: &[u64], dst: &mut [u64], pass: usize, counts: &mut [usize; RADIX_BUCKETS]) {
    let mut sum = 0;
    for slot in counts.iter_mut() {
        let count = *slot;
        *slot = sum;
        sum += count;
    }
    for &v in src {
        let bucket = digit(v, pass);
        dst[counts[bucket]] = v;
        counts[bucket] += 1;
    }
}

struct Percentiles<'a>(&'a [f64; 12]);

impl Serialize for Percentiles<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(12))?;
        for (key, value) in PERCENTILE_KEYS.iter().zip(self.0.iter()) {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

struct Estimates<'a>(&'a [Option<f64>; EARLY_STOPPING_COUNT]);

impl Serialize for Estimates<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(EARLY_STOPPING_COUNT))?;
        for (key, value) in PERCENTILE_KEYS.iter().zip(self.0.iter()) {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// The snapshot form: `{"type": "series", "name", "count", ..., "histogram": [[[lo, hi], n]]}`.
impl Serialize for SeriesStat {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("SeriesStat", 10)?;
        s.serialize_field("type", "series")?;
        s.serialize_field("name", &self.name)?;
        s.serialize_field("count", &self.count)?;
        s.serialize_field("total", &self.total)?;
        s.serialize_field("min", &self.min)?;
        s.serialize_field("max", &self.max)?;
        s.serialize_field("sum_sq", &self.sum_sq)?;
        s.serialize_field("percentiles", &Percentiles(&self.percentiles))?;
        if let Some(estimates) = &self.early_stopping {
            s.serialize_field("early_stopping_percentiles", &Estimates(estimates))?;
        }
        s.serialize_field("histogram", &self.histogram)?;
        s.end()
    }
}

/// The summary form of a series block (`result_summary.json`), used by the report.
pub struct SummaryBlock<'a> {
    /// The series.
    pub stat: &'a SeriesStat,
    /// Adds `"partial": true` after the reference keys.
    pub partial: bool,
}

struct Histogram<'a>(&'a [([f64; 2], u64)]);

impl Serialize for Histogram<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let buckets: Vec<[f64; 2]> = self.0.iter().map(|(range, _)| *range).collect();
        let counts: Vec<u64> = self.0.iter().map(|(_, count)| *count).collect();
        let mut s = serializer.serialize_struct("Histogram", 2)?;
        s.serialize_field("buckets", &buckets)?;
        s.serialize_field("counts", &counts)?;
        s.end()
    }
}

impl Serialize for SummaryBlock<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let stat = self.stat;
        if stat.count == 0 {
            // The reference's empty series with early stopping on: no rollups, but its
            // all-null estimates, so the block reads as "no data", not "feature off".
            let mut s = serializer.serialize_struct("SummaryBlock", 2)?;
            if let Some(estimates) = &stat.early_stopping {
                s.serialize_field("early_stopping_percentiles", &Estimates(estimates))?;
            }
            if self.partial {
                s.serialize_field("partial", &true)?;
            }
            return s.end();
        }
        let mut s = serializer.serialize_struct("SummaryBlock", 10)?;
        s.serialize_field("total", &stat.total)?;
        s.serialize_field("min", &stat.min)?;
        s.serialize_field("max", &stat.max)?;
        s.serialize_field("median", &stat.median())?;
        s.serialize_field("avg", &stat.avg())?;
        s.serialize_field("std_dev", &stat.std_dev())?;
        s.serialize_field("percentiles", &Percentiles(&stat.percentiles))?;
        if let Some(estimates) = &stat.early_stopping {
            s.serialize_field("early_stopping_percentiles", &Estimates(estimates))?;
        }
        s.serialize_field("histogram", &Histogram(&stat.histogram))?;
        if self.partial {
            s.serialize_field("partial", &true)?;
        }
        s.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix_sort_agrees_with_std_sort() {
        let mut state = 0x9e3779b97f4a7c15u64;
        let mut values: Vec<u64> = (0..10_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state >> (state % 50)
            })
            .collect();
        let mut expected = values.clone();
        expected.sort_unstable();
        sort_u64(&mut values);
        assert_eq!(values, expected);
        // A narrow range is counting-sorted.
        let mut tokens: Vec<u64> = expected.iter().map(|v| 1000 + v % 5000).collect();
        let mut tokens_expected = tokens.clone();
        tokens_expected.sort_unstable();
        sort_u64(&mut tokens);
        assert_eq!(tokens, tokens_expected);
        // Values sharing their high digits skip those passes.
        let mut narrow: Vec<u64> =
            expected.iter().rev().map(|v| (1 << 40) + (v & 0xffff)).collect();
        let mut narrow_expected = narrow.clone();
        narrow_expected.sort_unstable();
        sort_u64(&mut narrow);
        assert_eq!(narrow, narrow_expected);
        let mut floats: Vec<f64> = expected.iter().map(|&v| v as f64 / 7.0).rev().collect();
        let mut floats_expected = floats.clone();
        floats_expected.sort_unstable_by(f64::total_cmp);
        sort_f64(&mut floats);
        assert_eq!(floats, floats_expected);
        let mut mixed = vec![3.5, -1.0, 0.0, 2.0];
        sort_f64(&mut mixed);
        assert_eq!(mixed, [-1.0, 0.0, 2.0, 3.5]);
    }

    #[test]
    fn integer_series_rollups() {
        let mut values = vec![3u64, 1, 2, 10];
        let stat = SeriesStat::from_ints("isl", &mut values, false);
        assert_eq!(stat.count, 4);
        assert_eq!(stat.total, Num::Int(16));
        assert_eq!(stat.min, Num::Int(1));
        assert_eq!(stat.max, Num::Int(10));
        assert_eq!(stat.sum_sq, Num::Float(114.0));
        assert_eq!(stat.avg(), 4.0);
        // Sample variance of 1, 2, 3, 10: (114 - 64) / 3.
        assert_eq!(stat.std_dev(), (50.0f64 / 3.0).sqrt());
        assert_eq!(stat.median(), 2.0);
        assert_eq!(stat.percentiles[0], 3.0);
        assert_eq!(stat.histogram.iter().map(|(_, c)| c).sum::<u64>(), 4);
        assert!(stat.early_stopping.is_none());
    }

    #[test]
    fn empty_series_match_reference_zeros() {
        let stat = SeriesStat::from_ints("chunk_delta_ns", &mut [], false);
        let json = serde_json::to_string(&stat).unwrap();
        assert!(json.contains("\"total\":0,\"min\":0,\"max\":0,\"sum_sq\":0,"), "{json}");
        assert!(json.ends_with("\"histogram\":[]}"));
        let stat = SeriesStat::from_floats("tpot_ns", &mut [], true);
        let json = serde_json::to_string(&stat).unwrap();
        assert!(json.contains("\"total\":0.0,\"min\":0,\"max\":0,\"sum_sq\":0.0,"), "{json}");
        assert!(json.contains("\"early_stopping_percentiles\":{\"99.9\":null"), "{json}");
    }
}
