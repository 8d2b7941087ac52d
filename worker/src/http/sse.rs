//! Server-sent events framing after the WHATWG "event stream interpretation": lines end with
//! CRLF, LF or CR; `:` starts a comment; `data` lines of one event join with `\n` and the event
//! is dispatched at a blank line; `event`, `id` and `retry` are accepted and ignored.
//!
//! The common event (one `data:` line wholly inside the bytes of one read) is handed out from
//! the input itself; only an event of several data lines, or one split across reads, is copied
//! into the event buffer. At the end of the body a pending event with data is still dispatched
//! (lenient, as the reference parses a stream's tail), where the standard would drop it.

/// What one dispatched event was.
#[derive(Debug, PartialEq, Eq)]
pub enum SseItem<'a> {
    /// An event whose data is a JSON object (leading whitespace removed).
    Data(&'a [u8]),
    /// An event whose data is `[DONE]`.
    Done,
}

/// How an SSE response's body ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyEnd {
    /// Its framing said it was whole: the last chunk of a chunked body, or every byte of a
    /// Content-Length body.
    Finished,
    /// The connection closed (or failed) first, or the body runs until the close.
    Closed,
}

/// Whether a stream was complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    Complete,
    Truncated,
}

/// The rule for a stream's end (SPEC §10, docs/METRICS.md "Failure kinds"): `[DONE]` completes
/// a stream however its body ended; without it, only a body its framing says is whole, after a
/// finish_reason, is complete. A close-delimited body that closes after a finish_reason is
/// truncated: nothing tells its close from a cut.
pub fn stream_end(saw_done: bool, saw_finish: bool, body_end: BodyEnd) -> StreamEnd {
    match (saw_done, saw_finish, body_end) {
        (true, _, _) => StreamEnd::Complete,
        (false, true, BodyEnd::Finished) => StreamEnd::Complete,
        (false, _, _) => StreamEnd::Truncated,
    }
}

/// How a stream's sample fails, if it does (docs/METRICS.md "Failure kinds"): an error frame
/// first (the server's own word on what went wrong), then a truncated stream (a frame cut by
/// the close is no server's malformed frame), then a frame that did not decode (its content is
/// lost, so the output and its token counts are not the server's). The rest of the stream is
/// read to its end in every case, so the connection stays usable.
pub fn stream_failure(stream_error: bool, end: StreamEnd, malformed_frames: u32) -> StreamFailure {
    match (stream_error, end, malformed_frames) {
        (true, _, _) => StreamFailure::ErrorFrame,
        (false, StreamEnd::Truncated, _) => StreamFailure::Truncated,
        (false, StreamEnd::Complete, 0) => StreamFailure::None,
        (false, StreamEnd::Complete, _) => StreamFailure::MalformedFrame,
    }
}

/// What `stream_failure` decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamFailure {
    None,
    ErrorFrame,
    Truncated,
    MalformedFrame,
}

/// Splits a body into lines and events and hands out their data. Keeps between feeds only an
/// incomplete line and the data of an incomplete event, in buffers reused across responses.
#[derive(Debug, Default)]
pub struct SseParser {
    /// The start of a line whose end has not arrived yet.
    line: Vec<u8>,
    /// The data of the event being read, its lines joined with `\n` (the slow path only).
    data: Vec<u8>,
    /// The event in `data` has at least one data line (its data may be empty: `data:` alone).
    has_data: bool,
    /// Most bytes an event's data (or one line) may hold; a longer event is dropped and counted
    /// rather than grown without bound.
    max_event_bytes: usize,
    dropped_events: u64,
    /// The current line broke the limit: its bytes are skipped up to its end.
    skip_line: bool,
    /// The current event broke the limit: its lines are ignored up to its blank line.
    drop_event: bool,
    /// The last feed ended on a CR: an LF that starts the next one ends no line.
    after_cr: bool,
}

/// Where a line ends in `bytes`: (its length, the bytes its end uses up, it ended on the last
/// byte with a CR that an LF of the next read may complete).
fn line_end(bytes: &[u8]) -> Option<(usize, usize, bool)> {
    let at = memchr::memchr2(b'\n', b'\r', bytes)?;
    if bytes[at] == b'\n' {
        return Some((at, at + 1, false));
    }
    match bytes.get(at + 1) {
        Some(b'\n') => Some((at, at + 2, false)),
        Some(_) => Some((at, at + 1, false)),
        None => Some((at, at + 1, true)),
    }
}

/// A line's field: `Some((name, value))` with one leading space of the value removed; `None`
/// for a comment.
fn field(line: &[u8]) -> Option<(&[u8], &[u8])> {
    match memchr::memchr(b':', line) {
        Some(0) => None,
        Some(colon) => {
            let value = &line[colon + 1..];
            Some((&line[..colon], value.strip_prefix(b" ").unwrap_or(value)))
        }
        None => Some((line, &[])),
    }
}

