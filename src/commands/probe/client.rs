//! The probe's HTTP/1.1 client: one blocking connection per request (plain TCP, or rustls over
//! it for `https://`), the worker's own response framing (`h1::ResponseReader`), SSE parser and
//! response adapters, so the probe reads an answer as a benchmark would; every SSE event is
//! stamped with the read that delivered it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen_wire::monotonic_ns;
use loadgen_worker::adapter::Accumulator;
use loadgen_worker::http::h1::ResponseReader;
use loadgen_worker::http::sse::{stream_end, BodyEnd, SseItem, SseParser, StreamEnd};
use loadgen_worker::http::tls::{certificate_refused_message, refuses_certificate};
use loadgen_worker::request::{ApiType, Endpoint};
use rustls::pki_types::ServerName;

/// Bytes asked of each read: small, so an event's stamp is close to its arrival even when a
/// server writes many events at once.
const READ_PIECE_BYTES: usize = 4096;
/// Most bytes of a body (or SSE event) kept; an answer longer than this is cut, as a worker
/// cuts its output.
const BODY_MAX_BYTES: usize = 4 << 20;
/// Longest wait for a TCP connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the probe's requests go and how they are secured.
pub struct Target {
    pub endpoint: Endpoint,
    /// The rustls config for `https://` endpoints (ALPN `http/1.1`, the run's verification).
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// One SSE data event: when its read returned, and whether it carried output text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventAt {
    pub at_ns: u64,
    pub content: bool,
}

/// What one request got back.
#[derive(Debug, Default)]
pub struct Exchange {
    /// The HTTP status (0 when no response head arrived).
    pub status: u16,
    pub sent_ns: u64,
    pub done_ns: u64,
    /// The response was `text/event-stream`.
    pub event_stream: bool,
    /// SSE data events in arrival order.
    pub events: Vec<EventAt>,
    pub output: String,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// Some frame or body carried a non-empty `reasoning_content` or `reasoning`.
    pub reasoning: bool,
    /// The stream sent `data: [DONE]`.
    pub saw_done: bool,
    /// The TLS handshake refused the server's certificate (a setup error, as in a benchmark).
    pub certificate_refused: bool,
    /// Why the request failed; `None` for a success.
    pub error: Option<String>,
}

impl Exchange {
    pub fn latency_ns(&self) -> u64 {
        self.done_ns.saturating_sub(self.sent_ns)
    }
}

/// A plain or TLS connection.
enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Conn {
    fn stream(&mut self) -> &mut dyn ReadWrite {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => s.as_mut(),
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

fn connect(target: &Target, deadline: Instant) -> Result<(Conn, TcpStream), String> {
    let ep = &target.endpoint;
    let left = deadline.saturating_duration_since(Instant::now()).min(CONNECT_TIMEOUT);
    let tcp = TcpStream::connect_timeout(&ep.addr, left.max(Duration::from_millis(1)))
        .map_err(|e| format!("cannot connect to {}: {e}", ep.addr))?;
    let _ = tcp.set_nodelay(true);
    let handle = tcp.try_clone().map_err(|e| format!("cannot use the socket: {e}"))?;
    let Some(config) = &target.tls else { return Ok((Conn::Plain(tcp), handle)) };
    let host = ep.host.trim_matches(|c| c == '[' || c == ']').to_string();
    let name = ServerName::try_from(host.clone())
        .map_err(|_| format!("{host:?} is not a valid TLS server name"))?;
    let tls = rustls::ClientConnection::new(config.clone(), name)
        .map_err(|e| format!("cannot set up TLS: {e}"))?;
    Ok((Conn::Tls(Box::new(rustls::StreamOwned::new(tls, tcp))), handle))
}

/// Sends `request` (whole HTTP/1.1 bytes) and reads its response until it ends, the
/// connection closes, or `deadline` passes.
pub fn exchange(target: &Target, api: ApiType, request: &[u8], deadline: Instant) -> Exchange {
    let mut ex = Exchange { sent_ns: monotonic_ns(), ..Exchange::default() };
    let mut refused = false;
    let result = connect(target, deadline).and_then(|(mut conn, handle)| {
        // The first write runs the TLS handshake, so a refused certificate surfaces here.
        if let Err(e) = conn.stream().write_all(request) {
            let host = target.endpoint.host.trim_matches(|c| c == '[' || c == ']');
            return Err(match refused_certificate(&e) {
                Some(tls) => {
                    refused = true;
                    certificate_refused_message(host, tls)
                }
                None => io_error("cannot send the request", &e),
            });
        }
        read_response(&mut conn, &handle, api, deadline, &mut ex)
    });
    ex.done_ns = monotonic_ns();
    ex.certificate_refused = refused;
    ex.error = result.err();
    ex
}

/// The rustls error under a failed write when it refused the server's certificate.
fn refused_certificate(e: &std::io::Error) -> Option<&rustls::Error> {
    e.get_ref()?.downcast_ref::<rustls::Error>().filter(|tls| refuses_certificate(tls))
}

fn io_error(what: &str, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            format!("{what}: timed out")
        }
        _ => format!("{what}: {e}"),
    }
}

