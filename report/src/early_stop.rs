//! The core of `llm-loadgen early-stopping DIR`: the MLPerf early-stopping estimates of a
//! finished run, as the reference's `scripts/early_stopping_estimate_from_events.py` prints
//! them.
//!
//! The series come from the same replay as `report DIR` (so the same tracked samples and the
//! same basis resolution); the estimates from the coordinator's early-stopping kernel, the one
//! the run's snapshot uses. With the run's result_summary.json the grid is the summary's and
//! the in-band estimates are cross-checked, as the script does with `--summary`.

use std::fmt::Write as _;

use loadgen_coordinator::metrics::early_stop::{estimate_index, min_queries};
use loadgen_coordinator::metrics::stats::PERCENTILE_KEYS;
use loadgen_coordinator::metrics::tokens::{client_tokens, server_tokens};
use loadgen_coordinator::metrics::{SampleTable, TokenCountSource};

use crate::rebuild::RunDir;
use crate::{ResultSummary, SeriesSummary};
use loadgen_plan::error::AppError;

/// The script's default targets: the report grid at and above the median.
pub const DEFAULT_PERCENTILES: &str = "99.9,99.0,97.0,95.0,90.0,80.0,75.0,50.0";

/// A series, as numbers the script would hold: ints for times, floats for TPOT.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
enum Value64 {
    Int(u64),
    Float(f64),
}

impl Value64 {
    fn as_f64(self) -> f64 {
        match self {
            Value64::Int(v) => v as f64,
            Value64::Float(v) => v,
        }
    }

    /// Python's `repr` of the value.
    fn repr(self) -> String {
        match self {
            Value64::Int(v) => v.to_string(),
            Value64::Float(v) => loadgen_py::float_repr::repr(v),
        }
    }
}

/// One percentile's estimate (`EarlyStoppingResult` of the reference).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub n: usize,
    pub estimate: Option<f64>,
    pub empirical: Option<f64>,
    pub min_queries: u64,
    pub discarded: u64,
}

/// The estimate for `percentile` (0-100) over ascending `sorted`, as `es_percentile_estimate`.
fn estimate(sorted: &[Value64], percentile: f64) -> (Estimate, Option<Value64>) {
    let n = sorted.len();
    let fraction = percentile / 100.0;
    let min_q = min_queries(fraction);
    // The report grid's order statistic: floor(p * (n - 1)), numpy's "lower".
    let empirical = (n > 0).then(|| sorted[(fraction * (n - 1) as f64) as usize]);
    let index = estimate_index(n, percentile);
    let est = index.map(|i| sorted[i]);
    let discarded = index.map_or(0, |i| (n - i) as u64 - 1);
    let e = Estimate {
        n,
        estimate: est.map(Value64::as_f64),
        empirical: empirical.map(Value64::as_f64),
        min_queries: min_q,
        discarded,
    };
    (e, est)
}

/// `f"{v / div:,.2f} {unit}"`, or `-` for none.
fn fmt_unit(v: Option<f64>, unit: &str, div: f64) -> String {
    match v {
        None => "-".to_string(),
        Some(v) => format!("{} {unit}", comma_2f(v / div)),
    }
}

/// Python's `{:,.2f}`: two decimals, thousands separated by commas.
fn comma_2f(v: f64) -> String {
    let text = format!("{:.2}", v.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, "00"));
    let mut out = String::with_capacity(text.len() + int.len() / 3 + 1);
    if v.is_sign_negative() && text.bytes().any(|b| (b'1'..=b'9').contains(&b)) {
        out.push('-');
    }
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out.push('.');
    out.push_str(frac);
    out
}

/// Python's `str(float)` of a percentile: `99.0`, `99.9`.
fn py_str(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e16 {
        format!("{v:.1}")
    } else {
        loadgen_py::float_repr::repr(v)
    }
}

/// The `--percentiles` targets, checked as the script checks them, keyed as it keys them.
pub fn fallback_targets(text: &str) -> Result<Vec<(String, f64)>, AppError> {
    let mut values = Vec::new();
    for token in text.split(',') {
        let v: f64 = token.trim().parse().map_err(|_| {
            AppError::Usage(format!("--percentiles {text:?}: {token:?} is not a number"))
        })?;
        values.push(v);
    }
    if !values.iter().all(|v| *v > 0.0 && *v < 100.0) {
        return Err(AppError::Usage(format!(
            "--percentiles {text}: percentiles use the grid convention and must be in (0, 100)"
        )));
    }
    let small: Vec<String> = values.iter().filter(|v| **v < 1.0).map(|v| py_str(*v)).collect();
    if !small.is_empty() {
        let meant: Vec<String> =
            values.iter().filter(|v| **v < 1.0).map(|v| py_str(v * 100.0)).collect();
        return Err(AppError::Usage(format!(
            "--percentiles {text}: percentiles use the grid convention (0-100); [{}] would mean \
             sub-1% percentiles — did you mean [{}]?",
            small.join(", "),
            meant.join(", ")
        )));
    }
    values.sort_by(|a, b| b.total_cmp(a));
    values.dedup();
    Ok(values.into_iter().map(|v| (py_str(v), v)).collect())
}

