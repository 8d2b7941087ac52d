//! Report tests: golden files, key order, partial and null blocks, completeness.

use std::path::{Path, PathBuf};

use loadgen_coordinator::metrics::fixture::{
    run_counters, strip_usage, synthetic_table, FixtureSpec,
};
use loadgen_coordinator::metrics::{
    final_snapshot, MetricsOptions, RunState, SampleRow, SampleTable, Snapshot, TokenCountSource,
};
use loadgen_py::json::to_python_json;

use super::*;

const REFERENCE_KEYS: [&str; 19] = [
    "version",
    "git_sha",
    "test_started_at",
    "n_samples_issued",
    "n_samples_completed",
    "n_samples_failed",
    "duration_ns",
    "state",
    "complete",
    "ttft",
    "tpot",
    "latency",
    "output_sequence_lengths",
    "input_sequence_lengths",
    "legacy_loadgen_window_duration_ns",
    "qps",
    "tps",
    "finish_reason_counts",
    "run_config",
];

fn info(primary: TokenCountSource) -> RunInfo {
    RunInfo {
        version: "0.1.0".into(),
        git_sha: None,
        load_pattern: LoadPatternInfo {
            kind: "max_throughput".into(),
            target_qps: None,
            target_concurrency: None,
            use_legacy_loadgen_qps_metrics: None,
        },
        warmup: WarmupInfo {
            enabled: false,
            n_requests: None,
            salt: false,
            drain: false,
            warmup_random_seed: 42,
        },
        scheduler_random_seed: 42,
        dataloader_random_seed: 42,
        token_count_source: primary,
        embedded_stub: false,
        client_token_counting: None,
        interrupted: false,
        incomplete_reason: None,
        abandoned: 0,
        issue_lag: None,
        client_wait: None,
        failures: Vec::new(),
        requests_resent: 0,
        events_has_errors: true,
        endpoints: Vec::new(),
        shards: Vec::new(),
        mixed_clocks: None,
        agentic: None,
        profiling: None,
        goodput: None,
    }
}

fn snapshot(table: &SampleTable, primary: TokenCountSource) -> Snapshot {
    let opts = MetricsOptions {
        streaming: true,
        early_stopping: true,
        primary,
        legacy_loadgen_qps: false,
        has_tokenizer: true,
    };
    final_snapshot(table, &run_counters(table), &opts, RunState::Complete)
}

/// The fixture's one endpoint (every row names endpoint 0).
fn one_endpoint(table: &SampleTable) -> Vec<EndpointInfo> {
    let stats = loadgen_coordinator::metrics::endpoint_stats(table, 1);
    let url = "http://127.0.0.1:8000".to_string();
    stats.into_iter().map(|stat| EndpointInfo { url: url.clone(), stat }).collect()
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden")
}

/// Compares `actual` with a golden file byte for byte; `UPDATE_GOLDEN=1` rewrites it.
fn check_golden(name: &str, actual: &[u8]) {
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
    if expected != actual {
        let actual = String::from_utf8_lossy(actual);
        let expected = String::from_utf8_lossy(&expected);
        let line = expected.lines().zip(actual.lines()).position(|(a, b)| a != b);
        panic!("{} differs from the golden file (first differing line {line:?})", path.display());
    }
}

fn check_case(case: &str, table: &SampleTable, primary: TokenCountSource) {
    let snap = snapshot(table, primary);
    let mut info = info(primary);
    info.endpoints = one_endpoint(table);
    let failed = run_counters(table).tracked_samples_failed;
    if failed > 0 {
        info.failures = vec![FailureKindCount {
            kind: "http_status".into(),
            count: failed,
            first_message: "HTTP 500: \"overloaded\"\n".into(),
        }];
        info.requests_resent = 2;
    }
    let summary = result_summary(&snap, &info);
    check_golden(&format!("{case}/report.txt"), report_txt(&summary, &info).as_bytes());
    let json = to_python_json(&summary).unwrap();
    check_golden(&format!("{case}/result_summary.json"), &json);
    check_golden(&format!("{case}/final_snapshot.json"), &to_python_json(&snap).unwrap());
    // The summary read back is the one written: the same bytes again.
    let read: ResultSummary = serde_json::from_slice(&json).unwrap();
    assert_eq!(String::from_utf8(to_python_json(&read).unwrap()), String::from_utf8(json));
}

#[test]
fn golden_client_primary_default_run() {
    check_case("client", &synthetic_table(&FixtureSpec::default()), TokenCountSource::Client);
}

#[test]
fn golden_server_primary_partial_usage_with_failures() {
    let spec = FixtureSpec {
        fail_every: 9,
        missing_usage_every: 11,
        server_osl_deficit: 2,
        ..FixtureSpec::default()
    };
    check_case("server_partial", &synthetic_table(&spec), TokenCountSource::Server);
}

