//! `llm-loadgen probe`: the reference's connectivity check (a few plain requests, their
//! latency and sample answers, exit 4 below half success), then what a benchmark needs to know
//! before it starts: whether streams carry usage (and whether `stream_options` is refused),
//! whether answers carry reasoning, how streams are chunked, how client and server token counts
//! compare, and which token basis to trust.

mod client;
mod console;
mod report;
mod verdict;

use std::sync::Arc;
use std::time::{Duration, Instant};

use loadgen_worker::http::tls::client_config;
use loadgen_worker::request::{
    body_json, http_request, ApiType, Endpoint, Prompt, RequestHeaders, RequestOptions,
};

use crate::cli::ProbeArgs;
use crate::error::AppError;
use crate::plan::{parse_endpoint, register_secrets, resolve_auth, resolve_tls, EndpointUrl};
use crate::redact::{redact_json, redact_url, Secret};
use crate::tokenizer::Tokenizer;
use crate::yaml::{ApiTypeName, BenchType, Config};

use client::{exchange, Exchange, Target};
pub use console::{Console, Streams};
pub use report::EndpointReport;
use verdict::{StreamTry, StreamUsage};

/// How long the reference's probe waits for all its responses (and this one for each phase).
const PHASE_TIMEOUT: Duration = Duration::from_secs(60);
/// The reference's `max_tokens` for probe requests (sent here as the API's output limit).
const PROBE_MAX_TOKENS: u32 = 50;
/// Streaming requests sent to see usage on streams and how they are chunked.
const STREAM_PROBES: usize = 3;

/// Everything resolved before the first request: where to go and what to send.
struct Setup {
    api: ApiType,
    api_name: ApiTypeName,
    endpoints: Vec<EndpointUrl>,
    authorization: Option<Secret>,
    headers: Vec<(String, String)>,
    tls: Option<Arc<rustls::ClientConfig>>,
    tokenizer: Option<Tokenizer>,
}

/// Runs the probe; exit 0 when every endpoint answered at least half its requests. `-v`
/// prints the request bodies it sends on stderr.
pub fn run(args: &ProbeArgs, verbose: u8) -> Result<i32, AppError> {
    if args.api_type == ApiTypeName::Videogen {
        return Err(AppError::Input(
            "probe does not support --api-type videogen (its requests take minutes, past the \
             probe's 60 s); check a videogen endpoint with a benchmark run instead"
                .into(),
        ));
    }
    let setup = resolve(args)?;
    let console = Console { json: args.json, verbose: verbose > 0 };
    let mut reports = Vec::with_capacity(setup.endpoints.len());
    for endpoint in &setup.endpoints {
        reports.push(probe_endpoint(&setup, args, endpoint, console)?);
    }
    if args.json {
        // Serialized from the structs, so keys keep their declared order.
        let text = serde_json::to_string(&ProbeJson { endpoints: &reports })
            .map_err(|e| AppError::Execution(format!("cannot encode the probe's json: {e}")))?;
        crate::commands::print_stdout(&format!("{}\n", redact_json(&text)))?;
    }
    match reports.iter().find(|r| !r.ok) {
        Some(EndpointReport { certificate_refused: Some(why), .. }) => {
            Err(AppError::Setup(format!("probe failed: {why}")))
        }
        Some(r) => Err(AppError::Execution(format!(
            "probe failed: only {}/{} requests to {} successful; check the endpoint, --model and \
             --api-type",
            r.successful, r.requests, r.url
        ))),
        None => Ok(0),
    }
}

/// The `--json` object.
#[derive(serde::Serialize)]
struct ProbeJson<'a> {
    endpoints: &'a [EndpointReport],
}

/// Endpoints, auth and TLS through the benchmark's own plan code, so the probe accepts and
/// refuses exactly what a benchmark does.
fn resolve(args: &ProbeArgs) -> Result<Setup, AppError> {
    let mut config = Config::defaults(BenchType::Offline);
    let ec = &mut config.endpoint_config;
    ec.endpoints = args.endpoints.clone();
    ec.api_key = args.api_key.clone();
    ec.headers = args.headers.clone();
    ec.ca_bundle = args.ca_bundle.clone();
    ec.api_type = args.api_type;
    config.settings.client.insecure = args.insecure;
    register_secrets(&config.endpoint_config);
    let endpoints: Vec<EndpointUrl> =
        args.endpoints.iter().map(|u| parse_endpoint(u)).collect::<Result<_, _>>()?;
    if endpoints.iter().any(EndpointUrl::is_null) {
        return Err(AppError::Input(
            "probe needs a server: null:// answers without one; give an http(s):// endpoint".into(),
        ));
    }
    let mut notes = Vec::new();
    let resolved = resolve_auth(&mut config, &endpoints, &mut notes)
        .and_then(|auth| Ok((auth, resolve_tls(&config, &endpoints, &mut notes)?)));
    crate::commands::print_notes(&notes);
    let ((authorization, headers), verify) = resolved?;
    let tls = match endpoints.iter().any(|e| e.url.starts_with("https://")) {
        true => Some(client_config(&verify).map_err(|e| AppError::Setup(format!("{e}")))?),
        false => None,
    };
    let tokenizer = args.tokenizer.as_deref().map(Tokenizer::load).transpose()?;
    let api = match args.api_type {
        ApiTypeName::OpenaiCompletions => ApiType::OpenAiCompletions,
        ApiTypeName::Sglang => ApiType::Sglang,
        _ => ApiType::OpenAiChat,
    };
    Ok(Setup { api, api_name: args.api_type, endpoints, authorization, headers, tls, tokenizer })
}

