//! `llm-loadgen validate-yaml -c FILE`: checks a YAML file against the schema and the
//! reference's cross-field rules, without loading datasets or tokenizers: a file the reference
//! accepts is valid here, with a note for each key a run here would refuse.

use std::path::Path;

use crate::error::AppError;
use crate::yaml::Config;

/// Validates `path`; prints a one-line summary when it is valid.
pub fn run(path: &Path) -> Result<i32, AppError> {
    let config = Config::from_yaml_file(path)?;
    let mut notes = Vec::new();
    let checked = crate::plan::check_config(&config, &mut notes);
    super::print_notes(&notes);
    checked?;
    let name = config.name.clone().unwrap_or_else(|| format!("{}_benchmark", config.kind.as_str()));
    super::print_stdout(&format!(
        "{}: valid (name {name}, type {}, load pattern {}, {} dataset(s))\n",
        path.display(),
        config.kind.as_str(),
        config.settings.load_pattern.kind.as_str(),
        config.datasets.len()
    ))?;
    for why in crate::plan::run_refusals(&config) {
        eprintln!("note: a run here refuses this (exit 2): {why}");
    }
    Ok(0)
}
