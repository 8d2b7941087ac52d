//! The binary's error type: one variant per exit code of SPEC §1.

use std::fmt;

/// An error that ends the program, carrying the message shown to the user.
///
/// Each variant maps to one exit code (`exit_code`): usage 1, bad input 2, setup 3,
/// execution 4, interrupted 130. Messages are lowercase and name the offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppError {
    /// A command line that cannot be understood (exit 1).
    Usage(String),
    /// Bad input: dataset, YAML, a value out of range (exit 2).
    Input(String),
    /// The run cannot be set up: tokenizer, endpoint, contradictory settings (exit 3).
    Setup(String),
    /// The run failed or its report is incomplete under the primary basis (exit 4).
    Execution(String),
    /// Stopped by Ctrl-C or SIGTERM (exit 130).
    Interrupted,
}

impl AppError {
    /// The process exit code for this error (SPEC §1).
    pub fn exit_code(&self) -> i32 {
        match self {
            AppError::Usage(_) => 1,
            AppError::Input(_) => 2,
            AppError::Setup(_) => 3,
            AppError::Execution(_) => 4,
            AppError::Interrupted => 130,
        }
    }
}

impl fmt::Display for AppError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppError::Usage(m) => write!(f, "usage error: {m}"),
            AppError::Input(m) => write!(f, "input error: {m}"),
            AppError::Setup(m) => write!(f, "setup error: {m}"),
            AppError::Execution(m) => write!(f, "execution error: {m}"),
            AppError::Interrupted => write!(f, "interrupted"),
        }
    }
}

impl std::error::Error for AppError {}

impl From<anyhow::Error> for AppError {
    fn from(err: anyhow::Error) -> Self {
        AppError::Execution(format!("{err:#}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_spec() {
        let cases = [
            (AppError::Usage("u".into()), 1, "usage error: u"),
            (AppError::Input("i".into()), 2, "input error: i"),
            (AppError::Setup("s".into()), 3, "setup error: s"),
            (AppError::Execution("e".into()), 4, "execution error: e"),
            (AppError::Interrupted, 130, "interrupted"),
        ];
        for (err, code, text) in cases {
            assert_eq!(err.exit_code(), code);
            assert_eq!(err.to_string(), text);
        }
    }

    #[test]
    fn anyhow_errors_are_execution_errors_with_their_context() {
        let err = anyhow::anyhow!("root cause").context("while writing");
        let app: AppError = err.into();
        assert_eq!(app, AppError::Execution("while writing: root cause".into()));
    }
}
