//! The aggregator's side of the live view: HdrHistograms and counters updated as samples
//! complete, and a compact `Snapshot` published to the view's `Board` at most every
//! `PUBLISH_EVERY_NS`, without ever waiting on the view.

use crate::metrics::tokens::{tpot_client_ns, tpot_server_ns};
use std::sync::{Arc, Mutex};

use hdrhistogram::Histogram;
use loadgen_wire::FailureKind;

/// How often the aggregator publishes a snapshot at most (the view draws 4 times a second).
pub const PUBLISH_EVERY_NS: u64 = 250_000_000;

/// The live histograms' range: 1 µs to 1 hour, 2 significant digits (1% buckets). A value past
/// the top is counted at the top.
const HIST_LOW_NS: u64 = 1_000;
const HIST_HIGH_NS: u64 = 3_600_000_000_000;
const HIST_SIGFIG: u8 = 2;

/// Failure kinds, counted by their wire value.
pub const FAILURE_KINDS: usize = FailureKind::ALL.len();

/// Where the run is, as the view names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Phase {
    /// Workers are connecting.
    #[default]
    Starting,
    WarmUp,
    Performance,
    Accuracy,
    /// Every sample was handed to the workers: waiting for their answers.
    Draining,
    /// A cap, an interrupt or a failure ended the run: what is in flight is abandoned.
    Stopping,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::WarmUp => "warm-up",
            Phase::Performance => "performance",
            Phase::Accuracy => "accuracy",
            Phase::Draining => "draining",
            Phase::Stopping => "stopping",
        }
    }
}

/// p50 and p99 of a live histogram, in ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quantiles {
    pub p50_ns: u64,
    pub p99_ns: u64,
}

/// What the view draws, as of `at_ns` (CLOCK_MONOTONIC). Counts are of tracked samples.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Snapshot {
    pub at_ns: u64,
    /// 0 until performance tracking starts.
    pub tracking_start_ns: u64,
    pub phase: Phase,
    /// The last phase that issued samples (warm-up, performance or accuracy): what the run is
    /// still doing while a drain's samples wait in the workers' queues.
    pub issuing_phase: Phase,
    /// Tracked samples answered, failures included.
    pub completed: u64,
    pub failed: u64,
    /// Failed tracked samples by `FailureKind` wire value.
    pub failed_by_kind: [u64; FAILURE_KINDS],
    pub warmup_done: u64,
    pub accuracy_done: u64,
    pub ttft: Option<Quantiles>,
    pub tpot_server: Option<Quantiles>,
    pub tpot_client: Option<Quantiles>,
    pub latency: Option<Quantiles>,
    /// Output tokens of successful tracked samples: the endpoint's usage, and the client's
    /// count (which arrives later, from the tokenizer pool).
    pub tokens_server: u64,
    pub tokens_client: u64,
}

/// The one place a snapshot waits for the view: a mutex the aggregator only ever `try_lock`s.
#[derive(Debug, Default)]
pub struct Board {
    slot: Mutex<Snapshot>,
}

impl Board {
    /// Replaces the snapshot unless the view is reading it right now (then the next publish,
    /// 250 ms on, carries the news). Never waits.
    pub fn publish(&self, snap: &Snapshot) -> bool {
        match self.slot.try_lock() {
            Ok(mut slot) => {
                *slot = *snap;
                true
            }
            Err(_) => false,
        }
    }

    /// The latest snapshot (the view's side; it holds the lock only to copy).
    pub fn read(&self) -> Snapshot {
        *self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A tracked sample as the live view counts it.
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub issued_ns: u64,
    /// 0 when the response had no first chunk (not streamed, or failed before one).
    pub first_chunk_ns: u64,
    pub complete_ns: u64,
    pub failure: FailureKind,
    /// The endpoint's usage, when it sent both counts (the usage rule's usable case).
    pub completion_tokens: Option<u32>,
}

/// The live histograms and counters, owned by the aggregator thread.
pub struct LiveStats {
    enabled: bool,
    board: Arc<Board>,
    snap: Snapshot,
    ttft_ns: Histogram<u64>,
    tpot_ns_server: Histogram<u64>,
    tpot_ns_client: Histogram<u64>,
    latency_ns: Histogram<u64>,
    next_publish_ns: u64,
}

fn histogram() -> Histogram<u64> {
    // The bounds are constants that hdrhistogram accepts (low ≥ 1, high ≥ 2 × low, sigfig ≤ 5).
    Histogram::new_with_bounds(HIST_LOW_NS, HIST_HIGH_NS, HIST_SIGFIG)
        .unwrap_or_else(|_| unreachable!("constant histogram bounds are valid"))
}

fn quantiles(h: &Histogram<u64>) -> Option<Quantiles> {
    (!h.is_empty())
        .then(|| Quantiles { p50_ns: h.value_at_quantile(0.5), p99_ns: h.value_at_quantile(0.99) })
}

impl LiveStats {
    /// Stats publishing to `board`; a disabled one (`--quiet`) records nothing.
    pub fn new(enabled: bool, board: Arc<Board>) -> LiveStats {
        LiveStats {
            enabled,
            board,
            snap: Snapshot::default(),
            ttft_ns: histogram(),
            tpot_ns_server: histogram(),
            tpot_ns_client: histogram(),
            latency_ns: histogram(),
            next_publish_ns: 0,
        }
    }

