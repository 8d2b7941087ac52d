//! The aggregator: one thread that drains every worker's record ring into the sample table,
//! the event log and the client tokenizer pool, and watches the workers' health.

pub mod events;
pub mod tokens;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use loadgen_worker::wire::{
    Doorbell, FailureKind, FinishReason, RecordConsumer, RecordView, WorkerEvent,
};
use nix::unistd::Pid;

use crate::fork::{try_reap, ChildEnd};
use crate::metrics::{FinishKind, RunCounters, SampleRow};
use events::{CompleteEvent, EventLog};
use tokens::{TokenJob, TokenPool, TokenResult};

/// How long the aggregator sleeps on its doorbell before it looks at the workers' health.
pub const AGGREGATOR_POLL: Duration = Duration::from_millis(20);

/// After records stop arriving, how long the aggregator keeps napping instead of sleeping on its
/// doorbell, and how long each nap is. The rings hold far more than a nap's worth of records
/// (8 MiB each: a nap at 1 M records/s leaves ~1,000 in them), and every nap is a context switch
/// on a core the aggregator may share with a worker, so naps are few and long.
pub const BUSY_WINDOW: Duration = Duration::from_millis(5);
pub const BUSY_NAP: Duration = Duration::from_millis(1);

/// A worker's lifecycle as the coordinator's threads see it.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    Starting = 0,
    Ready = 1,
    Done = 2,
    Dead = 3,
}

/// State the scheduler and the aggregator share.
pub struct Shared {
    /// Samples handed to worker `i` (written by the scheduler).
    pub issued_to: Vec<AtomicU64>,
    /// Records received from worker `i` (written by the aggregator).
    pub received_from: Vec<AtomicU64>,
    pub worker_state: Vec<AtomicU8>,
    /// Records received from all workers.
    pub records_total: AtomicU64,
    /// Set when the run must stop issuing (signal, worker death, cap).
    pub stop: AtomicBool,
    /// Notified when records arrive and a waiter flagged itself (concurrency pattern).
    pub progress: (Mutex<()>, Condvar),
    pub progress_waiting: AtomicBool,
}

impl Shared {
    pub fn new(workers: usize) -> Shared {
        Shared {
            issued_to: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            received_from: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            worker_state: (0..workers)
                .map(|_| AtomicU8::new(WorkerState::Starting as u8))
                .collect(),
            records_total: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            progress: (Mutex::new(()), Condvar::new()),
            progress_waiting: AtomicBool::new(false),
        }
    }

    pub fn state(&self, worker: usize) -> WorkerState {
        match self.worker_state[worker].load(Ordering::Acquire) {
            0 => WorkerState::Starting,
            1 => WorkerState::Ready,
            2 => WorkerState::Done,
            _ => WorkerState::Dead,
        }
    }

    fn set_state(&self, worker: usize, state: WorkerState) {
        self.worker_state[worker].store(state as u8, Ordering::Release);
    }

    /// Samples issued and not yet answered, over all workers.
    pub fn in_flight(&self) -> u64 {
        let issued: u64 = self.issued_to.iter().map(|a| a.load(Ordering::Acquire)).sum();
        issued.saturating_sub(self.records_total.load(Ordering::Acquire))
    }

    fn notify_progress(&self) {
        if self.progress_waiting.load(Ordering::Acquire) {
            let _guard = self.progress.0.lock().unwrap_or_else(|e| e.into_inner());
            self.progress.1.notify_all();
        }
    }
}

/// Messages from the coordinator's main thread to the aggregator, in order.
pub enum Control {
    /// All workers are ready: log `session.started` at this time. Warm-up samples may follow.
    Start { session_start_ns: u64 },
    /// Performance tracking starts: sent before the first tracked sample is issued.
    Tracking { tracking_start_ns: u64 },
    /// Nothing more will be issued: `tracked` samples were issued after tracking started, and
    /// `total` in all. Finish when every live worker is done, or at `deadline`.
    Finish { total_issued: u64, tracked_issued: u64, deadline: Instant },
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
    pub doorbell: Arc<Doorbell>,
    pub shared: Arc<Shared>,
    pub control: Receiver<Control>,
    pub status: Sender<Status>,
    pub events: EventLog,
    pub tokens: Option<TokenPool>,
    /// Client ISL per dataset row (counted before the fork).
    pub isl_client: Arc<Vec<Option<u32>>>,
    /// `["PromptData", ...]` JSON per dataset row, for `sample.issued` lines.
    pub prompt_data_json: Arc<Vec<String>>,
    pub streaming: bool,
    /// Sample ids below this are warm-up: answered, never tracked.
    pub warmup_samples: u64,
    pub expected_samples: u64,
    pub progress_line: bool,
    /// A closed loop: queued samples carry issue stamp 0 until their worker writes them.
    pub closed_loop: bool,
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
    pub rows: Vec<SampleRow>,
    pub counters: RunCounters,
    pub failures: Vec<FailureSummary>,
    pub dead_workers: Vec<(u16, String)>,
    pub warnings: Vec<String>,
    pub events_error: Option<String>,
    pub timed_out: bool,
    /// (sample id, dataset row) of every tracked sample, for `sample_idx_map.json`.
    pub sample_rows: Vec<(u64, u32)>,
}

