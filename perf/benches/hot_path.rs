//! Micro benchmarks of the client's hot path, each in ns per operation: SSE frame decode, usage
//! extraction, non-streaming body decode, response head parse, record encode + ring push/pop,
//! aggregator ingest, the live view's per-sample record and client tokenization. Run:
//! `cargo bench -p loadgen-perf --bench hot_path`.

mod common;

use std::time::{Duration, Instant};

use common::header;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use loadgen_coordinator::metrics::{FinishKind, SampleRow, SampleTable};
use loadgen_wire::{
    Doorbell, RecordConsumer, RecordHeader, RecordProducer, RingSizes, WorkerEvent, WorkerRings,
};
use loadgen_worker::adapter::Accumulator;
use loadgen_worker::http::h1::ResponseReader;
use loadgen_worker::http::sse::{SseItem, SseParser};
use loadgen_worker::request::ApiType;

/// A fixed clock: the benches measure decoding, not `clock_gettime`.
fn clock() -> u64 {
    1
}

/// One OpenAI chat SSE event carrying `content`.
fn content_event(content: &str) -> Vec<u8> {
    format!(
        "data: {{\"id\":\"chatcmpl-0\",\"object\":\"chat.completion.chunk\",\"created\":0,\
         \"model\":\"max-tp\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\
         \"finish_reason\":null}}]}}\n\n"
    )
    .into_bytes()
}

/// SSE line split + JSON decode of one content event, by content size.
fn sse_decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("sse_decode");
    group.throughput(Throughput::Elements(1));
    for (name, len) in [("empty", 0), ("100", 100), ("1k", 1_000), ("8k", 8_000), ("32k", 32_000)] {
        let content: String = "abcdefghij".chars().cycle().take(len).collect();
        let event = content_event(&content);
        let mut parser = SseParser::new(1 << 20);
        let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 20);
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                acc.reset();
                parser.feed(std::hint::black_box(&event), &mut |item| {
                    if let SseItem::Data(json) = item {
                        acc.on_sse_frame(json, clock);
                    }
                });
                assert_eq!(acc.output.len(), len);
            })
        });
    }
    group.finish();
}

/// The usage-only frame (vLLM's order: empty `choices`, then `usage`).
fn usage_extract(c: &mut Criterion) {
    let frame = br#"{"id":"chatcmpl-0","object":"chat.completion.chunk","created":0,"model":"max-tp","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":160,"total_tokens":172}}"#;
    let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 20);
    c.bench_function("usage_extract", |b| {
        b.iter(|| {
            acc.reset();
            acc.on_sse_frame(std::hint::black_box(frame), clock);
            assert_eq!(acc.usage.completion_tokens, Some(160));
        })
    });
}

/// A non-streaming chat body as the max-throughput stub sends it (160 characters, usage).
fn body_decode(c: &mut Criterion) {
    let body = format!(
        "{{\"id\":\"r\",\"object\":\"chat.completion\",\"created\":1796026593,\"model\":\"max-tp\",\
         \"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{}\",\
         \"refusal\":null}},\"finish_reason\":\"stop\"}}],\"usage\":{{\"prompt_tokens\":10,\
         \"completion_tokens\":160,\"total_tokens\":170}},\"system_fingerprint\":null}}",
        "x".repeat(160)
    );
    let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 20);
    c.bench_function("body_decode/stub_160", |b| {
        b.iter(|| {
            acc.reset();
            assert!(acc.on_body(std::hint::black_box(body.as_bytes())));
            assert_eq!(acc.usage.completion_tokens, Some(160));
        })
    });
}

/// The stub's two response heads.
fn http_head_parse(c: &mut Criterion) {
    let heads: [(&str, &[u8]); 2] = [
        (
            "chunked_sse",
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
              Transfer-Encoding: chunked\r\n\r\n",
        ),
        (
            "content_length",
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 512\r\n\r\n",
        ),
    ];
    let mut group = c.benchmark_group("http_head_parse");
    for (name, head) in heads {
        let mut reader = ResponseReader::new();
        group.bench_function(name, |b| {
            b.iter(|| {
                reader.reset();
                let used = reader.feed_head(std::hint::black_box(head)).unwrap();
                assert_eq!(used, head.len());
            })
        });
    }
    group.finish();
}

