//! The terminal under the live view: console's stderr, seen by indicatif one column narrower
//! than it is and with hard line breaks between a frame's lines. indicatif pads each line with
//! spaces to the full width and lets the terminal wrap it, which makes a whole frame one
//! soft-wrapped line; a terminal that reflows on resize (tmux, VTE, iTerm2, kitty) then re-wraps
//! it as a block and indicatif's next redraw leaves stale rows behind. With a break after every
//! line and no line at the last column, a resize only splits the lines longer than the new
//! width, which the view can count and clear (`view.rs`).

use std::io;
use std::sync::Mutex;

use console::Term;
use indicatif::TermLike;

/// Where indicatif is in writing a frame: each line is a `write_str` of the line, then one of
/// spaces to pad it.
#[derive(Debug, Default, Clone, Copy)]
struct Writes {
    /// A line was just written: the next `write_str` of spaces is its padding.
    after_line: bool,
    /// A padding was dropped: the next line starts with a line break.
    break_due: bool,
}

#[derive(Debug)]
pub struct LineTerm {
    term: Term,
    writes: Mutex<Writes>,
}

impl LineTerm {
    pub fn stderr() -> LineTerm {
        LineTerm { term: Term::buffered_stderr(), writes: Mutex::new(Writes::default()) }
    }

    fn writes(&self) -> std::sync::MutexGuard<'_, Writes> {
        self.writes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A cursor move or clear between frames: no line is pending.
    fn between_lines(&self) {
        *self.writes() = Writes::default();
    }
}

/// The terminal's width: at least 20 columns, so a frame always has room for its bar.
pub fn terminal_width() -> usize {
    usize::from(Term::stderr().size().1).max(20)
}

impl TermLike for LineTerm {
    fn width(&self) -> u16 {
        // One column short of the edge: no line ever fills a row, so none wraps.
        (terminal_width() - 1) as u16
    }

    fn height(&self) -> u16 {
        self.term.size().0
    }

    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        self.between_lines();
        self.term.move_cursor_up(n)
    }

    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        self.between_lines();
        self.term.move_cursor_down(n)
    }

    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        self.term.move_cursor_right(n)
    }

    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        self.term.move_cursor_left(n)
    }

    fn write_line(&self, s: &str) -> io::Result<()> {
        self.between_lines();
        self.term.write_line(s)
    }

    fn write_str(&self, s: &str) -> io::Result<()> {
        let mut w = self.writes();
        if w.after_line && s.bytes().all(|b| b == b' ') {
            // The padding: replaced by a line break before the next line (none after the last,
            // so the cursor stays on the frame's last row, where indicatif expects it).
            *w = Writes { after_line: false, break_due: true };
            return Ok(());
        }
        if w.break_due {
            self.term.write_str("\n")?;
        }
        *w = Writes { after_line: true, break_due: false };
        drop(w);
        self.term.write_str(s)
    }

    fn clear_line(&self) -> io::Result<()> {
        self.between_lines();
        self.term.clear_line()
    }

    fn flush(&self) -> io::Result<()> {
        self.between_lines();
        self.term.flush()
    }
}
