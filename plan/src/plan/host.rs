//! The facts of this machine and moment that resolution takes as an argument: read once by the
//! binary (`Host::read`), so `resolve_plan` reads no clock, no CPU set and no limit itself and a
//! test can hand it any machine.

use loadgen_coordinator::cpu::cores_available;

use super::{FD_HEADROOM, POISSON_CONNECTIONS_DEFAULT_MAX};

/// This machine and moment, as resolution sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The CPUs this process may run on (`loadgen_coordinator::cpu::cores_available`): the
    /// default worker count and the tokenizer pool's share follow them.
    pub cores: Vec<usize>,
    /// The hard RLIMIT_NOFILE of this process (what the run may raise the soft one to): the
    /// ceiling of an open loop's connection pool.
    pub fd_hard_limit: u64,
    /// Local time as `YYYYMMDD_HHMMSS`: the default report directory's suffix.
    pub local_timestamp: String,
    /// The wall clock in Unix ns: what `--start-at` is checked against.
    pub unix_now_ns: u64,
}

impl Host {
    /// This machine now. `local_timestamp` comes from the caller: local time takes libc's
    /// time zone conversion, which the binary holds (`commands::sys::local_timestamp`).
    pub fn read(local_timestamp: String) -> Host {
        Host {
            cores: cores_available(),
            fd_hard_limit: fd_hard_limit(),
            local_timestamp,
            unix_now_ns: super::unix_now_ns(),
        }
    }
}

/// The hard RLIMIT_NOFILE of this process (what `raise_fd_limit` may raise the soft one to).
fn fd_hard_limit() -> u64 {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(FD_HEADROOM + POISSON_CONNECTIONS_DEFAULT_MAX as u64, |(_, hard)| hard)
}
