//! The reference's three agentic example files run here (issue 27): the project's copies of
//! their shapes (`tests/assets/configs/reference_agentic/`: kimi, qwen, the edge full run),
//! with only the model, the tokenizer, the dataset path, the endpoint and the report directory
//! filled in (and the kimi file's variables set), run against the stub and exit 0; the edge
//! run's BFCL gate reads the reference's cache folder under the working directory; their `agentic_inference_inline` scores follow the recorded
//! turns; their SWE-bench dataset is skipped in the default `--mode perf`, as the reference
//! skips it.

use std::path::Path;

use loadgen_stubs::{PrefixCacheConfig, StubKind};
use serde_json::Value;

use super::agentic_window::{check_window_figures, Window};
use crate::support::{assets, bin, report_dir, show, stub, summary, tmp_dir};

/// `shape` with its placeholders filled, written beside the test's other files.
fn fill(shape: &str, endpoint: &str, dataset: &str, dir: &Path) -> String {
    let text = std::fs::read_to_string(assets().join("configs/reference_agentic").join(shape))
        .expect("the shape is read");
    let text = text
        .replace("@ENDPOINT@", endpoint)
        .replace("@DATASET@", dataset)
        .replace("@REPORT_DIR@", &dir.display().to_string());
    let path = tmp_dir().join(shape);
    std::fs::write(&path, text).expect("the config is written");
    path.display().to_string()
}

fn scores(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("scores.json")).expect("scores.json is written");
    serde_json::from_str(&text).expect("scores.json parses")
}

#[test]
fn the_reference_agentic_examples_run_against_the_prefix_cache_stub() {
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.001;
        c.variable.output_len_mean = 8.0;
        c.variable.prefix_cache = Some(PrefixCacheConfig::default());
    });
    let dataset = assets().join("datasets/agentic_small.jsonl").display().to_string();
    let tokenizer = assets().join("tokenizers/char").display().to_string();
    for shape in ["kimi_agentic_benchmark.yaml", "qwen_agentic_benchmark.yaml"] {
        let dir = report_dir(shape.trim_end_matches(".yaml"));
        let config = fill(shape, &server.url(), &dataset, &dir);
        let out = bin()
            .args(["benchmark", "from-config", "--config", &config])
            .env("MODEL_DIR", &tokenizer)
            .env("SWEBENCH_SERVICE_AUTH_TOKEN", "not-a-secret")
            .output()
            .expect("the binary runs");
        show(&out);
        assert_eq!(out.status.code(), Some(0), "{shape}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("dataset swe_bench is skipped"), "{shape}: {stderr}");
        // 6 trajectories of c1, c2, c3 (3, 2, 1 client turns), each twice: all 12 turns
        // issued; 8 places for 6 conversations, so the first finish closes the window.
        let s = summary(&dir);
        let window = Window::read(&dir);
        window.check_closed(6, 8);
        let tracked = window.tracked().count() as u64;
        assert_eq!(
            (s["n_samples_issued"].as_u64(), s["n_samples_failed"].as_u64()),
            (Some(tracked), Some(0))
        );
        check_window_figures(&dir, &window, 12);
        // The fixture's scorable turn is c1's turn 2 (a bash `ls`); the stub's tool call has no
        // command, so both repeats score 0; c1's turn 4 and c2's turn 2 have no ground truth.
        let sc = scores(&dir);
        assert_eq!(sc["score"], 0.0, "{shape}");
        assert_eq!(sc["turns"]["issued"], 6, "{shape}: c1 and c2's client turns, twice");
        assert_eq!(
            (sc["turns"]["expected"].as_u64(), sc["turns"]["missing"].as_u64()),
            (Some(2), Some(0))
        );
        assert_eq!(sc["per_turn"][0]["gt_actions"], serde_json::json!(["ls"]));
        assert_eq!(sc["excluded_turns"].as_array().map(Vec::len), Some(2));
        let results = std::fs::read_to_string(dir.join("accuracy/accuracy_results.json")).unwrap();
        let results: Value = serde_json::from_str(&results).unwrap();
        let entry = &results["accuracy_scores"][0];
        assert_eq!(
            (entry["dataset_name"].as_str(), entry["dataset_type"].as_str()),
            (Some("performance"), Some("performance"))
        );
        assert_eq!(
            (entry["unit_samples"].as_u64(), entry["total_samples"].as_u64()),
            (Some(6), Some(12))
        );
    }
    server.stop();
}

