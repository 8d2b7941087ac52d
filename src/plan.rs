//! The validated plan: configuration (YAML + flags) resolved into the one value a run is
//! built from. Contradictions are rejected here, before anything starts.

use std::path::PathBuf;

use crate::dataset::Dataset;
use crate::tokenizer::Tokenizer;

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
    /// The route appended to each endpoint URL.
    pub fn route(self) -> &'static str {
        match self {
            ApiType::OpenAi => "/v1/chat/completions",
            ApiType::OpenAiCompletions => "/v1/completions",
            ApiType::Sglang => "/generate",
            ApiType::VideoGen => "/v1/videos/generations",
        }
    }

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

impl TokenCountSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenCountSource::Client => "client",
            TokenCountSource::Server => "server",
        }
    }
}

/// A validated `http://` endpoint base URL, without a trailing slash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointUrl {
    pub url: String,
}

/// Warm-up phase settings: samples issued before tracking starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Warmup {
    pub enabled: bool,
    /// Warm-up samples; `None` = the whole dataset once.
    pub requests: Option<u64>,
    /// Wait for warm-up samples to finish before the performance phase.
    pub drain: bool,
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
    /// Worker processes (default: available cores − 1, at least 1; at most `max_connections`).
    pub workers: usize,
    /// Connections across all workers (default: 32 per worker, and at least the
    /// concurrency of a concurrency run).
    pub max_connections: usize,
    pub cpu_affinity: bool,
    pub warmup: Warmup,
    pub early_stopping: bool,
    pub report_dir: PathBuf,
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
