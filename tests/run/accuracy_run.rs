//! Accuracy runs end to end: the binary against the echo stub and the answer-table stub
//! (`stub echo --answers`), on the project's fixture datasets with known answers
//! (tests/assets/accuracy_runs/), checked in accuracy_results.json, sample_idx_map.json,
//! events.jsonl and report.txt.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::support::{assets, char_tokenizer, idx_map, report_dir, run, stub, Scratch};
use loadgen_stubs::{load_answers, DelayFault, PrefixCacheConfig, StubKind, StubServer};
use serde_json::Value;

fn fixture(name: &str) -> String {
    assets().join("accuracy_runs").join(name).display().to_string()
}

fn table_stub() -> StubServer {
    let answers = load_answers(Path::new(&fixture("answers.json"))).expect("answers.json loads");
    stub(StubKind::Echo, |c| c.answers = Some(answers))
}

/// `acc:FILE,name=NAME,accuracy_config.…` for a fixture.
fn acc(file: &str, name: &str, method: &str, extractor: &str, more: &str) -> String {
    format!(
        "acc:{},name={name},accuracy_config.eval_method={method},\
         accuracy_config.extractor={extractor}{more}",
        fixture(file)
    )
}

fn base_args(url: &str, dir: &Path) -> Vec<String> {
    [
        "benchmark",
        "offline",
        "--endpoints",
        url,
        "--model",
        "m",
        "--workers",
        "1",
        "--max-connections",
        "8",
        "--tokenizer",
        &char_tokenizer(),
        "--report-dir",
        &dir.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn results(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("accuracy/accuracy_results.json"))
        .expect("accuracy_results.json is written");
    serde_json::from_str(&text).expect("accuracy_results.json parses")
}

fn entry<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["accuracy_scores"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["dataset_name"] == name))
        .unwrap_or_else(|| panic!("no entry {name} in {r}"))
}

/// The keys of a JSON object, sorted (serde_json's map): for sets of keys.
fn keys(v: &Value) -> Vec<&str> {
    v.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default()
}

/// Asserts that `keys` appear in `text` in this order from `from` on (the file's own order,
/// which a parsed `Value` does not keep).
fn assert_key_order(text: &str, from: &str, keys: &[&str]) {
    let mut at = text.find(from).unwrap_or_else(|| panic!("{from} in {text}"));
    for key in keys {
        let needle = format!("\"{key}\":");
        let found = text[at..].find(&needle).unwrap_or_else(|| panic!("{key} after {at}"));
        at += found + needle.len();
    }
}

fn results_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("accuracy/accuracy_results.json")).unwrap()
}

/// Every extractor and scorer on its fixture, in one run after a performance phase: the
/// scores a reader works out from the answers table by hand.
#[test]
fn every_extractor_and_scorer_gives_its_known_score_from_the_answer_table() {
    let server = table_stub();
    let dir = report_dir("acc-all");
    let mut args = base_args(&server.url(), &dir);
    let datasets = [
        fixture("perf.jsonl"),
        acc(
            "math.jsonl",
            "math",
            "pass_at_1",
            "boxed_math_extractor",
            ",accuracy_config.ground_truth=answer",
        ),
        acc("code.jsonl", "code", "pass_at_1", "python_code_extractor", ""),
        acc("calls.jsonl", "calls", "pass_at_1", "function_call_extractor", ""),
        acc("capitals.jsonl", "capitals", "string_match", "identity_extractor", ""),
        acc(
            "summaries.jsonl",
            "summaries",
            "rouge",
            "identity_extractor",
            ",accuracy_config.ground_truth=highlights",
        ),
        acc("products.jsonl", "products", "shopify_category_f1", "identity_extractor", ""),
        // Last: its unanswered sample waits out the accuracy drain timeout.
        acc("mcq.jsonl", "mcq", "pass_at_1", "abcd_extractor", ",accuracy_config.num_repeats=2"),
    ];
    for d in &datasets {
        args.extend(["--dataset".to_string(), d.clone()]);
    }
    args.extend(["--num-samples", "2", "--accuracy-drain-timeout", "1"].map(String::from));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "the run succeeds");
    let r = results(&dir);
    let score = |name: &str| entry(&r, name)["score"].as_f64().unwrap();
    // math: \boxed{42} and the last digits 7 match, "no number here" extracts nothing.
    assert_eq!(score("math"), 2.0 / 3.0);
    // code: the fenced block matches its ground truth; no block is no answer.
    assert_eq!(score("code"), 0.5);
    // calls: get_weather(city='London') prints as the ground truth's JSON; no call, no answer.
    assert_eq!(score("calls"), 0.5);
    // capitals: "  Paris \n" matches "Paris" once stripped; "rome" is not "Rome".
    assert_eq!(score("capitals"), 0.5);
    // products: 2 of 3 levels of the first path, a 2-level pad for the unparsable second:
    // hits 2 over 5 predicted and 5 true levels.
    let (hp, hr) = (2.0 / 5.0, 2.0 / 5.0);
    assert_eq!(score("products"), 2.0 * (hp * hr) / (hp + hr));
    // summaries: one identical pair (1.0) and one with no word in common (0.0).
    let rouge = &entry(&r, "summaries")["score"];
    for key in ["rouge1", "rouge2", "rougeL", "rougeLsum"] {
        assert_eq!(rouge[key], "50.0", "{key} of {rouge}");
    }
    assert_eq!(rouge["gen_len"], "38", "22 + 16 characters of predictions");
    assert_eq!(rouge["gen_num"], 2);
    let text = results_text(&dir);
    let rouge_keys = ["rouge1", "rouge2", "rougeL", "rougeLsum", "gen_len", "gen_num"];
    assert_key_order(&text, "\"dataset_name\": \"summaries\"", &rouge_keys);
    assert_key_order(&text, "{", &["average_accuracy", "osl_tokenization_s", "accuracy_scores"]);
    assert!(text.trim_end().ends_with("\"token_count_source\": \"client\"\n}"), "{text}");
    check_mcq(entry(&r, "mcq"), &text);
    let mean = [2.0 / 3.0, 0.5, 0.5, 0.5, score("products"), 0.2];
    let avg = r["average_accuracy"].as_f64().unwrap();
    assert!((avg - mean.iter().sum::<f64>() / 6.0).abs() < 1e-12, "rouge's dict is not numeric");
    check_phases(&dir);
    check_report_block(&dir);
}

