//! A deterministic synthetic sample table, for tests, golden files and timing.

use loadgen_py::xorshift::Xorshift64Star as Rng;

use std::sync::Arc;

use super::column::{Column, Spill};
use super::table::{FinishKind, RunCounters, SampleRow, SampleTable};

/// Parameters of [`synthetic_table`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixtureSpec {
    /// Rows to generate.
    pub samples: usize,
    /// Seed of the generator (xorshift64*).
    pub seed: u64,
    /// Every n-th sample fails (0: none).
    pub fail_every: usize,
    /// Every n-th successful sample lacks server usage (0: none).
    pub missing_usage_every: usize,
    /// The server counts output tokens this much lower than the client (reasoning).
    pub server_osl_deficit: u32,
}

impl Default for FixtureSpec {
    fn default() -> Self {
        FixtureSpec {
            samples: 200,
            seed: 42,
            fail_every: 0,
            missing_usage_every: 0,
            server_osl_deficit: 0,
        }
    }
}

/// One synthetic row: streaming timestamps a few ms apart, counts of 20–120 tokens.
fn synthetic_row(i: usize, rng: &mut Rng, spec: &FixtureSpec) -> SampleRow {
    let issued_ns = 1_000_000_000 + i as u64 * 50_000 + rng.below(10_000);
    let ttft_ns = 2_000_000 + rng.below(40_000_000);
    let osl = 20 + rng.below(100) as u32;
    let decode_ns = u64::from(osl) * (100_000 + rng.below(50_000));
    let isl = 30 + rng.below(60) as u32;
    let failed = spec.fail_every != 0 && i % spec.fail_every == spec.fail_every - 1;
    if failed {
        return SampleRow {
            issued_ns,
            first_chunk_ns: None,
            complete_ns: issued_ns + ttft_ns / 2,
            failed: true,
            isl_client: Some(isl),
            failure: loadgen_wire::FailureKind::HttpStatus as u8,
            ..SampleRow::default()
        };
    }
    let missing = spec.missing_usage_every != 0
        && i % spec.missing_usage_every == spec.missing_usage_every - 1;
    let finish = if osl > 110 { FinishKind::Length } else { FinishKind::Stop };
    SampleRow {
        issued_ns,
        first_chunk_ns: Some(issued_ns + ttft_ns),
        complete_ns: issued_ns + ttft_ns + decode_ns,
        failed: false,
        finish: Some(finish),
        isl_client: Some(isl),
        osl_client: Some(osl),
        tpot_tokens_client: Some(osl - 1),
        prompt_tokens: (!missing).then_some(isl),
        completion_tokens: (!missing).then_some(osl.saturating_sub(spec.server_osl_deficit)),
        output_empty: false,
        failure: 0,
        endpoint: 0,
        // One token a chunk, every fourth sample sent in one read (a bursting server).
        n_chunks: Some(osl),
        chunk_reads: Some(if i % 4 == 3 { 1 } else { osl }),
        client_wait_ns: Some((i as u64 * 7_919) % 50_000),
    }
}

/// A row's gaps between chunks: its decode time spread over them, a little uneven.
fn synthetic_gaps(row: &SampleRow, rng: &mut Rng) -> Vec<u64> {
    let (Some(first), Some(n)) = (row.first_chunk_ns, row.n_chunks) else { return Vec::new() };
    if n < 2 {
        return Vec::new();
    }
    if row.chunk_reads == Some(1) {
        return vec![0; n as usize - 1];
    }
    let mean_ns = (row.complete_ns - first) / u64::from(n - 1);
    (1..n).map(|_| mean_ns / 2 + rng.below(mean_ns.max(1))).collect()
}

/// A table of `spec.samples` deterministic rows.
pub fn synthetic_table(spec: &FixtureSpec) -> SampleTable {
    synthetic_table_in(spec, None)
}

/// The same rows in a table whose columns spill into `spill` past its budget.
pub fn synthetic_table_in(spec: &FixtureSpec, spill: Option<Arc<Spill>>) -> SampleTable {
    let mut rng = Rng::new(spec.seed);
    let mut table = SampleTable::new(spec.samples, spill);
    for i in 0..spec.samples {
        let row = synthetic_row(i, &mut rng, spec);
        table.push(&row);
        // Their own generator, so the rows stay those the fixture always made.
        let mut gap_rng = Rng::new(spec.seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let gaps_ns = synthetic_gaps(&row, &mut gap_rng);
        table.extend_chunk_delta_ns(&gaps_ns);
    }
    table
}

/// The same table with every server count removed (the client-only computation).
pub fn strip_usage(table: &SampleTable) -> SampleTable {
    let mut out = SampleTable::with_capacity(table.len());
    for i in 0..table.len() {
        let row = SampleRow { prompt_tokens: None, completion_tokens: None, ..table.row(i) };
        out.push(&row);
    }
    out.set_chunk_delta_ns(Column::from_vec("chunk_delta_ns", table.chunk_delta_ns().to_vec()));
    out
}

/// Counters consistent with `table`: every sample tracked, the session starting 10 ms and
/// tracking 1 ms before the first fixture issue, the last event 5 ms after the last
/// completion.
pub fn run_counters(table: &SampleTable) -> RunCounters {
    let n = table.len() as u64;
    let (mut failed, mut last) = (0, 0);
    table.for_each_row(|row| {
        failed += u64::from(row.failed);
        last = last.max(row.complete_ns);
    });
    RunCounters {
        total_samples_issued: n,
        total_samples_completed: n,
        total_samples_failed: failed,
        tracked_samples_issued: n,
        tracked_samples_completed: n,
        tracked_samples_failed: failed,
        session_start_ns: 990_000_000,
        tracking_start_ns: 999_000_000,
        last_event_ns: last + 5_000_000,
        ..RunCounters::default()
    }
}
