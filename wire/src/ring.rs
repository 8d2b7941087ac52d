//! The ring protocol, pure logic over atomics: single-producer single-consumer rings over a
//! shared byte region, a slot ring for issue commands and a byte ring of 32-byte-aligned frames
//! for records. Each end holds the `Wake`/`Futex` it sleeps and wakes through (system calls for
//! real, see `endpoint.rs`; loom primitives in `loom_tests.rs`), so no system call is made here.
//!
//! Indices are free-running `u64` counters (slots for the issue ring, bytes for the record ring):
//! `head <= tail <= head + capacity` always. `tail` is written only by the producer (Release, the
//! partner of the consumer's Acquire load, publishing the slot or frame bytes); `head` only by the
//! consumer (Release, the partner of the producer's Acquire load, handing the space back).
//! Sleeping is decided with a SeqCst fence between "store my index or flag" and "load the other
//! side's", on both sides (Dekker): at least one side sees the other, so no wake-up is lost.

use std::sync::Arc;

use super::chunks::{cut_chunk_timing, CHUNK_COUNTS_BYTES};
use super::cmd::{IssueCmd, WorkerEvent};
use super::record::{RecordHeader, RecordView, RECORD_HEADER_BYTES};
use super::region::Region;
use super::sync::{fence, AtomicU32, AtomicU64, Futex, Ordering, Wake};

/// Sizes of one worker's rings, fixed by the plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingSizes {
    /// Issue commands the ring holds (rounded up to a power of two).
    pub issue_slots: usize,
    /// Bytes of the record ring (rounded up to a power of two, at least 64 KiB). A record frame
    /// may use at most a quarter of it; longer outputs are truncated at push.
    pub record_bytes: usize,
}

impl Default for RingSizes {
    fn default() -> Self {
        RingSizes { issue_slots: 4096, record_bytes: 4 << 20 }
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
    /// wake socket, cleared by the producer (swap) when it writes the wake byte. Record ring: set
    /// by the consumer when it finds the ring empty, cleared by the producer (swap) when it rings
    /// the doorbell for that.
    consumer_sleeping: Padded<AtomicU32>,
    /// Written by the producer: while it sleeps on `space_epoch` (record ring back-pressure),
    /// the `head` it waits for (half the ring free, so the consumer wakes it once per half ring,
    /// not once per record); 0 when it is not waiting.
    producer_wants_head: Padded<AtomicU64>,
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

    /// Writes fresh control words for both rings. Only the models need it: loom's atomics must be
    /// made inside a model, while a real region's zero fill already is a valid header.
    #[cfg(loom)]
    pub(crate) fn init_headers(&self, region: &dyn Region) {
        let new = || RingHeader {
            tail: Padded(AtomicU64::new(0)),
            head: Padded(AtomicU64::new(0)),
            consumer_sleeping: Padded(AtomicU32::new(0)),
            producer_wants_head: Padded(AtomicU64::new(0)),
            space_epoch: Padded(AtomicU32::new(0)),
            abort: Padded(AtomicU32::new(0)),
        };
        assert!(self.total_bytes() <= region.len(), "rings do not fit their region");
        for at in [self.issue_header, self.record_header] {
            // SAFETY: `at` is a 64-byte aligned offset inside the region (asserted above) that
            // no endpoint uses yet; loom's atomics need no drop, so overwriting is sound.
            unsafe { (region.base().add(at) as *mut RingHeader).write(new()) }
        }
    }
}

/// One ring's view of a region; keeps the region alive.
struct RingPtrs {
    /// Keeps the memory mapped while the pointers below are in use (and, under loom, checks
    /// the plain accesses to it).
    _region: Arc<dyn Region>,
    header: *const RingHeader,
    data: *mut u8,
    capacity: u64,
    #[cfg(loom)]
    data_at: usize,
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
        RingPtrs {
            _region: region,
            header,
            data,
            capacity,
            #[cfg(loom)]
            data_at,
        }
    }

