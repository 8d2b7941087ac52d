//! The validated plan: configuration (YAML + flags) resolved into the one value a run is
//! built from. Contradictions are rejected here, before anything starts.

use std::path::{Path, PathBuf};

use loadgen_coordinator::cpu::default_worker_count;

use loadgen_coordinator::{LoadPattern, TokenCountSource};
use loadgen_worker::request::RequestOptions;

use crate::dataset::{Dataset, DatasetKind};
use crate::error::AppError;
use crate::redact::Secret;
use crate::tokenizer::Tokenizer;
use crate::yaml::{ApiTypeName, BenchType, Config, LoadPatternKind, ModelParams, Runtime};

mod accuracy;
mod agentic;
mod audit;
mod connections;
mod dataset;
mod endpoints;
mod headers;
mod host;
mod profiling;
mod reference;
mod refusals;
mod request;
#[cfg(test)]
mod resolve_tests;
pub mod ruleset;
mod run_length;
mod shard;
pub mod slo;
mod specs;
mod submission;
mod tokens;

pub use accuracy::*;
pub use agentic::{instance_id, instances, AgenticPlan, Instance, AGENTIC_ROWS_MAX};
pub use audit::*;
pub use connections::*;
use dataset::*;
pub use endpoints::*;
pub use host::Host;
pub use profiling::{check_profiling, derive_urls, ProfilerEngine, ProfilingPlan};
pub use reference::*;
pub use refusals::*;
use request::*;
pub use request::{MAX_EXTRA_BODY_BYTES, MAX_MODEL_NAME_BYTES};
pub use run_length::*;
pub use shard::*;
pub use specs::{
    check_endpoint_count, request_tables, worker_specs, ViewFacts, MAX_OUTPUT_BYTES,
    PROGRESS_INTERVAL_ENV,
};
pub use submission::{apply_submission, run_kind, scenario, submission_ruleset};
pub use tokens::*;

/// Warm-up phase settings: samples issued before tracking starts (the reference's warm-up
/// phase: the performance phase's load pattern, seeds of its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Warmup {
    pub enabled: bool,
    /// Warm-up samples to issue: `requests`, else the dataset's rows; 0 when not enabled.
    pub samples: u64,
    /// `warmup.n_requests` as given; `None` = the whole dataset once.
    pub requests: Option<u64>,
    /// Wait for warm-up samples to finish before the performance phase.
    pub drain: bool,
    /// How long that wait may take (`settings.drain.warmup_timeout_s`).
    pub drain_timeout_ms: u64,
    /// `warmup.warmup_random_seed`: the warm-up's Poisson schedule is drawn from it, its
    /// sample order from it + 1 and its salts from it + 2, as the reference draws them.
    pub random_seed: u64,
    /// `warmup.salt`: each warm-up prompt gets a `[<16 hex>] ` prefix of its own, so a
    /// server's prefix cache cannot serve the measured phase from the warm-up.
    pub salt: bool,
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

/// MiB of per-sample rows a run keeps in memory before it writes them to files
/// (`--spill-budget-mib`).
pub const SPILL_BUDGET_MIB_DEFAULT: u64 = 256;

/// Where a run's per-sample rows go past its memory budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpillSettings {
    /// `--spill-dir`; `None`: the report directory.
    pub dir: Option<PathBuf>,
    /// `--spill-budget-mib`: MiB of rows kept in memory; 0: all of them.
    pub budget_mib: u64,
}

impl SpillSettings {
    fn of(config: &Config) -> SpillSettings {
        SpillSettings {
            dir: config.spill_dir.as_ref().map(PathBuf::from),
            budget_mib: config.spill_budget_mib.unwrap_or(SPILL_BUDGET_MIB_DEFAULT),
        }
    }
}

