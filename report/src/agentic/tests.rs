//! The agentic report's rules on hand-built runs: two conversations of three turns (1, 3, 5),
//! the second's turn 3 timing out and its turn 5 dropped; the same samples through the run's
//! path (dataset rows and the plan) and through a rebuild of their events.jsonl.

use loadgen_coordinator::aggregate::UnrecordedTurn;
use loadgen_coordinator::conversation::{ConversationPlan, ConversationSpan};
use loadgen_coordinator::metrics::{
    FinishKind, MetricsOptions, Num, SampleRow, SampleTable, TokenCountSource,
};
use loadgen_wire::FailureKind;

use super::*;
use crate::rebuild::Carried;
use crate::replay::read::for_each_event;
use crate::replay::{Replay, UuidMap};
use crate::FailureKindCount;

/// Conversation `a` is rows 0..3, `b` rows 3..6; both have client turns 1, 3 and 5.
fn plan() -> ConversationPlan {
    let spans = vec![
        ConversationSpan { first_row: 0, turns: 3 },
        ConversationSpan { first_row: 3, turns: 3 },
    ];
    ConversationPlan::new(spans, vec!["a".into(), "b".into()], vec![1, 3, 5, 1, 3, 5])
}

fn opts() -> MetricsOptions {
    MetricsOptions {
        streaming: true,
        early_stopping: true,
        primary: TokenCountSource::Server,
        legacy_loadgen_qps: false,
        has_tokenizer: false,
    }
}

/// A streamed success: issued, first chunk, completed, `tokens` completion tokens.
fn ok(row: u32, issued: u64, first: u64, complete: u64, tokens: u32) -> Row {
    let sample = SampleRow {
        issued_ns: issued,
        first_chunk_ns: Some(first),
        complete_ns: complete,
        finish: Some(FinishKind::Stop),
        prompt_tokens: Some(10),
        completion_tokens: Some(tokens),
        ..SampleRow::default()
    };
    (row, sample)
}

fn failed(row: u32, issued: u64, complete: u64, kind: FailureKind) -> Row {
    let sample = SampleRow {
        issued_ns: issued,
        complete_ns: complete,
        failed: true,
        output_empty: true,
        failure: kind as u8,
        ..SampleRow::default()
    };
    (row, sample)
}

/// A table row with the dataset row it sent (== its sample id in an agentic run).
type Row = (u32, SampleRow);

/// The run's table, in completion order: b's turn 3 times out at 2600 and its turn 5 is
/// dropped at once.
fn rows() -> Vec<Row> {
    vec![
        ok(0, 1_000, 1_100, 1_500, 5),
        ok(3, 1_010, 1_200, 1_600, 3),
        ok(1, 1_500, 1_650, 2_100, 6),
        failed(4, 1_600, 2_600, FailureKind::Timeout),
        failed(5, 2_600, 2_600, FailureKind::TurnAborted),
        ok(2, 2_100, 2_300, 2_900, 9),
    ]
}

fn table_of(rows: &[Row]) -> SampleTable {
    let mut table = SampleTable::with_capacity(rows.len());
    for (_, row) in rows {
        table.push(row);
    }
    table.set_dataset_rows(rows.iter().map(|r| r.0).collect());
    table
}

fn live() -> AgenticSummary {
    agentic_of_run(&table_of(&rows()), Some(&plan()), &[], &opts()).expect("an agentic run")
}

#[test]
fn two_conversations_with_a_dropped_turn_count_exactly() {
    let a = live();
    assert_eq!(a.dropped_turns, 1);
    let c = &a.conversations;
    assert_eq!((c.started, c.completed, c.failed, c.abandoned), (2, 1, 1, 0));
    let turns = c.turns_per_conversation.as_ref().unwrap();
    assert_eq!((turns.count, turns.min, turns.max), (2, Num::Int(3), Num::Int(3)));
    // Only `a` completed: its first issue (1000) to its last completion (2900).
    let d = c.duration_ns.as_ref().unwrap();
    assert_eq!((d.count, d.min), (1, Num::Int(1_900)));
    let t = &a.turns;
    assert_eq!((t.issued, t.succeeded, t.failed, t.dropped, t.abandoned), (6, 4, 2, 1, 0));
    let kinds = [("timeout".to_string(), 1), ("turn_aborted".to_string(), 1)];
    assert_eq!(t.failed_by_kind, kinds);
    let per_turn: Vec<_> =
        a.by_turn.iter().map(|s| (s.turn, s.n_samples, s.n_failed, s.n_dropped)).collect();
    assert_eq!(per_turn, [(1, 2, 0, 0), (3, 2, 1, 0), (5, 1, 0, 1)]);
}

