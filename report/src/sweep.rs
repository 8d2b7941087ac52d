//! A sweep's points and what is read off them (`llm-loadgen sweep`): each point's headline
//! figures from its own result_summary.json, the knee, the highest offered rate whose
//! objectives held with its confidence, and `sweep.json` / `sweep.txt`. Pure functions over
//! plain data; the command runs the points and writes the files.

use std::fmt::Write;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use loadgen_coordinator::metrics::early_stop::find_min_passing;

/// A point's throughput "follows" its offered rate while it reaches this share of it.
pub const FOLLOW_FRACTION: f64 = 0.9;
/// A point's latency p50 is "at its floor" while within this factor of the sweep's lowest.
pub const FLOOR_FACTOR: f64 = 1.5;

/// One objective's outcome at a point, with the sample-based confidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointObjective {
    pub name: String,
    pub percentile: f64,
    pub fraction_met: Option<f64>,
    pub held: bool,
    /// Held with 99 % confidence by MLPerf's early-stopping rule: the samples that missed are
    /// few enough that the percentile is within the bound at confidence 0.99.
    pub held_99: bool,
}

/// One finished point's headline figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// 0-based, in run order.
    pub index: usize,
    /// Its report directory, relative to the sweep's.
    pub dir: String,
    /// `poisson`, `concurrency` or `max_throughput`.
    pub load_pattern: String,
    /// The Poisson rate, or the concurrency, it was given; `None` for max throughput.
    pub offered: Option<f64>,
    pub exit_code: i32,
    pub n_samples_completed: u64,
    pub n_samples_failed: u64,
    pub duration_ns: Option<u64>,
    /// Achieved throughput (the summary's `qps`).
    pub qps: Option<f64>,
    pub ttft_p50_ns: Option<f64>,
    pub ttft_p99_ns: Option<f64>,
    pub tpot_p50_ns: Option<f64>,
    pub tpot_p99_ns: Option<f64>,
    pub latency_p50_ns: Option<f64>,
    pub latency_p99_ns: Option<f64>,
    /// Goodput on the primary basis; `None` without `--slo`.
    pub goodput_qps: Option<f64>,
    /// Every objective held; `None` without `--slo`.
    pub slo_held: Option<bool>,
    pub objectives: Vec<PointObjective>,
}

fn p(block: &Value, key: &str) -> Option<f64> {
    block.get("percentiles").and_then(|ps| ps.get(key)).and_then(Value::as_f64)
}

/// Whether `n_met` of `n` samples show the `percentile` within its bound at confidence 0.99
/// (the early-stopping rule: the misses are few enough for that many samples).
pub fn held_with_confidence(n_met: u64, n: u64, percentile: f64) -> bool {
    let fraction = percentile / 100.0;
    if !(fraction > 0.0 && fraction < 1.0) || n_met > n {
        return false;
    }
    n_met >= find_min_passing(n - n_met, fraction)
}

impl Point {
    /// A point from its summary (result_summary.json as written).
    pub fn of_summary(
        index: usize,
        dir: &str,
        offered: Option<f64>,
        code: i32,
        s: &Value,
    ) -> Point {
        let goodput = s.get("goodput").filter(|g| g.is_object());
        let objectives = goodput
            .and_then(|g| g["objectives"].as_array())
            .map(|list| {
                let n = goodput.and_then(|g| g["n_completed"].as_u64()).unwrap_or(0);
                list.iter().map(|o| objective_of(o, n)).collect()
            })
            .unwrap_or_default();
        Point {
            index,
            dir: dir.to_string(),
            load_pattern: s["run_config"]["load_pattern"]["type"].as_str().unwrap_or("").into(),
            offered,
            exit_code: code,
            n_samples_completed: s["n_samples_completed"].as_u64().unwrap_or(0),
            n_samples_failed: s["n_samples_failed"].as_u64().unwrap_or(0),
            duration_ns: s["duration_ns"].as_u64(),
            qps: s["qps"].as_f64(),
            ttft_p50_ns: p(&s["ttft"], "50.0"),
            ttft_p99_ns: p(&s["ttft"], "99.0"),
            tpot_p50_ns: p(&s["tpot"], "50.0"),
            tpot_p99_ns: p(&s["tpot"], "99.0"),
            latency_p50_ns: p(&s["latency"], "50.0"),
            latency_p99_ns: p(&s["latency"], "99.0"),
            goodput_qps: goodput.and_then(|g| g["qps"].as_f64()),
            slo_held: goodput.and_then(|g| g["held"].as_bool()),
            objectives,
        }
    }

