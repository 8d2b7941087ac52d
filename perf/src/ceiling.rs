//! The raw ceiling of a roofline row: a minimal HTTP/1.1 keep-alive client (framing only, no
//! JSON) on the client's cores, with the same connection count against the same stub, and wrk
//! when it is installed.

use std::cell::Cell;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::rc::Rc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;

use crate::framing::{FrameError, ResponseScan};
use crate::procs;
use loadgen_worker::http::conn::connect_tcp;
use loadgen_worker::http::ports::{bind_from_slot, ephemeral_even_ports};

/// What the ceiling clients run against.
#[derive(Debug, Clone)]
pub struct CeilingSpec {
    pub addr: SocketAddr,
    /// Cores the client threads are pinned to (cycled).
    pub cores: Vec<usize>,
    /// Client threads (the load generator's worker count).
    pub threads: usize,
    /// Keep-alive connections across all threads, one request in flight each.
    pub connections: usize,
    /// The whole request, head and body: one timed phase each, in order, over the same
    /// connections (so a ceiling of 16,000 connections connects once for both stream modes).
    pub requests: Vec<Vec<u8>>,
    pub duration: Duration,
}

/// One ceiling measurement.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CeilingResult {
    pub responses: u64,
    pub elapsed_s: f64,
    pub qps: f64,
}

/// Runs the minimal client: `threads` pinned monoio runtimes, each with its share of the
/// connections; one result per request of `spec.requests`, each phase's clock starting once
/// every thread is connected and done with the phase before.
pub fn run_minimal(spec: &CeilingSpec) -> anyhow::Result<Vec<CeilingResult>> {
    let threads = spec.threads.clamp(1, spec.connections.max(1));
    let barrier = Arc::new(Barrier::new(threads));
    let mut handles = Vec::with_capacity(threads);
    for i in 0..threads {
        let conns = spec.connections / threads + usize::from(i < spec.connections % threads);
        // Past the even ports the connections bind first, as llm-loadgen's do.
        let bind_from = bind_from_slot(conns, spec.connections, ephemeral_even_ports());
        let core = spec.cores.get(i % spec.cores.len().max(1)).copied();
        let (addr, requests, duration) = (spec.addr, spec.requests.clone(), spec.duration);
        let barrier = barrier.clone();
        let handle = std::thread::Builder::new().name(format!("ceiling-{i}")).spawn(move || {
            if let Some(id) = core {
                core_affinity::set_for_current(core_affinity::CoreId { id });
            }
            let mut rt =
                monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build()?;
            rt.block_on(client_thread(addr, (conns, bind_from), requests, duration, &barrier))
        })?;
        handles.push(handle);
    }
    let mut phases = vec![(0u64, 0f64); spec.requests.len()];
    for h in handles {
        let thread = h.join().map_err(|_| anyhow!("a ceiling client thread panicked"))??;
        for ((responses, elapsed_s), (n, s)) in phases.iter_mut().zip(thread) {
            *responses += n;
            *elapsed_s = elapsed_s.max(s);
        }
    }
    Ok(phases
        .into_iter()
        .map(|(responses, elapsed_s)| CeilingResult {
            responses,
            elapsed_s,
            qps: responses as f64 / elapsed_s.max(1e-9),
        })
        .collect())
}

/// One thread's connections, then one timed phase per request: (responses, seconds) each.
async fn client_thread(
    addr: SocketAddr,
    (conns, bind_from): (usize, usize),
    requests: Vec<Vec<u8>>,
    duration: Duration,
    barrier: &Barrier,
) -> anyhow::Result<Vec<(u64, f64)>> {
    let mut streams = Vec::with_capacity(conns);
    let connected = connect_all(addr, conns, bind_from, &mut streams).await;
    // Every thread reaches each barrier, even after a failure, so none waits forever.
    barrier.wait();
    let mut failure = connected.err();
    let mut phases = Vec::with_capacity(requests.len());
    for request in requests {
        if failure.is_some() {
            barrier.wait();
            continue;
        }
        let (phase, returned) = run_phase(std::mem::take(&mut streams), request, duration).await;
        streams = returned;
        match phase {
            Ok(p) => phases.push(p),
            Err(e) => failure = Some(e),
        }
        barrier.wait();
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(phases),
    }
}

