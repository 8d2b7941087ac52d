//! Rebuilding a finished run's report.txt, result_summary.json and final_snapshot.json from
//! its events.jsonl, through the run's own metrics and writers (`report DIR`, and `merge`,
//! `plot` and `early-stopping`, which read a run the same way).
//!
//! The log is replayed into the same `SampleTable` and `RunCounters` the run's aggregator
//! fills (`replay`), then `final_snapshot`, `result_summary` and `write_report_files` run as
//! in `src/run.rs`. What the log cannot give is carried from the run's own files (`carry`).

pub mod basis;
mod carry;

use std::path::{Path, PathBuf};

use loadgen_coordinator::metrics::column::Column;
use loadgen_coordinator::metrics::{
    endpoint_stats, final_snapshot, MetricsOptions, RunState, SampleTable, Snapshot,
    TokenCountSource,
};

use crate::replay::{read, Replay, Replayed, UuidMap};
use crate::{
    report_txt, result_summary, with_accuracy_block, write_report_files, EndpointInfo, OpenDir,
    ResultSummary, RunInfo, Unwritten,
};
pub use carry::Carried;
use loadgen_plan::error::AppError;
use loadgen_plan::tokenizer::Tokenizer;
use loadgen_plan::yaml::{BenchType, Config, LoadPatternKind, Streaming};

/// A finished run's directory, read: its config and whatever of its own reports it has.
pub struct RunDir {
    pub dir: PathBuf,
    pub config: Config,
    pub config_yaml: serde_yaml_ng::Value,
    /// `performance/result_summary.json`, when there is one.
    pub summary: Option<ResultSummary>,
    pub carried: Carried,
}

impl RunDir {
    /// Reads config.yaml (required) and the run's summary, report.txt and snapshot (if any).
    pub fn load(dir: &Path) -> Result<RunDir, AppError> {
        let events = dir.join("events.jsonl");
        if !events.is_file() {
            return Err(AppError::Input(format!(
                "{} has no events.jsonl; give the report directory of a finished run",
                dir.display()
            )));
        }
        let config_path = dir.join("config.yaml");
        let text = crate::read_existing(&config_path).map_err(|e| {
            AppError::Input(format!(
                "cannot read {}: {e}; the rebuild needs the run's config.yaml",
                config_path.display()
            ))
        })?;
        let config = Config::from_yaml_str(&text, &config_path.display().to_string())?;
        let config_yaml = serde_yaml_ng::from_str(&text).unwrap_or(serde_yaml_ng::Value::Null);
        let summary_path = dir.join("performance/result_summary.json");
        let summary = match crate::read_existing(&summary_path) {
            Ok(text) => Some(read_summary(dir, &summary_path, &text)?),
            Err(_) => None,
        };
        let carried = Carried::read(dir, summary.as_ref());
        Ok(RunDir { dir: dir.to_path_buf(), config, config_yaml, summary, carried })
    }

    /// The basis a tool reports under (the flag, else the run's), with the note on stderr.
    pub fn basis(&self, flag: Option<TokenCountSource>) -> Result<TokenCountSource, AppError> {
        let (basis, origin) =
            basis::resolve_basis(flag, self.summary.as_ref(), Some(&self.config_yaml))
                .map_err(AppError::Input)?;
        if let Some(note) = basis::default_note(origin) {
            eprintln!("{note}");
        }
        Ok(basis)
    }

    /// The run's client tokenizer, as config.yaml names it (the model name when it names
    /// none); `None`, said on stderr, when it cannot be loaded here: the client basis is then
    /// absent, as in a run without a tokenizer.
    pub fn tokenizer(&self) -> Result<Option<Tokenizer>, AppError> {
        let params = &self.config.model_params;
        let mut tok = match &params.tokenizer_name {
            Some(spec) => match Tokenizer::load(spec) {
                Ok(tok) => tok,
                Err(e) => {
                    eprintln!(
                        "warning: the run's tokenizer {spec:?} cannot be loaded here ({e}); \
                         the client basis is left out of the rebuild"
                    );
                    return Ok(None);
                }
            },
            None => match Tokenizer::load(params.name.as_deref().unwrap_or_default()) {
                Ok(tok) => tok,
                Err(_) => return Ok(None),
            },
        };
        if let Some(file) = &self.config.chat_template {
            tok.override_chat_template(Path::new(file))?;
        }
        Ok(Some(tok))
    }

