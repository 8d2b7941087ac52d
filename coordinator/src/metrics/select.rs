//! A series' exact statistics from a column that may be in a file: the same numbers
//! `SeriesStat::from_ints` / `from_floats` give from the values sorted in memory, without
//! ever holding them all.
//!
//! Rollups are one pass (float sums in the column's order, as the in-memory path sums them).
//! The values at the percentile and early-stopping ranks come from a radix selection: each
//! pass reads the column once and fixes the next 16 bits of every wanted value (counting, per
//! wanted value's known prefix, the values under each next digit), starting after the bits
//! the smallest and largest value share; so a series of ns latencies takes about three passes
//! and a token count one. The histogram counts are one more pass, by the rule `histogram_counts`
//! applies to sorted values.

use super::column::Column;
use super::early_stop;
use super::series::{Num, Picked, SeriesStat, EARLY_STOPPING_COUNT};
use super::stats::{self, HISTOGRAM_BUCKET_COUNT, PERCENTILE_GRID};

/// A walk over a column's values: calls its argument with each one.
pub(crate) type Walk<'a> = dyn FnMut(&mut dyn FnMut(u64)) + 'a;

/// Bits a selection pass fixes.
const DIGIT_BITS: u32 = 16;

/// Statistics of an integer column; sorts it in place when it is all in memory.
pub fn int_column_stat(name: &str, column: &mut Column<u64>, early_stopping: bool) -> SeriesStat {
    if let Some(values) = column.as_mut_slice() {
        return SeriesStat::from_ints(name, values, early_stopping);
    }
    spilled_int_stat(name, column, early_stopping)
}

/// Statistics of an integer column read where it lies, never sorted in place.
pub fn spilled_int_stat(name: &str, column: &Column<u64>, early_stopping: bool) -> SeriesStat {
    if column.is_empty() {
        return SeriesStat::empty(name, false, early_stopping);
    }
    let (mut total, mut sum_sq, mut min, mut max) = (0u128, 0u128, u64::MAX, 0u64);
    column.for_each_chunk(|chunk| {
        for &v in chunk {
            total += u128::from(v);
            sum_sq += u128::from(v) * u128::from(v);
            min = min.min(v);
            max = max.max(v);
        }
    });
    let walk = |f: &mut dyn FnMut(u64)| column.for_each_chunk(|c| c.iter().for_each(|&v| f(v)));
    let picked = pick(column.len(), min, max, early_stopping, walk, |k| k as f64);
    SeriesStat::from_rollups(name, column.len() as u64, (Num::Int(total as i128), sum_sq), picked)
}

/// Statistics of a float column, summed in its order; sorts it in place when it is all in
/// memory.
pub fn float_column_stat(name: &str, column: &mut Column<f64>, early_stopping: bool) -> SeriesStat {
    if let Some(values) = column.as_mut_slice() {
        return SeriesStat::from_floats(name, values, early_stopping);
    }
    if column.is_empty() {
        return SeriesStat::empty(name, true, early_stopping);
    }
    let (mut total, mut sum_sq, mut min, mut max) = (0.0f64, 0.0f64, u64::MAX, 0u64);
    column.for_each_chunk(|chunk| {
        for &v in chunk {
            total += v;
            sum_sq += v * v;
            min = min.min(float_key(v));
            max = max.max(float_key(v));
        }
    });
    let walk = |f: &mut dyn FnMut(u64)| {
        column.for_each_chunk(|c| c.iter().for_each(|&v| f(float_key(v))));
    };
    let picked = pick(column.len(), min, max, early_stopping, walk, key_float);
    SeriesStat::from_float_rollups(name, column.len() as u64, (total, sum_sq), picked)
}

/// The values at `ranks` (0-based positions in ascending order) of an integer column: sorted in
/// place when it is all in memory, selected where it lies otherwise.
pub fn values_at_ranks(column: &mut Column<u64>, ranks: &[u64]) -> Vec<u64> {
    if let Some(values) = column.as_mut_slice() {
        super::series::sort_u64(values);
        return ranks.iter().map(|&r| values[r as usize]).collect();
    }
    let (mut min, mut max) = (u64::MAX, 0);
    column.for_each_chunk(|c| c.iter().for_each(|&v| (min, max) = (min.min(v), max.max(v))));
    let mut walk = |f: &mut dyn FnMut(u64)| column.for_each_chunk(|c| c.iter().for_each(|&v| f(v)));
    select_ranks(&mut walk, min, max, ranks)
}

fn pick(
    n: usize,
    min: u64,
    max: u64,
    early_stopping: bool,
    mut walk: impl FnMut(&mut dyn FnMut(u64)),
    to_f64: impl Fn(u64) -> f64,
) -> Picked {
    let grid: Vec<usize> =
        PERCENTILE_GRID.iter().map(|&p| stats::lower_percentile_index(n, p)).collect();
    let estimates: Vec<Option<usize>> = PERCENTILE_GRID[..EARLY_STOPPING_COUNT]
        .iter()
        .map(|&p| early_stop::estimate_index(n, p))
        .collect();
    let mut ranks: Vec<u64> = grid.iter().map(|&i| i as u64).collect();
    ranks.extend(estimates.iter().flatten().map(|&i| i as u64));
    let values = select_ranks(&mut walk, min, max, &ranks);
    let at =
        |rank: usize| to_f64(values[ranks.iter().position(|&r| r == rank as u64).unwrap_or(0)]);
    let mut percentiles = [0.0; 12];
    for (slot, &i) in percentiles.iter_mut().zip(&grid) {
        *slot = at(i);
    }
    let early_stopping = early_stopping.then(|| {
        let mut out = [None; EARLY_STOPPING_COUNT];
        for (slot, e) in out.iter_mut().zip(&estimates) {
            *slot = e.map(at);
        }
        out
    });
    let edges = stats::log_spaced_edges(to_f64(min), to_f64(max));
    let mut counts = [0u64; HISTOGRAM_BUCKET_COUNT];
    let inner = &edges[1..HISTOGRAM_BUCKET_COUNT];
    walk(&mut |k| counts[inner.partition_point(|&e| e <= to_f64(k))] += 1);
    let histogram =
        (0..HISTOGRAM_BUCKET_COUNT).map(|i| ([edges[i], edges[i + 1]], counts[i])).collect();
    Picked {
        min: to_f64(min),
        max: to_f64(max),
        min_key: min,
        max_key: max,
        percentiles,
        early_stopping,
        histogram,
    }
}

