//! The accuracy side of a plan (the reference's `TestMode`, `accuracy_config`, `acc:` and
//! `type: accuracy` datasets): which datasets are scored, how, and what an accuracy-only run
//! changes in the configuration before the rest of the plan reads it.

use std::collections::BTreeMap;

use loadgen_accuracy::{self as accuracy, Extractor, Scorer};
use serde_json::Value;

use super::*;
use crate::dataset::DatasetSpec;
pub use crate::yaml::TestMode;

/// How one dataset is scored (its `accuracy_config`, resolved).
#[derive(Debug, Clone, PartialEq)]
pub struct Scoring {
    pub scorer: Scorer,
    pub extractor: Option<Extractor>,
    /// `accuracy_config.ground_truth` as given (`null` in the results when unset).
    pub ground_truth_column: Option<String>,
    /// The ground truth of each dataset row, as text.
    pub ground_truth: Vec<String>,
    /// `agentic_inference_inline`'s ground truth: the dataset's recorded assistant turns.
    pub expected_turns: Vec<loadgen_accuracy::agentic_inline::ExpectedTurn>,
    /// Each row's values of the scorer's `extra_columns` (`bfcl_v4`: subset and
    /// func_description), as text; empty when the scorer reads none.
    pub row_columns: Vec<Vec<String>>,
    pub num_repeats: u32,
}

impl Scoring {
    /// The column read: the given one, else the scorer's default.
    pub fn column(&self) -> &str {
        self.ground_truth_column.as_deref().unwrap_or(self.scorer.default_ground_truth_column())
    }
}

/// An accuracy dataset: its phase name, its rows, what its requests ask for and how it is
/// scored.
#[derive(Debug, Clone, PartialEq)]
pub struct AccuracyDataset {
    pub name: String,
    pub dataset: Dataset,
    /// Its requests' options: the run's protocol, model and streaming, with the generation
    /// keys of its own `generation_config_override` merged over the top-level `model_params`.
    pub request: RequestOptions,
    /// Each row's drawn output length under its merged `osl_distribution`; empty = every row
    /// asks for `request.max_output_tokens`.
    pub row_output_tokens: Vec<u32>,
    pub scoring: Scoring,
}

/// The accuracy part of a plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AccuracyPlan {
    pub mode: TestMode,
    /// The accuracy datasets, in the configuration's order (one phase each).
    pub datasets: Vec<AccuracyDataset>,
    /// The performance dataset's own `accuracy_config`: its outputs scored as `performance`.
    pub performance: Option<Scoring>,
    /// `settings.drain.accuracy_timeout_s` in ms; `None` waits without limit.
    pub drain_timeout_ms: Option<u64>,
}

/// What an accuracy-only run changes before the plan is resolved, as the reference bakes it
/// into the config (so config.yaml shows it): one worker, one connection, a concurrency of 1.
pub(super) fn apply_accuracy_only(config: &mut Config) {
    if config.test_mode != Some(TestMode::Acc) {
        return;
    }
    let s = &mut config.settings;
    s.client.num_workers = 1;
    s.client.max_connections = 1;
    if s.load_pattern.target_concurrency.is_some_and(|c| c != 1) {
        s.load_pattern.target_concurrency = Some(1);
    }
}

/// The mode's checks on the datasets (the reference's `_load_datasets`).
pub(super) fn check_mode_datasets(config: &Config) -> Result<(), AppError> {
    let mode = config.test_mode.unwrap_or_default();
    let has_acc = config.datasets.iter().any(|d| d.kind == DatasetKind::Accuracy);
    if mode == TestMode::Acc && !has_acc {
        return Err(AppError::Input(
            "--accuracy-only (--mode acc) requires at least one accuracy dataset; add one with \
             --dataset acc:PATH,accuracy_config.eval_method=… or type: accuracy in the YAML"
                .into(),
        ));
    }
    Ok(())
}

