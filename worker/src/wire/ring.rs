//! Single-producer single-consumer rings over a shared byte region: a slot ring for issue
//! commands and a byte ring of 16-byte-aligned frames for records.
//!
//! Indices are free-running `u64` counters (slots for the issue ring, bytes for the record ring):
//! `head <= tail <= head + capacity` always. `tail` is written only by the producer (Release, the
//! partner of the consumer's Acquire load, publishing the slot or frame bytes); `head` only by the
//! consumer (Release, the partner of the producer's Acquire load, handing the space back).
//! Sleeping is decided with a SeqCst fence between "store my index or flag" and "load the other
//! side's", on both sides (Dekker): at least one side sees the other, so no wake-up is lost.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::cmd::{IssueCmd, WorkerEvent};
use super::doorbell::{futex_wait, futex_wake_all, Doorbell};
use super::record::{RecordHeader, RecordView, RECORD_HEADER_BYTES};
use super::shm::RingSizes;

/// Memory a ring lives in: a shared mapping in production, heap memory in tests.
pub(crate) trait Region: Send + Sync {
    /// Start of the region, 64-byte aligned, zero-filled at creation.
    fn base(&self) -> *mut u8;
    /// Length in bytes.
    fn len(&self) -> usize;
}

/// Heap memory standing in for a shared mapping (single-process tests).
#[cfg(test)]
pub(crate) struct HeapRegion {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
}

// SAFETY: the region is raw memory; the ring protocol gives each byte one writer at a time.
#[cfg(test)]
unsafe impl Send for HeapRegion {}
// SAFETY: as above; shared references only hand out the raw pointer.
#[cfg(test)]
unsafe impl Sync for HeapRegion {}

#[cfg(test)]
impl HeapRegion {
    pub(crate) fn new(len: usize) -> HeapRegion {
        let layout = std::alloc::Layout::from_size_align(len.max(64), 4096).unwrap();
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = std::ptr::NonNull::new(ptr).expect("heap region allocation failed");
        HeapRegion { ptr, layout }
    }
}

#[cfg(test)]
impl Region for HeapRegion {
    fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
}

#[cfg(test)]
impl Drop for HeapRegion {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout; endpoints hold an `Arc` to us.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[repr(C, align(64))]
struct Padded<T>(T);

/// Control words of one ring, each on its own cache line.
#[repr(C)]
struct RingHeader {
    /// Written by the producer only; range [head, head + capacity].
    tail: Padded<AtomicU64>,
    /// Written by the consumer only; range [tail - capacity, tail].
    head: Padded<AtomicU64>,
    /// 1 while the consumer may sleep. Issue ring: set by the consumer before it sleeps on the
    /// wake socket, cleared by the producer (swap) when it writes the wake byte. Record ring: set by the consumer when it finds the ring empty,
    /// cleared by the producer (swap) when it rings the doorbell for that.
    consumer_sleeping: Padded<AtomicU32>,
    /// Written by the producer: 1 while it sleeps on `space_epoch` (record ring back-pressure).
    producer_waiting: Padded<AtomicU32>,
    /// Futex word bumped by the consumer when it frees space for a waiting producer.
    space_epoch: Padded<AtomicU32>,
    /// Issue ring only: set to 1 by the producer to abort out of band, ahead of any commands
    /// still queued in the ring; read by the consumer.
    abort: Padded<AtomicU32>,
}

const HEADER_BYTES: usize = 512;
const _: () = assert!(std::mem::size_of::<RingHeader>() <= HEADER_BYTES);
const ISSUE_SLOT_BYTES: usize = 32;
const MIN_RECORD_BYTES: usize = 64 * 1024;

/// Where each ring lives inside a worker's region.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingLayout {
    issue_slots: u64,
    record_bytes: u64,
    issue_header: usize,
    issue_data: usize,
    record_header: usize,
    record_data: usize,
}

impl RingLayout {
    pub(crate) fn new(sizes: RingSizes) -> RingLayout {
        let issue_slots = sizes.issue_slots.max(2).next_power_of_two();
        let record_bytes = sizes.record_bytes.max(MIN_RECORD_BYTES).next_power_of_two();
        let issue_data = HEADER_BYTES;
        let record_header = (issue_data + issue_slots * ISSUE_SLOT_BYTES).next_multiple_of(64);
        let record_data = record_header + HEADER_BYTES;
        RingLayout {
            issue_slots: issue_slots as u64,
            record_bytes: record_bytes as u64,
            issue_header: 0,
            issue_data,
            record_header,
            record_data,
        }
    }