    fn header(&self) -> &RingHeader {
        // SAFETY: `header` is 64-byte aligned inside the live region; the region starts
        // zero-filled, a valid RingHeader, and is only accessed through atomics.
        unsafe { &*self.header }
    }

    /// Bytes `[at, at + len)` of the data area are about to be read (checked under loom only).
    #[inline(always)]
    fn reads(&self, at: usize, len: usize) {
        #[cfg(loom)]
        if let Some(cells) = self._region.cells() {
            cells.read(self.data_at + at, len);
        }
        let _ = (at, len);
    }

    /// Bytes `[at, at + len)` of the data area are about to be written (checked under loom only).
    #[inline(always)]
    fn writes(&self, at: usize, len: usize) {
        #[cfg(loom)]
        if let Some(cells) = self._region.cells() {
            cells.write(self.data_at + at, len);
        }
        let _ = (at, len);
    }
}

/// The producer of an issue ring; `W` wakes a consumer that flagged itself asleep.
pub(crate) struct IssueTx<W> {
    ring: RingPtrs,
    tail: u64,
    head_cache: u64,
    wake: W,
}

impl<W: Wake> IssueTx<W> {
    pub(crate) fn new(region: Arc<dyn Region>, layout: RingLayout, wake: W) -> Self {
        let ring = RingPtrs::new(
            region,
            layout.issue_header,
            layout.issue_data,
            layout.issue_slots,
            ISSUE_SLOT_BYTES,
        );
        let tail = ring.header().tail.0.load(Ordering::Acquire);
        let head_cache = ring.header().head.0.load(Ordering::Acquire);
        IssueTx { ring, tail, head_cache, wake }
    }

    pub(crate) fn tail(&self) -> u64 {
        self.tail
    }

    /// Pushes one command; `false` when the ring is full. Wakes the consumer only if it flagged
    /// itself asleep.
    #[inline]
    pub(crate) fn try_push(&mut self, cmd: IssueCmd) -> bool {
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
        self.ring.writes(index * ISSUE_SLOT_BYTES, ISSUE_SLOT_BYTES);
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
        // push to a sleeping consumer clears the flag as it wakes it, so the pushes that follow
        // before the consumer runs wake nothing (they would only fill the wake socket).
        fence(Ordering::SeqCst);
        let sleeping = &header.consumer_sleeping.0;
        if sleeping.load(Ordering::Relaxed) != 0 && sleeping.swap(0, Ordering::SeqCst) != 0 {
            self.wake.wake();
        }
        true
    }

    /// Sets the abort word, ahead of the commands still queued, and always wakes the consumer.
    pub(crate) fn request_abort(&mut self) {
        // Release: pairs with the consumer's Acquire load in `abort_requested`.
        self.ring.header().abort.0.store(1, Ordering::Release);
        self.wake.wake();
    }

    /// Free slots right now (may grow as the consumer pops).
    pub(crate) fn free_slots(&self) -> usize {
        let head = self.ring.header().head.0.load(Ordering::Acquire);
        (self.ring.capacity - (self.tail - head)) as usize
    }

    pub(crate) fn capacity(&self) -> usize {
        self.ring.capacity as usize
    }
}

/// The consumer of an issue ring; `W` wakes a producer that found the ring full.
pub(crate) struct IssueRx<W> {
    ring: RingPtrs,
    head: u64,
    tail_cache: u64,
    space: W,
}

impl<W: Wake> IssueRx<W> {
    pub(crate) fn new(region: Arc<dyn Region>, layout: RingLayout, space: W) -> Self {
        let ring = RingPtrs::new(
            region,
            layout.issue_header,
            layout.issue_data,
            layout.issue_slots,
            ISSUE_SLOT_BYTES,
        );
        let head = ring.header().head.0.load(Ordering::Acquire);
        IssueRx { ring, head, tail_cache: head, space }
    }

    pub(crate) fn head(&self) -> u64 {
        self.head
    }

