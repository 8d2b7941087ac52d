//! Ring tests: wraparound and back-pressure on heap memory, and a cross-process run over fork.

use std::sync::Arc;
use std::time::Duration;

use super::region::{HeapRegion, Region};
use super::ring::RingLayout;
use super::sys::wake_pair;
use super::*;

struct HeapRings {
    issue_tx: IssueProducer,
    issue_rx: IssueConsumer,
    rec_tx: RecordProducer,
    rec_rx: RecordConsumer,
}

fn heap_rings(sizes: RingSizes, ready: &Doorbell, space: &Doorbell) -> HeapRings {
    let layout = RingLayout::new(sizes);
    let region: Arc<dyn Region> = Arc::new(HeapRegion::new(layout.total_bytes()));
    let (tx, rx) = wake_pair().unwrap();
    HeapRings {
        issue_tx: IssueProducer::new(region.clone(), layout, tx),
        issue_rx: IssueConsumer::new(region.clone(), layout, rx, space.clone()),
        rec_tx: RecordProducer::new(region.clone(), layout, ready.clone(), None),
        rec_rx: RecordConsumer::new(region, layout),
    }
}

fn header(sample_id: u64) -> RecordHeader {
    RecordHeader {
        sample_id,
        issued_ns: sample_id,
        first_chunk_ns: sample_id + 1,
        complete_ns: sample_id + 2,
        sent_ns: sample_id,
        row: (sample_id % 1000) as u32,
        first_chunk_len: 1,
        reasoning_len: 0,
        tool_calls_len: 0,
        prompt_tokens: Some(sample_id as u32),
        completion_tokens: (sample_id % 3 == 0).then_some(7),
        http_status: 200,
        worker_id: 1,
        failure: 0,
        finish: 1,
        resent: 0,
        endpoint: (sample_id % 3) as u8,
    }
}

/// Output bytes for a sample: a length that varies so frames straddle the ring's end.
fn output_for(sample_id: u64) -> Vec<u8> {
    let len = (sample_id * 37 % 700) as usize;
    (0..len).map(|i| b'a' + ((sample_id as usize + i) % 26) as u8).collect()
}

/// Pops one record and checks it against what was pushed for `expect_id`.
fn pop_expect(rx: &mut RecordConsumer, expect_id: u64) -> bool {
    rx.pop(|event| match event {
        WorkerEvent::Record(view) => {
            assert_eq!(view.header, header(expect_id));
            assert!(view.header.timestamps_ordered());
            assert_eq!(view.output, &output_for(expect_id)[..]);
            assert_eq!(view.error, format!("e{expect_id}").as_bytes());
        }
        other => panic!("unexpected event {other:?}"),
    })
    .is_some()
}

#[test]
fn issue_ring_wraps_and_reports_full() {
    let bell = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes { issue_slots: 4, record_bytes: 0 }, &bell, &bell);
    assert_eq!(r.issue_tx.capacity(), 4);
    let mut next_push = 0u64;
    let mut next_pop = 0u64;
    for round in 0..100 {
        while r.issue_tx.try_push(IssueCmd::Issue { sample_id: next_push, row: 1, issued_ns: 2 }) {
            next_push += 1;
        }
        assert_eq!(next_push - next_pop, 4, "round {round}: full at exactly capacity");
        assert_eq!(r.issue_tx.free_slots(), 0);
        for _ in 0..(round % 4) + 1 {
            let cmd = r.issue_rx.try_pop().unwrap();
            assert_eq!(cmd, IssueCmd::Issue { sample_id: next_pop, row: 1, issued_ns: 2 });
            next_pop += 1;
        }
    }
    while r.issue_rx.try_pop().is_some() {
        next_pop += 1;
    }
    assert_eq!(next_pop, next_push);
    assert_eq!(r.issue_tx.free_slots(), 4);
}

