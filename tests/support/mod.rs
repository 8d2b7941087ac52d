//! Helpers of the fault matrix: the binary run under watch (its children recorded, an action
//! fired when a condition holds, a hard wall limit), and what a run left in its report dir.
#![allow(dead_code, reason = "a test binary may use a subset of these helpers")]

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// How often the watcher looks at the run; it waits on conditions, this only bounds the lag.
const POLL: Duration = Duration::from_millis(5);

/// The project's 1,000-prompt dataset with its column mapping.
pub fn dataset() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/assets/datasets/dummy_1k.jsonl");
    format!("{},parser.prompt=text_input", path.display())
}

/// A fresh report directory under the target dir, removed first if a past run left one.
pub fn report_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fault-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The binary, running, with the pids of every child it was seen with.
pub struct Watched {
    child: Child,
    /// The coordinator's pid (also its process group's id when it has its own group).
    pub pid: u32,
    /// Every child of the coordinator seen while it ran (its workers).
    pub seen: BTreeSet<u32>,
    started: Instant,
    logs: (PathBuf, PathBuf),
}

/// How a watched run ended.
pub struct Finished {
    /// The exit code, `None` when killed by a signal (or by the watcher).
    pub code: Option<i32>,
    /// From the spawn to the exit.
    pub elapsed: Duration,
    /// The watcher killed it at the wall limit.
    pub hung: bool,
    /// Every child seen while it ran.
    pub seen: BTreeSet<u32>,
    /// What it printed.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

impl Watched {
    /// Starts `llm-loadgen args…`, in a process group of its own when `own_group` (as a shell
    /// starts a job), its output in files beside `dir` (a pipe nobody reads could fill up).
    pub fn spawn(args: &[String], own_group: bool, dir: &Path) -> Watched {
        let logs = (dir.with_extension("stdout"), dir.with_extension("stderr"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_llm-loadgen"));
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(File::create(&logs.0).expect("stdout file"))
            .stderr(File::create(&logs.1).expect("stderr file"));
        if own_group {
            cmd.process_group(0);
        }
        let child = cmd.spawn().expect("the binary starts");
        let pid = child.id();
        Watched { child, pid, seen: BTreeSet::new(), started: Instant::now(), logs }
    }

    /// The coordinator's children now.
    pub fn children(&self) -> Vec<u32> {
        children_of(self.pid)
    }

    /// Waits for the exit, recording children and calling `step` on each look until it says it
    /// is done; kills the run (and its children) past `limit`.
    pub fn watch(mut self, limit: Duration, mut step: impl FnMut(&Watched) -> bool) -> Finished {
        let mut stepping = true;
        let mut hung = false;
        let status = loop {
            let kids = self.children();
            self.seen.extend(kids);
            if let Some(status) = self.child.try_wait().expect("wait on the binary") {
                break status;
            }
            if stepping {
                stepping = !step(&self);
            }
            if self.started.elapsed() > limit {
                hung = true;
                self.seen.iter().for_each(|&p| signal(p as i32, libc::SIGKILL));
                let _ = self.child.kill();
            }
            std::thread::sleep(POLL);
        };
        let elapsed = self.started.elapsed();
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        Finished {
            code: status.code(),
            elapsed,
            hung,
            seen: self.seen,
            stdout: read(&self.logs.0),
            stderr: read(&self.logs.1),
        }
    }
}

/// The children of `pid`'s main thread (the workers are forked before any thread starts).
pub fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The one-letter state of `pid` (`R`, `S`, `T` stopped, `Z` zombie), `None` when gone.
pub fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.split_whitespace().next()?.chars().next()
}

/// True while `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    !matches!(state(pid), Some('Z') | Some('X') | None)
}

/// kill(2); a negative pid signals that process group.
pub fn signal(pid: i32, sig: libc::c_int) {
    // SAFETY: kill(2) takes plain integers; the pids are processes this test started.
    unsafe { libc::kill(pid, sig) };
}

/// Waits (bounded) for every pid to be gone; kills and returns those still alive.
pub fn reap_leftovers(pids: &BTreeSet<u32>, limit: Duration) -> Vec<u32> {
    let deadline = Instant::now() + limit;
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    left.iter().for_each(|&p| signal(p as i32, libc::SIGKILL));
    left
}

/// Every `.json` file under `dir` that does not parse, with why.
pub fn unparsable_json(dir: &Path) -> Vec<String> {
    let mut bad = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return vec![format!("{}", dir.display())] };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            bad.extend(unparsable_json(&path));
        } else if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if let Err(e) = serde_json::from_str::<Value>(&text) {
                bad.push(format!("{}: {e}", path.display()));
            }
        }
    }
    bad
}

/// What events.jsonl says about each sample.
#[derive(Debug, Default)]
pub struct Tally {
    /// Samples with a `sample.issued` line.
    pub issued: usize,
    /// `sample.complete` with data.
    pub succeeded: usize,
    /// `sample.complete` with data null.
    pub failed: usize,
    /// `error.loadgen` `["ErrorData","abandoned", …]`.
    pub abandoned: usize,
    /// Issued samples with no terminal event.
    pub without_terminal: usize,
    /// Samples with more than one terminal event.
    pub several_terminals: usize,
    /// Failed samples with no `error.generic` line before their completion.
    pub failed_without_error: usize,
    /// The message of each `error.generic` line.
    pub error_messages: Vec<String>,
    /// The output text of each success (streamed pieces joined).
    pub outputs: Vec<String>,
    /// Lines that do not parse.
    pub bad_lines: usize,
}

#[derive(Default)]
struct Sample {
    issued: bool,
    errored: bool,
    terminals: usize,
}

/// Reads events.jsonl line by line.
pub fn tally_events(dir: &Path) -> Option<Tally> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).ok()?;
    let mut t = Tally::default();
    let mut samples: HashMap<String, Sample> = HashMap::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            t.bad_lines += 1;
            continue;
        };
        let uuid = v["sample_uuid"].as_str().unwrap_or("").to_string();
        if uuid.is_empty() {
            continue;
        }
        let s = samples.entry(uuid).or_default();
        let data = &v["data"];
        match v["event_type"].as_str().unwrap_or("") {
            "sample.issued" => s.issued = true,
            "error.generic" => {
                s.errored = true;
                t.error_messages.push(data[2].as_str().unwrap_or("").to_string());
            }
            "sample.complete" if data.is_null() => {
                s.terminals += 1;
                t.failed += 1;
                t.failed_without_error += usize::from(!s.errored);
            }
            "sample.complete" => {
                s.terminals += 1;
                t.succeeded += 1;
                t.outputs.push(output_text(&data[1]));
            }
            "error.loadgen" if data[1] == "abandoned" => {
                s.terminals += 1;
                t.abandoned += 1;
            }
            _ => {}
        }
    }
    for s in samples.values().filter(|s| s.issued) {
        t.issued += 1;
        t.without_terminal += usize::from(s.terminals == 0);
        t.several_terminals += usize::from(s.terminals > 1);
    }
    Some(t)
}

/// A `TextModelOutput`'s text: a string, or a list of streamed pieces.
fn output_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(Value::as_str).collect(),
        _ => String::new(),
    }
}