    pub(crate) fn total_bytes(&self) -> usize {
        self.record_data + self.record_bytes as usize
    }
}

/// One ring's view of a region; keeps the region alive.
struct RingPtrs {
    /// Held only to keep the memory mapped while the pointers below are in use.
    _region: Arc<dyn Region>,
    header: *const RingHeader,
    data: *mut u8,
    capacity: u64,
}

// SAFETY: the pointers point into `region`, which is Send + Sync and kept alive by the Arc; each
// endpoint owning a RingPtrs is the single producer or single consumer of its ring.
unsafe impl Send for RingPtrs {}

impl RingPtrs {
    fn new(
        region: Arc<dyn Region>,
        header_at: usize,
        data_at: usize,
        capacity: u64,
        unit: usize,
    ) -> Self {
        assert!(data_at + capacity as usize * unit <= region.len(), "ring does not fit its region");
        let base = region.base();
        assert_eq!(base as usize % 64, 0, "ring region must be 64-byte aligned");
        // SAFETY: both offsets are within the region (asserted above).
        let (header, data) =
            unsafe { (base.add(header_at) as *const RingHeader, base.add(data_at)) };
        RingPtrs { _region: region, header, data, capacity }
    }

    fn header(&self) -> &RingHeader {
        // SAFETY: `header` is 64-byte aligned inside the live region; the region starts
        // zero-filled, a valid RingHeader, and is only accessed through atomics.
        unsafe { &*self.header }
    }
}

/// The scheduler's end of a worker's issue ring.
pub struct IssueProducer {
    ring: RingPtrs,
    tail: u64,
    head_cache: u64,
    wake: Arc<OwnedFd>,
}

impl std::fmt::Debug for IssueProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssueProducer").field("tail", &self.tail).finish()
    }
}

impl IssueProducer {
    pub(crate) fn new(region: Arc<dyn Region>, layout: RingLayout, wake: Arc<OwnedFd>) -> Self {
        let ring = RingPtrs::new(
            region,
            layout.issue_header,
            layout.issue_data,
            layout.issue_slots,
            ISSUE_SLOT_BYTES,
        );
        let tail = ring.header().tail.0.load(Ordering::Acquire);
        let head_cache = ring.header().head.0.load(Ordering::Acquire);
        IssueProducer { ring, tail, head_cache, wake }
    }

    /// Pushes one command; `false` when the ring is full. Wakes the worker only if it flagged
    /// itself asleep.
    pub fn try_push(&mut self, cmd: IssueCmd) -> bool {
        let header = self.ring.header();
        if self.tail - self.head_cache == self.ring.capacity {
            // Dekker partner of the consumer's pop: store head; fence; load tail.
            fence(Ordering::SeqCst);
            self.head_cache = header.head.0.load(Ordering::Acquire);
            if self.tail - self.head_cache == self.ring.capacity {
                return false;
            }
        }
        let index = (self.tail & (self.ring.capacity - 1)) as usize;
        // SAFETY: slot `index` is within the data area (index < capacity) and is owned by the
        // producer until `tail` is published: the consumer reads only slots below `tail`.
        unsafe {
            let slot = self.ring.data.add(index * ISSUE_SLOT_BYTES) as *mut [u64; 4];
            slot.write(cmd.encode());
        }
        self.tail += 1;
        // Release: publishes the slot to the consumer's Acquire load of `tail`.
        header.tail.0.store(self.tail, Ordering::Release);
        // Dekker partner of the consumer's prepare_sleep: store flag; fence; load tail. The first
        // push to a sleeping worker clears the flag as it writes the wake byte, so the pushes
        // that follow before the worker runs write nothing (they would only fill the socket).
        fence(Ordering::SeqCst);
        let sleeping = &header.consumer_sleeping.0;
        if sleeping.load(Ordering::Relaxed) != 0 && sleeping.swap(0, Ordering::SeqCst) != 0 {
            wake_socket(self.wake.as_raw_fd());
        }
        true
    }

