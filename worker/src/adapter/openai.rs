//! OpenAI chat (and the shared SSE frame shape of `/v1/completions`): `choices[0]` with `delta`,
//! `message` or `text`, `finish_reason`, and `usage` (possibly in a usage-only frame).

use std::borrow::Cow;

use serde::Deserialize;

use super::usage::{nullable, UsageCounts};
use super::{Accumulator, FinishField, First};

#[derive(Deserialize)]
pub(crate) struct Frame<'a> {
    #[serde(borrow, default)]
    pub choices: First<Choice<'a>>,
    #[serde(default, deserialize_with = "nullable")]
    pub usage: Option<UsageCounts>,
}

#[derive(Deserialize)]
pub(crate) struct Choice<'a> {
    #[serde(borrow, default, deserialize_with = "nullable")]
    pub delta: Option<Delta<'a>>,
    #[serde(borrow, default, deserialize_with = "nullable")]
    pub message: Option<Delta<'a>>,
    #[serde(borrow, default)]
    pub text: Option<Cow<'a, str>>,
    #[serde(default)]
    pub finish_reason: Option<FinishField>,
}

#[derive(Deserialize)]
pub(crate) struct Delta<'a> {
    #[serde(borrow, default)]
    pub content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub reasoning: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub tool_calls: First<ToolCall<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct ToolCall<'a> {
    #[serde(borrow, default, deserialize_with = "nullable")]
    pub function: Option<ToolFunction<'a>>,
}

#[derive(Deserialize)]
pub(crate) struct ToolFunction<'a> {
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub arguments: Option<Cow<'a, str>>,
}

fn non_empty<'s>(text: &'s Option<Cow<'_, str>>) -> Option<&'s str> {
    text.as_deref().filter(|t| !t.is_empty())
}

/// Applies the reference accumulator's order to one delta: content, else reasoning, else
/// tool-call text. Returns whether the delta carried any of them.
fn apply_delta(acc: &mut Accumulator, delta: &Delta<'_>) -> bool {
    if let Some(content) = non_empty(&delta.content) {
        acc.append(content.as_bytes());
        return true;
    }
    if let Some(reasoning) = non_empty(&delta.reasoning_content).or(non_empty(&delta.reasoning)) {
        acc.append(reasoning.as_bytes());
        return true;
    }
    if let Some(function) = delta.tool_calls.0.as_ref().and_then(|call| call.function.as_ref()) {
        for part in [&function.name, &function.arguments].into_iter().flatten() {
            acc.append(part.as_bytes());
        }
        return true;
    }
    false
}

/// One streaming frame (chat deltas or completions `text`); `false` when it does not decode.
pub(crate) fn on_frame(acc: &mut Accumulator, json: &[u8], now_ns: fn() -> u64) -> bool {
    let Ok(frame) = serde_json::from_slice::<Frame<'_>>(json) else { return false };
    if let Some(choice) = &frame.choices.0 {
        let content = match (&choice.delta, non_empty(&choice.text)) {
            (Some(delta), _) => apply_delta(acc, delta),
            (None, Some(text)) => {
                acc.append(text.as_bytes());
                true
            }
            (None, None) => false,
        };
        if content {
            acc.mark_first(now_ns);
        }
        if let Some(FinishField(reason)) = choice.finish_reason {
            if reason != crate::wire::FinishReason::None {
                acc.finish = reason;
            }
        }
    }
    // The per-frame cost without usage is this one check.
    if let Some(usage) = &frame.usage {
        acc.usage.apply(usage);
    }
    true
}

