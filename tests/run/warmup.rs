//! The warm-up phase as the reference runs it: its own sample order (`warmup_random_seed + 1`),
//! salted prompts (`--warmup-salt`, hex from `warmup_random_seed + 2`), and a performance phase
//! whose rows do not depend on the warm-up. Request bodies are captured by the echo stub; the
//! expected values were computed once with Python's `random` (3.11).

use std::path::PathBuf;

use crate::support::{report_dir, run, stub};
use loadgen_stubs::{BodyLog, StubKind};
use serde_json::{json, Value};

fn dataset(name: &str, rows: &[Value]) -> PathBuf {
    let dir = crate::support::tmp_dir().join(format!("warmup-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rows.jsonl");
    std::fs::write(&path, rows.iter().map(|r| format!("{r}\n")).collect::<String>()).unwrap();
    path
}

/// Ten rows `p0` … `p9`; a run of ten warm-up and ten measured samples over one connection, so
/// the stub receives them in issue order. Returns the exit code, each body's user prompt, and
/// the report directory and stderr.
fn run_ten(name: &str, extra: &[&str]) -> (Option<i32>, Vec<String>, PathBuf, String) {
    let rows: Vec<Value> = (0..10).map(|i| json!({"prompt": format!("p{i}")})).collect();
    let data = dataset(name, &rows).display().to_string();
    let log = BodyLog::default();
    let server = stub(StubKind::Echo, |c| c.body_log = Some(log.clone()));
    let dir = report_dir(&format!("warmup-{name}"));
    let (url, dir_arg) = (server.url(), dir.display().to_string());
    let mut args = vec![
        "benchmark",
        "offline",
        "--endpoints",
        &url,
        "--model",
        "m",
        "--workers",
        "1",
        "--max-connections",
        "1",
        "--num-samples",
        "10",
        "--dataset",
        &data,
        "--report-dir",
        &dir_arg,
        "--warmup",
        "--warmup-drain",
    ];
    args.extend(extra);
    let out = run(&args);
    drop(server);
    let prompts = log
        .lock()
        .unwrap()
        .iter()
        .map(|b| {
            let body: Value = serde_json::from_slice(b).unwrap();
            body["messages"][0]["content"].as_str().unwrap().to_string()
        })
        .collect();
    (out.status.code(), prompts, dir, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn rows_named(order: &[usize]) -> Vec<String> {
    order.iter().map(|i| format!("p{i}")).collect()
}

#[test]
fn a_salted_warm_up_sends_the_references_salts_in_its_own_order() {
    let (code, prompts, dir, stderr) = run_ten("salted", &["--warmup-salt"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(prompts.len(), 20);
    assert!(!stderr.contains("warm-up without salt"), "{stderr}");
    // Random(43).shuffle(range(10)), and Random(44).randbytes(8).hex() in issue order.
    let order = [8, 1, 5, 6, 9, 7, 3, 2, 4, 0];
    let salts = [
        "a8ce956811102085",
        "78adbe8a4bfd9cb3",
        "9f6eaedc0621dd1d",
        "abf5392dd56c2b61",
        "fe0da4399022214a",
        "eaea7207170d8539",
        "2dcfdc1d9d9d9591",
        "e41541024667a519",
        "93db1c28eb3542c6",
        "6eb58283127856b0",
    ];
    let want: Vec<String> = order.iter().zip(salts).map(|(i, s)| format!("[{s}] p{i}")).collect();
    assert_eq!(prompts[..10], want[..], "warm-up prompts, salted");
    // Random(42).shuffle(range(10)): the measured phase's order, prompts as given.
    assert_eq!(prompts[10..], rows_named(&[7, 3, 2, 8, 5, 6, 9, 4, 0, 1])[..]);
    let config = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    assert!(config.contains("salt: true"), "{config}");
    let summary = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(summary.contains("salt=True"), "{summary}");
}

#[test]
fn the_warm_up_seed_sets_its_order_and_salts_and_never_the_measured_rows() {
    let (code, prompts, dir, _) = run_ten("seed7", &["--warmup-salt", "--warmup-seed", "7"]);
    assert_eq!(code, Some(0));
    // Random(8).shuffle and Random(9).randbytes(8).hex().
    assert_eq!(prompts[0], "[6ea687766eacfb9c] p8");
    assert_eq!(prompts[1], "[f05e915ffceb6244] p2");
    let bare: Vec<String> =
        prompts[..10].iter().map(|p| p.split_once("] ").unwrap().1.to_string()).collect();
    assert_eq!(bare, rows_named(&[8, 2, 9, 4, 0, 7, 1, 6, 5, 3]));
    assert_eq!(prompts[10..], rows_named(&[7, 3, 2, 8, 5, 6, 9, 4, 0, 1])[..], "seed 42 still");
    let config = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    assert!(config.contains("warmup_random_seed: 7"), "{config}");
}

#[test]
fn an_unsalted_warm_up_sends_its_rows_as_given_and_warns_about_the_cache() {
    let (code, prompts, _, stderr) = run_ten("plain", &[]);
    assert_eq!(code, Some(0));
    assert!(stderr.contains("warning: warm-up without salt (--warmup-salt)"), "{stderr}");
    assert_eq!(prompts[..10], rows_named(&[8, 1, 5, 6, 9, 7, 3, 2, 4, 0])[..]);
    assert_eq!(prompts[10..], rows_named(&[7, 3, 2, 8, 5, 6, 9, 4, 0, 1])[..]);
}

#[test]
fn salt_is_refused_on_a_dataset_it_cannot_salt_naming_the_row() {
    let rows = [json!({"prompt": "a"}), json!({"messages": [{"role": "user", "content": "b"}]})];
    let data = dataset("unsaltable", &rows).display().to_string();
    let dir = report_dir("warmup-unsaltable").display().to_string();
    let out = run([
        "benchmark",
        "offline",
        "--endpoints",
        "null://",
        "--dataset",
        &data,
        "--report-dir",
        &dir,
        "--warmup",
        "--warmup-salt",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("warmup.salt (--warmup-salt)"), "{stderr}");
    assert!(stderr.contains("row 1 carries messages"), "{stderr}");
}

/// A salted Poisson warm-up of `n` samples at `qps` against a stamping server (and `extra`);
/// returns the arrivals' stamps in the warm-up's issue order (found by each prompt's salt) and
/// the run's exit code.
fn stamped_warm_up(name: &str, n: usize, qps: &str, extra: &[&str]) -> (Option<i32>, Vec<u64>) {
    let server = crate::support::stamps::StampServer::start();
    let rows: Vec<Value> = (0..40).map(|i| json!({"prompt": format!("p{i}")})).collect();
    let data = dataset(name, &rows).display().to_string();
    let dir = report_dir(&format!("warmup-{name}"));
    let requests = n.to_string();
    let mut args = vec![
        "benchmark",
        "online",
        "--load-pattern",
        "poisson",
        "--target-qps",
        qps,
        "--num-samples",
        "1",
        "--warmup",
        "--warmup-requests",
        &requests,
        "--warmup-salt",
        "--streaming",
        "off",
        "--endpoints",
        &server.url,
        "--model",
        "m",
        "--dataset",
        &data,
        "--workers",
        "1",
        "--report-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    // The reference's salts, in the warm-up's issue order (`warmup_random_seed + 2`).
    let mut rng = loadgen_py::random::PyRandom::new(42 + 2);
    let salts: Vec<String> =
        (0..n).map(|_| rng.randbytes8().iter().map(|b| format!("{b:02x}")).collect()).collect();
    let arrivals = server.arrivals();
    let stamps = salts
        .iter()
        .map(|salt| {
            let tag = format!("[{salt}]");
            let hit = arrivals.iter().find(|(_, prompt)| prompt.starts_with(&tag));
            hit.unwrap_or_else(|| panic!("warm-up request {tag} never arrived: {arrivals:?}")).0
        })
        .collect();
    (out.status.code(), stamps)
}

#[test]
fn a_poisson_warm_up_keeps_its_schedule_from_its_first_sample() {
    // 30 samples at 50 QPS: the seeded schedule spans about 600 ms. A warm-up whose clock
    // ran before its worker could send gets its first sample out late and the next ones in a
    // burst behind it, so they leave (by the kernel's receive stamps) sooner after the first
    // than scheduled. A busy host may make a sample late (the issue lag reports that), never
    // early.
    let (code, stamps) = stamped_warm_up("schedule", 30, "50", &[]);
    assert_eq!(code, Some(0));
    let mut rng = loadgen_py::random::PyRandom::new(42);
    let mut clock = loadgen_coordinator::schedule::PoissonClock::new(&mut rng, 50.0);
    let offsets: Vec<u64> = (0..30).map(|_| clock.next_offset_ns()).collect();
    const SLACK_NS: i64 = 40_000_000;
    for (i, (&at, &due)) in stamps.iter().zip(&offsets).enumerate() {
        let seen = at as i64 - stamps[0] as i64;
        let scheduled = due as i64 - offsets[0] as i64;
        assert!(
            seen >= scheduled - SLACK_NS,
            "warm-up sample {i} arrived {:.1} ms after the first, scheduled {:.1} ms after it",
            seen as f64 / 1e6,
            scheduled as f64 / 1e6
        );
    }
}

#[test]
fn a_backlog_reaches_the_server_in_issue_order() {
    // 30 warm-up samples at 20,000 QPS on 2 connections: they queue in the worker, and leave in
    // the order they were issued, the oldest first.
    let (code, stamps) = stamped_warm_up("fifo", 30, "20000", &["--max-connections", "2"]);
    assert_eq!(code, Some(0));
    // One worker thread writes them, so in issue order each leaves after the one before.
    let late: Vec<(usize, usize)> =
        (1..stamps.len()).filter(|&i| stamps[i] < stamps[i - 1]).map(|i| (i - 1, i)).collect();
    assert!(late.is_empty(), "samples sent after later ones (issue index pairs): {late:?}");
}
