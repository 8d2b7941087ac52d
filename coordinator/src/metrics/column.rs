//! Append-only columns of plain values that stay in memory up to a budget and go to a file
//! beyond it, so a run of any length keeps its per-sample values in bounded memory.
//!
//! A [`Spill`] names the directory and the budget; every column that may spill shares one and
//! counts its resident values against it in whole chunks ([`CHUNK_VALUES`]). A column's owner
//! calls [`Column::spill_if_over`] at chunk boundaries (a table for all its columns at once, so
//! they spill at the same rows); its values are then written to an unlinked file in the
//! directory (nothing is left behind, even when the process is killed) and read back chunk by
//! chunk, in order, by [`Column::for_each_chunk`]. A column never spilled is one slice.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Values per chunk: what a column writes or reads back at once (512 KiB of u64).
pub const CHUNK_VALUES: usize = 1 << 16;

/// Bytes a sample may need in the spill's files at the run's peak: its issue log entry (12),
/// its spooled row (76) and its table row (64, 68 in an agentic run), less what the budget
/// keeps in memory. The report's series come after the spool is gone, a group at a time (up
/// to 32 bytes a sample a thread), and so do sample_idx_map.json's order (20) and the peak in
/// flight (40). A streamed sample's chunk gaps add 8 bytes a chunk.
pub const DISK_BYTES_PER_SAMPLE: u64 = 12 + 76 + 68;

/// What a client tokenizer adds a sample: the row's arrival index (8), its count's patch (24)
/// and its counting job (32); the output text that waits beside the job is not known before
/// the run.
pub const TOKENIZER_DISK_BYTES_PER_SAMPLE: u64 = 8 + 24 + 32;

/// Whether a filesystem with `free_bytes` holds a run of `samples` whose first `budget_bytes`
/// stay in memory; the error names the numbers.
pub fn disk_check(
    (samples, per_sample): (u64, u64),
    budget_bytes: u64,
    free_bytes: u64,
) -> Result<(), String> {
    let need = samples.saturating_mul(per_sample).saturating_sub(budget_bytes);
    if need <= free_bytes {
        return Ok(());
    }
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    Err(format!(
        "{samples} samples need up to {:.2} GiB of files ({per_sample} bytes a sample \
         past the {:.2} GiB kept in memory) and only {:.2} GiB is free",
        gib(need),
        gib(budget_bytes),
        gib(free_bytes)
    ))
}

/// A fixed-size value stored little-endian in a column file.
pub trait Plain: Copy + Default + Send + Sync + 'static {
    /// Its size in the file.
    const BYTES: usize;
    /// Writes it to `out` (exactly `BYTES` long).
    fn put(self, out: &mut [u8]);
    /// Reads it from `bytes` (exactly `BYTES` long).
    fn get(bytes: &[u8]) -> Self;
}

macro_rules! plain {
    ($($t:ty),*) => {$(
        impl Plain for $t {
            const BYTES: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_le_bytes(b)
            }
        }
    )*};
}
plain!(u8, u32, u64, f64);

/// Where columns spill and how many bytes of them may stay in memory, shared by a run's columns.
#[derive(Debug)]
pub struct Spill {
    dir: PathBuf,
    budget_bytes: u64,
    resident_bytes: AtomicU64,
    spilled_bytes: AtomicU64,
    /// The first write or read that failed: the run reports it instead of its figures.
    error: Mutex<Option<String>>,
    /// Some value could not be read back: the figures miss it.
    read_failed: std::sync::atomic::AtomicBool,
}

impl Spill {
    /// Columns spilling into `dir` (created if missing) once more than `budget_bytes` of them
    /// are in memory.
    pub fn new(dir: &Path, budget_bytes: u64) -> std::io::Result<Arc<Spill>> {
        std::fs::create_dir_all(dir)?;
        Ok(Arc::new(Spill {
            dir: dir.to_path_buf(),
            budget_bytes,
            resident_bytes: AtomicU64::new(0),
            spilled_bytes: AtomicU64::new(0),
            error: Mutex::new(None),
            read_failed: std::sync::atomic::AtomicBool::new(false),
        }))
    }

    /// The directory the column files go to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The in-memory budget.
    pub fn budget_bytes(&self) -> u64 {
        self.budget_bytes
    }

    /// Bytes written to column files so far (the run's disk use).
    pub fn spilled_bytes(&self) -> u64 {
        self.spilled_bytes.load(Ordering::Relaxed)
    }

    /// The first failure to write or read a column file, if any.
    pub fn error(&self) -> Option<String> {
        self.error.lock().map_or(None, |e| e.clone())
    }

    /// Bytes counted in memory now.
    #[cfg(test)]
    pub(crate) fn resident_bytes(&self) -> u64 {
        self.resident_bytes.load(Ordering::Relaxed)
    }

