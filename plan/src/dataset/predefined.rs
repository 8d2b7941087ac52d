//! The reference's predefined datasets (`name: <id>` or `<id>::<preset>`): `random` is
//! generated from the tokenizer; `aime25`, `gpqa`, `cnn_dailymail`, `open_orca` and the two
//! Shopify product catalogues (multimodal, `shopify.rs`) and BFCL v4 (`bfcl.rs`) are read from the files the
//! reference's loaders write (`dataset_cache/…`), from its `hf_cache` folders or from the local
//! Hugging Face datasets cache, with the reference's processing and presets. Nothing is ever
//! downloaded; the other ids are refused by name.

use std::path::{Path, PathBuf};

use loadgen_py::random::PyRandom;
use serde_json::{Map, Value};

mod bfcl;
mod bfcl_tools;
mod cell;
mod shopify;

use super::file::read_records;
use super::random_prompts::{random_rows, Decoder, RandomParams};
use super::spec::{Dataset, DatasetSpec};
use crate::error::AppError;
use crate::row::Row;
use cell::cell_text;

/// The reference's predefined dataset ids (`Dataset.PREDEFINED`).
pub const PREDEFINED_IDS: [&str; 12] = [
    "random",
    "aime25",
    "gpqa",
    "open_orca",
    "cnn_dailymail",
    "livecodebench",
    "bfcl_v4",
    "shopify_product_catalogue",
    "shopify_product_catalogue_8k",
    "swe_bench",
    "legacy_mlperf_deepseek_r1",
    "agentic_inference_conversations",
];

/// Ids whose rows need what this tool does not do, and why.
const REFUSED_IDS: [(&str, &str); 4] = [
    (
        "livecodebench",
        "it is scored by code_bench_scorer, which runs the generated code in LiveCodeBench's \
         external execution service, and this tool calls no external scoring service; remove \
         this dataset from datasets: to run the others",
    ),
    ("swe_bench", "it is accuracy only (agentic software-engineering tasks)"),
    ("legacy_mlperf_deepseek_r1", "its loader joins MLPerf's local source files and templates"),
    ("agentic_inference_conversations", "multi-turn agentic conversations"),
];

/// The default cache folder of the reference's loaders, relative to the working directory.
const DATASETS_DIR: &str = "dataset_cache";

/// The id and preset a spec names when it is a predefined dataset: no `path` (the reference's
/// `path: null`), or an explicit `name` whose id is predefined (then `path` is where its data
/// lies). A name with more than one `::` is returned whole and refused when loaded.
pub fn predefined_name(spec: &DatasetSpec) -> Option<(&str, Option<&str>)> {
    let name = spec.name.as_deref()?;
    let (id, preset) = match name.split_once("::") {
        Some((id, preset)) => (id, Some(preset)),
        None => (name, None),
    };
    (spec.path.is_empty() || PREDEFINED_IDS.contains(&id)).then_some((id, preset))
}

/// What a run here refuses about a dataset's predefined keys, as (key, why) pairs: ids and
/// presets it cannot load, and keys the reference would ignore (`parser` and `format` of a
/// predefined dataset, `generate_params` of a file).
pub fn predefined_refusals(spec: &DatasetSpec) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some((id, preset)) = predefined_name(spec) else {
        if spec.generate_params.is_some() {
            out.push((
                "generate_params".into(),
                "only predefined datasets (name: random, aime25, …) take generate_params; a \
                 file dataset would ignore them"
                    .into(),
            ));
        }
        return out;
    };
    let mut push = |key: &str, why: String| out.push((key.to_string(), why));
    if let Some((_, why)) = REFUSED_IDS.iter().find(|(refused, _)| *refused == id) {
        push("name", format!("predefined dataset {id}: {why}"));
    } else if !PREDEFINED_IDS.contains(&id) {
        push(
            "name",
            format!(
                "{id:?} is not a predefined dataset ({}) and no path is given; give path",
                PREDEFINED_IDS.join(", ")
            ),
        );
    }
    if let Some(parser) = &spec.parser {
        if let Some((target, source)) = changing_parser_entry(id, preset, parser) {
            push(
                "parser",
                format!(
                    "parser.{target}: {source} would change the rows of predefined dataset \
                     {id}, but the reference ignores parser on a predefined dataset (its \
                     preset's columns are {}); leave parser out",
                    preset_columns(id, preset).join(", ")
                ),
            );
        }
    }
    if spec.format.is_some() && spec.path.is_empty() {
        push(
            "format",
            format!(
                "predefined dataset {id} has no file to read (the reference ignores format there)"
            ),
        );
    }
    out
}

