//! `events.jsonl`: the run's event lines in the reference's layout.
//!
//! The aggregator only copies each event's fields and strings into a batch (no JSON on its
//! thread); full batches go to formatter threads that write the lines, in batch order (see
//! `writer`). Batches come back emptied, so none is allocated per batch.

mod format;
mod writer;

use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

pub use format::{
    hide_secrets, push_json_str, push_u64, push_uuid, sample_uuid, SECRET_PLACEHOLDER,
};
use format::{Batch, Chunks, Complete, FormatContext, Op};
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
    /// Values never written (API keys, URL passwords), should an endpoint echo one in an error.
    pub secrets: Vec<String>,
}

/// Collects events into batches and ships them to the formatter threads.
pub struct EventLog {
    batch: Batch,
    formatters: Option<Formatters>,
}

/// What a `sample.complete` line says.
pub struct CompleteEvent<'a> {
    pub sample_id: u64,
    pub timestamp_ns: u64,
    pub output: Option<&'a str>,
    pub streamed: bool,
    pub first_chunk_len: Option<usize>,
    pub finish_reason: Option<&'static str>,
    pub worker_id: u16,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// A streamed response's chunk timing; `None` when it had no content chunk.
    pub chunks: Option<ChunkLine<'a>>,
}

/// The chunk timing of a `sample.complete` line: `n_chunks`, `chunk_reads`, `chunk_delta_ns`.
#[derive(Debug, Clone, Copy)]
pub struct ChunkLine<'a> {
    pub n_chunks: u32,
    pub chunk_reads: u32,
    pub gaps_ns: &'a [u64],
}

impl EventLog {
    /// Creates (truncates) `path` and starts the formatter threads.
    pub fn create(path: &Path, spec: EventLogSpec) -> io::Result<EventLog> {
        let file = File::create(path)?;
        let ctx = FormatContext { prompt_data_json: spec.prompt_data_json, secrets: spec.secrets };
        let formatters = Formatters::start(file, ctx, spec.formatters, &spec.cores)?;
        Ok(EventLog { batch: new_batch(), formatters: Some(formatters) })
    }

    /// An event log that keeps nothing and writes nothing (for tests and dry runs).
    pub fn disabled() -> EventLog {
        EventLog { batch: Batch::default(), formatters: None }
    }

    fn push(&mut self, op: Op) {
        self.batch.ops.push(op);
        if self.batch.ops.len() >= EVENTS_BATCH_OPS
            || self.batch.held_bytes() >= EVENTS_BATCH_TEXT_BYTES
        {
            self.ship();
        }
    }

    fn ship(&mut self) {
        if let Some(formatters) = &mut self.formatters {
            let full = std::mem::take(&mut self.batch);
            self.batch = formatters.ship(full);
            if self.batch.ops.capacity() == 0 {
                self.batch = new_batch();
            }
        }
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
            let message = self.batch.push_text(message.as_bytes());
            self.push(Op::Error { topic, sample_id, timestamp_ns, error_type, message });
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
        let output = c.output.map(|text| self.batch.push_text(text.as_bytes()));
        let chunks = c.chunks.map(|line| Chunks {
            n_chunks: line.n_chunks,
            chunk_reads: line.chunk_reads,
            gaps_ns: self.batch.push_gaps(line.gaps_ns),
        });
        self.push(Op::Complete(Complete {
            sample_id: c.sample_id,
            timestamp_ns: c.timestamp_ns,
            output,
            first_chunk_end,
            finish_reason: c.finish_reason,
            worker_id: c.worker_id,
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            chunks,
        }));
    }

    /// Writes everything and waits for the formatter threads; the first write error, if any.
    pub fn finish(mut self) -> io::Result<()> {
        if !self.batch.is_empty() {
            self.ship();
        }
        match self.formatters.take() {
            Some(mut formatters) => formatters.finish(),
            None => Ok(()),
        }
    }
}

fn new_batch() -> Batch {
    Batch {
        ops: Vec::with_capacity(EVENTS_BATCH_OPS),
        // Room past the threshold for the string that crosses it.
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

    #[test]
    fn secrets_are_hidden_wherever_they_appear() {
        let secrets = vec!["sk-abc".to_string(), String::new()];
        assert_eq!(
            hide_secrets("Bearer sk-abc, again sk-abc", &secrets),
            "Bearer <redacted>, again <redacted>"
        );
        assert!(matches!(hide_secrets("nothing here", &secrets), std::borrow::Cow::Borrowed(_)));
    }

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
        let dir = std::env::temp_dir().join(format!("events-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}.jsonl", next_file_number()));
        let prompts = vec![r#"["PromptData","hi",null,null,null,null,null,null]"#.to_string()];
        let spec = EventLogSpec {
            formatters,
            prompt_data_json: Arc::new(prompts),
            secrets: vec!["sk-abc".into()],
            ..EventLogSpec::default()
        };
        let mut ev = EventLog::create(&path, spec).unwrap();
        log(&mut ev);
        ev.finish().unwrap();
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
            finish_reason: Some("stop"),
            worker_id: 1,
            prompt_tokens: None,
            completion_tokens: None,
            chunks: None,
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
    fn many_formatter_threads_write_every_line_in_log_order() {
        let n: u64 = (EVENTS_BATCH_OPS as u64) * 9 + 17;
        let text = lines_with(3, |ev| {
            for id in 0..n {
                // Varying sizes, so batches ship on both thresholds.
                let output = "y".repeat((id % 300) as usize);
                ev.complete(&CompleteEvent {
                    sample_id: id,
                    timestamp_ns: id,
                    output: Some(&output),
                    streamed: false,
                    first_chunk_len: None,
                    finish_reason: None,
                    worker_id: 0,
                    prompt_tokens: None,
                    completion_tokens: None,
                    chunks: None,
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
        assert_eq!(stamps, (0..n).collect::<Vec<_>>());
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
