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
use std::sync::OnceLock;

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

/// The offsets of one block's records from its base.
///
/// Every slot holds a value, so that the whole block is non-decreasing and a search
/// needs no bounds: slots before the first record (only in the first block, after a
/// compaction) hold 0, and slots after the last record hold the type's maximum.
#[derive(Clone, Debug)]
enum Offsets {
    /// All offsets fit in `u32`: the normal case.
    Narrow(Box<[u32; B]>),
    /// Some offset does not: 64 records holding more than `u32::MAX` tokens.
    Wide(Box<[u64; B]>),
}

impl Offsets {
    /// A block with no record yet. **O(64)**.
    fn empty() -> Offsets {
        Offsets::Narrow(Box::new([u32::MAX; B]))
    }

    /// A block of offsets holding `values` at slots `from..`. **O(64)**.
    fn build(from: usize, values: &[u64]) -> Offsets {
        debug_assert!(from + values.len() <= B);
        let to = from + values.len();
        if values.iter().all(|&v| v <= u64::from(u32::MAX)) {
            let mut narrow = Box::new([u32::MAX; B]);
            narrow[..from].fill(0);
            for (slot, &v) in narrow[from..to].iter_mut().zip(values) {
                // Checked just above.
                *slot = v as u32;
            }
            Offsets::Narrow(narrow)
        } else {
            let mut wide = Box::new([u64::MAX; B]);
            wide[..from].fill(0);
            wide[from..to].copy_from_slice(values);
            Offsets::Wide(wide)
        }
    }

    /// The offset at slot `k`. **O(1)**.
    #[inline]
    fn get(&self, k: usize) -> u64 {
        match self {
            Offsets::Narrow(o) => u64::from(o[k]),
            Offsets::Wide(o) => o[k],
        }
    }

    /// Sets slot `k`, the block's last record, to `value`, widening the block if it
    /// does not fit in `u32`. **O(1)**, or **O(64)** the once a block widens.
    fn set(&mut self, k: usize, value: u64) {
        match self {
            Offsets::Narrow(o) => match u32::try_from(value) {
                Ok(v) => o[k] = v,
                Err(_) => {
                    // Slots after `k` hold no record: they keep the maximum.
                    let mut wide = Box::new([u64::MAX; B]);
                    for (w, &n) in wide[..k].iter_mut().zip(o.iter()) {
                        *w = u64::from(n);
                    }
                    wide[k] = value;
                    *self = Offsets::Wide(wide);
                }
            },
            Offsets::Wide(o) => o[k] = value,
        }
    }

    /// How many slots hold an offset below `t` (`t > 0`): where `t` would be inserted
    /// into the non-decreasing block, whose records end at slot `hi`. Three pivots
    /// pick the 16-slot quarter (one cache line of `u32`s), then its 16 slots are
    /// counted with vector compares; the pivots' lines load together. **O(1)**: 19
    /// compares, branch-free.
    #[inline]
    fn count_below(&self, t: u64, hi: usize) -> usize {
        fn count<T: Copy + PartialOrd>(o: &[T; B], t: T) -> usize {
            let q = usize::from(o[15] < t) + usize::from(o[31] < t) + usize::from(o[47] < t);
            let quarter = &o[q * 16..q * 16 + 16];
            q * 16 + quarter.iter().map(|&v| u32::from(v < t)).sum::<u32>() as usize
        }
        match self {
            Offsets::Narrow(o) => match u32::try_from(t) {
                Ok(t) => count(o, t),
                // Every record's offset fits in u32, so all are below such a `t`.
                Err(_) => hi,
            },
            Offsets::Wide(o) => count(o, t).min(hi),
        }
    }

    fn heap_bytes(&self) -> usize {
        match self {
            Offsets::Narrow(_) => std::mem::size_of::<[u32; B]>(),
            Offsets::Wide(_) => std::mem::size_of::<[u64; B]>(),
        }
    }
}

