//! Exact-value tests of the extractors, the scorers and the registry. Extractor expectations
//! come from running the reference's own extractor.py once (tests/assets/accuracy/
//! extract_expected.py); scorer expectations are worked out by hand from the reference's
//! formulas, each stated beside its case.

use super::score::{parse_category, pass_at_1, sentence_lines, string_match};
use super::*;

/// `abcd_extractor` on each input, from the reference's extractor.py (extract_expected.py).
const ABCD: &[(&str, Option<&str>)] = &[
    ("", Some("")),
    ("The answer is B", Some("")),
    ("**Answer:** C", Some("choice3")),
    ("\\boxed{D}", Some("choice4")),
    ("*Answers* \u{2013} B", Some("choice1")),
    ("Answer: (C)", Some("choice3")),
    ("answer: d", Some("choice4")),
    ("Option B is best", Some("choice2")),
    ("Choice: c", Some("choice3")),
    ("\\boxed{\\text{A } 2.08}", Some("choice1")),
    ("\\boxed{\\textbf{C}}", Some("choice3")),
    ("I pick (A) here", Some("choice1")),
    ("x(A)", Some("")),
    ("It is **B** for sure", Some("choice2")),
    ("\\textbf{The D option}", Some("choice4")),
    ("**D) the fourth**", Some("choice4")),
    ("B.", Some("choice2")),
    ("  C) because", Some("choice3")),
    ("**a", Some("choice1")),
    ("dunno", Some("choice4")),
    ("zzz", Some("")),
    ("Answer: E", Some("choice1")),
    ("Answers: (b)", Some("choice2")),
    ("line one\u{a}Answer: A\u{a}Answer: B", Some("choice1")),
    ("answer\u{2003}:\u{2003}B", Some("choice2")),
    ("The answer is C but Option A", Some("choice1")),
    ("[D]", Some("choice4")),
    ("\u{1c}Answer: A", Some("choice1")),
    ("a", Some("choice1")),
    ("\u{a}\u{a}D", Some("choice4")),
    ("**Answer** B", Some("choice2")),
    ("_Answer_ A", Some("choice1")),
    ("ANSWERS - D", Some("choice4")),
    ("The choice C.", Some("choice3")),
];
/// `boxed_math_extractor` on each input, from the reference's extractor.py (extract_expected.py).
const BOXED: &[(&str, Option<&str>)] = &[
    ("", None),
    ("no digits", None),
    ("The answer is \\boxed{42}.", Some("42")),
    ("\\boxed{1, 2, 3}", Some("3")),
    ("\\boxed{}\\boxed{7}", Some("7")),
    ("\\boxed{7}\\boxed{}", Some("7")),
    ("\\framebox{ 9 }", Some("9")),
    ("boxed{a\u{a}b}", Some("a\u{a}b")),
    ("1 then 22 then 333", Some("333")),
    ("x = 12, y = 5", Some("5")),
    ("\\boxed{\\frac{1}{2}}", Some("\\frac{1")),
    ("\\boxed{}", None),
    ("\u{663} arabic digit", Some("\u{663}")),
    ("\\boxed{ , }", Some("")),
    ("\\boxed{x,\u{1c}5\u{1c}}", Some("5")),
];
/// `identity_extractor` on each input, from the reference's extractor.py (extract_expected.py).
const IDENTITY: &[(&str, Option<&str>)] = &[
    ("", Some("")),
    ("  keep  spaces \u{a}", Some("  keep  spaces \u{a}")),
    ("text", Some("text")),
];
/// `python_code_extractor` on each input, from the reference's extractor.py (extract_expected.py).
const PYTHON_CODE: &[(&str, Option<&str>)] = &[
    ("", None),
    ("   \u{a} ", None),
    ("no code here", None),
    ("```python\u{a}def foo():\u{a}    pass\u{a}```", Some("def foo():\u{a}    pass")),
    ("```\u{a}print('hello')\u{a}```", Some("print('hello')")),
    ("```python\u{a}a=1\u{a}```\u{a}```python\u{a}b=2\u{a}```", Some("b=2")),
    ("```py\u{a}x=1\u{a}```", Some("x=1")),
    ("```Python \u{a}\u{a} y=2\u{a}```", Some(" y=2")),
    ("```\u{a}first\u{a}```\u{a}```\u{a}second\u{a}```", Some("second")),
    ("```python```", Some("")),
    ("```unterminated", None),
    ("```python\u{a}A\u{a}``` and ```\u{a}B\u{a}```", Some("A")),
    ("```PY\u{9}\u{a}z=3```", Some("z=3")),
];
/// `function_call_extractor` on each input, from the reference's extractor.py (extract_expected.py).
const FUNCTION_CALL: &[(&str, Option<&str>)] = &[
    ("", None),
    ("  ", None),
    ("no calls here", None),
    ("get_weather(city='London')", Some("[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}}]")),
    ("[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"London\\\"}\"}}]", Some("[{\"name\": \"get_weather\", \"arguments\": {\"city\": \"London\"}}]")),
    ("[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}]", Some("[{\"name\": \"f\", \"arguments\": {}}]")),
    ("[{\"function\":{\"name\":\"f\",\"arguments\":\"not json\"}}]", Some("[{\"name\": \"f\", \"arguments\": \"not json\"}]")),
    ("[{\"function\":{\"arguments\":{\"a\":1}}}]", Some("[{\"name\": \"\", \"arguments\": {\"a\": 1}}]")),
    ("[{\"name\":\"lookup\",\"arguments\":{\"q\":\"caf\u{e9}\",\"n\":1.50,\"big\":12345678901234567890,\"x\":-0,\"e\":1e16,\"s\":1e-5}}]", Some("[{\"name\": \"lookup\", \"arguments\": {\"q\": \"caf\\u00e9\", \"n\": 1.5, \"big\": 12345678901234567890, \"x\": 0, \"e\": 1e+16, \"s\": 1e-05}}]")),
    ("[{\"name\":\"only\"}]", Some("[{\"name\": \"only\", \"arguments\": {}}]")),
    ("[]", None),
    ("{\"name\":\"f\"}", None),
    ("[1, 2]", None),
    ("Call search(query=\"rust lang\", limit=10) then fetch(url='http://x', retries=-2)", Some("[{\"name\": \"search\", \"arguments\": {\"query\": \"rust lang\", \"limit\": 10}}, {\"name\": \"fetch\", \"arguments\": {\"url\": \"http://x\", \"retries\": -2}}]")),
    ("f(a=True, b=None, c=[1, (2, 3), {'k': 'v'}], d=1.5e3, e=0x1F, f='\\n\\t\\'q\\'')", Some("[{\"name\": \"f\", \"arguments\": {\"a\": true, \"b\": null, \"c\": [1, [2, 3], {\"k\": \"v\"}], \"d\": 1500.0, \"e\": 31, \"f\": \"\\n\\t'q'\"}}]")),
    ("f(city)", None),
    ("f(x: int, y: str)", None),
    ("print(x=1) and len(y=2)", None),
    ("outer(inner(a=1), b=2)", Some("[{\"name\": \"outer\", \"arguments\": {\"b\": 2}}]")),
    ("f(x=1, x=2)", Some("[{\"name\": \"f\", \"arguments\": {\"x\": 2}}]")),
    ("f(x=1, 2)", Some("[{\"name\": \"f\", \"arguments\": {\"_raw\": \"x=1, 2\"}}]")),
    ("f(1, 2, key='v')", Some("[{\"name\": \"f\", \"arguments\": {\"key\": \"v\"}}]")),
    ("f(*args, **kwargs)", Some("[{\"name\": \"f\", \"arguments\": {}}]")),
    ("f(a=b.c.d)", Some("[{\"name\": \"f\", \"arguments\": {\"a\": \"b.c.d\"}}]")),
    ("f(a='one' 'two')", Some("[{\"name\": \"f\", \"arguments\": {\"a\": \"onetwo\"}}]")),
    ("f(a={1: 'x', True: 'y'})", Some("[{\"name\": \"f\", \"arguments\": {\"a\": {\"1\": \"y\"}}}]")),
    ("f(a=-0.0, b=+3, c=.5, d=1_000)", Some("[{\"name\": \"f\", \"arguments\": {\"a\": -0.0, \"b\": 3, \"c\": 0.5, \"d\": 1000}}]")),
    ("f(class=1)", Some("[{\"name\": \"f\", \"arguments\": {\"_raw\": \"class=1\"}}]")),
    ("f(a='unterminated)", None),
    ("f(a=1,)", Some("[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]")),
    ("f()", Some("[{\"name\": \"f\", \"arguments\": {}}]")),
    ("The f(a=1)", Some("[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]")),
    ("x.get(k=1)", Some("[{\"name\": \"get\", \"arguments\": {\"k\": 1}}]")),
    ("g(a=1) g(b=2)", Some("[{\"name\": \"g\", \"arguments\": {\"a\": 1}}, {\"name\": \"g\", \"arguments\": {\"b\": 2}}]")),
    ("f(a=\"\\u00e9\\x41\\101\")", Some("[{\"name\": \"f\", \"arguments\": {\"a\": \"\\u00e9AA\"}}]")),
    ("f(a=1e400)", Some("[{\"name\": \"f\", \"arguments\": {\"a\": Infinity}}]")),
    ("f(a=[])", Some("[{\"name\": \"f\", \"arguments\": {\"a\": []}}]")),
    ("f(,)", None),
    ("f(a=(1,))", Some("[{\"name\": \"f\", \"arguments\": {\"a\": [1]}}]")),
    ("f(a=(1))", Some("[{\"name\": \"f\", \"arguments\": {\"a\": 1}}]")),
    ("f(a=())", Some("[{\"name\": \"f\", \"arguments\": {\"a\": []}}]")),
    ("f(a='\\q')", Some("[{\"name\": \"f\", \"arguments\": {\"a\": \"\\\\q\"}}]")),
    ("unbalanced(a=1", None),
];

