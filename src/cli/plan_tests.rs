//! Unit tests of plan resolution from flags: `benchmark` command lines parsed as `main` parses
//! them (`config_from_args`), resolved into plans. They live beside the flags, which the plan
//! does not import.

use std::path::PathBuf;

use loadgen_coordinator::cpu::{cores_available, default_worker_count};
use loadgen_coordinator::{LoadPattern, TokenCountSource};
use loadgen_worker::request::ApiType;

use super::{config_from_args, resolve_plan};
use crate::error::AppError;
use crate::plan::*;
use crate::yaml::{Config, Streaming};

fn asset(path: &str) -> String {
    format!("{}/tests/assets/{path}", env!("CARGO_MANIFEST_DIR"))
}

fn config_of(args: &[&str]) -> Result<Config, AppError> {
    config_from_args(args)
}

fn plan_of(args: &[&str]) -> Result<Plan, AppError> {
    resolve_plan(config_of(args)?, 0)
}

fn dummy() -> String {
    format!("{},parser.prompt=text_input", asset("datasets/dummy_1k.jsonl"))
}

#[test]
fn sample_count_follows_the_reference_rule() {
    // 600 s default on 1,000 rows: ceil(10 × 600 × 1.1) = 6,600 → 7,000.
    assert_eq!(samples_to_issue(None, 600_000, None, 1_000), 7_000);
    // Poisson 200 QPS × 5 s: 1,100 → 2,000.
    assert_eq!(samples_to_issue(None, 5_000, Some(200.0), 1_000), 2_000);
    assert_eq!(samples_to_issue(Some(123), 600_000, Some(5.0), 1_000), 123);
    assert_eq!(samples_to_issue(None, 0, None, 1_000), 1_000);
    assert_eq!(samples_to_issue(None, 1_000, None, 3), 12);
    let plan = plan_of(&["offline", "--dataset", &dummy()]).unwrap();
    assert_eq!(plan.num_samples, 7_000);
    let plan = plan_of(&["offline", "--dataset", &dummy(), "--duration", "0"]).unwrap();
    assert_eq!(plan.num_samples, 1_000);
}

/// The summary's "Run length" line names what sized the run, from which settings, and how
/// long it was meant to take; the count it explains is the plan's.
#[test]
fn the_run_length_line_says_what_sized_the_run() {
    let poisson = LoadPattern::Poisson { target_qps: 50.0, seed: 42 };
    // The issue's case: 50 QPS for 10 s on 1,000 rows issues 1,000, about 20 s.
    let counted = sample_count(None, 10_000, Some(50.0), 1_000);
    assert_eq!(counted.n, 1_000);
    let line = counted.describe(&poisson);
    for want in [
        "Run length: 1000 samples, from --duration 10 s (settings.runtime.min_duration_ms), which \
         sizes the count, not the time: 50 QPS (--target-qps) x 10 s x 1.1 = 550, rounded up \
         to whole passes of the 1000-row dataset (1 pass)",
        "at 50 QPS, meant to take about 20.0 s",
        "--num-samples N issues exactly N",
    ] {
        assert!(line.contains(want), "{want:?} not in {line}");
    }
    let line = sample_count(Some(500), 10_000, Some(50.0), 1_000).describe(&poisson);
    assert!(line.starts_with("Run length: 500 samples, from --num-samples"), "{line}");
    assert!(line.contains("meant to take about 10.0 s"), "{line}");
    let line = sample_count(None, 0, None, 1_000).describe(&LoadPattern::Offline);
    assert!(line.contains("the 1000-row dataset once (--duration 0)"), "{line}");
    assert!(line.contains("the server's speed sets the time"), "{line}");
    let plan = plan_of(&["offline", "--dataset", &dummy()]).unwrap();
    assert_eq!(plan.sample_count.n, plan.num_samples);
    let line = plan.sample_count.describe(&plan.load_pattern);
    assert!(line.contains("10 QPS (the sizing rate used when no --target-qps is set)"), "{line}");
    assert!(
        line.contains("rounded up to whole passes of the 1000-row dataset (7 passes)"),
        "{line}"
    );
}

