//! What a client turn sends, checked against the bytes the reference sends: the reference's own
//! unit cases (`test_agentic_inference_dataset.py`, translated) and a tool conversation written
//! out by hand.

use super::*;

/// The conversations of JSON Lines `lines`, read as a file `t.jsonl`.
pub(super) fn build(lines: &[&str]) -> Result<AgenticConversations, AppError> {
    let records: Vec<AgenticRecord> =
        lines.iter().map(|line| AgenticRecord::parse(line).unwrap()).collect();
    build_conversations(&records, "t.jsonl")
}

/// A row of conversation `id`, with `rest` (`"content": …, …`) after its three keys.
pub(super) fn row(id: &str, turn: u32, role: &str, rest: &str) -> String {
    let rest = if rest.is_empty() { String::new() } else { format!(", {rest}") };
    format!(r#"{{"conversation_id": "{id}", "turn": {turn}, "role": "{role}"{rest}}}"#)
}

fn lines(rows: &[String]) -> Vec<&str> {
    rows.iter().map(String::as_str).collect()
}

fn text(conversation: &Conversation, i: usize) -> String {
    String::from_utf8(conversation.messages_json(&conversation.turns[i])).unwrap()
}

/// The reference's `valid_agentic_inference_jsonl` fixture.
fn reference_fixture() -> Vec<String> {
    vec![
        row(
            "conv_001",
            1,
            "user",
            r#""content": "Hello, how are you?", "system": "You are a helpful assistant""#,
        ),
        row("conv_001", 2, "assistant", r#""content": "I'm doing well, thank you!""#),
        row("conv_001", 3, "user", r#""content": "What can you help me with?""#),
        row("conv_002", 1, "user", r#""content": "What's the weather?""#),
        row(
            "conv_002",
            2,
            "assistant",
            r#""content": "I don't have access to real-time weather data.""#,
        ),
    ]
}

#[test]
fn the_reference_fixture_gives_three_client_turns_in_two_conversations() {
    let convs = build(&lines(&reference_fixture())).unwrap();
    assert_eq!(convs.conversations.len(), 2);
    assert_eq!(convs.client_turn_count(), 3);
    assert_eq!(convs.max_turns_per_conversation(), 3);
    let [a, b] = &convs.conversations[..] else { panic!() };
    assert_eq!(
        (a.id.as_str(), a.turns.len(), b.id.as_str(), b.turns.len()),
        ("conv_001", 2, "conv_002", 1)
    );
    assert_eq!(a.turns.iter().map(|t| t.turn).collect::<Vec<_>>(), [1, 3]);
    assert!(a.turns.iter().all(|t| t.role == ClientRole::User));
    assert!(a.has_system_prompt() && !b.has_system_prompt());
    assert_eq!(
        text(a, 1),
        r#"[{"role":"system","content":"You are a helpful assistant"},{"role":"user","content":"Hello, how are you?"},{"role":"assistant","content":"I'm doing well, thank you!"},{"role":"user","content":"What can you help me with?"}]"#
    );
    // No assistant row precedes conv_002's first turn, and nothing of conv_001 bleeds in.
    assert_eq!(text(b, 0), r#"[{"role":"user","content":"What's the weather?"}]"#);
    let range = a.system_prompt.clone().unwrap();
    assert_eq!(&a.history_json[range], b"You are a helpful assistant");
}

#[test]
fn conversations_of_several_lengths_count_as_the_reference_counts_them() {
    let rows = [
        row("c1", 1, "user", r#""content": "msg1""#),
        row("c1", 2, "assistant", r#""content": "resp1""#),
        row("c1", 3, "user", r#""content": "msg1b""#),
        row("c2", 1, "user", r#""content": "msg2""#),
        row("c2", 2, "assistant", r#""content": "resp2""#),
        row("c2", 3, "user", r#""content": "msg3""#),
        row("c2", 4, "assistant", r#""content": "resp3""#),
        row("c3", 1, "user", r#""content": "msg4""#),
        row("c3", 2, "assistant", r#""content": "resp4""#),
    ];
    let convs = build(&lines(&rows)).unwrap();
    assert_eq!(convs.client_turn_count(), 5);
    assert_eq!(convs.max_turns_per_conversation(), 4);
    let per_conversation: Vec<(&str, usize)> =
        convs.conversations.iter().map(|c| (c.id.as_str(), c.turns.len())).collect();
    assert_eq!(per_conversation, [("c1", 2), ("c2", 2), ("c3", 1)]);
    // Single-turn conversations, with no assistant reply, are client turns too.
    let rows = [
        row("c1", 1, "user", r#""content": "Single turn""#),
        row("c2", 1, "user", r#""content": "Another""#),
    ];
    let convs = build(&lines(&rows)).unwrap();
    assert_eq!(convs.client_turn_count(), 2);
    assert_eq!(text(&convs.conversations[1], 0), r#"[{"role":"user","content":"Another"}]"#);
}

#[test]
fn rows_out_of_turn_order_are_sorted_and_the_metadata_line_is_skipped() {
    let rows = [
        r#"{"_type": "dataset_metadata", "version": 1}"#.to_string(),
        row("c1", 3, "user", r#""content": "C""#),
        row("c1", 1, "user", r#""content": "A""#),
        row("c1", 2, "assistant", r#""content": "B""#),
    ];
    let convs = build(&lines(&rows)).unwrap();
    let c = &convs.conversations[0];
    assert_eq!(c.turns.iter().map(|t| t.turn).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(text(c, 0), r#"[{"role":"user","content":"A"}]"#);
    assert_eq!(
        text(c, 1),
        r#"[{"role":"user","content":"A"},{"role":"assistant","content":"B"},{"role":"user","content":"C"}]"#
    );
    for empty in [&[][..], &[r#"{"_type": "dataset_metadata"}"#][..]] {
        let err = build(empty).unwrap_err().to_string();
        assert!(err.contains("dataset t.jsonl has no conversation rows"), "{err}");
    }
}

/// A tool conversation with its keys in odd orders, spaces, `\u` escapes and a float argument.
const TOOL_CONVERSATION: [&str; 6] = [
    r#"{"turn": 1, "conversation_id": "sess-1", "content": "List /tmp, then read a.txt.", "role": "user", "system": "You are a coding agent.\nBe brief.", "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "required": ["cmd"], "properties": {"cmd": {"type": "string"}}}}}], "max_new_tokens": 64, "temperature": 0.5}"#,
    r#"{"conversation_id": "sess-1", "turn": 2, "role": "assistant", "reasoning_content": "Two calls.", "content": null, "tool_calls": [{"type": "function", "id": "call_0", "function": {"arguments": "{\"cmd\": \"ls /tmp\"}", "name": "bash"}}, {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": {"cmd": "cat a.txt", "timeout_s": 2.50}}}]}"#,
    r#"{"conversation_id": "sess-1", "turn": 3, "role": "tool", "tool_results": [{"content": "a.txt\nb.txt", "tool_call_id": "call_0"}, {"tool_call_id": "call_1", "content": "caf\u00e9 \"ok\""}], "delay_seconds": 1.5}"#,
    r#"{"conversation_id": "sess-1", "turn": 4, "role": "assistant", "content": "Done: caf\u00e9."}"#,
    r#"{"conversation_id": "sess-1", "turn": 5, "role": "user", "content": "Thanks", "name": "bob", "stream": true}"#,
    r#"{"conversation_id": "sess-1", "turn": 6, "role": "assistant", "content": "Bye"}"#,
];

const TURN_1: &str = r#"[{"role":"system","content":"You are a coding agent.\nBe brief."},{"role":"user","content":"List /tmp, then read a.txt."}]"#;
const TURN_3_ADDS: &str = r#",{"role":"assistant","tool_calls":[{"type":"function","id":"call_0","function":{"arguments":"{\"cmd\": \"ls /tmp\"}","name":"bash"}},{"id":"call_1","type":"function","function":{"name":"bash","arguments":{"cmd":"cat a.txt","timeout_s":2.5}}}],"reasoning_content":"Two calls."},{"role":"tool","content":"a.txt\nb.txt","tool_call_id":"call_0"},{"role":"tool","content":"café \"ok\"","tool_call_id":"call_1"}]"#;
const TURN_5_ADDS: &str = r#",{"role":"assistant","content":"Done: café."},{"role":"user","content":"Thanks","name":"bob"}]"#;

/// The bytes msgspec writes for the reference's pre-built messages of each client turn: the
/// message keys in `ChatMessage`'s order, a tool-calling assistant's null content left out,
/// each tool result its own message, nested keys in the file's order, UTF-8 unescaped.
#[test]
fn a_tool_conversation_sends_exactly_these_messages() {
    let convs = build(&TOOL_CONVERSATION).unwrap();
    let c = &convs.conversations[0];
    assert_eq!(
        c.turns.iter().map(|t| (t.turn, t.role)).collect::<Vec<_>>(),
        [(1, ClientRole::User), (3, ClientRole::Tool), (5, ClientRole::User)]
    );
    let turn_3 = format!("{}{TURN_3_ADDS}", &TURN_1[..TURN_1.len() - 1]);
    let turn_5 = format!("{}{TURN_5_ADDS}", &turn_3[..turn_3.len() - 1]);
    assert_eq!(text(c, 0), TURN_1);
    assert_eq!(text(c, 1), turn_3);
    assert_eq!(text(c, 2), turn_5);
    // The buffer ends at the last client turn: the closing assistant row is never sent.
    assert_eq!(c.history_json.len() + 1, turn_5.len());
    assert_eq!(convs.max_turns_per_conversation(), 6);
}

#[test]
fn each_turn_carries_its_request_keys_and_inherits_the_first_user_row_s() {
    let convs = build(&TOOL_CONVERSATION).unwrap();
    let [first, tool, last] = &convs.conversations[0].turns[..] else { panic!() };
    let columns = |t: &ClientTurn| -> Vec<(String, String)> {
        t.columns.iter().map(|(k, v)| (k.clone(), v.get().to_string())).collect()
    };
    let tools = r#"[{"type":"function","function":{"name":"bash","parameters":{"type":"object","required":["cmd"],"properties":{"cmd":{"type":"string"}}}}}]"#;
    assert_eq!(
        columns(first),
        [("temperature".into(), "0.5".into()), ("tools".into(), tools.into())]
    );
    // A tool row takes tools and max_new_tokens from the first user row, not its sampling keys.
    assert_eq!(columns(tool), [("tools".to_string(), tools.to_string())]);
    assert_eq!((tool.max_output_tokens(1024), tool.delay_s), (64, 1.5));
    assert_eq!((first.delay_s, last.max_output_tokens(1024)), (0.0, 64));
    // stream: the row's own, else true under streaming on, else the first user row's.
    assert_eq!((last.stream(false), first.stream(false), first.stream(true)), (true, false, true));
    assert_eq!(first.model, None);
}

/// The reference's `test_agentic_inference_dataset_additional_fields` and
/// `..._openai_field_forwarding`: a row's model, output length and request keys.
#[test]
fn a_row_s_model_output_length_and_request_keys_are_kept() {
    let rows = [
        row(
            "c1",
            1,
            "user",
            r#""content": "Hello", "model": "gpt-4", "max_new_tokens": 256, "temperature": 0.7, "n": 3, "name": "Alice", "user": "user_12345", "logit_bias": {"50256": -100}, "chat_template": "custom_template", "tool_choice": "auto""#,
        ),
        row("c1", 2, "assistant", r#""content": "Hi""#),
    ];
    let convs = build(&lines(&rows)).unwrap();
    let c = &convs.conversations[0];
    let turn = &c.turns[0];
    assert_eq!((turn.model.as_deref(), turn.max_output_tokens(1024)), (Some("gpt-4"), 256));
    let keys: Vec<&str> = turn.columns.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["temperature", "n", "logit_bias", "user", "chat_template", "tool_choice"]);
    assert_eq!(turn.columns[2].1.get(), r#"{"50256":-100}"#);
    // `name` goes on the message, as the reference's message builder puts it.
    assert_eq!(text(c, 0), r#"[{"role":"user","content":"Hello","name":"Alice"}]"#);
}

#[test]
fn the_output_length_follows_the_reference_s_order() {
    let cases = [
        (MaxTokens::default(), 1024),
        (
            MaxTokens {
                max_new_tokens: Some(10),
                max_completion_tokens: Some(20),
                max_tokens: Some(30),
            },
            10,
        ),
        (
            MaxTokens {
                max_new_tokens: None,
                max_completion_tokens: Some(20),
                max_tokens: Some(30),
            },
            20,
        ),
        // 0 is skipped, as the reference's `or` skips it; the run's value comes before max_tokens.
        (
            MaxTokens {
                max_new_tokens: Some(0),
                max_completion_tokens: None,
                max_tokens: Some(30),
            },
            1024,
        ),
        (
            MaxTokens {
                max_new_tokens: None,
                max_completion_tokens: Some(0),
                max_tokens: Some(30),
            },
            30,
        ),
        (MaxTokens { max_new_tokens: None, max_completion_tokens: Some(0), max_tokens: None }, 128),
    ];
    for (max_tokens, expected) in cases {
        assert_eq!(max_tokens.resolve(1024), expected, "{max_tokens:?}");
    }
}

/// The reference's `_make_tool_sequence_df`: user, a tool-calling assistant with a null
/// content, a tool result, a closing assistant, a second user turn.
fn reference_tool_sequence() -> Vec<String> {
    vec![
        row("c1", 1, "user", r#""content": "What is the weather?", "system": "Be helpful""#),
        row(
            "c1",
            2,
            "assistant",
            r#""content": null, "tool_calls": [{"id": "call_c1_0", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]"#,
        ),
        row(
            "c1",
            3,
            "tool",
            r#""tool_results": [{"tool_call_id": "call_c1_0", "content": "{\"temp\": 22}"}]"#,
        ),
        row("c1", 4, "assistant", r#""content": "The weather is 22°C.""#),
        row("c1", 5, "user", r#""content": "Thanks!""#),
    ]
}

/// `test_build_metadata_pre_built_messages` and the BUG 1 / BUG 2 regressions: the tool row
/// expands with its call's id, and the calling assistant's null content is not sent (msgspec
/// leaves a `None` field out).
#[test]
fn the_reference_s_tool_sequence_pre_builds_these_messages() {
    let convs = build(&lines(&reference_tool_sequence())).unwrap();
    let c = &convs.conversations[0];
    assert_eq!(
        c.turns.iter().map(|t| (t.turn, t.role)).collect::<Vec<_>>(),
        [(1, ClientRole::User), (3, ClientRole::Tool), (5, ClientRole::User)]
    );
    let t1 = r#"[{"role":"system","content":"Be helpful"},{"role":"user","content":"What is the weather?"}]"#;
    let t3 = r#",{"role":"assistant","tool_calls":[{"id":"call_c1_0","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","content":"{\"temp\": 22}","tool_call_id":"call_c1_0"}]"#;
    let t5 = r#",{"role":"assistant","content":"The weather is 22°C."},{"role":"user","content":"Thanks!"}]"#;
    let t3 = format!("{}{t3}", &t1[..t1.len() - 1]);
    let t5 = format!("{}{t5}", &t3[..t3.len() - 1]);
    assert_eq!((text(c, 0), text(c, 1), text(c, 2)), (t1.to_string(), t3, t5));
}

/// `test_prior_parallel_tool_results_expand_to_multiple_messages` and
/// `test_pre_built_messages_parallel_tools`.
#[test]
fn parallel_tool_results_expand_to_one_message_each() {
    let calls = r#"[{"id": "c_0", "type": "function", "function": {"name": "f1", "arguments": "{}"}}, {"id": "c_1", "type": "function", "function": {"name": "f2", "arguments": "{}"}}]"#;
    let rows = [
        row("c1", 1, "user", r#""content": "Go""#),
        row("c1", 2, "assistant", &format!(r#""content": null, "tool_calls": {calls}"#)),
        row(
            "c1",
            3,
            "tool",
            r#""tool_results": [{"tool_call_id": "c_0", "content": "r1"}, {"tool_call_id": "c_1", "content": "r2"}]"#,
        ),
        row("c1", 4, "assistant", r#""content": "Done""#),
        row("c1", 5, "user", r#""content": "Ok""#),
    ];
    let convs = build(&lines(&rows)).unwrap();
    let c = &convs.conversations[0];
    assert_eq!(text(c, 0), r#"[{"role":"user","content":"Go"}]"#);
    let tools = r#"{"role":"tool","content":"r1","tool_call_id":"c_0"},{"role":"tool","content":"r2","tool_call_id":"c_1"}"#;
    assert!(text(c, 1).ends_with(&format!("]}},{tools}]")), "{}", text(c, 1));
    assert!(
        text(c, 2).contains(&format!("{tools},{{\"role\":\"assistant\",\"content\":\"Done\"}}"))
    );
    assert_eq!(text(c, 2).matches("\"role\":\"tool\"").count(), 2);
}

/// `test_tool_calls_not_in_sample_dict`: the reference accepts a user row's `tool_calls`
/// unchecked and puts them on its message; `delay_seconds` reads as `float()` reads it.
#[test]
fn a_user_row_s_tool_calls_go_on_its_message_and_delays_read_as_floats() {
    let rows = [
        row(
            "c1",
            1,
            "user",
            r#""content": "Go", "tool_calls": [{"id": "bad", "type": "function", "function": {"name": "f"}}], "delay_seconds": "2.5""#,
        ),
        row("c1", 2, "assistant", r#""content": "Done""#),
        row("c1", 3, "user", r#""content": "Again", "delay_seconds": -1"#),
        row("c1", 4, "assistant", r#""content": "Done""#),
        row("c1", 5, "user", r#""content": "More", "delay_seconds": "soon""#),
    ];
    let convs = build(&lines(&rows)).unwrap();
    let c = &convs.conversations[0];
    assert_eq!(
        text(c, 0),
        r#"[{"role":"user","content":"Go","tool_calls":[{"id":"bad","type":"function","function":{"name":"f"}}]}]"#
    );
    let delays: Vec<f64> = c.turns.iter().map(|t| t.delay_s).collect();
    assert_eq!(delays, [2.5, 0.0, 0.0]);
}

#[test]
fn records_from_another_reader_build_the_same_turns_with_sorted_nested_keys() {
    let value = serde_json::json!({"conversation_id": "c1", "turn": 1, "role": "user",
        "content": [{"type": "text", "text": "hi"}], "system": "s"});
    let records = [AgenticRecord::from_map(value.as_object().unwrap())];
    let convs = build_conversations(&records, "t.parquet").unwrap();
    assert_eq!(
        text(&convs.conversations[0], 0),
        r#"[{"role":"system","content":"s"},{"role":"user","content":[{"text":"hi","type":"text"}]}]"#
    );
}
