//! Server-sent events framing: `data:` lines split anywhere across reads, found with memchr.

/// What one SSE line was.
#[derive(Debug, PartialEq, Eq)]
pub enum SseItem<'a> {
    /// The payload of a `data:` line holding a JSON object.
    Data(&'a [u8]),
    /// `data: [DONE]`
    Done,
}

/// Splits a body into lines and hands out `data:` payloads. Keeps only an incomplete trailing
/// line between feeds (in a buffer reused across responses).
#[derive(Debug, Default)]
pub struct SseParser {
    partial: Vec<u8>,
    /// Longest line kept; a longer one is dropped (counted) rather than grown without bound.
    max_line_bytes: usize,
    dropped_lines: u64,
}

impl SseParser {
    pub fn new(max_line_bytes: usize) -> SseParser {
        SseParser { partial: Vec::with_capacity(4096), max_line_bytes, dropped_lines: 0 }
    }

    pub fn reset(&mut self) {
        self.partial.clear();
    }

    /// Lines dropped for exceeding the limit.
    pub fn dropped_lines(&self) -> u64 {
        self.dropped_lines
    }

    /// Feeds body bytes; calls `on_item` for every complete `data:` line.
    pub fn feed(&mut self, mut input: &[u8], on_item: &mut impl FnMut(SseItem<'_>)) {
        if !self.partial.is_empty() {
            match memchr::memchr(b'\n', input) {
                None => {
                    self.keep_partial(input);
                    return;
                }
                Some(nl) => {
                    self.keep_partial(&input[..nl]);
                    let mut line = std::mem::take(&mut self.partial);
                    emit_line(&line, on_item);
                    line.clear();
                    self.partial = line;
                    input = &input[nl + 1..];
                }
            }
        }
        let mut start = 0;
        for nl in memchr::memchr_iter(b'\n', input) {
            emit_line(&input[start..nl], on_item);
            start = nl + 1;
        }
        self.keep_partial(&input[start..]);
    }

    /// Ends the body: a final line without a newline still counts.
    pub fn finish(&mut self, on_item: &mut impl FnMut(SseItem<'_>)) {
        if !self.partial.is_empty() {
            let mut line = std::mem::take(&mut self.partial);
            emit_line(&line, on_item);
            line.clear();
            self.partial = line;
        }
    }

    fn keep_partial(&mut self, bytes: &[u8]) {
        if self.partial.len() + bytes.len() > self.max_line_bytes {
            if !self.partial.is_empty() || !bytes.is_empty() {
                self.dropped_lines += 1;
            }
            self.partial.clear();
            return;
        }
        self.partial.extend_from_slice(bytes);
    }
}

fn emit_line(line: &[u8], on_item: &mut impl FnMut(SseItem<'_>)) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(payload) = line.strip_prefix(b"data:") else { return };
    let start = payload.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(payload.len());
    let payload = &payload[start..];
    if payload.first() == Some(&b'{') {
        on_item(SseItem::Data(payload));
    } else if payload.starts_with(b"[DONE]") {
        on_item(SseItem::Done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(parts: &[&[u8]]) -> Vec<String> {
        let mut parser = SseParser::new(1 << 16);
        let mut out = Vec::new();
        let mut sink = |item: SseItem<'_>| {
            out.push(match item {
                SseItem::Data(d) => String::from_utf8(d.to_vec()).unwrap(),
                SseItem::Done => "[DONE]".to_string(),
            })
        };
        for part in parts {
            parser.feed(part, &mut sink);
        }
        parser.finish(&mut sink);
        out
    }

    const STREAM: &[u8] = b": comment\r\nevent: x\ndata: {\"a\":1}\n\ndata:{\"b\":\"x:y\"}\r\n\r\ndata: not json\n\ndata: {\"c\":3}\n\ndata: [DONE]\n\n";

    #[test]
    fn split_everywhere_gives_the_same_frames() {
        let whole = collect(&[STREAM]);
        assert_eq!(whole, [r#"{"a":1}"#, r#"{"b":"x:y"}"#, r#"{"c":3}"#, "[DONE]"]);
        for i in 0..=STREAM.len() {
            for j in i..=STREAM.len() {
                let parts = [&STREAM[..i], &STREAM[i..j], &STREAM[j..]];
                assert_eq!(collect(&parts), whole, "split at {i},{j}");
            }
        }
    }

    #[test]
    fn last_line_without_newline_counts() {
        assert_eq!(collect(&[b"data: {\"z\":0}"]), [r#"{"z":0}"#]);
    }

    #[test]
    fn overlong_line_is_dropped_not_grown() {
        let mut parser = SseParser::new(16);
        let mut n = 0;
        parser.feed(b"data: {\"aaaaaaaaaaaaaaaaaaaaaaa", &mut |_| n += 1);
        parser.feed(b"aaaa\"}\ndata: {}\n", &mut |_| n += 1);
        assert_eq!(parser.dropped_lines(), 1);
        // The tail of the long line is not a data line; the next frame survives.
        assert_eq!(n, 1);
    }
}
