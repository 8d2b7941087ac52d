//! Datasets: `--dataset PATH[,key=value…]` parsing, file loading (JSONL, JSON, CSV, Parquet,
//! Hugging Face Arrow folders), the reference's column mapping, the reference's predefined
//! datasets (`random` generated here, the others read from local caches), and the built-in
//! synthetic dataset.

mod arrow_folder;
mod column_names;
mod columnar;
mod csv_file;
#[cfg(test)]
mod format_tests;
mod ipc_framing;
mod parquet_file;
mod predefined;
mod random_prompts;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::lax;
use column_names::{ColumnNames, KeysInto};
use serde_json::{Map, Value};

use crate::error::AppError;

/// Columns that become `prompt` when the file has no `prompt` column (the reference's
/// `MakeAdapterCompatible`); at most one of them may be present.
pub const PROMPT_ALIASES: [&str; 6] =
    ["user_prompt", "question", "input", "input_text", "problem", "query"];

/// Number of rows in the built-in synthetic dataset.
pub const SYNTHETIC_ROW_COUNT: usize = 1_000;

/// A loaded dataset: every row materialised before the run.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    /// Name used in reports (the file's stem unless `name=` was given).
    pub name: String,
    pub rows: Vec<Row>,
}

pub use crate::row::Row;

/// Whether a dataset drives the performance phase or an accuracy evaluation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatasetKind {
    #[default]
    Performance,
    Accuracy,
}

/// Column mapping `{target: source}`, as the reference's `parser:` (a `dict[str, str]`):
/// `prompt` and `system` name the prompt columns; any other target renames its source column
/// to the target (`input_tokens: COL` makes COL the token-id prompt); see `PARSER_TARGETS`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParserMap {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Every other target, in the user's order of keys sorted by name.
    #[serde(flatten)]
    pub other: BTreeMap<String, String>,
}

/// The parser targets besides `prompt` and `system` that a run here honours: the columns the
/// row builder reads (`input_tokens`/`token_ids`: token-id prompts; `messages`; `n`) and the
/// prompt aliases, which become the prompt as the reference's auto-mapping makes them.
pub const PARSER_TARGETS: [&str; 17] = [
    "input_tokens",
    "token_ids",
    "messages",
    "n",
    "user_prompt",
    "question",
    "input",
    "input_text",
    "problem",
    "query",
    "stop",
    "logit_bias",
    "user",
    "chat_template",
    "tools",
    "tool_choice",
    "name",
];

/// Columns a row carries into its request as the reference's adapters forward them
/// (`loadgen_worker::request::row_request_keys` says which API sends which): `stop`,
/// `logit_bias`, `user`, `chat_template`, `tools`, `tool_choice`, and `name` on the user
/// message. A messages row's client ISL renders with its `tools` and `chat_template`.
pub const ROW_REQUEST_COLUMNS: [&str; 7] =
    ["stop", "logit_bias", "user", "chat_template", "tools", "tool_choice", "name"];

/// `datasets[].eval_method` (the reference's `EvalMethod`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvalMethod {
    ExactMatch,
    Contains,
    Judge,
}

/// `datasets[].agentic_inference` (the reference's `AgenticInferenceConfig`, its types and
/// defaults); parsed so files validate, refused by a run (`plan::run_refusals`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgenticInference {
    #[serde(default = "default_turn_timeout_s", deserialize_with = "lax::float")]
    pub turn_timeout_s: f64,
    #[serde(default, deserialize_with = "lax::boolean")]
    pub enable_salt: bool,
    #[serde(default, deserialize_with = "lax::boolean")]
    pub inject_tool_delay: bool,
    #[serde(default = "default_routing_headers")]
    pub routing_headers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_int")]
    pub num_trajectories_to_issue: Option<u64>,
    #[serde(default, deserialize_with = "lax::boolean")]
    pub stop_issuing_on_first_user_complete: bool,
}

fn default_turn_timeout_s() -> f64 {
    86_400.0
}

fn default_routing_headers() -> Vec<String> {
    vec!["X-Session-ID".to_string()]
}

/// One dataset entry, as written in YAML `datasets:` or on the command line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatasetSpec {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_string_stripped"
    )]
    pub name: Option<String>,
    #[serde(default, rename = "type", deserialize_with = "lax::choice")]
    pub kind: DatasetKind,
    /// Empty: a predefined dataset named by `name` (the reference's `path: null`).
    #[serde(
        default,
        skip_serializing_if = "String::is_empty",
        deserialize_with = "lax::string_stripped"
    )]
    pub path: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_string_stripped"
    )]
    pub format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lax::opt_int")]
    pub samples: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parser: Option<ParserMap>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy_config: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lax::opt_choice"
    )]
    pub eval_method: Option<EvalMethod>,
    /// Parameters of a predefined dataset's generator (the reference's `generate_params`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_params: Option<BTreeMap<String, serde_json::Value>>,
    /// Per-dataset `model_params` overrides (the reference's `generation_config_override`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_config_override: Option<BTreeMap<String, serde_json::Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agentic_inference: Option<AgenticInference>,
}

