//! Writing the report files atomically: a temp file in the same folder, fsync, rename.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use loadgen_coordinator::metrics::pyjson::to_python_json;
use loadgen_coordinator::metrics::Snapshot;

use super::summary::ResultSummary;
use super::text::report_txt;
use super::RunInfo;

/// Writes `bytes` to `path` so a reader sees the old file or the whole new one, never
/// a half-written one: a temp file beside it, fsynced, then renamed over it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |file| file.write_all(bytes))
}

/// [`write_atomic`] for a file written piece by piece (through a buffer), so a large file
/// (`sample_idx_map.json` of a long run) is never held in memory whole.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let name = path.file_name().ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("not a file path: {}", path.display()))
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut file = io::BufWriter::with_capacity(1 << 20, fs::File::create(&tmp)?);
        fill(&mut file)?;
        let file = file.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        // Persist the rename itself.
        fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn json_error(e: serde_json::Error) -> io::Error {
    io::Error::other(format!("cannot encode report json: {e}"))
}

/// A report file that could not be written, and why.
#[derive(Debug)]
pub struct Unwritten {
    /// The file, relative to the report directory.
    pub file: &'static str,
    pub error: io::Error,
}

/// Writes `metrics/final_snapshot.json`, `performance/result_summary.json` and
/// `report.txt` under `dir`, each on its own: one that fails (a full disk) does not stop
/// the others. Returns the files not written.
pub fn write_report_files(
    dir: &Path,
    snap: &Snapshot,
    summary: &ResultSummary,
    info: &RunInfo,
) -> Vec<Unwritten> {
    let mut unwritten = Vec::new();
    let mut attempt = |file: &'static str, bytes: io::Result<Vec<u8>>| {
        let path = dir.join(file);
        let result = bytes.and_then(|bytes| {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            write_atomic(&path, &bytes)
        });
        if let Err(error) = result {
            unwritten.push(Unwritten { file, error });
        }
    };
    attempt("metrics/final_snapshot.json", to_python_json(snap).map_err(json_error));
    attempt("performance/result_summary.json", to_python_json(summary).map_err(json_error));
    attempt("report.txt", Ok(report_txt(summary, info).into_bytes()));
    unwritten
}
