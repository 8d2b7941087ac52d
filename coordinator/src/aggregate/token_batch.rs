//! Outputs waiting for the client tokenizer: a `TokenBatch` holds many in one text buffer, and
//! `ParkedBatches` keeps the full batches that would wait in memory past the spill's budget in
//! an unlinked file, to be read back, in order, when there are threads to count them.

use std::fs::File;
use std::os::unix::fs::FileExt;

use crate::metrics::column::Spill;

/// A batch goes to the pool once it holds this many jobs…
pub const TOKEN_BATCH_JOBS: usize = 1024;
/// …or this many bytes of text.
pub const TOKEN_BATCH_TEXT_BYTES: usize = 128 << 10;

/// The row a job's counts go to: its arrival index among the aggregator's rows and its
/// completion stamp (together they name a row already written to a file), and its first
/// chunk's stamp (the live view's TPOT needs the span between the two).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RowKey {
    pub index: u64,
    pub complete_ns: u64,
    pub first_chunk_ns: Option<u64>,
}

/// Where a job's text lies in its batch, and its row: 32 bytes a job.
#[derive(Debug, Clone, Copy)]
struct JobSpan {
    index: u64,
    complete_ns: u64,
    /// `0` = no first chunk (as the wire has it).
    first_chunk_ns: u64,
    /// End of the text in the batch's buffer (its start is the previous job's end).
    end_bytes: u32,
    /// Byte offset, from the job's start, of the text after the first chunk (TPOT);
    /// `NO_TPOT` = no TPOT for this sample.
    tpot_from_bytes: u32,
}

const NO_TPOT: u32 = u32::MAX;
const JOB_FILE_BYTES: usize = 8 * 3 + 4 * 2;
/// A parked batch's header: its job count and its text's length.
const HEADER_BYTES: usize = 8;

impl JobSpan {
    fn key(&self) -> RowKey {
        RowKey {
            index: self.index,
            complete_ns: self.complete_ns,
            first_chunk_ns: (self.first_chunk_ns != 0).then_some(self.first_chunk_ns),
        }
    }

    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.index.to_le_bytes());
        out.extend_from_slice(&self.complete_ns.to_le_bytes());
        out.extend_from_slice(&self.first_chunk_ns.to_le_bytes());
        out.extend_from_slice(&self.end_bytes.to_le_bytes());
        out.extend_from_slice(&self.tpot_from_bytes.to_le_bytes());
    }

    fn get(b: &[u8]) -> JobSpan {
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default());
        JobSpan {
            index: u64_at(0),
            complete_ns: u64_at(8),
            first_chunk_ns: u64_at(16),
            end_bytes: u32_at(24),
            tpot_from_bytes: u32_at(28),
        }
    }
}

/// Outputs to count, gathered so that a send and an allocation serve many samples.
#[derive(Debug, Default)]
pub struct TokenBatch {
    text: String,
    jobs: Vec<JobSpan>,
}

impl TokenBatch {
    /// Bookkeeping bytes per job beside its text.
    pub const JOB_BYTES: usize = std::mem::size_of::<JobSpan>();

    pub(super) fn with_capacity() -> TokenBatch {
        TokenBatch {
            text: String::with_capacity(TOKEN_BATCH_TEXT_BYTES),
            jobs: Vec::with_capacity(TOKEN_BATCH_JOBS),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.jobs.len()
    }

    pub(super) fn is_full(&self) -> bool {
        self.jobs.len() >= TOKEN_BATCH_JOBS || self.text.len() >= TOKEN_BATCH_TEXT_BYTES
    }

    /// Keeps only the memory the batch uses (it may wait until the end of the run).
    pub(super) fn shrink(&mut self) {
        self.text.shrink_to_fit();
        self.jobs.shrink_to_fit();
    }

    /// Heap bytes this batch holds (what a pending job costs, measured by the tests).
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.jobs.capacity() * Self::JOB_BYTES
    }

