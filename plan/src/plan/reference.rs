//! The reference's own rules on a configuration (`validate-yaml`'s verdict), and its settings
//! that tune only its own machinery.

use super::*;

/// The checks that need no file, as the reference's schema and cross-field rules make them:
/// load pattern against type, endpoints, model, API-type rules, token basis, durations,
/// workers and datasets (`validate-yaml` runs only these). What the reference accepts but a
/// run here would refuse is `run_refusals`, not an error here. What the checks have to say
/// (videogen's client basis) goes into `notes`.
pub fn check_config(config: &Config, notes: &mut Vec<String>) -> Result<(), AppError> {
    let pattern = check_pattern_as_reference(config)?.unwrap_or(LoadPattern::Offline);
    if let Some(rules) = submission_ruleset(config, notes)? {
        let name = config.submission_ref.as_ref().map_or("", |r| r.ruleset.as_str());
        notes.extend(submission::round_notes(config, rules, name));
    }
    check_datasets_as_reference(config)?;
    let endpoints = parse_endpoints(config)?;
    resolve_model(config, &endpoints)?;
    let api_type = config.endpoint_config.api_type;
    check_completions_only(config, api_type)?;
    resolve_sampling(config, api_type)?;
    draw_output_tokens(config, 0)?; // zero rows: the settings are checked, nothing is drawn
    check_generation_overrides(config, api_type)?;
    resolve_token_source(config, api_type, resolve_streaming(config), notes)?;
    check_durations(&config.settings.runtime)?;
    resolve_request_timeout(config.timeout)?;
    check_sample_counts(config)?;
    check_worker_settings(config, pattern)?;
    resolve_warmup_connections(config.settings.client.warmup_connections)?;
    check_token_pool(config)?;
    check_reference_bounds(config)?;
    check_profiling(config)?;
    check_audit(config)?;
    super::slo::resolve_slo(config.settings.slo.as_deref(), resolve_streaming(config))?;
    Ok(())
}

/// The reference's rules on `type`, `benchmark_mode` and the load pattern: a submission runs
/// as its `benchmark_mode`; an eval has no load-pattern rule; `agentic_inference` needs a
/// performance dataset with an `agentic_inference` block and the other way round. Returns the
/// pattern a run would use where one exists here.
pub(super) fn check_pattern_as_reference(config: &Config) -> Result<Option<LoadPattern>, AppError> {
    submission::check_benchmark_mode(config)?;
    let mode = run_kind(config);
    let lp = &config.settings.load_pattern;
    let agentic = |perf: bool| {
        config
            .datasets
            .iter()
            .any(|d| d.agentic_inference.is_some() && (d.kind == DatasetKind::Performance) == perf)
    };
    if agentic(false) {
        return Err(AppError::Input(
            "datasets[].agentic_inference is only valid on performance datasets".into(),
        ));
    }
    let agentic_pattern = lp.kind == LoadPatternKind::AgenticInference;
    if agentic_pattern != agentic(true) && mode != BenchType::Offline {
        return Err(AppError::Input(if agentic_pattern {
            "settings.load_pattern.type agentic_inference needs a performance dataset with an \
             agentic_inference block"
                .into()
        } else {
            format!(
                "a performance dataset with agentic_inference needs \
                 settings.load_pattern.type agentic_inference, got {}",
                lp.kind.as_str()
            )
        }));
    }
    if agentic_pattern && config.settings.runtime.n_samples_to_issue.is_some() {
        return Err(AppError::Input(
            "settings.runtime.n_samples_to_issue does not apply to agentic_inference; use \
             datasets[].agentic_inference.num_trajectories_to_issue"
                .into(),
        ));
    }
    if mode == BenchType::Eval {
        return Ok(None);
    }
    resolve_load_pattern(config).map(Some)
}

