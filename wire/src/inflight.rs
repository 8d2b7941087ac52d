//! Which sample each of a worker's connection slots has on the wire, in shared memory made before
//! fork, so the coordinator can tell a dead worker's sent samples (failed: the worker died) from
//! the ones it never sent (not failures).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::region::SharedMapping;

/// One `AtomicU64` per connection slot: 0 when the slot has nothing on the wire, else the
/// sample id + 1. Written only by the worker (one writer per slot), read by the coordinator
/// after the worker ended.
#[derive(Clone)]
pub struct InFlightTable {
    mapping: Arc<SharedMapping>,
    slots: usize,
}

impl std::fmt::Debug for InFlightTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlightTable").field("slots", &self.slots).finish()
    }
}

impl InFlightTable {
    /// A zeroed table of `slots` entries (at least one), shared with children forked after.
    pub fn create(worker_id: u16, slots: usize) -> std::io::Result<InFlightTable> {
        let slots = slots.max(1);
        let name = format!("loadgen-inflight-{worker_id}");
        let bytes = slots * std::mem::size_of::<AtomicU64>();
        let mapping = Arc::new(SharedMapping::create(&name, bytes)?);
        Ok(InFlightTable { mapping, slots })
    }

    fn entry(&self, slot: usize) -> &AtomicU64 {
        assert!(slot < self.slots, "in-flight slot {slot} out of {}", self.slots);
        // SAFETY: the mapping holds `slots` zero-initialised, 8-byte aligned u64 words (page
        // aligned base), alive as long as `self`; `slot` is in range (asserted above), and
        // every access to the words goes through this atomic.
        unsafe { &*(self.mapping.as_ptr() as *const AtomicU64).add(slot) }
    }

    /// The worker put `sample_id`'s request on the wire through `slot`.
    pub fn set(&self, slot: usize, sample_id: u64) {
        // Release: pairs with the Acquire in `sent`; plain store, no system call.
        self.entry(slot).store(sample_id + 1, Ordering::Release);
    }

    /// `slot` has nothing on the wire any more (its record was pushed).
    pub fn clear(&self, slot: usize) {
        self.entry(slot).store(0, Ordering::Release);
    }

    /// How many slots have a request on the wire now (the live view's "in flight", read while
    /// the worker runs: a count of `Acquire` loads, no lock).
    pub fn on_wire_count(&self) -> u64 {
        (0..self.slots).filter(|&s| self.entry(s).load(Ordering::Acquire) != 0).count() as u64
    }

    /// The sample ids on the wire now, one per busy slot (read once the worker has ended).
    pub fn sent(&self) -> Vec<u64> {
        (0..self.slots)
            .filter_map(|s| match self.entry(s).load(Ordering::Acquire) {
                0 => None,
                v => Some(v - 1),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_clear_show_in_sent() {
        let t = InFlightTable::create(0, 4).unwrap();
        assert!(t.sent().is_empty());
        t.set(1, 0);
        t.set(3, 41);
        assert_eq!(t.sent(), vec![0, 41]);
        t.clear(1);
        assert_eq!(t.sent(), vec![41]);
        assert_eq!(t.on_wire_count(), 1);
        t.set(0, 0);
        assert_eq!(t.on_wire_count(), 2, "sample 0 is stored as 1, not as an empty slot");
    }

    #[test]
    fn a_forked_child_writes_what_the_parent_reads() {
        let t = InFlightTable::create(0, 2).unwrap();
        // SAFETY: the child only stores into the shared table and calls _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            t.set(1, 7);
            // SAFETY: _exit is always safe to call; it ends the child without unwinding.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert_eq!(t.sent(), vec![7]);
    }
}
