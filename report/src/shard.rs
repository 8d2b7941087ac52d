//! `shard.json`, what a shard of a run from several hosts writes beside its report for
//! `llm-loadgen merge`, and the `shards` section of a merged result_summary.json.
//! docs/OUTPUT.md describes both.

use serde::{Deserialize, Serialize};

/// `shard.json`'s `format`: bumped when a key changes meaning.
pub const SHARD_FILE_FORMAT: u32 = 1;

/// A shard's `shard.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardFile {
    pub format: u32,
    /// This shard: `index` of `count`.
    pub index: u32,
    pub count: u32,
    /// Where the shard setting came from (`--shard`, Slurm's variables, an Indexed Job's).
    pub origin: String,
    /// Equal across the shards of one plan and its seeds (`plan::plan_hash`).
    pub plan_hash: String,
    /// The whole plan's performance and warm-up samples, and this shard's share of them.
    pub plan_samples: u64,
    pub plan_warmup_samples: u64,
    pub samples: u64,
    pub warmup_samples: u64,
    /// How this shard's sample ids map onto the single-host run's (`ShardFile::global_id`).
    pub sample_ids: SampleIds,
    pub seeds: ShardSeeds,
    pub clock: ShardClock,
    /// An agentic run's conversation instances: this shard's (every `count`-th of the plan's
    /// from `index`) and the whole plan's; absent from other runs' files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan_conversations: Option<u64>,
    /// An agentic run's dataset conversations' client turns, in dataset order: instance k
    /// runs conversation k mod their count, so they place each of this shard's turns at its
    /// single-host id (`ShardFile::agentic_ids`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation_turns: Option<Vec<u64>>,
}

impl ShardFile {
    /// An agentic shard's local sample id → the single-host run's, where sample s is the
    /// single-host row s: the instances lie turn after turn in their order, this shard's
    /// every `count`-th from `index`. `None` for another run, or when the file's conversations
    /// do not add up (`Err` then says how).
    pub fn agentic_ids(&self) -> Option<Result<Vec<u64>, String>> {
        let turns = self.conversation_turns.as_ref()?;
        let instances = self.plan_conversations?;
        if turns.is_empty() || turns.contains(&0) {
            return Some(Err("a conversation without a client turn".into()));
        }
        let turns_of = |k: u64| turns[(k % turns.len() as u64) as usize];
        let plan: u64 = (0..instances).map(turns_of).sum();
        if plan != self.plan_samples {
            return Some(Err(format!("its conversations make {plan} turns, not plan_samples")));
        }
        let mut ids = Vec::with_capacity(usize::try_from(self.samples).unwrap_or(0));
        let mut first = 0u64;
        for k in 0..instances {
            if k % u64::from(self.count) == u64::from(self.index) {
                ids.extend(first..first + turns_of(k));
            }
            first += turns_of(k);
        }
        if ids.len() as u64 != self.samples {
            return Some(Err(format!("its conversations make {} turns here", ids.len())));
        }
        Some(Ok(ids))
    }
}

/// Local sample id → global: a warm-up id `w` (below `local_first`) is `w * stride +
/// offset`; a tracked id `t` is `global_first + (t - local_first) * stride + offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleIds {
    pub local_first: u64,
    pub global_first: u64,
    pub stride: u64,
    pub offset: u64,
}

impl SampleIds {
    /// The single-host run's id of this shard's sample `local`.
    pub fn global_id(&self, local: u64) -> u64 {
        if local < self.local_first {
            local * self.stride + self.offset
        } else {
            self.global_first + (local - self.local_first) * self.stride + self.offset
        }
    }
}

/// The plan's seeds, and the ones this shard drew its Poisson gaps from (`null` when the
/// pattern has none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardSeeds {
    pub scheduler_random_seed: u64,
    pub shard_scheduler_seed: Option<u64>,
    pub dataloader_random_seed: u64,
    pub warmup_random_seed: u64,
    pub shard_warmup_seed: Option<u64>,
}

