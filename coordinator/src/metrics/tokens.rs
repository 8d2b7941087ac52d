//! Token series of each basis: client tokenizer counts and server usage counts.

use super::column::Column;
use super::table::{Rows, SampleTable, FLAG_FAILED, FLAG_OUTPUT_EMPTY};
use super::usage::{classify_usage, UsageClass};

const NONE: u32 = u32::MAX;

/// Raw values of one basis's ISL, OSL and TPOT series, in table order (spilling as the
/// table's columns do).
#[derive(Debug)]
pub struct TokenSeries {
    /// Input sequence lengths.
    pub isl: Column<u64>,
    /// Output sequence lengths.
    pub osl: Column<u64>,
    /// Time per output token, ns (streaming only).
    pub tpot_ns: Column<f64>,
    /// Output tokens per content chunk, over the samples with both (streaming only): 1 when
    /// each chunk carries one token, so the gaps between chunks are inter-token latencies.
    pub tokens_per_chunk: Column<f64>,
}

impl TokenSeries {
    /// Empty series that spill as `table`'s columns do.
    fn for_table(table: &SampleTable) -> TokenSeries {
        TokenSeries {
            isl: table.series_column("isl"),
            osl: table.series_column("osl"),
            tpot_ns: table.series_column("tpot_ns"),
            tokens_per_chunk: table.series_column("tokens_per_chunk"),
        }
    }
}

/// A streamed sample's client TPOT, ns a token: the span from its first chunk to its end
/// over the tokens after the first chunk's (the tokenizer's count of them); none without any.
pub fn tpot_client_ns(span_ns: u64, tokens_after_first: u32) -> Option<f64> {
    (tokens_after_first > 0).then(|| span_ns as f64 / f64::from(tokens_after_first))
}

/// A streamed sample's server TPOT, ns a token, as LoadGen counts it: the span over the
/// usage's completion tokens less the first; none for one token or fewer, and none below
/// 1 ns (no server series records a value below 1).
pub fn tpot_server_ns(span_ns: u64, completion_tokens: u32) -> Option<f64> {
    (completion_tokens > 1)
        .then(|| span_ns as f64 / f64::from(completion_tokens - 1))
        .filter(|&tpot| tpot >= 1.0)
}

/// `osl / n_chunks` of a sample with both.
fn tokens_per_chunk(osl: u32, n_chunks: u32) -> Option<f64> {
    (osl != NONE && osl > 0 && n_chunks != NONE && n_chunks > 0)
        .then(|| f64::from(osl) / f64::from(n_chunks))
}

/// How the successful samples' server usage classified.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageTally {
    /// Samples with both counts.
    pub usable: u64,
    /// Samples lacking a count, with some output.
    pub missing: u64,
    /// Samples lacking a count, with no output at all.
    pub missing_empty_output: u64,
}

impl UsageTally {
    /// `n_samples_missing_usage`: every successful sample lacking usage.
    pub fn missing_total(&self) -> u64 {
        self.missing + self.missing_empty_output
    }

    /// No successful sample had usable counts: the server blocks are `null`.
    pub fn is_empty(&self) -> bool {
        self.usable == 0
    }

    /// Some samples with output lacked usage: the server blocks are partial. A sample
    /// with no output at all has no client OSL either, so it does not make the server
    /// basis less complete than the client's.
    pub fn is_partial(&self) -> bool {
        self.usable > 0 && self.missing > 0
    }
}

/// Client − server OSL over samples that have both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OslPaired {
    /// Samples with both counts.
    pub count: u64,
    /// Σ client OSL over them.
    pub client_total: u64,
    /// Σ server OSL over them.
    pub server_total: u64,
}

impl OslPaired {
    /// Mean per-sample client − server difference, `None` without pairs.
    pub fn mean(&self) -> Option<f64> {
        let diff = i128::from(self.client_total) - i128::from(self.server_total);
        (self.count > 0).then(|| super::stats::div_round_signed(diff, u128::from(self.count)))
    }

    /// Σ client / Σ server, `None` without pairs or when the server total is 0.
    pub fn ratio(&self) -> Option<f64> {
        (self.count > 0 && self.server_total > 0).then(|| {
            super::stats::div_round(u128::from(self.client_total), u128::from(self.server_total))
        })
    }
}

