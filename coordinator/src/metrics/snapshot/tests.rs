//! Tests of the final snapshot under both token bases.

use super::*;
use crate::metrics::fixture::{run_counters, strip_usage, synthetic_table, FixtureSpec};
use crate::metrics::table::SampleRow;
use TokenCountSource::{Client, Server};

fn options(primary: TokenCountSource) -> MetricsOptions {
    MetricsOptions {
        streaming: true,
        early_stopping: true,
        primary,
        legacy_loadgen_qps: false,
        has_tokenizer: true,
    }
}

fn snapshot(table: &SampleTable, primary: TokenCountSource) -> Snapshot {
    final_snapshot(table, &run_counters(table), &options(primary), RunState::Complete)
}

fn names(snap: &Snapshot) -> Vec<&str> {
    snap.series.iter().map(|s| s.name.as_str()).collect()
}

#[test]
fn client_primary_keeps_reference_names_then_adds_server_series() {
    let snap = snapshot(&synthetic_table(&FixtureSpec::default()), Client);
    let expected = [
        "sample_latency_ns",
        "isl",
        "osl",
        "ttft_ns",
        "chunk_delta_ns",
        "tpot_ns",
        "isl_server",
        "osl_server",
        "tpot_ns_server",
        "chunks_per_sample",
        "tokens_per_chunk",
        "tokens_per_chunk_server",
        "client_wait_ns",
        "latency_from_write_ns",
        "ttft_from_write_ns",
    ];
    assert_eq!(names(&snap), expected);
    let counters: Vec<&str> = snap.counters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(counters[0], "total_samples_issued");
    assert_eq!(counters[14], "total_duration_ns");
    assert!(counters.contains(&"n_samples_missing_usage"));
    assert!(counters.contains(&"n_errors"));
}

#[test]
fn client_primary_values_equal_the_client_only_computation() {
    let spec = FixtureSpec { fail_every: 7, missing_usage_every: 5, ..FixtureSpec::default() };
    let table = synthetic_table(&spec);
    let with_usage = snapshot(&table, Client);
    let client_only = snapshot(&strip_usage(&table), Client);
    for stat in &client_only.series {
        if stat.name.ends_with("_server") {
            continue;
        }
        assert_eq!(with_usage.series(&stat.name), Some(stat), "{}", stat.name);
    }
    for c in &client_only.counters[..15] {
        assert_eq!(with_usage.counter(&c.name), client_only.counter(&c.name), "{}", c.name);
    }
    assert_eq!(client_only.series("osl_server").map(|s| s.count), Some(0));
}

#[test]
fn server_primary_gives_the_same_numbers_with_names_swapped() {
    let spec = FixtureSpec { server_osl_deficit: 3, ..FixtureSpec::default() };
    let table = synthetic_table(&spec);
    let client = snapshot(&table, Client);
    let server = snapshot(&table, Server);
    let swaps = [
        ("isl", "isl_client"),
        ("osl", "osl_client"),
        ("tpot_ns", "tpot_ns_client"),
        ("isl_server", "isl"),
        ("osl_server", "osl"),
        ("tpot_ns_server", "tpot_ns"),
        ("tokens_per_chunk", "tokens_per_chunk_client"),
        ("tokens_per_chunk_server", "tokens_per_chunk"),
    ];
    for (client_name, server_name) in swaps {
        let a = client.series(client_name).unwrap();
        let b = server.series(server_name).unwrap();
        assert_eq!(a.count, b.count, "{client_name}");
        assert_eq!(a.total, b.total, "{client_name}");
        assert_eq!(a.percentiles, b.percentiles, "{client_name}");
        assert_eq!(a.histogram, b.histogram, "{client_name}");
    }
    // Early stopping follows the primary basis only.
    assert!(server.series("tpot_ns").unwrap().early_stopping.is_some());
    assert!(server.series("tpot_ns_client").unwrap().early_stopping.is_none());
    assert!(client.series("tpot_ns_server").unwrap().early_stopping.is_none());
    assert_eq!(server.counter("n_errors_client"), 0);
    assert!(server.counters.iter().any(|c| c.name == "n_errors_client"));
    assert_eq!(client.series("sample_latency_ns"), server.series("sample_latency_ns"));
    assert_eq!(client.series("ttft_ns"), server.series("ttft_ns"));
    assert_eq!(client.series("chunk_delta_ns"), server.series("chunk_delta_ns"));
    assert_eq!(client.series("chunks_per_sample"), server.series("chunks_per_sample"));
}

