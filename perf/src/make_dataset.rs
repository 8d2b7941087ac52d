//! `make-dataset`: a large dataset for load-time measurements — the rows of
//! tests/assets/datasets/dummy_1k.jsonl (`text_input`, `ref_output`) repeated to N rows, as
//! JSON Lines or as Parquet (snappy, as pandas and Hugging Face datasets write it).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use arrow_array::{ArrayRef, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

/// The project's 1,000-row dataset, whose prompts the generated rows repeat.
const DUMMY_1K_JSONL: &str = include_str!("../../tests/assets/datasets/dummy_1k.jsonl");

/// The dummy rows' prompts without their ` (case N)` suffix, in file order.
fn prompt_stems() -> Result<Vec<String>> {
    DUMMY_1K_JSONL
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)?;
            let text = v["text_input"].as_str().context("a dummy row without text_input")?;
            Ok(text.rsplit_once(" (case ").map_or(text, |(stem, _)| stem).to_string())
        })
        .collect()
}

/// Rows per Parquet row group written (pandas writes one group per ~1M rows; smaller groups
/// keep the writer's memory low).
const GROUP_ROWS: usize = 65_536;

#[derive(clap::Args)]
pub struct MakeDatasetArgs {
    /// Number of rows.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: usize,
    /// jsonl or parquet.
    #[arg(long, default_value = "jsonl")]
    pub format: String,
    /// The file to write.
    #[arg(long)]
    pub out: PathBuf,
}

/// Row `i`'s prompt and reference answer (the dummy_1k rows, case number running on).
fn row(stems: &[String], i: usize) -> (String, String) {
    let stem = &stems[i % stems.len()];
    (format!("{stem} (case {i})"), format!("A reference answer for case {i}"))
}

pub fn run(args: &MakeDatasetArgs) -> Result<()> {
    let file = std::fs::File::create(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let stems = prompt_stems()?;
    match args.format.as_str() {
        "jsonl" => write_jsonl(file, &stems, args.rows),
        "parquet" => write_parquet(file, &stems, args.rows),
        other => anyhow::bail!("format {other:?} is not jsonl or parquet"),
    }
}

fn write_jsonl(file: std::fs::File, stems: &[String], rows: usize) -> Result<()> {
    let mut out = std::io::BufWriter::new(file);
    for i in 0..rows {
        let (prompt, answer) = row(stems, i);
        let line = serde_json::json!({"text_input": prompt, "ref_output": answer});
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

fn write_parquet(file: std::fs::File, stems: &[String], rows: usize) -> Result<()> {
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let mut writer: Option<ArrowWriter<std::fs::File>> = None;
    let mut file = Some(file);
    for start in (0..rows).step_by(GROUP_ROWS) {
        let (prompts, answers): (Vec<String>, Vec<String>) =
            (start..rows.min(start + GROUP_ROWS)).map(|i| row(stems, i)).unzip();
        let batch = RecordBatch::try_from_iter([
            ("text_input", Arc::new(StringArray::from(prompts)) as ArrayRef),
            ("ref_output", Arc::new(StringArray::from(answers)) as ArrayRef),
        ])?;
        if writer.is_none() {
            let f = file.take().context("writer opened twice")?;
            writer = Some(ArrowWriter::try_new(f, batch.schema(), Some(props.clone()))?);
        }
        writer.as_mut().context("no writer")?.write(&batch)?;
    }
    writer.context("no rows to write")?.close()?;
    Ok(())
}
