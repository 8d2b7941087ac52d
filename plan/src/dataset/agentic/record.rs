//! One row of an agentic conversation dataset, its values kept with their objects' key order,
//! and the two columns every row must have: `conversation_id` and `turn`.

use std::fmt;

use serde::de::{Deserialize, Deserializer, Error as _};
use serde_json::{Map, Value};

use super::json::Json;

/// One dataset row: its columns and their values, each object's keys in the file's order.
///
/// Read a JSON Lines line with `AgenticRecord::parse`, a JSON array of rows with
/// `serde_json::from_str::<Vec<AgenticRecord>>`, and a record another reader made (CSV,
/// Parquet) with `AgenticRecord::from_map`, whose nested objects can only come sorted by key.
#[derive(Debug, Clone, PartialEq)]
pub struct AgenticRecord {
    /// The row as an object (`Json::Object`).
    row: Json,
}

impl AgenticRecord {
    /// A row from the text of one JSON object (a JSON Lines line).
    pub fn parse(text: &str) -> Result<AgenticRecord, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// A row from a record already read into a map (CSV, Parquet and Arrow readers).
    pub fn from_map(map: &Map<String, Value>) -> AgenticRecord {
        AgenticRecord {
            row: Json::Object(map.iter().map(|(k, v)| (k.clone(), Json::from_value(v))).collect()),
        }
    }

    /// Column `key`'s value, `None` when the row lacks it or holds null: pandas reads both as a
    /// missing value, which the reference skips.
    pub(super) fn get(&self, key: &str) -> Option<&Json> {
        self.row.get(key).filter(|v| **v != Json::Null)
    }

    /// The row's `role` when it is a string.
    pub(super) fn role(&self) -> Option<&str> {
        self.get("role").and_then(Json::as_str)
    }

    /// True for the metadata line a converter may put first (`_type: dataset_metadata`), which
    /// the reference drops before reading conversations.
    pub(super) fn is_metadata(&self) -> bool {
        self.get("_type").and_then(Json::as_str) == Some("dataset_metadata")
    }
}

impl<'de> Deserialize<'de> for AgenticRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<AgenticRecord, D::Error> {
        match Json::deserialize(deserializer)? {
            row @ Json::Object(_) => Ok(AgenticRecord { row }),
            other => {
                Err(D::Error::custom(format!("a row must be a JSON object, not {}", other.kind())))
            }
        }
    }
}

/// Why a row's `conversation_id` or `turn` cannot be read.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum KeyError {
    /// Missing, null or empty (the reference also reads the text `nan` as missing).
    MissingId,
    /// Not a string or an integer.
    IdKind(&'static str),
    /// A character outside printable ASCII.
    IdNotPrintable(String),
    /// `turn` missing, or not a whole number.
    Turn(String, Option<String>),
}

/// The row's conversation id as the reference keys it (`str(conversation_id)`): a string, or
/// an integer written in decimal; printable ASCII only, as the reference demands.
pub(super) fn conversation_id(record: &AgenticRecord) -> Result<String, KeyError> {
    let id = match record.get("conversation_id") {
        None => return Err(KeyError::MissingId),
        Some(Json::Str(s)) => s.clone(),
        Some(Json::Int(i)) => i.to_string(),
        Some(other) => return Err(KeyError::IdKind(other.kind())),
    };
    if id.is_empty() || id == "nan" {
        return Err(KeyError::MissingId);
    }
    if id.chars().any(|c| !(' '..='~').contains(&c)) {
        return Err(KeyError::IdNotPrintable(id));
    }
    Ok(id)
}

/// The row's `turn`: an integer, or a float with no fractional part (pandas makes one of a
/// column with a missing value). Range is left to the numbering check.
pub(super) fn turn_number(record: &AgenticRecord, id: &str) -> Result<i64, KeyError> {
    let bad = |shown: Option<String>| KeyError::Turn(id.to_string(), shown);
    match record.get("turn") {
        Some(Json::Int(i)) => i64::try_from(*i).map_err(|_| bad(Some(i.to_string()))),
        Some(Json::Float(f)) if f.fract() == 0.0 && f.abs() < 1e15 => Ok(*f as i64),
        Some(other) => Err(bad(Some(other.compact_text()))),
        None => Err(bad(None)),
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::MissingId => {
                write!(f, "conversation_id is missing or empty; give every row a non-empty string")
            }
            KeyError::IdKind(kind) => {
                write!(f, "conversation_id is {kind}; write it as a non-empty string")
            }
            KeyError::IdNotPrintable(id) => write!(
                f,
                "conversation_id {id:?} has non-printable or non-ASCII characters; use printable \
                 ASCII only (it is sent as a header)"
            ),
            KeyError::Turn(id, None) => write!(
                f,
                "conversation {id:?}: a row has no turn; number each conversation's rows 1, 2, …, N"
            ),
            KeyError::Turn(id, Some(shown)) => write!(
                f,
                "conversation {id:?}: turn {shown} is not a whole number; number each \
                 conversation's rows 1, 2, …, N"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_keeps_its_nested_key_order_and_reads_null_as_missing() {
        let rec =
            AgenticRecord::parse(r#"{"role": "user", "x": null, "t": {"b": 1, "a": 2}}"#).unwrap();
        assert_eq!(rec.role(), Some("user"));
        assert_eq!(rec.get("x"), None);
        assert_eq!(rec.get("t").unwrap().compact_text(), r#"{"b":1,"a":2}"#);
        let err = AgenticRecord::parse("[1]").unwrap_err();
        assert!(err.to_string().contains("a row must be a JSON object, not a list"), "{err}");
        let rows: Vec<AgenticRecord> =
            serde_json::from_str(r#"[{"turn": 1}, {"turn": 2.0}]"#).unwrap();
        assert_eq!(turn_number(&rows[1], "c"), Ok(2));
    }

    #[test]
    fn conversation_ids_read_as_the_reference_keys_them() {
        let id = |text: &str| conversation_id(&AgenticRecord::parse(text).unwrap());
        assert_eq!(id(r#"{"conversation_id": "c-1"}"#), Ok("c-1".to_string()));
        assert_eq!(id(r#"{"conversation_id": 42}"#), Ok("42".to_string()));
        for missing in [r#"{}"#, r#"{"conversation_id": null}"#, r#"{"conversation_id": ""}"#] {
            assert_eq!(id(missing), Err(KeyError::MissingId), "{missing}");
        }
        assert_eq!(id(r#"{"conversation_id": 1.5}"#), Err(KeyError::IdKind("a number")));
        let map = serde_json::json!({"conversation_id": "a\tb"});
        let rec = AgenticRecord::from_map(map.as_object().unwrap());
        assert_eq!(conversation_id(&rec), Err(KeyError::IdNotPrintable("a\tb".into())));
    }
}
