//! The workspace's Rust sources as the tidy tests read them: every `.rs` file, its code with
//! comments and literals blanked out (line numbers kept), and the functions in it.

use std::path::{Path, PathBuf};

/// The repository root (the root package's manifest directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file of the workspace, relative to the root with `/` separators, sorted; build
/// output, git metadata and test corpora are not sources.
pub fn rust_files() -> Vec<String> {
    let mut files = Vec::new();
    walk(&root(), &mut files);
    let root = root();
    let mut rel: Vec<String> = files
        .iter()
        .map(|p| p.strip_prefix(&root).expect("under the root").to_string_lossy().into_owned())
        .collect();
    rel.sort();
    rel
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() && !matches!(name.as_str(), "target" | ".git" | "corpus" | "assets") {
            walk(&path, out);
        } else if kind.is_file() && name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The workspace's packages by directory (with a trailing `/`): the root package is `src/`
/// (its tests `tests/`), every member its own folder.
pub fn crate_dirs() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .expect("the workspace lists its members");
    let mut dirs = vec!["src/".to_string(), "tests/".to_string()];
    dirs.extend(
        members
            .split(',')
            .map(|m| m.trim().trim_matches('"'))
            .filter(|m| !m.is_empty())
            .map(|m| format!("{m}/")),
    );
    dirs
}

pub fn read(rel: &str) -> String {
    let path = root().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `text` with every comment and every string, byte-string and char literal replaced by
/// spaces, newlines kept: what is left is code, at its own line numbers.
pub fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let end = match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => block_comment_end(b, i),
            b'"' => string_end(b, i + 1),
            b'r' | b'b' if !ident_before(b, i) => match raw_string_start(b, i) {
                Some((body, hashes)) => raw_string_end(b, body, hashes),
                None if b[i] == b'b' && b.get(i + 1) == Some(&b'\'') => char_end(b, i + 1),
                None => i + 1,
            },
            b'\'' => char_end(b, i),
            _ => i + 1,
        };
        // A literal or comment spans at least two bytes (a string at least its two quotes);
        // a lone byte (`r`, `b`, a lifetime's quote) is code.
        if end > i + 1 {
            for c in &mut out[i..end] {
                if *c != b'\n' {
                    *c = b' ';
                }
            }
        }
        i = end.max(i + 1);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn ident_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

fn line_end(b: &[u8], i: usize) -> usize {
    b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| i + p)
}

