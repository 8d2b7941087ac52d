//! HTTP/1.1 response framing: the head (httparse), then a Content-Length, chunked or
//! close-delimited body, fed incrementally from whatever the socket returned.

/// Most headers a response may carry. Servers behind proxies, gateways and CDNs commonly send
/// 30 to 60 (tracing, rate-limit, CORS and cache headers each add a handful); nginx and Envoy
/// accept about 100 request headers by default. 128 fits all of them with room, and costs
/// nothing until used: the header slots are left uninitialised (4 KiB of stack).
pub const MAX_RESPONSE_HEADERS: usize = 128;

/// Why a response could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum H1Error {
    #[error("malformed response head: {0}")]
    Head(&'static str),
    /// The head broke a named limit (the response is not malformed, only larger than allowed).
    #[error("response head has more than {MAX_RESPONSE_HEADERS} headers (MAX_RESPONSE_HEADERS); the endpoint or a proxy in front of it sends too many")]
    TooManyHeaders,
    #[error("malformed chunk size line")]
    ChunkSize,
    #[error("missing CRLF after chunk data")]
    ChunkCrlf,
}

/// How the body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Body,
    ChunkSize,
    ChunkData(u64),
    ChunkCrlf,
    Trailer,
    Done,
}

/// What the head said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// The server asked to close (or HTTP/1.0 without keep-alive).
    pub close: bool,
    /// `Content-Type` is `text/event-stream`.
    pub event_stream: bool,
}

/// One response's parser; `reset` it between responses on the same connection.
#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    framing: Framing,
    head: ResponseHead,
}

/// The result of one `feed`: how many input bytes were used, and whether the response ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub consumed: usize,
    pub done: bool,
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader::new()
    }
}

impl ResponseReader {
    pub fn new() -> ResponseReader {
        ResponseReader {
            state: State::Head,
            framing: Framing::UntilClose,
            head: ResponseHead::default(),
        }
    }

    pub fn reset(&mut self) {
        *self = ResponseReader::new();
    }

    /// The parsed head (valid once `head_done`).
    pub fn head(&self) -> ResponseHead {
        self.head
    }

