//! What the report says about a run besides its metrics (`RunInfo`): its settings, how it
//! ended, its failures and endpoints, and how its client basis was counted.

use loadgen_coordinator::aggregate::AggregatorOutput;
use loadgen_coordinator::metrics::snapshot::CLIENT_WAIT_NS;
use loadgen_coordinator::metrics::{Snapshot, TokenCountSource};
use loadgen_coordinator::LoadPattern;

use super::client_wait::{client_wait_warning, lag_is_the_wait};
use super::{ClientWaitInfo, IssueLag, ShardInfo};
use loadgen_plan::plan::Plan;
use loadgen_plan::redact::redact;

/// The run's load pattern, as `run_config.load_pattern` records it.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadPatternInfo {
    /// `max_throughput`, `poisson` or `concurrency`.
    pub kind: String,
    /// Poisson target rate.
    pub target_qps: Option<f64>,
    /// Closed-loop concurrency.
    pub target_concurrency: Option<u64>,
    /// Poisson runs only: whether QPS/TPS use the legacy LoadGen window.
    pub use_legacy_loadgen_qps_metrics: Option<bool>,
}

/// The warm-up settings, as `run_config.warmup` records them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarmupInfo {
    /// Warm-up requests were sent.
    pub enabled: bool,
    /// How many.
    pub n_requests: Option<u64>,
    /// Prompts were salted.
    pub salt: bool,
    /// The warm-up was drained before tracking.
    pub drain: bool,
    /// Seed of the warm-up sampler.
    pub warmup_random_seed: u64,
}

/// When the client basis was counted (`client_token_counting` in the summary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientTokenCounting {
    /// Tokenizer threads counted outputs while the run went on (the rest after it).
    Live { threads: usize },
    /// Every output was counted after the last sample, so counting never took CPU from the load.
    AfterRun,
    /// `report DIR` counted them from events.jsonl: the run's own files do not say how it
    /// counted (a log the reference wrote, or a run whose summary is gone).
    Rebuilt,
}

impl ClientTokenCounting {
    /// The summary's value: `live` or `after_run`.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientTokenCounting::Live { .. } => "live",
            ClientTokenCounting::AfterRun => "after_run",
            ClientTokenCounting::Rebuilt => "rebuild",
        }
    }
}

/// What the report says about the run besides its metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct RunInfo {
    /// `llm-loadgen` version.
    pub version: String,
    /// Git revision of the build, when known.
    pub git_sha: Option<String>,
    /// Load pattern settings.
    pub load_pattern: LoadPatternInfo,
    /// Warm-up settings.
    pub warmup: WarmupInfo,
    /// Scheduler seed.
    pub scheduler_random_seed: u64,
    /// Dataset order seed.
    pub dataloader_random_seed: u64,
    /// The headline token basis.
    pub token_count_source: TokenCountSource,
    /// The run used the built-in stub because no `--endpoints` was given.
    pub embedded_stub: bool,
    /// Ctrl-C or SIGTERM ended the run.
    pub interrupted: bool,
    /// Why the run's report is incomplete (drain timeout, dead worker, ...).
    pub incomplete_reason: Option<String>,
    /// Samples abandoned in flight.
    pub abandoned: u64,
    /// How far issue times lagged their schedule (Poisson runs only).
    pub issue_lag: Option<IssueLag>,
    /// The pool behind the run's client wait (`client_wait` in the summary): its ceiling and
    /// the most requests it had in flight; `None` when unknown.
    pub client_wait: Option<ClientWaitInfo>,
    /// Failed samples per failure kind, in first-seen order (tracked samples: the counts add up to `n_samples_failed`).
    pub failures: Vec<FailureKindCount>,
    /// Requests sent a second time (a reused keep-alive connection closed before any byte).
    pub requests_resent: u64,
    /// events.jsonl was written whole and holds `error` lines for failed samples, so the
    /// console may point there.
    pub events_has_errors: bool,
    /// When the client basis was counted; `None` without a client tokenizer.
    pub client_token_counting: Option<ClientTokenCounting>,
    /// Each endpoint's counts, in the run's endpoint order (`endpoints` in the summary).
    pub endpoints: Vec<EndpointInfo>,
    /// A merged report's shards, in shard order (`shards` in the summary); empty otherwise.
    pub shards: Vec<ShardInfo>,
    /// A rebuilt log's samples whose first chunk is stamped after their completion (a
    /// line of report.txt); `None` for a run's own report.
    pub mixed_clocks: Option<MixedClocks>,
    /// An agentic run's conversations and turns (`agentic` in the summary, report.txt's
    /// `Agentic` section): `agentic::agentic_of_run` for a run, the replay's labels in a
    /// rebuild; `None` for a run without conversations.
    pub agentic: Option<crate::agentic::AgenticSummary>,
    /// Server profiling's calls (`profiling.json`, report.txt's `Profiling` section); `None`
    /// when no engine was set.
    pub profiling: Option<crate::profiling::ProfilingRecord>,
    /// The run's goodput under its `--slo` objectives (`crate::goodput::goodput_of_run`):
    /// (primary basis, other basis), each `None` when that basis cannot judge them; `None`
    /// without objectives.
    pub goodput: Option<crate::goodput::GoodputPair>,
}

