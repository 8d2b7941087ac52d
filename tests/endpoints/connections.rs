//! Connections past one source address (issue 11): the real binary holds 40,000 connections to
//! one stub address on loopback, each really opened and each answered, and `--source-addresses`
//! puts a run's connections on the addresses it names. The stub runs as several
//! `llm-loadgen stub max-throughput` processes sharing one port (SO_REUSEPORT), so no process
//! needs more descriptors than a hard RLIMIT_NOFILE of 20,000 allows, and none needs root.

use std::collections::BTreeSet;

use std::net::IpAddr;

use std::time::Duration;

use crate::support::fleet::StubFleet;
use crate::support::{alone, reap_leftovers, report_dir, Watched};
use loadgen_worker::http::ports::{
    ephemeral_range, ports_per_source, source_addresses_for, SourceChoice,
};
use serde_json::Value;

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
    // 40,000 connections take most of 127.0.0.1's ports and load both cores: it runs alone,
    // so no other test's connections compete for them.
    let _alone = alone();
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

/// The variable stub answering 2 s streams (200 characters, one every 10 ms, the first after
/// 100 ms): at 80 QPS an open loop holds about 160 of them at once.
fn two_second_streams() -> loadgen_stubs::StubServer {
    crate::support::stub(loadgen_stubs::StubKind::Variable, |c| {
        c.stream_default = true;
        c.stream_interval = 1;
        c.variable.output_len_mean = 200.0;
        c.variable.output_len_spread = 0.0;
        c.variable.inter_token_latency_ms = 10.0;
        c.variable.first_chunk_latency_s = 0.1;
        c.variable.first_chunk_spread = 0.0;
    })
}

/// A Poisson run of 160 samples at 80 QPS against `url`, with `extra` flags.
fn open_loop_run(name: &str, url: &str, extra: &[&str]) -> (Option<i32>, String, Value, String) {
    let dataset = crate::support::dataset();
    let mut args = vec![
        "benchmark",
        "online",
        "--load-pattern",
        "poisson",
        "--target-qps",
        "80",
        "--num-samples",
        "160",
        "--streaming",
        "on",
        "--endpoints",
        url,
        "--model",
        "m",
        "--dataset",
        &dataset,
    ];
    args.extend_from_slice(extra);
    let (code, stderr, summary) = run_binary(name, &args, Duration::from_secs(120));
    let report =
        std::fs::read_to_string(report_dir_of(name).join("report.txt")).unwrap_or_default();
    (code, stderr, summary, report)
}

fn report_dir_of(name: &str) -> std::path::PathBuf {
    crate::support::report_path(name)
}

fn p(block: &Value, key: &str) -> f64 {
    block["percentiles"][key].as_f64().unwrap_or_else(|| panic!("{key} in {block}"))
}

#[test]
fn an_open_loop_pool_grows_with_the_load_instead_of_queueing_samples() {
    let stub = two_second_streams();
    let url = stub.url();
    let (code, stderr, summary, _) = open_loop_run("pool-grows", &url, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(summary["n_samples_failed"], 0, "{summary}");
    // The default pool is a ceiling the load grows into: samples did not queue for a
    // connection, so TTFT is the server's first chunk, not a queue (before, a pool of 80 held
    // 160 streams and the wait and TTFT p50 were seconds).
    let wait_p50_ms = p(&summary["client_wait"], "50.0") / 1e6;
    assert!(wait_p50_ms < 50.0, "client wait p50 {wait_p50_ms} ms: {}", summary["client_wait"]);
    let ttft_p50_ms = p(&summary["ttft"], "50.0") / 1e6;
    assert!((100.0..300.0).contains(&ttft_p50_ms), "TTFT p50 {ttft_p50_ms} ms");
    assert_eq!(summary["connection_pool"]["max_connections_given"], false, "{summary}");
    // A busy host may still make the worker late (and the run says so), but the pool was
    // never the cause.
    let warning = summary["client_wait_warning"].as_str().unwrap_or_default();
    assert!(!warning.contains("connections was busy"), "{warning}");
    assert!(!stderr.contains("connections was busy"), "{stderr}");
}

#[test]
fn a_pool_given_too_small_warns_with_the_wait_its_cause_and_the_flag() {
    let stub = two_second_streams();
    let url = stub.url();
    let (code, stderr, summary, report) =
        open_loop_run("pool-too-small", &url, &["--max-connections", "40"]);
    assert_eq!(code, Some(0), "{stderr}");
    // 160 streams of 2 s on 40 connections: samples queue for seconds, and the run says so,
    // with the wait, the full pool as its cause and the flag.
    let wait = &summary["client_wait"];
    assert!(p(wait, "99.0") > 1e9, "client wait p99 {}", wait);
    assert_eq!(summary["connection_pool"]["max_connections"], 40, "{summary}");
    assert_eq!(summary["connection_pool"]["peak_in_flight"], 40, "{summary}");
    let warning = summary["client_wait_warning"].as_str().unwrap_or_default();
    for part in ["client wait p50", "p99", "pool's 40 connections was busy", "--max-connections"] {
        assert!(warning.contains(part), "{part:?} in {warning:?}");
        assert!(stderr.contains(part), "{part:?} on stderr: {stderr}");
    }
    assert!(report.contains("Client wait (written - issued): p50"), "{report}");
    assert!(report.contains(&format!("WARNING: {warning}")), "{report}");
    // TTFT starts at the issue, as the reference's: it holds the wait, and TTFT from the
    // write leaves it out.
    let from_write_p50_ms = p(&summary["ttft_from_write"], "50.0") / 1e6;
    assert!((100.0..300.0).contains(&from_write_p50_ms), "TTFT from the write {from_write_p50_ms}");
    assert!(p(&summary["ttft"], "50.0") > 0.5e9, "{}", summary["ttft"]);
    // Each sample's wait is on its sample.complete line, and their sum is the block's.
    let events = std::fs::read_to_string(report_dir_of("pool-too-small").join("events.jsonl"))
        .expect("events.jsonl");
    let waits: Vec<u64> = events
        .lines()
        .filter(|l| l.contains("\"sample.complete\""))
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("JSON line");
            v["client_wait_ns"].as_u64().unwrap_or_else(|| panic!("client_wait_ns in {l}"))
        })
        .collect();
    assert_eq!(waits.len(), 160);
    assert_eq!(waits.iter().sum::<u64>(), wait["total"].as_u64().unwrap(), "{wait}");
}
