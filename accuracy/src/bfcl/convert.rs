//! bfcl-eval's Java and JavaScript type converters (`java_type_converter`,
//! `js_type_converter`): a parameter the model sent as a string, read as the language's
//! literal. `Err` is where bfcl-eval raises (a type it does not convert).

use std::sync::OnceLock;

use loadgen_py::string::strip as py_strip;
use regex::Regex;

use crate::pyvalue::{dict_insert, PyValue};

/// The checker's outcome where bfcl-eval raises instead of answering.
pub type Raised = String;

fn re(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).unwrap_or_else(|e| unreachable!("{pattern}: {e}")))
}

macro_rules! pattern {
    ($name:ident, $p:expr) => {
        fn $name() -> &'static Regex {
            static CELL: OnceLock<Regex> = OnceLock::new();
            re(&CELL, $p)
        }
    };
}

// Python's `$` also matches before a final newline; `\n?\z` says so. `\d` is ASCII here
// (Python's is any decimal digit, which `int()` also reads; BFCL's answers are ASCII).
pattern!(int_re, r"^-?[0-9]+\n?\z");
pattern!(java_float_re, r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?[fF]\n?\z");
pattern!(double_re, r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?\n?\z");
pattern!(long_re, r"^-?[0-9]+[lL]\n?\z");
pattern!(js_float_re, r"^-?[0-9]+(\.[0-9]+)?\n?\z");
pattern!(bigint_re, r"^-?[0-9]+n\n?\z");
pattern!(as_list_re, r"new\s+ArrayList<\w*>\(Arrays\.asList\((.+?)\)\)");
pattern!(add_block_re, r"(?s)new\s+ArrayList<\w*>\(\)\s*\{\{\s*(.+?)\s*\}\}");
pattern!(add_re, r"add\((.+?)\)");
pattern!(empty_list_re, r"new\s+ArrayList<\w*>\(\)");
pattern!(array_re, r"new\s+\w+\[\]\s*\{(.*?)\}");
pattern!(hashmap_re, r"(?s)new\s+HashMap<.*?>\s*\(\)\s*\{\s*\{?\s*(.*?)\s*\}?\s*\}");
pattern!(put_re, r#"put\("(.*?)",\s*(.*?)\)"#);
pattern!(empty_map_re, r"new\s+HashMap<.*?>\s*\(\)");
pattern!(
    js_2d_re,
    r"^(?:\[\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\]|\bnew\s+Array\(\s*\[.*?\]\s*(,\s*\[.*?\]\s*)*\))"
);
pattern!(js_inner_re, r"\[(.*?)\]");
pattern!(js_array_re, r"^(?:\[(.*?)\]|\bnew\s+Array\((.*?)\))");
pattern!(js_dict_re, r"^\{(.*?)\}");

fn js_pairs_re() -> &'static fancy_regex::Regex {
    static CELL: OnceLock<fancy_regex::Regex> = OnceLock::new();
    CELL.get_or_init(|| {
        let p = r"([^:]+):\s*(.*?)(?:,\s*(?=[^,]+:)|$)";
        fancy_regex::Regex::new(p).unwrap_or_else(|e| unreachable!("{p}: {e}"))
    })
}

/// Python's `int(s)`: white space around, a sign, ASCII digits (single `_` between them).
pub fn py_int(s: &str) -> Option<PyValue> {
    let s = py_strip(s);
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let ok = !body.is_empty()
        && !body.starts_with('_')
        && !body.ends_with('_')
        && !body.contains("__")
        && body.chars().all(|c| c.is_ascii_digit() || c == '_');
    if !ok {
        return None;
    }
    let digits: String = body.chars().filter(|c| *c != '_').collect();
    let digits = digits.trim_start_matches('0');
    Some(PyValue::Int(match (digits, neg) {
        ("", _) => "0".to_string(),
        (d, true) => format!("-{d}"),
        (d, false) => d.to_string(),
    }))
}

/// Python's `float(s)` (without `_` separators).
pub fn py_float(s: &str) -> Option<f64> {
    let s = py_strip(s);
    if s.contains('_') || s.is_empty() {
        return None;
    }
    s.parse::<f64>().ok()
}

/// Python's `s[1:-1]`.
fn inner(s: &str) -> String {
    let n = s.chars().count();
    s.chars().skip(1).take(n.saturating_sub(2)).collect()
}

fn strip_last(s: &str) -> &str {
    let mut it = s.char_indices();
    it.next_back().map_or(s, |(i, _)| &s[..i])
}

fn number(v: Option<PyValue>, s: &str) -> PyValue {
    v.unwrap_or_else(|| PyValue::str(s))
}

/// `java_type_converter(value, expected_type, nested_type)`.
pub fn java(value: &str, expected: &str, nested: Option<&str>) -> Result<PyValue, Raised> {
    let s = || PyValue::str(value);
    Ok(match expected {
        "byte" | "short" | "integer" if int_re().is_match(value) => number(py_int(value), value),
        "float" if java_float_re().is_match(value) => {
            let body = value.trim_end_matches('\n');
            number(py_float(strip_last(body)).map(PyValue::Float), value)
        }
        "double" if double_re().is_match(value) => {
            number(py_float(value).map(PyValue::Float), value)
        }
        "long" if long_re().is_match(value) => {
            number(py_int(strip_last(value.trim_end_matches('\n'))), value)
        }
        "boolean" if value == "true" || value == "false" => PyValue::Bool(value == "true"),
        "byte" | "short" | "integer" | "float" | "double" | "long" | "boolean" | "char"
        | "String" | "any" => s(),
        "Array" => java_array(value, nested)?,
        "ArrayList" => java_arraylist(value, nested)?,
        "HashMap" => java_hashmap(value),
        "Set" | "Hashtable" | "Queue" | "Stack" => {
            return Err(format!("bfcl-eval's java_type_converter does not convert {expected}"))
        }
        other => return Err(format!("bfcl-eval's java_type_converter: unsupported type {other}")),
    })
}

fn java_element(s: &str, nested: Option<&str>) -> Result<PyValue, Raised> {
    match nested {
        Some("char") | Some("String") => Ok(PyValue::str(&inner(s))),
        Some(t) => java(s, t, None),
        None => Ok(java_value(s)),
    }
}

fn java_arraylist(input: &str, nested: Option<&str>) -> Result<PyValue, Raised> {
    if let Some(c) = as_list_re().captures(input) {
        let body = c.get(1).map_or("", |m| m.as_str());
        let items: Result<Vec<_>, _> =
            body.split(',').map(|e| java_element(py_strip(e), nested)).collect();
        return Ok(PyValue::List(items?));
    }
    if let Some(c) = add_block_re().captures(input) {
        let adds = c.get(1).map_or("", |m| m.as_str());
        let items: Result<Vec<_>, _> = add_re()
            .captures_iter(adds)
            .map(|m| java_element(py_strip(m.get(1).map_or("", |g| g.as_str())), nested))
            .collect();
        return Ok(PyValue::List(items?));
    }
    if empty_list_re().is_match(input) {
        return Ok(PyValue::List(Vec::new()));
    }
    Ok(PyValue::str(input))
}

fn java_array(input: &str, nested: Option<&str>) -> Result<PyValue, Raised> {
    let Some(c) = array_re().captures(input) else { return Ok(PyValue::str(input)) };
    let body = c.get(1).map_or("", |m| m.as_str());
    let items: Result<Vec<_>, _> = body
        .split(',')
        .map(py_strip)
        .filter(|x| !x.is_empty())
        .map(|x| match nested {
            Some(t) => java(x, t, None),
            None => Ok(java_value(x)),
        })
        .collect();
    Ok(PyValue::List(items?))
}

fn java_hashmap(input: &str) -> PyValue {
    if let Some(c) = hashmap_re().captures(input) {
        let puts = c.get(1).map_or("", |m| m.as_str());
        let mut entries = Vec::new();
        if !py_strip(puts).is_empty() {
            for m in put_re().captures_iter(puts) {
                let key = m.get(1).map_or("", |g| g.as_str());
                let value = java_value(py_strip(m.get(2).map_or("", |g| g.as_str())));
                dict_insert(&mut entries, PyValue::str(key), value);
            }
        }
        return PyValue::Dict(entries);
    }
    if empty_map_re().is_match(input) {
        return PyValue::Dict(Vec::new());
    }
    PyValue::str(input)
}

/// `parse_java_value`: a literal without its type.
fn java_value(s: &str) -> PyValue {
    match s {
        "true" => return PyValue::Bool(true),
        "false" => return PyValue::Bool(false),
        _ => {}
    }
    if s.starts_with('"') && s.ends_with('"') {
        return PyValue::str(&inner(s));
    }
    if long_re().is_match(s) {
        if let Some(v) = py_int(strip_last(s)) {
            return v;
        }
    }
    if java_float_re().is_match(s) {
        if let Some(f) = py_float(strip_last(s)) {
            return PyValue::Float(f);
        }
    }
    py_int(s).or_else(|| py_float(s).map(PyValue::Float)).unwrap_or_else(|| PyValue::str(s))
}

/// `js_type_converter(value, expected_type, nested_type)`.
pub fn js(value: &str, expected: &str, nested: Option<&str>) -> Result<PyValue, Raised> {
    let quoted = |q: char| value.starts_with(q) && value.ends_with(q);
    Ok(match expected {
        "String" if quoted('"') || quoted('\'') => PyValue::str(&inner(value)),
        "integer" if int_re().is_match(value) => number(py_int(value), value),
        "float" if js_float_re().is_match(value) => {
            number(py_float(value).map(PyValue::Float), value)
        }
        "Bigint" if bigint_re().is_match(value) => match py_int(strip_last(value)) {
            Some(v) => v,
            None => return Err(format!("int({:?}) raises in js_type_converter", value)),
        },
        "Boolean" if value == "true" || value == "false" => PyValue::Bool(value == "true"),
        "String" | "integer" | "float" | "Bigint" | "Boolean" | "any" => PyValue::str(value),
        "dict" => js_dict(value),
        "array" => js_array(value, nested),
        other => return Err(format!("bfcl-eval's js_type_converter: unsupported type {other}")),
    })
}

fn group<'a>(c: &regex::Captures<'a>, i: usize) -> Option<&'a str> {
    c.get(i).map(|m| m.as_str())
}