    /// Pops one command, or `None` when the ring is empty. Wakes the producer when this pop
    /// brought the ring down to half full: a producer that found the ring full sleeps until half
    /// of it is free again, so a burst costs one wake-up per half ring, not one per command (the
    /// scheduler and the worker share a core on small machines).
    #[inline]
    pub(crate) fn try_pop(&mut self) -> Option<IssueCmd> {
        let header = self.ring.header();
        if self.head == self.tail_cache {
            fence(Ordering::SeqCst);
            self.tail_cache = header.tail.0.load(Ordering::Acquire);
            if self.head == self.tail_cache {
                return None;
            }
        }
        let index = (self.head & (self.ring.capacity - 1)) as usize;
        self.ring.reads(index * ISSUE_SLOT_BYTES, ISSUE_SLOT_BYTES);
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
            self.space.wake();
        }
        Some(IssueCmd::decode(slot))
    }

    /// Flags the consumer asleep and re-checks the ring: `true` means it is still empty and the
    /// caller may sleep until woken, then call `end_sleep`. `false` means a command arrived (the
    /// flag is already cleared).
    pub(crate) fn prepare_sleep(&mut self) -> bool {
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

    /// Whether the producer set the abort word (`IssueTx::request_abort`).
    pub(crate) fn abort_requested(&self) -> bool {
        self.ring.header().abort.0.load(Ordering::Acquire) != 0
    }

    /// Clears the sleep flag (the caller drains its wake channel).
    pub(crate) fn end_sleep(&mut self) {
        self.ring.header().consumer_sleeping.0.store(0, Ordering::SeqCst);
    }
}

const FRAME_ALIGN: u64 = 32;
/// `[frame_len, kind, a_len, b_len, c_len, 0, 0, 0]` as u32 LE. Frames start 32-aligned, so the
/// space left at the ring's end always holds a pad frame's prefix.
const FRAME_PREFIX_BYTES: usize = 32;
const KIND_PAD: u32 = 0;
const KIND_READY: u32 = 1;
const KIND_SETUP_FAILED: u32 = 2;
const KIND_RECORD: u32 = 3;
const KIND_WARNING: u32 = 4;
const KIND_DONE: u32 = 5;
const KIND_ISSUED: u32 = 6;
const KIND_FIRST_CHUNK: u32 = 7;

/// The producer of a record ring. A full ring is back-pressure: the push sleeps on `space`
/// until the consumer frees room; nothing is dropped. `W` wakes a consumer that ran dry.
pub(crate) struct RecordTx<W, F> {
    ring: RingPtrs,
    tail: u64,
    head_cache: u64,
    ready: W,
    space: F,
    truncated_count: u64,
    /// Record pushes leave the wake-up to `flush_doorbell` (see `defer_doorbell`).
    deferred: bool,
}

impl<W: Wake, F: Futex> RecordTx<W, F> {
    pub(crate) fn new(region: Arc<dyn Region>, layout: RingLayout, ready: W, space: F) -> Self {
        let ring =
            RingPtrs::new(region, layout.record_header, layout.record_data, layout.record_bytes, 1);
        let tail = ring.header().tail.0.load(Ordering::Acquire);
        let head_cache = ring.header().head.0.load(Ordering::Acquire);
        RecordTx { ring, tail, head_cache, ready, space, truncated_count: 0, deferred: false }
    }

    pub(crate) fn tail(&self) -> u64 {
        self.tail
    }

    /// The largest payload one frame may carry (a quarter of the ring, less the frame prefix).
    pub(crate) fn max_payload_bytes(&self) -> usize {
        (self.ring.capacity / 4) as usize - FRAME_PREFIX_BYTES
    }

    pub(crate) fn truncated_count(&self) -> u64 {
        self.truncated_count
    }

