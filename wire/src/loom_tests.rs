//! Loom models of the ring and doorbell protocols at small capacities: every interleaving (up to
//! a preemption bound) of a producer and a consumer, with loom's weak-memory atomics and a check
//! on every plain access to slot and frame bytes. A lost wake-up shows as a deadlock: the model
//! futex, doorbell and wake socket sleep without timeouts. Run (about a minute, see
//! docs/design/ring-model.md): `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test
//! -p loadgen-wire --lib --release loom_tests`.

use std::sync::atomic::AtomicBool;

use loom::sync::{Arc, Condvar, Mutex};

use super::cmd::{IssueCmd, WorkerEvent};
use super::doorbell::BellWords;
use super::record::RecordHeader;
use super::region::{HeapRegion, Region};
use super::ring::{IssueRx, IssueTx, RecordRx, RecordTx, RingLayout, RingSizes};
use super::sync::{AtomicU32, Futex, Ordering, Wake};

/// Runs `f` under loom with at most `LOOM_MAX_PREEMPTIONS` preemptions (2 unless set).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound.get_or_insert(2);
    builder.check(f);
}

/// A futex as the kernel makes one: the check of the word and the sleep happen under the lock of
/// the word's hash bucket, which the waker takes too. No timeout: a missed wake is a deadlock.
#[derive(Clone)]
struct ModelFutex(Arc<(Mutex<()>, Condvar)>);

impl ModelFutex {
    fn new() -> ModelFutex {
        ModelFutex(Arc::new((Mutex::new(()), Condvar::new())))
    }
}

impl Futex for ModelFutex {
    fn wait(&self, word: &AtomicU32, expected: u32) -> bool {
        let guard = self.0 .0.lock().unwrap();
        if word.load(Ordering::SeqCst) == expected {
            drop(self.0 .1.wait(guard).unwrap());
        }
        true
    }

    fn wake_all(&self, _word: &AtomicU32) {
        let _guard = self.0 .0.lock().unwrap();
        self.0 .1.notify_all();
    }
}

/// The worker's wake socket: bytes written stay until read, so a wake before the sleep is kept.
#[derive(Clone)]
struct ModelSocket(Arc<(Mutex<u32>, Condvar)>);

impl ModelSocket {
    fn new() -> ModelSocket {
        ModelSocket(Arc::new((Mutex::new(0), Condvar::new())))
    }

    /// A blocking read: waits for at least one byte, takes what is there.
    fn read(&self) {
        let mut bytes = self.0 .0.lock().unwrap();
        while *bytes == 0 {
            bytes = self.0 .1.wait(bytes).unwrap();
        }
        *bytes = 0;
    }

    /// `IssueConsumer::end_sleep`'s non-blocking drain.
    fn drain(&self) {
        *self.0 .0.lock().unwrap() = 0;
    }
}

impl Wake for ModelSocket {
    fn wake(&self) {
        *self.0 .0.lock().unwrap() += 1;
        self.0 .1.notify_all();
    }
}

/// A doorbell: the real protocol (`BellWords`) over the model futex.
#[derive(Clone)]
struct ModelBell(Arc<(BellWords, ModelFutex)>);

impl ModelBell {
    fn new() -> ModelBell {
        ModelBell(Arc::new((BellWords::new(), ModelFutex::new())))
    }
    fn epoch(&self) -> u32 {
        self.0 .0.epoch()
    }
    fn wait(&self, seen_epoch: u32) {
        self.0 .0.wait(seen_epoch, &self.0 .1);
    }
}

impl Wake for ModelBell {
    fn wake(&self) {
        self.0 .0.ring(&self.0 .1);
    }
}

/// A region holding both rings with fresh loom control words.
fn region(sizes: RingSizes) -> (std::sync::Arc<dyn Region>, RingLayout) {
    let layout = RingLayout::new(sizes);
    let region = HeapRegion::new(layout.total_bytes());
    layout.init_headers(&region);
    (std::sync::Arc::new(region), layout)
}

/// The worker's issue loop (`run::issue_loop`): pop until empty, then flag asleep and sleep on
/// the wake socket; stops at `Stop` or at the abort word. Returns the sample ids it took.
fn worker_issue_loop(rx: &mut IssueRx<ModelBell>, wake: &ModelSocket) -> (Vec<u64>, bool) {
    let mut taken = Vec::new();
    loop {
        if rx.abort_requested() {
            return (taken, true);
        }
        match rx.try_pop() {
            Some(IssueCmd::Issue { sample_id, .. }) => taken.push(sample_id),
            Some(IssueCmd::Stop) => return (taken, false),
            Some(IssueCmd::Abort) => panic!("no Abort command is pushed in these models"),
            Some(IssueCmd::Conversation { first_sample_id, turns, .. }) => {
                taken.extend((0..u64::from(turns)).map(|k| first_sample_id + k));
            }
            None => {
                if rx.prepare_sleep() {
                    wake.read();
                    rx.end_sleep();
                    wake.drain();
                }
            }
        }
    }
}

/// The scheduler: pushes, and on a full ring sleeps on the issue-space doorbell with the epoch
/// it read before trying.
fn scheduler_push(tx: &mut IssueTx<ModelSocket>, space: &ModelBell, cmd: IssueCmd) {
    loop {
        let seen = space.epoch();
        if tx.try_push(cmd) {
            return;
        }
        space.wait(seen);
    }
}