/// One validated run plan. Built only by `resolve_plan`; every field is final, and the run
/// reads its specs from it (`specs`) without deciding anything itself.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The coordinator's pattern; a Poisson one carries `settings.runtime.scheduler_random_seed`.
    pub load_pattern: LoadPattern,
    /// Endpoint base URLs; empty = start the embedded max-throughput stub.
    pub endpoints: Vec<EndpointUrl>,
    /// The `Authorization` value of every request: `Bearer <--api-key or OPENAI_API_KEY>`, or
    /// an `Authorization` given with `--header`; an endpoint's own Basic auth replaces it.
    pub authorization: Option<Secret>,
    /// The other `--header` lines, in the order given.
    pub headers: Vec<(String, String)>,
    /// How `https://` endpoints verify their servers (`--insecure`, `--ca-bundle`).
    pub tls_verify: loadgen_worker::http::tls::Verify,
    /// What every request asks for, as the workers build it: the protocol, the model,
    /// streaming (auto resolved: off offline, on online), sampling keys and the extra body.
    pub request: RequestOptions,
    /// Each row's drawn output length (`osl_distribution`); empty = every row asks for
    /// `request.max_output_tokens`.
    pub row_output_tokens: Vec<u32>,
    /// The performance dataset, loaded and mapped.
    pub dataset: Dataset,
    /// True when no dataset was given and the built-in synthetic one is used.
    pub dataset_is_synthetic: bool,
    /// The client tokenizer; `None` = no client token counts (warned at resolve time).
    pub tokenizer: Option<Tokenizer>,
    /// Samples to issue in the performance phase (anchor §3.5).
    pub num_samples: u64,
    /// The whole plan's performance samples and what sized them (the summary says so).
    pub sample_count: SampleCount,
    /// Wall-time cap of the performance phase; in-flight samples are abandoned at it.
    pub max_duration_ms: Option<u64>,
    /// How long to wait for in-flight samples after the last issue.
    pub drain_timeout_ms: u64,
    /// The client tokenizer pool (`settings.drain.metrics_*`).
    pub token_pool: TokenPoolSettings,
    /// Per-request timeout (`--timeout` / YAML `timeout:`, seconds), from the request's
    /// write to the response's end; 0 = none. Past it the sample fails with kind `timeout`.
    pub request_timeout_ns: u64,
    /// The worker processes and their connections.
    pub connections: Connections,
    pub warmup: Warmup,
    pub early_stopping: bool,
    pub report_dir: PathBuf,
    /// `report_dir` is the default name (no `--report-dir` / `report_dir:`): the run takes a
    /// fresh directory, never one that exists (`report::ReportDir::claim`).
    pub report_dir_default: bool,
    /// Write events.jsonl (`--no-events` turns it off).
    pub events: bool,
    /// Where the per-sample rows go past a memory budget (`--spill-dir`, `--spill-budget-mib`).
    pub spill: SpillSettings,
    pub token_count_source: TokenCountSource,
    /// `settings.runtime.scheduler_random_seed`, as the report shows it (a Poisson pattern
    /// carries it too).
    pub scheduler_seed: u64,
    pub dataloader_seed: u64,
    /// Report the LoadGen form of QPS as the headline (Poisson only).
    pub legacy_loadgen_qps: bool,
    /// `-v` count.
    pub verbose: u8,
    /// The resolved configuration in the reference's schema, secrets redacted: written as
    /// `config.yaml` in the report directory.
    pub config_yaml: String,
    /// The mode, the accuracy datasets and how each is scored.
    pub accuracy: AccuracyPlan,
    /// This host's share of a sharded run (`--shard`, Slurm, an Indexed Job); `None` = the
    /// whole plan. `load_pattern` and `num_samples` are already this shard's.
    pub shard: Option<ShardPlan>,
    /// `--start-at` as Unix ns: the performance phase starts at that wall-clock instant.
    pub start_at_unix_ns: Option<u64>,
    /// An agentic run's conversations (`LoadPattern::Agentic`): `dataset` holds one row per
    /// turn of each instance, and `num_samples` is their count.
    pub agentic: Option<AgenticPlan>,
    /// `settings.profiling`: the server's profiler, triggered around the performance phase;
    /// `None` = no engine set.
    pub profiling: Option<ProfilingPlan>,
    /// An audit phase's one dataset row (`audit.sample_index`): `dataset` holds that row
    /// alone, and sample_idx_map.json names it by this index.
    pub audit_row: Option<u64>,
    /// `--slo` / `settings.slo`: the objectives each sample is judged against (goodput);
    /// empty = none.
    pub slo: Vec<loadgen_coordinator::metrics::Objective>,
}

