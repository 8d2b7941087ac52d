//! Response bytes: the JSON and SSE shapes of each route, laid out as the reference's
//! max-throughput stub lays them out (each content event in its own HTTP chunk; the finish
//! event, the optional usage-only frame and `data: [DONE]` together in the last chunk).

use std::fmt::Write as _;

use crate::config::UsageFault;
use crate::http::Route;

/// Bytes of one unconditionally malformed SSE frame (fault mode).
pub const MALFORMED_FRAME: &[u8] = b"data: {\"choices\":[{\n\n";
pub(crate) const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n";

/// What to answer one request with.
#[derive(Debug, Clone)]
pub struct Reply<'a> {
    /// The route, which picks the JSON shape.
    pub route: Route,
    /// Stream the answer as SSE.
    pub stream: bool,
    /// Add the usage-only frame (`stream_options.include_usage`).
    pub usage_frame: bool,
    /// The `model` field.
    pub model: &'a str,
    /// The `created` field.
    pub created_unix_s: u64,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: u64,
    /// The output text; `completion_tokens` is its character count.
    pub text: &'a str,
    /// Characters per SSE content event.
    pub stream_interval: usize,
    /// Corrupted usage counts (fault mode).
    pub usage_fault: Option<UsageFault>,
    /// Every Nth content frame malformed (fault mode).
    pub malformed_every: Option<u64>,
}

/// A response cut where a streaming server would pause: `pieces[0]` is the head (and, when not
/// streaming, the whole body); then one piece per content event (an HTTP chunk each); then the
/// last chunk with the chunked terminator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The pieces, to be written in order.
    pub pieces: Vec<Vec<u8>>,
}

impl Rendered {
    /// All pieces joined.
    pub fn concat(&self) -> Vec<u8> {
        self.pieces.concat()
    }
}

/// Renders a reply.
pub fn render(reply: &Reply<'_>) -> Rendered {
    if reply.stream {
        render_stream(reply)
    } else {
        let body = match reply.route {
            Route::Chat => chat_body(reply),
            Route::Completions => completions_body(reply),
            Route::Generate => generate_frame(reply, reply.text, reply.text, true),
        };
        Rendered { pieces: vec![json_response(200, "OK", &body, true)] }
    }
}

fn render_stream(reply: &Reply<'_>) -> Rendered {
    let events = split_chars(reply.text, reply.stream_interval.max(1));
    let mut pieces = vec![SSE_HEAD.as_bytes().to_vec()];
    let mut tail = String::new();
    let mut done_chars = 0usize;
    let content_count = match reply.route {
        // SGLang's last content frame carries the finish reason, so it goes in the tail.
        Route::Generate => events.len().saturating_sub(1),
        _ => events.len(),
    };
    for (i, event) in events.iter().enumerate().take(content_count) {
        done_chars += event.len();
        let malformed = reply.malformed_every.is_some_and(|n| (i as u64 + 1) % n.max(1) == 0);
        let frame = if malformed {
            String::from_utf8_lossy(MALFORMED_FRAME).into_owned()
        } else {
            sse(&content_frame(reply, event, &reply.text[..done_chars]))
        };
        pieces.push(chunk(frame.as_bytes()));
    }
    match reply.route {
        Route::Generate => {
            let delta = events.last().copied().unwrap_or("");
            tail.push_str(&sse(&generate_frame(reply, reply.text, delta, true)));
        }
        _ => {
            tail.push_str(&sse(&finish_frame(reply)));
            if reply.usage_frame {
                if let Some(usage) = usage_json(reply) {
                    tail.push_str(&sse(&format!(
                        "{},\"choices\":[],\"usage\":{usage}}}",
                        chunk_prefix(reply)
                    )));
                }
            }
        }
    }
    tail.push_str("data: [DONE]\n\n");
    let mut last = chunk(tail.as_bytes());
    last.extend_from_slice(b"0\r\n\r\n");
    pieces.push(last);
    Rendered { pieces }
}

/// One HTTP chunk: hex length, CRLF, data, CRLF.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

