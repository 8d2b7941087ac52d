//! The client's own wait: how long samples sat inside the client between their issue stamp and
//! their request's write, when that is material, what caused it and which flag changes it.
//!
//! TTFT and latency start at the issue stamp, as the reference's do, so a wait inside the
//! client (a sample queued for a free connection or a connect) is part of them; the summary
//! reports it as `client_wait`, with `ttft_from_write` and `latency_from_write` beside, and
//! this module says when it is large enough that the headline describes the client.

use loadgen_coordinator::metrics::column::Column;
use loadgen_coordinator::metrics::series::sort_u64;
use loadgen_coordinator::metrics::snapshot::CLIENT_WAIT_NS;
use loadgen_coordinator::metrics::sort_spool::walk_sorted_u64;
use loadgen_coordinator::metrics::{SampleTable, SeriesStat, Snapshot};

use loadgen_plan::plan::Plan;

/// A client wait p99 at or below this is never material, however short the latency.
pub const MATERIAL_WAIT_P99_NS: f64 = 1_000_000.0;

/// A client wait p99 at or below this share of the latency p99 is never material.
pub const MATERIAL_WAIT_LATENCY_FRACTION: f64 = 0.01;

/// Grid index of p99 and p50 in `SeriesStat::percentiles`.
const P99: usize = 1;
const P50: usize = 7;

/// What the run knows of its pool, to name the cause of a material wait: the summary's
/// `connection_pool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientWaitInfo {
    /// The pool's ceiling across all workers (`--max-connections`, or the default's).
    pub max_connections: u64,
    /// `--max-connections` was given (not the default).
    #[serde(rename = "max_connections_given")]
    pub pool_given: bool,
    /// The most requests written and not yet answered at one time; counted only when the wait
    /// is material (`None` otherwise).
    pub peak_in_flight: Option<u64>,
}

/// Whether a client wait of `wait_p99_ns` at p99 is material beside a latency of
/// `latency_p99_ns` at p99: above 1 ms and above 1% of the latency.
pub fn is_material(wait_p99_ns: f64, latency_p99_ns: f64) -> bool {
    wait_p99_ns > MATERIAL_WAIT_P99_NS
        && wait_p99_ns > latency_p99_ns * MATERIAL_WAIT_LATENCY_FRACTION
}

/// The client wait and latency series of a snapshot, when the run wrote any request.
fn series(snap: &Snapshot) -> Option<(&SeriesStat, &SeriesStat)> {
    let wait = snap.series(CLIENT_WAIT_NS).filter(|s| s.count > 0)?;
    let latency = snap.series("sample_latency_ns").filter(|s| s.count > 0)?;
    Some((wait, latency))
}

/// Whether the run's client wait is material (`is_material` on its p99s).
pub fn wait_is_material(snap: &Snapshot) -> bool {
    series(snap).is_some_and(|(w, l)| is_material(w.percentiles[P99], l.percentiles[P99]))
}

/// The most requests written and not yet answered at one time: each written sample holds a
/// connection from its write (issue stamp + client wait) to its completion.
pub fn peak_in_flight(table: &SampleTable) -> u64 {
    // Each edge one value, `instant << 1 | write` (1 for a write, 0 for an answer): at one
    // instant an answer frees its connection before a write takes it. In memory they are
    // radix-sorted in place; past the budget in runs, merged (`walk_sorted_u64`).
    let mut edges: Column<u64> = table.series_column("in_flight");
    edges.reserve(table.len());
    table.for_each_row(|row| {
        if let Some(wait) = row.client_wait_ns {
            edges.push_spilling(row.issued_ns.saturating_add(wait) << 1 | 1);
            edges.push_spilling(row.complete_ns << 1);
        }
    });
    let (mut now, mut peak) = (0i64, 0i64);
    let mut step = |edge: u64| {
        now += if edge & 1 == 1 { 1 } else { -1 };
        peak = peak.max(now);
    };
    if let Some(values) = edges.as_mut_slice() {
        sort_u64(values);
        values.iter().for_each(|&e| step(e));
    } else if let Some(spill) = table.spill() {
        walk_sorted_u64("in_flight", edges.values(), spill, step);
    }
    peak as u64
}

