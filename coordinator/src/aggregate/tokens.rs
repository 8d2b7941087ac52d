//! The client-basis tokenizer pool: counts output tokens off the aggregator thread, live on
//! threads of their own or after the last sample, and never makes the aggregator wait.
//!
//! The aggregator copies each output into an open `TokenBatch` (one text buffer, 16 bytes of
//! bookkeeping a job) and hands full batches to an unbounded channel: submitting never blocks,
//! so counting can never hold back the records, the workers or the measured rate. What is not
//! counted yet costs its text plus `TokenBatch::JOB_BYTES`. Live threads (the plan's
//! `metrics_tokenizer_workers`, on cores the load does not use) count while the run goes on;
//! after the last sample `TokenPool::finish` adds a drain pool sized to the machine and waits,
//! up to the drain timeout, for the rest.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};

/// Counts the tokens of a text under the run's client tokenizer.
pub type TokenCounter = Arc<dyn Fn(&str) -> Result<u32, String> + Send + Sync>;

/// A batch goes to the pool once it holds this many jobs…
pub const TOKEN_BATCH_JOBS: usize = 1024;
/// …or this many bytes of text.
pub const TOKEN_BATCH_TEXT_BYTES: usize = 128 << 10;
/// A partly filled batch goes to live threads once it is this old, so live counts stay live
/// in a slow run.
pub const TOKEN_BATCH_MAX_AGE: Duration = Duration::from_millis(50);

/// How often the end-of-run drain looks whether its threads are still alive.
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// How the pool counts: its threads, where they run, and how long the end-of-run drain may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenPoolPlan {
    /// Threads that count while the run goes on; 0 = everything is counted after the last sample.
    pub live_threads: usize,
    /// Cores the live threads are pinned to, in turn; empty = unpinned.
    pub live_cores: Vec<usize>,
    /// Threads counting after the last sample, live ones included (at least one).
    pub drain_threads: usize,
    /// Cores the drain threads are pinned to, in turn; empty = unpinned.
    pub drain_cores: Vec<usize>,
    /// How long the end-of-run drain may take; `None` = until every job is counted.
    pub drain_timeout: Option<Duration>,
}

/// Where a job's text lies in its batch: 16 bytes a job.
#[derive(Debug, Clone, Copy)]
struct JobSpan {
    slot: u64,
    /// End of the text in the batch's buffer (its start is the previous job's end).
    end_bytes: u32,
    /// Byte offset, from the job's start, of the text after the first chunk (TPOT);
    /// `NO_TPOT` = no TPOT for this sample.
    tpot_from_bytes: u32,
}

const NO_TPOT: u32 = u32::MAX;

/// Outputs to count, gathered so that a send and an allocation serve many samples.
#[derive(Debug, Default)]
pub struct TokenBatch {
    text: String,
    jobs: Vec<JobSpan>,
}

impl TokenBatch {
    /// Bookkeeping bytes per job beside its text.
    pub const JOB_BYTES: usize = std::mem::size_of::<JobSpan>();

    fn with_capacity() -> TokenBatch {
        TokenBatch {
            text: String::with_capacity(TOKEN_BATCH_TEXT_BYTES),
            jobs: Vec::with_capacity(TOKEN_BATCH_JOBS),
        }
    }

    fn len(&self) -> usize {
        self.jobs.len()
    }

    fn is_full(&self) -> bool {
        self.jobs.len() >= TOKEN_BATCH_JOBS || self.text.len() >= TOKEN_BATCH_TEXT_BYTES
    }

    /// Heap bytes this batch holds (what a pending job costs, measured by the tests).
    pub fn heap_bytes(&self) -> usize {
        self.text.capacity() + self.jobs.capacity() * Self::JOB_BYTES
    }

    /// Appends one output; `false` when it cannot be addressed in this batch (over 4 GiB).
    fn push(&mut self, slot: u64, output: &str, tpot_from: Option<usize>) -> bool {
        let Ok(end_bytes) = u32::try_from(self.text.len() + output.len()) else { return false };
        let tpot_from_bytes = tpot_from.and_then(|f| u32::try_from(f).ok()).unwrap_or(NO_TPOT);
        self.text.push_str(output);
        self.jobs.push(JobSpan { slot, end_bytes, tpot_from_bytes });
        true
    }

