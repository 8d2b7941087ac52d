//! Fault modes applied to a planned response: which fault hits a request, and how it rewrites
//! the response's pieces (head, one piece per content event, the last chunk) and its ending.
//! A plan with one piece is a plain (non-streaming) answer; two or more is a stream.

use std::time::{Duration, Instant};

use crate::config::{FaultConfig, TruncateFault, TruncateFraming};
use crate::plan::{End, Plan};
use crate::render::{chunk, json_response};

/// The error object vLLM sends (as an SSE frame, or as a 200 body) on an engine error.
pub const ERROR_OBJECT: &str = concat!(
    r#"{"error": {"object":"error","message":"engine error","#,
    r#""type":"InternalServerError","code":500}}"#
);
/// The message inside [`ERROR_OBJECT`], which a client should keep.
pub const ERROR_MESSAGE: &str = "engine error";
/// vLLM's `ErrorResponse` unwrapped (no `error` key), as its OpenAI server sends it for a
/// request it refuses: the only frame of a stream, or a 200 body.
pub const VLLM_ERROR_OBJECT: &str = concat!(
    r#"{"object":"error","message":"context too long","type":"BadRequestError","#,
    r#""param":null,"code":400}"#
);
/// The message inside [`VLLM_ERROR_OBJECT`], which a client should keep.
pub const VLLM_ERROR_MESSAGE: &str = "context too long";

const DONE: &[u8] = b"data: [DONE]\n\n";
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";
const SSE_HEAD_CLOSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
const JSON_HEAD_CLOSE: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
const JSON_HEAD_CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n";

/// True when request `n` (1-based) is one of every `every`-th.
fn hits(every: Option<u64>, n: u64) -> bool {
    every.is_some_and(|e| n % e.max(1) == 0)
}

/// A fault that rewrites a whole response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rewrite {
    NoResponse,
    CloseAfterRequest,
    StallAfterHead,
    CloseMidStream,
    StallMidStream,
    ErrorOnly,
    VllmErrorOnly,
    ErrorMidStream,
    Truncate(TruncateFault),
    FinishWithoutDone,
}

/// The rewrite that hits request `n`, in the precedence `FaultConfig` documents.
fn pick(f: &FaultConfig, n: u64) -> Option<Rewrite> {
    let table = [
        (f.no_response_every, Rewrite::NoResponse),
        (f.close_after_request_every, Rewrite::CloseAfterRequest),
        (f.stall_after_head_every, Rewrite::StallAfterHead),
        (f.close_mid_stream_every, Rewrite::CloseMidStream),
        (f.stall_every, Rewrite::StallMidStream),
        (f.error_only_stream_every, Rewrite::ErrorOnly),
        (f.vllm_error_every, Rewrite::VllmErrorOnly),
        (f.error_frame_mid_stream_every, Rewrite::ErrorMidStream),
    ];
    if let Some(&(_, r)) = table.iter().find(|(every, _)| hits(*every, n)) {
        return Some(r);
    }
    if let Some(t) = f.truncate.filter(|t| hits(Some(t.every), n)) {
        return Some(Rewrite::Truncate(t));
    }
    hits(f.finish_without_done_every, n).then_some(Rewrite::FinishWithoutDone)
}

/// Applies the body and connection faults that hit request `n` to a successful answer.
pub fn rewrite(f: &FaultConfig, plan: &mut Plan, n: u64) {
    if hits(f.multi_line_data_every, n) && is_stream(plan) {
        for piece in plan.pieces.iter_mut().skip(1) {
            *piece = map_chunk(piece, split_data_lines);
        }
    }
    let Some(r) = pick(f, n) else { return };
    let keep_alive = plan.end == End::KeepAlive;
    match r {
        Rewrite::NoResponse => {
            plan.pieces.clear();
            plan.end = End::Stall;
        }
        Rewrite::CloseAfterRequest => {
            plan.pieces.clear();
            plan.end = End::Close;
        }
        Rewrite::StallAfterHead => {
            let head = head_of(plan);
            plan.pieces = vec![head];
            plan.end = End::Stall;
        }
        Rewrite::CloseMidStream => {
            cut_half(plan);
            plan.end = End::Close;
        }
        Rewrite::StallMidStream => {
            cut_half(plan);
            plan.end = End::Stall;
        }
        Rewrite::ErrorOnly => error_after(plan, 0, ERROR_OBJECT, keep_alive),
        Rewrite::VllmErrorOnly => error_after(plan, 0, VLLM_ERROR_OBJECT, keep_alive),
        Rewrite::ErrorMidStream => {
            let half = (content_count(plan) / 2).max(1);
            error_after(plan, half, ERROR_OBJECT, keep_alive);
        }
        Rewrite::Truncate(t) => truncate(plan, t),
        Rewrite::FinishWithoutDone if is_stream(plan) => {
            let last = plan.pieces.len() - 1;
            plan.pieces[last] =
                map_chunk(&plan.pieces[last], |d| d.strip_suffix(DONE).unwrap_or(d).to_vec());
        }
        Rewrite::FinishWithoutDone => {}
    }
    fit_deadlines(plan);
}

