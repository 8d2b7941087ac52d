//! Connections past one source address (issue 11): the real binary holds 40,000 connections to
//! one stub address on loopback, each really opened and each answered, and `--source-addresses`
//! puts a run's connections on the addresses it names. The stub runs as several
//! `llm-loadgen stub max-throughput` processes sharing one port (SO_REUSEPORT), so no process
//! needs more descriptors than a hard RLIMIT_NOFILE of 20,000 allows, and none needs root.

mod common;
mod support;

use std::collections::BTreeSet;

use std::net::IpAddr;

use std::time::Duration;

use common::fleet::StubFleet;
use loadgen_worker::http::ports::{
    ephemeral_range, ports_per_source, source_addresses_for, SourceChoice,
};
use serde_json::Value;
use support::{reap_leftovers, report_dir, Watched};

/// Descriptors a process keeps beside its connections (stdio, io_uring, rings, listeners).
const FD_HEADROOM: u64 = 512;
/// How much more than an even share one stub process may get: SO_REUSEPORT spreads
/// connections by a hash of their addresses, not exactly evenly.
const REUSEPORT_SPREAD_PERCENT: u64 = 10;

/// The hard RLIMIT_NOFILE of this process (its children inherit it).
fn hard_fd_limit() -> u64 {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the local struct passed, of the right type.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    limit.rlim_max
}

/// Processes needed so that none holds more than `per_process` of `connections`.
fn processes_for(connections: u64, per_process: u64) -> usize {
    connections.div_ceil(per_process).max(2) as usize
}

/// The binary's run; returns its exit code, stderr and the report's summary.
fn run_binary(name: &str, args: &[&str], limit: Duration) -> (Option<i32>, String, Value) {
    let dir = report_dir(name);
    let mut argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    argv.extend(["--report-dir".to_string(), dir.display().to_string(), "-v".to_string()]);
    let run = Watched::spawn(&argv, false, &dir).watch(limit, |_| false);
    assert!(!run.hung, "{name}: past {limit:?}: {}", run.stderr);
    let left = reap_leftovers(&run.seen, Duration::from_secs(10));
    assert!(left.is_empty(), "{name}: workers left behind: {left:?}");
    let summary = std::fs::read_to_string(dir.join("performance/result_summary.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    (run.code, run.stderr, summary)
}

#[test]
fn forty_thousand_connections_to_one_loopback_address_all_open_and_answer() {
    const CONNECTIONS: u64 = 40_000;
    let per_process = hard_fd_limit().saturating_sub(FD_HEADROOM);
    let workers = processes_for(CONNECTIONS, per_process);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(
        workers <= 2 * cores,
        "{CONNECTIONS} connections need {workers} workers at a hard fd limit of {} (ulimit \
         -Hn), more than the binary allows on {cores} cores; raise the hard limit to at least \
         {}",
        hard_fd_limit(),
        CONNECTIONS.div_ceil(2 * cores as u64) + FD_HEADROOM
    );
    let per_stub = per_process * 100 / (100 + REUSEPORT_SPREAD_PERCENT);
    let fleet = StubFleet::start(processes_for(CONNECTIONS, per_stub));
    let url = fleet.url();
    let (code, stderr, summary) = run_binary(
        "connections-40k",
        &[
            "benchmark",
            "online",
            "--load-pattern",
            "concurrency",
            "--concurrency",
            "40000",
            "--num-samples",
            "40000",
            "--endpoints",
            &url,
            "--model",
            "m",
            "--streaming",
            "off",
            "--workers",
            &workers.to_string(),
        ],
        Duration::from_secs(180),
    );
    let served = fleet.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(summary["n_samples_completed"], CONNECTIONS, "{summary}");
    assert_eq!(summary["n_samples_failed"], 0, "{summary}");
    // One sample per connection of the closed loop: every connection was opened and carried
    // exactly one request, none reconnected.
    assert_eq!((served.connections, served.requests), (CONNECTIONS, CONNECTIONS), "{served:?}");
    // Past one address's ports the run leaves from 127.0.0.1, 127.0.0.2, … (and says so).
    let (low, high) = ephemeral_range();
    let dest: IpAddr = "127.0.0.1".parse().unwrap();
    let per_source = ports_per_source(low, high);
    let want = match source_addresses_for(dest, CONNECTIONS as usize, 0, per_source) {
        SourceChoice::Loopback(addrs) => {
            let listed: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
            let said = format!("connecting from {}", listed.join(", "));
            assert!(stderr.contains(&said), "{said:?} in {stderr}");
            addrs.into_iter().collect()
        }
        other => {
            assert_eq!(other, SourceChoice::AsGiven, "the range {low}-{high} holds them");
            BTreeSet::from([dest])
        }
    };
    assert_eq!(served.peers, want, "the addresses the connections came from");
}

#[test]
fn connections_leave_from_the_source_addresses_given() {
    let fleet = StubFleet::start(1);
    let url = fleet.url();
    let (code, stderr, summary) = run_binary(
        "connections-sources",
        &[
            "benchmark",
            "online",
            "--load-pattern",
            "concurrency",
            "--concurrency",
            "16",
            "--num-samples",
            "64",
            "--endpoints",
            &url,
            "--model",
            "m",
            "--workers",
            "2",
            "--source-addresses",
            "127.0.0.3,127.0.0.4",
        ],
        Duration::from_secs(60),
    );
    let served = fleet.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(summary["n_samples_failed"], 0, "{summary}");
    assert_eq!(served.connections, 16, "{served:?}");
    let want: BTreeSet<IpAddr> = ["127.0.0.3", "127.0.0.4"].map(|a| a.parse().unwrap()).into();
    assert_eq!(served.peers, want);
}

#[test]
fn a_source_address_not_of_this_host_is_refused_before_any_connection() {
    let fleet = StubFleet::start(1);
    let url = fleet.url();
    let (code, stderr, _) = run_binary(
        "connections-not-local",
        &[
            "benchmark",
            "offline",
            "--num-samples",
            "8",
            "--endpoints",
            &url,
            "--model",
            "m",
            "--source-addresses",
            "192.0.2.7",
        ],
        Duration::from_secs(60),
    );
    let served = fleet.stop();
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--source-addresses 192.0.2.7 is not an address of this host"),
        "{stderr}"
    );
    assert_eq!(served.connections, 0, "refused before any worker connected");
}
