//! Shards: one benchmark driven from several client hosts. Which share of the plan this
//! process runs (`--shard I/N`, Slurm's or a Kubernetes Indexed Job's variables), the split
//! itself as pure functions, the common start (`--start-at`) and the plan hash the merge
//! checks.
//!
//! Shard I of N issues every N-th sample of the single-host order (sample k when
//! k mod N = I), at target QPS / N (a superposition of independent Poisson processes is
//! Poisson at the summed rate), with floor(C/N) + (I < C mod N) of a concurrency C; so the
//! union of the shards is the single-host run's sample set, and `llm-loadgen merge` lines
//! the samples up by their global index.

use std::time::{SystemTime, UNIX_EPOCH};

use loadgen_coordinator::order::SplitMix64;
use loadgen_coordinator::LoadPattern;

use super::split_share;
use crate::error::AppError;
pub use crate::yaml::ShardArgs;

/// This process's share of a sharded run: shard `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// Shards a run may have at most (a named limit: a merge opens one log per shard).
pub const MAX_SHARDS: u64 = 4096;

/// A start time this far in the past when the plan is resolved is refused: the launcher
/// computed it too early, and the shards could not start together.
pub const START_AT_PAST_TOLERANCE_NS: u64 = 100_000_000;

/// The furthest ahead `--start-at` may be (24 h): shards start minutes ahead and a run
/// scheduled for the night hours ahead; a time further off is a mistake (a wrong year or
/// date), refused rather than waited for in silence.
pub const START_AT_HORIZON_NS: u64 = 24 * 3600 * 1_000_000_000;

/// Where the shard setting came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    shard: Shard,
    origin: String,
}

/// The resolved shard of a run: which one, from where, and when the shards start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardPlan {
    pub shard: Shard,
    /// `--shard`, `SLURM_PROCID/SLURM_NTASKS` or `JOB_COMPLETION_INDEX`.
    pub origin: String,
    /// Equal across the shards of one plan (`plan_hash`); set once config.yaml is final.
    pub plan_hash: String,
    /// The samples of the whole plan's performance phase (this shard issues its share).
    pub plan_samples: u64,
    /// The warm-up samples of the whole plan (the global sample ids start after them).
    pub plan_warmup_samples: u64,
    /// The plan's seeds as given, and the ones this shard drew its Poisson gaps from.
    pub scheduler_seed: u64,
    pub shard_scheduler_seed: Option<u64>,
    pub warmup_seed: u64,
    pub shard_warmup_seed: Option<u64>,
}

/// Parses `I/N`.
fn parse_pair(text: &str, origin: &str) -> Result<Shard, AppError> {
    let bad = || {
        AppError::Input(format!(
            "{origin} {text:?} is not I/N (shard index / shard count, e.g. 0/4)"
        ))
    };
    let (i, n) = text.trim().split_once('/').ok_or_else(bad)?;
    let index: u64 = i.trim().parse().map_err(|_| bad())?;
    let count: u64 = n.trim().parse().map_err(|_| bad())?;
    check_shard(index, count, origin)
}

/// N ≥ 1, N ≤ `MAX_SHARDS`, I < N.
fn check_shard(index: u64, count: u64, origin: &str) -> Result<Shard, AppError> {
    if count == 0 || count > MAX_SHARDS {
        return Err(AppError::Input(format!(
            "{origin}: a shard count of {count} is out of range; give 1 to {MAX_SHARDS} shards"
        )));
    }
    if index >= count {
        return Err(AppError::Input(format!(
            "{origin}: shard index {index} is not below the shard count {count}; shards are \
             numbered 0 to {}",
            count - 1
        )));
    }
    Ok(Shard { index: index as u32, count: count as u32 })
}

fn env_number(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Result<Option<u64>, AppError> {
    match env(name) {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| {
            AppError::Input(format!("{name}={v:?} is not a whole number; unset it or fix it"))
        }),
    }
}

