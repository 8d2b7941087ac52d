//! The `llm-loadgen stub echo|max-throughput|variable|video` command: flags as the reference's stub
//! servers, plus fault modes; serves until SIGINT or SIGTERM.

use std::io::Write as _;
use std::net::IpAddr;

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand, ValueEnum};
use nix::sys::signal::{SigSet, Signal};

use crate::{
    DelayFault, FaultConfig, PrefixCacheConfig, StatusFault, StubConfig, StubKind, StubServer,
    TruncateFault, TruncateFraming, UsageFault,
};

/// Which stub server to run.
#[derive(Debug, Clone, Subcommand)]
pub enum StubCommand {
    /// Answers with the first user message (chat), the prompt (completions) or the text
    /// (SGLang); usage counts characters.
    Echo(EchoArgs),
    /// Precompiled responses as fast as the machine allows (the roofline stub).
    MaxThroughput(MaxThroughputArgs),
    /// Lognormal output lengths, TTFT and per-token delays, or a response rate; with
    /// --prefix-cache, a server whose TTFT pays for the prompt tokens it has not cached.
    Variable(VariableArgs),
    /// trtllm-serve's POST /v1/videos/generations: after --delay-ms, a video path, a base64
    /// video when the request asks response_format video_bytes, or raw mp4 bytes (--raw-mp4).
    Video(VideoArgs),
}

/// Flags every stub takes.
#[derive(Debug, Clone, Args)]
pub struct CommonArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 12345)]
    pub port: u16,
    /// Worker threads (one SO_REUSEPORT listener and io_uring loop each).
    #[arg(long = "num-workers", short = 'w')]
    pub num_workers: Option<usize>,
    /// Stream (SSE) when the request body does not say.
    #[arg(long)]
    pub stream: bool,
    /// Characters per SSE content event.
    #[arg(long, default_value_t = 10)]
    pub stream_interval: usize,
    /// Print requests/s and MB/s on stderr once a second.
    #[arg(long)]
    pub stats: bool,
    /// Pin worker i to the i-th of these cores (comma-separated, cycled).
    #[arg(long, value_delimiter = ',')]
    pub pin_cores: Option<Vec<usize>>,
    /// Serve https:// with a certificate made at start for localhost, 127.0.0.1 and ::1.
    #[arg(long)]
    pub tls: bool,
    /// Write the PEM certificate of the CA that signed the --tls certificate to FILE (what a
    /// client trusts to verify the stub).
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub tls_cert_out: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub faults: FaultArgs,
}

