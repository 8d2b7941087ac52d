//! Replaying `events.jsonl` into the rows and counters the run's aggregator kept.
//!
//! The rules are the aggregator's (and the reference's `metrics_table.py`): a sample is
//! tracked when its `sample.issued` line falls inside performance tracking; its
//! `sample.complete` line makes its row, in log order, which is the order the run pushed its
//! rows in (so float sums come out to the bit); `data: null` or an `error` line marks it
//! failed; `error.loadgen` abandons it. Client token counts come from the same tokenizer and
//! the same counting calls as the run's.

mod count;
pub mod read;
pub mod stamps;
mod tool_calls;

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

use loadgen_coordinator::metrics::{FinishKind, RunCounters, SampleRow};
use serde_json::value::RawValue;
use serde_json::Value;

use self::count::{CountPool, TokenBatch, TokenCount, TokenJob};
use self::read::{Complete, Event, LineError, ModelOutput, SessionKind};
use crate::agentic::{ConversationIds, TurnLabel, Unrecorded};
use crate::MixedClocks;
use loadgen_plan::dataset::{Row, PROMPT_BYTES_MAX};
use loadgen_plan::tokenizer::Tokenizer;

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
    /// The streamed samples' gaps between chunks, in row order (the table's `chunk_delta_ns`).
    pub chunk_delta_ns: Vec<u64>,
    /// `sample.complete` lines of tracked samples that named their endpoint.
    pub endpoint_lines: u64,
    /// `sample.issued` lines outside performance tracking (the reference's warm-up, the
    /// accuracy phases): samples the run's totals count and the tracked rows do not.
    pub untracked_issued_lines: u64,
    /// Successful rows with a first chunk, and those of them whose first chunk is stamped after
    /// their completion: a log written with two clocks (`MixedClocks`).
    pub first_chunk_rows: u64,
    pub first_chunk_after_complete: u64,
    /// An agentic run's rows' conversations and turns (their lines' `conversation_id` and
    /// `turn`), one per row; empty when no tracked line named a conversation.
    pub turn_labels: Vec<Option<TurnLabel>>,
    /// An agentic run's tracked turns without a row: abandoned, or lost with their worker.
    pub unrecorded_turns: Vec<(TurnLabel, Unrecorded)>,
}

impl Replayed {
    /// The log's mixed clocks, when it has any.
    pub fn mixed_clocks(&self) -> Option<MixedClocks> {
        (self.first_chunk_after_complete > 0).then_some(MixedClocks {
            samples: self.first_chunk_after_complete,
            streamed: self.first_chunk_rows,
        })
    }
}

/// What is known of a tracked sample between its issue and its terminal line.
#[derive(Debug, Clone, Copy)]
struct Pending {
    issued_ns: u64,
    first_chunk_ns: Option<u64>,
    isl_client: Option<u32>,
    error_seen: bool,
    worker_died: bool,
    label: Option<TurnLabel>,
}

/// The replay's state, fed one event at a time.
pub struct Replay<'a> {
    tokenizer: Option<&'a Tokenizer>,
    /// Outputs gathered for the counting threads (`count.rs`), handed over when full.
    batch: TokenBatch,
    /// One counting thread per core, counting while the log is read; `None` without a
    /// tokenizer.
    pool: Option<CountPool>,
    /// `sample_idx_map.json`: uuid → dataset row, so each row's prompt is counted once.
    dataset_index: UuidMap<u32>,
    isl_by_index: HashMap<u32, Option<u32>>,
    tracking: bool,
    pending: UuidMap<Pending>,
    /// Failed rows whose error line may still follow (the reference writes it after).
    failed_rows: UuidMap<usize>,
    /// Rows that turned out to be a dead worker's synthesized failures: counted, not rows.
    dropped: HashSet<usize>,
    /// An agentic run's conversation ids, as the labels' indices.
    conversation_ids: ConversationIds,
    out: Replayed,
}

impl<'a> Replay<'a> {
    /// A replay whose outputs are counted on one thread per core.
    pub fn new(tokenizer: Option<&'a Tokenizer>, dataset_index: UuidMap<u32>) -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::with_threads(tokenizer, dataset_index, threads)
    }

