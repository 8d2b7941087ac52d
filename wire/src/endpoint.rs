//! The four public ends of a worker's rings, as the coordinator and the worker hold them: the
//! protocol of `ring.rs` joined to its real wake-ups (the wake socket and futexes of `sys.rs`,
//! the doorbells of `doorbell.rs`). Every method forwards; the logic is in `ring.rs`.

use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use super::cmd::{IssueCmd, WorkerEvent};
use super::doorbell::Doorbell;
use super::record::RecordHeader;
use super::region::Region;
use super::ring::{IssueRx, IssueTx, RecordRx, RecordTx, RingLayout};
use super::sys::{SysFutex, WakeSocket};

/// How long a back-pressured producer sleeps before it checks that its parent still lives.
const BACKPRESSURE_NAP: Duration = Duration::from_millis(100);

/// The scheduler's end of a worker's issue ring.
pub struct IssueProducer {
    ring: IssueTx<WakeSocket>,
}

impl std::fmt::Debug for IssueProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssueProducer").field("tail", &self.ring.tail()).finish()
    }
}

impl IssueProducer {
    pub(crate) fn new(region: Arc<dyn Region>, layout: RingLayout, wake: Arc<OwnedFd>) -> Self {
        IssueProducer { ring: IssueTx::new(region, layout, WakeSocket(wake)) }
    }

    /// Pushes one command; `false` when the ring is full. Wakes the worker only if it flagged
    /// itself asleep.
    pub fn try_push(&mut self, cmd: IssueCmd) -> bool {
        self.ring.try_push(cmd)
    }

    /// Asks the worker to abort now, ahead of the commands still queued in the ring: it cancels
    /// what is in flight and what is queued (reported `Cancelled`), sends `Done` and exits.
    /// Always wakes the worker.
    pub fn request_abort(&mut self) {
        self.ring.request_abort();
    }

    /// Free slots right now (may grow as the worker pops).
    pub fn free_slots(&self) -> usize {
        self.ring.free_slots()
    }

    /// Total slots of the ring.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }
}

/// The worker's end of its issue ring.
pub struct IssueConsumer {
    ring: IssueRx<Doorbell>,
    wake: WakeSocket,
}

impl std::fmt::Debug for IssueConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssueConsumer").field("head", &self.ring.head()).finish()
    }
}

impl IssueConsumer {
    pub(crate) fn new(
        region: Arc<dyn Region>,
        layout: RingLayout,
        wake: Arc<OwnedFd>,
        space: Doorbell,
    ) -> Self {
        IssueConsumer { ring: IssueRx::new(region, layout, space), wake: WakeSocket(wake) }
    }

    /// Pops one command, or `None` when the ring is empty. Rings the issue-space doorbell when
    /// this pop brought the ring down to half full: a scheduler that found the ring full sleeps
    /// until half of it is free again, so a burst costs one wake-up per half ring, not one per
    /// command (the scheduler and the worker share a core on small machines).
    pub fn try_pop(&mut self) -> Option<IssueCmd> {
        self.ring.try_pop()
    }

    /// Flags the worker asleep and re-checks the ring: `true` means it is still empty and the
    /// caller should wait for `wake_fd()` to be readable, then call `end_sleep`. `false` means a
    /// command arrived (the flag is already cleared).
    pub fn prepare_sleep(&mut self) -> bool {
        self.ring.prepare_sleep()
    }

    /// Whether the coordinator asked for an out-of-band abort (`IssueProducer::request_abort`).
    pub fn abort_requested(&self) -> bool {
        self.ring.abort_requested()
    }

    /// Clears the sleep flag and drains pending wake bytes.
    pub fn end_sleep(&mut self) {
        self.ring.end_sleep();
        self.wake.drain();
    }

    /// The socket that becomes readable when the producer wakes a sleeping worker.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.fd()
    }

    /// A second handle on the wake socket, for an async runtime to wait on.
    pub fn wake_stream(&self) -> io::Result<std::os::unix::net::UnixStream> {
        Ok(std::os::unix::net::UnixStream::from(self.wake.0.try_clone()?))
    }

    /// Reads and discards wake bytes without blocking.
    pub fn drain_wake(&self) {
        self.wake.drain();
    }

    /// Blocking pop for code outside a runtime (tests, tools): sleeps on the wake socket, up to
    /// `timeout` per sleep; `None` only when nothing came within `timeout`.
    pub fn pop_blocking(&mut self, timeout: Duration) -> Option<IssueCmd> {
        loop {
            if let Some(cmd) = self.try_pop() {
                return Some(cmd);
            }
            if self.prepare_sleep() {
                let readable = self.wake.poll_readable(timeout);
                self.end_sleep();
                if !readable {
                    return self.try_pop();
                }
            }
        }
    }
}

/// The worker's end of its record ring. A full ring is back-pressure: the push sleeps on a futex
/// until the aggregator frees space; nothing is dropped.
pub struct RecordProducer {
    ring: RecordTx<Doorbell, SysFutex>,
}

