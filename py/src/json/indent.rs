//! `json.dumps(value, indent=2)` as the reference writes its report files: 2-space indent,
//! `": "` separators, floats as Python's `repr` (`71405930.0`, `1.396597839942673e+18`), and
//! strings as serde_json writes them (UTF-8 kept, control characters escaped: what Python's
//! `ensure_ascii=False` writes). A NaN or infinite float is written `null` (Python would write
//! `NaN`), as docs/OUTPUT.md states.

use std::io;

use serde::Serialize;
use serde_json::ser::{Formatter, PrettyFormatter};

/// A pretty formatter that writes floats as Python does and non-finite floats as null.
struct PythonFormatter {
    inner: PrettyFormatter<'static>,
}

impl Formatter for PythonFormatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        if value.is_finite() {
            writer.write_all(crate::float_repr::repr(value).as_bytes())
        } else {
            writer.write_all(b"null")
        }
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(writer, f64::from(value))
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.inner.begin_array(writer)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.inner.end_array(writer)
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.inner.begin_array_value(writer, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.inner.end_array_value(writer)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.inner.begin_object(writer)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.inner.end_object(writer)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.inner.begin_object_key(writer, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.inner.begin_object_value(writer)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.inner.end_object_value(writer)
    }
}

/// Serializes `value` as the reference's `json.dumps(indent=2)` would (no trailing newline).
pub fn to_python_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(4096);
    let formatter = PythonFormatter { inner: PrettyFormatter::with_indent(b"  ") };
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    value.serialize(&mut serializer)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_python_indent_2() {
        #[derive(Serialize)]
        struct Doc {
            a: u64,
            b: Option<f64>,
            c: Vec<[f64; 2]>,
            d: Vec<u8>,
            e: std::collections::BTreeMap<String, f64>,
            f: f64,
        }
        let doc = Doc {
            a: 1,
            b: None,
            c: vec![[1.0, 2.5]],
            d: vec![],
            e: Default::default(),
            f: f64::NAN,
        };
        let text = String::from_utf8(to_python_json(&doc).unwrap()).unwrap();
        let expected = "{\n  \"a\": 1,\n  \"b\": null,\n  \"c\": [\n    [\n      1.0,\n      2.5\n    ]\n  ],\n  \"d\": [],\n  \"e\": {},\n  \"f\": null\n}";
        assert_eq!(text, expected);
    }
}
