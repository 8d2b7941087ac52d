//! What the reference accepts that a run here does not do yet: refused by key, never dropped.

use super::*;

/// What a file the reference accepts asks for that a run here does not do yet, one line per
/// key path; `validate-yaml` lists them, a run refuses the first (`refuse_unsupported`).
pub fn run_refusals(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    if config.kind == BenchType::Eval {
        out.push(format!(
            "type: {} is not supported yet (use offline or online)",
            config.kind.as_str()
        ));
    }
    if config.endpoint_config.api_type == ApiTypeName::Videogen {
        out.extend(videogen_refusals(config));
    }
    let perf: Vec<String> = config
        .datasets
        .iter()
        .filter(|d| d.kind == DatasetKind::Performance)
        .map(|d| d.display_name())
        .collect();
    if perf.len() > 1 {
        out.push(format!(
            "datasets: only one performance dataset is supported, got {}: {}",
            perf.len(),
            perf.join(", ")
        ));
    }
    let mode = config.test_mode.unwrap_or_default();
    for (i, d) in config.datasets.iter().enumerate() {
        if !super::accuracy::skipped_in_perf_mode(mode, d) {
            out.extend(dataset_refusals(i, d));
        }
    }
    out
}

pub(super) fn dataset_refusals(i: usize, d: &crate::dataset::DatasetSpec) -> Vec<String> {
    let name = d.display_name();
    let mut out = Vec::new();
    let mut push = |key: &str, what: &str| {
        out.push(format!("datasets[{i}].{key} (dataset {name}) is not supported yet: {what}"));
    };
    for (key, what) in crate::dataset::predefined_refusals(d) {
        push(&key, &what);
    }
    if d.eval_method.is_some() {
        push(
            "eval_method",
            "the reference reads this key nowhere; a dataset is scored by \
             accuracy_config.eval_method",
        );
    }
    if d.agentic_inference.as_ref().is_some_and(|a| a.stop_issuing_on_first_user_complete) {
        push(
            "agentic_inference.stop_issuing_on_first_user_complete",
            "ending the replay when the first conversation slot runs out of trajectories",
        );
    }
    for target in d.parser.iter().flat_map(|p| p.other.keys()) {
        let video = loadgen_worker::video_request::VIDEO_COLUMNS.contains(&target.as_str());
        if !crate::dataset::PARSER_TARGETS.contains(&target.as_str()) && !video {
            push(&format!("parser.{target}"), "a column this tool does not read");
        }
    }
    let eval_method = d.accuracy_config.as_ref().and_then(|a| a.get("eval_method"));
    let scorer = eval_method.and_then(serde_json::Value::as_str);
    if let Some((name_of, Err(loadgen_accuracy::AccuracyError::Refused { why, .. }))) =
        scorer.map(|s| (s, loadgen_accuracy::scorer(s)))
    {
        out.push(format!(
            "datasets[{i}].accuracy_config.eval_method (dataset {name}): {name_of:?} is not \
             supported yet: {why}; remove this dataset from datasets: (or --dataset) to run the \
             others"
        ));
    }
    out
}

/// The `model_params` keys a text API sends that a video request has no place for.
fn unsent_video_keys(mp: &ModelParams) -> Vec<&'static str> {
    let set = [
        ("temperature", mp.temperature.is_some()),
        ("seed", mp.seed.is_some()),
        ("top_k", mp.top_k.is_some()),
        ("top_p", mp.top_p.is_some()),
        ("repetition_penalty", mp.repetition_penalty.is_some()),
        ("presence_penalty", mp.presence_penalty.is_some()),
        ("frequency_penalty", mp.frequency_penalty.is_some()),
        ("chat_template_kwargs", mp.chat_template_kwargs.is_some()),
        ("min_new_tokens", mp.min_new_tokens != 1),
        ("skip_special_tokens", !mp.skip_special_tokens),
        ("osl_distribution", mp.osl_distribution.is_some()),
        ("ignore_eos", mp.ignore_eos),
        ("extra_body", mp.extra_body.is_some()),
    ];
    set.into_iter().filter(|(_, on)| *on).map(|(key, _)| key).collect()
}

/// What `api_type: videogen` cannot do: stream (the reference's adapter refuses it), send the
/// text APIs' generation keys (its body is the prompt and the row's video fields), read a
/// predefined dataset, or score an accuracy dataset (only vbench scores videos).
pub(super) fn videogen_refusals(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    let mp = &config.model_params;
    if mp.streaming == crate::yaml::Streaming::On {
        out.push(
            "model_params.streaming on is not supported with api_type videogen: the video \
             endpoint does not stream (the reference's adapter refuses it); set it off"
                .into(),
        );
    }
    let fields = loadgen_worker::video_request::VIDEO_COLUMNS.join(", ");
    for key in unsent_video_keys(mp) {
        out.push(format!(
            "model_params.{key} is not supported with api_type videogen: a video request \
             carries the prompt and the fields a dataset row gives ({fields}), not the text \
             APIs' generation keys; give a dataset column instead"
        ));
    }
    for (i, d) in config.datasets.iter().enumerate() {
        let name = d.display_name();
        if d.kind == DatasetKind::Performance && crate::dataset::is_predefined(d) {
            out.push(format!(
                "datasets[{i}] (dataset {name}) is not supported with api_type videogen: a \
                 predefined dataset has no video request fields; give a prompts file (a \
                 prompt column and any of {fields})"
            ));
        }
        let scorer = d.accuracy_config.as_ref().and_then(|a| a.get("eval_method"));
        let vbench = scorer.and_then(serde_json::Value::as_str) == Some("vbench");
        if d.kind == DatasetKind::Accuracy && !vbench {
            out.push(format!(
                "datasets[{i}] (dataset {name}) is not supported with api_type videogen: its \
                 outputs are video paths, which only the vbench scorer reads"
            ));
        }
    }
    out
}

/// A run refuses the first of `run_refusals`, naming its key (exit 2), rather than drop it.
pub(super) fn refuse_unsupported(config: &Config) -> Result<(), AppError> {
    match run_refusals(config).into_iter().next() {
        Some(why) => Err(AppError::Input(format!("{why}; leave it out to run here"))),
        None => Ok(()),
    }
}
