//! Commands that are not a benchmark run: `init`, `validate-yaml`, `info`, `probe`, `compare`,
//! `completions`, `man`, `sweep` (benchmark runs in a series), and the post-run tools
//! `report`, `merge`, `early-stopping`, `plot` and `check`.

pub mod check;
pub mod compare;
pub mod completions;
pub mod early_stopping;
pub mod info;
pub mod init;
pub mod merge;
pub mod plot;
pub mod probe;
pub mod report;
pub mod sweep;
pub mod sweep_compare;
pub mod sys;
pub mod validate_yaml;

/// Writes `text` to stdout; a closed pipe (`llm-loadgen info | head -1`) is not an error.
pub fn print_stdout(text: &str) -> Result<(), crate::error::AppError> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(crate::error::AppError::Execution(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

/// Prints the notes the plan gives back (resolution's, the checks', the run spec's), one a
/// line on stderr, in their order: the plan prints nothing itself.
pub fn print_notes(notes: &[String]) {
    for note in notes {
        eprintln!("{note}");
    }
}