fn check(extractor: Extractor, cases: &[(&str, Option<&str>)]) {
    for (text, want) in cases {
        assert_eq!(
            extractor.extract(text).unwrap().as_deref(),
            *want,
            "{} on {text:?}",
            extractor.name()
        );
    }
}

#[test]
fn abcd_extractor_matches_the_reference_including_empty_text() {
    check(Extractor::Abcd, ABCD);
}

#[test]
fn boxed_math_extractor_matches_the_reference_including_no_answer() {
    check(Extractor::BoxedMath, BOXED);
}

#[test]
fn function_call_extractor_matches_the_reference_on_json_and_text_calls() {
    check(Extractor::FunctionCall, FUNCTION_CALL);
}

#[test]
fn function_call_extractor_refuses_arguments_that_need_python_ast() {
    let texts = [
        "f(a=g(1))",
        "f(a=1 + 2)",
        "f(a=[x])",
        "f(a={1, 2})",
        "f(a=1j)",
        "f(a=b'x')",
        "f(a='''x''')",
    ];
    for text in texts {
        let err = Extractor::FunctionCall.extract(text).unwrap_err();
        assert!(
            matches!(&err, AccuracyError::UnsupportedCall { call, .. } if call == "f"),
            "{text}: {err}"
        );
        assert!(err.to_string().contains("f(...)"), "{err}");
    }
}

