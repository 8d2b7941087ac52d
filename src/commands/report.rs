//! `llm-loadgen report DIR`: rebuilds a finished run's report.txt, result_summary.json and
//! final_snapshot.json from its events.jsonl (`report::rebuild`), writes them and prints the
//! console summary.

use std::path::PathBuf;

use loadgen_coordinator::metrics::TokenCountSource;

use crate::error::AppError;
use crate::report::rebuild::{rebuild, write_rebuilt_files, RunDir};
use crate::report::with_accuracy_block;

/// What `report` is asked to do.
#[derive(Debug, Clone)]
pub struct ReportRequest {
    pub dir: PathBuf,
    pub token_count_source: Option<TokenCountSource>,
    pub out: Option<PathBuf>,
}

/// `report DIR [--token-count-source B] [--out OTHER]`. Returns the exit code.
pub fn run(request: &ReportRequest) -> Result<i32, AppError> {
    let run = RunDir::load(&request.dir)?;
    let primary = run.basis(request.token_count_source)?;
    let rebuilt = rebuild(&run, primary)?;
    let out = request.out.as_deref().unwrap_or(&request.dir);
    std::fs::create_dir_all(out).map_err(|e| {
        AppError::Setup(format!("cannot create {}: {e}; pass a writable --out", out.display()))
    })?;
    // Held while the files are rewritten: a run still writing there is refused.
    let _lock = crate::report::dir::lock_existing(out)?;
    let block = rebuilt.accuracy_block.as_deref();
    write_rebuilt_files(out, &rebuilt.snapshot, &rebuilt.summary, &rebuilt.info, block)?;
    let mut console = crate::report::console_summary(&rebuilt.summary, &rebuilt.info, out);
    if let Some(block) = block {
        console = with_accuracy_block(&console, block);
    }
    crate::commands::print_stdout(&crate::redact::redact(&console))?;
    Ok(0)
}
