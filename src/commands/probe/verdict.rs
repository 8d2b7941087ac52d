//! The probe's decisions, as pure functions over what its requests got back: how a server
//! chunks its streams (and whether it bursts them), whether it honours
//! `stream_options.include_usage`, how far client and server token counts differ, and which
//! token basis to trust.

use serde::Serialize;

use super::client::EventAt;

/// Content events that arrive less than this after the one before came in one burst: events
/// of one read share its stamp (gap 0), and the reads of a stream written at once follow each
/// other within microseconds, while a model that streams spaces its tokens by milliseconds.
/// Measured on loopback (debug build; docs/CLI.md "Probe" has the runs): the echo stub's
/// streams show gaps of 0, a 400-event max-throughput stream one stall of 13-25 ms among 399
/// gaps of 0, and the variable stub paced at 1 ms an event a gap median of 0.99 ms.
pub const BURST_GAP_NS: u64 = 100_000;

/// Gaps between successive content-bearing events of one stream.
pub fn content_gaps_ns(events: &[EventAt]) -> Vec<u64> {
    let stamps: Vec<u64> = events.iter().filter(|e| e.content).map(|e| e.at_ns).collect();
    stamps.windows(2).map(|w| w[1].saturating_sub(w[0])).collect()
}

/// The share of a stream's content-event gaps shorter than `BURST_GAP_NS`; `None` with fewer
/// than two content events (no gap to judge). A share of gaps, not a time window, so one stall
/// inside a burst (a delayed TCP segment) does not hide it.
pub fn burst_share(events: &[EventAt]) -> Option<f64> {
    let gaps = content_gaps_ns(events);
    if gaps.is_empty() {
        return None;
    }
    let short = gaps.iter().filter(|&&g| g < BURST_GAP_NS).count();
    Some(short as f64 / gaps.len() as f64)
}

/// Most of a stream in one burst: TTFT is then about the latency and TPOT means little.
pub fn is_burst(share: f64) -> bool {
    share > 0.5
}

/// How the probe's streams arrived.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Chunking {
    pub streams: u32,
    /// SSE data events per stream (median).
    pub events_median: f64,
    /// Of them, events that carried output text (median).
    pub content_events_median: f64,
    /// Gaps between content events over all streams, milliseconds.
    pub gap_ms_median: Option<f64>,
    pub gap_ms_max: Option<f64>,
    /// Streams that arrived mostly in one burst, of those with two content events or more.
    pub bursting_streams: u32,
    pub judged_streams: u32,
    /// Most judged streams burst; `None` when no stream had two content events.
    pub bursting: Option<bool>,
}

/// The chunking of a few streams (their events in arrival order).
pub fn chunking(streams: &[&[EventAt]]) -> Chunking {
    let counts: Vec<f64> = streams.iter().map(|s| s.len() as f64).collect();
    let contents: Vec<f64> =
        streams.iter().map(|s| s.iter().filter(|e| e.content).count() as f64).collect();
    let gaps: Vec<f64> =
        streams.iter().flat_map(|s| content_gaps_ns(s)).map(|g| g as f64 / 1e6).collect();
    let shares: Vec<f64> = streams.iter().filter_map(|s| burst_share(s)).collect();
    let bursting_streams = shares.iter().filter(|&&s| is_burst(s)).count() as u32;
    let judged_streams = shares.len() as u32;
    Chunking {
        streams: streams.len() as u32,
        events_median: median(&counts).unwrap_or(0.0),
        content_events_median: median(&contents).unwrap_or(0.0),
        gap_ms_median: median(&gaps),
        gap_ms_max: gaps.iter().copied().reduce(f64::max),
        bursting_streams,
        judged_streams,
        bursting: (judged_streams > 0).then_some(2 * bursting_streams > judged_streams),
    }
}

/// The median (the mean of the middle two for an even count); `None` for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Whether streams carry the server's token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamUsage {
    /// A stream asked for usage got it (SGLang: `meta_info` counts).
    Honoured,
    /// The stream succeeded without usage.
    Absent,
    /// The request with `stream_options` got a 4xx and the same stream without it succeeded.
    Rejected,
    /// Streaming failed (or was not tried): nothing is known.
    Unknown,
}