#[test]
fn identity_extractor_returns_the_text_unchanged() {
    check(Extractor::Identity, IDENTITY);
}

#[test]
fn python_code_extractor_matches_the_reference_including_no_block() {
    check(Extractor::PythonCode, PYTHON_CODE);
}

fn samples<'a>(rows: &[(&'a str, &'a str)]) -> Vec<Sample<'a>> {
    rows.iter()
        .enumerate()
        .map(|(index, (output, ground_truth))| Sample { index, output, ground_truth, columns: &[] })
        .collect()
}

fn number(scored: Scored) -> Option<f64> {
    match scored.score {
        ScoreValue::Number(n) => n,
        ScoreValue::Rouge(r) => panic!("expected a number, got {r:?}"),
    }
}

#[test]
fn pass_at_1_divides_by_issued_so_missing_and_empty_responses_count_as_wrong() {
    // 4 issued, 3 completed: "B" right, "" (empty response) wrong, "no letter" wrong -> 1/4.
    let rows = samples(&[("The answer: B", "choice2"), ("", "choice1"), ("zzz", "choice3")]);
    let scored = Scorer::PassAt1.score(Some(Extractor::Abcd), &rows, 4, 4).unwrap();
    assert_eq!(scored.n_repeats, 1);
    assert_eq!(number(scored), Some(0.25));
}

