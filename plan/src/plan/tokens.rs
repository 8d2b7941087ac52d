//! Token counting: the basis, the client tokenizer and its chat template, the tokenizer pool.

use super::*;

/// Live tokenizer threads one may ask for at most.
pub const TOKENIZER_WORKERS_MAX: i64 = 1024;

/// `metrics_tokenizer_workers` and `metrics_drain_timeout_s`, checked.
pub(super) fn check_token_pool(config: &Config) -> Result<TokenPoolSettings, AppError> {
    let drain = &config.settings.drain;
    let workers = match drain.metrics_tokenizer_workers {
        None => None,
        Some(n) if (0..=TOKENIZER_WORKERS_MAX).contains(&n) => Some(n as usize),
        Some(n) => {
            return Err(AppError::Input(format!(
                "--metrics-tokenizer-workers {n} (settings.drain.metrics_tokenizer_workers) is \
                 not valid; give 0 to count after the run, or 1 to {TOKENIZER_WORKERS_MAX} threads"
            )))
        }
    };
    let seconds = drain.metrics_drain_timeout_s;
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(AppError::Input(format!(
            "--metrics-drain-timeout {seconds} (settings.drain.metrics_drain_timeout_s) is not \
             valid; give seconds, or 0 for no limit"
        )));
    }
    let drain_timeout_ms = seconds_to_ms(seconds, "metrics drain")?;
    Ok(TokenPoolSettings { workers, live_threads: 0, drain_timeout_ms })
}

/// The token pool settings of the run; writes the live thread count the CPU plan picks back
/// into the config, so `config.yaml` shows what the run did and reruns the same.
pub(super) fn resolve_token_pool(
    config: &mut Config,
    workers: usize,
    cores: &[usize],
) -> Result<TokenPoolSettings, AppError> {
    use loadgen_coordinator::cpu::{tokenizer_threads, CpuPlan};
    let mut settings = check_token_pool(config)?;
    let embedded = config.endpoint_config.endpoints.is_empty();
    let cpu = CpuPlan::new(cores, workers, config.enable_cpu_affinity, embedded);
    settings.live_threads = tokenizer_threads(settings.workers, &cpu).live;
    config.settings.drain.metrics_tokenizer_workers = Some(settings.live_threads as i64);
    Ok(settings)
}

/// The token basis; videogen's (always client) is said in `notes`.
pub(super) fn resolve_token_source(
    config: &Config,
    api_type: ApiTypeName,
    streaming: bool,
    notes: &mut Vec<String>,
) -> Result<TokenCountSource, AppError> {
    let wanted = config.settings.token_count_source;
    if api_type == ApiTypeName::Videogen {
        let note = "info: api type videogen reports no token usage; token count source is client";
        notes.push(note.to_string());
        notes.push(format!(
            "info: api type videogen sends the prompt and the dataset's video fields only: \
             model_params.name and max_new_tokens ({}) are not in its requests, as in the \
             reference",
            config.model_params.max_new_tokens
        ));
        return Ok(TokenCountSource::Client);
    }
    let opted_out = !config.settings.client.stream_include_usage;
    if wanted == TokenCountSource::Server && opted_out && streaming && api_type.is_openai() {
        return Err(AppError::Setup(format!(
            "--token-count-source server with --no-stream-include-usage on a streaming {} run: \
             the endpoint would send no usage, so every sample would lack server counts and \
             the run would fail at the end; drop --no-stream-include-usage or use \
             --token-count-source client",
            api_type.as_str()
        )));
    }
    Ok(wanted)
}

/// The client tokenizer (`--tokenizer`, else the model name if found locally), with the
/// `--chat-template` file in place of its folder's template; `-v` says where both came from
/// (in `notes`).
pub(super) fn resolve_tokenizer(
    config: &Config,
    model: &str,
    verbose: u8,
    notes: &mut Vec<String>,
) -> Result<Option<Tokenizer>, AppError> {
    let mut tokenizer = load_tokenizer(config, model, notes)?;
    if let (Some(tok), Some(file)) = (tokenizer.as_mut(), &config.chat_template) {
        tok.override_chat_template(std::path::Path::new(file))?;
    }
    if let (Some(tok), true) = (&tokenizer, verbose > 0) {
        let template = match tok.chat_template_source() {
            Some(file) => format!("chat template from {}", file.display()),
            None => "without a chat template".to_string(),
        };
        notes.push(format!("tokenizer: {} ({template})", tok.source().display()));
    }
    Ok(tokenizer)
}

