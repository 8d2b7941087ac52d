//! The report directory of a run: a fresh one under the default name, never a link, locked
//! for the run's whole life so no second run writes into it, and free of planted links.

use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, Flock, FlockArg, OFlag};
use nix::sys::stat::{fstatat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::write::{not_followed, OpenDir};
use loadgen_plan::error::AppError;

/// Names tried for a default report directory (`/tmp/reports_YYYYMMDD_HHMMSS`, then `_2`,
/// `_3`, …) before the run gives up: a name that exists is never reused.
pub const DEFAULT_REPORT_DIR_ATTEMPTS: u32 = 1000;

/// The file a run holds an exclusive `flock` on for its whole life. The lock, not the
/// file, is what counts: it is released when the run's processes end, however they end.
pub const LOCK_FILE: &str = ".llm-loadgen-lock";

/// Every name a run writes under its report directory, a subdirectory before the files in
/// it: none of them may be a link when the run starts.
pub const RUN_NAMES: &[&str] = &[
    LOCK_FILE,
    ".llm-loadgen-reserve",
    "events.jsonl",
    "config.yaml",
    "report.txt",
    "sample_idx_map.json",
    "shard.json",
    "performance",
    "performance/result_summary.json",
    "metrics",
    "metrics/final_snapshot.json",
    "metrics/.ready",
    "accuracy",
    "accuracy/accuracy_results.json",
];

/// A run's report directory, open and locked until dropped.
#[derive(Debug)]
pub struct ReportDir {
    dir: OpenDir,
    /// `None` where the filesystem cannot lock (the run goes on, with a warning).
    _lock: Option<Flock<fs::File>>,
}

impl ReportDir {
    /// Claims the report directory: `path` itself when the user gave it (made if missing;
    /// refused when it is a link), or, for the default name, the first of `path`, `path_2`,
    /// … that `mkdir` can create. Then refuses planted links and takes the lock.
    pub fn claim(path: &Path, default_name: bool) -> Result<ReportDir, AppError> {
        let path = if default_name { create_fresh_dir(path)? } else { create_given(path)? };
        let dir = OpenDir::open_no_follow(&path).map_err(|e| open_error(&path, &e))?;
        check_planted_links(&dir)?;
        let lock = lock(&dir)?;
        Ok(ReportDir { dir, _lock: lock })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The directory, for the atomic writers.
    pub fn open_dir(&self) -> &OpenDir {
        &self.dir
    }

    /// Creates `rel` as a new file: whatever was there (an older run's file, a link) is
    /// unlinked first, never opened, and the create is `O_EXCL|O_NOFOLLOW`.
    pub fn create_fresh(&self, rel: &str) -> io::Result<fs::File> {
        let (sub, name) = self.dir.parent_of(rel)?;
        let at = sub.as_ref().unwrap_or(&self.dir);
        match unlinkat(at.file().as_fd(), name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(e.into()),
        }
        let flags = OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW;
        let mode = Mode::from_bits_truncate(0o666);
        match openat(at.file().as_fd(), name, flags | OFlag::O_CLOEXEC, mode) {
            Ok(fd) => Ok(fs::File::from(fd)),
            Err(Errno::EEXIST) => Err(io::Error::other(format!(
                "{} appeared while the run was starting: another process writes in {}",
                at.path().join(name).display(),
                at.path().display()
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// Makes `rel` exist (an empty file), without following a link there or truncating it.
    pub fn touch(&self, rel: &str) -> io::Result<()> {
        let (sub, name) = self.dir.parent_of(rel)?;
        let at = sub.as_ref().unwrap_or(&self.dir);
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        openat(at.file().as_fd(), name, flags, Mode::from_bits_truncate(0o666))?;
        Ok(())
    }

    /// Removes the file `name` (at the top of the directory), not what a link there names.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        Ok(unlinkat(self.dir.file().as_fd(), name, UnlinkatFlags::NoRemoveDir)?)
    }
}

/// Takes the lock of an existing directory a post-run tool rewrites (`report DIR`), so a
/// run still writing there is refused; the directory itself may be a link the user made.
pub fn lock_existing(path: &Path) -> Result<Option<Flock<fs::File>>, AppError> {
    let dir = OpenDir::open(path).map_err(|e| open_error(path, &e))?;
    lock(&dir)
}

/// Opens an existing file of a report directory for reading, refusing a link there.
pub fn open_existing(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => not_followed(path, "is a symbolic link"),
            _ => e,
        })
}

/// [`open_existing`], read whole as text.
pub fn read_existing(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    io::Read::read_to_string(&mut open_existing(path)?, &mut text)?;
    Ok(text)
}

/// The mode a run makes its report directory with (before the umask): private (0700) in
/// a world-writable parent such as /tmp, where its name can be predicted and its files
/// would be readable by every user; `mkdir -p`'s 0777 elsewhere, where the user chose a
/// place they control.
pub fn new_dir_mode(parent_mode: u32) -> u32 {
    if parent_mode & 0o002 != 0 {
        0o700
    } else {
        0o777
    }
}

/// The `n`th name tried for a default report directory (`n` from 0): `base`, then
/// `base_2`, `base_3`, ….
pub fn default_dir_candidate(base: &Path, n: u32) -> PathBuf {
    match n {
        0 => base.to_path_buf(),
        n => {
            let mut name = base.as_os_str().to_os_string();
            name.push(format!("_{}", n + 1));
            PathBuf::from(name)
        }
    }
}

/// `mkdir` of `path` with [`new_dir_mode`] (after its parents, as `mkdir -p`).
fn make_dir(path: &Path) -> io::Result<()> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    fs::create_dir_all(parent)?;
    let parent_mode = std::os::unix::fs::PermissionsExt::mode(&fs::metadata(parent)?.permissions());
    fs::DirBuilder::new().mode(new_dir_mode(parent_mode)).create(path)
}

fn create_error(path: &Path, e: &io::Error) -> AppError {
    AppError::Setup(format!(
        "cannot create the report directory {}: {e}; pass a writable --report-dir",
        path.display()
    ))
}

/// The default directory: the first candidate that did not exist, made by this run.
fn create_fresh_dir(base: &Path) -> Result<PathBuf, AppError> {
    for n in 0..DEFAULT_REPORT_DIR_ATTEMPTS {
        let path = default_dir_candidate(base, n);
        match make_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(create_error(&path, &e)),
        }
    }
    Err(AppError::Setup(format!(
        "the default report directory {} and its next {} numbered names all exist; pass \
         --report-dir",
        base.display(),
        DEFAULT_REPORT_DIR_ATTEMPTS - 1
    )))
}

/// A directory the user named: made if missing, kept if it is one, refused if it is a link.
fn create_given(path: &Path) -> Result<PathBuf, AppError> {
    if fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(link_error(path));
    }
    match make_dir(path) {
        Ok(()) => Ok(path.to_path_buf()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(path.to_path_buf()),
        Err(e) => Err(create_error(path, &e)),
    }
}

fn link_error(path: &Path) -> AppError {
    AppError::Input(format!(
        "the report directory {} is a symbolic link; a run writes only into a real directory, \
         never through a link: pass the directory itself or another --report-dir",
        path.display()
    ))
}

fn open_error(path: &Path, e: &io::Error) -> AppError {
    match e.raw_os_error() {
        Some(libc::ELOOP) => link_error(path),
        Some(libc::ENOTDIR) => AppError::Input(format!(
            "the report directory {} is not a directory; pass another --report-dir",
            path.display()
        )),
        _ => create_error(path, e),
    }
}

/// Refuses a directory where a name the run writes is a link: someone else put it there,
/// and the run would write through it. (A file where a subdirectory goes is not refused
/// here: it costs only the files in it, which the run names as unwritten, exit 4.)
fn check_planted_links(dir: &OpenDir) -> Result<(), AppError> {
    for &name in RUN_NAMES {
        let flags = nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW;
        let kind = match fstatat(dir.file().as_fd(), name, flags) {
            Ok(stat) => SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT,
            Err(Errno::ENOENT | Errno::ENOTDIR) => continue,
            Err(e) => return Err(create_error(&dir.path().join(name), &e.into())),
        };
        if kind == SFlag::S_IFLNK {
            return Err(AppError::Input(format!(
                "the report directory {} holds a symbolic link at {name}; a run never writes \
                 through a link in its report directory: remove {} or pass another --report-dir",
                dir.path().display(),
                dir.path().join(name).display()
            )));
        }
    }
    Ok(())
}

/// Takes the run's exclusive lock on `dir` (its [`LOCK_FILE`]), without waiting: a
/// directory another run holds is refused. A filesystem that cannot lock gets a warning.
fn lock(dir: &OpenDir) -> Result<Option<Flock<fs::File>>, AppError> {
    let open = |access: OFlag| {
        let flags = access | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        openat(dir.file().as_fd(), LOCK_FILE, flags, Mode::from_bits_truncate(0o644))
    };
    let path = dir.path().join(LOCK_FILE);
    // Another user's lock file may be read-only to us; flock needs no write access.
    let fd = match open(OFlag::O_RDWR) {
        Err(Errno::EACCES) => open(OFlag::O_RDONLY),
        other => other,
    }
    .map_err(|e| create_error(&path, &e.into()))?;
    match Flock::lock(fs::File::from(fd), FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, Errno::EWOULDBLOCK)) => Err(AppError::Input(format!(
            "another run is writing in the report directory {} (it holds the lock on {}); \
             wait for it to end or pass another --report-dir",
            dir.path().display(),
            path.display()
        ))),
        Err((_, e)) => {
            eprintln!(
                "warning: cannot lock the report directory {} ({e}); a second run started \
                 into it would not be refused",
                dir.path().display()
            );
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("llm-loadgen-dir-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_report_dir_in_a_world_writable_parent_is_private() {
        assert_eq!(new_dir_mode(0o1777), 0o700, "/tmp");
        assert_eq!(new_dir_mode(0o777), 0o700);
        assert_eq!(new_dir_mode(0o755), 0o777, "a home directory: mkdir -p's mode");
        assert_eq!(new_dir_mode(0o775), 0o777);
    }

    #[test]
    fn two_default_dirs_claimed_in_the_same_second_differ() {
        let root = scratch("default");
        let base = root.join("reports_20260101_120000");
        let first = ReportDir::claim(&base, true).unwrap();
        let second = ReportDir::claim(&base, true).unwrap();
        assert_eq!(first.path(), base);
        assert_eq!(second.path(), root.join("reports_20260101_120000_2"));
        // An existing default name is never reused, even unlocked and empty.
        drop(first);
        let third = ReportDir::claim(&base, true).unwrap();
        assert_eq!(third.path(), root.join("reports_20260101_120000_3"));
        let mode = fs::metadata(third.path()).unwrap().permissions();
        let _ = fs::remove_dir_all(&root);
        // The scratch root is not world-writable: mkdir -p's mode, less the umask.
        assert_ne!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o700, 0);
    }

    #[test]
    fn a_planted_link_at_a_default_name_is_passed_over_not_followed() {
        let root = scratch("default-link");
        let target = root.join("victim");
        fs::create_dir_all(&target).unwrap();
        let base = root.join("reports_x");
        std::os::unix::fs::symlink(&target, &base).unwrap();
        let dir = ReportDir::claim(&base, true).unwrap();
        assert_eq!(dir.path(), root.join("reports_x_2"));
        assert_eq!(fs::read_dir(&target).unwrap().count(), 0, "nothing written through it");
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_second_claim_of_a_locked_dir_is_refused_naming_it() {
        let root = scratch("lock");
        let first = ReportDir::claim(&root, false).unwrap();
        let err = ReportDir::claim(&root, false).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let text = err.to_string();
        assert!(text.contains("another run is writing"), "{text}");
        assert!(text.contains(&root.display().to_string()), "{text}");
        drop(first);
        assert!(ReportDir::claim(&root, false).is_ok(), "free again once the first ends");
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn a_fresh_file_replaces_a_planted_link_without_following_it() {
        let root = scratch("fresh");
        let victim = root.join("victim");
        fs::write(&victim, "precious").unwrap();
        let run = root.join("run");
        let dir = ReportDir::claim(&run, false).unwrap();
        // Planted after the claim's check: the writers still do not follow them.
        for name in ["events.jsonl", ".llm-loadgen-reserve", "config.yaml"] {
            std::os::unix::fs::symlink(&victim, run.join(name)).unwrap();
        }
        std::os::unix::fs::symlink(&victim, run.join("metrics")).unwrap();
        io::Write::write_all(&mut dir.create_fresh("events.jsonl").unwrap(), b"log").unwrap();
        dir.open_dir().write_atomic("config.yaml", b"cfg").unwrap();
        assert!(dir.touch("metrics/.ready").is_err(), "a linked subdirectory is refused");
        let err = dir.open_dir().write_atomic("metrics/final_snapshot.json", b"{}").unwrap_err();
        assert!(err.to_string().contains("metrics is a symbolic link"), "{err}");
        dir.remove(".llm-loadgen-reserve").unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(fs::read_to_string(run.join("events.jsonl")).unwrap(), "log");
        assert_eq!(fs::read_to_string(run.join("config.yaml")).unwrap(), "cfg");
        assert!(!run.join("events.jsonl").is_symlink());
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn an_existing_file_is_not_read_through_a_link() {
        let root = scratch("read");
        fs::write(root.join("victim"), "secret").unwrap();
        std::os::unix::fs::symlink(root.join("victim"), root.join("config.yaml")).unwrap();
        let err = read_existing(&root.join("config.yaml")).unwrap_err();
        assert!(err.to_string().contains("config.yaml is a symbolic link"), "{err}");
        assert!(!err.to_string().contains("secret"));
        let _ = fs::remove_dir_all(&root);
    }
}
