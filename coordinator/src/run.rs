//! The run lifecycle: rings and fork, ready barrier, issuing, drain, and the hand-back of results.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::thread::JoinHandle;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use loadgen_wire::{
    monotonic_ns, Doorbell, InFlightTable, IssueCmd, IssueConsumer, RecordProducer, RingSizes,
    WorkerRings, WorkerRole,
};

use crate::aggregate::{
    self,
    events::{EventLog, EventLogSpec},
    tokens::{TokenCounter, TokenPool, TokenPoolPlan},
};
use crate::aggregate::{AggregatorInput, AggregatorOutput, Control, Status};
use crate::conversation::ConversationPlan;
use crate::cpu::CpuPlan;
use crate::end::{accuracy_abandon_cause, after_drain, drain_plan, finish_deadline, run_end};
pub use crate::end::{RunEnd, ABORT_GRACE};
use crate::fork::{fork_child, kill_and_reap};
use crate::order::SampleOrder;
use crate::phase::{
    accuracy_pattern, accuracy_phase_index, accuracy_runs, drain_deadline, first_sample_ids,
    has_performance_phase, phase_in_flight, PERFORMANCE_PHASE,
};
pub use crate::phase::{AccuracyPhaseSpec, PhaseOutcome};
use crate::schedule::{
    gap_generator, issue_all, wait_for_wall, wall_anchor_ns, ClockAnchor, IssueEnd, IssueLags,
    Issuer, LoadPattern, SCHEDULER_POLL,
};
use crate::settle::IssueLog;
use crate::shared::{PhaseCounts, Shared, WorkerState};
use loadgen_py::random::PyRandom;

/// Everything a run needs, resolved by the binary from its plan. `W` is the worker's spec
/// (`loadgen_worker::WorkerSpec`), which the coordinator hands to the worker's entry function
/// in the forked child without knowing what is inside.
pub struct RunSpec<W> {
    /// One spec per worker; the coordinator sets each one's core from `cpu_plan`.
    pub workers: Vec<W>,
    pub cpu_plan: CpuPlan,
    pub pattern: LoadPattern,
    /// An agentic run's conversations (`LoadPattern::Agentic`): `num_samples` is their turns.
    pub conversations: Option<Arc<ConversationPlan>>,
    /// Tracked samples to issue.
    pub num_samples: u64,
    /// The warm-up phase, issued before tracking starts.
    pub warmup: WarmupSpec,
    /// The accuracy phases, issued in order after the performance phase (untracked).
    pub accuracy: Vec<AccuracyPhaseSpec>,
    pub dataset_rows: usize,
    pub dataloader_seed: u64,
    /// A shard's part of the sample order: rows `first`, `first + step`, … (`(0, 1)`: all).
    pub order_stride: (u64, u64),
    /// The wall-clock instant (Unix ns) the performance phase starts at, after the ready
    /// barrier and the warm-up (`--start-at`); `None` = at once.
    pub start_at_unix_ns: Option<u64>,
    /// Wall-time cap from the start of tracking (and of a warm-up, from its own start);
    /// samples in flight or queued at the cap are abandoned, the workers aborted and, past
    /// `ABORT_GRACE`, killed.
    pub max_duration: Option<Duration>,
    /// How long in-flight samples may take to finish once issuing ended.
    pub drain_timeout: Duration,
    /// How long workers may take to open their connections.
    pub ready_timeout: Duration,
    pub ring_sizes: RingSizes,
    pub streaming: bool,
    /// Where the per-sample rows go past the run's memory budget (`None`: all in memory).
    pub spill: Option<Arc<crate::metrics::column::Spill>>,
    pub isl_client: Arc<Vec<Option<u32>>>,
    pub prompt_data_json: Arc<Vec<String>>,
    pub token_counter: Option<TokenCounter>,
    /// The client tokenizer pool's threads and drain timeout (`cpu::tokenizer_threads`).
    pub token_pool: TokenPoolPlan,
    /// events.jsonl, opened by the binary (`None`: no event log).
    pub events_file: Option<std::fs::File>,
    /// The live view: terminal, plain lines or off (`live::LiveSpec`).
    pub live: crate::live::LiveSpec,
    /// Hides secrets in the error messages written into events.jsonl (the binary's
    /// `redact::redact`), should an endpoint echo an API key or credentials in one.
    pub redact: Option<crate::aggregate::events::Redact>,
    /// Called once on the scheduler's thread when the performance phase starts: after the
    /// warm-up (and its drain), before `start_at`'s wait and the first tracked sample; not
    /// called when there is no performance phase or the warm-up was cut short. The binary
    /// triggers the server's profiler here (`settings.profiling`), as the reference's
    /// `on_phase_start` does; tracking starts when it returns.
    pub on_performance_start: Option<PhaseHook>,
}

