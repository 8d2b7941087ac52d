//! A video generation run's prompts file, read as the reference's video adapter reads it: the
//! user's `parser` renames, the prompt aliases, then a `prompt` column (required) and any of the
//! video request fields (`loadgen_worker::video_request`), each value checked as it loads. Any
//! other column is refused by name, so a misspelt field never falls back to the server's
//! default unseen.

use serde_json::{Map, Value};

use super::file::read_records;
use super::spec::{Dataset, DatasetSpec, PROMPT_ALIASES, PROMPT_BYTES_MAX};
use crate::error::AppError;
use crate::row::Row;
use loadgen_worker::video_request::{check_column, VIDEO_COLUMNS};

/// Loads a videogen performance dataset (a file; a predefined dataset has no video fields).
pub fn load_videogen_dataset(spec: &DatasetSpec) -> Result<Dataset, AppError> {
    let path = &spec.path;
    if super::is_predefined(spec) {
        return Err(AppError::Input(format!(
            "dataset {}: a predefined dataset cannot feed api_type videogen; give a prompts file \
             with a prompt column",
            spec.display_name()
        )));
    }
    let limit = spec.samples.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let records = read_records(spec, limit)?;
    if records.is_empty() {
        return Err(AppError::Input(format!("dataset {path} has no rows")));
    }
    let rows = records
        .into_iter()
        .enumerate()
        .map(|(i, rec)| video_row(renamed(rec, spec), i, path))
        .collect::<Result<Vec<Row>, AppError>>()?;
    Ok(Dataset { name: spec.display_name(), rows })
}

/// The record with the user's `parser` renames (`target: source`) and then the reference's
/// automatic ones: the first prompt alias present becomes `prompt`, `system_prompt` `system`.
fn renamed(mut rec: Map<String, Value>, spec: &DatasetSpec) -> Map<String, Value> {
    if let Some(parser) = &spec.parser {
        let named = [("prompt", &parser.prompt), ("system", &parser.system)];
        let pairs = named.into_iter().filter_map(|(t, s)| s.as_ref().map(|s| (t, s.as_str())));
        let other = parser.other.iter().map(|(t, s)| (t.as_str(), s.as_str()));
        for (target, source) in pairs.chain(other).collect::<Vec<_>>() {
            if let Some(v) = rec.remove(source) {
                rec.insert(target.to_string(), v);
            }
        }
    }
    if !rec.contains_key("prompt") {
        if let Some(alias) = PROMPT_ALIASES.iter().find(|a| rec.contains_key(**a)) {
            let v = rec.remove(*alias).unwrap_or_default();
            rec.insert("prompt".into(), v);
        }
    }
    if let Some(v) = rec.remove("system_prompt") {
        rec.insert("system".into(), v);
    }
    rec
}

/// One row: its prompt, and its video fields in the request's order.
fn video_row(mut rec: Map<String, Value>, i: usize, path: &str) -> Result<Row, AppError> {
    let bad = |what: String| AppError::Input(format!("dataset {path} row {i}: {what}"));
    let prompt = match rec.remove("prompt") {
        Some(Value::String(s)) => s,
        Some(v) => return Err(bad(format!("column \"prompt\" value {v} is not a string"))),
        None => {
            let listed: Vec<&str> = rec.keys().map(String::as_str).collect();
            return Err(bad(format!(
                "no prompt column (a video request needs one); the row has columns: {}; map one \
                 with parser.prompt=COL",
                listed.join(", ")
            )));
        }
    };
    if prompt.len() > PROMPT_BYTES_MAX {
        return Err(bad(format!(
            "the prompt is {} bytes, over the {PROMPT_BYTES_MAX} byte limit per row",
            prompt.len()
        )));
    }
    for (name, value) in &rec {
        check_column(name, value).map_err(|why| bad(format!("{why}; rename or drop it")))?;
    }
    let mut request_columns = Vec::new();
    for name in VIDEO_COLUMNS {
        let Some(value) = rec.get(name) else { continue };
        if let Some(v) = check_column(name, value).map_err(bad)? {
            request_columns.push((name.to_string(), v));
        }
    }
    Ok(Row { prompt: Some(prompt), request_columns, ..Row::default() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(rec: Value) -> Result<Row, String> {
        let Value::Object(map) = rec else { unreachable!() };
        let spec = DatasetSpec::parse("prompts.jsonl").unwrap();
        video_row(renamed(map, &spec), 3, "prompts.jsonl").map_err(|e| e.to_string())
    }

    #[test]
    fn a_row_keeps_its_prompt_and_its_video_fields_in_request_order() {
        let r =
            row(json!({"seed": 3, "prompt": "p", "negative_prompt": "n", "fps": null})).unwrap();
        assert_eq!(r.prompt.as_deref(), Some("p"));
        let names: Vec<&str> = r.request_columns.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["negative_prompt", "seed"]);
        let aliased = row(json!({"question": "q"})).unwrap();
        assert_eq!(aliased.prompt.as_deref(), Some("q"));
    }

    #[test]
    fn other_columns_stream_and_a_missing_prompt_are_refused_at_load() {
        let err = row(json!({"prompt": "p", "negitive_prompt": "n"})).unwrap_err();
        assert!(
            err.contains("row 3: column \"negitive_prompt\" is not a videogen request"),
            "{err}"
        );
        let err = row(json!({"prompt": "p", "stream": true})).unwrap_err();
        assert!(err.contains("non-streaming"), "{err}");
        let err = row(json!({"prompt": "p", "system_prompt": "s"})).unwrap_err();
        assert!(err.contains("column \"system\""), "{err}");
        let err = row(json!({"negative_prompt": "n"})).unwrap_err();
        assert!(err.contains("no prompt column"), "{err}");
        let err = row(json!({"prompt": "p", "fps": "fast"})).unwrap_err();
        assert!(err.contains("column \"fps\" value \"fast\" is not a whole number"), "{err}");
    }
}
