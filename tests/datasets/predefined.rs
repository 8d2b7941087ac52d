//! The reference's predefined datasets through the binary: `name: random` generated from the
//! tokenizer and run on the null endpoint, an id found in the Hugging Face datasets cache (the
//! cache given to the child process only), and a missing id that says what to download.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use crate::support::{assets, bin, report_dir, show, summary};
use arrow_array::{ArrayRef, RecordBatch, StringArray};

/// A scratch folder under the target dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let path = crate::support::tmp_dir().join(format!("predefined-{tag}"));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn bpe2k() -> String {
    assets().join("tokenizers/bpe2k").display().to_string()
}

/// Runs `benchmark from-config` on `yaml` written into `dir`, in `dir`, with `env` set on the
/// child only (and HOME pointed at `dir`, so no user cache is read).
fn run_yaml(dir: &Path, yaml: &str, env: &[(&str, &Path)], report: &Path) -> Output {
    std::fs::write(dir.join("run.yaml"), yaml).unwrap();
    let mut cmd = bin();
    cmd.args(["benchmark", "from-config", "-c", "run.yaml", "--report-dir"])
        .arg(report)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("HF_HOME")
        .env_remove("HF_DATASETS_CACHE")
        .env_remove("XDG_CACHE_HOME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the binary runs");
    show(&out);
    out
}

fn yaml_for(dataset: &str, samples: u64) -> String {
    format!(
        "type: offline\nmodel_params:\n  name: test-model\n  tokenizer_name: {tok}\n  \
         max_new_tokens: 4\ndatasets:\n{dataset}settings:\n  runtime:\n    min_duration_ms: 0\n    \
         n_samples_to_issue: {samples}\nendpoint_config:\n  endpoints: [\"null://\"]\n",
        tok = bpe2k()
    )
}

/// The prompt texts of the `sample.issued` lines (`["PromptData", text, …]`).
fn issued_prompts(report: &Path) -> Vec<String> {
    let events = std::fs::read_to_string(report.join("events.jsonl")).expect("events.jsonl");
    events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["event_type"] == "sample.issued")
        .map(|v| v["data"][1].as_str().expect("a text prompt").to_string())
        .collect()
}

#[test]
fn a_random_dataset_run_issues_runs_of_consecutive_tokens_within_the_isl_range() {
    let dir = Scratch::new("random");
    let report = report_dir("predefined-random");
    let dataset = format!(
        "  - name: random\n    generate_params:\n      num_sequences: 12\n      \
         input_seq_length: 24\n      range_ratio: 0.5\n      random_seed: 7\n      tokenizer: {}\n",
        bpe2k()
    );
    let out = run_yaml(&dir.0, &yaml_for(&dataset, 12), &[], &report);
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&report);
    assert_eq!(s["n_samples_issued"].as_u64(), Some(12), "{s}");
    assert_eq!(s["n_samples_completed"].as_u64(), Some(12), "{s}");
    // Every prompt decodes from a run of 12 to 24 consecutive ids (wrapping at the vocab).
    let tok = tokenizers::Tokenizer::from_file(format!("{}/tokenizer.json", bpe2k())).unwrap();
    let vocab = tok.get_vocab_size(false);
    let mut runs: HashMap<String, usize> = HashMap::new();
    for start in 0..vocab {
        for len in 12..=24 {
            let ids: Vec<u32> = (0..len).map(|j| ((start + j) % vocab) as u32).collect();
            runs.insert(tok.decode(&ids, false).unwrap(), len);
        }
    }
    let prompts = issued_prompts(&report);
    assert_eq!(prompts.len(), 12);
    let lengths: Vec<usize> =
        prompts.iter().map(|p| *runs.get(p).expect("a decoded run of 12..=24 ids")).collect();
    assert!(lengths.iter().any(|&l| l != lengths[0]), "lengths vary: {lengths:?}");
    // The client ISL is the prompt re-encoded, as the reference counts it.
    let isl: Vec<u64> =
        prompts.iter().map(|p| tok.encode(p.as_str(), false).unwrap().len() as u64).collect();
    let block = &s["input_sequence_lengths"];
    assert_eq!(block["min"].as_u64(), isl.iter().min().copied(), "{block}");
    assert_eq!(block["max"].as_u64(), isl.iter().max().copied(), "{block}");
    assert_eq!(block["total"].as_u64(), Some(isl.iter().sum()), "{block}");
    let _ = std::fs::remove_dir_all(&report);
}

