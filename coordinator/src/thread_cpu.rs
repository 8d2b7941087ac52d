//! The CPU time each coordinator thread spent in a run, so a user sees which stage bounds the
//! host (`-v` prints it per sample) and the perf suite can give the cost per record of each.

use std::sync::Mutex;

/// One thread's CPU time over the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadCpu {
    pub name: String,
    pub cpu_ns: u64,
}

static LEDGER: Mutex<Vec<ThreadCpu>> = Mutex::new(Vec::new());

/// CPU time the calling thread has used so far.
pub fn thread_cpu_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(|ts| ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64)
        .unwrap_or(0)
}

/// Notes a thread's CPU time (a thread calls it as it ends, with `thread_cpu_ns()`).
pub fn note(name: &str, cpu_ns: u64) {
    let mut ledger = LEDGER.lock().unwrap_or_else(|e| e.into_inner());
    ledger.push(ThreadCpu { name: name.to_string(), cpu_ns });
}

/// Every thread noted since the last call, in the order they ended.
pub fn take() -> Vec<ThreadCpu> {
    std::mem::take(&mut *LEDGER.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The `-v` lines: each thread's CPU per sample over `samples`.
pub fn per_sample_lines(threads: &[ThreadCpu], samples: u64) -> Vec<String> {
    threads
        .iter()
        .map(|t| {
            let per_sample_us = t.cpu_ns as f64 / 1_000.0 / samples.max(1) as f64;
            format!(
                "  {:<14} {:>9.3} s CPU, {:.3} us per sample",
                t.name,
                t.cpu_ns as f64 / 1e9,
                per_sample_us
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_thread_reports_its_cpu_time_and_the_cost_per_sample() {
        let start = thread_cpu_ns();
        let mut x = 0u64;
        while thread_cpu_ns() - start < 2_000_000 {
            x = x.wrapping_add(1);
        }
        assert!(x > 0);
        let line =
            per_sample_lines(&[ThreadCpu { name: "aggregator".into(), cpu_ns: 3_000_000 }], 1_000);
        assert_eq!(line, ["  aggregator         0.003 s CPU, 3.000 us per sample"]);
    }
}
