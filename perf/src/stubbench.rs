//! `loadgen-perf stub-bench`: the max-throughput stub next to a minimal monoio responder that
//! writes the same precompiled bytes without parsing, both on one pinned core, driven by a
//! keep-alive load client on another core.

use std::cell::Cell;
use std::net::{SocketAddr, TcpListener as StdListener, TcpStream as StdStream};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use clap::Args;
use loadgen_stubs::handler::Precompiled;
use loadgen_stubs::http::Route;
use loadgen_stubs::{StubConfig, StubKind, StubServer};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};
use nix::sys::resource::{getrusage, UsageWho};

/// `stub-bench` flags.
#[derive(Debug, Clone, Args)]
pub struct StubBenchArgs {
    /// Seconds each case runs against each server.
    #[arg(long, default_value_t = 3.0)]
    pub duration_s: f64,
    /// Core of the server (stub or minimal responder).
    #[arg(long, default_value_t = 0)]
    pub server_core: usize,
    /// Core of the load client.
    #[arg(long, default_value_t = 1)]
    pub client_core: usize,
    /// Keep-alive connection counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "32,1000")]
    pub connections: Vec<usize>,
    /// Output length of the responses, characters.
    #[arg(long, default_value_t = 160)]
    pub output_length: usize,
    /// Characters per SSE event when streaming.
    #[arg(long, default_value_t = 10)]
    pub stream_interval: usize,
    /// Alternations of stub and minimal responder per case (each gets duration / rounds per
    /// round), so drift in a shared machine's load hits both alike.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
}

/// One measured case.
#[derive(Debug, Clone)]
pub struct CaseResult {
    /// e.g. `c=32 stream`.
    pub case: String,
    /// The stub's totals.
    pub stub: Sample,
    /// The minimal responder's totals.
    pub minimal: Sample,
}

/// What one server did while the client ran.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// Whole responses the client read.
    pub responses: u64,
    /// Seconds the client ran.
    pub elapsed_s: f64,
    /// On-CPU seconds of the server thread meanwhile.
    pub server_cpu_s: f64,
}

impl Sample {
    fn add(&mut self, o: Sample) {
        self.responses += o.responses;
        self.elapsed_s += o.elapsed_s;
        self.server_cpu_s += o.server_cpu_s;
    }

    /// Responses per second.
    pub fn rps(&self) -> f64 {
        self.responses as f64 / self.elapsed_s
    }

    /// Server CPU microseconds per response.
    pub fn cpu_us_per_response(&self) -> f64 {
        self.server_cpu_s * 1e6 / self.responses.max(1) as f64
    }
}

/// Runs every case and prints the table.
pub fn run(args: &StubBenchArgs) -> anyhow::Result<Vec<CaseResult>> {
    let cores: Vec<usize> =
        core_affinity::get_core_ids().unwrap_or_default().into_iter().map(|c| c.id).collect();
    for core in [args.server_core, args.client_core] {
        if !cores.contains(&core) {
            anyhow::bail!("core {core} is not usable here (usable cores: {cores:?})");
        }
    }
    let rounds = args.rounds.max(1);
    let duration = Duration::from_secs_f64(args.duration_s / rounds as f64);
    let mut results = Vec::new();
    for &conns in &args.connections {
        for stream in [false, true] {
            let request = request_bytes(stream);
            let (mut stub, mut minimal) = (Sample::default(), Sample::default());
            for _ in 0..rounds {
                stub.add(measure_stub(args, conns, &request, duration)?);
                minimal.add(measure_minimal(args, stream, conns, &request, duration)?);
            }
            let case = format!("c={conns} {}", if stream { "stream" } else { "non-stream" });
            results.push(CaseResult { case, stub, minimal });
        }
    }
    print_table(&results);
    Ok(results)
}

