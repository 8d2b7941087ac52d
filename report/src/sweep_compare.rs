//! The comparison of sweep directories that `compare` prints (each with `sweep.json`): every sweep's knee and highest
//! passing rate with ratios to the first, then each offered rate's throughput, TTFT and latency
//! p99 and goodput side by side, as a table or one JSON object.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use loadgen_plan::error::AppError;

use crate::sweep::Point;

/// Whether `dir` is a sweep's directory: `sweep.json`, and no run summary of its own.
pub fn is_sweep(dir: &Path) -> bool {
    dir.join("sweep.json").is_file() && !dir.join("performance/result_summary.json").exists()
}

#[derive(Debug, Serialize)]
struct SweepHead {
    dir: String,
    points: usize,
    knee_rate: Option<f64>,
    knee_ratio: Option<f64>,
    highest_passing_rate: Option<f64>,
    highest_passing_ratio: Option<f64>,
}

/// One offered rate across the sweeps (`null` where a sweep has no such point).
#[derive(Debug, Serialize)]
struct AtOffer {
    offered: f64,
    qps: Vec<Option<f64>>,
    ttft_p99_ns: Vec<Option<f64>>,
    latency_p99_ns: Vec<Option<f64>>,
    goodput_qps: Vec<Option<f64>>,
}

#[derive(Debug, Serialize)]
pub struct SweepComparison {
    sweeps: Vec<SweepHead>,
    by_offered: Vec<AtOffer>,
}

fn read(dir: &Path) -> Result<(Value, Vec<Point>), AppError> {
    let path = dir.join("sweep.json");
    let bad = |why: String| AppError::Input(format!("{}: {why}", path.display()));
    let text = crate::read_existing(&path).map_err(|e| bad(e.to_string()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let points = serde_json::from_value(v["points"].clone()).map_err(|e| bad(e.to_string()))?;
    Ok((v, points))
}

fn ratio(value: Option<f64>, base: Option<f64>) -> Option<f64> {
    Some(value? / base.filter(|b| *b > 0.0)?)
}

/// Every sweep of `dirs` with its ratios to the first, and each offered rate across them.
pub fn comparison(dirs: &[PathBuf]) -> Result<SweepComparison, AppError> {
    let read: Vec<(Value, Vec<Point>)> = dirs.iter().map(|d| read(d)).collect::<Result<_, _>>()?;
    let knee = |v: &Value| v["knee"]["rate"].as_f64().filter(|_| v["knee"]["reached"] == true);
    let passing = |v: &Value| v["highest_passing"]["rate"].as_f64();
    let (knee0, passing0) = (knee(&read[0].0), passing(&read[0].0));
    let sweeps = dirs
        .iter()
        .zip(&read)
        .map(|(dir, (v, points))| SweepHead {
            dir: dir.display().to_string(),
            points: points.len(),
            knee_rate: knee(v),
            knee_ratio: ratio(knee(v), knee0),
            highest_passing_rate: passing(v),
            highest_passing_ratio: ratio(passing(v), passing0),
        })
        .collect();
    let mut offers: Vec<f64> =
        read.iter().flat_map(|(_, ps)| ps.iter().filter_map(|p| p.offered)).collect();
    offers.sort_by(f64::total_cmp);
    offers.dedup();
    let by_offered = offers
        .into_iter()
        .map(|offered| {
            let at: Vec<Option<&Point>> =
                read.iter().map(|(_, ps)| ps.iter().find(|p| p.offered == Some(offered))).collect();
            let each = |f: fn(&Point) -> Option<f64>| at.iter().map(|p| p.and_then(f)).collect();
            AtOffer {
                offered,
                qps: each(|p| p.qps),
                ttft_p99_ns: each(|p| p.ttft_p99_ns),
                latency_p99_ns: each(|p| p.latency_p99_ns),
                goodput_qps: each(|p| p.goodput_qps),
            }
        })
        .collect();
    Ok(SweepComparison { sweeps, by_offered })
}

fn num(v: Option<f64>, scale: f64) -> String {
    v.map_or("-".to_string(), |v| format!("{:.2}", v / scale))
}

/// The comparison as `compare` prints it.
pub fn table(c: &SweepComparison) -> String {
    let mut out = String::new();
    for (i, s) in c.sweeps.iter().enumerate() {
        out += &format!(
            "sweep {i}: {} ({} points): knee {} QPS (x{}), highest rate meeting --slo {} (x{})\n",
            s.dir,
            s.points,
            num(s.knee_rate, 1.0),
            num(s.knee_ratio, 1.0),
            num(s.highest_passing_rate, 1.0),
            num(s.highest_passing_ratio, 1.0),
        );
    }
    out += "offered     qps (each sweep)        ttft p99 ms             latency p99 ms          goodput\n";
    let join = |v: &[Option<f64>], scale: f64| {
        v.iter().map(|x| num(*x, scale)).collect::<Vec<_>>().join(" / ")
    };
    for row in &c.by_offered {
        out += &format!(
            "{:<11} {:<23} {:<23} {:<23} {}\n",
            row.offered,
            join(&row.qps, 1.0),
            join(&row.ttft_p99_ns, 1e6),
            join(&row.latency_p99_ns, 1e6),
            join(&row.goodput_qps, 1.0),
        );
    }
    out
}