/// Loads a predefined dataset (`predefined_name` is `Some`); `samples` keeps the first rows.
/// What loading has to say goes into `notes`.
pub fn load_predefined(
    spec: &DatasetSpec,
    run_tokenizer: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<Dataset, AppError> {
    let name = spec.name.clone().unwrap_or_default();
    let (id, preset) = predefined_name(spec).unwrap_or((name.as_str(), None));
    if preset.is_some_and(|p| p.contains("::")) {
        return Err(AppError::Input(format!(
            "dataset name {name:?} is not <id> or <id>::<preset>; fix the name"
        )));
    }
    let mut rows = match id {
        "random" => {
            if let Some((key, why)) = predefined_refusals(spec).into_iter().next() {
                return Err(AppError::Input(format!("dataset {name}: {key}: {why}")));
            }
            load_random(spec, preset, run_tokenizer)?
        }
        _ => load_predefined_rows(spec, id, preset, notes)?.0,
    };
    if let Some(n) = spec.samples {
        rows.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok(Dataset { name, rows })
}

/// `load_predefined` and `predefined_column` from one read of the cache: an accuracy
/// dataset's rows and its ground truth.
pub fn load_predefined_with_column(
    spec: &DatasetSpec,
    column: &str,
    notes: &mut Vec<String>,
) -> Result<(Dataset, Vec<Option<Value>>), AppError> {
    let name = spec.name.clone().unwrap_or_default();
    let (id, preset) = predefined_name(spec).unwrap_or((name.as_str(), None));
    if id == "random" {
        return Err(no_ground_truth(&name, column));
    }
    if preset.is_some_and(|p| p.contains("::")) {
        // The malformed name's own error.
        load_predefined(spec, None, notes)?;
    }
    let (mut rows, records) = load_predefined_rows(spec, id, preset, notes)?;
    let limit = spec.samples.map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    rows.truncate(limit);
    let values = records.into_iter().take(limit).map(|mut r| r.remove(column)).collect();
    Ok((Dataset { name, rows }, values))
}

fn no_ground_truth(name: &str, column: &str) -> AppError {
    AppError::Input(format!(
        "dataset {name}: random generates its prompts and has no ground-truth column \
         {column:?}; score a dataset with answers"
    ))
}

/// A cached id's rows and records, after the refusals and the parser note of
/// `load_predefined` (in `notes`).
fn load_predefined_rows(
    spec: &DatasetSpec,
    id: &str,
    preset: Option<&str>,
    notes: &mut Vec<String>,
) -> Result<(Vec<Row>, Vec<Record>), AppError> {
    let name = spec.name.as_deref().unwrap_or_default();
    if let Some((key, why)) = predefined_refusals(spec).into_iter().next() {
        return Err(AppError::Input(format!("dataset {name}: {key}: {why}")));
    }
    if spec.parser.is_some() {
        // Accepted only as a no-op (predefined_refusals), so it is said once, not dropped.
        notes.push(format!(
            "note: dataset {name}: parser is ignored on a predefined dataset, as the reference \
             ignores it; its mapping names the preset's own columns, so the rows are the same"
        ));
    }
    load_cached(spec, id, preset)
}

/// One column of a predefined dataset's processed table (the frame the reference's scorer
/// reads its ground truth from, before the preset's transforms), a value per row up to
/// `samples`; `None` where a row lacks it.
pub fn predefined_column(spec: &DatasetSpec, column: &str) -> Result<Vec<Option<Value>>, AppError> {
    let name = spec.name.clone().unwrap_or_default();
    let (id, preset) = predefined_name(spec).unwrap_or((name.as_str(), None));
    if id == "random" {
        return Err(no_ground_truth(&name, column));
    }
    if let Some((key, why)) = predefined_refusals(spec).into_iter().next() {
        return Err(AppError::Input(format!("dataset {name}: {key}: {why}")));
    }
    let (_, mut records) = load_cached(spec, id, preset)?;
    if let Some(n) = spec.samples {
        records.truncate(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok(records.into_iter().map(|mut r| r.remove(column)).collect())
}

/// The columns a preset's rows carry (what a no-op parser may name).
fn preset_columns(id: &str, preset: Option<&str>) -> Vec<&'static str> {
    match (id, preset) {
        ("open_orca", _) => vec!["prompt", "system"],
        ("bfcl_v4", _) => vec!["messages", "tools", "tool_choice"],
        ("cnn_dailymail", Some("llama3_8b")) => vec!["prompt", "chat_template"],
        (id, Some("q3vl")) if id.starts_with("shopify_product_catalogue") => {
            vec!["prompt", "system"]
        }
        _ => vec!["prompt"],
    }
}

/// The first `parser` entry (target, source) that would change a predefined dataset's rows:
/// the reference ignores parser there, so only a mapping that names the preset's own columns
/// as they already are (`input: prompt`, a prompt alias reading the prompt; `system: system`)
/// is accepted.
fn changing_parser_entry(
    id: &str,
    preset: Option<&str>,
    parser: &super::spec::ParserMap,
) -> Option<(String, String)> {
    let columns = preset_columns(id, preset);
    let entries = [("prompt", parser.prompt.as_ref()), ("system", parser.system.as_ref())]
        .into_iter()
        .filter_map(|(t, s)| s.map(|s| (t.to_string(), s.clone())))
        .chain(parser.other.iter().map(|(t, s)| (t.clone(), s.clone())));
    let same = |target: &str, source: &str| {
        let is_prompt = target == "prompt" || super::spec::PROMPT_ALIASES.contains(&target);
        let as_prompt = is_prompt && source == "prompt";
        id != "random" && (as_prompt || (target == source && columns.contains(&source)))
    };
    entries.into_iter().find(|(t, s)| !same(t, s))
}

fn load_random(
    spec: &DatasetSpec,
    preset: Option<&str>,
    run_tokenizer: Option<&str>,
) -> Result<Vec<Row>, AppError> {
    if let Some(preset) = preset {
        return Err(AppError::Input(format!(
            "dataset random has no presets (got ::{preset}); write name: random"
        )));
    }
    if !spec.path.is_empty() {
        return Err(AppError::Input(format!(
            "dataset random generates its rows, so path {} would be ignored; drop path, or \
             name the file's dataset something else",
            spec.path
        )));
    }
    let mut given = spec.generate_params.clone().unwrap_or_default();
    // The reference's loader accepts the cache folder for every id; random writes nothing.
    given.remove("datasets_dir");
    let params = RandomParams::parse("dataset random", Some(&given))?;
    let Some(tokenizer) = params.tokenizer.as_deref().or(run_tokenizer) else {
        return Err(AppError::Input(
            "dataset random decodes token ids with a tokenizer: give \
             generate_params.tokenizer (a tokenizer.json, its folder, or a Hugging Face id in \
             the local cache), or --tokenizer"
                .into(),
        ));
    };
    let source = crate::tokenizer::Tokenizer::load(tokenizer).map_err(|e| {
        AppError::Setup(format!(
            "dataset random decodes its prompts with tokenizer {tokenizer:?}: {e}; give \
             generate_params.tokenizer or --tokenizer"
        ))
    })?;
    let decoder = Decoder::load(source.source())?;
    random_rows(&params, &decoder)
}

/// One predefined id read from local files: its processed table, and where the reference's
/// loader takes the raw rows from.
struct CachedId {
    id: &'static str,
    /// `generate_params` keys the reference's `generate` takes (besides `datasets_dir`,
    /// `force_regenerate`).
    keys: &'static [&'static str],
    presets: &'static [&'static str],
}

const CACHED_IDS: [CachedId; 6] = [
    CachedId { id: "aime25", keys: &["seed", "max_samples"], presets: &["gptoss"] },
    CachedId { id: "gpqa", keys: &["variant", "seed", "max_samples"], presets: &["gptoss"] },
    CachedId { id: "cnn_dailymail", keys: &["seed", "max_samples"], presets: &["llama3_8b"] },
    CachedId { id: "open_orca", keys: &["variant"], presets: &["llama2_70b"] },
    CachedId { id: "shopify_product_catalogue", keys: &["split"], presets: &["q3vl"] },
    CachedId { id: "shopify_product_catalogue_8k", keys: &["split"], presets: &["q3vl"] },
];

/// The generate_params of a cached id, checked by name.
#[derive(Debug, Clone)]
struct CacheParams {
    datasets_dir: PathBuf,
    /// gpqa's and open_orca's `variant`, or a Shopify id's split key (`"+".join(split)`):
    /// the folder its processed file lies in.
    variant: String,
    seed: u64,
    max_samples: Option<usize>,
}

fn cache_params(spec: &DatasetSpec, c: &CachedId) -> Result<CacheParams, AppError> {
    let shopify = shopify::SHOPIFY_IDS.iter().any(|(id, _)| *id == c.id);
    let mut out = CacheParams {
        datasets_dir: PathBuf::from(DATASETS_DIR),
        variant: default_variant(c.id),
        seed: 0,
        max_samples: None,
    };
    for (key, value) in spec.generate_params.iter().flatten() {
        let bad = |what: &str| {
            AppError::Input(format!(
                "dataset {}: generate_params.{key} = {value} is not {what}; fix the value",
                c.id
            ))
        };
        let downloads = |what: &str| {
            AppError::Input(format!(
                "dataset {}: generate_params.{key}{what}, and this tool never downloads; leave \
                 it out",
                c.id
            ))
        };
        match key.as_str() {
            "datasets_dir" => {
                out.datasets_dir = value.as_str().ok_or_else(|| bad("a folder"))?.into()
            }
            // The value is never printed: a token is a secret.
            "token" | "revision" if shopify => {
                return Err(downloads(" only changes what its loader downloads"))
            }
            "force_regenerate" => match value.as_bool() {
                Some(false) => {}
                Some(true) => return Err(downloads(": true downloads the data again")),
                None => return Err(bad("true or false")),
            },
            k if c.keys.contains(&k) => match k {
                "variant" => out.variant = value.as_str().ok_or_else(|| bad("a string"))?.into(),
                "split" => {
                    out.variant = split_param(value).ok_or_else(|| bad("a list of splits"))?
                }
                "seed" => out.seed = value.as_u64().ok_or_else(|| bad("a whole number >= 0"))?,
                _ => {
                    let n = value.as_u64().and_then(|n| usize::try_from(n).ok());
                    out.max_samples = Some(n.ok_or_else(|| bad("a whole number"))?)
                }
            },
            _ => {
                return Err(AppError::Input(format!(
                    "dataset {}: generate_params.{key} is not a parameter of its loader \
                     (known: {}, datasets_dir, force_regenerate); leave it out",
                    c.id,
                    c.keys.join(", ")
                )))
            }
        }
    }
    if c.id == "open_orca" && out.variant != "mlperf-inference" {
        return Err(AppError::Input(format!(
            "dataset open_orca: generate_params.variant {:?} is not supported by its loader \
             (only mlperf-inference)",
            out.variant
        )));
    }
    Ok(out)
}

/// An id's default `variant`: open_orca's and gpqa's, or a Shopify id's default split key.
fn default_variant(id: &str) -> String {
    match shopify::SHOPIFY_IDS.iter().find(|(shop, _)| *shop == id) {
        Some((_, splits)) => splits.join("+"),
        None if id == "open_orca" => "mlperf-inference".to_string(),
        None => "diamond".to_string(),
    }
}

/// `generate_params.split` (a list of split names, as `generate(split=[…])` takes it) as its
/// split key; `None` for anything else.
fn split_param(value: &Value) -> Option<String> {
    let splits: Option<Vec<String>> =
        value.as_array()?.iter().map(|s| s.as_str().map(str::to_string)).collect();
    splits.filter(|s| !s.is_empty()).map(|s| shopify::split_key(&s))
}

/// One processed record: its columns by name.
type Record = Map<String, Value>;

/// The preset's rows and the processed records they were made from (the ground truth's
/// table), in the same order.
fn load_cached(
    spec: &DatasetSpec,
    id: &str,
    preset: Option<&str>,
) -> Result<(Vec<Row>, Vec<Record>), AppError> {
    if id == "bfcl_v4" {
        return bfcl::load(spec, preset, Path::new(DATASETS_DIR));
    }
    let Some(c) = CACHED_IDS.iter().find(|c| c.id == id) else {
        return Err(AppError::Input(format!("predefined dataset {id} cannot be read here")));
    };
    let Some(preset) = preset else {
        return Err(AppError::Input(format!(
            "predefined dataset {id} has no prompt column without a preset (its loader gives \
             the raw columns, which the reference cannot send either); write name: {id}::{}",
            c.presets[0]
        )));
    };
    if !c.presets.contains(&preset) {
        return Err(AppError::Input(format!(
            "predefined dataset {id} has no preset {preset:?} (presets: {})",
            c.presets.join(", ")
        )));
    }
    let params = cache_params(spec, c)?;
    let records = find_records(spec, c, &params)?;
    let rows: Result<Vec<Row>, AppError> =
        records.iter().enumerate().map(|(i, rec)| preset_row(id, rec, i)).collect();
    Ok((rows?, records))
}

/// The processed rows of `c`: `path` when given, else the reference's processed file under
/// `datasets_dir`, else the raw rows (its `hf_cache` folder, the HF datasets cache) processed
/// as its loader does.
fn find_records(
    spec: &DatasetSpec,
    c: &CachedId,
    params: &CacheParams,
) -> Result<Vec<Map<String, Value>>, AppError> {
    if !spec.path.is_empty() {
        let records = read_table(Path::new(&spec.path))?;
        return processed_or_raw(c.id, records, params);
    }
    let processed = params.datasets_dir.join(processed_file(c.id, &params.variant));
    if processed.exists() {
        return read_table(&processed);
    }
    let raw = raw_source(c.id, &params.variant);
    let mut looked = vec![processed.display().to_string()];
    if let Some(raw) = &raw {
        let candidates = raw.candidates(&params.datasets_dir);
        for dir in &candidates {
            if let Some(records) = read_split(dir, raw.split)? {
                return process_raw(c.id, records, params);
            }
        }
        looked.extend(candidates.iter().map(|d| d.display().to_string()));
    }
    Err(not_found(c.id, &params.variant, raw.as_ref(), &looked))
}

/// A table the user pointed at with `path`: the processed columns are used as they are, the
/// raw Hugging Face columns (gpqa's `Question`, …) go through the loader's processing.
fn processed_or_raw(
    id: &str,
    records: Vec<Map<String, Value>>,
    params: &CacheParams,
) -> Result<Vec<Map<String, Value>>, AppError> {
    // aime25's raw and processed columns are the same (question, answer); gpqa's differ.
    let raw = id == "gpqa" && records.first().is_some_and(|r| r.contains_key("Correct Answer"));
    if raw {
        process_raw(id, records, params)
    } else {
        Ok(records)
    }
}

/// The file the reference's `generate` writes under `datasets_dir`.
fn processed_file(id: &str, variant: &str) -> PathBuf {
    match id {
        "gpqa" => PathBuf::from(format!("gpqa/{variant}/gpqa_{variant}.parquet")),
        // A Shopify id's variant is its split key.
        id if id.starts_with("shopify_product_catalogue") => {
            PathBuf::from(format!("{id}/{variant}/{id}_{variant}.parquet"))
        }
        "open_orca" => PathBuf::from(format!(
            "open_orca/{variant}/open_orca_gpt4_tokenized_llama.sampled_24576.jsonl"
        )),
        _ => PathBuf::from(format!("{id}/{id}.parquet")),
    }
}

/// Where the reference's loader reads a dataset from Hugging Face.
struct RawSource {
    repo: &'static str,
    config: String,
    split: &'static str,
    /// The loader's `hf_cache` folder name under `datasets_dir`.
    hf_cache: String,
}

fn raw_source(id: &str, variant: &str) -> Option<RawSource> {
    match id {
        // Both halves are read through one hf_cache folder, so once AIME2025-I is saved
        // there the reference reads it back for AIME2025-II too: its table is part I twice.
        "aime25" => Some(RawSource {
            repo: "opencompass/AIME2025",
            config: "AIME2025-I".into(),
            split: "test",
            hf_cache: "aime25".into(),
        }),
        "gpqa" => Some(RawSource {
            repo: "Idavidrein/gpqa",
            config: format!("gpqa_{variant}"),
            split: "train",
            hf_cache: format!("gpqa_{variant}"),
        }),
        "cnn_dailymail" => Some(RawSource {
            repo: "abisee/cnn_dailymail",
            config: "3.0.0".into(),
            split: "validation",
            hf_cache: "cnndailymail".into(),
        }),
        _ => None,
    }
}

impl RawSource {
    /// The folders that may hold the split: the loader's save_to_disk folder, then the
    /// config folder of the Hugging Face datasets cache.
    fn candidates(&self, datasets_dir: &Path) -> Vec<PathBuf> {
        let mut out = vec![datasets_dir.join("hf_cache").join(&self.hf_cache)];
        if let Some(root) = hf_datasets_cache() {
            let folder = self.repo.replace('/', "___");
            let repo_dir = find_dir_ignoring_case(&root, &folder).unwrap_or(root.join(&folder));
            out.push(
                find_dir_ignoring_case(&repo_dir, &self.config)
                    .unwrap_or(repo_dir.join(&self.config)),
            );
        }
        out
    }
}

/// The Hugging Face datasets cache, as the `datasets` library finds it.
fn hf_datasets_cache() -> Option<PathBuf> {
    #[cfg(test)]
    if let Some(dir) = tests::CACHE_FOR_TESTS.with(|c| c.borrow().clone()) {
        return Some(dir);
    }
    hf_datasets_cache_from(|k| std::env::var_os(k))
}

/// `hf_datasets_cache` over the environment `env`: `$HF_DATASETS_CACHE`, else
/// `$HF_HOME/datasets`, else `$XDG_CACHE_HOME/huggingface/datasets`, else
/// `~/.cache/huggingface/datasets`.
fn hf_datasets_cache_from(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = var("HF_DATASETS_CACHE") {
        return Some(dir);
    }
    if let Some(home) = var("HF_HOME") {
        return Some(home.join("datasets"));
    }
    let cache = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))?;
    Some(cache.join("huggingface").join("datasets"))
}