/// What one streaming attempt came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamTry {
    pub status: u16,
    pub ok: bool,
    /// The answer carried `completion_tokens`.
    pub usage: bool,
}

/// Classifies usage on streams from the first stream (asked for usage where the API can) and,
/// when that one got a 4xx, the same stream without `stream_options`.
pub fn stream_usage(asked: Option<StreamTry>, retried: Option<StreamTry>) -> StreamUsage {
    match (asked, retried) {
        (Some(a), _) if a.ok && a.usage => StreamUsage::Honoured,
        (Some(a), _) if a.ok => StreamUsage::Absent,
        (Some(a), Some(r)) if (400..500).contains(&a.status) && r.ok => StreamUsage::Rejected,
        _ => StreamUsage::Unknown,
    }
}

/// Client against server output tokens over the probe's own answers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct OslCheck {
    pub answers: u32,
    /// Mean of client − server tokens per answer.
    pub mean_diff: f64,
    pub max_abs_diff: u32,
}

/// The OSL check over (client, server) pairs; `None` without a pair.
pub fn osl_check(pairs: &[(u32, u32)]) -> Option<OslCheck> {
    if pairs.is_empty() {
        return None;
    }
    let diffs: Vec<i64> = pairs.iter().map(|&(c, s)| i64::from(c) - i64::from(s)).collect();
    Some(OslCheck {
        answers: pairs.len() as u32,
        mean_diff: diffs.iter().sum::<i64>() as f64 / diffs.len() as f64,
        max_abs_diff: diffs.iter().map(|d| d.unsigned_abs()).max().unwrap_or(0) as u32,
    })
}

/// Output tokens a client may differ from the server by and still agree (a detokenize and
/// re-tokenize round trip can merge or split one token at the edges).
pub const OSL_AGREE_TOKENS: u32 = 1;

/// Which token basis a benchmark of this endpoint should trust, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Basis {
    /// `client` or `server`, as `--token-count-source` spells them.
    pub source: &'static str,
    pub why: String,
}

