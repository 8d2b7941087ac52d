//! An agentic run's edges (issue 27 item 6): the max-duration cap, Ctrl-C and endpoint faults
//! in the middle of conversations. Whatever ends a turn, every turn is accounted: the log has
//! one `sample.issued` line a turn, and per turn number the summary's `n_issued` is its turns
//! completed + dropped + abandoned, equal to the log's count; summed, the summary's counts.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use loadgen_stubs::{PrefixCacheConfig, StatusFault, StubKind};

use super::agentic_window::Window;
use crate::support::{
    assets, bin, check_terminal_events, report_dir, run, signal, stub, summary, tmp_dir, wait_for,
    wait_output,
};

/// A config of `trajectories` conversations of the fixture, 3 at once, against `url`, with
/// `runtime` lines under `settings.runtime`.
fn config(name: &str, url: &str, dir: &Path, trajectories: u64, runtime: &str) -> String {
    let path = tmp_dir().join(format!("{name}.yaml"));
    let dataset = assets().join("datasets/agentic_small.jsonl");
    let text = format!(
        "type: online\nmodel_params:\n  name: test-model\n  streaming: \"on\"\n  \
         max_new_tokens: 8\ndatasets:\n  - name: agentic\n    path: {}\n    \
         agentic_inference:\n      num_trajectories_to_issue: {trajectories}\nsettings:\n  \
         warmup:\n    enabled: false\n  runtime:\n    min_duration_ms: 0\n{runtime}  \
         load_pattern:\n    type: agentic_inference\n    target_concurrency: 3\n\
         endpoint_config:\n  endpoints: [\"{url}\"]\nreport_dir: {}\n",
        dataset.display(),
        dir.display()
    );
    std::fs::write(&path, text).expect("the config is written");
    path.display().to_string()
}

/// Every turn accounted, per turn number and in all; returns (dropped, abandoned).
fn check_turns_accounted(dir: &Path) -> (u64, u64) {
    let s = summary(dir);
    let get = |key: &str| s[key].as_u64().unwrap_or_else(|| panic!("{key} in the summary"));
    let (issued, abandoned) = (get("n_samples_issued"), get("n_samples_abandoned"));
    assert_eq!(issued, get("n_samples_completed") + abandoned, "issued = completed + abandoned");
    // One issued line and one terminal line a turn, tracked or not; tracked: those issued
    // inside the window.
    let window = Window::read(dir);
    assert_eq!(check_terminal_events(dir), window.turns.len() as u64);
    assert_eq!(window.tracked().count() as u64, issued, "tracked turns are the window's");
    let a = &s["agentic"];
    let mut from_turns = BTreeMap::new();
    for t in a["by_turn"].as_array().expect("by_turn") {
        let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{k}: {t}"));
        assert_eq!(n("n_issued"), n("n_samples") + n("n_dropped") + n("n_abandoned"), "{t}");
        from_turns.insert(n("turn"), n("n_issued"));
    }
    assert_eq!(from_turns, window.tracked_by_turn(), "the summary's turns are the log's");
    assert_eq!(from_turns.values().sum::<u64>(), issued);
    assert_eq!(a["turns"]["issued"].as_u64(), Some(issued));
    assert_eq!(a["turns"]["abandoned"].as_u64(), Some(abandoned));
    // The rebuild from the log alone says the same.
    let again = tmp_dir().join(format!("{}-again", dir.file_name().unwrap().to_string_lossy()));
    let out = run(["report", &dir.display().to_string(), "--out", &again.display().to_string()]);
    assert_eq!(out.status.code(), Some(0));
    let rebuilt = summary(&again);
    assert_eq!(rebuilt["agentic"], s["agentic"], "report DIR rebuilds the agentic block");
    (a["turns"]["dropped"].as_u64().unwrap(), abandoned)
}

/// A stub whose every turn pays 2 ms a prompt token it has not cached: conversations last.
fn slow_stub() -> loadgen_stubs::StubServer {
    stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.001;
        c.variable.output_len_mean = 8.0;
        let cache = PrefixCacheConfig { uncached_token_us: 2_000.0, ..Default::default() };
        c.variable.prefix_cache = Some(cache);
    })
}

#[test]
fn the_max_duration_cap_mid_conversation_abandons_the_turns_in_flight() {
    let server = slow_stub();
    let dir = report_dir("agentic-cap");
    let cfg = config("cap", &server.url(), &dir, 300, "    max_duration_ms: 300\n");
    let out = run(["benchmark", "from-config", "--config", &cfg]);
    server.stop();
    assert_eq!(out.status.code(), Some(0), "a capped run that measured something");
    let (_, abandoned) = check_turns_accounted(&dir);
    assert!(abandoned > 0, "the cap caught conversations mid-turn");
}

#[test]
fn ctrl_c_mid_conversation_accounts_every_turn() {
    let server = slow_stub();
    let dir = report_dir("agentic-ctrl-c");
    let cfg = config("ctrl-c", &server.url(), &dir, 1_000, "");
    let child = bin()
        .args(["benchmark", "from-config", "--config", &cfg])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_for("turns to reach the stub", Duration::from_secs(60), || server.requests_total() > 10);
    assert!(signal(child.id() as i32, libc::SIGINT), "kill(2)");
    let out = wait_output(child, "the interrupted run", Duration::from_secs(60));
    server.stop();
    assert_eq!(out.status.code(), Some(130));
    assert_eq!(summary(&dir)["state"], "interrupted");
    check_turns_accounted(&dir);
}

#[test]
fn endpoint_failures_mid_conversation_drop_the_later_turns() {
    // Every fifth answer is HTTP 500: a failed turn drops the rest of its conversation.
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.0005;
        c.variable.output_len_mean = 8.0;
        c.faults.status = Some(StatusFault { status: 500, every: 5 });
    });
    let dir = report_dir("agentic-faults");
    let cfg = config("faults", &server.url(), &dir, 60, "");
    let out = run(["benchmark", "from-config", "--config", &cfg]);
    server.stop();
    assert_eq!(out.status.code(), Some(0), "some turns succeeded");
    let (dropped, abandoned) = check_turns_accounted(&dir);
    assert!(dropped > 0, "later turns of failed conversations were dropped");
    assert_eq!(abandoned, 0);
    let s = summary(&dir);
    let kinds = &s["agentic"]["turns"]["failed_by_kind"];
    assert!(kinds["http_status"].as_u64() > Some(0), "{kinds}");
    assert_eq!(kinds["turn_aborted"].as_u64(), Some(dropped));
}
