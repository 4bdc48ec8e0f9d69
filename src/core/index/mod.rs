//! The two position indexes behind the tracker: prefix token sums and the set of legal
//! cuts, both stored in fixed **blocks of 64 record slots**.
//!
//! # Layout, and why
//!
//! - [`PrefixSums`]: per block, one `u64` *base* (the tokens before the block's first
//!   record) and the 64 inclusive sums of its records as `u32` offsets from that base,
//!   stored inline (264 bytes a block with its tag): **4.25 bytes per record** instead
//!   of 8 for a plain `u64` per record. A block whose offsets outgrow `u32` (4.29
//!   billion tokens within 64 records: only absurd inputs) is stored as `u64` offsets
//!   behind a pointer instead, so no input is refused or truncated.
//! - [`LegalCuts`]: one bit per cut position, **0.125 bytes per record**, plus the
//!   number of legal cuts and the largest one.
//!
//! Bases, blocks and bitmap words live in [`chunked::Chunked`] deques: fixed chunks
//! (4-33 KB) allocated one at a time, so no append ever copies the history (a
//! `VecDeque` doubling copied up to 40 MB at 10^7 records and left half of it idle).
//!
//! # The query, in loads
//!
//! `select_legal_cut` at 10^7 records: a binary search of the bases' upper level
//! (every 64th base, 20 KB: in L1/L2), a count over the 64 bases under it (eight
//! lines requested together: **one** miss), then the target's block (its five lines
//! requested together, all 64 offsets counted so that none waits for another) and,
//! in parallel with it, the bitmap word of the block's first record
//! ([`LegalCuts::warm`]): a **second** miss. The largest legal cut at or before the
//! target is in that word when cuts are dense, and whether it clears the lookback
//! floor is read off the same block ([`PrefixSums::within_lookback`]); the floor
//! itself, a gallop back to another block, is found only to explain a deferral. So
//! about two dependent DRAM loads; measured against one in `cargo bench --bench query
//! -- query_latency` and `cutpoint bench` (numbers in docs/performance.md). A scan
//! back through a stretch without legal cuts (a call pending for a long time) adds
//! one word per 64 positions; positions at or past the largest legal cut answer in
//! **O(1)**.
//!
//! Past 2^17 blocks (8.4 million records; 12.5 MB of bases at 10^8) the 64 bases are no longer
//! a cache hit, so the search reads smaller levels instead (`sums::Upper`): every
//! 4,096th base (in L1), 64 of the every-64th bases, then each block's base within its
//! group as a scaled `u16` (3.1 MB at 10^8), which names the block unless the target
//! is within one scale step of a base (then the 64 bases decide).
//!
//! # Compaction
//!
//! A compacted region (records `start..end` replaced by one summary record, see
//! [`Tracker::replace_region`](crate::Tracker::replace_region)) costs
//! **O(removed / 64 + min(start, len - end) + 64)**, never a pass over the whole log:
//! only the shorter side moves. When the head (records before `start`) is the shorter
//! side, it and the summary are rewritten into the slots just before record `end`,
//! whole blocks in front of them are dropped, and the records from `end` on keep their
//! slots and stored values: what every later sum gains or loses is one *shift* added
//! to every stored base (bases wrap: `stored.wrapping_add(shift)` is the true value;
//! every comparison is made on true values, which are monotone). Otherwise the tail
//! moves down. The pinned head and earlier summaries keep `start` small, so in practice
//! the cost is the removed region's blocks plus the head.
//!
//! Positions fit in `u32` (a log holds at most [`MAX_RECORDS`] records); the public API
//! speaks `usize`.

use std::collections::VecDeque;

/// The most records one tracker holds: cut positions `0..=len` must fit in a `u32`.
pub const MAX_RECORDS: usize = u32::MAX as usize;

/// Record slots per block; also the bits per word of the legal-cut bitmap.
const B: usize = 64;

/// One region of a batched replacement ([`Tracker::replace_regions`](crate::Tracker::replace_regions)):
/// records `start..end` (both legal cuts, `start < end`) become one summary record of
/// `summary_tokens` tokens, or nothing at all when `summary_tokens` is `None`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Replacement {
    /// The first record replaced.
    pub start: usize,
    /// The first record kept after the region.
    pub end: usize,
    /// Tokens of the one record that replaces the region; `None` removes it.
    pub summary_tokens: Option<u64>,
}

impl Replacement {
    /// Records `start..end` become one summary record of `tokens` tokens. **O(1)**.
    pub fn summary(start: usize, end: usize, tokens: u64) -> Self {
        Replacement {
            start,
            end,
            summary_tokens: Some(tokens),
        }
    }

