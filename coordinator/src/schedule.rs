//! The scheduler: decides when each sample is issued and hands it to a worker's issue ring.
//!
//! It runs on the coordinator's main thread. Issue times are stamped at hand-over, so a
//! sample's latency never includes time the coordinator spent deciding.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen_wire::{monotonic_ns, Doorbell, IssueCmd, IssueProducer};

use crate::conversation::ConversationSpan;
use crate::order::SampleOrder;
use crate::settle::IssueLog;
use crate::shared::{Shared, WorkerState};
use loadgen_py::random::{poisson_gap_ns, PyRandom};

/// How long the scheduler sleeps on a doorbell or condition before it re-checks for a stop.
pub const SCHEDULER_POLL: Duration = Duration::from_millis(10);

/// Issue notices the scheduler gathers before it sends them to the aggregator at once (an
/// open loop's `sample.issued` lines); fewer go whenever the scheduler is about to wait.
pub const ISSUE_NOTICE_BATCH: usize = 1024;

/// An open-loop sample the scheduler handed over, for its `sample.issued` line in time order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IssueNotice {
    pub sample_id: u64,
    pub row: u32,
    pub issued_ns: u64,
}

/// Closed loop: samples queued in a worker behind its busy connections (at most the issue
/// ring's smallest size, so the ring always has room for them).
pub const CLOSED_LOOP_QUEUE_DEPTH: u64 = 1024;

/// The load pattern of a run (the plan resolves the schema's `settings.load_pattern` into it).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum LoadPattern {
    /// max_throughput: every sample as fast as the rings take them.
    #[default]
    Offline,
    /// Open loop: exponential gaps at `target_qps`, from a seeded generator.
    Poisson { target_qps: f64, seed: u64 },
    /// Closed loop: exactly `n` samples in flight.
    Concurrency { n: u64 },
    /// Agentic conversations (`RunSpec::conversations`): `n` in flight, each on one connection
    /// slot that issues its turns one after another; a new one starts when one finishes.
    Agentic { n: u64 },
}

/// Why issuing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueEnd {
    /// Every sample was issued.
    AllIssued,
    /// A stop was requested (signal or cap).
    Stopped,
    /// Every worker is gone.
    NoWorkers,
}

/// Hands issue commands to the workers' rings.
pub struct Issuer {
    producers: Vec<IssueProducer>,
    shared: Arc<Shared>,
    space: Arc<Doorbell>,
    next_worker: usize,
    pub issued: u64,
    /// Closed loop: samples a worker may hold unanswered (its connections plus as many queued),
    /// and issue times stamped by the worker when it writes the request.
    closed_loop_caps: Option<Vec<u64>>,
    /// Agentic: conversations a worker may hold (its connections: each runs one).
    conversation_caps: Option<Vec<u64>>,
    /// Every issued sample's worker, row and stamp, for the final counts.
    log: IssueLog,
    /// No wait for room lasts past this (the run's cap).
    cap: Option<Instant>,
    /// Open-loop issues not yet told to the aggregator, and where to tell them.
    notices: Vec<IssueNotice>,
    notice_tx: Option<crossbeam_channel::Sender<Vec<IssueNotice>>>,
}

impl Issuer {
    /// An issuer logging into `log` (sized for the run's samples before the start).
    pub fn new(
        producers: Vec<IssueProducer>,
        shared: Arc<Shared>,
        space: Arc<Doorbell>,
        log: IssueLog,
    ) -> Issuer {
        Issuer {
            producers,
            shared,
            space,
            next_worker: 0,
            issued: 0,
            closed_loop_caps: None,
            conversation_caps: None,
            log,
            cap: None,
            notices: Vec::new(),
            notice_tx: None,
        }
    }

    /// Sends every open-loop issue to `tx`, in batches (the aggregator logs `sample.issued`
    /// from them). A closed loop's issues are stamped, and told, by the workers.
    pub fn send_issue_notices(&mut self, tx: crossbeam_channel::Sender<Vec<IssueNotice>>) {
        self.notices = Vec::with_capacity(ISSUE_NOTICE_BATCH);
        self.notice_tx = Some(tx);
    }

