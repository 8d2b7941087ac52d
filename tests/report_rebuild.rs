//! `llm-loadgen report DIR`: a fresh run rebuilt from its events.jsonl gives the run's own files
//! byte for byte; the other basis swaps names; a reference-format run rebuilds; a damaged log
//! fails naming its line.

mod common;

use std::path::{Path, PathBuf};

use common::{assets, bin, char_tokenizer, dataset, report_dir, run, show, stub, summary};
use loadgen_stubs::{StatusFault, StubKind};

const REBUILT_FILES: [&str; 3] =
    ["report.txt", "performance/result_summary.json", "metrics/final_snapshot.json"];

/// A run on the embedded stub with the char tokenizer: `pattern` args, then `extra`.
fn fresh_run(name: &str, pattern: &[&str], extra: &[&str]) -> PathBuf {
    let dir = report_dir(name);
    let mut args: Vec<String> = vec!["benchmark".into()];
    args.extend(pattern.iter().map(|s| s.to_string()));
    let tok = char_tokenizer();
    let dir_text = dir.display().to_string();
    let data = dataset();
    let common_args =
        ["--dataset", &data, "--tokenizer", &tok, "--workers", "1", "--report-dir", &dir_text];
    args.extend(common_args.iter().map(|s| s.to_string()));
    args.extend(extra.iter().map(|s| s.to_string()));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "the run succeeds");
    dir
}

fn report(args: &[&str]) -> std::process::Output {
    let out = bin().arg("report").args(args).output().expect("the binary runs");
    show(&out);
    out
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{}/{file}: {e}", dir.display()))
}

