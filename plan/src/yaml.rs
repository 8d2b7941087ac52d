//! The reference's configuration schema (anchor §2): YAML in (`benchmark from-config`,
//! `validate-yaml`), the resolved `config.yaml` out, and the `init` templates.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_yaml_ng::Value as YamlValue;

use loadgen_coordinator::TokenCountSource;

use crate::dataset::DatasetSpec;
use crate::error::AppError;

mod duration;
mod flags_only;
pub mod pyyaml;
mod shown;

use crate::lax;
pub use duration::parse_duration_ms;
pub use flags_only::{ShardArgs, TestMode};

/// The whole benchmark configuration, field order as the reference writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_string_stripped"
    )]
    pub name: Option<String>,
    #[serde(default = "default_version", deserialize_with = "lax::string_stripped")]
    pub version: String,
    #[serde(rename = "type", deserialize_with = "lax::choice")]
    pub kind: BenchType,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission_ref: Option<SubmissionRef>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_choice"
    )]
    pub benchmark_mode: Option<BenchType>,
    #[serde(default)]
    pub model_params: ModelParams,
    #[serde(default)]
    pub datasets: Vec<DatasetSpec>,
    #[serde(default)]
    pub settings: Settings,
    #[serde(default)]
    pub endpoint_config: EndpointConfig,
    #[serde(default, deserialize_with = "lax::opt_string")]
    pub report_dir: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_float")]
    pub timeout: Option<f64>,
    /// `false`: write no events.jsonl (not a reference key; `--no-events`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_boolean"
    )]
    pub events: Option<bool>,
    /// Where the per-sample rows go past `spill_budget_mib` (not a reference key;
    /// `--spill-dir`); the report directory when unset.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_string"
    )]
    pub spill_dir: Option<String>,
    /// MiB of per-sample rows kept in memory before they go to `spill_dir` (not a reference
    /// key; `--spill-budget-mib`); 0 keeps them all in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_budget_mib: Option<u64>,
    #[serde(default, deserialize_with = "lax::boolean")]
    pub verbose: bool,
    #[serde(default = "yes", deserialize_with = "lax::boolean")]
    pub enable_cpu_affinity: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditConfig>,
    /// Not a reference key: `sweep:`, the points `llm-loadgen sweep -c FILE` runs (its flags
    /// override it); a benchmark refuses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<SweepSection>,
    /// `--source-addresses`, as given: a flag only (the reference has no such key), so YAML
    /// never sets it and config.yaml never shows it.
    #[serde(skip)]
    pub source_addresses: Vec<String>,
    /// `--chat-template FILE`, as given: a flag only (the reference has no such key), so YAML
    /// never sets it and config.yaml never shows it.
    #[serde(skip)]
    pub chat_template: Option<String>,
    /// `--mode` / `--accuracy-only` (the reference's `TestMode`): a flag only, as the
    /// reference's; `None` = perf.
    #[serde(skip)]
    pub test_mode: Option<TestMode>,
    /// `--shard`, `--shards`, `--start-at`: flags only (the reference has no such keys), so
    /// YAML never sets them and config.yaml never shows them (`plan::shard`).
    #[serde(skip)]
    pub shard: ShardArgs,
    /// An audit phase's one dataset row (`plan::audit_phase_config`): never YAML, never
    /// written.
    #[serde(skip)]
    pub audit_row: Option<u64>,
}

/// `sweep:` (beyond the reference): one of `rates` (Poisson, samples/s), `concurrencies` or
/// `auto` (the automatic plan's Poisson points between its bounds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSection {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub concurrencies: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto: Option<usize>,
}

/// `submission_ref:` (the reference's `SubmissionReference`): the model and the ruleset a
/// submission follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmissionRef {
    #[serde(deserialize_with = "lax::string_stripped")]
    pub model: String,
    #[serde(deserialize_with = "lax::string_stripped")]
    pub ruleset: String,
}

/// `audit:` (the reference's `OutputCachingTestConfig`, MLPerf TEST04): a reference phase of
/// `samples` distinct samples, then an audit phase repeating row `sample_index`
/// `audit_samples` times; ranges are checked by `plan::check_audit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    #[serde(deserialize_with = "lax::choice")]
    pub test: AuditTest,
    /// Run only the audit, not the main benchmark.
    #[serde(default, deserialize_with = "lax::boolean")]
    pub only: bool,
    #[serde(deserialize_with = "lax::int")]
    pub samples: u64,
    #[serde(default, deserialize_with = "lax::opt_int")]
    pub audit_samples: Option<u64>,
    #[serde(default, deserialize_with = "lax::int")]
    pub sample_index: u64,
    #[serde(default = "default_audit_threshold", deserialize_with = "lax::float")]
    pub threshold: f64,
}

fn default_audit_threshold() -> f64 {
    0.10
}

/// `audit.test:` the registered audit tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditTest {
    OutputCachingTest,
}

impl AuditTest {
    pub fn as_str(self) -> &'static str {
        match self {
            AuditTest::OutputCachingTest => "output_caching_test",
        }
    }
}

/// `type:` of a configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchType {
    Offline,
    Online,
    Eval,
    Submission,
}

impl BenchType {
    pub fn as_str(self) -> &'static str {
        match self {
            BenchType::Offline => "offline",
            BenchType::Online => "online",
            BenchType::Eval => "eval",
            BenchType::Submission => "submission",
        }
    }
}

