//! A stable external sort of fixed-size records, in bounded memory: records are kept as bytes in
//! arrival order; past the spill's budget a run of them is written to an unlinked file in key
//! order, and the end merges the runs (an earlier run first on equal keys, so the order is
//! exactly a stable sort of the arrival order by key). Without a spill it is an in-memory stable
//! sort. The sample rows (`spool::RowSpool`), `sample_idx_map.json`'s issue order and the peak of
//! requests in flight go through it.

use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use super::column::Spill;

/// A record's sort key, read from its bytes.
pub type KeyFn = fn(&[u8]) -> (u64, u64);

/// Records a spilled run holds: an eighth of the budget, 1,024 to 65,536 records.
pub fn run_records(spill: Option<&Spill>, record_bytes: usize) -> usize {
    let records = spill.map_or(1 << 16, |s| s.budget_bytes() / 8 / record_bytes.max(1) as u64);
    records.clamp(1 << 10, 1 << 16) as usize
}

/// Records between two checks of the spool's memory against the budget.
const COUNT_EVERY: usize = 1 << 12;

/// Records of `record_bytes` each, sorted stably by `key` at the end.
#[derive(Debug)]
pub struct SortSpool {
    name: &'static str,
    record_bytes: usize,
    key: KeyFn,
    /// The records in memory, in arrival order.
    mem: Blocks,
    /// Bytes of `bytes` counted against the spill's budget.
    counted_bytes: u64,
    /// Records a run holds before the spool may write it.
    run_records: usize,
    /// Record count of each run in the file, in order.
    runs: Vec<usize>,
    file: Option<File>,
    spill: Option<Arc<Spill>>,
}

