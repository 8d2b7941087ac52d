//! The reference's `agentic_inference_inline` scorer: an agentic run's own outputs scored
//! against the recorded assistant turns of its dataset, with no phase of its own. A
//! conversation whose id is `sim_<n>` is a workflow: a turn scores 1 when the model's intent
//! code (`intent: I042`, else the last bare `I042`) is one of the recorded `intent_codes`. Any
//! other is coding: a turn scores the multiset IoU of the executables of its `bash` tool calls
//! against the recorded calls' (shell wrappers, environment assignments, paths and aliases
//! normalised). Only turns with ground truth are scored; an issued turn without output scores
//! 0. The result is the reference's `scores.json`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;
use serde_json::Value;

/// A recorded assistant turn: the answer to client turn `client_turn` of `conversation_id`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpectedTurn {
    pub conversation_id: String,
    pub client_turn: u32,
    /// The assistant row's own `turn`, which the scores name.
    pub assistant_turn: u32,
    /// The row's `intent_codes` (a workflow's ground truth), when a list.
    pub intent_codes: Option<Vec<Value>>,
    /// The row's `tool_calls` (a coding turn's ground truth).
    pub tool_calls: Option<Value>,
}

/// One issued turn of the run: its conversation (without `__repeat_<n>`), repeat and client
/// turn, and the model's answer when it completed.
#[derive(Debug, Clone, PartialEq)]
pub struct IssuedTurn {
    pub conversation_id: String,
    pub repeat: u64,
    pub turn: u32,
    pub output: Option<ModelTurn>,
}

/// A model's answer as the reference splits it (`TextModelOutput.as_message_parts`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelTurn {
    pub content: String,
    pub reasoning: Option<String>,
    /// The merged tool calls (a list of call objects).
    pub tool_calls: Option<Value>,
}

