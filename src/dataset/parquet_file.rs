//! Parquet datasets: the `parquet` crate's arrow reader, only the mapped columns decoded.

use ::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use ::parquet::arrow::ProjectionMask;

use super::columnar::{batches_to_records, batches_to_rows};
use super::{column_mapping, open_dataset, DatasetSpec, Row};
use crate::error::AppError;

/// Rows per decoded batch: large enough to amortise the per-batch cost, small enough that
/// a batch of long prompts stays a few MB.
const BATCH_ROWS: usize = 8192;

/// Reads a Parquet file's rows (at most `limit`) through the dataset column mapping.
pub(super) fn parquet_rows(spec: &DatasetSpec, limit: usize) -> Result<Vec<Row>, AppError> {
    let path = &spec.path;
    let bad = |e: ::parquet::errors::ParquetError| {
        AppError::Input(format!("dataset {path}: not a readable Parquet file: {e}"))
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(open_dataset(spec)?).map_err(bad)?;
    let columns: Vec<String> = builder.schema().fields().iter().map(|f| f.name().clone()).collect();
    // Decode only the columns the mapping reads: other columns (answers, metadata) can be
    // most of a file's bytes.
    let mapping = column_mapping(spec, &columns)?;
    let roots: Vec<usize> = columns
        .iter()
        .enumerate()
        .filter(|(_, name)| mapping.sources().any(|s| s == name.as_str()))
        .map(|(i, _)| i)
        .collect();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS.min(limit.max(1)))
        .with_limit(limit)
        .build()
        .map_err(bad)?;
    let batches = reader.map(|b| {
        b.map_err(|e| AppError::Input(format!("dataset {path}: cannot decode Parquet data: {e}")))
    });
    batches_to_rows(spec, &columns, batches, limit)
}

/// Every column of a Parquet file as JSON records (at most `limit`).
pub(super) fn parquet_records(
    spec: &DatasetSpec,
    limit: usize,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, AppError> {
    let path = &spec.path;
    let bad = |e: ::parquet::errors::ParquetError| {
        AppError::Input(format!("dataset {path}: not a readable Parquet file: {e}"))
    };
    let reader = ParquetRecordBatchReaderBuilder::try_new(open_dataset(spec)?)
        .map_err(bad)?
        .with_batch_size(BATCH_ROWS.min(limit.max(1)))
        .with_limit(limit)
        .build()
        .map_err(bad)?;
    let batches = reader.map(|b| {
        b.map_err(|e| AppError::Input(format!("dataset {path}: cannot decode Parquet data: {e}")))
    });
    batches_to_records(path, batches, limit)
}
