//! The event log's time order: events wait in 10 ms buckets until they are older than the
//! reorder window, then each bucket is sorted by timestamp and shipped as one batch.
//!
//! Events reach the aggregator a little after they happen, and from several workers at once, so
//! arrival order is not time order. An event's bucket is its timestamp's 10 ms slot; a bucket is
//! shipped once the aggregator's clock has passed its end by [`REORDER_WINDOW_NS`], so an event
//! that arrives within the window of happening lands in time order. One that arrives later (a
//! backed-up worker ring) goes into the oldest open bucket and is counted in `late`: the file is
//! then out of order by about that event's own delay, never more.
//!
//! A bucket is a `Batch` (ops and their text): sorting its ops by timestamp leaves their text
//! spans valid. A due bucket's events are copied, sorted, into the log's outgoing batches, and
//! the bucket is kept for reuse: the formatters get batches of the sizes they always did.

use std::collections::VecDeque;

use super::format::Batch;

/// Events this much older than the aggregator's clock are written; younger ones wait.
pub const REORDER_WINDOW_NS: u64 = 200_000_000;
/// The width of one bucket.
pub const BUCKET_NS: u64 = 10_000_000;
/// Emptied buckets kept for reuse (a window and a little more).
const SPARE_BUCKETS: usize = (REORDER_WINDOW_NS / BUCKET_NS) as usize + 4;

/// Open buckets, oldest first.
#[derive(Debug, Default)]
pub struct TimeOrder {
    /// Every slot below this was shipped (the aggregator's clock less the window, as of the
    /// last `advance`).
    shipped_below: u64,
    /// The slot of `buckets[0]`, when a bucket is open.
    first_slot: u64,
    buckets: VecDeque<Batch>,
    /// Emptied batches back from the formatters, for new buckets.
    spare: Vec<Batch>,
    /// Events that arrived after their slot was shipped.
    late: u64,
}

impl TimeOrder {
    /// The bucket an event stamped `timestamp_ns` goes into: its slot's, or for a late event
    /// the oldest open one.
    pub fn bucket_mut(&mut self, timestamp_ns: u64) -> &mut Batch {
        let mut slot = timestamp_ns / BUCKET_NS;
        if slot < self.shipped_below {
            self.late += 1;
            slot = self.shipped_below;
        }
        if self.buckets.is_empty() {
            self.first_slot = slot;
        }
        // Between the shipped slots and the open ones: at most a window's worth of buckets.
        while slot < self.first_slot {
            let bucket = self.spare.pop().unwrap_or_default();
            self.buckets.push_front(bucket);
            self.first_slot -= 1;
        }
        let index = (slot - self.first_slot) as usize;
        while self.buckets.len() <= index {
            let bucket = self.spare.pop().unwrap_or_default();
            self.buckets.push_back(bucket);
        }
        &mut self.buckets[index]
    }

    /// Hands every bucket that ended a window before `now_ns` to `take`, sorted, oldest first.
    pub fn advance(&mut self, now_ns: u64, take: impl FnMut(&Batch)) {
        let horizon_slot = now_ns.saturating_sub(REORDER_WINDOW_NS) / BUCKET_NS;
        self.ship_before(horizon_slot, take);
    }

    /// Hands every bucket to `take`, sorted, oldest first (the end of the log).
    pub fn flush(&mut self, take: impl FnMut(&Batch)) {
        self.ship_before(u64::MAX, take);
    }

    /// Events that arrived after their bucket was written.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// Hands over the buckets of the slots below `slot`, then keeps them, emptied, for reuse.
    fn ship_before(&mut self, slot: u64, mut take: impl FnMut(&Batch)) {
        if slot <= self.shipped_below {
            return;
        }
        self.shipped_below = slot;
        let open = (slot.saturating_sub(self.first_slot)).min(self.buckets.len() as u64) as usize;
        for mut bucket in self.buckets.drain(..open) {
            if !bucket.is_empty() {
                if !bucket.ops.is_sorted_by_key(|op| op.timestamp_ns()) {
                    // Stable: events of one timestamp keep their arrival order (an error before
                    // its sample's completion).
                    bucket.ops.sort_by_key(|op| op.timestamp_ns());
                }
                take(&bucket);
                bucket.clear();
            }
            // A window's worth of buckets is all that is ever open: keep no more than that.
            if self.spare.len() < SPARE_BUCKETS {
                self.spare.push(bucket);
            }
        }
        self.first_slot += open as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::super::format::Op;
    use super::*;

    fn push(order: &mut TimeOrder, timestamp_ns: u64, sample_id: u64) {
        let op = Op::RecvFirst { sample_id, timestamp_ns };
        order.bucket_mut(timestamp_ns).ops.push(op);
    }

    fn shipped(order: &mut TimeOrder, now_ns: Option<u64>) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut ship = |batch: &Batch| {
            for op in &batch.ops {
                if let Op::RecvFirst { sample_id, timestamp_ns } = op {
                    out.push((*timestamp_ns, *sample_id));
                }
            }
        };
        match now_ns {
            Some(now_ns) => order.advance(now_ns, &mut ship),
            None => order.flush(&mut ship),
        }
        out
    }

    const MS: u64 = 1_000_000;

    #[test]
    fn events_within_the_window_are_written_in_time_order() {
        let mut order = TimeOrder::default();
        for (ts, id) in [(1_000 * MS, 1), (1_025 * MS, 2), (1_003 * MS, 3), (1_003 * MS, 4)] {
            push(&mut order, ts, id);
        }
        // Nothing is older than the window yet.
        assert!(shipped(&mut order, Some(1_100 * MS)).is_empty());
        // The buckets up to 1,010 ms are past it; the one holding 1,025 ms is not.
        let got = shipped(&mut order, Some(1_215 * MS));
        assert_eq!(got, [(1_000 * MS, 1), (1_003 * MS, 3), (1_003 * MS, 4)]);
        assert_eq!(shipped(&mut order, None), [(1_025 * MS, 2)]);
        assert_eq!(order.late(), 0);
    }

    #[test]
    fn an_event_later_than_the_window_is_counted_and_written_with_the_oldest_open_bucket() {
        let mut order = TimeOrder::default();
        push(&mut order, 1_000 * MS, 1);
        push(&mut order, 1_300 * MS, 2);
        assert_eq!(shipped(&mut order, Some(1_250 * MS)), [(1_000 * MS, 1)]);
        // 1,005 ms arrives after its bucket was written.
        push(&mut order, 1_005 * MS, 3);
        assert_eq!(order.late(), 1);
        assert_eq!(shipped(&mut order, None), [(1_005 * MS, 3), (1_300 * MS, 2)]);
    }

    #[test]
    fn an_idle_stretch_opens_no_empty_buckets() {
        let mut order = TimeOrder::default();
        push(&mut order, 1_000 * MS, 1);
        assert_eq!(shipped(&mut order, Some(2_000 * MS)).len(), 1);
        // An hour later: one bucket, not 360,000.
        push(&mut order, 3_601_000 * MS, 2);
        assert_eq!(order.buckets.len(), 1);
        assert_eq!(order.late(), 0);
        assert_eq!(shipped(&mut order, None), [(3_601_000 * MS, 2)]);
    }
}
