//! The core of `llm-loadgen merge DIR... --out OUT`: one report from the report directories
//! of a sharded run's shards, exact: every sample's own values on one timeline, never
//! averaged figures.
//!
//! The shards are checked (`check`), their logs interleaved into OUT/events.jsonl with each
//! line on the common timeline and under the single-host run's sample id (`events`), their
//! sample_idx_map.json joined the same way; then OUT is rebuilt exactly as `report DIR`
//! rebuilds a run (`report::rebuild`): the same replay, `final_snapshot`, `result_summary`
//! and writers, so there is no second statistics path. What the logs cannot give is carried
//! from the shards' own files and summed (`merged_carried`); the `shards` section says what
//! each shard did.

mod check;
mod events;
mod fields;

use std::path::Path;

use loadgen_coordinator::metrics::TokenCountSource;

use crate::rebuild::{rebuild, Carried, RunDir};
use crate::{
    result_summary, write_atomic, write_atomic_with, FailureCounts, FailureKindCount,
    ResultSummary, RunInfo, ShardFile, ShardInfo,
};
pub use check::{check_shards, Timeline};
use events::{merge_events, ShardLog};
pub use fields::ShardView;
use loadgen_plan::error::AppError;

/// A shard's report directory, read.
pub struct Shard {
    pub run: RunDir,
    pub file: ShardFile,
    /// When shard.json was last written, ns since the Unix epoch.
    pub written_unix_ns: Option<u64>,
}

/// Reads a shard's directory: its run files and shard.json. A run without shard.json or
/// without its summary is refused, naming the directory.
pub fn load_shard(dir: &Path) -> Result<Shard, AppError> {
    let run = RunDir::load(dir)?;
    let path = dir.join("shard.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        AppError::Input(format!(
            "cannot read {} ({e}): {} is not a shard's report directory; run each shard with \
             --shard I/N (or under srun or an Indexed Job)",
            path.display(),
            dir.display()
        ))
    })?;
    let file: ShardFile = serde_json::from_str(&text).map_err(|e| {
        AppError::Input(format!(
            "{} cannot be read ({e}); it must be a shard's own",
            path.display()
        ))
    })?;
    if run.summary.is_none() {
        return Err(AppError::Input(format!(
            "{} has no performance/result_summary.json: the shard did not finish; rerun it",
            dir.display()
        )));
    }
    let written_unix_ns = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    Ok(Shard { run, file, written_unix_ns })
}