    /// Sends the issues gathered so far; call before a wait, and when issuing ends.
    pub fn flush_notices(&mut self) {
        if let Some(tx) = &self.notice_tx {
            if !self.notices.is_empty() {
                let batch =
                    std::mem::replace(&mut self.notices, Vec::with_capacity(ISSUE_NOTICE_BATCH));
                // The aggregator lives until the run is over; a closed channel means it is gone
                // and the notices do not matter.
                let _ = tx.send(batch);
            }
        }
    }

    fn note_issue(&mut self, sample_id: u64, row: u32, issued_ns: u64) {
        if self.notice_tx.is_some() && issued_ns != 0 {
            self.notices.push(IssueNotice { sample_id, row, issued_ns });
            if self.notices.len() >= ISSUE_NOTICE_BATCH {
                self.flush_notices();
            }
        }
    }

    /// Waits for ring space or answers end at `cap`: a stalled server or a stopped worker must
    /// not hold the run past it.
    pub fn set_cap(&mut self, cap: Option<Instant>) {
        self.cap = cap;
    }

    /// The issue log so far, handed to the aggregator when issuing ends.
    pub fn take_log(&mut self) -> IssueLog {
        std::mem::take(&mut self.log)
    }

    fn must_stop(&self) -> bool {
        self.shared.stop.load(Ordering::Acquire) || self.cap.is_some_and(|c| Instant::now() >= c)
    }

    /// Makes this a closed-loop issuer: worker `i` holds `connections[i]` samples in flight and
    /// up to `CLOSED_LOOP_QUEUE_DEPTH` queued behind them, so a freed connection starts the next
    /// sample at once (the worker stamps its issue time as it writes it) and the run keeps
    /// exactly Σ connections in flight, however late the coordinator refills the queue.
    pub fn closed_loop(&mut self, connections: &[u64]) {
        self.closed_loop_caps =
            Some(connections.iter().map(|c| c + CLOSED_LOOP_QUEUE_DEPTH).collect());
    }

    /// Makes this an agentic issuer: worker `i` runs at most `connections[i]` conversations,
    /// each on one slot, none queued behind them, so a conversation starts when one finishes
    /// (the aggregator counts it finished at its last turn's record) and the run keeps
    /// Σ connections conversations in flight, as the reference's `target_concurrency`.
    pub fn agentic(&mut self, connections: &[u64]) {
        self.conversation_caps = Some(connections.to_vec());
    }

    fn has_conversation_room(&self, w: usize) -> bool {
        match (&self.conversation_caps, &self.shared.conversations) {
            (Some(caps), Some((_, counts))) => counts.open_at(w) < caps[w],
            _ => true,
        }
    }

    fn outstanding(&self, w: usize) -> u64 {
        let issued = self.shared.issued_to[w].load(Ordering::Acquire);
        issued.saturating_sub(self.shared.received_from[w].load(Ordering::Acquire))
    }

    fn has_room(&self, w: usize) -> bool {
        match &self.closed_loop_caps {
            Some(caps) => self.outstanding(w) < caps[w],
            None => self.has_conversation_room(w),
        }
    }

    fn alive(&self, w: usize) -> bool {
        matches!(self.shared.state(w), WorkerState::Ready | WorkerState::Starting)
    }

    /// Issues one sample to the next worker with room, round robin; waits while all are full.
    /// Returns the issue time stamped at hand-over.
    pub fn issue(&mut self, sample_id: u64, row: u32) -> Result<u64, IssueEnd> {
        let mut issued_ns = 0;
        self.place(|me, w| {
            // Count first: the aggregator may see the record before try_push returns.
            me.shared.issued_to[w].fetch_add(1, Ordering::AcqRel);
            issued_ns = if me.closed_loop_caps.is_some() { 0 } else { monotonic_ns() };
            if me.producers[w].try_push(IssueCmd::Issue { sample_id, row, issued_ns }) {
                me.log.push(sample_id, w, row, issued_ns);
                me.note_issue(sample_id, row, issued_ns);
                return true;
            }
            me.shared.issued_to[w].fetch_sub(1, Ordering::AcqRel);
            false
        })?;
        self.issued += 1;
        Ok(issued_ns)
    }

