//! The docs stay true (rust-analyzer's `tidy` tests): every flag a command's `--help` offers is
//! in docs/CLI.md and every flag docs/CLI.md names is offered (or listed as another program's),
//! and every key `result_summary.json` writes is in docs/OUTPUT.md.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::{bin, report_dir, run, summary};

/// The commands whose flags users see, as `llm-loadgen <args> --help`.
pub(super) const COMMANDS: &[&[&str]] = &[
    &[],
    &["benchmark"],
    &["benchmark", "offline"],
    &["benchmark", "online"],
    &["benchmark", "from-config"],
    &["init"],
    &["validate-yaml"],
    &["info"],
    &["probe"],
    &["report"],
    &["merge"],
    &["early-stopping"],
    &["plot"],
    &["stub"],
    &["stub", "echo"],
    &["stub", "max-throughput"],
    &["stub", "variable"],
    &["stub", "video"],
    &["compare"],
    &["sweep"],
    &["check"],
    &["completions"],
    &["man"],
];

/// Where a command's flags are documented: the stub servers' in docs/STUBS.md, the rest in
/// docs/CLI.md.
fn doc_of(args: &[&str]) -> &'static str {
    if args.first() == Some(&"stub") {
        "STUBS.md"
    } else {
        "CLI.md"
    }
}

fn doc(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every `--long-flag` spelling in `text` (options, visible aliases).
fn long_flags(text: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = text[i..].find("--") {
        let start = i + at;
        let mut end = start + 2;
        while end < bytes.len()
            && (bytes[end].is_ascii_alphanumeric() || matches!(bytes[end], b'-' | b'.' | b'_'))
        {
            end += 1;
        }
        let flag = text[start..end].trim_end_matches(['.', '-']);
        let preceded_by_word = start > 0 && bytes[start - 1].is_ascii_alphanumeric();
        if flag.len() > 2 && !preceded_by_word {
            flags.insert(flag.to_string());
        }
        i = end;
    }
    flags
}

#[test]
fn every_flag_in_help_is_in_cli_md_or_stubs_md() {
    let mut missing = Vec::new();
    for &args in COMMANDS {
        let documented = long_flags(&doc(doc_of(args)));
        let out = bin().args(args).arg("--help").output().expect("the binary runs");
        assert!(out.status.success(), "llm-loadgen {args:?} --help failed");
        for flag in long_flags(&String::from_utf8_lossy(&out.stdout)) {
            if flag != "--help" && flag != "--version" && !documented.contains(&flag) {
                let command = args.join(" ");
                missing.push(format!("{flag} (llm-loadgen {command}: docs/{})", doc_of(args)));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "flags in --help but not in their doc:\n{}", missing.join("\n"));
}

/// Whether OUTPUT.md names `key`: literally, or as the other basis's `<base>_<other>`.
fn documented_key(output_md: &str, key: &str) -> bool {
    let other = key.strip_suffix("_server").or_else(|| key.strip_suffix("_client"));
    output_md.contains(&format!("`{key}`"))
        || other.is_some_and(|base| output_md.contains(&format!("`{base}_<other>`")))
}

#[test]
fn every_result_summary_key_is_in_output_md() {
    let output_md = doc("OUTPUT.md");
    for source in ["client", "server"] {
        let dir = report_dir(&format!("tidy-summary-{source}"));
        let d = dir.display().to_string();
        let out = run([
            "benchmark",
            "offline",
            "--endpoints",
            "null://",
            "--num-samples",
            "200",
            "--token-count-source",
            source,
            "--report-dir",
            &d,
        ]);
        assert_eq!(out.status.code(), Some(0));
        let s = summary(&dir);
        let keys = s.as_object().expect("the summary is an object").keys();
        let missing: Vec<&String> = keys.filter(|k| !documented_key(&output_md, k)).collect();
        assert!(missing.is_empty(), "{source}: summary keys not in docs/OUTPUT.md: {missing:?}");
    }
}

#[test]
fn the_flag_scanner_finds_flags_and_aliases_only() {
    let flags = long_flags("  --model M  [aliases: --model-params.name]\n a-- b\n use --workers.");
    let want: BTreeSet<String> =
        ["--model", "--model-params.name", "--workers"].iter().map(|s| s.to_string()).collect();
    assert_eq!(flags, want);
}

/// Flags docs/CLI.md names that are not the binary's, each with whose it is.
const FOREIGN_FLAGS: &[(&str, &str)] = &[
    ("--confidence", "the reference's early-stopping script, named as not offered"),
    ("--ctx-size", "the edge server (llama-server), quoted by the compliance check"),
    ("--FLAG", "a placeholder for any flag"),
    ("--enable-x", "the pattern of a switch pair"),
    ("--no-x", "the pattern of a switch pair"),
    ("--nodes", "sbatch"),
    ("--profiler-config.delay_iterations", "vLLM's server (server profiling)"),
    ("--profiler-config.max_iterations", "vLLM's server (server profiling)"),
    ("--profiler-config.profiler", "vLLM's server (server profiling)"),
    ("--reasoning", "the edge server (llama-server), quoted by the compliance check"),
    ("--release", "cargo"),
    ("--roofline-client-workers", "loadgen-perf"),
    ("--summary", "the reference's early-stopping script"),
];

#[test]
fn every_flag_cli_md_names_is_the_binary_s_or_named_as_another_program_s() {
    let mut offered = BTreeSet::new();
    for &args in COMMANDS {
        let out = bin().args(args).arg("--help").output().expect("the binary runs");
        offered.extend(long_flags(&String::from_utf8_lossy(&out.stdout)));
    }
    let named = long_flags(&doc("CLI.md"));
    let foreign: BTreeSet<String> = FOREIGN_FLAGS.iter().map(|(f, _)| f.to_string()).collect();
    let unknown: Vec<&String> =
        named.iter().filter(|f| !offered.contains(*f) && !foreign.contains(*f)).collect();
    assert!(unknown.is_empty(), "docs/CLI.md names flags no --help offers: {unknown:?}");
    let stale: Vec<&String> =
        foreign.iter().filter(|f| !named.contains(*f) || offered.contains(*f)).collect();
    assert!(stale.is_empty(), "FOREIGN_FLAGS lists flags CLI.md no longer names: {stale:?}");
}
