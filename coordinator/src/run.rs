//! The run lifecycle: rings and fork, ready barrier, issuing, drain, and the hand-back of results.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded};
use loadgen_worker::wire::{Doorbell, InFlightTable, IssueCmd, RingSizes, WorkerRings};
use loadgen_worker::{monotonic_ns, run_worker, WorkerSpec};

use crate::aggregate::{
    self,
    events::EventLog,
    tokens::{TokenCounter, TokenPool},
};
use crate::aggregate::{AggregatorInput, AggregatorOutput, Control, Shared, Status};
use crate::cpu::CpuPlan;
use crate::fork::{fork_child, kill_and_reap};
use crate::order::SampleOrder;
use crate::schedule::{issue_all, IssueEnd, IssueLags, Issuer, Pattern};

/// Everything a run needs, resolved by the binary from its plan.
pub struct RunSpec {
    /// One spec per worker; the coordinator sets each one's core from `cpu_plan`.
    pub workers: Vec<WorkerSpec>,
    pub cpu_plan: CpuPlan,
    pub pattern: Pattern,
    /// Tracked samples to issue.
    pub num_samples: u64,
    /// Warm-up samples issued before tracking starts.
    pub warmup_samples: u64,
    /// Wait for the warm-up samples to finish before tracking starts.
    pub warmup_drain: bool,
    pub dataset_rows: usize,
    pub dataloader_seed: u64,
    /// Wall-time cap from the start of tracking; in-flight samples at the cap are abandoned.
    pub max_duration: Option<Duration>,
    /// How long in-flight samples may take to finish once issuing ended.
    pub drain_timeout: Duration,
    /// How long workers may take to open their connections.
    pub ready_timeout: Duration,
    pub ring_sizes: RingSizes,
    pub streaming: bool,
    pub isl_client: Arc<Vec<Option<u32>>>,
    pub prompt_data_json: Arc<Vec<String>>,
    pub token_counter: Option<TokenCounter>,
    pub tokenizer_threads: usize,
    pub events_path: Option<PathBuf>,
    pub progress_line: bool,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Every sample was issued and answered (or failed).
    Completed,
    /// The wall-time cap (`max_duration`) ended it; in-flight samples were abandoned.
    Capped,
    /// SIGINT or SIGTERM.
    Interrupted,
    /// Every worker died.
    WorkersLost,
}

