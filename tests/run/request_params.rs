//! The request bytes the server receives for each request parameter (YAML keys and flags), per
//! API, captured by the in-process echo stub; and the refusals of keys an API cannot carry.

use std::path::PathBuf;

use crate::support::{bin, report_dir, run, stub};
use loadgen_stubs::{BodyLog, StubKind};
use serde_json::{json, Value};

/// A scratch folder with one JSONL dataset; `rows` are written one per line.
fn dataset_file(name: &str, rows: &[Value]) -> PathBuf {
    let dir = crate::support::tmp_dir().join(format!("reqparams-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rows.jsonl");
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

fn prompts(n: usize) -> Vec<Value> {
    (0..n).map(|i| json!({"prompt": format!("prompt number {i}")})).collect()
}

/// Runs an offline benchmark of every row once against a recording echo stub; returns the
/// exit code and the bodies the stub received, parsed.
fn capture(name: &str, rows: &[Value], extra: &[&str]) -> (Option<i32>, Vec<Value>) {
    capture_with(name, rows, &["benchmark", "offline"], extra)
}

/// `capture` with the command words given (`benchmark from-config -c FILE` for YAML).
fn capture_with(
    name: &str,
    rows: &[Value],
    command: &[&str],
    extra: &[&str],
) -> (Option<i32>, Vec<Value>) {
    let log = BodyLog::default();
    let server = stub(StubKind::Echo, |c| c.body_log = Some(log.clone()));
    let data = dataset_file(name, rows);
    let dir = report_dir(&format!("reqparams-{name}"));
    let url = server.url();
    let samples = rows.len().to_string();
    let mut args = command.to_vec();
    args.extend([
        "--endpoints",
        &url,
        "--model",
        "test-model",
        "--workers",
        "1",
        "--max-connections",
        "2",
        "--num-samples",
        &samples,
    ]);
    let data = data.display().to_string();
    let dir = dir.display().to_string();
    args.extend(["--dataset", &data, "--report-dir", &dir]);
    args.extend(extra);
    let out = run(&args);
    drop(server);
    let bodies = log.lock().unwrap().iter().map(|b| serde_json::from_slice(b).unwrap()).collect();
    (out.status.code(), bodies)
}

fn yaml_file(name: &str, text: &str) -> String {
    let dir = crate::support::tmp_dir().join(format!("reqparams-yaml-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("config.yaml");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn chat_requests_carry_the_yaml_penalties_kwargs_ignore_eos_extra_body_and_row_n() {
    let config = yaml_file(
        "chat",
        "type: offline\nmodel_params:\n  repetition_penalty: 1.1\n  presence_penalty: 0.2\n  \
         frequency_penalty: 0.3\n  chat_template_kwargs: {enable_thinking: false}\n  \
         ignore_eos: true\n  extra_body: {logprobs: true, top_logprobs: 2}\n",
    );
    let rows = [json!({"prompt": "a", "n": 3}), json!({"prompt": "b"})];
    let command = ["benchmark", "from-config", "-c", &config];
    let (code, bodies) = capture_with("chat", &rows, &command, &[]);
    assert_eq!(code, Some(0));
    assert_eq!(bodies.len(), 2);
    for b in &bodies {
        assert_eq!(b["repetition_penalty"], json!(1.1));
        assert_eq!(b["presence_penalty"], json!(0.2));
        assert_eq!(b["frequency_penalty"], json!(0.3));
        assert_eq!(b["chat_template_kwargs"], json!({"enable_thinking": false}));
        assert_eq!(b["ignore_eos"], json!(true));
        assert_eq!((&b["logprobs"], &b["top_logprobs"]), (&json!(true), &json!(2)));
    }
    let n_of =
        |p: &str| bodies.iter().find(|b| b["messages"][0]["content"] == p).unwrap()["n"].clone();
    assert_eq!(n_of("a"), json!(3), "the row's n column is sent");
    assert_eq!(n_of("b"), Value::Null, "a row without n sends none");
}

#[test]
fn completions_requests_carry_the_flag_spellings_of_each_parameter() {
    let (code, bodies) = capture(
        "completions",
        &prompts(3),
        &[
            "--api-type",
            "openai_completions",
            "--model-params.repetition-penalty",
            "1.05",
            "--model-params.presence-penalty",
            "-0.5",
            "--model-params.frequency-penalty",
            "0.25",
            "--model-params.no-skip-special-tokens",
            "--min-new-tokens",
            "2",
            "--ignore-eos",
            "--extra-body",
            r#"{"temperature": 0.7, "logprobs": 1}"#,
            "--temperature",
            "0.1",
        ],
    );
    assert_eq!(code, Some(0));
    assert_eq!(bodies.len(), 3);
    for b in &bodies {
        assert_eq!(b["repetition_penalty"], json!(1.05));
        assert_eq!(b["presence_penalty"], json!(-0.5));
        assert_eq!(b["frequency_penalty"], json!(0.25));
        assert_eq!(b["skip_special_tokens"], json!(false));
        assert_eq!(b["min_tokens"], json!(2));
        assert_eq!(b["ignore_eos"], json!(true));
        assert_eq!(b["temperature"], json!(0.7), "the extra body's key wins over the flag");
        assert_eq!(b["logprobs"], json!(1));
        assert!(b.get("chat_template_kwargs").is_none());
    }
}

#[test]
fn sglang_requests_carry_penalties_in_sampling_params_and_uniform_drawn_lengths() {
    let (code, bodies) = capture(
        "sglang",
        &prompts(40),
        &[
            "--api-type",
            "sglang",
            "--model-params.repetition-penalty",
            "1.2",
            "--model-params.osl-distribution.type",
            "uniform",
            "--min-output-tokens",
            "10",
            "--model-params.osl-distribution.max",
            "20",
        ],
    );
    assert_eq!(code, Some(0));
    assert_eq!(bodies.len(), 40);
    let lengths: Vec<u64> =
        bodies.iter().map(|b| b["sampling_params"]["max_new_tokens"].as_u64().unwrap()).collect();
    assert!(lengths.iter().all(|l| (10..=20).contains(l)), "{lengths:?}");
    let distinct: std::collections::BTreeSet<_> = lengths.iter().collect();
    assert!(distinct.len() > 3, "per-row draws differ: {lengths:?}");
    for b in &bodies {
        assert_eq!(b["sampling_params"]["repetition_penalty"], json!(1.2));
        assert!(b.get("repetition_penalty").is_none(), "not at the top level");
    }
}

#[test]
fn fixed_osl_distribution_sends_the_mean_as_every_rows_max_tokens() {
    let args = ["--osl-distribution.type", "fixed", "--model-params.osl-distribution.mean", "33"];
    let (code, bodies) = capture("fixed", &prompts(4), &args);
    assert_eq!(code, Some(0));
    assert!(bodies.iter().all(|b| b["max_completion_tokens"] == json!(33)), "{bodies:?}");
}

#[test]
fn unset_parameters_are_absent_from_the_bytes_sent() {
    let (code, bodies) = capture("unset", &prompts(2), &[]);
    assert_eq!(code, Some(0));
    for b in &bodies {
        let keys: Vec<&String> = b.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["max_completion_tokens", "messages", "model"], "{b}");
    }
}

#[test]
fn a_rows_request_columns_reach_the_body_where_its_api_carries_them() {
    let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {}}}]);
    let row = json!({
        "prompt": "hello", "name": "Bob", "stop": ["END"], "user": "u-7",
        "logit_bias": {"50256": -100}, "tools": tools, "tool_choice": "auto",
        "chat_template": "{{ messages[0].content }}", "ground_truth": "not sent"
    });
    let (code, bodies) = capture("rowcols-chat", std::slice::from_ref(&row), &[]);
    assert_eq!(code, Some(0));
    let b = &bodies[0];
    assert_eq!(b["messages"], json!([{"role": "user", "content": "hello", "name": "Bob"}]));
    assert_eq!((&b["stop"], &b["user"]), (&json!(["END"]), &json!("u-7")));
    assert_eq!(b["logit_bias"], json!({"50256": -100}));
    assert_eq!((&b["tools"], &b["tool_choice"]), (&tools, &json!("auto")));
    assert_eq!(b["chat_template"], json!("{{ messages[0].content }}"));
    assert!(b.get("ground_truth").is_none() && b.get("name").is_none(), "{b}");
    let args = ["--api-type", "openai_completions"];
    let (code, bodies) = capture("rowcols-completions", &[row], &args);
    assert_eq!(code, Some(0));
    let keys: Vec<&String> = bodies[0].as_object().unwrap().keys().collect();
    assert!(keys.contains(&&"stop".to_string()), "{keys:?}");
    for absent in ["tools", "tool_choice", "user", "logit_bias", "chat_template", "name"] {
        assert!(!keys.contains(&&absent.to_string()), "{absent} in {keys:?}");
    }
}

