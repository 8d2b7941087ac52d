//! `llm-loadgen sweep` against the slotted stub, whose knee is known: N slots of a fixed
//! service time saturate at N / service time. The truth is the stub's own stamps (each
//! response's time from taking its slot to its last write), not its configured delays.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use crate::support::{alone, bin, read_json, report_dir, signal, stub, wait_for, wait_output};
use loadgen_stubs::{SendLog, StubKind, StubServer};

const SLOTS: usize = 4;
/// TTFT 10 ms, then 9 more one-character events 1 ms apart: 19 ms of service.
const CONFIGURED_SERVICE_S: f64 = 0.019;

fn slotted(log: Option<SendLog>) -> StubServer {
    stub(StubKind::Variable, |c| {
        c.stream_interval = 1;
        c.variable.output_len_mean = 10.0;
        c.variable.output_len_spread = 0.0;
        c.variable.first_chunk_latency_s = 0.01;
        c.variable.first_chunk_spread = 0.0;
        c.variable.inter_token_latency_ms = 1.0;
        c.variable.max_concurrency = SLOTS;
        c.send_log = log;
    })
}

fn sweep_args(url: &str, dir: &Path, rates: &str, samples: u32) -> Vec<String> {
    let line = format!(
        "sweep --rates {rates} --endpoints {url} --model m --streaming on --num-samples \
         {samples} --workers 1 --quiet --report-dir {}",
        dir.display()
    );
    line.split_whitespace().map(String::from).collect()
}

/// The capacity the stub's own stamps imply: slots over the mean time a request held a slot.
fn implied_capacity(log: &SendLog) -> f64 {
    let sent = log.lock().unwrap();
    let held_s: Vec<f64> = sent
        .iter()
        .map(|r| (*r.written_ns.last().unwrap() - r.slot_ns.unwrap()) as f64 / 1e9)
        .collect();
    SLOTS as f64 / (held_s.iter().sum::<f64>() / held_s.len() as f64)
}

