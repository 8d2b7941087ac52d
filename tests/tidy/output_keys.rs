//! docs/OUTPUT.md names every key the program writes (issue 26): every key of
//! `result_summary.json` and `final_snapshot.json` at every level (in lists of objects too),
//! every key of every line of `events.jsonl`, and every key of `shard.json`, as real runs write
//! them: one streaming (Poisson, a server primary, failures), one not (a client primary, usage
//! missing on half the samples), both against two stub endpoints with a tokenizer, and a
//! `merge` of two shards on `null://`, so keys written only sometimes are there.
//!
//! A key is documented when OUTPUT.md has it in backticks, alone (`` `n_chunks` ``), as the
//! last part of a dotted path (`` `run_config.load_pattern.type` ``), brace-expanded
//! (`` `tracked_finish_reason_{stop,length}` ``) or with the basis as `<other>`
//! (`` `tpot_<other>` `` names `tpot_client` and `tpot_server`); or quoted in a backticked or
//! fenced JSON example (`{"type": "counter", "name", "value"}`). One rule stands for keys
//! that are data rather than names: a percentile's key (`"99.9"` in `percentiles` and
//! `early_stopping_percentiles`) is a number, and OUTPUT.md names the range.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::support::{bin, read_json, report_dir, root, show, stub, Run};
use loadgen_stubs::{StatusFault, StubKind, UsageFault};
use serde_json::Value;

/// The report directories of the two runs and of a merge of two shards, made once for the
/// tests of this file.
struct Runs {
    streaming: PathBuf,
    plain: PathBuf,
    /// Two shards of a run on `null://` (each with its `shard.json`).
    shards: [PathBuf; 2],
    /// `merge` of the two shards: its summary adds `shards`.
    merged: PathBuf,
}

impl Runs {
    /// The directories whose `result_summary.json`, `final_snapshot.json` and `events.jsonl`
    /// are checked.
    fn all(&self) -> [&PathBuf; 3] {
        [&self.streaming, &self.plain, &self.merged]
    }
}

fn runs() -> &'static Runs {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    RUNS.get_or_init(|| {
        let (shards, merged) = merged_shards();
        Runs { streaming: streaming_run(), plain: plain_run(), shards, merged }
    })
}

/// Streaming, Poisson, a server primary (so the client blocks are `_client`), a tokenizer, two
/// endpoints, one of which answers every tenth request with 429.
fn streaming_run() -> PathBuf {
    let failing =
        stub(StubKind::Echo, |c| c.faults.status = Some(StatusFault { status: 429, every: 10 }));
    let good = stub(StubKind::Echo, |_| {});
    let dir = report_dir("streaming");
    let urls = format!("{},{}", failing.url(), good.url());
    let out = Run::online(&urls, &dir)
        .args(["--load-pattern", "poisson", "--target-qps", "2000"])
        .model("m")
        .dataset()
        .samples(200)
        .workers(1)
        .connections(8)
        .tokenizer()
        .streaming(true)
        .args(["--token-count-source", "server"])
        .args(["--slo", "ttft_p99=1s,tpot_p99=1s,latency_p99=2s"])
        .run();
    assert_eq!(out.status.code(), Some(0), "the streaming run");
    dir
}

/// Not streaming, offline, the default client primary with a tokenizer, two endpoints, one of
/// which sends no usage (so the server blocks are partial).
fn plain_run() -> PathBuf {
    let no_usage = stub(StubKind::Echo, |c| c.faults.usage = Some(UsageFault::Missing));
    let good = stub(StubKind::Echo, |_| {});
    let dir = report_dir("plain");
    let urls = format!("{},{}", no_usage.url(), good.url());
    let out = Run::offline(&urls, &dir)
        .model("m")
        .dataset()
        .samples(200)
        .workers(1)
        .connections(8)
        .tokenizer()
        .streaming(false)
        .run();
    assert_eq!(out.status.code(), Some(0), "the plain run");
    dir
}

