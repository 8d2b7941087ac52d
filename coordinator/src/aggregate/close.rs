//! The aggregator's end of a run: how each worker ended (done, died, killed after the abort
//! grace), the final counts from `settle::settle`, and a terminal event for every issued sample
//! that got none from its record.

use std::sync::atomic::Ordering;

use loadgen_wire::{FailureKind, RecordConsumer};

use super::{AggregatorOutput, State};
use crate::fork::{kill_and_reap, try_reap, ChildEnd};
use crate::settle::{
    settle, AbandonCause, SettleInput, Settlement, Synthesized, SynthesizedOutcome, WorkerEnd,
    WorkerFate,
};
use crate::shared::WorkerState;

impl State {
    /// Reaps workers that ended; a worker that ended without saying Done died.
    pub(super) fn check_health(&mut self, consumers: &mut [RecordConsumer], started: bool) {
        for (w, consumer) in consumers.iter_mut().enumerate() {
            if self.fates[w].is_some() {
                continue;
            }
            let Some(end) = try_reap(self.pids[w]) else { continue };
            self.reaped[w] = true;
            // Records the worker pushed before it ended are still in its ring.
            while consumer.pop(|ev| self.on_event(w, ev)).is_some() {}
            if self.fates[w].is_none() {
                self.worker_died(w, &end);
                if !started && self.setup_failure.is_none() {
                    self.setup_failure =
                        Some((w as u16, format!("worker {w} {end} while starting")));
                }
            }
            self.done[w] = true;
        }
    }

    /// At the finish deadline: kills (SIGKILL, which also ends a stopped process) every worker
    /// still running, and reads what it left.
    pub(super) fn kill_remaining(&mut self, consumers: &mut [RecordConsumer]) {
        for (w, consumer) in consumers.iter_mut().enumerate() {
            if self.fates[w].is_some() {
                continue;
            }
            kill_and_reap(self.pids[w]);
            self.reaped[w] = true;
            while consumer.pop(|ev| self.on_event(w, ev)).is_some() {}
            if self.fates[w].is_none() {
                self.fates[w] = Some(WorkerFate::KilledAfterAbort);
                self.sent_at_end[w] = self.sent_now(w);
                self.input_shared.set_state(w, WorkerState::Dead);
                let line = format!("worker {w} did not stop within the abort grace and was killed");
                eprintln!("warning: {line}");
                self.warnings.push(line);
            }
            self.done[w] = true;
        }
    }

    fn worker_died(&mut self, w: usize, end: &ChildEnd) {
        self.fates[w] = Some(WorkerFate::Died);
        let sent = self.sent_now(w);
        self.input_shared.set_state(w, WorkerState::Dead);
        let issued = self.input_shared.issued_to[w].load(Ordering::Acquire);
        let received = self.input_shared.received_from[w].load(Ordering::Acquire);
        let unanswered = issued.saturating_sub(received);
        let on_wire = sent.iter().filter(|&&id| !self.answered.contains(id)).count() as u64;
        self.sent_at_end[w] = sent;
        let message = format!(
            "worker {w} {end}; its {on_wire} in-flight samples fail as worker_died and the {} it \
             had not sent are not failures",
            unanswered.saturating_sub(on_wire)
        );
        eprintln!("error: {message}");
        self.dead_workers.push((w as u16, message));
        // The scheduler and the drain must not wait for them.
        self.input_shared.records_total.fetch_add(unanswered, Ordering::Release);
        self.input_shared.received_from[w].fetch_add(unanswered, Ordering::Release);
        self.input_shared.notify_progress();
    }

    /// Settles the counts, writes the terminal events of the samples without a record, closes the
    /// event log and hands everything back.
    pub(super) fn close(mut self, timed_out: bool) -> AggregatorOutput {
        self.finish_tokens();
        let log = self.issue_log.take().unwrap_or_default();
        let workers: Vec<WorkerEnd> = (0..self.fates.len())
            .map(|w| WorkerEnd {
                fate: self.fates[w].unwrap_or(WorkerFate::KilledAfterAbort),
                sent: std::mem::take(&mut self.sent_at_end[w]),
            })
            .collect();
        let settlement = settle(&SettleInput {
            log: &log,
            answered: &self.answered,
            tally: self.tally,
            workers: &workers,
            closed_loop: self.closed_loop,
            warmup_samples: self.warmup_samples,
            tracked_end: self.tracked_end,
            abort: self.abort_cause,
            window: (self.window, &self.late),
        });
        let ended_ns = loadgen_wire::monotonic_ns();
        // Counted before the terminal events the run's end writes for old samples (late by
        // nature: their lines could not be written before the end).
        self.warn_late_events();
        self.log_terminal_events(&settlement, ended_ns);
        // Session end events close the log as the reference's do (stamps, not metric inputs).
        if !self.tracking_stopped {
            self.events.session("session.stop_performance_tracking", ended_ns);
        }
        self.events.session("session.ended", ended_ns);
        self.counters.session_end_ns = ended_ns;
        self.apply_settlement(&settlement);
        let events = self.events.close();
        AggregatorOutput {
            rows: self.rows,
            chunk_delta_ns: self.chunk_delta_ns,
            counters: self.counters,
            failures: self.failures,
            dead_workers: self.dead_workers,
            warnings: self.warnings,
            events,
            timed_out,
            reaped: self.reaped,
            unrecorded_turns: self.unrecorded_turns,
            untracked_sample_rows: self.untracked_sample_rows,
        }
    }