/// mcq: the abcd extractor on the table's answers, twice: (A) right, C wrong, one sample
/// failed (not in the table: an empty COMPLETE), one never answered (missing), one answered
/// empty. 2 right of 10 issued.
fn check_mcq(e: &Value, text: &str) {
    assert_eq!(e["score"], 0.2);
    assert_eq!((e["unit_samples"].as_u64(), e["num_repeats"].as_u64()), (Some(5), Some(2)));
    assert_eq!(e["total_samples"], 10);
    let counts = &e["response_counts"];
    assert_eq!(
        (&counts["issued"], &counts["scored"], &counts["empty"], &counts["missing"]),
        (&Value::from(10), &Value::from(4), &Value::from(4), &Value::from(2))
    );
    // Client OSL (char tokenizer) over the 4 non-empty outputs: 17, 17, 9, 9 characters.
    let osl = &e["output_sequence_lengths"];
    assert_eq!(
        (&osl["total"], &osl["min"], &osl["max"]),
        (&Value::from(52), &Value::from(9), &Value::from(17))
    );
    // Server OSL from the echo stub's usage: the same characters; the empty answer's 0 is
    // not recorded, and every successful sample had usage.
    let server = &e["output_sequence_lengths_server"];
    assert_eq!(
        (&server["total"], &server["min"], &server["max"]),
        (&Value::from(52), &Value::from(9), &Value::from(17))
    );
    assert_eq!(e["n_osl_samples_server"], 4);
    assert_eq!(e["n_missing_usage"], 0);
    let order = [
        "dataset_name",
        "extractor",
        "ground_truth_column",
        "score",
        "unit_samples",
        "num_repeats",
        "total_samples",
        "duration_s",
        "complete",
        "dataset_type",
        "response_counts",
        "output_sequence_lengths",
        "osl_tokenize_s",
        "output_sequence_lengths_server",
        "n_osl_samples_server",
        "n_missing_usage",
    ];
    assert_eq!(keys(e).len(), order.len(), "{e}");
    assert_key_order(text, "\"dataset_name\": \"mcq\"", &order[1..]);
    assert_eq!(e["extractor"], "ABCDExtractor", "the class name, as the reference writes it");
    assert_eq!(e["ground_truth_column"], Value::Null, "unset, as the reference writes it");
    assert_eq!(e["dataset_type"], "accuracy");
    assert_eq!(e["complete"], true);
    assert!(e["duration_s"].as_f64().unwrap() >= 1.0, "it waited out its 1 s drain");
}

/// sample_idx_map.json has one entry per phase, in order, each sample naming its dataset row;
/// events.jsonl carries the accuracy samples as the reference writes them.
fn check_phases(dir: &Path) {
    let map = idx_map(dir);
    let text = std::fs::read_to_string(dir.join("sample_idx_map.json")).unwrap();
    let phases = ["performance", "math", "code", "calls", "capitals", "summaries", "products"];
    assert_key_order(&text, "{", &phases);
    assert_key_order(&text, "\"products\"", &["mcq"]);
    assert_eq!(keys(&map).len(), 8);
    let mcq = map["mcq"].as_object().unwrap();
    let rows: Vec<u64> = mcq.values().map(|v| v.as_u64().unwrap()).collect();
    assert_eq!(rows, [0, 1, 2, 3, 4, 0, 1, 2, 3, 4], "in order, twice");
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let (first_mcq, _) = mcq.iter().next().unwrap();
    let issued = events
        .lines()
        .find(|l| l.contains("\"sample.issued\"") && l.contains(first_mcq.as_str()))
        .expect("the accuracy sample's issued line");
    assert!(issued.contains("[\"PromptData\",\"q1: which is first\""), "{issued}");
    let complete = events
        .lines()
        .find(|l| l.contains("\"sample.complete\"") && l.contains(first_mcq.as_str()))
        .expect("its complete line");
    assert!(
        complete.contains("[\"TextModelOutput\",\"The answer is (A)\",null,null]"),
        "{complete}"
    );
    let s = crate::support::summary(dir);
    assert_eq!(s["n_samples_issued"], 2, "accuracy samples are not performance samples");
    let at = |needle: &str| events.find(needle).unwrap_or_else(|| panic!("{needle}"));
    let stop = at("\"session.stop_performance_tracking\"");
    assert!(stop < at(&format!("\"sample_uuid\":\"{first_mcq}\"")), "between the phases");
    let math_first = map["math"].as_object().unwrap().keys().next().unwrap();
    assert!(stop < at(&format!("\"sample_uuid\":\"{math_first}\"")), "before any accuracy");
    assert_eq!(events.matches("session.stop_performance_tracking").count(), 1);
    // The never-answered q4 samples (rows 3) were issued and have no COMPLETE, as the
    // reference logs a sample lost at the drain timeout.
    for (uuid, _) in mcq.iter().filter(|(_, row)| **row == 3) {
        let lines: Vec<&str> = events.lines().filter(|l| l.contains(uuid.as_str())).collect();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("\"sample.issued\""), "{lines:?}");
    }
}

fn check_report_block(dir: &Path) {
    let report = crate::support::report_txt(dir);
    let tps = report.find("\nTPS: ").expect("the TPS line");
    let block = report.find("\nAccuracy:\n").expect("the Accuracy block");
    assert!(block > tps, "after the TPS line, as the reference's Summary");
    assert!(report.contains("  math: 0.6667 (unit=3, repeats=1, total=3, duration="), "{report}");
    assert!(report.contains("    responses: 4/10 scored (4 empty, 2 missing)"), "{report}");
    assert!(report.contains("    output tokens (avg/min/max): 13.0/9/17"), "{report}");
    assert!(report.contains("  summaries: {'rouge1': '50.0', 'rouge2': '50.0'"), "{report}");
}

/// The echo stub answers each prompt with itself: identity + string_match scores the rows
/// whose ground truth is their prompt.
#[test]
fn the_echo_stub_scores_the_rows_whose_answer_is_their_prompt() {
    let server = stub(StubKind::Echo, |_| {});
    let dir = report_dir("acc-echo");
    let mut args = base_args(&server.url(), &dir);
    let data = write_fixture(
        &dir,
        "echo.jsonl",
        &[("say yes", "say yes"), ("say no", "no"), ("  padded ", "padded")],
    );
    let spec = format!(
        "acc:{data},name=echo,accuracy_config.eval_method=string_match,\
         accuracy_config.extractor=identity_extractor"
    );
    args.extend(["--dataset", &fixture("perf.jsonl"), "--dataset", &spec].map(String::from));
    args.extend(["--num-samples", "1"].map(String::from));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0));
    let r = results(&dir);
    assert_eq!(entry(&r, "echo")["score"].as_f64(), Some(2.0 / 3.0), "stripping matches the third");
    assert_eq!(r["token_count_source"], "client");
}

