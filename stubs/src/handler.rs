//! What each stub answers: one request in, a `Plan` out (bytes, their deadlines, and how the
//! connection ends). The max-throughput stub's precompiled table lives here too.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::chat_turn::{content_text, ChatTurn, MessageParts};
use crate::config::{ProfileHit, StubConfig, StubKind};
use crate::fault;
use crate::http::{header_value, FlagFinders, ProfileAction, Request, Route};
use crate::plan::{End, Plan};
use crate::prefix_cache::{CacheOutcome, Lookup, SharedPrefixCache};
use crate::render::{error_response, insert_headers, json_response, render, Rendered, Reply};
use crate::tool_call::{render_tool_call, ToolCall};
use crate::variable::Rng;

/// `prompt_tokens` the max-throughput and variable stubs report.
pub const FIXED_PROMPT_TOKENS: u64 = 10;

/// Precompiled max-throughput responses, indexed `[route][stream][usage]`.
pub struct Precompiled {
    table: Vec<Vec<u8>>,
}

impl Precompiled {
    /// Renders every variant once.
    pub fn build(cfg: &StubConfig, created_unix_s: u64) -> Self {
        let text = "x".repeat(cfg.output_length);
        let mut table = Vec::with_capacity(12);
        for route in Route::ALL {
            for (stream, usage) in [(false, false), (false, true), (true, false), (true, true)] {
                let reply = base_reply(cfg, route, stream, usage, "max-tp", created_unix_s, &text);
                table.push(render(&reply).concat());
            }
        }
        Self { table }
    }

    /// The bytes of one variant.
    pub fn get(&self, route: Route, stream: bool, usage: bool) -> &[u8] {
        &self.table[route as usize * 4 + stream as usize * 2 + usage as usize]
    }
}

fn base_reply<'a>(
    cfg: &StubConfig,
    route: Route,
    stream: bool,
    usage: bool,
    model: &'a str,
    created_unix_s: u64,
    text: &'a str,
) -> Reply<'a> {
    Reply {
        route,
        stream,
        usage_frame: usage && !cfg.faults.no_stream_usage,
        model,
        created_unix_s,
        prompt_tokens: FIXED_PROMPT_TOKENS,
        text,
        stream_interval: cfg.stream_interval.max(1),
        usage_fault: cfg.faults.usage,
        malformed_every: cfg.faults.malformed_every,
    }
}

/// Per-worker state the handlers use.
pub struct Handler {
    /// The server's configuration.
    pub cfg: StubConfig,
    /// The `created` field.
    pub created_unix_s: u64,
    /// Flag scanners.
    pub finders: FlagFinders,
    /// The variable stub's generator.
    pub rng: Rng,
    /// Requests this worker has answered (1-based after increment): the fault counter.
    pub served: u64,
    /// Next free slot of the variable stub's per-worker token bucket.
    pub rate_next: Option<Instant>,
    /// The prefix cache every worker shares (`VariableConfig::prefix_cache`), else `None`.
    pub prefix_cache: Option<SharedPrefixCache>,
}

impl Handler {
    /// Answers a request framed (`frame_request`) from the start of `bytes`. `start` is when
    /// it was fully received.
    pub fn plan(&mut self, req: &Request, bytes: &[u8], start: Instant) -> Plan {
        if let Some(action) = req.profile {
            return self.profile(action, req);
        }
        if self.cfg.kind == StubKind::Video {
            return self.video(req, bytes, start);
        }
        let Some(route) = req.route else {
            let keep = if req.close { End::Close } else { End::KeepAlive };
            let msg = format!("no route for {}", req.target);
            return Plan::now(error_response(404, &msg, !req.close), keep);
        };
        self.served += 1;
        let n = self.served;
        let mut plan = self.answer(route, req, bytes, start, n);
        fault::decorate(&self.cfg.faults, &mut plan, n, start);
        plan
    }

    /// The video stub's answer (`crate::video`), its body recorded in the body log; any other
    /// route is answered 404.
    fn video(&mut self, req: &Request, bytes: &[u8], start: Instant) -> Plan {
        let keep = if req.close { End::Close } else { End::KeepAlive };
        if !req.video {
            let msg = "the video stub answers POST /v1/videos/generations only";
            return Plan::now(error_response(404, msg, !req.close), keep);
        }
        self.served += 1;
        let body = req.body(bytes);
        if let Some(log) = &self.cfg.body_log {
            log.lock().unwrap_or_else(|e| e.into_inner()).push(body.to_vec());
        }
        crate::video::answer(&self.cfg.video, body, start, keep)
            .unwrap_or_else(|msg| Plan::now(error_response(400, &msg, !req.close), keep))
    }

