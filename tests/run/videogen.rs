//! `api_type: videogen` end to end (issue 28 item 5): the project's copy of the reference's
//! offline WAN 2.2 example shape (`tests/assets/configs/reference_videogen/`, only the
//! endpoint, dataset and report directory filled in) runs against `stub video` and exits 0
//! with latency and QPS and no token figures; the stub sees the reference's request bodies;
//! a raw mp4 answer is written under `INFERENCE_ENDPOINT_VIDEOGEN_FALLBACK_DIR`, and fails by
//! name without it; the accuracy shape's vbench dataset is refused by name, and the
//! submission shape runs its performance phase and TEST04 audit with that dataset left out.

use std::path::Path;
use std::time::Duration;

use loadgen_stubs::video::{VideoConfig, TINY_MP4};
use loadgen_stubs::{BodyLog, StubKind};
use serde_json::Value;

use crate::support::{assets, bin, report_dir, report_txt, show, stub, summary, tmp_dir};

const FALLBACK_ENV: &str = "INFERENCE_ENDPOINT_VIDEOGEN_FALLBACK_DIR";

/// `shape` with its placeholders filled, written beside the test's other files.
fn fill(shape: &str, endpoint: &str, dir: &Path) -> String {
    let text = std::fs::read_to_string(assets().join("configs/reference_videogen").join(shape))
        .expect("the shape is read");
    let dataset = assets().join("datasets/video_prompts.jsonl");
    let text = text
        .replace("@ENDPOINT@", endpoint)
        .replace("@DATASET@", &dataset.display().to_string())
        .replace("@REPORT_DIR@", &dir.display().to_string());
    let name = dir.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let path = tmp_dir().join(format!("{name}-{shape}"));
    std::fs::write(&path, text).expect("the config is written");
    path.display().to_string()
}

fn run_config(config: &str, fallback: Option<&Path>) -> std::process::Output {
    let mut cmd = bin();
    cmd.args(["benchmark", "from-config", "--config", config]).env_remove(FALLBACK_ENV);
    if let Some(dir) = fallback {
        cmd.env(FALLBACK_ENV, dir);
    }
    let out = cmd.output().expect("the binary runs");
    show(&out);
    out
}

