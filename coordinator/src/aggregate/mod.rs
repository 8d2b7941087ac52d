//! The aggregator: one thread that drains every worker's record ring into the sample table,
//! the event log and the client tokenizer pool, and watches the workers' health.

mod close;
pub mod events;
mod ingest;
mod token_batch;
pub mod tokens;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use loadgen_wire::{Doorbell, InFlightTable, RecordConsumer};
use nix::unistd::Pid;

use crate::conversation::TrackingWindow;
use crate::live::{Board, LiveSpec, LiveStats, Phase, View};
use crate::metrics::column::{Column, Spill};
use crate::metrics::spool::RowSpool;
use crate::metrics::RunCounters;
use crate::settle::{AbandonCause, IdSet, IssueLog, Tally, WorkerFate};
use crate::shared::Shared;
use events::EventLog;
use tokens::TokenPool;

/// How long the aggregator sleeps on its doorbell before it looks at the workers' health.
pub const AGGREGATOR_POLL: Duration = Duration::from_millis(20);

/// After records stop arriving, how long the aggregator keeps napping instead of sleeping on its
/// doorbell, and how long each nap is. The rings hold far more than a nap's worth of records
/// (8 MiB each: a nap at 1 M records/s leaves ~1,000 in them), and every nap is a context switch
/// on a core the aggregator may share with a worker, so naps are few and long.
pub const BUSY_WINDOW: Duration = Duration::from_millis(5);
pub const BUSY_NAP: Duration = Duration::from_millis(1);

/// The set of answered ids reserves room for this many ids at most (32 MB); it grows past.
pub const ANSWERED_RESERVE_IDS: u64 = 1 << 28;

/// Messages from the coordinator's main thread to the aggregator, in order.
pub enum Control {
    /// All workers are ready: log `session.started` at this time. Warm-up samples may follow.
    Start { session_start_ns: u64 },
    /// Performance tracking starts: sent before the first tracked sample is issued.
    Tracking { tracking_start_ns: u64 },
    /// Nothing more will be issued; `log` says what was. Finish when every worker is done, or
    /// at `deadline`, when the workers still running are killed and their samples settled.
    Finish { log: Box<IssueLog>, deadline: Instant },
    /// The main thread aborted the workers (`cause`): finish by `deadline` (the abort plus
    /// `end::ABORT_GRACE`) at the latest.
    Abort { cause: AbandonCause, deadline: Instant },
}

/// What the aggregator tells the main thread while starting.
#[derive(Debug)]
pub enum Status {
    AllReady,
    SetupFailed { worker: u16, message: String },
}

/// Everything the aggregator needs, built by the coordinator.
pub struct AggregatorInput {
    pub consumers: Vec<RecordConsumer>,
    pub pids: Vec<Pid>,
    /// Each worker's in-flight table, read when it ended.
    pub in_flight: Vec<Option<InFlightTable>>,
    pub doorbell: Arc<Doorbell>,
    pub shared: Arc<Shared>,
    pub control: Receiver<Control>,
    /// The scheduler's open-loop issues, in batches (their `sample.issued` lines).
    pub issue_notices: Receiver<Vec<crate::schedule::IssueNotice>>,
    pub status: Sender<Status>,
    pub events: EventLog,
    pub tokens: Option<TokenPool>,
    /// Client ISL per dataset row (counted before the fork).
    pub isl_client: Arc<Vec<Option<u32>>>,
    /// `["PromptData", ...]` JSON per dataset row, for `sample.issued` lines.
    pub streaming: bool,
    /// Sample ids below this are warm-up: answered, never tracked.
    pub warmup_samples: u64,
    /// Tracked samples: ids from `warmup_samples + expected_samples` on belong to the accuracy
    /// phases, logged in events.jsonl but not measured.
    pub expected_samples: u64,
    /// The live view (`--quiet` turns it off).
    pub live: LiveSpec,
    /// A closed loop: queued samples carry issue stamp 0 until their worker writes them.
    pub closed_loop: bool,
    /// Where the rows and chunk gaps go past the run's memory budget (`None`: all in memory).
    pub spill: Option<Arc<Spill>>,
}

