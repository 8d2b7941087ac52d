//! Chunk timing of a streamed response, as its record carries it to the aggregator: how many
//! content-bearing SSE events the response had, how many socket reads brought them, and the gap
//! between each event and the one before (the reference's `chunk_delta_ns`).
//!
//! The bytes are `[n_chunks u32 LE][chunk_reads u32 LE]` and then one LEB128 varint per gap in
//! nanoseconds: most gaps are micro- to milliseconds, 2 to 4 bytes each where a `u64` would take
//! 8, and a gap of minutes still fits. A response with no content chunk carries no bytes at all.

/// Bytes of the two counts before the gaps.
pub const CHUNK_COUNTS_BYTES: usize = 8;

/// The chunk clock of one response, filled as its frames are parsed. Its buffer keeps its
/// capacity across responses, so after warm-up a response's gaps cost no allocation.
#[derive(Debug)]
pub struct ChunkTimes {
    n_chunks: u32,
    chunk_reads: u32,
    last_chunk_ns: u64,
    /// A socket read happened since the last chunk: the next chunk counts a new read.
    new_read: bool,
    /// The counts (patched in place) then the varint gaps.
    bytes: Vec<u8>,
}

impl Default for ChunkTimes {
    fn default() -> ChunkTimes {
        ChunkTimes::with_capacity(0)
    }
}

impl ChunkTimes {
    /// A clock whose buffer holds `gap_bytes` of gaps before it grows.
    pub fn with_capacity(gap_bytes: usize) -> ChunkTimes {
        let mut bytes = Vec::with_capacity(CHUNK_COUNTS_BYTES + gap_bytes);
        bytes.resize(CHUNK_COUNTS_BYTES, 0);
        ChunkTimes { n_chunks: 0, chunk_reads: 0, last_chunk_ns: 0, new_read: true, bytes }
    }

    /// Clears it for the next response, keeping the buffer.
    pub fn reset(&mut self) {
        self.n_chunks = 0;
        self.chunk_reads = 0;
        self.last_chunk_ns = 0;
        self.new_read = true;
        self.bytes.truncate(CHUNK_COUNTS_BYTES);
    }

    /// A socket read brought bytes of this response: the next chunk is in a new read.
    #[inline]
    pub fn note_read(&mut self) {
        self.new_read = true;
    }

    /// A content-bearing event was parsed at `now_ns`.
    #[inline]
    pub fn mark(&mut self, now_ns: u64) {
        if self.n_chunks > 0 {
            push_varint(&mut self.bytes, now_ns.saturating_sub(self.last_chunk_ns));
        }
        self.last_chunk_ns = now_ns;
        self.n_chunks = self.n_chunks.saturating_add(1);
        self.bytes[..4].copy_from_slice(&self.n_chunks.to_le_bytes());
        if self.new_read {
            self.new_read = false;
            self.chunk_reads = self.chunk_reads.saturating_add(1);
            self.bytes[4..8].copy_from_slice(&self.chunk_reads.to_le_bytes());
        }
    }

    /// Content-bearing events so far.
    pub fn n_chunks(&self) -> u32 {
        self.n_chunks
    }

    /// The record's chunk timing bytes; empty when the response had no content chunk.
    pub fn as_bytes(&self) -> &[u8] {
        if self.n_chunks == 0 {
            &[]
        } else {
            &self.bytes
        }
    }
}

fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// `timing` cut to at most `room` bytes at a gap's end: the counts stay whole (they are needed
/// even when the gaps are not), so a cut record loses its last gaps and never a count. Empty when
/// not even the counts fit.
pub fn cut_chunk_timing(timing: &[u8], room: usize) -> &[u8] {
    if timing.len() <= room {
        return timing;
    }
    if room < CHUNK_COUNTS_BYTES {
        return &[];
    }
    // A varint ends at a byte below 0x80: keep everything up to the last such byte in room.
    let gaps = &timing[CHUNK_COUNTS_BYTES..room];
    let end = gaps.iter().rposition(|&b| b < 0x80).map_or(0, |i| i + 1);
    &timing[..CHUNK_COUNTS_BYTES + end]
}

/// A record's chunk timing, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkTiming<'a> {
    /// Content-bearing SSE events of the response.
    pub n_chunks: u32,
    /// Socket reads that brought at least one of them (1: the whole stream arrived at once).
    pub chunk_reads: u32,
    gaps: &'a [u8],
}

