//! Benchmark execution: from a validated plan to a finished report directory and an exit code.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use loadgen_coordinator::aggregate::events::sample_uuid;
use loadgen_coordinator::aggregate::AggregatorOutput;
use loadgen_coordinator::cpu::{cores_available, CpuPlan};
use loadgen_coordinator::fork::{fork_child, kill_and_reap};
use loadgen_coordinator::metrics::{
    final_snapshot, MetricsOptions, RunState, SampleTable, Snapshot,
};
use loadgen_coordinator::schedule::IssueLags;
use loadgen_coordinator::{LoadPattern, RunEnd, RunError};
use loadgen_worker::request::Endpoint;
use loadgen_worker::run_worker;

use crate::error::AppError;
use crate::plan::{unix_now_ns, Plan, ViewFacts, FD_HEADROOM, PROGRESS_INTERVAL_ENV};
use crate::redact::redact;
use loadgen_coordinator::run::PhaseOutcome;

use crate::report::{
    client_wait_warning, console_summary, is_complete, report_txt, result_summary,
    with_accuracy_block, write_report_files, ClientTokenCounting, ClientWaitInfo, EndpointInfo,
    FailureKindCount, IssueLag, LoadPatternInfo, OpenDir, ReportDir, RunInfo, WarmupInfo,
};

/// Where a null-endpoint run's request bytes are addressed (they are built, never sent).
const NULL_REQUEST_BASE: &str = "http://127.0.0.1:9";

/// What RLIMIT_NOFILE needs for a process that holds `needed` descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FdAction {
    /// The soft limit already allows it.
    Enough,
    /// Raise the soft limit to `needed` (always permitted up to the hard limit).
    RaiseSoft,
    /// Raise both limits to `needed`: permitted only with CAP_SYS_RESOURCE (root) and up to
    /// fs.nr_open.
    RaiseHard,
}

/// The fd-limit rule, from the limits now and what one process needs.
fn fd_action(needed: u64, soft: u64, hard: u64) -> FdAction {
    if soft >= needed {
        FdAction::Enough
    } else if hard >= needed {
        FdAction::RaiseSoft
    } else {
        FdAction::RaiseHard
    }
}

/// Workers that would hold `connections` within a hard fd limit of `hard` (each needs
/// `FD_HEADROOM` beside its connections).
fn workers_within(connections: usize, hard: u64) -> u64 {
    (connections as u64).div_ceil(hard.saturating_sub(FD_HEADROOM).max(1))
}

/// Raises RLIMIT_NOFILE so that each of `workers` worker processes can hold its share of
/// `connections` (the workers inherit it through fork): the soft limit up to the hard one,
/// and the hard one too where this process may (root). Where it may not, or the embedded stub
/// (already forked, one process) could not hold every connection, a setup error before the
/// run says what to do, instead of connects failing mid-run.
fn raise_fd_limit(
    connections: usize,
    workers: usize,
    embedded: bool,
    verbose: bool,
) -> Result<(), AppError> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)
        .map_err(|e| AppError::Setup(format!("cannot read the file-descriptor limit: {e}")))?;
    let per_worker = connections.div_ceil(workers.max(1));
    let needed = per_worker as u64 + FD_HEADROOM;
    if embedded && connections as u64 + FD_HEADROOM > hard {
        return Err(AppError::Setup(format!(
            "the embedded stub would hold all {connections} connections in one process, but \
             the file-descriptor hard limit (ulimit -Hn) is {hard}; start llm-loadgen stub \
             max-throughput yourself (several of them may share one --port) and pass \
             --endpoints, or lower --max-connections / --concurrency"
        )));
    }
    let new_hard = match fd_action(needed, soft, hard) {
        FdAction::Enough => return Ok(()),
        FdAction::RaiseSoft => hard,
        FdAction::RaiseHard => needed,
    };
    setrlimit(Resource::RLIMIT_NOFILE, needed, new_hard).map_err(|e| {
        let advice = format!(
            "--workers {} spreads them within it",
            workers_within(connections, hard).max(workers as u64 + 1)
        );
        AppError::Setup(format!(
            "each worker needs {needed} file descriptors for its {per_worker} connections, but \
             the hard limit (ulimit -Hn) is {hard} and cannot be raised here ({e}); add workers \
             ({advice}), lower --max-connections / --concurrency, or raise the hard limit \
             (ulimit -Hn, LimitNOFILE=, /etc/security/limits.conf)"
        ))
    })?;
    if verbose {
        eprintln!(
            "raised the file-descriptor limit from {soft} to {needed} (hard limit {new_hard})"
        );
    }
    Ok(())
}

/// Whether `--json` was given: stdout then holds only the summary object, and the lines a run
/// prints for people go to stderr. Set once by `main` before the run.
static JSON_STDOUT: AtomicBool = AtomicBool::new(false);

/// Routes the run's output for `--json` (see `JSON_STDOUT`).
pub fn set_json_stdout(on: bool) {
    JSON_STDOUT.store(on, Ordering::Relaxed);
}

/// `--quiet`: no live view (set once by `main` before the run, as `JSON_STDOUT`).
static QUIET: AtomicBool = AtomicBool::new(false);

