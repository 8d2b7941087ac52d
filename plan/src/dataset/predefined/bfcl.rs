//! The reference's BFCL v4 single-turn dataset (`bfcl_v4::function_calling`): its cached
//! table (`<datasets_dir>/bfcl_v4/bfcl_v4_single_turn.parquet`) or, without it, the raw BFCL
//! files under `<datasets_dir>/bfcl_v4/raw/` (`BFCL_v4_<subset>.json`, ground truths in
//! `possible_answer/`); the subsets and categories it selects and its per-subset sampling
//! (`sample_pct`, `category_sample_pct`, `subset_floor`: the first rows of each subset, no RNG).

use std::path::{Path, PathBuf};

// The reference's `CATEGORY_MAP` (single-turn categories), as its scorer groups them.
use loadgen_accuracy::bfcl::CATEGORIES as CATEGORY_MAP;
use loadgen_accuracy::pyvalue::{dump, json_loads, PyValue};
use serde_json::{Map, Value};

use super::bfcl_tools::{convert_to_tools, messages};
use crate::dataset::file::read_records;
use crate::dataset::spec::DatasetSpec;
use crate::error::AppError;
use crate::row::Row;

pub use loadgen_accuracy::bfcl::SINGLE_TURN_SUBSETS;

const MULTI_TURN: [&str; 4] =
    ["multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"];

/// One table record: its columns by name.
type Record = Map<String, Value>;

fn read_table(path: &Path) -> Result<Vec<Record>, AppError> {
    let spec = DatasetSpec { path: path.display().to_string(), ..DatasetSpec::default() };
    read_records(&spec, usize::MAX)
}

const KEYS: [&str; 6] =
    ["categories", "subsets", "sample_pct", "category_sample_pct", "subset_floor", "max_samples"];

/// `generate`'s arguments, checked by name.
#[derive(Debug, Clone, Default)]
struct Params {
    datasets_dir: PathBuf,
    force: bool,
    subsets: Vec<String>,
    sample_pct: Option<f64>,
    category_sample_pct: Option<Vec<(String, f64)>>,
    subset_floor: Option<f64>,
    max_samples: Option<usize>,
}

fn bad(key: &str, value: &Value, what: &str) -> AppError {
    AppError::Input(format!(
        "dataset bfcl_v4: generate_params.{key} = {value} is not {what}; fix the value"
    ))
}

fn strings(key: &str, value: &Value) -> Result<Vec<String>, AppError> {
    let list = value.as_array().ok_or_else(|| bad(key, value, "a list of names"))?;
    list.iter()
        .map(|v| v.as_str().map(str::to_string).ok_or_else(|| bad(key, value, "a list of names")))
        .collect()
}

fn multi_turn_refusal(what: &str) -> AppError {
    AppError::Input(format!(
        "dataset bfcl_v4: {what} is multi-turn, which the reference runs with its separate \
         multi-turn runner, not this single-turn dataset; leave it out"
    ))
}

/// `categories` to subsets, as `generate` expands them.
fn expand(categories: &[String]) -> Result<Vec<String>, AppError> {
    let mut out = Vec::new();
    for c in categories {
        match CATEGORY_MAP.iter().find(|(name, _)| name == c) {
            Some((_, subsets)) => out.extend(subsets.iter().map(|s| s.to_string())),
            None if c == "multi_turn" => return Err(multi_turn_refusal("category multi_turn")),
            None => {
                return Err(AppError::Input(format!(
                    "dataset bfcl_v4: unknown category {c:?} in generate_params.categories; \
                     valid categories: non_live, live, hallucination"
                )))
            }
        }
    }
    Ok(out)
}

fn check_subsets(subsets: &[String]) -> Result<(), AppError> {
    for s in subsets {
        if MULTI_TURN.contains(&s.as_str()) {
            return Err(multi_turn_refusal(&format!("subset {s}")));
        }
        if !SINGLE_TURN_SUBSETS.contains(&s.as_str()) {
            return Err(AppError::Input(format!(
                "dataset bfcl_v4: unknown subset {s:?} in generate_params.subsets; the \
                 single-turn subsets are {}",
                SINGLE_TURN_SUBSETS.join(", ")
            )));
        }
    }
    Ok(())
}

