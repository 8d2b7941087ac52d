//! loadgen-worker: the worker process's HTTP/1.1 client.

pub mod adapter;
pub mod http;
pub mod request;
mod run;
pub mod synthetic;

pub use run::{
    endpoint_slot_count, endpoint_url, run_worker, slot_endpoint, WorkerEndpoint, WorkerSpec,
    EXIT_COORDINATOR_GONE, EXIT_OK, EXIT_SETUP_FAILED,
};