/// The accuracy datasets, in the configuration's order (a `--mode perf` run skips those scored
/// outside the endpoint run, with a note).
fn accuracy_datasets(
    config: &Config,
    mode: TestMode,
    top_level: &ModelParams,
    base: &RequestOptions,
    notes: &mut Vec<String>,
) -> Result<Vec<AccuracyDataset>, AppError> {
    let mut datasets = Vec::new();
    for (i, spec) in config.datasets.iter().enumerate() {
        if spec.kind != DatasetKind::Accuracy {
            continue;
        }
        let name = spec.display_name();
        if skipped_in_perf_mode(mode, spec) {
            notes.push(format!(
                "dataset {name} is skipped: its scorer swe_bench_scorer evaluates outside the \
                 endpoint run, which the reference (and this tool) skips in --mode perf; --mode \
                 acc or both would refuse it here (it needs the SWE-bench service)"
            ));
            continue;
        }
        let mut scoring = resolve_scoring(spec, &name)?;
        if scoring.scorer == Scorer::AgenticInferenceInline {
            return Err(AppError::Input(format!(
                "dataset {name}: agentic_inference_inline scores a performance dataset's own \
                 agentic turns; give it on the agentic performance dataset, not an accuracy one"
            )));
        }
        let (dataset, values) =
            crate::dataset::load_dataset_and_column(spec, scoring.column(), notes)?;
        scoring.ground_truth =
            ground_truth_text(values, &name, scoring.column(), dataset.rows.len())?;
        scoring.row_columns = extra_columns(spec, &name, scoring.scorer, dataset.rows.len())?;
        // Its merged params were checked as model_params is (check_generation_overrides).
        let (request, row_output_tokens) =
            accuracy_request(config, top_level, i, base, dataset.rows.len())?;
        datasets.push(AccuracyDataset { name, dataset, request, row_output_tokens, scoring });
    }
    Ok(datasets)
}

/// Resolves the accuracy datasets (each with its own request options, from `top_level`
/// `model_params` and its override, on the run's `base` options) and the performance
/// dataset's own scoring; what loading the datasets has to say goes into `notes`.
pub(super) fn resolve_accuracy(
    config: &Config,
    perf: Option<&Dataset>,
    top_level: &ModelParams,
    base: &RequestOptions,
    notes: &mut Vec<String>,
) -> Result<AccuracyPlan, AppError> {
    let mode = config.test_mode.unwrap_or_default();
    let datasets = accuracy_datasets(config, mode, top_level, base, notes)?;
    let perf_spec = config.datasets.iter().find(|d| d.kind == DatasetKind::Performance);
    let performance = match (perf_spec, perf) {
        (Some(spec), Some(rows)) if mode != TestMode::Acc && spec.accuracy_config.is_some() => {
            let name = spec.display_name();
            let mut scoring = resolve_scoring(spec, &name)?;
            if scoring.scorer == Scorer::AgenticInferenceInline {
                scoring.expected_turns = inline_ground_truth(spec, &name)?;
            } else {
                let values = crate::dataset::read_column(spec, scoring.column())?;
                scoring.ground_truth =
                    ground_truth_text(values, &name, scoring.column(), rows.rows.len())?;
                scoring.row_columns = extra_columns(spec, &name, scoring.scorer, rows.rows.len())?;
            }
            if scoring.num_repeats != 1 {
                return Err(AppError::Input(format!(
                    "dataset {}: a performance dataset's accuracy_config.num_repeats must be 1, \
                     because scoring runs on the performance phase's outputs; got {}",
                    spec.display_name(),
                    scoring.num_repeats
                )));
            }
            Some(scoring)
        }
        _ => None,
    };
    if config.events == Some(false) && (!datasets.is_empty() || performance.is_some()) {
        return Err(AppError::Input(
            "--no-events cannot be used with accuracy datasets: they are scored from \
             events.jsonl; leave --no-events out"
                .into(),
        ));
    }
    let drain_timeout_ms = match config.settings.drain.accuracy_timeout_s {
        Some(s) => Some(seconds_to_ms(s, "accuracy drain")?),
        None => None,
    };
    Ok(AccuracyPlan { mode, datasets, performance, drain_timeout_ms })
}