impl Plan {
    /// The resolved plan in a few lines, for `-v`: what the defaults turned into.
    pub fn summary(&self) -> String {
        let pattern = match self.load_pattern {
            LoadPattern::Offline => "max_throughput".to_string(),
            LoadPattern::Poisson { target_qps, .. } => format!("poisson at {target_qps} qps"),
            LoadPattern::Concurrency { n } => format!("concurrency {n}"),
            LoadPattern::Agentic { n } => format!("agentic_inference, {n} conversations at once"),
        };
        let cap = self.max_duration_ms.map_or("none".to_string(), |ms| format!("{ms} ms"));
        let c = &self.connections;
        let warm = match (c.warmup_connections, self.load_pattern) {
            (Some(0), _) => "0: one per worker, the rest on demand".to_string(),
            (Some(n), _) => format!("{n}, the rest on demand"),
            (None, LoadPattern::Poisson { .. }) => format!(
                "auto: up to {POISSON_WARM_CONNECTIONS_PER_WORKER_MAX} per worker, the rest on demand"
            ),
            (None, _) => "auto: all".to_string(),
        };
        format!(
            "plan: mode {}, {pattern}, {} samples (max duration {cap}, drain {} ms), streaming {}\n\
             plan: {} workers, {} connections (warm-up connections {warm}, start timeout {} \
             ms), cpu affinity {}\n\
             plan: dataset {} ({} rows), token count source {}, report dir {}",
            self.accuracy.mode.as_str(),
            self.num_samples,
            self.drain_timeout_ms,
            if self.request.streaming { "on" } else { "off" },
            c.workers,
            c.max_connections,
            c.worker_init_timeout_ms,
            if c.cpu_affinity { "on" } else { "off" },
            self.dataset.name,
            self.dataset.rows.len(),
            self.token_count_source,
            self.report_dir.display(),
        ) + &shard_line(self.shard.as_ref(), self.start_at_unix_ns)
    }
}

