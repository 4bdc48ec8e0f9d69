//! Searching the index's `VecDeque`s: binary search on the deque's two slices, a
//! gallop back from a known end, and a lazily built sampled **top level** that makes a
//! search over a long index cost about two cache misses instead of about ten.
//!
//! # Why a top level, and why it is built lazily
//!
//! At 10^7 records the prefix sums are 80 MB: a plain binary search makes about 23
//! dependent probes and the last ten or so miss every cache (and often the TLB).
//! [`Top`] keeps every [`STRIDE`]-th stored element (1/64 of the index: 1.25 MB of sums
//! at 10^7, which stays in L2/L3) and every 64th of those (20 KB, in L1/L2). A search
//! bisects the small upper level, then *counts* within one block of 64 samples and one
//! block of 64 consecutive elements (eight cache lines) of the index itself: counting
//! issues the block's eight loads independently, so they overlap, where a bisection
//! of the block waits for three or four misses in turn. Measured in `cargo bench
//! --bench query` (numbers in the README). Below [`SMALL`] elements the index is
//! cached anyway and the levels are neither built nor read.
//!
//! Appends keep a built top level exact in **O(1)** (one element in 64 is copied),
//! revocations (pops) truncate it in **O(1)**. A compaction splices a region out of the
//! middle of the deque, which shifts the index of every element after it by the
//! region's length: every sample after the region would need re-sampling, **O(n/64)**,
//! and the splice itself is only allowed **O(removed + shorter side)**. So a compaction
//! *drops* the top level in **O(1)** (freeing it) and the first search above [`SMALL`]
//! elements after it rebuilds it: one strided pass, **O(n / 64)** reads of the sums
//! and of the cuts (about 156,000 + 54,000 at 10^7 records, each on its own cache line
//! and most on their own page). Measured once (`Instant` around the first query of a
//! fresh tracker, test profile, loaded 2-core VM): 30 ms at 10^7 records, 5.8 ms at
//! 10^6, against 1.4-2.9 µs for the next query. That cost lands on the first query
//! after a compaction, not on the compaction, and is paid at most once per compaction;
//! an agent compacts when the context fills, far less often than it queries, and the
//! summary it compacts with takes an LLM call (seconds). The
//! alternative (keeping samples by position through a splice) costs the same
//! **O(n / 64)** on every compaction, queried or not.
//!
//! The lazily built level lives in a [`OnceLock`], so a `&Tracker` query can build it
//! and the tracker stays `Send + Sync` (the async adapter shares it across threads).

use std::collections::VecDeque;
use std::sync::OnceLock;

/// Every `STRIDE`-th element of the index is sampled into the top level. 64 `u64`s are
/// eight cache lines, the block a search reads of the index itself; the same factor
/// `search::SampledIndex` measured best (`benches/search.rs`).
pub(crate) const STRIDE: usize = 64;

/// Up to this many elements (256 KiB of `u64`) the index stays in the L2 cache and a
/// plain binary search wins; the top level is not built.
pub(crate) const SMALL: usize = 1 << 15;

/// The sampled top level of one index, when built: `samples[k]` is the stored element
/// at `k * STRIDE`, for every such index, and `upper[j]` is `samples[j * STRIDE]` (2,442
/// elements at 10^7 records, 20 KB: it stays in L1/L2). Unbuilt until a search needs it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Top<T> {
    levels: OnceLock<Levels<T>>,
}

#[derive(Clone, Debug)]
struct Levels<T> {
    samples: Vec<T>,
    upper: Vec<T>,
}

impl<T: Copy> Levels<T> {
    /// `samples` just got its last element (pushed or rewritten): follow it.
    fn sample_changed(&mut self) {
        let k = self.samples.len() - 1;
        if k % STRIDE == 0 {
            let value = self.samples[k];
            if self.upper.len() * STRIDE == k {
                self.upper.push(value);
            } else if let Some(last) = self.upper.last_mut() {
                *last = value;
            }
        }
    }
}

impl<T: Copy> Top<T> {
    /// The element at index `len - 1` of `dq` was just pushed (or rewritten, when it
    /// is the last): keep a built top level exact. **O(1)** amortized.
    pub(crate) fn pushed(&mut self, dq: &VecDeque<T>) {
        if let (Some(levels), Some(i)) = (self.levels.get_mut(), dq.len().checked_sub(1)) {
            if i % STRIDE == 0 {
                if let Some(&value) = dq.back() {
                    if levels.samples.len() * STRIDE == i {
                        levels.samples.push(value);
                    } else if let Some(last) = levels.samples.last_mut() {
                        // Rewritten in place (an open record changed size).
                        *last = value;
                    }
                    levels.sample_changed();
                }
            }
        }
    }

