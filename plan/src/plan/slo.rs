//! Service-level objectives (`--slo`, `settings.slo`): `ttft_p99=500ms,tpot_p99=50ms` into the
//! plan's `Objective`s, which the report judges each sample against (goodput).

use loadgen_coordinator::metrics::{Objective, SloMetric};

use crate::error::AppError;

/// Parses `NAME=BOUND[,NAME=BOUND…]`: NAME is `ttft`, `tpot` or `latency`, `_p`, and a
/// percentile in (0, 100] (`ttft_p99`, `latency_p99.9`); BOUND a duration with a unit (`ns`,
/// `us`, `ms`, `s`) or a plain number of milliseconds, as vLLM's `--goodput` takes them.
pub fn parse_slo(text: &str) -> Result<Vec<Objective>, String> {
    let mut out: Vec<Objective> = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (name, bound) = part
            .split_once('=')
            .ok_or_else(|| format!("--slo {part:?}: write NAME=BOUND, e.g. ttft_p99=500ms"))?;
        let objective = objective(name.trim(), bound.trim())?;
        if out.iter().any(|o| o.name() == objective.name()) {
            return Err(format!("--slo names {} twice", objective.name()));
        }
        out.push(objective);
    }
    if out.is_empty() {
        return Err(format!("--slo {text:?} names no objective, e.g. ttft_p99=500ms"));
    }
    Ok(out)
}

fn objective(name: &str, bound: &str) -> Result<Objective, String> {
    let bad_name = || {
        format!(
            "--slo objective {name:?} is not one of ttft_pN, tpot_pN, latency_pN (N a \
             percentile in (0, 100], e.g. ttft_p99)"
        )
    };
    let (metric, percentile) = name.split_once("_p").ok_or_else(bad_name)?;
    let metric = match metric {
        "ttft" => SloMetric::Ttft,
        "tpot" => SloMetric::Tpot,
        "latency" => SloMetric::Latency,
        _ => return Err(bad_name()),
    };
    let percentile: f64 = percentile.parse().map_err(|_| bad_name())?;
    if !(percentile > 0.0 && percentile <= 100.0) {
        return Err(bad_name());
    }
    Ok(Objective { metric, percentile, bound_ns: bound_ns(name, bound)? })
}

/// `500ms`, `0.5s`, `250us`, `100000ns`, or `500` (milliseconds), as whole nanoseconds.
fn bound_ns(name: &str, text: &str) -> Result<u64, String> {
    let (number, scale) = [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)]
        .iter()
        .find_map(|&(unit, scale)| text.strip_suffix(unit).map(|n| (n, scale)))
        .unwrap_or((text, 1e6));
    let value: f64 = number.trim().parse().unwrap_or(f64::NAN);
    let ns = value * scale;
    if !(ns.is_finite() && ns >= 1.0 && ns < u64::MAX as f64) {
        return Err(format!(
            "--slo {name}={text:?}: the bound must be a positive duration such as 500ms, 0.5s \
             or 250us"
        ));
    }
    Ok(ns.round() as u64)
}

/// The plan's objectives from `settings.slo`; TTFT and TPOT objectives need a streamed run.
pub fn resolve_slo(slo: Option<&str>, streaming: bool) -> Result<Vec<Objective>, AppError> {
    let Some(text) = slo else { return Ok(Vec::new()) };
    let objectives = parse_slo(text).map_err(AppError::Input)?;
    if let Some(o) = objectives.iter().find(|o| o.metric != SloMetric::Latency && !streaming) {
        return Err(AppError::Input(format!(
            "--slo {}: a {} objective needs a streamed run (--streaming on); this run does not \
             stream",
            o.name(),
            o.metric.as_str()
        )));
    }
    Ok(objectives)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objectives_parse_with_their_percentile_and_bound() {
        let got = parse_slo("ttft_p99=500ms, tpot_p90=0.05s,latency_p99.9=2000").unwrap();
        let want = [
            (SloMetric::Ttft, 99.0, 500_000_000),
            (SloMetric::Tpot, 90.0, 50_000_000),
            (SloMetric::Latency, 99.9, 2_000_000_000),
        ];
        let got: Vec<_> = got.iter().map(|o| (o.metric, o.percentile, o.bound_ns)).collect();
        assert_eq!(got, want);
        assert_eq!(parse_slo("ttft_p50=250us").unwrap()[0].bound_ns, 250_000);
        assert_eq!(parse_slo("latency_p99.9=1s").unwrap()[0].name(), "latency_p99.9");
    }

    #[test]
    fn bad_objectives_are_refused_naming_them() {
        for (text, says) in [
            ("ttft=500ms", "\"ttft\""),
            ("itl_p99=5ms", "\"itl_p99\""),
            ("ttft_p0=5ms", "\"ttft_p0\""),
            ("ttft_p101=5ms", "\"ttft_p101\""),
            ("ttft_p99", "NAME=BOUND"),
            ("ttft_p99=fast", "ttft_p99=\"fast\""),
            ("ttft_p99=-5ms", "ttft_p99=\"-5ms\""),
            ("ttft_p99=1ms,ttft_p99=2ms", "twice"),
            ("", "no objective"),
        ] {
            let err = parse_slo(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
        let err = resolve_slo(Some("ttft_p99=1s"), false).unwrap_err().to_string();
        assert!(err.contains("ttft_p99") && err.contains("--streaming on"), "{err}");
        assert_eq!(resolve_slo(Some("latency_p99=1s"), false).unwrap().len(), 1);
    }
}