#[test]
fn issue_pop_rings_space_doorbell_at_half_ring() {
    let ready = Doorbell::create().unwrap();
    let space = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes { issue_slots: 8, record_bytes: 0 }, &ready, &space);
    let before = space.epoch();
    for _ in 0..8 {
        assert!(r.issue_tx.try_push(IssueCmd::Stop));
    }
    assert!(!r.issue_tx.try_push(IssueCmd::Stop), "the ring holds 8");
    // A full ring freed one slot at a time: no wake-up until half of it is free.
    for popped in 1..=3 {
        r.issue_rx.try_pop().unwrap();
        assert_eq!(space.epoch(), before, "{popped} pop(s) from a full ring do not ring");
    }
    r.issue_rx.try_pop().unwrap();
    assert_eq!(space.epoch(), before.wrapping_add(1), "the pop to half full rings once");
    for _ in 0..4 {
        r.issue_rx.try_pop().unwrap();
    }
    assert_eq!(space.epoch(), before.wrapping_add(1), "pops below half do not ring again");
    // The smallest ring (2 slots) still wakes a scheduler on its first pop from full.
    let mut small = heap_rings(RingSizes { issue_slots: 2, record_bytes: 0 }, &ready, &space);
    assert!(small.issue_tx.try_push(IssueCmd::Stop));
    assert!(small.issue_tx.try_push(IssueCmd::Abort));
    let before = space.epoch();
    small.issue_rx.try_pop().unwrap();
    assert_eq!(space.epoch(), before.wrapping_add(1));
}

#[test]
fn scheduler_asleep_on_a_full_ring_is_woken_by_the_draining_worker() {
    let ready = Doorbell::create().unwrap();
    let space = Doorbell::create().unwrap();
    let r = heap_rings(RingSizes { issue_slots: 16, record_bytes: 0 }, &ready, &space);
    let (mut tx, mut rx) = (r.issue_tx, r.issue_rx);
    const TOTAL: u64 = 20_000;
    // The worker side pops slowly in small bursts, as a worker does when its queue is full.
    let worker = std::thread::spawn(move || {
        let mut got = 0u64;
        while got < TOTAL {
            match rx.try_pop() {
                Some(IssueCmd::Issue { sample_id, .. }) => {
                    assert_eq!(sample_id, got);
                    got += 1;
                }
                Some(other) => panic!("unexpected {other:?}"),
                None => std::thread::yield_now(),
            }
        }
        got
    });
    // The scheduler side pushes as fast as it can and sleeps on the space doorbell when full,
    // with a timeout long enough that a lost wake-up fails the test instead of hiding.
    let start = std::time::Instant::now();
    let mut next = 0u64;
    while next < TOTAL {
        let epoch = space.epoch();
        if tx.try_push(IssueCmd::Issue { sample_id: next, row: 0, issued_ns: 0 }) {
            next += 1;
        } else {
            space.wait(epoch, Duration::from_secs(30));
        }
    }
    assert_eq!(worker.join().unwrap(), TOTAL);
    assert!(start.elapsed() < Duration::from_secs(20), "a wake-up was lost");
}

#[test]
fn a_sleeping_worker_gets_one_wake_byte_however_many_pushes_follow() {
    let bell = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes { issue_slots: 8, record_bytes: 0 }, &bell, &bell);
    assert!(r.issue_rx.prepare_sleep(), "an empty ring lets the worker sleep");
    for id in 0..5 {
        assert!(r.issue_tx.try_push(IssueCmd::Issue { sample_id: id, row: 0, issued_ns: 1 }));
    }
    let mut buf = [0u8; 64];
    let mut wake =
        std::fs::File::from(std::os::fd::OwnedFd::from(r.issue_rx.wake_stream().unwrap()));
    use std::io::Read as _;
    let n = wake.read(&mut buf).unwrap();
    assert_eq!(n, 1, "five pushes to a sleeping worker write one wake byte");
    r.issue_rx.end_sleep();
    for id in 0..5 {
        assert!(
            matches!(r.issue_rx.try_pop(), Some(IssueCmd::Issue { sample_id, .. }) if sample_id == id)
        );
    }
}

#[test]
fn sleeping_worker_is_woken_by_push() {
    let bell = Doorbell::create().unwrap();
    let r = heap_rings(RingSizes { issue_slots: 8, record_bytes: 0 }, &bell, &bell);
    let (mut tx, mut rx) = (r.issue_tx, r.issue_rx);
    let worker = std::thread::spawn(move || rx.pop_blocking(Duration::from_secs(30)));
    assert!(tx.try_push(IssueCmd::Issue { sample_id: 9, row: 3, issued_ns: 4 }));
    let got = worker.join().unwrap();
    assert_eq!(got, Some(IssueCmd::Issue { sample_id: 9, row: 3, issued_ns: 4 }));
}

