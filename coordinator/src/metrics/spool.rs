//! The aggregator's sample rows as they arrive, handed over in completion order, in bounded
//! memory: past the spill's budget each run of rows is sorted by completion (stably) and
//! written to a file, and the end merges the runs (earlier runs first on equal stamps). The
//! order is exactly a stable sort of the arrival order by `complete_ns`, as the in-memory path
//! gives it, which is the order of events.jsonl's `sample.complete` lines.
//!
//! A run with a client tokenizer gets its token counts after its rows, maybe after a row went to
//! a file: its rows carry their arrival index, so that `(complete_ns, arrival index)` names
//! each row and is its sort key (the same stable order). A count for a row still in memory
//! changes it in place; one for a row in a file becomes a patch in a second spool under the
//! same key, and the drain joins the two sorted streams, so the rows handed over are the ones
//! patched in place would be.

use std::sync::Arc;

use crossbeam_channel::{bounded, Receiver, Sender};

use super::column::Spill;
use super::sort_spool::{run_records, SortSpool};
use super::table::{FinishKind, SampleRow};

/// A row with the sample it belongs to: its id and dataset row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SpooledRow {
    pub row: SampleRow,
    pub sample_id: u64,
    pub dataset_row: u32,
}

/// A row's client-basis token counts, which come after it: the output's token count (`None`:
/// not counted, a tokenizer error) and the tokens after its first chunk (TPOT's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientTokens {
    pub osl: Option<u32>,
    pub tpot_tokens: Option<u32>,
}

impl ClientTokens {
    /// Sets the row's client counts: its OSL when counted, its TPOT tokens always.
    pub fn apply(self, row: &mut SampleRow) {
        if let Some(n) = self.osl {
            row.osl_client = Some(n);
        }
        row.tpot_tokens_client = self.tpot_tokens;
    }
}

const ROW_BYTES: usize = 8 * 5 + 4 * 8 + 4;
/// A row with its arrival index after it (a spool whose rows get counts later).
const INDEXED_ROW_BYTES: usize = ROW_BYTES + 8;
/// A patch: the row's key (complete_ns, arrival index), its OSL and its TPOT tokens.
const PATCH_BYTES: usize = 8 + 8 + 4 + 4;
/// Patches handed from the patch spool's drain to the row drain at once.
const PATCH_BLOCK: usize = 4096;
const NONE_U64: u64 = u64::MAX;
const NONE_U32: u32 = u32::MAX;

/// Rows in arrival order, handed over in completion order (a `SortSpool` of encoded rows keyed
/// by `complete_ns`, and by the arrival index too when rows carry it).
#[derive(Debug)]
pub struct RowSpool {
    rows: SortSpool,
    /// Whether rows carry their arrival index (and so may be patched after they went to a file).
    indexed: bool,
    /// Rows pushed so far: the next row's arrival index.
    pushed: u64,
    /// Arrival index of the first row in memory: the ones before it are in the file's runs.
    first_in_memory: u64,
    /// Counts for rows already in the file, keyed as the rows (made on the first).
    patches: Option<SortSpool>,
}

fn completion_key(b: &[u8]) -> (u64, u64) {
    (u64::from_le_bytes(b[16..24].try_into().unwrap_or_default()), 0)
}

/// An indexed row's key, and a patch's: `(complete_ns, arrival index)`.
fn indexed_key(b: &[u8]) -> (u64, u64) {
    let index = u64::from_le_bytes(b[ROW_BYTES..INDEXED_ROW_BYTES].try_into().unwrap_or_default());
    (completion_key(b).0, index)
}

fn patch_key(b: &[u8]) -> (u64, u64) {
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    (word(0), word(8))
}

impl RowSpool {
    /// A spool that writes runs of rows into `spill` once its budget is spent (never without a
    /// spill), with room for `capacity` rows in memory.
    pub fn new(spill: Option<Arc<Spill>>, capacity: usize) -> RowSpool {
        RowSpool::with_patches(spill, capacity, false)
    }

