//! Timing fidelity: the client's TTFT, TPOT and chunk gaps against the server's own, for a stub
//! with fixed delays. The truth is what the stub did, by its own stamps (`StubConfig::send_log`:
//! when it had each request and when it wrote each piece, CLOCK_MONOTONIC as the client's), not
//! the delays it was configured with: on a busy machine the stub's timers fire late, and a test
//! against the configuration would then blame the client for the stub's lateness. So each
//! sample's error is the client's figure minus the stub's for the same request; what is left is
//! the client's own delay (its write and read, the loopback), which the test bounds.
//!
//! These tests run alone (`support::gate`): on a small machine, other runs in parallel would
//! measure the machine's contention, not the client.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::support::{alone, report_dir, Run};
use loadgen_stubs::{SentResponse, StubConfig, StubKind, StubServer};

const TTFT_MS: f64 = 100.0;
const PER_TOKEN_MS: f64 = 2.0;
/// Characters (char tokenizer: tokens) of every output, one a chunk.
const OUTPUT_CHARS: usize = 20;

/// One sample by the client's stamps (events.jsonl) and the stub's (its send log).
#[derive(Debug)]
struct Pair {
    issued_ns: u64,
    first_ns: u64,
    complete_ns: u64,
    /// The gaps between the client's content chunks (`chunk_delta_ns` of `sample.complete`).
    gaps_ns: Vec<u64>,
    stub: SentResponse,
}

impl Pair {
    fn stub_first_ns(&self) -> u64 {
        // Piece 0 is the head, written with the first content event (piece 1).
        self.stub.written_ns[1]
    }
    fn stub_last_ns(&self) -> u64 {
        *self.stub.written_ns.last().unwrap()
    }
    /// The client's TTFT minus the stub's own (request whole → first event written), ms.
    fn ttft_error_ms(&self) -> f64 {
        let client = self.first_ns as f64 - self.issued_ns as f64;
        let stub = self.stub_first_ns() as f64 - self.stub.received_ns as f64;
        (client - stub) / 1e6
    }
    /// The stub's gaps between its content events (pieces 1..=20; the tail goes with the last).
    fn stub_gaps_ns(&self) -> Vec<u64> {
        self.stub.written_ns[1..=OUTPUT_CHARS].windows(2).map(|w| w[1] - w[0]).collect()
    }
    /// The client's TPOT minus the stub's (first event → last event written, per token), ms.
    fn tpot_error_ms(&self) -> f64 {
        let client = self.complete_ns as f64 - self.first_ns as f64;
        let stub = self.stub_last_ns() as f64 - self.stub_first_ns() as f64;
        (client - stub) / 1e6 / (OUTPUT_CHARS - 1) as f64
    }
}

/// The "lower" median, as the summary's percentiles take it.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

/// The prompt of a chat request body (its user message).
fn prompt_of(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).expect("a JSON request body");
    let messages = v["messages"].as_array().expect("a chat request");
    let user = messages.iter().find(|m| m["role"] == "user").expect("a user message");
    user["content"].as_str().expect("a text prompt").to_string()
}

