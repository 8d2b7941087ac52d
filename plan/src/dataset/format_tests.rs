//! The columnar formats (Parquet, Hugging Face Arrow folders) against JSON Lines and CSV:
//! the same rows give the same `Row`s, and bad cells are refused with their row.

use std::path::Path;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BinaryArray, Int32Array, Int64Array, ListArray, RecordBatch, StringArray, StructArray,
};
use arrow_schema::{DataType, Field, Fields};

use super::{load_dataset, Row};
use crate::error::AppError;

/// A scratch folder removed on drop.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let path =
            std::env::temp_dir().join(format!("llm-loadgen-formats-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Scratch(path)
    }
    fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The rows of `batch` below as JSON Lines (what `json_rows_batch` holds).
const ROWS_JSONL: &str = r#"{"prompt": "hello", "system": "be brief", "n": 2}
{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
{"token_ids": [1, 2, 3], "n": 1}
"#;

fn messages_column() -> ArrayRef {
    let role = StringArray::from(vec!["user", "assistant"]);
    let content = StringArray::from(vec!["hi", "yo"]);
    let fields = Fields::from(vec![
        Field::new("role", DataType::Utf8, true),
        Field::new("content", DataType::Utf8, true),
    ]);
    let items = StructArray::new(fields.clone(), vec![Arc::new(role), Arc::new(content)], None);
    let item = Arc::new(Field::new("item", DataType::Struct(fields), true));
    let offsets = arrow_buffer::OffsetBuffer::new(vec![0, 0, 2, 2].into());
    let nulls = arrow_buffer::NullBuffer::from(vec![false, true, false]);
    Arc::new(ListArray::new(item, offsets, Arc::new(items), Some(nulls)))
}

fn token_ids_column(ids: Vec<i32>) -> ArrayRef {
    let item = Arc::new(Field::new("item", DataType::Int32, true));
    let n = ids.len() as i32;
    let offsets = arrow_buffer::OffsetBuffer::new(vec![0, 0, 0, n].into());
    let nulls = arrow_buffer::NullBuffer::from(vec![false, false, true]);
    Arc::new(ListArray::new(item, offsets, Arc::new(Int32Array::from(ids)), Some(nulls)))
}

/// The three rows of ROWS_JSONL as one record batch: a string prompt, chat messages as
/// list<struct<role,content>>, token ids as list<int32>, `n` as int64.
fn json_rows_batch(ids: Vec<i32>) -> RecordBatch {
    RecordBatch::try_from_iter([
        ("prompt", Arc::new(StringArray::from(vec![Some("hello"), None, None])) as ArrayRef),
        ("system", Arc::new(StringArray::from(vec![Some("be brief"), None, None]))),
        ("n", Arc::new(Int64Array::from(vec![Some(2), None, Some(1)]))),
        ("messages", messages_column()),
        ("token_ids", token_ids_column(ids)),
    ])
    .unwrap()
}

fn write_parquet(path: &str, batches: &[RecordBatch]) {
    let props = ::parquet::file::properties::WriterProperties::builder()
        .set_compression(::parquet::basic::Compression::SNAPPY)
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w =
        ::parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), Some(props)).unwrap();
    for b in batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
}

/// A save_to_disk folder: state.json naming the data files, each an Arrow IPC stream.
fn write_arrow_folder(dir: &Path, files: &[(&str, RecordBatch)]) {
    std::fs::create_dir_all(dir).unwrap();
    let listed: Vec<_> = files.iter().map(|(n, _)| serde_json::json!({"filename": n})).collect();
    let state = serde_json::json!({"_data_files": listed, "_split": "train"});
    std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
    std::fs::write(dir.join("dataset_info.json"), "{}").unwrap();
    for (name, batch) in files {
        let file = std::fs::File::create(dir.join(name)).unwrap();
        let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &batch.schema()).unwrap();
        w.write(batch).unwrap();
        w.finish().unwrap();
    }
}

fn prompts(rows: &[Row]) -> Vec<Option<&str>> {
    rows.iter().map(|r| r.prompt.as_deref()).collect()
}

