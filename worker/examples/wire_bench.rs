//! Micro benchmarks of the worker's hot path: record ring throughput across two threads (two
//! cores when available), SSE frame decoding, and one `run_worker` against an in-process monoio
//! server with precompiled responses. Run: `cargo run --release -p loadgen-worker --example
//! wire_bench`.

use std::time::{Duration, Instant};

use std::sync::Arc;

use loadgen_wire::{
    monotonic_ns, Doorbell, IssueCmd, RecordHeader, RingSizes, WorkerEvent, WorkerRings,
};
use loadgen_worker::adapter::Accumulator;
use loadgen_worker::request::{ApiType, Endpoint, Prompt, RequestOptions, RequestTable};
use loadgen_worker::{run_worker, WorkerEndpoint, WorkerSpec};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};

/// CPU time of the calling thread: unlike wall time, it barely moves when other processes load
/// the machine.
fn thread_cpu_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap();
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// Records per second across the ring, and the producer's and consumer's CPU ns per record;
/// `flush_every` batches the doorbell as the worker does (one flush per event-loop tick), `None`
/// rings it per record.
fn ring_throughput(count: u64, output: &[u8], flush_every: Option<u64>) -> (f64, f64, f64) {
    let bell = Doorbell::create().unwrap();
    let sizes = RingSizes { issue_slots: 1024, record_bytes: 4 << 20 };
    let rings = WorkerRings::create(0, sizes, &bell).unwrap();
    let (_, mut producer) = rings.worker_ends();
    let (_, mut consumer) = rings.coordinator_ends();
    let start = Instant::now();
    let expected_bytes = count as usize * output.len();
    let output = output.to_vec();
    let consumer_cpu_start = thread_cpu_ns();
    let pusher = std::thread::spawn(move || {
        let cpu_start = thread_cpu_ns();
        let mut header = RecordHeader { http_status: 200, ..Default::default() };
        producer.defer_doorbell(flush_every.is_some());
        let every = flush_every.unwrap_or(u64::MAX);
        for id in 0..count {
            header.sample_id = id;
            header.complete_ns = id;
            producer.push_record(&header, &output, &[]);
            if id % every == every - 1 {
                producer.flush_doorbell();
            }
        }
        producer.flush_doorbell();
        thread_cpu_ns() - cpu_start
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
    let rate = count as f64 / start.elapsed().as_secs_f64();
    let consumer_cpu_ns = thread_cpu_ns() - consumer_cpu_start;
    let producer_cpu_ns = pusher.join().unwrap();
    assert_eq!(bytes, expected_bytes);
    (rate, producer_cpu_ns as f64 / count as f64, consumer_cpu_ns as f64 / count as f64)
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

fn body_ns(body: &[u8], iterations: u32) -> f64 {
    let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 20);
    let start = Instant::now();
    for _ in 0..iterations {
        acc.reset();
        assert!(acc.on_body(std::hint::black_box(body)));
    }
    std::hint::black_box(&acc.output);
    start.elapsed().as_nanos() as f64 / f64::from(iterations)
}

/// A precompiled response: 16 SSE events in one chunked body, or a JSON body.
fn canned_response(streaming: bool) -> Vec<u8> {
    if !streaming {
        let body = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"0123456789"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":10,"total_tokens":11}}"#;
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        return [head.as_bytes(), body.as_bytes()].concat();
    }
    let mut events = String::new();
    for _ in 0..16 {
        events.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"0123456789\"},\"finish_reason\":null}]}\n\n");
    }
    events.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{events}\r\n0\r\n\r\n",
        events.len()
    )
    .into_bytes()
}

