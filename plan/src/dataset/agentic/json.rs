//! A JSON value that keeps each object's keys in the file's order, and its compact writing as
//! the reference sends it: `json.loads` makes Python objects of the file (dicts keep their key
//! order, a repeated key keeps its first place and its last value, integers stay integers) and
//! msgspec encodes them without spaces, UTF-8 unescaped, floats in its own shortest form.
//!
//! `serde_json::Value` sorts object keys (this workspace does not enable `preserve_order`, which
//! would change every other output through feature unification), so a tool call's arguments or
//! a tool definition would not go out as the file has them.

use std::collections::HashMap;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// One JSON value; objects are their entries in the file's order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

/// Objects with more entries than this find a repeated key through a hash map, so a file's
/// huge object costs linear time; smaller ones compare keys directly.
const LINEAR_LOOKUP_MAX: usize = 16;

impl Json {
    /// The string, when this is one.
    pub(crate) fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value of `key` in an object, as Python's `dict.get` sees it (`None` for a missing
    /// key; a JSON null is `Some(Json::Null)`).
    pub(crate) fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// What the value is, for a message that says what was found.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Int(_) | Json::Float(_) => "a number",
            Json::Str(_) => "a string",
            Json::Array(_) => "a list",
            Json::Object(_) => "an object",
        }
    }

    /// A `serde_json::Value` as this type; its objects come sorted by key (the order a `Value`
    /// keeps), which is all a CSV or Parquet record read into one can give.
    pub(crate) fn from_value(value: &Value) -> Json {
        match value {
            Value::Null => Json::Null,
            Value::Bool(b) => Json::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Json::Int(i128::from(i)),
                (None, Some(u)) => Json::Int(i128::from(u)),
                (None, None) => Json::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Json::Str(s.clone()),
            Value::Array(items) => Json::Array(items.iter().map(Json::from_value).collect()),
            Value::Object(map) => {
                Json::Object(map.iter().map(|(k, v)| (k.clone(), Json::from_value(v))).collect())
            }
        }
    }

    /// Appends the value, compact, as msgspec encodes the Python object `json.loads` made.
    pub(crate) fn write_compact(&self, out: &mut Vec<u8>) {
        match self {
            Json::Null => out.extend_from_slice(b"null"),
            Json::Bool(true) => out.extend_from_slice(b"true"),
            Json::Bool(false) => out.extend_from_slice(b"false"),
            Json::Int(i) => out.extend_from_slice(i.to_string().as_bytes()),
            Json::Float(f) => write_float(out, *f),
            Json::Str(s) => write_str(out, s),
            Json::Array(items) => {
                out.push(b'[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    item.write_compact(out);
                }
                out.push(b']');
            }
            Json::Object(entries) => {
                out.push(b'{');
                for (i, (key, value)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    write_str(out, key);
                    out.push(b':');
                    value.write_compact(out);
                }
                out.push(b'}');
            }
        }
    }

    /// The compact text (`write_compact`) as a string.
    pub(crate) fn compact_text(&self) -> String {
        let mut out = Vec::new();
        self.write_compact(&mut out);
        String::from_utf8(out).unwrap_or_default()
    }
}

/// A JSON string as msgspec writes it: `"` and `\` escaped, the control characters as `\b`,
/// `\t`, `\n`, `\f`, `\r` or `\u00XX` (lowercase hex), everything else (DEL, non-ASCII) as its
/// UTF-8 bytes. serde_json's string writer does exactly this.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    // Writing a `&str` into a `Vec` cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// A float as msgspec writes it: the shortest digits that read back to the same float, placed
/// positionally with at least one fractional digit (`100.0`, `0.000025`) when the decimal
/// exponent is in -5..16, else as `d.ddde±x` without a `+` or a padded exponent (`1e16`,
/// `1.25e-7`).
pub(crate) fn write_float(out: &mut Vec<u8>, f: f64) {
    if !f.is_finite() {
        // msgspec writes NaN and the infinities as null; JSON text cannot hold them anyway.
        out.extend_from_slice(b"null");
        return;
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-5..16).contains(&exp) {
        out.extend_from_slice(mantissa.as_bytes());
        out.push(b'e');
        out.extend_from_slice(exp.to_string().as_bytes());
        return;
    }
    let (sign, digits) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    let digits: String = digits.chars().filter(|c| *c != '.').collect();
    out.extend_from_slice(sign.as_bytes());
    if exp < 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
        out.extend_from_slice(digits.as_bytes());
        return;
    }
    let int_len = exp as usize + 1;
    if digits.len() <= int_len {
        out.extend_from_slice(digits.as_bytes());
        out.extend(std::iter::repeat_n(b'0', int_len - digits.len()));
        out.extend_from_slice(b".0");
    } else {
        out.extend_from_slice(&digits.as_bytes()[..int_len]);
        out.push(b'.');
        out.extend_from_slice(&digits.as_bytes()[int_len..]);
    }
}

