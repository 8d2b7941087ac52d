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
/// one.
#[derive(Debug, Clone, Default)]
pub struct ConversationPlan {
    spans: Vec<ConversationSpan>,
    /// Bit r set: dataset row r is the last turn of its conversation.
    last_turn_rows: Vec<u64>,
}

impl ConversationPlan {
    /// The plan of `spans` (each at least one turn; rows of different spans may repeat only
    /// if they end the same way, which the binary's one-row-per-turn tables never do).
    pub fn new(spans: Vec<ConversationSpan>) -> ConversationPlan {
        let rows = spans.iter().map(|s| s.first_row as usize + s.turns as usize).max();
        let mut last_turn_rows = vec![0u64; rows.unwrap_or(0).div_ceil(64)];
        for s in spans.iter().filter(|s| s.turns > 0) {
            let last = (s.first_row + s.turns - 1) as usize;
            last_turn_rows[last / 64] |= 1 << (last % 64);
        }
        ConversationPlan { spans, last_turn_rows }
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
        let plan = ConversationPlan::new(vec![
            ConversationSpan { first_row: 0, turns: 3 },
            ConversationSpan { first_row: 3, turns: 1 },
            ConversationSpan { first_row: 4, turns: 70 },
        ]);
        let ends: Vec<u32> = (0..200).filter(|&r| plan.ends_conversation(r)).collect();
        assert_eq!(ends, [2, 3, 73]);
        assert_eq!(plan.samples(), 74);
        assert!(!ConversationPlan::default().ends_conversation(0));
    }
}