/// A finished run, ready for the metrics.
pub struct RunOutput {
    pub aggregate: AggregatorOutput,
    pub end: RunEnd,
    /// In-flight samples that were still unanswered when the drain timed out.
    pub drain_timed_out: bool,
    /// Issue lags of a Poisson run (empty otherwise).
    pub issue_lags: IssueLags,
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

/// Runs a benchmark: forks the workers, issues every sample, and returns what the aggregator
/// collected. Must be called while the process is single-threaded.
pub fn run(mut spec: RunSpec) -> Result<RunOutput, RunError> {
    let worker_count = spec.workers.len();
    let records_bell = Arc::new(Doorbell::create().map_err(RunError::Rings)?);
    let space_bell = Arc::new(Doorbell::create().map_err(RunError::Rings)?);
    let mut rings = Vec::with_capacity(worker_count);
    for (i, w) in spec.workers.iter_mut().enumerate() {
        w.core = spec.cpu_plan.worker_cores.get(i).copied().flatten();
        let table =
            InFlightTable::create(w.worker_id, w.connections as usize).map_err(RunError::Rings)?;
        w.in_flight = Some(table);
        let r = WorkerRings::create_with(w.worker_id, spec.ring_sizes, &records_bell, &space_bell)
            .map_err(RunError::Rings)?;
        rings.push(r);
    }

    // Fork every worker before any thread exists (Architecture Invariant).
    let mut pids = Vec::with_capacity(worker_count);
    for (i, ring) in rings.iter().enumerate() {
        let worker = spec.workers[i].clone();
        let pid = fork_child(|| {
            let (issue, records) = ring.worker_ends();
            run_worker(worker, issue, records)
        })
        .map_err(|source| {
            for pid in &pids {
                kill_and_reap(*pid);
            }
            RunError::Fork { worker: i, source }
        })?;
        pids.push(pid);
    }
    install_interrupt_handlers();
    if let Some(&core) = spec.cpu_plan.coordinator_cores.first() {
        core_affinity::set_for_current(core_affinity::CoreId { id: core });
    }

    let (producers, consumers): (Vec<_>, Vec<_>) =
        rings.iter().map(|r| r.coordinator_ends()).unzip();
    let shared = Arc::new(Shared::new(worker_count));
    let (control_tx, control_rx) = unbounded();
    let (status_tx, status_rx) = bounded(4);
    let spawn_result = start_aggregator(
        &spec,
        consumers,
        pids.clone(),
        records_bell.clone(),
        shared.clone(),
        control_rx,
        status_tx,
    );
    let aggregator = match spawn_result {
        Ok(handle) => handle,
        Err(e) => {
            pids.iter().for_each(|p| kill_and_reap(*p));
            return Err(e);
        }
    };

    let cleanup = |pids: &[nix::unistd::Pid]| pids.iter().for_each(|p| kill_and_reap(*p));
    let mut issuer = Issuer::new(producers, shared.clone(), space_bell);
    if let Pattern::Concurrency { .. } = spec.pattern {
        let connections: Vec<u64> = spec.workers.iter().map(|w| u64::from(w.connections)).collect();
        issuer.closed_loop(&connections);
    }
    let ready = status_rx.recv_timeout(spec.ready_timeout);
    let setup_error = match ready {
        Ok(Status::AllReady) => None,
        Ok(Status::SetupFailed { worker, message }) => {
            Some(RunError::WorkerSetup { worker, message })
        }
        Err(_) => Some(RunError::ReadyTimeout(spec.ready_timeout)),
    };
    if let Some(err) = setup_error {
        let _ = control_tx.send(Control::Finish {
            total_issued: 0,
            tracked_issued: 0,
            deadline: Instant::now() + Duration::from_secs(1),
        });
        issuer.abort_all();
        let _ = aggregator.join();
        cleanup(&pids);
        return Err(err);
    }

    let session_start_ns = monotonic_ns();
    let _ = control_tx.send(Control::Start { session_start_ns });
    let mut order = SampleOrder::new(spec.dataset_rows.max(1), spec.dataloader_seed);
    // Warm-up samples go first, untracked.
    if spec.warmup_samples > 0 {
        let mut unused = IssueLags::default();
        let warmup_pattern = Pattern::Offline;
        let _ = issue_all(
            &mut issuer,
            &warmup_pattern,
            &mut order,
            0,
            spec.warmup_samples,
            None,
            &mut unused,
        );
        if spec.warmup_drain {
            wait_drained(&shared, Instant::now() + spec.drain_timeout);
        }
    }
    let tracking_start_ns = monotonic_ns();
    let _ = control_tx.send(Control::Tracking { tracking_start_ns });
    let tracking_start = Instant::now();
    let cap = spec.max_duration.map(|d| tracking_start + d);

    // Stop requests from signals reach the scheduler through the shared flag.
    let watcher_shared = shared.clone();
    let watcher_done = Arc::new(AtomicBool::new(false));
    let watcher_flag = watcher_done.clone();
    let watcher = std::thread::Builder::new()
        .name("interrupt-watch".into())
        .spawn(move || {
            while !watcher_flag.load(Ordering::Acquire) {
                if interrupted() {
                    watcher_shared.stop.store(true, Ordering::Release);
                    watcher_shared.notify_all_waiters();
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
        .map_err(RunError::Thread)?;

    let issued_before = issuer.issued;
    let mut issue_lags = IssueLags::default();
    let end = issue_all(
        &mut issuer,
        &spec.pattern,
        &mut order,
        spec.warmup_samples,
        spec.num_samples,
        cap,
        &mut issue_lags,
    );
    let tracked_issued = issuer.issued - issued_before;
    let capped = cap.is_some_and(|c| Instant::now() >= c);
    let run_end = match end {
        IssueEnd::AllIssued if !interrupted() => RunEnd::Completed,
        IssueEnd::NoWorkers => RunEnd::WorkersLost,
        _ if interrupted() => RunEnd::Interrupted,
        _ if capped => RunEnd::Capped,
        _ => RunEnd::Completed,
    };

    // Drain: wait for in-flight samples (bounded), or abandon them at the cap.
    let drain_until = match run_end {
        RunEnd::Capped => cap.unwrap_or_else(Instant::now),
        RunEnd::Interrupted => Instant::now() + Duration::from_secs(2).min(spec.drain_timeout),
        _ => Instant::now() + spec.drain_timeout,
    };
    // The cap holds during the drain too: a drain it cuts short is a capped end.
    let cut_by_cap = cap.is_some_and(|c| c < drain_until);
    let drain_deadline = if cut_by_cap { cap.unwrap_or(drain_until) } else { drain_until };
    let _ = control_tx.send(Control::Finish {
        total_issued: issuer.issued,
        tracked_issued,
        deadline: drain_deadline + Duration::from_secs(2),
    });
    let (run_end, drain_timed_out) =
        drain(&mut issuer, &shared, run_end, drain_deadline, cut_by_cap);

    let joined = aggregator.join();
    watcher_done.store(true, Ordering::Release);
    let _ = watcher.join();
    cleanup(&pids);
    let aggregate = joined.map_err(|_| RunError::AggregatorFailed)?;
    let end = if interrupted() { RunEnd::Interrupted } else { run_end };
    Ok(RunOutput { aggregate, end, drain_timed_out, issue_lags })
}

/// Ends issuing and waits for the samples in flight until `deadline`, then aborts what is left.
/// Returns how the run ended and whether the drain timed out: samples still in flight when the
/// cap (`cut_by_cap`) ends the drain are abandoned, a capped end; only a drain that outlives
/// its own timeout is a timeout.
fn drain(
    issuer: &mut Issuer,
    shared: &Shared,
    run_end: RunEnd,
    deadline: Instant,
    cut_by_cap: bool,
) -> (RunEnd, bool) {
    if run_end == RunEnd::Capped {
        issuer.abort_all();
        return (RunEnd::Capped, false);
    }
    issuer.broadcast(IssueCmd::Stop, deadline);
    wait_drained(shared, deadline);
    if shared.in_flight() == 0 {
        return (run_end, false);
    }
    issuer.abort_all();
    if interrupted() {
        return (RunEnd::Interrupted, false);
    }
    if cut_by_cap && run_end == RunEnd::Completed {
        return (RunEnd::Capped, false);
    }
    (run_end, true)
}

/// Waits until nothing is in flight, a stop is requested, or `deadline`.
fn wait_drained(shared: &Shared, deadline: Instant) {
    let (lock, cond) = &shared.progress;
    let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
    shared.progress_waiting.store(true, Ordering::Release);
    while shared.in_flight() > 0 && Instant::now() < deadline && !interrupted() {
        guard = cond
            .wait_timeout(guard, Duration::from_millis(10))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    shared.progress_waiting.store(false, Ordering::Release);
}

fn start_aggregator(
    spec: &RunSpec,
    consumers: Vec<loadgen_worker::wire::RecordConsumer>,
    pids: Vec<nix::unistd::Pid>,
    doorbell: Arc<Doorbell>,
    shared: Arc<Shared>,
    control: crossbeam_channel::Receiver<Control>,
    status: crossbeam_channel::Sender<Status>,
) -> Result<std::thread::JoinHandle<AggregatorOutput>, RunError> {
    let events = match &spec.events_path {
        Some(path) => EventLog::create(path).map_err(RunError::Thread)?,
        None => EventLog::disabled(),
    };
    let tokens = match &spec.token_counter {
        Some(counter) => Some(
            TokenPool::start(
                counter.clone(),
                spec.tokenizer_threads,
                &spec.cpu_plan.coordinator_cores,
            )
            .map_err(RunError::Thread)?,
        ),
        None => None,
    };
    let input = AggregatorInput {
        consumers,
        pids,
        doorbell,
        shared,
        control,
        status,
        events,
        tokens,
        isl_client: spec.isl_client.clone(),
        prompt_data_json: spec.prompt_data_json.clone(),
        streaming: spec.streaming,
        warmup_samples: spec.warmup_samples,
        expected_samples: spec.num_samples,
        progress_line: spec.progress_line,
        closed_loop: matches!(spec.pattern, Pattern::Concurrency { .. }),
    };
    std::thread::Builder::new()
        .name("aggregator".into())
        .spawn(move || aggregate::run(input))
        .map_err(RunError::Thread)
}
