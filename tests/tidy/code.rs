//! The code stays in shape (rust-analyzer's `tidy` tests): no function grows past 70 lines
//! unless it is one of today's longer ones, which may only shrink, and `unsafe` appears only
//! in the files that are allowed to hold it.

use std::collections::BTreeMap;

use super::source::{code_only, functions, has_unsafe, read, rust_files, Function};

/// The longest a function may be.
const MAX_FUNCTION_LINES: usize = 70;

/// The functions longer than `MAX_FUNCTION_LINES` when the ratchet was set, with their length
/// then: `path name lines` per line. An entry may only shrink or go away.
const LONG_FUNCTIONS: &str = include_str!("long_functions.txt");

/// The only files where `unsafe` may appear: the shared memory, rings and doorbell of the wire,
/// fork and signals, the fd limit, the disk-space check, socket options, and the tests that send
/// signals to the processes they start. A new file here needs a reason in its commit.
const UNSAFE_FILES: &[&str] = &[
    "coordinator/src/aggregate/tests.rs",
    "coordinator/src/fork.rs",
    "coordinator/src/run.rs",
    "report/src/reserve.rs",
    "src/commands/sys.rs",
    "src/run.rs",
    "stubs/src/config.rs",
    "stubs/src/variable.rs",
    "tests/endpoints/connections.rs",
    "tests/run/run_control.rs",
    "tests/sharding/scale_out.rs",
    "tests/sharding/shards.rs",
    "tests/support/fleet.rs",
    "tests/support/stamps.rs",
    "tests/support/watch.rs",
    "wire/src/doorbell.rs",
    "wire/src/inflight.rs",
    "wire/src/region.rs",
    "wire/src/ring.rs",
    "wire/src/sys.rs",
    "wire/src/tests.rs",
    "worker/examples/tls_bench.rs",
    "worker/src/http/conn.rs",
];

fn allowed() -> BTreeMap<(String, String), usize> {
    let mut map = BTreeMap::new();
    for line in LONG_FUNCTIONS.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let mut parts = line.split_whitespace();
        let (Some(path), Some(name), Some(lines)) = (parts.next(), parts.next(), parts.next())
        else {
            panic!("long_functions.txt: `{line}` is not `path name lines`");
        };
        let lines: usize = lines.parse().unwrap_or_else(|_| panic!("long_functions.txt: `{line}`"));
        let slot = map.entry((path.to_string(), name.to_string())).or_insert(0);
        *slot = lines.max(*slot);
    }
    map
}

fn long_functions() -> Vec<(String, Function)> {
    let mut long = Vec::new();
    for path in rust_files() {
        for f in functions(&code_only(&read(&path))) {
            if f.lines > MAX_FUNCTION_LINES {
                long.push((path.clone(), f));
            }
        }
    }
    long
}

#[test]
fn no_function_grows_past_70_lines() {
    let allowed = allowed();
    let mut over = Vec::new();
    for (path, f) in long_functions() {
        match allowed.get(&(path.clone(), f.name.clone())) {
            Some(&max) if f.lines <= max => {}
            Some(&max) => over.push(format!(
                "{path}:{} fn {} grew to {} lines (ratchet: {max})",
                f.line, f.name, f.lines
            )),
            None => over.push(format!(
                "{path}:{} fn {} has {} lines (at most {MAX_FUNCTION_LINES})",
                f.line, f.name, f.lines
            )),
        }
    }
    assert!(over.is_empty(), "split these functions:\n{}", over.join("\n"));
}

#[test]
fn the_long_function_list_only_shrinks() {
    let now: Vec<(String, String, usize)> =
        long_functions().into_iter().map(|(p, f)| (p, f.name, f.lines)).collect();
    let stale: Vec<String> = allowed()
        .into_iter()
        .filter(|((path, name), max)| {
            !now.iter().any(|(p, n, lines)| p == path && n == name && lines == max)
        })
        .map(|((path, name), max)| format!("{path} {name} {max}"))
        .collect();
    assert!(
        stale.is_empty(),
        "tests/tidy/long_functions.txt lists lengths that are no longer true; lower or remove:\n{}",
        stale.join("\n")
    );
}

#[test]
fn unsafe_appears_only_in_the_listed_files() {
    let holding: Vec<String> =
        rust_files().into_iter().filter(|p| has_unsafe(&code_only(&read(p)))).collect();
    let unlisted: Vec<&String> =
        holding.iter().filter(|p| !UNSAFE_FILES.contains(&p.as_str())).collect();
    assert!(unlisted.is_empty(), "`unsafe` outside the listed files: {unlisted:?}");
    let unused: Vec<&&str> =
        UNSAFE_FILES.iter().filter(|f| !holding.iter().any(|h| h == *f)).collect();
    assert!(unused.is_empty(), "listed as holding `unsafe` but do not: {unused:?}");
}
