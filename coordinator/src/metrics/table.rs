//! The per-sample table: one row per tracked sample, stored as struct-of-arrays.
//!
//! The aggregator pushes a [`SampleRow`] once a sample's record and its client
//! tokenization have both arrived; the final snapshot is computed from the table
//! alone. Optional values are stored with a sentinel so a row costs 48 bytes (4 more in an
//! agentic run, whose rows also name their dataset row: `set_dataset_rows`).

/// Why a sample's generation stopped, as the endpoint reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinishKind {
    /// `stop`: a stop sequence or end of text.
    Stop,
    /// `length`: the output-token limit.
    Length,
    /// `tool_calls`.
    ToolCalls,
    /// `content_filter`.
    ContentFilter,
    /// `function_call`.
    FunctionCall,
    /// Any other string.
    Other,
}

impl FinishKind {
    /// Every kind, in the reference's counter order.
    pub const ALL: [FinishKind; 6] = [
        FinishKind::Stop,
        FinishKind::Length,
        FinishKind::ToolCalls,
        FinishKind::ContentFilter,
        FinishKind::FunctionCall,
        FinishKind::Other,
    ];

    /// The reference's name for this kind (`tracked_finish_reason_<name>`).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishKind::Stop => "stop",
            FinishKind::Length => "length",
            FinishKind::ToolCalls => "tool_calls",
            FinishKind::ContentFilter => "content_filter",
            FinishKind::FunctionCall => "function_call",
            FinishKind::Other => "other",
        }
    }

    /// The kind of a worker record's finish reason; `None` when the endpoint gave none.
    pub fn from_wire(reason: loadgen_wire::FinishReason) -> Option<FinishKind> {
        use loadgen_wire::FinishReason as Wire;
        match reason {
            Wire::None => None,
            Wire::Stop => Some(FinishKind::Stop),
            Wire::Length => Some(FinishKind::Length),
            Wire::ToolCalls => Some(FinishKind::ToolCalls),
            Wire::ContentFilter => Some(FinishKind::ContentFilter),
            Wire::FunctionCall => Some(FinishKind::FunctionCall),
            Wire::Other => Some(FinishKind::Other),
        }
    }

    /// Classifies an endpoint's `finish_reason` string; unknown strings are `Other`.
    pub fn from_reason(reason: &str) -> FinishKind {
        match reason {
            "stop" => FinishKind::Stop,
            "length" => FinishKind::Length,
            "tool_calls" => FinishKind::ToolCalls,
            "content_filter" => FinishKind::ContentFilter,
            "function_call" => FinishKind::FunctionCall,
            _ => FinishKind::Other,
        }
    }

    fn to_code(kind: Option<FinishKind>) -> u8 {
        match kind {
            None => FINISH_NONE,
            Some(k) => k as u8,
        }
    }

    fn from_code(code: u8) -> Option<FinishKind> {
        FinishKind::ALL.get(usize::from(code)).copied()
    }
}

use std::sync::Arc;

use super::column::{Column, Plain, Spill, CHUNK_VALUES};

const FINISH_NONE: u8 = u8::MAX;
const NS_NONE: u64 = u64::MAX;
const COUNT_NONE: u32 = u32::MAX;
pub(crate) const FLAG_FAILED: u8 = 1;
pub(crate) const FLAG_OUTPUT_EMPTY: u8 = 2;

