//! Property-based fuzzing of response decoding (`adapter::Accumulator`: the hand scanner, the
//! borrowed serde structs and usage extraction) against a reference that reads the same bytes
//! through `serde_json::Value`: generated frames and bodies, escapes, odd numbers and error
//! objects included, leave the accumulator as the reference says; arbitrary bytes never
//! panic. Cases: `PROPTEST_CASES` (proptest's default, 256, unset).

use loadgen_wire::FinishReason;
use loadgen_worker::adapter::usage::{UsageCounts, UsageState, UsageValue};
use loadgen_worker::adapter::Accumulator;
use loadgen_worker::request::ApiType;
use proptest::prelude::*;
use serde_json::Value;

fn clock() -> u64 {
    5
}

/// A JSON value to render; strings keep how each character is written.
#[derive(Clone, Debug)]
enum J {
    Null,
    Bool(bool),
    Int(i128),
    /// A number literal with a fraction or exponent.
    Float(&'static str),
    Str(Vec<(char, Esc)>),
    Arr(Vec<J>),
    Obj(Vec<(&'static str, J)>),
}

/// How a string character is written.
#[derive(Clone, Copy, Debug)]
enum Esc {
    Raw,
    Short,
    Unicode,
}

fn render(j: &J, ws: &mut impl Iterator<Item = &'static str>, out: &mut String) {
    out.push_str(ws.next().unwrap_or(""));
    match j {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Int(n) => out.push_str(&n.to_string()),
        J::Float(f) => out.push_str(f),
        J::Str(chars) => render_str(chars, out),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render(item, ws, out);
            }
            out.push(']');
        }
        J::Obj(entries) => {
            out.push('{');
            for (i, (key, value)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&format!(
                    "{}\"{key}\"{}:",
                    ws.next().unwrap_or(""),
                    ws.next().unwrap_or("")
                ));
                render(value, ws, out);
            }
            out.push('}');
        }
    }
    out.push_str(ws.next().unwrap_or(""));
}

