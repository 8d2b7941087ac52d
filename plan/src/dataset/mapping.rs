//! The reference's column mapping: which column becomes each row field (the user's `parser`,
//! then the automatic aliases), and a row built from one record through it.

use serde_json::{Map, Value};

use super::column_names::{self, ColumnNames};
use super::spec::{
    DatasetSpec, ParserMap, PARSER_TARGETS, PROMPT_ALIASES, PROMPT_BYTES_MAX, ROW_REQUEST_COLUMNS,
};
use crate::error::AppError;
use crate::row::Row;

/// Every column name, in order of first appearance; more than `DATASET_COLUMNS_MAX` is
/// refused.
pub(super) fn column_names<'a, I, K>(rows: I, path: &str) -> Result<Vec<String>, AppError>
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
pub(super) struct ColumnMapping {
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
    pub(super) fn sources(&self) -> impl Iterator<Item = &str> {
        [&self.prompt, &self.system, &self.messages, &self.token_ids, &self.n]
            .into_iter()
            .filter_map(|c| c.as_deref())
            .chain(self.columns.iter().map(|(_, source)| source.as_str()))
    }
}

pub(super) fn column_mapping(
    spec: &DatasetSpec,
    columns: &[String],
) -> Result<ColumnMapping, AppError> {
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
pub(super) fn apply_parser_targets(
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

pub(super) fn build_row(
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
pub(super) fn row_text_bytes(row: &Row) -> usize {
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

pub(super) fn token_list(items: Vec<Value>) -> Option<Vec<u32>> {
    items.into_iter().map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok())).collect()
}
