//! A run with `audit:` (MLPerf TEST04 output caching), as the reference's `run_audit`: the main
//! run (unless `audit.only`), then the reference phase and the audit phase, each a run of its
//! own under `<report_dir>/audit/<label>/`, then the verdict, written as
//! `audit/audit_output_caching_test.json` and `audit/verify_OUTPUT_CACHING_TEST.txt`. Exit 0 on
//! PASS, 1 on FAIL; a phase that cannot be set up or fails exits as any run does (3, 4).

use std::path::{Path, PathBuf};

use crate::error::AppError;
use crate::plan::{
    audit_phase_config, audit_phases, check_audit_phases, resolve_plan, verify_output_caching,
    AuditVerdict, Host, PhaseStats, Plan,
};
use crate::yaml::{AuditConfig, Config};

/// Resolves `config` into a plan, printing its notes (and the plan under `-v`).
pub fn resolve_printed(config: Config, verbose: u8, host: &Host) -> Result<Plan, AppError> {
    let mut notes = Vec::new();
    let plan = resolve_plan(config, verbose, host, &mut notes);
    crate::commands::print_notes(&notes);
    let plan = plan?;
    if plan.verbose > 0 {
        eprintln!("{}", crate::redact::redact(&plan.summary()));
    }
    Ok(plan)
}

/// Runs `config`: the benchmark, and its audit when it has one.
pub fn run_config(config: Config, verbose: u8, host: &Host) -> Result<i32, AppError> {
    let audit = config.audit.clone();
    let phase_base = config.clone();
    let plan = resolve_printed(config, verbose, host)?;
    let Some(audit) = audit else { return super::run_benchmark(plan) };
    // Every phase is bounded against the dataset before any of them runs, as the reference's.
    let rows = plan.dataset.rows.len() as u64;
    check_audit_phases(&audit, rows, phase_base.settings.load_pattern.kind)?;
    let dir = if audit.only {
        plan.report_dir.clone()
    } else {
        let (code, dir) = super::run_benchmark_in(plan)?;
        if code != 0 {
            return Ok(code);
        }
        dir
    };
    let verdict = run_audit(&phase_base, &audit, &dir.join("audit"), (verbose, host))?;
    if verdict.passed {
        super::say(&format!("Compliance audit output_caching_test PASSED: {}", verdict.reason));
        return Ok(0);
    }
    eprintln!("llm-loadgen: Compliance audit output_caching_test FAILED: {}", verdict.reason);
    Ok(1)
}

/// The audit's phases in turn, then its verdict, written into `base`.
fn run_audit(
    config: &Config,
    audit: &AuditConfig,
    base: &Path,
    (verbose, host): (u8, &Host),
) -> Result<AuditVerdict, AppError> {
    std::fs::create_dir_all(base).map_err(|e| {
        AppError::Setup(format!(
            "cannot create {}: {e}; pass a writable --report-dir",
            base.display()
        ))
    })?;
    let mut stats = Vec::new();
    for phase in audit_phases(audit) {
        let dir = base.join(phase.label);
        super::say(&format!(
            "audit phase {}: {} samples{} into {}",
            phase.label,
            phase.samples,
            phase.fixed_row.map_or(String::new(), |r| format!(", all of dataset row {r}")),
            dir.display()
        ));
        let plan = resolve_printed(audit_phase_config(config, &phase, &dir), verbose, host)?;
        let code = super::run_benchmark(plan).map_err(|e| with_phase(e, phase.label))?;
        if code != 0 {
            return Err(AppError::Execution(format!(
                "Audit phase '{}' failed (exit {code})",
                phase.label
            )));
        }
        stats.push(phase_stats(&dir, phase.samples, phase.label)?);
    }
    let verdict = verify_output_caching(stats[0], stats[1], audit.threshold);
    write_result(base, &verdict)?;
    Ok(verdict)
}

/// A phase's error, naming the phase.
fn with_phase(e: AppError, label: &str) -> AppError {
    match e {
        AppError::Setup(m) => AppError::Setup(format!("Audit phase '{label}': {m}")),
        AppError::Execution(m) => AppError::Execution(format!("Audit phase '{label}': {m}")),
        AppError::Input(m) => AppError::Input(format!("Audit phase '{label}': {m}")),
        other => other,
    }
}

/// A finished phase's QPS and completed samples, from its result_summary.json.
fn phase_stats(dir: &Path, requested: u64, label: &str) -> Result<PhaseStats, AppError> {
    let path = dir.join("performance/result_summary.json");
    let text = crate::report::read_existing(&path).map_err(|e| {
        AppError::Execution(format!(
            "Audit phase '{label}' produced no report ({}: {e})",
            path.display()
        ))
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        AppError::Execution(format!("Audit phase '{label}': {}: {e}", path.display()))
    })?;
    let qps = v["qps"].as_f64().filter(|q| *q > 0.0).ok_or_else(|| {
        AppError::Execution(format!(
            "Audit verification failed: phase '{label}' has no positive throughput (qps={}); \
             an output-caching comparison is impossible",
            v["qps"]
        ))
    })?;
    let completed = v["n_samples_completed"].as_u64().unwrap_or(0);
    Ok(PhaseStats { qps, completed, requested })
}

/// `audit_output_caching_test.json` (the verdict and its figures, the reference's keys in its
/// order), then `verify_OUTPUT_CACHING_TEST.txt` (`Performance check pass: True|False`), each
/// atomically, the record first.
fn write_result(base: &Path, v: &AuditVerdict) -> Result<(), AppError> {
    #[derive(serde::Serialize)]
    struct Record<'a> {
        test: &'a str,
        passed: bool,
        ref_qps: f64,
        audit_qps: f64,
        threshold: f64,
        ref_completed: u64,
        ref_requested: u64,
        audit_completed: u64,
        audit_requested: u64,
        reason: &'a str,
    }
    let record = Record {
        test: "output_caching_test",
        passed: v.passed,
        ref_qps: v.reference.qps,
        audit_qps: v.audit.qps,
        threshold: v.threshold,
        ref_completed: v.reference.completed,
        ref_requested: v.reference.requested,
        audit_completed: v.audit.completed,
        audit_requested: v.audit.requested,
        reason: &v.reason,
    };
    let mut json = loadgen_py::json::to_python_json(&record)
        .map_err(|e| AppError::Execution(format!("cannot write the audit result: {e}")))?;
    json.push(b'\n');
    let verify = format!("Performance check pass: {}\n", if v.passed { "True" } else { "False" });
    for (name, bytes) in [
        ("audit_output_caching_test.json", json.as_slice()),
        ("verify_OUTPUT_CACHING_TEST.txt", verify.as_bytes()),
    ] {
        let path: PathBuf = base.join(name);
        crate::report::write_atomic(&path, bytes)
            .map_err(|e| AppError::Execution(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}
