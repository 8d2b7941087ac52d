//! `function_call_extractor`: a response's function calls as the JSON text the reference
//! writes (`[{"name": .., "arguments": ..}]`), from serialized `tool_calls`, a JSON array of
//! calls, or, last, calls written as text (`get_weather(city='London')`).

use std::sync::OnceLock;

use regex::Regex;

use super::error::AccuracyError;
use super::pyargs::{parse_arguments, Args};
use super::pyvalue::{dump, json_loads, PyValue};
use loadgen_py::string::strip as py_strip;

/// Names the reference never takes for a call: Python keywords and builtins, and words that
/// open an English sentence.
const SKIP_NAMES: &[&str] = &[
    "print",
    "return",
    "if",
    "for",
    "while",
    "def",
    "class",
    "import",
    "from",
    "with",
    "assert",
    "raise",
    "try",
    "except",
    "len",
    "str",
    "int",
    "float",
    "list",
    "dict",
    "set",
    "tuple",
    "type",
    "isinstance",
    "range",
    "enumerate",
    "zip",
    "map",
    "filter",
    "Note",
    "Example",
    "Here",
    "This",
    "The",
    "For",
];

fn call(name: PyValue, arguments: PyValue) -> PyValue {
    PyValue::Dict(vec![(PyValue::str("name"), name), (PyValue::str("arguments"), arguments)])
}

fn get<'a>(entries: &'a [(PyValue, PyValue)], key: &str) -> Option<&'a PyValue> {
    let key = PyValue::str(key);
    entries.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

fn dumps(calls: Vec<PyValue>) -> String {
    let mut out = String::new();
    dump(&PyValue::List(calls), &mut out);
    out
}

/// Serialized OpenAI `tool_calls`: every item an object with a `function` object; string
/// `arguments` are decoded when they are JSON.
fn from_tool_calls(data: &PyValue) -> Option<String> {
    let PyValue::List(items) = data else { return None };
    let mut calls = Vec::with_capacity(items.len());
    for item in items {
        let PyValue::Dict(entries) = item else { return None };
        let Some(PyValue::Dict(function)) = get(entries, "function") else { return None };
        let name = get(function, "name").cloned().unwrap_or_else(|| PyValue::str(""));
        let arguments = match get(function, "arguments") {
            None => PyValue::Dict(Vec::new()),
            Some(PyValue::Str(units)) => String::from_utf16(units)
                .ok()
                .and_then(|s| json_loads(&s))
                .unwrap_or_else(|| PyValue::Str(units.clone())),
            Some(other) => other.clone(),
        };
        calls.push(call(name, arguments));
    }
    (!calls.is_empty()).then(|| dumps(calls))
}

/// A JSON array of `{"name": .., "arguments": ..}` objects.
fn from_function_array(data: &PyValue) -> Option<String> {
    let PyValue::List(items) = data else { return None };
    let mut calls = Vec::with_capacity(items.len());
    for item in items {
        let PyValue::Dict(entries) = item else { return None };
        let name = get(entries, "name")?.clone();
        let arguments = get(entries, "arguments").cloned().unwrap_or(PyValue::Dict(Vec::new()));
        calls.push(call(name, arguments));
    }
    (!calls.is_empty()).then(|| dumps(calls))
}

fn patterns() -> &'static [Regex; 2] {
    static CELL: OnceLock<[Regex; 2]> = OnceLock::new();
    CELL.get_or_init(|| {
        [
            r"\b([A-Za-z_]\w*)[\s\x1c-\x1f]*\(",
            r"^[A-Za-z_]\w*(?:[\s\x1c-\x1f]*:[\s\x1c-\x1f]*\w+)?$",
        ]
        .map(|p| Regex::new(p).unwrap_or_else(|e| unreachable!("call pattern {p}: {e}")))
    })
}

/// The index of the `)` closing the `(` at `open`, skipping quoted text (bytes suffice: every
/// character it looks for is ASCII).
fn closing_paren(text: &[u8], open: usize) -> Option<usize> {
    let (mut depth, mut i) = (0i64, open);
    let (mut single, mut double) = (false, false);
    while i < text.len() {
        let ch = text[i];
        if ch == b'\\' && (single || double) {
            i += 2;
            continue;
        }
        match ch {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'(' if !single && !double => depth += 1,
            b')' if !single && !double => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Bare identifiers (`city`, `x: int`) read as a signature, not a call.
fn looks_like_signature(args: &str) -> bool {
    args.split(',').map(py_strip).filter(|p| !p.is_empty()).all(|p| patterns()[1].is_match(p))
}

fn from_text(text: &str) -> Result<Option<String>, AccuracyError> {
    let mut calls = Vec::new();
    let mut consumed: Vec<(usize, usize)> = Vec::new();
    for caps in patterns()[0].captures_iter(text) {
        let (whole, name) =
            (caps.get(0).map_or(0..0, |m| m.range()), caps.get(1).map_or("", |m| m.as_str()));
        if consumed.iter().any(|&(s, e)| s <= whole.start && whole.start < e)
            || SKIP_NAMES.contains(&name)
        {
            continue;
        }
        let open = whole.end - 1;
        let Some(close) = closing_paren(text.as_bytes(), open) else { continue };
        consumed.push((open, close + 1));
        let args = py_strip(&text[open + 1..close]);
        if !args.is_empty() && looks_like_signature(args) {
            continue;
        }
        let arguments = match parse_arguments(args) {
            Args::Keywords(entries) => PyValue::Dict(entries),
            Args::Unsupported(what) => {
                return Err(AccuracyError::UnsupportedCall { call: name.to_string(), what })
            }
        };
        calls.push(call(PyValue::str(name), arguments));
    }
    Ok((!calls.is_empty()).then(|| dumps(calls)))
}

/// Whether `text` is serialized OpenAI `tool_calls` (the reference's `has_native_tool_calls`).
pub fn has_tool_calls(text: &str) -> bool {
    json_loads(text).is_some_and(|data| from_tool_calls(&data).is_some())
}

/// The extractor: `None` for an empty text or no call found; an error names a text-form call
/// whose arguments need more of Python than literals and dotted names.
pub fn function_call(text: &str) -> Result<Option<String>, AccuracyError> {
    let text = py_strip(text);
    if text.is_empty() {
        return Ok(None);
    }
    if let Some(data) = json_loads(text) {
        if let Some(out) = from_tool_calls(&data).or_else(|| from_function_array(&data)) {
            return Ok(Some(out));
        }
    }
    from_text(text)
}
