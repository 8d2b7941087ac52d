//! Accuracy scoring from a finished run's files, as the reference scores it after its phases
//! (`commands/benchmark/accuracy.py`): the `sample.complete` lines of events.jsonl, the
//! phases of sample_idx_map.json and each dataset's ground truth; then
//! `accuracy/accuracy_results.json` and the report's "Accuracy:" block.

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::path::Path;

use loadgen_accuracy::agentic_inline::{self, ExpectedTurn, InlineScores};
use loadgen_accuracy::{Breakdown, Extractor, Sample, ScoreValue, Scorer};
use loadgen_coordinator::metrics::usage::{classify_usage, count_from_json, UsageClass};
use loadgen_coordinator::metrics::{basis_key, Num, SeriesStat, SummaryBlock, TokenCountSource};
use loadgen_py::float_repr::repr as python_float_repr;
use loadgen_py::json::to_python_json;
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;

use loadgen_plan::error::AppError;

/// What a dataset entry is: `accuracy` (a phase of its own) or `performance` (the
/// performance dataset's inline `accuracy_config`, scored on its outputs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetType {
    Accuracy,
    Performance,
}

impl DatasetType {
    pub fn as_str(self) -> &'static str {
        match self {
            DatasetType::Accuracy => "accuracy",
            DatasetType::Performance => "performance",
        }
    }
}

/// One dataset to score: its phase in sample_idx_map.json and how it is scored.
#[derive(Debug, Clone)]
pub struct ScoringJob<'a> {
    /// The phase name: the dataset's name, or `performance` for the inline entry.
    pub dataset_name: &'a str,
    pub dataset_type: DatasetType,
    pub scorer: Scorer,
    pub extractor: Option<Extractor>,
    /// `accuracy_config.ground_truth` as given.
    pub ground_truth_column: Option<&'a str>,
    /// The ground truth of each dataset row.
    pub ground_truth: &'a [String],
    /// `agentic_inference_inline`'s ground truth (the recorded assistant turns), and the
    /// dataset's client turns (its `unit_samples`).
    pub expected_turns: &'a [ExpectedTurn],
    pub agentic_turns: u64,
    /// Each row's values of the scorer's `extra_columns` (empty when it reads none).
    pub row_columns: &'a [Vec<String>],
    pub num_repeats: u64,
    /// `unit × repeats`, or for the performance entry its phase's issued count.
    pub total_samples: u64,
    /// The phase's wall time in seconds.
    pub duration_s: f64,
}

/// A client token counter for the accuracy outputs (the run's tokenizer).
pub type OslCounter<'a> = &'a dyn Fn(&str) -> Option<u32>;

/// One `sample.complete` line: the output as the reference's `str(TextModelOutput)`, whether
/// the sample succeeded (`data` not null), and its usage counts under the usage rule.
#[derive(Debug, Clone)]
struct Completed {
    uuid: String,
    text: String,
    success: bool,
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
}

/// The issued samples of each phase: `{phase: [(uuid, dataset_index)]}` in file order.
pub type PhaseMap = HashMap<String, Vec<(String, usize)>>;

/// Reads sample_idx_map.json.
pub fn read_sample_idx_map(dir: &Path) -> Result<PhaseMap, AppError> {
    let path = dir.join("sample_idx_map.json");
    let text = super::read_existing(&path).map_err(|e| {
        AppError::Execution(format!(
            "cannot read {}: {e}; accuracy cannot be scored",
            path.display()
        ))
    })?;
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        AppError::Execution(format!(
            "{} is not JSON ({e}); accuracy cannot be scored",
            path.display()
        ))
    })?;
    let Value::Object(phases) = value else {
        return Err(AppError::Execution(format!("{} is not an object", path.display())));
    };
    let mut out = PhaseMap::new();
    for (phase, samples) in phases {
        let Value::Object(samples) = samples else { continue };
        let list = samples
            .into_iter()
            .filter_map(|(uuid, idx)| idx.as_u64().map(|i| (uuid, i as usize)))
            .collect();
        out.insert(phase, list);
    }
    Ok(out)
}

/// The reference's `str(TextModelOutput)`: reasoning, then output (each a string or a list
/// of chunks), then the tool calls as one compact JSON array (streamed delta lists merged).
fn output_text(data: &RawValue) -> Result<String, String> {
    let output = crate::replay::read::model_output(data)?;
    let mut text = String::new();
    output.push_text(&mut text);
    Ok(text)
}

/// A `sample.complete` line's fields the scorers read.
#[derive(Deserialize)]
struct CompleteLine<'a> {
    #[serde(borrow, default)]
    sample_uuid: Cow<'a, str>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(default)]
    prompt_tokens: Option<Value>,
    #[serde(default)]
    completion_tokens: Option<Value>,
}

