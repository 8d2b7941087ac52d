//! `events.jsonl`: the run's event lines in the reference's layout, in time order.
//!
//! The aggregator only copies each event's fields and strings into the batch of its 10 ms time
//! bucket (no JSON on its thread; `order`); a bucket older than the reorder window is sorted by
//! timestamp and goes to the formatter threads that write the lines, in batch order (see
//! `writer`). Batches come back emptied, so none is allocated per batch.

mod format;
mod order;
mod writer;

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

pub use format::{push_json_str, push_u64, push_uuid, sample_uuid, Redact};
use format::{Batch, Chunks, Complete, FormatContext, Op};
use order::TimeOrder;
pub use order::REORDER_WINDOW_NS;
use writer::Formatters;

/// Bytes of event strings (outputs, error messages) a batch collects before it is shipped.
pub const EVENTS_BATCH_TEXT_BYTES: usize = 256 * 1024;
/// Events a batch collects before it is shipped.
pub const EVENTS_BATCH_OPS: usize = 4096;

/// How an event log is written.
#[derive(Debug, Clone, Default)]
pub struct EventLogSpec {
    /// Formatter threads (at least one).
    pub formatters: usize,
    /// Cores the formatter threads are pinned to, in turn; empty = unpinned.
    pub cores: Vec<usize>,
    /// Each dataset row's `PromptData` JSON, the data of its `sample.issued` lines.
    pub prompt_data_json: Arc<Vec<String>>,
    /// Hides secrets in error messages (the binary's `redact`), should an endpoint echo one.
    pub redact: Option<Redact>,
    /// The run has two or more endpoints: each `sample.complete` line names its sample's
    /// (`endpoint`, after every other key), so `report DIR` rebuilds the per-endpoint
    /// counts. Off for one endpoint, whose lines stay the reference's.
    pub endpoint_field: bool,
    /// An agentic run's conversations, which name each sample's conversation and turn.
    pub conversations: Option<Arc<crate::conversation::ConversationPlan>>,
}

/// Collects events into time buckets and ships them, in time order, to the formatter threads.
pub struct EventLog {
    order: TimeOrder,
    /// Events due to be written, in time order, until it is full enough to ship.
    out: Batch,
    formatters: Option<Formatters>,
    /// `EventLogSpec::endpoint_field`.
    endpoint_field: bool,
}

/// What a `sample.complete` line says.
pub struct CompleteEvent<'a> {
    pub sample_id: u64,
    pub timestamp_ns: u64,
    pub output: Option<&'a str>,
    pub streamed: bool,
    pub first_chunk_len: Option<usize>,
    /// Bytes of `output` that are reasoning (its head) and tool-call JSON (its tail).
    pub reasoning_len: usize,
    pub tool_calls_len: usize,
    pub finish_reason: Option<&'static str>,
    pub worker_id: u16,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// A streamed response's chunk timing; `None` when it had no content chunk.
    pub chunks: Option<ChunkLine<'a>>,
    /// The endpoint the sample went to (its index in the run's endpoints;
    /// `loadgen_wire::NO_ENDPOINT` when it reached none), written only by a log with
    /// `EventLogSpec::endpoint_field`.
    pub endpoint: u8,
    /// The sample's wait inside the client before its request was written; `None` when it
    /// was never written.
    pub client_wait_ns: Option<u64>,
}

/// The chunk timing of a `sample.complete` line: `n_chunks`, `chunk_reads`, `chunk_delta_ns`.
#[derive(Debug, Clone, Copy)]
pub struct ChunkLine<'a> {
    pub n_chunks: u32,
    pub chunk_reads: u32,
    pub gaps_ns: &'a [u64],
}

