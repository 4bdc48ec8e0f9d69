//! Compaction windows: which region to summarize, as pair atoms.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

use super::Log;
use crate::{CallId, Defer, RecordKind};

/// Which legal cut ends the region when the token target lands inside a pair.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub enum Direction {
    /// The largest legal cut at or before the target, within the lookback: the seed's
    /// procedure ([`Tracker::select_legal_cut`](crate::Tracker::select_legal_cut)).
    /// Compacts at most what was asked.
    #[default]
    WalkBack,
    /// The smallest legal cut that compacts at least the target, within the lookback
    /// past it: for callers that must get under a budget.
    Forward,
}

/// Which window of the log to compact: the pinned head, the token target and how far
/// the region's end may move from it, which way, and how arguments are written.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Window {
    /// Records pinned at the front (system prompt, first user message); never
    /// compacted. When record `keep_head` is bound to the one before it, the head
    /// extends to the next legal cut.
    pub keep_head: usize,
    /// Tokens to compact, counted from the start of the log (head included), as in
    /// [`Tracker::select_legal_cut`](crate::Tracker::select_legal_cut).
    pub target_tokens: u64,
    /// How far from the target the region's end may move, in tokens. `None`: 15% of
    /// the target, as the seed suggests.
    pub lookback_tokens: Option<u64>,
    /// Which way to move from the target.
    pub direction: Direction,
    /// How to write arguments into the summary's units.
    pub arguments: super::ArgumentPolicy,
}

impl Window {
    /// A window compacting about `target_tokens`, walking back, lookback 15% of the
    /// target, no pinned head, arguments verbatim. **O(1)**.
    pub fn new(target_tokens: u64) -> Self {
        Window {
            keep_head: 0,
            target_tokens,
            lookback_tokens: None,
            direction: Direction::WalkBack,
            arguments: super::ArgumentPolicy::Verbatim,
        }
    }

    /// Pins the first `records` records. **O(1)**.
    #[must_use]
    pub fn keep_head(mut self, records: usize) -> Self {
        self.keep_head = records;
        self
    }

    /// Sets the lookback in tokens. **O(1)**.
    #[must_use]
    pub fn lookback(mut self, tokens: u64) -> Self {
        self.lookback_tokens = Some(tokens);
        self
    }

    /// Sets the direction. **O(1)**.
    #[must_use]
    pub fn direction(mut self, direction: Direction) -> Self {
        self.direction = direction;
        self
    }

    /// Sets the argument policy. **O(1)**.
    #[must_use]
    pub fn arguments(mut self, arguments: super::ArgumentPolicy) -> Self {
        self.arguments = arguments;
        self
    }

    /// The lookback in effect: the one set, or 15% of the target. **O(1)**.
    pub fn effective_lookback(&self) -> u64 {
        self.lookback_tokens
            .unwrap_or_else(|| self.target_tokens / 100 * 15 + self.target_tokens % 100 * 15 / 100)
    }
}

/// One unit of a region, in log order. A pair is one atom, never two.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Atom {
    /// User or assistant text at `at`.
    Text {
        /// Its position.
        at: usize,
    },
    /// A call and its (first) result, both inside the region.
    Pair {
        /// The call's id.
        call_id: CallId,
        /// Position of the `tool_use`.
        use_at: usize,
        /// Position of its first `tool_result` (before `use_at` when the result came
        /// first).
        result_at: usize,
    },
    /// An earlier summary inside the region; its units are folded into the new one.
    Summary {
        /// Its position.
        at: usize,
        /// The calls it covers.
        covered: Vec<CallId>,
    },
    /// A result whose call is not in the region (an orphan, or a second result of a
    /// call answered before); it is dropped with the region.
    DroppedResult {
        /// Its position.
        at: usize,
        /// Its id.
        call_id: CallId,
    },
}

/// The region a compaction would summarize. Both ends are legal cuts.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Plan {
    /// Records to replace by one summary; `region.end` is where the retained tail
    /// starts. Empty when there is nothing to compact past the head.
    pub region: Range<usize>,
    /// The region's atoms, in log order (a pair sits at its `tool_use`... or at its
    /// first result when that came first).
    pub atoms: Vec<Atom>,
    /// Tokens of the region.
    pub region_tokens: u64,
    /// The log's length when planned.
    pub len: usize,
    pub(crate) generation: u64,
    pub(crate) arguments: super::ArgumentPolicy,
}

impl Plan {
    /// The calls the summary will cover, in log order: the pairs and the units of
    /// earlier summaries. **O(k)**.
    pub fn covered(&self) -> impl Iterator<Item = &CallId> {
        self.atoms.iter().flat_map(|a| match a {
            Atom::Pair { call_id, .. } => std::slice::from_ref(call_id),
            Atom::Summary { covered, .. } => covered.as_slice(),
            Atom::Text { .. } | Atom::DroppedResult { .. } => &[],
        })
    }
}

/// Why a plan could not be made: compaction should wait for the turn boundary.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// No legal cut lies within the lookback of the target.
    #[error("{0}")]
    NoLegalCut(Defer),
    /// The pinned head does not end at a legal cut, and no legal cut follows it yet
    /// (a call in the head or right after it is still in flight).
    #[error(
        "the pinned head of {keep_head} records does not end at a legal cut yet; defer compaction to the turn boundary"
    )]
    HeadOpen {
        /// The head asked for.
        keep_head: usize,
    },
}