#[test]
fn chunk_series_count_every_gap_chunk_and_one_read_stream() {
    let mut table = SampleTable::with_capacity(4);
    let streamed = |n_chunks, chunk_reads, completion| SampleRow {
        n_chunks: Some(n_chunks),
        chunk_reads: Some(chunk_reads),
        client_wait_ns: None,
        ..row(Some(100), 1100, Some(completion))
    };
    // Three chunks over two reads, four in one read, one chunk, and a sample without chunks.
    table.push(&streamed(3, 2, 6));
    table.extend_chunk_delta_ns(&[400, 600]);
    table.push(&streamed(4, 1, 2));
    table.extend_chunk_delta_ns(&[0, 0, 0]);
    table.push(&streamed(1, 1, 5));
    table.push(&row(None, 1100, Some(9)));
    let snap = snapshot(&table, Server);
    let gaps = snap.series("chunk_delta_ns").unwrap();
    assert_eq!((gaps.count, gaps.total, gaps.max), (5, Num::Int(1000), Num::Int(600)));
    let chunks = snap.series("chunks_per_sample").unwrap();
    assert_eq!((chunks.count, chunks.total), (3, Num::Int(8)));
    // Server basis: 6/3, 2/4 and 5/1; the client's OSL is 5 on each row.
    let server = snap.series("tokens_per_chunk").unwrap();
    assert_eq!((server.count, server.total), (3, Num::Float(2.0 + 0.5 + 5.0)));
    let client = snap.series("tokens_per_chunk_client").unwrap();
    assert_eq!((client.count, client.total), (3, Num::Float(5.0 / 3.0 + 1.25 + 5.0)));
    // Only the four-chunk sample came in one read (one chunk is no stream to judge).
    assert_eq!(snap.counter("n_streams_in_one_read"), 1);
    assert_eq!(snap.counter("n_streams_multi_chunk"), 2);
}

fn row(first: Option<u64>, complete: u64, completion: Option<u32>) -> SampleRow {
    SampleRow {
        issued_ns: 0,
        first_chunk_ns: first,
        complete_ns: complete,
        isl_client: Some(4),
        osl_client: Some(5),
        tpot_tokens_client: Some(4),
        prompt_tokens: Some(4),
        completion_tokens: completion,
        ..SampleRow::default()
    }
}

#[test]
fn server_tpot_rule_and_its_skips() {
    let rows = [
        row(Some(100), 1100, Some(5)), // 1000 / 4 = 250
        row(Some(100), 1100, Some(2)), // 1000 / 1 = 1000
        row(Some(100), 1100, Some(1)), // skipped: completion_tokens <= 1
        row(Some(100), 1100, Some(0)), // skipped, and osl 0 is not recorded
        row(None, 1100, Some(9)),      // no first chunk: no TPOT
        row(Some(100), 101, Some(3)),  // 0.5 ns < 1: not recorded
    ];
    let mut table = SampleTable::with_capacity(rows.len());
    for r in &rows {
        table.push(r);
    }
    let snap = snapshot(&table, Client);
    let tpot = snap.series("tpot_ns_server").unwrap();
    assert_eq!(tpot.count, 2);
    assert_eq!(tpot.total, Num::Float(1250.0));
    assert_eq!(tpot.min, Num::Float(250.0));
    let osl = snap.series("osl_server").unwrap();
    assert_eq!(osl.count, 5);
    assert_eq!(osl.min, Num::Int(1));
    // Client TPOT: (complete - first) / tokens after the first chunk.
    let client_tpot = snap.series("tpot_ns").unwrap();
    assert_eq!(client_tpot.count, 5);
    assert_eq!(client_tpot.max, Num::Float(250.0));
}

#[test]
fn osl_paired_and_missing_usage_counters() {
    let mut table = SampleTable::with_capacity(6);
    let both = SampleRow { osl_client: Some(10), ..row(Some(1), 10, Some(8)) };
    table.push(&both);
    table.push(&SampleRow { osl_client: Some(6), ..row(Some(1), 10, Some(6)) });
    table.push(&SampleRow { completion_tokens: None, ..both });
    table.push(&SampleRow {
        completion_tokens: None,
        osl_client: None,
        output_empty: true,
        ..both
    });
    table.push(&SampleRow { failed: true, completion_tokens: None, ..both });
    table.push(&SampleRow { osl_client: None, ..row(Some(1), 10, Some(3)) });
    let snap = snapshot(&table, Client);
    assert_eq!(snap.osl_paired, OslPaired { count: 2, client_total: 16, server_total: 14 });
    assert_eq!(snap.osl_paired.mean(), Some(1.0));
    assert_eq!(snap.osl_paired.ratio(), Some(16.0 / 14.0));
    assert_eq!(snap.usage, UsageTally { usable: 3, missing: 1, missing_empty_output: 1 });
    assert!(snap.usage.is_partial());
    assert_eq!(snap.counter("n_samples_missing_usage"), 2);
    assert_eq!(snap.counter("n_samples_missing_usage_empty_output"), 1);
    assert_eq!(snap.counter("osl_paired_count"), 2);
    assert_eq!(OslPaired::default().mean(), None);
    assert_eq!(OslPaired::default().ratio(), None);
}

