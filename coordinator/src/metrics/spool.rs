//! The aggregator's sample rows as they arrive, handed over in completion order, in bounded
//! memory: past the spill's budget each run of rows is sorted by completion (stably) and
//! written to a file, and the end merges the runs (earlier runs first on equal stamps). The
//! order is exactly a stable sort of the arrival order by `complete_ns`, as the in-memory path
//! gives it, which is the order of events.jsonl's `sample.complete` lines.

use std::sync::Arc;

use super::column::Spill;
use super::sort_spool::{run_records, SortSpool};
use super::table::{FinishKind, SampleRow};

/// A row with the sample it belongs to: its id and dataset row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpooledRow {
    pub row: SampleRow,
    pub sample_id: u64,
    pub dataset_row: u32,
}

const ROW_BYTES: usize = 8 * 5 + 4 * 8 + 4;
const NONE_U64: u64 = u64::MAX;
const NONE_U32: u32 = u32::MAX;

/// Rows in arrival order, handed over in completion order (a `SortSpool` of encoded rows keyed
/// by `complete_ns`).
#[derive(Debug)]
pub struct RowSpool(SortSpool);

fn completion_key(b: &[u8]) -> (u64, u64) {
    (u64::from_le_bytes(b[16..24].try_into().unwrap_or_default()), 0)
}

impl RowSpool {
    /// A spool that writes runs of rows into `spill` once its budget is spent (never without a
    /// spill), with room for `capacity` rows in memory.
    pub fn new(spill: Option<Arc<Spill>>, capacity: usize) -> RowSpool {
        let run = run_records(spill.as_deref(), ROW_BYTES);
        RowSpool(SortSpool::new(("rows", ROW_BYTES, completion_key), spill, run, capacity))
    }

    /// Appends a row; returns its slot among the rows in memory (valid until the next run is
    /// written: callers that patch rows later, a live tokenizer's, use a spool without spill).
    pub fn push(&mut self, row: SpooledRow) -> usize {
        let mut packed = [0u8; ROW_BYTES];
        encode(&row, &mut packed);
        self.0.push(&packed)
    }

    /// Changes the row in memory at `slot` (a live tokenizer's counts); false without one.
    pub fn update(&mut self, slot: usize, f: impl FnOnce(&mut SampleRow)) -> bool {
        let Some(bytes) = self.0.record_mut(slot) else { return false };
        let Ok(packed) = <&mut [u8; ROW_BYTES]>::try_from(bytes) else { return false };
        let mut row = decode(packed);
        f(&mut row.row);
        encode(&row, packed);
        true
    }

    /// The spill its runs go to, if any.
    pub fn spill(&self) -> Option<&Arc<Spill>> {
        self.0.spill()
    }

    /// Rows held, in memory and in the file.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True without rows.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Hands every row to `f` in completion order (a stable sort of the arrival order by
    /// `complete_ns`). A failed read stops the walk and is noted in the spill.
    pub fn drain_in_completion_order(self, mut f: impl FnMut(SpooledRow)) {
        self.0.drain_sorted(|bytes| {
            if let Ok(packed) = <&[u8; ROW_BYTES]>::try_from(bytes) {
                f(decode(packed));
            }
        });
    }
}

fn encode(r: &SpooledRow, out: &mut [u8; ROW_BYTES]) {
    let row = &r.row;
    let u64s = [
        row.issued_ns,
        row.first_chunk_ns.unwrap_or(NONE_U64),
        row.complete_ns,
        row.client_wait_ns.unwrap_or(NONE_U64),
        r.sample_id,
    ];
    let flags = u32::from(row.failed) | u32::from(row.output_empty) << 1;
    let finish = row.finish.map_or(u8::MAX, |k| k as u8);
    let packed = flags
        | u32::from(finish) << 8
        | u32::from(row.failure) << 16
        | u32::from(row.endpoint) << 24;
    let u32s = [
        packed,
        row.isl_client.unwrap_or(NONE_U32),
        row.osl_client.unwrap_or(NONE_U32),
        row.tpot_tokens_client.unwrap_or(NONE_U32),
        row.prompt_tokens.unwrap_or(NONE_U32),
        row.completion_tokens.unwrap_or(NONE_U32),
        row.n_chunks.unwrap_or(NONE_U32),
        row.chunk_reads.unwrap_or(NONE_U32),
        r.dataset_row,
    ];
    for (slot, v) in out.chunks_exact_mut(8).zip(u64s) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
    for (slot, v) in out[40..].chunks_exact_mut(4).zip(u32s) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
}

