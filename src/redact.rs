//! Secrets never shown: one `redact` for every text the binary prints or writes (console,
//! errors, `-v` output, `config.yaml`, the summary's failure messages).
//!
//! Secrets come from two places: values the user gave as secrets (`--api-key`, a URL's
//! `user:password@`), registered when the plan is resolved, and anything shaped like one
//! (a URL's userinfo, a secret-named query parameter), hidden wherever it appears.

use std::sync::{Mutex, OnceLock};

/// The text written for a redacted secret (as the reference writes it).
pub const REDACTED: &str = "<redacted>";

/// Secrets shorter than this are not searched for in free text: a one-letter password
/// would redact every occurrence of that letter. URL userinfo is still hidden by shape.
pub const SECRET_BYTES_MIN: usize = 4;

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

/// Every secret registered so far (for the coordinator's event log, which cannot call
/// `redact`).
pub fn registered_secrets() -> Vec<String> {
    registry().lock().unwrap_or_else(|e| e.into_inner()).clone()
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

/// `text` with every secret hidden: URL userinfo and secret query values by shape, and
/// every registered secret wherever it appears.
pub fn redact(text: &str) -> String {
    let mut out = redact_urls(text);
    let secrets = registry().lock().unwrap_or_else(|e| e.into_inner());
    for secret in secrets.iter() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), REDACTED);
        }
    }
    out
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

/// One URL with `user:pass@` hidden (`<redacted>@host`, as the reference) and the values
/// of secret-named query parameters hidden.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else { return url.to_string() };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let mut out = url[..scheme_end + 3].to_string();
    let authority = &rest[..authority_end];
    match authority.rsplit_once('@') {
        Some((_, host)) => out.push_str(&format!("{REDACTED}@{host}")),
        None => out.push_str(authority),
    }
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
    }

    #[test]
    fn registered_secrets_are_hidden_anywhere() {
        register_secret("sk-unit-test-secret");
        register_secret("abc");
        assert_eq!(redact("Bearer sk-unit-test-secret!"), "Bearer <redacted>!");
        assert_eq!(redact("abc"), "abc", "too short to search for");
    }
}