/// A JSONL dataset of (prompt, ground_truth) rows beside the report dir.
fn write_fixture(dir: &Path, name: &str, rows: &[(&str, &str)]) -> String {
    let path: PathBuf = dir.with_extension(name);
    let text: String = rows
        .iter()
        .map(|(p, g)| format!("{}\n", serde_json::json!({"prompt": p, "ground_truth": g})))
        .collect();
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Under `--token-count-source server` the server counts are the headline block and the
/// client ones take the suffix.
#[test]
fn a_server_primary_swaps_the_output_length_names() {
    let server = table_stub();
    let dir = report_dir("acc-server");
    let mut args = base_args(&server.url(), &dir);
    let spec = acc("capitals.jsonl", "capitals", "string_match", "identity_extractor", "");
    args.extend(["--dataset", &fixture("perf.jsonl"), "--dataset", &spec].map(String::from));
    args.extend(["--num-samples", "2", "--token-count-source", "server"].map(String::from));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0));
    let r = results(&dir);
    assert_eq!(r["token_count_source"], "server");
    let e = entry(&r, "capitals");
    assert!(e.get("output_sequence_lengths_server").is_none(), "{e}");
    // "  Paris \n" is 9 characters, "rome" 4: on both bases with the echo stub's usage.
    assert_eq!(e["output_sequence_lengths"]["total"], 13);
    assert_eq!(e["output_sequence_lengths_client"]["total"], 13);
    assert_eq!(e["n_osl_samples_client"], 2);
    assert!(keys(e).contains(&"n_missing_usage"));
}

/// `--accuracy-only`: no performance phase, one worker and one connection, and the
/// performance dataset's phase absent from sample_idx_map.json.
#[test]
fn accuracy_only_runs_the_accuracy_datasets_alone() {
    let server = table_stub();
    let dir = report_dir("acc-only");
    let mut args = base_args(&server.url(), &dir);
    let spec = acc(
        "math.jsonl",
        "math",
        "pass_at_1",
        "boxed_math_extractor",
        ",accuracy_config.ground_truth=answer,accuracy_config.num_repeats=3",
    );
    args.extend(
        ["--dataset", &fixture("perf.jsonl"), "--dataset", &spec, "--accuracy-only"]
            .map(String::from),
    );
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0));
    let e = entry(&results(&dir), "math").clone();
    assert_eq!((e["score"].as_f64(), &e["total_samples"]), (Some(2.0 / 3.0), &Value::from(9)));
    assert_eq!(keys(&idx_map(&dir)), ["math"]);
    let config = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    assert!(config.contains("num_workers: 1") && config.contains("max_connections: 1"), "{config}");
    assert_eq!(crate::support::summary(&dir)["n_samples_issued"], 0);
}

/// A performance dataset's own accuracy_config scores the performance phase's outputs, as the
/// entry `performance`, after the accuracy datasets.
#[test]
fn a_performance_dataset_with_accuracy_config_is_scored_on_its_outputs() {
    let server = stub(StubKind::Echo, |_| {});
    let dir = report_dir("acc-perf-inline");
    let mut args = base_args(&server.url(), &dir);
    let data = write_fixture(&dir, "inline.jsonl", &[("a", "a"), ("b", "c")]);
    let perf = format!(
        "{data},accuracy_config.eval_method=pass_at_1,accuracy_config.extractor=identity_extractor"
    );
    args.extend(["--dataset", &perf, "--num-samples", "4"].map(String::from));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0));
    let r = results(&dir);
    let e = entry(&r, "performance");
    assert_eq!(e["dataset_type"], "performance");
    assert_eq!(e["total_samples"], 4, "the performance phase's issued samples");
    assert_eq!(e["score"], 0.5, "row a answers itself, row b does not");
    assert!(e.get("response_counts").is_none(), "as the reference: accuracy entries only");
    assert!(r.get("average_accuracy").is_none(), "no accuracy-type entry");
}

/// accuracy_results.json that cannot be written fails the run with exit 4, naming it.
#[test]
fn an_unwritable_accuracy_results_file_is_exit_4() {
    let server = table_stub();
    let dir = report_dir("acc-unwritable");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("accuracy"), b"a file where the folder goes").unwrap();
    let mut args = base_args(&server.url(), &dir);
    let spec = acc("capitals.jsonl", "capitals", "string_match", "identity_extractor", "");
    args.extend(
        ["--dataset", &fixture("perf.jsonl"), "--dataset", &spec, "--num-samples", "2"]
            .map(String::from),
    );
    let out = run(&args);
    assert_eq!(out.status.code(), Some(4));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("accuracy/accuracy_results.json"), "{stderr}");
}