/// The `sample.complete` lines of events.jsonl for `wanted` uuids, in file order. A line that
/// is not the compact form this tool (and the reference's writer) writes fails loudly with its
/// number: a log in another encoding would otherwise score nothing.
fn read_completes(dir: &Path, wanted: &HashSet<&str>) -> Result<Vec<Completed>, AppError> {
    let path = dir.join("events.jsonl");
    let file = super::open_existing(&path).map_err(|e| {
        AppError::Execution(format!(
            "cannot read {}: {e}; accuracy cannot be scored",
            path.display()
        ))
    })?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(file).lines().enumerate() {
        let bad =
            |why: String| AppError::Execution(format!("{} line {}: {why}", path.display(), i + 1));
        let line = line.map_err(|e| bad(e.to_string()))?;
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with("{\"event_type\":\"") {
            return Err(bad("not a compact event record; accuracy cannot be scored".into()));
        }
        if !line.starts_with("{\"event_type\":\"sample.complete\"") {
            continue;
        }
        let rec: CompleteLine<'_> = serde_json::from_str(&line).map_err(|e| bad(e.to_string()))?;
        if !wanted.contains(rec.sample_uuid.as_ref()) {
            continue;
        }
        let text = match rec.data {
            Some(data) => output_text(data).map_err(bad)?,
            None => String::new(),
        };
        out.push(Completed {
            uuid: rec.sample_uuid.into_owned(),
            text,
            success: rec.data.is_some(),
            prompt_tokens: count_from_json(rec.prompt_tokens.as_ref()).ok(),
            completion_tokens: count_from_json(rec.completion_tokens.as_ref()).ok(),
        });
    }
    Ok(out)
}

/// `response_counts`: every issued sample is scored (a non-empty output), empty, or missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResponseCounts {
    pub issued: u64,
    pub scored: u64,
    pub empty: u64,
    pub missing: u64,
}

/// Output lengths of one phase on one basis.
#[derive(Debug, Clone)]
pub struct PhaseOsl {
    pub stat: Option<SeriesStat>,
    pub n_samples: u64,
}

/// One `accuracy_scores` entry.
#[derive(Debug, Clone)]
pub struct AccuracyEntry {
    pub dataset_name: String,
    pub extractor: Option<&'static str>,
    pub ground_truth_column: Option<String>,
    pub score: ScoreValue,
    pub unit_samples: u64,
    pub num_repeats: u64,
    pub total_samples: u64,
    pub duration_s: f64,
    pub complete: bool,
    pub dataset_type: DatasetType,
    /// The scorer's per-subset breakdown (`bfcl_v4`).
    pub breakdown: Option<Breakdown>,
    /// Accuracy datasets only (as the reference).
    pub response_counts: Option<ResponseCounts>,
    /// Client-token lengths (`None` without a tokenizer) and server-usage lengths.
    pub osl_client: Option<PhaseOsl>,
    pub osl_server: Option<PhaseOsl>,
    pub osl_tokenize_s: Option<f64>,
    /// Successful samples whose usage was missing (the usage rule).
    pub n_missing_usage: u64,
    /// `agentic_inference_inline`'s scores.json (written beside the summary).
    pub inline_scores: Option<InlineScores>,
}

/// Everything `accuracy_results.json` holds.
#[derive(Debug, Clone)]
pub struct AccuracyResults {
    pub primary: TokenCountSource,
    pub entries: Vec<AccuracyEntry>,
}