pub fn set_quiet(on: bool) {
    QUIET.store(on, Ordering::Relaxed);
}

/// What the plan's live view depends on outside it: `--quiet`, whether stderr is a terminal,
/// `NO_COLOR` (any non-empty value, as no-color.org says) and the plain line's period.
fn view_facts() -> ViewFacts {
    let interval = std::env::var(PROGRESS_INTERVAL_ENV).ok();
    ViewFacts {
        quiet: QUIET.load(Ordering::Relaxed),
        stderr_is_terminal: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        progress_interval_ms: interval.and_then(|v| v.trim().parse().ok()),
    }
}

/// Prints a line for people: on stdout, or on stderr under `--json`.
fn say(line: &str) {
    if JSON_STDOUT.load(Ordering::Relaxed) {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
}

/// `--json`'s object: the summary as result_summary.json holds it, then where the report is.
#[derive(serde::Serialize)]
struct JsonOutput<'a> {
    #[serde(flatten)]
    summary: &'a crate::report::ResultSummary,
    report_dir: String,
}

/// Prints the console summary (stderr under `--json`, which then prints the summary object on
/// stdout, formatted as result_summary.json is).
fn print_console_and_json(
    console: &str,
    summary: &crate::report::ResultSummary,
    dir: &std::path::Path,
) -> Result<(), AppError> {
    if !JSON_STDOUT.load(Ordering::Relaxed) {
        print!("{console}");
        let _ = std::io::stdout().flush();
        return Ok(());
    }
    eprint!("{console}");
    let object = JsonOutput { summary, report_dir: dir.display().to_string() };
    let mut bytes = loadgen_py::json::to_python_json(&object)
        .map_err(|e| AppError::Execution(format!("cannot print the summary as json: {e}")))?;
    bytes.push(b'\n');
    crate::commands::print_stdout(&crate::redact::redact_json(&String::from_utf8_lossy(&bytes)))
}

/// Runs the benchmark the plan describes and writes its report directory. Returns the exit code.
pub fn run_benchmark(mut plan: Plan) -> Result<i32, AppError> {
    let embedded = plan.endpoints.is_empty();
    let null = plan.endpoints.iter().any(crate::plan::EndpointUrl::is_null);
    let cores = cores_available();
    let c = &plan.connections;
    let cpu_plan = CpuPlan::new(&cores, c.workers, c.cpu_affinity, embedded);
    if plan.verbose > 0 {
        eprintln!("{cpu_plan}");
    }
    // Held (open and locked) until the run ends: no second run writes into it.
    let dir = claim_report_dir(&mut plan)?;
    let plan = &plan;

    // The reference's start-up marker: its aggregator touches `metrics/.ready` once it can take
    // signals, so a harness polls for it instead of sleeping.
    let _ = dir.touch("metrics/.ready");

    // Room for the small report files, held while events.jsonl grows and freed just
    // before they are written, so a disk that events.jsonl fills still takes them.
    let reserve = SpaceReserve::hold(&dir, report_reserve_bytes(plan.num_samples));
    if let Some(line) = crate::plan::start_wait_line(plan.start_at_unix_ns, unix_now_ns()) {
        eprintln!("{line}");
    }

    // The embedded stub is a child process, forked while we are still single-threaded.
    let mut stub = None;
    let urls: Vec<String> = if embedded {
        let (pid, url) = start_embedded_stub(&cpu_plan, plan.request.streaming)?;
        say(&format!(
            "no --endpoints given: benchmarking the embedded max-throughput stub at {url}"
        ));
        stub = Some(pid);
        vec![url]
    } else if null {
        say("endpoint null://: no network; each worker answers its samples itself, so this run \
             measures the client's own pipeline (its ceiling), not a server");
        // The request bytes are built for this address but never sent.
        vec![NULL_REQUEST_BASE.to_string()]
    } else {
        plan.endpoints.iter().map(|e| e.url.clone()).collect()
    };
    if embedded && plan.tokenizer.is_none() {
        say("no --tokenizer given: client token counts are off; the stub's usage gives the server basis");
    }
    if plan.dataset_is_synthetic {
        say(&format!(
            "no --dataset given: using the built-in synthetic dataset ({} prompts)",
            plan.dataset.rows.len()
        ));
    }
    let result = run_with_endpoints(plan, &dir, &urls, (cpu_plan, embedded), reserve);
    if let Some(pid) = stub {
        kill_and_reap(pid);
    }
    result
}

/// Claims the plan's report directory (`ReportDir::claim`) and, when the default name was
/// taken, points the plan (and its config.yaml) at the fresh one the run made instead.
fn claim_report_dir(plan: &mut Plan) -> Result<ReportDir, AppError> {
    let dir = ReportDir::claim(&plan.report_dir, plan.report_dir_default)?;
    if dir.path() != plan.report_dir {
        eprintln!(
            "note: {} exists; this run writes its report to {}",
            plan.report_dir.display(),
            dir.path().display()
        );
        plan.config_yaml = crate::plan::config_yaml_with_report_dir(
            &plan.config_yaml,
            &plan.report_dir,
            dir.path(),
        );
        plan.report_dir = dir.path().to_path_buf();
    }
    Ok(dir)
}

