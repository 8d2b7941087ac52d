//! OpenAI chat (and the shared SSE frame shape of `/v1/completions`): `choices[0]` with `delta`,
//! `message` or `text`, `finish_reason`, and `usage` (possibly in a usage-only frame).

use std::borrow::Cow;

use loadgen_wire::FinishReason;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::accumulator::Accumulator;
use super::fields::{ErrorField, FinishField, First, MaybeStr, UnwrappedError};
use super::scan::{plain_frame, PlainFrame};
use super::usage::{nullable, UsageCounts};

#[derive(Deserialize)]
pub(crate) struct Frame<'a> {
    #[serde(borrow, default)]
    pub choices: First<Choice<'a>>,
    #[serde(default, deserialize_with = "nullable")]
    pub usage: Option<UsageCounts>,
    /// An endpoint's error (vLLM sends one mid-stream on an engine error).
    #[serde(borrow, default)]
    pub error: ErrorField<'a>,
    /// `"error"` in vLLM's unwrapped error object (`UnwrappedError`).
    #[serde(borrow, default)]
    pub object: MaybeStr<'a>,
    /// The unwrapped error object's message.
    #[serde(borrow, default)]
    pub message: MaybeStr<'a>,
}

impl<'a> Frame<'a> {
    /// The frame's top-level error shape (vLLM's unwrapped error object).
    pub(crate) fn error_shape(&self) -> UnwrappedError<'_, 'a> {
        UnwrappedError { object: &self.object, message: &self.message }
    }
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
    /// Kept raw: a delta's list is merged (`ToolCalls::merge_delta`), a body's kept whole.
    #[serde(borrow, default)]
    pub tool_calls: Option<&'a RawValue>,
}

fn non_empty<'s>(text: &'s Option<Cow<'_, str>>) -> Option<&'s str> {
    text.as_deref().filter(|t| !t.is_empty())
}

/// Applies the reference accumulator's order to one delta: its tool calls merged, then its
/// content, else its reasoning, else (a pure tool-call delta) a first chunk of no text when
/// none came yet. Returns whether the delta is a chunk; `None` when its `tool_calls` is not a
/// list of calls (the frame does not decode).
fn apply_delta(acc: &mut Accumulator, delta: &Delta<'_>) -> Option<bool> {
    let has_calls = match delta.tool_calls {
        Some(raw) => {
            if !acc.tool_calls.merge_delta(raw) {
                return None;
            }
            raw.get() != "null" && raw.get() != "[]"
        }
        None => false,
    };
    if let Some(content) = non_empty(&delta.content) {
        acc.append(content.as_bytes());
        return Some(true);
    }
    if let Some(reasoning) = non_empty(&delta.reasoning_content).or(non_empty(&delta.reasoning)) {
        acc.append_reasoning(reasoning.as_bytes());
        return Some(true);
    }
    Some(has_calls && acc.first_chunk_ns == 0)
}

/// One streaming frame (chat deltas or completions `text`); `false` when it does not decode.
/// Frames of the common plain shape take the hand scanner, the rest serde.
pub(crate) fn on_frame(acc: &mut Accumulator, json: &[u8], now_ns: fn() -> u64) -> bool {
    if let Some(frame) = plain_frame(json, &mut acc.scan_head) {
        apply_plain(acc, &frame, now_ns);
        return true;
    }
    on_frame_serde(acc, json, now_ns)
}

/// `on_frame_serde`'s effect for a frame the scanner read (the same rules, fewer fields).
fn apply_plain(acc: &mut Accumulator, frame: &PlainFrame<'_>, now_ns: fn() -> u64) {
    if let Some(usage) = &frame.usage {
        acc.usage.apply(usage);
    }
    if !frame.choice {
        return;
    }
    let text = if frame.delta { frame.content } else { frame.text };
    if let Some(text) = text.filter(|t| !t.is_empty()) {
        acc.append(text);
        acc.mark_chunk(now_ns);
    }
    if frame.finish != FinishReason::None {
        acc.finish = frame.finish;
    }
}

