//! The accuracy phases that follow the performance phase (the reference's `_build_phases`):
//! what each issues, on which pattern, with which ids and drain; the decisions are pure
//! functions, `run::issue_and_drain` calls them.

use std::time::{Duration, Instant};

use crate::schedule::{IssueEnd, LoadPattern};

/// One accuracy phase: a dataset's rows in sequential order, repeated `num_repeats` times.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AccuracyPhaseSpec {
    /// The phase's name: the dataset's name, as `sample_idx_map.json` keys it.
    pub name: String,
    /// The request-table row of each sample, in issue order.
    pub rows: Vec<u32>,
    /// How long in-flight samples may take after the last issue; `None` waits without limit
    /// (the reference's `accuracy_timeout_s: null`), an interrupt still ends the wait.
    pub drain_timeout: Option<Duration>,
}

/// What one accuracy phase issued, for `sample_idx_map.json` and `duration_s`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhaseOutcome {
    pub name: String,
    /// The first sample id of the phase; its samples are `first_sample_id..+issued`.
    pub first_sample_id: u64,
    pub issued: u64,
    /// CLOCK_MONOTONIC ns of the phase's start and of the end of its drain.
    pub start_ns: u64,
    pub end_ns: u64,
}

/// The request-table rows of an accuracy phase: `0..unit_rows` (offset by `first_row`, where
/// its dataset's rows follow the others in the tables), `num_repeats` times.
pub fn accuracy_rows(first_row: u32, unit_rows: u32, num_repeats: u32) -> Vec<u32> {
    let mut rows = Vec::with_capacity((unit_rows as usize) * (num_repeats as usize));
    for _ in 0..num_repeats {
        rows.extend(first_row..first_row + unit_rows);
    }
    rows
}

/// The first sample id of each phase: the tracked range ends at `warmup + tracked`, and each
/// phase's ids follow the previous phase's planned samples, issued or not, so every phase's
/// ids are known before the run.
pub fn first_sample_ids(warmup: u64, tracked: u64, phases: &[AccuracyPhaseSpec]) -> Vec<u64> {
    let mut next = warmup.saturating_add(tracked);
    phases
        .iter()
        .map(|p| {
            let first = next;
            next = next.saturating_add(p.rows.len() as u64);
            first
        })
        .collect()
}

/// Whether a run has a performance phase: any run with tracked samples (`--num-samples 0` is
/// refused), so none only in an accuracy-only run.
pub fn has_performance_phase(tracked_samples: u64) -> bool {
    tracked_samples > 0
}

/// The accuracy phases' pattern: the performance phase's (every pattern here can drive a
/// dataset in order; the reference falls back to max throughput only for agentic runs), and
/// max throughput with no performance phase (accuracy-only), as the reference's, whose
/// pattern is its performance phase's runtime settings'.
pub fn accuracy_pattern(perf: &LoadPattern, performance_phase: bool) -> LoadPattern {
    match perf {
        // The reference's accuracy phase of an agentic run runs at max_throughput.
        LoadPattern::Agentic { .. } => LoadPattern::Offline,
        _ if performance_phase => *perf,
        _ => LoadPattern::Offline,
    }
}

/// Whether the accuracy phases run after the performance phase ended as `perf_end`: not after
/// an interrupt, nor once every worker is gone. The cap ends only the performance phase, as
/// the reference's perf-phase timer does.
pub fn accuracy_runs(perf_end: IssueEnd, interrupted: bool) -> bool {
    !interrupted && perf_end != IssueEnd::NoWorkers
}

/// The deadline of a phase's drain that started at `now`; `None` waits without limit.
pub fn drain_deadline(now: Instant, timeout: Option<Duration>) -> Option<Instant> {
    timeout.map(|t| now + t)
}

/// The phase index of the performance phase in `PhaseCounts::of_run`, and of accuracy phase `i`.
pub const PERFORMANCE_PHASE: usize = 1;
pub fn accuracy_phase_index(i: usize) -> usize {
    PERFORMANCE_PHASE + 1 + i
}