fn run_with_endpoints(
    plan: &Plan,
    dir: &ReportDir,
    urls: &[String],
    (cpu_plan, embedded): (CpuPlan, bool),
    reserve: Option<SpaceReserve<'_>>,
) -> Result<i32, AppError> {
    let endpoints = urls
        .iter()
        .map(|u| {
            let mut ep = Endpoint::parse(u).map_err(|e| {
                AppError::Setup(format!("cannot use endpoint {u}: {e}; check the host and port"))
            })?;
            if let Some(tls) = ep.tls.as_mut() {
                tls.verify = plan.tls_verify.clone();
            }
            Ok(ep)
        })
        .collect::<Result<Vec<_>, AppError>>()?;
    let c = &plan.connections;
    raise_fd_limit(c.max_connections, c.workers, embedded, plan.verbose > 0)?;
    let mut notes = Vec::new();
    let spec = plan.run_spec(&endpoints, cpu_plan, &view_facts(), &mut notes);
    crate::commands::print_notes(&notes);
    let mut spec = spec?;
    if plan.events {
        spec.events_file = Some(dir.create_fresh("events.jsonl").map_err(|e| {
            AppError::Setup(format!(
                "cannot create {}: {e}; choose another --report-dir",
                dir.path().join("events.jsonl").display()
            ))
        })?);
    }
    let output = loadgen_coordinator::run(spec, run_worker).map_err(|e| match e {
        // The worker's message names the endpoint it could not reach.
        RunError::WorkerSetup { .. } => {
            AppError::Setup(format!("{e}; check that the server is up and reachable"))
        }
        RunError::ReadyTimeout(_) => AppError::Setup(format!(
            "failed to connect to endpoint {}: {e}; check that the server is up and reachable",
            urls.join(", ")
        )),
        RunError::AggregatorFailed => AppError::Execution(e.to_string()),
        RunError::Interrupted => AppError::Interrupted,
        other => AppError::Setup(other.to_string()),
    })?;
    drop(reserve);
    // The URLs as the report names them: no userinfo, and the null endpoint as given.
    let null = plan.endpoints.iter().any(crate::plan::EndpointUrl::is_null);
    let shown: Vec<String> =
        if null { vec!["null://".to_string()] } else { urls.iter().map(|u| redact(u)).collect() };
    finish_run(plan, dir.open_dir(), output, embedded, &shown)
}