impl SortSpool {
    /// A spool named `name` (its file's name) of records `record_bytes` long, sorted by `key`,
    /// writing runs of at least `run_records` into `spill` once its budget is spent, with room
    /// for `capacity` records in memory.
    pub fn new(
        (name, record_bytes, key): (&'static str, usize, KeyFn),
        spill: Option<Arc<Spill>>,
        run_records: usize,
        capacity: usize,
    ) -> SortSpool {
        let run_records = run_records.max(1);
        SortSpool {
            name,
            record_bytes,
            key,
            mem: Blocks::new(record_bytes, run_records, capacity),
            counted_bytes: 0,
            run_records,
            runs: Vec::new(),
            file: None,
            spill,
        }
    }

    fn in_memory(&self) -> usize {
        self.mem.len
    }

    /// Appends a record (`record_bytes` long); returns its slot among the records in memory
    /// (valid until the next run is written: a caller that changes records later uses a spool
    /// without spill).
    pub fn push(&mut self, record: &[u8]) -> usize {
        let n = self.in_memory();
        let over = |s: &Arc<Spill>| s.over_budget();
        if n % self.run_records.min(COUNT_EVERY) == 0
            && n >= self.run_records
            && self.spill.as_ref().is_some_and(over)
        {
            self.write_run();
        }
        let allocated = self.mem.push(record);
        self.count_resident(allocated);
        self.in_memory() - 1
    }

    /// The record in memory at `slot`, to change in place.
    pub fn record_mut(&mut self, slot: usize) -> Option<&mut [u8]> {
        self.mem.get_mut(slot)
    }

    /// Records held, in memory and in the file.
    pub fn len(&self) -> usize {
        self.in_memory() + self.runs.iter().sum::<usize>()
    }

    /// True without records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The spill its runs go to, if any.
    pub fn spill(&self) -> Option<&Arc<Spill>> {
        self.spill.as_ref()
    }

    /// Runs written to the file so far.
    pub fn runs_written(&self) -> usize {
        self.runs.iter().filter(|&&n| n > 0).count()
    }

    fn count_resident(&mut self, bytes: u64) {
        let Some(spill) = &self.spill else { return };
        if bytes > 0 {
            spill.add_resident(bytes);
            self.counted_bytes += bytes;
        }
    }

    /// Frees the block of record `i` once the drain has handed out every record in it.
    fn release(&mut self, i: u32, left: &mut [u32]) {
        let freed = self.mem.release(i as usize, left);
        if let (Some(spill), true) = (&self.spill, freed > 0) {
            let counted = freed.min(self.counted_bytes);
            spill.sub_resident(counted);
            self.counted_bytes -= counted;
        }
    }

    fn uncount_resident(&mut self) {
        if let Some(spill) = &self.spill {
            spill.sub_resident(self.counted_bytes);
        }
        self.counted_bytes = 0;
    }

    /// The in-memory records' positions sorted stably by key: (key, position) pairs sorted
    /// as plain values (sequential, cache-friendly), the position breaking ties.
    fn order(&self) -> Vec<u32> {
        // Rows arrive nearly in completion order, often exactly: then nothing moves.
        let mut keys = self.mem.iter().map(self.key);
        let mut previous = keys.next();
        if keys.all(|k| previous.replace(k).is_none_or(|p| p <= k)) {
            return (0..self.in_memory() as u32).collect();
        }
        let keyed: Vec<(u64, u64, u32)> = self
            .mem
            .iter()
            .enumerate()
            .map(|(i, record)| {
                let (k1, k2) = (self.key)(record);
                (k1, k2, i as u32)
            })
            .collect();
        let mut keyed = keyed;
        keyed.sort_unstable();
        keyed.into_iter().map(|(_, _, i)| i).collect()
    }

    fn record(&self, i: u32) -> &[u8] {
        self.mem.get(i as usize)
    }

    fn write_run(&mut self) {
        let Some(spill) = self.spill.clone() else { return };
        match self.append(&spill) {
            Ok(()) => {
                self.runs.push(self.in_memory());
                self.uncount_resident();
                self.mem.clear();
            }
            Err(e) => {
                let dir = spill.dir().display();
                spill.note_error(format!("cannot write {} to {dir}: {e}", self.name));
                // Kept in memory from now on (in arrival order, so the merge stays exact).
                self.uncount_resident();
                self.spill = None;
                self.runs.push(0);
            }
        }
    }

    fn append(&mut self, spill: &Spill) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(spill.file(self.name)?);
        }
        let order = self.order();
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        file.seek(SeekFrom::End(0))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, &*file);
        for &i in &order {
            out.write_all(self.mem.get(i as usize))?;
        }
        out.flush()?;
        spill.note_spilled((order.len() * self.record_bytes) as u64);
        Ok(())
    }

    /// Hands every record to `f` in key order (a stable sort of the arrival order), freeing
    /// each block of records in memory once all of its records are handed out (what `f` builds
    /// from them then takes their place in the budget). A failed read stops the walk and is
    /// noted in the spill.
    pub fn drain_sorted(mut self, mut f: impl FnMut(&[u8])) {
        let order = self.order();
        if self.runs_written() == 0 {
            let mut left = self.mem.records_per_block();
            for &i in &order {
                f(self.record(i));
                self.release(i, &mut left);
            }
            return;
        }
        if let Err(e) = self.merge(&order, &mut f) {
            if let Some(spill) = &self.spill {
                spill.note_read_error(format!("cannot read {} back: {e}", self.name));
            }
        }
        self.uncount_resident();
    }

    /// Merges the file's runs and the in-memory records (`order`), the earliest key first and,
    /// on equal keys, the earliest run.
    fn merge(&mut self, order: &[u32], f: &mut impl FnMut(&[u8])) -> std::io::Result<()> {
        let mut readers = self.readers()?;
        let mut left = self.mem.records_per_block();
        let tail = readers.len();
        let mut tail_at = 0;
        let mut heap = BinaryHeap::new();
        for (run, reader) in readers.iter_mut().enumerate() {
            if reader.advance()? {
                heap.push(std::cmp::Reverse(((self.key)(&reader.current), run)));
            }
        }
        if let Some(&i) = order.first() {
            heap.push(std::cmp::Reverse(((self.key)(self.record(i)), tail)));
        }
        while let Some(std::cmp::Reverse((_, run))) = heap.pop() {
            let next = if run == tail {
                f(self.record(order[tail_at]));
                self.release(order[tail_at], &mut left);
                tail_at += 1;
                order.get(tail_at).map(|&i| (self.key)(self.record(i)))
            } else {
                let reader = &mut readers[run];
                f(&reader.current);
                reader.advance()?.then(|| (self.key)(&reader.current))
            };
            if let Some(key) = next {
                heap.push(std::cmp::Reverse((key, run)));
            }
        }
        Ok(())
    }

    fn readers(&self) -> std::io::Result<Vec<RunReader>> {
        let Some(file) = &self.file else { return Ok(Vec::new()) };
        let mut offset = 0u64;
        let mut readers = Vec::with_capacity(self.runs.len());
        for &records in self.runs.iter().filter(|&&n| n > 0) {
            let bytes = (records * self.record_bytes) as u64;
            let part = PartReader { file: file.try_clone()?, at: offset, end: offset + bytes };
            readers.push(RunReader {
                inner: BufReader::with_capacity(1 << 16, part),
                current: vec![0; self.record_bytes],
            });
            offset += bytes;
        }
        Ok(readers)
    }
}