/// The reference's rules on `datasets:`: no two with one (name, type); a dataset without a
/// `path` names a predefined dataset; per-dataset overrides name `model_params` keys and none
/// of its per-run ones.
pub(super) fn check_datasets_as_reference(config: &Config) -> Result<(), AppError> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, d) in config.datasets.iter().enumerate() {
        let name = d.display_name();
        if name.is_empty() {
            return Err(AppError::Input(format!(
                "datasets[{i}] has neither name nor path; give one"
            )));
        }
        if !seen.insert((name.clone(), d.kind == DatasetKind::Accuracy)) {
            return Err(AppError::Input(format!(
                "datasets[{i}]: two datasets are named {name:?} ({:?}); give each its own name",
                d.kind
            )));
        }
        check_accuracy_config(i, d)?;
        if let Some(a) = &d.agentic_inference {
            let turn_s = a.turn_timeout_s;
            if !(turn_s > 0.0 && turn_s.is_finite()) || a.num_trajectories_to_issue == Some(0) {
                return Err(AppError::Input(format!(
                    "datasets[{i}].agentic_inference: turn_timeout_s {turn_s} and \
                     num_trajectories_to_issue must be above 0"
                )));
            }
        }
        for key in d.generation_config_override.iter().flat_map(|o| o.keys()) {
            let per_run = ["name", "streaming", "tokenizer_name"].contains(&key.as_str());
            if per_run || !MODEL_PARAMS_KEYS.contains(&key.as_str()) {
                let why = if per_run {
                    "is per run: set it in model_params"
                } else {
                    "is not a model_params key"
                };
                return Err(AppError::Input(format!(
                    "datasets[{i}].generation_config_override.{key} {why}"
                )));
            }
        }
    }
    Ok(())
}