/// Inclusive prefix token sums: record `i`'s sum is the tokens of records `0..=i`.
///
/// Record `i` lives in slot `head + i`: block `(head + i) / 64`, offset
/// `(head + i) % 64`. Invariants (checked by `assert_invariants`): `bases` and `offs`
/// have one entry per block, exactly enough blocks for `head + len` slots; `head < 64`
/// (and 0 when empty); the base of block `b` is the true sum before its first record
/// (0 for the first block); sums never decrease; `total` is the last sum.
#[derive(Clone, Default, Debug)]
pub(crate) struct PrefixSums {
    /// `bases[b].wrapping_add(shift)` is the tokens before block `b`'s first record.
    bases: VecDeque<u64>,
    offs: VecDeque<Offsets>,
    head: usize,
    len: usize,
    shift: u64,
    total: u64,
    /// Every 64th stored base (`upper[j] == bases[64 * j]`), for searches over long
    /// logs: 2,442 entries (20 KB, in L1/L2) at 10^7 records. Built by the first search
    /// that needs it, kept exact by pushes, dropped by a compaction (which shifts block
    /// indices) and rebuilt by the next search in **O(n / 4096)** strided reads (about
    /// 2,400 at 10^7 records: tens of microseconds, once per compaction). In a
    /// `OnceLock` so that a `&self` search can build it.
    upper: OnceLock<Vec<u64>>,
}

impl PrefixSums {
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The true base of block `b`. **O(1)**.
    #[inline]
    fn base(&self, b: usize) -> u64 {
        self.bases[b].wrapping_add(self.shift)
    }

    /// The inclusive sum of record `i` (`i < len`). **O(1)**.
    #[inline]
    fn at(&self, i: usize) -> u64 {
        let s = self.head + i;
        // Wrapping: while a compaction rewrites a block, its stored base may be stale
        // (off by the shift's change); its tail records' sums still come out right.
        self.base(s / B).wrapping_add(self.offs[s / B].get(s % B))
    }

    /// Tokens of all records. **O(1)**.
    #[inline]
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Appends a record whose inclusive prefix sum is `total` (checked by the caller).
    /// **O(1)** amortized: one block of 256 bytes is allocated every 64 records.
    #[inline]
    pub(crate) fn push(&mut self, total: u64) {
        debug_assert!(total >= self.total);
        let s = self.head + self.len;
        if s % B == 0 {
            self.new_block();
        }
        // `new_block` ran if this slot starts one, so there is a last block.
        let base = self.bases.back().map_or(0, |b| b.wrapping_add(self.shift));
        let value = total - base;
        match self.offs.back_mut() {
            Some(Offsets::Narrow(o)) if value <= u64::from(u32::MAX) => o[s % B] = value as u32,
            Some(offs) => offs.set(s % B, value),
            None => {}
        }
        self.len += 1;
        self.total = total;
    }

    /// Starts a block whose first record follows the current last one. **O(1)**
    /// amortized.
    #[cold]
    fn new_block(&mut self) {
        let stored = self.total.wrapping_sub(self.shift);
        if self.bases.len() % B == 0 {
            if let Some(upper) = self.upper.get_mut() {
                upper.push(stored);
            }
        }
        self.bases.push_back(stored);
        self.offs.push_back(Offsets::empty());
    }

    /// Makes the last record's inclusive prefix sum `total` (`len > 0`, and `total` is
    /// at least the sum before that record, checked by the caller): how an open
    /// record grows or takes its reported size. **O(1)**.
    pub(crate) fn set_last(&mut self, total: u64) {
        debug_assert!(self.len > 0 && total >= self.before(self.len - 1));
        let s = self.head + self.len - 1;
        let base = self.base(s / B);
        self.offs[s / B].set(s % B, total - base);
        self.total = total;
    }

    /// Tokens of records `0..cut`. **O(1)**. `cut <= len`.
    #[inline]
    pub(crate) fn before(&self, cut: usize) -> u64 {
        if cut == 0 { 0 } else { self.at(cut - 1) }
    }

    /// Tokens of record `i`. **O(1)**. `i < len`.
    pub(crate) fn record(&self, i: usize) -> u64 {
        self.at(i) - self.before(i)
    }