fn percentage(key: &str, value: &Value) -> Result<f64, AppError> {
    let p = value.as_f64().ok_or_else(|| bad(key, value, "a number"))?;
    if p > 0.0 && p <= 100.0 {
        Ok(p)
    } else {
        Err(AppError::Input(format!(
            "dataset bfcl_v4: generate_params.{key}: sampling percentage must be in (0, 100], \
             got {value}"
        )))
    }
}

fn category_pcts(value: &Value) -> Result<Vec<(String, f64)>, AppError> {
    let key = "category_sample_pct";
    let map = value.as_object().ok_or_else(|| bad(key, value, "a map of category to percent"))?;
    let mut out = Vec::new();
    for (category, pct) in map {
        if !CATEGORY_MAP.iter().any(|(c, _)| c == category) {
            return Err(AppError::Input(format!(
                "dataset bfcl_v4: generate_params.category_sample_pct names {category:?}, which \
                 is no single-turn category (non_live, live, hallucination); leave it out"
            )));
        }
        out.push((category.clone(), percentage(&format!("{key}.{category}"), pct)?));
    }
    Ok(out)
}

fn params(spec: &DatasetSpec, default_dir: &Path) -> Result<Params, AppError> {
    let mut p = Params { datasets_dir: default_dir.to_path_buf(), ..Params::default() };
    let (mut categories, mut subsets) = (None, None);
    for (key, value) in spec.generate_params.iter().flatten() {
        match key.as_str() {
            "datasets_dir" => {
                p.datasets_dir = value.as_str().ok_or_else(|| bad(key, value, "a folder"))?.into()
            }
            "force_regenerate" => {
                p.force = value.as_bool().ok_or_else(|| bad(key, value, "true or false"))?
            }
            "categories" => categories = Some(strings(key, value)?),
            "subsets" => subsets = Some(strings(key, value)?),
            "sample_pct" => p.sample_pct = Some(percentage(key, value)?),
            "category_sample_pct" => p.category_sample_pct = Some(category_pcts(value)?),
            "subset_floor" => {
                p.subset_floor = Some(value.as_f64().ok_or_else(|| bad(key, value, "a number"))?)
            }
            "max_samples" => {
                let n = value.as_u64().and_then(|n| usize::try_from(n).ok());
                p.max_samples = Some(n.ok_or_else(|| bad(key, value, "a whole number"))?);
            }
            _ => {
                return Err(AppError::Input(format!(
                    "dataset bfcl_v4: generate_params.{key} is not a parameter of its loader \
                     (known: {}, datasets_dir, force_regenerate); leave it out",
                    KEYS.join(", ")
                )))
            }
        }
    }
    p.subsets = match (categories, subsets) {
        (Some(_), Some(_)) => {
            return Err(AppError::Input(
                "dataset bfcl_v4: generate_params gives both subsets and categories, and the \
                 reference ignores categories when subsets is given; give one of them"
                    .into(),
            ))
        }
        (Some(c), None) => expand(&c)?,
        (None, Some(s)) => s,
        (None, None) => SINGLE_TURN_SUBSETS.iter().map(|s| s.to_string()).collect(),
    };
    check_subsets(&p.subsets)?;
    Ok(p)
}

/// The processed table the reference caches, and where it lies under `datasets_dir`.
const CACHE_FILE: &str = "bfcl_v4/bfcl_v4_single_turn.parquet";

fn dumps(v: &PyValue) -> String {
    let mut out = String::new();
    dump(v, &mut out);
    out
}

fn to_json(v: &PyValue, what: &str, id: &str) -> Result<Value, AppError> {
    serde_json::from_str(&dumps(v)).map_err(|e| {
        AppError::Input(format!("dataset bfcl_v4: sample {id}: its {what} is not plain JSON ({e})"))
    })
}

fn get<'a>(entries: &'a [(PyValue, PyValue)], key: &str) -> Option<&'a PyValue> {
    let key = PyValue::str(key);
    entries.iter().find(|(k, _)| *k == key).map(|(_, v)| v)
}

fn text(v: Option<&PyValue>) -> String {
    match v {
        Some(PyValue::Str(u)) => String::from_utf16_lossy(u),
        _ => String::new(),
    }
}

