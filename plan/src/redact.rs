//! What the binary shows of secrets and of a server's text: one `redact` for every text it
//! prints or writes (console, errors, `-v` output, `config.yaml`, the summary's failure
//! messages, events.jsonl's error lines), `redact_json` for the JSON it prints, and
//! `escape_controls` for a server's text bound for a terminal or a text file.
//!
//! Secrets come from two places: values that are secrets by what they are (`--api-key`, a
//! URL's password and the `Basic` credentials it becomes, the value of a header whose name
//! says it holds one: `is_secret_header`), registered when the plan is resolved, and anything
//! shaped like one (a URL's userinfo, a secret-named query parameter, `Basic` and `Bearer`
//! credentials), hidden wherever it appears. Nothing else is a secret: a header such as
//! `X-Flag: true` is shown as given, so `true` never turns into `<redacted>` in a JSON file.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Mutex, OnceLock};

/// The text written for a redacted secret (as the reference writes it).
pub const REDACTED: &str = "<redacted>";

/// Secrets shorter than this are not searched for in free text: a one-letter password
/// would redact every occurrence of that letter. URL userinfo is still hidden by shape.
pub const SECRET_BYTES_MIN: usize = 4;

/// The shortest word after `Basic` or `Bearer` taken for a credential by its shape (with a
/// digit or a token68 sign in it), so "Bearer authentication required" stays readable.
pub const AUTH_TOKEN_BYTES_MIN: usize = 8;

/// A secret value held by the plan: its `Debug` shows `<redacted>`, so no derived `Debug` of a
/// plan can print it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

fn registry() -> &'static Mutex<Vec<String>> {
    static SECRETS: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    SECRETS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Remembers a secret value so that `redact` hides it wherever it appears later.
pub fn register_secret(secret: &str) {
    let secret = secret.trim();
    if secret.len() < SECRET_BYTES_MIN {
        return;
    }
    let mut secrets = registry().lock().unwrap_or_else(|e| e.into_inner());
    if !secrets.iter().any(|s| s == secret) {
        secrets.push(secret.to_string());
        // Longest first, so a secret that contains another is hidden whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// Whether a key names a secret (the reference's rule: api_key, token, password,
/// authorization, *_key, *_token, *_password, *secret*).
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace('-', "_");
    matches!(
        k.as_str(),
        "api_key"
            | "apikey"
            | "access_token"
            | "authorization"
            | "auth_token"
            | "password"
            | "token"
            | "key"
    ) || k.ends_with("_key")
        || k.ends_with("_token")
        || k.ends_with("_password")
        || k.contains("secret")
}

/// Whether a header's value is a secret, by its name: the secret-key rule (`X-Api-Key`,
/// `X-Auth-Token`, `X-Client-Secret`, …) and any name holding `auth` (`Authorization`,
/// `Proxy-Authorization`), `cookie` or `credential`.
pub fn is_secret_header(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase();
    is_secret_key(&n) || ["auth", "cookie", "credential"].iter().any(|w| n.contains(w))
}

/// `text` with every secret hidden: URL userinfo, secret query values and `Basic`/`Bearer`
/// credentials by shape, and every registered secret wherever it appears.
pub fn redact(text: &str) -> String {
    let secrets = registry().lock().unwrap_or_else(|e| e.into_inner());
    hide(text, &secrets)
}

/// `redact` over the given secrets (longest first).
fn hide(text: &str, secrets: &[String]) -> String {
    let mut out = redact_auth_tokens(&redact_urls(text)).into_owned();
    for secret in secrets {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    out
}

/// JSON text with `redact` applied inside each string (decoded, hidden, encoded again), so a
/// secret is hidden where it appears as a value and the text stays valid JSON: a number or
/// `true` outside a string is never replaced.
pub fn redact_json(json: &str) -> String {
    redact_json_with(json, redact)
}

fn redact_json_with(json: &str, hide: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(json.len());
    let mut rest = json;
    while let Some(open) = rest.find('"') {
        out.push_str(&rest[..open]);
        let len = json_string_len(&rest[open..]);
        let literal = &rest[open..open + len];
        match serde_json::from_str::<String>(literal) {
            Ok(text) => {
                let hidden = hide(&text);
                match hidden == text {
                    true => out.push_str(literal),
                    false => out.push_str(
                        &serde_json::to_string(&hidden).unwrap_or_else(|_| REDACTED.into()),
                    ),
                }
            }
            Err(_) => out.push_str(&hide(literal)),
        }
        rest = &rest[open + len..];
    }
    out.push_str(rest);
    out
}

/// The length of the JSON string literal `s` starts with, quotes included (all of `s` when
/// it is not closed).
fn json_string_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    s.len()
}

/// `text` with every control character except newline and tab written as an escape (`\x1b`,
/// `\u{202e}` for the bidirectional overrides), so a server's text shown on a terminal or
/// in a text file cannot retitle the terminal, clear it, ring its bell or reorder a line.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let hostile = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    };
    if !text.contains(hostile) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match (hostile(c), c as u32) {
            (false, _) => out.push(c),
            (true, code) if code < 0x100 => out.push_str(&format!("\\x{code:02x}")),
            (true, code) => out.push_str(&format!("\\u{{{code:x}}}")),
        }
    }
    Cow::Owned(out)
}

