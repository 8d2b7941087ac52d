//! `completions SHELL` and `man`: generated from the clap definitions, so they list exactly
//! what `--help` does.

use std::path::{Path, PathBuf};

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

/// The command tree as the man pages show it: built (so each command knows its full name,
/// `llm-loadgen-benchmark-offline`) and without the `help` subcommand, which has no page.
fn man_command() -> clap::Command {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// Prints the man page (roff) on stdout: the top-level page, whose SUBCOMMANDS section names
/// every command. With `out_dir`, writes one page per command there instead
/// (`llm-loadgen.1`, `llm-loadgen-benchmark-offline.1`, …), so those references resolve, and
/// lists the files written.
pub fn man(out_dir: Option<&Path>) -> Result<i32, AppError> {
    let Some(dir) = out_dir else {
        let mut page = Vec::with_capacity(64 * 1024);
        clap_mangen::Man::new(man_command())
            .render(&mut page)
            .map_err(|e| AppError::Execution(format!("cannot render the man page: {e}")))?;
        super::print_stdout(&String::from_utf8_lossy(&page))?;
        return Ok(0);
    };
    let cannot = |e: std::io::Error| {
        AppError::Setup(format!(
            "cannot write the man pages to {}: {e}; pass a writable --out-dir",
            dir.display()
        ))
    };
    std::fs::create_dir_all(dir).map_err(cannot)?;
    let mut written = Vec::new();
    write_pages(man_command(), dir, &mut written).map_err(cannot)?;
    let list: Vec<String> = written.iter().map(|p| format!("{}\n", p.display())).collect();
    super::print_stdout(&list.concat())?;
    Ok(0)
}

/// Writes the page of `cmd` and of every command under it into `dir`, deepest first.
fn write_pages(cmd: clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
        write_pages(sub, dir, written)?;
    }
    written.push(clap_mangen::Man::new(cmd).generate_to(dir)?);
    Ok(())
}
