//! Opening a dataset file and reading it as UTF-8 text: whole, or one bounded line at a time.

use super::spec::{DatasetSpec, LINE_BYTES_MAX, PROMPT_BYTES_MAX};
use crate::error::AppError;

pub(super) fn open_dataset(spec: &DatasetSpec) -> Result<std::fs::File, AppError> {
    match std::fs::File::open(&spec.path) {
        Ok(file) => Ok(file),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(AppError::Input(format!(
            "dataset file not found: {}{}",
            spec.path,
            relative_to(spec)
        ))),
        Err(e) => Err(AppError::Setup(format!("cannot read dataset {}: {e}", spec.path))),
    }
}

/// For a relative path, what it was relative to: the current folder (a YAML's folder was
/// tried too, by the binary, before this).
fn relative_to(spec: &DatasetSpec) -> String {
    if std::path::Path::new(&spec.path).is_absolute() {
        return String::new();
    }
    match std::env::current_dir() {
        Ok(dir) => format!(
            " (relative to the current folder {}; a config's dataset is also looked for beside \
             the config file)",
            dir.display()
        ),
        Err(_) => " (relative to the current folder)".to_string(),
    }
}

/// The UTF-8 text of `bytes`, less a leading byte-order mark; bad bytes are bad input
/// naming their line (1-based, counted from the file's start).
pub fn utf8_text<'a>(bytes: &'a [u8], path: &str, first_line: usize) -> Result<&'a str, AppError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = first_line + bytes[..at].iter().filter(|&&b| b == b'\n').count();
        AppError::Input(format!(
            "dataset {path} line {line}: not UTF-8 (byte 0x{:02x}); save the file as UTF-8",
            bytes[at]
        ))
    })
}

/// A whole JSON or CSV file as text (these formats need the whole file to parse).
pub(super) fn read_text(spec: &DatasetSpec) -> Result<String, AppError> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut open_dataset(spec)?, &mut bytes)
        .map_err(|e| AppError::Setup(format!("cannot read dataset {}: {e}", spec.path)))?;
    utf8_text(&bytes, &spec.path, 1).map(str::to_string)
}

/// Calls `each(line_number, text)` for every non-blank line of a JSON Lines file, at most
/// `limit` of them, holding one line at a time; stops early when `each` returns false.
pub(super) fn for_each_line(
    spec: &DatasetSpec,
    limit: usize,
    mut each: impl FnMut(usize, &str) -> Result<(), AppError>,
) -> Result<(), AppError> {
    use std::io::{BufRead, Read};
    let path = &spec.path;
    let mut reader = std::io::BufReader::with_capacity(1 << 20, open_dataset(spec)?);
    let read_err = |e: std::io::Error| AppError::Setup(format!("cannot read dataset {path}: {e}"));
    let mut buf = Vec::new();
    let (mut line_no, mut seen) = (0usize, 0usize);
    while seen < limit {
        buf.clear();
        let n = reader.by_ref().take(LINE_BYTES_MAX as u64 + 1).read_until(b'\n', &mut buf);
        if n.map_err(read_err)? == 0 {
            return Ok(());
        }
        line_no += 1;
        if buf.len() > LINE_BYTES_MAX && buf.last() != Some(&b'\n') {
            let mut rest = 0usize;
            loop {
                let chunk = reader.fill_buf().map_err(read_err)?;
                let (used, done) = match newline_at(chunk) {
                    Some(i) => (i + 1, true),
                    None => (chunk.len(), chunk.is_empty()),
                };
                rest += used;
                reader.consume(used);
                if done {
                    break;
                }
            }
            return Err(AppError::Input(format!(
                "dataset {path} row {seen} (line {line_no}) is {} bytes, over the {LINE_BYTES_MAX} \
                 byte limit of a JSON Lines row (prompts may hold {PROMPT_BYTES_MAX} bytes); \
                 shorten the row",
                buf.len() + rest
            )));
        }
        let bytes =
            if line_no == 1 { buf.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&buf) } else { &buf };
        let text = utf8_text(bytes, path, line_no)?;
        if text.trim().is_empty() {
            continue;
        }
        each(line_no, text)?;
        seen += 1;
    }
    Ok(())
}

pub(super) fn newline_at(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}
