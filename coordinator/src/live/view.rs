//! The view thread: reads the aggregator's latest snapshot 4 times a second and draws it on
//! stderr, as an indicatif bar with the figures below it on a terminal, or as a plain line
//! every few seconds elsewhere. It only reads shared state; nothing waits for it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use loadgen_wire::InFlightTable;

use super::format::{self, Figures, RunFacts, RATE_HISTORY};
use super::lag::LiveLag;
use super::spec::{LiveSpec, ViewMode, DRAW_EVERY};
use super::stats::{Board, Quantiles, Snapshot};
use super::term::{terminal_width, LineTerm};
use crate::shared::Shared;

/// How long `View::finish` waits for the view to clear its lines: a terminal that stopped
/// reading (Ctrl-S, a paused pane) must not hold the end of the run.
pub const FINISH_WAIT: Duration = Duration::from_secs(1);

/// The running view; `finish` clears it from the screen.
pub struct View {
    stop: Sender<()>,
    /// Disconnected when the view thread has returned.
    done: Receiver<()>,
    handle: JoinHandle<()>,
}

impl View {
    /// Starts the view thread (none when the spec is off, or the thread cannot start: the run
    /// goes on without a view).
    /// `wires` are the workers' in-flight tables: what each has on the wire now.
    pub fn start(
        spec: LiveSpec,
        board: Arc<Board>,
        shared: Arc<Shared>,
        wires: Vec<InFlightTable>,
    ) -> Option<View> {
        if !spec.enabled() {
            return None;
        }
        let (stop, stop_rx) = bounded(1);
        let (done_tx, done) = bounded::<()>(1);
        let handle = std::thread::Builder::new()
            .name("live-view".into())
            .spawn(move || {
                draw_loop(&spec, &board, &Counts { shared, wires }, &stop_rx);
                // Its CPU over the run, for `-v`'s per-thread lines: the view's own cost.
                crate::thread_cpu::note("live-view", crate::thread_cpu::thread_cpu_ns());
                drop(done_tx);
            })
            .ok()?;
        Some(View { stop, done, handle })
    }

    /// Stops the view and waits until it has cleared its lines, `FINISH_WAIT` at most (a view
    /// stuck on a terminal that does not read is left behind; it ends with the process).
    pub fn finish(self) {
        drop(self.stop);
        if let Err(RecvTimeoutError::Disconnected) = self.done.recv_timeout(FINISH_WAIT) {
            let _ = self.handle.join();
        }
    }
}

/// Where the view reads what the run is doing: the scheduler's counters and the workers'
/// in-flight tables.
struct Counts {
    shared: Arc<Shared>,
    wires: Vec<InFlightTable>,
}

impl Counts {
    /// (requests on the wire, samples handed to a worker and not yet written). Samples a closed
    /// loop or a full pool queues in a worker are not in flight: the server has not seen them.
    fn in_flight_and_queued(&self) -> (u64, u64) {
        let unanswered = self.shared.in_flight();
        if self.wires.is_empty() {
            return (unanswered, 0);
        }
        let on_wire: u64 = self.wires.iter().map(InFlightTable::on_wire_count).sum();
        // The tables and the counters are read a moment apart: the wire never shows more than
        // is unanswered.
        let on_wire = on_wire.min(unanswered);
        (on_wire, unanswered - on_wire)
    }
}

/// Redraws every `DRAW_EVERY` until the sender is dropped.
fn draw_loop(spec: &LiveSpec, board: &Board, counts: &Counts, stop: &Receiver<()>) {
    let mut history: VecDeque<(u64, u64)> = VecDeque::with_capacity(RATE_HISTORY);
    let mut term =
        (spec.mode == ViewMode::Terminal).then(|| TermView::new(&spec.facts, spec.color));
    let mut last_line = Instant::now();
    // Nothing is ever sent: the sender's drop (`View::finish`) ends the wait and the loop.
    while let Err(RecvTimeoutError::Timeout) = stop.recv_timeout(DRAW_EVERY) {
        let snap = board.read();
        if history.back().is_none_or(|&(t, _)| t != snap.at_ns) {
            if history.len() == RATE_HISTORY {
                history.pop_front();
            }
            history.push_back((snap.at_ns, snap.completed));
        }
        let f = figures(&spec.facts, &snap, history.make_contiguous(), counts);
        match &mut term {
            Some(view) => view.draw(&spec.facts, &snap, &f),
            None if last_line.elapsed() >= spec.plain_interval => {
                last_line = Instant::now();
                eprintln!("{}", format::plain_line(&spec.facts, &snap, &f));
            }
            None => {}
        }
    }
    if let Some(view) = term.take() {
        view.finish();
    }
}

fn lag_quantiles(lag: &LiveLag) -> Option<Quantiles> {
    Some(Quantiles { p50_ns: lag.quantile_ns(0.5)?, p99_ns: lag.quantile_ns(0.99)? })
}

