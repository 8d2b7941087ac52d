//! `StubServer`: binds the listeners, starts one worker thread per listener (pinned when
//! asked), prints stats when asked, and stops and joins them all.

use std::collections::BTreeSet;
use std::io;
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::config::{StubConfig, StubKind};
use crate::handler::Precompiled;
use crate::listen::bind_listeners;
use crate::prefix_cache::PrefixCache;
use crate::shared::{Counters, Shared, StubTotals};

/// Raises this process's RLIMIT_NOFILE soft limit to its hard limit: a stub holds one
/// descriptor per client connection, and a soft limit of 1,024 (a common default) would
/// make it stop accepting long before a load generator stops connecting.
fn raise_fd_soft_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            // Raising the soft limit up to the hard one is always permitted.
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

/// A running stub server. Dropping it stops it.
pub struct StubServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

/// A handle that stops a server from another thread (e.g. a signal handler thread).
#[derive(Clone)]
pub struct StopHandle {
    shared: Arc<Shared>,
    stats: Option<std::thread::Thread>,
}

impl StopHandle {
    /// Requests, connections and their source addresses so far (also after the server
    /// stopped).
    pub fn totals(&self) -> StubTotals {
        self.shared.totals()
    }

    /// Asks every thread of the server to stop; `StubServer::wait` then returns.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.lock().unwrap_or_else(|e| e.into_inner()).clear();
        if let Some(t) = &self.stats {
            t.unpark();
        }
    }
}

impl StubServer {
    /// Binds every worker's listener and starts the workers; connections made after it
    /// returns are accepted (the listeners exist before it returns).
    /// It raises the process's soft fd limit to the hard one first (`raise_fd_soft_limit`).
    pub fn start(cfg: StubConfig) -> io::Result<StubServer> {
        raise_fd_soft_limit();
        let workers = cfg.workers.max(1);
        check_cores(cfg.pin_cores.as_deref())?;
        let listeners = bind_listeners(SocketAddr::new(cfg.host, cfg.port), workers)?;
        let addr = listeners[0].local_addr()?;
        let created_unix_s = cfg.created_unix_s.unwrap_or_else(|| {
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
        });
        let precompiled = (cfg.kind == StubKind::MaxThroughput && !cfg.faults.any())
            .then(|| Precompiled::build(&cfg, created_unix_s));
        // Made once per server: every worker serves the same certificate.
        let tls = if cfg.tls { Some(crate::tls::StubTls::generate()?) } else { None };
        let prefix_cache = shared_prefix_cache(&cfg);
        let mut wake_senders = Vec::with_capacity(workers);
        let mut wake_receivers = Vec::with_capacity(workers);
        for _ in 0..workers {
            let (tx, rx) = UnixStream::pair()?;
            rx.set_nonblocking(true)?;
            wake_senders.push(tx);
            wake_receivers.push(rx);
        }
        let shared = Arc::new(Shared {
            counters: (0..workers).map(|_| Counters::default()).collect(),
            cfg,
            created_unix_s,
            precompiled,
            tls,
            stop: AtomicBool::new(false),
            wake: Mutex::new(wake_senders),
            peers: Mutex::new(BTreeSet::new()),
            prefix_cache,
        });
        let mut threads = Vec::with_capacity(workers + 1);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let pairs = listeners.into_iter().zip(wake_receivers);
        for (index, (listener, wake)) in pairs.enumerate() {
            let for_thread = shared.clone();
            let ready = ready_tx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("stub-worker-{index}"))
                .spawn(move || worker_thread(for_thread, index, listener, wake, ready));
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(e) => return Err(abort_start(&shared, threads, e)),
            }
        }
        drop(ready_tx);
        for _ in 0..workers {
            let report = ready_rx.recv().unwrap_or_else(|_| {
                Err(io::Error::other("a stub worker exited before it was ready"))
            });
            if let Err(e) = report {
                return Err(abort_start(&shared, threads, e));
            }
        }
        if shared.cfg.stats {
            let shared = shared.clone();
            threads.push(std::thread::Builder::new().name("stub-stats".into()).spawn(
                move || {
                    stats_loop(&shared);
                },
            )?);
        }
        Ok(StubServer { addr, shared, threads })
    }

    /// The address every worker listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://HOST:PORT`, or `https://HOST:PORT` when the stub serves TLS.
    pub fn url(&self) -> String {
        let scheme = if self.shared.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The PEM certificate of the CA that signed the stub's certificate (TLS stubs only): what
    /// a client trusts to verify it.
    pub fn ca_pem(&self) -> Option<&str> {
        self.shared.tls.as_ref().map(|t| t.ca_pem.as_str())
    }

    /// A handle that stops the server from elsewhere.
    pub fn stop_handle(&self) -> StopHandle {
        let stats = if self.shared.cfg.stats {
            self.threads.last().map(|t| t.thread().clone())
        } else {
            None
        };
        StopHandle { shared: self.shared.clone(), stats }
    }

    /// Connections accepted so far, all workers.
    pub fn connections_accepted(&self) -> u64 {
        self.shared.counters.iter().map(|c| c.accepted.load(Ordering::Relaxed)).sum()
    }

    /// Requests framed so far, summed over workers.
    pub fn requests_total(&self) -> u64 {
        self.shared.counters.iter().map(|c| c.requests.load(Ordering::Relaxed)).sum()
    }

    /// Requests, connections and their source addresses so far.
    pub fn totals(&self) -> StubTotals {
        self.shared.totals()
    }

    /// Response bytes written so far, summed over workers.
    pub fn bytes_total(&self) -> u64 {
        self.shared.counters.iter().map(|c| c.bytes.load(Ordering::Relaxed)).sum()
    }

    /// Stops every thread, closes the listeners and connections, and joins.
    pub fn stop(mut self) {
        self.stop_handle().stop();
        self.join();
    }

    /// Blocks until a `StopHandle` stops the server, then joins its threads.
    pub fn wait(mut self) {
        self.join();
    }

    fn join(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for StubServer {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.stop_handle().stop();
            self.join();
        }
    }
}

