//! The published JSON Schemas (docs/schema/) hold for every file the project writes: each
//! golden run under tests/golden/ (found by walking it), fresh runs of the binary, and they
//! refuse a damaged summary; every documented summary key is in the schema and back.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::support::{char_tokenizer, dataset, read_json, report_dir, root, run, stub};
use jsonschema::error::ValidationErrorKind;
use jsonschema::{Keyword, ValidationError, Validator};
use loadgen_stubs::{StatusFault, StubKind};
use serde_json::{json, Map, Value};

const SUMMARY_SCHEMA: &str = "docs/schema/result_summary.schema.json";
const SNAPSHOT_SCHEMA: &str = "docs/schema/final_snapshot.schema.json";

/// `x-written-as`: how a number is spelled, which JSON Schema's `integer` cannot tell (it takes
/// `200.0` as an integer). serde_json keeps the spelling: a number written with a fraction or
/// an exponent parses as f64, one without as an integer.
struct WrittenAs {
    float: bool,
}

impl<'i> Keyword<'i> for WrittenAs {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        if self.is_valid(instance) {
            return Ok(());
        }
        let want = if self.float { "a float (with a fraction)" } else { "an integer" };
        Err(ValidationError::custom(format!("{instance} is not written as {want}")))
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        match instance {
            Value::Number(n) => n.is_f64() == self.float,
            _ => true,
        }
    }
}

fn written_as_factory<'a>(
    _parent: &'a Map<String, Value>,
    value: &'a Value,
    _path: jsonschema::paths::Location,
) -> Result<Box<dyn for<'i> Keyword<'i>>, ValidationError<'a>> {
    match value.as_str() {
        Some("integer") => Ok(Box::new(WrittenAs { float: false })),
        Some("float") => Ok(Box::new(WrittenAs { float: true })),
        _ => Err(ValidationError::custom(format!("x-written-as {value}: integer or float"))),
    }
}

/// The schema at `rel` (checked against its meta-schema as it compiles), with `x-written-as`.
fn validator(rel: &str) -> Validator {
    jsonschema::options()
        .with_keyword("x-written-as", written_as_factory)
        .build(&read_json(&root().join(rel)))
        .unwrap_or_else(|e| panic!("{rel} does not compile: {e}"))
}

/// Every violation of `instance`, one a line, with where it is in the instance.
fn violations(v: &Validator, instance: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for e in v.iter_errors(instance) {
        leaves(&e, &mut out);
    }
    out
}

/// The reasons under a failed `oneOf`/`anyOf` (its own message prints the whole instance and
/// names none of them), a leaf's message cut to a readable length.
fn leaves(e: &ValidationError<'_>, out: &mut Vec<String>) {
    match e.kind() {
        ValidationErrorKind::OneOfNotValid { context } | ValidationErrorKind::AnyOf { context } => {
            out.push(format!("at {}: no {} branch holds:", e.instance_path(), e.kind().keyword()));
            context.iter().flatten().for_each(|inner| leaves(inner, out));
        }
        _ => {
            let message: String = e.to_string().chars().take(300).collect();
            out.push(format!("  at {}: {message}", e.instance_path()));
        }
    }
}

fn assert_valid(v: &Validator, instance: &Value, what: &str) {
    let errors = violations(v, instance);
    assert!(errors.is_empty(), "{what} breaks its schema:\n{}", errors.join("\n"));
}

/// Both files of a report directory hold their schemas.
fn assert_report_dir_valid(dir: &Path) {
    let summary = read_json(&dir.join("performance/result_summary.json"));
    assert_valid(&validator(SUMMARY_SCHEMA), &summary, &format!("{}: summary", dir.display()));
    let snapshot = read_json(&dir.join("metrics/final_snapshot.json"));
    assert_valid(&validator(SNAPSHOT_SCHEMA), &snapshot, &format!("{}: snapshot", dir.display()));
}

/// Every file called `name` under `dir`, at any depth.
fn files_named(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files_named(&path, name, out);
        } else if path.file_name().is_some_and(|n| n == name) {
            out.push(path);
        }
    }
}