    /// Hands conversation `span` to the next worker with a free place, its turns sample ids
    /// `first_sample_id ..`; waits while every place is taken. Each turn is logged as issued to
    /// that worker, stamped by the worker when it writes it.
    pub fn issue_conversation(
        &mut self,
        first_sample_id: u64,
        span: ConversationSpan,
    ) -> Result<(), IssueEnd> {
        self.place(|me, w| me.try_hand_conversation(w, first_sample_id, span))?;
        self.issued += u64::from(span.turns);
        Ok(())
    }

    /// The one placement loop of `issue` and `issue_conversation`: offers the next live worker
    /// with room, round robin, to `try_hand` (true once it pushed), and waits while every
    /// worker is full or its ring has no space. Returns the worker that took it.
    fn place(
        &mut self,
        mut try_hand: impl FnMut(&mut Issuer, usize) -> bool,
    ) -> Result<usize, IssueEnd> {
        let n = self.producers.len();
        loop {
            let epoch = self.space.epoch();
            let mut any_alive = false;
            let mut any_room = false;
            for k in 0..n {
                let w = (self.next_worker + k) % n;
                if !self.alive(w) {
                    continue;
                }
                any_alive = true;
                if !self.has_room(w) {
                    continue;
                }
                any_room = true;
                if try_hand(self, w) {
                    self.next_worker = w + 1;
                    return Ok(w);
                }
            }
            if !any_alive {
                return Err(IssueEnd::NoWorkers);
            }
            if self.must_stop() {
                return Err(IssueEnd::Stopped);
            }
            self.flush_notices();
            if any_room {
                self.space.wait(epoch, SCHEDULER_POLL);
            } else {
                self.wait_for_answers();
            }
        }
    }

    /// Pushes the conversation into worker `w`'s ring, counted first (the aggregator may see
    /// its records before the push returns); undone when the ring is full.
    fn try_hand_conversation(&mut self, w: usize, first: u64, span: ConversationSpan) -> bool {
        let turns = u64::from(span.turns);
        let counts = self.shared.conversations.as_ref().map(|(_, c)| c);
        self.shared.issued_to[w].fetch_add(turns, Ordering::AcqRel);
        counts.inspect(|c| {
            c.issued_to[w].fetch_add(1, Ordering::AcqRel);
        });
        let cmd = IssueCmd::Conversation {
            first_sample_id: first,
            first_row: span.first_row,
            turns: span.turns,
        };
        if self.producers[w].try_push(cmd) {
            for k in 0..span.turns {
                self.log.push(first + u64::from(k), w, span.first_row + k, 0);
            }
            return true;
        }
        self.shared.issued_to[w].fetch_sub(turns, Ordering::AcqRel);
        counts.inspect(|c| {
            c.issued_to[w].fetch_sub(1, Ordering::AcqRel);
        });
        false
    }

    /// Waits until some worker's outstanding count drops (a record arrived) or a stop.
    fn wait_for_answers(&self) {
        let (lock, cond) = &self.shared.progress;
        let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
        self.shared.progress_waiting.store(true, Ordering::Release);
        while (0..self.producers.len()).all(|w| !self.alive(w) || !self.has_room(w))
            && !self.must_stop()
        {
            guard = cond.wait_timeout(guard, SCHEDULER_POLL).unwrap_or_else(|e| e.into_inner()).0;
        }
        self.shared.progress_waiting.store(false, Ordering::Release);
    }

    /// Aborts every worker at once, ahead of whatever is still queued in its ring.
    pub fn abort_all(&mut self) {
        for producer in &mut self.producers {
            producer.request_abort();
        }
    }

    /// Sends `cmd` (Stop or Abort) to every live worker, waiting for room where needed,
    /// until `deadline`.
    pub fn broadcast(&mut self, cmd: IssueCmd, deadline: Instant) {
        for w in 0..self.producers.len() {
            while self.alive(w) && Instant::now() < deadline {
                let epoch = self.space.epoch();
                if self.producers[w].try_push(cmd) {
                    break;
                }
                self.space.wait(epoch, SCHEDULER_POLL);
            }
        }
    }
}