#[test]
fn defaults_resolve_like_the_reference() {
    let plan = plan_of(&["offline"]).unwrap();
    assert_eq!(plan.load_pattern, LoadPattern::Offline);
    assert!(plan.endpoints.is_empty());
    assert_eq!(plan.request.model, EMBEDDED_MODEL);
    assert!(plan.dataset_is_synthetic);
    assert_eq!(plan.dataset.rows.len(), 1_000);
    assert!(!plan.request.streaming, "auto is off for offline");
    assert!(plan.request.stream_include_usage);
    assert_eq!(plan.request.max_output_tokens, 1024);
    assert_eq!(plan.drain_timeout_ms, 240_000);
    assert_eq!(plan.token_count_source, TokenCountSource::Client);
    assert_eq!((plan.scheduler_seed, plan.dataloader_seed), (42, 42));
    assert_eq!(plan.connections.workers, default_worker_count(cores_available().len(), true));
    assert_eq!(
        plan.connections.max_connections,
        plan.connections.workers * CONNECTIONS_PER_WORKER_DEFAULT
    );
    assert!(plan.connections.cpu_affinity && plan.early_stopping && !plan.warmup.enabled);
    assert!(plan.report_dir.display().to_string().starts_with("/tmp/reports_"));
    assert!(plan.report_dir_default);
    let online = plan_of(&["online", "--load-pattern", "poisson", "--target-qps", "50"]).unwrap();
    assert!(online.request.streaming, "auto is on for online");
    assert_eq!(online.load_pattern, LoadPattern::Poisson { target_qps: 50.0, seed: 42 });
    assert!(online.legacy_loadgen_qps);
}

#[test]
fn flags_and_aliases_reach_the_plan() {
    let plan = plan_of(&[
        "online",
        "--endpoint-config.endpoints",
        "http://127.0.0.1:9/,http://127.0.0.1:10",
        "--endpoints",
        "http://h:11",
        "--model-params.name",
        "m",
        "--load-pattern",
        "concurrency",
        "--target-concurrency",
        "300",
        "--client.num-workers",
        "2",
        "--api-type",
        "openai_completions",
        "--model-params.min-new-tokens",
        "4",
        "--streaming",
        "off",
        "--no-stream-include-usage",
        "--settings.token-count-source",
        "server",
        "--runtime.n-samples-to-issue",
        "99",
        "--runtime.max-duration-ms",
        "12s",
        "--performance-drain-timeout",
        "1.5",
        "--no-cpu-affinity",
        "--warmup",
        "--warmup-requests",
        "5",
        "--warmup-drain",
        "--no-early-stopping",
        "--report-dir",
        "/tmp/x",
        "--runtime.scheduler-random-seed",
        "7",
        "--runtime.dataloader-random-seed",
        "8",
        "--temperature",
        "0.5",
        "--top-p",
        "0.9",
        "--top-k",
        "-1",
        "--seed",
        "3",
        "--max-output-tokens",
        "64",
        "--client.warmup-connections",
        "0",
        "--client.worker-initialization-timeout",
        "5",
        "--mode",
        "perf",
        "--dataset",
        &dummy(),
        "--tokenizer",
        &asset("tokenizers/char"),
    ])
    .unwrap();
    let urls: Vec<&str> = plan.endpoints.iter().map(|e| e.url.as_str()).collect();
    assert_eq!(urls, ["http://127.0.0.1:9", "http://127.0.0.1:10", "http://h:11"]);
    assert_eq!(plan.request.model, "m");
    assert_eq!(plan.load_pattern, LoadPattern::Concurrency { n: 300 });
    assert_eq!((plan.connections.workers, plan.connections.max_connections), (2, 300));
    assert_eq!(plan.request.api, loadgen_worker::request::ApiType::OpenAiCompletions);
    assert_eq!(plan.request.min_output_tokens, Some(4));
    assert!(!plan.request.streaming && !plan.request.stream_include_usage);
    assert_eq!(plan.token_count_source, TokenCountSource::Server);
    assert_eq!((plan.num_samples, plan.max_duration_ms), (99, Some(12_000)));
    assert_eq!(plan.drain_timeout_ms, 1_500);
    assert!(!plan.connections.cpu_affinity && !plan.early_stopping);
    assert_eq!(
        plan.warmup,
        Warmup {
            enabled: true,
            samples: 5,
            requests: Some(5),
            drain: true,
            drain_timeout_ms: 240_000,
            random_seed: 42,
            salt: false,
        }
    );
    assert_eq!(plan.report_dir, PathBuf::from("/tmp/x"));
    assert_eq!((plan.scheduler_seed, plan.dataloader_seed), (7, 8));
    assert_eq!(
        (plan.request.temperature, plan.request.top_p, plan.request.top_k, plan.request.seed),
        (Some(0.5), Some(0.9), Some(-1), Some(3))
    );
    assert_eq!(plan.request.max_output_tokens, 64);
    assert_eq!(
        (plan.connections.warmup_connections, plan.connections.worker_init_timeout_ms),
        (Some(0), 5_000)
    );
    let summary = plan.summary();
    assert!(summary.contains("concurrency 300, 99 samples (max duration 12000 ms"), "{summary}");
    assert!(summary.contains("2 workers, 300 connections (warm-up connections 0"), "{summary}");
    assert_eq!(plan.tokenizer.as_ref().unwrap().count("abc").unwrap(), 3);
}

