//! Tests that need the machine to themselves. All the tests of this crate share one process,
//! so a test that measures time against a stub (a TTFT to the millisecond, a stream's gaps) or
//! takes what the others need too (40,000 connections, a loopback address's ports) would
//! otherwise run beside any other run of the binary. Such a test calls `alone()` first; every
//! other test joins the shared side when it first starts the binary or a stub (`bin()`,
//! `stub()`, and the helpers built on them), and stays there until its thread ends: libtest
//! runs each test on a thread of its own. `alone()` waits for the shared tests to end and holds
//! back every test that starts a process meanwhile, so an alone test runs with no other run of
//! this binary beside it, and the others still run in parallel with each other.
//!
//! Two rules keep it free of deadlocks, and both fail loudly rather than hang: `alone()` comes
//! before the test starts anything (a test that shares cannot wait for itself), and a thread a
//! test spawns does not start the binary (it would wait behind an alone test that waits for
//! the test).

use std::cell::{Cell, RefCell};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Who holds the machine now.
#[derive(Debug, Default)]
struct Holders {
    /// Tests on the shared side (their threads hold a `Shared`).
    shared: usize,
    /// An alone test is running.
    alone: bool,
    /// Alone tests waiting for the shared ones to end; new shared tests wait behind them.
    alone_waiting: usize,
}

static HOLDERS: Mutex<Holders> = Mutex::new(Holders { shared: 0, alone: false, alone_waiting: 0 });
static CHANGED: Condvar = Condvar::new();

thread_local! {
    /// This test's place on the shared side, left when its thread ends.
    static SHARED: RefCell<Option<Shared>> = const { RefCell::new(None) };
    /// This test holds the machine alone.
    static ALONE: Cell<bool> = const { Cell::new(false) };
}

fn holders() -> MutexGuard<'static, Holders> {
    // Nothing panics while holding the lock, so a poisoned one is still consistent.
    HOLDERS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wait(guard: MutexGuard<'static, Holders>) -> MutexGuard<'static, Holders> {
    CHANGED.wait(guard).unwrap_or_else(PoisonError::into_inner)
}

/// A test's place on the shared side.
#[derive(Debug)]
struct Shared;

impl Drop for Shared {
    fn drop(&mut self) {
        holders().shared -= 1;
        CHANGED.notify_all();
    }
}

/// The calling test holds the machine alone until this is dropped.
#[derive(Debug)]
#[must_use = "the test runs alone only while this is held"]
pub struct Alone(());

impl Drop for Alone {
    fn drop(&mut self) {
        holders().alone = false;
        ALONE.set(false);
        CHANGED.notify_all();
    }
}

/// Waits until no other test of this binary runs a process and holds the others back until the
/// returned guard is dropped. Call it first in the test, before the test starts anything.
pub fn alone() -> Alone {
    let shares = SHARED.with(|s| s.borrow().is_some());
    assert!(!shares, "alone() must come before the test starts the binary or a stub");
    assert!(!ALONE.get(), "this test already runs alone");
    let mut h = holders();
    h.alone_waiting += 1;
    while h.alone || h.shared > 0 {
        h = wait(h);
    }
    h.alone_waiting -= 1;
    h.alone = true;
    ALONE.set(true);
    Alone(())
}

/// Puts the calling test on the shared side for the rest of its thread, once; waits while an
/// alone test runs or waits. Nothing to do for a test that runs alone.
pub fn share() {
    if ALONE.get() || SHARED.with(|s| s.borrow().is_some()) {
        return;
    }
    // libtest names each test's thread after the test; a thread the test spawned has no name.
    let test_thread = std::thread::current().name().is_some();
    assert!(test_thread, "a thread a test spawns must not start the binary or a stub");
    let mut h = holders();
    while h.alone || h.alone_waiting > 0 {
        h = wait(h);
    }
    h.shared += 1;
    drop(h);
    SHARED.with(|s| *s.borrow_mut() = Some(Shared));
}
