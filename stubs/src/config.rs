//! Stub server configuration: which stub, where it listens, and the fault modes it injects.

use std::net::{IpAddr, Ipv4Addr};

/// Which stub server to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StubKind {
    /// Answers with the request's own input; usage counts characters.
    Echo,
    /// Answers every request with precompiled bytes, as fast as possible.
    MaxThroughput,
    /// Lognormal output lengths and timings (TTFT, per-token delays, or a response rate).
    Variable,
    /// Answers `POST /v1/videos/generations` only (`crate::video`).
    Video,
}

/// The video stub's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VideoConfig {
    /// Time from a whole request to its answer (a video takes minutes on a real server).
    pub delay: std::time::Duration,
    /// Answer raw mp4 bytes (`Content-Type: video/mp4`), whatever the request asks.
    pub raw_mp4: bool,
    /// The directory the `video_path` answers name (nothing is written there).
    pub video_dir: String,
}

impl Default for VideoConfig {
    fn default() -> Self {
        VideoConfig {
            delay: std::time::Duration::ZERO,
            raw_mp4: false,
            video_dir: "/tmp/videos".into(),
        }
    }
}

/// Distribution and timing settings of the variable stub (reference §7.3).
#[derive(Debug, Clone, PartialEq)]
pub struct VariableConfig {
    /// Mean output length in characters.
    pub output_len_mean: f64,
    /// Coefficient of variation of the output length (0 = fixed).
    pub output_len_spread: f64,
    /// Lower clamp of the output length.
    pub output_len_min: usize,
    /// Upper clamp of the output length; `None` means twice the mean.
    pub output_len_max: Option<usize>,
    /// Responses per second over the whole server (0 = off: ICL mode or instant).
    pub response_rate_mean: f64,
    /// Coefficient of variation of the per-request rate.
    pub response_rate_spread: f64,
    /// Mean time per output character in milliseconds (0 = off).
    pub inter_token_latency_ms: f64,
    /// Coefficient of variation of the per-request inter-token latency.
    pub inter_token_spread: f64,
    /// Mean time to the first chunk in seconds.
    pub first_chunk_latency_s: f64,
    /// Coefficient of variation of the time to the first chunk.
    pub first_chunk_spread: f64,
    /// Requests in service at once over the whole server (0 = unlimited); split across workers.
    /// With one worker this is the slotted stub (`stub variable --slots N`): N slots and one
    /// first-in, first-out queue, so throughput saturates at N / service time.
    pub max_concurrency: usize,
    /// Seed of worker 0's generator; worker i uses `seed + i`.
    pub seed: u64,
    /// Model a server with a prefix cache (chat requests only); `None` = off.
    pub prefix_cache: Option<PrefixCacheConfig>,
}

/// The variable stub's prefix-cache mode (`stub variable --prefix-cache`): a chat request's
/// time to first token is the first-chunk latency plus `uncached_token_us` per prompt token not
/// already cached for its conversation, and a request that offers tools after a user message
/// is answered with a tool call.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefixCacheConfig {
    /// Microseconds of time to first token per prompt token not in the cache.
    pub uncached_token_us: f64,
    /// Prompt tokens the cache holds over all conversations; the least recently used
    /// conversations are evicted past it.
    pub cache_tokens: u64,
    /// The request header whose value names the conversation (case-insensitive); a request
    /// without it is keyed by its first message.
    pub session_header: String,
}

impl Default for PrefixCacheConfig {
    fn default() -> Self {
        Self {
            uncached_token_us: 100.0,
            cache_tokens: 1_000_000,
            session_header: "X-Session-ID".to_string(),
        }
    }
}

impl Default for VariableConfig {
    fn default() -> Self {
        Self {
            output_len_mean: 1000.0,
            output_len_spread: 0.3,
            output_len_min: 0,
            output_len_max: None,
            response_rate_mean: 0.0,
            response_rate_spread: 0.0,
            inter_token_latency_ms: 0.0,
            inter_token_spread: 0.0,
            first_chunk_latency_s: 0.0,
            first_chunk_spread: 0.2,
            max_concurrency: 0,
            seed: 0,
            prefix_cache: None,
        }
    }
}

