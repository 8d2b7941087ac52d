//! docs/ARCHITECTURE.md stays the map (rust-analyzer's `tidy` tests): one `## ` section per
//! crate, in it one `### ` subsection per top-level module (`### `name``) and none for a module
//! that does not exist, every source file named (itself or a folder above it) in its module's
//! subsection (a file outside the modules in its crate's section), and no source path in the
//! map that does not exist.

use std::collections::BTreeSet;

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

/// The text of the `### ` subsection of `section` that names `module`, up to the next one.
fn subsection<'a>(section: &'a str, module: &str) -> Option<&'a str> {
    let heading = format!("\n### `{module}`");
    let start = section.find(&heading)? + 1;
    let body = &section[start..];
    let end = body[4..].find("\n### ").map_or(body.len(), |e| e + 5);
    Some(&body[..end])
}

/// The top-level module `file` (under `dir`) belongs to, when it is under one.
fn module_of(dir: &str, file: &str) -> Option<String> {
    let rest = file.strip_prefix(&src_root(dir))?;
    let module = match rest.split_once('/') {
        Some((folder, _)) => folder,
        None => rest.strip_suffix(".rs")?,
    };
    top_level_modules(dir, &[file.to_string()]).contains(module).then(|| module.to_string())
}

#[test]
fn every_source_file_is_on_the_map_in_its_crate_s_section() {
    let doc = architecture();
    let dirs = crate_dirs();
    let mut unmapped = Vec::new();
    for file in rust_files() {
        let Some(dir) = crate_of(&dirs, &file) else { continue };
        let text = section(&doc, dir).unwrap_or("");
        // A file of a top-level module is named in that module's subsection; any other (the
        // crate root, tests, examples) anywhere in the section. The heading's own folder
        // (`wire/`) names every file, so it does not count.
        let text = match module_of(dir, &file) {
            Some(module) => subsection(text, &module).unwrap_or(""),
            None => text.split_once('\n').map_or("", |(_, body)| body),
        };
        if !source_spans(text).iter().any(|span| names(span, dir, &file)) {
            unmapped.push(file);
        }
    }
    assert!(
        unmapped.is_empty(),
        "source files their module's subsection (or their crate's section) of \
         docs/ARCHITECTURE.md does not name:\n{}",
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

/// Where the modules of the crate in `dir` are: its `src/`; the binary's `src/` and `tests/`
/// themselves.
fn src_root(dir: &str) -> String {
    if matches!(dir, "src/" | "tests/") {
        dir.to_string()
    } else {
        format!("{dir}src/")
    }
}

/// The top-level modules of the crate in `dir`: each `<name>.rs` (but the crate root) and
/// `<name>/` directly under its `src/` (the binary's `src/` itself), and for `tests/` its area
/// folders.
fn top_level_modules(dir: &str, files: &[String]) -> BTreeSet<String> {
    let src = src_root(dir);
    let mut modules = BTreeSet::new();
    for rest in files.iter().filter_map(|f| f.strip_prefix(&src)) {
        match rest.split_once('/') {
            Some((folder, _)) => modules.insert(folder.to_string()),
            None if dir == "tests/" => false,
            None => {
                let name = rest.strip_suffix(".rs").unwrap_or(rest);
                !matches!(name, "lib" | "main") && modules.insert(name.to_string())
            }
        };
    }
    modules
}

/// The module each `### ` heading of `text` names: its first `` `name` ``, in order.
fn subsections(text: &str) -> Vec<String> {
    let headings = text.lines().filter_map(|l| l.strip_prefix("### "));
    headings.map(|h| h.split('`').nth(1).unwrap_or(h).to_string()).collect()
}

#[test]
fn every_top_level_module_has_its_subsection_in_its_crate_s_section() {
    let (doc, files) = (architecture(), rust_files());
    let mut missing = Vec::new();
    for dir in crate_dirs() {
        let heads = subsections(section(&doc, &dir).unwrap_or(""));
        for module in top_level_modules(&dir, &files) {
            if !heads.contains(&module) {
                missing.push(format!("### `{module}` (in the `{dir}` section)"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "top-level modules without their subsection in docs/ARCHITECTURE.md:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_subsection_names_a_module_of_its_crate_once() {
    let (doc, files) = (architecture(), rust_files());
    let mut wrong = Vec::new();
    let mut in_sections = 0;
    for dir in crate_dirs() {
        let heads = subsections(section(&doc, &dir).unwrap_or(""));
        in_sections += heads.len();
        let modules = top_level_modules(&dir, &files);
        for (i, head) in heads.iter().enumerate() {
            if !modules.contains(head) {
                wrong.push(format!("### `{head}` names no top-level module of `{dir}`"));
            } else if heads[..i].contains(head) {
                wrong.push(format!("### `{head}` comes twice in the `{dir}` section"));
            }
        }
    }
    let all = subsections(&doc).len();
    if all != in_sections {
        wrong.push(format!("{} `### ` subsections outside a crate's section", all - in_sections));
    }
    assert!(wrong.is_empty(), "docs/ARCHITECTURE.md:\n{}", wrong.join("\n"));
}

#[test]
fn the_top_level_modules_are_the_files_and_folders_under_src() {
    let files: Vec<String> = [
        "coordinator/src/lib.rs",
        "coordinator/src/cpu.rs",
        "coordinator/src/live/mod.rs",
        "coordinator/src/live/view.rs",
        "coordinator/tests/x.rs",
        "src/main.rs",
        "src/cli.rs",
        "src/cli/plan_tests.rs",
        "tests/tests.rs",
        "tests/run/e2e.rs",
    ]
    .map(String::from)
    .to_vec();
    let names = |dir| top_level_modules(dir, &files).into_iter().collect::<Vec<_>>();
    assert_eq!(names("coordinator/"), ["cpu", "live"]);
    assert_eq!(names("src/"), ["cli"]);
    assert_eq!(names("tests/"), ["run"]);
    assert_eq!(subsections("## `x/`\n### `cpu`\ntext\n### `live` — the view\n"), ["cpu", "live"]);
}
