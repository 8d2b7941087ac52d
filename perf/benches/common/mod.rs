//! What the micro benchmarks share: the record header they push.

use loadgen_wire::{FinishReason, RecordHeader};

/// A completed sample's header, as a worker pushes it.
pub fn header(id: u64) -> RecordHeader {
    RecordHeader {
        sample_id: id,
        issued_ns: 1_000,
        first_chunk_ns: 2_000,
        complete_ns: 3_000 + id,
        sent_ns: 1_500,
        first_chunk_len: 10,
        reasoning_len: 0,
        tool_calls_len: 0,
        prompt_tokens: Some(12),
        completion_tokens: Some(160),
        http_status: 200,
        finish: FinishReason::Stop as u8,
        ..RecordHeader::default()
    }
}
