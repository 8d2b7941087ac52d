//! One worker's rings as made before fork: a memfd mapping holding its issue and record rings,
//! the socket pair that wakes the worker, and the doorbells the coordinator's threads sleep on.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use super::doorbell::Doorbell;
use super::endpoint::{IssueConsumer, IssueProducer, RecordConsumer, RecordProducer};
use super::region::{Region, SharedMapping};
use super::ring::{RingLayout, RingSizes};
use super::sys::wake_pair;

/// One worker's rings: an issue ring and a record ring in one memfd mapping, plus a socket pair
/// that wakes the worker when it sleeps on an empty issue ring. Created before fork and
/// inherited by the child; the parent takes `coordinator_ends`, the child `worker_ends`.
pub struct WorkerRings {
    worker_id: u16,
    layout: RingLayout,
    mapping: Arc<SharedMapping>,
    records_ready: Doorbell,
    issue_space: Doorbell,
    wake_tx: Arc<OwnedFd>,
    wake_rx: Arc<OwnedFd>,
    creator_pid: u32,
}

impl std::fmt::Debug for WorkerRings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerRings").field("worker_id", &self.worker_id).finish()
    }
}

impl WorkerRings {
    /// Rings whose record side and issue-space side ring the same doorbell. Fine when one
    /// thread both schedules and aggregates; otherwise prefer [`WorkerRings::create_with`].
    pub fn create(
        worker_id: u16,
        sizes: RingSizes,
        doorbell: &Doorbell,
    ) -> io::Result<WorkerRings> {
        WorkerRings::create_with(worker_id, sizes, doorbell, doorbell)
    }

    /// Rings with two doorbells: `records_ready` is rung when a record ring turns non-empty (the
    /// aggregator sleeps on it), `issue_space` when a full issue ring gets a free slot (the
    /// scheduler sleeps on it).
    pub fn create_with(
        worker_id: u16,
        sizes: RingSizes,
        records_ready: &Doorbell,
        issue_space: &Doorbell,
    ) -> io::Result<WorkerRings> {
        let layout = RingLayout::new(sizes);
        let name = format!("loadgen-worker-{worker_id}");
        let mapping = Arc::new(SharedMapping::create(&name, layout.total_bytes())?);
        let (wake_tx, wake_rx) = wake_pair()?;
        Ok(WorkerRings {
            worker_id,
            layout,
            mapping,
            records_ready: records_ready.clone(),
            issue_space: issue_space.clone(),
            wake_tx,
            wake_rx,
            creator_pid: std::process::id(),
        })
    }

    /// The worker these rings belong to.
    pub fn worker_id(&self) -> u16 {
        self.worker_id
    }

    /// The scheduler's issue producer and the aggregator's record consumer (parent, after fork).
    pub fn coordinator_ends(&self) -> (IssueProducer, RecordConsumer) {
        let region: Arc<dyn Region> = self.mapping.clone();
        let issue = IssueProducer::new(region.clone(), self.layout, self.wake_tx.clone());
        let records = RecordConsumer::new(region, self.layout);
        (issue, records)
    }

    /// The worker's issue consumer and record producer (child, after fork).
    pub fn worker_ends(&self) -> (IssueConsumer, RecordProducer) {
        let region: Arc<dyn Region> = self.mapping.clone();
        let issue = IssueConsumer::new(
            region.clone(),
            self.layout,
            self.wake_rx.clone(),
            self.issue_space.clone(),
        );
        // Outside the creating process a dead parent means nobody will ever drain the ring.
        let parent = (std::process::id() != self.creator_pid).then_some(self.creator_pid);
        let records = RecordProducer::new(region, self.layout, self.records_ready.clone(), parent);
        (issue, records)
    }
}
