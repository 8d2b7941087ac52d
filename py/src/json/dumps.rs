//! `json.dumps(value)` with default settings: `", "` and `": "` separators, no indent, insertion
//! order, every character outside printable ASCII escaped as `\uXXXX` UTF-16 units
//! (`ensure_ascii=True`), floats as `repr` with `NaN`/`Infinity`/`-Infinity`, and a dict key that
//! is not a string written as its JSON text in quotes (`{1: 2}` as `{"1": 2}`).
//!
//! One encoder for every value model: a type says what Python's encoder would see of it
//! (`Encode`), the encoder writes the punctuation, the escapes and the keys.

use crate::float_repr;

/// Which characters a string escapes as `\uXXXX`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Escape {
    /// Python's `ensure_ascii=True`: everything outside `' '..='~'`, DEL (U+007F) included.
    Ascii,
    /// As `Ascii`, but DEL written raw: what the plan's count of a row's `messages` JSON
    /// (`plan/src/tokenizer.rs`, `python_json`) has always written.
    AsciiExceptDel,
}

/// A value `dumps` can write: it hands the encoder what Python's encoder would see.
pub trait Encode {
    /// Writes `self` through `encoder`'s methods.
    fn encode(&self, encoder: &mut Encoder<'_>);
}

/// `json.dumps(value)` with default settings, strings escaped as `escape` says.
pub fn dumps<T: Encode + ?Sized>(value: &T, escape: Escape) -> String {
    let mut out = String::new();
    value.encode(&mut Encoder::new(&mut out, escape));
    out
}

/// A float as `json.dumps` writes it: `repr(float)`, and `NaN`, `Infinity`, `-Infinity`
/// (`allow_nan=True`).
pub fn float_text(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
    }
    float_repr::repr(value)
}

/// Writes one value's JSON at the end of a string.
#[derive(Debug)]
pub struct Encoder<'a> {
    out: &'a mut String,
    escape: Escape,
}

impl<'a> Encoder<'a> {
    /// An encoder that appends to `out`.
    pub fn new(out: &'a mut String, escape: Escape) -> Encoder<'a> {
        Encoder { out, escape }
    }

    /// `None`.
    pub fn null(&mut self) {
        self.out.push_str("null");
    }

    /// `True` or `False`.
    pub fn bool(&mut self, value: bool) {
        self.out.push_str(if value { "true" } else { "false" });
    }

    /// A number already in its JSON text (an `int`'s digits), written as it is.
    pub fn number(&mut self, text: &str) {
        self.out.push_str(text);
    }

    /// A `float` (`float_text`).
    pub fn float(&mut self, value: f64) {
        self.out.push_str(&float_text(value));
    }

    /// A `str`.
    pub fn str(&mut self, text: &str) {
        self.str_utf16(text.encode_utf16());
    }

    /// A `str` given as UTF-16 units, so a lone surrogate (which `json.loads` keeps) is written
    /// back as Python writes it (`"\ud800"`).
    pub fn str_utf16(&mut self, units: impl IntoIterator<Item = u16>) {
        self.out.push('"');
        for unit in units {
            match unit {
                0x22 => self.out.push_str("\\\""),
                0x5c => self.out.push_str("\\\\"),
                0x0a => self.out.push_str("\\n"),
                0x0d => self.out.push_str("\\r"),
                0x09 => self.out.push_str("\\t"),
                0x08 => self.out.push_str("\\b"),
                0x0c => self.out.push_str("\\f"),
                0x20..=0x7e => self.out.push(char::from(unit as u8)),
                0x7f if self.escape == Escape::AsciiExceptDel => self.out.push('\u{7f}'),
                _ => self.out.push_str(&format!("\\u{unit:04x}")),
            }
        }
        self.out.push('"');
    }

    /// A `list` (or `tuple`).
    pub fn list<'v, T>(&mut self, items: impl IntoIterator<Item = &'v T>)
    where
        T: Encode + ?Sized + 'v,
    {
        self.out.push('[');
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            item.encode(self);
        }
        self.out.push(']');
    }

    /// A `dict`, its entries in the order given.
    pub fn dict<'v, K, V>(&mut self, entries: impl IntoIterator<Item = (&'v K, &'v V)>)
    where
        K: Encode + ?Sized + 'v,
        V: Encode + ?Sized + 'v,
    {
        self.out.push('{');
        for (i, (key, value)) in entries.into_iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.key(key);
            self.out.push_str(": ");
            value.encode(self);
        }
        self.out.push('}');
    }

    /// A dict key: a `str` as it is; an `int`, `float`, `bool` or `None` as its JSON text, which
    /// never starts with a quote, written as a string (`1` as `"1"`, `True` as `"true"`).
    fn key<K: Encode + ?Sized>(&mut self, key: &K) {
        let start = self.out.len();
        key.encode(self);
        if !self.out[start..].starts_with('"') {
            let text = self.out.split_off(start);
            self.str(&text);
        }
    }
}

