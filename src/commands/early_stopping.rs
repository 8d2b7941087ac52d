//! `llm-loadgen early-stopping DIR`: the MLPerf early-stopping estimates of a finished run
//! (`report::early_stop`), printed on stdout as the reference's
//! `scripts/early_stopping_estimate_from_events.py` prints them.

use loadgen_coordinator::metrics::TokenCountSource;

use crate::cli::EarlyStoppingArgs;
use crate::error::AppError;
use crate::report::early_stop::{fallback_targets, report_text, DEFAULT_PERCENTILES};
use crate::report::rebuild::{replay_table, ReplayedTable, RunDir};

/// `early-stopping DIR`. Returns the exit code.
pub fn run(args: &EarlyStoppingArgs) -> Result<i32, AppError> {
    let fallback = fallback_targets(args.percentiles.as_deref().unwrap_or(DEFAULT_PERCENTILES))?;
    let run = RunDir::load(&args.dir)?;
    let basis = run.basis(args.token_count_source)?;
    // The replay alone: the series need no endpoint, failure kind or carried total, so a run
    // of several endpoints needs no endpoint on its lines.
    let ReplayedTable { table, replayed, has_tokenizer } = replay_table(&run, |_| {})?;
    if let Some(mixed) = replayed.mixed_clocks() {
        eprintln!("note: {}", mixed.sentence());
    }
    if basis == TokenCountSource::Client && !has_tokenizer {
        eprintln!("NOTE: no tokenizer in the run's config.yaml -> TPOT skipped");
    }
    let text = report_text(&run, &table, basis, has_tokenizer, &fallback);
    crate::commands::print_stdout(&text)?;
    Ok(0)
}
