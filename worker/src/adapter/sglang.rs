//! SGLang `/generate`: `text` (cumulative when streaming) and `meta_info` with the counts and a
//! `finish_reason` object that may be null.

use std::borrow::Cow;

use serde::Deserialize;

use super::accumulator::Accumulator;
use super::fields::{ErrorField, FinishField, MaybeStr, UnwrappedError};
use super::usage::{nullable, UsageValue};

#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(default, deserialize_with = "nullable")]
    meta_info: Option<MetaInfo>,
    /// SGLang's error object (`{"error": {"message": ...}}`) in a stream or body.
    #[serde(borrow, default)]
    error: ErrorField<'a>,
    /// `"error"` in the unwrapped OpenAI-style error object (`UnwrappedError`), which an
    /// SGLang server's OpenAI layer answers with.
    #[serde(borrow, default)]
    object: MaybeStr<'a>,
    /// The unwrapped error object's message.
    #[serde(borrow, default)]
    message: MaybeStr<'a>,
}

impl<'a> Frame<'a> {
    fn error_shape(&self) -> UnwrappedError<'_, 'a> {
        UnwrappedError { object: &self.object, message: &self.message }
    }
}

#[derive(Deserialize)]
struct MetaInfo {
    #[serde(default)]
    prompt_tokens: Option<UsageValue>,
    #[serde(default)]
    completion_tokens: Option<UsageValue>,
    #[serde(default)]
    finish_reason: Option<FinishField>,
}

fn apply(acc: &mut Accumulator, frame: &Frame<'_>) {
    if let Some(meta) = &frame.meta_info {
        let counts = super::usage::UsageCounts {
            prompt_tokens: meta.prompt_tokens,
            completion_tokens: meta.completion_tokens,
        };
        acc.usage.apply(&counts);
        if let Some(FinishField(reason)) = meta.finish_reason {
            if reason != loadgen_wire::FinishReason::None {
                acc.finish = reason;
            }
        }
    }
}

/// One streaming frame: the text so far replaces the output; the first non-empty text is the
/// first chunk.
pub(crate) fn on_frame(acc: &mut Accumulator, json: &[u8], now_ns: fn() -> u64) -> bool {
    let Ok(frame) = serde_json::from_slice::<Frame<'_>>(json) else { return false };
    if acc.note_error(&frame.error, frame.error_shape(), json) {
        return true;
    }
    if let Some(text) = frame.text.as_deref() {
        if !text.is_empty() {
            acc.replace(text.as_bytes());
            acc.mark_chunk(now_ns);
        }
    }
    apply(acc, &frame);
    true
}

/// A non-streaming body.
pub(crate) fn on_body(acc: &mut Accumulator, json: &[u8]) -> bool {
    let Ok(frame) = serde_json::from_slice::<Frame<'_>>(json) else { return false };
    if acc.note_error(&frame.error, frame.error_shape(), json) {
        return true;
    }
    let Some(text) = frame.text.as_deref() else { return false };
    acc.replace(text.as_bytes());
    apply(acc, &frame);
    true
}

#[cfg(test)]
mod tests {
    use loadgen_wire::FinishReason;

    use crate::adapter::Accumulator;
    use crate::request::ApiType;

    fn clock() -> u64 {
        7
    }

    #[test]
    fn cumulative_stream_keeps_final_text_and_no_tpot() {
        let mut acc = Accumulator::new(ApiType::Sglang, 1 << 20);
        for frame in [
            r#"{"text":"","output_ids":[],"meta_info":{"id":"a","finish_reason":null,"prompt_tokens":4,"completion_tokens":0}}"#,
            r#"{"text":"He","output_ids":[1],"meta_info":{"finish_reason":null,"prompt_tokens":4,"completion_tokens":1}}"#,
            r#"{"text":"Hello","output_ids":[2],"meta_info":{"finish_reason":{"type":"length","length":2},"prompt_tokens":4,"completion_tokens":2,"e2e_latency":0.1}}"#,
        ] {
            acc.on_sse_frame(frame.as_bytes(), clock);
        }
        acc.finish_stream();
        assert_eq!(acc.output, b"Hello");
        assert_eq!((acc.first_chunk_ns, acc.first_chunk_len), (7, 5));
        assert_eq!(acc.finish, FinishReason::Length);
        assert_eq!((acc.usage.prompt_tokens, acc.usage.completion_tokens), (Some(4), Some(2)));
    }

    #[test]
    fn body_with_bad_count() {
        let mut acc = Accumulator::new(ApiType::Sglang, 1 << 20);
        assert!(acc.on_body(br#"{"text":"ok","meta_info":{"finish_reason":{"type":"stop"},"prompt_tokens":-3,"completion_tokens":1}}"#));
        assert_eq!(acc.output, b"ok");
        assert_eq!(acc.finish, FinishReason::Stop);
        assert_eq!((acc.usage.prompt_tokens, acc.usage.completion_tokens), (None, Some(1)));
        assert_eq!(acc.usage.first_bad, Some("a negative integer"));
    }
}
