//! The plan's specs for the run: the coordinator's `RunSpec` and one `WorkerSpec` per worker,
//! with every row's request bytes built before the fork. Nothing is decided here that the plan
//! has not resolved; what is read here is the machine (its port range and addresses). Nothing
//! is printed: what there is to say goes into the caller's notes.

use std::sync::Arc;
use std::time::Duration;

use loadgen_coordinator::aggregate::tokens::{TokenCounter, TokenPoolPlan};
use loadgen_coordinator::cpu::{tokenizer_threads, CpuPlan};
use loadgen_coordinator::live::{LiveSpec, RunFacts, ViewMode, PLAIN_INTERVAL};
use loadgen_coordinator::order::SampleOrder;
use loadgen_coordinator::phase::accuracy_rows;
use loadgen_coordinator::run::{AccuracyPhaseSpec, WarmupSpec};
use loadgen_coordinator::{LoadPattern, RunSpec};
use loadgen_py::random::PyRandom;
use loadgen_wire::MAX_ENDPOINTS;
use loadgen_worker::http::ports::{
    bind_from_slot_over_sources, ephemeral_even_ports, ephemeral_range, ports_per_source,
    source_addresses_for, SourceChoice, SOURCE_PORT_BUDGET_PERCENT,
};
use loadgen_worker::request::{self, Endpoint, Prompt, RequestHeaders, RequestTable, RowParams};
use loadgen_worker::synthetic::SyntheticResponse;
use loadgen_worker::{endpoint_slot_count, WorkerEndpoint, WorkerSpec};

use super::{split_share, warm_connections, Plan};
use crate::dataset::Row;
use crate::error::AppError;

/// Connections a worker may hold at most (a named limit; file descriptors are the real bound).
pub const MAX_CONNECTIONS_PER_WORKER: usize = 65_536;

/// Longest output kept per sample; longer outputs are cut and counted.
pub const MAX_OUTPUT_BYTES: usize = 256 * 1024;

impl Plan {
    /// The coordinator's spec for this plan against `endpoints` (the plan's, or the embedded
    /// stub's), on `cpu_plan`'s cores, its live view drawn on the `view` stderr. What there is
    /// to say (`-v` facts, a note on the tokenizer pool) goes into `notes`, in order.
    pub fn run_spec(
        &self,
        endpoints: &[Endpoint],
        cpu_plan: CpuPlan,
        view: &ViewFacts,
        notes: &mut Vec<String>,
    ) -> Result<RunSpec<WorkerSpec>, AppError> {
        let (mut warmup_rows, salted) = warmup_rows(self);
        if let Some(sp) = &self.shard {
            // A shard warms up with its share of the plan's warm-up samples, as it issues.
            warmup_rows = super::strided_rows(&warmup_rows, sp.shard);
        }
        let tables = request_tables(self, endpoints, &salted)?;
        let (isl_client, prompt_data_json, token_counter) = client_counts(self);
        let token_pool = token_pool_plan(self, &cpu_plan, notes);
        let c = &self.connections;
        let workers = worker_specs(self, endpoints, &tables, c.workers, c.max_connections, notes)?;
        if self.verbose > 0 {
            let per_endpoint = |w: &WorkerSpec| w.connections.min(w.endpoints.len() as u32);
            let warm: u32 = workers.iter().map(|w| w.warm_connections.max(per_endpoint(w))).sum();
            notes.push(format!(
                "connections: pool of up to {} across {} worker(s), {warm} opened before the \
                 start, the rest on demand as the load needs them",
                c.max_connections, c.workers
            ));
        }
        let ms = |ms: u64| Duration::from_millis(ms);
        let accuracy = accuracy_phases(self, salted.len());
        let live = live_spec(self, endpoints, warmup_rows.len() as u64, view);
        Ok(RunSpec {
            accuracy,
            workers,
            cpu_plan,
            pattern: self.load_pattern,
            conversations: self.agentic.as_ref().map(|a| a.conversations.clone()),
            num_samples: self.num_samples,
            warmup: WarmupSpec {
                rows: warmup_rows,
                pattern: match self.load_pattern {
                    LoadPattern::Poisson { target_qps, .. } => LoadPattern::Poisson {
                        target_qps,
                        seed: self.shard.as_ref().map_or(self.warmup.random_seed, |sp| {
                            super::shard_seed(self.warmup.random_seed, sp.shard)
                        }),
                    },
                    other => other,
                },
                drain: self.warmup.drain,
                drain_timeout: ms(self.warmup.drain_timeout_ms),
            },
            dataset_rows: self.dataset.rows.len(),
            dataloader_seed: self.dataloader_seed,
            order_stride: self.shard.as_ref().map_or((0, 1), |sp| super::order_stride(sp.shard)),
            start_at_unix_ns: self.start_at_unix_ns,
            max_duration: self.max_duration_ms.filter(|&v| v > 0).map(ms),
            drain_timeout: ms(self.drain_timeout_ms),
            ready_timeout: ms(c.worker_init_timeout_ms),
            ring_sizes: c.ring_sizes,
            streaming: self.request.streaming,
            isl_client: Arc::new(isl_client),
            prompt_data_json: Arc::new(prompt_data_json),
            token_counter,
            token_pool,
            events_file: None, // the binary's, by the report directory it holds
            spill: None,       // the binary's, by the report directory it holds
            live,
            redact: Some(crate::redact::redact),
            on_performance_start: None, // the binary's, when it profiles the server
        })
    }
}