#[test]
fn each_turn_s_figures_are_its_own_samples_on_both_bases() {
    let a = live();
    let [t1, t3, t5] = &a.by_turn[..] else { panic!("three turn numbers") };
    // TTFT: first chunk − issue of the turn's streamed successes.
    let ttft = t1.ttft.as_ref().unwrap();
    assert_eq!((ttft.count, ttft.min, ttft.max), (2, Num::Int(100), Num::Int(190)));
    assert_eq!(t3.ttft.as_ref().unwrap().count, 1, "the timed-out turn has no first chunk");
    // Latency counts the failure (time to error), as the summary's does; the dropped turn,
    // never sent, is in neither.
    let latency = t3.latency.as_ref().unwrap();
    assert_eq!((latency.count, latency.max), (2, Num::Int(1_000)));
    assert_eq!(t5.latency.as_ref().unwrap().count, 1);
    // Server TPOT: (complete − first chunk) / (completion tokens − 1); the primary basis.
    let tpot = t1.tpot.as_ref().unwrap();
    assert_eq!((tpot.min, tpot.max), (Num::Float(100.0), Num::Float(200.0)));
    assert_eq!(t5.tpot.as_ref().unwrap().total, Num::Float(75.0));
    assert!(t1.tpot_other.is_none(), "no tokenizer: no client basis");
    assert!(!t1.tpot_partial && !t1.tpot_other_partial);
}

#[test]
fn a_run_without_conversations_has_no_agentic_block() {
    let table = table_of(&rows());
    assert_eq!(agentic_of_run(&table, None, &[], &opts()), None);
    assert_eq!(agentic_summary(&table, &[], &[], &opts()), None);
    let empty = agentic_of_run(&SampleTable::default(), Some(&plan()), &[], &opts()).unwrap();
    assert_eq!((empty.conversations.started, empty.turns.issued), (0, 0));
}

#[test]
fn turns_without_a_row_are_counted_in_their_conversations() {
    // `a` loses its turn 5 in flight at an interrupt; `b`'s turn 3 is lost with its worker.
    let rows: Vec<Row> = rows().into_iter().filter(|r| r.0 < 2).collect();
    let rows: Vec<Row> = rows.into_iter().chain([ok(3, 1_010, 1_200, 1_600, 3)]).collect();
    let unrecorded = [
        UnrecordedTurn { row: 2, worker_died: false },
        UnrecordedTurn { row: 4, worker_died: true },
    ];
    let a = agentic_of_run(&table_of(&rows), Some(&plan()), &unrecorded, &opts()).unwrap();
    let c = &a.conversations;
    assert_eq!((c.started, c.completed, c.failed, c.abandoned), (2, 0, 1, 1));
    assert!(c.duration_ns.is_none(), "no conversation completed");
    let t = &a.turns;
    assert_eq!((t.issued, t.succeeded, t.failed, t.dropped, t.abandoned), (5, 3, 1, 0, 1));
    assert_eq!(t.failed_by_kind, [("worker_died".to_string(), 1)]);
    assert_eq!(t.issued, t.succeeded + t.failed + t.abandoned);
}

#[test]
fn only_failures_after_a_failed_turn_of_the_same_conversation_are_dropped_turns() {
    let label = |conversation, turn| Some(TurnLabel { conversation, turn });
    let fail = |turn| SampleRow { failed: true, issued_ns: turn, ..SampleRow::default() };
    let mut rows = vec![fail(5), fail(3), SampleRow::default(), fail(1), fail(7)];
    let labels = [label(0, 5), label(0, 3), label(1, 1), label(1, 1), None];
    assert_eq!(mark_dropped_turns(&mut rows, &labels), 1);
    let codes: Vec<u8> = rows.iter().map(|r| r.failure).collect();
    assert_eq!(codes, [FailureKind::TurnAborted as u8, 0, 0, 0, 0]);
}

