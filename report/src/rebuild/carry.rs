//! What a rebuild takes from the run's own files because events.jsonl cannot give it: the
//! scheduler's issue lag, re-sent requests, failure kinds, the endpoint URLs, the version, how
//! the run ended, and (runs with warm-up) the warm-up-inclusive totals. docs/OUTPUT.md
//! ("Post-run tools") names the source of every key.

use std::collections::BTreeMap;
use std::path::Path;

use loadgen_coordinator::metrics::{SampleRow, TokenCountSource};
use loadgen_wire::FailureKind;

use crate::replay::Replayed;
use crate::{
    ClientTokenCounting, ClientWaitInfo, FailureKindCount, IssueLag, LoadPatternInfo,
    ResultSummary, RunInfo, WarmupInfo,
};
use loadgen_plan::dataset::DatasetKind;
use loadgen_plan::error::AppError;
use loadgen_plan::plan::TestMode;
use loadgen_plan::yaml::{Config, LoadPatternKind};

/// Values of the run's result_summary.json, report.txt and final_snapshot.json the log lacks.
#[derive(Debug, Default)]
pub struct Carried {
    pub version: Option<String>,
    pub git_sha: Option<Option<String>>,
    pub interrupted: bool,
    pub incomplete_reason: Option<String>,
    pub issue_lag: Option<IssueLag>,
    /// The run's pool (`connection_pool`): what its client wait is judged against.
    pub connection_pool: Option<ClientWaitInfo>,
    pub requests_resent: Option<u64>,
    pub failure_kinds: Option<Vec<FailureKindCount>>,
    pub urls: Option<Vec<String>>,
    /// Warm-up-inclusive issued, completed, failed and the last record's time, from the
    /// run's final_snapshot.json.
    pub snapshot_totals: Option<[u64; 4]>,
    /// Each endpoint's failures by kind (the summary's `endpoints[].failures`), in the
    /// summary's endpoint order.
    pub endpoint_failures: Option<Vec<BTreeMap<String, u64>>>,
    /// The summary's `client_token_counting` (`live`, `after_run`); `None` without one.
    pub client_token_counting: Option<ClientTokenCounting>,
    /// The live tokenizer threads report.txt names (`counted live by N tokenizer thread(s)`).
    pub live_threads: Option<usize>,
    /// The run's accuracy/accuracy_results.json, when it has one.
    pub accuracy_results: Option<String>,
    /// The run's profiling.json (report.txt's `Profiling` section), when it has one.
    pub profiling: Option<crate::profiling::ProfilingRecord>,
}

/// Reasons `result_summary` derives again from the rebuilt snapshot (they follow the basis),
/// so they are not carried.
const DERIVED_REASONS: [&str; 2] =
    ["client tokenizations were still pending", "under --token-count-source server"];

impl Carried {
    /// Reads what the run's files hold; without a summary, says on stderr what is unknown.
    pub fn read(dir: &Path, summary: Option<&ResultSummary>) -> Carried {
        let mut carried = Carried {
            snapshot_totals: snapshot_totals(dir),
            accuracy_results: crate::read_existing(&dir.join("accuracy/accuracy_results.json"))
                .ok(),
            profiling: read_profiling(dir),
            ..Carried::default()
        };
        let Some(s) = summary else {
            eprintln!(
                "note: {} has no performance/result_summary.json: the issue lag, re-sent \
                 requests, failure kinds (named by the log's error types), endpoint URLs and \
                 whether the run was interrupted are not in events.jsonl; they are left out \
                 or taken from config.yaml and this build",
                dir.display()
            );
            return carried;
        };
        carried.version = Some(s.version.clone()).filter(|v| !v.is_empty());
        carried.git_sha = Some(s.git_sha.clone());
        carried.interrupted = s.state == "interrupted";
        if !s.complete && !carried.interrupted {
            let reason = incomplete_reason(dir);
            carried.incomplete_reason =
                reason.filter(|r| !DERIVED_REASONS.iter().any(|d| r.contains(d)));
        }
        carried.issue_lag = s.issue_lag;
        carried.connection_pool = s.client_wait.pool;
        carried.requests_resent = Some(s.n_requests_resent);
        // A summary the reference wrote names no failure kinds: the log's error types do.
        carried.failure_kinds = (!s.reference_only).then(|| s.failure_kinds.clone());
        carried.client_token_counting = s.client_token_counting;
        carried.live_threads = live_threads(dir);
        if !s.reference_only && !s.endpoints.is_empty() {
            carried.urls = Some(s.endpoints.iter().map(|e| e.url.clone()).collect());
            let failures = s.endpoints.iter().map(|e| e.failures.iter().cloned().collect());
            carried.endpoint_failures = Some(failures.collect());
        }
        carried
    }

