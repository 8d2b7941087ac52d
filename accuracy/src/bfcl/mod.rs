//! `bfcl_v4`: the reference's BFCL v4 single-turn scorer (`evaluation/bfcl_v4_scorer.py`).
//! Each response is scored by its row's subset: irrelevance subsets by whether it made no
//! tool call, `live_relevance` by whether it made one, the rest by bfcl-eval's AST checker
//! (`ast`); then per-subset means, per-category aggregates and the breakdown the reference
//! attaches to its `accuracy_scores` entry.

mod ast;
mod convert;
mod value;

use ast::{Call, Language};

use super::funcall::has_tool_calls;
use super::pyvalue::{json_loads, PyValue};
use super::rouge::numpy_sum;
use super::{AccuracyError, Extractor, Sample};

/// The reference's `CATEGORY_MAP` for the single-turn categories, in its order.
pub const CATEGORIES: [(&str, &[&str]); 3] = [
    (
        "non_live",
        &[
            "simple_python",
            "simple_java",
            "simple_javascript",
            "multiple",
            "parallel",
            "parallel_multiple",
        ],
    ),
    ("live", &["live_simple", "live_multiple", "live_parallel", "live_parallel_multiple"]),
    ("hallucination", &["irrelevance", "live_irrelevance"]),
];

/// Single-turn subsets in no category: scored, reported apart, left out of the aggregates.
pub const UNSCORED_SUBSETS: [&str; 1] = ["live_relevance"];

/// The single-turn subsets, in the order the reference builds its table: the categories' in
/// order, then the unscored ones.
pub const SINGLE_TURN_SUBSETS: [&str; 13] = [
    "simple_python",
    "simple_java",
    "simple_javascript",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "irrelevance",
    "live_irrelevance",
    "live_relevance",
];

const SIMPLE_AST_SUBSETS: [&str; 3] = ["simple_python", "simple_java", "simple_javascript"];

/// The per-subset and per-category accuracy the reference writes as an entry's `breakdown`
/// (percentages rounded to two places, maps in the reference's key order).
#[derive(Debug, Clone, PartialEq)]
pub struct Breakdown {
    pub overall_accuracy: f64,
    pub normalized_single_turn_score: f64,
    pub category_scores: Vec<(String, f64)>,
    pub subset_scores: Vec<(String, f64)>,
    pub unscored_subsets: Vec<(String, f64)>,
    /// Completed samples scored.
    pub total_samples: usize,
    /// Issued samples (the denominator: a missing sample counts as wrong).
    pub issued_samples: usize,
}

impl Breakdown {
    /// The breakdown of a run with nothing to score.
    pub fn zero(issued: usize) -> Breakdown {
        Breakdown {
            overall_accuracy: 0.0,
            normalized_single_turn_score: 0.0,
            category_scores: Vec::new(),
            subset_scores: Vec::new(),
            unscored_subsets: Vec::new(),
            total_samples: 0,
            issued_samples: issued,
        }
    }
}

/// Python's `round(x, 2)`.
fn round2(x: f64) -> f64 {
    format!("{x:.2}").parse().unwrap_or(x)
}

/// The tool calls of a response as the reference scores them: its `str(TextModelOutput)` ends
/// with the tool calls' JSON array when it had any, and the reference scores that array alone
/// (`get_scoring_outputs`); otherwise the whole text.
pub fn scoring_text(output: &str) -> &str {
    if output.ends_with(']') {
        for (i, _) in output.match_indices("[{") {
            let tail = &output[i..];
            if has_tool_calls(tail) {
                return tail;
            }
        }
    }
    output
}

fn language(subset: &str) -> Language {
    match subset {
        "simple_java" => Language::Java,
        "simple_javascript" => Language::JavaScript,
        _ => Language::Python,
    }
}

/// The extracted calls as the checker takes them (`[{name: arguments}]`); JSON-string
/// arguments decoded, `{}` when they are not JSON.
fn checker_calls(extracted: &PyValue) -> Vec<Call> {
    let PyValue::List(items) = extracted else { return Vec::new() };
    let mut calls = Vec::with_capacity(items.len());
    for item in items {
        let PyValue::Dict(entries) = item else { continue };
        let Some(name) = value::get(entries, "name") else { continue };
        let args = match value::get(entries, "arguments") {
            None => PyValue::Dict(Vec::new()),
            Some(PyValue::Str(u)) => {
                json_loads(&value::text(u)).unwrap_or(PyValue::Dict(Vec::new()))
            }
            Some(other) => other.clone(),
        };
        calls.push((name.clone(), args));
    }
    calls
}

/// `_score_ast`: 1 or 0; `Err` where the reference raises, as text.
fn score_ast(
    extracted: &str,
    ground_truth: &str,
    functions: &str,
    subset: &str,
) -> Result<f64, String> {
    let output = json_loads(extracted).unwrap_or(PyValue::List(Vec::new()));
    let has_calls = output.is_truthy();
    let Some(expected) = json_loads(ground_truth) else { return Ok(0.0) };
    if !expected.is_truthy() {
        return Ok(if has_calls { 0.0 } else { 1.0 });
    }
    let PyValue::List(possible) = &expected else {
        return Err("the ground truth is not a JSON list of calls".into());
    };
    let functions = match json_loads(functions) {
        Some(PyValue::List(f)) => f,
        _ => return Err("func_description is not a JSON list of functions".into()),
    };
    let calls = checker_calls(&output);
    if calls.iter().any(|(name, _)| matches!(name, PyValue::List(_) | PyValue::Dict(_))) {
        return Err("a call's name is a list or an object (unhashable in Python)".into());
    }
    let valid = ast::check(&functions, &calls, possible, language(subset), subset)?;
    Ok(if valid { 1.0 } else { 0.0 })
}

