//! Where a run's per-sample rows go past its memory budget, and whether the disk holds them.

use std::sync::Arc;

use loadgen_coordinator::metrics::column::{
    disk_check, Spill, DISK_BYTES_PER_SAMPLE, TOKENIZER_DISK_BYTES_PER_SAMPLE,
};

use crate::plan::Plan;
use loadgen_plan::error::AppError;

/// The run's spill: files in `--spill-dir` (else the report directory) once more than
/// `--spill-budget-mib` of rows are in memory; `None` with a budget of 0. Refuses to start,
/// naming the numbers, when the directory's filesystem cannot hold the expected samples (warns
/// instead when a max duration caps the run).
pub fn run_spill(
    plan: &Plan,
    report_dir: &std::path::Path,
) -> Result<Option<Arc<Spill>>, AppError> {
    if plan.spill.budget_mib == 0 {
        return Ok(None);
    }
    let dir = plan.spill.dir.clone().unwrap_or_else(|| report_dir.to_path_buf());
    let spill = Spill::new(&dir, plan.spill.budget_mib << 20).map_err(|e| {
        AppError::Setup(format!("cannot use --spill-dir {}: {e}; choose another", dir.display()))
    })?;
    let stat = nix::sys::statvfs::statvfs(&dir).map_err(|e| {
        AppError::Setup(format!("cannot read free space of --spill-dir {}: {e}", dir.display()))
    })?;
    let free_bytes = stat.blocks_available() as u64 * stat.fragment_size() as u64;
    let samples = plan.num_samples.saturating_add(plan.warmup.samples);
    let tokenizer = if plan.tokenizer.is_some() { TOKENIZER_DISK_BYTES_PER_SAMPLE } else { 0 };
    let per_sample = DISK_BYTES_PER_SAMPLE + tokenizer;
    if let Err(why) = disk_check((samples, per_sample), spill.budget_bytes(), free_bytes) {
        let what = format!(
            "{why} in --spill-dir {}: free space there, choose another --spill-dir, or raise \
             --spill-budget-mib to keep more in memory",
            dir.display()
        );
        // A capped run may end long before its samples are out (a soak's billion samples): the
        // cap, not the count, sizes it, so it is warned, not refused. Rows that find the disk
        // full stay in memory (`Spill::error`).
        if plan.max_duration_ms.is_some_and(|ms| ms > 0) {
            eprintln!("warning: if the run is not capped sooner, {what}");
        } else {
            return Err(AppError::Setup(what));
        }
    }
    Ok(Some(spill))
}

/// With `-v`, how much the spill wrote; a failed write as a warning (its rows stayed in memory,
/// so nothing measured is lost). A failed read is returned: the figures miss values, and the
/// run ends with the execution error's code once its files are written.
pub fn check_spill(plan: &Plan, spill: Option<&Arc<Spill>>) -> Option<String> {
    let spill = spill?;
    if plan.verbose > 0 {
        let mib = spill.spilled_bytes() as f64 / f64::from(1u32 << 20);
        eprintln!("per-sample rows written to {}: {mib:.1} MiB", spill.dir().display());
    }
    let why = spill.error()?;
    if spill.read_failed() {
        return Some(format!("{why}: the report's figures miss those samples"));
    }
    eprintln!("warning: {why}");
    None
}
