//! The final snapshot: every counter and series of a run, under both token bases.
//!
//! [`final_snapshot`] turns the per-sample table into the `metrics/final_snapshot.json`
//! document. The primary basis keeps the reference's names and order; the other
//! basis follows, suffixed by [`basis_key`], then the counters the reference lacks.

use serde::ser::{SerializeMap, SerializeStruct};
use serde::{Serialize, Serializer};

use super::basis::{basis_key, TokenCountSource};
use super::column::Column;
use super::select::{float_column_stat, int_column_stat, spilled_int_stat};
use super::series::{Num, SeriesStat};
use super::table::{FinishKind, RunCounters, SampleTable};
use super::tokens::{client_tokens, server_tokens, OslPaired, TokenSeries, UsageTally};

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

/// Base names of the basis-dependent series, in the reference's order.
pub const ISL: &str = "isl";
/// Output sequence length series.
pub const OSL: &str = "osl";
/// Time per output token series.
pub const TPOT_NS: &str = "tpot_ns";
/// The gaps between consecutive content chunks (the reference's name; its ITL).
pub const CHUNK_DELTA_NS: &str = "chunk_delta_ns";
/// Content chunks per streamed sample (an addition).
pub const CHUNKS_PER_SAMPLE: &str = "chunks_per_sample";
/// Output tokens per content chunk, per basis (an addition).
pub const TOKENS_PER_CHUNK: &str = "tokens_per_chunk";
/// Streamed samples of two or more chunks that all came in one socket read (an addition).
pub const N_STREAMS_IN_ONE_READ: &str = "n_streams_in_one_read";
/// Streamed samples of two or more chunks (an addition; the base of the one-read count).
pub const N_STREAMS_MULTI_CHUNK: &str = "n_streams_multi_chunk";
/// Each written sample's wait inside the client between its issue stamp and its request's
/// write (an addition; `SampleRow::client_wait_ns`).
pub const CLIENT_WAIT_NS: &str = "client_wait_ns";
/// Latency measured from the request's write instead of the issue stamp (an addition).
pub const LATENCY_FROM_WRITE_NS: &str = "latency_from_write_ns";
/// TTFT measured from the request's write instead of the issue stamp (an addition).
pub const TTFT_FROM_WRITE_NS: &str = "ttft_from_write_ns";

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
    let client = client_tokens(table, opts.streaming, opts.has_tokenizer);
    let (server, usage, osl_paired) = server_tokens(table, opts.streaming);
    let (primary_tokens, other_tokens) = match opts.primary {
        TokenCountSource::Client => (client, server),
        TokenCountSource::Server => (server, client),
    };
    let other = opts.primary.other();
    let es = opts.early_stopping;

    let mut jobs = Vec::with_capacity(12);
    jobs.push(Job::ints("sample_latency_ns", latency_ns(table), es));
    let TokenSeries { isl, osl, tpot_ns, tokens_per_chunk } = primary_tokens;
    jobs.push(Job::ints(ISL, isl, false));
    jobs.push(Job::ints(OSL, osl, false));
    if opts.streaming {
        jobs.push(Job::ints("ttft_ns", ttft_ns(table), es));
        jobs.push(Job::table_ints(CHUNK_DELTA_NS, &table.chunk_delta_ns));
        jobs.push(Job::floats(TPOT_NS, tpot_ns, es));
    }
    let other_tpc = other_tokens.tokens_per_chunk;
    let TokenSeries { isl: isl_o, osl: osl_o, tpot_ns: tpot_o, .. } = other_tokens;
    let name = |base: &str| basis_key(base, other, opts.primary);
    jobs.push(Job::ints(&name(ISL), isl_o, false));
    jobs.push(Job::ints(&name(OSL), osl_o, false));
    if opts.streaming {
        jobs.push(Job::floats(&name(TPOT_NS), tpot_o, false));
        jobs.push(Job::ints(CHUNKS_PER_SAMPLE, chunks_per_sample(table), false));
        jobs.push(Job::floats(TOKENS_PER_CHUNK, tokens_per_chunk, false));
        jobs.push(Job::floats(&name(TOKENS_PER_CHUNK), other_tpc, false));
    }
    let (waits, latencies, ttfts) = from_write_ns(table);
    jobs.push(Job::ints(CLIENT_WAIT_NS, waits, false));
    jobs.push(Job::ints(LATENCY_FROM_WRITE_NS, latencies, false));
    if opts.streaming {
        jobs.push(Job::ints(TTFT_FROM_WRITE_NS, ttfts, false));
    }
    let series = run_jobs(jobs);

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

