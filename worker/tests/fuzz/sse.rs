//! Property-based fuzzing of the SSE framer (`http::sse::SseParser`) against a small decoder
//! written straight from the WHATWG "event stream interpretation" algorithm: any stream, split
//! anywhere, gives the same events. Cases: `PROPTEST_CASES` (proptest's default, 256, unset).

use loadgen_worker::http::sse::{SseItem, SseParser};
use proptest::prelude::*;

/// An event as both decoders report it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Item {
    Data(Vec<u8>),
    Done,
}

/// The WHATWG algorithm, byte by byte over the whole body, with the project's two documented
/// choices: a last line without its end still counts, and a pending event is dispatched at
/// the end of the body.
fn reference(body: &[u8]) -> Vec<Item> {
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut line = Vec::new();
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'\r' => {
                lines.push(std::mem::take(&mut line));
                if body.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
            }
            b'\n' => lines.push(std::mem::take(&mut line)),
            byte => line.push(byte),
        }
        i += 1;
    }
    if !line.is_empty() {
        lines.push(line);
    }
    let mut items = Vec::new();
    let mut data: Vec<u8> = Vec::new();
    let mut has_data = false;
    for line in lines.iter().chain(std::iter::once(&Vec::new())) {
        if line.is_empty() {
            if has_data {
                // "If the data buffer's last character is a LF, remove it."
                data.pop();
                classify(&data, &mut items);
            }
            data.clear();
            has_data = false;
            continue;
        }
        if line[0] == b':' {
            continue;
        }
        let (name, mut value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => (&line[..colon], &line[colon + 1..]),
            None => (&line[..], &[][..]),
        };
        if value.first() == Some(&b' ') {
            value = &value[1..];
        }
        if name == b"data" {
            data.extend_from_slice(value);
            data.push(b'\n');
            has_data = true;
        }
    }
    items
}

/// The project's reading of an event's data: a JSON object (after leading whitespace) goes to
/// the adapter, `[DONE]` ends the stream, anything else is ignored.
fn classify(data: &[u8], items: &mut Vec<Item>) {
    let start = data.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(data.len());
    let data = &data[start..];
    if data.first() == Some(&b'{') {
        items.push(Item::Data(data.to_vec()));
    } else if data.trim_ascii_end() == b"[DONE]" {
        items.push(Item::Done);
    }
}

/// The parser's events for `body` delivered in the pieces that `cuts` (sorted) make.
fn parse(body: &[u8], cuts: &[usize], max_event_bytes: usize) -> Vec<Item> {
    let mut parser = SseParser::new(max_event_bytes);
    let mut items = Vec::new();
    let mut sink = |item: SseItem<'_>| {
        items.push(match item {
            SseItem::Data(d) => Item::Data(d.to_vec()),
            SseItem::Done => Item::Done,
        })
    };
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&body.len())) {
        parser.feed(&body[at..cut], &mut sink);
        at = cut;
    }
    parser.finish(&mut sink);
    items
}

/// Pieces SSE streams are made of, so generated streams reach every rule.
const TOKENS: &[&str] = &[
    "data:",
    "data: ",
    "data",
    "dat",
    "DATA:",
    ":",
    ": ping",
    " ",
    "event: message",
    "id: 7",
    "retry: 10",
    "{",
    "}",
    "{\"k\":1}",
    "{\"s\":\"a:b\"}",
    "[DONE]",
    "[DONE] ",
    "x",
    "é",
    "\r",
    "\n",
    "\r\n",
    "\n\n",
    "\r\r",
    "\u{feff}",
];

fn stream() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        8 => prop::sample::select(TOKENS).prop_map(|t| t.as_bytes().to_vec()),
        1 => any::<u8>().prop_map(|b| vec![b]),
    ];
    prop::collection::vec(piece, 0..48).prop_map(|pieces| pieces.concat())
}

/// A body and up to five cut points in it.
fn body_and_cuts(
    body: impl Strategy<Value = Vec<u8>>,
) -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
    body.prop_flat_map(|body| {
        let len = body.len();
        (Just(body), super::support::cuts_for(len))
    })
}

proptest! {
    #![proptest_config(super::support::config("fuzz_sse.txt"))]

    #[test]
    fn sse_framing_equals_the_whatwg_reference_at_any_split((body, cuts) in body_and_cuts(stream())) {
        prop_assert_eq!(parse(&body, &cuts, 1 << 20), reference(&body));
    }

    #[test]
    fn sse_framing_of_arbitrary_bytes_equals_the_reference(
        (body, cuts) in body_and_cuts(prop::collection::vec(any::<u8>(), 0..256))
    ) {
        prop_assert_eq!(parse(&body, &cuts, 1 << 20), reference(&body));
    }

    #[test]
    fn a_small_event_limit_only_drops_events(
        (body, cuts) in body_and_cuts(stream()), limit in 1usize..64
    ) {
        // Dropping is per event: whatever survives is an event the reference also gives.
        let full = reference(&body);
        let kept = parse(&body, &cuts, limit);
        let mut rest = full.iter();
        for item in &kept {
            prop_assert!(rest.any(|f| f == item), "{:?} not in {:?}", item, full);
        }
    }
}

/// The committed seed streams (`tests/corpus/sse/`), each whole, byte by byte and at every
/// single split.
#[test]
fn sse_corpus_parses_as_the_reference_at_every_split() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/sse");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let body = std::fs::read(&path).unwrap();
        let want = reference(&body);
        assert!(!want.is_empty(), "{} holds no event", path.display());
        let bytes: Vec<usize> = (1..body.len()).collect();
        assert_eq!(parse(&body, &bytes, 1 << 20), want, "{} byte by byte", path.display());
        for cut in 0..=body.len() {
            assert_eq!(parse(&body, &[cut], 1 << 20), want, "{} cut at {cut}", path.display());
        }
        seen += 1;
    }
    assert!(seen >= 4, "the corpus is in {}", dir.display());
}
