//! The final snapshot: every counter and series of a run, under both token bases.
//!
//! [`final_snapshot`] turns the per-sample table into the `metrics/final_snapshot.json`
//! document. The primary basis keeps the reference's names and order; the other
//! basis follows, suffixed by [`basis_key`], then the counters the reference lacks.

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use super::basis::{basis_key, TokenCountSource};
use super::series::{Num, SeriesStat};
use super::table::{FinishKind, RunCounters, SampleTable};
use super::tokens::{server_usage, OslPaired, UsageTally};

/// How the run ended, for the snapshot's `state` and the report's completeness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Every issued sample was accounted for.
    Complete,
    /// Ctrl-C or SIGTERM stopped the run.
    Interrupted,
    /// The run ended without a full account (drain timeout, dead worker).
    Incomplete,
}

impl RunState {
    /// The snapshot's `state` string (the reference knows only these two terminal states;
    /// an incomplete run is `complete` with a reason kept beside it).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Interrupted => "interrupted",
            RunState::Complete | RunState::Incomplete => "complete",
        }
    }
}

/// What the metrics depend on besides the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsOptions {
    /// Streaming run: register TTFT, chunk delta and TPOT.
    pub streaming: bool,
    /// Early-stopping estimates on the primary TTFT, TPOT and latency.
    pub early_stopping: bool,
    /// The headline basis.
    pub primary: TokenCountSource,
    /// Poisson runs: QPS/TPS over the legacy LoadGen window.
    pub legacy_loadgen_qps: bool,
    /// A client tokenizer was loaded (without one the client series stay empty).
    pub has_tokenizer: bool,
}

/// One counter of the snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterStat {
    /// The counter name.
    pub name: String,
    /// Its value.
    pub value: Num,
}

/// The final snapshot of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// How the run ended.
    pub state: RunState,
    /// Client tokenizations not recorded (`n_pending_tasks`).
    pub n_pending_tasks: u64,
    /// The aggregator's clock at the last event (the snapshot's `timestamp_ns`).
    pub timestamp_ns: u64,
    /// The options the snapshot was computed with.
    pub options: MetricsOptions,
    /// Counters in file order.
    pub counters: Vec<CounterStat>,
    /// Series in file order.
    pub series: Vec<SeriesStat>,
    /// Server usage classification of the successful samples.
    pub usage: UsageTally,
    /// Per-sample client − server OSL over samples with both.
    pub osl_paired: OslPaired,
}

/// Streamed samples of two or more chunks that all came in one socket read (an addition).
pub const N_STREAMS_IN_ONE_READ: &str = "n_streams_in_one_read";
/// Streamed samples of two or more chunks (an addition; the base of the one-read count).
pub const N_STREAMS_MULTI_CHUNK: &str = "n_streams_multi_chunk";

impl Snapshot {
    /// The series called `name`, if registered.
    pub fn series(&self, name: &str) -> Option<&SeriesStat> {
        self.series.iter().find(|s| s.name == name)
    }

    /// The series `base` on `basis` (named by the naming rule).
    pub fn basis_series(&self, base: &str, basis: TokenCountSource) -> Option<&SeriesStat> {
        self.series(&basis_key(base, basis, self.options.primary))
    }

    /// The counter called `name` as an integer, 0 when absent.
    pub fn counter(&self, name: &str) -> i128 {
        self.counters.iter().find(|c| c.name == name).map_or(0, |c| match c.value {
            Num::Int(v) => v,
            Num::Float(v) => v as i128,
        })
    }

    /// The primary basis.
    pub fn primary(&self) -> TokenCountSource {
        self.options.primary
    }
}

fn counter(name: impl Into<String>, value: impl Into<i128>) -> CounterStat {
    CounterStat { name: name.into(), value: Num::Int(value.into()) }
}

/// Builds the final snapshot from the table of tracked samples.
pub fn final_snapshot(
    table: &SampleTable,
    counters: &RunCounters,
    opts: &MetricsOptions,
    state: RunState,
) -> Snapshot {
    let (usage, osl_paired) = server_usage(table);
    let series = jobs::series(
        table,
        (opts.streaming, opts.early_stopping, opts.primary, opts.has_tokenizer),
    );

    let mut list = reference_counters(table, counters);
    list.extend(added_counters(counters, &usage, &osl_paired, opts.primary));
    if opts.streaming {
        let (multi_chunk, one_read) = streams_in_one_read(table);
        list.push(counter(N_STREAMS_MULTI_CHUNK, multi_chunk));
        list.push(counter(N_STREAMS_IN_ONE_READ, one_read));
    }
    Snapshot {
        state,
        n_pending_tasks: counters.client_token_tasks_pending,
        timestamp_ns: counters.last_event_ns,
        options: *opts,
        counters: list,
        series,
        usage,
        osl_paired,
    }
}

