//! What each request asks for: the API type, streaming, sampling keys, extra body, per-row output
//! lengths, and the per-dataset generation override.

use loadgen_coordinator::TokenCountSource;
use loadgen_py::random::PyRandom;
use loadgen_worker::request::{ApiType, RequestOptions, Sampling};

use super::endpoints::{resolve_model, EndpointUrl};
use super::submission::run_kind;
use crate::dataset::DatasetKind;
use crate::error::AppError;
use crate::yaml::{
    ApiTypeName, BenchType, Config, ModelParams, OslDistribution, OslKind, Streaming,
};

/// `datasets[].generation_config_override` of the performance dataset: merged over
/// `model_params` (nested mappings deep-merged, as the reference's `_deep_merge`) and the result
/// re-read through the schema, so a bad value is named as `model_params` would name it.
/// Returns the top-level `model_params` as given, which each accuracy dataset's own override
/// is merged over (`accuracy_request`), as the reference merges every dataset's over it.
pub(super) fn apply_generation_override(config: &mut Config) -> Result<ModelParams, AppError> {
    let top_level = config.model_params.clone();
    // The performance dataset's override is the run's; an accuracy dataset may come first.
    let perf = config.datasets.iter().position(|d| d.kind == DatasetKind::Performance);
    if let Some(i) = perf {
        if let Some(merged) = merged_model_params(config, i)? {
            config.model_params = merged;
        }
    }
    Ok(top_level)
}

/// `model_params` with dataset `i`'s override merged in; `None` where it has none.
pub(super) fn merged_model_params(
    config: &Config,
    i: usize,
) -> Result<Option<ModelParams>, AppError> {
    let Some(over) = config.datasets.get(i).and_then(|d| d.generation_config_override.clone())
    else {
        return Ok(None);
    };
    let what = format!("datasets[{i}].generation_config_override");
    let mut merged = serde_json::to_value(&config.model_params)
        .map_err(|e| AppError::Execution(format!("cannot merge {what}: {e}")))?;
    deep_merge(&mut merged, serde_json::Value::Object(over.into_iter().collect()));
    serde_json::from_value(merged)
        .map(Some)
        .map_err(|e| AppError::Input(format!("{what}: {e}; fix the value")))
}

/// Each dataset's merged `model_params` meets the rules the top-level one does, as the
/// reference checks every generation-config surface alike.
pub(super) fn check_generation_overrides(
    config: &Config,
    api_type: ApiTypeName,
) -> Result<(), AppError> {
    for i in 0..config.datasets.len() {
        if let Some(merged) = merged_model_params(config, i)? {
            let mut c = config.clone();
            c.model_params = merged;
            check_completions_only(&c, api_type)?;
            resolve_sampling(&c, api_type)?;
            draw_output_tokens(&c, 0)?;
        }
    }
    Ok(())
}