    /// The same, and when `patchable` the rows get client token counts after they arrive
    /// (`set_client_tokens`), so they carry their arrival index.
    pub fn with_patches(spill: Option<Arc<Spill>>, capacity: usize, patchable: bool) -> RowSpool {
        let (bytes, key): (usize, super::sort_spool::KeyFn) =
            if patchable { (INDEXED_ROW_BYTES, indexed_key) } else { (ROW_BYTES, completion_key) };
        let run = run_records(spill.as_deref(), bytes);
        RowSpool {
            rows: SortSpool::new(("rows", bytes, key), spill, run, capacity),
            indexed: patchable,
            pushed: 0,
            first_in_memory: 0,
            patches: None,
        }
    }

    /// Appends a row; returns its arrival index (what `set_client_tokens` names it by).
    pub fn push(&mut self, row: SpooledRow) -> u64 {
        let index = self.pushed;
        let mut packed = [0u8; INDEXED_ROW_BYTES];
        let (head, tail) = packed.split_at_mut(ROW_BYTES);
        if let Ok(head) = <&mut [u8; ROW_BYTES]>::try_from(head) {
            encode(&row, head);
        }
        tail.copy_from_slice(&index.to_le_bytes());
        let bytes = if self.indexed { &packed[..] } else { &packed[..ROW_BYTES] };
        let slot = self.rows.push(bytes);
        // The slot counts from the first row in memory, which a run just written moves on.
        self.first_in_memory = index - slot as u64;
        self.pushed += 1;
        index
    }

    /// Sets the client counts of the row that arrived `index`-th and completed at
    /// `complete_ns`: in place while it is in memory, as a patch the drain applies once it is
    /// in the file. False when no such row can be patched (a bad index, or a row in the file
    /// of a spool that is not patchable).
    pub fn set_client_tokens(
        &mut self,
        index: u64,
        complete_ns: u64,
        tokens: ClientTokens,
    ) -> bool {
        if index >= self.pushed {
            return false;
        }
        if index >= self.first_in_memory {
            return self.patch_in_memory(index, complete_ns, tokens);
        }
        if !self.indexed {
            return false;
        }
        let patches = self.patches.get_or_insert_with(|| {
            let spill = self.rows.spill().cloned();
            let run = run_records(spill.as_deref(), PATCH_BYTES);
            SortSpool::new(("token_patches", PATCH_BYTES, patch_key), spill, run, 0)
        });
        patches.push(&patch_bytes(complete_ns, index, tokens));
        true
    }

    fn patch_in_memory(&mut self, index: u64, complete_ns: u64, tokens: ClientTokens) -> bool {
        let slot = (index - self.first_in_memory) as usize;
        let indexed = self.indexed;
        let Some(bytes) = self.rows.record_mut(slot) else { return false };
        if indexed && indexed_key(bytes) != (complete_ns, index) {
            return false;
        }
        let Ok(packed) = <&mut [u8; ROW_BYTES]>::try_from(&mut bytes[..ROW_BYTES]) else {
            return false;
        };
        let mut row = decode(packed);
        tokens.apply(&mut row.row);
        encode(&row, packed);
        true
    }

    /// The spill its runs go to, if any.
    pub fn spill(&self) -> Option<&Arc<Spill>> {
        self.rows.spill()
    }

