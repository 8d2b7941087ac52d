//! Raw command-line arguments (clap derive): syntax only. `BenchFlags::apply` lays the
//! flags over a `yaml::Config`, and `plan::resolve_plan` validates the result.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand, ValueEnum};

use crate::dataset::DatasetSpec;
use crate::error::AppError;
use crate::yaml::{
    ApiTypeName, Config, LoadPatternKind, ModelParams, OslDistribution, OslKind, Streaming,
    TokenSource,
};

/// A load generator for LLM inference endpoints.
#[derive(Debug, Parser)]
#[command(name = "llm-loadgen", version, about, propagate_version = true)]
pub struct Cli {
    /// More output: -v info, -vv debug (the CPU plan, per-phase timings).
    #[arg(short = 'v', long = "verbose", action = ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a benchmark.
    Benchmark {
        #[command(subcommand)]
        mode: BenchmarkCommand,
    },
    /// Write a commented YAML template (offline, online or concurrency) to
    /// <TEMPLATE>_template.yaml.
    Init {
        /// offline | online | concurrency
        template: String,
        /// Where to write it (default: <TEMPLATE>_template.yaml in the current folder).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
    },
    /// Check a YAML file against the schema.
    ValidateYaml {
        /// The YAML file.
        #[arg(short = 'c', long = "config")]
        config: PathBuf,
    },
    /// Version, CPUs and affinity, io_uring availability, memlock and open-file limits.
    Info,
    /// Stub servers (echo, max-throughput, variable) for local testing.
    Stub {
        #[command(subcommand)]
        cmd: Box<loadgen_stubs::cli::StubCommand>,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchmarkCommand {
    /// max_throughput: issue every sample at t=0.
    Offline(Box<BenchFlags>),
    /// Poisson (--load-pattern poisson --target-qps Q) or concurrency
    /// (--load-pattern concurrency --concurrency N).
    Online(Box<BenchFlags>),
    /// Run from a YAML file in the reference's schema; flags given here override it.
    FromConfig(FromConfigArgs),
}

#[derive(Debug, Args)]
pub struct FromConfigArgs {
    /// The YAML file.
    #[arg(short = 'c', long = "config")]
    pub config: PathBuf,
    #[command(flatten)]
    pub flags: Box<BenchFlags>,
}

/// `--streaming` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StreamingArg {
    Auto,
    On,
    Off,
}

/// `--mode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Perf,
    Acc,
    Both,
}