#[test]
fn every_golden_summary_and_snapshot_holds_its_schema() {
    let golden = root().join("tests/golden");
    for (name, schema) in
        [("result_summary.json", SUMMARY_SCHEMA), ("final_snapshot.json", SNAPSHOT_SCHEMA)]
    {
        let mut files = Vec::new();
        files_named(&golden, name, &mut files);
        // The three golden runs of docs/OUTPUT.md at least: a walk that finds nothing fails.
        assert!(files.len() >= 3, "only {} {name} under {}", files.len(), golden.display());
        let v = validator(schema);
        for file in files {
            assert_valid(&v, &read_json(&file), &file.display().to_string());
        }
    }
}

#[test]
fn an_agentic_run_s_summary_holds_its_schema() {
    let dir = super::plot::agentic_run("schema-agentic", true);
    let (code, stderr) = super::plot::from_root("report", &dir, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    let mut summary = read_json(&dir.join("performance/result_summary.json"));
    assert!(summary["agentic"]["by_turn"][0]["ttft"].is_object(), "the block is written");
    // A hand-written log without the run's summary is counted by the rebuild (`rebuild`),
    // which a run's own summary never says.
    assert_eq!(summary["client_token_counting"], "rebuild");
    summary["client_token_counting"] = Value::Null;
    assert_valid(&validator(SUMMARY_SCHEMA), &summary, "an agentic run's summary");
}

/// `flags` split at spaces (only for literal flags: paths may hold spaces, they go apart).
fn words(flags: &str) -> Vec<String> {
    flags.split_whitespace().map(str::to_string).collect()
}

/// Runs `llm-loadgen benchmark <args> --report-dir <fresh dir>`, wants `code`, checks both files.
fn run_and_check(name: &str, mut args: Vec<String>, code: i32) -> Value {
    let dir = report_dir(&format!("schema-{name}"));
    args.insert(0, "benchmark".into());
    args.extend(["--report-dir".into(), dir.display().to_string()]);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(code), "{name}");
    assert_report_dir_valid(&dir);
    read_json(&dir.join("performance/result_summary.json"))
}

/// `offline --endpoints <urls> --model m --dataset <the 1k dataset>`, then `flags`.
fn stub_args(urls: &str, flags: &str) -> Vec<String> {
    let mut args = words("offline --endpoints");
    args.push(urls.into());
    args.extend(words("--model m --dataset"));
    args.push(dataset());
    args.extend(words(flags));
    args
}

#[test]
fn embedded_stub_runs_streaming_and_not_hold_the_schemas() {
    let s = run_and_check("embedded-off", words("offline --num-samples 300 --streaming off"), 0);
    assert_eq!(s["ttft"], json!({}), "no TTFT block without streaming");
    let mut on = words("offline --num-samples 300 --streaming on --tokenizer");
    on.push(char_tokenizer());
    let s = run_and_check("embedded-on", on, 0);
    assert!(s["tpot"]["percentiles"].is_object(), "a streamed run with a tokenizer has TPOT");
    let capped = "offline --num-samples 100000000 --runtime.max-duration-ms 300 --workers 1";
    let s = run_and_check("embedded-capped", words(capped), 0);
    assert!(s["n_samples_completed"].as_u64().unwrap() > 0, "the capped run measured something");
    assert!(s["n_samples_abandoned"].as_u64().unwrap() > 0, "the cap left samples in flight");
}

#[test]
fn a_server_primary_run_holds_the_schema_with_the_client_blocks_suffixed() {
    let server = stub(StubKind::Echo, |_| {});
    let mut args = stub_args(&server.url(), "--num-samples 200 --streaming on --tokenizer");
    args.push(char_tokenizer());
    args.extend(words("--token-count-source server --slo ttft_p99=1s,tpot_p50=1ms"));
    let s = run_and_check("server-primary", args, 0);
    assert_eq!(s["token_count_source"], "server");
    assert!(s["tpot_client"].is_object() && s.get("tpot_server").is_none());
    assert!(s["goodput"].is_object() && s["goodput_client"].is_object(), "under --slo");
}

#[test]
fn two_endpoints_and_failures_hold_the_schema() {
    let a = stub(StubKind::Echo, |_| {});
    let b = stub(StubKind::MaxThroughput, |c| {
        c.faults.status = Some(StatusFault { status: 429, every: 5 })
    });
    let flags = "--num-samples 300 --workers 1 --max-connections 4 --streaming off \
                 --no-early-stopping";
    let args = stub_args(&format!("{},{}", a.url(), b.url()), flags);
    let s = run_and_check("two-endpoints-failing", args, 0);
    assert_eq!(s["endpoints"].as_array().map(Vec::len), Some(2));
    let failed = s["n_samples_failed"].as_u64().unwrap();
    assert!(failed > 0, "the 429s counted: {}", s["failure_kinds"]);
    assert!(s["failure_kinds"]["http_status"]["first_message"].is_string());
}

