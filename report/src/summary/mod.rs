//! `performance/result_summary.json`: the reference's keys and order, then the token-basis
//! additions (`token_count_source`, missing-usage counters, `osl_paired`, the other basis).
//!
//! `ResultSummary` is the file: built from a run's final snapshot (`result_summary`), written
//! (`write`) and read back (`read`) by the run, `report DIR`, `merge`, `plot`,
//! `early-stopping` and perf's roofline alike. Its series are the file's blocks
//! (`series::SeriesSummary`), so a summary read back writes the same bytes.

mod agentic;
mod in_order;
mod read;
mod series;
mod write;

pub use series::SeriesSummary;

use loadgen_coordinator::metrics::snapshot::{
    CHUNKS_PER_SAMPLE, CHUNK_DELTA_NS, CLIENT_WAIT_NS, ISL, LATENCY_FROM_WRITE_NS,
    N_STREAMS_IN_ONE_READ, N_STREAMS_MULTI_CHUNK, OSL, TOKENS_PER_CHUNK, TPOT_NS,
    TTFT_FROM_WRITE_NS,
};
use loadgen_coordinator::metrics::{
    EndpointStat, FinishKind, OslPaired, RunState, SeriesStat, Snapshot, TokenCountSource,
    UsageTally,
};

use crate::agentic::AgenticSummary;
use crate::goodput::GoodputSummary;

use super::{
    ClientTokenCounting, ClientWaitInfo, FailureKindCount, IssueLag, LoadPatternInfo, RunInfo,
    ShardInfo, WarmupInfo,
};

/// The token-dependent blocks of one basis.
#[derive(Debug, Clone, PartialEq)]
pub struct BasisBlocks {
    /// Which basis.
    pub basis: TokenCountSource,
    /// TPOT (streaming only).
    pub tpot: Option<SeriesSummary>,
    /// Output sequence lengths.
    pub osl: Option<SeriesSummary>,
    /// Input sequence lengths.
    pub isl: Option<SeriesSummary>,
    /// Output tokens per second; `None` without OSL, or while the server basis is partial.
    pub tps: Option<f64>,
    /// Output tokens per content chunk (streaming only).
    pub tokens_per_chunk: Option<SeriesSummary>,
    /// Some samples lacked server usage.
    pub partial: bool,
}

/// The performance summary of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSummary {
    /// `llm-loadgen` version.
    pub version: String,
    /// Git revision, when known.
    pub git_sha: Option<String>,
    /// Tracked samples issued.
    pub n_samples_issued: u64,
    /// Tracked samples completed (failures included).
    pub n_samples_completed: u64,
    /// Tracked samples failed.
    pub n_samples_failed: u64,
    /// Start of tracking → last tracked completion, `None` when zero.
    pub duration_ns: Option<u64>,
    /// `complete` or `interrupted`.
    pub state: &'static str,
    /// Complete state, nothing pending, no incompleteness reason.
    pub complete: bool,
    /// Time to first token (basis-independent).
    pub ttft: Option<SeriesSummary>,
    /// Sample latency (basis-independent).
    pub latency: Option<SeriesSummary>,
    /// The primary basis (unsuffixed keys).
    pub primary: BasisBlocks,
    /// The other basis (`*_<basis>` keys).
    pub other: BasisBlocks,
    /// The legacy window, when QPS/TPS used it.
    pub legacy_loadgen_window_duration_ns: Option<u64>,
    /// Queries per second.
    pub qps: Option<f64>,
    /// Tracked finish reasons, in [`FinishKind::ALL`] order.
    pub finish_reason_counts: [u64; 6],
    /// Load pattern settings.
    pub load_pattern: LoadPatternInfo,
    /// Warm-up settings.
    pub warmup: WarmupInfo,
    /// Scheduler seed.
    pub scheduler_random_seed: u64,
    /// Dataset order seed.
    pub dataloader_random_seed: u64,
    /// Server usage classification of the successful samples.
    pub usage: UsageTally,
    /// Client tokenizations still pending at the end.
    pub client_token_tasks_pending: u64,
    /// Client − server OSL over samples with both; `None` when no sample has both.
    pub osl_paired: Option<PairedOsl>,
    /// Why the run is incomplete, if it is (report.txt's reason: not a key of the summary).
    pub incomplete_reason: Option<String>,
    /// Samples abandoned in flight (max duration or interrupt).
    pub n_samples_abandoned: u64,
    /// Issue lag of a Poisson run.
    pub issue_lag: Option<IssueLag>,
    /// Requests re-sent once after a reused connection closed before any response byte.
    pub n_requests_resent: u64,
    /// Failed samples per kind, first-seen order.
    pub failure_kinds: Vec<FailureKindCount>,
    /// When the client basis was counted; `None` without a client tokenizer.
    pub client_token_counting: Option<ClientTokenCounting>,
    /// Each endpoint's counts, in the run's endpoint order.
    pub endpoints: Vec<EndpointSummary>,
    /// A merged report's shards (`llm-loadgen merge`); empty, and not written, otherwise.
    pub shards: Vec<ShardInfo>,
    /// Streaming only: the gaps between consecutive chunks (`chunk_delta_ns`), the chunks per
    /// sample, and how many streams of two or more chunks there were and came in one read.
    pub chunks: Option<ChunkBlocks>,
    /// The client's own wait (issue stamp → request written) and the latencies measured from
    /// the write, with the pool behind them and the warning when the wait is material.
    pub client_wait: ClientWaitBlocks,
    /// Read back from a file without our additions (no `token_count_source`): a summary the
    /// reference wrote, whose additions are unknown rather than empty. Not written.
    pub reference_only: bool,
    /// An agentic run's conversations and turns (`agentic`, the last key); `None`, and not
    /// written, for a run without conversations.
    pub agentic: Option<AgenticSummary>,
    /// Under `--slo`: goodput on the primary basis (`goodput`) and on the other
    /// (`goodput_<other>`, `None` when that basis cannot judge the objectives); both `None`,
    /// and not written, without objectives.
    pub goodput: Option<(Option<GoodputSummary>, Option<GoodputSummary>)>,
}