/// Records in memory, in arrival order, in blocks of a run's records: the spool grows by
/// whole blocks (no copy of what it holds) and the drain frees each block once it has handed
/// out all of its records.
#[derive(Debug)]
struct Blocks {
    record_bytes: usize,
    block_records: usize,
    blocks: Vec<Vec<u8>>,
    len: usize,
}

impl Blocks {
    /// Room for the list of blocks that `capacity` records take.
    fn new(record_bytes: usize, block_records: usize, capacity: usize) -> Blocks {
        let blocks = Vec::with_capacity(capacity.div_ceil(block_records));
        Blocks { record_bytes, block_records, blocks, len: 0 }
    }

    /// Appends a record; the bytes of the block it allocated for it, if it did.
    fn push(&mut self, record: &[u8]) -> u64 {
        let block_bytes = self.block_records * self.record_bytes;
        self.len += 1;
        match self.blocks.last_mut() {
            Some(last) if last.len() < block_bytes => {
                last.extend_from_slice(record);
                0
            }
            _ => {
                let mut block = Vec::with_capacity(block_bytes);
                block.extend_from_slice(record);
                self.blocks.push(block);
                block_bytes as u64
            }
        }
    }

    fn at(&self, i: usize) -> (usize, usize) {
        (i / self.block_records, (i % self.block_records) * self.record_bytes)
    }

    fn get(&self, i: usize) -> &[u8] {
        let (block, at) = self.at(i);
        &self.blocks[block][at..at + self.record_bytes]
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let (block, at) = self.at(i);
        self.blocks.get_mut(block)?.get_mut(at..at + self.record_bytes)
    }

    fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.blocks.iter().flat_map(|b| b.chunks_exact(self.record_bytes))
    }

    /// How many records each block holds, for `release`.
    fn records_per_block(&self) -> Vec<u32> {
        self.blocks.iter().map(|b| (b.len() / self.record_bytes) as u32).collect()
    }

    /// Counts record `i` handed out; frees its block when it was the block's last. Returns the
    /// bytes freed.
    fn release(&mut self, i: usize, left: &mut [u32]) -> u64 {
        let block = i / self.block_records;
        left[block] -= 1;
        if left[block] > 0 {
            return 0;
        }
        std::mem::take(&mut self.blocks[block]).capacity() as u64
    }

    fn clear(&mut self) {
        self.blocks.clear();
        self.len = 0;
    }
}

