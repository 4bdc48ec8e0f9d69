//! The two position indexes behind the tracker: prefix token sums and the set of legal
//! cuts, both stored in fixed **blocks of 64 record slots**.
//!
//! # Layout, and why
//!
//! - [`PrefixSums`]: per block, one `u64` *base* (the tokens before the block's first
//!   record) in a dense deque of bases, and the 64 inclusive sums of its records as
//!   `u32` offsets from that base in a boxed array of 256 bytes. **4.1-4.3 bytes per
//!   record** instead of 8 for a plain `u64` per record, and no growth slack on the
//!   offsets (blocks are allocated one at a time; only the deques of 8-16 bytes per
//!   block double). A block whose offsets outgrow `u32` (4.29 billion tokens within 64
//!   records: only absurd inputs) is stored as `u64` offsets instead, so no input is
//!   refused or truncated.
//! - [`LegalCuts`]: one bit per cut position, **0.125 bytes per record**, plus the
//!   number of legal cuts and the largest one.
//!
//! A search for the record where a token target is reached costs a binary search over
//! the bases (1/64 of the records: 1.25 MB at 10^7 records, which stays in the L3
//! cache, its upper levels in L1/L2) and one count over a block's 64 offsets (four
//! cache lines, loaded together, the only likely miss to main memory). The largest
//! legal cut at or before a position is one word of the bitmap, or a scan back over
//! whole words through a stretch without legal cuts (a call pending for a long time);
//! positions at or past the largest legal cut answer in **O(1)**. Measured against the
//! earlier layout (sorted lists with a sampled top level) in `cargo bench --bench
//! query` (numbers in the README).
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

/// Which side of a removed range a splice moves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Moved {
    /// The elements before the range move (towards the back).
    Head,
    /// The elements after the range move (towards the front).
    Tail,
}

impl Moved {
    /// The shorter side of removing `start..end` from `len` elements.
    pub(crate) fn shorter(len: usize, start: usize, end: usize) -> Moved {
        if start <= len - end {
            Moved::Head
        } else {
            Moved::Tail
        }
    }
}

/// Replaces `dq[start..end]` by `item` (if any), moving only the elements on `side`;
/// each moved element passes through `fix`. **O(end - start + moved)**, using only
/// `pop_front`/`push_front` (head) or `split_off`/`truncate`/`extend` (tail), whose
/// costs std documents. Shrinks the deque when it holds less than a quarter of its
/// capacity, which costs **O(len)** but needs at least `len` removals since the last
/// growth or shrink: **O(1)** amortized per removed element.
pub(crate) fn splice_one<T>(
    dq: &mut VecDeque<T>,
    start: usize,
    end: usize,
    item: Option<T>,
    side: Moved,
    mut fix: impl FnMut(&mut T),
) {
    debug_assert!(start <= end && end <= dq.len());
    match side {
        Moved::Head => {
            let mut head = Vec::with_capacity(start);
            for _ in 0..start {
                head.extend(dq.pop_front());
            }
            for _ in start..end {
                dq.pop_front();
            }
            if let Some(item) = item {
                dq.push_front(item);
            }
            for mut value in head.into_iter().rev() {
                fix(&mut value);
                dq.push_front(value);
            }
        }
        Moved::Tail => {
            let tail = dq.split_off(end);
            dq.truncate(start);
            dq.extend(item);
            dq.extend(tail.into_iter().map(|mut value| {
                fix(&mut value);
                value
            }));
        }
    }
    if dq.capacity() > 4 * dq.len() + 16 {
        dq.shrink_to(2 * dq.len());
    }
}

mod cuts;
mod sums;
#[cfg(test)]
mod tests;

pub(crate) use cuts::LegalCuts;
pub(crate) use sums::PrefixSums;
