//! Commands that are not a benchmark run: `init`, `validate-yaml`, `info`.

pub mod info;
pub mod init;
pub mod sys;
pub mod validate_yaml;
