//! loadgen-coordinator: plan to CPU sets, fork and pin, scheduler, aggregator, run lifecycle.

pub mod aggregate;
pub mod conversation;
pub mod cpu;
pub mod end;
pub mod fork;
pub mod live;
pub mod metrics;
pub mod order;
pub mod phase;
pub mod run;
pub mod schedule;
pub mod settle;
pub mod shared;
pub mod thread_cpu;

pub use metrics::TokenCountSource;
pub use run::{interrupted, run, PhaseHook, RunEnd, RunError, RunOutput, RunSpec, WorkerMain};
pub use schedule::LoadPattern;