    pub(crate) fn over_budget(&self) -> bool {
        self.over_budget_with(0)
    }

    /// Over budget counting `extra_bytes` more (a row spool's, which counts its own).
    pub(crate) fn over_budget_with(&self, extra_bytes: u64) -> bool {
        self.resident_bytes.load(Ordering::Relaxed).saturating_add(extra_bytes) > self.budget_bytes
    }

    pub(crate) fn add_resident(&self, bytes: u64) {
        self.resident_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn sub_resident(&self, bytes: u64) {
        let now = self.resident_bytes.load(Ordering::Relaxed);
        self.resident_bytes.fetch_sub(bytes.min(now), Ordering::Relaxed);
    }

    pub(crate) fn note_spilled(&self, bytes: u64) {
        self.spilled_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A failed read: the figures computed from the files miss values (`read_failed`).
    pub(crate) fn note_read_error(&self, what: String) {
        self.read_failed.store(true, Ordering::Relaxed);
        self.note_error(what);
    }

    /// Whether some value could not be read back, so the figures miss it; a failed write only
    /// kept its values in memory.
    pub fn read_failed(&self) -> bool {
        self.read_failed.load(Ordering::Relaxed)
    }

    pub(crate) fn note_error(&self, what: String) {
        if let Ok(mut slot) = self.error.lock() {
            slot.get_or_insert(what);
        }
    }

    /// A new, already unlinked file in the directory.
    pub(crate) fn file(&self, name: &str) -> std::io::Result<File> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(format!(".{name}-{}-{seq}.col", std::process::id()));
        let file =
            std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        std::fs::remove_file(&path)?;
        Ok(file)
    }
}

/// An append-only column: values in memory, the older ones in a file once it spilled.
#[derive(Debug)]
pub struct Column<T: Plain> {
    name: &'static str,
    /// The values not in the file (all of them while it never spilled).
    mem: Vec<T>,
    /// Values in the file, before `mem`'s.
    on_disk: usize,
    file: Option<File>,
    spill: Option<Arc<Spill>>,
    /// Bytes of `mem` counted against the spill's budget.
    counted_bytes: u64,
}

impl<T: Plain> Column<T> {
    /// An empty column named `name` (its file's name), spilling into `spill` when one is given.
    pub fn new(name: &'static str, spill: Option<Arc<Spill>>) -> Column<T> {
        Column { name, mem: Vec::new(), on_disk: 0, file: None, spill, counted_bytes: 0 }
    }

    /// An in-memory column with room for `n` values.
    pub fn with_capacity(name: &'static str, n: usize) -> Column<T> {
        let mut column = Column::new(name, None);
        column.mem.reserve_exact(n);
        column
    }

    /// Appends one value. Whoever owns the column calls `spill_if_over` at chunk boundaries.
    #[inline]
    pub fn push(&mut self, value: T) {
        self.mem.push(value);
    }

    /// Appends a value and spills at a chunk boundary when the budget is spent (a column
    /// standing alone, not one of a table's).
    #[inline]
    pub fn push_spilling(&mut self, value: T) {
        self.mem.push(value);
        if self.mem.len() % CHUNK_VALUES == 0 {
            self.spill_if_over();
        }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.on_disk + self.mem.len()
    }

    /// True when it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every value as one slice, when none is in a file.
    pub fn as_slice(&self) -> Option<&[T]> {
        (self.on_disk == 0).then_some(self.mem.as_slice())
    }

    /// Every value as one mutable slice, when none is in a file.
    pub fn as_mut_slice(&mut self) -> Option<&mut [T]> {
        (self.on_disk == 0).then_some(self.mem.as_mut_slice())
    }

    /// True once some of its values are in a file.
    pub fn spilled(&self) -> bool {
        self.on_disk > 0
    }

    /// Counts the values in memory against the budget and, when it is spent, writes them to
    /// the file. Returns whether it wrote.
    pub fn spill_if_over(&mut self) -> bool {
        self.count_resident();
        self.spill.as_ref().is_some_and(|s| s.over_budget()) && self.force_spill()
    }

    /// Counts the values in memory against the spill's budget (a table counts all its columns
    /// before it decides for all of them).
    pub(crate) fn count_resident(&mut self) {
        let Some(spill) = &self.spill else { return };
        let bytes = (self.mem.len() * T::BYTES) as u64;
        spill.resident_bytes.fetch_add(bytes.saturating_sub(self.counted_bytes), Ordering::Relaxed);
        self.counted_bytes = self.counted_bytes.max(bytes);
    }