impl EventLog {
    /// Creates (truncates) `path` and starts the formatter threads; a link at `path` is
    /// refused (`O_NOFOLLOW`), never written through.
    pub fn create(path: &Path, spec: EventLogSpec) -> io::Result<EventLog> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)?;
        EventLog::from_file(file, spec)
    }

    /// Writes the log into `file` (made by the caller: the binary creates it new in the
    /// report directory it holds) and starts the formatter threads.
    pub fn from_file(file: File, spec: EventLogSpec) -> io::Result<EventLog> {
        let ctx = FormatContext {
            prompt_data_json: spec.prompt_data_json,
            redact: spec.redact,
            conversations: spec.conversations,
        };
        let formatters = Formatters::start(file, ctx, spec.formatters, &spec.cores)?;
        Ok(EventLog {
            order: TimeOrder::default(),
            out: new_batch(),
            formatters: Some(formatters),
            endpoint_field: spec.endpoint_field,
        })
    }

    /// An event log that keeps nothing and writes nothing (for tests and dry runs).
    pub fn disabled() -> EventLog {
        EventLog {
            order: TimeOrder::default(),
            out: Batch::default(),
            formatters: None,
            endpoint_field: false,
        }
    }

    fn push(&mut self, op: Op) {
        self.order.bucket_mut(op.timestamp_ns()).ops.push(op);
    }

    /// Writes the events that happened a reorder window before `now_ns` (CLOCK_MONOTONIC), in
    /// time order. The aggregator calls it on every turn of its loop.
    pub fn advance(&mut self, now_ns: u64) {
        if let Some(formatters) = &mut self.formatters {
            let out = &mut self.out;
            self.order.advance(now_ns, |bucket| take_bucket(out, bucket, formatters));
        }
    }

    /// Events that reached the aggregator more than the reorder window after they happened:
    /// each is written with the oldest open bucket, out of time order by its own delay.
    pub fn late_events(&self) -> u64 {
        self.order.late()
    }

    /// A session event (`session.started`, `session.start_performance_tracking`, ...).
    pub fn session(&mut self, event_type: &'static str, timestamp_ns: u64) {
        if self.formatters.is_some() {
            self.push(Op::Session { event_type, timestamp_ns });
        }
    }

    /// `sample.issued`, with dataset row `row`'s `PromptData` JSON.
    pub fn issued(&mut self, sample_id: u64, timestamp_ns: u64, row: u32) {
        if self.formatters.is_some() {
            self.push(Op::Issued { sample_id, timestamp_ns, row });
        }
    }

    /// `sample.recv_first`.
    pub fn recv_first(&mut self, sample_id: u64, timestamp_ns: u64) {
        if self.formatters.is_some() {
            self.push(Op::RecvFirst { sample_id, timestamp_ns });
        }
    }

    /// `error.generic` with `["ErrorData","error",message]`.
    pub fn error(&mut self, sample_id: u64, timestamp_ns: u64, message: &str) {
        self.error_data("error.generic", sample_id, timestamp_ns, "error", message);
    }

    /// An error event (`error.generic`, `error.loadgen`) with `["ErrorData",error_type,message]`,
    /// the reference's `ErrorData` layout. Secrets in `message` are hidden when it is written.
    pub fn error_data(
        &mut self,
        topic: &'static str,
        sample_id: u64,
        timestamp_ns: u64,
        error_type: &'static str,
        message: &str,
    ) {
        if self.formatters.is_some() {
            let bucket = self.order.bucket_mut(timestamp_ns);
            let message = bucket.push_text(message.as_bytes());
            bucket.ops.push(Op::Error { topic, sample_id, timestamp_ns, error_type, message });
        }
    }

    /// `sample.complete`. `output` is `None` for a failed sample (data null). A streamed output is
    /// written as the reference's `[first_chunk, rest]` list, a non-streamed one as a string.
    pub fn complete(&mut self, c: &CompleteEvent<'_>) {
        if self.formatters.is_none() {
            return;
        }
        let first_chunk_end = match (c.output, c.first_chunk_len) {
            (Some(text), Some(split)) if c.streamed => {
                Some(floor_char_boundary(text, split) as u32)
            }
            _ => None,
        };
        // The split at char boundaries (a lossy decode may have moved them).
        let (reasoning_len, tool_calls_len) = match c.output {
            Some(text) => {
                let r = floor_char_boundary(text, c.reasoning_len);
                let from = text.len().saturating_sub(c.tool_calls_len);
                (r as u32, (text.len() - floor_char_boundary(text, from).max(r)) as u32)
            }
            None => (0, 0),
        };
        let bucket = self.order.bucket_mut(c.timestamp_ns);
        let output = c.output.map(|text| bucket.push_text(text.as_bytes()));
        let chunks = c.chunks.map(|line| Chunks {
            n_chunks: line.n_chunks,
            chunk_reads: line.chunk_reads,
            gaps_ns: bucket.push_gaps(line.gaps_ns),
        });
        bucket.ops.push(Op::Complete(Complete {
            sample_id: c.sample_id,
            timestamp_ns: c.timestamp_ns,
            output,
            first_chunk_end,
            reasoning_len,
            tool_calls_len,
            finish_reason: c.finish_reason,
            worker_id: c.worker_id,
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            chunks,
            endpoint: endpoint_key(self.endpoint_field, c.endpoint),
            client_wait_ns: c.client_wait_ns,
        }));
    }

    /// Ships what is left, waits for the formatter threads to write it, and syncs the file on a
    /// thread of its own: the run's end computes its figures meanwhile (syncing a gigabyte of
    /// events takes longer than the figures of the samples in it). The outcome is read with
    /// `EventsClosing::error`.
    pub fn close(self) -> EventsClosing {
        let Some(mut formatters) = self.ship_rest() else { return EventsClosing::done(Ok(())) };
        let file = match formatters.join() {
            Ok(file) => file,
            Err(e) => return EventsClosing::done(Err(e)),
        };
        let Ok(for_thread) = file.try_clone() else { return EventsClosing::done(file.sync_all()) };
        let syncer = std::thread::Builder::new().name("events-sync".into());
        match syncer.spawn(move || for_thread.sync_all()) {
            Ok(handle) => EventsClosing::syncing(handle),
            Err(_) => EventsClosing::done(file.sync_all()),
        }
    }

    fn ship_rest(mut self) -> Option<Formatters> {
        let formatters = self.formatters.as_mut()?;
        let out = &mut self.out;
        self.order.flush(|bucket| take_bucket(out, bucket, formatters));
        if !out.is_empty() {
            let last = std::mem::take(out);
            formatters.ship(last);
        }
        self.formatters.take()
    }
}

