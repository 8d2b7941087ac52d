//! The agentic report: an agentic run's conversations, its turns by outcome and kind, and
//! TTFT, TPOT (both bases) and latency by turn number (the summary's `agentic` object and
//! report.txt's `Agentic` section).
//!
//! Each table row is labelled with its conversation and turn ([`TurnLabel`]): the run labels
//! its rows from their dataset rows through its `ConversationPlan` ([`agentic_of_run`]), a
//! rebuild from the `conversation_id` and `turn` of each sample's lines in events.jsonl (the
//! replay). Then one pure function ([`agentic_summary`]) makes the block from the table both
//! paths hold, each turn's figures through the metrics' own series functions (`ttft_ns`,
//! `latency_ns`, `client_tokens`, `server_tokens`) on that turn's rows in table order, so a run
//! and its rebuild write the same bytes.

pub mod inline;
pub(crate) mod text;

#[cfg(test)]
pub(crate) mod tests;

use std::collections::{BTreeMap, HashMap};

use loadgen_coordinator::aggregate::UnrecordedTurn;
use loadgen_coordinator::conversation::ConversationPlan;
use loadgen_coordinator::metrics::snapshot::{latency_ns, ttft_ns};
use loadgen_coordinator::metrics::tokens::{client_tokens, server_tokens};
use loadgen_coordinator::metrics::{
    MetricsOptions, SampleRow, SampleTable, SeriesStat, TokenCountSource,
};
use loadgen_wire::FailureKind;

use crate::SeriesSummary;

/// A sample's place in an agentic run: its conversation (an index into the ids the caller
/// interned, [`ConversationIds`]) and its turn number (the dataset's `turn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TurnLabel {
    pub conversation: u32,
    pub turn: u32,
}

/// How a tracked turn without a row ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unrecorded {
    /// Issued and never completed: in flight at the cap, an interrupt or the drain timeout.
    Abandoned,
    /// In flight when its worker died: a `worker_died` failure.
    WorkerDied,
}

/// Conversation ids as small indices, in the order first seen.
#[derive(Debug, Default)]
pub struct ConversationIds(HashMap<String, u32>);

impl ConversationIds {
    /// The index of conversation `id`, a new one the first time.
    pub fn intern(&mut self, id: &str) -> u32 {
        if let Some(&index) = self.0.get(id) {
            return index;
        }
        let index = u32::try_from(self.0.len()).unwrap_or(u32::MAX);
        self.0.insert(id.to_string(), index);
        index
    }
}

/// The `agentic` object of result_summary.json.
#[derive(Debug, Clone, PartialEq)]
pub struct AgenticSummary {
    /// Turns never sent because an earlier turn of their conversation failed (`turns.dropped`,
    /// repeated on its own: the reference's compliance gate is zero dropped agentic turns).
    pub dropped_turns: u64,
    pub conversations: ConversationStats,
    pub turns: TurnCounts,
    /// One entry per turn number, ascending.
    pub by_turn: Vec<TurnStats>,
}

/// The conversations that started (issued at least one turn), by how they ended.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationStats {
    pub started: u64,
    /// Every turn issued succeeded, none abandoned.
    pub completed: u64,
    /// Some turn failed (its later turns were then dropped).
    pub failed: u64,
    /// None failed, and some turn was abandoned when the run ended (cap, interrupt, drain).
    pub abandoned: u64,
    /// Turns issued per started conversation.
    pub turns_per_conversation: Option<SeriesSummary>,
    /// First turn's issue → last turn's completion, ns, over the completed conversations.
    pub duration_ns: Option<SeriesSummary>,
}

/// The tracked turns by outcome: `issued` = `succeeded` + `failed` + `abandoned`, and
/// `dropped` is part of `failed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnCounts {
    pub issued: u64,
    pub succeeded: u64,
    pub failed: u64,
    /// Failed as `turn_aborted`: never sent, an earlier turn of the conversation failed.
    pub dropped: u64,
    pub abandoned: u64,
    /// Failed turns per kind (`failure_kinds`' names), in the kinds' wire order.
    pub failed_by_kind: Vec<(String, u64)>,
}

