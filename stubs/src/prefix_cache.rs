//! The prefix-cache stub's cache: per conversation, the messages of the longest prompt seen
//! (with the stub's own answer after it), matched in whole messages against each new prompt,
//! and a least-recently-used bound on the tokens held over all conversations.
//!
//! One cache serves every worker thread behind a `Mutex` (`SharedPrefixCache`): the stub is a
//! test server, a request holds the lock for one hash-map lookup and a few vector copies, and
//! the max-throughput path never touches it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// One message of a prompt as the cache sees it: its identity (a hash of its role, text, tool
/// calls and tool-call id) and its prompt tokens (`chat_turn::message_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageId {
    /// Hash of what the message says; equal messages have equal hashes.
    pub hash: u64,
    /// Its prompt tokens (at least 1).
    pub tokens: u64,
}

/// What the cache decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheOutcome {
    /// The prompt's tokens.
    pub prompt_tokens: u64,
    /// How many of them were cached: the tokens of the longest run of leading messages equal
    /// to the conversation's cached ones.
    pub cached_tokens: u64,
    /// The time to first token the stub planned: from the request being whole to the first
    /// byte's deadline (before a `--max-concurrency` wait or a `--fault-delay-ms`).
    pub ttft_ns: u64,
    /// The answer is a tool call.
    pub tool_call: bool,
}

/// Counts over the life of a cache (`StubTotals::prefix_cache`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PrefixCacheTotals {
    /// Requests with at least one cached token.
    pub hits: u64,
    /// Requests with none.
    pub misses: u64,
    /// Prompt tokens of every request.
    pub prompt_tokens: u64,
    /// Of those, cached.
    pub cached_tokens: u64,
    /// Conversations evicted to stay within the capacity.
    pub evictions: u64,
}

impl PrefixCacheTotals {
    /// Requests served through the cache.
    pub fn requests(&self) -> u64 {
        self.hits + self.misses
    }
}

/// The cache every worker of a server shares.
pub type SharedPrefixCache = Arc<Mutex<PrefixCache>>;

#[derive(Debug)]
struct Entry {
    chain: Vec<MessageId>,
    tokens: u64,
    last_used: u64,
}

/// Conversations' cached message chains, at most `capacity_tokens` tokens in all. Every
/// message counts at least one token, so the messages held (and so the memory) are bounded
/// by the capacity too.
#[derive(Debug)]
pub struct PrefixCache {
    capacity_tokens: u64,
    entries: HashMap<u64, Entry>,
    /// Last use → conversation key: the first entry is the least recently used.
    by_use: BTreeMap<u64, u64>,
    held_tokens: u64,
    clock: u64,
    totals: PrefixCacheTotals,
}

/// The cache's answer to one request: its counts and the request's 1-based number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lookup {
    /// The prompt's tokens.
    pub prompt_tokens: u64,
    /// Of those, cached.
    pub cached_tokens: u64,
    /// This request's number among all the cache has served, from 1.
    pub number: u64,
}

impl PrefixCache {
    /// An empty cache that holds at most `capacity_tokens` tokens.
    pub fn new(capacity_tokens: u64) -> Self {
        Self {
            capacity_tokens,
            entries: HashMap::new(),
            by_use: BTreeMap::new(),
            held_tokens: 0,
            clock: 0,
            totals: PrefixCacheTotals::default(),
        }
    }

    /// Serves one request of conversation `key`: counts the prompt's cached tokens, then
    /// remembers the prompt followed by `answer` (the stub's reply, which a server's cache
    /// holds as it decodes it), unless the prompt is already a prefix of what is cached (a
    /// retried or shorter turn keeps the longer chain). A chain longer than the capacity keeps
    /// its longest prefix that fits; least recently used conversations are evicted until the
    /// total fits.
    pub fn serve(&mut self, key: u64, prompt: &[MessageId], answer: MessageId) -> Lookup {
        self.clock += 1;
        let prompt_tokens: u64 = prompt.iter().map(|m| m.tokens).sum();
        let old = self.entries.remove(&key);
        let common = old.as_ref().map_or(0, |e| common_prefix_len(&e.chain, prompt));
        let cached_tokens: u64 = prompt[..common].iter().map(|m| m.tokens).sum();
        let mut chain = match old {
            Some(e) => {
                self.held_tokens -= e.tokens;
                self.by_use.remove(&e.last_used);
                if common == prompt.len() {
                    e.chain
                } else {
                    let mut chain = e.chain;
                    chain.clear();
                    chain.extend_from_slice(prompt);
                    chain.push(answer);
                    chain
                }
            }
            None => [prompt, &[answer]].concat(),
        };
        let tokens = fit(&mut chain, self.capacity_tokens);
        if !chain.is_empty() {
            self.held_tokens += tokens;
            self.by_use.insert(self.clock, key);
            self.entries.insert(key, Entry { chain, tokens, last_used: self.clock });
        }
        self.evict();
        let t = &mut self.totals;
        if cached_tokens > 0 {
            t.hits += 1;
        } else {
            t.misses += 1;
        }
        t.prompt_tokens += prompt_tokens;
        t.cached_tokens += cached_tokens;
        Lookup { prompt_tokens, cached_tokens, number: t.requests() }
    }