fn finish_run(
    plan: &Plan,
    out_dir: &OpenDir,
    output: loadgen_coordinator::RunOutput,
    embedded: bool,
    endpoint_urls: &[String],
) -> Result<i32, AppError> {
    let mut agg = output.aggregate;
    if plan.verbose > 0 {
        let samples = agg.counters.total_samples_completed + agg.counters.abandoned;
        eprintln!("coordinator threads, CPU over the run ({samples} samples):");
        for line in loadgen_coordinator::thread_cpu::per_sample_lines(&output.thread_cpu, samples) {
            eprintln!("{line}");
        }
    }
    // The rows are copied into the table's columns and freed before the metrics sort their
    // copies: a long run's peak memory is the table's, not both. They go in completion order
    // (ties in arrival order), the order of events.jsonl's `sample.complete` lines, so
    // `report DIR` sums the float series (TPOT) in the same order and rebuilds them exactly.
    let rows = std::mem::take(&mut agg.rows);
    let waits = client_waits_in_issue_order(&rows, &agg.sample_rows, &output.issue_lags);
    let issued_ns: Vec<u64> = rows.iter().map(|r| r.issued_ns).collect();
    agg.sample_rows = in_issue_order(&agg.sample_rows, &issued_ns);
    let mut order: Vec<u32> = (0..rows.len() as u32).collect();
    order.sort_by_key(|&i| rows[i as usize].complete_ns);
    let mut table = SampleTable::with_capacity(rows.len());
    for &i in &order {
        table.push(&rows[i as usize]);
    }
    drop((rows, order));
    table.set_chunk_delta_ns(std::mem::take(&mut agg.chunk_delta_ns));
    let interrupted = output.end == RunEnd::Interrupted;
    let capped = output.end == RunEnd::Capped;
    let primary = plan.token_count_source;
    let opts = MetricsOptions {
        streaming: plan.request.streaming,
        early_stopping: plan.early_stopping,
        primary,
        legacy_loadgen_qps: plan.legacy_loadgen_qps
            && matches!(plan.load_pattern, LoadPattern::Poisson { .. }),
        has_tokenizer: plan.tokenizer.is_some(),
    };
    let incomplete_reason = incomplete_reason(&agg, output.drain_timed_out, capped);
    let state = if interrupted {
        RunState::Interrupted
    } else if incomplete_reason.is_some() {
        RunState::Incomplete
    } else {
        RunState::Complete
    };
    let snapshot = final_snapshot(&table, &agg.counters, &opts, state);
    let mut info = run_info(plan, embedded, interrupted, incomplete_reason, agg.counters.abandoned);
    info.issue_lag = issue_lag(plan, &output.issue_lags, &waits);
    drop(waits);
    info.client_wait = Some(client_wait_info(plan, &snapshot, &table));
    // A material client wait is also issue lag (which ends at the write); its own warning
    // names the cause, so the schedule's is not given twice.
    let wait_warning = client_wait_warning(&snapshot, &info);
    if let Some(warning) = &wait_warning {
        eprintln!("warning: {warning}");
    }
    let wait = snapshot.series(loadgen_coordinator::metrics::snapshot::CLIENT_WAIT_NS);
    let lag_warning = info.issue_lag.as_ref().and_then(|l| {
        let explained = wait_warning.is_some() && crate::report::lag_is_the_wait(l.p99_ns, wait);
        l.warning().filter(|_| !explained)
    });
    if let Some(warning) = lag_warning {
        eprintln!("warning: {warning}");
    }
    add_failures(&mut info, &agg);
    let stats = loadgen_coordinator::metrics::endpoint_stats(&table, endpoint_urls.len());
    info.endpoints = endpoint_urls
        .iter()
        .zip(stats)
        .map(|(url, stat)| EndpointInfo { url: url.clone(), stat })
        .collect();
    let summary = result_summary(&snapshot, &info);
    let dir = &plan.report_dir;
    let written = (&snapshot, &summary, &info);
    let mut unwritten = write_all_files(plan, out_dir, written, &agg, &output.phases);
    write_shard_file(plan, out_dir, &output.clock, &mut unwritten);
    let (block, accuracy_error) = write_accuracy(
        plan,
        out_dir,
        &output.phases,
        (&summary, &info),
        interrupted,
        &mut unwritten,
    );
    // The console summary is printed whatever happened to the files: it may be all that
    // is left of the run.
    let mut console = console_summary(&summary, &info, dir);
    if let Some(block) = &block {
        console = with_accuracy_block(&console, block);
    }
    if capped {
        let cap_ms = plan.max_duration_ms.unwrap_or(0);
        console.push_str(&format!(
            "The run hit --runtime.max-duration-ms ({cap_ms} ms): what was still in flight \
             there was abandoned ({} samples)\n",
            agg.counters.abandoned
        ));
    }
    print_console_and_json(&redact(&console), &summary, dir)?;
    let unwritten_error = unwritten_message(dir, &unwritten);
    if interrupted {
        if let Some(msg) = &unwritten_error {
            eprintln!("error: {}", redact(msg));
        }
        return Err(AppError::Interrupted);
    }
    if !agg.dead_workers.is_empty() {
        return Err(AppError::Execution(format!(
            "{}; the report in {} covers what was measured{}",
            agg.dead_workers.iter().map(|(_, m)| m.as_str()).collect::<Vec<_>>().join("; "),
            dir.display(),
            unwritten_error.map_or(String::new(), |m| format!("; {m}"))
        )));
    }
    if let Some(msg) = unwritten_error {
        return Err(AppError::Execution(msg));
    }
    if let Some(msg) = accuracy_error {
        return Err(AppError::Execution(format!("{msg} (report in {})", dir.display())));
    }
    // An accuracy-only run has no performance phase to be complete.
    if plan.accuracy.mode == crate::plan::TestMode::Acc {
        return Ok(0);
    }
    if let Err(why) = is_complete(&summary, primary) {
        return Err(AppError::Execution(format!("{why} (report in {})", dir.display())));
    }
    Ok(0)
}

/// The most disk a run holds back for its report files. A run of a billion samples (a soak
/// capped by its duration) would otherwise reserve 64 GB; past this the small files, written
/// first, still fit, and only sample_idx_map.json may not.
pub const REPORT_RESERVE_BYTES_MAX: u64 = 64 << 20;

/// Bytes the small report files need at most: the summary, snapshot and report.txt
/// (about 80 KB together), config.yaml, and about 48 bytes per sample in
/// sample_idx_map.json; with room to spare, and at most `REPORT_RESERVE_BYTES_MAX`.
pub fn report_reserve_bytes(num_samples: u64) -> u64 {
    const FIXED_BYTES: u64 = 256 * 1024;
    const PER_SAMPLE_BYTES: u64 = 64;
    let bytes = FIXED_BYTES.saturating_add(num_samples.saturating_mul(PER_SAMPLE_BYTES));
    bytes.min(REPORT_RESERVE_BYTES_MAX)
}

/// A file of allocated blocks holding disk space for the report files; removed on drop.
#[derive(Debug)]
pub struct SpaceReserve<'a> {
    dir: &'a ReportDir,
}

impl<'a> SpaceReserve<'a> {
    /// The smallest reservation worth holding: below it the disk is full already.
    const BYTES_MIN: u64 = 16 * 1024;
    /// Its name in the report directory.
    pub const FILE: &'static str = ".llm-loadgen-reserve";

