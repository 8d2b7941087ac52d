//! No import circles (issue 26): within each crate, no two source files import each other,
//! directly or around a loop. A file imports another when its code names a path into it
//! (`use crate::a::b::X`, `super::X`, `self::x::Y`, a child module's `child::f()`, also outside
//! `use` lines); test code is left out (files declared under `#[cfg(test)]`, `tests.rs` and
//! `*_tests.rs`, and items under `#[cfg(test)]`), and a module file's `pub use` of its own
//! children is its facade, not an import (docs/ARCHITECTURE.md): a path to an item the facade
//! re-exports leads to the file that defines it.

use std::collections::{BTreeMap, BTreeSet};

use super::source::{code_only, crate_dirs, read, rust_files};

/// One crate: its root file (`lib.rs`, `main.rs`, `tests.rs`) and its files, by module path.
struct Crate {
    root_file: String,
    modules: BTreeMap<Vec<String>, Module>,
}

/// A source file as a module (the crate holds it by its module path): what its code names.
struct Module {
    file: String,
    /// The modules it declares with a file (`mod x;`; not those under `#[cfg(test)]`), by
    /// their path from it.
    children: Vec<Vec<String>>,
    /// Its `use` items: the name each brings into scope, the path, and whether it is `pub`.
    uses: Vec<Use>,
    /// Paths its code names outside `use` items (`crate::a::f()`, `child::T`).
    paths: Vec<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Use {
    name: String,
    path: Vec<String>,
    public: bool,
}

/// The crates of the workspace: each member's `src/lib.rs` and `src/main.rs`, the binary's
/// `src/main.rs` and its integration tests' `tests/tests.rs`.
fn crates() -> Vec<Crate> {
    let files = rust_files();
    let mut roots = Vec::new();
    for dir in crate_dirs() {
        let candidates = match dir.as_str() {
            "src/" => vec!["src/main.rs".to_string()],
            "tests/" => vec!["tests/tests.rs".to_string()],
            _ => vec![format!("{dir}src/lib.rs"), format!("{dir}src/main.rs")],
        };
        roots.extend(candidates.into_iter().filter(|f| files.contains(f)));
    }
    roots.iter().map(|root_file| load_crate(root_file, &files)).collect()
}

/// The crate rooted at `root_file`: every non-test file reachable through its `mod` lines.
fn load_crate(root_file: &str, files: &[String]) -> Crate {
    let base = &root_file[..root_file.rfind('/').map_or(0, |i| i + 1)];
    let mut modules = BTreeMap::new();
    let mut todo = vec![(Vec::<String>::new(), root_file.to_string())];
    while let Some((path, file)) = todo.pop() {
        let module = parse_module(&file);
        for child in &module.children {
            let mut child_path = path.clone();
            child_path.extend(child.iter().cloned());
            let dir = format!("{base}{}", child_path.join("/"));
            let found = [format!("{dir}.rs"), format!("{dir}/mod.rs")]
                .into_iter()
                .find(|f| files.contains(f));
            let name = found.as_deref().and_then(|f| f.rsplit('/').next()).unwrap_or_default();
            let test_file = name == "tests.rs" || name.ends_with("_tests.rs");
            if let Some(f) = found.filter(|_| !test_file) {
                todo.push((child_path, f));
            }
        }
        modules.insert(path, module);
    }
    Crate { root_file: root_file.to_string(), modules }
}

fn parse_module(file: &str) -> Module {
    let code = without_test_items(&code_only(&read(file)));
    let children = declared_children(&code);
    let (uses, rest) = use_items(&code);
    // A path may start at a child module or at a name a `use` brought in (`metrics::f()`).
    let mut heads: BTreeSet<String> = children.iter().map(|c| c[0].clone()).collect();
    heads.extend(uses.iter().map(|u| u.name.clone()));
    let paths = (0..rest.len()).filter_map(|at| path_at(&rest, at, &heads)).collect();
    Module { file: file.to_string(), children, uses, paths }
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// When the `#[cfg(…)]` attribute starting at `at` holds only under test: where it ends.
fn test_cfg_at(code: &str, at: usize) -> Option<usize> {
    let rest = &code[at..];
    let close = rest.find(']')?;
    let attr: String = rest[..close].split_whitespace().collect();
    let test_only =
        attr == "#[cfg(test)" || (attr.starts_with("#[cfg(all(") && attr.contains("test"));
    (test_only && !attr.contains("not(test")).then_some(at + close + 1)
}

/// `code` with each item under a test-only `#[cfg]` blanked: to its `;`, or its braced body.
fn without_test_items(code: &str) -> String {
    let mut out = code.as_bytes().to_vec();
    let b = code.as_bytes();
    for (at, _) in code.match_indices("#[cfg(") {
        let Some(mut i) = test_cfg_at(code, at) else { continue };
        // Braces, and the brackets and parentheses of a signature (`[u8; 2]`), around the `;`.
        let (mut braces, mut nest) = (0usize, 0usize);
        while i < b.len() {
            match b[i] {
                b'{' => braces += 1,
                b'}' => {
                    braces = braces.saturating_sub(1);
                    if braces == 0 {
                        break;
                    }
                }
                b'(' | b'[' => nest += 1,
                b')' | b']' => nest = nest.saturating_sub(1),
                b';' if braces == 0 && nest == 0 => break,
                _ => {}
            }
            i += 1;
        }
        for c in &mut out[at..(i + 1).min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The modules `code` declares with a file (`mod x;`, `pub(crate) mod x;`), each as its path
/// from the file's module: `[x]`, or `[a, x]` for a `mod x;` inside an inline `mod a { … }`
/// (the test binary's index).
fn declared_children(code: &str) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let (mut children, mut inline, mut depth) = (Vec::new(), Vec::<(String, usize)>::new(), 0usize);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d > depth) {
                    inline.pop();
                }
            }
            b'm' if code[i..].starts_with("mod ") && (i == 0 || !is_ident(b[i - 1])) => {
                let name: String =
                    code[i + 4..].chars().take_while(|c| is_ident(*c as u8)).collect();
                let after = code[i + 4 + name.len()..].trim_start();
                if after.starts_with(';') {
                    let mut path: Vec<String> = inline.iter().map(|(n, _)| n.clone()).collect();
                    path.push(name.clone());
                    children.push(path);
                } else if after.starts_with('{') {
                    inline.push((name.clone(), depth + 1));
                }
                i += 4 + name.len();
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    children
}

/// The `use` items of `code`, expanded, and `code` with them blanked (for `path_at`).
fn use_items(code: &str) -> (Vec<Use>, String) {
    let b = code.as_bytes();
    let mut rest = b.to_vec();
    let mut uses = Vec::new();
    for (at, _) in code.match_indices("use ") {
        if at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b'#') {
            continue;
        }
        let Some(len) = code[at..].find(';') else { continue };
        let before = code[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && pub_paren(before);
        let tree: String = code[at + 4..at + len].split_whitespace().collect::<Vec<_>>().join(" ");
        for (path, name) in expand(&tree) {
            uses.push(Use { name, path, public });
        }
        rest[at..at + len].iter_mut().for_each(|c| *c = b' ');
    }
    (uses, String::from_utf8_lossy(&rest).into_owned())
}

/// Whether `before` ends with `pub(…)`.
fn pub_paren(before: &str) -> bool {
    before.rfind("pub(").is_some_and(|i| !before[i..].contains(['\n', ';', '{', '}']))
}

/// A use tree (`a::b::{c, d::e as f, self}`) as its paths, each with the name it brings in;
/// globs bring in no name and are left out.
fn expand(tree: &str) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    expand_into(&[], tree.trim(), &mut out);
    out
}

fn expand_into(prefix: &[String], tree: &str, out: &mut Vec<(Vec<String>, String)>) {
    let tree = tree.trim().trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let mut path = prefix.to_vec();
        path.extend(segments(tree[..open].trim_end_matches([':', ' '])));
        let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        for part in split_top(body) {
            expand_into(&path, part, out);
        }
        return;
    }
    let (path_text, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p, Some(a.trim())),
        None => (tree, None),
    };
    let mut path = prefix.to_vec();
    path.extend(segments(path_text));
    if path.last().is_some_and(|s| s == "self") {
        path.pop();
    }
    if path_text.ends_with('*') || path.is_empty() {
        return;
    }
    let name = alias.map_or_else(|| path.last().cloned().unwrap_or_default(), str::to_string);
    out.push((path, name));
}

