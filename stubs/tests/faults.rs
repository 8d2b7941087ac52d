//! Each fault mode of the stubs, with exact counts (one worker, so request counters are exact).

mod common;

use std::time::Duration;

use common::{post, start, Conn};
use loadgen_stubs::{StatusFault, StubKind, UsageFault};

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
