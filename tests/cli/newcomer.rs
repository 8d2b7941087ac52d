//! What a newcomer is promised holds (issue 31): every command's `--help` and every man page
//! end with the exit codes, `--version` and result_summary.json's `git_sha` name the commit of
//! a build from a git clone, and each `init` template runs as written from another folder,
//! its endpoint the only edit.

use std::path::Path;
use std::process::Command;

use crate::support::{bin, read_json, report_dir, run, stub, Scratch};
use loadgen_stubs::StubKind;

/// The exit codes and a word of each row (the binary's `cli::EXIT_CODES`).
const EXIT_ROWS: [&str; 6] = [
    "  0    success",
    "  1    usage error",
    "  2    bad input",
    "  3    setup error",
    "  4    execution error",
    "  130  interrupted",
];

#[test]
fn every_help_and_man_page_ends_with_the_exit_codes() {
    // Every command users see, down to the leaves: the list the docs' tidy test walks.
    for &args in super::docs_tidy::COMMANDS {
        for flag in ["-h", "--help"] {
            let out = bin().args(args).arg(flag).output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{args:?} {flag}");
            let help = String::from_utf8_lossy(&out.stdout);
            let tail = help.split("\nExit status:\n").nth(1);
            let tail = tail.unwrap_or_else(|| panic!("{args:?} {flag}: no Exit status: {help}"));
            for row in EXIT_ROWS {
                assert!(tail.contains(row), "{args:?} {flag}: {row:?} not in {tail}");
            }
        }
    }
    let dir = Scratch::new("man");
    let out = run(["man", "--out-dir", &dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(0));
    let pages = String::from_utf8_lossy(&out.stdout).lines().count();
    assert!(pages > 15, "one page per command: {pages}");
    for page in std::fs::read_dir(&dir).unwrap() {
        let path = page.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let section = text.split(".SH \"EXIT STATUS\"\n").nth(1);
        let section = section.unwrap_or_else(|| panic!("{}: no EXIT STATUS", path.display()));
        for code in ["0", "1", "2", "3", "4", "130"] {
            assert!(section.contains(&format!(".TP\n\\fB{code}\\fR\n")), "{}", path.display());
        }
        assert_eq!(text.matches(".ds Aq").count(), 2, "one preamble: {}", path.display());
        assert!(!text.contains(".SH EXTRA"), "{}", path.display());
    }
}

/// The commit of the checkout the binary was built from, when git and `.git` are here.
fn checkout_commit() -> Option<String> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut git = Command::new("git");
    let out = git.args(["rev-parse", "--short=7", "HEAD"]).current_dir(root).output().ok();
    let out = out.filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn version_and_the_summary_name_the_commit_of_a_git_build() {
    let out = run(["--version"]);
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let Some(commit) = checkout_commit() else {
        // A tarball or a machine without git: the version says the commit is unknown.
        eprintln!("skipped the commit check: no git checkout here");
        assert!(version.ends_with("(commit unknown: not built from a git clone)"), "{version}");
        return;
    };
    let want = format!("llm-loadgen {} (commit {commit})", env!("CARGO_PKG_VERSION"));
    assert_eq!(version, want);
    let dir = report_dir("git-sha");
    let out = bin()
        .args(["benchmark", "offline", "--num-samples", "10", "--report-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let summary = read_json(&dir.join("performance/result_summary.json"));
    assert_eq!(summary["git_sha"], serde_json::json!(commit));
    let report = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(report.contains(&format!("Git SHA: {commit}")), "{report}");
}

/// `init NAME -o sub/NAME.yaml`, its endpoint pointed at `url`, run from `cwd` with `flags`.
fn run_template(name: &str, cwd: &Path, url: &str, flags: &[&str]) -> (String, String) {
    let yaml = cwd.join("sub").join(format!("{name}.yaml"));
    std::fs::create_dir_all(yaml.parent().unwrap()).unwrap();
    let out = bin().args(["init", name, "-o"]).arg(&yaml).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&yaml).unwrap();
    let edited = text.replace("  - http://localhost:8000\n", &format!("  - {url}\n"));
    assert_ne!(edited, text, "the endpoint is the one edit");
    std::fs::write(&yaml, edited).unwrap();
    // From another folder than the YAML's: its prompts are found beside it.
    let elsewhere = cwd.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let dir = report_dir(&format!("template-{name}"));
    let out = bin()
        .args(["benchmark", "from-config", "-c"])
        .arg(&yaml)
        .args(flags)
        .arg("--report-dir")
        .arg(&dir)
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into());
    assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
    (stdout, stderr)
}

#[test]
fn each_init_template_runs_from_another_folder_with_only_its_endpoint_changed() {
    let server = stub(StubKind::MaxThroughput, |_| {});
    let tmp = Scratch::new("templates");
    for name in ["offline", "concurrency"] {
        let (stdout, _) = run_template(name, &tmp, &server.url(), &[]);
        assert!(stdout.contains("Samples: 7000 issued, 7000 completed, 0 failed"), "{stdout}");
        assert!(stdout.contains("Run length: 7000 samples, from --duration 600 s"), "{stdout}");
    }
    // The online template's 7000 samples at 10 QPS take about 700 s: the test asks for
    // fewer on the command line, the YAML unchanged but for its endpoint.
    let flags = ["--num-samples", "20", "--target-qps", "200"];
    let (stdout, _) = run_template("online", &tmp, &server.url(), &flags);
    assert!(stdout.contains("Samples: 20 issued, 20 completed, 0 failed"), "{stdout}");
    assert!(stdout.contains("at 200 QPS, meant to take about 0.1 s"), "{stdout}");
}
