//! The warm-up phase as the reference runs it: its own sample order (`warmup_random_seed + 1`),
//! salted prompts (`--warmup-salt`, hex from `warmup_random_seed + 2`), and a performance phase
//! whose rows do not depend on the warm-up. Request bodies are captured by the echo stub; the
//! expected values were computed once with Python's `random` (3.11).

mod common;

use std::path::{Path, PathBuf};

use common::{report_dir, run, stub};
use loadgen_stubs::{BodyLog, StubKind};
use serde_json::{json, Value};

fn dataset(name: &str, rows: &[Value]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("warmup-{name}"));
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