    /// Asks the worker to abort now, ahead of the commands still queued in the ring: it cancels
    /// what is in flight and what is queued (reported `Cancelled`), sends `Done` and exits.
    /// Always wakes the worker.
    pub fn request_abort(&mut self) {
        // Release: pairs with the consumer's Acquire load in `abort_requested`.
        self.ring.header().abort.0.store(1, Ordering::Release);
        wake_socket(self.wake.as_raw_fd());
    }

    /// Free slots right now (may grow as the worker pops).
    pub fn free_slots(&self) -> usize {
        let head = self.ring.header().head.0.load(Ordering::Acquire);
        (self.ring.capacity - (self.tail - head)) as usize
    }

    /// Total slots of the ring.
    pub fn capacity(&self) -> usize {
        self.ring.capacity as usize
    }
}

fn wake_socket(fd: RawFd) {
    let byte = 1u8;
    // SAFETY: writes one byte from a live local to a non-blocking socket we own; EAGAIN (a full
    // socket buffer) is fine because the worker has unread wake bytes already.
    unsafe {
        libc::write(fd, &byte as *const u8 as *const libc::c_void, 1);
    }
}

/// The worker's end of its issue ring.
pub struct IssueConsumer {
    ring: RingPtrs,
    head: u64,
    tail_cache: u64,
    wake: Arc<OwnedFd>,
    space: Doorbell,
}

impl std::fmt::Debug for IssueConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssueConsumer").field("head", &self.head).finish()
    }
}

impl IssueConsumer {
    pub(crate) fn new(
        region: Arc<dyn Region>,
        layout: RingLayout,
        wake: Arc<OwnedFd>,
        space: Doorbell,
    ) -> Self {
        let ring = RingPtrs::new(
            region,
            layout.issue_header,
            layout.issue_data,
            layout.issue_slots,
            ISSUE_SLOT_BYTES,
        );
        let head = ring.header().head.0.load(Ordering::Acquire);
        IssueConsumer { ring, head, tail_cache: head, wake, space }
    }

    /// Pops one command, or `None` when the ring is empty. Rings the issue-space doorbell when
    /// this pop brought the ring down to half full: a scheduler that found the ring full sleeps
    /// until half of it is free again, so a burst costs one wake-up per half ring, not one per
    /// command (the scheduler and the worker share a core on small machines).
    pub fn try_pop(&mut self) -> Option<IssueCmd> {
        let header = self.ring.header();
        if self.head == self.tail_cache {
            fence(Ordering::SeqCst);
            self.tail_cache = header.tail.0.load(Ordering::Acquire);
            if self.head == self.tail_cache {
                return None;
            }
        }
        let index = (self.head & (self.ring.capacity - 1)) as usize;
        // SAFETY: slot `index` is below the published tail (Acquire above), so the producer wrote
        // it and will not touch it until `head` passes it.
        let slot =
            unsafe { (self.ring.data.add(index * ISSUE_SLOT_BYTES) as *const [u64; 4]).read() };
        self.head += 1;
        // Release: hands the slot back to the producer's Acquire load of `head`.
        header.head.0.store(self.head, Ordering::Release);
        // Dekker partner of the producer's failed push: store head; fence; load tail. A producer
        // that found the ring full pushes nothing more until woken, so once its last push is
        // visible here the pops count down through every value: none skips the half mark.
        fence(Ordering::SeqCst);
        self.tail_cache = header.tail.0.load(Ordering::Acquire);
        if self.tail_cache - self.head == self.ring.capacity / 2 {
            self.space.ring();
        }
        Some(IssueCmd::decode(slot))
    }

