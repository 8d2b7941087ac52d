//! The headers a run adds to every request (`--header` lines, the authorization): RFC 9110's
//! syntax for names and values, the headers the protocol writes itself, and the size limits,
//! all checked before any request is built. Messages name the header, never its value, which
//! may be a secret.

use crate::error::AppError;

/// Longest value of one added header (`--header`, the API key's `Authorization`). Servers
/// commonly refuse far less (nginx 8 KiB a line, uvicorn 16 KiB a head by default); the limit
/// only keeps a run's memory bounded, since every request of the run carries the value.
pub const MAX_HEADER_VALUE_BYTES: usize = 1024 * 1024;

/// Longest block of added header lines together (`Name: value\r\n` each, the authorization
/// included).
pub const MAX_HEADER_BLOCK_BYTES: usize = 2 * 1024 * 1024;

/// Headers the requests already carry or that change how the exchange runs, so `--header`
/// cannot set them: the protocol's own, and `Expect` (a `100-continue` asks the client to wait
/// for an interim answer before the body, which the requests never do: they are sent whole).
const PROTOCOL_HEADERS: [&str; 7] = [
    "host",
    "content-type",
    "content-length",
    "accept",
    "transfer-encoding",
    "connection",
    "expect",
];

/// A byte RFC 9110 §5.5 forbids in a field value: a control character other than HTAB
/// (0x00–0x08, 0x0A–0x1F, 0x7F). CR, LF and NUL are among them; obs-text (0x80–0xFF) is not.
fn forbidden_value_byte(b: u8) -> bool {
    (b < 0x20 && b != b'\t') || b == 0x7F
}

/// The first forbidden byte of `value`: its 1-based position and the byte.
pub(crate) fn first_control_byte(value: &str) -> Option<(usize, u8)> {
    value.bytes().enumerate().find(|&(_, b)| forbidden_value_byte(b)).map(|(i, b)| (i + 1, b))
}

/// A name RFC 9110 §5.1 accepts: a non-empty token (`tchar`: letters, digits and
/// ``!#$%&'*+-.^_`|~``).
fn is_token(name: &str) -> bool {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    !name.is_empty() && name.bytes().all(tchar)
}

/// Why `value`, sent under `what`, cannot go in a header: a forbidden byte (by position and
/// hex, never the value) or a size past `MAX_HEADER_VALUE_BYTES`.
pub(crate) fn check_value(what: &str, value: &str) -> Result<(), AppError> {
    if let Some((at, byte)) = first_control_byte(value) {
        let kind = match byte {
            b'\r' | b'\n' => "a line break",
            0 => "a NUL byte",
            _ => "a control character",
        };
        return Err(AppError::Input(format!(
            "{what}: byte {at} of the value is 0x{byte:02X}, {kind}, which HTTP does not allow in \
             a header value (RFC 9110 §5.5: only tab, space and visible characters); remove it"
        )));
    }
    if value.len() > MAX_HEADER_VALUE_BYTES {
        return Err(AppError::Input(format!(
            "{what}: the value is {} bytes, past the limit of {MAX_HEADER_VALUE_BYTES} \
             (MAX_HEADER_VALUE_BYTES); send a shorter value",
            value.len()
        )));
    }
    Ok(())
}

/// `NAME: VALUE` → the name (an RFC 9110 token) and the trimmed value (no control byte but
/// tab, within `MAX_HEADER_VALUE_BYTES`).
pub(crate) fn parse_header(line: &str) -> Result<(String, String), AppError> {
    let Some((name, value)) = line.split_once(':') else {
        return Err(AppError::Input(format!(
            "--header {:?} is not NAME: VALUE; give e.g. --header 'X-Team: infra'",
            crate::redact::redact(line)
        )));
    };
    let name = name.trim();
    if !is_token(name) {
        return Err(AppError::Input(format!(
            "--header {:?}: {name:?} is not a header name (an RFC 9110 token: letters, digits \
             and !#$%&'*+-.^_`|~, no spaces)",
            format!("{name}: …")
        )));
    }
    if name.eq_ignore_ascii_case("expect") {
        return Err(AppError::Input(format!(
            "--header {name}: the requests are sent whole and never wait for a 100 Continue; \
             leave it out"
        )));
    }
    if PROTOCOL_HEADERS.iter().any(|h| name.eq_ignore_ascii_case(h)) {
        return Err(AppError::Input(format!(
            "--header {name}: the requests set {name} themselves; leave it out"
        )));
    }
    let value = value.trim();
    check_value(&format!("--header {name}"), value)?;
    Ok((name.to_string(), value.to_string()))
}

