//! Workers and connections: how many, how the pool is split, which open before the start, and
//! where they connect from.

use super::*;

use loadgen_wire::RingSizes;

/// Default connections per worker when `--max-connections` is not given.
pub const CONNECTIONS_PER_WORKER_DEFAULT: usize = 32;

/// Warm connections a Poisson worker opens at most under auto: they are sized for a second of
/// latency at the target rate (`poisson_warm_estimate`), far more than a fast endpoint keeps
/// busy, so the rest of the pool opens on demand instead of delaying the start.
pub const POISSON_WARM_CONNECTIONS_PER_WORKER_MAX: usize = 1024;

/// Connections a Poisson run opens before the start under auto, across all workers: a second
/// of latency at the target rate (Little's law with one second assumed), at least the
/// default per worker.
pub fn poisson_warm_estimate(target_qps: f64, workers: usize) -> usize {
    let rate = (target_qps.ceil() as usize).min(POISSON_CONNECTIONS_DEFAULT_MAX);
    (workers * CONNECTIONS_PER_WORKER_DEFAULT).max(rate)
}

/// Part `index` of `total` split over `parts` as evenly as possible (the first ones get the
/// remainder): how the pool and explicit warm-up counts are spread across workers.
pub fn split_share(total: usize, parts: usize, index: usize) -> usize {
    let parts = parts.max(1);
    total / parts + usize::from(index < total % parts)
}

/// Connections worker `index` of `workers` opens before the start, out of its pool share
/// `share` (`--client.warmup-connections`). Auto (`None`): the whole share for offline and
/// concurrency runs (a closed loop of N needs its N connections at t=0); for Poisson its part
/// of `poisson_warm_estimate`, at most `POISSON_WARM_CONNECTIONS_PER_WORKER_MAX` (the pool's
/// ceiling is what the load may grow to, not what opens). An explicit N is split across the
/// workers like the pool and clamped to the share; 0 stays 0 (the worker still opens one, to
/// check the endpoint answers).
pub fn warm_connections(
    pattern: LoadPattern,
    warmup_connections: Option<usize>,
    workers: usize,
    index: usize,
    share: usize,
) -> usize {
    match (warmup_connections, pattern) {
        (Some(n), _) => split_share(n, workers, index).min(share),
        (None, LoadPattern::Poisson { target_qps, .. }) => {
            split_share(poisson_warm_estimate(target_qps, workers), workers, index)
                .min(share)
                .min(POISSON_WARM_CONNECTIONS_PER_WORKER_MAX)
        }
        (None, _) => share,
    }
}

/// The worker processes and their connection pool, final: the run forks `workers` and splits
/// `max_connections` over them (`split_share`).
#[derive(Debug, Clone, PartialEq)]
pub struct Connections {
    /// Worker processes (default: `loadgen_coordinator::cpu::default_worker_count`, one per
    /// core less the coordinator's and an embedded stub's; at most the connections).
    pub workers: usize,
    /// Connections across all workers: the pool's ceiling. Default: 32 per worker offline;
    /// exactly N for a closed loop of N; for Poisson `POISSON_CONNECTIONS_DEFAULT_MAX` within
    /// the fd budget (`poisson_pool_ceiling`), opened on demand as the load needs them.
    pub max_connections: usize,
    /// `--max-connections` was given (the ceiling is the user's, not the default's).
    pub max_connections_given: bool,
    /// Local addresses the connections leave from, in turn (`--source-addresses`); empty =
    /// the kernel's choice, or loopback ones picked at run time past one address's ports
    /// (`loadgen_worker::http::ports::source_addresses_for`).
    pub source_addresses: Vec<std::net::IpAddr>,
    pub cpu_affinity: bool,
    /// Connections opened before the clock starts, across all workers: `None` = auto,
    /// `Some(0)` = one per worker (`--client.warmup-connections`, -1 = auto); see
    /// `warm_connections`. The rest of the pool opens on demand.
    pub warmup_connections: Option<usize>,
    /// How long workers may take to start and connect (`--client.worker-initialization-timeout`).
    pub worker_init_timeout_ms: u64,
    /// Each worker's issue and record rings, sized for its share of the pool.
    pub ring_sizes: RingSizes,
    /// Use epoll even where io_uring works (`MONOIO_FORCE_LEGACY_DRIVER` set, as monoio reads it).
    pub force_epoll: bool,
}

/// Record ring bytes per worker: room for many responses between two aggregator passes.
pub const RECORD_RING_BYTES: usize = 8 << 20;