/// The same samples as the run's events.jsonl lines (`conversation_id` and `turn` on each),
/// in time order: issued, first chunk, error and complete lines.
const EVENTS: &str = r#"{"event_type":"session.started","timestamp_ns":100,"sample_uuid":"","conversation_id":"","turn":null,"data":null}
{"event_type":"session.start_performance_tracking","timestamp_ns":500,"sample_uuid":"","conversation_id":"","turn":null,"data":null}
{"event_type":"sample.issued","timestamp_ns":1000,"sample_uuid":"00000000000000000000000000000000","conversation_id":"a","turn":1,"data":null}
{"event_type":"sample.issued","timestamp_ns":1010,"sample_uuid":"00000000000000000000000000000003","conversation_id":"b","turn":1,"data":null}
{"event_type":"sample.recv_first","timestamp_ns":1100,"sample_uuid":"00000000000000000000000000000000","conversation_id":"a","turn":1,"data":null}
{"event_type":"sample.recv_first","timestamp_ns":1200,"sample_uuid":"00000000000000000000000000000003","conversation_id":"b","turn":1,"data":null}
{"event_type":"sample.complete","timestamp_ns":1500,"sample_uuid":"00000000000000000000000000000000","conversation_id":"a","turn":1,"data":["TextModelOutput",["a","bcd"],null,null],"finish_reason":"stop","worker_id":0,"prompt_tokens":10,"completion_tokens":5}
{"event_type":"sample.issued","timestamp_ns":1500,"sample_uuid":"00000000000000000000000000000001","conversation_id":"a","turn":3,"data":null}
{"event_type":"sample.complete","timestamp_ns":1600,"sample_uuid":"00000000000000000000000000000003","conversation_id":"b","turn":1,"data":["TextModelOutput",["a","bc"],null,null],"finish_reason":"stop","worker_id":0,"prompt_tokens":10,"completion_tokens":3}
{"event_type":"sample.issued","timestamp_ns":1600,"sample_uuid":"00000000000000000000000000000004","conversation_id":"b","turn":3,"data":null}
{"event_type":"sample.recv_first","timestamp_ns":1650,"sample_uuid":"00000000000000000000000000000001","conversation_id":"a","turn":3,"data":null}
{"event_type":"sample.complete","timestamp_ns":2100,"sample_uuid":"00000000000000000000000000000001","conversation_id":"a","turn":3,"data":["TextModelOutput",["a","bcdef"],null,null],"finish_reason":"stop","worker_id":0,"prompt_tokens":10,"completion_tokens":6}
{"event_type":"sample.issued","timestamp_ns":2100,"sample_uuid":"00000000000000000000000000000002","conversation_id":"a","turn":5,"data":null}
{"event_type":"sample.recv_first","timestamp_ns":2300,"sample_uuid":"00000000000000000000000000000002","conversation_id":"a","turn":5,"data":null}
{"event_type":"error.generic","timestamp_ns":2600,"sample_uuid":"00000000000000000000000000000004","conversation_id":"b","turn":3,"data":["ErrorData","error","no response within 1000 ms"]}
{"event_type":"sample.complete","timestamp_ns":2600,"sample_uuid":"00000000000000000000000000000004","conversation_id":"b","turn":3,"data":null,"worker_id":0}
{"event_type":"sample.issued","timestamp_ns":2600,"sample_uuid":"00000000000000000000000000000005","conversation_id":"b","turn":5,"data":null}
{"event_type":"error.generic","timestamp_ns":2600,"sample_uuid":"00000000000000000000000000000005","conversation_id":"b","turn":5,"data":["ErrorData","error","prior turn failed: timeout"]}
{"event_type":"sample.complete","timestamp_ns":2600,"sample_uuid":"00000000000000000000000000000005","conversation_id":"b","turn":5,"data":null,"worker_id":0}
{"event_type":"sample.complete","timestamp_ns":2900,"sample_uuid":"00000000000000000000000000000002","conversation_id":"a","turn":5,"data":["TextModelOutput",["a","bcdefghi"],null,null],"finish_reason":"stop","worker_id":0,"prompt_tokens":10,"completion_tokens":9}
{"event_type":"session.ended","timestamp_ns":3000,"sample_uuid":"","conversation_id":"","turn":null,"data":null}
"#;

