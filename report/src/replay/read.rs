//! Reading `events.jsonl`: one compact JSON event a line, parsed into borrowed typed events.
//!
//! The file is streamed through a few reused blocks of whole lines, parsed on one thread per
//! core and visited in line order, so a 2,000,000-sample log is never held whole; every line
//! is checked, and the first that is not a compact event of a
//! known type stops the read with its line number. Keys a known event does not use are
//! ignored, so lines that gain keys still read. The run's own limits hold here too: no line
//! longer than a run writes ([`EVENT_LINE_BYTES_MAX`]) is held, no output longer than a run
//! keeps ([`LOGGED_OUTPUT_BYTES_MAX`]) is counted, and every stamp is one a run can write
//! (`stamps`).

use std::borrow::Cow;
use std::fmt;
use std::io::{BufRead, Read};

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::stamps::{StampCheck, StampKind};

/// Bytes of the read buffer: large enough that a long output line is read in few calls.
const READ_BUFFER_BYTES: usize = 1 << 20;

/// What every compact event line begins with (the reference's writer and ours).
const COMPACT_PREFIX: &[u8] = b"{\"event_type\":\"";

/// The longest output text a run logs for one sample: the worker keeps at most
/// `MAX_OUTPUT_BYTES` of a response's output, and each of those bytes is at most three once
/// made valid UTF-8 (an invalid byte becomes U+FFFD). A longer output is refused before the
/// tokenizer, whose memory grows a few hundred bytes per byte of text, sees it.
pub const LOGGED_OUTPUT_BYTES_MAX: usize = 3 * loadgen_plan::plan::MAX_OUTPUT_BYTES;

/// The longest line read, in bytes; a longer line is refused without being held. No line a
/// run writes comes near it: the longest is a `sample.issued` line whose prompt is at the
/// dataset's bound (`dataset::PROMPT_BYTES_MAX`, 4 MiB), every byte escaped (`\u0001`: six
/// bytes a byte, 24 MiB), with its other fields.
pub const EVENT_LINE_BYTES_MAX: usize = 32 << 20;

/// A session event's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionKind {
    Started,
    Ended,
    StopLoadgen,
    StartTracking,
    StopTracking,
}

/// One event line, borrowing its strings from the line where it can.
#[derive(Debug)]
pub enum Event<'a> {
    Session {
        kind: SessionKind,
        timestamp_ns: u64,
    },
    Issued {
        uuid: u128,
        timestamp_ns: u64,
        prompt: Option<&'a RawValue>,
        /// The sample's conversation id and turn, an agentic run's (`None`: `""` and `null`).
        label: Option<(Cow<'a, str>, u32)>,
    },
    RecvFirst {
        uuid: u128,
        timestamp_ns: u64,
    },
    /// `sample.recv_non_first`: written only with `stream_all_chunks`; no metric reads it.
    RecvNonFirst {
        timestamp_ns: u64,
    },
    Complete(Complete<'a>),
    /// `error.generic`, `error.client`, `error.session`: a sample's failure when it names one.
    Error {
        uuid: Option<u128>,
        timestamp_ns: u64,
        error_type: Cow<'a, str>,
        message: Cow<'a, str>,
    },
    /// `error.loadgen`: a sample abandoned by the run (cap, interrupt, drain timeout).
    Abandoned {
        uuid: Option<u128>,
        timestamp_ns: u64,
    },
}

impl Event<'_> {
    /// The line's stamp, and what it is to the order checks (`stamps`).
    pub fn stamp(&self) -> (StampKind, u64) {
        match *self {
            Event::Session { kind: SessionKind::Started, timestamp_ns } => {
                (StampKind::SessionStarted, timestamp_ns)
            }
            Event::Session { kind: SessionKind::Ended, timestamp_ns } => {
                (StampKind::SessionEnded, timestamp_ns)
            }
            Event::Session { timestamp_ns, .. }
            | Event::Issued { timestamp_ns, .. }
            | Event::RecvFirst { timestamp_ns, .. }
            | Event::RecvNonFirst { timestamp_ns }
            | Event::Error { timestamp_ns, .. }
            | Event::Abandoned { timestamp_ns, .. } => (StampKind::Other, timestamp_ns),
            Event::Complete(ref c) => (StampKind::Other, c.timestamp_ns),
        }
    }
}