/// Serves `response` to every request on one monoio thread; returns its address.
fn start_server(response: Vec<u8>) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new().build().unwrap();
        rt.block_on(async move {
            let listener = monoio::net::TcpListener::from_std(listener).unwrap();
            let response: &'static [u8] = Box::leak(response.into_boxed_slice());
            while let Ok((mut stream, _)) = listener.accept().await {
                monoio::spawn(async move {
                    let mut buf = Vec::with_capacity(64 * 1024);
                    loop {
                        let len = buf.len();
                        let (n, b) =
                            stream.read(monoio::buf::IoBufMut::slice_mut(buf, len..)).await;
                        buf = b.into_inner();
                        if n.unwrap_or(0) == 0 {
                            return;
                        }
                        // Requests end with a small JSON body; count complete ones by the
                        // closing brace after a blank line (enough for this benchmark).
                        while let Some(end) = request_end(&buf) {
                            buf.drain(..end);
                            let (r, _) = stream.write_all(response).await;
                            if r.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
    });
    addr
}

fn request_end(buf: &[u8]) -> Option<usize> {
    let head = memchr_find(buf, b"\r\n\r\n")? + 4;
    let text = std::str::from_utf8(&buf[..head]).ok()?;
    let len: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .and_then(|v| v.trim().parse().ok())?;
    (buf.len() >= head + len).then_some(head + len)
}

fn memchr_find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Samples per second through one worker with `connections` keep-alive connections.
/// One worker on `connections` connections to the canned server.
fn bench_spec(
    endpoint: Endpoint,
    table: RequestTable,
    streaming: bool,
    connections: u32,
) -> WorkerSpec {
    WorkerSpec {
        worker_id: 0,
        core: None,
        endpoints: vec![WorkerEndpoint::new(endpoint, Arc::new(table))],
        first_endpoint: 0,
        connections,
        warm_connections: connections,
        api: ApiType::OpenAiChat,
        streaming,
        force_epoll: false,
        max_output_bytes: 1 << 16,
        request_timeout_ns: 0,
        turn_delays_ns: None,
        in_flight: None,
        synthetic: None,
        video_fallback_dir: None,
    }
}

fn worker_qps(streaming: bool, connections: u32, samples: u64) -> f64 {
    let addr = start_server(canned_response(streaming));
    let endpoint = Endpoint::parse(&format!("http://{addr}")).unwrap();
    let opts = RequestOptions::basic(ApiType::OpenAiChat, "m", streaming, 160);
    let prompt = [Prompt::Text { system: None, user: "hello" }];
    let table = RequestTable::build(&endpoint, &opts, None, prompt).unwrap();
    let spec = bench_spec(endpoint, table, streaming, connections);
    let ready = Doorbell::create().unwrap();
    let space = Doorbell::create().unwrap();
    let sizes = RingSizes { issue_slots: 4096, record_bytes: 4 << 20 };
    let rings = WorkerRings::create_with(0, sizes, &ready, &space).unwrap();
    let (issue_rx, records_tx) = rings.worker_ends();
    let (mut issue, mut records) = rings.coordinator_ends();
    let worker = std::thread::spawn(move || run_worker(spec, issue_rx, records_tx));
    let (mut issued, mut done, mut stopped, mut completed) = (0u64, false, false, 0u64);
    let mut start = None;
    while !done {
        let epoch = ready.epoch();
        if start.is_some() {
            while issued < samples
                && issue.try_push(IssueCmd::Issue {
                    sample_id: issued,
                    row: 0,
                    issued_ns: monotonic_ns(),
                })
            {
                issued += 1;
            }
            if issued == samples && !stopped {
                stopped = issue.try_push(IssueCmd::Stop);
            }
        }
        let mut any = false;
        while let Some(event) = records.pop(|e| match e {
            WorkerEvent::Ready { .. } => 1,
            WorkerEvent::Record(_) => 2,
            WorkerEvent::Done => 3,
            _ => 0,
        }) {
            any = true;
            match event {
                1 => start = Some(Instant::now()),
                2 => completed += 1,
                3 => done = true,
                _ => {}
            }
        }
        if !any {
            ready.wait(epoch, Duration::from_millis(1));
        }
    }
    assert_eq!(worker.join().unwrap(), 0);
    assert_eq!(completed, samples);
    samples as f64 / start.unwrap().elapsed().as_secs_f64()
}

fn main() {
    // Optional filter: `ring`, `decode`, `body` or `worker` runs only that part.
    let only = std::env::args().nth(1).unwrap_or_default();
    // Optional count: worker samples (default 200,000) and decode iterations (ten times that);
    // small under callgrind.
    let count: Option<u64> = std::env::args().nth(2).and_then(|n| n.parse().ok());
    let worker_samples = count.unwrap_or(200_000);
    let serde_iterations = count.unwrap_or(200_000) as u32;
    let wants = |part: &str| only.is_empty() || only == part;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("cores available: {cores}");
    for (label, output) in
        [("16-byte output", vec![b'x'; 16]), ("160-byte output", vec![b'x'; 160])]
    {
        if !wants("ring") {
            break;
        }
        for (doorbell, flush_every) in [("per record", None), ("per 64 records", Some(64))] {
            let (rate, push_ns, pop_ns) = ring_throughput(2_000_000, &output, flush_every);
            println!(
                "record ring, {label}, doorbell {doorbell}: {:.2} M records/s, CPU per record: \
                 producer {push_ns:.0} ns, consumer {pop_ns:.0} ns",
                rate / 1e6
            );
        }
    }
    let frames: [(&str, &[u8]); 4] = [
        ("content delta (10 chars)", br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"0123456789"},"finish_reason":null}]}"#),
        ("content delta with escapes", br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"line\nnext \"q\""},"finish_reason":null}]}"#),
        ("finish frame", br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
        ("usage-only frame", br#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":160,"total_tokens":170}}"#),
    ];
    // The stub's non-streaming chat body (160 characters of content, usage object).
    let body = format!(
        r#"{{"id":"r","object":"chat.completion","created":1796026593,"model":"max-tp","choices":[{{"index":0,"message":{{"role":"assistant","content":"{}","refusal":null}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":10,"completion_tokens":160,"total_tokens":170}},"system_fingerprint":null}}"#,
        "x".repeat(160)
    );
    if wants("decode") || wants("body") {
        let start = Instant::now();
        for _ in 0..serde_iterations {
            let v: serde::de::IgnoredAny =
                serde_json::from_slice(std::hint::black_box(body.as_bytes())).unwrap();
            std::hint::black_box(v);
        }
        let floor_ns = start.elapsed().as_nanos() as f64 / f64::from(serde_iterations);
        let ours = body_ns(body.as_bytes(), serde_iterations * 5);
        println!(
            "decode non-streaming body ({} bytes): {ours:.0} ns/body (serde_json IgnoredAny \
             floor {floor_ns:.0} ns)",
            body.len()
        );
    }
    for (label, frame) in frames {
        if !wants("decode") {
            break;
        }
        // serde_json::Value on the same bytes, side by side: a ratio survives a noisy machine.
        let start = Instant::now();
        for _ in 0..serde_iterations {
            let v: serde_json::Value = serde_json::from_slice(std::hint::black_box(frame)).unwrap();
            std::hint::black_box(v);
        }
        let value_ns = start.elapsed().as_nanos() as f64 / f64::from(serde_iterations);
        // The floor: serde_json validating the bytes and keeping nothing.
        let start = Instant::now();
        for _ in 0..serde_iterations {
            let v: serde::de::IgnoredAny =
                serde_json::from_slice(std::hint::black_box(frame)).unwrap();
            std::hint::black_box(v);
        }
        let floor_ns = start.elapsed().as_nanos() as f64 / f64::from(serde_iterations);
        let ours = decode_ns(frame, serde_iterations * 10);
        println!(
            "decode {label}: {ours:.0} ns/frame (serde_json::Value {value_ns:.0} ns, \
             IgnoredAny floor {floor_ns:.0} ns)"
        );
    }
    for streaming in [false, true] {
        if !wants("worker") {
            break;
        }
        let qps = worker_qps(streaming, 64, worker_samples);
        println!("one worker, 64 connections, streaming={streaming}: {qps:.0} samples/s");
    }
}
