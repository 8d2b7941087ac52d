//! The summary's `agentic` object (`AgenticSummary`), written after every other key and read
//! back: its statistics are the summary's series blocks, its TPOT keyed by basis as the
//! summary's (`tpot` on the primary basis, `tpot_<other>` on the other).

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use loadgen_coordinator::metrics::{basis_key, TokenCountSource};

use super::in_order::InOrder;
use super::series::{Block, ReadBlock};
use crate::agentic::{AgenticSummary, ConversationStats, TurnCounts, TurnStats};

/// `agentic` as written, under the summary's primary basis.
pub struct AgenticJson<'a> {
    pub agentic: &'a AgenticSummary,
    pub primary: TokenCountSource,
}

/// A block or `null`.
fn block(series: Option<&super::SeriesSummary>, partial: bool) -> Option<Block<'_>> {
    series.map(|series| Block { series, partial })
}

struct Conversations<'a>(&'a ConversationStats);

impl Serialize for Conversations<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut map = serializer.serialize_map(Some(6))?;
        map.serialize_entry("started", &c.started)?;
        map.serialize_entry("completed", &c.completed)?;
        map.serialize_entry("failed", &c.failed)?;
        map.serialize_entry("abandoned", &c.abandoned)?;
        let turns = block(c.turns_per_conversation.as_ref(), false);
        map.serialize_entry("turns_per_conversation", &turns)?;
        map.serialize_entry("duration_ns", &block(c.duration_ns.as_ref(), false))?;
        map.end()
    }
}

struct Turns<'a>(&'a TurnCounts);

impl Serialize for Turns<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let mut map = serializer.serialize_map(Some(6))?;
        map.serialize_entry("issued", &t.issued)?;
        map.serialize_entry("succeeded", &t.succeeded)?;
        map.serialize_entry("failed", &t.failed)?;
        map.serialize_entry("dropped", &t.dropped)?;
        map.serialize_entry("abandoned", &t.abandoned)?;
        map.serialize_entry("failed_by_kind", &KindCounts(&t.failed_by_kind))?;
        map.end()
    }
}

/// `{kind: count}` in the given order.
struct KindCounts<'a>(&'a [(String, u64)]);

impl Serialize for KindCounts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(kind, n)| (kind, n)))
    }
}

struct Turn<'a> {
    stats: &'a TurnStats,
    other_tpot_key: &'a str,
}

impl Serialize for Turn<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let s = self.stats;
        let mut map = serializer.serialize_map(Some(11))?;
        map.serialize_entry("turn", &s.turn)?;
        map.serialize_entry("n_issued", &s.n_issued)?;
        map.serialize_entry("n_samples", &s.n_samples)?;
        map.serialize_entry("n_failed", &s.n_failed)?;
        map.serialize_entry("n_dropped", &s.n_dropped)?;
        map.serialize_entry("n_abandoned", &s.n_abandoned)?;
        map.serialize_entry("ttft", &block(s.ttft.as_ref(), false))?;
        map.serialize_entry("tpot", &block(s.tpot.as_ref(), s.tpot_partial))?;
        let other = block(s.tpot_other.as_ref(), s.tpot_other_partial);
        map.serialize_entry(self.other_tpot_key, &other)?;
        map.serialize_entry("latency", &block(s.latency.as_ref(), false))?;
        map.end()
    }
}

impl Serialize for AgenticJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let a = self.agentic;
        let other_tpot_key = basis_key("tpot", self.primary.other(), self.primary);
        let by_turn: Vec<Turn<'_>> =
            a.by_turn.iter().map(|stats| Turn { stats, other_tpot_key: &other_tpot_key }).collect();
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("dropped_turns", &a.dropped_turns)?;
        map.serialize_entry("conversations", &Conversations(&a.conversations))?;
        map.serialize_entry("turns", &Turns(&a.turns))?;
        map.serialize_entry("by_turn", &by_turn)?;
        map.end()
    }
}

/// A block read back: its series and whether it was partial (`null` reads as none).
fn read_block(b: Option<ReadBlock>) -> (Option<super::SeriesSummary>, bool) {
    b.map_or((None, false), |b| (b.series, b.partial))
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ConversationKeys {
    started: u64,
    completed: u64,
    failed: u64,
    abandoned: u64,
    turns_per_conversation: Option<ReadBlock>,
    duration_ns: Option<ReadBlock>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TurnKeys {
    issued: u64,
    succeeded: u64,
    failed: u64,
    dropped: u64,
    abandoned: u64,
    failed_by_kind: InOrder<u64>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct AgenticKeys {
    dropped_turns: u64,
    conversations: ConversationKeys,
    turns: TurnKeys,
    by_turn: Vec<ReadTurn>,
}

/// `agentic` read back (`null` reads as `None`).
pub struct ReadAgentic(pub Option<AgenticSummary>);

impl<'de> Deserialize<'de> for ReadAgentic {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let Some(keys) = Option::<AgenticKeys>::deserialize(d)? else {
            return Ok(ReadAgentic(None));
        };
        let c = keys.conversations;
        let t = keys.turns;
        Ok(ReadAgentic(Some(AgenticSummary {
            dropped_turns: keys.dropped_turns,
            conversations: ConversationStats {
                started: c.started,
                completed: c.completed,
                failed: c.failed,
                abandoned: c.abandoned,
                turns_per_conversation: read_block(c.turns_per_conversation).0,
                duration_ns: read_block(c.duration_ns).0,
            },
            turns: TurnCounts {
                issued: t.issued,
                succeeded: t.succeeded,
                failed: t.failed,
                dropped: t.dropped,
                abandoned: t.abandoned,
                failed_by_kind: t.failed_by_kind.0,
            },
            by_turn: keys.by_turn.into_iter().map(|t| t.0).collect(),
        })))
    }
}

/// One `by_turn` entry read back: `tpot` is the primary basis's, `tpot_client` or
/// `tpot_server` the other's.
struct ReadTurn(TurnStats);

impl<'de> Deserialize<'de> for ReadTurn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TurnVisitor)
    }
}

struct TurnVisitor;

impl<'de> Visitor<'de> for TurnVisitor {
    type Value = ReadTurn;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a by_turn entry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ReadTurn, A::Error> {
        let mut s = TurnStats {
            turn: 0,
            n_issued: 0,
            n_samples: 0,
            n_failed: 0,
            n_dropped: 0,
            n_abandoned: 0,
            ttft: None,
            tpot: None,
            tpot_partial: false,
            tpot_other: None,
            tpot_other_partial: false,
            latency: None,
        };
        let block = |map: &mut A| map.next_value::<Option<ReadBlock>>().map(read_block);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "turn" => s.turn = map.next_value()?,
                "n_samples" => s.n_samples = map.next_value()?,
                "n_failed" => s.n_failed = map.next_value()?,
                "n_dropped" => s.n_dropped = map.next_value()?,
                "n_issued" => s.n_issued = map.next_value()?,
                "n_abandoned" => s.n_abandoned = map.next_value()?,
                "ttft" => s.ttft = block(&mut map)?.0,
                "tpot" => (s.tpot, s.tpot_partial) = block(&mut map)?,
                "tpot_client" | "tpot_server" => {
                    (s.tpot_other, s.tpot_other_partial) = block(&mut map)?;
                }
                "latency" => s.latency = block(&mut map)?.0,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ReadTurn(s))
    }
}
