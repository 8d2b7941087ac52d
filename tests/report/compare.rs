//! `llm-loadgen compare`: golden table and JSON of three runs (client primary, server primary
//! with failures, a summary in the reference's layout), like-with-like bases, and exit 2 for a
//! missing or malformed summary.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{bin, check_golden, report_dir, root, show};

/// The three fixture runs, as relative paths so the golden output does not depend on where
/// the checkout is.
const RUNS: [&str; 3] = [
    "tests/assets/compare/baseline",
    "tests/assets/compare/server_primary",
    "tests/assets/compare/reference",
];

fn compare(args: &[&str]) -> Output {
    let out = bin().current_dir(root()).arg("compare").args(args).output().expect("it runs");
    show(&out);
    out
}

fn fixture(run: &str) -> serde_json::Value {
    let path = root().join(run).join("performance/result_summary.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn compare_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = compare(&all);
    assert_eq!(out.status.code(), Some(0));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

fn metric<'a>(json: &'a serde_json::Value, key: &str) -> &'a serde_json::Value {
    let rows = json["metrics"].as_array().expect("metrics is an array");
    rows.iter().find(|r| r["key"] == key).unwrap_or_else(|| panic!("no metric {key}"))
}

#[test]
fn compare_table_of_three_runs_matches_golden() {
    let out = compare(&RUNS);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty(), "nothing on stderr");
    check_golden("compare/three_runs.txt", &out.stdout);
}

#[test]
fn compare_json_of_three_runs_matches_golden() {
    let out = compare(&["--json", RUNS[0], RUNS[1], RUNS[2]]);
    assert_eq!(out.status.code(), Some(0));
    serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("stdout is one JSON object");
    check_golden("compare/three_runs.json", &out.stdout);
}

#[test]
fn compare_puts_each_basis_in_its_own_row_whatever_the_primary() {
    let json = compare_json(&RUNS);
    let (base, server) = (fixture(RUNS[0]), fixture(RUNS[1]));
    // The server-primary run keeps its client figures under `tps_client`, the client-primary
    // run under `tps`: both land in the client row.
    let tps_client = &metric(&json, "tps_client")["values"];
    assert_eq!(tps_client[0], base["tps"]);
    assert_eq!(tps_client[1], server["tps_client"]);
    let tpot_server = &metric(&json, "tpot_ns_p50_server")["values"];
    assert_eq!(tpot_server[0], base["tpot_server"]["percentiles"]["50.0"]);
    assert_eq!(tpot_server[1], server["tpot"]["percentiles"]["50.0"]);
    assert_eq!(metric(&json, "tps_server")["basis"], "server");
    assert_eq!(metric(&json, "qps")["basis"], serde_json::Value::Null);
}

#[test]
fn compare_says_na_for_figures_a_reference_summary_lacks() {
    let json = compare_json(&[RUNS[0], RUNS[2]]);
    assert_eq!(json["runs"][1]["layout"], "reference");
    assert_eq!(json["runs"][1]["token_count_source"], serde_json::Value::Null);
    for key in ["tps_server", "tpot_ns_p50_server", "tpot_ns_p99_server"] {
        assert_eq!(metric(&json, key)["values"][1], serde_json::Value::Null, "{key}");
        assert_eq!(metric(&json, key)["ratios"][1], serde_json::Value::Null, "{key}");
    }
    // Its reference keys are read: the client basis and the latencies.
    let reference = fixture(RUNS[2]);
    assert_eq!(metric(&json, "tps_client")["values"][1], reference["tps"]);
    let ratio = metric(&json, "qps")["ratios"][1].as_f64().unwrap();
    let want = reference["qps"].as_f64().unwrap() / fixture(RUNS[0])["qps"].as_f64().unwrap();
    assert!((ratio - want).abs() < 1e-12, "{ratio} != {want}");
}

#[test]
fn compare_counts_failures_by_kind() {
    let json = compare_json(&[RUNS[0], RUNS[1]]);
    let row = metric(&json, "n_failed_http_status");
    assert_eq!(row["values"], serde_json::json!([0, 22]));
    assert_eq!(metric(&json, "n_samples_failed")["values"], serde_json::json!([0, 22]));
}

/// A run directory under the target dir whose summary is `text`.
fn run_with_summary(name: &str, text: &str) -> PathBuf {
    let dir = report_dir(&format!("compare-{name}"));
    std::fs::create_dir_all(dir.join("performance")).unwrap();
    std::fs::write(dir.join("performance/result_summary.json"), text).unwrap();
    dir
}