/// One tracked sample, as the aggregator knows it after its record and client
/// tokenization arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampleRow {
    /// When the coordinator handed the sample over (CLOCK_MONOTONIC ns).
    pub issued_ns: u64,
    /// When the first content chunk arrived; `None` for non-streaming or failed samples.
    pub first_chunk_ns: Option<u64>,
    /// When the response completed or failed.
    pub complete_ns: u64,
    /// The sample failed (it still counts as completed, and its latency is time to error).
    pub failed: bool,
    /// The endpoint's finish reason, if it sent one.
    pub finish: Option<FinishKind>,
    /// Client tokenizer count of the prompt.
    pub isl_client: Option<u32>,
    /// Client tokenizer count of the whole output; `None` when the output is
    /// empty or there is no tokenizer.
    pub osl_client: Option<u32>,
    /// Client tokenizer count of the text after the first chunk (TPOT denominator).
    pub tpot_tokens_client: Option<u32>,
    /// Server `usage.prompt_tokens`, already range-checked by the worker.
    pub prompt_tokens: Option<u32>,
    /// Server `usage.completion_tokens`, already range-checked by the worker.
    pub completion_tokens: Option<u32>,
    /// The response carried no output text at all.
    pub output_empty: bool,
    /// Why it failed: a `FailureKind` wire value, 0 (`None`) for a success.
    pub failure: u8,
    /// Which of the run's endpoints it went to (the record's endpoint index).
    pub endpoint: u8,
    /// A streamed response's content-bearing SSE events; `None` when it had none (not
    /// streamed, or no content before it ended). Its gaps go to the table's flat
    /// `chunk_delta_ns` series (`SampleTable::extend_chunk_delta_ns`).
    pub n_chunks: Option<u32>,
    /// Socket reads that brought those events (1 with two or more chunks: the server sent the
    /// whole stream at once).
    pub chunk_reads: Option<u32>,
    /// Its wait inside the client between the issue stamp and the request's write (queued for
    /// a free connection or a connect); `None` when the request was never written.
    pub client_wait_ns: Option<u64>,
}

macro_rules! table_columns {
    ($($name:ident: $t:ty),* $(,)?) => {
        /// Struct-of-arrays store of tracked samples: one [`Column`] per field, spilling together
        /// (at the same rows) past the run's memory budget.
        #[derive(Debug)]
        pub struct SampleTable {
            $(pub(crate) $name: Column<$t>,)*
            /// Each row's dataset row, in an agentic run (`set_dataset_rows`); empty otherwise.
            pub(crate) dataset_row: Column<u32>,
            /// Every gap between consecutive chunks of the tracked streamed samples (the
            /// reference's `chunk_delta_ns`: the first chunk of a sample starts no gap); sorted
            /// once the run sets it, when it is in memory.
            pub(crate) chunk_delta_ns: Column<u64>,
            spill: Option<Arc<Spill>>,
        }

        /// A run of consecutive rows of a [`SampleTable`], one slice per column.
        #[derive(Debug, Clone, Copy)]
        pub struct Rows<'a> {
            $(pub $name: &'a [$t],)*
            /// Empty unless the table names each row's dataset row.
            pub dataset_row: &'a [u32],
        }

        #[derive(Default)]
        struct RowsBuf {
            $($name: Vec<$t>,)*
            dataset_row: Vec<u32>,
        }

        impl SampleTable {
            /// An empty table whose columns spill into `spill` past its budget (in memory
            /// without one), with room for `n` rows in memory.
            pub fn new(n: usize, spill: Option<Arc<Spill>>) -> Self {
                // Room for every row when they fit the budget (64 bytes a row), else a chunk.
                let fits = spill.as_ref().is_none_or(|s| (n as u64) * 64 <= s.budget_bytes());
                let n = if fits { n } else { n.min(CHUNK_VALUES) };
                SampleTable {
                    $($name: {
                        let mut c = Column::new(stringify!($name), spill.clone());
                        c.reserve(n);
                        c
                    },)*
                    dataset_row: Column::new("dataset_row", spill.clone()),
                    chunk_delta_ns: Column::new("chunk_delta_ns", spill.clone()),
                    spill,
                }
            }

            fn spill_rows(&mut self) {
                // All or none, so the columns keep the same rows in their files (a column
                // that cannot write keeps its rows in memory: `read_rows` reads it there).
                $(self.$name.count_resident();)*
                self.dataset_row.count_resident();
                if self.spill.as_ref().is_some_and(|s| s.over_budget()) {
                    $(self.$name.force_spill();)*
                    self.dataset_row.force_spill();
                }
            }

            /// The rows after the table's files (its first column's), all in memory.
            fn rows_in_memory(&self) -> Rows<'_> {
                let at = self.on_disk_rows();
                Rows {
                    $($name: self.$name.tail_from(at),)*
                    dataset_row: self.dataset_row.tail_from(at),
                }
            }

            /// Rows in the files: those before the first row every column holds in memory.
            fn on_disk_rows(&self) -> usize {
                0 $(.max(self.$name.on_disk()))*
            }

            fn read_rows(&self, at: usize, n: usize, buf: &mut RowsBuf) -> std::io::Result<()> {
                $(self.$name.read_into(at, n, &mut buf.$name)?;)*
                buf.dataset_row.clear();
                if !self.dataset_row.is_empty() {
                    self.dataset_row.read_into(at, n, &mut buf.dataset_row)?;
                }
                Ok(())
            }
        }

        impl RowsBuf {
            fn rows(&self) -> Rows<'_> {
                Rows { $($name: &self.$name,)* dataset_row: &self.dataset_row }
            }
        }
    };
}

