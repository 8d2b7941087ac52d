//! Replaying `events.jsonl` into the rows and counters the run's aggregator kept.
//!
//! The rules are the aggregator's (and the reference's `metrics_table.py`): a sample is
//! tracked when its `sample.issued` line falls inside performance tracking; its
//! `sample.complete` line makes its row, in log order, which is the order the run pushed its
//! rows in (so float sums come out to the bit); `data: null` or an `error` line marks it
//! failed; `error.loadgen` abandons it. Client token counts come from the same tokenizer and
//! the same counting calls as the run's.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use loadgen_coordinator::metrics::{FinishKind, RunCounters, SampleRow};
use serde_json::value::RawValue;
use serde_json::Value;

use super::read::{Complete, Event, LineError, SessionKind};
use crate::dataset::Row;
use crate::tokenizer::Tokenizer;

/// Hashes a sample uuid by folding and multiplying it: uuids are random (the reference's uuid4)
/// or distinct sample ids (ours), and SipHash cost a fifth of a 2,000,000-sample replay.
#[derive(Default)]
pub struct UuidHasher(u64);

impl Hasher for UuidHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u128(&mut self, v: u128) {
        let folded = (v as u64) ^ ((v >> 64) as u64).rotate_left(29);
        self.0 = (self.0 ^ folded).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        // The high bits carry the multiply's mixing; hashbrown takes its buckets from the low.
        self.0 ^ (self.0 >> 32)
    }
}

/// A map keyed by sample uuid.
pub type UuidMap<V> = HashMap<u128, V, BuildHasherDefault<UuidHasher>>;

/// Failed tracked samples with one `error_type`, and the first message of that type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorTally {
    pub error_type: String,
    pub count: u64,
    pub first_message: String,
}

/// What the log gives: the rows in the run's order and the counts it can vouch for.
#[derive(Debug, Default)]
pub struct Replayed {
    pub rows: Vec<SampleRow>,
    /// Tracked counts, session marks, the last record's time and tokenizer failures; the
    /// warm-up-inclusive totals equal the tracked ones here (warm-up samples have no lines).
    pub counters: RunCounters,
    /// Failed tracked samples per `error_type`, in first-seen order.
    pub errors: Vec<ErrorTally>,
}

/// What is known of a tracked sample between its issue and its terminal line.
#[derive(Debug, Clone, Copy)]
struct Pending {
    issued_ns: u64,
    first_chunk_ns: Option<u64>,
    isl_client: Option<u32>,
    error_seen: bool,
    worker_died: bool,
}

/// The replay's state, fed one event at a time.
pub struct Replay<'a> {
    tokenizer: Option<&'a Tokenizer>,
    /// `sample_idx_map.json`: uuid → dataset row, so each row's prompt is counted once.
    dataset_index: UuidMap<u32>,
    isl_by_index: HashMap<u32, Option<u32>>,
    tracking: bool,
    pending: UuidMap<Pending>,
    /// Failed rows whose error line may still follow (the reference writes it after).
    failed_rows: UuidMap<usize>,
    /// Rows that turned out to be a dead worker's synthesized failures: counted, not rows.
    dropped: HashSet<usize>,
    out: Replayed,
}

impl<'a> Replay<'a> {
    pub fn new(tokenizer: Option<&'a Tokenizer>, dataset_index: UuidMap<u32>) -> Self {
        Replay {
            tokenizer,
            dataset_index,
            isl_by_index: HashMap::new(),
            tracking: false,
            pending: UuidMap::default(),
            failed_rows: UuidMap::default(),
            dropped: HashSet::new(),
            out: Replayed::default(),
        }
    }

