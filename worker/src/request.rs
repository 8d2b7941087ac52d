//! Request bytes, built once per dataset row before fork: JSON bodies in the reference's key order
//! and HTTP/1.1 heads in the reference's header layout.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;

/// Which API the endpoint speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiType {
    /// `/v1/chat/completions`
    OpenAiChat,
    /// `/v1/completions`
    OpenAiCompletions,
    /// SGLang's native `/generate`
    Sglang,
    /// trtllm-serve's video generation, `/v1/videos/generations` (non-streaming)
    Videogen,
}

impl ApiType {
    /// The route under the endpoint's path prefix.
    pub fn path(self) -> &'static str {
        match self {
            ApiType::OpenAiChat => "/v1/chat/completions",
            ApiType::OpenAiCompletions => "/v1/completions",
            ApiType::Sglang => "/generate",
            ApiType::Videogen => "/v1/videos/generations",
        }
    }
}

/// Errors building requests.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("endpoint url {url:?} is not supported: {why}")]
    BadUrl { url: String, why: &'static str },
    #[error("cannot resolve endpoint host {host:?}: {source}")]
    Resolve { host: String, source: std::io::Error },
    #[error("{api:?} requests cannot carry {what}")]
    UnsupportedPrompt { api: ApiType, what: &'static str },
    /// A videogen row column that is not a request field, or a value of the wrong kind.
    #[error("{0}")]
    VideoColumn(String),
    #[error("cannot encode request json: {0}")]
    Json(#[from] serde_json::Error),
    /// A body that does not start as every body of its table does (a bug, never the input).
    #[error("a request body does not start with the model key its table shares")]
    SharedStart,
}

/// Everything in a request body that is the same for every row.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestOptions {
    pub api: ApiType,
    pub model: String,
    pub streaming: bool,
    /// Add `"stream_options":{"include_usage":true}` to streaming OpenAI requests.
    pub stream_include_usage: bool,
    pub max_output_tokens: u32,
    pub min_output_tokens: Option<u32>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub seed: Option<u64>,
    /// The reference's other sampling keys, plus `ignore_eos`.
    pub sampling: Sampling,
    /// Extra top-level keys (`--extra-body`), appended in order; a built key of the same name
    /// is left out so the user's value wins and the body has no duplicate keys.
    pub extra: Vec<(String, serde_json::Value)>,
}

impl RequestOptions {
    /// Options that set only the essentials: no sampling keys, no extra body (each optional
    /// key omitted from the body, as the reference omits unset ones).
    pub fn basic(api: ApiType, model: &str, streaming: bool, max_output_tokens: u32) -> Self {
        RequestOptions {
            api,
            model: model.to_string(),
            streaming,
            stream_include_usage: false,
            max_output_tokens,
            min_output_tokens: None,
            temperature: None,
            top_p: None,
            top_k: None,
            seed: None,
            sampling: Sampling::default(),
            extra: Vec::new(),
        }
    }
}

/// Sampling keys beyond temperature/top_p/top_k/seed; unset ones are omitted, as the reference's
/// msgspec `omit_defaults` does.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    pub repetition_penalty: Option<f64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    /// Completions only (the reference sends it there, always); SGLang gets it when false.
    pub skip_special_tokens: bool,
    /// Chat only, sent verbatim (a JSON object).
    pub chat_template_kwargs: Option<serde_json::Value>,
    /// Beyond the reference: `"ignore_eos":true` when set (SGLang: inside `sampling_params`).
    pub ignore_eos: bool,
}

impl Default for Sampling {
    fn default() -> Self {
        Sampling {
            repetition_penalty: None,
            presence_penalty: None,
            frequency_penalty: None,
            skip_special_tokens: true,
            chat_template_kwargs: None,
            ignore_eos: false,
        }
    }
}

/// What one dataset row changes in its body.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RowParams<'a> {
    /// The row's `n` column (choices per request).
    pub n: Option<u32>,
    /// The row's drawn output length (`osl_distribution`), replacing `max_output_tokens`.
    pub max_output_tokens: Option<u32>,
    /// The row's own request columns, sent where its API carries them (`row_request_keys`);
    /// chat's `name` goes on the user message.
    pub columns: &'a [(String, serde_json::Value)],
    /// Write `"stream"` on a chat body even when not streaming (`"stream":false`), as the
    /// reference's agentic samples carry it.
    pub stream_key: bool,
}

/// Dataset columns the reference forwards into each request, per API (its adapters'
/// `ColumnFilter` lists): chat sends these top-level keys (and `name` on the user message),
/// completions `stop`, SGLang none.
pub fn row_request_keys(api: ApiType) -> &'static [&'static str] {
    match api {
        ApiType::OpenAiChat => {
            &["stop", "logit_bias", "user", "chat_template", "tools", "tool_choice", "name"]
        }
        ApiType::OpenAiCompletions => &["stop"],
        ApiType::Sglang => &[],
        ApiType::Videogen => &crate::video_request::VIDEO_COLUMNS,
    }
}

/// One row's prompt.
#[derive(Clone, Copy, Debug)]
pub enum Prompt<'a> {
    Text {
        system: Option<&'a str>,
        user: &'a str,
    },
    /// A multimodal user message (chat only): its content is a list of parts, after an
    /// optional system message, as the reference's chat adapter sends a list-form `prompt`.
    Parts {
        system: Option<&'a str>,
        user: &'a [ContentPart],
    },
    /// A chat `messages` array, sent verbatim.
    Messages(&'a serde_json::Value),
    /// A chat `messages` array already written as compact JSON (an agentic turn's history,
    /// keys in the reference's order), sent as these bytes.
    RawMessages(&'a [u8]),
    TokenIds(&'a [u32]),
}

/// What a completions or SGLang body cannot carry: the reference sends parts on chat only.
const MULTIMODAL: &str = "multimodal content parts (images); use --api-type openai";

/// One part of a multimodal chat message's `content`, written with the reference's key order
/// (`{"type":"text","text":…}`, `{"type":"image_url","image_url":{"url":…}}`), which a
/// `serde_json::Value` (sorted keys) would not keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContentPart {
    Text(String),
    /// An image by URL; the reference's datasets inline it as `data:image/<format>;base64,…`.
    ImageUrl(String),
}

impl serde::Serialize for ContentPart {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        #[derive(serde::Serialize)]
        struct Url<'a> {
            url: &'a str,
        }
        let mut map = s.serialize_map(Some(2))?;
        match self {
            ContentPart::Text(text) => {
                map.serialize_entry("type", "text")?;
                map.serialize_entry("text", text)?;
            }
            ContentPart::ImageUrl(url) => {
                map.serialize_entry("type", "image_url")?;
                map.serialize_entry("image_url", &Url { url })?;
            }
        }
        map.end()
    }
}

