//! `llm-loadgen init offline|online|concurrency`: writes a commented YAML template in the
//! reference's schema to `<template>_template.yaml`, and beside it the prompts it names, so it
//! runs as written from any folder. Every comment's claim is checked by a test below.

use std::path::{Path, PathBuf};

use crate::error::AppError;

/// Template names `init` knows, in help order.
pub const TEMPLATE_NAMES: [&str; 3] = ["offline", "online", "concurrency"];

/// The dataset formats the `path:` comment names (each loads; tests below).
pub const DATASET_FORMATS: &str = ".jsonl, .json, .csv, .parquet or a save_to_disk folder";

/// The `api_type` values the comment names (each resolves; videogen, which needs a video
/// prompts file rather than the template's, is left to docs/CLI.md).
pub const API_TYPES: [&str; 3] = ["openai", "openai_completions", "sglang"];

const HEADER: &str = "\
# llm-loadgen benchmark configuration (the reference tool's schema).
# Run it:    llm-loadgen benchmark from-config -c FILE
# Check it:  llm-loadgen validate-yaml -c FILE
# Values may use ${VAR}, ${VAR:-default} and $VAR; write $$ for a literal $.
# A relative dataset path is read from the current folder, else from this file's folder.
";

/// The model and dataset block; `{prompts}` is the prompts file's name.
fn model_block(prompts: &str) -> String {
    format!(
        "model_params:
  name: '<MODEL_NAME eg: meta-llama/Llama-3.1-8B-Instruct>'  # model sent in requests; also the tokenizer unless tokenizer_name is set
  max_new_tokens: 1024  # max output tokens per request
  streaming: auto  # auto | 'on' | 'off', quoted: unquoted on/off are YAML booleans (auto: off for offline, on for online)
  # tokenizer_name: path/to/tokenizer.json  # tokenizer.json file, folder, or model id in the local HF cache
datasets:
- name: prompts  # dataset name in reports (default: file stem)
  type: performance  # performance | accuracy (an accuracy dataset needs accuracy_config; docs/CLI.md)
  path: {prompts}  # {DATASET_FORMATS}; init wrote this one (1000 prompts)
  parser:
    prompt: text_input  # column that holds the prompt
"
    )
}

const RUNTIME: &str = "\
settings:
  runtime:
    min_duration_ms: 600000  # sizes the sample count, not the wall time: ceil(qps x duration x 1.1) samples (qps: target_qps, else 10), rounded up to whole passes of the dataset
    max_duration_ms: 0  # wall-time cap in ms (0 = none); in-flight samples at the cap are abandoned
    n_samples_to_issue: null  # exact sample count; wins over the duration when set
    scheduler_random_seed: 42  # seed of the poisson arrival times
    dataloader_random_seed: 42  # seed of the sample order
";

const TAIL: &str = "  client:
    num_workers: -1  # worker processes (-1 = one per core, less the coordinator's)
    max_connections: -1  # connections across all workers (-1 = auto: 32 per worker offline, target_concurrency for concurrency, up to 16384 for poisson)
    stream_include_usage: true  # ask streaming openai requests for usage (stream_options)
  warmup:
    enabled: false  # issue warm-up samples before tracking starts
  early_stopping:
    enabled: true  # mlperf early-stopping estimates in the report
  token_count_source: client  # headline token counts: client (tokenizer) | server (endpoint usage)
endpoint_config:
  endpoints:  # endpoint base URLs, http:// or https://; omit to use the embedded stub
  - http://localhost:8000
  api_type: openai  # API_TYPES
  # api_key: ${OPENAI_API_KEY}  # sent as Authorization: Bearer <key>; redacted in config.yaml
report_dir: null  # report directory (default /tmp/reports_YYYYMMDD_HHMMSS)
enable_cpu_affinity: true  # pin workers to cores
";

/// The template text for `name`, naming `prompts` as its dataset, or `None` for an unknown
/// template.
pub fn template(name: &str, prompts: &str) -> Option<String> {
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
             target_qps: 10.0  # target queries per second (with the duration above: 7000 samples, about 700 s)\n    \
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
    let tail = TAIL.replace("# API_TYPES", &format!("# {}", API_TYPES.join(" | ")));
    Some(format!("{HEADER}{head}{}{RUNTIME}{pattern}{tail}", model_block(prompts)))
}