    pub fn head_done(&self) -> bool {
        self.state != State::Head
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// True while the body runs until the connection closes (EOF then ends it cleanly).
    pub fn ends_at_close(&self) -> bool {
        self.state == State::Body && self.framing == Framing::UntilClose
    }

    /// The body's length when it is Content-Length framed and none of it was consumed yet.
    pub fn whole_length_body(&self) -> Option<u64> {
        match (self.state, self.framing) {
            (State::Body, Framing::Length(n)) => Some(n),
            _ => None,
        }
    }

    /// Marks a Content-Length body as read in one piece by the caller (after
    /// `whole_length_body` said how long it is).
    pub fn skip_whole_body(&mut self) {
        if let (State::Body, Framing::Length(_)) = (self.state, self.framing) {
            self.framing = Framing::Length(0);
            self.state = State::Done;
        }
    }

    /// Parses only the head (so the caller can pick a body sink from it); returns the bytes
    /// consumed, 0 while the head is incomplete or already parsed.
    pub fn feed_head(&mut self, input: &[u8]) -> Result<usize, H1Error> {
        if self.state != State::Head {
            return Ok(0);
        }
        self.parse_head(input)
    }

    /// Parses as much of `input` as possible, handing body bytes to `body`. Returns the bytes
    /// consumed; unconsumed bytes (an incomplete head or chunk-size line) must be offered again
    /// with more data appended. Call repeatedly until `consumed == 0` or `done`.
    pub fn feed(
        &mut self,
        input: &[u8],
        body: &mut impl FnMut(&[u8]),
    ) -> Result<Progress, H1Error> {
        let mut at = 0;
        loop {
            let rest = &input[at..];
            let used = match self.state {
                State::Done => break,
                State::Head => self.parse_head(rest)?,
                State::Body => self.body_bytes(rest, body),
                State::ChunkSize => self.chunk_size(rest)?,
                State::ChunkData(left) => {
                    let n = (left.min(rest.len() as u64)) as usize;
                    body(&rest[..n]);
                    self.state = if n as u64 == left {
                        State::ChunkCrlf
                    } else {
                        State::ChunkData(left - n as u64)
                    };
                    n
                }
                State::ChunkCrlf => match rest {
                    [b'\r', b'\n', ..] => {
                        self.state = State::ChunkSize;
                        2
                    }
                    [] | [b'\r'] => 0,
                    _ => return Err(H1Error::ChunkCrlf),
                },
                State::Trailer => self.trailer(rest),
            };
            if used == 0 && self.state != State::Done {
                break;
            }
            at += used;
        }
        Ok(Progress { consumed: at, done: self.state == State::Done })
    }

    /// Parses the final head, passing over any interim (1xx but 101) answers before it: a
    /// server may send `100 Continue` or `103 Early Hints` unasked (RFC 9110 §15.2), and the
    /// request's answer is the response after them. Returns the bytes consumed, those of the
    /// interim answers included, while the state stays `Head` until the final head is in.
    fn parse_head(&mut self, input: &[u8]) -> Result<usize, H1Error> {
        let mut at = 0;
        loop {
            let used = self.parse_one_head(&input[at..])?;
            at += used;
            if used == 0 || self.state != State::Head {
                return Ok(at);
            }
        }
    }

    /// One head; an interim answer's leaves the state at `Head`.
    fn parse_one_head(&mut self, input: &[u8]) -> Result<usize, H1Error> {
        // Uninitialised header slots: httparse fills only what it parses, and a 1 KiB array of
        // empty headers per response is not written first.
        let mut headers = [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() };
            MAX_RESPONSE_HEADERS];
        let mut response = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut response,
            input,
            &mut headers,
        );
        let len = match parsed {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(0),
            Err(httparse::Error::TooManyHeaders) => return Err(H1Error::TooManyHeaders),
            Err(_) => return Err(H1Error::Head("not an http/1.x response")),
        };
        let status = response.code.unwrap_or(0);
        if is_interim(status) {
            return Ok(len);
        }
        // `close` in any Connection header ends the connection (RFC 9112 §9.6), whatever other
        // tokens say; `keep-alive` only keeps an HTTP/1.0 connection open.
        let (mut says_close, mut says_keep_alive) = (false, false);
        let mut framing = Framing::UntilClose;
        let mut event_stream = false;
        for header in response.headers.iter() {
            let name = header.name;
            if name.eq_ignore_ascii_case("content-length") {
                let text = std::str::from_utf8(header.value)
                    .map_err(|_| H1Error::Head("content-length"))?;
                let n = text.trim().parse().map_err(|_| H1Error::Head("content-length"))?;
                if framing != Framing::Chunked {
                    framing = Framing::Length(n);
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                if contains_token(header.value, b"chunked") {
                    framing = Framing::Chunked;
                }
            } else if name.eq_ignore_ascii_case("connection") {
                says_close |= contains_token(header.value, b"close");
                says_keep_alive |= contains_token(header.value, b"keep-alive");
            } else if name.eq_ignore_ascii_case("content-type") {
                event_stream = contains_token(header.value, b"text/event-stream");
            }
        }
        // 101 (the only 1xx that ends the exchange), 204 and 304 carry no body.
        if (100..200).contains(&status) || status == 204 || status == 304 {
            framing = Framing::Length(0);
        }
        let http10 = response.version == Some(0);
        let close = says_close || (http10 && !says_keep_alive) || framing == Framing::UntilClose;
        self.head = ResponseHead { status, close, event_stream };
        self.framing = framing;
        self.state = match framing {
            Framing::Length(0) => State::Done,
            Framing::Chunked => State::ChunkSize,
            _ => State::Body,
        };
        Ok(len)
    }