/// The grid of a summary metric, in grid order, where the run reported it (a series with
/// values: one without writes no percentiles).
fn grid_targets(metric: &SeriesSummary) -> Option<Vec<(String, f64)>> {
    if metric.count == 0 {
        return None;
    }
    let targets = PERCENTILE_KEYS
        .iter()
        .filter_map(|k| k.parse::<f64>().ok().map(|v| (k.to_string(), v)))
        .filter(|(_, v)| (50.0..100.0).contains(v))
        .collect();
    Some(targets)
}

/// The three series of the script: TTFT, TPOT (under `basis`) and latency, ascending.
fn series(
    table: &SampleTable,
    streaming: bool,
    has_tokenizer: bool,
    basis: TokenCountSource,
) -> Vec<(&'static str, &'static str, Vec<Value64>)> {
    let mut ttft = Vec::new();
    let mut latency = Vec::with_capacity(table.len());
    for i in 0..table.len() {
        let row = table.row(i);
        if let Some(first) = row.first_chunk_ns {
            ttft.push(Value64::Int(first.saturating_sub(row.issued_ns)));
        }
        latency.push(Value64::Int(row.complete_ns.saturating_sub(row.issued_ns)));
    }
    let tpot_ns = match basis {
        TokenCountSource::Client => client_tokens(table, streaming, has_tokenizer).tpot_ns,
        TokenCountSource::Server => server_tokens(table, streaming).0.tpot_ns,
    };
    let mut tpot: Vec<Value64> = tpot_ns.to_vec().into_iter().map(Value64::Float).collect();
    let mut out = vec![("ttft", "ttft_ns", ttft), ("tpot", "tpot_ns", std::mem::take(&mut tpot))];
    out.push(("latency", "sample_latency_ns", latency));
    for (_, _, values) in &mut out {
        values.sort_by(|a, b| a.as_f64().total_cmp(&b.as_f64()));
    }
    out
}

fn units(field: &str) -> (&'static str, f64) {
    if field == "latency" {
        ("s", 1e9)
    } else {
        ("ms", 1e6)
    }
}

/// One `  p{key}: sufficient=…` line, with the gap when there is an estimate.
fn result_line(key: &str, r: &Estimate, unit: &str, div: f64) -> String {
    let sufficient = if r.estimate.is_some() { "True" } else { "False" };
    let mut line = format!(
        "  p{key}: sufficient={sufficient} min_queries={} discarded={}  empirical={}  estimate={}",
        r.min_queries,
        r.discarded,
        fmt_unit(r.empirical, unit, div),
        fmt_unit(r.estimate, unit, div)
    );
    if let Some(gap) = gap_text(r, unit, div) {
        let _ = write!(line, "  gap={gap}");
    }
    line
}

fn gap_text(r: &Estimate, unit: &str, div: f64) -> Option<String> {
    let (est, emp) = (r.estimate?, r.empirical?);
    let gap = est - emp;
    let pct = if emp != 0.0 { format!(" (+{:.2}%)", 100.0 * gap / emp) } else { String::new() };
    Some(format!("+{}{pct}", fmt_unit(Some(gap), unit, div)))
}

/// The in-band cross-check lines of one series against the run's summary.
fn cross_check(
    out: &mut String,
    metric: Option<&SeriesSummary>,
    ours: &[(String, Option<Value64>)],
) {
    let Some(inband) = metric.and_then(|m| m.early_stopping.as_ref()) else { return };
    for (key, est) in PERCENTILE_KEYS.iter().zip(inband) {
        let Some((_, mine)) = ours.iter().find(|(k, _)| k == key) else { continue };
        let same = match (mine, est) {
            (None, None) => true,
            (Some(m), Some(e)) => m.as_f64() == *e,
            _ => false,
        };
        let verdict = if same {
            "EXACT MATCH".to_string()
        } else {
            let mine = mine.map_or("None".to_string(), Value64::repr);
            // As JSON writes the number.
            let est = est.map_or("None".to_string(), |e| serde_json::Value::from(e).to_string());
            format!("** MISMATCH ** ours={mine} inband={est}")
        };
        let _ = writeln!(out, "  XCHECK in-band p{key}: {verdict}");
    }
}