/// `model_params:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelParams {
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_string_stripped"
    )]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_float")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_int")]
    pub seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_int")]
    pub top_k: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_float")]
    pub top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_float")]
    pub repetition_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_float")]
    pub presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_float")]
    pub frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat_template_kwargs: Option<YamlValue>,
    #[serde(deserialize_with = "lax::int")]
    pub max_new_tokens: u32,
    #[serde(deserialize_with = "lax::int")]
    pub min_new_tokens: u32,
    #[serde(deserialize_with = "lax::boolean")]
    pub skip_special_tokens: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub osl_distribution: Option<OslDistribution>,
    /// Beyond the reference: send `ignore_eos: true` (vLLM, SGLang).
    #[serde(skip_serializing_if = "std::ops::Not::not", deserialize_with = "lax::boolean")]
    pub ignore_eos: bool,
    /// Beyond the reference: a mapping merged into every request body's top level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<YamlValue>,
    #[serde(deserialize_with = "lax::choice")]
    pub streaming: Streaming,
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_string_stripped"
    )]
    pub tokenizer_name: Option<String>,
}

impl Default for ModelParams {
    fn default() -> Self {
        ModelParams {
            name: None,
            temperature: None,
            seed: None,
            top_k: None,
            top_p: None,
            repetition_penalty: None,
            presence_penalty: None,
            frequency_penalty: None,
            chat_template_kwargs: None,
            max_new_tokens: 1024,
            min_new_tokens: 1,
            skip_special_tokens: true,
            osl_distribution: None,
            ignore_eos: false,
            extra_body: None,
            streaming: Streaming::Auto,
            tokenizer_name: None,
        }
    }
}

/// `model_params.osl_distribution`: a per-sample output length (the reference's schema, its
/// types and defaults).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OslDistribution {
    #[serde(rename = "type", deserialize_with = "lax::choice")]
    pub kind: OslKind,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_int")]
    pub mean: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_int")]
    pub std: Option<i64>,
    #[serde(deserialize_with = "lax::int")]
    pub min: i64,
    #[serde(deserialize_with = "lax::int")]
    pub max: i64,
}

impl Default for OslDistribution {
    fn default() -> Self {
        OslDistribution { kind: OslKind::Original, mean: None, std: None, min: 1, max: 2048 }
    }
}

/// `osl_distribution.type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum OslKind {
    /// The dataset's own lengths: every row asks for max_new_tokens.
    #[default]
    Original,
    /// Every row asks for `mean`.
    Fixed,
    /// Each row draws uniformly in [min, max].
    Uniform,
    /// Each row draws from a normal(mean, std), rounded and clamped to [min, max].
    Normal,
}

impl OslKind {
    pub fn as_str(self) -> &'static str {
        match self {
            OslKind::Original => "original",
            OslKind::Fixed => "fixed",
            OslKind::Uniform => "uniform",
            OslKind::Normal => "normal",
        }
    }
}

/// `model_params.streaming`: auto resolves to off offline, on online.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Streaming {
    #[default]
    Auto,
    On,
    Off,
}

impl Streaming {
    pub fn as_str(self) -> &'static str {
        match self {
            Streaming::Auto => "auto",
            Streaming::On => "on",
            Streaming::Off => "off",
        }
    }
}

impl Serialize for Streaming {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Only the names, exactly, as the reference's `StreamingMode` enum takes them: a YAML
/// boolean (an unquoted `on` is one, as the reference's loader reads it) is refused by the
/// schema's `lax::choice`, with a hint to quote it.
impl<'de> Deserialize<'de> for Streaming {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        const NAMES: &[&str] = &["auto", "on", "off"];
        match String::deserialize(d)?.as_str() {
            "auto" => Ok(Streaming::Auto),
            "on" => Ok(Streaming::On),
            "off" => Ok(Streaming::Off),
            other => Err(serde::de::Error::unknown_variant(other, NAMES)),
        }
    }
}

/// `settings:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub runtime: Runtime,
    pub load_pattern: LoadPatternConfig,
    pub client: Client,
    pub drain: Drain,
    pub warmup: WarmupConfig,
    pub profiling: Profiling,
    pub early_stopping: EarlyStopping,
    #[serde(deserialize_with = "lax::float")]
    pub service_ready_timeout_s: f64,
    /// Not a reference key: written into config.yaml only when not client (the reference's
    /// basis), so the reference's schema reads a client-basis run's config.yaml.
    #[serde(deserialize_with = "lax::choice", skip_serializing_if = "is_client")]
    pub token_count_source: TokenCountSource,
    /// Not a reference key: service-level objectives, `ttft_p99=500ms,tpot_p99=50ms` (`--slo`,
    /// `plan::slo`); written into config.yaml only when set, so `report DIR` judges the same.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_string"
    )]
    pub slo: Option<String>,
}

fn is_client(source: &TokenCountSource) -> bool {
    *source == TokenCountSource::Client
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            runtime: Runtime::default(),
            load_pattern: LoadPatternConfig::default(),
            client: Client::default(),
            drain: Drain::default(),
            warmup: WarmupConfig::default(),
            profiling: Profiling::default(),
            early_stopping: EarlyStopping::default(),
            service_ready_timeout_s: 30.0,
            token_count_source: TokenCountSource::Client,
            slo: None,
        }
    }
}

