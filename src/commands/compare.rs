//! `compare DIR DIR…`: the headline figures of finished runs side by side, with ratios to the
//! first run, as a table or one JSON object (docs/OUTPUT.md, "compare").

use std::path::{Path, PathBuf};

use loadgen_coordinator::metrics::basis::basis_key;
use loadgen_coordinator::TokenCountSource;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::error::AppError;

/// Where a run directory keeps its summary.
const SUMMARY_PATH: &str = "performance/result_summary.json";

/// One run as `compare` reads it.
#[derive(Debug)]
struct Run {
    dir: PathBuf,
    /// The summary's `token_count_source`; None for a summary the reference wrote (it has
    /// only the client basis and none of the added keys).
    primary: Option<TokenCountSource>,
    summary: Map<String, Value>,
}

impl Run {
    /// The basis whose figures the unsuffixed keys hold.
    fn headline_basis(&self) -> TokenCountSource {
        self.primary.unwrap_or(TokenCountSource::Client)
    }
}

/// How a row's values are kept and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Unit {
    /// Samples per second.
    Qps,
    /// Tokens per second.
    TokensPerS,
    /// Nanoseconds, shown in ms.
    Ns,
    /// Nanoseconds, shown in seconds.
    DurationNs,
    /// A count of samples.
    Samples,
    /// Requests kept in flight (a concurrency target).
    Concurrency,
    /// A name, not a number (the load pattern): no ratio.
    Text,
}

/// One compared figure: its value in each run, in the order given.
#[derive(Debug, Serialize)]
struct Row {
    key: String,
    label: String,
    unit: Unit,
    /// `client` or `server` for the token figures, null for the others.
    basis: Option<&'static str>,
    /// Numbers (strings for a `text` row) or null (n/a: the run's summary has no such
    /// figure).
    values: Vec<Value>,
    /// value / the first run's value; null when either is missing or the first is 0.
    ratios: Vec<Option<f64>>,
}

/// `compare`'s JSON object.
#[derive(Debug, Serialize)]
struct Comparison {
    runs: Vec<RunHeader>,
    metrics: Vec<Row>,
}

#[derive(Debug, Serialize)]
struct RunHeader {
    dir: String,
    /// `client`, `server`, or null for a summary the reference wrote.
    token_count_source: Option<&'static str>,
    layout: &'static str,
}

/// Reads each run's summary and prints the comparison. Exit 1 for fewer than two runs; exit 2
/// names a summary that is missing or malformed.
pub fn run(dirs: &[PathBuf], json: bool) -> Result<i32, AppError> {
    if let Some(why) = too_few_runs(dirs) {
        return Err(AppError::Usage(why));
    }
    if dirs.iter().all(|d| super::sweep_compare::is_sweep(d)) {
        return super::sweep_compare::run(dirs, json);
    }
    let runs = dirs.iter().map(|d| read_run(d)).collect::<Result<Vec<_>, _>>()?;
    let comparison = compare(&runs)?;
    let text = if json {
        let mut text = serde_json::to_string_pretty(&comparison)
            .map_err(|e| AppError::Execution(format!("cannot print the comparison: {e}")))?;
        text.push('\n');
        text
    } else {
        table(&comparison)
    };
    super::print_stdout(&text)?;
    Ok(0)
}

/// Why `dirs` cannot be compared (fewer than two), or None.
fn too_few_runs(dirs: &[PathBuf]) -> Option<String> {
    let given = match dirs {
        [] => "none was given".to_string(),
        [one] => format!("only {} was given", one.display()),
        _ => return None,
    };
    Some(format!(
        "compare needs two or more run directories and {given}; pass the baseline run's report \
         directory first, then each run to compare with it (llm-loadgen compare DIR DIR…)"
    ))
}

/// The summary of `dir`: `dir/performance/result_summary.json`, or `dir` itself when it is
/// that file.
fn summary_path(dir: &Path) -> PathBuf {
    if dir.is_file() {
        dir.to_path_buf()
    } else {
        dir.join(SUMMARY_PATH)
    }
}

