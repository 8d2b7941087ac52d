//! The final counts of a run, decided in one pure function (`settle`) from plain data: what was
//! issued to each worker, which samples got a record, how each worker ended and what it had on
//! the wire. It makes `issued = completed + abandoned` hold and says which samples still need a
//! terminal event.

use loadgen_wire::FailureKind;

use std::sync::Arc;

use crate::conversation::TrackingWindow;
use crate::metrics::column::{Column, Spill, CHUNK_VALUES};

/// Bytes the issue log keeps per issued sample: a packed worker + issue stamp word (8) and the
/// dataset row (4), in memory up to the run's spill budget and in files past it.
pub const ISSUE_LOG_BYTES_PER_SAMPLE: usize = 12;

/// Stamp offsets from the log's base fit in 48 bits (78 hours); later stamps are clamped.
const STAMP_BITS: u32 = 48;
const STAMP_MASK: u64 = (1 << STAMP_BITS) - 1;

/// One issued sample, as the scheduler handed it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issued {
    pub worker: u16,
    pub row: u32,
    /// The issue stamp (CLOCK_MONOTONIC ns); `None` for a closed loop, where the worker stamps
    /// the issue as it writes the request.
    pub issued_ns: Option<u64>,
}

/// For each issued sample (indexed by sample id): its worker, row and issue stamp. Written by the
/// scheduler on the main thread, handed to the aggregator when issuing ends; its columns spill to
/// files past the run's budget (`with_spill`) as the sample table's do.
#[derive(Debug)]
pub struct IssueLog {
    base_ns: u64,
    /// `(worker + 1) << 48 | (stamp - base + 1)`, stamp part 0 = no stamp; 0 = never issued.
    entries: Column<u64>,
    rows: Column<u32>,
}

impl Default for IssueLog {
    fn default() -> Self {
        IssueLog::with_capacity(0, 0)
    }
}

impl IssueLog {
    /// A log with room for `samples` ids (reserved, not touched), stamps offset from `base_ns`.
    pub fn with_capacity(samples: u64, base_ns: u64) -> IssueLog {
        let n = usize::try_from(samples).unwrap_or(0);
        IssueLog {
            base_ns,
            entries: Column::with_capacity("issue_log", n),
            rows: Column::with_capacity("issue_rows", n),
        }
    }

    /// A log whose columns go to `spill`'s files past its budget.
    pub fn with_spill(samples: u64, base_ns: u64, spill: Option<Arc<Spill>>) -> IssueLog {
        let Some(spill) = spill else { return IssueLog::with_capacity(samples, base_ns) };
        IssueLog {
            base_ns,
            entries: Column::new("issue_log", Some(spill.clone())),
            rows: Column::new("issue_rows", Some(spill)),
        }
    }

    /// Notes that `sample_id` went to `worker`; ids skipped since the last push stay unissued.
    pub fn push(&mut self, sample_id: u64, worker: usize, row: u32, issued_ns: u64) {
        if sample_id < self.id_end() {
            return;
        }
        while self.id_end() < sample_id {
            self.push_entry(0, 0);
        }
        let stamp = if issued_ns == 0 {
            0
        } else {
            (issued_ns.saturating_sub(self.base_ns) + 1).min(STAMP_MASK)
        };
        self.push_entry(((worker as u64 + 1) << STAMP_BITS) | stamp, row);
    }

    fn push_entry(&mut self, entry: u64, row: u32) {
        self.entries.push(entry);
        self.rows.push(row);
        if self.entries.in_memory().len() % CHUNK_VALUES == 0 {
            // Both or neither, so they keep the same ids in their files.
            self.entries.count_resident();
            self.rows.count_resident();
            if self.entries.spill_handle().is_some_and(|s| s.over_budget()) {
                self.entries.force_spill();
                self.rows.force_spill();
            }
        }
    }

