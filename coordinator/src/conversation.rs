//! An agentic run's conversations as the scheduler hands them out: each one a span of
//! consecutive dataset rows (its client turns, in order), issued to a worker as one
//! `IssueCmd::Conversation`, which runs the turns itself. The aggregator counts a conversation
//! finished when the record of its last turn arrives, which frees its worker's place for the
//! next one (`target_concurrency` conversations in flight). The first finish that finds no
//! conversation left to start closes the performance tracking window ([`TrackingWindow`]).

use std::sync::atomic::{AtomicU64, Ordering};

/// One conversation instance: rows `first_row .. first_row + turns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConversationSpan {
    pub first_row: u32,
    pub turns: u32,
}

/// Every conversation of the performance phase, in the order they start, and which rows end
/// one. The spans are laid out in row order from row 0 (one row per turn of each instance),
/// and an agentic run has no warm-up, so its performance samples are numbered as its rows:
/// sample `s` is row `s`, which names its conversation and turn in the event log.
#[derive(Debug, Clone, Default)]
pub struct ConversationPlan {
    spans: Vec<ConversationSpan>,
    /// Each span's conversation id as the log and the routing headers carry it (the
    /// reference's logical id: `<id>` or `<id>__repeat_<n>`).
    ids: Vec<String>,
    /// Each row's turn number in its conversation (the dataset's `turn`, counting every
    /// role's row, so client turns may be 1, 3, 5, …).
    turn_of_row: Vec<u32>,
    /// Bit r set: dataset row r is the last turn of its conversation.
    last_turn_rows: Vec<u64>,
}

impl ConversationPlan {
    /// The plan of `spans` with their `ids` and each row's turn number; the spans cover rows
    /// `0 .. turn_of_row.len()` in order, each at least one turn.
    pub fn new(spans: Vec<ConversationSpan>, ids: Vec<String>, turn_of_row: Vec<u32>) -> Self {
        debug_assert_eq!(spans.len(), ids.len());
        let rows = spans.iter().map(|s| s.first_row as usize + s.turns as usize).max();
        let mut last_turn_rows = vec![0u64; rows.unwrap_or(0).div_ceil(64)];
        for s in spans.iter().filter(|s| s.turns > 0) {
            let last = (s.first_row + s.turns - 1) as usize;
            last_turn_rows[last / 64] |= 1 << (last % 64);
        }
        ConversationPlan { spans, ids, turn_of_row, last_turn_rows }
    }

    /// The conversation id and turn number of row (and performance sample) `row`; `None`
    /// past the conversations (an accuracy phase's rows).
    pub fn label(&self, row: u64) -> Option<(&str, u32)> {
        let turn = *self.turn_of_row.get(usize::try_from(row).ok()?)?;
        let span = self.spans.partition_point(|s| u64::from(s.first_row) <= row).checked_sub(1)?;
        Some((self.ids[span].as_str(), turn))
    }

    pub fn spans(&self) -> &[ConversationSpan] {
        &self.spans
    }

    /// Samples of the whole plan: one per turn.
    pub fn samples(&self) -> u64 {
        self.spans.iter().map(|s| u64::from(s.turns)).sum()
    }

    /// Whether dataset row `row` is the last turn of its conversation.
    pub fn ends_conversation(&self, row: u32) -> bool {
        let row = row as usize;
        self.last_turn_rows.get(row / 64).is_some_and(|w| w & (1 << (row % 64)) != 0)
    }
}

/// Conversations handed to each worker and finished there, for the scheduler's places.
#[derive(Debug, Default)]
pub struct ConversationCounts {
    pub issued_to: Vec<AtomicU64>,
    pub finished_at: Vec<AtomicU64>,
    /// The finish (counted in the order the aggregator reads them) that closes the tracking
    /// window ([`finishes_to_close_window`]).
    pub window_finish: u64,
}

impl ConversationCounts {
    /// Counts for `workers` workers running `conversations` conversations, `concurrency` at a
    /// time.
    pub fn new(workers: usize, conversations: u64, concurrency: u64) -> ConversationCounts {
        ConversationCounts {
            issued_to: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            finished_at: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            window_finish: finishes_to_close_window(conversations, concurrency),
        }
    }

    /// Conversations worker `w` holds (running or queued).
    pub fn open_at(&self, w: usize) -> u64 {
        let issued = self.issued_to[w].load(Ordering::Acquire);
        issued.saturating_sub(self.finished_at[w].load(Ordering::Acquire))
    }
}