/// The interim answers `FaultConfig::interim_responses` sends before each response.
pub const INTERIM_RESPONSES: &[u8] = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; \
rel=preload\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n";

/// Applies the faults that hit any routed response (status answers included): extra headers,
/// interim answers and the delay.
pub fn decorate(f: &FaultConfig, plan: &mut Plan, n: u64, start: Instant) {
    if f.extra_headers > 0 {
        if let Some(head) = plan.pieces.first_mut() {
            *head = with_extra_headers(head, f.extra_headers);
        }
    }
    if f.interim_responses {
        if let Some(head) = plan.pieces.first_mut() {
            head.splice(0..0, INTERIM_RESPONSES.iter().copied());
        }
    }
    if let Some(d) = f.delay.filter(|d| hits(Some(d.every), n)) {
        let by = Duration::from_millis(d.delay_ms);
        let deadlines = plan.deadlines.get_or_insert_with(|| vec![start; plan.pieces.len()]);
        deadlines.iter_mut().for_each(|t| *t += by);
    }
}

fn is_stream(plan: &Plan) -> bool {
    plan.pieces.len() >= 2
}

fn content_count(plan: &Plan) -> usize {
    plan.pieces.len().saturating_sub(2)
}

/// The response head (for a plain answer, its bytes through the blank line).
fn head_of(plan: &Plan) -> Vec<u8> {
    let first = plan.pieces.first().map_or(&[][..], Vec::as_slice);
    first[..head_len(first)].to_vec()
}

fn head_len(bytes: &[u8]) -> usize {
    memchr::memmem::find(bytes, b"\r\n\r\n").map_or(bytes.len(), |i| i + 4)
}

/// Keeps the first half of a response: for a stream the head and half its content events (at
/// least one), for a plain body the first half of its bytes.
fn cut_half(plan: &mut Plan) {
    let n = plan.pieces.len();
    if n == 1 {
        let half = plan.pieces[0].len() / 2;
        plan.pieces[0].truncate(half);
        return;
    }
    let contents = n - 2;
    let keep = 1 + (contents / 2).max(1).min(contents);
    plan.pieces.truncate(keep);
    if let Some(d) = plan.deadlines.as_mut() {
        d.truncate(keep);
    }
}

/// A stream: the head, `contents` content events, then the error frame (`error`), `[DONE]` and
/// the last chunk. A plain answer: a 200 whose body is the error object.
fn error_after(plan: &mut Plan, contents: usize, error: &str, keep_alive: bool) {
    if !is_stream(plan) {
        plan.pieces = vec![json_response(200, "OK", error, keep_alive)];
        return;
    }
    plan.pieces.truncate(1 + contents.min(content_count(plan)));
    let mut tail = format!("data: {error}\n\n").into_bytes();
    tail.extend_from_slice(DONE);
    let mut last = chunk(&tail);
    last.extend_from_slice(LAST_CHUNK);
    plan.pieces.push(last);
}

/// Cuts a stream after `after_frames` content events (no finish, no `[DONE]`), or a plain body
/// at half, framed as asked, and closes the connection.
fn truncate(plan: &mut Plan, t: TruncateFault) {
    plan.end = End::Close;
    if !is_stream(plan) {
        let whole = &plan.pieces[0];
        let head = head_len(whole);
        let body = &whole[head..whole.len() - (whole.len() - head) / 2];
        plan.pieces = vec![match t.framing {
            TruncateFraming::CloseDelimited => [JSON_HEAD_CLOSE, body].concat(),
            TruncateFraming::Chunked => [JSON_HEAD_CHUNKED, &chunk(body)[..]].concat(),
        }];
        return;
    }
    plan.pieces.truncate(1 + t.after_frames.min(content_count(plan)));
    if t.framing == TruncateFraming::CloseDelimited {
        plan.pieces[0] = SSE_HEAD_CLOSE.to_vec();
        for piece in plan.pieces.iter_mut().skip(1) {
            *piece = unchunk(piece).0.to_vec();
        }
    }
}

