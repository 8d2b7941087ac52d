//! The wire between the coordinator and its workers: record and command vocabulary, and the
//! shared-memory rings (plus doorbells) that carry them across fork.

mod cmd;
mod doorbell;
mod inflight;
mod record;
mod ring;
mod shm;

pub use cmd::{IssueCmd, WorkerEvent};
pub use doorbell::Doorbell;
pub use inflight::InFlightTable;
pub use record::{FailureKind, FinishReason, RecordHeader, RecordView, RECORD_HEADER_BYTES};
pub use ring::{IssueConsumer, IssueProducer, RecordConsumer, RecordProducer};
pub use shm::{RingSizes, WorkerRings};

#[cfg(test)]
mod tests;
