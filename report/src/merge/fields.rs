//! What a shard's `shard.json` must hold, field by field: a run writes every field from a few
//! numbers (its shard, the plan's sample counts, its clock reading), so a field that disagrees
//! with the others, or with the other shards', was damaged, and merging it would put samples
//! under another shard's ids or years away on the timeline. Each refusal names the shard's
//! directory, the field and its value.

use std::path::Path;

use crate::{ShardFile, SHARD_FILE_FORMAT};
use loadgen_plan::error::AppError;
use loadgen_plan::plan::{sample_share, shard_seed, Shard, MAX_SHARDS};

/// The most the anchor reading's uncertainty may be: the narrowest of five brackets of two
/// back-to-back clock reads, microseconds at worst on a loaded host.
pub const ANCHOR_UNCERTAINTY_NS_MAX: u64 = 1_000_000_000;

/// How far a shard's start may lie after its `shard.json` was last written (the file's
/// modification time): the run writes the file after its start, and a copy only makes the
/// time later, so this slack covers only the copying host's clock being behind by this much.
pub const FILE_TIME_SLACK_NS: u64 = 86_400 * 1_000_000_000;

/// A shard as the checks see it: its directory (for messages), its `shard.json` and when that
/// file was last written (ns since the Unix epoch; `None` when the file system does not say).
#[derive(Debug, Clone, Copy)]
pub struct ShardView<'a> {
    pub dir: &'a Path,
    pub file: &'a ShardFile,
    pub written_unix_ns: Option<u64>,
}

/// The refusal of `field` of the shard in `dir`.
fn refuse(dir: &Path, field: &str, value: impl std::fmt::Display, why: &str) -> AppError {
    AppError::Input(format!(
        "{}: {field} is {value}: {why}; the file is damaged (a run writes it whole): rerun \
         the shard or restore its shard.json",
        dir.join("shard.json").display()
    ))
}

/// The fields everything else is sized or printed by: the format, the shard and its count
/// (at most `MAX_SHARDS`, as `--shard` takes), the plan hash. Checked before anything else.
pub fn check_bounds(v: &ShardView<'_>) -> Result<(), AppError> {
    let f = v.file;
    if f.format != SHARD_FILE_FORMAT {
        let why = format!("this build reads format {SHARD_FILE_FORMAT}");
        return Err(refuse(v.dir, "format", f.format, &why));
    }
    if f.count == 0 || u64::from(f.count) > MAX_SHARDS {
        let why = format!("a run has 1 to {MAX_SHARDS} shards (MAX_SHARDS)");
        return Err(refuse(v.dir, "count", f.count, &why));
    }
    if f.index >= f.count {
        let why = format!("a shard's index is below its count, {}", f.count);
        return Err(refuse(v.dir, "index", f.index, &why));
    }
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    if f.plan_hash.len() != 16 || !f.plan_hash.chars().all(hex) {
        let shown = format!("{:?}", f.plan_hash.chars().take(40).collect::<String>());
        return Err(refuse(v.dir, "plan_hash", shown, "a plan hash is 16 hex digits"));
    }
    Ok(())
}

