//! One chat request as the prefix-cache stub reads it: its messages' identities and prompt
//! tokens, the conversation it belongs to, and whether it asks for a tool call.
//!
//! Prompt tokens are a cheap deterministic count, not a tokenizer's: a message counts
//! ceil(bytes / 4) of its text (its content, a parts list's `text` parts joined, plus each
//! tool call's function name and arguments), and at least 1 (the role marker a chat template
//! adds). `message_tokens` and `text_tokens` give the count to tests.

use serde_json::Value;

use crate::prefix_cache::MessageId;

/// Prompt tokens of a text of `text_bytes` bytes: ceil(bytes / 4), at least 1.
pub fn text_tokens(text_bytes: usize) -> u64 {
    (text_bytes as u64).div_ceil(4).max(1)
}

/// Prompt tokens of one chat message (a `messages` element).
pub fn message_tokens(message: &Value) -> u64 {
    MessageParts::of(message).tokens()
}

/// Prompt tokens of a `messages` array.
pub fn prompt_tokens(messages: &[Value]) -> u64 {
    messages.iter().map(message_tokens).sum()
}

/// The parts of a message that make its identity and its tokens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MessageParts<'a> {
    role: &'a str,
    text: String,
    /// (function name, arguments) of each tool call.
    calls: Vec<(&'a str, String)>,
    tool_call_id: &'a str,
}

impl<'a> MessageParts<'a> {
    fn of(message: &'a Value) -> Self {
        let str_at = |key: &str| message.get(key).and_then(Value::as_str).unwrap_or("");
        let calls = message.get("tool_calls").and_then(Value::as_array).map_or(Vec::new(), |a| {
            a.iter()
                .map(|call| {
                    let function = call.get("function").unwrap_or(&Value::Null);
                    let name = function.get("name").and_then(Value::as_str).unwrap_or("");
                    let arguments = match function.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        None | Some(Value::Null) => String::new(),
                        Some(other) => other.to_string(),
                    };
                    (name, arguments)
                })
                .collect()
        });
        Self {
            role: str_at("role"),
            text: content_text(message.get("content").unwrap_or(&Value::Null)),
            calls,
            tool_call_id: str_at("tool_call_id"),
        }
    }

    /// The stub's own answer as the next request sends it back: an assistant message with
    /// `text`, or with one tool call of `function` with arguments `{}`.
    pub(crate) fn answer(text: &str, function: Option<&'a str>) -> Self {
        match function {
            Some(name) => Self {
                role: "assistant",
                text: String::new(),
                calls: vec![(name, TOOL_ARGUMENTS.to_string())],
                tool_call_id: "",
            },
            None => Self {
                role: "assistant",
                text: text.to_string(),
                calls: Vec::new(),
                tool_call_id: "",
            },
        }
    }

    fn tokens(&self) -> u64 {
        let call_bytes: usize = self.calls.iter().map(|(n, a)| n.len() + a.len()).sum();
        text_tokens(self.text.len() + call_bytes)
    }

    pub(crate) fn id(&self) -> MessageId {
        let mut h = Fnv::default();
        h.field(self.role.as_bytes());
        h.field(self.text.as_bytes());
        for (name, arguments) in &self.calls {
            h.field(name.as_bytes());
            h.field(arguments.as_bytes());
        }
        h.field(self.tool_call_id.as_bytes());
        MessageId { hash: h.0, tokens: self.tokens() }
    }
}

/// The arguments of every tool call the stub makes.
pub const TOOL_ARGUMENTS: &str = "{}";

/// A chat request read for the prefix cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatTurn {
    /// The conversation: the session header's value, else the first message.
    pub key: u64,
    /// Each message's identity and tokens, in order.
    pub prompt: Vec<MessageId>,
    /// The function to call: the first tool's name, when the request offers tools and its
    /// last message is the user's.
    pub tool: Option<String>,
}