/// A shape copy of a reference example (tests/assets/accuracy_runs/*_shape.yaml) with its
/// placeholders filled: the stub, the fixtures' folder, the report dir.
fn shape_config(name: &str, url: &str, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(fixture(&format!("{name}.yaml"))).unwrap();
    let text = text
        .replace("@STUB@", url)
        .replace("@ASSETS@", &fixture(""))
        .replace("@DATASETS@", &assets().join("datasets").display().to_string())
        .replace("@REPORT@", &dir.display().to_string());
    let path = dir.with_extension("yaml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The reference's examples that combine performance and accuracy datasets, in shape (a
/// dataset path where theirs is predefined), run end to end from their YAML.
#[test]
fn the_reference_example_shapes_run_performance_then_accuracy_from_yaml() {
    let server = table_stub();
    let cases: [(&str, &[(&str, f64)]); 3] = [
        ("offline_cnn_shape", &[]),
        ("online_gptoss_shape", &[("aime25_shape", 2.0 / 3.0), ("gpqa_shape", 0.5)]),
        ("offline_shopify_shape", &[("shopify_shape", 2.0 * 0.16 / 0.8)]),
    ];
    for (name, scores) in cases {
        let dir = report_dir(&format!("acc-{name}"));
        let config = shape_config(name, &server.url(), &dir);
        let out = run(["benchmark", "from-config", "-c", &config.display().to_string()]);
        assert_eq!(out.status.code(), Some(0), "{name}");
        let r = results(&dir);
        for (dataset, want) in scores {
            let got = entry(&r, dataset)["score"].as_f64().unwrap();
            assert!((got - want).abs() < 1e-12, "{name} {dataset}: {got} != {want}");
        }
        assert!(
            crate::support::summary(&dir)["n_samples_completed"].as_u64().unwrap() > 0,
            "{name}"
        );
    }
    let cnn = results(&report_dir_of("offline_cnn_shape"));
    assert_eq!(entry(&cnn, "cnn_dailymail_shape")["score"]["rouge1"], "50.0");
    let gptoss = results(&report_dir_of("online_gptoss_shape"));
    assert_eq!(entry(&gptoss, "aime25_shape")["total_samples"], 24, "3 rows, 8 repeats");
    assert_eq!(entry(&gptoss, "gpqa_shape")["response_counts"]["issued"], 10);
}

fn report_dir_of(name: &str) -> PathBuf {
    crate::support::report_path(&format!("acc-{name}"))
}

/// Its LiveCodeBench dataset needs the reference's execution service: refused by name, before
/// any request, saying so and how to run the rest; a file scored by code_bench_scorer too.
#[test]
fn an_example_with_an_external_scorer_is_refused_naming_it() {
    let server = table_stub();
    let dir = report_dir("acc-lcb");
    let config = shape_config("online_gptoss_lcb_shape", &server.url(), &dir);
    let out = run(["benchmark", "from-config", "-c", &config.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for needle in [
        "datasets[0].name (dataset livecodebench::gptoss)",
        "code_bench_scorer",
        "LiveCodeBench's external execution service",
        "remove this dataset from datasets: to run the others",
    ] {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    assert!(!dir.join("events.jsonl").exists(), "nothing ran");
    assert_eq!(server.totals().requests, 0, "no request was sent");
    let dir = report_dir("acc-lcb-file");
    let mut args = base_args(&server.url(), &dir);
    let lcb = acc("code.jsonl", "lcb", "code_bench_scorer", "python_code_extractor", "");
    args.extend(["--dataset", &fixture("perf.jsonl"), "--dataset", &lcb].map(String::from));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("\"code_bench_scorer\" is not supported"), "{stderr}");
    assert!(stderr.contains("remove this dataset from datasets: (or --dataset)"), "{stderr}");
}

/// With no `--accuracy-drain-timeout` an accuracy phase waits for its never-answered sample
/// without limit: the run is still waiting once every other request was answered, and an
/// interrupt ends it (exit 130, report written, nothing scored).
#[test]
fn the_accuracy_drain_waits_without_limit_until_an_interrupt() {
    let server = table_stub();
    let dir = report_dir("acc-unlimited");
    let mut args = base_args(&server.url(), &dir);
    let spec = acc("mcq.jsonl", "mcq", "pass_at_1", "abcd_extractor", "");
    args.extend(["--dataset", &fixture("perf.jsonl"), "--dataset", &spec].map(String::from));
    args.extend(["--num-samples", "2"].map(String::from));
    let run = crate::support::Watched::spawn(&args, false, &dir);
    let pid = run.pid as i32;
    let mut signalled = false;
    // 2 performance requests and the 5 of mcq (the stub answers all but q4's): all received.
    let done = run.watch(std::time::Duration::from_secs(60), |_| {
        if server.totals().requests >= 7 && !signalled {
            crate::support::signal(pid, libc::SIGINT);
            signalled = true;
        }
        signalled
    });
    assert!(!done.hung, "the interrupt ends the wait: {}", done.stderr);
    assert_eq!(done.code, Some(130), "{}", done.stderr);
    assert!(dir.join("report.txt").is_file(), "the report is still written");
    assert!(
        !dir.join("accuracy/accuracy_results.json").exists(),
        "an interrupted run is not scored"
    );
}

fn string_batch(columns: &[(&str, Vec<&str>)]) -> arrow_array::RecordBatch {
    use arrow_array::{ArrayRef, StringArray};
    arrow_array::RecordBatch::try_from_iter(columns.iter().map(|(name, cells)| {
        let cells = Arc::new(StringArray::from(cells.clone())) as ArrayRef;
        (name.to_string(), cells)
    }))
    .unwrap()
}

/// A `save_to_disk` DatasetDict split, as the reference's loaders keep it under `hf_cache/`.
fn write_saved_split(dir: &Path, split: &str, columns: &[(&str, Vec<&str>)]) {
    let folder = dir.join(split);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(dir.join("dataset_dict.json"), format!("{{\"splits\": [\"{split}\"]}}"))
        .unwrap();
    let state = serde_json::json!({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]});
    std::fs::write(folder.join("state.json"), state.to_string()).unwrap();
    let batch = string_batch(columns);
    let file = std::fs::File::create(folder.join("data-00000-of-00001.arrow")).unwrap();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
}

/// A processed parquet file, as the reference's `generate` writes it.
fn write_parquet(file: &Path, columns: &[(&str, Vec<&str>)]) {
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let batch = string_batch(columns);
    let out = std::fs::File::create(file).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(out, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

const AIME_SUFFIX: &str =
    "\nPlease reason step by step, and put your final answer within \\boxed{}.";
const GPQA_SUFFIX: &str =
    "\n\nExpress your final answer as the corresponding option 'A', 'B', 'C', or 'D'.";

fn cnn_prompt(article: &str) -> String {
    format!(
        "Summarize the following news article in 128 tokens. Please output the summary only, \
         without any other text.\n\nArticle:\n{article}\n\nSummary:"
    )
}

/// The reference's caches in `dir/dataset_cache` (the default `datasets_dir`, relative to
/// the working directory), and the answer table for their preset prompts. GPQA's choices
/// are shuffled by CPython's `Random(0)`: `sample(range(4), 4)` gives [3, 1, 0, 2],
/// [3, 1, 2, 0], [2, 3, 0, 1], so the correct answers land on C, D, C.
fn write_predefined_caches(dir: &Path) -> PathBuf {
    let cache = dir.join("dataset_cache");
    // Raw AIME2025-I rows (read twice, as the reference's loader does): answers normalised.
    let aime = [("question", vec!["six sevens?", "three and four?"]), ("answer", vec!["042", "7"])];
    write_saved_split(&cache.join("hf_cache/aime25"), "test", &aime);
    let gpqa = [
        ("Question", vec!["Q0", "Q1", "Q2"]),
        ("Correct Answer", vec!["r0", "r1", "r2"]),
        ("Incorrect Answer 1", vec!["a0", "a1", "a2"]),
        ("Incorrect Answer 2", vec!["b0", "b1", "b2"]),
        ("Incorrect Answer 3", vec!["c0", "c1", "c2"]),
    ];
    write_saved_split(&cache.join("hf_cache/gpqa_diamond"), "train", &gpqa);
    let cnn = [
        ("article", vec!["The cat.", "The dogs."]),
        ("highlights", vec!["the cat sat on the mat", "dogs bark loudly"]),
        ("id", vec!["c", "d"]),
    ];
    write_parquet(&cache.join("cnn_dailymail/cnn_dailymail.parquet"), &cnn);
    let gpqa_prompt = |q: &str, choices: [&str; 4]| {
        let [a, b, c, d] = choices;
        format!("{q}\n\n(A) {a}\n(B) {b}\n(C) {c}\n(D) {d}{GPQA_SUFFIX}")
    };
    let answers = serde_json::json!({
        "xx": "ok", "xxx": "ok",
        format!("six sevens?{AIME_SUFFIX}"): "so \\boxed{42}",
        format!("three and four?{AIME_SUFFIX}"): "\\boxed{8}",
        gpqa_prompt("Q0", ["c0", "a0", "r0", "b0"]): "The answer is (C)",
        gpqa_prompt("Q1", ["c1", "a1", "b1", "r1"]): "Answer: A",
        gpqa_prompt("Q2", ["b2", "c2", "r2", "a2"]): "(C)",
        cnn_prompt("The cat."): "the cat sat on the mat",
        cnn_prompt("The dogs."): "cats meow softly",
    });
    let path = dir.join("answers.json");
    std::fs::write(&path, answers.to_string()).unwrap();
    path
}

/// The echo stub answering from the table in `answers`, keeping every request body it
/// receives.
fn answering_stub(answers: &Path) -> (StubServer, loadgen_stubs::BodyLog) {
    let answers = load_answers(answers).unwrap();
    let bodies = loadgen_stubs::BodyLog::default();
    let server = stub(StubKind::Echo, |c| {
        c.answers = Some(answers);
        c.body_log = Some(bodies.clone());
    });
    (server, bodies)
}

/// Runs `benchmark from-config` on a shape file in `cwd` (its `dataset_cache/` is the
/// predefined datasets' cache), with no user cache reachable.
fn run_in(cwd: &Path, config: &Path) -> std::process::Output {
    let out = crate::support::bin()
        .args(["benchmark", "from-config", "-c"])
        .arg(config)
        .current_dir(cwd)
        .env("HOME", cwd)
        .env_remove("HF_HOME")
        .env_remove("HF_DATASETS_CACHE")
        .env_remove("XDG_CACHE_HOME")
        .output()
        .expect("the binary runs");
    crate::support::show(&out);
    out
}

/// The reference's gpt-oss and CNN examples with their predefined accuracy datasets, read
/// from a local cache in the reference's layout and scored against the ground truth of the
/// same processed records: the scores a reader works out from the answer table.
#[test]
fn the_reference_examples_score_their_predefined_datasets_from_the_local_cache() {
    let cwd = Scratch::new("predefined-examples");
    let (server, bodies) = answering_stub(&write_predefined_caches(&cwd));
    let dir = report_dir("acc-predefined-gptoss");
    let config = shape_config("online_gptoss_predefined_shape", &server.url(), &dir);
    assert_eq!(run_in(&cwd, &config).status.code(), Some(0), "the gpt-oss example runs");
    let r = results(&dir);
    let aime = entry(&r, "aime25::gptoss");
    // 4 rows (part I twice), 8 repeats; \boxed{42} matches the normalised "042", 8 != 7.
    assert_eq!(aime["score"].as_f64(), Some(0.5));
    assert_eq!(aime["total_samples"], 32);
    assert_eq!(aime["ground_truth_column"], "answer");
    let gpqa = entry(&r, "gpqa::gptoss");
    // C is choice3 for Q0 and Q2; A is not Q1's D.
    assert_eq!(gpqa["score"].as_f64(), Some(2.0 / 3.0));
    assert_eq!(gpqa["response_counts"]["issued"], 15, "3 rows, 5 repeats");

    let dir = report_dir("acc-predefined-cnn");
    let config = shape_config("offline_cnn_predefined_shape", &server.url(), &dir);
    let out = run_in(&cwd, &config);
    assert_eq!(out.status.code(), Some(0), "the CNN example runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("parser is ignored on a predefined dataset"), "{stderr}");
    let cnn = results(&dir);
    let cnn = entry(&cnn, "cnn_dailymail::llama3_8b");
    assert_eq!(cnn["score"]["rouge1"], "50.0", "one summary exact, one with nothing shared");
    assert_eq!(cnn["ground_truth_column"], "highlights");
    assert_eq!(crate::support::summary(&dir)["n_samples_completed"], 2);
    let template = "{{- bos_token }}{%- for message in messages %}{{ message['content'] | trim \
                    }}{%- endfor %}";
    let logged = bodies.lock().unwrap();
    let cnn_bodies: Vec<Value> = logged
        .iter()
        .map(|b| serde_json::from_slice::<Value>(b).unwrap())
        .filter(|b| b["messages"][0]["content"].as_str().is_some_and(|c| c.contains("Article:")))
        .collect();
    assert_eq!(cnn_bodies.len(), 4, "2 accuracy and 2 performance requests");
    assert!(cnn_bodies.iter().all(|b| b["chat_template"] == template), "{cnn_bodies:?}");
}

/// The reference's per-dataset output-budget example (perf 10240, accuracy 32768
/// `max_new_tokens` through `generation_config_override`): every request the stub received
/// asks for its own phase's budget. The file as it is names livecodebench::gptoss and is
/// refused naming it; the copy without that dataset runs end to end.
#[test]
fn each_phase_sends_its_own_datasets_generation_config_override() {
    let cwd = Scratch::new("predefined-per-dataset-osl");
    let (server, bodies) = answering_stub(&write_predefined_caches(&cwd));
    let dir = report_dir("acc-per-dataset-osl-lcb");
    let config = shape_config("online_gptoss_per_dataset_osl_shape", &server.url(), &dir);
    let out = run_in(&cwd, &config);
    assert_eq!(out.status.code(), Some(2), "livecodebench::gptoss is refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("livecodebench::gptoss"), "{stderr}");
    assert!(stderr.contains("remove this dataset from datasets: to run the others"), "{stderr}");
    assert_eq!(server.totals().requests, 0, "no request was sent");

    let dir = report_dir("acc-per-dataset-osl");
    let config = shape_config("online_gptoss_per_dataset_osl_shape", &server.url(), &dir);
    let text = std::fs::read_to_string(&config).unwrap();
    let (head, rest) = text.split_once("  - name: \"livecodebench::gptoss\"").unwrap();
    let tail = &rest[rest.find("\nsettings:").unwrap()..];
    std::fs::write(&config, format!("{head}{}", &tail[1..])).unwrap();
    assert_eq!(run_in(&cwd, &config).status.code(), Some(0), "the example runs");
    let r = results(&dir);
    assert_eq!(entry(&r, "aime25::gptoss")["score"].as_f64(), Some(0.5));
    assert_eq!(entry(&r, "gpqa::gptoss")["score"].as_f64(), Some(2.0 / 3.0));
    let logged = bodies.lock().unwrap();
    let budgets = |token_ids: bool| -> Vec<u64> {
        logged
            .iter()
            .map(|b| serde_json::from_slice::<Value>(b).unwrap())
            .filter(|b| b["prompt"].is_array() == token_ids)
            .map(|b| b["max_tokens"].as_u64().unwrap())
            .collect()
    };
    let (perf, accuracy) = (budgets(true), budgets(false));
    assert_eq!(perf.len(), 2000, "n_samples_to_issue performance requests");
    assert!(perf.iter().all(|&t| t == 10240), "the performance phase's budget");
    assert_eq!(accuracy.len(), 4 * 8 + 3 * 5, "aime25 8 times, gpqa 5 times");
    assert!(accuracy.iter().all(|&t| t == 32768), "the accuracy datasets' budget: {accuracy:?}");
}

/// A 1×1 PNG of one colour, made here: signature, IHDR, an IDAT of one stored (uncompressed)
/// deflate block, IEND, each chunk with its CRC-32.
fn tiny_png(rgb: [u8; 3]) -> Vec<u8> {
    fn crc32(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
            }
        }
        !crc
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(kind);
        out.extend_from_slice(data);
        let crc = crc32(&out[start..]);
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let raw = [0, rgb[0], rgb[1], rgb[2]]; // filter byte 0, then one RGB pixel
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &raw {
        a = (a + u32::from(x)) % 65_521;
        b = (b + a) % 65_521;
    }
    let mut zlib = vec![0x78, 0x01, 0x01, 4, 0, !4, 0xFF];
    zlib.extend_from_slice(&raw);
    zlib.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let ihdr = [0, 0, 0, 1, 0, 0, 0, 1, 8, 2, 0, 0, 0]; // 1×1, 8-bit RGB
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &zlib);
    chunk(&mut png, b"IEND", &[]);
    png
}

/// The q3vl preset's user text for a product, as the reference's formatter writes it (the
/// answer table's key: the echo stub answers by the user message's text parts).
fn shopify_text(title: &str, description: &str, categories: &str) -> String {
    format!(
        "The title of the product is the following:\n```text\n{title}\n```\n\nThe description \
         of the product is the following:\n```text\n{description}\n```\n\nThe following are \
         the possible product categories:\n```json\n{categories}\n```\n"
    )
}

/// The reference's processed Shopify parquet in `dir/dataset_cache` (its `generate` layout:
/// `<id>/train+test/<id>_train+test.parquet`), two products with PNG images; returns the
/// images' base64 and the answer table for their prompts.
fn write_shopify_cache(dir: &Path) -> (Vec<String>, PathBuf) {
    use base64::Engine;
    let images: Vec<String> = [[255, 0, 0], [0, 0, 255]]
        .map(|rgb| base64::engine::general_purpose::STANDARD.encode(tiny_png(rgb)))
        .to_vec();
    let categories = "[\"A > B > C\", \"A > D\"]";
    let columns = [
        ("product_title", vec!["shirt", "lamp"]),
        ("product_description", vec!["a red shirt", "a blue lamp"]),
        ("product_image_base64", vec![images[0].as_str(), images[1].as_str()]),
        ("product_image_format", vec!["PNG", "PNG"]),
        ("potential_product_categories", vec![categories, categories]),
        ("ground_truth_category", vec!["A > B > C", "A > D"]),
        ("ground_truth_brand", vec!["acme", "lumo"]),
        ("ground_truth_is_secondhand", vec!["false", "true"]),
    ];
    let id = "shopify_product_catalogue";
    let file = format!("dataset_cache/{id}/train+test/{id}_train+test.parquet");
    write_parquet(&dir.join(file), &columns);
    let answers = serde_json::json!({
        shopify_text("shirt", "a red shirt", categories):
            "{\"category\": \"A > B > X\", \"brand\": \"acme\", \"is_secondhand\": false}",
        shopify_text("lamp", "a blue lamp", categories): "nonsense",
    });
    let path = dir.join("answers.json");
    std::fs::write(&path, answers.to_string()).unwrap();
    (images, path)
}

/// The reference's offline Qwen3-VL Shopify example with its predefined multimodal dataset
/// read from a local cache: each request carries the system prompt and the product's text
/// and image parts as the reference sends them, and shopify_category_f1 scores the answers.
#[test]
fn the_shopify_example_sends_multimodal_parts_and_scores_category_f1() {
    let cwd = Scratch::new("predefined-shopify");
    let (images, answers) = write_shopify_cache(&cwd);
    let (server, bodies) = answering_stub(&answers);
    let dir = report_dir("acc-shopify-predefined");
    let config = shape_config("offline_shopify_predefined_shape", &server.url(), &dir);
    assert_eq!(run_in(&cwd, &config).status.code(), Some(0), "the example runs");
    let r = results(&dir);
    let e = entry(&r, "shopify_product_catalogue::q3vl");
    // Row 1: 2 of 3 levels; row 2 unparsable, padded to 2 levels: 2 hits of 5 and 5.
    let (hp, hr) = (2.0 / 5.0, 2.0 / 5.0);
    assert_eq!(e["score"].as_f64(), Some(2.0 * (hp * hr) / (hp + hr)));
    assert_eq!(e["ground_truth_column"], "ground_truth_category");
    assert_eq!(e["response_counts"]["issued"], 2);
    let logged = bodies.lock().unwrap();
    let first = logged.iter().find(|b| memchr_find(b, b"a red shirt")).expect("a shirt request");
    let body: Value = serde_json::from_slice(first).unwrap();
    let messages = body["messages"].as_array().unwrap();
    assert_eq!((messages.len(), &messages[0]["role"]), (2, &Value::from("system")));
    assert!(messages[0]["content"].as_str().unwrap().starts_with("Please analyze the product"));
    let want = serde_json::json!([
        {"type": "text", "text": shopify_text("shirt", "a red shirt", "[\"A > B > C\", \"A > D\"]")},
        {"type": "image_url", "image_url": {"url": format!("data:image/PNG;base64,{}", images[0])}},
    ]);
    assert_eq!(messages[1], serde_json::json!({"role": "user", "content": want}));
    let order = format!(
        "{{\"type\":\"image_url\",\"image_url\":{{\"url\":\"data:image/PNG;base64,{}\"}}}}]}}]",
        images[0]
    );
    assert!(memchr_find(first, order.as_bytes()), "the reference's key order");
    let text_first = b"{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"The title";
    assert!(memchr_find(first, text_first), "the text part first, type before text");
    let lamp = logged.iter().filter(|b| memchr_find(b, images[1].as_bytes())).count();
    let shirts = logged.iter().filter(|b| memchr_find(b, images[0].as_bytes())).count();
    assert_eq!(lamp + shirts, logged.len(), "every request carries its row's image");
    let s = crate::support::summary(&dir);
    assert!(s["n_samples_completed"].as_u64().unwrap() > 0);
}

fn memchr_find(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Each `sample.issued` line's timestamp, by sample uuid.
fn issue_times_ns(dir: &Path) -> std::collections::HashMap<String, u64> {
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    events
        .lines()
        .filter(|l| l.contains("\"sample.issued\""))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            (v["sample_uuid"].as_str().unwrap().to_string(), v["timestamp_ns"].as_u64().unwrap())
        })
        .collect()
}

/// A Poisson accuracy phase continues the performance phase's generator, as the reference's
/// phases share `rng_sched`: after 3 performance samples (4 draws of random.Random(42) at 5
/// QPS: 3 gaps and the one drawn before the stop), the accuracy samples' gaps are draws 5..
/// (225.8 ms, then 445.5 ms), not a fresh generator's (5.1 ms, 64.3 ms).
#[test]
fn a_poisson_accuracy_phase_continues_the_performance_phases_gaps() {
    let server = table_stub();
    let dir = report_dir("acc-poisson-gaps");
    let mut args = base_args(&server.url(), &dir);
    args[1] = "online".into();
    let spec = acc(
        "capitals.jsonl",
        "capitals",
        "string_match",
        "identity_extractor",
        ",accuracy_config.num_repeats=2",
    );
    args.extend(["--dataset", &fixture("perf.jsonl"), "--dataset", &spec].map(String::from));
    let poisson = ["--load-pattern", "poisson", "--target-qps", "5", "--num-samples", "3"];
    args.extend(poisson.map(String::from));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0));
    let times = issue_times_ns(&dir);
    let map = idx_map(&dir);
    let order: Vec<u64> = map["capitals"].as_object().unwrap().keys().map(|k| times[k]).collect();
    assert_eq!(order.len(), 4);
    // Issue stamps carry the scheduler's wake-up jitter: far under the gaps' differences.
    let tolerance_ns = 40_000_000i64;
    for (i, want_ns) in [(0, 225_834_601i64), (1, 445_457_619)] {
        let gap_ns = order[i + 1] as i64 - order[i] as i64;
        assert!((gap_ns - want_ns).abs() < tolerance_ns, "gap {i}: {gap_ns} ns, want {want_ns}");
    }
}

/// The answer-table stub, with one more prompt, "perf stalls", that is never answered, and a
/// performance dataset of it and "perf one".
fn stalling_stub(dir: &Path) -> (StubServer, String) {
    std::fs::create_dir_all(dir).unwrap();
    let answers_path = dir.with_extension("answers.json");
    let mut answers: serde_json::Map<String, Value> =
        serde_json::from_str(&std::fs::read_to_string(fixture("answers.json")).unwrap()).unwrap();
    answers.insert("perf stalls".into(), Value::Null);
    std::fs::write(&answers_path, Value::Object(answers).to_string()).unwrap();
    let table = load_answers(&answers_path).expect("the answers load");
    let server = stub(StubKind::Echo, |c| c.answers = Some(table));
    let perf = write_fixture(dir, "stale-perf.jsonl", &[("perf one", ""), ("perf stalls", "")]);
    (server, perf)
}

/// A performance sample left in flight at the performance drain timeout does not hold the
/// accuracy phases: each waits for its own samples only, as the reference's per-phase
/// in-flight count, so the run ends about one performance timeout after its start, not after
/// every accuracy timeout as well (1 + 2 × 20 s). The stalled sample is abandoned at the end;
/// the drain timeout makes the report incomplete (exit 4); the accuracy phases are scored.
#[test]
fn a_stalled_performance_sample_does_not_hold_the_accuracy_phases() {
    let dir = report_dir("acc-stale");
    let (server, perf) = stalling_stub(&dir);
    let mut args = base_args(&server.url(), &dir);
    let capitals = acc("capitals.jsonl", "capitals", "string_match", "identity_extractor", "");
    let code = acc("code.jsonl", "code", "pass_at_1", "python_code_extractor", "");
    for d in [&perf, &capitals, &code] {
        args.extend(["--dataset".to_string(), d.clone()]);
    }
    let timeouts = ["--performance-drain-timeout", "1", "--accuracy-drain-timeout", "20"];
    args.extend(timeouts.map(String::from));
    args.extend(["--num-samples", "2"].map(String::from));
    let started = std::time::Instant::now();
    let out = run(&args);
    let wall = started.elapsed();
    assert!(wall < std::time::Duration::from_secs(15), "the run took {wall:?}");
    assert_eq!(out.status.code(), Some(4), "the performance drain timed out");
    let r = results(&dir);
    assert_eq!(entry(&r, "capitals")["score"].as_f64(), Some(0.5));
    assert_eq!(entry(&r, "code")["score"].as_f64(), Some(0.5));
    let s = crate::support::summary(&dir);
    let counts = (&s["n_samples_issued"], &s["n_samples_completed"]);
    assert_eq!(counts, (&Value::from(2), &Value::from(1)));
    assert_eq!(abandon_reasons(&dir), ["in flight at the drain timeout"]);
}

/// The `why` of every `error.loadgen` line of the run's events.jsonl.
fn abandon_reasons(dir: &Path) -> Vec<String> {
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    events
        .lines()
        .filter(|l| l.contains("\"error.loadgen\""))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["data"][2].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

/// The cap ends the performance phase's drain as the reference's does: the accuracy phases
/// start at the cap, not after the performance drain timeout (20 s), and what the cap left
/// in flight is abandoned as the cap abandons it (a capped end: exit 0, the console says so).
#[test]
fn the_cap_ends_the_performance_drain_before_the_accuracy_phases() {
    let dir = report_dir("acc-capped");
    let (server, perf) = stalling_stub(&dir);
    let mut args = base_args(&server.url(), &dir);
    let capitals = acc("capitals.jsonl", "capitals", "string_match", "identity_extractor", "");
    args.extend(["--dataset", &perf, "--dataset", &capitals].map(String::from));
    args.extend(["--performance-drain-timeout", "20", "--num-samples", "2"].map(String::from));
    args.extend(["--runtime.max-duration-ms", "1000"].map(String::from));
    let started = std::time::Instant::now();
    let out = run(&args);
    let wall = started.elapsed();
    assert!(wall < std::time::Duration::from_secs(12), "the run took {wall:?}");
    assert_eq!(out.status.code(), Some(0), "a capped end that measured something");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("The run hit --runtime.max-duration-ms (1000 ms)"), "{stdout}");
    assert!(stdout.contains("abandoned (1 samples)"), "{stdout}");
    assert_eq!(abandon_reasons(&dir), ["in flight at the max-duration cap"]);
    assert_eq!(entry(&results(&dir), "capitals")["score"].as_f64(), Some(0.5));
}

/// An accuracy-only run has no performance phase, so, as the reference's, it logs neither
/// `session.start_performance_tracking` nor `session.stop_performance_tracking`, and issues
/// its samples at max throughput whatever the pattern (the reference's accuracy phases take
/// the performance phase's pattern, and there is none): at 1 QPS Poisson the 6 samples
/// would span about 3 s (random.Random(42)'s gaps), at once they span well under one.
#[test]
fn an_accuracy_only_run_logs_no_tracking_and_issues_at_once() {
    let server = table_stub();
    let dir = report_dir("acc-only-events");
    let mut args = base_args(&server.url(), &dir);
    args[1] = "online".into();
    let spec = acc(
        "capitals.jsonl",
        "capitals",
        "string_match",
        "identity_extractor",
        ",accuracy_config.num_repeats=3",
    );
    args.extend(["--dataset", &spec, "--accuracy-only"].map(String::from));
    args.extend(["--load-pattern", "poisson", "--target-qps", "1"].map(String::from));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(!events.contains("_performance_tracking"), "{events}");
    assert!(events.contains("\"session.started\"") && events.contains("\"session.ended\""));
    let times: Vec<u64> = issue_times_ns(&dir).into_values().collect();
    assert_eq!(times.len(), 6);
    let span_ns = times.iter().max().unwrap() - times.iter().min().unwrap();
    assert!(span_ns < 500_000_000, "issued over {span_ns} ns");
    assert_eq!(entry(&results(&dir), "capitals")["score"].as_f64(), Some(0.5));
}

/// A performance sample that outlives the performance drain timeout but answers while an
/// accuracy phase runs is counted in the performance metrics, as the reference's metrics
/// count a tracked sample's late completion: nothing is left unanswered, so the report is
/// complete (exit 0). Every second request is answered after 2.5 s: one performance sample
/// (past the 1 s drain) and one of the accuracy phase's (which waits for it).
#[test]
fn a_late_performance_sample_answered_in_an_accuracy_phase_is_counted() {
    let answers = load_answers(Path::new(&fixture("answers.json"))).expect("answers.json loads");
    let server = stub(StubKind::Echo, |c| {
        c.answers = Some(answers);
        c.faults.delay = Some(DelayFault { delay_ms: 2_500, every: 2 });
    });
    let dir = report_dir("acc-late");
    let mut args = base_args(&server.url(), &dir);
    let capitals = acc("capitals.jsonl", "capitals", "string_match", "identity_extractor", "");
    args.extend(["--dataset", &fixture("perf.jsonl"), "--dataset", &capitals].map(String::from));
    args.extend(["--performance-drain-timeout", "1", "--num-samples", "2"].map(String::from));
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "every sample answered in the end");
    let s = crate::support::summary(&dir);
    assert_eq!((&s["n_samples_completed"], &s["n_samples_abandoned"]), (&2.into(), &0.into()));
    assert!(abandon_reasons(&dir).is_empty());
    assert_eq!(entry(&results(&dir), "capitals")["score"].as_f64(), Some(0.5));
}

/// The stub answering every request that offers tools with a call of its first tool, with no
/// arguments (`--prefix-cache`), keeping the request bodies.
fn tool_call_stub() -> (StubServer, loadgen_stubs::BodyLog) {
    let bodies = loadgen_stubs::BodyLog::default();
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.0005;
        c.variable.first_chunk_spread = 0.0;
        c.variable.prefix_cache = Some(PrefixCacheConfig::default());
        c.body_log = Some(bodies.clone());
    });
    (server, bodies)
}