/// The fields each shard derives from its shard and the plan, and those every shard shares.
/// The shards are checked for one count and one plan, and every index is there once.
pub fn check_derived(shards: &[ShardView<'_>]) -> Result<(), AppError> {
    let first = shards[0].file;
    for v in shards {
        for (field, value, want) in [
            ("plan_samples", v.file.plan_samples, first.plan_samples),
            ("plan_warmup_samples", v.file.plan_warmup_samples, first.plan_warmup_samples),
        ] {
            if value != want {
                let why = format!("shard {} of the same plan says {want}", first.index);
                return Err(refuse(v.dir, field, value, &why));
            }
        }
        check_shares(v)?;
        check_ids(v)?;
        check_seeds(v, first)?;
        check_clock(v)?;
    }
    check_agentic_turns(shards)
}

/// An agentic plan's shards: their turns add up to the plan's, once every shard is there
/// (each shard's own turns follow from its conversations, which `check_shares` checks).
fn check_agentic_turns(shards: &[ShardView<'_>]) -> Result<(), AppError> {
    let first = shards[0].file;
    if first.plan_conversations.is_none() || shards.len() != first.count as usize {
        return Ok(());
    }
    let turns: u64 = shards.iter().map(|v| v.file.samples).sum();
    if turns != first.plan_samples {
        let why =
            format!("the {} shards' samples add up to {turns}, not the plan's turns", shards.len());
        return Err(refuse(shards[0].dir, "plan_samples", first.plan_samples, &why));
    }
    Ok(())
}

/// A shard runs its share of the plan's samples and warm-up samples, as `--shard` splits them.
fn check_shares(v: &ShardView<'_>) -> Result<(), AppError> {
    let f = v.file;
    let shard = Shard { index: f.index, count: f.count };
    // An agentic shard runs every N-th conversation, each with all its turns: its share is
    // one of conversations, and its samples are those conversations' turns.
    let agentic = match (f.conversations, f.plan_conversations) {
        (Some(mine), Some(plan)) => Some((mine, plan)),
        (None, None) => None,
        _ => {
            let why = "conversations and plan_conversations come together";
            return Err(refuse(v.dir, "conversations", format!("{:?}", f.conversations), why));
        }
    };
    if let Some(Err(why)) = f.agentic_ids() {
        let shown = format!("{:?}", f.conversation_turns);
        return Err(refuse(v.dir, "conversation_turns", shown, &why));
    }
    if let Some((mine, plan)) = agentic {
        let share = sample_share(plan, shard);
        if mine != share {
            let why = format!(
                "shard {}/{}'s share of plan_conversations {plan} is {share}",
                f.index, f.count
            );
            return Err(refuse(v.dir, "conversations", mine, &why));
        }
    }
    for (field, value, plan, plan_field) in [
        ("samples", f.samples, f.plan_samples, "plan_samples"),
        ("warmup_samples", f.warmup_samples, f.plan_warmup_samples, "plan_warmup_samples"),
    ] {
        let share = sample_share(plan, shard);
        if value != share && !(agentic.is_some() && field == "samples") {
            let why =
                format!("shard {}/{}'s share of {plan_field} {plan} is {share}", f.index, f.count);
            return Err(refuse(v.dir, field, value, &why));
        }
    }
    Ok(())
}

/// `sample_ids` maps shard I's sample k onto the single-host run's id k·N + I: stride N,
/// offset I, so no two shards' ids meet; warm-up ids come first, tracked ones after them.
fn check_ids(v: &ShardView<'_>) -> Result<(), AppError> {
    let (f, ids) = (v.file, v.file.sample_ids);
    let checks = [
        ("sample_ids.stride", ids.stride, u64::from(f.count), "the shard count"),
        ("sample_ids.offset", ids.offset, u64::from(f.index), "the shard's index"),
        ("sample_ids.local_first", ids.local_first, f.warmup_samples, "its warmup_samples"),
        ("sample_ids.global_first", ids.global_first, f.plan_warmup_samples, "plan_warmup_samples"),
    ];
    for (field, value, want, what) in checks {
        if value != want {
            let why = format!(
                "it must be {what}, {want}, or this shard's samples take ids of another \
                 shard's"
            );
            return Err(refuse(v.dir, field, value, &why));
        }
    }
    Ok(())
}

/// The plan's seeds are the first shard's; a shard's own seeds are drawn from them.
fn check_seeds(v: &ShardView<'_>, first: &ShardFile) -> Result<(), AppError> {
    let (s, p) = (&v.file.seeds, &first.seeds);
    for (field, value, want) in [
        ("seeds.scheduler_random_seed", s.scheduler_random_seed, p.scheduler_random_seed),
        ("seeds.dataloader_random_seed", s.dataloader_random_seed, p.dataloader_random_seed),
        ("seeds.warmup_random_seed", s.warmup_random_seed, p.warmup_random_seed),
    ] {
        if value != want {
            let why = format!("shard {} of the same plan says {want}", first.index);
            return Err(refuse(v.dir, field, value, &why));
        }
    }
    let shard = Shard { index: v.file.index, count: v.file.count };
    for (field, value, plan) in [
        ("seeds.shard_scheduler_seed", s.shard_scheduler_seed, s.scheduler_random_seed),
        ("seeds.shard_warmup_seed", s.shard_warmup_seed, s.warmup_random_seed),
    ] {
        let want = shard_seed(plan, shard);
        if value.is_some_and(|v| v != want) {
            let why = format!("this shard draws {want} from the plan's seed {plan}");
            return Err(refuse(v.dir, field, value.unwrap_or_default(), &why));
        }
    }
    Ok(())
}

/// The clock fields agree: the anchor plus the monotonic start is the wall-clock start, the
/// start's offset is the start minus `--start-at`, and the start is no later than the file.
fn check_clock(v: &ShardView<'_>) -> Result<(), AppError> {
    let c = &v.file.clock;
    let start = c.wall_at_monotonic_zero_ns.checked_add(c.tracking_start_ns);
    if start != Some(c.tracking_start_unix_ns) {
        let why = format!(
            "with clock.tracking_start_ns {} it must give clock.tracking_start_unix_ns {}, \
             and gives {}",
            c.tracking_start_ns,
            c.tracking_start_unix_ns,
            start.map_or("more than a u64".to_string(), |s| s.to_string())
        );
        return Err(refuse(
            v.dir,
            "clock.wall_at_monotonic_zero_ns",
            c.wall_at_monotonic_zero_ns,
            &why,
        ));
    }
    if c.anchor_uncertainty_ns > ANCHOR_UNCERTAINTY_NS_MAX {
        let why =
            format!("no clock reading is that uncertain (at most {ANCHOR_UNCERTAINTY_NS_MAX})");
        return Err(refuse(v.dir, "clock.anchor_uncertainty_ns", c.anchor_uncertainty_ns, &why));
    }
    match (c.start_at_unix_ns, c.start_offset_ns) {
        (Some(at), Some(offset)) => {
            let want = i128::from(c.tracking_start_unix_ns) - i128::from(at);
            if i128::from(offset) != want {
                let why =
                    format!("it is clock.tracking_start_unix_ns minus start_at_unix_ns, {want}");
                return Err(refuse(v.dir, "clock.start_offset_ns", offset, &why));
            }
        }
        (None, None) => {}
        (at, offset) => {
            let why =
                "clock.start_at_unix_ns and clock.start_offset_ns come together or not at all";
            let value = format!("{offset:?} beside start_at_unix_ns {at:?}");
            return Err(refuse(v.dir, "clock.start_offset_ns", value, why));
        }
    }
    if let Some(written) = v.written_unix_ns {
        if c.tracking_start_unix_ns > written.saturating_add(FILE_TIME_SLACK_NS) {
            let why = format!(
                "the shard would have started {:.1} days after its shard.json was written \
                 (modified at {written} ns since the epoch)",
                (c.tracking_start_unix_ns - written) as f64 / 86_400e9
            );
            return Err(refuse(
                v.dir,
                "clock.tracking_start_unix_ns",
                c.tracking_start_unix_ns,
                &why,
            ));
        }
    }
    Ok(())
}
