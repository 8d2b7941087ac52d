//! An agentic run's figures by turn number, checked from outside (issue 27): against the
//! prefix-cache stub, each request's planned TTFT is what the stub's configuration charges for
//! the prompt tokens it had not cached (a first turn the whole prompt, a later one only its
//! new messages), and the client's TTFT by turn is the stub's by its own stamps, within 5%;
//! and each turn's TTFT, latency and TPOT (client and server bases),
//! recomputed here from events.jsonl alone, equal the summary's `agentic.by_turn` exactly.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use loadgen_stubs::{PrefixCacheConfig, SentResponse, StubKind};
use serde_json::Value;

use crate::support::{alone, assets, report_dir, run, stub, summary, tmp_dir};

/// Microseconds the stub charges per uncached prompt token, and its fixed first-chunk delay:
/// large enough that a busy machine's wake-up delays stay well inside 5%.
const UNCACHED_US: f64 = 10_000.0;
const FIRST_CHUNK_S: f64 = 0.002;

fn config(url: &str, dir: &Path) -> String {
    let path = tmp_dir().join("turns.yaml");
    let text = format!(
        "type: online\nmodel_params:\n  name: test-model\n  streaming: \"on\"\n  \
         max_new_tokens: 8\n  tokenizer_name: {}\ndatasets:\n  - name: agentic\n    path: {}\n    \
         agentic_inference:\n      num_trajectories_to_issue: 6\nsettings:\n  warmup:\n    \
         enabled: false\n  runtime:\n    min_duration_ms: 0\n  load_pattern:\n    \
         type: agentic_inference\n    target_concurrency: 2\nendpoint_config:\n  \
         endpoints: [\"{url}\"]\nreport_dir: {}\n",
        assets().join("tokenizers/char").display(),
        assets().join("datasets/agentic_small.jsonl").display(),
        dir.display()
    );
    std::fs::write(&path, text).expect("the config is written");
    path.display().to_string()
}

/// Per turn (by the request's message count: system + user is turn 1, each turn after adds
/// the answer and its own message), the stub's own stamps: its first write − the request
/// whole, ns. Each request's planned TTFT is checked to be the configuration's charge for the
/// prompt tokens not cached: the fixed first-chunk delay + 10 ms a token.
fn stub_ttft_by_turn(sent: &[SentResponse]) -> BTreeMap<u64, Vec<f64>> {
    let mut out: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    let mut first_turns_cached = 0;
    for response in sent {
        let cache = response.prefix_cache.expect("a cache decision");
        let body: Value = serde_json::from_slice(&response.body).expect("a JSON body");
        let turn = body["messages"].as_array().expect("messages").len() as u64 - 1;
        let uncached = (cache.prompt_tokens - cache.cached_tokens) as f64;
        let charged = FIRST_CHUNK_S * 1e9 + uncached * UNCACHED_US * 1e3;
        assert_eq!(cache.ttft_ns as f64, charged, "turn {turn}: {cache:?}");
        first_turns_cached += u64::from(turn == 1 && cache.cached_tokens > 0);
        if turn > 1 {
            assert!(cache.cached_tokens > 0, "a later turn finds its history cached: {cache:?}");
        }
        let stamped = response.written_ns[0] - response.received_ns;
        out.entry(turn).or_default().push(stamped as f64);
    }
    assert_eq!(first_turns_cached, 0, "a first turn pays for its whole prompt");
    out
}

#[test]
fn ttft_by_turn_is_what_the_stub_charges_for_its_uncached_tokens() {
    // A timing test: no other test's processes share the cores meanwhile.
    let _alone = alone();
    let log = Arc::new(Mutex::new(Vec::new()));
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = FIRST_CHUNK_S;
        c.variable.first_chunk_spread = 0.0;
        c.variable.output_len_mean = 8.0;
        c.variable.output_len_spread = 0.0;
        // A token an event, so the text after the first chunk has TPOT's tokens.
        c.stream_interval = 1;
        let cache = PrefixCacheConfig { uncached_token_us: UNCACHED_US, ..Default::default() };
        c.variable.prefix_cache = Some(cache);
        c.send_log = Some(log.clone());
    });
    let dir = report_dir("turns");
    let out = run(["benchmark", "from-config", "--config", &config(&server.url(), &dir)]);
    server.stop();
    assert_eq!(out.status.code(), Some(0));
    let stamped = stub_ttft_by_turn(&std::mem::take(&mut *log.lock().unwrap()));
    let s = summary(&dir);
    let by_turn = s["agentic"]["by_turn"].as_array().expect("by_turn");
    // The client's TTFT by turn is the stub's, by the stub's own clock (which a busy machine
    // may make later than its plan), within 5%.
    for t in by_turn {
        let turn = t["turn"].as_u64().unwrap();
        let want = &stamped[&turn];
        let want_avg = want.iter().sum::<f64>() / want.len() as f64;
        let got = t["ttft"]["avg"].as_f64().unwrap();
        assert!((got - want_avg).abs() <= 0.05 * want_avg, "turn {turn}: {got} vs {want_avg}");
    }
    check_recomputed(&dir, by_turn);
    // `report DIR` counts the same tool-call and content texts from the log: the same blocks
    // and the same client OSL and TPOT.
    let again = tmp_dir().join("turns-again");
    let _ = std::fs::remove_dir_all(&again);
    let out = run(["report", &dir.display().to_string(), "--out", &again.display().to_string()]);
    assert_eq!(out.status.code(), Some(0));
    let rebuilt = summary(&again);
    assert_eq!(rebuilt["agentic"], s["agentic"]);
    for key in ["output_sequence_lengths", "tpot", "tps"] {
        assert!(!s[key].is_null(), "{key} is in the run's summary");
        assert_eq!(rebuilt[key], s[key], "{key}");
    }
}

