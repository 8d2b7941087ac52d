use serde_json::json;

use super::*;

fn bash(command: &str) -> Value {
    json!([{"type": "function", "function": {"name": "bash", "arguments": json!({"command": command}).to_string()}}])
}

fn expected(
    id: &str,
    client_turn: u32,
    tool_calls: Option<Value>,
    intents: Option<Value>,
) -> ExpectedTurn {
    ExpectedTurn {
        conversation_id: id.into(),
        client_turn,
        assistant_turn: client_turn + 1,
        intent_codes: intents.and_then(|v| v.as_array().cloned()),
        tool_calls,
    }
}

fn issued(id: &str, repeat: u64, turn: u32, output: Option<ModelTurn>) -> IssuedTurn {
    IssuedTurn { conversation_id: id.into(), repeat, turn, output }
}

fn calls(command: &str) -> Option<ModelTurn> {
    Some(ModelTurn { tool_calls: Some(bash(command)), ..ModelTurn::default() })
}

#[test]
fn executables_are_normalised_as_the_reference_does() {
    let actions = |c: &str| bash_actions(&bash(c));
    assert_eq!(actions("CUDA_VISIBLE_DEVICES=0 /usr/bin/python3 -m pytest"), ["python"]);
    assert_eq!(
        actions("sudo env A=1 python3.11 x.py | grep -n 'a|b' && ls; rg x"),
        ["python", "grep", "ls", "grep"]
    );
    assert_eq!(actions("echo \"a; rm -rf\" ; less f\nwget u"), ["cat", "curl"]);
    assert_eq!(actions("unknown-tool --x"), Vec::<&str>::new());
    // `cmd` when `command` is empty; other functions and unparsable arguments count nothing.
    let cmd = json!([{"function": {"name": "bash", "arguments": "{\"command\": \"\", \"cmd\": \"git status\"}"}}]);
    assert_eq!(bash_actions(&cmd), ["git"]);
    let other = json!([{"function": {"name": "python", "arguments": "{\"command\": \"ls\"}"}}, {"function": {"name": "bash", "arguments": "{nope"}}]);
    assert!(bash_actions(&other).is_empty());
    // Arguments already an object (a dataset row) read the same.
    let object = json!([{"function": {"name": "bash", "arguments": {"cmd": "make test"}}}]);
    assert_eq!(bash_actions(&object), ["make"]);
}

#[test]
fn the_intent_prefers_the_explicit_form_then_the_last_bare_code() {
    let turn = |reasoning: Option<&str>, content: &str| ModelTurn {
        content: content.into(),
        reasoning: reasoning.map(Into::into),
        tool_calls: None,
    };
    assert_eq!(model_intent(&turn(None, "final INTENT: i042")), Some("I042".into()));
    assert_eq!(
        model_intent(&turn(Some("maybe I001 or I002"), "intent: I003")),
        Some("I003".into())
    );
    assert_eq!(model_intent(&turn(Some("maybe I001 or I002"), "I009")), Some("I002".into()));
    assert_eq!(model_intent(&turn(None, "XI0421 nothing")), None);
}

#[test]
fn scores_are_the_multiset_iou_and_intent_match_over_issued_turns() {
    let exp = vec![
        expected("c1", 1, Some(bash("ls && ls && cat f")), None),
        expected("c1", 3, Some(json!([])), None),
        expected("sim_7", 1, None, Some(json!(["i010", "I011", null, 5]))),
        expected("c2", 1, Some(bash("git diff")), None),
    ];
    let iss = vec![
        issued("c1", 1, 1, calls("ls; grep x f")),
        issued("c1", 1, 3, calls("ls")),
        issued(
            "sim_7",
            1,
            1,
            Some(ModelTurn { content: "intent: I011".into(), ..ModelTurn::default() }),
        ),
        issued("c2", 2, 1, None),
        issued("c9", 1, 1, calls("ls")),
    ];
    let (s, repeats) = score(&exp, &iss);
    assert_eq!(repeats, 2);
    // c1 turn 1: {ls, ls, cat} vs {ls, grep}: ∩ 1, ∪ 4.
    assert_eq!(s.per_turn[0].score, 0.25);
    assert_eq!(s.per_turn[0].turn, 2);
    assert!(s.per_turn[1].missing && s.per_turn[1].score == 0.0, "c2 repeat 2 failed");
    assert_eq!(s.per_turn[2].score, 1.0);
    assert_eq!(s.turns, TurnCounts { issued: 4, expected: 3, observed: 2, missing: 1, scored: 3 });
    assert_eq!(s.score, Some(0.4167));
    assert_eq!(s.domains["coding"], DomainScore { score: 0.125, scored: 2 });
    assert_eq!(s.domains["workflow"], DomainScore { score: 1.0, scored: 1 });
    assert_eq!(s.excluded_turns.len(), 1);
    assert_eq!(
        (s.excluded_turns[0].turn, s.excluded_turns[0].exclude_reason),
        (4, "no ground truth")
    );
    let text = serde_json::to_string(&s).unwrap();
    assert!(text.starts_with(r#"{"score":0.4167,"turns":{"issued":4,"expected":3,"observed":2,"missing":1,"scored":3},"domains":{"coding":"#), "{text}");
    assert!(text.contains(r#"{"conversation_id":"c2","repeat":2,"turn":2,"domain":"coding","missing":true,"gt_actions":["git"],"model_actions":[],"score":0.0}"#), "{text}");
    assert!(
        text.contains(
            r#""domain":"workflow","gt_intents":["I010","I011"],"model_intent":"I011","score":1.0}"#
        ),
        "{text}"
    );
}

#[test]
fn nothing_scorable_scores_none() {
    let (s, repeats) = score(&[], &[issued("c1", 1, 1, None)]);
    assert_eq!((s.score, repeats, s.turns.issued), (None, 0, 0));
    assert!(!serde_json::to_string(&s).unwrap().contains("excluded_turns"));
}