/// The shard count from `--shards` or `LOADGEN_SHARDS` (the flag wins).
fn shard_count(
    args: &ShardArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<(u64, &'static str)>, AppError> {
    if let Some(n) = args.shards {
        return Ok(Some((n, "--shards")));
    }
    Ok(env_number(env, "LOADGEN_SHARDS")?.map(|n| (n, "LOADGEN_SHARDS")))
}

/// The shards the engines' variables say: Slurm's task id and count, a Kubernetes Indexed
/// Job's completion index with the count of `--shards` / `LOADGEN_SHARDS`.
fn engine_shards(
    args: &ShardArgs,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Found>, AppError> {
    let mut found = Vec::new();
    let count = shard_count(args, env)?;
    let procid = env_number(env, "SLURM_PROCID")?;
    let ntasks = env_number(env, "SLURM_NTASKS")?;
    if let (Some(i), Some(n)) = (procid, ntasks) {
        let origin = format!("SLURM_PROCID/SLURM_NTASKS ({i}/{n})");
        if let Some((c, from)) = count.filter(|(c, _)| *c != n) {
            return Err(AppError::Input(format!(
                "{from} {c} and {origin} disagree on the shard count; drop {from} or run \
                 under srun with {c} tasks"
            )));
        }
        found.push(Found { shard: check_shard(i, n, &origin)?, origin });
    }
    if let Some(i) = env_number(env, "JOB_COMPLETION_INDEX")? {
        let Some((n, from)) = count else {
            return Err(AppError::Input(format!(
                "JOB_COMPLETION_INDEX={i} is set but no shard count is: pass --shards N or set \
                 LOADGEN_SHARDS to the Job's completions (or --shard I/N to say it outright)"
            )));
        };
        let origin = format!("JOB_COMPLETION_INDEX with {from} ({i}/{n})");
        found.push(Found { shard: check_shard(i, n, &origin)?, origin });
    }
    Ok(found)
}

/// Resolves the shard: `--shard I/N` wins over the engines' variables (a note says which it
/// overrode, in `notes`); two engines that disagree are refused naming both; `--shards` needs
/// an index. `None`: not sharded.
fn resolve_found(
    args: &ShardArgs,
    env: &dyn Fn(&str) -> Option<String>,
    notes: &mut Vec<String>,
) -> Result<Option<Found>, AppError> {
    let engines = engine_shards(args, env);
    if let Some(text) = &args.shard {
        let shard = parse_pair(text, "--shard")?;
        if let Some((n, from)) = args.shards.map(|n| (n, "--shards")) {
            if n != u64::from(shard.count) {
                return Err(AppError::Input(format!(
                    "--shard {text} and {from} {n} disagree on the shard count; give one of them"
                )));
            }
        }
        if let Ok(found) = engines {
            for f in found.iter().filter(|f| f.shard != shard) {
                notes.push(format!("note: --shard {text} overrides {}", f.origin));
            }
        }
        return Ok(Some(Found { shard, origin: "--shard".to_string() }));
    }
    let found = engines?;
    match found.as_slice() {
        [] => match shard_count(args, env)? {
            Some((n, from)) => Err(AppError::Input(format!(
                "{from} {n} gives the shard count but nothing gives this shard's index: pass \
                 --shard I/{n}, or run under srun (SLURM_PROCID) or an Indexed Job \
                 (JOB_COMPLETION_INDEX)"
            ))),
            None => Ok(None),
        },
        [one] => Ok(Some(one.clone())),
        [a, b, ..] if a.shard != b.shard => Err(AppError::Input(format!(
            "{} and {} name different shards; pass --shard I/N to say which this is",
            a.origin, b.origin
        ))),
        [a, ..] => Ok(Some(a.clone())),
    }
}

/// A resolved shard and where it came from (`--shard`, the engine's variables).
pub type ShardOrigin = (Shard, String);

/// The shard of a run and its start, from the flags and the environment; `None` when the run
/// is not sharded (a `--start-at` alone still sets a start: one host may wait for a time too).
pub fn resolve_shard(
    args: &ShardArgs,
    env: &dyn Fn(&str) -> Option<String>,
    now_unix_ns: u64,
    notes: &mut Vec<String>,
) -> Result<(Option<ShardOrigin>, Option<u64>), AppError> {
    let found = resolve_found(args, env, notes)?;
    let start_at = match &args.start_at {
        Some(text) => Some(check_start_at(parse_time(text)?, text, now_unix_ns)?),
        None => None,
    };
    Ok((found.map(|f| (f.shard, f.origin)), start_at))
}

/// The shard's plan: what shard.json records of it. `samples` is the whole plan's
/// (performance, warm-up), `seeds` its (scheduler, warm-up) seeds, `pattern` the shard's own.
pub fn shard_plan(
    (shard, origin): ShardOrigin,
    config_yaml: &str,
    (plan_samples, plan_warmup_samples): (u64, u64),
    (scheduler_seed, warmup_seed): (u64, u64),
    pattern: LoadPattern,
) -> ShardPlan {
    let poisson = matches!(pattern, LoadPattern::Poisson { .. });
    ShardPlan {
        shard,
        origin,
        plan_hash: plan_hash(config_yaml, shard.count),
        plan_samples,
        plan_warmup_samples,
        scheduler_seed,
        shard_scheduler_seed: match pattern {
            LoadPattern::Poisson { seed, .. } => Some(seed),
            _ => None,
        },
        warmup_seed,
        shard_warmup_seed: poisson.then(|| shard_seed(warmup_seed, shard)),
    }
}

/// Refuses a start already past by more than `START_AT_PAST_TOLERANCE_NS`, or further ahead
/// than `START_AT_HORIZON_NS`.
fn check_start_at(at_ns: u128, text: &str, now_ns: u64) -> Result<u64, AppError> {
    let now = u128::from(now_ns);
    if now > at_ns + u128::from(START_AT_PAST_TOLERANCE_NS) {
        let late_s = (now - at_ns) as f64 / 1e9;
        return Err(AppError::Input(format!(
            "--start-at {text} is {late_s:.3} s in the past; give a time far enough ahead for \
             every shard to start and connect (e.g. $(( $(date +%s) + 30 )))"
        )));
    }
    let ahead_ns = at_ns.saturating_sub(now);
    if ahead_ns > u128::from(START_AT_HORIZON_NS) {
        return Err(AppError::Input(format!(
            "--start-at {text} is {} ahead; a run waits at most 24 h for its start \
             (START_AT_HORIZON_NS): give a nearer time, or start the run later",
            wait_text(ahead_ns)
        )));
    }
    // Within the horizon of a u64 `now`, so it fits.
    Ok(u64::try_from(at_ns).unwrap_or(u64::MAX))
}

/// A wait as people read it: `45.0 s`, `12 min 05 s`, `3 h 04 min`, `3652 days`.
fn wait_text(ns: u128) -> String {
    let secs = ns / 1_000_000_000;
    match secs {
        0..60 => format!("{:.1} s", ns as f64 / 1e9),
        60..3600 => format!("{} min {:02} s", secs / 60, secs % 60),
        3600..172_800 => format!("{} h {:02} min", secs / 3600, secs % 3600 / 60),
        _ => format!("{} days", secs / 86_400),
    }
}

/// The line a run prints on stderr before it waits for `--start-at`: when, and how long
/// from now; `None` without a start or once it has passed.
pub fn start_wait_line(start_at_unix_ns: Option<u64>, now_ns: u64) -> Option<String> {
    let at = start_at_unix_ns.filter(|&at| at > now_ns)?;
    Some(format!(
        "--start-at: the performance phase starts at {}.{:09} (Unix s), in {}, after the \
         workers connect and the warm-up; Ctrl-C ends the wait",
        at / 1_000_000_000,
        at % 1_000_000_000,
        wait_text(u128::from(at - now_ns))
    ))
}

/// The wall clock now, in Unix ns.
pub fn unix_now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Parses `--start-at`: Unix seconds (`1767225600`, `1767225600.25`) or RFC 3339
/// (`2026-12-01T18:00:00Z`, `2026-12-01T19:00:00.5+01:00`). Returns Unix ns, as u128 so
/// that every valid time parses (year 9999 is past u64 ns); `check_start_at` bounds it.
pub fn parse_time(text: &str) -> Result<u128, AppError> {
    let t = text.trim();
    let bad = || {
        AppError::Input(format!(
            "--start-at {text:?} is neither Unix seconds nor an RFC 3339 time \
             (2026-12-01T18:00:00Z)"
        ))
    };
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let (secs, frac) = t.split_once('.').unwrap_or((t, ""));
        if secs.is_empty() {
            return Err(bad());
        }
        // All digits: a number too large for u128 is far ahead, not malformed.
        let secs: u128 = secs.parse().unwrap_or(u128::MAX / 1_000_000_000);
        return Ok(secs * 1_000_000_000 + u128::from(frac_ns(frac).ok_or_else(bad)?));
    }
    parse_rfc3339(t).ok_or_else(bad)
}

/// Digits after the decimal point, as ns (at most 9 digits).
fn frac_ns(frac: &str) -> Option<u64> {
    if frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.is_empty() {
        return Some(0);
    }
    let v: u64 = frac.parse().ok()?;
    Some(v * 10u64.pow(9 - frac.len() as u32))
}

fn parse_rfc3339(t: &str) -> Option<u128> {
    let b = t.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| t.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let rest = &t[19..];
    let (frac, zone) = match rest.strip_prefix('.') {
        Some(r) => {
            let end = r.find(|c: char| !c.is_ascii_digit())?;
            (&r[..end], &r[end..])
        }
        None => ("", rest),
    };
    let offset_s = match zone {
        "Z" | "z" => 0,
        z if z.len() == 6 && matches!(&z[3..4], ":") => {
            let sign = match &z[..1] {
                "+" => 1,
                "-" => -1,
                _ => return None,
            };
            sign * (z[1..3].parse::<i64>().ok()? * 3600 + z[4..6].parse::<i64>().ok()? * 60)
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s - offset_s;
    let secs = u128::try_from(secs).ok()?;
    Some(secs * 1_000_000_000 + u128::from(frac_ns(frac)?))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Samples of `total` that shard `s` issues: those whose index k has k mod N = I.
pub fn sample_share(total: u64, s: Shard) -> u64 {
    split_share(total as usize, s.count as usize, s.index as usize) as u64
}

/// The seed of shard `s`'s Poisson gaps: the plan's own for a single shard (so `--shard 0/1`
/// is the single-host run), else drawn from the plan's seed and the shard index, so each
/// shard's arrivals are independent of the others'.
pub fn shard_seed(seed: u64, s: Shard) -> u64 {
    if s.count == 1 {
        return seed;
    }
    let mut mix = SplitMix64::new(seed ^ u64::from(s.index).wrapping_mul(0xA076_1D64_78BD_642F));
    mix.next_u64()
}

/// The load pattern shard `s` runs: offline unchanged (its share of the burst is its share of
/// the samples), Poisson at QPS / N from its own seed, concurrency C split with the remainder
/// spread. A shard left without concurrency is refused.
pub fn shard_pattern(pattern: LoadPattern, s: Shard) -> Result<LoadPattern, AppError> {
    match pattern {
        LoadPattern::Offline => Ok(pattern),
        LoadPattern::Poisson { target_qps, seed } => Ok(LoadPattern::Poisson {
            target_qps: target_qps / f64::from(s.count),
            seed: shard_seed(seed, s),
        }),
        LoadPattern::Concurrency { n } => {
            let share = sample_share(n, s);
            if share == 0 {
                return Err(AppError::Input(format!(
                    "--concurrency {n} over {} shards leaves shard {} without a connection; \
                     give a concurrency of at least {} or fewer shards",
                    s.count, s.index, s.count
                )));
            }
            Ok(LoadPattern::Concurrency { n: share })
        }
        // Each shard runs its conversations (every N-th), its share of the places.
        LoadPattern::Agentic { n } => {
            let share = sample_share(n, s);
            if share == 0 {
                return Err(AppError::Input(format!(
                    "target_concurrency {n} over {} shards leaves shard {} without a \
                     conversation place; give a target_concurrency of at least {} or fewer \
                     shards",
                    s.count, s.index, s.count
                )));
            }
            Ok(LoadPattern::Agentic { n: share })
        }
    }
}

/// The `-v` plan line of a sharded run or one with a start time; empty otherwise.
pub fn shard_line(shard: Option<&ShardPlan>, start_at_unix_ns: Option<u64>) -> String {
    let start = start_at_unix_ns.map_or(String::new(), |ns| {
        format!(", performance phase at {}.{:09} (Unix s)", ns / 1_000_000_000, ns % 1_000_000_000)
    });
    match shard {
        Some(sp) => format!(
            "\nplan: shard {}/{} (from {}) of a plan of {} samples, plan hash {}{start}",
            sp.shard.index, sp.shard.count, sp.origin, sp.plan_samples, sp.plan_hash
        ),
        None if !start.is_empty() => format!("\nplan: not sharded{start}"),
        None => String::new(),
    }
}

/// The plan's pattern, or the shard's share of it.
pub fn sharded(pattern: LoadPattern, shard: Option<&ShardOrigin>) -> Result<LoadPattern, AppError> {
    match shard {
        Some((s, _)) => shard_pattern(pattern, *s),
        None => Ok(pattern),
    }
}

/// Where shard `s`'s samples sit in the single-host order: its local sample j is global
/// sample `first + j * step`.
pub fn order_stride(s: Shard) -> (u64, u64) {
    (u64::from(s.index), u64::from(s.count))
}

/// Every `step`-th of `rows` from `first`: a shard's part of a listed order (the warm-up).
pub fn strided_rows(rows: &[u32], s: Shard) -> Vec<u32> {
    rows.iter().skip(s.index as usize).step_by(s.count as usize).copied().collect()
}

/// What of a plan keeps it from being sharded: what `merge` could not put together.
#[derive(Debug, Clone, Copy, Default)]
pub struct ShardRefusals {
    /// An accuracy phase (`--mode acc` or `both`): its phases are not split.
    pub accuracy: bool,
    /// `--no-events`: the merge reads each shard's events.jsonl.
    pub no_events: bool,
    /// The plan's endpoints: a merge cannot tell a sample's endpoint from the log.
    pub endpoints: usize,
}

/// Shard `s` of a plan with `plan_samples` performance samples: refused when the merge could
/// not put the shards together (`ShardRefusals`) or the shard would have no sample.
pub fn check_shard_plan(s: Shard, plan_samples: u64, r: ShardRefusals) -> Result<(), AppError> {
    if r.no_events {
        return Err(AppError::Input(format!(
            "--shard {}/{} with --no-events: merge reads each shard's events.jsonl; drop \
             --no-events",
            s.index, s.count
        )));
    }
    if r.endpoints > 1 {
        return Err(AppError::Input(format!(
            "--shard {}/{} over {} endpoints: events.jsonl does not say which endpoint each \
             sample went to, so the shards could not be merged; give each shard one endpoint",
            s.index, s.count, r.endpoints
        )));
    }
    if r.accuracy {
        return Err(AppError::Input(format!(
            "--shard {}/{}: accuracy phases are not split across shards; run the accuracy \
             datasets (--mode acc or both) on one host",
            s.index, s.count
        )));
    }
    if sample_share(plan_samples, s) == 0 {
        return Err(AppError::Input(format!(
            "the plan has {plan_samples} samples, fewer than its {} shards, so shard {} would \
             issue none; give at least {} samples (--num-samples) or fewer shards",
            s.count, s.index, s.count
        )));
    }
    Ok(())
}

/// Keys of config.yaml that may differ between the hosts of one plan: where the report goes,
/// how each host sizes and pins its workers and connections, its log level.
const PER_HOST_KEYS: &[&[&str]] = &[
    &["report_dir"],
    &["verbose"],
    &["enable_cpu_affinity"],
    &["settings", "client", "num_workers"],
    &["settings", "client", "max_connections"],
    &["settings", "client", "warmup_connections"],
    &["settings", "client", "max_concurrent_warmup_connects"],
    &["settings", "client", "worker_initialization_timeout"],
    &["settings", "client", "log_level"],
    &["settings", "drain", "metrics_tokenizer_workers"],
];

/// The plan hash: FNV-1a (64 bits, hex) of config.yaml without its per-host keys
/// (`PER_HOST_KEYS`), with the shard count. Equal across the shards of one plan and seeds;
/// not a security hash, a check that the merge is given one plan's shards. `--start-at` is
/// not in it: shards that started apart are the skew check's to refuse, by how far.
pub fn plan_hash(config_yaml: &str, count: u32) -> String {
    let mut value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(config_yaml).unwrap_or(serde_yaml_ng::Value::Null);
    for path in PER_HOST_KEYS {
        remove_path(&mut value, path);
    }
    let text = serde_yaml_ng::to_string(&value).unwrap_or_default();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            hash = (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(text.as_bytes());
    eat(format!("\nshards={count}\n").as_bytes());
    format!("{hash:016x}")
}

fn remove_path(value: &mut serde_yaml_ng::Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut node = value;
    for key in parents {
        match node.get_mut(*key) {
            Some(next) => node = next,
            None => return,
        }
    }
    if let Some(map) = node.as_mapping_mut() {
        map.remove(*last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    fn args(shard: Option<&str>, shards: Option<u64>) -> ShardArgs {
        ShardArgs { shard: shard.map(str::to_string), shards, start_at: None }
    }

    fn resolved(a: &ShardArgs, env: &dyn Fn(&str) -> Option<String>) -> Result<Shard, String> {
        match resolve_shard(a, env, 0, &mut Vec::new()) {
            Ok((Some((s, _)), _)) => Ok(s),
            Ok((None, _)) => Err("not sharded".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn the_shard_flag_slurm_and_an_indexed_job_resolve_to_the_same_shard() {
        let want = Ok(Shard { index: 1, count: 4 });
        assert_eq!(resolved(&args(Some("1/4"), None), &no_env), want);
        let slurm = env_of(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "4")]);
        assert_eq!(resolved(&args(None, None), &slurm), want);
        let k8s = env_of(&[("JOB_COMPLETION_INDEX", "1")]);
        assert_eq!(resolved(&args(None, Some(4)), &k8s), want);
        let k8s_env = env_of(&[("JOB_COMPLETION_INDEX", "1"), ("LOADGEN_SHARDS", "4")]);
        assert_eq!(resolved(&args(None, None), &k8s_env), want);
        assert_eq!(resolved(&args(None, None), &no_env), Err("not sharded".into()));
    }

    #[test]
    fn the_flag_wins_and_conflicting_engines_are_refused_naming_both() {
        let slurm = env_of(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4")]);
        assert_eq!(resolved(&args(Some("0/2"), None), &slurm), Ok(Shard { index: 0, count: 2 }));
        let both = env_of(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
            ("JOB_COMPLETION_INDEX", "0"),
            ("LOADGEN_SHARDS", "2"),
        ]);
        let err = resolved(&args(None, None), &both).unwrap_err();
        assert!(err.contains("SLURM_PROCID") && err.contains("JOB_COMPLETION_INDEX"), "{err}");
        let err = resolved(&args(None, Some(3)), &slurm).unwrap_err();
        assert!(err.contains("--shards 3") && err.contains("SLURM_NTASKS"), "{err}");
        let err = resolved(&args(Some("0/2"), Some(3)), &no_env).unwrap_err();
        assert!(err.contains("--shard 0/2") && err.contains("--shards 3"), "{err}");
    }

    #[test]
    fn an_index_past_the_count_or_no_count_is_refused() {
        for (text, want) in [
            ("2/2", "not below the shard count 2"),
            ("0/0", "shard count of 0"),
            ("1", "is not I/N"),
            ("a/2", "is not I/N"),
        ] {
            let err = resolved(&args(Some(text), None), &no_env).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
            let code = resolve_shard(&args(Some(text), None), &no_env, 0, &mut Vec::new());
            let code = code.unwrap_err();
            assert_eq!(code.exit_code(), 2, "{text}");
        }
        let lone = env_of(&[("JOB_COMPLETION_INDEX", "1")]);
        let err = resolved(&args(None, None), &lone).unwrap_err();
        assert!(err.contains("--shards N") && err.contains("LOADGEN_SHARDS"), "{err}");
        let err = resolved(&args(None, Some(2)), &no_env).unwrap_err();
        assert!(err.contains("--shard I/2"), "{err}");
    }

    #[test]
    fn the_shares_of_every_shard_add_up_to_the_whole() {
        for total in [0u64, 1, 5, 7, 100, 1001] {
            for count in 1..=5u32 {
                let shares: Vec<u64> =
                    (0..count).map(|index| sample_share(total, Shard { index, count })).collect();
                assert_eq!(shares.iter().sum::<u64>(), total, "{total} over {count}");
                assert!(shares.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1), "{shares:?}");
                // Each shard's count is the number of k < total with k mod N = I.
                for (index, share) in shares.iter().enumerate() {
                    let by_k = (0..total).filter(|k| k % u64::from(count) == index as u64).count();
                    assert_eq!(*share, by_k as u64);
                }
            }
        }
    }

    #[test]
    fn an_agentic_plan_splits_its_conversations_whole_and_strided() {
        use crate::plan::agentic::{instances, shard_instances};
        let all = instances(3, 8);
        let shard = |index| shard_instances(&all, Some((index, 3))).unwrap();
        let sources = |index| shard(index).iter().map(|i| (i.source, i.repeat)).collect::<Vec<_>>();
        assert_eq!(sources(0), [(0, 1), (0, 2), (0, 3)], "instances 0, 3, 6");
        assert_eq!(sources(1), [(1, 1), (1, 2), (1, 3)], "instances 1, 4, 7");
        assert_eq!(sources(2), [(2, 1), (2, 2)], "instances 2, 5");
        assert_eq!(shard_instances(&all, None).unwrap(), all);
        let err = shard_instances(&all[..2], Some((2, 3))).unwrap_err();
        assert!(err.to_string().contains("without a conversation"), "{err}");
        let places =
            |n, index| shard_pattern(LoadPattern::Agentic { n }, Shard { index, count: 2 });
        assert_eq!(places(5, 0).unwrap(), LoadPattern::Agentic { n: 3 });
        assert_eq!(places(5, 1).unwrap(), LoadPattern::Agentic { n: 2 });
        let err = places(1, 1).unwrap_err().to_string();
        assert!(err.contains("target_concurrency 1 over 2 shards"), "{err}");
    }

    #[test]
    fn concurrency_splits_with_the_remainder_spread_and_poisson_divides_the_rate() {
        let conc = |index, count| {
            shard_pattern(LoadPattern::Concurrency { n: 10 }, Shard { index, count })
        };
        let got: Vec<_> = (0..4).map(|i| conc(i, 4).unwrap()).collect();
        let want = [3, 3, 2, 2].map(|n| LoadPattern::Concurrency { n });
        assert_eq!(got, want);
        let err = shard_pattern(LoadPattern::Concurrency { n: 2 }, Shard { index: 2, count: 3 });
        assert!(err.unwrap_err().to_string().contains("without a connection"));
        let poisson = LoadPattern::Poisson { target_qps: 90.0, seed: 42 };
        let shards: Vec<_> = (0..3)
            .map(|index| shard_pattern(poisson, Shard { index, count: 3 }).unwrap())
            .collect();
        let mut seeds = Vec::new();
        for p in &shards {
            let LoadPattern::Poisson { target_qps, seed } = *p else { panic!("poisson") };
            assert_eq!(target_qps, 30.0);
            seeds.push(seed);
        }
        seeds.sort_unstable();
        seeds.dedup();
        assert_eq!(seeds.len(), 3, "each shard draws its own arrivals");
        let one = shard_pattern(poisson, Shard { index: 0, count: 1 }).unwrap();
        assert_eq!(one, poisson, "one shard is the single-host run");
        let offline = shard_pattern(LoadPattern::Offline, Shard { index: 1, count: 2 });
        assert_eq!(offline.unwrap(), LoadPattern::Offline);
    }

    #[test]
    fn what_a_merge_could_not_put_together_is_refused_before_the_run() {
        let s = Shard { index: 1, count: 2 };
        let ok = ShardRefusals { endpoints: 1, ..ShardRefusals::default() };
        assert!(check_shard_plan(s, 10, ok).is_ok());
        let cases = [
            (ShardRefusals { accuracy: true, ..ok }, 10, "accuracy phases are not split"),
            (ShardRefusals { no_events: true, ..ok }, 10, "drop --no-events"),
            (ShardRefusals { endpoints: 3, ..ok }, 10, "over 3 endpoints"),
            (ok, 1, "shard 1 would issue none"),
        ];
        for (r, samples, want) in cases {
            let err = check_shard_plan(s, samples, r).unwrap_err();
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains(want), "{want}: {err}");
        }
    }

    #[test]
    fn strided_warm_up_rows_partition_the_list() {
        let rows: Vec<u32> = (10..17).collect();
        let parts: Vec<Vec<u32>> =
            (0..3).map(|index| strided_rows(&rows, Shard { index, count: 3 })).collect();
        assert_eq!(parts, [vec![10, 13, 16], vec![11, 14], vec![12, 15]]);
        assert_eq!(order_stride(Shard { index: 2, count: 3 }), (2, 3));
    }

    #[test]
    fn start_times_read_as_unix_seconds_or_rfc_3339() {
        assert_eq!(parse_time("0").unwrap(), 0);
        assert_eq!(parse_time("1767225600").unwrap(), 1_767_225_600_000_000_000);
        assert_eq!(parse_time("1767225600.25").unwrap(), 1_767_225_600_250_000_000);
        assert_eq!(parse_time("2026-01-01T00:00:00Z").unwrap(), 1_767_225_600_000_000_000);
        assert_eq!(parse_time("2026-01-01T01:00:00.5+01:00").unwrap(), 1_767_225_600_500_000_000);
        assert_eq!(parse_time("1970-01-01T00:00:00.000000001Z").unwrap(), 1);
        for bad in ["tomorrow", "2026-13-01T00:00:00Z", "2026-01-01T00:00:00", "1.2.3", ""] {
            let err = parse_time(bad).unwrap_err();
            assert!(err.to_string().contains("RFC 3339"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_start_in_the_past_is_refused_and_one_ahead_is_kept() {
        let now: u64 = 2_000_000_000_000;
        let text = "2000";
        let at = |ns: u64| u128::from(ns);
        assert_eq!(check_start_at(at(now + 5), text, now).unwrap(), now + 5);
        assert_eq!(
            check_start_at(at(now - 1_000), text, now).unwrap(),
            now - 1_000,
            "within tolerance"
        );
        let err = check_start_at(at(now - 2_000_000_000), text, now).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("2.000 s in the past"), "{err}");
    }

    #[test]
    fn a_valid_time_past_the_horizon_is_refused_as_too_far_ahead() {
        let now = parse_time("2026-01-01T00:00:00Z").unwrap() as u64;
        // The last second RFC 3339 can write parses (it is past u64 ns), then is refused.
        let text = "9999-12-31T23:59:59Z";
        let far = parse_time(text).unwrap();
        assert_eq!(far, 253_402_300_799 * 1_000_000_000);
        let err = check_start_at(far, text, now).unwrap_err().to_string();
        assert!(!err.contains("neither"), "{err}");
        assert!(err.contains("is 2912442 days ahead"), "{err}");
        assert!(err.contains("at most 24 h"), "{err}");
        let ten_years = parse_time("2036-01-01T00:00:00Z").unwrap();
        let err = check_start_at(ten_years, "2036-01-01T00:00:00Z", now).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("3652 days ahead"), "{err}");
        let huge = parse_time("99999999999999999999999999999999999999999").unwrap();
        assert!(check_start_at(huge, "9…", now).is_err(), "digits past u128 are far, not bad");
        let edge = u128::from(now + START_AT_HORIZON_NS);
        assert_eq!(check_start_at(edge, "edge", now).unwrap(), now + START_AT_HORIZON_NS);
        assert!(check_start_at(edge + 1, "past the edge", now).is_err());
    }

    #[test]
    fn the_wait_for_a_start_is_said_in_units_people_read() {
        let now = 1_000_000_000_000_000_000;
        let line = |ahead_ns: u64| start_wait_line(Some(now + ahead_ns), now).unwrap();
        assert!(line(30_000_000_000).contains(", in 30.0 s, after the workers"), "{}", line(1));
        assert!(line(725_000_000_000).contains("in 12 min 05 s"), "{}", line(725_000_000_000));
        let hours = 3 * 3600 + 4 * 60;
        assert!(line(hours * 1_000_000_000).contains("in 3 h 04 min"));
        assert!(line(5).contains("at 1000000000.000000005 (Unix s)"), "{}", line(5));
        assert_eq!(start_wait_line(Some(now), now), None, "a start already here");
        assert_eq!(start_wait_line(None, now), None);
    }

    #[test]
    fn the_plan_hash_ignores_per_host_keys_and_follows_the_plan() {
        let a = "report_dir: /tmp/a\nsettings:\n  client:\n    num_workers: 2\n  runtime:\n    \
                 scheduler_random_seed: 42\n";
        let b = "report_dir: /tmp/b\nsettings:\n  client:\n    num_workers: 8\n  runtime:\n    \
                 scheduler_random_seed: 42\n";
        let seeds = a.replace("42", "43");
        assert_eq!(plan_hash(a, 2), plan_hash(b, 2));
        assert_ne!(plan_hash(a, 2), plan_hash(&seeds, 2), "other seeds");
        assert_ne!(plan_hash(a, 2), plan_hash(a, 3), "other shard count");
        assert_eq!(plan_hash(a, 2).len(), 16);
    }
}