    fn body_bytes(&mut self, input: &[u8], body: &mut impl FnMut(&[u8])) -> usize {
        match self.framing {
            Framing::Length(left) => {
                let n = (left.min(input.len() as u64)) as usize;
                if n > 0 {
                    body(&input[..n]);
                }
                let left = left - n as u64;
                self.framing = Framing::Length(left);
                if left == 0 {
                    self.state = State::Done;
                }
                n
            }
            _ => {
                if !input.is_empty() {
                    body(input);
                }
                input.len()
            }
        }
    }

    fn chunk_size(&mut self, input: &[u8]) -> Result<usize, H1Error> {
        let Some(nl) = memchr::memchr(b'\n', input) else {
            if input.len() > 1024 {
                return Err(H1Error::ChunkSize);
            }
            return Ok(0);
        };
        let line = input[..nl].strip_suffix(b"\r").ok_or(H1Error::ChunkSize)?;
        // Chunk extensions (";name=value") are ignored.
        let digits = line.split(|b| *b == b';').next().unwrap_or(&[]);
        let digits = trim_ascii(digits);
        if digits.is_empty() || digits.len() > 15 {
            return Err(H1Error::ChunkSize);
        }
        let mut size = 0u64;
        for &d in digits {
            let v = (d as char).to_digit(16).ok_or(H1Error::ChunkSize)?;
            size = size * 16 + u64::from(v);
        }
        self.state = if size == 0 { State::Trailer } else { State::ChunkData(size) };
        Ok(nl + 1)
    }

    fn trailer(&mut self, input: &[u8]) -> usize {
        // Trailer lines until an empty line; their content is ignored.
        let Some(nl) = memchr::memchr(b'\n', input) else { return 0 };
        if input[..nl].strip_suffix(b"\r").unwrap_or(&input[..nl]).is_empty() {
            self.state = State::Done;
        }
        nl + 1
    }
}

