//! ROUGE-1, ROUGE-2, ROUGE-L and ROUGE-Lsum as google's `rouge_score` 0.1.2 computes them with
//! `use_stemmer=True` (what HF `evaluate`'s rouge metric calls), and the reference's
//! `RougeScorer` aggregation: the mean F-measure over the scored pairs, times 100, rounded to
//! 4 places and written as a string.

use std::collections::HashMap;

use super::porter;

/// The F-measures of one (prediction, reference) pair; `rouge_score`'s `Score.fmeasure`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RougePair {
    pub rouge1: f64,
    pub rouge2: f64,
    pub rouge_l: f64,
    pub rouge_lsum: f64,
}

/// `rouge_score.tokenize.tokenize` with the Porter stemmer: lowercase, every run of characters
/// outside `[a-z0-9]` becomes a space, split, and tokens longer than 3 letters are stemmed.
pub fn tokenize(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    lower
        .split(|c: char| !c.is_ascii_lowercase() && !c.is_ascii_digit())
        .filter(|t| !t.is_empty())
        .map(|t| if t.len() > 3 { porter::stem(t) } else { t.to_string() })
        .filter(|t| !t.is_empty())
        .collect()
}

/// The four F-measures for one pair, `reference` being rouge_score's `target`.
pub fn score_pair(prediction: &str, reference: &str) -> RougePair {
    let target = tokenize(reference);
    let predicted = tokenize(prediction);
    RougePair {
        rouge1: score_ngrams(&target, &predicted, 1),
        rouge2: score_ngrams(&target, &predicted, 2),
        rouge_l: score_lcs(&target, &predicted),
        rouge_lsum: score_lsum(reference, prediction),
    }
}