/// `parse_js_collection(code, "array", nested_type)`; any failure gives the text back.
fn js_array(code: &str, nested: Option<&str>) -> PyValue {
    let code = py_strip(code);
    if let Some(m) = js_2d_re().find(code) {
        let mut rows = Vec::new();
        for (idx, c) in js_inner_re().captures_iter(m.as_str()).enumerate() {
            let mut row = py_strip(group(&c, 1).unwrap_or(""));
            if idx == 0 && row.starts_with('[') {
                row = &row[1..];
            }
            rows.push(PyValue::List(row.split(',').map(|e| js_value(py_strip(e))).collect()));
        }
        return PyValue::List(rows);
    }
    let Some(c) = js_array_re().captures(code) else { return PyValue::str(code) };
    let body = py_strip(group(&c, 1).or_else(|| group(&c, 2)).unwrap_or(""));
    let elements: Vec<&str> = if body.is_empty() { Vec::new() } else { body.split(',').collect() };
    let mut out = Vec::with_capacity(elements.len());
    for e in elements {
        let e = py_strip(e);
        let v = match nested {
            Some(t) if e.starts_with('\'') || e.starts_with('"') => js(e, t, Some("String")),
            Some(t) => js(e, t, None),
            None => Ok(js_value(e)),
        };
        match v {
            Ok(v) => out.push(v),
            // The bare `except:` around it gives the code back.
            Err(_) => return PyValue::str(code),
        }
    }
    PyValue::List(out)
}

