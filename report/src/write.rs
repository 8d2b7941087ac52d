//! Writing the report files atomically, and never through a link: a temp file of an
//! unpredictable name made beside the target (`O_EXCL|O_NOFOLLOW`), fsync, rename.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::{mkdirat, Mode};
use nix::unistd::{unlinkat, UnlinkatFlags};

use loadgen_coordinator::metrics::Snapshot;
use loadgen_py::json::to_python_json;

use super::summary::ResultSummary;
use super::text::report_txt;
use super::RunInfo;

/// Fresh temp names tried before a write gives up: a name collides only with one someone
/// planted (they are unpredictable), so a second attempt succeeds unless that is repeated.
const TEMP_NAME_ATTEMPTS: u32 = 8;

/// A directory held open: files are written by names relative to it, so a directory swapped
/// for a link after it was opened is not followed, and a subdirectory that is a link is
/// refused (`O_NOFOLLOW` on every name below it).
#[derive(Debug)]
pub struct OpenDir {
    path: PathBuf,
    dir: fs::File,
}

impl OpenDir {
    /// Opens `path` as a directory, following it if it is a link (the caller's own path).
    pub fn open(path: &Path) -> io::Result<OpenDir> {
        OpenDir::open_with(path, 0)
    }

    /// Opens `path` as a directory, refusing a link as its last component (`ELOOP`).
    pub fn open_no_follow(path: &Path) -> io::Result<OpenDir> {
        OpenDir::open_with(path, libc::O_NOFOLLOW)
    }

    fn open_with(path: &Path, flags: libc::c_int) -> io::Result<OpenDir> {
        let dir = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC | flags)
            .open(path)?;
        Ok(OpenDir { path: path.to_path_buf(), dir })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's own descriptor, for `*at` calls.
    pub fn file(&self) -> &fs::File {
        &self.dir
    }

    /// The subdirectory `name`, made if missing; a link or a file there is refused.
    pub fn subdir(&self, name: &str) -> io::Result<OpenDir> {
        match mkdirat(self.dir.as_fd(), name, Mode::from_bits_truncate(0o777)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let path = self.path.join(name);
        match openat(self.dir.as_fd(), name, flags, Mode::empty()) {
            Ok(fd) => Ok(OpenDir { path, dir: fs::File::from(fd) }),
            Err(nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR) => {
                Err(not_followed(&path, "is a symbolic link or not a directory"))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The directory holding `rel` (one `sub/name` level at most, as the report's files
    /// are) and the file's name in it.
    pub fn parent_of<'a>(&self, rel: &'a str) -> io::Result<(Option<OpenDir>, &'a str)> {
        match rel.split_once('/') {
            Some((sub, name)) if !name.contains('/') => Ok((Some(self.subdir(sub)?), name)),
            Some(_) => Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{rel}: too deep"))),
            None => Ok((None, rel)),
        }
    }

    /// [`write_atomic`] of `rel` (`name` or `sub/name`) under this directory.
    pub fn write_atomic(&self, rel: &str, bytes: &[u8]) -> io::Result<()> {
        self.write_atomic_with(rel, |file| file.write_all(bytes))
    }

    /// [`write_atomic_with`] of `rel` under this directory.
    pub fn write_atomic_with(
        &self,
        rel: &str,
        fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> io::Result<()> {
        let (sub, name) = self.parent_of(rel)?;
        write_atomic_at(sub.as_ref().unwrap_or(self), OsStr::new(name), fill)
    }
}

/// An error for a name the writers do not follow.
pub(crate) fn not_followed(path: &Path, what: &str) -> io::Error {
    io::Error::other(format!(
        "{} {what}; llm-loadgen never writes or reads a report through a link: remove it",
        path.display()
    ))
}

/// Writes `bytes` to `path` so a reader sees the old file or the whole new one, never
/// a half-written one: a temp file beside it, fsynced, then renamed over it. A link at
/// `path` is replaced, never followed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |file| file.write_all(bytes))
}

/// [`write_atomic`] for a file written piece by piece (through a buffer), so a large file
/// (`sample_idx_map.json` of a long run) is never held in memory whole.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("not a file path: {}", path.display()))
    })?;
    write_atomic_at(&OpenDir::open(dir)?, name, fill)
}

/// The atomic write itself, relative to `dir`: the temp file is created `O_EXCL|O_NOFOLLOW`
/// under a name no one can guess, and `renameat` replaces whatever is at `name` (a link
/// included) without following it.
fn write_atomic_at(
    dir: &OpenDir,
    name: &OsStr,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let (tmp, file) = create_temp(dir, name)?;
    let result = (|| {
        let mut file = io::BufWriter::with_capacity(1 << 20, file);
        fill(&mut file)?;
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        renameat(dir.file().as_fd(), tmp.as_os_str(), dir.file().as_fd(), name)?;
        // Persist the rename itself.
        dir.file().sync_all()
    })();
    if result.is_err() {
        let _ = unlinkat(dir.file().as_fd(), tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
    }
    result
}

/// Creates `.<name>.tmp.<pid>.<16 random hex digits>` in `dir`, new (`O_EXCL`, which also
/// refuses a link there), trying another name when one is taken.
fn create_temp(dir: &OpenDir, name: &OsStr) -> io::Result<(OsString, fs::File)> {
    let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
    let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
    for _ in 0..TEMP_NAME_ATTEMPTS {
        let tmp = temp_name(name);
        let mode = Mode::from_bits_truncate(0o666);
        match openat(dir.file().as_fd(), tmp.as_os_str(), flags | OFlag::O_CLOEXEC, mode) {
            Ok(fd) => return Ok((tmp, fs::File::from(fd))),
            Err(nix::errno::Errno::EEXIST) => last = nix::errno::Errno::EEXIST.into(),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last)
}

/// A temp name for `name` that another user cannot predict: 64 bits from the standard
/// library's randomly keyed hasher (seeded from the OS once per process, stepped per call).
fn temp_name(name: &OsStr) -> OsString {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let random = std::collections::hash_map::RandomState::new().hash_one(nanos);
    let mut tmp = OsString::from(".");
    tmp.push(name);
    tmp.push(format!(".tmp.{}.{random:016x}", std::process::id()));
    tmp
}

fn json_error(e: serde_json::Error) -> io::Error {
    io::Error::other(format!("cannot encode report json: {e}"))
}

/// A report file that could not be written, and why.
#[derive(Debug)]
pub struct Unwritten {
    /// The file, relative to the report directory.
    pub file: &'static str,
    pub error: io::Error,
}

/// Writes `metrics/final_snapshot.json`, `performance/result_summary.json` and
/// `report.txt` under `dir`, each on its own: one that fails (a full disk, a subdirectory
/// that is a link) does not stop the others. Returns the files not written.
pub fn write_report_files(
    dir: &OpenDir,
    snap: &Snapshot,
    summary: &ResultSummary,
    info: &RunInfo,
) -> Vec<Unwritten> {
    let mut unwritten = Vec::new();
    let mut attempt = |file: &'static str, bytes: io::Result<Vec<u8>>| {
        if let Err(error) = bytes.and_then(|bytes| dir.write_atomic(file, &bytes)) {
            unwritten.push(Unwritten { file, error });
        }
    };
    attempt("metrics/final_snapshot.json", to_python_json(snap).map_err(json_error));
    attempt("performance/result_summary.json", to_python_json(summary).map_err(json_error));
    attempt("report.txt", Ok(report_txt(summary, info).into_bytes()));
    unwritten
}