/// OUT/events.jsonl, OUT/sample_idx_map.json and OUT/config.yaml: the inputs of the rebuild.
pub fn write_merged_inputs(
    shards: &[Shard],
    order: &[usize],
    timeline: &Timeline,
    out: &Path,
) -> Result<(), AppError> {
    let mut logs: Vec<ShardLog> = Vec::with_capacity(order.len());
    for &i in order {
        let file = &shards[i].file;
        let agentic_ids = match file.agentic_ids() {
            Some(Ok(ids)) => Some(std::sync::Arc::new(ids)),
            Some(Err(why)) => return Err(AppError::Input(format!("shard {}: {why}", file.index))),
            None => None,
        };
        logs.push(ShardLog {
            path: shards[i].run.dir.join("events.jsonl"),
            shift_ns: timeline.shifts_ns[i],
            ids: file.sample_ids,
            samples: file.samples,
            tracking_start_ns: file.clock.tracking_start_ns,
            agentic: file.conversations.is_some(),
            agentic_ids,
        });
    }
    let events = out.join("events.jsonl");
    let mut merge_error = None;
    let written = write_atomic_with(&events, |w| {
        merge_events(&logs, w).map(|_| ()).map_err(|e| {
            merge_error = Some(e.clone());
            std::io::Error::other(e)
        })
    });
    if let Some(e) = merge_error {
        return Err(AppError::Input(format!("{e}: nothing was merged")));
    }
    written.map_err(|e| write_error(&events, &e))?;
    let mut rows: Vec<(u64, u32)> = Vec::new();
    for (log, &i) in logs.iter().zip(order) {
        let index = shards[i].run.sample_index();
        // An agentic shard's rows are its own conversations' turns (sample s is row s, as on
        // one host): they take the single-host rows with the ids.
        let row_of = |row: u32| match log.agentic {
            true => u32::try_from(log.global_id(u64::from(row))).unwrap_or(u32::MAX),
            false => row,
        };
        rows.extend(index.into_iter().map(|(uuid, row)| (log.global_id(uuid as u64), row_of(row))));
    }
    rows.sort_unstable();
    let idx_path = out.join("sample_idx_map.json");
    write_atomic_with(&idx_path, |w| {
        crate::write_sample_idx_map(w, Some(crate::slice_rows(&rows)), &[])
    })
    .map_err(|e| write_error(&idx_path, &e))?;
    let first = &shards[order[0]].run;
    let mut config = first.config_yaml.clone();
    if let Some(map) = config.as_mapping_mut() {
        map.insert("report_dir".into(), out.display().to_string().into());
    }
    // Quoted as a run writes its config.yaml (`streaming: 'on'`), so `report OUT` reads it.
    let text = serde_yaml_ng::to_string(&config)
        .map(|t| loadgen_plan::yaml::quote_yaml11_bools(&t))
        .map_err(|e| AppError::Execution(format!("cannot write the merged config.yaml: {e}")))?;
    let config_path = out.join("config.yaml");
    write_atomic(&config_path, text.as_bytes()).map_err(|e| write_error(&config_path, &e))
}

fn write_error(path: &Path, e: &std::io::Error) -> AppError {
    AppError::Execution(format!(
        "cannot write {}: {e}; free space or pass another --out",
        path.display()
    ))
}

/// OUT as a run directory: the first shard's config, the merged log, and what the shards'
/// own files carry, summed.
pub fn merged_run_dir(
    shards: &[Shard],
    order: &[usize],
    timeline: &Timeline,
    out: &Path,
) -> Result<RunDir, AppError> {
    let first = &shards[order[0]].run;
    let mut config = first.config.clone();
    config.report_dir = Some(out.display().to_string());
    Ok(RunDir {
        dir: out.to_path_buf(),
        config,
        config_yaml: first.config_yaml.clone(),
        summary: first.summary.clone(),
        carried: merged_carried(shards, order, timeline),
    })
}

/// The shards' carried values as one run's: counts summed, failure kinds summed by kind (in
/// first-seen order), the last record's time the latest on the timeline. The scheduler's
/// issue lag is per host and cannot be merged exactly: it is left out (each shard's is in
/// `shards`).
fn merged_carried(shards: &[Shard], order: &[usize], timeline: &Timeline) -> Carried {
    let carried = |i: usize| &shards[i].run.carried;
    let first = carried(order[0]);
    let mut kinds: Option<Vec<FailureKindCount>> = Some(Vec::new());
    let mut totals = Some([0u64; 4]);
    for &i in order {
        let c = carried(i);
        match (&mut kinds, &c.failure_kinds) {
            (Some(all), Some(these)) => add_kinds(all, these),
            _ => kinds = None,
        }
        totals = match (totals, c.snapshot_totals) {
            (Some(t), Some(s)) => Some([
                t[0].saturating_add(s[0]),
                t[1].saturating_add(s[1]),
                t[2].saturating_add(s[2]),
                t[3].max(s[3].saturating_add(timeline.shifts_ns[i])),
            ]),
            _ => None,
        };
    }
    let incomplete = order.iter().find_map(|&i| {
        let reason = carried(i).incomplete_reason.as_ref()?;
        Some(format!("shard {}: {reason}", shards[i].file.index))
    });
    Carried {
        version: first.version.clone(),
        git_sha: first.git_sha.clone(),
        interrupted: order.iter().any(|&i| carried(i).interrupted),
        incomplete_reason: incomplete,
        issue_lag: None,
        connection_pool: None,
        requests_resent: Some(order.iter().map(|&i| carried(i).requests_resent.unwrap_or(0)).sum()),
        failure_kinds: kinds,
        urls: first.urls.clone(),
        snapshot_totals: totals,
        endpoint_failures: merged_endpoint_failures(order.iter().map(|&i| carried(i))),
        client_token_counting: first.client_token_counting,
        live_threads: first.live_threads,
        accuracy_results: None,
        // Each shard's profiling.json stays in its own directory: the calls are per host.
        profiling: None,
    }
}

