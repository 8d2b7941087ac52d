//! The validated plan: configuration (YAML + flags) resolved into the one value a run is
//! built from. Contradictions are rejected here, before anything starts.

use std::path::PathBuf;

use loadgen_coordinator::cpu::{cores_available, default_worker_count};

use loadgen_coordinator::pyrandom::PyRandom;
use loadgen_worker::request::Sampling;

use crate::commands::sys::local_timestamp;
use crate::dataset::{load_dataset_spec_with, synthetic_dataset, Dataset, DatasetKind};
use crate::error::AppError;
use crate::tokenizer::Tokenizer;
use crate::yaml::{
    ApiTypeName, BenchType, Config, LoadPatternKind, ModelParams, OslDistribution, OslKind,
    Runtime, Streaming, TokenSource,
};

/// How samples are issued.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadPattern {
    /// max_throughput: every sample issued at t=0, bounded by the connections.
    Offline,
    /// Open loop, exponential gaps at `target_qps` (seeded by `Plan::scheduler_seed`).
    Poisson { target_qps: f64 },
    /// Closed loop, `n` requests in flight.
    Concurrency { n: u32 },
}

/// The endpoint protocol (the worker has its own copy; run.rs maps this one onto it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiType {
    /// OpenAI chat, `/v1/chat/completions`.
    OpenAi,
    /// OpenAI completions, `/v1/completions`.
    OpenAiCompletions,
    /// SGLang, `/generate`.
    Sglang,
    /// Video generation, `/v1/videos/generations`.
    VideoGen,
}

impl ApiType {
    /// The name used on the command line and in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiType::OpenAi => "openai",
            ApiType::OpenAiCompletions => "openai_completions",
            ApiType::Sglang => "sglang",
            ApiType::VideoGen => "videogen",
        }
    }

    /// Whether streaming requests of this type can ask for usage (`stream_options`).
    pub fn is_openai(self) -> bool {
        matches!(self, ApiType::OpenAi | ApiType::OpenAiCompletions)
    }
}

/// Which token counts are the headline (SPEC §4.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TokenCountSource {
    /// The run's tokenizer (the reference's only basis; the default).
    #[default]
    Client,
    /// The endpoint's own usage counts.
    Server,
}

/// A validated `http://` endpoint base URL, without a trailing slash, or the null endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointUrl {
    pub url: String,
}

/// The null endpoint: no network; each worker answers its samples itself, so a run measures the
/// coordinator's pipeline alone (scheduler, rings, aggregator, events.jsonl, reports).
pub const NULL_ENDPOINT: &str = "null://";

impl EndpointUrl {
    pub fn is_null(&self) -> bool {
        self.url == NULL_ENDPOINT
    }
}

/// Warm-up phase settings: samples issued before tracking starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Warmup {
    pub enabled: bool,
    /// Warm-up samples; `None` = the whole dataset once.
    pub requests: Option<u64>,
    /// Wait for warm-up samples to finish before the performance phase.
    pub drain: bool,
    /// How long that wait may take (`settings.drain.warmup_timeout_s`).
    pub drain_timeout_ms: u64,
}

/// The client tokenizer pool's settings, as given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenPoolSettings {
    /// `metrics_tokenizer_workers`: live tokenizer threads; `None` = the CPU plan decides
    /// (`loadgen_coordinator::cpu::tokenizer_threads`).
    pub workers: Option<usize>,
    /// The live threads the CPU plan gives that setting; 0 = counted after the run.
    pub live_threads: usize,
    /// `metrics_drain_timeout_s` in ms: how long the end-of-run count may take; 0 = unlimited.
    pub drain_timeout_ms: u64,
}

/// Live tokenizer threads one may ask for at most.
pub const TOKENIZER_WORKERS_MAX: i64 = 1024;

/// One validated run plan. Built only by `resolve_plan`; every field is final.
#[derive(Debug, Clone)]
pub struct Plan {
    pub load_pattern: LoadPattern,
    /// Endpoint base URLs; empty = start the embedded max-throughput stub.
    pub endpoints: Vec<EndpointUrl>,
    pub model: String,
    pub api_type: ApiType,
    /// Sent as `Authorization: Bearer <key>`.
    pub api_key: Option<String>,
    /// Resolved from auto|on|off (auto: off offline, on online).
    pub streaming: bool,
    /// Ask streaming OpenAI requests for usage (`stream_options.include_usage`).
    pub stream_include_usage: bool,
    pub max_output_tokens: u32,
    /// `model_params.min_new_tokens` when set explicitly (openai_completions only).
    pub min_output_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub seed: Option<u64>,
    /// Penalties, skip_special_tokens, chat_template_kwargs, ignore_eos (`resolve_sampling`).
    pub sampling: Sampling,
    /// `--extra-body` / `model_params.extra_body`: top-level keys in the order given.
    pub extra_body: Vec<(String, serde_json::Value)>,
    /// Each row's drawn output length (`osl_distribution`); empty = every row asks for
    /// `max_output_tokens`.
    pub row_output_tokens: Vec<u32>,
    /// The performance dataset, loaded and mapped.
    pub dataset: Dataset,
    /// True when no dataset was given and the built-in synthetic one is used.
    pub dataset_is_synthetic: bool,
    /// The client tokenizer; `None` = no client token counts (warned at resolve time).
    pub tokenizer: Option<Tokenizer>,
    /// Samples to issue in the performance phase (anchor §3.5).
    pub num_samples: u64,
    /// Wall-time cap of the performance phase; in-flight samples are abandoned at it.
    pub max_duration_ms: Option<u64>,
    /// How long to wait for in-flight samples after the last issue.
    pub drain_timeout_ms: u64,
    /// The client tokenizer pool (`settings.drain.metrics_*`).
    pub token_pool: TokenPoolSettings,
    /// Per-request timeout (`--timeout` / YAML `timeout:`, seconds), from the request's
    /// write to the response's end; 0 = none. Past it the sample fails with kind `timeout`.
    pub request_timeout_ns: u64,
    /// Worker processes (default: `loadgen_coordinator::cpu::default_worker_count`, one per
    /// core less the coordinator's and an embedded stub's; at most `max_connections`).
    pub workers: usize,
    /// Connections across all workers (default: 32 per worker, and at least the
    /// concurrency of a concurrency run).
    pub max_connections: usize,
    /// Local addresses the connections leave from, in turn (`--source-addresses`); empty =
    /// the kernel's choice, or loopback ones picked at run time past one address's ports
    /// (`loadgen_worker::http::ports::source_addresses_for`).
    pub source_addresses: Vec<std::net::IpAddr>,
    pub cpu_affinity: bool,
    /// Connections opened before the clock starts, across all workers: `None` = auto,
    /// `Some(0)` = one per worker (`--client.warmup-connections`, -1 = auto); see
    /// `warm_connections`. The rest of the pool opens on demand.
    pub warmup_connections: Option<usize>,
    /// How long workers may take to start and connect (`--client.worker-initialization-timeout`).
    pub worker_init_timeout_ms: u64,
    pub warmup: Warmup,
    pub early_stopping: bool,
    pub report_dir: PathBuf,
    /// Write events.jsonl (`--no-events` turns it off).
    pub events: bool,
    pub token_count_source: TokenCountSource,
    pub scheduler_seed: u64,
    pub dataloader_seed: u64,
    /// Report the LoadGen form of QPS as the headline (Poisson only).
    pub legacy_loadgen_qps: bool,
    /// `-v` count.
    pub verbose: u8,
    /// The resolved configuration in the reference's schema, secrets redacted: written as
    /// `config.yaml` in the report directory.
    pub config_yaml: String,
}

impl Plan {
    /// The resolved plan in a few lines, for `-v`: what the defaults turned into.
    pub fn summary(&self) -> String {
        let pattern = match self.load_pattern {
            LoadPattern::Offline => "max_throughput".to_string(),
            LoadPattern::Poisson { target_qps } => format!("poisson at {target_qps} qps"),
            LoadPattern::Concurrency { n } => format!("concurrency {n}"),
        };
        let cap = self.max_duration_ms.map_or("none".to_string(), |ms| format!("{ms} ms"));
        let warm = match (self.warmup_connections, self.load_pattern) {
            (Some(0), _) => "0: one per worker, the rest on demand".to_string(),
            (Some(n), _) => format!("{n}, the rest on demand"),
            (None, LoadPattern::Poisson { .. }) => format!(
                "auto: up to {POISSON_WARM_CONNECTIONS_PER_WORKER_MAX} per worker, the rest on demand"
            ),
            (None, _) => "auto: all".to_string(),
        };
        format!(
            "plan: {pattern}, {} samples (max duration {cap}, drain {} ms), streaming {}\n\
             plan: {} workers, {} connections (warm-up connections {warm}, start timeout {} \
             ms), cpu affinity {}\n\
             plan: dataset {} ({} rows), token count source {}, report dir {}",
            self.num_samples,
            self.drain_timeout_ms,
            if self.streaming { "on" } else { "off" },
            self.workers,
            self.max_connections,
            self.worker_init_timeout_ms,
            if self.cpu_affinity { "on" } else { "off" },
            self.dataset.name,
            self.dataset.rows.len(),
            match self.token_count_source {
                TokenCountSource::Client => "client",
                TokenCountSource::Server => "server",
            },
            self.report_dir.display(),
        )
    }
}

/// Default connections per worker when `--max-connections` is not given.
pub const CONNECTIONS_PER_WORKER_DEFAULT: usize = 32;

/// Warm connections a Poisson worker opens at most under auto: its pool is sized for a second
/// of latency at the target rate, far more than a fast endpoint keeps busy, so the rest of
/// the pool opens on demand instead of delaying the start.
pub const POISSON_WARM_CONNECTIONS_PER_WORKER_MAX: usize = 1024;

/// Part `index` of `total` split over `parts` as evenly as possible (the first ones get the
/// remainder): how the pool and explicit warm-up counts are spread across workers.
pub fn split_share(total: usize, parts: usize, index: usize) -> usize {
    let parts = parts.max(1);
    total / parts + usize::from(index < total % parts)
}

/// Connections worker `index` of `workers` opens before the start, out of its pool share
/// `share` (`--client.warmup-connections`). Auto (`None`): the whole share for offline and
/// concurrency runs (a closed loop of N needs its N connections at t=0), at most
/// `POISSON_WARM_CONNECTIONS_PER_WORKER_MAX` for Poisson. An explicit N is split across the
/// workers like the pool and clamped to the share; 0 stays 0 (the worker still opens one, to
/// check the endpoint answers).
pub fn warm_connections(
    pattern: LoadPattern,
    warmup_connections: Option<usize>,
    workers: usize,
    index: usize,
    share: usize,
) -> usize {
    match (warmup_connections, pattern) {
        (Some(n), _) => split_share(n, workers, index).min(share),
        (None, LoadPattern::Poisson { .. }) => share.min(POISSON_WARM_CONNECTIONS_PER_WORKER_MAX),
        (None, _) => share,
    }
}

/// Model name used with the embedded stub when no `--model` is given.
pub const EMBEDDED_MODEL: &str = "llm-loadgen-stub";

/// The reference's default target rate for sizing the sample count (anchor §3.5).
pub const SAMPLE_SIZING_QPS_DEFAULT: f64 = 10.0;

/// Resolves a configuration (YAML and/or flags, already merged) into a validated plan:
/// checks every setting, loads the dataset and the tokenizer, sizes the run.
pub fn resolve_plan(mut config: Config, verbose: u8) -> Result<Plan, AppError> {
    register_secrets(&config);
    refuse_unsupported(&config)?;
    apply_generation_override(&mut config)?;
    for note in check_reference_only(&config)? {
        eprintln!("{note}");
    }
    let load_pattern = resolve_load_pattern(&config)?;
    check_sample_counts(&config)?;
    let endpoints = parse_endpoints(&config)?;
    warn_userinfo(&config);
    let model = resolve_model(&config, &endpoints)?;
    config.model_params.name = Some(model.clone());
    let api_type = api_type_of(config.endpoint_config.api_type);
    let streaming = resolve_streaming(&config);
    config.model_params.streaming = if streaming { Streaming::On } else { Streaming::Off };
    check_completions_only(&config, api_type)?;
    let (sampling, extra_body) = resolve_sampling(&config, api_type)?;
    let token_count_source = resolve_token_source(&config, api_type, streaming)?;
    let (dataset, dataset_is_synthetic) = resolve_dataset(&mut config, verbose)?;
    check_rows_n(&dataset, token_count_source)?;
    check_extra_body_n(&extra_body, token_count_source)?;
    let tokenizer = resolve_tokenizer(&config, &model, verbose)?;
    if let Some(note) = chat_template_note(api_type, &endpoints, &dataset, tokenizer.as_ref()) {
        eprintln!("{note}");
    }
    let report_dir = record_resolved(&mut config, token_count_source);
    let (workers, max_connections) = resolve_workers(&config, load_pattern)?;
    let token_pool = resolve_token_pool(&mut config, workers)?;
    let runtime = &config.settings.runtime;
    let rows = dataset.rows.len() as u64;
    let num_samples = samples_to_issue(
        runtime.n_samples_to_issue,
        runtime.min_duration_ms,
        config.settings.load_pattern.target_qps,
        rows,
    );
    let max_duration_ms = check_durations(runtime)?;
    let source_addresses = resolve_source_addresses(&config.source_addresses, &endpoints)?;
    let drain_timeout_ms =
        resolve_drain_timeout_ms(config.settings.drain.performance_timeout_s, "drain")?;
    let request_timeout_ns = resolve_request_timeout(config.timeout)?;
    let row_output_tokens = draw_output_tokens(&config, dataset.rows.len())?;
    let warmup = &config.settings.warmup;
    Ok(Plan {
        load_pattern,
        endpoints,
        model,
        api_type,
        api_key: config.endpoint_config.api_key.clone(),
        streaming,
        stream_include_usage: config.settings.client.stream_include_usage,
        max_output_tokens: config.model_params.max_new_tokens,
        min_output_tokens: (config.model_params.min_new_tokens != 1)
            .then_some(config.model_params.min_new_tokens),
        temperature: config.model_params.temperature,
        top_p: config.model_params.top_p,
        top_k: config.model_params.top_k,
        seed: config.model_params.seed,
        sampling,
        extra_body,
        row_output_tokens,
        dataset,
        dataset_is_synthetic,
        tokenizer,
        num_samples,
        max_duration_ms,
        drain_timeout_ms,
        token_pool,
        request_timeout_ns,
        workers,
        max_connections,
        source_addresses,
        cpu_affinity: config.enable_cpu_affinity,
        warmup_connections: resolve_warmup_connections(config.settings.client.warmup_connections)?,
        worker_init_timeout_ms: seconds_to_ms(
            config.settings.client.worker_initialization_timeout,
            "worker initialization",
        )?,
        warmup: Warmup {
            enabled: warmup.enabled,
            requests: warmup.n_requests,
            drain: warmup.drain,
            drain_timeout_ms: resolve_drain_timeout_ms(
                config.settings.drain.warmup_timeout_s,
                "warm-up drain",
            )?,
        },
        early_stopping: config.settings.early_stopping.enabled,
        report_dir,
        events: config.events.unwrap_or(true),
        token_count_source,
        scheduler_seed: runtime.scheduler_random_seed,
        dataloader_seed: runtime.dataloader_random_seed,
        legacy_loadgen_qps: matches!(load_pattern, LoadPattern::Poisson { .. })
            && config.settings.load_pattern.use_legacy_loadgen_qps_metrics,
        verbose: verbose.max(u8::from(config.verbose)),
        config_yaml: config.to_redacted_yaml()?,
    })
}