/// `osl_paired`: the mean per-sample client − server OSL, Σ client / Σ server (`None` when the
/// server total is 0), over the samples with both counts.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PairedOsl {
    pub mean: Option<f64>,
    pub ratio: Option<f64>,
    pub count: u64,
}

impl PairedOsl {
    /// The summary form of the run's pairs; `None` without any.
    fn of(paired: &OslPaired) -> Option<PairedOsl> {
        (paired.count > 0).then(|| PairedOsl {
            mean: paired.mean(),
            ratio: paired.ratio(),
            count: paired.count,
        })
    }
}

/// One endpoint's counts in summary form (`endpoints[]`): its failures by kind in wire order,
/// and its latency, `None` when it got no sample.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointSummary {
    pub url: String,
    pub n_samples: u64,
    pub n_samples_failed: u64,
    pub failures: Vec<(String, u64)>,
    pub latency: Option<SeriesSummary>,
}

impl EndpointSummary {
    fn of(url: &str, stat: &EndpointStat) -> EndpointSummary {
        EndpointSummary {
            url: url.to_string(),
            n_samples: stat.n_samples,
            n_samples_failed: stat.n_samples_failed,
            failures: stat.failure_counts().map(|(k, n)| (k.as_str().to_string(), n)).collect(),
            latency: stat.latency.as_ref().map(SeriesSummary::from),
        }
    }
}

/// The client wait in summary form (`client_wait`, `ttft_from_write`, `latency_from_write`,
/// `connection_pool`, `client_wait_warning`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientWaitBlocks {
    pub wait: Option<SeriesSummary>,
    pub ttft_from_write: Option<SeriesSummary>,
    pub latency_from_write: Option<SeriesSummary>,
    pub pool: Option<ClientWaitInfo>,
    pub warning: Option<String>,
}

fn client_wait_blocks(snap: &Snapshot, info: &RunInfo) -> ClientWaitBlocks {
    ClientWaitBlocks {
        wait: non_empty(snap.series(CLIENT_WAIT_NS)),
        ttft_from_write: non_empty(snap.series(TTFT_FROM_WRITE_NS)),
        latency_from_write: non_empty(snap.series(LATENCY_FROM_WRITE_NS)),
        pool: info.client_wait,
        warning: super::client_wait_warning(
            snap,
            &info.load_pattern.kind,
            info.client_wait.as_ref(),
        ),
    }
}