/// Each endpoint's failures by kind, summed over the shards (`None` when one lacks them).
fn merged_endpoint_failures<'a>(
    shards: impl Iterator<Item = &'a Carried>,
) -> Option<Vec<std::collections::BTreeMap<String, u64>>> {
    let mut sum: Vec<std::collections::BTreeMap<String, u64>> = Vec::new();
    for c in shards {
        for (e, kinds) in c.endpoint_failures.as_ref()?.iter().enumerate() {
            if sum.len() <= e {
                sum.resize_with(e + 1, Default::default);
            }
            for (kind, n) in kinds {
                *sum[e].entry(kind.clone()).or_insert(0) += n;
            }
        }
    }
    Some(sum)
}

fn add_kinds(all: &mut Vec<FailureKindCount>, these: &[FailureKindCount]) {
    for k in these {
        match all.iter_mut().find(|a| a.kind == k.kind) {
            Some(a) => a.count += k.count,
            None => all.push(k.clone()),
        }
    }
}

/// Each shard's line of the `shards` section, from its own summary and shard.json.
fn shard_infos(shards: &[Shard], order: &[usize], timeline: &Timeline) -> Vec<ShardInfo> {
    order
        .iter()
        .map(|&i| {
            let s = &shards[i];
            let summary = s.run.summary.as_ref();
            let count = |n: fn(&ResultSummary) -> u64| summary.map_or(0, n);
            let kinds = s.run.carried.failure_kinds.as_deref().unwrap_or_default();
            let lag = s.run.carried.issue_lag;
            ShardInfo {
                index: s.file.index,
                report_dir: s.run.dir.display().to_string(),
                n_samples_issued: count(|s| s.n_samples_issued),
                n_samples_completed: count(|s| s.n_samples_completed),
                n_samples_failed: count(|s| s.n_samples_failed),
                n_samples_abandoned: count(|s| s.n_samples_abandoned),
                failure_kinds: FailureCounts(
                    kinds.iter().map(|k| (k.kind.clone(), k.count)).collect(),
                ),
                start_offset_ns: s.file.clock.start_offset_ns,
                start_skew_ns: timeline.start_skew_ns[i],
                clock_shift_ns: timeline.shifts_ns[i],
                anchor_uncertainty_ns: s.file.clock.anchor_uncertainty_ns,
                issue_lag_p99_ns: lag.map(|l| l.p99_ns),
                issue_lag_max_ns: lag.map(|l| l.max_ns),
            }
        })
        .collect()
}

/// Rebuilds OUT from its merged log, adds the `shards` section and writes the report files;
/// returns the summary and run info the console summary is printed from.
pub fn write_merged_report(
    merged: &RunDir,
    primary: TokenCountSource,
    shards: &[Shard],
    order: &[usize],
    timeline: &Timeline,
) -> Result<(ResultSummary, RunInfo), AppError> {
    let mut rebuilt = rebuild(merged, primary)?;
    rebuilt.info.shards = shard_infos(shards, order, timeline);
    let summary = result_summary(&rebuilt.snapshot, &rebuilt.info);
    let out = &merged.dir;
    crate::rebuild::write_rebuilt_files(out, &rebuilt.snapshot, &summary, &rebuilt.info, None)?;
    Ok((summary, rebuilt.info))
}
