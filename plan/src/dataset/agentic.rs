//! The reference's agentic conversation datasets (`AgenticInferenceDataset`): rows of
//! conversations (a user asks, the assistant answers or calls tools, tools answer), checked as
//! the reference checks them, and each client turn's `messages` pre-built, byte for byte as the
//! reference sends them.
//!
//! Pure: the caller reads the file into `AgenticRecord`s (a JSON Lines line each, keeping its
//! objects' key order) and hands them in file order to `build_conversations`.

mod expected;
mod json;
mod messages;
mod record;
mod request;
mod salt;
#[cfg(test)]
mod tests;
mod validate;
#[cfg(test)]
mod validate_tests;

use std::ops::Range;

use serde_json::value::RawValue;

use crate::error::AppError;
use messages::History;
use request::{turn_request, Inherited};
use validate::{At, Group};

pub use expected::expected_turns;
pub use record::AgenticRecord;
pub use request::{MaxTokens, AGENTIC_REQUEST_COLUMNS};
pub use salt::salt_tag;

/// A dataset's conversations, in order of first appearance, as the reference issues them.
#[derive(Debug, Clone)]
pub struct AgenticConversations {
    pub conversations: Vec<Conversation>,
}

/// One conversation and its client turns (its user and tool rows), in turn order.
#[derive(Debug, Clone)]
pub struct Conversation {
    /// `str(conversation_id)`: printable ASCII, not empty.
    pub id: String,
    /// Its rows, every role: its last turn number.
    pub row_count: u32,
    /// `[` and every message up to the last client turn's, comma-separated, without the
    /// closing `]`: turn `t`'s `messages` are `history_json[..t.messages_end]` and `]`.
    pub history_json: Vec<u8>,
    /// The system prompt's characters inside `history_json`, escaped, between its quotes: where
    /// `enable_salt` puts its marks.
    pub system_prompt: Option<Range<usize>>,
    pub turns: Vec<ClientTurn>,
}

/// Who speaks in a client turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientRole {
    User,
    Tool,
}

/// One client turn: what the reference sends for it and when.
#[derive(Debug, Clone)]
pub struct ClientTurn {
    /// The row's turn number (1-based, counting every role).
    pub turn: u32,
    pub role: ClientRole,
    /// The end of this turn's messages in its conversation's `history_json`.
    pub messages_end: usize,
    /// The row's `delay_seconds` (0 when absent, not a number or not positive): the pause
    /// before this turn under `inject_tool_delay`.
    pub delay_s: f64,
    /// The row's own `model`; without one the reference sends the run's model (which it fills
    /// in before a first user row's could be).
    pub model: Option<String>,
    /// The row's own `stream`.
    pub stream: Option<bool>,
    /// The conversation's first user row's `stream`.
    pub stream_inherited: Option<bool>,
    pub max_tokens: MaxTokens,
    /// `AGENTIC_REQUEST_COLUMNS` the row sets (`tools` also from the conversation's first user
    /// row), in that order, each as compact JSON with its objects' keys in the file's order.
    pub columns: Vec<(String, Box<RawValue>)>,
}

impl ClientTurn {
    /// `stream` as the reference sends it: the row's own, else `true` under `streaming: on`
    /// (filled in first), else the conversation's first user row's, else `false`.
    pub fn stream(&self, streaming_on: bool) -> bool {
        self.stream.unwrap_or(streaming_on || self.stream_inherited.unwrap_or(false))
    }

    /// The output length the reference sends for this turn (`MaxTokens::resolve`).
    pub fn max_output_tokens(&self, run_max_new_tokens: u64) -> u64 {
        self.max_tokens.resolve(run_max_new_tokens)
    }
}

impl Conversation {
    /// True when the conversation sends a system prompt.
    pub fn has_system_prompt(&self) -> bool {
        self.system_prompt.is_some()
    }

    /// `turn`'s complete `messages` array (`turn` is one of this conversation's `turns`).
    pub fn messages_json(&self, turn: &ClientTurn) -> Vec<u8> {
        let mut out = Vec::with_capacity(turn.messages_end + 1);
        out.extend_from_slice(&self.history_json[..turn.messages_end]);
        out.push(b']');
        out
    }
}

impl AgenticConversations {
    /// The most turns (rows of every role) in one conversation (`max_turns_per_conv`).
    pub fn max_turns_per_conversation(&self) -> u32 {
        self.conversations.iter().map(|c| c.row_count).max().unwrap_or(0)
    }

    /// Client turns in all (the reference's samples).
    pub fn client_turn_count(&self) -> usize {
        self.conversations.iter().map(|c| c.turns.len()).sum()
    }
}

/// The conversations of an agentic dataset's rows (in file order; a `_type: dataset_metadata`
/// row is skipped), checked as the reference checks them; errors name the dataset `path`, the
/// conversation and the turn (or the row, 0-based, before its conversation is known).
pub fn build_conversations(
    records: &[AgenticRecord],
    path: &str,
) -> Result<AgenticConversations, AppError> {
    let in_dataset = |e: AppError| match e {
        AppError::Input(m) => AppError::Input(format!("dataset {path}: {m}")),
        other => other,
    };
    let groups = validate::group_rows(records).map_err(in_dataset)?;
    if groups.is_empty() {
        return Err(AppError::Input(format!(
            "dataset {path} has no conversation rows; give rows with conversation_id, turn, role \
             and content"
        )));
    }
    for group in &groups {
        validate::check_structure(group).map_err(in_dataset)?;
    }
    for group in &groups {
        validate::check_numbering(group).map_err(in_dataset)?;
    }
    let conversations = groups.iter().map(build_conversation).collect::<Result<_, _>>();
    Ok(AgenticConversations { conversations: conversations.map_err(in_dataset)? })
}

/// One checked conversation: its messages written once, a turn for each user and tool row.
fn build_conversation(group: &Group<'_>) -> Result<Conversation, AppError> {
    let mut history = History::new(messages::system_prompt(&group.rows));
    let inherited = Inherited::read(group)?;
    let mut turns = Vec::new();
    for row in &group.rows {
        let at = At { id: &group.id, turn: row.turn };
        history.push_row(at, row.record)?;
        let role = match row.record.role() {
            Some("user") => ClientRole::User,
            Some("tool") => ClientRole::Tool,
            _ => continue,
        };
        let request = turn_request(at, row.record, &inherited)?;
        turns.push(ClientTurn {
            // The numbering check holds every turn in 1..=rows.
            turn: u32::try_from(row.turn).unwrap_or(u32::MAX),
            role,
            messages_end: history.len(),
            delay_s: request.delay_s,
            model: request.model,
            stream: request.stream,
            stream_inherited: request.stream_inherited,
            max_tokens: request.max_tokens,
            columns: request.columns,
        });
    }
    let mut history_json = history.json;
    history_json.truncate(turns.last().map_or(1, |t| t.messages_end));
    Ok(Conversation {
        id: group.id.clone(),
        row_count: u32::try_from(group.rows.len()).unwrap_or(u32::MAX),
        history_json,
        system_prompt: history.system,
        turns,
    })
}
