//! The answer extractors, as the reference's `evaluation/extractor.py` runs them: each takes a
//! response text and returns the answer it finds, or `None` where the reference returns `None`.

use std::sync::OnceLock;

use fancy_regex::Regex as FancyRegex;
use regex::Regex;

use loadgen_py::string::strip as py_strip;

/// Python's `\s` for `str` patterns also matches the separators U+001C..U+001F, which Rust's
/// `\s` (White_Space) does not.
const WS: &str = r"[\s\x1c-\x1f]";

/// A markdown wrapper: `*`, `**`, `_` or `__`.
const WRAP: &str = r"(?:\*{1,2}|_{1,2})";

/// The reference's ABCD patterns in priority order (OpenAI gpt-oss `abcd_grader`), restated
/// without verbose mode; `%W` stands for [`WS`] and `%M` for [`WRAP`].
const ABCD_PATTERNS: &[&str] = &[
    r"(?i)%MAnswers?%W*[:\-–]?%M%W*([ABCD])\b",
    r"(?im)^%W*%M?Answer:?%M?%W*:?%W*%M?([ABCD])%M?%W*",
    r"(?i)\bAnswers?\b%W*[:\-–]?%W*\(%W*([ABCD])%W*\)",
    r"(?i)\bAnswers?\b%W*[:\-–]?%W*([ABCD])\b",
    r"(?i)\b(?:Option|Choice)\b%W*[:\-–]?%W*([ABCD])\b",
    r"(?m)\\boxed\{[^}]*?([ABCD])[^}]*\}",
    r"(?m)\\boxed\{[^}]*?\\textbf\{[^}]*?([ABCD])[^}]*\}[^}]*\}",
    r"(?m)\\boxed\{[^}]*?\\text\{[^}]*?([ABCD])[^}]*\}[^}]*\}",
    r"(?<![A-Za-z0-9])[\(\[]%W*([ABCD])%W*[\)\]](?![A-Za-z0-9])",
    r"(?<![A-Za-z0-9])%M([ABCD])%M(?![A-Za-z0-9])",
    r"\\textbf\{[^}]*?([ABCD])[^}]*\}",
    r"(?<![A-Za-z0-9])%M%W*([ABCD])\)[^*_\n]+?%M(?![A-Za-z0-9])",
    r"(?m)^%W*%M?([ABCD])%M?%W*[\.\)\-–:]?%W*.*$",
];

fn abcd_patterns() -> &'static [FancyRegex] {
    static CELL: OnceLock<Vec<FancyRegex>> = OnceLock::new();
    CELL.get_or_init(|| {
        ABCD_PATTERNS
            .iter()
            .map(|p| {
                let p = p.replace("%W", WS).replace("%M", WRAP);
                // The patterns are constants; a failure is a bug caught by every ABCD test.
                FancyRegex::new(&p).unwrap_or_else(|e| unreachable!("abcd pattern {p}: {e}"))
            })
            .collect()
    })
}

fn choice_key(letter: char) -> Option<&'static str> {
    match letter.to_ascii_uppercase() {
        'A' => Some("choice1"),
        'B' => Some("choice2"),
        'C' => Some("choice3"),
        'D' => Some("choice4"),
        _ => None,
    }
}

/// `abcd_extractor`: the highest-priority pattern that matches names the letter, mapped to the
/// GPQA column (`A` -> `choice1`); failing all, the first character after a leading `**`;
/// failing that, the empty string (never `None`).
pub fn abcd(text: &str) -> Option<String> {
    // Every pattern has one match at most (`search`), so the (priority, length) sort the
    // reference does reduces to "the first pattern that matches".
    for pattern in abcd_patterns() {
        if let Ok(Some(caps)) = pattern.captures(text) {
            let letter = caps.get(1).and_then(|m| m.as_str().chars().next());
            if let Some(key) = letter.and_then(choice_key) {
                return Some(key.to_string());
            }
        }
    }
    let stripped = text.strip_prefix("**").unwrap_or(text);
    let fallback = stripped.chars().next().and_then(choice_key);
    Some(fallback.unwrap_or("").to_string())
}

fn boxed_pattern() -> &'static Regex {
    static CELL: OnceLock<Regex> = OnceLock::new();
    CELL.get_or_init(|| {
        Regex::new(r"(?s)boxed\{(.*?)\}|framebox\{(.*?)\}")
            .unwrap_or_else(|e| unreachable!("boxed pattern: {e}"))
    })
}

fn digits_pattern() -> &'static Regex {
    static CELL: OnceLock<Regex> = OnceLock::new();
    CELL.get_or_init(|| Regex::new(r"\d+").unwrap_or_else(|e| unreachable!("digits: {e}")))
}

/// `boxed_math_extractor`: the last non-empty `boxed{..}`/`framebox{..}` content, its part
/// after the last comma, stripped; failing that, the last run of digits; failing that, `None`.
pub fn boxed_math(text: &str) -> Option<String> {
    let matches: Vec<_> = boxed_pattern().captures_iter(text).collect();
    for caps in matches.iter().rev() {
        let group = [caps.get(1), caps.get(2)].into_iter().flatten().find(|g| !g.is_empty());
        if let Some(group) = group {
            let last = group.as_str().rsplit(',').next().unwrap_or("");
            return Some(py_strip(last).to_string());
        }
    }
    digits_pattern().find_iter(text).last().map(|m| m.as_str().to_string())
}

/// `identity_extractor`: the text as it is.
pub fn identity(text: &str) -> Option<String> {
    Some(text.to_string())
}

fn code_patterns() -> &'static [Regex; 3] {
    static CELL: OnceLock<[Regex; 3]> = OnceLock::new();
    CELL.get_or_init(|| {
        let tag = format!(r"(?i)^(?:python|py){WS}*\n");
        [r"(?s)```python(.*?)```", r"(?s)```(.*?)```", tag.as_str()]
            .map(|p| Regex::new(p).unwrap_or_else(|e| unreachable!("code pattern {p}: {e}")))
    })
}

/// `python_code_extractor`: the last ```` ```python ```` block, else the last plain ```` ``` ````
/// block less a leading `python`/`py` tag line, stripped; `None` for an empty text or no block.
pub fn python_code(text: &str) -> Option<String> {
    let text = py_strip(text);
    if text.is_empty() {
        return None;
    }
    let [python, plain, tag] = code_patterns();
    if let Some(caps) = python.captures_iter(text).last() {
        return Some(py_strip(caps.get(1).map_or("", |m| m.as_str())).to_string());
    }
    let caps = plain.captures_iter(text).last()?;
    let code = py_strip(caps.get(1).map_or("", |m| m.as_str()));
    Some(tag.replace(code, "").into_owned())
}