/// Scores every job from the run's files in `dir`.
pub fn score_run(
    dir: &Path,
    jobs: &[ScoringJob<'_>],
    primary: TokenCountSource,
    counter: Option<OslCounter<'_>>,
) -> Result<AccuracyResults, AppError> {
    let map = read_sample_idx_map(dir)?;
    let wanted: HashSet<&str> = jobs
        .iter()
        .filter_map(|j| map.get(j.dataset_name))
        .flat_map(|list| list.iter().map(|(u, _)| u.as_str()))
        .collect();
    let completes = read_completes(dir, &wanted)?;
    let mut entries = Vec::with_capacity(jobs.len());
    for job in jobs {
        if job.scorer == Scorer::AgenticInferenceInline {
            entries.push(score_inline(dir, job)?);
            continue;
        }
        let issued = map.get(job.dataset_name).map(Vec::as_slice).unwrap_or_default();
        entries.push(score_job(job, issued, &completes, counter)?);
    }
    Ok(AccuracyResults { primary, entries })
}

fn score_job(
    job: &ScoringJob<'_>,
    issued: &[(String, usize)],
    completes: &[Completed],
    counter: Option<OslCounter<'_>>,
) -> Result<AccuracyEntry, AppError> {
    let index: HashMap<&str, usize> = issued.iter().map(|(u, i)| (u.as_str(), *i)).collect();
    let mine: Vec<&Completed> =
        completes.iter().filter(|c| index.contains_key(c.uuid.as_str())).collect();
    let unit_samples = job.ground_truth.len();
    let columns = |row: usize| job.row_columns.get(row).map_or(&[][..], Vec::as_slice);
    let mut samples = Vec::with_capacity(mine.len());
    for c in &mine {
        let row = index[c.uuid.as_str()];
        let ground_truth = job.ground_truth.get(row).ok_or_else(|| {
            AppError::Execution(format!(
                "{}: sample {} names dataset row {row}, past the dataset's {unit_samples} rows; \
                 score the run with the dataset it ran",
                job.dataset_name, c.uuid
            ))
        })?;
        samples.push(Sample { index: row, output: &c.text, ground_truth, columns: columns(row) });
    }
    let done: HashSet<&str> = mine.iter().map(|c| c.uuid.as_str()).collect();
    let missing: Vec<&[String]> = issued
        .iter()
        .filter(|(u, _)| !done.contains(u.as_str()))
        .map(|(_, r)| columns(*r))
        .collect();
    let scored = job
        .scorer
        .score_with_missing(job.extractor, &samples, (issued.len(), &missing), unit_samples)
        .map_err(|e| AppError::Execution(format!("dataset {}: {e}", job.dataset_name)))?;
    let accuracy = job.dataset_type == DatasetType::Accuracy;
    let (osl_client, osl_tokenize_s) = match counter.filter(|_| accuracy) {
        Some(count) => {
            let started = std::time::Instant::now();
            let osl = client_osl(&mine, count);
            (Some(osl), Some(round3(started.elapsed().as_secs_f64())))
        }
        None => (None, None),
    };
    let (osl_server, n_missing_usage) = server_osl(&mine);
    Ok(AccuracyEntry {
        dataset_name: job.dataset_name.to_string(),
        extractor: job.extractor.map(extractor_class_name),
        ground_truth_column: job.ground_truth_column.map(str::to_string),
        score: scored.score,
        unit_samples: unit_samples as u64,
        num_repeats: job.num_repeats,
        total_samples: job.total_samples,
        duration_s: round3(job.duration_s.max(0.0)),
        complete: true,
        dataset_type: job.dataset_type,
        breakdown: scored.breakdown,
        response_counts: accuracy.then(|| response_counts(issued.len(), &mine)),
        osl_client,
        osl_server: accuracy.then_some(osl_server),
        osl_tokenize_s,
        n_missing_usage: if accuracy { n_missing_usage } else { 0 },
        inline_scores: None,
    })
}

/// `agentic_inference_inline`: the run's issued turns scored against the expected ones; the
/// entry carries scores.json's content for the caller to write.
fn score_inline(dir: &Path, job: &ScoringJob<'_>) -> Result<AccuracyEntry, AppError> {
    let issued = crate::agentic::inline::read_issued_turns(dir)?;
    let (scores, _repeats) = agentic_inline::score(job.expected_turns, &issued);
    Ok(AccuracyEntry {
        dataset_name: job.dataset_name.to_string(),
        extractor: None,
        ground_truth_column: job.ground_truth_column.map(str::to_string),
        score: ScoreValue::Number(scores.score),
        unit_samples: job.agentic_turns,
        num_repeats: job.num_repeats,
        total_samples: job.total_samples,
        duration_s: round3(job.duration_s.max(0.0)),
        complete: true,
        dataset_type: job.dataset_type,
        response_counts: None,
        osl_client: None,
        osl_server: None,
        osl_tokenize_s: None,
        n_missing_usage: 0,
        inline_scores: Some(scores),
        breakdown: None,
    })
}

/// The reference writes the extractor's class name (`eval_cfg.extractor.__name__`), not the
/// name an `accuracy_config` gives it.
pub fn extractor_class_name(e: Extractor) -> &'static str {
    match e {
        Extractor::Abcd => "ABCDExtractor",
        Extractor::BoxedMath => "BoxedMathExtractor",
        Extractor::Identity => "IdentityExtractor",
        Extractor::PythonCode => "PythonCodeExtractor",
        Extractor::FunctionCall => "FunctionCallExtractor",
    }
}

/// Python's `round(x, 3)` for the durations the reference rounds.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn response_counts(issued: usize, mine: &[&Completed]) -> ResponseCounts {
    let scored = mine.iter().filter(|c| !c.text.is_empty()).count() as u64;
    let completed = mine.len() as u64;
    let issued = issued as u64;
    ResponseCounts {
        issued,
        scored,
        empty: completed - scored,
        missing: issued.saturating_sub(completed),
    }
}

/// Client OSL over the non-empty outputs (a failed sample's empty COMPLETE is not a 0-token
/// sample), as the reference's `_phase_osl_stats`.
fn client_osl(mine: &[&Completed], count: OslCounter<'_>) -> PhaseOsl {
    let mut lengths: Vec<u64> = mine
        .iter()
        .filter(|c| !c.text.is_empty())
        .filter_map(|c| count(&c.text))
        .map(u64::from)
        .collect();
    let n_samples = lengths.len() as u64;
    let stat = (!lengths.is_empty()).then(|| SeriesStat::from_ints("osl", &mut lengths, false));
    PhaseOsl { stat, n_samples }
}