#[test]
fn parquet_and_arrow_rows_equal_the_same_rows_in_jsonl() {
    let dir = Scratch::new("parity");
    let jsonl = dir.file("rows.jsonl");
    std::fs::write(&jsonl, ROWS_JSONL).unwrap();
    let want = load_dataset(&jsonl).unwrap().rows;
    assert_eq!(want[2].token_ids, Some(vec![1, 2, 3]));
    let parquet = dir.file("rows.parquet");
    write_parquet(&parquet, &[json_rows_batch(vec![1, 2, 3])]);
    let folder = dir.0.join("hf");
    write_arrow_folder(&folder, &[("data-00000-of-00001.arrow", json_rows_batch(vec![1, 2, 3]))]);
    let from_parquet = load_dataset(&parquet).unwrap();
    assert_eq!(from_parquet.rows, want);
    assert_eq!(from_parquet.name, "rows");
    assert_eq!(load_dataset(&folder.display().to_string()).unwrap().rows, want);
    let by_format = load_dataset(&format!("{},format=arrow", folder.display())).unwrap();
    assert_eq!(by_format.rows, want);
}

#[test]
fn csv_and_parquet_string_columns_give_the_same_rows() {
    let dir = Scratch::new("csv");
    let csv = dir.file("q.csv");
    std::fs::write(&csv, "question,system_prompt\r\n\"multi\nline, quoted\",sys\r\nplain,\r\n")
        .unwrap();
    let batch = RecordBatch::try_from_iter([
        ("question", Arc::new(StringArray::from(vec!["multi\nline, quoted", "plain"])) as ArrayRef),
        ("system_prompt", Arc::new(StringArray::from(vec!["sys", ""]))),
    ])
    .unwrap();
    let parquet = dir.file("q.parquet");
    write_parquet(&parquet, &[batch]);
    let from_csv = load_dataset(&csv).unwrap().rows;
    assert_eq!(prompts(&from_csv), [Some("multi\nline, quoted"), Some("plain")]);
    assert_eq!(from_csv[0].system.as_deref(), Some("sys"));
    assert_eq!(load_dataset(&parquet).unwrap().rows, from_csv);
}

#[test]
fn a_bad_parquet_cell_names_the_file_and_the_row() {
    let dir = Scratch::new("badcell");
    let path = dir.file("neg.parquet");
    // Row 2 carries a negative token id.
    write_parquet(&path, &[json_rows_batch(vec![1, -2, 3])]);
    let err = load_dataset(&path).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&format!("dataset {path} row 2: column \"token_ids\"")), "{msg}");
    let bin = dir.file("bin.parquet");
    let batch = RecordBatch::try_from_iter([(
        "prompt",
        Arc::new(BinaryArray::from(vec![b"a".as_ref(), b"b\xff".as_ref()])) as ArrayRef,
    )])
    .unwrap();
    write_parquet(&bin, &[batch]);
    let msg = load_dataset(&bin).unwrap_err().to_string();
    assert!(msg.contains(&format!("{bin} row 1: column \"prompt\" holds bytes")), "{msg}");
    assert!(msg.contains("not UTF-8"), "{msg}");
    let dates = dir.file("dates.parquet");
    let batch = RecordBatch::try_from_iter([(
        "prompt",
        Arc::new(arrow_array::Date32Array::from(vec![1, 2])) as ArrayRef,
    )])
    .unwrap();
    write_parquet(&dates, &[batch]);
    let msg = load_dataset(&dates).unwrap_err().to_string();
    assert!(msg.contains(&format!("{dates} row 0: column \"prompt\" has type Date32")), "{msg}");
    let junk = dir.file("junk.parquet");
    std::fs::write(&junk, b"not parquet at all").unwrap();
    let err = load_dataset(&junk).unwrap_err();
    assert!(matches!(&err, AppError::Input(m) if m.contains("not a readable Parquet file")));
}

/// The rows of ROWS_ENCODED as dictionary-encoded, large and binary columns.
const ROWS_ENCODED: &str = r#"{"prompt": "hello", "system": "be brief", "token_ids": [1, 2]}
{"prompt": "hello", "system": "sys", "token_ids": [3]}
{"prompt": "bye", "system": "sys", "token_ids": [4, 5, 6]}
"#;

fn encoded_batch(binary: bool) -> RecordBatch {
    use arrow_array::types::Int32Type;
    let prompt: ArrayRef = if binary {
        let cells: Vec<&[u8]> = vec![b"hello", b"hello", b"bye"];
        Arc::new(arrow_array::LargeBinaryArray::from(cells))
    } else {
        let dict: arrow_array::DictionaryArray<Int32Type> =
            vec!["hello", "hello", "bye"].into_iter().collect();
        Arc::new(dict)
    };
    let system: ArrayRef = if binary {
        Arc::new(BinaryArray::from(vec![b"be brief".as_ref(), b"sys", b"sys"]))
    } else {
        Arc::new(arrow_array::LargeStringArray::from(vec!["be brief", "sys", "sys"]))
    };
    let item = Arc::new(Field::new("item", DataType::Int32, true));
    let offsets = arrow_buffer::OffsetBuffer::new(vec![0i64, 2, 3, 6].into());
    let ids = Int32Array::from(vec![1, 2, 3, 4, 5, 6]);
    let token_ids = arrow_array::LargeListArray::new(item, offsets, Arc::new(ids), None);
    RecordBatch::try_from_iter([
        ("prompt", prompt),
        ("system", system),
        ("token_ids", Arc::new(token_ids) as ArrayRef),
    ])
    .unwrap()
}

