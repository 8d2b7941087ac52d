//! loadgen-wire: the wire between the coordinator and its workers: record and command
//! vocabulary, and the shared-memory rings (plus doorbells) that carry them across fork.
//!
//! Modules depend on each other without a cycle: `sync` (atomics, std or loom; the `Wake`/`Futex`
//! traits) and `region` (the memory) at the bottom; `ring` (the protocol, pure logic over atomics)
//! and `doorbell` above them; `sys` (the system calls); `endpoint` (the public ends: protocol plus
//! system calls); `shm` (`WorkerRings`, which makes all of it before fork) on top. `clock`
//! (the one clock) and `role` (`WorkerRole`, what the coordinator needs of a worker's spec)
//! stand beside them.

mod chunks;
mod clock;
mod cmd;
mod doorbell;
mod endpoint;
mod inflight;
mod record;
mod region;
mod ring;
mod role;
mod shm;
mod sync;
mod sys;

pub use chunks::{cut_chunk_timing, ChunkTimes, ChunkTiming, CHUNK_COUNTS_BYTES};
pub use clock::monotonic_ns;
pub use cmd::{IssueCmd, WorkerEvent};
pub use doorbell::Doorbell;
pub use endpoint::{IssueConsumer, IssueProducer, RecordConsumer, RecordProducer};
pub use inflight::InFlightTable;
pub use record::{
    FailureKind, FinishReason, RecordHeader, RecordView, MAX_ENDPOINTS, NO_ENDPOINT,
    RECORD_HEADER_BYTES,
};
pub use ring::RingSizes;
pub use role::WorkerRole;
pub use shm::WorkerRings;

#[cfg(all(test, loom))]
mod loom_tests;
#[cfg(all(test, not(loom)))]
mod tests;