/// The prompts `init` writes beside a template: the built-in synthetic dataset as JSON Lines
/// (`text_input`, the column the template's parser names).
pub fn prompts_jsonl() -> String {
    let rows = crate::dataset::synthetic_dataset().rows;
    let mut text = String::with_capacity(rows.len() * 80);
    for row in rows {
        let line = serde_json::json!({ "text_input": row.prompt.unwrap_or_default() });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    text
}

/// Writes the template to `output` (default `<name>_template.yaml` in the current folder) and
/// its prompts beside it as `<stem>_prompts.jsonl`, unless that file exists (kept, so a user's
/// own prompts are never overwritten).
pub fn run(name: &str, output: Option<&Path>) -> Result<i32, AppError> {
    if !TEMPLATE_NAMES.contains(&name) {
        return Err(AppError::Input(format!(
            "unknown template {name:?}; choose one of {}",
            TEMPLATE_NAMES.join(", ")
        )));
    }
    let path = output
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(format!("{name}_template.yaml")));
    let stem = path.file_stem().map_or_else(|| name.into(), |s| s.to_string_lossy().into_owned());
    let prompts_name = format!("{stem}_prompts.jsonl");
    let prompts = path.with_file_name(&prompts_name);
    let text = template(name, &prompts_name).unwrap_or_default();
    let cannot = |p: &Path, e: std::io::Error| {
        AppError::Setup(format!("cannot write {}: {e}; choose another -o", p.display()))
    };
    std::fs::write(&path, text).map_err(|e| cannot(&path, e))?;
    let mut said = format!("wrote {}\n", path.display());
    if prompts.exists() {
        said.push_str(&format!("kept {} (it exists)\n", prompts.display()));
    } else {
        std::fs::write(&prompts, prompts_jsonl()).map_err(|e| cannot(&prompts, e))?;
        said.push_str(&format!("wrote {}\n", prompts.display()));
    }
    super::print_stdout(&said)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::{Config, LoadPatternKind};
    use loadgen_coordinator::LoadPattern;
    use std::sync::Arc;

    /// A scratch folder of this test process, removed first.
    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("loadgen-init-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// The template `name` as a config whose prompts lie in `dir`, with `edit` applied to its
    /// text.
    fn config(name: &str, dir: &Path, edit: impl Fn(String) -> String) -> Config {
        let prompts = dir.join("p.jsonl");
        std::fs::write(&prompts, prompts_jsonl()).unwrap();
        let text = edit(template(name, &prompts.display().to_string()).unwrap());
        Config::from_yaml_str(&text, name).unwrap()
    }

    #[test]
    fn every_template_parses_and_passes_the_checks() {
        for name in TEMPLATE_NAMES {
            let text = template(name, "p.jsonl").unwrap();
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
        assert!(template("eval", "p.jsonl").is_none());
    }

    /// The `path:` comment: every format it names loads the same rows.
    #[test]
    fn the_dataset_formats_the_comment_names_load() {
        let dir = scratch("formats");
        let text = template("offline", "p.jsonl").unwrap();
        assert!(text.contains(&format!("# {DATASET_FORMATS};")), "{text}");
        let prompts = ["one prompt", "two prompts"];
        let jsonl: String = prompts
            .iter()
            .map(|p| format!("{}\n", serde_json::json!({ "text_input": p })))
            .collect();
        std::fs::write(dir.join("d.jsonl"), jsonl).unwrap();
        let json = serde_json::json!([{ "text_input": prompts[0] }, { "text_input": prompts[1] }]);
        std::fs::write(dir.join("d.json"), json.to_string()).unwrap();
        std::fs::write(dir.join("d.csv"), format!("text_input\n{}\n{}\n", prompts[0], prompts[1]))
            .unwrap();
        let column = arrow_array::StringArray::from(prompts.to_vec());
        let batch = arrow_array::RecordBatch::try_from_iter([(
            "text_input",
            Arc::new(column) as arrow_array::ArrayRef,
        )])
        .unwrap();
        let file = std::fs::File::create(dir.join("d.parquet")).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let folder = dir.join("save_to_disk");
        std::fs::create_dir_all(&folder).unwrap();
        let state = r#"{"_data_files": [{"filename": "data-00000-of-00001.arrow"}]}"#;
        std::fs::write(folder.join("state.json"), state).unwrap();
        let file = std::fs::File::create(folder.join("data-00000-of-00001.arrow")).unwrap();
        let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &batch.schema()).unwrap();
        w.write(&batch).unwrap();
        w.finish().unwrap();
        let named = ["jsonl", "json", "csv", "parquet", "save_to_disk"];
        for (ext, path) in named.iter().map(|e| (e, dir.join(format!("d.{e}")))) {
            let path = if *ext == "save_to_disk" { folder.clone() } else { path };
            assert!(DATASET_FORMATS.contains(ext), "{ext} is named");
            let spec = format!("{},parser.prompt=text_input", path.display());
            let dataset =
                crate::dataset::load_dataset(&spec).unwrap_or_else(|e| panic!("{ext}: {e}"));
            assert_eq!(dataset.rows.len(), 2, "{ext}");
        }
        assert_eq!(DATASET_FORMATS.matches(", ").count() + 1, named.len() - 1, "one per name");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The other comments: the endpoint schemes and api types named resolve, streaming auto is
    /// off offline and on online, the online template's sample count and time are as said,
    /// and an accuracy dataset type is read.
    #[test]
    fn the_templates_comments_hold() {
        let dir = scratch("claims");
        let endpoints = "  - http://localhost:8000";
        let text = template("online", "p.jsonl").unwrap();
        assert!(text.contains("http:// or https://") && text.contains(endpoints), "{text}");
        let https = config("online", &dir, |t| t.replace(endpoints, "  - https://localhost:8443"));
        crate::cli::resolve_plan(https, 0).expect("https:// resolves");
        assert!(text.contains(&format!("api_type: openai  # {}\n", API_TYPES.join(" | "))));
        for api in API_TYPES {
            let c = config("online", &dir, |t| {
                t.replace("api_type: openai ", &format!("api_type: {api} "))
            });
            crate::cli::resolve_plan(c, 0).unwrap_or_else(|e| panic!("{api}: {e}"));
        }
        for (name, streams) in [("offline", false), ("online", true), ("concurrency", true)] {
            let plan = crate::cli::resolve_plan(config(name, &dir, |t| t), 0).unwrap();
            assert_eq!(plan.request.streaming, streams, "{name}: streaming auto");
        }
        // "7000 samples, about 700 s": 10 QPS x 600 s x 1.1, up to whole passes of 1000 rows.
        let online = crate::cli::resolve_plan(config("online", &dir, |t| t), 0).unwrap();
        assert!(text.contains("7000 samples, about 700 s"));
        assert_eq!(online.num_samples, 7000);
        assert_eq!(online.dataset.rows.len(), 1000, "init wrote this one (1000 prompts)");
        // Connections' auto rule, the report directory's default, pinning and the headline
        // basis as the comments say.
        let c = &online.connections;
        let auto = "(-1 = auto: 32 per worker offline, target_concurrency for concurrency, up \
                    to 16384 for poisson)";
        assert!(text.contains(auto), "{text}");
        assert!(c.max_connections <= 16384 && c.max_connections > 32 * c.workers, "poisson");
        let offline = crate::cli::resolve_plan(config("offline", &dir, |t| t), 0).unwrap();
        let o = &offline.connections;
        assert_eq!(o.max_connections, 32 * o.workers, "offline");
        let closed = crate::cli::resolve_plan(config("concurrency", &dir, |t| t), 0).unwrap();
        assert_eq!(closed.connections.max_connections, 32, "target_concurrency: 32");
        assert!(text.contains("(default /tmp/reports_YYYYMMDD_HHMMSS)"));
        assert!(online.report_dir.display().to_string().starts_with("/tmp/reports_"));
        assert!(
            text.contains("enable_cpu_affinity: true  # pin workers to cores") && c.cpu_affinity
        );
        assert!(text.contains("token_count_source: client  # headline token counts: client"));
        assert_eq!(online.token_count_source, loadgen_coordinator::TokenCountSource::Client);
        assert!(
            online.request.stream_include_usage && online.early_stopping && !online.warmup.enabled
        );
        assert!(matches!(online.load_pattern, LoadPattern::Poisson { seed: 42, .. }));
        let accuracy = text.replace("type: performance ", "type: accuracy ");
        let c = Config::from_yaml_str(&accuracy, "acc").unwrap();
        assert_eq!(c.datasets[0].kind, crate::dataset::DatasetKind::Accuracy);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn init_writes_its_prompts_beside_the_template_and_keeps_existing_ones() {
        let dir = scratch("write");
        let yaml = dir.join("mine.yaml");
        run("offline", Some(&yaml)).unwrap();
        let prompts = dir.join("mine_prompts.jsonl");
        assert_eq!(std::fs::read_to_string(&prompts).unwrap(), prompts_jsonl());
        assert!(std::fs::read_to_string(&yaml).unwrap().contains("path: mine_prompts.jsonl  #"));
        std::fs::write(&prompts, "{\"text_input\": \"mine\"}\n").unwrap();
        run("online", Some(&yaml)).unwrap();
        assert_eq!(std::fs::read_to_string(&prompts).unwrap(), "{\"text_input\": \"mine\"}\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