/// `settings.runtime:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Runtime {
    /// Milliseconds, or a string with a unit (`600s`, `10m`, `600000ms`) as the reference reads.
    #[serde(deserialize_with = "duration_ms")]
    pub min_duration_ms: u64,
    #[serde(deserialize_with = "duration_ms")]
    pub max_duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_int")]
    pub n_samples_to_issue: Option<u64>,
    #[serde(deserialize_with = "lax::int")]
    pub scheduler_random_seed: u64,
    #[serde(deserialize_with = "lax::int")]
    pub dataloader_random_seed: u64,
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime {
            min_duration_ms: 600_000,
            max_duration_ms: 0,
            n_samples_to_issue: None,
            scheduler_random_seed: 42,
            dataloader_random_seed: 42,
        }
    }
}

/// A duration in ms: a string with a unit (the reference's `_parse_duration_suffix`), else a
/// whole number by the lax int rule.
fn duration_ms<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    fn convert(value: &lax::Scalar<'_>) -> Result<u64, String> {
        match value {
            lax::Scalar::Str(t) => parse_duration_ms(t),
            other => lax::as_int(other).and_then(|i| {
                u64::try_from(i).map_err(|_| format!("{other} is not a duration (give ms ≥ 0)"))
            }),
        }
    }
    lax::scalar(d, convert, "a duration (ms, or 600s, 10m, 600000ms)")
}

/// `settings.load_pattern.type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LoadPatternKind {
    #[default]
    #[value(name = "max_throughput", alias = "max-throughput")]
    MaxThroughput,
    #[value(name = "poisson")]
    Poisson,
    #[value(name = "concurrency")]
    Concurrency,
    #[value(name = "agentic_inference", alias = "agentic-inference")]
    AgenticInference,
    #[value(name = "burst")]
    Burst,
    #[value(name = "step")]
    Step,
}

impl LoadPatternKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LoadPatternKind::MaxThroughput => "max_throughput",
            LoadPatternKind::Poisson => "poisson",
            LoadPatternKind::Concurrency => "concurrency",
            LoadPatternKind::AgenticInference => "agentic_inference",
            LoadPatternKind::Burst => "burst",
            LoadPatternKind::Step => "step",
        }
    }
}

/// `settings.load_pattern:`; `use_legacy_loadgen_qps_metrics` is written only for Poisson.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoadPatternConfig {
    #[serde(rename = "type", deserialize_with = "lax::choice")]
    pub kind: LoadPatternKind,
    #[serde(deserialize_with = "lax::opt_float")]
    pub target_qps: Option<f64>,
    #[serde(deserialize_with = "lax::opt_int")]
    pub target_concurrency: Option<u32>,
    #[serde(deserialize_with = "lax::boolean")]
    pub use_legacy_loadgen_qps_metrics: bool,
}

impl Default for LoadPatternConfig {
    fn default() -> Self {
        LoadPatternConfig {
            kind: LoadPatternKind::MaxThroughput,
            target_qps: None,
            target_concurrency: None,
            use_legacy_loadgen_qps_metrics: true,
        }
    }
}

impl Serialize for LoadPatternConfig {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("type", &self.kind)?;
        if let Some(q) = self.target_qps {
            map.serialize_entry("target_qps", &q)?;
        }
        if let Some(c) = self.target_concurrency {
            map.serialize_entry("target_concurrency", &c)?;
        }
        if self.kind == LoadPatternKind::Poisson {
            map.serialize_entry(
                "use_legacy_loadgen_qps_metrics",
                &self.use_legacy_loadgen_qps_metrics,
            )?;
        }
        map.end()
    }
}

/// `settings.client:` (the reference's fields, plus `stream_include_usage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Client {
    #[serde(deserialize_with = "lax::int")]
    pub num_workers: i64,
    #[serde(deserialize_with = "lax::string_stripped")]
    pub log_level: String,
    #[serde(deserialize_with = "lax::int")]
    pub warmup_connections: i64,
    #[serde(deserialize_with = "lax::float")]
    pub auto_warmup_budget_fraction: f64,
    #[serde(deserialize_with = "lax::int")]
    pub max_concurrent_warmup_connects: i64,
    #[serde(deserialize_with = "lax::int")]
    pub max_connections: i64,
    pub transport: Transport,
    #[serde(deserialize_with = "lax::boolean")]
    pub stream_all_chunks: bool,
    #[serde(deserialize_with = "lax::float")]
    pub worker_initialization_timeout: f64,
    #[serde(deserialize_with = "lax::float")]
    pub worker_graceful_shutdown_wait: f64,
    #[serde(deserialize_with = "lax::float")]
    pub worker_force_kill_timeout: f64,
    #[serde(deserialize_with = "lax::boolean")]
    pub insecure: bool,
    #[serde(deserialize_with = "lax::float")]
    pub max_idle_time: f64,
    #[serde(deserialize_with = "lax::int")]
    pub min_required_connections: i64,
    #[serde(deserialize_with = "lax::string")]
    pub worker_gc_mode: String,
    /// Not a reference key: written into config.yaml only when off (the reference always asks
    /// for usage), so the reference's schema reads the config.yaml of a run that left it on.
    #[serde(deserialize_with = "lax::boolean", skip_serializing_if = "is_true")]
    pub stream_include_usage: bool,
    /// Synced from `endpoint_config.api_type` by the reference; accepted, not written.
    #[serde(skip_serializing, deserialize_with = "lax::opt_choice")]
    pub api_type: Option<ApiTypeName>,
}

