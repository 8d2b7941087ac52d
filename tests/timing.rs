//! Timing fidelity: measured TTFT and TPOT against a stub with known, fixed delays.
//!
//! These tests run one at a time (a lock) because they measure time: on a small machine, other
//! runs in parallel would measure the machine's contention, not the client.

mod common;

use std::sync::Mutex;

use common::{assets, report_dir, run};
use loadgen_stubs::{StubConfig, StubKind, StubServer};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn median_ms(summary: &serde_json::Value, key: &str) -> f64 {
    summary[key]["median"].as_f64().expect("a median") / 1e6
}

/// `tolerance` is the fraction a median may stray from the configured delay (at least 0.1 ms).
fn timing_fidelity(pattern: &[&str], samples: &str, name: &str, tolerance: f64) {
    let ttft_ms = 100.0;
    let per_token_ms = 2.0;
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut cfg = StubConfig::new(StubKind::Variable);
    {
        let c = &mut cfg;
        c.stream_interval = 1;
        c.variable.first_chunk_latency_s = ttft_ms / 1000.0;
        c.variable.first_chunk_spread = 0.0;
        c.variable.inter_token_latency_ms = per_token_ms;
        c.variable.inter_token_spread = 0.0;
        c.variable.output_len_mean = 20.0;
        c.variable.output_len_spread = 0.0;
    }
    let server = StubServer::start(cfg).expect("the stub starts");
    let dir = report_dir(name);
    let tokenizer = assets().join("tokenizers/char");
    let dataset =
        format!("{},parser.prompt=text_input", assets().join("datasets/dummy_1k.jsonl").display());
    let args: Vec<String> = [
        "benchmark",
        "online",
        "--endpoints",
        &server.url(),
        "--model",
        "test-model",
        "--dataset",
        &dataset,
        "--report-dir",
        dir.to_str().unwrap(),
        "--workers",
        "1",
        "--num-samples",
        samples,
        "--streaming",
        "on",
        "--tokenizer",
        tokenizer.to_str().unwrap(),
    ]
    .iter()
    .chain(pattern)
    .map(|s| s.to_string())
    .collect();
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0));
    let text = std::fs::read_to_string(dir.join("performance/result_summary.json")).unwrap();
    let s: serde_json::Value = serde_json::from_str(&text).unwrap();
    let close = |got: f64, want: f64| (got - want).abs() <= (want * tolerance).max(0.1);
    let ttft = median_ms(&s, "ttft");
    let tpot = median_ms(&s, "tpot");
    assert!(close(ttft, ttft_ms), "{name}: TTFT median {ttft:.3} ms, configured {ttft_ms} ms");
    assert!(
        close(tpot, per_token_ms),
        "{name}: TPOT median {tpot:.3} ms, configured {per_token_ms} ms"
    );
    // One token a chunk: the gaps between chunks are the per-token delay, 19 a sample.
    let itl = median_ms(&s, "itl");
    assert!(close(itl, per_token_ms), "{name}: ITL median {itl:.3} ms, configured {per_token_ms}");
    let n: u64 = samples.parse().unwrap();
    assert_eq!(s["chunks_per_sample"]["median"].as_f64(), Some(20.0), "{name}");
    assert_eq!(s["tokens_per_chunk"]["median"].as_f64(), Some(1.0), "{name}");
    assert_eq!(s["n_streams_multi_chunk"].as_u64(), Some(n), "{name}");
    assert_eq!(s["n_streams_in_one_read"].as_u64(), Some(0), "{name}: paced streams");
    let snap = std::fs::read_to_string(dir.join("metrics/final_snapshot.json")).unwrap();
    let snap: serde_json::Value = serde_json::from_str(&snap).unwrap();
    let gaps = snap["metrics"].as_array().unwrap().iter().find(|m| m["name"] == "chunk_delta_ns");
    assert_eq!(gaps.unwrap()["count"].as_u64(), Some(19 * n), "{name}: gaps in the snapshot");
}

#[test]
fn timing_fidelity_at_low_load() {
    timing_fidelity(
        &["--load-pattern", "concurrency", "--concurrency", "1"],
        "40",
        "fidelity-low",
        0.01,
    );
}

#[test]
fn timing_fidelity_at_high_load() {
    // About 28 streams in flight (200 QPS × 138 ms), arriving at random as real traffic does. A
    // closed loop of identical requests would instead finish and restart them in lockstep, and
    // the burst of 32 simultaneous first chunks queues on one core of the stub and one of the
    // client: real, but a measure of the burst, not of the client's clock.
    // The stub shares this machine's cores with the client, and at this load its 2,800 timer
    // wake-ups a second fire late by about a millisecond: TTFT medians of 100.5-101.1 ms before
    // and after the time-ordered event log (debug builds, a stub of its own, interleaved,
    // 2026-12-01), and up to 102.7 ms under the test runner, so 1% failed for the stub's
    // lateness, not the client's. 2.5% still fails a client that adds 2 ms of its own.
    timing_fidelity(
        &["--load-pattern", "poisson", "--target-qps", "200"],
        "600",
        "fidelity-high",
        0.025,
    );
}