/// Where requests go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    /// "" or "/prefix" (no trailing slash).
    pub path_prefix: String,
    pub addr: SocketAddr,
    /// `Some` for `https://`: the server name from the URL's host, verified against the system
    /// roots until the plan says otherwise (`--insecure`, a CA bundle).
    pub tls: Option<crate::http::tls::TlsSettings>,
}

impl Endpoint {
    /// Parses `http[s]://host[:port][/prefix]` and resolves the host (first address). An
    /// `https://` URL verifies the server against the system roots (`Verify::SystemRoots`).
    pub fn parse(url: &str) -> Result<Endpoint, RequestError> {
        let bad = |why| RequestError::BadUrl { url: url.to_string(), why };
        let (rest, https) = if let Some(rest) = url.strip_prefix("http://") {
            (rest, false)
        } else if let Some(rest) = url.strip_prefix("https://") {
            (rest, true)
        } else {
            return Err(bad("it must start with http:// or https://"));
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(bad("it has no host"));
        }
        let default_port = if https { 443 } else { 80 };
        let (host, port) = split_host_port(authority, default_port)
            .ok_or_else(|| bad("its port is not a number"))?;
        let path_prefix = path.trim_end_matches('/').to_string();
        let bare_host = host.trim_matches(|c| c == '[' || c == ']');
        let tls = https.then(|| crate::http::tls::TlsSettings {
            server_name: bare_host.to_string(),
            verify: crate::http::tls::Verify::SystemRoots,
        });
        let addrs: Vec<SocketAddr> = (bare_host, port)
            .to_socket_addrs()
            .map_err(|source| RequestError::Resolve { host: host.to_string(), source })?
            .collect();
        // Prefer IPv4: "localhost" often resolves to ::1 first while local servers listen on
        // 127.0.0.1 only.
        let addr =
            addrs.iter().find(|a| a.is_ipv4()).or(addrs.first()).copied().ok_or_else(|| {
                RequestError::Resolve {
                    host: host.to_string(),
                    source: std::io::Error::other("no address found"),
                }
            })?;
        Ok(Endpoint { host: host.to_string(), port, path_prefix, addr, tls })
    }

