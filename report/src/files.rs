//! Every file of a finished run's report directory, each written on its own so that one that
//! fails does not cost the others, and the error that names those not written.

use loadgen_coordinator::aggregate::AggregatorOutput;
use loadgen_coordinator::metrics::Snapshot;
use loadgen_coordinator::run::PhaseOutcome;

use super::{
    idx_phases, report_txt, with_accuracy_block, write_report_files, write_sample_idx_map, OpenDir,
    PerfRows, ResultSummary, RunInfo,
};
use loadgen_plan::plan::Plan;

/// Writes every report file, each on its own so that one that fails (events.jsonl on a
/// full disk) does not cost the others; returns those not written. events.jsonl was
/// written by the aggregator as the run went.
pub fn write_all_files(
    plan: &Plan,
    dir: &OpenDir,
    (snapshot, summary, info): (&Snapshot, &ResultSummary, &RunInfo),
    (agg, sample_rows): (&AggregatorOutput, PerfRows<'_>),
    phases: &[PhaseOutcome],
) -> Vec<(&'static str, String)> {
    let mut unwritten: Vec<(&'static str, String)> = Vec::new();
    if let Some(err) = agg.events.error() {
        let why = if err.contains("(os error 28)") {
            "no space left on device".to_string()
        } else if err.contains("(os error 27)") {
            "file too large (the file-size limit, ulimit -f)".to_string()
        } else {
            err.to_string()
        };
        unwritten.push(("events.jsonl", why));
    }
    // The small files first: they hold the measured numbers.
    for u in write_report_files(dir, snapshot, summary, info) {
        unwritten.push((u.file, io_reason(&u.error)));
    }
    if let Err(e) = dir.write_atomic("config.yaml", plan.config_yaml.as_bytes()) {
        unwritten.push(("config.yaml", io_reason(&e)));
    }
    let perf = plan.accuracy.mode != loadgen_plan::plan::TestMode::Acc;
    let acc = idx_phases(plan, phases);
    let perf_rows = perf.then_some(sample_rows);
    let idx_map = |w: &mut dyn std::io::Write| write_sample_idx_map(w, perf_rows, &acc);
    if let Err(e) = dir.write_atomic_with("sample_idx_map.json", idx_map) {
        unwritten.push(("sample_idx_map.json", io_reason(&e)));
    }
    unwritten
}

/// A sharded run's shard.json (what `merge` needs), and the warning for a late start.
pub fn write_shard(
    plan: &Plan,
    dir: &OpenDir,
    clock: &loadgen_coordinator::schedule::ClockAnchor,
    unwritten: &mut Vec<(&'static str, String)>,
) {
    if let Some(warning) = crate::late_start_warning(clock.start_offset_ns) {
        eprintln!("{warning}");
    }
    if let Some(file) = crate::shard_file(plan, clock) {
        if let Err(e) = write_shard_file(dir, &file) {
            unwritten.push(("shard.json", io_reason(&e)));
        }
    }
}

/// Writes `shard.json` into `dir` (atomically, as every report file).
pub fn write_shard_file(dir: &OpenDir, file: &crate::ShardFile) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec_pretty(file).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    dir.write_atomic("shard.json", &bytes)
}

/// Why a write failed, in the words users search for: a full disk and a file-size limit
/// are named as such.
fn io_reason(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSPC) => "no space left on device".to_string(),
        Some(libc::EFBIG) => "file too large (the file-size limit, ulimit -f)".to_string(),
        Some(libc::EDQUOT) => "disk quota exceeded".to_string(),
        _ => e.to_string(),
    }
}

