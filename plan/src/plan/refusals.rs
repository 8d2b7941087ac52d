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
        out.push(
            "endpoint_config.api_type videogen is not supported yet: video generation \
             requests (use openai, openai_completions or sglang)"
                .into(),
        );
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
        if !crate::dataset::PARSER_TARGETS.contains(&target.as_str()) {
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

/// A run refuses the first of `run_refusals`, naming its key (exit 2), rather than drop it.
pub(super) fn refuse_unsupported(config: &Config) -> Result<(), AppError> {
    match run_refusals(config).into_iter().next() {
        Some(why) => Err(AppError::Input(format!("{why}; leave it out to run here"))),
        None => Ok(()),
    }
}