/// `datasets[].accuracy_config` as the reference's `AccuracyConfig`: its five keys only, a
/// registered scorer, `num_repeats` 1 or more.
pub(super) fn check_accuracy_config(
    i: usize,
    d: &crate::dataset::DatasetSpec,
) -> Result<(), AppError> {
    const KEYS: [&str; 5] = ["eval_method", "ground_truth", "extractor", "num_repeats", "extras"];
    const SCORERS: [&str; 10] = [
        "pass_at_1",
        "string_match",
        "rouge",
        "code_bench_scorer",
        "shopify_category_f1",
        "agentic_inference_inline",
        "vbench",
        "bfcl_v4",
        "legacy_mlperf_deepseek_r1",
        "swe_bench_scorer",
    ];
    let Some(acc) = &d.accuracy_config else { return Ok(()) };
    let bad = |key: &str, value: &serde_json::Value, want: &str| {
        Err(AppError::Input(format!(
            "datasets[{i}].accuracy_config.{key} {value} is not valid; give {want}"
        )))
    };
    for (key, value) in acc {
        match key.as_str() {
            _ if !KEYS.contains(&key.as_str()) => {
                return bad(key, value, &format!("one of the keys {}", KEYS.join(", ")))
            }
            "eval_method"
                if !value.is_null() && !value.as_str().is_some_and(|m| SCORERS.contains(&m)) =>
            {
                return bad(key, value, &format!("one of {}", SCORERS.join(", ")));
            }
            "num_repeats" => {
                let n = value.as_u64().or_else(|| value.as_str().and_then(|t| t.parse().ok()));
                if n.is_none_or(|n| n < 1) {
                    return bad(key, value, "a whole number, 1 or more");
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The keys of `model_params:` (the reference's `ModelParams`, plus this tool's own two).
pub(super) const MODEL_PARAMS_KEYS: [&str; 17] = [
    "name",
    "temperature",
    "seed",
    "top_k",
    "top_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
    "chat_template_kwargs",
    "max_new_tokens",
    "min_new_tokens",
    "skip_special_tokens",
    "osl_distribution",
    "streaming",
    "tokenizer_name",
    "ignore_eos",
    "extra_body",
];

/// The reference's settings that have no counterpart to drive here. Those that only tune the
/// reference's own machinery (its ZMQ transport, Python workers, service start-up) change no
/// result: each value other than the reference's default gives one note (after the
/// reference's bounds, which are errors on any file). Flags and YAML keys land on
/// the same `Config` fields (`cli::SpellingFlags`), so both are judged here alike.
pub fn check_reference_only(config: &Config) -> Result<Vec<String>, AppError> {
    check_reference_bounds(config)?;
    check_profiling(config)?;
    let s = &config.settings;
    let (c, d) = (&s.client, crate::yaml::Client::default());
    let stop = "workers stop when the coordinator closes their rings";
    #[rustfmt::skip]
    let table: [(bool, &str, &str, &str); 12] = [
        (c.transport.kind != d.transport.kind, "client.transport.type",
         "--client.transport.type", "workers hand samples over shared-memory rings, not ZMQ"),
        (c.log_level != d.log_level, "client.log_level", "--client.log-level",
         "workers do not log per request; use -v"),
        (c.worker_gc_mode != d.worker_gc_mode, "client.worker_gc_mode",
         "--client.worker-gc-mode", "workers have no garbage collector"),
        (c.worker_graceful_shutdown_wait != d.worker_graceful_shutdown_wait,
         "client.worker_graceful_shutdown_wait", "--client.worker-graceful-shutdown-wait", stop),
        (c.worker_force_kill_timeout != d.worker_force_kill_timeout,
         "client.worker_force_kill_timeout", "--client.worker-force-kill-timeout", stop),
        (s.service_ready_timeout_s != 30.0, "service_ready_timeout_s", "--service-ready-timeout",
         "there are no separate metrics or event-logger services"),
        (c.stream_all_chunks != d.stream_all_chunks, "client.stream_all_chunks",
         "--client.stream-all-chunks", "workers time every chunk themselves"),
        (c.auto_warmup_budget_fraction != d.auto_warmup_budget_fraction,
         "client.auto_warmup_budget_fraction", "--client.auto-warmup-budget-fraction",
         "auto warm-up connections are sized per worker (--client.warmup-connections)"),
        (c.max_concurrent_warmup_connects != d.max_concurrent_warmup_connects,
         "client.max_concurrent_warmup_connects", "--max-concurrent-warmup-connects",
         "each worker opens its connections in turn"),
        (c.max_idle_time != d.max_idle_time, "client.max_idle_time", "--client.max-idle-time",
         "a connection the endpoint closed is reopened on its next request"),
        (c.min_required_connections != d.min_required_connections,
         "client.min_required_connections", "--client.min-required-connections",
         "connections that cannot be opened fail their samples with kind connect"),
        (s.drain.accuracy_timeout_s.is_some()
            && !config.datasets.iter().any(|d| d.kind == DatasetKind::Accuracy),
         "drain.accuracy_timeout_s", "--accuracy-drain-timeout",
         "no accuracy dataset is given, so no accuracy phase runs"),
    ];
    Ok(table
        .iter()
        .filter(|(changed, ..)| *changed)
        .map(|(_, key, flag, why)| {
            format!("note: settings.{key} ({flag}) has no effect here: {why}")
        })
        .collect())
}

/// The reference's bounds on its machinery settings: a value it refuses is refused here
/// too, rather than noted as having no effect.
pub(super) fn check_reference_bounds(config: &Config) -> Result<(), AppError> {
    let (s, c) = (&config.settings, &config.settings.client);
    let bad = |key: &str, flag: &str, value: String, want: &str| {
        Err(AppError::Input(format!("settings.{key} ({flag}) {value} is not valid; give {want}")))
    };
    let fraction = c.auto_warmup_budget_fraction;
    if !(fraction > 0.0 && fraction <= 1.0) {
        return bad(
            "client.auto_warmup_budget_fraction",
            "--client.auto-warmup-budget-fraction",
            fraction.to_string(),
            "a fraction above 0, at most 1",
        );
    }
    if c.max_concurrent_warmup_connects < 1 {
        return bad(
            "client.max_concurrent_warmup_connects",
            "--max-concurrent-warmup-connects",
            c.max_concurrent_warmup_connects.to_string(),
            "1 or more",
        );
    }
    if !["disabled", "relaxed", "system"].contains(&c.worker_gc_mode.as_str()) {
        return bad(
            "client.worker_gc_mode",
            "--client.worker-gc-mode",
            format!("{:?}", c.worker_gc_mode),
            "disabled, relaxed or system",
        );
    }
    if !(s.service_ready_timeout_s >= 0.0 && s.service_ready_timeout_s.is_finite()) {
        return bad(
            "service_ready_timeout_s",
            "--service-ready-timeout",
            s.service_ready_timeout_s.to_string(),
            "0 or more seconds",
        );
    }
    let perf_s = s.drain.performance_timeout_s;
    if let Some(perf_s) = perf_s.filter(|v| !(*v > 0.0 && v.is_finite())) {
        let flag = "--performance-drain-timeout";
        return bad("drain.performance_timeout_s", flag, perf_s.to_string(), "seconds above 0");
    }
    if let Some(warmup_s) = s.drain.warmup_timeout_s.filter(|v| !(*v > 0.0 && v.is_finite())) {
        let flag = "--warmup-drain-timeout";
        return bad("drain.warmup_timeout_s", flag, warmup_s.to_string(), "seconds above 0");
    }
    if let Some(accuracy_s) = s.drain.accuracy_timeout_s.filter(|v| v.is_nan() || *v <= 0.0) {
        let flag = "--accuracy-drain-timeout";
        return bad("drain.accuracy_timeout_s", flag, accuracy_s.to_string(), "seconds above 0");
    }
    Ok(())
}
