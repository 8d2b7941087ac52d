//! Datasets: `--dataset PATH[,key=value…]` parsing, file loading (JSONL, JSON, CSV, Parquet,
//! Hugging Face Arrow folders), the reference's column mapping, the reference's predefined
//! datasets (`random` generated here, the others read from local caches), and the built-in
//! synthetic dataset.

pub mod agentic;
mod arrow_folder;
mod column_names;
mod columnar;
mod csv_file;
mod file;
#[cfg(test)]
mod format_tests;
mod ipc_framing;
mod json_file;
mod mapping;
mod open;
mod parquet_file;
mod predefined;
mod random_prompts;
mod spec;
mod videogen;

use serde_json::Value;

use crate::error::AppError;

use file::load_file_dataset;
pub use mapping::string_bytes;
pub use open::utf8_text;
pub use spec::*;
pub use videogen::load_videogen_dataset;

/// Loads a dataset from its command-line form `PATH[,parser.prompt=COL,…]`.
#[allow(dead_code, reason = "library-style entry point; the plan loads through DatasetSpec")]
pub fn load_dataset(spec: &str) -> Result<Dataset, AppError> {
    load_dataset_spec(&DatasetSpec::parse(spec)?)
}

pub use predefined::predefined_refusals;

/// Loads a dataset entry: reads the file, applies the column mapping, builds the rows.
/// `random` without `generate_params.tokenizer` fails here (no run tokenizer); the plan loads
/// through `load_dataset_spec_with`, which also gives the notes this drops.
pub fn load_dataset_spec(spec: &DatasetSpec) -> Result<Dataset, AppError> {
    load_dataset_spec_with(spec, None, &mut Vec::new())
}

