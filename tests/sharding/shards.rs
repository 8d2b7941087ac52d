//! Two shards on one machine (`--shard 0/2` and `1/2`, or the same from Slurm's or an Indexed
//! Job's variables), started as child processes with one `--start-at` against one stub, merge
//! into the report of a single run of the same plan: the same samples (ids and dataset rows)
//! and the same counts, streaming or not, Poisson or concurrency. And the shard settings a
//! run refuses.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::support::{bin, char_tokenizer, dataset, idx_map, report_dir, run, show, stub, summary};
use loadgen_stubs::StubKind;

/// The engines' variables a test run must not inherit from a shell under Slurm or a Job.
const ENGINE_VARS: [&str; 4] =
    ["SLURM_PROCID", "SLURM_NTASKS", "JOB_COMPLETION_INDEX", "LOADGEN_SHARDS"];

/// How long a shard run may take before the test gives up on it (and kills it).
const RUN_DEADLINE: Duration = Duration::from_secs(120);

fn command() -> Command {
    let mut cmd = bin();
    for var in ENGINE_VARS {
        cmd.env_remove(var);
    }
    cmd
}

/// The plan: 7 warm-up samples, then 61 of the 1,000-prompt dataset against `url`, the char
/// tokenizer.
fn plan_args(url: &str, pattern: &[&str], streaming: &str, dir: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec!["benchmark".into(), "online".into()];
    args.extend(pattern.iter().map(|s| s.to_string()));
    let fixed = [
        "--warmup",
        "--warmup-requests",
        "7",
        "--endpoints",
        url,
        "--model",
        "test-model",
        "--dataset",
        &dataset(),
        "--tokenizer",
        &char_tokenizer(),
        "--num-samples",
        "61",
        "--streaming",
        streaming,
        "--workers",
        "1",
        "--report-dir",
        &dir.display().to_string(),
    ]
    .map(str::to_string);
    args.extend(fixed);
    args
}

/// Waits for a child within `RUN_DEADLINE`, killing it past that.
fn wait(child: Child, what: &str) -> Output {
    crate::support::wait_output(child, what, RUN_DEADLINE)
}

/// How a shard learns which it is.
#[derive(Clone, Copy)]
enum Source {
    Flag,
    Slurm,
    IndexedJob,
}

/// Starts shard `i` of 2 of the plan, with the common start `start_at`.
fn spawn_shard(args: &[String], i: u32, source: Source, start_at: &str) -> Child {
    let mut cmd = command();
    cmd.args(args).args(["--start-at", start_at]);
    match source {
        Source::Flag => {
            cmd.args(["--shard", &format!("{i}/2")]);
        }
        Source::Slurm => {
            cmd.env("SLURM_PROCID", i.to_string()).env("SLURM_NTASKS", "2");
        }
        Source::IndexedJob => {
            cmd.env("JOB_COMPLETION_INDEX", i.to_string()).env("LOADGEN_SHARDS", "2");
        }
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the shard starts")
}

/// Runs the plan as one host, then as two shards started together, and merges the shards.
/// Returns the single run's directory and the merged one.
fn single_and_merged(
    name: &str,
    pattern: &[&str],
    streaming: &str,
    sources: [Source; 2],
) -> (PathBuf, PathBuf) {
    let server = stub(StubKind::Echo, |_| {});
    let url = server.url();
    let single = report_dir(&format!("{name}-single"));
    let out = run(plan_args(&url, pattern, streaming, &single));
    assert_eq!(out.status.code(), Some(0), "the single-host run succeeds");
    let dirs = [0, 1].map(|i| report_dir(&format!("{name}-shard{i}")));
    // A start four seconds ahead (a debug build on a busy machine takes a while to load the
    // dataset and tokenizer): both shards fork, connect and wait for it.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let start_at = format!("{:.3}", now.as_secs_f64() + 4.0);
    let children: Vec<Child> = (0..2)
        .map(|i| {
            spawn_shard(
                &plan_args(&url, pattern, streaming, &dirs[i]),
                i as u32,
                sources[i],
                &start_at,
            )
        })
        .collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = wait(child, &format!("shard {i}"));
        assert_eq!(out.status.code(), Some(0), "shard {i} succeeds");
    }
    let merged = report_dir(&format!("{name}-merged"));
    let out = command()
        .arg("merge")
        .args(&dirs)
        .args(["--out", merged.to_str().unwrap()])
        .output()
        .expect("merge runs");
    show(&out);
    assert_eq!(out.status.code(), Some(0), "the merge succeeds");
    (single, merged)
}