    /// Applies one event of line `line`.
    pub fn apply(&mut self, event: Event<'_>, line: u64) -> Result<(), LineError> {
        match event {
            Event::Session { kind, timestamp_ns } => self.session(kind, timestamp_ns),
            Event::Issued { uuid, timestamp_ns, prompt } => {
                self.issued(uuid, timestamp_ns, prompt, line)?
            }
            Event::RecvFirst { uuid, timestamp_ns } => {
                if let Some(p) = self.pending.get_mut(&uuid) {
                    p.first_chunk_ns = Some(timestamp_ns);
                }
            }
            Event::RecvNonFirst => {}
            Event::Complete(c) => self.complete(c),
            Event::Error { uuid: Some(uuid), error_type, message, .. } => {
                self.error(uuid, &error_type, &message)
            }
            Event::Error { uuid: None, .. } => {}
            Event::Abandoned { uuid: Some(uuid), .. } => {
                if self.pending.remove(&uuid).is_some() {
                    self.out.counters.abandoned += 1;
                }
            }
            Event::Abandoned { uuid: None, .. } => {}
        }
        Ok(())
    }

    fn session(&mut self, kind: SessionKind, ts: u64) {
        let c = &mut self.out.counters;
        match kind {
            SessionKind::Started if c.session_start_ns == 0 => c.session_start_ns = ts,
            SessionKind::StartTracking => {
                if c.tracking_start_ns == 0 {
                    c.tracking_start_ns = ts;
                }
                self.tracking = true;
            }
            SessionKind::StopTracking => self.tracking = false,
            _ => {}
        }
    }

    fn issued(
        &mut self,
        uuid: u128,
        ts: u64,
        prompt: Option<&RawValue>,
        line: u64,
    ) -> Result<(), LineError> {
        // Outside tracking (the reference's warm-up) a sample gets no row, as in the run.
        if !self.tracking {
            return Ok(());
        }
        if let Some(p) = self.pending.get_mut(&uuid) {
            // A re-issue refreshes the issue time only, as the reference's table does.
            p.issued_ns = ts;
            return Ok(());
        }
        let isl_client = self.isl(uuid, prompt, line)?;
        self.out.counters.tracked_samples_issued += 1;
        let pending = Pending {
            issued_ns: ts,
            first_chunk_ns: None,
            isl_client,
            error_seen: false,
            worker_died: false,
        };
        self.pending.insert(uuid, pending);
        Ok(())
    }

    /// The client ISL of the sample's prompt, counted once per dataset row.
    fn isl(
        &mut self,
        uuid: u128,
        prompt: Option<&RawValue>,
        line: u64,
    ) -> Result<Option<u32>, LineError> {
        let index = self.dataset_index.get(&uuid).copied();
        if let Some(isl) = index.and_then(|i| self.isl_by_index.get(&i)) {
            return Ok(*isl);
        }
        let isl = match prompt {
            Some(data) => count_prompt(self.tokenizer, data, line)?,
            None => None,
        };
        if let Some(i) = index {
            self.isl_by_index.insert(i, isl);
        }
        Ok(isl)
    }

    fn error(&mut self, uuid: u128, error_type: &str, message: &str) {
        let worker_died = error_type == loadgen_worker::wire::FailureKind::WorkerDied.as_str();
        if let Some(p) = self.pending.get_mut(&uuid) {
            if !p.error_seen {
                p.error_seen = true;
                p.worker_died = worker_died;
                tally(&mut self.out.errors, error_type, message);
            }
        } else if let Some(slot) = self.failed_rows.remove(&uuid) {
            tally(&mut self.out.errors, error_type, message);
            if worker_died {
                self.dropped.insert(slot);
            }
        }
    }

    fn complete(&mut self, c: Complete<'_>) {
        let Some(p) = self.pending.remove(&c.uuid) else { return };
        let counters = &mut self.out.counters;
        counters.tracked_samples_completed += 1;
        let failed = c.output.is_none() || p.error_seen;
        if failed {
            counters.tracked_samples_failed += 1;
        }
        if p.worker_died {
            // The run synthesized this sample's lines at the end: it has no row.
            return;
        }
        counters.last_event_ns = counters.last_event_ns.max(c.timestamp_ns);
        let (osl_client, tpot_tokens_client, output_empty) = self.count_output(&c, &p, failed);
        let slot = self.out.rows.len();
        if failed && !p.error_seen {
            self.failed_rows.insert(c.uuid, slot);
        }
        self.out.rows.push(SampleRow {
            issued_ns: p.issued_ns,
            first_chunk_ns: p.first_chunk_ns,
            complete_ns: c.timestamp_ns,
            failed,
            finish: c.finish_reason.as_deref().map(FinishKind::from_reason),
            isl_client: p.isl_client,
            osl_client,
            tpot_tokens_client,
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            output_empty,
            failure: 0,
            endpoint: 0,
        });
    }