impl DatasetSpec {
    /// Parses the command-line form `[perf:|acc:]PATH[,key=value…]`.
    pub fn parse(spec: &str) -> Result<DatasetSpec, AppError> {
        let (kind, rest) = if let Some(rest) = spec.strip_prefix("perf:") {
            (DatasetKind::Performance, rest)
        } else if let Some(rest) = spec.strip_prefix("acc:") {
            (DatasetKind::Accuracy, rest)
        } else {
            (DatasetKind::Performance, spec)
        };
        let mut parts = rest.split(',');
        let path = parts.next().unwrap_or_default().trim();
        if path.is_empty() {
            return Err(AppError::Input(format!("--dataset {spec:?} has no path")));
        }
        let mut out = DatasetSpec { kind, path: path.to_string(), ..DatasetSpec::default() };
        for part in parts.map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = part.split_once('=') else {
                let hint = match part.split_once(':') {
                    Some((k, v)) => format!(" (write {k}={v})"),
                    None => String::new(),
                };
                return Err(AppError::Input(format!(
                    "--dataset option {part:?} is not key=value{hint}"
                )));
            };
            out.set_option(key.trim(), value.trim())?;
        }
        Ok(out)
    }

    fn set_option(&mut self, key: &str, value: &str) -> Result<(), AppError> {
        match key {
            "name" => self.name = Some(value.to_string()),
            "format" => self.format = Some(value.to_string()),
            "type" => {
                self.kind = match value {
                    "performance" | "perf" => DatasetKind::Performance,
                    "accuracy" | "acc" => DatasetKind::Accuracy,
                    _ => {
                        return Err(AppError::Input(format!(
                            "dataset type {value:?} is not performance or accuracy"
                        )))
                    }
                }
            }
            "samples" => {
                let n = value.parse::<u64>().map_err(|_| {
                    AppError::Input(format!("dataset samples={value:?} is not a whole number"))
                })?;
                self.samples = Some(n);
            }
            "parser.prompt" => {
                self.parser.get_or_insert_with(Default::default).prompt = Some(value.into())
            }
            "parser.system" => {
                self.parser.get_or_insert_with(Default::default).system = Some(value.into())
            }
            _ if key.starts_with("parser.") && key.len() > "parser.".len() => {
                let target = key["parser.".len()..].to_string();
                self.parser.get_or_insert_with(Default::default).other.insert(target, value.into());
            }
            _ if key.starts_with("accuracy_config.") => {
                let sub = &key["accuracy_config.".len()..];
                self.accuracy_config
                    .get_or_insert_with(Default::default)
                    .insert(sub.to_string(), Value::String(value.to_string()));
            }
            _ => {
                return Err(AppError::Input(format!(
                    "unknown dataset option {key:?} (known: name, type, format, samples, \
                     parser.TARGET, accuracy_config.*)"
                )))
            }
        }
        Ok(())
    }

    /// The dataset's name: `name=` if given, else the file's stem.
    pub fn display_name(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        Path::new(&self.path)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.path.clone())
    }
}

/// Loads a dataset from its command-line form `PATH[,parser.prompt=COL,…]`.
#[allow(dead_code, reason = "library-style entry point; the plan loads through DatasetSpec")]
pub fn load_dataset(spec: &str) -> Result<Dataset, AppError> {
    load_dataset_spec(&DatasetSpec::parse(spec)?)
}

/// The longest prompt a row may carry, in bytes (prompt, system prompt and message texts
/// together), about a million tokens. The client tokenizer's peak memory grows with the
/// prompt: measured at about 140 bytes per prompt byte for a byte-level BPE tokenizer and
/// 370 for the one-token-per-character test tokenizer (a 50 MB prompt reached 8.3 GB), so
/// one prompt at this bound costs at most about 1.5 GB (docs/CLI.md, Datasets).
pub const PROMPT_BYTES_MAX: usize = 4 << 20;

/// The longest JSON Lines line read, in bytes: the prompt bound plus room for JSON escapes
/// and the other columns. A longer line is refused without being held in memory.
pub const LINE_BYTES_MAX: usize = 3 * PROMPT_BYTES_MAX;

/// The most columns a dataset file may have (for JSON Lines and JSON, the keys of all rows
/// together). Prompt datasets have tens; the bound keeps a hostile file's column bookkeeping
/// and its error messages small (docs/CLI.md, Datasets).
pub const DATASET_COLUMNS_MAX: usize = 10_000;

pub use predefined::predefined_refusals;

/// Loads a dataset entry: reads the file, applies the column mapping, builds the rows.
/// `random` without `generate_params.tokenizer` fails here (no run tokenizer); the plan loads
/// through `load_dataset_spec_with`, which also gives the notes this drops.
pub fn load_dataset_spec(spec: &DatasetSpec) -> Result<Dataset, AppError> {
    load_dataset_spec_with(spec, None, &mut Vec::new())
}

