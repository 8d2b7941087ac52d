//! Python semantics the BFCL checker relies on, over `PyValue`: `type(v)`, `==` and `in`,
//! `str.lower()` and the checker's `standardize_string`.

use crate::pyvalue::PyValue;

/// `type(v)` of a value from `json.loads` or a type converter; `Set` is a type no value has
/// (Java's `Set`, which the converter refuses anyway).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PyType {
    NoneType,
    Bool,
    Int,
    Float,
    Str,
    List,
    Dict,
    Set,
}

pub fn type_of(v: &PyValue) -> PyType {
    match v {
        PyValue::None => PyType::NoneType,
        PyValue::Bool(_) => PyType::Bool,
        PyValue::Int(_) => PyType::Int,
        PyValue::Float(_) => PyType::Float,
        PyValue::Str(_) => PyType::Str,
        PyValue::List(_) => PyType::List,
        PyValue::Dict(_) => PyType::Dict,
    }
}

/// A number as Python compares it: an integer's canonical digits, or a float.
enum Num<'a> {
    Int(std::borrow::Cow<'a, str>),
    Float(f64),
}

fn num(v: &PyValue) -> Option<Num<'_>> {
    match v {
        PyValue::Bool(b) => Some(Num::Int(if *b { "1" } else { "0" }.into())),
        PyValue::Int(d) => Some(Num::Int(d.as_str().into())),
        PyValue::Float(f) => Some(Num::Float(*f)),
        _ => None,
    }
}

fn num_eq(a: &Num<'_>, b: &Num<'_>) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        // `json.loads` gives every NaN the same object, and `in` and list `==` test identity
        // first, so a NaN from the response equals a NaN from the ground truth.
        (Num::Float(x), Num::Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        (Num::Int(i), Num::Float(f)) | (Num::Float(f), Num::Int(i)) => {
            // Python compares an int and a float exactly.
            f.is_finite()
                && f.fract() == 0.0
                && canonical_int(&format!("{f:.0}")) == canonical_int(i)
        }
    }
}

fn canonical_int(digits: &str) -> String {
    if digits == "-0" {
        "0".to_string()
    } else {
        digits.to_string()
    }
}

/// Python's `a == b`.
pub fn py_eq(a: &PyValue, b: &PyValue) -> bool {
    match (a, b) {
        (PyValue::None, PyValue::None) => true,
        (PyValue::Str(x), PyValue::Str(y)) => x == y,
        (PyValue::List(x), PyValue::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (PyValue::Dict(x), PyValue::Dict(y)) => {
            x.len() == y.len()
                && x.iter().all(|(k, v)| y.iter().any(|(k2, v2)| py_eq(k, k2) && py_eq(v, v2)))
        }
        _ => match (num(a), num(b)) {
            (Some(x), Some(y)) => num_eq(&x, &y),
            _ => false,
        },
    }
}

/// Python's `x in items`.
pub fn py_in(x: &PyValue, items: &[PyValue]) -> bool {
    items.iter().any(|i| py_eq(x, i))
}

/// A dict's value under a string key.
pub fn get<'a>(entries: &'a [(PyValue, PyValue)], key: &str) -> Option<&'a PyValue> {
    let key = PyValue::str(key);
    entries.iter().find(|(k, _)| py_eq(k, &key)).map(|(_, v)| v)
}

/// A string value as Rust text (a lone surrogate, which `json.loads` keeps, becomes U+FFFD).
pub fn text(units: &[u16]) -> String {
    String::from_utf16_lossy(units)
}

/// The checker's `standardize_string`: drop ` ,./-_*^`, lowercase, `'` to `"`.
pub fn standardize(s: &str) -> String {
    let kept: String = s.chars().filter(|c| !" ,./-_*^".contains(*c)).collect();
    kept.to_lowercase().replace('\'', "\"")
}

/// `standardize_string` applied where the checker applies it: strings only.
pub fn standardize_value(v: &PyValue) -> PyValue {
    match v {
        PyValue::Str(units) => PyValue::str(&standardize(&text(units))),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyvalue::json_loads;

    fn v(json: &str) -> PyValue {
        json_loads(json).unwrap()
    }

    #[test]
    fn equality_is_pythons_across_int_float_and_bool() {
        assert!(py_eq(&v("1"), &v("1.0")));
        assert!(py_eq(&v("true"), &v("1")));
        assert!(!py_eq(&v("1"), &v("1.5")));
        assert!(!py_eq(&v("\"1\""), &v("1")));
        assert!(py_eq(&v("[1, {\"a\": 2}]"), &v("[1.0, {\"a\": 2}]")));
        assert!(!py_eq(&v("[1, 2]"), &v("[2, 1]")));
        assert!(py_eq(&v("{\"a\": 1, \"b\": 2}"), &v("{\"b\": 2, \"a\": 1}")));
        assert!(py_eq(&v("NaN"), &v("NaN")));
        assert!(py_eq(&v("-0"), &v("0.0")));
        assert!(py_eq(&v("1152921504606846976"), &v("1152921504606846976.0")));
        assert!(!py_eq(&v("12345678901234567890"), &v("12345678901234567890.0")), "inexact");
    }

    #[test]
    fn standardize_drops_punctuation_and_case() {
        assert_eq!(standardize("April 1, 2024"), "april12024");
        assert_eq!(standardize("New_York-City./*^"), "newyorkcity");
        assert_eq!(standardize("it's"), "it\"s");
    }
}
