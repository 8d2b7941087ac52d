//! Metrics from the per-sample table to the final snapshot, under both token bases.

pub mod basis;
pub mod column;
pub mod early_stop;
pub mod endpoints;
pub mod fixture;
pub mod goodput;
pub mod select;
pub mod series;
pub mod snapshot;
pub mod sort_spool;
pub mod spool;
pub mod stats;
pub mod table;
pub mod tokens;
pub mod usage;

pub use basis::{basis_key, TokenCountSource};
pub use endpoints::{endpoint_stats, EndpointStat};
pub use goodput::{goodput, Goodput, Objective, ObjectiveOutcome, SloMetric};
pub use series::{Num, SeriesStat, SummaryBlock};
pub use snapshot::{final_snapshot, CounterStat, MetricsOptions, RunState, Snapshot};
pub use table::{FinishKind, RunCounters, SampleRow, SampleTable};
pub use tokens::{OslPaired, TokenSeries, UsageTally};
pub use usage::{classify_usage, UsageClass};
