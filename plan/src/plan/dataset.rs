//! The performance dataset of a plan: which one, loaded and checked against the token basis.

use loadgen_coordinator::TokenCountSource;
use loadgen_worker::request::ApiType;

use crate::dataset::{load_dataset_spec_with, synthetic_dataset, Dataset, DatasetKind};
use crate::error::AppError;
use crate::yaml::{Config, TestMode};

pub(super) fn check_dataset_kinds(config: &Config) -> Result<(), AppError> {
    let perf: Vec<&crate::dataset::DatasetSpec> =
        config.datasets.iter().filter(|d| d.kind == DatasetKind::Performance).collect();
    if perf.len() > 1 {
        let paths: Vec<&str> = perf.iter().map(|d| d.path.as_str()).collect();
        return Err(AppError::Input(format!(
            "only one performance dataset is supported, got {}: {}",
            paths.len(),
            paths.join(", ")
        )));
    }
    Ok(())
}

/// Loads the performance dataset; `-v` says how long loading took (docs/PERF.md, Datasets), in
/// `notes` with what loading has to say.
pub(super) fn resolve_dataset(
    config: &mut Config,
    verbose: u8,
    notes: &mut Vec<String>,
) -> Result<(Dataset, bool), AppError> {
    check_dataset_kinds(config)?;
    let verbose = verbose.max(u8::from(config.verbose));
    // The `random` predefined dataset decodes with the run's tokenizer unless it names one.
    let params = &config.model_params;
    let run_tokenizer = params.tokenizer_name.clone().or_else(|| params.name.clone());
    if config.test_mode == Some(TestMode::Acc) {
        // An accuracy-only run has no performance phase: its dataset is not loaded.
        return Ok((Dataset { name: String::new(), rows: Vec::new() }, false));
    }
    let has_accuracy = config.datasets.iter().any(|d| d.kind == DatasetKind::Accuracy);
    let Some(spec) = config.datasets.iter_mut().find(|d| d.kind == DatasetKind::Performance) else {
        if has_accuracy {
            return Err(AppError::Input(
                "at least one performance dataset is required (the reference's rule); add one,                  or run the accuracy datasets alone with --accuracy-only"
                    .into(),
            ));
        }
        return Ok((synthetic_dataset(), true));
    };
    let started = std::time::Instant::now();
    let dataset = match config.endpoint_config.api_type {
        // A video request's fields come from the row's columns, checked as they load.
        crate::yaml::ApiTypeName::Videogen => crate::dataset::load_videogen_dataset(spec)?,
        _ => load_dataset_spec_with(spec, run_tokenizer.as_deref(), notes)?,
    };
    if verbose > 0 {
        let load_s = started.elapsed().as_secs_f64();
        notes.push(format!("dataset: {} rows loaded in {load_s:.3} s", dataset.rows.len()));
    }
    spec.name.get_or_insert_with(|| dataset.name.clone());
    Ok((dataset, false))
}

/// A row's `n` is sent as `n`, so the server answers n choices and its usage sums them: a
/// sample's server OSL would be n outputs' worth, not one.
pub(super) fn check_rows_n(dataset: &Dataset, source: TokenCountSource) -> Result<(), AppError> {
    if source != TokenCountSource::Server {
        return Ok(());
    }
    match dataset.rows.iter().position(|r| r.n.is_some_and(|n| n > 1)) {
        Some(i) => Err(AppError::Setup(format!(
            "dataset row {i} asks for n = {} completions; server usage counts all of them \
             together, so rows with n > 1 cannot be measured under --token-count-source \
             server",
            dataset.rows[i].n.unwrap_or_default()
        ))),
        None => Ok(()),
    }
}

/// The note for dataset columns a request would carry on another API but not this one (the
/// reference's adapters drop them the same way): `None` when every such column is sent.
pub(super) fn unsent_columns_note(dataset: &Dataset, api: ApiType) -> Option<String> {
    let sent = loadgen_worker::request::row_request_keys(api);
    let unsent: Vec<&str> = crate::dataset::ROW_REQUEST_COLUMNS
        .into_iter()
        .filter(|c| !sent.contains(c))
        .filter(|c| dataset.rows.iter().any(|r| r.request_column(c).is_some()))
        .collect();
    if unsent.is_empty() {
        return None;
    }
    let name = match api {
        ApiType::OpenAiChat => "openai",
        ApiType::OpenAiCompletions => "openai_completions",
        ApiType::Sglang => "sglang",
        ApiType::Videogen => "videogen",
    };
    Some(format!(
        "note: dataset column(s) {} are not sent with --api-type {name}, as the reference \
         sends them only where the API carries them (chat: {}; completions: stop)",
        unsent.join(", "),
        crate::dataset::ROW_REQUEST_COLUMNS.join(", ")
    ))
}