/// Writes the values resolved from defaults back into the config, so `config.yaml` shows
/// what the run used; returns the report directory.
fn record_resolved(config: &mut Config, source: TokenCountSource) -> PathBuf {
    let report_dir = match &config.report_dir {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(format!("/tmp/reports_{}", local_timestamp())),
    };
    config.report_dir = Some(report_dir.display().to_string());
    config.settings.token_count_source = match source {
        TokenCountSource::Client => TokenSource::Client,
        TokenCountSource::Server => TokenSource::Server,
    };
    if config.name.is_none() {
        config.name = Some(format!("{}_benchmark", config.kind.as_str()));
    }
    report_dir
}

/// The checks that need no file, as the reference's schema and cross-field rules make them:
/// load pattern against type, endpoints, model, API-type rules, token basis, durations,
/// workers and datasets (`validate-yaml` runs only these). What the reference accepts but a
/// run here would refuse is `run_refusals`, not an error here.
pub fn check_config(config: &Config) -> Result<(), AppError> {
    let pattern = check_pattern_as_reference(config)?.unwrap_or(LoadPattern::Offline);
    check_datasets_as_reference(config)?;
    let endpoints = parse_endpoints(config)?;
    resolve_model(config, &endpoints)?;
    let api_type = api_type_of(config.endpoint_config.api_type);
    check_completions_only(config, api_type)?;
    resolve_sampling(config, api_type)?;
    draw_output_tokens(config, 0)?; // zero rows: the settings are checked, nothing is drawn
    check_generation_overrides(config, api_type)?;
    resolve_token_source(config, api_type, resolve_streaming(config))?;
    check_durations(&config.settings.runtime)?;
    resolve_request_timeout(config.timeout)?;
    check_sample_counts(config)?;
    check_worker_settings(config, pattern)?;
    resolve_warmup_connections(config.settings.client.warmup_connections)?;
    check_token_pool(config)?;
    check_reference_bounds(config)?;
    Ok(())
}

/// The reference's rule on `num_workers` (-1 or 1 and more) and `max_connections`; how many
/// workers this machine's cores allow is a run's check, not the file's.
fn check_worker_settings(config: &Config, pattern: LoadPattern) -> Result<(), AppError> {
    let mut as_file = config.clone();
    let workers = &mut as_file.settings.client.num_workers;
    if *workers > 0 {
        *workers = 1;
    }
    resolve_workers(&as_file, pattern).map(|_| ())
}

/// The reference's rules on `type`, `benchmark_mode` and the load pattern: a submission runs
/// as its `benchmark_mode`; an eval has no load-pattern rule; `agentic_inference` needs a
/// performance dataset with an `agentic_inference` block and the other way round. Returns the
/// pattern a run would use where one exists here.
fn check_pattern_as_reference(config: &Config) -> Result<Option<LoadPattern>, AppError> {
    let mode = match (config.kind, config.benchmark_mode) {
        (BenchType::Submission, None) => {
            return Err(AppError::Input(
                "type submission needs benchmark_mode (offline or online)".into(),
            ))
        }
        (BenchType::Submission, Some(mode @ (BenchType::Offline | BenchType::Online))) => mode,
        (BenchType::Submission, Some(other)) => {
            return Err(AppError::Input(format!(
                "benchmark_mode {:?} is not valid; give offline or online",
                other.as_str()
            )))
        }
        (kind, _) => kind,
    };
    let lp = &config.settings.load_pattern;
    let agentic = |perf: bool| {
        config
            .datasets
            .iter()
            .any(|d| d.agentic_inference.is_some() && (d.kind == DatasetKind::Performance) == perf)
    };
    if agentic(false) {
        return Err(AppError::Input(
            "datasets[].agentic_inference is only valid on performance datasets".into(),
        ));
    }
    let agentic_pattern = lp.kind == LoadPatternKind::AgenticInference;
    if agentic_pattern != agentic(true) && mode != BenchType::Offline {
        return Err(AppError::Input(if agentic_pattern {
            "settings.load_pattern.type agentic_inference needs a performance dataset with an \
             agentic_inference block"
                .into()
        } else {
            format!(
                "a performance dataset with agentic_inference needs \
                 settings.load_pattern.type agentic_inference, got {}",
                lp.kind.as_str()
            )
        }));
    }
    if agentic_pattern && config.settings.runtime.n_samples_to_issue.is_some() {
        return Err(AppError::Input(
            "settings.runtime.n_samples_to_issue does not apply to agentic_inference; use \
             datasets[].agentic_inference.num_trajectories_to_issue"
                .into(),
        ));
    }
    if mode == BenchType::Eval || (agentic_pattern && mode == BenchType::Online) {
        return Ok(None);
    }
    let mut as_run = config.clone();
    as_run.kind = mode;
    resolve_load_pattern(&as_run).map(Some)
}

/// The reference's rules on `datasets:`: no two with one (name, type); a dataset without a
/// `path` names a predefined dataset; per-dataset overrides name `model_params` keys and none
/// of its per-run ones.
fn check_datasets_as_reference(config: &Config) -> Result<(), AppError> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, d) in config.datasets.iter().enumerate() {
        let name = d.display_name();
        if name.is_empty() {
            return Err(AppError::Input(format!(
                "datasets[{i}] has neither name nor path; give one"
            )));
        }
        if !seen.insert((name.clone(), d.kind == DatasetKind::Accuracy)) {
            return Err(AppError::Input(format!(
                "datasets[{i}]: two datasets are named {name:?} ({:?}); give each its own name",
                d.kind
            )));
        }
        check_accuracy_config(i, d)?;
        if let Some(a) = &d.agentic_inference {
            let turn_s = a.turn_timeout_s;
            if !(turn_s > 0.0 && turn_s.is_finite()) || a.num_trajectories_to_issue == Some(0) {
                return Err(AppError::Input(format!(
                    "datasets[{i}].agentic_inference: turn_timeout_s {turn_s} and \
                     num_trajectories_to_issue must be above 0"
                )));
            }
        }
        for key in d.generation_config_override.iter().flat_map(|o| o.keys()) {
            let per_run = ["name", "streaming", "tokenizer_name"].contains(&key.as_str());
            if per_run || !MODEL_PARAMS_KEYS.contains(&key.as_str()) {
                let why = if per_run {
                    "is per run: set it in model_params"
                } else {
                    "is not a model_params key"
                };
                return Err(AppError::Input(format!(
                    "datasets[{i}].generation_config_override.{key} {why}"
                )));
            }
        }
    }
    Ok(())
}