/// Pairs every sample of events.jsonl with the stub's response to its request, by prompt (in
/// issue order among equal prompts).
fn pairs(dir: &std::path::Path, sent: Vec<SentResponse>) -> Vec<Pair> {
    let mut by_prompt: HashMap<String, VecDeque<SentResponse>> = HashMap::new();
    for response in sent {
        by_prompt.entry(prompt_of(&response.body)).or_default().push_back(response);
    }
    let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let mut samples: HashMap<String, (u64, String, u64, u64, Vec<u64>)> = HashMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let uuid = v["sample_uuid"].as_str().unwrap_or_default().to_string();
        let at = v["timestamp_ns"].as_u64().unwrap_or_default();
        let entry = samples.entry(uuid).or_default();
        match v["event_type"].as_str().unwrap_or_default() {
            "sample.issued" => (entry.0, entry.1) = (at, v["data"][1].as_str().unwrap().into()),
            "sample.recv_first" => entry.2 = at,
            "sample.complete" => {
                entry.3 = at;
                let gaps = v["chunk_delta_ns"].as_array().expect("a streamed sample's gaps");
                entry.4 = gaps.iter().map(|g| g.as_u64().unwrap()).collect();
            }
            _ => {}
        }
    }
    let mut samples: Vec<_> = samples.into_values().filter(|s| !s.1.is_empty()).collect();
    samples.sort_by_key(|s| s.0);
    let pairs: Vec<Pair> = samples
        .into_iter()
        .map(|(issued_ns, prompt, first_ns, complete_ns, gaps_ns)| {
            let stub = by_prompt.get_mut(&prompt).and_then(VecDeque::pop_front);
            let stub = stub.unwrap_or_else(|| panic!("the stub never answered {prompt:?}"));
            Pair { issued_ns, first_ns, complete_ns, gaps_ns, stub }
        })
        .collect();
    assert!(
        by_prompt.values().all(VecDeque::is_empty),
        "the stub answered requests no sample made"
    );
    pairs
}

/// Runs `samples` streams against the variable stub under `pattern`; every sample's client
/// figures must stray from the stub's own by a median of at most `tolerance` of the truth (and
/// at least 0.1 ms is allowed), whatever the stub's timers did.
fn timing_fidelity(pattern: &[&str], samples: &str, name: &str, tolerance: f64) {
    let _alone = alone();
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut cfg = StubConfig::new(StubKind::Variable);
    {
        let c = &mut cfg;
        c.stream_interval = 1;
        c.variable.first_chunk_latency_s = TTFT_MS / 1000.0;
        c.variable.first_chunk_spread = 0.0;
        c.variable.inter_token_latency_ms = PER_TOKEN_MS;
        c.variable.inter_token_spread = 0.0;
        c.variable.output_len_mean = OUTPUT_CHARS as f64;
        c.variable.output_len_spread = 0.0;
        c.send_log = Some(log.clone());
    }
    let server = StubServer::start(cfg).expect("the stub starts");
    let dir = report_dir(name);
    let run = Run::online(&server.url(), &dir).model("test-model").dataset().workers(1);
    let run = run.samples(samples.parse().unwrap()).streaming(true).tokenizer();
    let out = run.args(pattern).run();
    assert_eq!(out.status.code(), Some(0));
    server.stop();
    let sent = std::mem::take(&mut *log.lock().unwrap());
    let n: u64 = samples.parse().unwrap();
    assert_eq!(sent.len() as u64, n, "{name}: one response a sample");
    let pairs = pairs(&dir, sent);
    assert_eq!(pairs.len() as u64, n, "{name}");
    check_pairs(name, &pairs, tolerance);
    check_summary(name, &dir, &pairs, n);
}

