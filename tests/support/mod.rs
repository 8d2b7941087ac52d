//! What the integration tests share, defined once: the binary and the project's files, the
//! folders a test writes in, stubs, runs and their output. The submodules hold the larger
//! pieces: the gate for tests that need the machine alone, a run started under watch, a fleet
//! of stub processes, a stamping server, and what a run leaves in its report directory.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output};
use std::time::{Duration, Instant};

use loadgen_stubs::{StubConfig, StubKind, StubServer};

pub mod benchmark;
pub mod fleet;
pub mod gate;
pub mod report_files;
pub mod stamps;
pub mod watch;

pub use benchmark::{Ran, Run};
pub use gate::alone;
pub use report_files::{
    check_accounting, check_terminal_events, idx_map, isl_total, read_json, report_txt, summary,
    tally_events, unparsable_json,
};
pub use watch::{alive, children_of, reap_leftovers, signal, state, Watched};

/// The `llm-loadgen` binary under test, to run (and the test joins the shared side of `gate`).
pub fn bin() -> Command {
    Command::new(bin_path())
}

/// The binary's path, for a test that starts it through another program (`sh`, `unshare`,
/// `tmux`, `ip netns exec`, Slurm); like `bin()`, it puts the test on the shared side of `gate`.
pub fn bin_path() -> &'static str {
    gate::share();
    env!("CARGO_BIN_EXE_llm-loadgen")
}

/// The project's root folder (the root package's manifest directory).
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn assets() -> PathBuf {
    root().join("tests/assets")
}

/// The project's 1,000-prompt dataset with its column mapping.
pub fn dataset() -> String {
    format!("{},parser.prompt=text_input", assets().join("datasets/dummy_1k.jsonl").display())
}

/// The one-token-per-character tokenizer.
pub fn char_tokenizer() -> String {
    assets().join("tokenizers/char").display().to_string()
}

/// The calling test file's own folder under the target dir, made if missing:
/// `target/tmp/<area>/<file>/` for `tests/<area>/<file>.rs`. The tests of every file run at
/// once in this one binary, so each file writes only under its own folder, and names there need
/// only be unique within the file (as they were when each file was a binary of its own). The
/// file is the caller's (`#[track_caller]`), so helpers that take a name must be
/// `#[track_caller]` too.
#[track_caller]
pub fn tmp_dir() -> PathBuf {
    let file = Path::new(std::panic::Location::caller().file());
    let area = file.parent().and_then(Path::file_name).unwrap_or_default();
    let stem = file.file_stem().unwrap_or_default();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(area).join(stem);
    std::fs::create_dir_all(&dir).expect("the test file's folder under the target dir");
    dir
}

/// A fresh report directory for `name` in the calling file's folder (`tmp_dir`), removed first
/// if a past run left one.
#[track_caller]
pub fn report_dir(name: &str) -> PathBuf {
    let dir = report_path(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The report directory `report_dir(name)` gives, as it is: to read a run's files back.
#[track_caller]
pub fn report_path(name: &str) -> PathBuf {
    tmp_dir().join(format!("run-{name}"))
}

/// A scratch folder for `name` in the calling file's folder (`tmp_dir`): made fresh, removed
/// when dropped.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    #[track_caller]
    pub fn new(name: &str) -> Scratch {
        let dir = tmp_dir().join(format!("scratch-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        Scratch(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<OsStr> for Scratch {
    fn as_ref(&self) -> &OsStr {
        self.0.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compares `actual` with the golden file `tests/golden/<rel>`; `UPDATE_GOLDEN=1` rewrites it
/// instead (the change is then reviewed in the diff).
pub fn check_golden(rel: &str, actual: &[u8]) {
    let path = root().join("tests/golden").join(rel);
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_GOLDEN=1)", path.display()));
    if expected != actual {
        let (a, e) = (String::from_utf8_lossy(actual), String::from_utf8_lossy(&expected));
        let line = e.lines().zip(a.lines()).position(|(x, y)| x != y);
        panic!(
            "{} differs from the golden file (first differing line {line:?}):\n{a}",
            path.display()
        );
    }
}

/// A stub server on 127.0.0.1 port 0, configured by `configure`; stopped when dropped. The test
/// joins the shared side of `gate`: the stub serves a run's load.
pub fn stub(kind: StubKind, configure: impl FnOnce(&mut StubConfig)) -> StubServer {
    gate::share();
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

/// Waits (bounded) until `cond` holds; the condition is the synchronisation, not the clock.
pub fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
        // Polling the condition is the only way to learn it; the slice only paces the poll.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits up to `limit` for `child` to exit; past that kills it, reaps it and returns `None`.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("the child can be waited on") {
            return Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        // Polling a child is the std way to bound a wait on it; the slice only paces the poll.
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits for a child within `limit`, killing it past that (and failing the test); returns its
/// output, echoed for failing tests.
pub fn wait_output(mut child: Child, what: &str, limit: Duration) -> Output {
    let finished = wait_bounded(&mut child, limit).is_some();
    let out = child.wait_with_output().expect("its output is read");
    show(&out);
    assert!(finished, "{what} did not finish within {limit:?}");
    out
}

pub fn show(out: &Output) {
    eprintln!("--- stdout\n{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("--- stderr\n{}", String::from_utf8_lossy(&out.stderr));
}

/// What the process printed on stderr.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
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

/// An echo stub over TLS (`https://`, a CA made at its start) and its CA's PEM file, in a folder
/// of its own in the calling file's folder (each stub has its own CA).
#[track_caller]
pub fn tls_stub() -> (StubServer, PathBuf) {
    let server = stub(StubKind::Echo, |c| c.tls = true);
    let dir = report_dir(&format!("tls-ca-{}", server.url().rsplit(':').next().unwrap()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, server.ca_pem().expect("a TLS stub has a CA")).unwrap();
    (server, ca)
}
