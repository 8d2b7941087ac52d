//! Several endpoints (issue 13): one worker spreads its connections over all of them, each
//! endpoint's counts in result_summary.json and report.txt equal what its stub saw, an endpoint
//! dead at the start is a setup error naming it, and one that dies mid-run shows in its counts.

use std::time::{Duration, Instant};

use crate::support::{alone, report_dir, report_txt, run, show, stub, summary, Run};
use loadgen_stubs::{DelayFault, StubKind};
use serde_json::Value;

/// A one-worker offline run of `samples` over `urls` on `connections` connections.
fn bench(urls: &[String], samples: u64, connections: u32, dir: &std::path::Path) -> Run {
    let run = Run::offline(&urls.join(","), dir).model("m").workers(1);
    run.samples(samples).connections(connections)
}

/// The summary's entry for endpoint `e`, and one of its counts.
fn count(s: &Value, e: usize, key: &str) -> u64 {
    s["endpoints"][e][key].as_u64().unwrap_or_else(|| panic!("endpoints[{e}].{key} in {s}"))
}

#[test]
fn one_worker_splits_its_samples_over_two_endpoints_and_counts_each_as_its_stub_saw_it() {
    // Samples go to free connections, so a stub slowed by other runs would take fewer than the
    // about half each held below: it runs alone.
    let _alone = alone();
    let a = stub(StubKind::Echo, |_| {});
    let b = stub(StubKind::Echo, |_| {});
    let urls = [a.url(), b.url()];
    let dir = report_dir("multi-split");
    let out = bench(&urls, 400, 8, &dir).run();
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&dir);
    assert_eq!(s["n_samples_completed"], 400);
    let entries = s["endpoints"].as_array().expect("an endpoints list");
    assert_eq!(entries.len(), 2);
    for (e, server) in [&a, &b].into_iter().enumerate() {
        assert_eq!(s["endpoints"][e]["url"], urls[e].as_str());
        // What the stub framed is what the summary says it sent (no failure, no re-send).
        assert_eq!(count(&s, e, "n_samples"), server.requests_total(), "endpoint {e}");
        assert_eq!(count(&s, e, "n_samples_failed"), 0);
        assert_eq!(s["endpoints"][e]["failures"], serde_json::json!({}));
        // Four connections each, and samples go to free ones: about half each.
        assert!(count(&s, e, "n_samples") >= 100, "endpoint {e}: {}", s["endpoints"]);
        assert_eq!(server.connections_accepted(), 4, "endpoint {e}: four of the eight slots");
        let latency = &s["endpoints"][e]["latency"];
        assert!(latency["percentiles"]["50.0"].as_f64().unwrap() > 0.0, "{latency}");
        assert!(latency["avg"].as_f64().unwrap() > 0.0, "{latency}");
    }
    assert_eq!(count(&s, 0, "n_samples") + count(&s, 1, "n_samples"), 400, "the sum is the total");
    let report = report_txt(&dir);
    let section = report.find("----------------- Endpoints -----------------").expect(&report);
    assert!(section > report.find("Failure kinds").unwrap(), "after the reference's sections");
    for (e, url) in urls.iter().enumerate() {
        let line = format!(
            "{url}: {} samples, 0 failed; latency p50/p99/mean: ",
            count(&s, e, "n_samples")
        );
        assert!(report[section..].contains(&line), "{line} in {report}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(&line), "the console says it too");
    }
}

#[test]
fn a_single_endpoint_run_lists_it_once_with_the_totals_and_no_report_section() {
    let a = stub(StubKind::Echo, |_| {});
    let dir = report_dir("multi-single");
    let out = bench(&[a.url()], 50, 4, &dir).run();
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&dir);
    assert_eq!(s["endpoints"].as_array().map(Vec::len), Some(1));
    assert_eq!(count(&s, 0, "n_samples"), 50);
    assert_eq!(s["endpoints"][0]["latency"]["percentiles"], s["latency"]["percentiles"]);
    assert!(!report_txt(&dir).contains("Endpoints"));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(!events.contains("\"endpoint\""), "one endpoint: the reference's lines");
}

