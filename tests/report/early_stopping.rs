//! `llm-loadgen early-stopping DIR`: the reference script's estimates, wording and figures.

use crate::support::{assets, bin, char_tokenizer, dataset, report_dir, run, show};

/// What `scripts/early_stopping_estimate_from_events.py` prints for the reference-format fixture
/// (no `--summary`, the char tokenizer). Computed once, independently of this project, by a
/// Python re-statement of the script's series rules and print statements on the reference's own
/// `metrics/early_stopping.py` kernel (`es_percentile_estimate`, `es_targets_from_grid`), run
/// over `tests/assets/reference_run/events.jsonl`, and pasted here.
const EXPECTED_REFERENCE_RUN: &str = r#"
ttft (from ttft_ns, n=29):
  p99.9: sufficient=False min_queries=6636 discarded=0  empirical=38.21 ms  estimate=-
  p99.0: sufficient=False min_queries=662 discarded=0  empirical=38.21 ms  estimate=-
  p97.0: sufficient=False min_queries=219 discarded=0  empirical=38.21 ms  estimate=-
  p95.0: sufficient=False min_queries=130 discarded=0  empirical=38.17 ms  estimate=-
  p90.0: sufficient=False min_queries=64 discarded=0  empirical=38.11 ms  estimate=-
  p80.0: sufficient=False min_queries=31 discarded=0  empirical=34.72 ms  estimate=-
  p75.0: sufficient=True min_queries=24 discarded=0  empirical=34.50 ms  estimate=38.37 ms  gap=+3.87 ms (+11.21%)
  p50.0: sufficient=True min_queries=11 discarded=6  empirical=26.96 ms  estimate=34.72 ms  gap=+7.76 ms (+28.79%)

tpot (from tpot_ns, n=29):
  p99.9: sufficient=False min_queries=6636 discarded=0  empirical=0.30 ms  estimate=-
  p99.0: sufficient=False min_queries=662 discarded=0  empirical=0.30 ms  estimate=-
  p97.0: sufficient=False min_queries=219 discarded=0  empirical=0.30 ms  estimate=-
  p95.0: sufficient=False min_queries=130 discarded=0  empirical=0.29 ms  estimate=-
  p90.0: sufficient=False min_queries=64 discarded=0  empirical=0.25 ms  estimate=-
  p80.0: sufficient=False min_queries=31 discarded=0  empirical=0.23 ms  estimate=-
  p75.0: sufficient=True min_queries=24 discarded=0  empirical=0.22 ms  estimate=0.33 ms  gap=+0.11 ms (+48.84%)
  p50.0: sufficient=True min_queries=11 discarded=6  empirical=0.18 ms  estimate=0.23 ms  gap=+0.04 ms (+22.33%)

latency (from sample_latency_ns, n=30):
  p99.9: sufficient=False min_queries=6636 discarded=0  empirical=0.04 s  estimate=-
  p99.0: sufficient=False min_queries=662 discarded=0  empirical=0.04 s  estimate=-
  p97.0: sufficient=False min_queries=219 discarded=0  empirical=0.04 s  estimate=-
  p95.0: sufficient=False min_queries=130 discarded=0  empirical=0.04 s  estimate=-
  p90.0: sufficient=False min_queries=64 discarded=0  empirical=0.04 s  estimate=-
  p80.0: sufficient=False min_queries=31 discarded=0  empirical=0.04 s  estimate=-
  p75.0: sufficient=True min_queries=24 discarded=0  empirical=0.04 s  estimate=0.04 s  gap=+0.01 s (+14.72%)
  p50.0: sufficient=True min_queries=11 discarded=7  empirical=0.03 s  estimate=0.04 s  gap=+0.01 s (+29.82%)