#[test]
fn record_ring_wraps_with_varied_frames() {
    let bell = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes { issue_slots: 2, record_bytes: 64 * 1024 }, &bell, &bell);
    let mut pushed = 0u64;
    let mut popped = 0u64;
    // Uneven push/pop bursts so the write position lands everywhere, pads included.
    for round in 0..2000u64 {
        for _ in 0..(round % 7) + 1 {
            let error = format!("e{pushed}");
            assert!(r.rec_tx.push_record(&header(pushed), &output_for(pushed), error.as_bytes()));
            pushed += 1;
            if pushed - popped > 40 {
                break;
            }
        }
        for _ in 0..(round % 5) + 1 {
            if popped < pushed {
                assert!(pop_expect(&mut r.rec_rx, popped));
                popped += 1;
            }
        }
    }
    while popped < pushed {
        assert!(pop_expect(&mut r.rec_rx, popped));
        popped += 1;
    }
    assert!(r.rec_rx.pop(|_| ()).is_none());
    assert_eq!(r.rec_tx.truncated_count(), 0);
}

#[test]
fn control_frames_roundtrip() {
    let bell = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes::default(), &bell, &bell);
    assert!(r.rec_tx.push_ready(17));
    assert!(r.rec_tx.push_warning("usage value was a bool"));
    assert!(r.rec_tx.push_setup_failed("connection refused"));
    assert!(r.rec_tx.push_issued(u64::MAX - 1, 7, 123_456_789_012));
    assert!(r.rec_tx.push_first_chunk(9, u64::MAX));
    assert!(r.rec_tx.push_done());
    let mut seen = Vec::new();
    while let Some(line) = r.rec_rx.pop(|event| match event {
        WorkerEvent::Ready { connections_open } => format!("ready {connections_open}"),
        WorkerEvent::Warning { message } => format!("warning {message}"),
        WorkerEvent::SetupFailed { message } => format!("failed {message}"),
        WorkerEvent::Issued { sample_id, row, issued_ns } => {
            format!("issued {sample_id} row {row} at {issued_ns}")
        }
        WorkerEvent::FirstChunk { sample_id, first_chunk_ns } => {
            format!("first {sample_id} at {first_chunk_ns}")
        }
        WorkerEvent::Done => "done".to_string(),
        WorkerEvent::Record(_) => "record".to_string(),
    }) {
        seen.push(line);
    }
    let issued = format!("issued {} row 7 at 123456789012", u64::MAX - 1);
    let first = format!("first 9 at {}", u64::MAX);
    let want = ["ready 17", "warning usage value was a bool", "failed connection refused"];
    assert_eq!(seen[..3], want);
    assert_eq!(seen[3..], [issued, first, "done".to_string()]);
}

#[test]
fn oversized_output_is_truncated_and_counted() {
    let bell = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes { issue_slots: 2, record_bytes: 64 * 1024 }, &bell, &bell);
    let max_output = r.rec_tx.max_payload_bytes() - RECORD_HEADER_BYTES;
    let big = vec![b'x'; max_output + 100];
    assert!(r.rec_tx.push_record(&header(3), &big, b"err"));
    assert_eq!(r.rec_tx.truncated_count(), 1);
    let len = r.rec_rx.pop(|event| match event {
        WorkerEvent::Record(view) => (view.output.len(), view.error.len()),
        other => panic!("unexpected {other:?}"),
    });
    assert_eq!(len, Some((max_output, 0)));
}

#[test]
fn a_streamed_record_carries_its_chunk_timing_and_a_cut_keeps_the_counts() {
    let bell = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes { issue_slots: 2, record_bytes: 64 * 1024 }, &bell, &bell);
    let mut clock = ChunkTimes::with_capacity(0);
    for at_ns in [100u64, 250, 5_000_250] {
        clock.note_read();
        clock.mark(at_ns);
    }
    assert!(r.rec_tx.push_streamed_record(&header(1), b"out", b"", clock.as_bytes()));
    let max_output = r.rec_tx.max_payload_bytes() - RECORD_HEADER_BYTES;
    let big = vec![b'x'; max_output];
    assert!(r.rec_tx.push_streamed_record(&header(2), &big, b"", clock.as_bytes()));
    assert_eq!(r.rec_tx.truncated_count(), 1);
    let mut seen = Vec::new();
    while let Some(got) = r.rec_rx.pop(|event| match event {
        WorkerEvent::Record(view) => {
            let timing = ChunkTiming::decode(view.chunk_timing).unwrap();
            let gaps: Vec<u64> = timing.gaps_ns().collect();
            (view.output.len(), timing.n_chunks, timing.chunk_reads, gaps)
        }
        other => panic!("unexpected {other:?}"),
    }) {
        seen.push(got);
    }
    assert_eq!(seen[0], (3, 3, 3, vec![150, 5_000_000]));
    // The output gave way to the counts; the gaps were cut.
    assert_eq!(seen[1], (max_output - CHUNK_COUNTS_BYTES, 3, 3, vec![]));
}