fn render_str(chars: &[(char, Esc)], out: &mut String) {
    out.push('"');
    for &(c, esc) in chars {
        let must = c == '"' || c == '\\' || (c as u32) < 0x20;
        match (esc, c) {
            (Esc::Short, '"' | '\\' | '/') => out.extend(['\\', c]),
            (Esc::Short, '\n') => out.push_str("\\n"),
            (Esc::Short, '\t') => out.push_str("\\t"),
            (Esc::Raw, _) if !must => out.push(c),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

fn text() -> impl Strategy<Value = J> {
    let ch = prop::sample::select(
        &['a', 'z', ' ', '"', '\\', '/', '\n', '\t', '\u{1}', 'é', '🚀', '\u{2028}', ':', '{'][..],
    );
    let esc = prop::sample::select(&[Esc::Raw, Esc::Raw, Esc::Raw, Esc::Short, Esc::Unicode][..]);
    prop::collection::vec((ch, esc), 0..8).prop_map(J::Str)
}

fn opt_text() -> impl Strategy<Value = J> {
    prop_oneof![1 => Just(J::Null), 6 => text()]
}

/// Anything a usage count may be sent as.
fn count() -> impl Strategy<Value = J> {
    prop_oneof![
        6 => (0i128..20_000_000).prop_map(J::Int),
        1 => (0i128..=u64::MAX as i128 + 1000).prop_map(J::Int),
        1 => (-1000i128..0).prop_map(J::Int),
        1 => prop::sample::select(&["1.5", "2e3", "-0.0", "1E2", "0.0", "3.0e-2"][..]).prop_map(J::Float),
        1 => any::<bool>().prop_map(J::Bool),
        1 => text(),
        1 => Just(J::Null),
        1 => prop::sample::select(&["99999999999999999999", "18446744073709551616", "1234567890123456789"][..]).prop_map(J::Float),
        1 => Just(J::Arr(vec![J::Int(5)])),
        1 => Just(J::Obj(vec![("n", J::Int(5))])),
    ]
}

fn finish() -> impl Strategy<Value = J> {
    const REASONS: &[&str] =
        &["stop", "length", "tool_calls", "content_filter", "function_call", "eos", ""];
    let reason = prop::sample::select(REASONS)
        .prop_map(|r| J::Str(r.chars().map(|c| (c, Esc::Raw)).collect()));
    prop_oneof![
        2 => Just(J::Null),
        4 => reason.clone(),
        1 => reason.prop_map(|r| J::Obj(vec![("type", r), ("matched", J::Null)])),
    ]
}

/// An object from optional entries, in a shuffled order.
fn object(entries: Vec<BoxedStrategy<Option<(&'static str, J)>>>) -> impl Strategy<Value = J> {
    entries
        .prop_map(|entries| entries.into_iter().flatten().collect::<Vec<_>>())
        .prop_shuffle()
        .prop_map(J::Obj)
}

fn entry(
    key: &'static str,
    value: impl Strategy<Value = J> + 'static,
    percent: u32,
) -> BoxedStrategy<Option<(&'static str, J)>> {
    prop::option::weighted(f64::from(percent) / 100.0, value.prop_map(move |v| (key, v))).boxed()
}

fn delta() -> impl Strategy<Value = J> {
    let obj = object(vec![
        entry("role", text(), 30),
        entry("content", opt_text(), 80),
        entry("reasoning_content", opt_text(), 10),
        entry("reasoning", opt_text(), 10),
    ]);
    prop_oneof![1 => Just(J::Null), 9 => obj]
}

fn choice() -> impl Strategy<Value = J> {
    object(vec![
        entry("index", (0i128..3).prop_map(J::Int), 90),
        entry("delta", delta(), 70),
        entry("message", delta(), 20),
        entry("text", opt_text(), 25),
        entry("finish_reason", finish(), 70),
        entry("logprobs", Just(J::Null), 20),
    ])
}

fn usage() -> impl Strategy<Value = J> {
    let obj = object(vec![
        entry("prompt_tokens", count(), 85),
        entry("completion_tokens", count(), 85),
        entry("total_tokens", count(), 50),
    ]);
    prop_oneof![1 => Just(J::Null), 6 => obj]
}

fn error() -> impl Strategy<Value = J> {
    let obj = object(vec![
        entry("object", text(), 50),
        entry("message", prop_oneof![4 => text(), 1 => Just(J::Int(3))], 80),
        entry("type", text(), 50),
        entry("code", (400i128..600).prop_map(J::Int), 50),
    ]);
    prop_oneof![2 => Just(J::Null), 1 => text(), 4 => obj, 1 => Just(J::Int(1))]
}

fn frame() -> impl Strategy<Value = J> {
    let choices = prop_oneof![1 => Just(J::Null), 12 => prop::collection::vec(choice(), 0..3).prop_map(J::Arr)];
    object(vec![
        entry("id", text(), 70),
        entry(
            "object",
            prop_oneof![4 => text(), 1 => Just(J::Str("error".chars().map(|c| (c, Esc::Raw)).collect()))],
            50,
        ),
        entry("message", prop_oneof![4 => text(), 1 => Just(J::Int(3))], 10),
        entry("created", (0i128..2_000_000_000).prop_map(J::Int), 50),
        entry("model", text(), 50),
        entry("choices", choices, 95),
        entry("usage", usage(), 30),
        entry("error", error(), 5),
        entry("system_fingerprint", opt_text(), 10),
    ])
}

/// Rendered JSON with whitespace from `ws_seed` between tokens.
fn rendered(j: J, ws: Vec<bool>) -> Vec<u8> {
    let mut spaces = ws.into_iter().map(|w| if w { " \n" } else { "" }).cycle();
    let mut out = String::new();
    render(&j, &mut spaces, &mut out);
    out.into_bytes()
}

fn json(j: impl Strategy<Value = J>) -> impl Strategy<Value = Vec<u8>> {
    (j, prop::collection::vec(prop::bool::weighted(0.1), 1..16)).prop_map(|(j, ws)| rendered(j, ws))
}

/// The accumulator fields a decode sets.
#[derive(Clone, Debug, Default, PartialEq)]
struct Effect {
    output: Vec<u8>,
    first_chunk: Option<usize>,
    finish: Option<FinishReason>,
    usage: UsageState,
    malformed: u32,
    error: Option<Vec<u8>>,
}

fn of(acc: &Accumulator) -> Effect {
    Effect {
        output: acc.output.clone(),
        first_chunk: (acc.first_chunk_ns != 0).then_some(acc.first_chunk_len),
        finish: (acc.finish != FinishReason::None).then_some(acc.finish),
        usage: acc.usage,
        malformed: acc.malformed_frames,
        error: acc.stream_error.then(|| acc.error_message.clone()),
    }
}

fn non_empty(v: &Value) -> Option<&str> {
    v.as_str().filter(|s| !s.is_empty())
}

/// A usage value's kind as the JSON had it; `None` for `null` (read as absent).
fn usage_value(v: &Value) -> Option<UsageValue> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(_) => UsageValue::Bool,
        Value::String(_) => UsageValue::Str,
        Value::Array(_) | Value::Object(_) => UsageValue::Other,
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => UsageValue::Int(u),
            (None, Some(_)) => UsageValue::Negative,
            _ => UsageValue::Float,
        },
    })
}