impl Drop for SortSpool {
    fn drop(&mut self) {
        self.uncount_resident();
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
    current: Vec<u8>,
}

impl RunReader {
    /// Reads the run's next record into `current`; false at its end.
    fn advance(&mut self) -> std::io::Result<bool> {
        match self.inner.read_exact(&mut self.current) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Hands `values` to `f` in ascending order, in bounded memory: runs of them as large as an
/// eighth of the spill's budget are radix-sorted in memory and, past the first, written to an
/// unlinked file as plain words, merged at the end (a spilled table's peak in flight). A failed
/// write or read stops the walk and is noted in the spill.
pub fn walk_sorted_u64(
    name: &'static str,
    values: impl Iterator<Item = u64>,
    spill: &Arc<Spill>,
    mut f: impl FnMut(u64),
) {
    let mut run_values = (spill.budget_bytes() / 8 / 8).max(1 << 16) as usize;
    let mut run: Vec<u64> = Vec::with_capacity(run_values);
    let (mut file, mut runs): (Option<File>, Vec<u64>) = (None, Vec::new());
    for v in values {
        run.push(v);
        if run.len() == run_values {
            match write_u64_run(name, spill, &mut file, &mut run) {
                Ok(()) => runs.push(run_values as u64),
                Err(e) => {
                    let dir = spill.dir().display();
                    spill.note_error(format!("cannot write {name} to {dir}: {e}"));
                    // Kept in memory from now on; the runs written are still merged.
                    run_values = usize::MAX;
                }
            }
        }
    }
    super::series::sort_u64(&mut run);
    let Some(file) = file else { return run.into_iter().for_each(f) };
    if let Err(e) = merge_u64_runs(&file, &runs, &run, &mut f) {
        spill.note_read_error(format!("cannot read {name} back: {e}"));
    }
}

fn write_u64_run(
    name: &'static str,
    spill: &Spill,
    file: &mut Option<File>,
    run: &mut Vec<u64>,
) -> std::io::Result<()> {
    super::series::sort_u64(run);
    if file.is_none() {
        *file = Some(spill.file(name)?);
    }
    let Some(file) = file.as_mut() else { return Ok(()) };
    file.seek(SeekFrom::End(0))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, &*file);
    for v in run.iter() {
        out.write_all(&v.to_le_bytes())?;
    }
    out.flush()?;
    spill.note_spilled((run.len() * 8) as u64);
    run.clear();
    Ok(())
}

/// Merges the file's sorted runs (`runs`: their lengths) and the sorted `tail`.
fn merge_u64_runs(
    file: &File,
    runs: &[u64],
    tail: &[u64],
    f: &mut impl FnMut(u64),
) -> std::io::Result<()> {
    let mut readers = Vec::with_capacity(runs.len());
    let mut offset = 0u64;
    for &n in runs {
        let part = PartReader { file: file.try_clone()?, at: offset, end: offset + n * 8 };
        readers.push(BufReader::with_capacity(1 << 16, part));
        offset += n * 8;
    }
    let next = |r: &mut BufReader<PartReader>| -> std::io::Result<Option<u64>> {
        let mut word = [0u8; 8];
        match r.read_exact(&mut word) {
            Ok(()) => Ok(Some(u64::from_le_bytes(word))),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
            Err(e) => Err(e),
        }
    };
    let mut heap = BinaryHeap::new();
    for (i, r) in readers.iter_mut().enumerate() {
        if let Some(v) = next(r)? {
            heap.push(std::cmp::Reverse((v, i)));
        }
    }
    let mut tail = tail.iter().copied().peekable();
    loop {
        let from_runs = match (heap.peek(), tail.peek()) {
            (Some(std::cmp::Reverse((v, _))), Some(t)) => v <= t,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        if from_runs {
            let Some(std::cmp::Reverse((v, i))) = heap.pop() else { break };
            f(v);
            if let Some(v) = next(&mut readers[i])? {
                heap.push(std::cmp::Reverse((v, i)));
            }
        } else if let Some(t) = tail.next() {
            f(t);
        }
    }
    Ok(())
}

/// Pairs of u64 keys with a u32, sorted as tuples: `(issued_ns, sample id, dataset row)` for
/// `sample_idx_map.json`'s issue order; `(instant, step, 0)` for the peak in flight. Held as
/// plain tuples (sorted in place at the end) until the spill's budget is spent; past it each
/// run of them is sorted and goes through a `SortSpool` to its file.
#[derive(Debug)]
pub struct TupleSpool {
    mem: Vec<(u64, u64, u32)>,
    runs: SortSpool,
    run: usize,
}

const TUPLE_BYTES: usize = 20;

fn tuple_key(b: &[u8]) -> (u64, u64) {
    let (k1, k2, _) = tuple(b);
    (k1, k2)
}

fn tuple(b: &[u8]) -> (u64, u64, u32) {
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    (word(0), word(8), u32::from_le_bytes(b[16..20].try_into().unwrap_or_default()))
}

fn tuple_bytes((k1, k2, v): (u64, u64, u32)) -> [u8; TUPLE_BYTES] {
    let mut b = [0u8; TUPLE_BYTES];
    b[..8].copy_from_slice(&k1.to_le_bytes());
    b[8..16].copy_from_slice(&k2.to_le_bytes());
    b[16..].copy_from_slice(&v.to_le_bytes());
    b
}

impl TupleSpool {
    /// An empty spool of tuples named `name`, spilling into `spill` past its budget.
    pub fn new(name: &'static str, spill: Option<Arc<Spill>>) -> TupleSpool {
        let run = run_records(spill.as_deref(), TUPLE_BYTES);
        let runs = SortSpool::new((name, TUPLE_BYTES, tuple_key), spill, run, 0);
        TupleSpool { mem: Vec::new(), runs, run }
    }

    /// Makes room for `n` tuples in memory when they fit the budget (or there is no spill).
    pub fn with_room(mut self, n: usize) -> TupleSpool {
        let bytes = (n * std::mem::size_of::<(u64, u64, u32)>()) as u64;
        if self.runs.spill().is_none_or(|s| bytes <= s.budget_bytes()) {
            self.mem.reserve_exact(n);
        }
        self
    }

    /// Appends a tuple.
    pub fn push(&mut self, tuple: (u64, u64, u32)) {
        self.mem.push(tuple);
        let full = self.mem.len() >= self.run && self.mem.len() % COUNT_EVERY == 0;
        let bytes = (self.mem.capacity() * std::mem::size_of::<(u64, u64, u32)>()) as u64;
        if full && self.runs.spill().is_some_and(|s| s.over_budget_with(bytes)) {
            self.move_to_runs();
        }
    }

    /// Sorts the tuples in memory and hands them to the run spool, which writes them.
    fn move_to_runs(&mut self) {
        self.mem.sort_unstable();
        for t in std::mem::take(&mut self.mem) {
            self.runs.push(&tuple_bytes(t));
        }
    }

    /// Tuples held.
    pub fn len(&self) -> usize {
        self.mem.len() + self.runs.len()
    }

    /// True without tuples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hands every tuple to `f` in order.
    pub fn drain_sorted(mut self, mut f: impl FnMut((u64, u64, u32))) {
        if self.runs.is_empty() {
            self.mem.sort_unstable();
            self.mem.into_iter().for_each(f);
            return;
        }
        self.move_to_runs();
        self.runs.drain_sorted(|b| f(tuple(b)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spilled_tuples_come_back_in_the_in_memory_stable_order() {
        let tuples: Vec<(u64, u64, u32)> =
            (0..20_000u64).map(|i| ((i * 7919) % 997, i % 3, i as u32)).collect();
        let drained = |spill: Option<Arc<Spill>>| {
            let mut spool = TupleSpool::new("t", spill);
            tuples.iter().for_each(|&t| spool.push(t));
            let mut out = Vec::new();
            spool.drain_sorted(|t| out.push(t));
            out
        };
        let mut expected = tuples.clone();
        expected.sort_by_key(|&(a, b, _)| (a, b));
        assert_eq!(drained(None), expected);
        let dir = std::env::temp_dir().join(format!("loadgen-tuples-{}", std::process::id()));
        let spill = Spill::new(&dir, 0).unwrap();
        let mut spool = TupleSpool::new("t", Some(spill.clone()));
        tuples.iter().for_each(|&t| spool.push(t));
        assert!(spool.runs.runs_written() >= 4, "runs: {}", spool.runs.runs_written());
        assert_eq!(drained(Some(spill.clone())), expected);
        assert_eq!(spill.error(), None);
    }

    #[test]
    fn the_drain_frees_its_blocks_as_it_hands_them_out() {
        let dir = std::env::temp_dir().join(format!("loadgen-blocks-{}", std::process::id()));
        let spill = Spill::new(&dir, u64::MAX).unwrap();
        let mut spool = SortSpool::new(("b", 8, |b| (b[0].into(), 0)), Some(spill.clone()), 64, 0);
        // Keys out of order within each block of 64 records, in order across blocks.
        (0..64 * 10u64).for_each(|i| {
            _ = spool.push(&((i / 64) as u8 * 16 + (i % 7) as u8).to_le_bytes().repeat(8)[..8])
        });
        assert_eq!(spill.resident_bytes(), 64 * 10 * 8, "ten blocks counted");
        let (mut handed, mut peak_after_first_block) = (0u64, 0u64);
        spool.drain_sorted(|_| {
            handed += 1;
            if handed == 65 {
                peak_after_first_block = spill.resident_bytes();
            }
        });
        assert_eq!(handed, 640);
        assert_eq!(peak_after_first_block, 64 * 9 * 8, "the first block was freed");
        assert_eq!(spill.resident_bytes(), 0);
    }

    #[test]
    fn spilled_words_come_back_sorted() {
        let values: Vec<u64> =
            (0..300_000u64).map(|i| ((i * 7919) % 100_003) << 1 | (i & 1)).collect();
        let dir = std::env::temp_dir().join(format!("loadgen-words-{}", std::process::id()));
        let spill = Spill::new(&dir, 0).unwrap();
        let mut got = Vec::new();
        walk_sorted_u64("w", values.iter().copied(), &spill, |v| got.push(v));
        let mut expected = values;
        expected.sort_unstable();
        assert_eq!(got, expected);
        assert!(spill.spilled_bytes() > 0, "runs went to the file");
        assert_eq!(spill.error(), None);
    }
}