    /// Appends one output; `false` when it cannot be addressed in this batch (over 4 GiB).
    pub(super) fn push(&mut self, row: RowKey, output: &str, tpot_from: Option<usize>) -> bool {
        let Ok(end_bytes) = u32::try_from(self.text.len() + output.len()) else { return false };
        let tpot_from_bytes = tpot_from.and_then(|f| u32::try_from(f).ok()).unwrap_or(NO_TPOT);
        self.text.push_str(output);
        self.jobs.push(JobSpan {
            index: row.index,
            complete_ns: row.complete_ns,
            first_chunk_ns: row.first_chunk_ns.unwrap_or(0),
            end_bytes,
            tpot_from_bytes,
        });
        true
    }

    /// Each job's row, whole text and TPOT offset.
    pub(super) fn iter(&self) -> impl Iterator<Item = (RowKey, &str, Option<usize>)> + '_ {
        let mut start = 0usize;
        self.jobs.iter().map(move |job| {
            let end = job.end_bytes as usize;
            // Ends are checked when a batch is read back: every one is a char boundary.
            let text = self.text.get(start..end).unwrap_or_default();
            start = end;
            let tpot = (job.tpot_from_bytes != NO_TPOT).then_some(job.tpot_from_bytes as usize);
            (job.key(), text, tpot)
        })
    }

    /// The header and the jobs as a parked batch starts (its text follows).
    fn head_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_BYTES + self.jobs.len() * JOB_FILE_BYTES);
        out.extend_from_slice(&(self.jobs.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.text.len() as u32).to_le_bytes());
        self.jobs.iter().for_each(|j| j.put(&mut out));
        out
    }
}

/// Full batches written to an unlinked file in the spill's directory instead of waiting in
/// memory, read back in the order written.
#[derive(Debug, Default)]
pub struct ParkedBatches {
    file: Option<File>,
    /// Where the next batch is written.
    write_at: u64,
    /// Where the next batch to read back starts.
    read_at: u64,
    /// Batches written and not read back.
    batches: u64,
    /// A write failed: batches stay in memory from then on.
    write_failed: bool,
}

impl ParkedBatches {
    /// True when no batch waits in the file.
    pub fn is_empty(&self) -> bool {
        self.batches == 0
    }

    /// Writes `batch` to the file; hands it back when the write fails (noted in the spill:
    /// from then on batches stay in memory).
    pub fn park(&mut self, spill: &Spill, batch: TokenBatch) -> Result<(), TokenBatch> {
        if self.write_failed {
            return Err(batch);
        }
        match self.write(spill, &batch) {
            Ok(bytes) => {
                spill.note_spilled(bytes);
                self.batches += 1;
                Ok(())
            }
            Err(e) => {
                let dir = spill.dir().display();
                spill.note_error(format!("cannot write token_jobs to {dir}: {e}"));
                self.write_failed = true;
                Err(batch)
            }
        }
    }

    fn write(&mut self, spill: &Spill, batch: &TokenBatch) -> std::io::Result<u64> {
        if self.file.is_none() {
            self.file = Some(spill.file("token_jobs")?);
        }
        let Some(file) = &self.file else { return Ok(0) };
        let head = batch.head_bytes();
        file.write_all_at(&head, self.write_at)?;
        file.write_all_at(batch.text.as_bytes(), self.write_at + head.len() as u64)?;
        let bytes = (head.len() + batch.text.len()) as u64;
        // Only a whole batch moves the end: a failed write leaves no part of one behind.
        self.write_at += bytes;
        Ok(bytes)
    }

    /// The next parked batch, or `None` when none is left. A failed read is noted in the spill
    /// (the run's figures then miss its jobs, which stay uncounted) and ends the reading.
    pub fn unpark(&mut self, spill: &Spill) -> Option<TokenBatch> {
        if self.batches == 0 {
            return None;
        }
        match self.read() {
            Ok(batch) => {
                self.batches -= 1;
                Some(batch)
            }
            Err(e) => {
                spill.note_read_error(format!("cannot read token_jobs back: {e}"));
                self.batches = 0;
                None
            }
        }
    }

