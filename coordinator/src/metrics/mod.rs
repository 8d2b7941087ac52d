//! Metrics from the per-sample table to the final snapshot, under both token bases.

pub mod basis;
pub mod table;
pub mod usage;

pub use basis::{basis_key, TokenCountSource};
pub use table::{FinishKind, RunCounters, SampleRow, SampleTable};
pub use usage::{classify_usage, UsageClass};
