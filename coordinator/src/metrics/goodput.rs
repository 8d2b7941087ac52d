//! Service-level objectives and goodput (`--slo`), as vLLM's benchmark defines goodput:
//! completed samples per second that met every objective, each objective judged per sample
//! (a sample meets `ttft_p99=500ms` when its own TTFT is at most 500 ms). The percentile in an
//! objective's name says how many samples must meet its bound for the objective to hold.

use super::basis::TokenCountSource;
use super::table::{Rows, SampleTable, FLAG_FAILED, FLAG_OUTPUT_EMPTY};
use super::tokens::{tpot_client_ns, tpot_server_ns};
use super::usage::{classify_usage, UsageClass};

const NONE_U32: u32 = u32::MAX;

/// What an objective bounds, per sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SloMetric {
    /// Time to first token: first chunk − issue (streaming runs).
    Ttft,
    /// Time per output token after the first, on the basis judged (streaming runs).
    Tpot,
    /// Latency: completion − issue.
    Latency,
}

impl SloMetric {
    /// The name in `--slo` and the summary.
    pub fn as_str(self) -> &'static str {
        match self {
            SloMetric::Ttft => "ttft",
            SloMetric::Tpot => "tpot",
            SloMetric::Latency => "latency",
        }
    }
}

/// One objective: at least `percentile` % of the completed samples have `metric` ≤ `bound_ns`.
#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    pub metric: SloMetric,
    /// In (0, 100]: `ttft_p99` is 99.
    pub percentile: f64,
    /// The per-sample bound, ns.
    pub bound_ns: u64,
}

impl Objective {
    /// `ttft_p99`, `tpot_p99.9`: the name `--slo` takes.
    pub fn name(&self) -> String {
        format!("{}_p{}", self.metric.as_str(), self.percentile)
    }
}

/// One objective's outcome over a run.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectiveOutcome {
    pub objective: Objective,
    /// Completed samples that met the bound (a failed sample never does).
    pub n_met: u64,
    /// `n_met` over the completed samples; `None` when none completed.
    pub fraction_met: Option<f64>,
    /// At least `percentile` % of the completed samples met the bound.
    pub held: bool,
}

/// The goodput of a run on one token basis.
#[derive(Debug, Clone, PartialEq)]
pub struct Goodput {
    pub basis: TokenCountSource,
    /// Completed samples (failed ones included, as `n_samples_completed`).
    pub n_completed: u64,
    /// Samples that succeeded and met every objective.
    pub n_good: u64,
    /// Per objective, in the order given.
    pub objectives: Vec<ObjectiveOutcome>,
}

impl Goodput {
    /// Every objective held (and some sample completed).
    pub fn held(&self) -> bool {
        self.n_completed > 0 && self.objectives.iter().all(|o| o.held)
    }

    /// Good samples per second over `window_s`; `None` without a window.
    pub fn per_s(&self, window_s: Option<f64>) -> Option<f64> {
        window_s.filter(|&s| s > 0.0).map(|s| self.n_good as f64 / s)
    }
}

/// A sample's value of `metric`, ns: `Some(None)` when it has nothing to bound (a stream whose
/// only tokens came in its first chunk has no TPOT), `None` when the value is unknown (no first
/// chunk, or no token count on this basis), which never meets a bound.
fn value_ns(
    table: &Rows<'_>,
    i: usize,
    metric: SloMetric,
    basis: TokenCountSource,
) -> Option<Option<f64>> {
    let first = table.first_chunk_ns[i];
    match metric {
        SloMetric::Latency => {
            Some(Some(table.complete_ns[i].saturating_sub(table.issued_ns[i]) as f64))
        }
        SloMetric::Ttft => {
            (first != u64::MAX).then(|| Some(first.saturating_sub(table.issued_ns[i]) as f64))
        }
        SloMetric::Tpot => {
            if first == u64::MAX {
                return None;
            }
            let span = table.complete_ns[i].saturating_sub(first);
            match basis {
                TokenCountSource::Client => {
                    let tokens = table.tpot_tokens_client[i];
                    (tokens != NONE_U32).then(|| tpot_client_ns(span, tokens))
                }
                TokenCountSource::Server => {
                    let of = |v: u32| (v != NONE_U32).then_some(v);
                    let (prompt, completion) =
                        (of(table.prompt_tokens[i]), of(table.completion_tokens[i]));
                    let empty = table.flags[i] & FLAG_OUTPUT_EMPTY != 0;
                    match classify_usage(prompt, completion, empty) {
                        UsageClass::Usable => Some(tpot_server_ns(span, completion.unwrap_or(0))),
                        _ => None,
                    }
                }
            }
        }
    }
}

