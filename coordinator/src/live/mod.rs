//! The live view: what a run shows while it runs. The aggregator keeps live HdrHistograms and
//! counters (`stats.rs`) and publishes a snapshot to a `Board`; a view thread draws it on a
//! terminal (indicatif, `view.rs`) or prints a plain progress line every few seconds.

pub mod format;
pub mod lag;
mod spec;
pub mod stats;
mod term;
mod view;

pub use format::RunFacts;
pub use lag::LiveLag;
pub use spec::{LiveSpec, ViewMode, DRAW_EVERY, PLAIN_INTERVAL};
pub use stats::{Board, Completion, LiveStats, Phase, Snapshot};
pub use view::View;
