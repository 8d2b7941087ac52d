//! Each sample's Poisson issue lag, rebuilt after the run: the log has the issue times, the
//! seed and rate give the schedule, and the run's summary anchors it.
//!
//! The scheduler draws its gaps from `PyRandom::new(scheduler_random_seed)` with
//! `poisson_gap_ns`, sums them from its start, and issues sample `first + k` at offset `S_k`;
//! events.jsonl names each sample by its id. The lag ends at the request's write (the issue
//! stamp plus the `client_wait_ns` of the sample's `sample.complete` line), so with
//! `written_k` that time, `written_k − S_k` is the start plus the lag, and the start is what
//! makes the largest of them the summary's `issue_lag.max_ns`. The
//! rebuild is kept only when the summary's count, p50 and p99 come out exactly; a log that is
//! not the run's own (edited, the reference's uuid4 names) is said and skipped.

use loadgen_coordinator::metrics::stats::lower_percentile_index;
use loadgen_py::random::{poisson_gap_ns, PyRandom};

use crate::rebuild::RunDir;
use crate::replay::read::{self, Event, SessionKind};
use crate::IssueLag;
use loadgen_plan::error::AppError;
use loadgen_plan::yaml::LoadPatternKind;

/// The Poisson schedule a run used.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    pub seed: u64,
    pub target_qps: f64,
}

/// (sample id, time its request was written) of every tracked `sample.issued` line, from the
/// log: the issue stamp plus the sample's client wait (none: a request never written, or a
/// log written before the wait was logged).
pub fn tracked_issues(path: &std::path::Path) -> Result<Vec<(u128, u64)>, AppError> {
    let input = |e: std::io::Error| AppError::Input(format!("cannot read {}: {e}", path.display()));
    let reader = read::open(path).map_err(input)?;
    let mut tracking = false;
    let mut out = Vec::new();
    let mut waits = std::collections::HashMap::new();
    read::for_each_event(reader, |event, _| {
        match event {
            Event::Session { kind: SessionKind::StartTracking, .. } => tracking = true,
            Event::Session { kind: SessionKind::StopTracking, .. } => tracking = false,
            Event::Issued { uuid, timestamp_ns, .. } if tracking => out.push((uuid, timestamp_ns)),
            Event::Complete(c) => {
                if let Some(wait) = c.client_wait_ns {
                    waits.insert(c.uuid, wait);
                }
            }
            _ => {}
        }
        Ok(())
    })
    .map_err(|e| match e {
        read::ReadError::Io(e) => input(e),
        read::ReadError::Line(e) => AppError::Input(format!("{e} ({})", path.display())),
    })?;
    for (uuid, at) in &mut out {
        *at = at.saturating_add(waits.get(uuid).copied().unwrap_or(0));
    }
    Ok(out)
}

/// (issue time, lag) per sample, or why the lags cannot be rebuilt.
pub fn rebuild_lags(
    issues: &[(u128, u64)],
    schedule: Schedule,
    summary: &IssueLag,
) -> Result<Vec<(u64, u64)>, String> {
    let Some(first) = issues.iter().map(|i| i.0).min() else {
        return Err("the log has no tracked sample.issued line".into());
    };
    let mut by_k: Vec<(u64, u64)> = Vec::with_capacity(issues.len());
    for &(id, ts) in issues {
        let k =
            u64::try_from(id - first).map_err(|_| format!("sample id {id:x} is not a count"))?;
        by_k.push((k, ts));
    }
    by_k.sort_unstable();
    if by_k.windows(2).any(|w| w[0].0 == w[1].0)
        || by_k.last().is_some_and(|l| l.0 as usize >= by_k.len())
    {
        return Err(
            "the log's sample ids are not the run's 0, 1, 2, … (not llm-loadgen's log?)".into()
        );
    }
    let mut rng = PyRandom::new(schedule.seed);
    let mut offset_ns = 0u64;
    let mut base: Vec<i128> = Vec::with_capacity(by_k.len());
    for &(_, ts) in &by_k {
        offset_ns += poisson_gap_ns(&mut rng, schedule.target_qps);
        base.push(i128::from(ts) - i128::from(offset_ns));
    }
    let start = base.iter().max().copied().unwrap_or(0) - i128::from(summary.max_ns);
    let lags: Vec<u64> = base.iter().map(|b| u64::try_from(b - start).unwrap_or(0)).collect();
    let mut sorted = lags.clone();
    sorted.sort_unstable();
    let at = |p: f64| sorted[lower_percentile_index(sorted.len(), p)];
    let matches = sorted.len() as u64 == summary.n
        && at(50.0) == summary.p50_ns
        && at(99.0) == summary.p99_ns
        && base.iter().all(|&b| b >= start);
    if !matches {
        return Err(format!(
            "the seeded schedule (seed {}, {} qps) does not reproduce the summary's issue_lag \
             (n {}, p50 {} ns, p99 {} ns) from the log's issue times",
            schedule.seed, schedule.target_qps, summary.n, summary.p50_ns, summary.p99_ns
        ));
    }
    Ok(by_k.iter().zip(lags).map(|(&(_, ts), lag)| (ts, lag)).collect())
}

