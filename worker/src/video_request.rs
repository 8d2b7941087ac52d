//! trtllm-serve's `POST /v1/videos/generations` request body: the reference's request fields
//! with their MLPerf defaults, in its declaration order, each dataset column's value checked and
//! converted as the reference's request model does, and the compact JSON written with unset
//! optional fields left out (the reference's `model_dump_json(exclude_none=True)`).

use serde_json::Value;

/// What a field holds (the reference's field type).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// A string.
    Text,
    /// A number, written with a decimal point (`5.0`).
    Float,
    /// A whole number.
    Int,
    /// One of a few strings.
    Choice(&'static [&'static str]),
}

/// A field's default: `None` leaves the field out of the body (the server's default applies).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fallback {
    None,
    Text(&'static str),
    Float(f64),
    Int(i64),
}

/// Every field after `prompt`, in the reference's declaration order, with its kind and default.
const FIELDS: [(&str, Kind, Fallback); 13] = [
    ("negative_prompt", Kind::Text, Fallback::None),
    ("size", Kind::Text, Fallback::Text("720x1280")),
    ("seconds", Kind::Float, Fallback::Float(5.0)),
    ("fps", Kind::Int, Fallback::Int(16)),
    ("num_inference_steps", Kind::Int, Fallback::Int(20)),
    ("guidance_scale", Kind::Float, Fallback::Float(4.0)),
    ("guidance_scale_2", Kind::Float, Fallback::Float(3.0)),
    ("seed", Kind::Int, Fallback::Int(42)),
    ("num_frames", Kind::Int, Fallback::Int(81)),
    ("boundary_ratio", Kind::Float, Fallback::Float(0.875)),
    ("latent_path", Kind::Text, Fallback::None),
    ("output_format", Kind::Choice(&["mp4", "avi", "auto"]), Fallback::Text("auto")),
    ("response_format", Kind::Choice(&["video_bytes", "video_path"]), Fallback::Text("video_path")),
];

/// The dataset columns a videogen row may carry besides `prompt` (its request fields, in
/// order; `FIELDS` names the same, with their kinds).
pub const VIDEO_COLUMNS: [&str; 13] = [
    "negative_prompt",
    "size",
    "seconds",
    "fps",
    "num_inference_steps",
    "guidance_scale",
    "guidance_scale_2",
    "seed",
    "num_frames",
    "boundary_ratio",
    "latent_path",
    "output_format",
    "response_format",
];

/// Why a column's value cannot go into the body.
pub const STREAM_REFUSED: &str = "api type videogen is non-streaming; remove the `stream` column \
     from the dataset (the reference refuses it the same way)";

/// Row column `name`'s value as its field holds it (an integer given as `16.0` or `"16"` becomes
/// `16`, a number given as `5` becomes `5.0`); `Ok(None)` for null (the field keeps its
/// default). An unknown column, `stream`, or a value of the wrong kind is an error naming it.
pub fn check_column(name: &str, value: &Value) -> Result<Option<Value>, String> {
    if name == "stream" {
        return Err(STREAM_REFUSED.to_string());
    }
    let Some((_, kind, _)) = FIELDS.iter().find(|(n, _, _)| *n == name) else {
        return Err(format!(
            "column {name:?} is not a videogen request field (the request takes prompt, {})",
            VIDEO_COLUMNS.join(", ")
        ));
    };
    if value.is_null() {
        return Ok(None);
    }
    let bad = |what: &str| format!("column {name:?} value {value} is not {what}");
    let checked = match *kind {
        Kind::Text => value.as_str().map(|_| value.clone()).ok_or_else(|| bad("a string"))?,
        Kind::Float => float_of(value).map(Value::from).ok_or_else(|| bad("a finite number"))?,
        Kind::Int => int_of(value).map(Value::from).ok_or_else(|| bad("a whole number"))?,
        Kind::Choice(options) => match value.as_str() {
            Some(s) if options.contains(&s) => value.clone(),
            _ => return Err(bad(&format!("one of {}", options.join(", ")))),
        },
    };
    Ok(Some(checked))
}

