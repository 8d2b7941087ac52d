//! The aggregator's sample rows as they arrive, handed over in completion order, in bounded
//! memory: past the spill's budget each run of rows is sorted by completion (stably) and
//! written to a file, and the end merges the runs (earlier runs first on equal stamps). The
//! order is exactly a stable sort of the arrival order by `complete_ns`, as the in-memory path
//! gives it, which is the order of events.jsonl's `sample.complete` lines.

use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use super::column::Spill;
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

/// Rows in arrival order, some of them in sorted runs in a file.
#[derive(Debug)]
pub struct RowSpool {
    rows: Vec<SpooledRow>,
    /// Rows a run holds before the spool may write it.
    run_rows: usize,
    /// Row count of each run in the file, in order.
    runs: Vec<usize>,
    file: Option<File>,
    spill: Option<Arc<Spill>>,
}

impl RowSpool {
    /// A spool that writes runs of `run_rows` rows into `spill` once its budget is spent
    /// (never without a spill), with room for `capacity` rows in memory.
    pub fn new(spill: Option<Arc<Spill>>, run_rows: usize, capacity: usize) -> RowSpool {
        let capacity = if spill.is_some() { capacity.min(run_rows) } else { capacity };
        RowSpool {
            rows: Vec::with_capacity(capacity),
            run_rows: run_rows.max(1),
            runs: Vec::new(),
            file: None,
            spill,
        }
    }

    /// Appends a row; returns its slot among the rows in memory (valid until the next run is
    /// written: callers that patch rows later, a live tokenizer's, use a spool without spill).
    pub fn push(&mut self, row: SpooledRow) -> usize {
        if self.rows.len() >= self.run_rows
            && self.spill.as_ref().is_some_and(|s| s.over_budget_with(self.bytes()))
        {
            self.write_run();
        }
        self.rows.push(row);
        self.rows.len() - 1
    }

    fn bytes(&self) -> u64 {
        (self.rows.len() * std::mem::size_of::<SpooledRow>()) as u64
    }

    /// The spill its runs go to, if any.
    pub fn spill(&self) -> Option<&Arc<Spill>> {
        self.spill.as_ref()
    }

    /// The row in memory at `slot`.
    pub fn get_mut(&mut self, slot: usize) -> Option<&mut SpooledRow> {
        self.rows.get_mut(slot)
    }

    /// Rows held, in memory and in the file.
    pub fn len(&self) -> usize {
        self.rows.len() + self.runs.iter().sum::<usize>()
    }

    /// True without rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn write_run(&mut self) {
        let Some(spill) = self.spill.clone() else { return };
        sort_by_completion(&mut self.rows);
        match self.append(&spill) {
            Ok(()) => {
                self.runs.push(self.rows.len());
                self.rows = Vec::with_capacity(self.run_rows);
            }
            Err(e) => {
                spill.note_error(format!(
                    "cannot write sample rows to {}: {e}",
                    spill.dir().display()
                ));
                // Kept in memory from now on (still sorted within, so the merge stays exact).
                self.spill = None;
                self.runs.push(0);
            }
        }
    }

    fn append(&mut self, spill: &Spill) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(spill.file("rows")?);
        }
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        file.seek(SeekFrom::End(0))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        let mut bytes = [0u8; ROW_BYTES];
        for row in &self.rows {
            encode(row, &mut bytes);
            out.write_all(&bytes)?;
        }
        out.flush()?;
        spill.note_spilled((self.rows.len() * ROW_BYTES) as u64);
        Ok(())
    }

    /// Hands every row to `f` in completion order (a stable sort of the arrival order by
    /// `complete_ns`). A failed read stops the walk and is noted in the spill.
    pub fn drain_in_completion_order(mut self, mut f: impl FnMut(SpooledRow)) {
        sort_by_completion(&mut self.rows);
        if self.runs.iter().all(|&n| n == 0) {
            self.rows.into_iter().for_each(f);
            return;
        }
        let spill = self.spill.clone();
        let note = |e: std::io::Error| {
            if let Some(spill) = &spill {
                spill.note_error(format!("cannot read sample rows back: {e}"));
            }
        };
        let mut readers = match self.readers() {
            Ok(r) => r,
            Err(e) => return note(e),
        };
        let tail = readers.len();
        let mut tail_rows = std::mem::take(&mut self.rows).into_iter().peekable();
        // (Reverse of (complete_ns, run)): the earliest stamp, then the earliest run, first.
        let mut heap = BinaryHeap::new();
        for (run, reader) in readers.iter_mut().enumerate() {
            match reader.next() {
                Ok(Some(row)) => {
                    heap.push(std::cmp::Reverse((row.row.complete_ns, run, Held(row))))
                }
                Ok(None) => {}
                Err(e) => return note(e),
            }
        }
        if let Some(row) = tail_rows.next() {
            heap.push(std::cmp::Reverse((row.row.complete_ns, tail, Held(row))));
        }
        while let Some(std::cmp::Reverse((_, run, Held(row)))) = heap.pop() {
            f(row);
            let next = if run == tail { Ok(tail_rows.next()) } else { readers[run].next() };
            match next {
                Ok(Some(row)) => {
                    heap.push(std::cmp::Reverse((row.row.complete_ns, run, Held(row))))
                }
                Ok(None) => {}
                Err(e) => return note(e),
            }
        }
    }

    fn readers(&self) -> std::io::Result<Vec<RunReader>> {
        let Some(file) = &self.file else { return Ok(Vec::new()) };
        let mut offset = 0u64;
        let mut readers = Vec::with_capacity(self.runs.len());
        for &rows in self.runs.iter().filter(|&&n| n > 0) {
            let bytes = (rows * ROW_BYTES) as u64;
            let part = PartReader { file: file.try_clone()?, at: offset, end: offset + bytes };
            readers.push(RunReader { inner: BufReader::with_capacity(1 << 16, part) });
            offset += bytes;
        }
        Ok(readers)
    }
}

/// A row in the merge heap, compared by nothing (the stamp and run before it decide).
#[derive(Debug)]
struct Held(SpooledRow);

impl PartialEq for Held {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

/// One run's bytes of the file, read at its own offset (cloned handles share one offset).
struct PartReader {
    file: File,
    at: u64,
    end: u64,
}

impl Read for PartReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = buf.len().min((self.end - self.at) as usize);
        let read = self.file.read_at(&mut buf[..n], self.at)?;
        self.at += read as u64;
        Ok(read)
    }
}

struct RunReader {
    inner: BufReader<PartReader>,
}

impl RunReader {
    fn next(&mut self) -> std::io::Result<Option<SpooledRow>> {
        let mut bytes = [0u8; ROW_BYTES];
        match self.inner.read_exact(&mut bytes) {
            Ok(()) => Ok(Some(decode(&bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn sort_by_completion(rows: &mut [SpooledRow]) {
    rows.sort_by_key(|r| r.row.complete_ns);
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
        (0..10_000u64).map(|i| row(i, (i * 7919) % 1_013)).collect()
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
        let mut memory = RowSpool::new(None, 100, 0);
        rows().into_iter().for_each(|r| _ = memory.push(r));
        assert_eq!(drained(memory), expected);
        let dir = std::env::temp_dir().join(format!("loadgen-spool-{}", std::process::id()));
        let spill = Spill::new(&dir, 0).unwrap();
        let mut spilled = RowSpool::new(Some(spill.clone()), 333, 0);
        rows().into_iter().for_each(|r| _ = spilled.push(r));
        assert!(spilled.runs.len() >= 29, "it wrote runs: {:?}", spilled.runs.len());
        assert_eq!(spilled.len(), 10_000);
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
