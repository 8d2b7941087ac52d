//! The aggregator end to end in one process: real rings, a stand-in child for the worker's pid.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, unbounded};
use loadgen_wire::{
    Doorbell, FailureKind, InFlightTable, RecordHeader, RecordProducer, RingSizes, WorkerRings,
};
use nix::sys::signal::{kill, Signal};

use super::events::EventLog;
use super::{run, AggregatorInput, AggregatorOutput, Control, Shared, Status};
use crate::conversation::{ConversationPlan, ConversationSpan};
use crate::fork::{fork_child, kill_and_reap};
use crate::settle::IssueLog;

/// Runs the aggregator over one worker whose records `feed` pushes after the start; `die`
/// SIGKILLs the stand-in worker process instead of saying Done. `issued` samples (ids 0..) are
/// in the issue log.
fn aggregate(
    issued: u64,
    table: InFlightTable,
    die: bool,
    feed: impl FnOnce(&mut RecordProducer),
) -> AggregatorOutput {
    aggregate_run(issued, table, die, None, feed)
}

/// `aggregate` of an agentic run when `plan` is given.
fn aggregate_run(
    issued: u64,
    table: InFlightTable,
    die: bool,
    plan: Option<Arc<ConversationPlan>>,
    feed: impl FnOnce(&mut RecordProducer),
) -> AggregatorOutput {
    let bell = Doorbell::create().unwrap();
    let sizes = RingSizes { issue_slots: 16, record_bytes: 64 * 1024 };
    let rings = WorkerRings::create_with(0, sizes, &bell, &bell).unwrap();
    let (_issue, consumer) = rings.coordinator_ends();
    let (_, mut producer) = rings.worker_ends();
    let stand_in = fork_child(|| loop {
        // SAFETY: pause(2) only sleeps until a signal arrives.
        unsafe { libc::pause() };
    })
    .unwrap();
    let shared = Arc::new(Shared::new(1).with_conversations(plan, 1));
    let (control, control_rx) = unbounded();
    let (status_tx, status) = bounded(4);
    let input = AggregatorInput {
        consumers: vec![consumer],
        pids: vec![stand_in],
        in_flight: vec![Some(table)],
        doorbell: Arc::new(bell),
        shared: shared.clone(),
        control: control_rx,
        issue_notices: crossbeam_channel::never(),
        status: status_tx,
        events: EventLog::disabled(),
        tokens: None,
        isl_client: Arc::new(vec![None; 8]),
        streaming: false,
        warmup_samples: 0,
        expected_samples: issued,
        live: crate::live::LiveSpec::off(),
        closed_loop: false,
        spill: None,
    };
    let aggregator = std::thread::spawn(move || run(input));
    producer.push_ready(1);
    assert!(matches!(status.recv_timeout(Duration::from_secs(10)), Ok(Status::AllReady)));
    control.send(Control::Start { session_start_ns: 1 }).unwrap();
    control.send(Control::Tracking { tracking_start_ns: 2 }).unwrap();
    feed(&mut producer);
    let mut log = IssueLog::with_capacity(issued, 0);
    (0..issued).for_each(|id| log.push(id, 0, id as u32, 10 + id));
    shared.issued_to[0].store(issued, std::sync::atomic::Ordering::Release);
    if die {
        let _ = kill(stand_in, Signal::SIGKILL);
    } else {
        producer.push_done();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    control.send(Control::Finish { log: Box::new(log), deadline }).unwrap();
    let out = aggregator.join().unwrap();
    if !out.reaped[0] {
        kill_and_reap(stand_in);
    }
    out
}

fn header(sample_id: u64, failure: FailureKind, resent: u8) -> RecordHeader {
    RecordHeader {
        sample_id,
        issued_ns: 10 + sample_id,
        complete_ns: 100,
        failure: failure as u8,
        resent,
        ..RecordHeader::default()
    }
}

#[test]
fn re_sent_requests_are_counted_and_unanswered_samples_abandoned() {
    let table = InFlightTable::create(0, 2).unwrap();
    let out = aggregate(4, table, false, |p| {
        p.push_record(&header(0, FailureKind::None, 1), b"a", b"");
        p.push_record(&header(1, FailureKind::None, 1), b"b", b"");
        p.push_record(&header(2, FailureKind::Cancelled, 0), b"", b"cancelled");
    });
    let c = &out.counters;
    assert_eq!(c.requests_resent, 2, "the records' resent flags are summed");
    assert_eq!((c.tracked_samples_issued, c.tracked_samples_completed), (4, 2));
    assert_eq!(c.abandoned, 2, "the cancelled one and the one never answered");
    assert!(out.warnings.iter().all(|w| !w.contains("does not add up")), "{:?}", out.warnings);
    assert!(out.unrecorded_turns.is_empty());
}

#[test]
fn an_agentic_run_s_rows_name_their_dataset_rows_and_its_turns_without_one_are_listed() {
    // Two conversations of two turns: rows (== sample ids) 0, 1 and 2, 3.
    let spans = vec![
        ConversationSpan { first_row: 0, turns: 2 },
        ConversationSpan { first_row: 2, turns: 2 },
    ];
    let plan = ConversationPlan::new(spans, vec!["a".into(), "b".into()], vec![1, 3, 1, 3]);
    let table = InFlightTable::create(0, 2).unwrap();
    let turn = |id: u64, failure| RecordHeader { row: id as u32, ..header(id, failure, 0) };
    let out = aggregate_run(4, table, false, Some(Arc::new(plan)), |p| {
        p.push_record(&turn(1, FailureKind::None), b"a", b"");
        p.push_record(&turn(0, FailureKind::Timeout), b"", b"timed out");
        p.push_record(&turn(2, FailureKind::Cancelled), b"", b"cancelled by abort");
    });
    let unrecorded = |row| super::UnrecordedTurn { row, worker_died: false };
    assert_eq!(out.unrecorded_turns, [unrecorded(2), unrecorded(3)], "cancelled, then unanswered");
    // Each row's (sample id, dataset row).
    let mut rows = Vec::new();
    out.rows.drain_in_completion_order(|r| rows.push((r.sample_id, r.dataset_row)));
    rows.sort_unstable();
    assert_eq!(rows, [(0, 0), (1, 1)]);
}

#[test]
fn a_dead_workers_sent_samples_fail_as_worker_died() {
    let table = InFlightTable::create(0, 2).unwrap();
    // Sample 1 is on the wire (slot 0); samples 2 and 3 were never sent.
    table.set(0, 1);
    let out = aggregate(4, table, true, |p| {
        p.push_record(&header(0, FailureKind::None, 0), b"a", b"");
    });
    let c = &out.counters;
    assert_eq!((c.tracked_samples_completed, c.tracked_samples_failed), (2, 1));
    assert_eq!(c.abandoned, 2, "samples it never sent are not failures");
    let kinds: Vec<_> = out.failures.iter().map(|f| (f.kind, f.count)).collect();
    assert_eq!(kinds, vec![("worker_died", 1)]);
    assert_eq!(out.dead_workers.len(), 1);
}