/// A `sample.complete` line.
#[derive(Debug)]
pub struct Complete<'a> {
    pub uuid: u128,
    pub timestamp_ns: u64,
    /// `None` when `data` is null: the sample failed.
    pub output: Option<ModelOutput<'a>>,
    pub finish_reason: Option<Cow<'a, str>>,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// A streamed sample's chunk timing (llm-loadgen's addition; absent in the reference's
    /// logs): its chunk count, the reads that brought them, the gaps between them.
    pub chunks: Option<ChunkLine>,
    /// The sample's endpoint, its index in the run's endpoints (llm-loadgen's addition,
    /// written only by runs of two or more endpoints).
    pub endpoint: Option<u8>,
    /// The sample's wait inside the client before its request was written (llm-loadgen's
    /// addition; absent in the reference's logs and for a request never written).
    pub client_wait_ns: Option<u64>,
}

/// The chunk timing of a `sample.complete` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkLine {
    pub n_chunks: u32,
    pub chunk_reads: u32,
    pub gaps_ns: Vec<u64>,
}

/// The output of a `TextModelOutput`: one string (not streamed) or its chunks (streamed).
#[derive(Debug)]
pub enum Output<'a> {
    Text(Cow<'a, str>),
    Chunks(Vec<Cow<'a, str>>),
}

impl Output<'_> {
    /// The whole output text.
    pub fn whole(&self) -> Cow<'_, str> {
        match self {
            Output::Text(text) => Cow::Borrowed(text.as_ref()),
            Output::Chunks(chunks) if chunks.len() == 1 => Cow::Borrowed(chunks[0].as_ref()),
            Output::Chunks(chunks) => Cow::Owned(chunks.concat()),
        }
    }

    /// Bytes of the whole output text.
    pub fn len(&self) -> usize {
        match self {
            Output::Text(text) => text.len(),
            Output::Chunks(chunks) => chunks.iter().map(|c| c.len()).sum(),
        }
    }

    /// The output has no text at all.
    pub fn is_empty(&self) -> bool {
        match self {
            Output::Text(text) => text.is_empty(),
            Output::Chunks(chunks) => chunks.iter().all(|c| c.is_empty()),
        }
    }

    /// Bytes of the first chunk of a streamed part (0 when it has none); `None` when not
    /// streamed.
    fn first_chunk(&self) -> Option<usize> {
        match self {
            Output::Chunks(chunks) => Some(chunks.first().map_or(0, |c| c.len())),
            Output::Text(_) => None,
        }
    }

    fn push_to(&self, out: &mut String) {
        match self {
            Output::Text(text) => out.push_str(text),
            Output::Chunks(chunks) => chunks.iter().for_each(|c| out.push_str(c)),
        }
    }
}

/// A `TextModelOutput`: its output, its reasoning, and its tool calls as one compact JSON
/// array (a streamed log's chunk lists merged as the reference's `merge_tool_calls`).
#[derive(Debug)]
pub struct ModelOutput<'a> {
    pub output: Output<'a>,
    pub reasoning: Option<Output<'a>>,
    pub tool_calls: Option<Cow<'a, str>>,
}

impl ModelOutput<'_> {
    /// Bytes of the reference's `str(TextModelOutput)`.
    pub fn len(&self) -> usize {
        let reasoning = self.reasoning.as_ref().map_or(0, Output::len);
        self.output.len() + reasoning + self.tool_calls.as_ref().map_or(0, |t| t.len())
    }

    /// No output, reasoning or tool call at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the reference's `str(TextModelOutput)`: reasoning, output, tool-call JSON (the
    /// text a run counts).
    pub fn push_text(&self, out: &mut String) {
        if let Some(reasoning) = &self.reasoning {
            reasoning.push_to(out);
        }
        self.output.push_to(out);
        if let Some(calls) = &self.tool_calls {
            out.push_str(calls);
        }
    }

    /// The whole text (`push_text`).
    #[cfg(test)]
    pub fn whole(&self) -> String {
        let mut out = String::new();
        self.push_text(&mut out);
        out
    }

    /// Where the text after the reference's first chunk begins (bytes of `push_text`'s text):
    /// the first reasoning chunk when there is reasoning, else the first output chunk; `None`
    /// when not streamed.
    pub fn first_chunk_len(&self) -> Option<usize> {
        match &self.reasoning {
            Some(reasoning) if !reasoning.is_empty() => reasoning.first_chunk(),
            _ => self.output.first_chunk(),
        }
    }
}