fn read_run(dir: &Path) -> Result<Run, AppError> {
    let path = summary_path(dir);
    let shown = path.display();
    let text = std::fs::read_to_string(&path).map_err(|e| {
        AppError::Input(format!(
            "cannot read {shown}: {e}; pass the report directory of a finished run"
        ))
    })?;
    let bad = |why: String| AppError::Input(format!("{shown} is not a result summary: {why}"));
    let value: Value =
        serde_json::from_str(&text).map_err(|e| bad(format!("invalid JSON ({e})")))?;
    let Value::Object(summary) = value else {
        return Err(bad("not a JSON object".to_string()));
    };
    for key in ["n_samples_completed", "n_samples_failed"] {
        if !summary.get(key).is_some_and(Value::is_u64) {
            return Err(bad(format!("`{key}` is missing or not a count")));
        }
    }
    let primary = match summary.get("token_count_source") {
        None => None,
        Some(Value::String(s)) => Some(s.parse().map_err(|e| bad(format!("{e}")))?),
        Some(other) => return Err(bad(format!("`token_count_source` is {other}, not a string"))),
    };
    Ok(Run { dir: dir.to_path_buf(), primary, summary })
}

/// A top-level number, or None when absent or null.
fn number(run: &Run, key: &str) -> Result<Option<f64>, String> {
    match run.summary.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(format!("`{key}` is {other}, not a number or null")),
    }
}

/// A metric block's percentile (`"50.0"`, `"99.0"`), or None when the block is absent, null,
/// `{}` or has no such percentile.
fn percentile(run: &Run, block: &str, pct: &str) -> Result<Option<f64>, String> {
    let percentiles = match run.summary.get(block) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(b)) => b.get("percentiles"),
        Some(other) => return Err(format!("`{block}` is {other}, not a metric block")),
    };
    match percentiles.and_then(|p| p.get(pct)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(other) => Err(format!("`{block}.percentiles.{pct}` is {other}, not a number")),
    }
}

/// What a row reads from one run.
enum Source {
    Number(String),
    /// `run_config.load_pattern.<field>`: the pattern's `type` (text) or a target (number).
    LoadPattern(&'static str),
    Percentile(String, &'static str),
    /// `failure_kinds.<kind>.count`: 0 when the kind is not there, None without the key.
    FailureKind(String),
}

/// `run_config.load_pattern.<field>`: `type` as a string, a target as a number; None when
/// the summary has no `run_config` or the field is null (a target the pattern does not have).
fn load_pattern(run: &Run, field: &str) -> Result<Option<Value>, String> {
    let Some(config) = run.summary.get("run_config") else { return Ok(None) };
    let Some(pattern) = config.get("load_pattern") else {
        return Err("`run_config` has no `load_pattern`".to_string());
    };
    let want_text = field == "type";
    match pattern.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::String(_)) if want_text => Ok(Some(v.clone())),
        Some(v @ Value::Number(_)) if !want_text => Ok(Some(v.clone())),
        Some(other) => {
            let want = if want_text { "a string" } else { "a number or null" };
            Err(format!("`run_config.load_pattern.{field}` is {other}, not {want}"))
        }
    }
}

fn read(run: &Run, source: &Source) -> Result<Option<Value>, String> {
    let as_value = |v: Result<Option<f64>, String>| v.map(|v| v.map(Value::from));
    match source {
        Source::LoadPattern(field) => load_pattern(run, field),
        Source::Number(key) => as_value(number(run, key)),
        Source::Percentile(block, pct) => as_value(percentile(run, block, pct)),
        Source::FailureKind(kind) => as_value(failure_kind(run, kind)),
    }
}

fn failure_kind(run: &Run, kind: &str) -> Result<Option<f64>, String> {
    match run.summary.get("failure_kinds") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(kinds)) => match kinds.get(kind).and_then(|k| k.get("count")) {
            None => Ok(Some(0.0)),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(other) => Err(format!("`failure_kinds.{kind}.count` is {other}")),
        },
        Some(other) => Err(format!("`failure_kinds` is {other}, not an object")),
    }
}

/// A row to build: its key, label, unit, basis and where each run keeps it.
struct Spec {
    key: String,
    label: String,
    unit: Unit,
    basis: Option<TokenCountSource>,
    source: Box<dyn Fn(&Run) -> Source>,
}

fn spec(key: &str, label: &str, unit: Unit, source: impl Fn(&Run) -> Source + 'static) -> Spec {
    let (key, label) = (key.to_string(), label.to_string());
    Spec { key, label, unit, basis: None, source: Box::new(source) }
}