pub(super) fn deep_merge(base: &mut serde_json::Value, over: serde_json::Value) {
    match (base, over) {
        (serde_json::Value::Object(b), serde_json::Value::Object(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(slot) if slot.is_object() && v.is_object() => deep_merge(slot, v),
                    _ => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

/// Whether requests stream: `auto` streams an online run, except a video run (the video
/// endpoint does not stream; `on` with it is one of `run_refusals`).
pub(super) fn resolve_streaming(config: &Config) -> bool {
    if config.endpoint_config.api_type == ApiTypeName::Videogen {
        return false;
    }
    match config.model_params.streaming {
        Streaming::On => true,
        Streaming::Off => false,
        Streaming::Auto => run_kind(config) == BenchType::Online,
    }
}

/// Every request's options, as the workers build them: the model (written back into the config
/// so `config.yaml` names it), the protocol, streaming resolved from auto, the sampling keys and
/// the extra body. Keys an API cannot carry are refused here, not dropped.
pub(super) fn resolve_request(
    config: &mut Config,
    endpoints: &[EndpointUrl],
) -> Result<RequestOptions, AppError> {
    let model = resolve_model(config, endpoints)?;
    check_model_name(&model)?;
    config.model_params.name = Some(model.clone());
    let api_name = config.endpoint_config.api_type;
    let streaming = resolve_streaming(config);
    config.model_params.streaming = if streaming { Streaming::On } else { Streaming::Off };
    let base = RequestOptions {
        stream_include_usage: config.settings.client.stream_include_usage,
        ..RequestOptions::basic(protocol_of(api_name)?, &model, streaming, 0)
    };
    with_generation_params(&base, config)
}

/// Longest model name a run sends. Served names are Hugging Face ids (at most 96 characters)
/// or paths (`PATH_MAX` is 4,096 bytes); the limit keeps a mistaken value (a file's contents
/// given as the name) from being written into every request.
pub const MAX_MODEL_NAME_BYTES: usize = 4096;

/// The model name within `MAX_MODEL_NAME_BYTES`; it is not quoted, only measured.
pub(super) fn check_model_name(model: &str) -> Result<(), AppError> {
    if model.len() > MAX_MODEL_NAME_BYTES {
        return Err(AppError::Input(format!(
            "the model name (--model, model_params.name) is {} bytes, past the limit of \
             {MAX_MODEL_NAME_BYTES} (MAX_MODEL_NAME_BYTES); give the name the server serves",
            model.len()
        )));
    }
    Ok(())
}

/// `base` (the run's protocol, model, streaming and usage flag) with the generation keys of
/// `config.model_params`: the run's own, or an accuracy dataset's merged override, so every
/// phase's body is built by one rule. Keys an API cannot carry are refused here, not dropped.
pub(super) fn with_generation_params(
    base: &RequestOptions,
    config: &Config,
) -> Result<RequestOptions, AppError> {
    let api_name = config.endpoint_config.api_type;
    check_completions_only(config, api_name)?;
    let (sampling, extra) = resolve_sampling(config, api_name)?;
    let mp = &config.model_params;
    Ok(RequestOptions {
        max_output_tokens: mp.max_new_tokens,
        // The reference sends min_tokens only when set away from its default of 1.
        min_output_tokens: (mp.min_new_tokens != 1).then_some(mp.min_new_tokens),
        temperature: mp.temperature,
        top_p: mp.top_p,
        top_k: mp.top_k,
        seed: mp.seed,
        sampling,
        extra,
        ..base.clone()
    })
}

/// An accuracy dataset's request options and drawn output lengths: dataset `i`'s override
/// merged over the top-level `model_params` (not over the performance dataset's), as the
/// reference loads each dataset with its own `effective_generation_config`; without an
/// override, the top-level `model_params` as given.
pub(super) fn accuracy_request(
    config: &Config,
    top_level: &ModelParams,
    i: usize,
    base: &RequestOptions,
    rows: usize,
) -> Result<(RequestOptions, Vec<u32>), AppError> {
    let mut c = config.clone();
    c.model_params = top_level.clone();
    if let Some(merged) = merged_model_params(&c, i)? {
        c.model_params = merged;
    }
    let request = with_generation_params(base, &c)?;
    Ok((request, draw_output_tokens(&c, rows)?))
}

/// The protocol the workers speak for the schema's `api_type`.
pub(super) fn protocol_of(name: ApiTypeName) -> Result<ApiType, AppError> {
    Ok(match name {
        ApiTypeName::Openai => ApiType::OpenAiChat,
        ApiTypeName::OpenaiCompletions => ApiType::OpenAiCompletions,
        ApiTypeName::Sglang => ApiType::Sglang,
        ApiTypeName::Videogen => ApiType::Videogen,
    })
}

pub(super) fn check_completions_only(
    config: &Config,
    api_type: ApiTypeName,
) -> Result<(), AppError> {
    let mp = &config.model_params;
    if api_type == ApiTypeName::OpenaiCompletions {
        return Ok(());
    }
    if mp.min_new_tokens != 1 {
        return Err(AppError::Setup(format!(
            "min_new_tokens {} is only supported with --api-type openai_completions, not {}",
            mp.min_new_tokens,
            api_type.as_str()
        )));
    }
    if !mp.skip_special_tokens {
        return Err(AppError::Setup(format!(
            "skip_special_tokens false is only supported with --api-type openai_completions, \
             not {}",
            api_type.as_str()
        )));
    }
    Ok(())
}

/// The reference's other sampling keys plus ignore_eos and the extra body, checked against the
/// API: a key an API cannot carry is refused rather than dropped.
pub(super) fn resolve_sampling(
    config: &Config,
    api_type: ApiTypeName,
) -> Result<(Sampling, Vec<(String, serde_json::Value)>), AppError> {
    let mp = &config.model_params;
    let chat_template_kwargs = match &mp.chat_template_kwargs {
        None => None,
        Some(v) if api_type != ApiTypeName::Openai => {
            return Err(AppError::Input(format!(
                "model_params.chat_template_kwargs {} is only sent with --api-type openai (chat), \
                 not {}: its requests are not rendered by a chat template; remove the key",
                yaml_inline(v),
                api_type.as_str()
            )))
        }
        Some(v @ serde_yaml_ng::Value::Mapping(_)) => {
            Some(yaml_to_json(v, "chat_template_kwargs")?)
        }
        Some(v) => {
            return Err(AppError::Input(format!(
                "model_params.chat_template_kwargs {} is not a mapping; give keys such as \
                 {{enable_thinking: false}}",
                yaml_inline(v)
            )))
        }
    };
    let sampling = Sampling {
        repetition_penalty: mp.repetition_penalty,
        presence_penalty: mp.presence_penalty,
        frequency_penalty: mp.frequency_penalty,
        skip_special_tokens: mp.skip_special_tokens,
        chat_template_kwargs,
        ignore_eos: mp.ignore_eos,
    };
    Ok((sampling, resolve_extra_body(mp.extra_body.as_ref())?))
}

pub(super) fn resolve_extra_body(
    value: Option<&serde_yaml_ng::Value>,
) -> Result<Vec<(String, serde_json::Value)>, AppError> {
    let map = match value {
        None => return Ok(Vec::new()),
        Some(serde_yaml_ng::Value::Mapping(map)) => map,
        Some(v) => {
            return Err(AppError::Input(format!(
                "model_params.extra_body {} is not a mapping; give keys such as {{logprobs: 2}}",
                yaml_inline(v)
            )))
        }
    };
    let mut out = Vec::with_capacity(map.len());
    for (k, v) in map {
        let Some(name) = k.as_str() else {
            return Err(AppError::Input(format!(
                "model_params.extra_body key {} is not a string",
                yaml_inline(k)
            )));
        };
        if RESERVED_BODY_KEYS.contains(&name) {
            return Err(AppError::Input(format!(
                "extra body key {name:?} cannot be replaced: it carries the prompt or decides how \
                 the response is read; set it through its own flag or key"
            )));
        }
        out.push((name.to_string(), yaml_to_json(v, name)?));
    }
    let bytes: usize = out.iter().map(|(k, v)| k.len() + v.to_string().len() + 4).sum();
    if bytes > MAX_EXTRA_BODY_BYTES {
        return Err(AppError::Input(format!(
            "model_params.extra_body (--extra-body) is {bytes} bytes of json, past the limit of \
             {MAX_EXTRA_BODY_BYTES} (MAX_EXTRA_BODY_BYTES); send fewer or shorter keys"
        )));
    }
    Ok(out)
}

/// Longest extra body (`--extra-body`, as the json keys and values it adds to each body).
/// Every row's body carries it, so it is bounded as a prompt is, not as a header.
pub const MAX_EXTRA_BODY_BYTES: usize = 64 * 1024;

/// `check_rows_n` for an `n` given in the extra body (it replaces every row's).
pub(super) fn check_extra_body_n(
    extra: &[(String, serde_json::Value)],
    source: TokenCountSource,
) -> Result<(), AppError> {
    let n = extra.iter().find(|(k, _)| k == "n").map(|(_, v)| v);
    match n {
        Some(v) if source == TokenCountSource::Server && v.as_u64() != Some(1) => {
            Err(AppError::Setup(format!(
                "extra body n = {v} asks for several completions; server usage counts all of \
                 them together, so it cannot be measured under --token-count-source server"
            )))
        }
        _ => Ok(()),
    }
}

pub(super) fn yaml_to_json(
    v: &serde_yaml_ng::Value,
    what: &str,
) -> Result<serde_json::Value, AppError> {
    serde_json::to_value(v).map_err(|e| {
        AppError::Input(format!("{what} value {} cannot be sent as json: {e}", yaml_inline(v)))
    })
}

pub(super) fn yaml_inline(v: &serde_yaml_ng::Value) -> String {
    serde_json::to_string(v).unwrap_or_else(|_| format!("{v:?}"))
}

/// Each row's output length under `osl_distribution`, drawn in row order from
/// `Random(dataloader_random_seed)` (the reference parses the key but never applies it; the
/// draw is ours). `original` (or no key) keeps `max_new_tokens` for every row.
pub(super) fn draw_output_tokens(config: &Config, rows: usize) -> Result<Vec<u32>, AppError> {
    let Some(osl) = &config.model_params.osl_distribution else { return Ok(Vec::new()) };
    if osl.kind == OslKind::Original {
        return Ok(Vec::new());
    }
    let (min, max) = check_osl_bounds(osl, config.model_params.min_new_tokens)?;
    let need = |v: Option<i64>, field: &str| {
        v.ok_or_else(|| {
            AppError::Input(format!(
                "model_params.osl_distribution.{field} is required for type {}; set it",
                osl.kind.as_str()
            ))
        })
    };
    let mut rng = PyRandom::new(config.settings.runtime.dataloader_random_seed);
    let draws: Vec<u32> = match osl.kind {
        OslKind::Original => Vec::new(),
        OslKind::Fixed => {
            let mean = need(osl.mean, "mean")?;
            if mean < min || mean > max {
                return Err(AppError::Input(format!(
                    "model_params.osl_distribution.mean {mean} is outside [min {min}, max {max}]"
                )));
            }
            vec![mean as u32; rows]
        }
        OslKind::Uniform => {
            // Python's randint(min, max) = min + randbelow(max - min + 1).
            let span = (max - min + 1) as u32;
            (0..rows).map(|_| (min + i64::from(rng.randbelow(span))) as u32).collect()
        }
        OslKind::Normal => {
            let (mean, std) = (need(osl.mean, "mean")? as f64, need(osl.std, "std")? as f64);
            (0..rows)
                .map(|_| {
                    (normal_variate(&mut rng, mean, std).round_ties_even() as i64).clamp(min, max)
                        as u32
                })
                .collect()
        }
    };
    Ok(draws)
}

/// `[min, max]` of an osl distribution, checked: 1 <= min <= max < 2^32, min_new_tokens <= min.
pub(super) fn check_osl_bounds(
    osl: &OslDistribution,
    min_new_tokens: u32,
) -> Result<(i64, i64), AppError> {
    let (min, max) = (osl.min, osl.max);
    if min < 1 || max < min || max > i64::from(u32::MAX) {
        return Err(AppError::Input(format!(
            "model_params.osl_distribution min {min} and max {max} must satisfy 1 <= min <= max; \
             fix --min-output-tokens / --model-params.osl-distribution.max"
        )));
    }
    if i64::from(min_new_tokens) > min {
        return Err(AppError::Input(format!(
            "min_new_tokens {min_new_tokens} exceeds osl_distribution.min {min}: a row could ask \
             for fewer tokens than its minimum; lower min_new_tokens or raise the min"
        )));
    }
    Ok((min, max))
}

/// Python's `random.normalvariate` (Kinderman and Monahan), on the same generator.
pub(super) fn normal_variate(rng: &mut PyRandom, mu: f64, sigma: f64) -> f64 {
    let magic = 4.0 * (-0.5f64).exp() / 2.0f64.sqrt();
    loop {
        let u1 = rng.random();
        let u2 = 1.0 - rng.random();
        let z = magic * (u1 - 0.5) / u2;
        if z * z / 4.0 <= -u2.ln() {
            return mu + z * sigma;
        }
    }
}

/// Top-level body keys `--extra-body` may not replace: they carry the prompt or decide how the
/// response is read.
pub(super) const RESERVED_BODY_KEYS: [&str; 8] = [
    "model",
    "messages",
    "prompt",
    "input_ids",
    "text",
    "stream",
    "stream_options",
    "sampling_params",
];