    /// Writes the values in memory to the file, budget or not. A column whose file cannot be
    /// written keeps its values in memory (nothing measured is lost), stops spilling, and the
    /// spill notes the error; returns whether it wrote.
    pub(crate) fn force_spill(&mut self) -> bool {
        let Some(spill) = self.spill.clone() else { return false };
        if self.mem.is_empty() {
            return false;
        }
        match self.write_out(&spill) {
            Ok(()) => true,
            Err(e) => {
                spill.note_error(format!(
                    "cannot write column {} to {}: {e}",
                    self.name,
                    spill.dir.display()
                ));
                spill.resident_bytes.fetch_sub(self.counted_bytes, Ordering::Relaxed);
                self.counted_bytes = 0;
                self.spill = None;
                false
            }
        }
    }

    /// The spill it writes to, if any.
    pub fn spill_handle(&self) -> Option<Arc<Spill>> {
        self.spill.clone()
    }

    /// Makes room for `n` more values in memory.
    pub fn reserve(&mut self, n: usize) {
        self.mem.reserve_exact(n);
    }

    /// An in-memory column holding `values`.
    pub fn from_vec(name: &'static str, values: Vec<T>) -> Column<T> {
        let mut column = Column::new(name, None);
        column.mem = values;
        column
    }

    fn write_out(&mut self, spill: &Spill) -> std::io::Result<()> {
        if self.file.is_none() {
            self.file = Some(spill.file(self.name)?);
        }
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        let mut bytes = vec![0u8; CHUNK_VALUES.min(self.mem.len()) * T::BYTES];
        for part in self.mem.chunks(CHUNK_VALUES) {
            let out = &mut bytes[..part.len() * T::BYTES];
            for (slot, &v) in out.chunks_exact_mut(T::BYTES).zip(part) {
                v.put(slot);
            }
            file.write_all(out)?;
        }
        let written = (self.mem.len() * T::BYTES) as u64;
        self.on_disk += self.mem.len();
        spill.spilled_bytes.fetch_add(written, Ordering::Relaxed);
        spill.resident_bytes.fetch_sub(self.counted_bytes, Ordering::Relaxed);
        self.counted_bytes = 0;
        // A fresh buffer: the old one's pages go back to the system.
        self.mem = Vec::with_capacity(CHUNK_VALUES);
        Ok(())
    }

    /// Hands every value to `f`, in order, a chunk at a time (`CHUNK_VALUES` from the file,
    /// then the values in memory as one slice). A failed read stops the walk and is noted in
    /// the spill (`Spill::error`), which the run reports.
    pub fn for_each_chunk(&self, mut f: impl FnMut(&[T])) {
        let mut values: Vec<T> = Vec::new();
        let mut at = 0;
        while at < self.on_disk {
            let n = CHUNK_VALUES.min(self.on_disk - at);
            if !self.read_noted(at, n, &mut values) {
                return;
            }
            f(&values);
            at += n;
        }
        if !self.mem.is_empty() {
            f(&self.mem);
        }
    }

    /// `read_into`, a failure noted in the spill (which the run reports); false on one.
    fn read_noted(&self, at: usize, n: usize, values: &mut Vec<T>) -> bool {
        let read = self.read_into(at, n, values);
        if let (Err(e), Some(spill)) = (&read, &self.spill) {
            spill.note_read_error(format!("cannot read column {} back: {e}", self.name));
        }
        read.is_ok()
    }

    /// Values `[at, at + n)` into `values`, from the file and from memory as they lie.
    pub(crate) fn read_into(
        &self,
        at: usize,
        n: usize,
        values: &mut Vec<T>,
    ) -> std::io::Result<()> {
        values.clear();
        let from_file = n.min(self.on_disk.saturating_sub(at));
        if from_file > 0 {
            let Some(file) = &self.file else { return Ok(()) };
            let mut bytes = vec![0u8; from_file * T::BYTES];
            file.read_exact_at(&mut bytes, (at * T::BYTES) as u64)?;
            values.extend(bytes.chunks_exact(T::BYTES).map(T::get));
        }
        let start = (at + from_file).saturating_sub(self.on_disk);
        values.extend_from_slice(&self.mem[start..start + (n - from_file)]);
        Ok(())
    }

    /// The values from `at` on, when they are all in memory (`at` at or past the file's end).
    pub(crate) fn tail_from(&self, at: usize) -> &[T] {
        &self.mem[at.saturating_sub(self.on_disk).min(self.mem.len())..]
    }

    /// Values on disk (a prefix of the column).
    pub(crate) fn on_disk(&self) -> usize {
        self.on_disk
    }

    /// The values still in memory (the column's tail).
    pub(crate) fn in_memory(&self) -> &[T] {
        &self.mem
    }