    /// A profiler trigger: noted in the profile log, answered `profile_status` with an empty
    /// JSON object (vLLM's 200 has no body of note), outside the fault counter.
    fn profile(&self, action: ProfileAction, req: &Request) -> Plan {
        if let Some(log) = &self.cfg.profile_log {
            let hit = ProfileHit { action, received_ns: crate::config::monotonic_ns() };
            log.lock().unwrap_or_else(|e| e.into_inner()).push(hit);
        }
        let keep = if req.close { End::Close } else { End::KeepAlive };
        let bytes = match self.cfg.profile_status {
            200 => json_response(200, "OK", "{}", !req.close),
            status => error_response(status, "profiling is not enabled", !req.close),
        };
        Plan::now(bytes, keep)
    }

    /// The answer to routed request `n` with its body and connection faults (the status fault
    /// replaces the answer).
    fn answer(
        &mut self,
        route: Route,
        req: &Request,
        bytes: &[u8],
        start: Instant,
        n: u64,
    ) -> Plan {
        let body = req.body(bytes);
        let keep = if req.close { End::Close } else { End::KeepAlive };
        if let Some(s) = self.cfg.faults.status.filter(|s| n % s.every.max(1) == 0) {
            let msg = format!("injected fault: status {}", s.status);
            return Plan::now(error_response(s.status, &msg, !req.close), keep);
        }
        if self.cfg.faults.reject_stream_options && has_stream_options(body) {
            let msg = "stream_options: extra inputs are not permitted";
            return Plan::now(error_response(400, msg, !req.close), keep);
        }
        let mut plan = match self.cfg.kind {
            StubKind::Echo => match self.echo(route, body) {
                Ok(p) => p,
                Err(msg) => return Plan::now(error_response(400, &msg, !req.close), keep),
            },
            StubKind::MaxThroughput => {
                let (stream, usage) = self.finders.flags(body, self.cfg.stream_default);
                let text = "x".repeat(self.cfg.output_length);
                let reply = base_reply(
                    &self.cfg,
                    route,
                    stream,
                    usage,
                    "max-tp",
                    self.created_unix_s,
                    &text,
                );
                Plan::unpaced(render(&reply).pieces, End::KeepAlive)
            }
            StubKind::Variable => match self.variable(route, req, bytes, start) {
                Ok(p) => p,
                Err(msg) => return Plan::now(error_response(400, &msg, !req.close), keep),
            },
            // `plan` hands every video stub request to `video`.
            StubKind::Video => return self.video(req, bytes, start),
        };
        plan.end = keep;
        fault::rewrite(&self.cfg.faults, &mut plan, n);
        plan
    }

    fn echo(&self, route: Route, body: &[u8]) -> Result<Plan, String> {
        if let Some(log) = &self.cfg.body_log {
            // A poisoned lock only means another worker's test assertion panicked.
            log.lock().unwrap_or_else(|e| e.into_inner()).push(body.to_vec());
        }
        let v: Value =
            serde_json::from_slice(body).map_err(|e| format!("invalid json body: {e}"))?;
        let prompt = echo_input(route, &v)?;
        let text = match &self.cfg.answers {
            None => prompt.clone(),
            Some(table) => match table.get(&prompt) {
                Some(Some(answer)) => answer.clone(),
                Some(None) => return Ok(Plan::unpaced(Vec::new(), End::Stall)),
                None => return Err(format!("no answer for prompt {prompt:?} in the answers file")),
            },
        };
        let stream = v.get("stream").and_then(Value::as_bool).unwrap_or(self.cfg.stream_default);
        let usage = stream
            && v.pointer("/stream_options/include_usage").and_then(Value::as_bool) == Some(true);
        let model = v.get("model").and_then(Value::as_str).unwrap_or("echo");
        let mut reply =
            base_reply(&self.cfg, route, stream, usage, model, self.created_unix_s, &text);
        reply.prompt_tokens = prompt.chars().count() as u64;
        Ok(Plan::unpaced(render(&reply).pieces, End::KeepAlive))
    }

