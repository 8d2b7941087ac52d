//! One worker thread: a monoio runtime (io_uring, epoll fallback) that accepts on its own
//! listener and serves each connection in its own task until the server stops.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::net::TcpListener as StdListener;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};

use crate::config::{monotonic_ns, SendLog, SentResponse, StubKind};
use crate::handler::Handler;
use crate::http::{frame_request, FlagFinders, Frame, Request, BODY_LEN_MAX, HEAD_LEN_MAX};
use crate::plan::{End, Plan};
use crate::render::error_response;
use crate::shared::{Counters, Shared};
use crate::variable::{sleep_until_precise, LocalSemaphore, Rng};

const READ_BUF_LEN: usize = 16 * 1024;
const CLOSE_TURNS: usize = 4;

struct Ctx {
    shared: Arc<Shared>,
    index: usize,
    handler: RefCell<Handler>,
    limit: Option<LocalSemaphore>,
}

/// Runs worker `index` on the calling thread until the server's stop flag is set. It reports on
/// `ready` once it accepts on `listener` (or why it cannot).
pub fn run(
    shared: Arc<Shared>,
    index: usize,
    listener: StdListener,
    wake: std::os::unix::net::UnixStream,
    ready: std::sync::mpsc::Sender<std::io::Result<()>>,
) {
    let built = monoio::RuntimeBuilder::<monoio::FusionDriver>::new().enable_timer().build();
    let mut rt = match built {
        Ok(rt) => rt,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    rt.block_on(async move {
        let sockets = TcpListener::from_std(listener)
            .and_then(|l| Ok((l, monoio::net::UnixStream::from_std(wake)?)));
        let (listener, mut wake) = match sockets {
            Ok(s) => s,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let cfg = shared.cfg.clone();
        let limit = per_worker_limit(cfg.variable.max_concurrency, cfg.workers, index);
        let handler = Handler {
            rng: Rng::new(cfg.variable.seed.wrapping_add(index as u64)),
            cfg,
            created_unix_s: shared.created_unix_s,
            finders: FlagFinders::default(),
            served: 0,
            rate_next: None,
            prefix_cache: shared.prefix_cache.clone(),
        };
        let ctx = Rc::new(Ctx {
            shared: shared.clone(),
            index,
            handler: RefCell::new(handler),
            limit: limit.map(LocalSemaphore::new),
        });
        let stop = Rc::new(StopSignal::default());
        monoio::spawn(stop.clone().guard(accept_loop(listener, ctx, stop.clone())));
        let _ = ready.send(Ok(()));
        // The stop handle drops the other end of `wake`: this read ends with EOF. Nothing
        // else is ever written to it.
        while !shared.stop.load(Ordering::Acquire) {
            let (res, _) = wake.read(Vec::with_capacity(1)).await;
            if !matches!(res, Ok(n) if n > 0) {
                break;
            }
        }
        // Dropping the runtime does not drop its tasks: end each one, which closes its socket.
        stop.fire();
        let give_up = Instant::now() + Duration::from_secs(1);
        while stop.live.get() > 0 && Instant::now() < give_up {
            monoio::time::sleep(Duration::from_millis(1)).await;
        }
        // Under io_uring a dropped socket is closed by a queued close op, which only runs once
        // the driver submits it, after the cancelled accept/read completes: give the driver a
        // few turns so every close is submitted before the ring is torn down.
        for _ in 0..CLOSE_TURNS {
            monoio::time::sleep(Duration::from_millis(1)).await;
        }
    })
}

fn per_worker_limit(total: usize, workers: usize, index: usize) -> Option<usize> {
    if total == 0 {
        return None;
    }
    let workers = workers.max(1);
    Some((total / workers + usize::from(index < total % workers)).max(1))
}

async fn accept_loop(listener: TcpListener, ctx: Rc<Ctx>, stop: Rc<StopSignal>) {
    let acceptor =
        ctx.shared.tls.as_ref().map(|t| monoio_rustls::TlsAcceptor::from(t.config.clone()));
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                ctx.shared.counters[ctx.index].accepted.fetch_add(1, Ordering::Relaxed);
                ctx.shared.note_peer(peer.ip());
                let _ = stream.set_nodelay(true);
                match &acceptor {
                    None => monoio::spawn(stop.clone().guard(serve(stream, ctx.clone()))),
                    Some(acceptor) => monoio::spawn(stop.clone().guard(serve_tls(
                        acceptor.clone(),
                        stream,
                        ctx.clone(),
                    ))),
                };
            }
            // Out of descriptors or an aborted handshake: keep accepting.
            Err(_) => monoio::time::sleep(Duration::from_millis(1)).await,
        }
    }
}

