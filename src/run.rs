//! Benchmark execution: from a validated plan to a finished report directory and an exit code.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use loadgen_coordinator::aggregate::events::sample_uuid;
use loadgen_coordinator::aggregate::tokens::{TokenCounter, TokenPoolPlan};
use loadgen_coordinator::aggregate::AggregatorOutput;
use loadgen_coordinator::cpu::{cores_available, tokenizer_threads, CpuPlan};
use loadgen_coordinator::fork::{fork_child, kill_and_reap};
use loadgen_coordinator::metrics::{
    final_snapshot, MetricsOptions, RunState, SampleTable, TokenCountSource,
};
use loadgen_coordinator::schedule::{IssueLags, Pattern};
use loadgen_coordinator::{RunEnd, RunError, RunSpec};
use loadgen_worker::http::ports::{
    bind_from_slot_over_sources, ephemeral_even_ports, ephemeral_range, ports_per_source,
    source_addresses_for, SourceChoice, SOURCE_PORT_BUDGET_PERCENT,
};
use loadgen_worker::request::{self, Endpoint, Prompt, RequestOptions, RequestTable, RowParams};
use loadgen_worker::synthetic::SyntheticResponse;
use loadgen_worker::wire::RingSizes;
use loadgen_worker::WorkerSpec;

use crate::dataset::Row;
use crate::error::AppError;
use crate::plan::{split_share, warm_connections, ApiType, LoadPattern, Plan};
use crate::redact::redact;
use crate::report::{
    console_summary, is_complete, result_summary, write_atomic, write_atomic_with,
    write_report_files, ClientTokenCounting, FailureKindCount, IssueLag, LoadPatternInfo, RunInfo,
    WarmupInfo,
};

/// Connections a worker may hold at most (a named limit; file descriptors are the real bound).
pub const MAX_CONNECTIONS_PER_WORKER: usize = 65_536;
/// The longest output a record carries; longer outputs are truncated (and counted).
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// Where a null-endpoint run's request bytes are addressed (they are built, never sent).
const NULL_REQUEST_BASE: &str = "http://127.0.0.1:9";

/// File descriptors a worker needs beside its connections (rings, wake-ups, stdio, io_uring).
pub const FD_HEADROOM: u64 = 256;

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

/// Runs the benchmark the plan describes and writes its report directory. Returns the exit code.
pub fn run_benchmark(plan: &Plan) -> Result<i32, AppError> {
    if plan.api_type == ApiType::VideoGen {
        return Err(AppError::Setup(
            "api type videogen is not supported by this version; use openai, openai_completions or sglang".into(),
        ));
    }
    let embedded = plan.endpoints.is_empty();
    let null = plan.endpoints.iter().any(crate::plan::EndpointUrl::is_null);
    let cores = cores_available();
    let cpu_plan = CpuPlan::new(&cores, plan.workers, plan.cpu_affinity, embedded);
    if plan.verbose > 0 {
        eprintln!("{cpu_plan}");
    }
    std::fs::create_dir_all(&plan.report_dir).map_err(|e| {
        AppError::Setup(format!(
            "cannot create the report directory {}: {e}; pass a writable --report-dir",
            plan.report_dir.display()
        ))
    })?;

    // Room for the small report files, held while events.jsonl grows and freed just
    // before they are written, so a disk that events.jsonl fills still takes them.
    let reserve = SpaceReserve::hold(&plan.report_dir, report_reserve_bytes(plan.num_samples));

    // The embedded stub is a child process, forked while we are still single-threaded.
    let mut stub = None;
    let urls: Vec<String> = if embedded {
        let (pid, url) = start_embedded_stub(&cpu_plan, plan.streaming)?;
        println!("no --endpoints given: benchmarking the embedded max-throughput stub at {url}");
        stub = Some(pid);
        vec![url]
    } else if null {
        println!(
            "endpoint null://: no network; each worker answers its samples itself, so this run \
             measures the client's own pipeline (its ceiling), not a server"
        );
        // The request bytes are built for this address but never sent.
        vec![NULL_REQUEST_BASE.to_string()]
    } else {
        plan.endpoints.iter().map(|e| e.url.clone()).collect()
    };
    if embedded && plan.tokenizer.is_none() {
        println!("no --tokenizer given: client token counts are off; the stub's usage gives the server basis");
    }
    if plan.dataset_is_synthetic {
        println!(
            "no --dataset given: using the built-in synthetic dataset ({} prompts)",
            plan.dataset.rows.len()
        );
    }
    let result = run_with_endpoints(plan, &urls, cpu_plan, embedded, reserve);
    if let Some(pid) = stub {
        kill_and_reap(pid);
    }
    result
}