    fn apply_settlement(&mut self, s: &Settlement) {
        let c = &mut self.counters;
        c.total_samples_issued = s.total.issued;
        c.total_samples_completed = s.total.completed;
        c.total_samples_failed = s.total.failed;
        c.total_samples_abandoned = s.total.abandoned;
        c.tracked_samples_issued = s.tracked.issued;
        c.tracked_samples_completed = s.tracked.completed;
        c.tracked_samples_failed = s.tracked.failed;
        c.abandoned = s.tracked.abandoned;
        if let Some(message) = &s.broken {
            eprintln!("warning: {message}");
            self.warnings.push(message.clone());
        }
    }

    /// One terminal event for every tracked sample whose record gave none: cancelled samples
    /// and samples with no record at all (`issued` first, as every sample's lines begin).
    fn log_terminal_events(&mut self, s: &Settlement, ended_ns: u64) {
        let cause = self.abort_cause.unwrap_or(AbandonCause::Unanswered);
        for c in std::mem::take(&mut self.cancelled) {
            self.log_issued(c.sample_id, c.row, c.issued_ns);
            self.log_abandoned(c.sample_id, c.cancelled_ns, cause);
            if !self.late.contains(c.sample_id) {
                self.note_unrecorded(c.sample_id, c.row, false);
            }
        }
        for o in &s.synthesized {
            let died = o.outcome == Synthesized::WorkerDied;
            if self.window.admits(o.issued.issued_ns) {
                self.note_unrecorded(o.sample_id, o.issued.row, died);
            }
            let message = format!(
                "worker {} died with the request in flight; no response was recorded",
                o.issued.worker
            );
            // Warm-up samples have no events, and no place in the failure kinds.
            if o.sample_id < self.warmup_samples {
                continue;
            }
            let tracked = o.sample_id < self.tracked_end && self.window.admits(o.issued.issued_ns);
            if o.outcome == Synthesized::WorkerDied && tracked {
                self.note_failure(FailureKind::WorkerDied, message.as_bytes());
            }
            self.log_synthesized(o, ended_ns, &message);
        }
    }

    /// Lists a tracked turn of an agentic run that has no row (abandoned, or its worker died),
    /// for the report's conversations.
    fn note_unrecorded(&mut self, sample_id: u64, row: u32, worker_died: bool) {
        let tracked = (self.warmup_samples..self.tracked_end).contains(&sample_id);
        if self.agentic && tracked {
            self.unrecorded_turns.push(super::UnrecordedTurn { row, worker_died });
        }
    }

    fn log_synthesized(&mut self, o: &SynthesizedOutcome, ended_ns: u64, died: &str) {
        let issued_ns = o.issued.issued_ns.unwrap_or(ended_ns);
        self.log_issued(o.sample_id, o.issued.row, issued_ns);
        match o.outcome {
            Synthesized::Abandoned(cause) => self.log_abandoned(o.sample_id, ended_ns, cause),
            Synthesized::WorkerDied => {
                let kind = FailureKind::WorkerDied.as_str();
                self.events.error_data("error.generic", o.sample_id, ended_ns, kind, died);
                self.events.complete(&super::events::CompleteEvent {
                    sample_id: o.sample_id,
                    timestamp_ns: ended_ns,
                    output: None,
                    streamed: self.streaming,
                    first_chunk_len: None,
                    reasoning_len: 0,
                    tool_calls_len: 0,
                    finish_reason: None,
                    worker_id: o.issued.worker,
                    prompt_tokens: None,
                    completion_tokens: None,
                    chunks: None,
                    endpoint: loadgen_wire::NO_ENDPOINT,
                    client_wait_ns: None,
                });
            }
        }
    }

    /// Says so when events reached the aggregator later than the reorder window.
    fn warn_late_events(&mut self) {
        let late = self.events.late_events();
        if late > 0 {
            let window_ms = super::events::REORDER_WINDOW_NS / 1_000_000;
            let message = format!(
                "{late} events reached the aggregator more than {window_ms} ms after they \
                 happened (a backed-up worker ring): events.jsonl has them out of time order by \
                 their delay; the metrics are not affected"
            );
            eprintln!("warning: {message}");
            self.warnings.push(message);
        }
    }

    /// `sample.issued`, unless the worker's notice logged it when the sample was issued.
    fn log_issued(&mut self, sample_id: u64, row: u32, issued_ns: u64) {
        if self.issued_logged.insert(sample_id) {
            self.events.issued(sample_id, issued_ns, row);
        }
    }

    fn log_abandoned(&mut self, sample_id: u64, timestamp_ns: u64, cause: AbandonCause) {
        self.events.error_data(
            "error.loadgen",
            sample_id,
            timestamp_ns,
            "abandoned",
            cause.message(),
        );
    }
}
