//! Parquet datasets: the `parquet` crate's arrow reader, only the mapped columns decoded.

use ::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use ::parquet::arrow::ProjectionMask;
use ::parquet::file::metadata::ParquetMetaData;

use super::columnar::{batches_to_records, batches_to_rows};
use super::mapping::column_mapping;
use super::open::open_dataset;
use super::spec::DatasetSpec;
use crate::error::AppError;
use crate::row::Row;

/// Rows per decoded batch: large enough to amortise the per-batch cost, small enough that
/// a batch of long prompts stays a few MB.
const BATCH_ROWS: usize = 8192;

/// Reads a Parquet file's rows (at most `limit`) through the dataset column mapping.
pub(super) fn parquet_rows(spec: &DatasetSpec, limit: usize) -> Result<Vec<Row>, AppError> {
    let path = &spec.path;
    let bad = |e: ::parquet::errors::ParquetError| {
        AppError::Input(format!("dataset {path}: not a readable Parquet file: {e}"))
    };
    let builder = checked_builder(spec)?;
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
    let reader = checked_builder(spec)?
        .with_batch_size(BATCH_ROWS.min(limit.max(1)))
        .with_limit(limit)
        .build()
        .map_err(bad)?;
    let batches = reader.map(|b| {
        b.map_err(|e| AppError::Input(format!("dataset {path}: cannot decode Parquet data: {e}")))
    });
    batches_to_records(path, batches, limit)
}

/// The reader of a Parquet file whose every column chunk lies inside the file. The `parquet`
/// crate checks the footer's length against the file and each page against its chunk, but
/// not the chunks themselves: a chunk claiming more bytes than the file has lets a page claim
/// them too, and a negative one panicked.
fn checked_builder(
    spec: &DatasetSpec,
) -> Result<ParquetRecordBatchReaderBuilder<std::fs::File>, AppError> {
    let path = &spec.path;
    let file = open_dataset(spec)?;
    let file_bytes = file
        .metadata()
        .map_err(|e| AppError::Setup(format!("cannot read dataset {path}: {e}")))?
        .len();
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
        AppError::Input(format!("dataset {path}: not a readable Parquet file: {e}"))
    })?;
    chunks_inside(builder.metadata(), file_bytes).map_err(|what| {
        AppError::Input(format!("dataset {path}: not a readable Parquet file: {what}"))
    })?;
    Ok(builder)
}

/// Every column chunk's bytes (from its dictionary page, else its first data page, for its
/// compressed size) lie inside a file of `file_bytes`.
fn chunks_inside(metadata: &ParquetMetaData, file_bytes: u64) -> Result<(), String> {
    for (g, group) in metadata.row_groups().iter().enumerate() {
        for chunk in group.columns() {
            let start = chunk.dictionary_page_offset().unwrap_or(chunk.data_page_offset());
            let bytes = chunk.compressed_size();
            let end = u64::try_from(start)
                .ok()
                .zip(u64::try_from(bytes).ok())
                .and_then(|(s, n)| s.checked_add(n));
            if end.is_none_or(|end| end > file_bytes) {
                return Err(format!(
                    "row group {g} column {:?} claims {bytes} bytes at byte {start}, past the \
                     end of the file ({file_bytes} bytes)",
                    chunk.column_path().string()
                ));
            }
        }
    }
    Ok(())
}
