//! The snapshot's series, computed in groups: each group walks the table once for its values
//! (the token series of one basis together, the from-write series together), takes their
//! statistics and drops their columns before the next group starts on that thread. So a run
//! whose rows are in files holds at most one group's series per thread on disk, not all of them;
//! the groups run on one thread per core (the run is over, the cores are idle).

use super::super::basis::{basis_key, TokenCountSource};
use super::super::column::Column;
use super::super::select::{float_column_stat, int_column_stat, spilled_int_stat};
use super::super::series::SeriesStat;
use super::super::table::SampleTable;
use super::super::tokens::{client_tokens, server_tokens, TokenSeries};

/// What the series depend on: streaming, early stopping, the headline basis, a tokenizer.
#[derive(Debug, Clone, Copy)]
pub(super) struct SeriesOptions {
    streaming: bool,
    early_stopping: bool,
    primary: TokenCountSource,
    has_tokenizer: bool,
}

impl From<(bool, bool, TokenCountSource, bool)> for SeriesOptions {
    fn from(
        (streaming, early_stopping, primary, has_tokenizer): (bool, bool, TokenCountSource, bool),
    ) -> Self {
        SeriesOptions { streaming, early_stopping, primary, has_tokenizer }
    }
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
/// Each written sample's wait inside the client between its issue stamp and its request's
/// write (an addition; `SampleRow::client_wait_ns`).
pub const CLIENT_WAIT_NS: &str = "client_wait_ns";
/// Latency measured from the request's write instead of the issue stamp (an addition).
pub const LATENCY_FROM_WRITE_NS: &str = "latency_from_write_ns";
/// TTFT measured from the request's write instead of the issue stamp (an addition).
pub const TTFT_FROM_WRITE_NS: &str = "ttft_from_write_ns";

/// A new series column spilling as `table`'s do.
fn series_of(table: &SampleTable, name: &'static str) -> Column<u64> {
    table.series_column(name)
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

/// One group: its series' statistics, named.
type Group<'a> = Box<dyn FnOnce() -> Vec<SeriesStat> + Send + 'a>;

/// The registration order of the series (the reference's, then the additions).
fn names(opts: &SeriesOptions) -> Vec<String> {
    let name = |base: &str| basis_key(base, opts.primary.other(), opts.primary);
    let mut names = vec!["sample_latency_ns".to_string(), ISL.into(), OSL.into()];
    if opts.streaming {
        names.extend(["ttft_ns".into(), CHUNK_DELTA_NS.into(), TPOT_NS.into()]);
    }
    names.extend([name(ISL), name(OSL)]);
    if opts.streaming {
        names.extend([name(TPOT_NS), CHUNKS_PER_SAMPLE.into(), TOKENS_PER_CHUNK.into()]);
        names.push(name(TOKENS_PER_CHUNK));
    }
    names.extend([CLIENT_WAIT_NS.into(), LATENCY_FROM_WRITE_NS.into()]);
    if opts.streaming {
        names.push(TTFT_FROM_WRITE_NS.into());
    }
    names
}

/// Every series of the snapshot, in registration order.
pub(super) fn series(table: &SampleTable, opts: impl Into<SeriesOptions>) -> Vec<SeriesStat> {
    let opts = &opts.into();
    let es = opts.early_stopping;
    let streaming = opts.streaming;
    let mut groups: Vec<Group<'_>> = Vec::new();
    groups.push(Box::new(move || {
        vec![int_column_stat("sample_latency_ns", &mut latency_ns(table), es)]
    }));
    for basis in [opts.primary, opts.primary.other()] {
        groups.push(Box::new(move || token_group(table, basis, opts)));
    }
    if streaming {
        groups.push(Box::new(move || vec![int_column_stat("ttft_ns", &mut ttft_ns(table), es)]));
        groups.push(Box::new(move || vec![table_ints(CHUNK_DELTA_NS, table.chunk_delta_ns())]));
        groups.push(Box::new(move || {
            vec![int_column_stat(CHUNKS_PER_SAMPLE, &mut chunks_per_sample(table), false)]
        }));
    }
    groups.push(Box::new(move || {
        let (mut waits, mut latencies, mut ttfts) = from_write_ns(table);
        let mut out = vec![
            int_column_stat(CLIENT_WAIT_NS, &mut waits, false),
            int_column_stat(LATENCY_FROM_WRITE_NS, &mut latencies, false),
        ];
        if streaming {
            out.push(int_column_stat(TTFT_FROM_WRITE_NS, &mut ttfts, false));
        }
        out
    }));
    let mut stats: Vec<SeriesStat> = run_groups(groups).into_iter().flatten().collect();
    let order = names(opts);
    stats.sort_by_key(|s| order.iter().position(|n| *n == s.name).unwrap_or(usize::MAX));
    stats
}

/// One basis's ISL, OSL and (streaming) TPOT and tokens per chunk, under their names.
fn token_group(
    table: &SampleTable,
    basis: TokenCountSource,
    opts: &SeriesOptions,
) -> Vec<SeriesStat> {
    let TokenSeries { mut isl, mut osl, mut tpot_ns, mut tokens_per_chunk } = match basis {
        TokenCountSource::Client => client_tokens(table, opts.streaming, opts.has_tokenizer),
        TokenCountSource::Server => server_tokens(table, opts.streaming).0,
    };
    let name = |base: &str| basis_key(base, basis, opts.primary);
    // Early stopping on the headline basis's TPOT only, as the reference has one TPOT.
    let es = opts.early_stopping && basis == opts.primary;
    let mut out = vec![
        int_column_stat(&name(ISL), &mut isl, false),
        int_column_stat(&name(OSL), &mut osl, false),
    ];
    if opts.streaming {
        out.push(float_column_stat(&name(TPOT_NS), &mut tpot_ns, es));
        out.push(float_column_stat(&name(TOKENS_PER_CHUNK), &mut tokens_per_chunk, false));
    }
    out
}

/// A column the table holds (sorted, when in memory): read in place, never copied.
fn table_ints(name: &str, values: &Column<u64>) -> SeriesStat {
    match values.as_slice() {
        Some(v) if v.is_sorted() => SeriesStat::from_sorted_ints(name, v, false),
        Some(v) => SeriesStat::from_ints(name, &mut v.to_vec(), false),
        None => spilled_int_stat(name, values, false),
    }
}

/// Runs the groups on up to one thread per core, keeping their order.
fn run_groups(groups: Vec<Group<'_>>) -> Vec<Vec<SeriesStat>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(groups.len());
    if threads <= 1 {
        return groups.into_iter().map(|g| g()).collect();
    }
    // Popped from the back, so the groups start in registration order.
    let queue = std::sync::Mutex::new(groups.into_iter().enumerate().rev().collect::<Vec<_>>());
    let mut done: Vec<(usize, Vec<SeriesStat>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop();
                        let Some((index, group)) = next else { break };
                        out.push((index, group()));
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
    done.into_iter().map(|(_, stats)| stats).collect()
}