pub(crate) fn sse(json: &str) -> String {
    format!("data: {json}\n\n")
}

/// Adds header lines (each ending `\r\n`) to a response head, after its status line.
pub(crate) fn insert_headers(head: &mut Vec<u8>, lines: &str) {
    if let Some(line_end) = memchr::memmem::find(head, b"\r\n") {
        head.splice(line_end + 2..line_end + 2, lines.bytes());
    }
}

/// A complete JSON response with head.
pub fn json_response(status: u16, reason: &str, body: &str, keep_alive: bool) -> Vec<u8> {
    let connection = if keep_alive { "keep-alive" } else { "close" };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: {connection}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// An OpenAI-shaped JSON error response.
pub fn error_response(status: u16, message: &str, keep_alive: bool) -> Vec<u8> {
    let (reason, kind) = match status {
        400 => ("Bad Request", "invalid_request_error"),
        404 => ("Not Found", "not_found_error"),
        429 => ("Too Many Requests", "rate_limit_error"),
        503 => ("Service Unavailable", "server_error"),
        _ => ("Internal Server Error", "server_error"),
    };
    let body = format!(
        "{{\"error\":{{\"message\":{},\"type\":\"{kind}\",\"code\":{status}}}}}",
        json_str(message)
    );
    json_response(status, reason, &body, keep_alive)
}

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string())
}