/// Whether a Poisson run's issue lag is mostly its client wait (issue lag ends at the write, so
/// it holds the wait): then the wait's warning, which names the cause, says it all, and the
/// schedule's is not given too. A wait p99 of at least half the lag's p99 decides.
pub fn lag_is_the_wait(lag_p99_ns: u64, wait_p99_ns: Option<f64>) -> bool {
    wait_p99_ns.is_some_and(|wait| wait * 2.0 >= lag_p99_ns as f64)
}

/// The console's and report.txt's warning when the client's wait is material: how much, what
/// caused it and which flag changes it (from the run's load pattern, `max_throughput`,
/// `poisson` or `concurrency`, and its pool); `None` when it is not.
pub fn client_wait_warning(
    snap: &Snapshot,
    pattern: &str,
    pool: Option<&ClientWaitInfo>,
) -> Option<String> {
    let (wait, latency) = series(snap)?;
    let (p50, p99) = (wait.percentiles[P50], wait.percentiles[P99]);
    if !is_material(p99, latency.percentiles[P99]) {
        return None;
    }
    let share = 100.0 * p99 / latency.percentiles[P99].max(1.0);
    let how_much = format!(
        "samples waited inside the client before their requests were written: client wait \
         p50 {:.3} ms, p99 {:.3} ms ({share:.1}% of latency p99); TTFT and latency include it \
         (ttft_from_write and latency_from_write do not)",
        p50 / 1e6,
        p99 / 1e6,
    );
    Some(format!("{how_much}; {}", cause(pattern, pool)))
}

/// The pool behind the run's client wait; its peak in flight is counted only when the wait is
/// material (it sorts every write and completion).
pub fn client_wait_info(plan: &Plan, snapshot: &Snapshot, table: &SampleTable) -> ClientWaitInfo {
    let material = wait_is_material(snapshot);
    ClientWaitInfo {
        max_connections: plan.connections.max_connections as u64,
        pool_given: plan.connections.max_connections_given,
        peak_in_flight: material.then(|| peak_in_flight(table)),
    }
}