/// Failures of one kind: how many, and the first message.
#[derive(Debug, Clone)]
pub struct FailureSummary {
    pub kind: &'static str,
    pub count: u64,
    pub first_message: String,
}

/// What the aggregator hands back when the run is over.
pub struct AggregatorOutput {
    /// The tracked samples' rows, with their sample ids and dataset rows (in bounded memory
    /// past the spill's budget: `RowSpool`).
    pub rows: RowSpool,
    /// The tracked streamed samples' gaps between chunks, in arrival order (the table's
    /// `chunk_delta_ns`; its statistics do not depend on the order).
    pub chunk_delta_ns: Column<u64>,
    pub counters: RunCounters,
    pub failures: Vec<FailureSummary>,
    pub dead_workers: Vec<(u16, String)>,
    pub warnings: Vec<String>,
    /// events.jsonl, finished and synced on a thread of its own: its outcome is waited for by
    /// the first reader of `EventsClosing::error`.
    pub events: events::EventsClosing,
    /// Some worker had not ended by the finish deadline and was killed.
    pub timed_out: bool,
    /// Workers the aggregator already reaped: their pids may belong to others by now.
    pub reaped: Vec<bool>,
    /// An agentic run's tracked turns that have no row: abandoned at the run's end, or lost
    /// with their worker (`worker_died`); empty in every other run.
    pub unrecorded_turns: Vec<UnrecordedTurn>,
    /// (sample id, dataset row, issue stamp) of an agentic run's turns completed outside its
    /// tracking window: in `sample_idx_map.json` after the tracked ones (they were issued
    /// after every tracked turn), as the reference maps every issued sample; no rows.
    pub untracked_sample_rows: Vec<(u64, u32, u64)>,
}

/// A tracked turn of an agentic run without a row in the table, so the report still counts it
/// in its conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnrecordedTurn {
    /// Its dataset row (== its sample id: an agentic run has no warm-up).
    pub row: u32,
    /// Its worker died with it in flight (a `worker_died` failure); else it was abandoned in
    /// flight (the cap, an interrupt, the drain timeout).
    pub worker_died: bool,
}

/// A tracked sample whose worker cancelled it at an abort: its terminal event waits for the
/// abort's cause.
#[derive(Debug, Clone, Copy)]
struct CancelledSample {
    sample_id: u64,
    row: u32,
    issued_ns: u64,
    cancelled_ns: u64,
}

struct State {
    input_shared: Arc<Shared>,
    /// An agentic run (`Shared::conversations`): the turns without a row are listed at the
    /// end (each row's dataset row is in `sample_rows`).
    agentic: bool,
    unrecorded_turns: Vec<UnrecordedTurn>,
    /// An agentic run's tracking window (never closes otherwise).
    window: TrackingWindow,
    /// Performance-phase samples read after the window closed and issued after it: untracked.
    late: IdSet,
    untracked_sample_rows: Vec<(u64, u32, u64)>,
    rows: RowSpool,
    chunk_delta_ns: Column<u64>,
    /// The record being ingested's gaps between chunks (logged, then added to the column).
    gaps_ns: Vec<u64>,
    counters: RunCounters,
    failures: Vec<FailureSummary>,
    dead_workers: Vec<(u16, String)>,
    warnings: Vec<String>,
    events: EventLog,
    tokens: Option<TokenPool>,
    isl_client: Arc<Vec<Option<u32>>>,
    streaming: bool,
    warmup_samples: u64,
    /// One past the last tracked id: ids from here on are accuracy-phase samples.
    tracked_end: u64,
    closed_loop: bool,
    ready: Vec<bool>,
    done: Vec<bool>,
    /// How each worker ended, once it has; `None` while it runs.
    fates: Vec<Option<WorkerFate>>,
    /// Each worker's in-flight table as it ended.
    sent_at_end: Vec<Vec<u64>>,
    pids: Vec<Pid>,
    reaped: Vec<bool>,
    in_flight: Vec<Option<InFlightTable>>,
    setup_failure: Option<(u16, String)>,
    /// Record outcomes and the ids they answered (one bit a sample).
    tally: Tally,
    answered: IdSet,
    /// Tracked samples whose `sample.issued` / `sample.recv_first` line is logged (from the
    /// worker's notice, ahead of the record).
    issued_logged: IdSet,
    first_logged: IdSet,
    cancelled: Vec<CancelledSample>,
    /// Set by `Control::Finish`.
    issue_log: Option<Box<IssueLog>>,
    abort_cause: Option<AbandonCause>,
    /// `session.start_performance_tracking` has been logged.
    tracking: bool,
    /// `session.stop_performance_tracking` has been logged (before the first accuracy sample).
    tracking_stopped: bool,
    control: Receiver<Control>,
    issue_notices: Receiver<Vec<crate::schedule::IssueNotice>>,
    /// A control message read early (while waiting for `Tracking`), handled by the main loop.
    early_control: Option<Control>,
    /// The live view's histograms and counters.
    pub(super) live: LiveStats,
}