    /// One past the highest sample id logged.
    pub fn id_end(&self) -> u64 {
        self.entries.len() as u64
    }

    fn issued(&self, entry: u64, row: u32) -> Option<Issued> {
        if entry == 0 {
            return None;
        }
        let stamp = entry & STAMP_MASK;
        Some(Issued {
            worker: ((entry >> STAMP_BITS) - 1) as u16,
            row,
            issued_ns: (stamp != 0).then(|| self.base_ns + stamp - 1),
        })
    }

    /// The sample `sample_id`, if it was issued.
    pub fn get(&self, sample_id: u64) -> Option<Issued> {
        let index = usize::try_from(sample_id).ok().filter(|&i| i < self.entries.len())?;
        let (mut entry, mut row) = (Vec::new(), Vec::new());
        self.entries.read_into(index, 1, &mut entry).ok()?;
        self.rows.read_into(index, 1, &mut row).ok()?;
        self.issued(entry[0], row[0])
    }

    /// Hands every issued sample to `f` with its id, in id order, a chunk of ids at a time.
    pub fn for_each(&self, mut f: impl FnMut(u64, Issued)) {
        let (mut entries, mut rows) = (Vec::new(), Vec::new());
        let mut at = 0;
        while at < self.entries.len() {
            let n = CHUNK_VALUES.min(self.entries.len() - at);
            let read = self.entries.read_into(at, n, &mut entries);
            if read.and_then(|()| self.rows.read_into(at, n, &mut rows)).is_err() {
                return;
            }
            for (i, (&entry, &row)) in entries.iter().zip(&rows).enumerate() {
                if let Some(issued) = self.issued(entry, row) {
                    f((at + i) as u64, issued);
                }
            }
            at += n;
        }
    }
}

/// A set of sample ids, one bit each.
#[derive(Debug, Default, Clone)]
pub struct IdSet {
    words: Vec<u64>,
}

impl IdSet {
    /// A set with room for ids below `ids` without growing.
    pub fn with_capacity(ids: u64) -> IdSet {
        IdSet { words: Vec::with_capacity(usize::try_from(ids.div_ceil(64)).unwrap_or(0)) }
    }

    /// Adds `id`; false when it was already there.
    pub fn insert(&mut self, id: u64) -> bool {
        let word = (id / 64) as usize;
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let bit = 1u64 << (id % 64);
        let fresh = self.words[word] & bit == 0;
        self.words[word] |= bit;
        fresh
    }

    pub fn contains(&self, id: u64) -> bool {
        self.words.get((id / 64) as usize).is_some_and(|w| w & (1 << (id % 64)) != 0)
    }
}

/// Sample counts of one scope (all samples, or the tracked ones).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Issued samples (a closed loop's never-written ones are unsent, not issued).
    pub issued: u64,
    /// Completed samples, failures included (as the reference counts them).
    pub completed: u64,
    pub failed: u64,
    /// Issued and never completed: in flight (or queued) when the run stopped.
    pub abandoned: u64,
    /// Closed loop: handed to a worker but never written, so never issued.
    pub unsent: u64,
}

/// What the records said, counted by the aggregator as they arrive.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tally {
    pub total: Counts,
    pub tracked: Counts,
    /// Failed samples per `FailureKind` (wire value), all samples.
    pub failed_by_kind: [u64; FailureKind::ALL.len()],
}

impl Tally {
    /// Counts one record: `kind` its failure, `stamped` whether it carries an issue stamp (a
    /// closed loop's cancelled, never-written sample does not).
    pub fn record(&mut self, tracked: bool, kind: FailureKind, stamped: bool) {
        let scopes: &mut [&mut Counts] = if tracked {
            &mut [&mut self.total, &mut self.tracked]
        } else {
            &mut [&mut self.total]
        };
        for c in scopes.iter_mut() {
            match kind {
                FailureKind::Cancelled if stamped => c.abandoned += 1,
                FailureKind::Cancelled => c.unsent += 1,
                FailureKind::None => c.completed += 1,
                _ => {
                    c.completed += 1;
                    c.failed += 1;
                }
            }
        }
        if !matches!(kind, FailureKind::None | FailureKind::Cancelled) {
            self.failed_by_kind[kind as usize] += 1;
        }
    }
}

