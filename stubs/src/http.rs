//! HTTP/1.1 request framing: where a request ends, which route it asks for, and the two body
//! flags (`stream`, `include_usage`) that choose a response variant.

use memchr::memmem;

/// Largest request head accepted; a longer one is a bad request.
pub const HEAD_LEN_MAX: usize = 16 * 1024;
/// Largest request body accepted.
pub const BODY_LEN_MAX: usize = 8 * 1024 * 1024;
const HEADER_COUNT_MAX: usize = 32;

/// The endpoint a request names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// `POST /v1/chat/completions`
    Chat,
    /// `POST /v1/completions`
    Completions,
    /// `POST /generate` (SGLang native)
    Generate,
}

impl Route {
    /// Every route, in a fixed order (index with `as usize`).
    pub const ALL: [Route; 3] = [Route::Chat, Route::Completions, Route::Generate];

    fn from_path(method: &str, path: &str) -> Option<Route> {
        if method != "POST" {
            return None;
        }
        let path = path.split('?').next().unwrap_or(path);
        match path {
            "/v1/chat/completions" => Some(Route::Chat),
            "/v1/completions" => Some(Route::Completions),
            "/generate" => Some(Route::Generate),
            _ => None,
        }
    }
}

/// A profiler trigger (vLLM's `POST /start_profile` and `POST /stop_profile`), answered apart
/// from the inference routes: no fault, no pacing, not counted toward `every`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileAction {
    Start,
    Stop,
}

impl ProfileAction {
    fn from_path(method: &str, path: &str) -> Option<ProfileAction> {
        match (method, path.split('?').next().unwrap_or(path)) {
            ("POST", "/start_profile") => Some(ProfileAction::Start),
            ("POST", "/stop_profile") => Some(ProfileAction::Stop),
            _ => None,
        }
    }
}

/// One complete request found at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The route, or `None` for an unknown method/path (answered 404) or a profiler trigger.
    pub route: Option<Route>,
    /// A profiler trigger (`route` is then `None`).
    pub profile: Option<ProfileAction>,
    /// `POST /v1/videos/generations` (`route` is then `None`), which the video stub answers.
    pub video: bool,
    /// Method and path, for the 404 message; empty when the route is known (no allocation on
    /// the hot path).
    pub target: String,
    /// Bytes of the head including the blank line.
    pub head_len: usize,
    /// Bytes of the body.
    pub body_len: usize,
    /// The client sent `Connection: close`.
    pub close: bool,
}

impl Request {
    /// Total bytes of the request.
    pub fn total_len(&self) -> usize {
        self.head_len + self.body_len
    }

    /// The body inside the buffer the request was framed from.
    pub fn body<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        &buf[self.head_len..self.total_len()]
    }
}

/// What the start of a buffer holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Not a whole request yet: read more.
    Partial,
    /// The head is in but the body is not, and the client sent `Expect: 100-continue`: answer
    /// `100 Continue` (once) and read more.
    ExpectsContinue,
    /// A whole request.
    Complete(Request),
    /// Not HTTP we accept; answered 400 and the connection is closed.
    Bad(String),
}

/// Finds the first request in `buf` (requests may arrive in pieces or several in one read).
pub fn frame_request(buf: &[u8]) -> Frame {
    let mut headers = [httparse::EMPTY_HEADER; HEADER_COUNT_MAX];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > HEAD_LEN_MAX => {
            return Frame::Bad(format!("request head longer than {HEAD_LEN_MAX} bytes"))
        }
        Ok(httparse::Status::Partial) => return Frame::Partial,
        Err(e) => return Frame::Bad(format!("malformed request head: {e}")),
    };
    let mut body_len = 0usize;
    let mut close = false;
    let mut expects_continue = false;
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            body_len = match parse_content_length(h.value) {
                Some(n) if n <= BODY_LEN_MAX => n,
                Some(n) => return Frame::Bad(format!("body of {n} bytes exceeds {BODY_LEN_MAX}")),
                None => return Frame::Bad("invalid content-length".to_string()),
            };
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Frame::Bad("chunked request bodies are not supported".to_string());
        } else if h.name.eq_ignore_ascii_case("connection") {
            close = h.value.eq_ignore_ascii_case(b"close");
        } else if h.name.eq_ignore_ascii_case("expect") {
            expects_continue = h.value.eq_ignore_ascii_case(b"100-continue");
        }
    }
    if buf.len() < head_len + body_len {
        return if expects_continue { Frame::ExpectsContinue } else { Frame::Partial };
    }
    let method = req.method.unwrap_or("");
    let path = req.path.unwrap_or("");
    let route = Route::from_path(method, path);
    let profile = ProfileAction::from_path(method, path);
    let video = method == "POST" && path.split('?').next() == Some("/v1/videos/generations");
    Frame::Complete(Request {
        route,
        profile,
        video,
        target: if route.is_none() { format!("{method} {path}") } else { String::new() },
        head_len,
        body_len,
        close,
    })
}

/// The value of header `name` (case-insensitive) in a request head framed by
/// `frame_request`; `None` when absent.
pub fn header_value<'a>(head: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let mut headers = [httparse::EMPTY_HEADER; HEADER_COUNT_MAX];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(head).ok()?;
    req.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
}

