//! The live view's text, as pure functions of snapshots: rates, the ETA, durations and the
//! lines the terminal view and the plain progress line show.

use loadgen_wire::FailureKind;

use super::stats::{Phase, Quantiles, Snapshot};

/// Snapshots the view keeps for "QPS now": enough to span the last second at 4 a second.
pub const RATE_HISTORY: usize = 8;
/// "QPS now" looks this far back (or as far as the history goes).
pub const RATE_WINDOW_NS: u64 = 1_000_000_000;

/// What the view knows of the run besides the snapshots.
#[derive(Debug, Clone, Default)]
pub struct RunFacts {
    pub model: String,
    /// The endpoints as shown (no userinfo, no key).
    pub endpoint: String,
    pub expected: u64,
    pub warmup: u64,
    /// The cap on tracking, ns from its start.
    pub cap_ns: Option<u64>,
    pub streaming: bool,
    /// Whether the run counts tokens with a client tokenizer: without one the client basis
    /// has no figures, shown as `-`, not as zeros.
    pub client_tokens: bool,
    /// Whether the client tokenizer counts only after the last sample (no live tokenizer
    /// thread): its figures are then shown as `deferred`, not as zeros.
    pub client_tokens_deferred: bool,
}

/// When the client basis's figures exist during the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCounting {
    /// No client tokenizer: no client figures at all.
    Off,
    /// Live tokenizer threads count while the run goes on.
    Live,
    /// The tokenizer counts after the last sample, so the live figures are not zeros but
    /// not yet known.
    Deferred,
}

impl RunFacts {
    /// How this run counts the client basis.
    pub fn client_counting(&self) -> ClientCounting {
        match (self.client_tokens, self.client_tokens_deferred) {
            (false, _) => ClientCounting::Off,
            (true, false) => ClientCounting::Live,
            (true, true) => ClientCounting::Deferred,
        }
    }
}

/// The figures both views show, computed once per draw.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// The phase as the run is living it (`shown_phase`).
    pub phase: Phase,
    pub qps_now: f64,
    pub qps_overall: f64,
    /// Requests on the wire: written and not yet answered.
    pub in_flight: u64,
    /// Samples handed to a worker that it has not written yet (a closed loop's queue, or a full
    /// pool's backlog).
    pub queued: u64,
    pub lag: Option<Quantiles>,
    pub eta_ns: Option<u64>,
    pub tps_server: f64,
    pub tps_client: f64,
}

/// Completed samples a second over the snapshots of the last `RATE_WINDOW_NS` (the oldest one
/// that is at least that old, else the oldest kept); 0 until two snapshots differ in time.
pub fn qps_now(history: &[(u64, u64)]) -> f64 {
    let Some(&(t_last, c_last)) = history.last() else { return 0.0 };
    let from = history
        .iter()
        .rev()
        .find(|(t, _)| t_last.saturating_sub(*t) >= RATE_WINDOW_NS)
        .or(history.first());
    match from {
        Some(&(t0, c0)) if t_last > t0 => (c_last - c0) as f64 * 1e9 / (t_last - t0) as f64,
        _ => 0.0,
    }
}

/// Seconds of tracking so far, as ns (0 before tracking starts).
pub fn tracked_ns(snap: &Snapshot) -> u64 {
    if snap.tracking_start_ns == 0 {
        0
    } else {
        snap.at_ns.saturating_sub(snap.tracking_start_ns)
    }
}

/// A count over the tracked time, per second.
pub fn per_second(count: u64, elapsed_ns: u64) -> f64 {
    if elapsed_ns == 0 {
        0.0
    } else {
        count as f64 * 1e9 / elapsed_ns as f64
    }
}

/// Time left: the samples not yet answered at the recent rate (the overall one while the
/// recent is 0), and never past the cap.
pub fn eta_ns(
    left: u64,
    qps_now: f64,
    qps_overall: f64,
    elapsed_ns: u64,
    cap_ns: Option<u64>,
) -> Option<u64> {
    let rate = if qps_now > 0.0 { qps_now } else { qps_overall };
    let by_rate = (rate > 0.0).then(|| (left as f64 / rate * 1e9) as u64);
    let by_cap = cap_ns.map(|cap| cap.saturating_sub(elapsed_ns));
    match (by_rate, by_cap) {
        (Some(r), Some(c)) => Some(r.min(c)),
        (r, c) => r.or(c),
    }
}