#[test]
fn golden_client_primary_server_without_usage() {
    let table = strip_usage(&synthetic_table(&FixtureSpec::default()));
    check_case("client_no_usage", &table, TokenCountSource::Client);
}

fn summary_json(table: &SampleTable, primary: TokenCountSource) -> serde_json::Value {
    let summary = result_summary(&snapshot(table, primary), &info(primary));
    serde_json::from_slice(&to_python_json(&summary).unwrap()).unwrap()
}

fn top_level_keys(text: &str) -> Vec<String> {
    // serde_json::Value sorts keys, so read the order from the text: top-level keys
    // are the lines indented by exactly two spaces.
    text.lines()
        .filter_map(|l| l.strip_prefix("  \""))
        .filter_map(|l| l.split_once('"').map(|(k, _)| k.to_string()))
        .collect()
}

#[test]
fn default_summary_keeps_reference_keys_then_adds() {
    let table = synthetic_table(&FixtureSpec::default());
    let snap = snapshot(&table, TokenCountSource::Client);
    let summary = result_summary(&snap, &info(TokenCountSource::Client));
    let text = String::from_utf8(to_python_json(&summary).unwrap()).unwrap();
    let keys = top_level_keys(&text);
    assert_eq!(&keys[..REFERENCE_KEYS.len()], REFERENCE_KEYS);
    let added = [
        "token_count_source",
        "n_samples_missing_usage",
        "n_samples_missing_usage_empty_output",
        "client_token_tasks_pending",
        "osl_paired",
        "tpot_server",
        "output_sequence_lengths_server",
        "input_sequence_lengths_server",
        "tps_server",
        "n_samples_abandoned",
        "issue_lag",
        "n_requests_resent",
        "failure_kinds",
        "client_token_counting",
        "endpoints",
        "itl",
        "chunks_per_sample",
        "tokens_per_chunk",
        "tokens_per_chunk_server",
        "n_streams_multi_chunk",
        "n_streams_in_one_read",
        "client_wait",
        "ttft_from_write",
        "latency_from_write",
        "connection_pool",
        "client_wait_warning",
    ];
    assert_eq!(&keys[REFERENCE_KEYS.len()..], added);
    let server = summary_json(&table, TokenCountSource::Server);
    for key in
        ["tpot_client", "output_sequence_lengths_client", "tps_client", "tokens_per_chunk_client"]
    {
        assert!(server.get(key).is_some(), "{key}");
    }
    assert_eq!(server["token_count_source"], "server");
}

#[test]
fn client_primary_unsuffixed_values_equal_client_only_run() {
    let spec = FixtureSpec { fail_every: 6, missing_usage_every: 4, ..FixtureSpec::default() };
    let table = synthetic_table(&spec);
    let with_usage = summary_json(&table, TokenCountSource::Client);
    let client_only = summary_json(&strip_usage(&table), TokenCountSource::Client);
    for key in REFERENCE_KEYS {
        assert_eq!(with_usage[key], client_only[key], "{key}");
    }
    assert!(client_only["output_sequence_lengths_server"].is_null());
    assert!(client_only["tps_server"].is_null());
    assert!(client_only["osl_paired"].is_null());
}

#[test]
fn server_blocks_null_partial_and_tps() {
    let full = synthetic_table(&FixtureSpec::default());
    let json = summary_json(&full, TokenCountSource::Client);
    assert!(json["output_sequence_lengths_server"].get("partial").is_none());
    assert!(json["tps_server"].is_number());
    assert_eq!(json["tps_server"], json["tps"]);
    assert_eq!(json["osl_paired"]["mean"], 0.0);
    assert_eq!(json["osl_paired"]["ratio"], 1.0);
    assert_eq!(json["osl_paired"]["count"], 200);

    let spec = FixtureSpec { missing_usage_every: 10, ..FixtureSpec::default() };
    let json = summary_json(&synthetic_table(&spec), TokenCountSource::Client);
    assert_eq!(json["output_sequence_lengths_server"]["partial"], true);
    assert_eq!(json["input_sequence_lengths_server"]["partial"], true);
    assert_eq!(json["tpot_server"]["partial"], true);
    assert!(json["tps_server"].is_null());
    assert!(json["tps"].is_number());
    assert_eq!(json["n_samples_missing_usage"], 20);
    assert!(json["output_sequence_lengths"].get("partial").is_none());

    let json = summary_json(&strip_usage(&full), TokenCountSource::Client);
    for key in ["tpot_server", "output_sequence_lengths_server", "input_sequence_lengths_server"] {
        assert!(json[key].is_null(), "{key}");
    }
}

