//! What a run leaves in its report directory, read back: the summary, report.txt, the events
//! tallied per sample, the accounting checked, and every JSON file parsed.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

/// A JSON file, read and parsed; a failure names the file.
pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn summary(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("performance/result_summary.json"))
        .expect("result_summary.json is written");
    serde_json::from_str(&text).expect("result_summary.json parses")
}

pub fn report_txt(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("report.txt")).expect("report.txt is written")
}

/// The run's sample_idx_map.json.
pub fn idx_map(dir: &Path) -> Value {
    read_json(&dir.join("sample_idx_map.json"))
}

/// The client ISL total of the run's summary.
pub fn isl_total(dir: &Path) -> u64 {
    summary(dir)["input_sequence_lengths"]["total"].as_u64().expect("a client ISL total")
}

/// Checks that every sample in `dir/events.jsonl` with a `sample.issued` line has exactly one
/// terminal event (`sample.complete`, or `error.loadgen` for an abandoned sample) and no sample
/// has a terminal event without its `sample.issued` line. Returns the number of issued samples.
pub fn check_terminal_events(dir: &Path) -> u64 {
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
