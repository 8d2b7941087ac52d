//! Forking child processes (workers, the embedded stub) that die with the coordinator.
//!
//! The coordinator forks before it starts any thread or io_uring instance, so a child starts
//! from a single-threaded copy of the parent and may do anything a fresh process may.

use nix::sys::signal::{self, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

/// Forks a child that runs `body` and exits with its return value. The child gets SIGKILL when
/// the parent dies (even by SIGKILL), so no child outlives the run, and ignores SIGINT and
/// SIGTERM: a terminal's Ctrl-C (or `timeout`) signals the whole process group, and a child
/// that died of it would fail its in-flight samples where the coordinator means to stop the run
/// and abandon them. The coordinator ends its children itself (Stop, Abort, then SIGKILL after
/// `run::ABORT_GRACE`). Must be called while the process is single-threaded.
pub fn fork_child(body: impl FnOnce() -> i32) -> std::io::Result<Pid> {
    let parent = nix::unistd::getpid();
    // SAFETY: the coordinator calls this before it starts any thread (Architecture Invariant:
    // fork before any thread or io_uring instance exists), so the child is a consistent copy.
    match unsafe { fork() }.map_err(std::io::Error::from)? {
        ForkResult::Parent { child } => Ok(child),
        ForkResult::Child => {
            // SAFETY: prctl(PR_SET_PDEATHSIG) takes plain integers and has no memory effects.
            unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
            // The parent may have died between fork and prctl: then nobody would signal us.
            if nix::unistd::getppid() != parent {
                // SAFETY: _exit ends the process without running the parent's atexit handlers.
                unsafe { libc::_exit(1) };
            }
            ignore_group_signals();
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(101);
            // SAFETY: _exit skips the parent's destructors and atexit handlers, which belong to
            // the parent's state (open files, the report directory) and must not run twice.
            unsafe { libc::_exit(code) }
        }
    }
}

/// Ignores SIGINT, SIGTERM (the group's stop signals: the coordinator stops its children) and
/// SIGPIPE (a closed connection is a failure kind, not a death).
fn ignore_group_signals() {
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGPIPE] {
        // SAFETY: installing SIG_IGN runs no code of ours in signal context.
        let _ = unsafe { signal::signal(sig, SigHandler::SigIgn) };
    }
}

/// How a child ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildEnd {
    Exited(i32),
    Signaled(String),
}

impl std::fmt::Display for ChildEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildEnd::Exited(code) => write!(f, "exited with code {code}"),
            ChildEnd::Signaled(sig) => write!(f, "was killed by {sig}"),
        }
    }
}

/// Reaps `pid` if it has ended; `None` while it still runs.
pub fn try_reap(pid: Pid) -> Option<ChildEnd> {
    match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::Exited(_, code)) => Some(ChildEnd::Exited(code)),
        Ok(WaitStatus::Signaled(_, sig, _)) => Some(ChildEnd::Signaled(sig.as_str().to_string())),
        Ok(_) => None,
        // ECHILD: already reaped elsewhere; treat as ended.
        Err(_) => Some(ChildEnd::Exited(-1)),
    }
}

/// Kills `pid` with SIGKILL and reaps it.
pub fn kill_and_reap(pid: Pid) {
    let _ = signal::kill(pid, Signal::SIGKILL);
    let _ = waitpid(pid, None);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The signals `pid` ignores, from /proc (the `SigIgn` mask: bit n-1 for signal n).
    fn ignored_mask(pid: Pid) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let hex = status.lines().find_map(|l| l.strip_prefix("SigIgn:")).unwrap_or("0");
        u64::from_str_radix(hex.trim(), 16).unwrap_or(0)
    }

    #[test]
    fn a_child_survives_the_group_stop_signals() {
        let pid = fork_child(|| loop {
            // SAFETY: pause(2) only sleeps until a signal arrives.
            unsafe { libc::pause() };
        })
        .unwrap();
        let wanted = (1u64 << (libc::SIGINT - 1)) | (1u64 << (libc::SIGTERM - 1));
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while ignored_mask(pid) & wanted != wanted && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        // Ignored signals are discarded when sent, so SIGUSR1 (default: death) comes after them.
        for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGUSR1] {
            signal::kill(pid, sig).unwrap();
        }
        let status = waitpid(pid, None).unwrap();
        assert_eq!(status, WaitStatus::Signaled(pid, Signal::SIGUSR1, false));
    }

    #[test]
    fn a_child_exit_code_comes_back() {
        let pid = fork_child(|| 7).unwrap();
        let status = waitpid(pid, None).unwrap();
        assert_eq!(status, WaitStatus::Exited(pid, 7));
    }
}