/// A callback at a phase boundary (`RunSpec::on_performance_start`).
pub type PhaseHook = Box<dyn FnOnce()>;

/// A worker process's body, given by the binary (`loadgen_worker::run_worker`): runs one
/// worker's spec on its ends of the rings and returns the process's exit code. Called once
/// per worker, in the child, right after fork.
pub type WorkerMain<W> = fn(W, IssueConsumer, RecordProducer) -> i32;

/// The warm-up phase (the reference's): untracked samples before the performance phase, on the
/// performance phase's pattern with seeds of its own.
#[derive(Debug, Clone, Default)]
pub struct WarmupSpec {
    /// The table row each warm-up sample sends, in issue order; empty = no warm-up. The
    /// binary draws them (`warmup_random_seed + 1`), or lists salted copies it appended to
    /// the request tables.
    pub rows: Vec<u32>,
    /// The warm-up's pattern: a Poisson one is seeded by `warmup_random_seed`.
    pub pattern: LoadPattern,
    /// Wait for the warm-up samples to finish before tracking starts.
    pub drain: bool,
    /// How long that wait may take.
    pub drain_timeout: Duration,
}

impl WarmupSpec {
    pub fn samples(&self) -> u64 {
        self.rows.len() as u64
    }
}

/// A finished run, ready for the metrics.
pub struct RunOutput {
    pub aggregate: AggregatorOutput,
    pub end: RunEnd,
    /// In-flight samples that were still unanswered when the drain timed out.
    pub drain_timed_out: bool,
    /// Issue lags of a Poisson run (empty otherwise).
    pub issue_lags: IssueLags,
    /// CPU time of each coordinator thread over the run (the scheduler's from its first issue).
    pub thread_cpu: Vec<crate::thread_cpu::ThreadCpu>,
    /// What each accuracy phase that started issued.
    pub phases: Vec<PhaseOutcome>,
    /// This host's monotonic clock on the wall clock, and the start's offset.
    pub clock: ClockAnchor,
}

/// Setup failed before anything was measured.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot set up worker shared memory: {0}")]
    Rings(std::io::Error),
    #[error("cannot fork worker {worker}: {source}")]
    Fork { worker: usize, source: std::io::Error },
    #[error("cannot start a coordinator thread: {0}")]
    Thread(std::io::Error),
    #[error("worker {worker} could not start: {message}")]
    WorkerSetup { worker: u16, message: String },
    #[error("the aggregator thread failed; the run's records are lost (this is a bug: please report it)")]
    AggregatorFailed,
    #[error("workers did not become ready within {0:?}")]
    ReadyTimeout(Duration),
    #[error("interrupted while the workers were starting")]
    Interrupted,
}

static INTERRUPTS: AtomicU32 = AtomicU32::new(0);
static STOP_FLAG: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_sig: libc::c_int) {
    if INTERRUPTS.fetch_add(1, Ordering::SeqCst) >= 1 {
        // A second interrupt: leave at once; the files written so far are complete (atomic).
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
    STOP_FLAG.store(true, Ordering::SeqCst);
}

/// Routes SIGINT and SIGTERM to a graceful stop (the second one exits at once).
fn install_interrupt_handlers() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let action =
        SigAction::new(SigHandler::Handler(on_interrupt), SaFlags::SA_RESTART, SigSet::empty());
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only touches atomics and calls _exit, both async-signal-safe.
        let _ = unsafe { sigaction(sig, &action) };
    }
}

/// True once the user asked the run to stop.
pub fn interrupted() -> bool {
    STOP_FLAG.load(Ordering::SeqCst)
}

