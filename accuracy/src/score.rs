//! The scorers, as the reference's `evaluation/scoring.py` computes a dataset's score from the
//! completed responses and the number of samples it issued.

use serde_json::Value;

use super::rouge::{self, percent_string};
use super::{bfcl, py_strip, AccuracyError, Breakdown, Extractor, Sample, Scorer};

/// The reference's ROUGE result: each F-measure mean as `f"{round(mean * 100, 4)}"`, the
/// character count of the scored predictions, and how many were scored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RougeReport {
    pub rouge1: String,
    pub rouge2: String,
    pub rouge_l: String,
    pub rouge_lsum: String,
    pub gen_len: String,
    pub gen_num: usize,
}

/// A dataset's score as the reference reports it in `accuracy_results.json`.
#[derive(Debug, Clone, PartialEq)]
pub enum ScoreValue {
    /// `None` where the reference writes `null` (nothing issued, or a non-finite mean).
    Number(Option<f64>),
    Rouge(RougeReport),
}

/// The score and the `n_repeats` the scorer derives.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    pub score: ScoreValue,
    pub n_repeats: usize,
    /// The per-subset breakdown a scorer attaches to its entry (`bfcl_v4`).
    pub breakdown: Option<Breakdown>,
}

/// `pass_at_1`: 1 when the extracted answer equals the ground truth exactly; no answer is 0.
pub fn pass_at_1(value: Option<&str>, ground_truth: &str) -> f64 {
    if value == Some(ground_truth) {
        1.0
    } else {
        0.0
    }
}

/// `string_match`: 1 when both, stripped of surrounding whitespace, are equal.
pub fn string_match(value: &str, ground_truth: &str) -> f64 {
    if py_strip(value) == py_strip(ground_truth) {
        1.0
    } else {
        0.0
    }
}

