//! The compliance check of a finished run (`llm-loadgen check DIR`), as the reference's
//! `compliance/checker.py` makes it: the config lock (deterministic, single-stream settings
//! from config.yaml), the accuracy gate (`accuracy/accuracy_results.json` against the model's
//! golden accuracy and factors in the ruleset) and the run's validity (no dropped agentic
//! turns), each a named PASS/FAIL line, plus the attestations it cannot read from the files.

use std::path::Path;

use loadgen_plan::plan::ruleset::{ruleset, Model};
use loadgen_plan::plan::{apply_submission, check_config, scenario};
use loadgen_plan::yaml::Config;
use loadgen_py::float_repr::repr;
use serde_json::Value;

/// The ruleset and model the reference's checker defaults to.
pub const DEFAULT_RULESET: &str = "mlperf-edge-current";
pub const DEFAULT_MODEL: &str = "qwen3.6-27b";

/// The attestation no client file records.
const SERVER_FLAGS_NOTE: &str = "Verify the server was launched with --reasoning off and \
                                 --ctx-size 32768 (not recorded in client artifacts).";

/// The ruleset's golden-metric names the gate reads, with the key the scorer writes into its
/// breakdown (the reference's BFCL v4 mapping: the only scorer the gate reads).
const ACCURACY_METRIC_KEYS: [(&str, &str); 2] = [
    ("bfcl_overall_accuracy", "overall_accuracy"),
    ("bfcl_normalized_accuracy", "normalized_single_turn_score"),
];

/// One check: its name, its verdict and what it saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

fn check(name: &str, passed: bool, detail: String) -> Check {
    Check { name: name.to_string(), passed, detail }
}

/// Every check run on one directory, and the attestations left to a person.
#[derive(Debug, Clone, PartialEq)]
pub struct ComplianceReport {
    pub report_dir: String,
    pub ruleset: String,
    pub model: String,
    pub checks: Vec<Check>,
    pub notes: Vec<String>,
}

impl ComplianceReport {
    /// All checks passed.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// The report as the reference's `ComplianceReport.render` prints it.
    pub fn render(&self) -> String {
        let mut lines = vec![
            format!("Compliance report: {}", self.report_dir),
            format!("  ruleset={} model={}", self.ruleset, self.model),
            String::new(),
        ];
        for c in &self.checks {
            let mark = if c.passed { "PASS" } else { "FAIL" };
            lines.push(format!("  [{mark}] {}: {}", c.name, c.detail));
        }
        lines.extend(self.notes.iter().map(|n| format!("  [MANUAL] {n}")));
        lines.push(String::new());
        lines.push(format!("  OVERALL: {}", if self.passed() { "PASS" } else { "FAIL" }));
        lines.join("\n")
    }
}

/// Python's `repr` of an optional value: `None`, an integer, a float as Python writes it.
fn py_opt_int(value: Option<i128>) -> String {
    value.map_or("None".to_string(), |v| v.to_string())
}

/// The config lock: `temperature==0`, `seed==42` (every seed that is set: the model's and the
/// dataloader's) and `single_stream` (one worker, one connection, and a concurrency of 1
/// where one is set), from the run's configuration.
pub fn check_config_lock(config: &Config) -> Vec<Check> {
    let temperature = config.model_params.temperature;
    let shown = temperature.map_or("None".to_string(), repr);
    let mut out = vec![check(
        "temperature==0",
        temperature == Some(0.0),
        format!("model_params.temperature={shown}"),
    )];
    let seeds = [
        ("model_params.seed", config.model_params.seed),
        ("dataloader_random_seed", Some(config.settings.runtime.dataloader_random_seed)),
    ];
    let set: Vec<(&str, u64)> = seeds.iter().filter_map(|&(k, v)| v.map(|v| (k, v))).collect();
    let dict = |items: &[(&str, u64)]| {
        let inner: Vec<String> = items.iter().map(|(k, v)| format!("'{k}': {v}")).collect();
        format!("{{{}}}", inner.join(", "))
    };
    let offending: Vec<(&str, u64)> = set.iter().copied().filter(|&(_, v)| v != 42).collect();
    let (seeds_ok, detail) = if set.is_empty() {
        (false, "no seed set (expected seed==42)".to_string())
    } else if offending.is_empty() {
        (true, format!("seeds={}", dict(&set)))
    } else {
        let why = format!(" (expected 42; offending: {})", dict(&offending));
        (false, format!("seeds={}{why}", dict(&set)))
    };
    out.push(check("seed==42", seeds_ok, detail));
    let client = &config.settings.client;
    let mut single = client.num_workers == 1 && client.max_connections == 1;
    let mut detail =
        format!("num_workers={} max_connections={}", client.num_workers, client.max_connections);
    if let Some(n) = config.settings.load_pattern.target_concurrency {
        single = single && n == 1;
        detail.push_str(&format!(" target_concurrency={n}"));
    }
    out.push(check("single_stream", single, detail));
    out
}