    /// Allocates up to `bytes` in `dir` (halving while the disk cannot give that much);
    /// `None` when the filesystem cannot allocate (no fallocate) or has no room at all. The
    /// file is made new (`ReportDir::create_fresh`), so a link planted there is not followed.
    pub fn hold(dir: &'a ReportDir, mut bytes: u64) -> Option<SpaceReserve<'a>> {
        use std::os::fd::AsRawFd;
        let file = dir.create_fresh(Self::FILE).ok()?;
        while bytes >= Self::BYTES_MIN {
            let len = libc::off_t::try_from(bytes).unwrap_or(libc::off_t::MAX);
            // fallocate(2), not posix_fallocate: where the filesystem cannot allocate, glibc's
            // posix_fallocate writes a byte into every block instead, which is slow and wears
            // the disk; fallocate fails (EOPNOTSUPP) and the run goes on without a reserve.
            // SAFETY: fallocate on a file descriptor we own, for a length that fits.
            let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
            if rc == 0 {
                return Some(SpaceReserve { dir });
            }
            let errno = std::io::Error::last_os_error().raw_os_error();
            if errno != Some(libc::ENOSPC) && errno != Some(libc::EFBIG) {
                break;
            }
            let _ = file.set_len(0);
            bytes /= 2;
        }
        drop(file);
        let _ = dir.remove(Self::FILE);
        None
    }
}

impl Drop for SpaceReserve<'_> {
    fn drop(&mut self) {
        let _ = self.dir.remove(Self::FILE);
    }
}

/// Why the run's report is incomplete, if it is.
fn incomplete_reason(
    agg: &AggregatorOutput,
    drain_timed_out: bool,
    capped: bool,
) -> Option<String> {
    if !agg.dead_workers.is_empty() {
        Some(format!("{} worker(s) died during the run", agg.dead_workers.len()))
    } else if drain_timed_out || (agg.timed_out && !capped) {
        Some("in-flight samples did not finish within the drain timeout".to_string())
    } else if agg.timed_out {
        Some("workers did not stop within 2 s of the --runtime.max-duration-ms cap".to_string())
    } else {
        None
    }
}

/// The failure kinds (messages redacted), the re-sent count, and whether events.jsonl
/// holds error lines to point to.
fn add_failures(info: &mut RunInfo, agg: &AggregatorOutput) {
    info.failures = agg
        .failures
        .iter()
        .map(|f| FailureKindCount {
            kind: f.kind.to_string(),
            count: f.count,
            first_message: redact(&f.first_message),
        })
        .collect();
    info.requests_resent = agg.counters.requests_resent;
    // Failed records of tracked samples get `error` lines; a dead worker's lost samples
    // get none, so point to events.jsonl only when a record-borne failure was tracked.
    info.events_has_errors = agg.events_error.is_none()
        && agg.counters.tracked_samples_failed > 0
        && agg.failures.iter().any(|f| f.kind != "worker_died");
}

/// Writes every report file, each on its own so that one that fails (events.jsonl on a
/// full disk) does not cost the others; returns those not written. events.jsonl was
/// written by the aggregator as the run went.
fn write_all_files(
    plan: &Plan,
    dir: &OpenDir,
    (snapshot, summary, info): (&Snapshot, &crate::report::ResultSummary, &RunInfo),
    agg: &AggregatorOutput,
    phases: &[PhaseOutcome],
) -> Vec<(&'static str, String)> {
    let mut unwritten: Vec<(&'static str, String)> = Vec::new();
    if let Some(err) = &agg.events_error {
        let why = if err.contains("(os error 28)") {
            "no space left on device".to_string()
        } else if err.contains("(os error 27)") {
            "file too large (the file-size limit, ulimit -f)".to_string()
        } else {
            err.clone()
        };
        unwritten.push(("events.jsonl", why));
    }
    // The small files first: they hold the measured numbers.
    for u in write_report_files(dir, snapshot, summary, info) {
        unwritten.push((u.file, io_reason(&u.error)));
    }
    if let Err(e) = dir.write_atomic("config.yaml", plan.config_yaml.as_bytes()) {
        unwritten.push(("config.yaml", io_reason(&e)));
    }
    let perf = plan.accuracy.mode != crate::plan::TestMode::Acc;
    let acc = idx_phases(plan, phases);
    let idx_map =
        |w: &mut dyn std::io::Write| write_sample_idx_map(w, &agg.sample_rows, perf, &acc);
    if let Err(e) = dir.write_atomic_with("sample_idx_map.json", idx_map) {
        unwritten.push(("sample_idx_map.json", io_reason(&e)));
    }
    unwritten
}

/// A sharded run's shard.json (what `merge` needs), and the warning for a late start.
fn write_shard_file(
    plan: &Plan,
    dir: &OpenDir,
    clock: &loadgen_coordinator::schedule::ClockAnchor,
    unwritten: &mut Vec<(&'static str, String)>,
) {
    if let Some(warning) = crate::report::late_start_warning(clock.start_offset_ns) {
        eprintln!("{warning}");
    }
    if let Some(file) = crate::report::shard_file(plan, clock) {
        if let Err(e) = crate::report::write_shard_file(dir, &file) {
            unwritten.push(("shard.json", io_reason(&e)));
        }
    }
}

/// Why a write failed, in the words users search for: a full disk and a file-size limit
/// are named as such.
fn io_reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => "no space left on device".to_string(),
        Some(libc::EFBIG) => "file too large (the file-size limit, ulimit -f)".to_string(),
        Some(libc::EDQUOT) => "disk quota exceeded".to_string(),
        _ => e.to_string(),
    }
}

