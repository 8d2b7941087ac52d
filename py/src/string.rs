//! Python's `str` methods whose meaning differs from Rust's: what counts as white space.

/// Python's `str.isspace` for one character: Rust's White_Space plus the separators
/// U+001C..U+001F.
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()` with no argument.
pub fn strip(text: &str) -> &str {
    text.trim_matches(is_space)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_takes_python_s_white_space_and_rust_s() {
        assert_eq!(strip("\u{1c}\u{1f} a b\u{a0}\n"), "a b");
        assert!(!is_space('a'));
    }
}