/// `scores.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InlineScores {
    pub score: Option<f64>,
    pub turns: TurnCounts,
    pub domains: BTreeMap<&'static str, DomainScore>,
    pub per_turn: Vec<TurnScore>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub excluded_turns: Vec<Excluded>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TurnCounts {
    pub issued: u64,
    pub expected: u64,
    pub observed: u64,
    pub missing: u64,
    pub scored: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DomainScore {
    pub score: f64,
    pub scored: u64,
}

/// One scored turn, its keys in the reference's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnScore {
    pub conversation_id: String,
    pub repeat: u64,
    pub turn: u32,
    pub domain: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
    #[serde(flatten)]
    pub detail: TurnDetail,
    pub score: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum TurnDetail {
    Workflow { gt_intents: Vec<String>, model_intent: Option<String> },
    Coding { gt_actions: Vec<&'static str>, model_actions: Vec<&'static str> },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Excluded {
    pub conversation_id: String,
    pub turn: u32,
    pub domain: &'static str,
    pub exclude_reason: &'static str,
}

/// The repeats issued (the scorer's `n_repeats`) with the scores.
pub fn score(expected: &[ExpectedTurn], issued: &[IssuedTurn]) -> (InlineScores, usize) {
    let mut by_key: BTreeMap<(&str, u32), &ExpectedTurn> = BTreeMap::new();
    for e in expected {
        by_key.insert((e.conversation_id.as_str(), e.client_turn), e);
    }
    let mut excluded = Vec::new();
    let mut scorable: BTreeMap<(&str, u32), &ExpectedTurn> = BTreeMap::new();
    for (key, e) in &by_key {
        let domain = domain_of(key.0);
        let has_truth = match domain {
            WORKFLOW => !truth_intents(e).is_empty(),
            _ => !e.tool_calls.as_ref().map(bash_actions).unwrap_or_default().is_empty(),
        };
        if has_truth {
            scorable.insert(*key, e);
        } else {
            excluded.push(Excluded {
                conversation_id: key.0.to_string(),
                turn: e.assistant_turn,
                domain,
                exclude_reason: "no ground truth",
            });
        }
    }
    // The issued turns the dataset expects, once each (a later line wins, as the reference's
    // dictionary does; an output is kept over a missing one).
    let mut outputs: BTreeMap<(&str, u64, u32), Option<&ModelTurn>> = BTreeMap::new();
    for t in issued.iter().filter(|t| by_key.contains_key(&(t.conversation_id.as_str(), t.turn))) {
        let slot = outputs.entry((t.conversation_id.as_str(), t.repeat, t.turn)).or_default();
        if t.output.is_some() || slot.is_none() {
            *slot = t.output.as_ref();
        }
    }
    let repeats: BTreeSet<u64> = outputs.keys().map(|k| k.1).collect();
    let result = tally(&scorable, &outputs, excluded);
    (result, repeats.len())
}

const WORKFLOW: &str = "workflow";
const CODING: &str = "coding";

fn tally(
    scorable: &BTreeMap<(&str, u32), &ExpectedTurn>,
    outputs: &BTreeMap<(&str, u64, u32), Option<&ModelTurn>>,
    excluded_turns: Vec<Excluded>,
) -> InlineScores {
    let mut per_turn = Vec::new();
    let mut sums: BTreeMap<&'static str, (f64, u64)> = BTreeMap::new();
    let mut observed = 0;
    // Summed in the turns' order, as the reference sums them.
    let mut total = 0.0;
    for (&(id, repeat, turn), output) in outputs {
        let Some(e) = scorable.get(&(id, turn)) else { continue };
        let domain = domain_of(id);
        let missing = output.is_none();
        let blank = ModelTurn::default();
        let model = output.unwrap_or(&blank);
        observed += u64::from(!missing);
        let (detail, score) = match domain {
            WORKFLOW => {
                let truth = truth_intents(e);
                let intent = model_intent(model);
                let score =
                    if intent.as_ref().is_some_and(|i| truth.contains(i)) { 1.0 } else { 0.0 };
                (
                    TurnDetail::Workflow {
                        gt_intents: truth.into_iter().collect(),
                        model_intent: intent,
                    },
                    score,
                )
            }
            _ => {
                let truth = e.tool_calls.as_ref().map(bash_actions).unwrap_or_default();
                let actions = model.tool_calls.as_ref().map(bash_actions).unwrap_or_default();
                let score = multiset_iou(&truth, &actions);
                (TurnDetail::Coding { gt_actions: truth, model_actions: actions }, score)
            }
        };
        total += score;
        let sum = sums.entry(domain).or_default();
        sum.0 += score;
        sum.1 += 1;
        per_turn.push(TurnScore {
            conversation_id: id.to_string(),
            repeat,
            turn: e.assistant_turn,
            domain,
            missing,
            detail,
            score: py_round4(score),
        });
    }
    let expected = per_turn.len() as u64;
    InlineScores {
        score: (expected > 0).then(|| py_round4(total / expected as f64)),
        turns: TurnCounts {
            issued: outputs.len() as u64,
            expected,
            observed,
            missing: expected - observed,
            scored: expected,
        },
        domains: sums
            .into_iter()
            .map(|(d, (s, n))| (d, DomainScore { score: py_round4(s / n as f64), scored: n }))
            .collect(),
        per_turn,
        excluded_turns,
    }
}

fn domain_of(conversation_id: &str) -> &'static str {
    static SIM: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^sim_\d+$").unwrap());
    if SIM.is_match(conversation_id) {
        WORKFLOW
    } else {
        CODING
    }
}

/// Python's `round(x, 4)`: the value correctly rounded to 4 decimals.
fn py_round4(x: f64) -> f64 {
    format!("{x:.4}").parse().unwrap_or(x)
}

/// `|a ∩ b| / |a ∪ b|` of two multisets (0 when both are empty, which ground truth rules out).
fn multiset_iou(a: &[&'static str], b: &[&'static str]) -> f64 {
    fn count(xs: &[&'static str]) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::new();
        xs.iter().for_each(|x| *m.entry(*x).or_default() += 1);
        m
    }
    let (ca, cb) = (count(a), count(b));
    let keys: BTreeSet<&str> = ca.keys().chain(cb.keys()).copied().collect();
    let (mut inter, mut union) = (0u64, 0u64);
    for k in keys {
        let (x, y) = (ca.get(k).copied().unwrap_or(0), cb.get(k).copied().unwrap_or(0));
        inter += x.min(y);
        union += x.max(y);
    }
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
    }
}

/// A workflow turn's ground truth: its `intent_codes` strings, upper-cased.
fn truth_intents(e: &ExpectedTurn) -> BTreeSet<String> {
    e.intent_codes
        .iter()
        .flatten()
        .filter_map(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_uppercase)
        .collect()
}

/// The model's intent code: `intent: I123` in the reasoning, else in the content; else the
/// last bare `I123` of the reasoning, else of the content.
pub fn model_intent(model: &ModelTurn) -> Option<String> {
    static INTENT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"(?i)\bintent:\s*(I\d{3})\b").unwrap());
    static BARE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\bI(\d{3})\b").unwrap());
    let fields = [model.reasoning.as_deref().unwrap_or(""), model.content.as_str()];
    for text in fields {
        if let Some(c) = INTENT.captures(text) {
            return Some(c[1].to_uppercase());
        }
    }
    for text in fields {
        if let Some(c) = BARE.captures_iter(text).last() {
            return Some(format!("I{}", &c[1]));
        }
    }
    None
}