/// The `sample.complete` outputs of a run's events.
fn outputs(dir: &Path) -> Vec<String> {
    let events = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl");
    events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event_type"] == "sample.complete")
        .map(|e| e["data"][1].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn the_offline_wan22_shape_runs_with_latency_and_qps_and_the_reference_bodies() {
    let log = BodyLog::default();
    let server = stub(StubKind::Video, |c| {
        c.body_log = Some(log.clone());
        c.video = VideoConfig { delay: Duration::from_millis(20), ..VideoConfig::default() };
    });
    let dir = report_dir("videogen-offline");
    let out = run_config(&fill("offline_wan22.yaml", &server.url(), &dir), None);
    server.stop();
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&dir);
    assert_eq!(
        (s["n_samples_issued"].as_u64(), s["n_samples_failed"].as_u64()),
        (Some(6), Some(0))
    );
    assert!(s["qps"].as_f64().is_some_and(|q| q > 0.0), "{}", s["qps"]);
    assert!(s["latency"]["min"].as_u64().is_some_and(|ns| ns >= 20_000_000));
    assert_eq!((s["tps"].clone(), s["ttft"].clone()), (Value::Null, serde_json::json!({})));
    let report = report_txt(&dir);
    assert!(report.contains("QPS: ") && report.contains("Latency:"), "{report}");
    assert!(!report.contains("Output sequence lengths") && !report.contains("TTFT:"), "{report}");
    assert!(outputs(&dir).iter().all(|o| o.starts_with("/tmp/videos/video_")));
    let bodies = log.lock().unwrap().clone();
    assert_eq!(bodies.len(), 6);
    let kite = bodies
        .iter()
        .map(|b| String::from_utf8_lossy(b).to_string())
        .find(|b| b.contains("red kite"))
        .expect("the kite prompt was sent");
    assert_eq!(
        kite,
        r#"{"prompt":"A red kite climbs over a windy beach while gulls circle below it.","negative_prompt":"blurry, low quality, watermark","size":"720x1280","seconds":5.0,"fps":16,"num_inference_steps":20,"guidance_scale":4.0,"guidance_scale_2":3.0,"seed":42,"num_frames":81,"boundary_ratio":0.875,"output_format":"auto","response_format":"video_path"}"#
    );
    assert!(bodies.iter().any(|b| String::from_utf8_lossy(b).contains(r#""seed":7,"#)));
}

#[test]
fn a_raw_mp4_answer_is_written_to_the_fallback_dir_and_fails_by_name_without_it() {
    let server = stub(StubKind::Video, |c| c.video.raw_mp4 = true);
    let dir = report_dir("videogen-raw");
    let config = fill("offline_wan22.yaml", &server.url(), &dir);
    let out = run_config(&config, None);
    assert_ne!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&format!("{FALLBACK_ENV} is not set")), "{stdout}");
    let videos = tmp_dir().join("videogen-fallback");
    let _ = std::fs::remove_dir_all(&videos);
    let out = run_config(&config, Some(&videos));
    server.stop();
    assert_eq!(out.status.code(), Some(0));
    let written = outputs(&dir);
    assert_eq!(written.len(), 6);
    for path in written {
        assert!(path.starts_with(&videos.display().to_string()) && path.ends_with(".mp4"));
        assert_eq!(std::fs::read(&path).expect("the video is written"), TINY_MP4);
    }
}

#[test]
fn a_payload_answer_succeeds_with_no_output() {
    let server = stub(StubKind::Video, |_| {});
    let dir = report_dir("videogen-payload");
    let rows = tmp_dir().join("videogen-payload.jsonl");
    std::fs::write(&rows, "{\"prompt\": \"a lighthouse\", \"response_format\": \"video_bytes\"}\n")
        .unwrap();
    let url = server.url();
    let args = ["benchmark", "offline", "--endpoints", &url, "--model", "wan22"];
    let out = bin()
        .args(args)
        .args(["--api-type", "videogen", "--num-samples", "2", "--report-dir"])
        .arg(&dir)
        .arg("--dataset")
        .arg(&rows)
        .output()
        .expect("the binary runs");
    show(&out);
    server.stop();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(summary(&dir)["n_samples_failed"].as_u64(), Some(0));
    assert_eq!(outputs(&dir), ["", ""]);
}

#[test]
fn a_misspelt_column_and_the_vbench_dataset_are_refused_by_name() {
    let rows = tmp_dir().join("videogen-typo.jsonl");
    std::fs::write(&rows, "{\"prompt\": \"a lighthouse\", \"negitive_prompt\": \"blurry\"}\n")
        .unwrap();
    let out = bin()
        .args(["benchmark", "offline", "--endpoints", "http://127.0.0.1:9", "--model", "wan22"])
        .args(["--api-type", "videogen", "--dataset"])
        .arg(&rows)
        .output()
        .expect("the binary runs");
    show(&out);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("column \"negitive_prompt\" is not a videogen request field"),
        "{stderr}"
    );
    let dir = report_dir("videogen-vbench");
    let out = run_config(&fill("offline_wan22_accuracy.yaml", "http://127.0.0.1:9", &dir), None);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\"vbench\" is not supported yet"), "{stderr}");
    assert!(stderr.contains("VBench"), "{stderr}");
}

/// 150 prompts of the tool's own words (the submission's phases issue 144 distinct samples).
fn many_prompts() -> String {
    let path = tmp_dir().join("videogen-150.jsonl");
    let rows: String = (0..150)
        .map(|i| format!("{{\"prompt\": \"tide pool scene {i}, a crab crossing wet stones\"}}\n"))
        .collect();
    std::fs::write(&path, rows).expect("the prompts are written");
    path.display().to_string()
}

#[test]
fn the_wan22_submission_shape_runs_its_phases_with_the_vbench_dataset_left_out() {
    let server = stub(StubKind::Video, |c| c.video.delay = Duration::from_millis(5));
    let dir = report_dir("videogen-submission");
    let config = fill("offline_wan22_submission.yaml", &server.url(), &dir);
    let text = std::fs::read_to_string(&config).unwrap().replace(
        assets().join("datasets/video_prompts.jsonl").display().to_string().as_str(),
        &many_prompts(),
    );
    let out = bin().args(["validate-yaml", "-c", &config]).output().expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("\"vbench\" is not supported yet"), "{stderr}");
    let (head, rest) = text.split_once("  # vbench-start").expect("the vbench marker");
    let tail = rest.split_once("  # vbench-end").expect("the vbench end marker").1;
    std::fs::write(&config, format!("{head}{tail}")).unwrap();
    let out = run_config(&config, None);
    server.stop();
    // The audit's verdict compares two phases' QPS on a shared machine: PASS (0) or FAIL (1)
    // are both its answer; anything else is not.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{:?}", out.status);
    assert_eq!(summary(&dir)["n_samples_failed"].as_u64(), Some(0));
    assert_eq!(summary(&dir)["n_samples_issued"].as_u64(), Some(144));
    assert!(dir.join("audit/verify_OUTPUT_CACHING_TEST.txt").is_file());
}