/// Per sample: the same clock on both sides, and the client's TTFT and TPOT against the stub's.
fn check_pairs(name: &str, pairs: &[Pair], tolerance: f64) {
    for p in pairs {
        assert_eq!(p.stub.written_ns.len(), OUTPUT_CHARS + 2, "{name}: head, events, tail");
        // The stub's timers never fire early (a check of the stub, which cannot flake).
        let stub_ttft_ms = (p.stub_first_ns() - p.stub.received_ns) as f64 / 1e6;
        assert!(stub_ttft_ms >= TTFT_MS, "{name}: the stub wrote early: {p:?}");
    }
    let bound = |truth_ms: f64| (truth_ms * tolerance).max(0.1);
    // The client's two lags, across the processes on their one clock: issue → the stub has the
    // request, and the stub wrote the first event → the client stamped it. Medians, so a
    // preempted process now and then does not decide; below -0.1 ms the clocks would differ.
    let lag_ms = |a: u64, b: u64| (b as f64 - a as f64) / 1e6;
    let send = median(pairs.iter().map(|p| lag_ms(p.issued_ns, p.stub.received_ns)).collect());
    let read = median(pairs.iter().map(|p| lag_ms(p.stub_first_ns(), p.first_ns)).collect());
    for (what, lag) in [("issue to the stub's read", send), ("stub's write to first chunk", read)] {
        assert!(
            (-0.1..=bound(TTFT_MS)).contains(&lag),
            "{name}: median lag {what} {lag:.3} ms (bound {:.3} ms)",
            bound(TTFT_MS)
        );
    }
    let ttft = median(pairs.iter().map(Pair::ttft_error_ms).collect());
    assert!(
        ttft.abs() <= bound(TTFT_MS),
        "{name}: TTFT median error {ttft:.3} ms against the stub's own (bound {:.3} ms)",
        bound(TTFT_MS)
    );
    let tpot = median(pairs.iter().map(Pair::tpot_error_ms).collect());
    assert!(
        tpot.abs() <= bound(PER_TOKEN_MS),
        "{name}: TPOT median error {tpot:.4} ms against the stub's own (bound {:.3} ms)",
        bound(PER_TOKEN_MS)
    );
    // Each chunk gap against the stub's gap between the same two events. A late read makes
    // one gap long and the next short by as much, so the median error stays the client's own.
    let mut gap_errors = Vec::new();
    for p in pairs {
        assert_eq!(p.gaps_ns.len(), OUTPUT_CHARS - 1, "{name}: one gap per chunk after the first");
        let stub = p.stub_gaps_ns();
        gap_errors.extend(p.gaps_ns.iter().zip(&stub).map(|(c, s)| (*c as f64 - *s as f64) / 1e6));
    }
    let itl = median(gap_errors);
    assert!(
        itl.abs() <= bound(PER_TOKEN_MS),
        "{name}: chunk gap median error {itl:.4} ms against the stub's own (bound {:.3} ms)",
        bound(PER_TOKEN_MS)
    );
}

/// The summary reports what the client's stamps say (its TTFT, TPOT and ITL medians are those
/// of events.jsonl), and the chunk structure of paced streams.
fn check_summary(name: &str, dir: &std::path::Path, pairs: &[Pair], n: u64) {
    let text = std::fs::read_to_string(dir.join("performance/result_summary.json")).unwrap();
    let s: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ns_ms = |ns: u64| ns as f64 / 1e6;
    let ttft = median(pairs.iter().map(|p| ns_ms(p.first_ns - p.issued_ns)).collect());
    let per_token = (OUTPUT_CHARS - 1) as f64;
    let tpot =
        median(pairs.iter().map(|p| ns_ms(p.complete_ns - p.first_ns) / per_token).collect());
    let itl = median(pairs.iter().flat_map(|p| p.gaps_ns.iter().map(|g| ns_ms(*g))).collect());
    for (key, want) in [("ttft", ttft), ("tpot", tpot), ("itl", itl)] {
        let got = s[key]["median"].as_f64().expect("a median") / 1e6;
        assert!(
            (got - want).abs() < 0.001,
            "{name}: {key} median {got:.4} ms, events say {want:.4}"
        );
    }
    // One token a chunk. A starved client may now and then read a whole stream at once, so
    // "most", not "all"; a client that buffered its reads would fail both.
    assert_eq!(s["chunks_per_sample"]["median"].as_f64(), Some(OUTPUT_CHARS as f64), "{name}");
    assert_eq!(s["tokens_per_chunk"]["median"].as_f64(), Some(1.0), "{name}");
    let multi = s["n_streams_multi_chunk"].as_u64().unwrap();
    let one_read = s["n_streams_in_one_read"].as_u64().unwrap();
    assert!(
        multi * 10 >= n * 9 && one_read * 10 <= n,
        "{name}: {multi} multi-chunk, {one_read} in one read"
    );
    let snap = std::fs::read_to_string(dir.join("metrics/final_snapshot.json")).unwrap();
    let snap: serde_json::Value = serde_json::from_str(&snap).unwrap();
    let gaps = snap["metrics"].as_array().unwrap().iter().find(|m| m["name"] == "chunk_delta_ns");
    let want = (OUTPUT_CHARS as u64 - 1) * n;
    assert_eq!(gaps.unwrap()["count"].as_u64(), Some(want), "{name}: gaps in the snapshot");
}

