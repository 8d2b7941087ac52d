//! How long a run is: the load pattern, samples to issue, durations, drains and timeouts.

use super::*;

/// The reference's default target rate for sizing the sample count (anchor §3.5).
pub const SAMPLE_SIZING_QPS_DEFAULT: f64 = 10.0;

/// A drain's timeout in ms; `null` (the reference's "wait indefinitely") is `DRAIN_FOREVER_MS`.
pub(super) fn resolve_drain_timeout_ms(seconds: Option<f64>, what: &str) -> Result<u64, AppError> {
    match seconds {
        Some(s) => seconds_to_ms(s, what),
        None => Ok(DRAIN_FOREVER_MS),
    }
}

/// The drain of a `null` timeout: a hundred years, so unbounded for any run, yet an instant
/// plus it cannot overflow (the coordinator adds it to `Instant::now()`).
pub const DRAIN_FOREVER_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

/// Samples to issue (anchor §3.5): `n_samples_to_issue` wins; a zero minimum duration
/// issues the dataset once; otherwise `ceil(qps × duration × 1.1)` (qps 10 when unset),
/// rounded up to a multiple of the dataset size.
pub fn samples_to_issue(
    n_samples_to_issue: Option<u64>,
    min_duration_ms: u64,
    target_qps: Option<f64>,
    dataset_rows: u64,
) -> u64 {
    sample_count(n_samples_to_issue, min_duration_ms, target_qps, dataset_rows).n
}

/// What decided a performance phase's sample count (the summary's "Run length" line).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sizing {
    /// `--num-samples` / `settings.runtime.n_samples_to_issue`.
    Explicit,
    /// A zero minimum duration: the dataset once.
    DatasetOnce,
    /// `ceil(qps × min_duration × 1.1)` = `wanted`, rounded up to whole passes of the dataset;
    /// `qps_given` is false when the reference's sizing rate of 10 stood in for none.
    Duration { min_duration_ms: u64, qps: f64, qps_given: bool, wanted: u64 },
    /// Every turn of an agentic dataset (its conversations end the run).
    AllTurns,
    /// An accuracy-only run: no performance phase.
    AccuracyOnly,
}

/// The performance phase's sample count (the whole plan's; a shard issues its share), the
/// dataset's rows and what sized it: one resolution step, so what the summary says sized a
/// run is what did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SampleCount {
    pub n: u64,
    pub dataset_rows: u64,
    pub sizing: Sizing,
}

/// `samples_to_issue`, with what decided it.
pub fn sample_count(
    n_samples_to_issue: Option<u64>,
    min_duration_ms: u64,
    target_qps: Option<f64>,
    dataset_rows: u64,
) -> SampleCount {
    let count = |n, sizing| SampleCount { n, dataset_rows, sizing };
    if let Some(n) = n_samples_to_issue {
        return count(n, Sizing::Explicit);
    }
    let rows = dataset_rows.max(1);
    if min_duration_ms == 0 {
        return count(rows, Sizing::DatasetOnce);
    }
    let qps = target_qps.unwrap_or(SAMPLE_SIZING_QPS_DEFAULT);
    let wanted = (qps * (min_duration_ms as f64 / 1000.0) * 1.1).ceil().max(1.0) as u64;
    let qps_given = target_qps.is_some();
    count(
        wanted.div_ceil(rows) * rows,
        Sizing::Duration { min_duration_ms, qps, qps_given, wanted },
    )
}

impl SampleCount {
    /// The summary's line on what sized the run, from which settings, and how long it was
    /// meant to take under `pattern`.
    pub fn describe(&self, pattern: &LoadPattern) -> String {
        let (n, rows) = (self.n, self.dataset_rows);
        let why = match self.sizing {
            Sizing::Explicit => "--num-samples (settings.runtime.n_samples_to_issue)".to_string(),
            Sizing::DatasetOnce => format!("the {rows}-row dataset once (--duration 0)"),
            Sizing::AllTurns => return format!("Run length: {n} turns, every turn of the agentic dataset; its conversations end the run"),
            Sizing::AccuracyOnly => return "Run length: no performance samples (accuracy datasets only)".to_string(),
            Sizing::Duration { min_duration_ms, qps, qps_given, wanted } => {
                let rate = if qps_given { "--target-qps" } else { "the sizing rate used when no --target-qps is set" };
                let passes = if wanted == n {
                    String::new()
                } else {
                    let passes = n / rows.max(1);
                    let plural = if passes == 1 { "" } else { "es" };
                    format!(", rounded up to whole passes of the {rows}-row dataset ({passes} pass{plural})")
                };
                format!(
                    "--duration {} (settings.runtime.min_duration_ms), which sizes the count, \
                     not the time: {qps} QPS ({rate}) x {} x 1.1 = {wanted}{passes}",
                    seconds(min_duration_ms),
                    seconds(min_duration_ms)
                )
            }
        };
        let time = match pattern {
            LoadPattern::Poisson { target_qps, .. } => {
                format!("at {target_qps} QPS, meant to take about {:.1} s", n as f64 / target_qps)
            }
            LoadPattern::Offline => {
                "max_throughput issues them all at once, so the server's speed sets the time".into()
            }
            LoadPattern::Concurrency { n: c } | LoadPattern::Agentic { n: c } => {
                format!("{c} in flight at a time, so the server's speed sets the time")
            }
        };
        format!("Run length: {n} samples, from {why}; {time}; --num-samples N issues exactly N")
    }
}