fn find_dir_ignoring_case(parent: &Path, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(parent).ok()?.filter_map(Result::ok).map(|e| e.path()).find(|p| {
        p.is_dir() && p.file_name().is_some_and(|n| n.to_string_lossy().eq_ignore_ascii_case(name))
    })
}

/// The `split` rows under `dir`: a save_to_disk DatasetDict (`dir/<split>/state.json`), or a
/// datasets cache config folder (`dir/<version>/<hash>/<name>-<split>[-NNNNN-of-NNNNN].arrow`).
/// `None`: not there.
fn read_split(dir: &Path, split: &str) -> Result<Option<Vec<Map<String, Value>>>, AppError> {
    let saved = dir.join(split);
    if saved.join("state.json").is_file() {
        return read_table(&saved).map(Some);
    }
    let mut files = Vec::new();
    for version in sorted_entries(dir) {
        for hash in sorted_entries(&version) {
            files = sorted_entries(&hash).into_iter().filter(|f| is_split_file(f, split)).collect();
            if !files.is_empty() {
                break;
            }
        }
        if !files.is_empty() {
            break;
        }
    }
    if files.is_empty() {
        return Ok(None);
    }
    let mut records = Vec::new();
    for file in files {
        records.extend(read_table(&file)?);
    }
    Ok(Some(records))
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|it| it.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

fn is_split_file(file: &Path, split: &str) -> bool {
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let Some(stem) = name.strip_suffix(".arrow") else { return false };
    stem.ends_with(&format!("-{split}")) || stem.contains(&format!("-{split}-"))
}

fn read_table(path: &Path) -> Result<Vec<Map<String, Value>>, AppError> {
    let spec = DatasetSpec { path: path.display().to_string(), ..DatasetSpec::default() };
    read_records(&spec, usize::MAX)
}

/// The reference loader's processing of raw Hugging Face rows (`generate`).
fn process_raw(
    id: &str,
    records: Vec<Map<String, Value>>,
    params: &CacheParams,
) -> Result<Vec<Map<String, Value>>, AppError> {
    let mut records = records;
    if id == "aime25" {
        // Part I twice (see raw_source).
        let again = records.clone();
        records.extend(again);
    }
    let records = sample_rows(records, params.max_samples, params.seed);
    match id {
        "gpqa" => gpqa_rows(&records, params.seed),
        "aime25" => Ok(records.into_iter().map(aime25_row).collect()),
        _ => Ok(records),
    }
}

/// AIME25's processing: `question`, and `answer` as `str(normalize_number(answer))` for a
/// string (its leading digits as a number, `None` without), `str(answer)` otherwise.
fn aime25_row(mut rec: Map<String, Value>) -> Map<String, Value> {
    let answer = match rec.remove("answer") {
        Some(Value::String(s)) => {
            let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
            // int() drops leading zeros; an empty match is Python's None.
            match digits.trim_start_matches('0') {
                "" if digits.is_empty() => "None".to_string(),
                "" => "0".to_string(),
                d => d.to_string(),
            }
        }
        Some(other) => python_str(&other),
        None => "None".to_string(),
    };
    let mut out = Map::new();
    out.insert("question".into(), rec.remove("question").unwrap_or(Value::Null));
    out.insert("answer".into(), Value::String(answer));
    out
}

/// Python's `str()` of a scalar cell (`True`, `None`, `2.0`).
fn python_str(v: &Value) -> String {
    match v {
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64().unwrap_or_default();
            if f.fract() == 0.0 && f.abs() < 1e16 {
                format!("{f:.1}")
            } else {
                f.to_string()
            }
        }
        other => cell_text(other),
    }
}

