//! A logged `TextModelOutput`'s tool calls as the one compact JSON array a run counts and
//! scores: a list of call objects is taken as written (every writer of these logs, the
//! reference's and this tool's, writes compact JSON); a streamed log's list of delta lists is
//! merged by `loadgen_py::tool_calls` (the reference's `merge_tool_calls`), as the worker
//! merges a live stream's, into the form it writes.

use std::borrow::Cow;

use loadgen_py::tool_calls::ToolCalls;
use serde_json::value::RawValue;

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

/// Merges streamed delta lists as the worker merges a live stream's (`ToolCalls`).
fn merge_chunks(chunks: &[&RawValue]) -> Result<Cow<'static, str>, String> {
    let mut calls = ToolCalls::default();
    for chunk in chunks {
        if !calls.merge_delta(chunk) {
            return Err(format!(
                "a streamed chunk is not a list of calls ({})",
                first_chars(chunk.get())
            ));
        }
    }
    let mut out = Vec::new();
    calls.write_json(&mut out);
    String::from_utf8(out).map(Cow::Owned).map_err(|e| e.to_string())
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
