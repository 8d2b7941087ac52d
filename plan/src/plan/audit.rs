//! The compliance audit (`audit:`, MLPerf TEST04 output caching) as the reference runs it: a
//! reference phase of distinct samples and an audit phase repeating one row, each a run of its
//! own under `<report_dir>/audit/<label>/`, then a verdict from their throughputs.

use std::path::Path;

use super::*;
use crate::yaml::{AuditConfig, LoadPatternKind};

/// One phase of the audit: its directory name, its sample count and, for the audit phase,
/// the one dataset row every sample sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditPhase {
    pub label: &'static str,
    pub samples: u64,
    pub fixed_row: Option<u64>,
}

/// The reference's ranges on `audit:` (its schema's): `samples` and `audit_samples` at least 1,
/// `threshold` strictly between 0 and 1.
pub fn check_audit(config: &Config) -> Result<(), AppError> {
    let Some(a) = &config.audit else { return Ok(()) };
    if a.samples == 0 || a.audit_samples == Some(0) {
        return Err(AppError::Input(format!(
            "audit.samples ({}) and audit.audit_samples ({}) must be at least 1",
            a.samples,
            a.audit_samples.map_or("not set".to_string(), |n| n.to_string())
        )));
    }
    if !(a.threshold > 0.0 && a.threshold < 1.0) {
        return Err(AppError::Input(format!(
            "audit.threshold must be above 0 and below 1, got {}",
            a.threshold
        )));
    }
    Ok(())
}

/// The audit's phases in the order they run: `reference` (`samples` distinct samples), then
/// `output_caching` (`audit_samples`, default `samples`, all of row `sample_index`).
pub fn audit_phases(a: &AuditConfig) -> [AuditPhase; 2] {
    [
        AuditPhase { label: "reference", samples: a.samples, fixed_row: None },
        AuditPhase {
            label: "output_caching",
            samples: a.audit_samples.unwrap_or(a.samples),
            fixed_row: Some(a.sample_index),
        },
    ]
}