#[test]
fn contradictions_are_rejected_naming_the_values() {
    let cases: &[(&[&str], i32, &str)] = &[
        (&["online", "--load-pattern", "poisson"], 3, "poisson needs --target-qps"),
        (&["online", "--load-pattern", "concurrency"], 3, "concurrency needs --concurrency"),
        (&["online"], 3, "benchmark online needs --load-pattern"),
        (&["offline", "--concurrency", "8"], 3, "--concurrency 8 does not apply"),
        (&["offline", "--load-pattern", "poisson", "--target-qps", "1"], 3, "got poisson"),
        (
            &["online", "--load-pattern", "poisson", "--target-qps", "1", "--concurrency", "4"],
            3,
            "--concurrency 4",
        ),
        (&["online", "--load-pattern", "burst"], 3, "burst is not supported"),
        (
            &["offline", "--runtime.max-duration-ms", "1000", "--duration", "5s"],
            3,
            "1000 is below the minimum duration 5000",
        ),
        (&["offline", "--target-qps", "0"], 2, "above 0, got 0"),
        (&["offline", "--workers", "0"], 2, "--workers 0"),
        (&["offline", "--max-connections", "-2"], 2, "--max-connections -2"),
        (
            &["offline", "--endpoints", "localhost:8000", "--model", "m"],
            2,
            "must start with http://",
        ),
        (&["offline", "--endpoints", "ftp://h:1", "--model", "m"], 2, "must start with http://"),
        (&["offline", "--endpoints", "http://:1", "--model", "m"], 2, "no valid host"),
        (&["offline", "--endpoints", "http://h:1"], 1, "--model is required"),
        (&["offline", "--min-new-tokens", "5"], 3, "min_new_tokens 5 is only supported"),
        (
            &[
                "offline",
                "--streaming",
                "on",
                "--no-stream-include-usage",
                "--token-count-source",
                "server",
            ],
            3,
            "the endpoint would send no usage",
        ),
        (&["offline", "--tokenizer", "/nonexistent/tok"], 3, "/nonexistent/tok/tokenizer.json"),
        (
            &["offline", "--dataset", "/nonexistent.jsonl"],
            2,
            "dataset file not found: /nonexistent.jsonl",
        ),
        (
            &["offline", "--dataset", "a.jsonl", "--dataset", "b.jsonl"],
            2,
            "only one performance dataset",
        ),
        (&["offline", "--dataset", "acc:a.jsonl"], 2, "at least one performance dataset"),
        (&["offline", "--mode", "acc"], 2, "requires at least one accuracy dataset"),
        (&["offline", "--accuracy-only"], 2, "requires at least one accuracy dataset"),
        (&["offline", "--client.warmup-connections", "-3"], 2, "warmup-connections -3"),
    ];
    for (args, code, needle) in cases {
        let err = plan_of(args).unwrap_err();
        assert_eq!(err.exit_code(), *code, "{args:?}: {err}");
        assert!(err.to_string().contains(needle), "{args:?}: {err}");
    }
}

/// The reference's roofline suite command lines (anchor §8.1) resolve as it expects.
#[test]
fn reference_perf_suite_command_lines_resolve() {
    let common = ["--endpoints", "http://127.0.0.1:9", "--streaming", "on", "--model", "max-tp"];
    let with = |args: &[&str]| {
        let all: Vec<&str> = args.iter().chain(common.iter()).copied().collect();
        plan_of(&all).unwrap()
    };
    let burst = with(&["offline", "--load-pattern", "max_throughput", "--num-samples", "2000000"]);
    assert_eq!((burst.load_pattern, burst.num_samples), (LoadPattern::Offline, 2_000_000));
    let conc = with(&[
        "online",
        "--load-pattern",
        "concurrency",
        "--concurrency",
        "16000",
        "--duration",
        "10s",
        "--runtime.max-duration-ms",
        "12000",
        "--num-samples",
        "10000000",
    ]);
    assert_eq!(conc.load_pattern, LoadPattern::Concurrency { n: 16_000 });
    assert_eq!((conc.num_samples, conc.max_duration_ms), (10_000_000, Some(12_000)));
    assert!(conc.connections.max_connections >= 16_000);
    let low = with(&[
        "online",
        "--load-pattern",
        "poisson",
        "--target-qps",
        "5",
        "--duration",
        "20s",
        "--num-samples",
        "200",
        "--workers",
        "4",
        "--client.warmup-connections",
        "0",
    ]);
    assert_eq!(low.load_pattern, LoadPattern::Poisson { target_qps: 5.0, seed: 42 });
    assert_eq!(
        (low.num_samples, low.connections.workers, low.connections.warmup_connections),
        (200, 4, Some(0))
    );
    assert!(low.tokenizer.is_none(), "max-tp resolves to no tokenizer");
}