/// What made samples wait, and the flag that changes it.
fn cause(pattern: &str, pool: Option<&ClientWaitInfo>) -> String {
    let Some(pool) = pool else {
        return "add --workers or raise --max-connections".to_string();
    };
    let (n, peak) = (pool.max_connections, pool.peak_in_flight.unwrap_or(0));
    if pattern == "max_throughput" {
        return format!(
            "max_throughput issues every sample at once, so they queue for the pool's {n} \
             connections; --max-connections sets how many the server sees at a time"
        );
    }
    if peak >= n {
        let flag = if pool.pool_given {
            "raise --max-connections, or leave it out (the default grows with the load)"
        } else {
            "raise --max-connections past the default's ceiling"
        };
        return format!(
            "every one of the pool's {n} connections was busy (at most {peak} requests in \
             flight): {flag}"
        );
    }
    format!(
        "the pool was not full (at most {peak} of {n} connections in flight), so the worker's \
         event loop or on-demand connects held samples back: add --workers or raise \
         --client.warmup-connections"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same rows in memory and in files (a zero budget) give the same peak, and it is the
    /// brute-force count of overlapping write→answer spans.
    #[test]
    fn the_peak_in_flight_is_the_same_in_memory_and_in_files() {
        use loadgen_coordinator::metrics::column::Spill;
        use loadgen_coordinator::metrics::SampleRow;
        let rows: Vec<SampleRow> = (0..140_000u64)
            .map(|i| SampleRow {
                issued_ns: i * 10,
                complete_ns: i * 10 + 5 + (i * 7919) % 400,
                client_wait_ns: (i % 5 != 0).then_some(i % 3),
                ..SampleRow::default()
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("loadgen-peak-{}", std::process::id()));
        let spill = Spill::new(&dir, 0).unwrap();
        let mut memory = SampleTable::with_capacity(rows.len());
        let mut spilled = SampleTable::new(rows.len(), Some(spill.clone()));
        rows.iter().for_each(|r| (memory.push(r), spilled.push(r)).1);
        let peak = peak_in_flight(&memory);
        assert_eq!(peak_in_flight(&spilled), peak);
        assert!(spill.spilled_bytes() > 0, "the table went to files");
        // The sweep the binary did before: (instant, -1 | +1) pairs sorted as tuples.
        let mut edges: Vec<(u64, i8)> = Vec::new();
        for r in &rows {
            if let Some(w) = r.client_wait_ns {
                edges.extend([(r.issued_ns + w, 1), (r.complete_ns, -1)]);
            }
        }
        edges.sort_unstable();
        let mut now = 0i64;
        let swept = edges.iter().map(|&(_, step)| {
            now += i64::from(step);
            now
        });
        assert_eq!(peak as i64, swept.max().unwrap_or(0));
        assert!(peak > 1, "spans overlap: {peak}");
    }

    #[test]
    fn a_wait_is_material_only_above_a_millisecond_and_a_percent_of_latency() {
        let ms = 1e6;
        // (wait p99, latency p99) -> material
        let cases = [
            (0.5 * ms, 10.0 * ms, false),
            (1.0 * ms, 10.0 * ms, false),
            (1.5 * ms, 10.0 * ms, true),
            (1.5 * ms, 200.0 * ms, false),
            (4_700.0 * ms, 8_000.0 * ms, true),
            (2.0 * ms, 0.0, true),
        ];
        for (wait, latency, want) in cases {
            assert_eq!(is_material(wait, latency), want, "wait {wait} latency {latency}");
        }
    }

    #[test]
    fn the_schedule_warning_gives_way_only_to_a_wait_that_explains_the_lag() {
        let wait_p99_ns = Some(3e9);
        assert!(lag_is_the_wait(3_340_000_000, wait_p99_ns), "the pool's queue is the lag");
        assert!(!lag_is_the_wait(7_000_000_000, wait_p99_ns), "the scheduler was late too");
        assert!(!lag_is_the_wait(1, None));
    }

    #[test]
    fn the_cause_names_the_pool_and_the_flag_that_changes_it() {
        let pool = |n, given, peak| ClientWaitInfo {
            max_connections: n,
            pool_given: given,
            peak_in_flight: Some(peak),
        };
        let full = cause("poisson", Some(&pool(50, true, 50)));
        assert!(full.contains("pool's 50 connections was busy"), "{full}");
        assert!(full.contains("raise --max-connections, or leave it out"), "{full}");
        let ceiling = cause("poisson", Some(&pool(16_384, false, 16_384)));
        assert!(ceiling.contains("past the default's ceiling"), "{ceiling}");
        let late = cause("poisson", Some(&pool(200, false, 12)));
        assert!(late.contains("at most 12 of 200") && late.contains("--workers"), "{late}");
        let burst = cause("max_throughput", Some(&pool(32, false, 32)));
        assert!(burst.contains("every sample at once") && burst.contains("32"), "{burst}");
    }

    #[test]
    fn the_peak_counts_written_requests_between_write_and_answer() {
        use loadgen_coordinator::metrics::SampleRow;
        let mut table = SampleTable::with_capacity(4);
        let row = |issued, wait, complete| SampleRow {
            issued_ns: issued,
            complete_ns: complete,
            client_wait_ns: wait,
            ..SampleRow::default()
        };
        // Written at 10..20, 15..30, 20..40 (the first frees its connection as the third takes
        // one), and one never written.
        table.push(&row(10, Some(0), 20));
        table.push(&row(5, Some(10), 30));
        table.push(&row(0, Some(20), 40));
        table.push(&row(0, None, 50));
        assert_eq!(peak_in_flight(&table), 2);
    }
}
