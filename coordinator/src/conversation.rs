//! An agentic run's conversations as the scheduler hands them out: each one a span of
//! consecutive dataset rows (its client turns, in order), issued to a worker as one
//! `IssueCmd::Conversation`, which runs the turns itself. The aggregator counts a conversation
//! finished when the record of its last turn arrives, which frees its worker's place for the
//! next one (`target_concurrency` conversations in flight).

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
}

impl ConversationCounts {
    pub fn new(workers: usize) -> ConversationCounts {
        ConversationCounts {
            issued_to: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            finished_at: (0..workers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Conversations worker `w` holds (running or queued).
    pub fn open_at(&self, w: usize) -> u64 {
        let issued = self.issued_to[w].load(Ordering::Acquire);
        issued.saturating_sub(self.finished_at[w].load(Ordering::Acquire))
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
}