/// A metric as a float: a number, or a string that reads as one (older files wrote them so).
fn to_float(value: Option<&Value>) -> Option<f64> {
    match value? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => loadgen_py::string::strip(s).parse().ok(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

/// Python's `str` of a JSON value as the reference's detail shows it.
fn py_str(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "None".to_string(),
        Some(Value::Number(n)) if n.is_f64() => n.as_f64().map_or(n.to_string(), repr),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The first `accuracy_scores` entry with a per-subset breakdown (`subset_scores`).
pub fn find_accuracy_entry(results: &Value) -> Option<&Value> {
    results.get("accuracy_scores")?.as_array()?.iter().find(|e| {
        e.get("breakdown")
            .and_then(Value::as_object)
            .is_some_and(|b| b.contains_key("subset_scores"))
    })
}

/// The accuracy gate on `accuracy_results.json`: each gated metric at least its factor times
/// the golden value (the first target setting's lower factor), a failure when no metric of
/// the entry is one the model's tables name, and the sample count against `min_samples`.
pub fn check_accuracy(results: &Value, model: &Model, min_samples: Option<u64>) -> Vec<Check> {
    let absent =
        || vec![check("accuracy_results_present", false, "no accuracy score found".into())];
    let Some(entry) = find_accuracy_entry(results) else { return absent() };
    let Some(block) = entry.get("breakdown").filter(|b| b.is_object()) else { return absent() };
    let factors = model.target_settings.first().copied().unwrap_or_default();
    let mut out = Vec::new();
    let mut applicable = 0;
    for (golden_key, result_key) in ACCURACY_METRIC_KEYS {
        let golden = model.golden(golden_key);
        let factor = factors.iter().find(|(m, _, _)| *m == golden_key).map(|&(_, f, _)| f);
        let (Some(golden), Some(factor)) = (golden, factor) else { continue };
        applicable += 1;
        let mut measured = to_float(block.get(result_key));
        if measured.is_none() && result_key == "overall_accuracy" {
            measured = to_float(entry.get("score"));
        }
        let name = format!("accuracy:{result_key}");
        let Some(measured) = measured else {
            out.push(check(&name, false, "metric missing or non-numeric".into()));
            continue;
        };
        let threshold = golden * factor;
        let detail =
            format!("{measured:.2} >= {threshold:.2} (={} x {})", repr(factor), repr(golden));
        out.push(check(&name, measured >= threshold, detail));
    }
    if applicable == 0 {
        let why = "no accuracy metric matched the model's golden/factor tables";
        out.push(check("accuracy_metric_applicable", false, why.into()));
    }
    if let Some(min) = min_samples {
        let raw = block.get("total_samples");
        let ok = to_float(raw).is_some_and(|t| t >= min as f64);
        out.push(check("min_sample_count", ok, format!("total_samples={} >= {min}", py_str(raw))));
    }
    out
}

/// An agentic run's turns as the validity gates read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnCounts {
    pub issued: Option<i128>,
    pub expected: Option<i128>,
    pub observed: Option<i128>,
    pub missing: Option<i128>,
}

/// The turns of the reference's inline scorer (`scores.json`'s `turns`).
pub fn turns_of_scores(scores: &Value) -> Option<TurnCounts> {
    let turns = scores.get("turns")?.as_object()?;
    let get = |k: &str| turns.get(k).and_then(Value::as_i64).map(i128::from);
    Some(TurnCounts {
        issued: get("issued"),
        expected: get("expected"),
        observed: get("observed"),
        missing: get("missing"),
    })
}

/// The turns of result_summary.json's `agentic` block: every issued turn is expected, the
/// succeeded ones were observed, the rest (failed, dropped, abandoned) are missing.
pub fn turns_of_summary(summary: &Value) -> Option<TurnCounts> {
    let turns = summary.get("agentic")?.get("turns")?;
    let issued = i128::from(turns.get("issued")?.as_u64()?);
    let observed = i128::from(turns.get("succeeded")?.as_u64()?);
    Some(TurnCounts {
        issued: Some(issued),
        expected: Some(issued),
        observed: Some(observed),
        missing: Some(issued - observed),
    })
}

/// The run-validity gates of an agentic performance run: no turn missing, and every
/// expected turn observed.
pub fn check_perf_validity(t: TurnCounts) -> Vec<Check> {
    let (issued, observed) = (py_opt_int(t.issued), py_opt_int(t.observed));
    vec![
        check(
            "no_dropped_turns",
            t.missing == Some(0),
            format!("missing={} (issued={issued}, observed={observed})", py_opt_int(t.missing)),
        ),
        check(
            "all_turns_observed",
            t.expected.is_some() && t.observed == t.expected,
            format!("observed={observed} == expected={} (issued={issued})", py_opt_int(t.expected)),
        ),
    ]
}

/// Reads a JSON file; `None` when it is absent or not JSON.
fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// The config lock on the run's config.yaml, read through the schema, a submission's ruleset
/// and the reference's cross-field rules.
fn config_checks(dir: &Path) -> Vec<Check> {
    let path = dir.join("config.yaml");
    if !path.exists() {
        return vec![check("config_present", false, format!("missing {}", path.display()))];
    }
    // As the reference's schema loads it: a submission_ref's ruleset pins its seeds again.
    let config = Config::from_yaml_file(&path).and_then(|mut c| {
        apply_submission(&mut c, &mut Vec::new())?;
        check_config(&c, &mut Vec::new())?;
        Ok(c)
    });
    match config {
        Ok(c) => check_config_lock(&c),
        Err(e) => {
            vec![check("config_valid", false, format!("{} failed to load: {e}", path.display()))]
        }
    }
}

/// Every applicable check on the run in `dir` under `ruleset_name` and `model_name`; an
/// unknown ruleset or model is an error (the checker has nothing to check against).
pub fn check_submission(
    dir: &Path,
    ruleset_name: &str,
    model_name: &str,
) -> Result<ComplianceReport, String> {
    let rules = ruleset(ruleset_name)?;
    let (model, scenarios) = rules.model(model_name).ok_or_else(|| {
        let names: Vec<String> =
            rules.models.iter().map(|(m, _)| format!("'{}'", m.name)).collect();
        format!("Model '{model_name}' not found in ruleset. Available: [{}]", names.join(", "))
    })?;
    let min_samples = scenario(scenarios).and_then(|s| s.min_sample_count);
    let mut report = ComplianceReport {
        report_dir: dir.display().to_string(),
        ruleset: ruleset_name.to_string(),
        model: model_name.to_string(),
        checks: config_checks(dir),
        notes: vec![SERVER_FLAGS_NOTE.to_string()],
    };
    let results = read_json(&dir.join("accuracy/accuracy_results.json"));
    let is_accuracy = results.as_ref().is_some_and(|r| find_accuracy_entry(r).is_some());
    if let Some(r) = results.as_ref().filter(|_| is_accuracy) {
        report.checks.extend(check_accuracy(r, model, min_samples));
    }
    let scores = read_json(&dir.join("scores.json"));
    let summary = read_json(&dir.join("performance/result_summary.json"));
    let turns = scores
        .as_ref()
        .and_then(turns_of_scores)
        .or_else(|| summary.as_ref().and_then(turns_of_summary));
    match turns {
        Some(t) => report.checks.extend(check_perf_validity(t)),
        None if !is_accuracy => report.checks.push(check(
            "scorer_output_present",
            false,
            "no accuracy/accuracy_results.json or performance scores.json found".into(),
        )),
        None => {}
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen_plan::plan::ruleset::{LLAMA2_70B, QWEN3_6_27B};
    use serde_json::json;

    fn config(text: &str) -> Config {
        Config::from_yaml_str(text, "config.yaml").unwrap()
    }

    #[test]
    fn the_config_lock_wants_temperature_0_seed_42_and_one_stream() {
        let locked = config(
            "type: online\nmodel_params: {name: m, temperature: 0, seed: 42}\nsettings:\n  \
             client: {num_workers: 1, max_connections: 1}\n  load_pattern: {type: \
             concurrency, target_concurrency: 1}\n",
        );
        let checks = check_config_lock(&locked);
        assert!(checks.iter().all(|c| c.passed), "{checks:?}");
        assert_eq!(checks[0].detail, "model_params.temperature=0.0");
        assert_eq!(
            checks[1].detail,
            "seeds={'model_params.seed': 42, 'dataloader_random_seed': 42}"
        );
        assert_eq!(checks[2].detail, "num_workers=1 max_connections=1 target_concurrency=1");
        let loose = config(
            "type: offline\nmodel_params: {name: m, temperature: 0.6}\nsettings:\n  runtime: \
             {dataloader_random_seed: 7}\n",
        );
        let checks = check_config_lock(&loose);
        assert!(checks.iter().all(|c| !c.passed), "{checks:?}");
        assert_eq!(checks[0].detail, "model_params.temperature=0.6");
        assert_eq!(
            checks[1].detail,
            "seeds={'dataloader_random_seed': 7} (expected 42; offending: {'dataloader_random_seed': 7})"
        );
        assert_eq!(checks[2].detail, "num_workers=-1 max_connections=-1");
    }

    fn bfcl(overall: Value, normalized: f64, total: u64) -> Value {
        json!({"accuracy_scores": [{"dataset_name": "x", "score": 85.0, "breakdown": {
            "subset_scores": {}, "overall_accuracy": overall,
            "normalized_single_turn_score": normalized, "total_samples": total}}]})
    }

    #[test]
    fn the_accuracy_gate_holds_each_metric_to_its_factor_of_the_golden_value() {
        let pass = check_accuracy(&bfcl(json!(86.0), 88.0, 995), &QWEN3_6_27B, Some(995));
        assert!(pass.iter().all(|c| c.passed), "{pass:?}");
        assert_eq!(pass[0].name, "accuracy:overall_accuracy");
        assert_eq!(pass[0].detail, "86.00 >= 83.64 (=0.97 x 86.23)");
        assert_eq!(pass[2].detail, "total_samples=995 >= 995");
        // Below the gate, the headline taken from the entry's score, too few samples.
        let fail = check_accuracy(&bfcl(Value::Null, 80.0, 10), &QWEN3_6_27B, Some(995));
        let verdicts: Vec<(&str, bool)> =
            fail.iter().map(|c| (c.name.as_str(), c.passed)).collect();
        assert_eq!(
            verdicts,
            [
                ("accuracy:overall_accuracy", true),
                ("accuracy:normalized_single_turn_score", false),
                ("min_sample_count", false)
            ]
        );
        // A model whose metrics the gate does not read fails rather than pass on nothing.
        let other = check_accuracy(&bfcl(json!(1), 1.0, 1), &LLAMA2_70B, None);
        assert_eq!(other[0].name, "accuracy_metric_applicable");
        let none = check_accuracy(&json!({"accuracy_scores": [{"score": 1}]}), &QWEN3_6_27B, None);
        assert_eq!(none[0].name, "accuracy_results_present");
    }

    #[test]
    fn an_agentic_run_is_valid_with_no_dropped_turn() {
        let summary = json!({"agentic": {"turns": {"issued": 11, "succeeded": 11}}});
        let ok = check_perf_validity(turns_of_summary(&summary).unwrap());
        assert!(ok.iter().all(|c| c.passed), "{ok:?}");
        assert_eq!(ok[0].detail, "missing=0 (issued=11, observed=11)");
        let scores = json!({"turns": {"issued": 5, "expected": 4, "observed": 3, "missing": 1}});
        let bad = check_perf_validity(turns_of_scores(&scores).unwrap());
        assert!(bad.iter().all(|c| !c.passed), "{bad:?}");
        assert_eq!(bad[1].detail, "observed=3 == expected=4 (issued=5)");
    }

    #[test]
    fn the_report_renders_as_the_references() {
        let report = ComplianceReport {
            report_dir: "d".into(),
            ruleset: DEFAULT_RULESET.into(),
            model: DEFAULT_MODEL.into(),
            checks: vec![check("a", true, "x".into()), check("b", false, "y".into())],
            notes: vec!["n".into()],
        };
        let want = "Compliance report: d\n  ruleset=mlperf-edge-current model=qwen3.6-27b\n\n  \
                    [PASS] a: x\n  [FAIL] b: y\n  [MANUAL] n\n\n  OVERALL: FAIL";
        assert_eq!(report.render(), want);
        let err =
            check_submission(Path::new("."), "mlperf-edge-current", "llama2-70b").unwrap_err();
        assert_eq!(err, "Model 'llama2-70b' not found in ruleset. Available: ['qwen3.6-27b']");
    }
}
