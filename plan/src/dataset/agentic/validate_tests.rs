//! Every check of an agentic dataset, each refusal naming the conversation and the turn (or the
//! row, before its conversation is known): the reference's cases
//! (`test_agentic_inference_dataset.py`) and ours.

use super::tests::{build, row};

/// Builds `rows` and returns the refusal, checked to be bad input naming the dataset and
/// holding each of `needles`.
fn refused(case: &str, rows: &[String], needles: &[&str]) {
    let lines: Vec<&str> = rows.iter().map(String::as_str).collect();
    let err = build(&lines).expect_err(case);
    assert_eq!(err.exit_code(), 2, "{case}: {err}");
    let msg = err.to_string();
    assert!(msg.starts_with("input error: dataset t.jsonl: "), "{case}: {msg}");
    for needle in needles {
        assert!(msg.contains(needle), "{case}: {msg:?} lacks {needle:?}");
    }
}

fn user(turn: u32, content: &str) -> String {
    row("c1", turn, "user", &format!(r#""content": "{content}""#))
}

fn assistant(turn: u32, content: &str) -> String {
    row("c1", turn, "assistant", &format!(r#""content": "{content}""#))
}

/// An assistant row calling tools, `calls` the JSON of its `tool_calls`.
fn calling(turn: u32, calls: &str) -> String {
    row("c1", turn, "assistant", &format!(r#""tool_calls": {calls}"#))
}

const ONE_CALL: &str =
    r#"[{"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}]"#;

fn tool(turn: u32, results: &str) -> String {
    row("c1", turn, "tool", &format!(r#""tool_results": {results}"#))
}

#[test]
fn a_role_out_of_sequence_is_refused_with_its_turn() {
    let c1t1 = "conversation \"c1\" turn 1: invalid role sequence";
    let c1t2 = "conversation \"c1\" turn 2: invalid role sequence";
    let cases = [
        (
            "assistant first",
            vec![assistant(1, "A"), user(2, "B")],
            c1t1,
            "role \"assistant\" cannot come first",
        ),
        (
            "two assistants",
            vec![user(1, "A"), assistant(2, "B"), assistant(3, "C")],
            "conversation \"c1\" turn 3: invalid role sequence",
            "role \"assistant\" cannot come after \"assistant\"",
        ),
        (
            "tool after user",
            vec![user(1, "A"), tool(2, r#"[{"tool_call_id": "x", "content": "r"}]"#)],
            c1t2,
            "role \"tool\" cannot come after \"user\"",
        ),
        (
            "two users",
            vec![user(1, "A"), user(2, "B")],
            c1t2,
            "role \"user\" cannot come after \"user\"",
        ),
        (
            "assistant_tc",
            vec![
                user(1, "Q"),
                row("c1", 2, "assistant_tc", &format!(r#""tool_calls": {ONE_CALL}"#)),
            ],
            c1t2,
            "role \"assistant_tc\"",
        ),
        (
            "no role",
            vec![user(1, "Q"), row("c1", 2, "x", "").replace(r#", "role": "x""#, "")],
            c1t2,
            "no role cannot come after \"user\"",
        ),
    ];
    for (case, rows, at, rule) in cases {
        refused(case, &rows, &[at, rule, "a conversation opens with \"user\""]);
    }
}

#[test]
fn a_tool_row_needs_an_assistant_s_calls_and_well_formed_results() {
    let after_call = |results: &str| vec![user(1, "go"), calling(2, ONE_CALL), tool(3, results)];
    let at = "conversation \"c1\" turn 3: ";
    let cases = [
        (
            "no calls before it",
            vec![
                user(1, "go"),
                assistant(2, "A"),
                tool(3, r#"[{"tool_call_id": "x", "content": "r"}]"#),
            ],
            "must follow an assistant row with non-empty tool_calls",
        ),
        (
            "no tool_results",
            vec![user(1, "go"), calling(2, ONE_CALL), row("c1", 3, "tool", r#""content": "r""#)],
            "a tool row needs a non-empty tool_results list",
        ),
        ("empty tool_results", after_call("[]"), "a tool row needs a non-empty tool_results list"),
        (
            "not an object",
            after_call(r#"["not-a-dict"]"#),
            "tool_results[0] is a string, not an object",
        ),
        (
            "no id",
            after_call(r#"[{"content": "ok"}]"#),
            "tool_results[0].tool_call_id must be a non-empty string",
        ),
        (
            "empty id",
            after_call(r#"[{"tool_call_id": "", "content": "ok"}]"#),
            "tool_results[0].tool_call_id must be a non-empty string",
        ),
        ("no content", after_call(r#"[{"tool_call_id": "x"}]"#), "tool_results[0] has no content"),
        (
            "null content",
            after_call(
                r#"[{"tool_call_id": "x", "content": "a"}, {"tool_call_id": "y", "content": null}]"#,
            ),
            "tool_results[1] has no content",
        ),
    ];
    for (case, rows, rule) in cases {
        refused(case, &rows, &[at, rule]);
    }
}

#[test]
fn a_malformed_tool_call_is_refused_with_its_index() {
    let at = "conversation \"c1\" turn 2: ";
    let cases = [
        (r#"[{"id": "x"}]"#, "tool_calls[0].type must be \"function\""),
        (r#"[{"id": "x", "type": "function"}]"#, "tool_calls[0].function must be an object"),
        (
            r#"[{"id": "x", "type": "function", "function": {}}]"#,
            "tool_calls[0].function.name must be a non-empty string",
        ),
        (
            r#"[{"id": "", "type": "function", "function": {"name": "f", "arguments": "{}"}}]"#,
            "tool_calls[0].id is missing or empty",
        ),
        (
            r#"[{"id": "x", "type": "tool", "function": {"name": "f", "arguments": "{}"}}]"#,
            "tool_calls[0].type must be \"function\"",
        ),
        (
            r#"[{"id": "x", "type": "function", "function": {"name": "f", "arguments": 123}}]"#,
            "tool_calls[0].function.arguments is a number; give a JSON string or an object",
        ),
        (
            r#"[{"id": "x", "type": "function", "function": {"name": "f"}}]"#,
            "tool_calls[0].function.arguments is missing",
        ),
        (
            r#"[{"id": "x", "type": "function", "function": {"name": "f", "arguments": {}}}, "y"]"#,
            "tool_calls[1] is a string, not an object",
        ),
    ];
    for (calls, rule) in cases {
        refused(calls, &[user(1, "go"), calling(2, calls)], &[at, rule]);
    }
}

#[test]
fn an_assistant_row_needs_content_or_calls_and_a_user_row_content() {
    let cases = [
        (
            "assistant without either",
            vec![user(1, "go"), row("c1", 2, "assistant", r#""content": """#)],
            "turn 2: an assistant row needs non-empty content or non-empty tool_calls",
        ),
        (
            "empty tool_calls",
            vec![user(1, "go"), row("c1", 2, "assistant", r#""content": "hi", "tool_calls": []"#)],
            "turn 2: tool_calls is an empty list, not a non-empty list; omit the field",
        ),
        (
            "tool_calls not a list",
            vec![
                user(1, "go"),
                row("c1", 2, "assistant", r#""content": "hi", "tool_calls": "f()""#),
            ],
            "turn 2: tool_calls is a string, not a non-empty list",
        ),
        (
            "user without content",
            vec![row("c1", 1, "user", ""), assistant(2, "Response")],
            "turn 1: a user row needs non-empty content",
        ),
        (
            "user with empty content",
            vec![user(1, "")],
            "turn 1: a user row needs non-empty content",
        ),
        (
            "user answering calls",
            vec![user(1, "go"), calling(2, ONE_CALL), user(3, "and?")],
            "turn 3: a user row cannot follow an assistant row with tool_calls",
        ),
    ];
    for (case, rows, rule) in cases {
        refused(case, &rows, &["conversation \"c1\" ", rule]);
    }
}

#[test]
fn turns_must_be_numbered_one_to_n() {
    let n = "turn numbers must run 1, 2, …, N with no gaps or repeats";
    let cases = [
        (
            "a gap",
            vec![user(1, "a"), assistant(2, "b"), user(5, "c"), assistant(6, "d")],
            "conversation \"c1\" turn 5: ",
            "(turn 3 expected here); got [1, 2, 5, 6]",
        ),
        (
            "from 3",
            vec![user(3, "msg"), assistant(4, "resp")],
            "conversation \"c1\" turn 3: ",
            "(turn 1 expected here); got [3, 4]",
        ),
        (
            "from 0",
            vec![user(0, "msg"), assistant(1, "resp")],
            "conversation \"c1\" turn 0: ",
            "got [0, 1]",
        ),
        (
            "a repeat",
            vec![
                user(1, "m1"),
                assistant(2, "r1"),
                row("c2", 1, "user", r#""content": "m2""#),
                row("c2", 2, "assistant", r#""content": "r2""#),
                row("c2", 2, "user", r#""content": "dup""#),
            ],
            "conversation \"c2\" turn 2: ",
            "(turn 3 expected here); got [1, 2, 2]",
        ),
    ];
    for (case, rows, at, rule) in cases {
        refused(case, &rows, &[at, n, rule]);
    }
    let mut long: Vec<String> =
        (1..=30).map(|t| if t % 2 == 1 { user(t, "u") } else { assistant(t, "a") }).collect();
    long.push(user(32, "late"));
    refused("long", &long, &["turn 32: ", ", 20, … (31 in all)]"]);
}

#[test]
fn conversation_ids_and_turns_are_refused_by_row() {
    let with_id = |id: &str| {
        format!(r#"{{"conversation_id": {id}, "turn": 1, "role": "user", "content": "Hi"}}"#)
    };
    let cases = [
        (with_id("null"), "row 0: conversation_id is missing or empty"),
        (with_id(r#""""#), "row 0: conversation_id is missing or empty"),
        (with_id(r#""nan""#), "row 0: conversation_id is missing or empty"),
        (
            r#"{"turn": 1, "role": "user", "content": "Hi"}"#.to_string(),
            "row 0: conversation_id is missing",
        ),
        (with_id("1.5"), "row 0: conversation_id is a number; write it as a non-empty string"),
        (
            with_id(r#""conv\nInjected: x""#),
            "row 0: conversation_id \"conv\\nInjected: x\" has non-printable or non-ASCII",
        ),
        (with_id(r#""conv\r\nInjected: x""#), "non-printable or non-ASCII"),
        (with_id(r#""conv\tbad""#), "non-printable or non-ASCII"),
        (with_id(r#""conv\u0000bad""#), "non-printable or non-ASCII"),
        (
            with_id(r#""conv-é""#),
            "row 0: conversation_id \"conv-é\" has non-printable or non-ASCII",
        ),
        (
            row("c1", 1, "user", r#""content": "Hi""#).replace(r#""turn": 1, "#, ""),
            "row 0: conversation \"c1\": a row has no turn",
        ),
        (
            row("c1", 1, "user", r#""content": "Hi""#).replace(r#""turn": 1"#, r#""turn": 1.5"#),
            "row 0: conversation \"c1\": turn 1.5 is not a whole number",
        ),
        (
            row("c1", 1, "user", r#""content": "Hi""#).replace(r#""turn": 1"#, r#""turn": "1""#),
            "row 0: conversation \"c1\": turn \"1\" is not a whole number",
        ),
    ];
    for (line, rule) in cases {
        refused(&line, std::slice::from_ref(&line), &[rule]);
    }
    let interleaved =
        [user(1, "c1t1"), row("c2", 1, "user", r#""content": "c2t1""#), assistant(2, "c1t2")];
    refused(
        "interleaved",
        &interleaved,
        &["conversation \"c1\": its rows are not consecutive (row 2 "],
    );
}

#[test]
fn a_request_key_the_reference_could_not_send_is_refused_with_its_turn() {
    let first = |rest: &str| row("c1", 1, "user", &format!(r#""content": "Hi", {rest}"#));
    let cases = [
        (first(r#""model": 5"#), "turn 1: model is a number; give a string"),
        (first(r#""stream": "yes""#), "turn 1: stream is a string; give true or false"),
        (
            first(r#""max_new_tokens": -1"#),
            "turn 1: max_new_tokens is -1; give a whole number of tokens",
        ),
        (first(r#""max_completion_tokens": 2.5"#), "turn 1: max_completion_tokens is 2.5"),
        (first(r#""max_tokens": "256""#), "turn 1: max_tokens is \"256\""),
        (
            first(r#""tool_results": [{"content": "x"}]"#),
            "turn 1: tool_results[0] has no tool_call_id",
        ),
    ];
    for (line, rule) in cases {
        refused(&line, &[line.clone(), assistant(2, "ok")], &["conversation \"c1\" ", rule]);
    }
    // The first user row's values, which later rows inherit, are refused at its own turn.
    let rows = [
        user(1, "go"),
        calling(2, ONE_CALL),
        tool(3, r#"[{"tool_call_id": "x", "content": "r"}]"#),
    ];
    let mut rows = rows.to_vec();
    rows[0] = first(r#""stream": 1"#);
    refused("inherited", &rows, &["conversation \"c1\" turn 1: stream is a number"]);
}