fn apply_usage(effect: &mut Effect, frame: &Value) {
    if let Some(usage) = frame.get("usage").filter(|u| u.is_object()) {
        let counts = UsageCounts {
            prompt_tokens: usage.get("prompt_tokens").and_then(usage_value),
            completion_tokens: usage.get("completion_tokens").and_then(usage_value),
        };
        effect.usage.apply(&counts);
    }
}

fn finish_of(v: Option<&Value>) -> Option<FinishReason> {
    let text = match v? {
        Value::String(s) => s.as_str(),
        Value::Object(o) => o.get("type")?.as_str()?,
        _ => return None,
    };
    Some(FinishReason::parse(text)).filter(|r| *r != FinishReason::None)
}

/// Notes an `error` member, else vLLM's unwrapped error object (`"object": "error"` with a
/// top-level `message`); true when there was one.
fn note_error(effect: &mut Effect, frame: &Value, json: &[u8]) -> bool {
    let message = match frame.get("error").filter(|e| !e.is_null()) {
        Some(Value::String(s)) => Some(s.as_str()),
        Some(Value::Object(o)) => o.get("message").and_then(Value::as_str),
        Some(_) => None,
        None if frame.get("object").and_then(Value::as_str) == Some("error") => {
            frame.get("message").and_then(Value::as_str)
        }
        None => return false,
    };
    let quote = message.map_or(json, str::as_bytes);
    effect.error.get_or_insert_with(|| quote[..quote.len().min(1024)].to_vec());
    true
}

/// A chat stream as the reference's accumulator keeps it: content and reasoning apart, each
/// with its first chunk; at the end the output is reasoning ‖ content and the first chunk is
/// the first reasoning chunk when there is reasoning, else the first content chunk.
#[derive(Default)]
struct Stream {
    effect: Effect,
    content: Vec<u8>,
    reasoning: Vec<u8>,
    first_content: usize,
    first_reasoning: usize,
    any_chunk: bool,
}

impl Stream {
    fn ended(mut self) -> Effect {
        let first =
            if self.reasoning.is_empty() { self.first_content } else { self.first_reasoning };
        self.effect.first_chunk = self.any_chunk.then_some(first);
        self.effect.output = [self.reasoning, self.content].concat();
        self.effect
    }
}