fn ring_pair(record_bytes: usize) -> (Doorbell, WorkerRings, RecordProducer, RecordConsumer) {
    let bell = Doorbell::create().expect("doorbell");
    let sizes = RingSizes { issue_slots: 64, record_bytes };
    let rings = WorkerRings::create(0, sizes, &bell).expect("rings in shared memory");
    let (_, producer) = rings.worker_ends();
    let (_, consumer) = rings.coordinator_ends();
    (bell, rings, producer, consumer)
}

/// Record encode + push and pop + validated access, one thread, a shared-memory ring.
fn record_ring(c: &mut Criterion) {
    let mut group = c.benchmark_group("record_push_pop");
    group.throughput(Throughput::Elements(1));
    for output_len in [0usize, 160, 1_000] {
        let output = vec![b'x'; output_len];
        let (_bell, _rings, mut producer, mut consumer) = ring_pair(1 << 20);
        let mut id = 0u64;
        group.bench_function(BenchmarkId::new("output_bytes", output_len), |b| {
            b.iter(|| {
                id += 1;
                assert!(producer.push_record(&header(id), &output, &[]));
                let got = consumer.pop(|e| match e {
                    WorkerEvent::Record(v) => v.header.sample_id,
                    _ => 0,
                });
                assert_eq!(got, Some(id));
            })
        });
    }
    group.finish();
}

/// What the aggregator keeps of one record.
fn sample_row(h: &RecordHeader, output_len: usize) -> SampleRow {
    SampleRow {
        issued_ns: h.issued_ns,
        first_chunk_ns: (h.first_chunk_ns != 0).then_some(h.first_chunk_ns),
        complete_ns: h.complete_ns,
        failed: h.failure != 0,
        finish: Some(FinishKind::from_reason(h.finish_reason().as_str())),
        prompt_tokens: h.prompt_tokens,
        completion_tokens: h.completion_tokens,
        output_empty: output_len == 0,
        client_wait_ns: h.client_wait_ns(),
        ..SampleRow::default()
    }
}

/// Aggregator ingest: pop a record and append it to the `SampleTable` (records per second on
/// one core; the ring is filled outside the timed part, in batches).
fn aggregator_ingest(c: &mut Criterion) {
    const BATCH: u64 = 4_096;
    let output = vec![b'x'; 160];
    let (_bell, _rings, mut producer, mut consumer) = ring_pair(4 << 20);
    let mut table = SampleTable::with_capacity(1 << 20);
    let mut group = c.benchmark_group("aggregator_ingest");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("pop_and_table_push", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                for id in 0..BATCH {
                    assert!(producer.push_record(&header(id), &output, &[]));
                }
                if table.len() + BATCH as usize > 1 << 20 {
                    table = SampleTable::with_capacity(1 << 20);
                }
                let start = Instant::now();
                for _ in 0..BATCH {
                    consumer.pop(|e| {
                        if let WorkerEvent::Record(v) = e {
                            table.push(&sample_row(&v.header, v.output.len()));
                        }
                    });
                }
                timed += start.elapsed();
            }
            timed
        })
    });
    group.finish();
}

/// The live view's cost per tracked sample on the aggregator: its HdrHistograms (latency,
/// TTFT, server TPOT) and counters, for a streamed success with usage, with varied times so
/// the histograms' buckets change; and a failure (counted by kind, no histogram).
fn live_record(c: &mut Criterion) {
    use loadgen_coordinator::live::{Board, Completion, LiveStats};
    use loadgen_wire::FailureKind;
    let mut stats = LiveStats::new(true, std::sync::Arc::new(Board::default()));
    let mut group = c.benchmark_group("live_record");
    group.throughput(Throughput::Elements(1));
    let mut i = 0u64;
    group.bench_function("streamed_ok", |b| {
        b.iter(|| {
            i = i.wrapping_add(7_919);
            let ttft_ns = 200_000 + (i % 1_000_000);
            let sample = Completion {
                issued_ns: 1_000,
                first_chunk_ns: 1_000 + ttft_ns,
                complete_ns: 1_000 + ttft_ns * 3,
                failure: FailureKind::None,
                completion_tokens: Some(16 + (i % 64) as u32),
            };
            stats.record(std::hint::black_box(&sample));
        })
    });
    group.bench_function("failed", |b| {
        let sample = Completion {
            issued_ns: 1_000,
            first_chunk_ns: 0,
            complete_ns: 9_000,
            failure: FailureKind::Timeout,
            completion_tokens: None,
        };
        b.iter(|| stats.record(std::hint::black_box(&sample)))
    });
    group.finish();
    std::hint::black_box(stats.snapshot());
}