#[test]
fn a_sweep_finds_the_slotted_stubs_knee_and_the_highest_rate_meeting_a_ttft_objective() {
    let _alone = alone();
    let log = SendLog::default();
    let server = slotted(Some(log.clone()));
    let configured = SLOTS as f64 / CONFIGURED_SERVICE_S;
    let factors = [0.3, 0.6, 0.8, 0.9, 1.25, 1.6];
    let rates: Vec<String> = factors.iter().map(|f| format!("{:.0}", f * configured)).collect();
    let dir = report_dir("sweep-knee");
    let mut args = sweep_args(&server.url(), &dir, &rates.join(","), 150);
    args.extend(["--slo".to_string(), "ttft_p90=40ms".to_string()]);
    let out = crate::support::run(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    server.stop();
    let capacity = implied_capacity(&log);
    let sweep = read_json(&dir.join("sweep.json"));
    assert_eq!(sweep["complete"], true);
    assert_eq!(sweep["points"].as_array().unwrap().len(), factors.len());
    let knee = sweep["knee"]["rate"].as_f64().unwrap();
    assert!(sweep["knee"]["reached"].as_bool().unwrap(), "{sweep}");
    assert!((knee - capacity).abs() <= 0.1 * capacity, "knee {knee} vs the stub's {capacity}");
    // The last rate under the capacity, and the highest that met the objective: one step.
    let under = rates.iter().filter(|r| r.parse::<f64>().unwrap() < capacity).count() - 1;
    let passing = sweep["highest_passing"]["point"].as_u64().expect("a rate met it") as usize;
    assert!(passing.abs_diff(under) <= 1, "highest passing point {passing}, last under {under}");
    for point in sweep["points"].as_array().unwrap() {
        let summary =
            dir.join(point["dir"].as_str().unwrap()).join("performance/result_summary.json");
        assert!(summary.is_file(), "{}", summary.display());
    }
    let txt = std::fs::read_to_string(dir.join("sweep.txt")).unwrap();
    assert!(txt.contains("Knee: ") && txt.contains("Highest rate meeting every objective: "));
    let plot = crate::support::run(["plot", dir.to_str().unwrap(), "--format", "svg"]);
    assert!(plot.status.success(), "{}", String::from_utf8_lossy(&plot.stderr));
    for name in ["sweep_throughput", "sweep_ttft", "sweep_latency"] {
        assert!(dir.join(format!("plots/{name}.svg")).is_file(), "{name}");
    }
}

#[test]
fn an_interrupted_sweep_keeps_its_finished_points_and_says_where_it_stopped() {
    let server = slotted(None);
    let dir = report_dir("sweep-interrupted");
    // A short point, then long ones: the interrupt comes during the second.
    let args = sweep_args(&server.url(), &dir, "1000,20,20,20", 300);
    let child = bin().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // Once the second point is measuring (an interrupt while a run's workers start is a case
    // of the coordinator's own, tested with the benchmark).
    // The first point's 300 requests, then some of the second's, by the stub's count.
    wait_for("the second point to measure", Duration::from_secs(60), || {
        server.requests_total() >= 305
    });
    assert!(signal(child.id() as i32, libc::SIGINT), "kill(2)");
    let out = wait_output(child, "the interrupted sweep", Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(130));
    server.stop();
    let sweep: Value = read_json(&dir.join("sweep.json"));
    assert_eq!(sweep["complete"], false);
    assert_eq!(sweep["stopped"]["at_point"], 1, "{sweep}");
    assert_eq!(sweep["stopped"]["reason"], "interrupted");
    assert_eq!(sweep["points"].as_array().unwrap().len(), 1);
    assert!(dir.join("point-0-poisson-1000/performance/result_summary.json").is_file());
    let txt = std::fs::read_to_string(dir.join("sweep.txt")).unwrap();
    assert!(txt.contains("Stopped at point 1: interrupted"), "{txt}");
}

#[test]
fn sweep_flags_that_set_a_load_are_refused() {
    let dir = report_dir("sweep-refused");
    for extra in [&["--target-qps", "5"][..], &["--concurrency", "2"], &[]] {
        let mut args = vec!["sweep", "--endpoints", "null://", "--model", "m", "--report-dir"];
        let d = dir.display().to_string();
        args.push(&d);
        if !extra.is_empty() {
            args.extend(["--rates", "1,2"]);
        }
        args.extend(extra);
        let out = crate::support::run(&args);
        assert_eq!(out.status.code(), Some(1), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--rates"), "{extra:?}: {err}");
    }
}

#[test]
fn a_yaml_sweep_section_runs_its_points_and_a_benchmark_refuses_it() {
    let server = slotted(None);
    let dir = report_dir("sweep-yaml");
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = dir.join("sweep.yaml");
    std::fs::write(
        &yaml,
        "type: online\nmodel_params:\n  name: m\n  streaming: \"on\"\nsettings:\n  slo: \
         latency_p99=2s\n  runtime:\n    n_samples_to_issue: 30\nsweep:\n  rates: [50, 100]\n",
    )
    .unwrap();
    let (yaml_arg, url) = (yaml.display().to_string(), server.url());
    let out_dir = dir.join("out").display().to_string();
    let args = ["sweep", "-c", &yaml_arg, "--endpoints", &url, "--quiet", "--report-dir", &out_dir];
    let out = crate::support::run(args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sweep = read_json(&dir.join("out/sweep.json"));
    assert_eq!(
        (sweep["mode"].as_str(), sweep["slo"].as_str()),
        (Some("rates"), Some("latency_p99=2s"))
    );
    let offered: Vec<f64> = sweep["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["offered"].as_f64().unwrap())
        .collect();
    assert_eq!(offered, [50.0, 100.0]);
    let point_yaml =
        std::fs::read_to_string(dir.join("out/point-0-poisson-50/config.yaml")).unwrap();
    assert!(!point_yaml.contains("sweep:") && point_yaml.contains("slo:"), "{point_yaml}");
    // A point is a run: `report` rebuilds it.
    let point = dir.join("out/point-1-poisson-100");
    let rebuilt = crate::support::run(["report", point.to_str().unwrap()]);
    assert!(rebuilt.status.success(), "{}", String::from_utf8_lossy(&rebuilt.stderr));
    let bench = ["benchmark", "from-config", "-c", &yaml_arg, "--endpoints", &url];
    let refused = crate::support::run(bench);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("sweep:"));
    server.stop();
}

/// A sweep.json of points (offered, qps) with a knee, as `sweep` writes it.
fn sweep_json(points: &[(f64, f64)], knee: f64, passing: f64) -> String {
    let points: Vec<Value> = points
        .iter()
        .enumerate()
        .map(|(i, &(offered, qps))| {
            serde_json::json!({"index": i, "dir": format!("point-{i}"), "load_pattern": "poisson",
                "offered": offered, "exit_code": 0, "n_samples_completed": 10,
                "n_samples_failed": 0, "duration_ns": 1, "qps": qps, "ttft_p50_ns": null,
                "ttft_p99_ns": 2e6, "tpot_p50_ns": null, "tpot_p99_ns": null,
                "latency_p50_ns": null, "latency_p99_ns": 3e6, "goodput_qps": qps,
                "slo_held": true, "objectives": []})
        })
        .collect();
    serde_json::json!({"points": points, "knee": {"rate": knee, "reached": true},
        "highest_passing": {"rate": passing}})
    .to_string()
}

#[test]
fn compare_of_two_sweeps_sets_their_knees_and_rates_side_by_side() {
    let dir = report_dir("sweep-compare");
    let (a, b) = (dir.join("a"), dir.join("b"));
    for (d, text) in [
        (&a, sweep_json(&[(10.0, 10.0), (20.0, 18.0)], 18.0, 10.0)),
        (&b, sweep_json(&[(20.0, 20.0), (40.0, 36.0)], 36.0, 20.0)),
    ] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("sweep.json"), text).unwrap();
    }
    let out = crate::support::run(["compare", a.to_str().unwrap(), b.to_str().unwrap(), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(c["sweeps"][1]["knee_ratio"], 2.0);
    assert_eq!(c["sweeps"][1]["highest_passing_ratio"], 2.0);
    let offered: Vec<f64> = c["by_offered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offered"].as_f64().unwrap())
        .collect();
    assert_eq!(offered, [10.0, 20.0, 40.0]);
    assert_eq!(c["by_offered"][1]["qps"], serde_json::json!([18.0, 20.0]));
    assert_eq!(c["by_offered"][0]["qps"], serde_json::json!([10.0, null]));
}

#[test]
fn the_automatic_plan_bounds_its_rates_by_a_synchronous_and_a_max_throughput_run() {
    let server = slotted(None);
    let dir = report_dir("sweep-auto");
    let mut args = sweep_args(&server.url(), &dir, "1", 60);
    let at = args.iter().position(|a| a == "--rates").unwrap();
    args.splice(at..at + 2, ["--auto".to_string(), "2".to_string()]);
    let out = crate::support::run(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    server.stop();
    let sweep = read_json(&dir.join("sweep.json"));
    assert_eq!(sweep["mode"], "auto");
    let points = sweep["points"].as_array().unwrap();
    let patterns: Vec<&str> = points.iter().map(|p| p["load_pattern"].as_str().unwrap()).collect();
    // Two rates between the bounds, then two around the knee: the max-throughput run is past
    // every rate, so the knee is reached.
    assert_eq!(
        patterns,
        ["concurrency", "max_throughput", "poisson", "poisson", "poisson", "poisson"]
    );
    let (low, high) = (points[0]["qps"].as_f64().unwrap(), points[1]["qps"].as_f64().unwrap());
    for p in &points[2..] {
        let rate = p["offered"].as_f64().unwrap();
        assert!(low < rate && rate < high, "{rate} outside ({low}, {high})");
    }
    assert_eq!(sweep["knee"]["reached"], true);
}