/// The response's parsers: framing, SSE, the worker's adapter, and the raw body.
struct Readers {
    head: ResponseReader,
    sse: SseParser,
    acc: Accumulator,
    body: Vec<u8>,
}

fn read_response(
    conn: &mut Conn,
    handle: &TcpStream,
    api: ApiType,
    deadline: Instant,
    ex: &mut Exchange,
) -> Result<(), String> {
    let mut r = Readers {
        head: ResponseReader::new(),
        sse: SseParser::new(BODY_MAX_BYTES),
        acc: Accumulator::new(api, BODY_MAX_BYTES),
        body: Vec::new(),
    };
    let mut pending: Vec<u8> = Vec::with_capacity(2 * READ_PIECE_BYTES);
    let mut piece = vec![0u8; READ_PIECE_BYTES];
    let closed = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("no complete response before the probe's deadline".into());
        }
        let _ = handle.set_read_timeout(Some(left));
        let n = match conn.stream().read(&mut piece) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error("cannot read the response", &e)),
        };
        if n == 0 {
            break true;
        }
        pending.extend_from_slice(&piece[..n]);
        let used = feed(&mut r, &pending, monotonic_ns(), ex)?;
        pending.drain(..used);
        if r.head.is_done() {
            break false;
        }
    };
    finish(r, closed, ex)
}

/// Feeds bytes read at `at_ns` through the framing into the SSE parser or the body.
fn feed(r: &mut Readers, input: &[u8], at_ns: u64, ex: &mut Exchange) -> Result<usize, String> {
    let mut used = 0;
    // The head is parsed first on its own, so the body's sink knows whether it is a stream.
    if !r.head.head_done() {
        used = r.head.feed_head(input).map_err(|e| format!("{e}"))?;
        if !r.head.head_done() {
            // Interim (1xx) answers may have been passed over before the final head.
            return Ok(used);
        }
        ex.status = r.head.head().status;
        ex.event_stream = r.head.head().event_stream && ex.status == 200;
    }
    let Readers { head, sse, acc, body } = r;
    let stream = ex.event_stream;
    let mut sink = |bytes: &[u8]| {
        if stream {
            sse.feed(bytes, &mut |item| on_event(acc, item, at_ns, ex));
        } else if body.len() + bytes.len() <= BODY_MAX_BYTES {
            body.extend_from_slice(bytes);
        }
    };
    let progress = head.feed(&input[used..], &mut sink).map_err(|e| format!("{e}"))?;
    Ok(used + progress.consumed)
}

/// One SSE item: through the worker's adapter, stamped, and checked for reasoning text.
fn on_event(acc: &mut Accumulator, item: SseItem<'_>, at_ns: u64, ex: &mut Exchange) {
    let SseItem::Data(json) = item else {
        ex.saw_done = true;
        return;
    };
    let before = acc.output.len();
    acc.on_sse_frame(json, monotonic_ns);
    ex.events.push(EventAt { at_ns, content: acc.output.len() > before });
    ex.reasoning |= has_reasoning(json);
}