    /// Pushes one record; `output`, then `error`, then the chunk timing's gaps are cut to fit a
    /// frame (counted in `truncated_count`); the timing's counts always fit. `false` only when
    /// `space` gave up waiting (the consumer is gone).
    #[inline]
    pub(crate) fn push_record(
        &mut self,
        header: &RecordHeader,
        output: &[u8],
        error: &[u8],
        chunk_timing: &[u8],
    ) -> bool {
        debug_assert!(header.timestamps_ordered(), "record timestamps out of order: {header:?}");
        let counts = chunk_timing.len().min(CHUNK_COUNTS_BYTES);
        let room = self.max_payload_bytes() - RECORD_HEADER_BYTES - counts;
        let output_cut = &output[..output.len().min(room)];
        let error_cut = &error[..error.len().min(room - output_cut.len())];
        let room = room - output_cut.len() - error_cut.len() + counts;
        let timing_cut = cut_chunk_timing(chunk_timing, room);
        let whole = output.len() + error.len() + chunk_timing.len();
        if output_cut.len() + error_cut.len() + timing_cut.len() < whole {
            self.truncated_count += 1;
        }
        let ring_now = !self.deferred;
        self.push_frame(KIND_RECORD, Some(header), [output_cut, error_cut, timing_cut], ring_now)
    }

    /// With `true`, record pushes publish their frames at once but leave waking an idle
    /// consumer to the next `flush_doorbell`.
    pub(crate) fn defer_doorbell(&mut self, deferred: bool) {
        self.deferred = deferred;
        if !deferred {
            self.flush_doorbell();
        }
    }

    /// Wakes the consumer if it ran dry since it was last woken. Cheap when it did not (one
    /// fence and one load of a line the consumer writes only when it runs dry).
    pub(crate) fn flush_doorbell(&mut self) {
        self.ring_if_idle();
    }

    fn ring_if_idle(&self) {
        let header = self.ring.header();
        // Dekker partner of the consumer's empty check: store tail (in push_frame); fence; load
        // flag.
        fence(Ordering::SeqCst);
        let idle = &header.consumer_sleeping.0;
        if idle.load(Ordering::Relaxed) != 0 && idle.swap(0, Ordering::SeqCst) != 0 {
            self.ready.wake();
        }
    }

    pub(crate) fn push_ready(&mut self, connections_open: u32) -> bool {
        self.push_frame(KIND_READY, None, [&connections_open.to_le_bytes(), &[], &[]], true)
    }

    pub(crate) fn push_setup_failed(&mut self, message: &str) -> bool {
        let message = self.fit_str(message);
        self.push_frame(KIND_SETUP_FAILED, None, [message.as_bytes(), &[], &[]], true)
    }

    pub(crate) fn push_warning(&mut self, message: &str) -> bool {
        let message = self.fit_str(message);
        self.push_frame(KIND_WARNING, None, [message.as_bytes(), &[], &[]], true)
    }

    /// Pushes a sample's issue (`WorkerEvent::Issued`), doorbell as records.
    pub(crate) fn push_issued(&mut self, sample_id: u64, row: u32, issued_ns: u64) -> bool {
        let mut bytes = [0u8; 20];
        bytes[..8].copy_from_slice(&sample_id.to_le_bytes());
        bytes[8..16].copy_from_slice(&issued_ns.to_le_bytes());
        bytes[16..].copy_from_slice(&row.to_le_bytes());
        let ring_now = !self.deferred;
        self.push_frame(KIND_ISSUED, None, [&bytes, &[], &[]], ring_now)
    }