    /// The first record whose inclusive prefix sum reaches `target`; `len` if none.
    /// **O(log(n / 64) + 64)**: a binary search over the bases, then a count in one
    /// block.
    pub(crate) fn first_reaching(&self, target: u64) -> usize {
        if target > self.total || self.len == 0 {
            return self.len;
        }
        if target == 0 {
            return 0;
        }
        // The last block whose base is below the target: block 0's base (0) is.
        let shift = self.shift;
        let below = |&b: &u64| b.wrapping_add(shift) < target;
        let n = if self.bases.len() <= 4 * B {
            let (front, back) = self.bases.as_slices();
            match front.partition_point(below) {
                n if n < front.len() => n,
                n => n + back.partition_point(below),
            }
        } else {
            // Bisect the upper level (in cache), then count within its 64 bases:
            // eight cache lines read together instead of six misses in turn.
            let upper = self
                .upper
                .get_or_init(|| self.bases.iter().step_by(B).copied().collect());
            // `upper[0]` is block 0's base, below the target.
            let j = upper.partition_point(below);
            let lo = (j - 1) * B;
            let hi = (j * B).min(self.bases.len());
            lo + self.bases.range(lo..hi).filter(|b| below(b)).count()
        };
        self.reaching_in(n - 1, target)
    }

    /// The first record of block `b` whose inclusive sum reaches `target`, given that
    /// block `b`'s base is below `target` and some record at or after block `b`
    /// reaches it. **O(64)**.
    fn reaching_in(&self, b: usize, target: u64) -> usize {
        // Slots before the first record hold 0 and count; those after the last hold
        // the maximum and do not (see `Offsets`).
        let hi = (self.head + self.len - b * B).min(B);
        let k = self.offs[b].count_below(target - self.base(b), hi);
        b * B + k - self.head
    }

    /// The seed's lookback floor for target record `t` (`t < len`): the smallest `j <= t`
    /// with `tokens(j..=t) <= lookback`, or `t` itself when record `t` alone exceeds the
    /// lookback. **O(log(d) + 64)** for a floor `d` blocks behind the target: a gallop
    /// back over the bases from `t`'s block, because a realistic lookback ends a block
    /// or two behind the target, on cache lines the target's own search just read.
    pub(crate) fn floor(&self, t: usize, lookback: u64) -> usize {
        let end = self.at(t);
        let Some(threshold) = end.checked_sub(lookback).filter(|&th| th > 0) else {
            // The whole prefix 0..=t fits in the lookback.
            return 0;
        };
        // The first record `i` whose sum reaches the threshold (`i <= t`, as record
        // `t`'s does); then `j = i + 1` is the first with `before(j) >= threshold`.
        let tb = (self.head + t) / B;
        let below = |b: usize| self.base(b) < threshold;
        // Gallop back for a block whose base is below the threshold (block 0's is).
        let (mut lo, mut hi) = (tb, tb + 1);
        let mut step = 1;
        while !below(lo) {
            hi = lo;
            lo = lo.saturating_sub(step);
            step *= 2;
        }
        // Now below(lo) and !below(hi) (or hi == tb + 1): bisect to the last below.
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if below(mid) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        (self.reaching_in(lo, threshold) + 1).min(t)
    }

    /// Replaces records `start..end` (`start < end <= len`) by one record of `tokens`
    /// tokens; the caller has checked that the new total does not overflow.
    /// **O(end - start) / 64 + min(start, len - end) + 64)** amortized (see the module
    /// docs).
    pub(crate) fn replace(&mut self, start: usize, end: usize, tokens: u64) {
        debug_assert!(start < end && end <= self.len);
        let summary_sum = self.before(start) + tokens;
        // What every later sum gains (or, wrapped, loses).
        let delta = summary_sum.wrapping_sub(self.before(end));
        let gone = end - start - 1;
        self.upper = OnceLock::new();
        if start <= self.len - end {
            // The head and the summary move up into the slots before record `end`.
            let mut moved: Vec<u64> = (0..start).map(|i| self.at(i)).collect();
            moved.push(summary_sum);
            // The tail keeps its stored values: it gains `delta` through the shift.
            self.shift = self.shift.wrapping_add(delta);
            let first = self.head + gone;
            for _ in 0..first / B {
                self.bases.pop_front();
                self.offs.pop_front();
            }
            self.head = first % B;
            self.len -= gone;
            self.rewrite(0, &moved);
        } else {
            // The summary and the tail move down.
            let mut moved = vec![summary_sum];
            moved.extend((end..self.len).map(|i| self.at(i).wrapping_add(delta)));
            self.len -= gone;
            let blocks = (self.head + self.len).div_ceil(B);
            self.bases.truncate(blocks);
            self.offs.truncate(blocks);
            self.rewrite(start, &moved);
        }
        self.total = self.at(self.len - 1);
        // Give back deque space once it is mostly empty: O(blocks), but only after at
        // least that many blocks were dropped, so O(1) amortized per dropped block.
        if self.offs.capacity() > 4 * self.offs.len() + 16 {
            self.bases.shrink_to(2 * self.bases.len());
            self.offs.shrink_to(2 * self.offs.len());
        }
    }