#[test]
fn an_endpoint_dead_at_the_start_is_a_setup_error_naming_it() {
    let live = stub(StubKind::Echo, |_| {});
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let dead_url = format!("http://{dead}");
    let dir = report_dir("multi-dead-at-start");
    let out = bench(&[live.url(), dead_url.clone()], 20, 4, &dir).run();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("endpoint {dead_url}: cannot connect to {dead}")), "{stderr}");
    assert!(!stderr.contains(&live.url()), "only the dead one is named: {stderr}");
    assert_eq!(live.requests_total(), 0, "nothing was sent before the start");
}

#[test]
fn fewer_connections_than_endpoints_is_refused_before_the_run() {
    let a = stub(StubKind::Echo, |_| {});
    let b = stub(StubKind::Echo, |_| {});
    let dir = report_dir("multi-too-few");
    let urls = format!("{},{}", a.url(), b.url());
    let d = dir.display().to_string();
    let out = run([
        "benchmark",
        "online",
        "--load-pattern",
        "concurrency",
        "--concurrency",
        "1",
        "--model",
        "m",
        "--endpoints",
        &urls,
        "--num-samples",
        "20",
        "--report-dir",
        &d,
    ]);
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("2 endpoints need at least 2 connections"), "{stderr}");
    assert_eq!(a.requests_total() + b.requests_total(), 0);
}

/// Longest a mid-run test waits for its stub to see requests: past it the test has hung.
const DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn an_endpoint_killed_mid_run_counts_its_failures_under_it_and_the_other_succeeds() {
    // Both answer after 2 ms, so 2,000 samples over four connections each take about half a
    // second: the second stub is stopped well inside the run.
    let delay = |c: &mut loadgen_stubs::StubConfig| {
        c.faults.delay = Some(DelayFault { delay_ms: 2, every: 1 })
    };
    let a = stub(StubKind::Echo, delay);
    let b = stub(StubKind::Echo, delay);
    let urls = [a.url(), b.url()];
    let dir = report_dir("multi-killed-mid-run");
    let mut child = bench(&urls, 2000, 8, &dir)
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let start = Instant::now();
    while b.requests_total() < 20 {
        assert!(start.elapsed() < DEADLINE, "the second stub saw no 20 requests");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before the stub was stopped");
        std::thread::sleep(Duration::from_millis(2));
    }
    b.stop_handle().stop();
    let out = child.wait_with_output().unwrap();
    show(&out);
    assert_eq!(out.status.code(), Some(0), "some samples succeeded");
    let s = summary(&dir);
    assert_eq!(count(&s, 0, "n_samples_failed"), 0, "{}", s["endpoints"]);
    assert_eq!(count(&s, 0, "n_samples"), a.requests_total(), "the live one got what it saw");
    let failed = count(&s, 1, "n_samples_failed");
    assert!(failed > 0, "{}", s["endpoints"]);
    assert_eq!(failed, s["n_samples_failed"].as_u64().unwrap(), "every failure is the dead one's");
    let kinds = s["endpoints"][1]["failures"].as_object().unwrap();
    let by_kind: u64 = kinds.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(by_kind, failed, "its kinds add up: {kinds:?}");
    assert!(
        kinds.keys().all(|k| ["connect", "connection_closed", "truncated"].contains(&k.as_str())),
        "{kinds:?}"
    );
    // Its successes are answers its stub gave before it stopped.
    let b_ok = count(&s, 1, "n_samples") - failed;
    assert!(b_ok <= b.requests_total(), "{b_ok} successes");
    assert_eq!(count(&s, 0, "n_samples") + count(&s, 1, "n_samples"), 2000);
    let report = report_txt(&dir);
    assert!(report.contains(&format!("{}: ", urls[1])), "{report}");
}

