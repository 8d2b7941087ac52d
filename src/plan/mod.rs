//! The validated plan: configuration (YAML + flags) resolved into the one value a run is
//! built from. Contradictions are rejected here, before anything starts.

use std::path::PathBuf;

use loadgen_coordinator::cpu::{cores_available, default_worker_count};

use loadgen_coordinator::pyrandom::PyRandom;
use loadgen_worker::request::Sampling;

use crate::commands::sys::local_timestamp;
use crate::dataset::{load_dataset_spec, synthetic_dataset, Dataset, DatasetKind};
use crate::error::AppError;
use crate::tokenizer::Tokenizer;
use crate::yaml::{
    ApiTypeName, BenchType, Config, LoadPatternKind, ModelParams, OslDistribution, OslKind,
    Runtime, Streaming, TokenSource,
};

mod connections;
mod dataset;
mod endpoints;
mod reference;
mod refusals;
mod request;
#[cfg(test)]
mod request_tests;
mod run_length;
#[cfg(test)]
mod tests;
mod tokens;

pub use connections::*;
use dataset::*;
pub use endpoints::*;
pub use reference::*;
pub use refusals::*;
use request::*;
pub use run_length::*;
pub use tokens::*;

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