    /// Evicts least recently used conversations until the tokens held fit the capacity.
    fn evict(&mut self) {
        while self.held_tokens > self.capacity_tokens {
            let Some((_, key)) = self.by_use.pop_first() else { break };
            if let Some(e) = self.entries.remove(&key) {
                self.held_tokens -= e.tokens;
                self.totals.evictions += 1;
            }
        }
    }

    /// Tokens held now, over all conversations (never above the capacity).
    pub fn held_tokens(&self) -> u64 {
        self.held_tokens
    }

    /// Conversations held now.
    pub fn conversations(&self) -> usize {
        self.entries.len()
    }

    /// Counts so far.
    pub fn totals(&self) -> PrefixCacheTotals {
        self.totals
    }
}

/// How many leading messages `a` and `b` share.
fn common_prefix_len(a: &[MessageId], b: &[MessageId]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x.hash == y.hash).count()
}

/// Cuts `chain` to its longest prefix of at most `capacity` tokens; returns its tokens.
fn fit(chain: &mut Vec<MessageId>, capacity: u64) -> u64 {
    let mut tokens = 0u64;
    let mut keep = 0;
    for m in chain.iter() {
        if tokens + m.tokens > capacity {
            break;
        }
        tokens += m.tokens;
        keep += 1;
    }
    chain.truncate(keep);
    tokens
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(spec: &[(u64, u64)]) -> Vec<MessageId> {
        spec.iter().map(|&(hash, tokens)| MessageId { hash, tokens }).collect()
    }

    const REPLY: MessageId = MessageId { hash: 99, tokens: 2 };

    #[test]
    fn later_turns_hit_the_earlier_prompt_and_the_stub_s_own_answer() {
        let mut c = PrefixCache::new(1_000);
        let turn1 = msgs(&[(1, 100), (2, 200)]);
        assert_eq!(c.serve(7, &turn1, REPLY).cached_tokens, 0);
        let turn2 = [turn1.clone(), vec![REPLY], msgs(&[(3, 50)])].concat();
        let l = c.serve(7, &turn2, REPLY);
        assert_eq!((l.prompt_tokens, l.cached_tokens, l.number), (352, 302, 2));
        assert_eq!(c.held_tokens(), 354);
        // Another conversation with the same messages shares nothing.
        assert_eq!(c.serve(8, &turn2, REPLY).cached_tokens, 0);
        let t = c.totals();
        assert_eq!((t.hits, t.misses, t.prompt_tokens, t.cached_tokens), (1, 2, 1004, 302));
    }

    #[test]
    fn a_divergent_prompt_matches_its_common_prefix_and_replaces_the_chain() {
        let mut c = PrefixCache::new(1_000);
        c.serve(1, &msgs(&[(1, 10), (2, 20), (3, 30)]), REPLY);
        let other = msgs(&[(1, 10), (4, 40)]);
        assert_eq!(c.serve(1, &other, REPLY).cached_tokens, 10);
        assert_eq!(c.serve(1, &other, REPLY).cached_tokens, 50, "the new branch is cached");
        // A prefix of what is cached (a retry of an earlier turn) keeps the longer chain.
        assert_eq!(c.serve(1, &msgs(&[(1, 10)]), REPLY).cached_tokens, 10);
        assert_eq!(c.held_tokens(), 52);
    }

    #[test]
    fn the_least_recently_used_conversation_is_evicted_past_the_capacity() {
        let mut c = PrefixCache::new(300);
        let (a, b, d) = (msgs(&[(1, 100)]), msgs(&[(2, 100)]), msgs(&[(3, 100)]));
        c.serve(1, &a, REPLY);
        c.serve(2, &b, REPLY);
        assert_eq!(c.serve(1, &a, REPLY).cached_tokens, 100, "a is used again: b is older");
        c.serve(3, &d, REPLY);
        assert_eq!((c.held_tokens(), c.conversations(), c.totals().evictions), (204, 2, 1));
        assert_eq!(c.serve(1, &a, REPLY).cached_tokens, 100);
        assert_eq!(c.serve(2, &b, REPLY).cached_tokens, 0, "b was evicted");
        assert!(c.held_tokens() <= 300);
    }

    #[test]
    fn a_conversation_past_the_capacity_keeps_the_prefix_that_fits() {
        let mut c = PrefixCache::new(250);
        let long = msgs(&[(1, 100), (2, 100), (3, 100)]);
        c.serve(1, &long, REPLY);
        assert_eq!(c.held_tokens(), 200);
        assert_eq!(c.serve(1, &long, REPLY).cached_tokens, 200);
        let mut none = PrefixCache::new(0);
        none.serve(1, &long, REPLY);
        assert_eq!((none.held_tokens(), none.conversations()), (0, 0));
        assert_eq!(none.serve(1, &long, REPLY).cached_tokens, 0);
    }
}