/// A log whose first-chunk stamps follow some completions (the reference stamps a completion in
/// another process than its first chunk): those samples' TPOT cannot be measured from the log,
/// so the rebuild leaves it out and says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MixedClocks {
    /// Samples whose first chunk is stamped after their completion.
    pub samples: u64,
    /// Successful samples with a first chunk.
    pub streamed: u64,
}

impl MixedClocks {
    /// The rebuild's account of them, for stderr and report.txt.
    pub fn sentence(&self) -> String {
        format!(
            "{} of {} streamed samples have their first chunk stamped after their completion \
             (the log was written with two clocks, as the reference writes it: it stamps a \
             completion in another process than its first chunk), so their TPOT cannot be \
             measured and is left out: TPOT, its early-stopping estimates and the TPOT picture \
             cover the other {}; TTFT and latency are unaffected",
            self.samples,
            self.streamed,
            self.streamed - self.samples
        )
    }
}

/// One endpoint's counts: `endpoints` in the summary; a line of report.txt's `Endpoints`
/// section (and of the console) when the run has two or more.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointInfo {
    /// The endpoint's URL, redacted (no userinfo).
    pub url: String,
    pub stat: loadgen_coordinator::metrics::EndpointStat,
}

/// Failed samples of one kind: `failure_kinds` in the summary, a line in report.txt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureKindCount {
    /// A `FailureKind` name (`timeout`, `http_status`, ...).
    pub kind: String,
    pub count: u64,
    /// The first failure's message, secrets redacted.
    pub first_message: String,
}

/// Why the run's report is incomplete, if it is.
pub fn incomplete_reason(
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
pub fn add_failures(info: &mut RunInfo, agg: &AggregatorOutput) {
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
    info.events_has_errors = agg.events.error().is_none()
        && agg.counters.tracked_samples_failed > 0
        && agg.failures.iter().any(|f| f.kind != "worker_died");
}

/// What the report says about a run of `plan` besides its metrics; the issue lag, client
/// wait, failures and endpoints are added as the run's end gives them.
pub fn run_info(
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
        LoadPattern::Agentic { n } => ("agentic_inference", None, Some(n), None),
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
        agentic: None,
        profiling: None,
        goodput: None,
    }
}

/// The run's warnings for stderr: the client wait's when it is material, then the schedule's
/// (issue lag) unless the wait explains it. A material client wait is also issue lag (which
/// ends at the write), and its own warning names the cause, so the schedule's is not given
/// twice.
pub fn run_warnings(snapshot: &Snapshot, info: &RunInfo) -> Vec<String> {
    let pool = info.client_wait.as_ref();
    let wait_warning = client_wait_warning(snapshot, &info.load_pattern.kind, pool);
    let wait = snapshot.series(CLIENT_WAIT_NS);
    let lag_warning = info.issue_lag.as_ref().and_then(|l| {
        let wait_p99_ns = wait.map(|w| w.percentiles[1]);
        let explained = wait_warning.is_some() && lag_is_the_wait(l.p99_ns, wait_p99_ns);
        l.warning().filter(|_| !explained)
    });
    wait_warning.into_iter().chain(lag_warning).collect()
}
