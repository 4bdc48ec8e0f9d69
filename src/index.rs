//! The two position indexes behind the tracker: prefix token sums and the sorted list of
//! legal cuts. Appending is **O(1)** amortized and every query is a search of
//! **O(log n)** steps (see below for the layout that keeps it to a few cache misses).
//!
//! Both live in a `VecDeque` with one *shift* applied to every stored value, so that a
//! compacted region (records `start..end` replaced by one summary record, see
//! [`Tracker::replace_region`](crate::Tracker::replace_region)) costs
//! **O(removed + min(start, len - end))** amortized, never a pass over the whole log:
//! only the shorter side of the deque moves, and the values of the side that does not
//! move are corrected by changing the shift instead of rewriting them. The pinned head
//! and earlier summaries keep `start` small, so in practice the cost is the removed
//! region plus the head. Stored values wrap (`stored.wrapping_add(shift)` is the true
//! value); every comparison is made on true values, which are monotone.
//!
//! Searches go through `crate::index_top`: `slice::partition_point` on the deque's two
//! slices, and above 2^15 elements a lazily built top level holding every 64th element
//! (about two cache misses per search instead of about ten at 10^7; its costs, and why
//! a compaction drops it and the next query rebuilds it in **O(n / 64)**, are in that
//! module's docs). The lookback floor gallops back from the target record.
//!
//! Positions are stored as `u32` (a log holds at most [`MAX_RECORDS`] records), which
//! halves the legal-cut index; the public API speaks `usize`.

use std::collections::VecDeque;

use crate::index_top::{self, SMALL, Top};

/// The most records one tracker holds: cut positions `0..=len` must fit in a `u32`.
pub const MAX_RECORDS: usize = u32::MAX as usize;

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

/// Inclusive prefix token sums: record `i`'s sum is the tokens of records `0..=i`.
#[derive(Clone, Default, Debug)]
pub(crate) struct PrefixSums {
    /// `sums[i].wrapping_add(shift)` is the inclusive sum of record `i`.
    sums: VecDeque<u64>,
    shift: u64,
    /// Every 64th stored sum, for searches (see `crate::index_top`).
    top: Top<u64>,
}

impl PrefixSums {
    pub(crate) fn len(&self) -> usize {
        self.sums.len()
    }

    /// The inclusive sum of record `i` (`i < len`). **O(1)**.
    fn at(&self, i: usize) -> u64 {
        self.sums[i].wrapping_add(self.shift)
    }

    /// Tokens of all records. **O(1)**.
    pub(crate) fn total(&self) -> u64 {
        self.sums.back().map_or(0, |&s| s.wrapping_add(self.shift))
    }

    /// Appends a record whose inclusive prefix sum is `total` (checked by the caller).
    /// **O(1)** amortized.
    pub(crate) fn push(&mut self, total: u64) {
        debug_assert!(total >= self.total());
        self.sums.push_back(total.wrapping_sub(self.shift));
        self.top.pushed(&self.sums);
    }

    /// Makes the last record's inclusive prefix sum `total` (`len > 0`, and `total` is
    /// at least the sum before that record, checked by the caller): how an open
    /// record grows or takes its reported size. **O(1)**.
    pub(crate) fn set_last(&mut self, total: u64) {
        debug_assert!(total >= self.before(self.len().saturating_sub(1)));
        if let Some(last) = self.sums.back_mut() {
            *last = total.wrapping_sub(self.shift);
        }
        self.top.pushed(&self.sums);
    }

    /// Tokens of records `0..cut`. **O(1)**. `cut <= len`.
    pub(crate) fn before(&self, cut: usize) -> u64 {
        if cut == 0 { 0 } else { self.at(cut - 1) }
    }

    /// Tokens of record `i`. **O(1)**. `i < len`.
    pub(crate) fn record(&self, i: usize) -> u64 {
        self.at(i) - self.before(i)
    }

    /// The first record whose inclusive prefix sum reaches `target`; `len` if none.
    /// **O(log n)**.
    pub(crate) fn first_reaching(&self, target: u64) -> usize {
        let shift = self.shift;
        index_top::partition_point(&self.sums, &self.top, SMALL, |s| {
            s.wrapping_add(shift) < target
        })
    }

    /// The seed's lookback floor for target record `t` (`t < len`): the smallest `j <= t`
    /// with `tokens(j..=t) <= lookback`, or `t` itself when record `t` alone exceeds the
    /// lookback. **O(log(t - floor))**: a gallop back from `t`, because the floor of a
    /// realistic lookback is a few records behind the target, on cache lines the
    /// target's own search just read (a search from the front would miss again).
    pub(crate) fn floor(&self, t: usize, lookback: u64) -> usize {
        let end = self.at(t);
        let Some(threshold) = end.checked_sub(lookback).filter(|&th| th > 0) else {
            // The whole prefix 0..=t fits in the lookback.
            return 0;
        };
        // Want the smallest j >= 1 with before(j) = sum(j-1) >= threshold.
        let shift = self.shift;
        let j = 1 + index_top::partition_point_from_end(&self.sums, t, |s| {
            s.wrapping_add(shift) < threshold
        });
        j.min(t)
    }