/// Fault modes, for testing clients.
#[derive(Debug, Clone, Args)]
pub struct FaultArgs {
    /// Every Nth SSE content frame of a stream is malformed.
    #[arg(long, value_name = "N")]
    pub fault_malformed_every: Option<u64>,
    /// Usage counts of the wrong kind.
    #[arg(long, value_enum)]
    pub fault_usage: Option<UsageFaultArg>,
    /// Answer this HTTP status instead of a response (with --fault-status-fraction).
    #[arg(long, value_parser = clap::value_parser!(u16).range(400..600))]
    pub fault_status: Option<u16>,
    /// Fraction of requests that get --fault-status: every round(1/F)-th request per worker.
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    pub fault_status_fraction: f64,
    /// Every Nth request: close the connection halfway through the response.
    #[arg(long, value_name = "N")]
    pub fault_close_mid_stream_every: Option<u64>,
    /// Every Nth request: stop sending halfway, without closing.
    #[arg(long, value_name = "N")]
    pub fault_stall_every: Option<u64>,
    /// Every Nth request: send the response head, then nothing (the connection stays open).
    #[arg(long, value_name = "N")]
    pub fault_stall_after_head_every: Option<u64>,
    /// Every Nth request: read it and never answer (the connection stays open).
    #[arg(long, value_name = "N")]
    pub fault_no_response_every: Option<u64>,
    /// Every Nth request: read it, then close the connection without a byte.
    #[arg(long, value_name = "N")]
    pub fault_close_after_request_every: Option<u64>,
    /// Every Nth request: half the stream, then an SSE error frame and [DONE] (a 200 error body
    /// when not streaming).
    #[arg(long, value_name = "N")]
    pub fault_error_frame_mid_stream_every: Option<u64>,
    /// Every Nth request: a stream holding only the error frame and [DONE].
    #[arg(long, value_name = "N")]
    pub fault_error_only_stream_every: Option<u64>,
    /// Every Nth request: a stream holding only vLLM's unwrapped error object (no `error` key)
    /// and [DONE] (a 200 body of it when not streaming).
    #[arg(long, value_name = "N")]
    pub fault_vllm_error_every: Option<u64>,
    /// Every Nth request: cut the stream after --fault-truncate-after content frames and close.
    #[arg(long, value_name = "N")]
    pub fault_truncate_stream_every: Option<u64>,
    /// Content frames a truncated stream sends before the cut.
    #[arg(long, value_name = "K", default_value_t = 3)]
    pub fault_truncate_after: usize,
    /// Framing of a truncated stream.
    #[arg(long, value_enum, default_value = "chunked")]
    pub fault_truncate_framing: TruncateFramingArg,
    /// Every Nth request: a finished stream without the `data: [DONE]` line.
    #[arg(long, value_name = "N")]
    pub fault_finish_without_done_every: Option<u64>,
    /// Every Nth request: each JSON event split over two `data:` lines.
    #[arg(long, value_name = "N")]
    pub fault_multi_line_data_every: Option<u64>,
    /// Add N response headers to every answer.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub fault_extra_headers: usize,
    /// Send `103 Early Hints` and `100 Continue` before every answer.
    #[arg(long)]
    pub fault_interim_responses: bool,
    /// Wait this many milliseconds before answering (every Nth request, N from --fault-delay-every).
    #[arg(long, value_name = "MS")]
    pub fault_delay_ms: Option<u64>,
    /// Which requests --fault-delay-ms delays: every Nth.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub fault_delay_every: u64,
    /// Streams carry no usage frame even when asked with stream_options (plain bodies keep
    /// theirs).
    #[arg(long)]
    pub fault_no_stream_usage: bool,
    /// Answer HTTP 400 to any request whose body holds a stream_options key.
    #[arg(long)]
    pub fault_reject_stream_options: bool,
}

/// `--fault-truncate-framing` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TruncateFramingArg {
    /// No Content-Length, not chunked, `Connection: close`.
    Close,
    /// Chunked without the last chunk.
    Chunked,
}

/// `--fault-usage` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum UsageFaultArg {
    /// `true` for each count.
    Bool,
    /// `N.5` for each count.
    Float,
    /// `"N"` for each count.
    String,
    /// `-(N+1)` for each count.
    Negative,
    /// `10000001+N` for each count.
    Huge,
    /// No usage at all.
    Missing,
}

/// `stub echo` flags.
#[derive(Debug, Clone, Args)]
pub struct EchoArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Answer each prompt from a JSON object file of prompt -> answer instead of echoing it
    /// (null: never answer; a prompt not in the file gets HTTP 400)
    #[arg(long, value_name = "FILE")]
    pub answers: Option<std::path::PathBuf>,
}

/// `stub video` flags.
#[derive(Debug, Clone, Args)]
pub struct VideoArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to listen on (0 picks a free one).
    #[arg(long, default_value_t = 12345)]
    pub port: u16,
    /// Worker threads (one SO_REUSEPORT listener and io_uring loop each).
    #[arg(long = "num-workers", short = 'w', default_value_t = 1)]
    pub num_workers: usize,
    /// Milliseconds from a whole request to its answer.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub delay_ms: u64,
    /// Answer the raw bytes of a tiny mp4 (Content-Type: video/mp4) instead of JSON.
    #[arg(long)]
    pub raw_mp4: bool,
    /// The directory the video_path answers name (nothing is written there).
    #[arg(long, value_name = "DIR", default_value = "/tmp/videos")]
    pub video_dir: String,
}