/// A phase's samples still unanswered: those it issued less the records of its own ids.
pub fn phase_in_flight(issued: u64, received: u64) -> u64 {
    issued.saturating_sub(received)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::PhaseCounts;

    #[test]
    fn an_accuracy_phase_issues_its_rows_in_order_num_repeats_times() {
        assert_eq!(accuracy_rows(10, 3, 2), vec![10, 11, 12, 10, 11, 12]);
        assert_eq!(accuracy_rows(0, 2, 1), vec![0, 1]);
        assert!(accuracy_rows(0, 0, 3).is_empty());
    }

    #[test]
    fn accuracy_sample_ids_follow_the_tracked_range_phase_after_phase() {
        let phase = |n: u32| AccuracyPhaseSpec { rows: (0..n).collect(), ..Default::default() };
        assert_eq!(first_sample_ids(5, 100, &[phase(3), phase(4), phase(1)]), vec![105, 108, 112]);
        assert_eq!(first_sample_ids(0, 0, &[phase(2)]), vec![0], "accuracy only");
    }

    #[test]
    fn accuracy_phases_follow_any_perf_end_but_an_interrupt_or_lost_workers() {
        assert!(accuracy_runs(IssueEnd::AllIssued, false));
        assert!(accuracy_runs(IssueEnd::Stopped, false), "the perf cap ends only perf");
        assert!(!accuracy_runs(IssueEnd::AllIssued, true));
        assert!(!accuracy_runs(IssueEnd::NoWorkers, false));
    }

    #[test]
    fn the_accuracy_drain_waits_without_limit_unless_a_timeout_is_set() {
        let now = Instant::now();
        assert_eq!(drain_deadline(now, None), None);
        assert_eq!(
            drain_deadline(now, Some(Duration::from_secs(3))),
            Some(now + Duration::from_secs(3))
        );
        let poisson = LoadPattern::Poisson { target_qps: 5.0, seed: 7 };
        assert_eq!(accuracy_pattern(&poisson, true), poisson);
        assert_eq!(
            accuracy_pattern(&LoadPattern::Concurrency { n: 4 }, true),
            LoadPattern::Concurrency { n: 4 }
        );
    }

    #[test]
    fn an_accuracy_only_run_issues_its_phases_at_max_throughput() {
        assert!(!has_performance_phase(0));
        assert!(has_performance_phase(1));
        let poisson = LoadPattern::Poisson { target_qps: 5.0, seed: 7 };
        assert_eq!(accuracy_pattern(&poisson, false), LoadPattern::Offline);
        let closed = LoadPattern::Concurrency { n: 1 };
        assert_eq!(accuracy_pattern(&closed, false), LoadPattern::Offline);
    }
    #[test]
    fn records_count_toward_the_phase_whose_ids_they_carry() {
        // warm-up 0..2, performance 2..5, accuracy a 5..8, accuracy b 8..
        let counts = PhaseCounts::of_run(2, 3, &[5, 8]);
        for id in [0, 1, 2, 4, 4, 5, 7, 8, 9, 9] {
            counts.note(id);
        }
        let got: Vec<u64> = (0..4).map(|p| counts.received(p)).collect();
        assert_eq!(got, [2, 3, 2, 3]);
        assert_eq!(counts.phase_of(4), Some(PERFORMANCE_PHASE));
        assert_eq!(counts.phase_of(5), Some(accuracy_phase_index(0)));
        assert_eq!(counts.phase_of(100), Some(accuracy_phase_index(1)));
        assert_eq!(counts.received(9), 0, "no such phase");
    }

    #[test]
    fn a_stale_sample_of_an_earlier_phase_keeps_no_later_phase_in_flight() {
        let counts = PhaseCounts::of_run(0, 2, &[2, 4]);
        // Performance sample 1 stalls; accuracy phase a's samples 2 and 3 answer.
        for id in [0, 2, 3] {
            counts.note(id);
        }
        assert_eq!(phase_in_flight(2, counts.received(PERFORMANCE_PHASE)), 1);
        assert_eq!(phase_in_flight(2, counts.received(accuracy_phase_index(0))), 0);
        // Its late answer counts toward its own phase, never toward the phase running then.
        counts.note(1);
        assert_eq!(phase_in_flight(2, counts.received(PERFORMANCE_PHASE)), 0);
        assert_eq!(counts.received(accuracy_phase_index(1)), 0);
    }
}