    /// Rows held, in memory and in the file.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// True without rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Hands every row to `f` in completion order (a stable sort of the arrival order by
    /// `complete_ns`), with the patches of the rows that went to the file applied. A failed
    /// read stops the walk and is noted in the spill.
    pub fn drain_in_completion_order(self, mut f: impl FnMut(SpooledRow)) {
        let RowSpool { rows, patches, .. } = self;
        let row_of = |b: &[u8]| <&[u8; ROW_BYTES]>::try_from(&b[..ROW_BYTES]).ok().map(decode);
        let Some(patches) = patches else {
            rows.drain_sorted(|b| row_of(b).into_iter().for_each(&mut f));
            return;
        };
        // The patches stream from a thread of their own, a block at a time, so both sorted
        // streams are read in bounded memory and joined here.
        std::thread::scope(|scope| {
            let (tx, rx) = bounded::<Vec<(u64, u64, ClientTokens)>>(4);
            let sender = std::thread::Builder::new()
                .name("row-patches".into())
                .spawn_scoped(scope, move || send_patches(patches, &tx));
            if let Err(e) = sender {
                if let Some(spill) = rows.spill() {
                    spill.note_read_error(format!("cannot start the row patches' reader: {e}"));
                }
            }
            let mut join = PatchJoin { rx, block: Vec::new(), at: 0 };
            rows.drain_sorted(|b| {
                if let Some(mut row) = row_of(b) {
                    if let Some(tokens) = join.take(indexed_key(b)) {
                        tokens.apply(&mut row.row);
                    }
                    f(row);
                }
            });
            // Dropping the receiver ends a reader that still has patches to send.
            drop(join);
        });
    }
}

/// Drains the patch spool in key order into `tx`, a block at a time, until the joiner stops.
fn send_patches(patches: SortSpool, tx: &Sender<Vec<(u64, u64, ClientTokens)>>) {
    let mut block = Vec::with_capacity(PATCH_BLOCK);
    let mut open = true;
    patches.drain_sorted(|b| {
        if !open {
            return;
        }
        block.push(patch_of(b));
        if block.len() == PATCH_BLOCK {
            open = tx.send(std::mem::replace(&mut block, Vec::with_capacity(PATCH_BLOCK))).is_ok();
        }
    });
    if open && !block.is_empty() {
        let _ = tx.send(block);
    }
}

/// The patch stream's read side: the block being read and its position.
struct PatchJoin {
    rx: Receiver<Vec<(u64, u64, ClientTokens)>>,
    block: Vec<(u64, u64, ClientTokens)>,
    at: usize,
}

impl PatchJoin {
    /// The patch of the row keyed `key`, if any. Rows come in key order, and so do patches:
    /// the ones before `key` have no row (none is expected) and are passed over.
    fn take(&mut self, key: (u64, u64)) -> Option<ClientTokens> {
        loop {
            if self.at == self.block.len() {
                self.block = self.rx.recv().ok()?;
                self.at = 0;
                continue;
            }
            let (complete_ns, index, tokens) = self.block[self.at];
            match (complete_ns, index).cmp(&key) {
                std::cmp::Ordering::Greater => return None,
                std::cmp::Ordering::Equal => {
                    self.at += 1;
                    return Some(tokens);
                }
                std::cmp::Ordering::Less => {
                    debug_assert!(false, "a patch without its row: {:?}", (complete_ns, index));
                    self.at += 1;
                }
            }
        }
    }
}

fn patch_bytes(complete_ns: u64, index: u64, tokens: ClientTokens) -> [u8; PATCH_BYTES] {
    let mut b = [0u8; PATCH_BYTES];
    b[..8].copy_from_slice(&complete_ns.to_le_bytes());
    b[8..16].copy_from_slice(&index.to_le_bytes());
    b[16..20].copy_from_slice(&tokens.osl.unwrap_or(NONE_U32).to_le_bytes());
    b[20..24].copy_from_slice(&tokens.tpot_tokens.unwrap_or(NONE_U32).to_le_bytes());
    b
}

fn patch_of(b: &[u8]) -> (u64, u64, ClientTokens) {
    let (complete_ns, index) = patch_key(b);
    let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default());
    let some = |v: u32| (v != NONE_U32).then_some(v);
    (complete_ns, index, ClientTokens { osl: some(word(16)), tpot_tokens: some(word(20)) })
}

