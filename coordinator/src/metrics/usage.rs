//! The usage rule: which server counts are kept, and how a sample's usage is classified.
//!
//! The aggregator, the report and the post-run tools all call [`classify_usage`];
//! nothing else decides whether a sample "has usage".

/// The largest server token count kept (the reference's `TOKEN_HDR_HIGH`).
pub const SERVER_COUNT_MAX: u64 = 10_000_000;

/// How a completed, successful sample's server usage can be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UsageClass {
    /// Both `prompt_tokens` and `completion_tokens` were reported and valid.
    Usable,
    /// At least one count is missing (absent or rejected by the worker).
    Missing,
    /// A count is missing and the response had no output text at all.
    MissingEmptyOutput,
}

/// THE usage rule for one sample.
///
/// A sample is usable only when both counts are present (the worker has already
/// dropped any value that was not a non-bool integer in [0, 10,000,000]). Failed
/// samples are not classified: they feed neither basis's token series.
pub fn classify_usage(
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
    output_empty: bool,
) -> UsageClass {
    match (prompt_tokens, completion_tokens) {
        (Some(_), Some(_)) => UsageClass::Usable,
        _ if output_empty => UsageClass::MissingEmptyOutput,
        _ => UsageClass::Missing,
    }
}

/// Why a JSON usage value was not kept as a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BadCount {
    /// The key was absent or `null`.
    Absent,
    /// `true` / `false`.
    Bool,
    /// A number with a fraction or exponent.
    Float,
    /// A string.
    String,
    /// An array or object.
    Other,
    /// An integer below zero.
    Negative,
    /// An integer above [`SERVER_COUNT_MAX`].
    TooLarge,
}

impl BadCount {
    /// The value's kind, for the one warning a process prints.
    pub fn as_str(self) -> &'static str {
        match self {
            BadCount::Absent => "absent",
            BadCount::Bool => "bool",
            BadCount::Float => "float",
            BadCount::String => "string",
            BadCount::Other => "non-number",
            BadCount::Negative => "negative integer",
            BadCount::TooLarge => "integer above 10000000",
        }
    }
}

/// The count rule on a decoded JSON value: a non-bool integer in [0, 10,000,000].
///
/// Post-run tools use it on `events.jsonl`; the worker applies the same rule on the
/// hot path with its own scanner.
pub fn count_from_json(value: Option<&serde_json::Value>) -> Result<u32, BadCount> {
    use serde_json::Value;
    match value {
        None | Some(Value::Null) => Err(BadCount::Absent),
        Some(Value::Bool(_)) => Err(BadCount::Bool),
        Some(Value::String(_)) => Err(BadCount::String),
        Some(Value::Array(_) | Value::Object(_)) => Err(BadCount::Other),
        Some(Value::Number(n)) => {
            if let Some(v) = n.as_u64() {
                if v > SERVER_COUNT_MAX {
                    return Err(BadCount::TooLarge);
                }
                // SERVER_COUNT_MAX fits in u32, so the conversion cannot fail.
                return u32::try_from(v).map_err(|_| BadCount::TooLarge);
            }
            if n.as_i64().is_some() {
                return Err(BadCount::Negative);
            }
            Err(BadCount::Float)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn usage_rule_on_each_case() {
        // (prompt_tokens, completion_tokens, output_empty, expected)
        let cases = [
            (Some(3), Some(4), false, UsageClass::Usable),
            (Some(3), Some(0), true, UsageClass::Usable),
            (Some(0), Some(0), false, UsageClass::Usable),
            (None, Some(4), false, UsageClass::Missing),
            (Some(3), None, false, UsageClass::Missing),
            (None, None, false, UsageClass::Missing),
            (None, None, true, UsageClass::MissingEmptyOutput),
            (Some(3), None, true, UsageClass::MissingEmptyOutput),
        ];
        for (prompt, completion, empty, expected) in cases {
            assert_eq!(classify_usage(prompt, completion, empty), expected);
        }
    }

    #[test]
    fn count_rule_on_each_value_kind() {
        let cases = [
            (json!(0), Ok(0)),
            (json!(17), Ok(17)),
            (json!(10_000_000), Ok(10_000_000)),
            (json!(10_000_001), Err(BadCount::TooLarge)),
            (json!(u64::MAX), Err(BadCount::TooLarge)),
            (json!(-1), Err(BadCount::Negative)),
            (json!(3.0), Err(BadCount::Float)),
            (json!(2.5), Err(BadCount::Float)),
            (json!(true), Err(BadCount::Bool)),
            (json!(false), Err(BadCount::Bool)),
            (json!("12"), Err(BadCount::String)),
            (json!([1]), Err(BadCount::Other)),
            (json!({"n": 1}), Err(BadCount::Other)),
            (json!(null), Err(BadCount::Absent)),
        ];
        for (value, expected) in cases {
            assert_eq!(count_from_json(Some(&value)), expected, "{value}");
        }
        assert_eq!(count_from_json(None), Err(BadCount::Absent));
    }
}