/// Sets the plain progress line's period in ms instead of `live::PLAIN_INTERVAL` (5 s), for
/// tests and for logs that want a line more or less often (docs/CLI.md, "Live view").
pub const PROGRESS_INTERVAL_ENV: &str = "LLM_LOADGEN_PROGRESS_INTERVAL_MS";

/// What the live view depends on besides the plan, read once by the binary before the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewFacts {
    /// `--quiet`: no live view.
    pub quiet: bool,
    /// Whether stderr is a terminal (the drawn view) or not (plain lines).
    pub stderr_is_terminal: bool,
    /// `NO_COLOR` is set to a non-empty value (as no-color.org says): no colour.
    pub no_color: bool,
    /// `PROGRESS_INTERVAL_ENV` as a whole number of ms, when it is one.
    pub progress_interval_ms: Option<u64>,
}

/// The live view: off with `--quiet`, drawn on a terminal stderr, else plain lines; colour off
/// under `NO_COLOR`.
fn live_spec(plan: &Plan, endpoints: &[Endpoint], warmup: u64, view: &ViewFacts) -> LiveSpec {
    let mode = view_mode(view.quiet, view.stderr_is_terminal);
    let (no_color, interval_ms) = (view.no_color, view.progress_interval_ms);
    LiveSpec {
        mode,
        color: !no_color,
        facts: RunFacts {
            model: plan.request.model.clone(),
            endpoint: shown_endpoints(plan, endpoints),
            expected: plan.num_samples,
            warmup,
            cap_ns: plan.max_duration_ms.filter(|&v| v > 0).map(|ms| ms.saturating_mul(1_000_000)),
            streaming: plan.request.streaming,
            client_tokens: plan.tokenizer.is_some(),
            client_tokens_deferred: plan.tokenizer.is_some() && plan.token_pool.live_threads == 0,
        },
        plain_interval: interval_ms.map_or(PLAIN_INTERVAL, Duration::from_millis),
    }
}

/// `--quiet` wins; then a terminal gets the drawn view and anything else the plain line.
fn view_mode(quiet: bool, terminal: bool) -> ViewMode {
    match (quiet, terminal) {
        (true, _) => ViewMode::Off,
        (false, true) => ViewMode::Terminal,
        (false, false) => ViewMode::Plain,
    }
}