impl Encode for str {
    fn encode(&self, encoder: &mut Encoder<'_>) {
        encoder.str(self);
    }
}

impl Encode for String {
    fn encode(&self, encoder: &mut Encoder<'_>) {
        encoder.str(self);
    }
}

/// A `serde_json::Value` as `json.loads` would have made it, with one difference: a number is
/// written as serde_json prints it, which for a float outside [1e-4, 1e16) is not Python's
/// `repr` (`1e-7` and `1e16` where Python writes `1e-07` and `1e+16`).
impl Encode for serde_json::Value {
    fn encode(&self, encoder: &mut Encoder<'_>) {
        use serde_json::Value;
        match self {
            Value::Null => encoder.null(),
            Value::Bool(b) => encoder.bool(*b),
            Value::Number(n) => encoder.number(&n.to_string()),
            Value::String(s) => encoder.str(s),
            Value::Array(items) => encoder.list(items),
            Value::Object(map) => encoder.dict(map),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Expected strings are CPython's `json.dumps(value)`.
    #[test]
    fn values_dump_as_python_with_default_settings() {
        let cases = [
            (json!(null), "null"),
            (json!([true, false, 1, -2, "a"]), r#"[true, false, 1, -2, "a"]"#),
            (json!({"a": {}, "b": []}), r#"{"a": {}, "b": []}"#),
            (json!([[1, [2]], {"k": [3]}]), r#"[[1, [2]], {"k": [3]}]"#),
            (json!(1.5), "1.5"),
            (json!(100.0), "100.0"),
        ];
        for (value, expected) in cases {
            assert_eq!(dumps(&value, Escape::Ascii), expected);
        }
    }

    /// A `serde_json::Value` object is written in its map's order: sorted by key, as serde_json
    /// keeps it without `preserve_order` (Python would keep the order the keys were read in).
    #[test]
    fn a_value_object_is_written_in_its_maps_order() {
        let value = json!({"role": "user", "content": "hi"});
        assert_eq!(dumps(&value, Escape::Ascii), r#"{"content": "hi", "role": "user"}"#);
    }

    /// `json.dumps("\"\\\n\r\t\b\f\x01 ~\x7f é 🚀")` in CPython.
    #[test]
    fn strings_escape_as_ensure_ascii() {
        let text = "\"\\\n\r\t\u{8}\u{c}\u{1} ~\u{7f} é 🚀";
        let python = r#""\"\\\n\r\t\b\f\u0001 ~\u007f \u00e9 \ud83d\ude80""#;
        assert_eq!(dumps(text, Escape::Ascii), python);
        assert_eq!(dumps(text, Escape::AsciiExceptDel), python.replace("\\u007f", "\u{7f}"));
    }

    #[test]
    fn a_lone_surrogate_is_written_back_as_python_writes_it() {
        let mut out = String::new();
        Encoder::new(&mut out, Escape::Ascii).str_utf16([0x61, 0xd800, 0x62]);
        assert_eq!(out, r#""a\ud800b""#);
    }

    #[test]
    fn floats_dump_as_repr_with_nan_and_infinity() {
        let cases = [
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (0.1, "0.1"),
            (2.0, "2.0"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for (value, expected) in cases {
            assert_eq!(float_text(value), expected);
        }
    }

    /// A model whose dict keys may be numbers, as Python's can.
    enum Key {
        Int(i64),
        Float(f64),
        Bool(bool),
        None,
        Str(&'static str),
    }

    impl Encode for Key {
        fn encode(&self, encoder: &mut Encoder<'_>) {
            match self {
                Key::Int(i) => encoder.number(&i.to_string()),
                Key::Float(f) => encoder.float(*f),
                Key::Bool(b) => encoder.bool(*b),
                Key::None => encoder.null(),
                Key::Str(s) => encoder.str(s),
            }
        }
    }

    impl Encode for i64 {
        fn encode(&self, encoder: &mut Encoder<'_>) {
            encoder.number(&self.to_string());
        }
    }

    /// `json.dumps({1: 0, 1.5: 1, True: 2, None: 3, "s": 4, float("nan"): 5})` in CPython.
    #[test]
    fn keys_that_are_not_strings_are_written_as_strings() {
        let keys = [
            Key::Int(1),
            Key::Float(1.5),
            Key::Bool(true),
            Key::None,
            Key::Str("s"),
            Key::Float(f64::NAN),
        ];
        let values: Vec<i64> = (0..6).collect();
        let mut out = String::new();
        Encoder::new(&mut out, Escape::Ascii).dict(keys.iter().zip(&values));
        assert_eq!(out, r#"{"1": 0, "1.5": 1, "true": 2, "null": 3, "s": 4, "NaN": 5}"#);
    }
}
