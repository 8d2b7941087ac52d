//! loadgen-coordinator: plan to CPU sets, fork and pin, scheduler, aggregator.
pub mod metrics;