impl Default for Client {
    fn default() -> Self {
        Client {
            num_workers: -1,
            log_level: "INFO".to_string(),
            warmup_connections: -1,
            auto_warmup_budget_fraction: 0.25,
            max_concurrent_warmup_connects: 128,
            max_connections: -1,
            transport: Transport::default(),
            stream_all_chunks: false,
            worker_initialization_timeout: 60.0,
            worker_graceful_shutdown_wait: 0.5,
            worker_force_kill_timeout: 0.5,
            insecure: false,
            max_idle_time: 4.0,
            min_required_connections: -1,
            worker_gc_mode: "relaxed".to_string(),
            stream_include_usage: true,
            api_type: None,
        }
    }
}

/// `settings.client.transport:` (the reference's ZMQ knobs; kept for schema parity).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Transport {
    #[serde(rename = "type", deserialize_with = "lax::string")]
    pub kind: String,
    #[serde(deserialize_with = "lax::int")]
    pub recv_buffer_size: i64,
    #[serde(deserialize_with = "lax::int")]
    pub send_buffer_size: i64,
    #[serde(deserialize_with = "lax::int")]
    pub io_threads: i64,
    #[serde(deserialize_with = "lax::int")]
    pub worker_io_threads: i64,
    #[serde(deserialize_with = "lax::int")]
    pub high_water_mark: i64,
    #[serde(deserialize_with = "lax::int")]
    pub linger: i64,
    #[serde(deserialize_with = "lax::int")]
    pub immediate: i64,
}

impl Default for Transport {
    fn default() -> Self {
        Transport {
            kind: "zmq".to_string(),
            recv_buffer_size: 16 * 1024 * 1024,
            send_buffer_size: 16 * 1024 * 1024,
            io_threads: 4,
            worker_io_threads: 1,
            high_water_mark: 0,
            linger: -1,
            immediate: 1,
        }
    }
}

/// `settings.drain:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Drain {
    /// `null`: wait for the warm-up samples however long they take (the reference's `None`).
    #[serde(deserialize_with = "lax::opt_float")]
    pub warmup_timeout_s: Option<f64>,
    /// `null`: wait for the in-flight samples however long they take.
    #[serde(deserialize_with = "lax::opt_float")]
    pub performance_timeout_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_float")]
    pub accuracy_timeout_s: Option<f64>,
    /// Seconds the end-of-run tokenizer drain may take; 0 = until every output is counted.
    #[serde(deserialize_with = "lax::float")]
    pub metrics_drain_timeout_s: f64,
    /// Live client tokenizer threads; 0 = count after the last sample. `None` (not given):
    /// the CPU plan decides (`cpu::tokenizer_threads`), and the plan writes its choice back.
    #[serde(deserialize_with = "lax::opt_int")]
    pub metrics_tokenizer_workers: Option<i64>,
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            warmup_timeout_s: Some(240.0),
            performance_timeout_s: Some(240.0),
            accuracy_timeout_s: None,
            metrics_drain_timeout_s: 0.0,
            metrics_tokenizer_workers: None,
        }
    }
}

/// `settings.warmup:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WarmupConfig {
    #[serde(deserialize_with = "lax::boolean")]
    pub enabled: bool,
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_int")]
    pub n_requests: Option<u64>,
    #[serde(deserialize_with = "lax::boolean")]
    pub salt: bool,
    #[serde(deserialize_with = "lax::boolean")]
    pub drain: bool,
    #[serde(deserialize_with = "lax::int")]
    pub warmup_random_seed: u64,
}

impl Default for WarmupConfig {
    fn default() -> Self {
        WarmupConfig {
            enabled: false,
            n_requests: None,
            salt: false,
            drain: false,
            warmup_random_seed: 42,
        }
    }
}

/// `settings.profiling:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profiling {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_string"
    )]
    pub engine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<Vec<String>>,
}

/// `settings.early_stopping:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EarlyStopping {
    #[serde(deserialize_with = "lax::boolean")]
    pub enabled: bool,
}

impl Default for EarlyStopping {
    fn default() -> Self {
        EarlyStopping { enabled: true }
    }
}

/// `endpoint_config:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    #[serde(default, deserialize_with = "lax::string_list_stripped")]
    pub endpoints: Vec<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_secret_string"
    )]
    pub api_key: Option<String>,
    #[serde(default, deserialize_with = "lax::choice")]
    pub api_type: ApiTypeName,
    /// Beyond the reference: `NAME: VALUE` headers for every request (`--header`); their
    /// values are redacted in `config.yaml`.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "lax::secret_string_list"
    )]
    pub headers: Vec<String>,
    /// Beyond the reference: a PEM file of the only certificates trusted for `https://`
    /// endpoints (`--ca-bundle`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_string_stripped"
    )]
    pub ca_bundle: Option<String>,
}

/// `endpoint_config.api_type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ApiTypeName {
    #[default]
    #[value(name = "openai")]
    Openai,
    #[value(name = "openai_completions", alias = "openai-completions")]
    OpenaiCompletions,
    #[value(name = "sglang")]
    Sglang,
    #[value(name = "videogen")]
    Videogen,
}

