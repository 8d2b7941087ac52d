//! End-to-end runs of the `llm-loadgen` binary against in-process stub servers on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::{report_dir, report_txt, run, stub, summary, Ran, Run};
use loadgen_stubs::{StatusFault, StubKind, UsageFault};

/// `samples` of the 1,000-prompt dataset offline against `url` by `workers` workers on 16
/// connections.
fn offline_by(url: &str, dir: &Path, samples: u64, workers: u32) -> Run {
    let run = Run::offline(url, dir).model("test-model").dataset().samples(samples);
    run.workers(workers).connections(16)
}

/// `offline_by` one worker.
fn offline(url: &str, dir: &Path, samples: u64) -> Run {
    offline_by(url, dir, samples, 1)
}

#[test]
fn echo_stub_streaming_run_pairs_client_and_server_counts_exactly() {
    let server = stub(StubKind::Echo, |_| {});
    let dir = report_dir("echo-stream");
    let url = server.url();
    let out = offline(&url, &dir, 1000).tokenizer().streaming(true).run();
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&dir);
    assert_eq!(s["n_samples_issued"], 1000);
    assert_eq!(s["n_samples_completed"], 1000);
    assert_eq!(s["n_samples_failed"], 0);
    assert_eq!(s["token_count_source"], "client");
    let report = report_txt(&dir);
    assert!(
        report.contains(
            "OSL paired (client - server): mean 0.00 tokens/sample, ratio 1.0000 over 1000 samples"
        ),
        "report.txt:\n{report}"
    );
    assert!(report.contains("TTFT:"), "a streaming run reports TTFT");
    for file in
        ["events.jsonl", "config.yaml", "metrics/final_snapshot.json", "sample_idx_map.json"]
    {
        assert!(dir.join(file).is_file(), "{file} is written");
    }
    assert_eq!(std::fs::read(dir.join("metrics/.ready")).unwrap(), b"", "the start-up marker");
    let map = std::fs::read_to_string(dir.join("sample_idx_map.json")).unwrap();
    assert!(map.starts_with("{\n  \"performance\": {\n    \""), "indented: {map:.60}");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let completes = events.lines().filter(|l| l.contains("\"sample.complete\"")).count();
    assert_eq!(completes, 1000);
    assert!(events.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
    let first = events.lines().next().unwrap();
    let last = events.lines().last().unwrap();
    assert!(first.contains("\"session.started\""), "{first}");
    assert!(last.contains("\"session.ended\""), "{last}");
}

#[test]
fn server_primary_reports_the_same_numbers_with_names_swapped() {
    let server = stub(StubKind::Echo, |_| {});
    let url = server.url();
    let client_dir = report_dir("basis-client");
    let out = offline(&url, &client_dir, 300).tokenizer().streaming(true).run();
    assert_eq!(out.status.code(), Some(0));
    let server_dir = report_dir("basis-server");
    let run = offline(&url, &server_dir, 300).tokenizer().streaming(true);
    assert_eq!(run.args(["--token-count-source", "server"]).run().status.code(), Some(0));
    let c = summary(&client_dir);
    let s = summary(&server_dir);
    assert_eq!(s["token_count_source"], "server");
    // Echo counts characters, as the char tokenizer does: the two bases agree exactly.
    assert_eq!(c["output_sequence_lengths"]["total"], s["output_sequence_lengths"]["total"]);
    assert_eq!(c["output_sequence_lengths"]["total"], c["output_sequence_lengths_server"]["total"]);
    assert_eq!(s["output_sequence_lengths_client"]["total"], c["output_sequence_lengths"]["total"]);
    assert!(report_txt(&server_dir).contains("Other token basis (client):"));
}

#[test]
fn bad_usage_values_count_as_missing_and_the_run_completes() {
    for fault in [
        UsageFault::Bool,
        UsageFault::Float,
        UsageFault::String,
        UsageFault::Negative,
        UsageFault::Huge,
        UsageFault::Missing,
    ] {
        let server = stub(StubKind::Echo, |c| c.faults.usage = Some(fault));
        let dir = report_dir(&format!("bad-usage-{fault:?}"));
        let url = server.url();
        let out = offline(&url, &dir, 50).tokenizer().streaming(true).run();
        assert_eq!(out.status.code(), Some(0), "fault {fault:?}");
        let s = summary(&dir);
        assert_eq!(s["n_samples_failed"], 0, "fault {fault:?}");
        assert_eq!(s["n_samples_missing_usage"], 50, "fault {fault:?}");
        assert_eq!(s["output_sequence_lengths"]["total"].as_u64().map(|t| t > 0), Some(true));
    }
}

