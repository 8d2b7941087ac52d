//! Endpoints and the model: URLs checked, secrets registered, the model name resolved.

use super::*;

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

/// Registers every secret of the configuration with `redact`, before anything can print one.
pub(super) fn register_secrets(config: &Config) {
    if let Some(key) = &config.endpoint_config.api_key {
        crate::redact::register_secret(key);
    }
    for url in &config.endpoint_config.endpoints {
        if let (_, Some(secret)) = crate::redact::split_userinfo(url.trim()) {
            crate::redact::register_secret(&secret);
        }
    }
}

/// The reference reads only the host and port of an endpoint URL and sends no credentials
/// from it; so does this, and says so (without the password).
pub(super) fn warn_userinfo(config: &Config) {
    for url in &config.endpoint_config.endpoints {
        if crate::redact::split_userinfo(url.trim()).1.is_some() {
            eprintln!(
                "warning: endpoint {}: the user and password in the URL are not sent (the \
                 reference ignores them too); give a key with --api-key",
                crate::redact::redact_url(url.trim())
            );
        }
    }
}

/// Validates an endpoint base URL: `http://host[:port][/prefix]`.
pub fn parse_endpoint(url: &str) -> Result<EndpointUrl, AppError> {
    let url = url.trim();
    if let Some(rest) = url.strip_prefix("null://") {
        if !rest.trim_matches('/').is_empty() {
            return Err(AppError::Input(format!(
                "endpoint {url:?}: the null endpoint takes nothing after {NULL_ENDPOINT}"
            )));
        }
        return Ok(EndpointUrl { url: NULL_ENDPOINT.to_string() });
    }
    if url.starts_with("https://") {
        return Err(AppError::Setup(format!(
            "endpoint {url}: TLS is not supported yet; use an http:// endpoint"
        )));
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return Err(AppError::Input(format!(
            "endpoint {url:?} must start with http:// (e.g. http://localhost:8000)"
        )));
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_only = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let valid_port = match host_only.rsplit_once(':') {
        Some((h, port)) if !h.ends_with(']') || host_only.starts_with('[') => {
            !h.is_empty() && port.parse::<u16>().is_ok()
        }
        _ => !host_only.is_empty(),
    };
    if host_only.is_empty() || !valid_port {
        return Err(AppError::Input(format!(
            "endpoint {:?} has no valid host[:port]",
            crate::redact::redact_url(url)
        )));
    }
    // Credentials in the URL are dropped here, so the worker and every message see only
    // scheme, host, port and path.
    let (stripped, _) = crate::redact::split_userinfo(url);
    Ok(EndpointUrl { url: stripped.trim_end_matches('/').to_string() })
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
