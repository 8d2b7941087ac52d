//! The IPC vocabulary a worker sends to the aggregator: integers only, size asserted at compile time.

use rkyv::{Archive, Deserialize, Serialize};

/// Why a sample failed, grouped by phase; `None` for a success.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureKind {
    None = 0,
    Connect = 1,
    HttpStatus = 2,
    Malformed = 3,
    ConnectionClosed = 4,
    Timeout = 5,
    Cancelled = 6,
    /// The endpoint sent an `error` object inside a 200 response (an SSE frame or the body).
    StreamError = 7,
    /// A stream that ended (close, or a chunked body's end) without `[DONE]` or a finish reason.
    Truncated = 8,
    /// The worker process holding the sample died while the request was in flight.
    WorkerDied = 9,
    /// The response head broke a named limit (header count or head bytes).
    HeadLimit = 10,
    /// The TLS handshake of a (re)connect failed: the certificate did not verify, or the
    /// protocol failed.
    Tls = 11,
    /// An SSE frame of the stream did not decode (not JSON, or not the API's shape): its content
    /// is lost, so the sample's output and token counts are not the server's.
    MalformedFrame = 12,
    /// An agentic turn never sent because an earlier turn of its conversation failed or timed
    /// out (the reference's `TurnAbortedByPriorFailure`): later turns depend on that response.
    TurnAborted = 13,
}

impl FailureKind {
    /// Every kind, in wire order.
    pub const ALL: [FailureKind; 14] = [
        FailureKind::None,
        FailureKind::Connect,
        FailureKind::HttpStatus,
        FailureKind::Malformed,
        FailureKind::ConnectionClosed,
        FailureKind::Timeout,
        FailureKind::Cancelled,
        FailureKind::StreamError,
        FailureKind::Truncated,
        FailureKind::WorkerDied,
        FailureKind::HeadLimit,
        FailureKind::Tls,
        FailureKind::MalformedFrame,
        FailureKind::TurnAborted,
    ];

    /// A stable lowercase name for reports and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::None => "none",
            FailureKind::Connect => "connect",
            FailureKind::HttpStatus => "http_status",
            FailureKind::Malformed => "malformed",
            FailureKind::ConnectionClosed => "connection_closed",
            FailureKind::Timeout => "timeout",
            FailureKind::Cancelled => "cancelled",
            FailureKind::StreamError => "stream_error",
            FailureKind::Truncated => "truncated",
            FailureKind::WorkerDied => "worker_died",
            FailureKind::HeadLimit => "response_head_limit",
            FailureKind::Tls => "tls",
            FailureKind::MalformedFrame => "malformed_frame",
            FailureKind::TurnAborted => "turn_aborted",
        }
    }

    /// The kind with this wire value, `None` (the Rust option) for an unknown value.
    pub fn from_u8(value: u8) -> Option<FailureKind> {
        FailureKind::ALL.get(usize::from(value)).copied()
    }
}

/// The `finish_reason` an endpoint gave; `None` when it gave none.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FinishReason {
    None = 0,
    Stop = 1,
    Length = 2,
    ToolCalls = 3,
    ContentFilter = 4,
    FunctionCall = 5,
    Other = 6,
}

impl FinishReason {
    /// Every reason, in wire order.
    pub const ALL: [FinishReason; 7] = [
        FinishReason::None,
        FinishReason::Stop,
        FinishReason::Length,
        FinishReason::ToolCalls,
        FinishReason::ContentFilter,
        FinishReason::FunctionCall,
        FinishReason::Other,
    ];

    /// The OpenAI spelling ("stop", "length", ...); "" for `None`.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::None => "",
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::FunctionCall => "function_call",
            FinishReason::Other => "other",
        }
    }

    /// The reason with this wire value, `None` (the Rust option) for an unknown value.
    pub fn from_u8(value: u8) -> Option<FinishReason> {
        FinishReason::ALL.get(usize::from(value)).copied()
    }

    /// Maps an endpoint's spelling; unknown non-empty strings become `Other`.
    pub fn parse(text: &str) -> FinishReason {
        match text {
            "" => FinishReason::None,
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            "function_call" => FinishReason::FunctionCall,
            _ => FinishReason::Other,
        }
    }
}