/// The coordinator's ends of the run: workers, rings and the channels to the aggregator.
struct Started {
    pids: Vec<nix::unistd::Pid>,
    shared: Arc<Shared>,
    issuer: Issuer,
    control: Sender<Control>,
    status: Receiver<Status>,
    aggregator: JoinHandle<AggregatorOutput>,
    watcher: Watcher,
}

/// Runs a benchmark: forks the workers, each running `worker_main` on its spec, issues every
/// sample, and returns what the aggregator collected. Must be called while the process is
/// single-threaded. Every wait in it ends by the cap or an interrupt (plus `ABORT_GRACE` for
/// the workers to answer the abort).
pub fn run<W: WorkerRole>(
    mut spec: RunSpec<W>,
    worker_main: WorkerMain<W>,
) -> Result<RunOutput, RunError> {
    // A ledger left over from an earlier run in this process is not this run's.
    let _ = crate::thread_cpu::take();
    let mut started = start(&mut spec, worker_main)?;
    if let Err(err) = await_ready(&spec, &started.status) {
        let log = started.issuer.take_log();
        let deadline = finish_deadline(Instant::now());
        let _ = started.control.send(Control::Finish { log: Box::new(log), deadline });
        started.issuer.abort_all();
        let joined = started.aggregator.join();
        started.watcher.stop();
        kill_unreaped(&started.pids, &joined);
        return Err(err);
    }
    let scheduler_cpu_start_ns = crate::thread_cpu::thread_cpu_ns();
    let mut clock = ClockAnchor::default();
    let on_performance_start = spec.on_performance_start.take();
    let (end, drain_timed_out, issue_lags, phases) =
        issue_and_drain(&spec, &mut started, &mut clock, on_performance_start);
    let scheduler_cpu_ns = crate::thread_cpu::thread_cpu_ns() - scheduler_cpu_start_ns;
    let Started { pids, aggregator, watcher, .. } = started;
    let joined = aggregator.join();
    watcher.stop();
    kill_unreaped(&pids, &joined);
    let aggregate = joined.map_err(|_| RunError::AggregatorFailed)?;
    let end = if interrupted() { RunEnd::Interrupted } else { end };
    crate::thread_cpu::note("scheduler", scheduler_cpu_ns);
    let thread_cpu = crate::thread_cpu::take();
    Ok(RunOutput { aggregate, end, drain_timed_out, issue_lags, thread_cpu, phases, clock })
}

/// Kills and reaps the workers the aggregator did not reap: a reaped worker's pid may belong to
/// another process by now.
fn kill_unreaped(pids: &[nix::unistd::Pid], joined: &std::thread::Result<AggregatorOutput>) {
    let reaped = joined.as_ref().map(|a| a.reaped.as_slice()).unwrap_or_default();
    for (w, pid) in pids.iter().enumerate() {
        if !reaped.get(w).copied().unwrap_or(false) {
            kill_and_reap(*pid);
        }
    }
}

/// Rings, fork, signal handlers, the aggregator and the interrupt watcher.
fn start<W: WorkerRole>(
    spec: &mut RunSpec<W>,
    worker_main: WorkerMain<W>,
) -> Result<Started, RunError> {
    let records_bell = Arc::new(Doorbell::create().map_err(RunError::Rings)?);
    let space_bell = Arc::new(Doorbell::create().map_err(RunError::Rings)?);
    let rings = make_rings(spec, &records_bell, &space_bell)?;
    let pids = fork_workers(spec, &rings, worker_main)?;
    install_interrupt_handlers();
    if let Some(&core) = spec.cpu_plan.coordinator_cores.first() {
        core_affinity::set_for_current(core_affinity::CoreId { id: core });
    }
    let (producers, consumers): (Vec<_>, Vec<_>) =
        rings.iter().map(|r| r.coordinator_ends()).unzip();
    let firsts = first_sample_ids(spec.warmup.samples(), spec.num_samples, &spec.accuracy);
    let phases = PhaseCounts::of_run(spec.warmup.samples(), spec.num_samples, &firsts);
    let concurrency: u64 = spec.workers.iter().map(|w| u64::from(w.connections())).sum();
    let shared = Arc::new(
        Shared::new(rings.len())
            .with_phases(phases)
            .with_conversations(spec.conversations.clone(), concurrency),
    );
    let (control, control_rx) = unbounded();
    let (status_tx, status) = bounded(4);
    let kill_all = |pids: &[nix::unistd::Pid]| pids.iter().for_each(|p| kill_and_reap(*p));
    let (notice_tx, notice_rx) = unbounded();
    let agg_io =
        (consumers, pids.clone(), records_bell, shared.clone(), (control_rx, notice_rx), status_tx);
    let aggregator = start_aggregator(spec, agg_io).inspect_err(|_| kill_all(&pids))?;
    let watcher = Watcher::start(shared.clone()).inspect_err(|_| kill_all(&pids))?;
    let accuracy: u64 = spec.accuracy.iter().map(|p| p.rows.len() as u64).sum();
    let samples = spec.warmup.samples().saturating_add(spec.num_samples).saturating_add(accuracy);
    let reserve = samples.min(MAX_LOG_RESERVE_SAMPLES);
    let log = IssueLog::with_spill(reserve, monotonic_ns(), spec.spill.clone());
    let mut issuer = Issuer::new(producers, shared.clone(), space_bell, log);
    issuer.send_issue_notices(notice_tx);
    let connections: Vec<u64> = spec.workers.iter().map(|w| u64::from(w.connections())).collect();
    match spec.pattern {
        LoadPattern::Concurrency { .. } => issuer.closed_loop(&connections),
        LoadPattern::Agentic { .. } => issuer.agentic(&connections),
        _ => {}
    }
    Ok(Started { pids, shared, issuer, control, status, aggregator, watcher })
}