/// `load_dataset_spec`, with the run's tokenizer (`--tokenizer`, else the model name) for the
/// `random` dataset when its `generate_params` name none; what loading has to say (a
/// predefined dataset's ignored `parser`) goes into `notes`.
pub fn load_dataset_spec_with(
    spec: &DatasetSpec,
    run_tokenizer: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<Dataset, AppError> {
    if predefined::predefined_name(spec).is_some() {
        return predefined::load_predefined(spec, run_tokenizer, notes);
    }
    load_file_dataset(spec)
}

fn load_file_dataset(spec: &DatasetSpec) -> Result<Dataset, AppError> {
    let format = detect_format(spec)?;
    let limit = spec.samples.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let rows = match format {
        // Read line by line and only up to `samples=N`: a file larger than memory is fine.
        Format::Jsonl => jsonl_rows(spec, limit)?,
        Format::Json => records_to_rows(parse_json(&read_text(spec)?, &spec.path)?, spec, limit)?,
        Format::Csv => {
            records_to_rows(csv_file::parse_csv(&read_text(spec)?, &spec.path)?, spec, limit)?
        }
        Format::Parquet => parquet_file::parquet_rows(spec, limit)?,
        Format::Arrow => arrow_folder::arrow_rows(spec, limit)?,
    };
    Ok(Dataset { name: spec.display_name(), rows })
}

/// True when `spec` names one of the reference's predefined datasets (no file of its own).
pub fn is_predefined(spec: &DatasetSpec) -> bool {
    predefined::predefined_name(spec).is_some()
}

/// One column of a dataset file (an accuracy dataset's ground truth), a value per row up to
/// `samples=`; `None` where a row lacks it. A `parser:` target named `column` reads its source.
/// An accuracy dataset's rows and its `column` (`load_dataset_spec` and `read_column`), a
/// predefined dataset's from one read of its cache; its notes go into `notes`.
pub fn load_dataset_and_column(
    spec: &DatasetSpec,
    column: &str,
    notes: &mut Vec<String>,
) -> Result<(Dataset, Vec<Option<Value>>), AppError> {
    if is_predefined(spec) {
        return predefined::load_predefined_with_column(spec, column, notes);
    }
    Ok((load_file_dataset(spec)?, read_column(spec, column)?))
}

/// A predefined dataset's column comes from its processed table, as the reference's scorer
/// reads it (`predefined::predefined_column`).
pub fn read_column(spec: &DatasetSpec, column: &str) -> Result<Vec<Option<Value>>, AppError> {
    if is_predefined(spec) {
        return predefined::predefined_column(spec, column);
    }
    let limit = spec.samples.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let source = spec.parser.as_ref().and_then(|p| p.other.get(column)).map_or(column, |s| s);
    let records = read_records(spec, limit)?;
    Ok(records.into_iter().map(|mut r| r.remove(source)).collect())
}

/// Every column of a dataset file as JSON records (at most `limit`), without the column
/// mapping: the predefined datasets build their prompts from several columns.
fn read_records(spec: &DatasetSpec, limit: usize) -> Result<Vec<Map<String, Value>>, AppError> {
    let mut records = match detect_format(spec)? {
        Format::Jsonl => {
            let mut out = Vec::new();
            for_each_line(spec, limit, |line_no, line| {
                let rec: Map<String, Value> = serde_json::from_str(line).map_err(|e| {
                    AppError::Input(format!("dataset {} line {line_no}: {e}", spec.path))
                })?;
                out.push(rec);
                Ok(())
            })?;
            out
        }
        Format::Json => parse_json(&read_text(spec)?, &spec.path)?,
        Format::Csv => csv_file::parse_csv(&read_text(spec)?, &spec.path)?,
        Format::Parquet => parquet_file::parquet_records(spec, limit)?,
        Format::Arrow => arrow_folder::arrow_records(spec, limit)?,
    };
    records.truncate(limit);
    for record in &records {
        column_names::check_column_count(&spec.path, record.len())?;
    }
    Ok(records)
}

fn open_dataset(spec: &DatasetSpec) -> Result<std::fs::File, AppError> {
    match std::fs::File::open(&spec.path) {
        Ok(file) => Ok(file),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(AppError::Input(format!("dataset file not found: {}", spec.path)))
        }
        Err(e) => Err(AppError::Setup(format!("cannot read dataset {}: {e}", spec.path))),
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
fn read_text(spec: &DatasetSpec) -> Result<String, AppError> {
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut open_dataset(spec)?, &mut bytes)
        .map_err(|e| AppError::Setup(format!("cannot read dataset {}: {e}", spec.path)))?;
    utf8_text(&bytes, &spec.path, 1).map(str::to_string)
}

/// Calls `each(line_number, text)` for every non-blank line of a JSON Lines file, at most
/// `limit` of them, holding one line at a time; stops early when `each` returns false.
fn for_each_line(
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

fn newline_at(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&b| b == b'\n')
}

fn records_to_rows(
    mut records: Vec<Map<String, Value>>,
    spec: &DatasetSpec,
    limit: usize,
) -> Result<Vec<Row>, AppError> {
    if records.is_empty() {
        return Err(AppError::Input(format!("dataset {} has no rows", spec.path)));
    }
    records.truncate(limit);
    let mapping =
        column_mapping(spec, &column_names(records.iter().map(|r| r.keys()), &spec.path)?)?;
    records
        .into_iter()
        .enumerate()
        .map(|(i, rec)| build_row(rec, &mapping, i, &spec.path))
        .collect()
}

/// JSON Lines in two passes, so that only the finished rows are ever held: the first
/// reads just the keys (for the column mapping), the second builds each row from its line.
fn jsonl_rows(spec: &DatasetSpec, limit: usize) -> Result<Vec<Row>, AppError> {
    use serde::de::DeserializeSeed as _;
    let path = &spec.path;
    let mut columns = ColumnNames::default();
    let mut any_row = false;
    for_each_line(spec, limit, |line_no, line| {
        let mut de = serde_json::Deserializer::from_str(line);
        let keys = KeysInto(&mut columns).deserialize(&mut de).and_then(|()| de.end());
        column_names::check_column_count(path, columns.len())?;
        keys.map_err(|e| AppError::Input(format!("dataset {path} line {line_no}: {e}")))?;
        any_row = true;
        Ok(())
    })?;
    if !any_row {
        return Err(AppError::Input(format!("dataset {path} has no rows")));
    }
    let mapping = column_mapping(spec, &columns.into_vec())?;
    let mut rows = Vec::new();
    for_each_line(spec, limit, |line_no, line| {
        let record: Map<String, Value> = serde_json::from_str(line)
            .map_err(|e| AppError::Input(format!("dataset {path} line {line_no}: {e}")))?;
        rows.push(build_row(record, &mapping, rows.len(), path)?);
        Ok(())
    })?;
    Ok(rows)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Jsonl,
    Json,
    Csv,
    Parquet,
    Arrow,
}

fn detect_format(spec: &DatasetSpec) -> Result<Format, AppError> {
    let ext = match &spec.format {
        Some(f) => f.trim_start_matches('.').to_ascii_lowercase(),
        None if arrow_folder::is_arrow_folder(Path::new(&spec.path)) => "arrow".to_string(),
        None if Path::new(&spec.path).is_dir() => {
            return Err(AppError::Input(format!(
                "dataset {} is a folder without state.json; give a file, or a folder written \
                 by save_to_disk (or set format=arrow)",
                spec.path
            )))
        }
        None => Path::new(&spec.path)
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default(),
    };
    match ext.as_str() {
        "jsonl" | "ndjson" => Ok(Format::Jsonl),
        "json" => Ok(Format::Json),
        "csv" => Ok(Format::Csv),
        "parquet" | "pq" => Ok(Format::Parquet),
        "arrow" => Ok(Format::Arrow),
        other => Err(AppError::Input(format!(
            "dataset {}: format {other:?} is not supported (use .jsonl, .json, .csv, \
             .parquet or a save_to_disk folder, or set format=jsonl|json|csv|parquet|arrow)",
            spec.path
        ))),
    }
}

fn parse_json(text: &str, path: &str) -> Result<Vec<Map<String, Value>>, AppError> {
    let value: Value =
        serde_json::from_str(text).map_err(|e| AppError::Input(format!("dataset {path}: {e}")))?;
    match value {
        Value::Array(items) => items
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::Object(map) => Ok(map),
                _ => Err(AppError::Input(format!("dataset {path} item {i}: not a JSON object"))),
            })
            .collect(),
        Value::Object(columns) => columns_to_records(columns, path),
        _ => Err(AppError::Input(format!(
            "dataset {path}: expected an array of objects or an object of columns"
        ))),
    }
}

