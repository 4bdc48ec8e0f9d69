//! A deferral told in the index space `cut` prints: records for records JSONL,
//! messages for the provider formats, with the token distance of the nearest legal
//! cuts from the target.

use std::fmt;

use super::Transcript;
use crate::compact::{Direction, Window};
use crate::core::error::write_waiting_on;
use crate::{CallId, Defer, Tracker};

/// The deferral for a walk back that reached no legal cut past the end of the pinned
/// head, `head` (a legal cut), though `window`'s target lies past it by more than the
/// lookback: the cut the walk found is the head's end itself (the start of the
/// record holding the target, when that record alone exceeds the lookback), which
/// compacts nothing. That is the case of a walk that finds no legal cut at all, one
/// message later, and it is told the same way (defer to the turn boundary), never as
/// an empty success. `None` when the head's end lies within the lookback of the
/// target (nothing to compact, honestly), the search goes forward, or the log ends at
/// the head. **O(log n + k)** for `k` calls waited on.
pub fn defer_at_head(tracker: &Tracker, head: usize, window: &Window) -> Option<Defer> {
    let target = window.target_tokens;
    if window.direction == Direction::Forward
        || head >= tracker.len()
        || target.saturating_sub(tracker.tokens_before(head).unwrap_or(0))
            <= window.effective_lookback()
    {
        return None;
    }
    let target_index = tracker
        .first_record_reaching(target)
        .unwrap_or(tracker.len() - 1);
    Some(Defer {
        target_tokens: target,
        lookback_tokens: window.effective_lookback(),
        target_index,
        floor: head,
        nearest_legal_below: None,
        nearest_legal_above: tracker.legal_cut_at_or_after(target_index + 1),
        waiting_on: tracker.pending_before(target_index + 1),
    })
}

/// What a position counts.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum IndexSpace {
    /// Records (records JSONL).
    Records,
    /// Messages of a transcript (the provider formats).
    Messages,
}

impl IndexSpace {
    /// The word for `n` positions. **O(1)**.
    fn noun(self, n: usize) -> &'static str {
        match (self, n == 1) {
            (IndexSpace::Records, true) => "record",
            (IndexSpace::Records, false) => "records",
            (IndexSpace::Messages, true) => "message",
            (IndexSpace::Messages, false) => "messages",
        }
    }
}

/// A legal cut near a deferred target.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub struct NearCut {
    /// The cut, in the report's index space.
    pub at: usize,
    /// How many tokens it compacts short of the target (a cut below) or past it (a
    /// cut above).
    pub distance: u64,
}

/// A [`Defer`] told in the index space `cut` prints. The tracker's [`Defer`] counts
/// records of the live history; this names records of the file, or messages, and
/// how far each nearest legal cut lies from the target in tokens.
///
/// How the search works, as the message says: the target lands in the record (or
/// message) where the prefix sum first reaches it; the walk back starts there,
/// counting that record's own tokens, and goes on while the running sum stays
/// within the lookback; a legal cut anywhere in what it covered is taken.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct DeferReport {
    /// What positions count.
    pub space: IndexSpace,
    /// The token target.
    pub target_tokens: u64,
    /// The lookback (or, searching forward, the lookahead) in tokens.
    pub lookback_tokens: u64,
    /// The cuts the walk covered, lowest and highest (inclusive); `None` when it
    /// covered no message start (it stayed inside the message holding the target).
    pub searched: Option<(usize, usize)>,
    /// Where the target is reached: the record (records) or the message holding that
    /// record (messages).
    pub target_at: usize,
    /// Tokens of the record holding the target, which the walk counts first.
    pub target_record_tokens: u64,
    /// The nearest legal cut below the searched cuts, if any.
    pub below: Option<NearCut>,
    /// The nearest legal cut above them, if one exists yet.
    pub above: Option<NearCut>,
    /// The calls a deferred compaction waits for, in log order.
    pub waiting_on: Vec<CallId>,
    /// Whether the search went forward from the target (`compact --forward`) rather
    /// than walking back.
    pub forward: bool,
    /// Whether the only legal cut the walk reached is the end of the pinned head,
    /// which compacts nothing ([`defer_at_head`]).
    pub head_only: bool,
}

impl DeferReport {
    /// `defer` from `tracker`, in records. **O(k)** for `k` calls waited on.
    pub fn records(defer: &Defer, tracker: &Tracker) -> DeferReport {
        let searched = Some((defer.floor, defer.target_index));
        DeferReport::mapped(defer, tracker, IndexSpace::Records, searched, |c| c)
    }

