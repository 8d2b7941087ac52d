//! Agentic runs end to end (`datasets[].agentic_inference`, load pattern `agentic_inference`)
//! against the variable stub in its prefix-cache mode: each conversation's turns go in order,
//! each after the one before it completed, at most `target_concurrency` conversations at once,
//! under their routing header; the stub's own record of what it had cached shows the reuse; a
//! turn that fails aborts the rest of its conversation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

use loadgen_stubs::{PrefixCacheConfig, StubKind};
use serde_json::Value;

use super::agentic_window::{check_window_figures, total_issued, Window};
use crate::support::{assets, report_dir, run, stub, summary, tmp_dir};

/// The project's agentic fixture: c1 (client turns 1, 3, 5; turn 3 waits 20 ms after turn 1,
/// a tool result), c2 (turns 1, 3) and c3 (turn 1).
fn dataset() -> String {
    assets().join("datasets/agentic_small.jsonl").display().to_string()
}

/// Client turns of each of the fixture's conversations.
const TURNS: [(&str, &[u64]); 3] = [("c1", &[1, 3, 5]), ("c2", &[1, 3]), ("c3", &[1])];

/// A config running `trajectories` conversations of the fixture, `concurrency` at once,
/// against `url`, with `extra` lines in the `agentic_inference` block.
fn config(name: &str, url: &str, dir: &Path, trajectories: u64, extra: &str) -> String {
    let path = tmp_dir().join(format!("{name}.yaml"));
    let text = format!(
        "type: online\nmodel_params:\n  name: test-model\n  streaming: \"on\"\n  \
         max_new_tokens: 8\ndatasets:\n  - name: agentic\n    path: {}\n    \
         agentic_inference:\n      inject_tool_delay: true\n      \
         num_trajectories_to_issue: {trajectories}\n{extra}settings:\n  warmup:\n    \
         enabled: false\n  load_pattern:\n    type: agentic_inference\n    \
         target_concurrency: 2\nendpoint_config:\n  endpoints: [\"{url}\"]\n\
         report_dir: {}\n",
        dataset(),
        dir.display()
    );
    std::fs::write(&path, text).expect("the config is written");
    path.display().to_string()
}

/// One sample as events.jsonl tells it.
#[derive(Debug, Default, Clone)]
struct Turn {
    conversation: String,
    turn: u64,
    issued_ns: u64,
    complete_ns: u64,
    error: Option<String>,
}

/// Every sample of the log by uuid, with its conversation, turn, stamps and error kind.
fn turns(dir: &Path) -> Vec<Turn> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl");
    let mut by_uuid: BTreeMap<String, Turn> = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("an event line parses");
        let uuid = v["sample_uuid"].as_str().unwrap_or_default().to_string();
        if uuid.is_empty() {
            continue;
        }
        let t = by_uuid.entry(uuid).or_default();
        t.conversation = v["conversation_id"].as_str().unwrap_or_default().to_string();
        t.turn = v["turn"].as_u64().expect("an agentic sample's line names its turn");
        let ts = v["timestamp_ns"].as_u64().unwrap_or_default();
        match v["event_type"].as_str().unwrap_or_default() {
            "sample.issued" => t.issued_ns = ts,
            "sample.complete" => t.complete_ns = ts,
            "error.generic" => t.error = v["data"][1].as_str().map(str::to_string),
            _ => {}
        }
    }
    by_uuid.into_values().collect()
}

/// The turns of each conversation instance, in turn order.
fn by_conversation(turns: &[Turn]) -> BTreeMap<String, Vec<Turn>> {
    let mut out: BTreeMap<String, Vec<Turn>> = BTreeMap::new();
    for t in turns {
        out.entry(t.conversation.clone()).or_default().push(t.clone());
    }
    for list in out.values_mut() {
        list.sort_by_key(|t| t.turn);
    }
    out
}

/// The most conversations whose first issue to last completion overlap at one instant.
fn most_at_once(conversations: &BTreeMap<String, Vec<Turn>>) -> usize {
    let mut edges: Vec<(u64, i32)> = Vec::new();
    for list in conversations.values() {
        let start = list.iter().map(|t| t.issued_ns).min().unwrap_or_default();
        let end = list.iter().map(|t| t.complete_ns).max().unwrap_or_default();
        edges.push((start, 1));
        edges.push((end, -1));
    }
    // An end and a start at one instant: the end first (a freed place is taken after it).
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

#[test]
fn conversations_run_turn_after_turn_two_at_a_time_and_the_stub_sees_their_prefixes_reused() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.001;
        c.variable.first_chunk_spread = 0.0;
        c.variable.output_len_mean = 8.0;
        c.variable.output_len_spread = 0.0;
        c.variable.prefix_cache = Some(PrefixCacheConfig::default());
        c.send_log = Some(log.clone());
    });
    let dir = report_dir("five");
    let out =
        run(["benchmark", "from-config", "--config", &config("five", &server.url(), &dir, 5, "")]);
    assert_eq!(out.status.code(), Some(0));
    server.stop();
    // c1, c2, c3, then c1 and c2 again under their repeat ids: 3 + 2 + 1 + 3 + 2 turns, all
    // issued; tracked until the fourth conversation finished (none left to start).
    let s = summary(&dir);
    let window = Window::read(&dir);
    window.check_closed(5, 2);
    let tracked = window.tracked().count() as u64;
    assert_eq!(
        (s["n_samples_issued"].as_u64(), s["n_samples_failed"].as_u64()),
        (Some(tracked), Some(0))
    );
    check_window_figures(&dir, &window, 11);
    let all = turns(&dir);
    let conversations = by_conversation(&all);
    let names: Vec<&str> = conversations.keys().map(String::as_str).collect();
    assert_eq!(names, ["c1", "c1__repeat_2", "c2", "c2__repeat_2", "c3"]);
    for (id, list) in &conversations {
        let source = id.split("__").next().unwrap_or_default();
        let want = TURNS.iter().find(|(c, _)| *c == source).map(|(_, t)| t.to_vec());
        assert_eq!(Some(list.iter().map(|t| t.turn).collect::<Vec<_>>()), want, "{id}");
        for pair in list.windows(2) {
            // Each turn is issued after the one before it completed.
            assert!(pair[1].issued_ns >= pair[0].complete_ns, "{id}: {pair:?}");
        }
    }
    // c1's turn 3 (a tool result) carries a 20 ms delay_seconds.
    for id in ["c1", "c1__repeat_2"] {
        let list = &conversations[id];
        assert!(list[1].issued_ns >= list[0].complete_ns + 20_000_000, "{id}: {list:?}");
    }
    assert_eq!(most_at_once(&conversations), 2, "target_concurrency 2");
    check_agentic_block(&s, &window);
    // The stub, by its own record: each conversation's first turn found nothing cached under
    // its X-Session-ID (a repeat's too, though its messages equal the first pass's), and every
    // later turn found its earlier messages cached.
    check_cache_reuse(&std::mem::take(&mut *log.lock().unwrap()));
}