    /// Replays events.jsonl; a bad line is bad input naming the line.
    pub fn replay(&self, tokenizer: Option<&Tokenizer>) -> Result<Replayed, AppError> {
        let path = self.dir.join("events.jsonl");
        let input_error =
            |e: std::io::Error| AppError::Input(format!("cannot read {}: {e}", path.display()));
        let reader = read::open(&path).map_err(input_error)?;
        let mut replay = Replay::new(tokenizer, self.sample_index());
        read::for_each_event(reader, |event, line| replay.apply(event, line)).map_err(
            |e| match e {
                read::ReadError::Io(e) => input_error(e),
                read::ReadError::Line(e) => AppError::Input(format!(
                    "{} ({}): nothing was rebuilt; the log must be the run's own, whole",
                    e,
                    path.display()
                )),
            },
        )?;
        Ok(replay.finish())
    }

    /// `sample_idx_map.json`'s performance phase: uuid → dataset row (empty when unreadable:
    /// the prompts are then counted one by one). Streamed, so a long run's map is never held
    /// as text.
    pub(crate) fn sample_index(&self) -> UuidMap<u32> {
        let Ok(file) = crate::open_existing(&self.dir.join("sample_idx_map.json")) else {
            return UuidMap::default();
        };
        let reader = std::io::BufReader::with_capacity(1 << 20, file);
        let mut de = serde_json::Deserializer::from_reader(reader);
        match serde::Deserialize::deserialize(&mut de) {
            Ok(IdxMap(map)) => map,
            Err(_) => UuidMap::default(),
        }
    }

    /// Whether the run streamed: config.yaml's resolved setting (`auto` as the run resolves
    /// it: on for online runs).
    pub fn streaming(&self) -> bool {
        match self.config.model_params.streaming {
            Streaming::On => true,
            Streaming::Off => false,
            Streaming::Auto => self.config.kind == BenchType::Online,
        }
    }

    /// The metrics options of the run under `primary`.
    pub fn metrics_options(
        &self,
        primary: TokenCountSource,
        has_tokenizer: bool,
    ) -> MetricsOptions {
        let lp = &self.config.settings.load_pattern;
        MetricsOptions {
            streaming: self.streaming(),
            early_stopping: self.config.settings.early_stopping.enabled,
            primary,
            legacy_loadgen_qps: lp.kind == LoadPatternKind::Poisson
                && lp.use_legacy_loadgen_qps_metrics,
            has_tokenizer,
        }
    }
}

/// The run's result_summary.json: text that is not JSON is refused as such, JSON that is not a
/// summary names the run's directory.
fn read_summary(dir: &Path, path: &Path, text: &str) -> Result<ResultSummary, AppError> {
    serde_json::from_str(text).map_err(|e| {
        AppError::Input(if e.is_syntax() || e.is_eof() {
            format!("{} is not JSON ({e}); move it away to rebuild without it", path.display())
        } else {
            format!("result_summary.json in {} cannot be read: {e}", dir.display())
        })
    })
}

/// The rebuilt run: the three documents the run wrote from its table, and the
/// "Accuracy:" block its report.txt and console had.
pub struct Rebuilt {
    pub snapshot: Snapshot,
    pub summary: ResultSummary,
    pub info: RunInfo,
    pub accuracy_block: Option<String>,
}

/// The replayed log as the run's table: its rows, their chunk gaps and the counters.
pub struct ReplayedTable {
    pub table: SampleTable,
    pub replayed: Replayed,
    pub has_tokenizer: bool,
}

/// Replays the run's log with its tokenizer into the run's own `SampleTable` (the rows copied
/// into the table's columns and freed, as in run.rs); `prepare` sees the rows first. `plot`
/// draws from the same table.
pub fn replay_table(
    run: &RunDir,
    prepare: impl FnOnce(&mut Replayed),
) -> Result<ReplayedTable, AppError> {
    let tokenizer = run.tokenizer()?;
    let mut replayed = run.replay(tokenizer.as_ref())?;
    prepare(&mut replayed);
    let rows = std::mem::take(&mut replayed.rows);
    let mut table = SampleTable::with_capacity(rows.len());
    for row in &rows {
        table.push(row);
    }
    drop(rows);
    table.set_chunk_delta_ns(Column::from_vec(
        "chunk_delta_ns",
        std::mem::take(&mut replayed.chunk_delta_ns),
    ));
    Ok(ReplayedTable { table, replayed, has_tokenizer: tokenizer.is_some() })
}