/// `ms` as seconds for a sentence: `10 s`, `0.5 s`.
fn seconds(ms: u64) -> String {
    format!("{} s", ms as f64 / 1000.0)
}

pub(super) fn resolve_load_pattern(config: &Config) -> Result<LoadPattern, AppError> {
    let lp = &config.settings.load_pattern;
    let kind = run_kind(config);
    match kind {
        BenchType::Offline | BenchType::Online => {}
        other => {
            return Err(AppError::Input(format!(
                "config type {:?} is not supported yet (use offline or online)",
                other.as_str()
            )))
        }
    }
    if let Some(qps) = lp.target_qps {
        if !(qps.is_finite() && qps > 0.0) {
            return Err(AppError::Input(format!("target qps must be above 0, got {qps}")));
        }
    }
    if lp.target_concurrency == Some(0) {
        return Err(AppError::Input("target concurrency must be above 0, got 0".into()));
    }
    let contradiction = |msg: String| Err(AppError::Setup(msg));
    match (kind, lp.kind) {
        (BenchType::Offline, LoadPatternKind::MaxThroughput) => {
            if let Some(c) = lp.target_concurrency {
                return contradiction(format!(
                    "--concurrency {c} does not apply to benchmark offline (max_throughput); \
                     use benchmark online --load-pattern concurrency --concurrency {c}"
                ));
            }
            Ok(LoadPattern::Offline)
        }
        (BenchType::Offline, kind) => contradiction(format!(
            "benchmark offline uses load pattern max_throughput, got {}; use benchmark online",
            kind.as_str()
        )),
        (_, LoadPatternKind::Poisson) => match (lp.target_qps, lp.target_concurrency) {
            (_, Some(c)) => contradiction(format!(
                "--concurrency {c} does not apply to load pattern poisson (it uses --target-qps)"
            )),
            (Some(q), None) => {
                let seed = config.settings.runtime.scheduler_random_seed;
                Ok(LoadPattern::Poisson { target_qps: q, seed })
            }
            (None, None) => contradiction("load pattern poisson needs --target-qps".into()),
        },
        (_, LoadPatternKind::Concurrency) => match lp.target_concurrency {
            Some(n) => Ok(LoadPattern::Concurrency { n: u64::from(n) }),
            None => contradiction("load pattern concurrency needs --concurrency N".into()),
        },
        (_, LoadPatternKind::AgenticInference) => match lp.target_concurrency {
            Some(n) if n > 0 => Ok(LoadPattern::Agentic { n: u64::from(n) }),
            // The reference's rule: conversations in flight are always given.
            _ => contradiction(
                "load pattern agentic_inference needs --concurrency N (settings.load_pattern.\
                 target_concurrency): the conversations in flight at once"
                    .into(),
            ),
        },
        (_, LoadPatternKind::MaxThroughput) => contradiction(
            "benchmark online needs --load-pattern poisson (with --target-qps) or concurrency \
             (with --concurrency); for max_throughput use benchmark offline"
                .into(),
        ),
        (_, kind) => contradiction(format!("load pattern {} is not supported", kind.as_str())),
    }
}

pub(super) fn check_durations(runtime: &Runtime) -> Result<Option<u64>, AppError> {
    let (min, max) = (runtime.min_duration_ms, runtime.max_duration_ms);
    if max == 0 {
        return Ok(None);
    }
    if runtime.n_samples_to_issue.is_none() && max < min {
        return Err(AppError::Setup(format!(
            "--runtime.max-duration-ms {max} is below the minimum duration {min} ms \
             (--duration); raise it, lower --duration, or give --num-samples"
        )));
    }
    Ok(Some(max))
}

