//! A dataset file read by its format: JSON Lines line by line, JSON and CSV record by record
//! (`json_file.rs`, `csv_file.rs`), Parquet and Arrow folders by column; as rows through the
//! column mapping, or as raw records. A row keeps only the columns the mapping reads, and no
//! format reads past `samples=N`, so a file larger than memory loads.

use std::collections::HashSet;
use std::path::Path;

use serde_json::{Map, Value};

use super::agentic::AgenticRecord;
use super::column_names::{self, ColumnNames, KeysInto};
use super::csv_file::CsvFile;
use super::json_file::{self, Keep};
use super::mapping::{build_row, column_mapping, column_names};
use super::open::{for_each_line, TextReader};
use super::spec::{Dataset, DatasetSpec};
use super::{arrow_folder, csv_file, parquet_file};
use crate::error::AppError;
use crate::row::Row;

pub(super) fn load_file_dataset(spec: &DatasetSpec) -> Result<Dataset, AppError> {
    let format = detect_format(spec)?;
    let limit = spec.samples.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let rows = match format {
        // Read a record at a time and only up to `samples=N`: a file larger than memory is fine.
        Format::Jsonl => jsonl_rows(spec, limit)?,
        Format::Json => json_rows(spec, limit)?,
        Format::Csv => csv_rows(spec, limit)?,
        Format::Parquet => parquet_file::parquet_rows(spec, limit)?,
        Format::Arrow => arrow_folder::arrow_rows(spec, limit)?,
    };
    Ok(Dataset { name: spec.display_name(), rows })
}

/// Every column of a dataset file as JSON records (at most `limit`), without the column
/// mapping: the predefined datasets build their prompts from several columns.
pub(super) fn read_records(
    spec: &DatasetSpec,
    limit: usize,
) -> Result<Vec<Map<String, Value>>, AppError> {
    read_records_keeping(spec, limit, None)
}

/// `read_records`, each record holding only the columns in `keep` (all without it): JSON
/// Lines, JSON and CSV hold no other column past its own record.
pub(super) fn read_records_keeping(
    spec: &DatasetSpec,
    limit: usize,
    keep: Option<&HashSet<&str>>,
) -> Result<Vec<Map<String, Value>>, AppError> {
    let kept = |name: &str| keep.is_none_or(|keep| keep.contains(name));
    let mut records = match detect_format(spec)? {
        Format::Jsonl => {
            let mut out = Vec::new();
            for_each_line(spec, limit, |line_no, line| {
                let mut rec: Map<String, Value> = serde_json::from_str(line).map_err(|e| {
                    AppError::Input(format!("dataset {} line {line_no}: {e}", spec.path))
                })?;
                column_names::check_column_count(&spec.path, rec.len())?;
                rec.retain(|name, _| kept(name));
                out.push(rec);
                Ok(())
            })?;
            out
        }
        Format::Json => {
            let mut out = Vec::new();
            let columns = keep.map_or(Keep::All, Keep::Columns);
            json_file::for_each_record(spec, limit, columns, &mut |_, record| {
                out.push(record);
                Ok(())
            })?;
            out
        }
        Format::Csv => csv_file::csv_records(spec, limit, keep)?,
        Format::Parquet => parquet_file::parquet_records(spec, limit)?,
        Format::Arrow => arrow_folder::arrow_records(spec, limit)?,
    };
    records.truncate(limit);
    for record in &mut records {
        column_names::check_column_count(&spec.path, record.len())?;
        record.retain(|name, _| kept(name));
    }
    Ok(records)
}

/// Every row of an agentic conversation dataset, in file order: JSON Lines and JSON keep each
/// object's keys in the file's order (`AgenticRecord`); CSV, Parquet and Arrow rows come
/// through the raw records, whose nested objects can only come sorted by key.
pub(super) fn read_agentic_records(spec: &DatasetSpec) -> Result<Vec<AgenticRecord>, AppError> {
    let path = &spec.path;
    match detect_format(spec)? {
        Format::Jsonl => {
            let mut out = Vec::new();
            for_each_line(spec, usize::MAX, |line_no, line| {
                let record = AgenticRecord::parse(line)
                    .map_err(|e| AppError::Input(format!("dataset {path} line {line_no}: {e}")))?;
                out.push(record);
                Ok(())
            })?;
            Ok(out)
        }
        Format::Json => {
            let text = std::io::BufReader::with_capacity(1 << 16, TextReader::open(spec)?);
            serde_json::from_reader(text)
                .map_err(|e| json_file::json_error(path, e, "; give a JSON array of rows"))
        }
        _ => Ok(read_records(spec, usize::MAX)?.iter().map(AgenticRecord::from_map).collect()),
    }
}

