//! A futex word in shared memory that one coordinator thread sleeps on for all workers at once.
//!
//! Protocol: the sleeper reads `epoch()`, checks every ring, and calls `wait(epoch, timeout)` only
//! if all were empty; a producer calls `ring()` after a push that made its ring non-empty (or, for
//! the space doorbell, after a pop that made a full ring non-full). `ring()` bumps the epoch and
//! makes a futex syscall only when someone is registered as sleeping, so it costs one atomic add
//! when nobody sleeps. Because the epoch is bumped before the sleeper count is read and the sleeper
//! registers before re-reading the epoch (both SeqCst), a ring between `epoch()` and `wait()` is
//! never lost. `BellWords` is that protocol over the two words, with the futex passed in, so the
//! loom model (`loom_tests`) checks the same code with a modelled futex.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use super::region::SharedMapping;
use super::sync::{fence, AtomicU32, Futex, Ordering, Wake};
use super::sys::SysFutex;

/// Layout of a doorbell's page: the epoch (futex word) and the sleeper count on separate lines.
#[repr(C, align(64))]
pub(crate) struct BellWords {
    epoch: AtomicU32,
    _pad: [u8; 60],
    sleepers: AtomicU32,
}

impl BellWords {
    /// Fresh words, for the models (a real doorbell's words are its zero-filled page).
    #[cfg(loom)]
    pub(crate) fn new() -> BellWords {
        BellWords { epoch: AtomicU32::new(0), _pad: [0; 60], sleepers: AtomicU32::new(0) }
    }

    pub(crate) fn epoch(&self) -> u32 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Registers as a sleeper, then sleeps on the epoch unless it already moved past `seen_epoch`.
    pub(crate) fn wait(&self, seen_epoch: u32, futex: &impl Futex) {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        // Dekker partner of `ring`: store my count; fence; load the other's epoch.
        fence(Ordering::SeqCst);
        if self.epoch.load(Ordering::SeqCst) == seen_epoch {
            futex.wait(&self.epoch, seen_epoch);
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Bumps the epoch, then wakes the sleepers if any registered.
    pub(crate) fn ring(&self, futex: &impl Futex) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        // Dekker partner of `wait`: store my epoch; fence; load the other's count.
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            futex.wake_all(&self.epoch);
        }
    }

    #[cfg(all(test, not(loom)))]
    pub(crate) fn sleepers(&self) -> u32 {
        self.sleepers.load(Ordering::SeqCst)
    }
}

/// A wake-up word in a `MAP_SHARED` mapping, created before fork and inherited by the workers.
/// Cloning shares the same word.
#[derive(Clone)]
pub struct Doorbell {
    mapping: Arc<SharedMapping>,
}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Doorbell").field("epoch", &self.epoch()).finish()
    }
}

impl Doorbell {
    /// Maps one shared page for the doorbell.
    pub fn create() -> io::Result<Doorbell> {
        let mapping = SharedMapping::create("loadgen-doorbell", 4096)?;
        Ok(Doorbell { mapping: Arc::new(mapping) })
    }

    pub(crate) fn words(&self) -> &BellWords {
        // SAFETY: the mapping is page-aligned, at least 4096 bytes, zero-initialised (a valid
        // BellWords: atomics of zero), lives as long as `self.mapping`, and is only accessed
        // through atomics.
        unsafe { &*(self.mapping.as_ptr() as *const BellWords) }
    }

    /// The current epoch; read it before checking the rings, pass it to `wait`.
    pub fn epoch(&self) -> u32 {
        self.words().epoch()
    }

    /// Sleeps until the epoch differs from `seen_epoch` or `timeout` passes (spurious wake-ups
    /// are possible; the caller re-checks its rings).
    pub fn wait(&self, seen_epoch: u32, timeout: Duration) {
        let futex = SysFutex { timeout: Some(timeout), parent_pid: None };
        self.words().wait(seen_epoch, &futex);
    }

    /// Wakes every sleeper; one atomic add when nobody sleeps.
    pub fn ring(&self) {
        self.words().ring(&SysFutex::default());
    }
}

impl Wake for Doorbell {
    fn wake(&self) {
        self.ring();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn wait_returns_at_once_when_epoch_moved() {
        let bell = Doorbell::create().unwrap();
        let seen = bell.epoch();
        bell.ring();
        let start = Instant::now();
        bell.wait(seen, Duration::from_secs(10));
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(bell.epoch(), seen.wrapping_add(1));
    }

    #[test]
    fn ring_wakes_a_sleeping_thread() {
        let bell = Doorbell::create().unwrap();
        let seen = bell.epoch();
        let sleeper = {
            let bell = bell.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                while bell.epoch() == seen {
                    bell.wait(seen, Duration::from_secs(30));
                }
                start.elapsed()
            })
        };
        // Ring once, after the sleeper has registered: only a working futex wake ends its wait
        // before the 30 s timeout.
        while bell.words().sleepers() == 0 {
            std::thread::yield_now();
        }
        bell.ring();
        assert!(sleeper.join().unwrap() < Duration::from_secs(20));
    }

    #[test]
    fn wait_times_out_without_ring() {
        let bell = Doorbell::create().unwrap();
        let start = Instant::now();
        bell.wait(bell.epoch(), Duration::from_millis(20));
        assert!(start.elapsed() >= Duration::from_millis(15));
    }
}