fn print_table(results: &[CaseResult]) {
    println!(
        "{:<18} | {:>9} | {:>11} | {:>5} | {:>11} | {:>14} | {:>9}",
        "case", "stub rps", "minimal rps", "ratio", "stub cpu/rsp", "minimal cpu/rsp", "cpu ratio"
    );
    for r in results {
        println!(
            "{:<18} | {:>9.0} | {:>11.0} | {:>5.2} | {:>9.2}us | {:>12.2}us | {:>9.2}",
            r.case,
            r.stub.rps(),
            r.minimal.rps(),
            r.stub.rps() / r.minimal.rps(),
            r.stub.cpu_us_per_response(),
            r.minimal.cpu_us_per_response(),
            r.minimal.cpu_us_per_response() / r.stub.cpu_us_per_response(),
        );
    }
}

/// CPU seconds (user + system) of `who`.
fn cpu_s(who: UsageWho) -> f64 {
    getrusage(who).map_or(0.0, |u| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    })
}

fn request_bytes(stream: bool) -> Vec<u8> {
    let body = format!(
        "{{\"model\":\"max-tp\",\"messages\":[{{\"role\":\"user\",\"content\":\"Hello there\"}}],\
         \"max_completion_tokens\":1024,\"stream\":{stream}}}"
    );
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn stub_config(args: &StubBenchArgs) -> StubConfig {
    let mut cfg = StubConfig::new(StubKind::MaxThroughput);
    cfg.output_length = args.output_length;
    cfg.stream_interval = args.stream_interval;
    cfg.pin_cores = Some(vec![args.server_core]);
    cfg
}

fn measure_stub(
    args: &StubBenchArgs,
    conns: usize,
    request: &[u8],
    duration: Duration,
) -> anyhow::Result<Sample> {
    let server = StubServer::start(stub_config(args)).context("starting the stub")?;
    let sample = run_client(server.addr(), args.client_core, conns, request, duration);
    server.stop();
    sample
}

fn measure_minimal(
    args: &StubBenchArgs,
    stream: bool,
    conns: usize,
    request: &[u8],
    duration: Duration,
) -> anyhow::Result<Sample> {
    let response =
        Precompiled::build(&stub_config(args), 0).get(Route::Chat, stream, false).to_vec();
    let minimal = Minimal::start(args.server_core, request.len(), response)?;
    let sample = run_client(minimal.addr, args.client_core, conns, request, duration);
    minimal.stop();
    sample
}

/// The minimal responder: for every `request_len` bytes received it writes the response,
/// parsing nothing.
struct Minimal {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Minimal {
    fn start(core: usize, request_len: usize, response: Vec<u8>) -> anyhow::Result<Self> {
        let listener = StdListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new().name("minimal-0".into()).spawn(move || {
            core_affinity::set_for_current(core_affinity::CoreId { id: core });
            let mut rt = monoio::RuntimeBuilder::<monoio::FusionDriver>::new()
                .build()
                .expect("monoio runtime");
            rt.block_on(minimal_accept(listener, flag, request_len, Rc::new(response)));
        })?;
        Ok(Self { addr, stop, thread })
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept so the loop sees the flag.
        drop(StdStream::connect(self.addr));
        let _ = self.thread.join();
    }
}

async fn minimal_accept(
    listener: StdListener,
    stop: Arc<AtomicBool>,
    req_len: usize,
    resp: Rc<Vec<u8>>,
) {
    let listener = TcpListener::from_std(listener).expect("monoio listener");
    while let Ok((stream, _)) = listener.accept().await {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let _ = stream.set_nodelay(true);
        monoio::spawn(minimal_conn(stream, req_len, resp.clone()));
    }
}

async fn minimal_conn(mut stream: TcpStream, req_len: usize, resp: Rc<Vec<u8>>) {
    let mut rbuf = Vec::with_capacity(16 * 1024);
    let mut out = Vec::with_capacity(16 * 1024);
    let mut pending = 0usize;
    loop {
        let (res, buf) = stream.read(rbuf).await;
        rbuf = buf;
        match res {
            Ok(n) if n > 0 => pending += n,
            _ => return,
        }
        while pending >= req_len {
            pending -= req_len;
            out.extend_from_slice(&resp);
        }
        if !out.is_empty() {
            let (res, buf) = stream.write_all(out).await;
            out = buf;
            out.clear();
            if res.is_err() {
                return;
            }
        }
    }
}

/// Drives `conns` keep-alive connections from a monoio runtime pinned on `core`, one request
/// in flight per connection, and measures the server's CPU time meanwhile.
fn run_client(
    addr: SocketAddr,
    core: usize,
    conns: usize,
    request: &[u8],
    duration: Duration,
) -> anyhow::Result<Sample> {
    let request = request.to_vec();
    // The server's CPU is the process's less the client thread's (this thread only waits).
    let process_before = cpu_s(UsageWho::RUSAGE_SELF);
    let handle = std::thread::Builder::new().name("load-client".into()).spawn(move || {
        core_affinity::set_for_current(core_affinity::CoreId { id: core });
        let client_before = cpu_s(UsageWho::RUSAGE_THREAD);
        let mut rt =
            monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build()?;
        let (responses, elapsed_s) =
            rt.block_on(client_main(addr, conns, Rc::new(request), duration))?;
        drop(rt);
        anyhow::Ok((responses, elapsed_s, cpu_s(UsageWho::RUSAGE_THREAD) - client_before))
    })?;
    let (responses, elapsed_s, client_cpu_s) =
        handle.join().map_err(|_| anyhow!("the load client panicked"))??;
    let server_cpu_s = (cpu_s(UsageWho::RUSAGE_SELF) - process_before - client_cpu_s).max(0.0);
    Ok(Sample { responses, elapsed_s, server_cpu_s })
}

async fn client_main(
    addr: SocketAddr,
    conns: usize,
    request: Rc<Vec<u8>>,
    duration: Duration,
) -> anyhow::Result<(u64, f64)> {
    let mut streams = Vec::with_capacity(conns);
    for _ in 0..conns {
        let s = TcpStream::connect(addr).await.context("connecting the load client")?;
        s.set_nodelay(true)?;
        streams.push(s);
    }
    let done = Rc::new(Cell::new(0u64));
    let failed = Rc::new(Cell::new(0u64));
    let live = Rc::new(Cell::new(conns));
    let start = Instant::now();
    let deadline = start + duration;
    for s in streams {
        let (done, failed, live, request) =
            (done.clone(), failed.clone(), live.clone(), request.clone());
        monoio::spawn(async move {
            if client_conn(s, &request, deadline, &done).await.is_err() {
                failed.set(failed.get() + 1);
            }
            live.set(live.get() - 1);
        });
    }
    while live.get() > 0 {
        monoio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = start.elapsed().as_secs_f64();
    if failed.get() > 0 {
        return Err(anyhow!("{} load-client connections failed", failed.get()));
    }
    Ok((done.get(), elapsed))
}

async fn client_conn(
    mut s: TcpStream,
    request: &[u8],
    deadline: Instant,
    done: &Cell<u64>,
) -> std::io::Result<()> {
    let mut rbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut req = request.to_vec();
    while Instant::now() < deadline {
        let (res, buf) = s.write_all(req).await;
        req = buf;
        res?;
        rbuf.clear();
        loop {
            let len = rbuf.len();
            if len == rbuf.capacity() {
                rbuf.reserve(len);
            }
            let cap = rbuf.capacity();
            let (res, slice) = s.read(monoio::buf::IoBufMut::slice_mut(rbuf, len..cap)).await;
            rbuf = slice.into_inner();
            if res? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            if response_complete(&rbuf) {
                break;
            }
        }
        done.set(done.get() + 1);
    }
    Ok(())
}

/// True when `buf` holds one whole response: Content-Length satisfied, or the chunked
/// terminator at its end (one request in flight, so nothing follows it).
fn response_complete(buf: &[u8]) -> bool {
    let Some(head_end) = memfind(buf, b"\r\n\r\n") else {
        return false;
    };
    let head = &buf[..head_end];
    match memfind(head, b"Content-Length: ") {
        Some(at) => {
            let digits = &head[at + 16..];
            let n = digits
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .fold(0usize, |n, b| n * 10 + usize::from(b - b'0'));
            buf.len() >= head_end + 4 + n
        }
        None => buf.ends_with(b"0\r\n\r\n"),
    }
}

fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