    /// Replaces records `start..end` (`start < end <= len`) by one record of `tokens`
    /// tokens; the caller has checked that the new total does not overflow.
    /// **O(end - start + min(start, len - end))** amortized (see the module docs).
    pub(crate) fn replace(&mut self, start: usize, end: usize, tokens: u64) {
        debug_assert!(start < end && end <= self.len());
        let summary_sum = self.before(start) + tokens;
        // What every later sum gains (or, wrapped, loses).
        let delta = summary_sum.wrapping_sub(self.before(end));
        let side = Moved::shorter(self.len(), start, end);
        if side == Moved::Head {
            // The tail keeps its stored values: move the shift, re-store the head.
            self.shift = self.shift.wrapping_add(delta);
        }
        let item = summary_sum.wrapping_sub(self.shift);
        self.top.invalidate();
        splice_one(
            &mut self.sums,
            start,
            end,
            Some(item),
            side,
            |s| match side {
                Moved::Head => *s = s.wrapping_sub(delta),
                Moved::Tail => *s = s.wrapping_add(delta),
            },
        );
    }

    /// Bytes of heap held. **O(1)**.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.sums.capacity() * std::mem::size_of::<u64>() + self.top.heap_bytes()
    }

    pub(crate) fn assert_invariants(&self) {
        self.top.assert_invariants(&self.sums);
        for i in 1..self.len() {
            let (a, b) = (self.at(i - 1), self.at(i));
            assert!(a <= b, "prefix sums never decrease: {a} then {b} at {i}");
        }
    }
}

/// The legal cut positions, strictly increasing. Position 0 is always legal.
///
/// A position enters when it is reached and legal at that moment; it leaves at most
/// once, when a later `tool_use` answers a result that came before it (see
/// [`LegalCuts::revoke_after`]) or when a compacted region swallows it. So each
/// position costs **O(1)** amortized over the log.
#[derive(Clone, Debug)]
pub(crate) struct LegalCuts {
    /// `cuts[i].wrapping_add(shift)` is the `i`-th legal cut.
    cuts: VecDeque<u32>,
    shift: u32,
    /// Every 64th stored cut, for searches (see `crate::index_top`).
    top: Top<u32>,
}

impl Default for LegalCuts {
    fn default() -> Self {
        LegalCuts {
            cuts: VecDeque::from([0]),
            shift: 0,
            top: Top::default(),
        }
    }
}

impl LegalCuts {
    /// The `i`-th legal cut. **O(1)**.
    fn at(&self, i: usize) -> usize {
        self.cuts[i].wrapping_add(self.shift) as usize
    }

    /// Number of legal cuts. **O(1)**.
    pub(crate) fn len(&self) -> usize {
        self.cuts.len()
    }

    /// The largest legal cut. **O(1)**. There always is one (0).
    pub(crate) fn last(&self) -> usize {
        self.cuts
            .back()
            .map_or(0, |&c| c.wrapping_add(self.shift) as usize)
    }

    /// Adds `cut`, which must exceed every cut held. **O(1)** amortized.
    pub(crate) fn push(&mut self, cut: usize) {
        debug_assert!(cut > self.last() || self.cuts.is_empty());
        debug_assert!(cut <= MAX_RECORDS);
        self.cuts.push_back((cut as u32).wrapping_sub(self.shift));
        self.top.pushed(&self.cuts);
    }

    /// Makes every cut above `floor` illegal. **O(k)** for the k cuts removed, each of
    /// which was added once: **O(1)** amortized.
    pub(crate) fn revoke_after(&mut self, floor: usize) {
        // Cut 0 is never above a floor, so it stays.
        let before = self.cuts.len();
        while self.last() > floor {
            self.cuts.pop_back();
        }
        if self.cuts.len() < before {
            self.top.truncated(&self.cuts);
        }
    }

    /// The index of the first cut `>= pos`. **O(log n)**.
    fn index_at_or_after(&self, pos: usize) -> usize {
        self.partition_point(|c| c < pos)
    }

    /// The first index at which `pred` (of the true cut) turns false. **O(log n)**.
    fn partition_point(&self, pred: impl Fn(usize) -> bool) -> usize {
        let shift = self.shift;
        index_top::partition_point(&self.cuts, &self.top, SMALL, |c| {
            pred(c.wrapping_add(shift) as usize)
        })
    }

    /// The largest legal cut `<= pos`. **O(log n)**. Always exists (0 is legal).
    pub(crate) fn at_or_before(&self, pos: usize) -> usize {
        let i = self.partition_point(|c| c <= pos);
        // cut 0 <= pos, so i >= 1.
        self.at(i.saturating_sub(1))
    }

