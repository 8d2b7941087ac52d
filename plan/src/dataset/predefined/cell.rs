//! A cell of a predefined dataset's table as text, as the reference's `str(value)` gives it.

use serde_json::Value;

/// Python's `str()` of a cell, as `str.format` writes it.
pub(super) fn cell_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "None".into(),
        other => other.to_string(),
    }
}