/// Every benchmark flag; each is optional so that only given flags override the YAML or
/// the defaults.
#[derive(Debug, Default, Args)]
pub struct BenchFlags {
    /// Model name sent in requests; also the tokenizer unless --tokenizer is given
    /// [required with --endpoints].
    #[arg(long = "model", visible_alias = "model-params.name", help_heading = "Endpoint")]
    pub model: Option<String>,
    /// Endpoint base URLs, comma-separated or repeated (http:// only); none = the embedded
    /// max-throughput stub.
    #[arg(long = "endpoints", visible_alias = "endpoint-config.endpoints", value_delimiter = ',',
          action = ArgAction::Append, help_heading = "Endpoint")]
    pub endpoints: Vec<String>,
    /// Sent as `Authorization: Bearer <KEY>`; redacted in config.yaml.
    #[arg(long = "api-key", visible_alias = "endpoint-config.api-key", help_heading = "Endpoint")]
    pub api_key: Option<String>,
    /// Request protocol [default: openai].
    #[arg(
        long = "api-type",
        visible_alias = "endpoint-config.api-type",
        help_heading = "Endpoint"
    )]
    pub api_type: Option<ApiTypeName>,

    /// PATH[,parser.prompt=COL,parser.system=COL,name=N,format=F,samples=N] (repeatable;
    /// one performance dataset); none = the built-in synthetic dataset.
    #[arg(long = "dataset", action = ArgAction::Append, help_heading = "Data")]
    pub datasets: Vec<String>,
    /// A tokenizer.json, a folder holding one, or a model id in the local HF cache.
    #[arg(
        long = "tokenizer",
        visible_alias = "model-params.tokenizer-name",
        help_heading = "Data"
    )]
    pub tokenizer: Option<String>,

    /// auto = off for offline, on for online [default: auto].
    #[arg(long = "streaming", visible_alias = "model-params.streaming", help_heading = "Request")]
    pub streaming: Option<StreamingArg>,
    /// Max output tokens per request [default: 1024].
    #[arg(
        long = "max-output-tokens",
        visible_alias = "model-params.max-new-tokens",
        help_heading = "Request"
    )]
    pub max_output_tokens: Option<u32>,
    /// Min output tokens (openai_completions only) [default: 1].
    #[arg(
        long = "min-new-tokens",
        visible_alias = "model-params.min-new-tokens",
        help_heading = "Request"
    )]
    pub min_new_tokens: Option<u32>,
    #[arg(
        long = "temperature",
        visible_alias = "model-params.temperature",
        help_heading = "Request"
    )]
    pub temperature: Option<f64>,
    #[arg(long = "top-p", visible_alias = "model-params.top-p", help_heading = "Request")]
    pub top_p: Option<f64>,
    #[arg(
        long = "top-k",
        visible_alias = "model-params.top-k",
        allow_negative_numbers = true,
        help_heading = "Request"
    )]
    pub top_k: Option<i64>,
    /// Sampling seed sent in requests.
    #[arg(long = "seed", visible_alias = "model-params.seed", help_heading = "Request")]
    pub seed: Option<u64>,
    /// Sent as repetition_penalty (SGLang: inside sampling_params).
    #[arg(
        long = "repetition-penalty",
        value_name = "X",
        visible_alias = "model-params.repetition-penalty",
        allow_negative_numbers = true,
        help_heading = "Request"
    )]
    pub repetition_penalty: Option<f64>,
    /// Sent as presence_penalty (SGLang: inside sampling_params).
    #[arg(
        long = "presence-penalty",
        value_name = "X",
        visible_alias = "model-params.presence-penalty",
        allow_negative_numbers = true,
        help_heading = "Request"
    )]
    pub presence_penalty: Option<f64>,
    /// Sent as frequency_penalty (SGLang: inside sampling_params).
    #[arg(
        long = "frequency-penalty",
        value_name = "X",
        visible_alias = "model-params.frequency-penalty",
        allow_negative_numbers = true,
        help_heading = "Request"
    )]
    pub frequency_penalty: Option<f64>,
    /// [true|false] skip_special_tokens in completions requests (false: openai_completions only).
    #[arg(
        long = "skip-special-tokens",
        visible_alias = "model-params.skip-special-tokens",
        num_args = 0..=1,
        default_missing_value = "true",
        value_name = "BOOL",
        help_heading = "Request"
    )]
    pub skip_special_tokens: Option<bool>,
    /// Send skip_special_tokens: false (openai_completions only).
    #[arg(
        long = "no-skip-special-tokens",
        visible_alias = "model-params.no-skip-special-tokens",
        conflicts_with = "skip_special_tokens",
        help_heading = "Request"
    )]
    pub no_skip_special_tokens: bool,
    /// Per-sample output length: original|fixed|uniform|normal [default: original].
    #[arg(
        long = "osl-distribution.type",
        value_name = "TYPE",
        visible_alias = "model-params.osl-distribution.type",
        help_heading = "Request"
    )]
    pub osl_type: Option<OslKind>,
    /// Output length mean (fixed, normal).
    #[arg(
        long = "osl-distribution.mean",
        value_name = "N",
        visible_alias = "model-params.osl-distribution.mean",
        help_heading = "Request"
    )]
    pub osl_mean: Option<i64>,
    /// Output length standard deviation (normal).
    #[arg(
        long = "osl-distribution.std",
        value_name = "N",
        visible_alias = "model-params.osl-distribution.std",
        help_heading = "Request"
    )]
    pub osl_std: Option<i64>,
    /// Smallest drawn output length [default: 1].
    #[arg(
        long = "min-output-tokens",
        value_name = "N",
        visible_alias = "model-params.osl-distribution.min",
        help_heading = "Request"
    )]
    pub osl_min: Option<i64>,
    /// Largest drawn output length [default: 2048].
    #[arg(
        long = "osl-distribution.max",
        value_name = "N",
        visible_alias = "model-params.osl-distribution.max",
        help_heading = "Request"
    )]
    pub osl_max: Option<i64>,
    /// Send ignore_eos: true (beyond the reference; vLLM and SGLang honour it).
    #[arg(
        long = "ignore-eos",
        visible_alias = "model-params.ignore-eos",
        help_heading = "Request"
    )]
    pub ignore_eos: bool,
    /// A JSON object merged into every request body's top level; its keys replace built ones.
    #[arg(
        long = "extra-body",
        visible_alias = "model-params.extra-body",
        value_name = "JSON",
        help_heading = "Request"
    )]
    pub extra_body: Option<String>,
    /// Ask streaming OpenAI requests for usage (stream_options.include_usage) [default].
    #[arg(
        long = "stream-include-usage",
        visible_alias = "client.stream-include-usage",
        overrides_with = "no_stream_include_usage",
        help_heading = "Request"
    )]
    pub stream_include_usage: bool,
    /// Send the reference's pre-usage request bytes (no stream_options).
    #[arg(
        long = "no-stream-include-usage",
        visible_alias = "client.no-stream-include-usage",
        overrides_with = "stream_include_usage",
        help_heading = "Request"
    )]
    pub no_stream_include_usage: bool,

    /// Exact number of samples; wins over --duration.
    #[arg(
        long = "num-samples",
        visible_alias = "runtime.n-samples-to-issue",
        help_heading = "Run length"
    )]
    pub num_samples: Option<u64>,
    /// Sizes the sample count: 600s, 10m, 600000ms or plain ms [default: 600000].
    #[arg(long = "duration", visible_alias = "runtime.min-duration-ms",
          value_parser = parse_duration_ms, help_heading = "Run length")]
    pub duration_ms: Option<u64>,
    /// Wall-time cap (same units as --duration; 0 = none); in-flight samples are abandoned.
    #[arg(long = "runtime.max-duration-ms", visible_alias = "max-duration",
          value_parser = parse_duration_ms, help_heading = "Run length")]
    pub max_duration_ms: Option<u64>,
    /// Wait for in-flight samples after the last issue, in seconds [default: 240].
    #[arg(
        long = "performance-drain-timeout",
        visible_alias = "drain.performance-timeout-s",
        help_heading = "Run length"
    )]
    pub performance_drain_timeout_s: Option<f64>,
    /// Live client tokenizer threads; 0 = count every output after the last sample
    /// [default: 4 on cores the load leaves spare, 0 where there are none].
    #[arg(
        long = "metrics-tokenizer-workers",
        visible_alias = "drain.metrics-tokenizer-workers",
        allow_negative_numbers = true,
        help_heading = "Report"
    )]
    pub metrics_tokenizer_workers: Option<i64>,
    /// Seconds the end-of-run client token count may take; 0 = unlimited [default: 0].
    #[arg(
        long = "metrics-drain-timeout",
        visible_alias = "drain.metrics-drain-timeout-s",
        allow_negative_numbers = true,
        help_heading = "Report"
    )]
    pub metrics_drain_timeout_s: Option<f64>,
    /// perf only for now (acc and both need accuracy datasets, not supported yet).
    #[arg(long = "mode", help_heading = "Run length")]
    pub mode: Option<ModeArg>,
    /// The reference's alias for --mode acc (not supported yet).
    #[arg(long = "accuracy-only", help_heading = "Run length")]
    pub accuracy_only: bool,
    /// Per-request timeout in seconds, from the request's write to the response's end; past
    /// it the sample fails with kind timeout [default: none].
    #[arg(long = "timeout", help_heading = "Run length")]
    pub timeout: Option<f64>,

    /// max_throughput (offline) | poisson | concurrency.
    #[arg(long = "load-pattern", visible_alias = "load-pattern.type", help_heading = "Load")]
    pub load_pattern: Option<LoadPatternKind>,
    /// Poisson arrival rate; also sizes the sample count of any pattern [sizing default: 10].
    #[arg(long = "target-qps", visible_alias = "load-pattern.target-qps", help_heading = "Load")]
    pub target_qps: Option<f64>,
    /// Requests in flight for --load-pattern concurrency.
    #[arg(long = "concurrency", visible_aliases = ["target-concurrency", "load-pattern.target-concurrency"],
          help_heading = "Load")]
    pub concurrency: Option<u32>,
    /// Report QPS in LoadGen's form (poisson only) [default].
    #[arg(
        long = "use-legacy-loadgen-qps-metrics",
        overrides_with = "no_legacy_qps",
        help_heading = "Load"
    )]
    pub legacy_qps: bool,
    #[arg(
        long = "no-use-legacy-loadgen-qps-metrics",
        overrides_with = "legacy_qps",
        help_heading = "Load"
    )]
    pub no_legacy_qps: bool,
    /// Seed of the poisson arrival times [default: 42].
    #[arg(long = "runtime.scheduler-random-seed", help_heading = "Load")]
    pub scheduler_seed: Option<u64>,
    /// Seed of the sample order [default: 42].
    #[arg(long = "runtime.dataloader-random-seed", help_heading = "Load")]
    pub dataloader_seed: Option<u64>,

    /// Worker processes; -1 = available cores - 1 [default: -1].
    #[arg(long = "workers", visible_aliases = ["num-workers", "client.num-workers"],
          allow_negative_numbers = true, help_heading = "Client")]
    pub workers: Option<i64>,
    /// Connections across all workers; -1 = 32 per worker (at least --concurrency)
    /// [default: -1].
    #[arg(
        long = "max-connections",
        visible_alias = "client.max-connections",
        allow_negative_numbers = true,
        help_heading = "Client"
    )]
    pub max_connections: Option<i64>,
    /// Connections each worker opens before the clock starts; -1 = auto, 0 = none
    /// [default: -1].
    #[arg(
        long = "client.warmup-connections",
        visible_alias = "warmup-connections",
        allow_negative_numbers = true,
        help_heading = "Client"
    )]
    pub warmup_connections: Option<i64>,
    /// Seconds workers may take to start and connect [default: 60].
    #[arg(long = "client.worker-initialization-timeout", help_heading = "Client")]
    pub worker_init_timeout_s: Option<f64>,
    /// Pin workers to cores [default].
    #[arg(
        long = "enable-cpu-affinity",
        overrides_with = "no_cpu_affinity",
        help_heading = "Client"
    )]
    pub cpu_affinity: bool,
    #[arg(long = "no-cpu-affinity", overrides_with = "cpu_affinity", help_heading = "Client")]
    pub no_cpu_affinity: bool,
    /// Local IP addresses the connections leave from, in turn (comma-separated or repeated);
    /// needed past one address's ephemeral ports (~24,000 connections to one endpoint);
    /// loopback endpoints get 127.0.0.2, … themselves [default: the kernel's choice].
    #[arg(long = "source-addresses", value_name = "ADDR[,ADDR...]", value_delimiter = ',',
          action = ArgAction::Append, help_heading = "Client")]
    pub source_addresses: Vec<String>,

    /// Issue warm-up samples before tracking starts.
    #[arg(long = "warmup", visible_alias = "warmup.enabled", help_heading = "Warm-up")]
    pub warmup: bool,
    /// Warm-up samples [default: the dataset once].
    #[arg(long = "warmup-requests", visible_alias = "warmup.n-requests", help_heading = "Warm-up")]
    pub warmup_requests: Option<u64>,
    /// Wait for warm-up samples before the performance phase.
    #[arg(long = "warmup-drain", visible_alias = "warmup.drain", help_heading = "Warm-up")]
    pub warmup_drain: bool,

    /// MLPerf early-stopping estimates [default].
    #[arg(long = "early-stopping", overrides_with = "no_early_stopping", help_heading = "Report")]
    pub early_stopping: bool,
    #[arg(long = "no-early-stopping", overrides_with = "early_stopping", help_heading = "Report")]
    pub no_early_stopping: bool,
    /// Report directory [default: /tmp/reports_YYYYMMDD_HHMMSS].
    #[arg(long = "report-dir", help_heading = "Report")]
    pub report_dir: Option<PathBuf>,
    /// Write no events.jsonl (the per-sample event log); the other report files are complete.
    #[arg(long = "no-events", help_heading = "Report")]
    pub no_events: bool,
    /// Headline token counts: client (tokenizer) or server (endpoint usage) [default: client].
    #[arg(
        long = "token-count-source",
        visible_alias = "settings.token-count-source",
        help_heading = "Report"
    )]
    pub token_count_source: Option<TokenSource>,
}

