//! docs/ARCHITECTURE.md stays the map (rust-analyzer's `tidy` tests): one section per crate,
//! every source file named in its crate's section (itself or a folder above it), and no
//! source path in the map that does not exist.

use super::source::{crate_dirs, root, rust_files};

fn architecture() -> String {
    let path = root().join("docs/ARCHITECTURE.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of the `## ` section whose heading names `` `dir` ``, up to the next `## `.
fn section<'a>(doc: &'a str, dir: &str) -> Option<&'a str> {
    let start = doc
        .match_indices("\n## ")
        .map(|(i, _)| i + 1)
        .find(|&i| doc[i..].lines().next().unwrap_or("").contains(&format!("`{dir}`")))?;
    let body = &doc[start..];
    let end = body[3..].find("\n## ").map_or(body.len(), |e| e + 4);
    Some(&body[..end])
}

/// Every `` `token` `` of `text` that reads as a source path: a `.rs` file or a folder (ends
/// in `/`), without spaces or wildcards.
fn source_spans(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            !s.contains([' ', '*', '<', '{', ':']) && (s.ends_with(".rs") || s.ends_with('/'))
        })
        .collect()
}

/// Whether `span` names `file` (a path under `dir`): the path from the root, from the crate's
/// folder or its `src/`, or its last components; or a folder above it in any of those forms.
fn names(span: &str, dir: &str, file: &str) -> bool {
    let in_crate = file.strip_prefix(dir).unwrap_or(file);
    let in_src = in_crate.strip_prefix("src/").unwrap_or(in_crate);
    if span.ends_with('/') {
        return [file, in_crate, in_src].iter().any(|p| p.starts_with(span))
            || file.contains(&format!("/{span}"));
    }
    [file, in_crate, in_src].contains(&span) || file.ends_with(&format!("/{span}"))
}

fn crate_of<'a>(dirs: &'a [String], file: &str) -> Option<&'a String> {
    dirs.iter().filter(|d| file.starts_with(d.as_str())).max_by_key(|d| d.len())
}

#[test]
fn every_crate_has_its_section() {
    let doc = architecture();
    let missing: Vec<String> =
        crate_dirs().into_iter().filter(|dir| section(&doc, dir).is_none()).collect();
    assert!(missing.is_empty(), "docs/ARCHITECTURE.md has no `## ` section for {missing:?}");
}

#[test]
fn every_source_file_is_on_the_map_in_its_crate_s_section() {
    let doc = architecture();
    let dirs = crate_dirs();
    let mut unmapped = Vec::new();
    for file in rust_files() {
        let Some(dir) = crate_of(&dirs, &file) else { continue };
        let spans = source_spans(section(&doc, dir).unwrap_or(""));
        if !spans.iter().any(|span| names(span, dir, &file)) {
            unmapped.push(file);
        }
    }
    assert!(
        unmapped.is_empty(),
        "source files their crate's section of docs/ARCHITECTURE.md does not name:\n{}",
        unmapped.join("\n")
    );
}

#[test]
fn every_source_path_on_the_map_exists() {
    let doc = architecture();
    let files = rust_files();
    let dirs = crate_dirs();
    let mut missing = Vec::new();
    for dir in &dirs {
        let crate_files: Vec<&String> =
            files.iter().filter(|f| crate_of(&dirs, f) == Some(dir)).collect();
        for span in source_spans(section(&doc, dir).unwrap_or("")) {
            // A section may name another crate's file (the one it serves or is used by).
            let exists = root().join(span).exists()
                || crate_files.iter().any(|f| names(span, dir, f))
                || files.iter().any(|f| crate_of(&dirs, f).is_some_and(|d| names(span, d, f)));
            if !exists {
                missing.push(format!("{span} (in the `{dir}` section)"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "paths in docs/ARCHITECTURE.md that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_span_names_a_file_by_any_of_its_paths() {
    let file = "coordinator/src/aggregate/events/writer.rs";
    for span in [
        file,
        "src/aggregate/events/writer.rs",
        "aggregate/events/writer.rs",
        "writer.rs",
        "events/",
        "aggregate/",
    ] {
        assert!(names(span, "coordinator/", file), "{span}");
    }
    for span in ["riter.rs", "events/writer", "gate/", "coordinator/src/aggregate/events/w.rs"] {
        assert!(!names(span, "coordinator/", file), "{span}");
    }
}
