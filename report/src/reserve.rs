//! Disk held back for a run's report files while events.jsonl grows, so a disk that the log
//! fills still takes the measured numbers.

use super::dir::ReportDir;

/// The most disk a run holds back for its report files. A run of a billion samples (a soak
/// capped by its duration) would otherwise reserve 64 GB; past this the small files, written
/// first, still fit, and only sample_idx_map.json may not.
pub const REPORT_RESERVE_BYTES_MAX: u64 = 64 << 20;

/// Bytes the small report files need at most: the summary, snapshot and report.txt
/// (about 80 KB together), config.yaml, and about 48 bytes per sample in
/// sample_idx_map.json; with room to spare, and at most `REPORT_RESERVE_BYTES_MAX`.
pub fn report_reserve_bytes(num_samples: u64) -> u64 {
    const FIXED_BYTES: u64 = 256 * 1024;
    const PER_SAMPLE_BYTES: u64 = 64;
    let bytes = FIXED_BYTES.saturating_add(num_samples.saturating_mul(PER_SAMPLE_BYTES));
    bytes.min(REPORT_RESERVE_BYTES_MAX)
}

/// A file of allocated blocks holding disk space for the report files; removed on drop.
#[derive(Debug)]
pub struct SpaceReserve<'a> {
    dir: &'a ReportDir,
}

impl<'a> SpaceReserve<'a> {
    /// The smallest reservation worth holding: below it the disk is full already.
    const BYTES_MIN: u64 = 16 * 1024;
    /// Its name in the report directory.
    pub const FILE: &'static str = ".llm-loadgen-reserve";

    /// Allocates up to `bytes` in `dir` (halving while the disk cannot give that much);
    /// `None` when the filesystem cannot allocate (no fallocate) or has no room at all. The
    /// file is made new (`ReportDir::create_fresh`), so a link planted there is not followed.
    pub fn hold(dir: &'a ReportDir, mut bytes: u64) -> Option<SpaceReserve<'a>> {
        use std::os::fd::AsRawFd;
        let file = dir.create_fresh(Self::FILE).ok()?;
        while bytes >= Self::BYTES_MIN {
            let len = libc::off_t::try_from(bytes).unwrap_or(libc::off_t::MAX);
            // fallocate(2), not posix_fallocate: where the filesystem cannot allocate, glibc's
            // posix_fallocate writes a byte into every block instead, which is slow and wears
            // the disk; fallocate fails (EOPNOTSUPP) and the run goes on without a reserve.
            // SAFETY: fallocate on a file descriptor we own, for a length that fits.
            let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, len) };
            if rc == 0 {
                return Some(SpaceReserve { dir });
            }
            let errno = std::io::Error::last_os_error().raw_os_error();
            if errno != Some(libc::ENOSPC) && errno != Some(libc::EFBIG) {
                break;
            }
            let _ = file.set_len(0);
            bytes /= 2;
        }
        drop(file);
        let _ = dir.remove(Self::FILE);
        None
    }
}

impl Drop for SpaceReserve<'_> {
    fn drop(&mut self) {
        let _ = self.dir.remove(Self::FILE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_reserve_is_capped_for_huge_runs() {
        assert_eq!(report_reserve_bytes(0), 256 * 1024);
        assert_eq!(report_reserve_bytes(1000), 256 * 1024 + 64_000);
        assert_eq!(report_reserve_bytes(1_000_000_000), REPORT_RESERVE_BYTES_MAX);
        assert_eq!(report_reserve_bytes(u64::MAX), REPORT_RESERVE_BYTES_MAX);
    }
}
