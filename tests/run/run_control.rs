//! Run control end to end: load patterns, caps, interrupts, dead workers, timing fidelity.

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::{
    alive, bin, check_accounting, children_of, dataset, report_dir, run, show, signal, stub,
    summary, wait_for,
};
use loadgen_stubs::{StubKind, StubServer};

fn args(mode: &[&str], url: &str, dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = vec!["benchmark".into()];
    v.extend(mode.iter().map(|s| s.to_string()));
    v.extend(
        [
            "--endpoints",
            url,
            "--model",
            "test-model",
            "--dataset",
            &dataset(),
            "--report-dir",
            dir.to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    v.extend(extra.iter().map(|s| s.to_string()));
    if !extra.contains(&"--workers") {
        v.extend(["--workers".to_string(), "1".to_string()]);
    }
    v
}

fn spawn(args: &[String]) -> Child {
    bin().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn")
}

fn finish(child: Child) -> Output {
    let out = child.wait_with_output().expect("the run ends");
    show(&out);
    out
}

/// Events of the run: (issued_ns, complete_ns) per tracked sample.
fn intervals(dir: &Path) -> Vec<(u64, u64)> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let mut issued = std::collections::HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let uuid = v["sample_uuid"].as_str().unwrap().to_string();
        let ts = v["timestamp_ns"].as_u64().unwrap();
        match v["event_type"].as_str().unwrap() {
            "sample.issued" => {
                issued.insert(uuid, ts);
            }
            "sample.complete" => out.push((issued[&uuid], ts)),
            _ => {}
        }
    }
    out
}

/// A stub that takes exactly 5 ms to answer (the variable stub applies its first-chunk latency
/// in ICL mode, which a non-zero inter-token latency turns on).
fn five_ms_stub() -> loadgen_stubs::StubServer {
    stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.005;
        c.variable.first_chunk_spread = 0.0;
        c.variable.inter_token_latency_ms = 0.1;
        c.variable.inter_token_spread = 0.0;
        c.variable.output_len_mean = 20.0;
        c.variable.output_len_spread = 0.0;
    })
}

#[test]
fn concurrency_holds_exactly_n_in_flight() {
    let server = five_ms_stub();
    let dir = report_dir("concurrency");
    let out = run(args(
        &["online"],
        &server.url(),
        &dir,
        &[
            "--load-pattern",
            "concurrency",
            "--concurrency",
            "8",
            "--num-samples",
            "400",
            "--streaming",
            "off",
        ],
    ));
    assert_eq!(out.status.code(), Some(0));
    let spans = intervals(&dir);
    assert_eq!(spans.len(), 400);
    // Sweep the issue/complete instants: the in-flight count never exceeds 8 and reaches it.
    let mut points: Vec<(u64, i64)> = spans.iter().flat_map(|&(i, c)| [(i, 1), (c, -1)]).collect();
    points.sort_by_key(|&(t, d)| (t, d));
    let mut now = 0i64;
    let mut max = 0i64;
    for &(_, d) in &points {
        now += d;
        max = max.max(now);
    }
    assert_eq!(max, 8, "exactly 8 in flight at most");
    // Sample it as the closed loop issues: right after each issue in the steady part (past the
    // first and before the last eight), all eight slots are busy. (A time average would also
    // count moments when a busy machine kept the worker off its core.)
    let mut issues: Vec<u64> = spans.iter().map(|&(i, _)| i).collect();
    issues.sort_unstable();
    let steady = &issues[8..issues.len() - 8];
    let full = steady
        .iter()
        .filter(|&&t| spans.iter().filter(|&&(i, c)| i <= t && t < c).count() == 8)
        .count();
    assert!(
        full * 100 >= steady.len() * 95,
        "eight in flight at {full} of {} issues",
        steady.len()
    );
}