/// Every `Basic` or `Bearer` credential (the scheme, blanks, then a token68) with its token
/// hidden, as a server may quote the request's Authorization header back. The word after the
/// scheme is a credential when it is at least `AUTH_TOKEN_BYTES_MIN` long and holds a digit
/// or a token68 sign (`-._~+/=`), or, after `Basic`, decodes to `user:password`.
fn redact_auth_tokens(text: &str) -> Cow<'_, str> {
    let lower = text.to_ascii_lowercase();
    let mut schemes: Vec<(usize, &str)> = ["basic", "bearer"]
        .iter()
        .flat_map(|s| lower.match_indices(*s).map(|(i, _)| (i, *s)))
        .collect();
    if schemes.is_empty() {
        return Cow::Borrowed(text);
    }
    schemes.sort_unstable();
    let (mut out, mut copied) = (String::with_capacity(text.len()), 0);
    for (at, scheme) in schemes {
        let word_start = at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric();
        if at < copied || !word_start {
            continue;
        }
        let after = at + scheme.len();
        let blanks = text[after..].len() - text[after..].trim_start_matches([' ', '\t']).len();
        let start = after + blanks;
        let end = start + token68_len(&text[start..]);
        if blanks > 0 && is_credential(scheme, &text[start..end]) {
            out.push_str(&text[copied..start]);
            out.push_str(REDACTED);
            copied = end;
        }
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// The length of the token68 (`A-Za-z0-9-._~+/`, then `=` padding) `s` starts with.
fn token68_len(s: &str) -> usize {
    let body = s.bytes().take_while(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(b)).count();
    body + s[body..].bytes().take_while(|&b| b == b'=').count()
}

fn is_credential(scheme: &str, token: &str) -> bool {
    use base64::Engine;
    let shaped = token.len() >= AUTH_TOKEN_BYTES_MIN
        && token.bytes().any(|b| b.is_ascii_digit() || b"-._~+/=".contains(&b));
    let basic = scheme == "basic"
        && base64::engine::general_purpose::STANDARD
            .decode(token)
            .is_ok_and(|d| !token.is_empty() && d.contains(&b':'));
    shaped || basic
}

/// Every `scheme://…` inside free text with its userinfo and secret query values hidden.
fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        // The scheme runs back to the last character that cannot be in one.
        let scheme_start = rest[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        out.push_str(&rest[..scheme_start]);
        let url_end = rest[at + 3..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`'))
            .map_or(rest.len(), |i| at + 3 + i);
        out.push_str(&redact_url(&rest[scheme_start..url_end]));
        rest = &rest[url_end..];
    }
    out.push_str(rest);
    out
}

/// Where a URL's userinfo is (between `scheme://` and its `@`), by shape: inside the
/// authority; or, when the authority before the first `/`, `?` or `#` is no `host[:port]`
/// (`alice:pa` of `http://alice:pa/ss@host`), up to the URL's last `@`, since a password
/// may hold those characters unencoded.
fn userinfo_range(url: &str) -> Option<Range<usize>> {
    let start = url.find("://")? + 3;
    let rest = &url[start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some(at) = rest[..authority_end].rfind('@') {
        return Some(start..start + at);
    }
    let at = rest.rfind('@')?;
    (!plausible_host_port(&rest[..authority_end])).then_some(start..start + at)
}

/// `host`, `host:port` with a numeric port, or a bracketed IPv6 address.
fn plausible_host_port(authority: &str) -> bool {
    match authority.rsplit_once(':') {
        _ if authority.starts_with('[') => true,
        Some((_, port)) => !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()),
        None => true,
    }
}

/// Whether the userinfo of `url` (by shape) runs past a `/`, `?` or `#`: a password that
/// needs percent-encoding.
pub fn userinfo_needs_encoding(url: &str) -> bool {
    userinfo_range(url).is_some_and(|r| url[r].contains(['/', '?', '#']))
}

/// One URL with `user:pass@` hidden (`<redacted>@host`, as the reference) and the values
/// of secret-named query parameters hidden.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else { return url.to_string() };
    let (mut out, rest) = match userinfo_range(url) {
        Some(r) => (format!("{}{REDACTED}@", &url[..r.start]), &url[r.end + 1..]),
        None => (url[..scheme_end + 3].to_string(), &url[scheme_end + 3..]),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    out.push_str(&rest[..authority_end]);
    let tail = &rest[authority_end..];
    match tail.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if is_secret_key(k) => format!("{k}={REDACTED}"),
                    _ => p.to_string(),
                })
                .collect();
            out.push_str(&params.join("&"));
        }
        None => out.push_str(tail),
    }
    out
}

