//! A conversation's `messages`, written once as the reference pre-builds them
//! (`_build_conversation_metadata`) and encodes them (msgspec `ChatMessage`, `omit_defaults`):
//! the system prompt, then each row's message(s) in turn order. A client turn sends the
//! messages up to and including its own, so every turn's array is a prefix of one buffer.

use std::ops::Range;

use super::json::{write_str, Json};
use super::record::AgenticRecord;
use super::validate::{At, TurnRow};
use crate::error::AppError;

/// The `ChatMessage` fields a row gives its message, after `role`, in the struct's field order
/// (`tool_call_id` comes only from `tool_results`, which the reference reads apart).
const ROW_MESSAGE_FIELDS: [&str; 4] = ["content", "name", "tool_calls", "reasoning_content"];

/// The conversation's messages so far: `json` is `[` and the messages, comma-separated, without
/// the closing `]`.
#[derive(Debug)]
pub(super) struct History {
    pub(super) json: Vec<u8>,
    /// The system prompt's characters, escaped, inside `json` (between its quotes).
    pub(super) system: Option<Range<usize>>,
    count: usize,
}

/// The system prompt the reference sends: the first row, in turn order, whose `system` is a
/// non-empty string.
pub(super) fn system_prompt<'a>(rows: &[TurnRow<'a>]) -> Option<&'a str> {
    rows.iter()
        .find_map(|row| row.record.get("system").and_then(Json::as_str).filter(|s| !s.is_empty()))
}

impl History {
    /// An empty history, or one that opens with the system message.
    pub(super) fn new(system: Option<&str>) -> History {
        let mut history = History { json: vec![b'['], system: None, count: 0 };
        if let Some(content) = system {
            history.open_message(b"system");
            history.json.extend_from_slice(b",\"content\":");
            let start = history.json.len() + 1;
            write_str(&mut history.json, content);
            history.system = Some(start..history.json.len() - 1);
            history.json.push(b'}');
        }
        history
    }

    /// Appends one row's message(s): a non-empty `tool_results` list becomes one tool message
    /// per result (`_expand_tool_results`, on any row), any other row one message of its
    /// `ChatMessage` fields that are there and not null.
    pub(super) fn push_row(&mut self, at: At<'_>, record: &AgenticRecord) -> Result<(), AppError> {
        match record.get("tool_results") {
            Some(Json::Array(results)) if !results.is_empty() => {
                for (i, result) in results.iter().enumerate() {
                    self.push_tool_result(at, i, result)?;
                }
            }
            _ => self.push_message(record),
        }
        Ok(())
    }

    /// The number of bytes written so far: a client turn's end.
    pub(super) fn len(&self) -> usize {
        self.json.len()
    }

    /// Writes the separator and `{"role":ROLE`.
    fn open_message(&mut self, role: &[u8]) {
        if self.count > 0 {
            self.json.push(b',');
        }
        self.count += 1;
        self.json.extend_from_slice(b"{\"role\":\"");
        self.json.extend_from_slice(role);
        self.json.push(b'"');
    }

    fn push_message(&mut self, record: &AgenticRecord) {
        // The role was checked to be user, assistant or tool; a row without one gives none.
        let Some(role) = record.role() else { return };
        self.open_message(role.as_bytes());
        for field in ROW_MESSAGE_FIELDS {
            if let Some(value) = record.get(field) {
                self.json.push(b',');
                write_str(&mut self.json, field);
                self.json.push(b':');
                value.write_compact(&mut self.json);
            }
        }
        self.json.push(b'}');
    }

    /// `{"role":"tool","content":…,"tool_call_id":…}` (`ChatMessage`'s field order).
    fn push_tool_result(&mut self, at: At<'_>, i: usize, result: &Json) -> Result<(), AppError> {
        if !matches!(result, Json::Object(_)) {
            return Err(at.err(format!("tool_results[{i}] is {}, not an object", result.kind())));
        }
        let present = |key: &str| result.get(key).filter(|v| **v != Json::Null);
        let Some(id) = present("tool_call_id") else {
            return Err(at.err(format!("tool_results[{i}] has no tool_call_id")));
        };
        let Some(content) = present("content") else {
            return Err(at.err(format!(
                "tool_results[{i}] has no content (missing or null); give the tool's output"
            )));
        };
        self.open_message(b"tool");
        self.json.extend_from_slice(b",\"content\":");
        content.write_compact(&mut self.json);
        self.json.extend_from_slice(b",\"tool_call_id\":");
        id.write_compact(&mut self.json);
        self.json.push(b'}');
        Ok(())
    }
}
