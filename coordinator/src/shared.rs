//! The state the coordinator's threads share while a run goes: each worker's lifecycle and
//! counts (the scheduler writes what it issued, the aggregator what it received), the stop
//! flag, the progress condition the main thread waits on, the live issue lag, and the records
//! received per phase. A module of its own below the scheduler, the aggregator and the live
//! view, which all read it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use crate::conversation::{ConversationCounts, ConversationPlan};
use crate::live::lag::LiveLag;

/// A worker's lifecycle as the coordinator's threads see it.
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerState {
    Starting = 0,
    Ready = 1,
    Done = 2,
    Dead = 3,
}

/// State the scheduler and the aggregator share.
pub struct Shared {
    /// Samples handed to worker `i` (written by the scheduler).
    pub issued_to: Vec<AtomicU64>,
    /// Records received from worker `i` (written by the aggregator).
    pub received_from: Vec<AtomicU64>,
    pub worker_state: Vec<AtomicU8>,
    /// Records received from all workers.
    pub records_total: AtomicU64,
    /// Set when the run must stop issuing (signal, worker death, cap).
    pub stop: AtomicBool,
    /// Notified when records arrive and a waiter flagged itself (concurrency pattern).
    pub progress: (Mutex<()>, Condvar),
    pub progress_waiting: AtomicBool,
    /// Open-loop issue lags so far, for the live view (written by the scheduler).
    pub issue_lag: LiveLag,
    /// Records received per phase (`PhaseCounts`), for each phase's own drain.
    pub phases: PhaseCounts,
    /// An agentic run's conversations (`None` otherwise) and their counts per worker.
    pub conversations: Option<(Arc<ConversationPlan>, ConversationCounts)>,
}

impl Shared {
    pub fn new(workers: usize) -> Shared {
        Shared {
            issued_to: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            received_from: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            worker_state: (0..workers)
                .map(|_| AtomicU8::new(WorkerState::Starting as u8))
                .collect(),
            records_total: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            progress: (Mutex::new(()), Condvar::new()),
            progress_waiting: AtomicBool::new(false),
            issue_lag: LiveLag::new(),
            phases: PhaseCounts::default(),
            conversations: None,
        }
    }

    /// An agentic run's shared state: the scheduler counts conversations handed out, the
    /// aggregator those finished (`note_turn`); `concurrency` conversations run at a time.
    pub fn with_conversations(
        mut self,
        plan: Option<Arc<ConversationPlan>>,
        concurrency: u64,
    ) -> Shared {
        let workers = self.issued_to.len();
        self.conversations = plan.map(|p| {
            let counts = ConversationCounts::new(workers, p.spans().len() as u64, concurrency);
            (p, counts)
        });
        self
    }

    /// Counts a record of dataset row `row` received from worker `w`; in an agentic run the
    /// last turn of a conversation first frees the worker's place for the next one (then it
    /// returns true).
    pub(crate) fn note_received(&self, w: usize, row: u32) -> bool {
        let mut finished = false;
        if let Some((plan, counts)) = &self.conversations {
            if plan.ends_conversation(row) {
                counts.finished_at[w].fetch_add(1, Ordering::Release);
                finished = true;
            }
        }
        self.received_from[w].fetch_add(1, Ordering::Release);
        finished
    }

    /// This run's phases by sample id, counted as records arrive.
    pub fn with_phases(mut self, phases: PhaseCounts) -> Shared {
        self.phases = phases;
        self
    }

    pub fn state(&self, worker: usize) -> WorkerState {
        match self.worker_state[worker].load(Ordering::Acquire) {
            0 => WorkerState::Starting,
            1 => WorkerState::Ready,
            2 => WorkerState::Done,
            _ => WorkerState::Dead,
        }
    }

    pub(crate) fn set_state(&self, worker: usize, state: WorkerState) {
        self.worker_state[worker].store(state as u8, Ordering::Release);
    }

    /// Samples issued and not yet answered, over all workers.
    pub fn in_flight(&self) -> u64 {
        let issued: u64 = self.issued_to.iter().map(|a| a.load(Ordering::Acquire)).sum();
        issued.saturating_sub(self.records_total.load(Ordering::Acquire))
    }

    pub(crate) fn notify_progress(&self) {
        if self.progress_waiting.load(Ordering::Acquire) {
            let _guard = self.progress.0.lock().unwrap_or_else(|e| e.into_inner());
            self.progress.1.notify_all();
        }
    }

    /// Wakes every thread waiting on progress (used when a stop is requested).
    pub fn notify_all_waiters(&self) {
        let _guard = self.progress.0.lock().unwrap_or_else(|e| e.into_inner());
        self.progress.1.notify_all();
    }
}

/// Records received per phase, told apart by sample id (each phase's ids are a range known
/// before the run: warm-up, performance, then each accuracy phase), so a phase's drain waits
/// for its own samples only, as the reference's per-phase in-flight count: a sample left at
/// one phase's drain timeout does not hold the next phases.
#[derive(Debug, Default)]
pub struct PhaseCounts {
    /// The first sample id of each phase, ascending.
    starts: Vec<u64>,
    received: Vec<AtomicU64>,
}

impl PhaseCounts {
    pub fn new(starts: Vec<u64>) -> PhaseCounts {
        debug_assert!(starts.windows(2).all(|w| w[0] <= w[1]), "phase starts ascend");
        let received = starts.iter().map(|_| AtomicU64::new(0)).collect();
        PhaseCounts { starts, received }
    }

    /// The phases of a run: warm-up `0..warmup`, performance `warmup..warmup + tracked`, then
    /// each accuracy phase from its first id.
    pub fn of_run(warmup: u64, tracked: u64, accuracy_firsts: &[u64]) -> PhaseCounts {
        let mut starts = vec![0, warmup];
        starts.extend_from_slice(accuracy_firsts);
        debug_assert!(accuracy_firsts.first().is_none_or(|&f| f >= warmup + tracked));
        PhaseCounts::new(starts)
    }

    /// The phase that sample `sample_id` belongs to (the last one starting at or below it).
    pub fn phase_of(&self, sample_id: u64) -> Option<usize> {
        self.starts.partition_point(|&s| s <= sample_id).checked_sub(1)
    }

    /// Counts a record of `sample_id` (the aggregator, per record: no allocation).
    pub fn note(&self, sample_id: u64) {
        if let Some(p) = self.phase_of(sample_id) {
            self.received[p].fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Records received so far from phase `phase`'s samples.
    pub fn received(&self, phase: usize) -> u64 {
        self.received.get(phase).map_or(0, |r| r.load(Ordering::Acquire))
    }
}
