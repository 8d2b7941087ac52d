//! The reference's checks of an agentic dataset, with its rules and in its order: rows grouped
//! by conversation and each conversation's rows together (`_validate_conversation_grouping`),
//! every conversation's roles and fields (`_validate_conversation_structure`), then every
//! conversation's turns numbered 1..N (`_validate_turn_numbering`).

use std::collections::HashSet;
use std::fmt;

use super::json::Json;
use super::record::{conversation_id, turn_number, AgenticRecord};
use crate::error::AppError;

/// Where a check failed: a conversation and one of its turns.
#[derive(Debug, Clone, Copy)]
pub(super) struct At<'a> {
    pub(super) id: &'a str,
    pub(super) turn: i64,
}

impl At<'_> {
    /// A bad-input error that starts with the conversation and the turn.
    pub(super) fn err(self, what: impl fmt::Display) -> AppError {
        AppError::Input(format!("conversation {:?} turn {}: {what}", self.id, self.turn))
    }
}

/// One row of a conversation, with its turn number.
#[derive(Debug, Clone, Copy)]
pub(super) struct TurnRow<'a> {
    pub(super) turn: i64,
    pub(super) record: &'a AgenticRecord,
}

/// One conversation's rows.
#[derive(Debug)]
pub(super) struct Group<'a> {
    pub(super) id: String,
    /// The rows in turn order (a stable sort of the file's order, as pandas sorts them).
    pub(super) rows: Vec<TurnRow<'a>>,
    /// The conversation's first user row in the file's order: the reference fills a client
    /// row's missing `max_new_tokens`, `stream` and `tools` from it.
    pub(super) first_user: Option<TurnRow<'a>>,
}

/// The records, less the metadata line, grouped into conversations in order of first
/// appearance; refused when an id is missing or not printable ASCII, when a conversation's rows
/// are not together, or when a row's turn is not a whole number. Errors name the record's
/// index in `records` (0-based).
pub(super) fn group_rows(records: &[AgenticRecord]) -> Result<Vec<Group<'_>>, AppError> {
    let mut groups: Vec<Group<'_>> = Vec::new();
    let mut seen = HashSet::new();
    for (i, record) in records.iter().enumerate().filter(|(_, r)| !r.is_metadata()) {
        let row_err = |e: &dyn fmt::Display| AppError::Input(format!("row {i}: {e}"));
        let id = conversation_id(record).map_err(|e| row_err(&e))?;
        if groups.last().is_none_or(|g| g.id != id) {
            if !seen.insert(id.clone()) {
                return Err(AppError::Input(format!(
                    "conversation {id:?}: its rows are not consecutive (row {i} comes after \
                     another conversation's rows); keep each conversation's rows together"
                )));
            }
            groups.push(Group { id: id.clone(), rows: Vec::new(), first_user: None });
        }
        let turn = turn_number(record, &id).map_err(|e| row_err(&e))?;
        let group = groups.last_mut().expect("a group was pushed for this id");
        let row = TurnRow { turn, record };
        if group.first_user.is_none() && record.role() == Some("user") {
            group.first_user = Some(row);
        }
        group.rows.push(row);
    }
    for group in &mut groups {
        group.rows.sort_by_key(|row| row.turn);
    }
    Ok(groups)
}

/// True for a string with at least one character.
fn non_empty_str(value: Option<&Json>) -> bool {
    value.and_then(Json::as_str).is_some_and(|s| !s.is_empty())
}

/// The roles that may follow `state` (`start` before the first row).
fn next_roles(state: &str) -> &'static [&'static str] {
    match state {
        "start" => &["user"],
        "user" => &["assistant"],
        "assistant" => &["tool", "user"],
        _ => &["assistant", "user"],
    }
}

/// One conversation's role sequence and each row's fields, in turn order.
pub(super) fn check_structure(group: &Group<'_>) -> Result<(), AppError> {
    let mut state = "start";
    let mut assistant_called_tools = false;
    for row in &group.rows {
        let at = At { id: &group.id, turn: row.turn };
        let role = match row.record.role() {
            Some(role) if next_roles(state).contains(&role) => role,
            _ => return Err(at.err(role_sequence_error(state, row.record.get("role")))),
        };
        match role {
            "tool" => check_tool_row(at, row.record, assistant_called_tools)?,
            "assistant" => assistant_called_tools = check_assistant_row(at, row.record)?,
            _ => check_user_row(at, row.record, state == "assistant" && assistant_called_tools)?,
        }
        if role != "assistant" {
            assistant_called_tools = false;
        }
        state = role;
    }
    Ok(())
}

fn role_sequence_error(state: &str, role: Option<&Json>) -> String {
    let shown = role.map_or("no role".to_string(), |r| format!("role {}", r.compact_text()));
    let place = if state == "start" { "first".to_string() } else { format!("after {state:?}") };
    format!(
        "invalid role sequence: {shown} cannot come {place}; a conversation opens with \"user\", \
         \"user\" is followed by \"assistant\", \"assistant\" by \"tool\" or \"user\", and \
         \"tool\" by \"assistant\" or \"user\""
    )
}