/// Hands out an event's data: a JSON object or `[DONE]`; any other data is ignored.
fn dispatch(data: &[u8], on_item: &mut impl FnMut(SseItem<'_>)) {
    let start = data.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(data.len());
    let data = &data[start..];
    if data.first() == Some(&b'{') {
        on_item(SseItem::Data(data));
    } else if data.trim_ascii_end() == b"[DONE]" {
        on_item(SseItem::Done);
    }
}

impl SseParser {
    pub fn new(max_event_bytes: usize) -> SseParser {
        SseParser {
            line: Vec::with_capacity(4096),
            data: Vec::with_capacity(4096),
            max_event_bytes,
            ..SseParser::default()
        }
    }

    /// Forgets everything of the last body (keeps the buffers' capacity and the drop count).
    pub fn reset(&mut self) {
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        self.skip_line = false;
        self.drop_event = false;
        self.after_cr = false;
    }

    /// Events dropped for exceeding the limit.
    pub fn dropped_events(&self) -> u64 {
        self.dropped_events
    }

    /// Feeds body bytes; calls `on_item` for every dispatched event.
    pub fn feed(&mut self, input: &[u8], on_item: &mut impl FnMut(SseItem<'_>)) {
        let mut at = 0;
        if self.after_cr && !input.is_empty() {
            self.after_cr = false;
            at = usize::from(input[0] == b'\n');
        }
        if !self.line.is_empty() || self.skip_line {
            let Some((len, used, cr_last)) = line_end(&input[at..]) else {
                self.carry(&input[at..]);
                return;
            };
            self.carry(&input[at..at + len]);
            if !std::mem::take(&mut self.skip_line) {
                let line = std::mem::take(&mut self.line);
                self.slow_line(&line, on_item);
                self.line = line;
                self.line.clear();
            }
            self.after_cr = cr_last;
            at += used;
        }
        // A lone data line of the current event, still in `input` (not copied yet).
        let mut single: Option<&[u8]> = None;
        while let Some((len, used, cr_last)) = line_end(&input[at..]) {
            let line = &input[at..at + len];
            at += used;
            self.after_cr = cr_last;
            if line.is_empty() {
                match single.take() {
                    Some(data) => dispatch(data, on_item),
                    None => self.end_event(on_item),
                }
                continue;
            }
            match field(line) {
                Some((b"data", value))
                    if !self.has_data && !self.drop_event && single.is_none() =>
                {
                    if value.len() <= self.max_event_bytes {
                        single = Some(value);
                    } else {
                        self.drop_current();
                    }
                }
                Some((b"data", value)) => {
                    if let Some(first) = single.take() {
                        self.append_data(first);
                    }
                    self.append_data(value);
                }
                _ => {}
            }
        }
        if let Some(first) = single {
            self.append_data(first);
        }
        self.carry(&input[at..]);
    }

    /// Ends the body: a last line without its end still counts, and a pending event with data
    /// is dispatched.
    pub fn finish(&mut self, on_item: &mut impl FnMut(SseItem<'_>)) {
        if !self.line.is_empty() && !self.skip_line {
            let line = std::mem::take(&mut self.line);
            self.slow_line(&line, on_item);
            self.line = line;
        }
        self.end_event(on_item);
        self.reset();
    }

    /// One line read from `line` (a copied line: its data is copied too).
    fn slow_line(&mut self, line: &[u8], on_item: &mut impl FnMut(SseItem<'_>)) {
        if line.is_empty() {
            self.end_event(on_item);
        } else if let Some((b"data", value)) = field(line) {
            self.append_data(value);
        }
    }

    /// The blank line: dispatches the event held in `data`, if it has data and was not dropped.
    fn end_event(&mut self, on_item: &mut impl FnMut(SseItem<'_>)) {
        if self.has_data && !self.drop_event {
            dispatch(&self.data, on_item);
        }
        self.data.clear();
        self.has_data = false;
        self.drop_event = false;
    }

    /// Adds one data line's value to the event being read, within the limit.
    fn append_data(&mut self, value: &[u8]) {
        if self.drop_event {
            return;
        }
        let joined = usize::from(self.has_data) + value.len();
        if self.data.len() + joined > self.max_event_bytes {
            self.drop_current();
            return;
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        self.data.extend_from_slice(value);
        self.has_data = true;
    }

    /// Drops the event being read (counted once).
    fn drop_current(&mut self) {
        if !self.drop_event {
            self.dropped_events += 1;
        }
        self.drop_event = true;
        self.data.clear();
        self.has_data = false;
    }

    /// Keeps the start of a line for the next feed, within the limit.
    fn carry(&mut self, bytes: &[u8]) {
        if self.skip_line || bytes.is_empty() {
            return;
        }
        if self.line.len() + bytes.len() > self.max_event_bytes {
            self.line.clear();
            self.skip_line = true;
            self.drop_current();
            return;
        }
        self.line.extend_from_slice(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_fails_by_its_error_frame_then_its_end_then_its_malformed_frames() {
        use StreamEnd::{Complete, Truncated};
        // (error frame, end, malformed frames) -> failure
        let table = [
            (false, Complete, 0, StreamFailure::None),
            (false, Complete, 1, StreamFailure::MalformedFrame),
            (false, Complete, 7, StreamFailure::MalformedFrame),
            (false, Truncated, 0, StreamFailure::Truncated),
            (false, Truncated, 2, StreamFailure::Truncated),
            (true, Complete, 0, StreamFailure::ErrorFrame),
            (true, Complete, 3, StreamFailure::ErrorFrame),
            (true, Truncated, 3, StreamFailure::ErrorFrame),
        ];
        for (error, end, malformed, want) in table {
            assert_eq!(stream_failure(error, end, malformed), want, "{error} {end:?} {malformed}");
        }
    }

    fn collect_with(parser: &mut SseParser, parts: &[&[u8]]) -> Vec<String> {
        let mut out = Vec::new();
        let mut sink = |item: SseItem<'_>| {
            out.push(match item {
                SseItem::Data(d) => String::from_utf8_lossy(d).into_owned(),
                SseItem::Done => "[DONE]".to_string(),
            })
        };
        for part in parts {
            parser.feed(part, &mut sink);
        }
        parser.finish(&mut sink);
        out
    }

    fn collect(parts: &[&[u8]]) -> Vec<String> {
        collect_with(&mut SseParser::new(1 << 16), parts)
    }

    const STREAM: &[u8] = b": comment\r\nevent: x\ndata: {\"a\":1}\n\ndata:{\"b\":\"x:y\"}\r\n\r\ndata: not json\n\nid: 4\rdata: {\"c\":\rdata: 3}\r\rdata: [DONE]\n\n";

    #[test]
    fn a_stream_ends_complete_only_with_done_or_a_finished_body_after_a_finish_reason() {
        use BodyEnd::{Closed, Finished};
        use StreamEnd::{Complete, Truncated};
        // (saw [DONE], saw a finish_reason, how the body ended) -> outcome
        let table = [
            (true, true, Finished, Complete),
            (true, false, Finished, Complete),
            (true, true, Closed, Complete),
            (true, false, Closed, Complete),
            (false, true, Finished, Complete),
            (false, false, Finished, Truncated),
            (false, true, Closed, Truncated),
            (false, false, Closed, Truncated),
        ];
        for (done, finish, end, want) in table {
            assert_eq!(stream_end(done, finish, end), want, "{done} {finish} {end:?}");
        }
    }

    #[test]
    fn split_everywhere_gives_the_same_frames() {
        let whole = collect(&[STREAM]);
        assert_eq!(whole, [r#"{"a":1}"#, r#"{"b":"x:y"}"#, "{\"c\":\n3}", "[DONE]"]);
        for i in 0..=STREAM.len() {
            for j in i..=STREAM.len() {
                let parts = [&STREAM[..i], &STREAM[i..j], &STREAM[j..]];
                assert_eq!(collect(&parts), whole, "split at {i},{j}");
            }
        }
        let bytes: Vec<&[u8]> = STREAM.chunks(1).collect();
        assert_eq!(collect(&bytes), whole, "one byte per read");
    }

    #[test]
    fn multi_line_data_events_join_with_newline() {
        let stream = b"data: {\"choices\":\ndata: [{\"delta\":{\"content\":\"hi\"}}]}\n\n";
        assert_eq!(collect(&[stream]), ["{\"choices\":\n[{\"delta\":{\"content\":\"hi\"}}]}"]);
        // Only one leading space is the separator's: the second is the value's.
        assert_eq!(collect(&[b"data:{\"a\":\ndata:  1}\n\n"]), ["{\"a\":\n 1}"]);
    }

    #[test]
    fn an_event_is_dispatched_only_at_its_blank_line() {
        let mut parser = SseParser::new(1 << 16);
        let mut n = 0;
        parser.feed(b"data: {\"a\":1}\n", &mut |_| n += 1);
        assert_eq!(n, 0, "no blank line yet");
        parser.feed(b"\n", &mut |_| n += 1);
        assert_eq!(n, 1);
    }

    #[test]
    fn a_pending_event_is_dispatched_at_the_end_of_the_body() {
        assert_eq!(collect(&[b"data: {\"z\":0}"]), [r#"{"z":0}"#]);
        assert_eq!(collect(&[b"data: {\"z\":0}\n"]), [r#"{"z":0}"#]);
        assert_eq!(collect(&[b"data: [DONE]\r"]), ["[DONE]"]);
    }

    #[test]
    fn overlong_event_is_dropped_not_grown() {
        let mut parser = SseParser::new(16);
        let mut n = 0;
        parser.feed(b"data: {\"aaaaaaaaaaaaaaaaaaaaaaa", &mut |_| n += 1);
        parser.feed(b"aaaa\"}\ndata: {}\n\ndata: {}\n\n", &mut |_| n += 1);
        assert_eq!(parser.dropped_events(), 1);
        // The dropped line's event ends at its blank line; the next event survives.
        assert_eq!(n, 1);
        let got = collect_with(&mut parser, &[b"data: {\"a\":\ndata: \"bbbbbbbbbbbbbbb\"}\n\n"]);
        assert!(got.is_empty(), "{got:?}");
        assert_eq!(parser.dropped_events(), 2);
    }
}
