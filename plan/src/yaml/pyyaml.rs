//! YAML typed as the reference's loader types it: PyYAML's `safe_load` (YAML 1.1), so that
//! unquoted `on`/`yes` are booleans, `1_000` and `010` (octal) are ints and `1e3` is a string.
//!
//! serde_yaml_ng reads YAML 1.2 and hands a visitor no scalar's style, so the document is
//! read twice: once as a `Value` for its shape, then again, driven by that shape, taking each
//! scalar's text with `deserialize_str`. A scalar is plain (unquoted) when its text is
//! borrowed from the document and no quote stands right before it; only plain scalars are
//! resolved by YAML 1.1's rules (`resolve_plain`), as PyYAML resolves them.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_yaml_ng::{Mapping, Number, Value};

/// `text` read as PyYAML's `safe_load` would type it.
pub fn load(text: &str) -> Result<Value, serde_yaml_ng::Error> {
    let shape: Value = serde_yaml_ng::from_str(text)?;
    Retype { shape: &shape, text }.deserialize(serde_yaml_ng::Deserializer::from_str(text))
}

/// A plain scalar typed by YAML 1.1's implicit rules (PyYAML 6's resolver and constructor):
/// null, bool, int, float, else a string (timestamps stay strings here: see docs/CLI.md).
pub fn resolve_plain(raw: &str) -> Value {
    match raw {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Value::Bool(true)
        }
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Value::Bool(false)
        }
        _ => {}
    }
    if let Some(i) = yaml11_int(raw) {
        return match (u64::try_from(i), i64::try_from(i)) {
            (Ok(u), _) => Value::Number(Number::from(u)),
            (_, Ok(s)) => Value::Number(Number::from(s)),
            _ => Value::Number(Number::from(i as f64)),
        };
    }
    match yaml11_float(raw) {
        Some(x) => Value::Number(Number::from(x)),
        None => Value::String(raw.to_string()),
    }
}

/// Splits a leading `+` or `-`: (negative, rest).
fn sign(raw: &str) -> (bool, &str) {
    match raw.as_bytes().first() {
        Some(b'-') => (true, &raw[1..]),
        Some(b'+') => (false, &raw[1..]),
        _ => (false, raw),
    }
}

fn all_of(s: &str, allowed: fn(u8) -> bool) -> bool {
    !s.is_empty() && s.bytes().all(allowed)
}

fn is_digit_or_underscore(b: u8) -> bool {
    b.is_ascii_digit() || b == b'_'
}

/// One base-60 digit pair of `1:30`: `[0-5]?[0-9]`.
fn is_base60_digit(part: &str) -> bool {
    let b = part.as_bytes();
    match b.len() {
        1 => b[0].is_ascii_digit(),
        2 => (b'0'..=b'5').contains(&b[0]) && b[1].is_ascii_digit(),
        _ => false,
    }
}

/// `first:mm:ss` in base 60, each part after the first 0–59.
fn sexagesimal(first: &str, rest: &[&str]) -> Option<i128> {
    let mut total: i128 = first.replace('_', "").parse().ok()?;
    for part in rest {
        if !is_base60_digit(part) {
            return None;
        }
        total = total.checked_mul(60)?.checked_add(part.parse().ok()?)?;
    }
    Some(total)
}

