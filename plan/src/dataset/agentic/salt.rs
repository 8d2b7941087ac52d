//! The reference's trajectory salt (`agentic_inference.enable_salt`,
//! `_messages_with_trajectory_salt`): the system prompt becomes
//! `[salt: R]\n\n{prompt}\n\n[salt: C]`, R and C the hex of a 2-byte BLAKE2b of the repeat's
//! number and of the conversation's id, so repeats of a trajectory share no cached prefix.

use blake2::digest::consts::U2;
use blake2::{Blake2b, Digest};

use super::{AgenticConversations, ClientTurn, Conversation};
use crate::error::AppError;

/// `hashlib.blake2b(text.encode(), digest_size=2).hexdigest()`: four lowercase hex digits.
pub fn salt_tag(text: &str) -> String {
    let digest = Blake2b::<U2>::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn no_system_prompt(conversation: &Conversation, turn: u32) -> AppError {
    AppError::Input(format!(
        "agentic_inference.enable_salt requires a system prompt for every conversation; \
         conversation {:?} turn {turn} has none: give a row of it a `system` prompt, or set \
         enable_salt to false",
        conversation.id
    ))
}

impl Conversation {
    /// `turn`'s messages with the salt of repeat `repeat_id` around the system prompt, as the
    /// reference sends them under `enable_salt`; refused when the conversation has no system
    /// prompt. `turn` is one of this conversation's `turns`.
    pub fn salted_messages_json(
        &self,
        turn: &ClientTurn,
        repeat_id: u64,
    ) -> Result<Vec<u8>, AppError> {
        let Some(system) = &self.system_prompt else {
            return Err(no_system_prompt(self, turn.turn));
        };
        let head = format!("[salt: {}]\\n\\n", salt_tag(&repeat_id.to_string()));
        let tail = format!("\\n\\n[salt: {}]", salt_tag(&self.id));
        let prefix = &self.history_json[..turn.messages_end];
        let mut out = Vec::with_capacity(prefix.len() + head.len() + tail.len() + 1);
        out.extend_from_slice(&prefix[..system.start]);
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(&prefix[system.clone()]);
        out.extend_from_slice(tail.as_bytes());
        out.extend_from_slice(&prefix[system.end..]);
        out.push(b']');
        Ok(out)
    }
}

impl AgenticConversations {
    /// Refuses, before anything is sent, a dataset that `enable_salt` cannot salt: one whose
    /// conversation has no system prompt (the reference's `_validate_salt_system_prompts`).
    pub fn check_salt(&self) -> Result<(), AppError> {
        match self.conversations.iter().find(|c| c.system_prompt.is_none()) {
            Some(conversation) => {
                let turn = conversation.turns.first().map_or(1, |t| t.turn);
                Err(no_system_prompt(conversation, turn))
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{build, row};
    use super::*;

    /// `hashlib.blake2b(s.encode(), digest_size=2).hexdigest()`, from Python 3.
    #[test]
    fn tags_match_python_s_blake2b_of_two_bytes() {
        let python = [
            ("0", "795e"),
            ("1", "4461"),
            ("7", "b0ae"),
            ("123456789", "1209"),
            ("c1", "6d82"),
            ("conv_001", "74ce"),
            ("sess-1", "6a7e"),
            ("django__django-16899", "edc0"),
            ("", "b1fe"),
        ];
        for (text, hex) in python {
            assert_eq!(salt_tag(text), hex, "{text:?}");
        }
    }

    /// The bytes the reference sends for turn 1 of `sess-1`, repeat 7 (from its
    /// `_messages_with_trajectory_salt` and msgspec).
    #[test]
    fn the_salt_wraps_the_system_prompt_as_the_reference_does() {
        let first = r#"{"conversation_id": "sess-1", "turn": 1, "role": "user", "content": "Hi", "system": "Be \"brief\".\n"}"#;
        let convs = build(&[first, &row("sess-1", 2, "assistant", r#""content": "Yo""#)]).unwrap();
        let c = &convs.conversations[0];
        let salted = String::from_utf8(c.salted_messages_json(&c.turns[0], 7).unwrap()).unwrap();
        assert_eq!(
            salted,
            r#"[{"role":"system","content":"[salt: b0ae]\n\nBe \"brief\".\n\n\n[salt: 6a7e]"},{"role":"user","content":"Hi"}]"#
        );
        // Unsalted, the turn is unchanged; salted, it parses to the salted prompt.
        assert_eq!(
            c.messages_json(&c.turns[0]),
            br#"[{"role":"system","content":"Be \"brief\".\n"},{"role":"user","content":"Hi"}]"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&salted).unwrap();
        assert_eq!(parsed[0]["content"], "[salt: b0ae]\n\nBe \"brief\".\n\n\n[salt: 6a7e]");
        assert!(convs.check_salt().is_ok());
    }

    #[test]
    fn a_conversation_without_a_system_prompt_cannot_be_salted() {
        let rows = [
            row("c1", 1, "user", r#""content": "Hi", "system": "S""#),
            row("c2", 1, "user", r#""content": "Hi", "system": """#),
        ];
        let convs = build(&[&rows[0], &rows[1]]).unwrap();
        let expected = "agentic_inference.enable_salt requires a system prompt for every \
                        conversation; conversation \"c2\" turn 1 has none";
        let err = convs.check_salt().unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains(expected), "{err}");
        let c2 = &convs.conversations[1];
        let err = c2.salted_messages_json(&c2.turns[0], 0).unwrap_err();
        assert!(err.to_string().contains(expected), "{err}");
    }
}
