//! bfcl-eval's AST checker (`eval_checker/ast_eval/ast_checker.py`): whether a response's
//! function calls match a possible answer, by function name, required, unexpected and
//! optional parameters, types (Python's, or Java's and JavaScript's through `convert`), and
//! allowed values (strings, lists and dicts standardised). `Err` is where bfcl-eval raises.

use super::convert::{self, Raised};
use super::value::{get, py_eq, py_in, standardize_value, text, type_of, PyType};
use crate::pyvalue::PyValue;

/// How a subset's parameters are typed (`Language`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Python,
    Java,
    JavaScript,
}

/// One call of the response: `{name: arguments}`.
pub type Call = (PyValue, PyValue);

type Entries = [(PyValue, PyValue)];

fn dict<'a>(v: Option<&'a PyValue>, what: &str) -> Result<&'a Entries, Raised> {
    match v {
        Some(PyValue::Dict(e)) => Ok(e),
        _ => Err(format!("{what} is not a dict")),
    }
}

fn list<'a>(v: Option<&'a PyValue>, what: &str) -> Result<&'a [PyValue], Raised> {
    match v {
        Some(PyValue::List(l)) => Ok(l),
        _ => Err(format!("{what} is not a list")),
    }
}

fn str_of(v: Option<&PyValue>, what: &str) -> Result<String, Raised> {
    match v {
        Some(PyValue::Str(u)) => Ok(text(u)),
        _ => Err(format!("{what} is not a string")),
    }
}

/// `ast_checker(func_description, model_output, possible_answer, language, test_category,
/// "gpt-4o-2024-11-20-FC")`: the subset's name picks the checker.
pub fn check(
    functions: &[PyValue],
    calls: &[Call],
    possible: &[PyValue],
    language: Language,
    subset: &str,
) -> Result<bool, Raised> {
    if subset.contains("parallel") {
        return parallel_no_order(functions, calls, possible, language);
    }
    if subset.contains("multiple") {
        if calls.len() != possible.len() {
            return Ok(false);
        }
        let expected = first_key(possible.first())?;
        let description = find_description(functions, &expected)?;
        return simple(description, &calls[0], &possible[0], language);
    }
    if calls.len() != 1 {
        return Ok(false);
    }
    let description = functions.first().ok_or("no function description")?;
    let answer = possible.first().ok_or("no possible answer")?;
    simple(description, &calls[0], answer, language)
}

fn first_key(answer: Option<&PyValue>) -> Result<String, Raised> {
    match answer {
        Some(PyValue::Dict(e)) if !e.is_empty() => str_of(Some(&e[0].0), "a function name"),
        _ => Err("a possible answer is not a one-key dict".into()),
    }
}

fn find_description<'a>(functions: &'a [PyValue], name: &str) -> Result<&'a PyValue, Raised> {
    functions
        .iter()
        .find(|f| matches!(f, PyValue::Dict(e) if get(e, "name") == Some(&PyValue::str(name))))
        .ok_or_else(|| format!("no function description named {name}"))
}

