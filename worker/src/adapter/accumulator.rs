//! One response's accumulated result (output, first-chunk stamp, chunk timing, finish reason,
//! usage, errors) and the edits every adapter makes to it; `mod.rs` routes each frame or body
//! to its API's adapter.

use loadgen_wire::{ChunkTimes, FinishReason};

use super::fields::{ErrorField, ErrorInfo, UnwrappedError};
use super::scan::ScanHead;
use super::usage::UsageState;
use crate::request::ApiType;
use loadgen_py::tool_calls::ToolCalls;

/// One response's accumulated result; buffers are reused across responses.
#[derive(Debug)]
pub struct Accumulator {
    pub api: ApiType,
    /// The content while the response is read; once it ends (`compose`), the reference's
    /// `str(TextModelOutput)`: reasoning ‖ content ‖ the tool calls' JSON array, cut at
    /// `max_output_bytes`.
    pub output: Vec<u8>,
    /// Reasoning text while the response is read (moved into `output` at its end).
    pub reasoning: Vec<u8>,
    /// The response's tool calls (written into `output` at its end).
    pub tool_calls: ToolCalls,
    /// Once composed: bytes of `output` that are reasoning (its head) and tool-call JSON (its
    /// tail).
    pub reasoning_len: usize,
    pub tool_calls_len: usize,
    /// When the first content-bearing frame was parsed (0 = none yet).
    pub first_chunk_ns: u64,
    /// Bytes of `output` that are the reference's first chunk: the first reasoning chunk when
    /// there is reasoning, else the first content chunk (the text after it is TPOT's).
    pub first_chunk_len: usize,
    /// The first reasoning and content chunks' bytes, kept until the response ends.
    first_reasoning_chunk_len: usize,
    first_content_chunk_len: usize,
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
    /// The sample being answered (set before each exchange): a video answered as raw bytes is
    /// written under its uuid.
    pub sample_id: u64,
    /// Where raw video answers are written (`INFERENCE_ENDPOINT_VIDEOGEN_FALLBACK_DIR`);
    /// `None` fails such an answer.
    pub video_fallback_dir: Option<std::path::PathBuf>,
    /// The SSE scanner's frame head, kept across frames and responses (a byte cache).
    pub(super) scan_head: ScanHead,
}

impl Accumulator {
    pub fn new(api: ApiType, max_output_bytes: usize) -> Accumulator {
        Accumulator {
            api,
            output: Vec::with_capacity(max_output_bytes.min(16 * 1024)),
            reasoning: Vec::new(),
            tool_calls: ToolCalls::default(),
            reasoning_len: 0,
            tool_calls_len: 0,
            first_chunk_ns: 0,
            first_chunk_len: 0,
            first_reasoning_chunk_len: 0,
            first_content_chunk_len: 0,
            chunks: ChunkTimes::with_capacity(CHUNK_GAP_BYTES_RESERVED),
            finish: FinishReason::None,
            usage: UsageState::default(),
            malformed_frames: 0,
            malformed_quote: Vec::with_capacity(MALFORMED_QUOTE_BYTES),
            truncated: false,
            stream_error: false,
            error_message: Vec::with_capacity(ERROR_QUOTE_BYTES),
            max_output_bytes,
            sample_id: 0,
            video_fallback_dir: None,
            scan_head: ScanHead::with_capacity(256),
        }
    }

    /// The most output a sample keeps (longer output is cut and counted).
    pub fn max_output_bytes(&self) -> usize {
        self.max_output_bytes
    }

    /// Clears everything for the next response, keeping the buffer's capacity.
    pub fn reset(&mut self) {
        self.clear_output();
        self.first_chunk_ns = 0;
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

    /// Drops the response's output (a failed sample keeps none): content, reasoning, tool
    /// calls and their split.
    pub fn clear_output(&mut self) {
        self.output.clear();
        self.reasoning.clear();
        self.tool_calls.clear();
        self.reasoning_len = 0;
        self.tool_calls_len = 0;
        self.first_chunk_len = 0;
        self.first_reasoning_chunk_len = 0;
        self.first_content_chunk_len = 0;
    }

    /// Bytes the output may still take before the limit.
    fn room(&self) -> usize {
        self.max_output_bytes.saturating_sub(self.output.len() + self.reasoning.len())
    }

    /// Appends content text, cutting at the limit; the first piece is the first content chunk.
    pub(crate) fn append(&mut self, text: &[u8]) {
        let room = self.room();
        if text.len() > room {
            self.truncated = true;
        }
        let was_empty = self.output.is_empty();
        self.output.extend_from_slice(&text[..text.len().min(room)]);
        if was_empty {
            self.first_content_chunk_len = self.output.len();
        }
    }

    /// Appends reasoning text, cutting at the limit; the first piece is the first reasoning
    /// chunk.
    pub(crate) fn append_reasoning(&mut self, text: &[u8]) {
        let room = self.room();
        if text.len() > room {
            self.truncated = true;
        }
        let was_empty = self.reasoning.is_empty();
        self.reasoning.extend_from_slice(&text[..text.len().min(room)]);
        if was_empty {
            self.first_reasoning_chunk_len = self.reasoning.len();
        }
    }

    /// Replaces the output (SGLang's cumulative text).
    pub(crate) fn replace(&mut self, text: &[u8]) {
        self.output.clear();
        self.append(text);
    }

    /// Ends the response's output: `output` becomes reasoning ‖ content ‖ tool-call JSON (the
    /// reference's `str(TextModelOutput)`), with the split kept and the first chunk's bytes
    /// set as the reference's first chunk (`streamed`; else the whole output, no TPOT). Tool
    /// calls that do not fit the limit are dropped whole and the output counts as cut.
    pub(crate) fn compose(&mut self, streamed: bool) {
        self.reasoning_len = self.reasoning.len();
        self.first_chunk_len = if self.reasoning.is_empty() {
            self.first_content_chunk_len
        } else {
            self.first_reasoning_chunk_len
        };
        if !self.reasoning.is_empty() {
            self.reasoning.extend_from_slice(&self.output);
            std::mem::swap(&mut self.reasoning, &mut self.output);
            self.reasoning.clear();
        }
        let before = self.output.len();
        if !self.tool_calls.is_empty() {
            self.tool_calls.write_json(&mut self.output);
            if self.output.len() > self.max_output_bytes {
                self.output.truncate(before);
                self.truncated = true;
            }
        }
        self.tool_calls_len = self.output.len() - before;
        if !streamed {
            self.first_chunk_len = self.output.len();
        }
    }

    /// Stamps a content-bearing frame: the first one's time, and every one's gap from the one
    /// before (one clock read a frame).
    pub(crate) fn mark_chunk(&mut self, now_ns: fn() -> u64) {
        let at_ns = now_ns();
        if self.first_chunk_ns == 0 {
            self.first_chunk_ns = at_ns;
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