/// The endpoints as the view names them: the parsed URLs, which hold no userinfo, through the
/// one redaction; the null endpoint as given; the first and a count past it.
fn shown_endpoints(plan: &Plan, endpoints: &[Endpoint]) -> String {
    if plan.endpoints.iter().any(super::EndpointUrl::is_null) {
        return super::NULL_ENDPOINT.to_string();
    }
    let first = endpoints.first().map(loadgen_worker::endpoint_url).unwrap_or_default();
    let first = crate::redact::redact(&first);
    match endpoints.len() {
        0 | 1 => first,
        n => format!("{first} (+{} more)", n - 1),
    }
}

/// Every row's request bytes, built once per row and endpoint, before the fork; a salted
/// warm-up's requests follow the rows, one per warm-up sample (`warmup_rows`).
pub fn request_tables(
    plan: &Plan,
    endpoints: &[Endpoint],
    salted: &[(u32, String)],
) -> Result<Vec<Arc<RequestTable>>, AppError> {
    let mut tables = Vec::with_capacity(endpoints.len());
    let shared_body = request::body_prefix(&plan.request).map_err(shared_error)?;
    for (e, ep) in endpoints.iter().enumerate() {
        let headers = request_headers(plan, e);
        let opts = &plan.request;
        let head = request::http_head(ep, opts.api, &headers, opts.streaming);
        // What every request shares (the head with its headers, the body's model) is kept
        // once per table, not once per row.
        let mut table = RequestTable::with_shared(&head, &shared_body);
        push_performance_rows(plan, &mut table)?;
        for (i, prompt) in salted {
            let row = &plan.dataset.rows[*i as usize];
            let text = Prompt::Text { system: row.system.as_deref(), user: prompt };
            table.push_body(&row_request_body(plan, *i as usize, text)?).map_err(shared_error)?;
        }
        for acc in &plan.accuracy.datasets {
            for (i, row) in acc.dataset.rows.iter().enumerate() {
                let prompt = prompt_of(row, plan.request.api);
                let osl = acc.row_output_tokens.get(i).copied();
                let body = row_body(&acc.request, row, osl, prompt).map_err(|e| {
                    AppError::Input(format!(
                        "accuracy dataset {} row {i} cannot become a request: {e}",
                        acc.name
                    ))
                })?;
                table.push_body(&body).map_err(shared_error)?;
            }
        }
        tables.push(Arc::new(table));
    }
    Ok(tables)
}

/// The performance dataset's rows into `table`: an agentic run's turns with their messages as
/// the reference writes them and their routing headers, any other run's rows by their prompt.
fn push_performance_rows(plan: &Plan, table: &mut RequestTable) -> Result<(), AppError> {
    if let Some(agentic) = &plan.agentic {
        for i in 0..plan.dataset.rows.len() {
            let body = agentic.turn_body(&plan.request, i)?;
            let headers = agentic.turn_headers(i);
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            table.push_body_with_headers(&body, &headers).map_err(shared_error)?;
        }
        return Ok(());
    }
    for (i, row) in plan.dataset.rows.iter().enumerate() {
        let body = row_request_body(plan, i, prompt_of(row, plan.request.api))?;
        table.push_body(&body).map_err(shared_error)?;
    }
    Ok(())
}

/// The headers of endpoint `e`'s requests: its own Basic auth, else the run's authorization,
/// and the `--header` lines.
fn request_headers(plan: &Plan, e: usize) -> RequestHeaders {
    let basic = plan.endpoints.get(e).and_then(|ep| ep.basic_auth.as_ref());
    RequestHeaders {
        authorization: basic.or(plan.authorization.as_ref()).map(|s| s.0.clone()),
        extra: plan.headers.clone(),
    }
}

/// A request table that cannot share what its rows share (a bug, not the input).
fn shared_error(e: request::RequestError) -> AppError {
    AppError::Execution(format!("cannot build the request table: {e}"))
}

