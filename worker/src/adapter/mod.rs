//! Response adapters: turn SSE frames or whole bodies of each API into one sample's output,
//! first-chunk stamp, finish reason and usage counts. Only the needed fields are decoded, into
//! borrowed structs; a malformed frame drops only itself from the output, and the sample fails
//! as `malformed_frame` (`http::conn` decides).

mod accumulator;
pub mod completions;
mod fields;
pub mod openai;
mod scan;
pub mod sglang;
pub mod usage;
pub mod videogen;

pub use accumulator::{Accumulator, ERROR_QUOTE_BYTES, MALFORMED_QUOTE_BYTES};

use crate::request::ApiType;
use accumulator::cut_at_char;

/// Each frame or body goes to its API's adapter (a video answer may be raw mp4 bytes, not JSON).
impl Accumulator {
    /// One SSE `data:` payload of a streaming response.
    pub fn on_sse_frame(&mut self, json: &[u8], now_ns: fn() -> u64) {
        let ok = match self.api {
            ApiType::OpenAiChat | ApiType::OpenAiCompletions => {
                openai::on_frame(self, json, now_ns)
            }
            ApiType::Sglang => sglang::on_frame(self, json, now_ns),
            // The video endpoint does not stream: an SSE answer is not its shape.
            ApiType::Videogen => false,
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
        // No TPOT for SGLang (cumulative text) or without a content chunk.
        let tpot = self.api != ApiType::Sglang && self.first_chunk_ns != 0;
        self.compose(tpot);
    }

    /// A whole non-streaming body; `false` when it does not decode (the sample is malformed).
    pub fn on_body(&mut self, json: &[u8]) -> bool {
        let ok = match self.api {
            ApiType::OpenAiChat => openai::on_body(self, json),
            ApiType::OpenAiCompletions => completions::on_body(self, json),
            ApiType::Sglang => sglang::on_body(self, json),
            ApiType::Videogen => videogen::on_body(self, json),
        };
        self.first_chunk_ns = 0;
        self.compose(false);
        self.chunks.reset();
        ok
    }
}
