//! The issue lag of a Poisson run: how late each sample's request was written against its
//! schedule, in summary form, and the warning when the client could not keep up.

use loadgen_coordinator::metrics::column::Column;
use loadgen_coordinator::metrics::select::values_at_ranks;
use loadgen_coordinator::metrics::sort_spool::TupleSpool;
use loadgen_coordinator::schedule::IssueLags;
use loadgen_coordinator::LoadPattern;

use loadgen_plan::plan::Plan;

/// The scheduler's own account of an open-loop run: did the client keep its schedule?
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IssueLag {
    /// Samples measured.
    pub n: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// The requested rate.
    pub target_qps: f64,
    /// Samples issued over the issuing window (first scheduled → last issued).
    pub achieved_qps: f64,
}

impl IssueLag {
    /// Lag p99 below which no schedule is called missed, however fast the rate.
    pub const P99_WARN_NS: u64 = 1_000_000;

    /// Why the schedule was not kept, when it was not: the issue lag, not the achieved rate,
    /// decides. A Poisson schedule's own rate wanders around its target (1,000 samples at any
    /// rate draw within about ±6% of it, two sigma), so a rate below or above the target says
    /// nothing of the client. A p99 lag of more than one mean gap (`1 / target_qps`), and of
    /// at least `P99_WARN_NS`, means samples left later than the next one was due: the
    /// arrivals the server saw bunched, and the client set them.
    pub fn warning(&self) -> Option<String> {
        let mean_gap_ns = if self.target_qps > 0.0 { 1e9 / self.target_qps } else { 0.0 };
        let limit_ns = (Self::P99_WARN_NS as f64).max(mean_gap_ns);
        if (self.p99_ns as f64) <= limit_ns {
            return None;
        }
        Some(format!(
            "the client could not keep up with the schedule: issue lag p99 {:.3} ms (max {:.3} \
             ms) is more than the {:.3} ms between samples at {:.2} QPS, so arrivals bunched \
             (issued {:.2} QPS); the numbers describe the client's limit, not the server's — \
             add --workers or lower --target-qps",
            self.p99_ns as f64 / 1e6,
            self.max_ns as f64 / 1e6,
            mean_gap_ns / 1e6,
            self.target_qps,
            self.achieved_qps,
        ))
    }
}

/// The issue-lag summary of a Poisson run: lower-method percentiles over the exact lags, each
/// from the schedule to the request's write (the scheduler's lateness plus the sample's client
/// wait: `waits` holds `(sample id, wait, 0)` of the written samples, in any order). In bounded
/// memory: the waits are sorted by sample id as the lags are, the totals go to a column, and the
/// percentiles are selected from it (`values_at_ranks`).
pub fn issue_lag(plan: &Plan, lags: &IssueLags, waits: TupleSpool) -> Option<IssueLag> {
    let LoadPattern::Poisson { target_qps, .. } = plan.load_pattern else { return None };
    lag_summary(target_qps, lags, waits)
}

fn lag_summary(target_qps: f64, lags: &IssueLags, waits: TupleSpool) -> Option<IssueLag> {
    if lags.lags_ns.is_empty() {
        return None;
    }
    let mut totals = Column::new("issue_lag_totals", lags.lags_ns.spill_handle());
    let mut lag_values = lags.lags_ns.values();
    let mut next_id = lags.first_sample_id;
    let mut take_lags_until = |id: u64, wait: u64, totals: &mut Column<u64>| {
        while next_id < id {
            let Some(lag) = lag_values.next() else { return };
            totals.push_spilling(lag);
            next_id += 1;
        }
        if next_id == id {
            if let Some(lag) = lag_values.next() {
                totals.push_spilling(lag.saturating_add(wait));
                next_id += 1;
            }
        }
    };
    waits.drain_sorted(|(id, wait, _)| take_lags_until(id, wait, &mut totals));
    take_lags_until(u64::MAX, 0, &mut totals);
    let n = totals.len() as u64;
    let rank = |p: f64| ((n - 1) as f64 * p / 100.0).floor() as u64;
    let picked = values_at_ranks(&mut totals, &[rank(50.0), rank(99.0), n - 1]);
    let window_s = lags.last_issued_ns.saturating_sub(lags.first_scheduled_ns) as f64 / 1e9;
    // n samples span n - 1 gaps; the first is issued at the window's start.
    let achieved_qps = if window_s > 0.0 { (n - 1) as f64 / window_s } else { target_qps };
    Some(IssueLag {
        n,
        p50_ns: picked[0],
        p99_ns: picked[1],
        max_ns: picked[2],
        target_qps,
        achieved_qps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen_coordinator::metrics::column::Spill;

    /// Lags of ids 10.., waits of some of them (out of order), in memory and in files: the
    /// summary is the sorted totals' lower-method values either way.
    #[test]
    fn the_lag_summary_is_exact_in_memory_and_in_files() {
        let n = 200_000u64;
        let lag_of = |i: u64| (i * 7919) % 100_003;
        let wait_of = |i: u64| (i % 3 == 0).then(|| (i * 31) % 5_000);
        let mut expected: Vec<u64> = (0..n).map(|i| lag_of(i) + wait_of(i).unwrap_or(0)).collect();
        expected.sort_unstable();
        let at = |p: f64| expected[((n - 1) as f64 * p / 100.0).floor() as usize];
        let dir = std::env::temp_dir().join(format!("loadgen-issue-lag-{}", std::process::id()));
        for spill in [None, Some(Spill::new(&dir, 0).unwrap())] {
            let mut lags = IssueLags::with_spill(spill.clone());
            lags.first_sample_id = 10;
            (0..n).for_each(|i| lags.lags_ns.push_spilling(lag_of(i)));
            let mut waits = TupleSpool::new("w", spill.clone());
            for i in (0..n).rev() {
                if let Some(w) = wait_of(i) {
                    waits.push((10 + i, w, 0));
                }
            }
            let summary = lag_summary(100.0, &lags, waits).unwrap();
            assert_eq!(summary.n, n);
            assert_eq!((summary.p50_ns, summary.p99_ns), (at(50.0), at(99.0)));
            assert_eq!(summary.max_ns, expected[(n - 1) as usize]);
            assert_eq!(lags.lags_ns.spilled(), spill.is_some());
        }
    }

    fn lag(target_qps: f64, achieved_qps: f64, p99_ms: f64) -> IssueLag {
        let p99_ns = (p99_ms * 1e6) as u64;
        IssueLag {
            n: 1000,
            p50_ns: p99_ns / 4,
            p99_ns,
            max_ns: p99_ns * 2,
            target_qps,
            achieved_qps,
        }
    }

    #[test]
    fn the_warning_follows_the_lag_not_the_achieved_rate() {
        // A Poisson draw below or above its target, issued on time: no warning.
        assert_eq!(lag(10.0, 9.48, 4.3).warning(), None, "4 ms late between 100 ms gaps");
        assert_eq!(lag(5.0, 5.29, 0.2).warning(), None, "above the target is not behind");
        assert_eq!(lag(50_000.0, 50_100.0, 0.5).warning(), None, "below the 1 ms floor");
        // Later than a whole gap: the client bunched the arrivals.
        let slow = lag(10.0, 9.9, 150.0).warning().expect("150 ms late between 100 ms gaps");
        assert!(slow.contains("p99 150.000 ms") && slow.contains("100.000 ms between"), "{slow}");
        assert!(lag(50_000.0, 41_000.0, 3.0).warning().is_some(), "3 ms late at 20 us gaps");
        assert!(lag(1_000.0, 1_000.0, 1.5).warning().is_some(), "past both the floor and a gap");
    }
}