/// A duration for people: `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
pub fn duration(ns: u64) -> String {
    let v = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", v / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", v / 1e6)
    } else {
        format!("{:.2} s", v / 1e9)
    }
}

/// An ETA: `42 s`, `3m 05s`, `2h 03m`.
pub fn eta(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    match s {
        0..=99 => format!("{s} s"),
        100..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s / 60 % 60),
    }
}

/// `p50 1.20 ms  p99 3.40 ms`, or `-` before the first sample.
pub fn quantiles(q: Option<Quantiles>) -> String {
    match q {
        Some(q) => format!("p50 {}  p99 {}", duration(q.p50_ns), duration(q.p99_ns)),
        None => "-".to_string(),
    }
}

/// `3 (timeout 2, http_status 1)`, kinds in wire order; `0` without failures.
pub fn failures(snap: &Snapshot) -> String {
    let kinds: Vec<String> = FailureKind::ALL
        .iter()
        .filter(|k| snap.failed_by_kind[**k as usize] > 0)
        .map(|k| format!("{} {}", k.as_str(), snap.failed_by_kind[*k as usize]))
        .collect();
    if kinds.is_empty() {
        snap.failed.to_string()
    } else {
        format!("{} ({})", snap.failed, kinds.join(", "))
    }
}

/// Whole numbers for people: `12,345`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn rate(r: f64) -> String {
    count(r.round() as u64)
}

/// The phase to show: a drain whose samples still wait in the workers' queues is still the
/// phase that issued them (a closed loop hands its last samples over long before it sends them).
pub fn shown_phase(snap: &Snapshot, queued: u64) -> Phase {
    if snap.phase == Phase::Draining && queued > 0 {
        snap.issuing_phase
    } else {
        snap.phase
    }
}

/// "in flight N", with ", queued M" when samples wait in a worker.
fn in_flight(f: &Figures) -> String {
    match f.queued {
        0 => format!("in flight {}", count(f.in_flight)),
        q => format!("in flight {}, queued {}", count(f.in_flight), count(q)),
    }
}

/// The terminal view's header: tool, model, endpoint, phase.
pub fn header(facts: &RunFacts, f: &Figures) -> String {
    format!("llm-loadgen  {}  model {}  endpoint {}", f.phase.as_str(), facts.model, facts.endpoint)
}

/// The terminal view's text below its bar, one line per group.
pub fn detail_lines(facts: &RunFacts, snap: &Snapshot, f: &Figures) -> Vec<String> {
    let mut lines = vec![format!(
        "QPS now {}  overall {}   {}   failed {}",
        rate(f.qps_now),
        rate(f.qps_overall),
        in_flight(f),
        failures(snap)
    )];
    if facts.streaming {
        lines.push(format!("TTFT     {}", quantiles(snap.ttft)));
        lines.push(format!(
            "TPOT     {} (server)   {} (client)",
            quantiles(snap.tpot_server),
            client_or_dash(facts, || quantiles(snap.tpot_client))
        ));
    }
    lines.push(format!("latency  {}", quantiles(snap.latency)));
    lines.push(format!(
        "TPS      server {}  client {}   issue lag {}",
        rate(f.tps_server),
        client_or_dash(facts, || rate(f.tps_client)),
        quantiles(f.lag)
    ));
    if facts.warmup > 0 || snap.accuracy_done > 0 {
        lines.push(format!(
            "warm-up {}/{}   accuracy samples {}",
            count(snap.warmup_done),
            count(facts.warmup),
            count(snap.accuracy_done)
        ));
    }
    lines
}

/// A client-basis figure; `-` for a run without a client tokenizer and `deferred` for one that
/// counts after the last sample (its live count is not zero, only not yet made).
fn client_or_dash(facts: &RunFacts, figure: impl FnOnce() -> String) -> String {
    match facts.client_counting() {
        ClientCounting::Off => "-".to_string(),
        ClientCounting::Live => figure(),
        ClientCounting::Deferred => "deferred".to_string(),
    }
}

