//! The live view's settings: how it draws (terminal, plain lines or off), colour, what it
//! shows of the run, and how often it draws.

use std::time::Duration;

use super::format::RunFacts;

/// How the view draws, decided by the binary from `--quiet` and whether stderr is a terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ViewMode {
    /// `--quiet`: nothing, and the aggregator keeps no live statistics.
    #[default]
    Off,
    /// stderr is a terminal: a bar and the figures, redrawn 4 times a second.
    Terminal,
    /// stderr is a pipe or a file: one plain line every `LiveSpec::plain_interval`.
    Plain,
}

/// The plain progress line's period unless the binary sets another.
pub const PLAIN_INTERVAL: Duration = Duration::from_secs(5);

/// How often the terminal view redraws.
pub const DRAW_EVERY: Duration = Duration::from_millis(250);

/// The live view's settings (the binary's `RunSpec::live`).
#[derive(Debug, Clone)]
pub struct LiveSpec {
    pub mode: ViewMode,
    /// Colour in the terminal view (off under `NO_COLOR`).
    pub color: bool,
    /// What the view shows of the run: model, endpoints (never a secret), counts, cap.
    pub facts: RunFacts,
    pub plain_interval: Duration,
}

impl LiveSpec {
    /// No view at all.
    pub fn off() -> LiveSpec {
        LiveSpec {
            mode: ViewMode::Off,
            color: false,
            facts: RunFacts::default(),
            plain_interval: PLAIN_INTERVAL,
        }
    }

    pub fn enabled(&self) -> bool {
        self.mode != ViewMode::Off
    }
}