#[test]
fn usage_withheld_under_a_server_primary_exits_4_saying_why() {
    let server = stub(StubKind::Echo, |c| c.faults.usage = Some(UsageFault::Missing));
    let dir = report_dir("server-missing");
    let url = server.url();
    let run = offline(&url, &dir, 40).tokenizer().streaming(true);
    let out = run.args(["--token-count-source", "server"]).run();
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("usage"), "the message says why: {stderr}");
    assert!(dir.join("report.txt").is_file(), "the report is still written");
}

#[test]
fn max_throughput_stub_non_streaming_run_completes_every_sample() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("maxtp-nonstream");
    let url = server.url();
    let out = offline(&url, &dir, 5000).streaming(false).run();
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&dir);
    assert_eq!(s["n_samples_completed"], 5000);
    assert_eq!(s["n_samples_failed"], 0);
    assert_eq!(s["ttft"], serde_json::json!({}), "no TTFT without streaming");
    assert!(String::from_utf8_lossy(&out.stdout).contains("QPS"));
}

#[test]
fn embedded_default_runs_without_an_endpoint_and_says_so() {
    let dir = report_dir("embedded");
    let out = run([
        "benchmark",
        "offline",
        "--num-samples",
        "2000",
        "--report-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("embedded max-throughput stub"), "{stdout}");
    assert!(stdout.contains("synthetic dataset"), "{stdout}");
    assert_eq!(summary(&dir)["n_samples_completed"], 2000);
}

#[test]
fn every_request_failing_exits_4_nothing_measured() {
    let server = stub(StubKind::MaxThroughput, |c| {
        c.faults.status = Some(StatusFault { status: 500, every: 1 })
    });
    let dir = report_dir("all-fail");
    let url = server.url();
    let out = offline(&url, &dir, 100).run();
    assert_eq!(out.status.code(), Some(4));
    let s = summary(&dir);
    assert_eq!(s["n_samples_failed"], 100);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nothing was measured"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("HTTP 500"), "the summary says why");
}

#[test]
fn some_failures_still_exit_0_and_are_counted() {
    let server = stub(StubKind::MaxThroughput, |c| {
        c.faults.status = Some(StatusFault { status: 429, every: 10 })
    });
    let dir = report_dir("some-fail");
    let url = server.url();
    let out = offline(&url, &dir, 1000).run();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(summary(&dir)["n_samples_failed"], 100);
}

#[test]
fn an_unreachable_endpoint_is_a_setup_error() {
    // Bind and drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = report_dir("unreachable");
    let url = format!("http://127.0.0.1:{port}");
    let out = offline(&url, &dir, 10).run();
    assert_eq!(out.status.code(), Some(3));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&url), "the message names the endpoint: {stderr}");
    assert!(!stderr.contains("panicked"));
}

#[test]
fn echo_run_counts_isl_equal_to_osl_and_positive_timings() {
    let server = stub(StubKind::Echo, |_| {});
    let dir = report_dir("echo-isl-osl");
    let url = server.url();
    assert_eq!(offline(&url, &dir, 300).tokenizer().streaming(true).run().status.code(), Some(0));
    let s = summary(&dir);
    // The echo stub answers with the prompt: every sample's ISL equals its OSL, so the two
    // distributions are identical in every statistic.
    assert_eq!(s["input_sequence_lengths"], s["output_sequence_lengths"]);
    assert!(s["input_sequence_lengths"]["min"].as_u64().unwrap() > 0);
    for key in ["ttft", "tpot", "latency"] {
        assert!(s[key]["min"].as_f64().unwrap() > 0.0, "{key} min is positive");
    }
}

