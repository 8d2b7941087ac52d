//! Writing `ResultSummary` as result_summary.json: the reference's keys in its order, then
//! the additions.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

use loadgen_coordinator::metrics::{basis_key, FinishKind};

use super::series::{Block, SeriesSummary};
use super::{EndpointSummary, ResultSummary};
use crate::{ClientTokenCounting, FailureKindCount, LoadPatternInfo, WarmupInfo};

/// A series block under a reference key: `{}` when absent.
struct Shown<'a>(Option<Block<'a>>);

impl<'a> Shown<'a> {
    fn new(series: Option<&'a SeriesSummary>, partial: bool) -> Self {
        Shown(series.map(|series| Block { series, partial }))
    }
}

impl Serialize for Shown<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Some(block) => block.serialize(serializer),
            None => serializer.serialize_map(Some(0))?.end(),
        }
    }
}

/// A block of the other basis (and of the additions): `null` when absent.
fn other_block(series: Option<&SeriesSummary>, partial: bool) -> Option<Block<'_>> {
    series.map(|series| Block { series, partial })
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

/// `{"timeout": {"count": 3, "first_message": "..."}, ...}` in first-seen order.
struct FailureKinds<'a>(&'a [FailureKindCount]);

impl Serialize for FailureKinds<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Entry<'a>(&'a FailureKindCount);
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
struct Endpoints<'a>(&'a [EndpointSummary]);

impl Serialize for Endpoints<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Failures<'a>(&'a [(String, u64)]);
        impl Serialize for Failures<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_map(self.0.iter().map(|(kind, count)| (kind, count)))
            }
        }
        struct Entry<'a>(&'a EndpointSummary);
        impl Serialize for Entry<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let e = self.0;
                let mut map = serializer.serialize_map(Some(5))?;
                map.serialize_entry("url", &e.url)?;
                map.serialize_entry("n_samples", &e.n_samples)?;
                map.serialize_entry("n_samples_failed", &e.n_samples_failed)?;
                map.serialize_entry("failures", &Failures(&e.failures))?;
                map.serialize_entry("latency", &Shown::new(e.latency.as_ref(), false))?;
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
        map.serialize_entry("osl_paired", &self.osl_paired)?;
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
        let counting = self.client_token_counting.map(ClientTokenCounting::as_str);
        map.serialize_entry("client_token_counting", &counting)?;
        map.serialize_entry("endpoints", &Endpoints(&self.endpoints))?;
        self.serialize_chunks(map)?;
        let w = &self.client_wait;
        map.serialize_entry("client_wait", &other_block(w.wait.as_ref(), false))?;
        map.serialize_entry("ttft_from_write", &other_block(w.ttft_from_write.as_ref(), false))?;
        let latency = other_block(w.latency_from_write.as_ref(), false);
        map.serialize_entry("latency_from_write", &latency)?;
        map.serialize_entry("connection_pool", &w.pool)?;
        map.serialize_entry("client_wait_warning", &w.warning)?;
        if !self.shards.is_empty() {
            map.serialize_entry("shards", &self.shards)?;
        }
        if let Some(agentic) = &self.agentic {
            let json = super::agentic::AgenticJson { agentic, primary };
            map.serialize_entry("agentic", &json)?;
        }
        if let Some((primary_goodput, other_goodput)) = &self.goodput {
            map.serialize_entry("goodput", primary_goodput)?;
            map.serialize_entry(&key("goodput"), other_goodput)?;
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
        m.serialize_entry("ttft", &Shown::new(self.ttft.as_ref(), false))?;
        m.serialize_entry("tpot", &Shown::new(p.tpot.as_ref(), p.partial))?;
        m.serialize_entry("latency", &Shown::new(self.latency.as_ref(), false))?;
        m.serialize_entry("output_sequence_lengths", &Shown::new(p.osl.as_ref(), p.partial))?;
        m.serialize_entry("input_sequence_lengths", &Shown::new(p.isl.as_ref(), p.partial))?;
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
