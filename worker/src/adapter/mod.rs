//! Response adapters: turn SSE frames or whole bodies of each API into one sample's output,
//! first-chunk stamp, finish reason and usage counts. Only the needed fields are decoded, into
//! borrowed structs; a malformed frame drops only itself from the output, and the sample fails
//! as `malformed_frame` (`http::conn` decides).

pub mod completions;
pub mod openai;
mod scan;
pub mod sglang;
pub mod usage;

use loadgen_wire::{ChunkTimes, FinishReason};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::request::ApiType;
use usage::UsageState;

/// One response's accumulated result; buffers are reused across responses.
#[derive(Debug)]
pub struct Accumulator {
    pub api: ApiType,
    /// Reasoning + content + tool-call text, cut at `max_output_bytes`.
    pub output: Vec<u8>,
    /// When the first content-bearing frame was parsed (0 = none yet).
    pub first_chunk_ns: u64,
    /// Bytes of `output` that came with the first content-bearing frame.
    pub first_chunk_len: usize,
    /// Every content-bearing frame's count, read and gap (a streamed response's chunk timing).
    pub chunks: ChunkTimes,
    pub finish: FinishReason,
    pub usage: UsageState,
    /// Frames that did not decode (each dropped alone; the sample then fails as
    /// `malformed_frame`).
    pub malformed_frames: u32,
    /// The first frame that did not decode, quoted up to `MALFORMED_QUOTE_BYTES`.
    pub malformed_quote: Vec<u8>,
    /// The output hit `max_output_bytes` and was cut.
    pub truncated: bool,
    /// The endpoint sent an `error` object (an SSE frame or the body): the sample fails.
    pub stream_error: bool,
    /// The first error's message (else its frame), quoted up to `ERROR_QUOTE_BYTES`.
    pub error_message: Vec<u8>,
    max_output_bytes: usize,
    /// The SSE scanner's frame head, kept across frames and responses (a byte cache).
    scan_head: scan::ScanHead,
}

impl Accumulator {
    pub fn new(api: ApiType, max_output_bytes: usize) -> Accumulator {
        Accumulator {
            api,
            output: Vec::with_capacity(max_output_bytes.min(16 * 1024)),
            first_chunk_ns: 0,
            first_chunk_len: 0,
            chunks: ChunkTimes::with_capacity(CHUNK_GAP_BYTES_RESERVED),
            finish: FinishReason::None,
            usage: UsageState::default(),
            malformed_frames: 0,
            malformed_quote: Vec::with_capacity(MALFORMED_QUOTE_BYTES),
            truncated: false,
            stream_error: false,
            error_message: Vec::with_capacity(ERROR_QUOTE_BYTES),
            max_output_bytes,
            scan_head: scan::ScanHead::with_capacity(256),
        }
    }

    /// The most output a sample keeps (longer output is cut and counted).
    pub fn max_output_bytes(&self) -> usize {
        self.max_output_bytes
    }

    /// Clears everything for the next response, keeping the buffer's capacity.
    pub fn reset(&mut self) {
        self.output.clear();
        self.first_chunk_ns = 0;
        self.first_chunk_len = 0;
        self.chunks.reset();
        self.finish = FinishReason::None;
        self.usage = UsageState::default();
        self.malformed_frames = 0;
        self.malformed_quote.clear();
        self.truncated = false;
        self.stream_error = false;
        self.error_message.clear();
    }

    /// Notes an endpoint's error in a frame or body (`json`, quoted when the error has no
    /// string message): its `error` member, else vLLM's unwrapped error object (`error_shape`);
    /// returns whether there was one. The first error is kept.
    pub(crate) fn note_error(
        &mut self,
        error: &ErrorField<'_>,
        error_shape: UnwrappedError<'_, '_>,
        json: &[u8],
    ) -> bool {
        let unwrapped;
        let info = match (&error.0, error_shape.message()) {
            (Some(info), _) => info,
            (None, Some(message)) => {
                unwrapped = ErrorInfo { message };
                &unwrapped
            }
            (None, None) => return false,
        };
        if !self.stream_error {
            self.stream_error = true;
            let quote = info.message.as_deref().map_or(json, str::as_bytes);
            self.error_message.extend_from_slice(cut_at_char(quote, ERROR_QUOTE_BYTES));
        }
        true
    }