/// `data` of a `sample.complete` line: `["TextModelOutput", output, reasoning?, tool_calls?]`
/// (the reference's array form; trailing defaults may be left out).
struct DataParts<'a> {
    tag: Cow<'a, str>,
    output: Output<'a>,
    reasoning: Option<Output<'a>>,
    tool_calls: Option<&'a RawValue>,
}

impl<'de: 'a, 'a> Deserialize<'de> for DataParts<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PartsVisitor;
        impl<'de> Visitor<'de> for PartsVisitor {
            type Value = DataParts<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("[\"TextModelOutput\", output, reasoning, tool_calls]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let missing = |what| de::Error::custom(format!("no {what}"));
                let tag: Cow<'de, str> = seq.next_element()?.ok_or_else(|| missing("tag"))?;
                let output = seq.next_element()?.unwrap_or(Output::Text(Cow::Borrowed("")));
                let reasoning = seq.next_element::<Option<Output<'de>>>()?.flatten();
                let tool_calls = seq.next_element::<Option<&'de RawValue>>()?.flatten();
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::custom("more than four elements"));
                }
                Ok(DataParts { tag, output, reasoning, tool_calls })
            }
        }
        deserializer.deserialize_seq(PartsVisitor)
    }
}

/// The line as the serde layer sees it; unknown keys are skipped.
#[derive(Deserialize)]
struct RawEvent<'a> {
    #[serde(borrow)]
    event_type: Cow<'a, str>,
    timestamp_ns: u64,
    #[serde(borrow, default)]
    sample_uuid: Cow<'a, str>,
    #[serde(borrow, default)]
    conversation_id: Cow<'a, str>,
    #[serde(default)]
    turn: Option<u32>,
    #[serde(borrow, default)]
    data: Option<&'a RawValue>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    prompt_tokens: Option<u32>,
    #[serde(default)]
    completion_tokens: Option<u32>,
    #[serde(default)]
    n_chunks: Option<u32>,
    #[serde(default)]
    chunk_reads: Option<u32>,
    #[serde(default)]
    chunk_delta_ns: Option<Vec<u64>>,
    #[serde(default)]
    endpoint: Option<u8>,
    client_wait_ns: Option<u64>,
}

/// Why a line cannot be read: the message after "events.jsonl line N: ".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    pub line: u64,
    pub what: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "events.jsonl line {}: {}", self.line, self.what)
    }
}

fn bad(line: u64, what: impl Into<String>) -> LineError {
    LineError { line, what: what.into() }
}

/// A sample uuid as a number: 32 hex digits (ours are the sample id, the reference's uuid4 hex).
fn parse_uuid(text: &str, line: u64) -> Result<u128, LineError> {
    if text.len() == 32 {
        if let Ok(v) = u128::from_str_radix(text, 16) {
            return Ok(v);
        }
    }
    Err(bad(line, format!("sample_uuid {text:?} is not 32 hex digits")))
}

fn sample_uuid(raw: &RawEvent<'_>, line: u64) -> Result<u128, LineError> {
    if raw.sample_uuid.is_empty() {
        return Err(bad(line, format!("{} has no sample_uuid", raw.event_type)));
    }
    parse_uuid(&raw.sample_uuid, line)
}

fn optional_uuid(raw: &RawEvent<'_>, line: u64) -> Result<Option<u128>, LineError> {
    if raw.sample_uuid.is_empty() {
        return Ok(None);
    }
    parse_uuid(&raw.sample_uuid, line).map(Some)
}

