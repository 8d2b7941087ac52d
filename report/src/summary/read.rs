//! Reading result_summary.json back into a `ResultSummary`: ours, an older one of ours, or one
//! the reference wrote. Every key may be absent (the reference's summary has none of the
//! additions, an older one lacks the later keys): an absent key reads as its empty value, and
//! `reference_only` says when the additions are missing altogether. What the file does not
//! hold reads back empty: `incomplete_reason` (report.txt gives it), `usage.usable`, and the
//! thread count of live counting (report.txt names it). A summary read back writes the same
//! bytes.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

use loadgen_coordinator::metrics::{FinishKind, TokenCountSource, UsageTally};

use super::in_order::InOrder;
use super::series::{ReadBlock, SeriesSummary};
use super::{BasisBlocks, ChunkBlocks, ClientWaitBlocks, EndpointSummary, ResultSummary};
use crate::{ClientTokenCounting, FailureCounts, FailureKindCount, LoadPatternInfo, WarmupInfo};

/// The bases of the basis-dependent keys: bare (the primary), then `_client` and `_server`.
const BASIS_KEYS: [&str; 5] =
    ["tpot", "output_sequence_lengths", "input_sequence_lengths", "tps", "tokens_per_chunk"];

impl<'de> Deserialize<'de> for ResultSummary {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(SummaryVisitor)
    }
}

struct SummaryVisitor;