table_columns! {
    issued_ns: u64,
    first_chunk_ns: u64,
    complete_ns: u64,
    flags: u8,
    finish: u8,
    isl_client: u32,
    osl_client: u32,
    tpot_tokens_client: u32,
    prompt_tokens: u32,
    completion_tokens: u32,
    failure: u8,
    endpoint: u8,
    n_chunks: u32,
    chunk_reads: u32,
    client_wait_ns: u64,
}

impl Default for SampleTable {
    fn default() -> Self {
        SampleTable::new(0, None)
    }
}

fn count_or_none(value: Option<u32>) -> u32 {
    // A count of u32::MAX cannot occur (server counts are capped at 10,000,000,
    // client counts by the prompt and output sizes), so it is free as a sentinel.
    value.map_or(COUNT_NONE, |v| v.min(COUNT_NONE - 1))
}

fn some_count(value: u32) -> Option<u32> {
    (value != COUNT_NONE).then_some(value)
}

impl<'a> Rows<'a> {
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.issued_ns.len()
    }

    /// True when it has no rows.
    pub fn is_empty(&self) -> bool {
        self.issued_ns.is_empty()
    }

    /// Row `i` of this run of rows.
    pub fn row(&self, i: usize) -> SampleRow {
        SampleRow {
            issued_ns: self.issued_ns[i],
            first_chunk_ns: (self.first_chunk_ns[i] != NS_NONE).then_some(self.first_chunk_ns[i]),
            complete_ns: self.complete_ns[i],
            failed: self.flags[i] & FLAG_FAILED != 0,
            finish: FinishKind::from_code(self.finish[i]),
            isl_client: some_count(self.isl_client[i]),
            osl_client: some_count(self.osl_client[i]),
            tpot_tokens_client: some_count(self.tpot_tokens_client[i]),
            prompt_tokens: some_count(self.prompt_tokens[i]),
            completion_tokens: some_count(self.completion_tokens[i]),
            output_empty: self.flags[i] & FLAG_OUTPUT_EMPTY != 0,
            failure: self.failure[i],
            endpoint: self.endpoint[i],
            n_chunks: some_count(self.n_chunks[i]),
            chunk_reads: some_count(self.chunk_reads[i]),
            client_wait_ns: (self.client_wait_ns[i] != NS_NONE).then_some(self.client_wait_ns[i]),
        }
    }
}

impl SampleTable {
    /// An empty in-memory table with room for `n` rows.
    pub fn with_capacity(n: usize) -> Self {
        SampleTable::new(n, None)
    }

    /// Appends one row.
    pub fn push(&mut self, row: &SampleRow) {
        self.issued_ns.push(row.issued_ns);
        self.first_chunk_ns.push(row.first_chunk_ns.map_or(NS_NONE, |v| v.min(NS_NONE - 1)));
        self.complete_ns.push(row.complete_ns);
        let mut flags = 0;
        if row.failed {
            flags |= FLAG_FAILED;
        }
        if row.output_empty {
            flags |= FLAG_OUTPUT_EMPTY;
        }
        self.flags.push(flags);
        self.finish.push(FinishKind::to_code(row.finish));
        self.isl_client.push(count_or_none(row.isl_client));
        self.osl_client.push(count_or_none(row.osl_client));
        self.tpot_tokens_client.push(count_or_none(row.tpot_tokens_client));
        self.prompt_tokens.push(count_or_none(row.prompt_tokens));
        self.completion_tokens.push(count_or_none(row.completion_tokens));
        self.failure.push(row.failure);
        self.endpoint.push(row.endpoint);
        self.n_chunks.push(count_or_none(row.n_chunks));
        self.chunk_reads.push(count_or_none(row.chunk_reads));
        self.client_wait_ns.push(row.client_wait_ns.map_or(NS_NONE, |v| v.min(NS_NONE - 1)));
        if self.spill.is_some() && self.issued_ns.in_memory().len() % CHUNK_VALUES == 0 {
            self.spill_rows();
        }
    }