/// The values at `ranks` (0-based positions in ascending order) of the keys `walk` yields, all
/// in `[min, max]`; one walk per 16 bits below the bits `min` and `max` share.
pub(crate) fn select_ranks(walk: &mut Walk<'_>, min: u64, max: u64, ranks: &[u64]) -> Vec<u64> {
    let mut bits = (min ^ max).leading_zeros();
    // (known high bits of the value, its rank among the values sharing them)
    let mut targets: Vec<(u64, u64)> = ranks.iter().map(|&r| (high_bits(min, bits), r)).collect();
    while bits < 64 {
        let width = DIGIT_BITS.min(64 - bits);
        let shift = 64 - bits - width;
        let mask = (1u64 << width) - 1;
        let mut groups: Vec<u64> = targets.iter().map(|&(prefix, _)| prefix).collect();
        groups.sort_unstable();
        groups.dedup();
        let mut counts = vec![0u64; groups.len() << width];
        walk(&mut |v| {
            if let Ok(g) = groups.binary_search(&high_bits(v, bits)) {
                counts[(g << width) + ((v >> shift) & mask) as usize] += 1;
            }
        });
        for (prefix, rank) in targets.iter_mut() {
            let g = groups.binary_search(prefix).unwrap_or(0);
            let digits = &counts[g << width..(g + 1) << width];
            let mut below = 0u64;
            let mut digit = digits.len() - 1;
            for (d, &count) in digits.iter().enumerate() {
                if below + count > *rank {
                    digit = d;
                    break;
                }
                below += count;
            }
            *rank -= below;
            *prefix = (*prefix << width) | digit as u64;
        }
        bits += width;
    }
    targets.into_iter().map(|(value, _)| value).collect()
}

/// The top `bits` bits of `v`, right-aligned (0 when `bits` is 0).
fn high_bits(v: u64, bits: u32) -> u64 {
    if bits == 0 {
        0
    } else {
        v >> (64 - bits)
    }
}

/// A key that orders as `f64::total_cmp` orders the floats.
fn float_key(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn key_float(key: u64) -> f64 {
    if key >> 63 == 1 {
        f64::from_bits(key & !(1 << 63))
    } else {
        f64::from_bits(!key)
    }
}

#[cfg(test)]
mod tests {
    use super::super::column::{Spill, CHUNK_VALUES};
    use super::*;

    fn spilled<T: super::super::column::Plain>(values: &[T], tag: &str) -> Column<T> {
        let dir = std::env::temp_dir().join(format!("loadgen-select-{tag}-{}", std::process::id()));
        let mut column = Column::new("s", Some(Spill::new(&dir, 0).unwrap()));
        values.iter().for_each(|&v| column.push_spilling(v));
        assert!(column.spilled() || values.len() < CHUNK_VALUES, "{tag}: spilled");
        column
    }

    /// A deterministic spread: ns-like values, repeated values, a long tail.
    fn lcg_values(n: usize, seed: u64, modulo: u64) -> Vec<u64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let v = (x >> 20) % modulo;
                if v % 97 == 0 {
                    v * 1000
                } else {
                    v
                }
            })
            .collect()
    }

    #[test]
    fn a_spilled_int_series_has_the_in_memory_statistics_exactly() {
        for (tag, modulo) in [("ns", 3_000_000_000u64), ("tokens", 700), ("one", 1)] {
            let values = lcg_values(CHUNK_VALUES * 3 + 1234, modulo, modulo);
            let expected = SeriesStat::from_ints("x", &mut values.clone(), true);
            let mut column = spilled(&values, tag);
            assert_eq!(int_column_stat("x", &mut column, true), expected, "{tag}");
        }
    }

    #[test]
    fn a_spilled_float_series_sums_in_order_and_has_the_in_memory_statistics() {
        let values: Vec<f64> = lcg_values(CHUNK_VALUES * 2 + 99, 7, 50_000_000)
            .into_iter()
            .map(|v| v as f64 / 7.0)
            .collect();
        let expected = SeriesStat::from_floats("t", &mut values.clone(), true);
        let mut column = spilled(&values, "float");
        assert_eq!(float_column_stat("t", &mut column, true), expected);
    }

    #[test]
    fn float_keys_order_as_total_cmp() {
        let mut values = [3.5, -0.0, 0.0, -2.0, 1e300, -1e-300, 7.0];
        let mut keys: Vec<u64> = values.iter().map(|&v| float_key(v)).collect();
        keys.sort_unstable();
        values.sort_unstable_by(f64::total_cmp);
        let back: Vec<f64> = keys.into_iter().map(key_float).collect();
        assert_eq!(
            back.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            values.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn selection_finds_every_rank_of_a_small_set() {
        let values = [9u64, 1, 5, 5, 1 << 40, 3, 5];
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let ranks: Vec<u64> = (0..values.len() as u64).collect();
        let mut walk = |f: &mut dyn FnMut(u64)| values.iter().for_each(|&v| f(v));
        assert_eq!(select_ranks(&mut walk, 1, 1 << 40, &ranks), sorted);
    }
}