/// Rebuilds the run in `run` under `primary`. Whatever would make a file differ from the
/// run's own (a multi-endpoint log without endpoints, an accuracy run whose results or
/// totals are gone) is refused here, before anything is written.
pub fn rebuild(run: &RunDir, primary: TokenCountSource) -> Result<Rebuilt, AppError> {
    let urls = run.carried.endpoint_urls(&run.config);
    let mut failures = Vec::new();
    let replayed = replay_table(run, |r| failures = run.carried.failures(r, urls.len()))?;
    let ReplayedTable { table, mut replayed, has_tokenizer } = replayed;
    if urls.len() > 1 && replayed.endpoint_lines == 0 && !table.is_empty() {
        return Err(AppError::Input(format!(
            "{} is a run over {} endpoints whose events.jsonl does not say which endpoint each \
             sample went to (it was written before sample.complete lines named it), so its \
             per-endpoint counts cannot be rebuilt; nothing was rebuilt",
            run.dir.display(),
            urls.len()
        )));
    }
    run.carried.untracked_totals(&run.config, &mut replayed)?;
    let accuracy_block = run.carried.accuracy_block(&run.config, primary)?;
    if let Some(mixed) = replayed.mixed_clocks() {
        eprintln!("note: {}", mixed.sentence());
    }
    replayed.counters.requests_resent = run.carried.requests_resent.unwrap_or(0);
    let opts = run.metrics_options(primary, has_tokenizer);
    let state = if run.carried.interrupted {
        RunState::Interrupted
    } else if run.carried.incomplete_reason.is_some() {
        RunState::Incomplete
    } else {
        RunState::Complete
    };
    let snapshot = final_snapshot(&table, &replayed.counters, &opts, state);
    let mut info = run.carried.run_info(&run.config, primary, &replayed, failures, has_tokenizer);
    info.agentic = crate::agentic::agentic_summary(
        &table,
        &replayed.turn_labels,
        &replayed.unrecorded_turns,
        &opts,
    );
    let objectives =
        loadgen_plan::plan::slo::resolve_slo(run.config.settings.slo.as_deref(), true)?;
    info.goodput = crate::goodput::goodput_of_run(&table, &objectives, primary, has_tokenizer);
    let stats = endpoint_stats(&table, urls.len());
    info.endpoints =
        urls.iter().zip(stats).map(|(url, stat)| EndpointInfo { url: url.clone(), stat }).collect();
    let summary = result_summary(&snapshot, &info);
    Ok(Rebuilt { snapshot, summary, info, accuracy_block })
}

/// Writes a rebuilt report's files into `out`; the first that could not be written is exit 4,
/// named with why.
pub fn write_rebuilt_files(
    out: &Path,
    snapshot: &Snapshot,
    summary: &ResultSummary,
    info: &RunInfo,
    accuracy_block: Option<&str>,
) -> Result<(), AppError> {
    let dir = OpenDir::open(out).map_err(|e| {
        AppError::Setup(format!("cannot open {}: {e}; pass a writable --out", out.display()))
    })?;
    let mut unwritten = write_report_files(&dir, snapshot, summary, info);
    if let Some(block) = accuracy_block.filter(|_| unwritten.is_empty()) {
        // As the run writes it: report.txt again, with the block after the TPS line.
        let text = with_accuracy_block(&report_txt(summary, info), block);
        if let Err(error) = dir.write_atomic("report.txt", text.as_bytes()) {
            unwritten.push(Unwritten { file: "report.txt", error });
        }
    }
    match unwritten.first() {
        Some(first) => Err(AppError::Execution(format!(
            "cannot write {} in {}: {}; free space or pass another --out",
            first.file,
            out.display(),
            first.error
        ))),
        None => Ok(()),
    }
}

/// `{"performance": {uuid: row}, <other phases>: …}`, keeping the performance phase only.
struct IdxMap(UuidMap<u32>);

impl<'de> serde::Deserialize<'de> for IdxMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, Visitor};
        struct Phases;
        struct Rows;
        impl<'de> Visitor<'de> for Rows {
            type Value = UuidMap<u32>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of sample uuids to dataset rows")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut out = UuidMap::with_capacity_and_hasher(
                    map.size_hint().unwrap_or(0),
                    Default::default(),
                );
                while let Some((uuid, row)) = map.next_entry::<std::borrow::Cow<'_, str>, u32>()? {
                    if let Ok(uuid) = u128::from_str_radix(&uuid, 16) {
                        out.insert(uuid, row);
                    }
                }
                Ok(out)
            }
        }
        struct RowsSeed;
        impl<'de> serde::de::DeserializeSeed<'de> for RowsSeed {
            type Value = UuidMap<u32>;
            fn deserialize<D: serde::Deserializer<'de>>(
                self,
                d: D,
            ) -> Result<Self::Value, D::Error> {
                d.deserialize_map(Rows)
            }
        }
        impl<'de> Visitor<'de> for Phases {
            type Value = IdxMap;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of phases")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IdxMap, A::Error> {
                let mut out = UuidMap::default();
                while let Some(phase) = map.next_key::<std::borrow::Cow<'_, str>>()? {
                    if phase == "performance" {
                        out = map.next_value_seed(RowsSeed)?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(IdxMap(out))
            }
        }
        d.deserialize_map(Phases)
    }
}