/// The error naming each report file not written and why, if any.
fn unwritten_message(
    dir: &std::path::Path,
    unwritten: &[(&'static str, String)],
) -> Option<String> {
    if unwritten.is_empty() {
        return None;
    }
    let files: Vec<String> = unwritten.iter().map(|(f, why)| format!("{f} ({why})")).collect();
    Some(format!(
        "cannot write {} report file(s) in {}: {}; the summary above is what was measured; \
         free space or choose another --report-dir",
        unwritten.len(),
        dir.display(),
        files.join(", ")
    ))
}

fn run_info(
    plan: &Plan,
    embedded: bool,
    interrupted: bool,
    incomplete_reason: Option<String>,
    abandoned: u64,
) -> RunInfo {
    let (kind, target_qps, target_concurrency, legacy) = match plan.load_pattern {
        LoadPattern::Offline => ("max_throughput", None, None, None),
        LoadPattern::Poisson { target_qps, .. } => {
            ("poisson", Some(target_qps), None, Some(plan.legacy_loadgen_qps))
        }
        LoadPattern::Concurrency { n } => ("concurrency", None, Some(n), None),
    };
    RunInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
        git_sha: option_env!("LLM_LOADGEN_GIT_SHA").map(str::to_string),
        load_pattern: LoadPatternInfo {
            kind: kind.to_string(),
            target_qps,
            target_concurrency,
            use_legacy_loadgen_qps_metrics: legacy,
        },
        warmup: WarmupInfo {
            enabled: plan.warmup.enabled,
            n_requests: plan.warmup.requests,
            salt: plan.warmup.salt,
            drain: plan.warmup.drain,
            warmup_random_seed: plan.warmup.random_seed,
        },
        scheduler_random_seed: plan.scheduler_seed,
        dataloader_random_seed: plan.dataloader_seed,
        token_count_source: plan.token_count_source,
        embedded_stub: embedded,
        interrupted,
        incomplete_reason,
        abandoned,
        issue_lag: None,
        client_wait: None,
        failures: Vec::new(),
        requests_resent: 0,
        events_has_errors: false,
        client_token_counting: plan.tokenizer.as_ref().map(|_| {
            match plan.token_pool.live_threads {
                0 => ClientTokenCounting::AfterRun,
                threads => ClientTokenCounting::Live { threads },
            }
        }),
        endpoints: Vec::new(),
        shards: Vec::new(),
        mixed_clocks: None,
    }
}

/// The pool behind the run's client wait; its peak in flight is counted only when the wait is
/// material (it sorts every write and completion).
fn client_wait_info(plan: &Plan, snapshot: &Snapshot, table: &SampleTable) -> ClientWaitInfo {
    let material = crate::report::wait_is_material(snapshot);
    ClientWaitInfo {
        max_connections: plan.connections.max_connections as u64,
        pool_given: plan.connections.max_connections_given,
        peak_in_flight: material.then(|| crate::report::peak_in_flight(table)),
    }
}

/// Each Poisson sample's client wait (issued → written), in the order of `lags` (`None`: never
/// written, or not a Poisson run).
fn client_waits_in_issue_order(
    rows: &[loadgen_coordinator::metrics::SampleRow],
    sample_rows: &[(u64, u32)],
    lags: &IssueLags,
) -> Vec<Option<u64>> {
    let mut waits = vec![None; lags.lags_ns.len()];
    for (row, &(sample_id, _)) in rows.iter().zip(sample_rows) {
        let at = sample_id.checked_sub(lags.first_sample_id).map(|i| i as usize);
        if let Some(slot) = at.and_then(|i| waits.get_mut(i)) {
            *slot = row.client_wait_ns;
        }
    }
    waits
}

/// The issue-lag summary of a Poisson run: lower-method percentiles over the exact lags, each
/// from the schedule to the request's write (the scheduler's lateness plus the sample's client
/// wait, `waits`, in the lags' order).
fn issue_lag(plan: &Plan, lags: &IssueLags, waits: &[Option<u64>]) -> Option<IssueLag> {
    let LoadPattern::Poisson { target_qps, .. } = plan.load_pattern else { return None };
    if lags.lags_ns.is_empty() {
        return None;
    }
    let mut sorted: Vec<u64> = lags
        .lags_ns
        .iter()
        .zip(waits.iter().chain(std::iter::repeat(&None)))
        .map(|(&lag, wait)| lag.saturating_add(wait.unwrap_or(0)))
        .collect();
    sorted.sort_unstable();
    let at = |p: f64| sorted[((sorted.len() - 1) as f64 * p / 100.0).floor() as usize];
    let window_s = lags.last_issued_ns.saturating_sub(lags.first_scheduled_ns) as f64 / 1e9;
    let n = sorted.len() as u64;
    // n samples span n - 1 gaps; the first is issued at the window's start.
    let achieved_qps = if window_s > 0.0 { (n - 1) as f64 / window_s } else { target_qps };
    Some(IssueLag {
        n,
        p50_ns: at(50.0),
        p99_ns: at(99.0),
        max_ns: sorted[sorted.len() - 1],
        target_qps,
        achieved_qps,
    })
}

/// An accuracy phase in sample_idx_map.json: its name, first sample id, issued samples and
/// dataset rows (sample `k` of the phase sent row `k % unit_rows`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdxPhase {
    pub name: String,
    pub first_sample_id: u64,
    pub issued: u64,
    pub unit_rows: u64,
}

