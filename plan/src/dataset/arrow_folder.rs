//! Hugging Face `save_to_disk` folders (state.json beside `data-*.arrow` Arrow IPC
//! stream files) and single `.arrow` files, in stream or file form.

use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_schema::SchemaRef;

use super::columnar::{batches_to_records, batches_to_rows};
use super::ipc_framing;
use super::spec::DatasetSpec;
use crate::error::AppError;
use crate::row::Row;

/// The magic bytes that open an Arrow IPC *file* (a stream has none).
const IPC_FILE_MAGIC: &[u8; 6] = b"ARROW1";

/// Whether `path` is a `save_to_disk` folder (it holds state.json).
pub(super) fn is_arrow_folder(path: &Path) -> bool {
    path.is_dir() && path.join("state.json").is_file()
}

/// Reads the rows of an Arrow folder or file (at most `limit`) through the column mapping,
/// one batch at a time; the first file's schema names the columns.
pub(super) fn arrow_rows(spec: &DatasetSpec, limit: usize) -> Result<Vec<Row>, AppError> {
    let path = Path::new(&spec.path);
    let files = if path.is_dir() { data_files(spec)? } else { vec![path.to_path_buf()] };
    let (schema, first) = read_ipc(&files[0])?;
    let columns: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let rest = files.into_iter().skip(1).flat_map(|file| match read_ipc(&file) {
        Ok((_, batches)) => batches,
        Err(e) => Box::new(std::iter::once(Err(e))),
    });
    batches_to_rows(spec, &columns, first.chain(rest), limit)
}

/// Every column of an Arrow folder or file as JSON records (at most `limit`).
pub(super) fn arrow_records(
    spec: &DatasetSpec,
    limit: usize,
) -> Result<Vec<serde_json::Map<String, serde_json::Value>>, AppError> {
    let path = Path::new(&spec.path);
    let files = if path.is_dir() { data_files(spec)? } else { vec![path.to_path_buf()] };
    let batches = files.into_iter().flat_map(|file| match read_ipc(&file) {
        Ok((_, batches)) => batches,
        Err(e) => Box::new(std::iter::once(Err(e))),
    });
    batches_to_records(&spec.path, batches, limit)
}

/// The folder's data files in the order state.json lists them (`_data_files`), else every
/// `data-*.arrow` sorted by name; each must lie inside the folder (`inside_folder`).
fn data_files(spec: &DatasetSpec) -> Result<Vec<PathBuf>, AppError> {
    let dir = Path::new(&spec.path);
    let state_path = dir.join("state.json");
    let listed: Option<Vec<String>> = std::fs::read_to_string(&state_path).ok().and_then(|text| {
        let state: serde_json::Value = serde_json::from_str(&text).ok()?;
        let files = state.get("_data_files")?.as_array()?;
        files.iter().map(|f| f.get("filename")?.as_str().map(str::to_string)).collect()
    });
    let names: Vec<String> = match listed {
        Some(names) => names,
        None => {
            let entries = std::fs::read_dir(dir).map_err(|e| {
                AppError::Setup(format!("cannot read dataset folder {}: {e}", spec.path))
            })?;
            let mut names: Vec<String> = entries
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .filter(|name| name.starts_with("data-") && name.ends_with(".arrow"))
                .collect();
            names.sort();
            names
        }
    };
    if names.is_empty() {
        return Err(AppError::Input(format!(
            "dataset folder {} holds no data-*.arrow files; point --dataset at a folder \
             written by save_to_disk",
            spec.path
        )));
    }
    names.iter().map(|name| inside_folder(dir, name)).collect()
}

/// The path of data file `name` of folder `dir`, refused (bad input, naming both) when it
/// is absolute, climbs out with `..`, or resolves (through links) outside the folder:
/// state.json is part of the download, and a dataset read must not become a read of any
/// file the user can open. A file that does not exist is left to the reader to report.
fn inside_folder(dir: &Path, name: &str) -> Result<PathBuf, AppError> {
    let outside = |why: &str| {
        AppError::Input(format!(
            "dataset folder {}: data file {name:?} {why}, outside the folder; a save_to_disk \
             folder lists only its own files, so re-save the dataset or remove the entry",
            dir.display()
        ))
    };
    if !is_plain_relative(Path::new(name)) {
        return Err(outside("is not a plain relative path"));
    }
    let path = dir.join(name);
    let (Ok(real_dir), Ok(real_path)) = (dir.canonicalize(), path.canonicalize()) else {
        return Ok(path);
    };
    if !real_path.starts_with(&real_dir) {
        return Err(outside(&format!("resolves to {}", real_path.display())));
    }
    Ok(real_path)
}

/// True when `name` is relative and names no parent (`..`), root or drive component.
fn is_plain_relative(name: &Path) -> bool {
    use std::path::Component;
    !name.as_os_str().is_empty()
        && name.components().all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

type Batches = Box<dyn Iterator<Item = Result<RecordBatch, AppError>>>;

/// The schema and record batches of one Arrow IPC file, stream or file form (chosen by its
/// magic). Every length the file claims is checked against its size first
/// (`ipc_framing::check_messages`): arrow-ipc allocates a claimed length before it reads,
/// and a 72-byte file claiming a 2 GiB message cost 2.1 GB. The file form is read as the
/// stream it holds (its footer is not needed to read every batch in order).
fn read_ipc(file: &Path) -> Result<(SchemaRef, Batches), AppError> {
    use std::io::{Read, Seek, SeekFrom};
    let shown = file.display().to_string();
    let cannot_read =
        |e: std::io::Error| AppError::Setup(format!("cannot read dataset {shown}: {e}"));
    let mut f = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(AppError::Input(format!("dataset file not found: {shown}")))
        }
        Err(e) => return Err(cannot_read(e)),
    };
    let file_bytes = f.metadata().map_err(cannot_read)?.len();
    let mut magic = [0u8; 6];
    let is_file_form = f.read_exact(&mut magic).is_ok() && &magic == IPC_FILE_MAGIC;
    let not_ipc = {
        let shown = shown.clone();
        move |what: String| {
            AppError::Input(format!("dataset {shown}: not a readable Arrow IPC file: {what}"))
        }
    };
    let region = if is_file_form {
        ipc_framing::file_form_region(&mut f, file_bytes).map_err(&not_ipc)?
    } else {
        0..file_bytes
    };
    ipc_framing::check_messages(&mut f, region.clone()).map_err(&not_ipc)?;
    f.seek(SeekFrom::Start(region.start)).map_err(cannot_read)?;
    let reader = std::io::BufReader::with_capacity(1 << 20, f.take(region.end - region.start));
    let bad = move |e: arrow_schema::ArrowError| not_ipc(e.to_string());
    let r = StreamReader::try_new(reader, None).map_err(bad.clone())?;
    Ok((r.schema(), Box::new(r.map(move |b| b.map_err(bad.clone())))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_names_stay_inside_a_folder() {
        let cases = [
            ("data-00000-of-00001.arrow", true),
            ("./data.arrow", true),
            ("train/data.arrow", true),
            ("../outside.arrow", false),
            ("train/../../outside.arrow", false),
            ("/etc/passwd", false),
            ("", false),
        ];
        for (name, inside) in cases {
            assert_eq!(is_plain_relative(Path::new(name)), inside, "{name:?}");
        }
    }
}