/// The plain progress line (no terminal): the same main figures on one line.
pub fn plain_line(facts: &RunFacts, snap: &Snapshot, f: &Figures) -> String {
    let pct = if facts.expected == 0 {
        0.0
    } else {
        snap.completed as f64 * 100.0 / facts.expected as f64
    };
    let mut line = format!(
        "progress: {} {}/{} ({pct:.0}%), failed {}, QPS now {} overall {}, {}",
        f.phase.as_str(),
        snap.completed,
        facts.expected,
        failures(snap),
        rate(f.qps_now),
        rate(f.qps_overall),
        in_flight(f)
    );
    if facts.streaming {
        line.push_str(&format!(
            ", TTFT {}, TPOT {}",
            quantiles(snap.ttft),
            quantiles(snap.tpot_server)
        ));
    }
    line.push_str(&format!(
        ", latency {}, issue lag {}, TPS server {} client {}, ETA {}",
        quantiles(snap.latency),
        quantiles(f.lag),
        rate(f.tps_server),
        client_or_dash(facts, || rate(f.tps_client)),
        f.eta_ns.map_or_else(|| "-".to_string(), eta)
    ));
    line
}

/// `line` cut to `width` columns (the view redraws at the terminal's width of the moment, so
/// a narrowed terminal never wraps a line and leaves a stale copy above the redraw).
pub fn fit(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        line.to_string()
    } else {
        line.chars().take(width.saturating_sub(1)).chain(std::iter::once('…')).collect()
    }
}

