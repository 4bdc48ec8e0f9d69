//! Searching long non-decreasing sequences (prefix token sums, legal cut positions)
//! faster than a plain binary search once they no longer fit in the CPU caches.
//!
//! # Why not `slice::partition_point`
//!
//! A binary search over 10^7 prefix sums (80 MB) makes about 23 dependent probes. The
//! first dozen hit the same few cache lines on every query and stay cached; each of the
//! last ten lands on a line no other query touched recently, so it waits for DRAM (and
//! often a TLB walk): about ten serial misses per search.
//!
//! [`SampledIndex`] keeps, beside the sequence, a few small **sampled levels**: level 1
//! holds every `B`-th element of the sequence, level 2 every `B`-th element of level 1,
//! and so on until a level has at most `B` elements. A search goes top-down; at each
//! level it looks only inside one block of `B` consecutive elements. With `B = 64` and
//! 10^7 records the levels hold 156,250 + 2,442 + 39 elements (1.3 MB, 1.6% of the
//! sequence): the upper two stay in L1, the lowest fits the L2/L3, and the sequence
//! itself is read in one block of 64 elements: eight cache lines, fetched together by
//! testing the first element of each (independent loads) before bisecting the one
//! line that matters. So a search costs about two memory round trips where the binary
//! search costs ten. Up to 2^15 elements (256 KiB of `u64`) the sequence stays cached
//! and a plain binary search is used.
//!
//! Measured (`cargo bench --bench search`, one run on a loaded 2-core VM, throughput /
//! latency with each target depending on the previous answer): at 10^7 elements
//! 1.54 µs / 1.20 µs against `partition_point`'s 5.81 µs / 6.55 µs; at 10^6 0.75 µs /
//! 0.64 µs against 1.22 µs / 1.91 µs; at 10^5 0.10 µs / 0.13 µs against 0.06 µs /
//! 0.22 µs (a cached binary search still overlaps well across independent queries);
//! the same code below 2^15.
//!
//! The levels are maintained on [`push`](SampledIndex::push) in **O(1)** amortized
//! (an element is copied up with probability `1/B`, `1/B^2`, ...), so the index suits
//! an append-only log; [`truncate`](SampledIndex::truncate) serves pops (revoked cuts)
//! and [`from_vec`](SampledIndex::from_vec) rebuilds after a splice in **O(n)**.
//!
//! # What else was measured, and why it lost
//!
//! `benches/search.rs` compares every contender on the same seeded prefix sums of a
//! realistic session, at 10^3..10^7 elements, in one run (numbers in the README):
//!
//! - **Eytzinger layout** (the sequence in BFS order of its implicit search tree; a
//!   branch-free descent): 2.71 µs at 10^7, 1.51 µs at 10^6, between the binary
//!   search and the sampled index. Its real win comes from prefetching the 16
//!   descendants four levels down, which needs `core::arch` prefetch intrinsics: not
//!   portable, and not callable without `unsafe` before Rust 1.87 (this crate forbids
//!   `unsafe` and supports 1.85). Without prefetch the last levels are still serial
//!   misses. It also needs a second copy of the sequence (8 bytes per record) and
//!   cannot be appended to without rebuilding.
//! - **Interpolation** (guess the position from the straight line through the first
//!   and last sums, then gallop and bisect): 3.15 µs at 10^7, 1.34 µs at 10^6. Prefix
//!   sums of a session are only roughly linear: token sizes have a heavy tail, so the
//!   guess misses by thousands of records at 10^7 and the gallop pays several misses
//!   anyway. It also degrades without bound on adversarial sizes (one huge record),
//!   where the sampled index does not look at the values at all.
#![allow(
    unreachable_pub,
    reason = "a module of the benches and of a test binary: `pub` is its API to them"
)]

/// The sampling factor of [`SampledIndex`] when none is named: each level keeps one
/// element in 64. Chosen by `benches/search.rs`: 16 and 128 lost to 32 and 64; 64 was
/// as fast as 32 or faster in latency at every size where they differ (above 2^15;
/// 1.20 µs against 1.52 µs at 10^7), and its levels are half the size (1.6% of the
/// sequence).
pub const DEFAULT_FANOUT: usize = 64;