/// Two shards of a 40-sample run on `null://`, one after the other (so `merge` is told to
/// take a start skew up to 10 minutes), and their merge.
fn merged_shards() -> ([PathBuf; 2], PathBuf) {
    let shards = [0, 1].map(|i| {
        let dir = report_dir(&format!("shard-{i}"));
        let run = Run::offline("null://", &dir).model("m").samples(40).workers(1);
        let out = run.args(["--shard", &format!("{i}/2"), "--quiet"]).run();
        assert_eq!(out.status.code(), Some(0), "shard {i}");
        dir
    });
    let merged = report_dir("merged");
    let out = bin()
        .arg("merge")
        .args(&shards)
        .arg("--out")
        .arg(&merged)
        .args(["--max-skew-ms", "600000"])
        .output()
        .expect("the binary runs");
    show(&out);
    assert_eq!(out.status.code(), Some(0), "the merge");
    (shards, merged)
}

/// The names OUTPUT.md documents (the module's comment says how).
fn documented() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("docs/OUTPUT.md")).expect("docs/OUTPUT.md");
    let mut words = BTreeSet::new();
    for (i, part) in text.split("```").enumerate() {
        if i % 2 == 1 {
            words.extend(quoted(part));
            continue;
        }
        for span in part.split('`').skip(1).step_by(2) {
            words.extend(quoted(span));
            // A span wrapped onto the next line is one word again.
            let joined: String = span.split('\n').map(str::trim_start).collect();
            for token in joined.split_whitespace() {
                words.extend(token_names(token));
            }
        }
    }
    words
}

/// The `"strings"` of `text`.
fn quoted(text: &str) -> Vec<String> {
    text.split('"').skip(1).step_by(2).map(str::to_string).collect()
}

/// The names one backticked token documents: brace alternatives expanded, each `/`-joined
/// part whole (`sample.complete`) and its last dotted component, `<other>` as both bases.
fn token_names(token: &str) -> Vec<String> {
    let mut names = Vec::new();
    for word in expand_braces(token) {
        for part in word.split('/') {
            let last = part.rsplit('.').next().unwrap_or(part);
            for name in [part, last] {
                let name = name.trim_matches(|c: char| !(c.is_alphanumeric() || "_<>".contains(c)));
                let name = name.trim_end_matches("[]");
                let each = if name.contains("<other>") {
                    ["client", "server"].map(|b| name.replace("<other>", b)).to_vec()
                } else {
                    vec![name.to_string()]
                };
                for n in each.into_iter().filter(|n| !n.is_empty()) {
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
            }
        }
    }
    names
}

/// `a_{x,y}_b` → `a_x_b`, `a_y_b`; a token without braces → itself.
fn expand_braces(token: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (token.find('{'), token.find('}')) else {
        return vec![token.to_string()];
    };
    if close < open {
        return vec![token.to_string()];
    }
    let (head, tail) = (&token[..open], &token[close + 1..]);
    token[open + 1..close].split(',').map(|alt| format!("{head}{alt}{tail}")).collect()
}

/// Whether `key` under `parent` is data, not a name: a percentile.
fn is_data_key(parent: &str, key: &str) -> bool {
    matches!(parent, "percentiles" | "early_stopping_percentiles") && key.parse::<f64>().is_ok()
}

/// Every key of `value` at every level, by its path (`latency.histogram.buckets`,
/// `endpoints[].url`; a percentile's key as `<percentile>`): path → key. Data keys are walked,
/// not listed.
fn keys(value: &Value, at: &str, parent: &str, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let data = is_data_key(parent, key);
                let step = if data { "<percentile>" } else { key.as_str() };
                let path = if at.is_empty() { step.to_string() } else { format!("{at}.{step}") };
                if !data {
                    out.insert(path.clone(), key.clone());
                }
                keys(inner, &path, key, out);
            }
        }
        Value::Array(items) => {
            items.iter().for_each(|item| keys(item, &format!("{at}[]"), parent, out));
        }
        _ => {}
    }
}