/// `stub max-throughput` flags.
#[derive(Debug, Clone, Args)]
pub struct MaxThroughputArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Output length in characters.
    #[arg(long, default_value_t = 160)]
    pub output_length: usize,
}

/// `stub variable` flags (reference §7.3).
#[derive(Debug, Clone, Args)]
pub struct VariableArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Mean output length in characters.
    #[arg(long, default_value_t = 1000.0)]
    pub output_len_mean: f64,
    /// Coefficient of variation of the output length.
    #[arg(long, default_value_t = 0.3)]
    pub output_len_spread: f64,
    /// Smallest output length.
    #[arg(long, default_value_t = 0)]
    pub output_len_min: usize,
    /// Largest output length (default twice the mean).
    #[arg(long)]
    pub output_len_max: Option<usize>,
    /// Responses per second over the server (0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub response_rate_mean: f64,
    /// Coefficient of variation of the per-request rate.
    #[arg(long, default_value_t = 0.0)]
    pub response_rate_spread: f64,
    /// Mean time per output character, milliseconds (0 = off).
    #[arg(long, default_value_t = 0.0)]
    pub inter_token_latency: f64,
    /// Coefficient of variation of the per-request inter-token latency.
    #[arg(long, default_value_t = 0.0)]
    pub inter_token_spread: f64,
    /// Mean time to the first chunk, seconds.
    #[arg(long, default_value_t = 0.0)]
    pub first_chunk_latency: f64,
    /// Coefficient of variation of the time to the first chunk.
    #[arg(long, default_value_t = 0.2)]
    pub first_chunk_spread: f64,
    /// Requests in service at once over the server (0 = unlimited).
    #[arg(long, default_value_t = 0)]
    pub max_concurrency: usize,
    /// A server with N slots and one first-in, first-out queue: one worker, N requests in
    /// service at once, so throughput saturates at N / service time (a known knee).
    #[arg(long, value_name = "N", conflicts_with = "max_concurrency")]
    pub slots: Option<usize>,
    /// Seed of worker 0's generator (worker i uses seed + i).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Act as a server with a prefix cache (chat requests): TTFT is --first-chunk-latency plus
    /// --uncached-token-us per prompt token not cached for the conversation; a request that
    /// offers tools after a user message is answered with a tool call.
    #[arg(long)]
    pub prefix_cache: bool,
    /// Microseconds of TTFT per uncached prompt token (a token: 4 bytes of message text).
    #[arg(
        long,
        value_name = "US",
        default_value_t = 100.0,
        requires = "prefix_cache",
        allow_negative_numbers = true
    )]
    pub uncached_token_us: f64,
    /// Prompt tokens the cache holds over all conversations; the least recently used are
    /// evicted past it.
    #[arg(long, value_name = "TOKENS", default_value_t = 1_000_000, requires = "prefix_cache")]
    pub cache_tokens: u64,
    /// Request header that names the conversation (without it: the first message does).
    #[arg(long, value_name = "NAME", default_value = "X-Session-ID", requires = "prefix_cache")]
    pub session_header: String,
}

impl VariableArgs {
    fn prefix_cache(&self) -> anyhow::Result<Option<PrefixCacheConfig>> {
        if !self.prefix_cache {
            return Ok(None);
        }
        let us = self.uncached_token_us;
        if !(us.is_finite() && us >= 0.0) {
            bail!("--uncached-token-us must be a number of microseconds at least 0, got {us}");
        }
        if self.session_header.is_empty() {
            bail!("--session-header must name a header, got an empty name");
        }
        Ok(Some(PrefixCacheConfig {
            uncached_token_us: us,
            cache_tokens: self.cache_tokens,
            session_header: self.session_header.clone(),
        }))
    }
}