/// The issue log reserved up front covers this many samples at most (192 MB of address space;
/// its pages are touched only as samples are issued; a longer run grows it).
const MAX_LOG_RESERVE_SAMPLES: u64 = 1 << 24;

fn make_rings<W: WorkerRole>(
    spec: &mut RunSpec<W>,
    records_bell: &Arc<Doorbell>,
    space_bell: &Arc<Doorbell>,
) -> Result<Vec<WorkerRings>, RunError> {
    let mut rings = Vec::with_capacity(spec.workers.len());
    for (i, w) in spec.workers.iter_mut().enumerate() {
        let core = spec.cpu_plan.worker_cores.get(i).copied().flatten();
        let table = InFlightTable::create(w.worker_id(), w.connections() as usize)
            .map_err(RunError::Rings)?;
        w.place(core, table);
        let r = WorkerRings::create_with(w.worker_id(), spec.ring_sizes, records_bell, space_bell)
            .map_err(RunError::Rings)?;
        rings.push(r);
    }
    Ok(rings)
}

/// Forks every worker before any thread exists (Architecture Invariant); each child runs
/// `worker_main` on its spec.
fn fork_workers<W: WorkerRole>(
    spec: &RunSpec<W>,
    rings: &[WorkerRings],
    worker_main: WorkerMain<W>,
) -> Result<Vec<nix::unistd::Pid>, RunError> {
    let mut pids = Vec::with_capacity(rings.len());
    for (i, ring) in rings.iter().enumerate() {
        let worker = spec.workers[i].clone();
        let pid = fork_child(|| {
            let (issue, records) = ring.worker_ends();
            worker_main(worker, issue, records)
        })
        .map_err(|source| {
            pids.iter().for_each(|p| kill_and_reap(*p));
            RunError::Fork { worker: i, source }
        })?;
        pids.push(pid);
    }
    Ok(pids)
}

/// Waits for every worker to open its connections: `ready_timeout` at most, and no longer than
/// an interrupt.
fn await_ready<W>(spec: &RunSpec<W>, status: &Receiver<Status>) -> Result<(), RunError> {
    let deadline = Instant::now() + spec.ready_timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match status.recv_timeout(left.min(SCHEDULER_POLL)) {
            Ok(Status::AllReady) => return Ok(()),
            Ok(Status::SetupFailed { worker, message }) => {
                return Err(RunError::WorkerSetup { worker, message })
            }
            Err(_) if interrupted() => return Err(RunError::Interrupted),
            Err(_) if left.is_zero() => return Err(RunError::ReadyTimeout(spec.ready_timeout)),
            Err(_) => {}
        }
    }
}