fn idx_phases(plan: &Plan, phases: &[PhaseOutcome]) -> Vec<IdxPhase> {
    phases
        .iter()
        .zip(&plan.accuracy.datasets)
        .map(|(p, d)| IdxPhase {
            name: p.name.clone(),
            first_sample_id: p.first_sample_id,
            issued: p.issued,
            unit_rows: d.dataset.rows.len() as u64,
        })
        .collect()
}

/// The performance samples `(sample id, dataset row)` in issue order, as the reference fills
/// its map while it issues: by issue stamp (`issued_ns`, one per sample, in the same order),
/// ties by sample id, the order of events.jsonl's `sample.issued` lines. The aggregator
/// holds them in completion order.
pub(crate) fn in_issue_order(rows: &[(u64, u32)], issued_ns: &[u64]) -> Vec<(u64, u32)> {
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_unstable_by_key(|&i| (issued_ns.get(i).copied().unwrap_or(u64::MAX), rows[i].0));
    order.into_iter().map(|i| rows[i]).collect()
}

/// `{"performance": {uuid: dataset_index}, <phase>: {…}}`, as the reference writes it
/// (`msgspec.json.format(..., indent=2)`): two-space indent, one key a line, no trailing
/// newline; an empty map is `{}`. An accuracy-only run has no `performance` phase.
pub(crate) fn write_sample_idx_map(
    out: &mut dyn std::io::Write,
    rows: &[(u64, u32)],
    perf: bool,
    phases: &[IdxPhase],
) -> std::io::Result<()> {
    out.write_all(b"{")?;
    let mut first_phase = true;
    let mut phase = |out: &mut dyn std::io::Write,
                     name: &str,
                     entries: &mut dyn Iterator<Item = (u64, u64)>| {
        let sep = if first_phase { "" } else { "," };
        first_phase = false;
        let name = serde_json::to_string(name).unwrap_or_default();
        write!(out, "{sep}\n  {name}: {{")?;
        let mut any = false;
        for (i, (sample_id, row)) in entries.enumerate() {
            let sep = if i > 0 { "," } else { "" };
            write!(out, "{sep}\n    \"{}\": {row}", sample_uuid(sample_id))?;
            any = true;
        }
        out.write_all(if any { b"\n  }" } else { b"}" })
    };
    if perf {
        phase(out, "performance", &mut rows.iter().map(|&(id, row)| (id, u64::from(row))))?;
    }
    for p in phases {
        let mut ids = (0..p.issued).map(|k| (p.first_sample_id + k, k % p.unit_rows.max(1)));
        phase(out, &p.name, &mut ids)?;
    }
    out.write_all(if first_phase { b"}" } else { b"\n}" })
}

