//! `completions SHELL` and `man`: generated from the clap definitions, so they list exactly
//! what `--help` does.

use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::AppError;

/// Prints the completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) -> Result<i32, AppError> {
    let mut cmd = crate::cli::command();
    let mut script = Vec::with_capacity(64 * 1024);
    clap_complete::generate(shell, &mut cmd, "llm-loadgen", &mut script);
    super::print_stdout(&String::from_utf8_lossy(&script))?;
    Ok(0)
}

/// The command tree as the man pages show it: built (so each command knows its full name,
/// `llm-loadgen-benchmark-offline`) and without the `help` subcommand, which has no page;
/// without `--help`'s closing exit codes, which each page has as its EXIT STATUS section.
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
        render(man_command(), &mut page)
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
    let path = dir.join(clap_mangen::Man::new(cmd.clone()).get_filename());
    let mut page = Vec::with_capacity(16 * 1024);
    render(cmd, &mut page)?;
    std::fs::write(&path, page)?;
    written.push(path);
    Ok(())
}

/// One page: clap_mangen's sections in its order, with EXIT STATUS (man-pages(7)'s name for
/// it) where its EXTRA section would go. Each section clap_mangen renders alone repeats roff's
/// two-line preamble; the page keeps the first.
fn render(cmd: clap::Command, page: &mut Vec<u8>) -> std::io::Result<()> {
    let has_subcommands = cmd.get_subcommands().any(|s| !s.is_hide_set());
    let man = clap_mangen::Man::new(cmd);
    let mut raw = Vec::with_capacity(16 * 1024);
    man.render_title(&mut raw)?;
    man.render_name_section(&mut raw)?;
    man.render_synopsis_section(&mut raw)?;
    man.render_description_section(&mut raw)?;
    man.render_options_section(&mut raw)?;
    if has_subcommands {
        man.render_subcommands_section(&mut raw)?;
    }
    raw.extend_from_slice(exit_status_roff().as_bytes());
    man.render_version_section(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let mut preamble_seen = 0;
    for line in text.split_inclusive('\n') {
        let preamble = line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq");
        if preamble {
            preamble_seen += 1;
            if preamble_seen > 2 {
                continue;
            }
        }
        page.extend_from_slice(line.as_bytes());
    }
    Ok(())
}

/// The EXIT STATUS section in roff, from the table `--help` prints.
fn exit_status_roff() -> String {
    let mut roff = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in crate::cli::EXIT_CODES {
        // A line that starts with a dot or quote would be a request; none does.
        roff.push_str(&format!(".TP\n\\fB{code}\\fR\n{}\n", meaning.replace('-', "\\-")));
    }
    roff
}