/// One turn number's figures, over its turns that were sent (dropped turns only counted).
#[derive(Debug, Clone, PartialEq)]
pub struct TurnStats {
    pub turn: u32,
    /// Turns of this number issued: `n_samples + n_dropped + n_abandoned`, plus those on the
    /// wire in a worker that died (counted in `n_failed` too, with no row).
    pub n_issued: u64,
    /// Turns of this number that were sent and completed, failures included.
    pub n_samples: u64,
    /// Those of them that failed.
    pub n_failed: u64,
    /// Turns of this number dropped (never sent).
    pub n_dropped: u64,
    /// Turns of this number still in flight when the run ended (a cap, an interrupt): issued,
    /// never completed.
    pub n_abandoned: u64,
    pub ttft: Option<SeriesSummary>,
    /// TPOT on the primary basis, and whether it is partial (server basis, missing usage).
    pub tpot: Option<SeriesSummary>,
    pub tpot_partial: bool,
    /// TPOT on the other basis (`tpot_<other>`).
    pub tpot_other: Option<SeriesSummary>,
    pub tpot_other_partial: bool,
    pub latency: Option<SeriesSummary>,
}

/// The agentic block of a run's own report: each row's conversation and turn from its
/// dataset row (`SampleTable::dataset_rows`, filled by the aggregator in an agentic run)
/// through the run's `plan`, and the turns without a row from the aggregator's
/// `unrecorded_turns`. `None` for a run without conversations (`plan` is `None`).
pub fn agentic_of_run(
    table: &SampleTable,
    plan: Option<&ConversationPlan>,
    unrecorded: &[UnrecordedTurn],
    opts: &MetricsOptions,
) -> Option<AgenticSummary> {
    let plan = plan?;
    let mut ids = ConversationIds::default();
    let mut label = |row: u32| {
        let (id, turn) = plan.label(u64::from(row))?;
        Some(TurnLabel { conversation: ids.intern(id), turn })
    };
    let rows = table.dataset_rows().unwrap_or_default();
    let labels: Vec<Option<TurnLabel>> =
        (0..table.len()).map(|i| rows.get(i).and_then(|&row| label(row))).collect();
    let unrecorded: Vec<(TurnLabel, Unrecorded)> = unrecorded
        .iter()
        .filter_map(|u| {
            let how = if u.worker_died { Unrecorded::WorkerDied } else { Unrecorded::Abandoned };
            label(u.row).map(|l| (l, how))
        })
        .collect();
    Some(agentic_summary(table, &labels, &unrecorded, opts).unwrap_or_else(empty_summary))
}

/// An agentic run with no turn at all (nothing was issued).
fn empty_summary() -> AgenticSummary {
    AgenticSummary {
        dropped_turns: 0,
        conversations: conversation_stats(&[]),
        turns: turn_counts(&SampleTable::default(), &[], &[]),
        by_turn: Vec::new(),
    }
}

/// The agentic block of `table`, whose row `i` is the turn `labels[i]` (`None`: not a turn;
/// `labels` may be shorter than the table), and of the turns without a row; `None` when
/// nothing is labelled (a run without conversations).
pub fn agentic_summary(
    table: &SampleTable,
    labels: &[Option<TurnLabel>],
    unrecorded: &[(TurnLabel, Unrecorded)],
    opts: &MetricsOptions,
) -> Option<AgenticSummary> {
    if labels.iter().all(Option::is_none) && unrecorded.is_empty() {
        return None;
    }
    let turns = turn_counts(table, labels, unrecorded);
    let conversations = conversation_stats(&conversations(table, labels, unrecorded));
    Some(AgenticSummary {
        dropped_turns: turns.dropped,
        conversations,
        turns,
        by_turn: by_turn(table, labels, unrecorded, opts),
    })
}

/// Row `i` of `table` with its label, for every labelled row.
fn labelled<'a>(
    table: &'a SampleTable,
    labels: &'a [Option<TurnLabel>],
) -> impl Iterator<Item = (usize, TurnLabel)> + 'a {
    labels.iter().enumerate().take(table.len()).filter_map(|(i, l)| l.map(|l| (i, l)))
}

fn is_dropped(row: &SampleRow) -> bool {
    row.failed && row.failure == FailureKind::TurnAborted as u8
}

/// The kind a failed row names: its wire kind, `None` when the row does not say (a rebuild
/// without the run's summary names such failures by the log's error type, `error`).
fn kind_of(row: &SampleRow) -> Option<FailureKind> {
    FailureKind::from_u8(row.failure).filter(|&k| k != FailureKind::None)
}

