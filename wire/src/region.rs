//! Memory the rings, doorbells and in-flight table live in: a `MAP_SHARED` memfd mapping that
//! fork keeps at the same address in the child, or heap memory for single-process tests and the
//! loom models.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Memory a ring lives in: a shared mapping in production, heap memory in tests.
pub(crate) trait Region: Send + Sync {
    /// Start of the region, 64-byte aligned, zero-filled at creation.
    fn base(&self) -> *mut u8;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// Under loom, the table that checks every plain (non-atomic) access to the region.
    #[cfg(loom)]
    fn cells(&self) -> Option<&super::sync::AccessCells> {
        None
    }
}

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

/// Heap memory standing in for a shared mapping (single-process tests, loom models).
#[cfg(test)]
pub(crate) struct HeapRegion {
    ptr: std::ptr::NonNull<u8>,
    layout: std::alloc::Layout,
    #[cfg(loom)]
    cells: super::sync::AccessCells,
}

// SAFETY: the region is raw memory; the ring protocol gives each byte one writer at a time. The
// loom cells (loom builds only) are loom's own bookkeeping, touched only by threads that loom
// runs one at a time.
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
        HeapRegion {
            ptr,
            layout,
            #[cfg(loom)]
            cells: super::sync::AccessCells::new(layout.size()),
        }
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
    #[cfg(loom)]
    fn cells(&self) -> Option<&super::sync::AccessCells> {
        Some(&self.cells)
    }
}

#[cfg(test)]
impl Drop for HeapRegion {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout; endpoints hold an `Arc` to us.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}