    /// The run's endpoint URLs as its report named them: the summary's, else config.yaml's.
    pub fn endpoint_urls(&self, config: &Config) -> Vec<String> {
        if let Some(urls) = self.urls.as_ref().filter(|u| !u.is_empty()) {
            return urls.clone();
        }
        let endpoints = &config.endpoint_config.endpoints;
        if endpoints.is_empty() {
            return vec!["embedded max-throughput stub".to_string()];
        }
        endpoints.iter().map(|u| loadgen_plan::redact::redact(u)).collect()
    }

    /// The failure kinds, and each failed row's kind: the summary's kinds dealt over the
    /// failed rows in order (only the counts matter), per endpoint in a run of several;
    /// without a summary, the log's error types name them.
    ///
    /// An agentic run's dropped turns are told by their place (`agentic::mark_dropped_turns`:
    /// a failed turn after a failed turn of its conversation) before the rest is dealt, so the
    /// report's per-turn figures leave out the same turns as the run's.
    pub fn failures(&self, replayed: &mut Replayed, endpoints: usize) -> Vec<FailureKindCount> {
        let marked = crate::agentic::mark_dropped_turns(&mut replayed.rows, &replayed.turn_labels);
        let Some(kinds) = &self.failure_kinds else {
            return replayed
                .errors
                .iter()
                .map(|e| FailureKindCount {
                    kind: e.error_type.clone(),
                    count: e.count,
                    first_message: e.first_message.clone(),
                })
                .collect();
        };
        let per_endpoint = self.endpoint_failures.as_ref().filter(|_| endpoints > 1);
        let counts: Vec<Vec<(&str, u64)>> = match per_endpoint {
            Some(list) => {
                list.iter().map(|m| m.iter().map(|(k, n)| (k.as_str(), *n)).collect()).collect()
            }
            None => vec![kinds.iter().map(|k| (k.kind.as_str(), k.count)).collect()],
        };
        let mut counts = counts;
        let aborted = FailureKind::TurnAborted.as_str();
        let mut left = marked;
        for (_, n) in counts.iter_mut().flatten().filter(|(k, _)| *k == aborted) {
            let taken = left.min(*n);
            (*n, left) = (*n - taken, left - taken);
        }
        let mut codes: Vec<_> = counts.iter().map(|c| failure_codes(c)).collect();
        let unmarked = |r: &&mut SampleRow| r.failure != FailureKind::TurnAborted as u8;
        for row in replayed.rows.iter_mut().filter(|r| r.failed).filter(unmarked) {
            let e = if per_endpoint.is_some() { usize::from(row.endpoint) } else { 0 };
            let code = codes.get_mut(e).and_then(|c| c.next());
            row.failure = code.unwrap_or(FailureKind::Malformed as u8);
        }
        kinds.clone()
    }