    /// The variable stub's answer: a lognormal output length and timing; with the prefix
    /// cache, a chat request's TTFT also pays for its uncached prompt tokens, and it may be
    /// answered with a tool call. `Err` is a body the prefix cache cannot read (HTTP 400).
    fn variable(
        &mut self,
        route: Route,
        req: &Request,
        bytes: &[u8],
        received: Instant,
    ) -> Result<Plan, String> {
        let body = req.body(bytes);
        if let Some(log) = &self.cfg.body_log {
            log.lock().unwrap_or_else(|e| e.into_inner()).push(body.to_vec());
        }
        let (stream, usage) = self.finders.flags(body, self.cfg.stream_default);
        let osl = self.output_len();
        let text = "x".repeat(osl);
        let turn = match (&self.cfg.variable.prefix_cache, route) {
            (Some(pc), Route::Chat) => {
                let session = header_value(&bytes[..req.head_len], &pc.session_header);
                Some(ChatTurn::parse(body, session)?)
            }
            _ => None,
        };
        let served = turn.and_then(|t| self.serve_turn(t, &text));
        let t = self.timing(received, osl, served.as_ref().map(|s| s.uncached_s));
        let mut reply = base_reply(
            &self.cfg,
            route,
            stream,
            usage,
            "variable-resp",
            self.created_unix_s,
            &text,
        );
        let rendered = match &served {
            None => render(&reply),
            Some(s) => {
                reply.prompt_tokens = s.lookup.prompt_tokens;
                match &s.tool_call {
                    Some((id, name)) => render_tool_call(&reply, ToolCall { id, name }),
                    None => render(&reply),
                }
            }
        };
        let deadlines = if stream {
            let pace =
                Pace { ttft_s: t.ttft_s, tpot_s: t.tpot_s, every: self.cfg.stream_interval.max(1) };
            stream_deadlines(&rendered, t.start, pace, route == Route::Generate)
        } else {
            vec![t.start + Duration::from_secs_f64(t.total_s.max(t.ttft_s))]
        };
        let mut plan = Plan {
            pieces: rendered.pieces,
            deadlines: Some(deadlines),
            end: End::KeepAlive,
            cache: None,
        };
        if let Some(s) = served {
            s.mark(&mut plan, received);
        }
        Ok(plan)
    }

    /// The variable stub's output length: lognormal, clamped.
    fn output_len(&mut self) -> usize {
        let v = &self.cfg.variable;
        let max = v.output_len_max.unwrap_or((2.0 * v.output_len_mean) as usize);
        (self.rng.lognormal(v.output_len_mean, v.output_len_spread).round() as usize)
            .clamp(v.output_len_min, max.max(v.output_len_min))
    }

    /// When a variable answer of `osl` characters starts, and its TTFT, TPOT and total time;
    /// `cache_s` (the prefix cache's cost of the uncached prompt) adds to the TTFT.
    fn timing(&mut self, received: Instant, osl: usize, cache_s: Option<f64>) -> Timing {
        let v = &self.cfg.variable;
        let workers = self.cfg.workers.max(1) as f64;
        let mut start = received;
        if v.response_rate_mean > 0.0 {
            // Token bucket: this worker's share of the server's response rate.
            let slot = self.rate_next.map_or(received, |t| t.max(received));
            self.rate_next = Some(slot + Duration::from_secs_f64(workers / v.response_rate_mean));
            start = slot;
        }
        let ttft_s = self.rng.lognormal(v.first_chunk_latency_s, v.first_chunk_spread)
            + cache_s.unwrap_or(0.0);
        let (tpot_s, total_s) = if v.response_rate_mean > 0.0 {
            let rate = self.rng.lognormal(v.response_rate_mean, v.response_rate_spread);
            let total = if rate > 0.0 { 1.0 / rate } else { 0.0 };
            ((total - ttft_s).max(0.0) / (osl.saturating_sub(1).max(1)) as f64, total)
        } else if v.inter_token_latency_ms > 0.0 {
            (self.rng.lognormal(v.inter_token_latency_ms, v.inter_token_spread) / 1e3, ttft_s)
        } else {
            (0.0, 0.0)
        };
        let timed =
            v.response_rate_mean > 0.0 || v.inter_token_latency_ms > 0.0 || cache_s.is_some();
        Timing { start, ttft_s: if timed { ttft_s } else { 0.0 }, tpot_s, total_s }
    }