/// Which conversation finish closes performance tracking, as the reference's
/// `AgenticInferenceStrategy` decides it: each finish starts the next conversation while one is
/// left, so the first `conversations - concurrency` finishes each start one and the finish after
/// them is the first that finds none left (`_finish_conversation` →
/// `stop_performance_tracking`). With no more conversations than places, the first finish.
pub fn finishes_to_close_window(conversations: u64, concurrency: u64) -> u64 {
    conversations.saturating_sub(concurrency.max(1)) + 1
}

/// An agentic run's performance tracking window: open from the start of tracking until the
/// aggregator reads the conversation finish that finds no conversation left to start; it
/// stamps that moment by its own clock (CLOCK_MONOTONIC), as the reference stamps
/// `session.stop_performance_tracking` when its event loop handles that finish. A turn issued
/// after the stamp is untracked: still issued, completed or abandoned and counted in the
/// totals, never in the tracked figures. No record read before the stamp can have been issued
/// after it (the aggregator reads a record after its worker issued it), so each record is
/// classified once, as it is read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrackingWindow {
    /// The finish that closes the window (1-based); 0: the run is not agentic and never closes.
    close_at_finish: u64,
    finished: u64,
    closed_ns: Option<u64>,
}

impl TrackingWindow {
    pub fn new(close_at_finish: u64) -> TrackingWindow {
        TrackingWindow { close_at_finish, finished: 0, closed_ns: None }
    }

    /// Counts one conversation finish read at `now_ns`; returns the stamp when it closes the
    /// window.
    pub fn note_finish(&mut self, now_ns: u64) -> Option<u64> {
        self.finished += 1;
        let closes = self.close_at_finish != 0 && self.finished >= self.close_at_finish;
        if self.closed_ns.is_none() && closes {
            self.closed_ns = Some(now_ns);
            return self.closed_ns;
        }
        None
    }

    pub fn closed_ns(&self) -> Option<u64> {
        self.closed_ns
    }

    /// Whether a turn issued at `issued_ns` is inside the window; a turn with no issue stamp
    /// (its worker died before saying) is logged as issued at the run's end, so it is inside
    /// only while the window is open.
    pub fn admits(&self, issued_ns: Option<u64>) -> bool {
        match self.closed_ns {
            None => true,
            Some(closed) => issued_ns.is_some_and(|t| t != 0 && t <= closed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_row_of_each_span_ends_its_conversation() {
        let spans = vec![
            ConversationSpan { first_row: 0, turns: 3 },
            ConversationSpan { first_row: 3, turns: 1 },
            ConversationSpan { first_row: 4, turns: 70 },
        ];
        let ids = ["a", "b", "a__repeat_2"].map(String::from).to_vec();
        let turns: Vec<u32> = [1, 3, 5, 1].into_iter().chain((0..70).map(|k| 2 * k + 1)).collect();
        let plan = ConversationPlan::new(spans, ids, turns);
        let ends: Vec<u32> = (0..200).filter(|&r| plan.ends_conversation(r)).collect();
        assert_eq!(ends, [2, 3, 73]);
        assert_eq!(plan.samples(), 74);
        assert!(!ConversationPlan::default().ends_conversation(0));
        assert_eq!(plan.label(0), Some(("a", 1)));
        assert_eq!(plan.label(2), Some(("a", 5)));
        assert_eq!(plan.label(3), Some(("b", 1)));
        assert_eq!(plan.label(73), Some(("a__repeat_2", 139)));
        assert_eq!(plan.label(74), None, "an accuracy row has no conversation");
    }

    #[test]
    fn the_window_closes_at_the_first_finish_that_finds_no_conversation_left() {
        // (conversations, concurrency) → the finish that closes it.
        let cases = [(10, 4, 7), (4, 4, 1), (3, 8, 1), (1, 1, 1), (5, 0, 5)];
        for (conversations, concurrency, finish) in cases {
            assert_eq!(
                finishes_to_close_window(conversations, concurrency),
                finish,
                "{conversations} conversations, {concurrency} at a time"
            );
        }
        let mut w = TrackingWindow::new(3);
        assert_eq!(w.note_finish(10), None);
        assert_eq!(w.note_finish(20), None);
        assert!(w.admits(Some(1_000)) && w.admits(None), "open: every turn is inside");
        assert_eq!(w.note_finish(30), Some(30));
        assert_eq!(w.note_finish(40), None, "it closes once");
        assert_eq!(w.closed_ns(), Some(30));
        assert!(w.admits(Some(30)) && w.admits(Some(29)));
        assert!(!w.admits(Some(31)) && !w.admits(None) && !w.admits(Some(0)));
        let mut never = TrackingWindow::default();
        assert_eq!(never.note_finish(5), None);
        assert!(never.admits(Some(u64::MAX)));
    }
}