#[test]
fn report_txt_adds_other_basis_after_reference_rows() {
    let spec = FixtureSpec { server_osl_deficit: 1, ..FixtureSpec::default() };
    let table = synthetic_table(&spec);
    let snap = snapshot(&table, TokenCountSource::Client);
    let info = info(TokenCountSource::Client);
    let text = report_txt(&result_summary(&snap, &info), &info);
    let tps = text.find("\nTPS: ").unwrap();
    let other = text.find("\nOther token basis (server):\n").unwrap();
    let breakdown = text.find("------------------- Latency Breakdowns").unwrap();
    assert!(tps < other && other < breakdown);
    assert!(text.contains(
        "  OSL paired (client - server): mean 1.00 tokens/sample, ratio 1.0144 over 200 samples\n"
    ) || text.contains("  OSL paired (client - server): mean 1.00 tokens/sample, ratio "));
    let sections = [
        "\nTTFT:\n",
        "\nTPOT:\n",
        "\nLatency:\n",
        "\nInput sequence lengths:\n",
        "\nOutput sequence lengths:\n",
        "\nTPOT (server):\n",
        "\nInput sequence lengths (server):\n",
        "\nOutput sequence lengths (server):\n",
        "\n----------------- End of Report",
    ];
    let positions: Vec<usize> = sections.iter().map(|s| text.find(s).expect(s)).collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");

    let server = info_with(TokenCountSource::Server);
    let snap = snapshot(&table, TokenCountSource::Server);
    let text = report_txt(&result_summary(&snap, &server), &server);
    assert!(text
        .contains("\nToken count source: server\nOther token basis (client):\n  TPS (client): "));
    assert!(text.contains("\nOutput sequence lengths (client):\n"));
}

fn info_with(primary: TokenCountSource) -> RunInfo {
    info(primary)
}

#[test]
fn completeness_follows_the_primary_basis() {
    let spec = FixtureSpec { missing_usage_every: 10, ..FixtureSpec::default() };
    let table = synthetic_table(&spec);
    let client = result_summary(
        &snapshot(&table, TokenCountSource::Client),
        &info(TokenCountSource::Client),
    );
    assert_eq!(is_complete(&client, TokenCountSource::Client), Ok(()));
    let server = result_summary(
        &snapshot(&table, TokenCountSource::Server),
        &info(TokenCountSource::Server),
    );
    let err = is_complete(&server, TokenCountSource::Server).unwrap_err();
    assert!(err.contains("20 of 200"), "{err}");

    let stripped = strip_usage(&table);
    let none = result_summary(
        &snapshot(&stripped, TokenCountSource::Server),
        &info(TokenCountSource::Server),
    );
    let err = is_complete(&none, TokenCountSource::Server).unwrap_err();
    assert!(err.contains("none of the 200"), "{err}");

    let failed = FixtureSpec { fail_every: 1, ..FixtureSpec::default() };
    let all_failed = synthetic_table(&failed);
    let summary = result_summary(
        &snapshot(&all_failed, TokenCountSource::Client),
        &info(TokenCountSource::Client),
    );
    let err = is_complete(&summary, TokenCountSource::Client).unwrap_err();
    assert_eq!(err, "nothing was measured: all 200 samples failed");

    let mut interrupted = info(TokenCountSource::Client);
    interrupted.interrupted = true;
    let summary = result_summary(&snapshot(&table, TokenCountSource::Client), &interrupted);
    assert_eq!(summary.state, "interrupted");
    assert!(!summary.complete);
    assert!(report_txt(&summary, &interrupted).contains("WARNING: run was interrupted"));

    let empty = SampleTable::with_capacity(0);
    let summary = result_summary(
        &snapshot(&empty, TokenCountSource::Client),
        &info(TokenCountSource::Client),
    );
    assert_eq!(
        is_complete(&summary, TokenCountSource::Client).unwrap_err(),
        "nothing was measured: no sample completed"
    );
    let text = report_txt(&summary, &info(TokenCountSource::Client));
    assert!(text.contains("Duration: N/A\nQPS: N/A\nTPS: N/A\n"), "{text}");
}

