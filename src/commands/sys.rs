//! System probes for `info` and the default report directory name: the binary's only
//! unsafe code (raw syscalls and libc time conversion).

use std::time::{SystemTime, UNIX_EPOCH};

/// Whether the kernel lets this process create an io_uring: `io_uring_setup` with one
/// entry, then close the ring. `Err` carries the errno text when it is refused.
pub fn io_uring_available() -> Result<(), String> {
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup(entries, params) reads and writes exactly one
    // `struct io_uring_params` (120 bytes on every kernel ABI so far) through the pointer;
    // `params` is a live, zeroed, writable buffer of that size for the whole call.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: `fd` was just returned by io_uring_setup, is owned by nobody else, and is
    // closed exactly once here.
    unsafe { libc::close(fd as libc::c_int) };
    Ok(())
}

/// Local time as `YYYYMMDD_HHMMSS` (the reference's report directory suffix).
pub fn local_timestamp() -> String {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let Some(tm) = local_tm(secs) else { return utc_timestamp(secs) };
    format!(
        "{:04}{:02}{:02}_{:02}{:02}{:02}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// Local time now as `YYYY-MM-DDTHH:MM:SS.mmm`, no zone (Python's
/// `datetime.now().isoformat(timespec="milliseconds")`, which the reference stamps profiling
/// calls with); UTC where the local time cannot be read.
pub fn local_iso_millis() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let (secs, millis) = (now.as_secs(), now.subsec_millis());
    let Some(tm) = local_tm(secs) else {
        let t = utc_timestamp(secs);
        return format!(
            "{}-{}-{}T{}:{}:{}.{millis:03}",
            &t[0..4],
            &t[4..6],
            &t[6..8],
            &t[9..11],
            &t[11..13],
            &t[13..15]
        );
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{millis:03}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec
    )
}

/// The broken-down local time of Unix second `secs`; `None` when libc cannot convert it.
fn local_tm(secs: u64) -> Option<libc::tm> {
    let t = secs as libc::time_t;
    // SAFETY: `libc::tm` is a plain C struct of integers (and, on glibc, a pointer that
    // localtime_r sets); all-zero bytes are a valid value of it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers refer to live locals for the duration of the call; localtime_r
    // is the re-entrant form and writes only into `tm`.
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    ok.then_some(tm)
}

/// UTC `YYYYMMDD_HHMMSS` from Unix seconds (days-to-civil, Howard Hinnant's algorithm).
pub fn utc_timestamp(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}_{:02}{:02}{:02}",
        rem / 3_600,
        (rem % 3_600) / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_timestamp_matches_known_dates() {
        assert_eq!(utc_timestamp(0), "19700101_000000");
        assert_eq!(utc_timestamp(951_782_400), "20000229_000000");
        assert_eq!(utc_timestamp(1_796_000_000), "20261130_005320");
    }

    #[test]
    fn local_iso_millis_has_pythons_isoformat_shape() {
        let t = local_iso_millis();
        assert_eq!(t.len(), "2026-01-01T00:00:00.000".len(), "{t}");
        let shape: String = t.chars().map(|c| if c.is_ascii_digit() { '9' } else { c }).collect();
        assert_eq!(shape, "9999-99-99T99:99:99.999", "{t}");
    }

    #[test]
    fn local_timestamp_has_the_reference_shape() {
        let ts = local_timestamp();
        assert_eq!(ts.len(), 15, "{ts}");
        assert_eq!(&ts[8..9], "_");
        assert!(ts.chars().filter(|c| *c != '_').all(|c| c.is_ascii_digit()), "{ts}");
    }
}