/// Row `i`'s request body with `prompt`: the row's own n and drawn output length are decided
/// here, once, before the fork.
fn row_request_body(plan: &Plan, i: usize, prompt: Prompt<'_>) -> Result<Vec<u8>, AppError> {
    let row = &plan.dataset.rows[i];
    row_body(&plan.request, row, plan.row_output_tokens.get(i).copied(), prompt)
        .map_err(|e| AppError::Input(format!("dataset row {i} cannot become a request: {e}")))
}

/// A row's request body under its phase's options (the performance phase's, or an accuracy
/// dataset's own): its own n and output length, and its request columns.
fn row_body(
    opts: &request::RequestOptions,
    row: &Row,
    max_output_tokens: Option<u32>,
    prompt: Prompt<'_>,
) -> Result<Vec<u8>, String> {
    let params =
        RowParams { n: row.n, max_output_tokens, columns: &row.request_columns, stream_key: false };
    request::body_json_row(opts, prompt, params).map_err(|e| e.to_string())
}

/// The accuracy phases: each dataset's rows follow the performance rows and the salted
/// warm-up copies in the request tables, issued in order `num_repeats` times.
fn accuracy_phases(plan: &Plan, salted: usize) -> Vec<AccuracyPhaseSpec> {
    let mut first = (plan.dataset.rows.len() + salted) as u32;
    let drain = plan.accuracy.drain_timeout_ms.map(Duration::from_millis);
    plan.accuracy
        .datasets
        .iter()
        .map(|acc| {
            let unit = acc.dataset.rows.len() as u32;
            let rows = accuracy_rows(first, unit, acc.scoring.num_repeats);
            first += unit;
            AccuracyPhaseSpec { name: acc.name.clone(), rows, drain_timeout: drain }
        })
        .collect()
}

/// The warm-up's table rows in issue order, and the salted prompts behind them: the first
/// `samples` rows of the order drawn from `warmup_random_seed + 1`; salted, each becomes a copy
/// at the end of the tables whose prompt starts with `[<16 hex>] `, the hex drawn from
/// `warmup_random_seed + 2` in issue order (the reference's `randbytes(8).hex()`).
fn warmup_rows(plan: &Plan) -> (Vec<u32>, Vec<(u32, String)>) {
    let w = &plan.warmup;
    let count = plan.dataset.rows.len();
    if w.samples == 0 || count == 0 {
        return (Vec::new(), Vec::new());
    }
    let order = SampleOrder::first_rows(count, w.random_seed.wrapping_add(1), w.samples);
    if !w.salt {
        return (order, Vec::new());
    }
    let mut rng = PyRandom::new(w.random_seed.wrapping_add(2));
    let salted = order
        .iter()
        .map(|&i| {
            let hex: String = rng.randbytes8().iter().map(|b| format!("{b:02x}")).collect();
            let prompt = plan.dataset.rows[i as usize].prompt.as_deref().unwrap_or_default();
            (i, format!("[{hex}] {prompt}"))
        })
        .collect();
    let first = count as u32;
    ((first..first + w.samples as u32).collect(), salted)
}

