//! loadgen-worker: the worker process's HTTP/1.1 client.

pub mod adapter;
mod exit;
pub mod http;
pub mod request;
mod run;
pub mod synthetic;
pub mod video_request;

pub use exit::{EXIT_COORDINATOR_GONE, EXIT_OK, EXIT_SETUP_FAILED};
pub use run::{
    endpoint_slot_count, endpoint_url, run_worker, slot_endpoint, WorkerEndpoint, WorkerSpec,
};
