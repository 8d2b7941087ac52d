//! What a dataset entry says (`DatasetSpec`, its kinds, parser map and agentic keys), what a
//! loaded dataset is, and the bounds every reader holds a file to.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::AppError;
use crate::lax;

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
