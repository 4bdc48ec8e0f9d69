//! Inclusive prefix token sums in blocks of 64 records (see the [module docs](super)).

use super::chunked::Chunked;
use crate::core::ensure::{ensure, ensure_eq};
use std::sync::OnceLock;

use super::{B, Replacement};

/// The offsets of one block's records from its base.
///
/// Every slot holds a value, so that the whole block is non-decreasing and a search
/// needs no bounds: slots before the first record (only in the first block, after a
/// compaction) hold 0, and slots after the last record hold the type's maximum.
#[derive(Clone, Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "the large variant is the common one, inline on purpose: no pointer to chase"
)]
enum Offsets {
    /// All offsets fit in `u32`: the normal case. Inline, so that a block is one
    /// contiguous run of 264 bytes in its chunk, reached without a pointer.
    Narrow([u32; B]),
    /// Some offset does not: 64 records holding more than `u32::MAX` tokens.
    Wide(Box<[u64; B]>),
}

impl Offsets {
    /// A block with no record yet. **O(64)**.
    fn empty() -> Offsets {
        Offsets::Narrow([u32::MAX; B])
    }

    /// A block of offsets holding `values` at slots `from..`. **O(64)**.
    fn build(from: usize, values: &[u64]) -> Offsets {
        debug_assert!(from + values.len() <= B);
        let to = from + values.len();
        if values.iter().all(|&v| v <= u64::from(u32::MAX)) {
            let mut narrow = [u32::MAX; B];
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
    /// into the non-decreasing block, whose records end at slot `hi`. All 64 slots are
    /// counted with vector compares, so the block's cache lines are all requested at
    /// once and none waits for another (three pivots picking a quarter, as before,
    /// made the quarter's line wait for the pivots' in one query of four). **O(1)**:
    /// 64 compares, branch-free.
    #[inline]
    fn count_below(&self, t: u64, hi: usize) -> usize {
        fn count<T: Copy + PartialOrd>(o: &[T; B], t: T) -> usize {
            o.iter().map(|&v| u32::from(v < t)).sum::<u32>() as usize
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
            // Inline in its chunk, counted there.
            Offsets::Narrow(_) => 0,
            Offsets::Wide(_) => std::mem::size_of::<[u64; B]>(),
        }
    }
}

/// Bases per chunk of storage (4 KB).
const BASES_CHUNK: usize = 512;
/// Blocks per chunk of storage (128 blocks of 264 bytes: 33 KB, 8,192 records).
const BLOCKS_CHUNK: usize = 128;

/// Blocks above which a search reads [`Upper`]'s `top` and `near` levels instead of
/// bisecting `every` and counting 64 bases: 2^17 blocks (8.4 million records), where
/// the bases (1 MB) outgrow the L2. Below it the bases are a cache hit and the extra
/// counts cost more than they save (measured in one process: 1.09x the time at 10^6
/// records, 0.99-1.02x at 10^7, 0.77-0.84x at 10^8; docs/performance.md).
const NEAR_FROM: usize = 1 << 17;

/// Which levels a search reads, by the number of blocks: past `upper_from` the
/// [`Upper`] levels instead of a bisection of the bases, past `near_from` their `top`
/// and `near` levels instead of a bisection of `every`.
#[derive(Clone, Copy, Debug)]
struct Levels {
    upper_from: usize,
    near_from: usize,
}

impl Levels {
    /// The routes measured fastest for each size: up to 4 groups (256 blocks, 16,384
    /// records, 2 KB of bases) a bisection of the bases; up to [`NEAR_FROM`] a
    /// bisection of `every`; past it `top` and `near`.
    const SIZED: Levels = Levels {
        upper_from: 4 * B,
        near_from: NEAR_FROM,
    };
}

/// The levels above the bases, which a search reads before the one block it needs:
///
/// - `every[j] == bases[64 * j]`: one entry per *group* of 64 blocks (2,442 entries,
///   20 KB at 10^7 records; 195 KB at 10^8, past the L1);
/// - `top[k] == every[64 * k]` (39 entries at 10^7, 382 at 10^8: in L1), so that a
///   search bisects `top` and then counts 64 entries of `every` (eight lines requested
///   together) instead of bisecting `every`, whose lower steps each waited for a line;
/// - `near[b]`: block `b`'s base relative to its group's first, scaled down by the
///   group's `scale[j]` bits, the fewest that fit the group's span in a `u16`: 2 bytes a
///   block, 312 KB at 10^7 records (in the L2), 3.1 MB at 10^8 (in the L3). Counting a
///   group's 64 entries (two lines) names the target's block without reading its 64
///   bases from memory, unless the target falls within `2^scale` tokens of a block's
///   base (then the bases decide). With the span about 65,000 steps, a block (1/64
///   of it) is about 1,000: about one query in 1,000 reads the bases.
///
/// All values are *stored* bases (true value minus the shift): differences within a
/// group do not depend on the shift.
#[derive(Clone, Debug, Default)]
struct Upper {
    every: Vec<u64>,
    top: Vec<u64>,
    near: Vec<u16>,
    scale: Vec<u8>,
}

impl Upper {
    /// The levels over `bases`, a group at a time (its scale from its span, then its
    /// entries). **O(n / 64)**: every base is read once, in order.
    fn of(bases: &Chunked<u64, BASES_CHUNK>) -> Upper {
        let n = bases.len();
        let groups = n.div_ceil(B);
        let mut upper = Upper {
            every: Vec::with_capacity(groups),
            top: Vec::with_capacity(groups.div_ceil(B)),
            near: Vec::with_capacity(n),
            scale: Vec::with_capacity(groups),
        };
        for lo in (0..n).step_by(B) {
            let first = bases[lo];
            if upper.every.len() % B == 0 {
                upper.top.push(first);
            }
            upper.every.push(first);
            let (scale, entries) = Upper::group(bases, lo, (lo + B).min(n));
            upper.scale.push(scale);
            upper.near.extend(entries);
        }
        upper
    }

    /// The scale and the `near` entries of the group of blocks `lo..hi` (`lo` its
    /// first), from their bases: the scale from the group's span, then each base past
    /// the first, scaled. **O(64)**.
    fn group(
        bases: &Chunked<u64, BASES_CHUNK>,
        lo: usize,
        hi: usize,
    ) -> (u8, impl Iterator<Item = u16> + '_) {
        let first = bases[lo];
        let scale = scale_for(bases[hi - 1].wrapping_sub(first));
        // Below `u16::MAX` by `scale_for`, bases never decreasing in a group.
        let entries = bases
            .slices(lo, hi)
            .flatten()
            .map(move |&stored| (stored.wrapping_sub(first) >> scale) as u16);
        (scale, entries)
    }

    /// Adds the base of the next block. **O(1)** amortized: a group is rescaled
    /// (64 entries) at most 48 times.
    fn push(&mut self, stored: u64) {
        let b = self.near.len();
        if b % B == 0 {
            if self.every.len() % B == 0 {
                self.top.push(stored);
            }
            self.every.push(stored);
            self.scale.push(0);
        }
        self.near.push(0);
        self.renear(b, stored);
    }

    /// Stores group `j`'s first base (block `64 * j`'s) in `every` and `top`; its
    /// `near` entries are brought up to date by [`Upper::refresh`]. **O(1)**.
    fn set_first(&mut self, j: usize, stored: u64) {
        self.every[j] = stored;
        if j % B == 0 {
            self.top[j / B] = stored;
        }
    }

    /// Recomputes the `near` entries and the scale of groups `groups` (those that
    /// exist) from `bases`, after their bases changed other than by one shift for the
    /// whole group. **O(64)** a group.
    fn refresh(
        &mut self,
        groups: std::ops::RangeInclusive<usize>,
        bases: &Chunked<u64, BASES_CHUNK>,
    ) {
        let held = self.every.len();
        for j in groups.filter(|&j| j < held) {
            let (lo, hi) = (j * B, (j * B + B).min(self.near.len()));
            let (scale, entries) = Upper::group(bases, lo, hi);
            self.scale[j] = scale;
            for (q, entry) in self.near[lo..hi].iter_mut().zip(entries) {
                *q = entry;
            }
        }
    }

    /// Sets `near[b]` from block `b`'s stored base, first widening the group's scale
    /// (shifting its earlier entries alike) when the base is too far from the group's
    /// first for it. **O(1)**, or **O(64)** on a rescale.
    fn renear(&mut self, b: usize, stored: u64) {
        let j = b / B;
        let rel = stored.wrapping_sub(self.every[j]);
        let old = self.scale[j];
        let scale = old.max(scale_for(rel));
        if scale != old {
            self.scale[j] = scale;
            // `(x >> old) >> (scale - old) == x >> scale`: the entries stay exact.
            let by = u32::from(scale - old);
            for q in &mut self.near[j * B..b] {
                *q = q.checked_shr(by).unwrap_or(0);
            }
        }
        // Below `u16::MAX` by `scale_for`.
        self.near[b] = (rel >> scale) as u16;
    }

    /// The number of blocks whose base is below the target, when the upper levels
    /// decide it: `below` tests a stored base against the target (true on a prefix,
    /// and on block 0) and `past(first)` is how far the target lies past a stored base
    /// that is below it (so at least 1). `Err(j)` when the target falls within one
    /// scale step of a block's base in group `j`, so that only the group's bases can
    /// decide. **O(log(n / 2^18) + 64 + 64)**: a bisection of `top` (in L1), a count
    /// over 64 entries of `every` (eight lines), a count over the group's `near`
    /// entries (two lines).
    #[inline]
    fn blocks_below(
        &self,
        below: impl Fn(&u64) -> bool,
        past: impl Fn(u64) -> u64,
    ) -> Result<usize, usize> {
        let k = self.top.partition_point(&below);
        let lo = k.saturating_sub(1) * B;
        let hi = (k * B).min(self.every.len());
        // `every[0]` is block 0's base, below the target: at least one counts.
        let j = lo + self.every[lo..hi].iter().filter(|b| below(b)).count() - 1;
        // Block `b` is below exactly when `rel(b) <= d`, `rel(b)` its base past the
        // group's first; `near[b] == rel(b) >> scale`, so `near[b] < d >> scale`
        // says below, `>` says not, and `==` cannot tell.
        let d = past(self.every[j]) - 1;
        let (lo, hi) = (j * B, (j * B + B).min(self.near.len()));
        let Ok(dq) = u16::try_from(d >> self.scale[j]) else {
            // Past every entry of the group (each is below `u16::MAX`).
            return Ok(hi);
        };
        // The group's first block is below: count the others.
        let rest = &self.near[lo + 1..hi];
        let less = rest.iter().filter(|&&q| q < dq).count();
        let equal = rest.iter().filter(|&&q| q == dq).count();
        if equal == 0 {
            Ok(lo + 1 + less)
        } else {
            Err(j)
        }
    }

    fn heap_bytes(&self) -> usize {
        (self.every.capacity() + self.top.capacity()) * std::mem::size_of::<u64>()
            + self.near.capacity() * std::mem::size_of::<u16>()
            + self.scale.capacity()
    }
}

/// The fewest bits a group whose bases span `span` tokens must be scaled down by for
/// every entry to fit below `u16::MAX`. **O(1)**.
fn scale_for(span: u64) -> u8 {
    // `span >> s < 2^16 - 1` for the smallest such `s`: the bits above the lowest 16,
    // plus one when the top 16 of what is left are all ones.
    let s = (64 - span.leading_zeros()).saturating_sub(16);
    let s = if (span >> s) >= u64::from(u16::MAX) {
        s + 1
    } else {
        s
    };
    s as u8
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
    bases: Chunked<u64, BASES_CHUNK>,
    offs: Chunked<Offsets, BLOCKS_CHUNK>,
    head: usize,
    len: usize,
    shift: u64,
    total: u64,
    /// The levels a search over a long log reads before the one block it needs (see
    /// [`Upper`]). Built by the first search that needs it, kept exact by pushes and
    /// token edits, dropped by a compaction (which moves blocks between groups) and
    /// rebuilt by the next search in **O(n / 64)**: one sequential read of the bases
    /// (1.2 MB at 10^7 records, 12.5 MB at 10^8; measured 0.5-0.8 ms and 8 ms, 29 ms
    /// while another job ran), once per compaction. In a
    /// `OnceLock` so that a `&self` search can build it.
    upper: OnceLock<Upper>,
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
    pub(super) fn at(&self, i: usize) -> u64 {
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
        if let Some(upper) = self.upper.get_mut() {
            upper.push(stored);
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
    /// **O(log(n / 64) + 64)**: the levels (see [`Levels`]) name the target's block,
    /// then a count in that block; the memory it waits for is the block's line and,
    /// below 2^17 blocks or in about one search in 1,000 past it, one group of bases.
    pub(crate) fn first_reaching(&self, target: u64) -> usize {
        self.first_reaching_then(target, |_| {})
    }

    /// [`PrefixSums::first_reaching`], calling `found(first)` with the first record of
    /// the target's block as soon as the block is known and before its offsets are
    /// read: a query that will read a word of the legal-cut bitmap next to that record
    /// can request it there, so that its load overlaps the block's instead of waiting
    /// for it. Same cost.
    #[inline]
    pub(crate) fn first_reaching_then(&self, target: u64, found: impl FnOnce(usize)) -> usize {
        self.search(target, Levels::SIZED, found)
    }

    /// [`PrefixSums::first_reaching`] by each route a search can take (a bisection of
    /// the bases, of `every`, and `top` with `near`), whatever the log's length, and
    /// whether the last route had to read its group's bases: for tests, which need
    /// every route on logs small enough to check against a scan.
    #[cfg(test)]
    pub(super) fn first_reaching_by_every_route(&self, target: u64) -> ([usize; 3], bool) {
        let route = |upper_from, near_from| {
            let levels = Levels {
                upper_from,
                near_from,
            };
            self.search(target, levels, |_| {})
        };
        let upper = self.upper.get_or_init(|| Upper::of(&self.bases));
        let fell_back = self.len > 0
            && target > 0
            && target <= self.total
            && upper
                .blocks_below(
                    |&b| b.wrapping_add(self.shift) < target,
                    |first| target - first.wrapping_add(self.shift),
                )
                .is_err();
        (
            [
                route(usize::MAX, usize::MAX),
                route(0, usize::MAX),
                route(0, 0),
            ],
            fell_back,
        )
    }

    /// [`PrefixSums::first_reaching_then`] through the levels `levels` chooses (tests
    /// force each route on logs of any length; the answer never depends on it).
    #[inline(always)]
    fn search(&self, target: u64, levels: Levels, found: impl FnOnce(usize)) -> usize {
        if target > self.total || self.len == 0 {
            return self.len;
        }
        if target == 0 {
            return 0;
        }
        // The last block whose base is below the target: block 0's base (0) is.
        let shift = self.shift;
        let below = |&b: &u64| b.wrapping_add(shift) < target;
        let n = if self.bases.len() <= levels.upper_from {
            let mut n = 0;
            for part in self.bases.slices(0, self.bases.len()) {
                let k = part.partition_point(below);
                n += k;
                if k < part.len() {
                    break;
                }
            }
            n
        } else {
            // The upper levels (in cache) name the block; the group's 64 bases (eight
            // lines read together: one miss) only when they cannot tell.
            let upper = self.upper.get_or_init(|| Upper::of(&self.bases));
            let decided = if self.bases.len() > levels.near_from {
                upper.blocks_below(below, |first| target - first.wrapping_add(shift))
            } else {
                // `every[0]` is block 0's base, below the target.
                Err(upper.every.partition_point(below) - 1)
            };
            match decided {
                Ok(n) => n,
                Err(j) => {
                    let (lo, hi) = (j * B, (j * B + B).min(self.bases.len()));
                    lo + self
                        .bases
                        .slices(lo, hi)
                        .map(|part| part.iter().filter(|b| below(b)).count())
                        .sum::<usize>()
                }
            }
        };
        found(((n - 1) * B).saturating_sub(self.head));
        self.reaching_in(n - 1, target)
    }

    /// Whether cut `c <= t` lies at or after [`PrefixSums::floor`]`(t, lookback)`,
    /// without finding the floor. **O(1)**: the sums of records `t` and `c - 1` (or the
    /// base of `c`'s block when `c` starts one), which are on the cache lines the
    /// search for `t` just read when `c` is in or just before `t`'s block. The floor is
    /// the first `j` with `before(j) >= at(t) - lookback` (or `t`), and `before` never
    /// decreases, so `c` is at or after it exactly when `before(c)` reaches that
    /// threshold or `c == t`.
    #[inline]
    pub(crate) fn within_lookback(&self, t: usize, lookback: u64, c: usize) -> bool {
        debug_assert!(c <= t && t < self.len);
        match self.at(t).checked_sub(lookback).filter(|&th| th > 0) {
            None => true,
            Some(threshold) => {
                let s = self.head + c;
                let before = if c == 0 {
                    0
                } else if s % B == 0 {
                    // `c <= t < len`, so record `c` has a block and its base is this.
                    self.base(s / B)
                } else {
                    self.at(c - 1)
                };
                c == t || before >= threshold
            }
        }
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

    /// Replaces each of `regions` (sorted, disjoint, bounded by the caller's legal cuts,
    /// each `start < end <= len`) by one record of its summary tokens, or by nothing;
    /// the caller has checked that the new total does not overflow. Only the shorter
    /// side moves: the records before the last region's end (into the slots just before
    /// it, the records after it keeping their slots and stored values, what they gain or
    /// lose added to every base through the shift), or the records from the first
    /// region's start on. **O(R + min(kept before the last end, len - first start) +
    /// removed / 64 + 64)** for `R` regions (see the module docs).
    pub(crate) fn replace_many(&mut self, regions: &[Replacement]) {
        let (Some(first), Some(last)) = (regions.first(), regions.last()) else {
            return;
        };
        let (first, last) = (first.start, last.end);
        debug_assert!(first < last && last <= self.len);
        let len = self.len;
        let gone: usize = regions.iter().map(Replacement::gone).sum();
        let new_len = len - gone;
        self.upper = OnceLock::new();
        if new_len == 0 {
            *self = PrefixSums::default();
            return;
        }
        // The new inclusive sums of the records from old record `from` on, up to the
        // records kept before old record `to` (each region becoming its summary), and
        // the new sum before `to`.
        let new_sums = |from: usize, to: usize| {
            let mut moved = Vec::new();
            let mut sum = self.before(from);
            let mut kept_from = from;
            for r in regions.iter().filter(|r| r.start >= from && r.end <= to) {
                let base = self.before(kept_from);
                moved.extend((kept_from..r.start).map(|i| sum + (self.at(i) - base)));
                sum += self.before(r.start) - base;
                if let Some(tokens) = r.summary_tokens {
                    sum += tokens;
                    moved.push(sum);
                }
                kept_from = r.end;
            }
            let base = self.before(kept_from);
            moved.extend((kept_from..to).map(|i| sum + (self.at(i) - base)));
            sum += self.before(to) - base;
            (moved, sum)
        };
        if last <= len - first {
            // The front moves up into the slots before record `last`, which (with every
            // record after it) keeps its slot; record `last` is rewritten too, so that
            // its block is rebuilt even when nothing else lands in it.
            let to = (last + 1).min(len);
            let (moved, through) = new_sums(0, to);
            let before_last = if to > last {
                through - self.record(last)
            } else {
                through
            };
            // What every sum from record `last` on gains (or, wrapped, loses).
            self.shift = self
                .shift
                .wrapping_add(before_last.wrapping_sub(self.before(last)));
            let first_slot = self.head + gone;
            for _ in 0..first_slot / B {
                self.bases.pop_front();
                self.offs.pop_front();
            }
            self.head = first_slot % B;
            self.len = new_len;
            self.rewrite(0, &moved);
        } else {
            // The tail moves down. Start one record early when everything from `first`
            // on goes, so that the new last record's block is rebuilt.
            let from = first.min(new_len - 1);
            let (moved, _) = new_sums(from, len);
            self.len = new_len;
            let blocks = (self.head + self.len).div_ceil(B);
            self.bases.truncate(blocks);
            self.offs.truncate(blocks);
            self.rewrite(from, &moved);
        }
        self.total = self.at(self.len - 1);
        // Give back deque space once it is mostly empty: O(blocks), but only after at
        // least that many blocks were dropped, so O(1) amortized per dropped block.
        self.bases.shrink();
        self.offs.shrink();
    }

    /// Gives records new token counts in place: `edits` are `(record, tokens)` with the
    /// records strictly increasing and `< len`; the caller has checked that the new
    /// total fits in `u64`. Every block holding an edited record is rebuilt from its
    /// own offsets (64 slots); every block between the first and the last edited one
    /// gets its base moved by what the edits before it changed; the blocks after the
    /// last edited one move as a whole on the shorter side: their bases, or (through
    /// the shift) the bases of the blocks up to the last edited one.
    /// **O(k + 64 e + (l - f) + min(f, b - l))** for `k` edits in `e` blocks, the first
    /// in block `f` and the last in block `l` of `b` blocks: never more than the edits'
    /// blocks plus the bases after the first edited block.
    pub(crate) fn set_tokens(&mut self, edits: &[(usize, u64)]) {
        let (Some(&(first_at, _)), Some(&(last_at, _))) = (edits.first(), edits.last()) else {
            return;
        };
        debug_assert!(edits.windows(2).all(|w| w[0].0 < w[1].0) && last_at < self.len);
        let first_b = (self.head + first_at) / B;
        let last_b = (self.head + last_at) / B;
        // What every sum from the current block on has gained so far (wrapping).
        let mut delta: u64 = 0;
        let mut next = edits.iter().peekable();
        let mut values: Vec<u64> = Vec::with_capacity(B);
        for b in first_b..=last_b {
            let new_base = self.base(b).wrapping_add(delta);
            if next
                .peek()
                .is_some_and(|&&(at, _)| (self.head + at) / B == b)
            {
                let lo = if b == 0 { self.head } else { 0 };
                let hi = (self.head + self.len - b * B).min(B);
                values.clear();
                let (mut old_prev, mut new_prev) = (0u64, 0u64);
                for k in lo..hi {
                    let old = self.offs[b].get(k);
                    let i = b * B + k - self.head;
                    let tokens = match next.next_if(|&&(at, _)| at == i) {
                        Some(&(_, tokens)) => tokens,
                        None => old - old_prev,
                    };
                    old_prev = old;
                    new_prev += tokens;
                    values.push(new_prev);
                }
                self.offs[b] = Offsets::build(lo, &values);
                delta = delta.wrapping_add(new_prev.wrapping_sub(old_prev));
            }
            self.set_base(b, new_base);
        }
        let blocks = self.bases.len();
        if delta != 0 && last_b + 1 < blocks {
            if last_b + 1 < blocks - last_b - 1 {
                // Move the later blocks through the shift; keep the earlier ones.
                self.shift = self.shift.wrapping_add(delta);
                for b in 0..=last_b {
                    let stored = self.bases[b].wrapping_sub(delta);
                    self.store_base(b, stored);
                }
            } else {
                for b in last_b + 1..blocks {
                    let stored = self.bases[b].wrapping_add(delta);
                    self.store_base(b, stored);
                }
            }
        }
        // Bases moved apart within a group only from the first edited block's group to
        // the last's: every other group moved as a whole (its first base, kept by
        // `store_base`, with it), and the moved side meets the kept side in the last
        // edited block's group or at a group's edge.
        if let Some(upper) = self.upper.get_mut() {
            upper.refresh(first_b / B..=last_b / B, &self.bases);
        }
        self.total = self.total.wrapping_add(delta);
    }

    /// Makes block `b`'s true base `base`. **O(1)**.
    fn set_base(&mut self, b: usize, base: u64) {
        self.store_base(b, base.wrapping_sub(self.shift));
    }

    /// Stores `stored` as block `b`'s base, keeping the first base of each group
    /// exact in the upper levels (their `near` entries are the caller's to
    /// [`Upper::refresh`]). **O(1)**.
    fn store_base(&mut self, b: usize, stored: u64) {
        self.bases[b] = stored;
        if b % B == 0 {
            if let Some(upper) = self.upper.get_mut() {
                upper.set_first(b / B, stored);
            }
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
        self.bases.heap_bytes()
            + self.upper.get().map_or(0, Upper::heap_bytes)
            + self.offs.heap_bytes()
            + self.offs.iter().map(Offsets::heap_bytes).sum::<usize>()
    }

    pub(crate) fn check(&self) -> Result<(), String> {
        ensure_eq!(self.bases.len(), self.offs.len(), "one base per block");
        if let Some(upper) = self.upper.get() {
            let want = Upper::of(&self.bases);
            ensure_eq!(
                upper.every,
                want.every,
                "the upper level samples every 64th base"
            );
            ensure_eq!(
                upper.top,
                want.top,
                "the top level samples every 4,096th base"
            );
            for (j, (&got, &fits)) in upper.scale.iter().zip(&want.scale).enumerate() {
                ensure!(
                    got >= fits,
                    "group {j}'s scale {got} fits its span ({fits})"
                );
            }
            for (b, &stored) in self.bases.iter().enumerate() {
                let rel = stored.wrapping_sub(upper.every[b / B]);
                let want = rel >> upper.scale[b / B];
                ensure_eq!(u64::from(upper.near[b]), want, "block {b}'s near entry");
            }
        }
        ensure_eq!(
            self.bases.len(),
            (self.head + self.len).div_ceil(B),
            "exactly enough blocks for the records"
        );
        ensure!(
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
                ensure_eq!(
                    self.offs[b].get(k),
                    want,
                    "block {b} slot {k} holds no record"
                );
            }
            let first = b * B + lo - self.head;
            let want = if first == 0 { 0 } else { self.at(first - 1) };
            ensure_eq!(self.base(b), want, "block {b}'s base is the sum before it");
        }
        for i in 1..self.len {
            let (a, b) = (self.at(i - 1), self.at(i));
            ensure!(a <= b, "prefix sums never decrease: {a} then {b} at {i}");
        }
        let last = if self.len == 0 {
            0
        } else {
            self.at(self.len - 1)
        };
        ensure_eq!(self.total, last, "total is the last sum");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::scale_for;

    /// `scale_for` is the smallest shift the loop it replaced finds, at every bit
    /// length and around each power of two and its all-ones neighbours.
    #[test]
    fn scale_for_is_the_smallest_shift_that_fits() {
        let by_loop = |span: u64| {
            let mut s = 0;
            while (span >> s) >= u64::from(u16::MAX) {
                s += 1;
            }
            s
        };
        let mut spans = vec![0, 1, u64::MAX, u64::MAX - 1];
        for bits in 0..64 {
            let p = 1u64 << bits;
            spans.extend([p - 1, p, p + 1, p.wrapping_mul(3)]);
            // A run of 16 ones at the top of the value: the case that needs one more.
            spans.push((u64::from(u16::MAX) << bits) >> bits << bits);
            spans.push(u64::from(u16::MAX).checked_shl(bits).unwrap_or(0) | 1);
        }
        for span in spans {
            assert_eq!(u32::from(scale_for(span)), by_loop(span), "span {span:#x}");
        }
    }
}