/// Parses one line (without its newline). The one function that knows the line layout.
pub fn parse_line(bytes: &[u8], line: u64) -> Result<Event<'_>, LineError> {
    if !bytes.starts_with(COMPACT_PREFIX) {
        let what = if bytes.iter().all(u8::is_ascii_whitespace) {
            "an empty line where an event was expected".to_string()
        } else {
            format!(
                "not a compact JSON event (each line must be one object beginning \
                 {{\"event_type\":\", as the run writes it; a pretty-printed or edited log \
                 cannot be read): {}",
                preview(bytes)
            )
        };
        return Err(bad(line, what));
    }
    let raw: RawEvent<'_> = serde_json::from_slice(bytes)
        .map_err(|e| bad(line, format!("malformed event ({e}): {}", preview(bytes))))?;
    let ts = raw.timestamp_ns;
    let event = match raw.event_type.as_ref() {
        "session.started" => session(SessionKind::Started, ts),
        "session.ended" => session(SessionKind::Ended, ts),
        "session.stop_loadgen" => session(SessionKind::StopLoadgen, ts),
        "session.start_performance_tracking" => session(SessionKind::StartTracking, ts),
        "session.stop_performance_tracking" => session(SessionKind::StopTracking, ts),
        "sample.issued" => {
            let uuid = sample_uuid(&raw, line)?;
            let label = raw.turn.filter(|_| !raw.conversation_id.is_empty());
            let label = label.map(|turn| (raw.conversation_id, turn));
            Event::Issued { uuid, timestamp_ns: ts, prompt: raw.data, label }
        }
        "sample.recv_first" => {
            Event::RecvFirst { uuid: sample_uuid(&raw, line)?, timestamp_ns: ts }
        }
        "sample.recv_non_first" => Event::RecvNonFirst { timestamp_ns: ts },
        "sample.complete" => Event::Complete(complete(raw, line)?),
        "error.generic" | "error.client" | "error.session" => error(raw, line)?,
        "error.loadgen" => Event::Abandoned { uuid: optional_uuid(&raw, line)?, timestamp_ns: ts },
        other => {
            return Err(bad(line, format!("unknown event type {other:?}")));
        }
    };
    Ok(event)
}

fn session(kind: SessionKind, timestamp_ns: u64) -> Event<'static> {
    Event::Session { kind, timestamp_ns }
}

fn complete<'a>(raw: RawEvent<'a>, line: u64) -> Result<Complete<'a>, LineError> {
    let uuid = sample_uuid(&raw, line)?;
    let output = match raw.data {
        None => None,
        Some(data) => {
            let output = model_output(data).map_err(|why| bad(line, why))?;
            check_output_len(&output, line)?;
            Some(output)
        }
    };
    Ok(Complete {
        uuid,
        timestamp_ns: raw.timestamp_ns,
        output,
        finish_reason: raw.finish_reason,
        prompt_tokens: raw.prompt_tokens,
        completion_tokens: raw.completion_tokens,
        chunks: chunk_line(raw.n_chunks, raw.chunk_reads, raw.chunk_delta_ns, line)?,
        endpoint: raw.endpoint,
        client_wait_ns: raw.client_wait_ns,
    })
}

/// A `sample.complete` line's non-null `data`: the reference's `TextModelOutput` array.
pub fn model_output(data: &RawValue) -> Result<ModelOutput<'_>, String> {
    let parts: DataParts<'_> = serde_json::from_str(data.get())
        .map_err(|e| format!("sample.complete data is not a TextModelOutput ({e})"))?;
    if parts.tag != "TextModelOutput" {
        return Err(format!("sample.complete data is {:?}, not TextModelOutput", parts.tag));
    }
    let tool_calls = match parts.tool_calls {
        Some(raw) => super::tool_calls::calls_json(raw)
            .map_err(|why| format!("sample.complete data's tool calls: {why}"))?,
        None => None,
    };
    Ok(ModelOutput { output: parts.output, reasoning: parts.reasoning, tool_calls })
}

/// An output no longer than a run logs ([`LOGGED_OUTPUT_BYTES_MAX`]).
fn check_output_len(output: &ModelOutput<'_>, line: u64) -> Result<(), LineError> {
    let len = output.len();
    if len > LOGGED_OUTPUT_BYTES_MAX {
        return Err(bad(
            line,
            format!(
                "the sample's output is {len} bytes, more than a run logs ({LOGGED_OUTPUT_BYTES_MAX}: \
                 the worker keeps {} bytes of a response's output, MAX_OUTPUT_BYTES, each at most \
                 3 bytes as UTF-8), so the line is not a run's",
                loadgen_plan::plan::MAX_OUTPUT_BYTES
            ),
        ));
    }
    Ok(())
}

/// The three chunk keys come together or not at all.
fn chunk_line(
    n_chunks: Option<u32>,
    chunk_reads: Option<u32>,
    gaps_ns: Option<Vec<u64>>,
    line: u64,
) -> Result<Option<ChunkLine>, LineError> {
    match (n_chunks, chunk_reads, gaps_ns) {
        (None, None, None) => Ok(None),
        (Some(n_chunks), Some(chunk_reads), Some(gaps_ns)) => {
            Ok(Some(ChunkLine { n_chunks, chunk_reads, gaps_ns }))
        }
        _ => Err(bad(
            line,
            "sample.complete has some of n_chunks, chunk_reads and chunk_delta_ns but not all three",
        )),
    }
}

