//! The legal cuts as a bitmap (see the [module docs](super)).

use super::chunked::Chunked;
use crate::core::ensure::{ensure, ensure_eq};

use super::{B, MAX_RECORDS, Remap, Replacement};

/// Bitmap words per chunk of storage (4 KB, 32,768 positions).
const WORDS_CHUNK: usize = 512;

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
    words: Chunked<u64, WORDS_CHUNK>,
    head: usize,
    count: usize,
    last: usize,
}

impl Default for LegalCuts {
    fn default() -> Self {
        LegalCuts {
            words: Chunked::from_iter([1]),
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

    /// Reads the bitmap word of position `pos` and throws it away: a query calls this
    /// as soon as it knows roughly where it will look, so that the word's cache line
    /// is on its way while other loads are outstanding. **O(1)**.
    #[inline]
    pub(crate) fn warm(&self, pos: usize) {
        std::hint::black_box(self.words.get((self.head + pos) / B).copied());
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

    /// Applies `regions` (sorted, disjoint, both ends of each a legal cut): the cuts
    /// strictly inside a region vanish, its `start` stays, its `end` becomes the cut
    /// after its summary record (or merges with `start` when the region is removed),
    /// and every later cut moves down by what the regions before it lost. Only the
    /// shorter side moves: the cuts up to the last region's end (into the positions
    /// just before it) or the cuts from the first region's start on.
    /// **O(R + min(last end, last cut - first start) / 64 + moved cuts)** for `R`
    /// regions: whole words of a region are dropped, not read cut by cut.
    pub(crate) fn replace_many(&mut self, regions: &[Replacement]) {
        let (Some(first), Some(last)) = (regions.first(), regions.last()) else {
            return;
        };
        let (first, last) = (first.start, last.end);
        debug_assert!(self.contains(first) && self.contains(last) && first < last);
        let remap = Remap::new(regions);
        let gone = remap.gone();
        if last <= self.last - first {
            // The cuts 0..=last move up by `gone` into the positions before cut `last`,
            // whose bit (and every later one) stays where it is.
            let moved = self.mapped(&remap, regions, 0, last);
            let (from, to) = (self.head, self.head + last);
            for w in from / B..=to / B {
                let lo = if w == from / B { from % B } else { 0 };
                let hi = if w == to / B { to % B + 1 } else { B };
                let mask = (u64::MAX << lo) & (u64::MAX >> (B - hi));
                self.count -= (self.words[w] & mask).count_ones() as usize;
                self.words[w] &= !mask;
            }
            let new_head = self.head + gone;
            for c in &moved {
                self.set_bit(new_head + c, true);
            }
            self.count += moved.len();
            for _ in 0..new_head / B {
                self.words.pop_front();
            }
            self.head = new_head % B;
            self.last -= gone;
        } else {
            // The cuts from `first` on move down.
            let moved = self.mapped(&remap, regions, first, self.last);
            self.revoke_after(first);
            for c in moved.into_iter().filter(|&c| c > first) {
                self.push(c);
            }
        }
        self.words.shrink();
    }

    /// The new positions of the legal cuts in `from..=to` under `remap`, increasing
    /// and without repeats, skipping the inside of every region (a cut there vanishes)
    /// without reading it. **O(R + (to - from) / 64 + cuts)**.
    fn mapped(
        &self,
        remap: &Remap<'_>,
        regions: &[Replacement],
        from: usize,
        to: usize,
    ) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        let mut keep = |c: usize| {
            if let Some(n) = remap.cut(c) {
                if out.last() != Some(&n) {
                    out.push(n);
                }
            }
        };
        let mut pos = from;
        let mut scan = |pos: usize, upto: usize| {
            let mut p = pos;
            while let Some(c) = self.at_or_after(p).filter(|&c| c <= upto) {
                keep(c);
                p = c + 1;
            }
        };
        for r in regions.iter().filter(|r| r.end >= from && r.start <= to) {
            scan(pos, r.start.min(to));
            pos = r.end.max(from);
        }
        scan(pos, to);
        out
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
        self.words.heap_bytes()
    }

    pub(crate) fn check(&self, len: usize) -> Result<(), String> {
        ensure!(self.head < B, "head bit");
        ensure!(self.bit(0), "cut 0 is always legal");
        ensure!(self.bit(self.last), "the largest cut is legal");
        ensure_eq!(
            self.words.len(),
            (self.head + self.last) / B + 1,
            "words end at the largest cut"
        );
        let ones: usize = self.words.iter().map(|w| w.count_ones() as usize).sum();
        ensure_eq!(ones, self.count, "count is the number of legal cuts");
        ensure_eq!(
            self.words.front().map(|w| w & !(u64::MAX << self.head)),
            Some(0),
            "no bit below cut 0"
        );
        let p = self.head + self.last;
        ensure_eq!(
            self.words
                .back()
                .map(|w| w & !(u64::MAX >> (B - 1 - p % B))),
            Some(0),
            "no bit above the largest cut"
        );
        ensure!(
            self.last <= len,
            "legal cut {} lies inside the log of {len}",
            self.last
        );
        Ok(())
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