/// The token figures on `basis`, found in each run under the name the naming rule gives it
/// there: so a server-primary run's `tps` and a client-primary run's `tps_server` share a row.
fn basis_specs(basis: TokenCountSource) -> Vec<Spec> {
    let b = basis.as_str();
    let tps = spec(&format!("tps_{b}"), &format!("TPS ({b} basis)"), Unit::TokensPerS, move |r| {
        Source::Number(basis_key("tps", basis, r.headline_basis()))
    });
    let tpot = |pct: &'static str, name: &str| {
        let (key, label) = (format!("tpot_ns_{name}_{b}"), format!("TPOT {name} (ms, {b} basis)"));
        spec(&key, &label, Unit::Ns, move |r| {
            Source::Percentile(basis_key("tpot", basis, r.headline_basis()), pct)
        })
    };
    let mut specs = vec![tps, tpot("50.0", "p50"), tpot("99.0", "p99")];
    for s in &mut specs {
        s.basis = Some(basis);
    }
    specs
}

fn specs(runs: &[Run]) -> Vec<Spec> {
    use TokenCountSource::{Client, Server};
    let pct = |block: &'static str, pct: &'static str, name: &str, label: &str| {
        spec(&format!("{block}_ns_{name}"), &format!("{label} {name} (ms)"), Unit::Ns, move |_| {
            Source::Percentile(block.to_string(), pct)
        })
    };
    let num = |key: &'static str, label: &str, unit| {
        spec(key, label, unit, move |_| Source::Number(key.to_string()))
    };
    let pattern = |key: &str, label: &str, unit, field: &'static str| {
        spec(key, label, unit, move |_| Source::LoadPattern(field))
    };
    let mut specs = vec![
        pattern("load_pattern", "Load pattern", Unit::Text, "type"),
        pattern("target_qps", "Target QPS", Unit::Qps, "target_qps"),
        pattern(
            "target_concurrency",
            "Target concurrency",
            Unit::Concurrency,
            "target_concurrency",
        ),
        num("qps", "QPS", Unit::Qps),
    ];
    specs.extend(basis_specs(Client));
    specs.extend(basis_specs(Server));
    specs.push(pct("ttft", "50.0", "p50", "TTFT"));
    specs.push(pct("ttft", "99.0", "p99", "TTFT"));
    specs.push(pct("latency", "50.0", "p50", "Latency"));
    specs.push(pct("latency", "99.0", "p99", "Latency"));
    specs.push(num("n_samples_completed", "Samples completed", Unit::Samples));
    specs.push(num("n_samples_failed", "Samples failed", Unit::Samples));
    for kind in failure_kinds(runs) {
        let (key, label) = (format!("n_failed_{kind}"), format!("  failed: {kind}"));
        specs.push(spec(&key, &label, Unit::Samples, move |_| Source::FailureKind(kind.clone())));
    }
    specs.push(num("duration_ns", "Duration (s)", Unit::DurationNs));
    specs
}

/// Every failure kind any run saw, in the order first seen (run by run).
fn failure_kinds(runs: &[Run]) -> Vec<String> {
    let mut kinds: Vec<String> = Vec::new();
    for run in runs {
        if let Some(Value::Object(map)) = run.summary.get("failure_kinds") {
            for kind in map.keys().filter(|k| !kinds.contains(k)).cloned().collect::<Vec<_>>() {
                kinds.push(kind);
            }
        }
    }
    kinds
}

fn compare(runs: &[Run]) -> Result<Comparison, AppError> {
    let mut rows = Vec::new();
    for s in specs(runs) {
        let mut values = Vec::with_capacity(runs.len());
        for run in runs {
            let value = read(run, &(s.source)(run)).map_err(|why| {
                let path = summary_path(&run.dir);
                AppError::Input(format!("{} is not a result summary: {why}", path.display()))
            })?;
            values.push(value);
        }
        let numbers: Vec<Option<f64>> =
            values.iter().map(|v| v.as_ref().and_then(Value::as_f64)).collect();
        let base = numbers.first().copied().flatten().filter(|b| *b != 0.0);
        let ratios = numbers.iter().map(|v| base.zip(*v).map(|(b, v)| v / b)).collect();
        let basis = s.basis.map(TokenCountSource::as_str);
        let values = values.into_iter().map(|v| json_value(s.unit, v)).collect();
        rows.push(Row { key: s.key, label: s.label, unit: s.unit, basis, values, ratios });
    }
    let runs = runs
        .iter()
        .map(|r| RunHeader {
            dir: r.dir.display().to_string(),
            token_count_source: r.primary.map(TokenCountSource::as_str),
            layout: if r.primary.is_some() { "llm-loadgen" } else { "reference" },
        })
        .collect();
    Ok(Comparison { runs, metrics: rows })
}