    /// Gives records `first..first + values.len()` the inclusive sums `values` (true
    /// values, non-decreasing, consistent with the records around them), rebuilding
    /// every block they touch from true values, base included. Records of those blocks
    /// outside the range keep their true sums. **O(values + 64)**.
    fn rewrite(&mut self, first: usize, values: &[u64]) {
        if values.is_empty() {
            return;
        }
        let last = first + values.len() - 1;
        let (b0, b1) = ((self.head + first) / B, (self.head + last) / B);
        let mut block_values = Vec::with_capacity(B);
        for b in b0..=b1 {
            let lo = if b == 0 { self.head } else { 0 };
            let hi = (self.head + self.len - b * B).min(B);
            let first_record = b * B + lo - self.head;
            let value = |i: usize| {
                if (first..=last).contains(&i) {
                    values[i - first]
                } else {
                    self.at(i)
                }
            };
            let base = if first_record == 0 {
                0
            } else {
                value(first_record - 1)
            };
            block_values.clear();
            block_values.extend((first_record..first_record + hi - lo).map(|i| value(i) - base));
            self.offs[b] = Offsets::build(lo, &block_values);
            self.bases[b] = base.wrapping_sub(self.shift);
        }
    }

    /// Bytes of heap held. **O(n / 64)**.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.bases.capacity() * std::mem::size_of::<u64>()
            + self
                .upper
                .get()
                .map_or(0, |u| u.capacity() * std::mem::size_of::<u64>())
            + self.offs.capacity() * std::mem::size_of::<Offsets>()
            + self.offs.iter().map(Offsets::heap_bytes).sum::<usize>()
    }

    pub(crate) fn assert_invariants(&self) {
        assert_eq!(self.bases.len(), self.offs.len(), "one base per block");
        if let Some(upper) = self.upper.get() {
            let want: Vec<u64> = self.bases.iter().step_by(B).copied().collect();
            assert_eq!(*upper, want, "the upper level samples every 64th base");
        }
        assert_eq!(
            self.bases.len(),
            (self.head + self.len).div_ceil(B),
            "exactly enough blocks for the records"
        );
        assert!(
            self.head < B && (self.len > 0 || self.head == 0),
            "head slot"
        );
        for b in 0..self.bases.len() {
            let lo = if b == 0 { self.head } else { 0 };
            let hi = (self.head + self.len - b * B).min(B);
            let max = match &self.offs[b] {
                Offsets::Narrow(_) => u64::from(u32::MAX),
                Offsets::Wide(_) => u64::MAX,
            };
            for k in (0..lo).chain(hi..B) {
                let want = if k < lo { 0 } else { max };
                assert_eq!(
                    self.offs[b].get(k),
                    want,
                    "block {b} slot {k} holds no record"
                );
            }
            let first = b * B + lo - self.head;
            let want = if first == 0 { 0 } else { self.at(first - 1) };
            assert_eq!(self.base(b), want, "block {b}'s base is the sum before it");
        }
        for i in 1..self.len {
            let (a, b) = (self.at(i - 1), self.at(i));
            assert!(a <= b, "prefix sums never decrease: {a} then {b} at {i}");
        }
        let last = if self.len == 0 {
            0
        } else {
            self.at(self.len - 1)
        };
        assert_eq!(self.total, last, "total is the last sum");
    }
}

