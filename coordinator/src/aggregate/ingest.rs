//! The aggregator's ingest: one worker event at a time into the tally, the sample table, the event
//! log and the client tokenizer pool.

use std::borrow::Cow;
use std::sync::atomic::Ordering;

use loadgen_wire::{ChunkTiming, FailureKind, FinishReason, RecordHeader, RecordView, WorkerEvent};

use super::events::{ChunkLine, CompleteEvent};
use super::tokens::{RowKey, TokenResult};
use super::{CancelledSample, Control, FailureSummary, State};
use crate::live::Completion;
use crate::metrics::spool::{ClientTokens, SpooledRow};
use crate::metrics::usage::{classify_usage, UsageClass};
use crate::metrics::{FinishKind, SampleRow};
use crate::settle::{AbandonCause, WorkerFate};
use crate::shared::WorkerState;

/// Longest message kept per failure kind.
const FAILURE_MESSAGE_CHARS: usize = 500;

impl State {
    pub(super) fn on_event(&mut self, w: usize, ev: WorkerEvent<'_>) {
        match ev {
            WorkerEvent::Ready { .. } => {
                self.ready[w] = true;
                self.input_shared.set_state(w, WorkerState::Ready);
            }
            WorkerEvent::SetupFailed { message } => {
                if self.setup_failure.is_none() {
                    self.setup_failure = Some((w as u16, message.to_string()));
                }
            }
            WorkerEvent::Warning { message } => {
                let line = format!("worker {w}: {message}");
                eprintln!("warning: {line}");
                self.warnings.push(line);
            }
            WorkerEvent::Done => {
                self.done[w] = true;
                self.input_shared.set_state(w, WorkerState::Done);
                if self.fates[w].is_none() {
                    self.fates[w] = Some(WorkerFate::Done);
                    self.sent_at_end[w] = self.sent_now(w);
                }
            }
            WorkerEvent::Issued { sample_id, row, issued_ns } => {
                self.log_issue(sample_id, row, issued_ns);
            }
            WorkerEvent::FirstChunk { sample_id, first_chunk_ns } => {
                if self.is_logged(sample_id, first_chunk_ns) && self.first_logged.insert(sample_id)
                {
                    self.events.recv_first(sample_id, first_chunk_ns);
                }
            }
            WorkerEvent::Record(rec) => self.on_record(w, &rec),
        }
    }

    /// Logs `sample.issued` for the scheduler's open-loop issues that arrived.
    pub(super) fn take_issue_notices(&mut self) {
        while let Ok(batch) = self.issue_notices.try_recv() {
            for n in batch {
                self.log_issue(n.sample_id, n.row, n.issued_ns);
            }
        }
    }

    /// `sample.issued` of a sample the log shows, once, whether a notice or its record told it.
    fn log_issue(&mut self, sample_id: u64, row: u32, issued_ns: u64) {
        if self.is_logged(sample_id, issued_ns) && self.issued_logged.insert(sample_id) {
            self.events.issued(sample_id, issued_ns, row);
        }
    }

    /// A sample whose lines the log shows: the performance phase's and the accuracy phases' (not
    /// warm-up's). Reads the tracking start first when the main thread sent it just before
    /// issuing the sample, so it precedes the sample's lines; the first accuracy sample seen
    /// (at `at_ns`, its issue or first chunk) ends performance tracking in the log, as the
    /// reference logs it between its phases.
    fn is_logged(&mut self, sample_id: u64, at_ns: u64) -> bool {
        let logged = sample_id >= self.warmup_samples;
        if logged && !self.tracking {
            self.await_tracking();
        }
        if sample_id >= self.tracked_end && !self.tracking_stopped {
            self.tracking_stopped = true;
            self.events.session("session.stop_performance_tracking", at_ns);
        }
        logged
    }

    /// Whether the record is tracked, and whether it is a performance sample outside an
    /// agentic run's tracking window (`late`). Its conversation's finish, if it is its last
    /// turn, is counted first: that finish may close the window.
    fn scope_of(&mut self, h: &RecordHeader, finished: bool) -> (bool, bool) {
        let performance = h.sample_id >= self.warmup_samples && h.sample_id < self.tracked_end;
        if finished && performance {
            self.note_conversation_finish();
        }
        let late = performance && !self.window.admits(Some(h.issued_ns));
        if late {
            self.late.insert(h.sample_id);
        }
        (performance && !late, late)
    }