pub(super) fn resolve_connections(
    config: &Config,
    pattern: LoadPattern,
    endpoints: &[EndpointUrl],
    host: &Host,
) -> Result<Connections, AppError> {
    let (workers, max_connections) =
        resolve_workers(config, pattern, host.cores.len(), host.fd_hard_limit)?;
    let client = &config.settings.client;
    if let (LoadPattern::Concurrency { n } | LoadPattern::Agentic { n }, given @ 1..) =
        (pattern, client.max_connections)
    {
        if (given as u64) < n {
            return Err(AppError::Input(format!(
                "--max-connections {given} is below --concurrency {n}: a closed loop of {n} \
                 holds {n} connections; raise --max-connections or leave it out"
            )));
        }
    }
    let per_worker = max_connections.div_ceil(workers);
    Ok(Connections {
        workers,
        max_connections,
        max_connections_given: client.max_connections > 0,
        source_addresses: resolve_source_addresses(&config.source_addresses, endpoints)?,
        cpu_affinity: config.enable_cpu_affinity,
        warmup_connections: resolve_warmup_connections(client.warmup_connections)?,
        worker_init_timeout_ms: seconds_to_ms(
            client.worker_initialization_timeout,
            "worker initialization",
        )?,
        ring_sizes: RingSizes {
            issue_slots: (per_worker * 2).clamp(1024, 1 << 16),
            record_bytes: RECORD_RING_BYTES,
        },
        force_epoll: std::env::var_os("MONOIO_FORCE_LEGACY_DRIVER").is_some(),
    })
}

/// The reference's rule on `num_workers` (-1 or 1 and more) and `max_connections`; how many
/// workers this machine's cores allow is a run's check, not the file's: the file's workers
/// are checked as one, on a nominal machine (which no outcome depends on).
pub(super) fn check_worker_settings(config: &Config, pattern: LoadPattern) -> Result<(), AppError> {
    let mut as_file = config.clone();
    let workers = &mut as_file.settings.client.num_workers;
    if *workers > 0 {
        *workers = 1;
    }
    let (cores, fd_hard_limit) = (1, FD_HEADROOM + POISSON_CONNECTIONS_DEFAULT_MAX as u64);
    resolve_workers(&as_file, pattern, cores, fd_hard_limit).map(|_| ())
}

/// The most connections a Poisson run opens by default (`--max-connections` overrides): an
/// open loop keeps issuing whatever the server's latency, so by Little's law it needs rate ×
/// latency connections, which no rate alone predicts (50 QPS of 4 s streams hold 200). The
/// pool grows to what the load needs, up to this, instead of queueing samples in the client.
pub const POISSON_CONNECTIONS_DEFAULT_MAX: usize = 16_384;

/// The default Poisson pool ceiling within the file-descriptor budget: `workers` processes
/// each hold their share beside `FD_HEADROOM` descriptors, under a hard limit of
/// `fd_hard_limit` (`ulimit -Hn`); the embedded stub holds every connection in one process.
pub fn poisson_pool_ceiling(workers: usize, fd_hard_limit: u64, embedded: bool) -> usize {
    let per_process = fd_hard_limit.saturating_sub(FD_HEADROOM) as usize;
    let fd_budget = if embedded { per_process } else { per_process.saturating_mul(workers) };
    POISSON_CONNECTIONS_DEFAULT_MAX.min(fd_budget).max(workers * CONNECTIONS_PER_WORKER_DEFAULT)
}

/// File descriptors a process needs beside its connections (rings, wake-ups, stdio,
/// io_uring, the report files).
pub const FD_HEADROOM: u64 = 256;

/// The workers and the connection pool on a machine of `cores` CPUs whose hard descriptor
/// limit is `fd_hard_limit` (`Host`).
pub(super) fn resolve_workers(
    config: &Config,
    pattern: LoadPattern,
    cores: usize,
    fd_hard_limit: u64,
) -> Result<(usize, usize), AppError> {
    let client = &config.settings.client;
    let embedded = config.endpoint_config.endpoints.is_empty();
    let workers = match client.num_workers {
        -1 => default_worker_count(cores, embedded),
        n if n > 0 => check_worker_count(n as u64, cores)?,
        n => {
            return Err(AppError::Input(format!(
                "--workers {n} is not valid; give a positive count or -1 for auto"
            )))
        }
    };
    // Enough connections that the pattern, not the pool, bounds what is in flight: a closed
    // loop needs one per slot; an open loop rate × latency, which grows on demand up to the
    // ceiling (`POISSON_CONNECTIONS_DEFAULT_MAX`).
    let auto = match pattern {
        LoadPattern::Poisson { .. } => poisson_pool_ceiling(workers, fd_hard_limit, embedded),
        _ => workers * CONNECTIONS_PER_WORKER_DEFAULT,
    };
    let max_connections = match client.max_connections {
        -1 => auto,
        n if n > 0 => n as usize,
        n => {
            return Err(AppError::Input(format!(
                "--max-connections {n} is not valid; give a positive count or -1 for auto"
            )))
        }
    };
    if let LoadPattern::Concurrency { n } | LoadPattern::Agentic { n } = pattern {
        // A closed loop of N holds exactly N connections, one per sample in flight; an
        // agentic run one per conversation in flight.
        let n = n as usize;
        return Ok((workers.clamp(1, n), n));
    }
    Ok((workers.min(max_connections).max(1), max_connections.max(1)))
}