/// A streaming run's chunk timing, in summary form.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkBlocks {
    /// Gaps between consecutive content chunks, ns (ITL when a chunk is a token).
    pub itl: Option<SeriesSummary>,
    /// Content chunks per streamed sample.
    pub chunks_per_sample: Option<SeriesSummary>,
    /// Streamed samples of two or more chunks.
    pub n_streams_multi_chunk: u64,
    /// Those of them whose chunks all came in one socket read.
    pub n_streams_in_one_read: u64,
}

impl ChunkBlocks {
    /// Most multi-chunk streams came in one read: the server (or a proxy) sent whole streams at
    /// once, so TTFT ≈ latency and the gaps say nothing of its token pacing.
    pub fn mostly_one_read(&self) -> bool {
        self.n_streams_multi_chunk > 0
            && self.n_streams_in_one_read * 2 > self.n_streams_multi_chunk
    }
}

fn chunk_blocks(snap: &Snapshot) -> Option<ChunkBlocks> {
    snap.options.streaming.then(|| ChunkBlocks {
        itl: non_empty(snap.series(CHUNK_DELTA_NS)),
        chunks_per_sample: non_empty(snap.series(CHUNKS_PER_SAMPLE)),
        n_streams_multi_chunk: as_u64(snap.counter(N_STREAMS_MULTI_CHUNK)),
        n_streams_in_one_read: as_u64(snap.counter(N_STREAMS_IN_ONE_READ)),
    })
}

fn non_empty(stat: Option<&SeriesStat>) -> Option<SeriesSummary> {
    stat.filter(|s| s.count > 0).map(SeriesSummary::from)
}

/// A series as the reference's summary shows it: with values, or empty but carrying early
/// stopping's all-null estimates (a streaming run's TPOT without a tokenizer), which the
/// reference writes as `{"early_stopping_percentiles": {…: null}}` and a section of N/A rows.
fn shown(stat: Option<&SeriesStat>) -> Option<SeriesSummary> {
    stat.filter(|s| s.count > 0 || s.early_stopping.is_some()).map(SeriesSummary::from)
}

fn as_u64(v: i128) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The window (seconds) QPS and TPS are computed over, and the legacy window if used.
/// The run config decides (as the reference's report does); the snapshot's option is the
/// fallback for a config that does not say.
fn throughput_window(
    snap: &Snapshot,
    info: &RunInfo,
    n_completed: u64,
    duration_ns: Option<u64>,
) -> Option<(f64, Option<u64>)> {
    let legacy_ns = as_u64(snap.counter("legacy_loadgen_window_duration_ns"));
    let use_legacy =
        info.load_pattern.use_legacy_loadgen_qps_metrics.unwrap_or(snap.options.legacy_loadgen_qps);
    if use_legacy && legacy_ns > 0 && n_completed >= 2 {
        return Some((legacy_ns as f64 / 1e9, Some(legacy_ns)));
    }
    duration_ns.map(|ns| (ns as f64 / 1e9, None))
}

fn basis_blocks(snap: &Snapshot, basis: TokenCountSource, window_s: Option<f64>) -> BasisBlocks {
    let partial = basis == TokenCountSource::Server && snap.usage.is_partial();
    let osl = non_empty(snap.basis_series(OSL, basis));
    let tps = match (&osl, window_s) {
        (Some(osl), Some(window_s)) if !partial => Some(osl.total.as_f64() / window_s),
        _ => None,
    };
    BasisBlocks {
        basis,
        tpot: shown(snap.basis_series(TPOT_NS, basis)),
        osl,
        isl: non_empty(snap.basis_series(ISL, basis)),
        tps,
        tokens_per_chunk: non_empty(snap.basis_series(TOKENS_PER_CHUNK, basis)),
        partial,
    }
}

