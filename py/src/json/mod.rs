//! Python's `json.dumps`, byte for byte, in the two forms the reference uses:
//! `json.dumps(value, indent=2)` for its report files (`indent.rs`, over any `Serialize`), and
//! `json.dumps(value)` with default settings for the values it compares and counts (`dumps.rs`,
//! over any `Encode`: a `serde_json::Value`, or a caller's own model of a Python value).

mod dumps;
mod indent;

pub use dumps::{dumps, float_text, Encode, Encoder, Escape};
pub use indent::to_python_json;