--- markdown ---
| metric | p | n | empirical | ES-adjusted | gap |
|---|---|---|---|---|---|
| **TTFT** | p99.9 | 29 | 38.21 ms | - | - |
| **TTFT** | p99.0 | 29 | 38.21 ms | - | - |
| **TTFT** | p97.0 | 29 | 38.21 ms | - | - |
| **TTFT** | p95.0 | 29 | 38.17 ms | - | - |
| **TTFT** | p90.0 | 29 | 38.11 ms | - | - |
| **TTFT** | p80.0 | 29 | 34.72 ms | - | - |
| **TTFT** | p75.0 | 29 | 34.50 ms | 38.37 ms | +3.87 ms (+11.21%) |
| **TTFT** | p50.0 | 29 | 26.96 ms | 34.72 ms | +7.76 ms (+28.79%) |
| **TPOT** | p99.9 | 29 | 0.30 ms | - | - |
| **TPOT** | p99.0 | 29 | 0.30 ms | - | - |
| **TPOT** | p97.0 | 29 | 0.30 ms | - | - |
| **TPOT** | p95.0 | 29 | 0.29 ms | - | - |
| **TPOT** | p90.0 | 29 | 0.25 ms | - | - |
| **TPOT** | p80.0 | 29 | 0.23 ms | - | - |
| **TPOT** | p75.0 | 29 | 0.22 ms | 0.33 ms | +0.11 ms (+48.84%) |
| **TPOT** | p50.0 | 29 | 0.18 ms | 0.23 ms | +0.04 ms (+22.33%) |
| **LATENCY** | p99.9 | 30 | 0.04 s | - | - |
| **LATENCY** | p99.0 | 30 | 0.04 s | - | - |
| **LATENCY** | p97.0 | 30 | 0.04 s | - | - |
| **LATENCY** | p95.0 | 30 | 0.04 s | - | - |
| **LATENCY** | p90.0 | 30 | 0.04 s | - | - |
| **LATENCY** | p80.0 | 30 | 0.04 s | - | - |
| **LATENCY** | p75.0 | 30 | 0.04 s | 0.04 s | +0.01 s (+14.72%) |
| **LATENCY** | p50.0 | 30 | 0.03 s | 0.04 s | +0.01 s (+29.82%) |
"#;

#[test]
fn estimates_equal_the_reference_scripts_figures_on_a_reference_format_run() {
    let out = bin()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("early-stopping")
        .arg(assets().join("reference_run"))
        .output()
        .expect("the binary runs");
    show(&out);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout), EXPECTED_REFERENCE_RUN);
}

#[test]
fn a_fresh_runs_estimates_cross_check_with_its_own_summary() {
    let dir = report_dir("es-fresh");
    let d = dir.display().to_string();
    let tok = char_tokenizer();
    let data = dataset();
    let args = [
        "benchmark",
        "offline",
        "--dataset",
        &data,
        "--tokenizer",
        &tok,
        "--workers",
        "1",
        "--num-samples",
        "40",
        "--streaming",
        "on",
        "--report-dir",
        &d,
    ];
    assert_eq!(run(args).status.code(), Some(0));
    let out = bin().arg("early-stopping").arg(&dir).output().expect("the binary runs");
    show(&out);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    // Eight grid targets on each of TTFT, TPOT and latency, each matched in-band.
    assert_eq!(text.matches("XCHECK in-band").count(), 24, "{text}");
    assert_eq!(text.matches("EXACT MATCH").count(), 24, "{text}");
    assert!(text.contains("\nttft (from ttft_ns, n=40):\n"), "{text}");
    assert!(text.contains("\nlatency (from sample_latency_ns, n=40):\n"), "{text}");
    // Under the server basis TPOT comes from the stub's usage: 160 tokens a sample.
    let out = bin()
        .args(["early-stopping", &d, "--token-count-source", "server"])
        .output()
        .expect("the binary runs");
    show(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\ntpot (from tpot_ns, n=40):\n"), "{text}");
}

#[test]
fn percentile_flags_outside_the_grid_convention_are_refused() {
    let out = bin()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["early-stopping", "tests/assets/reference_run", "--percentiles", "0.99"])
        .output()
        .expect("the binary runs");
    show(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("did you mean [99.0]"));
}
