//! Arrow record batches (from Parquet files and Hugging Face Arrow folders) turned into
//! dataset rows through the same column mapping and row building as JSON Lines.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type,
    UInt64Type, UInt8Type,
};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use serde_json::{Map, Number, Value};

use super::mapping::{build_row, column_mapping, ColumnMapping};
use super::spec::DatasetSpec;
use crate::error::AppError;
use crate::row::Row;

/// Builds rows from `batches` (at most `limit`), reading only the mapped columns.
/// `columns` are the file's top-level column names, in schema order.
pub(super) fn batches_to_rows(
    spec: &DatasetSpec,
    columns: &[String],
    batches: impl Iterator<Item = Result<RecordBatch, AppError>>,
    limit: usize,
) -> Result<Vec<Row>, AppError> {
    let mapping = column_mapping(spec, columns)?;
    let mut rows = Vec::new();
    for batch in batches {
        let batch = batch?;
        let wanted = mapped_columns(&mapping, &batch);
        for i in 0..batch.num_rows() {
            if rows.len() >= limit {
                return Ok(rows);
            }
            let mut rec = Map::new();
            for (name, array) in &wanted {
                let value = value_at(array.as_ref(), i).map_err(|what| {
                    AppError::Input(format!(
                        "dataset {} row {}: column {name:?} {what}",
                        spec.path,
                        rows.len()
                    ))
                })?;
                rec.insert(name.clone(), value);
            }
            rows.push(build_row(rec, &mapping, rows.len(), &spec.path)?);
        }
    }
    if rows.is_empty() {
        return Err(AppError::Input(format!("dataset {} has no rows", spec.path)));
    }
    Ok(rows)
}

/// Every column of `batches` as JSON records (at most `limit`), for the predefined datasets,
/// whose prompts are built from several columns at once.
pub(super) fn batches_to_records(
    path: &str,
    batches: impl Iterator<Item = Result<RecordBatch, AppError>>,
    limit: usize,
) -> Result<Vec<Map<String, Value>>, AppError> {
    let mut records = Vec::new();
    for batch in batches {
        let batch = batch?;
        let schema = batch.schema();
        super::column_names::check_column_count(path, schema.fields().len())?;
        for i in 0..batch.num_rows() {
            if records.len() >= limit {
                return Ok(records);
            }
            let mut rec = Map::new();
            for (field, array) in schema.fields().iter().zip(batch.columns()) {
                let value = value_at(array.as_ref(), i).map_err(|what| {
                    AppError::Input(format!(
                        "dataset {path} row {}: column {:?} {what}",
                        records.len(),
                        field.name()
                    ))
                })?;
                rec.insert(field.name().clone(), value);
            }
            records.push(rec);
        }
    }
    Ok(records)
}

/// The batch's arrays for the columns the mapping reads, by name.
fn mapped_columns(
    mapping: &ColumnMapping,
    batch: &RecordBatch,
) -> Vec<(String, arrow_array::ArrayRef)> {
    mapping
        .sources()
        .filter_map(|name| batch.column_by_name(name).map(|a| (name.to_string(), a.clone())))
        .collect()
}

/// Element `i` of `array` as the JSON value a JSON Lines row would hold; `Err` says what
/// the column is instead (a type a prompt row cannot carry). Dictionary-encoded columns read
/// as their values, binary columns as UTF-8 text, large and view forms as their plain ones
/// (pandas and Hugging Face write all of them).
fn value_at(array: &dyn Array, i: usize) -> Result<Value, String> {
    if array.is_null(i) {
        return Ok(Value::Null);
    }
    macro_rules! int {
        ($t:ty) => {
            Value::from(array.as_primitive::<$t>().value(i))
        };
    }
    let float = |f: f64| Number::from_f64(f).map_or(Value::Null, Value::Number);
    Ok(match array.data_type() {
        DataType::Utf8 => Value::String(array.as_string::<i32>().value(i).to_string()),
        DataType::LargeUtf8 => Value::String(array.as_string::<i64>().value(i).to_string()),
        DataType::Utf8View => Value::String(array.as_string_view().value(i).to_string()),
        DataType::Binary => utf8_value(array.as_binary::<i32>().value(i))?,
        DataType::LargeBinary => utf8_value(array.as_binary::<i64>().value(i))?,
        DataType::BinaryView => utf8_value(array.as_binary_view().value(i))?,
        DataType::Dictionary(key, _) => dictionary_value(array, key, i)?,
        DataType::Boolean => Value::Bool(array.as_boolean().value(i)),
        DataType::Int8 => int!(Int8Type),
        DataType::Int16 => int!(Int16Type),
        DataType::Int32 => int!(Int32Type),
        DataType::Int64 => int!(Int64Type),
        DataType::UInt8 => int!(UInt8Type),
        DataType::UInt16 => int!(UInt16Type),
        DataType::UInt32 => int!(UInt32Type),
        DataType::UInt64 => int!(UInt64Type),
        DataType::Float32 => float(f64::from(array.as_primitive::<Float32Type>().value(i))),
        DataType::Float64 => float(array.as_primitive::<Float64Type>().value(i)),
        DataType::List(_) => list_value(array.as_list::<i32>().value(i).as_ref())?,
        DataType::LargeList(_) => list_value(array.as_list::<i64>().value(i).as_ref())?,
        DataType::ListView(_) => list_value(array.as_list_view::<i32>().value(i).as_ref())?,
        DataType::LargeListView(_) => list_value(array.as_list_view::<i64>().value(i).as_ref())?,
        DataType::FixedSizeList(_, _) => list_value(array.as_fixed_size_list().value(i).as_ref())?,
        DataType::Struct(_) => {
            let s = array.as_struct();
            let mut map = Map::new();
            for (field, column) in s.fields().iter().zip(s.columns()) {
                map.insert(field.name().clone(), value_at(column.as_ref(), i)?);
            }
            Value::Object(map)
        }
        other => {
            return Err(format!(
                "has type {other}, which a dataset row cannot hold (use strings, integers, \
                 lists of integers, or list<struct<role,content>> for messages)"
            ))
        }
    })
}

/// Bytes of a binary column as text; a cell that is not UTF-8 is refused.
fn utf8_value(bytes: &[u8]) -> Result<Value, String> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Ok(Value::String(text.to_string())),
        Err(e) => Err(format!(
            "holds bytes that are not UTF-8 text (at byte {}); store the column as UTF-8 strings",
            e.valid_up_to()
        )),
    }
}

/// Element `i` of a dictionary-encoded column: its key's entry in the dictionary.
fn dictionary_value(array: &dyn Array, key: &DataType, i: usize) -> Result<Value, String> {
    macro_rules! entry {
        ($k:ty) => {{
            let dict = array.as_dictionary::<$k>();
            let at = usize::try_from(dict.keys().value(i))
                .map_err(|_| "has a negative dictionary key")?;
            value_at(dict.values().as_ref(), at)
        }};
    }
    match key {
        DataType::Int8 => entry!(Int8Type),
        DataType::Int16 => entry!(Int16Type),
        DataType::Int32 => entry!(Int32Type),
        DataType::Int64 => entry!(Int64Type),
        DataType::UInt8 => entry!(UInt8Type),
        DataType::UInt16 => entry!(UInt16Type),
        DataType::UInt32 => entry!(UInt32Type),
        DataType::UInt64 => entry!(UInt64Type),
        other => Err(format!("has dictionary keys of type {other}, which arrow does not allow")),
    }
}

fn list_value(items: &dyn Array) -> Result<Value, String> {
    (0..items.len()).map(|j| value_at(items, j)).collect::<Result<Vec<_>, _>>().map(Value::Array)
}