/// The added header lines together (`authorization` first, as the requests send it) within
/// `MAX_HEADER_BLOCK_BYTES`.
pub(crate) fn check_header_block(
    authorization: Option<&str>,
    headers: &[(String, String)],
) -> Result<(), AppError> {
    let line = |name: &str, value: &str| name.len() + value.len() + 4;
    let auth = authorization.map_or(0, |v| line("Authorization", v));
    let total = auth + headers.iter().map(|(n, v)| line(n, v)).sum::<usize>();
    if total > MAX_HEADER_BLOCK_BYTES {
        return Err(AppError::Input(format!(
            "the added headers (--header, the authorization) come to {total} bytes a request, \
             past the limit of {MAX_HEADER_BLOCK_BYTES} (MAX_HEADER_BLOCK_BYTES); send fewer or \
             shorter headers"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_value_with_a_control_byte_is_refused_naming_the_header_and_the_byte() {
        for (byte, kind) in [
            (0x01u8, "a control character"),
            (0x1B, "a control character"),
            (0x7F, "a control character"),
            (0x0B, "a control character"),
            (b'\r', "a line break"),
            (b'\n', "a line break"),
            (0, "a NUL byte"),
        ] {
            let line = format!("X-Secret: sk{}live", byte as char);
            let err = parse_header(&line).unwrap_err();
            let text = err.to_string();
            assert_eq!(err.exit_code(), 2, "{text}");
            assert!(text.contains("--header X-Secret"), "{text}");
            assert!(
                text.contains(&format!("byte 3 of the value is 0x{byte:02X}, {kind}")),
                "{text}"
            );
            assert!(
                !text.contains("sk") && !text.contains("live"),
                "the value stays hidden: {text}"
            );
        }
    }

    #[test]
    fn tab_space_visible_and_non_ascii_bytes_are_allowed_in_a_value() {
        let (name, value) = parse_header("X-A:  a\tb ~ é \"q\" ").unwrap();
        assert_eq!((name.as_str(), value.as_str()), ("X-A", "a\tb ~ é \"q\""));
    }

    #[test]
    fn a_header_name_must_be_a_token() {
        for bad in ["Bad Name: x", "X(y): x", "X\u{1}: x", ": x", "X/Y: x", "Ä: x"] {
            let err = parse_header(bad).unwrap_err().to_string();
            assert!(err.contains("is not a header name (an RFC 9110 token"), "{bad}: {err}");
        }
        assert!(parse_header("X-!#$%&'*+.^_`|~: x").is_ok());
    }

    #[test]
    fn expect_is_refused_with_the_protocol_headers() {
        let err = parse_header("Expect: 100-continue").unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("never wait for a 100 Continue"), "{err}");
        for name in ["Host", "content-length", "Transfer-Encoding", "Connection", "Accept"] {
            let err = parse_header(&format!("{name}: x")).unwrap_err().to_string();
            assert!(err.contains("the requests set") && err.contains("themselves"), "{err}");
        }
    }

    #[test]
    fn a_value_past_the_limit_is_refused_naming_the_limit_and_the_size() {
        let at_limit = format!("X-Big: {}", "a".repeat(MAX_HEADER_VALUE_BYTES));
        assert!(parse_header(&at_limit).is_ok());
        let over = format!("X-Big: {}", "a".repeat(MAX_HEADER_VALUE_BYTES + 1));
        let err = parse_header(&over).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let text = err.to_string();
        assert!(text.contains("--header X-Big: the value is 1048577 bytes"), "{text}");
        assert!(text.contains("MAX_HEADER_VALUE_BYTES"), "{text}");
    }

    #[test]
    fn the_header_block_is_limited_as_a_whole() {
        let value = "a".repeat(MAX_HEADER_VALUE_BYTES);
        let two = vec![("X-A".to_string(), value.clone()), ("X-B".to_string(), "b".into())];
        assert!(check_header_block(None, &two).is_ok());
        let err = check_header_block(Some(&value), &two).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("MAX_HEADER_BLOCK_BYTES"), "{err}");
        assert!(!err.to_string().contains("aaaa"), "{err}");
    }
}