/// Parses `600s`, `10m`, `1h`, `600000ms` or a plain integer (milliseconds).
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1_000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3_600_000.0)
    } else {
        (t, 1.0)
    };
    let bad = || format!("{text:?} is not a duration (use 600s, 10m, 1h, 600000ms or ms)");
    let value: f64 = number.trim().parse().map_err(|_| bad())?;
    if !(value.is_finite() && value >= 0.0) || number.trim().starts_with(['+', '-']) {
        return Err(bad());
    }
    let ms = value * scale;
    if ms.fract() != 0.0 || ms > u64::MAX as f64 {
        return Err(format!("{text:?} is not a whole number of milliseconds"));
    }
    Ok(ms as u64)
}

fn pick(on: bool, off: bool) -> Option<bool> {
    match (on, off) {
        (_, true) => Some(false),
        (true, false) => Some(true),
        _ => None,
    }
}

impl BenchFlags {
    /// The request-parameter flags beyond the first four sampling keys.
    fn apply_request_params(&self, mp: &mut ModelParams) -> Result<(), AppError> {
        set(&mut mp.repetition_penalty, self.repetition_penalty);
        set(&mut mp.presence_penalty, self.presence_penalty);
        set(&mut mp.frequency_penalty, self.frequency_penalty);
        replace(&mut mp.skip_special_tokens, self.skip_special_tokens);
        if self.no_skip_special_tokens {
            mp.skip_special_tokens = false;
        }
        let osl_given = self.osl_type.is_some()
            || self.osl_mean.is_some()
            || self.osl_std.is_some()
            || self.osl_min.is_some()
            || self.osl_max.is_some();
        if osl_given {
            // A flag overrides one field and keeps the YAML's others, as the reference merges.
            let osl = mp.osl_distribution.get_or_insert_with(OslDistribution::default);
            replace(&mut osl.kind, self.osl_type);
            set(&mut osl.mean, self.osl_mean);
            set(&mut osl.std, self.osl_std);
            replace(&mut osl.min, self.osl_min);
            replace(&mut osl.max, self.osl_max);
        }
        if self.ignore_eos {
            mp.ignore_eos = true;
        }
        if let Some(text) = &self.extra_body {
            let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
                AppError::Input(format!(
                    "--extra-body {text:?} is not valid JSON ({e}); give an object such as \
                     '{{\"logprobs\":2}}'"
                ))
            })?;
            if !value.is_object() {
                return Err(AppError::Input(format!(
                    "--extra-body {text:?} is not a JSON object; give one such as \
                     '{{\"logprobs\":2}}'"
                )));
            }
            // Read again as YAML (JSON is a subset) to keep the user's key order.
            mp.extra_body = Some(serde_yaml_ng::from_str(text).map_err(|e| {
                AppError::Input(format!("--extra-body {text:?} cannot be read: {e}"))
            })?);
        }
        Ok(())
    }

    /// Lays every given flag over `config`.
    pub fn apply(&self, config: &mut Config) -> Result<(), AppError> {
        if self.accuracy_only || matches!(self.mode, Some(ModeArg::Acc | ModeArg::Both)) {
            return Err(AppError::Input(
                "accuracy mode (--mode acc|both, --accuracy-only) is not supported yet; use \
                 --mode perf"
                    .into(),
            ));
        }
        let mp = &mut config.model_params;
        set(&mut mp.name, self.model.clone());
        set(&mut mp.tokenizer_name, self.tokenizer.clone());
        if let Some(s) = self.streaming {
            mp.streaming = match s {
                StreamingArg::Auto => Streaming::Auto,
                StreamingArg::On => Streaming::On,
                StreamingArg::Off => Streaming::Off,
            };
        }
        replace(&mut mp.max_new_tokens, self.max_output_tokens);
        replace(&mut mp.min_new_tokens, self.min_new_tokens);
        set(&mut mp.temperature, self.temperature);
        set(&mut mp.top_p, self.top_p);
        set(&mut mp.top_k, self.top_k);
        set(&mut mp.seed, self.seed);
        self.apply_request_params(mp)?;
        if !self.datasets.is_empty() {
            config.datasets =
                self.datasets.iter().map(|d| DatasetSpec::parse(d)).collect::<Result<_, _>>()?;
        }
        let ep = &mut config.endpoint_config;
        let endpoints: Vec<String> =
            self.endpoints.iter().map(|e| e.trim().to_string()).filter(|e| !e.is_empty()).collect();
        if !endpoints.is_empty() {
            ep.endpoints = endpoints;
        }
        set(&mut ep.api_key, self.api_key.clone());
        replace(&mut ep.api_type, self.api_type);
        let s = &mut config.settings;
        set(&mut s.runtime.n_samples_to_issue, self.num_samples);
        replace(&mut s.runtime.min_duration_ms, self.duration_ms);
        replace(&mut s.runtime.max_duration_ms, self.max_duration_ms);
        replace(&mut s.runtime.scheduler_random_seed, self.scheduler_seed);
        replace(&mut s.runtime.dataloader_random_seed, self.dataloader_seed);
        replace(&mut s.drain.performance_timeout_s, self.performance_drain_timeout_s);
        set(&mut s.drain.metrics_tokenizer_workers, self.metrics_tokenizer_workers);
        replace(&mut s.drain.metrics_drain_timeout_s, self.metrics_drain_timeout_s);
        replace(&mut s.load_pattern.kind, self.load_pattern);
        set(&mut s.load_pattern.target_qps, self.target_qps);
        set(&mut s.load_pattern.target_concurrency, self.concurrency);
        replace(
            &mut s.load_pattern.use_legacy_loadgen_qps_metrics,
            pick(self.legacy_qps, self.no_legacy_qps),
        );
        replace(&mut s.client.num_workers, self.workers);
        replace(&mut s.client.max_connections, self.max_connections);
        replace(&mut s.client.warmup_connections, self.warmup_connections);
        replace(&mut s.client.worker_initialization_timeout, self.worker_init_timeout_s);
        replace(
            &mut s.client.stream_include_usage,
            pick(self.stream_include_usage, self.no_stream_include_usage),
        );
        s.warmup.enabled |= self.warmup;
        set(&mut s.warmup.n_requests, self.warmup_requests);
        s.warmup.drain |= self.warmup_drain;
        replace(&mut s.early_stopping.enabled, pick(self.early_stopping, self.no_early_stopping));
        replace(&mut s.token_count_source, self.token_count_source);
        replace(&mut config.enable_cpu_affinity, pick(self.cpu_affinity, self.no_cpu_affinity));
        set(&mut config.report_dir, self.report_dir.as_ref().map(|p| p.display().to_string()));
        set(&mut config.timeout, self.timeout);
        if self.no_events {
            config.events = Some(false);
        }
        if !self.source_addresses.is_empty() {
            config.source_addresses = self.source_addresses.clone();
        }
        Ok(())
    }
}