#[test]
fn records_ready_rings_once_after_the_consumer_ran_dry() {
    let ready = Doorbell::create().unwrap();
    let space = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes::default(), &ready, &space);
    let start = ready.epoch();
    // The consumer found the ring empty: the next push rings, the ones after it do not.
    assert!(r.rec_rx.pop(|_| ()).is_none());
    assert!(r.rec_tx.push_done());
    assert!(r.rec_tx.push_done());
    assert_eq!(ready.epoch(), start.wrapping_add(1));
    // A busy consumer (it popped but never ran dry) is not rung.
    assert!(r.rec_rx.pop(|_| ()).is_some());
    assert!(r.rec_tx.push_done());
    assert_eq!(ready.epoch(), start.wrapping_add(1));
    while r.rec_rx.pop(|_| ()).is_some() {}
    // Polling an empty ring again and again still rings only once.
    assert!(r.rec_rx.pop(|_| ()).is_none());
    assert!(r.rec_tx.push_done());
    assert!(r.rec_tx.push_done());
    assert_eq!(ready.epoch(), start.wrapping_add(2));
}

#[test]
fn deferred_records_ring_on_flush_only() {
    let ready = Doorbell::create().unwrap();
    let space = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes::default(), &ready, &space);
    let start = ready.epoch();
    r.rec_tx.defer_doorbell(true);
    assert!(r.rec_rx.pop(|_| ()).is_none());
    for id in 0..3 {
        assert!(r.rec_tx.push_record(&header(id), &output_for(id), format!("e{id}").as_bytes()));
    }
    // Published at once (an awake consumer sees them), but nobody was woken yet.
    assert_eq!(ready.epoch(), start);
    assert!(pop_expect(&mut r.rec_rx, 0));
    r.rec_tx.flush_doorbell();
    assert_eq!(ready.epoch(), start.wrapping_add(1));
    r.rec_tx.flush_doorbell();
    assert_eq!(ready.epoch(), start.wrapping_add(1));
    assert!(pop_expect(&mut r.rec_rx, 1) && pop_expect(&mut r.rec_rx, 2));
    // Control frames ring at once even while records are deferred.
    assert!(r.rec_rx.pop(|_| ()).is_none());
    assert!(r.rec_tx.push_warning("w"));
    assert_eq!(ready.epoch(), start.wrapping_add(2));
}

/// A producer that defers its doorbell and never flushes still wakes a consumer asleep on a full
/// ring: waiting for space flushes first. Without that the consumer sleeps out its 30 s timeout.
#[test]
fn deferred_producer_flushes_before_waiting_for_space() {
    const COUNT: u64 = 5_000;
    let ready = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes { issue_slots: 2, record_bytes: 64 * 1024 }, &ready, &ready);
    let mut tx = r.rec_tx;
    let producer = std::thread::spawn(move || {
        tx.defer_doorbell(true);
        for id in 0..COUNT {
            let error = format!("e{id}");
            assert!(tx.push_record(&header(id), &output_for(id), error.as_bytes()));
        }
        tx.flush_doorbell();
    });
    let start = std::time::Instant::now();
    let mut next = 0u64;
    while next < COUNT {
        let seen = ready.epoch();
        if pop_expect(&mut r.rec_rx, next) {
            next += 1;
        } else {
            ready.wait(seen, Duration::from_secs(30));
        }
    }
    producer.join().unwrap();
    assert!(start.elapsed() < Duration::from_secs(20), "a wake-up was lost");
}

