//! The log's shape, kept incrementally beside the entries: where messages, user turns
//! and tool groups start. Strategies and triggers read it instead of scanning the log.
//!
//! Definitions, in terms of records:
//!
//! - A **message** starts at every record not [bound to the previous
//!   one](crate::Record::bound_to_previous) (and at record 0): the records of one
//!   provider message are bound together, so a message start is the only place a cut
//!   can fall. A summary record starts a message of its own.
//! - A **user turn** starts at a `user` record that starts a message. Tool results,
//!   summaries and `user` records bound inside another message (text typed beside tool
//!   results) start no turn. Records before the first turn start (a leading summary)
//!   belong to no turn.
//! - A **tool group** is an assistant message holding at least one `tool_use` (the
//!   group starts at that message's first record), with the results of its calls.
//!   Calls of one message share a group, however their results arrive. Groups whose
//!   calls interleave (one message's results after the next message's calls, as
//!   Responses items do) overlap; a compaction takes them together, between two legal
//!   cuts.
//!
//! Kept where: in the compaction layer, not the core, because "user turn" and "tool
//! group" depend on kinds the tracker does not otherwise read, and the strategies that
//! use them live here. Cost: **O(1)** per appended record (a withdrawn call: its
//! message's length, see [`Structure::call_withdrawn`]); a region replacement costs
//! **O(r + min(s, m))** for `r` records replaced and `s` starts before the last
//! region's end or `m` from the first region's start on (whichever side is shorter,
//! as the tracker does); in-place edits change nothing here.

use std::collections::VecDeque;

use crate::core::index::Remap;
use crate::{Record, RecordKind, Replacement};

/// Increasing record positions, renumbered in place through region replacements.
/// A stored value `v` stands for position `v - offset` (wrapping), so that the
/// positions after the last region all move down with one change of `offset`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Starts {
    stored: VecDeque<usize>,
    offset: usize,
}

impl Starts {
    fn get(&self, k: usize) -> Option<usize> {
        self.stored.get(k).map(|v| v.wrapping_sub(self.offset))
    }

    /// Number of starts. **O(1)**.
    pub(crate) fn len(&self) -> usize {
        self.stored.len()
    }

    /// Appends `at`, past every start held. **O(1)** amortized.
    pub(crate) fn push(&mut self, at: usize) {
        debug_assert!(self.last().is_none_or(|l| l < at));
        self.stored.push_back(at.wrapping_add(self.offset));
    }

    /// The last start. **O(1)**.
    pub(crate) fn last(&self) -> Option<usize> {
        self.len().checked_sub(1).and_then(|k| self.get(k))
    }

    /// The `k`-th start from the end (`k = 1` is the last). **O(1)**.
    pub(crate) fn nth_from_end(&self, k: usize) -> Option<usize> {
        self.len().checked_sub(k).and_then(|i| self.get(i))
    }

    /// Index of the first start at or after `pos`. **O(log n)**.
    pub(crate) fn index_at_or_after(&self, pos: usize) -> usize {
        let offset = self.offset;
        self.stored
            .partition_point(|v| v.wrapping_sub(offset) < pos)
    }

    /// Removes the start at `pos`, if there is one. **O(log n + min(i, n - i))** for
    /// the start's index `i` of `n`: **O(log n)** for the last.
    pub(crate) fn remove(&mut self, pos: usize) {
        let i = self.index_at_or_after(pos);
        if self.get(i) == Some(pos) {
            self.stored.remove(i);
        }
    }

    /// The starts in `from..to`, increasing. **O(log n)** to create, **O(1)** per item.
    pub(crate) fn range(&self, from: usize, to: usize) -> impl Iterator<Item = usize> + '_ {
        (self.index_at_or_after(from)..self.len())
            .filter_map(|k| self.get(k))
            .take_while(move |&p| p < to)
    }

    /// Every start, increasing. **O(1)** per item.
    pub(crate) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.stored.iter().map(|v| v.wrapping_sub(self.offset))
    }

    /// Renumbers through `regions` (see [`Remap`]): starts inside a region go, the
    /// others move. Only the shorter side is rewritten.
    /// **O(log n + min(before the last end, from the first start on))**.
    fn replace(&mut self, regions: &[Replacement], remap: &Remap<'_>) {
        let (Some(first), Some(last)) = (regions.first(), regions.last()) else {
            return;
        };
        let before_last = self.index_at_or_after(last.end);
        let from_first = self.index_at_or_after(first.start);
        if before_last <= self.len() - from_first {
            let mut moved = Vec::with_capacity(before_last);
            for _ in 0..before_last {
                if let Some(v) = self.stored.pop_front() {
                    moved.extend(remap.record(v.wrapping_sub(self.offset)));
                }
            }
            // Every start from `last.end` on moves down by what the regions lost.
            self.offset = self.offset.wrapping_add(remap.gone());
            for p in moved.into_iter().rev() {
                self.stored.push_front(p.wrapping_add(self.offset));
            }
        } else {
            let tail = self.stored.split_off(from_first);
            for v in tail {
                if let Some(p) = remap.record(v.wrapping_sub(self.offset)) {
                    self.stored.push_back(p.wrapping_add(self.offset));
                }
            }
        }
    }
}

