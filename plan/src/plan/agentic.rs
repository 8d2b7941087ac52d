//! An agentic run's plan (`datasets[].agentic_inference` with load pattern
//! `agentic_inference`): the dataset's conversations, the instances the run starts in the
//! reference's order (`num_trajectories_to_issue`, repeats named `<id>__repeat_<n>`), one row
//! per client turn of each instance, and what each turn's request carries beyond its row: the
//! routing headers naming its conversation, the salt, the tool delay and the turn timeout.

use std::sync::Arc;

use loadgen_coordinator::conversation::{ConversationPlan, ConversationSpan};
use loadgen_worker::request::{self, Prompt, RequestOptions, RowParams};
use serde_json::Value;

use crate::dataset::agentic::{AgenticConversations, ClientTurn, Conversation};
use crate::dataset::{AgenticInference, Dataset, DatasetKind, DatasetSpec};
use crate::error::AppError;
use crate::row::Row;
use crate::yaml::Config;

/// Rows an agentic run may build (instances × client turns): a named limit, far past the
/// reference's own runs (613 trajectories), below what the request tables' u32 rows can hold.
pub const AGENTIC_ROWS_MAX: usize = 10_000_000;

/// One conversation instance the run starts: the dataset's conversation `source` on its
/// `repeat`-th pass (1: the first, whose id is the dataset's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance {
    pub source: u32,
    pub repeat: u64,
}

/// What the plan resolved for an agentic run.
#[derive(Debug, Clone)]
pub struct AgenticPlan {
    /// The dataset's conversations, as read.
    pub source: AgenticConversations,
    /// The instances in the order the run starts them.
    pub instances: Vec<Instance>,
    /// Per row (one per turn of each instance, instance by instance): its instance and the
    /// turn's index in its conversation's `turns`.
    pub row_turns: Vec<(u32, u32)>,
    /// The spans, ids and turn numbers the coordinator hands out and the log names.
    pub conversations: Arc<ConversationPlan>,
    /// Header names every turn's request carries with its conversation's id.
    pub routing_headers: Vec<String>,
    pub enable_salt: bool,
    /// Per row, the pause before its turn (`inject_tool_delay`); `None` without it.
    pub turn_delays_ns: Option<Arc<Vec<u64>>>,
    /// `turn_timeout_s` in ns: a turn past it fails (kind `timeout`) and its conversation's
    /// later turns with it.
    pub turn_timeout_ns: u64,
    /// The whole plan's conversation instances and their client turns: a shard runs every
    /// N-th instance from its index (`instances`), these are all of them.
    pub plan_conversations: u64,
    pub plan_turns: u64,
}

/// The performance dataset's `agentic_inference` block and entry, when it has one.
pub(super) fn agentic_spec(config: &Config) -> Option<(&DatasetSpec, &AgenticInference)> {
    let spec = config.datasets.iter().find(|d| d.kind == DatasetKind::Performance)?;
    spec.agentic_inference.as_ref().map(|a| (spec, a))
}