    /// `dq` lost elements at its back. **O(1)** amortized.
    pub(crate) fn truncated(&mut self, dq: &VecDeque<T>) {
        if let Some(levels) = self.levels.get_mut() {
            levels.samples.truncate(dq.len().div_ceil(STRIDE));
            levels.upper.truncate(levels.samples.len().div_ceil(STRIDE));
        }
    }

    /// `dq` was spliced: drop the level; the next search above [`SMALL`] rebuilds it
    /// (see the module docs for why). **O(1)** plus freeing it.
    pub(crate) fn invalidate(&mut self) {
        self.levels = OnceLock::new();
    }

    /// Heap bytes held. **O(1)**.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.levels.get().map_or(0, |l| {
            (l.samples.capacity() + l.upper.capacity()) * std::mem::size_of::<T>()
        })
    }

    /// The samples of `dq`, built now if they are not. **O(1)**, or **O(n / STRIDE)**
    /// the first time after a splice.
    fn levels(&self, dq: &VecDeque<T>) -> &Levels<T> {
        self.levels.get_or_init(|| {
            let (a, b) = dq.as_slices();
            let mut samples = Vec::with_capacity(dq.len().div_ceil(STRIDE));
            samples.extend(a.iter().step_by(STRIDE).copied());
            // The first index of `b` (overall index `a.len() + j`) that is a multiple.
            let skip = (STRIDE - a.len() % STRIDE) % STRIDE;
            samples.extend(b.iter().skip(skip).step_by(STRIDE).copied());
            let upper = samples.iter().step_by(STRIDE).copied().collect();
            Levels { samples, upper }
        })
    }

    /// Panics unless a built top level samples `dq` exactly. **O(n / STRIDE)**.
    pub(crate) fn assert_invariants(&self, dq: &VecDeque<T>)
    where
        T: PartialEq + std::fmt::Debug,
    {
        if let Some(Levels { samples, upper }) = self.levels.get() {
            assert_eq!(
                upper.len(),
                samples.len().div_ceil(STRIDE),
                "one upper sample per {STRIDE} samples"
            );
            for (j, u) in upper.iter().enumerate() {
                assert_eq!(*u, samples[j * STRIDE], "upper sample {j}");
            }
            assert_eq!(
                samples.len(),
                dq.len().div_ceil(STRIDE),
                "one sample per {STRIDE} elements"
            );
            for (k, s) in samples.iter().enumerate() {
                assert_eq!(*s, dq[k * STRIDE], "sample {k} is element {}", k * STRIDE);
            }
        }
    }
}

/// The first index of `dq` at which `pred` turns false (`pred` true on a prefix, false
/// after it); `len` if never. Through the top level above `small` elements.
/// **O(log n)**: about two cache misses above [`SMALL`] (module docs).
pub(crate) fn partition_point<T: Copy>(
    dq: &VecDeque<T>,
    top: &Top<T>,
    small: usize,
    pred: impl Fn(T) -> bool,
) -> usize {
    let len = dq.len();
    if len <= small {
        return range_partition_point(dq, 0, len, &pred);
    }
    let Levels { samples, upper } = top.levels(dq);
    // A bisection of the small upper level, then one block of 64 samples and one
    // block of 64 elements, each *counted* rather than bisected: `pred` holds on a
    // prefix, so the count is the partition point, and counting reads the block's
    // eight cache lines independently (the loads overlap) where a bisection waits for
    // three or four of them in turn. Measured in `benches/query.rs` (README).
    let u = upper.partition_point(|&x| pred(x));
    if u == 0 {
        return 0;
    }
    // `pred` holds at sample `(u - 1) * STRIDE` and fails at `u * STRIDE` (if inside).
    let lo = (u - 1) * STRIDE + 1;
    let hi = (u * STRIDE).min(samples.len());
    let c = lo + count(&samples[lo..hi], &pred);
    // Likewise for the elements `(c - 1) * STRIDE ..= c * STRIDE`.
    let lo = (c - 1) * STRIDE + 1;
    let hi = (c * STRIDE).min(len);
    let (a, b) = dq.as_slices();
    let split = a.len();
    lo + if hi <= split {
        count(&a[lo..hi], &pred)
    } else if lo >= split {
        count(&b[lo - split..hi - split], &pred)
    } else {
        count(&a[lo..], &pred) + count(&b[..hi - split], &pred)
    }
}

/// How many elements of `block` satisfy `pred`, branch-free. **O(len)**.
fn count<T: Copy>(block: &[T], pred: &impl Fn(T) -> bool) -> usize {
    block.iter().map(|&x| usize::from(pred(x))).sum()
}

