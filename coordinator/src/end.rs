//! How a run ends, as pure decisions over plain data: the end from why issuing stopped, the drain
//! deadline, and what the drain's result makes of the end. `run::run` calls them.

use std::time::{Duration, Instant};

use crate::schedule::IssueEnd;
use crate::settle::AbandonCause;

/// After the coordinator aborts its workers, how long they have to answer (cancel what is in
/// flight, say Done) before they are killed with SIGKILL, which also ends a stopped process.
/// Their samples are then settled from the issue log and their in-flight tables.
pub const ABORT_GRACE: Duration = Duration::from_secs(2);

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// Every sample was issued and answered (or failed).
    Completed,
    /// The wall-time cap (`max_duration`) ended it; in-flight samples were abandoned.
    Capped,
    /// SIGINT or SIGTERM.
    Interrupted,
    /// Every worker died.
    WorkersLost,
}

impl RunEnd {
    /// Why the samples still in flight at the abort of a run that ended so are abandoned.
    pub fn abandon_cause(self, drain_timed_out: bool) -> AbandonCause {
        match self {
            RunEnd::Capped => AbandonCause::Cap,
            RunEnd::Interrupted => AbandonCause::Interrupt,
            _ if drain_timed_out => AbandonCause::DrainTimeout,
            _ => AbandonCause::Unanswered,
        }
    }
}

/// Why what is still in flight when a run's accuracy phases end is abandoned: the interrupt,
/// the performance phase's cap where its samples are among them (the phase was not drained),
/// else an accuracy drain timeout (or an earlier phase's, whose samples were left behind).
pub fn accuracy_abandon_cause(end: RunEnd, perf_capped_left: bool) -> AbandonCause {
    match end {
        RunEnd::Interrupted => AbandonCause::Interrupt,
        _ if perf_capped_left => AbandonCause::Cap,
        _ => AbandonCause::DrainTimeout,
    }
}

/// The end of a run from why issuing stopped and what happened meanwhile.
pub fn run_end(issue: IssueEnd, interrupted: bool, capped: bool) -> RunEnd {
    match issue {
        _ if interrupted => RunEnd::Interrupted,
        IssueEnd::NoWorkers => RunEnd::WorkersLost,
        IssueEnd::AllIssued => RunEnd::Completed,
        IssueEnd::Stopped if capped => RunEnd::Capped,
        IssueEnd::Stopped => RunEnd::Completed,
    }
}

/// When the drain ends, and whether it waits at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainPlan {
    /// Abort at once: the cap has passed or the user interrupted.
    pub abort_now: bool,
    /// The latest instant the drain waits until.
    pub deadline: Instant,
    /// The cap comes before the drain's own timeout: a drain it cuts short is a capped end.
    pub cut_by_cap: bool,
}

/// The drain of a run that ended issuing as `end` at `now`.
pub fn drain_plan(
    end: RunEnd,
    now: Instant,
    cap: Option<Instant>,
    drain_timeout: Duration,
) -> DrainPlan {
    let abort_now = matches!(end, RunEnd::Capped | RunEnd::Interrupted);
    if abort_now {
        return DrainPlan { abort_now, deadline: now, cut_by_cap: false };
    }
    let own = now + drain_timeout;
    match cap {
        Some(c) if c < own => DrainPlan { abort_now, deadline: c.max(now), cut_by_cap: true },
        _ => DrainPlan { abort_now, deadline: own, cut_by_cap: false },
    }
}

/// The end after the drain, and whether the drain timed out: samples still in flight when the
/// cap ends the drain are abandoned (a capped end); only a drain that outlives its own timeout
/// is a timeout; an interrupt during the drain wins.
pub fn after_drain(
    end: RunEnd,
    drained: bool,
    interrupted: bool,
    cut_by_cap: bool,
) -> (RunEnd, bool) {
    if interrupted {
        return (RunEnd::Interrupted, false);
    }
    if drained || end == RunEnd::Capped {
        return (end, false);
    }
    if cut_by_cap && end == RunEnd::Completed {
        return (RunEnd::Capped, false);
    }
    (end, true)
}

/// The deadline the aggregator finishes by: the abort's instant plus `ABORT_GRACE`.
pub fn finish_deadline(abort_at: Instant) -> Instant {
    abort_at + ABORT_GRACE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_left_after_the_accuracy_phases_are_abandoned_for_what_left_them() {
        use AbandonCause::*;
        assert_eq!(accuracy_abandon_cause(RunEnd::Completed, false), DrainTimeout);
        assert_eq!(accuracy_abandon_cause(RunEnd::Completed, true), Cap);
        assert_eq!(accuracy_abandon_cause(RunEnd::Interrupted, true), Interrupt);
    }

    #[test]
    fn the_end_of_a_run_follows_issue_end_interrupt_and_cap() {
        use IssueEnd::*;
        let table = [
            (AllIssued, false, false, RunEnd::Completed),
            (AllIssued, true, false, RunEnd::Interrupted),
            (Stopped, false, true, RunEnd::Capped),
            (Stopped, true, true, RunEnd::Interrupted),
            (Stopped, false, false, RunEnd::Completed),
            (NoWorkers, false, false, RunEnd::WorkersLost),
            (NoWorkers, true, false, RunEnd::Interrupted),
            (AllIssued, false, true, RunEnd::Completed),
        ];
        for (issue, interrupted, capped, want) in table {
            assert_eq!(
                run_end(issue, interrupted, capped),
                want,
                "{issue:?} {interrupted} {capped}"
            );
        }
    }

    #[test]
    fn the_drain_deadline_is_the_cap_or_its_own_timeout_whichever_is_first() {
        let now = Instant::now();
        let s = Duration::from_secs;
        let t = s(10);
        let plan = |end, cap| drain_plan(end, now, cap, t);
        assert_eq!(plan(RunEnd::Completed, None).deadline, now + t);
        assert!(!plan(RunEnd::Completed, None).cut_by_cap);
        let capped_early = plan(RunEnd::Completed, Some(now + s(3)));
        assert_eq!((capped_early.deadline, capped_early.cut_by_cap), (now + s(3), true));
        let capped_late = plan(RunEnd::Completed, Some(now + s(30)));
        assert_eq!((capped_late.deadline, capped_late.cut_by_cap), (now + t, false));
        for end in [RunEnd::Capped, RunEnd::Interrupted] {
            let p = plan(end, Some(now + s(3)));
            assert!(p.abort_now && p.deadline == now, "{end:?} aborts at once");
        }
        assert_eq!(finish_deadline(now), now + ABORT_GRACE);
    }

    #[test]
    fn after_the_drain_a_cut_by_the_cap_is_capped_and_only_its_own_timeout_times_out() {
        use RunEnd::*;
        let table = [
            // (end, drained, interrupted, cut_by_cap) -> (end, timed out)
            ((Completed, true, false, false), (Completed, false)),
            ((Completed, false, false, false), (Completed, true)),
            ((Completed, false, false, true), (Capped, false)),
            ((Completed, false, true, false), (Interrupted, false)),
            ((Capped, false, false, false), (Capped, false)),
            ((WorkersLost, false, false, false), (WorkersLost, true)),
        ];
        for ((end, drained, interrupted, cut), want) in table {
            assert_eq!(after_drain(end, drained, interrupted, cut), want, "{end:?}");
        }
    }
}