/// `on_frame` through serde_json alone.
fn on_frame_serde(acc: &mut Accumulator, json: &[u8], now_ns: fn() -> u64) -> bool {
    let Ok(frame) = serde_json::from_slice::<Frame<'_>>(json) else { return false };
    if acc.note_error(&frame.error, frame.error_shape(), json) {
        return true;
    }
    if let Some(choice) = &frame.choices.0 {
        let content = match (&choice.delta, non_empty(&choice.text)) {
            (Some(delta), _) => match apply_delta(acc, delta) {
                Some(chunk) => chunk,
                None => return false,
            },
            (None, Some(text)) => {
                acc.append(text.as_bytes());
                true
            }
            (None, None) => false,
        };
        if content {
            acc.mark_chunk(now_ns);
        }
        if let Some(FinishField(reason)) = choice.finish_reason {
            if reason != FinishReason::None {
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
    on_body_plain(acc, json, |frame| frame.message_content)
        .unwrap_or_else(|| on_body_serde(acc, json))
}

/// A non-streaming body of the plain shape through the hand scanner (`text` picks the output
/// field: chat's message content, completions' text): `Some(decoded)` when the scanner read
/// it, `None` when serde must.
pub(crate) fn on_body_plain(
    acc: &mut Accumulator,
    json: &[u8],
    text: fn(PlainFrame<'_>) -> Option<&[u8]>,
) -> Option<bool> {
    let frame = plain_frame(json, &mut acc.scan_head)?;
    if !frame.choice {
        return Some(false);
    }
    if let Some(output) = text(frame).filter(|t| !t.is_empty()) {
        acc.append(output);
    }
    if frame.finish != FinishReason::None {
        acc.finish = frame.finish;
    }
    if let Some(usage) = &frame.usage {
        acc.usage.apply(usage);
    }
    Some(true)
}

/// `on_body` through serde_json alone.
fn on_body_serde(acc: &mut Accumulator, json: &[u8]) -> bool {
    let Ok(frame) = serde_json::from_slice::<Frame<'_>>(json) else { return false };
    if acc.note_error(&frame.error, frame.error_shape(), json) {
        return true;
    }
    let Some(choice) = &frame.choices.0 else { return false };
    if let Some(message) = &choice.message {
        if let Some(reasoning) =
            non_empty(&message.reasoning_content).or(non_empty(&message.reasoning))
        {
            acc.append_reasoning(reasoning.as_bytes());
        }
        if let Some(content) = non_empty(&message.content) {
            acc.append(content.as_bytes());
        }
        if let Some(raw) = message.tool_calls {
            if !acc.tool_calls.set_whole(raw) {
                return false;
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
    use loadgen_py::xorshift::Xorshift64Star;

    use super::*;
    use crate::adapter::scan::ScanHead;
    use crate::request::ApiType;

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
    fn vllms_unwrapped_error_object_is_an_error_in_every_adapter() {
        let error = br#"{"object":"error","message":"context too long","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(plain_frame(error, &mut ScanHead::default()), None, "the scanner declines");
        for api in [ApiType::OpenAiChat, ApiType::OpenAiCompletions, ApiType::Sglang] {
            let mut acc = Accumulator::new(api, 1 << 10);
            acc.on_sse_frame(error, clock);
            assert!(acc.stream_error, "{api:?}");
            assert_eq!(acc.error_message, b"context too long", "{api:?}");
            assert_eq!(acc.malformed_frames, 0, "{api:?}");
            let mut acc = Accumulator::new(api, 1 << 10);
            assert!(acc.on_body(error), "{api:?}");
            assert_eq!(
                (acc.stream_error, acc.error_message.as_slice()),
                (true, &b"context too long"[..])
            );
            // Without a string message the object is quoted; another `object` is no error.
            let mut acc = Accumulator::new(api, 1 << 10);
            acc.on_sse_frame(br#"{"object":"error","code":500}"#, clock);
            assert_eq!(acc.error_message, br#"{"object":"error","code":500}"#, "{api:?}");
            let mut acc = Accumulator::new(api, 1 << 10);
            acc.on_sse_frame(
                br#"{"object":"chat.completion.chunk","message":"hi","choices":[]}"#,
                clock,
            );
            assert!(!acc.stream_error, "{api:?}");
        }
    }

    #[test]
    fn reasoning_content_and_tool_calls_compose_as_the_references_str() {
        let acc = run(
            ApiType::OpenAiChat,
            &[
                r#"{"choices":[{"delta":{"reasoning_content":"think"}}]}"#,
                r#"{"choices":[{"delta":{"reasoning":"more","content":"ans"}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{}"}}]}}]}"#,
            ],
        );
        let calls = r#"[{"type":"function","function":{"arguments":"{}","name":"f"}}]"#;
        assert_eq!(String::from_utf8_lossy(&acc.output), format!("thinkans{calls}"));
        assert_eq!(
            (acc.first_chunk_len, acc.reasoning_len, acc.tool_calls_len),
            (5, 5, calls.len())
        );
        // A response that opens with a pure tool-call delta: that delta is the first chunk
        // (of no text), later tool-call deltas are no chunks.
        let acc = run(
            ApiType::OpenAiChat,
            &[
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":""}}]}}]}"#,
                r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}"#,
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            ],
        );
        let calls = r#"[{"type":"function","function":{"arguments":"{}","name":"f"},"id":"c"}]"#;
        assert_eq!(String::from_utf8_lossy(&acc.output), calls);
        assert_eq!((acc.first_chunk_ns, acc.first_chunk_len, acc.chunks.n_chunks()), (42, 0, 1));
        assert_eq!((acc.reasoning_len, acc.tool_calls_len), (0, calls.len()));
        // A body: reasoning, content, then the server's own list, compacted.
        let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 10);
        let body = br#"{"choices":[{"message":{"content":"a","reasoning_content":"r","tool_calls":[ {"id":"x","type":"function","function":{"name":"g","arguments":"{}"}} ]},"finish_reason":"tool_calls"}]}"#;
        assert!(acc.on_body(body));
        let calls = r#"[{"id":"x","type":"function","function":{"name":"g","arguments":"{}"}}]"#;
        assert_eq!(String::from_utf8_lossy(&acc.output), format!("ra{calls}"));
        assert_eq!(
            (acc.first_chunk_len, acc.reasoning_len, acc.tool_calls_len),
            (acc.output.len(), 1, calls.len())
        );
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

    /// The workspace's deterministic generator (xorshift64*) with the draws these tests make:
    /// reproducible failures.
    struct Gen(Xorshift64Star);

    impl Gen {
        fn new(seed: u64) -> Gen {
            Gen(Xorshift64Star::new(seed))
        }
        fn below(&mut self, n: u64) -> u64 {
            self.0.below(n)
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.below(100) < percent
        }
        fn pick<'p>(&mut self, items: &[&'p str]) -> &'p str {
            items[self.below(items.len() as u64) as usize]
        }
    }

    /// Writes one JSON value.
    type Write = fn(&mut Gen, &mut Vec<u8>);
    /// A key and the writer of its value.
    type Entry<'k> = (&'k str, Write);

    /// Optional whitespace between tokens.
    fn ws(g: &mut Gen, out: &mut Vec<u8>) {
        if g.chance(8) {
            out.extend_from_slice(g.pick(&[" ", "\n", "\t ", "\r\n"]).as_bytes());
        }
    }

    /// A JSON string literal (sometimes not valid JSON: raw control or non-UTF-8 bytes).
    fn string(g: &mut Gen, out: &mut Vec<u8>) {
        out.push(b'"');
        for _ in 0..g.below(6) {
            let piece: &[u8] = match g.below(80) {
                0 => b"\\\"",
                1 => b"\\n",
                2 => b"\\u00e9",
                3 => "é".as_bytes(),
                4 => "🚀".as_bytes(),
                5 => b"\x01",
                6 => b"\xff",
                7 => b"\\",
                _ => g.pick(&["a", "Hel", "lo", " ", "0123456789", "stop", "{", "}"]).as_bytes(),
            };
            out.extend_from_slice(piece);
        }
        out.push(b'"');
    }

    /// Any value an ignored field might hold.
    fn any_value(g: &mut Gen, out: &mut Vec<u8>) {
        match g.below(16) {
            0..=2 => string(g, out),
            3 => out.extend_from_slice(g.pick(&["null", "true", "false"]).as_bytes()),
            5 => out.extend_from_slice(g.pick(&["[1,2]", "{\"a\":1}", "[]", "{}"]).as_bytes()),
            4 => out.extend_from_slice(g.pick(&["1.5", "1e3", "01", "-", "-0"]).as_bytes()),
            _ => out
                .extend_from_slice(g.pick(&["0", "17", "-3", "170000000000000000000"]).as_bytes()),
        }
    }

    /// An object from (key, value writer) entries, shuffled, sometimes with a duplicate.
    fn object(g: &mut Gen, out: &mut Vec<u8>, entries: &mut [Entry<'_>]) {
        for i in (1..entries.len()).rev() {
            entries.swap(i, g.below(i as u64 + 1) as usize);
        }
        out.push(b'{');
        let mut first = true;
        for (key, value) in entries.iter() {
            let copies = if g.chance(3) { 2 } else { 1 };
            for _ in 0..copies {
                if !std::mem::replace(&mut first, false) {
                    out.push(b',');
                }
                ws(g, out);
                out.extend_from_slice(format!("\"{key}\"").as_bytes());
                ws(g, out);
                out.push(b':');
                ws(g, out);
                value(g, out);
                ws(g, out);
            }
        }
        out.push(b'}');
    }

    fn nullable_string(g: &mut Gen, out: &mut Vec<u8>) {
        match g.below(10) {
            0 => out.extend_from_slice(b"null"),
            1 => any_value(g, out),
            _ => string(g, out),
        }
    }

    /// A frame's `object`: sometimes `"error"` (vLLM's unwrapped error object).
    fn object_name(g: &mut Gen, out: &mut Vec<u8>) {
        if g.chance(15) {
            out.extend_from_slice(g.pick(&["\"error\"", "\"err\\u006fr\""]).as_bytes());
        } else {
            string(g, out);
        }
    }

    fn finish_value(g: &mut Gen, out: &mut Vec<u8>) {
        let reasons =
            ["null", "\"stop\"", "\"length\"", "\"\"", "\"eos\"", "{\"type\":\"stop\"}", "1"];
        out.extend_from_slice(g.pick(&reasons).as_bytes());
    }

    fn delta(g: &mut Gen, out: &mut Vec<u8>) {
        if g.chance(5) {
            return out.extend_from_slice(b"null");
        }
        let mut entries: Vec<Entry<'_>> = Vec::new();
        if g.chance(70) {
            entries.push(("content", nullable_string));
        }
        if g.chance(20) {
            entries.push(("role", string));
        }
        for key in ["reasoning_content", "reasoning"] {
            if g.chance(10) {
                entries.push((key, nullable_string));
            }
        }
        if g.chance(10) {
            entries.push(("tool_calls", |g, out| {
                let calls =
                    ["null", "[]", "[{\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]"];
                out.extend_from_slice(g.pick(&calls).as_bytes());
            }));
        }
        object(g, out, &mut entries);
    }

    fn choice(g: &mut Gen, out: &mut Vec<u8>) {
        let mut entries: Vec<Entry<'_>> = vec![("index", any_value)];
        for (percent, key, value) in [
            (80, "delta", delta as Write),
            (25, "text", nullable_string),
            (70, "finish_reason", finish_value),
            (20, "logprobs", any_value),
            (3, "message", delta),
        ] {
            if g.chance(percent) {
                entries.push((key, value));
            }
        }
        object(g, out, &mut entries);
    }

    fn choices(g: &mut Gen, out: &mut Vec<u8>) {
        match g.below(20) {
            0 => out.extend_from_slice(b"null"),
            1 => out.extend_from_slice(b"[]"),
            2 => out.extend_from_slice(b"\"x\""),
            3 => {
                out.push(b'[');
                choice(g, out);
                out.push(b',');
                choice(g, out);
                out.push(b']');
            }
            _ => {
                out.push(b'[');
                ws(g, out);
                choice(g, out);
                ws(g, out);
                out.push(b']');
            }
        }
    }

    fn frame(g: &mut Gen) -> Vec<u8> {
        let mut entries: Vec<Entry<'_>> = vec![("id", string), ("choices", choices)];
        for (percent, key, value) in [
            (60, "object", object_name as Write),
            (5, "message", nullable_string),
            (60, "created", any_value),
            (60, "model", string),
            (10, "system_fingerprint", any_value),
            (10, "usage", |g: &mut Gen, out: &mut Vec<u8>| {
                let usages = ["null", "{\"prompt_tokens\":3,\"completion_tokens\":4}", "{}"];
                out.extend_from_slice(g.pick(&usages).as_bytes());
            }),
        ] {
            if g.chance(percent) {
                entries.push((key, value));
            }
        }
        let mut out = Vec::new();
        ws(&mut *g, &mut out);
        object(g, &mut out, &mut entries);
        ws(g, &mut out);
        // Sometimes damage it: the scanner must then decline or agree that it is malformed.
        if g.chance(15) && !out.is_empty() {
            let at = g.below(out.len() as u64) as usize;
            match g.below(4) {
                0 => out.truncate(at),
                1 => drop(out.remove(at)),
                2 => out.insert(at, *b"{}[],:\"x0 ".get(g.below(10) as usize).unwrap()),
                _ => out.push(b'x'),
            }
        }
        out
    }

    /// Property: for any frame sequence, the scanner-first path leaves the accumulator exactly as
    /// serde alone does (output, first-chunk stamp and length, finish, usage, malformed count).
    #[test]
    fn scanner_path_equals_serde_path_on_generated_frames() {
        let mut g = Gen::new(0x9e37_79b9_7f4a_7c15);
        let mut scanned = 0;
        const CASES: usize = 40_000;
        for case in 0..CASES {
            let api = if case % 4 == 0 { ApiType::OpenAiCompletions } else { ApiType::OpenAiChat };
            let mut fast = Accumulator::new(api, 64);
            let mut slow = Accumulator::new(api, 64);
            let mut frames: Vec<Vec<u8>> = Vec::new();
            for _ in 0..1 + g.below(4) {
                let next = frame(&mut g);
                // Often a stream's frames share their head: splice the last frame's head onto
                // this one's `choices` and what follows, so the head cache is exercised.
                let spliced = frames.last().filter(|_| g.chance(60)).and_then(|last| {
                    let at = |f: &[u8]| f.windows(10).position(|w| w == b"\"choices\":");
                    Some([&last[..at(last)?], &next[at(&next)?..]].concat())
                });
                frames.push(spliced.unwrap_or(next));
            }
            for json in &frames {
                scanned +=
                    usize::from(super::plain_frame(json, &mut ScanHead::default()).is_some());
                fast.on_sse_frame(json, clock);
                if !on_frame_serde(&mut slow, json, clock) {
                    slow.malformed_frames += 1;
                }
            }
            let shown: Vec<_> = frames.iter().map(|f| String::from_utf8_lossy(f)).collect();
            assert_eq!(fast.output, slow.output, "case {case}: {shown:?}");
            assert_eq!(
                (fast.first_chunk_ns, fast.first_chunk_len, fast.finish, fast.truncated),
                (slow.first_chunk_ns, slow.first_chunk_len, slow.finish, slow.truncated),
                "case {case}: {shown:?}"
            );
            assert_eq!(fast.usage, slow.usage, "case {case}: {shown:?}");
            assert_eq!(fast.malformed_frames, slow.malformed_frames, "case {case}: {shown:?}");
        }
        // The property says nothing if the scanner never answers.
        assert!(scanned > CASES / 4, "scanner read only {scanned} frames");
    }

    fn usage_object(g: &mut Gen, out: &mut Vec<u8>) {
        let count: Write = |g, out| {
            let counts = ["0", "3", "160", "10000001", "999999999999999999", "1234567890123456789"];
            let odd = ["-1", "1.5", "2e3", "07", "null", "\"5\"", "true", "[]", "-0"];
            let pick = if g.chance(80) { g.pick(&counts) } else { g.pick(&odd) };
            out.extend_from_slice(pick.as_bytes());
        };
        let mut entries: Vec<Entry<'_>> = Vec::new();
        for (percent, key, value) in [
            (85, "prompt_tokens", count),
            (85, "completion_tokens", count),
            (50, "total_tokens", count),
            (10, "prompt_tokens_details", any_value as Write),
        ] {
            if g.chance(percent) {
                entries.push((key, value));
            }
        }
        object(g, out, &mut entries);
    }

    fn body_choice(g: &mut Gen, out: &mut Vec<u8>) {
        let mut entries: Vec<Entry<'_>> = vec![("index", any_value)];
        for (percent, key, value) in [
            (85, "message", delta as Write),
            (10, "delta", delta),
            (15, "text", nullable_string),
            (80, "finish_reason", finish_value),
            (10, "logprobs", any_value),
        ] {
            if g.chance(percent) {
                entries.push((key, value));
            }
        }
        object(g, out, &mut entries);
    }

    /// A non-streaming body: `choices` with a `message`, often a `usage` object.
    fn body(g: &mut Gen) -> Vec<u8> {
        let choices: Write = |g, out| match g.below(12) {
            0 => out.extend_from_slice(b"[]"),
            1 => out.extend_from_slice(b"null"),
            _ => {
                out.push(b'[');
                body_choice(g, out);
                out.push(b']');
            }
        };
        let usage: Write = |g, out| {
            if g.chance(10) {
                out.extend_from_slice(b"null");
            } else {
                usage_object(g, out);
            }
        };
        let mut entries: Vec<Entry<'_>> = vec![("id", string), ("choices", choices)];
        for (percent, key, value) in [
            (60, "object", object_name as Write),
            (5, "message", nullable_string),
            (60, "created", any_value),
            (70, "usage", usage),
            (10, "system_fingerprint", any_value),
        ] {
            if g.chance(percent) {
                entries.push((key, value));
            }
        }
        let mut out = Vec::new();
        object(g, &mut out, &mut entries);
        if g.chance(10) && !out.is_empty() {
            let at = g.below(out.len() as u64) as usize;
            out.insert(at, *b"{}[],:\"x0 ".get(g.below(10) as usize).unwrap());
        }
        out
    }

    /// Property: a non-streaming body leaves the accumulator exactly as serde alone does, for
    /// chat and completions.
    #[test]
    fn scanner_body_path_equals_serde_path_on_generated_bodies() {
        let mut g = Gen::new(0x2545_f491_4f6c_dd1d);
        let mut scanned = 0;
        const CASES: usize = 30_000;
        for case in 0..CASES {
            let api = if case % 3 == 0 { ApiType::OpenAiCompletions } else { ApiType::OpenAiChat };
            let json = body(&mut g);
            let mut fast = Accumulator::new(api, 64);
            let mut slow = Accumulator::new(api, 64);
            scanned += usize::from(super::plain_frame(&json, &mut ScanHead::default()).is_some());
            let fast_ok = fast.on_body(&json);
            let slow_ok = match api {
                ApiType::OpenAiChat => on_body_serde(&mut slow, &json),
                _ => crate::adapter::completions::on_body_serde(&mut slow, &json),
            };
            slow.compose(false);
            let shown = String::from_utf8_lossy(&json);
            assert_eq!(fast_ok, slow_ok, "case {case}: {shown}");
            assert_eq!(fast.output, slow.output, "case {case}: {shown}");
            assert_eq!((fast.finish, fast.truncated), (slow.finish, slow.truncated), "{shown}");
            assert_eq!(fast.usage, slow.usage, "case {case}: {shown}");
        }
        // About a fifth of generated bodies are plain (the generator favours odd bytes).
        assert!(scanned > CASES / 8, "scanner read only {scanned} bodies");
    }

    #[test]
    fn stub_bodies_take_the_scanner() {
        let body = br#"{"id":"r","object":"chat.completion","created":1796026593,"model":"max-tp","choices":[{"index":0,"message":{"role":"assistant","content":"xxxx","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":160,"total_tokens":170},"system_fingerprint":null}"#;
        let frame = super::plain_frame(body, &mut ScanHead::default()).unwrap();
        assert_eq!(frame.message_content, Some(&b"xxxx"[..]));
        let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 10);
        assert!(acc.on_body(body));
        assert_eq!((acc.output.as_slice(), acc.finish), (&b"xxxx"[..], FinishReason::Stop));
        assert_eq!((acc.usage.prompt_tokens, acc.usage.completion_tokens), (Some(10), Some(160)));
    }

    #[test]
    fn stub_frames_take_the_scanner() {
        for frame in [
            &br#"{"id":"r","object":"chat.completion.chunk","created":1,"model":"max-tp","choices":[{"index":0,"delta":{"content":"0123456789"},"finish_reason":null}]}"#[..],
            br#"{"id":"r","object":"chat.completion.chunk","created":1,"model":"max-tp","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            br#"{"id":"r","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"ab","logprobs":null,"finish_reason":null}]}"#,
        ] {
            let mut head = ScanHead::default();
            assert!(super::plain_frame(frame, &mut head).is_some(), "{}", String::from_utf8_lossy(frame));
            // The next frame of the stream skips the head.
            assert!(!head.bytes.is_empty() && super::plain_frame(frame, &mut head).is_some());
        }
    }
}