    /// Flags the worker asleep and re-checks the ring: `true` means it is still empty and the
    /// caller should wait for `wake_fd()` to be readable, then call `end_sleep`. `false` means a
    /// command arrived (the flag is already cleared).
    pub fn prepare_sleep(&mut self) -> bool {
        let header = self.ring.header();
        header.consumer_sleeping.0.store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.tail_cache = header.tail.0.load(Ordering::Acquire);
        if self.head != self.tail_cache {
            header.consumer_sleeping.0.store(0, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Whether the coordinator asked for an out-of-band abort (`IssueProducer::request_abort`).
    pub fn abort_requested(&self) -> bool {
        self.ring.header().abort.0.load(Ordering::Acquire) != 0
    }

    /// Clears the sleep flag and drains pending wake bytes.
    pub fn end_sleep(&mut self) {
        self.ring.header().consumer_sleeping.0.store(0, Ordering::SeqCst);
        self.drain_wake();
    }

    /// The socket that becomes readable when the producer wakes a sleeping worker.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// A second handle on the wake socket, for an async runtime to wait on.
    pub fn wake_stream(&self) -> io::Result<std::os::unix::net::UnixStream> {
        Ok(std::os::unix::net::UnixStream::from(self.wake.try_clone()?))
    }

    /// Reads and discards wake bytes without blocking.
    pub fn drain_wake(&self) {
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reads into a live local buffer from a non-blocking socket we own.
            let n = unsafe {
                libc::read(self.wake.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len())
            };
            if n <= 0 || (n as usize) < buf.len() {
                break;
            }
        }
    }

    /// Blocking pop for code outside a runtime (tests, tools): sleeps on the wake socket, up to
    /// `timeout` per sleep; `None` only when nothing came within `timeout`.
    pub fn pop_blocking(&mut self, timeout: Duration) -> Option<IssueCmd> {
        loop {
            if let Some(cmd) = self.try_pop() {
                return Some(cmd);
            }
            if self.prepare_sleep() {
                let mut pfd = libc::pollfd { fd: self.wake_fd(), events: libc::POLLIN, revents: 0 };
                let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
                // SAFETY: polls one live pollfd.
                let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
                self.end_sleep();
                if ready == 0 {
                    return self.try_pop();
                }
            }
        }
    }
}

const FRAME_ALIGN: u64 = 16;
const FRAME_PREFIX_BYTES: usize = 16;
const KIND_PAD: u32 = 0;
const KIND_READY: u32 = 1;
const KIND_SETUP_FAILED: u32 = 2;
const KIND_RECORD: u32 = 3;
const KIND_WARNING: u32 = 4;
const KIND_DONE: u32 = 5;

/// How long a back-pressured producer sleeps before it checks that its parent still lives.
const BACKPRESSURE_NAP: Duration = Duration::from_millis(100);

/// The worker's end of its record ring. A full ring is back-pressure: the push sleeps on a futex
/// until the aggregator frees space; nothing is dropped.
pub struct RecordProducer {
    ring: RingPtrs,
    tail: u64,
    head_cache: u64,
    ready: Doorbell,
    parent_pid: Option<u32>,
    truncated_count: u64,
    /// Record pushes leave the doorbell to `flush_doorbell` (see `defer_doorbell`).
    deferred: bool,
}

impl std::fmt::Debug for RecordProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordProducer").field("tail", &self.tail).finish()
    }
}

impl RecordProducer {
    pub(crate) fn new(
        region: Arc<dyn Region>,
        layout: RingLayout,
        ready: Doorbell,
        parent_pid: Option<u32>,
    ) -> Self {
        let ring =
            RingPtrs::new(region, layout.record_header, layout.record_data, layout.record_bytes, 1);
        let tail = ring.header().tail.0.load(Ordering::Acquire);
        let head_cache = ring.header().head.0.load(Ordering::Acquire);
        RecordProducer {
            ring,
            tail,
            head_cache,
            ready,
            parent_pid,
            truncated_count: 0,
            deferred: false,
        }
    }

    /// The largest payload one frame may carry (a quarter of the ring, less the frame prefix).
    pub fn max_payload_bytes(&self) -> usize {
        (self.ring.capacity / 4) as usize - FRAME_PREFIX_BYTES
    }

    /// Records whose output or error was cut to fit a frame.
    pub fn truncated_count(&self) -> u64 {
        self.truncated_count
    }

    /// Pushes one record; `output` then `error` are cut to fit a frame (counted in
    /// `truncated_count`). `false` only when the coordinator is gone.
    pub fn push_record(&mut self, header: &RecordHeader, output: &[u8], error: &[u8]) -> bool {
        debug_assert!(header.timestamps_ordered(), "record timestamps out of order: {header:?}");
        let room = self.max_payload_bytes() - RECORD_HEADER_BYTES;
        let output_cut = &output[..output.len().min(room)];
        let error_cut = &error[..error.len().min(room - output_cut.len())];
        if output_cut.len() + error_cut.len() < output.len() + error.len() {
            self.truncated_count += 1;
        }
        let ring_now = !self.deferred;
        self.push_frame(KIND_RECORD, Some(header), output_cut, error_cut, ring_now)
    }