/// `--source-addresses` as given → the addresses connections bind to: each an IP address
/// (IPv6 with or without brackets), not unspecified, multicast or broadcast, none twice, all
/// of one family and of the family of every endpoint given by address (the embedded stub
/// listens on 127.0.0.1). Whether each is an address of this host is checked at run time.
pub fn resolve_source_addresses(
    given: &[String],
    endpoints: &[EndpointUrl],
) -> Result<Vec<std::net::IpAddr>, AppError> {
    use std::net::IpAddr;
    let mut out: Vec<IpAddr> = Vec::with_capacity(given.len());
    for text in given.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
        let bare = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')).unwrap_or(text);
        let addr: IpAddr = bare.parse().map_err(|_| {
            AppError::Input(format!(
                "--source-addresses {text:?} is not an IP address; give local addresses such \
                 as 127.0.0.2 or 10.0.0.5, comma-separated"
            ))
        })?;
        let unusable = addr.is_unspecified()
            || addr.is_multicast()
            || addr == IpAddr::from(std::net::Ipv4Addr::BROADCAST);
        if unusable {
            return Err(AppError::Input(format!(
                "--source-addresses {text} cannot be a connection's source address; give \
                 addresses of this host's interfaces (ip addr shows them)"
            )));
        }
        if out.contains(&addr) {
            return Err(AppError::Input(format!(
                "--source-addresses lists {addr} twice; give each address once"
            )));
        }
        out.push(addr);
    }
    let Some(first) = out.first() else { return Ok(out) };
    let family = |a: &IpAddr| if a.is_ipv4() { "IPv4" } else { "IPv6" };
    if let Some(other) = out.iter().find(|a| a.is_ipv4() != first.is_ipv4()) {
        return Err(AppError::Input(format!(
            "--source-addresses mixes {} {first} and {} {other}; give addresses of the \
             endpoint's family only",
            family(first),
            family(other)
        )));
    }
    let embedded = [("the embedded stub at 127.0.0.1".to_string(), true)];
    let literal: Vec<(String, bool)> = endpoints
        .iter()
        .filter_map(|e| literal_host(&e.url).map(|ip| (e.url.clone(), ip.is_ipv4())))
        .collect();
    let targets = if endpoints.is_empty() { &embedded[..] } else { &literal[..] };
    if let Some((url, _)) = targets.iter().find(|(_, v4)| *v4 != first.is_ipv4()) {
        return Err(AppError::Input(format!(
            "--source-addresses {first} is {} but {url} is not; give addresses of the \
             endpoint's family",
            family(first)
        )));
    }
    Ok(out)
}

/// The host of an `http://host[:port][/…]` URL when it is an IP address literal.
pub(super) fn literal_host(url: &str) -> Option<std::net::IpAddr> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next()?.parse().ok();
    }
    let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
    host.parse().ok()
}

/// Workers allowed per core this process may run on (sched_getaffinity).
pub const WORKERS_PER_CORE_MAX: usize = 2;

/// Refuses a worker count far past the cores: each worker is a pinned process with its own
/// io_uring, rings and connection pool, so workers beyond the cores only add memory and
/// context switches (1,000 on 2 cores reached 3.8 GB and timed out connecting).
pub fn check_worker_count(workers: u64, cores: usize) -> Result<usize, AppError> {
    let limit = (cores.max(1) * WORKERS_PER_CORE_MAX) as u64;
    if workers > limit {
        return Err(AppError::Setup(format!(
            "--workers {workers} is more than {WORKERS_PER_CORE_MAX} per core on the {cores} \
             core(s) this process may run on (at most {limit}): each worker is a pinned process \
             with its own io_uring, rings and connections, so more workers than cores only \
             compete for them; lower --workers, or give -1 for one per core"
        )));
    }
    Ok(workers as usize)
}

pub(super) fn resolve_warmup_connections(value: i64) -> Result<Option<usize>, AppError> {
    match value {
        -1 => Ok(None),
        n if n >= 0 => Ok(Some(n as usize)),
        n => Err(AppError::Input(format!(
            "--client.warmup-connections {n} is not valid; give a count, 0 for none or -1 for auto"
        ))),
    }
}