/// events.jsonl written and being synced on a thread of its own (`EventLog::close`); its
/// outcome is waited for by the first reader, and when dropped.
#[derive(Debug, Default)]
pub struct EventsClosing {
    handle: std::sync::Mutex<Option<std::thread::JoinHandle<io::Result<()>>>>,
    error: std::sync::OnceLock<Option<String>>,
}

impl EventsClosing {
    fn done(outcome: io::Result<()>) -> EventsClosing {
        let closing = EventsClosing::default();
        let _ = closing.error.set(outcome.err().map(|e| e.to_string()));
        closing
    }

    fn syncing(handle: std::thread::JoinHandle<io::Result<()>>) -> EventsClosing {
        EventsClosing {
            handle: std::sync::Mutex::new(Some(handle)),
            error: std::sync::OnceLock::new(),
        }
    }

    /// Waits until every line is written and the file synced; the first write error, if any.
    pub fn error(&self) -> Option<&str> {
        self.error
            .get_or_init(|| {
                let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
                let outcome = match handle.map(std::thread::JoinHandle::join) {
                    Some(Ok(outcome)) => outcome,
                    Some(Err(_)) => Err(io::Error::other("the events sync thread panicked")),
                    None => Ok(()),
                };
                outcome.err().map(|e| e.to_string())
            })
            .as_deref()
    }
}

impl Drop for EventsClosing {
    fn drop(&mut self) {
        self.error();
    }
}

/// The `endpoint` key a `sample.complete` line carries: only in a log of two or more
/// endpoints, and only for a sample that reached one.
fn endpoint_key(endpoint_field: bool, endpoint: u8) -> Option<u8> {
    (endpoint_field && endpoint != loadgen_wire::NO_ENDPOINT).then_some(endpoint)
}

/// Copies a due bucket's events, in their sorted order, into the outgoing batch, shipping it
/// whenever it is full: the formatters get batches of 4,096 events or 256 KiB of text, as
/// before the log was time-ordered. (Batches of a whole 10 ms bucket, megabytes at a million
/// events a second, tripled the formatter's CPU per line: its writes then copied from memory
/// that had left the cache.)
fn take_bucket(out: &mut Batch, bucket: &Batch, formatters: &mut Formatters) {
    for op in &bucket.ops {
        out.push_from(bucket, op);
        if out.ops.len() >= EVENTS_BATCH_OPS || out.text.len() >= EVENTS_BATCH_TEXT_BYTES {
            let full = std::mem::take(out);
            *out = formatters.ship(full);
            if out.ops.capacity() == 0 {
                *out = new_batch();
            }
        }
    }
}

