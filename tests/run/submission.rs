//! `type: submission` end to end against the stubs, then `llm-loadgen check` on its report
//! directory: a single-stream edge submission passes every gate, one that breaks the config
//! lock fails it; and the TEST04 output-caching audit after a run, which passes against an
//! honest stub and fails against one that answers a repeated prompt from its cache.

use std::path::Path;

use loadgen_stubs::{PrefixCacheConfig, StubKind};

use crate::support::{alone, assets, report_dir, run, stub, summary, tmp_dir};

/// A submission of the agentic fixture under the edge ruleset against `url`, with `client`
/// as its `settings.client` block.
fn edge_submission(name: &str, url: &str, dir: &Path, client: &str) -> String {
    let path = tmp_dir().join(format!("{name}.yaml"));
    let text = format!(
        "type: submission\nbenchmark_mode: online\nsubmission_ref: {{model: qwen3.6-27b, \
         ruleset: mlperf-edge-current}}\nmodel_params: {{name: test-model, temperature: 0, \
         seed: 42, max_new_tokens: 8, streaming: \"on\"}}\ndatasets:\n  - name: agentic\n    \
         path: {}\n    agentic_inference: {{num_trajectories_to_issue: 3}}\nsettings:\n  \
         warmup: {{enabled: false}}\n  client: {client}\n  load_pattern: {{type: \
         agentic_inference, target_concurrency: 1}}\nendpoint_config:\n  endpoints: \
         [\"{url}\"]\nreport_dir: {}\n",
        assets().join("datasets/agentic_small.jsonl").display(),
        dir.display()
    );
    std::fs::write(&path, text).expect("the config is written");
    path.display().to_string()
}

/// Runs `edge_submission` against a prefix-cache stub, then `check` on it; returns check's
/// exit code and stdout.
fn submit_and_check(name: &str, client: &str) -> (Option<i32>, String) {
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.001;
        c.variable.first_chunk_spread = 0.0;
        c.variable.prefix_cache = Some(PrefixCacheConfig::default());
    });
    let dir = report_dir(name);
    let out = run([
        "benchmark",
        "from-config",
        "-c",
        &edge_submission(name, &server.url(), &dir, client),
    ]);
    server.stop();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(summary(&dir)["agentic"]["dropped_turns"].as_u64(), Some(0));
    let config = std::fs::read_to_string(dir.join("config.yaml")).expect("config.yaml");
    assert!(config.contains("type: submission"), "{config}");
    assert!(!config.contains("token_count_source"), "the reference's schema lacks it: {config}");
    let checked = run(["check", &dir.display().to_string()]);
    (checked.status.code(), String::from_utf8_lossy(&checked.stdout).into_owned())
}

#[test]
fn a_single_stream_edge_submission_passes_the_compliance_check() {
    let (code, text) = submit_and_check("edge-pass", "{num_workers: 1, max_connections: 1}");
    assert_eq!(code, Some(0), "{text}");
    for line in [
        "  ruleset=mlperf-edge-current model=qwen3.6-27b",
        "  [PASS] temperature==0: model_params.temperature=0.0",
        "  [PASS] seed==42: seeds={'model_params.seed': 42, 'dataloader_random_seed': 42}",
        "  [PASS] single_stream: num_workers=1 max_connections=1 target_concurrency=1",
        "  [PASS] no_dropped_turns: missing=0 (issued=6, observed=6)",
        "  [PASS] all_turns_observed: observed=6 == expected=6 (issued=6)",
        "  OVERALL: PASS",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
    }
}

#[test]
fn a_submission_off_the_config_lock_fails_the_check_with_exit_1() {
    let (code, text) = submit_and_check("edge-fail", "{num_workers: 2, max_connections: 2}");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains(
            "  [FAIL] single_stream: num_workers=2 max_connections=2 target_concurrency=1"
        ),
        "{text}"
    );
    assert!(text.contains("  [PASS] no_dropped_turns"), "{text}");
    assert!(text.ends_with("  OVERALL: FAIL\n\n"), "{text}");
}