#[test]
fn max_duration_caps_the_wall_time_and_counts_abandoned_samples() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("max-duration");
    let started = Instant::now();
    let out = run(args(
        &["offline"],
        &server.url(),
        &dir,
        &[
            "--runtime.max-duration-ms",
            "1500",
            "--num-samples",
            "10000000",
            "--max-connections",
            "16",
        ],
    ));
    let elapsed = started.elapsed();
    assert_eq!(out.status.code(), Some(0));
    assert!(elapsed < Duration::from_secs(20), "ended near the cap, took {elapsed:?}");
    let s = summary(&dir);
    let completed = s["n_samples_completed"].as_u64().unwrap();
    assert!(completed > 0 && completed < 10_000_000, "completed {completed}");
    let abandoned = s["n_samples_abandoned"].as_u64().unwrap();
    assert_eq!(s["n_samples_failed"], 0, "the cap abandons, it does not fail");
    assert_eq!(s["n_samples_issued"].as_u64().unwrap(), completed + abandoned);
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("abandoned"), "report.txt names the abandoned samples:\n{report}");
}

fn interrupt_mid_run(mode: &[&str], extra: &[&str], name: &str) {
    // Every 20th response stalls: the run cannot finish by itself.
    let server = stub(StubKind::MaxThroughput, |c| c.faults.stall_every = Some(20));
    let dir = report_dir(name);
    let mut a = args(mode, &server.url(), &dir, extra);
    a.extend(["--num-samples".into(), "1000000".into(), "--max-connections".into(), "8".into()]);
    let child = spawn(&a);
    wait_for("requests to reach the stub", Duration::from_secs(60), || {
        server.requests_total() > 50
    });
    assert!(signal(child.id() as i32, libc::SIGINT), "kill(2)");
    let out = finish(child);
    assert_eq!(out.status.code(), Some(130), "{name}");
    let s = summary(&dir);
    assert_eq!(s["state"], "interrupted", "{name}");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("WARNING: run was interrupted"), "{name}: {report}");
    let snapshot = std::fs::read_to_string(dir.join("metrics/final_snapshot.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&snapshot).expect("the snapshot parses");
    for line in std::fs::read_to_string(dir.join("events.jsonl")).unwrap().lines() {
        serde_json::from_str::<serde_json::Value>(line).expect("every event line parses");
    }
}

#[test]
fn ctrl_c_offline_writes_interrupted_reports_and_exits_130() {
    interrupt_mid_run(&["offline"], &["--streaming", "off"], "int-offline");
}

#[test]
fn ctrl_c_poisson_writes_interrupted_reports_and_exits_130() {
    interrupt_mid_run(
        &["online"],
        &["--load-pattern", "poisson", "--target-qps", "2000", "--streaming", "off"],
        "int-poisson",
    );
}

#[test]
fn ctrl_c_concurrency_writes_interrupted_reports_and_exits_130() {
    interrupt_mid_run(
        &["online"],
        &["--load-pattern", "concurrency", "--concurrency", "8", "--streaming", "off"],
        "int-concurrency",
    );
}

#[test]
fn kill_9_of_the_coordinator_leaves_no_worker_behind() {
    let server = stub(StubKind::MaxThroughput, |c| c.faults.stall_every = Some(1));
    let dir = report_dir("kill9");
    let mut a = args(&["offline"], &server.url(), &dir, &["--streaming", "off", "--workers", "2"]);
    a.extend(["--num-samples".into(), "1000".into()]);
    let mut child = spawn(&a);
    let coordinator = child.id();
    wait_for("two workers", Duration::from_secs(60), || children_of(coordinator).len() >= 2);
    let workers = children_of(coordinator);
    wait_for("requests to reach the stub", Duration::from_secs(60), || server.requests_total() > 0);
    assert!(signal(coordinator as i32, libc::SIGKILL), "kill(2)");
    let _ = child.wait();
    wait_for("the workers to die with the coordinator", Duration::from_secs(30), || {
        workers.iter().all(|&w| !alive(w))
    });
}

#[test]
fn a_capped_closed_loop_abandons_only_what_was_in_flight() {
    let server = five_ms_stub();
    let dir = report_dir("capped-closed-loop");
    let out = run(args(
        &["online"],
        &server.url(),
        &dir,
        &[
            "--load-pattern",
            "concurrency",
            "--concurrency",
            "8",
            "--streaming",
            "off",
            "--num-samples",
            "10000000",
            "--runtime.max-duration-ms",
            "1000",
        ],
    ));
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&dir);
    assert_eq!(s["n_samples_failed"], 0, "samples cut at the cap are abandoned, not failed");
    let abandoned = s["n_samples_abandoned"].as_u64().unwrap();
    assert!(abandoned <= 8, "only the 8 in flight are abandoned, got {abandoned}");
    let issued = s["n_samples_issued"].as_u64().unwrap();
    let completed = s["n_samples_completed"].as_u64().unwrap();
    assert_eq!(issued, completed + abandoned, "queued, never-sent samples were never issued");
}