fn fmeasure(precision: f64, recall: f64) -> f64 {
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

fn ngram_counts(tokens: &[String], n: usize) -> HashMap<&[String], usize> {
    let mut counts = HashMap::new();
    if tokens.len() >= n {
        for gram in tokens.windows(n) {
            *counts.entry(gram).or_insert(0) += 1;
        }
    }
    counts
}

fn score_ngrams(target: &[String], predicted: &[String], n: usize) -> f64 {
    let target_counts = ngram_counts(target, n);
    let predicted_counts = ngram_counts(predicted, n);
    let overlap: usize = target_counts
        .iter()
        .map(|(gram, count)| (*count).min(predicted_counts.get(gram).copied().unwrap_or(0)))
        .sum();
    let target_total: usize = target_counts.values().sum();
    let predicted_total: usize = predicted_counts.values().sum();
    let precision = overlap as f64 / predicted_total.max(1) as f64;
    let recall = overlap as f64 / target_total.max(1) as f64;
    fmeasure(precision, recall)
}

fn lcs_table(reference: &[String], candidate: &[String]) -> Vec<Vec<usize>> {
    let mut table = vec![vec![0usize; candidate.len() + 1]; reference.len() + 1];
    for i in 1..=reference.len() {
        for j in 1..=candidate.len() {
            table[i][j] = if reference[i - 1] == candidate[j - 1] {
                table[i - 1][j - 1] + 1
            } else {
                table[i - 1][j].max(table[i][j - 1])
            };
        }
    }
    table
}

/// The LCS length with two rows of the table, so a long response does not hold
/// `target × predicted` cells (ROUGE-L needs only the length; ROUGE-Lsum reads the full table,
/// but per sentence pair).
fn lcs_length(reference: &[String], candidate: &[String]) -> usize {
    let mut prev = vec![0usize; candidate.len() + 1];
    let mut row = vec![0usize; candidate.len() + 1];
    for r in reference {
        for j in 1..=candidate.len() {
            row[j] = if *r == candidate[j - 1] { prev[j - 1] + 1 } else { prev[j].max(row[j - 1]) };
        }
        std::mem::swap(&mut prev, &mut row);
    }
    prev[candidate.len()]
}

fn score_lcs(target: &[String], predicted: &[String]) -> f64 {
    if target.is_empty() || predicted.is_empty() {
        return 0.0;
    }
    let lcs = lcs_length(target, predicted);
    fmeasure(lcs as f64 / predicted.len() as f64, lcs as f64 / target.len() as f64)
}

/// Indices into `reference` of one longest common subsequence, read back as rouge_score's
/// `_backtrack_norec` does (the tie-break decides which tokens count for ROUGE-Lsum).
fn lcs_indices(reference: &[String], candidate: &[String]) -> Vec<usize> {
    let table = lcs_table(reference, candidate);
    let (mut i, mut j) = (reference.len(), candidate.len());
    let mut out = Vec::new();
    while i > 0 && j > 0 {
        if reference[i - 1] == candidate[j - 1] {
            out.push(i - 1);
            i -= 1;
            j -= 1;
        } else if table[i][j - 1] > table[i - 1][j] {
            j -= 1;
        } else {
            i -= 1;
        }
    }
    out.reverse();
    out
}

/// Sentences are the non-empty `\n`-separated lines (rouge_score with `split_summaries=False`).
fn sentence_tokens(text: &str) -> Vec<Vec<String>> {
    text.split('\n').filter(|s| !s.is_empty()).map(tokenize).collect()
}

/// Summary-level LCS (ROUGE paper §3.2) with rouge_score's guard against double counting.
fn score_lsum(reference: &str, prediction: &str) -> f64 {
    let ref_sents = sentence_tokens(reference);
    let can_sents = sentence_tokens(prediction);
    let m: usize = ref_sents.iter().map(Vec::len).sum();
    let n: usize = can_sents.iter().map(Vec::len).sum();
    if ref_sents.is_empty() || can_sents.is_empty() || m == 0 || n == 0 {
        return 0.0;
    }
    let mut ref_counts: HashMap<&str, usize> = HashMap::new();
    let mut can_counts: HashMap<&str, usize> = HashMap::new();
    for token in ref_sents.iter().flatten() {
        *ref_counts.entry(token).or_insert(0) += 1;
    }
    for token in can_sents.iter().flatten() {
        *can_counts.entry(token).or_insert(0) += 1;
    }
    let mut hits = 0usize;
    for sent in &ref_sents {
        let mut union: Vec<usize> = can_sents.iter().flat_map(|c| lcs_indices(sent, c)).collect();
        union.sort_unstable();
        union.dedup();
        for token in union.iter().map(|&i| sent[i].as_str()) {
            let (Some(c), Some(r)) = (can_counts.get_mut(token), ref_counts.get_mut(token)) else {
                continue;
            };
            if *c > 0 && *r > 0 {
                hits += 1;
                *c -= 1;
                *r -= 1;
            }
        }
    }
    fmeasure(hits as f64 / n as f64, hits as f64 / m as f64)
}

/// numpy's pairwise summation of float64 (`np.sum`/`np.mean`), so a mean lands on the same bits
/// and rounds to the same 4th decimal.
pub fn numpy_sum(values: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let n = values.len();
    if n < 8 {
        return values.iter().fold(-0.0, |acc, v| acc + v);
    }
    if n <= BLOCK {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&values[..8]);
        let mut i = 8;
        while i < n - n % 8 {
            for (k, acc) in r.iter_mut().enumerate() {
                *acc += values[i + k];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for v in &values[i..] {
            res += v;
        }
        return res;
    }
    let mut half = n / 2;
    half -= half % 8;
    numpy_sum(&values[..half]) + numpy_sum(&values[half..])
}

/// `f"{round(np.mean(v) * 100, 4)}"`: numpy rounds by scaling, rint (ties to even) and
/// unscaling, and the float prints as Python's shortest repr (`95.0`, not `95`).
pub fn percent_string(values: &[f64]) -> String {
    let mean = numpy_sum(values) / values.len() as f64;
    let rounded = (mean * 100.0 * 10_000.0).round_ties_even() / 10_000.0;
    loadgen_py::float_repr::repr(rounded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rouge_fixture::ROUGE_PAIRS;

    /// Each fixed pair's four F-measures equal `rouge_score.rouge_scorer.RougeScorer(
    /// ["rouge1","rouge2","rougeL","rougeLsum"], use_stemmer=True).score(reference, prediction)`
    /// to 1e-6 (values from tests/assets/accuracy/rouge_expected.py, run once).
    #[test]
    fn rouge_equals_rouge_score_on_100_fixed_pairs() {
        assert_eq!(ROUGE_PAIRS.len(), 100);
        for (i, (prediction, reference, want)) in ROUGE_PAIRS.iter().enumerate() {
            let got = score_pair(prediction, reference);
            let got = [got.rouge1, got.rouge2, got.rouge_l, got.rouge_lsum];
            for (k, name) in ["rouge1", "rouge2", "rougeL", "rougeLsum"].iter().enumerate() {
                assert!(
                    (got[k] - want[k]).abs() <= 1e-6,
                    "pair {i} {name}: got {} want {} ({prediction:?} vs {reference:?})",
                    got[k],
                    want[k]
                );
            }
        }
    }

    #[test]
    fn rouge_of_empty_texts_is_zero() {
        let zero = RougePair { rouge1: 0.0, rouge2: 0.0, rouge_l: 0.0, rouge_lsum: 0.0 };
        assert_eq!(score_pair("", "the cat sat"), zero);
        assert_eq!(score_pair("the cat sat", ""), zero);
        assert_eq!(score_pair("", ""), zero);
        assert_eq!(score_pair("!!! ...", "?"), zero);
    }

    #[test]
    fn rouge_stems_so_running_matches_runs() {
        let got = score_pair("Running", "runs");
        assert_eq!(got.rouge1, 1.0);
        assert_eq!(tokenize("The Runners, running!"), ["the", "runner", "run"]);
    }

    #[test]
    fn percent_string_rounds_and_prints_as_python() {
        // Expected strings from `f"{round(np.mean(v) * 100, 4)}"` with numpy 2.4.6, run once.
        assert_eq!(percent_string(&[1.0, 1.0]), "100.0");
        assert_eq!(percent_string(&[0.0]), "0.0");
        assert_eq!(percent_string(&[2.0 / 3.0]), "66.6667");
        assert_eq!(percent_string(&[0.5, 0.25, 0.125]), "29.1667");
        // Not "12.3457": numpy scales then rints, so the binary value below the tie rounds down.
        assert_eq!(percent_string(&[0.123_456_5]), "12.3456");
    }

    /// The reference's headline strings over all 100 pairs, and numpy's pairwise sum to the bit.
    #[test]
    fn rouge_aggregate_over_100_pairs_equals_the_reference_strings() {
        use crate::rouge_fixture::{ROUGE1_NP_SUM, ROUGE_AGGREGATE};
        let pairs: Vec<RougePair> = ROUGE_PAIRS.iter().map(|(p, r, _)| score_pair(p, r)).collect();
        let rouge1: Vec<f64> = ROUGE_PAIRS.iter().map(|(_, _, want)| want[0]).collect();
        assert_eq!(numpy_sum(&rouge1), ROUGE1_NP_SUM);
        let got = [
            percent_string(&pairs.iter().map(|p| p.rouge1).collect::<Vec<_>>()),
            percent_string(&pairs.iter().map(|p| p.rouge2).collect::<Vec<_>>()),
            percent_string(&pairs.iter().map(|p| p.rouge_l).collect::<Vec<_>>()),
            percent_string(&pairs.iter().map(|p| p.rouge_lsum).collect::<Vec<_>>()),
        ];
        assert_eq!(got, ROUGE_AGGREGATE);
    }
}