    /// Warm-up samples have no lines, and samples outside tracking (the accuracy phases, the
    /// reference's warm-up) no rows: such a run takes its totals (and the last record's
    /// time) from its final_snapshot.json. Without it an accuracy run is refused, since the
    /// rebuilt snapshot would count less than the run did.
    pub fn untracked_totals(
        &self,
        config: &Config,
        replayed: &mut Replayed,
    ) -> Result<(), AppError> {
        let warmup = config.settings.warmup.enabled && !accuracy_only(config);
        let untracked = replayed.untracked_issued_lines;
        if !warmup && untracked == 0 {
            return Ok(());
        }
        let counters = &mut replayed.counters;
        match self.snapshot_totals {
            Some([issued, completed, failed, last_event_ns]) => {
                counters.total_samples_issued = issued;
                counters.total_samples_completed = completed;
                counters.total_samples_failed = failed;
                counters.last_event_ns = last_event_ns;
            }
            None if declares_accuracy(config) => {
                return Err(AppError::Input(format!(
                    "the run's metrics/final_snapshot.json is gone, and its totals count the \
                     {untracked} accuracy samples that events.jsonl logs outside performance \
                     tracking{}: a rebuild would write less than the run did, so nothing was \
                     rebuilt; restore metrics/final_snapshot.json",
                    if warmup { " and its warm-up samples, which it does not log" } else { "" }
                )));
            }
            None => eprintln!(
                "note: the run had a warm-up, whose samples are not in events.jsonl, and its \
                 metrics/final_snapshot.json is gone: total_samples_* count the tracked \
                 samples only"
            ),
        }
        Ok(())
    }

    /// The report's "Accuracy:" block under `primary`, from the run's accuracy_results.json;
    /// `Ok(None)` for a run that scored nothing. A run that scored but whose results are gone
    /// or unreadable is refused: its report.txt would lose the block.
    pub fn accuracy_block(
        &self,
        config: &Config,
        primary: TokenCountSource,
    ) -> Result<Option<String>, AppError> {
        let Some(text) = &self.accuracy_results else {
            if declares_accuracy(config) && !self.interrupted {
                return Err(AppError::Input(
                    "the run scored accuracy datasets, and its accuracy/accuracy_results.json \
                     is gone: a rebuilt report.txt would lose its Accuracy block, so nothing \
                     was rebuilt; restore accuracy/accuracy_results.json"
                        .into(),
                ));
            }
            return Ok(None);
        };
        crate::accuracy::accuracy_block_from_json(text, primary).map(Some).map_err(|why| {
            AppError::Input(format!(
                "accuracy/accuracy_results.json cannot be read ({why}), so report.txt's \
                 Accuracy block cannot be rebuilt; nothing was rebuilt"
            ))
        })
    }
}

/// An accuracy-only run (`--mode acc`): no performance phase, no warm-up.
fn accuracy_only(config: &Config) -> bool {
    config.test_mode == Some(TestMode::Acc)
}

/// The run scores accuracy: an accuracy dataset, or the performance dataset's own
/// `accuracy_config`.
pub fn declares_accuracy(config: &Config) -> bool {
    accuracy_only(config)
        || config
            .datasets
            .iter()
            .any(|d| d.kind == DatasetKind::Accuracy || d.accuracy_config.is_some())
}

