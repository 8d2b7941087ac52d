//! The variable stub's prefix-cache mode over real sockets: conversations whose later turns
//! pay TTFT only for their new tokens (by the stub's headers and its own write stamps), the
//! least recently used conversation evicted past the capacity, and tool calls, plain and
//! streamed, parsed as JSON.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::{post_with_headers, start, Conn, Response};
use loadgen_stubs::{
    prompt_tokens, CacheOutcome, PrefixCacheConfig, SendLog, StubConfig, StubKind, StubServer,
};

const CHAT: &str = "/v1/chat/completions";

/// A prefix-cache stub: 8-character answers, fixed timings, one worker.
fn cache_stub(base_ttft: Duration, uncached_token_us: f64, cache_tokens: u64) -> StubServer {
    start(StubKind::Variable, |c| cache_config(c, base_ttft, uncached_token_us, cache_tokens))
}

fn cache_config(c: &mut StubConfig, base_ttft: Duration, token_us: f64, cache_tokens: u64) {
    c.stream_interval = 100;
    c.variable.output_len_mean = 8.0;
    c.variable.output_len_spread = 0.0;
    c.variable.first_chunk_latency_s = base_ttft.as_secs_f64();
    c.variable.first_chunk_spread = 0.0;
    c.variable.prefix_cache = Some(PrefixCacheConfig {
        uncached_token_us: token_us,
        cache_tokens,
        ..PrefixCacheConfig::default()
    });
}

fn message(role: &str, content: String) -> Value {
    json!({"role": role, "content": content})
}

/// Sends one chat turn of `messages` (with `extra` body keys) in conversation `session`.
fn turn(conn: &mut Conn, session: Option<&str>, messages: &[Value], extra: Value) -> Response {
    let mut body = json!({"model": "m", "messages": messages});
    for (k, v) in extra.as_object().into_iter().flatten() {
        body[k] = v.clone();
    }
    let headers: Vec<(&str, &str)> = session.map(|s| ("X-Session-ID", s)).into_iter().collect();
    conn.send(&post_with_headers(CHAT, &headers, &body.to_string()));
    let r = conn.read_response().expect("a response");
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.raw));
    r
}

fn header_u64(r: &Response, name: &str) -> u64 {
    r.header(name).unwrap_or_else(|| panic!("no {name} in {}", r.head)).parse().unwrap()
}

/// The SSE events of a stream, `[DONE]` left out, as JSON.
fn events(r: &Response) -> Vec<Value> {
    r.body_str()
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .filter(|f| *f != "[DONE]")
        .map(|f| serde_json::from_str(f).unwrap_or_else(|e| panic!("{f}: {e}")))
        .collect()
}

/// The assistant message a client builds from a text stream.
fn streamed_answer(r: &Response) -> Value {
    let text: String = events(r)
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str().map(str::to_string))
        .collect();
    message("assistant", text)
}

#[test]
fn later_turns_pay_ttft_only_for_the_tokens_not_cached() {
    let base = Duration::from_millis(10);
    let token_us = 200.0;
    let log = SendLog::default();
    let server = start(StubKind::Variable, |c| {
        cache_config(c, base, token_us, 1_000_000);
        c.send_log = Some(log.clone());
    });
    let mut conn = Conn::new(server.addr());
    let stream = json!({"stream": true, "stream_options": {"include_usage": true}});
    let mut messages = vec![message("system", "s".repeat(400)), message("user", "u".repeat(800))];
    let mut want_cached = 0;
    let mut outcomes = Vec::new();
    for new_user in ["v".repeat(400), "w".repeat(200), String::new()] {
        let r = turn(&mut conn, Some("conv-1"), &messages, stream.clone());
        let (prompt, cached) =
            (header_u64(&r, "x-stub-prompt-tokens"), header_u64(&r, "x-stub-cached-tokens"));
        assert_eq!(prompt, prompt_tokens(&messages), "the count is the exposed function's");
        assert_eq!(cached, want_cached, "turn {}", outcomes.len() + 1);
        let usage = events(&r).last().unwrap()["usage"].clone();
        assert_eq!(usage["prompt_tokens"], prompt, "usage reports the same count");
        // TTFT = base + uncached tokens x cost (to the nanosecond's rounding).
        let want_ns = base.as_nanos() as f64 + (prompt - cached) as f64 * token_us * 1e3;
        let ttft_ns = header_u64(&r, "x-stub-ttft-ns");
        assert!((ttft_ns as f64 - want_ns).abs() < 1e3, "{ttft_ns} ns, want {want_ns}");
        outcomes.push(CacheOutcome {
            prompt_tokens: prompt,
            cached_tokens: cached,
            ttft_ns,
            tool_call: false,
        });
        // The whole history, the stub's answer included, is cached for the next turn.
        messages.push(streamed_answer(&r));
        want_cached = prompt_tokens(&messages);
        if new_user.is_empty() {
            break;
        }
        messages.push(message("user", new_user));
    }
    assert_eq!(
        outcomes.iter().map(|o| o.prompt_tokens - o.cached_tokens).collect::<Vec<_>>(),
        [300, 100, 50]
    );
    // A connection's requests are served in order, and a response is logged right after its
    // last write: once a later answer on this connection is read, the three turns are logged.
    assert_eq!(conn.roundtrip("/nowhere", "{}").status, 404);
    let sent = log.lock().unwrap().clone();
    assert!(sent.len() >= 3, "{sent:?}");
    for (s, o) in sent[..3].iter().zip(&outcomes) {
        assert_eq!(s.prefix_cache.as_ref(), Some(o), "the send log has the stub's decision");
        // By the stub's own stamps: the head and first event left at or after the planned
        // TTFT, and not long after it.
        let took_ns = s.written_ns[0] - s.received_ns;
        assert!(took_ns >= o.ttft_ns, "written {took_ns} ns < planned {} ns", o.ttft_ns);
        assert!(took_ns < o.ttft_ns + 50_000_000, "written {took_ns} ns, planned {}", o.ttft_ns);
    }
    let totals = server.totals().prefix_cache.unwrap();
    assert_eq!((totals.hits, totals.misses, totals.evictions), (2, 1, 0));
    server.stop();
}