    /// The `Host` header value: the port is omitted for 80 and 443.
    pub fn host_header(&self) -> String {
        if self.port == 80 || self.port == 443 {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

fn split_host_port(authority: &str, default_port: u16) -> Option<(&str, u16)> {
    // An IPv6 literal keeps its colons inside brackets.
    let colon = match authority.rfind(']') {
        Some(end) => authority[end..].find(':').map(|i| end + i),
        None => authority.rfind(':'),
    };
    match colon {
        Some(i) => Some((&authority[..i], authority[i + 1..].parse().ok()?)),
        None => Some((authority, default_port)),
    }
}

/// The compact JSON body for one row, keys in the reference's order.
pub fn body_json(opts: &RequestOptions, prompt: Prompt<'_>) -> Result<Vec<u8>, RequestError> {
    body_json_row(opts, prompt, RowParams::default())
}

/// The compact JSON body for one row with its own `n` and output length.
pub fn body_json_row(
    opts: &RequestOptions,
    prompt: Prompt<'_>,
    row: RowParams<'_>,
) -> Result<Vec<u8>, RequestError> {
    let mut out = Vec::with_capacity(256);
    let b = Body { opts, row };
    match opts.api {
        ApiType::OpenAiChat => chat_body(&mut out, b, prompt)?,
        ApiType::OpenAiCompletions => completions_body(&mut out, b, prompt)?,
        ApiType::Sglang => sglang_body(&mut out, b, prompt)?,
        ApiType::Videogen => video_body(&mut out, b, prompt)?,
    }
    Ok(out)
}

/// One body being written: the run's options and the row's own values.
#[derive(Clone, Copy)]
struct Body<'a> {
    opts: &'a RequestOptions,
    row: RowParams<'a>,
}

impl Body<'_> {
    fn max_tokens(&self) -> u32 {
        self.row.max_output_tokens.unwrap_or(self.opts.max_output_tokens)
    }

    /// Writes `,"name":value` unless `--extra-body` names the same top-level key.
    fn field(
        &self,
        out: &mut Vec<u8>,
        name: &str,
        value: &impl serde::Serialize,
    ) -> Result<(), RequestError> {
        if self.opts.extra.iter().any(|(k, _)| k == name) {
            return Ok(());
        }
        key(out, name);
        json(out, value)
    }

    fn opt_field(
        &self,
        out: &mut Vec<u8>,
        name: &str,
        value: Option<impl serde::Serialize>,
    ) -> Result<(), RequestError> {
        match value {
            Some(v) => self.field(out, name, &v),
            None => Ok(()),
        }
    }
}

fn key(out: &mut Vec<u8>, name: &str) {
    out.push(b',');
    out.push(b'"');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

fn json(out: &mut Vec<u8>, value: &impl serde::Serialize) -> Result<(), RequestError> {
    serde_json::to_writer(&mut *out, value)?;
    Ok(())
}

/// Sampling keys shared by the OpenAI bodies, then stream flags, then extras.
fn openai_tail(
    out: &mut Vec<u8>,
    b: Body<'_>,
    always_stream_key: bool,
) -> Result<(), RequestError> {
    let (opts, sampling) = (b.opts, &b.opts.sampling);
    b.opt_field(out, "temperature", opts.temperature)?;
    b.opt_field(out, "top_p", opts.top_p)?;
    b.opt_field(out, "top_k", opts.top_k)?;
    b.opt_field(out, "seed", opts.seed)?;
    b.opt_field(out, "repetition_penalty", sampling.repetition_penalty)?;
    b.opt_field(out, "n", b.row.n)?;
    b.opt_field(out, "presence_penalty", sampling.presence_penalty)?;
    b.opt_field(out, "frequency_penalty", sampling.frequency_penalty)?;
    if opts.api == ApiType::OpenAiChat {
        b.opt_field(out, "chat_template_kwargs", sampling.chat_template_kwargs.as_ref())?;
    }
    for (name, value) in b.row.columns {
        if name != "name" && row_request_keys(opts.api).contains(&name.as_str()) {
            b.field(out, name, value)?;
        }
    }
    if sampling.ignore_eos {
        b.field(out, "ignore_eos", &true)?;
    }
    if opts.streaming || always_stream_key {
        key(out, "stream");
        json(out, &opts.streaming)?;
    }
    // Usage is asked for only when streaming and n <= 1 (several choices share one usage).
    let extra_n = opts.extra.iter().find(|(k, _)| k == "n").map(|(_, v)| v.as_u64());
    let n = match extra_n {
        Some(v) => v.unwrap_or(1),
        None => u64::from(b.row.n.unwrap_or(1)),
    };
    if opts.streaming && opts.stream_include_usage && n <= 1 {
        key(out, "stream_options");
        out.extend_from_slice(br#"{"include_usage":true}"#);
    }
    extras(out, opts)?;
    out.push(b'}');
    Ok(())
}

fn extras(out: &mut Vec<u8>, opts: &RequestOptions) -> Result<(), RequestError> {
    for (name, value) in &opts.extra {
        out.push(b',');
        json(out, name)?;
        out.push(b':');
        json(out, value)?;
    }
    Ok(())
}

/// What every body of `opts` starts with, the same for every row: `{"model":"…"` for the
/// OpenAI APIs (the model first, in the reference's key order), nothing for SGLang, whose
/// body starts with the prompt. `RequestTable` keeps it once instead of in every row.
pub fn body_prefix(opts: &RequestOptions) -> Result<Vec<u8>, RequestError> {
    let mut out = Vec::new();
    if !matches!(opts.api, ApiType::Sglang | ApiType::Videogen) {
        model_prefix(&mut out, opts)?;
    }
    Ok(out)
}

fn model_prefix(out: &mut Vec<u8>, opts: &RequestOptions) -> Result<(), RequestError> {
    out.extend_from_slice(b"{\"model\":");
    json(out, &opts.model)
}

fn chat_body(out: &mut Vec<u8>, b: Body<'_>, prompt: Prompt<'_>) -> Result<(), RequestError> {
    model_prefix(out, b.opts)?;
    key(out, "messages");
    match prompt {
        Prompt::Text { system, user } => system_and_user(out, b, system, &user)?,
        Prompt::Parts { system, user } => system_and_user(out, b, system, &user)?,
        Prompt::Messages(messages) => json(out, messages)?,
        Prompt::RawMessages(messages) => out.extend_from_slice(messages),
        Prompt::TokenIds(_) => {
            return Err(RequestError::UnsupportedPrompt { api: b.opts.api, what: "token ids" })
        }
    }
    b.field(out, "max_completion_tokens", &b.max_tokens())?;
    openai_tail(out, b, b.row.stream_key)
}

/// `[{system}, {user}]`: the user content a string or a parts list, the row's `name` on it.
fn system_and_user(
    out: &mut Vec<u8>,
    b: Body<'_>,
    system: Option<&str>,
    user: &impl serde::Serialize,
) -> Result<(), RequestError> {
    out.push(b'[');
    if let Some(system) = system {
        out.extend_from_slice(br#"{"role":"system","content":"#);
        json(out, &system)?;
        out.extend_from_slice(b"},");
    }
    out.extend_from_slice(br#"{"role":"user","content":"#);
    json(out, user)?;
    if let Some((_, name)) = b.row.columns.iter().find(|(k, _)| k == "name") {
        key(out, "name");
        json(out, name)?;
    }
    out.extend_from_slice(b"}]");
    Ok(())
}

fn completions_body(
    out: &mut Vec<u8>,
    b: Body<'_>,
    prompt: Prompt<'_>,
) -> Result<(), RequestError> {
    let api = b.opts.api;
    model_prefix(out, b.opts)?;
    key(out, "prompt");
    match prompt {
        Prompt::Text { system: None, user } => json(out, &user)?,
        Prompt::TokenIds(ids) => json(out, &ids)?,
        Prompt::Text { system: Some(_), .. } => {
            return Err(RequestError::UnsupportedPrompt { api, what: "a system prompt" })
        }
        Prompt::Messages(_) | Prompt::RawMessages(_) => {
            return Err(RequestError::UnsupportedPrompt { api, what: "chat messages" })
        }
        Prompt::Parts { .. } => {
            return Err(RequestError::UnsupportedPrompt { api, what: MULTIMODAL })
        }
    }
    b.field(out, "max_tokens", &b.max_tokens())?;
    b.field(out, "min_tokens", &b.opts.min_output_tokens.unwrap_or(1))?;
    b.field(out, "skip_special_tokens", &b.opts.sampling.skip_special_tokens)?;
    openai_tail(out, b, true)
}

fn sglang_body(out: &mut Vec<u8>, b: Body<'_>, prompt: Prompt<'_>) -> Result<(), RequestError> {
    let (opts, api) = (b.opts, b.opts.api);
    match prompt {
        Prompt::TokenIds(ids) => {
            out.extend_from_slice(b"{\"input_ids\":");
            json(out, &ids)?;
        }
        Prompt::Text { system: None, user } => {
            out.extend_from_slice(b"{\"text\":");
            json(out, &user)?;
        }
        Prompt::Text { system: Some(_), .. } => {
            return Err(RequestError::UnsupportedPrompt { api, what: "a system prompt" })
        }
        Prompt::Messages(_) | Prompt::RawMessages(_) => {
            return Err(RequestError::UnsupportedPrompt { api, what: "chat messages" })
        }
        Prompt::Parts { .. } => {
            return Err(RequestError::UnsupportedPrompt { api, what: MULTIMODAL })
        }
    }
    out.extend_from_slice(b",\"sampling_params\":{\"max_new_tokens\":");
    json(out, &b.max_tokens())?;
    // SGLang's defaults are omitted, as the reference's msgspec omit_defaults does.
    if let Some(v) = opts.temperature.filter(|v| *v != 1.0) {
        key(out, "temperature");
        json(out, &v)?;
    }
    if let Some(v) = opts.top_k.filter(|v| *v != -1) {
        key(out, "top_k");
        json(out, &v)?;
    }
    if let Some(v) = opts.top_p.filter(|v| *v != 1.0) {
        key(out, "top_p");
        json(out, &v)?;
    }
    sglang_beyond_reference(out, b)?;
    out.push(b'}');
    key(out, "stream");
    json(out, &opts.streaming)?;
    extras(out, opts)?;
    out.push(b'}');
    Ok(())
}

/// A video generation body: the prompt and the row's request fields over their defaults
/// (`video_request`); the run's model and sampling keys are not part of this API's body.
fn video_body(out: &mut Vec<u8>, b: Body<'_>, prompt: Prompt<'_>) -> Result<(), RequestError> {
    let api = b.opts.api;
    let user = match prompt {
        Prompt::Text { system: None, user } => user,
        Prompt::Text { system: Some(_), .. } => {
            return Err(RequestError::UnsupportedPrompt { api, what: "a system prompt" })
        }
        Prompt::TokenIds(_) => {
            return Err(RequestError::UnsupportedPrompt { api, what: "token ids" })
        }
        Prompt::Messages(_) | Prompt::RawMessages(_) => {
            return Err(RequestError::UnsupportedPrompt { api, what: "chat messages" })
        }
        Prompt::Parts { .. } => {
            return Err(RequestError::UnsupportedPrompt { api, what: MULTIMODAL })
        }
    };
    if b.opts.streaming {
        let why = "api type videogen is non-streaming; set model_params.streaming off";
        return Err(RequestError::VideoColumn(why.into()));
    }
    crate::video_request::write_body(out, user, b.row.columns).map_err(RequestError::VideoColumn)
}

/// Keys the reference leaves out of SGLang requests (it drops them silently); SGLang's
/// `sampling_params` takes each under the same name, so they are sent rather than dropped.
fn sglang_beyond_reference(out: &mut Vec<u8>, b: Body<'_>) -> Result<(), RequestError> {
    let s = &b.opts.sampling;
    let keys = [
        ("repetition_penalty", s.repetition_penalty),
        ("presence_penalty", s.presence_penalty),
        ("frequency_penalty", s.frequency_penalty),
    ];
    for (name, value) in keys {
        if let Some(v) = value {
            key(out, name);
            json(out, &v)?;
        }
    }
    if let Some(n) = b.row.n {
        key(out, "n");
        json(out, &n)?;
    }
    if s.ignore_eos {
        key(out, "ignore_eos");
        out.extend_from_slice(b"true");
    }
    Ok(())
}

/// The whole HTTP/1.1 request: the reference's header layout (no User-Agent, no explicit
/// keep-alive), then the body.
pub fn http_request(
    ep: &Endpoint,
    api: ApiType,
    headers: &RequestHeaders,
    streaming: bool,
    body: &[u8],
) -> Vec<u8> {
    let mut out = http_head(ep, api, headers, streaming);
    out.reserve(body.len() + 24);
    content_length_end(&mut out, body.len());
    out.extend_from_slice(body);
    out
}

/// What every request to `ep` starts with, the same for every row: the request line and the
/// headers up to the value of `Content-Length` (which ends `Content-Length: `). The added
/// headers may be large (a token of a few hundred KiB), so `RequestTable` keeps it once.
pub fn http_head(
    ep: &Endpoint,
    api: ApiType,
    headers: &RequestHeaders,
    streaming: bool,
) -> Vec<u8> {
    let extra: usize = headers.extra.iter().map(|(n, v)| n.len() + v.len() + 4).sum();
    let auth = headers.authorization.as_ref().map_or(0, |v| v.len() + 17);
    let mut out = Vec::with_capacity(200 + extra + auth);
    let accept = if streaming { "text/event-stream" } else { "application/json" };
    // Writing into a Vec cannot fail.
    let _ = write!(
        out,
        "POST {}{} HTTP/1.1\r\nHost: {}\r\n",
        ep.path_prefix,
        api.path(),
        ep.host_header()
    );
    if let Some(value) = &headers.authorization {
        let _ = write!(out, "Authorization: {value}\r\n");
    }
    for (name, value) in &headers.extra {
        let _ = write!(out, "{name}: {value}\r\n");
    }
    let _ = write!(out, "Content-Type: application/json\r\nAccept: {accept}\r\nContent-Length: ");
    out
}

/// A row's own start: its Content-Length value and the blank line that ends the head.
fn content_length_end(out: &mut Vec<u8>, body_len: usize) {
    let _ = write!(out, "{body_len}\r\n\r\n");
}

/// The headers a run adds to every request besides the protocol's own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHeaders {
    /// The `Authorization` value: `Bearer <api key>`, or `Basic <…>` from an endpoint URL's
    /// user and password.
    pub authorization: Option<String>,
    /// `--header 'Name: value'` lines, in the order given (names and values checked by the
    /// plan: no CR/LF, no header the protocol writes itself).
    pub extra: Vec<(String, String)>,
}

impl RequestHeaders {
    /// `Authorization: Bearer <key>` when there is a key, and nothing else.
    pub fn bearer(api_key: Option<&str>) -> RequestHeaders {
        RequestHeaders { authorization: api_key.map(|k| format!("Bearer {k}")), extra: Vec::new() }
    }
}

/// All rows' request bytes in one flat buffer plus offsets; shared read-only with the workers
/// through fork. What every request shares is kept once at the buffer's start: the head up to
/// the Content-Length value (`http_head`) and the body's start (`body_prefix`, the model), so
/// a large header or model name costs its size once, not once per row. A row holds only its
/// own bytes: its Content-Length value and blank line, then its body past the shared start.
/// A request is four segments, head, row start, body start, row rest (`RequestBytes::segments`),
/// which a connection copies into its write buffer. The buffer is reference-counted, so a
/// row's `RequestBytes` (`row_bytes`) is a handle, not a copy.
#[derive(Clone, Debug)]
pub struct RequestTable {
    bytes: Arc<Vec<u8>>,
    /// `bytes[..head_end]` is the shared head.
    head_end: usize,
    /// `bytes[head_end..shared_end]` is the shared body start.
    shared_end: usize,
    /// `offsets[i]..offsets[i + 1]` is row i's own part; starts with `shared_end`.
    offsets: Vec<usize>,
}

impl Default for RequestTable {
    fn default() -> Self {
        RequestTable::new()
    }
}

impl RequestTable {
    /// A table with no shared parts: each row is a whole request (`push`).
    pub fn new() -> RequestTable {
        RequestTable::with_shared(b"", b"")
    }

    /// A table whose requests all start with `head` (`http_head`) and whose bodies all start
    /// with `body_start` (`body_prefix`); rows are added with `push_body`.
    pub fn with_shared(head: &[u8], body_start: &[u8]) -> RequestTable {
        let bytes = [head, body_start].concat();
        let shared_end = bytes.len();
        RequestTable {
            bytes: Arc::new(bytes),
            head_end: head.len(),
            shared_end,
            offsets: vec![shared_end],
        }
    }

    /// Appends one row as a whole request (a table made by `new`); returns its row index.
    pub fn push(&mut self, request: &[u8]) -> u32 {
        debug_assert_eq!(self.shared_end, 0, "a table with shared parts takes bodies");
        self.push_own(&[request])
    }

    /// Appends one row by its whole body, which starts with the table's body start; the row
    /// keeps only its Content-Length and the rest of the body. Returns its row index.
    pub fn push_body(&mut self, body: &[u8]) -> Result<u32, RequestError> {
        let start = &self.bytes[self.head_end..self.shared_end];
        let Some(rest) = body.strip_prefix(start) else {
            return Err(RequestError::SharedStart);
        };
        let mut length = Vec::with_capacity(24);
        content_length_end(&mut length, body.len());
        Ok(self.push_own(&[&length, rest]))
    }

    /// Appends one row by its whole body, as `push_body`, with `headers` of its own after the
    /// shared ones (an agentic turn's routing headers, which carry its conversation's id).
    /// Names and values must hold no CR or LF (the plan checks them).
    pub fn push_body_with_headers(
        &mut self,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> Result<u32, RequestError> {
        if headers.is_empty() {
            return self.push_body(body);
        }
        let start = &self.bytes[self.head_end..self.shared_end];
        let Some(rest) = body.strip_prefix(start) else {
            return Err(RequestError::SharedStart);
        };
        let mut own = Vec::with_capacity(64);
        let _ = write!(own, "{}\r\n", body.len());
        for (name, value) in headers {
            let _ = write!(own, "{name}: {value}\r\n");
        }
        own.extend_from_slice(b"\r\n");
        Ok(self.push_own(&[&own, rest]))
    }

    fn push_own(&mut self, parts: &[&[u8]]) -> u32 {
        // Unique while the table is being built: no copy.
        let bytes = Arc::make_mut(&mut self.bytes);
        for part in parts {
            bytes.extend_from_slice(part);
        }
        self.offsets.push(bytes.len());
        (self.offsets.len() - 2) as u32
    }

    /// Builds every row: body, then the HTTP head around it.
    pub fn build<'p>(
        ep: &Endpoint,
        opts: &RequestOptions,
        api_key: Option<&str>,
        prompts: impl IntoIterator<Item = Prompt<'p>>,
    ) -> Result<RequestTable, RequestError> {
        let headers = RequestHeaders::bearer(api_key);
        let head = http_head(ep, opts.api, &headers, opts.streaming);
        let mut table = RequestTable::with_shared(&head, &body_prefix(opts)?);
        for prompt in prompts {
            table.push_body(&body_json_row(opts, prompt, RowParams::default())?)?;
        }
        Ok(table)
    }

    /// Row `i`'s whole request, gathered (for tests and tools; a connection writes the
    /// segments). Panics if `i` is out of range (rows come from the same plan).
    pub fn request(&self, i: usize) -> Vec<u8> {
        self.row_bytes(i).segments().concat()
    }

    /// Row `i` as an owned handle on the shared buffer (a reference count, no copy), for writes
    /// that need an owned buffer.
    pub fn row_bytes(&self, i: usize) -> RequestBytes {
        let (start, end) = (self.offsets[i], self.offsets[i + 1]);
        // Only a shared body start needs the row cut where its head ends (its Content-Length
        // value, then any headers of its own, then the blank line); elsewhere the whole row is
        // one segment.
        let split = match self.shared_end > self.head_end {
            true => head_end_in(&self.bytes[start..end]).map_or(end, |i| start + i),
            false => end,
        };
        RequestBytes {
            all: self.bytes.clone(),
            head_end: self.head_end,
            shared_end: self.shared_end,
            start,
            split,
            end,
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held (for the memory budget).
    pub fn total_bytes(&self) -> usize {
        self.bytes.len()
    }
}

/// Where a row's own head part ends in `own` (just past its blank line): right after the
/// Content-Length value's CRLF when the next two bytes are the blank line, the common case,
/// else past the first CRLF CRLF (a row with headers of its own).
fn head_end_in(own: &[u8]) -> Option<usize> {
    let first = memchr::memchr(b'\r', own)?;
    if own.get(first..first + 4) == Some(b"\r\n\r\n") {
        return Some(first + 4);
    }
    memchr::memmem::find(&own[first..], b"\r\n\r\n").map(|i| first + i + 4)
}

/// One row's request, sharing the table's buffer.
#[derive(Clone, Debug)]
pub struct RequestBytes {
    all: Arc<Vec<u8>>,
    head_end: usize,
    shared_end: usize,
    start: usize,
    /// Where the row's own start ends and its body's rest begins.
    split: usize,
    end: usize,
}

impl RequestBytes {
    /// The request in wire order: the shared head, the row's Content-Length and blank line,
    /// the shared body start, the rest of the row's body (any may be empty).
    pub fn segments(&self) -> [&[u8]; 4] {
        let b = &self.all[..];
        [
            &b[..self.head_end],
            &b[self.start..self.split],
            &b[self.head_end..self.shared_end],
            &b[self.split..self.end],
        ]
    }

    /// The request's length on the wire.
    pub fn len(&self) -> usize {
        self.shared_end + (self.end - self.start)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(api: ApiType, streaming: bool, usage: bool) -> RequestOptions {
        RequestOptions {
            stream_include_usage: usage,
            ..RequestOptions::basic(api, "test-model", streaming, 1024)
        }
    }

    fn body(o: &RequestOptions, p: Prompt<'_>) -> String {
        String::from_utf8(body_json(o, p).unwrap()).unwrap()
    }

    const HELLO: Prompt<'static> = Prompt::Text { system: None, user: "Hello there" };

    #[test]
    fn chat_bodies_match_reference_bytes() {
        let pre_feature = r#"{"model":"test-model","messages":[{"role":"user","content":"Hello there"}],"max_completion_tokens":1024,"stream":true}"#;
        assert_eq!(body(&opts(ApiType::OpenAiChat, true, false), HELLO), pre_feature);
        assert_eq!(
            body(&opts(ApiType::OpenAiChat, true, true), HELLO),
            r#"{"model":"test-model","messages":[{"role":"user","content":"Hello there"}],"max_completion_tokens":1024,"stream":true,"stream_options":{"include_usage":true}}"#
        );
        // Non-streaming never carries stream nor stream_options.
        assert_eq!(
            body(&opts(ApiType::OpenAiChat, false, true), HELLO),
            r#"{"model":"test-model","messages":[{"role":"user","content":"Hello there"}],"max_completion_tokens":1024}"#
        );
        let sys = Prompt::Text { system: Some("be \"brief\""), user: "hi\n" };
        assert_eq!(
            body(&opts(ApiType::OpenAiChat, false, false), sys),
            r#"{"model":"test-model","messages":[{"role":"system","content":"be \"brief\""},{"role":"user","content":"hi\n"}],"max_completion_tokens":1024}"#
        );
        // A `messages` value is written as serde_json orders its maps (sorted keys here).
        let messages = serde_json::json!([{"content": "x", "role": "user"}]);
        let mut o = opts(ApiType::OpenAiChat, false, false);
        o.temperature = Some(0.5);
        o.seed = Some(7);
        o.extra.push(("n".into(), serde_json::json!(1)));
        assert_eq!(
            body(&o, Prompt::Messages(&messages)),
            r#"{"model":"test-model","messages":[{"content":"x","role":"user"}],"max_completion_tokens":1024,"temperature":0.5,"seed":7,"n":1}"#
        );
    }

    #[test]
    fn multimodal_parts_are_sent_in_the_reference_key_order_on_chat_only() {
        let parts = [
            ContentPart::Text("the \"shirt\"".into()),
            ContentPart::ImageUrl("data:image/PNG;base64,iVBO".into()),
        ];
        let p = Prompt::Parts { system: Some("be json"), user: &parts };
        assert_eq!(
            body(&opts(ApiType::OpenAiChat, true, true), p),
            r#"{"model":"test-model","messages":[{"role":"system","content":"be json"},{"role":"user","content":[{"type":"text","text":"the \"shirt\""},{"type":"image_url","image_url":{"url":"data:image/PNG;base64,iVBO"}}]}],"max_completion_tokens":1024,"stream":true,"stream_options":{"include_usage":true}}"#
        );
        for api in [ApiType::OpenAiCompletions, ApiType::Sglang] {
            let err = body_json(&opts(api, false, false), p).unwrap_err().to_string();
            assert!(err.contains("multimodal content parts"), "{err}");
            assert!(err.contains("--api-type openai"), "{err}");
        }
    }

    #[test]
    fn no_stream_options_when_n_above_one() {
        let mut o = opts(ApiType::OpenAiChat, true, true);
        o.extra.push(("n".into(), serde_json::json!(2)));
        assert_eq!(
            body(&o, HELLO),
            r#"{"model":"test-model","messages":[{"role":"user","content":"Hello there"}],"max_completion_tokens":1024,"stream":true,"n":2}"#
        );
        o.extra[0].1 = serde_json::json!(1);
        assert!(body(&o, HELLO).contains(r#""stream_options":{"include_usage":true},"n":1"#));
    }

    #[test]
    fn completions_bodies_match_reference_bytes() {
        let ids = [1u32, 2, 3];
        assert_eq!(
            body(&opts(ApiType::OpenAiCompletions, true, false), Prompt::TokenIds(&ids)),
            r#"{"model":"test-model","prompt":[1,2,3],"max_tokens":1024,"min_tokens":1,"skip_special_tokens":true,"stream":true}"#
        );
        assert_eq!(
            body(&opts(ApiType::OpenAiCompletions, true, true), Prompt::TokenIds(&ids)),
            r#"{"model":"test-model","prompt":[1,2,3],"max_tokens":1024,"min_tokens":1,"skip_special_tokens":true,"stream":true,"stream_options":{"include_usage":true}}"#
        );
        assert_eq!(
            body(&opts(ApiType::OpenAiCompletions, false, true), HELLO),
            r#"{"model":"test-model","prompt":"Hello there","max_tokens":1024,"min_tokens":1,"skip_special_tokens":true,"stream":false}"#
        );
    }

    #[test]
    fn sglang_bodies_omit_defaults() {
        let ids = [5u32, 6];
        let mut o = opts(ApiType::Sglang, true, true);
        o.temperature = Some(1.0);
        o.top_k = Some(20);
        assert_eq!(
            body(&o, Prompt::TokenIds(&ids)),
            r#"{"input_ids":[5,6],"sampling_params":{"max_new_tokens":1024,"top_k":20},"stream":true}"#
        );
    }

    #[test]
    fn unsupported_prompts_are_errors() {
        let ids = [1u32];
        assert!(body_json(&opts(ApiType::OpenAiChat, true, true), Prompt::TokenIds(&ids)).is_err());
        let m = serde_json::json!([]);
        assert!(body_json(&opts(ApiType::Sglang, true, true), Prompt::Messages(&m)).is_err());
    }

    #[test]
    fn an_https_url_gets_tls_with_its_host_as_server_name_and_port_443_by_default() {
        use crate::http::tls::{TlsSettings, Verify};
        let ep = Endpoint::parse("https://localhost:8443/v1").unwrap();
        assert_eq!((ep.port, ep.path_prefix.as_str()), (8443, "/v1"));
        let want = TlsSettings { server_name: "localhost".into(), verify: Verify::SystemRoots };
        assert_eq!(ep.tls, Some(want));
        let ep = Endpoint::parse("https://127.0.0.1").unwrap();
        assert_eq!((ep.port, ep.host_header()), (443, "127.0.0.1".to_string()));
        assert_eq!(ep.tls.unwrap().server_name, "127.0.0.1");
        let ep = Endpoint::parse("https://[::1]:9").unwrap();
        assert_eq!(ep.tls.unwrap().server_name, "::1", "no brackets in the server name");
        let e = Endpoint::parse("ftp://x").unwrap_err().to_string();
        assert!(e.contains("it must start with http:// or https://"), "{e}");
    }

    #[test]
    fn endpoint_parsing_and_request_head() {
        let ep = Endpoint::parse("http://127.0.0.1:8765/").unwrap();
        assert_eq!((ep.host.as_str(), ep.port, ep.path_prefix.as_str()), ("127.0.0.1", 8765, ""));
        assert_eq!(ep.addr, "127.0.0.1:8765".parse::<SocketAddr>().unwrap());
        let ep80 = Endpoint::parse("http://127.0.0.1/api").unwrap();
        assert_eq!(
            (ep80.port, ep80.path_prefix.as_str(), ep80.host_header()),
            (80, "/api", "127.0.0.1".into())
        );
        assert_eq!(ep.tls, None);
        let local = Endpoint::parse("http://localhost:9").unwrap();
        assert_eq!(
            (local.host.as_str(), local.addr),
            ("localhost", "127.0.0.1:9".parse().unwrap())
        );
        assert!(Endpoint::parse("localhost:80").is_err());
        assert!(Endpoint::parse("http://127.0.0.1:notaport").is_err());
        let req =
            http_request(&ep, ApiType::OpenAiChat, &RequestHeaders::bearer(Some("k")), true, b"{}");
        assert_eq!(
            String::from_utf8(req).unwrap(),
            "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8765\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: 2\r\n\r\n{}"
        );
        let req = http_request(&ep80, ApiType::Sglang, &RequestHeaders::default(), false, b"{}");
        assert!(req.starts_with(b"POST /api/generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type"));
        let headers = RequestHeaders {
            authorization: Some("Basic dTpw".into()),
            extra: vec![("X-Team".into(), "infra".into()), ("X-Trace".into(), "1".into())],
        };
        let req =
            String::from_utf8(http_request(&ep80, ApiType::Sglang, &headers, false, b"")).unwrap();
        assert!(
            req.contains(
                "\r\nAuthorization: Basic dTpw\r\nX-Team: infra\r\nX-Trace: 1\r\nContent-Type"
            ),
            "{req}"
        );
    }

    #[test]
    fn request_table_rows() {
        let mut t = RequestTable::new();
        assert!(t.is_empty());
        assert_eq!(t.push(b"abc"), 0);
        assert_eq!(t.push(b""), 1);
        assert_eq!(t.push(b"de"), 2);
        assert_eq!(
            (t.request(0), t.request(1), t.request(2), t.len()),
            (b"abc".to_vec(), vec![], b"de".to_vec(), 3)
        );
    }

    #[test]
    fn what_every_request_shares_is_kept_once_and_each_row_is_whole_on_the_wire() {
        let ep = Endpoint::parse("http://127.0.0.1:8765").unwrap();
        let big = "t".repeat(100_000);
        let headers =
            RequestHeaders { authorization: None, extra: vec![("X-Token".into(), big.clone())] };
        for api in [ApiType::OpenAiChat, ApiType::OpenAiCompletions, ApiType::Sglang] {
            let mut o = opts(api, true, true);
            o.model = "m".repeat(3000);
            let mut table = RequestTable::with_shared(
                &http_head(&ep, api, &headers, true),
                &body_prefix(&o).unwrap(),
            );
            let prompts = ["a", "a much longer prompt, with \r\n\r\n inside"];
            for _ in 0..100 {
                for p in prompts {
                    table
                        .push_body(&body_json(&o, Prompt::Text { system: None, user: p }).unwrap())
                        .unwrap();
                }
            }
            for (i, p) in prompts.iter().enumerate() {
                let body = body_json(&o, Prompt::Text { system: None, user: p }).unwrap();
                let whole = http_request(&ep, api, &headers, true, &body);
                assert_eq!(table.request(i), whole, "{api:?} row {i}");
                assert_eq!(table.row_bytes(i).len(), whole.len());
            }
            // 200 rows carry the 100 KB header and the 3 KB model once, not 200 times.
            assert!(
                table.total_bytes() < big.len() + 3000 + 200 * 200,
                "{api:?}: {}",
                table.total_bytes()
            );
        }
    }

    #[test]
    fn an_agentic_row_says_stream_false_where_other_rows_leave_it_out() {
        let o = opts(ApiType::OpenAiChat, false, false);
        let plain = row_body(&o, HELLO, RowParams::default());
        assert!(!plain.contains("\"stream\""), "{plain}");
        let agentic = row_body(&o, HELLO, RowParams { stream_key: true, ..Default::default() });
        assert!(agentic.ends_with(",\"stream\":false}"), "{agentic}");
    }

    #[test]
    fn a_row_s_own_headers_follow_the_shared_ones_and_the_request_stays_whole() {
        let ep = Endpoint::parse("http://127.0.0.1:8765").unwrap();
        let o = opts(ApiType::OpenAiChat, true, true);
        let head = http_head(&ep, o.api, &RequestHeaders::default(), true);
        let mut table = RequestTable::with_shared(&head, &body_prefix(&o).unwrap());
        let body = body_json(&o, Prompt::Text { system: None, user: "x\r\n\r\ny" }).unwrap();
        table.push_body(&body).unwrap();
        table.push_body_with_headers(&body, &[("X-Session-ID", "conv-7")]).unwrap();
        table.push_body_with_headers(&body, &[]).unwrap();
        let plain = http_request(&ep, o.api, &RequestHeaders::default(), true, &body);
        assert_eq!(table.request(0), plain);
        assert_eq!(table.request(2), plain, "no headers of its own: as push_body");
        let mut with = head.clone();
        with.extend_from_slice(
            format!("{}\r\nX-Session-ID: conv-7\r\n\r\n", body.len()).as_bytes(),
        );
        with.extend_from_slice(&body);
        assert_eq!(String::from_utf8(table.request(1)).unwrap(), String::from_utf8(with).unwrap());
        assert_eq!(table.row_bytes(1).len(), table.request(1).len());
    }

    #[test]
    fn a_body_that_does_not_start_as_its_table_shares_is_refused() {
        let o = opts(ApiType::OpenAiChat, false, false);
        let mut table =
            RequestTable::with_shared(b"POST / HTTP/1.1\r\n", &body_prefix(&o).unwrap());
        let other = RequestOptions { model: "other".into(), ..o };
        let body = body_json(&other, HELLO).unwrap();
        assert!(matches!(table.push_body(&body), Err(RequestError::SharedStart)));
    }

    fn row_body(o: &RequestOptions, p: Prompt<'_>, row: RowParams<'_>) -> String {
        String::from_utf8(body_json_row(o, p, row).unwrap()).unwrap()
    }

    fn with_penalties(api: ApiType) -> RequestOptions {
        let mut o = opts(api, false, false);
        o.sampling.repetition_penalty = Some(1.1);
        o.sampling.presence_penalty = Some(0.2);
        o.sampling.frequency_penalty = Some(0.3);
        o
    }

    #[test]
    fn chat_sends_penalties_n_and_chat_template_kwargs_as_the_reference() {
        let mut o = with_penalties(ApiType::OpenAiChat);
        o.sampling.chat_template_kwargs = Some(serde_json::json!({"enable_thinking": false}));
        assert_eq!(
            row_body(&o, HELLO, RowParams { n: Some(3), ..Default::default() }),
            r#"{"model":"test-model","messages":[{"role":"user","content":"Hello there"}],"max_completion_tokens":1024,"repetition_penalty":1.1,"n":3,"presence_penalty":0.2,"frequency_penalty":0.3,"chat_template_kwargs":{"enable_thinking":false}}"#
        );
    }

    #[test]
    fn completions_sends_penalties_n_and_skip_special_tokens_false() {
        let mut o = with_penalties(ApiType::OpenAiCompletions);
        o.sampling.skip_special_tokens = false;
        o.min_output_tokens = Some(4);
        // chat_template_kwargs is chat only (the plan refuses it elsewhere); never sent here.
        o.sampling.chat_template_kwargs = Some(serde_json::json!({"x": 1}));
        assert_eq!(
            row_body(&o, Prompt::TokenIds(&[5, 6]), RowParams { n: Some(2), ..Default::default() }),
            r#"{"model":"test-model","prompt":[5,6],"max_tokens":1024,"min_tokens":4,"skip_special_tokens":false,"repetition_penalty":1.1,"n":2,"presence_penalty":0.2,"frequency_penalty":0.3,"stream":false}"#
        );
    }

    #[test]
    fn sglang_puts_penalties_n_and_ignore_eos_inside_sampling_params() {
        let mut o = with_penalties(ApiType::Sglang);
        o.sampling.ignore_eos = true;
        assert_eq!(
            row_body(&o, Prompt::TokenIds(&[9]), RowParams { n: Some(2), ..Default::default() }),
            r#"{"input_ids":[9],"sampling_params":{"max_new_tokens":1024,"repetition_penalty":1.1,"presence_penalty":0.2,"frequency_penalty":0.3,"n":2,"ignore_eos":true},"stream":false}"#
        );
    }

    #[test]
    fn unset_parameters_are_omitted_from_every_api() {
        for api in [ApiType::OpenAiChat, ApiType::OpenAiCompletions, ApiType::Sglang] {
            let b = body(&opts(api, false, false), Prompt::TokenIds(&[1]).into_text_if(api));
            for k in ["penalty", "\"n\"", "chat_template_kwargs", "ignore_eos", "seed"] {
                assert!(!b.contains(k), "{api:?} body {b} carries {k}");
            }
        }
    }

    impl<'a> Prompt<'a> {
        /// Chat cannot carry token ids; the omission test uses text there.
        fn into_text_if(self, api: ApiType) -> Prompt<'a> {
            if api == ApiType::OpenAiChat {
                HELLO
            } else {
                self
            }
        }
    }

    #[test]
    fn ignore_eos_is_a_top_level_true_for_openai_apis() {
        for api in [ApiType::OpenAiChat, ApiType::OpenAiCompletions] {
            let mut o = opts(api, false, false);
            o.sampling.ignore_eos = true;
            let b = body(&o, HELLO);
            let v: serde_json::Value = serde_json::from_str(&b).unwrap();
            assert_eq!(v["ignore_eos"], serde_json::json!(true), "{b}");
        }
    }

    #[test]
    fn a_rows_drawn_output_length_replaces_max_tokens_per_api() {
        let row = RowParams { max_output_tokens: Some(77), ..Default::default() };
        let cases = [
            (ApiType::OpenAiChat, "\"max_completion_tokens\":77"),
            (ApiType::OpenAiCompletions, "\"max_tokens\":77"),
            (ApiType::Sglang, "\"max_new_tokens\":77"),
        ];
        for (api, want) in cases {
            let b = row_body(&opts(api, false, false), HELLO, row);
            assert!(b.contains(want) && !b.contains("1024"), "{api:?}: {b}");
        }
    }

    #[test]
    fn extra_body_keys_win_over_built_keys_without_duplicates() {
        let mut o = opts(ApiType::OpenAiCompletions, false, false);
        o.temperature = Some(0.5);
        o.extra.push(("temperature".into(), serde_json::json!(0.9)));
        o.extra.push(("max_tokens".into(), serde_json::json!(8)));
        o.extra.push(("logprobs".into(), serde_json::json!(2)));
        assert_eq!(
            body(&o, HELLO),
            r#"{"model":"test-model","prompt":"Hello there","min_tokens":1,"skip_special_tokens":true,"stream":false,"temperature":0.9,"max_tokens":8,"logprobs":2}"#
        );
    }

    #[test]
    fn streaming_chat_with_a_rows_n_above_one_asks_no_usage() {
        let o = opts(ApiType::OpenAiChat, true, true);
        let b = row_body(&o, HELLO, RowParams { n: Some(2), ..Default::default() });
        assert!(b.contains("\"n\":2") && !b.contains("stream_options"), "{b}");
    }

    #[test]
    fn a_rows_request_columns_go_where_its_api_carries_them() {
        let columns = vec![
            ("stop".to_string(), serde_json::json!(["\n"])),
            ("tools".to_string(), serde_json::json!([{"type": "function"}])),
            ("name".to_string(), serde_json::json!("Bob")),
        ];
        let row = RowParams { columns: &columns, ..Default::default() };
        let chat = row_body(&opts(ApiType::OpenAiChat, false, false), HELLO, row);
        assert!(chat.contains(r#"{"role":"user","content":"Hello there","name":"Bob"}"#), "{chat}");
        assert!(chat.contains(r#","stop":["\n"]"#) && chat.contains(r#","tools":[{"#), "{chat}");
        assert_eq!(chat.matches("\"name\"").count(), 1, "only on the user message: {chat}");
        let completions = row_body(&opts(ApiType::OpenAiCompletions, false, false), HELLO, row);
        assert!(completions.contains(r#","stop":["\n"]"#), "{completions}");
        assert!(!completions.contains("tools") && !completions.contains("Bob"), "{completions}");
        let sglang = row_body(&opts(ApiType::Sglang, false, false), Prompt::TokenIds(&[1]), row);
        assert!(!sglang.contains("stop") && !sglang.contains("tools"), "{sglang}");
    }

    #[test]
    fn a_video_row_is_its_prompt_and_fields_on_the_video_route_with_no_shared_start() {
        let o = opts(ApiType::Videogen, false, false);
        assert!(body_prefix(&o).unwrap().is_empty());
        let columns = [("seed".to_string(), serde_json::json!(3))];
        let row = RowParams { columns: &columns, ..RowParams::default() };
        let body = row_body(&o, HELLO, row);
        assert!(body.starts_with(r#"{"prompt":"Hello there","size":"720x1280","#), "{body}");
        assert!(body.contains(r#","seed":3,"#) && !body.contains("model"), "{body}");
        let ep = Endpoint::parse("http://127.0.0.1:8000").unwrap();
        let head = String::from_utf8(http_head(&ep, ApiType::Videogen, &Default::default(), false))
            .unwrap();
        assert!(head.starts_with("POST /v1/videos/generations HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("Accept: application/json"), "{head}");
        let sys = Prompt::Text { system: Some("s"), user: "u" };
        assert!(body_json(&o, sys).is_err());
        let err = body_json(&opts(ApiType::Videogen, true, false), HELLO).unwrap_err();
        assert!(err.to_string().contains("non-streaming"), "{err}");
    }
}
