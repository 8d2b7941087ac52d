//! Scriptable output: `benchmark … --json` (the summary object alone on stdout, golden key set
//! and stable fields), `completions SHELL` and `man`, checked against the subcommands `--help`
//! lists.

use std::path::Path;
use std::process::Output;

use crate::support::{bin, check_golden, report_dir, run, summary};
use serde_json::Value;

/// The summary's figures that do not vary from run to run of the same command.
const STABLE_KEYS: [&str; 10] = [
    "n_samples_issued",
    "n_samples_completed",
    "n_samples_failed",
    "state",
    "complete",
    "token_count_source",
    "finish_reason_counts",
    "run_config",
    "n_samples_abandoned",
    "failure_kinds",
];

/// The `--json` object of a run, checked to be the only thing on stdout and to be the
/// written result_summary.json plus `report_dir`.
fn json_of_run(out: &Output, dir: &Path) -> serde_json::Map<String, Value> {
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8");
    let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(&stdout) else {
        panic!("stdout is not one JSON object:\n{stdout}");
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Run complete."), "the console summary goes to stderr: {stderr}");
    assert_eq!(object.get("report_dir"), Some(&Value::from(dir.display().to_string())));
    object.remove("report_dir");
    assert_eq!(Value::Object(object.clone()), summary(dir), "the object is the summary file's");
    object
}

/// The top-level keys of a JSON object written with a two-space indent, in order.
fn top_level_keys(text: &str) -> Vec<String> {
    let keys = text.lines().filter_map(|l| l.strip_prefix("  \"")).filter(|l| !l.starts_with(' '));
    keys.filter_map(|l| l.split_once("\": ").map(|(k, _)| k.to_string())).collect()
}

#[test]
fn a_header_value_that_is_a_json_word_leaves_the_json_valid() {
    // `X-Flag` is no secret, so `true` is printed as it is; an API key is, and hiding it
    // (even one spelled `true`) hides it inside JSON strings only.
    for (i, extra) in [["--header", "X-Flag: true"], ["--api-key", "true"]].iter().enumerate() {
        let dir = report_dir(&format!("json-word-{i}"));
        let d = dir.display().to_string();
        let mut args = vec!["benchmark", "offline", "--num-samples", "20", "--report-dir", &d];
        args.extend(["--json"].iter().chain(extra.iter()));
        let out = run(args);
        assert_eq!(out.status.code(), Some(0));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let object: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}:\n{stdout}"));
        assert_eq!(object["complete"], Value::Bool(true), "{stdout}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn benchmark_json_prints_only_the_summary_object_on_stdout() {
    let dir = report_dir("json-offline");
    let d = dir.display().to_string();
    let out = run(["benchmark", "offline", "--num-samples", "40", "--report-dir", &d, "--json"]);
    let object = json_of_run(&out, &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no --endpoints given"), "log lines go to stderr: {stderr}");
    // The key set (in order) and the stable figures are golden; the timings vary per run.
    let text = std::fs::read_to_string(dir.join("performance/result_summary.json")).unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.ends_with("\n}\n"), "ends with the object and a newline");
    let mut keys = top_level_keys(&text);
    keys.push("report_dir".to_string());
    assert_eq!(top_level_keys(&stdout), keys, "the file's keys in its order, report_dir last");
    check_golden("compare/benchmark_json_keys.txt", format!("{}\n", keys.join("\n")).as_bytes());
    let stable: serde_json::Map<String, Value> =
        STABLE_KEYS.iter().map(|k| (k.to_string(), object[*k].clone())).collect();
    let stable = serde_json::to_string_pretty(&stable).unwrap() + "\n";
    check_golden("compare/benchmark_json_stable.json", stable.as_bytes());
}

#[test]
fn benchmark_json_keeps_stdout_to_the_object_on_online_and_from_config() {
    let dir = report_dir("json-online");
    let d = dir.display().to_string();
    let online = [
        "benchmark",
        "online",
        "--endpoints",
        "null://",
        "--load-pattern",
        "concurrency",
        "--concurrency",
        "4",
        "--num-samples",
        "20",
        "--report-dir",
        &d,
        "--json",
    ];
    let object = json_of_run(&run(online), &dir);
    assert_eq!(object["n_samples_completed"], 20);

    let dir = report_dir("json-from-config");
    let d = dir.display().to_string();
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = dir.join("c.yaml");
    std::fs::write(&yaml, "type: offline\n").unwrap();
    let y = yaml.display().to_string();
    let from_config = [
        "benchmark",
        "from-config",
        "-c",
        &y,
        "--endpoints",
        "null://",
        "--num-samples",
        "30",
        "--report-dir",
        &d,
        "--json",
    ];
    let object = json_of_run(&run(from_config), &dir);
    assert_eq!(object["n_samples_completed"], 30);
}

#[test]
fn benchmark_without_json_prints_the_console_summary_on_stdout() {
    let dir = report_dir("json-off");
    let d = dir.display().to_string();
    let out = run([
        "benchmark",
        "offline",
        "--endpoints",
        "null://",
        "--num-samples",
        "20",
        "--report-dir",
        &d,
    ]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Run complete.") && !stdout.contains("\"report_dir\""), "{stdout}");
}

/// Every subcommand `llm-loadgen [ARGS] --help` lists, with the commands under it, as paths.
fn subcommands(args: &[&str]) -> Vec<Vec<String>> {
    let out = bin().args(args).arg("--help").output().expect("the binary runs");
    let help = String::from_utf8_lossy(&out.stdout).to_string();
    let Some(section) = help.split("Commands:\n").nth(1) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for line in section.lines().take_while(|l| l.starts_with("  ")) {
        let name = line.split_whitespace().next().unwrap_or_default().to_string();
        if name == "help" {
            continue;
        }
        let mut path: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        path.push(name);
        let below: Vec<&str> = path.iter().map(String::as_str).collect();
        let nested = subcommands(&below);
        found.push(path);
        found.extend(nested);
    }
    found
}

fn stdout_of(args: &[&str]) -> String {
    let out = bin().args(args).output().expect("the binary runs");
    assert_eq!(out.status.code(), Some(0), "llm-loadgen {args:?}");
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn bash_completions_parse_and_offer_every_subcommand() {
    let commands = subcommands(&[]);
    assert!(commands.len() >= 12, "the help lists the subcommands: {commands:?}");
    let script = stdout_of(&["completions", "bash"]);
    let file = report_dir("completions").with_extension("bash");
    std::fs::write(&file, &script).unwrap();
    let check = std::process::Command::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(check.status.success(), "bash -n: {}", String::from_utf8_lossy(&check.stderr));
    let words: std::collections::BTreeSet<&str> =
        script.split(|c: char| c.is_whitespace() || c == '"').collect();
    for path in &commands {
        let name = path.last().unwrap();
        assert!(words.contains(name.as_str()), "bash completion lacks {path:?}");
    }
}

#[test]
fn completions_for_every_shell_name_the_new_commands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        for name in ["compare", "completions", "benchmark", "from-config"] {
            assert!(script.contains(name), "{shell} completion lacks {name}");
        }
    }
    let out = bin().args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "an unknown shell is a usage error");
}

