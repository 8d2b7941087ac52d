//! The summary's goodput blocks (`goodput`, `goodput_<other basis>`) and their report.txt and
//! console lines: `loadgen_coordinator::metrics::goodput` judged each sample; this says it.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use loadgen_coordinator::metrics::{
    goodput, Goodput, Objective, SampleTable, SloMetric, TokenCountSource,
};

/// One objective's outcome, as the summary writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectiveSummary {
    /// `ttft_p99`: the name `--slo` takes.
    pub name: String,
    /// `ttft`, `tpot` or `latency`.
    pub metric: String,
    /// The share of completed samples, in percent, that must meet the bound.
    pub percentile: f64,
    /// The per-sample bound, ns.
    pub bound_ns: u64,
    /// Completed samples that met it.
    pub n_met: u64,
    /// `n_met / n_samples_completed`; `null` when none completed.
    pub fraction_met: Option<f64>,
    /// `fraction_met × 100 ≥ percentile`.
    pub held: bool,
}

/// A run's goodput on one basis, as the summary writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoodputSummary {
    /// The token basis of its TPOT objectives.
    pub basis: TokenCountSource,
    /// Good samples per second of the tracked duration (`duration_ns`); `null` without one.
    pub qps: Option<f64>,
    /// Samples that succeeded and met every objective.
    pub n_good: u64,
    /// Completed samples (failures included, as `n_samples_completed`).
    pub n_completed: u64,
    /// Every objective held.
    pub held: bool,
    /// Per objective, in the order given.
    pub objectives: Vec<ObjectiveSummary>,
}

impl GoodputSummary {
    /// The block of `g` over a run of `duration_ns`.
    pub fn of(g: &Goodput, duration_ns: Option<u64>) -> GoodputSummary {
        let objectives = g
            .objectives
            .iter()
            .map(|o| ObjectiveSummary {
                name: o.objective.name(),
                metric: o.objective.metric.as_str().to_string(),
                percentile: o.objective.percentile,
                bound_ns: o.objective.bound_ns,
                n_met: o.n_met,
                fraction_met: o.fraction_met,
                held: o.held,
            })
            .collect();
        GoodputSummary {
            basis: g.basis,
            qps: g.per_s(duration_ns.map(|ns| ns as f64 / 1e9)),
            n_good: g.n_good,
            n_completed: g.n_completed,
            held: g.held(),
            objectives,
        }
    }

    /// `Goodput (client): 12.50 QPS, 250 of 300 samples met every objective; ttft_p99 ≤ 500 ms:
    /// 99.3% held, …` — the console's line, report.txt's section body.
    pub fn line(&self) -> String {
        let qps = self.qps.map_or("N/A".to_string(), |q| format!("{q:.2} QPS"));
        let mut out = format!(
            "Goodput ({}): {qps}, {} of {} samples met every objective",
            self.basis, self.n_good, self.n_completed
        );
        for o in &self.objectives {
            let met = o.fraction_met.map_or("N/A".to_string(), |f| format!("{:.1}%", f * 100.0));
            let verdict = if o.held { "held" } else { "MISSED" };
            let _ = write!(out, "; {} <= {} ms: {met} {verdict}", o.name, o.bound_ns as f64 / 1e6);
        }
        out
    }
}

/// report.txt's `Goodput` section: one line per basis.
pub fn goodput_section(out: &mut String, blocks: &[&GoodputSummary]) {
    if blocks.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nGoodput (service-level objectives, per sample):");
    for g in blocks {
        let _ = writeln!(out, "  {}", g.line());
    }
}

/// Goodput on the primary basis, then on the other; each `None` when its basis cannot judge
/// a TPOT objective (client: no tokenizer; server: no successful sample carried usage).
pub type GoodputPair = (Option<Goodput>, Option<Goodput>);

/// The run's goodput under `objectives`, from its sample table (a run's, or one replayed from
/// events.jsonl); `None` without objectives.
pub fn goodput_of_run(
    table: &SampleTable,
    objectives: &[Objective],
    primary: TokenCountSource,
    has_tokenizer: bool,
) -> Option<GoodputPair> {
    if objectives.is_empty() {
        return None;
    }
    let tpot = objectives.iter().any(|o| o.metric == SloMetric::Tpot);
    let judged = |basis: TokenCountSource| {
        let counted = match basis {
            TokenCountSource::Client => has_tokenizer,
            TokenCountSource::Server => {
                let mut any = false;
                table.for_each_row(|r| {
                    any |= !r.failed && r.prompt_tokens.is_some() && r.completion_tokens.is_some()
                });
                any
            }
        };
        (!tpot || counted).then(|| goodput(table, objectives, basis))
    };
    Some((judged(primary), judged(primary.other())))
}