/// Samples of two or more chunks, and those of them whose chunks all came in one socket read:
/// a server that sends a whole stream at once (TTFT ≈ latency, TPOT ≈ 0).
pub fn streams_in_one_read(table: &SampleTable) -> (u64, u64) {
    let mut counts = (0, 0);
    table.for_each_chunk(|t| {
        for (&n, &reads) in t.n_chunks.iter().zip(t.chunk_reads) {
            if n != u32::MAX && n >= 2 {
                counts.0 += 1;
                counts.1 += u64::from(reads == 1);
            }
        }
    });
    counts
}

/// The reference's counters, in its registration order.
fn reference_counters(table: &SampleTable, c: &RunCounters) -> Vec<CounterStat> {
    let mut list = vec![
        counter("total_samples_issued", c.total_samples_issued),
        counter("total_samples_completed", c.total_samples_completed),
        counter("total_samples_failed", c.total_samples_failed),
        counter("tracked_samples_issued", c.tracked_samples_issued),
        counter("tracked_samples_completed", c.tracked_samples_completed),
        counter("tracked_samples_failed", c.tracked_samples_failed),
    ];
    let mut finish = [0u64; 6];
    let mut last_complete = None;
    table.for_each_chunk(|t| {
        for &code in t.finish {
            if let Some(slot) = finish.get_mut(usize::from(code)) {
                *slot += 1;
            }
        }
        last_complete = t.complete_ns.iter().copied().chain(last_complete).max();
    });
    for (kind, n) in FinishKind::ALL.iter().zip(finish) {
        list.push(counter(format!("tracked_finish_reason_{}", kind.as_str()), n));
    }
    let tracked = last_complete.map_or(0, |end| end.saturating_sub(c.tracking_start_ns));
    list.push(counter("tracked_duration_ns", tracked));
    list.push(counter("legacy_loadgen_window_duration_ns", legacy_window_ns(table)));
    // The reference's counter: session start → its last event, `session.ended` included.
    let total = c.last_event_ns.max(c.session_end_ns).saturating_sub(c.session_start_ns);
    list.push(counter("total_duration_ns", total));
    list
}

/// First tracked issue → completion of the sample issued last (MLPerf LoadGen's window).
fn legacy_window_ns(table: &SampleTable) -> u64 {
    let mut first_issued = None;
    let mut last = (0u64, 0u64);
    table.for_each_chunk(|t| {
        for (&issued, &end) in t.issued_ns.iter().zip(t.complete_ns) {
            first_issued = Some(first_issued.map_or(issued, |f: u64| f.min(issued)));
            if issued >= last.0 {
                last = (issued, end);
            }
        }
    });
    first_issued.map_or(0, |first| last.1.saturating_sub(first))
}

fn added_counters(
    c: &RunCounters,
    usage: &UsageTally,
    paired: &OslPaired,
    primary: TokenCountSource,
) -> Vec<CounterStat> {
    vec![
        counter("n_samples_with_usage", usage.usable),
        counter("n_samples_missing_usage", usage.missing_total()),
        counter("n_samples_missing_usage_empty_output", usage.missing_empty_output),
        counter("osl_paired_count", paired.count),
        counter("osl_paired_client_total", paired.client_total),
        counter("osl_paired_server_total", paired.server_total),
        counter("client_token_tasks_pending", c.client_token_tasks_pending),
        counter(basis_key("n_errors", TokenCountSource::Client, primary), c.n_tokenizer_errors),
    ]
}

struct Metrics<'a>(&'a Snapshot);

impl Serialize for Metrics<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let snap = self.0;
        let n_reference = reference_counter_count();
        let mut seq = serializer.serialize_seq(Some(snap.counters.len() + snap.series.len()))?;
        for c in &snap.counters[..n_reference.min(snap.counters.len())] {
            seq.serialize_element(c)?;
        }
        for s in &snap.series {
            seq.serialize_element(s)?;
        }
        for c in snap.counters.iter().skip(n_reference) {
            seq.serialize_element(c)?;
        }
        seq.end()
    }
}

fn reference_counter_count() -> usize {
    6 + FinishKind::ALL.len() + 3
}

impl Serialize for CounterStat {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        map.serialize_entry("type", "counter")?;
        map.serialize_entry("name", &self.name)?;
        map.serialize_entry("value", &self.value)?;
        map.end()
    }
}

/// `metrics/final_snapshot.json`: the reference's document, then `token_count_source`.
impl Serialize for Snapshot {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Snapshot", 6)?;
        s.serialize_field("counter", &1u64)?;
        s.serialize_field("timestamp_ns", &self.timestamp_ns)?;
        s.serialize_field("state", self.state.as_str())?;
        s.serialize_field("n_pending_tasks", &self.n_pending_tasks)?;
        s.serialize_field("metrics", &Metrics(self))?;
        s.serialize_field("token_count_source", &self.options.primary)?;
        s.end()
    }
}

mod jobs;
mod load;

pub use jobs::{
    latency_ns, ttft_ns, CHUNKS_PER_SAMPLE, CHUNK_DELTA_NS, CLIENT_WAIT_NS, ISL,
    LATENCY_FROM_WRITE_NS, OSL, TOKENS_PER_CHUNK, TPOT_NS, TTFT_FROM_WRITE_NS,
};

pub use load::{snapshot_from_json, SnapshotError};

#[cfg(test)]
mod tests;
