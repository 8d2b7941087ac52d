//! `performance/result_summary.json`: the reference's keys and order, then the token-basis
//! additions (`token_count_source`, missing-usage counters, `osl_paired`, the other basis).

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use loadgen_coordinator::metrics::snapshot::{
    CHUNKS_PER_SAMPLE, CHUNK_DELTA_NS, CLIENT_WAIT_NS, ISL, LATENCY_FROM_WRITE_NS,
    N_STREAMS_IN_ONE_READ, N_STREAMS_MULTI_CHUNK, OSL, TOKENS_PER_CHUNK, TPOT_NS,
    TTFT_FROM_WRITE_NS,
};
use loadgen_coordinator::metrics::{
    basis_key, FinishKind, OslPaired, RunState, SeriesStat, Snapshot, SummaryBlock,
    TokenCountSource, UsageTally,
};

use super::{LoadPatternInfo, RunInfo, WarmupInfo};

/// The token-dependent blocks of one basis.
#[derive(Debug, Clone, PartialEq)]
pub struct BasisBlocks {
    /// Which basis.
    pub basis: TokenCountSource,
    /// TPOT (streaming only).
    pub tpot: Option<SeriesStat>,
    /// Output sequence lengths.
    pub osl: Option<SeriesStat>,
    /// Input sequence lengths.
    pub isl: Option<SeriesStat>,
    /// Output tokens per second; `None` without OSL, or while the server basis is partial.
    pub tps: Option<f64>,
    /// Output tokens per content chunk (streaming only).
    pub tokens_per_chunk: Option<SeriesStat>,
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
    pub ttft: Option<SeriesStat>,
    /// Sample latency (basis-independent).
    pub latency: Option<SeriesStat>,
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
    /// Client − server OSL over samples with both.
    pub osl_paired: OslPaired,
    /// Why the run is incomplete, if it is.
    pub incomplete_reason: Option<String>,
    /// Samples abandoned in flight (max duration or interrupt).
    pub n_samples_abandoned: u64,
    /// Issue lag of a Poisson run.
    pub issue_lag: Option<super::IssueLag>,
    /// Requests re-sent once after a reused connection closed before any response byte.
    pub n_requests_resent: u64,
    /// Failed samples per kind, first-seen order.
    pub failure_kinds: Vec<super::FailureKindCount>,
    /// When the client basis was counted; `None` without a client tokenizer.
    pub client_token_counting: Option<super::ClientTokenCounting>,
    /// Each endpoint's counts, in the run's endpoint order.
    pub endpoints: Vec<super::EndpointInfo>,
    /// A merged report's shards (`llm-loadgen merge`); empty, and not written, otherwise.
    pub shards: Vec<super::ShardInfo>,
    /// Streaming only: the gaps between consecutive chunks (`chunk_delta_ns`), the chunks per
    /// sample, and how many streams of two or more chunks there were and came in one read.
    pub chunks: Option<ChunkBlocks>,
    /// The client's own wait (issue stamp → request written) and the latencies measured from
    /// the write, with the pool behind them and the warning when the wait is material.
    pub client_wait: ClientWaitBlocks,
}

/// The client wait in summary form (`client_wait`, `ttft_from_write`, `latency_from_write`,
/// `connection_pool`, `client_wait_warning`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientWaitBlocks {
    pub wait: Option<SeriesStat>,
    pub ttft_from_write: Option<SeriesStat>,
    pub latency_from_write: Option<SeriesStat>,
    pub pool: Option<super::ClientWaitInfo>,
    pub warning: Option<String>,
}

fn client_wait_blocks(snap: &Snapshot, info: &RunInfo) -> ClientWaitBlocks {
    ClientWaitBlocks {
        wait: non_empty(snap.series(CLIENT_WAIT_NS)),
        ttft_from_write: non_empty(snap.series(TTFT_FROM_WRITE_NS)),
        latency_from_write: non_empty(snap.series(LATENCY_FROM_WRITE_NS)),
        pool: info.client_wait,
        warning: super::client_wait_warning(snap, info),
    }
}