    /// Records `start..end` are removed, nothing takes their place. **O(1)**.
    pub fn removal(start: usize, end: usize) -> Self {
        Replacement {
            start,
            end,
            summary_tokens: None,
        }
    }

    /// Records this region loses: its length, less the summary record. **O(1)**.
    pub fn gone(&self) -> usize {
        self.end - self.start - usize::from(self.summary_tokens.is_some())
    }
}

/// Where positions go under a batch of [`Replacement`]s (sorted, disjoint, each
/// `start < end`). **O(R)** to build for `R` regions; each lookup **O(log R)**.
pub(crate) struct Remap<'a> {
    regions: &'a [Replacement],
    /// `gone_before[k]`: records lost by regions `..k`.
    gone_before: Vec<usize>,
}

impl<'a> Remap<'a> {
    pub(crate) fn new(regions: &'a [Replacement]) -> Self {
        let mut gone_before = Vec::with_capacity(regions.len() + 1);
        let mut gone = 0;
        gone_before.push(0);
        for r in regions {
            gone += r.gone();
            gone_before.push(gone);
        }
        Remap {
            regions,
            gone_before,
        }
    }

    /// Records lost in all.
    pub(crate) fn gone(&self) -> usize {
        self.gone_before[self.regions.len()]
    }

    /// The new position of record `i`, `None` when a region swallows it.
    pub(crate) fn record(&self, i: usize) -> Option<usize> {
        let k = self.regions.partition_point(|r| r.end <= i);
        match self.regions.get(k) {
            Some(r) if r.start <= i => None,
            _ => Some(i - self.gone_before[k]),
        }
    }

    /// The new position of cut `c`, `None` when it lies strictly inside a region. A
    /// region's `start` and `end` stay cuts (the same one when it is removed).
    pub(crate) fn cut(&self, c: usize) -> Option<usize> {
        let k = self.regions.partition_point(|r| r.end < c);
        match self.regions.get(k) {
            Some(r) if r.start < c && c < r.end => None,
            Some(r) if c == r.end => {
                Some(r.start - self.gone_before[k] + usize::from(r.summary_tokens.is_some()))
            }
            _ => Some(c - self.gone_before[k]),
        }
    }
}

/// Replaces each of `regions` (sorted, disjoint, within `dq`) by its item (if any), in
/// one pass over the shorter side: the elements before the last region's end, or those
/// after the first region's start. **O(removed + min(last_end, len - first_start))**.
/// `items` holds one item per region, in order.
pub(crate) fn splice_many<T>(
    dq: &mut VecDeque<T>,
    regions: &[(usize, usize)],
    items: Vec<Option<T>>,
) {
    let (Some(&(first, _)), Some(&(_, last))) = (regions.first(), regions.last()) else {
        return;
    };
    debug_assert_eq!(regions.len(), items.len());
    let len = dq.len();
    if last <= len - first {
        // Take the front up to `last`, rebuild it, push it back.
        let mut front: Vec<T> = Vec::with_capacity(last);
        for _ in 0..last {
            front.extend(dq.pop_front());
        }
        let mut rebuilt: Vec<T> = Vec::with_capacity(last);
        let mut front = front.into_iter().enumerate().peekable();
        for (&(start, end), item) in regions.iter().zip(items) {
            while let Some((_, value)) = front.next_if(|(i, _)| *i < start) {
                rebuilt.push(value);
            }
            while front.next_if(|(i, _)| *i < end).is_some() {}
            rebuilt.extend(item);
        }
        for value in rebuilt.into_iter().rev() {
            dq.push_front(value);
        }
    } else {
        let tail = dq.split_off(first);
        let mut tail = tail
            .into_iter()
            .enumerate()
            .map(|(i, v)| (i + first, v))
            .peekable();
        for (&(start, end), item) in regions.iter().zip(items) {
            while let Some((_, value)) = tail.next_if(|(i, _)| *i < start) {
                dq.push_back(value);
            }
            while tail.next_if(|(i, _)| *i < end).is_some() {}
            dq.extend(item);
        }
        dq.extend(tail.map(|(_, v)| v));
    }
    if dq.capacity() > 4 * dq.len() + 16 {
        dq.shrink_to(2 * dq.len());
    }
}

mod chunked;
mod cuts;
mod sums;
#[cfg(test)]
mod tests;

pub(crate) use cuts::LegalCuts;
pub(crate) use sums::PrefixSums;
