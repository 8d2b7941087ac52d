//! The client basis with the project's BPE tokenizer (tests/assets/tokenizers/bpe2k), counted
//! live or after the run: complete either way, and a drain timeout shows what it left.

use std::path::Path;

use crate::support::{assets, report_dir, report_txt, stub, summary, Ran, Run};
use loadgen_coordinator::cpu::{cores_available, CpuPlan};
use loadgen_stubs::StubKind;

const SAMPLES: u64 = 2000;

fn bpe_tokenizer() -> String {
    assets().join("tokenizers/bpe2k").display().to_string()
}

/// The tokens the BPE gives the max-throughput stub's 160-character answer.
fn stub_answer_tokens() -> u64 {
    let file = assets().join("tokenizers/bpe2k/tokenizer.json");
    let tok = tokenizers::Tokenizer::from_file(file).expect("the bpe2k asset loads");
    tok.encode("x".repeat(160), false).expect("it encodes").len() as u64
}

fn streaming_run(dir: &Path, url: &str, extra: &[&str]) -> Ran {
    let run = Run::offline(url, dir).model("test-model").streaming(true).samples(SAMPLES);
    let run = run.workers(1).connections(16).tokenizer_from(&bpe_tokenizer()).dataset();
    run.args(extra).run()
}

/// The snapshot's series `name`: (count, min, max).
fn series(dir: &Path, name: &str) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(dir.join("metrics/final_snapshot.json")).unwrap();
    let snap: serde_json::Value = serde_json::from_str(&text).unwrap();
    let s = snap["metrics"].as_array().unwrap().iter().find(|m| m["name"] == name).unwrap();
    let int = |k: &str| s[k].as_f64().unwrap_or_else(|| panic!("{name}.{k}")) as u64;
    (int("count"), int("min"), int("max"))
}

/// Every successful sample has its client OSL, and TPOT and TPS are reported, whether the
/// counts were made live (`--metrics-tokenizer-workers 2`) or after the last sample (`0`).
#[test]
fn bpe_client_basis_is_complete_counted_live_or_after_the_run() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let url = server.url();
    let osl = stub_answer_tokens();
    assert!(osl > 10 && osl < 160, "the BPE merges the answer: {osl} tokens");
    for (workers, mode) in [("0", "after_run"), ("2", "live")] {
        let dir = report_dir(&format!("bpe-{mode}"));
        let out = streaming_run(&dir, &url, &["--metrics-tokenizer-workers", workers]);
        assert_eq!(out.status.code(), Some(0), "{mode}");
        let s = summary(&dir);
        assert_eq!(s["n_samples_completed"], SAMPLES, "{mode}");
        assert_eq!(s["n_samples_failed"], 0, "{mode}");
        assert_eq!(s["complete"], true, "{mode}");
        assert_eq!(s["client_token_tasks_pending"], 0, "{mode}");
        assert_eq!(s["client_token_counting"], mode);
        assert_eq!(s["output_sequence_lengths"]["total"], SAMPLES * osl, "{mode}");
        assert!(s["tps"].as_f64().is_some_and(|t| t > 0.0), "{mode}: TPS {}", s["tps"]);
        assert!(s["tpot"].is_object(), "{mode}: TPOT is reported");
        assert_eq!(series(&dir, "osl"), (SAMPLES, osl, osl), "{mode}: every sample has its OSL");
        assert_eq!(series(&dir, "tpot_ns").0, SAMPLES, "{mode}: every sample has its TPOT");
        let report = report_txt(&dir);
        let note = if mode == "live" { "counted live by 2" } else { "counted after the last" };
        assert!(report.contains(&format!("Client token counts: {note}")), "{report}");
        let config = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
        assert!(config.contains(&format!("metrics_tokenizer_workers: {workers}")), "{config}");
        // Live threads with no spare core compete with the load, and the user is told.
        let cpu = CpuPlan::new(&cores_available(), 1, true, false);
        let competes = mode == "live" && cpu.tokenizer_cores.is_empty();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let note = "counts tokens live on cores the load uses";
        assert_eq!(stderr.contains(note), competes, "{mode} on {cpu:?}: {stderr}");
    }
}

/// A drain that cannot finish in `--metrics-drain-timeout` leaves its jobs pending: the report
/// is incomplete and says how many, never silently short.
#[test]
fn a_drain_timeout_leaves_pending_counts_and_an_incomplete_report() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let dir = report_dir("bpe-drain-timeout");
    let extra = ["--metrics-tokenizer-workers", "0", "--metrics-drain-timeout", "0.001"];
    let out = streaming_run(&dir, &server.url(), &extra);
    let s = summary(&dir);
    let pending = s["client_token_tasks_pending"].as_u64().unwrap();
    assert!(pending > 0 && pending <= SAMPLES, "{pending} pending");
    assert_eq!(s["complete"], false);
    let report = report_txt(&dir);
    let why = format!("report is incomplete ({pending} client tokenizations were still pending");
    assert!(report.contains(&why), "{report}");
    assert_eq!(out.status.code(), Some(4), "an incomplete report exits 4");
    assert_eq!(series(&dir, "osl").0 + pending, SAMPLES, "counted + pending = every sample");
}