impl ChatTurn {
    /// Reads a chat body; `session` is the session header's value, if the request had one.
    /// A body without `messages` is a turn of no messages.
    pub fn parse(body: &[u8], session: Option<&[u8]>) -> Result<ChatTurn, String> {
        let v: Value =
            serde_json::from_slice(body).map_err(|e| format!("invalid json body: {e}"))?;
        let messages = v.get("messages").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        let parts: Vec<MessageParts<'_>> = messages.iter().map(MessageParts::of).collect();
        let prompt: Vec<MessageId> = parts.iter().map(MessageParts::id).collect();
        let key = match session.filter(|s| !s.is_empty()) {
            Some(value) => {
                let mut h = Fnv::default();
                h.field(b"session");
                h.field(value);
                h.0
            }
            None => prompt.first().map_or(0, |m| m.hash),
        };
        let asks_user = parts.last().is_some_and(|m| m.role == "user");
        let first_tool = v
            .get("tools")
            .and_then(Value::as_array)
            .and_then(|t| t.first())
            .and_then(|t| t.pointer("/function/name"))
            .and_then(Value::as_str);
        let tool = first_tool.filter(|_| asks_user).map(str::to_string);
        Ok(ChatTurn { key, prompt, tool })
    }
}

/// A message's content as text: a string, or the `text` parts of a parts list joined.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .concat(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// FNV-1a, 64 bits: stable across runs and builds (std's hasher is not promised to be), with
/// each field closed by its length so that ("ab", "c") and ("a", "bc") differ.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn field(&mut self, bytes: &[u8]) {
        for &b in bytes.iter().chain(&(bytes.len() as u64).to_le_bytes()) {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tokens_are_a_quarter_of_the_text_bytes_rounded_up_and_at_least_one() {
        let cases = [
            (json!({"role": "user", "content": "abcd"}), 1),
            (json!({"role": "user", "content": "abcde"}), 2),
            (json!({"role": "system", "content": ""}), 1),
            (json!({"role": "user", "content": [{"type": "text", "text": "12345678"}]}), 2),
            (
                json!({"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{}"}}]}),
                4, // 11 + 2 bytes
            ),
            (json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny"}), 2),
        ];
        for (message, want) in cases {
            assert_eq!(message_tokens(&message), want, "{message}");
        }
        assert_eq!(text_tokens(400), 100);
    }

    #[test]
    fn the_stub_s_answer_matches_the_message_a_client_sends_back() {
        let text = json!({"role": "assistant", "content": "xxxx"});
        let call = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": "{}"}}]});
        assert_eq!(MessageParts::of(&text).id(), MessageParts::answer("xxxx", None).id());
        assert_eq!(MessageParts::of(&call).id(), MessageParts::answer("", Some("f")).id());
        assert_ne!(MessageParts::of(&text).id(), MessageParts::answer("xxx", None).id());
    }

    #[test]
    fn the_conversation_is_the_session_header_else_the_first_message() {
        let body =
            br#"{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}"#;
        let other =
            br#"{"messages":[{"role":"system","content":"s"},{"role":"user","content":"v"}]}"#;
        let by_first = ChatTurn::parse(body, None).unwrap().key;
        assert_eq!(by_first, ChatTurn::parse(other, None).unwrap().key);
        assert_eq!(by_first, ChatTurn::parse(body, Some(b"")).unwrap().key, "empty: no header");
        let a = ChatTurn::parse(body, Some(b"conv-a")).unwrap().key;
        assert_ne!(a, by_first);
        assert_ne!(a, ChatTurn::parse(body, Some(b"conv-b")).unwrap().key);
        assert!(ChatTurn::parse(b"{not json", None).is_err());
        assert_eq!(ChatTurn::parse(b"{}", None).unwrap().prompt, vec![]);
    }

    #[test]
    fn a_tool_call_is_asked_for_by_tools_after_a_user_message() {
        let tools = r#""tools":[{"type":"function","function":{"name":"get_weather"}},
            {"type":"function","function":{"name":"other"}}]"#;
        let user = format!(r#"{{"messages":[{{"role":"user","content":"u"}}],{tools}}}"#);
        let tool = format!(
            r#"{{"messages":[{{"role":"user","content":"u"}},{{"role":"tool","tool_call_id":"c","content":"r"}}],{tools}}}"#
        );
        let plain = r#"{"messages":[{"role":"user","content":"u"}]}"#;
        let parse = |b: &str| ChatTurn::parse(b.as_bytes(), None).unwrap().tool;
        assert_eq!(parse(&user).as_deref(), Some("get_weather"));
        assert_eq!(parse(&tool), None, "a tool result gets text");
        assert_eq!(parse(plain), None, "no tools offered");
    }
}
