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

const TEMPLATES: [&str; 10] = [
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

const TOPICS: [&str; 10] = [
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
fn row(i: usize) -> (String, String) {
    let template = TEMPLATES[i % TEMPLATES.len()];
    let topic = TOPICS[(i / TEMPLATES.len()) % TOPICS.len()];
    (format!("{template} {topic} (case {i})"), format!("A reference answer for case {i}"))
}

pub fn run(args: &MakeDatasetArgs) -> Result<()> {
    let file = std::fs::File::create(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    match args.format.as_str() {
        "jsonl" => write_jsonl(file, args.rows),
        "parquet" => write_parquet(file, args.rows),
        other => anyhow::bail!("format {other:?} is not jsonl or parquet"),
    }
}

fn write_jsonl(file: std::fs::File, rows: usize) -> Result<()> {
    let mut out = std::io::BufWriter::new(file);
    for i in 0..rows {
        let (prompt, answer) = row(i);
        let line = serde_json::json!({"text_input": prompt, "ref_output": answer});
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}

fn write_parquet(file: std::fs::File, rows: usize) -> Result<()> {
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let mut writer: Option<ArrowWriter<std::fs::File>> = None;
    let mut file = Some(file);
    for start in (0..rows).step_by(GROUP_ROWS) {
        let (prompts, answers): (Vec<String>, Vec<String>) =
            (start..rows.min(start + GROUP_ROWS)).map(row).unzip();
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
