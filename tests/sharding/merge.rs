//! `llm-loadgen merge` on shard directories written by hand: the merged report's
//! distributions are those of the union of the shards' samples, to the nanosecond, on the
//! common timeline; and the merge refuses other plans, missing and duplicate shards, and skew.

use std::path::{Path, PathBuf};

use crate::support::{bin, report_dir, show, summary};

/// The wall clock of the synthetic shards' common start.
const START_UNIX_NS: u64 = 1_796_000_000_000_000_000;

/// One synthetic sample: its issue time after the start, and its three durations.
#[derive(Debug, Clone, Copy)]
struct Sample {
    issued_after_start_ns: u64,
    ttft_ns: u64,
    latency_ns: u64,
    gap_ns: u64,
    failed: bool,
}

/// A small deterministic generator, so the values spread without a dependency.
fn lcg(state: &mut u64) -> u64 {
    *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
    *state >> 33
}

fn samples(n: usize, seed: u64) -> Vec<Sample> {
    let mut s = seed;
    (0..n)
        .map(|i| {
            let ttft_ns = 100_000 + lcg(&mut s) % 9_000_000;
            Sample {
                issued_after_start_ns: i as u64 * 1_000_000 + lcg(&mut s) % 500_000,
                ttft_ns,
                latency_ns: ttft_ns + 1 + lcg(&mut s) % 20_000_000,
                gap_ns: 1 + lcg(&mut s) % 3_000_000,
                failed: false,
            }
        })
        .collect()
}

/// A synthetic shard: its samples, its clock anchor and its start's lateness.
struct ShardSpec {
    index: u32,
    count: u32,
    samples: Vec<Sample>,
    anchor_ns: u64,
    late_ns: u64,
}

impl ShardSpec {
    /// The shard's monotonic time of a wall-clock instant.
    fn mono(&self, unix_ns: u64) -> u64 {
        unix_ns - self.anchor_ns
    }

    fn tracking_start_unix_ns(&self) -> u64 {
        START_UNIX_NS + self.late_ns
    }
}

fn event(kind: &str, ts: u64, uuid: Option<u64>, rest: &str) -> (u64, String) {
    let uuid = uuid.map_or(String::new(), |u| format!("{u:032x}"));
    let line = format!(
        "{{\"event_type\":\"{kind}\",\"timestamp_ns\":{ts},\"sample_uuid\":\"{uuid}\",\"conversation_id\":\"\",\"turn\":null,\"data\":{rest}}}"
    );
    (ts, line)
}

/// events.jsonl of a shard, in time order: its samples under their local ids 0, 1, …
fn events(spec: &ShardSpec) -> String {
    let start = spec.mono(spec.tracking_start_unix_ns());
    let mut lines = vec![
        event("session.started", start - 1_000_000, None, "null"),
        event("session.start_performance_tracking", start, None, "null"),
    ];
    let mut end = start;
    for (id, s) in spec.samples.iter().enumerate() {
        let id = Some(id as u64);
        let issued = start + s.issued_after_start_ns;
        let prompt = "[\"PromptData\",\"hello\",null,null,null,null,null,null]";
        lines.push(event("sample.issued", issued, id, prompt));
        lines.push(event("sample.recv_first", issued + s.ttft_ns, id, "null"));
        let done = issued + s.latency_ns;
        end = end.max(done);
        if s.failed {
            lines.push(event("sample.complete", done, id, "null,\"worker_id\":0"));
            let error = "[\"ErrorData\",\"http_status\",\"HTTP 500\"]";
            lines.push(event("error.generic", done, id, error));
        } else {
            let out = format!(
                "[\"TextModelOutput\",[\"a\",\"bc\"],null,null],\"finish_reason\":\"stop\",\"worker_id\":0,\"prompt_tokens\":5,\"completion_tokens\":3,\"n_chunks\":2,\"chunk_reads\":2,\"chunk_delta_ns\":[{}]",
                s.gap_ns
            );
            lines.push(event("sample.complete", done, id, &out));
        }
    }
    lines.push(event("session.stop_performance_tracking", end + 10, None, "null"));
    lines.push(event("session.ended", end + 10, None, "null"));
    lines.sort_by_key(|(ts, _)| *ts);
    lines.into_iter().map(|(_, l)| l + "\n").collect()
}