    /// Pushes a sample's first chunk (`WorkerEvent::FirstChunk`), doorbell as records.
    pub(crate) fn push_first_chunk(&mut self, sample_id: u64, first_chunk_ns: u64) -> bool {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&sample_id.to_le_bytes());
        bytes[8..].copy_from_slice(&first_chunk_ns.to_le_bytes());
        let ring_now = !self.deferred;
        self.push_frame(KIND_FIRST_CHUNK, None, [&bytes, &[], &[]], ring_now)
    }

    pub(crate) fn push_done(&mut self) -> bool {
        self.push_frame(KIND_DONE, None, [&[], &[], &[]], true)
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
        parts: [&[u8]; 3],
        ring_now: bool,
    ) -> bool {
        let header_len = if header.is_some() { RECORD_HEADER_BYTES } else { 0 };
        let [a, b, c] = parts;
        let used = FRAME_PREFIX_BYTES + header_len + a.len() + b.len() + c.len();
        let frame_len = (used as u64).next_multiple_of(FRAME_ALIGN);
        debug_assert!(frame_len <= self.ring.capacity / 4);
        let pos = self.tail & (self.ring.capacity - 1);
        let contiguous = self.ring.capacity - pos;
        let need = if frame_len <= contiguous { frame_len } else { contiguous + frame_len };
        if !self.wait_for_space(need) {
            return false;
        }
        if frame_len > contiguous {
            self.write_prefix(pos, [contiguous as u32, KIND_PAD, 0, 0, 0]);
            self.tail += contiguous;
        }
        let pos = (self.tail & (self.ring.capacity - 1)) as usize;
        self.write_prefix(
            pos as u64,
            [frame_len as u32, kind, a.len() as u32, b.len() as u32, c.len() as u32],
        );
        let mut at = pos + FRAME_PREFIX_BYTES;
        self.ring.writes(at, used - FRAME_PREFIX_BYTES);
        if let Some(header) = header {
            // SAFETY: bytes [at, at + RECORD_HEADER_BYTES) lie inside this frame, which is inside
            // the data area (pos + frame_len <= capacity) and unpublished, so only we touch them.
            let out = unsafe {
                std::slice::from_raw_parts_mut(self.ring.data.add(at), RECORD_HEADER_BYTES)
            };
            header.encode_into(out);
            at += RECORD_HEADER_BYTES;
        }
        for part in parts {
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

    fn write_prefix(&mut self, pos: u64, words: [u32; 5]) {
        let mut bytes = [0u8; FRAME_PREFIX_BYTES];
        for (chunk, word) in bytes.chunks_exact_mut(4).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        self.ring.writes(pos as usize, FRAME_PREFIX_BYTES);
        // SAFETY: pos is 32-aligned and below capacity, so the 32 prefix bytes are inside the data
        // area, in space the consumer has handed back and we have not yet published.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.ring.data.add(pos as usize),
                bytes.len(),
            )
        };
    }

    /// Waits until `need` bytes are free; `false` when `space` gave up (the consumer is gone).
    /// Once it has to sleep it waits for half the ring: a producer faster than its consumer then
    /// costs one wake-up per half ring instead of one per record the consumer frees.
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
            // A consumer asleep on deferred records would never free the space.
            self.ring_if_idle();
            // Above `head_cache` (free space is short of `need`), and at most `tail`: a consumer
            // that drains the ring always reaches it.
            let wants_head = self.tail + need.max(capacity / 2) - capacity;
            // Dekker partner of the consumer's release: store the wanted head; fence; load head.
            header.producer_wants_head.0.store(wants_head, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let epoch = header.space_epoch.0.load(Ordering::SeqCst);
            self.head_cache = header.head.0.load(Ordering::Acquire);
            let go_on =
                self.head_cache >= wants_head || self.space.wait(&header.space_epoch.0, epoch);
            header.producer_wants_head.0.store(0, Ordering::SeqCst);
            if !go_on {
                return false;
            }
        }
    }
}

/// The consumer of a record ring; `F` wakes a producer waiting for space.
pub(crate) struct RecordRx<F> {
    ring: RingPtrs,
    head: u64,
    tail_cache: u64,
    space: F,
}

/// A frame as read from the ring, before it becomes a `WorkerEvent`.
struct RawFrame {
    len: u64,
    kind: u32,
    a_len: usize,
    b_len: usize,
    c_len: usize,
}

impl<F: Futex> RecordRx<F> {
    pub(crate) fn new(region: Arc<dyn Region>, layout: RingLayout, space: F) -> Self {
        let ring =
            RingPtrs::new(region, layout.record_header, layout.record_data, layout.record_bytes, 1);
        let head = ring.header().head.0.load(Ordering::Acquire);
        RecordRx { ring, head, tail_cache: head, space }
    }

    pub(crate) fn head(&self) -> u64 {
        self.head
    }