    /// Appends text, cutting at the limit.
    pub(crate) fn append(&mut self, text: &[u8]) {
        let room = self.max_output_bytes.saturating_sub(self.output.len());
        if text.len() > room {
            self.truncated = true;
        }
        self.output.extend_from_slice(&text[..text.len().min(room)]);
    }

    /// Replaces the output (SGLang's cumulative text).
    pub(crate) fn replace(&mut self, text: &[u8]) {
        self.output.clear();
        self.append(text);
    }

    /// Stamps a content-bearing frame: the first one's time and length, and every one's gap
    /// from the one before (one clock read a frame).
    pub(crate) fn mark_chunk(&mut self, now_ns: fn() -> u64) {
        let at_ns = now_ns();
        if self.first_chunk_ns == 0 {
            self.first_chunk_ns = at_ns;
            self.first_chunk_len = self.output.len();
        }
        self.chunks.mark(at_ns);
    }

    /// One SSE `data:` payload of a streaming response.
    pub fn on_sse_frame(&mut self, json: &[u8], now_ns: fn() -> u64) {
        let ok = match self.api {
            ApiType::OpenAiChat | ApiType::OpenAiCompletions => {
                openai::on_frame(self, json, now_ns)
            }
            ApiType::Sglang => sglang::on_frame(self, json, now_ns),
        };
        if !ok {
            if self.malformed_frames == 0 {
                self.malformed_quote.extend_from_slice(cut_at_char(json, MALFORMED_QUOTE_BYTES));
            }
            self.malformed_frames += 1;
        }
    }

    /// Ends a streaming response.
    pub fn finish_stream(&mut self) {
        if self.api == ApiType::Sglang || self.first_chunk_ns == 0 {
            // No TPOT for SGLang (cumulative text) or without a content chunk.
            self.first_chunk_len = self.output.len();
        }
    }

    /// A whole non-streaming body; `false` when it does not decode (the sample is malformed).
    pub fn on_body(&mut self, json: &[u8]) -> bool {
        let ok = match self.api {
            ApiType::OpenAiChat => openai::on_body(self, json),
            ApiType::OpenAiCompletions => completions::on_body(self, json),
            ApiType::Sglang => sglang::on_body(self, json),
        };
        self.first_chunk_ns = 0;
        self.first_chunk_len = self.output.len();
        self.chunks.reset();
        ok
    }
}

/// Gap bytes a response's chunk clock holds before it grows (about 300 chunks at the usual
/// 2–4 bytes a gap); it keeps what it grew to, so the hot path allocates only on a new maximum.
const CHUNK_GAP_BYTES_RESERVED: usize = 1024;

/// Bytes of an endpoint's error message kept in the record's error text.
pub const ERROR_QUOTE_BYTES: usize = 1024;

/// Bytes of the first undecodable SSE frame kept in the record's error text.
pub const MALFORMED_QUOTE_BYTES: usize = 200;

/// At most `limit` bytes of `text`, not ending inside a UTF-8 character.
fn cut_at_char(text: &[u8], limit: usize) -> &[u8] {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while end > 0 && (text[end] & 0b1100_0000) == 0b1000_0000 {
        end -= 1;
    }
    &text[..end]
}

/// An `error` member: absent or `null` is no error; a string is its message; an object's
/// `message` string is its message; anything else is an error without one.
#[derive(Debug, Default)]
pub(crate) struct ErrorField<'a>(pub Option<ErrorInfo<'a>>);

#[derive(Debug)]
pub(crate) struct ErrorInfo<'a> {
    pub message: Option<std::borrow::Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for ErrorField<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // The field's value read as any value; then the rule above.
        let info = match d.deserialize_any(ErrorVisitor)? {
            ErrorValue::Null => None,
            ErrorValue::Message(message) => Some(ErrorInfo { message }),
        };
        Ok(ErrorField(info))
    }
}