/// `random.Random(seed).sample(range(len), max_samples)` rows when `max_samples` is below
/// the row count, as each loader does; all rows otherwise.
fn sample_rows(
    records: Vec<Map<String, Value>>,
    max_samples: Option<usize>,
    seed: u64,
) -> Vec<Map<String, Value>> {
    match max_samples {
        Some(k) if k < records.len() => {
            let picked = py_sample(&mut PyRandom::new(seed), records.len(), k);
            picked.into_iter().map(|i| records[i].clone()).collect()
        }
        _ => records,
    }
}

/// CPython's `Random.sample(range(n), k)`: a pool for small populations, else rejection
/// from a set of picks.
pub(super) fn py_sample(rng: &mut PyRandom, n: usize, k: usize) -> Vec<usize> {
    let mut setsize = 21usize;
    if k > 5 {
        setsize += 4usize.pow(((k * 3) as f64).log(4.0).ceil() as u32);
    }
    let mut out = Vec::with_capacity(k);
    if n <= setsize {
        let mut pool: Vec<usize> = (0..n).collect();
        for i in 0..k {
            let j = rng.randbelow((n - i) as u32) as usize;
            out.push(pool[j]);
            pool[j] = pool[n - i - 1];
        }
    } else {
        let mut selected = std::collections::HashSet::with_capacity(k);
        for _ in 0..k {
            let mut j = rng.randbelow(n as u32) as usize;
            while selected.contains(&j) {
                j = rng.randbelow(n as u32) as usize;
            }
            selected.insert(j);
            out.push(j);
        }
    }
    out
}

/// GPQA's processing: each question's four answers in a seeded order (`Random(seed)`, one
/// `sample(range(4), 4)` per row), as `choice1`..`choice4`.
fn gpqa_rows(
    records: &[Map<String, Value>],
    seed: u64,
) -> Result<Vec<Map<String, Value>>, AppError> {
    let mut rng = PyRandom::new(seed);
    let cols = ["Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3"];
    records
        .iter()
        .enumerate()
        .map(|(i, rec)| {
            let perm = py_sample(&mut rng, 4, 4);
            let mut out = Map::new();
            out.insert("question".into(), column(rec, "Question", "gpqa", i)?.clone());
            let correct = column(rec, cols[0], "gpqa", i)?;
            let mut ground_truth = None;
            for (slot, &from) in perm.iter().enumerate() {
                let choice = column(rec, cols[from], "gpqa", i)?.clone();
                // `choices.index(correct)`: the first slot holding the correct text.
                if ground_truth.is_none() && &choice == correct {
                    ground_truth = Some(format!("choice{}", slot + 1));
                }
                out.insert(format!("choice{}", slot + 1), choice);
            }
            out.insert("ground_truth".into(), Value::from(ground_truth.unwrap_or_default()));
            for (to, from) in [("domain", "High-level domain"), ("subdomain", "Subdomain")] {
                out.insert(to.into(), rec.get(from).cloned().unwrap_or_else(|| Value::from("")));
            }
            Ok(out)
        })
        .collect()
}