/// Issue lags (issued − scheduled) of an open-loop run, in ns, one per issued sample, in issue
/// order from sample `first_sample_id`: how late the scheduler handed each sample over. The
/// report adds each sample's client wait (issued → written) to it.
#[derive(Debug, Default)]
pub struct IssueLags {
    /// In memory up to the run's spill budget, in a file past it (`with_spill`).
    pub lags_ns: crate::metrics::column::Column<u64>,
    /// The sample id of `lags_ns[0]`.
    pub first_sample_id: u64,
    /// CLOCK_MONOTONIC ns of the first scheduled issue and of the last actual issue.
    pub first_scheduled_ns: u64,
    pub last_issued_ns: u64,
}

impl IssueLags {
    /// No lags yet; they go to `spill`'s files past its budget.
    pub fn with_spill(spill: Option<std::sync::Arc<crate::metrics::column::Spill>>) -> IssueLags {
        let lags_ns = crate::metrics::column::Column::new("issue_lags", spill);
        IssueLags { lags_ns, ..IssueLags::default() }
    }
}

/// A phase's Poisson schedule: offsets from the phase's start, summed whole-nanosecond gaps
/// drawn from the generator the phase was handed (the reference's `rng_sched`, shared by its
/// performance and accuracy phases), the first sample one gap after the start.
pub struct PoissonClock<'a> {
    rng: &'a mut PyRandom,
    target_qps: f64,
    at_ns: u64,
    draws: u64,
}