impl Scorer {
    /// Scores a dataset: `completed` are the responses that arrived, `issued` the samples sent
    /// (repeats included), `unit_samples` the dataset's row count. `rouge` and
    /// `shopify_category_f1` ignore the extractor, as the reference does.
    pub fn score(
        self,
        extractor: Option<Extractor>,
        completed: &[Sample<'_>],
        issued: usize,
        unit_samples: usize,
    ) -> Result<Scored, AccuracyError> {
        self.score_with_missing(extractor, completed, (issued, &[]), unit_samples)
    }

    /// `score`, told `missing`: the `extra_columns` of each issued sample that never completed
    /// (`bfcl_v4` counts each as a 0 in its row's subset).
    pub fn score_with_missing(
        self,
        extractor: Option<Extractor>,
        completed: &[Sample<'_>],
        (issued, missing): (usize, &[&[String]]),
        unit_samples: usize,
    ) -> Result<Scored, AccuracyError> {
        match self {
            Scorer::BfclV4 => {
                let subsets: Vec<&str> =
                    missing.iter().map(|c| c.first().map_or("", String::as_str)).collect();
                let (overall, breakdown) = bfcl::score(extractor, completed, &subsets)?;
                let scored = breakdown.issued_samples;
                let n_repeats = if scored == 0 { 1 } else { (scored / unit_samples.max(1)).max(1) };
                Ok(Scored {
                    score: ScoreValue::Number(Some(overall)),
                    n_repeats,
                    breakdown: Some(breakdown),
                })
            }
            Scorer::PassAt1 | Scorer::StringMatch => {
                self.score_per_sample(extractor, completed, issued, unit_samples)
            }
            Scorer::Rouge => score_rouge(completed),
            Scorer::ShopifyCategoryF1 => score_shopify(completed, unit_samples),
            Scorer::AgenticInferenceInline => Err(AccuracyError::WholeConversations),
        }
    }

    /// The base scorer: per-sample scores summed over the completed samples, divided by the
    /// issued count, so a lost sample counts as wrong.
    fn score_per_sample(
        self,
        extractor: Option<Extractor>,
        completed: &[Sample<'_>],
        issued: usize,
        unit_samples: usize,
    ) -> Result<Scored, AccuracyError> {
        if issued == 0 {
            return Ok(Scored { score: ScoreValue::Number(None), n_repeats: 0, breakdown: None });
        }
        if unit_samples == 0 {
            return Err(AccuracyError::EmptyDataset { scorer: self.name() });
        }
        let n_repeats = issued / unit_samples;
        let mut scores = Vec::with_capacity(completed.len());
        for sample in completed {
            let extracted = match extractor {
                Some(e) => e.extract(sample.output)?,
                None => Some(sample.output.to_string()),
            };
            scores.push(match self {
                Scorer::StringMatch => match &extracted {
                    Some(v) => string_match(v, sample.ground_truth),
                    None => return Err(AccuracyError::NoAnswer { sample: sample.index }),
                },
                _ => pass_at_1(extracted.as_deref(), sample.ground_truth),
            });
        }
        let mean = rouge::numpy_sum(&scores) / issued as f64;
        let score = if completed.is_empty() { Some(0.0) } else { mean.is_finite().then_some(mean) };
        Ok(Scored { score: ScoreValue::Number(score), n_repeats, breakdown: None })
    }
}

/// `rouge`: each response stripped and split into one sentence a line, scored against its
/// ground truth prepared the same way; means over the completed responses (not the issued).
fn score_rouge(completed: &[Sample<'_>]) -> Result<Scored, AccuracyError> {
    if completed.is_empty() {
        return Err(AccuracyError::NothingToScore { scorer: "rouge" });
    }
    let mut per_type: [Vec<f64>; 4] = Default::default();
    let mut gen_len = 0usize;
    for sample in completed {
        let prediction = sentence_lines(sample.output);
        let reference = sentence_lines(sample.ground_truth);
        gen_len += prediction.chars().count();
        let pair = rouge::score_pair(&prediction, &reference);
        for (values, v) in
            per_type.iter_mut().zip([pair.rouge1, pair.rouge2, pair.rouge_l, pair.rouge_lsum])
        {
            values.push(v);
        }
    }
    let [r1, r2, rl, rlsum] = per_type.map(|v| percent_string(&v));
    let report = RougeReport {
        rouge1: r1,
        rouge2: r2,
        rouge_l: rl,
        rouge_lsum: rlsum,
        gen_len: gen_len.to_string(),
        gen_num: completed.len(),
    };
    Ok(Scored { score: ScoreValue::Rouge(report), n_repeats: 1, breakdown: None })
}

/// The reference's `postprocess_text`: strip, then one sentence a line (`nltk.sent_tokenize`).
/// Punkt's trained English model is not reproduced. As Punkt, a sentence ends after `!` or
/// `?` (and any closing quotes or brackets) followed by whitespace; after `.` only when an
/// uppercase letter or digit follows, which stands in for the model's abbreviation list
/// (`e.g. the` stays one sentence). Only ROUGE-Lsum and `gen_len` depend on the breaks.
pub fn sentence_lines(text: &str) -> String {
    let text = py_strip(text);
    let mut out = String::with_capacity(text.len());
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        out.push(chars[i]);
        if matches!(chars[i], '.' | '!' | '?') {
            let mut j = i + 1;
            while j < chars.len() && matches!(chars[j], '"' | '\'' | ')' | ']' | '”' | '’') {
                out.push(chars[j]);
                j += 1;
            }
            let mut k = j;
            while k < chars.len() && py_is_space_char(chars[k]) {
                k += 1;
            }
            let starts_sentence = |c: char| c.is_uppercase() || c.is_ascii_digit();
            let next_ok = chars[i] != '.' || chars.get(k).is_some_and(|&c| starts_sentence(c));
            if k > j && k < chars.len() && next_ok {
                out.push('\n');
                i = k;
                continue;
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

fn py_is_space_char(c: char) -> bool {
    super::py_is_space(c)
}

const CATEGORY_SEPARATOR: &str = " > ";
const PRED_CATEGORY_PAD: &str = "<|__PRED_CATEGORY_PAD__|>";

/// pydantic's lax `bool` from JSON: `true`/`false`, `0`/`1`, `0.0`/`1.0`, or one of its strings.
fn lax_bool(value: &Value) -> bool {
    match value {
        Value::Bool(_) => true,
        Value::Number(n) => n.as_f64().is_some_and(|f| f == 0.0 || f == 1.0),
        Value::String(s) => {
            ["0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"]
                .iter()
                .any(|w| s.eq_ignore_ascii_case(w))
        }
        _ => false,
    }
}

/// The `category` of a response that validates as the reference's `ProductMetadata`
/// (`category: str`, `brand: str`, `is_secondhand: bool`, no other keys), stripped.
pub fn parse_category(response: &str) -> Option<String> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(response) else {
        return None;
    };
    let fields_ok = map.len() == 3
        && matches!(map.get("brand"), Some(Value::String(_)))
        && map.get("is_secondhand").is_some_and(lax_bool);
    match map.get("category") {
        Some(Value::String(category)) if fields_ok => Some(py_strip(category).to_string()),
        _ => None,
    }
}

/// `shopify_category_f1`: hierarchical F1 over all completed responses. Levels match from the
/// root until the first difference; an unparsable response is a pad path as deep as the truth.
fn score_shopify(completed: &[Sample<'_>], unit_samples: usize) -> Result<Scored, AccuracyError> {
    if unit_samples == 0 {
        return Err(AccuracyError::EmptyDataset { scorer: "shopify_category_f1" });
    }
    let (mut hits, mut predicted_len, mut true_len) = (0usize, 0usize, 0usize);
    for sample in completed {
        let truth = py_strip(sample.ground_truth);
        let predicted = parse_category(sample.output).unwrap_or_else(|| {
            vec![PRED_CATEGORY_PAD; truth.split(CATEGORY_SEPARATOR).count()]
                .join(CATEGORY_SEPARATOR)
        });
        let p: Vec<&str> = predicted.split(CATEGORY_SEPARATOR).map(py_strip).collect();
        let t: Vec<&str> = truth.split(CATEGORY_SEPARATOR).map(py_strip).collect();
        hits += p.iter().zip(&t).take_while(|(a, b)| a == b).count();
        predicted_len += p.len();
        true_len += t.len();
    }
    let hp = if predicted_len > 0 { hits as f64 / predicted_len as f64 } else { 0.0 };
    let hr = if true_len > 0 { hits as f64 / true_len as f64 } else { 0.0 };
    let f1 = if hp + hr == 0.0 { 0.0 } else { 2.0 * (hp * hr) / (hp + hr) };
    let n_repeats = completed.len() / unit_samples;
    Ok(Scored { score: ScoreValue::Number(Some(f1)), n_repeats, breakdown: None })
}
