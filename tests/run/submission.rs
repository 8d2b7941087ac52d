//! `type: submission` end to end against the stubs, then `llm-loadgen check` on its report
//! directory: a single-stream edge submission passes every gate, one that breaks the config
//! lock fails it; and the TEST04 output-caching audit after a run, which passes against an
//! honest stub and fails against one that answers a repeated prompt from its cache.

use std::path::Path;

use loadgen_stubs::{PrefixCacheConfig, StubKind};

use crate::support::{assets, report_dir, run, stub, summary, tmp_dir};

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