fn json_lines(path: &Path) -> Result<Vec<PyValue>, AppError> {
    let body = std::fs::read_to_string(path)
        .map_err(|e| AppError::Input(format!("cannot read {}: {e}", path.display())))?;
    let mut out = Vec::new();
    for (i, line) in body.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(json_loads(line.trim()).ok_or_else(|| {
            AppError::Input(format!("{} line {}: not JSON", path.display(), i + 1))
        })?);
    }
    Ok(out)
}

/// `_process_sample`: a raw sample (with its ground truth merged in) as a table record;
/// `None` for a sample without a question.
fn process_sample(sample: &[(PyValue, PyValue)], subset: &str) -> Result<Option<Record>, AppError> {
    let id = text(get(sample, "id"));
    let empty = PyValue::List(Vec::new());
    let question = get(sample, "question").unwrap_or(&empty);
    if !question.is_truthy() {
        return Ok(None);
    }
    let functions = get(sample, "function").unwrap_or(&empty);
    let ground_truth = get(sample, "ground_truth").unwrap_or(&empty);
    let fail = |why: String| AppError::Input(format!("dataset bfcl_v4: sample {id}: {why}"));
    let messages = messages(question).map_err(fail)?;
    let tools = convert_to_tools(functions).map_err(fail)?;
    let mut r = Map::new();
    r.insert("messages".into(), to_json(&messages, "question", &id)?);
    r.insert("tools".into(), to_json(&tools, "function", &id)?);
    r.insert("tool_choice".into(), Value::from("auto"));
    let truth = if ground_truth.is_truthy() { dumps(ground_truth) } else { "[]".to_string() };
    r.insert("ground_truth".into(), Value::from(truth));
    r.insert("func_description".into(), Value::from(dumps(functions)));
    r.insert("subset".into(), Value::from(subset));
    r.insert("sample_id".into(), Value::from(id));
    Ok(Some(r))
}

/// `_load_subset`: a subset's raw file and its `possible_answer/` ground truths.
fn load_subset(raw: &Path, subset: &str) -> Result<Vec<Record>, AppError> {
    let file = raw.join(format!("BFCL_v4_{subset}.json"));
    if !file.is_file() {
        return Err(AppError::Input(format!(
            "predefined dataset bfcl_v4 not found locally: {} is missing (the reference would \
             read it from the bfcl-eval package); copy bfcl-eval's data/BFCL_v4_{subset}.json \
             and data/possible_answer/ there, or put the reference's cached table at {}",
            file.display(),
            raw.parent()
                .map_or(PathBuf::new(), |p| p.join("bfcl_v4_single_turn.parquet"))
                .display()
        )));
    }
    let answers_file = raw.join("possible_answer").join(format!("BFCL_v4_{subset}.json"));
    let mut answers: Vec<(String, PyValue)> = Vec::new();
    if answers_file.is_file() {
        for entry in json_lines(&answers_file)? {
            let PyValue::Dict(e) = entry else { continue };
            let id = text(get(&e, "id"));
            if !id.is_empty() {
                let truth = get(&e, "ground_truth").cloned().unwrap_or(PyValue::List(Vec::new()));
                answers.retain(|(i, _)| *i != id);
                answers.push((id, truth));
            }
        }
    }
    let mut out = Vec::new();
    for sample in json_lines(&file)? {
        let PyValue::Dict(mut entries) = sample else { continue };
        let id = text(get(&entries, "id"));
        if let Some((_, truth)) = answers.iter().find(|(i, _)| *i == id) {
            loadgen_accuracy::pyvalue::dict_insert(
                &mut entries,
                PyValue::str("ground_truth"),
                truth.clone(),
            );
        }
        out.extend(process_sample(&entries, subset)?);
    }
    Ok(out)
}

/// The whole single-turn table: `path` when given (a table in the cache's columns), else the
/// reference's cached parquet (its JSON-text columns decoded), or, without it or under
/// `force_regenerate`, built from the raw files.
fn table(p: &Params, path: &str) -> Result<Vec<Record>, AppError> {
    let cached =
        if path.is_empty() { p.datasets_dir.join(CACHE_FILE) } else { PathBuf::from(path) };
    if !path.is_empty() || (cached.is_file() && !p.force) {
        let mut records = read_table(&cached)?;
        for r in &mut records {
            for column in ["messages", "tools"] {
                if let Some(Value::String(s)) = r.get(column) {
                    let v = serde_json::from_str(s).map_err(|e| {
                        AppError::Input(format!(
                            "{}: a {column} cell is not JSON ({e})",
                            cached.display()
                        ))
                    })?;
                    r.insert(column.into(), v);
                }
            }
        }
        return Ok(records);
    }
    let raw = p.datasets_dir.join("bfcl_v4").join("raw");
    let mut records = Vec::new();
    for subset in SINGLE_TURN_SUBSETS {
        records.extend(load_subset(&raw, subset)?);
    }
    Ok(records)
}