/// Turns `{col: [v0, v1, …]}` into records, as pandas reads a column-oriented file.
fn columns_to_records(
    columns: Map<String, Value>,
    path: &str,
) -> Result<Vec<Map<String, Value>>, AppError> {
    let mut out: Vec<Map<String, Value>> = Vec::new();
    for (name, col) in columns {
        let Value::Array(values) = col else {
            return Err(AppError::Input(format!(
                "dataset {path}: column {name:?} is not an array"
            )));
        };
        if out.is_empty() {
            out.resize(values.len(), Map::new());
        }
        if values.len() != out.len() {
            return Err(AppError::Input(format!(
                "dataset {path}: column {name:?} has {} values, others have {}",
                values.len(),
                out.len()
            )));
        }
        for (rec, v) in out.iter_mut().zip(values) {
            rec.insert(name.clone(), v);
        }
    }
    Ok(out)
}

/// Every column name, in order of first appearance; more than `DATASET_COLUMNS_MAX` is
/// refused.
fn column_names<'a, I, K>(rows: I, path: &str) -> Result<Vec<String>, AppError>
where
    I: IntoIterator<Item = K>,
    K: IntoIterator<Item = &'a String>,
{
    let mut names = ColumnNames::default();
    for keys in rows {
        for key in keys {
            names.insert(key);
        }
        column_names::check_column_count(path, names.len())?;
    }
    Ok(names.into_vec())
}

/// Where each row field comes from after the user's remap and the automatic aliases.
#[derive(Debug, Default, PartialEq, Eq)]
struct ColumnMapping {
    prompt: Option<String>,
    system: Option<String>,
    messages: Option<String>,
    token_ids: Option<String>,
    n: Option<String>,
    /// `(target, source)` of each request column (`ROW_REQUEST_COLUMNS`) the rows carry.
    columns: Vec<(String, String)>,
}

