//! `events.jsonl`: compact JSON event lines in the reference's layout, written by a thread of its own.
//!
//! The aggregator formats lines into a buffer and hands full buffers to the writer thread over a
//! bounded channel, so file writes never stall record ingest and memory stays bounded. The
//! writer hands emptied buffers back: no buffer is allocated (or page-faulted in) per chunk,
//! and a buffer is shipped before a line could outgrow it, so none is ever reallocated (a
//! 256 KiB copy per chunk before).

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};

/// Bytes collected before a buffer goes to the writer thread.
pub const EVENTS_BUFFER_BYTES: usize = 256 * 1024;
/// Room past `EVENTS_BUFFER_BYTES` for the line that crosses it (longer lines still fit, by a
/// reallocation).
const EVENTS_LINE_SLACK_BYTES: usize = 64 * 1024;
/// Full buffers that may wait for the writer thread before the aggregator waits too.
pub const EVENTS_QUEUE_BUFFERS: usize = 64;

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

/// Formats event lines and ships them to the writer thread.
pub struct EventLog {
    buffer: Vec<u8>,
    sender: Option<Sender<Vec<u8>>>,
    /// Emptied buffers coming back from the writer thread.
    spare: Option<Receiver<Vec<u8>>>,
    writer: Option<JoinHandle<io::Result<()>>>,
    /// Values never written (API keys, URL passwords): an endpoint may echo them in an error.
    secrets: Vec<String>,
}

/// What a hidden secret is written as (the binary's `redact::REDACTED`).
pub const SECRET_PLACEHOLDER: &str = "<redacted>";

/// `text` with every one of `secrets` replaced by [`SECRET_PLACEHOLDER`].
pub fn hide_secrets<'a>(text: &'a str, secrets: &[String]) -> std::borrow::Cow<'a, str> {
    let mut out = std::borrow::Cow::Borrowed(text);
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        if out.contains(secret.as_str()) {
            out = std::borrow::Cow::Owned(out.replace(secret.as_str(), SECRET_PLACEHOLDER));
        }
    }
    out
}

fn new_buffer() -> Vec<u8> {
    Vec::with_capacity(EVENTS_BUFFER_BYTES + EVENTS_LINE_SLACK_BYTES)
}

impl EventLog {
    /// Creates (truncates) `path` and starts the writer thread.
    pub fn create(path: &Path) -> io::Result<EventLog> {
        let mut file = File::create(path)?;
        let (sender, receiver) = bounded::<Vec<u8>>(EVENTS_QUEUE_BUFFERS);
        let (spare_tx, spare_rx) = bounded::<Vec<u8>>(EVENTS_QUEUE_BUFFERS);
        let writer = std::thread::Builder::new().name("events-writer".into()).spawn(move || {
            // Chunks are already large: written as they come, no second buffer.
            for mut chunk in receiver {
                file.write_all(&chunk)?;
                chunk.clear();
                let _ = spare_tx.try_send(chunk);
            }
            file.sync_all()
        })?;
        Ok(EventLog {
            buffer: new_buffer(),
            sender: Some(sender),
            spare: Some(spare_rx),
            writer: Some(writer),
            secrets: Vec::new(),
        })
    }

    /// Error messages written from now on hide these values (only error lines can carry text
    /// an endpoint chose).
    pub fn set_secrets(&mut self, secrets: Vec<String>) {
        self.secrets = secrets;
    }

    /// An event log that formats nothing and writes nothing (for tests and dry runs).
    pub fn disabled() -> EventLog {
        EventLog {
            buffer: Vec::new(),
            sender: None,
            spare: None,
            writer: None,
            secrets: Vec::new(),
        }
    }

    fn enabled(&self) -> bool {
        self.sender.is_some()
    }

    fn head(&mut self, event_type: &str, timestamp_ns: u64, sample: Option<u64>) {
        let b = &mut self.buffer;
        b.extend_from_slice(b"{\"event_type\":\"");
        b.extend_from_slice(event_type.as_bytes());
        b.extend_from_slice(b"\",\"timestamp_ns\":");
        push_u64(b, timestamp_ns);
        b.extend_from_slice(b",\"sample_uuid\":\"");
        if let Some(id) = sample {
            push_uuid(b, id);
        }
        b.extend_from_slice(b"\",\"conversation_id\":\"\",\"turn\":null,\"data\":");
    }

    fn end_line(&mut self) {
        self.buffer.extend_from_slice(b"}\n");
        if self.buffer.len() >= EVENTS_BUFFER_BYTES {
            self.ship();
        }
    }

    fn ship(&mut self) {
        if let Some(sender) = &self.sender {
            let next =
                self.spare.as_ref().and_then(|r| r.try_recv().ok()).unwrap_or_else(new_buffer);
            let full = std::mem::replace(&mut self.buffer, next);
            // A closed channel means the writer failed; finish() reports its error.
            let _ = sender.send(full);
        }
    }

    /// A session event (`session.started`, `session.start_performance_tracking`, ...).
    pub fn session(&mut self, event_type: &str, timestamp_ns: u64) {
        if !self.enabled() {
            return;
        }
        self.head(event_type, timestamp_ns, None);
        self.buffer.extend_from_slice(b"null");
        self.end_line();
    }

    /// `sample.issued` with the row's pre-rendered `PromptData` JSON.
    pub fn issued(&mut self, sample_id: u64, timestamp_ns: u64, prompt_data_json: &str) {
        if !self.enabled() {
            return;
        }
        self.head("sample.issued", timestamp_ns, Some(sample_id));
        self.buffer.extend_from_slice(prompt_data_json.as_bytes());
        self.end_line();
    }

