//! Shared memory made before fork: one memfd mapping per worker holding its issue and record
//! rings, plus the socket pair that wakes a sleeping worker.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use super::doorbell::Doorbell;
use super::ring::{
    wake_pair, IssueConsumer, IssueProducer, RecordConsumer, RecordProducer, Region, RingLayout,
};

/// A `MAP_SHARED` mapping of a memfd; fork keeps it at the same address in the child.
pub(crate) struct SharedMapping {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all access to it goes through atomics or through the
// ring protocol, which gives each byte one writer at a time.
unsafe impl Send for SharedMapping {}
// SAFETY: as above; `&SharedMapping` only hands out a raw pointer.
unsafe impl Sync for SharedMapping {}

impl SharedMapping {
    /// Creates a zero-filled shared mapping of `len` bytes (rounded up to a page).
    pub(crate) fn create(name: &str, len: usize) -> io::Result<SharedMapping> {
        let len = len.div_ceil(4096).max(1) * 4096;
        let cname = std::ffi::CString::new(name).map_err(io::Error::other)?;
        // SAFETY: `cname` is a valid NUL-terminated string for the call.
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: ftruncate on an fd we own; a failure is reported through the return value.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh shared mapping of the whole memfd; the kernel picks the address. The fd
        // may be closed after mmap (the mapping keeps the file alive).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = std::ptr::NonNull::new(ptr as *mut u8).ok_or_else(io::Error::last_os_error)?;
        Ok(SharedMapping { ptr, len })
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Region for SharedMapping {
    fn base(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; endpoints hold an `Arc` to the
        // mapping, so nothing refers to it any more.
        unsafe {
            libc::munmap(self.ptr.as_ptr() as *mut libc::c_void, self.len);
        }
    }
}

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

/// One worker's rings: an issue ring and a record ring in one memfd mapping, plus a socket pair
/// that wakes the worker when it sleeps on an empty issue ring. Created before fork and
/// inherited by the child; the parent takes `coordinator_ends`, the child `worker_ends`.
pub struct WorkerRings {
    worker_id: u16,
    layout: RingLayout,
    mapping: Arc<SharedMapping>,
    records_ready: Doorbell,
    issue_space: Doorbell,
    wake_tx: Arc<OwnedFd>,
    wake_rx: Arc<OwnedFd>,
    creator_pid: u32,
}

impl std::fmt::Debug for WorkerRings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerRings").field("worker_id", &self.worker_id).finish()
    }
}

impl WorkerRings {
    /// Rings whose record side and issue-space side ring the same doorbell. Fine when one
    /// thread both schedules and aggregates; otherwise prefer [`WorkerRings::create_with`].
    pub fn create(
        worker_id: u16,
        sizes: RingSizes,
        doorbell: &Doorbell,
    ) -> io::Result<WorkerRings> {
        WorkerRings::create_with(worker_id, sizes, doorbell, doorbell)
    }

    /// Rings with two doorbells: `records_ready` is rung when a record ring turns non-empty (the
    /// aggregator sleeps on it), `issue_space` when a full issue ring gets a free slot (the
    /// scheduler sleeps on it).
    pub fn create_with(
        worker_id: u16,
        sizes: RingSizes,
        records_ready: &Doorbell,
        issue_space: &Doorbell,
    ) -> io::Result<WorkerRings> {
        let layout = RingLayout::new(sizes);
        let name = format!("loadgen-worker-{worker_id}");
        let mapping = Arc::new(SharedMapping::create(&name, layout.total_bytes())?);
        let (wake_tx, wake_rx) = wake_pair()?;
        Ok(WorkerRings {
            worker_id,
            layout,
            mapping,
            records_ready: records_ready.clone(),
            issue_space: issue_space.clone(),
            wake_tx,
            wake_rx,
            creator_pid: std::process::id(),
        })
    }

    /// The worker these rings belong to.
    pub fn worker_id(&self) -> u16 {
        self.worker_id
    }

    /// The scheduler's issue producer and the aggregator's record consumer (parent, after fork).
    pub fn coordinator_ends(&self) -> (IssueProducer, RecordConsumer) {
        let region: Arc<dyn Region> = self.mapping.clone();
        let issue = IssueProducer::new(region.clone(), self.layout, self.wake_tx.clone());
        let records = RecordConsumer::new(region, self.layout);
        (issue, records)
    }

    /// The worker's issue consumer and record producer (child, after fork).
    pub fn worker_ends(&self) -> (IssueConsumer, RecordProducer) {
        let region: Arc<dyn Region> = self.mapping.clone();
        let issue = IssueConsumer::new(
            region.clone(),
            self.layout,
            self.wake_rx.clone(),
            self.issue_space.clone(),
        );
        // Outside the creating process a dead parent means nobody will ever drain the ring.
        let parent = (std::process::id() != self.creator_pid).then_some(self.creator_pid);
        let records = RecordProducer::new(region, self.layout, self.records_ready.clone(), parent);
        (issue, records)
    }
}