/// A dataset's `accuracy_config`, checked key by key as the reference's `AccuracyConfig`
/// (`extra="forbid"`) and `_resolve_accuracy_components` check it.
/// The ground truth is read with the dataset (`ground_truth_text`).
fn resolve_scoring(spec: &DatasetSpec, name: &str) -> Result<Scoring, AppError> {
    let empty = BTreeMap::new();
    let cfg = spec.accuracy_config.as_ref().unwrap_or(&empty);
    let bad = |what: String| AppError::Input(format!("dataset {name}: {what}"));
    if let Some(key) = cfg.keys().find(|k| {
        !["eval_method", "ground_truth", "extractor", "num_repeats", "extras"].contains(&k.as_str())
    }) {
        return Err(bad(format!(
            "accuracy_config.{key} is not a key of accuracy_config (eval_method, ground_truth, \
             extractor, num_repeats, extras)"
        )));
    }
    let text = |key: &str| -> Result<Option<String>, AppError> {
        match cfg.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(bad(format!("accuracy_config.{key} {other} is not a string"))),
        }
    };
    let Some(method) = text("eval_method")? else {
        return Err(bad("an accuracy dataset requires accuracy_config with eval_method".into()));
    };
    let scorer = accuracy::scorer(&method).map_err(|e| {
        bad(format!(
            "accuracy_config.{e}; remove this dataset from datasets: (or --dataset) to run the \
             others"
        ))
    })?;
    let extractor = match text("extractor")? {
        Some(_) if scorer == Scorer::AgenticInferenceInline => {
            return Err(bad(format!(
                "scorer {method:?} does not use an extractor (it scores the turns' tool calls \
                 and intents itself); leave accuracy_config.extractor out"
            )))
        }
        None if scorer == Scorer::AgenticInferenceInline => None,
        Some(e) => Some(accuracy::extractor(&e).map_err(|e| bad(format!("accuracy_config: {e}")))?),
        None => {
            return Err(bad(format!(
                "scorer {method:?} requires accuracy_config.extractor (for example \
                 identity_extractor)"
            )))
        }
    };
    let num_repeats = resolve_repeats(cfg.get("num_repeats")).map_err(bad)?;
    match cfg.get("extras") {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) if m.is_empty() => {}
        Some(other) => {
            return Err(bad(format!(
                "accuracy_config.extras {other} is not taken by scorer {method:?} (it has no \
                 options); leave it out"
            )))
        }
    }
    let ground_truth_column = text("ground_truth")?;
    Ok(Scoring {
        scorer,
        extractor,
        ground_truth_column,
        ground_truth: Vec::new(),
        expected_turns: Vec::new(),
        row_columns: Vec::new(),
        num_repeats,
    })
}

/// The recorded assistant turns `agentic_inference_inline` scores against; the dataset must be
/// an agentic one (the reference's scorer requires an `AgenticInferenceDataset`).
fn inline_ground_truth(
    spec: &DatasetSpec,
    name: &str,
) -> Result<Vec<loadgen_accuracy::agentic_inline::ExpectedTurn>, AppError> {
    if spec.agentic_inference.is_none() {
        return Err(AppError::Input(format!(
            "dataset {name}: agentic_inference_inline scores an agentic run's turns; give the \
             dataset an agentic_inference: block (and load_pattern type agentic_inference), or \
             choose another eval_method"
        )));
    }
    crate::dataset::agentic_expected_turns(spec)
}

/// An accuracy dataset a `--mode perf` run skips, as the reference does: its scorer owns an
/// evaluation outside the endpoint run (`SKIP_ENDPOINT_PHASE`: swe_bench_scorer).
pub(super) fn skipped_in_perf_mode(mode: TestMode, spec: &DatasetSpec) -> bool {
    let method = spec.accuracy_config.as_ref().and_then(|a| a.get("eval_method"));
    mode == TestMode::Perf
        && spec.kind == DatasetKind::Accuracy
        && method.and_then(Value::as_str) == Some("swe_bench_scorer")
}

/// The scorer's `extra_columns` of every row, row by row; a row without one is refused.
fn extra_columns(
    spec: &DatasetSpec,
    name: &str,
    scorer: Scorer,
    rows: usize,
) -> Result<Vec<Vec<String>>, AppError> {
    let columns = scorer.extra_columns();
    if columns.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = vec![Vec::with_capacity(columns.len()); rows];
    for column in columns {
        let values = crate::dataset::read_column(spec, column)?;
        let texts = ground_truth_text(values, name, column, rows).map_err(|_| {
            AppError::Input(format!(
                "dataset {name}: scorer {} reads column {column:?} of every row, and a row has \
                 none; use the dataset the scorer is for",
                scorer.name()
            ))
        })?;
        for (row, text) in out.iter_mut().zip(texts) {
            row.push(text);
        }
    }
    Ok(out)
}