/// PyYAML's int: `0b…`, `0…` (octal), decimal, `0x…`, and base 60 (`1:30` is 90).
fn yaml11_int(raw: &str) -> Option<i128> {
    let (negative, body) = sign(raw);
    let digits = |s: &str, radix: u32| i128::from_str_radix(&s.replace('_', ""), radix).ok();
    let magnitude = if let Some(bin) = body.strip_prefix("0b") {
        all_of(bin, |b| matches!(b, b'0' | b'1' | b'_')).then(|| digits(bin, 2))??
    } else if let Some(hex) = body.strip_prefix("0x") {
        all_of(hex, |b| b.is_ascii_hexdigit() || b == b'_').then(|| digits(hex, 16))??
    } else if body == "0" {
        0
    } else if let Some(oct) = body.strip_prefix('0') {
        all_of(oct, |b| matches!(b, b'0'..=b'7' | b'_')).then(|| digits(oct, 8))??
    } else if body.contains(':') {
        let parts: Vec<&str> = body.split(':').collect();
        let first = parts[0];
        let ok = first.as_bytes().first().is_some_and(|b| (b'1'..=b'9').contains(b))
            && all_of(first, is_digit_or_underscore);
        if !ok {
            return None;
        }
        sexagesimal(first, &parts[1..])?
    } else if body.as_bytes().first().is_some_and(|b| (b'1'..=b'9').contains(b))
        && all_of(body, is_digit_or_underscore)
    {
        digits(body, 10)?
    } else {
        return None;
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// PyYAML's float: digits with a dot (an exponent needs its sign: `1.0e+3`, not `1e3`),
/// `.5` (unsigned), base 60 with a dot, `.inf`, `.nan`.
fn yaml11_float(raw: &str) -> Option<f64> {
    if matches!(raw, ".nan" | ".NaN" | ".NAN") {
        return Some(f64::NAN);
    }
    let (negative, body) = sign(raw);
    let magnitude = if matches!(body, ".inf" | ".Inf" | ".INF") {
        f64::INFINITY
    } else if body.starts_with('.') && body.len() == raw.len() {
        // `\.[0-9][0-9_]*([eE][-+][0-9]+)?`: no sign allowed before the dot.
        let (digits, exp) = split_exponent(&body[1..])?;
        let ok = digits.as_bytes().first().is_some_and(u8::is_ascii_digit)
            && all_of(digits, is_digit_or_underscore);
        if !ok {
            return None;
        }
        format!("0.{}{exp}", digits.replace('_', "")).parse().ok()?
    } else {
        let (whole, fraction) = body.split_once('.')?;
        if whole.contains(':') {
            sexagesimal_float(whole, fraction)?
        } else {
            let (fraction, exp) = split_exponent(fraction)?;
            let ok = whole.as_bytes().first().is_some_and(u8::is_ascii_digit)
                && all_of(whole, is_digit_or_underscore)
                && (fraction.is_empty() || all_of(fraction, is_digit_or_underscore));
            if !ok {
                return None;
            }
            format!("{}.{}0{exp}", whole.replace('_', ""), fraction.replace('_', ""))
                .parse()
                .ok()?
        }
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// `digits[eE][-+][0-9]+` → (digits, "e±N"); no exponent → (digits, "").
fn split_exponent(s: &str) -> Option<(&str, &str)> {
    match s.find(['e', 'E']) {
        None => Some((s, "")),
        Some(at) => {
            let exp = &s[at..];
            let ok = exp.len() > 2
                && matches!(exp.as_bytes()[1], b'-' | b'+')
                && exp[2..].bytes().all(|b| b.is_ascii_digit());
            ok.then_some((&s[..at], exp))
        }
    }
}

/// `[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*` (`1:30.5` is 90.5); `whole` is before the dot.
fn sexagesimal_float(whole: &str, fraction: &str) -> Option<f64> {
    let parts: Vec<&str> = whole.split(':').collect();
    let (first, rest) = parts.split_first()?;
    let ok = first.as_bytes().first().is_some_and(u8::is_ascii_digit)
        && all_of(first, is_digit_or_underscore)
        && rest.iter().all(|p| is_base60_digit(p))
        && (fraction.is_empty() || all_of(fraction, is_digit_or_underscore));
    if !ok {
        return None;
    }
    let mut total: f64 = first.replace('_', "").parse().ok()?;
    for part in rest {
        total = total * 60.0 + part.parse::<f64>().ok()?;
    }
    Some(total + format!("0.{}0", fraction.replace('_', "")).parse::<f64>().ok()?)
}

/// Reads one node of the document again, shaped as `shape` (the same node read as YAML 1.2).
struct Retype<'s, 'de> {
    shape: &'s Value,
    text: &'de str,
}

impl<'de> DeserializeSeed<'de> for Retype<'_, 'de> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        match self.shape {
            Value::Mapping(shape) => d.deserialize_map(MapRetype { shape, text: self.text }),
            Value::Sequence(shape) => d.deserialize_seq(SeqRetype { shape, text: self.text }),
            // YAML 1.2's nulls and booleans are YAML 1.1's too.
            Value::Null | Value::Bool(_) => {
                d.deserialize_ignored_any(IgnoredAny)?;
                Ok(self.shape.clone())
            }
            Value::Number(_) => d.deserialize_str(ScalarRetype { text: self.text, plain: true }),
            Value::String(_) => d.deserialize_str(ScalarRetype { text: self.text, plain: false }),
            Value::Tagged(t) => Err(de::Error::custom(format!(
                "the tag {} is not one the reference's YAML loader (PyYAML safe_load) reads",
                t.tag
            ))),
        }
    }
}

struct MapRetype<'s, 'de> {
    shape: &'s Mapping,
    text: &'de str,
}

impl<'de> Visitor<'de> for MapRetype<'_, 'de> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a mapping")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Mapping::with_capacity(self.shape.len());
        for (k, v) in self.shape {
            let ended = || de::Error::custom("the document changed while it was read");
            let key = map.next_key_seed(Retype { shape: k, text: self.text })?.ok_or_else(ended)?;
            let value = map.next_value_seed(Retype { shape: v, text: self.text })?;
            out.insert(key, value);
        }
        Ok(Value::Mapping(out))
    }
}