/// Client series as the reference records them: ISL for every sample (failed ones
/// too, it is counted at issue), OSL and TPOT for successful samples with output.
pub fn client_tokens(table: &SampleTable, streaming: bool, has_tokenizer: bool) -> TokenSeries {
    let mut out = TokenSeries::for_table(table);
    if !has_tokenizer {
        return out;
    }
    table.for_each_chunk(|t| client_rows(&t, streaming, &mut out));
    out
}

fn client_rows(t: &Rows<'_>, streaming: bool, out: &mut TokenSeries) {
    for i in 0..t.len() {
        if t.isl_client[i] != NONE {
            out.isl.push_spilling(u64::from(t.isl_client[i]));
        }
        if t.flags[i] & FLAG_FAILED != 0 {
            continue;
        }
        if t.osl_client[i] != NONE {
            out.osl.push_spilling(u64::from(t.osl_client[i]));
        }
        if let Some(ratio) = tokens_per_chunk(t.osl_client[i], t.n_chunks[i]) {
            out.tokens_per_chunk.push_spilling(ratio);
        }
        let tokens = t.tpot_tokens_client[i];
        let first = t.first_chunk_ns[i];
        if streaming && first != u64::MAX && tokens != NONE {
            let span = t.complete_ns[i].saturating_sub(first);
            if let Some(tpot) = tpot_client_ns(span, tokens) {
                out.tpot_ns.push_spilling(tpot);
            }
        }
    }
}

/// Server series, usage classification and the OSL pairing. Only usable samples feed
/// the series; no server series records a value below 1; server TPOT follows LoadGen:
/// (complete − first chunk) / (completion_tokens − 1), skipped when completion_tokens ≤ 1.
pub fn server_tokens(table: &SampleTable, streaming: bool) -> (TokenSeries, UsageTally, OslPaired) {
    let mut out = TokenSeries::for_table(table);
    let mut tally = UsageTally::default();
    let mut paired = OslPaired::default();
    table.for_each_chunk(|t| server_rows(&t, streaming, (Some(&mut out), &mut tally, &mut paired)));
    (out, tally, paired)
}

/// A usable sample's server ISL, OSL, tokens per chunk and (streamed) TPOT.
fn server_series(
    t: &Rows<'_>,
    i: usize,
    streaming: bool,
    (prompt, completion): (u32, u32),
    out: &mut TokenSeries,
) {
    if prompt >= 1 {
        out.isl.push_spilling(u64::from(prompt));
    }
    if completion >= 1 {
        out.osl.push_spilling(u64::from(completion));
    }
    if let Some(ratio) = tokens_per_chunk(completion, t.n_chunks[i]) {
        out.tokens_per_chunk.push_spilling(ratio);
    }
    let first = t.first_chunk_ns[i];
    if streaming && first != u64::MAX {
        let span = t.complete_ns[i].saturating_sub(first);
        if let Some(tpot) = tpot_server_ns(span, completion) {
            out.tpot_ns.push_spilling(tpot);
        }
    }
}

/// The successful samples' usage classification and the OSL pairing, without the series.
pub fn server_usage(table: &SampleTable) -> (UsageTally, OslPaired) {
    let (mut tally, mut paired) = (UsageTally::default(), OslPaired::default());
    table.for_each_chunk(|t| server_rows(&t, false, (None, &mut tally, &mut paired)));
    (tally, paired)
}

fn server_rows(
    t: &Rows<'_>,
    streaming: bool,
    (mut out, tally, paired): (Option<&mut TokenSeries>, &mut UsageTally, &mut OslPaired),
) {
    for i in 0..t.len() {
        let flags = t.flags[i];
        if flags & FLAG_FAILED != 0 {
            continue;
        }
        let prompt = (t.prompt_tokens[i] != NONE).then_some(t.prompt_tokens[i]);
        let completion = (t.completion_tokens[i] != NONE).then_some(t.completion_tokens[i]);
        let (prompt, completion) =
            match classify_usage(prompt, completion, flags & FLAG_OUTPUT_EMPTY != 0) {
                UsageClass::Usable => (prompt.unwrap_or(0), completion.unwrap_or(0)),
                UsageClass::Missing => {
                    tally.missing += 1;
                    continue;
                }
                UsageClass::MissingEmptyOutput => {
                    tally.missing_empty_output += 1;
                    continue;
                }
            };
        tally.usable += 1;
        if t.osl_client[i] != NONE {
            paired.count += 1;
            paired.client_total += u64::from(t.osl_client[i]);
            paired.server_total += u64::from(completion);
        }
        if let Some(out) = out.as_deref_mut() {
            server_series(t, i, streaming, (prompt, completion), out);
        }
    }
}