/// Up to this many elements a plain binary search wins: the whole sequence stays in
/// the L1/L2 caches, its probes hit, and the levels would only add work.
const SMALL_ELEMENTS: usize = 1 << 15;

/// A non-decreasing sequence with a sampled multi-level index for fast
/// [`partition_point`](SampledIndex::partition_point) searches. See the
/// [module docs](self) for the layout and the measurements behind it.
///
/// `B` is the sampling factor (at least 2): level `k + 1` holds every `B`-th element of
/// level `k`, level 0 being the sequence.
///
/// # Invariants
///
/// Checked by `assert_invariants` (hidden), which the tests call:
///
/// 1. `levels[0]` is `seq[0], seq[B], seq[2B], ...` and `levels[k + 1]` samples
///    `levels[k]` the same way; every level has exactly `ceil(len / B)` elements of
///    the level below.
/// 2. There is an upper level only while the level below it has more than `B`
///    elements, so the top level (or the sequence itself) holds at most `B`.
///
/// The sequence being non-decreasing (more generally: partitioned by every predicate
/// searched) is the caller's contract, as for `slice::partition_point`; debug builds
/// check it on `push`.
#[derive(Clone, Debug)]
pub struct SampledIndex<T, const B: usize = DEFAULT_FANOUT> {
    seq: Vec<T>,
    /// `levels[0]` samples `seq`, `levels[k + 1]` samples `levels[k]`.
    levels: Vec<Vec<T>>,
}

impl<T, const B: usize> Default for SampledIndex<T, B> {
    fn default() -> Self {
        SampledIndex {
            seq: Vec::new(),
            levels: Vec::new(),
        }
    }
}

impl<T: Copy + Ord, const B: usize> SampledIndex<T, B> {
    const FANOUT_IS_AT_LEAST_TWO: () = assert!(B >= 2, "a sampling factor below 2 samples nothing");

    /// An empty index. **O(1)**, no allocation.
    pub fn new() -> Self {
        let () = Self::FANOUT_IS_AT_LEAST_TWO;
        Self::default()
    }

    /// An index over `seq`, which must be non-decreasing. **O(n)** (the levels are
    /// `n / (B - 1)` elements in all).
    pub fn from_vec(seq: Vec<T>) -> Self {
        let () = Self::FANOUT_IS_AT_LEAST_TWO;
        let mut levels: Vec<Vec<T>> = Vec::new();
        loop {
            let below = levels.last().unwrap_or(&seq);
            if below.len() <= B {
                break;
            }
            let level: Vec<T> = below.iter().step_by(B).copied().collect();
            levels.push(level);
        }
        SampledIndex { seq, levels }
    }

    /// Number of elements. **O(1)**.
    pub fn len(&self) -> usize {
        self.seq.len()
    }