    fn read(&mut self) -> std::io::Result<TokenBatch> {
        let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what);
        let Some(file) = &self.file else { return Err(bad("no file")) };
        let mut header = [0u8; HEADER_BYTES];
        file.read_exact_at(&mut header, self.read_at)?;
        let n_jobs = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let text_len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]) as usize;
        if n_jobs > TOKEN_BATCH_JOBS {
            return Err(bad("a batch with more jobs than a batch holds"));
        }
        let mut jobs = vec![0u8; n_jobs * JOB_FILE_BYTES];
        file.read_exact_at(&mut jobs, self.read_at + HEADER_BYTES as u64)?;
        let mut text = vec![0u8; text_len];
        file.read_exact_at(&mut text, self.read_at + (HEADER_BYTES + jobs.len()) as u64)?;
        let text = String::from_utf8(text).map_err(|_| bad("text that is not UTF-8"))?;
        let jobs: Vec<JobSpan> = jobs.chunks_exact(JOB_FILE_BYTES).map(JobSpan::get).collect();
        let mut start = 0;
        for job in &jobs {
            let end = job.end_bytes as usize;
            if end < start || !text.is_char_boundary(end) {
                return Err(bad("a job's text out of its batch"));
            }
            start = end;
        }
        self.read_at += (HEADER_BYTES + jobs.len() * JOB_FILE_BYTES + text.len()) as u64;
        Ok(TokenBatch { text, jobs })
    }
}

#[cfg(test)]
impl ParkedBatches {
    /// Swaps the file for one that reads nothing, as a disk that fails would.
    pub(super) fn break_file_for_test(&mut self) {
        self.file = File::open("/dev/null").ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u64) -> RowKey {
        RowKey { index: i, complete_ns: 1_000 + i, first_chunk_ns: (i % 2 == 0).then_some(i) }
    }

    fn contents(b: &TokenBatch) -> Vec<(RowKey, String, Option<usize>)> {
        b.iter().map(|(k, t, f)| (k, t.to_string(), f)).collect()
    }

    #[test]
    fn a_pending_job_costs_its_text_and_thirty_two_bytes() {
        assert_eq!(TokenBatch::JOB_BYTES, 32);
        let mut b = TokenBatch::with_capacity();
        let text = "x".repeat(160);
        while !b.is_full() {
            assert!(b.push(key(b.len() as u64), &text, Some(10)));
        }
        b.shrink();
        let per_job = b.heap_bytes() as f64 / b.len() as f64;
        assert!((per_job - 192.0).abs() < 1.0, "{per_job} bytes a job");
    }

    #[test]
    fn parked_batches_come_back_whole_and_in_order() {
        let dir = std::env::temp_dir().join(format!("loadgen-parked-{}", std::process::id()));
        let spill = Spill::new(&dir, 0).unwrap();
        let mut parked = ParkedBatches::default();
        let mut sent = Vec::new();
        for b in 0..5u64 {
            let mut batch = TokenBatch::with_capacity();
            for i in 0..(b * 100 + 1) {
                let text = format!("héllo {b} {i}");
                assert!(batch.push(key(b * 1_000 + i), &text, (i % 3 > 0).then_some(2)));
            }
            sent.push(contents(&batch));
            assert!(parked.park(&spill, batch).is_ok());
        }
        let mut back = Vec::new();
        while let Some(batch) = parked.unpark(&spill) {
            back.push(contents(&batch));
        }
        assert!(parked.is_empty());
        assert_eq!(back, sent);
        assert_eq!(spill.error(), None);
        assert!(spill.spilled_bytes() > 0);
        let mut batch = TokenBatch::with_capacity();
        assert!(batch.push(key(1), "abc", None));
        assert!(parked.park(&spill, batch).is_ok());
        parked.break_file_for_test();
        assert!(parked.unpark(&spill).is_none());
        assert!(parked.is_empty(), "a failed read ends the reading");
        assert!(spill.read_failed());
    }
}
