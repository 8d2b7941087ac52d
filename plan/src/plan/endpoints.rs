//! Endpoints and the model: URLs checked, secrets registered, the model name resolved.

use std::path::PathBuf;

use loadgen_worker::http::tls::Verify;

use super::headers::{check_header_block, check_value, parse_header};
use crate::error::AppError;
use crate::redact::Secret;
use crate::yaml::Config;

/// A validated endpoint: its base URL (`http://host[:port][/prefix]`, without a trailing slash
/// or a trailing `/v1`, which the API's routes add) and the Basic auth of its `user:password@`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointUrl {
    pub url: String,
    /// `Basic <base64(user:password)>` from the URL's userinfo, percent-decoded.
    pub basic_auth: Option<Secret>,
}

/// The null endpoint: no network; each worker answers its samples itself, so a run measures the
/// coordinator's pipeline alone (scheduler, rings, aggregator, events.jsonl, reports).
pub const NULL_ENDPOINT: &str = "null://";

impl EndpointUrl {
    pub fn is_null(&self) -> bool {
        self.url == NULL_ENDPOINT
    }
}

/// Model name used with the embedded stub when no `--model` is given.
pub const EMBEDDED_MODEL: &str = "llm-loadgen-stub";

pub(super) fn parse_endpoints(config: &Config) -> Result<Vec<EndpointUrl>, AppError> {
    let endpoints: Vec<EndpointUrl> = config
        .endpoint_config
        .endpoints
        .iter()
        .map(|u| parse_endpoint(u))
        .collect::<Result<_, _>>()?;
    if endpoints.len() > 1 && endpoints.iter().any(EndpointUrl::is_null) {
        return Err(AppError::Input(format!(
            "endpoint {NULL_ENDPOINT} measures the client alone and cannot be mixed with other \
             endpoints; give it on its own"
        )));
    }
    Ok(endpoints)
}

/// Registers every secret of the endpoint configuration with `redact`, before anything can
/// print one: the API key, what a URL's userinfo hides (and the `Basic` token it becomes), and
/// the value of each header whose name says it holds a secret (`redact::is_secret_header`).
/// Other header values are not secrets: they are shown as given.
pub fn register_secrets(ec: &crate::yaml::EndpointConfig) {
    use crate::redact::register_secret;
    if let Some(key) = &ec.api_key {
        register_secret(key);
    }
    for url in &ec.endpoints {
        crate::redact::url_secrets(url.trim()).iter().for_each(|s| register_secret(s));
        if let Some(Secret(basic)) = url_userinfo(url.trim()).and_then(basic_auth) {
            register_secret(basic.trim_start_matches("Basic "));
        }
    }
    for line in &ec.headers {
        match line.split_once(':') {
            Some((name, value)) if crate::redact::is_secret_header(name) => register_secret(value),
            _ => {}
        }
    }
}

/// The userinfo of an `http(s)://` URL's authority, if it has one.
fn url_userinfo(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    authority.rsplit_once('@').map(|(userinfo, _)| userinfo)
}

/// `--header` lines as (name, value), in the order given.
pub type HeaderLines = Vec<(String, String)>;

