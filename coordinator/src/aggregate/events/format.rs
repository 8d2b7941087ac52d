//! Event lines in the reference's layout: the JSON of one batch of events, written by a formatter
//! thread, so the aggregator only copies each event's fields into the batch.

use std::ops::Range;

/// Where a string of an event lies in its batch's text.
pub type Span = Range<u32>;

/// One event, its strings held in the batch's text.
#[derive(Clone, Debug)]
pub enum Op {
    /// A session event (`session.started`, ...): `data` is null, no sample.
    Session {
        event_type: &'static str,
        timestamp_ns: u64,
    },
    /// `sample.issued` with the row's pre-rendered `PromptData` JSON.
    Issued {
        sample_id: u64,
        timestamp_ns: u64,
        row: u32,
    },
    RecvFirst {
        sample_id: u64,
        timestamp_ns: u64,
    },
    /// `["ErrorData",error_type,message]` under `topic` (`error.generic`, `error.loadgen`).
    Error {
        topic: &'static str,
        sample_id: u64,
        timestamp_ns: u64,
        error_type: &'static str,
        message: Span,
    },
    Complete(Complete),
}

impl Op {
    /// When the event happened: the log's sort key.
    pub fn timestamp_ns(&self) -> u64 {
        match self {
            Op::Session { timestamp_ns, .. }
            | Op::Issued { timestamp_ns, .. }
            | Op::RecvFirst { timestamp_ns, .. }
            | Op::Error { timestamp_ns, .. } => *timestamp_ns,
            Op::Complete(c) => c.timestamp_ns,
        }
    }
}

/// A `sample.complete` event.
#[derive(Clone, Debug)]
pub struct Complete {
    pub sample_id: u64,
    pub timestamp_ns: u64,
    /// `None` for a failed sample (data null).
    pub output: Option<Span>,
    /// Where a streamed output's first chunk ends (in bytes of the output, at a char boundary);
    /// `None` writes the output as one string.
    pub first_chunk_end: Option<u32>,
    /// Bytes at the output's head that are reasoning, and at its tail that are the tool calls'
    /// JSON array (both at char boundaries).
    pub reasoning_len: u32,
    pub tool_calls_len: u32,
    pub finish_reason: Option<&'static str>,
    pub worker_id: u16,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// A streamed response's chunk timing, written after the usage counts.
    pub chunks: Option<Chunks>,
    /// The sample's endpoint (its index in the run's endpoints), written after the chunk
    /// timing; `None` in a one-endpoint run, whose lines stay the reference's.
    pub endpoint: Option<u8>,
    /// The wait inside the client before the request was written, written last.
    pub client_wait_ns: Option<u64>,
}

/// The chunk timing of a `sample.complete` line, its gaps held in the batch.
#[derive(Clone, Debug)]
pub struct Chunks {
    pub n_chunks: u32,
    pub chunk_reads: u32,
    pub gaps_ns: Range<u32>,
}

/// Events in log order, with the bytes of their strings and the gaps of their chunks.
#[derive(Debug, Default)]
pub struct Batch {
    pub ops: Vec<Op>,
    pub text: Vec<u8>,
    pub gaps_ns: Vec<u64>,
}

impl Batch {
    /// Copies `bytes` into the batch's text.
    pub fn push_text(&mut self, bytes: &[u8]) -> Span {
        let start = self.text.len() as u32;
        self.text.extend_from_slice(bytes);
        start..self.text.len() as u32
    }

    /// Appends `op`, an event of batch `from`, with its text and gaps copied over.
    pub fn push_from(&mut self, from: &Batch, op: &Op) {
        let op = match op {
            Op::Error { topic, sample_id, timestamp_ns, error_type, message } => Op::Error {
                topic,
                sample_id: *sample_id,
                timestamp_ns: *timestamp_ns,
                error_type,
                message: self.push_text(from.str_at(message).as_bytes()),
            },
            Op::Complete(c) => Op::Complete(Complete {
                output: c.output.as_ref().map(|span| self.push_text(from.str_at(span).as_bytes())),
                chunks: c.chunks.as_ref().map(|ch| Chunks {
                    gaps_ns: self.push_gaps(
                        &from.gaps_ns[ch.gaps_ns.start as usize..ch.gaps_ns.end as usize],
                    ),
                    ..ch.clone()
                }),
                ..c.clone()
            }),
            other => other.clone(),
        };
        self.ops.push(op);
    }