#[test]
fn an_empty_tpot_and_the_open_and_closed_loops_hold_the_schema() {
    // Streaming without a client tokenizer: TPOT is `{"early_stopping_percentiles": {…null}}`.
    let null = "offline --endpoints null:// --num-samples 100 --streaming on";
    let s = run_and_check("empty-tpot", words(null), 0);
    let estimates = s["tpot"]["early_stopping_percentiles"].as_object().expect("the null form");
    assert!(estimates.values().all(Value::is_null));
    let poisson = "online --load-pattern poisson --target-qps 2000 --num-samples 200 \
                   --streaming off";
    let s = run_and_check("poisson", words(poisson), 0);
    assert_eq!(s["issue_lag"]["n"], 200);
    let closed = "online --load-pattern concurrency --concurrency 4 --num-samples 200 \
                  --streaming off";
    let s = run_and_check("concurrency", words(closed), 0);
    assert_eq!(s["run_config"]["load_pattern"]["target_concurrency"], 4);
}

#[test]
fn a_run_where_every_request_fails_holds_the_schema() {
    let server = stub(StubKind::MaxThroughput, |c| {
        c.faults.status = Some(StatusFault { status: 500, every: 1 })
    });
    // Streaming, nothing answered: TTFT and TPOT are empty with all-null estimates.
    let s =
        run_and_check("all-fail", stub_args(&server.url(), "--num-samples 50 --streaming on"), 4);
    assert_eq!(s["n_samples_failed"], 50);
    assert!(s["ttft"]["early_stopping_percentiles"]["50.0"].is_null(), "{}", s["ttft"]);
}

/// The golden client summary, with `edit` applied.
fn edited_summary(edit: impl FnOnce(&mut Map<String, Value>)) -> Value {
    let mut s = read_json(&root().join("tests/golden/client/result_summary.json"));
    edit(s.as_object_mut().expect("an object"));
    s
}

/// `instance` is refused, and one of the reasons mentions `needle`.
fn assert_refused(v: &Validator, instance: &Value, needle: &str, what: &str) {
    let errors = violations(v, instance);
    assert!(!errors.is_empty(), "{what} was accepted");
    assert!(
        errors.iter().any(|e| e.contains(needle)),
        "{what}: no error names {needle}: {errors:#?}"
    );
}

#[test]
fn a_damaged_summary_is_refused() {
    let v = validator(SUMMARY_SCHEMA);
    assert_valid(&v, &edited_summary(|_| {}), "the golden summary itself");
    let misspelled = edited_summary(|s| {
        let value = s.remove("n_samples_failed").unwrap();
        s.insert("n_samples_faild".into(), value);
    });
    assert_refused(&v, &misspelled, "n_samples_faild", "a misspelled key");
    let nested = edited_summary(|s| {
        let ttft = s["ttft"].as_object_mut().unwrap();
        let value = ttft.remove("std_dev").unwrap();
        ttft.insert("stddev".into(), value);
    });
    assert_refused(&v, &nested, "stddev", "a misspelled key in a metric block");
    let float_count = edited_summary(|s| {
        s.insert("n_samples_issued".into(), json!(200.0));
    });
    assert_refused(&v, &float_count, "not written as an integer", "200.0 for a count");
    let fractional = edited_summary(|s| {
        s.insert("duration_ns".into(), json!(65815835.5));
    });
    assert_refused(&v, &fractional, "/duration_ns", "a fractional duration");
    let int_median = edited_summary(|s| {
        s["latency"]["median"] = json!(32002008);
    });
    assert_refused(&v, &int_median, "not written as a float", "an integer median");
    let missing = edited_summary(|s| {
        s.remove("endpoints");
    });
    assert_refused(&v, &missing, "endpoints", "a missing required key");
    let wrong_basis = edited_summary(|s| {
        s.insert("tps_client".into(), json!(1.5));
    });
    assert_refused(&v, &wrong_basis, "tps_client", "a client-suffixed key under a client primary");
}

