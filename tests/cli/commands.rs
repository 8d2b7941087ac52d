//! CLI-level tests of the `llm-loadgen` binary: usage and validation errors (message and
//! exit code), `init` / `validate-yaml` round trips, `from-config` overrides, `info`.
//! Every case here fails before a benchmark would start, so no endpoint is needed.

use crate::support::{assets, bin, run, Scratch};

fn asset(path: &str) -> String {
    assets().join(path).display().to_string()
}

/// Runs and checks the exit code and that stderr names the problem, never a panic.
fn expect_error(args: &[&str], code: i32, needle: &str) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}\nstderr: {stderr}");
    assert!(stderr.contains(needle), "{args:?}: {needle:?} not in stderr: {stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{stderr}");
}

#[test]
fn usage_errors_exit_1_with_clap_message() {
    expect_error(&["benchmark", "offline", "--bogus"], 1, "unexpected argument '--bogus'");
    expect_error(&["benchmark"], 1, "Usage:");
    expect_error(
        &["benchmark", "offline", "--streaming", "sometimes"],
        1,
        "invalid value 'sometimes'",
    );
    expect_error(&["benchmark", "offline", "--duration", "ten"], 1, "is not a duration");
    expect_error(&["benchmark", "offline", "--api-type", "grpc"], 1, "invalid value 'grpc'");
    expect_error(&["benchmark", "offline", "--endpoints", "http://h:1"], 1, "--model is required");
    expect_error(&["nosuchcommand"], 1, "unrecognized subcommand");
}