fn float_of(value: &Value) -> Option<f64> {
    let v = match value {
        Value::Number(n) => n.as_f64()?,
        Value::String(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    v.is_finite().then_some(v)
}

fn int_of(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().or_else(|| {
            let f = n.as_f64()?;
            (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
        }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Writes the whole body: `prompt`, then every field in order, the row's value where it has
/// one, else the default; a field without either is left out. Floats keep a decimal point.
pub fn write_body(
    out: &mut Vec<u8>,
    prompt: &str,
    columns: &[(String, Value)],
) -> Result<(), String> {
    for (name, value) in columns {
        check_column(name, value)?;
    }
    out.extend_from_slice(b"{\"prompt\":");
    json(out, &prompt);
    for (name, kind, default) in FIELDS {
        let given = columns.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        let value = match given.map(|v| check_column(name, v)).transpose()?.flatten() {
            Some(v) => v,
            None => match default {
                Fallback::None => continue,
                Fallback::Text(s) => Value::from(s),
                Fallback::Float(f) => Value::from(f),
                Fallback::Int(i) => Value::from(i),
            },
        };
        out.extend_from_slice(b",\"");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b"\":");
        match (kind, value.as_f64()) {
            (Kind::Float, Some(f)) => json(out, &f),
            _ => json(out, &value),
        }
    }
    out.push(b'}');
    Ok(())
}

fn json(out: &mut Vec<u8>, value: &impl serde::Serialize) {
    // Writing plain values into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(columns: &[(&str, Value)]) -> Result<String, String> {
        let columns: Vec<(String, Value)> =
            columns.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let mut out = Vec::new();
        write_body(&mut out, "a red kite over a beach", &columns)?;
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn the_column_list_names_the_fields_in_order() {
        let names: Vec<&str> = FIELDS.iter().map(|(n, _, _)| *n).collect();
        assert_eq!(names, VIDEO_COLUMNS);
    }

    #[test]
    fn the_defaults_go_in_the_reference_order_and_unset_optionals_are_left_out() {
        assert_eq!(
            body(&[]).unwrap(),
            r#"{"prompt":"a red kite over a beach","size":"720x1280","seconds":5.0,"fps":16,"num_inference_steps":20,"guidance_scale":4.0,"guidance_scale_2":3.0,"seed":42,"num_frames":81,"boundary_ratio":0.875,"output_format":"auto","response_format":"video_path"}"#
        );
    }

    #[test]
    fn row_columns_override_their_fields_in_place_whatever_their_order() {
        let got = body(&[
            ("response_format", json!("video_bytes")),
            ("latent_path", json!("/lustre/latent.pt")),
            ("seconds", json!(4)),
            ("fps", json!(24.0)),
            ("seed", json!("7")),
            ("negative_prompt", json!("blurry")),
            ("guidance_scale", json!(null)),
        ])
        .unwrap();
        assert_eq!(
            got,
            r#"{"prompt":"a red kite over a beach","negative_prompt":"blurry","size":"720x1280","seconds":4.0,"fps":24,"num_inference_steps":20,"guidance_scale":4.0,"guidance_scale_2":3.0,"seed":7,"num_frames":81,"boundary_ratio":0.875,"latent_path":"/lustre/latent.pt","output_format":"auto","response_format":"video_bytes"}"#
        );
    }

    #[test]
    fn unknown_columns_stream_and_wrong_kinds_are_refused_by_name() {
        let err = body(&[("negitive_prompt", json!("x"))]).unwrap_err();
        assert!(err.contains("\"negitive_prompt\" is not a videogen request field"), "{err}");
        assert!(err.contains("negative_prompt, size, seconds"), "{err}");
        assert_eq!(body(&[("stream", json!(false))]).unwrap_err(), STREAM_REFUSED);
        for (name, value, what) in [
            ("fps", json!(16.5), "a whole number"),
            ("fps", json!(true), "a whole number"),
            ("seconds", json!("five"), "a finite number"),
            ("size", json!(720), "a string"),
            ("output_format", json!("mkv"), "one of mp4, avi, auto"),
            ("response_format", json!("url"), "one of video_bytes, video_path"),
        ] {
            let err = body(&[(name, value)]).unwrap_err();
            assert!(err.contains(&format!("column {name:?}")) && err.contains(what), "{err}");
        }
    }
}
