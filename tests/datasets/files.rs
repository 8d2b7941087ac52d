//! Dataset files end to end: a Parquet file and a Hugging Face `save_to_disk` folder, written
//! by the test itself, drive a run on the null endpoint exactly as the same rows in JSON
//! Lines do; a bad Parquet cell stops the run with exit 2, naming the file and the row; so do
//! a save_to_disk entry outside its folder, a length an Arrow or Parquet file claims past its
//! end, and a file past the column limit.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use crate::support::{check_accounting, isl_total, report_dir, Run, Scratch};
use arrow_array::{ArrayRef, Int32Array, ListArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field};

const PROMPTS: [&str; 3] = ["a short prompt", "a somewhat longer prompt here", "tiny"];

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
    let run = Run::offline("null://", &report_dir(name)).dataset_from(dataset).samples(30);
    let ran = run.tokenizer().arg("-v").run();
    (ran.output, ran.dir)
}

#[test]
fn a_parquet_and_an_arrow_folder_run_like_the_same_rows_in_jsonl() {
    let dir = Scratch::new("parity");
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
    let dir = Scratch::new("badcell");
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

/// An Arrow IPC stream of `prompts_batch` at `path`.
fn write_arrow_stream(path: &Path) {
    let file = std::fs::File::create(path).unwrap();
    let batch = prompts_batch();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
}

/// The stderr of a run on `dataset`, which must exit 2 without a panic.
fn refused(name: &str, dataset: &str) -> String {
    let (out, _) = null_run(name, dataset);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
    assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    stderr
}

#[test]
fn a_state_json_entry_outside_the_folder_is_refused_naming_it() {
    let dir = Scratch::new("outside");
    let outside = dir.join("outside.arrow");
    write_arrow_stream(&outside);
    let outside_abs = outside.display().to_string();
    let cases: [(&str, &str); 4] = [
        ("dotdot", "../outside.arrow"),
        ("absolute", &outside_abs),
        ("passwd", "/etc/passwd"),
        ("link", "data-00000-of-00001.arrow"),
    ];
    for (name, entry) in cases {
        let folder = dir.join(name);
        std::fs::create_dir_all(&folder).unwrap();
        let state = serde_json::json!({"_data_files": [{"filename": entry}]});
        std::fs::write(folder.join("state.json"), state.to_string()).unwrap();
        if name == "link" {
            std::os::unix::fs::symlink(&outside, folder.join(entry)).unwrap();
        }
        let spec = format!("{},parser.prompt=text_input", folder.display());
        let stderr = refused(&format!("outside-{name}"), &spec);
        let want = format!("dataset folder {}: data file {entry:?}", folder.display());
        assert!(stderr.contains(&want), "{name}: {stderr}");
        assert!(stderr.contains("outside the folder"), "{name}: {stderr}");
    }
    // A symlink found by name (no _data_files) is held to the same rule.
    let folder = dir.join("listed-by-name");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("state.json"), "{}").unwrap();
    std::os::unix::fs::symlink(&outside, folder.join("data-00000-of-00001.arrow")).unwrap();
    let stderr =
        refused("outside-by-name", &format!("{},parser.prompt=text_input", folder.display()));
    assert!(stderr.contains("outside the folder"), "{stderr}");
}

/// Runs the binary on `dataset` with its address space capped at 1 GiB (`ulimit -v`), so an
/// allocation of a length the file only claims fails the run instead of passing unseen.
fn run_in_1_gib(name: &str, dataset: &str) -> Output {
    let dir = report_dir(name);
    let out = std::process::Command::new("sh")
        .args(["-c", "ulimit -v 1048576 && exec \"$0\" \"$@\""])
        .arg(crate::support::bin_path())
        .args(["benchmark", "offline", "--endpoints", "null://", "--dataset", dataset])
        .args(["--num-samples", "3", "--report-dir", &dir.display().to_string()])
        .output()
        .expect("sh runs");
    crate::support::show(&out);
    out
}

#[test]
fn an_arrow_file_claiming_2_gib_is_refused_without_allocating_it() {
    let dir = Scratch::new("claims");
    // The well-formed stream runs under the same cap, so the cap alone fails nothing.
    let good = dir.join("good.arrow");
    write_arrow_stream(&good);
    let out = run_in_1_gib("claims-good", &format!("{},parser.prompt=text_input", good.display()));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    // 72 bytes: a stream whose first message claims 2 GiB of metadata.
    let mut stream = vec![0xff; 4];
    stream.extend_from_slice(&0x7fff_fff0_i32.to_le_bytes());
    stream.resize(72, 0);
    // The file form: a good stream inside, and a footer claiming 2 GiB.
    let mut file_form = b"ARROW1\0\0".to_vec();
    file_form.extend_from_slice(&std::fs::read(&good).unwrap());
    file_form.extend_from_slice(&0x7fff_fff0_i32.to_le_bytes());
    file_form.extend_from_slice(b"ARROW1");
    let cases = [
        ("stream", stream, "claims 2147483632 bytes of metadata, but only 64 bytes follow"),
        ("file", file_form, "its footer claims 2147483632 bytes"),
    ];
    for (name, bytes, want) in cases {
        let path = dir.join(format!("{name}.arrow"));
        std::fs::write(&path, bytes).unwrap();
        let out =
            run_in_1_gib(&format!("claims-{name}"), &format!("{},format=arrow", path.display()));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(stderr.contains(&format!("dataset {}", path.display())), "{name}: {stderr}");
        assert!(stderr.contains(want), "{name}: {stderr}");
    }
}

