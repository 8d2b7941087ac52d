//! One dataset row after the column mapping: what a request and its client ISL are built
//! from. A module of its own so the tokenizer counts rows without importing the loaders
//! (which load a tokenizer for the `random` dataset).

use serde_json::Value;

/// One dataset row after the column mapping.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Row {
    /// The user prompt text (column `prompt` after mapping).
    pub prompt: Option<String>,
    /// A system prompt (column `system`, or `system_prompt`).
    pub system: Option<String>,
    /// Chat messages (column `messages`), as JSON.
    pub messages: Option<Value>,
    /// A multimodal user message's content parts (text and images), sent on the chat API in
    /// place of `prompt`, after `system`; only the predefined Shopify datasets make them.
    pub content_parts: Option<Vec<loadgen_worker::request::ContentPart>>,
    /// Pre-tokenized input (column `token_ids` or `input_tokens`, or a `prompt` that is a
    /// list of integers).
    pub token_ids: Option<Vec<u32>>,
    /// Completions per request (column `n`); rejected above 1 under a server primary.
    pub n: Option<u32>,
    /// The row's `ROW_REQUEST_COLUMNS` that are present and not null, in that order.
    pub request_columns: Vec<(String, Value)>,
}

impl Row {
    /// The value of request column `name`, when the row has it.
    pub fn request_column(&self, name: &str) -> Option<&Value> {
        self.request_columns.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}