/// A value as JSON: counts, concurrencies and `duration_ns` as integers, as the summary writes
/// them; text as it is.
fn json_value(unit: Unit, value: Option<Value>) -> Value {
    let whole = matches!(unit, Unit::Samples | Unit::DurationNs | Unit::Concurrency);
    match value.as_ref().map(|v| (v, v.as_f64())) {
        Some((_, Some(v))) if whole && v.fract() == 0.0 && v >= 0.0 => Value::from(v as u64),
        Some((_, Some(v))) => serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        Some((v, None)) => v.clone(),
        None => Value::Null,
    }
}

/// Least widths of the table's columns; a column is wider when a cell needs it.
const LABEL_WIDTH: usize = 28;
const VALUE_WIDTH: usize = 16;
const RATIO_WIDTH: usize = 9;

/// A value as the table shows it: latencies in ms, the duration in seconds, n/a when missing.
fn shown(unit: Unit, value: &Value) -> String {
    if let Value::String(text) = value {
        return text.clone();
    }
    let Some(v) = value.as_f64() else {
        return "n/a".to_string();
    };
    match unit {
        Unit::Text => v.to_string(),
        Unit::Qps | Unit::TokensPerS => format!("{v:.2}"),
        Unit::Ns => format!("{:.3}", v / 1e6),
        Unit::DurationNs => format!("{:.3}", v / 1e9),
        Unit::Samples | Unit::Concurrency => format!("{v:.0}"),
    }
}

/// A ratio as the table shows it; a name has none (its cell is blank).
fn shown_ratio(unit: Unit, ratio: Option<f64>) -> String {
    match (unit, ratio) {
        (Unit::Text, _) => String::new(),
        (_, Some(r)) => format!("{r:.3}x"),
        (_, None) => "n/a".to_string(),
    }
}

/// The comparison as a table: one row per figure, one column per run, and after each run
/// but the first its ratio to the first. Each column is as wide as its widest cell and one
/// more (at least its least width), so cells stay apart whatever their values.
fn table(c: &Comparison) -> String {
    let mut out = String::from("Runs (ratios are to [1]):\n");
    for (i, run) in c.runs.iter().enumerate() {
        let basis = match run.token_count_source {
            Some(b) => format!("token basis {b}"),
            None => "the reference's layout (client basis only; added figures n/a)".to_string(),
        };
        out.push_str(&format!("  [{}] {}: {basis}\n", i + 1, run.dir));
    }
    out.push('\n');
    // Each row's cells: its label, then each run's value and (after the first) its ratio.
    let header: Vec<String> = std::iter::once(String::new())
        .chain((1..=c.runs.len()).flat_map(|i| {
            let ratio = (i > 1).then(|| format!("[{i}]/[1]"));
            std::iter::once(format!("[{i}]")).chain(ratio)
        }))
        .collect();
    let rows: Vec<Vec<String>> = std::iter::once(header)
        .chain(c.metrics.iter().map(|row| {
            let mut cells = vec![row.label.clone()];
            for (i, (value, ratio)) in row.values.iter().zip(&row.ratios).enumerate() {
                cells.push(shown(row.unit, value));
                if i > 0 {
                    cells.push(shown_ratio(row.unit, *ratio));
                }
            }
            cells
        }))
        .collect();
    let widths = column_widths(&rows);
    for cells in &rows {
        let mut line = String::new();
        for (i, (cell, &width)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 {
                line.push_str(&format!("{cell:<width$}"));
            } else {
                line.push_str(&format!("{cell:>width$}"));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Each column's width: the label column its least width or its longest label; a value or
/// ratio column its least width or its widest cell and one space before it.
fn column_widths(rows: &[Vec<String>]) -> Vec<usize> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    (0..columns)
        .map(|col| {
            let widest = rows.iter().filter_map(|r| r.get(col)).map(|c| c.chars().count());
            let widest = widest.max().unwrap_or(0);
            match col {
                0 => widest.max(LABEL_WIDTH),
                // [1] is column 1; then run i's value is column 2(i - 1), its ratio the next.
                c if c == 1 || c % 2 == 0 => (widest + 1).max(VALUE_WIDTH),
                _ => (widest + 1).max(RATIO_WIDTH),
            }
        })
        .collect()
}