/// A slow consumer on a small ring: the producer blocks on back-pressure, nothing is lost.
#[test]
fn slow_consumer_loses_nothing() {
    const COUNT: u64 = 20_000;
    let ready = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes { issue_slots: 2, record_bytes: 64 * 1024 }, &ready, &ready);
    let mut tx = r.rec_tx;
    let producer = std::thread::spawn(move || {
        for id in 0..COUNT {
            let error = format!("e{id}");
            assert!(tx.push_record(&header(id), &output_for(id), error.as_bytes()));
        }
    });
    let mut next = 0u64;
    while next < COUNT {
        let seen = ready.epoch();
        if pop_expect(&mut r.rec_rx, next) {
            next += 1;
            if next % 64 == 0 {
                std::thread::yield_now();
            }
        } else {
            ready.wait(seen, Duration::from_secs(30));
        }
    }
    producer.join().unwrap();
    assert!(r.rec_rx.pop(|_| ()).is_none());
}

/// Two processes: the child (forked) pushes records, the parent pops them and feeds the child
/// issue commands, as a coordinator and a worker do.
#[test]
fn cross_process_ring_moves_records() {
    const COUNT: u64 = 120_000;
    let ready = Doorbell::create().unwrap();
    let space = Doorbell::create().unwrap();
    let rings = WorkerRings::create_with(
        5,
        RingSizes { issue_slots: 64, record_bytes: 1 << 20 },
        &ready,
        &space,
    )
    .unwrap();
    // SAFETY: the child only touches the rings (shared memory, atomics, futex and socket
    // syscalls) and leaves with _exit, never returning into the test harness.
    match unsafe { nix::unistd::fork() }.unwrap() {
        nix::unistd::ForkResult::Child => {
            let (mut issue, mut records) = rings.worker_ends();
            let mut code = 0;
            for id in 0..COUNT {
                let Some(IssueCmd::Issue { sample_id, .. }) =
                    issue.pop_blocking(Duration::from_secs(30))
                else {
                    code = 3;
                    break;
                };
                if sample_id != id || !records.push_record(&header(id), b"out", b"") {
                    code = 4;
                    break;
                }
            }
            records.push_done();
            // SAFETY: _exit skips the harness's atexit handlers and destructors in the child.
            unsafe { libc::_exit(code) }
        }
        nix::unistd::ForkResult::Parent { child } => {
            let (mut issue, mut records) = rings.coordinator_ends();
            let (mut issued, mut received, mut done) = (0u64, 0u64, false);
            while !done {
                let (ready_seen, space_seen) = (ready.epoch(), space.epoch());
                let mut progressed = false;
                while issued < COUNT
                    && issue.try_push(IssueCmd::Issue { sample_id: issued, row: 0, issued_ns: 1 })
                {
                    issued += 1;
                    progressed = true;
                }
                while let Some(event) = records.pop(|event| match event {
                    WorkerEvent::Record(view) => {
                        assert_eq!(view.header.sample_id, received);
                        assert_eq!(view.output, b"out");
                        Some(())
                    }
                    WorkerEvent::Done => None,
                    other => panic!("unexpected {other:?}"),
                }) {
                    progressed = true;
                    match event {
                        Some(()) => received += 1,
                        None => done = true,
                    }
                }
                if !progressed && !done {
                    // Sleep on whichever doorbell applies: space while issuing, records after.
                    if issued < COUNT && issue.free_slots() == 0 {
                        space.wait(space_seen, Duration::from_millis(50));
                    } else {
                        ready.wait(ready_seen, Duration::from_millis(50));
                    }
                }
            }
            let status = nix::sys::wait::waitpid(child, None).unwrap();
            assert_eq!(status, nix::sys::wait::WaitStatus::Exited(child, 0));
            assert_eq!(received, COUNT);
        }
    }
}

#[test]
fn an_out_of_band_abort_overtakes_queued_commands_and_wakes_the_worker() {
    let bell = Doorbell::create().unwrap();
    let mut r = heap_rings(RingSizes { issue_slots: 4, record_bytes: 64 * 1024 }, &bell, &bell);
    for id in 0..4 {
        assert!(r.issue_tx.try_push(IssueCmd::Issue { sample_id: id, row: 0, issued_ns: 1 }));
    }
    assert!(!r.issue_rx.abort_requested());
    r.issue_tx.request_abort();
    // Seen at once, with four commands still queued ahead of where an Abort command would be.
    assert!(r.issue_rx.abort_requested());
    let mut wake = r.issue_rx.wake_stream().unwrap();
    let mut byte = [0u8; 1];
    let n = std::io::Read::read(&mut wake, &mut byte).expect("a wake byte was sent");
    assert_eq!(n, 1);
}