/// The error naming each report file not written and why, if any.
pub fn unwritten_message(
    dir: &std::path::Path,
    unwritten: &[(&'static str, String)],
) -> Option<String> {
    if unwritten.is_empty() {
        return None;
    }
    let files: Vec<String> = unwritten.iter().map(|(f, why)| format!("{f} ({why})")).collect();
    Some(format!(
        "cannot write {} report file(s) in {}: {}; the summary above is what was measured; \
         free space or choose another --report-dir",
        unwritten.len(),
        dir.display(),
        files.join(", ")
    ))
}

/// Scores the run's accuracy datasets, writes accuracy_results.json and report.txt again
/// with the Accuracy block; returns the block for the console and a scoring error.
pub fn write_accuracy(
    plan: &Plan,
    dir: &OpenDir,
    phases: &[PhaseOutcome],
    (summary, info, perf_issued): (&ResultSummary, &RunInfo, u64),
    interrupted: bool,
    unwritten: &mut Vec<(&'static str, String)>,
) -> (Option<String>, Option<String>) {
    let (accuracy, error) = score_accuracy(plan, phases, (summary, perf_issued), interrupted);
    let Some(results) = accuracy else { return (None, error) };
    let block = crate::accuracy::accuracy_block(&results);
    let text = with_accuracy_block(&report_txt(summary, info), &block);
    if let Err(e) = dir.write_atomic("report.txt", text.as_bytes()) {
        unwritten.push(("report.txt", io_reason(&e)));
    }
    if let Err(e) = crate::accuracy::write_accuracy_results(dir, &results) {
        unwritten.push(("accuracy/accuracy_results.json", io_reason(&e)));
    }
    for scores in results.entries.iter().filter_map(|e| e.inline_scores.as_ref()) {
        let bytes = loadgen_py::json::to_python_json(scores).map_err(std::io::Error::other);
        if let Err(e) = bytes.and_then(|b| dir.write_atomic("scores.json", &b)) {
            unwritten.push(("scores.json", io_reason(&e)));
        }
    }
    (Some(block), error)
}

/// Scores the plan's datasets: each accuracy dataset in order, then the performance dataset's
/// own accuracy_config, as the reference lists them; its entry's `total_samples` is the
/// performance phase's `perf_issued` samples, tracked or not (the reference's `issued_count`).
fn score_accuracy(
    plan: &Plan,
    phases: &[PhaseOutcome],
    (summary, perf_issued): (&ResultSummary, u64),
    interrupted: bool,
) -> (Option<crate::accuracy::AccuracyResults>, Option<String>) {
    use crate::accuracy::{score_run, DatasetType, ScoringJob};
    let acc = &plan.accuracy;
    if interrupted || (acc.datasets.is_empty() && acc.performance.is_none()) {
        return (None, None);
    }
    let mut jobs: Vec<ScoringJob<'_>> = Vec::new();
    for (i, d) in acc.datasets.iter().enumerate() {
        let s = &d.scoring;
        let duration_ns = phases.get(i).map_or(0, |p| p.end_ns.saturating_sub(p.start_ns));
        jobs.push(ScoringJob {
            dataset_name: &d.name,
            dataset_type: DatasetType::Accuracy,
            scorer: s.scorer,
            extractor: s.extractor,
            ground_truth_column: s.ground_truth_column.as_deref(),
            ground_truth: &s.ground_truth,
            expected_turns: &s.expected_turns,
            agentic_turns: 0,
            row_columns: &s.row_columns,
            num_repeats: u64::from(s.num_repeats),
            total_samples: d.dataset.rows.len() as u64 * u64::from(s.num_repeats),
            duration_s: duration_ns as f64 / 1e9,
        });
    }
    if let Some(s) = &acc.performance {
        jobs.push(ScoringJob {
            dataset_name: "performance",
            dataset_type: DatasetType::Performance,
            scorer: s.scorer,
            extractor: s.extractor,
            ground_truth_column: s.ground_truth_column.as_deref(),
            ground_truth: &s.ground_truth,
            expected_turns: &s.expected_turns,
            agentic_turns: plan.agentic.as_ref().map_or(0, |a| a.client_turns()),
            row_columns: &s.row_columns,
            num_repeats: 1,
            total_samples: perf_issued,
            duration_s: summary.duration_ns.unwrap_or(0) as f64 / 1e9,
        });
    }
    let count = plan.tokenizer.as_ref().map(|t| move |text: &str| t.count(text).ok());
    let counter = count.as_ref().map(|c| c as crate::accuracy::OslCounter<'_>);
    match score_run(&plan.report_dir, &jobs, plan.token_count_source, counter) {
        Ok(results) => (Some(results), None),
        Err(e) => (None, Some(e.to_string())),
    }
}
