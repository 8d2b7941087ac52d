//! Reading a `final_snapshot.json` back into a [`Snapshot`], so the report files can be
//! rebuilt from a finished run (and checked against the reference's own files).

use serde_json::Value;

use super::{CounterStat, MetricsOptions, RunState, Snapshot};
use crate::metrics::basis::TokenCountSource;
use crate::metrics::series::{Num, SeriesStat, EARLY_STOPPING_COUNT};
use crate::metrics::stats::PERCENTILE_KEYS;
use crate::metrics::tokens::{OslPaired, UsageTally};

/// Why a snapshot document could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// A required key is absent.
    #[error("final snapshot: {0} is missing")]
    Missing(String),
    /// A key has the wrong type.
    #[error("final snapshot: {0} is not {1}")]
    Field(String, &'static str),
    /// The `token_count_source` value is unknown.
    #[error("final snapshot: unknown token_count_source {0:?}")]
    Basis(String),
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, SnapshotError> {
    v.get(key).ok_or_else(|| SnapshotError::Missing(key.to_string()))
}

fn num(v: &Value, key: &str) -> Result<Num, SnapshotError> {
    let value = field(v, key)?;
    if let Some(i) = value.as_i64() {
        return Ok(Num::Int(i128::from(i)));
    }
    if let Some(u) = value.as_u64() {
        return Ok(Num::Int(i128::from(u)));
    }
    value.as_f64().map(Num::Float).ok_or(SnapshotError::Field(key.to_string(), "a number"))
}

fn uint(v: &Value, key: &str) -> Result<u64, SnapshotError> {
    field(v, key)?.as_u64().ok_or(SnapshotError::Field(key.to_string(), "an unsigned integer"))
}

fn series_from_json(v: &Value, name: &str) -> Result<SeriesStat, SnapshotError> {
    let mut percentiles = [0.0; 12];
    let grid = field(v, "percentiles")?;
    for (slot, key) in percentiles.iter_mut().zip(PERCENTILE_KEYS) {
        *slot = grid.get(key).and_then(Value::as_f64).unwrap_or(0.0);
    }
    let early_stopping = match v.get("early_stopping_percentiles") {
        Some(map) => {
            let mut estimates = [None; EARLY_STOPPING_COUNT];
            for (slot, key) in estimates.iter_mut().zip(PERCENTILE_KEYS) {
                *slot = map.get(key).and_then(Value::as_f64);
            }
            Some(estimates)
        }
        None => None,
    };
    let buckets = field(v, "histogram")?
        .as_array()
        .ok_or(SnapshotError::Field(format!("{name}.histogram"), "an array"))?;
    let histogram = buckets
        .iter()
        .map(|b| {
            let lo = b.pointer("/0/0").and_then(Value::as_f64).unwrap_or(0.0);
            let hi = b.pointer("/0/1").and_then(Value::as_f64).unwrap_or(0.0);
            ([lo, hi], b.get(1).and_then(Value::as_u64).unwrap_or(0))
        })
        .collect();
    Ok(SeriesStat::from_parts(
        name,
        uint(v, "count")?,
        num(v, "total")?,
        num(v, "min")?,
        num(v, "max")?,
        num(v, "sum_sq")?,
        percentiles,
        early_stopping,
        histogram,
    ))
}

/// Reads a `final_snapshot.json` document (ours or the reference's). A document without
/// `token_count_source` is a client-basis run; `legacy_loadgen_qps` comes from the run's
/// configuration, as the snapshot does not record it.
pub fn snapshot_from_json(
    doc: &Value,
    legacy_loadgen_qps: bool,
) -> Result<Snapshot, SnapshotError> {
    let primary = match doc.get("token_count_source").and_then(Value::as_str) {
        None => TokenCountSource::Client,
        Some(s) => s.parse().map_err(|_| SnapshotError::Basis(s.to_string()))?,
    };
    let state = match field(doc, "state")?.as_str() {
        Some("interrupted") => RunState::Interrupted,
        _ => RunState::Complete,
    };
    let metrics = field(doc, "metrics")?
        .as_array()
        .ok_or(SnapshotError::Field("metrics".into(), "an array"))?;
    let mut counters = Vec::new();
    let mut series = Vec::new();
    for m in metrics {
        let name = field(m, "name")?.as_str().unwrap_or_default().to_string();
        match m.get("type").and_then(Value::as_str) {
            Some("counter") => counters.push(CounterStat { value: num(m, "value")?, name }),
            Some("series") => series.push(series_from_json(m, &name)?),
            _ => return Err(SnapshotError::Field(format!("{name}.type"), "counter or series")),
        }
    }
    let streaming = series.iter().any(|s| s.name == "ttft_ns");
    let early_stopping = series.iter().any(|s| s.early_stopping.is_some());
    let mut snap = Snapshot {
        state,
        n_pending_tasks: uint(doc, "n_pending_tasks")?,
        timestamp_ns: uint(doc, "timestamp_ns")?,
        options: MetricsOptions {
            streaming,
            early_stopping,
            primary,
            legacy_loadgen_qps,
            has_tokenizer: true,
        },
        counters,
        series,
        usage: UsageTally::default(),
        osl_paired: OslPaired::default(),
    };
    let count = |name: &str| u64::try_from(snap.counter(name)).unwrap_or(0);
    let missing_empty_output = count("n_samples_missing_usage_empty_output");
    let usage = UsageTally {
        usable: count("n_samples_with_usage"),
        missing: count("n_samples_missing_usage").saturating_sub(missing_empty_output),
        missing_empty_output,
    };
    let osl_paired = OslPaired {
        count: count("osl_paired_count"),
        client_total: count("osl_paired_client_total"),
        server_total: count("osl_paired_server_total"),
    };
    snap.usage = usage;
    snap.osl_paired = osl_paired;
    Ok(snap)
}