/// The legal cut positions, as one bit per position (bit `head + c` for cut `c`).
/// Position 0 is always legal.
///
/// A position enters when it is reached and legal at that moment; it leaves at most
/// once, when a later `tool_use` answers a result that came before it (see
/// [`LegalCuts::revoke_after`]), when a record bound to the previous one arrives, or
/// when a compacted region swallows it.
///
/// Invariants (checked by `assert_invariants`): bit `head` (cut 0) is set; no bit below
/// `head` or above `head + last` is set; `count` is the number of set bits and `last`
/// the largest legal cut; `head < 64`; `words` ends at the word holding `last`.
#[derive(Clone, Debug)]
pub(crate) struct LegalCuts {
    words: VecDeque<u64>,
    head: usize,
    count: usize,
    last: usize,
}

impl Default for LegalCuts {
    fn default() -> Self {
        LegalCuts {
            words: VecDeque::from([1]),
            head: 0,
            count: 1,
            last: 0,
        }
    }
}

impl LegalCuts {
    /// Number of legal cuts. **O(1)**.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// The largest legal cut. **O(1)**. There always is one (0).
    #[inline]
    pub(crate) fn last(&self) -> usize {
        self.last
    }

    fn bit(&self, pos: usize) -> bool {
        let p = self.head + pos;
        self.words.get(p / B).is_some_and(|w| w >> (p % B) & 1 == 1)
    }

    /// Adds `cut`, which must exceed every cut held. **O(1)** amortized.
    #[inline]
    pub(crate) fn push(&mut self, cut: usize) {
        debug_assert!(cut > self.last);
        debug_assert!(cut <= MAX_RECORDS);
        let p = self.head + cut;
        if self.words.len() <= p / B {
            self.grow_to(p / B);
        }
        if let Some(word) = self.words.back_mut() {
            *word |= 1 << (p % B);
        }
        self.count += 1;
        self.last = cut;
    }

    /// Adds zero words up to word `w`. **O(1)** amortized.
    #[cold]
    fn grow_to(&mut self, w: usize) {
        while self.words.len() <= w {
            self.words.push_back(0);
        }
    }

    /// Makes every cut above `floor` illegal. **O(1 + (last - floor) / 64)**, plus the
    /// scan back to the new largest cut (see [`LegalCuts::at_or_before`]); each bit
    /// cleared was set once.
    pub(crate) fn revoke_after(&mut self, floor: usize) {
        if self.last <= floor {
            return;
        }
        let (from, to) = (self.head + floor + 1, self.head + self.last);
        for w in from / B..=to / B {
            let mut mask = u64::MAX;
            if w == from / B {
                mask &= u64::MAX << (from % B);
            }
            let cleared = self.words[w] & mask;
            self.count -= cleared.count_ones() as usize;
            self.words[w] &= !mask;
        }
        self.last = self.scan_back(floor);
        let p = self.head + self.last;
        self.words.truncate(p / B + 1);
    }

    /// The largest legal cut `<= pos`, scanning the bitmap back from `pos`.
    /// **O(1 + gap / 64)** for a gap of `gap` positions without a legal cut.
    fn scan_back(&self, pos: usize) -> usize {
        let p = self.head + pos;
        let mut w = p / B;
        let mut bits = self.words[w] & (u64::MAX >> (B - 1 - p % B));
        while bits == 0 {
            // Cut 0's bit stops the scan.
            w -= 1;
            bits = self.words[w];
        }
        w * B + (B - 1 - bits.leading_zeros() as usize) - self.head
    }

    /// The largest legal cut `<= pos`. Always exists (0 is legal). **O(1)** at or past
    /// the largest cut; otherwise **O(1 + gap / 64)** for a gap of `gap` positions
    /// before `pos` without a legal cut (one word when cuts are dense).
    pub(crate) fn at_or_before(&self, pos: usize) -> usize {
        if pos >= self.last {
            self.last
        } else {
            self.scan_back(pos)
        }
    }

    /// The smallest legal cut `>= pos`, if any. **O(1 + gap / 64)** as
    /// [`LegalCuts::at_or_before`].
    pub(crate) fn at_or_after(&self, pos: usize) -> Option<usize> {
        if pos > self.last {
            return None;
        }
        let p = self.head + pos;
        let mut w = p / B;
        let mut bits = self.words[w] & (u64::MAX << (p % B));
        while bits == 0 {
            // The bit of `last` (>= pos) stops the scan.
            w += 1;
            bits = self.words[w];
        }
        Some(w * B + bits.trailing_zeros() as usize - self.head)
    }