    /// Serves a chat turn through the prefix cache, whose answer is `text` or a tool call;
    /// `None` when the stub has no prefix cache.
    fn serve_turn(&self, turn: ChatTurn, text: &str) -> Option<Served> {
        let cfg = self.cfg.variable.prefix_cache.as_ref()?;
        let cache = self.prefix_cache.as_ref()?;
        let answer = MessageParts::answer(text, turn.tool.as_deref()).id();
        // A poisoned lock only means another worker panicked mid-request; the cache's own
        // state is updated in one call and stays consistent.
        let lookup =
            cache.lock().unwrap_or_else(|e| e.into_inner()).serve(turn.key, &turn.prompt, answer);
        let uncached = lookup.prompt_tokens - lookup.cached_tokens;
        Some(Served {
            lookup,
            uncached_s: uncached as f64 * cfg.uncached_token_us / 1e6,
            tool_call: turn.tool.map(|name| (format!("call_{}", lookup.number), name)),
        })
    }
}

/// A variable answer's timing.
#[derive(Debug, Clone, Copy)]
struct Timing {
    start: Instant,
    ttft_s: f64,
    tpot_s: f64,
    total_s: f64,
}

/// A chat turn the prefix cache served.
struct Served {
    lookup: Lookup,
    /// TTFT the uncached prompt tokens cost.
    uncached_s: f64,
    /// (id, function name) when the answer is a tool call.
    tool_call: Option<(String, String)>,
}

impl Served {
    /// Records the cache's decision in a planned answer: in `plan.cache` (for the send log)
    /// and as headers after its status line, `x-stub-prompt-tokens`, `x-stub-cached-tokens`
    /// and `x-stub-ttft-ns` (from the request being whole to the first byte's deadline).
    fn mark(self, plan: &mut Plan, received: Instant) {
        let first = plan.deadlines.as_ref().and_then(|d| d.first()).copied();
        let o = CacheOutcome {
            prompt_tokens: self.lookup.prompt_tokens,
            cached_tokens: self.lookup.cached_tokens,
            ttft_ns: first.map_or(0, |d| d.saturating_duration_since(received).as_nanos() as u64),
            tool_call: self.tool_call.is_some(),
        };
        let headers = format!(
            "x-stub-prompt-tokens: {}\r\nx-stub-cached-tokens: {}\r\nx-stub-ttft-ns: {}\r\n",
            o.prompt_tokens, o.cached_tokens, o.ttft_ns
        );
        if let Some(head) = plan.pieces.first_mut() {
            insert_headers(head, &headers);
        }
        plan.cache = Some(o);
    }
}

/// Deadlines of a rendered stream: the head goes with the first content event at the TTFT;
/// content event k at TTFT + k × interval × TPOT (computed from the start, so no drift). The
/// tail goes right after the last content event, or, when it carries the last content event
/// itself (SGLang), at that event's own deadline.
fn stream_deadlines(r: &Rendered, start: Instant, pace: Pace, tail_event: bool) -> Vec<Instant> {
    let first = start + Duration::from_secs_f64(pace.ttft_s);
    let at = |k: usize| first + Duration::from_secs_f64(pace.tpot_s * (k * pace.every) as f64);
    let contents = r.pieces.len().saturating_sub(2);
    let mut out = Vec::with_capacity(r.pieces.len());
    out.push(first);
    out.extend((0..contents).map(at));
    out.push(if tail_event { at(contents) } else { at(contents.saturating_sub(1)) });
    out
}

/// The timing of one paced stream.
#[derive(Debug, Clone, Copy)]
struct Pace {
    ttft_s: f64,
    tpot_s: f64,
    every: usize,
}

/// The body names a `stream_options` key (a byte search: a stub's test of what a client sent,
/// not a JSON parse).
fn has_stream_options(body: &[u8]) -> bool {
    memchr::memmem::find(body, b"\"stream_options\"").is_some()
}