#[test]
fn check_refuses_what_it_cannot_check_with_exit_2() {
    let missing = tmp_dir().join("no-such-run");
    let out = run(["check", &missing.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(["check", &tmp_dir().display().to_string(), "--ruleset", "mlperf-x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Ruleset 'mlperf-x' not found in registry")
    );
}

/// A concurrency-2 submission of 20 rows of the 1k dataset against `url` with an `audit:`
/// block whose extra keys are `extra`.
fn audited(name: &str, url: &str, dir: &Path, extra: &str) -> String {
    let path = tmp_dir().join(format!("{name}.yaml"));
    let text = format!(
        "type: submission\nbenchmark_mode: online\nmodel_params: {{name: test-model, \
         max_new_tokens: 8}}\ndatasets:\n  - path: {}\n    parser: {{prompt: text_input}}\n\
         settings:\n  warmup: {{enabled: false}}\n  runtime: {{n_samples_to_issue: 20}}\n  \
         load_pattern: {{type: concurrency, target_concurrency: 2}}\nendpoint_config:\n  \
         endpoints: [\"{url}\"]\nreport_dir: {}\naudit:\n  test: output_caching_test\n  \
         samples: 20\n  sample_index: 3\n{extra}",
        assets().join("datasets/dummy_1k.jsonl").display(),
        dir.display()
    );
    std::fs::write(&path, text).expect("the config is written");
    path.display().to_string()
}

/// The audit's verdict files under `dir/audit`: the record's `passed` and the verify line.
fn verdict(dir: &Path) -> (serde_json::Value, String) {
    let base = dir.join("audit");
    let record =
        std::fs::read_to_string(base.join("audit_output_caching_test.json")).expect("the record");
    let verify =
        std::fs::read_to_string(base.join("verify_OUTPUT_CACHING_TEST.txt")).expect("verify");
    (serde_json::from_str(&record).expect("the record is JSON"), verify)
}

#[test]
fn the_output_caching_audit_passes_against_an_honest_server_after_the_run() {
    // The verdict compares two phases' QPS: no other test's processes share the cores.
    let _alone = alone();
    // Every answer takes the same time whatever was asked before, long enough that the
    // phases' rates are the stub's, not the machine's.
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.02;
        c.variable.first_chunk_spread = 0.0;
        c.variable.inter_token_latency_ms = 0.5;
        c.variable.output_len_mean = 8.0;
        c.variable.output_len_spread = 0.0;
    });
    let dir = report_dir("audit-honest");
    let out = run([
        "benchmark",
        "from-config",
        "-c",
        &audited("honest", &server.url(), &dir, "  threshold: 0.5\n"),
    ]);
    server.stop();
    assert_eq!(out.status.code(), Some(0));
    // The main run, then the reference phase and the audit phase, each a run of its own.
    assert_eq!(summary(&dir)["n_samples_issued"].as_u64(), Some(20));
    for phase in ["reference", "output_caching"] {
        let phase_dir = dir.join("audit").join(phase);
        assert_eq!(summary(&phase_dir)["n_samples_completed"].as_u64(), Some(20), "{phase}");
        let config = std::fs::read_to_string(phase_dir.join("config.yaml")).expect("config.yaml");
        assert!(!config.contains("audit:"), "a phase runs without the audit: {config}");
    }
    let rows = |phase: &str| -> Vec<u64> {
        let path = dir.join("audit").join(phase).join("sample_idx_map.json");
        let idx: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        idx["performance"].as_object().unwrap().values().filter_map(|r| r.as_u64()).collect()
    };
    let distinct: std::collections::BTreeSet<u64> = rows("reference").into_iter().collect();
    assert_eq!(distinct.len(), 20, "the reference phase's samples are distinct rows");
    assert_eq!(rows("output_caching"), [3; 20], "every audit sample is row 3");
    let (record, verify) = verdict(&dir);
    assert_eq!(verify, "Performance check pass: True\n");
    assert_eq!(record["passed"], true);
    assert_eq!(
        (record["ref_requested"].as_u64(), record["audit_completed"].as_u64()),
        (Some(20), Some(20))
    );
    assert!(record["reason"].as_str().unwrap().contains(" < ref_qps * (1 + 50%) = "), "{record}");
}

