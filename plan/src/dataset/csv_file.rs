//! CSV datasets with the `csv` crate (RFC 4180: quoted fields, `""` escapes, embedded
//! newlines, CRLF or LF); each record becomes a row of string columns.

use serde_json::{Map, Value};

use crate::error::AppError;

/// The records of CSV `text` (already UTF-8, BOM removed) as `{header: field}` maps.
pub(super) fn parse_csv(text: &str, path: &str) -> Result<Vec<Map<String, Value>>, AppError> {
    if let Some(line) = unterminated_quote_line(text) {
        return Err(AppError::Input(format!(
            "dataset {path} line {line}: a quoted field is never closed; close its quote"
        )));
    }
    let mut reader =
        csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(text.as_bytes());
    let bad = |e: csv::Error| AppError::Input(format!("dataset {path}: {e}"));
    let header: Vec<String> = reader.headers().map_err(bad)?.iter().map(str::to_string).collect();
    super::column_names::check_column_count(path, header.len())?;
    let mut out = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(bad)?;
        if record.len() != header.len() {
            let line = record.position().map_or(0, csv::Position::line);
            return Err(AppError::Input(format!(
                "dataset {path} row {} (line {line}): {} fields, header has {}; quote fields \
                 that hold commas",
                i + 1,
                record.len(),
                header.len()
            )));
        }
        let map = header.iter().cloned().zip(record.iter().map(|f| f.to_string().into())).collect();
        out.push(map);
    }
    Ok(out)
}

/// The line where a quoted field opens and never closes (the `csv` crate reads such a
/// field to the end of the file; pandas refuses it, and so do we).
fn unterminated_quote_line(text: &str) -> Option<usize> {
    let (mut in_quotes, mut at_field_start) = (false, true);
    let (mut line, mut opened_at) = (1usize, 0usize);
    let mut bytes = text.bytes().peekable();
    while let Some(b) = bytes.next() {
        match (b, in_quotes) {
            (b'"', true) if bytes.peek() == Some(&b'"') => {
                bytes.next();
            }
            (b'"', true) => in_quotes = false,
            (b'"', false) if at_field_start => (in_quotes, opened_at) = (true, line),
            _ => {}
        }
        if b == b'\n' {
            line += 1;
        }
        at_field_start = !in_quotes && (b == b',' || b == b'\n');
    }
    in_quotes.then_some(opened_at)
}