/// The turns by outcome and the failed ones by kind.
pub fn turn_counts(
    table: &SampleTable,
    labels: &[Option<TurnLabel>],
    unrecorded: &[(TurnLabel, Unrecorded)],
) -> TurnCounts {
    let mut c = TurnCounts {
        issued: unrecorded.len() as u64,
        succeeded: 0,
        failed: 0,
        dropped: 0,
        abandoned: 0,
        failed_by_kind: Vec::new(),
    };
    let mut by_kind = [0u64; FailureKind::ALL.len()];
    let mut unnamed = 0u64;
    for (i, _) in labelled(table, labels) {
        let row = table.row(i);
        c.issued += 1;
        if !row.failed {
            c.succeeded += 1;
            continue;
        }
        c.failed += 1;
        c.dropped += u64::from(is_dropped(&row));
        match kind_of(&row) {
            Some(kind) => by_kind[kind as usize] += 1,
            None => unnamed += 1,
        }
    }
    for (_, how) in unrecorded {
        match how {
            Unrecorded::Abandoned => c.abandoned += 1,
            Unrecorded::WorkerDied => {
                c.failed += 1;
                by_kind[FailureKind::WorkerDied as usize] += 1;
            }
        }
    }
    let named = FailureKind::ALL.iter().zip(by_kind).filter(|(_, n)| *n > 0);
    c.failed_by_kind = named.map(|(k, n)| (k.as_str().to_string(), n)).collect();
    if unnamed > 0 {
        c.failed_by_kind.push(("error".to_string(), unnamed));
    }
    c
}

/// What a conversation's turns add up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Conversation {
    /// Turns issued (with a row or without).
    pub turns: u64,
    pub failed: bool,
    pub abandoned: bool,
    /// Its first turn's issue and its last turn's completion, over the turns with a row.
    pub first_issued_ns: Option<u64>,
    pub last_complete_ns: u64,
}

impl Conversation {
    /// Every turn it issued succeeded.
    pub fn completed(&self) -> bool {
        !self.failed && !self.abandoned
    }
}

/// The started conversations, grouped from their turns, in conversation order.
pub fn conversations(
    table: &SampleTable,
    labels: &[Option<TurnLabel>],
    unrecorded: &[(TurnLabel, Unrecorded)],
) -> Vec<Conversation> {
    let mut by_id: BTreeMap<u32, Conversation> = BTreeMap::new();
    for (i, label) in labelled(table, labels) {
        let row = table.row(i);
        let c = by_id.entry(label.conversation).or_default();
        c.turns += 1;
        c.failed |= row.failed;
        c.first_issued_ns = Some(c.first_issued_ns.map_or(row.issued_ns, |f| f.min(row.issued_ns)));
        c.last_complete_ns = c.last_complete_ns.max(row.complete_ns);
    }
    for (label, how) in unrecorded {
        let c = by_id.entry(label.conversation).or_default();
        c.turns += 1;
        match how {
            Unrecorded::Abandoned => c.abandoned = true,
            Unrecorded::WorkerDied => c.failed = true,
        }
    }
    by_id.into_values().collect()
}

/// A completed conversation's duration: its first turn's issue to its last turn's completion.
pub fn duration_ns(c: &Conversation) -> Option<u64> {
    let first = c.first_issued_ns.filter(|_| c.completed())?;
    Some(c.last_complete_ns.saturating_sub(first))
}

/// Counts and the two per-conversation series.
pub fn conversation_stats(list: &[Conversation]) -> ConversationStats {
    let completed = list.iter().filter(|c| c.completed()).count() as u64;
    let failed = list.iter().filter(|c| c.failed).count() as u64;
    let mut turns: Vec<u64> = list.iter().map(|c| c.turns).collect();
    let mut durations: Vec<u64> = list.iter().filter_map(duration_ns).collect();
    ConversationStats {
        started: list.len() as u64,
        completed,
        failed,
        abandoned: list.len() as u64 - completed - failed,
        turns_per_conversation: int_block("turns_per_conversation", &mut turns),
        duration_ns: int_block("conversation_duration_ns", &mut durations),
    }
}