#[test]
fn the_least_recently_used_conversation_is_evicted_past_the_capacity() {
    let server = cache_stub(Duration::ZERO, 0.0, 400);
    let mut conn = Conn::new(server.addr());
    let plain = json!({"stream": false});
    let answer = |r: &Response| r.json()["choices"][0]["message"].clone();
    let cached = |r: &Response| header_u64(r, "x-stub-cached-tokens");
    let mut a = vec![message("user", "a".repeat(400))]; // 100 tokens, 102 with the answer
    let r = turn(&mut conn, Some("a"), &a, plain.clone());
    a.push(answer(&r));
    let mut b = vec![message("user", "b".repeat(600))]; // 150 tokens, 152 with the answer
    turn(&mut conn, Some("b"), &b, plain.clone());
    a.push(message("user", "a".repeat(100)));
    let r = turn(&mut conn, Some("a"), &a, plain.clone());
    assert_eq!(cached(&r), 102, "a's first turn and answer");
    a.push(answer(&r));
    // c brings the total past 400: b, used least recently, goes; a stays.
    turn(&mut conn, Some("c"), &[message("user", "c".repeat(600))], plain.clone());
    assert_eq!(server.totals().prefix_cache.unwrap().evictions, 1);
    a.push(message("user", "a".repeat(40)));
    let r = turn(&mut conn, Some("a"), &a, plain.clone());
    assert_eq!(cached(&r), prompt_tokens(&a[..a.len() - 1]), "a kept its whole history");
    b.push(message("user", "b".repeat(40)));
    let r = turn(&mut conn, Some("b"), &b, plain);
    assert_eq!(cached(&r), 0, "b was evicted");
    assert_eq!(header_u64(&r, "x-stub-ttft-ns"), 0, "no base, no cost");
    server.stop();
}

#[test]
fn conversations_are_keyed_by_the_session_header_else_the_first_message() {
    let server = start(StubKind::Variable, |c| {
        cache_config(c, Duration::ZERO, 0.0, 10_000);
        c.variable.prefix_cache.as_mut().unwrap().session_header = "X-Conversation".into();
    });
    let mut conn = Conn::new(server.addr());
    let first = vec![message("system", "s".repeat(40)), message("user", "u".repeat(40))];
    let r = turn(&mut conn, None, &first, json!({}));
    let mut next = first.clone();
    next.push(r.json()["choices"][0]["message"].clone());
    next.push(message("user", "more".into()));
    let cached = |r: &Response| header_u64(r, "x-stub-cached-tokens");
    assert_eq!(cached(&turn(&mut conn, None, &next, json!({}))), prompt_tokens(&next[..3]));
    // X-Session-ID is not this stub's header: no conversation of that name, still keyed by
    // the first message.
    let r = turn(&mut conn, Some("x"), &next, json!({}));
    assert_eq!(cached(&r), prompt_tokens(&next));
    let named = |conn: &mut Conn, name: &str| {
        let body = json!({"messages": first}).to_string();
        conn.send(&post_with_headers(CHAT, &[("x-conversation", name)], &body));
        cached(&conn.read_response().unwrap())
    };
    assert_eq!(named(&mut conn, "one"), 0, "a named conversation starts empty");
    assert_eq!(named(&mut conn, "one"), prompt_tokens(&first));
    assert_eq!(named(&mut conn, "two"), 0);
    server.stop();
}