    /// Every value in order, read a chunk at a time (a failed read ends it early, noted in the
    /// spill as `for_each_chunk` notes it).
    pub fn values(&self) -> impl Iterator<Item = T> + '_ {
        let mut buf: Vec<T> = Vec::new();
        let (mut at, mut i) = (0usize, 0usize);
        std::iter::from_fn(move || {
            if i == buf.len() {
                let n = CHUNK_VALUES.min(self.len().saturating_sub(at));
                if n == 0 {
                    return None;
                }
                if !self.read_noted(at, n, &mut buf) {
                    return None;
                }
                at += n;
                i = 0;
            }
            i += 1;
            buf.get(i - 1).copied()
        })
    }

    /// Every value, collected in memory (tests and small columns).
    pub fn to_vec(&self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        self.for_each_chunk(|chunk| out.extend_from_slice(chunk));
        out
    }
}

impl<T: Plain> Default for Column<T> {
    fn default() -> Self {
        Column::new("column", None)
    }
}

impl<T: Plain> Drop for Column<T> {
    fn drop(&mut self) {
        if let Some(spill) = &self.spill {
            spill.resident_bytes.fetch_sub(
                self.counted_bytes.min(spill.resident_bytes.load(Ordering::Relaxed)),
                Ordering::Relaxed,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("loadgen-column-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_column_over_its_budget_spills_and_reads_back_every_value_in_order() {
        let dir = temp_dir("spill");
        let spill = Spill::new(&dir, 0).unwrap();
        let mut column: Column<u64> = Column::new("t", Some(spill.clone()));
        let n = CHUNK_VALUES * 3 + 17;
        (0..n as u64).for_each(|v| column.push_spilling(v * 3));
        assert!(column.spilled());
        assert_eq!(column.len(), n);
        assert_eq!(column.as_slice(), None);
        assert_eq!(column.to_vec(), (0..n as u64).map(|v| v * 3).collect::<Vec<_>>());
        assert_eq!(spill.spilled_bytes(), (CHUNK_VALUES * 3 * 8) as u64);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "files are unlinked");
        assert_eq!(spill.error(), None);
    }

    #[test]
    fn a_run_the_disk_cannot_hold_is_refused_with_its_numbers() {
        let per = DISK_BYTES_PER_SAMPLE;
        assert_eq!(disk_check((1_000, per), 1_000 * per, 0), Ok(()), "it all fits in memory");
        assert_eq!(disk_check((1_000, per), 0, 1_000 * per), Ok(()));
        let with_tokenizer = per + TOKENIZER_DISK_BYTES_PER_SAMPLE;
        assert!(
            disk_check((1_000, with_tokenizer), 0, 1_000 * per).is_err(),
            "a tokenizer's share"
        );
        let why = disk_check((100_000_000, per), 256 << 20, 1 << 30).unwrap_err();
        assert!(why.starts_with("100000000 samples need up to 14.28 GiB"), "{why}");
        assert!(
            why.ends_with("past the 0.25 GiB kept in memory) and only 1.00 GiB is free"),
            "{why}"
        );
    }

    #[test]
    fn a_value_that_cannot_be_read_back_is_a_read_failure_not_a_silent_gap() {
        let spill = Spill::new(&temp_dir("cut"), 0).unwrap();
        let mut column: Column<u64> = Column::new("cut", Some(spill.clone()));
        (0..CHUNK_VALUES as u64 * 2).for_each(|v| column.push_spilling(v));
        assert!(!spill.read_failed());
        column.file.as_ref().unwrap().set_len(8).unwrap();
        assert!(column.to_vec().len() < CHUNK_VALUES * 2, "the walk stopped");
        assert!(spill.read_failed());
        assert!(spill.error().unwrap().contains("cannot read column cut back"));
    }

    #[test]
    fn a_column_under_its_budget_stays_one_slice() {
        let dir = temp_dir("fits");
        let spill = Spill::new(&dir, 1 << 30).unwrap();
        let mut column: Column<f64> = Column::new("f", Some(spill.clone()));
        (0..CHUNK_VALUES * 2).for_each(|v| column.push_spilling(v as f64 / 2.0));
        assert!(!column.spilled());
        assert_eq!(column.as_slice().map(<[f64]>::len), Some(CHUNK_VALUES * 2));
        assert_eq!(spill.spilled_bytes(), 0);
        drop(column);
        assert_eq!(spill.resident_bytes.load(Ordering::Relaxed), 0, "a dropped column uncounts");
    }

    #[test]
    fn a_column_that_cannot_write_its_file_keeps_its_values_and_says_why() {
        let dir = temp_dir("gone");
        let spill = Spill::new(&dir, 0).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        let mut column: Column<u32> = Column::new("lost", Some(spill.clone()));
        (0..CHUNK_VALUES as u32 * 2).for_each(|v| column.push_spilling(v));
        assert_eq!(column.to_vec().len(), CHUNK_VALUES * 2);
        let error = spill.error().unwrap();
        assert!(error.contains("cannot write column lost"), "{error}");
    }
}