fn error<'a>(raw: RawEvent<'a>, line: u64) -> Result<Event<'a>, LineError> {
    let uuid = optional_uuid(&raw, line)?;
    let (error_type, message) = match raw.data {
        None => (Cow::Borrowed("error"), Cow::Borrowed("")),
        Some(data) => {
            let (tag, error_type, message): (Cow<'_, str>, Cow<'_, str>, Cow<'_, str>) =
                serde_json::from_str(data.get()).map_err(|e| {
                    bad(line, format!("{} data is not an ErrorData ({e})", raw.event_type))
                })?;
            if tag != "ErrorData" {
                return Err(bad(
                    line,
                    format!("{} data is {tag:?}, not ErrorData", raw.event_type),
                ));
            }
            (error_type, message)
        }
    };
    Ok(Event::Error { uuid, timestamp_ns: raw.timestamp_ns, error_type, message })
}

/// The start of a bad line, for the message (lines can be megabytes: only the start is read).
fn preview(bytes: &[u8]) -> String {
    const PREVIEW_CHARS: usize = 80;
    // Four bytes hold any char: more than enough bytes for the preview and one char past it.
    let head = &bytes[..bytes.len().min(4 * (PREVIEW_CHARS + 1))];
    let text = String::from_utf8_lossy(head);
    let mut out: String = text.chars().take(PREVIEW_CHARS).collect();
    if out.len() < bytes.len() && text.chars().nth(PREVIEW_CHARS).is_some() {
        out.push('…');
    }
    out
}

impl<'de: 'a, 'a> Deserialize<'de> for Output<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OutputVisitor;
        impl<'de> Visitor<'de> for OutputVisitor {
            type Value = Output<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an output string or a list of chunk strings")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Output::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Output::Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Output::Text(Cow::Owned(v)))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut chunks = Vec::with_capacity(seq.size_hint().unwrap_or(2));
                while let Some(chunk) = seq.next_element::<Cow<'de, str>>()? {
                    chunks.push(chunk);
                }
                Ok(Output::Chunks(chunks))
            }
        }
        deserializer.deserialize_any(OutputVisitor)
    }
}

/// Why the log cannot be read: an I/O error or a bad line.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    Line(LineError),
}

/// Bytes of whole lines a parsing thread takes at a time.
const BLOCK_BYTES: usize = 4 << 20;

/// Whole lines read for one parsing thread: their bytes, and where each line ends (after
/// its newline).
#[derive(Default)]
struct Block {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    first_line: u64,
}

impl Block {
    fn lines(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(start, &end)| &self.bytes[start..end - 1])
    }

    fn parse(&self) -> Vec<Result<Event<'_>, LineError>> {
        self.lines().zip(self.first_line..).map(|(body, line)| parse_line(body, line)).collect()
    }
}

/// How filling the blocks ended: more to read, the end of the log, or an error at the line
/// after the last one read (raised once the lines before it are visited).
enum Filled {
    More,
    End,
    Stop(ReadError),
}

/// Calls `visit` with every event of `reader` in line order. A read error, a bad line or a
/// last line without its newline (a truncated log) stops it; so does an error from `visit`.
/// The lines are parsed on one thread per core, a few megabytes of lines each at a time, and
/// visited in order on the caller's thread, so `visit` sees what a line-by-line read gives,
/// up to the same first error.
pub fn for_each_event(
    reader: impl BufRead,
    visit: impl FnMut(Event<'_>, u64) -> Result<(), LineError>,
) -> Result<u64, ReadError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    read_events(reader, visit, threads, BLOCK_BYTES)
}