/// The environment variable an OpenAI SDK user already has set; used when no key is given.
pub const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// The run's `Authorization` and its other headers: `--api-key` (else `OPENAI_API_KEY`, when an
/// endpoint is given) as a bearer token, or an `Authorization` given with `--header`. A key
/// from the environment is written back, so `config.yaml` shows that one was sent (redacted).
/// Two sources of one run's authorization are refused rather than one dropped. A key taken from
/// the environment is said in `notes`.
pub fn resolve_auth(
    config: &mut Config,
    endpoints: &[EndpointUrl],
    notes: &mut Vec<String>,
) -> Result<(Option<Secret>, HeaderLines), AppError> {
    let remote = !endpoints.is_empty() && !endpoints.iter().all(EndpointUrl::is_null);
    if config.endpoint_config.api_key.is_none() && remote {
        if let Some(key) = std::env::var(API_KEY_ENV).ok().filter(|k| !k.trim().is_empty()) {
            crate::redact::register_secret(&key);
            notes.push(format!("note: no --api-key given: sending the key in {API_KEY_ENV}"));
            config.endpoint_config.api_key = Some(key);
        }
    }
    let mut headers = Vec::with_capacity(config.endpoint_config.headers.len());
    let mut authorization = None;
    for line in &config.endpoint_config.headers {
        let (name, value) = parse_header(line)?;
        if name.eq_ignore_ascii_case("authorization") {
            authorization = Some(Secret(value));
        } else {
            headers.push((name, value));
        }
    }
    let key = config.endpoint_config.api_key.as_deref();
    if let Some(key) = key {
        check_value("--api-key (or OPENAI_API_KEY)", key.trim())?;
    }
    let basic = endpoints.iter().any(|e| e.basic_auth.is_some());
    let sources = [key.is_some(), authorization.is_some(), basic];
    if sources.iter().filter(|s| **s).count() > 1 {
        return Err(AppError::Input(
            "the requests' Authorization is given twice (of --api-key or OPENAI_API_KEY, \
             --header 'Authorization: …' and a user:password@ in an endpoint URL, give one)"
                .into(),
        ));
    }
    let authorization = authorization.or(key.map(|k| Secret(format!("Bearer {}", k.trim()))));
    check_header_block(authorization.as_ref().map(|s| s.0.as_str()), &headers)?;
    Ok((authorization, headers))
}

/// Says when a base URL's trailing `/v1` is taken as the API's own (OpenAI SDK users write base
/// URLs that way), so no request goes to `/v1/v1/…`.
pub(super) fn note_v1_suffix(config: &Config, notes: &mut Vec<String>) {
    for url in &config.endpoint_config.endpoints {
        let (stripped, _) = crate::redact::split_userinfo(url.trim());
        if stripped.trim_end_matches('/').ends_with("/v1") {
            notes.push(format!(
                "note: endpoint {}: the trailing /v1 is the API's own; requests go to \
                 {}/v1/…",
                crate::redact::redact_url(url.trim()),
                v1_base(&stripped)
            ));
        }
    }
}

/// A base URL without its trailing slash and trailing `/v1`.
fn v1_base(url: &str) -> String {
    let url = url.trim_end_matches('/');
    url.strip_suffix("/v1").unwrap_or(url).to_string()
}

/// Validates an endpoint base URL: `http[s]://[user:password@]host[:port][/prefix]`, an IPv6
/// host in brackets; the userinfo becomes Basic auth and leaves the URL.
pub fn parse_endpoint(url: &str) -> Result<EndpointUrl, AppError> {
    let url = url.trim();
    if let Some(rest) = url.strip_prefix("null://") {
        if !rest.trim_matches('/').is_empty() {
            return Err(AppError::Input(format!(
                "endpoint {url:?}: the null endpoint takes nothing after {NULL_ENDPOINT}"
            )));
        }
        return Ok(EndpointUrl { url: NULL_ENDPOINT.to_string(), basic_auth: None });
    }
    let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else {
        return Err(AppError::Input(format!(
            "endpoint {:?} must start with http:// or https:// (e.g. http://localhost:8000)",
            crate::redact::redact_url(url)
        )));
    };
    if crate::redact::userinfo_needs_encoding(url) {
        return Err(AppError::Input(format!(
            "endpoint {}: its user:password holds a '/', '?' or '#', which end the host part \
             of a URL; percent-encode them in the password (%2F, %3F, %23)",
            crate::redact::redact_url(url)
        )));
    }
    if rest.contains(['?', '#']) {
        return Err(AppError::Input(format!(
            "endpoint {}: a base URL has no query or fragment; give scheme, host, port and path",
            crate::redact::redact_url(url)
        )));
    }
    let authority = rest.split('/').next().unwrap_or_default();
    let host_only = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if !valid_host_port(host_only) {
        return Err(AppError::Input(format!(
            "endpoint {:?} has no valid host[:port] (an IPv6 address goes in brackets: \
             http://[::1]:8000)",
            crate::redact::redact_url(url)
        )));
    }
    let (stripped, _) = crate::redact::split_userinfo(url);
    Ok(EndpointUrl { url: v1_base(&stripped), basic_auth: url_userinfo(url).and_then(basic_auth) })
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, with a port in 1..=65535; a bare IPv6
/// address (colons outside brackets) is not one.
fn valid_host_port(authority: &str) -> bool {
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let Some((addr, rest)) = v6.split_once(']') else { return false };
            if addr.parse::<std::net::Ipv6Addr>().is_err() {
                return false;
            }
            match rest.strip_prefix(':') {
                Some(port) => (addr, Some(port)),
                None if rest.is_empty() => (addr, None),
                None => return false,
            }
        }
        None => match authority.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => return false,
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    !host.is_empty() && port_ok
}

