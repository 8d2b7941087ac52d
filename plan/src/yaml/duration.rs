//! Durations as the reference writes them (`_parse_duration_suffix`): `600s`, `10m`, `1h`,
//! `600000ms` or a plain integer of milliseconds; `--duration`, `--max-duration` and the YAML
//! duration keys read them alike.

/// Parses `600s`, `10m`, `1h`, `600000ms` or a plain integer (milliseconds).
pub fn parse_duration_ms(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1_000.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60_000.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3_600_000.0)
    } else {
        (t, 1.0)
    };
    let bad = || format!("{text:?} is not a duration (use 600s, 10m, 1h, 600000ms or ms)");
    let value: f64 = number.trim().parse().map_err(|_| bad())?;
    if !(value.is_finite() && value >= 0.0) || number.trim().starts_with(['+', '-']) {
        return Err(bad());
    }
    let ms = value * scale;
    if ms.fract() != 0.0 || ms > u64::MAX as f64 {
        return Err(format!("{text:?} is not a whole number of milliseconds"));
    }
    Ok(ms as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_the_reference() {
        for (text, ms) in [
            ("600s", 600_000),
            ("10m", 600_000),
            ("600000ms", 600_000),
            ("600000", 600_000),
            ("1h", 3_600_000),
            ("1.5s", 1_500),
            ("0", 0),
        ] {
            assert_eq!(parse_duration_ms(text), Ok(ms), "{text}");
        }
        for text in ["", "ten", "-5s", "1.5ms", "5d", "s"] {
            assert!(parse_duration_ms(text).is_err(), "{text}");
        }
    }
}
