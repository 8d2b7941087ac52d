//! The client-basis tokenizer pool: counts output tokens off the aggregator thread, live on
//! threads of their own or after the last sample, and never makes the aggregator wait.
//!
//! The aggregator copies each output into an open `TokenBatch` (one text buffer, 32 bytes of
//! bookkeeping a job: the text's place and the row it counts for) and hands full batches to an
//! unbounded channel: submitting never blocks, so counting can never hold back the records, the
//! workers or the measured rate. What is not counted yet costs its text plus
//! `TokenBatch::JOB_BYTES`, counted against the run's spill budget; past it the full batches
//! that would wait (all of them when counting is deferred, the ones behind a long queue when
//! live) go to a file instead (`ParkedBatches`), read back a batch at a time as threads are
//! free. Live threads (the plan's `metrics_tokenizer_workers`, on cores the load does not use)
//! count while the run goes on; after the last sample `TokenPool::finish` adds a drain pool
//! sized to the machine and waits, up to the drain timeout, for the rest.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};

use super::token_batch::ParkedBatches;
pub use super::token_batch::{RowKey, TokenBatch, TOKEN_BATCH_JOBS, TOKEN_BATCH_TEXT_BYTES};
use crate::metrics::column::Spill;

/// Counts the tokens of a text under the run's client tokenizer.
pub type TokenCounter = Arc<dyn Fn(&str) -> Result<u32, String> + Send + Sync>;

/// A partly filled batch goes to live threads once it is this old, so live counts stay live
/// in a slow run.
pub const TOKEN_BATCH_MAX_AGE: Duration = Duration::from_millis(50);

/// How often the end-of-run drain looks whether its threads are still alive.
const DRAIN_POLL: Duration = Duration::from_millis(100);

/// Past the spill's budget, live counting parks a full batch in the file when this many wait
/// in the queue already (the threads are behind).
const LIVE_BACKLOG_BATCHES: usize = 32;

/// The queue's batches may take this share of the spill's budget at most: the rest stays for
/// the rows, which then get their counts in place at the end instead of as patches (and the
/// memory the batches leave behind when counted is not taken again by the patches).
const QUEUE_BUDGET_SHARE: u64 = 4;

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

/// A counted output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenResult {
    pub row: RowKey,
    pub osl: Result<u32, String>,
    pub tpot_tokens: Option<u32>,
}

/// A batch's counts, and the memory the batch held while it waited.
struct Counted {
    results: Vec<TokenResult>,
    batch_bytes: u64,
}

/// What a counting thread needs.
#[derive(Clone)]
struct Crew {
    counter: TokenCounter,
    jobs: Receiver<TokenBatch>,
    results: Sender<Counted>,
    cancel: Arc<AtomicBool>,
}

pub struct TokenPool {
    plan: TokenPoolPlan,
    crew: Crew,
    open: TokenBatch,
    opened_at: Instant,
    jobs: Option<Sender<TokenBatch>>,
    results: Receiver<Counted>,
    threads: Vec<JoinHandle<()>>,
    /// Jobs submitted and not yet counted (the open batch's and the parked ones included).
    pub pending: u64,
    /// The run's spill: the queue's batches count against its budget, and past it they park.
    spill: Option<Arc<Spill>>,
    /// Bytes of the queued batches counted against the spill's budget.
    queued_bytes: u64,
    parked: ParkedBatches,
}