#[test]
fn x_written_as_is_what_tells_200_from_200_0() {
    // Without the keyword the standard `integer` takes 200.0, so the negative test above
    // would pass for the wrong reason if the keyword were not registered.
    let plain = jsonschema::validator_for(&json!({"type": "integer"})).unwrap();
    assert!(plain.is_valid(&json!(200.0)), "JSON Schema's integer takes 200.0");
    let ours = jsonschema::options()
        .with_keyword("x-written-as", written_as_factory)
        .build(&json!({"type": "integer", "x-written-as": "integer"}))
        .unwrap();
    assert!(ours.is_valid(&json!(200)) && !ours.is_valid(&json!(200.0)));
    let text: Value = serde_json::from_str("[1e-05, 1.396597839942673e+18, 52.205]").unwrap();
    let floats = jsonschema::options()
        .with_keyword("x-written-as", written_as_factory)
        .build(&json!({"items": {"x-written-as": "float"}}))
        .unwrap();
    assert!(floats.is_valid(&text), "Python's float reprs are floats");
    assert!(!floats.is_valid(&json!([3])), "an integer is not a float");
}

/// The golden client snapshot, with `edit` applied to its `metrics` list.
fn edited_snapshot(edit: impl FnOnce(&mut Vec<Value>)) -> Value {
    let mut s = read_json(&root().join("tests/golden/client/final_snapshot.json"));
    edit(s["metrics"].as_array_mut().expect("a metrics list"));
    s
}

fn position(metrics: &[Value], name: &str) -> usize {
    metrics.iter().position(|m| m["name"] == name).unwrap_or_else(|| panic!("{name}"))
}

#[test]
fn a_damaged_snapshot_is_refused() {
    let v = validator(SNAPSHOT_SCHEMA);
    assert_valid(&v, &edited_snapshot(|_| {}), "the golden snapshot itself");
    let misspelled = edited_snapshot(|m| {
        let i = position(m, "tracked_samples_failed");
        m[i]["name"] = json!("tracked_sample_failed");
    });
    assert_refused(&v, &misspelled, "tracked_sample_failed", "a misspelled counter");
    let float_counter = edited_snapshot(|m| {
        let i = position(m, "total_samples_issued");
        m[i]["value"] = json!(200.0);
    });
    assert_refused(&v, &float_counter, "not written as an integer", "a float counter");
    let missing = edited_snapshot(|m| {
        m.remove(position(m, "osl"));
    });
    assert_refused(&v, &missing, "/metrics", "a missing series");
    let twice = edited_snapshot(|m| {
        let copy = m[position(m, "isl")].clone();
        m.push(copy);
    });
    assert_refused(&v, &twice, "/metrics", "a series written twice");
    let int_tpot = edited_snapshot(|m| {
        let i = position(m, "tpot_ns");
        m[i]["max"] = json!(165600);
    });
    assert_refused(&v, &int_tpot, "not written as a float", "an integer max of TPOT");
}

/// The part of docs/OUTPUT.md under `heading`, to the next `## ` heading.
fn output_md_section(heading: &str) -> String {
    let text = std::fs::read_to_string(root().join("docs/OUTPUT.md")).expect("docs/OUTPUT.md");
    let start = text.find(heading).unwrap_or_else(|| panic!("{heading} in docs/OUTPUT.md"));
    let rest = &text[start + heading.len()..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_string()
}

/// The backticked words of `text` (a word may wrap onto the next line).
fn backticked(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).map(|w| w.split_whitespace().collect()).collect()
}

/// The keys the result_summary tables name in their first column.
fn documented_summary_keys() -> BTreeSet<String> {
    let section = output_md_section("## performance/result_summary.json");
    let rows = section.lines().filter(|l| l.starts_with("| `"));
    rows.flat_map(|row| backticked(row.split('|').nth(1).unwrap_or_default())).collect()
}

/// The schema's top-level keys, a basis-named pattern as OUTPUT.md writes it (`tpot_<other>`).
fn schema_summary_keys(schema: &Value) -> BTreeSet<String> {
    let mut keys: BTreeSet<String> =
        schema["properties"].as_object().unwrap().keys().cloned().collect();
    for pattern in schema["patternProperties"].as_object().unwrap().keys() {
        let base = pattern.trim_start_matches('^').trim_end_matches('$');
        let base = base.strip_suffix("_(client|server)").unwrap_or_else(|| panic!("{pattern}"));
        match base.strip_prefix("(output|input)") {
            Some(tail) => keys.extend(["output", "input"].map(|io| format!("{io}{tail}_<other>"))),
            None => {
                keys.insert(format!("{base}_<other>"));
            }
        }
    }
    keys
}