impl ApiTypeName {
    /// The name used on the command line and in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiTypeName::Openai => "openai",
            ApiTypeName::OpenaiCompletions => "openai_completions",
            ApiTypeName::Sglang => "sglang",
            ApiTypeName::Videogen => "videogen",
        }
    }

    /// Whether streaming requests of this type can ask for usage (`stream_options`).
    pub fn is_openai(self) -> bool {
        matches!(self, ApiTypeName::Openai | ApiTypeName::OpenaiCompletions)
    }
}

fn default_version() -> String {
    "1.0".to_string()
}
fn is_true(value: &bool) -> bool {
    *value
}

fn yes() -> bool {
    true
}

impl Config {
    /// The defaults of a benchmark of `kind`, as the CLI starts from them.
    pub fn defaults(kind: BenchType) -> Config {
        Config {
            name: None,
            version: default_version(),
            kind,
            submission_ref: None,
            benchmark_mode: None,
            model_params: ModelParams::default(),
            datasets: Vec::new(),
            settings: Settings::default(),
            endpoint_config: EndpointConfig::default(),
            report_dir: None,
            timeout: None,
            events: None,
            spill_dir: None,
            spill_budget_mib: None,
            verbose: false,
            enable_cpu_affinity: true,
            audit: None,
            sweep: None,
            source_addresses: Vec::new(),
            chat_template: None,
            test_mode: None,
            shard: ShardArgs::default(),
            audit_row: None,
        }
    }

    /// Parses YAML text in the reference's schema, as the reference reads it: typed as
    /// PyYAML's `safe_load` types it (`pyyaml`), `${VAR}`, `${VAR:-default}`, `$VAR` and `$$`
    /// substituted in string values (which stay strings), then each value coerced by pydantic's
    /// lax rules (`lax`); unknown keys are errors naming the key.
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<Config, AppError> {
        let bad = |why: String| {
            AppError::Input(format!("config error in {origin}: {}", shown::shown_error(&why)))
        };
        let mut value = pyyaml::load(text).map_err(|e| bad(e.to_string()))?;
        substitute_env(&mut value).map_err(bad)?;
        if value.is_null() {
            return Err(bad("the file is empty".to_string()));
        }
        typed_config(text, &value).map_err(bad)
    }

    /// Reads and parses a YAML file; a missing file is bad input (exit 2).
    pub fn from_yaml_file(path: &std::path::Path) -> Result<Config, AppError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| AppError::Input(format!("cannot read config {}: {e}", path.display())))?;
        Config::from_yaml_str(&text, &path.display().to_string())
    }

    /// The configuration as YAML with every secret redacted (the `config.yaml` form).
    pub fn to_redacted_yaml(&self) -> Result<String, AppError> {
        let mut value = serde_yaml_ng::to_value(self)
            .map_err(|e| AppError::Execution(format!("cannot serialize config: {e}")))?;
        redact(&mut value, None);
        let text = serde_yaml_ng::to_string(&value)
            .map_err(|e| AppError::Execution(format!("cannot serialize config: {e}")))?;
        Ok(quote_yaml11_bools(&text))
    }
}

/// The typed configuration of `value` (the document as the reference reads it), with errors
/// that name the key path (`settings.client.num_workers: "many" is not …`): serde_yaml_ng
/// keeps the path only when it reads text. The user's own text is read where YAML 1.2 types
/// it exactly as `value` (its line numbers are the user's); otherwise `value`, re-written,
/// without its line numbers.
fn typed_config(text: &str, value: &YamlValue) -> Result<Config, String> {
    let as_written: Option<YamlValue> = serde_yaml_ng::from_str(text).ok();
    if as_written.as_ref() == Some(value) {
        return serde_yaml_ng::from_str::<Config>(text).map_err(|e| e.to_string());
    }
    let rewritten = serde_yaml_ng::to_string(value).map_err(|e| e.to_string())?;
    serde_yaml_ng::from_str::<Config>(&rewritten).map_err(|e| {
        let err = e.to_string();
        match err.rfind(" at line ") {
            Some(at) => err[..at].to_string(),
            None => err,
        }
    })
}

/// Quotes plain scalars that YAML 1.1 readers (PyYAML, so the reference's tools) would
/// take for booleans, such as `streaming: on`, as the reference writes them (`'on'`).
pub fn quote_yaml11_bools(text: &str) -> String {
    const WORDS: [&str; 6] = ["on", "off", "yes", "no", "y", "n"];
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let split = body.rfind(": ").map(|i| i + 2).or_else(|| {
            let lead = body.len() - body.trim_start().len();
            body[lead..].starts_with("- ").then_some(lead + 2)
        });
        match split {
            Some(at) if WORDS.contains(&body[at..].to_ascii_lowercase().as_str()) => {
                out.push_str(&body[..at]);
                out.push_str(&format!("'{}'", &body[at..]));
                out.push_str(&line[body.len()..]);
            }
            _ => out.push_str(line),
        }
    }
    out
}

use crate::redact::{is_secret_header, is_secret_key, redact_url, REDACTED};

