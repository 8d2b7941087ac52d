//! The reference's flag spellings through the binary: a bad value exits 2 with our message
//! naming the flag (clap accepts the spelling first), and a no-effect one runs with its
//! one-line note. `cli::spelling_tests` maps each spelling onto its YAML key.

use crate::support::{bin, dataset, report_dir, run, stub};
use loadgen_stubs::StubKind;

#[test]
fn profiling_spellings_refuse_a_bad_value_naming_the_flag() {
    let cases: [(&[&str], &str); 4] = [
        (&["--profile", "sglang"], "--profile, --engine) \"sglang\""),
        (&["--engine", "trtllm"], "--profile, --engine) \"trtllm\""),
        (&["--profile-urls", "127.0.0.1:9"], "--profile-urls, --urls) \"127.0.0.1:9\""),
        (&["--urls", "127.0.0.1:9"], "has no scheme"),
    ];
    for (flags, named) in cases {
        let out = bin().args(["benchmark", "offline"]).args(flags).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(named), "{flags:?}: {stderr}");
        assert_eq!(stderr.matches("input error:").count(), 1, "{stderr}");
        assert!(!stderr.contains("unexpected argument"), "{flags:?}: clap refused it: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn validate_yaml_takes_the_engine_the_reference_registers_and_refuses_another() {
    let dir = report_dir("spelling-yaml");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("profile.yaml");
    for (engine, code) in [("vllm", 0), ("sglang", 2)] {
        let text = format!("type: offline\nsettings:\n  profiling:\n    engine: {engine}\n");
        std::fs::write(&path, text).unwrap();
        let out = bin().args(["validate-yaml", "-c"]).arg(&path).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{engine}: {stderr}");
        assert!(!stderr.contains("refuses this"), "{engine}: profiling runs here: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_no_effect_spelling_runs_with_one_note() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("spelling-note");
    let url = server.url();
    let report = dir.display().to_string();
    let out = run([
        "benchmark",
        "offline",
        "--endpoints",
        &url,
        "--model",
        "test-model",
        "--dataset",
        &dataset(),
        "--num-samples",
        "20",
        "--workers",
        "1",
        "--report-dir",
        &report,
        "--client.worker-gc-mode",
        "disabled",
        "--client.transport.type",
        "zmq",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let notes: Vec<&str> = stderr.lines().filter(|l| l.contains("has no effect here")).collect();
    assert_eq!(
        notes,
        ["note: settings.client.worker_gc_mode (--client.worker-gc-mode) has no effect here: \
          workers have no garbage collector"],
        "the default transport gives no note"
    );
    assert_eq!(server.requests_total(), 20, "the run ran");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--warmup-drain-timeout` (settings.drain.warmup_timeout_s) bounds the warm-up drain on its
/// own: every answer takes 3 s, the warm-up drain gives up after 0.2 s, so the performance
/// samples are issued while the warm-up one is still out and the run takes one delay, not
/// two (the 30 s performance drain timeout would have waited for the warm-up answer).
#[test]
fn the_warmup_drain_waits_its_own_timeout() {
    use loadgen_stubs::DelayFault;
    let server = stub(StubKind::MaxThroughput, |c| {
        c.faults.delay = Some(DelayFault { delay_ms: 3_000, every: 1 })
    });
    let dir = report_dir("spelling-warmup-drain");
    let (url, report) = (server.url(), dir.display().to_string());
    let started = std::time::Instant::now();
    let out = run([
        "benchmark",
        "offline",
        "--endpoints",
        &url,
        "--model",
        "test-model",
        "--dataset",
        &dataset(),
        "--num-samples",
        "2",
        "--workers",
        "1",
        "--streaming",
        "off",
        "--report-dir",
        &report,
        "--warmup",
        "--warmup-requests",
        "1",
        "--warmup-drain",
        "--drain.warmup-timeout-s",
        "0.2",
        "--performance-drain-timeout",
        "30",
    ]);
    let elapsed = started.elapsed();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(server.requests_total(), 3, "one warm-up and two tracked samples");
    assert!(elapsed.as_secs_f64() >= 3.0, "the answers took their delay: {elapsed:?}");
    assert!(elapsed.as_secs_f64() < 5.5, "the warm-up drain waited past 0.2 s: {elapsed:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