#[test]
fn opt_out_is_fine_unless_streaming_openai_under_server() {
    for args in [
        &[
            "offline",
            "--streaming",
            "off",
            "--no-stream-include-usage",
            "--token-count-source",
            "server",
        ][..],
        &["offline", "--streaming", "on", "--no-stream-include-usage"][..],
        &[
            "offline",
            "--streaming",
            "on",
            "--no-stream-include-usage",
            "--token-count-source",
            "server",
            "--api-type",
            "sglang",
        ][..],
    ] {
        plan_of(args).unwrap();
    }
    let video = plan_of(&["offline", "--api-type", "videogen"]).unwrap();
    assert_eq!((video.request.api, video.request.streaming), (ApiType::Videogen, false));
    for (flag, value) in [("--streaming", "on"), ("--temperature", "0.5")] {
        let err = plan_of(&["offline", "--api-type", "videogen", flag, value]).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        let key = flag.trim_start_matches("--");
        let want = format!("model_params.{key}");
        assert!(err.to_string().contains(&want), "{err}");
        assert!(err.to_string().contains("not supported with api_type videogen"), "{err}");
    }
}

#[test]
fn rows_with_n_above_one_are_rejected_only_under_server() {
    let dir = std::env::temp_dir().join(format!("llm-loadgen-plan-n-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("n.jsonl");
    std::fs::write(&path, "{\"prompt\": \"a\", \"n\": 1}\n{\"prompt\": \"b\", \"n\": 3}\n")
        .unwrap();
    let p = path.display().to_string();
    let client = plan_of(&["offline", "--dataset", &p]);
    let server = plan_of(&["offline", "--dataset", &p, "--token-count-source", "server"]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(client.unwrap().dataset.rows[1].n, Some(3));
    let err = server.unwrap_err();
    assert_eq!(err.exit_code(), 3);
    assert!(err.to_string().contains("row 1 asks for n = 3"), "{err}");
}

#[test]
fn config_yaml_is_the_resolved_config_with_secrets_redacted() {
    let plan = plan_of(&[
        "offline",
        "--endpoints",
        "http://user:pw@127.0.0.1:9",
        "--model",
        "test-model",
        "--header",
        "X-Api-Key: sk-secret",
        "--header",
        "X-Team: infra",
        "--dataset",
        &dummy(),
        "--streaming",
        "on",
        "--num-samples",
        "200",
        "--report-dir",
        "/tmp/obs",
        "--workers",
        "1",
    ])
    .unwrap();
    let yaml = &plan.config_yaml;
    assert!(!yaml.contains("sk-secret") && !yaml.contains(":pw@"), "{yaml}");
    assert_eq!(plan.endpoints[0].url, "http://127.0.0.1:9", "credentials leave the URL");
    let basic = plan.endpoints[0].basic_auth.as_ref().map(|s| s.0.as_str());
    assert_eq!(basic, Some("Basic dXNlcjpwdw=="), "base64 of user:pw");
    // Only a header named for a secret is one; the others are written as sent.
    assert!(yaml.contains("- 'X-Api-Key: <redacted>'"), "{yaml}");
    assert!(yaml.contains("- 'X-Team: infra'"), "{yaml}");
    let header = |n: &str, v: &str| (n.to_string(), v.to_string());
    assert_eq!(plan.headers, [header("X-Api-Key", "sk-secret"), header("X-Team", "infra")]);
    assert!(yaml.contains("http://<redacted>@127.0.0.1:9"), "{yaml}");
    for line in [
        "name: offline_benchmark",
        "type: offline",
        "  name: test-model",
        "  streaming: 'on'",
        "- name: dummy_1k",
        "    prompt: text_input",
        "    n_samples_to_issue: 200",
        "    type: max_throughput",
        "    num_workers: 1",
        "report_dir: /tmp/obs",
    ] {
        assert!(yaml.lines().any(|l| l == line), "missing {line:?} in:\n{yaml}");
    }
    // Keys the reference's schema lacks are left out at the reference's own behaviour, so
    // its checker reads this file.
    assert!(!yaml.contains("token_count_source") && !yaml.contains("stream_include_usage"));
    // The file reads back through the schema to the same plan inputs.
    let back = Config::from_yaml_str(yaml, "config.yaml").unwrap();
    assert_eq!(back.settings.runtime.n_samples_to_issue, Some(200));
    assert_eq!(back.model_params.streaming, Streaming::On);
}

/// Every key path of a YAML mapping, depth first, as `a.b.c` (sequence items as `a[]`).
fn key_paths(value: &serde_yaml_ng::Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        serde_yaml_ng::Value::Mapping(map) => {
            for (k, v) in map {
                let path = format!("{prefix}{}", k.as_str().unwrap());
                out.push(path.clone());
                key_paths(v, &format!("{path}."), out);
            }
        }
        serde_yaml_ng::Value::Sequence(items) => {
            for item in items.iter().take(1) {
                key_paths(item, &format!("{}[].", prefix.trim_end_matches('.')), out);
            }
        }
        _ => {}
    }
}

/// config.yaml keeps the reference's keys in the reference's order (anchor §2 and its
/// observed config.yaml), plus the two keys the token-basis change adds.
#[test]
fn config_yaml_keys_follow_the_reference_schema() {
    let plan = plan_of(&[
        "offline",
        "--dataset",
        &dummy(),
        "--model",
        "test-model",
        "--endpoints",
        "http://127.0.0.1:9",
        "--tokenizer",
        &asset("tokenizers/char"),
    ])
    .unwrap();
    let value: serde_yaml_ng::Value = serde_yaml_ng::from_str(&plan.config_yaml).unwrap();
    let mut paths = Vec::new();
    key_paths(&value, "", &mut paths);
    let client = "num_workers log_level warmup_connections auto_warmup_budget_fraction \
                  max_concurrent_warmup_connects max_connections transport";
    let transport = "type recv_buffer_size send_buffer_size io_threads worker_io_threads \
                     high_water_mark linger immediate";
    let client_tail = "stream_all_chunks worker_initialization_timeout \
                       worker_graceful_shutdown_wait worker_force_kill_timeout insecure \
                       max_idle_time min_required_connections worker_gc_mode";
    let mut want: Vec<String> = Vec::new();
    let mut add = |prefix: &str, keys: &str| {
        want.extend(keys.split_whitespace().map(|k| format!("{prefix}{k}")));
    };
    add("", "name version type model_params");
    add(
        "model_params.",
        "name max_new_tokens min_new_tokens skip_special_tokens streaming \
         tokenizer_name",
    );
    add("", "datasets");
    add("datasets[].", "name type path parser");
    add("datasets[].parser.", "prompt");
    add("", "settings settings.runtime");
    add(
        "settings.runtime.",
        "min_duration_ms max_duration_ms scheduler_random_seed \
         dataloader_random_seed",
    );
    add("settings.", "load_pattern");
    add("settings.load_pattern.", "type");
    add("settings.", "client");
    add("settings.client.", client);
    add("settings.client.transport.", transport);
    add("settings.client.", client_tail);
    add("settings.", "drain");
    add(
        "settings.drain.",
        "warmup_timeout_s performance_timeout_s metrics_drain_timeout_s \
         metrics_tokenizer_workers",
    );
    add("settings.", "warmup");
    add("settings.warmup.", "enabled salt drain warmup_random_seed");
    add("settings.", "profiling early_stopping settings.early_stopping.enabled");
    add("settings.", "service_ready_timeout_s");
    add("", "endpoint_config");
    add("endpoint_config.", "endpoints api_type");
    add("", "report_dir verbose enable_cpu_affinity");
    let want: Vec<String> =
        want.into_iter().map(|p| p.replace("settings.settings.", "settings.")).collect();
    assert_eq!(paths, want);
}

#[test]
fn the_timeout_flag_and_yaml_key_resolve_into_the_plan() {
    assert_eq!(plan_of(&["offline"]).unwrap().request_timeout_ns, 0, "none by default");
    let plan = plan_of(&["offline", "--timeout", "2.5"]).unwrap();
    assert_eq!(plan.request_timeout_ns, 2_500_000_000);
    let config = Config::from_yaml_str("type: offline\ntimeout: 0.25\n", "t.yaml").unwrap();
    assert_eq!(resolve_plan(config, 0).unwrap().request_timeout_ns, 250_000_000);
    let config = Config::from_yaml_str("type: offline\ntimeout: null\n", "t.yaml").unwrap();
    assert_eq!(resolve_plan(config, 0).unwrap().request_timeout_ns, 0);
    for bad in ["0", "-1", "NaN", "inf"] {
        let err = plan_of(&["offline", &format!("--timeout={bad}")]).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{bad}: {err}");
        assert!(err.to_string().contains("--timeout"), "{bad}: {err}");
    }
    let config = Config::from_yaml_str("type: offline\ntimeout: 0\n", "t.yaml").unwrap();
    let err = check_config(&config, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("--timeout 0 is not valid"), "{err}");
}

/// `--metrics-tokenizer-workers` and `--metrics-drain-timeout` (and their YAML keys) reach
/// the plan; config.yaml records the live thread count the CPU plan chose, so a rerun
/// from it counts the same way; bad values are refused, naming the setting.
#[test]
fn tokenizer_workers_and_drain_timeout_reach_the_plan() {
    let tok = asset("tokenizers/bpe2k");
    let plan = plan_of(&["offline", "--tokenizer", &tok]).unwrap();
    assert_eq!(plan.token_pool.workers, None, "not given");
    assert_eq!(plan.token_pool.drain_timeout_ms, 0, "the reference's default: no limit");
    let recorded = format!("metrics_tokenizer_workers: {}", plan.token_pool.live_threads);
    assert!(plan.config_yaml.contains(&recorded), "{}", plan.config_yaml);
    let args = ["offline", "--metrics-tokenizer-workers", "3", "--metrics-drain-timeout", "2.5"];
    let plan = plan_of(&args).unwrap();
    assert_eq!(plan.token_pool.workers, Some(3));
    assert_eq!(plan.token_pool.live_threads, 3, "an explicit count is honoured");
    assert_eq!(plan.token_pool.drain_timeout_ms, 2_500);
    assert!(plan.config_yaml.contains("metrics_tokenizer_workers: 3"), "{}", plan.config_yaml);
    let yaml = "type: offline\nsettings:\n  drain:\n    metrics_tokenizer_workers: 0\n    \
                metrics_drain_timeout_s: 7\n";
    let plan = resolve_plan(Config::from_yaml_str(yaml, "t.yaml").unwrap(), 0).unwrap();
    assert_eq!((plan.token_pool.workers, plan.token_pool.live_threads), (Some(0), 0));
    assert_eq!(plan.token_pool.drain_timeout_ms, 7_000);
    for (flag, value, named) in [
        ("--metrics-tokenizer-workers", "-1", "--metrics-tokenizer-workers -1"),
        ("--metrics-tokenizer-workers", "100000", "metrics_tokenizer_workers"),
        ("--metrics-drain-timeout", "-3", "--metrics-drain-timeout -3"),
    ] {
        let err = plan_of(&["offline", flag, value]).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        assert!(err.to_string().contains(named), "{err}");
    }
    let yaml = "type: offline\nsettings:\n  drain:\n    metrics_tokenizer_workers: -2\n";
    let err =
        check_config(&Config::from_yaml_str(yaml, "t.yaml").unwrap(), &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("settings.drain.metrics_tokenizer_workers"), "{err}");
}

#[test]
fn zero_samples_is_refused() {
    let err = plan_of(&["offline", "--dataset", &format!("{},samples=0", dummy())]).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(err.to_string().contains("samples 0"), "{err}");
    let err = plan_of(&["offline", "--num-samples", "0"]).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(err.to_string().contains("--num-samples 0"), "{err}");
    let yaml = format!(
        "type: offline\ndatasets:\n  - path: {}\n    samples: 0\n    parser: {{prompt: text_input}}\n",
        asset("datasets/dummy_1k.jsonl")
    );
    let config = Config::from_yaml_str(&yaml, "t.yaml").unwrap();
    let err = check_config(&config, &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("samples 0 (datasets[].samples"), "{err}");
    let ds = format!("{},samples=3", dummy());
    assert_eq!(plan_of(&["offline", "--dataset", &ds]).unwrap().dataset.rows.len(), 3);
}

#[test]
fn far_too_many_workers_are_refused() {
    let cores = cores_available().len();
    let limit = cores * WORKERS_PER_CORE_MAX;
    let too_many = (limit + 1).to_string();
    let err = plan_of(&["offline", "--workers", &too_many]).unwrap_err();
    assert_eq!(err.exit_code(), 3, "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&format!("--workers {too_many} is more than")), "{msg}");
    assert!(msg.contains("its own io_uring"), "{msg}");
    assert_eq!(check_worker_count(limit as u64, cores).unwrap(), limit);
    assert!(check_worker_count(1000, 2).unwrap_err().to_string().contains("at most 4"));
}

#[test]
fn source_addresses_resolve_into_the_plan_in_order() {
    let plan = plan_of(&["offline", "--source-addresses", "127.0.0.2, 127.0.0.3"]).unwrap();
    let want: Vec<std::net::IpAddr> =
        ["127.0.0.2", "127.0.0.3"].iter().map(|a| a.parse().unwrap()).collect();
    assert_eq!(plan.connections.source_addresses, want);
    let repeated =
        plan_of(&["offline", "--source-addresses", "127.0.0.2", "--source-addresses", "127.0.0.3"])
            .unwrap();
    assert_eq!(repeated.connections.source_addresses, want, "repeated flags add up");
    assert!(
        plan_of(&["offline"]).unwrap().connections.source_addresses.is_empty(),
        "none: the kernel's"
    );
    let v6 = ["--endpoints", "http://[::1]:8000", "--model", "m"];
    let plan = plan_of(&[&["offline", "--source-addresses", "[::1]"][..], &v6].concat());
    assert_eq!(
        plan.unwrap().connections.source_addresses,
        ["::1".parse::<std::net::IpAddr>().unwrap()]
    );
    let by_name = ["--endpoints", "http://localhost:8000", "--model", "m"];
    let plan = plan_of(&[&["offline", "--source-addresses", "::1"][..], &by_name].concat());
    assert!(plan.is_ok(), "a host name's family is checked once it is resolved");
}

#[test]
fn bad_source_addresses_are_refused_naming_them() {
    let cases: &[(&[&str], &str)] = &[
        (&["--source-addresses", "127.0.0.300"], "\"127.0.0.300\" is not an IP address"),
        (&["--source-addresses", "lo"], "\"lo\" is not an IP address"),
        (&["--source-addresses", "0.0.0.0"], "0.0.0.0 cannot be a connection's source"),
        (&["--source-addresses", "224.0.0.1"], "224.0.0.1 cannot be"),
        (&["--source-addresses", "127.0.0.2,127.0.0.2"], "lists 127.0.0.2 twice"),
        (&["--source-addresses", "127.0.0.2,::1"], "mixes IPv4 127.0.0.2 and IPv6 ::1"),
        (&["--source-addresses", "::1"], "::1 is IPv6 but the embedded stub"),
        (
            &["--source-addresses", "::1", "--endpoints", "http://127.0.0.1:9", "--model", "m"],
            "::1 is IPv6 but http://127.0.0.1:9 is not",
        ),
    ];
    for (args, want) in cases {
        let err = plan_of(&[&["offline"][..], args].concat()).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        assert!(err.to_string().contains(want), "{args:?}: {err}");
    }
}

#[test]
fn url_userinfo_becomes_basic_auth_percent_decoded_and_never_shown() {
    let ep = parse_endpoint("http://alice:p%40ss%3Aw@127.0.0.1:9/v1").unwrap();
    assert_eq!(ep.url, "http://127.0.0.1:9");
    // base64("alice:p@ss:w")
    assert_eq!(ep.basic_auth.as_ref().unwrap().0, "Basic YWxpY2U6cEBzczp3");
    assert_eq!(format!("{:?}", ep.basic_auth), "Some(<redacted>)");
    let err = plan_of(&[
        "offline",
        "--endpoints",
        "http://a:bbbb@127.0.0.1:9",
        "--model",
        "m",
        "--api-key",
        "kkkk",
    ])
    .unwrap_err();
    assert!(err.to_string().contains("Authorization is given twice"), "{err}");
    assert!(!err.to_string().contains("bbbb") && !err.to_string().contains("kkkk"), "{err}");
}

#[test]
fn an_api_key_with_a_control_byte_is_refused_without_quoting_it() {
    for key in ["sk-abc\u{7f}def", "sk-abc\r\nX-Evil: 1"] {
        let args =
            ["offline", "--endpoints", "http://127.0.0.1:9", "--model", "m", "--api-key", key];
        let err = plan_of(&args).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        let text = err.to_string();
        assert!(
            text.contains("--api-key (or OPENAI_API_KEY): byte 7 of the value is 0x"),
            "{text}"
        );
        assert!(!text.contains("sk-abc") && !text.contains("def"), "{text}");
    }
}

#[test]
fn headers_are_checked_and_an_authorization_header_is_the_runs_authorization() {
    let plan = plan_of(&[
        "offline",
        "--endpoints",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "-H",
        "X-A: 1",
        "--header",
        "Authorization: Token abc",
    ])
    .unwrap();
    assert_eq!(plan.headers, [("X-A".to_string(), "1".to_string())]);
    assert_eq!(plan.authorization.as_ref().map(|s| s.0.as_str()), Some("Token abc"));
    let key = plan_of(&[
        "offline",
        "--endpoints",
        "http://127.0.0.1:9",
        "--model",
        "m",
        "--api-key",
        "sk-1",
    ])
    .unwrap();
    assert_eq!(key.authorization.as_ref().map(|s| s.0.as_str()), Some("Bearer sk-1"));
    assert!(key.config_yaml.contains("api_key: <redacted>"), "{}", key.config_yaml);
    for (bad, want) in [
        ("no colon", "is not NAME: VALUE"),
        ("Bad Name: x", "is not a header name"),
        ("Content-Length: 5", "the requests set Content-Length themselves"),
        ("host: x", "the requests set host themselves"),
        ("Expect: 100-continue", "never wait for a 100 Continue"),
        ("X-Key: a\u{1b}b", "--header X-Key: byte 2 of the value is 0x1B"),
    ] {
        let err = plan_of(&[
            "offline",
            "--endpoints",
            "http://127.0.0.1:9",
            "--model",
            "m",
            "--header",
            bad,
        ])
        .unwrap_err();
        assert_eq!(err.exit_code(), 2, "{bad}");
        assert!(err.to_string().contains(want), "{bad}: {err}");
    }
}

/// `--chat-template` reaches the plan's tokenizer; without a tokenizer it is refused
/// (exit 3), never ignored; a bad file is exit 3 naming it.
#[test]
fn chat_template_flag_reaches_the_plan_tokenizer() {
    let jinja = asset("tokenizers/char_jinja/chat_template.jinja");
    let tok = asset("tokenizers/char_chat");
    let args = ["offline", "--tokenizer", &tok, "--chat-template", &jinja];
    let plan = plan_of(&args).unwrap();
    let tokenizer = plan.tokenizer.unwrap();
    assert_eq!(tokenizer.chat_template_source(), Some(std::path::Path::new(&jinja)));
    assert_eq!(tokenizer.chat_template_overhead_tokens(), Some(23));
    let err = plan_of(&["offline", "--chat-template", &jinja]).unwrap_err();
    assert_eq!(err.exit_code(), 3);
    assert!(err.to_string().contains("--chat-template") && err.to_string().contains(&jinja));
    let missing = asset("tokenizers/no-such.jinja");
    let err = plan_of(&["offline", "--tokenizer", &tok, "--chat-template", &missing]);
    let err = err.unwrap_err();
    assert_eq!(err.exit_code(), 3);
    assert!(err.to_string().contains(&missing), "{err}");
    // A YAML key of that name is refused, not dropped: the reference has none.
    let yaml = "type: offline\nchat_template: x.jinja\n";
    let err = Config::from_yaml_str(yaml, "test.yaml").unwrap_err();
    assert!(err.to_string().contains("chat_template"), "{err}");
}

#[test]
fn config_yaml_names_the_report_dir_a_run_took_instead_of_the_taken_default() {
    let plan = plan_of(&["offline"]).unwrap();
    let taken = PathBuf::from(format!("{}_2", plan.report_dir.display()));
    let yaml = config_yaml_with_report_dir(&plan.config_yaml, &plan.report_dir, &taken);
    assert!(yaml.contains(&format!("\nreport_dir: {}\n", taken.display())), "{yaml}");
    assert_eq!(
        yaml.replace(&format!("{}", taken.display()), "X"),
        plan.config_yaml.replace(&format!("{}", plan.report_dir.display()), "X"),
        "nothing else changes"
    );
    let given = plan_of(&["offline", "--report-dir", "/tmp/x"]).unwrap();
    assert!(!given.report_dir_default);
}

/// Off the reference's own behaviour (client basis, usage asked for), the two keys its schema
/// lacks are recorded in config.yaml.
#[test]
fn a_server_basis_and_usage_off_are_recorded_in_config_yaml() {
    let args = ["offline", "--token-count-source", "server", "--no-stream-include-usage"];
    let yaml = plan_of(&args).unwrap().config_yaml;
    assert!(yaml.contains("\n  token_count_source: server\n"), "{yaml}");
    assert!(yaml.contains("\n    stream_include_usage: false\n"), "{yaml}");
}