/// Scores the run's accuracy datasets, writes accuracy_results.json and report.txt again
/// with the Accuracy block; returns the block for the console and a scoring error.
fn write_accuracy(
    plan: &Plan,
    dir: &OpenDir,
    phases: &[PhaseOutcome],
    (summary, info): (&crate::report::ResultSummary, &RunInfo),
    interrupted: bool,
    unwritten: &mut Vec<(&'static str, String)>,
) -> (Option<String>, Option<String>) {
    let (accuracy, error) = score_accuracy(plan, phases, summary, interrupted);
    let Some(results) = accuracy else { return (None, error) };
    let block = crate::report::accuracy::accuracy_block(&results);
    let text = with_accuracy_block(&report_txt(summary, info), &block);
    if let Err(e) = dir.write_atomic("report.txt", text.as_bytes()) {
        unwritten.push(("report.txt", io_reason(&e)));
    }
    if let Err(e) = crate::report::accuracy::write_accuracy_results(dir, &results) {
        unwritten.push(("accuracy/accuracy_results.json", io_reason(&e)));
    }
    (Some(block), error)
}

/// Scores the plan's datasets: each accuracy dataset in order, then the performance dataset's
/// own accuracy_config, as the reference lists them.
fn score_accuracy(
    plan: &Plan,
    phases: &[PhaseOutcome],
    summary: &crate::report::ResultSummary,
    interrupted: bool,
) -> (Option<crate::report::accuracy::AccuracyResults>, Option<String>) {
    use crate::report::accuracy::{score_run, DatasetType, ScoringJob};
    let acc = &plan.accuracy;
    if interrupted || (acc.datasets.is_empty() && acc.performance.is_none()) {
        return (None, None);
    }
    let mut jobs: Vec<ScoringJob<'_>> = Vec::new();
    for (i, d) in acc.datasets.iter().enumerate() {
        let s = &d.scoring;
        let duration_ns = phases.get(i).map_or(0, |p| p.end_ns.saturating_sub(p.start_ns));
        jobs.push(ScoringJob {
            dataset_name: &d.name,
            dataset_type: DatasetType::Accuracy,
            scorer: s.scorer,
            extractor: s.extractor,
            ground_truth_column: s.ground_truth_column.as_deref(),
            ground_truth: &s.ground_truth,
            num_repeats: u64::from(s.num_repeats),
            total_samples: d.dataset.rows.len() as u64 * u64::from(s.num_repeats),
            duration_s: duration_ns as f64 / 1e9,
        });
    }
    if let Some(s) = &acc.performance {
        jobs.push(ScoringJob {
            dataset_name: "performance",
            dataset_type: DatasetType::Performance,
            scorer: s.scorer,
            extractor: s.extractor,
            ground_truth_column: s.ground_truth_column.as_deref(),
            ground_truth: &s.ground_truth,
            num_repeats: 1,
            total_samples: summary.n_samples_issued,
            duration_s: summary.duration_ns.unwrap_or(0) as f64 / 1e9,
        });
    }
    let count = plan.tokenizer.as_ref().map(|t| move |text: &str| t.count(text).ok());
    let counter = count.as_ref().map(|c| c as crate::report::accuracy::OslCounter<'_>);
    match score_run(&plan.report_dir, &jobs, plan.token_count_source, counter) {
        Ok(results) => (Some(results), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// Forks the embedded max-throughput stub and returns its pid and URL. Must run before any
/// thread exists in this process.
fn start_embedded_stub(
    cpu_plan: &CpuPlan,
    streaming: bool,
) -> Result<(nix::unistd::Pid, String), AppError> {
    let (read_fd, write_fd) = nix::unistd::pipe()
        .map_err(|e| AppError::Setup(format!("cannot start the embedded stub: {e}")))?;
    let cores = cpu_plan.stub_cores.clone();
    let workers = cores.len().max(1);
    let (read_raw, write_raw) = (read_fd.as_raw_fd(), write_fd.as_raw_fd());
    let pid = fork_child(move || {
        // SAFETY: the child owns its copies of both pipe ends; it closes the read end and
        // turns the write end into a File exactly once.
        let write_fd = unsafe {
            libc::close(read_raw);
            OwnedFd::from_raw_fd(write_raw)
        };
        let mut cfg = loadgen_stubs::StubConfig::new(loadgen_stubs::StubKind::MaxThroughput);
        cfg.workers = workers;
        cfg.stream_default = streaming;
        cfg.pin_cores = if cores.is_empty() { None } else { Some(cores) };
        let mut pipe = std::fs::File::from(write_fd);
        match loadgen_stubs::StubServer::start(cfg) {
            Ok(server) => {
                let _ = writeln!(pipe, "{}", server.url());
                drop(pipe);
                server.wait();
                0
            }
            Err(e) => {
                let _ = writeln!(pipe, "error {e}");
                1
            }
        }
    })
    .map_err(|e| AppError::Setup(format!("cannot fork the embedded stub: {e}")))?;
    drop(write_fd);
    let mut text = String::new();
    let mut file = std::fs::File::from(read_fd);
    let _ = file.read_to_string(&mut text);
    let line = text.trim();
    if let Some(url) = line.strip_prefix("http://") {
        Ok((pid, format!("http://{url}")))
    } else {
        kill_and_reap(pid);
        Err(AppError::Setup(format!("the embedded stub did not start: {line}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_reserve_is_capped_for_huge_runs() {
        assert_eq!(report_reserve_bytes(0), 256 * 1024);
        assert_eq!(report_reserve_bytes(1000), 256 * 1024 + 64_000);
        assert_eq!(report_reserve_bytes(1_000_000_000), REPORT_RESERVE_BYTES_MAX);
        assert_eq!(report_reserve_bytes(u64::MAX), REPORT_RESERVE_BYTES_MAX);
    }

    #[test]
    fn sample_idx_map_is_indented_as_the_reference_writes_it() {
        let text = |rows: &[(u64, u32)]| {
            let mut out = Vec::new();
            write_sample_idx_map(&mut out, rows, true, &[]).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(text(&[]), "{\n  \"performance\": {}\n}");
        let two = text(&[(0, 776), (1, 507)]);
        let (a, b) = (sample_uuid(0), sample_uuid(1));
        assert_eq!(
            two,
            format!("{{\n  \"performance\": {{\n    \"{a}\": 776,\n    \"{b}\": 507\n  }}\n}}")
        );
        let json: serde_json::Value = serde_json::from_str(&two).unwrap();
        assert_eq!(json["performance"][&b], 507);
    }

    #[test]
    fn sample_idx_map_rows_follow_issue_order_not_completion_order() {
        // Completion order: sample 2 answered first, then 0, then 1 and 3 issued together.
        let rows = [(2, 20), (0, 0), (3, 30), (1, 10)];
        let issued_ns = [300, 100, 200, 200];
        assert_eq!(in_issue_order(&rows, &issued_ns), [(0, 0), (1, 10), (3, 30), (2, 20)]);
        assert_eq!(in_issue_order(&[], &[]), []);
    }

    #[test]
    fn the_fd_limit_is_raised_as_far_as_it_must_be() {
        assert_eq!(fd_action(10_256, 20_000, 20_000), FdAction::Enough);
        assert_eq!(fd_action(10_256, 1_024, 20_000), FdAction::RaiseSoft);
        assert_eq!(fd_action(20_000, 1_024, 20_000), FdAction::RaiseSoft);
        assert_eq!(fd_action(20_257, 20_000, 20_000), FdAction::RaiseHard);
        // 40,000 connections within a hard limit of 20,000: three workers of 13,334.
        assert_eq!(workers_within(40_000, 20_000), 3);
        assert_eq!(workers_within(40_000, 100), 40_000, "a limit below the headroom");
    }
}