impl<'de> Visitor<'de> for SummaryVisitor {
    type Value = ResultSummary;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a result summary")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ResultSummary, A::Error> {
        let mut keys = Keys::default();
        while let Some(key) = map.next_key::<String>()? {
            if !keys.reference_key(&key, &mut map)?
                && !keys.addition_key(&key, &mut map)?
                && !keys.basis_key(&key, &mut map)?
            {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(keys.finish())
    }
}

/// The basis-dependent blocks under one spelling of their keys.
#[derive(Default)]
struct BasisKeys {
    tpot: Option<SeriesSummary>,
    osl: Option<SeriesSummary>,
    isl: Option<SeriesSummary>,
    tps: Option<f64>,
    tokens_per_chunk: Option<SeriesSummary>,
    partial: bool,
}

impl BasisKeys {
    fn into_blocks(self, basis: TokenCountSource) -> BasisBlocks {
        BasisBlocks {
            basis,
            tpot: self.tpot,
            osl: self.osl,
            isl: self.isl,
            tps: self.tps,
            tokens_per_chunk: self.tokens_per_chunk,
            partial: self.partial,
        }
    }
}

/// What the file holds, key by key, before the blocks are put under their bases.
struct Keys {
    summary: ResultSummary,
    /// Bare, `_client`, `_server`.
    bases: [BasisKeys; 3],
    basis: Option<TokenCountSource>,
    n_samples_missing_usage: u64,
    itl: Option<SeriesSummary>,
    chunks_per_sample: Option<SeriesSummary>,
    n_streams_multi_chunk: Option<u64>,
    n_streams_in_one_read: Option<u64>,
}

impl Default for Keys {
    fn default() -> Keys {
        Keys {
            summary: empty_summary(),
            bases: Default::default(),
            basis: None,
            n_samples_missing_usage: 0,
            itl: None,
            chunks_per_sample: None,
            n_streams_multi_chunk: None,
            n_streams_in_one_read: None,
        }
    }
}

/// A summary of nothing: what every key the file lacks reads as.
fn empty_summary() -> ResultSummary {
    let blocks = |basis| BasisKeys::default().into_blocks(basis);
    ResultSummary {
        version: String::new(),
        git_sha: None,
        n_samples_issued: 0,
        n_samples_completed: 0,
        n_samples_failed: 0,
        duration_ns: None,
        state: "complete",
        complete: true,
        ttft: None,
        latency: None,
        primary: blocks(TokenCountSource::Client),
        other: blocks(TokenCountSource::Server),
        legacy_loadgen_window_duration_ns: None,
        qps: None,
        finish_reason_counts: [0; 6],
        load_pattern: LoadPattern::default().into(),
        warmup: Warmup::default().into(),
        scheduler_random_seed: 0,
        dataloader_random_seed: 0,
        usage: UsageTally::default(),
        client_token_tasks_pending: 0,
        osl_paired: None,
        incomplete_reason: None,
        n_samples_abandoned: 0,
        issue_lag: None,
        n_requests_resent: 0,
        failure_kinds: Vec::new(),
        client_token_counting: None,
        endpoints: Vec::new(),
        shards: Vec::new(),
        chunks: None,
        client_wait: ClientWaitBlocks::default(),
        reference_only: true,
        agentic: None,
        goodput: None,
    }
}

impl Keys {
    /// The reference's own keys (those that depend on the basis aside); `false` when `key` is
    /// not one.
    fn reference_key<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        let s = &mut self.summary;
        match key {
            "version" => s.version = map.next_value()?,
            "git_sha" => s.git_sha = map.next_value()?,
            "n_samples_issued" => s.n_samples_issued = map.next_value()?,
            "n_samples_completed" => s.n_samples_completed = map.next_value()?,
            "n_samples_failed" => s.n_samples_failed = map.next_value()?,
            "duration_ns" => s.duration_ns = map.next_value()?,
            "state" => {
                let state: String = map.next_value()?;
                s.state = if state == "interrupted" { "interrupted" } else { "complete" };
            }
            "complete" => s.complete = map.next_value()?,
            "ttft" => s.ttft = map.next_value::<ReadBlock>()?.series,
            "latency" => s.latency = map.next_value::<ReadBlock>()?.series,
            "legacy_loadgen_window_duration_ns" => {
                s.legacy_loadgen_window_duration_ns = map.next_value()?;
            }
            "qps" => s.qps = map.next_value()?,
            "finish_reason_counts" => {
                for (kind, n) in map.next_value::<InOrder<u64>>()?.0 {
                    let at = FinishKind::ALL.iter().position(|k| k.as_str() == kind);
                    if let Some(slot) = at.and_then(|i| s.finish_reason_counts.get_mut(i)) {
                        *slot = n;
                    }
                }
            }
            "run_config" => {
                let config: RunConfig = map.next_value()?;
                s.load_pattern = config.load_pattern.into();
                s.warmup = config.warmup.into();
                s.scheduler_random_seed = config.scheduler_random_seed;
                s.dataloader_random_seed = config.dataloader_random_seed;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Our additions after the reference's keys; `false` when `key` is not one.
    fn addition_key<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        let s = &mut self.summary;
        let block = |map: &mut A| map.next_value::<Option<ReadBlock>>();
        match key {
            "token_count_source" => self.basis = Some(map.next_value::<Basis>()?.0),
            "n_samples_missing_usage" => self.n_samples_missing_usage = map.next_value()?,
            "n_samples_missing_usage_empty_output" => {
                s.usage.missing_empty_output = map.next_value()?;
            }
            "client_token_tasks_pending" => s.client_token_tasks_pending = map.next_value()?,
            "osl_paired" => s.osl_paired = map.next_value()?,
            "n_samples_abandoned" => s.n_samples_abandoned = map.next_value()?,
            "issue_lag" => s.issue_lag = map.next_value()?,
            "n_requests_resent" => s.n_requests_resent = map.next_value()?,
            "failure_kinds" => s.failure_kinds = failure_kinds(map.next_value()?),
            "client_token_counting" => {
                s.client_token_counting = counting(map.next_value::<Option<String>>()?);
            }
            "endpoints" => {
                let endpoints: Vec<EndpointKeys> = map.next_value()?;
                s.endpoints = endpoints.into_iter().map(EndpointKeys::into_summary).collect();
            }
            "itl" => self.itl = block(map)?.and_then(|b| b.series),
            "chunks_per_sample" => self.chunks_per_sample = block(map)?.and_then(|b| b.series),
            "n_streams_multi_chunk" => self.n_streams_multi_chunk = map.next_value()?,
            "n_streams_in_one_read" => self.n_streams_in_one_read = map.next_value()?,
            "client_wait" => s.client_wait.wait = block(map)?.and_then(|b| b.series),
            "ttft_from_write" => {
                s.client_wait.ttft_from_write = block(map)?.and_then(|b| b.series);
            }
            "latency_from_write" => {
                s.client_wait.latency_from_write = block(map)?.and_then(|b| b.series);
            }
            "connection_pool" => s.client_wait.pool = map.next_value()?,
            "client_wait_warning" => s.client_wait.warning = map.next_value()?,
            "shards" => s.shards = map.next_value()?,
            "agentic" => s.agentic = map.next_value::<super::agentic::ReadAgentic>()?.0,
            "goodput" => s.goodput.get_or_insert((None, None)).0 = map.next_value()?,
            "goodput_client" | "goodput_server" => {
                s.goodput.get_or_insert((None, None)).1 = map.next_value()?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A basis-dependent key (`tpot`, `tpot_server`, …); `false` when `key` is not one.
    fn basis_key<'de, A: MapAccess<'de>>(
        &mut self,
        key: &str,
        map: &mut A,
    ) -> Result<bool, A::Error> {
        let suffixed = [("_client", 1), ("_server", 2)]
            .into_iter()
            .find_map(|(suffix, slot)| key.strip_suffix(suffix).map(|base| (base, slot)))
            .filter(|(base, _)| BASIS_KEYS.contains(base));
        let Some((base, slot)) = suffixed.or(BASIS_KEYS.contains(&key).then_some((key, 0))) else {
            return Ok(false);
        };
        let keys = &mut self.bases[slot];
        if base == "tps" {
            keys.tps = map.next_value()?;
            return Ok(true);
        }
        let block = map.next_value::<Option<ReadBlock>>()?.unwrap_or_default();
        keys.partial |= block.partial;
        let series = block.series;
        match base {
            "tpot" => keys.tpot = series,
            "output_sequence_lengths" => keys.osl = series,
            "input_sequence_lengths" => keys.isl = series,
            _ => keys.tokens_per_chunk = series,
        }
        Ok(true)
    }

    /// The summary, its blocks under their bases.
    fn finish(self) -> ResultSummary {
        let mut s = self.summary;
        let primary = self.basis.unwrap_or(TokenCountSource::Client);
        let other = primary.other();
        let [bare, client, server] = self.bases;
        let other_keys = if other == TokenCountSource::Client { client } else { server };
        s.primary = bare.into_blocks(primary);
        s.other = other_keys.into_blocks(other);
        s.reference_only = self.basis.is_none();
        s.usage.missing = self.n_samples_missing_usage.saturating_sub(s.usage.missing_empty_output);
        s.chunks = self.n_streams_multi_chunk.map(|multi| ChunkBlocks {
            itl: self.itl,
            chunks_per_sample: self.chunks_per_sample,
            n_streams_multi_chunk: multi,
            n_streams_in_one_read: self.n_streams_in_one_read.unwrap_or(0),
        });
        s
    }
}

/// `token_count_source`: `client` or `server`, else the file is refused by name.
struct Basis(TokenCountSource);

impl<'de> Deserialize<'de> for Basis {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Option::<String>::deserialize(d)?.unwrap_or_default();
        text.parse().map(Basis).map_err(|_| {
            de::Error::custom(format!(
                "token_count_source {text:?} is neither client nor server; pass \
                 --token-count-source client|server"
            ))
        })
    }
}

/// `client_token_counting`: live counting's threads are not in the summary (report.txt
/// names them), so they read back as 0.
fn counting(value: Option<String>) -> Option<ClientTokenCounting> {
    match value.as_deref() {
        Some("live") => Some(ClientTokenCounting::Live { threads: 0 }),
        Some("after_run") => Some(ClientTokenCounting::AfterRun),
        Some("rebuild") => Some(ClientTokenCounting::Rebuilt),
        _ => None,
    }
}

#[derive(Deserialize)]
struct KindKeys {
    #[serde(default)]
    count: u64,
    #[serde(default)]
    first_message: String,
}

fn failure_kinds(kinds: InOrder<KindKeys>) -> Vec<FailureKindCount> {
    kinds
        .0
        .into_iter()
        .map(|(kind, k)| FailureKindCount { kind, count: k.count, first_message: k.first_message })
        .collect()
}

/// `endpoints[]`, each key optional.
#[derive(Deserialize)]
struct EndpointKeys {
    #[serde(default)]
    url: String,
    #[serde(default)]
    n_samples: u64,
    #[serde(default)]
    n_samples_failed: u64,
    #[serde(default)]
    failures: InOrder<u64>,
    #[serde(default)]
    latency: ReadBlock,
}

impl EndpointKeys {
    fn into_summary(self) -> EndpointSummary {
        EndpointSummary {
            url: self.url,
            n_samples: self.n_samples,
            n_samples_failed: self.n_samples_failed,
            failures: self.failures.0,
            latency: self.latency.series,
        }
    }
}

/// `run_config`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct RunConfig {
    load_pattern: LoadPattern,
    warmup: Warmup,
    scheduler_random_seed: u64,
    dataloader_random_seed: u64,
}

/// `run_config.load_pattern`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct LoadPattern {
    #[serde(rename = "type")]
    kind: String,
    target_qps: Option<f64>,
    target_concurrency: Option<u64>,
    use_legacy_loadgen_qps_metrics: Option<bool>,
}

impl From<LoadPattern> for LoadPatternInfo {
    fn from(p: LoadPattern) -> LoadPatternInfo {
        LoadPatternInfo {
            kind: p.kind,
            target_qps: p.target_qps,
            target_concurrency: p.target_concurrency,
            use_legacy_loadgen_qps_metrics: p.use_legacy_loadgen_qps_metrics,
        }
    }
}

/// `run_config.warmup`.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Warmup {
    enabled: bool,
    n_requests: Option<u64>,
    salt: bool,
    drain: bool,
    warmup_random_seed: u64,
}

impl From<Warmup> for WarmupInfo {
    fn from(w: Warmup) -> WarmupInfo {
        WarmupInfo {
            enabled: w.enabled,
            n_requests: w.n_requests,
            salt: w.salt,
            drain: w.drain,
            warmup_random_seed: w.warmup_random_seed,
        }
    }
}

/// A shard's `failure_kinds` in the `shards` section (shard.rs writes it).
impl<'de> Deserialize<'de> for FailureCounts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        InOrder::<u64>::deserialize(d).map(|kinds| FailureCounts(kinds.0))
    }
}