    /// `point-<k>-<rate>`: the name of the point's directory.
    pub fn dir_name(index: usize, pattern: &str, offered: Option<f64>) -> String {
        match offered {
            Some(v) => format!("point-{index}-{pattern}-{v}"),
            None => format!("point-{index}-{pattern}"),
        }
    }
}

fn objective_of(o: &Value, n: u64) -> PointObjective {
    let percentile = o["percentile"].as_f64().unwrap_or(100.0);
    let n_met = o["n_met"].as_u64().unwrap_or(0);
    PointObjective {
        name: o["name"].as_str().unwrap_or("").to_string(),
        percentile,
        fraction_met: o["fraction_met"].as_f64(),
        held: o["held"].as_bool().unwrap_or(false),
        held_99: held_with_confidence(n_met, n, percentile),
    }
}

/// Where a sweep's throughput stops following its offered rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// The knee's rate: the saturated points' throughput (their median) when some point
    /// saturated, else the highest point's achieved throughput (the knee lies beyond).
    pub rate: f64,
    /// The last point, by offered rate, that still followed with latency at its floor.
    pub last_following_index: Option<usize>,
    /// The first point past it: throughput short of the offered rate or latency off its floor.
    pub first_saturated_index: Option<usize>,
    /// Whether the sweep reached the knee (some point saturated).
    pub reached: bool,
}

