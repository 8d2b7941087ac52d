//! What `merge` refuses, as pure functions over the shards' `shard.json`: a damaged field
//! (`fields`), shards of other plans or seeds, other shard counts, a shard given twice, a
//! missing shard, and starts further apart than `--max-skew-ms`. And the common timeline the
//! merge puts them on.

use std::path::Path;

use super::fields::{self, ShardView};
use loadgen_plan::error::AppError;

/// The merged timeline: what each shard's monotonic stamps get added to land on the
/// earliest-anchored shard's clock, and how far each shard's start lies after the first's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    /// Per shard, in the order given.
    pub shifts_ns: Vec<u64>,
    pub start_skew_ns: Vec<u64>,
    /// The largest start skew (the last start minus the first), ns.
    pub skew_ns: u64,
}

/// Checks the shards and returns their timeline. Errors name the directories at fault.
pub fn check_shards(shards: &[ShardView<'_>], max_skew_ns: u64) -> Result<Timeline, AppError> {
    let Some(first) = shards.first() else {
        return Err(AppError::Usage("merge needs at least one shard directory".into()));
    };
    for s in shards {
        fields::check_bounds(s)?;
    }
    for s in shards {
        if s.file.count != first.file.count {
            return Err(AppError::Input(format!(
                "{} is shard {}/{} but {} is shard {}/{}: give the shards of one run",
                first.dir.display(),
                first.file.index,
                first.file.count,
                s.dir.display(),
                s.file.index,
                s.file.count
            )));
        }
        if s.file.plan_hash != first.file.plan_hash {
            return Err(AppError::Input(format!(
                "{} (plan hash {}) and {} (plan hash {}) are shards of different plans or \
                 seeds: give the shards of one run, launched with one configuration",
                first.dir.display(),
                first.file.plan_hash,
                s.dir.display(),
                s.file.plan_hash
            )));
        }
    }
    check_indices(shards)?;
    let timeline = timeline(shards);
    if timeline.skew_ns > max_skew_ns {
        let (late, _) =
            timeline.start_skew_ns.iter().enumerate().max_by_key(|(_, s)| **s).unwrap_or((0, &0));
        return Err(AppError::Input(format!(
            "the shards started {:.1} ms apart ({} last), more than --max-skew-ms {}: start \
             them together with one --start-at, or raise --max-skew-ms",
            timeline.skew_ns as f64 / 1e6,
            shards[late].dir.display(),
            max_skew_ns / 1_000_000
        )));
    }
    fields::check_derived(shards)?;
    Ok(timeline)
}

/// Every index 0..N once.
fn check_indices(shards: &[ShardView<'_>]) -> Result<(), AppError> {
    let count = shards[0].file.count;
    let mut seen: Vec<Option<&Path>> = vec![None; count as usize];
    for s in shards {
        let Some(slot) = seen.get_mut(s.file.index as usize) else {
            return Err(AppError::Input(format!(
                "{} is shard {} of {count}, out of range: its shard.json is damaged",
                s.dir.display(),
                s.file.index
            )));
        };
        if let Some(other) = slot {
            return Err(AppError::Input(format!(
                "{} and {} are both shard {}/{count}: give each shard's directory once",
                other.display(),
                s.dir.display(),
                s.file.index
            )));
        }
        *slot = Some(s.dir);
    }
    let missing: Vec<u32> = (0..count).filter(|&i| seen[i as usize].is_none()).collect();
    if !missing.is_empty() {
        // A few are named; thousands would bury the message.
        const NAMED: usize = 8;
        let mut named: Vec<String> =
            missing.iter().take(NAMED).map(|i| format!("{i}/{count}")).collect();
        if missing.len() > NAMED {
            named.push(format!("and {} more", missing.len() - NAMED));
        }
        return Err(AppError::Input(format!(
            "shard {} missing: a merge needs every shard's report directory",
            named.join(", ")
        )));
    }
    Ok(())
}

/// The shifts onto the earliest anchor's clock (so none is negative) and the start skews.
fn timeline(shards: &[ShardView<'_>]) -> Timeline {
    let anchor = |s: &ShardView<'_>| s.file.clock.wall_at_monotonic_zero_ns;
    let base = shards.iter().map(anchor).min().unwrap_or(0);
    let start = |s: &ShardView<'_>| s.file.clock.tracking_start_unix_ns;
    let first_start = shards.iter().map(start).min().unwrap_or(0);
    let start_skew_ns: Vec<u64> = shards.iter().map(|s| start(s) - first_start).collect();
    Timeline {
        shifts_ns: shards.iter().map(|s| anchor(s) - base).collect(),
        skew_ns: start_skew_ns.iter().copied().max().unwrap_or(0),
        start_skew_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::{ShardClock, ShardSeeds};
    use crate::{SampleIds, ShardFile, SHARD_FILE_FORMAT};
    use std::path::PathBuf;

    fn file(index: u32, count: u32, anchor: u64, start: u64) -> ShardFile {
        ShardFile {
            format: SHARD_FILE_FORMAT,
            index,
            count,
            origin: "--shard".into(),
            plan_hash: "00000000000000aa".into(),
            plan_samples: 10,
            plan_warmup_samples: 0,
            samples: 5,
            warmup_samples: 0,
            sample_ids: SampleIds {
                local_first: 0,
                global_first: 0,
                stride: u64::from(count),
                offset: u64::from(index),
            },
            seeds: ShardSeeds {
                scheduler_random_seed: 42,
                shard_scheduler_seed: None,
                dataloader_random_seed: 42,
                warmup_random_seed: 42,
                shard_warmup_seed: None,
            },
            clock: ShardClock {
                wall_at_monotonic_zero_ns: anchor,
                anchor_uncertainty_ns: 100,
                tracking_start_ns: start - anchor,
                tracking_start_unix_ns: start,
                start_at_unix_ns: None,
                start_offset_ns: None,
            },
            conversations: None,
            plan_conversations: None,
            conversation_turns: None,
        }
    }

    fn check(files: &[ShardFile], max_skew_ns: u64) -> Result<Timeline, String> {
        check_written(files, max_skew_ns, None)
    }

    /// `check`, each shard.json written at `written_unix_ns`.
    fn check_written(
        files: &[ShardFile],
        max_skew_ns: u64,
        written_unix_ns: Option<u64>,
    ) -> Result<Timeline, String> {
        let dirs: Vec<PathBuf> =
            (0..files.len()).map(|i| PathBuf::from(format!("dir{i}"))).collect();
        let views: Vec<ShardView<'_>> = dirs
            .iter()
            .zip(files)
            .map(|(dir, file)| ShardView { dir, file, written_unix_ns })
            .collect();
        check_shards(&views, max_skew_ns).map_err(|e| {
            assert_eq!(e.exit_code(), 2, "{e}");
            e.to_string()
        })
    }

    #[test]
    fn shards_are_shifted_onto_the_earliest_anchor_and_their_skew_measured() {
        let t = check(&[file(1, 2, 5_000, 9_000_300), file(0, 2, 2_000, 9_000_000)], 1_000)
            .expect("accepted");
        assert_eq!(t.shifts_ns, [3_000, 0]);
        assert_eq!(t.start_skew_ns, [300, 0]);
        assert_eq!(t.skew_ns, 300);
    }

    #[test]
    fn other_plans_duplicates_missing_shards_and_skew_are_refused_naming_them() {
        let mut other = file(1, 2, 0, 10);
        other.plan_hash = "00000000000000bb".into();
        let err = check(&[file(0, 2, 0, 10), other], 1_000).unwrap_err();
        assert!(err.contains("dir0 (plan hash 00000000000000aa)") && err.contains("dir1"), "{err}");
        assert!(err.contains("different plans or seeds"), "{err}");

        let err = check(&[file(0, 2, 0, 10), file(0, 2, 0, 10)], 1_000).unwrap_err();
        assert!(err.contains("dir0 and dir1 are both shard 0/2"), "{err}");

        let err = check(&[file(0, 3, 0, 10), file(2, 3, 0, 10)], 1_000).unwrap_err();
        assert!(err.contains("shard 1/3 missing"), "{err}");

        let err = check(&[file(0, 2, 0, 10), file(1, 3, 0, 10)], 1_000).unwrap_err();
        assert!(err.contains("shard 0/2") && err.contains("shard 1/3"), "{err}");

        let err = check(&[file(0, 2, 0, 10), file(1, 2, 0, 60_000_010)], 50_000_000).unwrap_err();
        assert!(
            err.contains("60.0 ms apart (dir1 last)") && err.contains("--max-skew-ms 50"),
            "{err}"
        );
        assert!(check(&[file(0, 2, 0, 10), file(1, 2, 0, 50_000_010)], 50_000_000).is_ok());
    }

    #[test]
    fn a_damaged_shard_json_is_refused_naming_the_directory_the_field_and_the_value() {
        let ok = || [file(0, 2, 1_000, 5_000), file(1, 2, 2_000, 5_100)];
        assert!(check(&ok(), 1_000).is_ok());
        type Damage = fn(&mut ShardFile);
        let cases: [(Damage, &str); 10] = [
            (|f| f.count = 4097, "count is 4097: a run has 1 to 4096 shards"),
            (|f| f.index = 7, "index is 7"),
            (|f| f.sample_ids.offset = 0, "sample_ids.offset is 0"),
            (|f| f.sample_ids.global_first = 3, "sample_ids.global_first is 3"),
            (|f| f.samples = 6, "samples is 6: shard 1/2's share of plan_samples 10 is 5"),
            (|f| f.seeds.shard_scheduler_seed = Some(1), "seeds.shard_scheduler_seed is 1"),
            (|f| f.seeds.dataloader_random_seed = 1, "seeds.dataloader_random_seed is 1"),
            (|f| f.clock.wall_at_monotonic_zero_ns = 0, "clock.wall_at_monotonic_zero_ns is 0"),
            (|f| f.clock.anchor_uncertainty_ns = u64::MAX, "anchor_uncertainty_ns is 1844"),
            (|f| f.clock.start_offset_ns = Some(1), "start_offset_ns is Some(1)"),
        ];
        for (damage, what) in cases {
            let mut files = ok();
            damage(&mut files[1]);
            let err = check(&files, 1_000).unwrap_err();
            assert!(err.contains("dir1/shard.json: ") && err.contains(what), "{what}: {err}");
        }
        // An anchor so large that the start overflows, though both shards agree on the start.
        let mut files = ok();
        files[1].clock.wall_at_monotonic_zero_ns = u64::MAX;
        let err = check(&files, 1_000).unwrap_err();
        assert!(err.contains("gives more than a u64"), "{err}");
    }

    #[test]
    fn a_start_later_than_the_shard_json_was_written_is_refused() {
        let day = 86_400_000_000_000;
        let files = [file(0, 2, 1_000, 3 * day), file(1, 2, 2_000, 3 * day + 100)];
        assert!(check_written(&files, 1_000, Some(3 * day)).is_ok(), "written after its start");
        assert!(check_written(&files, 1_000, Some(2 * day + 200)).is_ok(), "a clock a day behind");
        let err = check_written(&files, 1_000, Some(day)).unwrap_err();
        assert!(err.contains("dir0/shard.json: clock.tracking_start_unix_ns is"), "{err}");
        assert!(err.contains("2.0 days after its shard.json was written"), "{err}");
    }
}