/// The first index in `lo..hi` at which `pred` turns false, `hi` if never; `pred` is
/// known to hold before `lo`. `slice::partition_point` on the deque's two slices (so no
/// per-probe index wrapping). **O(log(hi - lo))**.
pub(crate) fn range_partition_point<T: Copy>(
    dq: &VecDeque<T>,
    lo: usize,
    hi: usize,
    pred: &impl Fn(T) -> bool,
) -> usize {
    debug_assert!(lo <= hi && hi <= dq.len());
    let (a, b) = dq.as_slices();
    let split = a.len();
    if hi <= split {
        lo + a[lo..hi].partition_point(|&x| pred(x))
    } else if lo >= split {
        lo + b[lo - split..hi - split].partition_point(|&x| pred(x))
    } else if a.last().is_some_and(|&x| pred(x)) {
        split + b[..hi - split].partition_point(|&x| pred(x))
    } else {
        lo + a[lo..].partition_point(|&x| pred(x))
    }
}

/// [`range_partition_point`] over `0..hi` for an answer expected near `hi`: gallops
/// back from `hi` (steps 1, 2, 4, ...) then bisects. **O(log(hi - answer))**, so a
/// lookback floor a few records behind its target costs a few probes of cache lines
/// the target's search already read.
pub(crate) fn partition_point_from_end<T: Copy>(
    dq: &VecDeque<T>,
    hi: usize,
    pred: impl Fn(T) -> bool,
) -> usize {
    // Invariant: `pred` fails at every index in `upper..hi`.
    let mut upper = hi;
    let mut step = 1;
    while upper > 0 {
        let probe = upper.saturating_sub(step);
        if pred(dq[probe]) {
            return range_partition_point(dq, probe + 1, upper, &pred);
        }
        upper = probe;
        step *= 2;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A deque holding `values` whose storage wraps (its head is mid-buffer), so both
    /// slices are exercised.
    fn wrapped(values: &[u64], front: usize) -> VecDeque<u64> {
        let front = front.min(values.len());
        let mut dq: VecDeque<u64> = VecDeque::with_capacity(values.len() + 1);
        dq.extend(&values[front..]);
        for &v in values[..front].iter().rev() {
            dq.push_front(v);
        }
        dq
    }

    proptest! {
        #[test]
        fn searches_agree_with_a_linear_scan(
            steps in proptest::collection::vec(0u64..4, 0..700),
            front in 0usize..700,
            cut in 0usize..700,
            target in 0u64..1500,
        ) {
            let values: Vec<u64> = steps.iter().scan(0, |s, &d| { *s += d; Some(*s) }).collect();
            let mut dq = wrapped(&values, front);
            let mut top = Top::default();
            let want = values.iter().take_while(|&&v| v < target).count();
            for small in [0, usize::MAX] {
                prop_assert_eq!(partition_point(&dq, &top, small, |v| v < target), want);
            }
            prop_assert_eq!(partition_point_from_end(&dq, dq.len(), |v| v < target), want);
            let hi = cut.min(values.len());
            let want_hi = values[..hi].iter().take_while(|&&v| v < target).count();
            prop_assert_eq!(partition_point_from_end(&dq, hi, |v| v < target), want_hi);
            top.assert_invariants(&dq);

            // A built level follows pushes and pops exactly.
            let last = values.last().copied().unwrap_or(0);
            for extra in 0..130 {
                dq.push_back(last + extra);
                top.pushed(&dq);
                top.assert_invariants(&dq);
            }
            let keep = cut.min(dq.len());
            dq.truncate(keep);
            top.truncated(&dq);
            top.assert_invariants(&dq);
            let want = dq.iter().take_while(|&&v| v < target).count();
            prop_assert_eq!(partition_point(&dq, &top, 0, |v| v < target), want);
            top.invalidate();
            prop_assert_eq!(top.heap_bytes(), 0);
            prop_assert_eq!(partition_point(&dq, &top, 0, |v| v < target), want);
            top.assert_invariants(&dq);
        }
    }

    #[test]
    fn a_rewritten_last_sample_follows() {
        let mut dq: VecDeque<u64> = (0..65).collect();
        let mut top = Top::default();
        assert_eq!(partition_point(&dq, &top, 0, |v| v < 64), 64);
        if let Some(last) = dq.back_mut() {
            *last = 1000;
        }
        top.pushed(&dq);
        top.assert_invariants(&dq);
        assert_eq!(partition_point(&dq, &top, 0, |v| v < 1000), 64);
        assert_eq!(partition_point(&dq, &top, 0, |v| v < 1001), 65);
    }
}