/// How a worker process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerFate {
    /// It answered Stop or Abort and said Done.
    Done,
    /// It died on its own (a crash, or a SIGKILL from outside).
    Died,
    /// It did not end within the abort grace (stopped, stuck) and the coordinator killed it.
    KilledAfterAbort,
}

/// A worker's end and the samples its in-flight table held then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerEnd {
    pub fate: WorkerFate,
    /// `InFlightTable::sent()` after it ended: samples whose request it may have written.
    pub sent: Vec<u64>,
}

/// Why an issued sample was abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbandonCause {
    Cap,
    Interrupt,
    DrainTimeout,
    /// Its worker died before it sent it.
    WorkerDiedUnsent,
    /// Its worker did not stop within the abort grace and was killed.
    WorkerKilled,
    /// Its worker ended without answering it, with no abort (not expected).
    Unanswered,
}

impl AbandonCause {
    /// The message of its `error.loadgen` event.
    pub fn message(self) -> &'static str {
        match self {
            AbandonCause::Cap => "in flight at the max-duration cap",
            AbandonCause::Interrupt => "in flight at the interrupt",
            AbandonCause::DrainTimeout => "in flight at the drain timeout",
            AbandonCause::WorkerDiedUnsent => "queued in a worker that died before sending it",
            AbandonCause::WorkerKilled => "held by a worker killed after it ignored the abort",
            AbandonCause::Unanswered => "its worker ended without answering it",
        }
    }
}

/// The terminal outcome the coordinator writes for a sample that got no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Synthesized {
    /// Failed: its worker died with the request on the wire (`FailureKind::WorkerDied`).
    WorkerDied,
    Abandoned(AbandonCause),
}

/// One sample without a record, and what it ended as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynthesizedOutcome {
    pub sample_id: u64,
    pub issued: Issued,
    pub outcome: Synthesized,
}

/// Everything `settle` needs.
pub struct SettleInput<'a> {
    pub log: &'a IssueLog,
    /// Sample ids that got a record (cancelled ones included).
    pub answered: &'a IdSet,
    pub tally: Tally,
    /// One per worker, by worker id.
    pub workers: &'a [WorkerEnd],
    pub closed_loop: bool,
    /// Ids below this are warm-up samples (untracked).
    pub warmup_samples: u64,
    /// Ids from this on are accuracy-phase samples (untracked).
    pub tracked_end: u64,
    /// Why the run aborted its workers, if it did.
    pub abort: Option<AbandonCause>,
    /// An agentic run's tracking window and the answered samples read outside it: an
    /// unanswered sample is tracked when its issue stamp falls inside the window.
    pub window: (TrackingWindow, &'a IdSet),
}

/// The final counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    pub total: Counts,
    pub tracked: Counts,
    pub failed_by_kind: [u64; FailureKind::ALL.len()],
    /// Samples without a record that are issued (closed-loop unsent ones are only counted).
    pub synthesized: Vec<SynthesizedOutcome>,
    /// Set when `issued = completed + abandoned` fails (a bug): the message says by how much.
    pub broken: Option<String>,
}

/// What a sample without a record ended as; `None` when it was never issued (closed loop).
fn classify(end: &WorkerEnd, sent: bool, input: &SettleInput<'_>) -> Option<Synthesized> {
    let unsent_outcome = |cause| (!input.closed_loop).then_some(Synthesized::Abandoned(cause));
    match end.fate {
        WorkerFate::Died if sent => Some(Synthesized::WorkerDied),
        WorkerFate::Died => unsent_outcome(AbandonCause::WorkerDiedUnsent),
        WorkerFate::KilledAfterAbort if sent => {
            Some(Synthesized::Abandoned(input.abort.unwrap_or(AbandonCause::WorkerKilled)))
        }
        WorkerFate::KilledAfterAbort => unsent_outcome(AbandonCause::WorkerKilled),
        WorkerFate::Done => unsent_outcome(input.abort.unwrap_or(AbandonCause::Unanswered)),
    }
}