    /// Copies a sample's gaps between chunks into the batch.
    pub fn push_gaps(&mut self, gaps_ns: &[u64]) -> Range<u32> {
        let start = self.gaps_ns.len() as u32;
        self.gaps_ns.extend_from_slice(gaps_ns);
        start..self.gaps_ns.len() as u32
    }

    fn str_at(&self, span: &Span) -> &str {
        // The aggregator copies only `&str`s into the text, at char boundaries.
        std::str::from_utf8(&self.text[span.start as usize..span.end as usize]).unwrap_or("")
    }

    pub fn clear(&mut self) {
        self.ops.clear();
        self.text.clear();
        self.gaps_ns.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// What every batch's lines need beside the batch itself.
#[derive(Debug, Default)]
pub struct FormatContext {
    /// Each dataset row's `PromptData` JSON (`sample.issued`'s data).
    pub prompt_data_json: std::sync::Arc<Vec<String>>,
    /// Hides secrets in an error message (the binary's `redact::redact`): an endpoint may echo
    /// an API key or credentials in one. `None` writes messages as they came.
    pub redact: Option<Redact>,
    /// An agentic run's conversations: each sample's line names its conversation and turn.
    pub conversations: Option<std::sync::Arc<crate::conversation::ConversationPlan>>,
}

/// A function that hides the secrets in a text (the binary's `redact::redact`), so the event
/// log uses the binary's one redaction rather than a copy of it.
pub type Redact = fn(&str) -> String;

/// Appends the lines of `batch` to `out`.
pub fn format_batch(batch: &Batch, ctx: &FormatContext, out: &mut Vec<u8>) {
    for op in &batch.ops {
        match op {
            Op::Session { event_type, timestamp_ns } => {
                head(out, ctx, event_type, *timestamp_ns, None);
                out.extend_from_slice(b"null");
            }
            Op::Issued { sample_id, timestamp_ns, row } => {
                head(out, ctx, "sample.issued", *timestamp_ns, Some(*sample_id));
                let json = ctx.prompt_data_json.get(*row as usize).map_or("null", |s| s.as_str());
                out.extend_from_slice(json.as_bytes());
            }
            Op::RecvFirst { sample_id, timestamp_ns } => {
                head(out, ctx, "sample.recv_first", *timestamp_ns, Some(*sample_id));
                out.extend_from_slice(b"null");
            }
            Op::Error { topic, sample_id, timestamp_ns, error_type, message } => {
                head(out, ctx, topic, *timestamp_ns, Some(*sample_id));
                out.extend_from_slice(b"[\"ErrorData\",");
                push_json_str(out, error_type);
                out.push(b',');
                let message = batch.str_at(message);
                match ctx.redact {
                    Some(redact) => push_json_str(out, &redact(message)),
                    None => push_json_str(out, message),
                }
                out.push(b']');
            }
            Op::Complete(c) => complete(out, ctx, batch, c),
        }
        out.extend_from_slice(b"}\n");
    }
}

fn head(
    out: &mut Vec<u8>,
    ctx: &FormatContext,
    event_type: &str,
    timestamp_ns: u64,
    sample: Option<u64>,
) {
    out.extend_from_slice(b"{\"event_type\":\"");
    out.extend_from_slice(event_type.as_bytes());
    out.extend_from_slice(b"\",\"timestamp_ns\":");
    push_u64(out, timestamp_ns);
    out.extend_from_slice(b",\"sample_uuid\":\"");
    if let Some(id) = sample {
        push_uuid(out, id);
    }
    let label = sample.zip(ctx.conversations.as_ref()).and_then(|(id, c)| c.label(id));
    match label {
        Some((conversation, turn)) => {
            out.extend_from_slice(b"\",\"conversation_id\":");
            push_json_str(out, conversation);
            out.extend_from_slice(b",\"turn\":");
            push_u64(out, u64::from(turn));
            out.extend_from_slice(b",\"data\":");
        }
        None => out.extend_from_slice(b"\",\"conversation_id\":\"\",\"turn\":null,\"data\":"),
    }
}

/// The data is the reference's `TextModelOutput` as its accumulators build it: streamed, the
/// content as a `[first_chunk, rest]` list, or (with reasoning) the content as one string and
/// the reasoning as that list; not streamed, each as one string; the tool calls as their JSON
/// array (null when none).
fn complete(out: &mut Vec<u8>, ctx: &FormatContext, batch: &Batch, c: &Complete) {
    head(out, ctx, "sample.complete", c.timestamp_ns, Some(c.sample_id));
    match &c.output {
        None => out.extend_from_slice(b"null"),
        Some(span) => text_model_output(out, batch.str_at(span), c),
    }
    if let Some(reason) = c.finish_reason {
        out.extend_from_slice(b",\"finish_reason\":\"");
        out.extend_from_slice(reason.as_bytes());
        out.push(b'"');
    }
    out.extend_from_slice(b",\"worker_id\":");
    push_u64(out, u64::from(c.worker_id));
    if let Some(p) = c.prompt_tokens {
        out.extend_from_slice(b",\"prompt_tokens\":");
        push_u64(out, u64::from(p));
    }
    if let Some(n) = c.completion_tokens {
        out.extend_from_slice(b",\"completion_tokens\":");
        push_u64(out, u64::from(n));
    }
    if let Some(chunks) = &c.chunks {
        out.extend_from_slice(b",\"n_chunks\":");
        push_u64(out, u64::from(chunks.n_chunks));
        out.extend_from_slice(b",\"chunk_reads\":");
        push_u64(out, u64::from(chunks.chunk_reads));
        out.extend_from_slice(b",\"chunk_delta_ns\":[");
        let gaps = &batch.gaps_ns[chunks.gaps_ns.start as usize..chunks.gaps_ns.end as usize];
        for (i, &gap) in gaps.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            push_u64(out, gap);
        }
        out.push(b']');
    }
    if let Some(endpoint) = c.endpoint {
        out.extend_from_slice(b",\"endpoint\":");
        push_u64(out, u64::from(endpoint));
    }
    if let Some(wait) = c.client_wait_ns {
        out.extend_from_slice(b",\"client_wait_ns\":");
        push_u64(out, wait);
    }
}

/// The sample uuid of a sample id: 32 lowercase hex digits, like the reference's uuid4().hex.
pub fn sample_uuid(sample_id: u64) -> String {
    let mut out = Vec::with_capacity(32);
    push_uuid(&mut out, sample_id);
    String::from_utf8(out).unwrap_or_default()
}

/// Appends the 32-hex-digit uuid of `sample_id` without allocating.
pub fn push_uuid(out: &mut Vec<u8>, sample_id: u64) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"0000000000000000");
    for shift in (0..16).rev() {
        out.push(HEX[((sample_id >> (shift * 4)) & 0xf) as usize]);
    }
}

