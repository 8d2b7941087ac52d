//! The system calls behind the rings' and doorbells' sleeps and wake-ups: a shared futex (works
//! across processes on a `MAP_SHARED` word) and the non-blocking socket pair that wakes a worker.
//! The protocols in `ring.rs` and `doorbell.rs` reach these only through the `Futex` and `Wake`
//! traits of `sync.rs`, so the loom models can put loom primitives in their place.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use super::sync::{AtomicU32, Futex, Wake};

/// The futex address of a word. Under loom the words are modelled atomics with no address a
/// kernel could sleep on; the models use their own `Futex`, so this is never reached there.
fn word_ptr(word: &AtomicU32) -> *mut u32 {
    #[cfg(not(loom))]
    return word.as_ptr();
    #[cfg(loom)]
    {
        let _ = word;
        unreachable!("the loom models use a modelled futex, never the system call");
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
            word_ptr(word),
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
        libc::syscall(libc::SYS_futex, word_ptr(word), libc::FUTEX_WAKE, i32::MAX);
    }
}

/// The real `Futex`: each wait sleeps at most `timeout`, then gives up when the process that
/// created the rings (`parent_pid`) is gone, so an orphaned worker never hangs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SysFutex {
    pub(crate) timeout: Option<Duration>,
    pub(crate) parent_pid: Option<u32>,
}

impl Futex for SysFutex {
    fn wait(&self, word: &AtomicU32, expected: u32) -> bool {
        futex_wait(word, expected, self.timeout);
        match self.parent_pid {
            // SAFETY: getppid has no preconditions.
            Some(parent) => (unsafe { libc::getppid() }) as u32 == parent,
            None => true,
        }
    }

    fn wake_all(&self, word: &AtomicU32) {
        futex_wake_all(word);
    }
}

/// One end of the socket pair that wakes a worker sleeping on an empty issue ring.
#[derive(Clone, Debug)]
pub(crate) struct WakeSocket(pub(crate) Arc<OwnedFd>);

impl WakeSocket {
    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Reads and discards wake bytes without blocking.
    pub(crate) fn drain(&self) {
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reads into a live local buffer from a non-blocking socket we own.
            let n =
                unsafe { libc::read(self.fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if n <= 0 || (n as usize) < buf.len() {
                break;
            }
        }
    }

    /// Waits up to `timeout` for the socket to become readable; `false` when it timed out.
    pub(crate) fn poll_readable(&self, timeout: Duration) -> bool {
        let mut pfd = libc::pollfd { fd: self.fd(), events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: polls one live pollfd.
        let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
        ready != 0
    }
}

impl Wake for WakeSocket {
    fn wake(&self) {
        let byte = 1u8;
        // SAFETY: writes one byte from a live local to a non-blocking socket we own; EAGAIN (a
        // full socket buffer) is fine because the worker has unread wake bytes already.
        unsafe {
            libc::write(self.fd(), &byte as *const u8 as *const libc::c_void, 1);
        }
    }
}

/// Creates a connected non-blocking socket pair for waking a worker (tests and `WorkerRings`).
pub(crate) fn wake_pair() -> io::Result<(Arc<OwnedFd>, Arc<OwnedFd>)> {
    let (tx, rx) = std::os::unix::net::UnixStream::pair()?;
    tx.set_nonblocking(true)?;
    rx.set_nonblocking(true)?;
    Ok((Arc::new(OwnedFd::from(tx)), Arc::new(OwnedFd::from(rx))))
}