fn column<'a>(
    rec: &'a Map<String, Value>,
    name: &str,
    id: &str,
    row: usize,
) -> Result<&'a Value, AppError> {
    rec.get(name).ok_or_else(|| {
        let have: Vec<&str> = rec.keys().map(String::as_str).collect();
        AppError::Input(format!(
            "predefined dataset {id} row {row}: no column {name:?} (the rows have {}); point \
             path at the reference's own file for {id}",
            have.join(", ")
        ))
    })
}

/// The row a preset makes of a processed record (the reference's preset transforms).
fn preset_row(id: &str, rec: &Map<String, Value>, i: usize) -> Result<Row, AppError> {
    let text = |name: &str| column(rec, name, id, i).map(cell_text);
    let prompt = match id {
        "aime25" => format!(
            "{}\nPlease reason step by step, and put your final answer within \\boxed{{}}.",
            text("question")?
        ),
        "gpqa" => format!(
            "{}\n\n(A) {}\n(B) {}\n(C) {}\n(D) {}\n\nExpress your final answer as the \
             corresponding option 'A', 'B', 'C', or 'D'.",
            text("question")?,
            text("choice1")?,
            text("choice2")?,
            text("choice3")?,
            text("choice4")?
        ),
        "cnn_dailymail" => {
            let prompt = format!(
                "Summarize the following news article in {CNN_MAX_NEW_TOKENS} tokens. Please \
                 output the summary only, without any other text.\n\nArticle:\n{}\n\nSummary:",
                text("article")?
            );
            // AddStaticColumns({"chat_template": …}): sent with every request.
            let template = Value::from(CNN_LLAMA3_8B_TEMPLATE);
            let request_columns = vec![("chat_template".to_string(), template)];
            return Ok(Row { prompt: Some(prompt), request_columns, ..Row::default() });
        }
        id if id.starts_with("shopify_product_catalogue") => return Ok(shopify::q3vl_row(rec)),
        // open_orca::llama2_70b renames question to prompt and system_prompt to system.
        _ => {
            let system = Some(text("system_prompt")?);
            return Ok(Row { prompt: Some(text("question")?), system, ..Row::default() });
        }
    };
    Ok(Row { prompt: Some(prompt), ..Row::default() })
}

/// `cnn_dailymail::llama3_8b`'s `max_new_tokens` default, which its prompt names.
const CNN_MAX_NEW_TOKENS: u32 = 128;

/// The chat template `cnn_dailymail::llama3_8b` sends (the legacy tokenized prompts' form).
const CNN_LLAMA3_8B_TEMPLATE: &str =
    "{{- bos_token }}{%- for message in messages %}{{ message['content'] | trim }}{%- endfor %}";