    /// With `true`, record pushes publish their frames at once but leave waking an idle
    /// aggregator to the next `flush_doorbell`: one futex wake-up per batch of records instead of
    /// one per record. The caller must flush before it blocks (a push that waits for space
    /// flushes by itself). Control frames (ready, warnings, done) always ring at once.
    pub fn defer_doorbell(&mut self, deferred: bool) {
        self.deferred = deferred;
        if !deferred {
            self.flush_doorbell();
        }
    }

    /// Rings the doorbell if the aggregator ran dry since it was last rung. Cheap when it did not
    /// (one fence and one load of a line the aggregator writes only when it runs dry).
    pub fn flush_doorbell(&mut self) {
        self.ring_if_idle();
    }

    fn ring_if_idle(&self) {
        let header = self.ring.header();
        // Dekker partner of the consumer's empty check: store tail (in push_frame); fence; load
        // flag.
        fence(Ordering::SeqCst);
        let idle = &header.consumer_sleeping.0;
        if idle.load(Ordering::Relaxed) != 0 && idle.swap(0, Ordering::SeqCst) != 0 {
            self.ready.ring();
        }
    }

    /// Announces that the worker's connections are open.
    pub fn push_ready(&mut self, connections_open: u32) -> bool {
        self.push_frame(KIND_READY, None, &connections_open.to_le_bytes(), &[], true)
    }

    /// Reports a setup failure (the worker exits next).
    pub fn push_setup_failed(&mut self, message: &str) -> bool {
        let message = self.fit_str(message);
        self.push_frame(KIND_SETUP_FAILED, None, message.as_bytes(), &[], true)
    }

    /// Sends a warning for the user.
    pub fn push_warning(&mut self, message: &str) -> bool {
        let message = self.fit_str(message);
        self.push_frame(KIND_WARNING, None, message.as_bytes(), &[], true)
    }

    /// Sends the worker's last frame.
    pub fn push_done(&mut self) -> bool {
        self.push_frame(KIND_DONE, None, &[], &[], true)
    }

    fn fit_str<'m>(&self, message: &'m str) -> &'m str {
        let mut end = message.len().min(self.max_payload_bytes());
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        &message[..end]
    }

    fn push_frame(
        &mut self,
        kind: u32,
        header: Option<&RecordHeader>,
        a: &[u8],
        b: &[u8],
        ring_now: bool,
    ) -> bool {
        let header_len = if header.is_some() { RECORD_HEADER_BYTES } else { 0 };
        let used = FRAME_PREFIX_BYTES + header_len + a.len() + b.len();
        let frame_len = (used as u64).next_multiple_of(FRAME_ALIGN);
        debug_assert!(frame_len <= self.ring.capacity / 4);
        let pos = self.tail & (self.ring.capacity - 1);
        let contiguous = self.ring.capacity - pos;
        let need = if frame_len <= contiguous { frame_len } else { contiguous + frame_len };
        if !self.wait_for_space(need) {
            return false;
        }
        if frame_len > contiguous {
            self.write_prefix(pos, [contiguous as u32, KIND_PAD, 0, 0]);
            self.tail += contiguous;
        }
        let pos = (self.tail & (self.ring.capacity - 1)) as usize;
        self.write_prefix(pos as u64, [frame_len as u32, kind, a.len() as u32, b.len() as u32]);
        let mut at = pos + FRAME_PREFIX_BYTES;
        if let Some(header) = header {
            // SAFETY: bytes [at, at + RECORD_HEADER_BYTES) lie inside this frame, which is inside
            // the data area (pos + frame_len <= capacity) and unpublished, so only we touch them.
            let out = unsafe {
                std::slice::from_raw_parts_mut(self.ring.data.add(at), RECORD_HEADER_BYTES)
            };
            header.encode_into(out);
            at += RECORD_HEADER_BYTES;
        }
        for part in [a, b] {
            // SAFETY: as above: the bytes lie inside this unpublished frame.
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), self.ring.data.add(at), part.len())
            };
            at += part.len();
        }
        self.tail += frame_len;
        let ring_header = self.ring.header();
        // Release: publishes the frame bytes to the consumer's Acquire load of `tail`.
        ring_header.tail.0.store(self.tail, Ordering::Release);
        // The idle flag's line is written only when the consumer runs dry, so a busy consumer
        // costs no cache-line transfer here, and `head` is read only when space runs short.
        if ring_now {
            self.ring_if_idle();
        }
        true
    }

    fn write_prefix(&mut self, pos: u64, words: [u32; 4]) {
        let mut bytes = [0u8; FRAME_PREFIX_BYTES];
        for (chunk, word) in bytes.chunks_exact_mut(4).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        // SAFETY: pos is 16-aligned and below capacity, so the 16 prefix bytes are inside the data
        // area, in space the consumer has handed back and we have not yet published.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ring.data.add(pos as usize),
                bytes.len(),
            )
        };
    }

    /// Waits until `need` bytes are free; `false` when the parent process died meanwhile.
    fn wait_for_space(&mut self, need: u64) -> bool {
        let capacity = self.ring.capacity;
        let header = self.ring.header();
        loop {
            if capacity - (self.tail - self.head_cache) >= need {
                return true;
            }
            self.head_cache = header.head.0.load(Ordering::Acquire);
            if capacity - (self.tail - self.head_cache) >= need {
                return true;
            }
            // An aggregator asleep on deferred records would never free the space.
            self.ring_if_idle();
            // Dekker partner of the consumer's pop: store flag; fence; load head.
            header.producer_waiting.0.store(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let epoch = header.space_epoch.0.load(Ordering::SeqCst);
            self.head_cache = header.head.0.load(Ordering::Acquire);
            if capacity - (self.tail - self.head_cache) < need {
                futex_wait(&header.space_epoch.0, epoch, Some(BACKPRESSURE_NAP));
            }
            header.producer_waiting.0.store(0, Ordering::SeqCst);
            if let Some(parent) = self.parent_pid {
                // SAFETY: getppid has no preconditions.
                if unsafe { libc::getppid() } as u32 != parent {
                    return false;
                }
            }
        }
    }
}

