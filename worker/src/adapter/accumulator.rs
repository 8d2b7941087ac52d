//! One response's accumulated result (output, first-chunk stamp, chunk timing, finish reason,
//! usage, errors) and the edits every adapter makes to it; `mod.rs` routes each frame or body
//! to its API's adapter.

use loadgen_wire::{ChunkTimes, FinishReason};

use super::fields::{ErrorField, ErrorInfo, UnwrappedError};
use super::scan::ScanHead;
use super::usage::UsageState;
use crate::request::ApiType;

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
    pub(super) scan_head: ScanHead,
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
            scan_head: ScanHead::with_capacity(256),
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
}

/// Gap bytes a response's chunk clock holds before it grows (about 300 chunks at the usual
/// 2–4 bytes a gap); it keeps what it grew to, so the hot path allocates only on a new maximum.
const CHUNK_GAP_BYTES_RESERVED: usize = 1024;

/// Bytes of an endpoint's error message kept in the record's error text.
pub const ERROR_QUOTE_BYTES: usize = 1024;

/// Bytes of the first undecodable SSE frame kept in the record's error text.
pub const MALFORMED_QUOTE_BYTES: usize = 200;

/// At most `limit` bytes of `text`, not ending inside a UTF-8 character.
pub(super) fn cut_at_char(text: &[u8], limit: usize) -> &[u8] {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while end > 0 && (text[end] & 0b1100_0000) == 0b1000_0000 {
        end -= 1;
    }
    &text[..end]
}