/// The per-record phase count the aggregator adds for per-phase drains
/// (`PhaseCounts::note`: a search over the phase starts and one atomic add), beside the ingest
/// it joins: warm-up, performance and two accuracy phases, the ids spread over all four.
fn phase_note(c: &mut Criterion) {
    use loadgen_coordinator::shared::PhaseCounts;
    const BATCH: u64 = 4_096;
    let phases = PhaseCounts::of_run(BATCH / 4, BATCH / 4, &[BATCH / 2, 3 * BATCH / 4]);
    let mut group = c.benchmark_group("aggregator_ingest");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function("phase_note", |b| {
        b.iter(|| {
            for id in 0..BATCH {
                phases.note(std::hint::black_box(id));
            }
        })
    });
    group.finish();
}

/// Client token counting with the char tokenizer of the test assets.
fn tokenizer(c: &mut Criterion) {
    let path =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/assets/tokenizers/char/tokenizer.json");
    let tok = tokenizers::Tokenizer::from_file(path).expect("the char tokenizer asset");
    let mut group = c.benchmark_group("tokenizer_encode");
    for len in [160usize, 1_000, 8_000] {
        let text: String =
            "The quick brown fox jumps over the lazy dog. ".chars().cycle().take(len).collect();
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_function(BenchmarkId::new("chars", len), |b| {
            b.iter(|| {
                let enc = tok.encode(std::hint::black_box(text.as_str()), false).unwrap();
                assert!(!enc.get_ids().is_empty());
            })
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
}

/// One `sample.complete` (100 bytes of output) into the time-ordered event log, as the
/// aggregator pays for it: the copy into its 10 ms bucket, and per bucket the sort and the hand-over
/// to a formatter thread (which writes to /dev/null; a formatter that falls behind makes the
/// aggregator wait, as in a run). Events 1 µs apart (1,000,000 a second), in arrival order or
/// shuffled within runs of 64, `advance` every 64 events as the aggregator's loop calls it.
fn event_log(c: &mut Criterion) {
    use loadgen_coordinator::aggregate::events::{CompleteEvent, EventLog, EventLogSpec};
    let mut group = c.benchmark_group("event_log");
    group.throughput(Throughput::Elements(1));
    let output = "x".repeat(100);
    for (name, shuffle) in [("in_order", 0u64), ("shuffled_64", 0x3f)] {
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let spec = EventLogSpec { formatters: 1, ..EventLogSpec::default() };
                let mut log = EventLog::create(std::path::Path::new("/dev/null"), spec).unwrap();
                let start = Instant::now();
                for i in 0..iters {
                    let timestamp_ns = 1_000_000_000 + (i ^ shuffle) * 1_000;
                    if i % 64 == 0 {
                        log.advance(timestamp_ns);
                    }
                    log.complete(&CompleteEvent {
                        sample_id: i,
                        timestamp_ns,
                        output: Some(&output),
                        streamed: false,
                        first_chunk_len: None,
                        reasoning_len: 0,
                        tool_calls_len: 0,
                        finish_reason: Some("stop"),
                        worker_id: 0,
                        prompt_tokens: Some(10),
                        completion_tokens: Some(20),
                        chunks: None,
                        endpoint: 0,
                        client_wait_ns: Some(12_345),
                    });
                }
                let elapsed = start.elapsed();
                // /dev/null cannot be synced; the lines are written all the same.
                let _ = log.close().error().map(str::to_string);
                elapsed
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = sse_decode, usage_extract, body_decode, http_head_parse, record_ring, aggregator_ingest, phase_note, live_record, event_log, tokenizer
}
criterion_main!(benches);
