//! Forking child processes (workers, the embedded stub) that die with the coordinator.
//!
//! The coordinator forks before it starts any thread or io_uring instance, so a child starts
//! from a single-threaded copy of the parent and may do anything a fresh process may.

use nix::sys::signal::{self, SigHandler, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

/// Forks a child that runs `body` and exits with its return value. The child gets SIGKILL when
/// the parent dies (even by SIGKILL), and default SIGINT/SIGTERM handling, so no child outlives
/// the run. Must be called while the process is single-threaded.
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
            for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGPIPE] {
                let handler =
                    if sig == Signal::SIGPIPE { SigHandler::SigIgn } else { SigHandler::SigDfl };
                // SAFETY: installing SIG_DFL / SIG_IGN runs no code of ours in signal context.
                let _ = unsafe { signal::signal(sig, handler) };
            }
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(101);
            // SAFETY: _exit skips the parent's destructors and atexit handlers, which belong to
            // the parent's state (open files, the report directory) and must not run twice.
            unsafe { libc::_exit(code) }
        }
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

    #[test]
    fn a_child_exit_code_comes_back() {
        let pid = fork_child(|| 7).unwrap();
        let status = waitpid(pid, None).unwrap();
        assert_eq!(status, WaitStatus::Exited(pid, 7));
    }
}
