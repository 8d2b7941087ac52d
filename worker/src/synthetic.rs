//! The null endpoint: a worker that opens no connection and answers every sample itself, with
//! a complete response of realistic size, so a run measures the coordinator's pipeline alone.

use std::time::Duration;

use loadgen_wire::{
    monotonic_ns, FailureKind, FinishReason, IssueCmd, IssueConsumer, RecordHeader, RecordProducer,
};

use crate::exit::{EXIT_COORDINATOR_GONE, EXIT_OK};

/// The response every sample of a null-endpoint run gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntheticResponse {
    /// The output text, as a server would have streamed it.
    pub output: Vec<u8>,
    /// Bytes of `output` in the first chunk (streaming runs; 0 = not streamed).
    pub first_chunk_len: u32,
    /// The server's usage counts.
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
}

/// How long the worker sleeps on its wake socket before it checks that the coordinator lives.
const IDLE_POLL: Duration = Duration::from_millis(50);

impl SyntheticResponse {
    /// The embedded max-throughput stub's default answer in size and counts (160 bytes, 10 prompt
    /// tokens, one token a character), as English-like text so a client tokenizer does the work
    /// it would do on a real output.
    pub fn stub_like(streaming: bool) -> SyntheticResponse {
        const WORDS: &str = "the quick brown fox jumps over the lazy dog while a model streams \
                             its answer token by token to a client that never waits for it ";
        let output: Vec<u8> = WORDS.bytes().cycle().take(160).collect();
        SyntheticResponse {
            completion_tokens: Some(output.len() as u32),
            first_chunk_len: if streaming { 10 } else { 0 },
            prompt_tokens: Some(10),
            output,
        }
    }

    /// The record of one answered sample, stamped `now_ns` (and issued then too when the
    /// coordinator left the issue stamp to the worker, as closed-loop patterns do).
    pub fn header(
        &self,
        worker_id: u16,
        cmd_issued_ns: u64,
        sample_id: u64,
        row: u32,
        now_ns: u64,
    ) -> RecordHeader {
        let issued_ns = if cmd_issued_ns == 0 { now_ns } else { cmd_issued_ns.min(now_ns) };
        RecordHeader {
            sample_id,
            issued_ns,
            first_chunk_ns: if self.first_chunk_len > 0 { now_ns } else { 0 },
            complete_ns: now_ns,
            // Answered as soon as popped: its wait is the time the command sat in the ring.
            sent_ns: now_ns,
            row,
            first_chunk_len: self.first_chunk_len,
            reasoning_len: 0,
            tool_calls_len: 0,
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
            http_status: 200,
            worker_id,
            failure: FailureKind::None as u8,
            finish: FinishReason::Stop as u8,
            resent: 0,
            endpoint: 0,
        }
    }
}

/// The null endpoint's worker body (worker `worker_id`, reporting `connections` slots ready):
/// answers every issue command at once with `response` until Stop or Abort, then reports
/// done. No runtime, no socket.
pub fn run_synthetic(
    worker_id: u16,
    connections: u32,
    response: &SyntheticResponse,
    issue: &mut IssueConsumer,
    records: &mut RecordProducer,
) -> i32 {
    if !records.push_ready(connections) {
        return EXIT_COORDINATOR_GONE;
    }
    let parent = nix::unistd::getppid();
    records.defer_doorbell(true);
    loop {
        if issue.abort_requested() {
            break;
        }
        let cmd = match issue.try_pop() {
            Some(cmd) => cmd,
            None => {
                // One doorbell per batch: the aggregator wakes once for what this burst pushed.
                records.flush_doorbell();
                match issue.pop_blocking(IDLE_POLL) {
                    Some(cmd) => cmd,
                    None if nix::unistd::getppid() != parent => return EXIT_COORDINATOR_GONE,
                    None => continue,
                }
            }
        };
        match cmd {
            IssueCmd::Issue { sample_id, row, issued_ns } => {
                let now_ns = monotonic_ns();
                let header = response.header(worker_id, issued_ns, sample_id, row, now_ns);
                if !records.push_record(&header, &response.output, &[]) {
                    return EXIT_COORDINATOR_GONE;
                }
            }
            // Every turn of a conversation answered at once, in order, as a real worker runs
            // them (each after the one before it succeeded, which here they all do).
            IssueCmd::Conversation { first_sample_id, first_row, turns } => {
                for k in 0..turns {
                    let (sample_id, row) = (first_sample_id + u64::from(k), first_row + k);
                    let header = response.header(worker_id, 0, sample_id, row, monotonic_ns());
                    if !records.push_record(&header, &response.output, &[]) {
                        return EXIT_COORDINATOR_GONE;
                    }
                }
            }
            IssueCmd::Stop | IssueCmd::Abort => break,
        }
    }
    records.defer_doorbell(false);
    if !records.push_done() {
        return EXIT_COORDINATOR_GONE;
    }
    EXIT_OK
}