/// Resolves a configuration (YAML and/or flags, already merged) into a validated plan:
/// checks every setting, loads the dataset and the tokenizer, sizes the run on `host`.
/// Prints nothing: what it has to say (notes, warnings, `-v` facts) goes into `notes` in
/// order, for the caller to print, also when a later step refuses the configuration.
pub fn resolve_plan(
    mut config: Config,
    verbose: u8,
    host: &Host,
    notes: &mut Vec<String>,
) -> Result<Plan, AppError> {
    prepare_config(&mut config, notes)?;
    let top_level_params = apply_generation_override(&mut config)?;
    notes.extend(check_reference_only(&config)?);
    let env = |k: &str| std::env::var(k).ok();
    let (shard, start_at_unix_ns) = resolve_shard(&config.shard, &env, host.unix_now_ns, notes)?;
    let load_pattern = sharded(resolve_load_pattern(&config)?, shard.as_ref())?;
    check_sample_counts(&config)?;
    let endpoints = parse_endpoints(&config)?;
    note_v1_suffix(&config, notes);
    let (authorization, headers) = resolve_auth(&mut config, &endpoints, notes)?;
    let tls_verify = resolve_tls(&config, &endpoints, notes)?;
    let request = resolve_request(&mut config, &endpoints)?;
    let api_name = config.endpoint_config.api_type;
    let token_count_source = resolve_token_source(&config, api_name, request.streaming, notes)?;
    check_extra_body_n(&request.extra, token_count_source)?;
    let (dataset, dataset_is_synthetic, agentic) =
        performance_dataset(&mut config, &request, (verbose, shard.as_ref()), notes)?;
    check_rows_n(&dataset, token_count_source)?;
    notes.extend(unsent_columns_note(&dataset, request.api));
    let tokenizer = resolve_tokenizer(&config, &request.model, verbose, notes)?;
    notes.extend(chat_template_note(api_name, &endpoints, &dataset, tokenizer.as_ref()));
    let (report_dir, report_dir_default) = record_resolved(&mut config, token_count_source, host);
    let connections = resolve_connections(&config, load_pattern, &endpoints, host)?;
    let token_pool = resolve_token_pool(&mut config, connections.workers, &host.cores)?;
    let perf_rows = (!dataset_is_synthetic).then_some(&dataset);
    let accuracy = resolve_accuracy(&config, perf_rows, &top_level_params, &request, notes)?;
    for d in &accuracy.datasets {
        check_rows_n(&d.dataset, token_count_source)?;
        check_extra_body_n(&d.request.extra, token_count_source)?;
    }
    let accuracy_only = accuracy.mode == TestMode::Acc;
    let (counted, plan_n) = performance_samples(&config, &dataset, agentic.as_ref(), accuracy_only);
    if let Some((s, _)) = &shard {
        check_shard_plan(*s, plan_n, shard_refusals(&config, &accuracy, endpoints.len()))?;
    }
    let warmup = if accuracy_only {
        accuracy_only_warmup(&config.settings.warmup)
    } else {
        resolve_warmup(&config, &dataset, notes)?
    };
    let config_yaml = config.to_redacted_yaml()?;
    let drain_timeout_ms =
        resolve_drain_timeout_ms(config.settings.drain.performance_timeout_s, "drain")?;
    let request_timeout_ns =
        agentic::turn_timeout(resolve_request_timeout(config.timeout)?, agentic.as_ref());
    let seeds = (config.settings.runtime.scheduler_random_seed, warmup.random_seed);
    let samples = (plan_n, warmup.samples);
    let shard = shard.map(|f| shard_plan(f, &config_yaml, samples, seeds, load_pattern));
    Ok(Plan {
        load_pattern,
        endpoints,
        authorization,
        headers,
        tls_verify,
        slo: slo::resolve_slo(config.settings.slo.as_deref(), request.streaming)?,
        request,
        row_output_tokens: draw_output_tokens(&config, dataset.rows.len())?,
        num_samples: shard_samples(counted.n, shard.as_ref(), agentic.is_some()),
        sample_count: counted,
        max_duration_ms: check_durations(&config.settings.runtime)?,
        drain_timeout_ms,
        token_pool,
        request_timeout_ns,
        connections,
        warmup,
        early_stopping: config.settings.early_stopping.enabled,
        report_dir,
        report_dir_default,
        events: config.events.unwrap_or(true),
        spill: SpillSettings::of(&config),
        token_count_source,
        scheduler_seed: config.settings.runtime.scheduler_random_seed,
        dataloader_seed: config.settings.runtime.dataloader_random_seed,
        legacy_loadgen_qps: legacy_qps(&config, load_pattern),
        verbose: verbose.max(u8::from(config.verbose)),
        dataset,
        dataset_is_synthetic,
        tokenizer,
        config_yaml,
        accuracy,
        shard,
        start_at_unix_ns,
        agentic,
        profiling: profiling::resolve_profiling(&config)?,
        audit_row: config.audit_row,
    })
}

/// Whether QPS uses the LoadGen window: Poisson runs that ask for it.
fn legacy_qps(config: &Config, load_pattern: LoadPattern) -> bool {
    matches!(load_pattern, LoadPattern::Poisson { .. })
        && config.settings.load_pattern.use_legacy_loadgen_qps_metrics
}

/// What comes before the settings are resolved: the secrets registered for redaction, the
/// refusals, a submission's rules and pinned seeds, the audit's ranges, and the mode's changes
/// to the configuration.
fn prepare_config(config: &mut Config, notes: &mut Vec<String>) -> Result<(), AppError> {
    register_secrets(&config.endpoint_config);
    refuse_unsupported(config)?;
    apply_submission(config, notes)?;
    check_audit(config)?;
    apply_accuracy_only(config);
    check_mode_datasets(config)
}

/// An accuracy-only run has no warm-up; its report still records the configured warm-up
/// settings (seed included), as the reference's `run_config` copies them from the config.
fn accuracy_only_warmup(w: &crate::yaml::WarmupConfig) -> Warmup {
    Warmup {
        requests: w.n_requests,
        drain: w.drain,
        random_seed: w.warmup_random_seed,
        salt: w.salt,
        ..Warmup::default()
    }
}

/// The performance samples this host issues of the plan's `n`: a shard's share, but an
/// agentic shard's dataset already holds only its conversations' turns, every one of which it
/// runs (`plan_samples` is then `AgenticPlan::plan_turns`).
fn shard_samples(n: u64, shard: Option<&ShardPlan>, agentic: bool) -> u64 {
    match shard {
        Some(sp) if !agentic => sample_share(n, sp.shard),
        _ => n,
    }
}