/// The shard's clocks: its CLOCK_MONOTONIC stamps (those of events.jsonl) plus
/// `wall_at_monotonic_zero_ns` are wall-clock ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardClock {
    pub wall_at_monotonic_zero_ns: u64,
    /// How far the anchor may be off (half the bracket of its reading), ns.
    pub anchor_uncertainty_ns: u64,
    /// The performance phase's start: monotonic and wall-clock ns.
    pub tracking_start_ns: u64,
    pub tracking_start_unix_ns: u64,
    /// `--start-at` in Unix ns, and tracking's start minus it (late > 0).
    pub start_at_unix_ns: Option<u64>,
    pub start_offset_ns: Option<i64>,
}

/// A shard of a merged report: `shards` in its result_summary.json, in shard order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardInfo {
    pub index: u32,
    /// The shard's report directory, as given to `merge`.
    pub report_dir: String,
    pub n_samples_issued: u64,
    pub n_samples_completed: u64,
    pub n_samples_failed: u64,
    pub n_samples_abandoned: u64,
    /// Failed samples per failure kind, in the shard's own order.
    pub failure_kinds: FailureCounts,
    /// Tracking's start minus `--start-at` (`null` without one), and minus the earliest
    /// shard's start, ns.
    pub start_offset_ns: Option<i64>,
    pub start_skew_ns: u64,
    /// What was added to the shard's timestamps to put them on the merged timeline, ns.
    pub clock_shift_ns: u64,
    pub anchor_uncertainty_ns: u64,
    /// The shard's scheduler issue lag (Poisson), which cannot be merged exactly.
    pub issue_lag_p99_ns: Option<u64>,
    pub issue_lag_max_ns: Option<u64>,
}

/// `{kind: count}` in first-seen order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FailureCounts(pub Vec<(String, u64)>);

impl Serialize for FailureCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

/// The `shard.json` of a sharded plan's run, from the clocks the run read; `None` when the
/// plan is not sharded.
pub fn shard_file(
    plan: &loadgen_plan::plan::Plan,
    clock: &loadgen_coordinator::schedule::ClockAnchor,
) -> Option<ShardFile> {
    let sp = plan.shard.as_ref()?;
    let s = sp.shard;
    let warmup_samples = loadgen_plan::plan::sample_share(sp.plan_warmup_samples, s);
    Some(ShardFile {
        format: SHARD_FILE_FORMAT,
        index: s.index,
        count: s.count,
        origin: sp.origin.clone(),
        plan_hash: sp.plan_hash.clone(),
        plan_samples: sp.plan_samples,
        plan_warmup_samples: sp.plan_warmup_samples,
        samples: plan.num_samples,
        warmup_samples,
        sample_ids: SampleIds {
            local_first: warmup_samples,
            global_first: sp.plan_warmup_samples,
            stride: u64::from(s.count),
            offset: u64::from(s.index),
        },
        seeds: ShardSeeds {
            scheduler_random_seed: sp.scheduler_seed,
            shard_scheduler_seed: sp.shard_scheduler_seed,
            dataloader_random_seed: plan.dataloader_seed,
            warmup_random_seed: sp.warmup_seed,
            shard_warmup_seed: sp.shard_warmup_seed,
        },
        clock: ShardClock {
            wall_at_monotonic_zero_ns: clock.wall_at_monotonic_zero_ns,
            anchor_uncertainty_ns: clock.uncertainty_ns,
            tracking_start_ns: clock.tracking_start_ns,
            tracking_start_unix_ns: clock.wall_at_monotonic_zero_ns + clock.tracking_start_ns,
            start_at_unix_ns: plan.start_at_unix_ns,
            start_offset_ns: clock.start_offset_ns,
        },
        conversations: plan.agentic.as_ref().map(|a| a.instances.len() as u64),
        plan_conversations: plan.agentic.as_ref().map(|a| a.plan_conversations),
        conversation_turns: plan
            .agentic
            .as_ref()
            .map(|a| a.source.conversations.iter().map(|c| c.turns.len() as u64).collect()),
    })
}

/// A shard whose performance phase started this late against `--start-at` gets a warning:
/// the others did not wait for it, and a merge may refuse the skew.
pub const START_LATE_WARNING_NS: i64 = 10_000_000;