#[test]
fn a_datasets_generation_config_override_reaches_its_requests_deep_merged() {
    let data = dataset_file("override", &prompts(3));
    let config = yaml_file(
        "override",
        &format!(
            "type: offline\nmodel_params:\n  temperature: 0.9\n  osl_distribution: {{type: \
             uniform, min: 5, max: 9}}\ndatasets:\n  - path: {}\n    \
             generation_config_override:\n      temperature: 0.3\n      osl_distribution: \
             {{type: fixed, mean: 7}}\n",
            data.display()
        ),
    );
    let log = BodyLog::default();
    let server = stub(StubKind::Echo, |c| c.body_log = Some(log.clone()));
    let (url, dir) = (server.url(), report_dir("reqparams-override").display().to_string());
    let out = run([
        "benchmark",
        "from-config",
        "-c",
        &config,
        "--endpoints",
        &url,
        "--model",
        "m",
        "--num-samples",
        "3",
        "--report-dir",
        &dir,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    drop(server);
    let bodies: Vec<Value> =
        log.lock().unwrap().iter().map(|b| serde_json::from_slice(b).unwrap()).collect();
    assert_eq!(bodies.len(), 3);
    for b in &bodies {
        // fixed from the override, within min/max kept from model_params by the deep merge.
        assert_eq!((&b["temperature"], &b["max_completion_tokens"]), (&json!(0.3), &json!(7)));
    }
}

/// The request heads an echo stub received from a 2-sample run with `extra` flags and `env`.
fn heads(
    name: &str,
    url_of: impl Fn(&str) -> String,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Vec<String> {
    let log = BodyLog::default();
    let server = stub(StubKind::Echo, |c| c.head_log = Some(log.clone()));
    let url = url_of(&server.url());
    let dir = report_dir(&format!("reqparams-{name}")).display().to_string();
    let mut args = vec![
        "benchmark",
        "offline",
        "--endpoints",
        &url,
        "--model",
        "m",
        "--num-samples",
        "2",
        "--workers",
        "1",
        "--report-dir",
        &dir,
    ];
    args.extend(extra);
    let mut cmd = bin();
    cmd.args(&args).env_remove("OPENAI_API_KEY");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    drop(server);
    let heads =
        log.lock().unwrap().iter().map(|h| String::from_utf8_lossy(h).into_owned()).collect();
    heads
}

#[test]
fn headers_keys_and_url_credentials_reach_the_wire() {
    let plain = |u: &str| u.to_string();
    let h = heads("hdr-flags", plain, &["-H", "X-Team: infra", "--header", "X-Run: 7"], &[]);
    assert_eq!(h.len(), 2);
    assert!(h.iter().all(|h| h.contains("\r\nX-Team: infra\r\nX-Run: 7\r\n")), "{h:?}");
    assert!(h.iter().all(|h| !h.contains("Authorization")), "none without a key: {h:?}");
    let h = heads("hdr-env", plain, &[], &[("OPENAI_API_KEY", "sk-from-env")]);
    assert!(h[0].contains("\r\nAuthorization: Bearer sk-from-env\r\n"), "{h:?}");
    let h =
        heads("hdr-flag-key", plain, &["--api-key", "sk-flag"], &[("OPENAI_API_KEY", "sk-env")]);
    assert!(h[0].contains("Bearer sk-flag\r\n"), "the flag wins over the environment: {h:?}");
    // user:p@ss → Basic base64("user:p@ss"); a trailing /v1 is the API's own.
    let creds = |u: &str| format!("{}/v1", u.replacen("http://", "http://user:p%40ss@", 1));
    let h = heads("hdr-basic", creds, &[], &[]);
    assert!(h[0].starts_with("POST /v1/chat/completions HTTP/1.1\r\n"), "{h:?}");
    assert!(h[0].contains("\r\nAuthorization: Basic dXNlcjpwQHNz\r\n"), "{h:?}");
}

/// Runs a benchmark the plan refuses before any request (the endpoint is never reached);
/// returns the exit code and stderr. A leading `-c FILE` runs `from-config`.
fn refused(extra: &[&str]) -> (Option<i32>, String) {
    let mode = if extra.first() == Some(&"-c") { "from-config" } else { "offline" };
    let mut args = vec!["benchmark", mode];
    args.extend(extra);
    args.extend(["--endpoints", "http://127.0.0.1:9", "--model", "m"]);
    let out = bin().args(&args).output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn chat_template_kwargs_are_refused_for_apis_without_a_chat_template() {
    let config = yaml_file(
        "kwargs-sglang",
        "type: offline\nmodel_params:\n  chat_template_kwargs: {a: 1}\n",
    );
    let (code, err) = refused(&["-c", &config, "--api-type", "sglang"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("chat_template_kwargs") && err.contains("sglang"), "{err}");
}

#[test]
fn extra_body_that_is_not_a_json_object_is_refused_naming_the_value() {
    for bad in ["{nope", "[1, 2]", r#"{"model": "x"}"#] {
        let (code, err) = refused(&["--extra-body", bad]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(err.contains(bad) || err.contains("\"model\""), "{bad}: {err}");
    }
}

#[test]
fn osl_distribution_without_its_required_mean_is_refused_naming_the_key() {
    let (code, err) = refused(&["--osl-distribution.type", "normal"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("osl_distribution.mean"), "{err}");
}