    /// `defer` from the tracker of `t`'s live history (`tracker` and `owner` as
    /// [`Transcript::tracker`] returns them), in messages of `t`. **O(k)** for `k`
    /// calls waited on.
    pub fn messages(
        defer: &Defer,
        tracker: &Tracker,
        t: &Transcript,
        owner: &[usize],
    ) -> DeferReport {
        // A message index is a cut where that message starts: the walk covered the
        // starts of the messages whose first record lies in `floor..=target_index`.
        let first_start = owner.partition_point(|&m| m < t.message_at(owner, defer.floor));
        let low = if first_start == defer.floor {
            t.message_at(owner, defer.floor)
        } else {
            t.message_at(owner, defer.floor) + 1
        };
        let high = t.message_at(owner, defer.target_index);
        let searched = (low <= high).then_some((low, high));
        DeferReport::mapped(defer, tracker, IndexSpace::Messages, searched, |c| {
            t.message_at(owner, c)
        })
    }

    fn mapped(
        defer: &Defer,
        tracker: &Tracker,
        space: IndexSpace,
        searched: Option<(usize, usize)>,
        index: impl Fn(usize) -> usize,
    ) -> DeferReport {
        let before = |c: usize| tracker.tokens_before(c).unwrap_or(0);
        let target = defer.target_tokens;
        DeferReport {
            space,
            target_tokens: target,
            lookback_tokens: defer.lookback_tokens,
            searched,
            target_at: index(defer.target_index),
            target_record_tokens: tracker.record_tokens(defer.target_index).unwrap_or(0),
            below: defer.nearest_legal_below.map(|c| NearCut {
                at: index(c),
                distance: target.saturating_sub(before(c)),
            }),
            above: defer.nearest_legal_above.map(|c| NearCut {
                at: index(c),
                distance: before(c).saturating_sub(target),
            }),
            waiting_on: defer.waiting_on.clone(),
            forward: false,
            head_only: false,
        }
    }

    /// The same report for a walk that reached only the end of the pinned head
    /// ([`defer_at_head`]). **O(1)**.
    #[must_use]
    pub fn reaching_only_the_head(mut self) -> DeferReport {
        self.head_only = true;
        self
    }

    /// The same report for a search that went forward from the target
    /// ([`Direction::Forward`](crate::compact::Direction::Forward)). **O(1)**.
    #[must_use]
    pub fn searched_forward(mut self) -> DeferReport {
        self.forward = true;
        self
    }
}

impl fmt::Display for DeferReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (one, many) = (self.space.noun(1), self.space.noun(2));
        let (target, lookback, at) = (self.target_tokens, self.lookback_tokens, self.target_at);
        if self.forward && lookback == u64::MAX {
            // No lookahead limit: nothing past the target is legal yet.
            write!(
                f,
                "no legal cut from {one} {at} on yet, where the target of {target} tokens is reached; defer compaction to the turn boundary"
            )?;
        } else if self.forward {
            write!(
                f,
                "no legal cut from {one} {at} on compacts the target of {target} tokens within the {lookback}-token lookahead past it; defer compaction to the turn boundary"
            )?;
        } else {
            let own = self.target_record_tokens;
            let holder = match self.space {
                IndexSpace::Records => format!("record {at} ({own} tokens)"),
                IndexSpace::Messages => format!("message {at} (in a block of {own} tokens)"),
            };
            let walk = if own > lookback {
                format!(
                    "the target of {target} tokens is reached in {holder}, which alone exceeds the {lookback}-token lookback, so the walk back (which counts the target's own tokens first) searched only there"
                )
            } else {
                format!(
                    "the target of {target} tokens is reached in {holder}, and the walk back from there, counting those {own} tokens first, stays within the {lookback}-token lookback"
                )
            };
            match self.searched {
                Some((low, _)) if self.head_only => write!(
                    f,
                    "no legal cut past the pinned head: the target of {target} tokens is reached in {holder}, and the only legal cut the walk back reaches is {one} {low}, where the pinned head ends, which compacts nothing"
                )?,
                Some((low, high)) if own <= lookback => write!(
                    f,
                    "no legal cut at {many} {low}..={high}: {walk} down to {one} {low}"
                )?,
                Some((low, high)) => write!(f, "no legal cut at {many} {low}..={high}: {walk}")?,
                None => write!(
                    f,
                    "no legal cut within the walk: {walk}, not reaching the start of {one} {at}"
                )?,
            }
            f.write_str("; defer compaction to the turn boundary")?;
        }
        write_waiting_on(f, &self.waiting_on)?;
        match self.below {
            Some(c) => write!(
                f,
                "; nearest legal cut below: {one} {} ({} tokens short of the target)",
                c.at, c.distance
            )?,
            None => f.write_str("; no legal cut below")?,
        }
        if let Some(c) = self.above {
            write!(
                f,
                "; nearest legal cut above: {one} {} ({} tokens past the target)",
                c.at, c.distance
            )?;
        }
        Ok(())
    }
}