/// A tool row follows an assistant row with tool calls (the sequence check already put an
/// assistant row before it) and carries a non-empty `tool_results` list of objects, each with
/// a non-empty string `tool_call_id` and a `content`.
fn check_tool_row(
    at: At<'_>,
    record: &AgenticRecord,
    after_tool_calls: bool,
) -> Result<(), AppError> {
    if !after_tool_calls {
        return Err(at.err(
            "a tool row must follow an assistant row with non-empty tool_calls; give that \
             assistant row the calls this row answers",
        ));
    }
    let results = match record.get("tool_results") {
        Some(Json::Array(results)) if !results.is_empty() => results,
        _ => {
            return Err(at.err(
                "a tool row needs a non-empty tool_results list; give \
                 [{\"tool_call_id\": …, \"content\": …}, …]",
            ))
        }
    };
    for (i, result) in results.iter().enumerate() {
        if !matches!(result, Json::Object(_)) {
            return Err(at.err(format!("tool_results[{i}] is {}, not an object", result.kind())));
        }
        if !non_empty_str(result.get("tool_call_id")) {
            return Err(at.err(format!(
                "tool_results[{i}].tool_call_id must be a non-empty string; give the id of the \
                 tool call it answers"
            )));
        }
        if result.get("content").is_none_or(|c| *c == Json::Null) {
            return Err(at.err(format!(
                "tool_results[{i}] has no content (missing or null); give the tool's output"
            )));
        }
    }
    Ok(())
}

/// An assistant row has non-empty content or a non-empty, well-formed `tool_calls` list; a
/// `tool_calls` that is there but not such a list is refused. True when it called tools.
fn check_assistant_row(at: At<'_>, record: &AgenticRecord) -> Result<bool, AppError> {
    let content_empty = match record.get("content") {
        None => true,
        Some(Json::Str(s)) => s.is_empty(),
        Some(_) => false,
    };
    let tool_calls = record.get("tool_calls");
    let calls = match tool_calls {
        Some(Json::Array(calls)) if !calls.is_empty() => Some(calls),
        _ => None,
    };
    for (i, call) in calls.into_iter().flatten().enumerate() {
        check_tool_call(at, i, call)?;
    }
    if content_empty && calls.is_none() {
        return Err(at.err("an assistant row needs non-empty content or non-empty tool_calls"));
    }
    if let (Some(value), None) = (tool_calls, calls) {
        return Err(at.err(format!(
            "tool_calls is {}, not a non-empty list; omit the field or give a non-empty list",
            if *value == Json::Array(Vec::new()) { "an empty list" } else { value.kind() }
        )));
    }
    Ok(calls.is_some())
}

/// One entry of an assistant row's `tool_calls`, in the OpenAI wire format.
fn check_tool_call(at: At<'_>, i: usize, call: &Json) -> Result<(), AppError> {
    let bad = |what: String| Err(at.err(format!("tool_calls[{i}]{what}")));
    if !matches!(call, Json::Object(_)) {
        return bad(format!(" is {}, not an object", call.kind()));
    }
    if !non_empty_str(call.get("id")) {
        return bad(".id is missing or empty; give each call a string id".to_string());
    }
    if call.get("type").and_then(Json::as_str) != Some("function") {
        return bad(".type must be \"function\"".to_string());
    }
    let Some(function @ Json::Object(_)) = call.get("function") else {
        return bad(".function must be an object with a name and arguments".to_string());
    };
    if !non_empty_str(function.get("name")) {
        return bad(".function.name must be a non-empty string".to_string());
    }
    match function.get("arguments") {
        Some(Json::Str(_) | Json::Object(_)) => Ok(()),
        other => bad(format!(
            ".function.arguments is {}; give a JSON string or an object",
            other.map_or("missing", Json::kind)
        )),
    }
}

/// A user row has non-empty content and does not answer an assistant's tool calls.
fn check_user_row(
    at: At<'_>,
    record: &AgenticRecord,
    after_tool_calls: bool,
) -> Result<(), AppError> {
    if record.get("content").is_none_or(|c| *c == Json::Str(String::new())) {
        return Err(at.err("a user row needs non-empty content"));
    }
    if after_tool_calls {
        return Err(at.err(
            "a user row cannot follow an assistant row with tool_calls; put a tool row with \
             their tool_results first",
        ));
    }
    Ok(())
}

/// The conversation's turns, sorted, are exactly 1, 2, …, N.
pub(super) fn check_numbering(group: &Group<'_>) -> Result<(), AppError> {
    let turns: Vec<i64> = group.rows.iter().map(|row| row.turn).collect();
    let Some(pos) = turns.iter().zip(1i64..).position(|(turn, expected)| *turn != expected) else {
        return Ok(());
    };
    let at = At { id: &group.id, turn: turns[pos] };
    Err(at.err(format!(
        "turn numbers must run 1, 2, …, N with no gaps or repeats (turn {} expected here); \
         got {}; renumber the conversation's rows",
        pos + 1,
        shown_turns(&turns)
    )))
}

/// The turns as a list, cut after the first 20.
fn shown_turns(turns: &[i64]) -> String {
    let shown: Vec<String> = turns.iter().take(20).map(i64::to_string).collect();
    let more =
        if turns.len() > 20 { format!(", … ({} in all)", turns.len()) } else { String::new() };
    format!("[{}{more}]", shown.join(", "))
}