/// The merged report has the single run's samples (sample ids and their dataset rows) and
/// counts, and each shard its share.
fn assert_same_run(single: &Path, merged: &Path) {
    let (a, b) = (idx_map(single), idx_map(merged));
    let ids =
        |v: &serde_json::Value| v["performance"].as_object().expect("a performance phase").len();
    assert_eq!(ids(&a), 61, "the single run issued every sample");
    assert_eq!(a, b, "the merged sample set is the single run's, sample for sample");
    let (s, m) = (summary(single), summary(merged));
    for key in
        ["n_samples_issued", "n_samples_completed", "n_samples_failed", "n_samples_abandoned"]
    {
        assert_eq!(s[key], m[key], "{key}");
    }
    for key in ["latency", "ttft", "output_sequence_lengths", "input_sequence_lengths"] {
        assert_eq!(s[key].is_null(), m[key].is_null(), "{key} present in both or neither");
    }
    // The echo stub answers each prompt with itself: the token counts are the sample set's.
    assert_eq!(s["input_sequence_lengths"]["total"], m["input_sequence_lengths"]["total"]);
    assert_eq!(s["output_sequence_lengths"]["total"], m["output_sequence_lengths"]["total"]);
    let shards = m["shards"].as_array().expect("a shards section");
    let issued: Vec<u64> = shards.iter().map(|s| s["n_samples_issued"].as_u64().unwrap()).collect();
    assert_eq!(issued, [31, 30], "every other sample each");
    // The warm-up is split too: the snapshots' warm-up-inclusive totals add up.
    let total = |dir: &Path| -> u64 {
        let text = std::fs::read_to_string(dir.join("metrics/final_snapshot.json")).unwrap();
        let snap: serde_json::Value = serde_json::from_str(&text).unwrap();
        let metrics = snap["metrics"].as_array().unwrap();
        let issued = metrics.iter().find(|m| m["name"] == "total_samples_issued").unwrap();
        issued["value"].as_u64().unwrap()
    };
    assert_eq!(total(single), 68, "7 warm-up and 61 tracked samples");
    assert_eq!(total(merged), total(single), "the merged warm-up-inclusive total");
    let skew = shards.iter().map(|s| s["start_skew_ns"].as_u64().unwrap()).max().unwrap();
    assert!(skew < 50_000_000, "the shards started together ({skew} ns apart)");
}

#[test]
fn concurrency_shards_merge_into_the_single_runs_samples_when_streaming() {
    let pattern = ["--load-pattern", "concurrency", "--concurrency", "4"];
    let (single, merged) =
        single_and_merged("shards-conc-stream", &pattern, "on", [Source::Flag, Source::Slurm]);
    assert_same_run(&single, &merged);
    assert!(!summary(&merged)["itl"].is_null(), "a streamed merge has its chunk gaps");
}

#[test]
fn concurrency_shards_merge_into_the_single_runs_samples_without_streaming() {
    let pattern = ["--load-pattern", "concurrency", "--concurrency", "3"];
    let (single, merged) =
        single_and_merged("shards-conc-plain", &pattern, "off", [Source::IndexedJob, Source::Flag]);
    assert_same_run(&single, &merged);
}

#[test]
fn poisson_shards_merge_into_the_single_runs_samples_when_streaming() {
    let pattern = ["--load-pattern", "poisson", "--target-qps", "200"];
    let (single, merged) =
        single_and_merged("shards-poisson-stream", &pattern, "on", [Source::Flag, Source::Flag]);
    assert_same_run(&single, &merged);
    let shard = std::fs::read_to_string(report_dir_of(&merged, 1).join("shard.json")).unwrap();
    let shard: serde_json::Value = serde_json::from_str(&shard).unwrap();
    assert_eq!(shard["seeds"]["scheduler_random_seed"], 42);
    assert!(
        shard["seeds"]["shard_scheduler_seed"].as_u64().is_some_and(|s| s != 42),
        "a seed of its own"
    );
    let shard_summary = summary(&report_dir_of(&merged, 1));
    assert_eq!(shard_summary["run_config"]["load_pattern"]["target_qps"], 100.0, "QPS / N");
}

#[test]
fn poisson_shards_merge_into_the_single_runs_samples_without_streaming() {
    let pattern = ["--load-pattern", "poisson", "--target-qps", "200"];
    let (single, merged) = single_and_merged(
        "shards-poisson-plain",
        &pattern,
        "off",
        [Source::Slurm, Source::IndexedJob],
    );
    assert_same_run(&single, &merged);
}

/// A shard's directory beside a merged one (`<name>-merged` → `<name>-shard<i>`).
fn report_dir_of(merged: &Path, i: u32) -> PathBuf {
    let name =
        merged.file_name().unwrap().to_str().unwrap().replace("-merged", &format!("-shard{i}"));
    merged.with_file_name(name)
}