/// What a shard of this plan must not have: accuracy phases, no event log, several endpoints.
fn shard_refusals(config: &Config, accuracy: &AccuracyPlan, endpoints: usize) -> ShardRefusals {
    ShardRefusals {
        accuracy: accuracy.mode != TestMode::Perf,
        no_events: config.events == Some(false),
        endpoints,
    }
}

/// The performance dataset: an agentic run's conversations (one row per turn of each
/// instance), else the dataset as given (or the synthetic one); an accuracy-only run loads
/// none.
fn performance_dataset(
    config: &mut Config,
    request: &RequestOptions,
    (verbose, shard): (u8, Option<&ShardOrigin>),
    notes: &mut Vec<String>,
) -> Result<(Dataset, bool, Option<AgenticPlan>), AppError> {
    match agentic::agentic_spec(config) {
        Some((spec, settings)) if config.test_mode != Some(TestMode::Acc) => {
            let shard = shard.map(|(s, _)| (s.index, s.count));
            let (dataset, plan) = agentic::resolve_agentic(spec, settings, request, shard)?;
            agentic::check_agentic_run(config, notes)?;
            Ok((dataset, false, Some(plan)))
        }
        _ => {
            let (mut dataset, synthetic) = resolve_dataset(config, verbose, notes)?;
            keep_audit_row(&mut dataset, config.audit_row)?;
            Ok((dataset, synthetic, None))
        }
    }
}

/// The performance phase's samples of the whole plan (a shard issues its share): an agentic
/// run's every turn of every instance (the reference stops it by its trajectories, never by a
/// sample count). With them, the whole plan's samples: an agentic shard's dataset holds only
/// its own conversations' turns (`AgenticPlan::plan_turns` are all of them).
fn performance_samples(
    config: &Config,
    dataset: &Dataset,
    agentic: Option<&AgenticPlan>,
    acc_only: bool,
) -> (SampleCount, u64) {
    let rows = dataset.rows.len() as u64;
    if acc_only {
        return (SampleCount { n: 0, dataset_rows: rows, sizing: Sizing::AccuracyOnly }, 0);
    }
    if let Some(a) = agentic {
        let count = SampleCount { n: rows, dataset_rows: rows, sizing: Sizing::AllTurns };
        return (count, a.plan_turns);
    }
    let runtime = &config.settings.runtime;
    let count = sample_count(
        runtime.n_samples_to_issue,
        runtime.min_duration_ms,
        config.settings.load_pattern.target_qps,
        rows,
    );
    (count, count.n)
}

/// Writes the values resolved from defaults back into the config, so `config.yaml` shows
/// what the run used; returns the report directory (by default named for `local_timestamp`,
/// `YYYYMMDD_HHMMSS`).
fn record_resolved(config: &mut Config, source: TokenCountSource, host: &Host) -> (PathBuf, bool) {
    let local_timestamp = &host.local_timestamp;
    let report_dir_default = config.report_dir.is_none();
    let report_dir = match &config.report_dir {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(format!("/tmp/reports_{local_timestamp}")),
    };
    config.report_dir = Some(report_dir.display().to_string());
    config.settings.token_count_source = source;
    if config.name.is_none() {
        config.name = Some(format!("{}_benchmark", config.kind.as_str()));
    }
    (report_dir, report_dir_default)
}

/// `config.yaml`'s text with its top-level `report_dir: OLD` line naming `new` instead: the
/// directory the run took when the default name existed.
pub fn config_yaml_with_report_dir(yaml: &str, old: &Path, new: &Path) -> String {
    let from = format!("\nreport_dir: {}\n", old.display());
    let to = format!("\nreport_dir: {}\n", new.display());
    let text = format!("\n{yaml}");
    text.replacen(&from, &to, 1)[1..].to_string()
}

/// `resolve_plan` on this machine now, its notes dropped (tests).
#[cfg(test)]
pub(crate) fn resolve_here(config: Config, verbose: u8) -> Result<Plan, AppError> {
    let host = Host::read("20260101_120000".to_string());
    resolve_plan(config, verbose, &host, &mut Vec::new())
}
