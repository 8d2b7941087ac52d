//! A futex word in shared memory that one coordinator thread sleeps on for all workers at once.
//!
//! Protocol: the sleeper reads `epoch()`, checks every ring, and calls `wait(epoch, timeout)` only
//! if all were empty; a producer calls `ring()` after a push that made its ring non-empty (or, for
//! the space doorbell, after a pop that made a full ring non-full). `ring()` bumps the epoch and
//! makes a futex syscall only when someone is registered as sleeping, so it costs one atomic add
//! when nobody sleeps. Because the epoch is bumped before the sleeper count is read and the sleeper
//! registers before re-reading the epoch (both SeqCst), a ring between `epoch()` and `wait()` is
//! never lost.

use std::io;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::shm::SharedMapping;

/// Layout of a doorbell's page: the epoch (futex word) and the sleeper count on separate lines.
#[repr(C, align(64))]
struct DoorbellWords {
    epoch: AtomicU32,
    _pad: [u8; 60],
    sleepers: AtomicU32,
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

    fn words(&self) -> &DoorbellWords {
        // SAFETY: the mapping is page-aligned, at least 4096 bytes, zero-initialised (a valid
        // DoorbellWords: atomics of zero), lives as long as `self.mapping`, and is only accessed
        // through atomics.
        unsafe { &*(self.mapping.as_ptr() as *const DoorbellWords) }
    }

    /// The current epoch; read it before checking the rings, pass it to `wait`.
    pub fn epoch(&self) -> u32 {
        self.words().epoch.load(Ordering::SeqCst)
    }

    /// Sleeps until the epoch differs from `seen_epoch` or `timeout` passes (spurious wake-ups
    /// are possible; the caller re-checks its rings).
    pub fn wait(&self, seen_epoch: u32, timeout: Duration) {
        let words = self.words();
        words.sleepers.fetch_add(1, Ordering::SeqCst);
        if words.epoch.load(Ordering::SeqCst) == seen_epoch {
            futex_wait(&words.epoch, seen_epoch, Some(timeout));
        }
        words.sleepers.fetch_sub(1, Ordering::SeqCst);
    }

    /// Wakes every sleeper; one atomic add when nobody sleeps.
    pub fn ring(&self) {
        let words = self.words();
        words.epoch.fetch_add(1, Ordering::SeqCst);
        if words.sleepers.load(Ordering::SeqCst) != 0 {
            futex_wake_all(&words.epoch);
        }
    }
}

/// Sleeps while `*word == expected` (shared futex, so it works across processes).
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call; the timespec pointer is
    // null or points at a live local. EINTR, EAGAIN and ETIMEDOUT are all fine: callers re-check.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes every thread sleeping on `word`, in any process.
pub(crate) fn futex_wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a valid, aligned u32; FUTEX_WAKE only reads the address.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}

#[cfg(test)]
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
        while bell.words().sleepers.load(Ordering::SeqCst) == 0 {
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