/// Server OSL by the performance phase's usage rule: each successful sample's usage is
/// classified; usable counts of 1 or more are recorded, missing ones counted.
fn server_osl(mine: &[&Completed]) -> (PhaseOsl, u64) {
    let mut lengths = Vec::new();
    let mut missing = 0u64;
    for c in mine.iter().filter(|c| c.success) {
        match classify_usage(c.prompt_tokens, c.completion_tokens, c.text.is_empty()) {
            UsageClass::Usable => {
                if let Some(n) = c.completion_tokens.filter(|&n| n >= 1) {
                    lengths.push(u64::from(n));
                }
            }
            UsageClass::Missing | UsageClass::MissingEmptyOutput => missing += 1,
        }
    }
    let n_samples = lengths.len() as u64;
    let stat =
        (!lengths.is_empty()).then(|| SeriesStat::from_ints("osl_server", &mut lengths, false));
    (PhaseOsl { stat, n_samples }, missing)
}

/// The reference's `average_accuracy`: the mean of the accuracy entries' numeric scores.
pub fn average_accuracy(entries: &[AccuracyEntry]) -> Option<f64> {
    let values: Vec<f64> = entries
        .iter()
        .filter(|e| e.dataset_type == DatasetType::Accuracy)
        .filter_map(|e| match e.score {
            ScoreValue::Number(Some(v)) => Some(v),
            _ => None,
        })
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

struct ScoreJson<'a>(&'a ScoreValue);

impl Serialize for ScoreJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            ScoreValue::Number(v) => v.serialize(serializer),
            ScoreValue::Rouge(r) => {
                let mut map = serializer.serialize_map(Some(6))?;
                map.serialize_entry("rouge1", &r.rouge1)?;
                map.serialize_entry("rouge2", &r.rouge2)?;
                map.serialize_entry("rougeL", &r.rouge_l)?;
                map.serialize_entry("rougeLsum", &r.rouge_lsum)?;
                map.serialize_entry("gen_len", &r.gen_len)?;
                map.serialize_entry("gen_num", &r.gen_num)?;
                map.end()
            }
        }
    }
}

/// A `{name: value}` map in the given order.
struct Ordered<'a>(&'a [(String, f64)]);

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(Some(self.0.len()))?;
        for (k, v) in self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// The reference's BFCL `breakdown` block, in its key order.
struct BreakdownJson<'a>(&'a Breakdown);

impl Serialize for BreakdownJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let b = self.0;
        let mut m = serializer.serialize_map(Some(7))?;
        m.serialize_entry("overall_accuracy", &b.overall_accuracy)?;
        m.serialize_entry("normalized_single_turn_score", &b.normalized_single_turn_score)?;
        m.serialize_entry("category_scores", &Ordered(&b.category_scores))?;
        m.serialize_entry("subset_scores", &Ordered(&b.subset_scores))?;
        m.serialize_entry("unscored_subsets", &Ordered(&b.unscored_subsets))?;
        m.serialize_entry("total_samples", &b.total_samples)?;
        m.serialize_entry("issued_samples", &b.issued_samples)?;
        m.end()
    }
}

struct EntryJson<'a>(&'a AccuracyEntry, TokenCountSource);

impl Serialize for EntryJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (e, primary) = (self.0, self.1);
        let mut m = serializer.serialize_map(None)?;
        m.serialize_entry("dataset_name", &e.dataset_name)?;
        m.serialize_entry("extractor", &e.extractor)?;
        m.serialize_entry("ground_truth_column", &e.ground_truth_column)?;
        m.serialize_entry("score", &ScoreJson(&e.score))?;
        m.serialize_entry("unit_samples", &e.unit_samples)?;
        m.serialize_entry("num_repeats", &e.num_repeats)?;
        m.serialize_entry("total_samples", &e.total_samples)?;
        m.serialize_entry("duration_s", &e.duration_s)?;
        m.serialize_entry("complete", &e.complete)?;
        m.serialize_entry("dataset_type", e.dataset_type.as_str())?;
        if let Some(b) = &e.breakdown {
            m.serialize_entry("breakdown", &BreakdownJson(b))?;
        }
        if e.dataset_type != DatasetType::Accuracy {
            return m.end();
        }
        if let Some(rc) = &e.response_counts {
            m.serialize_entry("response_counts", rc)?;
        }
        let (mine, other) = match primary {
            TokenCountSource::Client => (&e.osl_client, &e.osl_server),
            TokenCountSource::Server => (&e.osl_server, &e.osl_client),
        };
        // The reference's keys: the primary basis's block, only when it has values.
        if let Some(stat) = mine.as_ref().and_then(|o| o.stat.as_ref()) {
            m.serialize_entry("output_sequence_lengths", &SummaryBlock { stat, partial: false })?;
        }
        if let Some(s) = e.osl_tokenize_s {
            m.serialize_entry("osl_tokenize_s", &s)?;
        }
        // The seed's additions: the other basis (null when it has no values), its sample
        // count, and the successful samples without usable usage.
        let basis = primary.other();
        let block = other
            .as_ref()
            .and_then(|o| o.stat.as_ref())
            .map(|stat| SummaryBlock { stat, partial: false });
        m.serialize_entry(&basis_key("output_sequence_lengths", basis, primary), &block)?;
        let n = other.as_ref().map_or(0, |o| o.n_samples);
        m.serialize_entry(&basis_key("n_osl_samples", basis, primary), &n)?;
        m.serialize_entry("n_missing_usage", &e.n_missing_usage)?;
        m.end()
    }
}