impl<'a> PoissonClock<'a> {
    pub fn new(rng: &'a mut PyRandom, target_qps: f64) -> PoissonClock<'a> {
        PoissonClock { rng, target_qps, at_ns: 0, draws: 0 }
    }

    /// The next sample's offset from the phase's start, in ns.
    pub fn next_offset_ns(&mut self) -> u64 {
        self.at_ns += poisson_gap_ns(self.rng, self.target_qps);
        self.draws += 1;
        self.at_ns
    }

    /// Ends a phase that issued `issued` samples: the reference draws each next gap as soon
    /// as a sample is issued, and only then does its stop check refuse the next sample, so a
    /// phase takes one draw more than it issued. Returns that last offset when it was drawn
    /// here (the reference waits it out before the phase's drain), `None` when the phase
    /// stopped with it already drawn.
    pub fn close(&mut self, issued: u64) -> Option<u64> {
        (self.draws <= issued).then(|| self.next_offset_ns())
    }
}

/// The generator of a pattern's Poisson gaps: `random.Random(seed)` (unused by the others).
pub fn gap_generator(pattern: &LoadPattern) -> PyRandom {
    match pattern {
        LoadPattern::Poisson { seed, .. } => PyRandom::new(*seed),
        _ => PyRandom::new(0),
    }
}

/// Issues `total` samples by `pattern`; stops early when `shared.stop` is set or at `cap`.
/// A Poisson pattern draws its gaps from `gaps` (see `PoissonClock`), which a later phase
/// continues, and records each sample's issue lag into `lags`. The issue notices still
/// gathered are sent at the end.
#[allow(clippy::too_many_arguments)]
pub fn issue_all(
    issuer: &mut Issuer,
    pattern: &LoadPattern,
    order: &mut SampleOrder,
    first_sample_id: u64,
    total: u64,
    cap: Option<Instant>,
    lags: &mut IssueLags,
    gaps: &mut PyRandom,
) -> IssueEnd {
    let start = Instant::now();
    let start_ns = monotonic_ns();
    let mut poisson = match pattern {
        LoadPattern::Poisson { target_qps, .. } => {
            // Sleeps end within 1 µs of their deadline instead of the default 50 µs slack.
            let _ = nix::sys::prctl::set_timerslack(1_000);
            Some(PoissonClock::new(gaps, *target_qps))
        }
        _ => None,
    };
    if let LoadPattern::Agentic { .. } = pattern {
        let end = issue_conversations(issuer, first_sample_id, total, cap);
        issuer.flush_notices();
        return end;
    }
    let issued_before = issuer.issued;
    let at = (start, start_ns, cap);
    let end = issue_each(issuer, &mut poisson, order, first_sample_id, total, at, lags);
    if let Some(clock) = &mut poisson {
        if let Some(last_ns) = clock.close(issuer.issued - issued_before) {
            issuer.flush_notices();
            if end == IssueEnd::AllIssued {
                wait_until(start + Duration::from_nanos(last_ns), &issuer.shared, cap);
            }
        }
    }
    issuer.flush_notices();
    end
}

/// `issue_all`'s loop: each sample at its Poisson offset (open loop) or at once.
fn issue_each(
    issuer: &mut Issuer,
    poisson: &mut Option<PoissonClock<'_>>,
    order: &mut SampleOrder,
    first_sample_id: u64,
    total: u64,
    (start, start_ns, cap): (Instant, u64, Option<Instant>),
    lags: &mut IssueLags,
) -> IssueEnd {
    let shared = issuer.shared.clone();
    let mut scheduled_ns = 0u64;
    for i in 0..total {
        if shared.stop.load(Ordering::Acquire) || cap.is_some_and(|c| Instant::now() >= c) {
            return IssueEnd::Stopped;
        }
        // The closed loop is held by the issuer's per-worker caps (see `Issuer::closed_loop`).
        if let Some(clock) = poisson.as_mut() {
            let offset = Duration::from_nanos(clock.next_offset_ns());
            scheduled_ns = start_ns + offset.as_nanos() as u64;
            if start + offset > Instant::now() + NOTICE_FLUSH_GAP {
                issuer.flush_notices();
            }
            if !wait_until(start + offset, &shared, cap) {
                return IssueEnd::Stopped;
            }
        }
        let row = order.next_row();
        match issuer.issue(first_sample_id + i, row) {
            Ok(issued_ns) => {
                if poisson.is_some() {
                    if lags.lags_ns.is_empty() {
                        lags.first_scheduled_ns = scheduled_ns;
                        lags.first_sample_id = first_sample_id + i;
                    }
                    lags.lags_ns.push_spilling(issued_ns.saturating_sub(scheduled_ns));
                    issuer.shared.issue_lag.record(issued_ns.saturating_sub(scheduled_ns));
                    lags.last_issued_ns = issued_ns;
                }
            }
            Err(end) => return end,
        }
    }
    IssueEnd::AllIssued
}

/// Hands out the agentic plan's conversations in order, their turns numbered from
/// `first_sample_id`, until `total` samples (every turn of the plan) are out, or a stop.
fn issue_conversations(
    issuer: &mut Issuer,
    first_sample_id: u64,
    total: u64,
    cap: Option<Instant>,
) -> IssueEnd {
    let Some(plan) = issuer.shared.conversations.as_ref().map(|(p, _)| p.clone()) else {
        return IssueEnd::AllIssued;
    };
    let mut next_id = first_sample_id;
    for &span in plan.spans() {
        if next_id - first_sample_id + u64::from(span.turns) > total {
            break;
        }
        if issuer.shared.stop.load(Ordering::Acquire) || cap.is_some_and(|c| Instant::now() >= c) {
            return IssueEnd::Stopped;
        }
        if let Err(end) = issuer.issue_conversation(next_id, span) {
            return end;
        }
        next_id += u64::from(span.turns);
    }
    IssueEnd::AllIssued
}

/// A Poisson gap this long sends the issue notices gathered before it: the aggregator writes
/// `sample.issued` lines within its reorder window, whatever the rate.
const NOTICE_FLUSH_GAP: Duration = Duration::from_millis(1);

/// Waits until `at`: sleeps while far, spins only the last few microseconds. The scheduler
/// shares its core with a worker on small machines, where spinning 200 µs before every sample
/// took the core from the worker at any rate above ~5,000 QPS (a 20,000 QPS Poisson run on two
/// cores reached 18,100 QPS with 166 ms median latency); the thread's timer slack is cut to
/// 1 µs instead (`issue_all`), so the sleep itself ends close to `at`.
fn wait_until(at: Instant, shared: &Shared, cap: Option<Instant>) -> bool {
    const SPIN: Duration = Duration::from_micros(20);
    loop {
        let now = Instant::now();
        if now >= at {
            return true;
        }
        if shared.stop.load(Ordering::Acquire) || cap.is_some_and(|c| now >= c) {
            return false;
        }
        let left = at - now;
        if left > SPIN {
            std::thread::sleep((left - SPIN).min(SCHEDULER_POLL));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Where this host's monotonic clock sits on the wall clock, read at the start of tracking:
/// what a merge needs to put several hosts' logs (CLOCK_MONOTONIC stamps) on one timeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockAnchor {
    /// CLOCK_REALTIME ns at CLOCK_MONOTONIC zero (wall − monotonic, read together).
    pub wall_at_monotonic_zero_ns: u64,
    /// The half-width of the reading's bracket: how far the anchor may be off, in ns.
    pub uncertainty_ns: u64,
    /// CLOCK_MONOTONIC ns at the start of tracking (the performance phase).
    pub tracking_start_ns: u64,
    /// Tracking's start minus `--start-at`, in ns (late > 0); `None` without a start time.
    pub start_offset_ns: Option<i64>,
}

/// Readings of the two clocks taken to find the anchor; the tightest bracket wins.
const ANCHOR_READINGS: usize = 5;

/// The wall clock's ns at monotonic zero: each reading brackets CLOCK_REALTIME between two
/// monotonic reads, and the narrowest bracket gives the anchor and its uncertainty.
pub fn wall_anchor_ns() -> (u64, u64) {
    let mut best = (0u64, u64::MAX);
    for _ in 0..ANCHOR_READINGS {
        let before = monotonic_ns();
        let wall = unix_wall_ns();
        let after = monotonic_ns();
        let half = (after - before) / 2;
        if half < best.1 {
            best = (wall.saturating_sub(before + half), half);
        }
    }
    best
}

/// CLOCK_REALTIME in ns since the Unix epoch.
pub fn unix_wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Waits until the wall clock reads `at_unix_ns` (a shard's common start): sleeps in slices
/// of `SCHEDULER_POLL` so a stop ends the wait, then spins the last `SPIN`. Returns false
/// when stopped first; returns at once when the time has passed.
pub fn wait_for_wall(at_unix_ns: u64, shared: &Shared) -> bool {
    const SPIN: Duration = Duration::from_micros(200);
    let _ = nix::sys::prctl::set_timerslack(1_000);
    loop {
        let now = unix_wall_ns();
        if now >= at_unix_ns {
            return true;
        }
        if shared.stop.load(Ordering::Acquire) {
            return false;
        }
        let left = Duration::from_nanos(at_unix_ns - now);
        if left > SPIN {
            std::thread::sleep((left - SPIN).min(SCHEDULER_POLL));
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen_wire::{RingSizes, WorkerRings};

    // Python: r = random.Random(42); [max(1, int(r.expovariate(5 / 1e9))) for _ in range(10)]
    const GAPS_SEED_42_AT_5_QPS: [u64; 10] = [
        204012057, 5065767, 64324812, 50517237, 266718534, 225834601, 445457619, 18190480,
        109609231, 6050035,
    ];

    /// Offsets of a phase that issues `issued` samples from `rng`, and its closing draw.
    fn phase_gaps(rng: &mut PyRandom, issued: u64) -> Vec<u64> {
        let mut clock = PoissonClock::new(rng, 5.0);
        let offsets: Vec<u64> = (0..issued).map(|_| clock.next_offset_ns()).collect();
        assert!(clock.close(issued).is_some(), "a phase that issued all draws one more");
        offsets.windows(2).fold(vec![offsets[0]], |mut g, w| {
            g.push(w[1] - w[0]);
            g
        })
    }

    #[test]
    fn an_accuracy_phase_continues_the_performance_phases_poisson_draws() {
        let mut rng = gap_generator(&LoadPattern::Poisson { target_qps: 5.0, seed: 42 });
        let g = GAPS_SEED_42_AT_5_QPS;
        // Performance: 3 samples, gaps 0..3, and the reference's fourth draw before its stop.
        assert_eq!(phase_gaps(&mut rng, 3), g[..3]);
        // The accuracy phase's gaps are draws 4.. of the same generator, not a fresh one's.
        assert_eq!(phase_gaps(&mut rng, 2), g[4..6]);
        assert_eq!(phase_gaps(&mut rng, 2), g[7..9], "and the next phase after it");
    }

    #[test]
    fn a_phase_stopped_after_its_next_gap_was_drawn_draws_no_more() {
        let mut rng = PyRandom::new(42);
        let mut clock = PoissonClock::new(&mut rng, 5.0);
        assert_eq!(clock.next_offset_ns(), GAPS_SEED_42_AT_5_QPS[0]);
        // Stopped while waiting for the first sample's time: nothing issued, one drawn.
        assert_eq!(clock.close(0), None);
        let mut clock = PoissonClock::new(&mut rng, 5.0);
        assert_eq!(clock.next_offset_ns(), GAPS_SEED_42_AT_5_QPS[1]);
        // Stopped at the top of the loop after one issue: the reference drew the next one.
        assert_eq!(clock.close(1), Some(GAPS_SEED_42_AT_5_QPS[1] + GAPS_SEED_42_AT_5_QPS[2]));
        let mut clock = PoissonClock::new(&mut rng, 5.0);
        assert_eq!(clock.next_offset_ns(), GAPS_SEED_42_AT_5_QPS[3]);
    }

    #[test]
    fn the_wall_anchor_maps_monotonic_time_onto_the_wall_clock() {
        let (anchor, uncertainty) = wall_anchor_ns();
        let wall = unix_wall_ns();
        let mono = monotonic_ns();
        // Read after the anchor, so the wall clock is at or past anchor + monotonic, within
        // the bracket and the few reads between (a clock step would break it: none in a test).
        let mapped = anchor + mono;
        let gap = mapped.abs_diff(wall);
        assert!(gap < uncertainty + 50_000_000, "anchor off by {gap} ns");
        assert!(uncertainty < 50_000_000, "a bracket of {uncertainty} ns");
    }

    #[test]
    fn waiting_for_a_wall_time_ends_at_it_or_at_a_stop() {
        let shared = Shared::new(1);
        let at = unix_wall_ns() + 30_000_000;
        assert!(wait_for_wall(at, &shared));
        assert!(unix_wall_ns() >= at, "not before the time");
        assert!(wait_for_wall(at - 1_000_000_000, &shared), "a time past returns at once");
        shared.stop.store(true, Ordering::Release);
        let far = unix_wall_ns() + 3_600_000_000_000;
        assert!(!wait_for_wall(far, &shared), "a stop ends the wait");
    }

    #[test]
    fn the_issuer_stops_waiting_for_ring_space_at_the_cap() {
        let bell = Doorbell::create().unwrap();
        let sizes = RingSizes { issue_slots: 4, record_bytes: 64 * 1024 };
        let rings = WorkerRings::create_with(0, sizes, &bell, &bell).unwrap();
        let (producer, _records) = rings.coordinator_ends();
        let shared = Arc::new(Shared::new(1));
        let log = IssueLog::with_capacity(0, 0);
        let mut issuer = Issuer::new(vec![producer], shared, Arc::new(bell), log);
        // Nobody consumes the ring (a stalled or stopped worker): it fills, then the cap ends
        // the wait.
        issuer.set_cap(Some(Instant::now() + Duration::from_millis(200)));
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut id = 0;
            let end = loop {
                if let Err(end) = issuer.issue(id, 0) {
                    break end;
                }
                id += 1;
            };
            let _ = tx.send((end, id, issuer.take_log()));
        });
        let (end, issued, log) = rx.recv_timeout(Duration::from_secs(20)).expect("issue returns");
        assert_eq!(end, IssueEnd::Stopped);
        assert!(issued > 0, "the ring took some samples first");
        assert_eq!(log.id_end(), issued, "every handed-over sample is in the issue log");
    }
}
