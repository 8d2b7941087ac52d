//! Behaviour of the stub servers over real sockets: echo counts, framing of partial and
//! pipelined requests, errors, stopping, and the variable stub's timing.

use std::io::Write;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use crate::support::{post, start, Conn};
use loadgen_stubs::StubKind;

const CHAT: &str = "/v1/chat/completions";

fn sse_frames(body: &str) -> Vec<&str> {
    body.split("\n\n")
        .filter(|f| !f.is_empty())
        .map(|f| f.strip_prefix("data: ").unwrap())
        .collect()
}

#[test]
fn echo_counts_characters_not_bytes() {
    let server = start(StubKind::Echo, |_| {});
    let mut conn = Conn::new(server.addr());
    let text = "héllo wörld, ünïcode ✓";
    let chars = text.chars().count() as u64;
    let body = format!(
        r#"{{"model":"m","messages":[{{"role":"system","content":"ignored"}},{{"role":"user","content":"{text}"}}]}}"#
    );
    let r = conn.roundtrip(CHAT, &body).json();
    assert_eq!(r["choices"][0]["message"]["content"], text);
    assert_eq!(r["model"], "m");
    assert_eq!(r["usage"]["prompt_tokens"], chars);
    assert_eq!(r["usage"]["completion_tokens"], chars);
    assert_eq!(r["usage"]["total_tokens"], 2 * chars);
    server.stop();
}

