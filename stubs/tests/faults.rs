//! Each fault mode of the stubs, with exact counts (one worker, so request counters are exact).

use std::time::Duration;

use crate::support::{post, start, Conn};
use loadgen_stubs::{
    DelayFault, StatusFault, StubKind, TruncateFault, TruncateFraming, UsageFault,
};

const CHAT: &str = "/v1/chat/completions";

#[test]
fn every_nth_sse_frame_is_malformed() {
    let server = start(StubKind::MaxThroughput, |c| {
        c.output_length = 30;
        c.stream_interval = 5;
        c.faults.malformed_every = Some(2);
    });
    let mut conn = Conn::new(server.addr());
    let r = conn.roundtrip(CHAT, r#"{"stream":true}"#);
    let frames: Vec<&str> = r.body_str().split("\n\n").filter(|f| !f.is_empty()).collect();
    assert_eq!(frames.len(), 6 + 2);
    for (i, frame) in frames[..6].iter().enumerate() {
        let json = frame.strip_prefix("data: ").unwrap();
        let parsed = serde_json::from_str::<serde_json::Value>(json);
        assert_eq!(parsed.is_err(), (i + 1) % 2 == 0, "frame {}: {frame}", i + 1);
    }
    server.stop();
}

#[test]
fn usage_values_of_the_wrong_kind() {
    let cases = [
        (UsageFault::Bool, serde_json::json!(true)),
        (UsageFault::Float, serde_json::json!(10.5)),
        (UsageFault::String, serde_json::json!("10")),
        (UsageFault::Negative, serde_json::json!(-11)),
        (UsageFault::Huge, serde_json::json!(10_000_011)),
    ];
    for (fault, want_prompt) in cases {
        let server = start(StubKind::MaxThroughput, |c| c.faults.usage = Some(fault));
        let mut conn = Conn::new(server.addr());
        let plain = conn.roundtrip(CHAT, "{}").json();
        assert_eq!(plain["usage"]["prompt_tokens"], want_prompt, "{fault:?}");
        let stream =
            conn.roundtrip(CHAT, r#"{"stream":true,"stream_options":{"include_usage":true}}"#);
        let usage_frame = stream.body_str().split("\n\n").find(|f| f.contains("usage")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&usage_frame[6..]).unwrap();
        assert_eq!(v["usage"]["prompt_tokens"], want_prompt, "{fault:?} stream");
        let sglang = conn.roundtrip("/generate", "{}").json();
        assert_eq!(sglang["meta_info"]["prompt_tokens"], want_prompt, "{fault:?} sglang");
        server.stop();
    }
}

#[test]
fn missing_usage_drops_the_object_and_the_frame() {
    let server = start(StubKind::Echo, |c| c.faults.usage = Some(UsageFault::Missing));
    let mut conn = Conn::new(server.addr());
    let msg = r#""messages":[{"role":"user","content":"hi"}]"#;
    let plain = conn.roundtrip(CHAT, &format!("{{{msg}}}")).json();
    assert!(plain.get("usage").is_none());
    let body = format!(r#"{{{msg},"stream":true,"stream_options":{{"include_usage":true}}}}"#);
    let stream = conn.roundtrip(CHAT, &body);
    assert!(!stream.body_str().contains("usage"));
    assert!(stream.body_str().ends_with("data: [DONE]\n\n"));
    let sglang = conn.roundtrip("/generate", r#"{"text":"hi"}"#).json();
    assert!(sglang["meta_info"].get("completion_tokens").is_none());
    server.stop();
}

#[test]
fn status_faults_hit_exactly_every_kth_request() {
    for status in [429u16, 500] {
        let server = start(StubKind::MaxThroughput, |c| {
            c.faults.status = Some(StatusFault { status, every: 3 });
        });
        let mut conn = Conn::new(server.addr());
        let got: Vec<u16> = (0..7).map(|_| conn.roundtrip(CHAT, "{}").status).collect();
        assert_eq!(got, [200, 200, status, 200, 200, status, 200]);
        server.stop();
    }
}

#[test]
fn connection_closed_mid_stream() {
    let server = start(StubKind::MaxThroughput, |c| c.faults.close_mid_stream_every = Some(2));
    let mut conn = Conn::new(server.addr());
    assert_eq!(conn.roundtrip(CHAT, r#"{"stream":true}"#).status, 200);
    conn.send(&post(CHAT, r#"{"stream":true}"#));
    let err = conn.read_response().expect_err("the stream is cut");
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
    let mut fresh = Conn::new(server.addr());
    // The third request of the worker is whole again.
    assert!(fresh.roundtrip(CHAT, "{}").body_str().ends_with("null}"));
    server.stop();
}

#[test]
fn stalled_stream_sends_nothing_more_until_the_server_stops() {
    let server = start(StubKind::MaxThroughput, |c| c.faults.stall_every = Some(1));
    let mut conn = Conn::new(server.addr());
    conn.stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    conn.send(&post(CHAT, r#"{"stream":true}"#));
    let err = conn.read_response().expect_err("the stream stalls");
    assert!(
        matches!(err.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut),
        "{err:?}"
    );
    conn.stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    server.stop();
    assert!(conn.drains_to_eof(), "stop ends the stalled stream");
}

/// How long a test waits to see that nothing more arrives.
const QUIET: Duration = Duration::from_millis(300);
/// How long a test waits for an end it expects.
const END: Duration = Duration::from_secs(10);
const STREAM: &str = r#"{"stream":true}"#;

fn head_and_body(raw: &[u8]) -> (String, String) {
    let text = String::from_utf8(raw.to_vec()).unwrap();
    let at = text.find("\r\n\r\n").expect("a whole head") + 4;
    (text[..at].to_ascii_lowercase(), text[at..].to_string())
}

/// The SSE events of a body, each as its `data:` values joined with "\n" (the SSE grammar).
fn events(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            e.lines().map(|l| l.strip_prefix("data: ").unwrap()).collect::<Vec<_>>().join("\n")
        })
        .collect()
}

#[test]
fn stall_after_head_sends_the_head_then_nothing() {
    for body in [STREAM, "{}"] {
        let server = start(StubKind::MaxThroughput, |c| c.faults.stall_after_head_every = Some(1));
        let mut conn = Conn::new(server.addr());
        conn.send(&post(CHAT, body));
        let (raw, ended) = conn.read_raw(QUIET);
        assert!(!ended, "{body}: the connection stays open");
        let (head, rest) = head_and_body(&raw);
        assert!(head.starts_with("http/1.1 200 ok\r\n"), "{head}");
        assert_eq!(rest, "", "{body}: nothing after the head");
        server.stop();
        assert!(conn.drains_to_eof(), "stop ends the stalled connection");
    }
}

#[test]
fn no_response_reads_the_request_and_never_answers() {
    let server = start(StubKind::MaxThroughput, |c| c.faults.no_response_every = Some(2));
    let mut conn = Conn::new(server.addr());
    assert_eq!(conn.roundtrip(CHAT, STREAM).status, 200, "request 1 is answered");
    conn.send(&post(CHAT, "{}"));
    let (raw, ended) = conn.read_raw(QUIET);
    assert_eq!((raw.len(), ended), (0, false), "request 2 gets nothing, the socket stays open");
    assert_eq!(server.requests_total(), 2, "the request was read");
    server.stop();
}

#[test]
fn close_after_request_closes_without_a_byte() {
    for body in [STREAM, "{}"] {
        let server =
            start(StubKind::MaxThroughput, |c| c.faults.close_after_request_every = Some(1));
        let mut conn = Conn::new(server.addr());
        conn.send(&post(CHAT, body));
        let (raw, ended) = conn.read_raw(END);
        assert_eq!((raw.len(), ended), (0, true), "{body}: closed with no byte");
        assert_eq!(server.requests_total(), 1);
        server.stop();
    }
}

#[test]
fn error_frame_mid_stream_follows_content_and_a_plain_answer_is_a_200_error_body() {
    let server =
        start(StubKind::MaxThroughput, |c| c.faults.error_frame_mid_stream_every = Some(1));
    let mut conn = Conn::new(server.addr());
    let r = conn.roundtrip(CHAT, STREAM);
    assert_eq!(r.status, 200);
    let ev = events(r.body_str());
    // 160 characters at interval 10: 16 content frames, half of them before the error.
    assert_eq!(ev.len(), 8 + 2, "{ev:?}");
    for frame in &ev[..8] {
        let v: serde_json::Value = serde_json::from_str(frame).unwrap();
        assert_eq!(v["choices"][0]["delta"]["content"], "xxxxxxxxxx");
    }
    assert_eq!(ev[8], loadgen_stubs::fault::ERROR_OBJECT);
    assert_eq!(ev[9], "[DONE]");
    assert!(!r.body_str().contains("finish_reason\":\"stop"), "no finish before the error");
    let plain = conn.roundtrip(CHAT, "{}");
    assert_eq!(plain.status, 200);
    assert_eq!(plain.json()["error"]["message"], loadgen_stubs::fault::ERROR_MESSAGE);
    server.stop();
}

#[test]
fn error_only_stream_holds_just_the_error_frame() {
    let server = start(StubKind::Echo, |c| c.faults.error_only_stream_every = Some(1));
    let mut conn = Conn::new(server.addr());
    let body = r#"{"messages":[{"role":"user","content":"hello"}],"stream":true}"#;
    let r = conn.roundtrip(CHAT, body);
    let ev = events(r.body_str());
    assert_eq!(ev, [loadgen_stubs::fault::ERROR_OBJECT, "[DONE]"]);
    server.stop();
}

#[test]
fn vllm_error_holds_just_the_unwrapped_error_object_streaming_and_not() {
    let server = start(StubKind::MaxThroughput, |c| c.faults.vllm_error_every = Some(1));
    let mut conn = Conn::new(server.addr());
    let r = conn.roundtrip(CHAT, STREAM);
    assert_eq!(events(r.body_str()), [loadgen_stubs::fault::VLLM_ERROR_OBJECT, "[DONE]"]);
    let plain = conn.roundtrip(CHAT, "{}");
    assert_eq!(plain.status, 200);
    let body = plain.json();
    assert!(body.get("error").is_none(), "vLLM's shape has no error key: {body}");
    assert_eq!(body["object"], "error");
    assert_eq!(body["message"], loadgen_stubs::fault::VLLM_ERROR_MESSAGE);
    server.stop();
}

#[test]
fn truncated_chunked_stream_stops_after_k_frames_without_the_last_chunk() {
    let server = start(StubKind::MaxThroughput, |c| {
        c.faults.truncate =
            Some(TruncateFault { every: 1, after_frames: 3, framing: TruncateFraming::Chunked })
    });
    let mut conn = Conn::new(server.addr());
    conn.send(&post(CHAT, STREAM));
    let (raw, ended) = conn.read_raw(END);
    assert!(ended, "the connection closes");
    let (head, body) = head_and_body(&raw);
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    assert_eq!(body.matches("data: ").count(), 3, "{body}");
    assert!(!body.contains("0\r\n\r\n") && !body.contains("[DONE]") && !body.contains("stop"));
    server.stop();
}

#[test]
fn truncated_close_delimited_stream_stops_after_k_frames() {
    let server = start(StubKind::MaxThroughput, |c| {
        let framing = TruncateFraming::CloseDelimited;
        c.faults.truncate = Some(TruncateFault { every: 1, after_frames: 3, framing })
    });
    let mut conn = Conn::new(server.addr());
    conn.send(&post(CHAT, STREAM));
    let (raw, ended) = conn.read_raw(END);
    assert!(ended, "the body ends where the connection does");
    let (head, body) = head_and_body(&raw);
    assert!(head.contains("connection: close"), "{head}");
    assert!(!head.contains("content-length") && !head.contains("transfer-encoding"), "{head}");
    let ev = events(&body);
    assert_eq!(ev.len(), 3, "raw SSE events, no chunk framing: {body:?}");
    assert!(ev.iter().all(|e| e.contains("\"finish_reason\":null")), "{ev:?}");
    server.stop();
}

#[test]
fn finish_without_done_is_a_whole_chunked_body_with_a_finish_reason() {
    let server = start(StubKind::MaxThroughput, |c| c.faults.finish_without_done_every = Some(1));
    let mut conn = Conn::new(server.addr());
    let r = conn.roundtrip(CHAT, STREAM);
    let ev = events(r.body_str());
    assert_eq!(ev.len(), 16 + 1, "content frames and the finish frame");
    assert!(ev[16].contains("\"finish_reason\":\"stop\""), "{}", ev[16]);
    assert!(!r.body_str().contains("[DONE]"));
    assert_eq!(conn.roundtrip(CHAT, "{}").status, 200, "the connection is kept");
    server.stop();
}

#[test]
fn multi_line_data_splits_each_event_and_joins_back_to_the_same_content() {
    let server = start(StubKind::MaxThroughput, |c| c.faults.multi_line_data_every = Some(1));
    let mut conn = Conn::new(server.addr());
    let r = conn.roundtrip(CHAT, STREAM);
    let raw_events: Vec<&str> = r.body_str().split("\n\n").filter(|e| !e.is_empty()).collect();
    let json_events = &raw_events[..raw_events.len() - 1];
    assert!(json_events.iter().all(|e| e.lines().count() == 2), "{raw_events:?}");
    let mut content = String::new();
    for e in &events(r.body_str())[..json_events.len()] {
        let v: serde_json::Value = serde_json::from_str(e).unwrap();
        content.push_str(v["choices"][0]["delta"]["content"].as_str().unwrap_or(""));
    }
    assert_eq!(content, "x".repeat(160));
    server.stop();
}

#[test]
fn extra_headers_are_added_to_every_answer() {
    for count in [40usize, 200] {
        let server = start(StubKind::MaxThroughput, |c| c.faults.extra_headers = count);
        let mut conn = Conn::new(server.addr());
        for body in [STREAM, "{}"] {
            let r = conn.roundtrip(CHAT, body);
            assert_eq!(r.head.matches("X-Stub-Extra-").count(), count, "{body}");
            assert!(r.head.contains("Content-Type:"), "the usual headers stay");
            assert!(r.body_str().contains("xxxxxxxxxx"), "the body is whole");
        }
        server.stop();
    }
}

#[test]
fn delay_holds_every_nth_answer_back() {
    let server = start(StubKind::MaxThroughput, |c| {
        c.faults.delay = Some(DelayFault { delay_ms: 200, every: 2 });
    });
    let mut conn = Conn::new(server.addr());
    let timed = |conn: &mut Conn| {
        let t = std::time::Instant::now();
        assert_eq!(conn.roundtrip(CHAT, STREAM).status, 200);
        t.elapsed()
    };
    let first = timed(&mut conn);
    let second = timed(&mut conn);
    assert!(second >= Duration::from_millis(200), "request 2 is delayed: {second:?}");
    assert!(first < second, "request 1 is not: {first:?} vs {second:?}");
    server.stop();
}