    /// Each job's slot, whole text and TPOT offset.
    fn iter(&self) -> impl Iterator<Item = (u64, &str, Option<usize>)> + '_ {
        let mut start = 0usize;
        self.jobs.iter().map(move |job| {
            let end = job.end_bytes as usize;
            let text = &self.text[start..end];
            start = end;
            let tpot = (job.tpot_from_bytes != NO_TPOT).then_some(job.tpot_from_bytes as usize);
            (job.slot, text, tpot)
        })
    }
}

/// A counted output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenResult {
    pub slot: usize,
    pub osl: Result<u32, String>,
    pub tpot_tokens: Option<u32>,
}

/// What a counting thread needs.
#[derive(Clone)]
struct Crew {
    counter: TokenCounter,
    jobs: Receiver<TokenBatch>,
    results: Sender<Vec<TokenResult>>,
    cancel: Arc<AtomicBool>,
}

pub struct TokenPool {
    plan: TokenPoolPlan,
    crew: Crew,
    open: TokenBatch,
    opened_at: Instant,
    jobs: Option<Sender<TokenBatch>>,
    results: Receiver<Vec<TokenResult>>,
    threads: Vec<JoinHandle<()>>,
    /// Jobs submitted and not yet counted (the open batch's included).
    pub pending: u64,
}

impl TokenPool {
    /// Starts the plan's live threads (none when counting is deferred to the end of the run).
    pub fn start(counter: TokenCounter, plan: TokenPoolPlan) -> std::io::Result<TokenPool> {
        let (job_tx, job_rx) = unbounded::<TokenBatch>();
        let (result_tx, result_rx) = unbounded::<Vec<TokenResult>>();
        let crew = Crew {
            counter,
            jobs: job_rx,
            results: result_tx,
            cancel: Arc::new(AtomicBool::new(false)),
        };
        let mut pool = TokenPool {
            crew,
            open: TokenBatch::with_capacity(),
            opened_at: Instant::now(),
            jobs: Some(job_tx),
            results: result_rx,
            threads: Vec::new(),
            pending: 0,
            plan,
        };
        let cores = pool.plan.live_cores.clone();
        pool.spawn(pool.plan.live_threads, &cores, "tokenizer")?;
        Ok(pool)
    }

    /// Whether counting waits for the end of the run.
    pub fn deferred(&self) -> bool {
        self.plan.live_threads == 0
    }