/// The keys of `found` (path → key) that OUTPUT.md does not name, each once, as
/// `key (at its first path)` lines.
fn undocumented(found: &BTreeMap<String, String>) -> Vec<String> {
    let words = documented();
    let mut missing: BTreeMap<&String, &String> = BTreeMap::new();
    for (path, key) in found.iter().filter(|(_, key)| !words.contains(*key)) {
        missing.entry(key).or_insert(path);
    }
    missing.into_iter().map(|(key, path)| format!("`{key}` (at {path})")).collect()
}

/// The key paths of a JSON file of every run checked.
fn keys_of_both(rel: &str) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    for dir in runs().all() {
        keys(&read_json(&dir.join(rel)), "", "", &mut found);
    }
    found
}

fn assert_documented(found: &BTreeMap<String, String>, file: &str, paths_at_least: usize) {
    let names: BTreeSet<&String> = found.values().collect();
    eprintln!("{file}: {} key paths checked, {} distinct keys", found.len(), names.len());
    assert!(found.len() >= paths_at_least, "{file}: only {} key paths: {found:?}", found.len());
    let missing = undocumented(found);
    assert!(
        missing.is_empty(),
        "{file} writes keys docs/OUTPUT.md does not name (add each with a line on what it is):\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_key_of_result_summary_json_at_every_level_is_in_output_md() {
    let found = keys_of_both("performance/result_summary.json");
    assert_documented(&found, "result_summary.json", 100);
}

#[test]
fn every_key_of_final_snapshot_json_at_every_level_is_in_output_md() {
    let found = keys_of_both("metrics/final_snapshot.json");
    assert_documented(&found, "final_snapshot.json", 15);
}

/// The event types a run of each kind writes, and the keys of their lines.
fn event_keys(dir: &Path, types: &mut BTreeSet<String>, found: &mut BTreeMap<String, String>) {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl");
    for line in text.lines() {
        let value: Value = serde_json::from_str(line).expect("each line is JSON");
        let kind = value["event_type"].as_str().expect("an event_type").to_string();
        keys(&value, &kind, "", found);
        types.insert(kind);
    }
}

#[test]
fn every_key_of_every_events_jsonl_line_is_in_output_md() {
    let (mut types, mut found) = (BTreeSet::new(), BTreeMap::new());
    for dir in runs().all() {
        event_keys(dir, &mut types, &mut found);
    }
    let expected = [
        "error.generic",
        "sample.complete",
        "sample.issued",
        "sample.recv_first",
        "session.ended",
        "session.start_performance_tracking",
        "session.started",
        "session.stop_performance_tracking",
    ];
    let missing: Vec<&&str> = expected.iter().filter(|t| !types.contains(**t)).collect();
    assert!(missing.is_empty(), "the runs wrote no line of {missing:?}: {types:?}");
    let words = documented();
    let unnamed: Vec<&String> = types.iter().filter(|t| !words.contains(*t)).collect();
    assert!(unnamed.is_empty(), "event types not named in docs/OUTPUT.md: {unnamed:?}");
    assert_documented(&found, "events.jsonl", 10);
}

#[test]
fn every_key_of_shard_json_is_in_output_md() {
    let mut found = BTreeMap::new();
    for dir in &runs().shards {
        keys(&read_json(&dir.join("shard.json")), "", "", &mut found);
    }
    assert_documented(&found, "shard.json", 20);
}

#[test]
fn a_backticked_token_documents_its_names() {
    let names = |t: &str| token_names(t);
    assert_eq!(names("run_config.load_pattern.type"), ["run_config.load_pattern.type", "type"]);
    assert_eq!(names("endpoints[].n_samples"), ["endpoints[].n_samples", "n_samples"]);
    assert_eq!(names("sample.complete"), ["sample.complete", "complete"]);
    assert_eq!(names("tpot_<other>"), ["tpot_client", "tpot_server"]);
    assert_eq!(
        names("tracked_finish_reason_{stop,length}"),
        ["tracked_finish_reason_stop", "tracked_finish_reason_length"]
    );
    assert_eq!(names("n_samples,"), ["n_samples"]);
    assert!(is_data_key("percentiles", "99.9") && !is_data_key("latency", "99.9"));
    assert!(!is_data_key("percentiles", "p99"));
}