/// The client's prompt counts per row, each row's `PromptData` JSON for `sample.issued`, and the
/// client tokenizer for the outputs (none without a tokenizer).
fn client_counts(plan: &Plan) -> (Vec<Option<u32>>, Vec<String>, Option<TokenCounter>) {
    // Only the chat API renders a template, so only it has template kwargs.
    let kwargs = match plan.request.api {
        request::ApiType::OpenAiChat => plan.request.sampling.chat_template_kwargs.as_ref(),
        _ => None,
    };
    let isl_client: Vec<Option<u32>> = match &plan.tokenizer {
        // A multimodal row has no client ISL: the reference's PromptData of a list-form
        // prompt is empty, so its ISL is unavailable (the server basis still counts it).
        Some(tok) => plan
            .dataset
            .rows
            .iter()
            .map(|r| match r.content_parts {
                Some(_) => None,
                None => tok.count_row_with(r, kwargs).ok(),
            })
            .collect(),
        None => {
            plan.dataset.rows.iter().map(|r| r.token_ids.as_ref().map(|t| t.len() as u32)).collect()
        }
    };
    let mut data_json: Vec<String> =
        plan.dataset.rows.iter().map(|r| prompt_data_json(r, kwargs)).collect();
    let mut isl_client = isl_client;
    // Salted warm-up rows are never logged; the accuracy rows follow them in the tables and
    // are logged (`sample.issued`), so every table row has an entry.
    let salted = if plan.warmup.salt { plan.warmup.samples as usize } else { 0 };
    let filler = data_json.first().cloned().unwrap_or_default();
    data_json.extend(std::iter::repeat_n(filler, salted));
    isl_client.extend(std::iter::repeat_n(None, salted));
    for acc in &plan.accuracy.datasets {
        // A dataset's own chat_template_kwargs are the ones its requests carry.
        let kwargs = kwargs.and(acc.request.sampling.chat_template_kwargs.as_ref());
        data_json.extend(acc.dataset.rows.iter().map(|r| prompt_data_json(r, kwargs)));
        isl_client.extend(std::iter::repeat_n(None, acc.dataset.rows.len()));
    }
    let token_counter: Option<TokenCounter> = plan.tokenizer.as_ref().map(|tok| {
        let tok = tok.clone_for_thread();
        Arc::new(move |s: &str| tok.count(s)) as TokenCounter
    });
    (isl_client, data_json, token_counter)
}