fn add(c: &mut Counts, outcome: Option<Synthesized>) {
    match outcome {
        Some(Synthesized::WorkerDied) => {
            c.completed += 1;
            c.failed += 1;
        }
        Some(Synthesized::Abandoned(_)) => c.abandoned += 1,
        None => c.unsent += 1,
    }
}

/// The final counts of a run, and the terminal outcomes of the samples that got no record.
pub fn settle(input: &SettleInput<'_>) -> Settlement {
    let mut total = input.tally.total;
    let mut tracked = input.tally.tracked;
    let mut failed_by_kind = input.tally.failed_by_kind;
    let (mut issued_total, mut issued_tracked) = (0u64, 0u64);
    let mut sent: Vec<Vec<u64>> = input.workers.iter().map(|w| w.sent.clone()).collect();
    sent.iter_mut().for_each(|s| s.sort_unstable());
    let mut synthesized = Vec::new();
    input.log.for_each(|id, issued| {
        let answered = input.answered.contains(id);
        let (window, late) = input.window;
        let in_window = if answered { !late.contains(id) } else { window.admits(issued.issued_ns) };
        let is_tracked = id >= input.warmup_samples && id < input.tracked_end && in_window;
        issued_total += 1;
        issued_tracked += u64::from(is_tracked);
        if answered {
            return;
        }
        let w = usize::from(issued.worker);
        let fallback = WorkerEnd { fate: WorkerFate::Done, sent: Vec::new() };
        let end = input.workers.get(w).unwrap_or(&fallback);
        let on_wire = sent.get(w).is_some_and(|s| s.binary_search(&id).is_ok());
        let outcome = classify(end, on_wire, input);
        add(&mut total, outcome);
        if is_tracked {
            add(&mut tracked, outcome);
        }
        if outcome == Some(Synthesized::WorkerDied) {
            failed_by_kind[FailureKind::WorkerDied as usize] += 1;
        }
        if let Some(outcome) = outcome {
            synthesized.push(SynthesizedOutcome { sample_id: id, issued, outcome });
        }
    });
    total.issued = issued_total.saturating_sub(total.unsent);
    tracked.issued = issued_tracked.saturating_sub(tracked.unsent);
    let broken = check(&total, "all").or_else(|| check(&tracked, "tracked"));
    debug_assert!(broken.is_none(), "{broken:?}");
    Settlement { total, tracked, failed_by_kind, synthesized, broken }
}