#[test]
fn warmup_samples_are_answered_but_never_enter_the_metrics() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("warmup");
    let out = run(args(
        &["offline"],
        &server.url(),
        &dir,
        &[
            "--streaming",
            "off",
            "--num-samples",
            "500",
            "--warmup",
            "--warmup-requests",
            "200",
            "--warmup-drain",
        ],
    ));
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(server.requests_total(), 700, "the stub answered warm-up and tracked samples");
    let s = summary(&dir);
    assert_eq!(s["n_samples_issued"], 500);
    assert_eq!(s["n_samples_completed"], 500);
    assert_eq!(s["latency"]["total"].as_f64().map(|t| t > 0.0), Some(true));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let completes = events.lines().filter(|l| l.contains("\"sample.complete\"")).count();
    assert_eq!(completes, 500, "warm-up samples have no events");
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("warmup: enabled=True, n_requests=200"), "{report}");
}

#[test]
fn poisson_reports_its_issue_lag_and_warns_when_the_client_cannot_keep_up() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("poisson-lag");
    let out = run(args(
        &["online"],
        &server.url(),
        &dir,
        &[
            "--load-pattern",
            "poisson",
            "--target-qps",
            "500",
            "--num-samples",
            "300",
            "--streaming",
            "off",
        ],
    ));
    assert_eq!(out.status.code(), Some(0));
    let lag = &summary(&dir)["issue_lag"];
    assert_eq!(lag["n"], 300, "one lag per issued sample");
    assert_eq!(lag["target_qps"], 500.0);
    assert!(lag["p50_ns"].as_u64().unwrap() <= lag["p99_ns"].as_u64().unwrap());
    assert!(lag["p99_ns"].as_u64().unwrap() <= lag["max_ns"].as_u64().unwrap());
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("Issue lag (written - scheduled): p50"), "{report}");

    // No client issues ten million samples a second: it must say so, not blame the server.
    let dir = report_dir("poisson-impossible");
    let out = run(args(
        &["online"],
        &server.url(),
        &dir,
        &[
            "--load-pattern",
            "poisson",
            "--target-qps",
            "10000000",
            "--max-connections",
            "64",
            "--num-samples",
            "20000",
            "--streaming",
            "off",
        ],
    ));
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the client could not keep up"), "{stderr}");
}

/// Runs `run` and returns its output with the connections the stub accepted meanwhile.
fn connections_made(server: &StubServer, run: impl FnOnce() -> Output) -> (Output, usize) {
    let before = server.connections_accepted();
    let out = run();
    (out, (server.connections_accepted() - before) as usize)
}

#[test]
fn a_large_poisson_pool_opens_only_its_warm_connections_and_the_rest_on_demand() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("poisson-warm");
    let a = args(
        &["online"],
        &server.url(),
        &dir,
        &[
            "--load-pattern",
            "poisson",
            "--target-qps",
            "5000",
            "--num-samples",
            "2000",
            "--streaming",
            "off",
            "-v",
        ],
    );
    let (out, opened) = connections_made(&server, || run(&a));
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The default pool is a ceiling the load grows into; a second of latency at the rate
    // (5,000, at most 1,024 per worker) opens before the start.
    // (The ceiling is 16,384 within the fd budget: `ulimit -Hn` may make it lower.)
    let ceiling: u64 = stderr
        .split("connections: pool of up to ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("the pool's ceiling on stderr: {stderr}"));
    assert!((5000..=16_384).contains(&ceiling), "ceiling {ceiling}");
    assert!(
        stderr.contains(&format!(
            "pool of up to {ceiling} across 1 worker(s), 1024 opened before the start"
        )),
        "{stderr}"
    );
    let s = summary(&dir);
    assert_eq!(
        (s["n_samples_issued"].as_u64(), s["n_samples_completed"].as_u64()),
        (Some(2000), Some(2000))
    );
    assert_eq!(s["n_samples_failed"], 0);
    // 1024 warm; a stub answering in well under a millisecond keeps few of them busy at 5,000
    // QPS, so the on-demand part of the pool stays (nearly) closed.
    assert!((1024..=2500).contains(&opened), "opened {opened} of a {ceiling}-connection pool");
}