fn subset_of(r: &Record) -> &str {
    r.get("subset").and_then(Value::as_str).unwrap_or_default()
}

/// `_resolve_subset_pct`: the subset's category rate, else `sample_pct`.
fn subset_pct(p: &Params, subset: &str) -> Option<f64> {
    let category = CATEGORY_MAP.iter().find(|(_, s)| s.contains(&subset)).map(|(c, _)| *c);
    let by_category = p
        .category_sample_pct
        .as_ref()
        .and_then(|pcts| pcts.iter().find(|(c, _)| Some(c.as_str()) == category).map(|(_, v)| *v));
    by_category.or(p.sample_pct)
}

/// How many rows of a subset of `total` rows are kept.
fn keep_count(p: &Params, subset: &str, total: usize) -> usize {
    if p.subset_floor.is_some_and(|floor| total as f64 <= floor) {
        return total;
    }
    match subset_pct(p, subset) {
        // int(total * pct / 100), at least 1.
        Some(pct) => ((total as f64 * pct / 100.0) as usize).max(1),
        None => total,
    }
}

/// The rows `generate` returns: the selected subsets, each subset's first rows when a
/// sampling key is given (then grouped by subset name, as pandas' `groupby` orders them),
/// then `max_samples`.
fn select(p: &Params, mut records: Vec<Record>) -> Vec<Record> {
    records.retain(|r| p.subsets.iter().any(|s| s == subset_of(r)));
    let sampling =
        p.sample_pct.is_some() || p.category_sample_pct.is_some() || p.subset_floor.is_some();
    if sampling && !records.is_empty() {
        let mut names: Vec<String> = records.iter().map(|r| subset_of(r).to_string()).collect();
        names.sort();
        names.dedup();
        let mut sampled = Vec::with_capacity(records.len());
        for name in names {
            let group: Vec<&Record> = records.iter().filter(|r| subset_of(r) == name).collect();
            let n = keep_count(p, &name, group.len());
            sampled.extend(group.into_iter().take(n).cloned());
        }
        records = sampled;
    }
    if let Some(n) = p.max_samples {
        records.truncate(n);
    }
    records
}

/// A record as the `function_calling` preset sends it: its messages, with its `tools` and
/// `tool_choice` in the request.
fn preset_row(r: &Record) -> Row {
    let request_columns = ["tools", "tool_choice"]
        .into_iter()
        .filter_map(|c| r.get(c).filter(|v| !v.is_null()).map(|v| (c.to_string(), v.clone())))
        .collect();
    Row { messages: r.get("messages").cloned(), request_columns, ..Row::default() }
}

/// `bfcl_v4::function_calling`'s rows and the table records they were made from;
/// `default_dir` is the cache folder when `generate_params.datasets_dir` is not given.
pub(super) fn load(
    spec: &DatasetSpec,
    preset: Option<&str>,
    default_dir: &Path,
) -> Result<(Vec<Row>, Vec<Record>), AppError> {
    match preset {
        Some("function_calling") => {}
        Some(other) => {
            return Err(AppError::Input(format!(
                "predefined dataset bfcl_v4 has no preset {other:?} (presets: function_calling)"
            )))
        }
        None => {
            return Err(AppError::Input(
                "predefined dataset bfcl_v4 sends its rows' messages and tools through a preset; \
                 write name: bfcl_v4::function_calling"
                    .into(),
            ))
        }
    }
    let p = params(spec, default_dir)?;
    if p.subsets.is_empty() {
        return Err(AppError::Input(
            "dataset bfcl_v4: generate_params selects no subsets; name at least one".into(),
        ));
    }
    let records = select(&p, table(&p, &spec.path)?);
    Ok((records.iter().map(preset_row).collect(), records))
}

#[cfg(test)]
mod tests;