/// The rebuild's path (`rebuild::rebuild`): the replay, the failure kinds the run's summary
/// names (`kinds`: none without a summary), the table, the block.
fn rebuilt(events: &str, kinds: Option<Vec<FailureKindCount>>) -> Option<AgenticSummary> {
    let mut replay = Replay::new(None, UuidMap::default());
    for_each_event(events.as_bytes(), |e, line| replay.apply(e, line)).expect("the log reads");
    let mut replayed = replay.finish();
    let carried = Carried { failure_kinds: kinds, ..Carried::default() };
    carried.failures(&mut replayed, 1);
    let mut table = SampleTable::with_capacity(replayed.rows.len());
    replayed.rows.iter().for_each(|row| table.push(row));
    agentic_summary(&table, &replayed.turn_labels, &replayed.unrecorded_turns, &opts())
}

fn kind(kind: &str) -> FailureKindCount {
    FailureKindCount { kind: kind.into(), count: 1, first_message: String::new() }
}

#[test]
fn the_rebuild_from_events_jsonl_gives_the_run_s_object() {
    let from_log = rebuilt(EVENTS, Some(vec![kind("timeout"), kind("turn_aborted")]));
    assert_eq!(from_log, Some(live()));
    // The first failed sample in the log is the dropped turn's conversation's timeout: the
    // kinds are dealt in the log's order after the dropped turn is told by its place.
    let reordered = vec![kind("turn_aborted"), kind("timeout")];
    assert_eq!(rebuilt(EVENTS, Some(reordered)), Some(live()));
}

#[test]
fn a_rebuild_without_the_run_s_summary_still_tells_the_dropped_turns() {
    let a = rebuilt(EVENTS, None).unwrap();
    assert_eq!(a.dropped_turns, 1);
    assert_eq!(a.turns.failed_by_kind, [("turn_aborted".into(), 1), ("error".into(), 1)]);
    assert_eq!(a.by_turn, live().by_turn, "the figures do not depend on the kinds");
}

#[test]
fn a_log_without_conversations_rebuilds_no_agentic_block() {
    let plain = EVENTS
        .lines()
        .map(|l| {
            let l = l.replace(r#""conversation_id":"a""#, r#""conversation_id":"""#);
            let l = l.replace(r#""conversation_id":"b""#, r#""conversation_id":"""#);
            ["1", "3", "5"]
                .iter()
                .fold(l, |l, t| l.replace(&format!(r#""turn":{t},"#), r#""turn":null,"#))
                + "\n"
        })
        .collect::<String>();
    assert_eq!(rebuilt(&plain, None), None);
}

#[test]
fn abandoned_and_dead_worker_turns_rebuild_as_the_run_lists_them() {
    // `a`'s turn 5 abandoned at an interrupt (error.loadgen), no complete line.
    let cut: String = EVENTS
        .lines()
        .filter(|l| !l.contains("00000000000000000000000000000002"))
        .map(|l| format!("{l}\n"))
        .collect();
    let abandoned = r#"{"event_type":"sample.issued","timestamp_ns":2100,"sample_uuid":"00000000000000000000000000000002","conversation_id":"a","turn":5,"data":null}
{"event_type":"error.loadgen","timestamp_ns":2950,"sample_uuid":"00000000000000000000000000000002","conversation_id":"a","turn":5,"data":["ErrorData","abandoned","interrupted"]}
"#;
    let end = r#"{"event_type":"session.ended""#;
    let log = cut.replace(end, &format!("{abandoned}{end}"));
    let from_log = rebuilt(&log, Some(vec![kind("timeout"), kind("turn_aborted")])).unwrap();
    let rows: Vec<Row> = rows().into_iter().filter(|r| r.0 != 2).collect();
    let unrecorded = [UnrecordedTurn { row: 2, worker_died: false }];
    let run = agentic_of_run(&table_of(&rows), Some(&plan()), &unrecorded, &opts()).unwrap();
    assert_eq!(from_log, run);
    assert_eq!((run.conversations.abandoned, run.turns.abandoned), (1, 1));
}

/// An agentic block with every part, for the summary's read-back test.
pub(crate) fn sample_agentic() -> AgenticSummary {
    live()
}
