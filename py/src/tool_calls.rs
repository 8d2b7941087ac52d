//! The reference's `merge_tool_calls` and the JSON its `str(TextModelOutput)` appends: a
//! streamed response's tool-call deltas merged by `index` (each call's last non-empty id, type
//! and name, its argument pieces joined, calls in index order), a whole body's `tool_calls`
//! list as the server wrote it (compacted as msgspec re-encodes it), written as one compact
//! array. The worker merges a response's deltas as they arrive; the report merges a logged
//! response's delta lists the same way. Buffers are kept across uses; no tool calls, no cost.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

/// One response's tool calls (streamed deltas merged, or a body's list).
#[derive(Debug, Default)]
pub struct ToolCalls {
    /// Merged streamed calls; `merged[..live]` are this response's, the rest keep buffers.
    merged: Vec<MergedCall>,
    live: usize,
    /// A non-streaming body's `tool_calls` array, compacted.
    whole: Vec<u8>,
}

/// One call as `merge_tool_calls` builds it: `{"type", "function": {"arguments", "name"?},
/// "id"?}`, in that key order (the order its dict gains them).
#[derive(Debug, Default)]
struct MergedCall {
    index: i64,
    kind: String,
    id: Option<String>,
    name: Option<String>,
    arguments: String,
}

/// A streamed `tool_calls` element; only the fields the merge reads.
#[derive(Deserialize)]
struct CallDelta<'a> {
    #[serde(default)]
    index: Option<i64>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "type")]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

impl ToolCalls {
    /// Forgets this response's calls (buffers kept).
    pub fn clear(&mut self) {
        self.live = 0;
        self.whole.clear();
    }

    /// Whether the response had any tool call.
    pub fn is_empty(&self) -> bool {
        self.live == 0 && self.whole.is_empty()
    }

    /// Merges one streamed delta's `tool_calls` list; `false` when it is not a list of call
    /// objects (an empty or null list is no call).
    pub fn merge_delta(&mut self, raw: &RawValue) -> bool {
        let Ok(calls) = serde_json::from_str::<Option<Vec<CallDelta<'_>>>>(raw.get()) else {
            return false;
        };
        for call in calls.unwrap_or_default() {
            let index = call.index.unwrap_or(0);
            let merged = self.entry(index);
            // The reference takes a field only when it is truthy (non-empty).
            if let Some(id) = call.id.filter(|s| !s.is_empty()) {
                merged.id = Some(id.into_owned());
            }
            if let Some(kind) = call.kind.filter(|s| !s.is_empty()) {
                merged.kind.clear();
                merged.kind.push_str(&kind);
            }
            let Some(function) = call.function else { continue };
            if let Some(name) = function.name.filter(|s| !s.is_empty()) {
                merged.name = Some(name.into_owned());
            }
            if let Some(arguments) = function.arguments {
                merged.arguments.push_str(&arguments);
            }
        }
        true
    }

    /// The call of `index`, new (type "function", no arguments) when not seen yet.
    fn entry(&mut self, index: i64) -> &mut MergedCall {
        if let Some(at) = self.merged[..self.live].iter().position(|c| c.index == index) {
            return &mut self.merged[at];
        }
        if self.live == self.merged.len() {
            self.merged.push(MergedCall::default());
        }
        let call = &mut self.merged[self.live];
        self.live += 1;
        call.index = index;
        call.kind.clear();
        call.kind.push_str("function");
        call.id = None;
        call.name = None;
        call.arguments.clear();
        call
    }

    /// Keeps a whole body's `tool_calls` (a list), compacted; an empty list or null is none.
    /// `false` when it is not valid JSON.
    pub fn set_whole(&mut self, raw: &RawValue) -> bool {
        self.whole.clear();
        let text = raw.get();
        if text == "null" || text.trim_start().starts_with("[]") {
            return true;
        }
        if compact_json(text.as_bytes(), &mut self.whole).is_none() {
            self.whole.clear();
            return false;
        }
        if self.whole == b"[]" {
            self.whole.clear();
        }
        true
    }

    /// Appends the compact JSON array of the calls (nothing when there are none).
    pub fn write_json(&mut self, out: &mut Vec<u8>) {
        if !self.whole.is_empty() {
            out.extend_from_slice(&self.whole);
            return;
        }
        if self.live == 0 {
            return;
        }
        self.merged[..self.live].sort_by_key(|c| c.index);
        out.push(b'[');
        for (i, call) in self.merged[..self.live].iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"type\":");
            push_str(out, &call.kind);
            out.extend_from_slice(b",\"function\":{\"arguments\":");
            push_str(out, &call.arguments);
            if let Some(name) = &call.name {
                out.extend_from_slice(b",\"name\":");
                push_str(out, name);
            }
            out.push(b'}');
            if let Some(id) = &call.id {
                out.extend_from_slice(b",\"id\":");
                push_str(out, id);
            }
            out.push(b'}');
        }
        out.push(b']');
    }
}

