//! What a client row sets in its request besides `messages`, as the reference's
//! `AgenticInferenceDataset.load` pre-bakes each sample and its chat adapter reads it: the
//! model, streaming, the output length, the other request keys, and the tool delay.

use serde_json::value::RawValue;

use super::json::Json;
use super::record::AgenticRecord;
use super::validate::{At, Group};
use crate::error::AppError;

/// The keys of the reference's chat request (`ChatCompletionRequest`, in its field order) that
/// a row sets for its turn, other than `model`, `messages`, `max_completion_tokens` and
/// `stream`, which `ClientTurn` holds apart. A row's own sampling keys win over the run's, as
/// the reference fills them only where a row lacks them.
pub const AGENTIC_REQUEST_COLUMNS: [&str; 15] = [
    "temperature",
    "seed",
    "top_p",
    "top_k",
    "repetition_penalty",
    "n",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "user",
    "chat_template",
    "chat_template_kwargs",
    "tools",
    "tool_choice",
];

/// The output-length keys of a client row, after the reference fills `max_new_tokens` from
/// the conversation's first user row; 0 stands for a 0 in the file, which the reference skips.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MaxTokens {
    /// The row's `max_new_tokens`, else its conversation's first user row's.
    pub max_new_tokens: Option<u64>,
    /// The row's own `max_completion_tokens`.
    pub max_completion_tokens: Option<u64>,
    /// The row's own `max_tokens`.
    pub max_tokens: Option<u64>,
}

impl MaxTokens {
    /// The output length the reference sends: the first non-zero of `max_new_tokens`,
    /// `max_completion_tokens` (the row's, else the run's `model_params.max_new_tokens`, which
    /// the reference fills in before a first user row's could be), `max_tokens`, else 128.
    pub fn resolve(&self, run_max_new_tokens: u64) -> u64 {
        let completion = self.max_completion_tokens.unwrap_or(run_max_new_tokens);
        [self.max_new_tokens, Some(completion), self.max_tokens]
            .into_iter()
            .flatten()
            .find(|n| *n != 0)
            .unwrap_or(128)
    }
}

/// What a conversation's client rows take from its first user row when they lack it.
#[derive(Debug, Default)]
pub(super) struct Inherited<'a> {
    max_new_tokens: Option<u64>,
    stream: Option<bool>,
    tools: Option<&'a Json>,
}

impl<'a> Inherited<'a> {
    /// The first user row's values; errors name that row.
    pub(super) fn read(group: &Group<'a>) -> Result<Inherited<'a>, AppError> {
        let Some(row) = group.first_user else { return Ok(Inherited::default()) };
        let at = At { id: &group.id, turn: row.turn };
        Ok(Inherited {
            max_new_tokens: tokens(at, row.record, "max_new_tokens")?,
            stream: stream(at, row.record)?,
            tools: row.record.get("tools"),
        })
    }
}

/// A client row's request settings.
#[derive(Debug)]
pub(super) struct TurnRequest {
    pub(super) delay_s: f64,
    pub(super) model: Option<String>,
    pub(super) stream: Option<bool>,
    pub(super) stream_inherited: Option<bool>,
    pub(super) max_tokens: MaxTokens,
    pub(super) columns: Vec<(String, Box<RawValue>)>,
}

/// The settings of client row `record`.
pub(super) fn turn_request(
    at: At<'_>,
    record: &AgenticRecord,
    inherited: &Inherited<'_>,
) -> Result<TurnRequest, AppError> {
    let model = match record.get("model") {
        None => None,
        Some(Json::Str(name)) => Some(name.clone()),
        Some(other) => return Err(at.err(format!("model is {}; give a string", other.kind()))),
    };
    let max_tokens = MaxTokens {
        max_new_tokens: tokens(at, record, "max_new_tokens")?.or(inherited.max_new_tokens),
        max_completion_tokens: tokens(at, record, "max_completion_tokens")?,
        max_tokens: tokens(at, record, "max_tokens")?,
    };
    let mut columns = Vec::new();
    for key in AGENTIC_REQUEST_COLUMNS {
        let value = match (record.get(key), key) {
            (None, "tools") => inherited.tools,
            (value, _) => value,
        };
        if let Some(value) = value {
            let raw = RawValue::from_string(value.compact_text())
                .map_err(|e| at.err(format!("{key} cannot be written as JSON: {e}")))?;
            columns.push((key.to_string(), raw));
        }
    }
    Ok(TurnRequest {
        delay_s: delay_s(record.get("delay_seconds")),
        model,
        stream: stream(at, record)?,
        stream_inherited: inherited.stream,
        max_tokens,
        columns,
    })
}

/// An output-length column: a whole number of tokens, or absent.
fn tokens(at: At<'_>, record: &AgenticRecord, key: &str) -> Result<Option<u64>, AppError> {
    let value = record.get(key);
    let whole = match value {
        None => return Ok(None),
        Some(Json::Int(n)) => u64::try_from(*n).ok(),
        Some(Json::Float(f)) if f.fract() == 0.0 && (0.0..1e15).contains(f) => Some(*f as u64),
        Some(_) => None,
    };
    whole.map(Some).ok_or_else(|| {
        let shown = value.map_or(String::new(), Json::compact_text);
        at.err(format!("{key} is {shown}; give a whole number of tokens"))
    })
}

fn stream(at: At<'_>, record: &AgenticRecord) -> Result<Option<bool>, AppError> {
    match record.get("stream") {
        None => Ok(None),
        Some(Json::Bool(on)) => Ok(Some(*on)),
        Some(other) => Err(at.err(format!("stream is {}; give true or false", other.kind()))),
    }
}

/// `delay_seconds` as the reference reads it (`float(value)`, 0 when that fails); only a finite
/// positive delay counts.
fn delay_s(value: Option<&Json>) -> f64 {
    let delay = match value {
        Some(Json::Int(n)) => *n as f64,
        Some(Json::Float(f)) => *f,
        Some(Json::Bool(b)) => f64::from(u8::from(*b)),
        Some(Json::Str(s)) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    };
    if delay.is_finite() && delay > 0.0 {
        delay
    } else {
        0.0
    }
}