/// `load_dataset_spec`, with the run's tokenizer (`--tokenizer`, else the model name) for the
/// `random` dataset when its `generate_params` name none; what loading has to say (a
/// predefined dataset's ignored `parser`) goes into `notes`.
pub fn load_dataset_spec_with(
    spec: &DatasetSpec,
    run_tokenizer: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<Dataset, AppError> {
    if predefined::predefined_name(spec).is_some() {
        return predefined::load_predefined(spec, run_tokenizer, notes);
    }
    load_file_dataset(spec)
}

/// The conversations of an agentic dataset file (`datasets[].agentic_inference`), read and
/// checked as the reference reads and checks them.
pub fn load_agentic_conversations(
    spec: &DatasetSpec,
) -> Result<agentic::AgenticConversations, AppError> {
    agentic::build_conversations(&file::read_agentic_records(spec)?, &spec.path)
}

/// The recorded assistant turns of an agentic dataset (the `agentic_inference_inline`
/// scorer's ground truth).
pub fn agentic_expected_turns(
    spec: &DatasetSpec,
) -> Result<Vec<loadgen_accuracy::agentic_inline::ExpectedTurn>, AppError> {
    Ok(agentic::expected_turns(&file::read_agentic_records(spec)?))
}

/// True when `spec` names one of the reference's predefined datasets (no file of its own).
pub fn is_predefined(spec: &DatasetSpec) -> bool {
    predefined::predefined_name(spec).is_some()
}

/// One column of a dataset file (an accuracy dataset's ground truth), a value per row up to
/// `samples=`; `None` where a row lacks it. A `parser:` target named `column` reads its source.
/// An accuracy dataset's rows and its `column` (`load_dataset_spec` and `read_column`), a
/// predefined dataset's from one read of its cache; its notes go into `notes`.
pub fn load_dataset_and_column(
    spec: &DatasetSpec,
    column: &str,
    notes: &mut Vec<String>,
) -> Result<(Dataset, Vec<Option<Value>>), AppError> {
    if is_predefined(spec) {
        return predefined::load_predefined_with_column(spec, column, notes);
    }
    Ok((load_file_dataset(spec)?, read_column(spec, column)?))
}

/// A predefined dataset's column comes from its processed table, as the reference's scorer
/// reads it (`predefined::predefined_column`).
pub fn read_column(spec: &DatasetSpec, column: &str) -> Result<Vec<Option<Value>>, AppError> {
    if is_predefined(spec) {
        return predefined::predefined_column(spec, column);
    }
    let limit = spec.samples.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let source = spec.parser.as_ref().and_then(|p| p.other.get(column)).map_or(column, |s| s);
    let records = file::read_records_keeping(spec, limit, Some(&[source].into()))?;
    Ok(records.into_iter().map(|mut r| r.remove(source)).collect())
}

const SYNTHETIC_TEMPLATES: [&str; 10] = [
    "Write a short story about",
    "Explain the basics of",
    "Analyze the importance of",
    "Summarize recent progress in",
    "Describe a practical use of",
    "List three open problems in",
    "Compare two approaches to",
    "Give a beginner's guide to",
    "Discuss the main risks of",
    "Outline a lesson plan on",
];

const SYNTHETIC_TOPICS: [&str; 10] = [
    "machine learning",
    "renewable energy",
    "ocean currents",
    "quantum computing",
    "urban gardening",
    "ancient history",
    "space exploration",
    "public health",
    "data privacy",
    "music theory",
];

/// The prompt of synthetic row `i`: one of 10 templates × 10 topics, tagged with the case.
pub fn synthetic_prompt(i: usize) -> String {
    let template = SYNTHETIC_TEMPLATES[i % SYNTHETIC_TEMPLATES.len()];
    let topic = SYNTHETIC_TOPICS[(i / SYNTHETIC_TEMPLATES.len()) % SYNTHETIC_TOPICS.len()];
    format!("{template} {topic} (case {i})")
}

/// The built-in dataset used when no `--dataset` is given: 1,000 deterministic prompts,
/// the same ones as `tests/assets/datasets/dummy_1k.jsonl`.
pub fn synthetic_dataset() -> Dataset {
    let rows = (0..SYNTHETIC_ROW_COUNT)
        .map(|i| Row { prompt: Some(synthetic_prompt(i)), ..Row::default() })
        .collect();
    Dataset { name: "synthetic".to_string(), rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn asset(path: &str) -> String {
        format!("{}/../tests/assets/{path}", env!("CARGO_MANIFEST_DIR"))
    }

    fn temp_file(name: &str, text: &str) -> (tempdir::Dir, String) {
        let dir = tempdir::Dir::new(name);
        let path = dir.path.join(name);
        std::fs::File::create(&path).unwrap().write_all(text.as_bytes()).unwrap();
        let p = path.display().to_string();
        (dir, p)
    }

    /// A scratch folder removed on drop (no extra dependency for two tests).
    mod tempdir {
        pub struct Dir {
            pub path: std::path::PathBuf,
        }
        impl Dir {
            pub fn new(tag: &str) -> Dir {
                let path = std::env::temp_dir().join(format!(
                    "llm-loadgen-dataset-{}-{tag}-{:?}",
                    std::process::id(),
                    std::thread::current().id()
                ));
                std::fs::create_dir_all(&path).unwrap();
                Dir { path }
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.path);
            }
        }
    }

    #[test]
    fn dummy_1k_asset_holds_the_synthetic_prompts() {
        let spec = format!("{},parser.prompt=text_input", asset("datasets/dummy_1k.jsonl"));
        let ds = load_dataset(&spec).unwrap();
        assert_eq!(ds.name, "dummy_1k");
        assert_eq!(ds.rows, synthetic_dataset().rows);
        let lens: Vec<usize> = ds.rows.iter().map(|r| r.prompt.as_ref().unwrap().len()).collect();
        assert_eq!(*lens.iter().min().unwrap(), 44);
        assert_eq!(*lens.iter().max().unwrap(), 57);
    }

    #[test]
    fn missing_prompt_column_names_the_columns_the_file_has() {
        let err = load_dataset(&asset("datasets/dummy_1k.jsonl")).unwrap_err();
        let AppError::Input(msg) = &err else { panic!("{err:?}") };
        assert!(msg.contains("no prompt column"), "{msg}");
        assert!(msg.contains("text_input") && msg.contains("ref_output"), "{msg}");
        assert!(msg.contains("parser.prompt=COL"), "{msg}");
        let err = load_dataset(&format!("{},parser.prompt=nope", asset("datasets/dummy_1k.jsonl")))
            .unwrap_err();
        let AppError::Input(msg) = &err else { panic!("{err:?}") };
        assert!(msg.contains("column \"nope\" (parser.prompt) not found"), "{msg}");
        assert!(msg.contains("the file has columns: ") && msg.contains("text_input"), "{msg}");
    }

    #[test]
    fn prompt_aliases_map_and_conflict() {
        let (_d, p) =
            temp_file("q.jsonl", "{\"question\": \"why?\", \"system_prompt\": \"be brief\"}\n");
        let ds = load_dataset(&p).unwrap();
        assert_eq!(ds.rows[0].prompt.as_deref(), Some("why?"));
        assert_eq!(ds.rows[0].system.as_deref(), Some("be brief"));
        let (_d2, p2) = temp_file("two.jsonl", "{\"question\": \"a\", \"query\": \"b\"}\n");
        let err = load_dataset(&p2).unwrap_err();
        assert!(err.to_string().contains("question, query"), "{err}");
        // An explicit mapping settles the conflict.
        let ds = load_dataset(&format!("{p2},parser.prompt=query")).unwrap();
        assert_eq!(ds.rows[0].prompt.as_deref(), Some("b"));
    }

    #[test]
    fn json_csv_messages_token_ids_and_n() {
        let (_d, p) = temp_file("a.json", r#"[{"prompt": "hi", "n": 2}, {"prompt": [1, 2, 3]}]"#);
        let ds = load_dataset(&p).unwrap();
        assert_eq!(ds.rows[0].n, Some(2));
        assert_eq!(ds.rows[1].token_ids, Some(vec![1, 2, 3]));
        let (_d, p) = temp_file("c.csv", "id,text\n1,\"hello, \"\"world\"\"\"\n2,plain\n");
        let ds = load_dataset(&format!("{p},parser.prompt=text")).unwrap();
        assert_eq!(ds.rows[0].prompt.as_deref(), Some("hello, \"world\""));
        assert_eq!(ds.rows[1].prompt.as_deref(), Some("plain"));
        let (_d, p) =
            temp_file("m.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n");
        let ds = load_dataset(&p).unwrap();
        assert!(ds.rows[0].messages.is_some());
        let (_d, p) =
            temp_file("s.jsonl", "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n{\"prompt\": \"c\"}\n");
        assert_eq!(load_dataset(&format!("{p},samples=2")).unwrap().rows.len(), 2);
    }

    fn temp_bytes(name: &str, bytes: &[u8]) -> (tempdir::Dir, String) {
        let dir = tempdir::Dir::new(name);
        let path = dir.path.join(name);
        std::fs::write(&path, bytes).unwrap();
        let p = path.display().to_string();
        (dir, p)
    }

    #[test]
    fn a_non_utf8_dataset_is_bad_input_with_its_line() {
        let cases: [(&str, &[u8], &str); 3] = [
            ("bad.jsonl", b"{\"prompt\": \"a\"}\n\n{\"prompt\": \"b\xff\"}\n", "line 3"),
            ("bad.csv", b"prompt\nok\nfine\nbad\xfe\n", "line 4"),
            ("bad.json", b"[{\"prompt\": \"a\"},\n {\"prompt\": \"\xc3\"}]", "line 2"),
        ];
        for (name, bytes, line) in cases {
            let (_d, p) = temp_bytes(name, bytes);
            let err = load_dataset(&p).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{name}: {err}");
            let msg = err.to_string();
            assert!(msg.contains(&p) && msg.contains(line), "{name}: {msg}");
            assert!(msg.contains("not UTF-8"), "{name}: {msg}");
        }
    }

    #[test]
    fn a_bom_is_accepted() {
        let cases: [(&str, &[u8]); 3] = [
            ("bom.jsonl", b"\xEF\xBB\xBF{\"prompt\": \"hi\"}\n{\"prompt\": \"yo\"}\n"),
            ("bom.csv", b"\xEF\xBB\xBFprompt\nhi\nyo\n"),
            ("bom.json", b"\xEF\xBB\xBF[{\"prompt\": \"hi\"}, {\"prompt\": \"yo\"}]"),
        ];
        for (name, bytes) in cases {
            let (_d, p) = temp_bytes(name, bytes);
            let ds = load_dataset(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            let prompts: Vec<_> = ds.rows.iter().map(|r| r.prompt.clone().unwrap()).collect();
            assert_eq!(prompts, ["hi", "yo"], "{name}");
        }
    }

    #[test]
    fn an_oversized_prompt_is_refused_with_its_row() {
        let big = "x".repeat(PROMPT_BYTES_MAX + 1);
        let text = format!("{{\"prompt\": \"a\"}}\n{{\"prompt\": \"{big}\"}}\n");
        let (_d, p) = temp_file("big.jsonl", &text);
        let err = load_dataset(&p).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("{p} row 1: the prompt is {} bytes", big.len())), "{msg}");
        assert!(msg.contains(&PROMPT_BYTES_MAX.to_string()), "{msg}");
        // A line past the line bound is refused without being held, with its size.
        let huge = "y".repeat(LINE_BYTES_MAX + 10);
        let text = format!("{{\"prompt\": \"a\"}}\n{{\"prompt\": \"{huge}\"}}\n");
        let (_d, p) = temp_file("huge.jsonl", &text);
        let msg = load_dataset(&p).unwrap_err().to_string();
        let line_bytes = huge.len() + "{\"prompt\": \"\"}\n".len();
        assert!(msg.contains(&format!("row 1 (line 2) is {line_bytes} bytes")), "{msg}");
        let (_d, p) = temp_file("sys.csv", &format!("prompt,system\nhi,{big}\n"));
        let msg = load_dataset(&p).unwrap_err().to_string();
        assert!(msg.contains("row 0: the prompt is"), "{msg}");
    }

    #[test]
    fn rows_past_samples_are_not_read() {
        let (_d, p) =
            temp_bytes("tail.jsonl", b"{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n\xff\xfe");
        let ds = load_dataset(&format!("{p},samples=2")).unwrap();
        assert_eq!(ds.rows.len(), 2);
        assert!(load_dataset(&p).unwrap_err().to_string().contains("line 3"));
    }

    #[test]
    fn bad_files_and_specs_are_input_errors() {
        let err = load_dataset("/nonexistent/x.jsonl").unwrap_err();
        assert_eq!(err, AppError::Input("dataset file not found: /nonexistent/x.jsonl".into()));
        let (_d, p) = temp_file("bad.jsonl", "{\"prompt\": \"a\"}\n{oops\n");
        let err = load_dataset(&p).unwrap_err();
        assert!(matches!(&err, AppError::Input(m) if m.contains("line 2")), "{err}");
        let (_d, p) = temp_file("x.parquet", "");
        assert!(matches!(load_dataset(&p), Err(AppError::Input(m)) if m.contains("parquet")));
        for (spec, needle) in [
            ("a.jsonl,parser.prompt:text", "write parser.prompt=text"),
            ("a.jsonl,parser.=x", "unknown dataset option \"parser.\""),
            ("a.jsonl,colour=red", "unknown dataset option \"colour\""),
            ("a.jsonl,samples=many", "not a whole number"),
        ] {
            let err = DatasetSpec::parse(spec).unwrap_err();
            assert!(err.to_string().contains(needle), "{spec}: {err}");
            assert_eq!(err.exit_code(), 2);
        }
        let spec = DatasetSpec::parse("acc:x.jsonl,name=n,parser.system=sys").unwrap();
        assert_eq!(spec.kind, DatasetKind::Accuracy);
        assert_eq!(spec.display_name(), "n");
        assert_eq!(spec.parser.unwrap().system.as_deref(), Some("sys"));
    }

    fn thread_count() -> usize {
        std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0)
    }

    /// Counting runs before the fork, when no thread may exist: it must never start the
    /// tokenizers crate's rayon pool. Checked in a child test process run with one test
    /// thread, so no other test can start threads meanwhile.
    #[test]
    fn counting_starts_no_threads() {
        const CHILD: &str = "LLM_LOADGEN_THREAD_CHECK_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let tok = crate::tokenizer::Tokenizer::load(&asset("tokenizers/char_chat")).unwrap();
            let before = thread_count();
            let rows = synthetic_dataset().rows;
            let total: u64 = rows.iter().map(|r| u64::from(tok.count_row(r).unwrap())).sum();
            let chat = serde_json::json!([{"role": "user", "content": "hi"}]);
            tok.count_row(&Row { messages: Some(chat), ..Row::default() }).unwrap();
            assert!(total > 40_000);
            assert_eq!(thread_count(), before, "counting started threads");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["dataset::tests::counting_starts_no_threads", "--exact", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("1 passed"), "{text}");
    }
}
