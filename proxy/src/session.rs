//! Sessions: what the proxy forwarded for a conversation it compacted, so that the
//! conversation's next request continues what the provider saw.
//!
//! Once the proxy compacts a request, the provider has seen the compacted history,
//! and what it answers next is bound to it: preserved thinking signs a thinking block
//! over its whole prefix, and a Responses reasoning item follows it. The client, which
//! never saw the compaction, sends its own full history again, with that answer after
//! it. Compacted from scratch, the request could be cut elsewhere and summarized in
//! other words (the answer's thinking then follows a prefix the provider never saw,
//! and the cache misses every turn); forwarded as the client sent it, the answer's
//! thinking follows the uncompacted history. So the proxy remembers, per session, the
//! client's history it compacted and the history it forwarded instead; a request whose
//! history starts with the remembered one, element for element, is forwarded as the
//! remembered forwarded history followed by what is new: an append-only extension of
//! what the provider saw. Over the budget again, the pipeline runs on that extension
//! (compacting its own output, the earlier summary carried forward), not on the
//! client's history.
//!
//! The table is sans-IO and bounded: at most `max_sessions` sessions, each at most
//! `max_session_bytes` of remembered history (a larger one is not remembered), the
//! least recently used evicted first.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

/// What a session remembers of its last compacted request.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Remembered {
    /// The client's history elements, as their bytes.
    pub(crate) original: Vec<String>,
    /// The history forwarded instead, as its elements' bytes.
    pub(crate) forwarded: Vec<String>,
}

impl Remembered {
    /// What a session remembers: the client's history elements, and the ones
    /// forwarded instead. **O(1)**.
    pub fn new(original: Vec<String>, forwarded: Vec<String>) -> Self {
        Remembered {
            original,
            forwarded,
        }
    }

    /// The client's history elements. **O(1)**.
    pub fn original(&self) -> &[String] {
        &self.original
    }

    /// The history elements forwarded instead. **O(1)**.
    pub fn forwarded(&self) -> &[String] {
        &self.forwarded
    }

    /// Bytes it holds. **O(elements)**.
    pub fn bytes(&self) -> usize {
        self.original
            .iter()
            .chain(&self.forwarded)
            .map(String::len)
            .sum()
    }
}

/// A session's key: the `x-cutpoint-session` header the client sent, or a hash of the
/// route and the conversation's start (its first history element and the body's
/// `system` / `instructions` member), so that a client sending no header still finds
/// its session. Two conversations with the same start share a key; the history check
/// tells them apart (a request that does not continue the remembered history is
/// compacted from scratch), at the cost of the reuse.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct SessionKey(u64);

impl SessionKey {
    /// The key for `parts`, hashed in order. **O(len)**.
    pub fn of<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut h = DefaultHasher::new();
        for p in parts {
            p.len().hash(&mut h);
            p.hash(&mut h);
        }
        SessionKey(h.finish())
    }
}

/// The bounded table of sessions, least recently used evicted first.
#[derive(Debug)]
pub struct Sessions {
    max_sessions: usize,
    max_session_bytes: usize,
    tick: u64,
    slots: HashMap<SessionKey, (u64, Arc<Remembered>)>,
    /// Use order: tick of last use -> key.
    order: BTreeMap<u64, SessionKey>,
    bytes: usize,
    evicted: u64,
}

/// Why [`Sessions::remember`] did not keep a session.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kept {
    /// Remembered.
    Yes,
    /// Over `max_session_bytes`: forgotten instead.
    TooLarge,
    /// Sessions are off (`max_sessions` is 0).
    Off,
}

impl Sessions {
    /// An empty table. **O(1)**.
    pub fn new(max_sessions: usize, max_session_bytes: usize) -> Self {
        Sessions {
            max_sessions,
            max_session_bytes,
            tick: 0,
            slots: HashMap::new(),
            order: BTreeMap::new(),
            bytes: 0,
            evicted: 0,
        }
    }

    /// The session of `key`, marked as used. **O(log sessions)**.
    pub fn get(&mut self, key: SessionKey) -> Option<Arc<Remembered>> {
        self.tick += 1;
        let tick = self.tick;
        let (used, remembered) = self.slots.get_mut(&key)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, key);
        Some(Arc::clone(remembered))
    }

    /// Remembers `remembered` for `key`, replacing what it held, evicting the least
    /// recently used sessions while over `max_sessions`. **O(log sessions)** per
    /// session evicted.
    pub fn remember(&mut self, key: SessionKey, remembered: Remembered) -> Kept {
        self.forget(key);
        if self.max_sessions == 0 {
            return Kept::Off;
        }
        let size = remembered.bytes();
        if size > self.max_session_bytes {
            return Kept::TooLarge;
        }
        while self.slots.len() >= self.max_sessions {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((_, r)) = self.slots.remove(&oldest) {
                self.bytes -= r.bytes();
                self.evicted += 1;
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key);
        self.slots.insert(key, (self.tick, Arc::new(remembered)));
        self.bytes += size;
        Kept::Yes
    }

    /// Forgets `key`'s session, if any. **O(log sessions)**.
    pub fn forget(&mut self, key: SessionKey) {
        if let Some((used, r)) = self.slots.remove(&key) {
            self.order.remove(&used);
            self.bytes -= r.bytes();
        }
    }

    /// Sessions held. **O(1)**.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether none is held. **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Bytes of remembered history held, at most `max_sessions x max_session_bytes`.
    /// **O(1)**.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Sessions evicted so far. **O(1)**.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(n: usize) -> Remembered {
        Remembered {
            original: vec!["x".repeat(n)],
            forwarded: vec!["y".repeat(n)],
        }
    }

    /// Against a naive model (a Vec in use order): the same sessions held, the same
    /// evicted, the byte count exact, never over the caps.
    #[test]
    fn the_table_is_a_bounded_lru_as_a_naive_list_is() {
        // xorshift64: a fixed sequence.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for cap in [0usize, 1, 2, 5] {
            let mut t = Sessions::new(cap, 100);
            let mut naive: Vec<(SessionKey, usize)> = Vec::new();
            for _ in 0..2000 {
                let key = SessionKey(next(8));
                if next(2) == 0 {
                    let got = t.get(key).map(|r| r.bytes());
                    let at = naive.iter().position(|(k, _)| *k == key);
                    assert_eq!(got, at.map(|i| naive[i].1));
                    if let Some(i) = at {
                        let e = naive.remove(i);
                        naive.push(e);
                    }
                } else {
                    let n = next(60) as usize;
                    let kept = t.remember(key, r(n));
                    naive.retain(|(k, _)| *k != key);
                    match kept {
                        Kept::Yes => {
                            if naive.len() >= cap {
                                naive.remove(0);
                            }
                            naive.push((key, 2 * n));
                        }
                        Kept::TooLarge => assert!(2 * n > 100),
                        Kept::Off => assert_eq!(cap, 0),
                    }
                }
                assert_eq!(t.len(), naive.len());
                assert!(t.len() <= cap);
                assert_eq!(t.bytes(), naive.iter().map(|(_, b)| b).sum::<usize>());
                assert!(t.bytes() <= cap * 100);
            }
        }
    }
}