/// The summary's block of `field` (`ttft`, `tpot`, `latency`) under `basis`: TPOT under the
/// summary's own basis is its `tpot`, under the other its `tpot_<basis>`.
fn summary_series<'a>(
    s: &'a ResultSummary,
    field: &str,
    basis: TokenCountSource,
) -> Option<&'a SeriesSummary> {
    match field {
        "ttft" => s.ttft.as_ref(),
        "latency" => s.latency.as_ref(),
        _ if basis == s.primary.basis => s.primary.tpot.as_ref(),
        _ => s.other.tpot.as_ref(),
    }
}

/// What the script prints on stdout for this run.
pub fn report_text(
    run: &RunDir,
    table: &SampleTable,
    basis: TokenCountSource,
    has_tokenizer: bool,
    fallback: &[(String, f64)],
) -> String {
    let summary = run.summary.as_ref();
    let mut out = String::new();
    let mut rows: Vec<(&str, String, Estimate)> = Vec::new();
    for (field, name, values) in series(table, run.streaming(), has_tokenizer, basis) {
        if values.is_empty() {
            continue;
        }
        let metric = summary.and_then(|s| summary_series(s, field, basis));
        let targets = metric.and_then(grid_targets).unwrap_or_else(|| fallback.to_vec());
        let (unit, div) = units(field);
        let _ = writeln!(out, "\n{field} (from {name}, n={}):", values.len());
        let mut ours = Vec::new();
        for (key, p) in &targets {
            let (r, est) = estimate(&values, *p);
            let _ = writeln!(out, "{}", result_line(key, &r, unit, div));
            ours.push((key.clone(), est));
            rows.push((field, key.clone(), r));
        }
        if let Some(s) = summary {
            let completed = s.n_samples_completed;
            if values.len() as u64 != completed {
                let note = if name == "sample_latency_ns" { " ** MISMATCH **" } else { " (info)" };
                let _ = writeln!(
                    out,
                    "  XCHECK count: ours={} n_samples_completed={completed}{note}",
                    values.len()
                );
            }
            cross_check(&mut out, metric, &ours);
        }
    }
    markdown(&mut out, &rows);
    out
}

fn markdown(out: &mut String, rows: &[(&str, String, Estimate)]) {
    out.push_str("\n--- markdown ---\n");
    out.push_str("| metric | p | n | empirical | ES-adjusted | gap |\n");
    out.push_str("|---|---|---|---|---|---|\n");
    for (field, key, r) in rows {
        let (unit, div) = units(field);
        let gap = gap_text(r, unit, div).unwrap_or_else(|| "-".to_string());
        let _ = writeln!(
            out,
            "| **{}** | p{key} | {} | {} | {} | {gap} |",
            field.to_uppercase(),
            r.n,
            fmt_unit(r.empirical, unit, div),
            fmt_unit(r.estimate, unit, div)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_formatted_as_python_formats_them() {
        assert_eq!(comma_2f(1234567.891), "1,234,567.89");
        assert_eq!(comma_2f(0.004), "0.00");
        assert_eq!(comma_2f(-1234.5), "-1,234.50");
        assert_eq!(comma_2f(999.999), "1,000.00");
        assert_eq!(py_str(99.0), "99.0");
        assert_eq!(py_str(99.9), "99.9");
        assert_eq!(fmt_unit(None, "ms", 1e6), "-");
    }

    #[test]
    fn percentile_flags_are_checked_as_the_script_checks_them() {
        let t = fallback_targets("50,99.9,99,99.0").unwrap();
        let keys: Vec<&str> = t.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["99.9", "99.0", "50.0"]);
        let err = fallback_targets("0.99").unwrap_err().to_string();
        assert!(err.contains("did you mean [99.0]"), "{err}");
        assert!(fallback_targets("100").is_err());
        assert!(fallback_targets("abc").is_err());
    }

    #[test]
    fn the_estimate_at_the_floor_discards_nothing() {
        // p50 needs 11 samples: with 11 the estimate is the highest (t = 1).
        let values: Vec<Value64> = (1..=11).map(Value64::Int).collect();
        let (r, _) = estimate(&values, 50.0);
        assert_eq!((r.min_queries, r.discarded), (11, 0));
        assert_eq!(r.estimate, Some(11.0));
        assert_eq!(r.empirical, Some(6.0));
        let (short, _) = estimate(&values[..10], 50.0);
        assert_eq!(short.estimate, None);
    }
}