/// The request bytes of one probe request.
struct Requests {
    target: Target,
    headers: RequestHeaders,
}

impl Requests {
    fn bytes(&self, setup: &Setup, model: &str, prompt: &str, stream: Option<bool>) -> Vec<u8> {
        let opts = RequestOptions {
            stream_include_usage: stream == Some(true),
            ..RequestOptions::basic(setup.api, model, stream.is_some(), PROBE_MAX_TOKENS)
        };
        // A text prompt is valid for every API, so the body always builds.
        let body =
            body_json(&opts, Prompt::Text { system: None, user: prompt }).unwrap_or_default();
        http_request(&self.target.endpoint, setup.api, &self.headers, stream.is_some(), &body)
    }
}

fn probe_endpoint(
    setup: &Setup,
    args: &ProbeArgs,
    url: &EndpointUrl,
    out: Console,
) -> Result<EndpointReport, AppError> {
    let shown = redact_url(&url.url);
    out.line(&format!("Probing: {shown}"));
    let endpoint = Endpoint::parse(&url.url)
        .map_err(|e| AppError::Setup(format!("probe setup failed: {e}")))?;
    let tls = endpoint.tls.as_ref().and(setup.tls.clone());
    let authorization = setup.authorization.as_ref().or(url.basic_auth.as_ref());
    let requests = Requests {
        target: Target { endpoint, tls },
        headers: RequestHeaders {
            authorization: authorization.map(|s| s.0.clone()),
            extra: setup.headers.clone(),
        },
    };
    let plain = plain_phase(setup, args, &requests, out);
    let mut report = EndpointReport::new(&shown, setup.api_name, args.requests, &plain);
    report.print_reference(out);
    if report.successful > 0 {
        let streams = stream_phase(setup, args, &requests, out);
        report.add_checks(&plain, &streams, setup.tokenizer.as_ref(), &args.prompt);
    }
    report.print_checks(out);
    Ok(report)
}

/// The reference's requests: `--requests` plain requests, one at a time, within 60 s.
fn plain_phase(
    setup: &Setup,
    args: &ProbeArgs,
    requests: &Requests,
    out: Console,
) -> Vec<Exchange> {
    let n = args.requests;
    out.line(&format!("Sending {n} requests..."));
    let request = requests.bytes(setup, &args.model, &args.prompt, None);
    out.request("plain", &request);
    let deadline = Instant::now() + PHASE_TIMEOUT;
    let step = (n / 10).max(1);
    let mut done = Vec::with_capacity(n as usize);
    for i in 0..n {
        let ex = match Instant::now() < deadline {
            true => exchange(&requests.target, setup.api, &request, deadline),
            false => Exchange {
                error: Some(format!("Timeout (>{:.1}s)", PHASE_TIMEOUT.as_secs_f64())),
                ..Exchange::default()
            },
        };
        if (i + 1) % step == 0 || i + 1 == n {
            let preview = match ex.output.is_empty() {
                true => "(no output)".to_string(),
                false => ex.output.chars().take(100).collect(),
            };
            out.line(&format!("  Issued {}/{n} requests", i + 1));
            out.line(&format!("  Processed {}/{n} responses : probe-{i} : {preview}", i + 1));
        }
        done.push(ex);
    }
    done
}

/// The streaming requests: the first asks for usage (OpenAI APIs); a 4xx to it is retried
/// without `stream_options` to tell a refused field from a broken stream.
fn stream_phase(setup: &Setup, args: &ProbeArgs, requests: &Requests, out: Console) -> Streams {
    let deadline = Instant::now() + PHASE_TIMEOUT;
    let send = |ask_usage: bool| {
        let stream = Some(ask_usage && setup.api != ApiType::Sglang);
        let bytes = requests.bytes(setup, &args.model, &args.prompt, stream);
        out.request("streaming", &bytes);
        let mut ex = exchange(&requests.target, setup.api, &bytes, deadline);
        // A plain body to a stream request says nothing about streams: not a stream success.
        if ex.error.is_none() && !ex.event_stream {
            ex.error = Some("asked to stream, the server answered a plain (non-SSE) body".into());
        }
        ex
    };
    let try_of = |ex: &Exchange| StreamTry {
        status: ex.status,
        ok: ex.error.is_none(),
        usage: ex.completion_tokens.is_some(),
    };
    let first = send(true);
    let refused = first.error.is_some() && (400..500).contains(&first.status);
    let retried = (refused && setup.api != ApiType::Sglang).then(|| send(false));
    let usage = verdict::stream_usage(Some(try_of(&first)), retried.as_ref().map(try_of));
    let ask = usage != StreamUsage::Rejected;
    let mut all = vec![first];
    all.extend(retried);
    while all.iter().filter(|e| e.error.is_none()).count() < STREAM_PROBES
        && all.len() < STREAM_PROBES + 1
        && Instant::now() < deadline
    {
        all.push(send(ask));
    }
    Streams { usage, first_status: all[0].status, exchanges: all }
}
