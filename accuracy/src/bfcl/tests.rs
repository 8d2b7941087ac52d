//! The BFCL checker's rules, each with a case that passes and one that fails, and the
//! aggregation worked out by hand from the reference's formulas.

use super::*;

/// A function description as BFCL writes one.
const WEATHER: &str = r#"[{"name": "weather.get", "description": "Weather.", "parameters": {"type": "dict", "properties": {"city": {"type": "string", "description": "City."}, "days": {"type": "integer", "description": "Days."}, "unit": {"type": "string", "description": "Unit.", "enum": ["c", "f"]}}, "required": ["city"]}}]"#;
const WEATHER_TRUTH: &str =
    r#"[{"weather.get": {"city": ["New York", "NYC"], "days": [3], "unit": ["c", ""]}}]"#;

/// A native tool call as `str(TextModelOutput)` ends with it.
fn call(name: &str, args: &str) -> String {
    let args = serde_json::to_string(args).unwrap();
    format!(
        r#"[{{"id":"call_1","type":"function","function":{{"name":"{name}","arguments":{args}}}}}]"#
    )
}

fn ast_score(subset: &str, functions: &str, truth: &str, output: &str) -> f64 {
    let cols = [subset.to_string(), functions.to_string()];
    let sample = Sample { index: 0, output, ground_truth: truth, columns: &cols };
    score_sample(Some(Extractor::FunctionCall), &sample).unwrap()
}

fn weather(args: &str) -> f64 {
    ast_score("simple_python", WEATHER, WEATHER_TRUTH, &call("weather_get", args))
}