fn assert_refused(dir: &Path, why: &str) {
    let d = dir.display().to_string();
    let out = compare(&[RUNS[0], &d]);
    assert_eq!(out.status.code(), Some(2), "exit 2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = format!("{d}/performance/result_summary.json");
    assert!(stderr.contains(&file), "names the file: {stderr}");
    assert!(stderr.contains(why), "says {why:?}: {stderr}");
    assert!(out.stdout.is_empty(), "no half table");
}

#[test]
fn compare_refuses_a_missing_summary_naming_it() {
    let dir = report_dir("compare-missing");
    std::fs::create_dir_all(&dir).unwrap();
    assert_refused(&dir, "cannot read");
}

#[test]
fn compare_refuses_malformed_summaries_naming_what_is_wrong() {
    let cases = [
        ("not-json", "{\"qps\": ", "invalid JSON"),
        ("not-object", "[1, 2]", "not a JSON object"),
        ("no-counts", "{\"qps\": 1.0}", "`n_samples_completed` is missing"),
        (
            "qps-string",
            r#"{"n_samples_completed": 1, "n_samples_failed": 0, "qps": "fast"}"#,
            "`qps` is \"fast\", not a number or null",
        ),
        (
            "bad-basis",
            r#"{"n_samples_completed": 1, "n_samples_failed": 0, "token_count_source": "both"}"#,
            "unknown token count source \"both\"",
        ),
        (
            "bad-block",
            r#"{"n_samples_completed": 1, "n_samples_failed": 0, "ttft": 3}"#,
            "`ttft` is 3, not a metric block",
        ),
    ];
    for (name, text, why) in cases {
        assert_refused(&run_with_summary(name, text), why);
    }
}

#[test]
fn compare_with_fewer_than_two_runs_is_the_tool_s_usage_error_not_clap_s() {
    for args in [&[RUNS[0]][..], &[]] {
        let out = compare(args);
        assert_eq!(out.status.code(), Some(1), "a usage error");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.starts_with("llm-loadgen: usage error: compare needs two or more"),
            "{stderr}"
        );
        assert!(stderr.contains("pass the baseline run's report directory first"), "{stderr}");
        assert!(!stderr.contains("Usage:"), "clap's usage text: {stderr}");
        assert!(out.stdout.is_empty());
    }
    let stderr = String::from_utf8_lossy(&compare(&[RUNS[0]]).stderr).into_owned();
    assert!(stderr.contains(&format!("only {} was given", RUNS[0])), "names the one: {stderr}");
}

/// `run` (the baseline fixture) with its load pattern replaced by `pattern`.
fn run_with_pattern(name: &str, pattern: serde_json::Value) -> PathBuf {
    let mut summary = fixture(RUNS[0]);
    summary["run_config"]["load_pattern"] = pattern;
    run_with_summary(name, &summary.to_string())
}

#[test]
fn compare_shows_each_run_s_load_pattern_and_target() {
    let poisson = run_with_pattern(
        "poisson",
        serde_json::json!({"type": "poisson", "target_qps": 50.0, "target_concurrency": null}),
    );
    let closed = run_with_pattern(
        "concurrency",
        serde_json::json!({"type": "concurrency", "target_qps": null, "target_concurrency": 32}),
    );
    let (p, c) = (poisson.display().to_string(), closed.display().to_string());
    let json = compare_json(&[&p, &c, RUNS[0]]);
    let values = |key: &str| metric(&json, key)["values"].clone();
    assert_eq!(
        values("load_pattern"),
        serde_json::json!(["poisson", "concurrency", "max_throughput"])
    );
    assert_eq!(values("target_qps"), serde_json::json!([50.0, null, null]));
    assert_eq!(values("target_concurrency"), serde_json::json!([null, 32, null]));
    assert_eq!(metric(&json, "load_pattern")["unit"], "text");
    assert_eq!(metric(&json, "load_pattern")["ratios"], serde_json::json!([null, null, null]));
    let out = compare(&[&p, &c]);
    let table = String::from_utf8_lossy(&out.stdout);
    let row = |label: &str| {
        table.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("{label}: {table}"))
    };
    let words = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(words(row("Load pattern")), ["Load", "pattern", "poisson", "concurrency"]);
    assert_eq!(words(row("Target QPS")), ["Target", "QPS", "50.00", "n/a", "n/a"]);
    assert_eq!(words(row("Target concurrency")), ["Target", "concurrency", "n/a", "32", "n/a"]);
    // A pattern of the wrong type is refused as any malformed figure is.
    let bad = run_with_pattern("bad-pattern", serde_json::json!({"type": 3}));
    assert_refused(&bad, "`run_config.load_pattern.type` is 3, not a string");
}

#[test]
fn compare_keeps_every_column_apart_however_large_its_values() {
    let mut huge = fixture(RUNS[0]);
    huge["qps"] = serde_json::json!(1e15);
    huge["tps"] = serde_json::json!(1e15);
    huge["n_samples_completed"] = serde_json::json!(u64::MAX);
    huge["duration_ns"] = serde_json::json!(u64::MAX);
    let dir = run_with_summary("huge", &huge.to_string()).display().to_string();
    let out = compare(&[RUNS[0], &dir, &dir]);
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8_lossy(&out.stdout);
    let row = |label: &str| {
        let line = table.lines().find(|l| l.starts_with(label));
        let line = line.unwrap_or_else(|| panic!("{label}: {table}"));
        line[label.len()..].split_whitespace().map(str::to_string).collect::<Vec<_>>()
    };
    let big_qps = "1000000000000000.00";
    let ratio = format!("{:.3}x", 1e15 / fixture(RUNS[0])["qps"].as_f64().unwrap());
    assert_eq!(row("QPS"), ["3038.78", big_qps, &ratio, big_qps, &ratio], "{table}");
    let count = "18446744073709551616";
    let ratio = format!("{:.3}x", u64::MAX as f64 / 200.0);
    assert_eq!(row("Samples completed"), ["200", count, &ratio, count, &ratio], "{table}");
    let seconds = format!("{:.3}", u64::MAX as f64 / 1e9);
    assert_eq!(row("Duration (s)")[1], seconds, "{table}");
    // The header's labels end where their columns end: over the cells, not beside them.
    let header = table.lines().find(|l| l.ends_with("[3]/[1]")).unwrap();
    let qps = table.lines().find(|l| l.starts_with("QPS")).unwrap();
    let ends = |line: &str| -> Vec<usize> {
        let mut ends: Vec<usize> = line.match_indices(' ').map(|(i, _)| i).collect();
        ends.retain(|&i| i > 0 && line.as_bytes()[i - 1] != b' ');
        ends.push(line.len());
        ends
    };
    let header_ends = ends(header);
    assert!(header_ends.iter().all(|e| ends(qps).contains(e)), "columns line up:\n{table}");
}