    /// A tracked sample's answer: a few tens of ns (perf `live_record`).
    #[inline]
    pub fn record(&mut self, c: &Completion) {
        if !self.enabled {
            return;
        }
        self.snap.completed += 1;
        if c.failure != FailureKind::None {
            self.snap.failed += 1;
            self.snap.failed_by_kind[c.failure as usize] += 1;
            return;
        }
        self.latency_ns.saturating_record(c.complete_ns.saturating_sub(c.issued_ns));
        if c.first_chunk_ns != 0 {
            self.ttft_ns.saturating_record(c.first_chunk_ns.saturating_sub(c.issued_ns));
        }
        if let Some(tokens) = c.completion_tokens {
            self.snap.tokens_server += u64::from(tokens);
            // The report's server TPOT rule (LoadGen's: the tokens after the first).
            if c.first_chunk_ns != 0 {
                let span_ns = c.complete_ns.saturating_sub(c.first_chunk_ns);
                if let Some(tpot_ns) = tpot_server_ns(span_ns, tokens) {
                    self.tpot_ns_server.saturating_record(tpot_ns as u64);
                }
            }
        }
    }

    /// A tracked sample's client token count, from the tokenizer pool: its OSL, and its TPOT
    /// span and tokens when it was streamed.
    pub fn record_client_tokens(&mut self, osl: u32, tpot: Option<(u64, u32)>) {
        if !self.enabled {
            return;
        }
        self.snap.tokens_client += u64::from(osl);
        if let Some(tpot_ns) = tpot.and_then(|(span_ns, tokens)| tpot_client_ns(span_ns, tokens)) {
            self.tpot_ns_client.saturating_record(tpot_ns as u64);
        }
    }

    pub fn note_warmup_done(&mut self) {
        self.snap.warmup_done += 1;
    }

    pub fn note_accuracy_done(&mut self) {
        self.snap.accuracy_done += 1;
        self.set_phase(Phase::Accuracy);
    }

    /// Performance tracking started at `tracking_start_ns`.
    pub fn start_tracking(&mut self, tracking_start_ns: u64) {
        self.snap.tracking_start_ns = tracking_start_ns;
        self.set_phase(Phase::Performance);
    }

    /// Moves the phase on (never back: a late record of an earlier phase does not rewind it).
    pub fn set_phase(&mut self, phase: Phase) {
        let rank = |p: Phase| p as u8;
        if rank(phase) > rank(self.snap.phase) {
            self.snap.phase = phase;
            if matches!(phase, Phase::WarmUp | Phase::Performance | Phase::Accuracy) {
                self.snap.issuing_phase = phase;
            }
            // The view shows a new phase at its next draw, not up to 250 ms later.
            self.next_publish_ns = 0;
        }
    }

    /// Publishes a snapshot when `PUBLISH_EVERY_NS` has passed since the last one (or `force`).
    pub fn maybe_publish(&mut self, now_ns: u64, force: bool) {
        if !self.enabled || (now_ns < self.next_publish_ns && !force) {
            return;
        }
        self.snap.at_ns = now_ns;
        self.snap.ttft = quantiles(&self.ttft_ns);
        self.snap.tpot_server = quantiles(&self.tpot_ns_server);
        self.snap.tpot_client = quantiles(&self.tpot_ns_client);
        self.snap.latency = quantiles(&self.latency_ns);
        if self.board.publish(&self.snap) {
            self.next_publish_ns = now_ns + PUBLISH_EVERY_NS;
        }
    }

    /// The counters as they stand (tests and benches).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(issued_ns: u64, first_chunk_ns: u64, complete_ns: u64, tokens: u32) -> Completion {
        Completion {
            issued_ns,
            first_chunk_ns,
            complete_ns,
            failure: FailureKind::None,
            completion_tokens: Some(tokens),
        }
    }