/// The basis rule: the server's counts when its streams carry them (they count what the model
/// read and wrote), else the client's tokenizer, saying what a server basis would hit.
pub fn basis(usage: StreamUsage, status: Option<u16>, osl: Option<&OslCheck>) -> Basis {
    let client = |why: String| Basis { source: "client", why };
    let server = |why: String| Basis { source: "server", why };
    match usage {
        StreamUsage::Rejected => client(format!(
            "the server rejects stream_options (HTTP {}), so streaming benchmarks need \
             --no-stream-include-usage and get no server counts",
            status.unwrap_or(400)
        )),
        StreamUsage::Absent => client(
            "the server sends no usage on streams (--token-count-source server would fail)".into(),
        ),
        StreamUsage::Unknown => client(
            "no stream succeeded, so whether streams carry usage is unknown (--token-count-source \
             server is untested)"
                .into(),
        ),
        StreamUsage::Honoured => match osl {
            Some(o) if o.max_abs_diff <= OSL_AGREE_TOKENS => server(format!(
                "the server reports usage on streams and it matches the tokenizer within \
                 {OSL_AGREE_TOKENS} token"
            )),
            Some(o) => server(format!(
                "the server reports usage on streams; the tokenizer differs from it by up to {} \
                 tokens an answer, so the client basis counts with another tokenizer (check \
                 --tokenizer)",
                o.max_abs_diff
            )),
            None => server(
                "the server reports usage on streams (give --tokenizer to check it against the \
                 client's counts)"
                    .into(),
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(stamps_ms: &[f64]) -> Vec<EventAt> {
        stamps_ms.iter().map(|&t| EventAt { at_ns: (t * 1e6) as u64, content: true }).collect()
    }

    #[test]
    fn a_stream_written_at_once_is_a_burst_and_a_paced_one_is_not() {
        let mut stalled: Vec<f64> = (0..200).map(|i| 5.0 + i as f64 * 0.001).collect();
        stalled.extend((0..200).map(|i| 45.0 + i as f64 * 0.001));
        let cases: [(&[f64], Option<bool>); 8] = [
            (&[10.0, 10.01, 10.02, 10.03], Some(true)),
            (&[10.0, 10.0, 10.0, 10.0], Some(true)),
            // A 40 ms stall (a delayed segment) in the middle of a burst.
            (&stalled, Some(true)),
            // The first token on time, the rest in one burst: TPOT still means nothing.
            (&[1.0, 30.0, 30.01, 30.02, 30.03], Some(true)),
            (&[0.0, 20.0, 40.0, 60.0], Some(false)),
            (&[0.0, 20.0, 40.0, 40.5], Some(false)),
            (&[0.0, 1.0, 2.0, 3.0], Some(false)),
            (&[5.0], None),
        ];
        for (stamps, want) in cases {
            let got = burst_share(&events(stamps)).map(is_burst);
            assert_eq!(got, want, "{stamps:?}");
        }
    }

    #[test]
    fn events_without_content_are_neither_gaps_nor_burst() {
        let mut ev = events(&[0.0, 20.0, 40.0]);
        ev.push(EventAt { at_ns: 40_000_100, content: false });
        ev.push(EventAt { at_ns: 40_000_200, content: false });
        assert_eq!(content_gaps_ns(&ev), vec![20_000_000, 20_000_000]);
        assert_eq!(burst_share(&ev).map(is_burst), Some(false));
        let c = chunking(&[&ev, &ev]);
        assert_eq!((c.streams, c.events_median, c.content_events_median), (2, 5.0, 3.0));
        assert_eq!(
            (c.gap_ms_median, c.gap_ms_max, c.bursting),
            (Some(20.0), Some(20.0), Some(false))
        );
    }

    #[test]
    fn most_streams_decide_bursting() {
        let burst = events(&[0.0, 0.01, 0.02]);
        let paced = events(&[0.0, 10.0, 20.0]);
        assert_eq!(chunking(&[&burst, &burst, &paced]).bursting, Some(true));
        assert_eq!(chunking(&[&burst, &paced, &paced]).bursting, Some(false));
        assert_eq!(chunking(&[&events(&[1.0])]).bursting, None);
        assert_eq!(median(&[3.0, 1.0, 2.0, 10.0]), Some(2.5));
    }

    #[test]
    fn stream_usage_tells_rejection_from_absence() {
        let t = |status, ok, usage| Some(StreamTry { status, ok, usage });
        let cases = [
            (t(200, true, true), None, StreamUsage::Honoured),
            (t(200, true, false), None, StreamUsage::Absent),
            (t(400, false, false), t(200, true, false), StreamUsage::Rejected),
            (t(422, false, false), t(200, true, false), StreamUsage::Rejected),
            (t(400, false, false), t(400, false, false), StreamUsage::Unknown),
            (t(500, false, false), None, StreamUsage::Unknown),
            (None, None, StreamUsage::Unknown),
        ];
        for (asked, retried, want) in cases {
            assert_eq!(stream_usage(asked, retried), want, "{asked:?} {retried:?}");
        }
    }

    #[test]
    fn the_basis_is_the_server_only_when_streams_carry_usage() {
        let agree = osl_check(&[(10, 10), (12, 11)]).unwrap();
        let differ = osl_check(&[(10, 14)]).unwrap();
        assert_eq!((agree.max_abs_diff, agree.mean_diff), (1, 0.5));
        let b = basis(StreamUsage::Honoured, None, Some(&agree));
        assert_eq!(b.source, "server");
        assert!(b.why.contains("matches the tokenizer within 1 token"), "{}", b.why);
        let b = basis(StreamUsage::Honoured, None, Some(&differ));
        assert!(b.source == "server" && b.why.contains("up to 4 tokens"), "{}", b.why);
        assert!(basis(StreamUsage::Honoured, None, None).why.contains("--tokenizer"));
        let b = basis(StreamUsage::Absent, None, Some(&agree));
        assert_eq!(b.source, "client");
        assert!(b.why.contains("no usage on streams"), "{}", b.why);
        let b = basis(StreamUsage::Rejected, Some(400), None);
        assert!(b.source == "client" && b.why.contains("HTTP 400"), "{}", b.why);
        assert_eq!(basis(StreamUsage::Unknown, None, None).source, "client");
        assert_eq!(osl_check(&[]), None);
    }
}