#[test]
fn the_reference_edge_example_runs_its_agentic_replay_and_its_bfcl_gate() {
    // The BFCL dataset is read from dataset_cache/ under the working directory, as the
    // reference reads it: the run starts in a folder whose cache is the project's fixture.
    let cwd = tmp_dir().join("edge-cwd");
    let _ = std::fs::remove_dir_all(&cwd);
    std::fs::create_dir_all(cwd.join("dataset_cache")).unwrap();
    std::os::unix::fs::symlink(
        assets().join("datasets/bfcl_v4"),
        cwd.join("dataset_cache/bfcl_v4"),
    )
    .expect("the cache link is made");
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.001;
        c.variable.output_len_mean = 8.0;
        c.variable.prefix_cache = Some(PrefixCacheConfig::default());
    });
    let dataset = assets().join("datasets/agentic_small.jsonl").display().to_string();
    let dir = report_dir("edge");
    let config =
        fill("online_edge_full_run.yaml", &server.url(), &dataset, &dir).replace("@TOKENIZER@", "");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace("@TOKENIZER@", &assets().join("tokenizers/char").display().to_string());
    std::fs::write(&config, text).unwrap();
    let out = bin()
        .args(["benchmark", "from-config", "--config", &config])
        .current_dir(&cwd)
        .output()
        .expect("the binary runs");
    show(&out);
    server.stop();
    assert_eq!(out.status.code(), Some(0));
    // 20 trajectories of the 3 conversations (3, 2, 1 client turns): 7 passes of c1 and c2,
    // 6 of c3.
    let s = summary(&dir);
    assert_eq!(
        (s["n_samples_issued"].as_u64(), s["n_samples_failed"].as_u64()),
        (Some(41), Some(0))
    );
    let results = std::fs::read_to_string(dir.join("accuracy/accuracy_results.json")).unwrap();
    let results: Value = serde_json::from_str(&results).unwrap();
    let names: Vec<&str> = results["accuracy_scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["dataset_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bfcl_v4::function_calling", "performance"]);
    assert_eq!(results["accuracy_scores"][0]["total_samples"].as_u64(), Some(23));
    let issued = scores(&dir)["turns"]["issued"].as_u64();
    assert_eq!(issued, Some(21), "c1's turns 1 and 3 and c2's turn 1 expect an answer, 7 times");
}

#[test]
fn inline_scores_follow_the_models_intents_and_tool_calls() {
    // The echo stub answers each turn with its first user message, which for sim_1 says
    // "intent: I007": right for turn 1 (I007), wrong for turn 3 (I008); c9's answer has no
    // bash call where the recorded one ran `ls`.
    let server = stub(StubKind::Echo, |_| {});
    let dataset = assets().join("datasets/agentic_workflow.jsonl").display().to_string();
    let dir = report_dir("workflow");
    let config = fill("qwen_agentic_benchmark.yaml", &server.url(), &dataset, &dir);
    let out = bin().args(["benchmark", "from-config", "--config", &config]).output().unwrap();
    show(&out);
    server.stop();
    assert_eq!(out.status.code(), Some(0));
    let sc = scores(&dir);
    let rows: Vec<(&str, u64, u64, f64)> = sc["per_turn"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let id = r["conversation_id"].as_str().unwrap();
            (
                id,
                r["repeat"].as_u64().unwrap(),
                r["turn"].as_u64().unwrap(),
                r["score"].as_f64().unwrap(),
            )
        })
        .collect();
    // 6 trajectories: each conversation three times.
    let mut want = Vec::new();
    for repeat in 1..=3 {
        want.push(("c9", repeat, 2, 0.0));
    }
    for repeat in 1..=3 {
        want.extend([("sim_1", repeat, 2, 1.0), ("sim_1", repeat, 4, 0.0)]);
    }
    assert_eq!(rows, want);
    assert_eq!(sc["score"], 0.3333);
    assert_eq!(sc["domains"]["workflow"]["score"], 0.5);
    assert_eq!(sc["domains"]["coding"]["score"], 0.0);
    let results = std::fs::read_to_string(dir.join("accuracy/accuracy_results.json")).unwrap();
    let results: Value = serde_json::from_str(&results).unwrap();
    let score = results["accuracy_scores"][0]["score"].as_f64();
    assert_eq!(score, sc["score"].as_f64(), "the accuracy entry is scores.json's score");
}