/// Warm-up, tracking, the tracked samples, the accuracy phases and the drain. Returns the end,
/// whether the drain timed out, the Poisson issue lags and what each accuracy phase issued.
fn issue_and_drain<W>(
    spec: &RunSpec<W>,
    st: &mut Started,
    clock: &mut ClockAnchor,
    on_performance_start: Option<PhaseHook>,
) -> (RunEnd, bool, IssueLags, Vec<PhaseOutcome>) {
    let _ = st.control.send(Control::Start { session_start_ns: monotonic_ns() });
    let warm_up_end = warm_up(spec, st);
    let performs = warm_up_end.is_none() && has_performance_phase(spec.num_samples);
    if let Some(hook) = on_performance_start.filter(|_| performs && !interrupted()) {
        hook();
    }
    // The performance phase draws its own order, as the reference's phases do: a warm-up
    // never shifts which rows the tracked samples use. A shard takes every step-th row.
    let (first, step) = spec.order_stride;
    let mut order =
        SampleOrder::new(spec.dataset_rows.max(1), spec.dataloader_seed).strided(first, step);
    if let (Some(at), None) = (spec.start_at_unix_ns, &warm_up_end) {
        // The shards start together: connected and warmed up, each waits for the instant.
        wait_for_wall(at, &st.shared);
    }
    *clock = tracking_clock(spec.start_at_unix_ns);
    let _ = st.control.send(Control::Tracking { tracking_start_ns: clock.tracking_start_ns });
    let mut issue_lags = IssueLags::with_spill(spec.spill.clone());
    // One generator for the performance phase's Poisson gaps and the accuracy phases', which
    // continue it, as the reference's phases share its `rng_sched`.
    let mut gaps = gap_generator(&spec.pattern);
    let perf_issued_from = st.issuer.issued;
    let (cap, issue_end) = match warm_up_end {
        // The cap (or an interrupt) ended the warm-up: the run ends there, nothing tracked.
        Some(cut) => cut,
        None => {
            let cap = spec.max_duration.map(|d| Instant::now() + d);
            st.issuer.set_cap(cap);
            let (issuer, first, n) = (&mut st.issuer, spec.warmup.samples(), spec.num_samples);
            let lags = &mut issue_lags;
            (cap, issue_all(issuer, &spec.pattern, &mut order, first, n, cap, lags, &mut gaps))
        }
    };
    if !spec.accuracy.is_empty() && accuracy_runs(issue_end, interrupted()) {
        let perf =
            PhaseLoad { index: PERFORMANCE_PHASE, issued: st.issuer.issued - perf_issued_from };
        let (end, perf_left, phases) = drain_then_accuracy(spec, st, (cap, issue_end), perf, gaps);
        return (end, perf_left, issue_lags, phases);
    }
    let now = Instant::now();
    let end = run_end(issue_end, interrupted(), cap.is_some_and(|c| now >= c));
    let plan = drain_plan(end, now, cap, spec.drain_timeout);
    let log = Box::new(st.issuer.take_log());
    let deadline = finish_deadline(plan.deadline);
    let _ = st.control.send(Control::Finish { log, deadline });
    let drained = !plan.abort_now && drain(&mut st.issuer, &st.shared, plan.deadline);
    let (end, timed_out) = after_drain(end, drained, interrupted(), plan.cut_by_cap);
    if !drained {
        let cause = end.abandon_cause(timed_out);
        let deadline = finish_deadline(Instant::now());
        let _ = st.control.send(Control::Abort { cause, deadline });
        st.issuer.abort_all();
    }
    (end, timed_out, issue_lags, Vec::new())
}

/// The clocks at the start of tracking: the wall anchor, the monotonic start, and the offset
/// against `start_at` (read from the same anchor, so offset and start agree).
fn tracking_clock(start_at_unix_ns: Option<u64>) -> ClockAnchor {
    let (wall_at_monotonic_zero_ns, uncertainty_ns) = wall_anchor_ns();
    let tracking_start_ns = monotonic_ns();
    let start_wall_ns = wall_at_monotonic_zero_ns + tracking_start_ns;
    ClockAnchor {
        wall_at_monotonic_zero_ns,
        uncertainty_ns,
        tracking_start_ns,
        start_offset_ns: start_at_unix_ns.map(|at| start_wall_ns as i64 - at as i64),
    }
}

