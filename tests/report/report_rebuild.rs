//! `llm-loadgen report DIR`: a fresh run rebuilt from its events.jsonl gives the run's own files
//! byte for byte; the other basis swaps names; a reference-format run rebuilds; a damaged log
//! fails naming its line.

use std::path::{Path, PathBuf};

use crate::support::{assets, bin, char_tokenizer, dataset, report_dir, run, show, stub, summary};
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

/// The reference fixture's log with line `n` (from 1) rewritten by `edit`.
fn fixture_log_with(n: usize, edit: impl FnOnce(&str) -> String) -> String {
    let text = std::fs::read_to_string(assets().join("reference_run/events.jsonl")).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines[n - 1] = edit(&lines[n - 1]);
    lines.join("\n") + "\n"
}

/// `line` with its `timestamp_ns` set to `ns`.
fn stamped(line: &str, ns: u64) -> String {
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    let old = format!("\"timestamp_ns\":{},", v["timestamp_ns"].as_u64().unwrap());
    line.replacen(&old, &format!("\"timestamp_ns\":{ns},"), 1)
}

/// Rebuilds `dir` and expects exit 2 naming `line` and saying `what`, with nothing written.
fn assert_refused_at(name: &str, dir: &Path, line: u64, what: &str) -> String {
    let out = bin().current_dir(env!("CARGO_MANIFEST_DIR")).arg("report").arg(dir).output();
    let out = out.unwrap();
    show(&out);
    assert_eq!(out.status.code(), Some(2), "{name}: bad input exits 2");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(stderr.contains(&format!("events.jsonl line {line}: ")), "{name}: {stderr}");
    assert!(stderr.contains(what), "{name}: {stderr}");
    assert!(stderr.contains(&dir.join("events.jsonl").display().to_string()), "{name}: the file");
    assert!(!dir.join("performance/result_summary.json").exists(), "{name}: nothing scored");
    stderr
}

#[test]
fn stamps_no_run_can_write_are_refused_naming_the_file_line_and_value() {
    // Line 92 is the last completion (stamped 5000046198817); line 94 is session.ended.
    const LAST: u64 = 5_000_046_198_817;
    let ten_years = 10 * 365 * 86_400_000_000_000u64;
    let day = 86_400_000_000_000u64;
    let text = std::fs::read_to_string(assets().join("reference_run/events.jsonl")).unwrap();
    let all_max: String = text.lines().map(|l| stamped(l, u64::MAX) + "\n").collect();
    let cases = [
        // The run's report said "Duration: 315360000.05 seconds"; plot asked for 5 GB.
        (
            "ten-years",
            fixture_log_with(92, |l| stamped(l, LAST + ten_years)),
            92,
            format!(
                "timestamp_ns {} lies 3650.0 days from line 1's 5000000000000",
                LAST + ten_years
            ),
        ),
        (
            "u64-max",
            fixture_log_with(92, |l| stamped(l, u64::MAX)),
            92,
            "timestamp_ns 18446744073709551615 is past any CLOCK_MONOTONIC time".to_string(),
        ),
        ("all-max", all_max, 1, "timestamp_ns 18446744073709551615 is past any".to_string()),
        (
            "after-end",
            fixture_log_with(92, |l| stamped(l, LAST + day)),
            92,
            format!("timestamp_ns {} is after session.ended's 5000048698817 (line 94)", LAST + day),
        ),
        (
            "before-start",
            fixture_log_with(3, |l| stamped(l, 1)),
            3,
            "timestamp_ns 1 is before session.started's 5000000000000 (line 1)".to_string(),
        ),
    ];
    for (name, events, line, what) in cases {
        let dir = damaged_copy(&format!("stamps-{name}"), &events);
        assert_refused_at(name, &dir, line, &what);
    }
}