fn split_chars(text: &str, interval: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut count = 0;
    for (i, _) in text.char_indices() {
        if count == interval {
            out.push(&text[start..i]);
            start = i;
            count = 0;
        }
        count += 1;
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

fn completion_tokens(reply: &Reply<'_>) -> u64 {
    reply.text.chars().count() as u64
}

fn count(n: u64, fault: Option<UsageFault>) -> String {
    match fault {
        None | Some(UsageFault::Missing) => n.to_string(),
        Some(UsageFault::Bool) => "true".to_string(),
        Some(UsageFault::Float) => format!("{n}.5"),
        Some(UsageFault::String) => format!("\"{n}\""),
        Some(UsageFault::Negative) => format!("-{}", n + 1),
        Some(UsageFault::Huge) => (10_000_001 + n).to_string(),
    }
}

/// The usage object, or `None` when the usage fault removes it.
fn usage_json(reply: &Reply<'_>) -> Option<String> {
    usage_json_with(reply, completion_tokens(reply))
}

/// The usage object with `completion` tokens (an answer whose output is not `reply.text`).
pub(crate) fn usage_json_with(reply: &Reply<'_>, completion: u64) -> Option<String> {
    if reply.usage_fault == Some(UsageFault::Missing) {
        return None;
    }
    let (p, c) = (reply.prompt_tokens, completion);
    let f = reply.usage_fault;
    Some(format!(
        "{{\"prompt_tokens\":{},\"completion_tokens\":{},\"total_tokens\":{}}}",
        count(p, f),
        count(c, f),
        count(p + c, f)
    ))
}

pub(crate) fn head_fields(reply: &Reply<'_>, object: &str) -> String {
    format!(
        "{{\"id\":\"r\",\"object\":\"{object}\",\"created\":{},\"model\":{}",
        reply.created_unix_s,
        json_str(reply.model)
    )
}

pub(crate) fn chunk_prefix(reply: &Reply<'_>) -> String {
    match reply.route {
        Route::Completions => head_fields(reply, "text_completion"),
        _ => head_fields(reply, "chat.completion.chunk"),
    }
}

fn with_usage(mut body: String, reply: &Reply<'_>, trailer: &str) -> String {
    if let Some(usage) = usage_json(reply) {
        let _ = write!(body, ",\"usage\":{usage}");
    }
    body.push_str(trailer);
    body
}

fn chat_body(reply: &Reply<'_>) -> String {
    let mut body = head_fields(reply, "chat.completion");
    let _ = write!(
        body,
        ",\"choices\":[{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":{},\
         \"refusal\":null}},\"finish_reason\":\"stop\"}}]",
        json_str(reply.text)
    );
    with_usage(body, reply, ",\"system_fingerprint\":null}")
}

fn completions_body(reply: &Reply<'_>) -> String {
    let mut body = head_fields(reply, "text_completion");
    let _ = write!(
        body,
        ",\"choices\":[{{\"index\":0,\"text\":{},\"logprobs\":null,\"finish_reason\":\"stop\"}}]",
        json_str(reply.text)
    );
    with_usage(body, reply, "}")
}

fn content_frame(reply: &Reply<'_>, delta: &str, cumulative: &str) -> String {
    let mut out = chunk_prefix(reply);
    match reply.route {
        Route::Chat => {
            let _ = write!(
                out,
                ",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{}}},\
                 \"finish_reason\":null}}]}}",
                json_str(delta)
            );
        }
        Route::Completions => {
            let _ = write!(
                out,
                ",\"choices\":[{{\"index\":0,\"text\":{},\"logprobs\":null,\
                 \"finish_reason\":null}}]}}",
                json_str(delta)
            );
        }
        Route::Generate => return generate_frame(reply, cumulative, delta, false),
    }
    out
}

fn finish_frame(reply: &Reply<'_>) -> String {
    let mut out = chunk_prefix(reply);
    match reply.route {
        Route::Completions => out.push_str(
            ",\"choices\":[{\"index\":0,\"text\":\"\",\"logprobs\":null,\
             \"finish_reason\":\"stop\"}]}",
        ),
        _ => out.push_str(",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}"),
    }
    out
}

/// An SGLang `/generate` object: cumulative `text`, the `delta`'s ids (one id per character,
/// its Unicode scalar value), and `meta_info` with cumulative counts.
fn generate_frame(reply: &Reply<'_>, cumulative: &str, delta: &str, finished: bool) -> String {
    let mut out = format!("{{\"text\":{},\"output_ids\":[", json_str(cumulative));
    for (i, c) in delta.chars().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}", c as u32);
    }
    let finish = if finished { "{\"type\":\"stop\"}" } else { "null" };
    let _ = write!(out, "],\"meta_info\":{{\"id\":\"r\",\"finish_reason\":{finish}");
    let f = reply.usage_fault;
    let done = cumulative.chars().count() as u64;
    if f != Some(UsageFault::Missing) {
        let _ = write!(out, ",\"prompt_tokens\":{}", count(reply.prompt_tokens, f));
    }
    out.push_str(",\"weight_version\":\"default\",\"total_retractions\":0");
    if f != Some(UsageFault::Missing) {
        let _ = write!(out, ",\"completion_tokens\":{}", count(done, f));
    }
    out.push_str(",\"cached_tokens\":0,\"e2e_latency\":0.0}}");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(route: Route, stream: bool, usage: bool, text: &str) -> Reply<'_> {
        Reply {
            route,
            stream,
            usage_frame: usage,
            model: "max-tp",
            created_unix_s: 0,
            prompt_tokens: 10,
            text,
            stream_interval: 10,
            usage_fault: None,
            malformed_every: None,
        }
    }

    #[test]
    fn reference_sizes_at_160_chars() {
        let text = "x".repeat(160);
        // The reference's sizes carry a 10-digit `created`; ours is 0 here (9 digits fewer per
        // object: 1 in the plain body, 17 in the stream).
        let plain = render(&reply(Route::Chat, false, false, &text)).concat();
        assert_eq!(plain.len() + 9, 535);
        let stream = render(&reply(Route::Chat, true, false, &text));
        assert_eq!(stream.pieces.len(), 1 + 16 + 1);
        assert_eq!(stream.concat().len() + 17 * 9, 3069);
    }

    #[test]
    fn splits_by_characters_not_bytes() {
        assert_eq!(split_chars("aé€bc", 2), vec!["aé", "€b", "c"]);
        assert_eq!(split_chars("", 3), Vec::<&str>::new());
        assert_eq!(split_chars("abc", 3), vec!["abc"]);
    }
}