/// Judges every completed sample of `table` against `objectives` on `basis`: a pure function of
/// the sample table, so a run and `report DIR` (which replays events.jsonl into the same table)
/// give the same figures.
pub fn goodput(table: &SampleTable, objectives: &[Objective], basis: TokenCountSource) -> Goodput {
    let mut met = vec![0u64; objectives.len()];
    let mut n_good = 0;
    table.for_each_chunk(|t| {
        for i in 0..t.len() {
            if t.flags[i] & FLAG_FAILED != 0 {
                continue;
            }
            let mut all = true;
            for (o, count) in objectives.iter().zip(&mut met) {
                let ok = match value_ns(&t, i, o.metric, basis) {
                    Some(None) => true,
                    Some(Some(v)) => v <= o.bound_ns as f64,
                    None => false,
                };
                *count += u64::from(ok);
                all &= ok;
            }
            n_good += u64::from(all);
        }
    });
    let n_completed = table.len() as u64;
    let objectives = objectives
        .iter()
        .zip(met)
        .map(|(o, n_met)| {
            let fraction_met = (n_completed > 0).then(|| n_met as f64 / n_completed as f64);
            // Integer form of fraction ≥ percentile / 100, free of rounding at the boundary.
            let held = n_completed > 0
                && (n_met as f64) * 100.0 >= o.percentile * n_completed as f64 - 1e-9;
            ObjectiveOutcome { objective: o.clone(), n_met, fraction_met, held }
        })
        .collect();
    Goodput { basis, n_completed, n_good, objectives }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::table::SampleRow;

    fn row(ttft_ms: u64, latency_ms: u64, tokens_after_first: u32, completion: u32) -> SampleRow {
        SampleRow {
            issued_ns: 1_000,
            first_chunk_ns: Some(1_000 + ttft_ms * 1_000_000),
            complete_ns: 1_000 + latency_ms * 1_000_000,
            tpot_tokens_client: Some(tokens_after_first),
            prompt_tokens: Some(5),
            completion_tokens: Some(completion),
            ..SampleRow::default()
        }
    }

    fn objective(metric: SloMetric, percentile: f64, bound_ms: u64) -> Objective {
        Objective { metric, percentile, bound_ns: bound_ms * 1_000_000 }
    }

    #[test]
    fn a_sample_is_good_when_it_meets_every_bound_and_failures_never_are() {
        let mut table = SampleTable::with_capacity(4);
        // TTFT 10 ms, latency 110 ms: 100 ms over 10 tokens after the first (client TPOT
        // 10 ms) and over 11 - 1 completion tokens (server TPOT 10 ms).
        table.push(&row(10, 110, 10, 11));
        // TTFT 30 ms misses a 20 ms bound.
        table.push(&row(30, 130, 10, 11));
        // 100 ms over 5 client tokens (20 ms) but 21 - 1 server tokens (5 ms).
        table.push(&row(10, 110, 5, 21));
        table.push(&SampleRow { failed: true, ..row(1, 2, 1, 2) });
        let objectives =
            [objective(SloMetric::Ttft, 50.0, 20), objective(SloMetric::Tpot, 50.0, 15)];
        let client = goodput(&table, &objectives, TokenCountSource::Client);
        assert_eq!((client.n_completed, client.n_good), (4, 1));
        let met: Vec<u64> = client.objectives.iter().map(|o| o.n_met).collect();
        assert_eq!(met, [2, 2]);
        assert!(client.held(), "2 of 4 is the 50th percentile");
        let server = goodput(&table, &objectives, TokenCountSource::Server);
        assert_eq!(server.n_good, 2);
        assert_eq!(server.objectives[1].n_met, 3);
        assert_eq!(server.per_s(Some(2.0)), Some(1.0));
        let strict = goodput(&table, &[objective(SloMetric::Latency, 99.0, 200)], server.basis);
        assert_eq!(strict.objectives[0].n_met, 3);
        assert!(!strict.held(), "3 of 4 is under 99 %");
    }

    #[test]
    fn goodput_falls_as_the_objectives_tighten() {
        let mut table = SampleTable::with_capacity(50);
        for i in 0..50 {
            table.push(&row(5 + i, 100 + 2 * i, 10, 11));
        }
        let good = |ttft_ms: u64, latency_ms: u64| {
            let o = [
                objective(SloMetric::Ttft, 90.0, ttft_ms),
                objective(SloMetric::Latency, 90.0, latency_ms),
            ];
            goodput(&table, &o, TokenCountSource::Client).n_good
        };
        let loosest = good(1_000, 1_000);
        assert_eq!(loosest, 50);
        let mut last = loosest;
        for (ttft, latency) in [(40, 1_000), (40, 150), (20, 150), (20, 120), (5, 120), (4, 120)] {
            let now = good(ttft, latency);
            assert!(now <= last, "({ttft}, {latency}) ms: {now} > {last}");
            last = now;
        }
        assert_eq!(last, 0, "no sample meets a TTFT bound under every TTFT");
    }

    #[test]
    fn a_stream_without_later_tokens_meets_tpot_and_one_without_counts_does_not() {
        let mut table = SampleTable::with_capacity(2);
        table.push(&row(10, 10, 0, 1));
        table.push(&SampleRow {
            tpot_tokens_client: None,
            completion_tokens: None,
            ..row(10, 50, 0, 0)
        });
        let tpot = [objective(SloMetric::Tpot, 50.0, 1)];
        assert_eq!(goodput(&table, &tpot, TokenCountSource::Client).n_good, 1);
        assert_eq!(goodput(&table, &tpot, TokenCountSource::Server).n_good, 1);
    }
}