/// Appends `s` as a JSON string literal (the escapes msgspec writes: `"`, `\`, control
/// characters; UTF-8 as is).
fn push_str(out: &mut Vec<u8>, s: &str) {
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Re-encodes JSON text compactly, as msgspec re-encodes what it decoded: whitespace between
/// tokens dropped, every string decoded and written again (so `\/` or `\u00e9` come out as
/// `/` and `é`), keys in their order, numbers and literals as written. `None` when a string
/// does not decode.
pub fn compact_json(text: &[u8], out: &mut Vec<u8>) -> Option<()> {
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'"' => {
                let end = string_end(text, i)?;
                let literal = std::str::from_utf8(&text[i..end]).ok()?;
                let decoded: Cow<'_, str> = serde_json::from_str(literal).ok()?;
                push_str(out, &decoded);
                i = end;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    Some(())
}

/// The index just past the string literal that opens at `start`.
fn string_end(text: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    fn json(calls: &mut ToolCalls) -> String {
        let mut out = Vec::new();
        calls.write_json(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn streamed_deltas_merge_as_the_reference_merges_them() {
        let mut calls = ToolCalls::default();
        let deltas = [
            r#"[{"index":0,"id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]"#,
            r#"[{"index":0,"function":{"arguments":"{\"cmd\":"}}]"#,
            r#"[{"index":1,"id":"call_2","function":{"name":"ls","arguments":"{}"}}]"#,
            r#"[{"index":0,"function":{"arguments":" \"ls -l\"}"}}]"#,
        ];
        for d in deltas {
            assert!(calls.merge_delta(&raw(d)));
        }
        assert_eq!(
            json(&mut calls),
            r#"[{"type":"function","function":{"arguments":"{\"cmd\": \"ls -l\"}","name":"bash"},"id":"call_1"},{"type":"function","function":{"arguments":"{}","name":"ls"},"id":"call_2"}]"#
        );
        calls.clear();
        assert!(calls.is_empty());
        assert_eq!(json(&mut calls), "");
        // Reused buffers hold nothing of the last response; index order wins over arrival.
        assert!(calls.merge_delta(&raw(r#"[{"index":2,"function":{"arguments":"b"}}]"#)));
        assert!(calls.merge_delta(&raw(r#"[{"function":{"arguments":"a"}}]"#)));
        assert_eq!(
            json(&mut calls),
            r#"[{"type":"function","function":{"arguments":"a"}},{"type":"function","function":{"arguments":"b"}}]"#
        );
        assert!(!calls.merge_delta(&raw(r#"{"index":0}"#)));
        assert!(calls.merge_delta(&raw("null")));
    }

    #[test]
    fn a_whole_bodys_list_is_kept_compact_in_its_own_key_order() {
        let mut calls = ToolCalls::default();
        let body = "[ {\"id\": \"c1\", \"type\": \"function\",\n \"function\": {\"name\": \"f\", \
                    \"arguments\": \"{\\\"a\\\": \\\"\\u00e9\\/\\\"}\"}} ]";
        assert!(calls.set_whole(&raw(body)));
        assert_eq!(
            json(&mut calls),
            r#"[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": \"é/\"}"}}]"#
        );
        assert!(calls.set_whole(&raw("[]")));
        assert!(calls.is_empty());
        assert!(calls.set_whole(&raw("null")));
        assert!(calls.is_empty());
    }
}