    /// Whether `pos` is a legal cut. **O(1)**.
    pub(crate) fn contains(&self, pos: usize) -> bool {
        pos <= self.last && self.bit(pos)
    }

    /// Records `start..end` (both legal cuts, `start < end`) become one record: the
    /// cuts strictly between them vanish, `start` stays, and every cut from `end` on
    /// moves down by `end - start - 1`. **O((end - start) / 64 + min(start, last - end))**:
    /// the shorter side's bits move one by one, whole words of the region are dropped.
    pub(crate) fn replace(&mut self, start: usize, end: usize) {
        debug_assert!(self.contains(start) && self.contains(end) && start < end);
        let gone = end - start - 1;
        let (from, to) = (self.head + start + 1, self.head + end);
        // Bits in from..to vanish.
        if gone > 0 {
            for w in from / B..=(to - 1) / B {
                let lo = if w == from / B { from % B } else { 0 };
                let hi = if w == (to - 1) / B {
                    (to - 1) % B + 1
                } else {
                    B
                };
                let mask = (u64::MAX << lo) & (u64::MAX >> (B - hi));
                self.count -= (self.words[w] & mask).count_ones() as usize;
            }
        }
        if start <= self.last - end {
            // Cuts 0..=start move up by `gone`, into the slots before cut `end`.
            for pos in (0..=start).rev() {
                let bit = self.bit(pos);
                self.set_bit(self.head + pos + gone, bit);
            }
            let first = self.head + gone;
            for _ in 0..first / B {
                self.words.pop_front();
            }
            self.head = first % B;
            // Slots below the new head hold stale bits: clear them.
            if let Some(w) = self.words.front_mut() {
                *w &= u64::MAX << self.head;
            }
        } else {
            // Cuts end..=last move down by `gone`.
            for pos in end..=self.last {
                let bit = self.bit(pos);
                self.set_bit(self.head + pos - gone, bit);
            }
            let new_last = self.head + self.last - gone;
            self.words.truncate(new_last / B + 1);
            if let Some(w) = self.words.back_mut() {
                *w &= u64::MAX >> (B - 1 - new_last % B);
            }
        }
        self.last -= gone;
        if self.words.capacity() > 4 * self.words.len() + 16 {
            self.words.shrink_to(2 * self.words.len());
        }
    }

    fn set_bit(&mut self, p: usize, bit: bool) {
        let word = &mut self.words[p / B];
        if bit {
            *word |= 1 << (p % B);
        } else {
            *word &= !(1 << (p % B));
        }
    }

    /// The legal cuts in increasing order. **O(1)** to create, **O(1 + gap / 64)** per
    /// item.
    pub(crate) fn iter(&self) -> CutIter<'_> {
        CutIter {
            cuts: self,
            front: 0,
            back: self.last + 1,
            remaining: self.count,
        }
    }

    /// Bytes of heap held. **O(1)**.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.capacity() * std::mem::size_of::<u64>()
    }

    pub(crate) fn assert_invariants(&self, len: usize) {
        assert!(self.head < B, "head bit");
        assert!(self.bit(0), "cut 0 is always legal");
        assert!(self.bit(self.last), "the largest cut is legal");
        assert_eq!(
            self.words.len(),
            (self.head + self.last) / B + 1,
            "words end at the largest cut"
        );
        let ones: usize = self.words.iter().map(|w| w.count_ones() as usize).sum();
        assert_eq!(ones, self.count, "count is the number of legal cuts");
        assert_eq!(
            self.words.front().map(|w| w & !(u64::MAX << self.head)),
            Some(0),
            "no bit below cut 0"
        );
        let p = self.head + self.last;
        assert_eq!(
            self.words
                .back()
                .map(|w| w & !(u64::MAX >> (B - 1 - p % B))),
            Some(0),
            "no bit above the largest cut"
        );
        assert!(
            self.last <= len,
            "legal cut {} lies inside the log of {len}",
            self.last
        );
    }
}

/// Iterator over the legal cuts, see [`LegalCuts::iter`].
pub(crate) struct CutIter<'a> {
    cuts: &'a LegalCuts,
    /// Every cut not yet yielded lies in `front..back`.
    front: usize,
    back: usize,
    remaining: usize,
}