/// The reference's bounds on the phases against the performance dataset as loaded (`rows`)
/// and the load pattern: a pattern whose throughput is the server's (max_throughput or
/// concurrency), a reference phase that does not wrap the dataset, a row that exists.
pub fn check_audit_phases(
    a: &AuditConfig,
    rows: u64,
    pattern: LoadPatternKind,
) -> Result<(), AppError> {
    if !matches!(pattern, LoadPatternKind::MaxThroughput | LoadPatternKind::Concurrency) {
        return Err(AppError::Setup(format!(
            "Output-caching audit requires a load pattern where achieved QPS reflects SUT \
             capacity (max_throughput, concurrency); got {:?}, which would mask a \
             caching-induced speedup",
            pattern.as_str()
        )));
    }
    for phase in audit_phases(a) {
        match phase.fixed_row {
            None if phase.samples > rows => {
                return Err(AppError::Setup(format!(
                    "Audit phase '{}': n_samples={} exceeds dataset size {rows}; a \
                     distinct-sample phase would wrap and re-issue samples",
                    phase.label, phase.samples
                )))
            }
            Some(row) if row >= rows => {
                return Err(AppError::Setup(format!(
                    "Audit phase '{}': sample_index={row} is out of range [0, {rows}) for \
                     dataset with {rows} samples",
                    phase.label
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The configuration of one phase: the main one without its audit, its performance datasets
/// only, `phase.samples` samples in the performance phase only, its report in `dir`.
pub fn audit_phase_config(config: &Config, phase: &AuditPhase, dir: &Path) -> Config {
    let mut c = config.clone();
    c.audit = None;
    c.report_dir = Some(dir.display().to_string());
    c.datasets.retain(|d| d.kind == DatasetKind::Performance);
    c.test_mode = Some(TestMode::Perf);
    c.settings.runtime.n_samples_to_issue = Some(phase.samples);
    c.audit_row = phase.fixed_row;
    c
}

/// The audit phase's dataset: its row `row` alone, so every sample sends it.
pub(super) fn keep_audit_row(dataset: &mut Dataset, row: Option<u64>) -> Result<(), AppError> {
    let Some(row) = row else { return Ok(()) };
    let rows = dataset.rows.len();
    let index = usize::try_from(row).ok().filter(|&i| i < rows).ok_or_else(|| {
        AppError::Setup(format!(
            "audit.sample_index={row} is out of range [0, {rows}) for dataset {}",
            dataset.name
        ))
    })?;
    let kept = dataset.rows.swap_remove(index);
    dataset.rows = vec![kept];
    Ok(())
}

/// One phase's throughput and counts, from its result_summary.json.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseStats {
    pub qps: f64,
    pub completed: u64,
    pub requested: u64,
}

/// The audit's verdict and the figures behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditVerdict {
    pub passed: bool,
    pub reference: PhaseStats,
    pub audit: PhaseStats,
    pub threshold: f64,
    pub reason: String,
}

/// The reference's TEST04 rule: each phase completed at least `(1 - threshold)` of what it
/// asked for, and the audit phase's QPS stays strictly below the reference phase's times
/// `(1 + threshold)`: a server that caches answers a repeated sample faster and fails.
pub fn verify_output_caching(
    reference: PhaseStats,
    audit: PhaseStats,
    threshold: f64,
) -> AuditVerdict {
    let min = 1.0 - threshold;
    let complete = |p: &PhaseStats| p.completed as f64 >= p.requested as f64 * min;
    let pct = format!("{:.0}%", threshold * 100.0);
    let (passed, reason) = if !complete(&reference) || !complete(&audit) {
        let reason = format!(
            "Phase incomplete: reference {}/{}, audit {}/{} (threshold {pct})",
            reference.completed, reference.requested, audit.completed, audit.requested
        );
        (false, reason)
    } else {
        let limit = reference.qps * (1.0 + threshold);
        let passed = audit.qps < limit;
        let op = if passed { "<" } else { ">=" };
        (passed, format!("audit_qps={:.4} {op} ref_qps * (1 + {pct}) = {limit:.4}", audit.qps))
    };
    AuditVerdict { passed, reference, audit, threshold, reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn audit(text: &str) -> Config {
        Config::from_yaml_str(&format!("type: offline\naudit: {text}\n"), "t.yaml").unwrap()
    }

    #[test]
    fn the_audits_keys_are_checked_as_the_references_schema_checks_them() {
        let c = audit("{test: output_caching_test, samples: 20, sample_index: 3, threshold: 0.2}");
        check_audit(&c).unwrap();
        let phases = audit_phases(c.audit.as_ref().unwrap());
        assert_eq!(phases[0], AuditPhase { label: "reference", samples: 20, fixed_row: None });
        assert_eq!(
            phases[1],
            AuditPhase { label: "output_caching", samples: 20, fixed_row: Some(3) }
        );
        for bad in [
            "{test: output_caching_test, samples: 0}",
            "{test: output_caching_test, samples: 2, threshold: 1}",
        ] {
            assert_eq!(check_audit(&audit(bad)).unwrap_err().exit_code(), 2, "{bad}");
        }
        for bad in [
            "{test: other, samples: 2}",
            "{test: output_caching_test}",
            "{test: output_caching_test, samples: 2, x: 1}",
        ] {
            assert!(
                Config::from_yaml_str(&format!("type: offline\naudit: {bad}\n"), "t").is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_phases_must_fit_the_dataset_and_a_pattern_the_server_paces() {
        let a = audit("{test: output_caching_test, samples: 10, sample_index: 9}").audit.unwrap();
        check_audit_phases(&a, 10, LoadPatternKind::Concurrency).unwrap();
        let err = check_audit_phases(&a, 9, LoadPatternKind::MaxThroughput).unwrap_err();
        assert!(err.to_string().contains("exceeds dataset size 9"), "{err}");
        let err = check_audit_phases(&a, 10, LoadPatternKind::Poisson).unwrap_err();
        assert_eq!(err.exit_code(), 3);
        let far = audit("{test: output_caching_test, samples: 2, sample_index: 5}").audit.unwrap();
        let err = check_audit_phases(&far, 5, LoadPatternKind::Concurrency).unwrap_err();
        assert!(err.to_string().contains("sample_index=5 is out of range [0, 5)"), "{err}");
    }

    #[test]
    fn a_faster_audit_phase_fails_and_an_even_one_passes() {
        let p = |qps, completed| PhaseStats { qps, completed, requested: 100 };
        let even = verify_output_caching(p(50.0, 100), p(54.0, 100), 0.1);
        assert!(even.passed, "{}", even.reason);
        assert_eq!(even.reason, "audit_qps=54.0000 < ref_qps * (1 + 10%) = 55.0000");
        let cached = verify_output_caching(p(50.0, 100), p(56.0, 100), 0.1);
        assert!(!cached.passed, "{}", cached.reason);
        assert_eq!(cached.reason, "audit_qps=56.0000 >= ref_qps * (1 + 10%) = 55.0000");
        let short = verify_output_caching(p(50.0, 89), p(50.0, 100), 0.1);
        assert_eq!(
            short.reason,
            "Phase incomplete: reference 89/100, audit 100/100 (threshold 10%)"
        );
    }
}
