//! Micro benchmarks of the shared-memory rings ACROSS PROCESSES, as a run uses them: a forked
//! child on one core (the worker) and this process on another (the coordinator), each ring's
//! wake-up protocol included. Records per second end to end, not ns per call. Run:
//! `cargo bench -p loadgen-perf --bench ring_xproc`.
//!
//! Its own bench target because it forks: the process must be single-threaded at each fork,
//! and criterion (default features off) measures on the main thread.

mod common;

use std::time::{Duration, Instant};

use common::header;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use loadgen_coordinator::fork::{fork_child, try_reap};
use loadgen_wire::{
    Doorbell, IssueCmd, IssueConsumer, IssueProducer, RecordConsumer, RecordProducer, RingSizes,
    WorkerEvent, WorkerRings,
};
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;

/// Records (or commands) per criterion iteration.
const BATCH: u64 = 4_096;
/// The run's default ring sizes (`RingSizes::default()`): 4096 issue slots, a 4 MiB record ring.
const SIZES: RingSizes = RingSizes { issue_slots: 4_096, record_bytes: 4 << 20 };
/// How long the parent sleeps on a doorbell before it checks that the child still lives.
const CHILD_CHECK: Duration = Duration::from_millis(200);

/// The worker's core and the coordinator's: the last two cores, or none when there is one.
fn cores() -> Option<(usize, usize)> {
    let ids: Vec<usize> =
        core_affinity::get_core_ids().unwrap_or_default().into_iter().map(|c| c.id).collect();
    (ids.len() >= 2).then(|| (ids[ids.len() - 1], ids[ids.len() - 2]))
}

/// Pins this process to `core` for the life of the guard, then restores its mask.
struct Pinned(Option<CpuSet>);

impl Pinned {
    fn to(core: Option<usize>) -> Pinned {
        let Some(core) = core else { return Pinned(None) };
        let saved = sched_getaffinity(Pid::from_raw(0)).ok();
        let mut set = CpuSet::new();
        if set.set(core).is_err() || sched_setaffinity(Pid::from_raw(0), &set).is_err() {
            return Pinned(None);
        }
        Pinned(saved)
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(set) = &self.0 {
            let _ = sched_setaffinity(Pid::from_raw(0), set);
        }
    }
}

/// Waits for a forked child and asserts it exited with 0.
fn reap(pid: Pid) {
    match waitpid(pid, None) {
        Ok(WaitStatus::Exited(_, 0)) => {}
        other => panic!("bench child ended badly: {other:?}"),
    }
}

/// Sleeps on `bell` from `epoch`, panicking if the child died meanwhile.
fn wait_or_check(bell: &Doorbell, epoch: u32, pid: Pid) {
    bell.wait(epoch, CHILD_CHECK);
    if bell.epoch() == epoch {
        if let Some(end) = try_reap(pid) {
            panic!("bench child {end} before the end of its batch");
        }
    }
}

/// What the parent saw of one frame.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    Ready,
    Record(u64),
    Done,
    Other,
}

fn seen(event: WorkerEvent<'_>) -> Seen {
    match event {
        WorkerEvent::Ready { .. } => Seen::Ready,
        WorkerEvent::Record(v) => Seen::Record(v.header.sample_id),
        WorkerEvent::Done => Seen::Done,
        _ => Seen::Other,
    }
}

/// Pops the next frame the aggregator's way: read the epoch, try, sleep on the doorbell.
fn next_frame(consumer: &mut RecordConsumer, bell: &Doorbell, pid: Pid) -> Seen {
    loop {
        let epoch = bell.epoch();
        if let Some(s) = consumer.pop(seen) {
            return s;
        }
        wait_or_check(bell, epoch, pid);
    }
}

/// The child's record side: announce, wait for the go command, push `n` records, then done.
fn produce_records(
    mut issue: IssueConsumer,
    mut producer: RecordProducer,
    n: u64,
    output: &[u8],
) -> i32 {
    if !producer.push_ready(1) {
        return 2;
    }
    match issue.pop_blocking(Duration::from_secs(30)) {
        Some(IssueCmd::Issue { .. }) => {}
        _ => return 3,
    }
    for id in 0..n {
        if !producer.push_record(&header(id), output, &[]) {
            return 4;
        }
    }
    if producer.push_done() {
        0
    } else {
        5
    }
}

/// A forked worker pinned to its core, with this process pinned to the coordinator's until it
/// is dropped; the worker's ready frame has been seen.
struct Forked {
    records_ready: Doorbell,
    issue_space: Doorbell,
    issue: IssueProducer,
    consumer: RecordConsumer,
    pid: Pid,
    _pin: Pinned,
}