/// The warning for a start `start_offset_ns` late against `--start-at`, if it was late.
pub fn late_start_warning(start_offset_ns: Option<i64>) -> Option<String> {
    let offset = start_offset_ns?;
    (offset > START_LATE_WARNING_NS).then(|| {
        format!(
            "warning: --start-at had passed when this shard was connected and warmed up: its \
             performance phase started {:.1} ms late; give a later --start-at",
            offset as f64 / 1e6
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agentic_shard_s_turns_map_onto_the_single_host_rows_of_its_conversations() {
        // Conversations of 3, 2 and 1 client turns, 5 instances (rows 0-2, 3-4, 5, 6-8, 9-10)
        // over 2 shards: shard 0 runs instances 0, 2, 4; shard 1 instances 1, 3.
        let file = |index: u32, samples: u64| {
            let json = serde_json::json!({
                "format": 1, "index": index, "count": 2, "origin": "--shard",
                "plan_hash": "00000000000000aa", "plan_samples": 11, "plan_warmup_samples": 0,
                "samples": samples, "warmup_samples": 0,
                "sample_ids": {"local_first": 0, "global_first": 0, "stride": 2, "offset": index},
                "seeds": {"scheduler_random_seed": 1, "shard_scheduler_seed": null,
                    "dataloader_random_seed": 1, "warmup_random_seed": 1,
                    "shard_warmup_seed": null},
                "clock": {"wall_at_monotonic_zero_ns": 0, "anchor_uncertainty_ns": 0,
                    "tracking_start_ns": 0, "tracking_start_unix_ns": 0,
                    "start_at_unix_ns": null, "start_offset_ns": null},
                "conversations": 3 - index, "plan_conversations": 5,
                "conversation_turns": [3, 2, 1],
            });
            serde_json::from_value::<ShardFile>(json).expect("a shard file")
        };
        assert_eq!(file(0, 6).agentic_ids(), Some(Ok(vec![0, 1, 2, 5, 9, 10])));
        assert_eq!(file(1, 5).agentic_ids(), Some(Ok(vec![3, 4, 6, 7, 8])));
        assert!(file(1, 4).agentic_ids().is_some_and(|r| r.is_err()), "a damaged count");
        let mut other = file(0, 6);
        other.conversation_turns = None;
        assert_eq!(other.agentic_ids(), None, "not an agentic shard");
    }

    #[test]
    fn local_ids_of_every_shard_map_onto_the_single_host_ids_once_each() {
        // A plan of 5 warm-up and 11 tracked samples over 3 shards: single-host ids 0..16.
        let (warmup, tracked, count) = (5u64, 11u64, 3u64);
        let mut seen = Vec::new();
        for offset in 0..count {
            let w = loadgen_plan::plan::sample_share(warmup, shard(offset, count));
            let t = loadgen_plan::plan::sample_share(tracked, shard(offset, count));
            let ids = SampleIds { local_first: w, global_first: warmup, stride: count, offset };
            for local in 0..w {
                let g = ids.global_id(local);
                assert!(g < warmup, "warm-up {local} of shard {offset} → {g}");
                seen.push(g);
            }
            for local in w..w + t {
                let g = ids.global_id(local);
                assert!(g >= warmup, "tracked {local} of shard {offset} → {g}");
                assert_eq!((g - warmup) % count, offset, "every count-th from the offset");
                seen.push(g);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..warmup + tracked).collect::<Vec<_>>());
    }

    fn shard(index: u64, count: u64) -> loadgen_plan::plan::Shard {
        loadgen_plan::plan::Shard { index: index as u32, count: count as u32 }
    }

    #[test]
    fn a_late_start_is_warned_about_and_an_early_one_is_not() {
        let mut clock = ShardClock {
            wall_at_monotonic_zero_ns: 1,
            anchor_uncertainty_ns: 0,
            tracking_start_ns: 2,
            tracking_start_unix_ns: 3,
            start_at_unix_ns: Some(3),
            start_offset_ns: Some(START_LATE_WARNING_NS + 1_000_000),
        };
        let warning = late_start_warning(clock.start_offset_ns).expect("late");
        assert!(warning.contains("11.0 ms late"), "{warning}");
        clock.start_offset_ns = Some(200_000);
        assert_eq!(late_start_warning(clock.start_offset_ns), None);
        clock.start_offset_ns = None;
        assert_eq!(late_start_warning(clock.start_offset_ns), None);
    }
}