/// The aggregator's end of one worker's record ring.
pub struct RecordConsumer {
    ring: RingPtrs,
    head: u64,
    tail_cache: u64,
}

impl std::fmt::Debug for RecordConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordConsumer").field("head", &self.head).finish()
    }
}

/// A frame as read from the ring, before it becomes a `WorkerEvent`.
struct RawFrame {
    len: u64,
    kind: u32,
    a_len: usize,
    b_len: usize,
}

impl RecordConsumer {
    pub(crate) fn new(region: Arc<dyn Region>, layout: RingLayout) -> Self {
        let ring =
            RingPtrs::new(region, layout.record_header, layout.record_data, layout.record_bytes, 1);
        let head = ring.header().head.0.load(Ordering::Acquire);
        RecordConsumer { ring, head, tail_cache: head }
    }

    /// Pops one frame and hands it to `f`; `None` when the ring is empty. The frame's bytes are
    /// freed after `f` returns, and a producer sleeping on back-pressure is woken.
    ///
    /// A `None` flags the ring idle: the producer's next push rings the doorbell once. So a
    /// caller that reads the doorbell's epoch, pops until `None` and then waits on that epoch
    /// never sleeps through a record, and a busy ring rings nothing.
    pub fn pop<R>(&mut self, f: impl FnOnce(WorkerEvent<'_>) -> R) -> Option<R> {
        let frame = loop {
            if self.head == self.tail_cache && self.is_empty_flag_idle() {
                return None;
            }
            let frame = self.read_prefix();
            if frame.kind != KIND_PAD {
                break frame;
            }
            self.head += frame.len;
        };
        let pos = (self.head & (self.ring.capacity - 1)) as usize;
        let result = match self.frame_event(pos, &frame) {
            Some(event) => f(event),
            None => {
                // A frame that does not validate means shared memory was corrupted: nothing after
                // it can be trusted, so skip everything published so far.
                self.head = self.tail_cache;
                self.release();
                return Some(f(WorkerEvent::Warning { message: "corrupt record frame dropped" }));
            }
        };
        self.head += frame.len;
        self.release();
        Some(result)
    }

    /// Re-reads `tail`; when the ring is still empty, flags the consumer idle and re-reads once
    /// more. `true` when the ring is empty (and flagged).
    fn is_empty_flag_idle(&mut self) -> bool {
        let header = self.ring.header();
        fence(Ordering::SeqCst);
        self.tail_cache = header.tail.0.load(Ordering::Acquire);
        if self.head != self.tail_cache {
            return false;
        }
        // Dekker partner of the producer's push: store flag; fence; load tail. The flag is
        // stored only when clear, so polling an idle ring writes nothing the producer reads. A
        // flag already set (SeqCst load) is either still set for the producer to see, or the
        // producer cleared it later and rang the doorbell after our caller read its epoch.
        let idle = &header.consumer_sleeping.0;
        if idle.load(Ordering::SeqCst) == 0 {
            idle.store(1, Ordering::SeqCst);
        }
        fence(Ordering::SeqCst);
        self.tail_cache = header.tail.0.load(Ordering::Acquire);
        self.head == self.tail_cache
    }

    fn read_prefix(&self) -> RawFrame {
        let pos = (self.head & (self.ring.capacity - 1)) as usize;
        let mut bytes = [0u8; FRAME_PREFIX_BYTES];
        // SAFETY: pos is 16-aligned and below capacity; the prefix is below the published tail
        // (Acquire in `pop`), so the producer finished writing it and will not touch it.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ring.data.add(pos), bytes.as_mut_ptr(), bytes.len())
        };
        let word = |i: usize| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
        let contiguous = self.ring.capacity - pos as u64;
        let mut len = u64::from(word(0));
        if len == 0
            || len % FRAME_ALIGN != 0
            || len > contiguous
            || len > self.tail_cache - self.head
        {
            len = 0;
        }
        RawFrame { len, kind: word(1), a_len: word(2) as usize, b_len: word(3) as usize }
    }

