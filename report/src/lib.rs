//! loadgen-report: a run's report. The report files of a finished run (`report.txt`,
//! `performance/result_summary.json`, `metrics/final_snapshot.json`) and the short summary
//! printed on stdout; one `ResultSummary`, written and read back; the replay and rebuild of a
//! finished run from its events.jsonl, merge's core, the data behind plots and early stopping.
//! The run, `report`, `merge`, `plot` and `early-stopping` all go through it: one statistics
//! path.

pub mod accuracy;
pub mod agentic;
mod client_wait;
pub mod compliance;
pub mod dir;
pub mod early_stop;
mod files;
pub mod goodput;
mod issue_lag;
pub mod merge;
pub mod plot_data;
pub mod profiling;
pub mod rebuild;
pub mod replay;
mod reserve;
mod run_info;
mod sample_idx_map;
mod shard;
mod summary;
pub mod sweep;
pub mod sweep_compare;
mod text;
mod write;

#[cfg(test)]
mod tests;

pub use client_wait::{client_wait_info, client_wait_warning, lag_is_the_wait, ClientWaitInfo};
pub use dir::{open_existing, read_existing, ReportDir};
pub use files::{unwritten_message, write_accuracy, write_all_files, write_shard};
pub use issue_lag::{issue_lag, IssueLag};
pub use reserve::{report_reserve_bytes, SpaceReserve};
pub use run_info::{
    add_failures, incomplete_reason, run_info, run_warnings, ClientTokenCounting, EndpointInfo,
    FailureKindCount, LoadPatternInfo, MixedClocks, RunInfo, WarmupInfo,
};
pub use sample_idx_map::{idx_phases, slice_rows, write_sample_idx_map, PerfRows};
pub use shard::{
    late_start_warning, shard_file, FailureCounts, SampleIds, ShardFile, ShardInfo,
    SHARD_FILE_FORMAT,
};
pub use summary::{is_complete, result_summary, ChunkBlocks, ResultSummary, SeriesSummary};
pub use text::{console_summary, report_txt, with_accuracy_block};
pub use write::{write_atomic, write_atomic_with, write_report_files, OpenDir, Unwritten};