#[test]
fn pass_at_1_scores_no_answer_as_zero_and_exact_match_as_one() {
    assert_eq!(pass_at_1(None, "42"), 0.0);
    assert_eq!(pass_at_1(Some("42 "), "42"), 0.0);
    assert_eq!(pass_at_1(Some("42"), "42"), 1.0);
    // boxed_math finds nothing in "no digits": None scores 0; 2 repeats of a 2-row dataset.
    let rows = samples(&[("\\boxed{7}", "7"), ("no digits", "3"), ("x=3", "3")]);
    let scored = Scorer::PassAt1.score(Some(Extractor::BoxedMath), &rows, 4, 2).unwrap();
    assert_eq!(scored.n_repeats, 2);
    assert_eq!(number(scored), Some(0.5));
}

#[test]
fn scorers_report_null_when_nothing_was_issued_and_zero_when_nothing_completed() {
    let none = Scorer::StringMatch.score(None, &[], 0, 5).unwrap();
    assert_eq!((none.score, none.n_repeats), (ScoreValue::Number(None), 0));
    let lost = Scorer::PassAt1.score(None, &[], 10, 5).unwrap();
    assert_eq!((lost.score, lost.n_repeats), (ScoreValue::Number(Some(0.0)), 2));
}

#[test]
fn string_match_strips_both_sides_and_needs_an_answer() {
    assert_eq!(string_match(" Paris\n", "Paris"), 1.0);
    assert_eq!(string_match("\u{1c}Paris", "Paris"), 1.0);
    assert_eq!(string_match("paris", "Paris"), 0.0);
    assert_eq!(string_match("", ""), 1.0);
    let rows = samples(&[(" Paris ", "Paris"), ("", "Rome")]);
    let scored = Scorer::StringMatch.score(None, &rows, 2, 2).unwrap();
    assert_eq!(number(scored), Some(0.5));
    // The reference calls None.strip() and fails; this names the sample instead.
    let rows = samples(&[("no digits here", "3")]);
    let err = Scorer::StringMatch.score(Some(Extractor::BoxedMath), &rows, 1, 1).unwrap_err();
    assert_eq!(err, AccuracyError::NoAnswer { sample: 0 });
}