/// An interim response (RFC 9110 §15.2): informational, and not `101 Switching Protocols`,
/// which ends the exchange (the requests never ask for an upgrade, so it is a failed status).
fn is_interim(status: u16) -> bool {
    (100..200).contains(&status) && status != 101
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// Case-insensitive search for a comma-separated token (or a media type prefix).
fn contains_token(value: &[u8], token: &[u8]) -> bool {
    value
        .split(|b| *b == b',' || *b == b';')
        .any(|part| trim_ascii(part).eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` split at `split` the way a connection does: unconsumed bytes stay in the
    /// buffer and are offered again with the next read appended.
    fn parse_split(wire: &[u8], split: usize) -> Result<(ResponseHead, Vec<u8>, usize), H1Error> {
        let mut reader = ResponseReader::new();
        let mut body = Vec::new();
        let mut buf: Vec<u8> = Vec::new();
        let mut fed = 0;
        for piece in [&wire[..split], &wire[split..]] {
            buf.extend_from_slice(piece);
            fed += piece.len();
            loop {
                let p = reader.feed(&buf, &mut |b| body.extend_from_slice(b))?;
                buf.drain(..p.consumed);
                if p.done {
                    return Ok((reader.head(), body, buf.len() + wire.len() - fed));
                }
                if p.consumed == 0 {
                    break;
                }
            }
        }
        assert!(reader.ends_at_close(), "incomplete response at split {split}");
        Ok((reader.head(), body, 0))
    }

    /// name, wire bytes, status, body, close, event stream
    type Case = (&'static str, &'static [u8], u16, &'static [u8], bool, bool);

    const CASES: &[Case] = &[
        (
            "content-length",
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello",
            200,
            b"hello",
            false,
            false,
        ),
        (
            "chunked with extension and trailer",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: text/event-stream\r\n\r\n5;x=y\r\nhello\r\nB\r\n 0123456789\r\n0\r\nX-T: 1\r\n\r\n",
            200,
            b"hello 0123456789",
            false,
            true,
        ),
        (
            "error status with close",
            b"HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 9\r\n\r\nnot found",
            404,
            b"not found",
            true,
            false,
        ),
        ("no content", b"HTTP/1.1 204 No Content\r\n\r\n", 204, b"", false, false),
        (
            "interim answers before the final one are passed over",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            200,
            b"ok",
            false,
            false,
        ),
        (
            "101 is final",
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
            101,
            b"",
            false,
            false,
        ),
        (
            "http/1.0 closes",
            b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
            200,
            b"ok",
            true,
            false,
        ),
    ];

    #[test]
    fn responses_parse_the_same_at_every_split() {
        for (name, wire, status, body, close, sse) in CASES {
            for split in 0..=wire.len() {
                let (head, got, left) = parse_split(wire, split).unwrap();
                assert_eq!(head.status, *status, "{name} split {split}");
                assert_eq!(got, *body, "{name} split {split}");
                assert_eq!(head.close, *close, "{name} split {split}");
                assert_eq!(head.event_stream, *sse, "{name} split {split}");
                assert_eq!(left, 0, "{name} split {split}");
            }
        }
    }

    #[test]
    fn close_delimited_body_ends_at_eof() {
        let wire = b"HTTP/1.1 200 OK\r\n\r\nall of it";
        for split in 0..=wire.len() {
            let (head, got, _) = parse_split(wire, split).unwrap();
            assert!(head.close);
            assert_eq!(got, b"all of it");
        }
    }

    #[test]
    fn malformed_input_is_an_error() {
        let bad: &[&[u8]] = &[
            b"SSH-2.0-OpenSSH\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY",
        ];
        for wire in bad {
            let mut reader = ResponseReader::new();
            let mut sink = |_: &[u8]| {};
            let mut result = Ok(Progress { consumed: 0, done: false });
            let mut at = 0;
            while at < wire.len() {
                result = reader.feed(&wire[at..], &mut sink);
                match result {
                    Ok(p) if p.consumed > 0 => at += p.consumed,
                    _ => break,
                }
            }
            assert!(result.is_err(), "{:?}", String::from_utf8_lossy(wire));
        }
    }

    /// A head with `count` extra headers, then a 2-byte body.
    fn head_with_headers(count: usize) -> Vec<u8> {
        let mut wire = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n".to_vec();
        for i in 0..count {
            wire.extend_from_slice(format!("X-Proxy-Header-{i}: value {i}\r\n").as_bytes());
        }
        wire.extend_from_slice(b"\r\nok");
        wire
    }

    #[test]
    fn connection_close_wins_over_a_later_keep_alive() {
        let wire = b"HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n";
        assert!(parse_split(wire, wire.len()).unwrap().0.close);
        let wire = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n";
        assert!(!parse_split(wire, wire.len()).unwrap().0.close, "an HTTP/1.0 keep-alive");
    }

    #[test]
    fn forty_headers_are_accepted() {
        let wire = head_with_headers(40);
        let (head, body, _) = parse_split(&wire, wire.len()).unwrap();
        assert_eq!((head.status, body.as_slice()), (200, &b"ok"[..]));
        let wire = head_with_headers(MAX_RESPONSE_HEADERS - 1);
        assert!(parse_split(&wire, wire.len()).is_ok(), "the limit itself is accepted");
    }

    #[test]
    fn too_many_headers_is_a_head_limit_naming_the_limit() {
        let wire = head_with_headers(MAX_RESPONSE_HEADERS);
        let err = parse_split(&wire, wire.len()).unwrap_err();
        assert_eq!(err, H1Error::TooManyHeaders);
        assert!(err.to_string().contains("128 headers (MAX_RESPONSE_HEADERS)"), "{err}");
    }

    #[test]
    fn two_responses_back_to_back() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb";
        let mut reader = ResponseReader::new();
        let mut body = Vec::new();
        let p = reader.feed(wire, &mut |b| body.extend_from_slice(b)).unwrap();
        assert!(p.done);
        reader.reset();
        let q = reader.feed(&wire[p.consumed..], &mut |b| body.extend_from_slice(b)).unwrap();
        assert!(q.done);
        assert_eq!(p.consumed + q.consumed, wire.len());
        assert_eq!(body, b"ab");
    }
}
