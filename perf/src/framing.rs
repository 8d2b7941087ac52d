//! HTTP/1.1 response framing for the ceiling client: where one response ends (Content-Length or
//! chunked to its terminator), scanned incrementally, nothing else parsed.

use memchr::memmem;

/// A response whose framing cannot be followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameError(pub &'static str);

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Body {
    /// The head is not complete yet; scanning resumes at this offset.
    #[default]
    Head,
    /// The response ends at this offset.
    Length(usize),
    /// The next chunk-size line starts at this offset.
    Chunked(usize),
}

/// Incremental scan of one response in a growing buffer that starts at the response's head.
#[derive(Debug, Clone, Copy, Default)]
pub struct ResponseScan {
    body: Body,
    /// Bytes of the buffer already searched for the end of the head.
    head_scanned: usize,
}

impl ResponseScan {
    /// Forgets the previous response.
    pub fn reset(&mut self) {
        *self = ResponseScan::default();
    }

    /// Offers the whole buffer so far (the same buffer, grown); returns where the response
    /// ends once it is complete.
    pub fn feed(&mut self, buf: &[u8]) -> Result<Option<usize>, FrameError> {
        if self.body == Body::Head {
            let from = self.head_scanned.saturating_sub(3);
            let Some(at) = memmem::find(&buf[from..], b"\r\n\r\n") else {
                self.head_scanned = buf.len();
                return Ok(None);
            };
            let head_end = from + at + 4;
            self.body = body_framing(&buf[..head_end], head_end)?;
        }
        loop {
            match self.body {
                Body::Head => unreachable!("the head was parsed above"),
                Body::Length(end) => return Ok((buf.len() >= end).then_some(end)),
                Body::Chunked(at) => {
                    let rest = &buf[at..];
                    let Some(eol) = memmem::find(rest, b"\r\n") else {
                        return Ok(None);
                    };
                    let size = chunk_size(&rest[..eol])?;
                    let next = (at + eol + 4)
                        .checked_add(size)
                        .ok_or(FrameError("chunk size out of range"))?;
                    if size == 0 {
                        // No trailers: the terminator is `0\r\n\r\n`.
                        return Ok((buf.len() >= next).then_some(next));
                    }
                    if buf.len() < next {
                        return Ok(None);
                    }
                    self.body = Body::Chunked(next);
                }
            }
        }
    }
}

/// The body framing a head announces; `head_end` is where the body starts.
fn body_framing(head: &[u8], head_end: usize) -> Result<Body, FrameError> {
    for line in head.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = memchr::memchr(b':', line) else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .ok_or(FrameError("bad content-length"))?;
            return Ok(Body::Length(head_end + n));
        }
        if name.eq_ignore_ascii_case(b"transfer-encoding") && value.ends_with(b"chunked") {
            return Ok(Body::Chunked(head_end));
        }
    }
    Err(FrameError("neither content-length nor chunked"))
}

fn chunk_size(line: &[u8]) -> Result<usize, FrameError> {
    let digits = line.split(|&b| b == b';').next().unwrap_or(line).trim_ascii();
    let text = std::str::from_utf8(digits).map_err(|_| FrameError("bad chunk size"))?;
    usize::from_str_radix(text, 16).map_err(|_| FrameError("bad chunk size"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunked(events: &[&str]) -> Vec<u8> {
        let mut out = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
                        Transfer-Encoding: chunked\r\n\r\n"
            .to_vec();
        for e in events {
            out.extend_from_slice(format!("{:x}\r\n{e}\r\n", e.len()).as_bytes());
        }
        out.extend_from_slice(b"0\r\n\r\n");
        out
    }

    /// Feeds `whole` grown one byte at a time; the end must appear exactly at the last byte.
    fn end_when_grown(whole: &[u8]) -> Vec<Option<usize>> {
        let mut scan = ResponseScan::default();
        (1..=whole.len()).map(|n| scan.feed(&whole[..n]).unwrap()).collect()
    }

    #[test]
    fn content_length_ends_after_its_body() {
        let whole = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";
        let ends = end_when_grown(whole);
        assert!(ends[..whole.len() - 1].iter().all(Option::is_none));
        assert_eq!(ends.last(), Some(&Some(whole.len())));
    }

    #[test]
    fn chunked_sse_ends_at_the_terminator_at_every_split() {
        let whole = chunked(&["data: {\"a\":1}\n\n", "data: [DONE]\n\n"]);
        let ends = end_when_grown(&whole);
        assert!(ends[..whole.len() - 1].iter().all(Option::is_none), "{ends:?}");
        assert_eq!(ends.last(), Some(&Some(whole.len())));
    }

    #[test]
    fn a_zero_in_chunk_data_is_not_the_terminator() {
        let whole = chunked(&["0\r\n\r\n", "x"]);
        let mut scan = ResponseScan::default();
        assert_eq!(scan.feed(&whole), Ok(Some(whole.len())));
        let cut = whole.len() - 5;
        let mut scan = ResponseScan::default();
        assert_eq!(scan.feed(&whole[..cut]), Ok(None));
    }

    #[test]
    fn unframed_and_bad_sizes_are_errors() {
        let mut scan = ResponseScan::default();
        assert!(scan.feed(b"HTTP/1.1 200 OK\r\nServer: x\r\n\r\n").is_err());
        let mut scan = ResponseScan::default();
        let bad = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(scan.feed(bad), Err(FrameError("bad chunk size")));
        let mut scan = ResponseScan::default();
        let huge = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n";
        assert_eq!(scan.feed(huge), Err(FrameError("chunk size out of range")));
    }
}
