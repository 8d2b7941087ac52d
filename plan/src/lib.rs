//! loadgen-plan: the run's plan. The configuration's schema (YAML and the flags' `Config`),
//! resolution from it to one validated `plan::Plan`, the datasets, the client tokenizer and the
//! redaction of secrets, with `error::AppError`, the error every step returns.
//!
//! Resolution is pure: it prints nothing (its notes go to the caller) and reads no global;
//! the machine comes in as a `plan::Host`.

pub mod dataset;
pub mod error;
pub mod lax;
pub mod plan;
#[cfg(test)]
mod proptests;
pub mod redact;
pub mod row;
pub mod tokenizer;
pub mod yaml;