/// (a) Issue ring of 2 slots: three commands and a Stop through a full ring. Each arrives once,
/// in order; neither the sleeping worker nor the scheduler asleep on a full ring misses a wake.
#[test]
fn loom_issue_ring_delivers_in_order_without_lost_wakeups() {
    model(|| {
        let (region, layout) = region(RingSizes { issue_slots: 2, record_bytes: 0 });
        let (space, wake) = (ModelBell::new(), ModelSocket::new());
        let mut tx = IssueTx::new(region.clone(), layout, wake.clone());
        let mut rx = IssueRx::new(region, layout, space.clone());
        let worker = loom::thread::spawn(move || worker_issue_loop(&mut rx, &wake));
        for sample_id in 0..3 {
            scheduler_push(&mut tx, &space, IssueCmd::Issue { sample_id, row: 1, issued_ns: 2 });
        }
        scheduler_push(&mut tx, &space, IssueCmd::Stop);
        let (taken, aborted) = worker.join().unwrap();
        assert_eq!(taken, [0, 1, 2]);
        assert!(!aborted);
    });
}

/// Set when some interleaving of model (d) saw the abort with commands still queued.
static ABORT_OVERTOOK: AtomicBool = AtomicBool::new(false);

/// (d) The abort word overtakes queued commands: the worker, asleep or not, always sees it and
/// stops (no lost wake-up), having taken an in-order prefix of what was pushed; in some
/// interleavings it stops with commands still in the ring.
#[test]
fn loom_abort_overtakes_queued_commands() {
    model(|| {
        let (region, layout) = region(RingSizes { issue_slots: 2, record_bytes: 0 });
        let (space, wake) = (ModelBell::new(), ModelSocket::new());
        let mut tx = IssueTx::new(region.clone(), layout, wake.clone());
        let mut rx = IssueRx::new(region, layout, space);
        let worker = loom::thread::spawn(move || worker_issue_loop(&mut rx, &wake));
        for sample_id in 0..2 {
            assert!(tx.try_push(IssueCmd::Issue { sample_id, row: 0, issued_ns: 1 }));
        }
        tx.request_abort();
        let (taken, aborted) = worker.join().unwrap();
        assert!(aborted, "the worker stopped without seeing the abort");
        assert_eq!(taken, (0..taken.len() as u64).collect::<Vec<_>>());
        if taken.len() < 2 {
            ABORT_OVERTOOK.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    assert!(ABORT_OVERTOOK.load(std::sync::atomic::Ordering::Relaxed));
}

/// Output bytes of model record `id`: record 0 is small, the rest use nearly a quarter of the
/// 64 KiB ring each, so the ring fills, the producer waits for space and one frame needs a pad.
fn record_output(id: u64, max_output: usize) -> Vec<u8> {
    let len = if id == 0 { 0 } else { max_output };
    vec![b'a' + id as u8; len]
}

/// The aggregator: reads the doorbell's epoch, pops until empty, then sleeps on that epoch.
fn aggregator(rx: &mut RecordRx<ModelFutex>, ready: &ModelBell, max_output: usize) -> u64 {
    let mut next = 0u64;
    loop {
        let seen = ready.epoch();
        let popped = rx.pop(|event| match event {
            WorkerEvent::Record(view) => {
                assert_eq!(view.header.sample_id, next, "records arrive once, in order");
                assert_eq!(view.output, &record_output(next, max_output)[..]);
                false
            }
            WorkerEvent::Done => true,
            other => panic!("unexpected {other:?}"),
        });
        match popped {
            Some(true) => return next,
            Some(false) => next += 1,
            None => ready.wait(seen),
        }
    }
}

/// (b) Record ring at its minimum (64 KiB): five records (four of nearly 16 KiB) and `Done`, so
/// the producer blocks on back-pressure and wraps with a pad; `deferred` as the worker pushes
/// records (one flush at the end). No loss, no lost wake-up on either side.
fn record_ring_model(deferred: bool) {
    model(move || {
        let (region, layout) = region(RingSizes { issue_slots: 2, record_bytes: 0 });
        let (ready, space) = (ModelBell::new(), ModelFutex::new());
        let mut tx = RecordTx::new(region.clone(), layout, ready.clone(), space.clone());
        let mut rx = RecordRx::new(region, layout, space);
        let max_output = tx.max_payload_bytes() - super::RECORD_HEADER_BYTES;
        let consumer = loom::thread::spawn(move || aggregator(&mut rx, &ready, max_output));
        tx.defer_doorbell(deferred);
        for sample_id in 0..5 {
            let header = RecordHeader { sample_id, http_status: 200, ..Default::default() };
            assert!(tx.push_record(&header, &record_output(sample_id, max_output), b"", &[]));
        }
        tx.flush_doorbell();
        assert!(tx.push_done());
        assert_eq!(consumer.join().unwrap(), 5);
    });
}

#[test]
fn loom_record_ring_back_pressure_loses_nothing() {
    record_ring_model(false);
}

#[test]
fn loom_record_ring_deferred_doorbell_loses_nothing() {
    record_ring_model(true);
}

/// (c) The doorbell: a waiter that read the epoch, checked for work and then sleeps is woken by
/// every ring after its check, from either of two ringers (two workers' rings).
#[test]
fn loom_doorbell_wakes_a_waiter_that_checked_first() {
    model(|| {
        let bell = ModelBell::new();
        let work = Arc::new([AtomicU32::new(0), AtomicU32::new(0)]);
        let ringers: Vec<_> = (0..2)
            .map(|i| {
                let (bell, work) = (bell.clone(), work.clone());
                loom::thread::spawn(move || {
                    work[i].store(1, Ordering::Release);
                    bell.wake();
                })
            })
            .collect();
        loop {
            let seen = bell.epoch();
            if work.iter().all(|w| w.load(Ordering::Acquire) == 1) {
                break;
            }
            bell.wait(seen);
        }
        for ringer in ringers {
            ringer.join().unwrap();
        }
    });
}