const CONFIG: &str = "type: offline\nmodel_params:\n  name: no-such-tokenizer-here\n  streaming: 'on'\nendpoint_config:\n  endpoints:\n  - http://127.0.0.1:9\nsettings:\n  runtime:\n    n_samples_to_issue: 67\n";

fn shard_json(spec: &ShardSpec, plan_hash: &str) -> serde_json::Value {
    let n = spec.samples.len() as u64;
    serde_json::json!({
        "format": 1, "index": spec.index, "count": spec.count, "origin": "--shard",
        "plan_hash": plan_hash, "plan_samples": 67, "plan_warmup_samples": 0,
        "samples": n, "warmup_samples": 0,
        "sample_ids": {"local_first": 0, "global_first": 0, "stride": spec.count, "offset": spec.index},
        "seeds": {"scheduler_random_seed": 42, "shard_scheduler_seed": null,
                  "dataloader_random_seed": 42, "warmup_random_seed": 42, "shard_warmup_seed": null},
        "clock": {"wall_at_monotonic_zero_ns": spec.anchor_ns, "anchor_uncertainty_ns": 40,
                  "tracking_start_ns": spec.mono(spec.tracking_start_unix_ns()),
                  "tracking_start_unix_ns": spec.tracking_start_unix_ns(),
                  "start_at_unix_ns": START_UNIX_NS, "start_offset_ns": spec.late_ns},
    })
}

fn summary_json(spec: &ShardSpec) -> serde_json::Value {
    let n = spec.samples.len();
    let failed = spec.samples.iter().filter(|s| s.failed).count();
    let kinds = if failed > 0 {
        serde_json::json!({"http_status": {"count": failed, "first_message": "HTTP 500"}})
    } else {
        serde_json::json!({})
    };
    serde_json::json!({
        "version": "0.1.0", "git_sha": null, "n_samples_issued": n, "n_samples_completed": n,
        "n_samples_failed": failed, "state": "complete", "complete": true,
        "token_count_source": "server", "n_samples_abandoned": 0, "n_requests_resent": 0,
        "failure_kinds": kinds, "endpoints": [{"url": "http://127.0.0.1:9"}],
    })
}

/// Writes a shard's report directory by hand: what a shard run leaves for the merge.
fn write_shard(root: &Path, spec: &ShardSpec, plan_hash: &str) -> PathBuf {
    let dir = root.join(format!("shard{}", spec.index));
    std::fs::create_dir_all(dir.join("performance")).unwrap();
    std::fs::write(dir.join("events.jsonl"), events(spec)).unwrap();
    std::fs::write(dir.join("config.yaml"), CONFIG).unwrap();
    let json = |v: serde_json::Value| serde_json::to_string_pretty(&v).unwrap();
    std::fs::write(dir.join("shard.json"), json(shard_json(spec, plan_hash))).unwrap();
    std::fs::write(dir.join("performance/result_summary.json"), json(summary_json(spec))).unwrap();
    let map: serde_json::Map<String, serde_json::Value> =
        (0..spec.samples.len()).map(|i| (format!("{i:032x}"), serde_json::json!(i % 7))).collect();
    let idx = serde_json::json!({ "performance": map });
    std::fs::write(dir.join("sample_idx_map.json"), json(idx)).unwrap();
    dir
}

/// Two shards of a 67-sample plan (34 and 33 samples, as `--shard` splits it), on clocks 5 s
/// and a few ns apart; shard 1 starts 3 ms late, and one of its samples fails.
fn two_shards() -> [ShardSpec; 2] {
    let mut second = samples(33, 7);
    second[4].failed = true;
    [
        ShardSpec {
            index: 0,
            count: 2,
            samples: samples(34, 3),
            anchor_ns: 1_000_000_000_000,
            late_ns: 0,
        },
        ShardSpec {
            index: 1,
            count: 2,
            samples: second,
            anchor_ns: 1_005_000_000_123,
            late_ns: 3_000_000,
        },
    ]
}

