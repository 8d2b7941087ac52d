//! Counting the replay's outputs on every core while the log is still being read.
//!
//! The replay reads and applies the log on its own thread and hands each full batch of
//! outputs to one counting thread per core; the counts come back in any order and are written
//! into their rows by slot, so nothing the report computes from them depends on which thread
//! counted what: the rows are the ones a sequential count gives, bit for bit.

use std::thread::JoinHandle;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use loadgen_plan::tokenizer::Tokenizer;

/// A batch goes to the counting threads once it holds this many outputs…
pub(super) const TOKEN_BATCH_JOBS: usize = 2048;
/// …or this many bytes of text: small enough that the threads start early and share the work
/// evenly, large enough that a hand-over costs nothing beside the counting.
pub(super) const TOKEN_BATCH_BYTES: usize = 2 << 20;

/// Full batches queued per counting thread before the reader waits for one: the reader stays
/// ahead of the counting without holding more than a few megabytes of text.
const QUEUED_PER_THREAD: usize = 2;

/// One output to count: its row, its bytes in the batch text, where its TPOT text starts.
#[derive(Debug, Clone, Copy)]
pub(super) struct TokenJob {
    pub slot: usize,
    pub start: usize,
    pub end: usize,
    pub tpot_from: Option<usize>,
}

/// Outputs gathered for one hand-over.
#[derive(Debug, Default)]
pub(super) struct TokenBatch {
    pub jobs: Vec<TokenJob>,
    pub text: String,
}

impl TokenBatch {
    pub(super) fn is_full(&self) -> bool {
        self.jobs.len() >= TOKEN_BATCH_JOBS || self.text.len() >= TOKEN_BATCH_BYTES
    }
}

/// A counted output: OSL (`None`: the tokenizer failed) and the TPOT denominator.
pub(super) struct TokenCount {
    pub slot: usize,
    pub osl: Option<u32>,
    pub tpot_tokens: Option<u32>,
}

/// The counting threads: one tokenizer copy each, so they share no model caches.
pub(super) struct CountPool {
    jobs: Option<Sender<TokenBatch>>,
    results: Receiver<Vec<TokenCount>>,
    threads: Vec<JoinHandle<()>>,
    /// Counts on the reader's thread when no counting thread could be started.
    inline: Option<Tokenizer>,
    inline_done: Vec<Vec<TokenCount>>,
}

impl CountPool {
    /// Starts `threads` counting threads (at least one; the reader counts itself when none
    /// can be started).
    pub(super) fn start(tok: &Tokenizer, threads: usize) -> CountPool {
        let (job_tx, job_rx) = bounded::<TokenBatch>(QUEUED_PER_THREAD * threads.max(1));
        let (result_tx, result_rx) = unbounded::<Vec<TokenCount>>();
        let handles: Vec<JoinHandle<()>> = (0..threads.max(1))
            .filter_map(|i| {
                let tok = tok.clone_for_thread();
                let jobs = job_rx.clone();
                let results = result_tx.clone();
                let name = format!("replay-count-{i}");
                let body = move || {
                    for batch in jobs.iter() {
                        if results.send(count_jobs(&tok, &batch.text, &batch.jobs)).is_err() {
                            return;
                        }
                    }
                };
                std::thread::Builder::new().name(name).spawn(body).ok()
            })
            .collect();
        let inline = handles.is_empty().then(|| tok.clone_for_thread());
        CountPool {
            jobs: (!handles.is_empty()).then_some(job_tx),
            results: result_rx,
            threads: handles,
            inline,
            inline_done: Vec::new(),
        }
    }

    /// Hands `batch` to the counting threads; waits while all are busy and the queue is full.
    pub(super) fn send(&mut self, batch: TokenBatch) {
        if let Some(tok) = &self.inline {
            self.inline_done.push(count_jobs(tok, &batch.text, &batch.jobs));
            return;
        }
        // A send fails only when every thread is gone (a tokenizer panic): `finish` raises it.
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(batch);
        }
    }

    /// Counts ready now, without waiting.
    pub(super) fn ready(&mut self) -> Vec<Vec<TokenCount>> {
        let mut done = std::mem::take(&mut self.inline_done);
        done.extend(self.results.try_iter());
        done
    }

    /// Waits for every count; a counting thread's panic is raised here, as the counting
    /// on the reader's own thread would have raised it.
    pub(super) fn finish(mut self) -> Vec<Vec<TokenCount>> {
        self.jobs.take();
        for handle in std::mem::take(&mut self.threads) {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
        self.ready()
    }
}

/// Counts `jobs` as the run's token pool counts a job (`count_job`): the whole output, and
/// the text after the first chunk when there is some.
pub(super) fn count_jobs(tok: &Tokenizer, text: &str, jobs: &[TokenJob]) -> Vec<TokenCount> {
    jobs.iter()
        .map(|job| {
            let output = &text[job.start..job.end];
            let tpot_tokens = job
                .tpot_from
                .and_then(|from| output.get(from..))
                .and_then(|rest| tok.count(rest).ok());
            TokenCount { slot: job.slot, osl: tok.count(output).ok(), tpot_tokens }
        })
        .collect()
}