/// `(overall, normalized, [non_live, live, hallucination], subset scores)` a reader works out
/// for the fixture's 23 sampled rows when every answer is a call of the first tool with `{}`:
/// 9 right, the calls reaching the scorer at the end of the reference's `str(TextModelOutput)`.
/// See tests/assets/datasets/bfcl_v4.
fn bfcl_expected() -> (f64, f64, [f64; 3], Vec<(&'static str, f64)>) {
    let subsets = vec![
        ("simple_python", 66.67),
        ("simple_java", 50.0),
        ("simple_javascript", 50.0),
        ("multiple", 50.0),
        ("parallel", 50.0),
        ("parallel_multiple", 0.0),
        ("live_simple", 50.0),
        ("live_multiple", 100.0),
        ("live_parallel", 0.0),
        ("live_parallel_multiple", 0.0),
        ("irrelevance", 0.0),
        ("live_irrelevance", 0.0),
    ];
    // non_live: mean(mean(2/3, 1/2, 1/2), 1/2, 1/2, 0); live: (1 + 2 + 0 + 0) / 6.
    (39.13, 29.63, [38.89, 50.0, 0.0], subsets)
}

/// The BFCL v4 dataset block of the reference's edge-agentic example, as written, on the
/// project's fixture: its sampling keeps 23 rows (irrelevance 3 of 30, live_irrelevance 2 of
/// 26, the rest whole under subset_floor), each request carries its tools and tool_choice,
/// and the entry's score and breakdown are the ones worked out by hand.
#[test]
fn the_edge_example_bfcl_block_runs_and_scores_by_subset_and_category() {
    let (server, bodies) = tool_call_stub();
    let dir = report_dir("acc-bfcl");
    let config = shape_config("edge_bfcl_shape", &server.url(), &dir);
    let out = run(["benchmark", "from-config", "-c", &config.display().to_string()]);
    assert_eq!(out.status.code(), Some(0));
    let (overall, normalized, categories, subsets) = bfcl_expected();
    let r = results(&dir);
    let e = entry(&r, "bfcl_v4::function_calling");
    assert_eq!((e["unit_samples"].as_u64(), e["total_samples"].as_u64()), (Some(23), Some(23)));
    assert_eq!(e["extractor"], "FunctionCallExtractor");
    let b = &e["breakdown"];
    assert_eq!(b["overall_accuracy"].as_f64(), Some(overall), "{b}");
    assert!((e["score"].as_f64().unwrap() * 100.0 - overall).abs() < 0.005, "{e}");
    assert_eq!(b["normalized_single_turn_score"].as_f64(), Some(normalized), "{b}");
    for (category, want) in ["non_live", "live", "hallucination"].iter().zip(categories) {
        assert_eq!(b["category_scores"][category].as_f64(), Some(want), "{category}: {b}");
    }
    assert_eq!(keys(&b["subset_scores"]).len(), subsets.len(), "{b}");
    for (subset, want) in subsets {
        assert_eq!(b["subset_scores"][subset].as_f64(), Some(want), "{subset}: {b}");
    }
    assert_eq!((b["total_samples"].as_u64(), b["issued_samples"].as_u64()), (Some(23), Some(23)));
    assert_eq!(b["unscored_subsets"], serde_json::json!({}), "live_relevance is in no category");
    let text = std::fs::read_to_string(dir.join("accuracy/accuracy_results.json")).unwrap();
    assert_key_order(&text, "\"dataset_type\"", &["breakdown", "response_counts"]);
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains("  bfcl_v4::function_calling: 0."), "{report}");
    let logged = bodies.lock().unwrap();
    let tooled: Vec<Value> = logged
        .iter()
        .filter_map(|b| serde_json::from_slice::<Value>(b).ok())
        .filter(|b| b.get("tools").is_some())
        .collect();
    assert_eq!(tooled.len(), 23, "every BFCL request offers its tools");
    assert!(tooled.iter().all(|b| b["tool_choice"] == "auto"));
    let names: Vec<&str> =
        tooled.iter().filter_map(|b| b["tools"][0]["function"]["name"].as_str()).collect();
    assert!(names.contains(&"math_pi_digits"), "dotted names sent with _: {names:?}");
}