/// The figures of one draw, from the snapshot, its history and the counters shared with the
/// scheduler (in flight, issue lag).
fn figures(facts: &RunFacts, snap: &Snapshot, history: &[(u64, u64)], counts: &Counts) -> Figures {
    let elapsed_ns = format::tracked_ns(snap);
    let qps_now = format::qps_now(history);
    let qps_overall = format::per_second(snap.completed, elapsed_ns);
    let left = facts.expected.saturating_sub(snap.completed);
    let started = snap.tracking_start_ns != 0;
    let (in_flight, queued) = counts.in_flight_and_queued();
    Figures {
        phase: format::shown_phase(snap, queued),
        qps_now,
        qps_overall,
        in_flight,
        queued,
        lag: lag_quantiles(&counts.shared.issue_lag),
        eta_ns: started
            .then(|| format::eta_ns(left, qps_now, qps_overall, elapsed_ns, facts.cap_ns))
            .flatten(),
        tps_server: format::per_second(snap.tokens_server, elapsed_ns),
        tps_client: format::per_second(snap.tokens_client, elapsed_ns),
    }
}

/// The terminal view: an indicatif bar (a header line, the bar with the count and ETA, then the
/// figures) drawn on stderr at the width of each draw, and what the last frame looked like.
struct TermView {
    bar: ProgressBar,
    color: bool,
    width: usize,
    /// Columns of each row of the last frame, the blank row above it included.
    drawn: Vec<usize>,
    /// A resize put a blank row above the frame (see `forget_reflowed_frame`).
    blank_above: bool,
}

fn style(color: bool) -> ProgressStyle {
    let template = if color {
        "{prefix:.bold}\n{wide_bar:.cyan/blue} {msg}"
    } else {
        "{prefix}\n{wide_bar} {msg}"
    };
    // The templates are constants of this file, checked by a test.
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

impl TermView {
    fn new(facts: &RunFacts, color: bool) -> TermView {
        let bar = ProgressBar::with_draw_target(Some(facts.expected), draw_target());
        bar.set_style(style(color));
        TermView { bar, color, width: terminal_width(), drawn: Vec::new(), blank_above: false }
    }

    fn draw(&mut self, facts: &RunFacts, snap: &Snapshot, f: &Figures) {
        let width = terminal_width();
        if width != self.width && !self.drawn.is_empty() {
            self.forget_reflowed_frame(width);
        }
        self.width = width;
        let pct = if facts.expected == 0 {
            0.0
        } else {
            snap.completed as f64 * 100.0 / facts.expected as f64
        };
        let eta = f.eta_ns.map_or_else(|| "-".to_string(), format::eta);
        let mut msg = format!(
            "{}/{} {pct:.0}%  ETA {eta}",
            format::count(snap.completed),
            format::count(facts.expected)
        );
        // indicatif draws one column short of the edge (`LineTerm`).
        let columns = width - 1;
        let header = format::fit(&format::header(facts, f), columns);
        self.drawn.clear();
        if self.blank_above {
            self.drawn.push(0);
        }
        self.drawn.extend([header.chars().count(), columns]);
        for line in format::detail_lines(facts, snap, f) {
            let line = format::fit(&line, columns);
            self.drawn.push(line.chars().count());
            msg.push('\n');
            msg.push_str(&line);
        }
        self.bar.set_prefix(header);
        self.bar.set_message(msg);
        self.bar.set_position(snap.completed.min(facts.expected));
    }

    /// A terminal narrowed under the view splits the frame's lines that are now too long
    /// (tmux, VTE, iTerm2 and kitty reflow), so the frame spans more rows than indicatif drew
    /// and its redraw would leave the excess above. Clear the rows the old frame takes now and
    /// give indicatif a fresh target that draws below them.
    fn forget_reflowed_frame(&mut self, width: usize) {
        self.bar.set_draw_target(ProgressDrawTarget::hidden());
        let rows = format::rows_after_resize(&self.drawn, width);
        let term = console::Term::stderr();
        let _ = term.move_cursor_up(rows.saturating_sub(1));
        let _ = term.write_str("\r");
        let _ = term.clear_to_end_of_screen();
        // A hard line break: when the old frame's top had scrolled off (the terminal keeps the
        // cursor's row on a reflow), the row the clear started on continues a wrapped line in
        // the scrollback, and a frame drawn there would be joined to it on the next resize.
        let _ = term.write_line("");
        self.blank_above = true;
        self.bar.set_draw_target(draw_target());
        self.bar.set_style(style(self.color));
    }

    fn finish(self) {
        self.bar.finish_and_clear();
    }
}

fn draw_target() -> ProgressDrawTarget {
    ProgressDrawTarget::term_like_with_hz(Box::new(LineTerm::stderr()), 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_view_templates_parse() {
        for template in
            ["{prefix:.bold}\n{wide_bar:.cyan/blue} {msg}", "{prefix}\n{wide_bar} {msg}"]
        {
            assert!(ProgressStyle::with_template(template).is_ok(), "{template}");
        }
    }
}