fn new_batch() -> Batch {
    Batch {
        ops: Vec::with_capacity(EVENTS_BATCH_OPS),
        // Room past the threshold for the bucket that crosses it.
        text: Vec::with_capacity(EVENTS_BATCH_TEXT_BYTES + 64 * 1024),
        gaps_ns: Vec::new(),
    }
}

fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut i = index.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}
#[cfg(test)]
mod tests {
    use super::*;

    fn next_file_number() -> usize {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }

    fn lines(log: impl FnOnce(&mut EventLog)) -> String {
        lines_with(1, log)
    }

    /// The lines `log` writes through `formatters` formatter threads.
    fn lines_with(formatters: usize, log: impl FnOnce(&mut EventLog)) -> String {
        let prompts = vec![r#"["PromptData","hi",null,null,null,null,null,null]"#.to_string()];
        let spec = EventLogSpec {
            formatters,
            prompt_data_json: Arc::new(prompts),
            redact: Some(|text: &str| text.replace("sk-abc", "<redacted>")),
            ..EventLogSpec::default()
        };
        lines_of(spec, log)
    }

    /// The lines `log` writes through a log made with `spec`.
    fn lines_of(spec: EventLogSpec, log: impl FnOnce(&mut EventLog)) -> String {
        let dir = std::env::temp_dir().join(format!("events-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}.jsonl", next_file_number()));
        let mut ev = EventLog::create(&path, spec).unwrap();
        log(&mut ev);
        assert_eq!(ev.close().error(), None);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        text
    }

    #[test]
    fn session_and_issued_lines_match_the_reference_layout() {
        let text = lines(|ev| {
            ev.session("session.started", 5);
            ev.issued(1, 7, 0);
        });
        assert_eq!(
            text,
            concat!(
                r#"{"event_type":"session.started","timestamp_ns":5,"sample_uuid":"","conversation_id":"","turn":null,"data":null}"#,
                "\n",
                r#"{"event_type":"sample.issued","timestamp_ns":7,"sample_uuid":"00000000000000000000000000000001","conversation_id":"","turn":null,"data":["PromptData","hi",null,null,null,null,null,null]}"#,
                "\n"
            )
        );
    }

    #[test]
    fn complete_lines_carry_usage_only_when_sent() {
        let base = CompleteEvent {
            sample_id: 0xabc,
            timestamp_ns: 9,
            output: Some("Provide examples"),
            streamed: true,
            first_chunk_len: Some(7),
            reasoning_len: 0,
            tool_calls_len: 0,
            finish_reason: Some("stop"),
            worker_id: 1,
            prompt_tokens: None,
            completion_tokens: None,
            chunks: None,
            endpoint: 1,
            client_wait_ns: None,
        };
        let gaps_ns = [0, 1_500_000];
        let text = lines(|ev| {
            ev.complete(&base);
            ev.complete(&CompleteEvent {
                prompt_tokens: Some(3),
                completion_tokens: Some(16),
                ..base
            });
            ev.complete(&CompleteEvent { output: None, finish_reason: None, ..base });
            let chunks = Some(ChunkLine { n_chunks: 3, chunk_reads: 2, gaps_ns: &gaps_ns });
            ev.complete(&CompleteEvent { completion_tokens: Some(16), chunks, ..base });
            ev.complete(&CompleteEvent { client_wait_ns: Some(1_234), ..base });
        });
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(
            got[0],
            r#"{"event_type":"sample.complete","timestamp_ns":9,"sample_uuid":"00000000000000000000000000000abc","conversation_id":"","turn":null,"data":["TextModelOutput",["Provide"," examples"],null,null],"finish_reason":"stop","worker_id":1}"#
        );
        assert!(got[1].ends_with(r#""worker_id":1,"prompt_tokens":3,"completion_tokens":16}"#));
        assert!(got[2].contains(r#""data":null,"worker_id":1}"#));
        assert!(got[3].ends_with(
            r#""worker_id":1,"completion_tokens":16,"n_chunks":3,"chunk_reads":2,"chunk_delta_ns":[0,1500000]}"#
        ));
        assert!(got[4].ends_with(r#""worker_id":1,"client_wait_ns":1234}"#), "the wait comes last");
    }

    #[test]
    fn reasoning_and_tool_calls_are_the_text_model_outputs_own_fields() {
        let calls = r#"[{"type":"function","function":{"arguments":"{}","name":"f"}}]"#;
        let whole = format!("thinkmoreans{calls}");
        let base = CompleteEvent {
            sample_id: 1,
            timestamp_ns: 9,
            output: Some(&whole),
            streamed: true,
            first_chunk_len: Some(5),
            reasoning_len: 9,
            tool_calls_len: calls.len(),
            finish_reason: None,
            worker_id: 0,
            prompt_tokens: None,
            completion_tokens: None,
            chunks: None,
            endpoint: 0,
            client_wait_ns: None,
        };
        let content_only = "ans";
        let text = lines(|ev| {
            ev.complete(&base);
            ev.complete(&CompleteEvent { streamed: false, ..base });
            ev.complete(&CompleteEvent { output: Some(calls), reasoning_len: 0, ..base });
            ev.complete(&CompleteEvent {
                output: Some(content_only),
                reasoning_len: 0,
                tool_calls_len: 0,
                streamed: false,
                ..base
            });
        });
        let data: Vec<&str> = text
            .lines()
            .map(|l| &l[l.find(r#""data":"#).unwrap() + 7..l.rfind(r#","worker_id""#).unwrap()])
            .collect();
        assert_eq!(data[0], format!(r#"["TextModelOutput","ans",["think","more"],{calls}]"#));
        assert_eq!(data[1], format!(r#"["TextModelOutput","ans","thinkmore",{calls}]"#));
        // A pure tool-call response: no text chunk, the calls alone.
        assert_eq!(data[2], format!(r#"["TextModelOutput",[],null,{calls}]"#));
        assert_eq!(data[3], r#"["TextModelOutput","ans",null,null]"#);
    }

    #[test]
    fn an_agentic_sample_s_lines_name_its_conversation_and_turn() {
        use crate::conversation::{ConversationPlan, ConversationSpan};
        let spans = vec![
            ConversationSpan { first_row: 0, turns: 2 },
            ConversationSpan { first_row: 2, turns: 1 },
        ];
        let ids = vec!["c1".to_string(), "c\"2".to_string()];
        let plan = ConversationPlan::new(spans, ids, vec![1, 3, 1]);
        let spec = EventLogSpec {
            formatters: 1,
            conversations: Some(Arc::new(plan)),
            ..EventLogSpec::default()
        };
        let text = lines_of(spec, |ev| {
            ev.issued(1, 7, 1);
            ev.complete(&failed_complete(2, 9));
            ev.complete(&failed_complete(5, 10));
        });
        let got: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let label = |v: &serde_json::Value| (v["conversation_id"].clone(), v["turn"].clone());
        assert_eq!(label(&got[0]), ("c1".into(), 3.into()));
        assert_eq!(label(&got[1]), ("c\"2".into(), 1.into()));
        assert_eq!(label(&got[2]), ("".into(), serde_json::Value::Null), "past the plan");
    }

    /// The lines `log` writes through one formatter, for a run of two or more endpoints.
    fn multi_endpoint_lines(log: impl FnOnce(&mut EventLog)) -> String {
        let spec = EventLogSpec { formatters: 1, endpoint_field: true, ..EventLogSpec::default() };
        lines_of(spec, log)
    }

    #[test]
    fn complete_lines_name_their_endpoint_last_only_in_a_multi_endpoint_run() {
        let gaps_ns = [0, 1_500_000];
        let base = CompleteEvent {
            output: Some("ab"),
            completion_tokens: Some(16),
            chunks: Some(ChunkLine { n_chunks: 3, chunk_reads: 2, gaps_ns: &gaps_ns }),
            endpoint: 2,
            ..failed_complete(7, 9)
        };
        let one = lines(|ev| ev.complete(&base));
        assert!(!one.contains("endpoint"), "one endpoint: the reference's line: {one}");
        let many = multi_endpoint_lines(|ev| {
            ev.complete(&base);
            ev.complete(&CompleteEvent { endpoint: loadgen_wire::NO_ENDPOINT, ..base });
        });
        let got: Vec<&str> = many.lines().collect();
        assert!(
            got[0].ends_with(r#""chunk_delta_ns":[0,1500000],"endpoint":2}"#),
            "after every other key: {}",
            got[0]
        );
        assert!(!got[1].contains("endpoint"), "a sample that reached none names none: {}", got[1]);
    }

    #[test]
    fn numbers_and_uuids_are_written_without_allocating_and_exactly() {
        for n in [0u64, 7, 10, 99, 12345, u64::MAX] {
            let mut out = Vec::new();
            push_u64(&mut out, n);
            assert_eq!(String::from_utf8(out).unwrap(), n.to_string());
            assert_eq!(sample_uuid(n), format!("{n:032x}"));
        }
    }

    #[test]
    fn abandoned_samples_get_a_loadgen_error_line() {
        let text = lines(|ev| ev.error_data("error.loadgen", 3, 1, "abandoned", "at the cap"));
        assert!(text.starts_with(r#"{"event_type":"error.loadgen","timestamp_ns":1,"#), "{text}");
        assert!(text.contains(r#""data":["ErrorData","abandoned","at the cap"]}"#), "{text}");
    }

    #[test]
    fn many_formatter_threads_write_every_line_in_time_order() {
        let n: u64 = 40_017;
        // A quarter-millisecond apart, arriving in shuffled runs of 64, advanced as they come:
        // 1,000 buckets over three threads, each sorted within itself.
        let stamp = |id: u64| 1_000_000_000 + (id ^ 0x3f) * 250_000;
        let text = lines_with(3, |ev| {
            for id in 0..n {
                let output = "y".repeat((id % 300) as usize);
                if id % 64 == 0 {
                    ev.advance(stamp(id));
                }
                ev.complete(&CompleteEvent {
                    output: Some(&output),
                    ..failed_complete(id, stamp(id))
                });
            }
        });
        let stamps: Vec<u64> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("each line is JSON");
                v["timestamp_ns"].as_u64().unwrap()
            })
            .collect();
        let mut sorted: Vec<u64> = (0..n).map(stamp).collect();
        sorted.sort_unstable();
        assert_eq!(stamps, sorted);
    }

    /// A `sample.complete` of a failed sample (data null) at `timestamp_ns`, the base the tests
    /// fill in.
    fn failed_complete(sample_id: u64, timestamp_ns: u64) -> CompleteEvent<'static> {
        CompleteEvent {
            sample_id,
            timestamp_ns,
            output: None,
            streamed: false,
            first_chunk_len: None,
            reasoning_len: 0,
            tool_calls_len: 0,
            finish_reason: None,
            worker_id: 0,
            prompt_tokens: None,
            completion_tokens: None,
            chunks: None,
            endpoint: 0,
            client_wait_ns: None,
        }
    }

    #[test]
    fn an_error_stays_before_its_samples_completion_and_sessions_sort_with_samples() {
        let text = lines(|ev| {
            ev.session("session.started", 5);
            ev.complete(&failed_complete(1, 30));
            ev.issued(2, 20, 0);
            ev.error(3, 40, "boom");
            ev.complete(&failed_complete(3, 40));
            ev.issued(1, 10, 0);
        });
        let order: Vec<(String, u64)> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["event_type"].as_str().unwrap().to_string(), v["timestamp_ns"].as_u64().unwrap())
            })
            .collect();
        let want = [
            ("session.started", 5),
            ("sample.issued", 10),
            ("sample.issued", 20),
            ("sample.complete", 30),
            ("error.generic", 40),
            ("sample.complete", 40),
        ];
        let want: Vec<(String, u64)> = want.iter().map(|(e, t)| (e.to_string(), *t)).collect();
        assert_eq!(order, want);
    }

    #[test]
    fn secrets_in_error_messages_are_hidden_in_the_file() {
        let text = lines(|ev| ev.error(3, 1, "bad key sk-abc"));
        assert!(text.contains("bad key <redacted>"), "{text}");
        assert!(!text.contains("sk-abc"), "{text}");
    }

    #[test]
    fn error_lines_escape_the_message() {
        let text = lines(|ev| ev.error(3, 1, "HTTP 404: \"no\"\n"));
        assert!(text.contains(r#""data":["ErrorData","error","HTTP 404: \"no\"\n"]}"#));
    }
}