#[test]
fn help_and_version_exit_0() {
    let out = run(["--version"]);
    assert_eq!(out.status.code(), Some(0));
    // The version, then the commit (tests/cli/newcomer.rs checks which).
    let version = String::from_utf8_lossy(&out.stdout);
    let want = format!("llm-loadgen {} (commit ", env!("CARGO_PKG_VERSION"));
    assert!(version.starts_with(&want), "{version}");
    let out = run(["benchmark", "online", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--client.num-workers",
        "--settings.token-count-source",
        "--no-stream-include-usage",
        "--runtime.max-duration-ms",
    ] {
        assert!(help.contains(flag), "{flag} not in help");
    }
}

#[test]
fn contradictory_settings_exit_3_naming_the_values() {
    expect_error(
        &["benchmark", "online", "--load-pattern", "poisson"],
        3,
        "poisson needs --target-qps",
    );
    expect_error(&["benchmark", "online"], 3, "benchmark online needs --load-pattern");
    expect_error(
        &["benchmark", "offline", "--concurrency", "16"],
        3,
        "--concurrency 16 does not apply",
    );
    expect_error(
        &["benchmark", "offline", "--duration", "10m", "--runtime.max-duration-ms", "60s"],
        3,
        "60000 is below the minimum duration 600000",
    );
    expect_error(
        &[
            "benchmark",
            "offline",
            "--streaming",
            "on",
            "--no-stream-include-usage",
            "--token-count-source",
            "server",
        ],
        3,
        "--no-stream-include-usage",
    );
    expect_error(
        &[
            "benchmark",
            "offline",
            "--endpoints",
            "https://127.0.0.1:1",
            "--model",
            "m",
            "--ca-bundle",
            "/nonexistent/ca.pem",
        ],
        3,
        "/nonexistent/ca.pem",
    );
}

#[test]
fn bad_input_exits_2() {
    let dummy = asset("datasets/dummy_1k.jsonl");
    expect_error(
        &["benchmark", "offline", "--dataset", "/no/such.jsonl"],
        2,
        "dataset file not found: /no/such.jsonl",
    );
    let out = run(["benchmark", "offline", "--dataset", &dummy]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no prompt column") && stderr.contains("text_input"), "{stderr}");
    expect_error(
        &["benchmark", "offline", "--dataset", &format!("{dummy},parser.prompt=question")],
        2,
        "column \"question\" (parser.prompt) not found",
    );
    expect_error(
        &["benchmark", "offline", "--dataset", &format!("{dummy},parser.prompt:text_input")],
        2,
        "write parser.prompt=text_input",
    );
    expect_error(
        &["benchmark", "offline", "--endpoints", "localhost:8000", "--model", "m"],
        2,
        "must start with http://",
    );
    expect_error(
        &["benchmark", "from-config", "-c", "/no/such.yaml"],
        2,
        "cannot read config /no/such.yaml",
    );
    expect_error(&["init", "eval"], 2, "unknown template \"eval\"");
}

#[test]
fn unreadable_tokenizer_exits_3_naming_what_was_tried() {
    expect_error(
        &["benchmark", "offline", "--tokenizer", "/no/such/tok"],
        3,
        "/no/such/tok/tokenizer.json",
    );
    let tmp = Scratch::new("badtok");
    std::fs::write(tmp.join("tokenizer.json"), "{").unwrap();
    expect_error(
        &["benchmark", "offline", "--tokenizer", &tmp.display().to_string()],
        3,
        "cannot load tokenizer",
    );
}

#[test]
fn init_and_validate_yaml_round_trip() {
    let tmp = Scratch::new("init");
    for name in ["offline", "online", "concurrency"] {
        let out = bin().args(["init", name]).current_dir(&tmp).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        let file = tmp.join(format!("{name}_template.yaml"));
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.contains("# "), "templates are commented");
        let out = run(["validate-yaml", "-c", &file.display().to_string()]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains("valid"), "{stdout}");
    }
}

#[test]
fn validate_yaml_rejects_unknown_keys_and_contradictions() {
    let tmp = Scratch::new("validate");
    let unknown = tmp.join("unknown.yaml");
    std::fs::write(&unknown, "type: offline\nsettings:\n  runtime:\n    min_duration: 5\n")
        .unwrap();
    expect_error(
        &["validate-yaml", "-c", &unknown.display().to_string()],
        2,
        "unknown field `min_duration`",
    );
    let poisson = tmp.join("poisson.yaml");
    std::fs::write(&poisson, "type: online\nsettings:\n  load_pattern:\n    type: poisson\n")
        .unwrap();
    expect_error(
        &["validate-yaml", "-c", &poisson.display().to_string()],
        3,
        "poisson needs --target-qps",
    );
}

#[test]
fn from_config_flags_override_the_yaml() {
    let tmp = Scratch::new("fromcfg");
    let file = tmp.join("c.yaml");
    let yaml = "type: online\nsettings:\n  load_pattern:\n    type: poisson\n    target_qps: 5\n";
    std::fs::write(&file, yaml).unwrap();
    let path = file.display().to_string();
    // The flag replaces poisson by concurrency, which then lacks its count.
    expect_error(
        &["benchmark", "from-config", "-c", &path, "--load-pattern", "concurrency"],
        3,
        "concurrency needs --concurrency",
    );
    expect_error(
        &["benchmark", "from-config", "-c", &path, "--dataset", "/no/such.jsonl"],
        2,
        "dataset file not found",
    );
}

#[test]
fn info_reports_cpus_io_uring_and_limits() {
    let out = run(["info"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(&format!("llm-loadgen:          {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    for key in ["cpus online:", "affinity mask:", "io_uring:", "rlimit memlock:", "rlimit nofile:"]
    {
        assert!(text.contains(key), "{key} not in:\n{text}");
    }
    let uring = text.lines().find(|l| l.starts_with("io_uring:")).unwrap();
    assert!(uring.contains("available") || uring.contains("refused"), "{uring}");
}

/// A Hugging Face id resolves through the local cache only (`HF_HUB_CACHE`), for
/// `--tokenizer` and, without it, for `--model`. The run is stopped after the plan by a
/// duration contradiction, so the exit code says the tokenizer step passed.
#[test]
fn hf_ids_resolve_through_the_local_cache() {
    let tmp = Scratch::new("hub");
    let repo = tmp.join("models--org--tiny");
    let snap = repo.join("snapshots/0123abcd");
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "0123abcd").unwrap();
    std::fs::copy(asset("tokenizers/char/tokenizer.json"), snap.join("tokenizer.json")).unwrap();
    let stop = ["--runtime.max-duration-ms", "1", "--duration", "5s", "-v"];
    for id_flag in [["--tokenizer", "org/tiny"], ["--model", "org/tiny"]] {
        let out = bin()
            .args(["benchmark", "offline"])
            .args(id_flag)
            .args(stop)
            .env("HF_HUB_CACHE", &tmp)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{stderr}");
        assert!(stderr.contains("is below the minimum duration"), "{stderr}");
        let line = format!("tokenizer: {}", snap.join("tokenizer.json").display());
        assert!(stderr.contains(&line), "{id_flag:?}: {stderr}");
    }
    let out = bin()
        .args(["benchmark", "offline", "--tokenizer", "org/other"])
        .env("HF_HUB_CACHE", &tmp)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("models--org--other"), "{stderr}");
}

#[test]
fn limits_and_bad_datasets_exit_with_their_codes_through_the_binary() {
    let dir = Scratch::new("limits");
    let bad = dir.join("latin1.jsonl");
    std::fs::write(&bad, b"{\"prompt\": \"ok\"}\n{\"prompt\": \"caf\xe9\"}\n").unwrap();
    let bad = bad.display().to_string();
    expect_error(&["benchmark", "offline", "--dataset", &bad], 2, "line 2: not UTF-8");
    expect_error(&["benchmark", "offline", "--workers", "100000"], 3, "--workers 100000 is more");
    expect_error(&["benchmark", "offline", "--timeout", "0"], 2, "--timeout 0 is not valid");
    expect_error(&["benchmark", "offline", "--num-samples", "0"], 2, "--num-samples 0");
    let help =
        String::from_utf8_lossy(&run(["benchmark", "offline", "--help"]).stdout).into_owned();
    assert!(help.contains("--timeout <TIMEOUT>"), "the per-request timeout is shown");
}
