//! Chunk timing end to end: each streamed sample's chunk count, reads and gaps in events.jsonl,
//! the `chunk_delta_ns` series and the chunk blocks recomputed from them, and the console's note
//! when a server sends whole streams at once (the echo stub answers in one write).

use std::path::Path;

use crate::support::{report_dir, stub, summary, Run};
use loadgen_stubs::StubKind;

/// 200 samples offline against `url`, streamed or not: one worker, 8 connections.
fn bench(url: &str, dir: &Path, streaming: bool) -> Run {
    let run = Run::offline(url, dir).model("test-model").dataset().samples(200);
    run.workers(1).connections(8).tokenizer().streaming(streaming)
}

fn events(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl is written");
    text.lines().map(|l| serde_json::from_str(l).expect("every line parses")).collect()
}

fn snapshot_series(dir: &Path, name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("metrics/final_snapshot.json")).unwrap();
    let snap: serde_json::Value = serde_json::from_str(&text).unwrap();
    let metrics = snap["metrics"].as_array().unwrap();
    metrics.iter().find(|m| m["name"] == name).cloned().unwrap_or_else(|| panic!("{name}"))
}

#[test]
fn a_bursting_server_is_named_and_every_gap_recomputes_from_the_event_log() {
    // The echo stub streams 10 characters a chunk and writes each whole response at once.
    let server = stub(StubKind::Echo, |c| c.stream_interval = 10);
    let dir = report_dir("chunks-burst");
    let out = bench(&server.url(), &dir, true).run();
    assert_eq!(out.status.code(), Some(0));
    let mut n_chunks_total = 0u64;
    let mut gaps = Vec::new();
    let mut streams = 0u64;
    for line in events(&dir).iter().filter(|e| e["event_type"] == "sample.complete") {
        let n = line["n_chunks"].as_u64().expect("a streamed sample has n_chunks");
        let sample_gaps = line["chunk_delta_ns"].as_array().expect("and its gaps");
        assert_eq!(sample_gaps.len() as u64, n - 1, "{line}");
        if n >= 2 {
            streams += 1;
            assert_eq!(line["chunk_reads"], 1, "one write, one read: {line}");
        }
        n_chunks_total += n;
        gaps.extend(sample_gaps.iter().map(|g| g.as_u64().unwrap()));
    }
    assert!(streams > 0, "the dataset's prompts are longer than one chunk");
    let series = snapshot_series(&dir, "chunk_delta_ns");
    assert_eq!(series["count"].as_u64(), Some(gaps.len() as u64));
    assert_eq!(series["total"].as_u64(), Some(gaps.iter().sum::<u64>()));
    assert_eq!(series["max"].as_u64(), gaps.iter().max().copied());
    let per_sample = snapshot_series(&dir, "chunks_per_sample");
    assert_eq!(per_sample["total"].as_u64(), Some(n_chunks_total));
    let s = summary(&dir);
    assert_eq!(s["n_streams_multi_chunk"].as_u64(), Some(streams));
    assert_eq!(s["n_streams_in_one_read"].as_u64(), Some(streams));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let note = format!("NOTE: {streams} of {streams} streamed responses arrived in one read");
    assert!(stdout.contains(&note), "stdout:\n{stdout}");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("ITL (gap between chunks):"), "{report}");
    assert!(report.contains(&format!("Streams in one read: {streams} of {streams} streamed")));
}

#[test]
fn a_run_that_does_not_stream_has_no_chunk_timing() {
    let server = stub(StubKind::Echo, |_| {});
    let dir = report_dir("chunks-off");
    let out = bench(&server.url(), &dir, false).run();
    assert_eq!(out.status.code(), Some(0));
    let completes: Vec<_> =
        events(&dir).into_iter().filter(|e| e["event_type"] == "sample.complete").collect();
    assert_eq!(completes.len(), 200);
    assert!(completes.iter().all(|e| e.get("n_chunks").is_none()), "{:?}", completes[0]);
    let s = summary(&dir);
    for key in ["itl", "chunks_per_sample", "tokens_per_chunk", "n_streams_in_one_read"] {
        assert!(s[key].is_null(), "{key}: {}", s[key]);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("arrived in one read"), "{stdout}");
}