/// Fixed-size head of a completion record.
#[derive(Archive, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordHeader {
    pub sample_id: u64,
    /// Stamped by the coordinator when the sample was handed to the issue ring.
    pub issued_ns: u64,
    /// When the first content-bearing chunk was parsed; 0 = no content chunk.
    pub first_chunk_ns: u64,
    /// When the response ended (or the failure was seen).
    pub complete_ns: u64,
    /// When the worker started writing the request on the socket; 0 = never written (a connect
    /// that failed, a sample cancelled while queued). `sent_ns - issued_ns` is the sample's
    /// client wait: the time it spent inside the client, queued for a free connection or a
    /// connect, after its issue stamp.
    pub sent_ns: u64,
    /// Dataset row of the sample.
    pub row: u32,
    /// Bytes of `output` that came in the first content chunk; equal to `output.len()` when the
    /// adapter gives no TPOT (SGLang, non-streaming).
    pub first_chunk_len: u32,
    /// Bytes at the head of `output` that are reasoning (`reasoning_content` / `reasoning`).
    pub reasoning_len: u32,
    /// Bytes at the tail of `output` that are the tool calls' JSON array.
    pub tool_calls_len: u32,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    pub http_status: u16,
    pub worker_id: u16,
    /// A [`FailureKind`] as `u8`.
    pub failure: u8,
    /// A [`FinishReason`] as `u8`.
    pub finish: u8,
    /// 1 when the request was sent a second time: its reused keep-alive connection closed
    /// before any byte of the response came back (counted as `requests_resent`).
    pub resent: u8,
    /// Which of the run's endpoints the sample went to (its index in the run's endpoint list;
    /// `NO_ENDPOINT`, 255, when it reached none). It fills the header's last padding byte; a
    /// per-(worker, slot) table in the aggregator would cost a lookup per record and a second
    /// source of truth.
    pub endpoint: u8,
}

/// Endpoints a run may have: a record names its endpoint in one byte, and `NO_ENDPOINT` is
/// reserved.
pub const MAX_ENDPOINTS: usize = 255;

/// The endpoint byte of a record whose sample reached no endpoint (cancelled in the queue).
pub const NO_ENDPOINT: u8 = u8::MAX;

/// Size of a serialized header inside a record frame; a multiple of 8 so the bytes after it stay
/// aligned.
pub const RECORD_HEADER_BYTES: usize = std::mem::size_of::<ArchivedRecordHeader>();
const _: () = assert!(RECORD_HEADER_BYTES == 80);
const _: () = assert!(std::mem::align_of::<ArchivedRecordHeader>() <= 8);

impl RecordHeader {
    /// The failure kind; an unknown value reads as `Malformed`.
    pub fn failure_kind(&self) -> FailureKind {
        FailureKind::from_u8(self.failure).unwrap_or(FailureKind::Malformed)
    }

    /// The finish reason; an unknown value reads as `Other`.
    pub fn finish_reason(&self) -> FinishReason {
        FinishReason::from_u8(self.finish).unwrap_or(FinishReason::Other)
    }

    /// The timestamp order every record keeps: issued <= sent <= first chunk <= complete (sent
    /// and first chunk 0 when absent). Checked by the worker before a push and by the
    /// aggregator after a pop.
    pub fn timestamps_ordered(&self) -> bool {
        let from_ns = self.issued_ns.max(self.sent_ns);
        let first_ok = self.first_chunk_ns == 0
            || (from_ns <= self.first_chunk_ns && self.first_chunk_ns <= self.complete_ns);
        let sent_ok = self.sent_ns == 0 || self.issued_ns <= self.sent_ns;
        first_ok && sent_ok && from_ns <= self.complete_ns
    }

    /// The sample's wait inside the client after its issue stamp (`sent_ns - issued_ns`), in
    /// ns; `None` when its request was never written.
    pub fn client_wait_ns(&self) -> Option<u64> {
        (self.sent_ns != 0).then(|| self.sent_ns.saturating_sub(self.issued_ns))
    }

    /// Writes the archived form into `out` (exactly [`RECORD_HEADER_BYTES`], 8-byte aligned).
    pub(crate) fn encode_into(&self, out: &mut [u8]) {
        debug_assert_eq!(out.len(), RECORD_HEADER_BYTES);
        // The low-level API with an empty sub-allocator: a header has no out-of-line data, so
        // nothing is allocated (safe in a freshly forked child, cheap on the hot path).
        let written = rkyv::api::low::to_bytes_in_with_alloc::<_, _, rkyv::rancor::Failure>(
            self,
            rkyv::ser::writer::Buffer::from(out),
            rkyv::ser::allocator::SubAllocator::empty(),
        )
        .expect("a record header always fits its fixed-size buffer");
        debug_assert_eq!(written.len(), RECORD_HEADER_BYTES);
    }

    /// Validates and reads an archived header; `None` when the bytes are not a valid header.
    pub(crate) fn decode(bytes: &[u8]) -> Option<RecordHeader> {
        let archived = rkyv::access::<ArchivedRecordHeader, rkyv::rancor::Failure>(bytes).ok()?;
        Some(RecordHeader {
            sample_id: archived.sample_id.to_native(),
            issued_ns: archived.issued_ns.to_native(),
            first_chunk_ns: archived.first_chunk_ns.to_native(),
            complete_ns: archived.complete_ns.to_native(),
            sent_ns: archived.sent_ns.to_native(),
            row: archived.row.to_native(),
            first_chunk_len: archived.first_chunk_len.to_native(),
            reasoning_len: archived.reasoning_len.to_native(),
            tool_calls_len: archived.tool_calls_len.to_native(),
            prompt_tokens: archived.prompt_tokens.as_ref().map(|v| v.to_native()),
            completion_tokens: archived.completion_tokens.as_ref().map(|v| v.to_native()),
            http_status: archived.http_status.to_native(),
            worker_id: archived.worker_id.to_native(),
            failure: archived.failure,
            finish: archived.finish,
            resent: archived.resent,
            endpoint: archived.endpoint,
        })
    }
}