/// `parse_js_collection(code, "dict")`.
fn js_dict(code: &str) -> PyValue {
    let code = py_strip(code);
    if code == "{}" {
        return PyValue::Dict(Vec::new());
    }
    let Some(c) = js_dict_re().captures(code) else { return PyValue::str(code) };
    let content = group(&c, 1).unwrap_or("");
    let mut entries = Vec::new();
    for m in js_pairs_re().captures_iter(content) {
        let Ok(m) = m else { return PyValue::str(code) };
        let key = py_strip(m.get(1).map_or("", |g| g.as_str())).trim_matches(['\'', '"']);
        let value = py_strip(m.get(2).map_or("", |g| g.as_str()));
        let parsed = if value.starts_with('[') && value.ends_with(']') {
            js_array(value, None)
        } else if value.starts_with('{') && value.ends_with('}') {
            js_dict(value)
        } else {
            js_value(value.trim_matches(['\'', '"']))
        };
        dict_insert(&mut entries, PyValue::str(key), parsed);
    }
    PyValue::Dict(entries)
}

/// `parse_js_value`.
fn js_value(s: &str) -> PyValue {
    let s = py_strip(s);
    match s {
        "true" => return PyValue::Bool(true),
        "false" => return PyValue::Bool(false),
        _ => {}
    }
    let quoted = |q: char| s.starts_with(q) && s.ends_with(q);
    if quoted('"') || quoted('\'') {
        return PyValue::str(&inner(s));
    }
    py_int(s).or_else(|| py_float(s).map(PyValue::Float)).unwrap_or_else(|| PyValue::str(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyvalue::json_loads;

    fn v(json: &str) -> PyValue {
        json_loads(json).unwrap()
    }

    /// bfcl-eval's own `test_java_type_converter` cases.
    #[test]
    fn java_converter_matches_bfcl_evals_tests() {
        let cases: &[(&str, &str, Option<&str>, &str)] = &[
            ("true", "boolean", None, "true"),
            ("123", "integer", None, "123"),
            ("-3.14f", "float", None, "-3.14"),
            ("3.14", "double", None, "3.14"),
            ("-123L", "long", None, "-123"),
            ("a", "char", None, "\"a\""),
            ("new int[]{1, 2, 3}", "Array", None, "[1, 2, 3]"),
            ("new int[] { }", "Array", Some("integer"), "[]"),
            ("new ArrayList<>(Arrays.asList(\"a\", \"b\"))", "ArrayList", None, "[\"a\", \"b\"]"),
            (
                "new ArrayList<Float>() {{ add(1.0f); add(2.0f); }}",
                "ArrayList",
                Some("float"),
                "[1.0, 2.0]",
            ),
            ("new ArrayList<>()", "ArrayList", None, "[]"),
            (
                "new HashMap<String, Object>() {{ put(\"k1\", 1); put(\"k2\", \"v\"); }}",
                "HashMap",
                None,
                "{\"k1\": 1, \"k2\": \"v\"}",
            ),
            ("new HashMap<>() {{ }}", "HashMap", None, "{}"),
            ("new long[]{1L, 2, 3L}", "Array", Some("long"), "[1, \"2\", 3]"),
            ("3e3F", "float", None, "3000.0"),
            ("abc", "integer", None, "\"abc\""),
        ];
        for (input, ty, nested, want) in cases {
            assert_eq!(java(input, ty, *nested).unwrap(), v(want), "{input} as {ty}");
        }
        assert!(java("x", "Set", None).is_err());
    }

    /// bfcl-eval's own `test_js_type_converter*` cases.
    #[test]
    fn js_converter_matches_bfcl_evals_tests() {
        let cases: &[(&str, &str, Option<&str>, &str)] = &[
            ("true", "Boolean", None, "true"),
            ("123n", "Bigint", None, "123"),
            ("'abc'", "String", None, "\"abc\""),
            ("abc", "String", None, "\"abc\""),
            ("3.14", "float", None, "3.14"),
            ("[1, 'two', true]", "array", None, "[1, \"two\", true]"),
            ("new Array(4, 5, 6)", "array", Some("integer"), "[4, 5, 6]"),
            ("[\"hello\", \"world\"]", "array", Some("String"), "[\"hello\", \"world\"]"),
            (" [ [ 1, 2 ], [ 3,   4], [5, 6]]", "array", Some("array"), "[[1, 2], [3, 4], [5, 6]]"),
            (
                "{'key1': 123, 'key2': 'value', 'key3': false}",
                "dict",
                None,
                "{\"key1\": 123, \"key2\": \"value\", \"key3\": false}",
            ),
            ("{}", "dict", None, "{}"),
            ("[]", "array", None, "[]"),
        ];
        for (input, ty, nested, want) in cases {
            assert_eq!(js(input, ty, *nested).unwrap(), v(want), "{input} as {ty}");
        }
        let d = js(
            "{\"initialState\": initialStateObject, \"middlewares\": [\"loggerMiddleware\"], \"enhancers\": [\"applyMiddleware\", \"myMiddleWare\"]}",
            "dict",
            None,
        )
        .unwrap();
        let want = "{\"initialState\": \"initialStateObject\", \"middlewares\": [\"loggerMiddleware\"], \"enhancers\": [\"applyMiddleware\", \"myMiddleWare\"]}";
        assert_eq!(d, v(want));
    }
}