struct State {
    input_shared: Arc<Shared>,
    rows: Vec<SampleRow>,
    counters: RunCounters,
    failures: Vec<FailureSummary>,
    dead_workers: Vec<(u16, String)>,
    warnings: Vec<String>,
    events: EventLog,
    tokens: Option<TokenPool>,
    isl_client: Arc<Vec<Option<u32>>>,
    prompt_data_json: Arc<Vec<String>>,
    streaming: bool,
    warmup_samples: u64,
    ready: Vec<bool>,
    done: Vec<bool>,
    setup_failure: Option<(u16, String)>,
    /// Samples lost in dead workers: tracked failures without timing.
    lost: u64,
    sample_rows: Vec<(u64, u32)>,
    /// Closed-loop samples cancelled while still queued: handed to a worker, never issued.
    unsent: u64,
    /// `session.start_performance_tracking` has been logged.
    tracking: bool,
    control: Receiver<Control>,
    /// A `Finish` read early (while waiting for `Tracking`), handled by the main loop.
    early_finish: Option<Control>,
    unsent_tracked: u64,
}

/// Runs the aggregator until the run is over. Call on its own thread.
pub fn run(input: AggregatorInput) -> AggregatorOutput {
    let workers = input.consumers.len();
    let mut consumers = input.consumers;
    let mut st = State {
        input_shared: input.shared.clone(),
        rows: Vec::with_capacity(input.expected_samples.min(1 << 24) as usize),
        counters: RunCounters::default(),
        failures: Vec::new(),
        dead_workers: Vec::new(),
        warnings: Vec::new(),
        events: input.events,
        tokens: input.tokens,
        isl_client: input.isl_client,
        prompt_data_json: input.prompt_data_json,
        streaming: input.streaming,
        warmup_samples: input.warmup_samples,
        ready: vec![false; workers],
        done: vec![false; workers],
        setup_failure: None,
        lost: 0,
        sample_rows: Vec::new(),
        unsent: 0,
        unsent_tracked: 0,
        tracking: false,
        control: input.control.clone(),
        early_finish: None,
    };
    let shared = input.shared;
    let bell = input.doorbell;
    let mut reaped = vec![false; workers];
    let mut started = false;
    let mut finish: Option<(Instant, u64)> = None;
    let mut timed_out = false;
    let mut last_health = Instant::now();
    let mut progress = Progress::new(input.progress_line);
    let mut busy_since = Instant::now() - BUSY_WINDOW;

    loop {
        let epoch = bell.epoch();
        let mut popped = 0u64;
        for (w, consumer) in consumers.iter_mut().enumerate() {
            // Bounded batches keep the other rings and the control channel served.
            for _ in 0..4096 {
                if consumer.pop(|ev| st.on_event(w, ev)).is_none() {
                    break;
                }
                popped += 1;
            }
        }
        if popped > 0 {
            shared.notify_progress();
        }
        st.collect_tokens();

        if !started {
            if let Some((worker, message)) = st.setup_failure.take() {
                let _ = input.status.send(Status::SetupFailed { worker, message });
                started = true;
                finish = Some((Instant::now() + Duration::from_secs(2), 0));
            } else if st.ready.iter().all(|&r| r) {
                let _ = input.status.send(Status::AllReady);
                // Block until the main thread says when tracking started: no record can
                // arrive before that, because nothing has been issued yet.
                match input.control.recv() {
                    Ok(Control::Start { session_start_ns }) => {
                        st.counters.session_start_ns = session_start_ns;
                        st.events.session("session.started", session_start_ns);
                    }
                    Ok(Control::Tracking { tracking_start_ns }) => {
                        st.start_tracking(tracking_start_ns)
                    }
                    Ok(Control::Finish { deadline, .. }) => {
                        finish = Some((deadline, 0));
                    }
                    Err(_) => {
                        finish = Some((Instant::now(), 0));
                    }
                }
                started = true;
            }
        }

        let mut early = st.early_finish.take();
        while let Some(msg) = early.take().or_else(|| input.control.try_recv().ok()) {
            match msg {
                Control::Finish { total_issued, tracked_issued, deadline } => {
                    st.counters.total_samples_issued = total_issued;
                    st.counters.tracked_samples_issued = tracked_issued;
                    finish = Some((deadline, total_issued));
                }
                Control::Tracking { tracking_start_ns } => st.start_tracking(tracking_start_ns),
                Control::Start { .. } => {}
            }
        }

        // Health (a `waitpid` per worker) once per poll period, and before sleeping on the
        // doorbell: not on every nap of a busy run.
        let idle = popped == 0 && busy_since.elapsed() >= BUSY_WINDOW;
        if idle || last_health.elapsed() >= AGGREGATOR_POLL {
            last_health = Instant::now();
            for w in 0..workers {
                if reaped[w] {
                    continue;
                }
                if let Some(end) = try_reap(input.pids[w]) {
                    reaped[w] = true;
                    // Records the worker pushed before it ended are still in its ring.
                    while consumer_pop(&mut consumers[w], &mut st, w) {}
                    if !st.done[w] {
                        st.worker_died(w, &end);
                        if !started && st.setup_failure.is_none() {
                            st.setup_failure =
                                Some((w as u16, format!("worker {w} {end} while starting")));
                        }
                    }
                }
            }
        }
        progress.maybe_print(&st.counters);

        if let Some((deadline, _)) = finish {
            let all_over = (0..workers).all(|w| st.done[w] || reaped[w]);
            if all_over {
                break;
            }
            if Instant::now() >= deadline {
                timed_out = true;
                break;
            }
        }
        if popped == 0 {
            if busy_since.elapsed() < BUSY_WINDOW {
                // Records arrived moments ago: more are coming. A short timed sleep lets them
                // gather in the rings and spares every worker a futex wake-up per record.
                std::thread::sleep(BUSY_NAP);
            } else {
                bell.wait(epoch, AGGREGATOR_POLL);
            }
        } else {
            busy_since = Instant::now();
        }
    }
    progress.clear();
    // Session end events close the log as the reference's do (stamps, not metric inputs).
    let ended_ns = loadgen_worker::monotonic_ns();
    st.events.session("session.stop_performance_tracking", ended_ns);
    st.events.session("session.ended", ended_ns);
    st.finish_tokens();
    // Commands an out-of-band abort left in a finished worker's ring were never answered: in a
    // closed loop they were never issued (the worker stamps the issue); otherwise they were
    // issued and are abandoned.
    for w in 0..workers {
        if st.input_shared.state(w) != WorkerState::Done {
            continue;
        }
        let issued = shared.issued_to[w].load(Ordering::Acquire);
        let left = issued.saturating_sub(shared.received_from[w].load(Ordering::Acquire));
        if input.closed_loop {
            st.unsent += left;
            st.unsent_tracked += left;
        } else {
            st.counters.abandoned += left;
        }
    }
    st.counters.total_samples_issued = st.counters.total_samples_issued.saturating_sub(st.unsent);
    st.counters.tracked_samples_issued =
        st.counters.tracked_samples_issued.saturating_sub(st.unsent_tracked);
    st.counters.tracked_samples_completed = st.rows.len() as u64 + st.lost;
    st.counters.tracked_samples_failed =
        st.rows.iter().filter(|r| r.failed).count() as u64 + st.lost;
    let events_error = st.events.finish().err().map(|e| e.to_string());
    AggregatorOutput {
        rows: st.rows,
        counters: st.counters,
        failures: st.failures,
        dead_workers: st.dead_workers,
        warnings: st.warnings,
        events_error,
        timed_out,
        sample_rows: st.sample_rows,
    }
}