struct SeqRetype<'s, 'de> {
    shape: &'s [Value],
    text: &'de str,
}

impl<'de> Visitor<'de> for SeqRetype<'_, 'de> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(self.shape.len());
        for item in self.shape {
            let ended = || de::Error::custom("the document changed while it was read");
            out.push(
                seq.next_element_seed(Retype { shape: item, text: self.text })?
                    .ok_or_else(ended)?,
            );
        }
        Ok(Value::Sequence(out))
    }
}

/// One scalar's text; `plain` when YAML 1.2 already typed it (only plain scalars are typed).
struct ScalarRetype<'de> {
    text: &'de str,
    plain: bool,
}

impl<'de> Visitor<'de> for ScalarRetype<'de> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a scalar")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Value, E> {
        if self.plain || is_plain_at(self.text, v) {
            Ok(resolve_plain(v))
        } else {
            Ok(Value::String(v.to_string()))
        }
    }

    /// Not borrowed: a quoted scalar with escapes, a block scalar or a folded multi-line
    /// plain one; none of these is typed (a multi-line plain scalar holds a space).
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(if self.plain { resolve_plain(v) } else { Value::String(v.to_string()) })
    }
}

/// Whether `value`, a slice of `text`, was written unquoted: no quote right before it.
fn is_plain_at(text: &str, value: &str) -> bool {
    let start = (value.as_ptr() as usize).wrapping_sub(text.as_ptr() as usize);
    if start > text.len() {
        return false;
    }
    start == 0 || !matches!(text.as_bytes()[start - 1], b'\'' | b'"')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each plain scalar typed as PyYAML 6.0.3 types it (values observed with
    /// `yaml.safe_load`).
    #[test]
    fn plain_scalars_are_typed_as_pyyaml_types_them() {
        let n = |i: i64| Value::Number(Number::from(i));
        let f = |x: f64| Value::Number(Number::from(x));
        let s = |t: &str| Value::String(t.to_string());
        let cases = [
            ("~", Value::Null),
            ("", Value::Null),
            ("on", Value::Bool(true)),
            ("Off", Value::Bool(false)),
            ("yes", Value::Bool(true)),
            ("NO", Value::Bool(false)),
            ("y", s("y")),
            ("n", s("n")),
            ("oN", s("oN")),
            ("2", n(2)),
            ("-2", n(-2)),
            ("+2", n(2)),
            ("1_000", n(1000)),
            ("010", n(8)),
            ("08", s("08")),
            ("0o10", s("0o10")),
            ("0x10", n(16)),
            ("0b101", n(5)),
            ("1:30", n(90)),
            ("128.0", f(128.0)),
            ("1.0e+3", f(1000.0)),
            ("1.0e3", s("1.0e3")),
            ("1e3", s("1e3")),
            ("1.", f(1.0)),
            (".5", f(0.5)),
            ("-.5", s("-.5")),
            ("1_000.5", f(1000.5)),
            ("1:30.5", f(90.5)),
            ("-.inf", f(f64::NEG_INFINITY)),
            ("2024-01-01", s("2024-01-01")),
            ("abc", s("abc")),
        ];
        for (raw, want) in cases {
            assert_eq!(resolve_plain(raw), want, "{raw:?}");
        }
        assert!(
            matches!(resolve_plain(".nan"), Value::Number(x) if x.as_f64().is_some_and(f64::is_nan))
        );
    }

    #[test]
    fn only_unquoted_scalars_are_typed() {
        let text = "a: on\nb: 'on'\nc: \"on\"\nd: 1_000\ne: '1_000'\nf: 010\ng: [on, 'y', 1e3]\n\
                    h: &x off\ni: *x\nj: \"o\\n\"\nk: |\n  on\n";
        let v = load(text).unwrap();
        assert_eq!(v["a"], Value::Bool(true));
        assert_eq!(v["b"], Value::String("on".into()));
        assert_eq!(v["c"], Value::String("on".into()));
        assert_eq!(v["d"], Value::Number(Number::from(1000)));
        assert_eq!(v["e"], Value::String("1_000".into()));
        assert_eq!(v["f"], Value::Number(Number::from(8)));
        assert_eq!(v["g"][0], Value::Bool(true));
        assert_eq!(v["g"][1], Value::String("y".into()));
        assert_eq!(v["g"][2], Value::String("1e3".into()));
        assert_eq!(v["h"], Value::Bool(false));
        assert_eq!(v["i"], Value::Bool(false));
        assert_eq!(v["j"], Value::String("o\n".into()));
        assert_eq!(v["k"], Value::String("on\n".into()));
    }
}