#[test]
fn zero_warmup_connections_still_run_and_still_detect_an_unreachable_endpoint() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("warm-zero");
    let extra = [
        "--client.warmup-connections",
        "0",
        "--max-connections",
        "8",
        "--num-samples",
        "300",
        "--streaming",
        "off",
    ];
    let a = args(&["offline"], &server.url(), &dir, &extra);
    let (out, opened) = connections_made(&server, || run(&a));
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&dir);
    assert_eq!(
        (s["n_samples_completed"].as_u64(), s["n_samples_failed"].as_u64()),
        (Some(300), Some(0))
    );
    assert!((1..=8).contains(&opened), "one warm connection, the rest of 8 on demand: {opened}");

    // Bind and drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let out = run(args(&["offline"], &url, &report_dir("warm-zero-unreachable"), &extra));
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "names the endpoint: {stderr}");
}

/// Every other response stalls: 10 of 20 offline samples finish, 10 never do.
fn half_stalled_offline(name: &str, end: &[&str]) -> (Output, std::path::PathBuf) {
    let server = stub(StubKind::MaxThroughput, |c| c.faults.stall_every = Some(2));
    let dir = report_dir(name);
    let mut extra = vec!["--num-samples", "20", "--max-connections", "20", "--streaming", "off"];
    extra.extend_from_slice(end);
    let out = run(args(&["offline"], &server.url(), &dir, &extra));
    (out, dir)
}

#[test]
fn a_drain_cut_by_the_cap_abandons_what_is_left_and_is_no_drain_timeout() {
    // Every sample is issued at once; the drain then runs into the cap.
    let (out, dir) = half_stalled_offline("capped-drain", &["--runtime.max-duration-ms", "1500"]);
    assert_eq!(out.status.code(), Some(0), "something was measured");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stdout.contains("incomplete") && !stderr.contains("incomplete"), "{stdout}{stderr}");
    assert!(stdout.contains("The run hit --runtime.max-duration-ms (1500 ms)"), "{stdout}");
    let s = summary(&dir);
    assert_eq!(s["state"], "complete");
    assert_eq!(s["n_samples_issued"], 20);
    assert_eq!(s["n_samples_completed"], 10);
    assert_eq!(s["n_samples_abandoned"], 10, "the stalled ones are abandoned");
    assert_eq!(s["n_samples_failed"], 0);
    let report = crate::support::report_txt(&dir);
    assert!(report.contains("Total samples abandoned in flight: 10"), "{report}");

    // Without a cap the same drain runs into its own timeout: that report is incomplete.
    let (out, dir) = half_stalled_offline("drain-timeout", &["--performance-drain-timeout", "1"]);
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("in-flight samples did not finish within the drain timeout"),
        "{stderr}"
    );
    assert_eq!(summary(&dir)["n_samples_completed"], 10);
}