/// The client tokenizer pool of the run: live threads on the CPU plan's spare cores (none
/// where there are none, unless asked), a drain pool over the whole machine after the last
/// sample, bounded by `--metrics-drain-timeout`. Live counting on the load's own cores gets a
/// note.
fn token_pool_plan(plan: &Plan, cpu_plan: &CpuPlan, notes: &mut Vec<String>) -> TokenPoolPlan {
    let threads = tokenizer_threads(plan.token_pool.workers, cpu_plan);
    if plan.tokenizer.is_some() && threads.compete_with_load {
        notes.push(format!(
            "note: --metrics-tokenizer-workers {} counts tokens live on cores the load uses \
             ({} available, none spare): counting competes with the workers and may lower the \
             measured rate; 0 counts after the run instead",
            threads.live,
            cpu_plan.cores_available.len()
        ));
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

/// One `WorkerSpec` per worker: every endpoint with its request table, its share of the pool,
/// its warm connections, its source addresses and port range per endpoint, and the plan's
/// per-request timeout. The run's connections are numbered across the workers and dealt to
/// the endpoints in turn (`slot_endpoint`), as the reference deals its workers: each endpoint
/// gets its exact share of every worker's slots, whatever the worker count. Loopback source
/// addresses picked here are said (at -v) in `notes`.
pub fn worker_specs(
    plan: &Plan,
    endpoints: &[Endpoint],
    tables: &[Arc<RequestTable>],
    workers: usize,
    connections: usize,
    notes: &mut Vec<String>,
) -> Result<Vec<WorkerSpec>, AppError> {
    let c = &plan.connections;
    let null = plan.endpoints.iter().any(crate::plan::EndpointUrl::is_null);
    let n = endpoints.len();
    let shares: Vec<usize> = (0..workers)
        .map(|i| split_share(connections, workers, i).clamp(1, MAX_CONNECTIONS_PER_WORKER))
        .collect();
    check_endpoint_count(n, shares.iter().sum())?;
    let firsts = first_endpoints(&shares, n);
    let slots_of = |w: usize, e: usize| endpoint_slot_count(firsts[w], shares[w], n, e);
    // Connections per endpoint address (several URLs may name one address): the port budgets
    // of `http::ports` are per destination.
    let addr_total = |addr: std::net::SocketAddr| -> usize {
        let to_addr = (0..n).filter(|&e| endpoints[e].addr == addr);
        to_addr.map(|e| (0..workers).map(|w| slots_of(w, e)).sum::<usize>()).sum()
    };
    let sources = endpoint_sources(plan, endpoints, &addr_total, notes)?;
    let even_ports = ephemeral_even_ports();
    let specs = (0..workers)
        .map(|i| {
            let share = shares[i];
            let warm = warm_connections(plan.load_pattern, c.warmup_connections, workers, i, share);
            let worker_endpoints = (0..n)
                .map(|e| {
                    let total = addr_total(endpoints[e].addr);
                    let per_source = sources[e].len();
                    let bind_from =
                        bind_from_slot_over_sources(slots_of(i, e), total, per_source, even_ports);
                    WorkerEndpoint {
                        endpoint: endpoints[e].clone(),
                        requests: tables[e].clone(),
                        bind_from_slot: bind_from as u32,
                        // A null-endpoint worker opens no connection.
                        source_addresses: if null { Vec::new() } else { sources[e].clone() },
                    }
                })
                .collect();
            WorkerSpec {
                worker_id: i as u16,
                core: None,
                endpoints: worker_endpoints,
                first_endpoint: firsts[i] as u32,
                connections: share as u32,
                warm_connections: warm as u32,
                api: plan.request.api,
                streaming: plan.request.streaming,
                force_epoll: c.force_epoll,
                max_output_bytes: MAX_OUTPUT_BYTES,
                request_timeout_ns: plan.request_timeout_ns,
                turn_delays_ns: plan.agentic.as_ref().and_then(|a| a.turn_delays_ns.clone()),
                in_flight: None,
                synthetic: null.then(|| SyntheticResponse::stub_like(plan.request.streaming)),
                video_fallback_dir: video_fallback_dir(plan.request.api),
            }
        })
        .collect();
    Ok(specs)
}

/// Where a videogen run's workers write videos answered as raw bytes: the reference's
/// `INFERENCE_ENDPOINT_VIDEOGEN_FALLBACK_DIR` (unset or empty: such answers fail, naming it).
fn video_fallback_dir(api: request::ApiType) -> Option<std::path::PathBuf> {
    use loadgen_worker::adapter::videogen::FALLBACK_DIR_ENV;
    let dir = std::env::var_os(FALLBACK_DIR_ENV).filter(|d| !d.is_empty())?;
    (api == request::ApiType::Videogen).then(|| dir.into())
}

/// The endpoint of each worker's slot 0: the run's connections are numbered worker by worker,
/// so worker `w`'s slot 0 is connection `shares[0] + … + shares[w-1]`, dealt to endpoint
/// (that number mod `endpoints`).
fn first_endpoints(shares: &[usize], endpoints: usize) -> Vec<usize> {
    let n = endpoints.max(1);
    let mut before = 0;
    shares
        .iter()
        .map(|&share| {
            let first = before % n;
            before += share;
            first
        })
        .collect()
}

/// Refuses a run that cannot give every endpoint a connection (a closed loop of fewer than the
/// endpoints, or a pool that small), or that has more endpoints than a record can name.
pub fn check_endpoint_count(endpoints: usize, connections: usize) -> Result<(), AppError> {
    if endpoints > MAX_ENDPOINTS {
        return Err(AppError::Input(format!(
            "{endpoints} endpoints are more than the {MAX_ENDPOINTS} a run can measure; give at \
             most {MAX_ENDPOINTS} --endpoints"
        )));
    }
    if connections < endpoints {
        return Err(AppError::Setup(format!(
            "{endpoints} endpoints need at least {endpoints} connections (each endpoint gets a \
             share of them), and the run has {connections}; raise --max-connections or \
             --concurrency to {endpoints} or more, or give fewer --endpoints"
        )));
    }
    Ok(())
}

/// The source addresses of each endpoint's connections (`http::ports::source_addresses_for`
/// over the run's connections to its address): `--source-addresses` as given, loopback ones
/// picked here (said at -v, in `notes`), or a setup error when one address's ports cannot hold
/// them. Every address is checked to be of the endpoint's family and local before the run.
fn endpoint_sources(
    plan: &Plan,
    endpoints: &[Endpoint],
    addr_total: &dyn Fn(std::net::SocketAddr) -> usize,
    notes: &mut Vec<String>,
) -> Result<Vec<Vec<std::net::IpAddr>>, AppError> {
    let (low, high) = ephemeral_range();
    let per_source = ports_per_source(low, high);
    let mut out = Vec::with_capacity(endpoints.len());
    for ep in endpoints {
        if let Some(bad) =
            plan.connections.source_addresses.iter().find(|a| a.is_ipv4() != ep.addr.is_ipv4())
        {
            return Err(AppError::Input(format!(
                "--source-addresses {bad} is not of the family of endpoint {} ({}); give \
                 addresses of the endpoint's family",
                ep.host, ep.addr
            )));
        }
        let total = addr_total(ep.addr);
        let given = plan.connections.source_addresses.len();
        let sources = match source_addresses_for(ep.addr.ip(), total, given, per_source) {
            SourceChoice::AsGiven => plan.connections.source_addresses.clone(),
            SourceChoice::Loopback(picked) => {
                if plan.verbose > 0 && !out.contains(&picked) {
                    notes.push(format!(
                        "source addresses: {total} connections to {} are past one address's \
                         {per_source} ports (ephemeral range {low}-{high}); connecting from {}",
                        ep.addr,
                        join_addrs(&picked)
                    ));
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

/// What a row sends, as the reference's adapters pick it: chat sends its messages, else its
/// text prompt (token ids alone it cannot carry); completions and SGLang send token ids when
/// the row has them (`input_tokens`, as `save_tokenized_data` writes beside the text), else
/// the text.
fn prompt_of(row: &Row, api: request::ApiType) -> Prompt<'_> {
    if let Some(parts) = &row.content_parts {
        // Chat only: another API's body refuses it, naming the row.
        return Prompt::Parts { system: row.system.as_deref(), user: parts };
    }
    match (api, &row.messages, &row.prompt, &row.token_ids) {
        (request::ApiType::OpenAiChat, Some(messages), _, _) => Prompt::Messages(messages),
        (request::ApiType::OpenAiChat, None, Some(prompt), _) => {
            Prompt::Text { system: row.system.as_deref(), user: prompt }
        }
        (_, _, _, Some(ids)) => Prompt::TokenIds(ids),
        (_, Some(messages), _, None) => Prompt::Messages(messages),
        (_, None, prompt, None) => {
            Prompt::Text { system: row.system.as_deref(), user: prompt.as_deref().unwrap_or("") }
        }
    }
}

/// The reference's `["PromptData", text, token_ids, messages, tools, chat_template_kwargs,
/// chat_template, tool_choice]` for a row: a messages row (without token ids) carries the
/// inputs its ISL renders with, as the reference's `PromptData` of a structured prompt.
fn prompt_data_json(row: &Row, kwargs: Option<&serde_json::Value>) -> String {
    let structured = row.token_ids.is_none() && row.messages.is_some();
    let column = |name: &str| row.request_column(name).filter(|_| structured);
    let value = serde_json::json!([
        "PromptData",
        row.prompt,
        row.token_ids,
        row.messages,
        column("tools"),
        kwargs.filter(|_| structured),
        column("chat_template"),
        column("tool_choice")
    ]);
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_wins_and_only_a_terminal_gets_the_drawn_view() {
        assert_eq!(view_mode(true, true), ViewMode::Off);
        assert_eq!(view_mode(true, false), ViewMode::Off);
        assert_eq!(view_mode(false, true), ViewMode::Terminal);
        assert_eq!(view_mode(false, false), ViewMode::Plain);
    }
}