impl std::fmt::Debug for RecordProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordProducer").field("tail", &self.ring.tail()).finish()
    }
}

impl RecordProducer {
    /// `parent_pid`: the process that drains the ring; a producer blocked on a full ring naps
    /// `BACKPRESSURE_NAP` at a time and gives up once that process is gone.
    pub(crate) fn new(
        region: Arc<dyn Region>,
        layout: RingLayout,
        ready: Doorbell,
        parent_pid: Option<u32>,
    ) -> Self {
        let space = SysFutex { timeout: Some(BACKPRESSURE_NAP), parent_pid };
        RecordProducer { ring: RecordTx::new(region, layout, ready, space) }
    }

    /// The largest payload one frame may carry (a quarter of the ring, less the frame prefix).
    pub fn max_payload_bytes(&self) -> usize {
        self.ring.max_payload_bytes()
    }

    /// Records whose output or error was cut to fit a frame.
    pub fn truncated_count(&self) -> u64 {
        self.ring.truncated_count()
    }

    /// Pushes one record without chunk timing; `output` then `error` are cut to fit a frame
    /// (counted in `truncated_count`). `false` only when the coordinator is gone.
    pub fn push_record(&mut self, header: &RecordHeader, output: &[u8], error: &[u8]) -> bool {
        self.ring.push_record(header, output, error, &[])
    }

    /// Pushes one record of a streamed response with its chunk timing (`ChunkTimes::as_bytes`);
    /// output, error, then the timing's gaps are cut to fit a frame, its counts never.
    pub fn push_streamed_record(
        &mut self,
        header: &RecordHeader,
        output: &[u8],
        error: &[u8],
        chunk_timing: &[u8],
    ) -> bool {
        self.ring.push_record(header, output, error, chunk_timing)
    }

    /// Announces that a sample was issued (see `WorkerEvent::Issued`); rings as records do.
    pub fn push_issued(&mut self, sample_id: u64, row: u32, issued_ns: u64) -> bool {
        self.ring.push_issued(sample_id, row, issued_ns)
    }

    /// Announces a streamed sample's first content chunk; rings as records do.
    pub fn push_first_chunk(&mut self, sample_id: u64, first_chunk_ns: u64) -> bool {
        self.ring.push_first_chunk(sample_id, first_chunk_ns)
    }

    /// With `true`, record pushes publish their frames at once but leave waking an idle
    /// aggregator to the next `flush_doorbell`: one futex wake-up per batch of records instead of
    /// one per record. The caller must flush before it blocks (a push that waits for space
    /// flushes by itself). Control frames (ready, warnings, done) always ring at once.
    pub fn defer_doorbell(&mut self, deferred: bool) {
        self.ring.defer_doorbell(deferred);
    }

    /// Rings the doorbell if the aggregator ran dry since it was last rung. Cheap when it did not
    /// (one fence and one load of a line the aggregator writes only when it runs dry).
    pub fn flush_doorbell(&mut self) {
        self.ring.flush_doorbell();
    }

    /// Announces that the worker's connections are open.
    pub fn push_ready(&mut self, connections_open: u32) -> bool {
        self.ring.push_ready(connections_open)
    }

    /// Reports a setup failure (the worker exits next).
    pub fn push_setup_failed(&mut self, message: &str) -> bool {
        self.ring.push_setup_failed(message)
    }

    /// Sends a warning for the user.
    pub fn push_warning(&mut self, message: &str) -> bool {
        self.ring.push_warning(message)
    }

    /// Sends the worker's last frame.
    pub fn push_done(&mut self) -> bool {
        self.ring.push_done()
    }
}

/// The aggregator's end of one worker's record ring.
pub struct RecordConsumer {
    ring: RecordRx<SysFutex>,
}

impl std::fmt::Debug for RecordConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordConsumer").field("head", &self.ring.head()).finish()
    }
}

impl RecordConsumer {
    pub(crate) fn new(region: Arc<dyn Region>, layout: RingLayout) -> Self {
        RecordConsumer { ring: RecordRx::new(region, layout, SysFutex::default()) }
    }

    /// Pops one frame and hands it to `f`; `None` when the ring is empty. The frame's bytes are
    /// freed after `f` returns, and a producer sleeping on back-pressure is woken.
    ///
    /// A `None` flags the ring idle: the producer's next push rings the doorbell once. So a
    /// caller that reads the doorbell's epoch, pops until `None` and then waits on that epoch
    /// never sleeps through a record, and a busy ring rings nothing.
    pub fn pop<R>(&mut self, f: impl FnOnce(WorkerEvent<'_>) -> R) -> Option<R> {
        self.ring.pop(f)
    }

    /// Bytes of the ring (for sizing reports).
    pub fn capacity_bytes(&self) -> usize {
        self.ring.capacity_bytes()
    }
}
