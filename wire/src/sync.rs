//! The concurrency primitives the ring and doorbell protocols are written against: std's atomics
//! normally and loom's under `cfg(loom)` (tokio's shim pattern), so the models in `loom_tests`
//! explore the very code that runs; and the two traits through which a protocol asks the world
//! outside shared memory to sleep or wake, real in `sys.rs`, modelled in `loom_tests.rs`.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64};
pub(crate) use std::sync::atomic::Ordering;
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicU32, AtomicU64};

/// Wakes the other end of a ring: the wake socket of a sleeping worker, or a doorbell.
pub(crate) trait Wake {
    /// Makes the sleeper (if any) return from its sleep; may be called with nobody asleep.
    fn wake(&self);
}

/// Sleeping on a 32-bit word until another thread changes it, as a shared futex does.
pub(crate) trait Futex {
    /// Sleeps while `word` holds `expected`; may return early (the caller re-checks its
    /// condition). `false` when the caller should give up waiting (its peer is gone).
    fn wait(&self, word: &AtomicU32, expected: u32) -> bool;

    /// Wakes every thread sleeping on `word`, in any process.
    fn wake_all(&self, word: &AtomicU32);
}

/// Loom's record of who touched which 16-byte unit of a region, so a model fails when a slot or
/// frame is read or written without the Acquire/Release edge that should order it. Real builds
/// have no such table: plain memory needs no bookkeeping.
#[cfg(loom)]
pub(crate) struct AccessCells {
    cells: Vec<loom::cell::UnsafeCell<()>>,
}

#[cfg(loom)]
impl AccessCells {
    /// Bytes per tracked unit: the frame alignment, so two frames never share a unit.
    pub(crate) const UNIT_BYTES: usize = 16;

    pub(crate) fn new(len_bytes: usize) -> AccessCells {
        let units = len_bytes.div_ceil(Self::UNIT_BYTES);
        AccessCells { cells: (0..units).map(|_| loom::cell::UnsafeCell::new(())).collect() }
    }

    fn units(&self, at: usize, len: usize) -> &[loom::cell::UnsafeCell<()>] {
        let first = at / Self::UNIT_BYTES;
        let end = (at + len).div_ceil(Self::UNIT_BYTES);
        &self.cells[first..end.max(first)]
    }

    /// Bytes `[at, at + len)` of the region are being read.
    pub(crate) fn read(&self, at: usize, len: usize) {
        for cell in self.units(at, len) {
            cell.with(|_| ());
        }
    }

    /// Bytes `[at, at + len)` of the region are being written.
    pub(crate) fn write(&self, at: usize, len: usize) {
        for cell in self.units(at, len) {
            cell.with_mut(|_| ());
        }
    }
}