    /// Whether the sequence is empty. **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.seq.is_empty()
    }

    /// The sequence. **O(1)**.
    pub fn as_slice(&self) -> &[T] {
        &self.seq
    }

    /// The last element. **O(1)**.
    pub fn last(&self) -> Option<T> {
        self.seq.last().copied()
    }

    /// Appends `value`, which must be at least the last element. **O(1)** amortized:
    /// one element in `B` is copied to level 1, one in `B^2` to level 2, and so on.
    pub fn push(&mut self, value: T) {
        debug_assert!(
            self.seq.last().is_none_or(|&last| last <= value),
            "SampledIndex::push keeps the sequence non-decreasing"
        );
        self.seq.push(value);
        // The new element is sampled into level k iff its index at level k - 1 is a
        // multiple of B; a level is created when the one below first exceeds B.
        let mut index_below = self.seq.len() - 1;
        let mut k = 0;
        loop {
            let len_below = index_below + 1;
            if k == self.levels.len() {
                if len_below <= B {
                    return;
                }
                // The level below just grew to B + 1 elements: sample its two blocks.
                debug_assert_eq!(len_below, B + 1);
                let below = if k == 0 {
                    &self.seq
                } else {
                    &self.levels[k - 1]
                };
                let level = vec![below[0], below[B]];
                self.levels.push(level);
                return;
            }
            if index_below % B != 0 {
                return;
            }
            self.levels[k].push(value);
            index_below = self.levels[k].len() - 1;
            k += 1;
        }
    }

    /// Keeps the first `len` elements (no effect if there are fewer). **O(number of
    /// levels)** plus the elements dropped, which is **O(1)** amortized over pushes.
    pub fn truncate(&mut self, len: usize) {
        if len >= self.seq.len() {
            return;
        }
        self.seq.truncate(len);
        let mut len_below = len;
        let mut keep = 0;
        for level in &mut self.levels {
            if len_below <= B {
                break;
            }
            len_below = len_below.div_ceil(B);
            level.truncate(len_below);
            keep += 1;
        }
        self.levels.truncate(keep);
    }

    /// The index of the first element for which `pred` is false, exactly as
    /// `slice::partition_point` on [`as_slice`](SampledIndex::as_slice): `pred` must be
    /// true on a prefix and false after it. **O(B · log_B n)** comparisons, but only
    /// one block of `B` elements of the sequence itself is read, so about one cache
    /// miss where a binary search takes `log2(n / cache)`.
    pub fn partition_point<P: FnMut(&T) -> bool>(&self, pred: P) -> usize {
        if self.seq.len() <= SMALL_ELEMENTS {
            return self.seq.partition_point(pred);
        }
        self.search_levels(pred)
    }

    /// [`partition_point`](SampledIndex::partition_point) through the levels, whatever
    /// the length (the tests call it on short sequences).
    fn search_levels<P: FnMut(&T) -> bool>(&self, mut pred: P) -> usize {
        if self.levels.is_empty() {
            return block_partition_point(&self.seq, &mut pred);
        }
        // `count` = elements of the current level for which `pred` holds. Because
        // `pred` holds on a prefix, all of them but those of the last block that
        // starts with a true element are known without reading them.
        let mut count = 0;
        for (k, level) in self.levels.iter().enumerate().rev() {
            let block = if k + 1 == self.levels.len() {
                &level[..]
            } else {
                if count == 0 {
                    return 0;
                }
                let start = (count - 1) * B;
                count = start;
                &level[start..level.len().min(start + B)]
            };
            count += block_partition_point(block, &mut pred);
        }
        if count == 0 {
            return 0;
        }
        let start = (count - 1) * B;
        start + block_partition_point(&self.seq[start..self.seq.len().min(start + B)], &mut pred)
    }

    /// Heap bytes held by the sequence and its levels. **O(levels)**.
    pub fn heap_bytes(&self) -> usize {
        let size = std::mem::size_of::<T>();
        self.seq.capacity() * size
            + self.levels.capacity() * std::mem::size_of::<Vec<T>>()
            + self
                .levels
                .iter()
                .map(|l| l.capacity() * size)
                .sum::<usize>()
    }

    /// Checks the invariants in the type docs; panics with a description of the first
    /// that fails. **O(n)**. For tests.
    #[doc(hidden)]
    pub fn assert_invariants(&self) {
        let mut below: &[T] = &self.seq;
        for (k, level) in self.levels.iter().enumerate() {
            assert!(
                below.len() > B,
                "level {} exists only above a level of more than {B} elements (has {})",
                k + 1,
                below.len()
            );
            let expected: Vec<T> = below.iter().step_by(B).copied().collect();
            assert!(
                *level == expected,
                "level {} samples every {B}th element of the level below",
                k + 1
            );
            below = level;
        }
        assert!(
            below.len() <= B,
            "the top level holds at most {B} elements (has {})",
            below.len()
        );
    }
}

/// Elements of `T` per 64-byte cache line (at least 1).
const fn per_line<T>() -> usize {
    let size = std::mem::size_of::<T>();
    if size == 0 || size >= 64 {
        1
    } else {
        64 / size
    }
}