#[test]
fn an_output_or_prompt_longer_than_a_run_keeps_is_refused_before_it_is_counted() {
    // The run keeps 256 KiB of a response's output, at most 3 bytes a byte once made UTF-8:
    // a longer output (16 MiB of one once cost the tokenizer 3 GB) cannot be the run's.
    let output = |bytes: usize| {
        let chunks = r#"["Summarize"," quantum"," computing"," (case"," 959)"]"#;
        let long = format!("[\"x\",\"{}\"]", "y".repeat(bytes - 1));
        fixture_log_with(92, |l| l.replacen(chunks, &long, 1))
    };
    let dir = damaged_copy("output-over", &output(3 * 256 * 1024 + 1));
    let what = "the sample's output is 786433 bytes, more than a run logs (786432";
    let err = assert_refused_at("output", &dir, 92, what);
    assert!(err.contains("MAX_OUTPUT_BYTES"), "names the run's limit: {err}");
    // At the worker's own limit the output is counted as the run counted it.
    let dir = damaged_copy("output-at-limit", &output(256 * 1024));
    let out = bin().current_dir(env!("CARGO_MANIFEST_DIR")).arg("report").arg(&dir).output();
    let out = out.unwrap();
    show(&out);
    assert_eq!(out.status.code(), Some(0), "an output the run could keep rebuilds");
    // A prompt past the dataset's 4 MiB a row: the run refused such a row before it started.
    let long = format!("\"{}\"", "p".repeat((4 << 20) + 1));
    let prompt =
        fixture_log_with(3, |l| l.replacen("\"Explain neural networks (case 152)\"", &long, 1));
    let dir = damaged_copy("prompt-over", &prompt);
    let what = "the sample's prompt is 4194305 bytes, more than a run sends (4194304";
    assert_refused_at("prompt", &dir, 3, what);
}