fn segments(text: &str) -> Vec<String> {
    text.split("::").map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect()
}

/// `body` split at its top-level commas.
fn split_top(body: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// The path that starts at `at` when it may lead into this crate: `crate::`, `super::`,
/// `self::` or one of `heads` (a child module, a name a `use` brought in), then `::`-joined
/// names.
fn path_at(code: &str, at: usize, heads: &BTreeSet<String>) -> Option<Vec<String>> {
    let b = code.as_bytes();
    if at > 0 && (is_ident(b[at - 1]) || matches!(b[at - 1], b'$' | b':')) {
        return None;
    }
    let mut path = Vec::new();
    let mut i = at;
    loop {
        let len = b[i..].iter().take_while(|&&c| is_ident(c)).count();
        if len == 0 {
            break;
        }
        path.push(code[i..i + len].to_string());
        i += len;
        if !code[i..].starts_with("::") {
            break;
        }
        i += 2;
    }
    let first = path.first()?;
    let ours = matches!(first.as_str(), "crate" | "super" | "self") || heads.contains(first);
    (ours && path.len() > 1 && !code[..at].trim_end().ends_with(" in")).then_some(path)
}

/// Where `path`, named in the module at `from`, leads inside the crate: the absolute path
/// (module names, then the item's), or `None` for a path outside the crate.
fn absolute(krate: &Crate, from: &[String], path: &[String]) -> Option<Vec<String>> {
    let module = krate.modules.get(from)?;
    let (mut abs, mut rest) = (from.to_vec(), path);
    match path.first()?.as_str() {
        "crate" => (abs, rest) = (Vec::new(), &path[1..]),
        "self" => rest = &path[1..],
        "super" => {
            while rest.first().is_some_and(|s| s == "super") {
                abs.pop()?;
                rest = &rest[1..];
            }
        }
        head => {
            // `use serde_json;` brings in the name it starts with: that is no hop.
            let hop = module.uses.iter().find(|u| u.name == head && u.path[0] != head);
            if let Some(u) = hop {
                let mut through = absolute(krate, from, &u.path)?;
                through.extend_from_slice(&path[1..]);
                return Some(through);
            }
            if !module.children.iter().any(|c| c[0] == head) {
                return None;
            }
        }
    }
    abs.extend_from_slice(rest);
    Some(abs)
}

/// The file (by module path) that defines what `abs` names: the deepest module on it, or,
/// when that module only brings the item in with a `use` (a facade's re-export, a private
/// import), the file that `use` leads to; `None` when that is outside the crate.
fn target(krate: &Crate, abs: &[String], hops: usize) -> Option<Vec<String>> {
    let depth = (0..=abs.len()).rev().find(|&n| krate.modules.contains_key(&abs[..n]))?;
    let (module, rest) = (&abs[..depth], &abs[depth..]);
    let Some(item) = rest.first() else { return Some(module.to_vec()) };
    let through = krate.modules[module].uses.iter().find(|u| &u.name == item);
    match through {
        Some(u) if hops < 16 => {
            let mut next = absolute(krate, module, &u.path)?;
            next.extend_from_slice(&rest[1..]);
            target(krate, &next, hops + 1)
        }
        _ => Some(module.to_vec()),
    }
}

/// One file importing another: the importer, the imported, and the path that does it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Edge {
    from: String,
    to: String,
    path: String,
}

