//! Hugging Face `save_to_disk` folders (state.json beside `data-*.arrow` Arrow IPC
//! stream files) and single `.arrow` files, in stream or file form.

use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_ipc::reader::{FileReader, StreamReader};
use arrow_schema::SchemaRef;

use super::columnar::{batches_to_records, batches_to_rows};
use super::{DatasetSpec, Row};
use crate::error::AppError;

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
/// `data-*.arrow` sorted by name.
fn data_files(spec: &DatasetSpec) -> Result<Vec<PathBuf>, AppError> {
    let dir = Path::new(&spec.path);
    let state_path = dir.join("state.json");
    let listed = std::fs::read_to_string(&state_path).ok().and_then(|text| {
        let state: serde_json::Value = serde_json::from_str(&text).ok()?;
        let files = state.get("_data_files")?.as_array()?;
        files.iter().map(|f| f.get("filename")?.as_str().map(|n| dir.join(n))).collect()
    });
    let files: Vec<PathBuf> = match listed {
        Some(files) => files,
        None => {
            let entries = std::fs::read_dir(dir).map_err(|e| {
                AppError::Setup(format!("cannot read dataset folder {}: {e}", spec.path))
            })?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let name = p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
                    name.starts_with("data-") && name.ends_with(".arrow")
                })
                .collect();
            files.sort();
            files
        }
    };
    if files.is_empty() {
        return Err(AppError::Input(format!(
            "dataset folder {} holds no data-*.arrow files; point --dataset at a folder \
             written by save_to_disk",
            spec.path
        )));
    }
    Ok(files)
}

type Batches = Box<dyn Iterator<Item = Result<RecordBatch, AppError>>>;

/// The schema and record batches of one Arrow IPC file, stream or file form (chosen by its
/// magic).
fn read_ipc(file: &Path) -> Result<(SchemaRef, Batches), AppError> {
    let shown = file.display().to_string();
    let open = || match std::fs::File::open(file) {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(AppError::Input(format!("dataset file not found: {shown}")))
        }
        Err(e) => Err(AppError::Setup(format!("cannot read dataset {shown}: {e}"))),
    };
    let mut magic = [0u8; 6];
    let is_file_form =
        std::io::Read::read_exact(&mut open()?, &mut magic).is_ok() && &magic == IPC_FILE_MAGIC;
    let reader = std::io::BufReader::with_capacity(1 << 20, open()?);
    let bad = move |e: arrow_schema::ArrowError| {
        AppError::Input(format!("dataset {shown}: not a readable Arrow IPC file: {e}"))
    };
    if is_file_form {
        let r = FileReader::try_new(reader, None).map_err(bad.clone())?;
        Ok((r.schema(), Box::new(r.map(move |b| b.map_err(bad.clone())))))
    } else {
        let r = StreamReader::try_new(reader, None).map_err(bad.clone())?;
        Ok((r.schema(), Box::new(r.map(move |b| b.map_err(bad.clone())))))
    }
}