#[test]
fn dictionary_large_and_binary_columns_read_as_their_plain_forms() {
    let dir = Scratch::new("encoded");
    let jsonl = dir.file("rows.jsonl");
    std::fs::write(&jsonl, ROWS_ENCODED).unwrap();
    let want = load_dataset(&jsonl).unwrap().rows;
    assert_eq!(want[2].token_ids, Some(vec![4, 5, 6]));
    for binary in [false, true] {
        let batch = encoded_batch(binary);
        let parquet = dir.file(&format!("rows-{binary}.parquet"));
        write_parquet(&parquet, std::slice::from_ref(&batch));
        // Parquet keeps the Arrow types (dictionary, large_string, large_list) in its schema.
        assert_eq!(load_dataset(&parquet).unwrap().rows, want, "parquet, binary={binary}");
        let folder = dir.0.join(format!("hf-{binary}"));
        write_arrow_folder(&folder, &[("data-00000-of-00001.arrow", batch)]);
        let rows = load_dataset(&folder.display().to_string()).unwrap().rows;
        assert_eq!(rows, want, "arrow, binary={binary}");
    }
}

/// The file form (`ARROW1` … footer) is read as the stream it holds: the same rows as the
/// stream form, dictionaries and several batches included.
#[test]
fn an_arrow_file_in_file_form_reads_as_its_stream_form() {
    let dir = Scratch::new("fileform");
    let jsonl = dir.file("rows.jsonl");
    std::fs::write(&jsonl, ROWS_ENCODED).unwrap();
    let mut want = load_dataset(&jsonl).unwrap().rows;
    want.extend(want.clone());
    let batch = encoded_batch(false);
    let path = dir.file("rows.arrow");
    let file = std::fs::File::create(&path).unwrap();
    let mut w = arrow_ipc::writer::FileWriter::try_new(file, &batch.schema()).unwrap();
    w.write(&batch).unwrap();
    w.write(&batch).unwrap();
    w.finish().unwrap();
    assert!(std::fs::read(&path).unwrap().starts_with(b"ARROW1"));
    let rows = load_dataset(&format!("{path},format=arrow")).unwrap().rows;
    assert_eq!(rows, want);
}

#[test]
fn samples_stop_reading_across_batches_and_arrow_files() {
    let dir = Scratch::new("samples");
    let batch = |from: usize| {
        let p: Vec<String> = (from..from + 3).map(|i| format!("p{i}")).collect();
        RecordBatch::try_from_iter([("input", Arc::new(StringArray::from(p)) as ArrayRef)]).unwrap()
    };
    let parquet = dir.file("many.parquet");
    write_parquet(&parquet, &[batch(0), batch(3)]);
    let rows = load_dataset(&format!("{parquet},samples=4")).unwrap().rows;
    assert_eq!(prompts(&rows), [Some("p0"), Some("p1"), Some("p2"), Some("p3")]);
    // The folder's files are read in state.json's order, not by name.
    let folder = dir.0.join("hf");
    write_arrow_folder(&folder, &[("data-b.arrow", batch(0)), ("data-a.arrow", batch(3))]);
    let all = load_dataset(&folder.display().to_string()).unwrap().rows;
    assert_eq!(prompts(&all).len(), 6);
    assert_eq!(all[3].prompt.as_deref(), Some("p3"));
    let some = load_dataset(&format!("{},samples=2", folder.display())).unwrap().rows;
    assert_eq!(prompts(&some), [Some("p0"), Some("p1")]);
}

#[test]
fn a_folder_without_state_json_is_refused_by_name() {
    let dir = Scratch::new("nostate");
    let err = load_dataset(&dir.0.display().to_string()).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("without state.json"), "{err}");
    std::fs::write(dir.0.join("state.json"), "{}").unwrap();
    let err = load_dataset(&dir.0.display().to_string()).unwrap_err();
    assert!(err.to_string().contains("no data-*.arrow files"), "{err}");
}