#[test]
fn every_documented_summary_key_is_in_the_schema_and_back() {
    let schema = read_json(&root().join(SUMMARY_SCHEMA));
    let documented = documented_summary_keys();
    let in_schema = schema_summary_keys(&schema);
    let undocumented: Vec<_> = in_schema.difference(&documented).collect();
    assert!(undocumented.is_empty(), "schema keys not in docs/OUTPUT.md: {undocumented:?}");
    let unschemed: Vec<_> = documented.difference(&in_schema).collect();
    assert!(unschemed.is_empty(), "docs/OUTPUT.md keys not in the schema: {unschemed:?}");
    // The metric block: its keys are the paragraph's, and the paragraph's are its.
    let section = output_md_section("## performance/result_summary.json");
    let para = section.split("A metric block:").nth(1).expect("the metric block paragraph");
    let para = &para[..para.find("\n\n").unwrap_or(para.len())];
    let words: BTreeSet<String> =
        backticked(para).into_iter().filter(|w| !w.starts_with("--")).collect();
    let defs = &schema["$defs"];
    let mut block: BTreeSet<String> = BTreeSet::new();
    for def in ["series_block", "histogram"] {
        block.extend(defs[def]["properties"].as_object().unwrap().keys().cloned());
    }
    assert_eq!(block, words, "series_block + histogram keys vs the metric block paragraph");
}

/// Every property of `map` (a `properties` object) says what it is, itself or through its `$ref`.
fn undescribed(schema: &Value, map: &Value, at: &str, out: &mut Vec<String>) {
    for (key, sub) in map.as_object().into_iter().flatten() {
        let target = sub["$ref"].as_str().and_then(|r| r.strip_prefix("#/$defs/"));
        let described = sub.get("description").is_some()
            || target.is_some_and(|d| schema["$defs"][d].get("description").is_some());
        if sub.is_object() && !described {
            out.push(format!("{at}/{key}"));
        }
    }
}

#[test]
fn every_key_of_both_schemas_has_a_description() {
    for rel in [SUMMARY_SCHEMA, SNAPSHOT_SCHEMA] {
        let schema = read_json(&root().join(rel));
        let mut missing = Vec::new();
        undescribed(&schema, &schema["properties"], "", &mut missing);
        undescribed(&schema, &schema["patternProperties"], "", &mut missing);
        for (name, def) in schema["$defs"].as_object().unwrap() {
            undescribed(&schema, &def["properties"], &format!("$defs/{name}"), &mut missing);
        }
        assert!(missing.is_empty(), "{rel}: keys without a description: {missing:?}");
    }
}

/// `tracked_finish_reason_{stop,length}` → both names; a plain word → itself.
fn expand_braces(word: &str) -> Vec<String> {
    match (word.find('{'), word.strip_suffix('}')) {
        (Some(open), Some(body)) => {
            body[open + 1..].split(',').map(|alt| format!("{}{alt}", &word[..open])).collect()
        }
        _ => vec![word.to_string()],
    }
}

#[test]
fn every_snapshot_metric_name_of_the_schema_is_documented() {
    let schema = read_json(&root().join(SNAPSHOT_SCHEMA));
    let section = output_md_section("## metrics/final_snapshot.json");
    let words: BTreeSet<String> =
        backticked(&section).iter().flat_map(|w| expand_braces(w)).collect();
    let defs = &schema["$defs"];
    let names = ["counter", "series"]
        .iter()
        .flat_map(|d| defs[*d]["properties"]["name"]["enum"].as_array().unwrap().clone());
    // A `_client` series is documented by its `_server` twin and `*_client`.
    let documented = |n: &str| {
        words.contains(n)
            || n.strip_suffix("_client").is_some_and(|base| {
                words.contains(&format!("{base}_server")) && words.contains("*_client")
            })
    };
    let missing: Vec<String> =
        names.filter_map(|n| n.as_str().map(str::to_string)).filter(|n| !documented(n)).collect();
    assert!(missing.is_empty(), "snapshot names not in docs/OUTPUT.md: {missing:?}");
}