    #[test]
    fn live_quantiles_come_from_the_recorded_samples() {
        let board = Arc::new(Board::default());
        let mut s = LiveStats::new(true, board.clone());
        // TTFT 1..=100 ms; 11 tokens after the first chunk 10 ms later: TPOT 1 ms.
        for i in 1..=100u64 {
            let ms = 1_000_000;
            s.record(&ok(0, i * ms, i * ms + 10 * ms, 11));
        }
        s.maybe_publish(1, false);
        let snap = board.read();
        let ttft = snap.ttft.unwrap();
        assert!((49_000_000..=51_000_000).contains(&ttft.p50_ns), "{ttft:?}");
        assert!((98_000_000..=100_000_000).contains(&ttft.p99_ns), "{ttft:?}");
        let tpot = snap.tpot_server.unwrap();
        assert!((990_000..=1_010_000).contains(&tpot.p50_ns), "{tpot:?}");
        assert_eq!((snap.completed, snap.tokens_server, snap.tpot_client), (100, 1100, None));
    }

    #[test]
    fn failures_count_by_kind_and_stay_out_of_the_latency_histograms() {
        let board = Arc::new(Board::default());
        let mut s = LiveStats::new(true, board.clone());
        s.record(&Completion { failure: FailureKind::Timeout, ..ok(0, 0, 5, 0) });
        s.record(&Completion { failure: FailureKind::Timeout, ..ok(0, 0, 5, 0) });
        s.record(&Completion { failure: FailureKind::HttpStatus, ..ok(0, 0, 5, 0) });
        s.maybe_publish(1, false);
        let snap = board.read();
        assert_eq!((snap.completed, snap.failed), (3, 3));
        assert_eq!(snap.failed_by_kind[FailureKind::Timeout as usize], 2);
        assert_eq!(snap.failed_by_kind[FailureKind::HttpStatus as usize], 1);
        assert_eq!(snap.latency, None);
    }

    #[test]
    fn client_tokens_give_the_client_basis_tps_and_tpot() {
        let board = Arc::new(Board::default());
        let mut s = LiveStats::new(true, board.clone());
        s.record_client_tokens(20, Some((40_000_000, 20)));
        s.record_client_tokens(7, None);
        s.maybe_publish(1, false);
        let snap = board.read();
        assert_eq!(snap.tokens_client, 27);
        let tpot = snap.tpot_client.unwrap();
        assert!((1_990_000..=2_010_000).contains(&tpot.p50_ns), "{tpot:?}");
    }

    #[test]
    fn a_snapshot_is_published_at_most_every_quarter_second() {
        let board = Arc::new(Board::default());
        let mut s = LiveStats::new(true, board.clone());
        s.maybe_publish(1_000, false);
        s.record(&ok(0, 0, 10_000, 1));
        s.maybe_publish(1_000 + PUBLISH_EVERY_NS - 1, false);
        assert_eq!(board.read().completed, 0, "published before the interval");
        s.maybe_publish(1_000 + PUBLISH_EVERY_NS, false);
        assert_eq!(board.read().completed, 1);
    }

    #[test]
    fn publishing_skips_instead_of_waiting_while_the_view_reads() {
        let board = Arc::new(Board::default());
        let mut s = LiveStats::new(true, board.clone());
        s.record(&ok(0, 0, 10_000, 1));
        let held = board.slot.lock().unwrap();
        s.maybe_publish(5, false);
        drop(held);
        assert_eq!(board.read().completed, 0);
        // The skipped publish is retried on the next turn, not 250 ms later.
        s.maybe_publish(6, false);
        assert_eq!(board.read().completed, 1);
    }

    #[test]
    fn quiet_stats_record_and_publish_nothing() {
        let board = Arc::new(Board::default());
        let mut s = LiveStats::new(false, board.clone());
        s.record(&ok(0, 0, 10_000, 1));
        s.maybe_publish(PUBLISH_EVERY_NS * 10, true);
        assert_eq!(board.read(), Snapshot::default());
    }

    #[test]
    fn the_phase_never_moves_back() {
        let mut s = LiveStats::new(true, Arc::new(Board::default()));
        s.set_phase(Phase::WarmUp);
        s.start_tracking(7);
        s.set_phase(Phase::WarmUp);
        assert_eq!(s.snapshot().phase, Phase::Performance);
        s.set_phase(Phase::Stopping);
        s.note_accuracy_done();
        assert_eq!(s.snapshot().phase, Phase::Stopping);
    }
}
