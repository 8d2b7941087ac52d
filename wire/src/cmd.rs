//! Commands from the coordinator's scheduler to a worker, and the worker's events back.

use super::record::RecordView;

/// One command in a worker's issue ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IssueCmd {
    /// Send the request of dataset row `row` as sample `sample_id`; `issued_ns` was stamped by the
    /// scheduler when it handed the sample over, or is 0 when the worker stamps it as it writes
    /// the request (closed-loop patterns, where a sample is issued when a slot frees).
    Issue { sample_id: u64, row: u32, issued_ns: u64 },
    /// Run one conversation of an agentic run: `turns` samples, turn k being dataset row
    /// `first_row + k` sent as sample `first_sample_id + k`, each issued by the worker as soon
    /// as the turn before it completed (after its tool delay), on the same connection slot.
    /// A turn that fails ends the conversation: its later turns are reported as
    /// `FailureKind::TurnAborted`, never sent.
    Conversation { first_sample_id: u64, first_row: u32, turns: u32 },
    /// Finish what is in flight, then send `Done` and exit.
    Stop,
    /// Drop what is in flight (reported as `Cancelled`), send `Done`, exit.
    Abort,
}

const TAG_ISSUE: u64 = 1;
const TAG_STOP: u64 = 2;
const TAG_ABORT: u64 = 3;
const TAG_CONVERSATION: u64 = 4;

impl IssueCmd {
    /// The slot form: four little words (tag + row, sample id, issued ns, spare).
    pub(crate) fn encode(self) -> [u64; 4] {
        match self {
            IssueCmd::Issue { sample_id, row, issued_ns } => {
                [TAG_ISSUE | (u64::from(row) << 32), sample_id, issued_ns, 0]
            }
            IssueCmd::Conversation { first_sample_id, first_row, turns } => [
                TAG_CONVERSATION | (u64::from(first_row) << 32),
                first_sample_id,
                0,
                u64::from(turns),
            ],
            IssueCmd::Stop => [TAG_STOP, 0, 0, 0],
            IssueCmd::Abort => [TAG_ABORT, 0, 0, 0],
        }
    }

    /// Reads a slot; an unknown tag (a bug on the other side) reads as `Abort`.
    pub(crate) fn decode(slot: [u64; 4]) -> IssueCmd {
        match slot[0] & 0xffff_ffff {
            TAG_ISSUE => IssueCmd::Issue {
                sample_id: slot[1],
                row: (slot[0] >> 32) as u32,
                issued_ns: slot[2],
            },
            TAG_CONVERSATION => IssueCmd::Conversation {
                first_sample_id: slot[1],
                first_row: (slot[0] >> 32) as u32,
                turns: slot[3] as u32,
            },
            TAG_STOP => IssueCmd::Stop,
            _ => IssueCmd::Abort,
        }
    }
}

/// One frame a worker sends to the aggregator.
#[derive(Clone, Copy, Debug)]
pub enum WorkerEvent<'a> {
    /// The worker's connections are open; the clock may start.
    Ready { connections_open: u32 },
    /// The worker could not start (no connection could be opened, no runtime); it exits next.
    SetupFailed { message: &'a str },
    /// A closed-loop sample the worker issued: stamped as its request was written. It lets the
    /// event log write `sample.issued` when the sample is issued, not when it completes.
    Issued { sample_id: u64, row: u32, issued_ns: u64 },
    /// A streamed sample's first content chunk, as it arrived (`sample.recv_first`).
    FirstChunk { sample_id: u64, first_chunk_ns: u64 },
    /// One completed (or failed) sample.
    Record(RecordView<'a>),
    /// Something the user should know, sent at most a few times per worker.
    Warning { message: &'a str },
    /// The worker has sent its last record and is exiting.
    Done,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_roundtrip() {
        let cmds = [
            IssueCmd::Issue { sample_id: 0, row: 0, issued_ns: 0 },
            IssueCmd::Issue { sample_id: u64::MAX, row: u32::MAX, issued_ns: u64::MAX },
            IssueCmd::Conversation { first_sample_id: 7, first_row: 3, turns: 12 },
            IssueCmd::Conversation {
                first_sample_id: u64::MAX,
                first_row: u32::MAX,
                turns: u32::MAX,
            },
            IssueCmd::Stop,
            IssueCmd::Abort,
        ];
        for cmd in cmds {
            assert_eq!(IssueCmd::decode(cmd.encode()), cmd);
        }
    }
}
