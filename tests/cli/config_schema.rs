//! The reference's YAML schema through the binary, on the project's own fixtures
//! (`tests/assets/configs/`, one per group of keys): `validate-yaml` gives the reference's
//! verdict, the files whose features exist run on the null endpoint, and each key a run here
//! cannot do yet is refused naming its path.

use std::path::PathBuf;
use std::process::Output;

use crate::support::{assets, bin, report_dir, show, stderr, summary};

/// Fixtures a run here does, with the samples each issues.
const RUNNABLE: [(&str, u64); 9] = [
    ("submission.yaml", 20),
    ("agentic_run.yaml", 11),
    ("generation_override.yaml", 10),
    ("top_level.yaml", 50),
    ("settings_full.yaml", 40),
    ("parser_targets.yaml", 3),
    ("parser_alias.yaml", 10),
    ("env_vars.yaml", 10),
    ("completions_controls.yaml", 10),
];

/// Fixtures the reference accepts whose features a run here refuses, with the key paths the
/// refusal (the first) and the notes of `validate-yaml` (all) name.
const REFUSED: [(&str, &[&str]); 3] = [
    // cnn_dailymail::llama3_8b and its no-op `parser: {input: prompt}` now run (issue 15).
    ("datasets_accuracy.yaml", &["datasets[1].eval_method"]),
    ("agentic.yaml", &["datasets[0].agentic_inference.stop_issuing_on_first_user_complete"]),
    ("eval.yaml", &["type: eval", "datasets[0].eval_method"]),
];

fn configs() -> PathBuf {
    assets().join("configs")
}

/// Runs the binary in the fixtures' folder (their dataset paths are relative to it).
fn in_configs(args: &[&str]) -> Output {
    let out = bin()
        .args(args)
        .current_dir(configs())
        .env("SCHEMA_TEST_ENDPOINT", "null://")
        .output()
        .expect("the binary runs");
    show(&out);
    out
}