/// Rejects pin cores this process may not run on (core_affinity aborts on ids past the
/// CPU-set size, so they must never reach it).
fn check_cores(cores: Option<&[usize]>) -> io::Result<()> {
    let Some(cores) = cores else { return Ok(()) };
    let allowed: Vec<usize> =
        core_affinity::get_core_ids().unwrap_or_default().into_iter().map(|c| c.id).collect();
    match cores.iter().find(|c| !allowed.contains(c)) {
        Some(bad) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot pin a stub worker to core {bad}: usable cores are {allowed:?}"),
        )),
        None => Ok(()),
    }
}

/// Stops and joins the workers started so far and passes `e` on.
fn abort_start(shared: &Shared, threads: Vec<JoinHandle<()>>, e: io::Error) -> io::Error {
    shared.stop.store(true, Ordering::Release);
    shared.wake.lock().unwrap_or_else(|e| e.into_inner()).clear();
    threads.into_iter().for_each(|t| drop(t.join()));
    e
}

fn worker_thread(
    shared: Arc<Shared>,
    index: usize,
    listener: std::net::TcpListener,
    wake: UnixStream,
    ready: std::sync::mpsc::Sender<io::Result<()>>,
) {
    if let Some(cores) = shared.cfg.pin_cores.as_ref().filter(|c| !c.is_empty()) {
        let id = cores[index % cores.len()];
        if !core_affinity::set_for_current(core_affinity::CoreId { id }) {
            let msg = format!("cannot pin stub worker {index} to core {id}");
            let _ = ready.send(Err(io::Error::other(msg)));
            return;
        }
    }
    crate::worker::run(shared, index, listener, wake, ready);
}

fn stats_loop(shared: &Shared) {
    let sum = |f: fn(&Counters) -> &AtomicU64| -> u64 {
        shared.counters.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
    };
    let (mut last_requests, mut last_bytes) = (0u64, 0u64);
    let mut last = Instant::now();
    while !shared.stop.load(Ordering::Acquire) {
        let due = last + Duration::from_secs(1);
        let now = Instant::now();
        if now < due {
            std::thread::park_timeout(due - now);
            continue;
        }
        let (requests, bytes) = (sum(|c| &c.requests), sum(|c| &c.bytes));
        let secs = now.duration_since(last).as_secs_f64();
        eprintln!(
            "stats: {:.0} req/s | {:.2} MB/s | {requests} total",
            (requests - last_requests) as f64 / secs,
            (bytes - last_bytes) as f64 / secs / 1e6
        );
        (last_requests, last_bytes, last) = (requests, bytes, now);
    }
}

/// The cache a server's workers share, when its configuration asks for one (the variable stub
/// with `VariableConfig::prefix_cache`).
fn shared_prefix_cache(cfg: &StubConfig) -> Option<crate::prefix_cache::SharedPrefixCache> {
    match (cfg.kind, &cfg.variable.prefix_cache) {
        (StubKind::Variable, Some(pc)) => {
            Some(Arc::new(Mutex::new(PrefixCache::new(pc.cache_tokens))))
        }
        _ => None,
    }
}