    /// The smallest legal cut `>= pos`, if any. **O(log n)**.
    pub(crate) fn at_or_after(&self, pos: usize) -> Option<usize> {
        let i = self.index_at_or_after(pos);
        (i < self.len()).then(|| self.at(i))
    }

    /// Whether `pos` is a legal cut. **O(log n)**.
    pub(crate) fn contains(&self, pos: usize) -> bool {
        self.at_or_after(pos) == Some(pos)
    }

    /// Records `start..end` (both legal cuts, `start < end`) become one record: the
    /// cuts strictly between them vanish, `start` stays, and every cut from `end` on
    /// moves down by `end - start - 1`. **O(k + min(before, after))** amortized for the
    /// `k` cuts removed and the cuts before and after the region.
    pub(crate) fn replace(&mut self, start: usize, end: usize) {
        debug_assert!(self.contains(start) && self.contains(end) && start < end);
        let lo = self.index_at_or_after(start) + 1;
        let hi = self.index_at_or_after(end);
        // Positions fit in u32 (MAX_RECORDS), so this does too.
        let down = (end - start - 1) as u32;
        let side = Moved::shorter(self.len(), lo, hi);
        if side == Moved::Head {
            self.shift = self.shift.wrapping_sub(down);
        }
        self.top.invalidate();
        splice_one(&mut self.cuts, lo, hi, None, side, |c| match side {
            Moved::Head => *c = c.wrapping_add(down),
            Moved::Tail => *c = c.wrapping_sub(down),
        });
    }

    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = usize> + ExactSizeIterator + '_ {
        self.cuts
            .iter()
            .map(|&c| c.wrapping_add(self.shift) as usize)
    }

    /// Bytes of heap held. **O(1)**.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.cuts.capacity() * std::mem::size_of::<u32>() + self.top.heap_bytes()
    }

    pub(crate) fn assert_invariants(&self, len: usize) {
        self.top.assert_invariants(&self.cuts);
        assert_eq!(
            self.cuts.front().map(|&c| c.wrapping_add(self.shift)),
            Some(0),
            "cut 0 is always legal"
        );
        for i in 1..self.len() {
            let (a, b) = (self.at(i - 1), self.at(i));
            assert!(a < b, "legal cuts strictly increase: {a} then {b}");
        }
        assert!(
            self.last() <= len,
            "legal cut {} lies inside the log of {len}",
            self.last()
        );
    }
}

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

    /// Past `SMALL` elements searches go through the sampled top level: it is built
    /// by the first search, kept exact by pushes and pops, dropped by a splice and
    /// rebuilt by the next search; every answer matches a linear scan throughout.
    #[test]
    fn long_indexes_search_through_the_top_level_across_replace() {
        let n = SMALL + 1000;
        let tokens: Vec<u64> = (0..n as u64)
            .map(|i| i % 7 + (i % 13 == 0) as u64 * 50)
            .collect();
        let mut s = sums(&tokens);
        let mut c = LegalCuts::default();
        for p in (1..=n).filter(|p| p % 50 != 0) {
            c.push(p);
        }
        let check = |s: &PrefixSums, c: &LegalCuts| {
            s.assert_invariants();
            c.assert_invariants(s.len());
            let all: Vec<u64> = (0..s.len()).map(|i| s.at(i)).collect();
            let cuts: Vec<usize> = c.iter().collect();
            for k in 0..60u64 {
                let target = k * s.total() / 59;
                let want = all.iter().take_while(|&&v| v < target).count();
                assert_eq!(s.first_reaching(target), want, "target {target}");
                let pos = (k as usize * 997) % (s.len() + 1);
                let want = cuts.iter().copied().filter(|&p| p <= pos).max();
                assert_eq!(Some(c.at_or_before(pos)), want, "pos {pos}");
                let want = cuts.iter().copied().find(|&p| p >= pos);
                assert_eq!(c.at_or_after(pos), want, "pos {pos}");
                if pos < s.len() {
                    let seed: Vec<u64> = (0..s.len()).map(|i| s.record(i)).collect();
                    assert_eq!(s.floor(pos, 300), seed_floor(&seed, pos, 300));
                }
            }
        };
        check(&s, &c);
        assert!(
            s.top.heap_bytes() > 0 && c.top.heap_bytes() > 0,
            "built by the searches"
        );
        for extra in 1..=200u64 {
            s.push(s.total() + extra);
            c.push(n + extra as usize);
        }
        c.revoke_after(n + 70);
        check(&s, &c);
        // A region from a legal cut near the front: the head side moves.
        s.replace(1, 3001, 9);
        c.replace(1, 3001);
        assert_eq!(s.top.heap_bytes(), 0, "a splice drops the top level");
        check(&s, &c);
        // One near the back: the tail side moves.
        let (a, b) = (c.at_or_before(s.len() - 400), c.at_or_before(s.len() - 10));
        s.replace(a, b, 5);
        c.replace(a, b);
        check(&s, &c);
    }
}