/// Runs the TLS handshake, then serves the connection as a plain one; a client whose
/// handshake fails (one that does not trust the stub's CA) is dropped.
async fn serve_tls(acceptor: monoio_rustls::TlsAcceptor, stream: TcpStream, ctx: Rc<Ctx>) {
    if let Ok(tls) = acceptor.accept(stream).await {
        serve(tls, ctx).await;
    }
}

async fn serve<S: AsyncReadRent + AsyncWriteRent>(mut stream: S, ctx: Rc<Ctx>) {
    let fast = ctx.shared.precompiled.as_ref();
    let mut rbuf: Vec<u8> = Vec::with_capacity(READ_BUF_LEN);
    let mut out: Vec<u8> = Vec::with_capacity(READ_BUF_LEN);
    let counters = &ctx.shared.counters[ctx.index];
    let mut continued = false;
    loop {
        let mut used = 0;
        let mut end = End::KeepAlive;
        while end == End::KeepAlive {
            let req = match frame_request(&rbuf[used..]) {
                Frame::Partial => break,
                Frame::ExpectsContinue => {
                    if !continued {
                        out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                        continued = true;
                    }
                    break;
                }
                Frame::Complete(req) => req,
                Frame::Bad(msg) => {
                    out.extend_from_slice(&error_response(400, &msg, false));
                    end = End::Close;
                    break;
                }
            };
            let body = req.body(&rbuf[used..]);
            if let Some(log) = &ctx.handler.borrow().cfg.head_log {
                let head = rbuf[used..used + req.head_len].to_vec();
                log.lock().unwrap_or_else(|e| e.into_inner()).push(head);
            }
            continued = false;
            counters.requests.fetch_add(1, Ordering::Relaxed);
            if let (Some(fast), Some(route)) = (fast, req.route) {
                let h = ctx.handler.borrow();
                let (stream_flag, usage) = h.finders.flags(body, h.cfg.stream_default);
                out.extend_from_slice(fast.get(route, stream_flag, usage));
                end = if req.close { End::Close } else { End::KeepAlive };
            } else {
                // In this order: every deadline then lies at or after `received_ns` plus its
                // delay, by the one clock both read.
                let received_ns = monotonic_ns();
                let start = Instant::now();
                let plan = ctx.handler.borrow_mut().plan(&req, &rbuf[used..], start);
                let sent = ctx.handler.borrow().cfg.send_log.clone().map(|log| {
                    (log, SentResponse::received(body.to_vec(), received_ns, plan.cache))
                });
                (out, end) = match write_plan(&mut stream, out, plan, &ctx, &req, sent).await {
                    Some(v) => v,
                    None => return,
                };
            }
            used += req.total_len();
        }
        if !out.is_empty() {
            out = match flush(&mut stream, out, counters).await {
                Some(buf) => buf,
                None => return,
            };
        }
        match end {
            End::KeepAlive => {}
            End::Close => return,
            End::Stall => return stall(stream).await,
        }
        rbuf.drain(..used);
        rbuf = match read_more(&mut stream, rbuf).await {
            Some(buf) => buf,
            None => return,
        };
    }
}

/// Reads more bytes after those already in `rbuf`; `None` on EOF, error, or an oversized request.
async fn read_more<S: AsyncReadRent>(stream: &mut S, mut rbuf: Vec<u8>) -> Option<Vec<u8>> {
    if rbuf.len() == rbuf.capacity() {
        if rbuf.len() >= HEAD_LEN_MAX + BODY_LEN_MAX {
            return None;
        }
        rbuf.reserve(rbuf.capacity());
    }
    let len = rbuf.len();
    let cap = rbuf.capacity();
    let (res, slice) = stream.read(monoio::buf::IoBufMut::slice_mut(rbuf, len..cap)).await;
    let rbuf = slice.into_inner();
    match res {
        Ok(n) if n > 0 => Some(rbuf),
        _ => None,
    }
}