/// A non-streaming chat body: `choices[0].message` plus `usage`.
pub(crate) fn on_body(acc: &mut Accumulator, json: &[u8]) -> bool {
    let Ok(frame) = serde_json::from_slice::<Frame<'_>>(json) else { return false };
    let Some(choice) = &frame.choices.0 else { return false };
    if let Some(message) = &choice.message {
        for part in [&message.reasoning_content, &message.reasoning, &message.content] {
            if let Some(text) = non_empty(part) {
                acc.append(text.as_bytes());
            }
        }
        if let Some(function) = message.tool_calls.0.as_ref().and_then(|c| c.function.as_ref()) {
            for part in [&function.name, &function.arguments].into_iter().flatten() {
                acc.append(part.as_bytes());
            }
        }
    }
    if let Some(FinishField(reason)) = choice.finish_reason {
        acc.finish = reason;
    }
    if let Some(usage) = &frame.usage {
        acc.usage.apply(usage);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::ApiType;
    use crate::wire::FinishReason;

    fn clock() -> u64 {
        42
    }

    fn run(api: ApiType, frames: &[&str]) -> Accumulator {
        let mut acc = Accumulator::new(api, 1 << 20);
        for frame in frames {
            acc.on_sse_frame(frame.as_bytes(), clock);
        }
        acc.finish_stream();
        acc
    }

    #[test]
    fn chat_stream_with_usage_frame() {
        let acc = run(
            ApiType::OpenAiChat,
            &[
                r#"{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
                r#"{"choices":[{"delta":{"content":"Hel"},"finish_reason":null}]}"#,
                r#"{"choices":[{"delta":{"content":"lo\n\"w\""}}]}"#,
                r#"{"choices":[{"delta":{},"finish_reason":"length"}]}"#,
                r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}"#,
            ],
        );
        assert_eq!(acc.output, b"Hello\n\"w\"");
        assert_eq!((acc.first_chunk_ns, acc.first_chunk_len), (42, 3));
        assert_eq!(acc.finish, FinishReason::Length);
        assert_eq!((acc.usage.prompt_tokens, acc.usage.completion_tokens), (Some(3), Some(4)));
        assert_eq!(acc.malformed_frames, 0);
    }

    #[test]
    fn malformed_frame_drops_only_itself() {
        let acc = run(
            ApiType::OpenAiChat,
            &[
                r#"{"choices":[{"delta":{"content":"a"}}]}"#,
                r#"{"choices":[{"delta":{"content":"b"#,
                r#"{"choices":[{"delta":{"content":"c"}}],"usage":{"prompt_tokens":true,"completion_tokens":2}}"#,
            ],
        );
        assert_eq!(acc.output, b"ac");
        assert_eq!(acc.malformed_frames, 1);
        assert_eq!((acc.usage.prompt_tokens, acc.usage.completion_tokens), (None, Some(2)));
        assert_eq!(acc.usage.first_bad, Some("a bool"));
    }

    #[test]
    fn reasoning_and_tool_calls_count_as_content() {
        let acc = run(
            ApiType::OpenAiChat,
            &[
                r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
                r#"{"choices":[{"delta":{"reasoning":"more","content":"ans"}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}"#,
            ],
        );
        assert_eq!(acc.output, b"thinkansf{}");
        assert_eq!(acc.first_chunk_len, 5);
    }

    #[test]
    fn completions_stream_text() {
        let acc = run(
            ApiType::OpenAiCompletions,
            &[
                r#"{"choices":[{"text":"ab","index":0,"finish_reason":null}]}"#,
                r#"{"choices":[{"text":"cd","finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#,
            ],
        );
        assert_eq!(acc.output, b"abcd");
        assert_eq!(acc.first_chunk_len, 2);
        assert_eq!(acc.finish, FinishReason::Stop);
        assert_eq!(acc.usage.completion_tokens, Some(2));
    }

    #[test]
    fn no_content_stream_has_no_first_chunk() {
        let acc = run(ApiType::OpenAiChat, &[r#"{"choices":[{"delta":{"role":"assistant"}}]}"#]);
        assert_eq!((acc.first_chunk_ns, acc.first_chunk_len, acc.output.len()), (0, 0, 0));
    }

    #[test]
    fn chat_body_non_streaming() {
        let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 20);
        let body = br#"{"id":"1","choices":[{"index":0,"message":{"role":"assistant","content":"hi","reasoning_content":"r"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#;
        assert!(acc.on_body(body));
        assert_eq!(acc.output, b"rhi");
        assert_eq!((acc.first_chunk_ns, acc.first_chunk_len), (0, 3));
        assert_eq!(acc.finish, FinishReason::Stop);
        assert_eq!((acc.usage.prompt_tokens, acc.usage.completion_tokens), (Some(5), Some(2)));
        acc.reset();
        assert!(!acc.on_body(b"{\"choices\":[]}"));
        assert!(!acc.on_body(b"not json"));
    }

    #[test]
    fn output_is_cut_at_the_limit() {
        let mut acc = Accumulator::new(ApiType::OpenAiChat, 4);
        acc.on_sse_frame(br#"{"choices":[{"delta":{"content":"abc"}}]}"#, clock);
        acc.on_sse_frame(br#"{"choices":[{"delta":{"content":"def"}}]}"#, clock);
        assert_eq!(acc.output, b"abcd");
        assert!(acc.truncated);
    }
}
