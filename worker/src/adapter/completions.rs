//! OpenAI `/v1/completions`: `choices[0].text`; a body without `usage` is a success without
//! server counts (a reference defect fixed, SPEC §9).

use super::accumulator::Accumulator;
use super::fields::FinishField;
use super::openai::{on_body_plain, Frame};

/// A non-streaming completions body; the plain shape takes the hand scanner, the rest serde.
pub(crate) fn on_body(acc: &mut Accumulator, json: &[u8]) -> bool {
    on_body_plain(acc, json, |frame| frame.text).unwrap_or_else(|| on_body_serde(acc, json))
}

/// `on_body` through serde_json alone.
pub(crate) fn on_body_serde(acc: &mut Accumulator, json: &[u8]) -> bool {
    let Ok(frame) = serde_json::from_slice::<Frame<'_>>(json) else { return false };
    if acc.note_error(&frame.error, frame.error_shape(), json) {
        return true;
    }
    let Some(choice) = &frame.choices.0 else { return false };
    if let Some(text) = choice.text.as_deref() {
        acc.append(text.as_bytes());
    }
    if let Some(FinishField(reason)) = choice.finish_reason {
        acc.finish = reason;
    }
    if let Some(usage) = &frame.usage {
        acc.usage.apply(usage);
    }
    true
}

#[cfg(test)]
mod tests {
    use loadgen_wire::FinishReason;

    use crate::adapter::Accumulator;
    use crate::request::ApiType;

    #[test]
    fn body_with_and_without_usage() {
        let mut acc = Accumulator::new(ApiType::OpenAiCompletions, 1 << 20);
        assert!(acc.on_body(br#"{"id":"c","choices":[{"text":"xyz","index":0,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":3}}"#));
        assert_eq!(acc.output, b"xyz");
        assert_eq!(acc.finish, FinishReason::Length);
        assert_eq!(acc.usage.completion_tokens, Some(3));
        acc.reset();
        assert!(acc.on_body(br#"{"id":"c","choices":[{"text":"xyz","finish_reason":"stop"}]}"#));
        assert_eq!((acc.usage.prompt_tokens, acc.usage.completion_tokens), (None, None));
        assert_eq!(acc.usage.first_bad, None);
    }
}