impl FaultArgs {
    fn to_config(&self) -> anyhow::Result<FaultConfig> {
        let every = |n: Option<u64>, flag: &str| match n {
            Some(0) => bail!("{flag} must be at least 1, got 0"),
            other => Ok(other),
        };
        let status = match self.fault_status {
            None => None,
            Some(status) => {
                let f = self.fault_status_fraction;
                if !(f > 0.0 && f <= 1.0) {
                    bail!("--fault-status-fraction must be in (0, 1], got {f}");
                }
                Some(StatusFault { status, every: (1.0 / f).round().max(1.0) as u64 })
            }
        };
        Ok(FaultConfig {
            malformed_every: every(self.fault_malformed_every, "--fault-malformed-every")?,
            usage: self.fault_usage.map(|u| match u {
                UsageFaultArg::Bool => UsageFault::Bool,
                UsageFaultArg::Float => UsageFault::Float,
                UsageFaultArg::String => UsageFault::String,
                UsageFaultArg::Negative => UsageFault::Negative,
                UsageFaultArg::Huge => UsageFault::Huge,
                UsageFaultArg::Missing => UsageFault::Missing,
            }),
            status,
            close_mid_stream_every: every(
                self.fault_close_mid_stream_every,
                "--fault-close-mid-stream-every",
            )?,
            stall_every: every(self.fault_stall_every, "--fault-stall-every")?,
            stall_after_head_every: every(
                self.fault_stall_after_head_every,
                "--fault-stall-after-head-every",
            )?,
            no_response_every: every(self.fault_no_response_every, "--fault-no-response-every")?,
            close_after_request_every: every(
                self.fault_close_after_request_every,
                "--fault-close-after-request-every",
            )?,
            error_frame_mid_stream_every: every(
                self.fault_error_frame_mid_stream_every,
                "--fault-error-frame-mid-stream-every",
            )?,
            error_only_stream_every: every(
                self.fault_error_only_stream_every,
                "--fault-error-only-stream-every",
            )?,
            vllm_error_every: every(self.fault_vllm_error_every, "--fault-vllm-error-every")?,
            truncate: self.truncate()?,
            finish_without_done_every: every(
                self.fault_finish_without_done_every,
                "--fault-finish-without-done-every",
            )?,
            multi_line_data_every: every(
                self.fault_multi_line_data_every,
                "--fault-multi-line-data-every",
            )?,
            extra_headers: self.fault_extra_headers,
            interim_responses: self.fault_interim_responses,
            delay: self.delay()?,
            no_stream_usage: self.fault_no_stream_usage,
            reject_stream_options: self.fault_reject_stream_options,
        })
    }

    fn truncate(&self) -> anyhow::Result<Option<TruncateFault>> {
        let Some(every) = self.fault_truncate_stream_every else { return Ok(None) };
        if every == 0 {
            bail!("--fault-truncate-stream-every must be at least 1, got 0");
        }
        let framing = match self.fault_truncate_framing {
            TruncateFramingArg::Close => TruncateFraming::CloseDelimited,
            TruncateFramingArg::Chunked => TruncateFraming::Chunked,
        };
        Ok(Some(TruncateFault { every, after_frames: self.fault_truncate_after, framing }))
    }

    fn delay(&self) -> anyhow::Result<Option<DelayFault>> {
        let Some(delay_ms) = self.fault_delay_ms else { return Ok(None) };
        if self.fault_delay_every == 0 {
            bail!("--fault-delay-every must be at least 1, got 0");
        }
        Ok(Some(DelayFault { delay_ms, every: self.fault_delay_every }))
    }
}

fn common_config(
    kind: StubKind,
    c: &CommonArgs,
    workers_default: usize,
) -> anyhow::Result<StubConfig> {
    if c.stream_interval == 0 {
        bail!("--stream-interval must be at least 1, got 0");
    }
    let mut cfg = StubConfig::new(kind);
    cfg.host = c.host;
    cfg.port = c.port;
    cfg.workers = c.num_workers.unwrap_or(workers_default).max(1);
    cfg.stream_default = c.stream;
    cfg.stream_interval = c.stream_interval;
    cfg.stats = c.stats;
    cfg.pin_cores = c.pin_cores.clone();
    cfg.tls = c.tls;
    cfg.faults = c.faults.to_config()?;
    Ok(cfg)
}

