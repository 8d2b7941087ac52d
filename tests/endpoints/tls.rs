//! `https://` endpoints through the binary, against the TLS stub (a CA made at its start):
//! verification with `--ca-bundle`, its failure without, `--insecure`, streaming and not, and
//! Basic auth and headers on the wire.

use std::path::PathBuf;

use crate::support::{bin, report_dir, show, stub, tls_stub};
use loadgen_stubs::StubKind;

/// Runs 20 samples against `url` with `extra` flags; returns the exit code, stderr and the
/// report directory.
fn bench(name: &str, url: &str, extra: &[&str]) -> (Option<i32>, String, PathBuf) {
    bench_env(name, url, extra, &[])
}

/// `bench` with `env` set on the child only.
fn bench_env(
    name: &str,
    url: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Option<i32>, String, PathBuf) {
    let dir = report_dir(&format!("tls-{name}"));
    let dir_arg = dir.display().to_string();
    let mut args = vec![
        "benchmark",
        "offline",
        "--endpoints",
        url,
        "--model",
        "m",
        "--num-samples",
        "20",
        "--workers",
        "1",
        "--max-connections",
        "2",
        "--report-dir",
        &dir_arg,
    ];
    args.extend(extra);
    let out = bin().args(&args).envs(env.iter().copied()).output().expect("the binary runs");
    show(&out);
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned(), dir)
}

fn completed(dir: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("performance/result_summary.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["n_samples_completed"].as_u64().unwrap()
}

#[test]
fn an_https_endpoint_verifies_with_its_ca_streaming_and_not() {
    let (server, ca) = tls_stub();
    let url = server.url();
    assert!(url.starts_with("https://"), "{url}");
    let ca = ca.display().to_string();
    for streaming in ["off", "on"] {
        let (code, stderr, dir) = bench(
            &format!("ca-{streaming}"),
            &url,
            &["--ca-bundle", &ca, "--streaming", streaming],
        );
        assert_eq!(code, Some(0), "{stderr}");
        assert_eq!(completed(&dir), 20, "streaming {streaming}");
    }
}

#[test]
fn without_its_ca_the_run_stops_at_setup_saying_what_to_do() {
    let (server, _) = tls_stub();
    let (code, stderr, _) = bench("no-ca", &server.url(), &[]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("did not verify"), "{stderr}");
    assert!(stderr.contains("--ca-bundle") && stderr.contains("--insecure"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn https_works_on_the_epoll_driver_too() {
    let (server, ca) = tls_stub();
    let ca = ca.display().to_string();
    let epoll = [("MONOIO_FORCE_LEGACY_DRIVER", "1")];
    for streaming in ["off", "on"] {
        let extra = ["--ca-bundle", &ca, "--streaming", streaming];
        let (code, stderr, dir) =
            bench_env(&format!("epoll-{streaming}"), &server.url(), &extra, &epoll);
        assert_eq!(code, Some(0), "{stderr}");
        assert_eq!(completed(&dir), 20, "streaming {streaming}");
    }
}

#[test]
fn insecure_skips_verification() {
    let (server, _) = tls_stub();
    let (code, stderr, dir) = bench("insecure", &server.url(), &["--insecure"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(completed(&dir), 20);
}

#[test]
fn a_bad_ca_bundle_and_contradicting_tls_flags_are_refused_before_the_run() {
    let (server, ca) = tls_stub();
    let url = server.url();
    let (code, stderr, _) = bench("bad-ca", &url, &["--ca-bundle", "/nonexistent/ca.pem"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("/nonexistent/ca.pem"), "{stderr}");
    let ca = ca.display().to_string();
    let (code, stderr, _) = bench("both", &url, &["--ca-bundle", &ca, "--insecure"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("give one of them"), "{stderr}");
}

/// `https://` to a plain-HTTP server that answers the ClientHello at once (the stub's 400 to a
/// head that is no HTTP): exit 3 at once, and the message says what the answer means.
#[test]
fn https_to_a_plain_http_server_says_to_use_http() {
    let server = stub(StubKind::Echo, |_| {});
    let url = server.url().replacen("http://", "https://", 1);
    let started = std::time::Instant::now();
    let (code, stderr, _) = bench("plain-answers", &url, &["--insecure"]);
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("plain HTTP") && stderr.contains("use an http:// URL"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30), "{:?}", started.elapsed());
}

/// `https://` to a server that reads the ClientHello and never answers (a plain-HTTP server
/// waiting for the rest of a request head): the run stops at the handshake limit, not after
/// asyncio's minute, and says what to do.
#[test]
fn https_to_a_silent_server_stops_at_the_handshake_limit_saying_to_use_http() {
    use std::io::Read;
    use std::sync::atomic::{AtomicBool, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    // Holds every connection open, reading what comes, until the test's own last connect.
    let server = std::thread::spawn(move || {
        let mut held = Vec::new();
        for socket in listener.incoming() {
            if stopped.load(Ordering::Acquire) {
                break;
            }
            let mut socket = socket.unwrap();
            let _ = socket.read(&mut [0u8; 4096]);
            held.push(socket);
        }
    });
    let started = std::time::Instant::now();
    let (code, stderr, _) = bench("silent", &format!("https://{addr}"), &["--insecure"]);
    let took = started.elapsed();
    stop.store(true, Ordering::Release);
    drop(std::net::TcpStream::connect(addr));
    server.join().unwrap();
    assert_eq!(code, Some(3), "{stderr}");
    assert!(stderr.contains("TLS_HANDSHAKE_TIMEOUT"), "{stderr}");
    assert!(stderr.contains("use an http:// URL"), "{stderr}");
    let limit = loadgen_worker::http::tls::TLS_HANDSHAKE_TIMEOUT;
    assert!(took >= limit, "it waited the handshake limit: {took:?}");
    // Well before the reference's 60 s, with room for a loaded machine.
    assert!(took < limit + std::time::Duration::from_secs(20), "{took:?}");
}
