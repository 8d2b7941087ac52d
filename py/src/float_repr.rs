//! Python's `repr(float)` (and `str(float)`, the same since Python 3.2): the report files, the
//! summaries and the accuracy strings print floats as the reference's Python does.

/// `repr(value)`: the shortest digits that read back to the same float, positional for decimal
/// exponents in [-4, 16) with `.0` on integral values (`71405930.0`, `0.0001`), scientific
/// otherwise with a signed two-digit-or-more exponent (`1e-05`, `1.5e+16`); `nan`, `inf`,
/// `-inf`.
pub fn repr(value: f64) -> String {
    if value.is_nan() {
        return "nan".to_string();
    }
    if value.is_infinite() {
        return if value > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    // Rust's `{:e}` and `{}` both give the shortest round-trip digits ("-1.2345e-7").
    let sci = format!("{value:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..16).contains(&exponent) {
        let plain = format!("{value}");
        return if plain.contains('.') { plain } else { format!("{plain}.0") };
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected strings are CPython's `repr`.
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
            (100.0, "100.0"),
            (66.6667, "66.6667"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (-1.5e16, "-1.5e+16"),
            (9999999999999998.0, "9999999999999998.0"),
            (0.0001, "0.0001"),
            (0.00012, "0.00012"),
            (1e-5, "1e-05"),
            (-1e-5, "-1e-05"),
            (1.25e-7, "1.25e-07"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (0.1, "0.1"),
            (1428.6493307785083, "1428.6493307785083"),
            (1e100, "1e+100"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (value, expected) in cases {
            assert_eq!(repr(value), expected, "{value:e}");
        }
    }
}
