//! A BFCL v4 sample's request parts as the reference builds them: its question flattened to
//! chat messages (`_build_messages_from_question`) and its functions as OpenAI tools
//! (bfcl-eval's `convert_to_tool` with `GORILLA_TO_OPENAPI`, OpenAI completions style). Values
//! are `PyValue`s so dict order and `json.dumps` text stay the reference's.

use loadgen_accuracy::pyvalue::{dict_insert, PyValue};

/// bfcl-eval's `GORILLA_TO_OPENAPI`.
fn openapi_type(t: &str) -> Option<&'static str> {
    Some(match t {
        "integer" | "byte" | "short" | "long" | "Bigint" => "integer",
        "number" | "float" | "double" => "number",
        "string" | "any" | "char" | "Any" | "String" => "string",
        "boolean" | "bool" => "boolean",
        "array" | "list" | "tuple" | "ArrayList" | "Array" | "Queue" | "Stack" => "array",
        "dict" | "object" | "HashMap" | "Hashtable" => "object",
        _ => return None,
    })
}

type Entries = Vec<(PyValue, PyValue)>;

fn key(k: &str) -> PyValue {
    PyValue::str(k)
}

fn get<'a>(entries: &'a Entries, k: &str) -> Option<&'a PyValue> {
    entries.iter().find(|(e, _)| *e == key(k)).map(|(_, v)| v)
}

fn get_mut<'a>(entries: &'a mut Entries, k: &str) -> Option<&'a mut PyValue> {
    entries.iter_mut().find(|(e, _)| *e == key(k)).map(|(_, v)| v)
}

fn text(v: Option<&PyValue>) -> Option<String> {
    match v {
        Some(PyValue::Str(u)) => Some(String::from_utf16_lossy(u)),
        _ => None,
    }
}

fn dict_mut<'a>(v: Option<&'a mut PyValue>, what: &str) -> Result<&'a mut Entries, String> {
    match v {
        Some(PyValue::Dict(e)) => Ok(e),
        _ => Err(format!("{what} is missing or not an object")),
    }
}

/// `mapping[t]` of an `items.type`, which bfcl-eval indexes without a default.
fn mapped_items_type(items: &mut Entries, what: &str) -> Result<String, String> {
    let t = text(get(items, "type")).ok_or_else(|| format!("{what}.items has no type"))?;
    let mapped =
        openapi_type(&t).ok_or_else(|| format!("{what}.items.type {t:?} is not a BFCL type"))?;
    dict_insert(items, key("type"), PyValue::str(mapped));
    Ok(mapped.to_string())
}