fn decode(b: &[u8; ROW_BYTES]) -> SpooledRow {
    let u64_at = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    let u32_at =
        |i: usize| u32::from_le_bytes(b[40 + i * 4..44 + i * 4].try_into().unwrap_or_default());
    let some64 = |v: u64| (v != NONE_U64).then_some(v);
    let some32 = |v: u32| (v != NONE_U32).then_some(v);
    let packed = u32_at(0);
    SpooledRow {
        row: SampleRow {
            issued_ns: u64_at(0),
            first_chunk_ns: some64(u64_at(1)),
            complete_ns: u64_at(2),
            client_wait_ns: some64(u64_at(3)),
            failed: packed & 1 != 0,
            output_empty: packed & 2 != 0,
            finish: FinishKind::ALL.get(((packed >> 8) & 0xff) as usize).copied(),
            failure: (packed >> 16) as u8,
            endpoint: (packed >> 24) as u8,
            isl_client: some32(u32_at(1)),
            osl_client: some32(u32_at(2)),
            tpot_tokens_client: some32(u32_at(3)),
            prompt_tokens: some32(u32_at(4)),
            completion_tokens: some32(u32_at(5)),
            n_chunks: some32(u32_at(6)),
            chunk_reads: some32(u32_at(7)),
        },
        sample_id: u64_at(4),
        dataset_row: u32_at(8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: u64, complete_ns: u64) -> SpooledRow {
        SpooledRow {
            row: SampleRow {
                issued_ns: i,
                complete_ns,
                first_chunk_ns: (i % 3 == 0).then_some(i + 1),
                finish: FinishKind::ALL.get((i % 7) as usize).copied(),
                failed: i % 5 == 0,
                output_empty: i % 4 == 0,
                failure: (i % 9) as u8,
                endpoint: (i % 2) as u8,
                isl_client: Some(i as u32),
                completion_tokens: (i % 2 == 0).then_some(7),
                n_chunks: Some(3),
                client_wait_ns: Some(i * 2),
                ..SampleRow::default()
            },
            sample_id: i,
            dataset_row: (i * 11) as u32,
        }
    }

    fn rows() -> Vec<SpooledRow> {
        // Stamps out of arrival order, with many ties.
        (0..40_000u64).map(|i| row(i, (i * 7919) % 1_013)).collect()
    }

    fn drained(spool: RowSpool) -> Vec<SpooledRow> {
        let mut out = Vec::new();
        spool.drain_in_completion_order(|r| out.push(r));
        out
    }

    #[test]
    fn a_spilled_spool_gives_the_in_memory_stable_order_exactly() {
        let mut expected = rows();
        expected.sort_by_key(|r| r.row.complete_ns);
        let mut memory = RowSpool::new(None, 0);
        rows().into_iter().for_each(|r| _ = memory.push(r));
        assert_eq!(drained(memory), expected);
        let dir = std::env::temp_dir().join(format!("loadgen-spool-{}", std::process::id()));
        let spill = Spill::new(&dir, 0).unwrap();
        let mut spilled = RowSpool::new(Some(spill.clone()), 0);
        rows().into_iter().for_each(|r| _ = spilled.push(r));
        assert!(spilled.0.runs_written() >= 30, "it wrote runs: {}", spilled.0.runs_written());
        assert_eq!(spilled.len(), 40_000);
        assert_eq!(drained(spilled), expected);
        assert_eq!(spill.error(), None);
    }

    #[test]
    fn rows_round_trip_through_their_bytes() {
        for i in [0, 1, 3, 4, 5, 12, 9_999] {
            let r = row(i, 77);
            let mut bytes = [0u8; ROW_BYTES];
            encode(&r, &mut bytes);
            assert_eq!(decode(&bytes), r, "row {i}");
        }
    }
}
