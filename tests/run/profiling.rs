//! Server profiling (`--profile vllm`) as the reference drives it: the stub sees one
//! `POST /start_profile` per endpoint after the warm-up and before the first measured request,
//! and one `POST /stop_profile` after the last answer; profiling.json and report.txt's
//! `Profiling` section record the calls. A profiler that refuses is reported, and the run goes
//! on (exit 0), as the reference's.

use std::path::Path;

use loadgen_stubs::{ProfileAction, ProfileHit, ProfileLog, SendLog, StubKind, StubServer};
use serde_json::Value;

use crate::support::report_files::{read_json, report_txt};
use crate::support::{dataset, report_dir, report_path, run, stub};

/// An echo stub that logs its answers and its profiler triggers.
fn logged_stub(profile_status: u16) -> (StubServer, SendLog, ProfileLog) {
    let (sent, profiled) = (SendLog::default(), ProfileLog::default());
    let server = stub(StubKind::Echo, |c| {
        c.send_log = Some(sent.clone());
        c.profile_log = Some(profiled.clone());
        c.profile_status = profile_status;
    });
    (server, sent, profiled)
}

/// `benchmark offline` of `samples` samples on two connections with `extra` flags.
fn profiled_run(
    name: &str,
    endpoints: &str,
    samples: &str,
    extra: &[&str],
) -> (Option<i32>, String) {
    let dir = report_dir(name);
    let data = dataset();
    let dir_arg = dir.display().to_string();
    let mut args = vec!["benchmark", "offline", "--endpoints", endpoints, "--model", "m"];
    args.extend(["--workers", "1", "--max-connections", "2", "--num-samples", samples]);
    args.extend(["--dataset", &data, "--report-dir", &dir_arg]);
    args.extend(extra);
    let out = run(&args);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn hits(log: &ProfileLog, action: ProfileAction) -> Vec<ProfileHit> {
    log.lock().unwrap().iter().copied().filter(|h| h.action == action).collect()
}

fn profiling_json(dir: &Path) -> Value {
    read_json(&dir.join("profiling.json"))
}

#[test]
fn the_profiler_is_started_after_the_warm_up_and_stopped_after_the_last_answer() {
    let (a, a_sent, a_profiled) = logged_stub(200);
    let (b, b_sent, b_profiled) = logged_stub(200);
    let (a_url, b_url) = (a.url(), b.url());
    let endpoints = format!("{a_url},{b_url}");
    let warm = ["--warmup", "--warmup-requests", "6", "--warmup-drain", "--profile", "vllm"];
    let (code, stderr) = profiled_run("profiling-order", &endpoints, "10", &warm);
    assert_eq!(code, Some(0), "{stderr}");
    a.stop();
    b.stop();
    let starts: Vec<ProfileHit> =
        [&a_profiled, &b_profiled].iter().flat_map(|l| hits(l, ProfileAction::Start)).collect();
    let stops: Vec<ProfileHit> =
        [&a_profiled, &b_profiled].iter().flat_map(|l| hits(l, ProfileAction::Stop)).collect();
    assert_eq!((starts.len(), stops.len()), (2, 2), "one start and one stop per endpoint");
    let first_start = starts.iter().map(|h| h.received_ns).min().unwrap();
    let last_start = starts.iter().map(|h| h.received_ns).max().unwrap();
    let first_stop = stops.iter().map(|h| h.received_ns).min().unwrap();
    // The send log has every answer; a profiler trigger's has no request body.
    let mut answers: Vec<_> = a_sent.lock().unwrap().clone();
    answers.extend(b_sent.lock().unwrap().iter().cloned());
    answers.retain(|s| !s.body.is_empty());
    assert_eq!(answers.len(), 16, "6 warm-up and 10 measured samples");
    // The drained warm-up came before the start calls, every measured sample after them.
    let before = answers.iter().filter(|s| s.received_ns < first_start).count();
    let after = answers.iter().filter(|s| s.received_ns > last_start).count();
    assert_eq!((before, after), (6, 10), "starts at {first_start}..{last_start}");
    let last_write = answers.iter().filter_map(|s| s.written_ns.last()).max().unwrap();
    assert!(first_stop > *last_write, "the stop comes after the last answer was written");

    let dir = report_path("profiling-order");
    let record = profiling_json(&dir);
    assert_eq!(record["engine"], "vllm");
    let urls = |key: &str| -> Vec<String> {
        record[key].as_array().unwrap().iter().map(|c| c["url"].as_str().unwrap().into()).collect()
    };
    assert_eq!(
        urls("starts"),
        [format!("{a_url}/start_profile"), format!("{b_url}/start_profile")]
    );
    assert_eq!(urls("stops"), [format!("{a_url}/stop_profile"), format!("{b_url}/stop_profile")]);
    // Each call's own stamp (the client's, on the clock the stub stamps with) is just before the
    // stub had it: starts in endpoint order, then stops.
    let seen = [&starts[..], &stops[..]].concat();
    let calls = [&record["starts"], &record["stops"]].map(|c| c.as_array().unwrap().clone());
    for (call, hit) in calls.concat().iter().zip(&seen) {
        assert_eq!((call["status"].as_u64(), call["error"].is_null()), (Some(200), true), "{call}");
        let sent_at_ns = call["sent_at_ns"].as_u64().unwrap();
        assert!(sent_at_ns <= hit.received_ns, "{call} {hit:?}");
    }
    assert_eq!(record["stops"][0]["stop_reason"], "phase_end");
    let text = report_txt(&dir);
    let section = text.split("------------------- Profiling -------------------\n").nth(1);
    let section = section.expect("report.txt has a Profiling section");
    assert!(section.starts_with("Engine: vllm\nStart:\n  POST "), "{section}");
    assert_eq!(section.matches("→ 200 OK\n").count(), 4, "{section}");
    assert!(section.contains("Trigger span: "), "{section}");
}

#[test]
fn a_refusing_profiler_is_reported_and_the_run_goes_on() {
    // vLLM started without a profiler answers 404.
    let (server, _, profiled) = logged_stub(404);
    let (code, stderr) = profiled_run("profiling-404", &server.url(), "5", &["--engine", "vllm"]);
    assert_eq!(code, Some(0), "a profiler failure does not fail the run: {stderr}");
    server.stop();
    assert_eq!(hits(&profiled, ProfileAction::Start).len(), 1);
    assert!(hits(&profiled, ProfileAction::Stop).is_empty(), "no stop without a started profile");
    assert!(stderr.contains("warning: profile start: "), "{stderr}");
    let dir = report_path("profiling-404");
    let record = profiling_json(&dir);
    assert_eq!(record["starts"][0]["status"], 404);
    assert_eq!(record["starts"][0]["error"], "404 Not Found");
    assert_eq!(record["stops"], serde_json::json!([]));
    let text = report_txt(&dir);
    assert!(text.contains("→ 404 (profiling not enabled on server"), "{text}");
    assert!(!text.contains("Trigger span"), "{text}");
    // `report DIR` rebuilds report.txt with the section, read back from profiling.json.
    let rebuilt = dir.join("rebuilt");
    let out = run(["report".as_ref(), dir.as_os_str(), "--out".as_ref(), rebuilt.as_os_str()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(report_txt(&rebuilt), text);
}

#[test]
fn a_closed_profile_port_is_a_recorded_connection_failure() {
    let server = stub(StubKind::Echo, |_| {});
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let urls = format!("http://{closed}/v1");
    let flags = ["--profile", "vllm", "--profile-urls", &urls];
    let (code, stderr) = profiled_run("profiling-closed", &server.url(), "5", &flags);
    assert_eq!(code, Some(0), "{stderr}");
    let record = profiling_json(&report_path("profiling-closed"));
    let start = &record["starts"][0];
    assert_eq!(start["url"], format!("http://{closed}/start_profile"));
    assert!(start["status"].is_null(), "{start}");
    assert!(start["error"].as_str().unwrap().starts_with("ConnectionRefused: "), "{start}");
    let text = report_txt(&report_path("profiling-closed"));
    assert!(text.contains("/start_profile @ "), "{text}");
    assert!(text.contains("→ ConnectionRefused: "), "{text}");
}