/// The rate each point was asked for, in samples per second: a Poisson point's rate; a
/// concurrency point's concurrency times the throughput per slot of the lowest concurrency
/// (throughput that scales linearly); a max-throughput point's is unbounded (it never follows).
/// With Poisson points, only they and the max-throughput point count (the automatic plan's
/// synchronous run is a bound, not a rate).
fn expected_rates(points: &[Point]) -> Vec<(&Point, f64, f64)> {
    let poisson = points.iter().any(|pt| pt.load_pattern == "poisson");
    let per_slot = points
        .iter()
        .filter(|pt| pt.load_pattern == "concurrency")
        .filter_map(|pt| Some((pt.offered?, pt.qps?)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(1.0, |(c, q)| q / c);
    points
        .iter()
        .filter_map(|pt| {
            let expected = match pt.load_pattern.as_str() {
                "max_throughput" => f64::INFINITY,
                "concurrency" if poisson => return None,
                "concurrency" => pt.offered? * per_slot,
                _ => pt.offered?,
            };
            Some((pt, expected, pt.qps?))
        })
        .filter(|&(_, expected, qps)| expected > 0.0 && qps > 0.0)
        .collect()
}

/// The knee of a sweep's points, by the rate each was asked for (`expected_rates`): a point
/// *follows* when its throughput is at least `FOLLOW_FRACTION` of that rate and its latency
/// p50 within `FLOOR_FACTOR` of the lowest p50 of the sweep. The knee is the first point that
/// does not follow; its rate is the median throughput of the points from there on, which
/// saturate at the server's capacity. `None` with no such point.
pub fn knee(points: &[Point]) -> Option<Knee> {
    let mut rated = expected_rates(points);
    rated.sort_by(|a, b| a.1.total_cmp(&b.1));
    let floor = rated.iter().filter_map(|(pt, ..)| pt.latency_p50_ns).fold(f64::INFINITY, f64::min);
    let follows = |pt: &Point, offered: f64, qps: f64| {
        qps >= FOLLOW_FRACTION * offered
            && pt.latency_p50_ns.is_none_or(|l| l <= FLOOR_FACTOR * floor)
    };
    let first_off = rated.iter().position(|&(pt, o, q)| !follows(pt, o, q));
    let last = rated.last()?;
    let Some(k) = first_off else {
        return Some(Knee {
            rate: last.2,
            last_following_index: Some(last.0.index),
            first_saturated_index: None,
            reached: false,
        });
    };
    let mut plateau: Vec<f64> = rated[k..].iter().map(|&(_, _, q)| q).collect();
    plateau.sort_by(f64::total_cmp);
    Some(Knee {
        rate: plateau[(plateau.len() - 1) / 2],
        last_following_index: k.checked_sub(1).map(|i| rated[i].0.index),
        first_saturated_index: Some(rated[k].0.index),
        reached: true,
    })
}

/// The highest offered rate whose objectives all held, with the point's index and whether
/// every objective also held at 99 % confidence; `None` when none held (or no `--slo`). With
/// Poisson points only they count (a concurrency is not a rate).
pub fn highest_passing(points: &[Point]) -> Option<(f64, usize, bool)> {
    let poisson = points.iter().any(|pt| pt.load_pattern == "poisson");
    points
        .iter()
        .filter(|pt| pt.slo_held == Some(true) && pt.exit_code == 0)
        .filter(|pt| !poisson || pt.load_pattern == "poisson")
        .filter_map(|pt| Some((pt.offered?, pt.index, pt.objectives.iter().all(|o| o.held_99))))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

fn ms(ns: Option<f64>) -> String {
    ns.map_or("-".to_string(), |v| format!("{:.2}", v / 1e6))
}

/// The table's header (sweep.txt and the console).
pub const TABLE_HEADER: &str =
    "point  offered     qps        ttft p50/p99 ms     tpot p50/p99 ms   latency p50/p99 ms  goodput  slo";

/// One point's line of the table.
pub fn table_line(pt: &Point) -> String {
    let mut line = format!(
        "{:<6} {:<11} {:<10} {:>9} / {:<9} {:>7} / {:<7} {:>9} / {:<9}",
        pt.index,
        pt.offered.map_or("max".to_string(), |v| format!("{v}")),
        pt.qps.map_or("-".to_string(), |q| format!("{q:.2}")),
        ms(pt.ttft_p50_ns),
        ms(pt.ttft_p99_ns),
        ms(pt.tpot_p50_ns),
        ms(pt.tpot_p99_ns),
        ms(pt.latency_p50_ns),
        ms(pt.latency_p99_ns),
    );
    let goodput = pt.goodput_qps.map_or("-".to_string(), |g| format!("{g:.2}"));
    let slo = match pt.slo_held {
        None => "-".to_string(),
        Some(held) => {
            let each: Vec<String> = pt
                .objectives
                .iter()
                .map(|o| format!("{}:{}", o.name, if o.held { "ok" } else { "MISS" }))
                .collect();
            format!("{} ({})", if held { "held" } else { "missed" }, each.join(" "))
        }
    };
    let _ = write!(line, " {goodput:>8}  {slo}");
    if pt.exit_code != 0 {
        let _ = write!(line, "  [exit {}]", pt.exit_code);
    }
    line
}

/// The sweep's closing lines: the knee and the highest passing rate, with its confidence.
pub fn verdict_lines(points: &[Point]) -> String {
    let mut out = String::new();
    match knee(points) {
        Some(k) if k.reached => {
            let _ = writeln!(
                out,
                "Knee: {:.2} QPS (throughput stops following the offered rate at point {})",
                k.rate,
                k.first_saturated_index.unwrap_or(0)
            );
        }
        Some(k) => {
            let _ =
                writeln!(out, "Knee: not reached; every point followed (up to {:.2} QPS)", k.rate);
        }
        None => {}
    }
    if points.iter().any(|pt| pt.slo_held.is_some()) {
        match highest_passing(points) {
            Some((rate, index, confident)) => {
                let conf = if confident {
                    "every objective also held at 99% confidence (MLPerf early stopping)"
                } else {
                    "not every objective held at 99% confidence: more samples would settle it"
                };
                let _ = writeln!(
                    out,
                    "Highest rate meeting every objective: {rate} (point {index}); {conf}"
                );
            }
            None => {
                let _ = writeln!(out, "Highest rate meeting every objective: none of the points");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(index: usize, offered: f64, qps: f64, p50_ms: f64, held: Option<bool>) -> Point {
        Point {
            index,
            dir: String::new(),
            load_pattern: "poisson".into(),
            offered: Some(offered),
            exit_code: 0,
            n_samples_completed: 100,
            n_samples_failed: 0,
            duration_ns: Some(1),
            qps: Some(qps),
            ttft_p50_ns: None,
            ttft_p99_ns: None,
            tpot_p50_ns: None,
            tpot_p99_ns: None,
            latency_p50_ns: Some(p50_ms * 1e6),
            latency_p99_ns: None,
            goodput_qps: None,
            slo_held: held,
            objectives: Vec::new(),
        }
    }

    #[test]
    fn the_knee_is_where_throughput_stops_following_and_its_rate_the_plateau() {
        // Capacity 100: throughput follows to 90, then saturates near 100.
        let points = [
            point(0, 25.0, 24.8, 10.0, Some(true)),
            point(1, 50.0, 49.6, 10.5, Some(true)),
            point(2, 90.0, 88.0, 13.0, Some(true)),
            point(3, 120.0, 99.0, 400.0, Some(false)),
            point(4, 150.0, 101.0, 900.0, Some(false)),
            point(5, 200.0, 100.0, 1500.0, Some(false)),
        ];
        let k = knee(&points).unwrap();
        assert!(k.reached);
        assert_eq!((k.last_following_index, k.first_saturated_index), (Some(2), Some(3)));
        assert_eq!(k.rate, 100.0);
        // Latency leaving its floor is a knee too, before throughput falls behind.
        let mut slow = points.clone();
        slow[2].latency_p50_ns = Some(20.0e6);
        assert_eq!(knee(&slow).unwrap().first_saturated_index, Some(2));
        assert_eq!(highest_passing(&points).map(|h| h.0), Some(90.0));
    }

    #[test]
    fn a_sweep_that_never_saturates_says_so_and_unrated_points_are_left_out() {
        let mut points = vec![point(0, 10.0, 10.0, 5.0, None), point(1, 20.0, 19.9, 5.2, None)];
        points.push(Point { offered: None, ..point(2, 0.0, 500.0, 50.0, None) });
        let k = knee(&points).unwrap();
        assert!(!k.reached);
        assert_eq!((k.rate, k.first_saturated_index), (19.9, None));
        assert_eq!(highest_passing(&points), None);
        assert_eq!(knee(&points[2..]), None);
    }

    #[test]
    fn concurrency_points_follow_while_throughput_scales_and_max_throughput_never_follows() {
        let at = |i: usize, pattern: &str, offered: Option<f64>, qps: f64, p50: f64| Point {
            load_pattern: pattern.into(),
            offered,
            ..point(i, 0.0, qps, p50, None)
        };
        // 34 QPS a slot, up to 4 slots; 8 saturates at the server's 135.
        let closed = [
            at(0, "concurrency", Some(1.0), 34.0, 29.0),
            at(1, "concurrency", Some(2.0), 67.0, 29.0),
            at(2, "concurrency", Some(4.0), 132.0, 29.5),
            at(3, "concurrency", Some(8.0), 135.0, 58.0),
        ];
        let k = knee(&closed).unwrap();
        assert_eq!((k.first_saturated_index, k.rate), (Some(3), 135.0));
        // The automatic plan: its synchronous run is left out, its max-throughput run is the
        // point past every Poisson rate.
        let auto = [
            at(0, "concurrency", Some(1.0), 34.0, 29.0),
            at(1, "max_throughput", None, 134.0, 560.0),
            at(2, "poisson", Some(60.0), 59.6, 29.5),
            at(3, "poisson", Some(110.0), 105.0, 32.5),
        ];
        let k = knee(&auto).unwrap();
        assert_eq!((k.last_following_index, k.first_saturated_index), (Some(3), Some(1)));
        assert_eq!(k.rate, 134.0);
    }

    #[test]
    fn confidence_follows_the_early_stopping_rule() {
        // 99th percentile: with no miss, 459 samples are needed at confidence 0.99.
        let need = find_min_passing(0, 0.99);
        assert!(held_with_confidence(need, need, 99.0));
        assert!(!held_with_confidence(need - 1, need - 1, 99.0));
        assert!(!held_with_confidence(1000, 1000, 100.0), "p100 is never claimed from samples");
        assert!(held_with_confidence(95, 100, 50.0));
        assert!(!held_with_confidence(50, 100, 50.0));
    }
}