/// `["TextModelOutput", output, reasoning, tool_calls]` of a successful sample's `text`.
fn text_model_output(out: &mut Vec<u8>, text: &str, c: &Complete) {
    let reasoning_end = (c.reasoning_len as usize).min(text.len());
    let tools_start = text.len().saturating_sub(c.tool_calls_len as usize).max(reasoning_end);
    let (reasoning, content, tools) =
        (&text[..reasoning_end], &text[reasoning_end..tools_start], &text[tools_start..]);
    out.extend_from_slice(b"[\"TextModelOutput\",");
    match c.first_chunk_end {
        Some(split) if reasoning.is_empty() => push_chunks(out, content, split as usize),
        Some(split) => {
            push_json_str(out, content);
            out.push(b',');
            push_chunks(out, reasoning, split as usize);
        }
        None => {
            push_json_str(out, content);
            out.push(b',');
            match reasoning.is_empty() {
                true => out.extend_from_slice(b"null"),
                false => push_json_str(out, reasoning),
            }
        }
    }
    if c.first_chunk_end.is_some() && reasoning.is_empty() {
        out.extend_from_slice(b",null");
    }
    out.push(b',');
    match tools.is_empty() {
        true => out.extend_from_slice(b"null"),
        false => out.extend_from_slice(tools.as_bytes()),
    }
    out.push(b']');
}

/// A streamed part as the reference's list: `[]`, `[first]` or `[first, rest]`.
fn push_chunks(out: &mut Vec<u8>, text: &str, split: usize) {
    let split = split.min(text.len());
    out.push(b'[');
    if !text.is_empty() {
        push_json_str(out, &text[..split]);
        if split < text.len() {
            out.push(b',');
            push_json_str(out, &text[split..]);
        }
    }
    out.push(b']');
}

/// Appends `n` in decimal without allocating.
pub fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Appends `s` as a JSON string literal.
pub fn push_json_str(out: &mut Vec<u8>, s: &str) {
    // serde_json escapes exactly as JSON requires; writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}