/// The normalised executables of a turn's `bash` tool calls, in order.
pub fn bash_actions(tool_calls: &Value) -> Vec<&'static str> {
    let Value::Array(calls) = tool_calls else { return Vec::new() };
    let mut actions = Vec::new();
    for call in calls {
        let Some(function) = call.get("function").filter(|f| f.is_object()) else { continue };
        if function.get("name").and_then(Value::as_str) != Some("bash") {
            continue;
        }
        let parsed;
        let args = match function.get("arguments") {
            Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
                Ok(v) => {
                    parsed = v;
                    &parsed
                }
                Err(_) => continue,
            },
            Some(other) => other,
            None => continue,
        };
        let command =
            [args.get("command"), args.get("cmd")].into_iter().flatten().find(|v| is_truthy(v));
        if let Some(Value::String(command)) = command {
            command_actions(command, &mut actions);
        }
    }
    actions
}

/// Python truthiness of a JSON value.
fn is_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Each pipeline stage's executable of `command`, normalised, when it is a known one.
fn command_actions(command: &str, actions: &mut Vec<&'static str>) {
    static QUOTED: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"'[^']*'|"(?:[^"\\]|\\.)*"|`[^`]*`"#).unwrap());
    static SEPARATOR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\|\||\||&&|;|\n").unwrap());
    static ENV: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*=").unwrap());
    static PY_VERSION: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\.\d+(\.\d+)?$").unwrap());
    const WRAPPERS: [&str; 6] = ["env", "time", "nice", "sudo", "exec", "command"];
    let unquoted = QUOTED.replace_all(command, " ");
    for stage in SEPARATOR.split(&unquoted) {
        let mut tokens =
            stage.split_whitespace().skip_while(|t| ENV.is_match(t) || WRAPPERS.contains(t));
        let Some(first) = tokens.next() else { continue };
        let name = first.rsplit('/').next().unwrap_or(first).to_lowercase();
        let name = PY_VERSION.replace(&name, "");
        if let Some(action) = alias(&name) {
            actions.push(action);
        }
    }
}

/// The reference's executable aliases.
fn alias(executable: &str) -> Option<&'static str> {
    Some(match executable {
        "python" | "python2" | "python3" | "py" => "python",
        "pip" | "pip3" => "pip",
        "pytest" => "pytest",
        "pylint" => "pylint",
        "sphinx-build" | "sphinx-quickstart" => "sphinx",
        "cython" => "cython",
        "make" => "make",
        "conda" => "conda",
        "cat" | "less" | "more" => "cat",
        "head" => "head",
        "tail" => "tail",
        "wc" => "wc",
        "diff" => "diff",
        "grep" | "egrep" | "fgrep" | "rg" | "ag" => "grep",
        "sed" => "sed",
        "awk" | "gawk" => "awk",
        "tr" => "tr",
        "sort" => "sort",
        "uniq" => "uniq",
        "cut" => "cut",
        "find" | "locate" => "find",
        "ls" => "ls",
        "xargs" => "xargs",
        "cp" => "cp",
        "mv" => "mv",
        "rm" => "rm",
        "mkdir" => "mkdir",
        "touch" => "touch",
        "tee" => "tee",
        "source" | "." => "source",
        "which" => "which",
        "alias" => "alias",
        "unset" => "unset",
        "export" => "export",
        "git" => "git",
        "curl" | "wget" => "curl",
        "true" => "true",
        "false" => "false",
        "timeout" => "timeout",
        "date" => "date",
        "apt-get" | "apt" => "apt",
        "yum" => "yum",
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