/// One series to compute: its name, raw values and whether it gets early stopping.
enum Job<'a> {
    Ints(String, Column<u64>, bool),
    /// Integer values the table holds (sorted, when in memory): read in place, never copied.
    TableInts(String, &'a Column<u64>),
    Floats(String, Column<f64>, bool),
}

impl<'a> Job<'a> {
    fn table_ints(name: &str, values: &'a Column<u64>) -> Job<'a> {
        Job::TableInts(name.to_string(), values)
    }

    fn ints(name: &str, values: Column<u64>, es: bool) -> Job<'a> {
        Job::Ints(name.to_string(), values, es)
    }

    fn floats(name: &str, values: Column<f64>, es: bool) -> Job<'a> {
        Job::Floats(name.to_string(), values, es)
    }

    fn run(self) -> SeriesStat {
        match self {
            Job::Ints(name, mut values, es) => int_column_stat(&name, &mut values, es),
            Job::TableInts(name, values) => match values.as_slice() {
                Some(v) if v.is_sorted() => SeriesStat::from_sorted_ints(&name, v, false),
                Some(v) => SeriesStat::from_ints(&name, &mut v.to_vec(), false),
                None => spilled_int_stat(&name, values, false),
            },
            Job::Floats(name, mut values, es) => float_column_stat(&name, &mut values, es),
        }
    }
}

/// Computes the series on up to one thread per core (the run is over, the cores are
/// idle), keeping the registration order.
fn run_jobs(jobs: Vec<Job<'_>>) -> Vec<SeriesStat> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(jobs.len());
    if threads <= 1 {
        return jobs.into_iter().map(Job::run).collect();
    }
    // Popped from the back, so the series start in registration order.
    let queue = std::sync::Mutex::new(jobs.into_iter().enumerate().rev().collect::<Vec<_>>());
    let mut done: Vec<(usize, SeriesStat)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                        let Some((index, job)) = next else { break };
                        out.push((index, job.run()));
                    }
                    out
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    done.sort_unstable_by_key(|(index, _)| *index);
    done.into_iter().map(|(_, stat)| stat).collect()
}

/// A new series column spilling as `table`'s do.
fn series_of(table: &SampleTable, name: &'static str) -> Column<u64> {
    Column::new(name, table.spill().cloned())
}

/// Each row's latency (complete − issued; a failure's is its time to error), in table order:
/// the `sample_latency_ns` series' values.
pub fn latency_ns(table: &SampleTable) -> Column<u64> {
    let mut out = series_of(table, "latency_ns");
    table.for_each_chunk(|t| {
        for (&issued, &end) in t.issued_ns.iter().zip(t.complete_ns) {
            out.push_spilling(end.saturating_sub(issued));
        }
    });
    out
}

/// The TTFT (first chunk − issued) of each row that got a first chunk, in table order: the
/// `ttft_ns` series' values.
pub fn ttft_ns(table: &SampleTable) -> Column<u64> {
    let mut out = series_of(table, "ttft_ns");
    table.for_each_chunk(|t| {
        for (&issued, &first) in t.issued_ns.iter().zip(t.first_chunk_ns) {
            if first != u64::MAX {
                out.push_spilling(first.saturating_sub(issued));
            }
        }
    });
    out
}

/// Of every sample whose request was written: its client wait, its latency from the write
/// and (streamed, with a first chunk) its TTFT from the write.
fn from_write_ns(table: &SampleTable) -> (Column<u64>, Column<u64>, Column<u64>) {
    let (mut waits, mut latencies) = (series_of(table, "wait"), series_of(table, "from_write"));
    let mut ttfts = series_of(table, "ttft_from_write");
    table.for_each_chunk(|t| {
        for (i, &wait) in t.client_wait_ns.iter().enumerate() {
            if wait == u64::MAX {
                continue;
            }
            let sent = t.issued_ns[i].saturating_add(wait);
            waits.push_spilling(wait);
            latencies.push_spilling(t.complete_ns[i].saturating_sub(sent));
            let first = t.first_chunk_ns[i];
            if first != u64::MAX {
                ttfts.push_spilling(first.saturating_sub(sent));
            }
        }
    });
    (waits, latencies, ttfts)
}

/// Each streamed sample's content chunk count (samples without a content chunk have none).
fn chunks_per_sample(table: &SampleTable) -> Column<u64> {
    let mut out = series_of(table, "chunks_per_sample");
    table.for_each_chunk(|t| {
        t.n_chunks.iter().filter(|&&n| n != u32::MAX).for_each(|&n| out.push_spilling(u64::from(n)))
    });
    out
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

mod load;

pub use load::{snapshot_from_json, SnapshotError};

#[cfg(test)]
mod tests;