#[test]
fn shopify_category_f1_is_hierarchical_f1_with_pads_for_unparsable_responses() {
    let ok = |c: &str| format!(r#"{{"category": "{c}", "brand": "x", "is_secondhand": false}}"#);
    let exact = ok("Clothing > Shirts > Polo");
    let leaf = ok(" Clothing > Shirts > Dress ");
    // Pairs: exact (3 of 3), wrong leaf (2 of 3), empty response (pad, 0 of 2), extra key (pad,
    // 0 of 1). HP = HR = 5/9, F1 = 5/9.
    let extra = r#"{"category": "A", "brand": "x", "is_secondhand": true, "price": 1}"#;
    let rows = samples(&[
        (exact.as_str(), "Clothing > Shirts > Polo"),
        (leaf.as_str(), "Clothing > Shirts > Polo "),
        ("", "Home > Garden"),
        (extra, "A"),
    ]);
    let scored = Scorer::ShopifyCategoryF1.score(None, &rows, 4, 2).unwrap();
    assert_eq!(scored.n_repeats, 2);
    let f1 = number(scored).unwrap();
    assert!((f1 - 5.0 / 9.0).abs() < 1e-15, "f1 {f1}");
    let none = Scorer::ShopifyCategoryF1.score(None, &[], 0, 2).unwrap();
    assert_eq!(none.score, ScoreValue::Number(Some(0.0)));
}

#[test]
fn shopify_response_must_validate_as_product_metadata() {
    let with = |b: &str| format!(r#"{{"category":"C","brand":"b","is_secondhand":{b}}}"#);
    for lax in ["true", "0", "1.0", r#""yes""#, r#""OFF""#, r#""t""#] {
        assert_eq!(parse_category(&with(lax)).as_deref(), Some("C"), "is_secondhand {lax}");
    }
    for bad in ["2", "0.5", r#""maybe""#, "null", "[]"] {
        assert_eq!(parse_category(&with(bad)), None, "is_secondhand {bad}");
    }
    assert_eq!(parse_category(r#"{"category":1,"brand":"b","is_secondhand":true}"#), None);
    assert_eq!(parse_category(r#"{"category":"C","is_secondhand":true}"#), None);
    assert_eq!(parse_category("```json\n{}\n```"), None);
    assert_eq!(parse_category(""), None);
}

#[test]
fn rouge_scorer_reports_the_reference_strings_over_completed_responses() {
    // Per pair (rouge_score, run once): identical -> 1.0 everywhere; "the cat" vs "the cat sat"
    // -> rouge1 0.8, rouge2 2/3, rougeL 0.8, rougeLsum 0.8; empty -> 0.
    let rows = samples(&[("A dog ran.", "A dog ran."), ("the cat", "the cat sat"), ("", "x y")]);
    let ScoreValue::Rouge(report) = Scorer::Rouge.score(None, &rows, 5, 3).unwrap().score else {
        panic!("rouge returns its report");
    };
    // Means: rouge1 (1 + 0.8 + 0)/3 = 60.0; rouge2 (1 + 2/3)/3 = 55.5556.
    assert_eq!(report.rouge1, "60.0");
    assert_eq!(report.rouge2, "55.5556");
    assert_eq!(report.rouge_l, "60.0");
    assert_eq!(report.rouge_lsum, "60.0");
    assert_eq!(report.gen_len, "17");
    assert_eq!(report.gen_num, 3);
    assert_eq!(
        Scorer::Rouge.score(None, &[], 3, 3).unwrap_err(),
        AccuracyError::NothingToScore { scorer: "rouge" }
    );
}

#[test]
fn sentence_lines_puts_each_sentence_on_its_own_line() {
    assert_eq!(sentence_lines("  One. Two!  Three? four.  "), "One.\nTwo!\nThree?\nfour.");
    assert_eq!(
        sentence_lines("See e.g. the list. Really?! Yes."),
        "See e.g. the list.\nReally?!\nYes."
    );
    assert_eq!(sentence_lines("He said \"Go.\" Then left."), "He said \"Go.\"\nThen left.");
    assert_eq!(sentence_lines("3.14 is pi. 2 is even."), "3.14 is pi.\n2 is even.");
    assert_eq!(sentence_lines(""), "");
}

#[test]
fn registry_resolves_the_reference_names() {
    for e in EXTRACTORS {
        assert_eq!(extractor(e.name()), Ok(e));
    }
    for s in SCORERS {
        assert_eq!(scorer(s.name()), Ok(s));
    }
    assert_eq!(Scorer::ShopifyCategoryF1.default_ground_truth_column(), "ground_truth_category");
    assert_eq!(Scorer::PassAt1.default_ground_truth_column(), "ground_truth");
}

#[test]
fn registry_names_unknown_and_refused_names_and_says_why() {
    let err = extractor("regex_extractor").unwrap_err().to_string();
    assert!(
        err.contains("\"regex_extractor\"") && err.contains("abcd_extractor, boxed_math_extractor"),
        "{err}"
    );
    let err = scorer("bleu").unwrap_err().to_string();
    assert!(
        err.contains("\"bleu\"")
            && err.contains(
                "pass_at_1, string_match, rouge, shopify_category_f1, agentic_inference_inline"
            ),
        "{err}"
    );
    let err = scorer("code_bench_scorer").unwrap_err().to_string();
    assert!(
        err.contains("code_bench_scorer") && err.contains("LiveCodeBench execution service"),
        "{err}"
    );
    for name in ["swe_bench_scorer", "vbench", "legacy_mlperf_deepseek_r1"] {
        assert!(matches!(scorer(name), Err(AccuracyError::Refused { .. })), "{name}");
    }
}