    /// Appends one row of an agentic run, naming its dataset row (its conversation and turn).
    pub fn push_with_dataset_row(&mut self, row: &SampleRow, dataset_row: u32) {
        // Pushed first: the row's push may spill every column at once.
        self.dataset_row.push(dataset_row);
        self.push(row);
    }

    /// Gives every row its dataset row, in table order (an agentic run's, which name each
    /// row's conversation and turn); `rows` has one entry per row, else it is not kept.
    pub fn set_dataset_rows(&mut self, rows: Vec<u32>) {
        if rows.len() == self.len() && !self.issued_ns.spilled() {
            self.dataset_row = Column::from_vec("dataset_row", rows);
        }
    }

    /// Each row's dataset row, when every row carries one (an agentic run); `None` otherwise.
    pub fn dataset_rows(&self) -> Option<Vec<u32>> {
        let whole = !self.dataset_row.is_empty() && self.dataset_row.len() == self.len();
        whole.then(|| self.dataset_row.to_vec())
    }

    /// Appends gaps between chunks to the `chunk_delta_ns` series (a sample's, after its row;
    /// or a whole run's at once, in record order).
    pub fn extend_chunk_delta_ns(&mut self, gaps_ns: &[u64]) {
        gaps_ns.iter().for_each(|&g| self.chunk_delta_ns.push_spilling(g));
    }

    /// Takes a run's whole `chunk_delta_ns` series, sorting it when it is in memory: only its
    /// statistics are ever read, and sorted the snapshot reads it in place instead of copying it.
    pub fn set_chunk_delta_ns(&mut self, mut gaps_ns: Column<u64>) {
        if let Some(values) = gaps_ns.as_mut_slice() {
            super::series::sort_u64(values);
        }
        self.chunk_delta_ns = gaps_ns;
    }

    /// The gaps between chunks (sorted after `set_chunk_delta_ns` when in memory, else in the
    /// order added).
    pub fn chunk_delta_ns(&self) -> &Column<u64> {
        &self.chunk_delta_ns
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.issued_ns.len()
    }

    /// True when the table has no rows.
    pub fn is_empty(&self) -> bool {
        self.issued_ns.is_empty()
    }

    /// The spill its columns use, if any.
    pub fn spill(&self) -> Option<&Arc<Spill>> {
        self.spill.as_ref()
    }

    /// A column for a series derived from this table, spilling as its columns do, with room for
    /// a value a row when the table is in memory (no growth by copies on the common path).
    pub fn series_column<T: Plain>(&self, name: &'static str) -> Column<T> {
        let mut column = Column::new(name, self.spill.clone());
        if !self.issued_ns.spilled() {
            column.reserve(self.len());
        }
        column
    }