/// `Basic base64(user:password)` of a URL's userinfo, percent-decoded as RFC 3986 writes it.
/// As curl and browsers send it, `user@` is the user with an empty password (`user:`), and an
/// empty userinfo (`http://@host`) sends no credentials.
fn basic_auth(userinfo: &str) -> Option<Secret> {
    use base64::Engine;
    if userinfo.is_empty() {
        return None;
    }
    let mut decoded = percent_decode(userinfo);
    if !userinfo.contains(':') {
        decoded.push(b':');
    }
    let token = base64::engine::general_purpose::STANDARD.encode(decoded);
    Some(Secret(format!("Basic {token}")))
}

fn percent_decode(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

pub(super) fn resolve_model(
    config: &Config,
    endpoints: &[EndpointUrl],
) -> Result<String, AppError> {
    match &config.model_params.name {
        Some(name) if !name.trim().is_empty() => Ok(name.clone()),
        // The reference takes the submission's model when model_params.name is not given.
        _ if config.submission_ref.is_some() => {
            Ok(config.submission_ref.as_ref().map(|r| r.model.clone()).unwrap_or_default())
        }
        _ if endpoints.is_empty() || endpoints.iter().all(EndpointUrl::is_null) => {
            Ok(EMBEDDED_MODEL.to_string())
        }
        _ => Err(AppError::Usage(
            "--model is required with --endpoints (model_params.name in YAML)".into(),
        )),
    }
}

/// How `https://` endpoints verify their servers: `--insecure` (none), `--ca-bundle FILE`
/// (only its certificates, read and checked here so a bad file stops the run before the
/// fork), else the system's trust store. A setting with no `https://` endpoint to apply to
/// gets a note.
pub fn resolve_tls(
    config: &Config,
    endpoints: &[EndpointUrl],
    notes: &mut Vec<String>,
) -> Result<Verify, AppError> {
    let insecure = config.settings.client.insecure;
    let bundle = config.endpoint_config.ca_bundle.as_deref();
    let verify = match (insecure, bundle) {
        (true, Some(file)) => {
            return Err(AppError::Input(format!(
                "--insecure checks no certificate and --ca-bundle {file} names the ones to \
                 trust; give one of them"
            )))
        }
        (true, None) => Verify::Insecure,
        (false, Some(file)) => Verify::CaBundle(PathBuf::from(file)),
        (false, None) => Verify::SystemRoots,
    };
    let https = endpoints.iter().any(|e| e.url.starts_with("https://"));
    if !https && verify != Verify::SystemRoots {
        notes.push(
            "note: --insecure and --ca-bundle apply to https:// endpoints only; this run has none"
                .to_string(),
        );
    }
    if https && matches!(verify, Verify::CaBundle(_)) {
        loadgen_worker::http::tls::client_config(&verify)
            .map_err(|e| AppError::Setup(format!("{e}")))?;
    }
    Ok(verify)
}