/// Waits for `child` at most `limit`; kills it (and so its workers) past that and fails.
fn finish_within(mut child: Child, limit: Duration) -> (Output, Duration) {
    let started = Instant::now();
    let deadline = started + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("the run ends once killed");
            show(&out);
            panic!("the run was still going after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    (finish(child), started.elapsed())
}

/// The coordinator's grace for workers after an abort, as documented (`end::ABORT_GRACE`).
const ABORT_GRACE: Duration = Duration::from_secs(2);
/// Room for a slow, shared test machine on top of the bounds the run promises.
const MARGIN: Duration = Duration::from_secs(8);

#[test]
fn the_cap_ends_a_run_whose_server_stalls() {
    // Every response stalls after its head: the rings fill and the issuer waits for room.
    let server = stub(StubKind::MaxThroughput, |c| c.faults.stall_every = Some(1));
    let dir = report_dir("cap-stalled");
    let cap = Duration::from_millis(2000);
    let extra = [
        "--num-samples",
        "3000",
        "--runtime.max-duration-ms",
        "2000",
        "--max-connections",
        "16",
        "--streaming",
        "off",
    ];
    let started = Instant::now();
    let (out, _) = finish_within(spawn(&args(&["offline"], &server.url(), &dir, &extra)), cap * 15);
    let elapsed = started.elapsed();
    assert!(elapsed < cap + ABORT_GRACE + MARGIN, "ended {elapsed:?} after the start");
    assert_eq!(out.status.code(), Some(4), "nothing completed: nothing was measured");
    let (issued, completed, failed, abandoned) = check_accounting(&dir);
    assert_eq!((completed, failed), (0, 0), "nothing was answered, nothing failed");
    assert!(abandoned > 0 && issued == abandoned, "{issued} issued, {abandoned} abandoned");
}

#[test]
fn a_group_interrupt_abandons_in_flight_samples() {
    use std::os::unix::process::CommandExt;
    let server = stub(StubKind::MaxThroughput, |c| c.faults.stall_every = Some(20));
    let dir = report_dir("group-interrupt");
    let mut a = args(&["offline"], &server.url(), &dir, &["--streaming", "off"]);
    a.extend(["--num-samples".into(), "1000000".into(), "--max-connections".into(), "8".into()]);
    let child = bin()
        .args(&a)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_for("requests to reach the stub", Duration::from_secs(60), || {
        server.requests_total() > 50
    });
    // What a terminal's Ctrl-C does: the signal goes to every process of the group.
    signal_group(child.id(), libc::SIGINT);
    let (out, _) = finish_within(child, ABORT_GRACE + MARGIN);
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(summary(&dir)["n_samples_failed"], 0, "an interrupt abandons, it does not fail");
    let (_, _, _, abandoned) = check_accounting(&dir);
    assert!(abandoned > 0, "the stalled samples were in flight at the interrupt");
}

fn signal_group(pgid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on the process group of a child this test started in its own group.
    assert_eq!(unsafe { libc::kill(-(pgid as libc::pid_t), sig) }, 0);
}

#[test]
fn a_killed_worker_fails_its_in_flight_samples_as_worker_died() {
    let server = stub(StubKind::MaxThroughput, |c| c.faults.stall_every = Some(1));
    let dir = report_dir("killed-worker");
    let mut a = args(&["offline"], &server.url(), &dir, &["--streaming", "off"]);
    a.extend(["--num-samples".into(), "100".into(), "--max-connections".into(), "4".into()]);
    let child = spawn(&a);
    let coordinator = child.id();
    wait_for("the worker", Duration::from_secs(60), || !children_of(coordinator).is_empty());
    // Every request stalls: once the stub has 4, all 4 connections hold one on the wire.
    wait_for("requests to reach the stub", Duration::from_secs(60), || {
        server.requests_total() >= 4
    });
    assert!(signal(children_of(coordinator)[0] as i32, libc::SIGKILL), "kill(2)");
    let (out, _) = finish_within(child, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(4), "a dead worker makes the report incomplete");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("worker 0"), "the message names the worker: {stderr}");
    assert!(stderr.contains("SIGKILL"), "and how it died: {stderr}");
    let s = summary(&dir);
    assert_eq!(s["n_samples_failed"], 4, "the 4 on the wire failed, the rest did not");
    let (issued, completed, _, abandoned) = check_accounting(&dir);
    assert_eq!((issued, completed, abandoned), (100, 4, 96), "the 96 it never sent are abandoned");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let died = events.lines().filter(|l| l.contains(r#"["ErrorData","worker_died","#)).count();
    assert_eq!(died, 4, "each failure names the dead worker");
    assert!(!events.contains("connection_closed"), "not a closed connection");
}

#[test]
fn a_stopped_worker_is_settled_at_the_interrupt() {
    let server = stub(StubKind::MaxThroughput, |c| c.faults.stall_every = Some(20));
    let dir = report_dir("stopped-worker");
    let mut a = args(&["offline"], &server.url(), &dir, &["--streaming", "off", "--workers", "2"]);
    a.extend(["--num-samples".into(), "1000000".into(), "--max-connections".into(), "8".into()]);
    let child = spawn(&a);
    let coordinator = child.id();
    wait_for("two workers", Duration::from_secs(60), || children_of(coordinator).len() >= 2);
    wait_for("requests to reach the stub", Duration::from_secs(60), || {
        server.requests_total() > 50
    });
    // A stopped worker answers nothing, not even the abort; SIGKILL (at the grace) ends it.
    assert!(signal(children_of(coordinator)[0] as i32, libc::SIGSTOP), "kill(2)");
    assert!(signal(coordinator as i32, libc::SIGINT), "kill(2)");
    let (out, elapsed) = finish_within(child, ABORT_GRACE + MARGIN);
    assert_eq!(out.status.code(), Some(130));
    assert!(elapsed < ABORT_GRACE + MARGIN, "ended {elapsed:?} after the interrupt");
    let (_, _, failed, abandoned) = check_accounting(&dir);
    assert_eq!(failed, 0, "an interrupt abandons, it does not fail");
    assert!(abandoned > 0, "the stopped worker's samples are abandoned");
}

#[test]
fn every_issued_sample_has_one_terminal_event() {
    // Every third response stalls: some samples complete, some are in flight at the cap and
    // the rest wait queued in the worker and its ring.
    let server = stub(StubKind::MaxThroughput, |c| c.faults.stall_every = Some(3));
    let dir = report_dir("terminal-events");
    let extra = [
        "--num-samples",
        "300",
        "--runtime.max-duration-ms",
        "1000",
        "--max-connections",
        "8",
        "--streaming",
        "off",
    ];
    let (out, _) =
        finish_within(spawn(&args(&["offline"], &server.url(), &dir, &extra)), MARGIN * 3);
    assert_eq!(out.status.code(), Some(0));
    let (issued, completed, _, abandoned) = check_accounting(&dir);
    assert_eq!(issued, 300);
    assert!(completed > 0 && abandoned > 0, "{completed} completed, {abandoned} abandoned");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let loadgen = events.lines().filter(|l| l.contains(r#""event_type":"error.loadgen""#));
    assert_eq!(loadgen.count() as u64, abandoned, "one error.loadgen line per abandoned sample");
    assert!(events.contains(r#"["ErrorData","abandoned","in flight at the max-duration cap"]"#));
}

/// Per tracked sample of a run's events.jsonl: (issued, complete, client wait, succeeded).
fn completions(dir: &Path) -> Vec<(u64, u64, u64, bool)> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl");
    let mut issued = std::collections::HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let (uuid, at) = (v["sample_uuid"].as_str().unwrap_or(""), v["timestamp_ns"].as_u64());
        match v["event_type"].as_str() {
            Some("sample.issued") => {
                issued.insert(uuid.to_string(), at.unwrap());
            }
            Some("sample.complete") => out.push((
                issued[uuid],
                at.unwrap(),
                v["client_wait_ns"].as_u64().unwrap_or(0),
                !v["data"].is_null(),
            )),
            _ => {}
        }
    }
    out
}

#[test]
fn a_response_that_ends_past_the_timeout_is_a_timeout_even_read_with_its_timer() {
    // Each answer comes 200 ms after its request; the timeout is 400 ms. The worker is
    // stopped (SIGSTOP) once the 8 requests are at the stub and held for a second: the answers
    // arrive and the timers expire while it sleeps, so it wakes to both at once.
    let server = stub(StubKind::Echo, |c| {
        c.faults.delay = Some(loadgen_stubs::DelayFault { delay_ms: 200, every: 1 })
    });
    let dir = report_dir("timeout-by-stamps");
    let mode = ["online", "--load-pattern", "concurrency", "--concurrency", "8"];
    let extra = ["--num-samples", "8", "--streaming", "off", "--timeout", "0.4"];
    let child = spawn(&args(&mode, &server.url(), &dir, &extra));
    let pid = child.id();
    wait_for("the 8 requests at the stub", Duration::from_secs(60), || {
        server.requests_total() >= 8
    });
    let worker = *children_of(pid).first().expect("the worker process");
    assert!(signal(worker as i32, libc::SIGSTOP), "kill(2)");
    // The stall is the fault injected here (a client descheduled past its deadline), not a
    // wait for anything: its length only has to exceed the timeout.
    std::thread::sleep(Duration::from_secs(1));
    assert!(signal(worker as i32, libc::SIGCONT), "kill(2)");
    let out = finish(child);
    assert!(matches!(out.status.code(), Some(0 | 4)), "exit {:?}", out.status.code());
    let timeout_ns = 400_000_000;
    let samples = completions(&dir);
    assert_eq!(samples.len(), 8, "one complete line per sample");
    for &(issued, complete, wait, ok) in &samples {
        let from_write = complete - issued - wait;
        assert!(
            !ok || from_write <= timeout_ns,
            "a success {} ms after its write, past the 400 ms timeout",
            from_write / 1_000_000
        );
    }
    let timeouts = summary(&dir)["failure_kinds"]["timeout"]["count"].as_u64().unwrap_or(0);
    assert!(timeouts >= 1, "the stalled samples are timeouts: {:?}", samples);
}

/// Waits (bounded) until one of `children` exits; returns its index.
fn first_to_exit(children: &mut [Child], limit: Duration) -> usize {
    let mut exited = None;
    wait_for("one of the runs to end", limit, || {
        exited = children.iter_mut().position(|c| c.try_wait().unwrap().is_some());
        exited.is_some()
    });
    exited.unwrap()
}

#[test]
fn two_runs_started_together_into_one_directory_never_share_it() {
    // Every 20th response stalls: the run that gets the directory cannot end by itself, so
    // the other certainly starts while it writes there.
    let server = stub(StubKind::MaxThroughput, |c| c.faults.stall_every = Some(20));
    let dir = report_dir("two-at-once");
    let mut runs: Vec<Child> = ["3000", "2000"]
        .iter()
        .map(|n| {
            let extra = ["--streaming", "off", "--num-samples", n, "--max-connections", "8"];
            spawn(&args(&["offline"], &server.url(), &dir, &extra))
        })
        .collect();
    let loser = first_to_exit(&mut runs, Duration::from_secs(60));
    let winner = runs.remove(1 - loser);
    let out = finish(runs.remove(0));
    assert_eq!(out.status.code(), Some(2), "the second run is refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!("another run is writing in the report directory {}", dir.display());
    assert!(stderr.contains(&expected), "{stderr}");
    wait_for("requests to reach the stub", Duration::from_secs(60), || {
        server.requests_total() > 50
    });
    assert!(signal(winner.id() as i32, libc::SIGINT), "kill(2)");
    assert_eq!(finish(winner).status.code(), Some(130));
    // The report is the winner's alone: its summary counts exactly its log's samples.
    let s = summary(&dir);
    let issued = crate::support::check_terminal_events(&dir);
    assert_eq!(s["n_samples_issued"], issued, "summary and events.jsonl are one run's");
    let config = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    let samples = if loser == 0 { "2000" } else { "3000" };
    assert!(config.contains(&format!("n_samples_to_issue: {samples}\n")), "{config}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn two_runs_on_the_default_directory_at_once_get_one_each() {
    let runs: Vec<Child> = ["7", "9"]
        .iter()
        .map(|n| {
            let a = ["benchmark", "offline", "--endpoints", "null://", "--model", "m", "--json"];
            let rest = ["--num-samples", n, "--workers", "1", "--quiet"];
            let args: Vec<String> = a.iter().chain(&rest).map(|s| s.to_string()).collect();
            spawn(&args)
        })
        .collect();
    let outs: Vec<Output> = runs.into_iter().map(finish).collect();
    let mut dirs = Vec::new();
    for (out, n) in outs.iter().zip([7, 9]) {
        assert_eq!(out.status.code(), Some(0));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let dir = std::path::PathBuf::from(json["report_dir"].as_str().unwrap());
        assert!(dir.display().to_string().starts_with("/tmp/reports_"), "{}", dir.display());
        assert_eq!(summary(&dir)["n_samples_issued"], n);
        assert_eq!(
            crate::support::check_terminal_events(&dir),
            n,
            "{}: its own log",
            dir.display()
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o077, 0, "{}: private in /tmp ({mode:o})", dir.display());
        dirs.push(dir);
    }
    assert_ne!(dirs[0], dirs[1]);
    for dir in dirs {
        let _ = std::fs::remove_dir_all(dir);
    }
}
