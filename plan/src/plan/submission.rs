//! `type: submission` and `submission_ref`, as the reference resolves them: a submission runs
//! as its `benchmark_mode` with both the performance and the accuracy phase (`--mode both`
//! unless a flag says otherwise), and a `submission_ref` naming a registered ruleset pins the
//! round's seeds over the configuration's.

use super::ruleset::{ruleset, Ruleset, ScenarioRules};
use super::*;

/// The mode a configuration runs as: a submission's `benchmark_mode`, else its `type`.
pub fn run_kind(config: &Config) -> BenchType {
    match (config.kind, config.benchmark_mode) {
        (BenchType::Submission, Some(mode)) => mode,
        (kind, _) => kind,
    }
}

/// The ruleset `submission_ref` names, checked as the reference checks it: a submission must
/// name a registered one (it cannot fall back to default seeds); another type naming an
/// unknown one is run without it, with a note.
pub fn submission_ruleset(
    config: &Config,
    notes: &mut Vec<String>,
) -> Result<Option<&'static Ruleset>, AppError> {
    let Some(r) = &config.submission_ref else { return Ok(None) };
    match ruleset(&r.ruleset) {
        Ok(rules) => Ok(Some(rules)),
        Err(why) if config.kind == BenchType::Submission => Err(AppError::Input(format!(
            "submission_ref.ruleset {:?} is not registered; a submission must pin official RNG \
             seeds and cannot fall back to defaults ({why})",
            r.ruleset
        ))),
        Err(why) => {
            notes.push(format!(
                "warning: submission_ref.ruleset {:?} is not registered; skipping ruleset seed \
                 overrides ({why})",
                r.ruleset
            ));
            Ok(None)
        }
    }
}

/// Applies `type: submission` and `submission_ref` to `config` before it is resolved: the
/// ruleset's seeds replace the scheduler, dataloader and warm-up seeds (a note names each one
/// the configuration had otherwise), a submission runs both phases unless `--mode` says, and
/// what the round asks of the model that this configuration falls short of is noted.
pub fn apply_submission(config: &mut Config, notes: &mut Vec<String>) -> Result<(), AppError> {
    if config.kind == BenchType::Submission {
        check_benchmark_mode(config)?;
        config.test_mode.get_or_insert(TestMode::Both);
    }
    let Some(rules) = submission_ruleset(config, notes)? else { return Ok(()) };
    let name = config.submission_ref.as_ref().map(|r| r.ruleset.clone()).unwrap_or_default();
    let (sched, sample) = (rules.scheduler_rng_seed, rules.sample_index_rng_seed);
    let s = &mut config.settings;
    for (key, slot, pinned) in [
        ("settings.runtime.scheduler_random_seed", &mut s.runtime.scheduler_random_seed, sched),
        ("settings.runtime.dataloader_random_seed", &mut s.runtime.dataloader_random_seed, sample),
        ("settings.warmup.warmup_random_seed", &mut s.warmup.warmup_random_seed, sample),
    ] {
        if *slot != pinned {
            notes.push(format!(
                "note: submission_ref.ruleset {name} pins {key} to {pinned} (the configuration's \
                 {slot} is replaced)"
            ));
            *slot = pinned;
        }
    }
    notes.extend(round_notes(config, rules, &name));
    Ok(())
}

/// The reference's rule on `benchmark_mode`: a submission gives offline or online.
pub(super) fn check_benchmark_mode(config: &Config) -> Result<(), AppError> {
    match config.benchmark_mode {
        None if config.kind == BenchType::Submission => Err(AppError::Input(
            "SUBMISSION configs must specify benchmark_mode (offline or online)".into(),
        )),
        Some(other @ (BenchType::Eval | BenchType::Submission)) => Err(AppError::Input(format!(
            "benchmark_mode {:?} is not valid; give offline or online",
            other.as_str()
        ))),
        _ => Ok(()),
    }
}