const TOOLS: &str = r#"[{"type":"function","function":{"name":"get_weather",
    "parameters":{"type":"object","properties":{}}}},
    {"type":"function","function":{"name":"unused"}}]"#;

#[test]
fn tools_after_a_user_message_get_a_tool_call_and_a_tool_result_gets_text() {
    let server = cache_stub(Duration::ZERO, 0.0, 10_000);
    let mut conn = Conn::new(server.addr());
    let tools: Value = serde_json::from_str(TOOLS).unwrap();
    let user = vec![message("user", "what is the weather".into())];
    let r = turn(&mut conn, Some("t"), &user, json!({"tools": tools, "stream": false}));
    let v = r.json();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert!(call["id"].as_str().unwrap().starts_with("call_"), "{call}");
    assert_eq!(
        (&call["type"], &call["function"]["name"]),
        (&json!("function"), &json!("get_weather"))
    );
    assert_eq!(call["function"]["arguments"], "{}");
    assert_eq!(choice["message"]["tool_calls"].as_array().unwrap().len(), 1);
    // The tool's result: the answer is text, and the call as returned was cached.
    let mut history = user.clone();
    history.push(choice["message"].clone());
    history.push(json!({"role": "tool", "tool_call_id": call["id"], "content": "sunny"}));
    let r = turn(&mut conn, Some("t"), &history, json!({"tools": tools, "stream": false}));
    let v = r.json();
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    assert_eq!(v["choices"][0]["message"]["content"], "xxxxxxxx");
    assert_eq!(header_u64(&r, "x-stub-cached-tokens"), prompt_tokens(&history[..2]));
    // No tools, no call.
    let r = turn(&mut conn, Some("u"), &user, json!({"stream": false}));
    assert_eq!(r.json()["choices"][0]["finish_reason"], "stop");
    server.stop();
}

#[test]
fn a_streamed_tool_call_comes_as_openai_delta_tool_calls() {
    let server = cache_stub(Duration::ZERO, 0.0, 10_000);
    let mut conn = Conn::new(server.addr());
    let tools: Value = serde_json::from_str(TOOLS).unwrap();
    let user = vec![message("user", "weather?".into())];
    let extra = json!({"tools": tools, "stream": true, "stream_options": {"include_usage": true}});
    let r = turn(&mut conn, Some("s"), &user, extra);
    assert!(r.body_str().ends_with("data: [DONE]\n\n"));
    let events = events(&r);
    assert_eq!(events.len(), 4, "name, arguments, finish, usage: {events:?}");
    let first = &events[0]["choices"][0]["delta"]["tool_calls"][0];
    assert_eq!(first["index"], 0);
    assert!(first["id"].as_str().unwrap().starts_with("call_"), "{first}");
    assert_eq!(first["type"], "function");
    assert_eq!(first["function"]["name"], "get_weather");
    assert_eq!(events[0]["choices"][0]["delta"]["role"], "assistant");
    // A client joins the arguments of every delta of index 0.
    let arguments: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(arguments, "{}");
    assert_eq!(events[2]["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(events[3]["usage"]["prompt_tokens"], prompt_tokens(&user));
    assert_eq!(events[3]["usage"]["completion_tokens"], "get_weather{}".len());
    server.stop();
}

#[test]
fn other_routes_are_the_plain_variable_stub_and_bad_chat_bodies_get_400() {
    let server = cache_stub(Duration::ZERO, 0.0, 10_000);
    let mut conn = Conn::new(server.addr());
    let r = conn.roundtrip("/v1/completions", r#"{"prompt":"hi"}"#);
    assert_eq!((r.status, r.header("x-stub-cached-tokens")), (200, None));
    assert_eq!(r.json()["usage"]["prompt_tokens"], 10);
    let r = conn.roundtrip(CHAT, "{not json");
    assert_eq!(r.status, 400);
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("json"));
    let r = conn.roundtrip(CHAT, "{}");
    assert_eq!((r.status, header_u64(&r, "x-stub-prompt-tokens")), (200, 0));
    assert_eq!(server.totals().prefix_cache.unwrap().requests(), 1, "the 400 is not served");
    server.stop();
}
