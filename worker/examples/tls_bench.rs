//! TLS against plain HTTP through one `run_worker`, side by side: samples per second and heap
//! allocations per sample on the worker thread, against the max-throughput stub served plain
//! and with `--tls` (worker on one core, stub on another when there are two). Rounds alternate
//! plain and TLS, so the ratio survives a noisy machine. Run: `cargo run --release -p
//! loadgen-worker --example tls_bench [ROUNDS] [SAMPLES]`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen_stubs::{StubConfig, StubKind, StubServer};
use loadgen_worker::http::tls::Verify;
use loadgen_worker::request::{ApiType, Endpoint, Prompt, RequestOptions, RequestTable};
use loadgen_worker::wire::{Doorbell, IssueCmd, RingSizes, WorkerEvent, WorkerRings};
use loadgen_worker::{monotonic_ns, run_worker, WorkerSpec};

/// Counts the allocations of the threads that ask to be counted (the worker thread).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTED: Cell<bool> = const { Cell::new(false) };
}

fn note_allocation() {
    if COUNTED.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; counting
// touches only an atomic and a const-initialised thread-local (which never allocates).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller's layout contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: as `dealloc`, and the caller's new size contract is passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn stub(tls: bool, streaming: bool, core: Option<usize>) -> StubServer {
    let mut cfg = StubConfig::new(StubKind::MaxThroughput);
    cfg.tls = tls;
    cfg.stream_default = streaming;
    cfg.pin_cores = core.map(|c| vec![c]);
    StubServer::start(cfg).unwrap()
}

fn spec(endpoint: Endpoint, streaming: bool, connections: u32, core: Option<usize>) -> WorkerSpec {
    let opts = RequestOptions {
        api: ApiType::OpenAiChat,
        model: "m".into(),
        streaming,
        stream_include_usage: false,
        max_output_tokens: 160,
        min_output_tokens: None,
        temperature: None,
        top_p: None,
        top_k: None,
        seed: None,
        sampling: Default::default(),
        extra: Vec::new(),
    };
    let prompt = [Prompt::Text { system: None, user: "hello" }];
    let table = RequestTable::build(&endpoint, &opts, None, prompt).unwrap();
    WorkerSpec {
        worker_id: 0,
        core,
        endpoint,
        connections,
        warm_connections: connections,
        bind_from_slot: connections,
        api: ApiType::OpenAiChat,
        streaming,
        requests: Arc::new(table),
        force_epoll: false,
        max_output_bytes: 1 << 16,
        request_timeout_ns: 0,
        in_flight: None,
        source_addresses: Vec::new(),
        synthetic: None,
    }
}

/// Samples per second and worker-thread allocations per sample, from Ready to Done.
fn measure(spec: WorkerSpec, samples: u64) -> (f64, f64) {
    let ready = Doorbell::create().unwrap();
    let space = Doorbell::create().unwrap();
    let sizes = RingSizes { issue_slots: 4096, record_bytes: 4 << 20 };
    let rings = WorkerRings::create_with(0, sizes, &ready, &space).unwrap();
    let (issue_rx, records_tx) = rings.worker_ends();
    let (mut issue, mut records) = rings.coordinator_ends();
    let worker = std::thread::spawn(move || {
        COUNTED.with(|c| c.set(true));
        run_worker(spec, issue_rx, records_tx)
    });
    let (mut issued, mut stopped, mut completed, mut failed) = (0u64, false, 0u64, 0u64);
    let mut start: Option<(Instant, u64)> = None;
    let mut end = None;
    while end.is_none() {
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
            WorkerEvent::Record(view) => 2 + u8::from(view.header.failure != 0),
            WorkerEvent::Done => 4,
            WorkerEvent::SetupFailed { message } => panic!("setup failed: {message}"),
            _ => 0,
        }) {
            any = true;
            match event {
                1 => start = Some((Instant::now(), ALLOCATIONS.load(Ordering::Relaxed))),
                2 => completed += 1,
                3 => failed += 1,
                4 => end = Some((Instant::now(), ALLOCATIONS.load(Ordering::Relaxed))),
                _ => {}
            }
        }
        if !any {
            ready.wait(epoch, Duration::from_millis(1));
        }
    }
    assert_eq!(worker.join().unwrap(), 0);
    assert_eq!((completed, failed), (samples, 0));
    let ((t0, a0), (t1, a1)) = (start.unwrap(), end.unwrap());
    (samples as f64 / (t1 - t0).as_secs_f64(), (a1 - a0) as f64 / samples as f64)
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(3);
    let samples: u64 = std::env::args().nth(2).and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (worker_core, stub_core) = if cores >= 2 { (Some(0), Some(1)) } else { (None, None) };
    println!("cores available: {cores}; {samples} samples a run, 64 connections, {rounds} rounds");
    for streaming in [false, true] {
        let mut ratios = Vec::with_capacity(rounds);
        for round in 0..rounds {
            let mut qps = [0.0; 2];
            for (i, tls) in [false, true].into_iter().enumerate() {
                let server = stub(tls, streaming, stub_core);
                let mut ep = Endpoint::parse(&server.url()).unwrap();
                if let Some(settings) = ep.tls.as_mut() {
                    settings.verify = Verify::Insecure;
                }
                let (rate, allocations) = measure(spec(ep, streaming, 64, worker_core), samples);
                server.stop();
                qps[i] = rate;
                println!(
                    "round {round} streaming={streaming} tls={tls}: {rate:.0} samples/s, \
                     {allocations:.2} allocations/sample on the worker thread"
                );
            }
            ratios.push(qps[1] / qps[0]);
        }
        ratios.sort_by(f64::total_cmp);
        println!(
            "streaming={streaming}: tls/plain = {:.2} (min {:.2}, max {:.2})",
            ratios[ratios.len() / 2],
            ratios[0],
            ratios[ratios.len() - 1]
        );
    }
}
