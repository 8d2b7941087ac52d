//! An agentic run over two shards (`--shard 0/2` and `1/2` started together, or Slurm's
//! variables) merges into the report of the same plan run on one host: each shard runs every
//! other conversation whole, under the single-host run's conversation ids, with its half of
//! `target_concurrency`; the merge joins their turns by conversation.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use loadgen_stubs::{PrefixCacheConfig, StubKind};
use serde_json::Value;

use crate::run::agentic_window::{agentic_plan, check_window_figures, total_issued, Window};
use crate::support::{bin, idx_map, read_json, report_dir, run, show, stub, summary};

/// 12 trajectories of the fixture's c1, c2, c3 (3, 2, 1 client turns: 24 turns), 2 at a
/// time, against `url`.
fn plan(name: &str, url: &str, dir: &Path) -> String {
    agentic_plan(name, url, dir, (1, 2, false)).display().to_string()
}

fn spawn_shard(config: &str, i: u32, slurm: bool, start_at: &str) -> Child {
    let mut cmd = bin();
    for var in ["SLURM_PROCID", "SLURM_NTASKS", "JOB_COMPLETION_INDEX", "LOADGEN_SHARDS"] {
        cmd.env_remove(var);
    }
    cmd.args(["benchmark", "from-config", "--config", config, "--start-at", start_at]);
    if slurm {
        cmd.env("SLURM_PROCID", i.to_string()).env("SLURM_NTASKS", "2");
    } else {
        cmd.args(["--shard", &format!("{i}/2")]);
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("the shard starts")
}

/// Turns per turn number and the conversation ids, over every turn of a log.
fn all_turns(window: &Window) -> (BTreeMap<u64, u64>, BTreeSet<String>) {
    let mut by_turn = BTreeMap::new();
    for t in &window.turns {
        *by_turn.entry(t.turn).or_default() += 1;
    }
    (by_turn, window.turns.iter().map(|t| t.conversation.clone()).collect())
}

/// The summary's agentic `by_turn` as (turn, n_issued).
fn by_turn(s: &Value) -> BTreeMap<u64, u64> {
    let list = s["agentic"]["by_turn"].as_array().expect("by_turn");
    list.iter().map(|t| (t["turn"].as_u64().unwrap(), t["n_issued"].as_u64().unwrap())).collect()
}

/// Runs the plan on one host, then as two shards started together (the second from Slurm's
/// variables), and merges them; returns the single run's, the shards' and the merged
/// directories.
fn single_shards_and_merged() -> (PathBuf, Vec<PathBuf>, PathBuf) {
    let server = stub(StubKind::Variable, |c| {
        c.variable.first_chunk_latency_s = 0.001;
        c.variable.output_len_mean = 8.0;
        c.variable.prefix_cache = Some(PrefixCacheConfig::default());
    });
    let single = report_dir("agentic-single");
    let out =
        run(["benchmark", "from-config", "--config", &plan("single", &server.url(), &single)]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let dirs: Vec<PathBuf> = (0..2).map(|i| report_dir(&format!("agentic-shard{i}"))).collect();
    let configs: Vec<String> =
        (0..2).map(|i| plan(&format!("shard{i}"), &server.url(), &dirs[i])).collect();
    // A start four seconds ahead: both shards load, fork, connect and wait for it.
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let start_at = format!("{:.3}", now.as_secs_f64() + 4.0);
    let children: Vec<Child> =
        (0..2).map(|i| spawn_shard(&configs[i], i as u32, i == 1, &start_at)).collect();
    for (i, child) in children.into_iter().enumerate() {
        let out = crate::support::wait_output(child, "an agentic shard", Duration::from_secs(120));
        show(&out);
        assert_eq!(out.status.code(), Some(0), "shard {i} succeeds");
    }
    let merged = report_dir("agentic-merged");
    let out = bin().arg("merge").args(&dirs).args(["--out", merged.to_str().unwrap()]).output();
    let out = out.expect("merge runs");
    show(&out);
    server.stop();
    assert_eq!(out.status.code(), Some(0), "the merge succeeds");
    (single, dirs, merged)
}

/// Each shard ran every other conversation, whole, under the single run's ids.
fn check_shard_files(dirs: &[PathBuf]) {
    for (i, dir) in dirs.iter().enumerate() {
        let file = read_json(&dir.join("shard.json"));
        assert_eq!(
            (file["conversations"].as_u64(), file["plan_conversations"].as_u64()),
            (Some(6), Some(12))
        );
        assert_eq!(file["plan_samples"].as_u64(), Some(24));
        assert_eq!(file["conversation_turns"], serde_json::json!([3, 2, 1]));
        let (_, ids) = all_turns(&Window::read(dir));
        let want: BTreeSet<String> = (0..12)
            .filter(|k| k % 2 == i)
            .map(|k| match k / 3 {
                0 => format!("c{}", k % 3 + 1),
                pass => format!("c{}__repeat_{}", k % 3 + 1, pass + 1),
            })
            .collect();
        assert_eq!(ids, want, "shard {i}'s conversations");
    }
}

#[test]
fn two_agentic_shards_merge_into_the_single_host_runs_conversations() {
    let (single, dirs, merged) = single_shards_and_merged();
    check_shard_files(&dirs);
    // The merged log holds the single run's turns, conversation by conversation, each under
    // the single run's sample id and dataset row.
    let (one, many) = (Window::read(&single), Window::read(&merged));
    assert_eq!(all_turns(&many), all_turns(&one), "the same turns of the same conversations");
    assert_eq!((total_issued(&single), total_issued(&merged)), (24, 24));
    assert_eq!(idx_map(&merged), idx_map(&single), "the single run's samples, id for id");
    let by_id = |w: &Window| -> Vec<(String, u64)> {
        w.turns.iter().map(|t| (t.conversation.clone(), t.turn)).collect()
    };
    assert_eq!(by_id(&many), by_id(&one), "each id is the same conversation's same turn");
    // One conversation at a time per shard: each shard's window closed at its last finish, so
    // every turn is tracked, shard by shard and merged, and the merged per-turn counts and
    // conversations are the single run's every turn and conversation.
    let m = summary(&merged);
    assert_eq!(m["n_samples_issued"].as_u64(), Some(24));
    assert_eq!(by_turn(&m), all_turns(&one).0, "per-turn counts");
    let conversations = &m["agentic"]["conversations"];
    assert_eq!(
        (conversations["started"].as_u64(), conversations["completed"].as_u64()),
        (Some(12), Some(12))
    );
    let shards = m["shards"].as_array().expect("a shards section");
    let issued: u64 = shards.iter().map(|s| s["n_samples_issued"].as_u64().unwrap()).sum();
    assert_eq!(issued, 24);
    assert_eq!(by_turn(&m).values().sum::<u64>(), many.tracked().count() as u64);
    // The merged report is what `report OUT` rebuilds from the merged log, turn by turn.
    check_window_figures(&merged, &many, 24);
}
