//! The client-basis tokenizer pool: counts output tokens off the aggregator thread.

use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};

/// Counts the tokens of a text under the run's client tokenizer.
pub type TokenCounter = Arc<dyn Fn(&str) -> Result<u32, String> + Send + Sync>;

/// Jobs that may wait for a tokenizer thread before the aggregator waits too.
pub const TOKEN_QUEUE_JOBS: usize = 65_536;

/// One output to count: the whole text (OSL) and the text after the first chunk (TPOT).
pub struct TokenJob {
    pub slot: usize,
    pub output: String,
    /// Byte offset where the text after the first chunk starts; `None` = no TPOT for this sample.
    pub tpot_from: Option<usize>,
}

/// A counted output.
pub struct TokenResult {
    pub slot: usize,
    pub osl: Result<u32, String>,
    pub tpot_tokens: Option<u32>,
}

pub struct TokenPool {
    jobs: Option<Sender<TokenJob>>,
    results: Receiver<TokenResult>,
    threads: Vec<JoinHandle<()>>,
    pub pending: u64,
}

impl TokenPool {
    /// Starts `threads` tokenizer threads (at least one), pinned to `cores` when given.
    pub fn start(
        counter: TokenCounter,
        threads: usize,
        cores: &[usize],
    ) -> std::io::Result<TokenPool> {
        let (job_tx, job_rx) = bounded::<TokenJob>(TOKEN_QUEUE_JOBS);
        let (result_tx, result_rx) = unbounded::<TokenResult>();
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let jobs = job_rx.clone();
            let results = result_tx.clone();
            let counter = counter.clone();
            let core = if cores.is_empty() { None } else { Some(cores[i % cores.len()]) };
            let handle =
                std::thread::Builder::new().name(format!("tokenizer-{i}")).spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core_affinity::CoreId { id: core });
                    }
                    for job in jobs {
                        let result = count_job(&counter, &job);
                        if results.send(result).is_err() {
                            return;
                        }
                    }
                })?;
            handles.push(handle);
        }
        Ok(TokenPool { jobs: Some(job_tx), results: result_rx, threads: handles, pending: 0 })
    }

    /// Queues a job; blocks when the queue is full (back-pressure on the aggregator).
    pub fn submit(&mut self, job: TokenJob) {
        if let Some(jobs) = &self.jobs {
            if jobs.send(job).is_ok() {
                self.pending += 1;
            }
        }
    }

    /// Results ready now, without waiting.
    pub fn try_results(&mut self) -> impl Iterator<Item = TokenResult> + '_ {
        std::iter::from_fn(move || {
            let r = self.results.try_recv().ok();
            if r.is_some() {
                self.pending -= 1;
            }
            r
        })
    }

    /// Waits for one result, up to `timeout`.
    pub fn wait_result(&mut self, timeout: std::time::Duration) -> Option<TokenResult> {
        let r = self.results.recv_timeout(timeout).ok();
        if r.is_some() {
            self.pending -= 1;
        }
        r
    }

    /// Stops taking jobs and joins the threads once the queue is empty.
    pub fn close(&mut self) {
        self.jobs.take();
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

fn count_job(counter: &TokenCounter, job: &TokenJob) -> TokenResult {
    let osl = counter(&job.output);
    let tpot_tokens = match job.tpot_from {
        Some(from) if from < job.output.len() => counter(&job.output[from..]).ok(),
        _ => None,
    };
    TokenResult { slot: job.slot, osl, tpot_tokens }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn counts_whole_output_and_the_text_after_the_first_chunk() {
        let counter: TokenCounter = Arc::new(|s: &str| Ok(s.chars().count() as u32));
        let mut pool = TokenPool::start(counter, 2, &[]).unwrap();
        pool.submit(TokenJob { slot: 3, output: "hello world".into(), tpot_from: Some(5) });
        pool.submit(TokenJob { slot: 4, output: "abc".into(), tpot_from: Some(3) });
        let mut got = Vec::new();
        while got.len() < 2 {
            got.push(pool.wait_result(Duration::from_secs(10)).expect("a result"));
        }
        got.sort_by_key(|r| r.slot);
        assert_eq!(got[0].osl, Ok(11));
        assert_eq!(got[0].tpot_tokens, Some(6));
        assert_eq!(got[1].osl, Ok(3));
        assert_eq!(got[1].tpot_tokens, None, "nothing after the first chunk: no TPOT");
        assert_eq!(pool.pending, 0);
    }
}