/// Reads the agentic dataset and plans its instances and rows under `request` (the run's
/// model, streaming and output length, which a turn may not contradict).
pub(super) fn resolve_agentic(
    spec: &DatasetSpec,
    settings: &AgenticInference,
    request: &RequestOptions,
    shard: Option<(u32, u32)>,
) -> Result<(Dataset, AgenticPlan), AppError> {
    if let Some(n) = spec.samples {
        return Err(AppError::Input(format!(
            "datasets[].samples {n} does not apply to an agentic_inference dataset; give \
             agentic_inference.num_trajectories_to_issue instead"
        )));
    }
    let source = crate::dataset::load_agentic_conversations(spec)?;
    if settings.enable_salt {
        source.check_salt()?;
    }
    for header in &settings.routing_headers {
        super::headers::parse_header(&format!("{header}: x")).map_err(|e| {
            AppError::Input(format!("agentic_inference.routing_headers {header:?}: {e}"))
        })?;
    }
    let count = settings.num_trajectories_to_issue.unwrap_or(source.conversations.len() as u64);
    let all = instances(source.conversations.len(), count);
    let turns_of = |i: &Instance| source.conversations[i.source as usize].turns.len() as u64;
    let plan_turns: u64 = all.iter().map(turns_of).sum();
    let instances = shard_instances(&all, shard)?;
    let row_turns = row_turns(&source, &instances)?;
    let mut rows = Vec::with_capacity(row_turns.len());
    for &(instance, turn) in &row_turns {
        let i = instances[instance as usize];
        let conversation = &source.conversations[i.source as usize];
        let turn = &conversation.turns[turn as usize];
        check_turn(conversation, turn, request)?;
        rows.push(turn_row(conversation, turn, i.repeat, settings.enable_salt)?);
    }
    let conversations = Arc::new(conversation_plan(&source, &instances));
    let turn_delays_ns = settings.inject_tool_delay.then(|| {
        let delay = |&(i, t): &(u32, u32)| {
            let conversation = &source.conversations[instances[i as usize].source as usize];
            (conversation.turns[t as usize].delay_s * 1e9).round() as u64
        };
        Arc::new(row_turns.iter().map(delay).collect())
    });
    let plan = AgenticPlan {
        turn_timeout_ns: (settings.turn_timeout_s * 1e9).round().min(u64::MAX as f64) as u64,
        routing_headers: settings.routing_headers.clone(),
        enable_salt: settings.enable_salt,
        turn_delays_ns,
        conversations,
        row_turns,
        instances,
        source,
        plan_conversations: count,
        plan_turns,
    };
    Ok((Dataset { name: spec.display_name(), rows }, plan))
}

/// What an agentic run cannot have here: a warm-up (its samples would shift the numbering of
/// the conversations' turns). `min_duration_ms` does not size it (the reference stops an
/// agentic run by its trajectories): a note says so when it is set.
pub(super) fn check_agentic_run(config: &Config, notes: &mut Vec<String>) -> Result<(), AppError> {
    if config.settings.warmup.enabled {
        return Err(AppError::Input(
            "settings.warmup does not apply to an agentic_inference run here yet (a warm-up \
             would send conversation turns outside their conversations); leave it out"
                .into(),
        ));
    }
    let min_ms = config.settings.runtime.min_duration_ms;
    if min_ms > 0 {
        notes.push(format!(
            "note: settings.runtime.min_duration_ms {min_ms} does not size an agentic_inference \
             run: it runs num_trajectories_to_issue conversations, as the reference does"
        ));
    }
    Ok(())
}

/// The per-request timeout of a run: an agentic run's turn timeout, or `--timeout` when that
/// is shorter (0: none).
pub(super) fn turn_timeout(request_timeout_ns: u64, agentic: Option<&AgenticPlan>) -> u64 {
    match (agentic.map(|a| a.turn_timeout_ns), request_timeout_ns) {
        (Some(turn), 0) => turn,
        (Some(turn), given) => turn.min(given),
        (None, given) => given,
    }
}

/// The reference's trajectory order: instance k runs conversation `k % n` on pass
/// `k / n + 1`.
pub fn instances(conversations: usize, count: u64) -> Vec<Instance> {
    let n = conversations.max(1) as u64;
    (0..count).map(|k| Instance { source: (k % n) as u32, repeat: k / n + 1 }).collect()
}

/// Shard `(index, count)`'s instances: every count-th of the plan's from its index, each
/// conversation wholly in one shard and named as the single-host run names it. A shard left
/// without a conversation is refused.
pub fn shard_instances(
    all: &[Instance],
    shard: Option<(u32, u32)>,
) -> Result<Vec<Instance>, AppError> {
    let Some((index, count)) = shard else { return Ok(all.to_vec()) };
    let mine: Vec<Instance> =
        all.iter().skip(index as usize).step_by(count as usize).copied().collect();
    if mine.is_empty() {
        return Err(AppError::Input(format!(
            "agentic_inference: {} trajectories over {} shards leave shard {} without a \
             conversation; give num_trajectories_to_issue of at least {} or fewer shards",
            all.len(),
            count,
            index,
            count
        )));
    }
    Ok(mine)
}