fn parse_content_length(value: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(value).ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The value of a JSON boolean key found by a byte scan (no JSON parse): `Some(true)` for
/// `"key": true`, `Some(false)` for `"key": false`, `None` when absent or not a boolean.
/// This is the max-throughput stub's whole per-request body work.
pub fn scan_bool(body: &[u8], finder: &memmem::Finder<'_>) -> Option<bool> {
    let mut from = 0;
    while let Some(at) = finder.find(&body[from..]) {
        let rest = &body[from + at + finder.needle().len()..];
        let rest = skip_ws(rest);
        if let Some(rest) = rest.strip_prefix(b":") {
            let rest = skip_ws(rest);
            if rest.starts_with(b"true") {
                return Some(true);
            }
            if rest.starts_with(b"false") {
                return Some(false);
            }
            return None;
        }
        from += at + 1;
    }
    None
}

fn skip_ws(bytes: &[u8]) -> &[u8] {
    let n = bytes.iter().take_while(|b| b.is_ascii_whitespace()).count();
    &bytes[n..]
}

/// Finders for the two flags, built once per worker.
pub struct FlagFinders {
    stream: memmem::Finder<'static>,
    usage: memmem::Finder<'static>,
}

impl Default for FlagFinders {
    fn default() -> Self {
        Self {
            stream: memmem::Finder::new(b"\"stream\""),
            usage: memmem::Finder::new(b"\"include_usage\""),
        }
    }
}

impl FlagFinders {
    /// `(stream, include_usage)` of a body; `stream_default` when the body does not say.
    pub fn flags(&self, body: &[u8], stream_default: bool) -> (bool, bool) {
        let stream = scan_bool(body, &self.stream).unwrap_or(stream_default);
        let usage = stream && scan_bool(body, &self.usage).unwrap_or(false);
        (stream, usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_complete_partial_and_pipelined_requests() {
        let one = b"POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";
        for cut in 0..one.len() {
            assert_eq!(frame_request(&one[..cut]), Frame::Partial, "cut at {cut}");
        }
        let mut two = one.to_vec();
        two.extend_from_slice(one);
        match frame_request(&two) {
            Frame::Complete(r) => {
                assert_eq!(r.route, Some(Route::Completions));
                assert_eq!(r.total_len(), one.len());
                assert_eq!(r.body(&two), b"{}");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn asks_for_the_body_when_the_client_expects_100_continue() {
        let head = b"POST /generate HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
        assert_eq!(frame_request(head), Frame::ExpectsContinue);
        assert_eq!(frame_request(&head[..head.len() - 2]), Frame::Partial);
        let mut whole = head.to_vec();
        whole.extend_from_slice(b"{}");
        assert!(matches!(frame_request(&whole), Frame::Complete(_)));
    }

    #[test]
    fn rejects_bad_heads_and_lengths() {
        for bad in [
            &b"GARBAGE\x01 / HTTP/1.1\r\n\r\n"[..],
            b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            assert!(matches!(frame_request(bad), Frame::Bad(_)), "{bad:?}");
        }
    }

    #[test]
    fn finds_a_header_value_by_its_name_in_any_case() {
        let head = b"POST /v1/chat/completions HTTP/1.1\r\nx-session-id: conv-7\r\n\r\n";
        assert_eq!(header_value(head, "X-Session-ID"), Some(&b"conv-7"[..]));
        assert_eq!(header_value(head, "X-Other"), None);
    }

    #[test]
    fn routes_by_method_and_path() {
        let get = b"GET /v1/chat/completions HTTP/1.1\r\n\r\n";
        let gen = b"POST /generate?x=1 HTTP/1.1\r\n\r\n";
        let route = |b: &[u8]| match frame_request(b) {
            Frame::Complete(r) => r.route,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(route(get), None);
        assert_eq!(route(gen), Some(Route::Generate));
        let profile = |b: &[u8]| match frame_request(b) {
            Frame::Complete(r) => (r.route, r.profile),
            other => panic!("unexpected {other:?}"),
        };
        let start = profile(b"POST /start_profile HTTP/1.1\r\ncontent-length: 0\r\n\r\n");
        assert_eq!(start, (None, Some(ProfileAction::Start)));
        assert_eq!(profile(b"POST /stop_profile HTTP/1.1\r\n\r\n").1, Some(ProfileAction::Stop));
        assert_eq!(profile(b"GET /stop_profile HTTP/1.1\r\n\r\n").1, None);
    }

    #[test]
    fn scans_flags_with_and_without_spaces() {
        let f = FlagFinders::default();
        let cases: [(&[u8], bool, (bool, bool)); 6] = [
            (b"{\"stream\":true}", false, (true, false)),
            (
                b"{\"stream\" : true, \"stream_options\": {\"include_usage\": true}}",
                false,
                (true, true),
            ),
            (
                b"{\"stream\":false,\"stream_options\":{\"include_usage\":true}}",
                true,
                (false, false),
            ),
            (b"{}", true, (true, false)),
            (b"{\"x\":\"\\\"stream\\\"\",\"stream\":true}", false, (true, false)),
            (
                b"{\"stream_options\":{\"include_usage\":false},\"stream\":true}",
                false,
                (true, false),
            ),
        ];
        for (body, default, want) in cases {
            assert_eq!(f.flags(body, default), want, "{}", String::from_utf8_lossy(body));
        }
    }
}