#[test]
fn counters_and_windows() {
    let mut table = SampleTable::with_capacity(3);
    let base = SampleRow::default();
    table.push(&SampleRow {
        issued_ns: 100,
        complete_ns: 900,
        finish: Some(FinishKind::Stop),
        ..base
    });
    table.push(&SampleRow {
        issued_ns: 300,
        complete_ns: 700,
        finish: Some(FinishKind::Other),
        ..base
    });
    table.push(&SampleRow { issued_ns: 200, complete_ns: 1000, failed: true, ..base });
    let counters = RunCounters {
        tracking_start_ns: 50,
        session_start_ns: 10,
        last_event_ns: 1100,
        ..RunCounters::default()
    };
    let snap = final_snapshot(&table, &counters, &options(Client), RunState::Interrupted);
    assert_eq!(snap.counter("tracked_finish_reason_stop"), 1);
    assert_eq!(snap.counter("tracked_finish_reason_other"), 1);
    assert_eq!(snap.counter("tracked_finish_reason_length"), 0);
    assert_eq!(snap.counter("tracked_duration_ns"), 950);
    // First issue (100) to the completion of the last-issued sample (300 -> 700).
    assert_eq!(snap.counter("legacy_loadgen_window_duration_ns"), 600);
    assert_eq!(snap.counter("total_duration_ns"), 1090);
    let latency = snap.series("sample_latency_ns").unwrap();
    assert_eq!((latency.count, latency.min, latency.max), (3, Num::Int(400), Num::Int(800)));
    let json = String::from_utf8(loadgen_py::json::to_python_json(&snap).unwrap()).unwrap();
    assert!(json.starts_with(
        "{\n  \"counter\": 1,\n  \"timestamp_ns\": 1100,\n  \"state\": \"interrupted\","
    ));
    assert!(json.ends_with("\n  \"token_count_source\": \"client\"\n}"));
}

#[test]
fn non_streaming_registers_no_ttft_or_tpot() {
    let table = synthetic_table(&FixtureSpec::default());
    let opts = MetricsOptions { streaming: false, ..options(Client) };
    let snap = final_snapshot(&table, &run_counters(&table), &opts, RunState::Complete);
    let want = ["sample_latency_ns", "isl", "osl", "isl_server", "osl_server"];
    let added = ["client_wait_ns", "latency_from_write_ns"];
    assert_eq!(names(&snap), [&want[..], &added[..]].concat());
}

#[test]
fn snapshot_round_trips_through_its_json() {
    let spec = FixtureSpec { fail_every: 9, missing_usage_every: 11, ..FixtureSpec::default() };
    for primary in [Client, Server] {
        let snap = snapshot(&synthetic_table(&spec), primary);
        let bytes = loadgen_py::json::to_python_json(&snap).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let back = snapshot_from_json(&doc, false).unwrap();
        assert_eq!(back, snap);
        assert_eq!(loadgen_py::json::to_python_json(&back).unwrap(), bytes);
    }
    let err = snapshot_from_json(&serde_json::json!({"state": "complete"}), false).unwrap_err();
    assert_eq!(err.to_string(), "final snapshot: metrics is missing");
}

#[test]
fn a_table_spilled_to_files_gives_the_in_memory_snapshot_bit_for_bit() {
    let spec = FixtureSpec {
        samples: 150_000,
        fail_every: 13,
        missing_usage_every: 7,
        ..FixtureSpec::default()
    };
    let dir = std::env::temp_dir().join(format!("loadgen-snapshot-spill-{}", std::process::id()));
    let spill = crate::metrics::column::Spill::new(&dir, 0).unwrap();
    let memory = synthetic_table(&spec);
    let spilled = crate::metrics::fixture::synthetic_table_in(&spec, Some(spill.clone()));
    for primary in [Client, Server] {
        let counters = run_counters(&memory);
        assert_eq!(counters, run_counters(&spilled));
        let opts = options(primary);
        let a = final_snapshot(&memory, &counters, &opts, RunState::Complete);
        let b = final_snapshot(&spilled, &counters, &opts, RunState::Complete);
        assert_eq!(a, b, "{primary:?}");
    }
    assert!(
        spill.spilled_bytes() > 65_536 * 40,
        "the table went to files: {}",
        spill.spilled_bytes()
    );
    assert_eq!(spill.error(), None);
}