/// Every file under `dir`, by its path relative to `dir`.
fn files_under(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// Rebuilds `dir` under `--out` and in place: every file the rebuild writes equals the run's,
/// and in place every file of the run is what it was.
fn assert_every_file_round_trips(dir: &Path) {
    let before = files_under(dir);
    let other = dir.with_extension("rebuilt");
    let _ = std::fs::remove_dir_all(&other);
    let out = report(&[&dir.display().to_string(), "--out", &other.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "report --out succeeds");
    let written = files_under(&other);
    for file in REBUILT_FILES {
        assert!(written.contains_key(file), "{file} is rebuilt under --out");
    }
    for (file, bytes) in &written {
        assert!(
            before.get(file) == Some(bytes),
            "{file} rebuilt under --out differs from the run's"
        );
    }
    let out = report(&[&dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "report in place succeeds");
    let after = files_under(dir);
    assert_eq!(after.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>());
    for (file, bytes) in &before {
        assert!(after.get(file) == Some(bytes), "{file} rebuilt in place differs from the run's");
    }
    let _ = std::fs::remove_dir_all(&other);
}

/// A run on the answer-table stub with two accuracy datasets (capitals once, math three
/// times) after 20 performance samples, `extra` after.
fn accuracy_run(name: &str, extra: &[&str]) -> PathBuf {
    let fixture = |f: &str| assets().join("accuracy_runs").join(f).display().to_string();
    let answers = loadgen_stubs::load_answers(Path::new(&fixture("answers.json"))).unwrap();
    let server = stub(StubKind::Echo, |c| c.answers = Some(answers));
    let capitals = format!(
        "acc:{},name=capitals,accuracy_config.eval_method=string_match,\
         accuracy_config.extractor=identity_extractor",
        fixture("capitals.jsonl")
    );
    let math = format!(
        "acc:{},name=math,accuracy_config.eval_method=pass_at_1,\
         accuracy_config.extractor=boxed_math_extractor,accuracy_config.ground_truth=answer,\
         accuracy_config.num_repeats=3",
        fixture("math.jsonl")
    );
    let url = server.url();
    let dir = report_dir(name);
    let (tok, perf, dir_text) =
        (char_tokenizer(), fixture("perf.jsonl"), dir.display().to_string());
    let mut args = vec!["benchmark", "offline", "--endpoints", &url, "--model", "m"];
    args.extend(["--workers", "1", "--max-connections", "8", "--tokenizer", &tok]);
    args.extend(["--dataset", &perf, "--dataset", &capitals, "--dataset", &math]);
    args.extend(["--num-samples", "20", "--streaming", "on", "--report-dir", &dir_text]);
    args.extend(extra);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "the run succeeds");
    dir
}

fn snapshot_counter(dir: &Path, name: &str) -> u64 {
    let text = std::fs::read_to_string(dir.join("metrics/final_snapshot.json")).unwrap();
    let snapshot: serde_json::Value = serde_json::from_str(&text).unwrap();
    let metrics = snapshot["metrics"].as_array().unwrap();
    metrics.iter().find(|m| m["name"] == name).unwrap()["value"].as_u64().unwrap()
}

#[test]
fn an_accuracy_run_rebuilds_every_file_byte_for_byte_with_its_accuracy_block() {
    let dir = accuracy_run("rebuild-acc-both", &[]);
    assert!(crate::support::report_txt(&dir).contains("\nAccuracy:\n  capitals: "));
    assert_eq!(summary(&dir)["n_samples_issued"], 20);
    assert!(snapshot_counter(&dir, "total_samples_issued") > 20, "the accuracy samples count");
    assert_every_file_round_trips(&dir);
    // Under the other basis the block follows it: the output tokens come from usage.
    let other = dir.with_extension("server");
    let _ = std::fs::remove_dir_all(&other);
    let args = [&dir.display().to_string(), "--token-count-source", "server", "--out"];
    let out = report(&[args[0], args[1], args[2], args[3], &other.display().to_string()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(crate::support::report_txt(&other).contains("\nAccuracy:\n  capitals: "));
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn an_accuracy_only_run_rebuilds_every_file_byte_for_byte_and_reports_its_warmup_seed() {
    let dir = accuracy_run("rebuild-acc-only", &["--accuracy-only"]);
    let config = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    assert!(config.contains("warmup_random_seed: 42"), "{config}");
    let s = summary(&dir);
    assert_eq!(s["run_config"]["warmup"]["warmup_random_seed"], 42, "{}", s["run_config"]);
    assert!(crate::support::report_txt(&dir).contains("warmup_random_seed=42"));
    assert!(crate::support::report_txt(&dir).contains("\nAccuracy:\n"));
    assert_every_file_round_trips(&dir);
}

#[test]
fn an_accuracy_run_without_its_results_or_totals_is_refused_before_anything_is_written() {
    let dir = accuracy_run("rebuild-acc-refused", &[]);
    let before = files_under(&dir);
    for gone in ["accuracy/accuracy_results.json", "metrics/final_snapshot.json"] {
        let copy = dir.with_extension(gone.replace('/', "-"));
        let _ = std::fs::remove_dir_all(&copy);
        for (file, bytes) in &before {
            let path = copy.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        std::fs::remove_file(copy.join(gone)).unwrap();
        let out = report(&[&copy.display().to_string()]);
        assert_eq!(out.status.code(), Some(2), "{gone}: refused");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(gone) && stderr.contains("nothing was rebuilt"), "{stderr}");
        let mut left = before.clone();
        left.remove(gone);
        assert!(files_under(&copy) == left, "{gone}: nothing was written");
        let _ = std::fs::remove_dir_all(&copy);
    }
}

#[test]
fn sample_idx_map_lists_the_performance_samples_in_issue_order() {
    // Every third answer waits: samples complete out of their issue order.
    let server = stub(StubKind::Echo, |c| {
        c.faults.delay = Some(loadgen_stubs::DelayFault { delay_ms: 30, every: 3 })
    });
    let url = server.url();
    let extra = ["--endpoints", &url, "--model", "m", "--num-samples", "30"];
    let dir =
        fresh_run("idx-order", &["offline"], &[&extra[..], &["--max-connections", "8"]].concat());
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let uuids = |event: &str| -> Vec<String> {
        let tag = format!("\"event_type\":\"{event}\"");
        events
            .lines()
            .filter(|l| l.contains(&tag))
            .map(|l| l.split("\"sample_uuid\":\"").nth(1).unwrap()[..32].to_string())
            .collect()
    };
    let issued = uuids("sample.issued");
    assert_ne!(uuids("sample.complete"), issued, "the answers came back out of order");
    let map = std::fs::read_to_string(dir.join("sample_idx_map.json")).unwrap();
    let keys: Vec<String> = map
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"'))
        .filter(|l| !l.starts_with("performance"))
        .map(|l| l[..32].to_string())
        .collect();
    assert_eq!(keys, issued, "as the reference fills its map: as it issues");
}

/// The reference-format fixture with the last `k` successful samples' first chunk stamped
/// 0.5 ms after their completion, as the reference's two clocks stamp most of its samples.
fn mixed_clock_copy(name: &str, k: usize) -> PathBuf {
    let text = std::fs::read_to_string(assets().join("reference_run/events.jsonl")).unwrap();
    let field = |l: &str, key: &str| -> String {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        v[key].to_string()
    };
    let complete_ns: std::collections::HashMap<String, u64> = text
        .lines()
        .filter(|l| l.contains("\"sample.complete\"") && l.contains("TextModelOutput"))
        .map(|l| (field(l, "sample_uuid"), field(l, "timestamp_ns").parse().unwrap()))
        .collect();
    let mut by_end: Vec<(&String, &u64)> = complete_ns.iter().collect();
    by_end.sort_by_key(|(_, ns)| std::cmp::Reverse(**ns));
    let last: std::collections::HashSet<&String> = by_end.iter().take(k).map(|(u, _)| *u).collect();
    let mut moved = 0;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            let uuid = field(l, "sample_uuid");
            match complete_ns.get(&uuid) {
                Some(&done) if last.contains(&uuid) && l.contains("\"sample.recv_first\"") => {
                    moved += 1;
                    let old = format!("\"timestamp_ns\":{}", field(l, "timestamp_ns"));
                    l.replace(&old, &format!("\"timestamp_ns\":{}", done + 500_000))
                }
                _ => l.to_string(),
            }
        })
        .collect();
    assert_eq!(moved, k);
    damaged_copy(name, &(lines.join("\n") + "\n"))
}

#[test]
fn a_reference_log_with_first_chunks_after_completions_leaves_their_tpot_out_and_says_so() {
    let dir = mixed_clock_copy("rebuild-mixed-clocks", 5);
    let out =
        bin().current_dir(env!("CARGO_MANIFEST_DIR")).arg("report").arg(&dir).output().unwrap();
    show(&out);
    assert_eq!(out.status.code(), Some(0));
    let sentence = "5 of 29 streamed samples have their first chunk stamped after their completion";
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(sentence), "{stderr}");
    let report = crate::support::report_txt(&dir);
    assert!(report.contains(&format!("NOTE: {sentence}")), "{report}");
    // Their TPOT is left out, not clamped to 0.
    let s = summary(&dir);
    let counts: u64 = s["tpot"]["histogram"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(counts, 24, "{}", s["tpot"]);
    assert!(s["tpot"]["min"].as_f64().unwrap() > 0.0, "{}", s["tpot"]);
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let stamp = |l: &str| -> u64 {
        serde_json::from_str::<serde_json::Value>(l).unwrap()["timestamp_ns"].as_u64().unwrap()
    };
    let started = stamp(events.lines().next().unwrap());
    let sample_event = |l: &&str| l.contains("\"sample.") || l.contains("\"error.generic\"");
    let last_sample = events.lines().filter(sample_event).map(stamp).max().unwrap();
    let last_complete =
        events.lines().filter(|l| l.contains("\"sample.complete\"")).map(stamp).max().unwrap();
    assert!(last_sample > last_complete, "a first chunk is the last sample event");
    // The reference's counter runs to its last event, session.ended, after the samples.
    let ended = stamp(events.lines().last().unwrap());
    assert!(ended > last_sample, "session.ended is the reference's teardown, after the samples");
    assert_eq!(snapshot_counter(&dir, "total_duration_ns"), ended - started);
    // The counts were made by this rebuild, not live by the reference's tokenizer workers.
    assert!(report.contains("counted by `llm-loadgen report` from events.jsonl"), "{report}");
    assert!(!report.contains("counted live"), "{report}");
    assert_eq!(s["client_token_counting"], "rebuild");
    let es = bin().current_dir(env!("CARGO_MANIFEST_DIR")).arg("early-stopping").arg(&dir).output();
    let es = es.unwrap();
    show(&es);
    assert!(String::from_utf8_lossy(&es.stdout).contains("tpot (from tpot_ns, n=24)"));
    assert!(String::from_utf8_lossy(&es.stderr).contains(sentence));
}

/// A run whose rows outgrow `--spill-budget-mib` writes them to files and reads them back: its
/// report (percentiles, histograms, float sums in completion order) equals the in-memory
/// rebuild of its own events.jsonl byte for byte.
#[test]
fn a_run_that_spilled_its_rows_to_files_rebuilds_byte_for_byte() {
    let dir = report_dir("rebuild-spilled");
    let dir_text = dir.display().to_string();
    let args = [
        "benchmark",
        "offline",
        "--num-samples",
        "100000",
        "--streaming",
        "on",
        "--workers",
        "1",
        "--spill-budget-mib",
        "1",
        "-v",
        "--report-dir",
        &dir_text,
    ];
    let out = run(args);
    assert_eq!(out.status.code(), Some(0), "the run succeeds");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().find(|l| l.starts_with("per-sample rows written to"));
    let mib: f64 = line
        .and_then(|l| l.rsplit(": ").next())
        .and_then(|v| v.trim_end_matches(" MiB").parse().ok())
        .unwrap_or_else(|| panic!("no spill line in:\n{stderr}"));
    assert!(mib > 5.0, "100,000 rows past a 1 MiB budget went to files: {mib} MiB");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".col"))
        .collect();
    assert!(leftovers.is_empty(), "no column file is left behind");
    assert_round_trip(&dir);
}