fn consumer_pop(consumer: &mut RecordConsumer, st: &mut State, w: usize) -> bool {
    consumer.pop(|ev| st.on_event(w, ev)).is_some()
}

impl State {
    fn on_event(&mut self, w: usize, ev: WorkerEvent<'_>) {
        match ev {
            WorkerEvent::Ready { .. } => {
                self.ready[w] = true;
                self.input_shared.set_state(w, WorkerState::Ready);
            }
            WorkerEvent::SetupFailed { message } => {
                if self.setup_failure.is_none() {
                    self.setup_failure = Some((w as u16, message.to_string()));
                }
            }
            WorkerEvent::Warning { message } => {
                let line = format!("worker {w}: {message}");
                eprintln!("warning: {line}");
                self.warnings.push(line);
            }
            WorkerEvent::Done => {
                self.done[w] = true;
                self.input_shared.set_state(w, WorkerState::Done);
            }
            WorkerEvent::Record(rec) => self.on_record(w, &rec),
        }
    }

    fn on_record(&mut self, w: usize, rec: &RecordView<'_>) {
        let h = &rec.header;
        self.input_shared.received_from[w].fetch_add(1, Ordering::Release);
        self.input_shared.records_total.fetch_add(1, Ordering::Release);
        let failure = FailureKind::from_u8(h.failure).unwrap_or(FailureKind::Malformed);
        if failure == FailureKind::Cancelled {
            // Only the coordinator's Abort cancels (cap, interrupt, drain timeout): the sample
            // was abandoned, never completed, as the reference. A closed-loop sample still
            // queued when that happened was never issued at all (the worker stamps the issue).
            if h.issued_ns == 0 {
                self.unsent += 1;
                if h.sample_id >= self.warmup_samples {
                    self.unsent_tracked += 1;
                }
            } else {
                self.counters.abandoned += 1;
            }
            return;
        }
        // Pair assertion with the worker: its clocks are ordered.
        debug_assert!(h.complete_ns >= h.issued_ns);
        let failed = failure != FailureKind::None;
        self.counters.total_samples_completed += 1;
        self.counters.last_event_ns = self.counters.last_event_ns.max(h.complete_ns);
        if failed {
            self.counters.total_samples_failed += 1;
            self.note_failure(failure, rec.error);
        }
        if h.sample_id < self.warmup_samples {
            return;
        }
        if !self.tracking {
            // The main thread sent `Tracking` before it issued this sample: read it now, so the
            // tracking event precedes the sample's lines.
            self.await_tracking();
        }
        // Endpoints send UTF-8; the strict check is SIMD-fast, the lossy path only for bad bytes.
        let output = match std::str::from_utf8(rec.output) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(rec.output),
        };
        let id = h.sample_id;
        let first_chunk_ns = (h.first_chunk_ns != 0).then_some(h.first_chunk_ns);
        let finish = FinishReason::from_u8(h.finish).and_then(FinishKind::from_wire);
        let prompt_json = self.prompt_data_json.get(h.row as usize).map_or("null", |s| s.as_str());
        self.events.issued(id, h.issued_ns, prompt_json);
        if let Some(t) = first_chunk_ns {
            self.events.recv_first(id, t);
        }
        if failed {
            self.events.error(id, h.complete_ns, &String::from_utf8_lossy(rec.error));
        }
        let first_chunk_len = h.first_chunk_len as usize;
        self.events.complete(&CompleteEvent {
            sample_id: id,
            timestamp_ns: h.complete_ns,
            output: (!failed).then_some(&*output),
            streamed: self.streaming,
            first_chunk_len: Some(first_chunk_len),
            finish_reason: finish.map(|f| f.as_str()),
            worker_id: h.worker_id,
            prompt_tokens: h.prompt_tokens,
            completion_tokens: h.completion_tokens,
        });
        let slot = self.rows.len();
        self.sample_rows.push((h.sample_id, h.row));
        self.rows.push(SampleRow {
            issued_ns: h.issued_ns,
            first_chunk_ns,
            complete_ns: h.complete_ns,
            failed,
            finish,
            isl_client: self.isl_client.get(h.row as usize).copied().flatten(),
            osl_client: None,
            tpot_tokens_client: None,
            prompt_tokens: h.prompt_tokens,
            completion_tokens: h.completion_tokens,
            output_empty: output.is_empty(),
        });
        if let Some(pool) = &mut self.tokens {
            if !failed && !output.is_empty() {
                let tpot_from = (first_chunk_ns.is_some() && first_chunk_len < output.len())
                    .then_some(first_chunk_len);
                pool.submit(TokenJob { slot, output: output.into_owned(), tpot_from });
            }
        }
    }

    fn start_tracking(&mut self, tracking_start_ns: u64) {
        if !self.tracking {
            self.tracking = true;
            self.counters.tracking_start_ns = tracking_start_ns;
            self.events.session("session.start_performance_tracking", tracking_start_ns);
        }
    }

    fn await_tracking(&mut self) {
        while !self.tracking {
            match self.control.recv() {
                Ok(Control::Tracking { tracking_start_ns }) => {
                    self.start_tracking(tracking_start_ns)
                }
                Ok(other @ Control::Finish { .. }) => self.early_finish = Some(other),
                Ok(Control::Start { .. }) => {}
                Err(_) => return,
            }
        }
    }

    fn note_failure(&mut self, kind: FailureKind, message: &[u8]) {
        let name = kind.as_str();
        match self.failures.iter_mut().find(|f| f.kind == name) {
            Some(f) => f.count += 1,
            None => self.failures.push(FailureSummary {
                kind: name,
                count: 1,
                first_message: String::from_utf8_lossy(message).chars().take(500).collect(),
            }),
        }
    }

    fn worker_died(&mut self, w: usize, end: &ChildEnd) {
        self.done[w] = true;
        self.input_shared.set_state(w, WorkerState::Dead);
        let issued = self.input_shared.issued_to[w].load(Ordering::Acquire);
        let received = self.input_shared.received_from[w].load(Ordering::Acquire);
        let lost = issued.saturating_sub(received);
        let message = format!("worker {w} {end}; its {lost} in-flight samples count as failed");
        eprintln!("error: {message}");
        self.dead_workers.push((w as u16, message.clone()));
        // Lost samples complete as failures, with no timing (nothing was measured for them).
        self.counters.total_samples_completed += lost;
        self.counters.total_samples_failed += lost;
        self.lost += lost;
        // The scheduler must not wait for them either.
        self.input_shared.records_total.fetch_add(lost, Ordering::Release);
        self.input_shared.received_from[w].fetch_add(lost, Ordering::Release);
        self.input_shared.notify_progress();
        if lost > 0 {
            self.note_failure(FailureKind::ConnectionClosed, message.as_bytes());
        }
    }

    fn apply_token_result(&mut self, r: TokenResult) {
        let row = &mut self.rows[r.slot];
        match r.osl {
            Ok(n) => row.osl_client = Some(n),
            Err(_) => self.counters.n_tokenizer_errors += 1,
        }
        row.tpot_tokens_client = r.tpot_tokens;
    }

    fn collect_tokens(&mut self) {
        let Some(pool) = &mut self.tokens else { return };
        let results: Vec<TokenResult> = pool.try_results().collect();
        for r in results {
            self.apply_token_result(r);
        }
    }

    fn finish_tokens(&mut self) {
        let Some(mut pool) = self.tokens.take() else { return };
        while pool.pending > 0 {
            match pool.wait_result(Duration::from_secs(60)) {
                Some(r) => self.apply_token_result(r),
                None => break,
            }
        }
        self.counters.client_token_tasks_pending = pool.pending;
        pool.close();
    }
}

/// The live progress line on stderr (only when stderr is a terminal).
struct Progress {
    enabled: bool,
    started: Instant,
    last: Instant,
    printed: bool,
}

impl Progress {
    fn new(enabled: bool) -> Progress {
        Progress { enabled, started: Instant::now(), last: Instant::now(), printed: false }
    }

    fn maybe_print(&mut self, c: &RunCounters) {
        if !self.enabled || self.last.elapsed() < Duration::from_millis(500) {
            return;
        }
        self.last = Instant::now();
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        eprint!(
            "\r  completed {}  failed {}  {:.0} QPS   ",
            c.total_samples_completed,
            c.total_samples_failed,
            c.total_samples_completed as f64 / secs
        );
        self.printed = true;
    }

    fn clear(&mut self) {
        if self.printed {
            eprint!("\r\x1b[2K");
        }
    }
}

impl Shared {
    /// Wakes every thread waiting on progress (used when a stop is requested).
    pub fn notify_all_waiters(&self) {
        let _guard = self.progress.0.lock().unwrap_or_else(|e| e.into_inner());
        self.progress.1.notify_all();
    }
}
