//! loadgen-worker: the worker process's HTTP/1.1 client.

pub mod adapter;
pub mod http;
pub mod request;
mod run;
pub mod synthetic;

pub use run::{
    endpoint_slot_count, endpoint_url, run_worker, slot_endpoint, WorkerEndpoint, WorkerSpec,
    EXIT_COORDINATOR_GONE, EXIT_OK, EXIT_SETUP_FAILED, MAX_ENDPOINTS, NO_ENDPOINT,
};

/// CLOCK_MONOTONIC in nanoseconds: the one clock of the project (coordinator and workers alike).
pub fn monotonic_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always available on Linux");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}