fn parallel_no_order(
    functions: &[PyValue],
    calls: &[Call],
    possible: &[PyValue],
    language: Language,
) -> Result<bool, Raised> {
    if calls.len() != possible.len() {
        return Ok(false);
    }
    let mut matched = vec![false; calls.len()];
    for answer in possible {
        let description = find_description(functions, &first_key(Some(answer))?)?;
        let mut found = false;
        for (i, call) in calls.iter().enumerate() {
            if matched[i] {
                continue;
            }
            if simple(description, call, answer, language)? {
                matched[i] = true;
                found = true;
                break;
            }
        }
        if !found {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `convert_func_name` under an "-FC" model: a dotted name is sent and answered with `_`.
fn converted_name(name: &str) -> String {
    name.replace('.', "_")
}

/// `simple_function_checker`.
fn simple(
    description: &PyValue,
    call: &Call,
    answer: &PyValue,
    language: Language,
) -> Result<bool, Raised> {
    let description = dict(Some(description), "a function description")?;
    let params = dict(get(description, "parameters"), "parameters")?;
    let details = dict(get(params, "properties"), "parameters.properties")?;
    let required = list(get(params, "required"), "parameters.required")?;
    let answer = match answer {
        PyValue::Dict(e) if !e.is_empty() => dict(Some(&e[0].1), "a possible answer's params")?,
        _ => return Err("a possible answer is not a one-key dict".into()),
    };
    let name = converted_name(&str_of(get(description, "name"), "a function name")?);
    if !py_eq(&call.0, &PyValue::str(&name)) {
        return Ok(false);
    }
    let PyValue::Dict(args) = &call.1 else {
        return non_dict_arguments(&name, &call.1, required);
    };
    if required.iter().any(|p| !args.iter().any(|(k, _)| py_eq(k, p))) {
        return Ok(false);
    }
    for (param, value) in args {
        let PyValue::Str(param) = param else { return Ok(false) };
        let param = text(param);
        let (Some(detail), Some(allowed)) = (get(details, &param), get(answer, &param)) else {
            return Ok(false);
        };
        let allowed = list(Some(allowed), "a possible answer's values")?;
        if !check_param(dict(Some(detail), "a parameter")?, value, allowed, language)? {
            return Ok(false);
        }
    }
    // Every answered parameter not sent must be optional ("" among its values).
    Ok(answer.iter().all(|(p, values)| {
        args.iter().any(|(k, _)| py_eq(k, p))
            || matches!(values, PyValue::List(v) if py_in(&PyValue::str(""), v))
    }))
}

/// Arguments that are not an object: the checker tests `param in arguments` for each
/// required parameter (a list's items, a string's substrings), so a missing one is a wrong
/// call; past that it calls `.items()`, which raises.
fn non_dict_arguments(name: &str, args: &PyValue, required: &[PyValue]) -> Result<bool, Raised> {
    let raises = || format!("the arguments of {name} are not a JSON object");
    for p in required {
        let found = match (args, p) {
            (PyValue::List(items), _) => py_in(p, items),
            (PyValue::Str(hay), PyValue::Str(needle)) => {
                needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle.as_slice())
            }
            _ => return Err(raises()),
        };
        if !found {
            return Ok(false);
        }
    }
    Err(raises())
}

/// A parameter's declared type: `(type, converted, nested converted)`, and the value after the
/// language's conversion. `Ok(None)`: the value is refused before the type check.
type Typed = (String, PyType, Option<PyType>, PyValue);

fn python_type(t: &str) -> Result<PyType, Raised> {
    Ok(match t {
        "string" | "any" => PyType::Str,
        "integer" => PyType::Int,
        "float" => PyType::Float,
        "boolean" => PyType::Bool,
        "array" | "tuple" => PyType::List,
        "dict" => PyType::Dict,
        other => return Err(format!("type {other:?} is not in bfcl-eval's PYTHON_TYPE_MAPPING")),
    })
}

fn java_type(t: &str) -> Result<PyType, Raised> {
    Ok(match t {
        "byte" | "short" | "integer" | "long" => PyType::Int,
        "float" | "double" => PyType::Float,
        "boolean" => PyType::Bool,
        "char" | "String" | "any" => PyType::Str,
        "Array" | "ArrayList" | "Queue" | "Stack" => PyType::List,
        "Set" => PyType::Set,
        "HashMap" | "Hashtable" => PyType::Dict,
        other => return Err(format!("type {other:?} is not in bfcl-eval's JAVA_TYPE_CONVERSION")),
    })
}

fn js_type(t: &str) -> Result<PyType, Raised> {
    Ok(match t {
        "String" | "any" => PyType::Str,
        "integer" | "Bigint" => PyType::Int,
        "float" => PyType::Float,
        "Boolean" => PyType::Bool,
        "dict" => PyType::Dict,
        "array" => PyType::List,
        other => return Err(format!("type {other:?} is not in bfcl-eval's JS_TYPE_CONVERSION")),
    })
}

fn items_type(detail: &Entries) -> Result<String, Raised> {
    let items = dict(get(detail, "items"), "a parameter's items")?;
    str_of(get(items, "type"), "a parameter's items.type")
}

fn typed(detail: &Entries, value: &PyValue, language: Language) -> Result<Option<Typed>, Raised> {
    let t = str_of(get(detail, "type"), "a parameter's type")?;
    let (converted, nested, value) = match language {
        Language::Python => {
            let converted = python_type(&t)?;
            let nested = match t.as_str() {
                "array" | "tuple" => Some(python_type(&items_type(detail)?)?),
                _ => None,
            };
            let value = match (t.as_str(), value) {
                // Python's int to float, as the checker allows it.
                ("float", PyValue::Int(d)) => PyValue::Float(d.parse::<f64>().unwrap_or(f64::NAN)),
                _ => value.clone(),
            };
            (converted, nested, value)
        }
        Language::Java | Language::JavaScript => {
            let java = language == Language::Java;
            let converted = if java { java_type(&t)? } else { js_type(&t)? };
            let PyValue::Str(units) = value else { return Ok(None) };
            let s = text(units);
            let nested_name = match t.as_str() {
                "Array" | "ArrayList" | "array" => Some(items_type(detail)?),
                _ => None,
            };
            let nested = match &nested_name {
                Some(n) if java => Some(java_type(n)?),
                Some(n) => Some(js_type(n)?),
                None => None,
            };
            let value = if java {
                convert::java(&s, &t, nested_name.as_deref())?
            } else {
                convert::js(&s, &t, nested_name.as_deref())?
            };
            (converted, nested, value)
        }
    };
    Ok(Some((t, converted, nested, value)))
}

/// One parameter: its type (`type_checker`), then its value against the allowed ones.
fn check_param(
    detail: &Entries,
    value: &PyValue,
    allowed: &[PyValue],
    language: Language,
) -> Result<bool, Raised> {
    let Some((_, converted, nested, value)) = typed(detail, value, language)? else {
        return Ok(false);
    };
    let (valid, is_variable) = type_check(&value, allowed, converted, nested);
    if !valid {
        return Ok(false);
    }
    if !is_variable {
        match (converted, nested) {
            (PyType::Dict, _) => return Ok(dict_check(&value, allowed)),
            (PyType::List, Some(PyType::Dict)) => return Ok(list_dict_check(&value, allowed)),
            (PyType::Str, _) => return Ok(string_check(&value, allowed)),
            (PyType::List, _) => return Ok(list_check(&value, allowed)),
            _ => {}
        }
    }
    Ok(py_in(&value, allowed))
}

/// `get_possible_answer_type`: the type of the first answer that is not `""`.
fn answer_type(allowed: &[PyValue]) -> Option<PyType> {
    allowed.iter().find(|a| !py_eq(a, &PyValue::str(""))).map(type_of)
}

/// `type_checker`: `(valid, is_variable)`. A value of the answers' own type where the
/// declared type differs is a variable name, checked by value later.
fn type_check(
    value: &PyValue,
    allowed: &[PyValue],
    expected: PyType,
    nested: Option<PyType>,
) -> (bool, bool) {
    let answers = answer_type(allowed);
    let is_variable = answers.is_some_and(|t| t != expected);
    let mut nested_failed = false;
    if type_of(value) == expected {
        let Some(inner) = nested else { return (true, is_variable) };
        for item in allowed {
            let ok = match (item, value) {
                (PyValue::List(inner_allowed), PyValue::List(values)) => {
                    values.iter().all(|v| type_check(v, inner_allowed, inner, None).0)
                }
                _ => true,
            };
            if ok {
                return (true, is_variable);
            }
        }
        nested_failed = true;
    }
    if answers.is_some_and(|t| type_of(value) == t) {
        return (!nested_failed, true);
    }
    (false, false)
}

fn string_check(value: &PyValue, allowed: &[PyValue]) -> bool {
    let value = standardize_value(value);
    allowed.iter().filter(|a| matches!(a, PyValue::Str(_))).any(|a| standardize_value(a) == value)
}

/// An allowed value read as a list the way the checker indexes it: a list, or `""` (an
/// optional marker) as an empty one; anything else matches nothing.
fn as_items(v: &PyValue) -> Option<Vec<PyValue>> {
    match v {
        PyValue::List(items) => Some(items.clone()),
        PyValue::Str(u) if u.is_empty() => Some(Vec::new()),
        _ => None,
    }
}

fn list_check(value: &PyValue, allowed: &[PyValue]) -> bool {
    let PyValue::List(values) = value else { return false };
    let values = PyValue::List(values.iter().map(standardize_value).collect());
    allowed
        .iter()
        .filter_map(as_items)
        .any(|items| py_eq(&PyValue::List(items.iter().map(standardize_value).collect()), &values))
}

fn dict_check(value: &PyValue, allowed: &[PyValue]) -> bool {
    let PyValue::Dict(given) = value else { return false };
    allowed.iter().any(|answer| {
        let PyValue::Dict(answer) = answer else { return false };
        let values_ok = given.iter().all(|(k, v)| {
            let Some(options) = answer.iter().find(|(a, _)| py_eq(a, k)).map(|(_, o)| o) else {
                return false;
            };
            let options = as_items(options).unwrap_or_default();
            py_in(&standardize_value(v), &options.iter().map(standardize_value).collect::<Vec<_>>())
        });
        let keys_ok = answer.iter().all(|(k, options)| {
            // `"" in options`: a string always contains "".
            given.iter().any(|(g, _)| py_eq(g, k))
                || match options {
                    PyValue::List(o) => py_in(&PyValue::str(""), o),
                    PyValue::Str(_) => true,
                    _ => false,
                }
        });
        values_ok && keys_ok
    })
}

fn list_dict_check(value: &PyValue, allowed: &[PyValue]) -> bool {
    let PyValue::List(given) = value else { return false };
    allowed.iter().filter_map(as_items).any(|answer| {
        answer.len() == given.len()
            && given.iter().zip(&answer).all(|(g, a)| dict_check(g, std::slice::from_ref(a)))
    })
}