impl<'a> ChunkTiming<'a> {
    /// Reads a record's timing bytes; `None` when there are none (not streamed, or no content
    /// chunk) or they are too short to hold the counts.
    pub fn decode(bytes: &'a [u8]) -> Option<ChunkTiming<'a>> {
        let counts = bytes.get(..CHUNK_COUNTS_BYTES)?;
        let word = |i: usize| u32::from_le_bytes(counts[i..i + 4].try_into().unwrap_or([0; 4]));
        Some(ChunkTiming {
            n_chunks: word(0),
            chunk_reads: word(4),
            gaps: &bytes[CHUNK_COUNTS_BYTES..],
        })
    }

    /// The gaps between consecutive chunks, ns, in arrival order (`n_chunks − 1` of them unless
    /// the record was cut to fit its frame). A varint cut short ends the list.
    pub fn gaps_ns(&self) -> impl Iterator<Item = u64> + 'a {
        let mut rest = self.gaps;
        std::iter::from_fn(move || {
            let mut value = 0u64;
            for (i, &b) in rest.iter().enumerate().take(10) {
                value |= u64::from(b & 0x7f) << (7 * i);
                if b < 0x80 {
                    rest = &rest[i + 1..];
                    return Some(value);
                }
            }
            rest = &[];
            None
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock_of(marks: &[(u64, bool)]) -> ChunkTimes {
        let mut clock = ChunkTimes::with_capacity(64);
        for &(at_ns, new_read) in marks {
            if new_read {
                clock.note_read();
            }
            clock.mark(at_ns);
        }
        clock
    }

    #[test]
    fn gaps_counts_and_reads_round_trip() {
        let gap_ns = [1u64, 127, 128, 16_383, 16_384, 4_000_000_000, 600_000_000_000, u64::MAX / 2];
        let mut marks = vec![(1_000, true)];
        let mut at_ns = 1_000u64;
        for (i, gap) in gap_ns.iter().enumerate() {
            at_ns += gap;
            marks.push((at_ns, i % 3 == 0));
        }
        let clock = clock_of(&marks);
        let timing = ChunkTiming::decode(clock.as_bytes()).unwrap();
        assert_eq!(timing.n_chunks, 9);
        // The first read, then marks 0, 3 and 6 came in new reads.
        assert_eq!(timing.chunk_reads, 4);
        assert_eq!(timing.gaps_ns().collect::<Vec<_>>(), gap_ns);
    }

    #[test]
    fn a_whole_stream_in_one_read_has_one_read_and_a_response_without_chunks_no_bytes() {
        let clock = clock_of(&[(10, true), (10, false), (11, false)]);
        let timing = ChunkTiming::decode(clock.as_bytes()).unwrap();
        assert_eq!((timing.n_chunks, timing.chunk_reads), (3, 1));
        assert_eq!(timing.gaps_ns().collect::<Vec<_>>(), [0, 1]);
        let mut clock = clock;
        clock.reset();
        assert!(clock.as_bytes().is_empty());
        assert_eq!(ChunkTiming::decode(clock.as_bytes()), None);
    }

    #[test]
    fn a_reads_between_chunks_counts_once_and_reset_starts_over() {
        let mut clock = ChunkTimes::with_capacity(8);
        clock.note_read();
        clock.note_read();
        clock.mark(5);
        clock.mark(6);
        clock.reset();
        clock.mark(7);
        let timing = ChunkTiming::decode(clock.as_bytes()).unwrap();
        assert_eq!((timing.n_chunks, timing.chunk_reads), (1, 1));
        assert_eq!(timing.gaps_ns().count(), 0);
    }

    #[test]
    fn a_cut_keeps_the_counts_and_whole_gaps_only() {
        let clock = clock_of(&[(0, true), (300, false), (300 + 70_000, false), (70_301, false)]);
        let bytes = clock.as_bytes();
        // Gaps 300 (2 bytes), 70,000 (3 bytes), 1 (1 byte).
        assert_eq!(bytes.len(), CHUNK_COUNTS_BYTES + 6);
        for (room, gaps) in [(14, vec![300, 70_000, 1]), (13, vec![300, 70_000]), (12, vec![300])] {
            let cut = ChunkTiming::decode(cut_chunk_timing(bytes, room)).unwrap();
            assert_eq!(cut.n_chunks, 4, "room {room}");
            assert_eq!(cut.gaps_ns().collect::<Vec<_>>(), gaps, "room {room}");
        }
        assert_eq!(cut_chunk_timing(bytes, 9).len(), CHUNK_COUNTS_BYTES);
        assert!(cut_chunk_timing(bytes, 7).is_empty());
    }

    #[test]
    fn a_truncated_varint_ends_the_gaps() {
        let mut bytes = vec![2, 0, 0, 0, 1, 0, 0, 0];
        bytes.extend_from_slice(&[0x85, 0x80]);
        let timing = ChunkTiming::decode(&bytes).unwrap();
        assert_eq!(timing.gaps_ns().count(), 0);
        assert_eq!(ChunkTiming::decode(&bytes[..5]), None);
    }
}