/// The text the echo stub answers with. Token-id prompts (`/v1/completions` `prompt: [ids]`,
/// `/generate` `input_ids`) echo one `x` per id.
fn echo_input(route: Route, v: &Value) -> Result<String, String> {
    match route {
        Route::Chat => {
            let messages = v.get("messages").and_then(Value::as_array);
            let user = messages
                .and_then(|m| {
                    m.iter().find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
                })
                .ok_or_else(|| "no user message in messages".to_string())?;
            Ok(content_text(user.get("content").unwrap_or(&Value::Null)))
        }
        Route::Completions => match v.get("prompt") {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(Value::Array(a)) => Ok(match a.first() {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(ids)) => "x".repeat(ids.len()),
                _ => "x".repeat(a.len()),
            }),
            _ => Err("missing prompt".to_string()),
        },
        Route::Generate => match (v.get("text"), v.get("input_ids")) {
            (Some(Value::String(s)), _) => Ok(s.clone()),
            (_, Some(Value::Array(ids))) => Ok("x".repeat(ids.len())),
            _ => Err("missing text or input_ids".to_string()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::frame_request;

    fn echo_handler(configure: impl FnOnce(&mut StubConfig)) -> Handler {
        let mut cfg = StubConfig::new(StubKind::Echo);
        configure(&mut cfg);
        Handler {
            cfg,
            created_unix_s: 7,
            finders: FlagFinders::default(),
            rng: Rng::new(0),
            served: 0,
            rate_next: None,
            prefix_cache: None,
        }
    }

    /// The bytes the handler answers to a chat request with `body`.
    fn answer(h: &mut Handler, body: &str) -> String {
        let raw = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let crate::http::Frame::Complete(req) = frame_request(raw.as_bytes()) else {
            panic!("not framed")
        };
        let plan = h.plan(&req, raw.as_bytes(), Instant::now());
        String::from_utf8(plan.pieces.concat()).unwrap()
    }

    #[test]
    fn the_answer_table_answers_stalls_or_refuses_by_prompt() {
        let table: std::collections::HashMap<String, Option<String>> =
            [("hi".to_string(), Some("The answer is (B)".to_string())), ("mute".into(), None)]
                .into_iter()
                .collect();
        let mut h = echo_handler(|c| c.answers = Some(std::sync::Arc::new(table)));
        let text = answer(&mut h, PLAIN);
        assert!(text.contains("The answer is (B)") && !text.contains("\"hi\""), "{text}");
        assert!(text.contains("\"prompt_tokens\":2"), "usage counts the prompt: {text}");
        let mute = r#"{"messages":[{"role":"user","content":"mute"}]}"#;
        assert_eq!(answer(&mut h, mute), "", "a null answer is never sent");
        let other = r#"{"messages":[{"role":"user","content":"other"}]}"#;
        assert!(answer(&mut h, other).starts_with("HTTP/1.1 400"), "not in the table");
    }

    const ASKS_USAGE: &str = r#"{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}"#;
    const PLAIN: &str = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
    const STREAM: &str = r#"{"messages":[{"role":"user","content":"hi"}],"stream":true}"#;

    #[test]
    fn no_stream_usage_drops_the_usage_frame_but_not_the_plain_usage() {
        let mut h = echo_handler(|c| c.faults.no_stream_usage = true);
        let stream = answer(&mut h, ASKS_USAGE);
        assert!(stream.contains("[DONE]") && !stream.contains("\"usage\""), "{stream}");
        let plain = answer(&mut h, PLAIN);
        assert!(plain.contains("\"completion_tokens\":2"), "{plain}");
        let mut normal = echo_handler(|_| {});
        assert!(answer(&mut normal, ASKS_USAGE).contains("\"completion_tokens\":2"));
    }

    #[test]
    fn reject_stream_options_answers_400_only_to_requests_that_carry_it() {
        let mut h = echo_handler(|c| c.faults.reject_stream_options = true);
        let refused = answer(&mut h, ASKS_USAGE);
        assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
        assert!(refused.contains("stream_options"), "{refused}");
        let stream = answer(&mut h, STREAM);
        assert!(stream.starts_with("HTTP/1.1 200") && stream.contains("[DONE]"), "{stream}");
    }

    #[test]
    fn precompiled_bytes_equal_the_dynamic_path() {
        let cfg = StubConfig::new(StubKind::MaxThroughput);
        let table = Precompiled::build(&cfg, 7);
        let mut h = Handler {
            cfg,
            created_unix_s: 7,
            finders: FlagFinders::default(),
            rng: Rng::new(0),
            served: 0,
            rate_next: None,
            prefix_cache: None,
        };
        for route in Route::ALL {
            let path = match route {
                Route::Chat => "/v1/chat/completions",
                Route::Completions => "/v1/completions",
                Route::Generate => "/generate",
            };
            for (stream, usage) in [(false, false), (true, false), (true, true)] {
                let body = format!(
                    "{{\"stream\":{stream},\"stream_options\":{{\"include_usage\":{usage}}}}}"
                );
                let raw =
                    format!("POST {path} HTTP/1.1\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                let crate::http::Frame::Complete(req) = frame_request(raw.as_bytes()) else {
                    panic!("not framed")
                };
                let plan = h.plan(&req, raw.as_bytes(), Instant::now());
                assert_eq!(plan.pieces.concat(), table.get(route, stream, usage), "{path}");
            }
        }
    }
}