/// The performance phase's drain, then the accuracy phases. The performance phase's own
/// samples finish first (within its drain timeout), so each accuracy phase's duration is its
/// own; its cap, as the reference's, ends its drain too (at once when it has passed): what is
/// left in flight then is not waited for, finishes (and is counted) while the accuracy
/// phases run, or is abandoned at the end. Returns the end, whether the performance drain
/// timed out with samples still unanswered at the end, and what each accuracy phase issued.
fn drain_then_accuracy<W>(
    spec: &RunSpec<W>,
    st: &mut Started,
    (cap, issue_end): (Option<Instant>, IssueEnd),
    perf: PhaseLoad,
    mut gaps: PyRandom,
) -> (RunEnd, bool, Vec<PhaseOutcome>) {
    let now = Instant::now();
    let perf_end = run_end(issue_end, interrupted(), cap.is_some_and(|c| now >= c));
    let plan = drain_plan(perf_end, now, cap, spec.drain_timeout);
    let drained = !plan.abort_now && wait_phase_drained(&st.shared, perf, Some(plan.deadline));
    let (perf_end, perf_timed_out) = after_drain(perf_end, drained, interrupted(), plan.cut_by_cap);
    st.issuer.set_cap(None);
    let mut phases = Vec::new();
    let issue_end = accuracy_phases(spec, st, &mut gaps, &mut phases);
    let capped = perf_end == RunEnd::Capped;
    // What the performance drain left may have answered since: only what is still left
    // makes its timeout an incomplete report.
    let perf_left = perf.in_flight(&st.shared) > 0;
    let end = finish_after_accuracy(st, issue_end, capped && perf_left);
    // The cap's end is told (its abandoned samples counted) unless a later end overrides it.
    let end = if capped && end == RunEnd::Completed { RunEnd::Capped } else { end };
    (end, perf_timed_out && perf_left, phases)
}

/// Ends a run whose accuracy phases ran: each phase waited for its own samples, so what is
/// still in flight (past an accuracy drain timeout, or at an interrupt) is abandoned at once
/// and counts as missing; otherwise the workers are stopped.
fn finish_after_accuracy(st: &mut Started, issue_end: IssueEnd, perf_capped_left: bool) -> RunEnd {
    let end = run_end(issue_end, interrupted(), false);
    let log = Box::new(st.issuer.take_log());
    let stop_by = Instant::now() + ABORT_GRACE;
    let _ = st.control.send(Control::Finish { log, deadline: finish_deadline(stop_by) });
    let left = st.shared.in_flight() > 0 || end == RunEnd::Interrupted;
    if left || !drain(&mut st.issuer, &st.shared, stop_by) {
        let cause = accuracy_abandon_cause(end, perf_capped_left);
        let _ =
            st.control.send(Control::Abort { cause, deadline: finish_deadline(Instant::now()) });
        st.issuer.abort_all();
    }
    if interrupted() {
        RunEnd::Interrupted
    } else {
        end
    }
}

/// Issues each accuracy phase in order on the performance phase's pattern and waits for its
/// samples (without limit unless its drain timeout is set). Returns how issuing ended: the
/// first phase cut short (interrupt, lost workers) ends them all. A Poisson phase continues
/// `gaps`, the performance phase's generator.
fn accuracy_phases<W>(
    spec: &RunSpec<W>,
    st: &mut Started,
    gaps: &mut PyRandom,
    out: &mut Vec<PhaseOutcome>,
) -> IssueEnd {
    let firsts = first_sample_ids(spec.warmup.samples(), spec.num_samples, &spec.accuracy);
    let pattern = accuracy_pattern(&spec.pattern, has_performance_phase(spec.num_samples));
    for (i, (phase, first)) in spec.accuracy.iter().zip(firsts).enumerate() {
        let start_ns = monotonic_ns();
        let issued_before = st.issuer.issued;
        let mut order = SampleOrder::listed(phase.rows.clone());
        let mut unused = IssueLags::default();
        let n = phase.rows.len() as u64;
        let issuer = &mut st.issuer;
        let end = issue_all(issuer, &pattern, &mut order, first, n, None, &mut unused, gaps);
        let issued = st.issuer.issued - issued_before;
        if end == IssueEnd::AllIssued {
            // Its own samples only: one left in flight by an earlier phase does not hold it.
            let load = PhaseLoad { index: accuracy_phase_index(i), issued };
            wait_phase_drained(
                &st.shared,
                load,
                drain_deadline(Instant::now(), phase.drain_timeout),
            );
        }
        let name = phase.name.clone();
        out.push(PhaseOutcome {
            name,
            first_sample_id: first,
            issued,
            start_ns,
            end_ns: monotonic_ns(),
        });
        if end != IssueEnd::AllIssued || interrupted() {
            return if end == IssueEnd::AllIssued { IssueEnd::Stopped } else { end };
        }
    }
    IssueEnd::AllIssued
}