fn rebuild_cmd(args: &[&str], subcommand: &str) -> std::process::Output {
    let out = crate::support::bin().arg(subcommand).args(args).output().expect("the binary runs");
    show(&out);
    out
}

const REBUILT_FILES: [&str; 3] =
    ["report.txt", "performance/result_summary.json", "metrics/final_snapshot.json"];

#[test]
fn a_two_endpoint_run_names_each_samples_endpoint_and_rebuilds_byte_for_byte() {
    // The second endpoint fails every fourth request it gets: its failures are its own.
    let a = stub(StubKind::Echo, |_| {});
    let b = stub(StubKind::Echo, |c| {
        c.faults.status = Some(loadgen_stubs::StatusFault { status: 500, every: 4 })
    });
    let urls = [a.url(), b.url()];
    let dir = report_dir("multi-rebuild");
    let out = bench(&urls, 200, 4, &dir).run();
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&dir);
    assert!(count(&s, 1, "n_samples_failed") > 0, "{}", s["endpoints"]);
    assert_eq!(count(&s, 0, "n_samples_failed"), 0, "{}", s["endpoints"]);
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let completes: Vec<&str> =
        events.lines().filter(|l| l.contains("\"sample.complete\"")).collect();
    // The endpoint comes after the reference's keys, the usage and chunk timing; only the
    // client wait follows it.
    let on = |e: u64| {
        let endpoint = format!(",\"endpoint\":{e},\"client_wait_ns\":");
        completes.iter().filter(|l| l.contains(&endpoint)).count() as u64
    };
    let (on_a, on_b) = (on(0), on(1));
    assert_eq!((on_a, on_b), (count(&s, 0, "n_samples"), count(&s, 1, "n_samples")));
    let originals: Vec<Vec<u8>> =
        REBUILT_FILES.iter().map(|f| std::fs::read(dir.join(f)).unwrap()).collect();
    let other = dir.with_extension("rebuilt");
    let _ = std::fs::remove_dir_all(&other);
    let (dir_text, other_text) = (dir.display().to_string(), other.display().to_string());
    assert_eq!(rebuild_cmd(&[&dir_text, "--out", &other_text], "report").status.code(), Some(0));
    assert_eq!(rebuild_cmd(&[&dir_text], "report").status.code(), Some(0));
    for (file, original) in REBUILT_FILES.iter().zip(&originals) {
        assert!(std::fs::read(other.join(file)).unwrap() == *original, "{file} under --out");
        assert!(std::fs::read(dir.join(file)).unwrap() == *original, "{file} in place");
    }
    let es = rebuild_cmd(&[&dir_text], "early-stopping");
    assert_eq!(es.status.code(), Some(0), "early stopping reads a run of several endpoints");
    assert!(String::from_utf8_lossy(&es.stdout).contains("latency (from sample_latency_ns"));
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn a_two_endpoint_log_without_endpoints_is_refused_by_report_and_read_by_early_stopping() {
    let a = stub(StubKind::Echo, |_| {});
    let b = stub(StubKind::Echo, |_| {});
    let dir = report_dir("multi-old-log");
    let out = bench(&[a.url(), b.url()], 40, 2, &dir).run();
    assert_eq!(out.status.code(), Some(0));
    // As a log written before the lines named their endpoint.
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let old: String = events.replace(",\"endpoint\":0,", ",").replace(",\"endpoint\":1,", ",");
    assert!(!old.contains("\"endpoint\""));
    std::fs::write(dir.join("events.jsonl"), old).unwrap();
    let before = std::fs::read(dir.join("report.txt")).unwrap();
    let dir_text = dir.display().to_string();
    let out = rebuild_cmd(&[&dir_text], "report");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("does not say which endpoint"), "{stderr}");
    assert!(std::fs::read(dir.join("report.txt")).unwrap() == before, "nothing was written");
    assert_eq!(rebuild_cmd(&[&dir_text], "early-stopping").status.code(), Some(0));
}