fn block_comment_end(b: &[u8], start: usize) -> usize {
    let (mut depth, mut i) = (0usize, start);
    while i + 1 < b.len() {
        if b[i] == b'/' && b[i + 1] == b'*' {
            depth += 1;
            i += 2;
        } else if b[i] == b'*' && b[i + 1] == b'/' {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// The end (past the closing quote) of a string whose body starts at `i`.
fn string_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// `r"`, `r#"`, `br"`, `b"`…: where the body starts and how many `#` close it.
fn raw_string_start(b: &[u8], i: usize) -> Option<(usize, usize)> {
    let mut j = i;
    if b[j] == b'b' {
        j += 1;
        if b.get(j) == Some(&b'"') {
            return Some((j + 1, usize::MAX));
        }
    }
    if b.get(j) != Some(&b'r') {
        return None;
    }
    j += 1;
    let hashes = b[j..].iter().take_while(|&&c| c == b'#').count();
    (b.get(j + hashes) == Some(&b'"')).then_some((j + hashes + 1, hashes))
}

/// The end of a raw string (`hashes` closing `#`), or of a byte string (`usize::MAX`).
fn raw_string_end(b: &[u8], body: usize, hashes: usize) -> usize {
    if hashes == usize::MAX {
        return string_end(b, body);
    }
    let mut i = body;
    while i < b.len() {
        if b[i] == b'"' && b[i + 1..].iter().take(hashes).filter(|&&c| c == b'#').count() == hashes
        {
            return i + 1 + hashes;
        }
        i += 1;
    }
    b.len()
}

/// A char literal at `i` (`'x'`, `'\n'`, `'\u{..}'`) ends past its closing quote; a lifetime
/// or label (`'a`, `'static`) is code and ends at once.
fn char_end(b: &[u8], i: usize) -> usize {
    if b.get(i + 1) == Some(&b'\\') {
        let close = b[i + 2..].iter().position(|&c| c == b'\'').map_or(b.len(), |p| i + 2 + p);
        return close + 1;
    }
    // One (possibly multi-byte) character, then a quote.
    let width = match b.get(i + 1) {
        Some(&c) if c >= 0xF0 => 4,
        Some(&c) if c >= 0xE0 => 3,
        Some(&c) if c >= 0xC0 => 2,
        _ => 1,
    };
    if b.get(i + 1 + width) == Some(&b'\'') {
        i + 2 + width
    } else {
        i + 1
    }
}

/// A function of a file: its name, first line (1-based) and length in lines, from the `fn`
/// keyword to the closing brace of its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    pub line: usize,
    pub lines: usize,
}

/// The functions with a body in `code` (from `code_only`); declarations without a body
/// (trait methods, extern fns) are not functions here.
pub fn functions(code: &str) -> Vec<Function> {
    let b = code.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(p) = code[at..].find("fn ") {
        let start = at + p;
        at = start + 3;
        if ident_before(b, start) {
            continue;
        }
        let name: String =
            code[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if name.is_empty() {
            continue; // `fn(` types and `impl Fn …` are not definitions
        }
        let Some(open) = body_open(b, at) else { continue };
        let close = matching_brace(b, open);
        let line = line_of(code, start);
        found.push(Function { name, line, lines: line_of(code, close) - line + 1 });
    }
    found
}

/// The `{` opening the body of the function whose signature starts at `i`, or `None` when
/// a `;` ends the signature first. Braces inside the signature's parentheses or angle
/// brackets (const generics' blocks) are skipped.
fn body_open(b: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0i32;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            b'{' if depth == 0 => return Some(i),
            b';' if depth == 0 => return None,
            _ => {}
        }
        i += 1;
    }
    None
}

fn matching_brace(b: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (i, &c) in b.iter().enumerate().skip(open) {
        match c {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
    }
    b.len().saturating_sub(1)
}

fn line_of(code: &str, byte: usize) -> usize {
    code.as_bytes()[..byte.min(code.len())].iter().filter(|&&c| c == b'\n').count() + 1
}

/// Whether `code` (from `code_only`) holds the `unsafe` keyword.
pub fn has_unsafe(code: &str) -> bool {
    let b = code.as_bytes();
    code.match_indices("unsafe").any(|(i, _)| {
        let after = b.get(i + 6).copied().unwrap_or(b' ');
        !(ident_before(b, i) || after.is_ascii_alphanumeric() || after == b'_')
    })
}

#[test]
fn code_only_blanks_comments_and_literals_and_keeps_lines() {
    let text = "fn a() { let s = \"fn b() {\"; } // fn c() {\n/* fn d() { */ fn e<'x>(c: char) -> char { 'x' }\nr#\"unsafe\"#";
    let code = code_only(text);
    assert_eq!(code.lines().count(), text.lines().count());
    let names: Vec<String> = functions(&code).into_iter().map(|f| f.name).collect();
    assert_eq!(names, ["a", "e"]);
    assert!(!has_unsafe(&code));
    assert!(has_unsafe(&code_only("unsafe { x() }")));
    assert!(!has_unsafe(&code_only("fn not_unsafe_here() {}")));
}

#[test]
fn a_function_is_measured_from_fn_to_its_closing_brace() {
    let code = code_only(
        "trait T { fn decl(&self); }\nfn long(\n    x: [u8; 2],\n) {\n    if true {\n    }\n}\n",
    );
    assert_eq!(functions(&code), [Function { name: "long".into(), line: 2, lines: 6 }]);
}