/// The wire codes of `counts` (kind, count), each repeated count times; a dead worker's
/// samples have no rows.
fn failure_codes<'a>(counts: &'a [(&'a str, u64)]) -> impl Iterator<Item = u8> + 'a {
    counts.iter().filter(|(k, _)| *k != FailureKind::WorkerDied.as_str()).flat_map(|(k, n)| {
        let code = FailureKind::ALL.iter().find(|f| f.as_str() == *k).map_or(0, |f| *f as u8);
        std::iter::repeat_n(code, *n as usize)
    })
}

/// The live tokenizer threads the run's report.txt names.
fn live_threads(dir: &Path) -> Option<usize> {
    let text = crate::read_existing(&dir.join("report.txt")).ok()?;
    let at = text.find("counted live by ")? + "counted live by ".len();
    let digits: String = text[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The reason report.txt gives for an incomplete run.
fn incomplete_reason(dir: &Path) -> Option<String> {
    let text = crate::read_existing(&dir.join("report.txt")).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("WARNING: report is incomplete ("))?;
    let end = line.rfind(") — ")?;
    Some(line[..end].to_string())
}

fn snapshot_totals(dir: &Path) -> Option<[u64; 4]> {
    let text = crate::read_existing(&dir.join("metrics/final_snapshot.json")).ok()?;
    let snap: serde_json::Value = serde_json::from_str(&text).ok()?;
    let metrics = snap.get("metrics")?.as_array()?;
    let counter =
        |name: &str| metrics.iter().find(|m| m["name"] == name).and_then(|m| m["value"].as_u64());
    Some([
        counter("total_samples_issued")?,
        counter("total_samples_completed")?,
        counter("total_samples_failed")?,
        snap.get("timestamp_ns")?.as_u64()?,
    ])
}

impl Carried {
    /// The run's `RunInfo`, from config.yaml, the replay and what was carried.
    pub fn run_info(
        &self,
        config: &Config,
        primary: TokenCountSource,
        replayed: &Replayed,
        failures: Vec<FailureKindCount>,
        has_tokenizer: bool,
    ) -> RunInfo {
        let settings = &config.settings;
        let lp = &settings.load_pattern;
        let (target_qps, target_concurrency, legacy) = match lp.kind {
            LoadPatternKind::Poisson => {
                (lp.target_qps, None, Some(lp.use_legacy_loadgen_qps_metrics))
            }
            LoadPatternKind::Concurrency => (None, lp.target_concurrency.map(u64::from), None),
            _ => (None, None, None),
        };
        let w = &settings.warmup;
        let c = self;
        let counters = &replayed.counters;
        let events_has_errors = counters.tracked_samples_failed > 0
            && failures.iter().any(|f| f.kind != FailureKind::WorkerDied.as_str());
        let counting = has_tokenizer.then(|| self.client_counting(config));
        RunInfo {
            version: c.version.clone().unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_string()),
            git_sha: c
                .git_sha
                .clone()
                .unwrap_or_else(|| option_env!("LLM_LOADGEN_GIT_SHA").map(str::to_string)),
            load_pattern: LoadPatternInfo {
                kind: lp.kind.as_str().to_string(),
                target_qps,
                target_concurrency,
                use_legacy_loadgen_qps_metrics: legacy,
            },
            warmup: WarmupInfo {
                enabled: w.enabled && !accuracy_only(config),
                n_requests: w.n_requests,
                salt: w.salt,
                drain: w.drain,
                warmup_random_seed: w.warmup_random_seed,
            },
            scheduler_random_seed: settings.runtime.scheduler_random_seed,
            dataloader_random_seed: settings.runtime.dataloader_random_seed,
            token_count_source: primary,
            embedded_stub: config.endpoint_config.endpoints.is_empty(),
            interrupted: c.interrupted,
            incomplete_reason: c.incomplete_reason.clone(),
            abandoned: counters.abandoned,
            issue_lag: c.issue_lag,
            client_wait: c.connection_pool,
            failures,
            requests_resent: c.requests_resent.unwrap_or(0),
            events_has_errors,
            client_token_counting: counting,
            endpoints: Vec::new(),
            shards: Vec::new(),
            mixed_clocks: replayed.mixed_clocks(),
            agentic: None,
            profiling: c.profiling.clone(),
            goodput: None,
        }
    }

    /// How the run counted its client basis, as its summary says (the threads as its report.txt
    /// names them); a log without our summary (the reference's, or a run whose summary is gone)
    /// was counted by this rebuild.
    fn client_counting(&self, config: &Config) -> ClientTokenCounting {
        let c = self;
        match c.client_token_counting {
            Some(ClientTokenCounting::AfterRun) => ClientTokenCounting::AfterRun,
            Some(ClientTokenCounting::Live { .. }) => {
                let configured = config.settings.drain.metrics_tokenizer_workers;
                let threads = c.live_threads.or(configured.map(|n| n as usize)).unwrap_or(1);
                ClientTokenCounting::Live { threads }
            }
            _ => ClientTokenCounting::Rebuilt,
        }
    }
}

/// The run's `profiling.json`, when it has one that reads (report.txt's `Profiling` section).
fn read_profiling(dir: &Path) -> Option<crate::profiling::ProfilingRecord> {
    let text = crate::read_existing(&dir.join(crate::profiling::PROFILING_FILE)).ok()?;
    serde_json::from_str(&text).ok()
}