/// One chat streaming frame, read through `Value`.
fn reference_frame(stream: &mut Stream, json: &[u8]) {
    let effect = &mut stream.effect;
    let Ok(frame) = serde_json::from_slice::<Value>(json) else {
        effect.malformed += 1;
        return;
    };
    if note_error(effect, &frame, json) {
        return;
    }
    if let Some(choice) = frame.get("choices").and_then(|c| c.get(0)) {
        let delta = choice.get("delta").filter(|d| d.is_object());
        let (text, is_reasoning) = match delta {
            Some(d) => match non_empty(&d["content"]) {
                Some(text) => (Some(text), false),
                None => (
                    non_empty(&d["reasoning_content"]).or_else(|| non_empty(&d["reasoning"])),
                    true,
                ),
            },
            None => (non_empty(&choice["text"]), false),
        };
        if let Some(text) = text {
            let (part, first) = match is_reasoning {
                true => (&mut stream.reasoning, &mut stream.first_reasoning),
                false => (&mut stream.content, &mut stream.first_content),
            };
            if part.is_empty() {
                *first = text.len();
            }
            part.extend_from_slice(text.as_bytes());
            stream.any_chunk = true;
        }
        if let Some(reason) = finish_of(choice.get("finish_reason")) {
            effect.finish = Some(reason);
        }
    }
    apply_usage(effect, &frame);
}

/// A non-streaming chat body, read through `Value`.
fn reference_body(json: &[u8]) -> Effect {
    let mut effect = Effect::default();
    let Ok(frame) = serde_json::from_slice::<Value>(json) else {
        effect.malformed = 1;
        return effect;
    };
    if note_error(&mut effect, &frame, json) {
        return effect;
    }
    let Some(choice) = frame.get("choices").and_then(|c| c.get(0)) else {
        effect.malformed = 1;
        return effect;
    };
    if let Some(message) = choice.get("message").filter(|m| m.is_object()) {
        // The reference's message: its reasoning (`reasoning_content`, else `reasoning`), then
        // its content.
        let reasoning =
            non_empty(&message["reasoning_content"]).or_else(|| non_empty(&message["reasoning"]));
        for text in [reasoning, non_empty(&message["content"])].into_iter().flatten() {
            effect.output.extend_from_slice(text.as_bytes());
        }
    }
    effect.finish = finish_of(choice.get("finish_reason"));
    apply_usage(&mut effect, &frame);
    effect
}

proptest! {
    #![proptest_config(super::support::config("fuzz_adapter.txt"))]

    #[test]
    fn stream_frames_decode_as_serde_json_value_reads_them(frames in prop::collection::vec(json(frame()), 1..5)) {
        let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 16);
        let mut want = Stream::default();
        for json in &frames {
            acc.on_sse_frame(json, clock);
            reference_frame(&mut want, json);
        }
        acc.finish_stream();
        let want = want.ended();
        let shown: Vec<_> = frames.iter().map(|f| String::from_utf8_lossy(f).into_owned()).collect();
        prop_assert_eq!(of(&acc), want, "{:?}", shown);
    }

    #[test]
    fn bodies_decode_as_serde_json_value_reads_them(body in json(frame())) {
        let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 16);
        let ok = acc.on_body(&body);
        let mut want = reference_body(&body);
        prop_assert_eq!(ok, want.malformed == 0, "{}", String::from_utf8_lossy(&body));
        // A body that decodes is one output piece (no first-chunk stamp); the malformed flag is
        // the return value, not a frame count.
        want.malformed = 0;
        let mut got = of(&acc);
        got.first_chunk = None;
        if !ok {
            got = Effect::default();
            want = Effect::default();
        }
        prop_assert_eq!(got, want, "{}", String::from_utf8_lossy(&body));
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let apis = [ApiType::OpenAiChat, ApiType::OpenAiCompletions, ApiType::Sglang, ApiType::Videogen];
        for api in apis {
            let mut acc = Accumulator::new(api, 64);
            acc.on_sse_frame(&bytes, clock);
            acc.on_body(&bytes);
            acc.finish_stream();
        }
    }
}

/// The committed seed frames (`tests/corpus/frames/`, one JSON frame a line) decode as the
/// reference reads them, one stream per file.
#[test]
fn frame_corpus_decodes_as_the_reference() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/frames");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read(&path).unwrap();
        let mut acc = Accumulator::new(ApiType::OpenAiChat, 1 << 16);
        let mut want = Stream::default();
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            acc.on_sse_frame(line, clock);
            reference_frame(&mut want, line);
        }
        acc.finish_stream();
        assert_eq!(of(&acc), want.ended(), "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 3, "the corpus is in {}", dir.display());
}