#[test]
fn every_fixture_is_valid_as_the_reference_judges_it() {
    let mut names: Vec<String> = std::fs::read_dir(configs())
        .expect("tests/assets/configs exists")
        .map(|e| e.expect("a directory entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    names.sort();
    let listed: Vec<&str> =
        RUNNABLE.iter().map(|r| r.0).chain(REFUSED.iter().map(|r| r.0)).collect();
    for name in &names {
        assert!(listed.contains(&name.as_str()), "{name} is neither RUNNABLE nor REFUSED");
        let out = in_configs(&["validate-yaml", "-c", name]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("{name}: valid")));
    }
    assert_eq!(names.len(), listed.len(), "every listed fixture exists: {names:?}");
}

#[test]
fn fixtures_whose_features_exist_run_on_the_null_endpoint() {
    for (name, samples) in RUNNABLE {
        let dir = report_dir(&format!("schema-{name}"));
        let dir_arg = dir.display().to_string();
        let out = in_configs(&["benchmark", "from-config", "-c", name, "--report-dir", &dir_arg]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        let s = summary(&dir);
        let issued = s["n_samples_issued"].as_u64();
        if name == "agentic_run.yaml" {
            // The turns issued after the tracking window closed are untracked: the total
            // counts every turn (docs/CLI.md, Agentic runs).
            assert_eq!(crate::run::agentic_window::total_issued(&dir), samples, "{name}");
            assert!(issued.is_some_and(|n| n > 0 && n <= samples), "{name}: {issued:?}");
        } else {
            assert_eq!(issued, Some(samples), "{name}");
        }
        assert_eq!(s["n_samples_completed"].as_u64(), issued, "{name}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn null_drain_timeouts_are_kept_as_null_and_the_run_completes() {
    let dir = report_dir("schema-null-drain");
    let dir_arg = dir.display().to_string();
    let out = in_configs(&[
        "benchmark",
        "from-config",
        "-c",
        "settings_full.yaml",
        "--report-dir",
        &dir_arg,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let written = std::fs::read_to_string(dir.join("config.yaml")).expect("config.yaml");
    assert!(written.contains("warmup_timeout_s: null"), "{written}");
    assert!(written.contains("performance_timeout_s: null"), "{written}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn each_key_a_run_cannot_do_is_refused_naming_its_path() {
    for (name, paths) in REFUSED {
        let out = in_configs(&["validate-yaml", "-c", name]);
        let notes = stderr(&out);
        for path in paths {
            assert!(notes.contains(path), "{name}: no note for {path}: {notes}");
        }
        let dir = report_dir(&format!("schema-refused-{name}"));
        let dir_arg = dir.display().to_string();
        let out = in_configs(&["benchmark", "from-config", "-c", name, "--report-dir", &dir_arg]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(paths[0]) && err.contains("is not supported yet"), "{name}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!dir.join("performance").exists(), "{name}: a refused run wrote a report");
    }
}

/// Writes `text` as a YAML file under the target dir and validates it.
fn validate_text(name: &str, text: &str) -> Output {
    let dir = crate::support::tmp_dir().join("schema-texts");
    std::fs::create_dir_all(&dir).expect("the temp dir");
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, text).expect("the file is written");
    let out = bin().args(["validate-yaml", "-c"]).arg(&path).output().expect("runs");
    show(&out);
    out
}

#[test]
fn a_yaml_type_error_never_quotes_a_secret_or_a_whole_file() {
    let head = "type: offline\nmodel_params: {name: m}\nendpoint_config:\n";
    let cases = [
        ("headers-string", "  headers: 'Authorization: Bearer sk-yaml-98765'\n", "headers"),
        ("api-key-digits", "  api_key: 987654321098765432109876543210\n", "api_key"),
    ];
    for (name, tail, key) in cases {
        let out = validate_text(name, &format!("{head}{tail}"));
        let path = crate::support::tmp_dir().join(format!("schema-texts/{name}.yaml"));
        let run = bin().args(["benchmark", "from-config", "-c"]).arg(&path).output().unwrap();
        for out in [&out, &run] {
            let err = stderr(out);
            assert_eq!(out.status.code(), Some(2), "{name}: {err}");
            assert!(err.contains(&format!("endpoint_config.{key}")), "{name}: {err}");
            assert!(err.contains("not shown: the key holds a secret"), "{name}: {err}");
            assert!(!err.contains("sk-yaml-98765") && !err.contains("98765432109"), "{err}");
        }
    }
    // A config.yaml that links to a file that is no YAML is quoted as a short excerpt.
    let dir = report_dir("schema-link");
    std::fs::create_dir_all(&dir).unwrap();
    let lines: Vec<String> = (0..200).map(|i| format!("user{i}:x:{i}:{i}::/home/u{i}")).collect();
    std::fs::write(dir.join("passwd"), lines.join("\n")).unwrap();
    std::os::unix::fs::symlink(dir.join("passwd"), dir.join("config.yaml")).unwrap();
    let out = bin().args(["validate-yaml", "-c"]).arg(dir.join("config.yaml")).output().unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("\"user0:x:0:0::/home/u0"), "the start is quoted: {err}");
    assert!(!err.contains("user9:") && err.len() < 400, "not the whole file: {err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn type_errors_name_the_key_path_and_the_value() {
    let cases = [
        (
            "streaming",
            "type: offline\nmodel_params:\n  streaming: 5\n",
            "model_params.streaming: 5 is a number, not a name",
        ),
        (
            "drain",
            "type: offline\nsettings:\n  drain:\n    performance_timeout_s: soon\n",
            "settings.drain.performance_timeout_s: \"soon\" is not a number",
        ),
        (
            "drain-zero",
            "type: offline\nsettings:\n  drain:\n    performance_timeout_s: 0\n",
            "settings.drain.performance_timeout_s (--performance-drain-timeout) 0 is not valid",
        ),
        (
            "duration",
            "type: offline\nsettings:\n  runtime:\n    min_duration_ms: 10 parsecs\n",
            "settings.runtime.min_duration_ms: \"10 parsecs\" is not a duration",
        ),
        (
            "parser",
            "type: offline\ndatasets:\n  - path: a.jsonl\n    parser:\n      prompt: [1]\n",
            "datasets[0].parser",
        ),
        (
            "eval_method",
            "type: offline\ndatasets:\n  - path: a.jsonl\n    eval_method: guess\n",
            "datasets[0].eval_method: unknown variant `guess`",
        ),
        (
            "agentic",
            "type: online\ndatasets:\n  - path: a.jsonl\n    agentic_inference:\n      turns: 3\n",
            "datasets[0].agentic_inference: unknown field `turns`",
        ),
        (
            "pattern",
            "type: online\nsettings:\n  load_pattern:\n    type: sideways\n",
            "settings.load_pattern.type: unknown variant `sideways`",
        ),
    ];
    for (name, text, needle) in cases {
        let out = validate_text(name, text);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{name}: {err}");
        assert!(err.contains(needle), "{name}: want {needle:?}: {err}");
        assert!(!err.contains("untagged enum"), "{name}: {err}");
    }
}

#[test]
fn the_reference_cross_field_rules_are_errors() {
    let cases = [
        ("no-mode", "type: submission\nmodel_params: {name: m}\n", "must specify benchmark_mode"),
        (
            "agentic-no-dataset",
            "type: online\nmodel_params: {name: m}\nsettings:\n  load_pattern:\n    type: \
             agentic_inference\n",
            "agentic_inference needs a performance dataset",
        ),
        (
            "agentic-wrong-pattern",
            "type: online\nmodel_params: {name: m}\ndatasets:\n  - path: a.jsonl\n    \
             agentic_inference: {}\nsettings:\n  load_pattern: {type: concurrency, \
             target_concurrency: 2}\n",
            "needs settings.load_pattern.type agentic_inference, got concurrency",
        ),
        (
            "duplicate",
            "type: offline\nmodel_params: {name: m}\ndatasets:\n  - path: x/a.jsonl\n  - path: \
             y/a.jsonl\n",
            "two datasets are named \"a\"",
        ),
        (
            "override-per-run",
            "type: offline\nmodel_params: {name: m}\ndatasets:\n  - path: a.jsonl\n    \
             generation_config_override: {streaming: on}\n",
            "datasets[0].generation_config_override.streaming is per run",
        ),
        (
            "scorer",
            "type: offline\nmodel_params: {name: m}\ndatasets:\n  - path: a.jsonl\n    type: \
             accuracy\n    accuracy_config: {eval_method: vibes}\n",
            "datasets[0].accuracy_config.eval_method \"vibes\" is not valid",
        ),
        (
            "accuracy-key",
            "type: offline\nmodel_params: {name: m}\ndatasets:\n  - path: a.jsonl\n    type: \
             accuracy\n    accuracy_config: {repeats: 2}\n",
            "datasets[0].accuracy_config.repeats 2 is not valid; give one of the keys",
        ),
        (
            "turn-timeout",
            "type: online\nmodel_params: {name: m}\ndatasets:\n  - path: a.jsonl\n    \
             agentic_inference: {turn_timeout_s: 0}\nsettings:\n  load_pattern: {type: \
             agentic_inference, target_concurrency: 2}\n",
            "datasets[0].agentic_inference: turn_timeout_s 0",
        ),
        (
            "override-value",
            "type: offline\nmodel_params: {name: m}\ndatasets:\n  - path: a.jsonl\n    \
             generation_config_override: {min_new_tokens: 4}\n",
            "min_new_tokens",
        ),
        (
            "override-unknown",
            "type: offline\nmodel_params: {name: m}\ndatasets:\n  - path: a.jsonl\n    \
             generation_config_override: {colour: red}\n",
            "datasets[0].generation_config_override.colour is not a model_params key",
        ),
    ];
    for (name, text, needle) in cases {
        let out = validate_text(name, text);
        let err = stderr(&out);
        assert_ne!(out.status.code(), Some(0), "{name}: {err}");
        assert!(err.contains(needle), "{name}: want {needle:?}: {err}");
    }
}

#[test]
fn a_videogen_file_is_valid_and_its_text_generation_keys_are_named() {
    let text =
        "type: offline\nmodel_params: {name: wan22}\nendpoint_config:\n  api_type: videogen\n";
    let out = validate_text("videogen", text);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("not supported"), "{}", stderr(&out));
    let text = "type: offline\nmodel_params: {name: wan22, top_p: 0.9}\nendpoint_config:\n  \
                api_type: videogen\n";
    let out = validate_text("videogen-top-p", text);
    assert!(stderr(&out).contains("model_params.top_p is not supported with api_type videogen"));
}

/// A file the reference runs, with values its pydantic schema coerces (lax mode: `"0.5"` for a
/// float, `8.0` and `"10"` for an int, `yes` for a bool), validates and runs here with those
/// values; an unquoted `streaming: on`, a YAML 1.1 boolean the reference refuses, is refused.
#[test]
fn values_the_reference_coerces_are_taken_and_used() {
    let text = "type: offline\nmodel_params:\n  name: m\n  max_new_tokens: 8.0\n  temperature: \
                \"0.5\"\n  streaming: 'off'\ndatasets:\n  - path: ../datasets/dummy_1k.jsonl\n    \
                samples: \"10\"\n    parser: {prompt: text_input}\nsettings:\n  runtime:\n    \
                min_duration_ms: 0\n    n_samples_to_issue: \"10\"\n  early_stopping:\n    \
                enabled: yes\nendpoint_config:\n  endpoints: [\"null://\"]\n";
    let out = validate_text("lax", text);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let path = crate::support::tmp_dir().join("schema-texts").join("lax.yaml");
    let dir = report_dir("schema-lax");
    let dir_arg = dir.display().to_string();
    let path_arg = path.display().to_string();
    let out = in_configs(&["benchmark", "from-config", "-c", &path_arg, "--report-dir", &dir_arg]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(summary(&dir)["n_samples_issued"].as_u64(), Some(10));
    let written = std::fs::read_to_string(dir.join("config.yaml")).expect("config.yaml");
    assert!(written.contains("max_new_tokens: 8\n"), "{written}");
    assert!(written.contains("temperature: 0.5\n"), "{written}");
    let _ = std::fs::remove_dir_all(&dir);

    let refused = text.replace("streaming: 'off'", "streaming: off");
    let out = validate_text("lax-streaming", &refused);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("model_params.streaming: false is a boolean, not a name"), "{err}");
    assert!(err.contains("quote it"), "{err}");
}