    /// A replay whose outputs are counted on `threads` threads (the rows are the same for
    /// any count).
    fn with_threads(
        tokenizer: Option<&'a Tokenizer>,
        dataset_index: UuidMap<u32>,
        threads: usize,
    ) -> Self {
        Replay {
            tokenizer,
            batch: TokenBatch::default(),
            pool: tokenizer.map(|t| CountPool::start(t, threads)),
            dataset_index,
            isl_by_index: HashMap::new(),
            tracking: false,
            pending: UuidMap::default(),
            failed_rows: UuidMap::default(),
            dropped: HashSet::new(),
            conversation_ids: ConversationIds::default(),
            out: Replayed::default(),
        }
    }

    /// Applies one event of line `line`.
    pub fn apply(&mut self, event: Event<'_>, line: u64) -> Result<(), LineError> {
        match event {
            Event::Session { kind, timestamp_ns } => self.session(kind, timestamp_ns),
            Event::Issued { uuid, timestamp_ns, prompt, label } => {
                let label = label.map(|(id, turn)| TurnLabel {
                    conversation: self.conversation_ids.intern(&id),
                    turn,
                });
                self.issued(uuid, timestamp_ns, prompt, label, line)?
            }
            Event::RecvFirst { uuid, timestamp_ns } => {
                if let Some(p) = self.pending.get_mut(&uuid) {
                    p.first_chunk_ns = Some(timestamp_ns);
                }
            }
            Event::RecvNonFirst { .. } => {}
            Event::Complete(c) => self.complete(c),
            Event::Error { uuid: Some(uuid), timestamp_ns, error_type, message } => {
                self.error(uuid, timestamp_ns, &error_type, &message)
            }
            Event::Error { uuid: None, .. } => {}
            Event::Abandoned { uuid: Some(uuid), .. } => {
                if let Some(p) = self.pending.remove(&uuid) {
                    self.out.counters.abandoned += 1;
                    self.unrecorded(p.label, Unrecorded::Abandoned);
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
            SessionKind::Ended => c.session_end_ns = c.session_end_ns.max(ts),
            _ => {}
        }
    }

    fn issued(
        &mut self,
        uuid: u128,
        ts: u64,
        prompt: Option<&RawValue>,
        label: Option<TurnLabel>,
        line: u64,
    ) -> Result<(), LineError> {
        // Outside tracking (the reference's warm-up, the accuracy phases) a sample gets no
        // row, as in the run.
        if !self.tracking {
            self.out.untracked_issued_lines += 1;
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
            label,
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

    fn error(&mut self, uuid: u128, ts: u64, error_type: &str, message: &str) {
        let worker_died = error_type == loadgen_wire::FailureKind::WorkerDied.as_str();
        if let Some(p) = self.pending.get_mut(&uuid) {
            if !p.error_seen {
                p.error_seen = true;
                p.worker_died = worker_died;
                tally(&mut self.out.errors, error_type, message);
            }
        } else if let Some(slot) = self.failed_rows.remove(&uuid) {
            // The reference writes a failure's error line after its completion, stamped later:
            // the last event of the sample.
            let c = &mut self.out.counters;
            c.last_event_ns = c.last_event_ns.max(ts);
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
            self.unrecorded(p.label, Unrecorded::WorkerDied);
            return;
        }
        // The last event of a sample: its completion, or a first chunk the reference's other
        // clock stamped after it.
        let last_ns = c.timestamp_ns.max(p.first_chunk_ns.unwrap_or(0));
        counters.last_event_ns = counters.last_event_ns.max(last_ns);
        let slot = self.out.rows.len();
        let first_after_complete = p.first_chunk_ns.is_some_and(|f| f > c.timestamp_ns);
        if !failed && p.first_chunk_ns.is_some() {
            self.out.first_chunk_rows += 1;
            self.out.first_chunk_after_complete += u64::from(first_after_complete);
        }
        self.out.endpoint_lines += u64::from(c.endpoint.is_some());
        let output_empty = c.output.as_ref().is_none_or(ModelOutput::is_empty);
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
            osl_client: None,
            tpot_tokens_client: None,
            prompt_tokens: c.prompt_tokens,
            completion_tokens: c.completion_tokens,
            output_empty,
            failure: 0,
            endpoint: c.endpoint.unwrap_or(0),
            n_chunks: c.chunks.as_ref().map(|ch| ch.n_chunks),
            chunk_reads: c.chunks.as_ref().map(|ch| ch.chunk_reads),
            client_wait_ns: c.client_wait_ns,
        });
        self.label_row(slot, p.label);
        if let Some(chunks) = &c.chunks {
            self.out.chunk_delta_ns.extend_from_slice(&chunks.gaps_ns);
        }
        // Queued after its row exists: a full batch is counted at once, into the rows.
        self.queue_output(&c, &p, failed, slot);
    }

    /// Lists a tracked turn without a row.
    fn unrecorded(&mut self, label: Option<TurnLabel>, how: Unrecorded) {
        if let Some(label) = label {
            self.out.unrecorded_turns.push((label, how));
        }
    }

    /// Row `slot`'s label, once some row has one (the list stays empty in a run without
    /// conversations).
    fn label_row(&mut self, slot: usize, label: Option<TurnLabel>) {
        let labels = &mut self.out.turn_labels;
        if label.is_some() || !labels.is_empty() {
            labels.resize(slot, None);
            labels.push(label);
        }
    }

    /// Queues a successful output for counting, as the run's token pool gets a record's
    /// output (the whole text, and where the text after the first chunk starts).
    fn queue_output(&mut self, c: &Complete<'_>, p: &Pending, failed: bool, slot: usize) {
        let Some(output) = &c.output else { return };
        if failed || output.is_empty() || self.tokenizer.is_none() {
            return;
        }
        let start = self.batch.text.len();
        output.push_text(&mut self.batch.text);
        let len = self.batch.text.len() - start;
        // No TPOT for a sample whose first chunk is stamped after its completion (MixedClocks).
        let tpot_from = match (p.first_chunk_ns, output.first_chunk_len()) {
            (Some(first), Some(from)) if from < len && first <= c.timestamp_ns => Some(from),
            _ => None,
        };
        self.batch.jobs.push(TokenJob { slot, start, end: self.batch.text.len(), tpot_from });
        if self.batch.is_full() {
            self.send_batch();
        }
    }

    /// Hands the gathered outputs to the counting threads and writes the counts ready so far.
    fn send_batch(&mut self) {
        let Some(pool) = &mut self.pool else { return };
        if !self.batch.jobs.is_empty() {
            pool.send(std::mem::take(&mut self.batch));
        }
        let ready = pool.ready();
        self.write_counts(ready);
    }

    /// Writes counts into their rows, in whatever order they come: each row takes its own.
    fn write_counts(&mut self, counts: Vec<Vec<TokenCount>>) {
        for r in counts.into_iter().flatten() {
            let row = &mut self.out.rows[r.slot];
            match r.osl {
                Some(n) => row.osl_client = Some(n),
                None => self.out.counters.n_tokenizer_errors += 1,
            }
            row.tpot_tokens_client = r.tpot_tokens;
        }
    }

    /// The labels of the dropped rows become unrecorded turns (their worker died).
    fn drop_labels(&mut self, dropped: &HashSet<usize>) {
        if self.out.turn_labels.is_empty() {
            return;
        }
        let labels = std::mem::take(&mut self.out.turn_labels);
        for (i, label) in labels.into_iter().enumerate() {
            if dropped.contains(&i) {
                self.unrecorded(label, Unrecorded::WorkerDied);
            } else {
                self.out.turn_labels.push(label);
            }
        }
    }

    /// The rows and counters, once every line is read.
    pub fn finish(mut self) -> Replayed {
        self.send_batch();
        if let Some(pool) = self.pool.take() {
            let counts = pool.finish();
            self.write_counts(counts);
        }
        if !self.out.turn_labels.is_empty() {
            self.out.turn_labels.resize(self.out.rows.len(), None);
        }
        if !self.dropped.is_empty() {
            let dropped = std::mem::take(&mut self.dropped);
            let rows = std::mem::take(&mut self.out.rows);
            self.out.rows = rows
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !dropped.contains(i))
                .map(|(_, r)| r)
                .collect();
            self.drop_labels(&dropped);
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
    let text_bytes = prompt.as_ref().map_or(0, String::len)
        + messages.as_ref().map_or(0, loadgen_plan::dataset::string_bytes);
    if text_bytes > PROMPT_BYTES_MAX {
        // The run refused such a row when it loaded its dataset; counting it here would cost
        // the tokenizer a few hundred bytes of memory per byte.
        return Err(LineError {
            line,
            what: format!(
                "the sample's prompt is {text_bytes} bytes, more than a run sends \
                 ({PROMPT_BYTES_MAX} bytes a row, dataset::PROMPT_BYTES_MAX), so the line is \
                 not a run's"
            ),
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
    if prompt.is_none() && token_ids.is_none() && messages.is_none() {
        // An empty PromptData (a multimodal prompt): no ISL, as in the run and the reference.
        return Ok(None);
    }
    let row = Row { prompt, messages, token_ids, request_columns, ..Row::default() };
    Ok(tok.count_row_with(&row, kwargs.as_ref()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::count::TOKEN_BATCH_JOBS;
    use crate::replay::read::{for_each_event, ReadError};

    fn char_tokenizer() -> Tokenizer {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/assets/tokenizers/char");
        Tokenizer::load(&dir.display().to_string()).expect("the char tokenizer loads")
    }

    /// A streamed log of `n` samples, each answered `["ab","cde"]`; sample 3 fails with its
    /// error after its complete line, as the reference writes it.
    fn log(n: u64) -> String {
        let mut text = String::new();
        let line = |t: &str, ts: u64, id: u64, rest: &str| {
            format!(
                "{{\"event_type\":\"{t}\",\"timestamp_ns\":{ts},\"sample_uuid\":\"{id:032x}\",\"conversation_id\":\"\",\"turn\":null{rest}}}\n"
            )
        };
        text.push_str("{\"event_type\":\"session.start_performance_tracking\",\"timestamp_ns\":1,\"sample_uuid\":\"\",\"conversation_id\":\"\",\"turn\":null,\"data\":null}\n");
        for id in 0..n {
            let t0 = 10 + id * 100;
            text += &line(
                "sample.issued",
                t0,
                id,
                ",\"data\":[\"PromptData\",\"hello\",null,null,null,null,null,null]",
            );
            text += &line("sample.recv_first", t0 + 5, id, ",\"data\":null");
            if id == 3 {
                text += &line("sample.complete", t0 + 9, id, ",\"data\":null,\"worker_id\":0");
                text += &line(
                    "error.generic",
                    t0 + 9,
                    id,
                    ",\"data\":[\"ErrorData\",\"error\",\"HTTP 500\"]",
                );
            } else {
                let out = ",\"data\":[\"TextModelOutput\",[\"ab\",\"cde\"],null,null],\"finish_reason\":\"stop\",\"worker_id\":0";
                text += &line("sample.complete", t0 + 9, id, out);
            }
        }
        text
    }

    fn replay(text: &str, tok: Option<&Tokenizer>) -> Result<Replayed, ReadError> {
        let mut r = Replay::new(tok, UuidMap::default());
        for_each_event(text.as_bytes(), |e, line| r.apply(e, line))?;
        Ok(r.finish())
    }

    #[test]
    fn every_output_is_counted_across_many_token_batches() {
        let tok = char_tokenizer();
        let n = TOKEN_BATCH_JOBS as u64 * 2 + 7;
        let out = replay(&log(n), Some(&tok)).unwrap();
        assert_eq!(out.rows.len() as u64, n);
        assert_eq!(out.counters.tracked_samples_failed, 1);
        assert_eq!(out.errors.len(), 1, "the error after its complete line is tallied");
        for (i, row) in out.rows.iter().enumerate() {
            assert_eq!(row.isl_client, Some(5), "row {i}: \"hello\"");
            if i == 3 {
                assert!(row.failed && row.osl_client.is_none(), "row 3 failed");
            } else {
                assert_eq!((row.osl_client, row.tpot_tokens_client), (Some(5), Some(3)), "row {i}");
            }
        }
    }

    fn replay_on(text: &str, tok: &Tokenizer, threads: usize) -> Replayed {
        let mut r = Replay::with_threads(Some(tok), UuidMap::default(), threads);
        for_each_event(text.as_bytes(), |e, line| r.apply(e, line)).unwrap();
        r.finish()
    }

    /// Counting on many threads gives the rows, counters and snapshot of counting on one:
    /// the counts land in their own rows, so every sum runs over the same rows in the same order.
    #[test]
    fn counting_on_many_threads_equals_counting_on_one_to_the_bit() {
        use loadgen_coordinator::metrics::{
            final_snapshot, MetricsOptions, RunState, SampleTable, TokenCountSource,
        };
        let tok = char_tokenizer();
        // Outputs of varied lengths, so threads finish their batches out of order.
        let mut text = log(TOKEN_BATCH_JOBS as u64 * 5 + 13);
        for id in (0..TOKEN_BATCH_JOBS as u64 * 5).step_by(7) {
            let from = format!("{id:032x}\",\"conversation_id\":\"\",\"turn\":null,\"data\":[\"TextModelOutput\",[\"ab\"");
            let to = from.replace("\"ab\"", &format!("\"{}\"", "x".repeat((id % 97) as usize)));
            text = text.replacen(&from, &to, 1);
        }
        let snapshot = |r: &Replayed| {
            let mut table = SampleTable::with_capacity(r.rows.len());
            r.rows.iter().for_each(|row| table.push(row));
            let opts = MetricsOptions {
                streaming: true,
                early_stopping: false,
                primary: TokenCountSource::Client,
                legacy_loadgen_qps: false,
                has_tokenizer: true,
            };
            // Debug prints every float to the bit (the shortest text that reads back the same).
            format!("{:?}", final_snapshot(&table, &r.counters, &opts, RunState::Complete))
        };
        let one = replay_on(&text, &tok, 1);
        assert!(one.rows.iter().any(|r| r.osl_client.is_some_and(|n| n > 40)), "varied lengths");
        for threads in [2, 3, 8] {
            let many = replay_on(&text, &tok, threads);
            assert_eq!(many.rows, one.rows, "{threads} threads");
            assert_eq!(many.counters, one.counters, "{threads} threads");
            assert_eq!(snapshot(&many), snapshot(&one), "{threads} threads");
        }
    }

    #[test]
    fn a_first_chunk_stamped_after_its_completion_gets_no_tpot_and_is_counted() {
        let tok = char_tokenizer();
        // Sample 1: issued at 110, completed at 119, its first chunk stamped at 200.
        let text = log(4).replace("\"timestamp_ns\":115,", "\"timestamp_ns\":200,");
        let out = replay(&text, Some(&tok)).unwrap();
        assert_eq!(out.rows[1].tpot_tokens_client, None, "no TPOT from two clocks");
        assert_eq!(out.rows[1].first_chunk_ns, Some(200), "its TTFT stands");
        assert_eq!(out.rows[0].tpot_tokens_client, Some(3));
        assert_eq!(out.mixed_clocks(), Some(MixedClocks { samples: 1, streamed: 3 }));
        assert_eq!(replay(&log(4), Some(&tok)).unwrap().mixed_clocks(), None);
        // The last sample event: a first chunk stamped after every completion.
        let last = log(1).replace("\"timestamp_ns\":15,", "\"timestamp_ns\":30,");
        assert_eq!(replay(&last, Some(&tok)).unwrap().counters.last_event_ns, 30);
    }

    #[test]
    fn without_a_tokenizer_the_client_counts_are_absent() {
        let out = replay(&log(4), None).unwrap();
        assert!(out.rows.iter().all(|r| r.isl_client.is_none() && r.osl_client.is_none()));
        assert!(!out.rows[0].output_empty && out.rows[3].output_empty);
    }
}