enum ErrorValue<'a> {
    Null,
    Message(Option<std::borrow::Cow<'a, str>>),
}

struct ErrorVisitor;

impl<'de> Visitor<'de> for ErrorVisitor {
    type Value = ErrorValue<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an error")
    }
    fn visit_unit<E>(self) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Null)
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(Some(v.into())))
    }
    fn visit_str<E>(self, v: &str) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(Some(v.to_owned().into())))
    }
    fn visit_bool<E>(self, _: bool) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(None))
    }
    fn visit_i64<E>(self, _: i64) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(None))
    }
    fn visit_u64<E>(self, _: u64) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(None))
    }
    fn visit_f64<E>(self, _: f64) -> Result<ErrorValue<'de>, E> {
        Ok(ErrorValue::Message(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(ErrorValue::Message(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut message = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            let value = map.next_value::<MaybeStr<'de>>()?.0;
            if key == "message" && message.is_none() {
                message = value;
            }
        }
        Ok(ErrorValue::Message(message))
    }
}

/// The top-level `object` and `message` of a frame or body. vLLM's `ErrorResponse` comes
/// unwrapped, with no `error` key (`{"object":"error","message":"...","type":"BadRequestError",
/// "param":null,"code":400}`): `object` is `"error"` and `message` (when a string) says why.
#[derive(Clone, Copy)]
pub(crate) struct UnwrappedError<'f, 'a> {
    pub object: &'f MaybeStr<'a>,
    pub message: &'f MaybeStr<'a>,
}

impl<'a> UnwrappedError<'_, 'a> {
    /// `None` when this is no error object; else `Some(its message, when a string)`.
    fn message(self) -> Option<Option<std::borrow::Cow<'a, str>>> {
        (self.object.0.as_deref() == Some("error")).then(|| self.message.0.clone())
    }
}

/// Any JSON value; `Some` when it is a string.
#[derive(Default)]
pub(crate) struct MaybeStr<'a>(pub Option<std::borrow::Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for MaybeStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = MaybeStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(Some(v.into())))
            }
            fn visit_str<E>(self, v: &str) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(Some(v.to_owned().into())))
            }
            fn visit_unit<E>(self) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_bool<E>(self, _: bool) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<MaybeStr<'de>, E> {
                Ok(MaybeStr(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(MaybeStr(None))
            }
        }
        d.deserialize_any(StrVisitor)
    }
}

/// The first element of a JSON array (the rest skipped without allocating); `null` or `[]` give
/// `None`.
#[derive(Debug)]
pub(crate) struct First<T>(pub Option<T>);

impl<T> Default for First<T> {
    fn default() -> Self {
        First(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for First<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FirstVisitor<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for FirstVisitor<T> {
            type Value = First<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_unit<E>(self) -> Result<First<T>, E> {
                Ok(First(None))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<First<T>, A::Error> {
                let first = seq.next_element::<T>()?;
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(First(first))
            }
        }
        d.deserialize_any(FirstVisitor(std::marker::PhantomData))
    }
}

/// A finish reason given as a string (OpenAI), an object with `type` (SGLang) or null.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FinishField(pub FinishReason);

impl<'de> Deserialize<'de> for FinishField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct FinishVisitor;
        impl<'de> Visitor<'de> for FinishVisitor {
            type Value = FinishField;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a finish reason")
            }
            fn visit_str<E>(self, v: &str) -> Result<FinishField, E> {
                Ok(FinishField(FinishReason::parse(v)))
            }
            fn visit_unit<E>(self) -> Result<FinishField, E> {
                Ok(FinishField(FinishReason::None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<FinishField, A::Error> {
                let mut reason = FinishReason::None;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == "type" {
                        reason = map.next_value::<FinishField>()?.0;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(FinishField(reason))
            }
        }
        d.deserialize_any(FinishVisitor)
    }
}