#[test]
fn echo_streams_interval_sized_events_and_usage_only_when_asked() {
    let server = start(StubKind::Echo, |c| c.stream_interval = 4);
    let mut conn = Conn::new(server.addr());
    let text = "abcdéfghij";
    for usage in [false, true] {
        let body = format!(
            r#"{{"messages":[{{"role":"user","content":"{text}"}}],"stream":true,"stream_options":{{"include_usage":{usage}}}}}"#
        );
        let r = conn.roundtrip(CHAT, &body);
        assert_eq!(r.chunks.len(), 3 + 1, "three content chunks and the tail");
        let frames = sse_frames(r.body_str());
        let deltas: Vec<String> = frames[..3]
            .iter()
            .map(|f| serde_json::from_str::<serde_json::Value>(f).unwrap())
            .map(|v| v["choices"][0]["delta"]["content"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(deltas, ["abcd", "éfgh", "ij"]);
        assert_eq!(*frames.last().unwrap(), "[DONE]");
        let has_usage = frames.iter().any(|f| f.contains("\"usage\""));
        assert_eq!(has_usage, usage);
        if usage {
            let u: serde_json::Value = serde_json::from_str(frames[frames.len() - 2]).unwrap();
            assert_eq!(u["choices"], serde_json::json!([]));
            assert_eq!(u["usage"]["completion_tokens"], 10);
            assert_eq!(u["usage"]["prompt_tokens"], 10);
        }
    }
    server.stop();
}

#[test]
fn echo_completions_and_generate_inputs() {
    let server = start(StubKind::Echo, |_| {});
    let mut conn = Conn::new(server.addr());
    let r = conn.roundtrip("/v1/completions", r#"{"prompt":[1,2,3,4,5]}"#).json();
    assert_eq!(r["choices"][0]["text"], "xxxxx");
    assert_eq!(r["usage"]["prompt_tokens"], 5);
    let r = conn.roundtrip("/v1/completions", r#"{"prompt":"hé"}"#).json();
    assert_eq!(r["usage"]["completion_tokens"], 2);
    let r = conn.roundtrip("/generate", r#"{"text":"añb","sampling_params":{}}"#).json();
    assert_eq!(r["text"], "añb");
    assert_eq!(r["output_ids"], serde_json::json!([97, 241, 98]));
    assert_eq!(r["meta_info"]["prompt_tokens"], 3);
    assert_eq!(r["meta_info"]["completion_tokens"], 3);
    let r = conn.roundtrip("/generate", r#"{"input_ids":[7,8],"stream":true}"#);
    let frames = sse_frames(r.body_str());
    let last: serde_json::Value = serde_json::from_str(frames[frames.len() - 2]).unwrap();
    assert_eq!(last["text"], "xx", "cumulative text");
    assert_eq!(last["meta_info"]["finish_reason"]["type"], "stop");
    server.stop();
}

#[test]
fn requests_in_single_bytes_and_pipelined_get_one_answer_each() {
    let server = start(StubKind::Echo, |_| {});
    let mut conn = Conn::new(server.addr());
    let req = post(CHAT, r#"{"messages":[{"role":"user","content":"byte by byte"}]}"#);
    for b in &req {
        conn.stream.write_all(std::slice::from_ref(b)).unwrap();
        conn.stream.flush().unwrap();
    }
    let r = conn.read_response().unwrap();
    assert_eq!(r.json()["choices"][0]["message"]["content"], "byte by byte");
    let mut three = Vec::new();
    for word in ["one", "two", "three"] {
        three.extend(post(
            CHAT,
            &format!(r#"{{"messages":[{{"role":"user","content":"{word}"}}]}}"#),
        ));
    }
    conn.send(&three);
    for word in ["one", "two", "three"] {
        let r = conn.read_response().unwrap();
        assert_eq!(r.json()["choices"][0]["message"]["content"], word);
    }
    server.stop();
}

#[test]
fn max_throughput_answers_pipelined_requests_in_order() {
    let server = start(StubKind::MaxThroughput, |c| c.output_length = 3);
    let mut conn = Conn::new(server.addr());
    let mut batch = Vec::new();
    for _ in 0..50 {
        batch.extend(post(CHAT, r#"{"stream":false}"#));
        batch.extend(post("/v1/completions", r#"{"stream":true}"#));
    }
    conn.send(&batch);
    for _ in 0..50 {
        assert!(conn.read_response().unwrap().body_str().contains("\"chat.completion\""));
        assert!(conn.read_response().unwrap().body_str().ends_with("data: [DONE]\n\n"));
    }
    assert_eq!(server.requests_total(), 100);
    server.stop();
}

#[test]
fn bad_requests_get_400_and_unknown_paths_404() {
    for kind in [StubKind::Echo, StubKind::MaxThroughput, StubKind::Variable] {
        let server = start(kind, |_| {});
        let mut conn = Conn::new(server.addr());
        let r = conn.roundtrip("/v1/nothing", "{}");
        assert_eq!(r.status, 404);
        assert!(r.json()["error"]["message"].as_str().unwrap().contains("/v1/nothing"));
        conn.send(b"NOT HTTP\x01\r\n\r\n");
        let r = conn.read_response().unwrap();
        assert_eq!(r.status, 400);
        assert!(r.json()["error"]["message"].is_string());
        assert!(conn.closed(), "a bad request closes the connection");
        server.stop();
    }
    let server = start(StubKind::Echo, |_| {});
    let mut conn = Conn::new(server.addr());
    assert_eq!(conn.roundtrip(CHAT, "{not json").status, 400);
    assert_eq!(conn.roundtrip(CHAT, r#"{"messages":[]}"#).status, 400);
    assert_eq!(
        conn.roundtrip(CHAT, r#"{"messages":[{"role":"user","content":"ok"}]}"#).status,
        200
    );
    server.stop();
}

#[test]
fn the_server_counts_connections_and_the_addresses_they_came_from() {
    let server = start(StubKind::MaxThroughput, |c| c.workers = 2);
    let addr = server.addr();
    let sources: [std::net::Ipv4Addr; 3] =
        ["127.0.0.1", "127.0.0.2", "127.0.0.2"].map(|a| a.parse().unwrap());
    for source in sources {
        let mut conn = Conn::from_source(source, addr);
        assert_eq!(conn.roundtrip(CHAT, "{}").status, 200);
    }
    let handle = server.stop_handle();
    server.stop();
    let totals = handle.totals();
    assert_eq!((totals.requests, totals.connections), (3, 3));
    let peers: Vec<String> = totals.peers.iter().map(|p| p.to_string()).collect();
    assert_eq!(peers, ["127.0.0.1", "127.0.0.2"]);
    assert_eq!(totals.to_string(), "3 requests on 3 connections from 127.0.0.1, 127.0.0.2");
}

#[test]
fn stopped_server_releases_its_port() {
    for round in 0..10 {
        let server = start(StubKind::MaxThroughput, |c| c.workers = 2);
        let addr = server.addr();
        let mut conn = Conn::new(addr);
        assert_eq!(conn.roundtrip(CHAT, "{}").status, 200);
        server.stop();
        assert!(conn.drains_to_eof(), "open connections are closed on stop");
        let again = TcpListener::bind(addr);
        assert!(again.is_ok(), "round {round}: port still bound after stop: {again:?}");
    }
}

#[test]
fn variable_stub_with_fixed_timings_hits_its_deadlines() {
    let ttft = Duration::from_millis(40);
    let server = start(StubKind::Variable, |c| {
        c.stream_interval = 2;
        c.variable.output_len_mean = 10.0;
        c.variable.output_len_spread = 0.0;
        c.variable.first_chunk_latency_s = ttft.as_secs_f64();
        c.variable.first_chunk_spread = 0.0;
        c.variable.inter_token_latency_ms = 5.0;
    });
    let mut conn = Conn::new(server.addr());
    for path in [CHAT, "/v1/completions", "/generate"] {
        let t0 = Instant::now();
        conn.send(&post(path, r#"{"stream":true}"#));
        let r = conn.read_response().unwrap();
        let total = t0.elapsed();
        // Five events of two characters: the last at TTFT + 4 x 2 x 5 ms = 80 ms.
        let want = ttft + Duration::from_millis(40);
        assert!(total >= want, "{path}: {total:?} < {want:?}");
        assert!(total < want + Duration::from_millis(50), "{path}: {total:?} far past {want:?}");
        let frames = sse_frames(r.body_str());
        assert!(frames.len() >= 6, "{path}: {frames:?}");
        if path != "/generate" {
            assert!(frames[0].contains("\"model\":\"variable-resp\""), "{}", frames[0]);
        }
    }
    server.stop();
}

#[test]
fn variable_stub_max_concurrency_queues_requests() {
    let ttft = Duration::from_millis(30);
    let server = start(StubKind::Variable, |c| {
        c.variable.output_len_mean = 4.0;
        c.variable.output_len_spread = 0.0;
        c.variable.first_chunk_latency_s = ttft.as_secs_f64();
        c.variable.first_chunk_spread = 0.0;
        c.variable.inter_token_latency_ms = 1.0;
        c.variable.max_concurrency = 1;
    });
    let (mut a, mut b) = (Conn::new(server.addr()), Conn::new(server.addr()));
    let t0 = Instant::now();
    a.send(&post(CHAT, "{}"));
    b.send(&post(CHAT, "{}"));
    assert_eq!(a.read_response().unwrap().status, 200);
    assert_eq!(b.read_response().unwrap().status, 200);
    // Non-streaming in ICL mode waits the TTFT only; one at a time makes it two TTFTs.
    assert!(t0.elapsed() >= 2 * ttft, "{:?}", t0.elapsed());
    server.stop();
}

#[test]
fn slotted_stub_serves_n_at_once_first_in_first_out_by_its_own_stamps() {
    let log = loadgen_stubs::SendLog::default();
    let server = start(StubKind::Variable, |c| {
        c.stream_interval = 2;
        c.variable.output_len_mean = 6.0;
        c.variable.output_len_spread = 0.0;
        c.variable.first_chunk_latency_s = 0.01;
        c.variable.first_chunk_spread = 0.0;
        c.variable.inter_token_latency_ms = 1.0;
        c.variable.max_concurrency = 2;
        c.send_log = Some(log.clone());
    });
    let mut conns: Vec<Conn> = (0..6).map(|_| Conn::new(server.addr())).collect();
    for (i, c) in conns.iter_mut().enumerate() {
        c.send(&post(CHAT, &format!(r#"{{"stream":true,"n_{i}":0}}"#)));
    }
    for c in &mut conns {
        assert_eq!(c.read_response().unwrap().status, 200);
    }
    server.stop();
    let mut sent = log.lock().unwrap().clone();
    assert_eq!(sent.len(), 6);
    sent.sort_by_key(|r| r.received_ns);
    // (slot, done) per request, in arrival order.
    let spans: Vec<(u64, u64)> =
        sent.iter().map(|r| (r.slot_ns.unwrap(), *r.written_ns.last().unwrap())).collect();
    for (i, &(slot, _)) in spans.iter().enumerate() {
        let busy = spans.iter().filter(|&&(s, d)| s <= slot && d > slot).count();
        assert!(busy <= 2, "request {i} took a slot while {busy} were in service: {spans:?}");
    }
    // First in, first out: slots are taken in arrival order, and the third waits for a slot.
    assert!(spans.windows(2).all(|w| w[0].0 <= w[1].0), "{spans:?}");
    let waited_ns = spans[2].0 - sent[2].received_ns;
    let first_done_ns = spans[0].1.min(spans[1].1);
    assert!(spans[2].0 >= first_done_ns, "{spans:?}");
    // Service time is the TTFT plus two more events of 2 ms: at least 10 ms of queueing.
    assert!(waited_ns >= 10_000_000, "third request waited {waited_ns} ns");
}

#[test]
fn variable_stub_output_lengths_follow_the_distribution() {
    let server = start(StubKind::Variable, |c| {
        c.variable.output_len_mean = 100.0;
        c.variable.output_len_spread = 0.5;
        c.variable.output_len_min = 20;
        c.variable.output_len_max = Some(150);
    });
    let mut conn = Conn::new(server.addr());
    let lens: Vec<u64> = (0..200)
        .map(|_| conn.roundtrip(CHAT, "{}").json()["usage"]["completion_tokens"].as_u64().unwrap())
        .collect();
    assert!(lens.iter().all(|&n| (20..=150).contains(&n)), "{lens:?}");
    assert!(lens.iter().any(|&n| n != lens[0]), "lengths vary");
    let mean = lens.iter().sum::<u64>() as f64 / lens.len() as f64;
    assert!((80.0..110.0).contains(&mean), "mean {mean}");
    server.stop();
}

#[test]
fn stats_counters_count_each_request_and_byte_once() {
    for kind in [StubKind::MaxThroughput, StubKind::Echo, StubKind::Variable] {
        let server = start(kind, |c| c.variable.output_len_mean = 30.0);
        let mut conn = Conn::new(server.addr());
        let body = r#"{"messages":[{"role":"user","content":"count me"}],"stream":true}"#;
        let mut sent = 0;
        for _ in 0..3 {
            sent += conn.roundtrip(CHAT, body).raw.len() as u64;
        }
        sent += conn.roundtrip("/nowhere", "{}").raw.len() as u64;
        assert_eq!(server.requests_total(), 4, "{kind:?}");
        assert_eq!(server.bytes_total(), sent, "{kind:?}");
        server.stop();
    }
}

#[test]
fn expect_100_continue_gets_a_continue_before_the_body() {
    let server = start(StubKind::Echo, |_| {});
    let mut conn = Conn::new(server.addr());
    let body = r#"{"messages":[{"role":"user","content":"later"}]}"#;
    let head = format!(
        "POST {CHAT} HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    conn.send(head.as_bytes());
    let mut interim = [0u8; 25];
    std::io::Read::read_exact(&mut conn.stream, &mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    conn.send(body.as_bytes());
    let r = conn.read_response().unwrap();
    assert_eq!(r.json()["choices"][0]["message"]["content"], "later");
    server.stop();
}

#[test]
fn start_fails_when_a_worker_cannot_be_pinned() {
    let mut cfg = loadgen_stubs::StubConfig::new(StubKind::MaxThroughput);
    cfg.workers = 2;
    cfg.pin_cores = Some(vec![0, 100_000]);
    let err = loadgen_stubs::StubServer::start(cfg).err().expect("start must fail");
    assert!(err.to_string().contains("core 100000"), "{err}");
}