struct PoolBlock<'a>(&'a super::ClientWaitInfo);

impl Serialize for PoolBlock<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("max_connections", &self.0.max_connections)?;
        map.serialize_entry("max_connections_given", &self.0.pool_given)?;
        map.serialize_entry("peak_in_flight", &self.0.peak_in_flight)?;
        map.end()
    }
}

/// A streaming run's chunk timing, in summary form.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkBlocks {
    /// Gaps between consecutive content chunks, ns (ITL when a chunk is a token).
    pub itl: Option<SeriesStat>,
    /// Content chunks per streamed sample.
    pub chunks_per_sample: Option<SeriesStat>,
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

fn non_empty(stat: Option<&SeriesStat>) -> Option<SeriesStat> {
    stat.filter(|s| s.count > 0).cloned()
}

/// A series as the reference's summary shows it: with values, or empty but carrying early
/// stopping's all-null estimates (a streaming run's TPOT without a tokenizer), which the
/// reference writes as `{"early_stopping_percentiles": {…: null}}` and a section of N/A rows.
fn shown(stat: Option<&SeriesStat>) -> Option<SeriesStat> {
    stat.filter(|s| s.count > 0 || s.early_stopping.is_some()).cloned()
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
        osl_paired: snap.osl_paired,
        incomplete_reason,
        n_samples_abandoned: info.abandoned,
        issue_lag: info.issue_lag,
        n_requests_resent: info.requests_resent,
        failure_kinds: info.failures.clone(),
        client_token_counting: info.client_token_counting,
        endpoints: info.endpoints.clone(),
        shards: info.shards.clone(),
        chunks: chunk_blocks(snap),
        client_wait: client_wait_blocks(snap, info),
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

/// A series block in summary form: `{}` when absent under a reference key.
struct Block<'a> {
    stat: Option<&'a SeriesStat>,
    partial: bool,
}

impl<'a> Block<'a> {
    fn new(stat: Option<&'a SeriesStat>, partial: bool) -> Self {
        Block { stat, partial }
    }
}

impl Serialize for Block<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.stat {
            Some(stat) => SummaryBlock { stat, partial: self.partial }.serialize(serializer),
            None => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

/// A block of the other basis: `null` when absent.
fn other_block(stat: Option<&SeriesStat>, partial: bool) -> Option<SummaryBlock<'_>> {
    stat.map(|stat| SummaryBlock { stat, partial })
}

struct FinishCounts<'a>(&'a [u64; 6]);

impl Serialize for FinishCounts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(6))?;
        for (kind, n) in FinishKind::ALL.iter().zip(self.0) {
            map.serialize_entry(kind.as_str(), n)?;
        }
        map.end()
    }
}

struct RunConfig<'a>(&'a ResultSummary);

impl Serialize for LoadPatternInfo {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", &self.kind)?;
        map.serialize_entry("target_qps", &self.target_qps)?;
        map.serialize_entry("target_concurrency", &self.target_concurrency)?;
        if let Some(legacy) = self.use_legacy_loadgen_qps_metrics {
            map.serialize_entry("use_legacy_loadgen_qps_metrics", &legacy)?;
        }
        map.end()
    }
}

impl Serialize for WarmupInfo {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(5))?;
        map.serialize_entry("enabled", &self.enabled)?;
        map.serialize_entry("n_requests", &self.n_requests)?;
        map.serialize_entry("salt", &self.salt)?;
        map.serialize_entry("drain", &self.drain)?;
        map.serialize_entry("warmup_random_seed", &self.warmup_random_seed)?;
        map.end()
    }
}