    /// OSL, TPOT tokens and emptiness, as the run's token pool counts a record's output.
    fn count_output(
        &mut self,
        c: &Complete<'_>,
        p: &Pending,
        failed: bool,
    ) -> (Option<u32>, Option<u32>, bool) {
        let Some(output) = &c.output else { return (None, None, true) };
        let empty = output.is_empty();
        let Some(tok) = self.tokenizer.filter(|_| !failed && !empty) else {
            return (None, None, empty);
        };
        let whole = output.whole();
        let osl = match tok.count(&whole) {
            Ok(n) => Some(n),
            Err(_) => {
                self.out.counters.n_tokenizer_errors += 1;
                None
            }
        };
        let tpot = match (p.first_chunk_ns, output.first_chunk_len()) {
            (Some(_), Some(from)) if from < whole.len() => {
                whole.get(from..).and_then(|rest| tok.count(rest).ok())
            }
            _ => None,
        };
        (osl, tpot, empty)
    }

    /// The rows and counters, once every line is read.
    pub fn finish(mut self) -> Replayed {
        if !self.dropped.is_empty() {
            let dropped = std::mem::take(&mut self.dropped);
            let rows = std::mem::take(&mut self.out.rows);
            self.out.rows = rows
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !dropped.contains(i))
                .map(|(_, r)| r)
                .collect();
        }
        let c = &mut self.out.counters;
        c.total_samples_issued = c.tracked_samples_issued;
        c.total_samples_completed = c.tracked_samples_completed;
        c.total_samples_failed = c.tracked_samples_failed;
        c.total_samples_abandoned = c.abandoned;
        self.out
    }
}

fn tally(errors: &mut Vec<ErrorTally>, error_type: &str, message: &str) {
    match errors.iter_mut().find(|e| e.error_type == error_type) {
        Some(e) => e.count += 1,
        None => errors.push(ErrorTally {
            error_type: error_type.to_string(),
            count: 1,
            first_message: message.to_string(),
        }),
    }
}

/// `["PromptData", text, token_ids, messages, tools, chat_template_kwargs, chat_template,
/// tool_choice]`, as `sample.issued` carries it.
type PromptData = (
    String,
    Option<String>,
    Option<Vec<u32>>,
    Option<Value>,
    Option<Value>,
    Option<Value>,
    Option<Value>,
    Option<Value>,
);

/// A prompt's client ISL by the run's own rule (`Tokenizer::count_row_with`); without a
/// tokenizer only token-id prompts have one, by length, as in the run.
fn count_prompt(
    tok: Option<&Tokenizer>,
    data: &RawValue,
    line: u64,
) -> Result<Option<u32>, LineError> {
    if data.get() == "null" {
        return Ok(None);
    }
    let parsed: PromptData = serde_json::from_str(data.get()).map_err(|e| LineError {
        line,
        what: format!("sample.issued data is not a PromptData ({e})"),
    })?;
    let (tag, prompt, token_ids, messages, tools, kwargs, template, tool_choice) = parsed;
    if tag != "PromptData" {
        return Err(LineError {
            line,
            what: format!("sample.issued data is {tag:?}, not PromptData"),
        });
    }
    let Some(tok) = tok else {
        return Ok(token_ids.map(|ids| u32::try_from(ids.len()).unwrap_or(u32::MAX)));
    };
    let request_columns =
        [("tools", tools), ("chat_template", template), ("tool_choice", tool_choice)]
            .into_iter()
            .filter_map(|(k, v)| v.filter(|v| !v.is_null()).map(|v| (k.to_string(), v)))
            .collect();
    let row = Row { prompt, system: None, messages, token_ids, n: None, request_columns };
    Ok(tok.count_row_with(&row, kwargs.as_ref()).ok())
}
