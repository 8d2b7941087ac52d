//! The one clock of the project: every stamp a record carries is CLOCK_MONOTONIC in
//! nanoseconds, read the same way by the coordinator and its workers.

/// CLOCK_MONOTONIC in nanoseconds: the one clock of the project (coordinator and workers alike).
pub fn monotonic_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always available on Linux");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}