fn refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let dir = report_dir("shards-refused");
    let mut cmd = command();
    cmd.args(["benchmark", "offline", "--num-samples", "10"]);
    if !args.contains(&"--endpoints") {
        cmd.args(["--endpoints", "null://"]);
    }
    cmd.args(["--report-dir", dir.to_str().unwrap()]).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the binary runs");
    show(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: refused as bad input");
    assert!(!dir.join("events.jsonl").exists(), "nothing ran");
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn an_index_past_the_count_a_zero_count_and_a_past_start_are_refused() {
    assert!(
        refused(&["--shard", "2/2"], &[]).contains("shard index 2 is not below the shard count 2")
    );
    assert!(refused(&["--shard", "0/0"], &[]).contains("shard count of 0"));
    assert!(refused(&[], &[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "4")])
        .contains("SLURM_PROCID/SLURM_NTASKS (4/4)"));
    assert!(refused(&["--start-at", "1000000000"], &[]).contains("in the past"));
    let far = refused(&["--start-at", "9999-12-31T23:59:59Z"], &[]);
    assert!(far.contains("days ahead") && far.contains("at most 24 h"), "{far}");
    assert!(refused(&["--shard", "10/11"], &[]).contains("fewer than its 11 shards"));
    assert!(refused(&["--shard", "0/2", "--no-events"], &[]).contains("drop --no-events"));
    let two =
        ["--shard", "0/2", "--endpoints", "http://127.0.0.1:9,http://127.0.0.2:9", "--model", "m"];
    assert!(refused(&two, &[]).contains("over 2 endpoints"));
    let both = [
        ("SLURM_PROCID", "0"),
        ("SLURM_NTASKS", "2"),
        ("JOB_COMPLETION_INDEX", "1"),
        ("LOADGEN_SHARDS", "2"),
    ];
    let err = refused(&[], &both);
    assert!(err.contains("SLURM_PROCID") && err.contains("JOB_COMPLETION_INDEX"), "{err}");
}

#[test]
fn a_start_that_passes_during_setup_starts_at_once_and_says_how_late() {
    let dir = report_dir("shards-late-start");
    // 10 ms ago: within the 100 ms tolerance when the plan is read (the binary has 90 ms to
    // start), past by the time the run is ready. A machine so busy that the start alone takes
    // longer is refused with "in the past": that attempt measured the host, not the rule, so
    // it is made again, three times at most.
    let mut attempts = 0;
    let out = loop {
        attempts += 1;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let start_at = format!("{:.3}", now.as_secs_f64() - 0.01);
        let out = command()
            .args(["benchmark", "offline", "--endpoints", "null://", "--num-samples", "20"])
            .args(["--shard", "0/1", "--start-at", &start_at, "--report-dir"])
            .arg(&dir)
            .output()
            .expect("the binary runs");
        show(&out);
        let refused_as_past =
            out.status.code() == Some(2) && String::from_utf8_lossy(&out.stderr).contains("past");
        if !refused_as_past || attempts == 3 {
            break out;
        }
    };
    assert_eq!(out.status.code(), Some(0), "the run goes ahead");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--start-at had passed") && stderr.contains("ms late"), "{stderr}");
    let shard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("shard.json")).unwrap()).unwrap();
    let offset = shard["clock"]["start_offset_ns"].as_i64().expect("an offset");
    assert!(offset >= 10_000_000, "started {offset} ns after the given time");
    assert_eq!(summary(&dir)["n_samples_issued"], 20, "shard 0/1 is the whole plan");
}

#[test]
fn an_interrupt_ends_the_wait_for_a_far_start() {
    let server = stub(StubKind::Echo, |_| {});
    let dir = report_dir("shards-start-interrupted");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let start_at = (now + 3_600).to_string();
    let mut args = plan_args(
        &server.url(),
        &["--load-pattern", "concurrency", "--concurrency", "2"],
        "off",
        &dir,
    );
    args.extend(["--shard", "0/2", "--start-at", &start_at].map(str::to_string));
    let child =
        command().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // The workers connect only after the coordinator has its signal handlers, then it waits.
    let deadline = Instant::now() + RUN_DEADLINE;
    while server.connections_accepted() == 0 {
        assert!(Instant::now() < deadline, "the shard never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    let asked = Instant::now();
    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let out = wait(child, "the interrupted shard");
    assert_eq!(out.status.code(), Some(130), "interrupted");
    assert!(asked.elapsed() < Duration::from_secs(30), "the wait ended at the interrupt");
    assert_eq!(summary(&dir)["n_samples_issued"], 0, "nothing was issued before the start");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "--start-at: the performance phase starts at {start_at}.000000000 (Unix s), in 59 min"
        )),
        "the wait is said: {stderr}"
    );
}