#[test]
fn record_counts_are_exact_with_1_2_and_4_workers() {
    let server = stub(StubKind::MaxThroughput, |c| c.workers = 2);
    let url = server.url();
    for workers in [1, 2, 4] {
        let dir = report_dir(&format!("workers-{workers}"));
        let out = offline_by(&url, &dir, 3000, workers).streaming(true).run();
        assert_eq!(out.status.code(), Some(0), "{workers} workers");
        let s = summary(&dir);
        assert_eq!(s["n_samples_issued"], 3000, "{workers} workers");
        assert_eq!(s["n_samples_completed"], 3000, "{workers} workers");
        let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
        let mut uuids: Vec<String> = events
            .lines()
            .filter(|l| l.contains("\"sample.complete\""))
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["sample_uuid"].to_string()
            })
            .collect();
        assert_eq!(uuids.len(), 3000, "{workers} workers: one complete event per sample");
        uuids.sort();
        uuids.dedup();
        assert_eq!(uuids.len(), 3000, "{workers} workers: no duplicates");
        let used: std::collections::BTreeSet<u64> = events
            .lines()
            .filter(|l| l.contains("\"sample.complete\""))
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["worker_id"].as_u64().unwrap()
            })
            .collect();
        assert_eq!(used.len(), workers as usize, "every worker answered");
    }
}

#[test]
fn the_epoll_driver_gives_the_same_counts() {
    let server = stub(StubKind::Echo, |_| {});
    let dir = report_dir("epoll");
    let url = server.url();
    let mut cmd = offline(&url, &dir, 500).tokenizer().streaming(true).command();
    let out = cmd.env("MONOIO_FORCE_LEGACY_DRIVER", "1").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let s = summary(&dir);
    assert_eq!(s["n_samples_completed"], 500);
    assert_eq!(s["osl_paired"]["count"], 500);
}

#[test]
fn completions_and_sglang_streaming_and_not_pair_counts_exactly() {
    let server = stub(StubKind::Echo, |_| {});
    let url = server.url();
    for api in ["openai_completions", "sglang"] {
        for streaming in ["on", "off"] {
            let dir = report_dir(&format!("api-{api}-{streaming}"));
            let run = offline(&url, &dir, 200).tokenizer().args(["--api-type", api]);
            let out = run.args(["--streaming", streaming]).run();
            assert_eq!(out.status.code(), Some(0), "{api} streaming {streaming}");
            let s = summary(&dir);
            assert_eq!(s["n_samples_failed"], 0, "{api} streaming {streaming}");
            assert_eq!(s["osl_paired"]["count"], 200, "{api} streaming {streaming}");
            assert_eq!(s["osl_paired"]["mean"], 0.0, "{api} streaming {streaming}");
        }
    }
}

#[test]
fn bad_usage_on_half_the_samples_makes_the_server_blocks_partial_and_nothing_else() {
    let good = stub(StubKind::Echo, |_| {});
    let mut runs = Vec::new();
    for fault in [None, Some(UsageFault::Bool), Some(UsageFault::Huge), Some(UsageFault::String)] {
        let other = stub(StubKind::Echo, |c| c.faults.usage = fault);
        let dir = report_dir(&format!("half-usage-{fault:?}"));
        let endpoints = format!("{},{}", good.url(), other.url());
        let out = offline_by(&endpoints, &dir, 400, 2).tokenizer().streaming(true).run();
        assert_eq!(out.status.code(), Some(0), "{fault:?}");
        runs.push((fault, summary(&dir), report_txt(&dir)));
    }
    let (_, clean, _) = &runs[0];
    assert_eq!(clean["n_samples_missing_usage"], 0);
    for (fault, s, report) in &runs[1..] {
        // One worker per endpoint: the faulty endpoint's samples all lack usable usage.
        let missing = s["n_samples_missing_usage"].as_u64().unwrap();
        assert!(missing > 0 && missing < 400, "{fault:?}: {missing} missing");
        assert_eq!(s["output_sequence_lengths_server"]["partial"], true, "{fault:?}");
        assert!(s["tps_server"].is_null(), "{fault:?}: tps_server is null while partial");
        assert!(report.contains("(server) (partial)"), "{fault:?}");
        assert_eq!(s["n_samples_failed"], 0, "{fault:?}");
        // Nothing on the client basis changes.
        for key in ["n_samples_completed", "input_sequence_lengths"] {
            assert_eq!(s[key], clean[key], "{fault:?}: {key}");
        }
        assert_eq!(
            s["output_sequence_lengths"]["total"], clean["output_sequence_lengths"]["total"],
            "{fault:?}"
        );
    }
}

/// TCP sockets in TIME_WAIT with `port` at either end, from /proc/net/tcp (state 06).
fn time_wait_sockets(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp is readable");
    let port_hex = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3
                && fields[3] == "06"
                && (fields[1].ends_with(&port_hex) || fields[2].ends_with(&port_hex))
        })
        .count()
}