/// Issues the warm-up samples (untracked) on the warm-up's pattern, in the order of its rows,
/// and, with `drain`, waits for them. The cap bounds the warm-up too, from its own start. When
/// the cap, an interrupt or the loss of every worker cut the warm-up short, returns the cap and
/// why issuing stopped.
fn warm_up<W>(spec: &RunSpec<W>, st: &mut Started) -> Option<(Option<Instant>, IssueEnd)> {
    let warmup = &spec.warmup;
    if warmup.rows.is_empty() {
        return None;
    }
    let cap = spec.max_duration.map(|d| Instant::now() + d);
    st.issuer.set_cap(cap);
    let mut unused = IssueLags::default();
    let mut order = SampleOrder::listed(warmup.rows.clone());
    let (issuer, n) = (&mut st.issuer, warmup.samples());
    // The warm-up draws from its own generator (`warmup_random_seed`), as the reference's.
    let mut gaps = gap_generator(&warmup.pattern);
    let end = issue_all(issuer, &warmup.pattern, &mut order, 0, n, cap, &mut unused, &mut gaps);
    if warmup.drain && end == IssueEnd::AllIssued {
        let drain_until = Instant::now() + warmup.drain_timeout;
        wait_drained(&st.shared, cap.map_or(drain_until, |c| c.min(drain_until)));
    }
    let capped = cap.is_some_and(|c| Instant::now() >= c);
    let cut = end != IssueEnd::AllIssued || capped || interrupted();
    let end = if end == IssueEnd::AllIssued { IssueEnd::Stopped } else { end };
    cut.then_some((cap, end))
}

/// A phase's samples: its index in `Shared::phases` and how many it issued.
#[derive(Debug, Clone, Copy)]
struct PhaseLoad {
    index: usize,
    issued: u64,
}

impl PhaseLoad {
    fn in_flight(&self, shared: &Shared) -> u64 {
        phase_in_flight(self.issued, shared.phases.received(self.index))
    }
}

/// Waits for a phase's own samples: until `deadline` if any, an interrupt, or a worker's
/// death (its samples will never answer, and the run's end settles them). True when none of
/// them is left in flight.
fn wait_phase_drained(shared: &Shared, phase: PhaseLoad, deadline: Option<Instant>) -> bool {
    const SLICE: Duration = Duration::from_millis(250);
    loop {
        let slice_end = Instant::now() + SLICE;
        let until = deadline.map_or(slice_end, |d| d.min(slice_end));
        wait_while(shared, until, || phase.in_flight(shared) > 0);
        let dead = (0..shared.issued_to.len()).any(|w| shared.state(w) == WorkerState::Dead);
        let past = deadline.is_some_and(|d| Instant::now() >= d);
        let drained = phase.in_flight(shared) == 0;
        if drained || interrupted() || dead || past {
            return drained;
        }
    }
}

/// Ends issuing (Stop) and waits for the samples in flight until `deadline` or an interrupt.
/// True when nothing was left in flight.
fn drain(issuer: &mut Issuer, shared: &Shared, deadline: Instant) -> bool {
    issuer.broadcast(IssueCmd::Stop, deadline);
    wait_drained(shared, deadline);
    shared.in_flight() == 0 && !interrupted()
}

/// Waits until nothing is in flight, a stop is requested, or `deadline`.
fn wait_drained(shared: &Shared, deadline: Instant) {
    wait_while(shared, deadline, || shared.in_flight() > 0);
}

/// Waits while `pending` holds (re-read as records arrive), until `deadline` or a stop.
fn wait_while(shared: &Shared, deadline: Instant, pending: impl Fn() -> bool) {
    let (lock, cond) = &shared.progress;
    let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
    shared.progress_waiting.store(true, Ordering::Release);
    while pending() && Instant::now() < deadline && !interrupted() {
        guard = cond.wait_timeout(guard, SCHEDULER_POLL).unwrap_or_else(|e| e.into_inner()).0;
    }
    shared.progress_waiting.store(false, Ordering::Release);
}