/// The reference's logical id of an instance: the dataset's id on the first pass, then
/// `<id>__repeat_<pass>`.
pub fn instance_id(conversation: &Conversation, repeat: u64) -> String {
    match repeat {
        1 => conversation.id.clone(),
        n => format!("{}__repeat_{n}", conversation.id),
    }
}

/// Every row's (instance, turn index), instance by instance; refused past `AGENTIC_ROWS_MAX`.
fn row_turns(
    source: &AgenticConversations,
    instances: &[Instance],
) -> Result<Vec<(u32, u32)>, AppError> {
    let turns = |i: &Instance| source.conversations[i.source as usize].turns.len();
    let total: usize = instances.iter().map(turns).sum();
    if total > AGENTIC_ROWS_MAX {
        return Err(AppError::Input(format!(
            "agentic_inference: {} trajectories of this dataset are {total} client turns, past \
             the limit of {AGENTIC_ROWS_MAX} (AGENTIC_ROWS_MAX); lower \
             num_trajectories_to_issue",
            instances.len()
        )));
    }
    let mut out = Vec::with_capacity(total);
    for (k, i) in instances.iter().enumerate() {
        out.extend((0..turns(i) as u32).map(|t| (k as u32, t)));
    }
    Ok(out)
}

/// Refuses a turn whose request would differ from the run's in what every request of a run
/// shares here: the model and streaming.
fn check_turn(
    conversation: &Conversation,
    turn: &ClientTurn,
    request: &RequestOptions,
) -> Result<(), AppError> {
    let at = format!("conversation {:?} turn {}", conversation.id, turn.turn);
    if let Some(model) = turn.model.as_ref().filter(|m| **m != request.model) {
        return Err(AppError::Input(format!(
            "{at} names model {model:?}, but every request of a run here names the run's \
             model {:?}; drop the row's model or set model_params.name to it",
            request.model
        )));
    }
    let stream = turn.stream(request.streaming);
    if stream != request.streaming {
        return Err(AppError::Input(format!(
            "{at} sets stream {stream}, but the run's requests stream {}: a run here streams \
             all its requests or none; set model_params.streaming to match the dataset",
            request.streaming
        )));
    }
    Ok(())
}

/// A turn's row: its messages (salted for `repeat` when asked) and its request columns, for
/// the client ISL and the log's `PromptData`; the request itself is built by `turn_body`.
fn turn_row(
    conversation: &Conversation,
    turn: &ClientTurn,
    repeat: u64,
    salt: bool,
) -> Result<Row, AppError> {
    let messages = messages_json(conversation, turn, repeat, salt)?;
    let messages: Value = serde_json::from_slice(&messages).map_err(|e| {
        AppError::Execution(format!("an agentic turn's messages do not read back: {e}"))
    })?;
    let request_columns = turn
        .columns
        .iter()
        .filter_map(|(k, v)| serde_json::from_str(v.get()).ok().map(|v| (k.clone(), v)))
        .collect();
    let n = column(turn, "n").and_then(|v| v.as_u64()).and_then(|n| u32::try_from(n).ok());
    Ok(Row {
        prompt: None,
        system: None,
        messages: Some(messages),
        content_parts: None,
        token_ids: None,
        n,
        request_columns,
    })
}

fn column(turn: &ClientTurn, name: &str) -> Option<Value> {
    let raw = turn.columns.iter().find(|(k, _)| k == name)?;
    serde_json::from_str(raw.1.get()).ok()
}

fn messages_json(
    conversation: &Conversation,
    turn: &ClientTurn,
    repeat: u64,
    salt: bool,
) -> Result<Vec<u8>, AppError> {
    match salt {
        true => conversation.salted_messages_json(turn, repeat),
        false => Ok(conversation.messages_json(turn)),
    }
}

