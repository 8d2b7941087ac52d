//! `llm-loadgen check DIR…`: the compliance check of finished runs, printed as the reference's
//! `scripts/check_compliance.py` prints it (`report::compliance`).

use std::path::PathBuf;

use crate::error::AppError;
use crate::report::compliance::check_submission;

/// Checks each directory in turn; exit 0 when every check passed, 1 when one failed. An
/// unknown ruleset or model, or a directory that does not exist, is bad input (exit 2).
pub fn run(dirs: &[PathBuf], ruleset: &str, model: &str) -> Result<i32, AppError> {
    let mut all_passed = true;
    for dir in dirs {
        if !dir.is_dir() {
            return Err(AppError::Input(format!(
                "{} is not a directory; give a finished run's report directory",
                dir.display()
            )));
        }
        let report = check_submission(dir, ruleset, model).map_err(|why| {
            AppError::Input(format!("{why}; choose it with --ruleset and --model"))
        })?;
        super::print_stdout(&format!("{}\n\n", report.render()))?;
        all_passed &= report.passed();
    }
    Ok(if all_passed { 0 } else { 1 })
}