/// A block of integer values, `None` when there are none (no early-stopping estimates: they
/// are the whole run's).
fn int_block(name: &str, values: &mut [u64]) -> Option<SeriesSummary> {
    let stat = SeriesStat::from_ints(name, values, false);
    (stat.count > 0).then(|| SeriesSummary::from(&stat))
}

fn float_block(name: &str, values: &mut [f64]) -> Option<SeriesSummary> {
    let stat = SeriesStat::from_floats(name, values, false);
    (stat.count > 0).then(|| SeriesSummary::from(&stat))
}

/// Each turn number's figures, ascending: its rows, in table order, go through the
/// metrics' own series functions; its turns without a row are counted.
pub fn by_turn(
    table: &SampleTable,
    labels: &[Option<TurnLabel>],
    unrecorded: &[(TurnLabel, Unrecorded)],
    opts: &MetricsOptions,
) -> Vec<TurnStats> {
    let mut rows_of: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, label) in labelled(table, labels) {
        rows_of.entry(label.turn).or_default().push(i);
    }
    for (label, _) in unrecorded {
        rows_of.entry(label.turn).or_default();
    }
    let mut stats: Vec<TurnStats> =
        rows_of.into_iter().map(|(turn, rows)| turn_stats(table, turn, &rows, opts)).collect();
    for (label, how) in unrecorded {
        let Some(s) = stats.iter_mut().find(|s| s.turn == label.turn) else { continue };
        s.n_issued += 1;
        match how {
            Unrecorded::Abandoned => s.n_abandoned += 1,
            Unrecorded::WorkerDied => s.n_failed += 1,
        }
    }
    stats
}

/// The figures of turn number `turn`, whose rows are `rows` (in table order).
fn turn_stats(table: &SampleTable, turn: u32, rows: &[usize], opts: &MetricsOptions) -> TurnStats {
    let mut sent = SampleTable::with_capacity(rows.len());
    let mut n_dropped = 0;
    for &i in rows {
        let row = table.row(i);
        if is_dropped(&row) {
            n_dropped += 1;
        } else {
            sent.push(&row);
        }
    }
    let n_failed = (0..sent.len()).filter(|&i| sent.row(i).failed).count() as u64;
    let client = client_tokens(&sent, opts.streaming, opts.has_tokenizer);
    let (server, usage, _) = server_tokens(&sent, opts.streaming);
    let server_partial = usage.is_partial();
    let (mut primary, mut other) = match opts.primary {
        TokenCountSource::Client => (client.tpot_ns.to_vec(), server.tpot_ns.to_vec()),
        TokenCountSource::Server => (server.tpot_ns.to_vec(), client.tpot_ns.to_vec()),
    };
    let primary_is_server = opts.primary == TokenCountSource::Server;
    TurnStats {
        turn,
        n_issued: sent.len() as u64 + n_dropped,
        n_samples: sent.len() as u64,
        n_failed,
        n_dropped,
        n_abandoned: 0,
        ttft: int_block("ttft_ns", &mut ttft_ns(&sent).to_vec()),
        tpot: float_block("tpot_ns", &mut primary),
        tpot_partial: primary_is_server && server_partial,
        tpot_other: float_block("tpot_ns", &mut other),
        tpot_other_partial: !primary_is_server && server_partial,
        latency: int_block("sample_latency_ns", &mut latency_ns(&sent).to_vec()),
    }
}

/// Marks the failed rows that follow an earlier failed turn of their conversation as
/// `turn_aborted`: the worker fails every later turn of a conversation whose turn failed,
/// never sending them, so a log (whose error lines do not name the kind) still says which
/// failures were dropped turns. Returns how many rows it marked.
pub fn mark_dropped_turns(rows: &mut [SampleRow], labels: &[Option<TurnLabel>]) -> u64 {
    let mut first_failed: HashMap<u32, u32> = HashMap::new();
    for (row, label) in rows.iter().zip(labels) {
        if let (true, Some(l)) = (row.failed, label) {
            let turn = first_failed.entry(l.conversation).or_insert(l.turn);
            *turn = (*turn).min(l.turn);
        }
    }
    let mut marked = 0;
    for (row, label) in rows.iter_mut().zip(labels) {
        let Some(l) = label.filter(|_| row.failed) else { continue };
        if first_failed.get(&l.conversation).is_some_and(|&first| l.turn > first) {
            row.failure = FailureKind::TurnAborted as u8;
            marked += 1;
        }
    }
    marked
}