impl Serialize for AccuracyResults {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut m = serializer.serialize_map(None)?;
        if let Some(avg) = average_accuracy(&self.entries) {
            m.serialize_entry("average_accuracy", &avg)?;
        }
        if self.entries.iter().any(|e| e.osl_tokenize_s.is_some()) {
            let total: f64 = self.entries.iter().filter_map(|e| e.osl_tokenize_s).sum();
            m.serialize_entry("osl_tokenization_s", &round3(total))?;
        }
        let entries: Vec<EntryJson<'_>> =
            self.entries.iter().map(|e| EntryJson(e, self.primary)).collect();
        m.serialize_entry("accuracy_scores", &entries)?;
        m.serialize_entry("token_count_source", self.primary.as_str())?;
        m.end()
    }
}

/// Writes `accuracy/accuracy_results.json` atomically (the reference's `json.dumps(indent=2)`).
pub fn write_accuracy_results(
    dir: &super::OpenDir,
    results: &AccuracyResults,
) -> std::io::Result<()> {
    let bytes = to_python_json(results).map_err(std::io::Error::other)?;
    dir.write_atomic("accuracy/accuracy_results.json", &bytes)
}

/// Python's `f"{value:.{precision}g}"`.
pub fn py_format_g(value: f64, precision: usize) -> String {
    if value == 0.0 {
        return if value.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    if !value.is_finite() {
        return if value.is_nan() {
            "nan".into()
        } else if value > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, value);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= p as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", strip(mantissa), exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip(&format!("{value:.decimals$}"))
    }
}

/// A score as the reference's summary prints it: `.4g` for a number, `N/A` for none, and the
/// ROUGE dict as Python's `str(dict)`.
fn score_text(score: &ScoreValue) -> String {
    match score {
        ScoreValue::Number(Some(v)) => py_format_g(*v, 4),
        ScoreValue::Number(None) => "N/A".into(),
        ScoreValue::Rouge(r) => format!(
            "{{'rouge1': '{}', 'rouge2': '{}', 'rougeL': '{}', 'rougeLsum': '{}', 'gen_len': '{}', 'gen_num': {}}}",
            r.rouge1, r.rouge2, r.rouge_l, r.rouge_lsum, r.gen_len, r.gen_num
        ),
    }
}

fn num_text(n: Num) -> String {
    match n {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => python_float_repr(f),
    }
}

/// What the "Accuracy:" block shows of one entry, from the scores or from
/// accuracy_results.json.
#[derive(Debug, Clone, PartialEq)]
struct BlockEntry {
    name: String,
    score: String,
    unit_samples: u64,
    num_repeats: u64,
    total_samples: u64,
    duration_s: f64,
    responses: Option<ResponseCounts>,
    /// Output tokens on the block's basis: avg, min and max as printed.
    osl: Option<(f64, String, String)>,
    osl_tokenize_s: Option<f64>,
}

/// The reference's "Accuracy:" block of the Summary (report.txt and the console).
pub fn accuracy_block(results: &AccuracyResults) -> String {
    let entries: Vec<BlockEntry> = results
        .entries
        .iter()
        .map(|e| {
            let primary = match results.primary {
                TokenCountSource::Client => &e.osl_client,
                TokenCountSource::Server => &e.osl_server,
            };
            BlockEntry {
                name: e.dataset_name.clone(),
                score: score_text(&e.score),
                unit_samples: e.unit_samples,
                num_repeats: e.num_repeats,
                total_samples: e.total_samples,
                duration_s: e.duration_s,
                responses: e.response_counts,
                osl: primary
                    .as_ref()
                    .and_then(|o| o.stat.as_ref())
                    .map(|stat| (stat.avg(), num_text(stat.min), num_text(stat.max))),
                osl_tokenize_s: e.osl_tokenize_s,
            }
        })
        .collect();
    format_block(&entries, average_accuracy(&results.entries))
}

