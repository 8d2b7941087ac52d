//! The null endpoint (`null://`): a run without a network measures the client's own pipeline and
//! still writes a complete, consistent report; `--no-events` leaves out only events.jsonl.

use crate::support::{check_accounting, report_dir, run, summary, Run};

fn null_run(name: &str, extra: &[&str]) -> (std::process::Output, std::path::PathBuf) {
    null_run_as("offline", name, extra)
}

fn null_run_as(
    mode: &str,
    name: &str,
    extra: &[&str],
) -> (std::process::Output, std::path::PathBuf) {
    let ran = Run::benchmark(&[mode], "null://", &report_dir(name)).args(extra).run();
    (ran.output, ran.dir)
}

#[test]
fn a_null_endpoint_run_answers_every_sample_and_writes_every_event() {
    for streaming in ["off", "on"] {
        let (out, dir) = null_run(
            &format!("null-{streaming}"),
            &["--num-samples", "20000", "--workers", "2", "--streaming", streaming],
        );
        assert_eq!(out.status.code(), Some(0));
        assert!(String::from_utf8_lossy(&out.stdout).contains("null://: no network"));
        let (issued, completed, failed, abandoned) = check_accounting(&dir);
        assert_eq!((issued, completed, failed, abandoned), (20_000, 20_000, 0, 0));
        let s = summary(&dir);
        // The synthetic answer carries usage like the embedded stub's: 10 prompt tokens.
        assert_eq!(
            s["input_sequence_lengths_server"]["total"].as_u64(),
            Some(200_000),
            "{streaming}: {s}"
        );
        let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
        let firsts = events.lines().filter(|l| l.contains("\"sample.recv_first\"")).count();
        assert_eq!(firsts, if streaming == "on" { 20_000 } else { 0 });
    }
}

#[test]
fn a_closed_loop_runs_on_the_null_endpoint() {
    let (out, dir) = null_run_as(
        "online",
        "null-concurrency",
        &["--load-pattern", "concurrency", "--concurrency", "64", "--num-samples", "5000"],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(check_accounting(&dir), (5_000, 5_000, 0, 0));
}

#[test]
fn no_events_writes_every_report_file_but_events_jsonl() {
    let (out, dir) = null_run("null-no-events", &["--num-samples", "3000", "--no-events"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(!dir.join("events.jsonl").exists(), "--no-events writes no event log");
    assert_eq!(summary(&dir)["n_samples_completed"].as_u64(), Some(3_000));
    assert!(dir.join("report.txt").is_file() && dir.join("sample_idx_map.json").is_file());
}

#[test]
fn the_null_endpoint_cannot_be_mixed_with_real_ones() {
    let dir = report_dir("null-mixed");
    let out = run([
        "benchmark",
        "offline",
        "--endpoints",
        "null://,http://127.0.0.1:9",
        "--model",
        "m",
        "--report-dir",
        &dir.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("null:// measures the client alone"));
}

#[test]
fn verbose_runs_give_each_coordinator_threads_cpu_per_sample() {
    let (out, _) = null_run("null-verbose", &["--num-samples", "5000", "-v"]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for thread in ["aggregator", "scheduler", "events-0"] {
        let line = stderr
            .lines()
            .find(|l| l.trim_start().starts_with(thread))
            .unwrap_or_else(|| panic!("a CPU line for the {thread} thread: {stderr}"));
        assert!(line.contains("us per sample"), "{line}");
    }
}

#[test]
fn the_cap_ends_a_null_run_with_the_accounting_exact() {
    let (out, dir) = null_run(
        "null-cap",
        &["--num-samples", "500000000", "--runtime.max-duration-ms", "100", "--workers", "2"],
    );
    assert_eq!(out.status.code(), Some(0));
    let (issued, completed, failed, abandoned) = check_accounting(&dir);
    assert!(issued > 0 && issued < 500_000_000, "the cap stopped issuing: {issued}");
    assert_eq!((completed, failed), (issued - abandoned, 0));
}

#[test]
fn the_default_seed_issues_the_rows_the_reference_issues() {
    // Python: r = random.Random(42); l = list(range(1000)); r.shuffle(l); l[:5]
    let (out, dir) = null_run("null-seed", &["--num-samples", "5"]);
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(dir.join("sample_idx_map.json")).unwrap();
    let map: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rows: Vec<u64> = (0..5u64)
        .map(|id| map["performance"][format!("{id:032x}")].as_u64().expect("a row per sample"))
        .collect();
    assert_eq!(rows, [776, 507, 895, 922, 33]);
}

#[test]
fn a_streaming_run_without_a_tokenizer_writes_tpot_as_the_reference_does() {
    // No client tokenizer, client basis: the TPOT series is registered (streaming) but
    // empty. The reference writes `{"early_stopping_percentiles": {…: null}}` and a TPOT
    // section of N/A rows, not `{}` and no section.
    let (out, dir) = null_run("null-tpot-empty", &["--num-samples", "50", "--streaming", "on"]);
    assert_eq!(out.status.code(), Some(0));
    let summary = std::fs::read_to_string(dir.join("performance/result_summary.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&summary).unwrap();
    let tpot = json["tpot"].as_object().expect("a tpot block");
    assert_eq!(tpot.keys().collect::<Vec<_>>(), ["early_stopping_percentiles"], "{summary}");
    let estimates = tpot["early_stopping_percentiles"].as_object().unwrap();
    assert!(estimates.contains_key("99.9") && estimates.values().all(|v| v.is_null()));
    assert!(json["ttft"]["percentiles"].is_object(), "ttft has values");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    let section = report.split("TPOT:\n").nth(1).expect("a TPOT section");
    assert!(section.starts_with("  Min: N/A ms\n  Max: N/A ms\n"), "{section:.200}");
    assert!(section.contains(
        "Early-stopping percentile estimates (N/A = insufficient samples):\n    99.9: N/A ms"
    ));
    // Without early stopping the empty series stays `{}`, as the reference's.
    let (out, dir) = null_run(
        "null-tpot-empty-noes",
        &["--num-samples", "50", "--streaming", "on", "--no-early-stopping"],
    );
    assert_eq!(out.status.code(), Some(0));
    let summary = std::fs::read_to_string(dir.join("performance/result_summary.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&summary).unwrap();
    assert_eq!(json["tpot"], serde_json::json!({}), "{summary}");
}

/// A run whose rows the spill directory's disk cannot hold is refused before it starts, naming
/// the numbers and what to do, with no event log begun.
#[test]
fn a_run_the_spill_disk_cannot_hold_is_refused_before_it_starts() {
    // A trillion samples need 145 TiB of spill: no test machine has it free.
    let (out, dir) = null_run("null-spill-refused", &["--num-samples", "1000000000000"]);
    assert_eq!(out.status.code(), Some(3), "a setup error");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1000000000000 samples need up to"), "{stderr}");
    assert!(stderr.contains("156 bytes a sample past the 0.25 GiB kept in memory"), "{stderr}");
    assert!(stderr.contains("choose another --spill-dir"), "{stderr}");
    assert!(!dir.join("events.jsonl").exists(), "nothing was started");
}