fn merge(args: &[&Path], extra: &[&str]) -> std::process::Output {
    let out = bin().arg("merge").args(args).args(extra).output().expect("the binary runs");
    show(&out);
    out
}

/// numpy's `percentile(method="lower")` of sorted values.
fn lower(sorted: &[u64], p: f64) -> u64 {
    sorted[(((sorted.len() - 1) as f64) * (p / 100.0)).floor() as usize]
}

fn assert_distribution(block: &serde_json::Value, mut values: Vec<u64>, name: &str) {
    values.sort_unstable();
    assert_eq!(block["min"].as_u64(), Some(values[0]), "{name} min");
    assert_eq!(block["max"].as_u64(), values.last().copied(), "{name} max");
    assert_eq!(block["total"].as_u64(), Some(values.iter().sum()), "{name} total");
    for key in [
        "99.9", "99.0", "97.0", "95.0", "90.0", "80.0", "75.0", "50.0", "25.0", "10.0", "5.0",
        "1.0",
    ] {
        let p: f64 = key.parse().unwrap();
        let got = block["percentiles"][key].as_f64().unwrap_or_else(|| panic!("{name} p{key}"));
        assert_eq!(got, lower(&values, p) as f64, "{name} p{key}");
    }
}

#[test]
fn merged_percentiles_are_those_of_the_union_of_the_shards_samples_to_the_nanosecond() {
    let root = report_dir("merge-exact");
    let specs = two_shards();
    let dirs: Vec<PathBuf> =
        specs.iter().map(|s| write_shard(&root, s, "00000000000000aa")).collect();
    let out_dir = root.join("merged");
    let out = merge(
        &[&dirs[1], &dirs[0]],
        &["--out", out_dir.to_str().unwrap(), "--token-count-source", "server"],
    );
    assert_eq!(out.status.code(), Some(0), "the merge succeeds");
    let s = summary(&out_dir);
    let all: Vec<&Sample> = specs.iter().flat_map(|s| &s.samples).collect();
    let ok: Vec<&&Sample> = all.iter().filter(|s| !s.failed).collect();
    assert_eq!(s["n_samples_issued"], 67);
    assert_eq!(s["n_samples_completed"], 67);
    assert_eq!(s["n_samples_failed"], 1);
    // As in a run: a failed sample still has its latency and TTFT; only outputs have gaps.
    assert_distribution(&s["latency"], all.iter().map(|s| s.latency_ns).collect(), "latency");
    assert_distribution(&s["ttft"], all.iter().map(|s| s.ttft_ns).collect(), "ttft");
    assert_distribution(&s["itl"], ok.iter().map(|s| s.gap_ns).collect(), "itl");
    // The window runs from the first shard's start to the last completion, on the wall clock.
    let last_done = specs
        .iter()
        .flat_map(|sp| {
            sp.samples
                .iter()
                .map(|s| sp.tracking_start_unix_ns() + s.issued_after_start_ns + s.latency_ns)
        })
        .max()
        .unwrap();
    assert_eq!(s["duration_ns"].as_u64(), Some(last_done - START_UNIX_NS), "merged window");
    let shards = s["shards"].as_array().expect("a shards section");
    assert_eq!(shards.len(), 2);
    assert_eq!(shards[0]["index"], 0, "in shard order, whatever order they were given in");
    assert_eq!(shards[1]["n_samples_issued"], 33);
    assert_eq!(shards[1]["failure_kinds"]["http_status"], 1);
    assert_eq!(shards[1]["start_skew_ns"], 3_000_000);
    assert_eq!(shards[1]["clock_shift_ns"], 5_000_000_123u64);
    assert_eq!(s["failure_kinds"]["http_status"]["count"], 1, "failures by kind, summed");
    // The merged log holds every sample once, under the single-host run's ids.
    let log = std::fs::read_to_string(out_dir.join("events.jsonl")).unwrap();
    let mut ids: Vec<String> = log
        .lines()
        .filter(|l| l.contains("\"sample.complete\""))
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["sample_uuid"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    ids.sort();
    let mut want: Vec<String> = (0..34u64)
        .map(|j| 2 * j)
        .chain((0..33u64).map(|j| 2 * j + 1))
        .map(|g| format!("{g:032x}"))
        .collect();
    want.sort();
    assert_eq!(ids, want);
    let _ = std::fs::remove_dir_all(&root);
}

/// Writes two shards, lets `damage` change the second's shard.json, and merges them.
fn refused(name: &str, damage: impl FnOnce(&mut serde_json::Value), extra: &[&str]) -> String {
    let root = report_dir(name);
    let specs = two_shards();
    let dirs: Vec<PathBuf> =
        specs.iter().map(|s| write_shard(&root, s, "00000000000000aa")).collect();
    let path = dirs[1].join("shard.json");
    let mut file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    damage(&mut file);
    std::fs::write(&path, file.to_string()).unwrap();
    let out_dir = root.join("merged");
    let mut args = vec!["--out", out_dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = merge(&[&dirs[0], &dirs[1]], &args);
    assert_eq!(out.status.code(), Some(2), "{name}: refused as bad input");
    assert!(!out_dir.join("performance/result_summary.json").exists(), "{name}: no report");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let _ = std::fs::remove_dir_all(&root);
    err
}

#[test]
fn shards_of_another_plan_are_refused_naming_both_directories() {
    let err = refused("merge-other-plan", |f| f["plan_hash"] = "00000000000000bb".into(), &[]);
    assert!(err.contains("different plans or seeds"), "{err}");
    assert!(
        err.contains("shard0 (plan hash 00000000000000aa)")
            && err.contains("shard1 (plan hash 00000000000000bb)"),
        "{err}"
    );
}

#[test]
fn a_duplicate_shard_is_refused_naming_both_directories() {
    let err = refused("merge-duplicate", |f| f["index"] = 0.into(), &[]);
    assert!(err.contains("are both shard 0/2"), "{err}");
}

#[test]
fn a_missing_shard_is_refused_naming_it() {
    let err = refused("merge-missing", |f| f["count"] = 3.into(), &[]);
    assert!(err.contains("shard 0/2") && err.contains("shard 1/3"), "{err}");
    let root = report_dir("merge-missing-one");
    let mut specs = two_shards();
    specs[0].count = 3;
    let dir = write_shard(&root, &specs[0], "00000000000000aa");
    let out = merge(&[&dir], &["--out", root.join("merged").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("shard 1/3, 2/3 missing"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn shards_started_further_apart_than_the_limit_are_refused() {
    let late = |f: &mut serde_json::Value| {
        let t = f["clock"]["tracking_start_unix_ns"].as_u64().unwrap();
        f["clock"]["tracking_start_unix_ns"] = (t + 80_000_000).into();
    };
    let err = refused("merge-skew", late, &[]);
    assert!(err.contains("83.0 ms apart") && err.contains("--max-skew-ms 50"), "{err}");
    let err = refused("merge-skew-limit", |_| {}, &["--max-skew-ms", "2"]);
    assert!(err.contains("3.0 ms apart") && err.contains("--max-skew-ms 2"), "{err}");
}

#[test]
fn a_run_without_shard_json_is_refused_naming_it() {
    let root = report_dir("merge-no-shard-json");
    let specs = two_shards();
    let dirs: Vec<PathBuf> =
        specs.iter().map(|s| write_shard(&root, s, "00000000000000aa")).collect();
    std::fs::remove_file(dirs[1].join("shard.json")).unwrap();
    let out = merge(&[&dirs[0], &dirs[1]], &["--out", root.join("merged").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("shard1 is not a shard's report directory"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_shard_directory_as_the_output_is_refused() {
    let root = report_dir("merge-out-is-shard");
    let specs = two_shards();
    let dirs: Vec<PathBuf> =
        specs.iter().map(|s| write_shard(&root, s, "00000000000000aa")).collect();
    let before = std::fs::read(dirs[1].join("events.jsonl")).unwrap();
    let out = merge(&[&dirs[0], &dirs[1]], &["--out", dirs[1].to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is the shard directory"));
    assert_eq!(std::fs::read(dirs[1].join("events.jsonl")).unwrap(), before, "untouched");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_shard_count_past_the_shard_limit_is_refused_before_anything_is_sized_by_it() {
    // It once sized a table of 4,294,967,295 shards (64 GiB) before any check.
    let err = refused("merge-huge-count", |f| f["count"] = u32::MAX.into(), &[]);
    assert!(
        err.contains("shard1/shard.json: count is 4294967295") && err.contains("1 to 4096"),
        "{err}"
    );
}

#[test]
fn shard_json_fields_that_disagree_with_the_others_are_refused_naming_the_field() {
    type Damage = fn(&mut serde_json::Value);
    let cases: [(&str, Damage, &str); 9] = [
        // Shard 1's ids onto shard 0's: the merge kept 21 of 40 samples and exited 0.
        ("offset", |f| f["sample_ids"]["offset"] = 0.into(), "sample_ids.offset is 0"),
        ("stride", |f| f["sample_ids"]["stride"] = 3.into(), "sample_ids.stride is 3"),
        ("local-first", |f| f["sample_ids"]["local_first"] = 5.into(), "local_first is 5"),
        // An anchor at the epoch put shard 0 57 years after shard 1 and exited 0.
        (
            "anchor",
            |f| f["clock"]["wall_at_monotonic_zero_ns"] = 0.into(),
            "clock.wall_at_monotonic_zero_ns is 0",
        ),
        ("offset-ns", |f| f["clock"]["start_offset_ns"] = 7.into(), "start_offset_ns is 7"),
        ("plan-samples", |f| f["plan_samples"] = 68.into(), "plan_samples is 68"),
        ("samples", |f| f["samples"] = 30.into(), "samples is 30: shard 1/2's share of"),
        ("format", |f| f["format"] = 2.into(), "format is 2"),
        (
            "plan-hash",
            |f| f["plan_hash"] = "\u{1b}]0;x\u{7}00000000000".into(),
            "plan_hash is \"\\u{1b}]0;x\\u{7}00000000000\"",
        ),
    ];
    for (name, damage, what) in cases {
        let err = refused(&format!("merge-field-{name}"), damage, &[]);
        assert!(err.contains("shard1/shard.json: ") && err.contains(what), "{name}: {err}");
        assert!(!err.contains('\u{1b}'), "{name}: no raw escape reaches the terminal: {err}");
    }
}

#[test]
fn a_shard_log_that_is_not_its_shard_json_s_run_is_refused_naming_the_line() {
    let root = report_dir("merge-log-ids");
    let specs = two_shards();
    let dirs: Vec<PathBuf> =
        specs.iter().map(|s| write_shard(&root, s, "00000000000000aa")).collect();
    let log = dirs[1].join("events.jsonl");
    let text = std::fs::read_to_string(&log).unwrap();
    let out_dir = root.join("merged");
    let merge_with = |events: &str| {
        std::fs::write(&log, events).unwrap();
        let out = merge(&[&dirs[0], &dirs[1]], &["--out", out_dir.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2));
        assert!(!out_dir.join("performance/result_summary.json").exists(), "no report");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Sample 3's lines under id 4096: past the 33 ids its shard.json gives it.
    let moved = text.replace(&format!("{:032x}", 3), &format!("{:032x}", 4096));
    let line = moved.lines().position(|l| l.contains(&format!("{:032x}", 4096))).unwrap() + 1;
    let err = merge_with(&moved);
    assert!(err.contains(&format!("shard1/events.jsonl line {line}: sample id 4096")), "{err}");
    assert!(err.contains("samples 33"), "{err}");
    // Its tracking start moved off shard.json's clock.
    let start = specs[1].mono(specs[1].tracking_start_unix_ns());
    let moved = text.replace(&format!("\"timestamp_ns\":{start},"), "\"timestamp_ns\":1,");
    let err = merge_with(&moved);
    assert!(err.contains(&format!("clock.tracking_start_ns is {start}")), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}