#[test]
fn csv_errors_name_the_row_and_line() {
    let dir = Scratch::new("csverr");
    let short = dir.file("short.csv");
    std::fs::write(&short, "prompt,system\n\"two\nlines\",s\nonly-one\n").unwrap();
    let err = load_dataset(&short).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    // The second record starts on line 4: the first one's quoted field spans lines 2 and 3.
    let msg = err.to_string();
    assert!(msg.contains(&format!("{short} row 2 (line 4): 1 fields, header has 2")), "{msg}");
    let open = dir.file("open.csv");
    std::fs::write(&open, "prompt\nfine\n\"never closed\nstill inside\n").unwrap();
    let msg = load_dataset(&open).unwrap_err().to_string();
    assert!(msg.contains(&format!("{open} line 3: a quoted field is never closed")), "{msg}");
    // A quote inside an unquoted field is a plain character, as pandas reads it.
    let inner = dir.file("inner.csv");
    std::fs::write(&inner, "prompt\nsay \"hi\" now\n").unwrap();
    assert_eq!(load_dataset(&inner).unwrap().rows[0].prompt.as_deref(), Some("say \"hi\" now"));
}

/// `rows` as JSON Lines, a JSON array, a JSON object of columns and CSV (every value a
/// string, as CSV reads it).
fn write_four_forms(dir: &Scratch, stem: &str, rows: &[Vec<(&str, String)>]) -> [String; 4] {
    let [jsonl, array, columns, csv] =
        ["jsonl", "json", "cols.json", "csv"].map(|ext| dir.file(&format!("{stem}.{ext}")));
    let objects: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let o: serde_json::Map<String, serde_json::Value> =
                r.iter().map(|(k, v)| (k.to_string(), v.clone().into())).collect();
            o.into()
        })
        .collect();
    let lines: Vec<String> = objects.iter().map(|o| o.to_string()).collect();
    std::fs::write(&jsonl, lines.join("\n")).unwrap();
    std::fs::write(&array, serde_json::Value::from(objects).to_string()).unwrap();
    let by_column: serde_json::Map<String, serde_json::Value> = rows[0]
        .iter()
        .enumerate()
        .map(|(i, (k, _))| (k.to_string(), rows.iter().map(|r| r[i].1.clone()).collect()))
        .collect();
    std::fs::write(&columns, serde_json::Value::from(by_column).to_string()).unwrap();
    let quote = |v: &str| format!("\"{}\"", v.replace('"', "\"\""));
    let mut text: Vec<String> =
        vec![rows[0].iter().map(|(k, _)| quote(k)).collect::<Vec<_>>().join(",")];
    text.extend(rows.iter().map(|r| r.iter().map(|(_, v)| quote(v)).collect::<Vec<_>>().join(",")));
    std::fs::write(&csv, text.join("\r\n")).unwrap();
    [jsonl, array, columns, csv]
}

/// JSON and CSV are read through a 1 MiB buffer a record at a time: a file of several buffers,
/// with multi-byte characters, `""` escapes and newlines cut anywhere by the buffer's edges,
/// gives the rows JSON Lines gives, and the raw records `read_column` reads.
#[test]
fn json_and_csv_read_record_by_record_give_the_rows_of_jsonl() {
    let dir = Scratch::new("stream");
    let unused = "é€𝄞 \"quoted\", and\nnewlines ".repeat(40);
    let rows: Vec<Vec<(&str, String)>> = (0..3000)
        .map(|i| {
            vec![
                ("prompt", format!("prompt {i} 𝄞 \"q\"")),
                ("system", format!("sys {}", i % 7)),
                ("blob", format!("{i} {unused}")),
            ]
        })
        .collect();
    let files = write_four_forms(&dir, "many", &rows);
    assert!(std::fs::metadata(&files[1]).unwrap().len() > 3 << 20);
    let want = load_dataset(&files[0]).unwrap().rows;
    assert_eq!(want.len(), 3000);
    assert_eq!(want[2999].prompt.as_deref(), Some("prompt 2999 𝄞 \"q\""));
    for file in &files[1..] {
        let spec =
            if file.ends_with("cols.json") { format!("{file},format=json") } else { file.clone() };
        assert_eq!(load_dataset(&spec).unwrap().rows, want, "{file}");
        let some = load_dataset(&format!("{spec},samples=5")).unwrap().rows;
        assert_eq!(some, want[..5], "{file}");
        let parsed = super::DatasetSpec::parse(&format!("{spec},samples=3")).unwrap();
        let blobs = super::read_column(&parsed, "blob").unwrap();
        let want_blobs: Vec<_> = rows[..3].iter().map(|r| Some(r[2].1.clone().into())).collect();
        assert_eq!(blobs, want_blobs, "{file}");
    }
}

