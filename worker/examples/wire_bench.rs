//! Micro benchmarks of the worker's hot path: record ring throughput across two threads (two
//! cores when available) and SSE frame decoding. Run: `cargo run --release -p loadgen-worker
//! --example wire_bench`.

use std::time::{Duration, Instant};

use loadgen_worker::adapter::Accumulator;
use loadgen_worker::request::ApiType;
use loadgen_worker::wire::{Doorbell, RecordHeader, RingSizes, WorkerEvent, WorkerRings};

fn ring_throughput(count: u64, output: &[u8]) -> f64 {
    let bell = Doorbell::create().unwrap();
    let sizes = RingSizes { issue_slots: 1024, record_bytes: 4 << 20 };
    let rings = WorkerRings::create(0, sizes, &bell).unwrap();
    let (_, mut producer) = rings.worker_ends();
    let (_, mut consumer) = rings.coordinator_ends();
    let start = Instant::now();
    let expected_bytes = count as usize * output.len();
    let output = output.to_vec();
    let pusher = std::thread::spawn(move || {
        let mut header = RecordHeader { http_status: 200, ..Default::default() };
        for id in 0..count {
            header.sample_id = id;
            header.complete_ns = id;
            producer.push_record(&header, &output, &[]);
        }
    });
    let mut seen = 0u64;
    let mut bytes = 0usize;
    while seen < count {
        let epoch = bell.epoch();
        let got = consumer.pop(|event| match event {
            WorkerEvent::Record(view) => view.output.len(),
            _ => 0,
        });
        match got {
            Some(n) => {
                seen += 1;
                bytes += n;
            }
            None => bell.wait(epoch, Duration::from_millis(10)),
        }
    }
    pusher.join().unwrap();
    assert_eq!(bytes, expected_bytes);
    count as f64 / start.elapsed().as_secs_f64()
}

fn decode_ns(frame: &[u8], iterations: u32) -> f64 {
    fn clock() -> u64 {
        1
    }
    let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 20);
    let start = Instant::now();
    for i in 0..iterations {
        if i % 64 == 0 {
            acc.reset();
        }
        acc.on_sse_frame(std::hint::black_box(frame), clock);
    }
    std::hint::black_box(&acc.output);
    start.elapsed().as_nanos() as f64 / f64::from(iterations)
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("cores available: {cores}");
    for (label, output) in
        [("16-byte output", vec![b'x'; 16]), ("160-byte output", vec![b'x'; 160])]
    {
        let rate = ring_throughput(2_000_000, &output);
        println!("record ring, {label}: {:.2} M records/s", rate / 1e6);
    }
    let frames: [(&str, &[u8]); 4] = [
        ("content delta (10 chars)", br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"0123456789"},"finish_reason":null}]}"#),
        ("content delta with escapes", br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"line\nnext \"q\""},"finish_reason":null}]}"#),
        ("finish frame", br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
        ("usage-only frame", br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":160,"total_tokens":170}}"#),
    ];
    for (label, frame) in frames {
        println!("decode {label}: {:.0} ns/frame", decode_ns(frame, 2_000_000));
    }
}
