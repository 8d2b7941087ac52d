//! The formatter threads of `events.jsonl`: each turns whole batches of events into JSON lines,
//! several batches at once, and the lines reach the file in batch order.
//!
//! Batches go out over one FIFO channel and each thread takes its next batch only after it wrote
//! the last one, so the batches the threads hold are always the oldest not yet written: the
//! thread holding the next one to write never waits, and no batch can be written out of turn.

use std::fs::File;
use std::io::{self, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};

use super::format::{format_batch, Batch, FormatContext};

/// The file and whose turn it is to write to it.
struct Turn {
    next_seq: u64,
    file: File,
    error: Option<io::Error>,
}

type SharedTurn = Arc<(Mutex<Turn>, Condvar)>;

/// Batches that may wait for a formatter thread before the aggregator waits too, per thread.
pub const QUEUED_BATCHES_PER_FORMATTER: usize = 16;

/// The formatter threads and the channels to them.
pub struct Formatters {
    batches: Option<Sender<(u64, Batch)>>,
    /// Emptied batches coming back, so the aggregator allocates none per batch.
    spare: Receiver<Batch>,
    threads: Vec<JoinHandle<()>>,
    turn: SharedTurn,
    next_seq: u64,
}

impl Formatters {
    /// Starts `threads` formatter threads (at least one) writing to `file`, each pinned to one of
    /// `cores` in turn when given.
    pub fn start(
        file: File,
        ctx: FormatContext,
        threads: usize,
        cores: &[usize],
    ) -> io::Result<Formatters> {
        let threads = threads.max(1);
        let (batch_tx, batch_rx) = bounded::<(u64, Batch)>(threads * QUEUED_BATCHES_PER_FORMATTER);
        let (spare_tx, spare_rx) = bounded::<Batch>(threads * QUEUED_BATCHES_PER_FORMATTER);
        let turn: SharedTurn =
            Arc::new((Mutex::new(Turn { next_seq: 0, file, error: None }), Condvar::new()));
        let ctx = Arc::new(ctx);
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads {
            let (batches, spare, turn, ctx) =
                (batch_rx.clone(), spare_tx.clone(), turn.clone(), ctx.clone());
            let core = (!cores.is_empty()).then(|| cores[i % cores.len()]);
            let handle =
                std::thread::Builder::new().name(format!("events-{i}")).spawn(move || {
                    if let Some(core) = core {
                        core_affinity::set_for_current(core_affinity::CoreId { id: core });
                    }
                    format_loop(&batches, &spare, &turn, &ctx);
                    crate::thread_cpu::note(
                        &format!("events-{i}"),
                        crate::thread_cpu::thread_cpu_ns(),
                    );
                })?;
            handles.push(handle);
        }
        Ok(Formatters {
            batches: Some(batch_tx),
            spare: spare_rx,
            threads: handles,
            turn,
            next_seq: 0,
        })
    }

    /// Hands a full batch to the threads (waits while all of them are that far behind) and
    /// returns an empty one to fill next.
    pub fn ship(&mut self, batch: Batch) -> Batch {
        let next = self.spare.try_recv().unwrap_or_default();
        if let Some(batches) = &self.batches {
            // The threads live until `finish`; a send cannot fail before.
            let _ = batches.send((self.next_seq, batch));
            self.next_seq += 1;
        }
        next
    }

    /// Waits for every batch to be written; a handle on the file, to sync, unless a write failed
    /// (the first write error).
    pub fn join(&mut self) -> io::Result<File> {
        self.batches.take();
        let mut panicked = false;
        for handle in self.threads.drain(..) {
            panicked |= handle.join().is_err();
        }
        if panicked {
            return Err(io::Error::other("an events formatter thread panicked"));
        }
        let mut turn = self.turn.0.lock().unwrap_or_else(|e| e.into_inner());
        match turn.error.take() {
            Some(e) => Err(e),
            None => turn.file.try_clone(),
        }
    }
}

fn format_loop(
    batches: &Receiver<(u64, Batch)>,
    spare: &Sender<Batch>,
    turn: &SharedTurn,
    ctx: &FormatContext,
) {
    let mut lines = Vec::new();
    for (seq, mut batch) in batches {
        lines.clear();
        format_batch(&batch, ctx, &mut lines);
        batch.clear();
        let _ = spare.try_send(batch);
        let (lock, turn_changed) = &**turn;
        let mut t = lock.lock().unwrap_or_else(|e| e.into_inner());
        while t.next_seq != seq {
            t = turn_changed.wait(t).unwrap_or_else(|e| e.into_inner());
        }
        if t.error.is_none() {
            if let Err(e) = t.file.write_all(&lines) {
                t.error = Some(e);
            }
        }
        t.next_seq += 1;
        turn_changed.notify_all();
    }
}