/// Adds `key: value` to an object's entries as a Python dict does: a repeated key keeps its
/// first place and takes the new value. `index` is built once the object outgrows
/// `LINEAR_LOOKUP_MAX`.
fn insert_entry(
    entries: &mut Vec<(String, Json)>,
    index: &mut Option<HashMap<String, usize>>,
    key: String,
    value: Json,
) {
    if index.is_none() && entries.len() >= LINEAR_LOOKUP_MAX {
        *index = Some(entries.iter().enumerate().map(|(i, (k, _))| (k.clone(), i)).collect());
    }
    let found = match index {
        Some(map) => map.get(&key).copied(),
        None => entries.iter().position(|(k, _)| *k == key),
    };
    match found {
        Some(i) => entries[i].1 = value,
        None => {
            if let Some(map) = index {
                map.insert(key.clone(), entries.len());
            }
            entries.push((key, value));
        }
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Json, E> {
        Ok(Json::Int(i128::from(i)))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Json, E> {
        Ok(Json::Int(i128::from(u)))
    }
    fn visit_f64<E>(self, f: f64) -> Result<Json, E> {
        Ok(Json::Float(f))
    }
    fn visit_str<E>(self, s: &str) -> Result<Json, E> {
        Ok(Json::Str(s.to_string()))
    }
    fn visit_string<E>(self, s: String) -> Result<Json, E> {
        Ok(Json::Str(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let (mut entries, mut index) = (Vec::new(), None);
        while let Some((key, value)) = map.next_entry::<String, Json>()? {
            insert_entry(&mut entries, &mut index, key, value);
        }
        Ok(Json::Object(entries))
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Json, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compact(text: &str) -> String {
        serde_json::from_str::<Json>(text).unwrap().compact_text()
    }

    #[test]
    fn objects_keep_the_file_s_key_order_and_lose_the_spaces() {
        let text = r#"{ "z": 1, "a": [true, null, {"y": "x", "b": -3}], "m": {} }"#;
        assert_eq!(compact(text), r#"{"z":1,"a":[true,null,{"y":"x","b":-3}],"m":{}}"#);
    }

    #[test]
    fn a_repeated_key_keeps_its_first_place_and_its_last_value_as_a_python_dict_does() {
        assert_eq!(compact(r#"{"a": 1, "b": 2, "a": 3}"#), r#"{"a":3,"b":2}"#);
        // Past the linear lookup, through the hash map.
        let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
        let text = format!("{{{}, \"k3\": \"last\", \"k39\": 0}}", keys.join(", "));
        let out = compact(&text);
        assert!(out.starts_with(r#"{"k0":0,"k1":1,"k2":2,"k3":"last","k4":4,"#), "{out}");
        assert!(out.ends_with(r#""k38":38,"k39":0}"#), "{out}");
    }

    /// The bytes msgspec 0.23 writes for `"".join(chr(i) for i in range(0x80)) + "é\u2028😀/"`.
    #[test]
    fn strings_are_escaped_as_msgspec_escapes_them() {
        let all: String = (0u8..0x80).map(char::from).chain("é\u{2028}😀/".chars()).collect();
        let mut out = Vec::new();
        write_str(&mut out, &all);
        let msgspec = "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\
            \\u000b\\f\\r\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\
            \\u0018\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f !\\\"#$%&'()*+,-./0123456789\
            :;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\u{7f}é\u{2028}\
            😀/\"";
        assert_eq!(String::from_utf8(out).unwrap(), msgspec);
        // An escaped non-ASCII letter in the file goes out as UTF-8, as msgspec writes it.
        assert_eq!(compact(r#""caf\u00e9 \/""#), "\"café /\"");
    }

    /// Each float beside the text msgspec 0.23 writes for it.
    #[test]
    fn floats_are_written_as_msgspec_writes_them() {
        let cases = [
            (1.5, "1.5"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (-0.0, "-0.0"),
            (1e15, "1000000000000000.0"),
            (1234567890123456.8, "1234567890123456.8"),
            (1e16, "1e16"),
            (1.25e16, "1.25e16"),
            (1.2345678901234568e17, "1.2345678901234568e17"),
            (1e300, "1e300"),
            (1.7976931348623157e308, "1.7976931348623157e308"),
            (1e-5, "0.00001"),
            (1.2345678901234568e-5, "0.000012345678901234568"),
            (2.5e-5, "0.000025"),
            (0.0001, "0.0001"),
            (1e-6, "1e-6"),
            (1.25e-7, "1.25e-7"),
            (5e-324, "5e-324"),
            (-12.5, "-12.5"),
        ];
        for (f, msgspec) in cases {
            let mut out = Vec::new();
            write_float(&mut out, f);
            assert_eq!(String::from_utf8(out).unwrap(), msgspec, "{f:e}");
        }
        // Integers stay integers and floats stay floats, as json.loads reads them.
        assert_eq!(
            compact("[1, 1.0, 1E2, -7, 18446744073709551615]"),
            "[1,1.0,100.0,-7,18446744073709551615]"
        );
    }

    #[test]
    fn a_value_converts_with_its_keys_sorted() {
        let value = serde_json::json!({"b": [1, 2.5, "x"], "a": null});
        assert_eq!(Json::from_value(&value).compact_text(), r#"{"a":null,"b":[1,2.5,"x"]}"#);
    }
}