#[test]
fn man_page_names_every_subcommand() {
    let page = stdout_of(&["man"]);
    assert!(page.starts_with(".ie") || page.contains(".TH llm-loadgen"), "a roff page");
    let text = page.replace("\\-", "-");
    for path in subcommands(&[]).iter().filter(|p| p.len() == 1) {
        let entry = format!("llm-loadgen-{}(1)", path[0]);
        assert!(text.contains(&entry), "the man page lacks {entry}");
    }
    assert!(text.contains(".SH SUBCOMMANDS") && text.contains(".SH OPTIONS"));
}

#[test]
fn man_out_dir_writes_a_page_per_command_with_its_flags() {
    let dir = report_dir("man-pages");
    let d = dir.display().to_string();
    let listed = stdout_of(&["man", "--out-dir", &d]);
    for path in subcommands(&[]) {
        let file = dir.join(format!("llm-loadgen-{}.1", path.join("-")));
        assert!(listed.contains(&file.display().to_string()), "{} is listed", file.display());
        let page = std::fs::read_to_string(&file).expect("the page is written");
        assert!(page.contains(".TH llm-loadgen-"), "{} is a man page", file.display());
    }
    // The offline page documents each flag that `benchmark offline --help` offers (by its
    // name: clap_mangen leaves out the visible aliases, which --help and docs/CLI.md list).
    let page = std::fs::read_to_string(dir.join("llm-loadgen-benchmark-offline.1")).unwrap();
    let page = page.replace("\\-", "-");
    let help = stdout_of(&["benchmark", "offline", "--help"]);
    let option_line = |l: &&str| l.trim_start().starts_with('-');
    let flags: Vec<&str> = help
        .lines()
        .filter(option_line)
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("--")))
        .map(|w| w.trim_end_matches([',', ']', '.']))
        .collect();
    assert!(flags.len() > 50, "offline --help lists its flags");
    for flag in flags {
        assert!(page.contains(flag), "the offline man page lacks {flag}");
    }
}

#[test]
fn benchmark_json_prints_nothing_on_stdout_when_the_run_cannot_start() {
    let out =
        run(["benchmark", "offline", "--endpoints", "null://", "--num-samples", "0", "--json"]);
    assert_eq!(out.status.code(), Some(2), "--num-samples 0 is bad input");
    assert!(out.stdout.is_empty(), "no object, no half object");
    assert!(String::from_utf8_lossy(&out.stderr).contains("llm-loadgen: input error"));
}