/// Rows a frame whose rows were `columns` wide takes once a reflowing terminal re-wraps it at
/// `width`: each row a line of its own (`LineTerm` breaks them), split where it is too long.
pub fn rows_after_resize(columns: &[usize], width: usize) -> usize {
    columns.iter().map(|&c| c.div_ceil(width.max(1)).max(1)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qps_now_spans_the_last_second() {
        // 4 snapshots a second; 1,000 QPS for 2 s, then 3,000 QPS for the last second.
        let mut h = Vec::new();
        let (mut t, mut c) = (0u64, 0u64);
        for step in 0..12u64 {
            h.push((t, c));
            t += 250_000_000;
            c += if step >= 7 { 750 } else { 250 };
        }
        let last = &h[h.len() - RATE_HISTORY..];
        assert!((qps_now(last) - 3_000.0).abs() < 1.0, "{}", qps_now(last));
        assert_eq!(qps_now(&h[..1]), 0.0);
        assert_eq!(qps_now(&[]), 0.0);
    }

    #[test]
    fn eta_uses_the_recent_rate_and_never_passes_the_cap() {
        let s = 1_000_000_000u64;
        assert_eq!(eta_ns(1_000, 100.0, 50.0, 0, None), Some(10 * s));
        assert_eq!(eta_ns(1_000, 0.0, 50.0, 0, None), Some(20 * s));
        assert_eq!(eta_ns(1_000, 100.0, 50.0, 55 * s, Some(60 * s)), Some(5 * s));
        assert_eq!(eta_ns(1_000, 0.0, 0.0, 10 * s, Some(60 * s)), Some(50 * s));
        assert_eq!(eta_ns(1_000, 0.0, 0.0, 0, None), None);
    }

    #[test]
    fn durations_and_counts_read_as_people_write_them() {
        let cases = [
            (850, "850 ns"),
            (12_345, "12.3 µs"),
            (4_560_000, "4.56 ms"),
            (1_230_000_000, "1.23 s"),
        ];
        for (ns, text) in cases {
            assert_eq!(duration(ns), text);
        }
        assert_eq!(eta(42_000_000_000), "42 s");
        assert_eq!(eta(185_000_000_000), "3m 05s");
        assert_eq!(eta(7_380_000_000_000), "2h 03m");
        assert_eq!(count(0), "0");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(100), "100");
    }

    #[test]
    fn failures_are_listed_by_kind() {
        let mut snap = Snapshot { failed: 3, ..Snapshot::default() };
        snap.failed_by_kind[FailureKind::HttpStatus as usize] = 1;
        snap.failed_by_kind[FailureKind::Timeout as usize] = 2;
        assert_eq!(failures(&snap), "3 (http_status 1, timeout 2)");
        assert_eq!(failures(&Snapshot::default()), "0");
    }

    #[test]
    fn the_plain_line_carries_the_main_figures() {
        let facts = RunFacts { expected: 200, streaming: true, ..RunFacts::default() };
        let q = Some(Quantiles { p50_ns: 1_200_000, p99_ns: 3_400_000 });
        let snap = Snapshot { completed: 50, ttft: q, latency: q, ..Snapshot::default() };
        let f = Figures {
            qps_now: 99.6,
            qps_overall: 80.0,
            in_flight: 7,
            eta_ns: Some(2_000_000_000),
            ..Figures::default()
        };
        let line = plain_line(&facts, &snap, &f);
        for part in [
            "50/200 (25%)",
            "QPS now 100 overall 80",
            "in flight 7",
            "TTFT p50 1.20 ms  p99 3.40 ms",
            "ETA 2 s",
            "TPS server 0 client -",
        ] {
            assert!(line.contains(part), "{part:?} not in {line:?}");
        }
        let counted = RunFacts { client_tokens: true, ..facts.clone() };
        let f = Figures { tps_client: 41.0, ..f };
        assert!(plain_line(&counted, &snap, &f).contains("client 41"), "with a tokenizer");
    }

    #[test]
    fn a_drain_with_samples_queued_in_a_worker_is_still_the_phase_that_issued_them() {
        // A closed loop of 2 hands all 30 samples over at once: 2 on the wire, 28 queued.
        let snap = Snapshot {
            phase: Phase::Draining,
            issuing_phase: Phase::Performance,
            ..Snapshot::default()
        };
        assert_eq!(shown_phase(&snap, 28), Phase::Performance);
        assert_eq!(shown_phase(&snap, 0), Phase::Draining, "all on the wire: the drain");
        let stopping = Snapshot { phase: Phase::Stopping, ..snap };
        assert_eq!(shown_phase(&stopping, 28), Phase::Stopping, "a cap or interrupt stops");
        let facts = RunFacts { expected: 30, ..RunFacts::default() };
        let f = Figures {
            phase: shown_phase(&snap, 28),
            in_flight: 2,
            queued: 28,
            ..Figures::default()
        };
        let line = plain_line(&facts, &snap, &f);
        assert!(line.starts_with("progress: performance 0/30"), "{line}");
        assert!(line.contains("in flight 2, queued 28"), "{line}");
        assert!(detail_lines(&facts, &snap, &f)[0].contains("in flight 2, queued 28"));
        assert!(header(&facts, &f).contains("  performance  "));
    }

    #[test]
    fn client_figures_counted_after_the_run_show_as_deferred_not_zero() {
        let cases = [
            (false, false, ClientCounting::Off, "-"),
            (false, true, ClientCounting::Off, "-"),
            (true, false, ClientCounting::Live, "41"),
            (true, true, ClientCounting::Deferred, "deferred"),
        ];
        let q = Some(Quantiles { p50_ns: 1_000_000, p99_ns: 2_000_000 });
        let snap = Snapshot { tpot_client: q, ..Snapshot::default() };
        let f = Figures { tps_client: 41.0, ..Figures::default() };
        for (client_tokens, client_tokens_deferred, counting, shown) in cases {
            let facts = RunFacts {
                streaming: true,
                client_tokens,
                client_tokens_deferred,
                ..RunFacts::default()
            };
            assert_eq!(facts.client_counting(), counting);
            let line = plain_line(&facts, &snap, &f);
            assert!(line.contains(&format!("client {shown},")), "{shown:?} in {line:?}");
            let lines = detail_lines(&facts, &snap, &f);
            let tps = lines.iter().find(|l| l.starts_with("TPS")).unwrap();
            assert!(tps.contains(&format!("client {shown} ")), "{shown:?} in {tps:?}");
            let tpot = lines.iter().find(|l| l.starts_with("TPOT")).unwrap();
            let want =
                if counting == ClientCounting::Live { "p50 1.00 ms  p99 2.00 ms" } else { shown };
            assert!(tpot.ends_with(&format!("{want} (client)")), "{want:?} in {tpot:?}");
        }
    }

    #[test]
    fn a_narrowed_terminal_splits_only_the_lines_too_long_for_it() {
        // A blank row, a 119-column bar line and a 40-column line, narrowed to 50 columns.
        assert_eq!(rows_after_resize(&[0, 119, 40], 50), 1 + 3 + 1);
        assert_eq!(rows_after_resize(&[0, 119, 40], 130), 3);
    }

    #[test]
    fn lines_fit_the_width_they_are_drawn_at() {
        assert_eq!(fit("abcdef", 10), "abcdef");
        assert_eq!(fit("abcdef", 4), "abc…");
        assert_eq!(fit("µµµµµ", 3).chars().count(), 3);
    }
}
