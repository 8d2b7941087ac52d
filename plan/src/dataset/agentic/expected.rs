//! The recorded assistant turns an agentic dataset holds, as the `agentic_inference_inline`
//! scorer's ground truth: each `user` or `tool` row followed (in turn order) by an
//! `assistant` row expects that answer, keyed by the client row's turn.

use std::collections::BTreeMap;

use loadgen_accuracy::agentic_inline::ExpectedTurn;
use serde_json::Value;

use super::json::Json;
use super::record::{conversation_id, turn_number, AgenticRecord};

/// Every expected assistant turn of `records` (rows without a readable id or turn are left
/// out, as the build of the conversations refuses them anyway).
pub fn expected_turns(records: &[AgenticRecord]) -> Vec<ExpectedTurn> {
    let mut by_conversation: BTreeMap<String, Vec<(i64, &AgenticRecord)>> = BTreeMap::new();
    for record in records.iter().filter(|r| !r.is_metadata()) {
        let Ok(id) = conversation_id(record) else { continue };
        let Ok(turn) = turn_number(record, &id) else { continue };
        by_conversation.entry(id).or_default().push((turn, record));
    }
    let mut out = Vec::new();
    for (id, mut rows) in by_conversation {
        // A stable sort, as pandas' sort of the rows by turn.
        rows.sort_by_key(|(turn, _)| *turn);
        for pair in rows.windows(2) {
            let ((client_turn, client), (assistant_turn, answer)) = (pair[0], pair[1]);
            if !matches!(client.role(), Some("user" | "tool")) || answer.role() != Some("assistant")
            {
                continue;
            }
            let (Ok(client_turn), Ok(assistant_turn)) =
                (u32::try_from(client_turn), u32::try_from(assistant_turn))
            else {
                continue;
            };
            out.push(ExpectedTurn {
                conversation_id: id.clone(),
                client_turn,
                assistant_turn,
                intent_codes: value(answer.get("intent_codes")).and_then(|v| match v {
                    Value::Array(items) => Some(items),
                    _ => None,
                }),
                tool_calls: value(answer.get("tool_calls")),
            });
        }
    }
    out
}

/// A column's value as a `serde_json::Value` (key order is not needed to score).
fn value(json: Option<&Json>) -> Option<Value> {
    serde_json::from_str(&json?.compact_text()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_client_row_expects_the_assistant_row_after_it() {
        let rows = [
            r#"{"conversation_id":"c1","turn":3,"role":"tool","tool_results":[]}"#,
            r#"{"conversation_id":"c1","turn":1,"role":"user","content":"go"}"#,
            r#"{"conversation_id":"c1","turn":2,"role":"assistant","tool_calls":[{"function":{"name":"bash","arguments":"{\"cmd\":\"ls\"}"}}]}"#,
            r#"{"conversation_id":"c1","turn":4,"role":"assistant","content":"done","intent_codes":["I001"]}"#,
            r#"{"conversation_id":"c1","turn":5,"role":"user","content":"more"}"#,
            r#"{"conversation_id":7,"turn":1,"role":"user","content":"x"}"#,
            r#"{"conversation_id":7,"turn":2,"role":"user","content":"y"}"#,
        ];
        let records: Vec<AgenticRecord> =
            rows.iter().map(|r| AgenticRecord::parse(r).unwrap()).collect();
        let turns = expected_turns(&records);
        assert_eq!(turns.len(), 2, "{turns:?}");
        assert_eq!((turns[0].client_turn, turns[0].assistant_turn), (1, 2));
        assert_eq!(turns[0].tool_calls.as_ref().unwrap()[0]["function"]["name"], "bash");
        assert_eq!((turns[1].client_turn, turns[1].assistant_turn), (3, 4));
        assert_eq!(turns[1].intent_codes, Some(vec![Value::from("I001")]));
    }
}
