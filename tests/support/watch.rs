//! The binary run under watch (the fault matrix's way to run it): its children recorded, an
//! action fired when a condition holds, a hard wall limit; and the processes it leaves.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// How often the watcher looks at the run; it waits on conditions, this only bounds the lag.
const POLL: Duration = Duration::from_millis(5);

/// The binary, running, with the pids of every child it was seen with.
pub struct Watched {
    child: Child,
    /// The coordinator's pid (also its process group's id when it has its own group).
    pub pid: u32,
    /// Every child of the coordinator seen while it ran (its workers).
    pub seen: BTreeSet<u32>,
    started: Instant,
    logs: (PathBuf, PathBuf),
}

/// How a watched run ended.
pub struct Finished {
    /// The exit code, `None` when killed by a signal (or by the watcher).
    pub code: Option<i32>,
    /// From the spawn to the exit.
    pub elapsed: Duration,
    /// The watcher killed it at the wall limit.
    pub hung: bool,
    /// Every child seen while it ran.
    pub seen: BTreeSet<u32>,
    /// What it printed.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

impl Watched {
    /// Starts `llm-loadgen args…`, in a process group of its own when `own_group` (as a shell
    /// starts a job), its output in files beside `dir` (a pipe nobody reads could fill up).
    pub fn spawn(args: &[String], own_group: bool, dir: &Path) -> Watched {
        let logs = (dir.with_extension("stdout"), dir.with_extension("stderr"));
        let mut cmd = super::bin();
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(File::create(&logs.0).expect("stdout file"))
            .stderr(File::create(&logs.1).expect("stderr file"));
        if own_group {
            cmd.process_group(0);
        }
        let child = cmd.spawn().expect("the binary starts");
        let pid = child.id();
        Watched { child, pid, seen: BTreeSet::new(), started: Instant::now(), logs }
    }

    /// The coordinator's children now.
    pub fn children(&self) -> Vec<u32> {
        children_of(self.pid)
    }

    /// Waits for the exit, recording children and calling `step` on each look until it says it
    /// is done; kills the run (and its children) past `limit`.
    pub fn watch(mut self, limit: Duration, mut step: impl FnMut(&Watched) -> bool) -> Finished {
        let mut stepping = true;
        let mut hung = false;
        let status = loop {
            let kids = self.children();
            self.seen.extend(kids);
            if let Some(status) = self.child.try_wait().expect("wait on the binary") {
                break status;
            }
            if stepping {
                stepping = !step(&self);
            }
            if self.started.elapsed() > limit {
                hung = true;
                self.seen.iter().for_each(|&p| {
                    signal(p as i32, libc::SIGKILL);
                });
                let _ = self.child.kill();
            }
            std::thread::sleep(POLL);
        };
        let elapsed = self.started.elapsed();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        Finished {
            code: status.code(),
            elapsed,
            hung,
            seen: self.seen,
            stdout: read(&self.logs.0),
            stderr: read(&self.logs.1),
        }
    }
}

/// The children of `pid`'s main thread (the workers are forked before any thread starts).
pub fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The one-letter state of `pid` (`R`, `S`, `T` stopped, `Z` zombie), `None` when gone.
pub fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.split_whitespace().next()?.chars().next()
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    !matches!(state(pid), Some('Z') | Some('X') | None)
}

/// kill(2); a negative pid signals that process group. True when the signal was sent (the
/// process may have gone already: tests that need it delivered assert this).
pub fn signal(pid: i32, sig: libc::c_int) -> bool {
    // SAFETY: kill(2) takes plain integers; the pids are processes this test started.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Waits (bounded) for every pid to be gone; kills and returns those still alive.
pub fn reap_leftovers(pids: &BTreeSet<u32>, limit: Duration) -> Vec<u32> {
    let deadline = Instant::now() + limit;
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    left.iter().for_each(|&p| {
        signal(p as i32, libc::SIGKILL);
    });
    left
}