    fn spawn(&mut self, threads: usize, cores: &[usize], name: &str) -> std::io::Result<()> {
        let first = self.threads.len();
        for i in 0..threads {
            let crew = self.crew.clone();
            let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
            let thread_name = format!("{name}-{}", first + i);
            let handle =
                std::thread::Builder::new().name(thread_name.clone()).spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core_affinity::CoreId { id: core });
                    }
                    count_batches(&crew);
                    crate::thread_cpu::note(&thread_name, crate::thread_cpu::thread_cpu_ns());
                })?;
            self.threads.push(handle);
        }
        Ok(())
    }

    /// Queues one output for counting. Never blocks: the batch is buffered until a thread
    /// takes it.
    pub fn submit(&mut self, slot: usize, output: &str, tpot_from: Option<usize>) {
        if self.jobs.is_none() {
            return;
        }
        if self.open.len() == 0 {
            self.opened_at = Instant::now();
        }
        if !self.open.push(slot as u64, output, tpot_from) {
            // An output past what one batch addresses goes alone into its own batch.
            self.send_open();
            if !self.open.push(slot as u64, output, tpot_from) {
                return;
            }
        }
        self.pending += 1;
        if self.open.is_full() {
            self.send_open();
        }
    }

    fn send_open(&mut self) {
        if self.open.len() == 0 {
            return;
        }
        let mut batch = std::mem::replace(&mut self.open, TokenBatch::with_capacity());
        // Deferred batches wait until the end of the run: keep only what they use.
        batch.text.shrink_to_fit();
        batch.jobs.shrink_to_fit();
        if let Some(jobs) = &self.jobs {
            // The receiver lives in `crew` as long as the pool: a send cannot fail.
            let _ = jobs.send(batch);
        }
    }

    /// Hands a partly filled batch to the live threads once it is `TOKEN_BATCH_MAX_AGE` old.
    pub fn flush_if_stale(&mut self) {
        if !self.deferred()
            && self.open.len() > 0
            && self.opened_at.elapsed() >= TOKEN_BATCH_MAX_AGE
        {
            self.send_open();
        }
    }

    /// Results ready now, without waiting.
    pub fn try_results(&mut self) -> impl Iterator<Item = TokenResult> + '_ {
        let batches: Vec<Vec<TokenResult>> = self.results.try_iter().collect();
        self.pending -= batches.iter().map(|b| b.len() as u64).sum::<u64>();
        batches.into_iter().flatten()
    }

    /// After the last sample: sends what is buffered, starts the drain threads and hands every
    /// result to `apply` until all are counted or `limit` passes (`None`: no limit; see
    /// `drain_limit`). Returns the jobs left uncounted.
    pub fn finish(&mut self, limit: Option<Duration>, mut apply: impl FnMut(TokenResult)) -> u64 {
        self.send_open();
        // No more jobs: the threads end when the queue is empty.
        self.jobs.take();
        let extra = self.plan.drain_threads.max(1).saturating_sub(self.threads.len());
        let cores = drain_core_order(&self.plan);
        if let Err(e) = self.spawn(extra, &cores, "tokenizer-drain") {
            if self.threads.is_empty() {
                eprintln!("warning: cannot start a tokenizer drain thread: {e}");
            }
        }
        let deadline = limit.map(|t| Instant::now() + t);
        // A thread that died (a tokenizer panic) ends the wait too, even without a timeout.
        while self.pending > 0 && self.threads.iter().any(|t| !t.is_finished()) {
            let wait = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(DRAIN_POLL),
                None => DRAIN_POLL,
            };
            match self.results.recv_timeout(wait) {
                Ok(batch) => {
                    self.pending -= batch.len() as u64;
                    batch.into_iter().for_each(&mut apply);
                }
                Err(RecvTimeoutError::Timeout) if deadline.is_none_or(|d| Instant::now() < d) => {}
                Err(_) => break,
            }
        }
        self.close();
        // Results sent between the last wait and the threads' stop still count.
        let late: Vec<TokenResult> = self.try_results().collect();
        late.into_iter().for_each(apply);
        self.pending
    }

    /// The plan's drain timeout, for this run's end.
    pub fn drain_limit(&self, interrupted: bool) -> Option<Duration> {
        drain_limit(self.plan.drain_timeout, interrupted)
    }

    /// Stops the threads after the job each is counting, and joins them.
    pub fn close(&mut self) {
        self.jobs.take();
        self.crew.cancel.store(true, Ordering::Release);
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

impl Drop for TokenPool {
    fn drop(&mut self) {
        self.close();
    }
}

/// The cores the drain threads take in turn: the plan's drain cores the live threads do not
/// hold first, so that every core gets a counting thread before any core gets a second.
fn drain_core_order(plan: &TokenPoolPlan) -> Vec<usize> {
    let live = &plan.live_cores;
    let held: Vec<usize> = if live.is_empty() {
        Vec::new()
    } else {
        (0..plan.live_threads).map(|i| live[i % live.len()]).collect()
    };
    let (free, taken): (Vec<usize>, Vec<usize>) =
        plan.drain_cores.iter().partition(|c| !held.contains(c));
    free.into_iter().chain(taken).collect()
}

/// How long the end-of-run count may take: the plan's drain timeout (`None` = no limit), and
/// after an interrupt `ABORT_GRACE` at most, so a Ctrl-C'd run still ends promptly with what
/// was counted (the rest pending) instead of counting a long deferred backlog.
pub fn drain_limit(timeout: Option<Duration>, interrupted: bool) -> Option<Duration> {
    match (timeout, interrupted) {
        (Some(t), true) => Some(t.min(crate::end::ABORT_GRACE)),
        (None, true) => Some(crate::end::ABORT_GRACE),
        (t, false) => t,
    }
}

/// A counting thread's loop: batches until the queue closes or the pool is cancelled.
fn count_batches(crew: &Crew) {
    while let Ok(batch) = crew.jobs.recv() {
        let mut out = Vec::with_capacity(batch.len());
        for (slot, text, tpot_from) in batch.iter() {
            if crew.cancel.load(Ordering::Acquire) {
                break;
            }
            out.push(count_job(&crew.counter, slot as usize, text, tpot_from));
        }
        let cancelled = out.len() < batch.len();
        if crew.results.send(out).is_err() || cancelled {
            return;
        }
    }
}

fn count_job(
    counter: &TokenCounter,
    slot: usize,
    text: &str,
    tpot_from: Option<usize>,
) -> TokenResult {
    let osl = counter(text);
    let tpot_tokens = match tpot_from {
        Some(from) if from < text.len() => text.get(from..).and_then(|t| counter(t).ok()),
        _ => None,
    };
    TokenResult { slot, osl, tpot_tokens }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chars() -> TokenCounter {
        Arc::new(|s: &str| Ok(s.chars().count() as u32))
    }

    fn plan(live_threads: usize, drain_threads: usize) -> TokenPoolPlan {
        TokenPoolPlan {
            live_threads,
            live_cores: Vec::new(),
            drain_threads,
            drain_cores: Vec::new(),
            drain_timeout: None,
        }
    }

    fn finish_sorted(pool: &mut TokenPool) -> (Vec<TokenResult>, u64) {
        let mut got = Vec::new();
        let left = pool.finish(pool.drain_limit(false), |r| got.push(r));
        got.sort_by_key(|r| r.slot);
        (got, left)
    }

    #[test]
    fn counts_whole_output_and_the_text_after_the_first_chunk() {
        for live in [0, 2] {
            let mut pool = TokenPool::start(chars(), plan(live, 2)).unwrap();
            pool.submit(3, "hello world", Some(5));
            pool.submit(4, "abc", Some(3));
            pool.submit(5, "héllo", None);
            let (got, left) = finish_sorted(&mut pool);
            assert_eq!(left, 0);
            assert_eq!(got.len(), 3, "live {live}");
            assert_eq!((got[0].slot, got[0].osl.clone(), got[0].tpot_tokens), (3, Ok(11), Some(6)));
            assert_eq!(got[1].tpot_tokens, None, "nothing after the first chunk: no TPOT");
            assert_eq!((got[2].osl.clone(), got[2].tpot_tokens), (Ok(5), None));
        }
    }

    /// A counter that never finishes stands for a tokenizer that cannot keep up: submitting
    /// must still return at once, however many jobs wait.
    #[test]
    fn submit_never_blocks_when_the_pool_is_busy() {
        let gate = Arc::new(std::sync::Mutex::new(()));
        let held = gate.lock().unwrap();
        let g = gate.clone();
        let blocked: TokenCounter = Arc::new(move |s: &str| {
            let _wait = g.lock().unwrap();
            Ok(s.len() as u32)
        });
        let mut pool = TokenPool::start(blocked, plan(1, 1)).unwrap();
        let jobs = TOKEN_BATCH_JOBS * 200;
        // Submitting on another thread, so a submit that blocked fails the test, not hangs it.
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        let submitter = std::thread::spawn(move || {
            for slot in 0..jobs {
                pool.submit(slot, "some output text of a sample", None);
            }
            let _ = done_tx.send(());
            pool
        });
        let submitted = done_rx.recv_timeout(Duration::from_secs(60));
        drop(held);
        assert!(submitted.is_ok(), "submit waited on the tokenizer");
        let mut pool = submitter.join().unwrap();
        assert_eq!(pool.pending, jobs as u64);
        let (got, left) = finish_sorted(&mut pool);
        assert_eq!(left, 0);
        assert_eq!(got.len(), jobs);
        assert!(got.iter().enumerate().all(|(i, r)| r.slot == i && r.osl == Ok(28)));
    }

    #[test]
    fn deferred_counting_waits_for_the_drain() {
        let mut pool = TokenPool::start(chars(), plan(0, 3)).unwrap();
        assert!(pool.deferred());
        for slot in 0..(TOKEN_BATCH_JOBS * 3 + 7) {
            pool.submit(slot, "abcd", Some(1));
        }
        pool.flush_if_stale();
        assert_eq!(pool.try_results().count(), 0, "no thread counts before the end");
        let (got, left) = finish_sorted(&mut pool);
        assert_eq!(left, 0);
        assert_eq!(got.len(), TOKEN_BATCH_JOBS * 3 + 7);
        assert!(got.iter().all(|r| r.osl == Ok(4) && r.tpot_tokens == Some(3)));
    }

    #[test]
    fn live_threads_count_before_the_end_of_the_run() {
        let mut pool = TokenPool::start(chars(), plan(1, 1)).unwrap();
        pool.submit(0, "abc", None);
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut got = Vec::new();
        while got.is_empty() && Instant::now() < deadline {
            pool.flush_if_stale();
            got.extend(pool.try_results());
            std::thread::yield_now();
        }
        assert_eq!(got.len(), 1, "a partial batch reaches the live thread once stale");
        assert_eq!(pool.pending, 0);
    }

    #[test]
    fn drain_timeout_leaves_the_uncounted_jobs_pending() {
        let slow: TokenCounter = Arc::new(|s: &str| {
            std::thread::park_timeout(Duration::from_millis(20));
            Ok(s.len() as u32)
        });
        let mut p = plan(0, 1);
        p.drain_timeout = Some(Duration::from_millis(100));
        let mut pool = TokenPool::start(slow, p).unwrap();
        for slot in 0..500 {
            pool.submit(slot, "x", None);
        }
        let started = Instant::now();
        let (got, left) = finish_sorted(&mut pool);
        assert!(started.elapsed() < Duration::from_secs(10), "the drain outlived its timeout");
        assert!(left > 0, "the drain timed out, yet nothing is pending");
        assert_eq!(got.len() as u64 + left, 500, "every job is counted or pending");
    }

    #[test]
    fn an_interrupt_bounds_the_drain_by_the_abort_grace() {
        let grace = crate::end::ABORT_GRACE;
        let minute = Duration::from_secs(60);
        let ms = Duration::from_millis(5);
        let cases = [
            (None, false, None),
            (Some(minute), false, Some(minute)),
            (None, true, Some(grace)),
            (Some(minute), true, Some(grace)),
            (Some(ms), true, Some(ms)),
        ];
        for (timeout, interrupted, want) in cases {
            assert_eq!(drain_limit(timeout, interrupted), want, "{timeout:?} {interrupted}");
        }
    }

    #[test]
    fn drain_threads_take_the_cores_the_live_threads_leave_first() {
        let mut p = plan(2, 6);
        p.live_cores = vec![4, 5];
        p.drain_cores = (0..6).collect();
        // The 4 drain threads added to the 2 live ones go on cores 0-3: one thread a core.
        assert_eq!(drain_core_order(&p), vec![0, 1, 2, 3, 4, 5]);
        p.live_cores = vec![1];
        p.live_threads = 1;
        assert_eq!(drain_core_order(&p), vec![0, 2, 3, 4, 5, 1]);
        p.drain_cores = Vec::new();
        assert!(drain_core_order(&p).is_empty(), "unpinned stays unpinned");
    }

    #[test]
    fn a_pending_job_costs_its_text_and_sixteen_bytes() {
        assert_eq!(TokenBatch::JOB_BYTES, 16);
        let mut b = TokenBatch::with_capacity();
        let text = "x".repeat(160);
        while !b.is_full() {
            assert!(b.push(b.len() as u64, &text, Some(10)));
        }
        b.text.shrink_to_fit();
        b.jobs.shrink_to_fit();
        let per_job = b.heap_bytes() as f64 / b.len() as f64;
        assert!((per_job - 176.0).abs() < 1.0, "{per_job} bytes a job");
    }
}