/// Splits `user[:password]@` off an `http://` URL: the URL without it, and the password
/// (or the user, when there is no password), if any.
pub fn split_userinfo(url: &str) -> (String, Option<String>) {
    let Some(scheme_end) = url.find("://") else { return (url.to_string(), None) };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rsplit_once('@') {
        Some((userinfo, _)) => {
            let secret = userinfo.split_once(':').map_or(userinfo, |(_, p)| p).to_string();
            let stripped = format!("{}{}", &url[..scheme_end + 3], &rest[userinfo.len() + 1..]);
            (stripped, Some(secret))
        }
        None => (url.to_string(), None),
    }
}

/// What a URL's userinfo may hide, to register: the password (or the user) of the
/// authority's userinfo, and the text from the first `:` to the last `@` of a userinfo by
/// shape (a password holding `/`, `?` or `#`, which may even read as a port and a path).
pub fn url_secrets(url: &str) -> Vec<String> {
    let mut out: Vec<String> = split_userinfo(url).1.into_iter().collect();
    let start = url.find("://").map_or(0, |i| i + 3);
    if let (Some(colon), Some(at)) = (url[start..].find(':'), url[start..].rfind('@')) {
        if colon < at {
            out.push(url[start + colon + 1..start + at].to_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_keys_follow_the_reference_rule() {
        for key in ["api_key", "token", "password", "hf_token", "my_key", "client_secret", "key"] {
            assert!(is_secret_key(key), "{key}");
        }
        for key in ["max_new_tokens", "token_count_source", "name", "skip_special_tokens"] {
            assert!(!is_secret_key(key), "{key}");
        }
    }

    #[test]
    fn only_headers_named_for_a_secret_are_secret() {
        let secret = ["Authorization", "Proxy-Authorization", "Cookie", "X-Api-Key", "Api-Key"];
        for name in secret.iter().chain(&["X-Auth-Token", "x-client-secret", "X-Credential"]) {
            assert!(is_secret_header(name), "{name}");
        }
        for name in ["X-Flag", "X-Team", "User-Agent", "X-Request-Id", "OpenAI-Organization"] {
            assert!(!is_secret_header(name), "{name}");
        }
    }

    #[test]
    fn urls_lose_their_userinfo_and_secret_queries() {
        assert_eq!(
            redact_url("http://u:p@h:1/v?key=abc&x=1"),
            "http://<redacted>@h:1/v?key=<redacted>&x=1"
        );
        assert_eq!(redact_url("http://h:1/v"), "http://h:1/v");
        assert_eq!(
            redact("cannot use endpoint \"http://u:secretpw@127.0.0.1:9\": refused"),
            "cannot use endpoint \"http://<redacted>@127.0.0.1:9\": refused"
        );
        assert_eq!(redact("no url here"), "no url here");
        assert_eq!(
            split_userinfo("http://u:pw@h:1/x"),
            ("http://h:1/x".to_string(), Some("pw".to_string()))
        );
        assert_eq!(split_userinfo("http://h:1/a@b"), ("http://h:1/a@b".to_string(), None));
        assert_eq!(redact_url("http://h:1/a@b"), "http://h:1/a@b", "an @ in a path stays");
    }

    #[test]
    fn a_url_password_with_a_slash_query_or_hash_is_hidden() {
        for url in [
            "http://alice:pa/ssW0rdXYZ@127.0.0.1:9",
            "http://alice:pa?ssW0rdXYZ@127.0.0.1:9",
            "http://alice:pa#ssW0rdXYZ@127.0.0.1:9/v1",
            "http://alice:/ssW0rdXYZ@127.0.0.1:9",
        ] {
            let shown = redact(&format!("endpoint {url:?} has no valid host[:port]"));
            assert!(!shown.contains("ssW0rdXYZ") && shown.contains("<redacted>@127.0.0.1:9"));
            assert!(userinfo_needs_encoding(url), "{url}");
        }
        assert!(!userinfo_needs_encoding("http://alice:pw@h:1/v1"));
        // A password that reads as a port and a path is registered whole instead.
        assert!(url_secrets("http://alice:12/34xy@h:1").contains(&"12/34xy".to_string()));
        assert_eq!(url_secrets("http://u:pw@h:1"), ["pw", "pw"]);
        assert!(url_secrets("http://h:1/v1").is_empty());
    }

    #[test]
    fn basic_and_bearer_credentials_are_hidden_by_shape() {
        let cases = [
            ("bad credentials: Basic Ym9iOmh1bnRlcjI=", "bad credentials: Basic <redacted>"),
            ("authorization: basic YWJjOmRlZg==\"}", "authorization: basic <redacted>\"}"),
            ("Bearer sk-abcdef123456, again", "Bearer <redacted>, again"),
            ("Bearer authentication required", "Bearer authentication required"),
            ("WWW-Authenticate: Basic realm=\"api\"", "WWW-Authenticate: Basic realm=\"api\""),
            ("Bearer <redacted>", "Bearer <redacted>"),
            ("basically Ym9iOmh1bnRlcjI=", "basically Ym9iOmh1bnRlcjI="),
        ];
        for (text, want) in cases {
            assert_eq!(hide(text, &[]), want, "{text}");
        }
    }

    #[test]
    fn registered_secrets_are_hidden_anywhere() {
        register_secret("sk-unit-test-secret");
        register_secret("abc");
        assert_eq!(redact("key sk-unit-test-secret!"), "key <redacted>!");
        assert_eq!(redact("abc"), "abc", "too short to search for");
    }

    #[test]
    fn json_keeps_its_shape_when_a_secret_is_hidden() {
        let secrets = ["true".to_string(), "1000".to_string()];
        let json =
            r#"{"complete": true, "n": 1000, "msg": "got \"true\" and 1000\n", "t": "a\u00e9"}"#;
        let shown = redact_json_with(json, |s| hide(s, &secrets));
        let want = r#"{"complete": true, "n": 1000, "msg": "got \"<redacted>\" and <redacted>\n", "t": "a\u00e9"}"#;
        assert_eq!(shown, want);
        serde_json::from_str::<serde_json::Value>(&shown).unwrap();
    }

    #[test]
    fn control_characters_from_a_server_are_escaped() {
        assert_eq!(escape_controls("a\x1b]0;TITLE\x07\x1b[2J b"), "a\\x1b]0;TITLE\\x07\\x1b[2J b");
        assert_eq!(escape_controls("x\u{202e}y\u{85}z\x7f"), "x\\u{202e}y\\x85z\\x7f");
        assert!(matches!(escape_controls("line\n\ttab é"), Cow::Borrowed(_)));
    }
}