    /// `sample.recv_first`.
    pub fn recv_first(&mut self, sample_id: u64, timestamp_ns: u64) {
        if !self.enabled() {
            return;
        }
        self.head("sample.recv_first", timestamp_ns, Some(sample_id));
        self.buffer.extend_from_slice(b"null");
        self.end_line();
    }

    /// `error.generic` with `["ErrorData","error",message]`.
    pub fn error(&mut self, sample_id: u64, timestamp_ns: u64, message: &str) {
        self.error_data("error.generic", sample_id, timestamp_ns, "error", message);
    }

    /// An error event (`error.generic`, `error.loadgen`) with `["ErrorData",error_type,message]`,
    /// the reference's `ErrorData` layout.
    pub fn error_data(
        &mut self,
        topic: &str,
        sample_id: u64,
        timestamp_ns: u64,
        error_type: &str,
        message: &str,
    ) {
        if !self.enabled() {
            return;
        }
        self.head(topic, timestamp_ns, Some(sample_id));
        self.buffer.extend_from_slice(b"[\"ErrorData\",");
        push_json_str(&mut self.buffer, error_type);
        self.buffer.push(b',');
        let message = hide_secrets(message, &self.secrets);
        push_json_str(&mut self.buffer, &message);
        self.buffer.push(b']');
        self.end_line();
    }

    /// `sample.complete`. `output` is `None` for a failed sample (data null). A streamed output is
    /// written as the reference's `[first_chunk, rest]` list, a non-streamed one as a string.
    pub fn complete(&mut self, c: &CompleteEvent<'_>) {
        if !self.enabled() {
            return;
        }
        self.head("sample.complete", c.timestamp_ns, Some(c.sample_id));
        match c.output {
            None => self.buffer.extend_from_slice(b"null"),
            Some(text) => {
                self.buffer.extend_from_slice(b"[\"TextModelOutput\",");
                match c.first_chunk_len {
                    Some(split) if c.streamed => {
                        let split = floor_char_boundary(text, split);
                        self.buffer.push(b'[');
                        if !text.is_empty() {
                            push_json_str(&mut self.buffer, &text[..split]);
                            if split < text.len() {
                                self.buffer.push(b',');
                                push_json_str(&mut self.buffer, &text[split..]);
                            }
                        }
                        self.buffer.push(b']');
                    }
                    _ => push_json_str(&mut self.buffer, text),
                }
                self.buffer.extend_from_slice(b",null,null]");
            }
        }
        if let Some(reason) = c.finish_reason {
            self.buffer.extend_from_slice(b",\"finish_reason\":\"");
            self.buffer.extend_from_slice(reason.as_bytes());
            self.buffer.push(b'"');
        }
        self.buffer.extend_from_slice(b",\"worker_id\":");
        push_u64(&mut self.buffer, u64::from(c.worker_id));
        if let Some(p) = c.prompt_tokens {
            self.buffer.extend_from_slice(b",\"prompt_tokens\":");
            push_u64(&mut self.buffer, u64::from(p));
        }
        if let Some(n) = c.completion_tokens {
            self.buffer.extend_from_slice(b",\"completion_tokens\":");
            push_u64(&mut self.buffer, u64::from(n));
        }
        self.end_line();
    }

    /// Flushes everything and waits for the writer thread.
    pub fn finish(mut self) -> io::Result<()> {
        if !self.buffer.is_empty() {
            self.ship();
        }
        self.sender.take();
        match self.writer.take() {
            Some(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("the events writer thread panicked"))),
            None => Ok(()),
        }
    }
}

/// What a `sample.complete` line says.
pub struct CompleteEvent<'a> {
    pub sample_id: u64,
    pub timestamp_ns: u64,
    pub output: Option<&'a str>,
    pub streamed: bool,
    pub first_chunk_len: Option<usize>,
    pub finish_reason: Option<&'a str>,
    pub worker_id: u16,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
}

fn floor_char_boundary(text: &str, index: usize) -> usize {
    let mut i = index.min(text.len());
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Appends `s` as a JSON string literal.
pub fn push_json_str(out: &mut Vec<u8>, s: &str) {
    // serde_json escapes exactly as JSON requires; writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
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
        let dir = std::env::temp_dir().join(format!("events-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{}.jsonl", next_file_number()));
        let mut ev = EventLog::create(&path).unwrap();
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
            ev.issued(1, 7, r#"["PromptData","hi",null,null,null,null,null,null]"#);
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
        };
        let text = lines(|ev| {
            ev.complete(&base);
            ev.complete(&CompleteEvent {
                prompt_tokens: Some(3),
                completion_tokens: Some(16),
                ..base
            });
            ev.complete(&CompleteEvent { output: None, finish_reason: None, ..base });
        });
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(
            got[0],
            r#"{"event_type":"sample.complete","timestamp_ns":9,"sample_uuid":"00000000000000000000000000000abc","conversation_id":"","turn":null,"data":["TextModelOutput",["Provide"," examples"],null,null],"finish_reason":"stop","worker_id":1}"#
        );
        assert!(got[1].ends_with(r#""worker_id":1,"prompt_tokens":3,"completion_tokens":16}"#));
        assert!(got[2].contains(r#""data":null,"worker_id":1}"#));
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
    fn error_lines_escape_the_message() {
        let text = lines(|ev| ev.error(3, 1, "HTTP 404: \"no\"\n"));
        assert!(text.contains(r#""data":["ErrorData","error","HTTP 404: \"no\"\n"]}"#));
    }
}
