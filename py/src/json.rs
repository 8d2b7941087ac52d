//! JSON written the way the reference's Python writes it: 2-space indent, `": "`
//! separators, and floats as Python's `repr` (`71405930.0`, `1.396597839942673e+18`).

use std::io;

use serde::Serialize;
use serde_json::ser::{Formatter, PrettyFormatter};

/// Formats a finite f64 exactly as Python's `repr(float)`: the shortest round-trip
/// digits, positional for decimal exponents in [-4, 16), scientific otherwise.
pub fn python_float_repr(value: f64) -> String {
    if value == 0.0 {
        return if value.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e-7".
    let sci = format!("{value:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let mut out = String::with_capacity(digits.len() + 8);
    out.push_str(sign);
    if (-4..16).contains(&exponent) {
        if exponent >= 0 {
            let int_len = exponent as usize + 1;
            if digits.len() <= int_len {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', int_len - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        } else {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exponent - 1) as usize));
            out.push_str(&digits);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exponent.abs()));
    }
    out
}

/// A pretty formatter that writes floats as Python does and non-finite floats as null.
struct PythonFormatter {
    inner: PrettyFormatter<'static>,
}

impl Formatter for PythonFormatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        if value.is_finite() {
            writer.write_all(python_float_repr(value).as_bytes())
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
    fn floats_print_as_python_repr() {
        let cases = [
            (71405930.0, "71405930.0"),
            (74193186.445, "74193186.445"),
            (1.396597839942673e18, "1.396597839942673e+18"),
            (554157.0, "554157.0"),
            (8729395.000000002, "8729395.000000002"),
            (-7473.128205128205, "-7473.128205128205"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (0.0001, "0.0001"),
            (0.00012, "0.00012"),
            (1e-5, "1e-05"),
            (1.25e-7, "1.25e-07"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (0.1, "0.1"),
            (1428.6493307785083, "1428.6493307785083"),
            (1e100, "1e+100"),
        ];
        for (value, expected) in cases {
            assert_eq!(python_float_repr(value), expected);
        }
    }

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