/// `partition_point` within one block of at most `B` elements: test the first element
/// of each cache line, then bisect the one line where `pred` turns false. The line
/// tests are independent loads, so the lines of an uncached block are fetched together
/// (one memory round trip) instead of one after another as a bisection's probes are;
/// the bisection then runs in L1. Measured against counting every element (`B`
/// comparisons, slower once the block is cached) and a plain bisection (serial misses).
/// **O(B / line + log line)**.
fn block_partition_point<T, P: FnMut(&T) -> bool>(block: &[T], pred: &mut P) -> usize {
    let line = per_line::<T>();
    let mut lines_true = 0;
    let mut i = 0;
    while i < block.len() {
        lines_true += usize::from(pred(&block[i]));
        i += line;
    }
    if lines_true == 0 {
        return 0;
    }
    // `pred` holds on the first element of line `lines_true - 1`: bisect the rest.
    let start = (lines_true - 1) * line + 1;
    let end = block.len().min(start - 1 + line);
    start + block[start..end].partition_point(pred)
}

/// `slice::partition_point` for an answer expected near the end: probes `len - 1`,
/// `len - 2`, `len - 4`, ... until `pred` holds, then bisects the last gap.
/// **O(log d)** for an answer `d` elements from the end, touching only the cache lines
/// near the end: the right search for a lookback window that ends at a known
/// position (the lookback floor of `select_legal_cut`).
pub fn partition_point_from_end<T, P: FnMut(&T) -> bool>(slice: &[T], mut pred: P) -> usize {
    let len = slice.len();
    // Invariant: every element at or after `hi` is false.
    let mut hi = len;
    let mut step = 1;
    while hi > 0 {
        let probe = hi.saturating_sub(step);
        if pred(&slice[probe]) {
            // The answer lies in probe + 1..=hi.
            return probe + 1 + slice[probe + 1..hi].partition_point(pred);
        }
        hi = probe;
        step *= 2;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sums(tokens: &[u64]) -> Vec<u64> {
        tokens
            .iter()
            .scan(0u64, |acc, &t| {
                *acc += t;
                Some(*acc)
            })
            .collect()
    }

    /// Both ways of building agree, hold the invariants, and answer every target
    /// (each element, each element ± 1, beyond the ends) like `partition_point`.
    fn check<const B: usize>(seq: &[u64]) {
        let mut pushed = SampledIndex::<u64, B>::new();
        for &x in seq {
            pushed.push(x);
        }
        pushed.assert_invariants();
        let built = SampledIndex::<u64, B>::from_vec(seq.to_vec());
        built.assert_invariants();
        assert_eq!(pushed.levels, built.levels);
        let mut targets = vec![0, u64::MAX];
        for &x in seq {
            targets.extend([x.saturating_sub(1), x, x.saturating_add(1)]);
        }
        for t in targets {
            let want = seq.partition_point(|&s| s < t);
            assert_eq!(pushed.partition_point(|&s| s < t), want, "< {t}");
            assert_eq!(pushed.search_levels(|&s| s < t), want, "levels, < {t}");
            assert_eq!(
                pushed.search_levels(|&s| s <= t),
                seq.partition_point(|&s| s <= t),
                "levels, <= {t}"
            );
            assert_eq!(
                partition_point_from_end(seq, |&s| s < t),
                want,
                "from end, < {t}"
            );
        }
    }

    #[test]
    fn levels_appear_exactly_when_a_level_exceeds_the_fanout() {
        let mut ix = SampledIndex::<u64, 4>::new();
        for x in 0..4 {
            ix.push(x);
        }
        assert!(ix.levels.is_empty(), "4 elements fit one block");
        ix.push(4);
        assert_eq!(ix.levels, [vec![0, 4]]);
        for x in 5..17 {
            ix.push(x);
        }
        // 17 elements: level 1 = 0, 4, 8, 12, 16 (5 > 4), so level 2 = 0, 16.
        assert_eq!(ix.levels, [vec![0, 4, 8, 12, 16], vec![0, 16]]);
        ix.truncate(16);
        assert_eq!(ix.levels, [vec![0, 4, 8, 12]]);
        ix.truncate(4);
        assert!(ix.levels.is_empty());
        ix.assert_invariants();
    }

    #[test]
    fn duplicates_and_plateaus_find_the_first_position() {
        // Zero-token records make runs of equal sums; the answer must be the first.
        let seq = sums(&[0, 0, 5, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 9]);
        check::<2>(&seq);
        check::<3>(&seq);
        check::<4>(&seq);
        let ix = SampledIndex::<u64, 2>::from_vec(seq.clone());
        assert_eq!(ix.partition_point(|&s| s < 5), 2);
        assert_eq!(ix.partition_point(|&s| s < 8), 9);
        assert_eq!(ix.partition_point(|&s| s <= 8), 17);
    }

    #[test]
    fn long_sequences_take_the_levels() {
        // Longer than SMALL_ELEMENTS, so `partition_point` itself goes through them.
        let seq: Vec<u64> = (0..(SMALL_ELEMENTS as u64 * 3))
            .map(|i| i / 3 * 7)
            .collect();
        let ix = SampledIndex::<u64>::from_vec(seq.clone());
        for t in (0..seq[seq.len() - 1] + 9).step_by(97) {
            assert_eq!(
                ix.partition_point(|&s| s < t),
                seq.partition_point(|&s| s < t)
            );
        }
    }

    #[test]
    fn legal_cut_positions_as_u32_with_revocations() {
        // The legal-cut index's use: increasing u32 positions, "largest cut <= pos"
        // searches, cuts popped from the top when a late call revokes them.
        let cuts: Vec<u32> = (0..5_000u32).filter(|p| p % 3 != 1).collect();
        let mut ix = SampledIndex::<u32, 4>::from_vec(cuts.clone());
        for pos in 0..5_100u32 {
            let want = cuts.partition_point(|&c| c <= pos);
            assert_eq!(ix.search_levels(|&c| c <= pos), want, "pos {pos}");
        }
        ix.truncate(1_000);
        ix.assert_invariants();
        for pos in (0..5_100u32).step_by(7) {
            let want = cuts[..1_000].partition_point(|&c| c <= pos);
            assert_eq!(
                ix.search_levels(|&c| c <= pos),
                want,
                "after truncate, pos {pos}"
            );
        }
    }

    #[test]
    fn empty_and_tiny() {
        check::<2>(&[]);
        check::<2>(&[7]);
        check::<32>(&[]);
        check::<32>(&[1, 2]);
        assert_eq!(SampledIndex::<u64>::new().partition_point(|_| true), 0);
        assert_eq!(partition_point_from_end::<u64, _>(&[], |_| true), 0);
    }

    #[test]
    fn a_realistic_session_agrees_at_every_fanout() {
        let records = cutpoint::testing::synth::Session::records(3, 20_000);
        let seq = sums(&records.iter().map(|r| r.tokens()).collect::<Vec<_>>());
        check::<2>(&seq[..3_000]);
        check::<16>(&seq);
        check::<32>(&seq);
        check::<64>(&seq);
    }

    proptest! {
        // This file is included by a bench and by `tests/it/sampled.rs`, so proptest
        // cannot find the crate root to put regressions beside: keep them beside it.
        #![proptest_config(ProptestConfig {
            failure_persistence: Some(Box::new(
                proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
            )),
            ..ProptestConfig::default()
        })]
        #[test]
        fn agrees_with_partition_point(
            tokens in prop::collection::vec(prop_oneof![Just(0u64), 0u64..10, 0u64..100_000], 0..600),
            cut in 0usize..700,
        ) {
            let seq = sums(&tokens);
            check::<2>(&seq);
            check::<3>(&seq);
            check::<8>(&seq);
            // Truncating then pushing again rebuilds the same levels.
            let mut ix = SampledIndex::<u64, 3>::from_vec(seq.clone());
            ix.truncate(cut);
            ix.assert_invariants();
            let kept = cut.min(seq.len());
            prop_assert_eq!(ix.as_slice(), &seq[..kept]);
            for &x in &seq[kept..] {
                ix.push(x);
            }
            ix.assert_invariants();
            prop_assert_eq!(ix.levels, SampledIndex::<u64, 3>::from_vec(seq).levels);
        }
    }
}
