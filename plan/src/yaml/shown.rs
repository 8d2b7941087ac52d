//! A YAML error as the user sees it: the values it quotes cut short and redacted, and none at
//! all under a key that holds a secret.
//!
//! serde_yaml_ng quotes the offending value in its messages (`invalid type: string "…",
//! expected a sequence`), whole: a `headers:` written as one string would print its
//! `Authorization`, an over-long all-digit `api_key:` its key, and a link to a file that is
//! no YAML (`/etc/passwd`) the whole file.

use crate::redact::{is_secret_key, redact};

/// The most characters of a value a YAML error quotes; past it the excerpt ends with `…`.
pub const YAML_ERROR_EXCERPT_CHARS: usize = 60;

/// What stands for a value under a secret key.
const NOT_SHOWN: &str = "(not shown: the key holds a secret)";

/// `message` (serde_yaml_ng's, which starts with the key path) with each quoted value (`"…"`
/// or `` `…` ``) before the `expected …` part cut to `YAML_ERROR_EXCERPT_CHARS` and
/// redacted, or replaced by a note when the path names a secret (`api_key`, `headers`,
/// `*_token`, …).
pub fn shown_error(message: &str) -> String {
    let secret = error_path(message).is_some_and(path_is_secret);
    let mut out = String::with_capacity(message.len().min(512));
    let mut rest = message;
    let mut expected = false;
    while let Some(open) = rest.find(['"', '`']) {
        let before = &rest[..open];
        expected |= before.contains("expected");
        out.push_str(before);
        let quote = rest.as_bytes()[open];
        let len = quoted_len(&rest[open..], quote);
        let quoted = &rest[open..open + len];
        match (secret && !expected, quoted.len() >= 2) {
            (true, _) => out.push_str(NOT_SHOWN),
            (false, true) => {
                let (q, inner) = (quote as char, &quoted[1..quoted.len() - 1]);
                out.push_str(&format!("{q}{}{q}", excerpt(inner)));
            }
            (false, false) => out.push_str(&excerpt(quoted)),
        }
        rest = &rest[open + len..];
    }
    out.push_str(rest);
    out
}

/// The key path a serde_yaml_ng message starts with (`endpoint_config.headers[1]: …`).
fn error_path(message: &str) -> Option<&str> {
    let (path, _) = message.split_once(": ")?;
    let path_char = |c: char| c.is_ascii_alphanumeric() || "_.[]-".contains(c);
    (!path.is_empty() && path.chars().all(path_char)).then_some(path)
}

/// Whether a key path names a secret: any of its keys by the secret-key rule, or `headers`.
fn path_is_secret(path: &str) -> bool {
    path.split('.')
        .map(|key| key.split('[').next().unwrap_or(key))
        .any(|key| key == "headers" || is_secret_key(key))
}

/// The length of the quoted value `s` starts with, quotes included (a `"…"` value is
/// Rust-escaped, so `\"` does not end it); all of `s` when it is not closed.
fn quoted_len(s: &str, quote: u8) -> usize {
    let bytes = s.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote == b'"' => i += 2,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    s.len()
}

/// The first `YAML_ERROR_EXCERPT_CHARS` characters of a quoted value, redacted.
fn excerpt(value: &str) -> String {
    let cut: String = value.chars().take(YAML_ERROR_EXCERPT_CHARS).collect();
    let more = if cut.len() < value.len() { "…" } else { "" };
    format!("{}{more}", redact(&cut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_under_a_secret_key_is_not_quoted() {
        let cases = [
            "endpoint_config.headers: invalid type: string \"Authorization: Bearer sk-abc\", \
             expected a sequence at line 6 column 12",
            "endpoint_config.api_key: invalid type: integer `123456789012345678901234567890` \
             as u128, expected any YAML value at line 6 column 12",
            "endpoint_config.headers[1]: invalid type: string \"a \\\"q\\\" sk-abc\", expected x",
        ];
        for message in cases {
            let shown = shown_error(message);
            assert!(!shown.contains("sk-abc") && !shown.contains("123456789"), "{shown}");
            assert!(shown.contains(NOT_SHOWN) && shown.contains(", expected"), "{shown}");
        }
    }

    #[test]
    fn a_long_value_is_quoted_as_a_short_excerpt() {
        let passwd = "root:x:0:0:root:/root:/bin/bash daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/\
                      nologin bin:x:2:2:bin:/bin:/usr/sbin/nologin sys:x:3:3:sys:/dev";
        let shown = shown_error(&format!("invalid type: string {passwd:?}, expected struct X"));
        assert!(shown.starts_with("invalid type: string \"root:x:0:0:root:"), "{shown}");
        assert!(!shown.contains("sys:x:3:3"), "{shown}");
        assert!(shown.ends_with("…\", expected struct X"), "{shown}");
        let short = "settings.client.num_workers: \"many\" is not a whole number";
        assert_eq!(shown_error(short), short);
        let choice = "model_params.streaming: unknown variant `On`, expected one of `auto`, `on`";
        assert_eq!(shown_error(choice), choice);
    }
}
