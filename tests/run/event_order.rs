//! events.jsonl in time order, as the reference writes it: a sample's `sample.issued` line when
//! it was issued, `sample.recv_first` when its first chunk came, `sample.complete` when it
//! ended. Read in line order, the log shows how many samples were in flight.

use std::path::Path;

use crate::support::{report_dir, stub, Ran, Run};
use loadgen_stubs::StubKind;

/// (event type, timestamp) of every line, in file order.
fn lines(dir: &Path) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl is written");
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("every line parses");
            let kind = v["event_type"].as_str().unwrap().to_string();
            (kind, v["timestamp_ns"].as_u64().unwrap())
        })
        .collect()
}

/// The most samples issued and not yet ended, reading the lines in order.
fn peak_in_flight(lines: &[(String, u64)]) -> i64 {
    let (mut now, mut peak) = (0i64, 0i64);
    for (kind, _) in lines {
        match kind.as_str() {
            "sample.issued" => now += 1,
            "sample.complete" | "error.loadgen" => now -= 1,
            _ => {}
        }
        peak = peak.max(now);
    }
    peak
}

fn assert_time_ordered(lines: &[(String, u64)]) {
    for pair in lines.windows(2) {
        assert!(pair[0].1 <= pair[1].1, "out of time order: {:?} then {:?}", pair[0], pair[1]);
    }
}

/// `samples` streamed samples against `url` by one worker, `mode` (`offline …` or `online
/// --load-pattern …`) after `benchmark`.
fn bench(url: &str, dir: &Path, samples: u64, mode: &[&str]) -> Ran {
    let run = Run::benchmark(mode, url, dir).model("m").dataset().samples(samples);
    run.workers(1).streaming(true).run()
}

/// A stub whose answers take `chunk_ms` to the first of 4 chunks and between them.
fn slow_stub(chunk_ms: f64) -> loadgen_stubs::StubServer {
    stub(StubKind::Variable, |c| {
        c.stream_interval = 4;
        c.variable.first_chunk_latency_s = chunk_ms / 1000.0;
        c.variable.first_chunk_spread = 0.0;
        c.variable.inter_token_latency_ms = chunk_ms / 4.0;
        c.variable.inter_token_spread = 0.0;
        c.variable.output_len_mean = 16.0;
        c.variable.output_len_spread = 0.0;
    })
}

#[test]
fn a_concurrency_8_run_shows_8_samples_in_flight_in_line_order() {
    // Answers of 4 chunks 100 ms apart take 400 ms, longer than the log's reorder window: the
    // issue and first-chunk lines are in order only because the worker tells them as they
    // happen, not with the sample's record.
    let server = slow_stub(100.0);
    let dir = report_dir("order-c8");
    let pattern = ["online", "--load-pattern", "concurrency", "--concurrency", "8"];
    let out = bench(&server.url(), &dir, 24, &pattern);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("out of time order"), "{stderr}");
    let lines = lines(&dir);
    assert_time_ordered(&lines);
    assert_eq!(peak_in_flight(&lines), 8, "the closed loop holds 8 samples");
    let first = lines.iter().position(|(k, _)| k == "sample.recv_first").unwrap();
    let complete = lines.iter().position(|(k, _)| k == "sample.complete").unwrap();
    assert!(first < complete, "a first chunk is logged before any sample completes");
}

#[test]
fn a_burst_shows_thousands_in_flight_in_line_order() {
    let server = slow_stub(5.0);
    let dir = report_dir("order-burst");
    // Issued = handed to a worker's issue ring: 1,024 connections give rings and queues of
    // 2,048 each, so all 4,000 samples are issued before the first answers come.
    let out = bench(&server.url(), &dir, 4000, &["offline", "--max-connections", "1024"]);
    assert_eq!(out.status.code(), Some(0));
    let lines = lines(&dir);
    assert_time_ordered(&lines);
    let peak = peak_in_flight(&lines);
    assert!(peak >= 3000, "a burst issues at once: {peak} in flight at the peak");
    let issued = lines.iter().filter(|(k, _)| k == "sample.issued").count();
    assert_eq!(issued, 4000);
}
