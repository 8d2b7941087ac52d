//! `--slo` and goodput: the summary's figures against a recount from events.jsonl, on both
//! token bases, and `report DIR` rebuilding the same; a slotted stub queues the samples so some
//! meet the objectives and some do not.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::support::{report_dir, run, stub, summary, Run};
use loadgen_stubs::StubKind;

const TTFT_BOUND_NS: u64 = 60_000_000;
const TPOT_BOUND_NS: u64 = 3_000_000;

/// One sample as events.jsonl tells it.
#[derive(Default)]
struct Logged {
    issued_ns: u64,
    first_ns: Option<u64>,
    complete_ns: u64,
    failed: bool,
    /// The characters after the first chunk (the char tokenizer's TPOT denominator).
    rest_chars: Option<u64>,
    completion_tokens: Option<u64>,
}

fn logged(dir: &Path) -> Vec<Logged> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    let mut samples: HashMap<String, Logged> = HashMap::new();
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let uuid = v["sample_uuid"].as_str().unwrap_or_default();
        if uuid.is_empty() {
            continue;
        }
        let at = v["timestamp_ns"].as_u64().unwrap();
        let s = samples.entry(uuid.to_string()).or_default();
        match v["event_type"].as_str().unwrap() {
            "sample.issued" => s.issued_ns = at,
            "sample.recv_first" => s.first_ns = Some(at),
            "sample.complete" => {
                s.complete_ns = at;
                s.failed |= v["data"].is_null();
                let rest = v["data"][1][1].as_str();
                s.rest_chars = rest.map(|r| r.chars().count() as u64);
                s.completion_tokens = v["completion_tokens"].as_u64();
            }
            _ => s.failed = true,
        }
    }
    samples.into_values().collect()
}

/// (good, TTFT met, TPOT met) by the objectives' rule, recounted from the log.
fn recount(samples: &[Logged], server: bool) -> (u64, u64, u64) {
    let mut counts = (0, 0, 0);
    for s in samples.iter().filter(|s| !s.failed) {
        let first = s.first_ns.expect("a streamed sample's first chunk");
        let ttft_ok = first - s.issued_ns <= TTFT_BOUND_NS;
        let span = (s.complete_ns - first) as f64;
        let tpot = if server {
            let n = s.completion_tokens.expect("server usage");
            (n > 1).then(|| span / (n - 1) as f64)
        } else {
            let n = s.rest_chars.expect("the output");
            (n > 0).then(|| span / n as f64)
        };
        let tpot_ok = tpot.is_none_or(|t| t <= TPOT_BOUND_NS as f64);
        counts.0 += u64::from(ttft_ok && tpot_ok);
        counts.1 += u64::from(ttft_ok);
        counts.2 += u64::from(tpot_ok);
    }
    counts
}

fn figures(block: &Value) -> (u64, u64, u64) {
    let met = |i: usize| block["objectives"][i]["n_met"].as_u64().unwrap();
    (block["n_good"].as_u64().unwrap(), met(0), met(1))
}

#[test]
fn goodput_recounted_from_events_equals_the_reports_on_both_bases_and_report_rebuilds_it() {
    let server = stub(StubKind::Variable, |c| {
        c.stream_interval = 2;
        c.variable.output_len_mean = 8.0;
        c.variable.output_len_spread = 0.0;
        c.variable.first_chunk_latency_s = 0.01;
        c.variable.first_chunk_spread = 0.0;
        c.variable.inter_token_latency_ms = 2.0;
        c.variable.inter_token_spread = 0.5;
        c.variable.max_concurrency = 2;
    });
    let dir = report_dir("goodput-recount");
    let slo = format!(
        "ttft_p50={}ms,tpot_p90={}ms",
        TTFT_BOUND_NS / 1_000_000,
        TPOT_BOUND_NS / 1_000_000
    );
    let url = format!("http://{}", server.addr());
    let ran = Run::offline(&url, &dir)
        .model("m")
        .dataset()
        .samples(40)
        .tokenizer()
        .streaming(true)
        .workers(1)
        .args(["--slo", &slo])
        .run();
    assert!(ran.status.success());
    server.stop();
    let s = summary(&dir);
    let samples = logged(&dir);
    let n = s["n_samples_completed"].as_u64().unwrap();
    assert_eq!(s["goodput"]["basis"], "client");
    assert_eq!(figures(&s["goodput"]), recount(&samples, false), "client basis");
    assert_eq!(figures(&s["goodput_server"]), recount(&samples, true), "server basis");
    let good = s["goodput"]["n_good"].as_u64().unwrap();
    assert!(good > 0 && good < n, "the queue makes some samples miss: {good} of {n}");
    let duration_s = s["duration_ns"].as_f64().unwrap() / 1e9;
    let qps = s["goodput"]["qps"].as_f64().unwrap();
    assert!((qps - good as f64 / duration_s).abs() < 1e-9 * qps.max(1.0), "{qps}");
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert!(stdout.contains("Goodput (client): "), "{stdout}");
    let txt = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(txt.contains("Goodput (server): "), "{txt}");
    // `report DIR` replays events.jsonl into the same table: the same blocks.
    let (before_client, before_server) = (s["goodput"].clone(), s["goodput_server"].clone());
    let out = run(["report", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rebuilt = summary(&dir);
    assert_eq!(rebuilt["goodput"], before_client);
    assert_eq!(rebuilt["goodput_server"], before_server);
}

#[test]
fn a_ttft_objective_without_streaming_is_refused_naming_it() {
    let dir = report_dir("goodput-refused");
    let ran = Run::offline("null://", &dir)
        .samples(5)
        .streaming(false)
        .args(["--slo", "ttft_p99=1s"])
        .run();
    assert_eq!(ran.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(stderr.contains("ttft_p99") && stderr.contains("--streaming on"), "{stderr}");
    // validate-yaml judges settings.slo as a run does.
    std::fs::create_dir_all(&dir).unwrap();
    let yaml = dir.join("slo.yaml");
    std::fs::write(
        &yaml,
        "type: online\nmodel_params:\n  name: m\n  streaming: \"off\"\nsettings:\n  slo: \
         ttft_p99=1s\n  load_pattern:\n    type: poisson\n    target_qps: 5\n",
    )
    .unwrap();
    let out = run(["validate-yaml", "-c", yaml.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ttft_p99"));
}
