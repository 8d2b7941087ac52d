//! Dataset files end to end: a Parquet file and a Hugging Face `save_to_disk` folder, written
//! by the test itself, drive a run on the null endpoint exactly as the same rows in JSON
//! Lines do; a bad Parquet cell stops the run with exit 2, naming the file and the row.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int32Array, ListArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field};
use common::{char_tokenizer, check_accounting, report_dir, run, summary};

const PROMPTS: [&str; 3] = ["a short prompt", "a somewhat longer prompt here", "tiny"];

/// A scratch folder under the target dir, made fresh.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("datasets-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn prompts_batch() -> RecordBatch {
    let answers: Vec<String> = (0..PROMPTS.len()).map(|i| format!("answer {i}")).collect();
    RecordBatch::try_from_iter([
        ("text_input", Arc::new(StringArray::from(PROMPTS.to_vec())) as ArrayRef),
        ("ref_output", Arc::new(StringArray::from(answers))),
    ])
    .unwrap()
}

fn write_parquet(path: &Path, batch: &RecordBatch) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(batch).unwrap();
    w.close().unwrap();
}

/// `benchmark offline` on null:// with the char tokenizer (client ISL = characters sent).
fn null_run(name: &str, dataset: &str) -> (Output, PathBuf) {
    let dir = report_dir(name);
    let d = dir.display().to_string();
    let tok = char_tokenizer();
    let args = ["benchmark", "offline", "--endpoints", "null://", "--dataset", dataset];
    let rest = ["--num-samples", "30", "--tokenizer", &tok, "-v", "--report-dir", &d];
    (run(args.iter().chain(rest.iter())), dir)
}

fn isl_total(dir: &Path) -> u64 {
    summary(dir)["input_sequence_lengths"]["total"].as_u64().expect("a client ISL total")
}

#[test]
fn a_parquet_and_an_arrow_folder_run_like_the_same_rows_in_jsonl() {
    let dir = scratch("parity");
    let jsonl = dir.join("rows.jsonl");
    let lines: Vec<String> = PROMPTS
        .iter()
        .enumerate()
        .map(|(i, p)| serde_json::json!({"text_input": p, "ref_output": format!("answer {i}")}))
        .map(|v| v.to_string())
        .collect();
    std::fs::write(&jsonl, lines.join("\n") + "\n").unwrap();
    let parquet = dir.join("rows.parquet");
    write_parquet(&parquet, &prompts_batch());
    let folder = dir.join("hf");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("state.json"),
        r#"{"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}"#,
    )
    .unwrap();
    let file = std::fs::File::create(folder.join("data-00000-of-00001.arrow")).unwrap();
    let batch = prompts_batch();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();

    let mut totals = Vec::new();
    for (name, path) in [("jsonl", &jsonl), ("parquet", &parquet), ("arrow", &folder)] {
        let spec = format!("{},parser.prompt=text_input", path.display());
        let (out, report) = null_run(&format!("ds-{name}"), &spec);
        assert_eq!(out.status.code(), Some(0), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("dataset: 3 rows loaded in "), "{name}: {stderr}");
        assert_eq!(check_accounting(&report), (30, 30, 0, 0), "{name}");
        totals.push(isl_total(&report));
    }
    // Every prompt is sent ten times; the chat template adds the same framing to each.
    let chars: u64 = PROMPTS.iter().map(|p| p.chars().count() as u64).sum::<u64>() * 10;
    assert!(totals[0] >= chars, "ISL {} below the {chars} prompt characters", totals[0]);
    assert_eq!(totals, [totals[0]; 3], "jsonl, parquet, arrow");
}

#[test]
fn a_bad_parquet_cell_exits_2_naming_the_file_and_the_row() {
    let dir = scratch("badcell");
    let path = dir.join("bad.parquet");
    let item = Arc::new(Field::new("item", DataType::Int32, true));
    let ids = Int32Array::from(vec![1, 2, 3, -4]);
    let offsets = arrow_buffer::OffsetBuffer::new(vec![0, 2, 3, 4].into());
    let tokens = ListArray::new(item, offsets, Arc::new(ids), None);
    let batch = RecordBatch::try_from_iter([("token_ids", Arc::new(tokens) as ArrayRef)]).unwrap();
    write_parquet(&path, &batch);
    let (out, _) = null_run("ds-bad", &path.display().to_string());
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!("dataset {} row 2: column \"token_ids\"", path.display());
    assert!(stderr.contains(&want), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