/// Every import between two files of `krate`, facades left out.
fn edges(krate: &Crate) -> Vec<Edge> {
    let mut out = BTreeSet::new();
    for (from, module) in &krate.modules {
        let uses = module.uses.iter().map(|u| (&u.path, u.public));
        let paths = module.paths.iter().map(|p| (p, false));
        for (path, public) in uses.chain(paths) {
            let Some(abs) = absolute(krate, from, path) else { continue };
            let facade = public && abs.len() > from.len() + 1 && abs.starts_with(from);
            let Some(to) = target(krate, &abs, 0).filter(|to| !facade && to != from) else {
                continue;
            };
            let to = krate.modules[&to].file.clone();
            out.insert(Edge { from: module.file.clone(), to, path: path.join("::") });
        }
    }
    out.into_iter().collect()
}

/// The strongly connected components of the graph of `edges` with more than one file
/// (Tarjan's algorithm), each sorted.
fn circles(edges: &[Edge]) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for e in edges {
        next.entry(&e.from).or_default().push(&e.to);
        next.entry(&e.to).or_default();
    }
    let mut t = Tarjan { next, index: BTreeMap::new(), low: BTreeMap::new(), ..Tarjan::default() };
    let nodes: Vec<&str> = t.next.keys().copied().collect();
    for node in nodes {
        if !t.index.contains_key(node) {
            t.visit(node);
        }
    }
    t.found
}