/// The coordinator's view: one span per instance, its logical id, each row's turn number.
fn conversation_plan(source: &AgenticConversations, instances: &[Instance]) -> ConversationPlan {
    let (mut spans, mut ids, mut turn_of_row) = (Vec::new(), Vec::new(), Vec::new());
    for i in instances {
        let conversation = &source.conversations[i.source as usize];
        let first_row = turn_of_row.len() as u32;
        spans.push(ConversationSpan { first_row, turns: conversation.turns.len() as u32 });
        ids.push(instance_id(conversation, i.repeat));
        turn_of_row.extend(conversation.turns.iter().map(|t| t.turn));
    }
    ConversationPlan::new(spans, ids, turn_of_row)
}

impl AgenticPlan {
    /// The dataset's client turns (the reference's `num_samples()` of an agentic dataset).
    pub fn client_turns(&self) -> u64 {
        self.source.conversations.iter().map(|c| c.turns.len() as u64).sum()
    }

    /// Row `row`'s request body under the run's `opts`: its messages as the reference writes
    /// them, the row's own sampling keys over the run's, its output length, its columns.
    pub fn turn_body(&self, opts: &RequestOptions, row: usize) -> Result<Vec<u8>, AppError> {
        let (instance, turn) = self.row_turns[row];
        let i = self.instances[instance as usize];
        let conversation = &self.source.conversations[i.source as usize];
        let turn = &conversation.turns[turn as usize];
        let messages = messages_json(conversation, turn, i.repeat, self.enable_salt)?;
        let columns: Vec<(String, Value)> = turn
            .columns
            .iter()
            .filter_map(|(k, v)| serde_json::from_str(v.get()).ok().map(|v| (k.clone(), v)))
            .collect();
        let opts = turn_options(opts, &columns);
        let max_tokens = turn.max_output_tokens(u64::from(opts.max_output_tokens));
        let n = column(turn, "n").and_then(|v| v.as_u64()).and_then(|n| u32::try_from(n).ok());
        let params = RowParams {
            n,
            max_output_tokens: Some(u32::try_from(max_tokens).unwrap_or(u32::MAX)),
            columns: &columns,
            // The reference pre-bakes `stream` into every agentic sample, false included.
            stream_key: true,
        };
        request::body_json_row(&opts, Prompt::RawMessages(&messages), params).map_err(|e| {
            AppError::Input(format!(
                "conversation {:?} turn {} cannot become a request: {e}",
                conversation.id, turn.turn
            ))
        })
    }

    /// Row `row`'s routing headers: each name with its conversation instance's id.
    pub fn turn_headers(&self, row: usize) -> Vec<(String, String)> {
        let id = self.conversations.label(row as u64).map(|(id, _)| id.to_string());
        let id = id.unwrap_or_default();
        self.routing_headers.iter().map(|name| (name.clone(), id.clone())).collect()
    }
}

/// The run's options with the turn's own sampling keys over them, as the reference fills the
/// run's values only where a row lacks its own.
fn turn_options(opts: &RequestOptions, columns: &[(String, Value)]) -> RequestOptions {
    let mut out = opts.clone();
    for (key, value) in columns {
        match key.as_str() {
            "temperature" => out.temperature = value.as_f64(),
            "top_p" => out.top_p = value.as_f64(),
            "top_k" => out.top_k = value.as_i64(),
            "seed" => out.seed = value.as_u64(),
            "repetition_penalty" => out.sampling.repetition_penalty = value.as_f64(),
            "presence_penalty" => out.sampling.presence_penalty = value.as_f64(),
            "frequency_penalty" => out.sampling.frequency_penalty = value.as_f64(),
            "chat_template_kwargs" => out.sampling.chat_template_kwargs = Some(value.clone()),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_follow_the_reference_s_trajectory_order_and_names() {
        let got = instances(3, 7);
        let pairs: Vec<(u32, u64)> = got.iter().map(|i| (i.source, i.repeat)).collect();
        assert_eq!(pairs, [(0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2), (0, 3)]);
        assert_eq!(instances(3, 2).len(), 2, "fewer trajectories than conversations");
    }
}
