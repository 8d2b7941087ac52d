//! A planned response: the pieces a connection writes, when each may go, and how the
//! connection continues after them. The handler makes one per request, fault modes rewrite it,
//! the worker carries it out.

use std::time::Instant;

use crate::prefix_cache::CacheOutcome;

/// How a connection continues after a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Keep the connection for the next request.
    KeepAlive,
    /// Close it after the bytes.
    Close,
    /// Stop sending, keep the socket open, until the client closes or the server stops.
    Stall,
}

/// One response: pieces to write, optional deadlines (one per piece), and the ending.
#[derive(Debug)]
pub struct Plan {
    /// Bytes, in order.
    pub pieces: Vec<Vec<u8>>,
    /// When each piece may be written; `None` = at once.
    pub deadlines: Option<Vec<Instant>>,
    /// What happens after the last piece.
    pub end: End,
    /// What the prefix cache decided (`--prefix-cache` chat requests), for the send log.
    pub cache: Option<CacheOutcome>,
}

impl Plan {
    pub(crate) fn now(bytes: Vec<u8>, end: End) -> Self {
        Self::unpaced(vec![bytes], end)
    }

    /// Pieces written at once.
    pub(crate) fn unpaced(pieces: Vec<Vec<u8>>, end: End) -> Self {
        Self { pieces, deadlines: None, end, cache: None }
    }
}
