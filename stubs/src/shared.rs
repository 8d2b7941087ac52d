//! The state a stub server's worker threads share: the configuration and precompiled
//! responses, the stop flag and wake sockets, per-worker counters, and the addresses clients
//! came from; and the totals read from it.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::config::StubConfig;
use crate::handler::Precompiled;
use crate::prefix_cache::{PrefixCacheTotals, SharedPrefixCache};

/// Per-worker counters, each on its own cache line so workers never share one.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct Counters {
    /// Requests framed.
    pub requests: AtomicU64,
    /// Response bytes written.
    pub bytes: AtomicU64,
    /// Connections accepted.
    pub accepted: AtomicU64,
}

/// State shared by the worker threads.
pub struct Shared {
    /// The configuration.
    pub cfg: StubConfig,
    /// The `created` field of every response.
    pub created_unix_s: u64,
    /// The max-throughput stub's responses, when it has no faults to inject.
    pub precompiled: Option<Precompiled>,
    /// Set once to stop every thread.
    pub stop: AtomicBool,
    /// The writing ends of each worker's wake-up socket pair; dropping them wakes the workers
    /// (EOF on their ends), so an idle worker needs no timer to notice a stop.
    pub wake: Mutex<Vec<UnixStream>>,
    /// One per worker.
    pub counters: Vec<Counters>,
    /// The TLS identity when the stub serves TLS (`StubConfig::tls`).
    pub tls: Option<crate::tls::StubTls>,
    /// The distinct addresses connections came from, the first `PEER_ADDRESSES_MAX` of them
    /// (noted once per accepted connection, never per request).
    pub peers: Mutex<BTreeSet<IpAddr>>,
    /// The variable stub's prefix cache (`VariableConfig::prefix_cache`), one for all workers.
    pub prefix_cache: Option<SharedPrefixCache>,
}

/// Distinct client addresses a server remembers (what `peer_addresses` reports).
pub const PEER_ADDRESSES_MAX: usize = 64;

impl Shared {
    /// Notes the address an accepted connection came from.
    pub fn note_peer(&self, ip: IpAddr) {
        let mut peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if peers.len() < PEER_ADDRESSES_MAX {
            peers.insert(ip);
        }
    }

    pub(crate) fn totals(&self) -> StubTotals {
        let sum = |f: fn(&Counters) -> &AtomicU64| -> u64 {
            self.counters.iter().map(|c| f(c).load(Ordering::Relaxed)).sum()
        };
        let peers = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        StubTotals {
            requests: sum(|c| &c.requests),
            connections: sum(|c| &c.accepted),
            peers: peers.iter().copied().collect(),
            prefix_cache: self
                .prefix_cache
                .as_ref()
                .map(|c| c.lock().unwrap_or_else(|e| e.into_inner()).totals()),
        }
    }
}

/// What a server has served so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StubTotals {
    /// Requests framed.
    pub requests: u64,
    /// Connections accepted.
    pub connections: u64,
    /// The distinct addresses they came from (at most `PEER_ADDRESSES_MAX`), in order.
    pub peers: Vec<IpAddr>,
    /// The prefix cache's counts, when the stub has one.
    pub prefix_cache: Option<PrefixCacheTotals>,
}

impl std::fmt::Display for StubTotals {
    /// `R requests on C connections from A, B`: the line `llm-loadgen stub` prints when it
    /// stops.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} requests on {} connections from ", self.requests, self.connections)?;
        if self.peers.is_empty() {
            return write!(f, "no address");
        }
        for (i, peer) in self.peers.iter().enumerate() {
            write!(f, "{}{peer}", if i == 0 { "" } else { ", " })?;
        }
        Ok(())
    }
}
