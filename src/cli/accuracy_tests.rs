//! Unit tests of the accuracy side of plans resolved from flags (beside the flags, which the
//! plan does not import): `--dataset acc:…`, `--accuracy-only`, `--mode`.

use loadgen_coordinator::accuracy::{Extractor, Scorer};

use super::plan_from_args;
use crate::error::AppError;
use crate::plan::{Plan, TestMode};

fn mcq(options: &str) -> String {
    let path = format!("{}/tests/assets/accuracy_runs/mcq.jsonl", env!("CARGO_MANIFEST_DIR"));
    format!("acc:{path},name=mcq{options}")
}

fn plan_of(args: &[&str]) -> Result<Plan, AppError> {
    let perf = format!("{}/tests/assets/accuracy_runs/mcq.jsonl", env!("CARGO_MANIFEST_DIR"));
    let mut all = vec!["offline", "--dataset", &perf, "--num-samples", "4"];
    all.extend_from_slice(args);
    plan_from_args(&all)
}

#[test]
fn an_acc_dataset_resolves_its_scorer_extractor_repeats_and_ground_truth() {
    let acc = mcq(",accuracy_config.eval_method=pass_at_1,accuracy_config.extractor=abcd_extractor,accuracy_config.num_repeats=3");
    let plan = plan_of(&["--dataset", &acc]).unwrap();
    let d = &plan.accuracy.datasets[0];
    assert_eq!(d.name, "mcq");
    assert_eq!(d.scoring.scorer, Scorer::PassAt1);
    assert_eq!(d.scoring.extractor, Some(Extractor::Abcd));
    assert_eq!(d.scoring.num_repeats, 3);
    assert_eq!(d.scoring.ground_truth_column, None, "unset stays null in the results");
    assert_eq!(d.scoring.column(), "ground_truth");
    assert_eq!(d.scoring.ground_truth, ["choice1", "choice2", "choice3", "choice4", "choice1"]);
    assert_eq!(plan.accuracy.mode, TestMode::Perf);
    assert_eq!(plan.accuracy.drain_timeout_ms, None, "the accuracy drain waits without limit");
    assert_eq!(plan.num_samples, 4, "the performance phase is unchanged");
}

#[test]
fn accuracy_config_mistakes_are_refused_naming_the_key() {
    let cases = [
        (",accuracy_config.eval_method=pass_at_1", "requires accuracy_config.extractor"),
        (",accuracy_config.eval_method=pass_at_1,accuracy_config.extractor=nope", "unknown extractor \"nope\""),
        (",accuracy_config.eval_method=code_bench_scorer,accuracy_config.extractor=python_code_extractor", "LiveCodeBench"),
        (",accuracy_config.extractor=identity_extractor", "requires accuracy_config with eval_method"),
        (",accuracy_config.eval_method=pass_at_1,accuracy_config.extractor=identity_extractor,accuracy_config.ground_truth=answer", "no ground-truth column \"answer\""),
        (",accuracy_config.eval_method=pass_at_1,accuracy_config.extractor=identity_extractor,accuracy_config.num_repeats=0", "num_repeats"),
        (",accuracy_config.eval_method=pass_at_1,accuracy_config.extractor=identity_extractor,accuracy_config.extras=x", "accuracy_config.extras"),
    ];
    for (options, needle) in cases {
        let acc = mcq(options);
        let err = plan_of(&["--dataset", &acc]).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{options}: {err}");
        assert!(err.to_string().contains(needle), "{options}: {err}");
    }
}

#[test]
fn accuracy_without_events_jsonl_is_refused_before_the_run() {
    let acc =
        mcq(",accuracy_config.eval_method=pass_at_1,accuracy_config.extractor=identity_extractor");
    let err = plan_of(&["--dataset", &acc, "--no-events"]).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("--no-events cannot be used with accuracy"), "{err}");
}

#[test]
fn accuracy_only_skips_the_performance_phase_on_one_worker_and_connection() {
    let acc = mcq(
        ",accuracy_config.eval_method=string_match,accuracy_config.extractor=identity_extractor",
    );
    let plan = plan_of(&["--dataset", &acc, "--workers", "4", "--accuracy-only"]).unwrap();
    assert_eq!(plan.accuracy.mode, TestMode::Acc);
    assert_eq!(plan.num_samples, 0);
    assert!(plan.dataset.rows.is_empty(), "the performance dataset is not loaded");
    assert_eq!((plan.connections.workers, plan.connections.max_connections), (1, 1));
    let both = plan_of(&["--dataset", &acc, "--mode", "both"]).unwrap();
    assert_eq!((both.accuracy.mode, both.num_samples), (TestMode::Both, 4));
}