/// The client tokenizer; none found for a remote run's model is a warning in `notes`.
pub(super) fn load_tokenizer(
    config: &Config,
    model: &str,
    notes: &mut Vec<String>,
) -> Result<Option<Tokenizer>, AppError> {
    if let Some(spec) = &config.model_params.tokenizer_name {
        return Tokenizer::load(spec).map(Some);
    }
    if config.endpoint_config.api_type == ApiTypeName::Videogen {
        notes.push(format!(
            "info: api type videogen: no tokenizer is looked up for model {model:?} (the output \
             is a video path), so ISL, OSL and TPOT are not reported; --tokenizer PATH counts \
             the prompt and path text"
        ));
        return Ok(None);
    }
    let embedded = config.endpoint_config.endpoints.is_empty();
    match Tokenizer::load(model) {
        Ok(tok) => Ok(Some(tok)),
        // Without a tokenizer the template would count nothing: refused, never ignored.
        Err(_) if config.chat_template.is_some() => Err(AppError::Setup(format!(
            "--chat-template {} counts the client ISL, but no tokenizer for model {model:?} \
             was found locally; give --tokenizer PATH as well, or drop --chat-template",
            config.chat_template.as_deref().unwrap_or_default()
        ))),
        // The embedded stub's default run says so after naming the stub (src/run.rs).
        Err(_) if embedded => Ok(None),
        Err(_) => {
            notes.push(format!(
                "warning: no tokenizer for model {model:?} found locally; continuing without \
                 tokenizer (ISL/OSL/TPOT metrics will be unavailable); give --tokenizer PATH"
            ));
            Ok(None)
        }
    }
}

/// The note for text prompts sent to a chat endpoint: the server renders each through its
/// chat template, while the client ISL counts the prompt text alone (anchor §6), so the
/// two differ by the template's tokens. Says by how much when the tokenizer has a template
/// (rendered on one empty user message). `None` where nothing is left out: no text rows,
/// not the chat route, no client tokenizer, or a local stub that applies no template.
pub(super) fn chat_template_note(
    api_type: ApiTypeName,
    endpoints: &[EndpointUrl],
    dataset: &Dataset,
    tokenizer: Option<&Tokenizer>,
) -> Option<String> {
    let tok = tokenizer?;
    let remote = endpoints.iter().any(|e| !e.is_null());
    if api_type != ApiTypeName::Openai || !remote {
        return None;
    }
    let text_rows: Vec<&crate::dataset::Row> = dataset
        .rows
        .iter()
        .filter(|r| r.token_ids.is_none() && r.prompt.is_some())
        .filter(|r| r.messages.as_ref().is_none_or(|m| m.as_array().is_some_and(Vec::is_empty)))
        .collect();
    if text_rows.is_empty() {
        return None;
    }
    let head = "note: text prompts go to the chat endpoint (/v1/chat/completions), where the \
                server wraps each in its chat template; the client ISL counts the prompt text \
                alone";
    let size = match (tok.chat_template_source(), tok.chat_template_overhead_tokens()) {
        (Some(file), Some(n)) => format!(
            ", so it leaves out about {n} tokens per request (the chat template of {} \
             rendered around an empty user message)",
            file.display()
        ),
        (Some(file), None) => format!(
            " and leaves that template out (the chat template of {} does not render an \
             empty user message, so by how much is unknown)",
            file.display()
        ),
        (None, _) => " and leaves that template out (the tokenizer has no chat template to \
                      say by how much; --chat-template FILE gives one)"
            .to_string(),
    };
    let system_rows = text_rows.iter().filter(|r| r.system.is_some()).count();
    let system = match system_rows {
        0 => String::new(),
        1 => "; the system prompt of 1 row is left out too".to_string(),
        n => format!("; the system prompts of {n} rows are left out too"),
    };
    Some(format!("{head}{size}{system}"))
}