#[test]
fn the_output_caching_audit_fails_against_a_server_that_answers_a_repeat_from_its_cache() {
    // A prompt not cached costs 1 ms per 4 bytes; a repeated one is answered at once.
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.001;
        c.variable.first_chunk_spread = 0.0;
        c.variable.output_len_mean = 8.0;
        c.variable.output_len_spread = 0.0;
        let cache = PrefixCacheConfig { uncached_token_us: 1000.0, ..Default::default() };
        c.variable.prefix_cache = Some(cache);
    });
    let dir = report_dir("audit-cached");
    let out = run([
        "benchmark",
        "from-config",
        "-c",
        &audited("cached", &server.url(), &dir, "  only: true\n"),
    ]);
    server.stop();
    assert_eq!(out.status.code(), Some(1), "the reference's exit code for a failed audit");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Compliance audit output_caching_test FAILED: audit_qps="), "{stderr}");
    assert!(!dir.join("performance").exists(), "audit.only skips the main run");
    let (record, verify) = verdict(&dir);
    assert_eq!(verify, "Performance check pass: False\n");
    assert_eq!(record["passed"], false);
    assert!(record["audit_qps"].as_f64() > record["ref_qps"].as_f64(), "{record}");
}

#[test]
fn an_audit_that_cannot_measure_the_server_is_refused_before_anything_runs() {
    let dir = report_dir("audit-poisson");
    let cfg = audited("poisson", "http://127.0.0.1:9", &dir, "");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("{type: concurrency, target_concurrency: 2}", "{type: poisson, target_qps: 5}");
    std::fs::write(&cfg, text).unwrap();
    let out = run(["benchmark", "from-config", "-c", &cfg]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("would mask a caching-induced speedup"));
    assert!(!dir.join("audit").exists());
}

/// The reference's online Llama-2-70B submission example, in shape: it runs as an online
/// Poisson run, then scores its accuracy dataset (a submission's `--mode both`), with its own
/// seeds (it names no ruleset); `check` under its round names the model's gate as not
/// applicable, as the reference's checker does.
#[test]
fn the_reference_submission_example_shape_runs_both_phases() {
    let server = stub(StubKind::Echo, |_| {});
    let dir = report_dir("llama2-shape");
    let text =
        std::fs::read_to_string(assets().join("submission/online_llama2_70b_orca_shape.yaml"))
            .expect("the shape fixture")
            .replace("@STUB@", &server.url())
            .replace("@ASSETS@", &assets().join("accuracy_runs").display().to_string())
            .replace("@REPORT@", &dir.display().to_string());
    let path = tmp_dir().join("llama2-shape.yaml");
    std::fs::write(&path, text).unwrap();
    let out = run(["benchmark", "from-config", "-c", &path.display().to_string()]);
    server.stop();
    assert_eq!(out.status.code(), Some(0));
    let s = summary(&dir);
    assert_eq!(s["n_samples_issued"].as_u64(), Some(12), "1 s at 10 QPS, whole passes of 2 rows");
    let results =
        std::fs::read_to_string(dir.join("accuracy/accuracy_results.json")).expect("scored");
    assert!(results.contains("open_orca_shape"), "{results}");
    let config = std::fs::read_to_string(dir.join("config.yaml")).unwrap();
    assert!(config.contains("type: submission") && config.contains("scheduler_random_seed: 42"));
    let out = run([
        "check",
        &dir.display().to_string(),
        "--ruleset",
        "mlcommons-current",
        "--model",
        "llama2-70b",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  [PASS] temperature==0: model_params.temperature=0.0"), "{text}");
    assert!(text.contains("  [FAIL] single_stream: num_workers=4 max_connections=-1"), "{text}");
    assert!(
        text.contains("  [FAIL] scorer_output_present"),
        "ROUGE has no per-subset breakdown: {text}"
    );
}
