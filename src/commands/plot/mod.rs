//! `llm-loadgen plot DIR`: pictures of a finished run, as SVG and PNG (plotters).
//!
//! The run is read as `report DIR` reads it: `RunDir::load`, the same basis resolution, and
//! `report::rebuild::replay_table`, which replays events.jsonl into the aggregator's own
//! `SampleTable`. `report::plot_data` takes the per-sample series from that table and does the
//! arithmetic, `pictures` decides which pictures the run has data for, `chart` draws them and
//! `render` writes them.

mod chart;
mod pictures;
mod render;
mod sweep;

use std::path::{Path, PathBuf};

use loadgen_coordinator::metrics::TokenCountSource;

use crate::error::AppError;
use crate::report::plot_data::{lag, series};
use crate::report::rebuild::{self, RunDir};
pub use render::Format;

/// What `plot` is asked to do.
#[derive(Debug, Clone)]
pub struct PlotRequest {
    pub dir: PathBuf,
    pub out: Option<PathBuf>,
    pub format: Format,
    pub token_count_source: Option<TokenCountSource>,
}

/// `plot DIR [--out OUT] [--format svg|png|both] [--token-count-source B]`.
pub fn run(request: &PlotRequest) -> Result<i32, AppError> {
    // A sweep's directory: its curves, from sweep.json (each point's own directory is a run).
    if request.dir.join("sweep.json").is_file() && !request.dir.join("events.jsonl").exists() {
        let plan =
            pictures::Plan { pictures: sweep::pictures(&request.dir)?, ..Default::default() };
        let out = request.out.clone().unwrap_or_else(|| request.dir.join("plots"));
        return write_all(&plan, &out, request.format);
    }
    let run = RunDir::load(&request.dir)?;
    let basis = run.basis(request.token_count_source)?;
    let replayed = rebuild::replay_table(&run, |_| {})?;
    let facts = pictures::RunFacts {
        streaming: run.streaming(),
        basis,
        has_tokenizer: replayed.has_tokenizer,
        tokenizer_named: run.config.model_params.tokenizer_name.is_some(),
    };
    let tracking_start_ns = replayed.replayed.counters.tracking_start_ns;
    let agentic = crate::report::agentic::agentic_summary(
        &replayed.table,
        &replayed.replayed.turn_labels,
        &replayed.replayed.unrecorded_turns,
        &run.metrics_options(basis, replayed.has_tokenizer),
    );
    let series = series::run_series(
        &replayed.table,
        facts.streaming,
        facts.has_tokenizer,
        basis,
        tracking_start_ns,
    );
    drop(replayed);
    if series.spans_ns.is_empty() {
        return Err(AppError::Input(format!(
            "{} has no tracked sample that completed; there is nothing to plot",
            run.dir.join("events.jsonl").display()
        )));
    }
    let mut plan = pictures::performance(&series, facts);
    match issue_lag(&run, &series)? {
        Ok(picture) => plan.pictures.push(("issue_lag", picture)),
        Err(why) => plan.skipped.push(format!("issue_lag: {why}")),
    }
    match pictures::osl_scatter(&series) {
        Ok(picture) => plan.pictures.push(("osl_client_vs_server", picture)),
        Err(why) => plan.skipped.push(format!("osl_client_vs_server: {why}")),
    }
    match pictures::ttft_by_turn(agentic.as_ref(), facts.streaming) {
        Ok(picture) => plan.pictures.push(("ttft_by_turn", picture)),
        Err(why) => plan.skipped.push(format!("ttft_by_turn: {why}")),
    }
    accuracy(&run.dir, &mut plan);
    for note in &plan.skipped {
        eprintln!("note: skipped {note}");
    }
    for note in &plan.notes {
        eprintln!("note: {note}");
    }
    let out = request.out.clone().unwrap_or_else(|| run.dir.join("plots"));
    write_all(&plan, &out, request.format)
}

/// Writes every picture in every format of `format` under `out` and lists them on stdout.
fn write_all(plan: &pictures::Plan, out: &Path, format: Format) -> Result<i32, AppError> {
    std::fs::create_dir_all(out).map_err(|e| {
        AppError::Execution(format!("cannot create {}: {e}; pass a writable --out", out.display()))
    })?;
    let mut listed = String::new();
    for (name, picture) in &plan.pictures {
        for ext in format.extensions() {
            let path = out.join(format!("{name}.{ext}"));
            render::write(picture, ext, &path).map_err(|(drawing, e)| {
                AppError::Execution(if drawing {
                    format!("cannot draw {}: {e}; please report it", path.display())
                } else {
                    format!(
                        "cannot write {}: {e}; free space or pass another --out",
                        path.display()
                    )
                })
            })?;
            listed += &format!("{}\n", path.display());
        }
    }
    crate::commands::print_stdout(&listed)?;
    Ok(0)
}

/// The Poisson issue-lag picture, or why the run has none (`Err` of the outer result: the
/// log cannot be read).
fn issue_lag(
    run: &RunDir,
    series: &series::RunSeries,
) -> Result<Result<chart::Picture, String>, AppError> {
    Ok(lag::run_lags(run)?.map(|r| pictures::issue_lag(series, &r.lags, r.target_qps)))
}

/// The accuracy picture when the run scored accuracy.
fn accuracy(dir: &Path, plan: &mut pictures::Plan) {
    let path = dir.join("accuracy/accuracy_results.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(_) => {
            plan.skipped.push("accuracy: the run has no accuracy/accuracy_results.json".into());
            return;
        }
    };
    let parsed = serde_json::from_str::<serde_json::Value>(&text)
        .map_err(|e| format!("{} is not JSON ({e})", path.display()))
        .and_then(|doc| pictures::accuracy(&doc));
    match parsed {
        Ok((picture, notes)) => {
            plan.pictures.push(("accuracy", picture));
            plan.skipped.extend(notes);
        }
        Err(why) => plan.skipped.push(format!("accuracy: {why}")),
    }
}