/// `_cast_to_openai_type(properties, GORILLA_TO_OPENAPI)`.
fn cast_properties(properties: &mut Entries) -> Result<(), String> {
    for (name, value) in properties.iter_mut() {
        let what = text(Some(name)).unwrap_or_default();
        let prop = dict_mut(Some(value), &format!("property {what}"))?;
        let mapped = match text(get(prop, "type")) {
            None => "string",
            Some(t) => {
                if t == "float" {
                    dict_insert(prop, key("format"), PyValue::str("float"));
                    let description = text(get(prop, "description"))
                        .ok_or_else(|| format!("float property {what} has no description"))?;
                    let more = format!("{description} This is a float type value.");
                    dict_insert(prop, key("description"), PyValue::str(&more));
                }
                openapi_type(&t).unwrap_or("string")
            }
        };
        dict_insert(prop, key("type"), PyValue::str(mapped));
        if mapped != "array" && mapped != "object" {
            continue;
        }
        if get(prop, "properties").is_some() {
            cast_properties(dict_mut(get_mut(prop, "properties"), &what)?)?;
        } else if get(prop, "items").is_some() {
            let items = dict_mut(get_mut(prop, "items"), &what)?;
            match mapped_items_type(items, &what)?.as_str() {
                "array" if get(items, "items").is_some() => {
                    mapped_items_type(dict_mut(get_mut(items, "items"), &what)?, &what)?;
                }
                "object" if get(items, "properties").is_some() => {
                    cast_properties(dict_mut(get_mut(items, "properties"), &what)?)?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// `convert_to_tool(functions, GORILLA_TO_OPENAPI, ModelStyle.OPENAI_COMPLETIONS)`: a dotted
/// name with `_`, `parameters.type` `object`, the property types mapped; each wrapped as
/// `{"type": "function", "function": …}`. `Err` says where bfcl-eval would raise.
pub(super) fn convert_to_tools(functions: &PyValue) -> Result<PyValue, String> {
    let PyValue::List(functions) = functions else {
        return Err("function is not a list".into());
    };
    let mut tools = Vec::with_capacity(functions.len());
    for function in functions {
        let mut item = function.clone();
        let PyValue::Dict(entries) = &mut item else {
            return Err("a function is not an object".into());
        };
        let name = text(get(entries, "name")).ok_or("a function has no name")?;
        if name.contains('.') {
            dict_insert(entries, key("name"), PyValue::str(&name.replace('.', "_")));
        }
        let params = dict_mut(get_mut(entries, "parameters"), &format!("{name}.parameters"))?;
        dict_insert(params, key("type"), PyValue::str("object"));
        cast_properties(dict_mut(get_mut(params, "properties"), &format!("{name} properties"))?)?;
        tools.push(PyValue::Dict(vec![
            (key("type"), PyValue::str("function")),
            (key("function"), item),
        ]));
    }
    Ok(PyValue::List(tools))
}

/// `_build_messages_from_question`: every message of every turn as `{role, content}`, a
/// missing or empty content as `""`.
pub(super) fn messages(question: &PyValue) -> Result<PyValue, String> {
    let PyValue::List(turns) = question else { return Err("question is not a list".into()) };
    let mut out = Vec::new();
    for turn in turns {
        let PyValue::List(msgs) = turn else { return Err("a turn is not a list".into()) };
        for msg in msgs {
            let PyValue::Dict(entries) = msg else {
                return Err("a message is not an object".into());
            };
            let role = get(entries, "role").cloned().ok_or("a message has no role")?;
            let content = match get(entries, "content") {
                Some(c) if c.is_truthy() => c.clone(),
                _ => PyValue::str(""),
            };
            out.push(PyValue::Dict(vec![(key("role"), role), (key("content"), content)]));
        }
    }
    Ok(PyValue::List(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen_accuracy::pyvalue::{dump, json_loads};

    fn dumps(v: &PyValue) -> String {
        let mut out = String::new();
        dump(v, &mut out);
        out
    }

    #[test]
    fn functions_become_openai_tools_as_bfcl_eval_converts_them() {
        let functions = json_loads(
            r#"[{"name": "math.area", "description": "Area.", "parameters": {"type": "dict", "properties": {"r": {"type": "float", "description": "Radius."}, "xs": {"type": "array", "items": {"type": "tuple"}}, "m": {"type": "HashMap", "description": "M."}, "k": {"description": "K."}}, "required": ["r"]}}]"#,
        )
        .unwrap();
        let tools = convert_to_tools(&functions).unwrap();
        let want = r#"[{"type": "function", "function": {"name": "math_area", "description": "Area.", "parameters": {"type": "object", "properties": {"r": {"type": "number", "description": "Radius. This is a float type value.", "format": "float"}, "xs": {"type": "array", "items": {"type": "array"}}, "m": {"type": "object", "description": "M."}, "k": {"description": "K.", "type": "string"}}, "required": ["r"]}}}]"#;
        assert_eq!(dumps(&tools), want);
        let bad = json_loads(
            r#"[{"name": "f", "parameters": {"properties": {"x": {"type": "float"}}}}]"#,
        )
        .unwrap();
        assert!(convert_to_tools(&bad).unwrap_err().contains("no description"));
    }

    #[test]
    fn the_question_is_flattened_with_null_content_as_empty() {
        let q = json_loads(
            r#"[[{"role": "system", "content": "S"}, {"role": "user", "content": null, "x": 1}], [{"role": "user", "content": "U"}]]"#,
        )
        .unwrap();
        let want = r#"[{"role": "system", "content": "S"}, {"role": "user", "content": ""}, {"role": "user", "content": "U"}]"#;
        assert_eq!(dumps(&messages(&q).unwrap()), want);
    }
}