    /// A cancelled record. Only the coordinator's Abort cancels (cap, interrupt, drain
    /// timeout): the sample was abandoned, never completed, as the reference. A closed-loop
    /// sample still queued then was never issued at all (the worker stamps the issue) and has
    /// no events. The terminal event of the others (`performance`: tracked, or outside the
    /// window) waits for the abort's cause.
    fn on_cancelled(&mut self, h: &RecordHeader, performance: bool, accuracy: bool) {
        if accuracy && h.issued_ns != 0 {
            // An accuracy sample abandoned at its drain timeout was issued and never
            // completed: the reference's log has its issued line and nothing after it.
            self.log_issue(h.sample_id, h.row, h.issued_ns);
        }
        if performance && h.issued_ns != 0 {
            self.cancelled.push(CancelledSample {
                sample_id: h.sample_id,
                row: h.row,
                issued_ns: h.issued_ns,
                cancelled_ns: h.complete_ns,
            });
        }
    }

    /// An agentic conversation finished (its last turn's record was read): the finish that
    /// finds no conversation left to start closes the tracking window, stamped now, and logs
    /// its end as the reference does (`session.stop_performance_tracking`).
    fn note_conversation_finish(&mut self) {
        if let Some(closed_ns) = self.window.note_finish(loadgen_wire::monotonic_ns()) {
            if !self.tracking {
                self.await_tracking();
            }
            if self.tracking && !self.tracking_stopped {
                self.tracking_stopped = true;
                self.events.session("session.stop_performance_tracking", closed_ns);
            }
        }
    }

    /// The samples worker `w`'s in-flight table holds now.
    pub(super) fn sent_now(&self, w: usize) -> Vec<u64> {
        self.in_flight.get(w).and_then(Option::as_ref).map(|t| t.sent()).unwrap_or_default()
    }

    fn on_record(&mut self, w: usize, rec: &RecordView<'_>) {
        let h = &rec.header;
        // Before the totals a drain's waiter reads: a phase's count is never behind them.
        self.input_shared.phases.note(h.sample_id);
        let finished = self.input_shared.note_received(w, h.row);
        self.input_shared.records_total.fetch_add(1, Ordering::Release);
        let failure = FailureKind::from_u8(h.failure).unwrap_or(FailureKind::Malformed);
        let (tracked, late) = self.scope_of(h, finished);
        // Accuracy-phase samples (ids past the tracked range) are logged, never measured.
        let accuracy = h.sample_id >= self.tracked_end;
        self.answered.insert(h.sample_id);
        self.tally.record(tracked, failure, h.issued_ns != 0);
        self.counters.requests_resent += u64::from(h.resent);
        if failure == FailureKind::Cancelled {
            self.on_cancelled(h, tracked || late, accuracy);
            return;
        }
        // Pair assertion with the worker: its clocks are ordered.
        debug_assert!(h.complete_ns >= h.issued_ns);
        let failed = failure != FailureKind::None;
        // Running counts (the live view keeps its own); `close` sets the final ones from `settle`.
        self.counters.total_samples_completed += 1;
        self.counters.last_event_ns = self.counters.last_event_ns.max(h.complete_ns);
        if failed {
            self.counters.total_samples_failed += 1;
        }
        if late {
            // A turn issued after the tracking window closed: logged in full, never measured.
            self.untracked_sample_rows.push((h.sample_id, h.row, h.issued_ns));
            self.log_record(rec, failed, &output_text(rec.output), None);
            return;
        }
        if !tracked {
            if accuracy {
                self.live.note_accuracy_done();
            } else {
                self.live.note_warmup_done();
            }
            if accuracy && self.is_logged(h.sample_id, h.issued_ns) {
                // Accuracy samples are scored from their lines; their chunk gaps are no part of
                // the performance series.
                self.log_record(rec, failed, &output_text(rec.output), None);
            }
            return;
        }
        // Failure kinds count tracked samples, as `n_samples_failed` does: their counts add up
        // to it.
        if failed {
            self.note_failure(failure, rec.error);
        }
        self.live.record(&live_completion(rec, failure));
        if !self.tracking {
            // The main thread sent `Tracking` before it issued this sample: read it now, so the
            // tracking event precedes the sample's lines.
            self.await_tracking();
        }
        let output = output_text(rec.output);
        let chunks = ChunkTiming::decode(rec.chunk_timing);
        self.take_gaps(chunks.as_ref());
        self.log_record(rec, failed, &output, chunks.map(|t| (t.n_chunks, t.chunk_reads)));
        self.push_row(rec, failed, output, chunks);
    }