/// `samples=N` reads no further than row N, as JSON Lines: what follows may be malformed,
/// and is only refused when read.
#[test]
fn json_and_csv_stop_reading_at_samples() {
    let dir = Scratch::new("tail");
    let cases: [(&str, &[u8], &str); 4] = [
        ("a.json", b"[{\"prompt\": \"a\"}, {\"prompt\": \"b\"}, {oops", "key must be a string"),
        ("b.json", b"[{\"prompt\": \"a\"},\n{\"prompt\": \"b\"},\n\xff]", "line 3: not UTF-8"),
        ("c.csv", b"prompt\na\nb\n\"never closed\nx\n", "line 4: a quoted field is never closed"),
        ("d.csv", b"prompt\na\nb\nc,d\n", "row 3 (line 4): 2 fields, header has 1"),
    ];
    for (name, bytes, refused) in cases {
        let path = dir.file(name);
        std::fs::write(&path, bytes).unwrap();
        let rows = load_dataset(&format!("{path},samples=2")).unwrap().rows;
        assert_eq!(prompts(&rows), [Some("a"), Some("b")], "{name}");
        let err = load_dataset(&path).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{name}: {err}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("dataset {path}")) && msg.contains(refused), "{name}: {msg}");
    }
}

#[test]
fn json_shapes_and_errors_name_the_file() {
    let dir = Scratch::new("jsonerr");
    let cases: [(&str, &str); 9] = [
        ("[{\"prompt\": \"a\"}, 5]", "item 1: not a JSON object"),
        ("[{\"prompt\": \"a\"}, [1, {\"x\": 2}]]", "item 1: not a JSON object"),
        ("\"text\"", "expected an array of objects or an object of columns"),
        ("{\"prompt\": [\"a\"], \"n\": 3}", "column \"n\" is not an array"),
        ("{\"prompt\": [\"a\", \"b\"], \"n\": [1]}", "column \"n\" has 1 values, others have 2"),
        ("[{\"prompt\": \"a\"},\n {\"prompt\": }]", "expected value at line 2 column 13"),
        ("[{\"prompt\": \"a\"}] x", "trailing characters at line 1 column 19"),
        ("[]", "has no rows"),
        ("[{\"prompt\": \"a\"}", "EOF while parsing a list"),
    ];
    for (i, (text, needle)) in cases.into_iter().enumerate() {
        let path = dir.file(&format!("e{i}.json"));
        std::fs::write(&path, text).unwrap();
        let err = load_dataset(&path).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{text}: {err}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("dataset {path}")) && msg.contains(needle), "{msg}");
    }
    // An object of columns: rows dealt out from the columns, the first empty one aside.
    let path = dir.file("cols.json");
    std::fs::write(&path, r#"{"extra": [], "prompt": ["a", "b"], "n": [1, 2]}"#).unwrap();
    let rows = load_dataset(&path).unwrap().rows;
    assert_eq!(prompts(&rows), [Some("a"), Some("b")]);
    assert_eq!(rows[1].n, Some(2));
    // The missing-column message lists a JSON file's columns sorted, as a parsed object has them.
    std::fs::write(&path, r#"[{"b": 1, "a": 2}, {"c": 3}]"#).unwrap();
    let msg = load_dataset(&format!("{path},parser.prompt=z")).unwrap_err().to_string();
    assert!(msg.contains("the file has columns: a, b, c"), "{msg}");
}

#[test]
fn a_bad_byte_past_the_first_buffer_names_its_line() {
    let dir = Scratch::new("utf8far");
    let row = format!("{{\"prompt\": \"{}\"}},\n", "y".repeat(1000));
    let mut json = b"[\n".to_vec();
    for _ in 0..2000 {
        json.extend_from_slice(row.as_bytes());
    }
    json.extend_from_slice(b"{\"prompt\": \"\xe2\x82\"}]\n");
    let path = dir.file("far.json");
    std::fs::write(&path, &json).unwrap();
    let msg = load_dataset(&path).unwrap_err().to_string();
    assert!(msg.contains(&format!("dataset {path} line 2002: not UTF-8 (byte 0xe2)")), "{msg}");
    // A character cut off by the end of the file.
    let csv = dir.file("cut.csv");
    std::fs::write(&csv, b"prompt\nok\n\xf0\x9d\x84").unwrap();
    let msg = load_dataset(&csv).unwrap_err().to_string();
    assert!(msg.contains(&format!("dataset {csv} line 3: not UTF-8 (byte 0xf0)")), "{msg}");
    let empty = dir.file("header.csv");
    std::fs::write(&empty, "prompt,system\n").unwrap();
    assert!(load_dataset(&empty).unwrap_err().to_string().contains("has no rows"));
}
