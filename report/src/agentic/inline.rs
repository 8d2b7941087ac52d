//! The `agentic_inference_inline` scorer's view of a run: each issued turn (its conversation
//! without the `__repeat_<n>` suffix, its repeat, its client turn) and the model's answer, read
//! from events.jsonl as the reference's scorer reads it (`sample.issued` lines give the turns,
//! `sample.complete` lines joined by `sample_uuid` give the answers; a null `data` is a turn
//! without output).

use std::collections::HashMap;
use std::path::Path;

use loadgen_accuracy::agentic_inline::{IssuedTurn, ModelTurn};
use loadgen_plan::error::AppError;

use crate::replay::read::{self, Event, ModelOutput};

/// Every issued turn of `dir`'s events.jsonl with its answer, in file order; the log is read
/// by the replay's own line parser (`read::for_each_event`), under its checks.
pub fn read_issued_turns(dir: &Path) -> Result<Vec<IssuedTurn>, AppError> {
    let path = dir.join("events.jsonl");
    let failed = |why: String| {
        AppError::Execution(format!(
            "{} ({why}); agentic_inference_inline cannot be scored",
            path.display()
        ))
    };
    let reader = read::open(&path).map_err(|e| failed(format!("cannot read it: {e}")))?;
    let mut issued: Vec<(u128, IssuedTurn)> = Vec::new();
    let mut answers: HashMap<u128, ModelTurn> = HashMap::new();
    read::for_each_event(reader, |event, line| {
        match event {
            Event::Issued { uuid, label: Some((id, turn)), .. } => {
                let (conversation_id, repeat) = split_repeat(&id);
                let t = IssuedTurn {
                    conversation_id: conversation_id.into(),
                    repeat,
                    turn,
                    output: None,
                };
                issued.push((uuid, t));
            }
            // A later line with an answer wins over one without, as the reference keeps it.
            Event::Complete(c) => {
                if let Some(output) = &c.output {
                    let answer =
                        model_turn(output).map_err(|what| read::LineError { line, what })?;
                    answers.insert(c.uuid, answer);
                }
            }
            _ => {}
        }
        Ok(())
    })
    .map_err(|e| match e {
        read::ReadError::Io(e) => failed(e.to_string()),
        read::ReadError::Line(e) => failed(e.to_string()),
    })?;
    Ok(issued
        .into_iter()
        .map(|(uuid, mut t)| {
            t.output = answers.remove(&uuid);
            t
        })
        .collect())
}

/// `conv__repeat_3` → (`conv`, 3); an id without the suffix is repeat 1.
fn split_repeat(id: &str) -> (&str, u64) {
    if let Some(at) = id.rfind("__repeat_") {
        let digits = &id[at + "__repeat_".len()..];
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(n) = digits.parse() {
                return (&id[..at], n);
            }
        }
    }
    (id, 1)
}

/// The answer's content, reasoning and merged tool calls (`as_message_parts`).
fn model_turn(output: &ModelOutput<'_>) -> Result<ModelTurn, String> {
    let tool_calls = match &output.tool_calls {
        Some(json) => {
            Some(serde_json::from_str(json).map_err(|e| format!("tool calls do not parse: {e}"))?)
        }
        None => None,
    };
    Ok(ModelTurn {
        content: output.output.whole().into_owned(),
        reasoning: output
            .reasoning
            .as_ref()
            .map(|r| r.whole().into_owned())
            .filter(|r| !r.is_empty()),
        tool_calls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repeat_suffix_is_split_off() {
        assert_eq!(split_repeat("c1__repeat_3"), ("c1", 3));
        assert_eq!(split_repeat("c1"), ("c1", 1));
        assert_eq!(split_repeat("c1__repeat_x"), ("c1__repeat_x", 1));
    }

    #[test]
    fn issued_turns_are_joined_with_their_answers() {
        let dir = std::env::temp_dir().join(format!("inline-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let calls =
            r#"[{"type":"function","function":{"arguments":"{\"cmd\":\"ls\"}","name":"bash"}}]"#;
        let lines = [
            r#"{"event_type":"session.started","timestamp_ns":1,"sample_uuid":"","conversation_id":"","turn":null,"data":null}"#.to_string(),
            r#"{"event_type":"sample.issued","timestamp_ns":2,"sample_uuid":"0000000000000000000000000000000a","conversation_id":"c1__repeat_2","turn":1,"data":null}"#.to_string(),
            r#"{"event_type":"sample.issued","timestamp_ns":2,"sample_uuid":"0000000000000000000000000000000b","conversation_id":"c1__repeat_2","turn":3,"data":null}"#.to_string(),
            format!(r#"{{"event_type":"sample.complete","timestamp_ns":3,"sample_uuid":"0000000000000000000000000000000a","conversation_id":"c1__repeat_2","turn":1,"data":["TextModelOutput","hi",["th","ink"],{calls}]}}"#),
            r#"{"event_type":"sample.complete","timestamp_ns":4,"sample_uuid":"0000000000000000000000000000000b","conversation_id":"c1__repeat_2","turn":3,"data":null}"#.to_string(),
        ];
        std::fs::write(dir.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
        let turns = read_issued_turns(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(turns.len(), 2);
        assert_eq!(
            (turns[0].conversation_id.as_str(), turns[0].repeat, turns[0].turn),
            ("c1", 2, 1)
        );
        let answer = turns[0].output.as_ref().unwrap();
        assert_eq!((answer.content.as_str(), answer.reasoning.as_deref()), ("hi", Some("think")));
        assert_eq!(answer.tool_calls.as_ref().unwrap()[0]["function"]["name"], "bash");
        assert!(turns[1].output.is_none());
    }
}