#[test]
fn saved_token_ids_go_to_completions_and_the_text_to_chat() {
    let dir = Scratch::new("random-tokens");
    let dataset = format!(
        "  - name: random\n    generate_params:\n      num_sequences: 4\n      \
         input_seq_length: 8\n      save_tokenized_data: true\n      tokenizer: {}\n",
        bpe2k()
    );
    // The reference's chat adapter sends the prompt text; the token ids stay for the ISL.
    for api in ["openai", "openai_completions"] {
        let report = report_dir(&format!("predefined-tokens-{api}"));
        let yaml = yaml_for(&dataset, 4)
            .replace("endpoint_config:\n", &format!("endpoint_config:\n  api_type: {api}\n"));
        let out = run_yaml(&dir.0, &yaml, &[], &report);
        assert_eq!(out.status.code(), Some(0), "{api}");
        assert_eq!(summary(&report)["n_samples_completed"].as_u64(), Some(4), "{api}");
        let _ = std::fs::remove_dir_all(&report);
    }
}

/// One Arrow IPC stream file with string columns.
fn write_arrow(file: &Path, columns: &[(&str, Vec<&str>)]) {
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let batch = RecordBatch::try_from_iter(columns.iter().map(|(name, cells)| {
        (name.to_string(), Arc::new(StringArray::from(cells.clone())) as ArrayRef)
    }))
    .unwrap();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(
        std::fs::File::create(file).unwrap(),
        &batch.schema(),
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
}

#[test]
fn gpqa_is_read_from_the_hugging_face_datasets_cache() {
    let dir = Scratch::new("hfcache");
    let cache = dir.0.join("hf-datasets");
    let split = cache.join("Idavidrein___gpqa/gpqa_diamond/0.0.0/0123abcd/gpqa-train.arrow");
    write_arrow(
        &split,
        &[
            ("Question", vec!["Q0", "Q1", "Q2", "Q3", "Q4"]),
            ("Correct Answer", vec!["r0", "r1", "r2", "r3", "r4"]),
            ("Incorrect Answer 1", vec!["a", "a", "a", "a", "a"]),
            ("Incorrect Answer 2", vec!["b", "b", "b", "b", "b"]),
            ("Incorrect Answer 3", vec!["c", "c", "c", "c", "c"]),
        ],
    );
    let report = report_dir("predefined-gpqa");
    let yaml = yaml_for("  - name: gpqa::gptoss\n", 5);
    let out = run_yaml(&dir.0, &yaml, &[("HF_DATASETS_CACHE", &cache)], &report);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(summary(&report)["n_samples_issued"].as_u64(), Some(5));
    let prompts = issued_prompts(&report);
    assert!(prompts.iter().all(|p| p.contains("(D) ") && p.ends_with("or 'D'.")), "{prompts:?}");
    // The same file under $HF_HOME/datasets is found too.
    let home = dir.0.join("hf-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::rename(&cache, home.join("datasets")).unwrap();
    let out = run_yaml(&dir.0, &yaml, &[("HF_HOME", &home)], &report);
    assert_eq!(out.status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&report);
}

#[test]
fn a_missing_predefined_dataset_exits_2_naming_what_to_download() {
    let dir = Scratch::new("missing");
    let cache = dir.0.join("empty-cache");
    std::fs::create_dir_all(&cache).unwrap();
    let report = report_dir("predefined-missing");
    let out = run_yaml(
        &dir.0,
        &yaml_for("  - name: aime25::gptoss\n", 5),
        &[("HF_DATASETS_CACHE", &cache)],
        &report,
    );
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("predefined dataset aime25 not found locally"), "{err}");
    assert!(err.contains("dataset_cache/aime25/aime25.parquet"), "{err}");
    assert!(err.contains(&cache.join("opencompass___AIME2025").display().to_string()), "{err}");
    assert!(err.contains("load_dataset('opencompass/AIME2025', 'AIME2025-I')"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!report.join("performance").exists());
}

/// A Shopify product row (the processed columns), as a JSON Lines file given as the
/// predefined dataset's path.
fn write_products(dir: &Path) -> PathBuf {
    let row = serde_json::json!({
        "product_title": "mug", "product_description": "a mug",
        "product_image_base64": "iVBORw0KGgo=", "product_image_format": "PNG",
        "potential_product_categories": "[\"Home > Mugs\"]",
        "ground_truth_category": "Home > Mugs", "ground_truth_brand": "b",
        "ground_truth_is_secondhand": "false",
    });
    let path = dir.join("products.jsonl");
    std::fs::write(&path, format!("{row}\n")).unwrap();
    path
}

/// A multimodal row has no client ISL (the reference's PromptData of a list-form prompt is
/// empty, so it counts none), while the server's usage still counts its prompt; off the chat
/// API its parts cannot be sent and the run is refused naming the row.
#[test]
fn a_multimodal_row_has_no_client_isl_and_needs_the_chat_api() {
    let dir = Scratch::new("shopify-isl");
    let server = crate::support::stub(loadgen_stubs::StubKind::Echo, |_| {});
    let products = write_products(&dir.0);
    let yaml = |api: &str| {
        format!(
            "type: offline\nmodel_params:\n  name: m\n  tokenizer_name: {tok}\ndatasets:\n  - \
             name: shopify_product_catalogue::q3vl\n    path: {}\nsettings:\n  runtime:\n    \
             n_samples_to_issue: 3\nendpoint_config:\n  endpoints: [\"{}\"]\n  api_type: {api}\n",
            products.display(),
            server.url(),
            tok = crate::support::char_tokenizer(),
        )
    };
    let report = report_dir("predefined-shopify-isl");
    let out = run_yaml(&dir.0, &yaml("openai"), &[], &report);
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&report);
    assert_eq!(s["n_samples_completed"].as_u64(), Some(3), "{s}");
    assert_eq!(s["input_sequence_lengths"], serde_json::json!({}), "no client ISL: {s}");
    let server_isl = &s["input_sequence_lengths_server"];
    assert_eq!(server_isl["total"].as_u64().map(|t| t > 0), Some(true), "{server_isl}");
    assert!(s["output_sequence_lengths"]["total"].as_u64().is_some(), "OSL is counted: {s}");
    // `report DIR` replays the empty PromptData of sample.issued to the same summary.
    let rebuilt = report.with_extension("rebuilt");
    let out = bin().arg("report").arg(&report).arg("--out").arg(&rebuilt).output().unwrap();
    show(&out);
    assert_eq!(out.status.code(), Some(0));
    let file = "performance/result_summary.json";
    let read = |d: &Path| std::fs::read_to_string(d.join(file)).unwrap();
    assert_eq!(read(&rebuilt), read(&report), "the rebuilt summary is the run's");
    let _ = std::fs::remove_dir_all(&rebuilt);
    let report = report_dir("predefined-shopify-completions");
    let out = run_yaml(&dir.0, &yaml("openai_completions"), &[], &report);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("dataset row 0 cannot become a request"), "{stderr}");
    assert!(
        stderr.contains("multimodal content parts (images); use --api-type openai"),
        "{stderr}"
    );
    assert_eq!(server.totals().requests, 3, "the refused run sent nothing");
    // A salted warm-up would replace the parts with a text prompt: refused, as the reference's
    // validate_saltable refuses a list-form prompt.
    let salted = yaml("openai")
        .replace("settings:\n", "settings:\n  warmup:\n    enabled: true\n    salt: true\n");
    let out = run_yaml(&dir.0, &salted, &[], &report_dir("predefined-shopify-salt"));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("row 0 has no text prompt"), "{stderr}");
    assert_eq!(server.totals().requests, 3, "nothing sent");
}