/// The per-request timeout in ns (0 = none): positive and finite seconds, as `--timeout`
/// and YAML `timeout:` give it (the reference's key, which it accepts but does not use).
pub fn resolve_request_timeout(seconds: Option<f64>) -> Result<u64, AppError> {
    let Some(s) = seconds else { return Ok(0) };
    if !(s.is_finite() && s > 0.0) {
        return Err(AppError::Input(format!(
            "--timeout {s} is not valid (YAML timeout:); give a positive number of seconds per \
             request, or leave it out for none"
        )));
    }
    // At least 1 ns so that a tiny timeout is not read as none; u64 ns covers 584 years.
    Ok(((s * 1e9).round() as u64).max(1))
}

/// Zero samples would mean nothing to measure: the reference refuses them (`gt=0`) rather
/// than falling back to the whole dataset, and so does this.
pub(super) fn check_sample_counts(config: &Config) -> Result<(), AppError> {
    if config.settings.runtime.n_samples_to_issue == Some(0) {
        return Err(AppError::Input(
            "--num-samples 0 (settings.runtime.n_samples_to_issue) is not valid; give a \
             positive count, or leave it out to size the run from --duration"
                .into(),
        ));
    }
    if let Some(d) = config.datasets.iter().find(|d| d.samples == Some(0)) {
        return Err(AppError::Input(format!(
            "dataset {}: samples 0 (datasets[].samples, --dataset …,samples=N) is not valid; \
             give a positive count, or leave it out to use every row",
            d.path
        )));
    }
    Ok(())
}

pub(super) fn seconds_to_ms(seconds: f64, what: &str) -> Result<u64, AppError> {
    if !(seconds.is_finite() && seconds >= 0.0) {
        return Err(AppError::Input(format!("{what} timeout {seconds} s is not valid")));
    }
    Ok((seconds * 1000.0).round() as u64)
}

/// The warm-up phase: `warmup.n_requests` samples, else the dataset once; none unless enabled.
/// A salted warm-up needs a text prompt on every row (the reference's `validate_saltable`); an
/// unsalted one is warned about (in `notes`), as the reference warns.
pub(super) fn resolve_warmup(
    config: &Config,
    dataset: &Dataset,
    notes: &mut Vec<String>,
) -> Result<Warmup, AppError> {
    let w = &config.settings.warmup;
    let rows = dataset.rows.len() as u64;
    let samples = if w.enabled { w.n_requests.unwrap_or(rows) } else { 0 };
    if w.enabled && w.salt {
        check_saltable(dataset)?;
        if samples > SALTED_WARMUP_SAMPLES_MAX {
            return Err(AppError::Input(format!(
                "warmup.n_requests {samples} with warmup.salt: each salted warm-up request is \
                 built before the run, so at most {SALTED_WARMUP_SAMPLES_MAX} are allowed; give \
                 a smaller --warmup-requests"
            )));
        }
    } else if w.enabled {
        notes.push(
            "warning: warm-up without salt (--warmup-salt) sends the dataset's prompts as they \
             are, so a server's prefix cache may answer the measured phase from them and \
             understate its latency; add --warmup-salt on text-prompt datasets"
                .to_string(),
        );
    }
    Ok(Warmup {
        enabled: w.enabled,
        samples,
        requests: w.n_requests,
        drain: w.drain,
        drain_timeout_ms: resolve_drain_timeout_ms(
            config.settings.drain.warmup_timeout_s,
            "warm-up drain",
        )?,
        random_seed: w.warmup_random_seed,
        salt: w.salt,
    })
}

/// Salted warm-up samples allowed at most: each is a request built before the run.
pub const SALTED_WARMUP_SAMPLES_MAX: u64 = 1_000_000;

/// Every row can take a salt: a text prompt, no token ids and no messages (either would be sent
/// in place of the salted prompt).
fn check_saltable(dataset: &Dataset) -> Result<(), AppError> {
    let why = |r: &crate::dataset::Row| {
        if r.token_ids.is_some() {
            Some("carries token ids (input_tokens), which are sent instead of the prompt")
        } else if r.messages.is_some() {
            Some("carries messages, which are sent instead of the prompt")
        } else if r.prompt.is_none() {
            Some("has no text prompt")
        } else {
            None
        }
    };
    match dataset.rows.iter().enumerate().find_map(|(i, r)| why(r).map(|w| (i, w))) {
        Some((i, what)) => Err(AppError::Input(format!(
            "warmup.salt (--warmup-salt) needs a text prompt on every row, but dataset {} row \
             {i} {what}; leave out --warmup-salt (warmup.salt: false) for this dataset",
            dataset.name
        ))),
        None => Ok(()),
    }
}