/// One sample as events.jsonl tells it.
#[derive(Default)]
struct Sample {
    turn: u64,
    issued: u64,
    first: Option<u64>,
    complete: u64,
    rest: Option<String>,
    completion_tokens: Option<u64>,
}

fn samples(dir: &Path) -> Vec<Sample> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).expect("events.jsonl");
    let mut by_uuid: BTreeMap<String, Sample> = BTreeMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).expect("a line parses");
        let Some(uuid) = v["sample_uuid"].as_str().filter(|u| !u.is_empty()) else { continue };
        let s = by_uuid.entry(uuid.to_string()).or_default();
        let ts = v["timestamp_ns"].as_u64().unwrap();
        match v["event_type"].as_str().unwrap() {
            "sample.issued" => (s.turn, s.issued) = (v["turn"].as_u64().unwrap(), ts),
            "sample.recv_first" => s.first = Some(ts),
            "sample.complete" => {
                s.complete = ts;
                s.completion_tokens = v["completion_tokens"].as_u64();
                s.rest = text_after_first_chunk(&v["data"]);
            }
            _ => {}
        }
    }
    by_uuid.into_values().collect()
}

/// What TPOT counts of a streamed `TextModelOutput` without reasoning: the content after its
/// first chunk, then the tool calls' JSON (all of it: this tool's rule, docs/METRICS.md).
fn text_after_first_chunk(data: &Value) -> Option<String> {
    let chunks = data[1].as_array()?;
    let mut text: String = chunks.iter().skip(1).filter_map(Value::as_str).collect();
    if let Some(calls) = data[3].as_array() {
        // Key order does not change a character count.
        text.push_str(&Value::Array(calls.clone()).to_string());
    }
    Some(text)
}

/// numpy's `percentile(method="lower")`, as the summary's blocks give them.
fn lower(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p / 100.0).floor() as usize]
}

/// A series' rollups as the summary writes them: min, max, avg, median, p90, p99.
fn rollups(mut values: Vec<f64>) -> [f64; 6] {
    assert!(!values.is_empty(), "every turn has each series here");
    values.sort_by(f64::total_cmp);
    let avg = values.iter().sum::<f64>() / values.len() as f64;
    let (min, max) = (values[0], values[values.len() - 1]);
    [min, max, avg, lower(&values, 50.0), lower(&values, 90.0), lower(&values, 99.0)]
}

fn block(b: &Value) -> [f64; 6] {
    let f = |v: &Value| v.as_f64().unwrap();
    let p = &b["percentiles"];
    [f(&b["min"]), f(&b["max"]), f(&b["avg"]), f(&b["median"]), f(&p["90.0"]), f(&p["99.0"])]
}

/// `got` equals `want` exactly, but a float average (index 2) to 1e-12: the summary sums a
/// float series in its table's order (the order records reached the aggregator), which the
/// log does not keep, and a different order moves the last bit.
fn assert_same(got: [f64; 6], want: [f64; 6], what: &str) {
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let same = if i == 2 { (g - w).abs() <= 1e-12 * w.abs() } else { g == w };
        assert!(same, "{what}: {got:?} vs the summary's {want:?}");
    }
}

/// Each turn's TTFT, latency and both TPOTs, from the log, equal the summary's.
fn check_recomputed(dir: &Path, by_turn: &[Value]) {
    let all = samples(dir);
    for t in by_turn {
        let turn = t["turn"].as_u64().unwrap();
        let mine: Vec<&Sample> = all.iter().filter(|s| s.turn == turn).collect();
        let ttft = mine.iter().filter_map(|s| s.first.map(|f| (f - s.issued) as f64)).collect();
        let latency = mine.iter().map(|s| (s.complete - s.issued) as f64).collect();
        // The char tokenizer makes a token of each character.
        let tpot_client = mine
            .iter()
            .filter_map(|s| {
                Some(((s.complete - s.first?) as f64, s.rest.as_ref()?.chars().count()))
            })
            .filter(|(_, n)| *n > 0)
            .map(|(span, n)| span / n as f64)
            .collect();
        let tpot_server = mine
            .iter()
            .filter_map(|s| Some(((s.complete - s.first?) as f64, s.completion_tokens?)))
            .filter(|(_, n)| *n > 1)
            .map(|(span, n)| span / (n - 1) as f64)
            .filter(|v| *v >= 1.0)
            .collect();
        // Integer series (TTFT, latency) have exact averages too.
        assert_eq!(rollups(ttft), block(&t["ttft"]), "turn {turn} TTFT");
        assert_eq!(rollups(latency), block(&t["latency"]), "turn {turn} latency");
        assert_same(rollups(tpot_client), block(&t["tpot"]), &format!("turn {turn} TPOT (client)"));
        assert_same(
            rollups(tpot_server),
            block(&t["tpot_server"]),
            &format!("turn {turn} TPOT (server)"),
        );
    }
}