impl Serialize for RunConfig<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("load_pattern", &self.0.load_pattern)?;
        map.serialize_entry("warmup", &self.0.warmup)?;
        map.serialize_entry("scheduler_random_seed", &self.0.scheduler_random_seed)?;
        map.serialize_entry("dataloader_random_seed", &self.0.dataloader_random_seed)?;
        map.end()
    }
}

struct PairedBlock<'a>(&'a OslPaired);

impl Serialize for PairedBlock<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("mean", &self.0.mean())?;
        map.serialize_entry("ratio", &self.0.ratio())?;
        map.serialize_entry("count", &self.0.count)?;
        map.end()
    }
}

/// `{"timeout": {"count": 3, "first_message": "..."}, ...}` in first-seen order.
struct FailureKinds<'a>(&'a [super::FailureKindCount]);

impl Serialize for FailureKinds<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Entry<'a>(&'a super::FailureKindCount);
        impl Serialize for Entry<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("count", &self.0.count)?;
                map.serialize_entry("first_message", &self.0.first_message)?;
                map.end()
            }
        }
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for f in self.0 {
            map.serialize_entry(&f.kind, &Entry(f))?;
        }
        map.end()
    }
}

/// `[{"url", "n_samples", "n_samples_failed", "failures": {kind: count}, "latency": {...}}]`:
/// the latency block has the shape of the summary's `latency` (`{}` for an endpoint that got
/// no sample), the failure kinds are those of `failure_kinds`, in wire order.
struct Endpoints<'a>(&'a [super::EndpointInfo]);

impl Serialize for Endpoints<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Failures<'a>(&'a loadgen_coordinator::metrics::EndpointStat);
        impl Serialize for Failures<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(None)?;
                for (kind, count) in self.0.failure_counts() {
                    map.serialize_entry(kind.as_str(), &count)?;
                }
                map.end()
            }
        }
        struct Entry<'a>(&'a super::EndpointInfo);
        impl Serialize for Entry<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let stat = &self.0.stat;
                let mut map = serializer.serialize_map(Some(5))?;
                map.serialize_entry("url", &self.0.url)?;
                map.serialize_entry("n_samples", &stat.n_samples)?;
                map.serialize_entry("n_samples_failed", &stat.n_samples_failed)?;
                map.serialize_entry("failures", &Failures(stat))?;
                map.serialize_entry("latency", &Block::new(stat.latency.as_ref(), false))?;
                map.end()
            }
        }
        serializer.collect_seq(self.0.iter().map(Entry))
    }
}

