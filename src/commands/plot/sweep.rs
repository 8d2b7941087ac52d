//! `plot` of a sweep directory (one with `sweep.json`): throughput against the offered rate,
//! and TTFT, TPOT and latency percentiles against throughput, with the knee, the highest rate
//! that met `--slo` and each objective's bound drawn across.

use std::path::Path;

use serde_json::Value;

use super::chart::{palette, Curves, Guide, Line, Picture};
use crate::error::AppError;
use crate::report::sweep::Point;

/// What a sweep directory's sweep.json says, read for its pictures.
struct SweepFile {
    points: Vec<Point>,
    knee_rate: Option<f64>,
    passing_rate: Option<f64>,
    /// (metric, objective name, bound in ms) of each objective.
    bounds: Vec<(String, String, f64)>,
}

fn read(dir: &Path) -> Result<SweepFile, AppError> {
    let path = dir.join("sweep.json");
    let bad = |why: String| AppError::Input(format!("{}: {why}", path.display()));
    let text = crate::report::read_existing(&path).map_err(|e| bad(e.to_string()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let points: Vec<Point> =
        serde_json::from_value(v["points"].clone()).map_err(|e| bad(e.to_string()))?;
    let bounds = v["slo"]
        .as_str()
        .and_then(|s| loadgen_plan::plan::slo::parse_slo(s).ok())
        .unwrap_or_default()
        .into_iter()
        .map(|o| (o.metric.as_str().to_string(), o.name(), o.bound_ns as f64 / 1e6))
        .collect();
    Ok(SweepFile {
        points,
        knee_rate: v["knee"]["rate"].as_f64().filter(|_| v["knee"]["reached"] == true),
        passing_rate: v["highest_passing"]["rate"].as_f64(),
        bounds,
    })
}

/// The sweep's pictures, named as `plot` writes them.
pub fn pictures(dir: &Path) -> Result<Vec<(&'static str, Picture)>, AppError> {
    let s = read(dir)?;
    let rated: Vec<&Point> =
        s.points.iter().filter(|p| p.offered.is_some() && p.qps.is_some()).collect();
    if rated.is_empty() {
        return Err(AppError::Input(format!(
            "{} has no finished point with an offered rate; there is nothing to plot",
            dir.join("sweep.json").display()
        )));
    }
    let mut out = vec![("sweep_throughput", throughput(&s, &rated))];
    // In offered order: past the knee, throughput wobbles while latency climbs.
    let mut by_offer: Vec<&Point> = s.points.iter().collect();
    by_offer.sort_by(|a, b| {
        a.offered.unwrap_or(f64::INFINITY).total_cmp(&b.offered.unwrap_or(f64::INFINITY))
    });
    let ms = |f: fn(&Point) -> Option<f64>| -> Vec<(f64, f64)> {
        by_offer.iter().filter_map(|p| Some((p.qps?, f(p)? / 1e6))).collect()
    };
    for (name, metric, p50, p99) in [
        ("sweep_ttft", "ttft", ms(|p| p.ttft_p50_ns), ms(|p| p.ttft_p99_ns)),
        ("sweep_tpot", "tpot", ms(|p| p.tpot_p50_ns), ms(|p| p.tpot_p99_ns)),
        ("sweep_latency", "latency", ms(|p| p.latency_p50_ns), ms(|p| p.latency_p99_ns)),
    ] {
        if !p99.is_empty() {
            out.push((name, percentiles(&s, metric, p50, p99)));
        }
    }
    Ok(out)
}

fn sorted(mut points: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points
}

/// Achieved against offered, with y = x: where the points leave the diagonal is the knee.
fn throughput(s: &SweepFile, rated: &[&Point]) -> Picture {
    let achieved: Vec<(f64, f64)> =
        sorted(rated.iter().filter_map(|p| Some((p.offered?, p.qps?))).collect());
    let top = achieved.iter().map(|p| p.0).fold(0.0, f64::max);
    let mut guides = Vec::new();
    if let Some(k) = s.knee_rate {
        guides.push(Guide {
            label: format!("knee {k:.1} QPS"),
            color: palette::PEAK,
            x: None,
            y: k,
        });
    }
    if let Some(r) = s.passing_rate {
        let label = format!("highest rate meeting --slo: {r}");
        guides.push(Guide { label, color: palette::RATE, x: Some(r), y: 0.0 });
    }
    Picture::Curves(Curves {
        title: "Sweep: throughput against offered load".into(),
        x_label: "offered (QPS, or concurrency)".into(),
        y_label: "achieved QPS".into(),
        lines: vec![
            Line { label: "achieved".into(), color: palette::BARS, points: achieved },
            Line {
                label: "offered (y = x)".into(),
                color: palette::GUIDE,
                points: vec![(0.0, 0.0), (top, top)],
            },
        ],
        guides,
        caption: format!("{} points; the knee is where achieved leaves the diagonal", rated.len()),
    })
}

/// p50 and p99 of one metric against achieved throughput, with its objectives' bounds.
fn percentiles(s: &SweepFile, metric: &str, p50: Vec<(f64, f64)>, p99: Vec<(f64, f64)>) -> Picture {
    let mut guides: Vec<Guide> = s
        .bounds
        .iter()
        .filter(|(m, ..)| m == metric)
        .map(|(_, name, ms)| Guide {
            label: format!("{name} <= {ms} ms"),
            color: palette::CURVE,
            x: None,
            y: *ms,
        })
        .collect();
    if let Some(k) = s.knee_rate {
        guides.push(Guide {
            label: format!("knee {k:.1} QPS"),
            color: palette::PEAK,
            x: Some(k),
            y: 0.0,
        });
    }
    let name = metric.to_uppercase();
    Picture::Curves(Curves {
        title: format!("Sweep: {name} against throughput"),
        x_label: "achieved QPS".into(),
        y_label: format!("{name} (ms)"),
        lines: vec![
            Line { label: "p50".into(), color: palette::MEDIAN, points: p50 },
            Line { label: "p99".into(), color: palette::MEAN, points: p99 },
        ],
        guides,
        caption: "one point per sweep point; latency leaves its floor at the knee".into(),
    })
}