/// One deadline per piece when the plan has deadlines (a rewrite changed the piece count).
fn fit_deadlines(plan: &mut Plan) {
    let n = plan.pieces.len();
    if let Some(d) = plan.deadlines.as_mut() {
        let last = d.last().copied().unwrap_or_else(Instant::now);
        d.truncate(n);
        d.resize(n, last);
    }
}

/// Splits a chunk piece into its data and what follows it (the last chunk, or nothing).
fn unchunk(piece: &[u8]) -> (&[u8], &[u8]) {
    let Some(line_end) = memchr::memmem::find(piece, b"\r\n") else { return (piece, &[]) };
    let size = std::str::from_utf8(&piece[..line_end])
        .ok()
        .and_then(|h| usize::from_str_radix(h, 16).ok())
        .unwrap_or(0);
    let start = line_end + 2;
    let end = (start + size).min(piece.len());
    (&piece[start..end], piece.get(end + 2..).unwrap_or(&[]))
}

/// Rewrites the data of a chunk piece, keeping a last chunk that followed it.
fn map_chunk(piece: &[u8], f: impl FnOnce(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let (data, rest) = unchunk(piece);
    let mut out = chunk(&f(data));
    out.extend_from_slice(rest);
    out
}

/// Splits each `data: {…}` event over two `data:` lines at its first comma outside a string,
/// so the joined value (`\n` between the lines) is the same JSON.
fn split_data_lines(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 64);
    for event in data.split_inclusive(|&b| b == b'\n') {
        match event.strip_prefix(b"data: {").and_then(top_level_comma) {
            Some(at) => {
                let cut = b"data: {".len() + at + 1;
                out.extend_from_slice(&event[..cut]);
                out.extend_from_slice(b"\ndata: ");
                out.extend_from_slice(&event[cut..]);
            }
            None => out.extend_from_slice(event),
        }
    }
    out
}

/// The index of the first `,` outside a JSON string.
fn top_level_comma(json: &[u8]) -> Option<usize> {
    let (mut in_string, mut escaped) = (false, false);
    for (i, &b) in json.iter().enumerate() {
        match (in_string, escaped, b) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (_, false, b'"') => in_string = !in_string,
            (false, _, b',') => return Some(i),
            _ => {}
        }
    }
    None
}

/// The head with `count` more headers after the status line.
fn with_extra_headers(head: &[u8], count: usize) -> Vec<u8> {
    let Some(line_end) = memchr::memmem::find(head, b"\r\n") else { return head.to_vec() };
    let mut out = Vec::with_capacity(head.len() + count * 40);
    out.extend_from_slice(&head[..line_end + 2]);
    for i in 1..=count {
        out.extend_from_slice(format!("X-Stub-Extra-{i}: value-{i}\r\n").as_bytes());
    }
    out.extend_from_slice(&head[line_end + 2..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_data_lines_rejoins_to_the_same_json() {
        let data = b"data: {\"text\":\"a,\\\"b,\",\"n\":1}\n\ndata: [DONE]\n\n";
        let split = split_data_lines(data);
        let text = std::str::from_utf8(&split).unwrap();
        let first = text.split("\n\n").next().unwrap();
        let lines: Vec<&str> = first.lines().map(|l| l.strip_prefix("data: ").unwrap()).collect();
        assert_eq!(lines.len(), 2, "{text}");
        let joined: serde_json::Value = serde_json::from_str(&lines.join("\n")).unwrap();
        assert_eq!(joined["text"], "a,\"b,");
        assert!(text.ends_with("data: [DONE]\n\n"));
    }

    #[test]
    fn unchunk_keeps_the_last_chunk_apart() {
        let mut piece = chunk(b"hello");
        piece.extend_from_slice(LAST_CHUNK);
        assert_eq!(unchunk(&piece), (&b"hello"[..], LAST_CHUNK));
        assert_eq!(map_chunk(&piece, |d| d[..2].to_vec()), b"2\r\nhe\r\n0\r\n\r\n");
    }
}