impl ColumnMapping {
    /// The source columns the rows read (columnar readers decode only these).
    fn sources(&self) -> impl Iterator<Item = &str> {
        [&self.prompt, &self.system, &self.messages, &self.token_ids, &self.n]
            .into_iter()
            .filter_map(|c| c.as_deref())
            .chain(self.columns.iter().map(|(_, source)| source.as_str()))
    }
}

fn column_mapping(spec: &DatasetSpec, columns: &[String]) -> Result<ColumnMapping, AppError> {
    column_names::check_column_count(&spec.path, columns.len())?;
    let has = |c: &str| columns.iter().any(|n| n == c);
    let listed = columns.join(", ");
    let parser = spec.parser.clone().unwrap_or_default();
    let mut map = ColumnMapping::default();
    for (target, source) in [("prompt", &parser.prompt), ("system", &parser.system)] {
        let Some(source) = source else { continue };
        if !has(source) {
            return Err(AppError::Input(format!(
                "dataset {}: column {source:?} (parser.{target}) not found; the file has \
                 columns: {listed}",
                spec.path
            )));
        }
        match target {
            "prompt" => map.prompt = Some(source.clone()),
            _ => map.system = Some(source.clone()),
        }
    }
    apply_parser_targets(spec, &parser, &has, &listed, &mut map)?;
    if map.prompt.is_none() {
        if has("prompt") {
            map.prompt = Some("prompt".into());
        } else {
            let present: Vec<&str> = PROMPT_ALIASES.iter().copied().filter(|a| has(a)).collect();
            if present.len() > 1 {
                return Err(AppError::Input(format!(
                    "dataset {}: columns {} could each be the prompt; choose one with \
                     parser.prompt=COL",
                    spec.path,
                    present.join(", ")
                )));
            }
            map.prompt = present.first().map(|s| s.to_string());
        }
    }
    if map.system.is_none() {
        map.system = ["system", "system_prompt"].iter().find(|c| has(c)).map(|s| s.to_string());
    }
    if map.messages.is_none() {
        map.messages = has("messages").then(|| "messages".to_string());
    }
    if map.token_ids.is_none() {
        map.token_ids =
            ["token_ids", "input_tokens"].iter().find(|c| has(c)).map(|s| s.to_string());
    }
    if map.n.is_none() {
        map.n = has("n").then(|| "n".to_string());
    }
    for column in ROW_REQUEST_COLUMNS {
        if has(column) && !map.columns.iter().any(|(target, _)| target == column) {
            map.columns.push((column.to_string(), column.to_string()));
        }
    }
    map.columns.sort_by_key(|(target, _)| ROW_REQUEST_COLUMNS.iter().position(|c| c == target));
    if map.prompt.is_none() && map.messages.is_none() && map.token_ids.is_none() {
        return Err(AppError::Input(format!(
            "dataset {}: no prompt column; the file has columns: {listed}; map one with \
             --dataset {},parser.prompt=COL",
            spec.path, spec.path
        )));
    }
    Ok(map)
}

/// The parser's targets other than `prompt` and `system`: the reference renames each source
/// column to its target, so a target the row builder reads takes that column; a prompt alias
/// (`input: COL`) becomes the prompt, as the reference's auto-mapping makes it.
fn apply_parser_targets(
    spec: &DatasetSpec,
    parser: &ParserMap,
    has: &dyn Fn(&str) -> bool,
    listed: &str,
    map: &mut ColumnMapping,
) -> Result<(), AppError> {
    for (target, source) in &parser.other {
        if !PARSER_TARGETS.contains(&target.as_str()) {
            return Err(AppError::Input(format!(
                "dataset {}: parser.{target} is not supported yet (targets here: prompt, \
                 system, {}); leave it out",
                spec.path,
                PARSER_TARGETS.join(", ")
            )));
        }
        if !has(source) {
            return Err(AppError::Input(format!(
                "dataset {}: column {source:?} (parser.{target}) not found; the file has \
                 columns: {listed}",
                spec.path
            )));
        }
        if ROW_REQUEST_COLUMNS.contains(&target.as_str()) {
            map.columns.push((target.clone(), source.clone()));
            continue;
        }
        let slot = match target.as_str() {
            "input_tokens" | "token_ids" => &mut map.token_ids,
            "messages" => &mut map.messages,
            "n" => &mut map.n,
            _ => &mut map.prompt,
        };
        slot.get_or_insert_with(|| source.clone());
    }
    Ok(())
}

