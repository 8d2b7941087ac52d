//! A logged `TextModelOutput`'s tool calls as the one compact JSON array a run counts and
//! scores: a list of call objects is taken as written (every writer of these logs, the
//! reference's and this tool's, writes compact JSON); a streamed log's list of delta lists is
//! merged as the reference's `merge_tool_calls` merges it, into the form the worker writes
//! (`{"type", "function": {"arguments", "name"?}, "id"?}` in index order).

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;

/// The calls' JSON array, `None` for null or an empty list; `Err` when it is not a list.
pub fn calls_json(raw: &RawValue) -> Result<Option<Cow<'_, str>>, String> {
    let text = raw.get();
    if text == "null" {
        return Ok(None);
    }
    let list: Vec<&RawValue> =
        serde_json::from_str(text).map_err(|_| format!("not a list ({})", first_chars(text)))?;
    match list.first() {
        None => Ok(None),
        Some(first) if first.get().starts_with('[') => merge_chunks(&list).map(Some),
        Some(_) => Ok(Some(Cow::Borrowed(text))),
    }
}

/// Merges streamed delta lists by `index`: each call's last non-empty id, type and name, its
/// argument pieces joined.
fn merge_chunks(chunks: &[&RawValue]) -> Result<Cow<'static, str>, String> {
    #[derive(Default)]
    struct Call {
        kind: String,
        id: Option<String>,
        name: Option<String>,
        arguments: String,
    }
    let mut merged: BTreeMap<i64, Call> = BTreeMap::new();
    for chunk in chunks {
        let deltas: Vec<Value> = serde_json::from_str(chunk.get()).map_err(|_| {
            format!("a streamed chunk is not a list ({})", first_chars(chunk.get()))
        })?;
        for delta in &deltas {
            let index = delta.get("index").and_then(Value::as_i64).unwrap_or(0);
            let call = merged
                .entry(index)
                .or_insert_with(|| Call { kind: "function".into(), ..Call::default() });
            if let Some(id) = text(delta.get("id")) {
                call.id = Some(id.to_string());
            }
            if let Some(kind) = text(delta.get("type")) {
                call.kind = kind.to_string();
            }
            let function = delta.get("function");
            if let Some(name) = text(function.and_then(|f| f.get("name"))) {
                call.name = Some(name.to_string());
            }
            if let Some(args) = text(function.and_then(|f| f.get("arguments"))) {
                call.arguments.push_str(args);
            }
        }
    }
    let mut out = String::from("[");
    for (i, call) in merged.values().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"type\":");
        out.push_str(&json_str(&call.kind));
        out.push_str(",\"function\":{\"arguments\":");
        out.push_str(&json_str(&call.arguments));
        if let Some(name) = &call.name {
            out.push_str(",\"name\":");
            out.push_str(&json_str(name));
        }
        out.push('}');
        if let Some(id) = &call.id {
            out.push_str(",\"id\":");
            out.push_str(&json_str(id));
        }
        out.push('}');
    }
    out.push(']');
    Ok(Cow::Owned(out))
}

/// A non-empty string value (the reference takes a field only when it is truthy).
fn text(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

fn json_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

fn first_chars(text: &str) -> String {
    text.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(text: &str) -> Option<String> {
        let raw = RawValue::from_string(text.to_string()).unwrap();
        calls_json(&raw).unwrap().map(Cow::into_owned)
    }

    #[test]
    fn a_list_of_calls_is_kept_and_delta_lists_are_merged_as_the_worker_merges_them() {
        let kept = r#"[{"id":"x","type":"function","function":{"name":"g","arguments":"{}"}}]"#;
        assert_eq!(calls(kept).as_deref(), Some(kept));
        assert_eq!(calls("null"), None);
        assert_eq!(calls("[]"), None);
        // The reference's streamed form: one list of deltas a chunk.
        let streamed = r#"[[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}],[{"index":0,"function":{"arguments":"{\"cmd\":"}}],[{"index":0,"function":{"arguments":" \"ls\"}"}}]]"#;
        assert_eq!(
            calls(streamed).as_deref(),
            Some(
                r#"[{"type":"function","function":{"arguments":"{\"cmd\": \"ls\"}","name":"bash"},"id":"call_1"}]"#
            )
        );
        let raw = RawValue::from_string("{}".to_string()).unwrap();
        assert!(calls_json(&raw).is_err());
    }
}
