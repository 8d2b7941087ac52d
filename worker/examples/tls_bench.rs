//! TLS against plain HTTP through one `run_worker`, side by side: samples per second, the
//! worker thread's CPU time and heap allocations per sample, against the max-throughput stub
//! served plain and with `--tls` (worker on one core, stub on another when there are two).
//! Rounds alternate plain and TLS, so the ratio survives a noisy machine. Run:
//! `cargo run --release -p loadgen-worker --example tls_bench [ROUNDS] [SAMPLES]`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen_stubs::{StubConfig, StubKind, StubServer};
use loadgen_wire::{monotonic_ns, Doorbell, IssueCmd, RingSizes, WorkerEvent, WorkerRings};
use loadgen_worker::http::tls::Verify;
use loadgen_worker::request::{ApiType, Endpoint, Prompt, RequestOptions, RequestTable};
use loadgen_worker::{run_worker, WorkerEndpoint, WorkerSpec};

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
    let opts = RequestOptions::basic(ApiType::OpenAiChat, "m", streaming, 160);
    let prompt = [Prompt::Text { system: None, user: "hello" }];
    let table = RequestTable::build(&endpoint, &opts, None, prompt).unwrap();
    WorkerSpec {
        worker_id: 0,
        core,
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

/// CPU time of the calling thread: unlike wall time, it barely moves when other processes load
/// the machine.
fn thread_cpu_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID).unwrap();
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// What one run measured.
struct Measured {
    samples_per_s: f64,
    /// Worker-thread allocations per sample, from Ready to Done.
    allocations_per_sample: f64,
    /// Worker-thread CPU ns per sample over the whole run (warm-up handshakes included).
    cpu_ns_per_sample: f64,
}

fn measure(spec: WorkerSpec, samples: u64) -> Measured {
    let ready = Doorbell::create().unwrap();
    let space = Doorbell::create().unwrap();
    let sizes = RingSizes { issue_slots: 4096, record_bytes: 4 << 20 };
    let rings = WorkerRings::create_with(0, sizes, &ready, &space).unwrap();
    let (issue_rx, records_tx) = rings.worker_ends();
    let (mut issue, mut records) = rings.coordinator_ends();
    let worker = std::thread::spawn(move || {
        COUNTED.with(|c| c.set(true));
        let code = run_worker(spec, issue_rx, records_tx);
        (code, thread_cpu_ns())
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
    let (code, cpu_ns) = worker.join().unwrap();
    assert_eq!(code, 0);
    assert_eq!((completed, failed), (samples, 0));
    let ((t0, a0), (t1, a1)) = (start.unwrap(), end.unwrap());
    Measured {
        samples_per_s: samples as f64 / (t1 - t0).as_secs_f64(),
        allocations_per_sample: (a1 - a0) as f64 / samples as f64,
        cpu_ns_per_sample: cpu_ns as f64 / samples as f64,
    }
}

fn median_spread(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    let (lo, hi) = (values[0], values[values.len() - 1]);
    format!("{:.2} (min {lo:.2}, max {hi:.2})", values[values.len() / 2])
}

fn main() {
    let rounds: usize = std::env::args().nth(1).and_then(|n| n.parse().ok()).unwrap_or(3);
    let samples: u64 = std::env::args().nth(2).and_then(|n| n.parse().ok()).unwrap_or(100_000);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (worker_core, stub_core) = if cores >= 2 { (Some(0), Some(1)) } else { (None, None) };
    println!("cores available: {cores}; {samples} samples a run, 64 connections, {rounds} rounds");
    for streaming in [false, true] {
        let (mut rate_ratios, mut cpu_ratios) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            let mut runs = Vec::with_capacity(2);
            for tls in [false, true] {
                let server = stub(tls, streaming, stub_core);
                let mut ep = Endpoint::parse(&server.url()).unwrap();
                if let Some(settings) = ep.tls.as_mut() {
                    settings.verify = Verify::Insecure;
                }
                let m = measure(spec(ep, streaming, 64, worker_core), samples);
                server.stop();
                println!(
                    "round {round} streaming={streaming} tls={tls}: {:.0} samples/s, worker \
                     {:.0} CPU ns/sample, {:.2} allocations/sample",
                    m.samples_per_s, m.cpu_ns_per_sample, m.allocations_per_sample
                );
                runs.push(m);
            }
            rate_ratios.push(runs[1].samples_per_s / runs[0].samples_per_s);
            cpu_ratios.push(runs[1].cpu_ns_per_sample / runs[0].cpu_ns_per_sample);
        }
        println!(
            "streaming={streaming}: samples/s tls/plain = {}; worker CPU/sample tls/plain = {}",
            median_spread(rate_ratios),
            median_spread(cpu_ratios)
        );
    }
}