impl ResultSummary {
    fn serialize_additions<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        let primary = self.primary.basis;
        let other = &self.other;
        let key = |base: &str| basis_key(base, other.basis, primary);
        map.serialize_entry("token_count_source", &primary)?;
        map.serialize_entry("n_samples_missing_usage", &self.usage.missing_total())?;
        let empty_output = self.usage.missing_empty_output;
        map.serialize_entry("n_samples_missing_usage_empty_output", &empty_output)?;
        map.serialize_entry("client_token_tasks_pending", &self.client_token_tasks_pending)?;
        let paired = (self.osl_paired.count > 0).then_some(PairedBlock(&self.osl_paired));
        map.serialize_entry("osl_paired", &paired)?;
        map.serialize_entry(&key("tpot"), &other_block(other.tpot.as_ref(), other.partial))?;
        let osl = other_block(other.osl.as_ref(), other.partial);
        map.serialize_entry(&key("output_sequence_lengths"), &osl)?;
        let isl = other_block(other.isl.as_ref(), other.partial);
        map.serialize_entry(&key("input_sequence_lengths"), &isl)?;
        map.serialize_entry(&key("tps"), &other.tps)?;
        map.serialize_entry("n_samples_abandoned", &self.n_samples_abandoned)?;
        map.serialize_entry("issue_lag", &self.issue_lag)?;
        map.serialize_entry("n_requests_resent", &self.n_requests_resent)?;
        map.serialize_entry("failure_kinds", &FailureKinds(&self.failure_kinds))?;
        let counting = self.client_token_counting.map(super::ClientTokenCounting::as_str);
        map.serialize_entry("client_token_counting", &counting)?;
        map.serialize_entry("endpoints", &Endpoints(&self.endpoints))?;
        self.serialize_chunks(map)?;
        let w = &self.client_wait;
        map.serialize_entry("client_wait", &other_block(w.wait.as_ref(), false))?;
        map.serialize_entry("ttft_from_write", &other_block(w.ttft_from_write.as_ref(), false))?;
        let latency = other_block(w.latency_from_write.as_ref(), false);
        map.serialize_entry("latency_from_write", &latency)?;
        map.serialize_entry("connection_pool", &w.pool.as_ref().map(PoolBlock))?;
        map.serialize_entry("client_wait_warning", &w.warning)?;
        if !self.shards.is_empty() {
            map.serialize_entry("shards", &self.shards)?;
        }
        Ok(())
    }

    /// `itl`, `chunks_per_sample`, `tokens_per_chunk` on both bases and the one-read counts:
    /// blocks `null` when empty, everything `null` in a run that did not stream.
    fn serialize_chunks<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
        let c = self.chunks.as_ref();
        let block = other_block;
        map.serialize_entry("itl", &block(c.and_then(|c| c.itl.as_ref()), false))?;
        let per_sample = c.and_then(|c| c.chunks_per_sample.as_ref());
        map.serialize_entry("chunks_per_sample", &block(per_sample, false))?;
        let (p, o) = (&self.primary, &self.other);
        let tpc = block(p.tokens_per_chunk.as_ref(), p.partial);
        map.serialize_entry("tokens_per_chunk", &tpc)?;
        let tpc_other = block(o.tokens_per_chunk.as_ref(), o.partial);
        map.serialize_entry(&basis_key("tokens_per_chunk", o.basis, p.basis), &tpc_other)?;
        map.serialize_entry("n_streams_multi_chunk", &c.map(|c| c.n_streams_multi_chunk))?;
        map.serialize_entry("n_streams_in_one_read", &c.map(|c| c.n_streams_in_one_read))
    }
}

/// The reference's keys in its order, then the additions.
impl Serialize for ResultSummary {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let p = &self.primary;
        let mut m = serializer.serialize_map(None)?;
        m.serialize_entry("version", &self.version)?;
        m.serialize_entry("git_sha", &self.git_sha)?;
        m.serialize_entry("test_started_at", &0u64)?;
        m.serialize_entry("n_samples_issued", &self.n_samples_issued)?;
        m.serialize_entry("n_samples_completed", &self.n_samples_completed)?;
        m.serialize_entry("n_samples_failed", &self.n_samples_failed)?;
        m.serialize_entry("duration_ns", &self.duration_ns)?;
        m.serialize_entry("state", self.state)?;
        m.serialize_entry("complete", &self.complete)?;
        m.serialize_entry("ttft", &Block::new(self.ttft.as_ref(), false))?;
        m.serialize_entry("tpot", &Block::new(p.tpot.as_ref(), p.partial))?;
        m.serialize_entry("latency", &Block::new(self.latency.as_ref(), false))?;
        m.serialize_entry("output_sequence_lengths", &Block::new(p.osl.as_ref(), p.partial))?;
        m.serialize_entry("input_sequence_lengths", &Block::new(p.isl.as_ref(), p.partial))?;
        let legacy = &self.legacy_loadgen_window_duration_ns;
        m.serialize_entry("legacy_loadgen_window_duration_ns", legacy)?;
        m.serialize_entry("qps", &self.qps)?;
        m.serialize_entry("tps", &p.tps)?;
        m.serialize_entry("finish_reason_counts", &FinishCounts(&self.finish_reason_counts))?;
        m.serialize_entry("run_config", &RunConfig(self))?;
        self.serialize_additions(&mut m)?;
        m.end()
    }
}