/// The "Accuracy:" block under `primary` from a finished run's accuracy_results.json, as the
/// run printed it (`report DIR` rebuilds report.txt with it); `Err` says what is wrong.
pub fn accuracy_block_from_json(text: &str, primary: TokenCountSource) -> Result<String, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    let run_basis: TokenCountSource = v["token_count_source"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or("no token_count_source")?;
    let osl_key = if primary == run_basis {
        "output_sequence_lengths".to_string()
    } else {
        basis_key("output_sequence_lengths", primary, run_basis)
    };
    let list = v["accuracy_scores"].as_array().ok_or("no accuracy_scores list")?;
    let entries = list
        .iter()
        .map(|e| json_entry(e, &osl_key))
        .collect::<Result<Vec<BlockEntry>, String>>()?;
    Ok(format_block(&entries, v["average_accuracy"].as_f64()))
}

fn json_entry(e: &Value, osl_key: &str) -> Result<BlockEntry, String> {
    let name = e["dataset_name"].as_str().ok_or("an entry without dataset_name")?;
    let int = |key: &str| e[key].as_u64().ok_or_else(|| format!("{name}: no {key}"));
    let score = match &e["score"] {
        Value::Null => "N/A".to_string(),
        Value::Number(n) => py_format_g(n.as_f64().unwrap_or(f64::NAN), 4),
        Value::Object(r) => {
            let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            format!(
                "{{'rouge1': '{}', 'rouge2': '{}', 'rougeL': '{}', 'rougeLsum': '{}', 'gen_len': '{}', 'gen_num': {}}}",
                s("rouge1"),
                s("rouge2"),
                s("rougeL"),
                s("rougeLsum"),
                s("gen_len"),
                r.get("gen_num").and_then(Value::as_u64).unwrap_or(0)
            )
        }
        other => return Err(format!("{name}: score {other} is not a number or ROUGE")),
    };
    let responses = match e.get("response_counts") {
        Some(rc) => Some(ResponseCounts {
            issued: rc["issued"].as_u64().ok_or("response_counts.issued")?,
            scored: rc["scored"].as_u64().ok_or("response_counts.scored")?,
            empty: rc["empty"].as_u64().ok_or("response_counts.empty")?,
            missing: rc["missing"].as_u64().ok_or("response_counts.missing")?,
        }),
        None => None,
    };
    let osl = e.get(osl_key).filter(|b| b.is_object()).map(|b| {
        (b["avg"].as_f64().unwrap_or(0.0), json_num_text(&b["min"]), json_num_text(&b["max"]))
    });
    Ok(BlockEntry {
        name: name.to_string(),
        score,
        unit_samples: int("unit_samples")?,
        num_repeats: int("num_repeats")?,
        total_samples: int("total_samples")?,
        duration_s: e["duration_s"].as_f64().ok_or_else(|| format!("{name}: no duration_s"))?,
        responses,
        osl,
        osl_tokenize_s: e["osl_tokenize_s"].as_f64(),
    })
}

/// A JSON count as `num_text` prints it: an integer as written, a float as Python's repr.
fn json_num_text(v: &Value) -> String {
    match (v.as_u64(), v.as_i64(), v.as_f64()) {
        (Some(u), _, _) => u.to_string(),
        (None, Some(i), _) => i.to_string(),
        (None, None, Some(f)) => python_float_repr(f),
        _ => "0".to_string(),
    }
}