#[test]
fn write_report_files_writes_all_three_atomically() {
    let dir = std::env::temp_dir().join(format!("llm-loadgen-report-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let table = synthetic_table(&FixtureSpec::default());
    let snap = snapshot(&table, TokenCountSource::Client);
    let info = info(TokenCountSource::Client);
    let summary = result_summary(&snap, &info);
    std::fs::create_dir_all(&dir).unwrap();
    let open = crate::OpenDir::open(&dir).unwrap();
    let unwritten = write_report_files(&open, &snap, &summary, &info);
    assert!(unwritten.is_empty(), "{unwritten:?}");
    let written = std::fs::read(dir.join("performance/result_summary.json")).unwrap();
    assert_eq!(written, to_python_json(&summary).unwrap());
    assert!(std::fs::read_to_string(dir.join("report.txt"))
        .unwrap()
        .ends_with("End of Report -----------------\n"));
    assert!(dir.join("metrics/final_snapshot.json").is_file());
    // Rewriting replaces the file and leaves no temp file behind.
    write_atomic(&dir.join("report.txt"), b"second").unwrap();
    assert_eq!(std::fs::read(dir.join("report.txt")).unwrap(), b"second");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp."))
        .collect();
    assert!(leftovers.is_empty());
    let console = console_summary(&summary, &info, &dir);
    assert!(console.contains("Samples: 200 issued, 200 completed, 0 failed\n"), "{console}");
    assert!(console.contains("Token basis: client (TPS (server): "), "{console}");
    assert!(console.contains(&format!("Report: {}\n", dir.display())));
    // The reference's own scrapers read `Duration:\s+([\d.]+)\s*seconds` and `QPS:\s+([\d.]+)`.
    let duration = console.lines().find(|l| l.starts_with("Duration: ")).unwrap();
    let seconds = duration.strip_prefix("Duration: ").and_then(|d| d.strip_suffix(" seconds"));
    assert!(seconds.is_some_and(|s| s.parse::<f64>().is_ok()), "{duration}");
    let qps = console.lines().find(|l| l.starts_with("QPS: ")).unwrap();
    assert!(qps["QPS: ".len()..].parse::<f64>().is_ok(), "{qps}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_atomic_write_replaces_a_planted_link_and_never_writes_through_it() {
    let dir = std::env::temp_dir().join(format!("llm-loadgen-link-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("elsewhere")).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("report.txt")).unwrap();
    write_atomic(&dir.join("report.txt"), b"report").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(!dir.join("report.txt").is_symlink(), "a real file took the link's place");
    assert_eq!(std::fs::read_to_string(dir.join("report.txt")).unwrap(), "report");
    // A subdirectory that is a link is refused, and nothing lands where it points.
    std::os::unix::fs::symlink(dir.join("elsewhere"), dir.join("performance")).unwrap();
    let open = crate::OpenDir::open(&dir).unwrap();
    let err = open.write_atomic("performance/result_summary.json", b"{}").unwrap_err();
    assert!(err.to_string().contains("performance is a symbolic link"), "{err}");
    assert_eq!(std::fs::read_dir(dir.join("elsewhere")).unwrap().count(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn write_atomic_reports_a_missing_folder() {
    let path = std::env::temp_dir()
        .join(format!("llm-loadgen-missing-{}", std::process::id()))
        .join("report.txt");
    let err = write_atomic(&path, b"x").unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
}

/// Checks our writers against a report directory the reference tool wrote (its files may not be
/// committed, so this check is opt-in): `LLM_LOADGEN_REFERENCE_OBSERVED=DIR cargo test -p
/// loadgen-report --features reference-check reference_observed`. Without the variable it fails.
#[cfg(feature = "reference-check")]
#[test]
fn reference_observed_run_rebuilds_byte_for_byte() {
    let dir = std::env::var_os("LLM_LOADGEN_REFERENCE_OBSERVED")
        .map(PathBuf::from)
        .expect("set LLM_LOADGEN_REFERENCE_OBSERVED to a report directory the reference wrote");
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
    let doc: serde_json::Value =
        serde_json::from_str(&read("metrics/final_snapshot.json")).unwrap();
    let snap = loadgen_coordinator::metrics::snapshot::snapshot_from_json(&doc, false).unwrap();
    // Our snapshot is the reference's document plus `token_count_source`.
    let ours = String::from_utf8(to_python_json(&snap).unwrap()).unwrap();
    let added = ",\n  \"token_count_source\": \"client\"\n}";
    assert_eq!(ours.replace(added, "\n}"), read("metrics/final_snapshot.json"));
    // The summary is the reference's keys, byte for byte, then the additions.
    let info = info(TokenCountSource::Client);
    let summary = result_summary(&snap, &info);
    let ours = String::from_utf8(to_python_json(&summary).unwrap()).unwrap();
    let cut = ours.find(",\n  \"token_count_source\"").unwrap();
    assert_eq!(format!("{}\n}}", &ours[..cut]), read("performance/result_summary.json"));
    // report.txt is the reference's, plus the token-basis rows before the breakdowns.
    let text = report_txt(&summary, &info);
    let start = text.find("Token count source: ").unwrap();
    let end = text.find("\n------------------- Latency Breakdowns").unwrap();
    let failures = text.find("----------------- Failures").unwrap();
    let report_end = text.find("----------------- End of Report").unwrap();
    let without = format!("{}{}{}", &text[..start], &text[end..failures], &text[report_end..]);
    assert_eq!(without, read("report.txt"));
}

#[test]
fn poisson_runs_use_the_legacy_window_and_print_their_settings() {
    let table = synthetic_table(&FixtureSpec::default());
    let opts = MetricsOptions {
        streaming: true,
        early_stopping: false,
        primary: TokenCountSource::Client,
        legacy_loadgen_qps: true,
        has_tokenizer: true,
    };
    let snap = final_snapshot(&table, &run_counters(&table), &opts, RunState::Complete);
    let mut info = info(TokenCountSource::Client);
    info.load_pattern = LoadPatternInfo {
        kind: "poisson".into(),
        target_qps: Some(100.0),
        target_concurrency: None,
        use_legacy_loadgen_qps_metrics: Some(true),
    };
    let summary = result_summary(&snap, &info);
    let window = u64::try_from(snap.counter("legacy_loadgen_window_duration_ns")).unwrap();
    assert!(window > 0);
    assert_eq!(summary.legacy_loadgen_window_duration_ns, Some(window));
    assert_eq!(summary.qps, Some(199.0 / (window as f64 / 1e9)));
    let osl_total = snap.series("osl").unwrap().total.as_f64();
    assert_eq!(summary.primary.tps, Some(osl_total / (window as f64 / 1e9)));
    let text = report_txt(&summary, &info);
    assert!(text.contains(
        "  load_pattern: type=poisson, target_qps=100.0, target_concurrency=None, \
         use_legacy_loadgen_qps_metrics=True\n"
    ));
    // Duration stays the native tracked window.
    let tracked = snap.counter("tracked_duration_ns") as f64 / 1e9;
    assert!(text.contains(&format!("Duration: {tracked:.2} seconds\n")));
    assert!(!text.contains("Early-stopping"));
    let json: serde_json::Value =
        serde_json::from_slice(&to_python_json(&summary).unwrap()).unwrap();
    assert_eq!(json["run_config"]["load_pattern"]["target_qps"], 100.0);
    assert_eq!(json["run_config"]["load_pattern"]["use_legacy_loadgen_qps_metrics"], true);
    assert!(json["ttft"].get("early_stopping_percentiles").is_none());
    // A config that turns the legacy metrics off wins over the snapshot's option.
    info.load_pattern.use_legacy_loadgen_qps_metrics = Some(false);
    let native = result_summary(&snap, &info);
    assert_eq!(native.legacy_loadgen_window_duration_ns, None);
    assert_eq!(native.qps, Some(200.0 / tracked));
}

#[test]
fn server_primary_summary_swaps_names_not_numbers() {
    let spec = FixtureSpec { server_osl_deficit: 4, ..FixtureSpec::default() };
    let table = synthetic_table(&spec);
    let client = summary_json(&table, TokenCountSource::Client);
    let server = summary_json(&table, TokenCountSource::Server);
    let swaps = [
        ("tpot", "tpot_client"),
        ("output_sequence_lengths", "output_sequence_lengths_client"),
        ("input_sequence_lengths", "input_sequence_lengths_client"),
        ("tps", "tps_client"),
    ];
    for (base, client_key) in swaps {
        let server_key = format!("{base}_server");
        // The primary carries early-stopping estimates; compare the rest.
        let strip = |v: &serde_json::Value| {
            let mut v = v.clone();
            if let Some(map) = v.as_object_mut() {
                map.remove("early_stopping_percentiles");
            }
            v
        };
        assert_eq!(strip(&client[base]), strip(&server[client_key]), "{base}");
        assert_eq!(strip(&client[server_key.as_str()]), strip(&server[base]), "{base}");
    }
    for key in ["ttft", "latency", "qps", "osl_paired", "n_samples_missing_usage"] {
        assert_eq!(client[key], server[key], "{key}");
    }
    assert_eq!(server["osl_paired"]["mean"], 4.0);
}

#[test]
fn failure_kinds_are_in_the_summary_and_report() {
    let table = synthetic_table(&FixtureSpec { fail_every: 4, ..FixtureSpec::default() });
    let snap = snapshot(&table, TokenCountSource::Client);
    let mut info = info(TokenCountSource::Client);
    info.failures = vec![
        FailureKindCount { kind: "timeout".into(), count: 30, first_message: "no reply".into() },
        FailureKindCount {
            kind: "http_status".into(),
            count: 20,
            first_message: "HTTP 503:\n busy".into(),
        },
    ];
    info.requests_resent = 7;
    info.events_has_errors = false;
    let summary = result_summary(&snap, &info);
    let json: serde_json::Value =
        serde_json::from_slice(&to_python_json(&summary).unwrap()).unwrap();
    assert_eq!(json["n_requests_resent"], 7);
    assert_eq!(json["failure_kinds"]["timeout"]["count"], 30);
    assert_eq!(json["failure_kinds"]["http_status"]["first_message"], "HTTP 503:\n busy");
    let text = String::from_utf8(to_python_json(&summary).unwrap()).unwrap();
    assert!(text.find("\"timeout\"").unwrap() < text.find("\"http_status\"").unwrap());
    let report = report_txt(&summary, &info);
    assert!(report.contains("Requests resent: 7\n"), "{report}");
    assert!(report.contains("  timeout: 30, first: no reply\n"), "{report}");
    assert!(report.contains("  http_status: 20, first: HTTP 503: busy\n"), "{report}");
    let console = console_summary(&summary, &info, Path::new("/tmp/r"));
    let failed = summary.n_samples_failed;
    assert!(console.contains("samples failed (timeout 30, http_status 20)\n"), "{console}");
    assert!(failed > 0 && !console.contains("events.jsonl"), "no error lines: {console}");
    assert!(console.contains("  20 failed (http_status), first: HTTP 503: busy\n"), "{console}");
    info.events_has_errors = true;
    let console = console_summary(&summary, &info, Path::new("/tmp/r"));
    assert!(console.contains("see events.jsonl for the errors"), "{console}");
}

/// The report says when the client basis was counted: `client_token_counting` in the summary,
/// a line under the other basis in report.txt; nothing of it without a tokenizer.
#[test]
fn the_report_says_whether_client_tokens_were_counted_live_or_after_the_run() {
    let table = synthetic_table(&FixtureSpec::default());
    let snap = snapshot(&table, TokenCountSource::Client);
    let cases = [
        (None, serde_json::Value::Null, None),
        (Some(ClientTokenCounting::AfterRun), "after_run".into(), Some("counted after the last")),
        (
            Some(ClientTokenCounting::Live { threads: 3 }),
            "live".into(),
            Some("counted live by 3 tokenizer"),
        ),
    ];
    for (counting, key, line) in cases {
        let mut run = info(TokenCountSource::Client);
        run.client_token_counting = counting;
        let summary = result_summary(&snap, &run);
        let json: serde_json::Value =
            serde_json::from_slice(&to_python_json(&summary).unwrap()).unwrap();
        assert_eq!(json["client_token_counting"], key, "{counting:?}");
        let text = report_txt(&summary, &run);
        match line {
            Some(line) => {
                assert!(text.contains(&format!("  Client token counts: {line}")), "{text}")
            }
            None => assert!(!text.contains("Client token counts"), "{text}"),
        }
    }
}

#[test]
fn per_endpoint_counts_are_in_the_summary_and_report_after_the_reference() {
    use loadgen_coordinator::metrics::endpoint_stats;
    let table = synthetic_table(&FixtureSpec { fail_every: 5, ..FixtureSpec::default() });
    let snap = snapshot(&table, TokenCountSource::Client);
    // One endpoint: its entry repeats the totals, and report.txt has no section for it.
    let mut info = info(TokenCountSource::Client);
    info.endpoints = one_endpoint(&table);
    let summary = result_summary(&snap, &info);
    let json: serde_json::Value =
        serde_json::from_slice(&to_python_json(&summary).unwrap()).unwrap();
    let ep = &json["endpoints"][0];
    assert_eq!(ep["url"], "http://127.0.0.1:8000");
    assert_eq!(ep["n_samples"], json["n_samples_completed"]);
    assert_eq!(ep["n_samples_failed"], json["n_samples_failed"]);
    assert_eq!(ep["failures"]["http_status"], json["n_samples_failed"]);
    let mut latency = json["latency"].clone();
    latency.as_object_mut().unwrap().remove("early_stopping_percentiles");
    assert_eq!(ep["latency"], latency, "the same exact values, the same block, no estimates");
    assert!(!report_txt(&summary, &info).contains("Endpoints"));
    // Two endpoints: rows 0, 2, 4, ... to the first, the odd ones to the second.
    let mut split = SampleTable::with_capacity(table.len());
    for i in 0..table.len() {
        split.push(&SampleRow { endpoint: (i % 2) as u8, ..table.row(i) });
    }
    let urls = ["http://127.0.0.1:8000", "http://127.0.0.1:8001/team"];
    info.endpoints = endpoint_stats(&split, 2)
        .into_iter()
        .zip(urls)
        .map(|(stat, url)| EndpointInfo { url: url.into(), stat })
        .collect();
    let summary = result_summary(&snapshot(&split, TokenCountSource::Client), &info);
    let json: serde_json::Value =
        serde_json::from_slice(&to_python_json(&summary).unwrap()).unwrap();
    let n = |e: usize, key: &str| json["endpoints"][e][key].as_u64().unwrap();
    assert_eq!(n(0, "n_samples") + n(1, "n_samples"), json["n_samples_completed"]);
    assert_eq!(n(0, "n_samples_failed") + n(1, "n_samples_failed"), json["n_samples_failed"]);
    assert_eq!(json["endpoints"][1]["url"], urls[1]);
    let report = report_txt(&summary, &info);
    let section = report.find("----------------- Endpoints -----------------").unwrap();
    assert!(section > report.find("Failure kinds").unwrap(), "after the reference's sections");
    assert!(section < report.find("End of Report").unwrap());
    let line =
        format!("{}: {} samples, {} failed", urls[1], n(1, "n_samples"), n(1, "n_samples_failed"));
    assert!(report.contains(&line), "{line} in {report}");
    assert!(report.contains("latency p50/p99/mean: "), "{report}");
    let console = console_summary(&summary, &info, Path::new("/tmp/r"));
    assert!(console.contains(&line), "{console}");
}

/// A summary of the fixture counted without a client tokenizer, streamed or not.
fn summary_without_tokenizer(streaming: bool) -> (ResultSummary, RunInfo) {
    let table = synthetic_table(&FixtureSpec::default());
    let opts = MetricsOptions {
        streaming,
        early_stopping: true,
        primary: TokenCountSource::Client,
        legacy_loadgen_qps: false,
        has_tokenizer: false,
    };
    let snap = final_snapshot(&table, &run_counters(&table), &opts, RunState::Complete);
    let info = info(TokenCountSource::Client);
    (result_summary(&snap, &info), info)
}

#[test]
fn without_a_tokenizer_the_headline_says_its_basis_is_empty_and_shows_the_server_figures() {
    let (summary, info) = summary_without_tokenizer(true);
    let console = console_summary(&summary, &info, Path::new("/tmp/r"));
    // The reference's `TPS: N/A`, then why, and where the figure is.
    let tps = "\nTPS: N/A (client basis: the run had no client tokenizer; TPS (server) ";
    assert!(console.contains(tps), "{console}");
    assert!(console.contains(" is on the Token basis line below)\n"), "{console}");
    let line = console.lines().find(|l| l.starts_with("Token basis: ")).unwrap();
    let want = "Token basis: client has no token counts (the run had no client tokenizer), so TPS \
                above is N/A; the server basis has them: TPS (server): ";
    assert!(line.starts_with(want), "{line}");
    assert!(line.contains(", TPOT p50/p99 (server): ") && !line.contains("N/A /"), "{line}");
    assert!(
        line.ends_with(
            "--tokenizer PATH counts the client basis; --token-count-source server \
                            makes server the headline"
        ),
        "{line}"
    );
    // report.txt: each row under the heading it describes, and why the headline is empty.
    let text = report_txt(&summary, &info);
    assert!(text.contains("\nTPS: N/A\n"), "{text}");
    let rows = "\nToken count source: client\n  The client basis has no token counts \
                (the run had no client tokenizer), so its TPS and token sections are N/A; the \
                server basis below has them.\nOther token basis (server):\n  TPS (server): ";
    assert!(text.contains(rows), "{text}");
    // With a tokenizer the headline has counts: no such line.
    let table = synthetic_table(&FixtureSpec::default());
    let counted = result_summary(&snapshot(&table, TokenCountSource::Client), &info);
    assert!(!report_txt(&counted, &info).contains("has no token counts"));
    assert!(
        console_summary(&counted, &info, Path::new("/tmp/r")).contains("Token basis: client (TPS")
    );
}

#[test]
fn a_run_that_did_not_stream_says_why_it_has_no_ttft() {
    let (summary, info) = summary_without_tokenizer(false);
    let console = console_summary(&summary, &info, Path::new("/tmp/r"));
    let want = "TTFT p50/p99: N/A (the run did not stream: offline runs stream only with \
                --streaming on, and TTFT needs a stream), latency p50/p99: ";
    assert!(console.contains(want), "{console}");
    let line = console.lines().find(|l| l.starts_with("Token basis: ")).unwrap();
    assert!(!line.contains("TPOT"), "no TPOT without streaming: {line}");
}

/// A summary with every optional part: an interrupted Poisson run over two endpoints, merged
/// from shards, with failures, an issue lag, a pool and counts taken after the run.
fn full_summary() -> ResultSummary {
    use loadgen_coordinator::metrics::endpoint_stats;
    let table = synthetic_table(&FixtureSpec { fail_every: 5, ..FixtureSpec::default() });
    let mut split = SampleTable::with_capacity(table.len());
    for i in 0..table.len() {
        split.push(&SampleRow { endpoint: (i % 2) as u8, ..table.row(i) });
    }
    let mut info = info(TokenCountSource::Server);
    info.load_pattern = LoadPatternInfo {
        kind: "poisson".into(),
        target_qps: Some(12.5),
        target_concurrency: None,
        use_legacy_loadgen_qps_metrics: Some(true),
    };
    info.interrupted = true;
    info.issue_lag = Some(IssueLag {
        n: 100,
        p50_ns: 1_000,
        p99_ns: 2_500_000,
        max_ns: 3_000_001,
        target_qps: 12.5,
        achieved_qps: 12.25,
    });
    info.client_wait =
        Some(ClientWaitInfo { max_connections: 64, pool_given: true, peak_in_flight: Some(9) });
    info.failures = vec![FailureKindCount {
        kind: "http_status".into(),
        count: 4,
        first_message: "HTTP 500".into(),
    }];
    info.requests_resent = 3;
    info.client_token_counting = Some(ClientTokenCounting::AfterRun);
    let urls = ["http://127.0.0.1:8000", "http://127.0.0.1:8001/team"];
    info.endpoints = endpoint_stats(&split, 2)
        .into_iter()
        .zip(urls)
        .map(|(stat, url)| EndpointInfo { url: url.into(), stat })
        .collect();
    info.shards = vec![ShardInfo {
        index: 1,
        report_dir: "/tmp/shard1".into(),
        n_samples_issued: 10,
        n_samples_completed: 9,
        n_samples_failed: 1,
        n_samples_abandoned: 1,
        failure_kinds: FailureCounts(vec![("timeout".into(), 1), ("http_status".into(), 2)]),
        start_offset_ns: Some(-5),
        start_skew_ns: 7,
        clock_shift_ns: 11,
        anchor_uncertainty_ns: 13,
        issue_lag_p99_ns: Some(17),
        issue_lag_max_ns: None,
    }];
    info.agentic = Some(crate::agentic::tests::sample_agentic());
    result_summary(&snapshot(&split, TokenCountSource::Server), &info)
}

#[test]
fn a_summary_read_back_holds_what_it_wrote_and_writes_the_same_bytes() {
    let summary = full_summary();
    let json = to_python_json(&summary).unwrap();
    let read: ResultSummary = serde_json::from_slice(&json).unwrap();
    assert_eq!(String::from_utf8(to_python_json(&read).unwrap()), String::from_utf8(json));
    assert!(!read.reference_only);
    // Every series comes back whole, its count from its histogram.
    assert_eq!(read.ttft, summary.ttft);
    assert_eq!(read.latency, summary.latency);
    assert_eq!(read.primary, summary.primary);
    assert_eq!(read.other, summary.other);
    assert_eq!(read.chunks, summary.chunks);
    assert_eq!(read.client_wait, summary.client_wait);
    assert_eq!(read.endpoints, summary.endpoints);
    assert_eq!(read.endpoints[1].failures, summary.endpoints[1].failures);
    assert_eq!(read.issue_lag, summary.issue_lag);
    assert_eq!(read.failure_kinds, summary.failure_kinds);
    assert_eq!(read.shards, summary.shards);
    assert_eq!(read.agentic, summary.agentic);
    assert!(read.agentic.is_some());
    assert_eq!(read.osl_paired, summary.osl_paired);
    assert_eq!(read.load_pattern, summary.load_pattern);
    assert_eq!(read.warmup, summary.warmup);
    assert_eq!(read.finish_reason_counts, summary.finish_reason_counts);
    assert_eq!(read.client_token_counting, Some(ClientTokenCounting::AfterRun));
    assert_eq!((read.state, read.complete), ("interrupted", false));
    assert_eq!(read.usage.missing_total(), summary.usage.missing_total());
    assert_eq!(read.usage.missing_empty_output, summary.usage.missing_empty_output);
    // What the file does not hold reads back empty.
    assert_eq!(read.incomplete_reason, None);
    assert_eq!(read.usage.usable, 0);
}

#[test]
fn a_summary_the_reference_wrote_reads_with_its_keys_only() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/assets/compare/reference/performance/result_summary.json");
    let read: ResultSummary =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert!(read.reference_only, "no token_count_source: the reference's");
    assert_eq!((read.n_samples_completed, read.duration_ns), (200, Some(82_269_793)));
    assert_eq!(read.primary.basis, TokenCountSource::Client);
    let ttft = read.ttft.as_ref().expect("the reference's ttft block");
    assert_eq!(ttft.total, loadgen_coordinator::metrics::Num::Int(4_701_363_049));
    assert_eq!(ttft.median, 24_518_350.0);
    assert!(read.primary.tpot.is_some() && read.other.tpot.is_none());
    assert_eq!(read.load_pattern.kind, "max_throughput");
    assert!(read.failure_kinds.is_empty() && read.endpoints.is_empty());
}
