//! The BFCL v4 loader over the project's own fixture (tests/assets/datasets/bfcl_v4/raw, in
//! the reference's layout): subsets, per-subset sampling, rows and records.

use super::*;

const DEFAULT: &str = "dataset_cache";

fn fixture_dir() -> String {
    format!("{}/../tests/assets/datasets", env!("CARGO_MANIFEST_DIR"))
}

fn spec(params: Value) -> DatasetSpec {
    let mut params: Map<String, Value> = params.as_object().cloned().unwrap_or_default();
    params.entry("datasets_dir").or_insert_with(|| Value::from(fixture_dir()));
    DatasetSpec {
        name: Some("bfcl_v4::function_calling".into()),
        generate_params: Some(params.into_iter().collect()),
        ..DatasetSpec::default()
    }
}

fn counts(records: &[Record]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for r in records {
        match out.last_mut() {
            Some((s, n)) if s == subset_of(r) => *n += 1,
            _ => out.push((subset_of(r).to_string(), 1)),
        }
    }
    out
}

fn load_counts(params: Value) -> Vec<(String, usize)> {
    counts(&load(&spec(params), Some("function_calling"), Path::new(DEFAULT)).unwrap().1)
}

#[test]
fn the_edge_example_block_keeps_small_subsets_whole_and_samples_the_rest_by_category() {
    let params = serde_json::json!({
        "categories": ["non_live", "live", "hallucination"],
        "category_sample_pct": {"non_live": 62, "live": 10, "hallucination": 10},
        "subset_floor": 25,
    });
    let got = load_counts(params.clone());
    let want = [
        ("irrelevance", 3),      // 30 rows > 25: int(30 * 10 / 100)
        ("live_irrelevance", 2), // int(2.6)
        ("live_multiple", 2),
        ("live_parallel", 1),
        ("live_parallel_multiple", 1),
        ("live_simple", 2),
        ("multiple", 2),
        ("parallel", 2),
        ("parallel_multiple", 1),
        ("simple_java", 2),
        ("simple_javascript", 2),
        ("simple_python", 3),
    ];
    let want: Vec<(String, usize)> = want.iter().map(|(s, n)| (s.to_string(), *n)).collect();
    assert_eq!(got, want, "grouped by subset name; live_relevance is in no category");
    assert_eq!(load_counts(params), want, "the same rows every time");
    let (rows, records) = load(
        &spec(serde_json::json!({"subsets": ["irrelevance"], "sample_pct": 10})),
        Some("function_calling"),
        Path::new(DEFAULT),
    )
    .unwrap();
    let ids: Vec<&str> = records.iter().map(|r| r["sample_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["irrelevance_0", "irrelevance_1", "irrelevance_2"], "the first rows");
    assert_eq!(rows.len(), 3);
}

#[test]
fn without_sampling_keys_every_selected_row_is_kept_in_table_order() {
    let got = load_counts(serde_json::json!({"subsets": ["live_relevance", "simple_java"]}));
    let want = [("simple_java".to_string(), 2), ("live_relevance".to_string(), 2)];
    assert_eq!(got, want);
    let all = load_counts(serde_json::json!({}));
    assert_eq!(all.len(), 13);
    assert_eq!(all.iter().map(|c| c.1).sum::<usize>(), 76);
    let one = load_counts(serde_json::json!({"subsets": ["irrelevance"], "sample_pct": 1}));
    assert_eq!(one, [("irrelevance".to_string(), 1)], "at least one row");
    let capped = load_counts(serde_json::json!({"max_samples": 4}));
    assert_eq!(capped, [("simple_python".to_string(), 3), ("simple_java".to_string(), 1)]);
}

#[test]
fn a_row_sends_its_messages_tools_and_tool_choice_and_keeps_its_truth_for_the_scorer() {
    let (rows, records) = load(
        &spec(serde_json::json!({"subsets": ["live_simple"]})),
        Some("function_calling"),
        Path::new(DEFAULT),
    )
    .unwrap();
    let row = &rows[0];
    let messages = row.messages.as_ref().unwrap();
    assert_eq!(
        messages[0],
        serde_json::json!({"role": "system", "content": "You are an assistant."})
    );
    assert_eq!(messages[1]["content"], "List my files.");
    let tools = row.request_column("tools").unwrap();
    assert_eq!(tools[0]["type"], "function");
    assert_eq!(tools[0]["function"]["name"], "files_list");
    assert_eq!(tools[0]["function"]["parameters"]["type"], "object");
    assert_eq!(row.request_column("tool_choice"), Some(&Value::from("auto")));
    let r = &records[0];
    assert_eq!(r["ground_truth"], r#"[{"files.list": {"path": ["", "/"]}}]"#);
    assert!(r["func_description"].as_str().unwrap().starts_with(r#"[{"name": "files.list", "#));
    assert_eq!(r["subset"], "live_simple");
    let (_, irrelevant) = load(
        &spec(serde_json::json!({"subsets": ["irrelevance"]})),
        Some("function_calling"),
        Path::new(DEFAULT),
    )
    .unwrap();
    assert_eq!(irrelevant[0]["ground_truth"], "[]", "no possible answer");
}

#[test]
fn the_cached_table_is_read_before_the_raw_files() {
    use std::sync::Arc;
    let dir = std::env::temp_dir().join(format!("llm-loadgen-bfcl-{}", std::process::id()));
    let file = dir.join(CACHE_FILE);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let col = |v: Vec<&str>| Arc::new(arrow_array::StringArray::from(v)) as arrow_array::ArrayRef;
    let batch = arrow_array::RecordBatch::try_from_iter([
        ("messages", col(vec![r#"[{"role": "user", "content": "hi"}]"#])),
        ("tools", col(vec!["[]"])),
        ("tool_choice", col(vec!["auto"])),
        ("ground_truth", col(vec!["[]"])),
        ("func_description", col(vec!["[]"])),
        ("subset", col(vec!["irrelevance"])),
        ("sample_id", col(vec!["cached_0"])),
    ])
    .unwrap();
    let mut w = ::parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&file).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let dir_s = dir.display().to_string();
    let (rows, records) = load(
        &spec(serde_json::json!({"datasets_dir": dir_s})),
        Some("function_calling"),
        Path::new(DEFAULT),
    )
    .unwrap();
    assert_eq!(records[0]["sample_id"], "cached_0");
    assert_eq!(rows[0].messages.as_ref().unwrap()[0]["content"], "hi");
    let forced = serde_json::json!({"datasets_dir": dir_s, "force_regenerate": true});
    let err =
        load(&spec(forced), Some("function_calling"), Path::new(DEFAULT)).unwrap_err().to_string();
    assert!(err.contains("BFCL_v4_simple_python.json is missing"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn keys_categories_and_subsets_it_cannot_honour_are_refused_by_name() {
    let err = |params: Value| {
        load(&spec(params), Some("function_calling"), Path::new(DEFAULT)).unwrap_err().to_string()
    };
    let cases = [
        (serde_json::json!({"categories": ["agentic"]}), "unknown category \"agentic\""),
        (serde_json::json!({"categories": ["multi_turn"]}), "multi-turn"),
        (serde_json::json!({"subsets": ["multi_turn_base"]}), "multi-turn"),
        (serde_json::json!({"subsets": ["simple_rust"]}), "unknown subset \"simple_rust\""),
        (serde_json::json!({"subsets": ["multiple"], "categories": ["live"]}), "give one of them"),
        (serde_json::json!({"sample_pct": 0}), "must be in (0, 100]"),
        (serde_json::json!({"category_sample_pct": {"live": 101}}), "must be in (0, 100]"),
        (serde_json::json!({"category_sample_pct": {"multi": 5}}), "no single-turn category"),
        (serde_json::json!({"force": true}), "generate_params.force is not a parameter"),
        (serde_json::json!({"subsets": []}), "selects no subsets"),
    ];
    for (params, want) in cases {
        let e = err(params.clone());
        assert!(e.contains(want), "{params}: {e}");
    }
    let no_preset =
        load(&spec(serde_json::json!({})), None, Path::new(DEFAULT)).unwrap_err().to_string();
    assert!(no_preset.contains("bfcl_v4::function_calling"), "{no_preset}");
}

/// The scores tests/run's end-to-end BFCL test expects once tool calls reach the scorer as
/// the reference's `str(TextModelOutput)` ends with them: every row of the edge example's
/// sample answered with a call of its first tool and no arguments, as the stub answers.
#[test]
fn the_fixture_scores_as_worked_out_when_every_answer_calls_the_first_tool() {
    use loadgen_accuracy::{Extractor, Sample, ScoreValue, Scorer};
    let params = serde_json::json!({
        "categories": ["non_live", "live", "hallucination"],
        "category_sample_pct": {"non_live": 62, "live": 10, "hallucination": 10},
        "subset_floor": 25,
    });
    let (rows, records) =
        load(&spec(params), Some("function_calling"), Path::new(DEFAULT)).unwrap();
    let outputs: Vec<String> = rows
        .iter()
        .map(|r| {
            let name = r.request_column("tools").unwrap()[0]["function"]["name"].as_str().unwrap();
            format!(
                r#"[{{"id":"call_0","type":"function","function":{{"name":"{name}","arguments":"{{}}"}}}}]"#
            )
        })
        .collect();
    let text = |r: &Record, c: &str| r[c].as_str().unwrap().to_string();
    let columns: Vec<Vec<String>> =
        records.iter().map(|r| vec![text(r, "subset"), text(r, "func_description")]).collect();
    let truths: Vec<String> = records.iter().map(|r| text(r, "ground_truth")).collect();
    let samples: Vec<Sample<'_>> = (0..rows.len())
        .map(|i| Sample {
            index: i,
            output: &outputs[i],
            ground_truth: &truths[i],
            columns: &columns[i],
        })
        .collect();
    let scored = Scorer::BfclV4.score(Some(Extractor::FunctionCall), &samples, 23, 23).unwrap();
    assert_eq!(scored.score, ScoreValue::Number(Some(9.0 / 23.0)));
    let b = scored.breakdown.unwrap();
    assert_eq!((b.overall_accuracy, b.normalized_single_turn_score), (39.13, 29.63));
    let cats: Vec<f64> = b.category_scores.iter().map(|c| c.1).collect();
    assert_eq!(cats, [38.89, 50.0, 0.0]);
    let by: std::collections::BTreeMap<&str, f64> =
        b.subset_scores.iter().map(|(s, v)| (s.as_str(), *v)).collect();
    let want = [
        ("irrelevance", 0.0),
        ("live_irrelevance", 0.0),
        ("live_multiple", 100.0),
        ("live_parallel", 0.0),
        ("live_parallel_multiple", 0.0),
        ("live_simple", 50.0),
        ("multiple", 50.0),
        ("parallel", 50.0),
        ("parallel_multiple", 0.0),
        ("simple_java", 50.0),
        ("simple_javascript", 50.0),
        ("simple_python", 66.67),
    ];
    assert_eq!(by.into_iter().collect::<Vec<_>>(), want);
}
