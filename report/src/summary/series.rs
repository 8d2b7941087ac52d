//! One series as result_summary.json holds it (the reference's block: rollups, grid
//! percentiles, early-stopping estimates, histogram), written and read back.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use loadgen_coordinator::metrics::series::EARLY_STOPPING_COUNT;
use loadgen_coordinator::metrics::stats::PERCENTILE_KEYS;
use loadgen_coordinator::metrics::{Num, SeriesStat};

/// One series in summary form: built from the run's exact `SeriesStat` (its rollups computed
/// once, as the summary writes them), or read back from a summary.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesSummary {
    /// Values in the series. Not a key of its own: read back, the histogram's counts add up
    /// to it (its buckets cover every value).
    pub count: u64,
    pub total: Num,
    pub min: Num,
    pub max: Num,
    pub median: f64,
    pub avg: f64,
    pub std_dev: f64,
    /// Values at the report grid (`PERCENTILE_KEYS`), "lower" method.
    pub percentiles: [f64; 12],
    /// Early-stopping estimates for the first eight grid entries, when enabled.
    pub early_stopping: Option<[Option<f64>; EARLY_STOPPING_COUNT]>,
    /// `([low, high], count)` per bucket; empty when the series is.
    pub histogram: Vec<([f64; 2], u64)>,
}

impl From<&SeriesStat> for SeriesSummary {
    fn from(stat: &SeriesStat) -> SeriesSummary {
        SeriesSummary {
            count: stat.count,
            total: stat.total,
            min: stat.min,
            max: stat.max,
            median: stat.median(),
            avg: stat.avg(),
            std_dev: stat.std_dev(),
            percentiles: stat.percentiles,
            early_stopping: stat.early_stopping,
            histogram: stat.histogram.clone(),
        }
    }
}

impl SeriesSummary {
    /// A series without values or estimates, filled in as a block is read.
    fn empty() -> SeriesSummary {
        SeriesSummary {
            count: 0,
            total: Num::Int(0),
            min: Num::Int(0),
            max: Num::Int(0),
            median: 0.0,
            avg: 0.0,
            std_dev: 0.0,
            percentiles: [0.0; 12],
            early_stopping: None,
            histogram: Vec::new(),
        }
    }
}

/// A series block as the summary writes it: the reference's keys, then `"partial": true` on a
/// partial basis. A series without values writes only its estimates (the reference's empty
/// series with early stopping on: no data, not "feature off").
pub struct Block<'a> {
    pub series: &'a SeriesSummary,
    pub partial: bool,
}

/// `{"99.9": v, "99.0": v, …}`: values keyed by the grid, in grid order.
struct Grid<'a, T>(&'a [T]);

impl<T: Serialize> Serialize for Grid<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in PERCENTILE_KEYS.iter().zip(self.0) {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// `{"buckets": [[lo, hi], …], "counts": […]}`.
#[derive(Serialize, Deserialize, Default)]
struct Histogram {
    #[serde(default)]
    buckets: Vec<[f64; 2]>,
    #[serde(default)]
    counts: Vec<u64>,
}

impl Serialize for Block<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let s = self.series;
        let mut map = serializer.serialize_map(None)?;
        if s.count > 0 {
            map.serialize_entry("total", &s.total)?;
            map.serialize_entry("min", &s.min)?;
            map.serialize_entry("max", &s.max)?;
            map.serialize_entry("median", &s.median)?;
            map.serialize_entry("avg", &s.avg)?;
            map.serialize_entry("std_dev", &s.std_dev)?;
            map.serialize_entry("percentiles", &Grid(&s.percentiles))?;
        }
        if let Some(estimates) = &s.early_stopping {
            map.serialize_entry("early_stopping_percentiles", &Grid(estimates))?;
        }
        if s.count > 0 {
            let histogram = Histogram {
                buckets: s.histogram.iter().map(|(range, _)| *range).collect(),
                counts: s.histogram.iter().map(|(_, count)| *count).collect(),
            };
            map.serialize_entry("histogram", &histogram)?;
        }
        if self.partial {
            map.serialize_entry("partial", &true)?;
        }
        map.end()
    }
}

/// A series block read back: the series (`None` for `{}`, a block with neither values nor
/// estimates) and whether it was marked partial.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadBlock {
    pub series: Option<SeriesSummary>,
    pub partial: bool,
}

impl<'de> Deserialize<'de> for ReadBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(BlockVisitor)
    }
}

/// The keys that make a block a series (`partial` alone does not).
const SERIES_KEYS: [&str; 9] = [
    "total",
    "min",
    "max",
    "median",
    "avg",
    "std_dev",
    "percentiles",
    "early_stopping_percentiles",
    "histogram",
];

struct BlockVisitor;

impl<'de> Visitor<'de> for BlockVisitor {
    type Value = ReadBlock;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a series block")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ReadBlock, A::Error> {
        let mut s = SeriesSummary::empty();
        let (mut shown, mut partial) = (false, false);
        while let Some(key) = map.next_key::<String>()? {
            shown |= SERIES_KEYS.contains(&key.as_str());
            match key.as_str() {
                "total" => s.total = map.next_value::<ReadNum>()?.0,
                "min" => s.min = map.next_value::<ReadNum>()?.0,
                "max" => s.max = map.next_value::<ReadNum>()?.0,
                "median" => s.median = map.next_value()?,
                "avg" => s.avg = map.next_value()?,
                "std_dev" => s.std_dev = map.next_value()?,
                "percentiles" => s.percentiles = map.next_value::<ReadGrid<f64, 12>>()?.0,
                "early_stopping_percentiles" => {
                    s.early_stopping = Some(map.next_value::<ReadGrid<Option<f64>, 8>>()?.0);
                }
                "histogram" => {
                    let h: Histogram = map.next_value()?;
                    s.histogram = h.buckets.into_iter().zip(h.counts).collect();
                }
                "partial" => partial = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        s.count = s.histogram.iter().map(|(_, n)| n).sum();
        Ok(ReadBlock { series: shown.then_some(s), partial })
    }
}

/// A number as written: an integer is `Num::Int`, anything with a fraction or exponent
/// `Num::Float`, so the value writes back as it was.
struct ReadNum(Num);

impl<'de> Deserialize<'de> for ReadNum {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ReadNum;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ReadNum, E> {
                Ok(ReadNum(Num::Int(i128::from(v))))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ReadNum, E> {
                Ok(ReadNum(Num::Int(i128::from(v))))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<ReadNum, E> {
                i128::try_from(v).map(|v| ReadNum(Num::Int(v))).map_err(E::custom)
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<ReadNum, E> {
                Ok(ReadNum(Num::Int(v)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ReadNum, E> {
                Ok(ReadNum(Num::Float(v)))
            }
        }
        d.deserialize_any(V)
    }
}

/// Values keyed by the first `N` grid keys; a key the file lacks reads as the default.
struct ReadGrid<T, const N: usize>([T; N]);

impl<'de, T: Deserialize<'de> + Default + Copy, const N: usize> Deserialize<'de>
    for ReadGrid<T, N>
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, const N: usize>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de> + Default + Copy, const N: usize> Visitor<'de> for V<T, N> {
            type Value = ReadGrid<T, N>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of grid percentiles")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = [T::default(); N];
                while let Some(key) = map.next_key::<String>()? {
                    match PERCENTILE_KEYS[..N].iter().position(|k| *k == key) {
                        Some(i) => out[i] = map.next_value()?,
                        None => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(ReadGrid(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}
