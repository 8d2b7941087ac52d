//! Unit tests of the request settings a plan resolves from flags (beside the flags, which the
//! plan does not import), and of each request flag against its YAML key.

use super::{config_from_args, resolve_plan};
use crate::error::AppError;
use crate::plan::*;
use crate::yaml::Config;

fn plan_of(args: &[&str]) -> Result<Plan, AppError> {
    let dataset = format!(
        "{}/tests/assets/datasets/dummy_1k.jsonl,parser.prompt=text_input",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut all = vec!["offline", "--dataset", &dataset];
    all.extend(args);
    resolve_plan(config_from_args(&all)?, 0)
}

fn yaml_plan(model_params: &str) -> Result<Plan, AppError> {
    let dataset = format!("{}/tests/assets/datasets/dummy_1k.jsonl", env!("CARGO_MANIFEST_DIR"));
    let text = format!(
        "type: offline\nmodel_params:\n{model_params}datasets:\n  - path: {dataset}\n    \
         parser: {{prompt: text_input}}\n"
    );
    resolve_plan(Config::from_yaml_str(&text, "t.yaml")?, 0)
}

#[test]
fn uniform_osl_draws_are_pythons_randint_on_the_dataloader_seed() {
    // Python: r = random.Random(42); [r.randint(10, 20) for _ in range(8)]
    let plan = plan_of(&[
        "--osl-distribution.type",
        "uniform",
        "--min-output-tokens",
        "10",
        "--osl-distribution.max",
        "20",
    ])
    .unwrap();
    assert_eq!(plan.row_output_tokens.len(), plan.dataset.rows.len());
    assert_eq!(plan.row_output_tokens[..8], [20, 11, 10, 14, 13, 13, 12, 11]);
}

#[test]
fn normal_osl_draws_are_pythons_normalvariate_rounded_and_clamped() {
    // Python: r = random.Random(42);
    // [min(max(round(r.normalvariate(100, 30)), 1), 2048) for _ in range(8)]
    let plan = plan_of(&[
        "--osl-distribution.type",
        "normal",
        "--osl-distribution.mean",
        "100",
        "--osl-distribution.std",
        "30",
    ])
    .unwrap();
    assert_eq!(plan.row_output_tokens[..8], [107, 85, 138, 96, 71, 117, 65, 152]);
}

#[test]
fn original_osl_keeps_max_new_tokens_for_every_row() {
    let plan = plan_of(&["--osl-distribution.type", "original"]).unwrap();
    assert!(plan.row_output_tokens.is_empty());
}

#[test]
fn osl_bounds_and_min_new_tokens_are_checked() {
    let cases: [&[&str]; 3] = [
        &[
            "--min-output-tokens",
            "30",
            "--osl-distribution.max",
            "20",
            "--osl-distribution.type",
            "uniform",
        ],
        &["--osl-distribution.type", "fixed", "--osl-distribution.mean", "5000"],
        &[
            "--api-type",
            "openai_completions",
            "--min-new-tokens",
            "9",
            "--osl-distribution.type",
            "uniform",
            "--min-output-tokens",
            "4",
        ],
    ];
    for args in cases {
        let err = plan_of(args).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{args:?}: {err}");
        assert!(err.to_string().contains("osl_distribution"), "{args:?}: {err}");
    }
}

#[test]
fn each_request_flag_gives_the_same_plan_as_its_yaml_key() {
    let cases: [(&[&str], &str); 7] = [
        (&["--model-params.repetition-penalty", "1.1"], "  repetition_penalty: 1.1\n"),
        (&["--model-params.presence-penalty", "0.2"], "  presence_penalty: 0.2\n"),
        (&["--model-params.frequency-penalty", "-0.3"], "  frequency_penalty: -0.3\n"),
        (&["--model-params.ignore-eos"], "  ignore_eos: true\n"),
        (&["--extra-body", r#"{"b": 1, "a": [2]}"#], "  extra_body: {b: 1, a: [2]}\n"),
        (
            &[
                "--model-params.osl-distribution.type",
                "fixed",
                "--model-params.osl-distribution.mean",
                "12",
            ],
            "  osl_distribution: {type: fixed, mean: 12}\n",
        ),
        (
            &[
                "--model-params.osl-distribution.type",
                "uniform",
                "--model-params.osl-distribution.min",
                "4",
                "--model-params.osl-distribution.max",
                "9",
            ],
            "  osl_distribution: {type: uniform, min: 4, max: 9}\n",
        ),
    ];
    for (flags, yaml) in cases {
        let (a, b) = (plan_of(flags).unwrap(), yaml_plan(yaml).unwrap());
        let view = |p: &Plan| {
            (p.request.sampling.clone(), p.request.extra.clone(), p.row_output_tokens.clone())
        };
        assert_eq!(view(&a), view(&b), "{flags:?} vs {yaml}");
        assert_ne!(view(&a), view(&plan_of(&[]).unwrap()), "{flags:?} changes the plan");
    }
}

#[test]
fn skip_special_tokens_false_flag_is_a_completions_only_setting() {
    let plan = plan_of(&["--api-type", "openai_completions", "--no-skip-special-tokens"]);
    assert!(!plan.unwrap().request.sampling.skip_special_tokens);
    let err = plan_of(&["--model-params.no-skip-special-tokens"]).unwrap_err();
    assert!(err.to_string().contains("skip_special_tokens"), "{err}");
}

#[test]
fn extra_body_keeps_the_users_key_order_and_refuses_reserved_keys() {
    let plan = plan_of(&["--extra-body", r#"{"z": 1, "a": 2}"#]).unwrap();
    let keys: Vec<&str> = plan.request.extra.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["z", "a"]);
    let err = yaml_plan("  extra_body: {messages: []}\n").unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("\"messages\""), "{err}");
    let err = yaml_plan("  extra_body: 5\n").unwrap_err();
    assert!(err.to_string().contains("model_params.extra_body 5"), "{err}");
}

#[test]
fn a_model_name_past_its_limit_is_refused_naming_the_limit_and_the_size() {
    let at_limit = "m".repeat(MAX_MODEL_NAME_BYTES);
    assert_eq!(plan_of(&["--model", &at_limit]).unwrap().request.model, at_limit);
    let over = "m".repeat(MAX_MODEL_NAME_BYTES + 1);
    let err = plan_of(&["--model", &over]).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    let text = err.to_string();
    assert!(text.contains("is 4097 bytes") && text.contains("MAX_MODEL_NAME_BYTES"), "{text}");
    assert!(!text.contains(&over), "the name is measured, not quoted");
}

#[test]
fn an_extra_body_past_its_limit_is_refused_naming_the_limit() {
    let fits = format!("{{\"note\":\"{}\"}}", "x".repeat(1000));
    assert!(plan_of(&["--extra-body", &fits]).is_ok());
    let over = format!("{{\"note\":\"{}\"}}", "x".repeat(MAX_EXTRA_BODY_BYTES));
    let err = plan_of(&["--extra-body", &over]).unwrap_err();
    assert_eq!(err.exit_code(), 2, "{err}");
    assert!(err.to_string().contains("MAX_EXTRA_BODY_BYTES"), "{err}");
}