#[test]
fn a_finished_run_leaves_no_time_wait_sockets_behind() {
    // Connections end with a reset, so a sweep of large runs against one address cannot run
    // out of ephemeral ports; every sample still completes first.
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("no-time-wait");
    let url = server.url();
    let out = offline(&url, &dir, 500).run();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(summary(&dir)["n_samples_completed"], 500);
    assert_eq!(time_wait_sockets(server.addr().port()), 0, "TIME_WAIT sockets left");
}

#[test]
fn failure_kinds_reach_the_report_files_and_the_console() {
    let server = stub(StubKind::MaxThroughput, |c| {
        c.faults.status = Some(StatusFault { status: 429, every: 10 })
    });
    let dir = report_dir("failure-kinds");
    let url = server.url();
    let out = offline(&url, &dir, 200).run();
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&dir);
    assert_eq!(s["n_samples_failed"], 20);
    assert_eq!(s["failure_kinds"]["http_status"]["count"], 20);
    let first = s["failure_kinds"]["http_status"]["first_message"].as_str().unwrap();
    assert!(first.contains("429"), "{first}");
    assert_eq!(s["n_requests_resent"], 0);
    let report = report_txt(&dir);
    assert!(report.contains("  http_status: 20, first: "), "{report}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("20 of 200 samples failed (http_status 20); see events.jsonl"));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert_eq!(events.lines().filter(|l| l.contains("\"error.")).count(), 20, "error lines exist");
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn assert_no_secret(out: &Output, dir: &Path, secrets: &[&str]) {
    let mut texts = vec![
        ("stdout".to_string(), String::from_utf8_lossy(&out.stdout).into_owned()),
        ("stderr".to_string(), String::from_utf8_lossy(&out.stderr).into_owned()),
    ];
    if dir.is_dir() {
        for file in files_under(dir) {
            let bytes = std::fs::read(&file).unwrap();
            texts.push((file.display().to_string(), String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    for (name, text) in &texts {
        for secret in secrets {
            assert!(!text.contains(secret), "{secret:?} in {name}:\n{text}");
        }
    }
}

#[test]
fn a_url_password_is_never_printed() {
    let server = stub(StubKind::Echo, |_| {});
    // base64("u:secretpw"): the Basic credentials the URL becomes.
    let secrets = ["secretpw", "sk-topsecret-key", "dTpzZWNyZXRwdw=="];
    let dir = report_dir("secret");
    let url = server.url().replacen("http://", "http://u:secretpw@", 1);
    let out = offline(&url, &dir, 20).arg("-v").run();
    assert_eq!(out.status.code(), Some(0), "the credentials become Basic auth, the run works");
    assert!(std::fs::read_to_string(dir.join("config.yaml")).unwrap().contains("<redacted>@"));
    assert_no_secret(&out, &dir, &secrets);
    let dir = report_dir("secret-key");
    let out = offline(&server.url(), &dir, 20).args(["-v", "--api-key", "sk-topsecret-key"]).run();
    assert_eq!(out.status.code(), Some(0));
    assert!(std::fs::read_to_string(dir.join("config.yaml")).unwrap().contains("<redacted>"));
    assert_no_secret(&out, &dir, &secrets);
    // Failing set-ups print no secret either: a refused port, a URL without a host, a
    // password with an unencoded '/', '?' or '#', both credentials at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let secrets = ["secretpw", "sk-topsecret-key", "dTpzZWNyZXRwdw==", "ssW0rdXYZ"];
    for (url, key, code) in [
        (format!("http://u:secretpw@127.0.0.1:{port}"), false, 3),
        ("http://u:secretpw@:1".into(), false, 2),
        (format!("http://alice:pa/ssW0rdXYZ@127.0.0.1:{port}"), false, 2),
        (format!("http://alice:pa?ssW0rdXYZ@127.0.0.1:{port}"), false, 2),
        (format!("http://alice:pa#ssW0rdXYZ@127.0.0.1:{port}"), false, 2),
        (format!("http://u:secretpw@127.0.0.1:{port}"), true, 2),
        (format!("http://127.0.0.1:{port}"), true, 3),
    ] {
        let dir = report_dir("secret-fail");
        let mut run = offline(&url, &dir, 5);
        if key {
            run = run.args(["--api-key", "sk-topsecret-key"]);
        }
        let out = run.run();
        assert_eq!(out.status.code(), Some(code), "{url}");
        assert_no_secret(&out, &dir, &secrets);
    }
}

/// A server that answers every request with `reply(its Authorization value)` (a status line
/// and a body); serves each connection until the client closes it.
fn start_canned_server(reply: fn(&str) -> (&'static str, String)) -> String {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut conn = conn;
                loop {
                    let (mut auth, mut length) = (String::new(), 0usize);
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if lower.starts_with("authorization:") {
                            auth = line[14..].trim().to_string();
                        } else if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        } else if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0u8; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    let (status, reply) = reply(&auth);
                    let head =
                        format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n", reply.len());
                    if conn.write_all(format!("{head}{reply}").as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// A 401 whose body quotes the request's Authorization header, as some gateways do.
fn start_auth_echo_server() -> String {
    start_canned_server(|auth| {
        ("401 Unauthorized", format!("{{\"error\": \"bad credentials: {auth}\"}}"))
    })
}

#[test]
fn an_api_key_echoed_by_the_endpoint_is_never_written() {
    let url = start_auth_echo_server();
    let dir = report_dir("secret-echo");
    let out = offline(&url, &dir, 5).args(["--api-key", "sk-echoed-secret"]).run();
    assert_eq!(out.status.code(), Some(4), "every sample failed with 401");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(events.contains("bad credentials: Bearer <redacted>"), "{events}");
    assert_no_secret(&out, &dir, &["sk-echoed-secret"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `report DIR --out` into a fresh report directory named `name`: its output and directory.
fn rebuild(dir: &Path, name: &str) -> (Output, PathBuf) {
    let rebuilt = report_dir(name);
    let out = run([
        "report".to_string(),
        dir.display().to_string(),
        "--out".into(),
        rebuilt.display().to_string(),
    ]);
    (out, rebuilt)
}

#[test]
fn basic_credentials_echoed_by_the_endpoint_are_never_written() {
    let url = start_auth_echo_server().replacen("http://", "http://bob:hunter2-pw@", 1);
    let dir = report_dir("secret-echo-basic");
    let out = offline(&url, &dir, 5).run();
    assert_eq!(out.status.code(), Some(4), "every sample failed with 401");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(events.contains("bad credentials: Basic <redacted>"), "{events}");
    // base64("bob:hunter2-pw"), the Authorization the server quoted back.
    let secrets = ["hunter2-pw", "Ym9iOmh1bnRlcjItcHc="];
    assert_no_secret(&out, &dir, &secrets);
    let (again, rebuilt) = rebuild(&dir, "secret-echo-basic-report");
    assert_no_secret(&again, &rebuilt, &secrets);
    for d in [&dir, &rebuilt] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn terminal_escapes_from_the_endpoint_are_escaped_on_the_console_and_in_text_files() {
    let url = start_canned_server(|_| {
        ("500 Internal Server Error", "boom \x1b]0;TITLE\x07\x1b[2J\u{202e}end".into())
    });
    let dir = report_dir("escapes");
    let out = offline(&url, &dir, 5).run();
    assert_eq!(out.status.code(), Some(4), "every sample failed with 500");
    let (again, rebuilt) = rebuild(&dir, "escapes-report");
    let shown = r"boom \x1b]0;TITLE\x07\x1b[2J\u{202e}end";
    let texts = [
        ("stdout", String::from_utf8_lossy(&out.stdout).into_owned()),
        ("stderr", String::from_utf8_lossy(&out.stderr).into_owned()),
        ("report.txt", report_txt(&dir)),
        ("report stdout", String::from_utf8_lossy(&again.stdout).into_owned()),
        ("rebuilt report.txt", report_txt(&rebuilt)),
    ];
    for (name, text) in &texts {
        assert!(!text.contains(['\x1b', '\x07', '\u{202e}']), "{name} holds raw controls:\n{text}");
    }
    for (name, text) in [&texts[0], &texts[2], &texts[3]] {
        assert!(text.contains(shown), "{name} shows the message, escaped:\n{text}");
    }
    // JSON files keep the message as it came, escaped by JSON.
    let first = &summary(&dir)["failure_kinds"]["http_status"]["first_message"];
    assert_eq!(first.as_str(), Some("HTTP 500: boom \x1b]0;TITLE\x07\x1b[2J\u{202e}end"));
    for d in [&dir, &rebuilt] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn an_unwritable_report_file_still_prints_the_summary_and_is_named() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("full-disk");
    std::fs::create_dir_all(&dir).unwrap();
    // A file where the metrics folder belongs makes its file unwritable without root-only
    // set-ups. (events.jsonl on a full disk is `a_full_filesystem_keeps_room_for_the_small_
    // files`, on a real full tmpfs: a link to /dev/full here would be a planted link, which a
    // run refuses before it starts.)
    std::fs::write(dir.join("metrics"), b"not a folder").unwrap();
    let url = server.url();
    let out = offline(&url, &dir, 300).run();
    assert_eq!(out.status.code(), Some(4));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Samples: 300 issued, 300 completed, 0 failed"), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("metrics/final_snapshot.json ("), "{stderr}");
    assert!(stderr.contains("cannot write 1 report file(s)"), "{stderr}");
    // The other files do not depend on it.
    assert_eq!(summary(&dir)["n_samples_completed"], 300);
    assert!(report_txt(&dir).ends_with("End of Report -----------------\n"));
    for file in ["config.yaml", "sample_idx_map.json"] {
        assert!(dir.join(file).is_file(), "{file} is written");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Without `unshare` (a PATH that has none), outside CI, the full-filesystem test fails rather
/// than pass without running; `LOADGEN_SKIP_UNSHARE=1` skips it, saying so.
#[test]
fn the_full_filesystem_test_fails_without_unshare_unless_opted_out() {
    let test = "a_full_filesystem_keeps_room_for_the_small_files";
    let run = |opt_out: Option<&str>| {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        // The test's name in this binary: its module path without the crate's name.
        let name = format!("{}::{test}", module_path!().split_once("::").unwrap().1);
        cmd.args(["--exact", &name, "--nocapture", "--test-threads=1"]);
        cmd.env("PATH", "/nonexistent").env_remove("CI").env_remove("LOADGEN_SKIP_UNSHARE");
        if let Some(value) = opt_out {
            cmd.env("LOADGEN_SKIP_UNSHARE", value);
        }
        let out = cmd.output().expect("the test binary runs");
        let text = [out.stdout, out.stderr].concat();
        (out.status.success(), String::from_utf8_lossy(&text).into_owned())
    };
    let (passed, text) = run(None);
    assert!(!passed, "it passed without running:\n{text}");
    assert!(text.contains("set LOADGEN_SKIP_UNSHARE=1 to skip it knowingly"), "{text}");
    let (passed, text) = run(Some("1"));
    assert!(passed, "{text}");
    assert!(text.contains("not run here (LOADGEN_SKIP_UNSHARE=1 skips it)"), "{text}");
}

/// Whether this machine lets an unprivileged process mount a tmpfs of its own (a user and
/// mount namespace, `unshare -rm`).
fn private_tmpfs_available() -> bool {
    std::process::Command::new("unshare")
        .args(["-rm", "true"])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_full_filesystem_keeps_room_for_the_small_files() {
    if !private_tmpfs_available() {
        // CI machines have user namespaces, so there the test always runs; elsewhere (e.g. a
        // desktop whose security policy forbids them) it fails unless opted out, saying why.
        crate::support::skip_only_if_opted_out(
            "a_full_filesystem_keeps_room_for_the_small_files",
            "needs `unshare -rm` (user and mount namespaces)",
            "LOADGEN_SKIP_UNSHARE",
        );
        return;
    }
    let server = stub(StubKind::MaxThroughput, |_| {});
    let mount = report_dir("tiny-fs");
    let copy = report_dir("tiny-fs-copy");
    std::fs::create_dir_all(&mount).unwrap();
    std::fs::create_dir_all(&copy).unwrap();
    let url = server.url();
    let run = offline(&url, &mount.join("r"), 2000);
    // A 512 KiB tmpfs, private to the child's namespace (gone when it exits): events.jsonl
    // (about 1 MB) fills it; the report is copied out before the child ends.
    let script = "mount -t tmpfs -o size=512k tmpfs \"$1\" || exit 99; shift; copy=\"$1\"; \
                  shift; \"$@\"; rc=$?; cp -r \"$0\" \"$copy/\"; exit $rc";
    let out = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", script])
        .arg(mount.join("r"))
        .arg(&mount)
        .arg(&copy)
        .arg(crate::support::bin_path())
        .args(run.argv())
        .output()
        .unwrap();
    crate::support::show(&out);
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot write 1 report file(s)"), "{stderr}");
    assert!(stderr.contains("events.jsonl (no space left on device)"), "{stderr}");
    let dir = copy.join("r");
    assert_eq!(summary(&dir)["n_samples_completed"], 2000);
    assert!(report_txt(&dir).ends_with("End of Report -----------------\n"));
    for file in ["config.yaml", "sample_idx_map.json", "metrics/final_snapshot.json"] {
        assert!(dir.join(file).is_file(), "{file} is written");
    }
    assert!(!dir.join(".llm-loadgen-reserve").exists(), "the reservation is released");
    let _ = std::fs::remove_dir_all(&mount);
    let _ = std::fs::remove_dir_all(&copy);
}

/// Every name a run writes in its report directory (docs/OUTPUT.md, "Links and other runs").
const RUN_FILES: [&str; 11] = [
    "events.jsonl",
    "config.yaml",
    "report.txt",
    "sample_idx_map.json",
    "shard.json",
    ".llm-loadgen-reserve",
    ".llm-loadgen-lock",
    "performance/result_summary.json",
    "metrics/final_snapshot.json",
    "metrics/.ready",
    "accuracy/accuracy_results.json",
];

/// A quick run on null:// into `dir`.
fn null_run(dir: &Path) -> Ran {
    Run::offline("null://", dir).model("m").arg("--quiet").samples(20).workers(1).run()
}

/// The names under `dir` and their bytes (a link as its target's path), to see that nothing
/// the test owns changed.
fn snapshot_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let path = e.path();
            let bytes = match std::fs::read_link(&path) {
                Ok(target) => target.display().to_string().into_bytes(),
                Err(_) if path.is_dir() => b"dir".to_vec(),
                Err(_) => std::fs::read(&path).unwrap(),
            };
            (e.file_name().to_string_lossy().into_owned(), bytes)
        })
        .collect();
    out.sort();
    out
}

/// Every entry under `dir` that is not a directory (links included, never followed).
fn entries_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_type().unwrap().is_dir() {
            out.extend(entries_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn no_file_a_run_writes_is_opened_through_a_planted_link() {
    let victim = report_dir("planted-victim");
    std::fs::create_dir_all(victim.join("dir")).unwrap();
    std::fs::write(victim.join("file"), "precious").unwrap();
    let before = snapshot_of(&victim);
    let planted = |dir: &Path, name: &str, target: &Path| {
        let at = dir.join(name);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, &at).unwrap();
        at
    };
    let mut cases: Vec<(std::path::PathBuf, std::path::PathBuf)> = Vec::new();
    for (i, name) in RUN_FILES.iter().enumerate() {
        let dir = report_dir(&format!("planted-{i}"));
        cases.push((dir.clone(), planted(&dir, name, &victim.join("file"))));
    }
    for (i, sub) in ["performance", "metrics", "accuracy"].iter().enumerate() {
        let dir = report_dir(&format!("planted-sub-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        cases.push((dir.clone(), planted(&dir, sub, &victim.join("dir"))));
    }
    let itself = report_dir("planted-itself");
    std::os::unix::fs::symlink(victim.join("dir"), &itself).unwrap();
    cases.push((itself.clone(), itself.clone()));
    for (dir, link) in &cases {
        let out = null_run(dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", link.display());
        let named = link.display().to_string();
        assert!(stderr.contains(named.trim_end_matches('/')), "names {named}: {stderr}");
        assert!(stderr.contains("symbolic link"), "{stderr}");
        assert_eq!(snapshot_of(&victim), before, "{}: the linked file is unchanged", named);
        if dir != &itself {
            assert_eq!(
                entries_under(dir),
                std::slice::from_ref(link),
                "{named}: nothing else is made"
            );
        }
    }
    for (dir, _) in &cases {
        let _ = std::fs::remove_dir_all(dir);
        let _ = std::fs::remove_file(dir);
    }
    let _ = std::fs::remove_dir_all(&victim);
}

#[test]
fn a_report_dir_holding_an_older_runs_files_is_rewritten_as_before() {
    let dir = report_dir("rerun");
    assert_eq!(null_run(&dir).status.code(), Some(0));
    std::fs::write(dir.join("events.jsonl"), "stale\n").unwrap();
    assert_eq!(null_run(&dir).status.code(), Some(0), "the same directory again");
    assert_eq!(crate::support::check_terminal_events(&dir), 20, "a fresh events.jsonl");
    assert_eq!(summary(&dir)["n_samples_issued"], 20);
    assert!(!dir.join(".llm-loadgen-reserve").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