/// How the usage counts of a response are corrupted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageFault {
    /// `true` instead of each count.
    Bool,
    /// A float such as `10.5` instead of each count.
    Float,
    /// A string such as `"10"` instead of each count.
    String,
    /// The count negated.
    Negative,
    /// A count above 10,000,000.
    Huge,
    /// No usage object at all (and no usage-only frame).
    Missing,
}

/// An HTTP error status answered instead of the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatusFault {
    /// The status code, e.g. 429 or 500.
    pub status: u16,
    /// Every `every`-th request of a worker (1-based) gets the status; 1 = all of them.
    pub every: u64,
}

/// How a truncated stream is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TruncateFraming {
    /// No Content-Length and no chunked encoding, `Connection: close`: the body ends where the
    /// connection does, so only the missing finish tells the client it was cut.
    CloseDelimited,
    /// Chunked, and the connection closes before the last (zero-length) chunk.
    Chunked,
}

/// A stream cut after some of its content frames: no finish_reason, no `[DONE]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncateFault {
    /// Every `every`-th request (1 = all).
    pub every: u64,
    /// Content frames sent before the cut (clamped to the frames the response has); a plain
    /// body keeps its first half.
    pub after_frames: usize,
    /// How the body is framed.
    pub framing: TruncateFraming,
}

/// A delay before the response of every `every`-th request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayFault {
    /// Milliseconds between having the request and writing the first byte.
    pub delay_ms: u64,
    /// Every `every`-th request (1 = all).
    pub every: u64,
}

/// Fault modes for tests; all off by default. Request counters are per worker thread, so with
/// one worker every count is exact. Each `*_every: Some(n)` hits requests n, 2n, … (1 = all).
/// When several hit one request, the first in this order wins: status, no_response,
/// close_after_request, stall_after_head, close_mid_stream, stall, error_only_stream,
/// vllm_error, error_frame_mid_stream, truncate, finish_without_done; multi_line_data, extra_headers,
/// interim_responses and delay combine with any of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultConfig {
    /// Every Nth SSE content frame of a stream (1-based) is replaced by a malformed line.
    pub malformed_every: Option<u64>,
    /// Usage counts of the wrong kind.
    pub usage: Option<UsageFault>,
    /// HTTP 429/500 for a deterministic fraction of requests.
    pub status: Option<StatusFault>,
    /// Every Nth request: the connection is closed halfway through the response.
    pub close_mid_stream_every: Option<u64>,
    /// Every Nth request: the response stops halfway without closing, until the client gives
    /// up or the server stops.
    pub stall_every: Option<u64>,
    /// Every Nth request: the response head, then nothing (the connection stays open).
    pub stall_after_head_every: Option<u64>,
    /// Every Nth request: read, never answered (the connection stays open).
    pub no_response_every: Option<u64>,
    /// Every Nth request: read, then the connection closes without a byte of response.
    pub close_after_request_every: Option<u64>,
    /// Every Nth request: a stream sends half its content frames, then an `error` frame and
    /// `[DONE]` (as vLLM does on an engine error); a plain answer is a 200 `{"error": …}` body.
    pub error_frame_mid_stream_every: Option<u64>,
    /// Every Nth request: a stream holding only the error frame and `[DONE]`; a plain answer is
    /// the same 200 `{"error": …}` body.
    pub error_only_stream_every: Option<u64>,
    /// Every Nth request: a stream holding only vLLM's unwrapped error object
    /// (`fault::VLLM_ERROR_OBJECT`, no `error` key) and `[DONE]`; a plain answer is a 200 body
    /// of that object.
    pub vllm_error_every: Option<u64>,
    /// A stream cut after K content frames.
    pub truncate: Option<TruncateFault>,
    /// Every Nth request: a finished stream (finish_reason, usage when asked, the last chunk)
    /// without the `data: [DONE]` line.
    pub finish_without_done_every: Option<u64>,
    /// Every Nth request: each JSON event of a stream is split over two `data:` lines (legal
    /// SSE: a client joins them with `\n`, which is JSON whitespace).
    pub multi_line_data_every: Option<u64>,
    /// Extra response headers on every routed response (`X-Stub-Extra-1: …` …).
    pub extra_headers: usize,
    /// Every routed response is preceded by the interim answers `fault::INTERIM_RESPONSES`
    /// (`103 Early Hints`, then `100 Continue`), as a server may send them unasked
    /// (RFC 9110 §15.2).
    pub interim_responses: bool,
    /// A delay before the response.
    pub delay: Option<DelayFault>,
    /// Streams carry no usage frame even when the request asks with `stream_options` (as a
    /// server that ignores the field); non-streaming bodies keep their usage.
    pub no_stream_usage: bool,
    /// A request whose body holds a `stream_options` key is answered HTTP 400 (as a server
    /// whose schema forbids unknown fields).
    pub reject_stream_options: bool,
}

