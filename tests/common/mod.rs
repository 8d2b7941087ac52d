//! Helpers shared by the end-to-end tests: the binary, the project's assets, stubs, summaries.
#![allow(dead_code, reason = "each test binary uses its own subset of these helpers")]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use loadgen_stubs::{StubConfig, StubKind, StubServer};

pub mod fleet;
pub mod stamps;

/// The `llm-loadgen` binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_llm-loadgen"))
}

pub fn assets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/assets")
}

/// The project's 1,000-prompt dataset with its column mapping.
pub fn dataset() -> String {
    format!("{},parser.prompt=text_input", assets().join("datasets/dummy_1k.jsonl").display())
}

/// The one-token-per-character tokenizer.
pub fn char_tokenizer() -> String {
    assets().join("tokenizers/char").display().to_string()
}

/// A fresh report directory under the target dir, removed first if a past run left one.
pub fn report_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("run-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A stub server on 127.0.0.1 port 0, configured by `configure`; stopped when dropped.
pub fn stub(kind: StubKind, configure: impl FnOnce(&mut StubConfig)) -> StubServer {
    let mut cfg = StubConfig::new(kind);
    configure(&mut cfg);
    StubServer::start(cfg).expect("the stub starts")
}

/// Runs the binary to completion and echoes its output for failing tests.
pub fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = bin().args(args).output().expect("the binary runs");
    show(&out);
    out
}

/// Waits for a child within `limit`, killing it past that (and failing the test); returns its
/// output, echoed for failing tests.
pub fn wait_output(
    mut child: std::process::Child,
    what: &str,
    limit: std::time::Duration,
) -> Output {
    let deadline = std::time::Instant::now() + limit;
    loop {
        if child.try_wait().expect("the child can be waited on").is_some() {
            let out = child.wait_with_output().expect("its output is read");
            show(&out);
            return out;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("its output is read");
            show(&out);
            panic!("{what} did not finish within {limit:?}");
        }
        // Polling a child is the std way to bound a wait on it; the slice only paces the poll.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

pub fn show(out: &Output) {
    eprintln!("--- stdout\n{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("--- stderr\n{}", String::from_utf8_lossy(&out.stderr));
}

pub fn summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("performance/result_summary.json"))
        .expect("result_summary.json is written");
    serde_json::from_str(&text).expect("result_summary.json parses")
}

pub fn report_txt(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("report.txt")).expect("report.txt is written")
}

/// Checks that every sample in `dir/events.jsonl` with a `sample.issued` line has exactly one
/// terminal event (`sample.complete`, or `error.loadgen` for an abandoned sample) and no sample
/// has a terminal event without its `sample.issued` line. Returns the number of issued samples.
pub fn check_terminal_events(dir: &Path) -> u64 {
    use std::collections::HashMap;
    let text = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl is written");
    let mut issued: HashMap<String, u32> = HashMap::new();
    let mut terminal: HashMap<String, u32> = HashMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("every event line parses");
        let uuid = v["sample_uuid"].as_str().unwrap_or_default().to_string();
        match v["event_type"].as_str().unwrap_or_default() {
            "sample.issued" => *issued.entry(uuid).or_default() += 1,
            "sample.complete" | "error.loadgen" => *terminal.entry(uuid).or_default() += 1,
            _ => {}
        }
    }
    for (uuid, n) in &issued {
        assert_eq!(*n, 1, "sample {uuid} has {n} sample.issued lines");
        assert_eq!(terminal.get(uuid), Some(&1), "sample {uuid} needs exactly one terminal event");
    }
    for uuid in terminal.keys() {
        assert!(issued.contains_key(uuid), "sample {uuid} ends without a sample.issued line");
    }
    issued.len() as u64
}

/// `issued = completed + abandoned` in `result_summary.json`, and one terminal event per issued
/// sample in events.jsonl. Returns (issued, completed, failed, abandoned).
pub fn check_accounting(dir: &Path) -> (u64, u64, u64, u64) {
    let s = summary(dir);
    let get = |key: &str| s[key].as_u64().unwrap_or_else(|| panic!("{key} in the summary"));
    let (issued, completed) = (get("n_samples_issued"), get("n_samples_completed"));
    let (failed, abandoned) = (get("n_samples_failed"), get("n_samples_abandoned"));
    assert_eq!(issued, completed + abandoned, "issued = completed + abandoned");
    assert_eq!(check_terminal_events(dir), issued, "one sample.issued line per issued sample");
    (issued, completed, failed, abandoned)
}

/// Decides a test this machine cannot run (`why`, e.g. "needs root and slurmctld on PATH"): a
/// test that did not run must not pass, so this panics naming what is missing, unless the user
/// opted out with `opt_out=1` (then it says so on stderr and the caller returns). Under CI
/// (`CI` set, as `.ci/run` sets it, and that installs every requirement) it always panics.
pub fn skip_only_if_opted_out(test: &str, why: &str, opt_out: &str) {
    let ci = std::env::var_os("CI").is_some();
    if ci {
        panic!("{test} {why}: under CI it must run (.ci/run installs what it needs)");
    }
    if std::env::var_os(opt_out).is_some_and(|v| v == "1") {
        eprintln!("{test} {why}; not run here ({opt_out}=1 skips it)");
        return;
    }
    panic!(
        "{test} {why}, so it cannot run here; install what it needs (.ci/run does), or set \
         {opt_out}=1 to skip it knowingly"
    );
}
