//! CSV datasets with the `csv` crate (RFC 4180: quoted fields, `""` escapes, embedded
//! newlines, CRLF or LF) over a `TextReader`, one record at a time; each record becomes a row
//! of string columns, holding only the columns its reader keeps.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::open::{read_error, BadText, TextReader};
use super::spec::DatasetSpec;
use crate::error::AppError;

/// A CSV file open past its header, handing out its records in order.
pub(super) struct CsvFile {
    reader: csv::Reader<QuoteCheck>,
    header: Vec<String>,
    path: String,
    /// Records read so far.
    read: usize,
}

impl CsvFile {
    pub(super) fn open(spec: &DatasetSpec) -> Result<CsvFile, AppError> {
        let text = QuoteCheck::new(TextReader::open(spec)?, &spec.path);
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(true)
            .buffer_capacity(1 << 16)
            .from_reader(text);
        let path = spec.path.clone();
        let header: Vec<String> = match reader.headers() {
            Ok(header) => header.iter().map(str::to_string).collect(),
            Err(e) => return Err(csv_error(&path, e)),
        };
        super::column_names::check_column_count(&path, header.len())?;
        Ok(CsvFile { reader, header, path, read: 0 })
    }

    /// The header's names, each once, in the order the columns of a parsed record list them.
    pub(super) fn column_names(&self) -> Vec<String> {
        let mut names = self.header.clone();
        names.sort();
        names.dedup();
        names
    }

    /// Reads the next record into `record`; false at the end of the file. A record whose
    /// field count is not the header's is refused, naming its row and line.
    pub(super) fn next_record(&mut self, record: &mut csv::StringRecord) -> Result<bool, AppError> {
        if !self.reader.read_record(record).map_err(|e| csv_error(&self.path, e))? {
            return Ok(false);
        }
        self.read += 1;
        if record.len() != self.header.len() {
            let line = record.position().map_or(0, csv::Position::line);
            return Err(AppError::Input(format!(
                "dataset {} row {} (line {line}): {} fields, header has {}; quote fields that \
                 hold commas",
                self.path,
                self.read,
                record.len(),
                self.header.len()
            )));
        }
        Ok(true)
    }

    /// `record` as `{header: field}`, with only the columns in `keep` (all without it); of
    /// two columns of one name, the later.
    pub(super) fn to_map(
        &self,
        record: &csv::StringRecord,
        keep: Option<&HashSet<&str>>,
    ) -> Map<String, Value> {
        let wanted = |name: &&String| keep.is_none_or(|keep| keep.contains(name.as_str()));
        let fields = self.header.iter().zip(record.iter()).filter(|(name, _)| wanted(name));
        fields.map(|(name, field)| (name.clone(), field.into())).collect()
    }
}

/// The first `limit` records, with the columns in `keep` (all without it): the raw records of
/// `file::read_records`.
pub(super) fn csv_records(
    spec: &DatasetSpec,
    limit: usize,
    keep: Option<&HashSet<&str>>,
) -> Result<Vec<Map<String, Value>>, AppError> {
    let mut file = CsvFile::open(spec)?;
    let mut record = csv::StringRecord::new();
    let mut out = Vec::new();
    while out.len() < limit && file.next_record(&mut record)? {
        out.push(file.to_map(&record, keep));
    }
    Ok(out)
}

fn csv_error(path: &str, e: csv::Error) -> AppError {
    if !e.is_io_error() {
        return AppError::Input(format!("dataset {path}: {e}"));
    }
    match e.into_kind() {
        csv::ErrorKind::Io(e) => read_error(path, e),
        kind => AppError::Input(format!("dataset {path}: {kind:?}")),
    }
}

/// The text on its way to the `csv` crate, watched for a quoted field that opens and never
/// closes: the crate would read such a field to the end of the file; pandas refuses it, and so
/// do we, naming the line where it opens, when the end of the file is reached inside it.
struct QuoteCheck {
    text: TextReader,
    path: String,
    in_quotes: bool,
    /// A `"` inside quotes whose next byte is not read yet (`""` is an escaped quote).
    quote_pending: bool,
    at_field_start: bool,
    line: usize,
    opened_at: usize,
}

impl QuoteCheck {
    fn new(text: TextReader, path: &str) -> QuoteCheck {
        QuoteCheck {
            text,
            path: path.to_string(),
            in_quotes: false,
            quote_pending: false,
            at_field_start: true,
            line: 1,
            opened_at: 0,
        }
    }

    fn step(&mut self, b: u8) {
        if std::mem::take(&mut self.quote_pending) {
            self.at_field_start = false;
            if b == b'"' {
                return;
            }
            self.in_quotes = false;
        }
        if b == b'"' {
            if self.in_quotes {
                (self.quote_pending, self.at_field_start) = (true, false);
                return;
            }
            if self.at_field_start {
                (self.in_quotes, self.opened_at) = (true, self.line);
            }
        }
        if b == b'\n' {
            self.line += 1;
        }
        self.at_field_start = !self.in_quotes && (b == b',' || b == b'\n');
    }
}

impl std::io::Read for QuoteCheck {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = self.text.read(out)?;
        if n == 0 && !out.is_empty() && self.in_quotes && !self.quote_pending {
            let message = format!(
                "dataset {} line {}: a quoted field is never closed; close its quote",
                self.path, self.opened_at
            );
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, BadText(message)));
        }
        out[..n].iter().for_each(|&b| self.step(b));
        Ok(n)
    }
}