/// Rebuilds `dir` under `--out` and in place, and checks every file against the run's.
fn assert_round_trip(dir: &Path) {
    let originals: Vec<Vec<u8>> = REBUILT_FILES.iter().map(|f| read(dir, f)).collect();
    let other = dir.with_extension("rebuilt");
    let _ = std::fs::remove_dir_all(&other);
    let out = report(&[&dir.display().to_string(), "--out", &other.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "report --out succeeds");
    for (file, original) in REBUILT_FILES.iter().zip(&originals) {
        assert!(
            read(&other, file) == *original,
            "{file} rebuilt under --out differs from the run's"
        );
    }
    let out = report(&[&dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "report in place succeeds");
    for (file, original) in REBUILT_FILES.iter().zip(&originals) {
        assert!(read(dir, file) == *original, "{file} rebuilt in place differs from the run's");
    }
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn an_offline_streaming_run_rebuilds_byte_for_byte() {
    let dir = fresh_run(
        "rebuild-offline-stream",
        &["offline"],
        &["--num-samples", "60", "--streaming", "on"],
    );
    assert_round_trip(&dir);
}

#[test]
fn an_offline_server_basis_run_without_streaming_rebuilds_byte_for_byte() {
    let extra = ["--num-samples", "60", "--streaming", "off", "--token-count-source", "server"];
    let dir = fresh_run("rebuild-offline-server", &["offline"], &extra);
    assert_eq!(summary(&dir)["token_count_source"], "server");
    assert_round_trip(&dir);
}

#[test]
fn a_poisson_run_rebuilds_byte_for_byte() {
    let pattern = ["online", "--load-pattern", "poisson", "--target-qps", "400"];
    let dir = fresh_run("rebuild-poisson", &pattern, &["--num-samples", "40", "--streaming", "on"]);
    assert!(summary(&dir)["issue_lag"].is_object(), "a Poisson run has an issue lag to carry");
    assert_round_trip(&dir);
}

#[test]
fn a_concurrency_run_rebuilds_byte_for_byte_under_either_basis() {
    let pattern = ["online", "--load-pattern", "concurrency", "--concurrency", "4"];
    let client =
        fresh_run("rebuild-conc-client", &pattern, &["--num-samples", "50", "--streaming", "off"]);
    assert_round_trip(&client);
    let extra = ["--num-samples", "50", "--streaming", "on", "--token-count-source", "server"];
    let server = fresh_run("rebuild-conc-server", &pattern, &extra);
    assert_round_trip(&server);
}

#[test]
fn a_run_with_a_warm_up_rebuilds_byte_for_byte() {
    // Warm-up samples have no lines: the totals come from the run's own snapshot.
    let extra = ["--num-samples", "40", "--streaming", "on", "--warmup", "--warmup-requests", "8"];
    let dir = fresh_run("rebuild-warmup", &["offline"], &extra);
    let text = std::fs::read_to_string(dir.join("metrics/final_snapshot.json")).unwrap();
    let snapshot: serde_json::Value = serde_json::from_str(&text).unwrap();
    let metrics = snapshot["metrics"].as_array().unwrap();
    let issued = metrics.iter().find(|m| m["name"] == "total_samples_issued").unwrap();
    assert_eq!(issued["value"], 48, "40 tracked and 8 warm-up samples");
    assert_round_trip(&dir);
}

#[test]
fn a_capped_run_with_abandoned_samples_rebuilds_byte_for_byte() {
    let pattern = ["online", "--load-pattern", "concurrency", "--concurrency", "8"];
    let extra =
        ["--num-samples", "1000000", "--runtime.max-duration-ms", "400", "--streaming", "on"];
    let dir = fresh_run("rebuild-capped", &pattern, &extra);
    assert!(summary(&dir)["n_samples_abandoned"].as_u64() > Some(0), "the cap abandons samples");
    assert_round_trip(&dir);
}

#[test]
fn a_run_with_failures_rebuilds_its_failure_kinds_byte_for_byte() {
    let server = stub(StubKind::MaxThroughput, |c| {
        c.faults.status = Some(StatusFault { status: 429, every: 10 })
    });
    let url = server.url();
    let extra = ["--endpoints", &url, "--model", "m", "--num-samples", "200", "--streaming", "on"];
    let dir = fresh_run("rebuild-failures", &["offline"], &extra);
    assert_eq!(summary(&dir)["failure_kinds"]["http_status"]["count"], 20);
    assert_round_trip(&dir);
}

#[test]
fn the_other_basis_swaps_names_by_the_naming_rule() {
    let dir =
        fresh_run("rebuild-swap", &["offline"], &["--num-samples", "40", "--streaming", "on"]);
    let before = summary(&dir);
    assert_eq!(before["token_count_source"], "client");
    let other = dir.with_extension("server");
    let _ = std::fs::remove_dir_all(&other);
    let args = [
        &dir.display().to_string(),
        "--token-count-source",
        "server",
        "--out",
        &other.display().to_string(),
    ];
    assert_eq!(report(&args).status.code(), Some(0));
    let after = summary(&other);
    assert_eq!(after["token_count_source"], "server");
    // The stub's usage counts 160 output tokens a sample, the char tokenizer 160 characters:
    // what was the server block is now the headline, and the client one is suffixed.
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        if let Some(map) = v.as_object_mut() {
            map.remove("early_stopping_percentiles");
        }
        v
    };
    for base in ["output_sequence_lengths", "input_sequence_lengths", "tpot"] {
        assert_eq!(strip(&after[base]), strip(&before[format!("{base}_server")]), "{base}");
        assert_eq!(strip(&after[format!("{base}_client")]), strip(&before[base]), "{base}_client");
    }
    assert_eq!(after["tps"], before["tps_server"]);
    assert_eq!(after["tps_client"], before["tps"]);
    assert!(after.get("tpot_server").is_none(), "no key names the primary basis");
    assert_eq!(after["ttft"], before["ttft"], "TTFT does not depend on the basis");
    let _ = std::fs::remove_dir_all(&other);
}

/// The reference-format fixture: its config.yaml names the tokenizer relative to the
/// project root, as the reference's own runs name theirs.
fn reference_report(out: &Path, extra: &[&str]) -> std::process::Output {
    let _ = std::fs::remove_dir_all(out);
    let fixture = assets().join("reference_run");
    let mut cmd = bin();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR")).arg("report").arg(&fixture).arg("--out").arg(out);
    let out = cmd.args(extra).output().expect("the binary runs");
    show(&out);
    out
}

#[test]
fn a_run_in_the_reference_format_rebuilds_with_null_server_blocks() {
    let out_dir = report_dir("rebuild-reference");
    let out = reference_report(&out_dir, &[]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reporting under client, the default"), "{stderr}");
    assert!(stderr.contains("no performance/result_summary.json"), "{stderr}");
    let s = summary(&out_dir);
    // 30 issued, one failed (its error line after its complete line, as the reference writes).
    assert_eq!(
        (s["n_samples_issued"].as_u64(), s["n_samples_failed"].as_u64()),
        (Some(30), Some(1))
    );
    assert_eq!(s["n_samples_completed"], 30);
    for key in [
        "tpot_server",
        "output_sequence_lengths_server",
        "input_sequence_lengths_server",
        "tps_server",
    ] {
        assert!(s[key].is_null(), "{key} is null without usage: {}", s[key]);
    }
    assert_eq!(s["n_samples_missing_usage"], 29, "every successful sample lacks usage");
    // By hand from the fixture: first TTFT and extremes (recv_first - issued).
    assert_eq!(s["ttft"]["min"], 2_632_373);
    assert_eq!(s["ttft"]["max"], 38_369_330);
    // OSL = characters of the echoed prompts, counted by the char tokenizer.
    assert_eq!(s["output_sequence_lengths"]["total"], 1010);
    assert_eq!(s["failure_kinds"]["error"]["count"], 1);
    assert!(std::fs::read_to_string(out_dir.join("report.txt")).unwrap().contains("TTFT:"));
}

#[test]
fn a_run_whose_summary_is_gone_still_rebuilds_and_says_what_it_cannot_know() {
    let dir =
        fresh_run("rebuild-nosummary", &["offline"], &["--num-samples", "30", "--streaming", "on"]);
    let before = summary(&dir);
    std::fs::remove_file(dir.join("performance/result_summary.json")).unwrap();
    let other = dir.with_extension("out");
    let _ = std::fs::remove_dir_all(&other);
    let out = report(&[&dir.display().to_string(), "--out", &other.display().to_string()]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no performance/result_summary.json"), "{stderr}");
    let after = summary(&other);
    for key in ["n_samples_issued", "n_samples_completed", "ttft", "latency", "tpot", "qps", "tps"]
    {
        assert_eq!(after[key], before[key], "{key} is derived from the log alone");
    }
    assert_eq!(after["token_count_source"], "client", "the basis comes from config.yaml");
    let _ = std::fs::remove_dir_all(&other);
}

/// Copies the fixture's files into a fresh folder with `events` as its log.
fn damaged_copy(name: &str, events: &str) -> PathBuf {
    let dir = report_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    let fixture = assets().join("reference_run");
    for file in ["config.yaml", "sample_idx_map.json"] {
        std::fs::copy(fixture.join(file), dir.join(file)).unwrap();
    }
    std::fs::write(dir.join("events.jsonl"), events).unwrap();
    dir
}

#[test]
fn a_damaged_log_exits_2_naming_the_line_and_writes_nothing() {
    let text = std::fs::read_to_string(assets().join("reference_run/events.jsonl")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let with_line_5 = |replacement: &str| {
        let mut l = lines.clone();
        l[4] = replacement;
        l.join("\n") + "\n"
    };
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(lines[4]).unwrap())
            .unwrap();
    let unknown = lines[4].replace("sample.issued", "sample.teleported");
    let cases = [
        (
            "malformed",
            with_line_5(r#"{"event_type":"sample.issued","timestamp_ns":12,"#),
            5,
            "malformed event",
        ),
        ("pretty", with_line_5(&pretty), 5, "not a compact JSON event"),
        ("unknown", with_line_5(&unknown), 5, "unknown event type \"sample.teleported\""),
        ("truncated", text[..text.len() - 30].to_string(), lines.len() as u64, "truncated"),
        ("empty", String::new(), 0, "the log is empty"),
    ];
    for (name, events, line, what) in cases {
        let dir = damaged_copy(&format!("damaged-{name}"), &events);
        let out =
            bin().current_dir(env!("CARGO_MANIFEST_DIR")).arg("report").arg(&dir).output().unwrap();
        show(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: bad input exits 2");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(&format!("events.jsonl line {line}: ")), "{name}: {stderr}");
        assert!(stderr.contains(what), "{name}: {stderr}");
        assert!(!dir.join("performance/result_summary.json").exists(), "{name}: nothing scored");
    }
}