/// The incremental index of messages, user turns and tool groups (see the module docs).
#[derive(Clone, Debug, Default)]
pub(crate) struct Structure {
    /// Number of messages.
    pub(crate) messages: usize,
    /// Where user turns start.
    pub(crate) turns: Starts,
    /// Where tool groups start.
    pub(crate) groups: Starts,
    /// Where the last message starts.
    last_message: usize,
}

/// Whether `record` at `at` starts a message.
pub(crate) fn starts_message(record: &Record, at: usize) -> bool {
    at == 0 || !record.is_bound_to_previous()
}

impl Structure {
    /// Takes in record `at` (the new last record). **O(1)** amortized.
    pub(crate) fn push(&mut self, record: &Record, at: usize) {
        if starts_message(record, at) {
            self.messages += 1;
            self.last_message = at;
            if matches!(record.kind(), RecordKind::User) {
                self.turns.push(at);
            }
        }
        if matches!(record.kind(), RecordKind::ToolUse(_))
            && self.groups.last() != Some(self.last_message)
        {
            self.groups.push(self.last_message);
        }
    }

    /// Record `at`, a `tool_use` until now, became a record of another kind (its call
    /// was withdrawn, `Log::handle`); record `i` is read by `record(i)`, `len` of
    /// them. Its message stops being a tool group when it holds no other `tool_use`.
    /// Message starts and user turns do not change (the record keeps its binding).
    /// **O(m + log g)** for a message of `m` records and `g` groups (**O(m)** in the
    /// last message, the only one a stream decoder withdraws from).
    pub(crate) fn call_withdrawn<'a>(
        &mut self,
        at: usize,
        len: usize,
        record: impl Fn(usize) -> &'a Record,
    ) {
        let start = if at >= self.last_message {
            self.last_message
        } else {
            (0..=at)
                .rev()
                .find(|&i| starts_message(record(i), i))
                .unwrap_or(0)
        };
        let mut i = start;
        while i < len && (i == start || !starts_message(record(i), i)) {
            if matches!(record(i).kind(), RecordKind::ToolUse(_)) {
                return;
            }
            i += 1;
        }
        self.groups.remove(start);
    }

    /// Renumbers through `regions`, which held `gone_messages` message starts; the
    /// log is now `new_len` records long, record `i` read by `record(i)`.
    /// **O(min side)** as the module docs say (the caller counted the message starts
    /// while reading the regions).
    pub(crate) fn replace<'a>(
        &mut self,
        regions: &[Replacement],
        gone_messages: usize,
        new_len: usize,
        record: impl Fn(usize) -> &'a Record,
    ) {
        let remap = Remap::new(regions);
        let summaries = regions
            .iter()
            .filter(|r| r.summary_tokens.is_some())
            .count();
        self.messages = self.messages - gone_messages + summaries;
        self.turns.replace(regions, &remap);
        self.groups.replace(regions, &remap);
        self.last_message = match remap.record(self.last_message) {
            Some(at) => at,
            // The last message was inside the last region, which ended the log: the
            // new last message is the last message start left (a summary, or the
            // message before a removed region).
            None => (0..new_len)
                .rev()
                .find(|&i| starts_message(record(i), i))
                .unwrap_or(0),
        };
    }

    /// Checks the index against a scan of `records` (the whole log). **O(n)**. For
    /// tests and fuzzers, through `Log::assert_invariants`.
    pub(crate) fn check<'a>(
        &self,
        records: impl Iterator<Item = &'a Record>,
    ) -> Result<(), String> {
        let mut want = Structure::default();
        for (at, r) in records.enumerate() {
            want.push(r, at);
        }
        if self.messages != want.messages {
            return Err(format!(
                "{} messages, a scan finds {}",
                self.messages, want.messages
            ));
        }
        let (turns, want_turns): (Vec<usize>, Vec<usize>) =
            (self.turns.iter().collect(), want.turns.iter().collect());
        if turns != want_turns {
            return Err(format!(
                "turn starts {turns:?}, a scan finds {want_turns:?}"
            ));
        }
        let (groups, want_groups): (Vec<usize>, Vec<usize>) =
            (self.groups.iter().collect(), want.groups.iter().collect());
        if groups != want_groups {
            return Err(format!(
                "tool group starts {groups:?}, a scan finds {want_groups:?}"
            ));
        }
        if want.messages > 0 && self.last_message != want.last_message {
            return Err(format!(
                "the last message starts at {}, a scan finds {}",
                self.last_message, want.last_message
            ));
        }
        Ok(())
    }
}