/// `datasets[].accuracy_config` as the reference's `AccuracyConfig`: its five keys only, a
/// registered scorer, `num_repeats` 1 or more.
fn check_accuracy_config(i: usize, d: &crate::dataset::DatasetSpec) -> Result<(), AppError> {
    const KEYS: [&str; 5] = ["eval_method", "ground_truth", "extractor", "num_repeats", "extras"];
    const SCORERS: [&str; 10] = [
        "pass_at_1",
        "string_match",
        "rouge",
        "code_bench_scorer",
        "shopify_category_f1",
        "agentic_inference_inline",
        "vbench",
        "bfcl_v4",
        "legacy_mlperf_deepseek_r1",
        "swe_bench_scorer",
    ];
    let Some(acc) = &d.accuracy_config else { return Ok(()) };
    let bad = |key: &str, value: &serde_json::Value, want: &str| {
        Err(AppError::Input(format!(
            "datasets[{i}].accuracy_config.{key} {value} is not valid; give {want}"
        )))
    };
    for (key, value) in acc {
        match key.as_str() {
            _ if !KEYS.contains(&key.as_str()) => {
                return bad(key, value, &format!("one of the keys {}", KEYS.join(", ")))
            }
            "eval_method"
                if !value.is_null() && !value.as_str().is_some_and(|m| SCORERS.contains(&m)) =>
            {
                return bad(key, value, &format!("one of {}", SCORERS.join(", ")));
            }
            "num_repeats" => {
                let n = value.as_u64().or_else(|| value.as_str().and_then(|t| t.parse().ok()));
                if n.is_none_or(|n| n < 1) {
                    return bad(key, value, "a whole number, 1 or more");
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The keys of `model_params:` (the reference's `ModelParams`, plus this tool's own two).
const MODEL_PARAMS_KEYS: [&str; 17] = [
    "name",
    "temperature",
    "seed",
    "top_k",
    "top_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "chat_template_kwargs",
    "max_new_tokens",
    "min_new_tokens",
    "skip_special_tokens",
    "osl_distribution",
    "streaming",
    "tokenizer_name",
    "ignore_eos",
    "extra_body",
];

/// What a file the reference accepts asks for that a run here does not do yet, one line per
/// key path; `validate-yaml` lists them, a run refuses the first (`refuse_unsupported`).
pub fn run_refusals(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if matches!(config.kind, BenchType::Eval | BenchType::Submission) {
        out.push(format!(
            "type: {} is not supported yet (use offline or online)",
            config.kind.as_str()
        ));
    }
    let perf: Vec<String> = config
        .datasets
        .iter()
        .filter(|d| d.kind == DatasetKind::Performance)
        .map(|d| d.display_name())
        .collect();
    if perf.len() > 1 {
        out.push(format!(
            "datasets: only one performance dataset is supported, got {}: {}",
            perf.len(),
            perf.join(", ")
        ));
    }
    for (i, d) in config.datasets.iter().enumerate() {
        out.extend(dataset_refusals(i, d));
    }
    if let Some(r) = &config.submission_ref {
        out.push(format!(
            "submission_ref (ruleset {:?}) is not supported yet: rulesets and their pinned seeds",
            r.ruleset
        ));
    }
    if config.audit.is_some() {
        out.push("audit is not supported yet: compliance audits after the run".into());
    }
    if let Err(e) = refuse_missing_features(config) {
        out.push(e.to_string());
    }
    out
}

fn dataset_refusals(i: usize, d: &crate::dataset::DatasetSpec) -> Vec<String> {
    let name = d.display_name();
    let mut out = Vec::new();
    let mut push = |key: &str, what: &str| {
        out.push(format!("datasets[{i}].{key} (dataset {name}) is not supported yet: {what}"));
    };
    if d.kind == DatasetKind::Accuracy {
        push("type accuracy", "accuracy datasets are not scored here");
    }
    for (key, what) in crate::dataset::predefined_refusals(d) {
        push(&key, &what);
    }
    if d.eval_method.is_some() {
        push("eval_method", "accuracy evaluation");
    }
    if d.agentic_inference.is_some() {
        push("agentic_inference", "multi-turn agentic conversations");
    }
    for target in d.parser.iter().flat_map(|p| p.other.keys()) {
        if !crate::dataset::PARSER_TARGETS.contains(&target.as_str()) {
            push(&format!("parser.{target}"), "a column this tool does not read");
        }
    }
    out
}

/// A run refuses the first of `run_refusals`, naming its key (exit 2), rather than drop it.
fn refuse_unsupported(config: &Config) -> Result<(), AppError> {
    match run_refusals(config).into_iter().next() {
        Some(why) => Err(AppError::Input(format!("{why}; leave it out to run here"))),
        None => Ok(()),
    }
}

/// `datasets[].generation_config_override` of the one dataset a run drives: merged over
/// `model_params` (nested mappings deep-merged, as the reference's `_deep_merge`) and the result
/// re-read through the schema, so a bad value is named as `model_params` would name it.
fn apply_generation_override(config: &mut Config) -> Result<(), AppError> {
    if let Some(merged) = merged_model_params(config, 0)? {
        config.model_params = merged;
    }
    Ok(())
}

/// `model_params` with dataset `i`'s override merged in; `None` where it has none.
fn merged_model_params(config: &Config, i: usize) -> Result<Option<ModelParams>, AppError> {
    let Some(over) = config.datasets.get(i).and_then(|d| d.generation_config_override.clone())
    else {
        return Ok(None);
    };
    let what = format!("datasets[{i}].generation_config_override");
    let mut merged = serde_json::to_value(&config.model_params)
        .map_err(|e| AppError::Execution(format!("cannot merge {what}: {e}")))?;
    deep_merge(&mut merged, serde_json::Value::Object(over.into_iter().collect()));
    serde_json::from_value(merged)
        .map(Some)
        .map_err(|e| AppError::Input(format!("{what}: {e}; fix the value")))
}

/// Each dataset's merged `model_params` meets the rules the top-level one does, as the
/// reference checks every generation-config surface alike.
fn check_generation_overrides(config: &Config, api_type: ApiType) -> Result<(), AppError> {
    for i in 0..config.datasets.len() {
        if let Some(merged) = merged_model_params(config, i)? {
            let mut c = config.clone();
            c.model_params = merged;
            check_completions_only(&c, api_type)?;
            resolve_sampling(&c, api_type)?;
            draw_output_tokens(&c, 0)?;
        }
    }
    Ok(())
}

fn deep_merge(base: &mut serde_json::Value, over: serde_json::Value) {
    match (base, over) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) if slot.is_object() && v.is_object() => deep_merge(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// A drain's timeout in ms; `null` (the reference's "wait indefinitely") is `DRAIN_FOREVER_MS`.
fn resolve_drain_timeout_ms(seconds: Option<f64>, what: &str) -> Result<u64, AppError> {
    match seconds {
        Some(s) => seconds_to_ms(s, what),
        None => Ok(DRAIN_FOREVER_MS),
    }
}

/// The drain of a `null` timeout: a hundred years, so unbounded for any run, yet an instant
/// plus it cannot overflow (the coordinator adds it to `Instant::now()`).
pub const DRAIN_FOREVER_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

/// The reference's settings that have no counterpart to drive here. Those that only tune the
/// reference's own machinery (its ZMQ transport, Python workers, service start-up) change no
/// result: each value other than the reference's default gives one note. Those whose
/// feature is missing are refused, naming the key and its flags. Flags and YAML keys land on
/// the same `Config` fields (`cli::SpellingFlags`), so both are judged here alike.
pub fn check_reference_only(config: &Config) -> Result<Vec<String>, AppError> {
    refuse_missing_features(config)?;
    let s = &config.settings;
    let (c, d) = (&s.client, crate::yaml::Client::default());
    let stop = "workers stop when the coordinator closes their rings";
    #[rustfmt::skip]
    let table: [(bool, &str, &str, &str); 12] = [
        (c.transport.kind != d.transport.kind, "client.transport.type",
         "--client.transport.type", "workers hand samples over shared-memory rings, not ZMQ"),
        (c.log_level != d.log_level, "client.log_level", "--client.log-level",
         "workers do not log per request; use -v"),
        (c.worker_gc_mode != d.worker_gc_mode, "client.worker_gc_mode",
         "--client.worker-gc-mode", "workers have no garbage collector"),
        (c.worker_graceful_shutdown_wait != d.worker_graceful_shutdown_wait,
         "client.worker_graceful_shutdown_wait", "--client.worker-graceful-shutdown-wait", stop),
        (c.worker_force_kill_timeout != d.worker_force_kill_timeout,
         "client.worker_force_kill_timeout", "--client.worker-force-kill-timeout", stop),
        (s.service_ready_timeout_s != 30.0, "service_ready_timeout_s", "--service-ready-timeout",
         "there are no separate metrics or event-logger services"),
        (c.stream_all_chunks != d.stream_all_chunks, "client.stream_all_chunks",
         "--client.stream-all-chunks", "workers time every chunk themselves"),
        (c.auto_warmup_budget_fraction != d.auto_warmup_budget_fraction,
         "client.auto_warmup_budget_fraction", "--client.auto-warmup-budget-fraction",
         "auto warm-up connections are sized per worker (--client.warmup-connections)"),
        (c.max_concurrent_warmup_connects != d.max_concurrent_warmup_connects,
         "client.max_concurrent_warmup_connects", "--max-concurrent-warmup-connects",
         "each worker opens its connections in turn"),
        (c.max_idle_time != d.max_idle_time, "client.max_idle_time", "--client.max-idle-time",
         "a connection the endpoint closed is reopened on its next request"),
        (c.min_required_connections != d.min_required_connections,
         "client.min_required_connections", "--client.min-required-connections",
         "connections that cannot be opened fail their samples with kind connect"),
        (s.drain.accuracy_timeout_s.is_some(), "drain.accuracy_timeout_s",
         "--accuracy-drain-timeout", "no accuracy phase runs (accuracy mode is not supported yet)"),
    ];
    Ok(table
        .iter()
        .filter(|(changed, ..)| *changed)
        .map(|(_, key, flag, why)| {
            format!("note: settings.{key} ({flag}) has no effect here: {why}")
        })
        .collect())
}

/// The reference's bounds on its machinery settings: a value it refuses is refused here
/// too, rather than noted as having no effect.
fn check_reference_bounds(config: &Config) -> Result<(), AppError> {
    let (s, c) = (&config.settings, &config.settings.client);
    let bad = |key: &str, flag: &str, value: String, want: &str| {
        Err(AppError::Input(format!("settings.{key} ({flag}) {value} is not valid; give {want}")))
    };
    let fraction = c.auto_warmup_budget_fraction;
    if !(fraction > 0.0 && fraction <= 1.0) {
        return bad(
            "client.auto_warmup_budget_fraction",
            "--client.auto-warmup-budget-fraction",
            fraction.to_string(),
            "a fraction above 0, at most 1",
        );
    }
    if c.max_concurrent_warmup_connects < 1 {
        return bad(
            "client.max_concurrent_warmup_connects",
            "--max-concurrent-warmup-connects",
            c.max_concurrent_warmup_connects.to_string(),
            "1 or more",
        );
    }
    if !["disabled", "relaxed", "system"].contains(&c.worker_gc_mode.as_str()) {
        return bad(
            "client.worker_gc_mode",
            "--client.worker-gc-mode",
            format!("{:?}", c.worker_gc_mode),
            "disabled, relaxed or system",
        );
    }
    if !(s.service_ready_timeout_s >= 0.0 && s.service_ready_timeout_s.is_finite()) {
        return bad(
            "service_ready_timeout_s",
            "--service-ready-timeout",
            s.service_ready_timeout_s.to_string(),
            "0 or more seconds",
        );
    }
    let perf_s = s.drain.performance_timeout_s;
    if let Some(perf_s) = perf_s.filter(|v| !(*v > 0.0 && v.is_finite())) {
        let flag = "--performance-drain-timeout";
        return bad("drain.performance_timeout_s", flag, perf_s.to_string(), "seconds above 0");
    }
    if let Some(warmup_s) = s.drain.warmup_timeout_s.filter(|v| !(*v > 0.0 && v.is_finite())) {
        let flag = "--warmup-drain-timeout";
        return bad("drain.warmup_timeout_s", flag, warmup_s.to_string(), "seconds above 0");
    }
    if let Some(accuracy_s) = s.drain.accuracy_timeout_s.filter(|v| v.is_nan() || *v <= 0.0) {
        let flag = "--accuracy-drain-timeout";
        return bad("drain.accuracy_timeout_s", flag, accuracy_s.to_string(), "seconds above 0");
    }
    Ok(())
}

/// Refuses the reference's settings whose feature does not exist here yet.
fn refuse_missing_features(config: &Config) -> Result<(), AppError> {
    check_reference_bounds(config)?;
    let s = &config.settings;
    let refuse = |key: &str, flags: &str, what: &str| {
        Err(AppError::Input(format!(
            "settings.{key} ({flags}) is not supported yet: {what}; leave it out"
        )))
    };
    if s.client.insecure {
        return refuse(
            "client.insecure",
            "--insecure",
            "there is no TLS to verify (https:// endpoints)",
        );
    }
    if s.warmup.salt {
        return refuse("warmup.salt", "--warmup-salt, --salt", "warm-up prompts are sent as given");
    }
    if s.warmup.warmup_random_seed != 42 {
        return refuse(
            "warmup.warmup_random_seed",
            "--warmup-seed, --warmup-random-seed",
            &format!(
                "{} asks for a warm-up order of its own; warm-up here issues the first samples \
                 of the sample order (--runtime.dataloader-random-seed)",
                s.warmup.warmup_random_seed
            ),
        );
    }
    if let Some(engine) = &s.profiling.engine {
        return refuse(
            "profiling.engine",
            "--profile, --engine",
            &format!("server profiling ({engine:?}) is not supported yet"),
        );
    }
    if s.profiling.urls.is_some() {
        return refuse("profiling.urls", "--profile-urls, --urls", "server profiling");
    }
    Ok(())
}

/// `metrics_tokenizer_workers` and `metrics_drain_timeout_s`, checked.
fn check_token_pool(config: &Config) -> Result<TokenPoolSettings, AppError> {
    let drain = &config.settings.drain;
    let workers = match drain.metrics_tokenizer_workers {
        None => None,
        Some(n) if (0..=TOKENIZER_WORKERS_MAX).contains(&n) => Some(n as usize),
        Some(n) => {
            return Err(AppError::Input(format!(
                "--metrics-tokenizer-workers {n} (settings.drain.metrics_tokenizer_workers) is \
                 not valid; give 0 to count after the run, or 1 to {TOKENIZER_WORKERS_MAX} threads"
            )))
        }
    };
    let seconds = drain.metrics_drain_timeout_s;
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(AppError::Input(format!(
            "--metrics-drain-timeout {seconds} (settings.drain.metrics_drain_timeout_s) is not \
             valid; give seconds, or 0 for no limit"
        )));
    }
    let drain_timeout_ms = seconds_to_ms(seconds, "metrics drain")?;
    Ok(TokenPoolSettings { workers, live_threads: 0, drain_timeout_ms })
}

/// The token pool settings of the run; writes the live thread count the CPU plan picks back
/// into the config, so `config.yaml` shows what the run did and reruns the same.
fn resolve_token_pool(config: &mut Config, workers: usize) -> Result<TokenPoolSettings, AppError> {
    use loadgen_coordinator::cpu::{tokenizer_threads, CpuPlan};
    let mut settings = check_token_pool(config)?;
    let embedded = config.endpoint_config.endpoints.is_empty();
    let cpu = CpuPlan::new(&cores_available(), workers, config.enable_cpu_affinity, embedded);
    settings.live_threads = tokenizer_threads(settings.workers, &cpu).live;
    config.settings.drain.metrics_tokenizer_workers = Some(settings.live_threads as i64);
    Ok(settings)
}

fn parse_endpoints(config: &Config) -> Result<Vec<EndpointUrl>, AppError> {
    let endpoints: Vec<EndpointUrl> = config
        .endpoint_config
        .endpoints
        .iter()
        .map(|u| parse_endpoint(u))
        .collect::<Result<_, _>>()?;
    if endpoints.len() > 1 && endpoints.iter().any(EndpointUrl::is_null) {
        return Err(AppError::Input(format!(
            "endpoint {NULL_ENDPOINT} measures the client alone and cannot be mixed with other \
             endpoints; give it on its own"
        )));
    }
    Ok(endpoints)
}

/// Registers every secret of the configuration with `redact`, before anything can print one.
fn register_secrets(config: &Config) {
    if let Some(key) = &config.endpoint_config.api_key {
        crate::redact::register_secret(key);
    }
    for url in &config.endpoint_config.endpoints {
        if let (_, Some(secret)) = crate::redact::split_userinfo(url.trim()) {
            crate::redact::register_secret(&secret);
        }
    }
}

/// The reference reads only the host and port of an endpoint URL and sends no credentials
/// from it; so does this, and says so (without the password).
fn warn_userinfo(config: &Config) {
    for url in &config.endpoint_config.endpoints {
        if crate::redact::split_userinfo(url.trim()).1.is_some() {
            eprintln!(
                "warning: endpoint {}: the user and password in the URL are not sent (the \
                 reference ignores them too); give a key with --api-key",
                crate::redact::redact_url(url.trim())
            );
        }
    }
}

fn resolve_streaming(config: &Config) -> bool {
    match config.model_params.streaming {
        Streaming::On => true,
        Streaming::Off => false,
        Streaming::Auto => config.kind == BenchType::Online,
    }
}

/// Samples to issue (anchor §3.5): `n_samples_to_issue` wins; a zero minimum duration
/// issues the dataset once; otherwise `ceil(qps × duration × 1.1)` (qps 10 when unset),
/// rounded up to a multiple of the dataset size.
pub fn samples_to_issue(
    n_samples_to_issue: Option<u64>,
    min_duration_ms: u64,
    target_qps: Option<f64>,
    dataset_rows: u64,
) -> u64 {
    if let Some(n) = n_samples_to_issue {
        return n;
    }
    let rows = dataset_rows.max(1);
    if min_duration_ms == 0 {
        return rows;
    }
    let qps = target_qps.unwrap_or(SAMPLE_SIZING_QPS_DEFAULT);
    let wanted = (qps * (min_duration_ms as f64 / 1000.0) * 1.1).ceil().max(1.0) as u64;
    wanted.div_ceil(rows) * rows
}

fn resolve_load_pattern(config: &Config) -> Result<LoadPattern, AppError> {
    let lp = &config.settings.load_pattern;
    match config.kind {
        BenchType::Offline | BenchType::Online => {}
        other => {
            return Err(AppError::Input(format!(
                "config type {:?} is not supported yet (use offline or online)",
                other.as_str()
            )))
        }
    }
    if let Some(qps) = lp.target_qps {
        if !(qps.is_finite() && qps > 0.0) {
            return Err(AppError::Input(format!("target qps must be above 0, got {qps}")));
        }
    }
    if lp.target_concurrency == Some(0) {
        return Err(AppError::Input("target concurrency must be above 0, got 0".into()));
    }
    let contradiction = |msg: String| Err(AppError::Setup(msg));
    match (config.kind, lp.kind) {
        (BenchType::Offline, LoadPatternKind::MaxThroughput) => {
            if let Some(c) = lp.target_concurrency {
                return contradiction(format!(
                    "--concurrency {c} does not apply to benchmark offline (max_throughput); \
                     use benchmark online --load-pattern concurrency --concurrency {c}"
                ));
            }
            Ok(LoadPattern::Offline)
        }
        (BenchType::Offline, kind) => contradiction(format!(
            "benchmark offline uses load pattern max_throughput, got {}; use benchmark online",
            kind.as_str()
        )),
        (_, LoadPatternKind::Poisson) => match (lp.target_qps, lp.target_concurrency) {
            (_, Some(c)) => contradiction(format!(
                "--concurrency {c} does not apply to load pattern poisson (it uses --target-qps)"
            )),
            (Some(q), None) => Ok(LoadPattern::Poisson { target_qps: q }),
            (None, None) => contradiction("load pattern poisson needs --target-qps".into()),
        },
        (_, LoadPatternKind::Concurrency) => match lp.target_concurrency {
            Some(n) => Ok(LoadPattern::Concurrency { n }),
            None => contradiction("load pattern concurrency needs --concurrency N".into()),
        },
        (_, LoadPatternKind::MaxThroughput) => contradiction(
            "benchmark online needs --load-pattern poisson (with --target-qps) or concurrency \
             (with --concurrency); for max_throughput use benchmark offline"
                .into(),
        ),
        (_, kind) => contradiction(format!("load pattern {} is not supported", kind.as_str())),
    }
}

/// Validates an endpoint base URL: `http://host[:port][/prefix]`.
pub fn parse_endpoint(url: &str) -> Result<EndpointUrl, AppError> {
    let url = url.trim();
    if let Some(rest) = url.strip_prefix("null://") {
        if !rest.trim_matches('/').is_empty() {
            return Err(AppError::Input(format!(
                "endpoint {url:?}: the null endpoint takes nothing after {NULL_ENDPOINT}"
            )));
        }
        return Ok(EndpointUrl { url: NULL_ENDPOINT.to_string() });
    }
    if url.starts_with("https://") {
        return Err(AppError::Setup(format!(
            "endpoint {url}: TLS is not supported yet; use an http:// endpoint"
        )));
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(AppError::Input(format!(
            "endpoint {url:?} must start with http:// (e.g. http://localhost:8000)"
        )));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_only = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let valid_port = match host_only.rsplit_once(':') {
        Some((h, port)) if !h.ends_with(']') || host_only.starts_with('[') => {
            !h.is_empty() && port.parse::<u16>().is_ok()
        }
        _ => !host_only.is_empty(),
    };
    if host_only.is_empty() || !valid_port {
        return Err(AppError::Input(format!(
            "endpoint {:?} has no valid host[:port]",
            crate::redact::redact_url(url)
        )));
    }
    // Credentials in the URL are dropped here, so the worker and every message see only
    // scheme, host, port and path.
    let (stripped, _) = crate::redact::split_userinfo(url);
    Ok(EndpointUrl { url: stripped.trim_end_matches('/').to_string() })
}

fn resolve_model(config: &Config, endpoints: &[EndpointUrl]) -> Result<String, AppError> {
    match &config.model_params.name {
        Some(name) if !name.trim().is_empty() => Ok(name.clone()),
        // The reference takes the submission's model when model_params.name is not given.
        _ if config.submission_ref.is_some() => {
            Ok(config.submission_ref.as_ref().map(|r| r.model.clone()).unwrap_or_default())
        }
        _ if endpoints.is_empty() || endpoints.iter().all(EndpointUrl::is_null) => {
            Ok(EMBEDDED_MODEL.to_string())
        }
        _ => Err(AppError::Usage(
            "--model is required with --endpoints (model_params.name in YAML)".into(),
        )),
    }
}

fn api_type_of(name: ApiTypeName) -> ApiType {
    match name {
        ApiTypeName::Openai => ApiType::OpenAi,
        ApiTypeName::OpenaiCompletions => ApiType::OpenAiCompletions,
        ApiTypeName::Sglang => ApiType::Sglang,
        ApiTypeName::Videogen => ApiType::VideoGen,
    }
}

fn check_completions_only(config: &Config, api_type: ApiType) -> Result<(), AppError> {
    let mp = &config.model_params;
    if api_type == ApiType::OpenAiCompletions {
        return Ok(());
    }
    if mp.min_new_tokens != 1 {
        return Err(AppError::Setup(format!(
            "min_new_tokens {} is only supported with --api-type openai_completions, not {}",
            mp.min_new_tokens,
            api_type.as_str()
        )));
    }
    if !mp.skip_special_tokens {
        return Err(AppError::Setup(format!(
            "skip_special_tokens false is only supported with --api-type openai_completions, \
             not {}",
            api_type.as_str()
        )));
    }
    Ok(())
}

/// The setup checks of SPEC §4.5 on the token basis.
/// Top-level body keys `--extra-body` may not replace: they carry the prompt or decide how the
/// response is read.
const RESERVED_BODY_KEYS: [&str; 8] = [
    "model",
    "messages",
    "prompt",
    "input_ids",
    "text",
    "stream",
    "stream_options",
    "sampling_params",
];

/// The reference's other sampling keys plus ignore_eos and the extra body, checked against the
/// API: a key an API cannot carry is refused rather than dropped.
fn resolve_sampling(
    config: &Config,
    api_type: ApiType,
) -> Result<(Sampling, Vec<(String, serde_json::Value)>), AppError> {
    let mp = &config.model_params;
    let chat_template_kwargs = match &mp.chat_template_kwargs {
        None => None,
        Some(v) if api_type != ApiType::OpenAi => {
            return Err(AppError::Input(format!(
                "model_params.chat_template_kwargs {} is only sent with --api-type openai (chat), \
                 not {}: its requests are not rendered by a chat template; remove the key",
                yaml_inline(v),
                api_type.as_str()
            )))
        }
        Some(v @ serde_yaml_ng::Value::Mapping(_)) => {
            Some(yaml_to_json(v, "chat_template_kwargs")?)
        }
        Some(v) => {
            return Err(AppError::Input(format!(
                "model_params.chat_template_kwargs {} is not a mapping; give keys such as \
                 {{enable_thinking: false}}",
                yaml_inline(v)
            )))
        }
    };
    let sampling = Sampling {
        repetition_penalty: mp.repetition_penalty,
        presence_penalty: mp.presence_penalty,
        frequency_penalty: mp.frequency_penalty,
        skip_special_tokens: mp.skip_special_tokens,
        chat_template_kwargs,
        ignore_eos: mp.ignore_eos,
    };
    Ok((sampling, resolve_extra_body(mp.extra_body.as_ref())?))
}

fn resolve_extra_body(
    value: Option<&serde_yaml_ng::Value>,
) -> Result<Vec<(String, serde_json::Value)>, AppError> {
    let map = match value {
        None => return Ok(Vec::new()),
        Some(serde_yaml_ng::Value::Mapping(map)) => map,
        Some(v) => {
            return Err(AppError::Input(format!(
                "model_params.extra_body {} is not a mapping; give keys such as {{logprobs: 2}}",
                yaml_inline(v)
            )))
        }
    };
    let mut out = Vec::with_capacity(map.len());
    for (k, v) in map {
        let Some(name) = k.as_str() else {
            return Err(AppError::Input(format!(
                "model_params.extra_body key {} is not a string",
                yaml_inline(k)
            )));
        };
        if RESERVED_BODY_KEYS.contains(&name) {
            return Err(AppError::Input(format!(
                "extra body key {name:?} cannot be replaced: it carries the prompt or decides how \
                 the response is read; set it through its own flag or key"
            )));
        }
        out.push((name.to_string(), yaml_to_json(v, name)?));
    }
    Ok(out)
}

/// `check_rows_n` for an `n` given in the extra body (it replaces every row's).
fn check_extra_body_n(
    extra: &[(String, serde_json::Value)],
    source: TokenCountSource,
) -> Result<(), AppError> {
    let n = extra.iter().find(|(k, _)| k == "n").map(|(_, v)| v);
    match n {
        Some(v) if source == TokenCountSource::Server && v.as_u64() != Some(1) => {
            Err(AppError::Setup(format!(
                "extra body n = {v} asks for several completions; server usage counts all of \
                 them together, so it cannot be measured under --token-count-source server"
            )))
        }
        _ => Ok(()),
    }
}

fn yaml_to_json(v: &serde_yaml_ng::Value, what: &str) -> Result<serde_json::Value, AppError> {
    serde_json::to_value(v).map_err(|e| {
        AppError::Input(format!("{what} value {} cannot be sent as json: {e}", yaml_inline(v)))
    })
}

fn yaml_inline(v: &serde_yaml_ng::Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| format!("{v:?}"))
}

/// Each row's output length under `osl_distribution`, drawn in row order from
/// `Random(dataloader_random_seed)` (the reference parses the key but never applies it; the
/// draw is ours). `original` (or no key) keeps `max_new_tokens` for every row.
fn draw_output_tokens(config: &Config, rows: usize) -> Result<Vec<u32>, AppError> {
    let Some(osl) = &config.model_params.osl_distribution else { return Ok(Vec::new()) };
    if osl.kind == OslKind::Original {
        return Ok(Vec::new());
    }
    let (min, max) = check_osl_bounds(osl, config.model_params.min_new_tokens)?;
    let need = |v: Option<i64>, field: &str| {
        v.ok_or_else(|| {
            AppError::Input(format!(
                "model_params.osl_distribution.{field} is required for type {}; set it",
                osl.kind.as_str()
            ))
        })
    };
    let mut rng = PyRandom::new(config.settings.runtime.dataloader_random_seed);
    let draws: Vec<u32> = match osl.kind {
        OslKind::Original => Vec::new(),
        OslKind::Fixed => {
            let mean = need(osl.mean, "mean")?;
            if mean < min || mean > max {
                return Err(AppError::Input(format!(
                    "model_params.osl_distribution.mean {mean} is outside [min {min}, max {max}]"
                )));
            }
            vec![mean as u32; rows]
        }
        OslKind::Uniform => {
            // Python's randint(min, max) = min + randbelow(max - min + 1).
            let span = (max - min + 1) as u32;
            (0..rows).map(|_| (min + i64::from(rng.randbelow(span))) as u32).collect()
        }
        OslKind::Normal => {
            let (mean, std) = (need(osl.mean, "mean")? as f64, need(osl.std, "std")? as f64);
            (0..rows)
                .map(|_| {
                    (normal_variate(&mut rng, mean, std).round_ties_even() as i64).clamp(min, max)
                        as u32
                })
                .collect()
        }
    };
    Ok(draws)
}

/// `[min, max]` of an osl distribution, checked: 1 <= min <= max < 2^32, min_new_tokens <= min.
fn check_osl_bounds(osl: &OslDistribution, min_new_tokens: u32) -> Result<(i64, i64), AppError> {
    let (min, max) = (osl.min, osl.max);
    if min < 1 || max < min || max > i64::from(u32::MAX) {
        return Err(AppError::Input(format!(
            "model_params.osl_distribution min {min} and max {max} must satisfy 1 <= min <= max; \
             fix --min-output-tokens / --model-params.osl-distribution.max"
        )));
    }
    if i64::from(min_new_tokens) > min {
        return Err(AppError::Input(format!(
            "min_new_tokens {min_new_tokens} exceeds osl_distribution.min {min}: a row could ask \
             for fewer tokens than its minimum; lower min_new_tokens or raise the min"
        )));
    }
    Ok((min, max))
}

/// Python's `random.normalvariate` (Kinderman and Monahan), on the same generator.
fn normal_variate(rng: &mut PyRandom, mu: f64, sigma: f64) -> f64 {
    let magic = 4.0 * (-0.5f64).exp() / 2.0f64.sqrt();
    loop {
        let u1 = rng.random();
        let u2 = 1.0 - rng.random();
        let z = magic * (u1 - 0.5) / u2;
        if z * z / 4.0 <= -u2.ln() {
            return mu + z * sigma;
        }
    }
}

fn resolve_token_source(
    config: &Config,
    api_type: ApiType,
    streaming: bool,
) -> Result<TokenCountSource, AppError> {
    let wanted = match config.settings.token_count_source {
        TokenSource::Client => TokenCountSource::Client,
        TokenSource::Server => TokenCountSource::Server,
    };
    if api_type == ApiType::VideoGen {
        eprintln!("info: api type videogen reports no token usage; token count source is client");
        return Ok(TokenCountSource::Client);
    }
    let opted_out = !config.settings.client.stream_include_usage;
    if wanted == TokenCountSource::Server && opted_out && streaming && api_type.is_openai() {
        return Err(AppError::Setup(format!(
            "--token-count-source server with --no-stream-include-usage on a streaming {} run: \
             the endpoint would send no usage, so every sample would lack server counts and \
             the run would fail at the end; drop --no-stream-include-usage or use \
             --token-count-source client",
            api_type.as_str()
        )));
    }
    Ok(wanted)
}

fn check_dataset_kinds(config: &Config) -> Result<(), AppError> {
    if let Some(acc) = config.datasets.iter().find(|d| d.kind == DatasetKind::Accuracy) {
        return Err(AppError::Input(format!(
            "dataset {}: accuracy datasets are not supported yet; give one performance dataset",
            acc.path
        )));
    }
    if config.datasets.len() > 1 {
        let paths: Vec<&str> = config.datasets.iter().map(|d| d.path.as_str()).collect();
        return Err(AppError::Input(format!(
            "only one performance dataset is supported, got {}: {}",
            paths.len(),
            paths.join(", ")
        )));
    }
    Ok(())
}

/// Loads the performance dataset; `-v` says how long loading took (docs/PERF.md, Datasets).
fn resolve_dataset(config: &mut Config, verbose: u8) -> Result<(Dataset, bool), AppError> {
    check_dataset_kinds(config)?;
    let verbose = verbose.max(u8::from(config.verbose));
    // The `random` predefined dataset decodes with the run's tokenizer unless it names one.
    let params = &config.model_params;
    let run_tokenizer = params.tokenizer_name.clone().or_else(|| params.name.clone());
    let Some(spec) = config.datasets.first_mut() else {
        return Ok((synthetic_dataset(), true));
    };
    let started = std::time::Instant::now();
    let dataset = load_dataset_spec_with(spec, run_tokenizer.as_deref())?;
    if verbose > 0 {
        let load_s = started.elapsed().as_secs_f64();
        eprintln!("dataset: {} rows loaded in {load_s:.3} s", dataset.rows.len());
    }
    spec.name.get_or_insert_with(|| dataset.name.clone());
    Ok((dataset, false))
}

/// A row's `n` is sent as `n`, so the server answers n choices and its usage sums them: a
/// sample's server OSL would be n outputs' worth, not one.
fn check_rows_n(dataset: &Dataset, source: TokenCountSource) -> Result<(), AppError> {
    if source != TokenCountSource::Server {
        return Ok(());
    }
    match dataset.rows.iter().position(|r| r.n.is_some_and(|n| n > 1)) {
        Some(i) => Err(AppError::Setup(format!(
            "dataset row {i} asks for n = {} completions; server usage counts all of them \
             together, so rows with n > 1 cannot be measured under --token-count-source \
             server",
            dataset.rows[i].n.unwrap_or_default()
        ))),
        None => Ok(()),
    }
}

/// The client tokenizer (`--tokenizer`, else the model name if found locally), with the
/// `--chat-template` file in place of its folder's template; `-v` says where both came from.
fn resolve_tokenizer(
    config: &Config,
    model: &str,
    verbose: u8,
) -> Result<Option<Tokenizer>, AppError> {
    let mut tokenizer = load_tokenizer(config, model)?;
    if let (Some(tok), Some(file)) = (tokenizer.as_mut(), &config.chat_template) {
        tok.override_chat_template(std::path::Path::new(file))?;
    }
    if let (Some(tok), true) = (&tokenizer, verbose > 0) {
        let template = match tok.chat_template_source() {
            Some(file) => format!("chat template from {}", file.display()),
            None => "without a chat template".to_string(),
        };
        eprintln!("tokenizer: {} ({template})", tok.source().display());
    }
    Ok(tokenizer)
}

fn load_tokenizer(config: &Config, model: &str) -> Result<Option<Tokenizer>, AppError> {
    if let Some(spec) = &config.model_params.tokenizer_name {
        return Tokenizer::load(spec).map(Some);
    }
    let embedded = config.endpoint_config.endpoints.is_empty();
    match Tokenizer::load(model) {
        Ok(tok) => Ok(Some(tok)),
        // Without a tokenizer the template would count nothing: refused, never ignored.
        Err(_) if config.chat_template.is_some() => Err(AppError::Setup(format!(
            "--chat-template {} counts the client ISL, but no tokenizer for model {model:?} \
             was found locally; give --tokenizer PATH as well, or drop --chat-template",
            config.chat_template.as_deref().unwrap_or_default()
        ))),
        // The embedded stub's default run says so after naming the stub (src/run.rs).
        Err(_) if embedded => Ok(None),
        Err(_) => {
            eprintln!(
                "warning: no tokenizer for model {model:?} found locally; continuing without \
                 tokenizer (ISL/OSL/TPOT metrics will be unavailable); give --tokenizer PATH"
            );
            Ok(None)
        }
    }
}

/// The note for text prompts sent to a chat endpoint: the server renders each through its
/// chat template, while the client ISL counts the prompt text alone (anchor §6), so the
/// two differ by the template's tokens. Says by how much when the tokenizer has a template
/// (rendered on one empty user message). `None` where nothing is left out: no text rows,
/// not the chat route, no client tokenizer, or a local stub that applies no template.
fn chat_template_note(
    api_type: ApiType,
    endpoints: &[EndpointUrl],
    dataset: &Dataset,
    tokenizer: Option<&Tokenizer>,
) -> Option<String> {
    let tok = tokenizer?;
    let remote = endpoints.iter().any(|e| !e.is_null());
    if api_type != ApiType::OpenAi || !remote {
        return None;
    }
    let text_rows: Vec<&crate::dataset::Row> = dataset
        .rows
        .iter()
        .filter(|r| r.token_ids.is_none() && r.prompt.is_some())
        .filter(|r| r.messages.as_ref().is_none_or(|m| m.as_array().is_some_and(Vec::is_empty)))
        .collect();
    if text_rows.is_empty() {
        return None;
    }
    let head = "note: text prompts go to the chat endpoint (/v1/chat/completions), where the \
                server wraps each in its chat template; the client ISL counts the prompt text \
                alone";
    let size = match (tok.chat_template_source(), tok.chat_template_overhead_tokens()) {
        (Some(file), Some(n)) => format!(
            ", so it leaves out about {n} tokens per request (the chat template of {} \
             rendered around an empty user message)",
            file.display()
        ),
        (Some(file), None) => format!(
            " and leaves that template out (the chat template of {} does not render an \
             empty user message, so by how much is unknown)",
            file.display()
        ),
        (None, _) => " and leaves that template out (the tokenizer has no chat template to \
                      say by how much; --chat-template FILE gives one)"
            .to_string(),
    };
    let system_rows = text_rows.iter().filter(|r| r.system.is_some()).count();
    let system = match system_rows {
        0 => String::new(),
        1 => "; the system prompt of 1 row is left out too".to_string(),
        n => format!("; the system prompts of {n} rows are left out too"),
    };
    Some(format!("{head}{size}{system}"))
}

fn check_durations(runtime: &Runtime) -> Result<Option<u64>, AppError> {
    let (min, max) = (runtime.min_duration_ms, runtime.max_duration_ms);
    if max == 0 {
        return Ok(None);
    }
    if runtime.n_samples_to_issue.is_none() && max < min {
        return Err(AppError::Setup(format!(
            "--runtime.max-duration-ms {max} is below the minimum duration {min} ms \
             (--duration); raise it, lower --duration, or give --num-samples"
        )));
    }
    Ok(Some(max))
}

/// The most connections a Poisson run opens by default (`--max-connections` overrides).
pub const POISSON_CONNECTIONS_DEFAULT_MAX: usize = 16_384;

fn resolve_workers(config: &Config, pattern: LoadPattern) -> Result<(usize, usize), AppError> {
    let client = &config.settings.client;
    let embedded = config.endpoint_config.endpoints.is_empty();
    let workers = match client.num_workers {
        -1 => default_worker_count(cores_available().len(), embedded),
        n if n > 0 => check_worker_count(n as u64, cores_available().len())?,
        n => {
            return Err(AppError::Input(format!(
                "--workers {n} is not valid; give a positive count or -1 for auto"
            )))
        }
    };
    // Enough connections that the pattern, not the pool, bounds what is in flight: a closed
    // loop needs one per slot; an open loop at Q QPS about Q for each second of latency (one
    // second assumed, capped so the pool opens quickly).
    let concurrency = match pattern {
        LoadPattern::Concurrency { n } => n as usize,
        LoadPattern::Poisson { target_qps } => {
            (target_qps.ceil() as usize).min(POISSON_CONNECTIONS_DEFAULT_MAX)
        }
        LoadPattern::Offline => 0,
    };
    let max_connections = match client.max_connections {
        -1 => (workers * CONNECTIONS_PER_WORKER_DEFAULT).max(concurrency),
        n if n > 0 => n as usize,
        n => {
            return Err(AppError::Input(format!(
                "--max-connections {n} is not valid; give a positive count or -1 for auto"
            )))
        }
    };
    Ok((workers.min(max_connections), max_connections))
}

/// `--source-addresses` as given → the addresses connections bind to: each an IP address
/// (IPv6 with or without brackets), not unspecified, multicast or broadcast, none twice, all
/// of one family and of the family of every endpoint given by address (the embedded stub
/// listens on 127.0.0.1). Whether each is an address of this host is checked at run time.
pub fn resolve_source_addresses(
    given: &[String],
    endpoints: &[EndpointUrl],
) -> Result<Vec<std::net::IpAddr>, AppError> {
    use std::net::IpAddr;
    let mut out: Vec<IpAddr> = Vec::with_capacity(given.len());
    for text in given.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
        let bare = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
        let addr: IpAddr = bare.parse().map_err(|_| {
            AppError::Input(format!(
                "--source-addresses {text:?} is not an IP address; give local addresses such \
                 as 127.0.0.2 or 10.0.0.5, comma-separated"
            ))
        })?;
        let unusable = addr.is_unspecified()
            || addr.is_multicast()
            || addr == IpAddr::from(std::net::Ipv4Addr::BROADCAST);
        if unusable {
            return Err(AppError::Input(format!(
                "--source-addresses {text} cannot be a connection's source address; give \
                 addresses of this host's interfaces (ip addr shows them)"
            )));
        }
        if out.contains(&addr) {
            return Err(AppError::Input(format!(
                "--source-addresses lists {addr} twice; give each address once"
            )));
        }
        out.push(addr);
    }
    let Some(first) = out.first() else { return Ok(out) };
    let family = |a: &IpAddr| if a.is_ipv4() { "IPv4" } else { "IPv6" };
    if let Some(other) = out.iter().find(|a| a.is_ipv4() != first.is_ipv4()) {
        return Err(AppError::Input(format!(
            "--source-addresses mixes {} {first} and {} {other}; give addresses of the \
             endpoint's family only",
            family(first),
            family(other)
        )));
    }
    let embedded = [("the embedded stub at 127.0.0.1".to_string(), true)];
    let literal: Vec<(String, bool)> = endpoints
        .iter()
        .filter_map(|e| literal_host(&e.url).map(|ip| (e.url.clone(), ip.is_ipv4())))
        .collect();
    let targets = if endpoints.is_empty() { &embedded[..] } else { &literal[..] };
    if let Some((url, _)) = targets.iter().find(|(_, v4)| *v4 != first.is_ipv4()) {
        return Err(AppError::Input(format!(
            "--source-addresses {first} is {} but {url} is not; give addresses of the \
             endpoint's family",
            family(first)
        )));
    }
    Ok(out)
}

/// The host of an `http://host[:port][/…]` URL when it is an IP address literal.
fn literal_host(url: &str) -> Option<std::net::IpAddr> {
    let rest = url.strip_prefix("http://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next()?.parse().ok();
    }
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    host.parse().ok()
}

/// The per-request timeout in ns (0 = none): positive and finite seconds, as `--timeout`
/// and YAML `timeout:` give it (the reference's key, which it accepts but does not use).
pub fn resolve_request_timeout(seconds: Option<f64>) -> Result<u64, AppError> {
    let Some(s) = seconds else { return Ok(0) };
    if !(s.is_finite() && s > 0.0) {
        return Err(AppError::Input(format!(
            "--timeout {s} is not valid (YAML timeout:); give a positive number of seconds per \
             request, or leave it out for none"
        )));
    }
    // At least 1 ns so that a tiny timeout is not read as none; u64 ns covers 584 years.
    Ok(((s * 1e9).round() as u64).max(1))
}

/// Zero samples would mean nothing to measure: the reference refuses them (`gt=0`) rather
/// than falling back to the whole dataset, and so does this.
fn check_sample_counts(config: &Config) -> Result<(), AppError> {
    if config.settings.runtime.n_samples_to_issue == Some(0) {
        return Err(AppError::Input(
            "--num-samples 0 (settings.runtime.n_samples_to_issue) is not valid; give a \
             positive count, or leave it out to size the run from --duration"
                .into(),
        ));
    }
    if let Some(d) = config.datasets.iter().find(|d| d.samples == Some(0)) {
        return Err(AppError::Input(format!(
            "dataset {}: samples 0 (datasets[].samples, --dataset …,samples=N) is not valid; \
             give a positive count, or leave it out to use every row",
            d.path
        )));
    }
    Ok(())
}

/// Workers allowed per core this process may run on (sched_getaffinity).
pub const WORKERS_PER_CORE_MAX: usize = 2;

/// Refuses a worker count far past the cores: each worker is a pinned process with its own
/// io_uring, rings and connection pool, so workers beyond the cores only add memory and
/// context switches (1,000 on 2 cores reached 3.8 GB and timed out connecting).
pub fn check_worker_count(workers: u64, cores: usize) -> Result<usize, AppError> {
    let limit = (cores.max(1) * WORKERS_PER_CORE_MAX) as u64;
    if workers > limit {
        return Err(AppError::Setup(format!(
            "--workers {workers} is more than {WORKERS_PER_CORE_MAX} per core on the {cores} \
             core(s) this process may run on (at most {limit}): each worker is a pinned process \
             with its own io_uring, rings and connections, so more workers than cores only \
             compete for them; lower --workers, or give -1 for one per core"
        )));
    }
    Ok(workers as usize)
}

fn resolve_warmup_connections(value: i64) -> Result<Option<usize>, AppError> {
    match value {
        -1 => Ok(None),
        n if n >= 0 => Ok(Some(n as usize)),
        n => Err(AppError::Input(format!(
            "--client.warmup-connections {n} is not valid; give a count, 0 for none or -1 for auto"
        ))),
    }
}

fn seconds_to_ms(seconds: f64, what: &str) -> Result<u64, AppError> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(AppError::Input(format!("{what} timeout {seconds} s is not valid")));
    }
    Ok((seconds * 1000.0).round() as u64)
}

/// Parses a `benchmark offline|online …` command line into a config, as main does (tests).
#[cfg(test)]
pub(crate) fn config_from_args(args: &[&str]) -> Result<Config, AppError> {
    use clap::Parser;
    let cli =
        crate::cli::Cli::try_parse_from(["llm-loadgen", "benchmark"].iter().chain(args)).unwrap();
    let crate::cli::Command::Benchmark { mode } = cli.command else { unreachable!() };
    let (kind, flags) = match mode {
        crate::cli::BenchmarkCommand::Offline(f) => (BenchType::Offline, f),
        crate::cli::BenchmarkCommand::Online(f) => (BenchType::Online, f),
        crate::cli::BenchmarkCommand::FromConfig(_) => unreachable!(),
    };
    let mut config = Config::defaults(kind);
    flags.apply(&mut config)?;
    Ok(config)
}

/// Parses a `benchmark offline|online …` command line into a plan, as main does (tests).
#[cfg(test)]
pub(crate) fn plan_from_args(args: &[&str]) -> Result<Plan, AppError> {
    resolve_plan(config_from_args(args)?, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asset(path: &str) -> String {
        format!("{}/tests/assets/{path}", env!("CARGO_MANIFEST_DIR"))
    }

    fn config_of(args: &[&str]) -> Result<Config, AppError> {
        config_from_args(args)
    }

    fn plan_of(args: &[&str]) -> Result<Plan, AppError> {
        resolve_plan(config_of(args)?, 0)
    }

    fn dummy() -> String {
        format!("{},parser.prompt=text_input", asset("datasets/dummy_1k.jsonl"))
    }

    #[test]
    fn sample_count_follows_the_reference_rule() {
        // 600 s default on 1,000 rows: ceil(10 × 600 × 1.1) = 6,600 → 7,000.
        assert_eq!(samples_to_issue(None, 600_000, None, 1_000), 7_000);
        // Poisson 200 QPS × 5 s: 1,100 → 2,000.
        assert_eq!(samples_to_issue(None, 5_000, Some(200.0), 1_000), 2_000);
        assert_eq!(samples_to_issue(Some(123), 600_000, Some(5.0), 1_000), 123);
        assert_eq!(samples_to_issue(None, 0, None, 1_000), 1_000);
        assert_eq!(samples_to_issue(None, 1_000, None, 3), 12);
        let plan = plan_of(&["offline", "--dataset", &dummy()]).unwrap();
        assert_eq!(plan.num_samples, 7_000);
        let plan = plan_of(&["offline", "--dataset", &dummy(), "--duration", "0"]).unwrap();
        assert_eq!(plan.num_samples, 1_000);
    }

    #[test]
    fn defaults_resolve_like_the_reference() {
        let plan = plan_of(&["offline"]).unwrap();
        assert_eq!(plan.load_pattern, LoadPattern::Offline);
        assert!(plan.endpoints.is_empty());
        assert_eq!(plan.model, EMBEDDED_MODEL);
        assert!(plan.dataset_is_synthetic);
        assert_eq!(plan.dataset.rows.len(), 1_000);
        assert!(!plan.streaming, "auto is off for offline");
        assert!(plan.stream_include_usage);
        assert_eq!(plan.max_output_tokens, 1024);
        assert_eq!(plan.drain_timeout_ms, 240_000);
        assert_eq!(plan.token_count_source, TokenCountSource::Client);
        assert_eq!((plan.scheduler_seed, plan.dataloader_seed), (42, 42));
        assert_eq!(plan.workers, default_worker_count(cores_available().len(), true));
        assert_eq!(plan.max_connections, plan.workers * CONNECTIONS_PER_WORKER_DEFAULT);
        assert!(plan.cpu_affinity && plan.early_stopping && !plan.warmup.enabled);
        assert!(plan.report_dir.display().to_string().starts_with("/tmp/reports_"));
        let online =
            plan_of(&["online", "--load-pattern", "poisson", "--target-qps", "50"]).unwrap();
        assert!(online.streaming, "auto is on for online");
        assert_eq!(online.load_pattern, LoadPattern::Poisson { target_qps: 50.0 });
        assert!(online.legacy_loadgen_qps);
    }

    #[test]
    fn flags_and_aliases_reach_the_plan() {
        let plan = plan_of(&[
            "online",
            "--endpoint-config.endpoints",
            "http://127.0.0.1:9/,http://127.0.0.1:10",
            "--endpoints",
            "http://h:11",
            "--model-params.name",
            "m",
            "--load-pattern",
            "concurrency",
            "--target-concurrency",
            "300",
            "--client.num-workers",
            "2",
            "--api-type",
            "openai_completions",
            "--model-params.min-new-tokens",
            "4",
            "--streaming",
            "off",
            "--no-stream-include-usage",
            "--settings.token-count-source",
            "server",
            "--runtime.n-samples-to-issue",
            "99",
            "--runtime.max-duration-ms",
            "12s",
            "--performance-drain-timeout",
            "1.5",
            "--no-cpu-affinity",
            "--warmup",
            "--warmup-requests",
            "5",
            "--warmup-drain",
            "--no-early-stopping",
            "--report-dir",
            "/tmp/x",
            "--runtime.scheduler-random-seed",
            "7",
            "--runtime.dataloader-random-seed",
            "8",
            "--temperature",
            "0.5",
            "--top-p",
            "0.9",
            "--top-k",
            "-1",
            "--seed",
            "3",
            "--max-output-tokens",
            "64",
            "--client.warmup-connections",
            "0",
            "--client.worker-initialization-timeout",
            "5",
            "--mode",
            "perf",
            "--dataset",
            &dummy(),
            "--tokenizer",
            &asset("tokenizers/char"),
        ])
        .unwrap();
        let urls: Vec<&str> = plan.endpoints.iter().map(|e| e.url.as_str()).collect();
        assert_eq!(urls, ["http://127.0.0.1:9", "http://127.0.0.1:10", "http://h:11"]);
        assert_eq!(plan.model, "m");
        assert_eq!(plan.load_pattern, LoadPattern::Concurrency { n: 300 });
        assert_eq!((plan.workers, plan.max_connections), (2, 300));
        assert_eq!(plan.api_type, ApiType::OpenAiCompletions);
        assert_eq!(plan.min_output_tokens, Some(4));
        assert!(!plan.streaming && !plan.stream_include_usage);
        assert_eq!(plan.token_count_source, TokenCountSource::Server);
        assert_eq!((plan.num_samples, plan.max_duration_ms), (99, Some(12_000)));
        assert_eq!(plan.drain_timeout_ms, 1_500);
        assert!(!plan.cpu_affinity && !plan.early_stopping);
        assert_eq!(
            plan.warmup,
            Warmup { enabled: true, requests: Some(5), drain: true, drain_timeout_ms: 240_000 }
        );
        assert_eq!(plan.report_dir, PathBuf::from("/tmp/x"));
        assert_eq!((plan.scheduler_seed, plan.dataloader_seed), (7, 8));
        assert_eq!(
            (plan.temperature, plan.top_p, plan.top_k, plan.seed),
            (Some(0.5), Some(0.9), Some(-1), Some(3))
        );
        assert_eq!(plan.max_output_tokens, 64);
        assert_eq!((plan.warmup_connections, plan.worker_init_timeout_ms), (Some(0), 5_000));
        let summary = plan.summary();
        assert!(
            summary.contains("concurrency 300, 99 samples (max duration 12000 ms"),
            "{summary}"
        );
        assert!(summary.contains("2 workers, 300 connections (warm-up connections 0"), "{summary}");
        assert_eq!(plan.tokenizer.as_ref().unwrap().count("abc").unwrap(), 3);
    }

    #[test]
    fn contradictions_are_rejected_naming_the_values() {
        let cases: &[(&[&str], i32, &str)] = &[
            (&["online", "--load-pattern", "poisson"], 3, "poisson needs --target-qps"),
            (&["online", "--load-pattern", "concurrency"], 3, "concurrency needs --concurrency"),
            (&["online"], 3, "benchmark online needs --load-pattern"),
            (&["offline", "--concurrency", "8"], 3, "--concurrency 8 does not apply"),
            (&["offline", "--load-pattern", "poisson", "--target-qps", "1"], 3, "got poisson"),
            (
                &["online", "--load-pattern", "poisson", "--target-qps", "1", "--concurrency", "4"],
                3,
                "--concurrency 4",
            ),
            (&["online", "--load-pattern", "burst"], 3, "burst is not supported"),
            (
                &["offline", "--runtime.max-duration-ms", "1000", "--duration", "5s"],
                3,
                "1000 is below the minimum duration 5000",
            ),
            (&["offline", "--target-qps", "0"], 2, "above 0, got 0"),
            (&["offline", "--workers", "0"], 2, "--workers 0"),
            (&["offline", "--max-connections", "-2"], 2, "--max-connections -2"),
            (
                &["offline", "--endpoints", "localhost:8000", "--model", "m"],
                2,
                "must start with http://",
            ),
            (
                &["offline", "--endpoints", "https://h:1", "--model", "m"],
                3,
                "TLS is not supported yet",
            ),
            (&["offline", "--endpoints", "http://:1", "--model", "m"], 2, "no valid host"),
            (&["offline", "--endpoints", "http://h:1"], 1, "--model is required"),
            (&["offline", "--min-new-tokens", "5"], 3, "min_new_tokens 5 is only supported"),
            (
                &[
                    "offline",
                    "--streaming",
                    "on",
                    "--no-stream-include-usage",
                    "--token-count-source",
                    "server",
                ],
                3,
                "the endpoint would send no usage",
            ),
            (&["offline", "--tokenizer", "/nonexistent/tok"], 3, "/nonexistent/tok/tokenizer.json"),
            (
                &["offline", "--dataset", "/nonexistent.jsonl"],
                2,
                "dataset file not found: /nonexistent.jsonl",
            ),
            (
                &["offline", "--dataset", "a.jsonl", "--dataset", "b.jsonl"],
                2,
                "only one performance dataset",
            ),
            (&["offline", "--dataset", "acc:a.jsonl"], 2, "datasets[0].type accuracy (dataset a)"),
            (&["offline", "--mode", "acc"], 2, "accuracy mode"),
            (&["offline", "--accuracy-only"], 2, "accuracy mode"),
            (&["offline", "--client.warmup-connections", "-3"], 2, "warmup-connections -3"),
        ];
        for (args, code, needle) in cases {
            let err = plan_of(args).unwrap_err();
            assert_eq!(err.exit_code(), *code, "{args:?}: {err}");
            assert!(err.to_string().contains(needle), "{args:?}: {err}");
        }
    }

    /// The reference's roofline suite command lines (anchor §8.1) resolve as it expects.
    #[test]
    fn reference_perf_suite_command_lines_resolve() {
        let common =
            ["--endpoints", "http://127.0.0.1:9", "--streaming", "on", "--model", "max-tp"];
        let with = |args: &[&str]| {
            let all: Vec<&str> = args.iter().chain(common.iter()).copied().collect();
            plan_of(&all).unwrap()
        };
        let burst =
            with(&["offline", "--load-pattern", "max_throughput", "--num-samples", "2000000"]);
        assert_eq!((burst.load_pattern, burst.num_samples), (LoadPattern::Offline, 2_000_000));
        let conc = with(&[
            "online",
            "--load-pattern",
            "concurrency",
            "--concurrency",
            "16000",
            "--duration",
            "10s",
            "--runtime.max-duration-ms",
            "12000",
            "--num-samples",
            "10000000",
        ]);
        assert_eq!(conc.load_pattern, LoadPattern::Concurrency { n: 16_000 });
        assert_eq!((conc.num_samples, conc.max_duration_ms), (10_000_000, Some(12_000)));
        assert!(conc.max_connections >= 16_000);
        let low = with(&[
            "online",
            "--load-pattern",
            "poisson",
            "--target-qps",
            "5",
            "--duration",
            "20s",
            "--num-samples",
            "200",
            "--workers",
            "4",
            "--client.warmup-connections",
            "0",
        ]);
        assert_eq!(low.load_pattern, LoadPattern::Poisson { target_qps: 5.0 });
        assert_eq!((low.num_samples, low.workers, low.warmup_connections), (200, 4, Some(0)));
        assert!(low.tokenizer.is_none(), "max-tp resolves to no tokenizer");
    }

    #[test]
    fn opt_out_is_fine_unless_streaming_openai_under_server() {
        for args in [
            &[
                "offline",
                "--streaming",
                "off",
                "--no-stream-include-usage",
                "--token-count-source",
                "server",
            ][..],
            &["offline", "--streaming", "on", "--no-stream-include-usage"][..],
            &[
                "offline",
                "--streaming",
                "on",
                "--no-stream-include-usage",
                "--token-count-source",
                "server",
                "--api-type",
                "sglang",
            ][..],
        ] {
            plan_of(args).unwrap();
        }
        let plan =
            plan_of(&["offline", "--api-type", "videogen", "--token-count-source", "server"])
                .unwrap();
        assert_eq!(plan.token_count_source, TokenCountSource::Client);
    }

    #[test]
    fn rows_with_n_above_one_are_rejected_only_under_server() {
        let dir = std::env::temp_dir().join(format!("llm-loadgen-plan-n-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("n.jsonl");
        std::fs::write(&path, "{\"prompt\": \"a\", \"n\": 1}\n{\"prompt\": \"b\", \"n\": 3}\n")
            .unwrap();
        let p = path.display().to_string();
        let client = plan_of(&["offline", "--dataset", &p]);
        let server = plan_of(&["offline", "--dataset", &p, "--token-count-source", "server"]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(client.unwrap().dataset.rows[1].n, Some(3));
        let err = server.unwrap_err();
        assert_eq!(err.exit_code(), 3);
        assert!(err.to_string().contains("row 1 asks for n = 3"), "{err}");
    }

    #[test]
    fn config_yaml_is_the_resolved_config_with_secrets_redacted() {
        let plan = plan_of(&[
            "offline",
            "--endpoints",
            "http://user:pw@127.0.0.1:9",
            "--model",
            "test-model",
            "--api-key",
            "sk-secret",
            "--dataset",
            &dummy(),
            "--streaming",
            "on",
            "--num-samples",
            "200",
            "--report-dir",
            "/tmp/obs",
            "--workers",
            "1",
        ])
        .unwrap();
        let yaml = &plan.config_yaml;
        assert!(!yaml.contains("sk-secret") && !yaml.contains(":pw@"), "{yaml}");
        assert_eq!(plan.endpoints[0].url, "http://127.0.0.1:9", "credentials are not sent");
        assert!(yaml.contains("api_key: <redacted>"), "{yaml}");
        assert!(yaml.contains("http://<redacted>@127.0.0.1:9"), "{yaml}");
        for line in [
            "name: offline_benchmark",
            "type: offline",
            "  name: test-model",
            "  streaming: 'on'",
            "- name: dummy_1k",
            "    prompt: text_input",
            "    n_samples_to_issue: 200",
            "    type: max_throughput",
            "    num_workers: 1",
            "report_dir: /tmp/obs",
            "  token_count_source: client",
            "    stream_include_usage: true",
        ] {
            assert!(yaml.lines().any(|l| l == line), "missing {line:?} in:\n{yaml}");
        }
        // The file reads back through the schema to the same plan inputs.
        let back = Config::from_yaml_str(yaml, "config.yaml").unwrap();
        assert_eq!(back.settings.runtime.n_samples_to_issue, Some(200));
        assert_eq!(back.model_params.streaming, Streaming::On);
    }

    /// Every key path of a YAML mapping, depth first, as `a.b.c` (sequence items as `a[]`).
    fn key_paths(value: &serde_yaml_ng::Value, prefix: &str, out: &mut Vec<String>) {
        match value {
            serde_yaml_ng::Value::Mapping(map) => {
                for (k, v) in map {
                    let path = format!("{prefix}{}", k.as_str().unwrap());
                    out.push(path.clone());
                    key_paths(v, &format!("{path}."), out);
                }
            }
            serde_yaml_ng::Value::Sequence(items) => {
                for item in items.iter().take(1) {
                    key_paths(item, &format!("{}[].", prefix.trim_end_matches('.')), out);
                }
            }
            _ => {}
        }
    }

    /// config.yaml keeps the reference's keys in the reference's order (anchor §2 and its
    /// observed config.yaml), plus the two keys the token-basis change adds.
    #[test]
    fn config_yaml_keys_follow_the_reference_schema() {
        let plan = plan_of(&[
            "offline",
            "--dataset",
            &dummy(),
            "--model",
            "test-model",
            "--endpoints",
            "http://127.0.0.1:9",
            "--tokenizer",
            &asset("tokenizers/char"),
        ])
        .unwrap();
        let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&plan.config_yaml).unwrap();
        let mut paths = Vec::new();
        key_paths(&value, "", &mut paths);
        let client = "num_workers log_level warmup_connections auto_warmup_budget_fraction \
                      max_concurrent_warmup_connects max_connections transport";
        let transport = "type recv_buffer_size send_buffer_size io_threads worker_io_threads \
                         high_water_mark linger immediate";
        let client_tail = "stream_all_chunks worker_initialization_timeout \
                           worker_graceful_shutdown_wait worker_force_kill_timeout insecure \
                           max_idle_time min_required_connections worker_gc_mode \
                           stream_include_usage";
        let mut want: Vec<String> = Vec::new();
        let mut add = |prefix: &str, keys: &str| {
            want.extend(keys.split_whitespace().map(|k| format!("{prefix}{k}")));
        };
        add("", "name version type model_params");
        add(
            "model_params.",
            "name max_new_tokens min_new_tokens skip_special_tokens streaming \
             tokenizer_name",
        );
        add("", "datasets");
        add("datasets[].", "name type path parser");
        add("datasets[].parser.", "prompt");
        add("", "settings settings.runtime");
        add(
            "settings.runtime.",
            "min_duration_ms max_duration_ms scheduler_random_seed \
             dataloader_random_seed",
        );
        add("settings.", "load_pattern");
        add("settings.load_pattern.", "type");
        add("settings.", "client");
        add("settings.client.", client);
        add("settings.client.transport.", transport);
        add("settings.client.", client_tail);
        add("settings.", "drain");
        add(
            "settings.drain.",
            "warmup_timeout_s performance_timeout_s metrics_drain_timeout_s \
             metrics_tokenizer_workers",
        );
        add("settings.", "warmup");
        add("settings.warmup.", "enabled salt drain warmup_random_seed");
        add("settings.", "profiling early_stopping settings.early_stopping.enabled");
        add("settings.", "service_ready_timeout_s token_count_source");
        add("", "endpoint_config");
        add("endpoint_config.", "endpoints api_type");
        add("", "report_dir verbose enable_cpu_affinity");
        let want: Vec<String> =
            want.into_iter().map(|p| p.replace("settings.settings.", "settings.")).collect();
        assert_eq!(paths, want);
    }

    #[test]
    fn the_timeout_flag_and_yaml_key_resolve_into_the_plan() {
        assert_eq!(plan_of(&["offline"]).unwrap().request_timeout_ns, 0, "none by default");
        let plan = plan_of(&["offline", "--timeout", "2.5"]).unwrap();
        assert_eq!(plan.request_timeout_ns, 2_500_000_000);
        let config = Config::from_yaml_str("type: offline\ntimeout: 0.25\n", "t.yaml").unwrap();
        assert_eq!(resolve_plan(config, 0).unwrap().request_timeout_ns, 250_000_000);
        let config = Config::from_yaml_str("type: offline\ntimeout: null\n", "t.yaml").unwrap();
        assert_eq!(resolve_plan(config, 0).unwrap().request_timeout_ns, 0);
        for bad in ["0", "-1", "NaN", "inf"] {
            let err = plan_of(&["offline", &format!("--timeout={bad}")]).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}: {err}");
            assert!(err.to_string().contains("--timeout"), "{bad}: {err}");
        }
        let config = Config::from_yaml_str("type: offline\ntimeout: 0\n", "t.yaml").unwrap();
        let err = check_config(&config).unwrap_err();
        assert!(err.to_string().contains("--timeout 0 is not valid"), "{err}");
    }

    /// `--metrics-tokenizer-workers` and `--metrics-drain-timeout` (and their YAML keys) reach
    /// the plan; config.yaml records the live thread count the CPU plan chose, so a rerun
    /// from it counts the same way; bad values are refused, naming the setting.
    #[test]
    fn tokenizer_workers_and_drain_timeout_reach_the_plan() {
        let tok = asset("tokenizers/bpe2k");
        let plan = plan_of(&["offline", "--tokenizer", &tok]).unwrap();
        assert_eq!(plan.token_pool.workers, None, "not given");
        assert_eq!(plan.token_pool.drain_timeout_ms, 0, "the reference's default: no limit");
        let recorded = format!("metrics_tokenizer_workers: {}", plan.token_pool.live_threads);
        assert!(plan.config_yaml.contains(&recorded), "{}", plan.config_yaml);
        let args =
            ["offline", "--metrics-tokenizer-workers", "3", "--metrics-drain-timeout", "2.5"];
        let plan = plan_of(&args).unwrap();
        assert_eq!(plan.token_pool.workers, Some(3));
        assert_eq!(plan.token_pool.live_threads, 3, "an explicit count is honoured");
        assert_eq!(plan.token_pool.drain_timeout_ms, 2_500);
        assert!(plan.config_yaml.contains("metrics_tokenizer_workers: 3"), "{}", plan.config_yaml);
        let yaml = "type: offline\nsettings:\n  drain:\n    metrics_tokenizer_workers: 0\n    \
                    metrics_drain_timeout_s: 7\n";
        let plan = resolve_plan(Config::from_yaml_str(yaml, "t.yaml").unwrap(), 0).unwrap();
        assert_eq!((plan.token_pool.workers, plan.token_pool.live_threads), (Some(0), 0));
        assert_eq!(plan.token_pool.drain_timeout_ms, 7_000);
        for (flag, value, named) in [
            ("--metrics-tokenizer-workers", "-1", "--metrics-tokenizer-workers -1"),
            ("--metrics-tokenizer-workers", "100000", "metrics_tokenizer_workers"),
            ("--metrics-drain-timeout", "-3", "--metrics-drain-timeout -3"),
        ] {
            let err = plan_of(&["offline", flag, value]).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{err}");
            assert!(err.to_string().contains(named), "{err}");
        }
        let yaml = "type: offline\nsettings:\n  drain:\n    metrics_tokenizer_workers: -2\n";
        let err = check_config(&Config::from_yaml_str(yaml, "t.yaml").unwrap()).unwrap_err();
        assert!(err.to_string().contains("settings.drain.metrics_tokenizer_workers"), "{err}");
    }

    #[test]
    fn zero_samples_is_refused() {
        let err =
            plan_of(&["offline", "--dataset", &format!("{},samples=0", dummy())]).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        assert!(err.to_string().contains("samples 0"), "{err}");
        let err = plan_of(&["offline", "--num-samples", "0"]).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        assert!(err.to_string().contains("--num-samples 0"), "{err}");
        let yaml = format!(
            "type: offline\ndatasets:\n  - path: {}\n    samples: 0\n    parser: {{prompt: text_input}}\n",
            asset("datasets/dummy_1k.jsonl")
        );
        let config = Config::from_yaml_str(&yaml, "t.yaml").unwrap();
        let err = check_config(&config).unwrap_err();
        assert!(err.to_string().contains("samples 0 (datasets[].samples"), "{err}");
        let ds = format!("{},samples=3", dummy());
        assert_eq!(plan_of(&["offline", "--dataset", &ds]).unwrap().dataset.rows.len(), 3);
    }

    #[test]
    fn far_too_many_workers_are_refused() {
        let cores = cores_available().len();
        let limit = cores * WORKERS_PER_CORE_MAX;
        let too_many = (limit + 1).to_string();
        let err = plan_of(&["offline", "--workers", &too_many]).unwrap_err();
        assert_eq!(err.exit_code(), 3, "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("--workers {too_many} is more than")), "{msg}");
        assert!(msg.contains("its own io_uring"), "{msg}");
        assert_eq!(check_worker_count(limit as u64, cores).unwrap(), limit);
        assert!(check_worker_count(1000, 2).unwrap_err().to_string().contains("at most 4"));
    }

    #[test]
    fn warm_connections_follow_the_pattern_and_split_like_the_pool() {
        let poisson = LoadPattern::Poisson { target_qps: 20_000.0 };
        let conc = LoadPattern::Concurrency { n: 3000 };
        // (pattern, flag, workers, worker, share) -> warm connections of that worker
        let cases = [
            (LoadPattern::Offline, None, 2, 0, 500, 500),
            (conc, None, 2, 1, 1500, 1500),
            (poisson, None, 1, 0, 16_384, POISSON_WARM_CONNECTIONS_PER_WORKER_MAX),
            (poisson, None, 4, 3, 100, 100),
            (poisson, Some(0), 4, 0, 4096, 0),
            (poisson, Some(10), 4, 0, 4096, 3),
            (poisson, Some(10), 4, 2, 4096, 2),
            (LoadPattern::Offline, Some(10_000), 2, 1, 64, 64),
            (conc, Some(7), 1, 0, 3000, 7),
        ];
        for (pattern, flag, workers, worker, share, want) in cases {
            let got = warm_connections(pattern, flag, workers, worker, share);
            assert_eq!(
                got, want,
                "{pattern:?} {flag:?} worker {worker} of {workers}, share {share}"
            );
        }
        let parts: Vec<usize> = (0..4).map(|i| split_share(10, 4, i)).collect();
        assert_eq!(parts, [3, 3, 2, 2]);
        assert_eq!(split_share(5, 0, 0), 5, "no workers counts as one");
    }

    #[test]
    fn source_addresses_resolve_into_the_plan_in_order() {
        let plan = plan_of(&["offline", "--source-addresses", "127.0.0.2, 127.0.0.3"]).unwrap();
        let want: Vec<std::net::IpAddr> =
            ["127.0.0.2", "127.0.0.3"].iter().map(|a| a.parse().unwrap()).collect();
        assert_eq!(plan.source_addresses, want);
        let repeated = plan_of(&[
            "offline",
            "--source-addresses",
            "127.0.0.2",
            "--source-addresses",
            "127.0.0.3",
        ])
        .unwrap();
        assert_eq!(repeated.source_addresses, want, "repeated flags add up");
        assert!(plan_of(&["offline"]).unwrap().source_addresses.is_empty(), "none: the kernel's");
        let v6 = ["--endpoints", "http://[::1]:8000", "--model", "m"];
        let plan = plan_of(&[&["offline", "--source-addresses", "[::1]"][..], &v6].concat());
        assert_eq!(plan.unwrap().source_addresses, ["::1".parse::<std::net::IpAddr>().unwrap()]);
        let by_name = ["--endpoints", "http://localhost:8000", "--model", "m"];
        let plan = plan_of(&[&["offline", "--source-addresses", "::1"][..], &by_name].concat());
        assert!(plan.is_ok(), "a host name's family is checked once it is resolved");
    }

    #[test]
    fn bad_source_addresses_are_refused_naming_them() {
        let cases: &[(&[&str], &str)] = &[
            (&["--source-addresses", "127.0.0.300"], "\"127.0.0.300\" is not an IP address"),
            (&["--source-addresses", "lo"], "\"lo\" is not an IP address"),
            (&["--source-addresses", "0.0.0.0"], "0.0.0.0 cannot be a connection's source"),
            (&["--source-addresses", "224.0.0.1"], "224.0.0.1 cannot be"),
            (&["--source-addresses", "127.0.0.2,127.0.0.2"], "lists 127.0.0.2 twice"),
            (&["--source-addresses", "127.0.0.2,::1"], "mixes IPv4 127.0.0.2 and IPv6 ::1"),
            (&["--source-addresses", "::1"], "::1 is IPv6 but the embedded stub"),
            (
                &["--source-addresses", "::1", "--endpoints", "http://127.0.0.1:9", "--model", "m"],
                "::1 is IPv6 but http://127.0.0.1:9 is not",
            ),
        ];
        for (args, want) in cases {
            let err = plan_of(&[&["offline"][..], args].concat()).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
            assert!(err.to_string().contains(want), "{args:?}: {err}");
        }
    }

    fn endpoint(url: &str) -> Vec<EndpointUrl> {
        vec![EndpointUrl { url: url.to_string() }]
    }

    fn rows(rows: Vec<crate::dataset::Row>) -> Dataset {
        Dataset { name: "d".into(), rows }
    }

    fn text_row(prompt: &str, system: Option<&str>) -> crate::dataset::Row {
        crate::dataset::Row {
            prompt: Some(prompt.into()),
            system: system.map(str::to_string),
            ..Default::default()
        }
    }

    /// Text prompts sent to the chat route: the note says the ISL leaves the server's
    /// template out and by how many tokens (the template around an empty user message).
    #[test]
    fn chat_template_note_gives_the_template_tokens_for_text_prompts_on_chat() {
        let tok = Tokenizer::load(&asset("tokenizers/char_jinja")).unwrap();
        let data = rows(vec![text_row("abc", None), text_row("de", Some("sys"))]);
        let url = endpoint("http://127.0.0.1:8000");
        let note = chat_template_note(ApiType::OpenAi, &url, &data, Some(&tok)).unwrap();
        // <s><|user|></s><|assistant|>: two special tokens and 21 characters.
        assert!(note.contains("about 23 tokens per request"), "{note}");
        assert!(note.contains("char_jinja/chat_template.jinja"), "{note}");
        assert!(note.contains("/v1/chat/completions"), "{note}");
        assert!(note.contains("the system prompt of 1 row is left out too"), "{note}");
        let plain = Tokenizer::load(&asset("tokenizers/char")).unwrap();
        let note = chat_template_note(ApiType::OpenAi, &url, &data, Some(&plain)).unwrap();
        assert!(note.contains("leaves that template out"), "{note}");
        assert!(note.contains("--chat-template FILE"), "{note}");
        assert!(!note.contains("tokens per request"), "no number without a template: {note}");
    }

    /// No note where nothing is left out: other routes, messages or token-id rows, no
    /// tokenizer, the embedded stub or the null endpoint.
    #[test]
    fn chat_template_note_is_silent_where_the_isl_leaves_nothing_out() {
        let tok = Tokenizer::load(&asset("tokenizers/char_jinja")).unwrap();
        let text = rows(vec![text_row("abc", None)]);
        let url = endpoint("http://127.0.0.1:8000");
        for api in [ApiType::OpenAiCompletions, ApiType::Sglang] {
            assert_eq!(chat_template_note(api, &url, &text, Some(&tok)), None, "{api:?}");
        }
        assert_eq!(chat_template_note(ApiType::OpenAi, &url, &text, None), None);
        assert_eq!(chat_template_note(ApiType::OpenAi, &[], &text, Some(&tok)), None);
        let null = endpoint(NULL_ENDPOINT);
        assert_eq!(chat_template_note(ApiType::OpenAi, &null, &text, Some(&tok)), None);
        let messages = serde_json::json!([{"role": "user", "content": "hi"}]);
        let structured = rows(vec![
            crate::dataset::Row { messages: Some(messages), ..Default::default() },
            crate::dataset::Row { token_ids: Some(vec![1, 2]), ..text_row("ab", None) },
        ]);
        assert_eq!(chat_template_note(ApiType::OpenAi, &url, &structured, Some(&tok)), None);
    }

    /// `--chat-template` reaches the plan's tokenizer; without a tokenizer it is refused
    /// (exit 3), never ignored; a bad file is exit 3 naming it.
    #[test]
    fn chat_template_flag_reaches_the_plan_tokenizer() {
        let jinja = asset("tokenizers/char_jinja/chat_template.jinja");
        let tok = asset("tokenizers/char_chat");
        let args = ["offline", "--tokenizer", &tok, "--chat-template", &jinja];
        let plan = plan_of(&args).unwrap();
        let tokenizer = plan.tokenizer.unwrap();
        assert_eq!(tokenizer.chat_template_source(), Some(std::path::Path::new(&jinja)));
        assert_eq!(tokenizer.chat_template_overhead_tokens(), Some(23));
        let err = plan_of(&["offline", "--chat-template", &jinja]).unwrap_err();
        assert_eq!(err.exit_code(), 3);
        assert!(err.to_string().contains("--chat-template") && err.to_string().contains(&jinja));
        let missing = asset("tokenizers/no-such.jinja");
        let err = plan_of(&["offline", "--tokenizer", &tok, "--chat-template", &missing]);
        let err = err.unwrap_err();
        assert_eq!(err.exit_code(), 3);
        assert!(err.to_string().contains(&missing), "{err}");
        // A YAML key of that name is refused, not dropped: the reference has none.
        let yaml = "type: offline\nchat_template: x.jinja\n";
        let err = Config::from_yaml_str(yaml, "test.yaml").unwrap_err();
        assert!(err.to_string().contains("chat_template"), "{err}");
    }
}

#[cfg(test)]
mod request_params_tests {
    use super::*;

    fn plan_of(args: &[&str]) -> Result<Plan, AppError> {
        let dataset = format!(
            "{}/tests/assets/datasets/dummy_1k.jsonl,parser.prompt=text_input",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut all = vec!["offline", "--dataset", &dataset];
        all.extend(args);
        resolve_plan(config_from_args(&all)?, 0)
    }

    fn yaml_plan(model_params: &str) -> Result<Plan, AppError> {
        let dataset =
            format!("{}/tests/assets/datasets/dummy_1k.jsonl", env!("CARGO_MANIFEST_DIR"));
        let text = format!(
            "type: offline\nmodel_params:\n{model_params}datasets:\n  - path: {dataset}\n    \
             parser: {{prompt: text_input}}\n"
        );
        resolve_plan(Config::from_yaml_str(&text, "t.yaml")?, 0)
    }

    #[test]
    fn uniform_osl_draws_are_pythons_randint_on_the_dataloader_seed() {
        // Python: r = random.Random(42); [r.randint(10, 20) for _ in range(8)]
        let plan = plan_of(&[
            "--osl-distribution.type",
            "uniform",
            "--min-output-tokens",
            "10",
            "--osl-distribution.max",
            "20",
        ])
        .unwrap();
        assert_eq!(plan.row_output_tokens.len(), plan.dataset.rows.len());
        assert_eq!(plan.row_output_tokens[..8], [20, 11, 10, 14, 13, 13, 12, 11]);
    }

    #[test]
    fn normal_osl_draws_are_pythons_normalvariate_rounded_and_clamped() {
        // Python: r = random.Random(42);
        // [min(max(round(r.normalvariate(100, 30)), 1), 2048) for _ in range(8)]
        let plan = plan_of(&[
            "--osl-distribution.type",
            "normal",
            "--osl-distribution.mean",
            "100",
            "--osl-distribution.std",
            "30",
        ])
        .unwrap();
        assert_eq!(plan.row_output_tokens[..8], [107, 85, 138, 96, 71, 117, 65, 152]);
    }

    #[test]
    fn a_parser_target_input_tokens_makes_token_id_prompts() {
        let path = format!("{}/tests/assets/configs/token_ids.jsonl", env!("CARGO_MANIFEST_DIR"));
        let text = format!(
            "type: offline\nendpoint_config: {{api_type: openai_completions}}\ndatasets:\n  - \
             path: {path}\n    parser: {{input_tokens: input_tokens}}\n"
        );
        let plan = resolve_plan(Config::from_yaml_str(&text, "t.yaml").unwrap(), 0).unwrap();
        let ids: Vec<_> = plan.dataset.rows.iter().map(|r| r.token_ids.clone()).collect();
        assert_eq!(
            ids,
            [Some(vec![101, 102, 103]), Some(vec![104, 105]), Some(vec![106, 107, 108, 109])]
        );
        // The command-line form takes any target too.
        let spec = crate::dataset::DatasetSpec::parse("x.jsonl,parser.input_tokens=ids").unwrap();
        let other = spec.parser.unwrap().other;
        assert_eq!(other.get("input_tokens").map(String::as_str), Some("ids"));
        let bad = text.replace("{input_tokens: input_tokens}", "{label_text: label}");
        let err = resolve_plan(Config::from_yaml_str(&bad, "t.yaml").unwrap(), 0).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("datasets[0].parser.label_text"), "{err}");
    }

    #[test]
    fn a_generation_config_override_is_merged_over_model_params() {
        let path = format!("{}/tests/assets/datasets/dummy_1k.jsonl", env!("CARGO_MANIFEST_DIR"));
        let text = format!(
            "type: offline\nmodel_params:\n  max_new_tokens: 64\n  temperature: 0.5\n  \
             osl_distribution: {{type: uniform, min: 2, max: 9}}\ndatasets:\n  - path: {}\n    \
             parser: {{prompt: text_input}}\n    generation_config_override:\n      \
             max_new_tokens: 8\n      osl_distribution: {{max: 5}}\n",
            path
        );
        let plan = resolve_plan(Config::from_yaml_str(&text, "t.yaml").unwrap(), 0).unwrap();
        assert_eq!((plan.max_output_tokens, plan.temperature), (8, Some(0.5)));
        // Deep-merged: the override's max bounds the base's uniform draw from min 2.
        assert!(
            plan.row_output_tokens.iter().all(|n| (2..=5).contains(n)),
            "{:?}",
            plan.row_output_tokens
        );
        assert!(plan.row_output_tokens.contains(&2) && plan.row_output_tokens.contains(&5));
        let bad = text.replace("max_new_tokens: 8", "max_new_tokens: lots");
        let err = resolve_plan(Config::from_yaml_str(&bad, "t.yaml").unwrap(), 0).unwrap_err();
        assert!(err.to_string().contains("datasets[0].generation_config_override"), "{err}");
        assert_eq!(err.exit_code(), 2);
    }

    #[test]
    fn null_drain_timeouts_resolve_to_an_unbounded_drain() {
        let text = "type: offline\nsettings:\n  drain:\n    warmup_timeout_s: null\n    \
                    performance_timeout_s: null\n";
        let plan = resolve_plan(Config::from_yaml_str(text, "t.yaml").unwrap(), 0).unwrap();
        assert_eq!(
            (plan.drain_timeout_ms, plan.warmup.drain_timeout_ms),
            (DRAIN_FOREVER_MS, DRAIN_FOREVER_MS)
        );
        // An instant plus it does not overflow, as the coordinator adds it to now.
        let forever = std::time::Duration::from_millis(DRAIN_FOREVER_MS);
        assert!(std::time::Instant::now().checked_add(forever).is_some());
        let given = resolve_plan(Config::from_yaml_str("type: offline\n", "t.yaml").unwrap(), 0);
        assert_eq!(given.unwrap().drain_timeout_ms, 240_000);
    }

    #[test]
    fn validate_yaml_accepts_what_the_reference_does_and_lists_what_a_run_refuses() {
        let text = "type: submission\nbenchmark_mode: online\nmodel_params: {name: m}\n\
                    settings:\n  load_pattern: {type: poisson, target_qps: 5}\n  warmup: \
                    {salt: true}\ndatasets:\n  - name: gpqa\n    type: accuracy\n";
        let config = Config::from_yaml_str(text, "t.yaml").unwrap();
        check_config(&config).unwrap();
        let notes = run_refusals(&config).join("\n");
        for key in ["type: submission", "datasets[0].type accuracy", "settings.warmup.salt"] {
            assert!(notes.contains(key), "{key}: {notes}");
        }
        assert_eq!(resolve_plan(config, 0).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn validate_yaml_refuses_what_a_run_would_refuse() {
        let bad = [
            "type: offline\nendpoint_config: {api_type: sglang}\nmodel_params:\n  \
             chat_template_kwargs: {a: 1}\n",
            "type: offline\nmodel_params:\n  osl_distribution: {type: normal, mean: 9}\n",
            "type: offline\nmodel_params:\n  extra_body: [1]\n",
        ];
        for text in bad {
            let config = Config::from_yaml_str(text, "t.yaml").unwrap();
            assert_eq!(check_config(&config).unwrap_err().exit_code(), 2, "{text}");
        }
        let good = "type: offline\nmodel_params:\n  osl_distribution:\n    type: normal\n    \
                    mean: 1000\n    std: 200\n    min: 512\n    max: 2048\n";
        check_config(&Config::from_yaml_str(good, "t.yaml").unwrap()).unwrap();
    }

    #[test]
    fn original_osl_keeps_max_new_tokens_for_every_row() {
        let plan = plan_of(&["--osl-distribution.type", "original"]).unwrap();
        assert!(plan.row_output_tokens.is_empty());
    }

    #[test]
    fn osl_bounds_and_min_new_tokens_are_checked() {
        let cases: [&[&str]; 3] = [
            &[
                "--min-output-tokens",
                "30",
                "--osl-distribution.max",
                "20",
                "--osl-distribution.type",
                "uniform",
            ],
            &["--osl-distribution.type", "fixed", "--osl-distribution.mean", "5000"],
            &[
                "--api-type",
                "openai_completions",
                "--min-new-tokens",
                "9",
                "--osl-distribution.type",
                "uniform",
                "--min-output-tokens",
                "4",
            ],
        ];
        for args in cases {
            let err = plan_of(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
            assert!(err.to_string().contains("osl_distribution"), "{args:?}: {err}");
        }
    }

    #[test]
    fn each_request_flag_gives_the_same_plan_as_its_yaml_key() {
        let cases: [(&[&str], &str); 7] = [
            (&["--model-params.repetition-penalty", "1.1"], "  repetition_penalty: 1.1\n"),
            (&["--model-params.presence-penalty", "0.2"], "  presence_penalty: 0.2\n"),
            (&["--model-params.frequency-penalty", "-0.3"], "  frequency_penalty: -0.3\n"),
            (&["--model-params.ignore-eos"], "  ignore_eos: true\n"),
            (&["--extra-body", r#"{"b": 1, "a": [2]}"#], "  extra_body: {b: 1, a: [2]}\n"),
            (
                &[
                    "--model-params.osl-distribution.type",
                    "fixed",
                    "--model-params.osl-distribution.mean",
                    "12",
                ],
                "  osl_distribution: {type: fixed, mean: 12}\n",
            ),
            (
                &[
                    "--model-params.osl-distribution.type",
                    "uniform",
                    "--model-params.osl-distribution.min",
                    "4",
                    "--model-params.osl-distribution.max",
                    "9",
                ],
                "  osl_distribution: {type: uniform, min: 4, max: 9}\n",
            ),
        ];
        for (flags, yaml) in cases {
            let (a, b) = (plan_of(flags).unwrap(), yaml_plan(yaml).unwrap());
            let view =
                |p: &Plan| (p.sampling.clone(), p.extra_body.clone(), p.row_output_tokens.clone());
            assert_eq!(view(&a), view(&b), "{flags:?} vs {yaml}");
            assert_ne!(view(&a), view(&plan_of(&[]).unwrap()), "{flags:?} changes the plan");
        }
    }

    #[test]
    fn skip_special_tokens_false_flag_is_a_completions_only_setting() {
        let plan = plan_of(&["--api-type", "openai_completions", "--no-skip-special-tokens"]);
        assert!(!plan.unwrap().sampling.skip_special_tokens);
        let err = plan_of(&["--model-params.no-skip-special-tokens"]).unwrap_err();
        assert!(err.to_string().contains("skip_special_tokens"), "{err}");
    }

    #[test]
    fn extra_body_keeps_the_users_key_order_and_refuses_reserved_keys() {
        let plan = plan_of(&["--extra-body", r#"{"z": 1, "a": 2}"#]).unwrap();
        let keys: Vec<&str> = plan.extra_body.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["z", "a"]);
        let err = yaml_plan("  extra_body: {messages: []}\n").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("\"messages\""), "{err}");
        let err = yaml_plan("  extra_body: 5\n").unwrap_err();
        assert!(err.to_string().contains("model_params.extra_body 5"), "{err}");
    }
}