/// Writes a planned response (after flushing `out`); `None` when the connection is done. With
/// `sent` (the send log), each piece's write is stamped, and the response is logged once its
/// last piece is written (flushed at once rather than with a pipelined next response).
async fn write_plan<S: AsyncWriteRent>(
    stream: &mut S,
    mut out: Vec<u8>,
    plan: Plan,
    ctx: &Ctx,
    req: &Request,
    mut sent: Option<(SendLog, SentResponse)>,
) -> Option<(Vec<u8>, End)> {
    let queued_at = Instant::now();
    let permit = match (&ctx.limit, req.route) {
        (Some(sem), Some(_)) if ctx.shared.cfg.kind == StubKind::Variable => {
            Some(sem.acquire().await)
        }
        _ => None,
    };
    if let (Some(_), Some((_, response))) = (&permit, &mut sent) {
        response.slot_ns = Some(monotonic_ns());
    }
    let counters = &ctx.shared.counters[ctx.index];
    // A request's clock starts when it gets its permit: shift its deadlines by the wait.
    let queued = queued_at.elapsed();
    let deadlines: Vec<Instant> =
        plan.deadlines.unwrap_or_default().into_iter().map(|d| d + queued).collect();
    // Pieces of this response in `out` whose write is not stamped yet.
    let mut unstamped = 0;
    for (i, piece) in plan.pieces.into_iter().enumerate() {
        if let Some(&d) = deadlines.get(i) {
            if !out.is_empty() && d > Instant::now() {
                stamp_written(&mut sent, &mut unstamped);
                out = flush(stream, out, counters).await?;
            }
            sleep_until_precise(d).await;
        }
        out.extend_from_slice(&piece);
        unstamped += 1;
        let next_is_now = deadlines.get(i + 1).is_none_or(|&d| d <= Instant::now());
        if !next_is_now || plan.end != End::KeepAlive {
            stamp_written(&mut sent, &mut unstamped);
            out = flush(stream, out, counters).await?;
        }
    }
    if sent.is_some() && unstamped > 0 {
        stamp_written(&mut sent, &mut unstamped);
        out = flush(stream, out, counters).await?;
    }
    if let Some((log, response)) = sent {
        log.lock().unwrap_or_else(|e| e.into_inner()).push(response);
    }
    Some((out, plan.end))
}

/// Stamps, in a logged response, the write about to carry its last `pieces` pieces. Stamped
/// before the write, not after: the client may read the bytes (and stamp them) before the
/// write's completion wakes this task, so only a stamp before the write is never later than
/// the client's.
fn stamp_written(sent: &mut Option<(SendLog, SentResponse)>, pieces: &mut usize) {
    if let Some((_, response)) = sent {
        let at_ns = monotonic_ns();
        response.written_ns.extend(std::iter::repeat_n(at_ns, *pieces));
    }
    *pieces = 0;
}

/// Writes and counts `out`; returns it emptied, or `None` when the write failed.
async fn flush<S: AsyncWriteRent>(
    stream: &mut S,
    out: Vec<u8>,
    counters: &Counters,
) -> Option<Vec<u8>> {
    counters.bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
    let (res, mut out) = stream.write_all(out).await;
    res.ok()?;
    out.clear();
    Some(out)
}

/// Holds the connection open without sending, until the client closes it (or the runtime
/// stops and drops this task).
async fn stall<S: AsyncReadRent>(mut stream: S) {
    let mut buf = Vec::with_capacity(4096);
    loop {
        let (res, b) = stream.read(buf).await;
        buf = b;
        buf.clear();
        match res {
            Ok(n) if n > 0 => {}
            _ => return,
        }
    }
}

/// Ends every task of a worker when the server stops: each task runs under `guard`, which
/// drops the task's future (and so closes its socket) once `fire` is called.
#[derive(Default)]
struct StopSignal {
    fired: Cell<bool>,
    next_id: Cell<u64>,
    live: Cell<usize>,
    wakers: RefCell<HashMap<u64, Waker>>,
}

impl StopSignal {
    fn fire(&self) {
        self.fired.set(true);
        let wakers: Vec<Waker> = self.wakers.borrow_mut().drain().map(|(_, w)| w).collect();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Runs `fut` until it ends or the signal fires. A monoio task's waker is the same on
    /// every poll, so it is registered once.
    async fn guard(self: Rc<Self>, fut: impl Future<Output = ()>) {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        self.live.set(self.live.get() + 1);
        {
            // The future lives in this block, so it (and its socket) is gone before `live`
            // drops.
            let mut fut = std::pin::pin!(fut);
            let mut registered = false;
            poll_fn(|cx| {
                if self.fired.get() || fut.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(());
                }
                if !registered {
                    self.wakers.borrow_mut().insert(id, cx.waker().clone());
                    registered = true;
                }
                Poll::Pending
            })
            .await;
        }
        self.wakers.borrow_mut().remove(&id);
        self.live.set(self.live.get() - 1);
    }
}