    /// The record's gaps between chunks: in `gaps_ns` for its log line, and in the run's column.
    fn take_gaps(&mut self, chunks: Option<&ChunkTiming<'_>>) {
        self.gaps_ns.clear();
        if let Some(timing) = chunks {
            self.gaps_ns.extend(timing.gaps_ns());
        }
        for &gap in &self.gaps_ns {
            self.chunk_delta_ns.push_spilling(gap);
        }
    }

    /// The record's lines in events.jsonl: issued, first chunk, error, complete (with the
    /// chunk count, reads and gaps of a streamed response: the gaps are `gaps_ns`).
    fn log_record(
        &mut self,
        rec: &RecordView<'_>,
        failed: bool,
        output: &str,
        chunks: Option<(u32, u32)>,
    ) {
        let h = &rec.header;
        let id = h.sample_id;
        // Lines the worker's notices did not already give (the null endpoint sends none; a
        // response that ended in the read of its first chunk has no separate notice).
        if self.issued_logged.insert(id) {
            self.events.issued(id, h.issued_ns, h.row);
        }
        if h.first_chunk_ns != 0 && self.first_logged.insert(id) {
            self.events.recv_first(id, h.first_chunk_ns);
        }
        if failed {
            let kind = FailureKind::from_u8(h.failure).unwrap_or(FailureKind::Malformed);
            let agentic = self.input_shared.conversations.is_some();
            let message = String::from_utf8_lossy(rec.error);
            let topic = "error.generic";
            self.events.error_data(topic, id, h.complete_ns, error_type(kind, agentic), &message);
        }
        let finish = FinishReason::from_u8(h.finish).and_then(FinishKind::from_wire);
        self.events.complete(&CompleteEvent {
            sample_id: id,
            timestamp_ns: h.complete_ns,
            output: (!failed).then_some(output),
            streamed: self.streaming,
            first_chunk_len: Some(h.first_chunk_len as usize),
            reasoning_len: h.reasoning_len as usize,
            tool_calls_len: h.tool_calls_len as usize,
            finish_reason: finish.map(|f| f.as_str()),
            worker_id: h.worker_id,
            prompt_tokens: h.prompt_tokens,
            completion_tokens: h.completion_tokens,
            chunks: chunks.map(|(n_chunks, chunk_reads)| ChunkLine {
                n_chunks,
                chunk_reads,
                gaps_ns: &self.gaps_ns,
            }),
            endpoint: h.endpoint,
            client_wait_ns: h.client_wait_ns(),
        });
    }

    /// The record's row in the sample table, and its client token count job.
    fn push_row(
        &mut self,
        rec: &RecordView<'_>,
        failed: bool,
        output: Cow<'_, str>,
        chunks: Option<ChunkTiming<'_>>,
    ) {
        let h = &rec.header;
        let first_chunk_ns = (h.first_chunk_ns != 0).then_some(h.first_chunk_ns);
        let first_chunk_len = h.first_chunk_len as usize;
        let row = SampleRow {
            issued_ns: h.issued_ns,
            first_chunk_ns,
            complete_ns: h.complete_ns,
            failed,
            finish: FinishReason::from_u8(h.finish).and_then(FinishKind::from_wire),
            isl_client: self.isl_client.get(h.row as usize).copied().flatten(),
            osl_client: None,
            tpot_tokens_client: None,
            prompt_tokens: h.prompt_tokens,
            completion_tokens: h.completion_tokens,
            output_empty: output.is_empty(),
            failure: h.failure,
            endpoint: h.endpoint,
            n_chunks: chunks.map(|t| t.n_chunks),
            chunk_reads: chunks.map(|t| t.chunk_reads),
            client_wait_ns: h.client_wait_ns(),
        };
        let index = self.rows.push(SpooledRow { row, sample_id: h.sample_id, dataset_row: h.row });
        if let Some(pool) = &mut self.tokens {
            if !failed && !output.is_empty() {
                let tpot_from = (first_chunk_ns.is_some() && first_chunk_len < output.len())
                    .then_some(first_chunk_len);
                let key = RowKey { index, complete_ns: h.complete_ns, first_chunk_ns };
                pool.submit(key, &output, tpot_from);
            }
        }
    }