#[test]
fn the_function_name_is_the_dotted_name_with_underscores() {
    assert_eq!(weather(r#"{"city": "NYC", "days": 3}"#), 1.0);
    let dotted = call("weather.get", r#"{"city": "NYC", "days": 3}"#);
    assert_eq!(ast_score("simple_python", WEATHER, WEATHER_TRUTH, &dotted), 0.0);
}

#[test]
fn required_parameters_must_be_sent() {
    assert_eq!(weather(r#"{"city": "NYC", "days": 3, "unit": "c"}"#), 1.0);
    assert_eq!(weather(r#"{"days": 3}"#), 0.0);
}

#[test]
fn an_unexpected_parameter_fails() {
    assert_eq!(weather(r#"{"city": "NYC", "days": 3, "hour": 1}"#), 0.0);
}

#[test]
fn types_are_pythons_with_int_to_float_allowed() {
    assert_eq!(weather(r#"{"city": "NYC", "days": "3"}"#), 0.0, "a string for an integer");
    assert_eq!(weather(r#"{"city": "NYC", "days": true}"#), 0.0, "a bool is not an int");
    let f = r#"[{"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "float", "description": "x"}}, "required": ["x"]}}]"#;
    let t = r#"[{"f": {"x": [2.0]}}]"#;
    assert_eq!(ast_score("simple_python", f, t, &call("f", r#"{"x": 2}"#)), 1.0);
    assert_eq!(ast_score("simple_python", f, t, &call("f", r#"{"x": 2.5}"#)), 0.0);
}

#[test]
fn values_must_be_allowed_and_strings_are_standardised() {
    assert_eq!(weather(r#"{"city": "new-york", "days": 3}"#), 1.0);
    assert_eq!(weather(r#"{"city": "Boston", "days": 3}"#), 0.0);
    assert_eq!(weather(r#"{"city": "NYC", "days": 4}"#), 0.0);
}

#[test]
fn an_answered_optional_parameter_may_be_left_out_only_when_marked() {
    assert_eq!(weather(r#"{"city": "NYC", "days": 3}"#), 1.0, "unit has \"\"");
    assert_eq!(weather(r#"{"city": "NYC"}"#), 0.0, "days has no \"\"");
}

const LISTS: &str = r#"[{"name": "f", "parameters": {"type": "dict", "properties": {"xs": {"type": "array", "items": {"type": "string"}, "description": "x"}, "d": {"type": "dict", "description": "d", "properties": {"k": {"type": "string"}}}, "ds": {"type": "array", "items": {"type": "dict"}, "description": "ds"}}, "required": []}}]"#;
const LISTS_TRUTH: &str = r#"[{"f": {"xs": [["A b", "c"], ""], "d": [{"k": ["V_1"]}, ""], "ds": [[{"k": ["a"]}, {"k": ["b"]}], ""]}}]"#;

fn lists(args: &str) -> f64 {
    ast_score("simple_python", LISTS, LISTS_TRUTH, &call("f", args))
}

#[test]
fn lists_compare_in_order_with_strings_standardised() {
    assert_eq!(lists(r#"{"xs": ["ab", "C"]}"#), 1.0);
    assert_eq!(lists(r#"{"xs": ["c", "ab"]}"#), 0.0);
    assert_eq!(lists(r#"{"xs": [1, 2]}"#), 0.0, "nested type");
}

#[test]
fn dicts_compare_key_by_key() {
    assert_eq!(lists(r#"{"d": {"k": "v 1"}}"#), 1.0);
    assert_eq!(lists(r#"{"d": {"k": "v2"}}"#), 0.0);
    assert_eq!(lists(r#"{"d": {"k": "v1", "z": "1"}}"#), 0.0, "unexpected key");
    assert_eq!(lists(r#"{"ds": [{"k": "a"}, {"k": "B"}]}"#), 1.0);
    assert_eq!(lists(r#"{"ds": [{"k": "b"}, {"k": "a"}]}"#), 0.0, "list of dicts in order");
}

const TWO: &str = r#"[{"name": "a", "parameters": {"type": "dict", "properties": {"x": {"type": "integer", "description": "x"}}, "required": ["x"]}}, {"name": "b", "parameters": {"type": "dict", "properties": {"y": {"type": "string", "description": "y"}}, "required": ["y"]}}]"#;

fn calls(pairs: &[(&str, &str)]) -> String {
    let items: Vec<String> = pairs
        .iter()
        .map(|(n, a)| {
            let a = serde_json::to_string(a).unwrap();
            format!(r#"{{"type":"function","function":{{"name":"{n}","arguments":{a}}}}}"#)
        })
        .collect();
    format!("[{}]", items.join(","))
}

#[test]
fn parallel_calls_match_in_any_order_and_multiple_picks_the_answered_function() {
    let truth = r#"[{"a": {"x": [1]}}, {"b": {"y": ["q"]}}]"#;
    let both = calls(&[("b", r#"{"y": "q"}"#), ("a", r#"{"x": 1}"#)]);
    assert_eq!(ast_score("parallel_multiple", TWO, truth, &both), 1.0);
    let one = calls(&[("a", r#"{"x": 1}"#)]);
    assert_eq!(ast_score("parallel_multiple", TWO, truth, &one), 0.0, "wrong count");
    let wrong = calls(&[("b", r#"{"y": "q"}"#), ("a", r#"{"x": 2}"#)]);
    assert_eq!(ast_score("live_parallel", TWO, truth, &wrong), 0.0);
    let truth_b = r#"[{"b": {"y": ["q"]}}]"#;
    assert_eq!(ast_score("multiple", TWO, truth_b, &calls(&[("b", r#"{"y": "Q"}"#)])), 1.0);
    assert_eq!(ast_score("live_multiple", TWO, truth_b, &calls(&[("a", r#"{"x": 1}"#)])), 0.0);
}

#[test]
fn java_and_javascript_parameters_are_strings_converted_by_type() {
    let java = r#"[{"name": "J.run", "parameters": {"type": "dict", "properties": {"n": {"type": "long", "description": "n"}, "xs": {"type": "ArrayList", "items": {"type": "String"}, "description": "xs"}}, "required": ["n"]}}]"#;
    let truth = r#"[{"J.run": {"n": [5], "xs": [["a", "b"], ""]}}]"#;
    let ok = call("J_run", r#"{"n": "5L", "xs": "new ArrayList<>(Arrays.asList(\"a\", \"b\"))"}"#);
    assert_eq!(ast_score("simple_java", java, truth, &ok), 1.0);
    assert_eq!(ast_score("simple_java", java, truth, &call("J_run", r#"{"n": 5}"#)), 0.0);
    let js = r#"[{"name": "go", "parameters": {"type": "dict", "properties": {"on": {"type": "Boolean", "description": "on"}}, "required": ["on"]}}]"#;
    let truth = r#"[{"go": {"on": [true]}}]"#;
    assert_eq!(ast_score("simple_javascript", js, truth, &call("go", r#"{"on": "true"}"#)), 1.0);
    assert_eq!(ast_score("simple_javascript", js, truth, &call("go", r#"{"on": true}"#)), 0.0);
}

#[test]
fn irrelevance_scores_no_tool_call_and_relevance_a_tool_call() {
    let cols = |s: &str| [s.to_string(), "[]".to_string()];
    let tool = format!("I will look.{}", call("f", "{}"));
    for (subset, output, want) in [
        ("irrelevance", "I cannot help with that.", 1.0),
        ("live_irrelevance", tool.as_str(), 0.0),
        ("live_relevance", tool.as_str(), 1.0),
        ("live_relevance", "no call", 0.0),
    ] {
        let c = cols(subset);
        let sample = Sample { index: 0, output, ground_truth: "[]", columns: &c };
        assert_eq!(score_sample(Some(Extractor::FunctionCall), &sample).unwrap(), want, "{subset}");
    }
}

#[test]
fn the_tool_calls_are_scored_without_the_prose_before_them() {
    let text = format!("thinking... Sure, here it is: [x]{}", call("f", "{}"));
    assert_eq!(scoring_text(&text), call("f", "{}"));
    assert_eq!(scoring_text("plain [{\"a\": 1}]"), "plain [{\"a\": 1}]");
    let prose = format!("Sure.{}", call("weather_get", r#"{"city": "NYC", "days": 3}"#));
    assert_eq!(ast_score("live_simple", WEATHER, WEATHER_TRUTH, &prose), 1.0);
}

#[test]
fn an_empty_ground_truth_wants_no_call() {
    assert_eq!(ast_score("simple_python", WEATHER, "[]", "no call"), 1.0);
    assert_eq!(ast_score("simple_python", WEATHER, "[]", &call("f", "{}")), 0.0);
}

#[test]
fn a_malformed_function_description_is_an_error_naming_the_sample() {
    let cols = ["simple_python".to_string(), r#"[{"name": "f"}]"#.to_string()];
    let out = call("f", "{}");
    let sample = Sample { index: 7, output: &out, ground_truth: r#"[{"f": {}}]"#, columns: &cols };
    let err = score_sample(Some(Extractor::FunctionCall), &sample).unwrap_err().to_string();
    assert!(err.contains("sample 7") && err.contains("parameters"), "{err}");
}

/// Hand-computed: simple_python 1/2, simple_java 1/1, multiple 0/1, live_simple 1/1,
/// live_multiple 1/3 (one of them missing), irrelevance 1/1, live_relevance 1/1.
/// non_live = mean(mean(0.5, 1.0), 0.0) = 0.375; live = (1*1 + 1/3*3) / 4 = 0.5;
/// hallucination = 1.0; normalized = mean(0.375, 0.5, 1.0) = 0.625; overall = 6 of 10.
#[test]
fn aggregation_is_per_category_as_the_reference_computes_it() {
    let ok = call("weather_get", r#"{"city": "NYC", "days": 3}"#);
    let rows: Vec<(&str, &str)> = vec![
        ("simple_python", ok.as_str()),
        ("simple_python", "nothing"),
        ("simple_java", "-"),
        ("multiple", "nothing"),
        ("live_simple", ok.as_str()),
        ("live_multiple", ok.as_str()),
        ("live_multiple", "nothing"),
        ("irrelevance", "no"),
        ("live_relevance", ok.as_str()),
    ];
    let cols: Vec<[String; 2]> =
        rows.iter().map(|(s, _)| [s.to_string(), WEATHER.to_string()]).collect();
    let java_cols = ["simple_java".to_string(), "[]".to_string()];
    let samples: Vec<Sample<'_>> = rows
        .iter()
        .zip(&cols)
        .enumerate()
        .map(|(index, ((subset, output), c))| Sample {
            index,
            output,
            // simple_java's empty truth with no call scores 1.
            ground_truth: if *subset == "simple_java" { "[]" } else { WEATHER_TRUTH },
            columns: if *subset == "simple_java" { &java_cols } else { c },
        })
        .collect();
    let (overall, b) = score(Some(Extractor::FunctionCall), &samples, &["live_multiple"]).unwrap();
    assert_eq!(overall, 0.6);
    assert_eq!(b.overall_accuracy, 60.0);
    assert_eq!(b.normalized_single_turn_score, 62.5);
    let cat: Vec<(&str, f64)> = b.category_scores.iter().map(|(c, v)| (c.as_str(), *v)).collect();
    assert_eq!(cat, [("non_live", 37.5), ("live", 50.0), ("hallucination", 100.0)]);
    let subsets: Vec<&str> = b.subset_scores.iter().map(|(s, _)| s.as_str()).collect();
    let want = ["simple_python", "simple_java", "multiple", "live_simple", "live_multiple"];
    assert_eq!(subsets[..5], want, "first-appearance order");
    assert_eq!(b.subset_scores[4].1, 33.33);
    assert_eq!(b.unscored_subsets, [("live_relevance".to_string(), 100.0)]);
    assert_eq!((b.total_samples, b.issued_samples), (9, 10));
    let (zero, z) = score(Some(Extractor::FunctionCall), &[], &["irrelevance"]).unwrap();
    assert_eq!((zero, z), (0.0, Breakdown::zero(1)));
}

#[test]
fn arguments_that_are_no_object_are_wrong_when_a_required_parameter_is_missing_else_raise() {
    let cols = ["simple_python".to_string(), WEATHER.to_string()];
    let extracted = |args: &str| format!(r#"[{{"name": "weather_get", "arguments": {args}}}]"#);
    let score = |args: &str| {
        let out = extracted(args);
        let sample = Sample { index: 3, output: &out, ground_truth: WEATHER_TRUTH, columns: &cols };
        score_sample(Some(Extractor::Identity), &sample)
    };
    assert_eq!(score("[1, 2]").unwrap(), 0.0, "city not in the list");
    // A string argument that is itself JSON text of a string.
    assert_eq!(score(r#""\"no town\"""#).unwrap(), 0.0, "city not in the string");
    let err = score(r#""\"my city\"""#).unwrap_err().to_string();
    assert!(err.contains("sample 3") && err.contains("not a JSON object"), "{err}");
}

#[test]
fn the_single_turn_subsets_are_the_categories_then_the_unscored() {
    let mut listed: Vec<&str> = CATEGORIES.iter().flat_map(|(_, s)| s.iter().copied()).collect();
    listed.extend(UNSCORED_SUBSETS);
    assert_eq!(listed, SINGLE_TURN_SUBSETS);
}