impl TokenPool {
    /// Starts the plan's live threads (none when counting is deferred to the end of the run).
    pub fn start(counter: TokenCounter, plan: TokenPoolPlan) -> std::io::Result<TokenPool> {
        let (job_tx, job_rx) = unbounded::<TokenBatch>();
        let (result_tx, result_rx) = unbounded::<Counted>();
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
            spill: None,
            queued_bytes: 0,
            parked: ParkedBatches::default(),
            plan,
        };
        let cores = pool.plan.live_cores.clone();
        pool.spawn(pool.plan.live_threads, &cores, "tokenizer")?;
        Ok(pool)
    }

    /// Counts the queued batches against `spill`'s budget and, past it, parks the waiting ones
    /// in its directory; `None` keeps everything in memory. Set before the first output.
    pub fn spill_into(mut self, spill: Option<Arc<Spill>>) -> TokenPool {
        self.spill = spill;
        self
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

    /// Queues one output for counting, for the row `row` names. Never blocks: the batch is
    /// buffered (in memory or parked in the spill's file) until a thread takes it.
    pub fn submit(&mut self, row: RowKey, output: &str, tpot_from: Option<usize>) {
        if self.jobs.is_none() {
            return;
        }
        if self.open.len() == 0 {
            self.opened_at = Instant::now();
        }
        if !self.open.push(row, output, tpot_from) {
            // An output past what one batch addresses goes alone into its own batch.
            self.send_open();
            if !self.open.push(row, output, tpot_from) {
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
        batch.shrink();
        if let Some(batch) = self.park_if_waiting(batch) {
            self.send(batch);
        }
    }

    /// Parks a batch that would wait once the spill's budget is spent, or the queue's share of
    /// it; hands back the ones to queue.
    fn park_if_waiting(&mut self, batch: TokenBatch) -> Option<TokenBatch> {
        let Some(spill) = &self.spill else { return Some(batch) };
        let backlog = self.jobs.as_ref().map_or(0, Sender::len);
        let waits = self.deferred() || backlog >= LIVE_BACKLOG_BATCHES;
        let bytes = batch.heap_bytes() as u64;
        let share_spent = self.queued_bytes + bytes > spill.budget_bytes() / QUEUE_BUDGET_SHARE;
        if !waits || !(share_spent || spill.over_budget_with(bytes)) {
            return Some(batch);
        }
        self.parked.park(spill, batch).err()
    }

    fn send(&mut self, batch: TokenBatch) {
        let Some(jobs) = &self.jobs else { return };
        if let Some(spill) = &self.spill {
            let bytes = batch.heap_bytes() as u64;
            spill.add_resident(bytes);
            self.queued_bytes += bytes;
        }
        // The receiver lives in `crew` as long as the pool: a send cannot fail.
        let _ = jobs.send(batch);
    }

    /// Moves parked batches to the queue while it holds fewer than `target`; once none is
    /// parked, closes the queue when `close` (the end of the run: threads stop when it is
    /// empty).
    fn feed(&mut self, target: usize, close: bool) {
        while let Some(jobs) = &self.jobs {
            if self.parked.is_empty() {
                if close {
                    self.jobs.take();
                }
                return;
            }
            if jobs.len() >= target {
                return;
            }
            let batch = self.spill.clone().and_then(|s| self.parked.unpark(&s));
            if let Some(batch) = batch {
                self.send(batch);
            }
        }
    }

    /// Hands a partly filled batch to the live threads once it is `TOKEN_BATCH_MAX_AGE` old,
    /// and parked batches once the queue runs short.
    pub fn flush_if_stale(&mut self) {
        if self.deferred() {
            return;
        }
        if self.open.len() > 0 && self.opened_at.elapsed() >= TOKEN_BATCH_MAX_AGE {
            self.send_open();
        }
        self.feed(self.plan.live_threads, false);
    }

    /// Results ready now, without waiting.
    pub fn try_results(&mut self) -> impl Iterator<Item = TokenResult> + '_ {
        let batches: Vec<Counted> = self.results.try_iter().collect();
        batches.iter().for_each(|b| self.note_counted(b));
        batches.into_iter().flat_map(|b| b.results)
    }

    fn note_counted(&mut self, counted: &Counted) {
        self.pending -= counted.results.len() as u64;
        self.uncount(counted.batch_bytes);
    }

    fn uncount(&mut self, bytes: u64) {
        let bytes = bytes.min(self.queued_bytes);
        if let Some(spill) = &self.spill {
            spill.sub_resident(bytes);
        }
        self.queued_bytes -= bytes;
    }

    /// After the last sample: sends what is buffered, starts the drain threads and hands every
    /// result to `apply` until all are counted or `limit` passes (`None`: no limit; see
    /// `drain_limit`). Parked batches are read back a few at a time, as the threads take them.
    /// Returns the jobs left uncounted.
    pub fn finish(&mut self, limit: Option<Duration>, mut apply: impl FnMut(TokenResult)) -> u64 {
        self.send_open();
        let extra = self.plan.drain_threads.max(1).saturating_sub(self.threads.len());
        let cores = drain_core_order(&self.plan);
        if let Err(e) = self.spawn(extra, &cores, "tokenizer-drain") {
            if self.threads.is_empty() {
                eprintln!("warning: cannot start a tokenizer drain thread: {e}");
            }
        }
        // Two batches a thread keep every thread busy while the rest stays in the file.
        let queued = 2 * self.threads.len().max(1);
        self.feed(queued, true);
        let deadline = limit.map(|t| Instant::now() + t);
        // A thread that died (a tokenizer panic) ends the wait too, even without a timeout.
        while self.pending > 0 && self.threads.iter().any(|t| !t.is_finished()) {
            let wait = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()).min(DRAIN_POLL),
                None => DRAIN_POLL,
            };
            match self.results.recv_timeout(wait) {
                Ok(counted) => {
                    self.note_counted(&counted);
                    counted.results.into_iter().for_each(&mut apply);
                    self.feed(queued, true);
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
        // The batches never counted are gone with the queue.
        while self.crew.jobs.try_recv().is_ok() {}
        self.uncount(self.queued_bytes);
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
        for (row, text, tpot_from) in batch.iter() {
            if crew.cancel.load(Ordering::Acquire) {
                break;
            }
            out.push(count_job(&crew.counter, row, text, tpot_from));
        }
        let cancelled = out.len() < batch.len();
        let counted = Counted { results: out, batch_bytes: batch.heap_bytes() as u64 };
        drop(batch);
        if crew.results.send(counted).is_err() || cancelled {
            return;
        }
    }
}

fn count_job(
    counter: &TokenCounter,
    row: RowKey,
    text: &str,
    tpot_from: Option<usize>,
) -> TokenResult {
    let osl = counter(text);
    let tpot_tokens = match tpot_from {
        Some(from) if from < text.len() => text.get(from..).and_then(|t| counter(t).ok()),
        _ => None,
    };
    TokenResult { row, osl, tpot_tokens }
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

    fn at(i: usize) -> RowKey {
        RowKey { index: i as u64, complete_ns: 10 * i as u64, first_chunk_ns: Some(i as u64 + 1) }
    }

    /// A deferred pool of one drain thread whose counter takes `per_job` a job, and whose drain
    /// may take 100 ms.
    fn slow_pool(per_job: Duration) -> TokenPool {
        let slow: TokenCounter = Arc::new(move |s: &str| {
            std::thread::park_timeout(per_job);
            Ok(s.len() as u32)
        });
        let mut p = plan(0, 1);
        p.drain_timeout = Some(Duration::from_millis(100));
        TokenPool::start(slow, p).unwrap()
    }

    /// Polls a live pool as the aggregator does until `jobs` results came (60 s at most).
    fn live_results(pool: &mut TokenPool, jobs: usize) -> Vec<TokenResult> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut got = Vec::new();
        while got.len() < jobs && Instant::now() < deadline {
            pool.flush_if_stale();
            got.extend(pool.try_results());
            std::thread::yield_now();
        }
        got
    }

    fn finish_sorted(pool: &mut TokenPool) -> (Vec<TokenResult>, u64) {
        let mut got = Vec::new();
        let left = pool.finish(pool.drain_limit(false), |r| got.push(r));
        got.sort_by_key(|r| r.row.index);
        (got, left)
    }

    #[test]
    fn counts_whole_output_and_the_text_after_the_first_chunk() {
        for live in [0, 2] {
            let mut pool = TokenPool::start(chars(), plan(live, 2)).unwrap();
            pool.submit(at(3), "hello world", Some(5));
            pool.submit(at(4), "abc", Some(3));
            pool.submit(at(5), "héllo", None);
            let (got, left) = finish_sorted(&mut pool);
            assert_eq!(left, 0);
            assert_eq!(got.len(), 3, "live {live}");
            let first = (got[0].row.index, got[0].osl.clone(), got[0].tpot_tokens);
            assert_eq!(first, (3, Ok(11), Some(6)));
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
                pool.submit(at(slot), "some output text of a sample", None);
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
        assert!(got.iter().enumerate().all(|(i, r)| r.row == at(i) && r.osl == Ok(28)));
    }

    #[test]
    fn deferred_counting_waits_for_the_drain() {
        let mut pool = TokenPool::start(chars(), plan(0, 3)).unwrap();
        assert!(pool.deferred());
        for slot in 0..(TOKEN_BATCH_JOBS * 3 + 7) {
            pool.submit(at(slot), "abcd", Some(1));
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
        pool.submit(at(0), "abc", None);
        let got = live_results(&mut pool, 1);
        assert_eq!(got.len(), 1, "a partial batch reaches the live thread once stale");
        assert_eq!(pool.pending, 0);
    }

    #[test]
    fn drain_timeout_leaves_the_uncounted_jobs_pending() {
        let mut pool = slow_pool(Duration::from_millis(20));
        for slot in 0..500 {
            pool.submit(at(slot), "x", None);
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

    fn spill(name: &str, budget_bytes: u64) -> Arc<Spill> {
        let dir = std::env::temp_dir().join(format!("loadgen-{name}-{}", std::process::id()));
        Spill::new(&dir, budget_bytes).unwrap()
    }

    /// Outputs of varied lengths, some with a TPOT part, over `jobs` rows.
    fn submit_outputs(pool: &mut TokenPool, jobs: usize) {
        for i in 0..jobs {
            let text = "ab é".repeat(1 + i % 13);
            pool.submit(at(i), &text, (i % 3 > 0).then_some(i % 5));
        }
    }

    #[test]
    fn parked_jobs_are_counted_once_each_as_the_unparked_are() {
        let jobs = TOKEN_BATCH_JOBS * 9 + 5;
        let mut memory = TokenPool::start(chars(), plan(0, 3)).unwrap();
        submit_outputs(&mut memory, jobs);
        let (expected, left) = finish_sorted(&mut memory);
        assert_eq!((expected.len(), left), (jobs, 0));
        let spill = spill("parked", 0);
        let pool = TokenPool::start(chars(), plan(0, 3)).unwrap();
        let mut pool = pool.spill_into(Some(spill.clone()));
        submit_outputs(&mut pool, jobs);
        assert!(!pool.parked.is_empty(), "past the budget the batches park");
        assert_eq!(pool.queued_bytes, 0, "none waits in memory");
        assert!(spill.spilled_bytes() > 0);
        let (got, left) = finish_sorted(&mut pool);
        assert_eq!(left, 0);
        assert_eq!(pool.pending, 0);
        assert_eq!(got, expected, "every job counted once, as in memory");
        assert_eq!(spill.error(), None);
    }

    #[test]
    fn under_the_budget_queued_batches_count_against_it() {
        let spill = spill("queued", 1 << 30);
        let pool = TokenPool::start(chars(), plan(0, 1)).unwrap();
        let mut pool = pool.spill_into(Some(spill.clone()));
        submit_outputs(&mut pool, TOKEN_BATCH_JOBS * 2);
        assert!(pool.parked.is_empty(), "within the budget nothing parks");
        assert!(pool.queued_bytes > 0);
        assert!(spill.over_budget_with((1 << 30) - pool.queued_bytes + 1));
        let (got, left) = finish_sorted(&mut pool);
        assert_eq!((got.len(), left), (TOKEN_BATCH_JOBS * 2, 0));
        assert_eq!(pool.queued_bytes, 0);
        assert!(!spill.over_budget_with(1 << 30), "the counted batches left the budget");
    }

    /// Live threads that cannot keep up: past the budget the batches behind a long queue park,
    /// and the end counts them all.
    #[test]
    fn a_long_live_queue_parks_and_every_job_is_counted() {
        let gate = Arc::new(std::sync::Mutex::new(()));
        let held = gate.lock().unwrap();
        let g = gate.clone();
        let blocked: TokenCounter = Arc::new(move |s: &str| {
            let _wait = g.lock().unwrap();
            Ok(s.chars().count() as u32)
        });
        let spill = spill("live-parked", 0);
        let pool = TokenPool::start(blocked, plan(1, 2)).unwrap();
        let mut pool = pool.spill_into(Some(spill.clone()));
        let jobs = TOKEN_BATCH_JOBS * (LIVE_BACKLOG_BATCHES + 20);
        submit_outputs(&mut pool, jobs);
        assert!(!pool.parked.is_empty(), "the batches behind the queue park");
        drop(held);
        let (got, left) = finish_sorted(&mut pool);
        assert_eq!(left, 0);
        assert_eq!(got.len(), jobs);
        assert!(got.iter().enumerate().all(|(i, r)| r.row == at(i)), "each job once");
    }

    /// Parked batches go back to the live threads while the run goes on, once they catch up.
    #[test]
    fn live_threads_get_the_parked_batches_before_the_end() {
        let gate = Arc::new(std::sync::Mutex::new(()));
        let held = gate.lock().unwrap();
        let g = gate.clone();
        let blocked: TokenCounter = Arc::new(move |s: &str| {
            let _wait = g.lock().unwrap();
            Ok(s.len() as u32)
        });
        let pool = TokenPool::start(blocked, plan(1, 1)).unwrap();
        let mut pool = pool.spill_into(Some(spill("live-refill", 0)));
        let jobs = TOKEN_BATCH_JOBS * (LIVE_BACKLOG_BATCHES + 8);
        submit_outputs(&mut pool, jobs);
        assert!(!pool.parked.is_empty());
        drop(held);
        let counted = live_results(&mut pool, jobs).len();
        assert_eq!(counted, jobs, "every parked job was counted before finish");
        assert!(pool.parked.is_empty());
        assert_eq!(pool.pending, 0);
    }

    #[test]
    fn a_drain_timeout_leaves_parked_jobs_pending() {
        let pool = slow_pool(Duration::from_millis(1));
        let mut pool = pool.spill_into(Some(spill("parked-timeout", 0)));
        let jobs = TOKEN_BATCH_JOBS * 8;
        submit_outputs(&mut pool, jobs);
        let (got, left) = finish_sorted(&mut pool);
        assert!(left > TOKEN_BATCH_JOBS as u64, "parked jobs never read stay pending: {left}");
        assert_eq!(got.len() as u64 + left, jobs as u64, "every job is counted or pending");
    }

    #[test]
    fn parked_jobs_that_cannot_be_read_back_stay_pending() {
        let spill = spill("parked-unread", 0);
        let pool = TokenPool::start(chars(), plan(0, 2)).unwrap();
        let mut pool = pool.spill_into(Some(spill.clone()));
        let jobs = TOKEN_BATCH_JOBS * 4;
        submit_outputs(&mut pool, jobs);
        pool.parked.break_file_for_test();
        let (got, left) = finish_sorted(&mut pool);
        assert_eq!(got.len() as u64 + left, jobs as u64);
        assert!(left >= TOKEN_BATCH_JOBS as u64, "{left}");
        assert!(spill.read_failed(), "the failed read is the run's error");
    }
}