/// The error for a predefined dataset found nowhere: where it looked and what to download.
fn not_found(id: &str, variant: &str, raw: Option<&RawSource>, looked: &[String]) -> AppError {
    let fetch = match raw {
        Some(raw) => format!(
            "download it once where this tool looks, e.g. `python -c \"import datasets; \
             datasets.load_dataset('{repo}', '{config}').save_to_disk('{DATASETS_DIR}/hf_cache/{cache}')\"` \
             (run `huggingface-cli login` first if the repo is gated), or run the reference \
             once, which writes {DATASETS_DIR}/{file}",
            repo = raw.repo,
            config = raw.config,
            cache = raw.hf_cache,
            file = processed_file(id, variant).display(),
        ),
        None if id.starts_with("shopify_product_catalogue") => format!(
            "run the reference once (it downloads {} from Hugging Face and writes \
             {DATASETS_DIR}/{}, its images as base64), or give that file as path",
            shopify::hf_repo(id),
            processed_file(id, variant).display()
        ),
        None => format!(
            "run the reference once (it downloads {id} from MLCommons storage into \
             {DATASETS_DIR}/{}), or give that file as path",
            processed_file(id, variant).display()
        ),
    };
    AppError::Input(format!(
        "predefined dataset {id} not found locally (looked in {}); this tool never downloads: \
         {fetch}",
        looked.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, RecordBatch, StringArray};

    /// A scratch folder removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let path = std::env::temp_dir()
                .join(format!("llm-loadgen-predefined-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).unwrap();
            Scratch(path)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn strings(columns: &[(&str, Vec<&str>)]) -> RecordBatch {
        RecordBatch::try_from_iter(columns.iter().map(|(name, cells)| {
            (name.to_string(), Arc::new(StringArray::from(cells.clone())) as ArrayRef)
        }))
        .unwrap()
    }

    fn write_parquet(path: &Path, batch: &RecordBatch) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let file = std::fs::File::create(path).unwrap();
        let mut w = ::parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
        w.write(batch).unwrap();
        w.close().unwrap();
    }

    /// A save_to_disk DatasetDict: `dir/<split>/` with state.json and one Arrow stream file.
    fn write_saved_split(dir: &Path, split: &str, batch: &RecordBatch) {
        let folder = dir.join(split);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(dir.join("dataset_dict.json"), format!("{{\"splits\": [\"{split}\"]}}"))
            .unwrap();
        let state = serde_json::json!({"_data_files": [{"filename": "data-00000-of-00001.arrow"}]});
        std::fs::write(folder.join("state.json"), state.to_string()).unwrap();
        let file = std::fs::File::create(folder.join("data-00000-of-00001.arrow")).unwrap();
        let mut w = arrow_ipc::writer::StreamWriter::try_new(file, &batch.schema()).unwrap();
        w.write(batch).unwrap();
        w.finish().unwrap();
    }

    fn spec(name: &str, params: serde_json::Value) -> DatasetSpec {
        let generate_params = match params {
            serde_json::Value::Null => None,
            v => Some(serde_json::from_value(v).unwrap()),
        };
        DatasetSpec { name: Some(name.into()), generate_params, ..DatasetSpec::default() }
    }

    /// Python 3: `random.seed(42); random.sample(range(100), 10)`.
    #[test]
    fn py_sample_is_cpythons_sample() {
        let picked = py_sample(&mut PyRandom::new(42), 100, 10);
        assert_eq!(picked, [81, 14, 3, 94, 35, 31, 28, 17, 13, 86]);
        let mut perm = py_sample(&mut PyRandom::new(0), 4, 4);
        perm.sort_unstable();
        assert_eq!(perm, [0, 1, 2, 3], "a permutation of range(4)");
    }

    #[test]
    fn aime25_reads_the_references_cached_parquet_with_its_preset() {
        let dir = Scratch::new("aime");
        let batch =
            strings(&[("question", vec!["What is 1+1?", "And 2+2?"]), ("answer", vec!["2", "4"])]);
        write_parquet(&dir.0.join("aime25/aime25.parquet"), &batch);
        let dir_arg = serde_json::json!({"datasets_dir": dir.0.display().to_string()});
        let ds = load_predefined(&spec("aime25::gptoss", dir_arg.clone()), None, &mut Vec::new())
            .unwrap();
        assert_eq!(ds.name, "aime25::gptoss");
        let want =
            "What is 1+1?\nPlease reason step by step, and put your final answer within \\boxed{}.";
        assert_eq!(ds.rows[0].prompt.as_deref(), Some(want));
        assert_eq!(ds.rows.len(), 2);
        let mut one = spec("aime25::gptoss", dir_arg);
        one.samples = Some(1);
        assert_eq!(load_predefined(&one, None, &mut Vec::new()).unwrap().rows.len(), 1);
        // Without a preset the loader's columns hold no prompt, in the reference too.
        let err = load_predefined(&spec("aime25", serde_json::Value::Null), None, &mut Vec::new())
            .unwrap_err();
        assert!(err.to_string().contains("write name: aime25::gptoss"), "{err}");
    }

    #[test]
    fn gpqa_from_an_hf_cache_folder_shuffles_the_choices_by_seed() {
        let dir = Scratch::new("gpqa");
        let raw = strings(&[
            ("Question", vec!["Q0", "Q1", "Q2"]),
            ("Correct Answer", vec!["right0", "right1", "right2"]),
            ("Incorrect Answer 1", vec!["w1a", "w1b", "w1c"]),
            ("Incorrect Answer 2", vec!["w2a", "w2b", "w2c"]),
            ("Incorrect Answer 3", vec!["w3a", "w3b", "w3c"]),
        ]);
        write_saved_split(&dir.0.join("hf_cache/gpqa_diamond"), "train", &raw);
        let params = serde_json::json!({"datasets_dir": dir.0.display().to_string(), "seed": 5});
        let ds = load_predefined(&spec("gpqa::gptoss", params), None, &mut Vec::new()).unwrap();
        assert_eq!(ds.rows.len(), 3);
        let mut rng = PyRandom::new(5);
        for (i, row) in ds.rows.iter().enumerate() {
            let prompt = row.prompt.as_deref().unwrap();
            assert!(prompt.starts_with(&format!("Q{i}\n\n(A) ")), "{prompt}");
            let perm = py_sample(&mut rng, 4, 4);
            let letter = ["A", "B", "C", "D"][perm.iter().position(|&p| p == 0).unwrap()];
            assert!(prompt.contains(&format!("({letter}) right{i}\n")), "{prompt}");
            assert!(prompt.ends_with("'A', 'B', 'C', or 'D'."), "{prompt}");
        }
        let params =
            serde_json::json!({"datasets_dir": dir.0.display().to_string(), "max_samples": 2});
        assert_eq!(
            load_predefined(&spec("gpqa::gptoss", params), None, &mut Vec::new())
                .unwrap()
                .rows
                .len(),
            2
        );
    }

    /// CPython: `r = random.Random(0)`, three `r.sample(range(4), 4)`: [3, 1, 0, 2],
    /// [3, 1, 2, 0], [2, 3, 0, 1], so the correct answer lands on C, D, C.
    #[test]
    fn gpqa_ground_truth_names_the_choice_the_correct_answer_was_shuffled_to() {
        let dir = Scratch::new("gpqa-truth");
        let raw = strings(&[
            ("Question", vec!["Q0", "Q1", "Q2"]),
            ("Correct Answer", vec!["right0", "right1", "same"]),
            ("Incorrect Answer 1", vec!["w1a", "w1b", "w1c"]),
            ("Incorrect Answer 2", vec!["w2a", "w2b", "same"]),
            ("Incorrect Answer 3", vec!["w3a", "w3b", "w3c"]),
            ("High-level domain", vec!["Physics", "Chemistry", "Biology"]),
        ]);
        write_saved_split(&dir.0.join("hf_cache/gpqa_diamond"), "train", &raw);
        let s =
            spec("gpqa::gptoss", serde_json::json!({"datasets_dir": dir.0.display().to_string()}));
        let truth = predefined_column(&s, "ground_truth").unwrap();
        // Row 2's correct text is also its second wrong answer (slot A): index() finds A.
        let want = ["choice3", "choice4", "choice1"].map(|c| Some(Value::from(c)));
        assert_eq!(truth, want);
        let prompt =
            load_predefined(&s, None, &mut Vec::new()).unwrap().rows[0].prompt.clone().unwrap();
        assert!(prompt.starts_with("Q0\n\n(A) w3a\n(B) w1a\n(C) right0\n(D) w2a\n\n"), "{prompt}");
        let domain = predefined_column(&s, "domain").unwrap();
        assert_eq!(domain[1], Some(Value::from("Chemistry")));
        assert_eq!(predefined_column(&s, "subdomain").unwrap()[0], Some(Value::from("")));
        let mut two = s.clone();
        two.samples = Some(2);
        assert_eq!(predefined_column(&two, "ground_truth").unwrap().len(), 2, "samples: 2");
    }

    #[test]
    fn aime25_answers_from_raw_rows_are_normalised_as_its_loader_does() {
        let dir = Scratch::new("aime-raw");
        let raw = strings(&[
            ("question", vec!["six sevens?", "a third?", "zero?"]),
            ("answer", vec!["042", "no digits", "00"]),
        ]);
        write_saved_split(&dir.0.join("hf_cache/aime25"), "test", &raw);
        let s = spec(
            "aime25::gptoss",
            serde_json::json!({"datasets_dir": dir.0.display().to_string()}),
        );
        let answers = predefined_column(&s, "answer").unwrap();
        // Part I twice (see raw_source); int() of the leading digits, None without.
        let once = ["42", "None", "0"].map(|a| Some(Value::from(a)));
        assert_eq!(answers, [once.clone(), once].concat());
        assert_eq!(load_predefined(&s, None, &mut Vec::new()).unwrap().rows.len(), 6);
        let processed = strings(&[("question", vec!["q"]), ("answer", vec!["007"])]);
        write_parquet(&dir.0.join("aime25/aime25.parquet"), &processed);
        // The processed file is the reference's own: read as it is.
        assert_eq!(predefined_column(&s, "answer").unwrap(), [Some(Value::from("007"))]);
    }

    #[test]
    fn cnn_dailymail_llama3_8b_sends_its_prompt_and_chat_template_and_scores_highlights() {
        let dir = Scratch::new("cnn");
        let batch = strings(&[
            ("article", vec!["A cat sat.", "Dogs barked."]),
            ("highlights", vec!["cat sat", "dogs barked"]),
            ("id", vec!["a", "b"]),
        ]);
        write_parquet(&dir.0.join("cnn_dailymail/cnn_dailymail.parquet"), &batch);
        let params = serde_json::json!({"datasets_dir": dir.0.display().to_string()});
        let s = spec("cnn_dailymail::llama3_8b", params);
        assert!(predefined_refusals(&s).is_empty(), "{:?}", predefined_refusals(&s));
        let ds = load_predefined(&s, None, &mut Vec::new()).unwrap();
        let want = "Summarize the following news article in 128 tokens. Please output the \
                    summary only, without any other text.\n\nArticle:\nA cat sat.\n\nSummary:";
        assert_eq!(ds.rows[0].prompt.as_deref(), Some(want));
        let template = "{{- bos_token }}{%- for message in messages %}{{ message['content'] | \
                        trim }}{%- endfor %}";
        assert_eq!(ds.rows[1].request_column("chat_template"), Some(&Value::from(template)));
        // A text prompt's ISL is the text's tokens, template or not: the reference counts
        // `PromptData.text` (IslTrigger) and renders a template only for messages.
        let tok = format!("{}/../tests/assets/tokenizers/char", env!("CARGO_MANIFEST_DIR"));
        let tok = crate::tokenizer::Tokenizer::load(&tok).unwrap();
        let isl = tok.count_row_with(&ds.rows[0], None).unwrap();
        assert_eq!(isl, tok.count(want).unwrap());
        let truth = predefined_column(&s, "highlights").unwrap();
        assert_eq!(truth, [Some(Value::from("cat sat")), Some(Value::from("dogs barked"))]);
        assert_eq!(predefined_column(&s, "nope").unwrap(), [None, None]);
        // One read gives the same rows and column, cut together by samples.
        let mut one = s.clone();
        one.samples = Some(1);
        let (rows, column) =
            load_predefined_with_column(&one, "highlights", &mut Vec::new()).unwrap();
        assert_eq!((rows.rows, column), (ds.rows[..1].to_vec(), truth[..1].to_vec()));
        let random =
            load_predefined_with_column(&spec("random", Value::Null), "answer", &mut Vec::new());
        assert!(random.unwrap_err().to_string().contains("no ground-truth column"));
        let err = load_predefined(
            &spec("cnn_dailymail::other", serde_json::Value::Null),
            None,
            &mut Vec::new(),
        );
        assert!(err.unwrap_err().to_string().contains("presets: llama3_8b"));
    }

    #[test]
    fn a_parser_on_a_predefined_dataset_is_accepted_only_when_it_changes_nothing() {
        let parser = |pairs: &[(&str, &str)]| -> super::super::ParserMap {
            let map: serde_json::Map<String, Value> =
                pairs.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect();
            serde_json::from_value(Value::Object(map)).unwrap()
        };
        let with = |name: &str, pairs: &[(&str, &str)]| {
            let mut s = spec(name, serde_json::Value::Null);
            s.parser = Some(parser(pairs));
            predefined_refusals(&s)
        };
        // The reference ignores parser there; these name the preset's columns as they are.
        assert!(with("cnn_dailymail::llama3_8b", &[("input", "prompt")]).is_empty());
        assert!(with("aime25::gptoss", &[("prompt", "prompt")]).is_empty());
        assert!(with("open_orca::llama2_70b", &[("system", "system")]).is_empty());
        for (name, pairs) in [
            ("cnn_dailymail::llama3_8b", &[("prompt", "article")][..]),
            ("gpqa::gptoss", &[("input", "question")][..]),
            ("aime25::gptoss", &[("system", "system")][..]),
            ("random", &[("prompt", "prompt")][..]),
        ] {
            let refused = with(name, pairs);
            assert_eq!(refused.len(), 1, "{name} {pairs:?}: {refused:?}");
            assert_eq!(refused[0].0, "parser");
            assert!(refused[0].1.contains("would change the rows"), "{refused:?}");
        }
    }

    #[test]
    fn a_path_given_with_a_predefined_name_holds_its_data_processed_or_raw() {
        let dir = Scratch::new("gpqa-path");
        let processed = strings(&[
            ("question", vec!["Q"]),
            ("choice1", vec!["one"]),
            ("choice2", vec!["two"]),
            ("choice3", vec!["three"]),
            ("choice4", vec!["four"]),
        ]);
        let file = dir.0.join("mine.parquet");
        write_parquet(&file, &processed);
        let mut s = spec("gpqa::gptoss", serde_json::Value::Null);
        s.path = file.display().to_string();
        let prompt =
            load_predefined(&s, None, &mut Vec::new()).unwrap().rows[0].prompt.clone().unwrap();
        assert!(prompt.starts_with("Q\n\n(A) one\n(B) two\n(C) three\n(D) four\n\n"), "{prompt}");
        let raw = strings(&[
            ("Question", vec!["Q"]),
            ("Correct Answer", vec!["yes"]),
            ("Incorrect Answer 1", vec!["n1"]),
            ("Incorrect Answer 2", vec!["n2"]),
            ("Incorrect Answer 3", vec!["n3"]),
        ]);
        write_parquet(&file, &raw);
        let prompt =
            load_predefined(&s, None, &mut Vec::new()).unwrap().rows[0].prompt.clone().unwrap();
        for answer in ["yes", "n1", "n2", "n3"] {
            assert_eq!(prompt.matches(&format!(") {answer}\n")).count(), 1, "{prompt}");
        }
    }

    #[test]
    fn open_orca_reads_the_references_jsonl_as_system_and_prompt() {
        let dir = Scratch::new("orca");
        let file = dir
            .0
            .join("open_orca/mlperf-inference/open_orca_gpt4_tokenized_llama.sampled_24576.jsonl");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(
            &file,
            "{\"question\": \"why?\", \"system_prompt\": \"be kind\", \"id\": \"x\"}\n",
        )
        .unwrap();
        let params = serde_json::json!({"datasets_dir": dir.0.display().to_string()});
        let ds =
            load_predefined(&spec("open_orca::llama2_70b", params), None, &mut Vec::new()).unwrap();
        assert_eq!(ds.rows[0].prompt.as_deref(), Some("why?"));
        assert_eq!(ds.rows[0].system.as_deref(), Some("be kind"));
    }

    thread_local! {
        /// The HF datasets cache this test thread's lookups see, so a cache on the machine
        /// running the tests (a developer's own gpqa) cannot change their result.
        pub(super) static CACHE_FOR_TESTS: std::cell::RefCell<Option<PathBuf>> =
            const { std::cell::RefCell::new(None) };
    }

    #[test]
    fn a_missing_predefined_dataset_says_where_it_looked_and_what_to_download() {
        let dir = Scratch::new("missing");
        let empty_cache = dir.0.join("no-hf-cache");
        CACHE_FOR_TESTS.with(|c| *c.borrow_mut() = Some(empty_cache.clone()));
        let params = serde_json::json!({"datasets_dir": dir.0.display().to_string()});
        let err =
            load_predefined(&spec("gpqa::gptoss", params), None, &mut Vec::new()).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let msg = err.to_string();
        assert!(msg.contains("predefined dataset gpqa not found locally"), "{msg}");
        assert!(
            msg.contains(&dir.0.join("gpqa/diamond/gpqa_diamond.parquet").display().to_string()),
            "{msg}"
        );
        assert!(msg.contains(&dir.0.join("hf_cache/gpqa_diamond").display().to_string()), "{msg}");
        assert!(msg.contains("load_dataset('Idavidrein/gpqa', 'gpqa_diamond')"), "{msg}");
        assert!(msg.contains("never downloads"), "{msg}");
        assert!(msg.contains(&empty_cache.display().to_string()), "the HF cache looked in: {msg}");
    }

    #[test]
    fn ids_presets_and_keys_a_run_cannot_honour_are_refused_by_name() {
        let keys = |s: &DatasetSpec| -> Vec<String> {
            predefined_refusals(s).into_iter().map(|(k, w)| format!("{k}: {w}")).collect()
        };
        let swe = keys(&spec("swe_bench", serde_json::Value::Null));
        assert!(swe[0].starts_with("name: predefined dataset swe_bench"), "{swe:?}");
        assert!(keys(&spec("bfcl_v4::function_calling", serde_json::Value::Null)).is_empty());
        assert!(keys(&spec("cnn_dailymail::llama3_8b", serde_json::Value::Null)).is_empty());
        assert!(keys(&spec("shopify_product_catalogue::q3vl", serde_json::Value::Null)).is_empty());
        let lcb = keys(&spec("livecodebench::gptoss", serde_json::Value::Null));
        assert!(lcb[0].contains("external execution service"), "{lcb:?}");
        assert!(lcb[0].contains("remove this dataset from datasets: to run the others"), "{lcb:?}");
        let unknown = keys(&spec("nope", serde_json::Value::Null));
        assert!(unknown[0].contains("\"nope\" is not a predefined dataset"), "{unknown:?}");
        let mut parsed = spec("random", serde_json::Value::Null);
        parsed.parser =
            Some(super::super::ParserMap { prompt: Some("text".into()), ..Default::default() });
        assert!(keys(&parsed)[0].starts_with("parser: "), "{:?}", keys(&parsed));
        let file = DatasetSpec {
            path: "a.jsonl".into(),
            generate_params: Some(Default::default()),
            ..DatasetSpec::default()
        };
        assert!(
            keys(&file)[0].starts_with("generate_params: only predefined"),
            "{:?}",
            keys(&file)
        );
        assert!(keys(&spec("random", serde_json::json!({"num_sequences": 4}))).is_empty());
        let params = serde_json::json!({"force_regenerate": true});
        let err =
            load_predefined(&spec("aime25::gptoss", params), None, &mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("generate_params.force_regenerate: true"), "{err}");
        let err =
            load_predefined(&spec("aime25::other", serde_json::Value::Null), None, &mut Vec::new())
                .unwrap_err();
        assert!(err.to_string().contains("no preset \"other\" (presets: gptoss)"), "{err}");
    }

    /// The processed columns of the reference's Shopify `generate`, one product.
    fn shopify_batch(title: &str, image: &str) -> RecordBatch {
        strings(&[
            ("product_title", vec![title]),
            ("product_description", vec!["desc"]),
            ("product_image_base64", vec![image]),
            ("product_image_format", vec!["JPEG"]),
            ("potential_product_categories", vec!["[\"A > B\"]"]),
            ("ground_truth_category", vec!["A > B"]),
            ("ground_truth_brand", vec!["b"]),
            ("ground_truth_is_secondhand", vec!["false"]),
        ])
    }

    #[test]
    fn the_shopify_catalogues_read_their_split_keyed_parquet_as_multimodal_rows() {
        use loadgen_worker::request::ContentPart;
        let dir = Scratch::new("shopify");
        let full =
            "shopify_product_catalogue/train+test/shopify_product_catalogue_train+test.parquet";
        write_parquet(&dir.0.join(full), &shopify_batch("full", "YQ=="));
        let eight = "shopify_product_catalogue_8k/train/shopify_product_catalogue_8k_train.parquet";
        write_parquet(&dir.0.join(eight), &shopify_batch("eight", ""));
        let test_only = "shopify_product_catalogue/test/shopify_product_catalogue_test.parquet";
        write_parquet(&dir.0.join(test_only), &shopify_batch("test split", "Yg=="));
        let at = |more: serde_json::Value| {
            let mut p = serde_json::json!({"datasets_dir": dir.0.display().to_string()});
            p.as_object_mut().unwrap().extend(more.as_object().unwrap().clone());
            p
        };
        let (ds, truth) = load_predefined_with_column(
            &spec("shopify_product_catalogue::q3vl", at(serde_json::json!({}))),
            "ground_truth_category",
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!(truth, [Some(serde_json::json!("A > B"))]);
        let parts = ds.rows[0].content_parts.as_ref().unwrap();
        assert!(matches!(&parts[0], ContentPart::Text(t) if t.contains("```text\nfull\n```")));
        assert_eq!(parts[1], ContentPart::ImageUrl("data:image/JPEG;base64,YQ==".into()));
        assert!(ds.rows[0].system.as_deref().unwrap().contains("\"is_secondhand\""));
        let ds = load_predefined(
            &spec("shopify_product_catalogue_8k::q3vl", at(serde_json::json!({}))),
            None,
            &mut Vec::new(),
        )
        .unwrap();
        let parts = ds.rows[0].content_parts.as_ref().unwrap();
        assert_eq!(parts.len(), 1, "no image data, no image part: {parts:?}");
        let split = at(serde_json::json!({"split": ["test"]}));
        let ds =
            load_predefined(&spec("shopify_product_catalogue::q3vl", split), None, &mut Vec::new())
                .unwrap();
        let parts = ds.rows[0].content_parts.as_ref().unwrap();
        assert!(matches!(&parts[0], ContentPart::Text(t) if t.contains("test split")));
        for (params, needle) in [
            (
                serde_json::json!({"split": "test"}),
                "generate_params.split = \"test\" is not a list",
            ),
            (serde_json::json!({"token": "hf_x"}), "generate_params.token only changes what"),
            (serde_json::json!({"split": ["dev"]}), "shopify_product_catalogue_dev.parquet"),
        ] {
            let err = load_predefined(
                &spec("shopify_product_catalogue::q3vl", at(params)),
                None,
                &mut Vec::new(),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains(needle), "{needle}: {err}");
            assert!(!err.contains("hf_x"), "the token is never printed: {err}");
        }
        let err = load_predefined(
            &spec("shopify_product_catalogue", at(serde_json::json!({}))),
            None,
            &mut Vec::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("write name: shopify_product_catalogue::q3vl"), "{err}");
    }

    #[test]
    fn a_missing_shopify_catalogue_names_its_hugging_face_repo_and_file() {
        let dir = Scratch::new("shopify-missing");
        let params = serde_json::json!({"datasets_dir": dir.0.display().to_string()});
        let err = load_predefined(
            &spec("shopify_product_catalogue_8k::q3vl", params),
            None,
            &mut Vec::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("nvidia/Shopify-product-catalogue-8k"), "{err}");
        assert!(
            err.contains(
                "shopify_product_catalogue_8k/train/shopify_product_catalogue_8k_train.parquet"
            ),
            "{err}"
        );
        assert!(err.contains("never downloads"), "{err}");
    }

    #[test]
    fn the_hf_datasets_cache_is_found_as_the_datasets_library_finds_it() {
        fn env<'a>(pairs: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> + 'a {
            move |k: &str| pairs.iter().find(|p| p.0 == k).map(|p| p.1.into())
        }
        let all = [("HF_DATASETS_CACHE", "/a"), ("HF_HOME", "/b"), ("HOME", "/h")];
        assert_eq!(hf_datasets_cache_from(env(&all)), Some(PathBuf::from("/a")));
        let home = [("HF_HOME", "/b"), ("HOME", "/h")];
        assert_eq!(hf_datasets_cache_from(env(&home)), Some(PathBuf::from("/b/datasets")));
        let xdg = [("XDG_CACHE_HOME", "/x"), ("HOME", "/h")];
        let want = PathBuf::from("/x/huggingface/datasets");
        assert_eq!(hf_datasets_cache_from(env(&xdg)), Some(want));
        let bare = [("HOME", "/h"), ("HF_DATASETS_CACHE", "")];
        let want = PathBuf::from("/h/.cache/huggingface/datasets");
        assert_eq!(hf_datasets_cache_from(env(&bare)), Some(want));
    }

    #[test]
    fn random_needs_a_tokenizer_and_names_the_key() {
        let err = load_predefined(&spec("random", serde_json::Value::Null), None, &mut Vec::new())
            .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("generate_params.tokenizer"), "{err}");
        let tok = format!("{}/../tests/assets/tokenizers/bpe2k", env!("CARGO_MANIFEST_DIR"));
        let params =
            serde_json::json!({"num_sequences": 6, "input_seq_length": 20, "tokenizer": tok});
        let ds = load_predefined(
            &spec("random", params.clone()),
            Some("/no/such/tokenizer"),
            &mut Vec::new(),
        )
        .unwrap();
        assert_eq!((ds.name.as_str(), ds.rows.len()), ("random", 6));
        // The run's tokenizer is the fallback.
        let mut without = params;
        without.as_object_mut().unwrap().remove("tokenizer");
        let ds2 = load_predefined(&spec("random", without), Some(&tok), &mut Vec::new()).unwrap();
        assert_eq!(ds.rows, ds2.rows);
        let err = load_predefined(
            &spec("random::x", serde_json::Value::Null),
            Some(&tok),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("random has no presets"), "{err}");
    }
}
