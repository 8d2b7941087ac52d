//! report.txt's `Agentic` section (after the other additions) and the console's line.

use std::fmt::Write as _;

use loadgen_coordinator::metrics::TokenCountSource;

use super::AgenticSummary;
use crate::SeriesSummary;

const NS_TO_MS: f64 = 1e-6;
const NS_TO_S: f64 = 1e-9;

/// Grid index of p50 and p99 (`PERCENTILE_KEYS`: "99.9", "99.0", … "50.0" is index 7).
const P50: usize = 7;
const P99: usize = 1;

fn ms(block: Option<&SeriesSummary>, index: usize) -> String {
    block.map_or_else(|| "N/A".into(), |b| format!("{:.2}", b.percentiles[index] * NS_TO_MS))
}

/// `failed_by_kind` as `timeout 1, turn_aborted 2`.
fn kinds(a: &AgenticSummary) -> String {
    let kinds: Vec<String> =
        a.turns.failed_by_kind.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
    if kinds.is_empty() {
        String::new()
    } else {
        format!(" ({})", kinds.join(", "))
    }
}

/// The section: conversations, turns, the dropped-turn gate, then one row per turn number
/// (TPOT on the primary basis `basis`).
pub(crate) fn agentic_section(out: &mut String, a: &AgenticSummary, basis: TokenCountSource) {
    let c = &a.conversations;
    let t = &a.turns;
    let _ = writeln!(out, "----------------- Agentic -----------------");
    let _ = writeln!(
        out,
        "Conversations: {} started, {} completed, {} failed, {} abandoned",
        c.started, c.completed, c.failed, c.abandoned
    );
    let _ = writeln!(
        out,
        "Turns: {} issued, {} succeeded, {} failed{}, {} abandoned",
        t.issued,
        t.succeeded,
        t.failed,
        kinds(a),
        t.abandoned
    );
    let _ = writeln!(
        out,
        "Dropped turns: {} (never sent: an earlier turn of their conversation failed; the \
         reference's compliance gate requires 0)",
        a.dropped_turns
    );
    if let Some(turns) = &c.turns_per_conversation {
        let _ = writeln!(
            out,
            "Turns per conversation: min {}, median {:.0}, max {}",
            turns.min.as_f64(),
            turns.median,
            turns.max.as_f64()
        );
    }
    let d = c.duration_ns.as_ref();
    let s = |v: Option<f64>| v.map_or_else(|| "N/A".into(), |v| format!("{:.3}", v * NS_TO_S));
    let _ = writeln!(
        out,
        "Conversation duration (completed conversations): p50 {} s, p99 {} s, max {} s",
        s(d.map(|d| d.percentiles[P50])),
        s(d.map(|d| d.percentiles[P99])),
        s(d.map(|d| d.max.as_f64()))
    );
    turn_rows(out, a, basis);
    let _ = writeln!(out);
}

/// One row per turn number: its counts and p50/p99 of TTFT, TPOT and latency in ms.
fn turn_rows(out: &mut String, a: &AgenticSummary, basis: TokenCountSource) {
    let _ = writeln!(
        out,
        "By turn (ms; over the turns sent, failures included in latency; TPOT on the {basis} \
         basis):"
    );
    let _ = writeln!(
        out,
        "  {:>5} {:>7} {:>7} {:>7} {:>7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11}",
        "turn",
        "issued",
        "n",
        "failed",
        "dropped",
        "abandoned",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "latency p50",
        "latency p99"
    );
    for s in &a.by_turn {
        let (ttft, tpot, latency) = (s.ttft.as_ref(), s.tpot.as_ref(), s.latency.as_ref());
        let _ = writeln!(
            out,
            "  {:>5} {:>7} {:>7} {:>7} {:>7} {:>9} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11}",
            s.turn,
            s.n_issued,
            s.n_samples,
            s.n_failed,
            s.n_dropped,
            s.n_abandoned,
            ms(ttft, P50),
            ms(ttft, P99),
            ms(tpot, P50),
            ms(tpot, P99),
            ms(latency, P50),
            ms(latency, P99)
        );
    }
}

/// The console's line: conversations and dropped turns at a glance.
pub(crate) fn agentic_line(a: &AgenticSummary) -> String {
    let c = &a.conversations;
    format!(
        "Agentic: {} conversations ({} completed, {} failed, {} abandoned), {} turns, {} \
         dropped",
        c.started, c.completed, c.failed, c.abandoned, a.turns.issued, a.dropped_turns
    )
}