/// The main loop's own state.
struct Loop {
    started: bool,
    /// When to stop waiting for the workers (set by `Finish` and `Abort`).
    deadline: Option<Instant>,
    last_health: Instant,
    busy_since: Instant,
}

/// Runs the aggregator until the run is over. Call on its own thread.
pub fn run(mut input: AggregatorInput) -> AggregatorOutput {
    let mut consumers = std::mem::take(&mut input.consumers);
    let (bell, status) = (input.doorbell.clone(), input.status.clone());
    let board = Arc::new(Board::default());
    let wires = input.in_flight.iter().flatten().cloned().collect();
    let view = View::start(input.live.clone(), board.clone(), input.shared.clone(), wires);
    let live = LiveStats::new(input.live.enabled(), board);
    let mut st = State::new(input, consumers.len(), live);
    let mut lp = Loop {
        started: false,
        deadline: None,
        last_health: Instant::now(),
        busy_since: Instant::now() - BUSY_WINDOW,
    };
    let mut timed_out = false;
    loop {
        let epoch = bell.epoch();
        let popped = st.pop_all(&mut consumers);
        st.take_issue_notices();
        let now_ns = loadgen_wire::monotonic_ns();
        st.events.advance(now_ns);
        st.collect_tokens();
        if !lp.started {
            st.try_start(&status, &mut lp);
        }
        st.read_control(&mut lp);
        // Health (a `waitpid` per worker) once per poll period, and before sleeping on the
        // doorbell: not on every nap of a busy run.
        let idle = popped == 0 && lp.busy_since.elapsed() >= BUSY_WINDOW;
        if idle || lp.last_health.elapsed() >= AGGREGATOR_POLL {
            lp.last_health = Instant::now();
            st.check_health(&mut consumers, lp.started);
        }
        st.live.maybe_publish(now_ns, false);
        if let Some(deadline) = lp.deadline {
            if st.fates.iter().all(Option::is_some) {
                break;
            }
            if Instant::now() >= deadline {
                timed_out = true;
                st.kill_remaining(&mut consumers);
                break;
            }
        }
        if popped == 0 {
            if lp.busy_since.elapsed() < BUSY_WINDOW {
                // Records arrived moments ago: more are coming. A short timed sleep lets them
                // gather in the rings and spares every worker a futex wake-up per record.
                std::thread::sleep(BUSY_NAP);
            } else {
                bell.wait(epoch, AGGREGATOR_POLL);
            }
        } else {
            lp.busy_since = Instant::now();
        }
    }
    // The view is cleared before the closing work, whose warnings then print on a clean line.
    if let Some(view) = view {
        view.finish();
    }
    st.close(timed_out)
}