impl FaultConfig {
    /// True when any fault is configured, so the precompiled fast path cannot be used.
    pub fn any(&self) -> bool {
        let everies = [
            self.malformed_every,
            self.close_mid_stream_every,
            self.stall_every,
            self.stall_after_head_every,
            self.no_response_every,
            self.close_after_request_every,
            self.error_frame_mid_stream_every,
            self.error_only_stream_every,
            self.vllm_error_every,
            self.finish_without_done_every,
            self.multi_line_data_every,
        ];
        everies.iter().any(Option::is_some)
            || self.usage.is_some()
            || self.status.is_some()
            || self.truncate.is_some()
            || self.extra_headers > 0
            || self.interim_responses
            || self.delay.is_some()
            || self.no_stream_usage
            || self.reject_stream_options
    }
}

/// Everything a stub server needs to start.
#[derive(Debug, Clone)]
pub struct StubConfig {
    /// Which stub.
    pub kind: StubKind,
    /// Address to listen on (127.0.0.1 by default).
    pub host: IpAddr,
    /// Port to listen on; 0 picks a free one.
    pub port: u16,
    /// Worker threads, each with its own SO_REUSEPORT listener and monoio runtime.
    pub workers: usize,
    /// Whether to stream when the request body does not say.
    pub stream_default: bool,
    /// Characters per SSE content event.
    pub stream_interval: usize,
    /// Output length in characters (max-throughput stub).
    pub output_length: usize,
    /// Settings of the variable stub.
    pub variable: VariableConfig,
    /// Fault modes.
    pub faults: FaultConfig,
    /// Print requests/s and MB/s on stderr once a second.
    pub stats: bool,
    /// Pin worker i to core `pin_cores[i % len]`.
    pub pin_cores: Option<Vec<usize>>,
    /// The `created` field of every response; `None` uses the server's start time.
    pub created_unix_s: Option<u64>,
    /// Where the echo and variable stubs append every request body they answer (tests that
    /// check the bytes a client sent); `None` records nothing.
    pub body_log: Option<BodyLog>,
    /// Where every stub appends each request's head (request line and headers), for tests
    /// that check the headers a client sent; `None` records nothing.
    pub head_log: Option<BodyLog>,
    /// Where every stub appends, per paced or fault-rendered response (not the max-throughput
    /// stub's precompiled bytes), when it had the request and when it wrote each piece (its own
    /// stamps, CLOCK_MONOTONIC as the client's), for tests that compare a client's timing with
    /// the server's rather than with the configured delays (a profiler trigger's entry has an
    /// empty body); `None` records nothing.
    pub send_log: Option<SendLog>,
    /// Serve TLS (`https://`) with a certificate made at start for `localhost`, `127.0.0.1` and
    /// `::1`, signed by a throwaway CA (`StubServer::ca_pem`).
    pub tls: bool,
    /// The echo stub's answer table (`stub echo --answers FILE`): each prompt's answer; a
    /// `None` answer is never sent (the request stalls), a prompt not in the table gets HTTP
    /// 500. `None` echoes as usual.
    pub answers: Option<AnswerTable>,
    /// Where every stub appends each profiler trigger it answers (`POST /start_profile`,
    /// `POST /stop_profile`, vLLM's), for tests that check when a client profiled the server;
    /// `None` records nothing.
    pub profile_log: Option<ProfileLog>,
    /// The status the profiler triggers get: 200 (vLLM started with a profiler), or another,
    /// answered as an error (404: vLLM started without one).
    pub profile_status: u16,
    /// The video stub's answers and delay (`StubKind::Video`).
    pub video: VideoConfig,
}