/// JSON in two passes, as JSON Lines: the first reads just the keys of the first `limit`
/// records (for the column mapping), the second builds each row from its record's mapped
/// columns, the others parsed past.
fn json_rows(spec: &DatasetSpec, limit: usize) -> Result<Vec<Row>, AppError> {
    let path = &spec.path;
    let mut columns = ColumnNames::default();
    let count =
        json_file::for_each_record(spec, limit, Keep::Names(&mut columns), &mut |_, _| Ok(()))?;
    if count == 0 {
        return Err(AppError::Input(format!("dataset {path} has no rows")));
    }
    let mapping = column_mapping(spec, &columns.into_vec())?;
    let keep: HashSet<&str> = mapping.sources().collect();
    let mut rows = Vec::new();
    json_file::for_each_record(spec, limit, Keep::Columns(&keep), &mut |index, record| {
        rows.push(build_row(record, &mapping, index, path)?);
        Ok(())
    })?;
    Ok(rows)
}

/// CSV in one pass: the header gives the column mapping (once a first record shows the file
/// has rows), then each record becomes a row from its mapped fields.
fn csv_rows(spec: &DatasetSpec, limit: usize) -> Result<Vec<Row>, AppError> {
    let path = &spec.path;
    let mut file = CsvFile::open(spec)?;
    let mut record = csv::StringRecord::new();
    if !file.next_record(&mut record)? {
        return Err(AppError::Input(format!("dataset {path} has no rows")));
    }
    let mapping = column_mapping(spec, &column_names([&file.column_names()], path)?)?;
    let keep: HashSet<&str> = mapping.sources().collect();
    let mut rows = Vec::new();
    loop {
        rows.push(build_row(file.to_map(&record, Some(&keep)), &mapping, rows.len(), path)?);
        if rows.len() == limit || !file.next_record(&mut record)? {
            return Ok(rows);
        }
    }
}

/// JSON Lines in two passes, so that only the finished rows are ever held: the first
/// reads just the keys (for the column mapping), the second builds each row from its line.
pub(super) fn jsonl_rows(spec: &DatasetSpec, limit: usize) -> Result<Vec<Row>, AppError> {
    use serde::de::DeserializeSeed as _;
    let path = &spec.path;
    let mut columns = ColumnNames::default();
    let mut any_row = false;
    for_each_line(spec, limit, |line_no, line| {
        let mut de = serde_json::Deserializer::from_str(line);
        let keys = KeysInto(&mut columns).deserialize(&mut de).and_then(|()| de.end());
        column_names::check_column_count(path, columns.len())?;
        keys.map_err(|e| AppError::Input(format!("dataset {path} line {line_no}: {e}")))?;
        any_row = true;
        Ok(())
    })?;
    if !any_row {
        return Err(AppError::Input(format!("dataset {path} has no rows")));
    }
    let mapping = column_mapping(spec, &columns.into_vec())?;
    let mut rows = Vec::new();
    for_each_line(spec, limit, |line_no, line| {
        let record: Map<String, Value> = serde_json::from_str(line)
            .map_err(|e| AppError::Input(format!("dataset {path} line {line_no}: {e}")))?;
        rows.push(build_row(record, &mapping, rows.len(), path)?);
        Ok(())
    })?;
    Ok(rows)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Jsonl,
    Json,
    Csv,
    Parquet,
    Arrow,
}

pub(super) fn detect_format(spec: &DatasetSpec) -> Result<Format, AppError> {
    let ext = match &spec.format {
        Some(f) => f.trim_start_matches('.').to_ascii_lowercase(),
        None if arrow_folder::is_arrow_folder(Path::new(&spec.path)) => "arrow".to_string(),
        None if Path::new(&spec.path).is_dir() => {
            return Err(AppError::Input(format!(
                "dataset {} is a folder without state.json; give a file, or a folder written \
                 by save_to_disk (or set format=arrow)",
                spec.path
            )))
        }
        None => Path::new(&spec.path)
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default(),
    };
    match ext.as_str() {
        "jsonl" | "ndjson" => Ok(Format::Jsonl),
        "json" => Ok(Format::Json),
        "csv" => Ok(Format::Csv),
        "parquet" | "pq" => Ok(Format::Parquet),
        "arrow" => Ok(Format::Arrow),
        other => Err(AppError::Input(format!(
            "dataset {}: format {other:?} is not supported (use .jsonl, .json, .csv, \
             .parquet or a save_to_disk folder, or set format=jsonl|json|csv|parquet|arrow)",
            spec.path
        ))),
    }
}