/// The scenario a model's rules apply in: the reference's default priority (throughput) where
/// the model has it, else its only one.
pub fn scenario(scenarios: &'static [ScenarioRules]) -> Option<&'static ScenarioRules> {
    let throughput = scenarios.iter().find(|s| s.priority == super::ruleset::Priority::Throughput);
    throughput.or(scenarios.first())
}

/// Notes on what the round asks that this configuration will not give: a model the round does
/// not have (the reference loads such a configuration too), a run shorter than the round's
/// minimum duration, or fewer samples than its minimum count.
pub fn round_notes(config: &Config, rules: &Ruleset, name: &str) -> Vec<String> {
    let model = config.submission_ref.as_ref().map(|r| r.model.as_str()).unwrap_or_default();
    let Some((_, scenarios)) = rules.model(model) else {
        return vec![format!(
            "note: {} (submission_ref.ruleset {name}); its accuracy targets and validity rules \
             do not apply to this run",
            rules.model_error(model)
        )];
    };
    let Some(s) = scenario(scenarios) else { return Vec::new() };
    let mut out = Vec::new();
    let runtime = &config.settings.runtime;
    if runtime.min_duration_ms < s.min_duration_ms {
        out.push(format!(
            "note: ruleset {name} asks {model} runs for {} ms at least (min_duration_ms_valid, \
             {:?}); this run's settings.runtime.min_duration_ms is {}",
            s.min_duration_ms, s.priority, runtime.min_duration_ms
        ));
    }
    if let (Some(min), Some(n)) = (s.min_sample_count, runtime.n_samples_to_issue) {
        if n < min {
            out.push(format!(
                "note: ruleset {name} asks {model} runs for {min} samples at least \
                 (min_sample_count_valid); this run's settings.runtime.n_samples_to_issue is {n}"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::from_yaml_str(text, "t.yaml").unwrap()
    }

    #[test]
    fn a_submission_pins_the_rounds_seeds_and_runs_both_phases() {
        let mut c = config(
            "type: submission\nbenchmark_mode: offline\nsubmission_ref: {model: llama2-70b, \
             ruleset: mlperf-inference-v6.1}\nsettings: {runtime: {min_duration_ms: 60000}}\n",
        );
        let mut notes = Vec::new();
        apply_submission(&mut c, &mut notes).unwrap();
        assert_eq!(c.settings.runtime.scheduler_random_seed, 16_159_082_839_903_944_936);
        assert_eq!(c.settings.runtime.dataloader_random_seed, 2_747_215_439_041_700_203);
        assert_eq!(c.settings.warmup.warmup_random_seed, 2_747_215_439_041_700_203);
        assert_eq!(c.test_mode, Some(TestMode::Both));
        assert_eq!(run_kind(&c), BenchType::Offline);
        let text = notes.join("\n");
        assert!(text.contains("pins settings.runtime.scheduler_random_seed"), "{text}");
        assert!(text.contains("600000 ms at least"), "{text}");
    }

    #[test]
    fn a_broken_rule_is_refused_in_the_references_words() {
        let mut no_mode = config("type: submission\n");
        let err = apply_submission(&mut no_mode, &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("SUBMISSION configs must specify benchmark_mode"));
        let mut unknown = config(
            "type: submission\nbenchmark_mode: online\nsubmission_ref: {model: m, ruleset: x}\n",
        );
        let err = apply_submission(&mut unknown, &mut Vec::new()).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("cannot fall back to defaults"), "{err}");
        // Another type runs without an unknown ruleset, as the reference's warning says.
        let mut online = config("type: online\nsubmission_ref: {model: m, ruleset: x}\n");
        let mut notes = Vec::new();
        apply_submission(&mut online, &mut notes).unwrap();
        assert_eq!(online.settings.runtime.scheduler_random_seed, 42);
        assert!(notes[0].contains("skipping ruleset seed overrides"), "{notes:?}");
    }

    #[test]
    fn a_model_outside_the_round_is_noted_not_refused() {
        let mut c = config(
            "type: submission\nbenchmark_mode: online\nsubmission_ref: {model: llama-2-70b, \
             ruleset: mlperf-edge-current}\n",
        );
        let mut notes = Vec::new();
        apply_submission(&mut c, &mut notes).unwrap();
        assert!(notes
            .iter()
            .any(|n| n.contains("Model llama-2-70b not found in rules for round edge-v0.1")));
        // The edge round pins 42: nothing is replaced.
        assert!(!notes.iter().any(|n| n.contains("pins")), "{notes:?}");
    }
}
