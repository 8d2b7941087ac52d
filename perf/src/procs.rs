//! Child processes of the suite: the stub server, the `llm-loadgen` runs and wrk, each started
//! with an affinity mask of its own cores (set on a helper thread, which the child inherits).

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use nix::sched::{sched_setaffinity, CpuSet};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// Runs `f` on a fresh thread whose affinity mask is `cores` (unchanged when empty), so a
/// process it spawns inherits that mask.
fn on_pinned_thread<T: Send + 'static>(
    cores: &[usize],
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    let mut set = CpuSet::new();
    for &c in cores {
        set.set(c).with_context(|| format!("core {c} is out of range"))?;
    }
    let pin = !cores.is_empty();
    let handle = std::thread::spawn(move || {
        if pin {
            // pid 0 is the calling thread: the mask applies to this helper thread only.
            sched_setaffinity(Pid::from_raw(0), &set).map_err(std::io::Error::from)?;
        }
        f()
    });
    Ok(handle.join().map_err(|_| anyhow!("the spawning thread panicked"))??)
}

/// Starts `cmd` with the affinity mask `cores`.
pub fn spawn_pinned(mut cmd: Command, cores: &[usize]) -> anyhow::Result<Child> {
    on_pinned_thread(cores, move || cmd.spawn())
}

/// Runs `cmd` to its end with the affinity mask `cores`, capturing its output.
pub fn output_pinned(mut cmd: Command, cores: &[usize]) -> anyhow::Result<Output> {
    on_pinned_thread(cores, move || cmd.output())
}

/// Runs `cmd` with the affinity mask `cores`; kills it (SIGKILL) and fails when it is still
/// running after `timeout`.
pub fn run_pinned_until(
    cmd: Command,
    cores: &[usize],
    timeout: Duration,
) -> anyhow::Result<ExitStatus> {
    let mut child = spawn_pinned(cmd, cores)?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("still running after {} s: killed", timeout.as_secs());
        }
        // Polling a child's exit: 20 ms is nothing beside runs of seconds.
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The path of `name` on the PATH, if any.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Raises the open-file limit to its hard maximum (16,000 connections need it); children
/// inherit it.
pub fn raise_fd_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// The `llm-loadgen stub max-throughput` child process.
pub struct Stub {
    child: Child,
    /// `http://HOST:PORT`.
    pub url: String,
    pub addr: std::net::SocketAddr,
    drain: Option<JoinHandle<()>>,
}

impl Stub {
    /// Starts the stub on `cores` (one worker per core) and waits for its `listening on` line.
    pub fn start(bin: &Path, cores: &[usize], stream_interval: usize) -> anyhow::Result<Stub> {
        Stub::start_with(bin, cores, stream_interval, None)
    }

    /// `start`, serving TLS with `tls_ca_out = Some(FILE)`: the stub's CA is written to FILE
    /// before it prints its address, for the client's `--ca-bundle`.
    pub fn start_with(
        bin: &Path,
        cores: &[usize],
        stream_interval: usize,
        tls_ca_out: Option<&Path>,
    ) -> anyhow::Result<Stub> {
        let list = cores.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        let mut cmd = Command::new(bin);
        cmd.args(["stub", "max-throughput", "--port", "0"])
            .arg("--num-workers")
            .arg(cores.len().max(1).to_string())
            .arg("--stream-interval")
            .arg(stream_interval.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        if let Some(file) = tls_ca_out {
            cmd.arg("--tls").arg("--tls-cert-out").arg(file);
        }
        if !cores.is_empty() {
            cmd.arg("--pin-cores").arg(&list);
        }
        let mut child = spawn_pinned(cmd, cores).context("starting the stub")?;
        let stdout = child.stdout.take().expect("stdout was piped");
        match read_listening_line(stdout) {
            Ok((url, reader)) => {
                let addr = url
                    .trim_start_matches("http://")
                    .trim_start_matches("https://")
                    .parse()
                    .with_context(|| format!("the stub's address {url:?} does not parse"))?;
                // Keep reading its stdout so the stub never blocks on a full pipe.
                let drain = std::thread::spawn(move || {
                    let _ = std::io::copy(&mut reader.into_inner(), &mut std::io::sink());
                });
                Ok(Stub { child, url, addr, drain: Some(drain) })
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// Stops the stub (SIGTERM) and reaps it.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.terminate()
    }

    fn terminate(&mut self) -> anyhow::Result<()> {
        if self.child.try_wait()?.is_none() {
            let _ = kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM);
            self.child.wait().context("waiting for the stub")?;
        }
        if let Some(d) = self.drain.take() {
            let _ = d.join();
        }
        Ok(())
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        let _ = self.terminate();
    }
}

fn read_listening_line(stdout: ChildStdout) -> anyhow::Result<(String, BufReader<ChildStdout>)> {
    let mut reader = BufReader::new(stdout);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            bail!("the stub exited before it printed its address");
        }
        if let Some(url) = line.trim().strip_prefix("listening on ") {
            return Ok((url.to_string(), reader));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_returns_its_status_or_is_killed_at_the_deadline() {
        let mut quick = Command::new("sh");
        quick.args(["-c", "exit 3"]);
        let status = run_pinned_until(quick, &[], Duration::from_secs(30)).unwrap();
        assert_eq!(status.code(), Some(3));
        let mut slow = Command::new("sleep");
        slow.arg("30");
        let start = Instant::now();
        let err = run_pinned_until(slow, &[], Duration::from_millis(100)).unwrap_err();
        assert!(err.to_string().contains("killed"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_child_inherits_the_affinity_mask() {
        let core = first_core();
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "grep Cpus_allowed_list /proc/self/status"]);
        let out = output_pinned(cmd, &[core]).unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.split(':').nth(1).map(str::trim), Some(core.to_string().as_str()));
    }

    fn first_core() -> usize {
        core_affinity::get_core_ids().and_then(|c| c.first().map(|c| c.id)).unwrap_or(0)
    }
}