impl State {
    fn new(input: AggregatorInput, workers: usize, live: LiveStats) -> State {
        let expected = input.warmup_samples.saturating_add(input.expected_samples);
        // Token counts come after their rows: the rows carry their arrival index so a count
        // can patch one already in a file.
        let live_tokens = input.tokens.is_some();
        State {
            agentic: input.shared.conversations.is_some(),
            unrecorded_turns: Vec::new(),
            window: input
                .shared
                .conversations
                .as_ref()
                .map_or_else(TrackingWindow::default, |(_, c)| {
                    TrackingWindow::new(c.window_finish)
                }),
            late: IdSet::default(),
            untracked_sample_rows: Vec::new(),
            input_shared: input.shared,
            rows: RowSpool::with_patches(
                input.spill.clone(),
                input.expected_samples.min(1 << 24) as usize,
                live_tokens,
            ),
            chunk_delta_ns: Column::new("chunk_delta_ns", input.spill.clone()),
            gaps_ns: Vec::new(),
            counters: RunCounters::default(),
            failures: Vec::new(),
            dead_workers: Vec::new(),
            warnings: Vec::new(),
            events: input.events,
            tokens: input.tokens.map(|pool| pool.spill_into(input.spill.clone())),
            isl_client: input.isl_client,
            streaming: input.streaming,
            warmup_samples: input.warmup_samples,
            tracked_end: expected,
            closed_loop: input.closed_loop,
            ready: vec![false; workers],
            done: vec![false; workers],
            fates: vec![None; workers],
            sent_at_end: vec![Vec::new(); workers],
            pids: input.pids,
            reaped: vec![false; workers],
            in_flight: input.in_flight,
            setup_failure: None,
            tally: Tally::default(),
            answered: IdSet::with_capacity(expected.min(ANSWERED_RESERVE_IDS)),
            issued_logged: IdSet::with_capacity(expected.min(ANSWERED_RESERVE_IDS)),
            first_logged: IdSet::with_capacity(expected.min(ANSWERED_RESERVE_IDS)),
            cancelled: Vec::new(),
            issue_log: None,
            abort_cause: None,
            tracking: false,
            tracking_stopped: false,
            control: input.control,
            issue_notices: input.issue_notices,
            early_control: None,
            live,
        }
    }

    /// Pops records from every ring in bounded batches, which keep the other rings and the
    /// control channel served. Returns how many it popped.
    fn pop_all(&mut self, consumers: &mut [RecordConsumer]) -> u64 {
        let mut popped = 0u64;
        for (w, consumer) in consumers.iter_mut().enumerate() {
            for _ in 0..4096 {
                if consumer.pop(|ev| self.on_event(w, ev)).is_none() {
                    break;
                }
                popped += 1;
            }
        }
        if popped > 0 {
            self.input_shared.notify_progress();
        }
        popped
    }

    /// Before the start: reports a setup failure, or that every worker is ready and then waits
    /// for the main thread's `Start` (nothing is issued before it, so no record can come).
    fn try_start(&mut self, status: &Sender<Status>, lp: &mut Loop) {
        if let Some((worker, message)) = self.setup_failure.take() {
            let _ = status.send(Status::SetupFailed { worker, message });
            lp.started = true;
            lp.deadline = Some(Instant::now() + crate::end::ABORT_GRACE);
        } else if self.ready.iter().all(|&r| r) {
            let _ = status.send(Status::AllReady);
            match self.control.recv() {
                Ok(Control::Start { session_start_ns }) => self.start_session(session_start_ns),
                Ok(other) => self.early_control = Some(other),
                Err(_) => lp.deadline = Some(Instant::now()),
            }
            lp.started = true;
        }
    }

    fn read_control(&mut self, lp: &mut Loop) {
        let mut early = self.early_control.take();
        while let Some(msg) = early.take().or_else(|| self.control.try_recv().ok()) {
            match msg {
                Control::Finish { log, deadline } => {
                    self.live.set_phase(Phase::Draining);
                    self.issue_log = Some(log);
                    lp.deadline = Some(deadline);
                }
                Control::Abort { cause, deadline } => {
                    self.live.set_phase(Phase::Stopping);
                    self.abort_cause.get_or_insert(cause);
                    lp.deadline = Some(lp.deadline.map_or(deadline, |d| d.min(deadline)));
                }
                Control::Tracking { tracking_start_ns } => self.start_tracking(tracking_start_ns),
                Control::Start { session_start_ns } => self.start_session(session_start_ns),
            }
        }
    }

    fn start_session(&mut self, session_start_ns: u64) {
        self.counters.session_start_ns = session_start_ns;
        self.events.session("session.started", session_start_ns);
        if self.warmup_samples > 0 {
            self.live.set_phase(Phase::WarmUp);
        }
    }
}

#[cfg(test)]
mod tests;