fn set<T>(slot: &mut Option<T>, value: Option<T>) {
    if value.is_some() {
        *slot = value;
    }
}

fn replace<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_the_reference() {
        for (text, ms) in [
            ("600s", 600_000),
            ("10m", 600_000),
            ("600000ms", 600_000),
            ("600000", 600_000),
            ("1h", 3_600_000),
            ("1.5s", 1_500),
            ("0", 0),
        ] {
            assert_eq!(parse_duration_ms(text), Ok(ms), "{text}");
        }
        for text in ["", "ten", "-5s", "1.5ms", "5d", "s"] {
            assert!(parse_duration_ms(text).is_err(), "{text}");
        }
    }

    #[test]
    fn paired_flags_take_the_last_one() {
        let cli = Cli::try_parse_from([
            "llm-loadgen",
            "benchmark",
            "offline",
            "--no-cpu-affinity",
            "--enable-cpu-affinity",
            "--early-stopping",
            "--no-early-stopping",
        ])
        .unwrap();
        let Command::Benchmark { mode: BenchmarkCommand::Offline(flags) } = cli.command else {
            panic!("not offline")
        };
        let mut config = Config::defaults(crate::yaml::BenchType::Offline);
        config.enable_cpu_affinity = false;
        flags.apply(&mut config).unwrap();
        assert!(config.enable_cpu_affinity);
        assert!(!config.settings.early_stopping.enabled);
    }
}