impl Iterator for CutIter<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        let c = self.cuts.at_or_after(self.front)?;
        self.front = c + 1;
        self.remaining -= 1;
        Some(c)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl DoubleEndedIterator for CutIter<'_> {
    fn next_back(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        let c = self.cuts.at_or_before(self.back - 1);
        self.back = c;
        self.remaining -= 1;
        Some(c)
    }
}

impl ExactSizeIterator for CutIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn sums(tokens: &[u64]) -> PrefixSums {
        let mut s = PrefixSums::default();
        let mut acc = 0;
        for &t in tokens {
            acc += t;
            s.push(acc);
        }
        s
    }

    /// The seed's loop, written out, to pin `floor` to it.
    fn seed_floor(tokens: &[u64], t: usize, lookback: u64) -> usize {
        let mut floor = t;
        let mut acc = 0;
        for j in (0..=t).rev() {
            acc += tokens[j];
            if acc > lookback {
                break;
            }
            floor = j;
        }
        floor
    }

    #[test]
    fn floor_matches_the_seed_loop() {
        let tokens = [5, 0, 3, 0, 0, 7, 1, 10, 0, 2];
        let s = sums(&tokens);
        for t in 0..tokens.len() {
            for lookback in 0..30 {
                assert_eq!(
                    s.floor(t, lookback),
                    seed_floor(&tokens, t, lookback),
                    "t={t} lookback={lookback}"
                );
            }
        }
    }

    /// Offsets at the edge of `u32` (exactly `u32::MAX`, and one past it, which widens
    /// the block) search like any others.
    #[test]
    fn offsets_at_the_edge_of_u32_search_exactly() {
        let max = u64::from(u32::MAX);
        for tokens in [
            vec![max, 0, 1],
            vec![1, max - 1, 0, 2],
            vec![max + 1, 0, 3],
            vec![0; 70],
        ] {
            let s = sums(&tokens);
            s.assert_invariants();
            let all: Vec<u64> = (0..s.len()).map(|i| s.at(i)).collect();
            for target in [0, 1, max - 1, max, max + 1, max + 2, max + 5, s.total() + 1] {
                let want = all.iter().take_while(|&&v| v < target).count();
                assert_eq!(s.first_reaching(target), want, "{tokens:?} target {target}");
            }
        }
    }

    #[test]
    fn first_reaching_is_the_first_inclusive_sum_at_or_above() {
        let s = sums(&[0, 4, 0, 6]);
        assert_eq!(s.first_reaching(0), 0);
        assert_eq!(s.first_reaching(1), 1);
        assert_eq!(s.first_reaching(4), 1);
        assert_eq!(s.first_reaching(5), 3);
        assert_eq!(s.first_reaching(10), 3);
        assert_eq!(s.first_reaching(11), 4);
    }

    #[test]
    fn revoke_removes_only_cuts_above_the_floor() {
        let mut c = LegalCuts::default();
        for p in [1, 2, 5, 6] {
            c.push(p);
        }
        c.revoke_after(2);
        assert_eq!(c.iter().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(c.at_or_before(9), 2);
        assert_eq!(c.at_or_before(1), 1);
        assert_eq!(c.at_or_after(2), Some(2));
        assert_eq!(c.at_or_after(3), None);
        assert!(c.contains(1) && !c.contains(5));
    }

    #[test]
    fn replace_keeps_sums_and_cuts_exact_on_either_side() {
        for (start, end) in [(1, 4), (5, 8), (0, 9), (3, 9), (0, 2)] {
            let tokens = [5u64, 0, 3, 0, 0, 7, 1, 10, 0, 2];
            let mut s = sums(&tokens);
            s.replace(start, end, 4);
            let mut want: Vec<u64> = tokens[..start].to_vec();
            want.push(4);
            want.extend_from_slice(&tokens[end..]);
            let got: Vec<u64> = (0..s.len()).map(|i| s.record(i)).collect();
            assert_eq!(got, want, "region {start}..{end}");
            s.assert_invariants();
            s.push(s.total() + 6);
            assert_eq!(s.record(s.len() - 1), 6);
            assert_eq!(s.first_reaching(s.total()), s.len() - 1);

            let mut c = LegalCuts::default();
            for p in [1, 2, 3, 4, 5, 8, 9, 10] {
                c.push(p);
            }
            if !(c.contains(start) && c.contains(end)) {
                continue;
            }
            c.replace(start, end);
            let down = end - start - 1;
            let want: Vec<usize> = [0, 1, 2, 3, 4, 5, 8, 9, 10]
                .into_iter()
                .filter(|&p| p <= start || p >= end)
                .map(|p| if p >= end { p - down } else { p })
                .collect();
            assert_eq!(c.iter().collect::<Vec<_>>(), want, "region {start}..{end}");
            c.assert_invariants(10 - down);
            c.push(11 - down);
            assert_eq!(c.last(), 11 - down);
            assert!(c.contains(start) && c.contains(start + 1));
        }
    }

    /// Long indexes (many blocks, a wide block, a long stretch without legal cuts)
    /// answer every search like a linear scan, through compactions that move the head
    /// and ones that move the tail.
    #[test]
    fn long_indexes_search_like_a_scan_across_replace() {
        let n = 40_000;
        let mut tokens: Vec<u64> = (0..n as u64)
            .map(|i| i % 7 + (i % 13 == 0) as u64 * 50)
            .collect();
        // One absurd record: its block's offsets no longer fit in u32.
        tokens[700] = 5_000_000_000;
        let mut s = sums(&tokens);
        let mut c = LegalCuts::default();
        // A stretch of 2,000 positions without legal cuts.
        for p in (1..=n).filter(|p| p % 50 != 0 && !(1_000..3_000).contains(p)) {
            c.push(p);
        }
        let check = |s: &PrefixSums, c: &LegalCuts| {
            s.assert_invariants();
            c.assert_invariants(s.len());
            let all: Vec<u64> = (0..s.len()).map(|i| s.at(i)).collect();
            let cuts: Vec<usize> = c.iter().collect();
            assert_eq!(cuts.len(), c.len());
            let mut back: Vec<usize> = c.iter().rev().collect();
            back.reverse();
            assert_eq!(back, cuts, "iterating from the back agrees");
            for k in 0..200u64 {
                let target = k * s.total() / 199;
                let want = all.iter().take_while(|&&v| v < target).count();
                assert_eq!(s.first_reaching(target), want, "target {target}");
                let pos = (k as usize * 997) % (s.len() + 1);
                let want = cuts.iter().copied().filter(|&p| p <= pos).max();
                assert_eq!(Some(c.at_or_before(pos)), want, "pos {pos}");
                let want = cuts.iter().copied().find(|&p| p >= pos);
                assert_eq!(c.at_or_after(pos), want, "pos {pos}");
                assert_eq!(c.contains(pos), cuts.contains(&pos), "pos {pos}");
                if pos < s.len() {
                    let seed: Vec<u64> = (0..s.len()).map(|i| s.record(i)).collect();
                    for lookback in [0, 40, 300, 10_000, 6_000_000_000] {
                        assert_eq!(
                            s.floor(pos, lookback),
                            seed_floor(&seed, pos, lookback),
                            "pos {pos} lookback {lookback}"
                        );
                    }
                }
            }
        };
        check(&s, &c);
        for extra in 1..=200u64 {
            s.push(s.total() + extra);
            c.push(n + extra as usize);
        }
        c.revoke_after(n + 70);
        check(&s, &c);
        // A region from a legal cut near the front: the head side moves.
        s.replace(1, 901, 9);
        c.replace(1, 901);
        check(&s, &c);
        // One near the back: the tail side moves.
        let (a, b) = (c.at_or_before(s.len() - 400), c.at_or_before(s.len() - 10));
        s.replace(a, b, 5);
        c.replace(a, b);
        check(&s, &c);
        // One that swallows the stretch without cuts and the wide block.
        let (a, b) = (
            c.at_or_before(50),
            c.at_or_after(3_000 - 899).expect("a cut"),
        );
        s.replace(a, b, 77);
        c.replace(a, b);
        check(&s, &c);
        // Growing the last record (an open record) keeps the sums exact.
        s.set_last(s.total() + 10);
        check(&s, &c);
    }
}