/// One response's score.
fn score_sample(extractor: Option<Extractor>, sample: &Sample<'_>) -> Result<f64, AccuracyError> {
    let [subset, functions] = [0, 1].map(|i| sample.columns.get(i).map_or("", String::as_str));
    let output = scoring_text(sample.output);
    if CATEGORIES[2].1.contains(&subset) {
        return Ok(if has_tool_calls(output) { 0.0 } else { 1.0 });
    }
    if UNSCORED_SUBSETS.contains(&subset) {
        return Ok(if has_tool_calls(output) { 1.0 } else { 0.0 });
    }
    let extracted = match extractor {
        Some(e) => e.extract(output)?.unwrap_or_else(|| "[]".to_string()),
        None => output.to_string(),
    };
    score_ast(&extracted, sample.ground_truth, functions, subset).map_err(|why| {
        AccuracyError::BfclRaises { sample: sample.index, subset: subset.into(), why }
    })
}

/// The scores of each subset, in the order the subsets first appear.
type BySubset = Vec<(String, Vec<f64>)>;

fn push(by_subset: &mut BySubset, subset: &str, score: f64) {
    match by_subset.iter_mut().find(|(s, _)| s == subset) {
        Some((_, scores)) => scores.push(score),
        None => by_subset.push((subset.to_string(), vec![score])),
    }
}

fn mean(values: &[f64]) -> f64 {
    numpy_sum(values) / values.len() as f64
}

/// The category aggregates: `live` weighted by sample count, `non_live` hierarchical (the
/// simple_* subsets first averaged into one), `hallucination` an unweighted mean.
fn categories(by_subset: &BySubset) -> Vec<(String, f64)> {
    let result = |s: &str| by_subset.iter().find(|(n, _)| n == s).map(|(_, v)| (mean(v), v.len()));
    let mut out = Vec::new();
    for (category, subsets) in CATEGORIES {
        let present: Vec<&str> = subsets.iter().copied().filter(|s| result(s).is_some()).collect();
        if present.is_empty() {
            continue;
        }
        let value = match category {
            "live" => {
                let total: usize = present.iter().filter_map(|s| result(s)).map(|r| r.1).sum();
                let weighted = present
                    .iter()
                    .filter_map(|s| result(s))
                    .fold(0.0, |acc, (m, n)| acc + m * n as f64);
                weighted / total as f64
            }
            "non_live" => {
                let simple: Vec<f64> =
                    SIMPLE_AST_SUBSETS.iter().filter_map(|s| result(s)).map(|r| r.0).collect();
                let mut top: Vec<f64> =
                    if simple.is_empty() { vec![] } else { vec![mean(&simple)] };
                top.extend(
                    present
                        .iter()
                        .filter(|s| !SIMPLE_AST_SUBSETS.contains(s))
                        .filter_map(|s| result(s))
                        .map(|r| r.0),
                );
                mean(&top)
            }
            _ => mean(&present.iter().filter_map(|s| result(s)).map(|r| r.0).collect::<Vec<_>>()),
        };
        out.push((category.to_string(), value));
    }
    out
}

/// Scores a BFCL dataset: `completed` in the event log's order (each with its row's
/// `[subset, func_description]`), then `missing` (the subsets of issued samples that never
/// completed, each a 0); the overall accuracy (a fraction) and the breakdown.
pub fn score(
    extractor: Option<Extractor>,
    completed: &[Sample<'_>],
    missing: &[&str],
) -> Result<(f64, Breakdown), AccuracyError> {
    if completed.is_empty() {
        return Ok((0.0, Breakdown::zero(missing.len())));
    }
    let mut by_subset: BySubset = Vec::new();
    let mut all = Vec::with_capacity(completed.len() + missing.len());
    for sample in completed {
        let s = score_sample(extractor, sample)?;
        push(&mut by_subset, sample.columns.first().map_or("", String::as_str), s);
        all.push(s);
    }
    for subset in missing {
        push(&mut by_subset, subset, 0.0);
        all.push(0.0);
    }
    let category_scores = categories(&by_subset);
    let normalized = if category_scores.is_empty() {
        0.0
    } else {
        mean(&category_scores.iter().map(|c| c.1).collect::<Vec<_>>())
    };
    let overall = mean(&all);
    let pct = |v: f64| round2(v * 100.0);
    let breakdown = Breakdown {
        overall_accuracy: pct(overall),
        normalized_single_turn_score: pct(normalized),
        category_scores: category_scores.into_iter().map(|(c, v)| (c, pct(v))).collect(),
        unscored_subsets: by_subset
            .iter()
            .filter(|(s, _)| UNSCORED_SUBSETS.contains(&s.as_str()))
            .map(|(s, v)| (s.clone(), pct(mean(v))))
            .collect(),
        subset_scores: by_subset.into_iter().map(|(s, v)| (s, pct(mean(&v)))).collect(),
        total_samples: completed.len(),
        issued_samples: all.len(),
    };
    Ok((overall, breakdown))
}

#[cfg(test)]
mod tests;