    fn frame_event(&self, pos: usize, frame: &RawFrame) -> Option<WorkerEvent<'_>> {
        if frame.len == 0 {
            return None;
        }
        let header_len = if frame.kind == KIND_RECORD { RECORD_HEADER_BYTES } else { 0 };
        let payload_len = header_len + frame.a_len + frame.b_len;
        if FRAME_PREFIX_BYTES + payload_len > frame.len as usize {
            return None;
        }
        // SAFETY: the payload lies inside this frame (checked above), below the published tail;
        // the producer will not reuse these bytes until `head` passes them after `f` returns, and
        // the borrow of `self` in the returned event prevents that.
        let payload = unsafe {
            std::slice::from_raw_parts(self.ring.data.add(pos + FRAME_PREFIX_BYTES), payload_len)
        };
        let a = &payload[header_len..header_len + frame.a_len];
        let b = &payload[header_len + frame.a_len..];
        let text = |bytes| std::str::from_utf8(bytes).unwrap_or("non-utf-8 message");
        match frame.kind {
            KIND_READY => Some(WorkerEvent::Ready {
                connections_open: u32::from_le_bytes(a.get(..4)?.try_into().ok()?),
            }),
            KIND_SETUP_FAILED => Some(WorkerEvent::SetupFailed { message: text(a) }),
            KIND_WARNING => Some(WorkerEvent::Warning { message: text(a) }),
            KIND_DONE => Some(WorkerEvent::Done),
            KIND_RECORD => {
                let header = RecordHeader::decode(&payload[..RECORD_HEADER_BYTES])?;
                Some(WorkerEvent::Record(RecordView { header, output: a, error: b }))
            }
            _ => None,
        }
    }

    /// Publishes `head` and wakes a producer waiting for space.
    fn release(&mut self) {
        let header = self.ring.header();
        // Release: hands the bytes back to the producer's Acquire load of `head`.
        header.head.0.store(self.head, Ordering::Release);
        // Dekker partner of the producer's wait: store flag; fence; load head.
        fence(Ordering::SeqCst);
        if header.producer_waiting.0.load(Ordering::Relaxed) != 0 {
            header.space_epoch.0.fetch_add(1, Ordering::SeqCst);
            futex_wake_all(&header.space_epoch.0);
        }
    }

    /// Bytes of the ring (for sizing reports).
    pub fn capacity_bytes(&self) -> usize {
        self.ring.capacity as usize
    }
}

/// Creates a connected non-blocking socket pair for waking a worker (tests and `WorkerRings`).
pub(crate) fn wake_pair() -> io::Result<(Arc<OwnedFd>, Arc<OwnedFd>)> {
    let (tx, rx) = std::os::unix::net::UnixStream::pair()?;
    tx.set_nonblocking(true)?;
    rx.set_nonblocking(true)?;
    Ok((Arc::new(OwnedFd::from(tx)), Arc::new(OwnedFd::from(rx))))
}