/// `for_each_event` over `threads` parsing threads taking `block_bytes` of lines at a time.
fn read_events(
    mut reader: impl BufRead,
    mut visit: impl FnMut(Event<'_>, u64) -> Result<(), LineError>,
    threads: usize,
    block_bytes: usize,
) -> Result<u64, ReadError> {
    let mut blocks: Vec<Block> = (0..threads.max(1)).map(|_| Block::default()).collect();
    let mut line = 0u64;
    let mut stamps = StampCheck::default();
    loop {
        let filled = fill_blocks(&mut reader, &mut blocks, &mut line, block_bytes);
        let parsed: Vec<Vec<Result<Event<'_>, LineError>>> = parse_blocks(&blocks);
        for (events, block) in parsed.into_iter().zip(&blocks) {
            for (event, n) in events.into_iter().zip(block.first_line..) {
                let event = event.map_err(ReadError::Line)?;
                let (kind, ts) = event.stamp();
                stamps.check(kind, ts, n).map_err(|e| ReadError::Line(bad(e.line, e.what)))?;
                visit(event, n).map_err(ReadError::Line)?;
            }
        }
        match filled {
            Filled::More => {}
            Filled::End => break,
            Filled::Stop(e) => return Err(e),
        }
    }
    if line == 0 {
        return Err(ReadError::Line(bad(0, "the log is empty: no event to rebuild from")));
    }
    Ok(line)
}

/// Parses each block on a thread of its own (the first on the caller's).
fn parse_blocks(blocks: &[Block]) -> Vec<Vec<Result<Event<'_>, LineError>>> {
    let used = blocks.iter().take_while(|b| !b.ends.is_empty()).count();
    if used <= 1 {
        return blocks[..used].iter().map(Block::parse).collect();
    }
    std::thread::scope(|scope| {
        let others: Vec<_> =
            blocks[1..used].iter().map(|b| scope.spawn(move || b.parse())).collect();
        let mut parsed = vec![blocks[0].parse()];
        for handle in others {
            parsed.push(handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        parsed
    })
}

/// Reads whole lines into `blocks`, `block_bytes` or so each, numbering them from `line`.
fn fill_blocks(
    reader: &mut impl BufRead,
    blocks: &mut [Block],
    line: &mut u64,
    block_bytes: usize,
) -> Filled {
    for block in blocks.iter_mut() {
        block.bytes.clear();
        block.ends.clear();
    }
    for block in blocks.iter_mut() {
        block.first_line = *line + 1;
        while block.bytes.len() < block_bytes {
            let start = block.bytes.len();
            let limit = EVENT_LINE_BYTES_MAX as u64 + 1;
            let n = match reader.by_ref().take(limit).read_until(b'\n', &mut block.bytes) {
                Ok(n) => n,
                Err(e) => return Filled::Stop(ReadError::Io(e)),
            };
            if n == 0 {
                return Filled::End;
            }
            let read = &block.bytes[start..];
            if read.len() > EVENT_LINE_BYTES_MAX && read.last() != Some(&b'\n') {
                let len = read.len();
                block.bytes.truncate(start);
                return Filled::Stop(too_long(reader, len, *line + 1));
            }
            if read.last() != Some(&b'\n') {
                let what = format!(
                    "the last line ends without a newline: the log is truncated (the run was \
                     killed while writing it?): {}",
                    preview(read)
                );
                block.bytes.truncate(start);
                return Filled::Stop(ReadError::Line(bad(*line + 1, what)));
            }
            *line += 1;
            block.ends.push(block.bytes.len());
        }
    }
    Filled::More
}

/// The error for line `line`, longer than [`EVENT_LINE_BYTES_MAX`]: `held` bytes of it are
/// read; the rest is passed over (not held) to give its length.
fn too_long(reader: &mut impl BufRead, held: usize, line: u64) -> ReadError {
    let mut len = held;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) => return ReadError::Io(e),
        };
        let (used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), chunk.is_empty()),
        };
        len += used;
        reader.consume(used);
        if done {
            break;
        }
    }
    ReadError::Line(bad(
        line,
        format!(
            "the line is {len} bytes, longer than any line a run writes ({EVENT_LINE_BYTES_MAX} \
             bytes, EVENT_LINE_BYTES_MAX), so it is not a run's; it was not read"
        ),
    ))
}

