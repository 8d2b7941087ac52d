//! Property tests (proptest, stable Rust) of the two parsers that read user files: dataset
//! rows (JSONL, CSV, JSON) and the YAML configuration. A committed corpus under
//! `tests/assets/corpus/` is replayed by `the_corpus_replays`; failures found by proptest
//! are kept in `proptest-regressions/`.

use std::path::{Path, PathBuf};

use proptest::prelude::*;

use crate::dataset::{load_dataset_spec, DatasetSpec};
use crate::error::AppError;
use crate::yaml::Config;

/// A scratch folder removed on drop, one per test thread.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "llm-loadgen-prop-{}-{tag}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Loads `bytes` as a dataset file named `name` (its extension picks the format).
fn load_bytes(
    scratch: &Scratch,
    name: &str,
    bytes: &[u8],
) -> Result<Vec<Option<String>>, AppError> {
    let path = scratch.0.join(name);
    std::fs::write(&path, bytes).unwrap();
    let spec = DatasetSpec { path: path.display().to_string(), ..DatasetSpec::default() };
    load_dataset_spec(&spec).map(|ds| ds.rows.into_iter().map(|r| r.prompt).collect())
}

/// What every failure to load a dataset must be: bad input (exit 2) naming the file.
fn check_dataset_error(err: &AppError, name: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(err.exit_code(), 2, "{}", err);
    prop_assert!(err.to_string().contains(name), "{} does not name the file", err);
    Ok(())
}

/// Prompt text: any characters (quotes, commas, newlines, BOMs, NUL), sometimes long.
fn prompt() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => any::<String>(),
        2 => "[a-z\",\r\n\u{feff}]{0,40}",
        1 => (1usize..200_000).prop_map(|n| "z".repeat(n)),
    ]
}

fn jsonl(prompts: &[String]) -> String {
    prompts.iter().map(|p| format!("{}\n", serde_json::json!({ "prompt": p }))).collect()
}

fn csv(prompts: &[String]) -> String {
    let mut out = String::from("prompt\n");
    for p in prompts {
        out.push_str(&format!("\"{}\"\n", p.replace('"', "\"\"")));
    }
    out
}

fn with_bom(bom: bool, text: String) -> Vec<u8> {
    let mut out = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
    out.extend_from_slice(text.as_bytes());
    out
}