/// A Poisson run's rebuilt issue lags and its target rate.
#[derive(Debug, Clone, PartialEq)]
pub struct RunLags {
    /// (issue time, lag) per tracked sample, ns.
    pub lags: Vec<(u64, u64)>,
    pub target_qps: f64,
}

/// Each tracked sample's issue lag of a Poisson run, anchored to its summary's `issue_lag`;
/// or why the run has none (`Err` of the outer result: the log cannot be read).
pub fn run_lags(run: &RunDir) -> Result<Result<RunLags, String>, AppError> {
    let lp = &run.config.settings.load_pattern;
    let (LoadPatternKind::Poisson, Some(target_qps)) = (lp.kind, lp.target_qps) else {
        return Ok(Err(format!(
            "the run's load pattern is {}, and only a Poisson run has a schedule to lag behind",
            lp.kind.as_str()
        )));
    };
    let Some(summary) = &run.carried.issue_lag else {
        return Ok(Err("performance/result_summary.json has no issue_lag to anchor the \
                       schedule to"
            .into()));
    };
    let issues = tracked_issues(&run.dir.join("events.jsonl"))?;
    let schedule = Schedule { seed: run.config.settings.runtime.scheduler_random_seed, target_qps };
    Ok(rebuild_lags(&issues, schedule, summary).map(|lags| RunLags { lags, target_qps }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary_of(lags: &[u64]) -> IssueLag {
        let mut s = lags.to_vec();
        s.sort_unstable();
        let at = |p: f64| s[lower_percentile_index(s.len(), p)];
        IssueLag {
            n: s.len() as u64,
            p50_ns: at(50.0),
            p99_ns: at(99.0),
            max_ns: s[s.len() - 1],
            target_qps: 1000.0,
            achieved_qps: 1000.0,
        }
    }

    /// The log a scheduler starting at `start` writes for `lags`, sample ids from `first`.
    fn issues(start: u64, first: u128, lags: &[u64], schedule: Schedule) -> Vec<(u128, u64)> {
        let mut rng = PyRandom::new(schedule.seed);
        let mut at = 0;
        let mut out = Vec::new();
        for (k, lag) in lags.iter().enumerate() {
            at += poisson_gap_ns(&mut rng, schedule.target_qps);
            out.push((first + k as u128, start + at + lag));
        }
        out.reverse();
        out
    }

    #[test]
    fn the_lags_come_back_exactly_from_the_log_and_the_summary() {
        let schedule = Schedule { seed: 42, target_qps: 1000.0 };
        let lags: Vec<u64> = (0..300).map(|i| 2_000 + (i * 7919 % 13) * 1_000).collect();
        let log = issues(5_000_000_000, 8, &lags, schedule);
        let got = rebuild_lags(&log, schedule, &summary_of(&lags)).unwrap();
        assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), lags, "in schedule order");
        let mut issued: Vec<(u128, u64)> = log.clone();
        issued.sort_unstable();
        assert!(got.iter().zip(&issued).all(|(g, i)| g.0 == i.1), "with each sample's issue time");
    }

    #[test]
    fn another_seed_does_not_pass_for_the_run_s_schedule() {
        let schedule = Schedule { seed: 42, target_qps: 1000.0 };
        let lags: Vec<u64> = (0..300).map(|i| 2_000 + (i % 5) * 100).collect();
        let log = issues(1_000, 0, &lags, schedule);
        let wrong = Schedule { seed: 7, ..schedule };
        let err = rebuild_lags(&log, wrong, &summary_of(&lags)).unwrap_err();
        assert!(err.contains("seed 7") && err.contains("issue_lag"), "{err}");
        assert!(rebuild_lags(&[], schedule, &summary_of(&lags)).is_err());
    }
}