#[derive(Default)]
struct Tarjan<'a> {
    next: BTreeMap<&'a str, Vec<&'a str>>,
    index: BTreeMap<&'a str, usize>,
    low: BTreeMap<&'a str, usize>,
    stack: Vec<&'a str>,
    found: Vec<Vec<String>>,
}

impl<'a> Tarjan<'a> {
    fn visit(&mut self, node: &'a str) {
        let i = self.index.len();
        self.index.insert(node, i);
        self.low.insert(node, i);
        self.stack.push(node);
        for to in self.next[node].clone() {
            if !self.index.contains_key(to) {
                self.visit(to);
                let low = self.low[node].min(self.low[to]);
                self.low.insert(node, low);
            } else if self.stack.contains(&to) {
                let low = self.low[node].min(self.index[to]);
                self.low.insert(node, low);
            }
        }
        if self.low[node] == self.index[node] {
            let at = self.stack.iter().rposition(|n| *n == node).expect("on the stack");
            let mut component: Vec<String> = self.stack.drain(at..).map(str::to_string).collect();
            if component.len() > 1 {
                component.sort();
                self.found.push(component);
            }
        }
    }
}

/// Circles allowed for now, each with what would break it: the list may only shrink (the two
/// found when this test was written are broken). A circle not listed fails the test, and so
/// does a listed one that is gone.
const KNOWN_CIRCLES: &[(&str, &str)] = &[];

/// Every circle of every crate, as its files joined by a space, with the imports inside it.
fn workspace_circles() -> (usize, Vec<(String, String)>) {
    let (mut files, mut found) = (0, Vec::new());
    for krate in crates() {
        files += krate.modules.len();
        let edges = edges(&krate);
        for circle in circles(&edges) {
            let inside: Vec<String> = edges
                .iter()
                .filter(|e| circle.contains(&e.from) && circle.contains(&e.to))
                .map(|e| format!("  {} -> {} ({})", e.from, e.to, e.path))
                .collect();
            found.push((circle.join(" "), format!("{}:\n{}", krate.root_file, inside.join("\n"))));
        }
    }
    (files, found)
}

#[test]
fn no_two_files_of_a_crate_import_each_other_around_a_loop() {
    let (files, found) = workspace_circles();
    assert!(files > 200, "only {files} source files read: the crates were not found");
    let new: Vec<&String> = found
        .iter()
        .filter(|(circle, _)| !KNOWN_CIRCLES.iter().any(|(known, _)| known == circle))
        .map(|(_, imports)| imports)
        .collect();
    assert!(
        new.is_empty(),
        "import circles (move what both sides need into a lower module or one of its own):\n{}",
        new.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
    let gone: Vec<&str> = KNOWN_CIRCLES
        .iter()
        .map(|(known, _)| *known)
        .filter(|known| !found.iter().any(|(circle, _)| circle == known))
        .collect();
    assert!(gone.is_empty(), "KNOWN_CIRCLES lists circles that are gone; remove them: {gone:?}");
}

#[test]
fn a_use_tree_expands_to_its_paths() {
    let got = expand("crate::{a::{b, c as d, self}, e::*, f::g}");
    let want: Vec<(Vec<String>, String)> = [
        (vec!["crate", "a", "b"], "b"),
        (vec!["crate", "a", "c"], "d"),
        (vec!["crate", "a"], "a"),
        (vec!["crate", "f", "g"], "g"),
    ]
    .into_iter()
    .map(|(p, n)| (p.into_iter().map(str::to_string).collect(), n.to_string()))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn a_loop_of_three_files_is_one_circle_and_a_chain_none() {
    let edge =
        |from: &str, to: &str| Edge { from: from.into(), to: to.into(), path: String::new() };
    let chain = [edge("a", "b"), edge("b", "c"), edge("a", "c")];
    assert!(circles(&chain).is_empty());
    let looped = [edge("a", "b"), edge("b", "c"), edge("c", "a"), edge("c", "d")];
    assert_eq!(circles(&looped), [vec!["a".to_string(), "b".into(), "c".into()]]);
}

#[test]
fn test_items_are_not_imports() {
    let code = "use crate::a;\n#[cfg(test)]\nmod tests {\n use crate::b;\n}\n\
                #[cfg(test)]\nuse crate::c;\n\
                #[cfg(test)]\nfn f(_: [u8; 2]) { crate::d::f() }\nuse crate::e;";
    let (uses, _) = use_items(&without_test_items(code));
    let names: Vec<&str> = uses.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["a", "e"]);
}
