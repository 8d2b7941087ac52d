//! `llm-loadgen init offline|online|concurrency`: writes a commented YAML template in the
//! reference's schema to `<template>_template.yaml`.

use std::path::{Path, PathBuf};

use crate::error::AppError;

/// Template names `init` knows, in help order.
pub const TEMPLATE_NAMES: [&str; 3] = ["offline", "online", "concurrency"];

const HEADER: &str = "\
# llm-loadgen benchmark configuration (the reference tool's schema).
# Run it:    llm-loadgen benchmark from-config -c FILE
# Check it:  llm-loadgen validate-yaml -c FILE
# Values may use ${VAR}, ${VAR:-default} and $VAR; write $$ for a literal $.
";

const MODEL: &str = "\
model_params:
  name: '<MODEL_NAME eg: meta-llama/Llama-3.1-8B-Instruct>'  # model sent in requests; also the tokenizer unless tokenizer_name is set
  max_new_tokens: 1024  # max output tokens per request
  streaming: auto  # auto | 'on' | 'off', quoted: unquoted on/off are YAML booleans (auto: off for offline, on for online)
  # tokenizer_name: tests/assets/tokenizers/char  # tokenizer.json file, folder, or model id in the local HF cache
datasets:
- name: dummy_1k  # dataset name in reports (default: file stem)
  type: performance  # performance (accuracy datasets are not supported yet)
  path: tests/assets/datasets/dummy_1k.jsonl  # .jsonl, .json or .csv
  parser:
    prompt: text_input  # column that holds the prompt
";

const RUNTIME: &str = "\
settings:
  runtime:
    min_duration_ms: 600000  # sizes the run: ceil(qps x duration x 1.1) samples, rounded up to a multiple of the dataset size
    max_duration_ms: 0  # wall-time cap in ms (0 = none); in-flight samples at the cap are abandoned
    n_samples_to_issue: null  # exact sample count; wins over the duration when set
    scheduler_random_seed: 42  # seed of the poisson arrival times
    dataloader_random_seed: 42  # seed of the sample order
";

const TAIL: &str = "  client:
    num_workers: -1  # worker processes (-1 = one per core, less the coordinator's)
    max_connections: -1  # connections across all workers (-1 = 32 per worker)
    stream_include_usage: true  # ask streaming openai requests for usage (stream_options)
  warmup:
    enabled: false  # issue warm-up samples before tracking starts
  early_stopping:
    enabled: true  # mlperf early-stopping estimates in the report
  token_count_source: client  # headline token counts: client (tokenizer) | server (endpoint usage)
endpoint_config:
  endpoints:  # endpoint base URLs (http:// only); omit to use the embedded stub
  - http://localhost:8000
  api_type: openai  # openai | openai_completions | sglang | videogen
  # api_key: ${OPENAI_API_KEY}  # sent as Authorization: Bearer <key>; redacted in config.yaml
report_dir: null  # report directory (default /tmp/reports_YYYYMMDD_HHMMSS)
enable_cpu_affinity: true  # pin workers to cores
";

/// The template text for `name`, or `None` for an unknown template.
pub fn template(name: &str) -> Option<String> {
    let (head, pattern) = match name {
        "offline" => (
            "name: offline_benchmark  # benchmark name in reports\nversion: '1.0'\n\
             type: offline  # offline (max_throughput burst) | online\n",
            "  load_pattern:\n    type: max_throughput  # offline: every sample issued at t=0\n",
        ),
        "online" => (
            "name: online_benchmark  # benchmark name in reports\nversion: '1.0'\n\
             type: online  # offline | online (poisson or concurrency)\n",
            "  load_pattern:\n    type: poisson  # open loop, exponential arrival gaps\n    \
             target_qps: 10.0  # target queries per second\n    \
             use_legacy_loadgen_qps_metrics: true  # report the loadgen form of qps\n",
        ),
        "concurrency" => (
            "name: concurrency_benchmark  # benchmark name in reports\nversion: '1.0'\n\
             type: online  # concurrency runs are online benchmarks\n",
            "  load_pattern:\n    type: concurrency  # closed loop\n    \
             target_concurrency: 32  # requests in flight at every moment\n",
        ),
        _ => return None,
    };
    Some(format!("{HEADER}{head}{MODEL}{RUNTIME}{pattern}{TAIL}"))
}

/// Writes the template to `output` (default `<name>_template.yaml` in the current folder).
pub fn run(name: &str, output: Option<&Path>) -> Result<i32, AppError> {
    let Some(text) = template(name) else {
        return Err(AppError::Input(format!(
            "unknown template {name:?}; choose one of {}",
            TEMPLATE_NAMES.join(", ")
        )));
    };
    let path = output
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(format!("{name}_template.yaml")));
    std::fs::write(&path, text)
        .map_err(|e| AppError::Setup(format!("cannot write {}: {e}", path.display())))?;
    super::print_stdout(&format!("wrote {}\n", path.display()))?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{Config, LoadPatternKind};

    #[test]
    fn every_template_parses_and_passes_the_checks() {
        for name in TEMPLATE_NAMES {
            let text = template(name).unwrap();
            let config = Config::from_yaml_str(&text, name).unwrap();
            crate::plan::check_config(&config, &mut Vec::new()).unwrap();
            let kind = config.settings.load_pattern.kind;
            let want = match name {
                "offline" => LoadPatternKind::MaxThroughput,
                "online" => LoadPatternKind::Poisson,
                _ => LoadPatternKind::Concurrency,
            };
            assert_eq!(kind, want, "{name}");
        }
        assert!(template("eval").is_none());
    }
}
