//! The scheduler: decides when each sample is issued and hands it to a worker's issue ring.
//!
//! It runs on the coordinator's main thread. Issue times are stamped at hand-over, so a
//! sample's latency never includes time the coordinator spent deciding.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen_worker::monotonic_ns;
use loadgen_worker::wire::{Doorbell, IssueCmd, IssueProducer};

use crate::aggregate::{Shared, WorkerState};
use crate::order::{SampleOrder, SplitMix64};

/// How long the scheduler sleeps on a doorbell or condition before it re-checks for a stop.
pub const SCHEDULER_POLL: Duration = Duration::from_millis(10);

/// The load pattern of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// max_throughput: every sample as fast as the rings take them.
    Offline,
    /// Open loop: exponential gaps at `target_qps`, from a seeded generator.
    Poisson { target_qps: f64, seed: u64 },
    /// Closed loop: exactly `n` samples in flight.
    Concurrency { n: u64 },
}

/// Why issuing stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueEnd {
    /// Every sample was issued.
    AllIssued,
    /// A stop was requested (signal or cap).
    Stopped,
    /// Every worker is gone.
    NoWorkers,
}

/// Hands issue commands to the workers' rings.
pub struct Issuer {
    producers: Vec<IssueProducer>,
    shared: Arc<Shared>,
    space: Arc<Doorbell>,
    next_worker: usize,
    pub issued: u64,
}

impl Issuer {
    pub fn new(producers: Vec<IssueProducer>, shared: Arc<Shared>, space: Arc<Doorbell>) -> Issuer {
        Issuer { producers, shared, space, next_worker: 0, issued: 0 }
    }

    fn alive(&self, w: usize) -> bool {
        matches!(self.shared.state(w), WorkerState::Ready | WorkerState::Starting)
    }

    /// Issues one sample to the next worker with room, round robin; waits while all are full.
    pub fn issue(&mut self, sample_id: u64, row: u32) -> Result<(), IssueEnd> {
        let n = self.producers.len();
        loop {
            let epoch = self.space.epoch();
            let mut any_alive = false;
            for k in 0..n {
                let w = (self.next_worker + k) % n;
                if !self.alive(w) {
                    continue;
                }
                any_alive = true;
                // Count first: the aggregator may see the record before try_push returns.
                self.shared.issued_to[w].fetch_add(1, Ordering::AcqRel);
                let cmd = IssueCmd::Issue { sample_id, row, issued_ns: monotonic_ns() };
                if self.producers[w].try_push(cmd) {
                    self.next_worker = w + 1;
                    self.issued += 1;
                    return Ok(());
                }
                self.shared.issued_to[w].fetch_sub(1, Ordering::AcqRel);
            }
            if !any_alive {
                return Err(IssueEnd::NoWorkers);
            }
            if self.shared.stop.load(Ordering::Acquire) {
                return Err(IssueEnd::Stopped);
            }
            self.space.wait(epoch, SCHEDULER_POLL);
        }
    }

    /// Sends `cmd` (Stop or Abort) to every live worker, waiting for room where needed,
    /// until `deadline`.
    pub fn broadcast(&mut self, cmd: IssueCmd, deadline: Instant) {
        for w in 0..self.producers.len() {
            while self.alive(w) && Instant::now() < deadline {
                let epoch = self.space.epoch();
                if self.producers[w].try_push(cmd) {
                    break;
                }
                self.space.wait(epoch, SCHEDULER_POLL);
            }
        }
    }
}

/// Issues `total` samples by `pattern`; stops early when `shared.stop` is set or at `cap`.
pub fn issue_all(
    issuer: &mut Issuer,
    pattern: &Pattern,
    order: &mut SampleOrder,
    first_sample_id: u64,
    total: u64,
    cap: Option<Instant>,
) -> IssueEnd {
    let shared = issuer.shared.clone();
    let start = Instant::now();
    let mut poisson = match pattern {
        Pattern::Poisson { target_qps, seed } => {
            Some((SplitMix64::new(*seed), *target_qps, 0.0f64))
        }
        _ => None,
    };
    for i in 0..total {
        if shared.stop.load(Ordering::Acquire) || cap.is_some_and(|c| Instant::now() >= c) {
            return IssueEnd::Stopped;
        }
        match pattern {
            Pattern::Offline => {}
            Pattern::Concurrency { n } => {
                if !wait_for_slot(&shared, *n, cap) {
                    return IssueEnd::Stopped;
                }
            }
            Pattern::Poisson { .. } => {
                let (rng, qps, at_s) = poisson.as_mut().expect("poisson state");
                // Exponential gap: -ln(1 - U) / rate, with U in [0, 1).
                *at_s += -(1.0 - rng.next_f64()).ln() / *qps;
                if !wait_until(start + Duration::from_secs_f64(*at_s), &shared, cap) {
                    return IssueEnd::Stopped;
                }
            }
        }
        let row = order.next_row();
        if let Err(end) = issuer.issue(first_sample_id + i, row) {
            return end;
        }
    }
    IssueEnd::AllIssued
}

/// Waits until fewer than `n` samples are in flight. False when a stop came first.
fn wait_for_slot(shared: &Shared, n: u64, cap: Option<Instant>) -> bool {
    if shared.in_flight() < n {
        return true;
    }
    let (lock, cond) = &shared.progress;
    let mut guard = lock.lock().unwrap_or_else(|e| e.into_inner());
    shared.progress_waiting.store(true, Ordering::Release);
    while shared.in_flight() >= n {
        if shared.stop.load(Ordering::Acquire) || cap.is_some_and(|c| Instant::now() >= c) {
            shared.progress_waiting.store(false, Ordering::Release);
            return false;
        }
        guard = cond.wait_timeout(guard, SCHEDULER_POLL).unwrap_or_else(|e| e.into_inner()).0;
    }
    shared.progress_waiting.store(false, Ordering::Release);
    true
}

/// Waits until `at`: sleeps while far, spins the last stretch for a precise issue time.
fn wait_until(at: Instant, shared: &Shared, cap: Option<Instant>) -> bool {
    const SPIN: Duration = Duration::from_micros(200);
    loop {
        let now = Instant::now();
        if now >= at {
            return true;
        }
        if shared.stop.load(Ordering::Acquire) || cap.is_some_and(|c| now >= c) {
            return false;
        }
        let left = at - now;
        if left > SPIN {
            std::thread::sleep((left - SPIN).min(SCHEDULER_POLL));
        } else {
            std::hint::spin_loop();
        }
    }
}
