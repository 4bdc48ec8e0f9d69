//! The call book: which calls are pending, which results came before their call, and
//! which call ids have been used, keyed by a 128-bit fingerprint of the id.
//!
//! Why fingerprints: every completed call must be remembered (a second `tool_use` with
//! the same id is an error), but storing every id string costs 40-60 bytes per call.
//! A keyed 128-bit fingerprint costs 16 bytes and is computed once per record; two
//! different ids collide with probability about 2^-128 per pair, far below the rate of
//! memory bit flips. Only the ids still pending (and results still waiting for their
//! call) are kept as strings, for reporting.
//!
//! Hashing: the fingerprint is foldhash's quality hash under two per-book random seeds.
//! The maps use the fingerprint's low bits directly (it is already uniformly mixed), so
//! an id is hashed exactly once per record. An attacker who controls call ids but not
//! the seeds cannot aim collisions at the table; see `Tracker`'s docs on hashing.

use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};

use hashbrown::{HashMap, HashSet};

use crate::record::CallId;

/// A keyed 128-bit fingerprint of a call id, as two words (8-byte aligned, so map
/// entries stay 16 bytes where a `u128` would pad them to 32).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Fingerprint(u64, u64);

impl Hash for Fingerprint {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The first word is already a keyed, uniformly mixed hash: hand it over as is.
        state.write_u64(self.0);
    }
}

/// Passes a [`Fingerprint`]'s first word through unchanged.
#[derive(Default)]
pub(crate) struct FingerprintHasher(u64);

impl Hasher for FingerprintHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `Fingerprint` is hashed with this hasher, through `write_u64`; stay
        // correct (if slow) for anything else.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, word: u64) {
        self.0 ^= word;
    }
}

type Build = BuildHasherDefault<FingerprintHasher>;

/// A call whose `tool_use` has been appended and whose `tool_result` has not.
#[derive(Clone, Debug)]
pub(crate) struct PendingCall {
    pub(crate) id: CallId,
    pub(crate) at: u32,
}

/// A result that arrived before any `tool_use` with its id.
#[derive(Clone, Debug)]
pub(crate) struct EarlyResult {
    pub(crate) id: CallId,
    pub(crate) first_at: u32,
    /// Positions of further results with this id (duplicates), in log order: when a
    /// compaction drops the first, the next one takes its place. Empty in clean logs.
    pub(crate) later: Vec<u32>,
}

/// What appending a `tool_use` did.
pub(crate) enum UseOutcome {
    /// The call is now pending.
    Pending,
    /// A result with this id came earlier, at `first_result`: the call is answered, and
    /// every cut in `(first_result, at]` is illegal (it would orphan that result).
    AnsweredEarlier { first_result: u32 },
}

/// What appending a `tool_result` did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum ResultOutcome {
    /// It answered a pending call.
    Answered,
    /// Its id already had a result (the call was answered, or an earlier result is
    /// still waiting for its call).
    Duplicate,
    /// No call with its id has been seen yet.
    Orphan,
}

/// Where an id was seen before, when a second `tool_use` arrives.
pub(crate) enum SeenUse {
    /// Still pending, called at this position.
    Pending(u32),
    /// Answered; its position is not kept (see the module docs).
    Completed,
}

#[derive(Clone)]
pub(crate) struct CallBook {
    seeds: [u64; 2],
    pending: HashMap<Fingerprint, PendingCall, Build>,
    early: HashMap<Fingerprint, EarlyResult, Build>,
    completed: HashSet<Fingerprint, Build>,
}

impl CallBook {
    pub(crate) fn new() -> Self {
        let random = foldhash::quality::RandomState::default();
        let seeds = [random.hash_one(0x5eed_u64), random.hash_one(0xc0ffee_u64)];
        Self::with_seeds(seeds)
    }

    pub(crate) fn with_seeds(seeds: [u64; 2]) -> Self {
        CallBook {
            seeds,
            pending: HashMap::default(),
            early: HashMap::default(),
            completed: HashSet::default(),
        }
    }

    /// **O(len(id))**: one pass of a fast hash per seed.
    pub(crate) fn fingerprint(&self, id: &str) -> Fingerprint {
        Fingerprint(
            foldhash::quality::FixedState::with_seed(self.seeds[0]).hash_one(id),
            foldhash::quality::FixedState::with_seed(self.seeds[1]).hash_one(id),
        )
    }

    /// Whether a `tool_use` with this fingerprint was already appended. **O(1)** expected.
    pub(crate) fn seen_use(&self, fp: &Fingerprint) -> Option<SeenUse> {
        if let Some(p) = self.pending.get(fp) {
            return Some(SeenUse::Pending(p.at));
        }
        self.completed.contains(fp).then_some(SeenUse::Completed)
    }

    /// Records a `tool_use`. The caller has checked [`CallBook::seen_use`] is `None`.
    /// **O(1)** amortized.
    pub(crate) fn record_use(&mut self, fp: Fingerprint, id: CallId, at: u32) -> UseOutcome {
        if let Some(early) = self.early.remove(&fp) {
            self.completed.insert(fp);
            UseOutcome::AnsweredEarlier {
                first_result: early.first_at,
            }
        } else {
            self.pending.insert(fp, PendingCall { id, at });
            UseOutcome::Pending
        }
    }

