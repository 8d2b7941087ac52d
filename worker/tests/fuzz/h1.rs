//! Property-based fuzzing of the HTTP/1.1 response parser (`http::h1::ResponseReader`): a
//! generated response, split anywhere, parses to what it was made of and to what a small
//! whole-buffer reference decoder reads; arbitrary and damaged bytes never panic and parse the
//! same however they are split. Cases: `PROPTEST_CASES` (proptest's default, 256, unset).

use loadgen_worker::http::h1::{H1Error, ResponseReader};
use proptest::prelude::*;

/// What a response parse gives: (status, close, event stream, body, ended), or the error.
type Parsed = Result<(u16, bool, bool, Vec<u8>, bool), H1Error>;

/// Feeds `wire` in the pieces `cuts` makes, the way a connection does: unconsumed bytes stay
/// buffered and are offered again with the next read. At the end a close-delimited body ends.
fn parse(wire: &[u8], cuts: &[usize]) -> Parsed {
    let mut reader = ResponseReader::new();
    let mut body = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&wire.len())) {
        buf.extend_from_slice(&wire[at..cut]);
        at = cut;
        loop {
            let p = reader.feed(&buf, &mut |b| body.extend_from_slice(b))?;
            buf.drain(..p.consumed);
            if p.done {
                let h = reader.head();
                return Ok((h.status, h.close, h.event_stream, body, true));
            }
            if p.consumed == 0 {
                break;
            }
        }
    }
    let h = reader.head();
    Ok((h.status, h.close, h.event_stream, body, reader.ends_at_close()))
}

/// A response as the generator made it.
#[derive(Clone, Debug)]
struct Model {
    http10: bool,
    status: u16,
    framing: Framing,
    /// (name, value) headers besides the framing header.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Chunk sizes (chunked framing), summing to the body's length.
    chunks: Vec<usize>,
    extensions: bool,
    trailers: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Framing {
    Length,
    Chunked,
    UntilClose,
}

impl Model {
    fn has_body(&self) -> bool {
        !matches!(self.status, 100..=199 | 204 | 304)
    }

