//! Several `llm-loadgen stub max-throughput` processes sharing one port (SO_REUSEPORT), so no
//! process holds more descriptors than a hard RLIMIT_NOFILE allows; their `stub stopped:`
//! lines summed. Used by the tests past one address's ports (connections.rs, scale_out.rs).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::wait_bounded;

/// The stub processes; killed (and waited for) when dropped.
pub struct StubFleet {
    children: Vec<Child>,
    host: String,
    port: u16,
}

/// What the stub processes served, summed over them.
#[derive(Debug, Default)]
pub struct Served {
    pub requests: u64,
    pub connections: u64,
    pub peers: BTreeSet<IpAddr>,
}

impl StubFleet {
    /// Starts `count` stubs on 127.0.0.1, the first on a free port and the others on it.
    pub fn start(count: usize) -> StubFleet {
        StubFleet::start_under(&[], "127.0.0.1", count)
    }

    /// As `start`, on `host`, each stub's command line prefixed by `wrap` (e.g. `ip netns
    /// exec NS`, to listen in a network namespace).
    pub fn start_under(wrap: &[&str], host: &str, count: usize) -> StubFleet {
        let mut fleet = StubFleet { children: Vec::new(), host: host.to_string(), port: 0 };
        for _ in 0..count {
            let binary = super::bin_path();
            let mut cmd = match wrap.split_first() {
                Some((program, args)) => {
                    let mut cmd = Command::new(program);
                    cmd.args(args).arg(binary);
                    cmd
                }
                None => Command::new(binary),
            };
            cmd.args(["stub", "max-throughput", "--host", host, "-w", "1"])
                .args(["--port", &fleet.port.to_string()])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().expect("the stub starts");
            // The first line comes once the listener is bound (or the stub exits).
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line).unwrap();
            fleet.children.push(child);
            let prefix = format!("listening on http://{host}:");
            let port = line.trim().strip_prefix(&prefix).and_then(|p| p.parse().ok());
            fleet.port = port.unwrap_or_else(|| panic!("the stub did not start: {line:?}"));
        }
        fleet
    }

    pub fn url(&self) -> String {
        format!("http://{}:{}", self.host, self.port)
    }

    /// Stops every stub (SIGTERM) and sums the `stub stopped:` line each prints.
    pub fn stop(mut self) -> Served {
        let mut served = Served::default();
        for mut child in std::mem::take(&mut self.children) {
            // SAFETY: kill has no memory preconditions; the pid is this test's own child.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let status = wait_bounded(&mut child, Duration::from_secs(20));
            let mut stderr = String::new();
            child.stderr.take().expect("piped").read_to_string(&mut stderr).unwrap();
            assert!(status.is_some_and(|s| s.success()), "stub exit {status:?}: {stderr}");
            served.add_stopped_line(&stderr);
        }
        served
    }
}

impl Drop for StubFleet {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Served {
    /// Adds `stub stopped: R requests on C connections from A, B`.
    fn add_stopped_line(&mut self, stderr: &str) {
        let line = stderr.lines().find_map(|l| l.strip_prefix("stub stopped: "));
        let line = line.unwrap_or_else(|| panic!("no stop line from the stub: {stderr}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        self.requests += words[0].parse::<u64>().expect("requests");
        self.connections += words[3].parse::<u64>().expect("connections");
        let (_, peers) = line.split_once(" from ").expect("peers");
        self.peers.extend(peers.split(", ").filter_map(|p| p.parse::<IpAddr>().ok()));
    }
}