#[test]
fn timing_fidelity_at_low_load() {
    timing_fidelity(
        &["--load-pattern", "concurrency", "--concurrency", "1"],
        "40",
        "fidelity-low",
        0.01,
    );
}

#[test]
fn timing_fidelity_at_high_load() {
    // About 28 streams in flight (200 QPS × 138 ms), arriving at random as real traffic does. A
    // closed loop of identical requests would instead finish and restart them in lockstep, and
    // the burst of 32 simultaneous first chunks queues on one core of the stub and one of the
    // client: real, but a measure of the burst, not of the client's clock.
    // Against the configured delays this needed 2.5%: the stub's 2,800 timer wake-ups a second
    // fire late by about a millisecond on a shared 2-core machine (TTFT medians of 100.5-102.7
    // ms for 100 ms). Against the stub's own stamps that lateness cancels, so the client's
    // bound is the low-load one, plus half: at 200 QPS the worker sleeps between samples and
    // is woken for each (a socket byte), and on the 2-core VM the TTFT error's median sat at
    // 1.03-1.34 ms for 100 ms in two of three clean-clone runs, with the engine of 207aaf8 as
    // with today's (stop 34): 1% failed about one run in two, on either.
    timing_fidelity(
        &["--load-pattern", "poisson", "--target-qps", "200"],
        "600",
        "fidelity-high",
        0.015,
    );
}

/// The send log itself: a paced stream's pieces are stamped as written, in order, none before
/// its deadline, between the test's own clock readings before and after.
#[test]
fn the_stub_stamps_each_piece_as_it_writes_it() {
    use std::io::{Read, Write};
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut cfg = StubConfig::new(StubKind::Variable);
    cfg.stream_interval = 1;
    cfg.variable.first_chunk_latency_s = 0.02;
    cfg.variable.first_chunk_spread = 0.0;
    cfg.variable.inter_token_latency_ms = 5.0;
    cfg.variable.inter_token_spread = 0.0;
    cfg.variable.output_len_mean = 3.0;
    cfg.variable.output_len_spread = 0.0;
    cfg.send_log = Some(log.clone());
    let server = StubServer::start(cfg).unwrap();
    let body = r#"{"messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let before_ns = loadgen_stubs::monotonic_ns();
    let mut socket = std::net::TcpStream::connect(server.addr()).unwrap();
    socket.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    socket.read_to_string(&mut response).unwrap();
    let after_ns = loadgen_stubs::monotonic_ns();
    server.stop();
    assert!(response.contains("data: [DONE]"), "{response}");
    let sent = log.lock().unwrap().clone();
    assert_eq!(sent.len(), 1);
    let r = &sent[0];
    assert_eq!(r.body, body.as_bytes());
    assert_eq!(r.written_ns.len(), 3 + 2, "head, three events, tail");
    assert!(before_ns <= r.received_ns && *r.written_ns.last().unwrap() <= after_ns, "{r:?}");
    assert!(r.written_ns.windows(2).all(|w| w[0] <= w[1]), "in order: {r:?}");
    // Never before its deadline: event k at 20 ms + k × 5 ms after the request was whole.
    for k in 0..3 {
        let due_ns = 20_000_000 + k as u64 * 5_000_000;
        assert!(r.written_ns[1 + k] - r.received_ns >= due_ns, "event {k}: {r:?}");
    }
}