fn format_block(entries: &[BlockEntry], average: Option<f64>) -> String {
    use std::fmt::Write;
    let mut out = String::from("Accuracy:\n");
    for e in entries {
        let _ = writeln!(
            out,
            "  {}: {} (unit={}, repeats={}, total={}, duration={:.2}s)",
            e.name, e.score, e.unit_samples, e.num_repeats, e.total_samples, e.duration_s
        );
        if let Some(rc) = &e.responses {
            let _ = writeln!(
                out,
                "    responses: {}/{} scored ({} empty, {} missing)",
                rc.scored, rc.issued, rc.empty, rc.missing
            );
        }
        if let Some((avg, min, max)) = &e.osl {
            let _ = writeln!(out, "    output tokens (avg/min/max): {avg:.1}/{min}/{max}");
        }
    }
    if let Some(avg) = average {
        let _ = writeln!(out, "  Average: {}", py_format_g(avg, 4));
    }
    if entries.iter().any(|e| e.osl_tokenize_s.is_some()) {
        let total: f64 = entries.iter().filter_map(|e| e.osl_tokenize_s).sum();
        let _ = writeln!(out, "  OSL tokenization: {}s", py_format_g(total, 3));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A multiple-choice dataset scored `pass_at_1` through `abcd_extractor`, once.
    fn mcq_job(truth: &[String], total_samples: u64, duration_s: f64) -> ScoringJob<'_> {
        ScoringJob {
            dataset_name: "mcq",
            dataset_type: DatasetType::Accuracy,
            scorer: Scorer::PassAt1,
            extractor: Some(Extractor::Abcd),
            ground_truth_column: None,
            ground_truth: truth,
            expected_turns: &[],
            agentic_turns: 0,
            row_columns: &[],
            num_repeats: 1,
            total_samples,
            duration_s,
        }
    }

    /// A finished run's files, written by hand: scored again from them alone.
    fn run_dir(name: &str, events: &[&str]) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("llm-loadgen-acc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let map = r#"{"performance": {"00": 0}, "mcq": {"a1": 0, "a2": 1, "a3": 2, "a4": 0}}"#;
        std::fs::write(dir.join("sample_idx_map.json"), map).unwrap();
        std::fs::write(dir.join("events.jsonl"), events.join("\n") + "\n").unwrap();
        dir
    }

    fn complete(uuid: &str, data: &str, usage: &str) -> String {
        format!(
            r#"{{"event_type":"sample.complete","timestamp_ns":1,"sample_uuid":"{uuid}","conversation_id":"","turn":null,"data":{data},"worker_id":0{usage}}}"#
        )
    }

    #[test]
    fn a_finished_run_is_scored_again_from_its_event_log_and_idx_map() {
        let lines = [
            r#"{"event_type":"session.started","timestamp_ns":0,"sample_uuid":"","conversation_id":"","turn":null,"data":null}"#.to_string(),
            complete("00", r#"["TextModelOutput","perf",null,null]"#, ""),
            complete("a1", r#"["TextModelOutput",["The answer ","is (A)"],null,null]"#, r#","prompt_tokens":3,"completion_tokens":5"#),
            complete("a2", "null", ""),
            complete("a4", r#"["TextModelOutput","Answer: A",null,null]"#, r#","completion_tokens":2"#),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let dir = run_dir("rescore", &refs);
        let truth = ["choice1".to_string(), "choice2".into(), "choice3".into()];
        let job = mcq_job(&truth, 3, 0.0004);
        let count = |t: &str| Some(t.chars().count() as u32);
        let r = score_run(&dir, &[job], TokenCountSource::Client, Some(&count)).unwrap();
        let e = &r.entries[0];
        // a1 and a4 name choice1 and are right; a2 failed; a3 never completed: 2 of 4.
        assert_eq!(e.score, ScoreValue::Number(Some(0.5)));
        assert_eq!(
            e.response_counts,
            Some(ResponseCounts { issued: 4, scored: 2, empty: 1, missing: 1 })
        );
        let client = e.osl_client.as_ref().unwrap();
        assert_eq!((client.n_samples, client.stat.as_ref().unwrap().total), (2, Num::Int(26)));
        let server = e.osl_server.as_ref().unwrap();
        assert_eq!(server.n_samples, 1, "a4 lacks prompt_tokens: its usage is missing");
        assert_eq!(e.n_missing_usage, 1);
        assert_eq!(e.duration_s, 0.0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_block_read_back_from_accuracy_results_json_is_the_block_the_run_printed() {
        let lines = [
            complete(
                "a1",
                r#"["TextModelOutput","The answer is (A)",null,null]"#,
                r#","prompt_tokens":3,"completion_tokens":5"#,
            ),
            complete(
                "a2",
                r#"["TextModelOutput","Answer: B",null,null]"#,
                r#","prompt_tokens":3,"completion_tokens":2"#,
            ),
            complete("a4", r#"["TextModelOutput","",null,null]"#, ""),
        ];
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let dir = run_dir("block-json", &refs);
        let truth = ["choice1".to_string(), "choice2".into(), "choice3".into()];
        let count = |t: &str| Some(t.chars().count() as u32);
        for primary in [TokenCountSource::Client, TokenCountSource::Server] {
            let job = mcq_job(&truth, 3, 0.0123);
            let r = score_run(&dir, &[job], primary, Some(&count)).unwrap();
            let text = String::from_utf8(to_python_json(&r).unwrap()).unwrap();
            for basis in [TokenCountSource::Client, TokenCountSource::Server] {
                let as_run = AccuracyResults { primary: basis, entries: r.entries.clone() };
                let from_json = accuracy_block_from_json(&text, basis).unwrap();
                assert_eq!(from_json, accuracy_block(&as_run), "{primary:?} run, {basis:?} block");
            }
        }
        assert!(accuracy_block_from_json("{}", TokenCountSource::Client).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A BFCL run's log as the worker writes a tool call into `str(TextModelOutput)`'s last
    /// element: the call is scored without the prose before it, a failed sample counts 0 and
    /// a sample that never completed counts 0 in its row's subset.
    #[test]
    fn a_bfcl_run_is_scored_from_its_tool_calls_by_subset() {
        let dir = std::env::temp_dir().join(format!("llm-loadgen-acc-bfcl-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let map = r#"{"bfcl": {"b1": 0, "b2": 1, "b3": 2, "b4": 1}}"#;
        std::fs::write(dir.join("sample_idx_map.json"), map).unwrap();
        let call = r#"[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"x\": 1}"}}]"#;
        let lines = [
            complete("b1", &format!(r#"["TextModelOutput","Sure.",null,{call}]"#), ""),
            complete("b2", &format!(r#"["TextModelOutput","",null,{call}]"#), ""),
            complete("b3", "null", ""),
        ];
        std::fs::write(dir.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
        let f = r#"[{"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "integer", "description": "x"}}, "required": ["x"]}}]"#;
        let truth = [r#"[{"f": {"x": [1]}}]"#.to_string(), "[]".into(), "[]".into()];
        let columns: Vec<Vec<String>> = ["simple_python", "irrelevance", "live_simple"]
            .iter()
            .map(|s| vec![s.to_string(), f.to_string()])
            .collect();
        let job = ScoringJob {
            dataset_name: "bfcl",
            dataset_type: DatasetType::Accuracy,
            scorer: Scorer::BfclV4,
            extractor: Some(Extractor::FunctionCall),
            ground_truth_column: Some("ground_truth"),
            ground_truth: &truth,
            row_columns: &columns,
            expected_turns: &[],
            agentic_turns: 0,
            num_repeats: 1,
            total_samples: 3,
            duration_s: 0.0,
        };
        let r = score_run(&dir, &[job], TokenCountSource::Client, None).unwrap();
        let e = &r.entries[0];
        // b1 right; b2 called a tool on an irrelevance row; b3 (live_simple, empty truth,
        // no call) right; b4 never completed: an irrelevance 0.
        assert_eq!(e.score, ScoreValue::Number(Some(0.5)));
        let b = e.breakdown.as_ref().unwrap();
        let subsets: Vec<(&str, f64)> =
            b.subset_scores.iter().map(|(s, v)| (s.as_str(), *v)).collect();
        assert_eq!(
            subsets,
            [("simple_python", 100.0), ("irrelevance", 0.0), ("live_simple", 100.0)]
        );
        assert_eq!((b.total_samples, b.issued_samples), (3, 4));
        let text = String::from_utf8(to_python_json(&r).unwrap()).unwrap();
        assert!(text.contains("\"breakdown\": {\n        \"overall_accuracy\": 50.0,"), "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_non_compact_event_log_fails_loudly_naming_the_line() {
        let spaced = r#"{"event_type": "sample.complete", "sample_uuid": "a1"}"#;
        let dir = run_dir("spaced", &[spaced]);
        let truth = ["choice1".to_string()];
        let job = mcq_job(&truth, 1, 0.0);
        let err = score_run(&dir, &[job], TokenCountSource::Client, None).unwrap_err().to_string();
        assert!(err.contains("events.jsonl line 1: not a compact event record"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn scores_print_as_pythons_g_format() {
        let cases = [
            (0.5, 4, "0.5"),
            (2.0 / 3.0, 4, "0.6667"),
            (1.0, 4, "1"),
            (0.0, 4, "0"),
            (12345.0, 4, "1.234e+04"),
            (0.00001234, 4, "1.234e-05"),
            (0.0001234, 4, "0.0001234"),
            (0.012, 3, "0.012"),
            (100.0, 4, "100"),
        ];
        for (v, p, want) in cases {
            assert_eq!(py_format_g(v, p), want, "{v} .{p}g");
        }
    }

    #[test]
    fn a_streamed_output_is_its_chunks_joined_after_the_reasoning() {
        let text =
            |data: &str| output_text(&RawValue::from_string(data.to_string()).unwrap()).unwrap();
        assert_eq!(
            text(r#"["TextModelOutput",["The ans","wer is B"],"think ",null]"#),
            "think The answer is B"
        );
        assert_eq!(text(r#"["TextModelOutput","x",null,null]"#), "x");
        // Tool calls come last, as written (key order kept).
        let calls = r#"[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]"#;
        assert_eq!(text(&format!(r#"["TextModelOutput","",null,{calls}]"#)), calls);
    }

    #[test]
    fn response_counts_split_issued_into_scored_empty_and_missing() {
        let c = |text: &str| Completed {
            uuid: String::new(),
            text: text.into(),
            success: !text.is_empty(),
            prompt_tokens: None,
            completion_tokens: None,
        };
        let (a, b, e) = (c("A"), c("B"), c(""));
        let counts = response_counts(5, &[&a, &b, &e]);
        assert_eq!(counts, ResponseCounts { issued: 5, scored: 2, empty: 1, missing: 2 });
    }

    #[test]
    fn server_osl_keeps_usable_counts_and_counts_missing_usage() {
        let c = |text: &str, p: Option<u32>, n: Option<u32>| Completed {
            uuid: String::new(),
            text: text.into(),
            success: true,
            prompt_tokens: p,
            completion_tokens: n,
        };
        let samples = [c("abc", Some(2), Some(3)), c("x", None, Some(1)), c("", Some(1), Some(0))];
        let refs: Vec<&Completed> = samples.iter().collect();
        let (osl, missing) = server_osl(&refs);
        assert_eq!(missing, 1, "the usage rule: both counts or none");
        assert_eq!(osl.n_samples, 1, "a count below 1 is not recorded");
        assert_eq!(osl.stat.unwrap().max, Num::Int(3));
    }
}