fn encode(r: &SpooledRow, out: &mut [u8; ROW_BYTES]) {
    let row = &r.row;
    let u64s = [
        row.issued_ns,
        row.first_chunk_ns.unwrap_or(NONE_U64),
        row.complete_ns,
        row.client_wait_ns.unwrap_or(NONE_U64),
        r.sample_id,
    ];
    let flags = u32::from(row.failed) | u32::from(row.output_empty) << 1;
    let finish = row.finish.map_or(u8::MAX, |k| k as u8);
    let packed = flags
        | u32::from(finish) << 8
        | u32::from(row.failure) << 16
        | u32::from(row.endpoint) << 24;
    let u32s = [
        packed,
        row.isl_client.unwrap_or(NONE_U32),
        row.osl_client.unwrap_or(NONE_U32),
        row.tpot_tokens_client.unwrap_or(NONE_U32),
        row.prompt_tokens.unwrap_or(NONE_U32),
        row.completion_tokens.unwrap_or(NONE_U32),
        row.n_chunks.unwrap_or(NONE_U32),
        row.chunk_reads.unwrap_or(NONE_U32),
        r.dataset_row,
    ];
    for (slot, v) in out.chunks_exact_mut(8).zip(u64s) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
    for (slot, v) in out[40..].chunks_exact_mut(4).zip(u32s) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
}

