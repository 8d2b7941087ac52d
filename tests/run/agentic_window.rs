//! An agentic run's performance tracking window, as the reference's
//! `AgenticInferenceStrategy` closes it: tracking stops at the first conversation finish that
//! finds no conversation left to start (`session.stop_performance_tracking`), and a turn issued
//! after that line is untracked: issued, completed and counted in the totals, never in the
//! tracked figures. The tests recompute the window's figures from events.jsonl.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use loadgen_stubs::{PrefixCacheConfig, StubKind};
use serde_json::Value;

use crate::support::{assets, report_dir, run, stub, summary, tmp_dir};

/// One sample as events.jsonl tells it.
#[derive(Debug, Default, Clone)]
pub(crate) struct LoggedTurn {
    pub conversation: String,
    pub turn: u64,
    pub issued_ns: u64,
    /// Its completion, or the line that abandoned it.
    pub end_ns: u64,
    pub abandoned: bool,
    pub error: Option<String>,
}

/// The log's samples and its stop line.
#[derive(Debug)]
pub(crate) struct Window {
    pub stop_ns: Option<u64>,
    pub turns: Vec<LoggedTurn>,
}

impl Window {
    /// events.jsonl of the run in `dir`.
    pub fn read(dir: &Path) -> Window {
        let text = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl");
        let mut stops = Vec::new();
        let mut by_uuid: BTreeMap<String, LoggedTurn> = BTreeMap::new();
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).expect("an event line parses");
            let ts = v["timestamp_ns"].as_u64().unwrap_or_default();
            let kind = v["event_type"].as_str().unwrap_or_default();
            if kind == "session.stop_performance_tracking" {
                stops.push(ts);
            }
            let Some(uuid) = v["sample_uuid"].as_str().filter(|u| !u.is_empty()) else { continue };
            let t = by_uuid.entry(uuid.to_string()).or_default();
            t.conversation = v["conversation_id"].as_str().unwrap_or_default().to_string();
            t.turn = v["turn"].as_u64().unwrap_or_default();
            match kind {
                "sample.issued" => t.issued_ns = ts,
                "sample.complete" => t.end_ns = ts,
                "error.generic" => t.error = v["data"][1].as_str().map(str::to_string),
                "error.loadgen" => {
                    t.end_ns = ts;
                    t.abandoned = true;
                }
                _ => {}
            }
        }
        assert!(stops.len() <= 1, "one stop line at most: {stops:?}");
        Window { stop_ns: stops.first().copied(), turns: by_uuid.into_values().collect() }
    }

    /// The reference's rule: a sample is tracked when its issued line precedes the stop line.
    pub fn tracked(&self) -> impl Iterator<Item = &LoggedTurn> {
        self.turns.iter().filter(|t| self.stop_ns.is_none_or(|stop| t.issued_ns <= stop))
    }

    /// Each conversation's finish (its last turn's end), earliest first.
    pub fn finishes(&self) -> Vec<u64> {
        let mut by_conversation: BTreeMap<&str, u64> = BTreeMap::new();
        for t in &self.turns {
            let end = by_conversation.entry(&t.conversation).or_default();
            *end = (*end).max(t.end_ns);
        }
        let mut ends: Vec<u64> = by_conversation.into_values().collect();
        ends.sort_unstable();
        ends
    }

    /// Checks the stop line against the rule for `conversations` run `concurrency` at a time:
    /// the first `conversations - concurrency` finishes each start the next conversation, and
    /// the finish after them (read a moment after it ended) closes the window.
    pub fn check_closed(&self, conversations: usize, concurrency: usize) -> u64 {
        let stop = self.stop_ns.expect("the run logs where tracking stopped");
        let finishes = self.finishes();
        assert_eq!(finishes.len(), conversations, "every conversation finished");
        let closing = conversations.saturating_sub(concurrency);
        assert!(finishes[closing] <= stop, "stop {stop} precedes finish {closing}: {finishes:?}");
        stop
    }

    /// Tracked turns per turn number.
    pub fn tracked_by_turn(&self) -> BTreeMap<u64, u64> {
        let mut out = BTreeMap::new();
        for t in self.tracked() {
            *out.entry(t.turn).or_default() += 1;
        }
        out
    }
}

/// `total_samples_issued` of the run's metrics/final_snapshot.json.
pub(crate) fn total_issued(dir: &Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("metrics/final_snapshot.json")).expect("snapshot");
    let v: Value = serde_json::from_str(&text).expect("the snapshot parses");
    let metrics = v["metrics"].as_array().expect("metrics");
    let entry = metrics.iter().find(|m| m["name"] == "total_samples_issued").expect("the count");
    entry["value"].as_u64().expect("a count")
}