/// Turns the command's flags into a server configuration.
pub fn config(cmd: &StubCommand) -> anyhow::Result<StubConfig> {
    Ok(match cmd {
        StubCommand::Echo(a) => {
            let mut cfg = common_config(StubKind::Echo, &a.common, 1)?;
            if let Some(path) = &a.answers {
                cfg.answers = Some(crate::config::load_answers(path).map_err(anyhow::Error::msg)?);
            }
            cfg
        }
        StubCommand::MaxThroughput(a) => {
            let mut cfg = common_config(StubKind::MaxThroughput, &a.common, 4)?;
            cfg.output_length = a.output_length;
            cfg
        }
        StubCommand::Variable(a) => {
            let mut cfg = common_config(StubKind::Variable, &a.common, 10)?;
            let v = &mut cfg.variable;
            v.output_len_mean = a.output_len_mean;
            v.output_len_spread = a.output_len_spread;
            v.output_len_min = a.output_len_min;
            v.output_len_max = a.output_len_max;
            v.response_rate_mean = a.response_rate_mean;
            v.response_rate_spread = a.response_rate_spread;
            v.inter_token_latency_ms = a.inter_token_latency;
            v.inter_token_spread = a.inter_token_spread;
            v.first_chunk_latency_s = a.first_chunk_latency;
            v.first_chunk_spread = a.first_chunk_spread;
            v.max_concurrency = a.max_concurrency;
            v.seed = a.seed;
            v.prefix_cache = a.prefix_cache()?;
            if let Some(slots) = a.slots {
                slotted(&mut cfg, slots, a.common.num_workers)?;
            }
            cfg
        }
        StubCommand::Video(a) => {
            let mut cfg = StubConfig::new(StubKind::Video);
            cfg.host = a.host;
            cfg.port = a.port;
            cfg.workers = a.num_workers.max(1);
            cfg.video = crate::video::VideoConfig {
                delay: std::time::Duration::from_millis(a.delay_ms),
                raw_mp4: a.raw_mp4,
                video_dir: a.video_dir.clone(),
            };
            cfg
        }
    })
}

/// The slotted mode: one worker (so the queue is the server's), `slots` requests in service.
fn slotted(cfg: &mut StubConfig, slots: usize, workers: Option<usize>) -> anyhow::Result<()> {
    if slots == 0 {
        anyhow::bail!("--slots 0: a slotted stub needs at least one slot");
    }
    if let Some(w) = workers.filter(|&w| w != 1) {
        anyhow::bail!(
            "--slots runs one worker (its queue is the server's), not --num-workers {w}: drop \
             --num-workers or use --max-concurrency"
        );
    }
    cfg.workers = 1;
    cfg.variable.max_concurrency = slots;
    Ok(())
}

/// The `--tls-cert-out` file of the command, if any.
fn tls_cert_out(cmd: &StubCommand) -> Option<&std::path::Path> {
    let common = match cmd {
        StubCommand::Echo(a) => &a.common,
        StubCommand::MaxThroughput(a) => &a.common,
        StubCommand::Variable(a) => &a.common,
        StubCommand::Video(_) => return None,
    };
    common.tls_cert_out.as_deref()
}

/// Starts the server the command describes and writes its `--tls-cert-out` file.
pub fn start(cmd: &StubCommand) -> anyhow::Result<StubServer> {
    let cfg = config(cmd)?;
    let (host, port) = (cfg.host, cfg.port);
    let server =
        StubServer::start(cfg).with_context(|| format!("cannot listen on {host}:{port}"))?;
    if let (Some(path), Some(pem)) = (tls_cert_out(cmd), server.ca_pem()) {
        std::fs::write(path, pem).with_context(|| {
            format!("cannot write the stub's CA certificate to {}", path.display())
        })?;
    }
    Ok(server)
}