impl Log {
    /// Names the region to summarize under `window`: from the end of the pinned head
    /// ([`Log::pinned_head`]: `keep_head`, or past the latest compaction record) to
    /// the legal cut the tracker picks for the token target. **O(log n + r log r)**
    /// for a region of `r` records (the sort puts pairs whose result came first and
    /// results without a call in log order) (the atoms are re-derived from the entries every time,
    /// never carried over from an earlier pass).
    ///
    /// A region that would end at or before the head is returned empty: nothing to
    /// compact. A region that would cover kept records ([`Payload::Kept`](super::Payload::Kept)) is
    /// narrowed to its largest stretch between them (the oldest of equal ones;
    /// **O(w log k)** more for `w` walls in it): one summary cannot stand on both
    /// sides of a wall.
    ///
    /// # Errors
    /// [`PlanError`] when no legal cut lies in the window, or the head is still open.
    pub fn plan(&self, window: &Window) -> Result<Plan, PlanError> {
        let t = &self.tracker;
        let start = t
            .legal_cut_at_or_after(self.pinned_head(window.keep_head))
            .ok_or(PlanError::HeadOpen {
                keep_head: window.keep_head,
            })?;
        let lookback = window.effective_lookback();
        let end = match window.direction {
            Direction::WalkBack => t.select_legal_cut(window.target_tokens, lookback),
            Direction::Forward => t.select_legal_cut_forward(window.target_tokens, lookback),
        }
        .map_err(PlanError::NoLegalCut)?;
        let region = self.largest_around_kept(start, end.max(start));
        Ok(self.plan_between(region.start, region.end, window.arguments))
    }

    /// `start..end` (both legal cuts) itself when it holds no kept record, else its
    /// largest stretch between kept records by tokens (the oldest of equal ones), an
    /// empty range at `start` when there is none: one summary cannot stand on both
    /// sides of a wall. **O(log k)**, plus **O(w log k)** for `w` walls in it.
    pub(crate) fn largest_around_kept(&self, start: usize, end: usize) -> Range<usize> {
        if self.kept_in(start..end).is_none() {
            return start..end;
        }
        let t = &self.tracker;
        let mut best = start..start;
        let mut best_tokens = 0;
        for r in self.around_kept(start, end) {
            let tokens = t
                .tokens_before(r.end)
                .zip(t.tokens_before(r.start))
                .map_or(0, |(e, s)| e.saturating_sub(s));
            if tokens > best_tokens {
                (best, best_tokens) = (r, tokens);
            }
        }
        best
    }

    /// The atoms of `start..end`, both legal cuts. **O(end - start)** expected.
    pub(super) fn atoms(&self, start: usize, end: usize) -> Vec<Atom> {
        let mut atoms = Vec::new();
        // Index of the pair atom of a call seen in the region.
        let mut pairs: HashMap<&str, usize> = HashMap::new();
        // Results seen in the region before any call with their id.
        let mut early: HashMap<&str, usize> = HashMap::new();
        let mut answered: Vec<bool> = Vec::new();
        for at in start..end {
            let kind = self.entries[at].record.kind();
            match kind {
                RecordKind::ToolUse(id) => {
                    let result_at = early.remove(id.as_str());
                    pairs.insert(id.as_str(), atoms.len());
                    atoms.push(Atom::Pair {
                        call_id: id.clone(),
                        use_at: at,
                        result_at: result_at.unwrap_or(at),
                    });
                    answered.push(result_at.is_some());
                }
                RecordKind::ToolResult(id) => match pairs.get(id.as_str()) {
                    Some(&i) if !answered[i] => {
                        if let Atom::Pair { result_at, .. } = &mut atoms[i] {
                            *result_at = at;
                        }
                        answered[i] = true;
                    }
                    _ => {
                        if !pairs.contains_key(id.as_str()) && !early.contains_key(id.as_str()) {
                            early.insert(id.as_str(), at);
                        } else {
                            atoms.push(Atom::DroppedResult {
                                at,
                                call_id: id.clone(),
                            });
                            answered.push(true);
                        }
                    }
                },
                RecordKind::Summary(ids) => {
                    atoms.push(Atom::Summary {
                        at,
                        covered: ids.to_vec(),
                    });
                    answered.push(true);
                }
                _ => {
                    atoms.push(Atom::Text { at });
                    answered.push(true);
                }
            }
        }
        // Results whose call never came in the region: dropped, in place.
        let mut dropped: Vec<(usize, &str)> = early.into_iter().map(|(id, at)| (at, id)).collect();
        dropped.sort_unstable();
        for (at, id) in dropped {
            atoms.push(Atom::DroppedResult {
                at,
                call_id: CallId::from(id),
            });
        }
        atoms.sort_by_key(|a| match a {
            Atom::Text { at } | Atom::Summary { at, .. } | Atom::DroppedResult { at, .. } => *at,
            Atom::Pair {
                use_at, result_at, ..
            } => (*use_at).min(*result_at),
        });
        debug_assert!(
            answered.iter().all(|&a| a),
            "a region bounded by legal cuts holds whole pairs"
        );
        atoms
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "compact records {}..{} ({} tokens, {} calls); keep {}..{}",
            self.region.start,
            self.region.end,
            self.region_tokens,
            self.covered().count(),
            self.region.end,
            self.len
        )
    }
}