#[test]
fn a_turn_past_its_timeout_fails_and_the_rest_of_its_conversation_is_aborted() {
    // Every first turn costs the stub 5 s of prompt (the fixture's first turns hold more than
    // 50 tokens at 100 ms each), past the 0.3 s turn timeout.
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.001;
        c.variable.first_chunk_spread = 0.0;
        let cache = PrefixCacheConfig { uncached_token_us: 100_000.0, ..Default::default() };
        c.variable.prefix_cache = Some(cache);
    });
    let dir = report_dir("timeout");
    let cfg = config("timeout", &server.url(), &dir, 3, "      turn_timeout_s: 0.3\n");
    let out = run(["benchmark", "from-config", "--config", &cfg]);
    server.stop();
    // Every sample failed, so nothing was measured (exit 4), and the report says why.
    assert_eq!(out.status.code(), Some(4));
    let conversations = by_conversation(&turns(&dir));
    for (id, list) in &conversations {
        assert_eq!(list[0].error.as_deref(), Some("TurnTimeout"), "{id}: {list:?}");
        for t in &list[1..] {
            assert_eq!(t.error.as_deref(), Some("TurnAbortedByPriorFailure"), "{id}: {t:?}");
        }
    }
    // All 6 turns fail: 3 time out, c1's 2 later turns and c2's 1 are aborted. The tracked
    // ones are those issued before the second conversation's finish closed the window.
    let window = Window::read(&dir);
    window.check_closed(3, 2);
    let count =
        |error: &str| window.tracked().filter(|t| t.error.as_deref() == Some(error)).count() as u64;
    let (timeouts, aborted) = (count("TurnTimeout"), count("TurnAbortedByPriorFailure"));
    assert!(timeouts >= 2 && aborted == 3, "{timeouts} timeouts, {aborted} aborted tracked");
    assert_eq!(total_issued(&dir), 6);
    let s = summary(&dir);
    let kinds = &s["failure_kinds"];
    assert_eq!(kinds["timeout"]["count"].as_u64(), Some(timeouts));
    assert_eq!(kinds["turn_aborted"]["count"].as_u64(), Some(aborted));
    assert_eq!(s["n_samples_failed"].as_u64(), Some(timeouts + aborted));
    let agentic = &s["agentic"];
    assert_eq!(agentic["dropped_turns"].as_u64(), Some(aborted));
    assert_eq!(agentic["conversations"]["failed"].as_u64(), Some(timeouts));
    assert_eq!(agentic["turns"]["failed_by_kind"]["turn_aborted"].as_u64(), Some(aborted));
}

/// The summary's agentic block over the tracked turns (`check_window_figures` compares it with
/// the log's and with `report DIR`'s).
fn check_agentic_block(s: &Value, window: &Window) {
    let agentic = &s["agentic"];
    let tracked = window.tracked().count() as u64;
    let started: BTreeSet<&str> = window.tracked().map(|t| t.conversation.as_str()).collect();
    assert_eq!(agentic["dropped_turns"].as_u64(), Some(0));
    assert_eq!(agentic["conversations"]["started"].as_u64(), Some(started.len() as u64));
    assert_eq!(agentic["conversations"]["completed"].as_u64(), Some(started.len() as u64));
    assert_eq!(agentic["turns"]["succeeded"].as_u64(), Some(tracked));
    // Every conversation started inside the window but perhaps the last one handed out.
    let firsts = window.tracked_by_turn().get(&1).copied().unwrap_or_default();
    assert!(firsts >= 4, "5 first turns, all but perhaps the last inside the window: {firsts}");
}

/// The stub's own record of what it had cached for each of the run's requests.
fn check_cache_reuse(sent: &[loadgen_stubs::SentResponse]) {
    assert_eq!(sent.len(), 11, "one request per turn");
    let mut first_turns = 0;
    for response in sent {
        let cache = response.prefix_cache.expect("a chat request gets a cache decision");
        let body: Value = serde_json::from_slice(&response.body).expect("the body is JSON");
        let messages = body["messages"].as_array().expect("messages").len();
        if messages <= 2 {
            first_turns += 1;
            assert_eq!(cache.cached_tokens, 0, "a first turn: {body}");
        } else {
            assert!(cache.cached_tokens > 0 && cache.cached_tokens < cache.prompt_tokens, "{body}");
        }
    }
    assert_eq!(first_turns, 5);
}
