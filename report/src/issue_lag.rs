//! The issue lag of a Poisson run: how late each sample's request was written against its
//! schedule, in summary form, and the warning when the client could not keep up.

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

/// Each Poisson sample's client wait (issued → written), in the order of `lags` (`None`: never
/// written, or not a Poisson run).
pub fn client_waits_in_issue_order(
    rows: &[loadgen_coordinator::metrics::SampleRow],
    sample_rows: &[(u64, u32)],
    lags: &IssueLags,
) -> Vec<Option<u64>> {
    let mut waits = vec![None; lags.lags_ns.len()];
    for (row, &(sample_id, _)) in rows.iter().zip(sample_rows) {
        let at = sample_id.checked_sub(lags.first_sample_id).map(|i| i as usize);
        if let Some(slot) = at.and_then(|i| waits.get_mut(i)) {
            *slot = row.client_wait_ns;
        }
    }
    waits
}

/// The issue-lag summary of a Poisson run: lower-method percentiles over the exact lags, each
/// from the schedule to the request's write (the scheduler's lateness plus the sample's client
/// wait, `waits`, in the lags' order).
pub fn issue_lag(plan: &Plan, lags: &IssueLags, waits: &[Option<u64>]) -> Option<IssueLag> {
    let LoadPattern::Poisson { target_qps, .. } = plan.load_pattern else { return None };
    if lags.lags_ns.is_empty() {
        return None;
    }
    let mut sorted: Vec<u64> = lags
        .lags_ns
        .iter()
        .zip(waits.iter().chain(std::iter::repeat(&None)))
        .map(|(&lag, wait)| lag.saturating_add(wait.unwrap_or(0)))
        .collect();
    sorted.sort_unstable();
    let at = |p: f64| sorted[((sorted.len() - 1) as f64 * p / 100.0).floor() as usize];
    let window_s = lags.last_issued_ns.saturating_sub(lags.first_scheduled_ns) as f64 / 1e9;
    let n = sorted.len() as u64;
    // n samples span n - 1 gaps; the first is issued at the window's start.
    let achieved_qps = if window_s > 0.0 { (n - 1) as f64 / window_s } else { target_qps };
    Some(IssueLag {
        n,
        p50_ns: at(50.0),
        p99_ns: at(99.0),
        max_ns: sorted[sorted.len() - 1],
        target_qps,
        achieved_qps,
    })
}

#[cfg(test)]
mod tests {
    use super::IssueLag;

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