/// Builds the summary of a run from its final snapshot.
pub fn result_summary(snap: &Snapshot, info: &RunInfo) -> ResultSummary {
    let tracked = as_u64(snap.counter("tracked_duration_ns"));
    let duration_ns = (tracked > 0).then_some(tracked);
    let n_completed = as_u64(snap.counter("tracked_samples_completed"));
    let window = throughput_window(snap, info, n_completed, duration_ns);
    let window_s = window.map(|(s, _)| s);
    let qps = window.map(|(window_s, legacy)| match legacy {
        Some(_) => (n_completed - 1) as f64 / window_s,
        None => n_completed as f64 / window_s,
    });
    let interrupted = info.interrupted || snap.state == RunState::Interrupted;
    let state = if interrupted { "interrupted" } else { "complete" };
    let mut incomplete_reason = info.incomplete_reason.clone();
    if incomplete_reason.is_none() && snap.n_pending_tasks > 0 {
        incomplete_reason = Some(format!(
            "{} client tokenizations were still pending when the run ended",
            snap.n_pending_tasks
        ));
    }
    if incomplete_reason.is_none() && snap.primary() == TokenCountSource::Server {
        incomplete_reason = server_usage_problem(snap.usage);
    }
    if incomplete_reason.is_none() && snap.state == RunState::Incomplete {
        incomplete_reason = Some("the run ended before every sample was accounted for".into());
    }
    let mut finish_reason_counts = [0u64; 6];
    for (slot, kind) in finish_reason_counts.iter_mut().zip(FinishKind::ALL) {
        *slot = as_u64(snap.counter(&format!("tracked_finish_reason_{}", kind.as_str())));
    }
    ResultSummary {
        version: info.version.clone(),
        git_sha: info.git_sha.clone(),
        n_samples_issued: as_u64(snap.counter("tracked_samples_issued")),
        n_samples_completed: n_completed,
        n_samples_failed: as_u64(snap.counter("tracked_samples_failed")),
        duration_ns,
        state,
        complete: !interrupted && incomplete_reason.is_none(),
        ttft: shown(snap.series("ttft_ns")),
        latency: shown(snap.series("sample_latency_ns")),
        primary: basis_blocks(snap, snap.primary(), window_s),
        other: basis_blocks(snap, snap.primary().other(), window_s),
        legacy_loadgen_window_duration_ns: window.and_then(|(_, legacy)| legacy),
        qps,
        finish_reason_counts,
        load_pattern: info.load_pattern.clone(),
        warmup: info.warmup.clone(),
        scheduler_random_seed: info.scheduler_random_seed,
        dataloader_random_seed: info.dataloader_random_seed,
        usage: snap.usage,
        client_token_tasks_pending: snap.n_pending_tasks,
        osl_paired: PairedOsl::of(&snap.osl_paired),
        incomplete_reason,
        n_samples_abandoned: info.abandoned,
        issue_lag: info.issue_lag,
        n_requests_resent: info.requests_resent,
        failure_kinds: info.failures.clone(),
        client_token_counting: info.client_token_counting,
        endpoints: info.endpoints.iter().map(|e| EndpointSummary::of(&e.url, &e.stat)).collect(),
        shards: info.shards.clone(),
        chunks: chunk_blocks(snap),
        client_wait: client_wait_blocks(snap, info),
        reference_only: false,
        agentic: info.agentic.clone(),
        goodput: info.goodput.as_ref().map(|(primary, other)| {
            let of = |g: &Option<_>| g.as_ref().map(|g| GoodputSummary::of(g, duration_ns));
            (of(primary), of(other))
        }),
    }
}

/// Why the server basis cannot be the headline: no usable usage, or some samples with
/// output lacked it.
fn server_usage_problem(usage: UsageTally) -> Option<String> {
    let successful = usage.usable + usage.missing_total();
    if successful == 0 {
        return None;
    }
    if usage.usable == 0 {
        return Some(format!(
            "none of the {successful} successful samples carried usable server usage under \
             --token-count-source server (does the endpoint honour \
             stream_options.include_usage? --token-count-source client reports client counts)"
        ));
    }
    (usage.missing > 0).then(|| {
        format!(
            "{} of {} successful samples with output carried no usable server usage under \
             --token-count-source server",
            usage.missing,
            usage.usable + usage.missing
        )
    })
}

/// Whether the run's report is complete under its primary basis, and why not (exit 4).
///
/// The server basis's usage decides completeness only under a server primary; that
/// reason is folded into `incomplete_reason` by [`result_summary`].
/// `_primary` is the summary's own primary basis (kept so callers state it).
pub fn is_complete(summary: &ResultSummary, _primary: TokenCountSource) -> Result<(), String> {
    if let Some(reason) = &summary.incomplete_reason {
        return Err(format!("report is incomplete: {reason}"));
    }
    if summary.state == "interrupted" {
        return Err("report is incomplete: the run was interrupted".into());
    }
    if summary.n_samples_completed == 0 {
        return Err("nothing was measured: no sample completed".into());
    }
    if summary.n_samples_failed >= summary.n_samples_completed {
        return Err(format!(
            "nothing was measured: all {} samples failed",
            summary.n_samples_completed
        ));
    }
    Ok(())
}
