//! Report files of a finished run: `report.txt`, `performance/result_summary.json`,
//! `metrics/final_snapshot.json`, and the short summary printed on stdout.
#![allow(
    dead_code,
    unused_imports,
    reason = "the run command wires these in; until then only tests call them"
)]

pub mod accuracy;
mod client_wait;
pub mod dir;
mod shard;
mod summary;
mod text;
mod write;

#[cfg(test)]
mod tests;

pub use client_wait::{
    client_wait_warning, lag_is_the_wait, peak_in_flight, wait_is_material, ClientWaitInfo,
};
pub use dir::{open_existing, read_existing, ReportDir};
pub use loadgen_coordinator::metrics::{Snapshot, TokenCountSource};
pub use shard::{
    late_start_warning, shard_file, write_shard_file, FailureCounts, SampleIds, ShardClock,
    ShardFile, ShardInfo, ShardSeeds, SHARD_FILE_FORMAT,
};
pub use summary::{is_complete, result_summary, BasisBlocks, ChunkBlocks, ResultSummary};
pub use text::{console_summary, report_txt, with_accuracy_block};
pub use write::{write_atomic, write_atomic_with, write_report_files, OpenDir, Unwritten};

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

/// The scheduler's own account of an open-loop run: did the client keep its schedule?
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct IssueLag {
    /// Samples measured.
    pub n: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// The requested rate.
    pub target_qps: f64,
    /// Samples issued over the issuing window (first scheduled → last issued).
    pub achieved_qps: f64,
}

impl IssueLag {
    /// Lag p99 below which no schedule is called missed, however fast the rate.
    pub const P99_WARN_NS: u64 = 1_000_000;

    /// Why the schedule was not kept, when it was not: the issue lag, not the achieved rate,
    /// decides. A Poisson schedule's own rate wanders around its target (1,000 samples at any
    /// rate draw within about ±6% of it, two sigma), so a rate below or above the target says
    /// nothing of the client. A p99 lag of more than one mean gap (`1 / target_qps`), and of
    /// at least `P99_WARN_NS`, means samples left later than the next one was due: the
    /// arrivals the server saw bunched, and the client set them.
    pub fn warning(&self) -> Option<String> {
        let mean_gap_ns = if self.target_qps > 0.0 { 1e9 / self.target_qps } else { 0.0 };
        let limit_ns = (Self::P99_WARN_NS as f64).max(mean_gap_ns);
        if (self.p99_ns as f64) <= limit_ns {
            return None;
        }
        Some(format!(
            "the client could not keep up with the schedule: issue lag p99 {:.3} ms (max {:.3} \
             ms) is more than the {:.3} ms between samples at {:.2} QPS, so arrivals bunched \
             (issued {:.2} QPS); the numbers describe the client's limit, not the server's — \
             add --workers or lower --target-qps",
            self.p99_ns as f64 / 1e6,
            self.max_ns as f64 / 1e6,
            mean_gap_ns / 1e6,
            self.target_qps,
            self.achieved_qps,
        ))
    }
}

#[cfg(test)]
mod issue_lag_tests {
    use super::IssueLag;

    fn lag(target_qps: f64, achieved_qps: f64, p99_ms: f64) -> IssueLag {
        let p99_ns = (p99_ms * 1e6) as u64;
        IssueLag {
            n: 1000,
            p50_ns: p99_ns / 4,
            p99_ns,
            max_ns: p99_ns * 2,
            target_qps,
            achieved_qps,
        }
    }

    #[test]
    fn the_warning_follows_the_lag_not_the_achieved_rate() {
        // A Poisson draw below or above its target, issued on time: no warning.
        assert_eq!(lag(10.0, 9.48, 4.3).warning(), None, "4 ms late between 100 ms gaps");
        assert_eq!(lag(5.0, 5.29, 0.2).warning(), None, "above the target is not behind");
        assert_eq!(lag(50_000.0, 50_100.0, 0.5).warning(), None, "below the 1 ms floor");
        // Later than a whole gap: the client bunched the arrivals.
        let slow = lag(10.0, 9.9, 150.0).warning().expect("150 ms late between 100 ms gaps");
        assert!(slow.contains("p99 150.000 ms") && slow.contains("100.000 ms between"), "{slow}");
        assert!(lag(50_000.0, 41_000.0, 3.0).warning().is_some(), "3 ms late at 20 us gaps");
        assert!(lag(1_000.0, 1_000.0, 1.5).warning().is_some(), "past both the floor and a gap");
    }
}