/// Opens `path` for [`for_each_event`] (never through a link: `report::open_existing`).
pub fn open(path: &std::path::Path) -> std::io::Result<impl BufRead> {
    let file = crate::open_existing(path)?;
    Ok(std::io::BufReader::with_capacity(READ_BUFFER_BYTES, file))
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMPLETE: &str = r#"{"event_type":"sample.complete","timestamp_ns":9,"sample_uuid":"00000000000000000000000000000abc","conversation_id":"","turn":null,"data":["TextModelOutput",["Pro","vide"],null,null],"finish_reason":"stop","worker_id":1,"prompt_tokens":3,"completion_tokens":16}"#;

    #[test]
    fn a_complete_line_reads_its_chunks_usage_and_finish_reason() {
        let Event::Complete(c) = parse_line(COMPLETE.as_bytes(), 1).unwrap() else {
            panic!("a complete event")
        };
        assert_eq!(c.uuid, 0xabc);
        assert_eq!(c.timestamp_ns, 9);
        let output = c.output.unwrap();
        assert_eq!(output.whole(), "Provide");
        assert_eq!(output.first_chunk_len(), Some(3));
        assert!(output.reasoning.is_none() && output.tool_calls.is_none());
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        assert_eq!((c.prompt_tokens, c.completion_tokens), (Some(3), Some(16)));
    }

    #[test]
    fn unknown_keys_on_a_known_event_are_ignored() {
        let line = COMPLETE.replace(r#""worker_id":1"#, r#""worker_id":1,"server":"v0.9""#);
        assert!(matches!(parse_line(line.as_bytes(), 1), Ok(Event::Complete(_))));
    }

    #[test]
    fn chunk_timing_is_read_whole_or_the_line_is_refused() {
        let chunks = r#""worker_id":1,"n_chunks":3,"chunk_reads":2,"chunk_delta_ns":[5,70]"#;
        let line = COMPLETE.replace(r#""worker_id":1"#, chunks);
        let Event::Complete(c) = parse_line(line.as_bytes(), 1).unwrap() else {
            panic!("a complete event")
        };
        let want = ChunkLine { n_chunks: 3, chunk_reads: 2, gaps_ns: vec![5, 70] };
        assert_eq!(c.chunks, Some(want));
        let partial = COMPLETE.replace(r#""worker_id":1"#, r#""worker_id":1,"n_chunks":3"#);
        let err = parse_line(partial.as_bytes(), 7).expect_err("refused");
        assert_eq!(err.line, 7);
        assert!(err.what.contains("not all three"), "{}", err.what);
    }

    #[test]
    fn the_endpoint_is_read_after_the_chunk_timing_and_absent_in_one_endpoint_runs() {
        let Event::Complete(c) = parse_line(COMPLETE.as_bytes(), 1).unwrap() else {
            panic!("a complete event")
        };
        assert_eq!(c.endpoint, None);
        let keys = r#""worker_id":1,"n_chunks":1,"chunk_reads":1,"chunk_delta_ns":[],"endpoint":3"#;
        let line = COMPLETE.replace(r#""worker_id":1"#, keys);
        let Event::Complete(c) = parse_line(line.as_bytes(), 1).unwrap() else {
            panic!("a complete event")
        };
        assert_eq!(c.endpoint, Some(3));
        let bad = COMPLETE.replace(r#""worker_id":1"#, r#""worker_id":1,"endpoint":300"#);
        assert!(parse_line(bad.as_bytes(), 4).is_err(), "an endpoint past 255 is refused");
    }

    #[test]
    fn bad_lines_name_what_is_wrong() {
        let cases = [
            ("{", "not a compact JSON event"),
            ("", "an empty line"),
            (r#"{"event_type":"sample.complete","timestamp_ns":9"#, "malformed event"),
            (r#"{"event_type":"sample.teleported","timestamp_ns":9}"#, "unknown event type"),
            (r#"{"event_type": "session.started", "timestamp_ns": 9}"#, "not a compact"),
            (r#"{"event_type":"sample.issued","timestamp_ns":9,"sample_uuid":"xyz"}"#, "32 hex"),
            (r#"{"event_type":"sample.issued","timestamp_ns":-9}"#, "malformed event"),
        ];
        for (line, want) in cases {
            let err = parse_line(line.as_bytes(), 7).unwrap_err();
            assert_eq!(err.line, 7);
            assert!(err.what.contains(want), "{line:?}: {}", err.what);
        }
    }

    /// What `visit` saw: each line's number and event, as text, up to the result.
    fn visits(text: &str, threads: usize, block: usize, fail_at: u64) -> (Vec<String>, String) {
        let mut seen = Vec::new();
        let got = read_events(
            text.as_bytes(),
            |event, line| {
                seen.push(format!("{line} {event:?}"));
                if line == fail_at {
                    return Err(bad(line, "visit refused it"));
                }
                Ok(())
            },
            threads,
            block,
        );
        let got = match got {
            Ok(n) => format!("{n} lines"),
            Err(ReadError::Line(e)) => e.to_string(),
            Err(ReadError::Io(e)) => e.to_string(),
        };
        (seen, got)
    }

    /// Lines parsed on many threads, a block at a time, are visited as a line-by-line read
    /// visits them, up to the same first error: a bad line, a visit's error, a truncated end.
    #[test]
    fn parsing_on_many_threads_visits_what_one_thread_visits() {
        let mut text = String::new();
        for i in 0..300u64 {
            let line =
                COMPLETE.replace("\"timestamp_ns\":9", &format!("\"timestamp_ns\":{}", 10 + i));
            text += &line;
            text.push('\n');
        }
        let bad_line = text.replacen(COMPLETE, "{\"event_type\":\"sample.teleported\"}", 1);
        let bad_late = {
            let mut lines: Vec<&str> = text.lines().collect();
            lines[250] = "{";
            lines.join("\n") + "\n"
        };
        let truncated = format!("{text}{}", &COMPLETE[..40]);
        assert_eq!(visits(&text, 3, 100, 0).1, "300 lines");
        let (seen, err) = visits(&bad_late, 3, 100, 0);
        assert_eq!((seen.len(), err.starts_with("events.jsonl line 251:")), (250, true), "{err}");
        for log in [&text, &bad_line, &bad_late, &truncated] {
            for fail_at in [0, 1, 77, 299] {
                let one = visits(log, 1, 1 << 20, fail_at);
                for (threads, block) in [(2, 100), (3, 1000), (4, 1)] {
                    let many = visits(log, threads, block, fail_at);
                    assert_eq!(many, one, "{threads} threads, {block}-byte blocks");
                }
            }
        }
    }

    #[test]
    fn a_log_without_its_last_newline_is_truncated() {
        let text = format!("{COMPLETE}\n{}", &COMPLETE[..40]);
        let err = for_each_event(text.as_bytes(), |_, _| Ok(())).unwrap_err();
        let ReadError::Line(err) = err else { panic!("a line error") };
        assert_eq!(err.line, 2);
        assert!(err.what.contains("truncated"), "{}", err.what);
        let whole = format!("{COMPLETE}\n");
        assert_eq!(for_each_event(whole.as_bytes(), |_, _| Ok(())).unwrap(), 1);
    }

    #[test]
    fn a_line_longer_than_a_run_writes_is_refused_with_its_length_and_not_held() {
        use std::io::Read;
        let over = EVENT_LINE_BYTES_MAX as u64 + 10;
        let first = format!("{COMPLETE}\n");
        let log = first
            .as_bytes()
            .chain(std::io::repeat(b'x').take(over))
            .chain(&b"\n"[..])
            .chain(first.as_bytes());
        let mut visited = 0;
        let err = for_each_event(std::io::BufReader::new(log), |_, _| {
            visited += 1;
            Ok(())
        })
        .unwrap_err();
        let ReadError::Line(err) = err else { panic!("a line error") };
        assert_eq!((err.line, visited), (2, 1), "{}", err.what);
        assert!(err.what.contains(&format!("the line is {over} bytes")), "{}", err.what);
        assert!(err.what.contains("EVENT_LINE_BYTES_MAX"), "{}", err.what);
        // A line of exactly the limit is read (and judged on what it holds).
        let at_limit = COMPLETE.replace(
            "\"finish_reason\"",
            &format!(
                "\"pad\":\"{}\",\"finish_reason\"",
                "p".repeat(EVENT_LINE_BYTES_MAX - COMPLETE.len() - 9)
            ),
        );
        assert_eq!(at_limit.len(), EVENT_LINE_BYTES_MAX);
        assert_eq!(for_each_event(format!("{at_limit}\n").as_bytes(), |_, _| Ok(())).unwrap(), 1);
    }

    #[test]
    fn an_output_longer_than_a_run_logs_is_refused_naming_the_limit() {
        let at = |bytes: usize| {
            let chunks = format!("[\"a\",\"{}\"]", "b".repeat(bytes - 1));
            COMPLETE.replace("[\"Pro\",\"vide\"]", &chunks)
        };
        assert!(parse_line(at(LOGGED_OUTPUT_BYTES_MAX).as_bytes(), 7).is_ok());
        let err = parse_line(at(LOGGED_OUTPUT_BYTES_MAX + 1).as_bytes(), 7).unwrap_err();
        assert_eq!(err.line, 7);
        let want = format!("output is {} bytes, more than a run logs", LOGGED_OUTPUT_BYTES_MAX + 1);
        assert!(err.what.contains(&want), "{}", err.what);
    }

    #[test]
    fn the_preview_of_a_long_bad_line_reads_only_its_start() {
        let line = format!("{}{}", "é".repeat(100), "\u{ff}".repeat(10_000));
        let shown = preview(line.as_bytes());
        assert_eq!(shown.chars().count(), 81, "80 chars and the ellipsis");
        assert!(shown.ends_with('…') && shown.starts_with("éé"));
        assert_eq!(preview(b"short"), "short");
    }
}