    fn wire(&self) -> Vec<u8> {
        let version = if self.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
        let mut out = format!("{version} {} Reason\r\n", self.status).into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
        match self.framing {
            Framing::Length => {
                out.extend_from_slice(format!("Content-Length: {}\r\n", self.body.len()).as_bytes())
            }
            Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
            Framing::UntilClose => {}
        }
        out.extend_from_slice(b"\r\n");
        if !self.has_body() {
            return out;
        }
        if self.framing != Framing::Chunked {
            out.extend_from_slice(&self.body);
            return out;
        }
        let mut at = 0;
        for (i, &size) in self.chunks.iter().enumerate() {
            let size_line = if i % 2 == 0 { format!("{size:x}") } else { format!("{size:X}") };
            out.extend_from_slice(size_line.as_bytes());
            if self.extensions {
                out.extend_from_slice(b";name=value");
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(&self.body[at..at + size]);
            out.extend_from_slice(b"\r\n");
            at += size;
        }
        out.extend_from_slice(b"0\r\n");
        if self.trailers {
            out.extend_from_slice(b"X-Trailer: done\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out
    }

    /// What the parser must report.
    fn expected(&self) -> Parsed {
        let header = |name: &str, token: &str| {
            self.headers.iter().any(|(n, v)| {
                n.eq_ignore_ascii_case(name)
                    && v.split([',', ';']).any(|t| t.trim().eq_ignore_ascii_case(token))
            })
        };
        let mut close = self.http10;
        if header("connection", "close") {
            close = true;
        } else if header("connection", "keep-alive") {
            close = false;
        }
        let until_close = self.has_body() && self.framing == Framing::UntilClose;
        let body = if self.has_body() { self.body.clone() } else { Vec::new() };
        let event_stream = self
            .headers
            .iter()
            .rfind(|(n, _)| n.eq_ignore_ascii_case("content-type"))
            .is_some_and(|(_, v)| v.split([',', ';']).any(|t| t.trim() == "text/event-stream"));
        Ok((self.status, close || until_close, event_stream, body, true))
    }
}

/// A whole-buffer reference decoder: the head up to its blank line, split into lines and at
/// colons, then the body by Content-Length, chunks or the close.
fn reference(wire: &[u8]) -> Option<(u16, Vec<u8>)> {
    let end = wire.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&wire[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let (mut length, mut chunked) = (None, false);
    for line in lines {
        let (name, value) = line.split_once(':')?;
        if name.eq_ignore_ascii_case("content-length") {
            length = Some(value.trim().parse::<usize>().ok()?);
        }
        chunked |= name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked");
    }
    let rest = &wire[end + 4..];
    if matches!(status, 100..=199 | 204 | 304) {
        return Some((status, Vec::new()));
    }
    if !chunked {
        return Some((status, rest[..length.unwrap_or(rest.len())].to_vec()));
    }
    let (mut body, mut at) = (Vec::new(), 0);
    loop {
        let nl = at + rest[at..].windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&rest[at..nl]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        at = nl + 2;
        if size == 0 {
            return Some((status, body));
        }
        body.extend_from_slice(&rest[at..at + size]);
        at += size + 2;
    }
}

fn header() -> impl Strategy<Value = (String, String)> {
    const NAMES: &[&str] = &[
        "Content-Type",
        "content-type",
        "Connection",
        "CONNECTION",
        "X-Request-Id",
        "Server",
        "Date",
        "Cache-Control",
        "Vary",
    ];
    const VALUES: &[&str] = &[
        "text/event-stream",
        "application/json",
        "text/event-stream; charset=utf-8",
        "close",
        "keep-alive",
        "Keep-Alive, Upgrade",
        "no-cache",
        "abc-123",
        "",
    ];
    (prop::sample::select(NAMES), prop::sample::select(VALUES))
        .prop_map(|(n, v)| (n.to_string(), v.to_string()))
}

fn model() -> impl Strategy<Value = Model> {
    let framing =
        prop::sample::select(&[Framing::Length, Framing::Chunked, Framing::UntilClose][..]);
    let status = prop::sample::select(&[200u16, 201, 204, 304, 404, 429, 500, 503][..]);
    (
        any::<bool>(),
        status,
        framing,
        prop::collection::vec(header(), 0..12),
        prop::collection::vec(any::<u8>(), 0..300),
        prop::collection::vec(1usize..64, 0..20),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(http10, status, framing, headers, body, sizes, extensions, trailers)| {
            // Chunk sizes that sum to the body's length.
            let mut chunks = Vec::new();
            let mut left = body.len();
            for size in sizes.into_iter().chain(std::iter::repeat(64)) {
                if left == 0 {
                    break;
                }
                chunks.push(size.min(left));
                left -= size.min(left);
            }
            Model { http10, status, framing, headers, body, chunks, extensions, trailers }
        })
}

proptest! {
    #![proptest_config(super::support::config("fuzz_h1.txt"))]

    #[test]
    fn generated_responses_parse_as_made_at_any_split(
        (model, cuts) in model().prop_flat_map(|m| {
            let len = m.wire().len();
            (Just(m), super::support::cuts_for(len))
        })
    ) {
        let wire = model.wire();
        let parsed = parse(&wire, &cuts);
        prop_assert_eq!(&parsed, &model.expected(), "{}", String::from_utf8_lossy(&wire));
        let (status, body) = reference(&wire).expect("the reference reads every generated response");
        let (got_status, _, _, got_body, _) = parsed.unwrap();
        prop_assert_eq!((got_status, got_body), (status, body));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_parse_the_same_at_any_split(
        (wire, cuts) in prop::collection::vec(any::<u8>(), 0..512)
            .prop_flat_map(|w| { let len = w.len(); (Just(w), super::support::cuts_for(len)) })
    ) {
        prop_assert_eq!(parse(&wire, &cuts), parse(&wire, &[]));
    }

    #[test]
    fn damaged_responses_never_panic_and_parse_the_same_at_any_split(
        (wire, cuts) in (model(), prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6))
            .prop_map(|(m, damage)| {
                let mut wire = m.wire();
                for (at, byte) in damage {
                    let i = at.index(wire.len());
                    wire[i] = byte;
                }
                wire
            })
            .prop_flat_map(|w| { let len = w.len(); (Just(w), super::support::cuts_for(len)) })
    ) {
        prop_assert_eq!(parse(&wire, &cuts), parse(&wire, &[]));
    }
}