proptest! {
    #[test]
    fn valid_rows_round_trip_their_prompts(
        prompts in prop::collection::vec(prompt(), 1..8),
        bom in any::<bool>(),
    ) {
        let scratch = Scratch::new("round");
        let want: Vec<Option<String>> = prompts.iter().cloned().map(Some).collect();
        let json = serde_json::to_string(
            &prompts.iter().map(|p| serde_json::json!({ "prompt": p })).collect::<Vec<_>>(),
        ).unwrap();
        for (name, bytes) in [
            ("r.jsonl", with_bom(bom, jsonl(&prompts))),
            ("r.csv", with_bom(bom, csv(&prompts))),
            ("r.json", with_bom(bom, json.clone())),
        ] {
            let got = load_bytes(&scratch, name, &bytes);
            prop_assert_eq!(got.as_ref().ok(), Some(&want), "{}: {:?}", name, got.as_ref().err());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_fail_as_bad_input(
        bytes in prop::collection::vec(any::<u8>(), 0..2048),
        ext in prop::sample::select(vec!["jsonl", "csv", "json"]),
    ) {
        let scratch = Scratch::new("bytes");
        let name = format!("b.{ext}");
        if let Err(err) = load_bytes(&scratch, &name, &bytes) {
            check_dataset_error(&err, &name)?;
        }
    }

    #[test]
    fn mutated_rows_never_panic_and_fail_as_bad_input(
        prompts in prop::collection::vec(prompt(), 1..4),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        ext in prop::sample::select(vec!["jsonl", "csv"]),
    ) {
        let scratch = Scratch::new("mutate");
        let mut bytes = if ext == "csv" { csv(&prompts) } else { jsonl(&prompts) }.into_bytes();
        for (at, byte) in edits {
            let i = at.index(bytes.len() + 1);
            bytes.insert(i, byte);
        }
        let name = format!("m.{ext}");
        if let Err(err) = load_bytes(&scratch, &name, &bytes) {
            check_dataset_error(&err, &name)?;
        }
    }

    #[test]
    fn arbitrary_yaml_never_panics_and_fails_as_bad_input(text in any::<String>()) {
        check_yaml(&text)?;
    }

    #[test]
    fn mutated_configs_fail_naming_a_key_or_value(
        path in prop::sample::select(KEY_PATHS.to_vec()),
        value in prop_oneof![
            "[a-z]{1,8}".prop_map(|s| format!("zz{s}")),
            Just("[1, 2]".to_string()),
            Just("{a: 1}".to_string()),
            (-5i64..0).prop_map(|n| n.to_string()),
        ],
        unknown in "[a-z]{3,10}",
    ) {
        // A wrong value under a known key.
        let text = yaml_with(path, &value);
        if let Err(err) = Config::from_yaml_str(&text, "m.yaml") {
            let msg = err.to_string();
            let leaf = path.rsplit('.').next().unwrap_or(path);
            prop_assert!(
                msg.contains(leaf) || msg.contains(value.trim_matches(['[', ']', '{', '}'])),
                "{} does not name {} or {}", msg, path, value
            );
        }
        check_yaml(&text)?;
        // An unknown key anywhere is named.
        let parent = path.rsplit_once('.').map_or("", |(p, _)| p);
        let key = format!("zz_{unknown}");
        let text = if parent.is_empty() {
            format!("{BASE_YAML}{key}: 1\n")
        } else {
            yaml_with(&format!("{parent}.{key}"), "1")
        };
        let msg = Config::from_yaml_str(&text, "m.yaml").unwrap_err().to_string();
        prop_assert!(msg.contains(&key), "{} does not name {}", msg, key);
    }
}

/// A valid document every mutation starts from.
const BASE_YAML: &str = "type: offline\n";

/// Key paths of the schema that take a scalar.
const KEY_PATHS: [&str; 12] = [
    "name",
    "timeout",
    "verbose",
    "model_params.max_new_tokens",
    "model_params.temperature",
    "model_params.streaming",
    "settings.runtime.min_duration_ms",
    "settings.runtime.n_samples_to_issue",
    "settings.client.num_workers",
    "settings.load_pattern.type",
    "settings.drain.performance_timeout_s",
    "endpoint_config.api_type",
];

/// `BASE_YAML` with `path` (dotted) set to the YAML text `value`.
fn yaml_with(path: &str, value: &str) -> String {
    let mut out = BASE_YAML.to_string();
    let parts: Vec<&str> = path.split('.').collect();
    for (depth, part) in parts.iter().enumerate() {
        let indent = "  ".repeat(depth);
        if depth + 1 == parts.len() {
            out.push_str(&format!("{indent}{part}: {value}\n"));
        } else {
            out.push_str(&format!("{indent}{part}:\n"));
        }
    }
    out
}

/// What loading any YAML text must do: parse, or fail as bad input saying where; and a
/// parsed config must pass or fail the plan's checks without a panic.
fn check_yaml(text: &str) -> Result<(), TestCaseError> {
    match Config::from_yaml_str(text, "p.yaml") {
        Ok(config) => {
            if let Err(err) = crate::plan::check_config(&config, &mut Vec::new()) {
                prop_assert!(matches!(err.exit_code(), 1..=3), "{}", err);
            }
        }
        Err(err) => {
            prop_assert_eq!(err.exit_code(), 2, "{}", err);
            prop_assert!(err.to_string().contains("p.yaml"), "{}", err);
        }
    }
    Ok(())
}

fn corpus(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/assets/corpus").join(kind);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    files
}

#[test]
fn the_corpus_replays() {
    let datasets = corpus("dataset");
    assert!(!datasets.is_empty());
    for path in datasets {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let spec = DatasetSpec { path: path.display().to_string(), ..DatasetSpec::default() };
        match load_dataset_spec(&spec) {
            Ok(ds) => assert!(name.starts_with("ok_"), "{name} loads ({} rows)", ds.rows.len()),
            Err(err) => {
                assert!(name.starts_with("bad_"), "{name}: {err}");
                assert_eq!(err.exit_code(), 2, "{name}: {err}");
                assert!(err.to_string().contains(&name), "{name}: {err}");
            }
        }
    }
    let configs = corpus("yaml");
    assert!(!configs.is_empty());
    for path in configs {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        check_yaml(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let parsed = Config::from_yaml_str(&text, &name);
        assert_eq!(parsed.is_ok(), name.starts_with("ok_"), "{name}: {:?}", parsed.err());
    }
}
