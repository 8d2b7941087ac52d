//! Helpers shared by the end-to-end tests: the binary, the project's assets, stubs, summaries.
#![allow(dead_code, reason = "each test binary uses its own subset of these helpers")]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use loadgen_stubs::{StubConfig, StubKind, StubServer};

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
