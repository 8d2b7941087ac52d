//! Usage counts with their exact JSON type, and the worker's half of the usage rule: a count is
//! kept only if it is a non-bool integer in [0, 10,000,000].

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// Largest count kept (`TOKEN_HDR_HIGH` of the reference).
pub const TOKEN_COUNT_MAX: u64 = 10_000_000;

/// A usage value as the JSON had it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UsageValue {
    Int(u64),
    Negative,
    Float,
    Bool,
    Str,
    Null,
    Other,
}

impl UsageValue {
    /// The count if usable, else the name of the bad kind for the warning.
    pub fn count(self) -> Result<u32, &'static str> {
        match self {
            UsageValue::Int(v) if v <= TOKEN_COUNT_MAX => Ok(v as u32),
            UsageValue::Int(_) => Err("an integer above 10000000"),
            UsageValue::Negative => Err("a negative integer"),
            UsageValue::Float => Err("a float"),
            UsageValue::Bool => Err("a bool"),
            UsageValue::Str => Err("a string"),
            UsageValue::Null => Err("null"),
            UsageValue::Other => Err("an array or object"),
        }
    }
}

impl<'de> Deserialize<'de> for UsageValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UsageVisitor)
    }
}

struct UsageVisitor;

impl<'de> Visitor<'de> for UsageVisitor {
    type Value = UsageValue;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a usage count")
    }
    fn visit_u64<E>(self, v: u64) -> Result<UsageValue, E> {
        Ok(UsageValue::Int(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<UsageValue, E> {
        Ok(if v < 0 { UsageValue::Negative } else { UsageValue::Int(v as u64) })
    }
    fn visit_u128<E>(self, _: u128) -> Result<UsageValue, E> {
        Ok(UsageValue::Int(u64::MAX))
    }
    fn visit_i128<E>(self, v: i128) -> Result<UsageValue, E> {
        Ok(if v < 0 { UsageValue::Negative } else { UsageValue::Int(u64::MAX) })
    }
    fn visit_f64<E>(self, _: f64) -> Result<UsageValue, E> {
        Ok(UsageValue::Float)
    }
    fn visit_bool<E>(self, _: bool) -> Result<UsageValue, E> {
        Ok(UsageValue::Bool)
    }
    fn visit_str<E>(self, _: &str) -> Result<UsageValue, E> {
        Ok(UsageValue::Str)
    }
    fn visit_unit<E>(self) -> Result<UsageValue, E> {
        Ok(UsageValue::Null)
    }
    fn visit_none<E>(self) -> Result<UsageValue, E> {
        Ok(UsageValue::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<UsageValue, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(UsageValue::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UsageValue, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(UsageValue::Other)
    }
}

/// The two counts of a `usage` object (or SGLang `meta_info`); other keys ignored.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq)]
pub struct UsageCounts {
    #[serde(default)]
    pub prompt_tokens: Option<UsageValue>,
    #[serde(default)]
    pub completion_tokens: Option<UsageValue>,
}

/// Counts kept for a response, and the first bad kind seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UsageState {
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    pub first_bad: Option<&'static str>,
}

impl UsageState {
    /// Applies one usage object: a present value replaces the count (a bad one makes it missing);
    /// an absent value leaves it as it was.
    pub fn apply(&mut self, counts: &UsageCounts) {
        if let Some(v) = counts.prompt_tokens {
            self.prompt_tokens = self.keep(v);
        }
        if let Some(v) = counts.completion_tokens {
            self.completion_tokens = self.keep(v);
        }
    }

    fn keep(&mut self, value: UsageValue) -> Option<u32> {
        match value.count() {
            Ok(n) => Some(n),
            Err(kind) => {
                self.first_bad.get_or_insert(kind);
                None
            }
        }
    }
}

/// Deserializes `null` as absent, anything else as `T` (for `"usage": null`).
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Frame {
        #[serde(default, deserialize_with = "nullable")]
        usage: Option<UsageCounts>,
    }

    fn state_of(json: &str) -> UsageState {
        let frame: Frame = serde_json::from_str(json).unwrap();
        let mut state = UsageState::default();
        if let Some(usage) = frame.usage {
            state.apply(&usage);
        }
        state
    }

    #[test]
    fn usage_rule_for_every_value_kind() {
        let cases: &[(&str, Option<u32>, Option<&str>)] = &[
            ("5", Some(5), None),
            ("0", Some(0), None),
            ("10000000", Some(10_000_000), None),
            ("10000001", None, Some("an integer above 10000000")),
            ("-1", None, Some("a negative integer")),
            ("5.0", None, Some("a float")),
            ("1e3", None, Some("a float")),
            ("true", None, Some("a bool")),
            ("false", None, Some("a bool")),
            ("\"5\"", None, Some("a string")),
            // A null count reads as absent: missing, but not a bad type.
            ("null", None, None),
            ("[5]", None, Some("an array or object")),
            ("{\"n\":5}", None, Some("an array or object")),
        ];
        for (value, count, bad) in cases {
            let json = format!(
                r#"{{"usage":{{"prompt_tokens":7,"completion_tokens":{value},"total_tokens":1}}}}"#
            );
            let state = state_of(&json);
            assert_eq!(state.prompt_tokens, Some(7), "{value}");
            assert_eq!(state.completion_tokens, *count, "{value}");
            assert_eq!(state.first_bad, *bad, "{value}");
        }
    }

    #[test]
    fn absent_usage_is_missing_without_warning() {
        assert_eq!(state_of("{}"), UsageState::default());
        assert_eq!(state_of(r#"{"usage":null}"#), UsageState::default());
        let s = state_of(r#"{"usage":{"prompt_tokens":3}}"#);
        assert_eq!((s.prompt_tokens, s.completion_tokens, s.first_bad), (Some(3), None, None));
    }
}
