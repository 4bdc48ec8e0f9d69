//! The two position indexes behind the tracker: prefix token sums and the sorted list of
//! legal cuts. Both are append-only vectors, so appending is **O(1)** amortized and every
//! query is a binary search, **O(log n)**.
//!
//! Positions are stored as `u32` (a log holds at most [`MAX_RECORDS`] records), which
//! halves the legal-cut index; the public API speaks `usize`.

/// The most records one tracker holds: cut positions `0..=len` must fit in a `u32`.
pub const MAX_RECORDS: usize = u32::MAX as usize;

/// Inclusive prefix token sums: `sums[i]` is the tokens of records `0..=i`.
#[derive(Clone, Default, Debug)]
pub(crate) struct PrefixSums {
    sums: Vec<u64>,
}

impl PrefixSums {
    pub(crate) fn len(&self) -> usize {
        self.sums.len()
    }

    /// Tokens of all records. **O(1)**.
    pub(crate) fn total(&self) -> u64 {
        self.sums.last().copied().unwrap_or(0)
    }

    /// Appends a record whose inclusive prefix sum is `total` (checked by the caller).
    pub(crate) fn push(&mut self, total: u64) {
        debug_assert!(total >= self.total());
        self.sums.push(total);
    }

    /// Makes the last record's inclusive prefix sum `total` (`len > 0`, and `total` is
    /// at least the sum before that record, checked by the caller): how an open
    /// record grows or takes its reported size. **O(1)**.
    pub(crate) fn set_last(&mut self, total: u64) {
        debug_assert!(total >= self.before(self.len().saturating_sub(1)));
        if let Some(last) = self.sums.last_mut() {
            *last = total;
        }
    }

    /// Tokens of records `0..cut`. **O(1)**. `cut <= len`.
    pub(crate) fn before(&self, cut: usize) -> u64 {
        if cut == 0 { 0 } else { self.sums[cut - 1] }
    }

    /// Tokens of record `i`. **O(1)**. `i < len`.
    pub(crate) fn record(&self, i: usize) -> u64 {
        self.sums[i] - self.before(i)
    }

    /// The first record whose inclusive prefix sum reaches `target`; `len` if none.
    /// **O(log n)**.
    pub(crate) fn first_reaching(&self, target: u64) -> usize {
        self.sums.partition_point(|&s| s < target)
    }

    /// The seed's lookback floor for target record `t` (`t < len`): the smallest `j <= t`
    /// with `tokens(j..=t) <= lookback`, or `t` itself when record `t` alone exceeds the
    /// lookback. **O(log n)**.
    pub(crate) fn floor(&self, t: usize, lookback: u64) -> usize {
        let end = self.sums[t];
        let Some(threshold) = end.checked_sub(lookback).filter(|&th| th > 0) else {
            // The whole prefix 0..=t fits in the lookback.
            return 0;
        };
        // Want the smallest j >= 1 with before(j) = sums[j-1] >= threshold.
        let j = 1 + self.sums[..t].partition_point(|&s| s < threshold);
        j.min(t)
    }

    /// Bytes of heap held. **O(1)**.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.sums.capacity() * std::mem::size_of::<u64>()
    }

    pub(crate) fn assert_invariants(&self) {
        for w in self.sums.windows(2) {
            assert!(
                w[0] <= w[1],
                "prefix sums never decrease: {} then {}",
                w[0],
                w[1]
            );
        }
    }
}

/// The legal cut positions, strictly increasing. Position 0 is always legal.
///
/// A position enters when it is reached and legal at that moment; it leaves at most
/// once, when a later `tool_use` answers a result that came before it (see
/// [`LegalCuts::revoke_after`]). So each position costs **O(1)** amortized over the log.
#[derive(Clone, Debug)]
pub(crate) struct LegalCuts {
    cuts: Vec<u32>,
}

impl Default for LegalCuts {
    fn default() -> Self {
        LegalCuts { cuts: vec![0] }
    }
}

impl LegalCuts {
    /// Number of legal cuts. **O(1)**.
    pub(crate) fn len(&self) -> usize {
        self.cuts.len()
    }

    /// The largest legal cut. **O(1)**. There always is one (0).
    pub(crate) fn last(&self) -> usize {
        self.cuts.last().map_or(0, |&c| c as usize)
    }

    /// Adds `cut`, which must exceed every cut held. **O(1)** amortized.
    pub(crate) fn push(&mut self, cut: usize) {
        debug_assert!(cut > self.last() || self.cuts.is_empty());
        debug_assert!(cut <= MAX_RECORDS);
        self.cuts.push(cut as u32);
    }

    /// Makes every cut above `floor` illegal. **O(k)** for the k cuts removed, each of
    /// which was added once: **O(1)** amortized.
    pub(crate) fn revoke_after(&mut self, floor: usize) {
        while self.cuts.last().is_some_and(|&c| c as usize > floor) {
            self.cuts.pop();
        }
    }

    /// The largest legal cut `<= pos`. **O(log n)**. Always exists (0 is legal).
    pub(crate) fn at_or_before(&self, pos: usize) -> usize {
        let i = self.cuts.partition_point(|&c| c as usize <= pos);
        // cuts[0] == 0 <= pos, so i >= 1.
        self.cuts[i.saturating_sub(1)] as usize
    }

    /// The smallest legal cut `>= pos`, if any. **O(log n)**.
    pub(crate) fn at_or_after(&self, pos: usize) -> Option<usize> {
        let i = self.cuts.partition_point(|&c| (c as usize) < pos);
        self.cuts.get(i).map(|&c| c as usize)
    }

    /// Whether `pos` is a legal cut. **O(log n)**.
    pub(crate) fn contains(&self, pos: usize) -> bool {
        u32::try_from(pos).is_ok_and(|p| self.cuts.binary_search(&p).is_ok())
    }

    pub(crate) fn iter(&self) -> impl DoubleEndedIterator<Item = usize> + ExactSizeIterator + '_ {
        self.cuts.iter().map(|&c| c as usize)
    }

    /// Bytes of heap held. **O(1)**.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.cuts.capacity() * std::mem::size_of::<u32>()
    }

    pub(crate) fn assert_invariants(&self, len: usize) {
        assert_eq!(self.cuts.first(), Some(&0), "cut 0 is always legal");
        for w in self.cuts.windows(2) {
            assert!(
                w[0] < w[1],
                "legal cuts strictly increase: {} then {}",
                w[0],
                w[1]
            );
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
}