    pub(super) fn start_tracking(&mut self, tracking_start_ns: u64) {
        if !self.tracking {
            self.tracking = true;
            self.live.start_tracking(tracking_start_ns);
            self.counters.tracking_start_ns = tracking_start_ns;
            if crate::phase::has_performance_phase(self.tracked_end - self.warmup_samples) {
                self.events.session("session.start_performance_tracking", tracking_start_ns);
            } else {
                // An accuracy-only run has no performance phase: the reference logs neither
                // tracking event (only a performance phase publishes them).
                self.tracking_stopped = true;
            }
        }
    }

    fn await_tracking(&mut self) {
        while !self.tracking {
            match self.control.recv() {
                Ok(Control::Tracking { tracking_start_ns }) => {
                    self.start_tracking(tracking_start_ns)
                }
                Ok(Control::Start { .. }) => {}
                Ok(other) => {
                    self.early_control = Some(other);
                    return;
                }
                Err(_) => return,
            }
        }
    }

    pub(super) fn note_failure(&mut self, kind: FailureKind, message: &[u8]) {
        let name = kind.as_str();
        match self.failures.iter_mut().find(|f| f.kind == name) {
            Some(f) => f.count += 1,
            None => self.failures.push(FailureSummary {
                kind: name,
                count: 1,
                first_message: String::from_utf8_lossy(message)
                    .chars()
                    .take(FAILURE_MESSAGE_CHARS)
                    .collect(),
            }),
        }
    }

    /// A counted output's figures: on its row (in place, or as a patch once the row is in a
    /// file) and in the live view.
    fn apply_token_result(&mut self, r: TokenResult) {
        let key = r.row;
        let tokens = ClientTokens { osl: r.osl.as_ref().ok().copied(), tpot_tokens: r.tpot_tokens };
        if !self.rows.set_client_tokens(key.index, key.complete_ns, tokens) {
            return;
        }
        let span = key.first_chunk_ns.map(|first| key.complete_ns.saturating_sub(first));
        match r.osl {
            Ok(osl) => self.live.record_client_tokens(osl, span.zip(r.tpot_tokens)),
            Err(_) => self.counters.n_tokenizer_errors += 1,
        }
    }

    /// Applies the counts the live threads finished, and hands them a stale partial batch.
    pub(super) fn collect_tokens(&mut self) {
        let Some(pool) = &mut self.tokens else { return };
        pool.flush_if_stale();
        let results: Vec<TokenResult> = pool.try_results().collect();
        for r in results {
            self.apply_token_result(r);
        }
    }

    /// Counts what is still pending on the drain pool, within the plan's drain timeout; what
    /// is left shows as `client_token_tasks_pending`.
    pub(super) fn finish_tokens(&mut self) {
        let Some(mut pool) = self.tokens.take() else { return };
        let interrupted = self.abort_cause == Some(AbandonCause::Interrupt);
        let limit = pool.drain_limit(interrupted);
        let pending = pool.finish(limit, |r| self.apply_token_result(r));
        self.counters.client_token_tasks_pending = pending;
    }
}

/// A tracked record as the live view counts it: the server basis's tokens only when the usage
/// rule calls its usage usable.
fn live_completion(rec: &RecordView<'_>, failure: FailureKind) -> Completion {
    let h = &rec.header;
    let usable = classify_usage(h.prompt_tokens, h.completion_tokens, rec.output.is_empty())
        == UsageClass::Usable;
    Completion {
        issued_ns: h.issued_ns,
        first_chunk_ns: h.first_chunk_ns,
        complete_ns: h.complete_ns,
        failure,
        completion_tokens: h.completion_tokens.filter(|_| usable),
    }
}

/// Endpoints send UTF-8; the strict check is SIMD-fast, the lossy path only for bad bytes.
fn output_text(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// The `ErrorData` type of a failed sample's `error.generic` line: the reference's agentic
/// strategy names a turn past its timeout `TurnTimeout` and the turns it then skips
/// `TurnAbortedByPriorFailure`; every other failure is `error`.
pub(crate) fn error_type(kind: FailureKind, agentic: bool) -> &'static str {
    match (kind, agentic) {
        (FailureKind::TurnAborted, _) => "TurnAbortedByPriorFailure",
        (FailureKind::Timeout, true) => "TurnTimeout",
        _ => "error",
    }
}