/// The thread that turns an interrupt (a signal handler's flag) into the run's stop flag and
/// wakes the waiters.
struct Watcher {
    done: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

/// How often the watcher looks at the interrupt flag.
const WATCH_POLL: Duration = Duration::from_millis(20);

impl Watcher {
    fn start(shared: Arc<Shared>) -> Result<Watcher, RunError> {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let handle = std::thread::Builder::new()
            .name("interrupt-watch".into())
            .spawn(move || {
                while !flag.load(Ordering::Acquire) {
                    if interrupted() {
                        shared.stop.store(true, Ordering::Release);
                        shared.notify_all_waiters();
                        return;
                    }
                    std::thread::sleep(WATCH_POLL);
                }
            })
            .map_err(RunError::Thread)?;
        Ok(Watcher { done, handle })
    }

    fn stop(self) {
        self.done.store(true, Ordering::Release);
        let _ = self.handle.join();
    }
}

type AggregatorIo = (
    Vec<loadgen_wire::RecordConsumer>,
    Vec<nix::unistd::Pid>,
    Arc<Doorbell>,
    Arc<Shared>,
    (Receiver<Control>, Receiver<Vec<crate::schedule::IssueNotice>>),
    Sender<Status>,
);

/// Formatter threads of events.jsonl at most: past this the file's writes bound it.
pub const MAX_EVENT_FORMATTERS: usize = 4;

/// One events formatter thread per coordinator core (the aggregator hands them whole batches).
fn event_formatters(plan: &CpuPlan) -> usize {
    plan.coordinator_cores.len().clamp(1, MAX_EVENT_FORMATTERS)
}

/// The formatters' cores: the coordinator's, from its second on, so the first formatter leaves
/// the scheduler's and the aggregator's core to them where it can.
fn formatter_cores(plan: &CpuPlan) -> Vec<usize> {
    let mut cores = plan.coordinator_cores.clone();
    if cores.len() > 1 {
        cores.rotate_left(1);
    }
    cores
}

fn start_aggregator<W: WorkerRole>(
    spec: &RunSpec<W>,
    io: AggregatorIo,
) -> Result<JoinHandle<AggregatorOutput>, RunError> {
    let (consumers, pids, doorbell, shared, (control, issue_notices), status) = io;
    let events = match spec.events_file.as_ref().map(std::fs::File::try_clone) {
        Some(file) => {
            let log = EventLogSpec {
                formatters: event_formatters(&spec.cpu_plan),
                cores: formatter_cores(&spec.cpu_plan),
                prompt_data_json: spec.prompt_data_json.clone(),
                redact: spec.redact,
                endpoint_field: spec.workers.first().is_some_and(|w| w.endpoint_count() > 1),
                conversations: spec.conversations.clone(),
            };
            EventLog::from_file(file.map_err(RunError::Thread)?, log).map_err(RunError::Thread)?
        }
        None => EventLog::disabled(),
    };
    let tokens = match &spec.token_counter {
        Some(counter) => Some(
            TokenPool::start(counter.clone(), spec.token_pool.clone()).map_err(RunError::Thread)?,
        ),
        None => None,
    };
    let input = AggregatorInput {
        consumers,
        pids,
        in_flight: spec.workers.iter().map(|w| w.in_flight().cloned()).collect(),
        doorbell,
        shared,
        control,
        issue_notices,
        status,
        events,
        tokens,
        isl_client: spec.isl_client.clone(),
        streaming: spec.streaming,
        warmup_samples: spec.warmup.samples(),
        expected_samples: spec.num_samples,
        live: spec.live.clone(),
        closed_loop: matches!(
            spec.pattern,
            LoadPattern::Concurrency { .. } | LoadPattern::Agentic { .. }
        ),
        spill: spec.spill.clone(),
    };
    std::thread::Builder::new()
        .name("aggregator".into())
        .spawn(move || {
            let output = aggregate::run(input);
            crate::thread_cpu::note("aggregator", crate::thread_cpu::thread_cpu_ns());
            output
        })
        .map_err(RunError::Thread)
}