/// Serves until SIGINT or SIGTERM; prints `listening on http[s]://HOST:PORT` first (after
/// writing the `--tls-cert-out` file, so a client that read the line can trust the file).
pub fn run(cmd: StubCommand) -> anyhow::Result<()> {
    // Block the signals before any thread starts so that every thread inherits the mask and
    // only the waiting thread below receives them.
    let mut signals = SigSet::empty();
    signals.add(Signal::SIGINT);
    signals.add(Signal::SIGTERM);
    signals.thread_block().context("blocking SIGINT/SIGTERM")?;
    let server = start(&cmd)?;
    println!("listening on {}", server.url());
    std::io::stdout().flush().ok();
    let handle = server.stop_handle();
    let waiter = std::thread::Builder::new()
        .name("stub-signals".into())
        .spawn(move || {
            let _ = signals.wait();
            handle.stop();
        })
        .context("starting the signal thread")?;
    let stopped = server.stop_handle();
    server.wait();
    let _ = waiter.join();
    // What it served, for whoever started it (a test counting connections, a user).
    let totals = stopped.totals();
    eprintln!("stub stopped: {totals}");
    if let Some(c) = totals.prefix_cache {
        eprintln!(
            "stub prefix cache: {} hits, {} misses, {} of {} prompt tokens cached, {} evictions",
            c.hits, c.misses, c.cached_tokens, c.prompt_tokens, c.evictions
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Wrap {
        #[command(subcommand)]
        stub: StubCommand,
    }

    fn parse(args: &str) -> anyhow::Result<StubConfig> {
        config(&command(args)?)
    }

    fn command(args: &str) -> anyhow::Result<StubCommand> {
        let argv = std::iter::once("stub").chain(args.split_whitespace());
        Ok(Wrap::try_parse_from(argv)?.stub)
    }

    #[test]
    fn reference_flags_map_onto_the_config() {
        let cfg = parse(
            "max-throughput --port 8765 --stream -w 2 --stream-interval 1 --output-length 4000",
        )
        .unwrap();
        assert_eq!(cfg.kind, StubKind::MaxThroughput);
        assert_eq!((cfg.port, cfg.workers, cfg.stream_default), (8765, 2, true));
        assert_eq!((cfg.stream_interval, cfg.output_length), (1, 4000));
        let cfg = parse(
            "variable --num-workers 3 --output-len-mean 50 --output-len-spread 0 \
             --inter-token-latency 5 --first-chunk-latency 0.1 --first-chunk-spread 0 \
             --max-concurrency 8 --response-rate-mean 0",
        )
        .unwrap();
        assert_eq!(cfg.workers, 3);
        assert_eq!(cfg.variable.inter_token_latency_ms, 5.0);
        assert_eq!(cfg.variable.first_chunk_latency_s, 0.1);
        assert_eq!(cfg.variable.max_concurrency, 8);
        assert_eq!(parse("echo").unwrap().workers, 1);
    }

    #[test]
    fn slots_run_one_worker_with_that_many_in_service_and_refuse_more_workers() {
        let cfg = parse("variable --slots 4 --first-chunk-latency 0.01").unwrap();
        assert_eq!((cfg.workers, cfg.variable.max_concurrency), (1, 4));
        let err = parse("variable --slots 4 -w 2").unwrap_err().to_string();
        assert!(err.contains("--num-workers 2"), "{err}");
        assert!(parse("variable --slots 0").unwrap_err().to_string().contains("--slots 0"));
        assert!(parse("variable --slots 2 --max-concurrency 3").is_err());
    }

    #[test]
    fn prefix_cache_flags_map_onto_the_config_and_need_prefix_cache() {
        assert_eq!(parse("variable").unwrap().variable.prefix_cache, None);
        let pc = parse("variable --prefix-cache").unwrap().variable.prefix_cache;
        assert_eq!(pc, Some(PrefixCacheConfig::default()));
        let pc = parse(
            "variable --prefix-cache --uncached-token-us 250 --cache-tokens 5000 \
             --session-header X-Conversation",
        )
        .unwrap()
        .variable
        .prefix_cache
        .unwrap();
        assert_eq!((pc.uncached_token_us, pc.cache_tokens), (250.0, 5000));
        assert_eq!(pc.session_header, "X-Conversation");
        let e = parse("variable --cache-tokens 10").unwrap_err().to_string();
        assert!(e.contains("--prefix-cache"), "{e}");
        let e = parse("variable --prefix-cache --uncached-token-us -1").unwrap_err().to_string();
        assert!(e.contains("--uncached-token-us"), "{e}");
    }

    #[test]
    fn fault_flags_map_onto_the_config() {
        let cfg = parse(
            "echo --fault-status 429 --fault-status-fraction 0.25 --fault-usage huge \
             --fault-malformed-every 3 --fault-close-mid-stream-every 5 --fault-stall-every 7",
        )
        .unwrap();
        let f = cfg.faults;
        assert_eq!(f.status, Some(StatusFault { status: 429, every: 4 }));
        assert_eq!(f.usage, Some(UsageFault::Huge));
        assert_eq!(f.malformed_every, Some(3));
        assert_eq!(f.close_mid_stream_every, Some(5));
        assert_eq!(f.stall_every, Some(7));
        assert!(parse("echo --fault-status 429 --fault-status-fraction 0").is_err());
        assert!(parse("echo --fault-status 200").is_err());
        assert!(parse("echo --fault-stall-every 0").is_err());
        assert!(parse("echo --stream-interval 0").is_err());
    }

    #[test]
    fn tls_flags_map_onto_the_config_and_cert_out_needs_tls() {
        assert!(parse("max-throughput --tls").unwrap().tls);
        assert!(parse("variable --tls --tls-cert-out /tmp/x.pem").unwrap().tls);
        assert!(!parse("echo").unwrap().tls);
        let e = parse("echo --tls-cert-out /tmp/x.pem").unwrap_err().to_string();
        assert!(e.contains("--tls"), "{e}");
    }

    #[test]
    fn tls_cert_out_writes_the_ca_that_the_https_url_is_served_under() {
        let dir = std::env::temp_dir().join(format!("stub-cert-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ca.pem");
        let cmd = command(&format!("echo --port 0 --tls --tls-cert-out {}", path.display()));
        let server = start(&cmd.unwrap()).unwrap();
        assert!(server.url().starts_with("https://127.0.0.1:"), "{}", server.url());
        let written = std::fs::read_to_string(&path).unwrap();
        assert!(written.starts_with("-----BEGIN CERTIFICATE-----"), "{written}");
        assert_eq!(Some(written.as_str()), server.ca_pem());
        server.stop();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn new_fault_flags_map_onto_the_config() {
        let f = parse(
            "max-throughput --fault-stall-after-head-every 2 --fault-no-response-every 3 \
             --fault-close-after-request-every 4 --fault-error-frame-mid-stream-every 5 \
             --fault-error-only-stream-every 6 --fault-truncate-stream-every 7 \
             --fault-truncate-after 2 --fault-truncate-framing close \
             --fault-finish-without-done-every 8 --fault-multi-line-data-every 9 \
             --fault-extra-headers 40 --fault-delay-ms 250 --fault-delay-every 2 \
             --fault-vllm-error-every 10",
        )
        .unwrap()
        .faults;
        assert_eq!(f.stall_after_head_every, Some(2));
        assert_eq!(f.no_response_every, Some(3));
        assert_eq!(f.close_after_request_every, Some(4));
        assert_eq!(f.error_frame_mid_stream_every, Some(5));
        assert_eq!(f.error_only_stream_every, Some(6));
        let framing = TruncateFraming::CloseDelimited;
        assert_eq!(f.truncate, Some(TruncateFault { every: 7, after_frames: 2, framing }));
        assert_eq!(f.finish_without_done_every, Some(8));
        assert_eq!(f.multi_line_data_every, Some(9));
        assert_eq!(f.vllm_error_every, Some(10));
        assert_eq!(f.extra_headers, 40);
        assert_eq!(f.delay, Some(DelayFault { delay_ms: 250, every: 2 }));
        assert!(f.any());
        assert!(!parse("max-throughput").unwrap().faults.any());
        assert!(parse("echo --fault-truncate-stream-every 0").is_err());
        assert!(parse("echo --fault-delay-ms 5 --fault-delay-every 0").is_err());
        assert!(parse("echo --fault-no-response-every 0").is_err());
    }
}