/// Forks a worker that runs `child` on its ends of a fresh pair of rings.
fn fork_worker(child: impl FnOnce(IssueConsumer, RecordProducer) -> i32) -> Forked {
    let records_ready = Doorbell::create().expect("doorbell");
    let issue_space = Doorbell::create().expect("doorbell");
    let rings = WorkerRings::create_with(0, SIZES, &records_ready, &issue_space).expect("rings");
    let (worker_core, coordinator_core) = cores().unzip();
    let pid = fork_child(|| {
        if let Some(id) = worker_core {
            core_affinity::set_for_current(core_affinity::CoreId { id });
        }
        let (issue, producer) = rings.worker_ends();
        child(issue, producer)
    })
    .expect("fork");
    let _pin = Pinned::to(coordinator_core);
    let (issue, mut consumer) = rings.coordinator_ends();
    assert_eq!(next_frame(&mut consumer, &records_ready, pid), Seen::Ready);
    Forked { records_ready, issue_space, issue, consumer, pid, _pin }
}

/// `n` records from a forked producer to this process, timed from the go command to the
/// producer's done frame.
fn records_across(n: u64, output_len: usize) -> Duration {
    let mut w =
        fork_worker(|issue, producer| produce_records(issue, producer, n, &vec![b'x'; output_len]));
    let start = Instant::now();
    assert!(w.issue.try_push(IssueCmd::Issue { sample_id: 0, row: 0, issued_ns: 0 }));
    let mut expected = 0u64;
    loop {
        match next_frame(&mut w.consumer, &w.records_ready, w.pid) {
            Seen::Record(id) => {
                assert_eq!(id, expected, "records arrive in push order");
                expected += 1;
            }
            Seen::Done => break,
            other => panic!("unexpected frame {other:?}"),
        }
    }
    let elapsed = start.elapsed();
    assert_eq!(expected, n);
    reap(w.pid);
    elapsed
}

/// The child's issue side: announce, pop commands until `Stop`, exit 0 when it saw `n`.
fn consume_commands(mut issue: IssueConsumer, mut producer: RecordProducer, n: u64) -> i32 {
    if !producer.push_ready(1) {
        return 2;
    }
    let mut expected = 0u64;
    loop {
        match issue.pop_blocking(Duration::from_secs(30)) {
            Some(IssueCmd::Issue { sample_id, .. }) if sample_id == expected => expected += 1,
            Some(IssueCmd::Stop) => break,
            _ => return 3,
        }
    }
    if expected == n && producer.push_done() {
        0
    } else {
        4
    }
}

/// `n` issue commands from this process to a forked worker that pops them (sleeping on its wake
/// socket when the ring runs dry), timed from the first push to the worker's done frame.
fn commands_across(n: u64) -> Duration {
    let mut w = fork_worker(|issue, producer| consume_commands(issue, producer, n));
    let start = Instant::now();
    for sample_id in 0..n {
        let cmd = IssueCmd::Issue { sample_id, row: 0, issued_ns: 0 };
        push_or_wait(&mut w.issue, &w.issue_space, cmd, w.pid);
    }
    push_or_wait(&mut w.issue, &w.issue_space, IssueCmd::Stop, w.pid);
    assert_eq!(next_frame(&mut w.consumer, &w.records_ready, w.pid), Seen::Done);
    let elapsed = start.elapsed();
    reap(w.pid);
    elapsed
}

/// The scheduler's push: on a full ring, sleep on the issue-space doorbell.
fn push_or_wait(issue: &mut IssueProducer, space: &Doorbell, cmd: IssueCmd, pid: Pid) {
    loop {
        let epoch = space.epoch();
        if issue.try_push(cmd) {
            return;
        }
        wait_or_check(space, epoch, pid);
    }
}

/// Record encode + push in a forked worker, pop + validate here.
fn record_ring_across_processes(c: &mut Criterion) {
    let mut group = c.benchmark_group("record_ring_xproc");
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(20);
    for output_len in [0usize, 160, 1_000] {
        group.bench_function(BenchmarkId::new("output_bytes", output_len), |b| {
            b.iter_custom(|iters| records_across(iters * BATCH, output_len))
        });
    }
    group.finish();
}

/// Issue command push here, pop in a forked worker.
fn issue_ring_across_processes(c: &mut Criterion) {
    let mut group = c.benchmark_group("issue_ring_xproc");
    group.throughput(Throughput::Elements(BATCH));
    group.sample_size(20);
    group.bench_function("commands", |b| b.iter_custom(|iters| commands_across(iters * BATCH)));
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = record_ring_across_processes, issue_ring_across_processes
}
criterion_main!(benches);
