//! One `llm-loadgen benchmark` run of the suite: its command line, the process on the client's
//! cores, and the figures read back from `performance/result_summary.json`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context as _};
use loadgen_report::IssueLag;
use loadgen_report::ResultSummary;
use serde::Serialize;

use crate::procs;

/// What every run of the suite shares.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub bin: PathBuf,
    pub url: String,
    pub client_cores: Vec<usize>,
    pub client_workers: usize,
    pub no_stream_include_usage: bool,
    /// Report directories go under it, one per run.
    pub reports_dir: PathBuf,
    /// Keep each run's report directory (an `events.jsonl` of millions of lines) after it
    /// is read.
    pub keep_reports: bool,
    /// A run still going after this long is killed and fails its row.
    pub run_timeout: Duration,
    /// More `benchmark` arguments (the TLS pass's `--ca-bundle FILE`).
    pub extra_args: Vec<String>,
}

/// The fields of `result_summary.json` the suite uses (read as the binary reads it,
/// `loadgen_report::ResultSummary`), as a row of roofline.json holds them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub n_samples_issued: u64,
    pub n_samples_completed: u64,
    pub n_samples_failed: u64,
    pub duration_ns: u64,
    pub complete: bool,
    pub qps: Option<f64>,
    pub issue_lag: Option<IssueLag>,
}

impl From<&ResultSummary> for Summary {
    fn from(s: &ResultSummary) -> Summary {
        Summary {
            n_samples_issued: s.n_samples_issued,
            n_samples_completed: s.n_samples_completed,
            n_samples_failed: s.n_samples_failed,
            duration_ns: s.duration_ns.unwrap_or(0),
            complete: s.complete,
            qps: s.qps,
            issue_lag: s.issue_lag,
        }
    }
}

/// A run's summary from its result_summary.json.
pub fn read_summary(bytes: &[u8]) -> serde_json::Result<Summary> {
    serde_json::from_slice::<ResultSummary>(bytes).map(|s| Summary::from(&s))
}

/// One finished run.
#[derive(Debug, Clone, Serialize)]
pub struct LoadgenRun {
    pub name: String,
    pub args: Vec<String>,
    pub exit_code: Option<i32>,
    pub summary: Summary,
    pub wall_s: f64,
}

impl LoadgenRun {
    /// The row's assertion: a clean finish and no failed sample.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.exit_code != Some(0) {
            bail!("{}: llm-loadgen exited with {:?}", self.name, self.exit_code);
        }
        if self.summary.n_samples_failed != 0 {
            bail!("{}: {} samples failed", self.name, self.summary.n_samples_failed);
        }
        Ok(())
    }

    pub fn qps(&self) -> f64 {
        self.summary.qps.unwrap_or(0.0)
    }
}

/// The arguments of a run after `benchmark`; `mode` is `offline` or `online`.
pub fn benchmark_args(
    ctx: &RunContext,
    stream: bool,
    mode_args: &[String],
    report: &Path,
) -> Vec<String> {
    let mut args: Vec<String> = vec!["benchmark".into()];
    args.extend(mode_args.iter().cloned());
    args.extend(
        [
            "--endpoints",
            &ctx.url,
            "--streaming",
            if stream { "on" } else { "off" },
            "--model",
            "max-tp",
            "--workers",
            &ctx.client_workers.to_string(),
            "--report-dir",
        ]
        .map(String::from),
    );
    args.push(report.display().to_string());
    if ctx.no_stream_include_usage {
        args.push("--no-stream-include-usage".into());
    }
    args.extend(ctx.extra_args.iter().cloned());
    args
}

/// Runs `llm-loadgen` with `mode_args` on the client's cores and reads its summary; its
/// console output goes to `<reports>/<name>.log`.
pub fn run(
    ctx: &RunContext,
    name: &str,
    stream: bool,
    mode_args: &[String],
) -> anyhow::Result<LoadgenRun> {
    let report = ctx.reports_dir.join(name);
    let _ = std::fs::remove_dir_all(&report);
    let args = benchmark_args(ctx, stream, mode_args, &report);
    let log_path = ctx.reports_dir.join(format!("{name}.log"));
    let log = std::fs::File::create(&log_path)?;
    let mut cmd = Command::new(&ctx.bin);
    cmd.args(&args).stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
    let start = std::time::Instant::now();
    let status = procs::run_pinned_until(cmd, &ctx.client_cores, ctx.run_timeout)
        .with_context(|| format!("{name}: running {}", ctx.bin.display()))?;
    let wall_s = start.elapsed().as_secs_f64();
    let log = std::fs::read(&log_path).unwrap_or_default();
    let summary_path = report.join("performance/result_summary.json");
    let summary: Summary = match std::fs::read(&summary_path) {
        Ok(bytes) => {
            std::fs::write(ctx.reports_dir.join(format!("{name}.summary.json")), &bytes)?;
            read_summary(&bytes).with_context(|| format!("reading {}", summary_path.display()))?
        }
        Err(_) => {
            let tail = String::from_utf8_lossy(&log);
            let tail: String = tail.lines().rev().take(5).collect::<Vec<_>>().join(" / ");
            bail!("{name}: no result summary (exit {:?}): {tail}", status.code());
        }
    };
    if !ctx.keep_reports {
        let _ = std::fs::remove_dir_all(&report);
    }
    Ok(LoadgenRun { name: name.into(), args, exit_code: status.code(), summary, wall_s })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_reads_the_issue_lag_block() {
        let json = r#"{"n_samples_issued":10,"n_samples_completed":10,"n_samples_failed":0,
            "duration_ns":5,"complete":true,"qps":99.5,"ttft":{},"issue_lag":{"n":10,
            "p50_ns":1,"p99_ns":2,"max_ns":3,"target_qps":100.0,"achieved_qps":98.0}}"#;
        let s = read_summary(json.as_bytes()).unwrap();
        assert_eq!(s.qps, Some(99.5));
        assert_eq!(s.issue_lag.unwrap().achieved_qps, 98.0);
        let no_lag = r#"{"n_samples_issued":1,"n_samples_completed":1,"n_samples_failed":1,
            "duration_ns":5,"complete":true,"qps":null,"issue_lag":null}"#;
        let s = read_summary(no_lag.as_bytes()).unwrap();
        assert!(s.issue_lag.is_none() && s.qps.is_none());
    }

    #[test]
    fn a_failed_sample_fails_the_row() {
        let mut run = LoadgenRun {
            name: "c1000-stream".into(),
            args: Vec::new(),
            exit_code: Some(0),
            summary: Summary::default(),
            wall_s: 1.0,
        };
        assert!(run.check().is_ok());
        run.summary.n_samples_failed = 3;
        assert!(run.check().unwrap_err().to_string().contains("3 samples failed"));
        run.exit_code = Some(4);
        assert!(run.check().unwrap_err().to_string().contains("exited with"));
    }
}