/// The accounting invariant: every issued sample completed (or failed) or was abandoned.
fn check(c: &Counts, scope: &str) -> Option<String> {
    (c.issued != c.completed + c.abandoned).then(|| {
        format!(
            "the sample accounting does not add up ({scope} samples: {} issued, {} completed, {} \
             abandoned); the counts in this report are suspect, please report this bug",
            c.issued, c.completed, c.abandoned
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: FailureKind = FailureKind::None;

    /// A run of `n` samples round robin over `workers`, warm-up ids below `warmup`; `records`
    /// are (id, kind) pairs that arrived, with the closed loop's unstamped cancels marked.
    struct Case {
        name: &'static str,
        n: u64,
        workers: Vec<WorkerEnd>,
        warmup: u64,
        closed_loop: bool,
        abort: Option<AbandonCause>,
        records: Vec<(u64, FailureKind, bool)>,
        /// Expected total (issued, completed, failed, abandoned, unsent).
        total: (u64, u64, u64, u64, u64),
        tracked_issued: u64,
        worker_died: u64,
        synthesized_abandoned: u64,
    }

    fn done() -> WorkerEnd {
        WorkerEnd { fate: WorkerFate::Done, sent: vec![] }
    }

    fn end(fate: WorkerFate, sent: &[u64]) -> WorkerEnd {
        WorkerEnd { fate, sent: sent.to_vec() }
    }

    fn ok(ids: std::ops::Range<u64>) -> Vec<(u64, FailureKind, bool)> {
        ids.map(|i| (i, NONE, true)).collect()
    }

    fn run(case: &Case) -> Settlement {
        let mut log = IssueLog::with_capacity(case.n, 1_000);
        let workers = case.workers.len();
        for id in 0..case.n {
            let stamp = if case.closed_loop { 0 } else { 1_000 + id };
            log.push(id, id as usize % workers, id as u32, stamp);
        }
        let mut answered = IdSet::with_capacity(case.n);
        let mut tally = Tally::default();
        for &(id, kind, stamped) in &case.records {
            answered.insert(id);
            tally.record(id >= case.warmup, kind, stamped);
        }
        settle(&SettleInput {
            log: &log,
            answered: &answered,
            tally,
            workers: &case.workers,
            closed_loop: case.closed_loop,
            warmup_samples: case.warmup,
            tracked_end: u64::MAX,
            abort: case.abort,
            window: (TrackingWindow::default(), &IdSet::default()),
        })
    }

    fn cases() -> Vec<Case> {
        let mut all = answered_cases();
        all.extend(worker_cases());
        all
    }

    /// Cases where every worker said Done.
    fn answered_cases() -> Vec<Case> {
        use FailureKind::{Cancelled, HttpStatus, Timeout};
        let mut with_failures = ok(0..6);
        with_failures.extend([(6, HttpStatus, true), (7, Timeout, true)]);
        // Two workers, 8 samples: worker 0 has 0,2,4,6 and worker 1 has 1,3,5,7.
        vec![
            Case {
                name: "every sample answered",
                n: 8,
                workers: vec![done(), done()],
                warmup: 0,
                closed_loop: false,
                abort: None,
                records: with_failures,
                total: (8, 8, 2, 0, 0),
                tracked_issued: 8,
                worker_died: 0,
                synthesized_abandoned: 0,
            },
            Case {
                name: "cap: cancelled records and samples left in the ring are abandoned",
                n: 8,
                workers: vec![done(), done()],
                warmup: 0,
                closed_loop: false,
                abort: Some(AbandonCause::Cap),
                records: vec![(0, NONE, true), (1, NONE, true), (2, Cancelled, true)],
                total: (8, 2, 0, 6, 0),
                tracked_issued: 8,
                worker_died: 0,
                synthesized_abandoned: 5,
            },
            Case {
                name: "closed loop cap: never-written samples were never issued",
                n: 8,
                workers: vec![done(), done()],
                warmup: 0,
                closed_loop: true,
                abort: Some(AbandonCause::Cap),
                records: vec![(0, NONE, true), (1, Cancelled, true), (2, Cancelled, false)],
                total: (2, 1, 0, 1, 6),
                tracked_issued: 2,
                worker_died: 0,
                synthesized_abandoned: 0,
            },
        ]
    }

    /// Cases with a worker that died, was stopped, or warm-up samples.
    fn worker_cases() -> Vec<Case> {
        use FailureKind::Cancelled;
        use WorkerFate::*;
        vec![
            Case {
                name: "killed worker: its sent samples fail as worker_died, the rest abandoned",
                n: 8,
                workers: vec![end(Died, &[2, 4]), done()],
                warmup: 0,
                closed_loop: false,
                abort: None,
                records: [ok(0..1), ok(1..2), ok(3..4), ok(5..6), ok(7..8)].concat(),
                total: (8, 7, 2, 1, 0),
                tracked_issued: 8,
                worker_died: 2,
                synthesized_abandoned: 1,
            },
            Case {
                name: "a record pushed before the death beats the in-flight table",
                n: 2,
                workers: vec![end(Died, &[0])],
                warmup: 0,
                closed_loop: false,
                abort: None,
                records: ok(0..1),
                total: (2, 1, 0, 1, 0),
                tracked_issued: 2,
                worker_died: 0,
                synthesized_abandoned: 1,
            },
            Case {
                name: "closed loop, killed worker: queued samples are unsent",
                n: 8,
                workers: vec![end(Died, &[2]), done()],
                warmup: 0,
                closed_loop: true,
                abort: None,
                records: [ok(0..1), ok(1..2), ok(3..4), ok(5..6), ok(7..8)].concat(),
                total: (6, 6, 1, 0, 2),
                tracked_issued: 6,
                worker_died: 1,
                synthesized_abandoned: 0,
            },
            Case {
                name: "stopped worker killed after the interrupt: all its samples abandoned",
                n: 8,
                workers: vec![end(KilledAfterAbort, &[0, 2]), done()],
                warmup: 0,
                closed_loop: false,
                abort: Some(AbandonCause::Interrupt),
                records: vec![(1, NONE, true), (3, Cancelled, true)],
                total: (8, 1, 0, 7, 0),
                tracked_issued: 8,
                worker_died: 0,
                synthesized_abandoned: 6,
            },
            Case {
                name: "warm-up samples count in the total only",
                n: 8,
                workers: vec![done(), done()],
                warmup: 4,
                closed_loop: false,
                abort: Some(AbandonCause::Cap),
                records: [ok(0..3), ok(4..7)].concat(),
                total: (8, 6, 0, 2, 0),
                tracked_issued: 4,
                worker_died: 0,
                synthesized_abandoned: 2,
            },
        ]
    }

    #[test]
    fn settle_holds_the_accounting_invariant_in_every_fault() {
        for case in cases() {
            let s = run(&case);
            let t = s.total;
            let name = case.name;
            assert_eq!(
                (t.issued, t.completed, t.failed, t.abandoned, t.unsent),
                case.total,
                "{name}"
            );
            assert_eq!(s.tracked.issued, case.tracked_issued, "{name}");
            assert_eq!(s.broken, None, "{name}");
            for c in [s.total, s.tracked] {
                assert_eq!(c.issued, c.completed + c.abandoned, "{name}");
            }
            let died = s.synthesized.iter().filter(|o| o.outcome == Synthesized::WorkerDied);
            assert_eq!(died.count() as u64, case.worker_died, "{name}");
            assert_eq!(s.failed_by_kind[FailureKind::WorkerDied as usize], case.worker_died);
            let abandoned = s.synthesized.len() as u64 - case.worker_died;
            assert_eq!(abandoned, case.synthesized_abandoned, "{name}");
        }
    }

    #[test]
    fn an_interrupted_run_names_the_interrupt_for_what_it_abandons() {
        let case = &cases()[6];
        let s = run(case);
        let causes: Vec<_> = s.synthesized.iter().map(|o| o.outcome).collect();
        assert!(causes.contains(&Synthesized::Abandoned(AbandonCause::Interrupt)));
        assert!(causes.contains(&Synthesized::Abandoned(AbandonCause::WorkerKilled)));
    }

    #[test]
    fn a_broken_count_is_reported_not_hidden() {
        // A record counted twice (a bug elsewhere) must not pass silently.
        let mut tally = Tally::default();
        tally.record(true, FailureKind::None, true);
        tally.record(true, FailureKind::None, true);
        let mut log = IssueLog::with_capacity(1, 0);
        log.push(0, 0, 0, 5);
        let mut answered = IdSet::default();
        answered.insert(0);
        let input = SettleInput {
            log: &log,
            answered: &answered,
            tally,
            workers: &[done()],
            closed_loop: false,
            warmup_samples: 0,
            tracked_end: u64::MAX,
            abort: None,
            window: (TrackingWindow::default(), &IdSet::default()),
        };
        let broken = std::panic::catch_unwind(|| settle(&input).broken);
        // Debug builds assert; release builds return the message for the run's warnings.
        if let Ok(broken) = broken {
            assert!(broken.unwrap().contains("1 issued, 2 completed"));
        }
    }

    #[test]
    fn the_issue_log_keeps_worker_row_and_stamp() {
        let mut log = IssueLog::with_capacity(4, 1_000);
        log.push(0, 3, 17, 1_005);
        log.push(2, 0, 9, 0);
        assert_eq!(log.get(0), Some(Issued { worker: 3, row: 17, issued_ns: Some(1_005) }));
        assert_eq!(log.get(1), None, "a skipped id was never issued");
        assert_eq!(log.get(2), Some(Issued { worker: 0, row: 9, issued_ns: None }));
        assert_eq!(log.get(3), None);
        assert_eq!(log.id_end(), 3);
    }

    #[test]
    fn a_spilled_issue_log_walks_and_reads_as_the_in_memory_one() {
        let dir = std::env::temp_dir().join(format!("loadgen-issue-log-{}", std::process::id()));
        let spill = crate::metrics::column::Spill::new(&dir, 0).unwrap();
        let mut memory = IssueLog::with_capacity(0, 1_000);
        let mut spilled = IssueLog::with_spill(0, 1_000, Some(spill.clone()));
        for id in (0..200_000u64).filter(|id| id % 7 != 3) {
            let stamp = if id % 11 == 0 { 0 } else { 1_000 + id * 3 };
            memory.push(id, (id % 5) as usize, (id * 13) as u32, stamp);
            spilled.push(id, (id % 5) as usize, (id * 13) as u32, stamp);
        }
        assert!(spill.spilled_bytes() > 0, "the log went to files");
        let walk = |log: &IssueLog| {
            let mut out = Vec::new();
            log.for_each(|id, issued| out.push((id, issued)));
            out
        };
        let walked = walk(&memory);
        assert_eq!(walked.len(), 200_000 - 200_000 / 7);
        assert_eq!(walk(&spilled), walked);
        for id in [0, 3, 10, 70_000, 199_999] {
            assert_eq!(spilled.get(id), memory.get(id), "id {id}");
        }
        assert_eq!(spill.error(), None);
    }

    /// An agentic run's window: a record read outside it and an unanswered turn issued after
    /// it (or with no stamp) are untracked; the accounting holds in both scopes.
    #[test]
    fn samples_issued_after_the_tracking_window_are_counted_untracked() {
        let mut window = TrackingWindow::new(1);
        assert_eq!(window.note_finish(100), Some(100));
        let mut log = IssueLog::with_capacity(5, 0);
        for (id, stamp) in [(0, 10), (1, 20), (2, 150), (3, 0), (4, 90), (5, 160)] {
            log.push(id, 0, id as u32, stamp);
        }
        let (mut answered, mut late) = (IdSet::default(), IdSet::default());
        let mut tally = Tally::default();
        for (id, is_late) in [(0, false), (1, false), (2, true)] {
            answered.insert(id);
            if is_late {
                late.insert(id);
            }
            tally.record(!is_late, FailureKind::None, true);
        }
        let s = settle(&SettleInput {
            log: &log,
            answered: &answered,
            tally,
            workers: &[done()],
            closed_loop: false,
            warmup_samples: 0,
            tracked_end: u64::MAX,
            abort: Some(AbandonCause::Cap),
            window: (window, &late),
        });
        assert_eq!((s.total.issued, s.total.completed, s.total.abandoned), (6, 3, 3));
        assert_eq!((s.tracked.issued, s.tracked.completed, s.tracked.abandoned), (3, 2, 1));
        assert!(s.broken.is_none());
    }
}