    /// Pops one frame and hands it to `f`; `None` when the ring is empty. The frame's bytes are
    /// freed after `f` returns, and a producer sleeping on back-pressure is woken.
    ///
    /// A `None` flags the ring idle: the producer's next push wakes it once. So a caller that
    /// reads its doorbell's epoch, pops until `None` and then waits on that epoch never sleeps
    /// through a record, and a busy ring wakes nothing.
    #[inline]
    pub(crate) fn pop<R>(&mut self, f: impl FnOnce(WorkerEvent<'_>) -> R) -> Option<R> {
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
        self.ring.reads(pos, FRAME_PREFIX_BYTES);
        // SAFETY: pos is 32-aligned and below capacity; the prefix is below the published tail
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
        RawFrame {
            len,
            kind: word(1),
            a_len: word(2) as usize,
            b_len: word(3) as usize,
            c_len: word(4) as usize,
        }
    }

    fn frame_event(&self, pos: usize, frame: &RawFrame) -> Option<WorkerEvent<'_>> {
        if frame.len == 0 {
            return None;
        }
        let header_len = if frame.kind == KIND_RECORD { RECORD_HEADER_BYTES } else { 0 };
        let payload_len = header_len + frame.a_len + frame.b_len + frame.c_len;
        if FRAME_PREFIX_BYTES + payload_len > frame.len as usize {
            return None;
        }
        self.ring.reads(pos + FRAME_PREFIX_BYTES, payload_len);
        // SAFETY: the payload lies inside this frame (checked above), below the published tail;
        // the producer will not reuse these bytes until `head` passes them after `f` returns, and
        // the borrow of `self` in the returned event prevents that.
        let payload = unsafe {
            std::slice::from_raw_parts(self.ring.data.add(pos + FRAME_PREFIX_BYTES), payload_len)
        };
        let a = &payload[header_len..header_len + frame.a_len];
        let b_start = header_len + frame.a_len;
        let b = &payload[b_start..b_start + frame.b_len];
        let c = &payload[b_start + frame.b_len..];
        let text = |bytes| std::str::from_utf8(bytes).unwrap_or("non-utf-8 message");
        match frame.kind {
            KIND_READY => Some(WorkerEvent::Ready {
                connections_open: u32::from_le_bytes(a.get(..4)?.try_into().ok()?),
            }),
            KIND_SETUP_FAILED => Some(WorkerEvent::SetupFailed { message: text(a) }),
            KIND_WARNING => Some(WorkerEvent::Warning { message: text(a) }),
            KIND_DONE => Some(WorkerEvent::Done),
            KIND_ISSUED => Some(WorkerEvent::Issued {
                sample_id: u64::from_le_bytes(a.get(..8)?.try_into().ok()?),
                issued_ns: u64::from_le_bytes(a.get(8..16)?.try_into().ok()?),
                row: u32::from_le_bytes(a.get(16..20)?.try_into().ok()?),
            }),
            KIND_FIRST_CHUNK => Some(WorkerEvent::FirstChunk {
                sample_id: u64::from_le_bytes(a.get(..8)?.try_into().ok()?),
                first_chunk_ns: u64::from_le_bytes(a.get(8..16)?.try_into().ok()?),
            }),
            KIND_RECORD => {
                let header = RecordHeader::decode(&payload[..RECORD_HEADER_BYTES])?;
                Some(WorkerEvent::Record(RecordView {
                    header,
                    output: a,
                    error: b,
                    chunk_timing: c,
                }))
            }
            _ => None,
        }
    }

    /// Publishes `head` and wakes a producer waiting for space, once the space it waits for is
    /// free.
    fn release(&mut self) {
        let header = self.ring.header();
        // Release: hands the bytes back to the producer's Acquire load of `head`.
        header.head.0.store(self.head, Ordering::Release);
        // Dekker partner of the producer's wait: store flag; fence; load head.
        fence(Ordering::SeqCst);
        let wants_head = header.producer_wants_head.0.load(Ordering::Relaxed);
        if wants_head != 0 && self.head >= wants_head {
            header.space_epoch.0.fetch_add(1, Ordering::SeqCst);
            self.space.wake_all(&header.space_epoch.0);
        }
    }

    pub(crate) fn capacity_bytes(&self) -> usize {
        self.ring.capacity as usize
    }
}