/// Drives every connection with `request` until `duration` has passed; hands the connections
/// back for the next phase.
async fn run_phase(
    streams: Vec<TcpStream>,
    request: Vec<u8>,
    duration: Duration,
) -> (anyhow::Result<(u64, f64)>, Vec<TcpStream>) {
    let done = Rc::new(Cell::new(0u64));
    let request = Rc::new(request);
    let start = Instant::now();
    let deadline = start + duration;
    let tasks: Vec<_> = streams
        .into_iter()
        .map(|s| {
            let (done, request) = (done.clone(), request.clone());
            monoio::spawn(async move { drive_connection(s, &request, deadline, &done).await })
        })
        .collect();
    let mut streams = Vec::with_capacity(tasks.len());
    let mut failed = None;
    for task in tasks {
        match task.await {
            Ok(s) => streams.push(s),
            Err(e) => failed = Some(e),
        }
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    match failed {
        Some(e) => (Err(anyhow!("a ceiling client connection failed: {e}")), streams),
        None => (Ok((done.get(), elapsed_s)), streams),
    }
}

async fn connect_all(
    addr: SocketAddr,
    conns: usize,
    bind_from: usize,
    streams: &mut Vec<TcpStream>,
) -> anyhow::Result<()> {
    for i in 0..conns {
        let s = connect_tcp(addr, i >= bind_from).await.context("connecting the ceiling client")?;
        s.set_nodelay(true)?;
        // Closed with a reset, as llm-loadgen's are: no TIME_WAIT left to slow the next row's
        // connects.
        loadgen_worker::http::conn::reset_on_close(&s)?;
        streams.push(s);
    }
    Ok(())
}

/// One connection: write the request, read one whole response (framing only), repeat until
/// the deadline; gives the connection back.
async fn drive_connection(
    mut s: TcpStream,
    request: &[u8],
    deadline: Instant,
    done: &Cell<u64>,
) -> anyhow::Result<TcpStream> {
    let mut rbuf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut req = request.to_vec();
    let mut scan = ResponseScan::default();
    while Instant::now() < deadline {
        let (res, buf) = s.write_all(req).await;
        req = buf;
        res?;
        rbuf.clear();
        scan.reset();
        loop {
            let len = rbuf.len();
            if len == rbuf.capacity() {
                rbuf.reserve(len.max(4096));
            }
            let cap = rbuf.capacity();
            let (res, slice) = s.read(monoio::buf::IoBufMut::slice_mut(rbuf, len..cap)).await;
            rbuf = slice.into_inner();
            if res? == 0 {
                bail!("the server closed the connection");
            }
            match scan.feed(&rbuf) {
                Ok(Some(end)) if end == rbuf.len() => break,
                Ok(Some(end)) => bail!("{} bytes after the response", rbuf.len() - end),
                Ok(None) => {}
                Err(FrameError(what)) => bail!("bad response framing: {what}"),
            }
        }
        done.set(done.get() + 1);
    }
    Ok(s)
}

/// The Lua script that makes wrk send `body` as a POST to `path`.
pub fn wrk_script(path: &str, body: &str) -> String {
    let quoted = serde_json::to_string(body).unwrap_or_default();
    format!(
        "wrk.method = \"POST\"\nwrk.path = \"{path}\"\nwrk.body = {quoted}\n\
         wrk.headers[\"Content-Type\"] = \"application/json\"\n"
    )
}

/// The `Requests/sec:` figure of wrk's output.
pub fn parse_wrk_rps(output: &str) -> Option<f64> {
    output
        .lines()
        .find_map(|l| l.trim().strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Runs wrk when it is on the PATH (None when it is not), pinned to `spec.cores`.
pub fn run_wrk(
    spec: &CeilingSpec,
    url: &str,
    script: &Path,
) -> anyhow::Result<Option<CeilingResult>> {
    let Some(wrk) = procs::which("wrk") else {
        return Ok(None);
    };
    let threads = spec.threads.clamp(1, spec.connections.max(1));
    let secs = spec.duration.as_secs_f64().ceil().max(1.0) as u64;
    let mut cmd = Command::new(wrk);
    cmd.arg(format!("-t{threads}"))
        .arg(format!("-c{}", spec.connections))
        .arg(format!("-d{secs}s"))
        .arg("-s")
        .arg(script)
        .arg(url);
    let out = procs::output_pinned(cmd, &spec.cores).context("running wrk")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("wrk failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        bail!("wrk saw errors: {}", text.trim());
    }
    let rps = parse_wrk_rps(&text).ok_or_else(|| anyhow!("no Requests/sec in wrk's output"))?;
    Ok(Some(CeilingResult {
        responses: (rps * secs as f64) as u64,
        elapsed_s: secs as f64,
        qps: rps,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The minimal client against the in-process max-throughput stub: whole responses, both
    /// framings, every connection used.
    #[test]
    fn minimal_client_reads_whole_stub_responses() {
        use loadgen_stubs::{StubConfig, StubKind, StubServer};
        let server = StubServer::start(StubConfig::new(StubKind::MaxThroughput)).unwrap();
        for stream in [false, true] {
            let body = format!(
                "{{\"model\":\"max-tp\",\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}],\
                 \"stream\":{stream},\"stream_options\":{{\"include_usage\":true}}}}"
            );
            let request = format!(
                "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            );
            // Twice over the same connections: the second phase reuses them.
            let spec = CeilingSpec {
                addr: server.addr(),
                cores: Vec::new(),
                threads: 2,
                connections: 5,
                requests: vec![request.clone().into_bytes(), request.into_bytes()],
                duration: Duration::from_millis(100),
            };
            let phases = run_minimal(&spec).unwrap();
            assert_eq!(phases.len(), 2);
            for r in phases {
                assert!(r.responses >= 5, "stream={stream}: {r:?}");
                assert!(r.elapsed_s >= 0.1 && r.qps > 0.0, "stream={stream}: {r:?}");
            }
        }
        server.stop();
    }

    #[test]
    fn wrk_rps_is_read_from_its_summary() {
        let out = "Running 5s test @ http://127.0.0.1:1/\n  1 threads and 32 connections\n\
                   Requests/sec:  81234.56\nTransfer/sec:     20.00MB\n";
        assert_eq!(parse_wrk_rps(out), Some(81234.56));
        assert_eq!(parse_wrk_rps("nothing here"), None);
    }

    #[test]
    fn wrk_script_quotes_the_body() {
        let s = wrk_script("/v1/chat/completions", "{\"a\":\"b\"}");
        assert!(s.contains("wrk.body = \"{\\\"a\\\":\\\"b\\\"}\""), "{s}");
        assert!(s.contains("wrk.path = \"/v1/chat/completions\""));
    }
}