fn build_row(
    mut rec: Map<String, Value>,
    map: &ColumnMapping,
    index: usize,
    path: &str,
) -> Result<Row, AppError> {
    let bad = |col: &str, what: &str| {
        AppError::Input(format!("dataset {path} row {index}: column {col:?} {what}"))
    };
    let mut take = |col: &Option<String>| col.as_ref().and_then(|c| rec.remove(c));
    let mut row = Row::default();
    match take(&map.prompt) {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => row.prompt = Some(s),
        Some(Value::Array(items)) => {
            let col = map.prompt.as_deref().unwrap_or("prompt");
            row.token_ids = Some(token_list(items).ok_or_else(|| bad(col, "is not a string"))?);
        }
        Some(_) => return Err(bad(map.prompt.as_deref().unwrap_or("prompt"), "is not a string")),
    }
    match take(&map.system) {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => row.system = Some(s),
        Some(_) => return Err(bad(map.system.as_deref().unwrap_or("system"), "is not a string")),
    }
    match take(&map.messages) {
        None | Some(Value::Null) => {}
        Some(v @ Value::Array(_)) => row.messages = Some(v),
        Some(Value::String(s)) => {
            let v: Value =
                serde_json::from_str(&s).map_err(|_| bad("messages", "is not a JSON list"))?;
            row.messages = Some(v);
        }
        Some(_) => return Err(bad("messages", "is not a list")),
    }
    if let Some(v) = take(&map.token_ids) {
        let col = map.token_ids.as_deref().unwrap_or("token_ids");
        match v {
            Value::Null => {}
            Value::Array(items) => {
                row.token_ids =
                    Some(token_list(items).ok_or_else(|| bad(col, "is not a list of token ids"))?)
            }
            _ => return Err(bad(col, "is not a list of token ids")),
        }
    }
    match take(&map.n) {
        None | Some(Value::Null) => {}
        Some(v) => {
            let n = v
                .as_u64()
                .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad("n", "is not a whole number"))?;
            row.n = Some(n);
        }
    }
    for (target, source) in &map.columns {
        match rec.remove(source) {
            None | Some(Value::Null) => {}
            Some(v) => row.request_columns.push((target.clone(), v)),
        }
    }
    if row.prompt.is_none() && row.messages.is_none() && row.token_ids.is_none() {
        return Err(AppError::Input(format!(
            "dataset {path} row {index}: no prompt, messages or token ids"
        )));
    }
    let text_bytes = row_text_bytes(&row);
    if text_bytes > PROMPT_BYTES_MAX {
        return Err(AppError::Input(format!(
            "dataset {path} row {index}: the prompt is {text_bytes} bytes, over the \
             {PROMPT_BYTES_MAX} byte limit per row that bounds the tokenizer's memory; shorten \
             or split it"
        )));
    }
    Ok(row)
}

/// The bytes of text a row sends and the client tokenizer reads: prompt, system prompt and
/// every string inside its messages.
fn row_text_bytes(row: &Row) -> usize {
    let text = |s: &Option<String>| s.as_ref().map_or(0, String::len);
    text(&row.prompt) + text(&row.system) + row.messages.as_ref().map_or(0, string_bytes)
}

/// Bytes of every string inside a JSON value (a prompt's messages), as a row's text is counted
/// against `PROMPT_BYTES_MAX`.
pub fn string_bytes(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Array(items) => items.iter().map(string_bytes).sum(),
        Value::Object(map) => map.values().map(string_bytes).sum(),
        _ => 0,
    }
}

fn token_list(items: Vec<Value>) -> Option<Vec<u32>> {
    items.into_iter().map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok())).collect()
}

const SYNTHETIC_TEMPLATES: [&str; 10] = [
    "Write a short story about",
    "Explain the basics of",
    "Analyze the importance of",
    "Summarize recent progress in",
    "Describe a practical use of",
    "List three open problems in",
    "Compare two approaches to",
    "Give a beginner's guide to",
    "Discuss the main risks of",
    "Outline a lesson plan on",
];

const SYNTHETIC_TOPICS: [&str; 10] = [
    "machine learning",
    "renewable energy",
    "ocean currents",
    "quantum computing",
    "urban gardening",
    "ancient history",
    "space exploration",
    "public health",
    "data privacy",
    "music theory",
];

/// The prompt of synthetic row `i`: one of 10 templates × 10 topics, tagged with the case.
pub fn synthetic_prompt(i: usize) -> String {
    let template = SYNTHETIC_TEMPLATES[i % SYNTHETIC_TEMPLATES.len()];
    let topic = SYNTHETIC_TOPICS[(i / SYNTHETIC_TEMPLATES.len()) % SYNTHETIC_TOPICS.len()];
    format!("{template} {topic} (case {i})")
}