/// The profiler triggers a stub answered, in order, shared with the test that reads them.
pub type ProfileLog = std::sync::Arc<std::sync::Mutex<Vec<ProfileHit>>>;

/// One profiler trigger as the stub saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileHit {
    pub action: crate::http::ProfileAction,
    /// When the request was whole (CLOCK_MONOTONIC, as `SentResponse::received_ns`).
    pub received_ns: u64,
}

/// Prompt → answer, read from a JSON object file (`load_answers`).
pub type AnswerTable = std::sync::Arc<std::collections::HashMap<String, Option<String>>>;

/// Reads an answer table: a JSON object whose values are strings (the answer) or null (no
/// answer at all).
pub fn load_answers(path: &std::path::Path) -> Result<AnswerTable, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read answers file {}: {e}", path.display()))?;
    let map: std::collections::HashMap<String, Option<String>> = serde_json::from_str(&text)
        .map_err(|e| {
            format!(
                "answers file {} is not a JSON object of prompt to answer (string or null): {e}",
                path.display()
            )
        })?;
    Ok(std::sync::Arc::new(map))
}

/// Request bodies recorded by the echo stub, shared with the test that reads them.
pub type BodyLog = std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>;

/// The stub's own stamps of its responses, in the order they were written.
pub type SendLog = std::sync::Arc<std::sync::Mutex<Vec<SentResponse>>>;

/// One response as the stub sent it. Stamps are CLOCK_MONOTONIC nanoseconds (`monotonic_ns`),
/// the clock a client on the same host stamps with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentResponse {
    /// The request's body (a test finds the sample by its prompt).
    pub body: Vec<u8>,
    /// When the request was whole: the response's clock starts here, or at `slot_ns`.
    pub received_ns: u64,
    /// Under `--max-concurrency` / `--slots`: when the request left the queue and took its
    /// slot (its deadlines count from here); `None` without a limit.
    pub slot_ns: Option<u64>,
    /// Per piece of the response (a stream's head, each content event, its tail), just before
    /// the write that carried it: its bytes could not reach the client earlier.
    /// Pieces written together share a stamp (a stream's head goes with its first event).
    pub written_ns: Vec<u64>,
    /// What the prefix cache decided for this request (`--prefix-cache` chat requests only).
    pub prefix_cache: Option<crate::prefix_cache::CacheOutcome>,
}

impl SentResponse {
    /// A response about to be written: its request, when that was whole, nothing written yet.
    pub fn received(
        body: Vec<u8>,
        received_ns: u64,
        prefix_cache: Option<crate::prefix_cache::CacheOutcome>,
    ) -> SentResponse {
        SentResponse { body, received_ns, slot_ns: None, written_ns: Vec::new(), prefix_cache }
    }
}

/// CLOCK_MONOTONIC in nanoseconds (what `Instant` reads on Linux, as a number).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    debug_assert_eq!(rc, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl StubConfig {
    /// The reference's defaults: output length 160, stream interval 10, one worker, loopback,
    /// port 0.
    pub fn new(kind: StubKind) -> Self {
        Self {
            kind,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            workers: 1,
            stream_default: false,
            stream_interval: 10,
            output_length: 160,
            variable: VariableConfig::default(),
            faults: FaultConfig::default(),
            stats: false,
            pin_cores: None,
            created_unix_s: None,
            body_log: None,
            head_log: None,
            send_log: None,
            tls: false,
            answers: None,
            profile_log: None,
            profile_status: 200,
            video: VideoConfig::default(),
        }
    }
}
