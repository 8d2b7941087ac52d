//! `compare` of sweep directories: the comparison (`loadgen_report::sweep_compare`) as a
//! table or one JSON object.

use std::path::PathBuf;

use crate::error::AppError;
pub use crate::report::sweep_compare::is_sweep;
use crate::report::sweep_compare::{comparison, table};

/// `compare SWEEP SWEEP…`.
pub fn run(dirs: &[PathBuf], json: bool) -> Result<i32, AppError> {
    let c = comparison(dirs)?;
    let text = if json {
        let mut text = serde_json::to_string_pretty(&c)
            .map_err(|e| AppError::Execution(format!("cannot print the comparison: {e}")))?;
        text.push('\n');
        text
    } else {
        table(&c)
    };
    super::print_stdout(&text)?;
    Ok(0)
}