/// The built-in dataset used when no `--dataset` is given: 1,000 deterministic prompts,
/// the same ones as `tests/assets/datasets/dummy_1k.jsonl`.
pub fn synthetic_dataset() -> Dataset {
    let rows = (0..SYNTHETIC_ROW_COUNT)
        .map(|i| Row { prompt: Some(synthetic_prompt(i)), ..Row::default() })
        .collect();
    Dataset { name: "synthetic".to_string(), rows }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    fn asset(path: &str) -> String {
        format!("{}/../tests/assets/{path}", env!("CARGO_MANIFEST_DIR"))
    }

    fn temp_file(name: &str, text: &str) -> (tempdir::Dir, String) {
        let dir = tempdir::Dir::new(name);
        let path = dir.path.join(name);
        std::fs::File::create(&path).unwrap().write_all(text.as_bytes()).unwrap();
        let p = path.display().to_string();
        (dir, p)
    }

    /// A scratch folder removed on drop (no extra dependency for two tests).
    mod tempdir {
        pub struct Dir {
            pub path: std::path::PathBuf,
        }
        impl Dir {
            pub fn new(tag: &str) -> Dir {
                let path = std::env::temp_dir().join(format!(
                    "llm-loadgen-dataset-{}-{tag}-{:?}",
                    std::process::id(),
                    std::thread::current().id()
                ));
                std::fs::create_dir_all(&path).unwrap();
                Dir { path }
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.path);
            }
        }
    }

    #[test]
    fn dummy_1k_asset_holds_the_synthetic_prompts() {
        let spec = format!("{},parser.prompt=text_input", asset("datasets/dummy_1k.jsonl"));
        let ds = load_dataset(&spec).unwrap();
        assert_eq!(ds.name, "dummy_1k");
        assert_eq!(ds.rows, synthetic_dataset().rows);
        let lens: Vec<usize> = ds.rows.iter().map(|r| r.prompt.as_ref().unwrap().len()).collect();
        assert_eq!(*lens.iter().min().unwrap(), 44);
        assert_eq!(*lens.iter().max().unwrap(), 57);
    }

    #[test]
    fn missing_prompt_column_names_the_columns_the_file_has() {
        let err = load_dataset(&asset("datasets/dummy_1k.jsonl")).unwrap_err();
        let AppError::Input(msg) = &err else { panic!("{err:?}") };
        assert!(msg.contains("no prompt column"), "{msg}");
        assert!(msg.contains("text_input") && msg.contains("ref_output"), "{msg}");
        assert!(msg.contains("parser.prompt=COL"), "{msg}");
        let err = load_dataset(&format!("{},parser.prompt=nope", asset("datasets/dummy_1k.jsonl")))
            .unwrap_err();
        let AppError::Input(msg) = &err else { panic!("{err:?}") };
        assert!(msg.contains("column \"nope\" (parser.prompt) not found"), "{msg}");
        assert!(msg.contains("the file has columns: ") && msg.contains("text_input"), "{msg}");
    }

    #[test]
    fn prompt_aliases_map_and_conflict() {
        let (_d, p) =
            temp_file("q.jsonl", "{\"question\": \"why?\", \"system_prompt\": \"be brief\"}\n");
        let ds = load_dataset(&p).unwrap();
        assert_eq!(ds.rows[0].prompt.as_deref(), Some("why?"));
        assert_eq!(ds.rows[0].system.as_deref(), Some("be brief"));
        let (_d2, p2) = temp_file("two.jsonl", "{\"question\": \"a\", \"query\": \"b\"}\n");
        let err = load_dataset(&p2).unwrap_err();
        assert!(err.to_string().contains("question, query"), "{err}");
        // An explicit mapping settles the conflict.
        let ds = load_dataset(&format!("{p2},parser.prompt=query")).unwrap();
        assert_eq!(ds.rows[0].prompt.as_deref(), Some("b"));
    }

    #[test]
    fn json_csv_messages_token_ids_and_n() {
        let (_d, p) = temp_file("a.json", r#"[{"prompt": "hi", "n": 2}, {"prompt": [1, 2, 3]}]"#);
        let ds = load_dataset(&p).unwrap();
        assert_eq!(ds.rows[0].n, Some(2));
        assert_eq!(ds.rows[1].token_ids, Some(vec![1, 2, 3]));
        let (_d, p) = temp_file("c.csv", "id,text\n1,\"hello, \"\"world\"\"\"\n2,plain\n");
        let ds = load_dataset(&format!("{p},parser.prompt=text")).unwrap();
        assert_eq!(ds.rows[0].prompt.as_deref(), Some("hello, \"world\""));
        assert_eq!(ds.rows[1].prompt.as_deref(), Some("plain"));
        let (_d, p) =
            temp_file("m.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n");
        let ds = load_dataset(&p).unwrap();
        assert!(ds.rows[0].messages.is_some());
        let (_d, p) =
            temp_file("s.jsonl", "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n{\"prompt\": \"c\"}\n");
        assert_eq!(load_dataset(&format!("{p},samples=2")).unwrap().rows.len(), 2);
    }

    fn temp_bytes(name: &str, bytes: &[u8]) -> (tempdir::Dir, String) {
        let dir = tempdir::Dir::new(name);
        let path = dir.path.join(name);
        std::fs::write(&path, bytes).unwrap();
        let p = path.display().to_string();
        (dir, p)
    }

    #[test]
    fn a_non_utf8_dataset_is_bad_input_with_its_line() {
        let cases: [(&str, &[u8], &str); 3] = [
            ("bad.jsonl", b"{\"prompt\": \"a\"}\n\n{\"prompt\": \"b\xff\"}\n", "line 3"),
            ("bad.csv", b"prompt\nok\nfine\nbad\xfe\n", "line 4"),
            ("bad.json", b"[{\"prompt\": \"a\"},\n {\"prompt\": \"\xc3\"}]", "line 2"),
        ];
        for (name, bytes, line) in cases {
            let (_d, p) = temp_bytes(name, bytes);
            let err = load_dataset(&p).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{name}: {err}");
            let msg = err.to_string();
            assert!(msg.contains(&p) && msg.contains(line), "{name}: {msg}");
            assert!(msg.contains("not UTF-8"), "{name}: {msg}");
        }
    }

    #[test]
    fn a_bom_is_accepted() {
        let cases: [(&str, &[u8]); 3] = [
            ("bom.jsonl", b"\xEF\xBB\xBF{\"prompt\": \"hi\"}\n{\"prompt\": \"yo\"}\n"),
            ("bom.csv", b"\xEF\xBB\xBFprompt\nhi\nyo\n"),
            ("bom.json", b"\xEF\xBB\xBF[{\"prompt\": \"hi\"}, {\"prompt\": \"yo\"}]"),
        ];
        for (name, bytes) in cases {
            let (_d, p) = temp_bytes(name, bytes);
            let ds = load_dataset(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            let prompts: Vec<_> = ds.rows.iter().map(|r| r.prompt.clone().unwrap()).collect();
            assert_eq!(prompts, ["hi", "yo"], "{name}");
        }
    }

    #[test]
    fn an_oversized_prompt_is_refused_with_its_row() {
        let big = "x".repeat(PROMPT_BYTES_MAX + 1);
        let text = format!("{{\"prompt\": \"a\"}}\n{{\"prompt\": \"{big}\"}}\n");
        let (_d, p) = temp_file("big.jsonl", &text);
        let err = load_dataset(&p).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        let msg = err.to_string();
        assert!(msg.contains(&format!("{p} row 1: the prompt is {} bytes", big.len())), "{msg}");
        assert!(msg.contains(&PROMPT_BYTES_MAX.to_string()), "{msg}");
        // A line past the line bound is refused without being held, with its size.
        let huge = "y".repeat(LINE_BYTES_MAX + 10);
        let text = format!("{{\"prompt\": \"a\"}}\n{{\"prompt\": \"{huge}\"}}\n");
        let (_d, p) = temp_file("huge.jsonl", &text);
        let msg = load_dataset(&p).unwrap_err().to_string();
        let line_bytes = huge.len() + "{\"prompt\": \"\"}\n".len();
        assert!(msg.contains(&format!("row 1 (line 2) is {line_bytes} bytes")), "{msg}");
        let (_d, p) = temp_file("sys.csv", &format!("prompt,system\nhi,{big}\n"));
        let msg = load_dataset(&p).unwrap_err().to_string();
        assert!(msg.contains("row 0: the prompt is"), "{msg}");
    }

    #[test]
    fn rows_past_samples_are_not_read() {
        let (_d, p) =
            temp_bytes("tail.jsonl", b"{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n\xff\xfe");
        let ds = load_dataset(&format!("{p},samples=2")).unwrap();
        assert_eq!(ds.rows.len(), 2);
        assert!(load_dataset(&p).unwrap_err().to_string().contains("line 3"));
    }

    #[test]
    fn bad_files_and_specs_are_input_errors() {
        let err = load_dataset("/nonexistent/x.jsonl").unwrap_err();
        assert_eq!(err, AppError::Input("dataset file not found: /nonexistent/x.jsonl".into()));
        let (_d, p) = temp_file("bad.jsonl", "{\"prompt\": \"a\"}\n{oops\n");
        let err = load_dataset(&p).unwrap_err();
        assert!(matches!(&err, AppError::Input(m) if m.contains("line 2")), "{err}");
        let (_d, p) = temp_file("x.parquet", "");
        assert!(matches!(load_dataset(&p), Err(AppError::Input(m)) if m.contains("parquet")));
        for (spec, needle) in [
            ("a.jsonl,parser.prompt:text", "write parser.prompt=text"),
            ("a.jsonl,parser.=x", "unknown dataset option \"parser.\""),
            ("a.jsonl,colour=red", "unknown dataset option \"colour\""),
            ("a.jsonl,samples=many", "not a whole number"),
        ] {
            let err = DatasetSpec::parse(spec).unwrap_err();
            assert!(err.to_string().contains(needle), "{spec}: {err}");
            assert_eq!(err.exit_code(), 2);
        }
        let spec = DatasetSpec::parse("acc:x.jsonl,name=n,parser.system=sys").unwrap();
        assert_eq!(spec.kind, DatasetKind::Accuracy);
        assert_eq!(spec.display_name(), "n");
        assert_eq!(spec.parser.unwrap().system.as_deref(), Some("sys"));
    }

    fn thread_count() -> usize {
        std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(0)
    }

    /// Counting runs before the fork, when no thread may exist: it must never start the
    /// tokenizers crate's rayon pool. Checked in a child test process run with one test
    /// thread, so no other test can start threads meanwhile.
    #[test]
    fn counting_starts_no_threads() {
        const CHILD: &str = "LLM_LOADGEN_THREAD_CHECK_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let tok = crate::tokenizer::Tokenizer::load(&asset("tokenizers/char_chat")).unwrap();
            let before = thread_count();
            let rows = synthetic_dataset().rows;
            let total: u64 = rows.iter().map(|r| u64::from(tok.count_row(r).unwrap())).sum();
            let chat = serde_json::json!([{"role": "user", "content": "hi"}]);
            tok.count_row(&Row { messages: Some(chat), ..Row::default() }).unwrap();
            assert!(total > 40_000);
            assert_eq!(thread_count(), before, "counting started threads");
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["dataset::tests::counting_starts_no_threads", "--exact", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("1 passed"), "{text}");
    }
}
