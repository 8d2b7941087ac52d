//! `completions SHELL` and `man`: generated from the clap definitions, so they list exactly
//! what `--help` does.

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::AppError;

/// Prints the completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<i32, AppError> {
    let mut cmd = Cli::command();
    let mut script = Vec::with_capacity(64 * 1024);
    clap_complete::generate(shell, &mut cmd, "llm-loadgen", &mut script);
    super::print_stdout(&String::from_utf8_lossy(&script))?;
    Ok(0)
}

/// Prints the man page (roff) on stdout: the top-level page, whose SUBCOMMANDS section names
/// every command (each command's own flags are in its `--help` and docs/CLI.md).
pub fn man() -> Result<i32, AppError> {
    let mut page = Vec::with_capacity(64 * 1024);
    let man = clap_mangen::Man::new(Cli::command());
    man.render(&mut page)
        .map_err(|e| AppError::Execution(format!("cannot render the man page: {e}")))?;
    super::print_stdout(&String::from_utf8_lossy(&page))?;
    Ok(0)
}