/// A frame or body whose first choice carries reasoning text (`delta` or `message`).
pub fn has_reasoning(json: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(json) else { return false };
    ["delta", "message"].iter().any(|part| {
        ["reasoning_content", "reasoning"].iter().any(|key| {
            let pointer = format!("/choices/0/{part}/{key}");
            v.pointer(&pointer).and_then(serde_json::Value::as_str).is_some_and(|t| !t.is_empty())
        })
    })
}

/// Ends the response: the body decoded (or quoted as the error), the outcome decided.
fn finish(mut r: Readers, closed: bool, ex: &mut Exchange) -> Result<(), String> {
    if !r.head.head_done() {
        return Err("the connection closed before a response".into());
    }
    if ex.status != 200 {
        return Err(format!("HTTP {}: {}", ex.status, error_text(&r.body)));
    }
    if ex.event_stream {
        r.sse.finish(&mut |item| on_event(&mut r.acc, item, monotonic_ns(), ex));
        r.acc.finish_stream();
    } else {
        if !(r.head.is_done() || closed && r.head.ends_at_close()) {
            return Err("the connection closed before the body's end".into());
        }
        if !r.acc.on_body(&r.body) {
            return Err(format!("the body is not a {:?} answer: {}", r.acc.api, quote(&r.body)));
        }
        ex.reasoning |= has_reasoning(&r.body);
    }
    ex.output = String::from_utf8_lossy(&r.acc.output).into_owned();
    ex.prompt_tokens = r.acc.usage.prompt_tokens;
    ex.completion_tokens = r.acc.usage.completion_tokens;
    if r.acc.stream_error {
        return Err(format!("the endpoint sent an error: {}", quote(&r.acc.error_message)));
    }
    // The benchmark's rule for a stream's end (SPEC §10), so the probe fails what a run fails.
    let body_end = if r.head.is_done() { BodyEnd::Finished } else { BodyEnd::Closed };
    let finished = r.acc.finish != loadgen_wire::FinishReason::None;
    if ex.event_stream && stream_end(ex.saw_done, finished, body_end) == StreamEnd::Truncated {
        return Err("the stream was cut: no [DONE], and no finish_reason in a whole body".into());
    }
    Ok(())
}

/// An error body's message (`error.message`, else `message`, else the body quoted).
fn error_text(body: &[u8]) -> String {
    let v: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let message = v.as_ref().and_then(|v| {
        v.pointer("/error/message").or_else(|| v.get("message")).or_else(|| v.get("detail"))
    });
    match message {
        Some(serde_json::Value::String(s)) => cut(s, 200),
        Some(other) => cut(&other.to_string(), 200),
        None => quote(body),
    }
}

fn quote(bytes: &[u8]) -> String {
    cut(&String::from_utf8_lossy(bytes), 200)
}

/// `text` cut to at most `max` characters, with `...` when cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_is_found_in_deltas_and_messages_only_when_not_empty() {
        let cases: [(&str, bool); 6] = [
            (r#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#, true),
            (r#"{"choices":[{"delta":{"reasoning":"hm"}}]}"#, true),
            (r#"{"choices":[{"message":{"reasoning_content":"hm","content":"a"}}]}"#, true),
            (r#"{"choices":[{"delta":{"reasoning_content":""}}]}"#, false),
            (r#"{"choices":[{"delta":{"content":"a"}}]}"#, false),
            ("not json", false),
        ];
        for (json, want) in cases {
            assert_eq!(has_reasoning(json.as_bytes()), want, "{json}");
        }
    }

    #[test]
    fn an_error_body_gives_its_message() {
        let body = br#"{"error":{"message":"stream_options: not permitted","code":400}}"#;
        assert_eq!(error_text(body), "stream_options: not permitted");
        assert_eq!(error_text(b"plain text"), "plain text");
        assert_eq!(cut("abcdef", 3), "abc...");
    }
}