fn run_with_endpoints(
    plan: &Plan,
    urls: &[String],
    cpu_plan: CpuPlan,
    embedded: bool,
    reserve: Option<SpaceReserve>,
) -> Result<i32, AppError> {
    let endpoints = urls
        .iter()
        .map(|u| {
            Endpoint::parse(u).map_err(|e| {
                AppError::Setup(format!("cannot use endpoint {u}: {e}; check the host and port"))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let api = worker_api(plan.api_type);
    let tables = request_tables(plan, &endpoints, api)?;
    let (isl_client, prompt_data_json, token_counter) = client_counts(plan);
    let token_pool = token_pool_plan(plan, &cpu_plan);

    // A closed loop of N holds exactly N connections, one per sample in flight.
    let (workers, connections) = match plan.load_pattern {
        LoadPattern::Concurrency { n } => {
            let n = n as usize;
            (plan.workers.clamp(1, n), n)
        }
        _ => {
            let workers = plan.workers.max(1);
            (workers, plan.max_connections.max(workers))
        }
    };
    let worker_specs = worker_specs(plan, &endpoints, &tables, workers, connections)?;
    if plan.verbose > 0 {
        let warm: u32 = worker_specs.iter().map(|w| w.warm_connections.max(1)).sum();
        eprintln!(
            "connections: pool {connections} across {workers} worker(s), {warm} opened before \
             the start, the rest on demand"
        );
    }
    let per_worker_conns = connections.div_ceil(workers);
    raise_fd_limit(connections, workers, embedded, plan.verbose > 0)?;
    let ring_sizes = RingSizes {
        issue_slots: (per_worker_conns * 2).clamp(1024, 1 << 16),
        record_bytes: 8 << 20,
    };
    let pattern = match plan.load_pattern {
        LoadPattern::Offline => Pattern::Offline,
        LoadPattern::Poisson { target_qps } => {
            Pattern::Poisson { target_qps, seed: plan.scheduler_seed }
        }
        LoadPattern::Concurrency { n } => Pattern::Concurrency { n: u64::from(n) },
    };
    let warmup_samples = if plan.warmup.enabled {
        plan.warmup.requests.unwrap_or(plan.dataset.rows.len() as u64)
    } else {
        0
    };
    let spec = RunSpec {
        workers: worker_specs,
        cpu_plan,
        pattern,
        num_samples: plan.num_samples,
        warmup_samples,
        warmup_drain: plan.warmup.drain,
        dataset_rows: plan.dataset.rows.len(),
        dataloader_seed: plan.dataloader_seed,
        max_duration: plan.max_duration_ms.filter(|&ms| ms > 0).map(Duration::from_millis),
        drain_timeout: Duration::from_millis(plan.drain_timeout_ms),
        warmup_drain_timeout: Duration::from_millis(plan.warmup.drain_timeout_ms),
        ready_timeout: Duration::from_millis(plan.worker_init_timeout_ms),
        ring_sizes,
        streaming: plan.streaming,
        isl_client: Arc::new(isl_client),
        prompt_data_json: Arc::new(prompt_data_json),
        token_counter,
        token_pool,
        events_path: plan.events.then(|| plan.report_dir.join("events.jsonl")),
        progress_line: std::io::IsTerminal::is_terminal(&std::io::stderr()),
        secrets: crate::redact::registered_secrets(),
    };
    let output = loadgen_coordinator::run(spec).map_err(|e| match e {
        RunError::WorkerSetup { .. } | RunError::ReadyTimeout(_) => AppError::Setup(format!(
            "failed to connect to endpoint {}: {e}; check that the server is up and reachable",
            urls.join(", ")
        )),
        RunError::AggregatorFailed => AppError::Execution(e.to_string()),
        RunError::Interrupted => AppError::Interrupted,
        other => AppError::Setup(other.to_string()),
    })?;
    drop(reserve);
    finish_run(plan, output, embedded)
}

/// Every row's request bytes, built once per row and endpoint, before the fork.
fn request_tables(
    plan: &Plan,
    endpoints: &[Endpoint],
    api: request::ApiType,
) -> Result<Vec<Arc<RequestTable>>, AppError> {
    let opts = RequestOptions {
        api,
        model: plan.model.clone(),
        streaming: plan.streaming,
        stream_include_usage: plan.stream_include_usage,
        max_output_tokens: plan.max_output_tokens,
        min_output_tokens: plan.min_output_tokens,
        temperature: plan.temperature,
        top_p: plan.top_p,
        top_k: plan.top_k,
        seed: plan.seed,
        sampling: plan.sampling.clone(),
        extra: plan.extra_body.clone(),
    };
    let mut tables = Vec::with_capacity(endpoints.len());
    for ep in endpoints {
        let mut table = RequestTable::new();
        for (i, row) in plan.dataset.rows.iter().enumerate() {
            // The row's own n and drawn output length are decided here, once, before the fork.
            let params =
                RowParams { n: row.n, max_output_tokens: plan.row_output_tokens.get(i).copied() };
            let body = request::body_json_row(&opts, prompt_of(row), params).map_err(|e| {
                AppError::Input(format!("dataset row {i} cannot become a request: {e}"))
            })?;
            table.push(&request::http_request(
                ep,
                api,
                plan.api_key.as_deref(),
                plan.streaming,
                &body,
            ));
        }
        tables.push(Arc::new(table));
    }

    Ok(tables)
}

/// The client's prompt counts per row, each row's `PromptData` JSON for `sample.issued`, and the
/// client tokenizer for the outputs (none without a tokenizer).
fn client_counts(plan: &Plan) -> (Vec<Option<u32>>, Vec<String>, Option<TokenCounter>) {
    let isl_client: Vec<Option<u32>> = match &plan.tokenizer {
        Some(tok) => plan.dataset.rows.iter().map(|r| tok.count_row(r).ok()).collect(),
        None => {
            plan.dataset.rows.iter().map(|r| r.token_ids.as_ref().map(|t| t.len() as u32)).collect()
        }
    };
    let prompt_data_json: Vec<String> = plan.dataset.rows.iter().map(prompt_data_json).collect();
    let token_counter: Option<TokenCounter> = plan.tokenizer.as_ref().map(|tok| {
        let tok = tok.clone_for_thread();
        Arc::new(move |s: &str| tok.count(s)) as TokenCounter
    });
    (isl_client, prompt_data_json, token_counter)
}

/// The client tokenizer pool of the run: live threads on the CPU plan's spare cores (none
/// where there are none, unless asked), a drain pool over the whole machine after the last
/// sample, bounded by `--metrics-drain-timeout`.
fn token_pool_plan(plan: &Plan, cpu_plan: &CpuPlan) -> TokenPoolPlan {
    let threads = tokenizer_threads(plan.token_pool.workers, cpu_plan);
    if plan.tokenizer.is_some() && threads.compete_with_load {
        eprintln!(
            "note: --metrics-tokenizer-workers {} counts tokens live on cores the load uses \
             ({} available, none spare): counting competes with the workers and may lower the \
             measured rate; 0 counts after the run instead",
            threads.live,
            cpu_plan.cores_available.len()
        );
    }
    let ms = plan.token_pool.drain_timeout_ms;
    TokenPoolPlan {
        live_threads: threads.live,
        live_cores: threads.live_cores,
        drain_threads: threads.drain,
        drain_cores: threads.drain_cores,
        drain_timeout: (ms > 0).then(|| Duration::from_millis(ms)),
    }
}

/// One `WorkerSpec` per worker: its endpoint (round robin), its share of the pool, its warm
/// connections, its source addresses and port range, and the plan's per-request timeout.
fn worker_specs(
    plan: &Plan,
    endpoints: &[Endpoint],
    tables: &[Arc<RequestTable>],
    workers: usize,
    connections: usize,
) -> Result<Vec<WorkerSpec>, AppError> {
    let api = worker_api(plan.api_type);
    let null = plan.endpoints.iter().any(crate::plan::EndpointUrl::is_null);
    let share_of =
        |i: usize| split_share(connections, workers, i).clamp(1, MAX_CONNECTIONS_PER_WORKER);
    // Connections per endpoint address (several URLs may name one address): the port budgets
    // of `http::ports` are per destination.
    let addr_total = |addr: std::net::SocketAddr| -> usize {
        (0..workers).filter(|&w| endpoints[w % endpoints.len()].addr == addr).map(share_of).sum()
    };
    let sources = endpoint_sources(plan, endpoints, &addr_total)?;
    let even_ports = ephemeral_even_ports();
    let specs = (0..workers)
        .map(|i| {
            let ep = i % endpoints.len();
            let share = share_of(i);
            let endpoint_total = addr_total(endpoints[ep].addr);
            let warm =
                warm_connections(plan.load_pattern, plan.warmup_connections, workers, i, share);
            let bind_from =
                bind_from_slot_over_sources(share, endpoint_total, sources[ep].len(), even_ports);
            WorkerSpec {
                worker_id: i as u16,
                core: None,
                endpoint: endpoints[ep].clone(),
                connections: share as u32,
                warm_connections: warm as u32,
                bind_from_slot: bind_from as u32,
                api,
                streaming: plan.streaming,
                requests: tables[ep].clone(),
                force_epoll: std::env::var_os("MONOIO_FORCE_LEGACY_DRIVER").is_some(),
                max_output_bytes: MAX_OUTPUT_BYTES,
                request_timeout_ns: plan.request_timeout_ns,
                in_flight: None,
                // A null-endpoint worker opens no connection.
                source_addresses: if null { Vec::new() } else { sources[ep].clone() },
                synthetic: null.then(|| SyntheticResponse::stub_like(plan.streaming)),
            }
        })
        .collect();
    Ok(specs)
}

/// The source addresses of each endpoint's connections (`http::ports::source_addresses_for`
/// over the run's connections to its address): `--source-addresses` as given, loopback ones
/// picked here (said at -v), or a setup error when one address's ports cannot hold them.
/// Every address is checked to be of the endpoint's family and local before the run.
fn endpoint_sources(
    plan: &Plan,
    endpoints: &[Endpoint],
    addr_total: &dyn Fn(std::net::SocketAddr) -> usize,
) -> Result<Vec<Vec<std::net::IpAddr>>, AppError> {
    let (low, high) = ephemeral_range();
    let per_source = ports_per_source(low, high);
    let mut out = Vec::with_capacity(endpoints.len());
    for ep in endpoints {
        if let Some(bad) = plan.source_addresses.iter().find(|a| a.is_ipv4() != ep.addr.is_ipv4()) {
            return Err(AppError::Input(format!(
                "--source-addresses {bad} is not of the family of endpoint {} ({}); give \
                 addresses of the endpoint's family",
                ep.host, ep.addr
            )));
        }
        let total = addr_total(ep.addr);
        let given = plan.source_addresses.len();
        let sources = match source_addresses_for(ep.addr.ip(), total, given, per_source) {
            SourceChoice::AsGiven => plan.source_addresses.clone(),
            SourceChoice::Loopback(picked) => {
                if plan.verbose > 0 && !out.contains(&picked) {
                    eprintln!(
                        "source addresses: {total} connections to {} are past one address's \
                         {per_source} ports (ephemeral range {low}-{high}); connecting from {}",
                        ep.addr,
                        join_addrs(&picked)
                    );
                }
                picked
            }
            SourceChoice::TooFew { needed } => {
                let has = if given == 0 {
                    "no --source-addresses is given".to_string()
                } else {
                    format!("--source-addresses gives {given}")
                };
                return Err(AppError::Setup(format!(
                    "{total} connections to {} need {needed} source addresses: one holds \
                     {per_source} connections to one endpoint ({SOURCE_PORT_BUDGET_PERCENT}% of \
                     the ephemeral port range {low}-{high}, \
                     /proc/sys/net/ipv4/ip_local_port_range), and {has}; give \
                     --source-addresses with {needed} addresses of this host, or lower \
                     --max-connections / --concurrency",
                    ep.addr
                )));
            }
        };
        sources.iter().try_for_each(check_local_address)?;
        out.push(sources);
    }
    Ok(out)
}

/// Binds a throwaway UDP socket to `addr`: fails (EADDRNOTAVAIL) unless `addr` is an address
/// of this host, so a wrong `--source-addresses` is refused before any worker starts.
fn check_local_address(addr: &std::net::IpAddr) -> Result<(), AppError> {
    std::net::UdpSocket::bind((*addr, 0)).map(drop).map_err(|e| {
        AppError::Input(format!(
            "--source-addresses {addr} is not an address of this host ({e}); give addresses \
             that ip addr lists"
        ))
    })
}

fn join_addrs(addrs: &[std::net::IpAddr]) -> String {
    addrs.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ")
}

fn finish_run(
    plan: &Plan,
    output: loadgen_coordinator::RunOutput,
    embedded: bool,
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
    // copies: a long run's peak memory is the table's, not both.
    let rows = std::mem::take(&mut agg.rows);
    let mut table = SampleTable::with_capacity(rows.len());
    for row in &rows {
        table.push(row);
    }
    drop(rows);
    let interrupted = output.end == RunEnd::Interrupted;
    let capped = output.end == RunEnd::Capped;
    let primary = basis(plan.token_count_source);
    let opts = MetricsOptions {
        streaming: plan.streaming,
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
    info.issue_lag = issue_lag(plan, &output.issue_lags);
    if let Some(warning) = info.issue_lag.as_ref().and_then(|l| l.warning()) {
        eprintln!("warning: {warning}");
    }
    add_failures(&mut info, &agg);
    let summary = result_summary(&snapshot, &info);
    let dir = &plan.report_dir;
    let unwritten = write_all_files(plan, &snapshot, &summary, &info, &agg);
    // The console summary is printed whatever happened to the files: it may be all that
    // is left of the run.
    let mut console = console_summary(&summary, &info, dir);
    if capped {
        let cap_ms = plan.max_duration_ms.unwrap_or(0);
        console.push_str(&format!(
            "The run hit --runtime.max-duration-ms ({cap_ms} ms): what was still in flight \
             there was abandoned ({} samples)\n",
            agg.counters.abandoned
        ));
    }
    print!("{}", redact(&console));
    let _ = std::io::stdout().flush();
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
pub struct SpaceReserve {
    path: std::path::PathBuf,
}

impl SpaceReserve {
    /// The smallest reservation worth holding: below it the disk is full already.
    const BYTES_MIN: u64 = 16 * 1024;

    /// Allocates up to `bytes` in `dir` (halving while the disk cannot give that much);
    /// `None` when the filesystem cannot allocate (no fallocate) or has no room at all.
    pub fn hold(dir: &std::path::Path, mut bytes: u64) -> Option<SpaceReserve> {
        use std::os::fd::AsRawFd;
        let path = dir.join(".llm-loadgen-reserve");
        let file = std::fs::File::create(&path).ok()?;
        while bytes >= Self::BYTES_MIN {
            let len = libc::off_t::try_from(bytes).unwrap_or(libc::off_t::MAX);
            // fallocate(2), not posix_fallocate: where the filesystem cannot allocate, glibc's
            // posix_fallocate writes a byte into every block instead, which is slow and wears
            // the disk; fallocate fails (EOPNOTSUPP) and the run goes on without a reserve.
            // SAFETY: fallocate on a file descriptor we own, for a length that fits.
            let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
            if rc == 0 {
                return Some(SpaceReserve { path });
            }
            let errno = std::io::Error::last_os_error().raw_os_error();
            if errno != Some(libc::ENOSPC) && errno != Some(libc::EFBIG) {
                break;
            }
            let _ = file.set_len(0);
            bytes /= 2;
        }
        drop(file);
        let _ = std::fs::remove_file(&path);
        None
    }
}

impl Drop for SpaceReserve {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
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
    snapshot: &loadgen_coordinator::metrics::Snapshot,
    summary: &crate::report::ResultSummary,
    info: &RunInfo,
    agg: &AggregatorOutput,
) -> Vec<(&'static str, String)> {
    let dir = &plan.report_dir;
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
    if let Err(e) = write_atomic(&dir.join("config.yaml"), plan.config_yaml.as_bytes()) {
        unwritten.push(("config.yaml", io_reason(&e)));
    }
    let idx_map = |w: &mut dyn std::io::Write| write_sample_idx_map(w, &agg.sample_rows);
    if let Err(e) = write_atomic_with(&dir.join("sample_idx_map.json"), idx_map) {
        unwritten.push(("sample_idx_map.json", io_reason(&e)));
    }
    unwritten
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

fn basis(source: crate::plan::TokenCountSource) -> TokenCountSource {
    match source {
        crate::plan::TokenCountSource::Client => TokenCountSource::Client,
        crate::plan::TokenCountSource::Server => TokenCountSource::Server,
    }
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
        LoadPattern::Poisson { target_qps } => {
            ("poisson", Some(target_qps), None, Some(plan.legacy_loadgen_qps))
        }
        LoadPattern::Concurrency { n } => ("concurrency", None, Some(u64::from(n)), None),
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
            salt: false,
            drain: plan.warmup.drain,
            warmup_random_seed: 42,
        },
        scheduler_random_seed: plan.scheduler_seed,
        dataloader_random_seed: plan.dataloader_seed,
        token_count_source: basis(plan.token_count_source),
        embedded_stub: embedded,
        interrupted,
        incomplete_reason,
        abandoned,
        issue_lag: None,
        failures: Vec::new(),
        requests_resent: 0,
        events_has_errors: false,
        client_token_counting: plan.tokenizer.as_ref().map(|_| {
            match plan.token_pool.live_threads {
                0 => ClientTokenCounting::AfterRun,
                threads => ClientTokenCounting::Live { threads },
            }
        }),
    }
}

/// The issue-lag summary of a Poisson run: lower-method percentiles over the exact lags.
fn issue_lag(plan: &Plan, lags: &IssueLags) -> Option<IssueLag> {
    let LoadPattern::Poisson { target_qps } = plan.load_pattern else { return None };
    if lags.lags_ns.is_empty() {
        return None;
    }
    let mut sorted = lags.lags_ns.clone();
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

/// `{"performance": {uuid: dataset_index}}`, as the reference writes it, streamed into `out`.
fn write_sample_idx_map(out: &mut dyn std::io::Write, rows: &[(u64, u32)]) -> std::io::Result<()> {
    out.write_all(b"{\"performance\": {")?;
    for (i, (sample_id, row)) in rows.iter().enumerate() {
        let sep = if i > 0 { ", " } else { "" };
        write!(out, "{sep}\"{}\": {row}", sample_uuid(*sample_id))?;
    }
    out.write_all(b"}}")
}

fn worker_api(api: ApiType) -> request::ApiType {
    match api {
        ApiType::OpenAi | ApiType::VideoGen => request::ApiType::OpenAiChat,
        ApiType::OpenAiCompletions => request::ApiType::OpenAiCompletions,
        ApiType::Sglang => request::ApiType::Sglang,
    }
}

fn prompt_of(row: &Row) -> Prompt<'_> {
    if let Some(ids) = &row.token_ids {
        return Prompt::TokenIds(ids);
    }
    if let Some(messages) = &row.messages {
        return Prompt::Messages(messages);
    }
    Prompt::Text { system: row.system.as_deref(), user: row.prompt.as_deref().unwrap_or("") }
}

/// The reference's `["PromptData", text, token_ids, messages, tools, chat_template_kwargs,
/// chat_template, tool_choice]` for a row.
fn prompt_data_json(row: &Row) -> String {
    let value = serde_json::json!([
        "PromptData",
        row.prompt,
        row.token_ids,
        row.messages,
        null,
        null,
        null,
        null
    ]);
    value.to_string()
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
    fn the_timeout_flag_reaches_the_workers() {
        let plan = crate::plan::plan_from_args(&[
            "offline",
            "--endpoints",
            "http://127.0.0.1:9,http://127.0.0.1:10",
            "--model",
            "m",
            "--timeout",
            "1.5",
        ])
        .unwrap();
        let endpoints: Vec<Endpoint> =
            plan.endpoints.iter().map(|e| Endpoint::parse(&e.url).unwrap()).collect();
        let tables = vec![Arc::new(RequestTable::new()), Arc::new(RequestTable::new())];
        let specs = worker_specs(&plan, &endpoints, &tables, 3, 12).unwrap();
        assert_eq!(specs.len(), 3);
        assert!(specs.iter().all(|w| w.request_timeout_ns == 1_500_000_000));
        let none = crate::plan::plan_from_args(&["offline"]).unwrap();
        let specs = worker_specs(&none, &endpoints, &tables, 2, 4).unwrap();
        assert!(specs.iter().all(|w| w.request_timeout_ns == 0), "0 = none by default");
    }

    /// The plan and worker specs of `connections` over `workers` to `url`, with `extra` flags.
    fn specs_for(
        url: &str,
        extra: &[&str],
        workers: usize,
        connections: usize,
    ) -> Result<Vec<WorkerSpec>, AppError> {
        let args = [&["offline", "--endpoints", url, "--model", "m"][..], extra].concat();
        let plan = crate::plan::plan_from_args(&args).unwrap();
        let endpoints = vec![Endpoint::parse(url).unwrap()];
        let tables = vec![Arc::new(RequestTable::new())];
        worker_specs(&plan, &endpoints, &tables, workers, connections)
    }

    fn ips(list: &[&str]) -> Vec<std::net::IpAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn a_loopback_run_past_one_address_gets_loopback_source_addresses() {
        let (low, high) = ephemeral_range();
        let per = ports_per_source(low, high);
        // One more than one address holds, whatever this machine's range: two addresses.
        let specs = specs_for("http://127.0.0.1:9", &[], 3, per + 1).unwrap();
        for w in &specs {
            assert_eq!(w.source_addresses, ips(&["127.0.0.1", "127.0.0.2"]), "{}", w.worker_id);
            let share = w.connections as usize;
            let even = ephemeral_even_ports();
            assert_eq!(
                w.bind_from_slot as usize,
                bind_from_slot_over_sources(share, per + 1, 2, even)
            );
        }
        let specs = specs_for("http://127.0.0.1:9", &[], 3, per).unwrap();
        assert!(specs.iter().all(|w| w.source_addresses.is_empty()), "one address holds them");
        let given = ["--source-addresses", "127.0.0.3"];
        let specs = specs_for("http://127.0.0.1:9", &given, 2, 10).unwrap();
        assert!(specs.iter().all(|w| w.source_addresses == ips(&["127.0.0.3"])), "as given");
    }

    #[test]
    fn a_remote_run_past_one_address_is_refused_naming_the_count_range_and_flag() {
        let (low, high) = ephemeral_range();
        let per = ports_per_source(low, high);
        let err = specs_for("http://192.0.2.1:9", &[], 2, per + 1).unwrap_err();
        assert_eq!(err.exit_code(), 3, "{err}");
        let msg = err.to_string();
        for want in [
            format!("{} connections to 192.0.2.1:9 need 2 source addresses", per + 1),
            format!("ephemeral port range {low}-{high}"),
            "give --source-addresses with 2 addresses".to_string(),
        ] {
            assert!(msg.contains(&want), "{want:?} in {msg}");
        }
        let one = ["--source-addresses", "127.0.0.2"];
        let err = specs_for("http://127.0.0.1:9", &one, 2, per + 1).unwrap_err();
        assert!(err.to_string().contains("--source-addresses gives 1"), "{err}");
    }

    #[test]
    fn a_source_address_that_is_not_local_is_refused_before_the_run() {
        // 192.0.2.0/24 is TEST-NET-1: documentation only, never a host's address.
        let err = specs_for("http://192.0.2.1:9", &["--source-addresses", "192.0.2.7"], 1, 4)
            .unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        assert!(err.to_string().contains("192.0.2.7 is not an address of this host"), "{err}");
        let err = specs_for("http://localhost:9", &["--source-addresses", "::1"], 1, 4);
        let err = err.unwrap_err().to_string();
        assert!(err.contains("::1 is not of the family of endpoint localhost"), "{err}");
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