    /// Records a `tool_result`. **O(1)** amortized.
    pub(crate) fn record_result(&mut self, fp: Fingerprint, id: CallId, at: u32) -> ResultOutcome {
        if self.pending.remove(&fp).is_some() {
            self.completed.insert(fp);
            ResultOutcome::Answered
        } else if self.completed.contains(&fp) {
            ResultOutcome::Duplicate
        } else if let Some(early) = self.early.get_mut(&fp) {
            early.later.push(at);
            ResultOutcome::Duplicate
        } else {
            self.early.insert(
                fp,
                EarlyResult {
                    id,
                    first_at: at,
                    later: Vec::new(),
                },
            );
            ResultOutcome::Orphan
        }
    }

    /// Whether any record (call, result or summary) with this fingerprint was seen.
    /// **O(1)** expected.
    pub(crate) fn seen_any(&self, fp: &Fingerprint) -> bool {
        self.pending.contains_key(fp) || self.early.contains_key(fp) || self.completed.contains(fp)
    }

    /// Records a call covered by a summary: called and answered at once. The caller has
    /// checked [`CallBook::seen_any`] is false. **O(1)** amortized.
    pub(crate) fn record_covered(&mut self, fp: Fingerprint) {
        self.completed.insert(fp);
    }

    /// Records `start..end` became one record at `start`: results waiting for their call
    /// inside the region are dropped with it (the next result with the same id, if
    /// any, becomes the one waiting), and positions from `end` on move down by
    /// `end - start - 1`. Pending calls all lie at or after `end` (the region ends at a
    /// legal cut). **O(p + q)** for `p` pending calls and `q` early results (and their
    /// duplicates).
    pub(crate) fn replace_region(&mut self, start: u32, end: u32) {
        let down = end - start - 1;
        for p in self.pending.values_mut() {
            debug_assert!(
                p.at >= end,
                "pending call {} inside a compacted region",
                p.id
            );
            p.at -= down;
        }
        let moved = |p: u32| {
            if p >= end {
                Some(p - down)
            } else {
                (p < start).then_some(p)
            }
        };
        self.early.retain(|_, e| {
            let later = std::mem::take(&mut e.later);
            let mut kept = std::iter::once(e.first_at).chain(later).filter_map(moved);
            match kept.next() {
                Some(first) => {
                    e.first_at = first;
                    e.later = kept.collect();
                    true
                }
                None => false,
            }
        });
    }

    pub(crate) fn pending_is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len()
    }

    pub(crate) fn pending(&self) -> impl Iterator<Item = &PendingCall> {
        self.pending.values()
    }

    pub(crate) fn completed_len(&self) -> usize {
        self.completed.len()
    }

    /// Heap bytes held by the maps (their tables and the pending ids' strings).
    pub(crate) fn heap_bytes(&self) -> usize {
        fn table<K, V>(cap: usize) -> usize {
            // hashbrown: one control byte per bucket plus a group of trailing ones;
            // buckets are the next power of two above cap * 8 / 7.
            if cap == 0 {
                return 0;
            }
            let buckets = (cap * 8 / 7).next_power_of_two();
            buckets * (std::mem::size_of::<(K, V)>() + 1) + 16
        }
        table::<Fingerprint, PendingCall>(self.pending.capacity())
            + table::<Fingerprint, EarlyResult>(self.early.capacity())
            + table::<Fingerprint, ()>(self.completed.capacity())
            + self.pending.values().map(|p| p.id.len()).sum::<usize>()
            + self
                .early
                .values()
                .map(|e| e.id.len() + e.later.capacity() * 4)
                .sum::<usize>()
    }

    /// Checks the book's own invariants. Panics with a description if one fails.
    pub(crate) fn assert_invariants(&self, len: usize) {
        for (fp, p) in &self.pending {
            assert_eq!(
                *fp,
                self.fingerprint(&p.id),
                "pending key is the id's fingerprint"
            );
            assert!(
                (p.at as usize) < len,
                "pending call {} at {} is inside the log",
                p.id,
                p.at
            );
            assert!(
                !self.completed.contains(fp),
                "pending call {} is not completed",
                p.id
            );
            assert!(
                !self.early.contains_key(fp),
                "pending call {} has no early result",
                p.id
            );
        }
        for (fp, e) in &self.early {
            assert_eq!(
                *fp,
                self.fingerprint(&e.id),
                "early key is the id's fingerprint"
            );
            assert!(
                (e.first_at as usize) < len,
                "early result {} is inside the log",
                e.id
            );
            let mut prev = e.first_at;
            for &p in &e.later {
                assert!(
                    p > prev && (p as usize) < len,
                    "further results of {} follow the first, inside the log",
                    e.id
                );
                prev = p;
            }
            assert!(
                !self.completed.contains(fp),
                "early result {} has no call yet",
                e.id
            );
        }
    }
}
