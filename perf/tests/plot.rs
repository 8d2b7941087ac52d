//! `loadgen-perf plot` on a roofline.json the test writes: a bar per row and per ceiling, a
//! line per row across the worker counts, and a file with one worker count skips that picture.

use std::path::{Path, PathBuf};
use std::process::Command;

const QPS: &str = "#1F77B4";
const CEILING: &str = "#FF7F0E";

fn dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn row(
    name: &str,
    stream: bool,
    qps: f64,
    ceiling: Option<f64>,
    workers: usize,
) -> serde_json::Value {
    serde_json::json!({"row": name, "label": name, "stream": stream, "qps": qps,
        "ceiling_qps": ceiling, "client_workers": workers, "error": null})
}

fn plot(json: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_loadgen-perf"))
        .arg("plot")
        .arg(json)
        .args(extra)
        .output()
        .expect("loadgen-perf runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{}{stderr}", String::from_utf8_lossy(&out.stdout));
    (out.status.code(), stderr)
}

fn count(doc: &roxmltree::Document<'_>, tag: &str, attr: &str, value: &str) -> usize {
    doc.descendants().filter(|n| n.has_tag_name(tag) && n.attribute(attr) == Some(value)).count()
}

#[test]
fn a_sweep_plots_each_row_beside_its_ceiling_and_qps_per_worker_count() {
    let dir = dir("perf-plot-sweep");
    // Three rows at 1, 2 and 4 workers; the streaming row has no ceiling.
    let mut rows = Vec::new();
    for (w, scale) in [(1, 1.0), (2, 1.9), (4, 3.5)] {
        rows.push(row("burst", false, 40_000.0 * scale, Some(48_000.0 * scale), w));
        rows.push(row("burst", true, 30_000.0 * scale, None, w));
        rows.push(row("c1000", false, 38_000.0 * scale, Some(50_000.0 * scale), w));
    }
    let doc = serde_json::json!({"host": {"host": "testhost", "cores": 4, "cpu_model": "cpu"},
        "rows": rows});
    let json = dir.join("roofline.json");
    std::fs::write(&json, doc.to_string()).unwrap();
    let out = dir.join("pictures");
    let (code, stderr) = plot(&json, &["--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    let text = std::fs::read_to_string(out.join("roofline_rows.svg")).unwrap();
    let svg = roxmltree::Document::parse(&text).expect("roofline_rows.svg is XML");
    assert_eq!(count(&svg, "rect", "fill", QPS), 9 + 1, "a bar a row, and the legend's");
    assert_eq!(count(&svg, "rect", "fill", CEILING), 6 + 1, "a bar a ceiling, and the legend's");
    let labels: Vec<&str> = svg.descendants().filter_map(|n| n.text()).map(str::trim).collect();
    for label in ["burst off w2", "c1000 off w4", "76000 (0.83)", "llm-loadgen QPS"] {
        assert!(labels.contains(&label), "{label} in {labels:?}");
    }
    let text = std::fs::read_to_string(out.join("roofline_workers.svg")).unwrap();
    let svg = roxmltree::Document::parse(&text).expect("roofline_workers.svg is XML");
    let lines: Vec<usize> = svg
        .descendants()
        .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke-width") == Some("2"))
        .map(|n| n.attribute("points").unwrap().split_whitespace().count())
        .filter(|&points| points > 2)
        .collect();
    assert_eq!(lines, [3, 3, 3], "a line a row across its three worker counts");
    assert_eq!(svg.descendants().filter(|n| n.has_tag_name("circle")).count(), 9, "a point a row");
    assert!(text.contains("llm-loadgen workers") && text.contains("c1000 off"));
}

#[test]
fn one_worker_count_skips_the_scaling_picture_and_a_bad_file_fails() {
    let dir = dir("perf-plot-single");
    let doc = serde_json::json!({"rows": [row("burst", false, 40_000.0, Some(50_000.0), 1)]});
    let json = dir.join("roofline.json");
    std::fs::write(&json, doc.to_string()).unwrap();
    let (code, stderr) = plot(&json, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(dir.join("roofline_rows.svg").exists(), "beside the JSON by default");
    assert!(!dir.join("roofline_workers.svg").exists());
    assert!(stderr.contains("skipped roofline_workers: every row ran at one worker count"));
    std::fs::write(&json, "{\"rows\": 3}").unwrap();
    let (code, stderr) = plot(&json, &[]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("is not a roofline.json"), "{stderr}");
}