fn redact(value: &mut YamlValue, key: Option<&str>) {
    match value {
        YamlValue::Mapping(map) => {
            for (k, v) in map.iter_mut() {
                redact(v, k.as_str());
            }
        }
        YamlValue::Sequence(items) => items.iter_mut().for_each(|v| redact(v, key)),
        YamlValue::Null => {}
        YamlValue::String(s) => {
            if key == Some("headers") {
                // `NAME: VALUE`: the name stays, so the file says which headers were sent; the
                // value is hidden when the name says it holds a secret.
                if let Some((name, _)) = s.split_once(':').filter(|(n, _)| is_secret_header(n)) {
                    *s = format!("{}: {REDACTED}", name.trim());
                }
            } else if key.is_some_and(is_secret_key) {
                *s = REDACTED.to_string();
            } else {
                *s = redact_url(s);
            }
        }
        _ if key.is_some_and(is_secret_key) => *value = YamlValue::String(REDACTED.to_string()),
        _ => {}
    }
}

/// Substitutes environment variables in every string value, in place.
fn substitute_env(value: &mut YamlValue) -> Result<(), String> {
    match value {
        // The result stays a string, as the reference's: a number or boolean key takes it by
        // the lax rules (`${QPS}` = "12.5" is a float), a string key as it is.
        YamlValue::String(s) if s.contains('$') => *s = expand_env(s)?,
        YamlValue::Mapping(map) => {
            for (_, v) in map.iter_mut() {
                substitute_env(v)?;
            }
        }
        YamlValue::Sequence(items) => {
            for v in items {
                substitute_env(v)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Expands `${VAR}`, `${VAR:-default}`, `$VAR` and `$$` (a literal `$`).
pub fn expand_env(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = text;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        rest = &rest[pos + 1..];
        if let Some(r) = rest.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = rest.strip_prefix('{') {
            let end = r.find('}').ok_or_else(|| format!("unclosed ${{ in {text:?}"))?;
            let body = &r[..end];
            let (name, default) = match body.split_once(":-") {
                Some((n, d)) => (n, Some(d)),
                None => (body, None),
            };
            out.push_str(&lookup_env(name, default)?);
            rest = &r[end + 1..];
        } else {
            let end =
                rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            if end == 0 {
                out.push('$');
            } else {
                out.push_str(&lookup_env(&rest[..end], None)?);
            }
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn lookup_env(name: &str, default: Option<&str>) -> Result<String, String> {
    match (std::env::var(name), default) {
        (Ok(v), _) => Ok(v),
        (Err(_), Some(d)) => Ok(d.to_string()),
        (Err(_), None) => Err(format!("environment variable {name} is not set and has no default")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_errors_naming_the_key() {
        let cases = [
            ("type: offline\ncolour: red\n", "unknown field `colour`"),
            (
                "type: offline\nsettings:\n  runtime:\n    min_duration: 5\n",
                "unknown field `min_duration`",
            ),
            (
                "type: offline\nmodel_params:\n  streaming: maybe\n",
                "model_params.streaming: unknown variant `maybe`, expected one of `auto`",
            ),
            ("type: sideways\n", "sideways"),
            ("name: x\n", "missing field `type`"),
            ("", "the file is empty"),
            ("type: [\n", "config error in t.yaml"),
        ];
        for (text, needle) in cases {
            let err = Config::from_yaml_str(text, "t.yaml").unwrap_err();
            assert_eq!(err.exit_code(), 2, "{text:?}");
            assert!(err.to_string().contains(needle), "{text:?}: {err}");
        }
    }

    #[test]
    fn env_vars_are_substituted_and_typed() {
        std::env::set_var("LLM_LOADGEN_TEST_QPS", "12.5");
        std::env::set_var("LLM_LOADGEN_TEST_KEY", "k1");
        let text = "type: online\nsettings:\n  load_pattern:\n    type: poisson\n    \
                    target_qps: ${LLM_LOADGEN_TEST_QPS}\nendpoint_config:\n  endpoints: \
                    ['http://${LLM_LOADGEN_TEST_HOST:-localhost}:8000']\n  api_key: \
                    $LLM_LOADGEN_TEST_KEY-$$x\n";
        let config = Config::from_yaml_str(text, "t").unwrap();
        assert_eq!(config.settings.load_pattern.target_qps, Some(12.5));
        assert_eq!(config.endpoint_config.endpoints, ["http://localhost:8000"]);
        assert_eq!(config.endpoint_config.api_key.as_deref(), Some("k1-$x"));
        let err = expand_env("${LLM_LOADGEN_TEST_UNSET_VAR}").unwrap_err();
        assert!(err.contains("LLM_LOADGEN_TEST_UNSET_VAR is not set"), "{err}");
    }

    #[test]
    fn a_config_error_names_its_key() {
        let cases = [
            (
                "type: offline\nsettings:\n  client:\n    num_workers: [1]\n",
                "settings.client.num_workers: invalid type: sequence",
            ),
            ("type: offline\nmodel_params: 5\n", "model_params: invalid type: integer `5`"),
            ("type: offline\ntimeout: soon\n", "timeout: \"soon\" is not a number"),
            (
                "type: offline\nmodel_params:\n  streaming: [1]\n",
                "model_params.streaming: invalid type: sequence, expected a name",
            ),
            ("type: offline\nsettings:\n  runtime:\n    min_duration_ms: abc\n", "at line 4"),
        ];
        for (text, needle) in cases {
            let err = Config::from_yaml_str(text, "t.yaml").unwrap_err();
            assert!(err.to_string().contains(needle), "{text:?}: {err}");
        }
        // After a substitution the path is still named; the line of the rewritten text is not.
        std::env::set_var("LLM_LOADGEN_TEST_WORKERS", "many");
        let text =
            "type: offline\nsettings:\n  client:\n    num_workers: ${LLM_LOADGEN_TEST_WORKERS}\n";
        let msg = Config::from_yaml_str(text, "t.yaml").unwrap_err().to_string();
        assert!(
            msg.contains("settings.client.num_workers: \"many\" is not a whole number"),
            "{msg}"
        );
        assert!(!msg.contains(" at line "), "{msg}");
    }

    #[test]
    fn yaml11_booleans_are_quoted() {
        let text = "streaming: on\nx: off\nname: one\n- yes\nurl: http://a\n";
        assert_eq!(
            quote_yaml11_bools(text),
            "streaming: 'on'\nx: 'off'\nname: one\n- 'yes'\nurl: http://a\n"
        );
    }

    /// `KEY: RAW` at `path` (dotted) in an offline document, read as a run reads it.
    fn read_at(path: &str, raw: &str) -> Result<Config, String> {
        let keys: Vec<&str> = path.split('.').collect();
        let mut text = String::from("type: offline\n");
        for (depth, key) in keys.iter().enumerate() {
            let indent = "  ".repeat(depth);
            if depth + 1 == keys.len() {
                text.push_str(&format!("{indent}{key}: {raw}\n"));
            } else {
                text.push_str(&format!("{indent}{key}:\n"));
            }
        }
        Config::from_yaml_str(&text, "t.yaml").map_err(|e| e.to_string())
    }

    /// Runs `cases` of one key: `Ok(value)` as the reference coerces `RAW` (observed with
    /// PyYAML 6.0.3 + pydantic 2.12.5 on a field of the same type and model config), or
    /// `Err(needle)` for a value it refuses, whose message must name the key and hold `needle`.
    fn check_table<T: PartialEq + std::fmt::Debug>(
        path: &str,
        get: fn(&Config) -> T,
        cases: &[(&str, Result<T, &str>)],
    ) {
        for (raw, want) in cases {
            match (read_at(path, raw), want) {
                (Ok(config), Ok(value)) => assert_eq!(&get(&config), value, "{path}: {raw}"),
                (Err(msg), Err(needle)) => {
                    assert!(msg.contains(&format!("{path}: ")), "{path}: {raw}: {msg}");
                    assert!(msg.contains(needle), "{path}: {raw}: want {needle:?}: {msg}");
                    assert!(!msg.contains("panicked"), "{msg}");
                }
                (got, want) => panic!("{path}: {raw}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn an_int_key_takes_what_pydantic_lax_takes() {
        check_table(
            "settings.client.num_workers",
            |c| c.settings.client.num_workers,
            &[
                ("2", Ok(2)),
                ("-1", Ok(-1)),
                ("\"2\"", Ok(2)),
                ("\" 2 \"", Ok(2)),
                ("\"+2\"", Ok(2)),
                ("\"02\"", Ok(2)),
                ("128.0", Ok(128)),
                ("\"128.0\"", Ok(128)),
                ("1.0e+3", Ok(1000)),
                ("1_000", Ok(1000)),
                ("\"1_000\"", Ok(1000)),
                ("true", Ok(1)),
                ("on", Ok(1)),
                ("010", Ok(8)),
                ("0x10", Ok(16)),
                ("1:30", Ok(90)),
                ("128.5", Err("128.5 is not a whole number (it has a fractional part)")),
                ("\"128.5\"", Err("\"128.5\" is not a whole number")),
                ("1e3", Err("\"1e3\" is not a whole number")),
                ("\"1e3\"", Err("\"1e3\" is not a whole number")),
                ("0o10", Err("\"0o10\" is not a whole number")),
                ("\"0x10\"", Err("\"0x10\" is not a whole number")),
                ("\"true\"", Err("\"true\" is not a whole number")),
                ("\"1__0\"", Err("is not a whole number")),
                ("\"\"", Err("\"\" is not a whole number")),
                ("null", Err("null is not a whole number")),
                (".inf", Err("inf is not a whole number")),
                ("[1]", Err("invalid type: sequence, expected a whole number")),
            ],
        );
        check_table(
            "model_params.max_new_tokens",
            |c| c.model_params.max_new_tokens,
            &[("\"64\"", Ok(64)), ("-1", Err("-1 is out of range: give a whole number from 0"))],
        );
        check_table(
            "model_params.seed",
            |c| c.model_params.seed,
            &[("null", Ok(None)), ("~", Ok(None)), ("\"7\"", Ok(Some(7))), ("7.0", Ok(Some(7)))],
        );
    }

    #[test]
    fn a_float_key_takes_what_pydantic_lax_takes() {
        check_table(
            "settings.service_ready_timeout_s",
            |c| c.settings.service_ready_timeout_s,
            &[
                ("0.5", Ok(0.5)),
                ("\"0.5\"", Ok(0.5)),
                ("\" 0.5 \"", Ok(0.5)),
                ("2", Ok(2.0)),
                ("\"2\"", Ok(2.0)),
                ("true", Ok(1.0)),
                ("yes", Ok(1.0)),
                ("1e3", Ok(1000.0)),
                ("1e-3", Ok(0.001)),
                ("\"1_000.5\"", Ok(1000.5)),
                (".inf", Ok(f64::INFINITY)),
                ("\"inf\"", Ok(f64::INFINITY)),
                ("1:30", Ok(90.0)),
                ("\"true\"", Err("\"true\" is not a number")),
                ("\"1,5\"", Err("\"1,5\" is not a number")),
                ("\"\"", Err("\"\" is not a number")),
                ("null", Err("null is not a number")),
            ],
        );
        check_table(
            "model_params.temperature",
            |c| c.model_params.temperature,
            &[("null", Ok(None)), ("", Ok(None)), ("\"0.5\"", Ok(Some(0.5))), ("1", Ok(Some(1.0)))],
        );
    }

    #[test]
    fn a_bool_key_takes_what_pydantic_lax_takes() {
        check_table(
            "settings.warmup.enabled",
            |c| c.settings.warmup.enabled,
            &[
                ("true", Ok(true)),
                ("True", Ok(true)),
                ("on", Ok(true)),
                ("\"on\"", Ok(true)),
                ("\"On\"", Ok(true)),
                ("yes", Ok(true)),
                ("y", Ok(true)),
                ("\"Y\"", Ok(true)),
                ("\"t\"", Ok(true)),
                ("\"1\"", Ok(true)),
                ("1", Ok(true)),
                ("1.0", Ok(true)),
                ("\"TRUE\"", Ok(true)),
                ("off", Ok(false)),
                ("n", Ok(false)),
                ("\"f\"", Ok(false)),
                ("0", Ok(false)),
                ("0.0", Ok(false)),
                ("2", Err("2 is not a boolean")),
                ("1.5", Err("1.5 is not a boolean")),
                ("\"1.0\"", Err("\"1.0\" is not a boolean")),
                ("\" true \"", Err("\" true \" is not a boolean")),
                ("\"nope\"", Err("\"nope\" is not a boolean")),
                ("null", Err("null is not a boolean")),
                ("\"\"", Err("\"\" is not a boolean")),
            ],
        );
    }

    #[test]
    fn a_string_key_takes_only_strings() {
        let stripped = |c: &Config| c.model_params.name.clone();
        check_table(
            "model_params.name",
            stripped,
            &[
                ("abc", Ok(Some("abc".to_string()))),
                ("\" abc \"", Ok(Some("abc".to_string()))),
                ("\"123\"", Ok(Some("123".to_string()))),
                ("1e3", Ok(Some("1e3".to_string()))),
                ("\"\"", Ok(Some(String::new()))),
                ("123", Err("123 is a number, not a string")),
                ("1.5", Err("1.5 is a number, not a string")),
                ("1_000", Err("1000 is a number, not a string")),
                ("true", Err("true is a boolean, not a string")),
                ("on", Err("true is a boolean, not a string (YAML, as the reference reads it")),
            ],
        );
        check_table(
            "settings.client.worker_gc_mode",
            |c| c.settings.client.worker_gc_mode.clone(),
            &[
                (" relaxed", Ok("relaxed".to_string())),
                ("\" system \"", Ok(" system ".to_string())),
            ],
        );
        check_table(
            "settings.client.log_level",
            |c| c.settings.client.log_level.clone(),
            &[("\" DEBUG \"", Ok("DEBUG".to_string())), ("null", Err("null is not a string"))],
        );
    }

    #[test]
    fn an_enum_key_takes_only_its_names_exactly() {
        check_table(
            "model_params.streaming",
            |c| c.model_params.streaming,
            &[
                ("auto", Ok(Streaming::Auto)),
                ("\"on\"", Ok(Streaming::On)),
                ("'off'", Ok(Streaming::Off)),
                ("on", Err("true is a boolean, not a name (YAML, as the reference reads it")),
                ("off", Err("false is a boolean, not a name")),
                ("true", Err("true is a boolean, not a name")),
                ("\"On\"", Err("unknown variant `On`, expected one of `auto`, `on`, `off`")),
                ("\" on \"", Err("unknown variant ` on `")),
                ("1", Err("1 is a number, not a name")),
            ],
        );
        check_table(
            "settings.load_pattern.type",
            |c| c.settings.load_pattern.kind,
            &[
                ("max_throughput", Ok(LoadPatternKind::MaxThroughput)),
                ("Poisson", Err("unknown variant `Poisson`")),
            ],
        );
    }

    #[test]
    fn a_secret_value_is_not_shown_when_it_is_refused() {
        for (path, raw) in
            [("endpoint_config.api_key", "98765432"), ("endpoint_config.headers", "[98765432]")]
        {
            let msg = read_at(path, raw).unwrap_err();
            assert!(msg.contains(path) && msg.contains("not shown"), "{msg}");
            assert!(!msg.contains("98765432"), "{msg}");
        }
    }

    #[test]
    fn a_substituted_value_is_a_string_as_the_reference_keeps_it() {
        std::env::set_var("LLM_LOADGEN_TEST_NAME", "123");
        std::env::set_var("LLM_LOADGEN_TEST_ON", "on");
        let text = "type: offline\nmodel_params:\n  name: ${LLM_LOADGEN_TEST_NAME}\n  \
                    streaming: ${LLM_LOADGEN_TEST_ON}\n  max_new_tokens: ${LLM_LOADGEN_TEST_N:-8}\n";
        let config = Config::from_yaml_str(text, "t.yaml").unwrap();
        assert_eq!(config.model_params.name.as_deref(), Some("123"));
        assert_eq!(config.model_params.streaming, Streaming::On);
        assert_eq!(config.model_params.max_new_tokens, 8);
    }
}