/// `num_repeats`: a whole number ≥ 1 (1 when unset); the command line gives it as text.
fn resolve_repeats(value: Option<&Value>) -> Result<u32, String> {
    let n = match value {
        None | Some(Value::Null) => return Ok(1),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse::<u64>().ok(),
        Some(_) => None,
    };
    match n {
        Some(n @ 1..=1_000_000) => Ok(n as u32),
        _ => Err(format!(
            "accuracy_config.num_repeats {} is not a whole number from 1 to 1000000",
            value.map(Value::to_string).unwrap_or_default()
        )),
    }
}

/// The ground-truth column of every row, as text (strings as they are, numbers and other
/// values as JSON): a file without it is refused before the run. A predefined dataset's
/// column is read from the same processed records its rows were made from.
fn ground_truth_text(
    values: Vec<Option<Value>>,
    name: &str,
    column: &str,
    rows: usize,
) -> Result<Vec<String>, AppError> {
    if values.len() < rows || values.iter().take(rows).any(Option::is_none) {
        let missing = values.iter().position(Option::is_none).unwrap_or(values.len());
        return Err(AppError::Input(format!(
            "dataset {name}: row {missing} has no ground-truth column {column:?}; set \
             accuracy_config.ground_truth to the column that holds the answers"
        )));
    }
    Ok(values
        .into_iter()
        .take(rows)
        .map(|v| match v {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => String::new(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::super::resolve_here as resolve_plan;
    use super::*;

    #[test]
    fn each_accuracy_dataset_merges_its_own_override_over_the_top_level_model_params() {
        let path =
            format!("{}/../tests/assets/accuracy_runs/mcq.jsonl", env!("CARGO_MANIFEST_DIR"));
        let acc = |name: &str, over: &str| {
            format!(
                "  - {{name: {name}, type: accuracy, path: {path}, accuracy_config: {{eval_method: \
                 pass_at_1, extractor: abcd_extractor}}{over}}}\n"
            )
        };
        let text = format!(
            "type: offline\nmodel_params: {{name: m, max_new_tokens: 100, temperature: 0.5, \
             osl_distribution: {{type: original}}}}\ndatasets:\n{}{}  - {{name: perf, path: \
             {path}, generation_config_override: {{max_new_tokens: 7, temperature: 0.1}}}}\n{}",
            acc("long", ", generation_config_override: {max_new_tokens: 32768, top_p: 0.9}"),
            acc("plain", ""),
            acc(
                "drawn",
                ", generation_config_override: {osl_distribution: {type: fixed, mean: 12, min: \
                 1, max: 20}}"
            ),
        );
        let plan = resolve_plan(Config::from_yaml_str(&text, "t.yaml").unwrap(), 0).unwrap();
        assert_eq!((plan.request.max_output_tokens, plan.request.temperature), (7, Some(0.1)));
        assert!(plan.row_output_tokens.is_empty());
        let by_name = |n: &str| plan.accuracy.datasets.iter().find(|d| d.name == n).unwrap();
        let long = &by_name("long").request;
        assert_eq!((long.max_output_tokens, long.top_p), (32768, Some(0.9)));
        assert_eq!(long.temperature, Some(0.5), "the top-level value, not the perf override's");
        let plain = by_name("plain");
        assert_eq!(plain.request.max_output_tokens, 100, "no override: the top-level params");
        assert_eq!(plain.request.temperature, Some(0.5));
        assert!(plain.row_output_tokens.is_empty());
        let drawn = by_name("drawn");
        assert_eq!(drawn.row_output_tokens, vec![12; drawn.dataset.rows.len()]);
        assert_eq!((long.model.as_str(), long.api, long.streaming), ("m", plan.request.api, false));
    }

    #[test]
    fn a_bad_value_in_an_accuracy_datasets_override_is_refused_naming_it() {
        let path =
            format!("{}/../tests/assets/accuracy_runs/mcq.jsonl", env!("CARGO_MANIFEST_DIR"));
        let text = format!(
            "type: offline\nmodel_params: {{name: m}}\ndatasets:\n  - {{name: perf, path: \
             {path}}}\n  - {{name: acc, type: accuracy, path: {path}, accuracy_config: \
             {{eval_method: pass_at_1, extractor: abcd_extractor}}, \
             generation_config_override: {{max_new_tokens: lots}}}}\n"
        );
        let err = resolve_plan(Config::from_yaml_str(&text, "t.yaml").unwrap(), 0).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{err}");
        assert!(err.to_string().contains("datasets[1].generation_config_override"), "{err}");
    }

    #[test]
    fn a_predefined_accuracy_dataset_scores_against_its_processed_ground_truth() {
        let dir = std::env::temp_dir().join(format!("llm-loadgen-acc-gpqa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("gpqa_processed.jsonl");
        let row = |q: &str, truth: &str| {
            format!(
                "{{\"question\": \"{q}\", \"choice1\": \"a\", \"choice2\": \"b\", \
                 \"choice3\": \"c\", \"choice4\": \"d\", \"ground_truth\": \"{truth}\"}}\n"
            )
        };
        std::fs::write(&file, row("Q0", "choice2") + &row("Q1", "choice4")).unwrap();
        let path =
            format!("{}/../tests/assets/accuracy_runs/perf.jsonl", env!("CARGO_MANIFEST_DIR"));
        let text = format!(
            "type: offline\nmodel_params: {{name: m}}\ndatasets:\n  - {{name: perf, path: {path}}}\n  \
             - {{name: \"gpqa::gptoss\", type: accuracy, path: {}, parser: {{input: prompt}}, \
             accuracy_config: {{eval_method: pass_at_1, extractor: abcd_extractor}}}}\n",
            file.display()
        );
        let config = Config::from_yaml_str(&text, "t.yaml").unwrap();
        assert!(run_refusals(&config).is_empty(), "{:?}", run_refusals(&config));
        let plan = resolve_plan(config, 0);
        // The same dataset as the performance one, scored on its own outputs.
        let perf = format!(
            "type: offline\nmodel_params: {{name: m}}\ndatasets:\n  - {{name: \"gpqa::gptoss\", \
             path: {}, samples: 1, accuracy_config: {{eval_method: pass_at_1, extractor: \
             abcd_extractor}}}}\n",
            file.display()
        );
        let perf_plan = resolve_plan(Config::from_yaml_str(&perf, "p.yaml").unwrap(), 0);
        let _ = std::fs::remove_dir_all(&dir);
        let d = &plan.unwrap().accuracy.datasets[0];
        assert_eq!(d.name, "gpqa::gptoss");
        assert_eq!(d.scoring.ground_truth, ["choice2", "choice4"]);
        assert!(d.dataset.rows[1].prompt.as_deref().unwrap().starts_with("Q1\n\n(A) a\n"));
        let scoring = perf_plan.unwrap().accuracy.performance.expect("scored as performance");
        assert_eq!(scoring.ground_truth, ["choice2"]);
    }

    #[test]
    fn num_repeats_is_a_whole_number_from_one() {
        assert_eq!(resolve_repeats(None), Ok(1));
        assert_eq!(resolve_repeats(Some(&Value::from(3))), Ok(3));
        assert_eq!(resolve_repeats(Some(&Value::from("8"))), Ok(8));
        for bad in [Value::from(0), Value::from(-1), Value::from(1.5), Value::from("x")] {
            let err = resolve_repeats(Some(&bad)).unwrap_err();
            assert!(err.contains("accuracy_config.num_repeats"), "{err}");
        }
    }

    #[test]
    fn an_accuracy_only_run_uses_one_worker_one_connection_and_concurrency_one() {
        let mut config = Config::defaults(BenchType::Online);
        config.settings.client.num_workers = 4;
        config.settings.client.max_connections = 64;
        config.settings.load_pattern.target_concurrency = Some(32);
        let mut perf = config.clone();
        apply_accuracy_only(&mut perf);
        assert_eq!(perf, config, "perf mode changes nothing");
        config.test_mode = Some(TestMode::Acc);
        apply_accuracy_only(&mut config);
        let s = &config.settings;
        assert_eq!((s.client.num_workers, s.client.max_connections), (1, 1));
        assert_eq!(s.load_pattern.target_concurrency, Some(1));
    }
}
