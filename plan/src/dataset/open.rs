//! Opening a dataset file and reading it as UTF-8 text: as a checked stream (`TextReader`), or
//! one bounded JSON Lines line at a time.

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
    let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
    std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let line = first_line + count_lines(&bytes[..at]);
        AppError::Input(not_utf8(path, line, bytes[at]))
    })
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

fn not_utf8(path: &str, line: usize, byte: u8) -> String {
    format!("dataset {path} line {line}: not UTF-8 (byte 0x{byte:02x}); save the file as UTF-8")
}

fn count_lines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// Bad input found while a format's parser reads a `TextReader` (a byte that is not UTF-8, a
/// CSV quote never closed): carried through the parser as an `io::Error`, turned back into
/// `AppError::Input` by `read_error`.
#[derive(Debug)]
pub(super) struct BadText(pub(super) String);

impl std::fmt::Display for BadText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadText {}

/// The `AppError` of an I/O error from reading dataset `path`: bad input when it carries
/// `BadText`, else a file that cannot be read.
pub(super) fn read_error(path: &str, e: std::io::Error) -> AppError {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<BadText>()) {
        Some(BadText(message)) => AppError::Input(message.clone()),
        None => AppError::Setup(format!("cannot read dataset {path}: {e}")),
    }
}

/// A dataset file as UTF-8 bytes through a 1 MiB buffer, for the formats whose parsers read
/// a stream (JSON, CSV): a leading byte-order mark is dropped, and a byte that is not UTF-8 is
/// refused, naming its line, only once the parser reaches it, so `samples=N` never sees what
/// lies past its rows. Only the buffer is held, whatever the file's size.
pub(super) struct TextReader {
    file: std::fs::File,
    path: String,
    buf: Box<[u8]>,
    /// `buf[start..valid]` is checked text not yet read; `buf[valid..end]` the start of a
    /// character whose end is not read yet, or (when `bad`) a byte that is not UTF-8.
    start: usize,
    valid: usize,
    end: usize,
    bad: bool,
    /// Newlines in the file before `buf[0]`.
    lines_before: usize,
    at_file_start: bool,
}

impl TextReader {
    pub(super) fn open(spec: &DatasetSpec) -> Result<TextReader, AppError> {
        Ok(TextReader {
            file: open_dataset(spec)?,
            path: spec.path.clone(),
            buf: vec![0; 1 << 20].into_boxed_slice(),
            start: 0,
            valid: 0,
            end: 0,
            bad: false,
            lines_before: 0,
            at_file_start: true,
        })
    }

    /// Reads more of the file after `buf[valid..end]` and checks it; false at the file's end.
    fn refill(&mut self) -> std::io::Result<bool> {
        self.lines_before += count_lines(&self.buf[..self.valid]);
        self.buf.copy_within(self.valid..self.end, 0);
        (self.end, self.start, self.valid) = (self.end - self.valid, 0, 0);
        let n = loop {
            match std::io::Read::read(&mut self.file, &mut self.buf[self.end..]) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        if n == 0 {
            // A character cut off by the end of the file is not UTF-8.
            self.bad = self.end > 0;
            return Ok(self.bad);
        }
        self.end += n;
        if self.at_file_start {
            if self.end < BOM.len() && BOM.starts_with(&self.buf[..self.end]) {
                return Ok(true);
            }
            self.at_file_start = false;
            if self.buf[..self.end].starts_with(BOM) {
                (self.start, self.valid) = (BOM.len(), BOM.len());
            }
        }
        match std::str::from_utf8(&self.buf[self.start..self.end]) {
            Ok(_) => self.valid = self.end,
            Err(e) => {
                self.valid = self.start + e.valid_up_to();
                self.bad = e.error_len().is_some();
            }
        }
        Ok(true)
    }
}

impl std::io::BufRead for TextReader {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.start == self.valid {
            if self.bad {
                let line = 1 + self.lines_before + count_lines(&self.buf[..self.valid]);
                let message = not_utf8(&self.path, line, self.buf[self.valid]);
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, BadText(message)));
            }
            if !self.refill()? {
                break;
            }
        }
        Ok(&self.buf[self.start..self.valid])
    }

    fn consume(&mut self, amount: usize) {
        self.start = (self.start + amount).min(self.valid);
    }
}

impl std::io::Read for TextReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        use std::io::BufRead;
        let text = self.fill_buf()?;
        let n = text.len().min(out.len());
        out[..n].copy_from_slice(&text[..n]);
        self.consume(n);
        Ok(n)
    }
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
        let bytes = if line_no == 1 { buf.strip_prefix(BOM).unwrap_or(&buf) } else { &buf };
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