/// The summary's per-turn blocks: (turn, n_issued, n_samples, n_dropped, n_abandoned).
fn by_turn(s: &Value) -> Vec<[u64; 5]> {
    let list = s["agentic"]["by_turn"].as_array().expect("by_turn");
    let key = |t: &Value, k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{k}: {t}"));
    list.iter()
        .map(|t| ["turn", "n_issued", "n_samples", "n_dropped", "n_abandoned"].map(|k| key(t, k)))
        .collect()
}

/// Checks the run in `dir` against its log: tracked counts as the window gives them, each turn
/// number's accounting, and `report DIR` writing the same figures.
pub(crate) fn check_window_figures(dir: &Path, window: &Window, total: u64) {
    let s = summary(dir);
    let tracked = window.tracked().count() as u64;
    assert_eq!(s["n_samples_issued"].as_u64(), Some(tracked), "tracked turns");
    assert_eq!(total_issued(dir), total, "every turn is issued and counted in the totals");
    let recomputed: Vec<(u64, u64)> = window.tracked_by_turn().into_iter().collect();
    let reported: Vec<(u64, u64)> = by_turn(&s).iter().map(|t| (t[0], t[1])).collect();
    assert_eq!(reported, recomputed, "tracked turns by turn number");
    for [turn, issued, samples, dropped, abandoned] in by_turn(&s) {
        assert_eq!(issued, samples + dropped + abandoned, "turn {turn}: issued = ended");
    }
    let started: BTreeSet<&str> = window.tracked().map(|t| t.conversation.as_str()).collect();
    let conversations = &s["agentic"]["conversations"];
    assert_eq!(conversations["started"].as_u64(), Some(started.len() as u64));
    let rebuilt = tmp_dir()
        .join(format!("{}-rebuilt", dir.file_name().and_then(|n| n.to_str()).unwrap_or("window")));
    let _ = std::fs::remove_dir_all(&rebuilt);
    let out = run(["report", &dir.display().to_string(), "--out", &rebuilt.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let again = summary(&rebuilt);
    for key in ["n_samples_issued", "n_samples_completed", "n_samples_failed", "agentic"] {
        assert_eq!(again[key], s[key], "{key}");
    }
    for key in ["ttft", "latency", "duration_ns", "qps", "n_samples_abandoned"] {
        assert_eq!(again[key], s[key], "{key}");
    }
}

/// A YAML plan of 12 trajectories of the fixture's conversations (24 turns) against `url`,
/// reporting into `dir`, on `workers` workers with `concurrency` conversations at a time and,
/// when `tool_delay`, the dataset's tool delays waited out. Written as `<name>.yaml`.
pub(crate) fn agentic_plan(
    name: &str,
    url: &str,
    dir: &Path,
    (workers, concurrency, tool_delay): (u32, u32, bool),
) -> PathBuf {
    let dataset = assets().join("datasets/agentic_small.jsonl");
    let path = tmp_dir().join(format!("{name}.yaml"));
    let text = format!(
        "type: online\nmodel_params:\n  name: test-model\n  streaming: \"on\"\n  \
         max_new_tokens: 8\ndatasets:\n  - name: agentic\n    path: {}\n    \
         agentic_inference:\n      inject_tool_delay: {tool_delay}\n      \
         num_trajectories_to_issue: 12\nsettings:\n  warmup:\n    \
         enabled: false\n  client:\n    num_workers: {workers}\n  load_pattern:\n    \
         type: agentic_inference\n    target_concurrency: {concurrency}\nendpoint_config:\n  \
         endpoints: [\"{url}\"]\nreport_dir: {}\n",
        dataset.display(),
        dir.display()
    );
    std::fs::write(&path, text).expect("the config is written");
    path
}

#[test]
fn tracking_stops_at_the_first_finish_that_finds_no_conversation_left_to_start() {
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.001;
        c.variable.output_len_mean = 8.0;
        c.variable.prefix_cache = Some(PrefixCacheConfig::default());
    });
    // 12 trajectories of the fixture's c1, c2, c3 (3, 2, 1 client turns), 3 at a time, over
    // two workers: 24 turns. c1's turn 3 waits 20 ms for its tool, so the last c1 is still
    // waiting when the other two last conversations finish and close the window: its turns
    // 3 and 5 are untracked.
    let dir = report_dir("window");
    let config = agentic_plan("window", &server.url(), &dir, (2, 3, true));
    let out = run(["benchmark", "from-config", "--config", &config.display().to_string()]);
    server.stop();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let window = Window::read(&dir);
    assert_eq!(window.turns.len(), 24);
    window.check_closed(12, 3);
    assert!(window.tracked().count() < 24, "the run's tail is untracked");
    check_window_figures(&dir, &window, 24);
}