/// A record popped from a ring, borrowing the ring's bytes.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    pub header: RecordHeader,
    /// Reasoning ‖ content ‖ tool-call JSON, as the reference's `str(TextModelOutput)`; the
    /// header's `reasoning_len` and `tool_calls_len` split it (`parts`).
    pub output: &'a [u8],
    /// For example "HTTP 404: <body>" or "connection refused"; empty on success.
    pub error: &'a [u8],
    /// A streamed response's chunk timing (`ChunkTiming::decode`); empty when it had no content
    /// chunk or was not streamed.
    pub chunk_timing: &'a [u8],
}

/// A record's output cut into the reference's `TextModelOutput` parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputParts<'a> {
    pub reasoning: &'a [u8],
    pub content: &'a [u8],
    pub tool_calls: &'a [u8],
}

impl RecordHeader {
    /// `output` (this record's) cut at the header's split; lengths past the output are clamped.
    pub fn output_parts<'a>(&self, output: &'a [u8]) -> OutputParts<'a> {
        let reasoning_end = (self.reasoning_len as usize).min(output.len());
        let tools_start =
            output.len().saturating_sub(self.tool_calls_len as usize).max(reasoning_end);
        OutputParts {
            reasoning: &output[..reasoning_end],
            content: &output[reasoning_end..tools_start],
            tool_calls: &output[tools_start..],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_parts_split_at_the_header() {
        let h = RecordHeader { reasoning_len: 2, tool_calls_len: 3, ..Default::default() };
        let parts = h.output_parts(b"rrccc[1]");
        assert_eq!(
            (parts.reasoning, parts.content, parts.tool_calls),
            (&b"rr"[..], &b"ccc"[..], &b"[1]"[..])
        );
        let parts = h.output_parts(b"r");
        assert_eq!(
            (parts.reasoning, parts.content, parts.tool_calls),
            (&b"r"[..], &b""[..], &b""[..])
        );
    }

    #[test]
    fn header_roundtrips_through_archive() {
        let header = RecordHeader {
            sample_id: u64::MAX - 3,
            issued_ns: 10,
            first_chunk_ns: 20,
            complete_ns: 30,
            sent_ns: 15,
            row: 7,
            first_chunk_len: 5,
            reasoning_len: 2,
            tool_calls_len: 9,
            prompt_tokens: Some(12),
            completion_tokens: None,
            http_status: 200,
            worker_id: 3,
            failure: FailureKind::None as u8,
            finish: FinishReason::Length as u8,
            resent: 1,
            endpoint: 200,
        };
        #[repr(C, align(8))]
        struct Aligned([u8; RECORD_HEADER_BYTES]);
        let mut buf = Aligned([0; RECORD_HEADER_BYTES]);
        header.encode_into(&mut buf.0);
        assert_eq!(RecordHeader::decode(&buf.0), Some(header));
    }

    #[test]
    fn enums_roundtrip_and_reject_unknown() {
        for kind in FailureKind::ALL {
            assert_eq!(FailureKind::from_u8(kind as u8), Some(kind));
        }
        for reason in FinishReason::ALL {
            assert_eq!(FinishReason::from_u8(reason as u8), Some(reason));
            if reason != FinishReason::Other {
                assert_eq!(FinishReason::parse(reason.as_str()), reason);
            }
        }
        assert_eq!(FailureKind::from_u8(FailureKind::ALL.len() as u8), None);
        assert_eq!(FailureKind::from_u8(11), Some(FailureKind::Tls));
        assert_eq!(FailureKind::from_u8(12), Some(FailureKind::MalformedFrame));
        assert_eq!(FinishReason::from_u8(200), None);
        assert_eq!(FinishReason::parse("eos"), FinishReason::Other);
    }

    #[test]
    fn timestamp_order_check() {
        let mut h =
            RecordHeader { issued_ns: 5, first_chunk_ns: 0, complete_ns: 9, ..Default::default() };
        assert!(h.timestamps_ordered());
        h.first_chunk_ns = 10;
        assert!(!h.timestamps_ordered());
        h.first_chunk_ns = 4;
        assert!(!h.timestamps_ordered());
        h.first_chunk_ns = 6;
        assert!(h.timestamps_ordered());
        // The write lies between the issue and the first chunk.
        h.sent_ns = 6;
        assert!(h.timestamps_ordered());
        assert_eq!(h.client_wait_ns(), Some(1));
        h.sent_ns = 7;
        assert!(!h.timestamps_ordered());
        h.sent_ns = 4;
        assert!(!h.timestamps_ordered());
        h.sent_ns = 0;
        assert_eq!(h.client_wait_ns(), None);
    }
}