    /// Hands every row to `f` in table order, a run of rows at a time (from the files first,
    /// in chunks, then the rows in memory). A failed read stops the walk and is noted in the
    /// spill (`Spill::error`), which the run reports.
    pub fn for_each_chunk(&self, mut f: impl FnMut(Rows<'_>)) {
        let on_disk = self.on_disk_rows();
        let mut buf = RowsBuf::default();
        let mut at = 0;
        while at < on_disk {
            let n = CHUNK_VALUES.min(on_disk - at);
            if !self.read_rows_noted(at, n, &mut buf) {
                return;
            }
            f(buf.rows());
            at += n;
        }
        let tail = self.rows_in_memory();
        if !tail.is_empty() {
            f(tail);
        }
    }

    /// Hands every row to `f`, in table order.
    pub fn for_each_row(&self, mut f: impl FnMut(SampleRow)) {
        self.for_each_chunk(|rows| (0..rows.len()).for_each(|i| f(rows.row(i))));
    }

    /// Row `i` as pushed (for post-run tools and tests; a spilled row is read from its file).
    pub fn row(&self, i: usize) -> SampleRow {
        let on_disk = self.on_disk_rows();
        if i >= on_disk {
            return self.rows_in_memory().row(i - on_disk);
        }
        let mut buf = RowsBuf::default();
        if self.read_rows_noted(i, 1, &mut buf) {
            buf.rows().row(0)
        } else {
            SampleRow::default()
        }
    }

    /// `read_rows`, a failure noted in the spill (which the run reports); false on one.
    fn read_rows_noted(&self, at: usize, n: usize, buf: &mut RowsBuf) -> bool {
        let read = self.read_rows(at, n, buf);
        if let (Err(e), Some(spill)) = (&read, &self.spill) {
            spill.note_read_error(format!("cannot read the sample table back: {e}"));
        }
        read.is_ok()
    }
}

/// Run-wide counters and clock marks the aggregator keeps beside the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunCounters {
    /// Every sample issued, warm-up included.
    pub total_samples_issued: u64,
    /// Every sample completed (failures count as completed, as the reference).
    pub total_samples_completed: u64,
    /// Every sample failed.
    pub total_samples_failed: u64,
    /// Samples issued while performance tracking was on.
    pub tracked_samples_issued: u64,
    /// Tracked samples completed (failures included).
    pub tracked_samples_completed: u64,
    /// Tracked samples failed.
    pub tracked_samples_failed: u64,
    /// CLOCK_MONOTONIC ns of the session start.
    pub session_start_ns: u64,
    /// CLOCK_MONOTONIC ns when performance tracking started.
    pub tracking_start_ns: u64,
    /// CLOCK_MONOTONIC ns of the last event of the session.
    pub last_event_ns: u64,
    /// CLOCK_MONOTONIC ns of `session.ended`; 0 when unknown (a log that lacks it).
    pub session_end_ns: u64,
    /// Client tokenizer failures (`n_errors`, client basis only).
    pub n_tokenizer_errors: u64,
    /// Client tokenizations still outstanding when the snapshot was taken.
    pub client_token_tasks_pending: u64,
    /// Tracked samples abandoned: issued, never completed (in flight or queued at the cap, the
    /// interrupt or the drain timeout; `n_samples_abandoned`). Tracked issued = tracked
    /// completed + this, exactly (`settle::settle`).
    pub abandoned: u64,
    /// Every sample abandoned, warm-up included: total issued = total completed + this.
    pub total_samples_abandoned: u64,
    /// Requests sent a second time because their reused keep-alive connection closed before
    /// any byte of the response (at most once per sample; `n_requests_resent`), warm-up
    /// included.
    pub requests_resent: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_finish_reasons_map_to_the_same_kinds_as_their_strings() {
        use loadgen_wire::FinishReason;
        for reason in FinishReason::ALL {
            let expected =
                (reason != FinishReason::None).then(|| FinishKind::from_reason(reason.as_str()));
            assert_eq!(FinishKind::from_wire(reason), expected, "{reason:?}");
        }
    }

    #[test]
    fn row_round_trips_through_the_table() {
        let rows = [
            SampleRow {
                issued_ns: 10,
                first_chunk_ns: Some(20),
                complete_ns: 30,
                failed: false,
                finish: Some(FinishKind::Length),
                isl_client: Some(5),
                osl_client: Some(0),
                tpot_tokens_client: Some(4),
                prompt_tokens: Some(6),
                completion_tokens: None,
                output_empty: false,
                failure: 0,
                endpoint: 1,
                n_chunks: Some(7),
                chunk_reads: Some(1),
                client_wait_ns: Some(3),
            },
            SampleRow {
                issued_ns: 1,
                complete_ns: 2,
                failed: true,
                output_empty: true,
                failure: 5,
                ..SampleRow::default()
            },
        ];
        let mut table = SampleTable::with_capacity(2);
        for row in &rows {
            table.push(row);
        }
        assert_eq!(table.len(), 2);
        assert_eq!(table.row(0), rows[0]);
        assert_eq!(table.row(1), rows[1]);
        assert_eq!(table.dataset_rows(), None, "no row named its dataset row");
    }

    #[test]
    fn an_agentic_run_s_rows_keep_their_dataset_rows_in_table_order() {
        let mut table = SampleTable::with_capacity(3);
        for _ in 0..3 {
            table.push(&SampleRow::default());
        }
        table.set_dataset_rows(vec![4, 0]);
        assert_eq!(table.dataset_rows(), None, "one short: not kept");
        table.set_dataset_rows(vec![4, 0, 9]);
        assert_eq!(table.dataset_rows(), Some(vec![4, 0, 9]));
        table.push(&SampleRow::default());
        assert_eq!(table.dataset_rows(), None, "a row without one: no whole column");
    }

    #[test]
    fn finish_reason_strings_classify() {
        for kind in FinishKind::ALL {
            assert_eq!(FinishKind::from_reason(kind.as_str()), kind);
        }
        assert_eq!(FinishKind::from_reason("eos"), FinishKind::Other);
    }
}
