//! Benchmark execution: from a validated plan to a finished report directory and an exit code.

pub mod audit;
mod profiling;
mod spill;

use std::cell::RefCell;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};

use loadgen_coordinator::cpu::{cores_available, CpuPlan};
use loadgen_coordinator::fork::{fork_child, kill_and_reap};
use loadgen_coordinator::metrics::column::Column;
use loadgen_coordinator::metrics::sort_spool::TupleSpool;
use loadgen_coordinator::metrics::spool::RowSpool;
use loadgen_coordinator::metrics::{final_snapshot, MetricsOptions, RunState, SampleTable};
use loadgen_coordinator::{PhaseHook, RunEnd, RunError};
use loadgen_report::goodput::goodput_of_run;
use loadgen_report::profiling::ProfilingRecord;
use loadgen_worker::request::Endpoint;
use loadgen_worker::run_worker;

use crate::error::AppError;
use crate::plan::{unix_now_ns, Plan, ViewFacts, FD_HEADROOM, PROGRESS_INTERVAL_ENV};
use crate::redact::redact;
use profiling::ProfileController;

use crate::report::{
    add_failures, client_wait_info, console_summary, incomplete_reason, is_complete, issue_lag,
    report_reserve_bytes, result_summary, run_info, run_warnings, unwritten_message,
    with_accuracy_block, write_accuracy, write_all_files, write_shard, EndpointInfo, OpenDir,
    PerfRows, ReportDir, SpaceReserve,
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

/// `say`, for the commands that run benchmarks in a series (`sweep`).
pub fn say_line(line: &str) {
    say(line);
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
pub fn run_benchmark(plan: Plan) -> Result<i32, AppError> {
    run_benchmark_in(plan).map(|(code, _)| code)
}

/// `run_benchmark`, with the report directory the run took (a fresh one when the default name
/// existed).
pub fn run_benchmark_in(mut plan: Plan) -> Result<(i32, std::path::PathBuf), AppError> {
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
        let (pid, url) = start_embedded_stub(&cpu_plan, &plan.request)?;
        let which = match plan.request.api {
            loadgen_worker::request::ApiType::Videogen => "video",
            _ => "max-throughput",
        };
        say(&format!("no --endpoints given: benchmarking the embedded {which} stub at {url}"));
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
    let video = plan.request.api == loadgen_worker::request::ApiType::Videogen;
    if embedded && plan.tokenizer.is_none() && !video {
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
    result.map(|code| (code, plan.report_dir.clone()))
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
    spec.spill = spill::run_spill(plan, dir.path())?;
    if plan.events {
        spec.events_file = Some(dir.create_fresh("events.jsonl").map_err(|e| {
            AppError::Setup(format!(
                "cannot create {}: {e}; choose another --report-dir",
                dir.path().join("events.jsonl").display()
            ))
        })?);
    }
    // The profiler's triggers: start when the performance phase starts, stop once the run's
    // phases are over (whether it ended well or not), as the reference's.
    let profiler = plan.profiling.as_ref().map(|p| {
        let embedded_url = urls.first().map_or("", String::as_str);
        Rc::new(RefCell::new(ProfileController::new(p, embedded_url, plan.tls_verify.clone())))
    });
    spec.on_performance_start =
        profiler.clone().map(|c| -> PhaseHook { Box::new(move || c.borrow_mut().start()) });
    let output = loadgen_coordinator::run(spec, run_worker);
    let profiling = profiler.and_then(Rc::into_inner).map(|c| {
        let mut c = c.into_inner();
        c.stop(output.is_ok());
        c.record()
    });
    let output = output.map_err(|e| match e {
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
    finish_run(plan, dir.open_dir(), output, (embedded, profiling), &shown)
}

/// The console summary of a finished run: the report's, with the line on what sized the run
/// after its `Samples:` line, the accuracy block, and the cap when the run hit it.
fn console_text(
    plan: &Plan,
    (summary, info): (&crate::report::ResultSummary, &crate::report::RunInfo),
    accuracy_block: Option<&str>,
    capped: bool,
) -> String {
    let console = console_summary(summary, info, &plan.report_dir);
    let mut console = with_line_after(&console, "Samples: ", &run_length_line(plan));
    if let Some(block) = accuracy_block {
        console = with_accuracy_block(&console, block);
    }
    if capped {
        console.push_str(&capped_note(plan, info.abandoned));
    }
    console
}

/// What sized the run and how long it was meant to take; a shard says its share.
fn run_length_line(plan: &Plan) -> String {
    let line = plan.sample_count.describe(&plan.load_pattern);
    match &plan.shard {
        Some(_) => format!("{line} (this shard issues {} of them)", plan.num_samples),
        None => line,
    }
}

/// `text` with `line` after its first line that starts with `prefix` (at the end when none).
fn with_line_after(text: &str, prefix: &str, line: &str) -> String {
    let mut out = String::with_capacity(text.len() + line.len() + 1);
    let mut placed = false;
    for each in text.split_inclusive('\n') {
        out.push_str(each);
        if !placed && each.starts_with(prefix) {
            out.push_str(line);
            out.push('\n');
            placed = true;
        }
    }
    if !placed {
        out.push_str(line);
        out.push('\n');
    }
    out
}

fn finish_run(
    plan: &Plan,
    out_dir: &OpenDir,
    output: loadgen_coordinator::RunOutput,
    (embedded, profiling): (bool, Option<ProfilingRecord>),
    endpoint_urls: &[String],
) -> Result<i32, AppError> {
    let mut agg = output.aggregate;
    if plan.verbose > 0 {
        print_thread_cpu(&agg.counters, &output.thread_cpu);
    }
    let (table, waits, sample_rows) = sample_table(&mut agg, &output.issue_lags, plan);
    let interrupted = output.end == RunEnd::Interrupted;
    let capped = output.end == RunEnd::Capped;
    let primary = plan.token_count_source;
    let opts = MetricsOptions {
        streaming: plan.request.streaming,
        early_stopping: plan.early_stopping,
        primary,
        legacy_loadgen_qps: plan.legacy_loadgen_qps,
        has_tokenizer: plan.tokenizer.is_some(),
    };
    let incomplete_reason = incomplete_reason(&agg, output.drain_timed_out, capped);
    let state = run_state(interrupted, incomplete_reason.is_some());
    let snapshot = final_snapshot(&table, &agg.counters, &opts, state);
    let spill_error = spill::check_spill(plan, table.spill());
    let mut info = run_info(plan, embedded, interrupted, incomplete_reason, agg.counters.abandoned);
    // The binary's commit (build.rs); the report crate is built without it.
    info.git_sha = option_env!("LLM_LOADGEN_GIT_SHA").map(str::to_string);
    let conversations = plan.agentic.as_ref().map(|a| &*a.conversations);
    let turns_left = &agg.unrecorded_turns;
    info.agentic =
        loadgen_report::agentic::agentic_of_run(&table, conversations, turns_left, &opts);
    info.issue_lag = issue_lag(plan, &output.issue_lags, waits);
    info.client_wait = Some(client_wait_info(plan, &snapshot, &table));
    info.goodput = goodput_of_run(&table, &plan.slo, primary, opts.has_tokenizer);
    for warning in run_warnings(&snapshot, &info) {
        eprintln!("warning: {warning}");
    }
    add_failures(&mut info, &agg);
    info.profiling = profiling;
    info.endpoints = endpoint_infos(&table, endpoint_urls);
    let summary = result_summary(&snapshot, &info);
    let dir = &plan.report_dir;
    let written = (&snapshot, &summary, &info);
    let rows = perf_rows(sample_rows, std::mem::take(&mut agg.untracked_sample_rows), plan);
    let mut unwritten = write_all_files(plan, out_dir, written, (&agg, rows), &output.phases);
    if let Some(record) = &info.profiling {
        profiling::write_profiling_json(out_dir, record);
    }
    write_shard(plan, out_dir, &output.clock, &mut unwritten);
    let (block, accuracy_error) = write_accuracy(
        plan,
        out_dir,
        &output.phases,
        (&summary, &info, perf_issued(plan, &summary, &agg.counters, &output.phases)),
        interrupted,
        &mut unwritten,
    );
    // The console summary is printed whatever happened to the files: it may be all that
    // is left of the run.
    let console = console_text(plan, (&summary, &info), block.as_deref(), capped);
    print_console_and_json(&redact(&console), &summary, dir)?;
    let unwritten_error = unwritten_message(dir, &unwritten).or(spill_error);
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

/// The snapshot's state: interrupted, else incomplete (a reason was found), else complete.
fn run_state(interrupted: bool, incomplete: bool) -> RunState {
    if interrupted {
        RunState::Interrupted
    } else if incomplete {
        RunState::Incomplete
    } else {
        RunState::Complete
    }
}

/// Each endpoint's figures, named by its URL.
fn endpoint_infos(table: &SampleTable, endpoint_urls: &[String]) -> Vec<EndpointInfo> {
    let stats = loadgen_coordinator::metrics::endpoint_stats(table, endpoint_urls.len());
    let urls = endpoint_urls.iter();
    urls.zip(stats).map(|(url, stat)| EndpointInfo { url: url.clone(), stat }).collect()
}

/// The console's note on a run that hit its max duration.
fn capped_note(plan: &Plan, abandoned: u64) -> String {
    let cap_ms = plan.max_duration_ms.unwrap_or(0);
    format!(
        "The run hit --runtime.max-duration-ms ({cap_ms} ms): what was still in flight there \
         was abandoned ({abandoned} samples)\n"
    )
}

/// The run's rows as the metrics' table (spilling as the run's rows did), the Poisson samples'
/// client waits (`(sample id, wait, 0)`, for the issue lags), and the `(sample id, dataset row)`
/// pairs in issue order. The rows go
/// in completion order (ties in arrival order), the order of events.jsonl's `sample.complete`
/// lines, so `report DIR` sums the float series (TPOT) in the same order and rebuilds them
/// exactly. An agentic run's table names each row's dataset row (its conversation and turn).
fn sample_table(
    agg: &mut loadgen_coordinator::aggregate::AggregatorOutput,
    issue_lags: &loadgen_coordinator::schedule::IssueLags,
    plan: &Plan,
) -> (SampleTable, TupleSpool, TupleSpool) {
    let rows = std::mem::replace(&mut agg.rows, RowSpool::new(None, 0));
    let agentic = plan.agentic.is_some();
    let spill = agg.chunk_delta_ns.spill_handle();
    let mut table = SampleTable::new(rows.len(), spill.clone());
    let lagged =
        issue_lags.first_sample_id..issue_lags.first_sample_id + issue_lags.lags_ns.len() as u64;
    let mut waits = TupleSpool::new("client_waits", spill.clone());
    let mut in_issue_order = TupleSpool::new("issue_order", spill).with_room(rows.len());
    rows.drain_in_completion_order(|r| {
        if let (true, Some(wait)) = (lagged.contains(&r.sample_id), r.row.client_wait_ns) {
            waits.push((r.sample_id, wait, 0));
        }
        in_issue_order.push((r.row.issued_ns, r.sample_id, r.dataset_row));
        if agentic {
            table.push_with_dataset_row(&r.row, r.dataset_row);
        } else {
            table.push(&r.row);
        }
    });
    let chunk_delta_ns = std::mem::replace(&mut agg.chunk_delta_ns, Column::new("gaps", None));
    table.set_chunk_delta_ns(chunk_delta_ns);
    (table, waits, in_issue_order)
}

/// The performance samples of sample_idx_map.json, in issue order; an agentic run's turns
/// issued after its tracking window closed follow, in issue order too (`untracked`). The audit
/// phase's dataset is its one row (`audit.sample_index`): the map names the dataset row it is,
/// as the reference's does.
fn perf_rows(
    in_issue_order: TupleSpool,
    mut untracked: Vec<(u64, u32, u64)>,
    plan: &Plan,
) -> PerfRows<'static> {
    let audit_row = plan.audit_row.and_then(|r| u32::try_from(r).ok());
    untracked.sort_unstable_by_key(|&(_, _, issued_ns)| issued_ns);
    Box::new(move |f| {
        in_issue_order.drain_sorted(|(_, sample_id, row)| f(sample_id, audit_row.unwrap_or(row)));
        untracked
            .into_iter()
            .for_each(|(sample_id, row, _)| f(sample_id, audit_row.unwrap_or(row)));
    })
}

/// Samples the performance phase issued: the tracked ones, and in an agentic run also the
/// turns issued after its tracking window closed (every sample but the accuracy phases').
fn perf_issued(
    plan: &Plan,
    summary: &loadgen_report::ResultSummary,
    counters: &loadgen_coordinator::metrics::RunCounters,
    accuracy_phases: &[loadgen_coordinator::phase::PhaseOutcome],
) -> u64 {
    if plan.agentic.is_none() {
        return summary.n_samples_issued;
    }
    let accuracy: u64 = accuracy_phases.iter().map(|p| p.issued).sum();
    counters.total_samples_issued.saturating_sub(accuracy)
}

/// `-v`: each coordinator thread's CPU over the run, per sample.
fn print_thread_cpu(
    counters: &loadgen_coordinator::metrics::RunCounters,
    thread_cpu: &[loadgen_coordinator::thread_cpu::ThreadCpu],
) {
    let samples = counters.total_samples_completed + counters.abandoned;
    eprintln!("coordinator threads, CPU over the run ({samples} samples):");
    for line in loadgen_coordinator::thread_cpu::per_sample_lines(thread_cpu, samples) {
        eprintln!("{line}");
    }
}

/// Forks the embedded max-throughput stub (the video stub for a videogen run) and returns its
/// pid and URL. Must run before any thread exists in this process.
fn start_embedded_stub(
    cpu_plan: &CpuPlan,
    request: &loadgen_worker::request::RequestOptions,
) -> Result<(nix::unistd::Pid, String), AppError> {
    let streaming = request.streaming;
    let kind = match request.api {
        loadgen_worker::request::ApiType::Videogen => loadgen_stubs::StubKind::Video,
        _ => loadgen_stubs::StubKind::MaxThroughput,
    };
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
        let mut cfg = loadgen_stubs::StubConfig::new(kind);
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