/// `path` (a Parquet file) with its first column chunk's compressed size set to `claim`, the
/// footer rewritten by the `parquet` crate after the file's own pages.
fn with_chunk_size(path: &Path, claim: i64) -> Vec<u8> {
    use parquet::file::metadata::{ParquetMetaDataReader, ParquetMetaDataWriter};
    let bytes = std::fs::read(path).unwrap();
    let file = std::fs::File::open(path).unwrap();
    let mut reader = ParquetMetaDataReader::new();
    reader.try_parse(&file).unwrap();
    let footer_bytes = reader.metadata_size().unwrap();
    let metadata = reader.finish().unwrap();
    let group = metadata.row_group(0).clone();
    let mut columns = group.columns().to_vec();
    columns[0] =
        columns[0].clone().into_builder().set_total_compressed_size(claim).build().unwrap();
    let group = group.into_builder().set_column_metadata(columns).build().unwrap();
    let metadata = metadata.into_builder().set_row_groups(vec![group]).build();
    let mut out = bytes[..bytes.len() - footer_bytes].to_vec();
    ParquetMetaDataWriter::new(&mut out, &metadata).finish().unwrap();
    out
}

#[test]
fn a_parquet_column_chunk_past_the_end_of_the_file_is_refused() {
    let dir = Scratch::new("chunks");
    let good = dir.join("good.parquet");
    write_parquet(&good, &prompts_batch());
    for (name, claim) in [("huge", 1_i64 << 40), ("negative", -1)] {
        let path = dir.join(format!("{name}.parquet"));
        std::fs::write(&path, with_chunk_size(&good, claim)).unwrap();
        let stderr = refused(
            &format!("chunk-{name}"),
            &format!("{},parser.prompt=text_input", path.display()),
        );
        let want = format!("row group 0 column \"text_input\" claims {claim} bytes at byte");
        assert!(stderr.contains(&format!("dataset {}", path.display())), "{name}: {stderr}");
        assert!(
            stderr.contains(&want) && stderr.contains("past the end of the file"),
            "{name}: {stderr}"
        );
    }
    // The same rewrite with the true size reads as the original does.
    let size = {
        let file = std::fs::File::open(&good).unwrap();
        let reader = parquet::file::serialized_reader::SerializedFileReader::new(file).unwrap();
        parquet::file::reader::FileReader::metadata(&reader)
            .row_group(0)
            .column(0)
            .compressed_size()
    };
    let same = dir.join("same.parquet");
    std::fs::write(&same, with_chunk_size(&good, size)).unwrap();
    let (out, _) = null_run("chunk-same", &format!("{},parser.prompt=text_input", same.display()));
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The documented column limit (docs/CLI.md, Datasets: `dataset::DATASET_COLUMNS_MAX`).
const DATASET_COLUMNS_MAX: usize = 10_000;

#[test]
fn a_dataset_past_the_column_limit_exits_2_naming_the_limit() {
    let dir = Scratch::new("columns");
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/CLI.md"));
    assert!(docs.unwrap().contains("10,000 columns (`dataset::DATASET_COLUMNS_MAX`"));
    let names = |n: usize| (0..n).map(|i| format!("c{i}")).collect::<Vec<_>>();
    let csv_text = |n: usize| {
        let header = ["prompt".to_string()].into_iter().chain(names(n - 1)).collect::<Vec<_>>();
        format!("{}\nhi{}\n", header.join(","), ",v".repeat(n - 1))
    };
    let jsonl_text = |n: usize| {
        // Two lines whose keys only together pass the limit.
        let half = n / 2;
        let line = |keys: &[String]| {
            let map: serde_json::Map<String, serde_json::Value> =
                keys.iter().map(|k| (k.clone(), "v".into())).collect();
            let mut map = map;
            map.insert("prompt".into(), "hi".into());
            serde_json::Value::Object(map).to_string()
        };
        let all = names(n - 1);
        format!("{}\n{}\n", line(&all[..half]), line(&all[half..]))
    };
    for (ext, text) in
        [("csv", csv_text(DATASET_COLUMNS_MAX + 1)), ("jsonl", jsonl_text(DATASET_COLUMNS_MAX + 1))]
    {
        let path = dir.join(format!("wide.{ext}"));
        std::fs::write(&path, text).unwrap();
        let stderr = refused(&format!("columns-{ext}"), &path.display().to_string());
        let want =
            format!("dataset {} has more than {DATASET_COLUMNS_MAX} columns", path.display());
        assert!(
            stderr.contains(&want) && stderr.contains("DATASET_COLUMNS_MAX"),
            "{ext}: {stderr}"
        );
    }
    // At the limit, both load.
    for (ext, text) in
        [("csv", csv_text(DATASET_COLUMNS_MAX)), ("jsonl", jsonl_text(DATASET_COLUMNS_MAX))]
    {
        let path = dir.join(format!("full.{ext}"));
        std::fs::write(&path, text).unwrap();
        let (out, _) = null_run(&format!("columns-full-{ext}"), &path.display().to_string());
        assert_eq!(out.status.code(), Some(0), "{ext}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