fn decode(b: &[u8; ROW_BYTES]) -> SpooledRow {
    let u64_at = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    let u32_at =
        |i: usize| u32::from_le_bytes(b[40 + i * 4..44 + i * 4].try_into().unwrap_or_default());
    let some64 = |v: u64| (v != NONE_U64).then_some(v);
    let some32 = |v: u32| (v != NONE_U32).then_some(v);
    let packed = u32_at(0);
    SpooledRow {
        row: SampleRow {
            issued_ns: u64_at(0),
            first_chunk_ns: some64(u64_at(1)),
            complete_ns: u64_at(2),
            client_wait_ns: some64(u64_at(3)),
            failed: packed & 1 != 0,
            output_empty: packed & 2 != 0,
            finish: FinishKind::ALL.get(((packed >> 8) & 0xff) as usize).copied(),
            failure: (packed >> 16) as u8,
            endpoint: (packed >> 24) as u8,
            isl_client: some32(u32_at(1)),
            osl_client: some32(u32_at(2)),
            tpot_tokens_client: some32(u32_at(3)),
            prompt_tokens: some32(u32_at(4)),
            completion_tokens: some32(u32_at(5)),
            n_chunks: some32(u32_at(6)),
            chunk_reads: some32(u32_at(7)),
        },
        sample_id: u64_at(4),
        dataset_row: u32_at(8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(i: u64, complete_ns: u64) -> SpooledRow {
        SpooledRow {
            row: SampleRow {
                issued_ns: i,
                complete_ns,
                first_chunk_ns: (i % 3 == 0).then_some(i + 1),
                finish: FinishKind::ALL.get((i % 7) as usize).copied(),
                failed: i % 5 == 0,
                output_empty: i % 4 == 0,
                failure: (i % 9) as u8,
                endpoint: (i % 2) as u8,
                isl_client: Some(i as u32),
                completion_tokens: (i % 2 == 0).then_some(7),
                n_chunks: Some(3),
                client_wait_ns: Some(i * 2),
                ..SampleRow::default()
            },
            sample_id: i,
            dataset_row: (i * 11) as u32,
        }
    }

    fn rows() -> Vec<SpooledRow> {
        // Stamps out of arrival order, with many ties.
        (0..40_000u64).map(|i| row(i, (i * 7919) % 1_013)).collect()
    }

    fn drained(spool: RowSpool) -> Vec<SpooledRow> {
        let mut out = Vec::new();
        spool.drain_in_completion_order(|r| out.push(r));
        out
    }

    #[test]
    fn a_spilled_spool_gives_the_in_memory_stable_order_exactly() {
        let mut expected = rows();
        expected.sort_by_key(|r| r.row.complete_ns);
        let mut memory = RowSpool::new(None, 0);
        rows().into_iter().for_each(|r| _ = memory.push(r));
        assert_eq!(drained(memory), expected);
        let dir = std::env::temp_dir().join(format!("loadgen-spool-{}", std::process::id()));
        let spill = Spill::new(&dir, 0).unwrap();
        let mut spilled = RowSpool::new(Some(spill.clone()), 0);
        rows().into_iter().for_each(|r| _ = spilled.push(r));
        assert!(
            spilled.rows.runs_written() >= 30,
            "it wrote runs: {}",
            spilled.rows.runs_written()
        );
        assert_eq!(spilled.len(), 40_000);
        assert_eq!(drained(spilled), expected);
        assert_eq!(spill.error(), None);
    }

    /// The counts of a row, out of arrival order: some rows get none, some a tokenizer error.
    fn tokens_of(i: u64) -> Option<ClientTokens> {
        match i % 11 {
            0 => None,
            1 => Some(ClientTokens { osl: None, tpot_tokens: None }),
            k => Some(ClientTokens {
                osl: Some(i as u32 % 997),
                tpot_tokens: (k > 4).then_some(k as u32),
            }),
        }
    }

    /// Pushes `rows()` and sets the counts of row `i` once row `i + lag(i)` has arrived (the
    /// tokenizer's results come late and out of order); the rest at the end.
    fn patched(spill: Option<Arc<Spill>>) -> RowSpool {
        let lag = |i: u64| (i * 7) % 5_000;
        let rows = rows();
        let mut spool = RowSpool::with_patches(spill, 0, true);
        let mut due: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
        let set = |spool: &mut RowSpool, i: u64| {
            let complete_ns = rows[i as usize].row.complete_ns;
            if let Some(t) = tokens_of(i) {
                assert!(spool.set_client_tokens(i, complete_ns, t), "row {i}");
            }
        };
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(spool.push(*r), i as u64);
            due.entry(i as u64 + lag(i as u64)).or_default().push(i as u64);
            for j in due.remove(&(i as u64)).unwrap_or_default() {
                set(&mut spool, j);
            }
        }
        for j in due.into_values().flatten() {
            set(&mut spool, j);
        }
        spool
    }

    #[test]
    fn counts_for_spilled_rows_drain_as_the_in_memory_patches_do() {
        let mut expected = rows();
        for (i, r) in expected.iter_mut().enumerate() {
            if let Some(t) = tokens_of(i as u64) {
                t.apply(&mut r.row);
            }
        }
        expected.sort_by_key(|r| r.row.complete_ns);
        let memory = patched(None);
        assert!(memory.patches.is_none(), "all rows in memory: patched in place");
        assert_eq!(drained(memory), expected);
        let dir = std::env::temp_dir().join(format!("loadgen-patch-{}", std::process::id()));
        let spill = Spill::new(&dir, 0).unwrap();
        let spilled = patched(Some(spill.clone()));
        assert!(spilled.rows.runs_written() >= 30, "runs: {}", spilled.rows.runs_written());
        let patches = spilled.patches.as_ref().map_or(0, |p| p.len());
        assert!(patches > 20_000, "most counts came after their row went to a file: {patches}");
        assert!(spilled.patches.as_ref().is_some_and(|p| p.runs_written() > 1));
        assert_eq!(drained(spilled), expected);
        assert_eq!(spill.error(), None);
    }

    #[test]
    fn a_count_for_no_row_is_refused() {
        let mut spool = RowSpool::with_patches(None, 0, true);
        let tokens = ClientTokens { osl: Some(1), tpot_tokens: None };
        assert!(!spool.set_client_tokens(0, 5, tokens), "no row yet");
        spool.push(row(0, 5));
        assert!(!spool.set_client_tokens(0, 6, tokens), "another completion stamp");
        assert!(spool.set_client_tokens(0, 5, tokens));
    }

    #[test]
    fn rows_round_trip_through_their_bytes() {
        for i in [0, 1, 3, 4, 5, 12, 9_999] {
            let r = row(i, 77);
            let mut bytes = [0u8; ROW_BYTES];
            encode(&r, &mut bytes);
            assert_eq!(decode(&bytes), r, "row {i}");
        }
    }
}
