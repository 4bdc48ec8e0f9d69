//! The set of every call id ever used, as [`Fingerprint`]s, laid out so that the one
//! probe each `tool_use` makes stays in the caches however long the log grows.
//!
//! # Why not one hash table
//!
//! One `hashbrown` set of 16-byte fingerprints is ~20 bytes per id: ~70 MB after 3.3
//! million calls (10^7 records). Each insert is a random probe of it: a DRAM miss (two:
//! the control bytes and the slot live apart), a TLB miss, and a full rehash of the
//! table at every doubling. In a profile of a realistic append at 10^6 records that
//! probe was the largest single cost.
//!
//! # The layout
//!
//! - `recent`: the newest fingerprints, at most 7/8 of [`RECENT_BUCKETS`], in the
//!   order inserted (`recent_fps`), with a hash table of their positions (2-byte
//!   entries, keyed by the fingerprint's first word). Every insert lands here. The
//!   part a probe reads and an insert writes at random is the table, 96 KiB: the
//!   fingerprints are written in order, and read only when a tag matches.
//! - `frozen`: when `recent` is full its fingerprints are copied into a flat *run*
//!   (16 bytes each, grouped by the top bits of the second word with a counting sort:
//!   two passes, no comparisons) and `recent` starts again (from empty for the first
//!   [`KEEP_RECENT_AFTER`] runs, then in its old allocation: no rehash, no fresh page).
//! - `filter`: a split-block Bloom filter (Parquet's SBBF: 256-bit blocks of eight
//!   32-bit words, one bit set per word) over every frozen fingerprint, at about
//!   [`FILTER_BITS_PER_KEY`] bits per key, keyed by the fingerprint's *second* word
//!   (already keyed and uniformly mixed, and independent of the first word the recent
//!   table uses, so no rehash). A probe reads one 32-byte block. It grows by
//!   doubling, rebuilt from the runs in one sweep: **O(1)** amortized per key. Past
//!   32 runs a coarse level (one bit per key, up to 1 MiB) sits in front of the
//!   blocks and turns most absent ids away before a block is read.
//!
//! An insert probes `recent` (its vacant slot is kept, through `hashbrown`'s entry
//! API; a refusal changes nothing), then the filter; only on a filter positive does it look in the runs, newest
//! first, exactly (one start and one group of about 28 fingerprints each). So a fresh
//! id costs one L2 probe, one coarse bit (L3) and, for about one id in three at 10^7
//! records, one filter block, plus, with probability about the filter's
//! false-positive rate times the number of runs, some DRAM misses.
//!
//! # Semantics
//!
//! Exactly those of a set: an insert is refused only when that exact 128-bit
//! fingerprint was inserted before (both words compared); the filter only decides
//! whether to look, never the answer. Adversarial fingerprints (many sharing a word)
//! cost time, never correctness.
//!
//! # Costs, measured (2-core shared VM, where a random read beyond ~1 MB costs
//! 140-260 ns: the L3 does not help, and every page is a TLB miss)
//!
//! - Realistic appends (`cargo bench --bench append -- 'append/realistic/...'`,
//!   alternating binaries in one run): 10^7 records 4.0 -> 5.1-5.9 M records/s
//!   (1.25-1.45x), 10^6 about 1.05-1.3x, 10^5 unchanged within noise. The append
//!   loop does enough other work per record that hashbrown's misses (control bytes and
//!   slot on different pages, plus rehashing at each doubling) are not overlapped;
//!   here one filter block (2 bytes per key) stands in for them.
//! - The bare insert loop (`benches/used.rs`) shows the other side: with nothing else
//!   to do, the CPU overlaps hashbrown's misses: per insert, hashbrown 72 / 135 / 139
//!   ns and `UsedIds` 67 / 142 / 240 ns at 10^5 / 10^6 / 3*10^6 (one run), the gap
//!   mostly the filter's own upkeep (each freeze streams over the filter; each
//!   doubling re-adds every key).
//! - Written in block order: the runs are grouped by the bits that choose the block
//!   (and the coarse bit), so a freeze writes the filter front to back (3*10^6
//!   inserts in `benches/used.rs`, before runs: 1.47 s in table order, one TLB miss
//!   per key, 0.95 s sorted; the comparison sort itself then cost 9% of a realistic
//!   append at 10^7, and the counting sort replaced it). The membership probe has no
//!   branch per word (a mispredicted branch on a block still in flight stalls the
//!   pipeline).
//! - Runs and the coarse level (issue 20, docs/performance.md): at 10^7 realistic
//!   records, 663 -> 569 instructions per append (callgrind, deterministic) and
//!   about 1.1-1.3x the on-CPU rate in alternated runs on a loaded machine.
//! - [`RECENT_BUCKETS`] at 2^15 against 2^14: no clear difference in either bench.
//! - A freeze reads each chunk of 64 blocks before it sets their bits (2026-12-05):
//!   adding one run to a filter of 7-15 MB touches one line in 4-8, each a miss; a
//!   loop of loads alone keeps more of them in flight than the update loop (30 ->
//!   24 ns a key in a loop that does only that; 1.035x wall, 1.06x on-CPU for the
//!   realistic append at 10^7, medians of 24 alternated pairs).
//! - Positions instead of fingerprints in the recent table (2026-12-05): the table
//!   held 16-byte fingerprints, 544 KiB written at random, competing in the 1 MiB L2
//!   with the coarse level; positions take 96 KiB and the fingerprints are written in
//!   order. Same instruction count; 1.03x the realistic append at 10^7 (median of 30
//!   alternated pairs on a loaded machine, docs/performance.md).
//! - Memory: about 19 heap bytes per key at 3.3*10^6 keys (runs at 16.1, the filter
//!   at 2-4, the coarse level, one recent table), where frozen hash tables took
//!   21.9-23.2 and one hashbrown set 22.3-35.7 (after a doubling its table is under
//!   half full); no doubling spike: growth is one run at a time.

use crate::core::ensure::{ensure, ensure_eq};
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;

use super::fingerprint::Fingerprint;

/// Buckets of the `recent` table: 2^15 buckets of 3 bytes (a 2-byte position, one
/// control byte) are 96 KiB, and the 28,672 fingerprints they index 448 KiB. Holds
/// 7/8 of that many fingerprints before it is frozen. At most 2^16 (positions are
/// 2 bytes).
pub(crate) const RECENT_BUCKETS: usize = 1 << 15;

/// Frozen runs after which a freeze empties `recent` and keeps its allocation (no
/// rehash while it refills, no fresh pages); before, the next table grows from
/// empty. From 8 runs on the idle table is at most an eighth of the set's memory.
const KEEP_RECENT_AFTER: usize = 8;

/// Bits of filter per frozen fingerprint when the filter is at its fullest (after a
/// doubling, twice as many). At 16 an SBBF's false-positive rate is about 0.1%.
const FILTER_BITS_PER_KEY: usize = 16;

/// Every fingerprint inserted, in a small table of recent ones, frozen full tables of
/// older ones, and a filter over the frozen ones. See the module docs.
///
/// Invariants (checked by `UsedIds::assert_invariants`):
/// - no fingerprint is in two tables, nor twice in one;
/// - `recent.len() < recent_max`, and every frozen table holds exactly `recent_max`;
/// - `recent` holds each position of `recent_fps` exactly once, findable by that
///   fingerprint's first word;
/// - `frozen_len` is the sum of the frozen tables' lengths;
/// - the filter answers "maybe" for every frozen fingerprint, and is sized for at
///   least `frozen_len` keys.
#[derive(Clone)]
pub struct UsedIds {
    /// Positions in `recent_fps`, hashed by their fingerprint's first word.
    recent: HashTable<u16>,
    /// The recent fingerprints, in the order inserted: what a freeze copies.
    recent_fps: Vec<Fingerprint>,
    /// Fingerprints `recent` holds when it is frozen: 7/8 of its buckets.
    recent_max: usize,
    frozen: Vec<Run>,
    frozen_len: usize,
    filter: BlockFilter,
}

/// A frozen `recent` table, as a flat array of its fingerprints grouped by the top
/// `bits` bits of their second word (a counting sort: two passes, no
/// comparisons), with where each group starts. The groups come in the filter's block
/// order, so adding a run to the filter writes it front to back; a lookup reads one
/// start and scans one group (about 28 fingerprints, 7 cache lines in a row, for a
/// run of 28,672). 16 bytes per fingerprint plus 4 per group: no control bytes and
/// no empty buckets, against a hash table's 19.4 at 7/8 load.
///
/// Invariants (checked by `UsedIds::check`): `starts` has `2^bits + 1` entries,
/// starts at 0, never decreases and ends at `fps.len()`; every fingerprint lies in
/// its group.
#[derive(Clone)]
struct Run {
    fps: Box<[Fingerprint]>,
    starts: Box<[u32]>,
    bits: u32,
}

impl Run {
    /// Group bits for a run of `len` fingerprints: about 16 per group, at least one
    /// group. **O(1)**.
    fn bits_for(len: usize) -> u32 {
        len.max(1).ilog2().saturating_sub(4)
    }

    /// The group of a fingerprint: the top `bits` bits of its second word. **O(1)**.
    #[inline]
    fn group(bits: u32, fp: &Fingerprint) -> usize {
        fp.1.checked_shr(64 - bits).unwrap_or(0) as usize
    }

    /// The run of `recent`'s fingerprints, grouped by a counting sort. **O(R)** for `R` fingerprints,
    /// plus **O(2^bits)**.
    fn from_fps(recent: &[Fingerprint]) -> Run {
        let bits = Run::bits_for(recent.len());
        let groups = 1usize << bits;
        let mut starts = vec![0u32; groups + 1];
        for fp in recent {
            starts[Run::group(bits, fp) + 1] += 1;
        }
        for g in 0..groups {
            starts[g + 1] += starts[g];
        }
        let mut next: Vec<u32> = starts[..groups].to_vec();
        let mut grouped = vec![Fingerprint(0, 0); recent.len()];
        for fp in recent {
            let slot = &mut next[Run::group(bits, fp)];
            grouped[*slot as usize] = *fp;
            *slot += 1;
        }
        Run {
            fps: grouped.into_boxed_slice(),
            starts: starts.into_boxed_slice(),
            bits,
        }
    }

    /// Whether `fp` is in the run. **O(1)** expected (one group), **O(R)** when the
    /// second words are chosen to share their top bits.
    #[inline]
    fn contains(&self, fp: &Fingerprint) -> bool {
        let g = Run::group(self.bits, fp);
        let (lo, hi) = (self.starts[g] as usize, self.starts[g + 1] as usize);
        self.fps[lo..hi].contains(fp)
    }

    fn heap_bytes(&self) -> usize {
        self.fps.len() * std::mem::size_of::<Fingerprint>()
            + self.starts.len() * std::mem::size_of::<u32>()
    }
}

impl Default for UsedIds {
    fn default() -> Self {
        Self::new()
    }
}

impl UsedIds {
    /// An empty set with a `recent` table of [`RECENT_BUCKETS`] buckets. Allocates
    /// nothing until the first insert. **O(1)**.
    pub fn new() -> Self {
        Self::with_recent_buckets(RECENT_BUCKETS)
    }

    /// An empty set whose `recent` table freezes at 7/8 of `buckets` (a power of two,
    /// at least 8; other values are rounded up to one). Tests use tiny tables to force
    /// many freezes. **O(1)**.
    #[doc(hidden)]
    pub fn with_recent_buckets(buckets: usize) -> Self {
        let buckets = buckets.clamp(8, 1 << 16).next_power_of_two();
        UsedIds {
            recent: HashTable::new(),
            recent_fps: Vec::new(),
            recent_max: buckets / 8 * 7,
            frozen: Vec::new(),
            frozen_len: 0,
            filter: BlockFilter::default(),
        }
    }

    /// Fingerprints in the set. **O(1)**.
    pub fn len(&self) -> usize {
        self.recent.len() + self.frozen_len
    }

    /// Whether the set is empty. **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `fp`; `false` (and nothing changes) if it was already in. **O(1)**
    /// amortized: one probe of `recent`, one filter block, and the frozen tables only
    /// on a filter positive (all of them, **O(n / R)**, when `fp` is a true duplicate
    /// of an old id).
    pub(crate) fn insert(&mut self, fp: Fingerprint) -> bool {
        let log = &self.recent_fps;
        let eq = |&p: &u16| log[usize::from(p)] == fp;
        let hash = |&p: &u16| log[usize::from(p)].0;
        // `recent_fps.len() < recent_max <= 2^16`.
        let at = log.len() as u16;
        if self.recent.len() < self.recent.capacity() {
            // Room left: `entry` will not grow the table, so a refusal changes nothing,
            // and the slot it found is the one filled.
            match self.recent.entry(fp.0, eq, hash) {
                Entry::Occupied(_) => return false,
                Entry::Vacant(slot) => {
                    if in_frozen(&self.filter, &self.frozen, &fp) {
                        return false;
                    }
                    slot.insert(at);
                }
            }
        } else {
            // `recent` is still growing towards `recent_max` (only before the first
            // freeze): look first, so a refusal cannot have grown it.
            if self.recent.find(fp.0, eq).is_some() || in_frozen(&self.filter, &self.frozen, &fp) {
                return false;
            }
            self.recent.insert_unique(fp.0, at, hash);
        }
        self.recent_fps.push(fp);
        if self.recent_fps.len() >= self.recent_max {
            self.freeze();
        }
        true
    }

    /// [`UsedIds::insert`] for a fingerprint given as its two words, for
    /// `benches/used.rs`. **O(1)** amortized.
    #[doc(hidden)]
    pub fn insert_words(&mut self, [a, b]: [u64; 2]) -> bool {
        self.insert(Fingerprint(a, b))
    }

    /// Whether `fp` is in the set. **O(1)** expected for a fingerprint not in it;
    /// **O(n / R)** for one in a frozen table (every frozen table may be probed).
    pub(crate) fn contains(&self, fp: &Fingerprint) -> bool {
        let log = &self.recent_fps;
        self.recent
            .find(fp.0, |&p| log[usize::from(p)] == *fp)
            .is_some()
            || in_frozen(&self.filter, &self.frozen, fp)
    }

    /// Every fingerprint, in no particular order. **O(n)** for all of them.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Fingerprint> + '_ {
        self.recent_fps
            .iter()
            .chain(self.frozen.iter().flat_map(|r| r.fps.iter()))
            .copied()
    }

    /// Heap bytes held: the recent table (buckets of 3 bytes plus a trailing group of
    /// control bytes) and fingerprints (16 bytes each), the frozen runs (16 bytes per fingerprint and 4 per group),
    /// the list of runs, and the filter. **O(1)**: every run has the same size.
    pub fn heap_bytes(&self) -> usize {
        table_bytes(self.recent.capacity())
            + self.recent_fps.capacity() * std::mem::size_of::<Fingerprint>()
            + self.frozen.first().map_or(0, Run::heap_bytes) * self.frozen.len()
            + self.frozen.capacity() * std::mem::size_of::<Run>()
            + self.filter.heap_bytes()
    }

    /// Copies the full `recent` table into a frozen [`Run`], adds its fingerprints to
    /// the filter (rebuilding a filter twice as large when it would pass its size),
    /// and empties `recent`, keeping its allocation once [`KEEP_RECENT_AFTER`] runs
    /// are frozen: from then on no insert grows a table or touches a fresh page for
    /// it. **O(R)**, plus **O(n)** at a
    /// doubling: **O(1)** amortized per fingerprint.
    fn freeze(&mut self) {
        let run = Run::from_fps(&self.recent_fps);
        let after = self.frozen_len + run.fps.len();
        if after > self.filter.keys {
            let mut keys = self.filter.keys.max(2 * self.recent_max);
            while keys < after {
                keys *= 2;
            }
            let mut filter = BlockFilter::with_coarse(keys, coarse_bits(keys, self.recent_max));
            filter.insert_runs(&self.frozen);
            self.filter = filter;
        }
        self.filter.insert_run(&run);
        self.frozen_len = after;
        self.frozen.push(run);
        if self.frozen.len() < KEEP_RECENT_AFTER {
            // Grow the next table from empty, as the first one did: a log that passes
            // a freeze by a little does not hold a whole empty table (at 10^5 records
            // that was 3 bytes per record). Growing rehashes: O(1) amortized.
            self.recent = HashTable::new();
            self.recent_fps = Vec::new();
        } else {
            self.recent.clear();
            if self.frozen.len() == KEEP_RECENT_AFTER {
                // Kept from now on: exactly one run's worth, not the doubling's slack.
                self.recent_fps = Vec::with_capacity(self.recent_max);
            } else {
                self.recent_fps.clear();
            }
        }
    }

    /// Checks the invariants in the type doc. Panics with a description if one fails.
    /// **O(n)**.
    pub(crate) fn check(&self) -> Result<(), String> {
        ensure!(self.recent.len() < self.recent_max, "recent is not full");
        ensure_eq!(
            self.recent.len(),
            self.recent_fps.len(),
            "one position per recent fingerprint"
        );
        let mut positions: Vec<u16> = self.recent.iter().copied().collect();
        positions.sort_unstable();
        ensure!(
            positions
                .iter()
                .enumerate()
                .all(|(i, &p)| usize::from(p) == i),
            "every recent position is in the table once"
        );
        for (i, fp) in self.recent_fps.iter().enumerate() {
            ensure!(
                self.recent.find(fp.0, |&p| usize::from(p) == i).is_some(),
                "recent fingerprint {i} is found by its first word"
            );
        }
        let mut seen = std::collections::HashSet::new();
        for fp in self.iter() {
            ensure!(seen.insert(fp), "{fp:?} is in one table once");
        }
        ensure_eq!(seen.len(), self.len(), "len counts every table");
        ensure_eq!(
            self.frozen_len,
            self.frozen.iter().map(|t| t.fps.len()).sum::<usize>(),
            "frozen_len is the frozen tables' total"
        );
        for r in &self.frozen {
            ensure_eq!(r.fps.len(), self.recent_max, "a frozen run is full");
            ensure_eq!(r.starts.len(), (1 << r.bits) + 1, "one start per group");
            ensure!(
                r.starts.first() == Some(&0)
                    && r.starts.last() == Some(&(r.fps.len() as u32))
                    && r.starts.windows(2).all(|w| w[0] <= w[1]),
                "the groups cover the run in order"
            );
            for g in 0..1 << r.bits {
                for fp in &r.fps[r.starts[g] as usize..r.starts[g + 1] as usize] {
                    ensure_eq!(Run::group(r.bits, fp), g, "{fp:?} is in its group");
                }
            }
            for fp in r.fps.iter() {
                ensure!(self.filter.may_contain_fp(fp), "the filter has {fp:?}");
            }
        }
        ensure!(self.filter.keys >= self.frozen_len, "the filter is sized");
        Ok(())
    }
}

/// Whether `fp` is in a frozen table: the filter first, then the tables newest first
/// (a repeated id is most often a recent one).
fn in_frozen(filter: &BlockFilter, frozen: &[Run], fp: &Fingerprint) -> bool {
    filter.may_contain_fp(fp) && frozen.iter().rev().any(|r| r.contains(fp))
}

/// Bytes of the `hashbrown` table of recent positions with this capacity: buckets are
/// the next power of two above `cap * 8 / 7`, each 2 bytes (padded to a group of 16)
/// plus a control byte, and a trailing group of 16 control bytes.
fn table_bytes(cap: usize) -> usize {
    if cap == 0 {
        return 0;
    }
    let buckets = (cap * 8 / 7).next_power_of_two();
    (buckets * std::mem::size_of::<u16>()).next_multiple_of(16) + buckets + 16
}

/// A split-block Bloom filter (as in Parquet): each key sets one bit in each of the
/// eight 32-bit words of one 256-bit block. The block comes from the key's high 32
/// bits, the bits from its low 32 bits through eight odd multipliers.
#[derive(Clone, Default)]
struct BlockFilter {
    blocks: Vec<[u32; 8]>,
    /// Keys the filter is sized for at [`FILTER_BITS_PER_KEY`].
    keys: usize,
    /// The coarse level in front of the blocks once they pass the caches' reach (see
    /// [`coarse_bits`]): one bit per key, chosen by the top bits of the second word,
    /// empty for a small filter. A clear bit answers "absent" without reading a
    /// block.
    coarse: Vec<u64>,
}

/// Bits of the coarse level in front of a filter for `keys` keys when each frozen
/// table holds `run` fingerprints: none while the filter is small enough to stay in
/// the caches (under 32 runs: 1.8 MB at the real size), then 8 per key up to 2^23
/// (1 MiB, read from the L3 cache where the blocks, 7 MB at 10^7 records, come from
/// DRAM: one probe in three still reads a block at 3.3 million keys). **O(1)**.
fn coarse_bits(keys: usize, run: usize) -> usize {
    if keys < 32 * run {
        0
    } else {
        (keys * 8).next_power_of_two().clamp(64, 1 << 23)
    }
}

/// Keys of a run whose blocks are read ahead of their update (see
/// `BlockFilter::insert_run`).
const TOUCH_AHEAD: usize = 64;

/// Parquet's SBBF salts: odd multipliers, one per word of a block.
const SALT: [u32; 8] = [
    0x47b6_137b,
    0x4497_4d91,
    0x8824_ad5b,
    0xa2b7_289d,
    0x7054_95c7,
    0x2df1_424b,
    0x9efc_4947,
    0x5c6b_fb31,
];

impl BlockFilter {
    /// An empty filter for `keys` keys. **O(keys)**.
    #[cfg(test)]
    fn for_keys(keys: usize) -> Self {
        Self::with_coarse(keys, 0)
    }

    /// An empty filter for `keys` keys with a coarse level of `coarse` bits (a power
    /// of two of at least 64, or 0 for none). **O(keys + coarse)**.
    fn with_coarse(keys: usize, coarse: usize) -> Self {
        let blocks = (keys * FILTER_BITS_PER_KEY).div_ceil(256).max(1);
        BlockFilter {
            blocks: vec![[0; 8]; blocks],
            keys,
            coarse: vec![0; coarse / 64],
        }
    }

    /// The coarse bit of `fp`: word and bit within it. **O(1)**. The coarse level
    /// must not be empty.
    #[inline]
    fn coarse_of(&self, fp: &Fingerprint) -> (usize, u32) {
        // The top bits of the second word: monotone in it, as the block and a run's
        // group are, so adding a run writes the coarse level front to back too. A
        // key that shares its coarse bit with a frozen one then falls in that key's
        // block, whose test (the word's low bits) is independent of the top bits.
        let bits = (self.coarse.len() * 64).trailing_zeros();
        let i = (fp.1 >> (64 - bits)) as usize;
        (i / 64, (i % 64) as u32)
    }

    /// Whether `fp` may have been added: the coarse bit (if any), then the block.
    /// **O(1)**: one load from the coarse level, and one block only when its bit is
    /// set.
    #[inline]
    fn may_contain_fp(&self, fp: &Fingerprint) -> bool {
        if !self.coarse.is_empty() {
            let (w, b) = self.coarse_of(fp);
            if self.coarse[w] >> b & 1 == 0 {
                return false;
            }
        }
        self.may_contain(fp.1)
    }

    /// The block for `key`: its high 32 bits scaled onto the blocks (no division).
    /// **O(1)**. The filter must have at least one block.
    fn block_of(&self, key: u64) -> usize {
        (((key >> 32) * self.blocks.len() as u64) >> 32) as usize
    }

    /// The bit set in each word of the block. **O(1)**.
    fn mask(key: u64) -> [u32; 8] {
        let low = key as u32;
        SALT.map(|salt| 1 << (low.wrapping_mul(salt) >> 27))
    }

    /// Adds `key`. **O(1)**. The filter must have at least one block.
    #[inline]
    fn insert(&mut self, key: u64) {
        let at = self.block_of(key);
        let mask = Self::mask(key);
        for (word, bit) in self.blocks[at].iter_mut().zip(mask) {
            *word |= bit;
        }
    }

    /// Adds the second word of every fingerprint in `run`. The run is grouped by the
    /// words' top bits and the block is monotone in them, so the blocks are written
    /// front to back, a few per page, instead of one page (a TLB miss, a cache miss)
    /// per key. **O(R)**.
    fn insert_run(&mut self, run: &Run) {
        for chunk in run.fps.chunks(TOUCH_AHEAD) {
            // Read every block of the chunk before changing any: a short loop of
            // independent loads, so their misses overlap, where the update loop's
            // longer body lets fewer be in flight.
            let mut touched = 0u32;
            for fp in chunk {
                touched ^= self.blocks[self.block_of(fp.1)][0];
            }
            std::hint::black_box(touched);
            for fp in chunk {
                self.insert(fp.1);
            }
        }
        if !self.coarse.is_empty() {
            for fp in run.fps.iter() {
                let (w, b) = self.coarse_of(fp);
                self.coarse[w] |= 1 << b;
            }
        }
    }

    /// Adds every run's fingerprints, group by group across the runs (all have the
    /// same groups): one pass front to back over the new filter, each of its lines
    /// loaded once, where run after run swept it once per run, a miss per key.
    /// **O(n + runs * 2^bits)**.
    fn insert_runs(&mut self, runs: &[Run]) {
        let Some(bits) = runs.first().map(|r| r.bits) else {
            return;
        };
        debug_assert!(runs.iter().all(|r| r.bits == bits));
        for g in 0..1usize << bits {
            for r in runs {
                for fp in &r.fps[r.starts[g] as usize..r.starts[g + 1] as usize] {
                    self.insert(fp.1);
                    if !self.coarse.is_empty() {
                        let (w, b) = self.coarse_of(fp);
                        self.coarse[w] |= 1 << b;
                    }
                }
            }
        }
    }

    /// Whether `key` may have been added (always `true` if it was). **O(1)**.
    fn may_contain(&self, key: u64) -> bool {
        if self.blocks.is_empty() {
            return false;
        }
        let block = &self.blocks[self.block_of(key)];
        let mask = Self::mask(key);
        // No branch per word: `all` would branch on each loaded word, and those
        // branches (a bit is set with probability about 1/2) are mispredicted often,
        // which stalls the pipeline until the block arrives from memory. One
        // well-predicted branch (almost always "absent") lets the probe overlap with
        // the caller's other work.
        let missing = block
            .iter()
            .zip(mask)
            .fold(0, |missing, (word, bit)| missing | (bit & !word));
        missing == 0
    }

    fn heap_bytes(&self) -> usize {
        self.blocks.capacity() * std::mem::size_of::<[u32; 8]>() + self.coarse.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn fp(a: u64, b: u64) -> Fingerprint {
        Fingerprint(a, b)
    }

    /// A splitmix64 step: random-looking words, deterministic.
    fn mix(mut x: u64) -> u64 {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }

    #[test]
    fn refuses_exactly_the_repeats_across_freezes() {
        let mut used = UsedIds::with_recent_buckets(16);
        let n = 5_000u64;
        for i in 0..n {
            assert!(used.insert(fp(mix(i), mix(i + n))), "fresh {i}");
        }
        assert!(used.frozen.len() > 100, "many freezes");
        used.check().unwrap();
        let bytes = used.heap_bytes();
        for i in 0..n {
            assert!(!used.insert(fp(mix(i), mix(i + n))), "repeat {i}");
            assert!(used.contains(&fp(mix(i), mix(i + n))));
        }
        assert_eq!(used.len(), n as usize);
        assert_eq!(used.heap_bytes(), bytes, "refusals change nothing");
        // Either word alone is not the fingerprint.
        for i in 0..n {
            assert!(!used.contains(&fp(mix(i), mix(i + n + 1))));
            assert!(!used.contains(&fp(mix(i + 1), mix(i + n))));
        }
        let all: HashSet<_> = used.iter().collect();
        assert_eq!(all.len(), n as usize);
    }

    /// Past 32 frozen runs the filter has a coarse level, which holds every frozen
    /// fingerprint and turns most absent ones away before their block is read.
    #[test]
    fn the_coarse_level_holds_every_frozen_fingerprint() {
        let mut used = UsedIds::with_recent_buckets(64);
        for i in 0..20_000 {
            assert!(used.insert(fp(mix(i), mix(i + 1_000_000))));
        }
        assert!(!used.filter.coarse.is_empty(), "{} keys", used.filter.keys);
        used.check().unwrap();
        let coarse = &used.filter.coarse;
        let bits = coarse.len() * 64;
        let set: u32 = coarse.iter().map(|w| w.count_ones()).sum();
        assert!(set as usize <= used.frozen_len && set as usize * 4 < bits);
        let passed = (0..10_000)
            .filter(|&i| {
                let (w, b) = used.filter.coarse_of(&fp(mix(i + 5_000_000), 0));
                coarse[w] >> b & 1 == 1
            })
            .count();
        // About set/bits of absent ones pass (at most a quarter here).
        assert!(passed < 3_000, "{passed} of 10,000 passed the coarse level");
        for i in 0..20_000 {
            assert!(!used.insert(fp(mix(i), mix(i + 1_000_000))), "repeat {i}");
        }
    }

    #[test]
    fn shared_words_are_told_apart() {
        // All share one second word (the filter says "maybe" to all of them), or one
        // first word (one probe chain in every table).
        let mut used = UsedIds::with_recent_buckets(8);
        for i in 0..200 {
            assert!(used.insert(fp(mix(i), 7)));
            assert!(used.insert(fp(7, mix(i))));
        }
        used.check().unwrap();
        for i in 0..200 {
            assert!(!used.insert(fp(mix(i), 7)));
            assert!(!used.insert(fp(7, mix(i))));
            assert!(!used.contains(&fp(mix(i), 8)));
            assert!(!used.contains(&fp(8, mix(i))));
        }
        assert_eq!(used.len(), 400);
    }

    #[test]
    fn the_filter_has_few_false_positives() {
        let mut filter = BlockFilter::for_keys(10_000);
        for i in 0..10_000 {
            filter.insert(mix(i));
        }
        assert!((0..10_000).all(|i| filter.may_contain(mix(i))));
        let false_positives = (10_000..110_000)
            .filter(|&i| filter.may_contain(mix(i)))
            .count();
        // About 0.1% expected at 16 bits per key; 0.5% would mean a broken mask.
        assert!(false_positives < 500, "{false_positives} of 100,000");
    }

    #[test]
    fn heap_bytes_counts_full_tables_and_the_filter() {
        let mut used = UsedIds::with_recent_buckets(1 << 10);
        assert_eq!(used.heap_bytes(), 0);
        for i in 0..10_000 {
            used.insert(fp(mix(i), mix(!i)));
        }
        // 11 frozen runs of 896 fingerprints (16 bytes each) in 2^5 groups, the recent
        // table of 1,024 buckets of 2-byte positions and its 896 fingerprints, the
        // list of runs, a filter of 2-4 bytes per key.
        assert_eq!(used.frozen.len(), 11);
        let runs = 11 * (896 * 16 + 33 * 4);
        let recent = 1024 * 3 + 16 + 896 * 16;
        let list = used.frozen.capacity() * std::mem::size_of::<Run>();
        let filter = used.filter.blocks.len() * 32;
        assert_eq!(used.heap_bytes(), runs + recent + list + filter);
        assert!(
            (11 * 896 * 2..=11 * 896 * 4 + 32).contains(&filter),
            "{filter}"
        );
    }

    /// One step of a random sequence, as indices into a pool of words (reduced modulo
    /// the pool's size, then mixed), so repeats and fingerprints sharing one word are
    /// common; `None` is the constant word 1.
    #[derive(Debug, Clone)]
    enum Op {
        Insert(Option<u64>, Option<u64>),
        Contains(Option<u64>, Option<u64>),
    }

    fn op() -> impl Strategy<Value = Op> {
        let word = || (0..1_000u64).prop_map(Some);
        prop_oneof![
            3 => (word(), word()).prop_map(|(a, b)| Op::Insert(a, b)),
            1 => (word(), word()).prop_map(|(a, b)| Op::Contains(a, b)),
            // Equal second words, equal first words.
            1 => word().prop_map(|a| Op::Insert(a, None)),
            1 => word().prop_map(|b| Op::Insert(None, b)),
            1 => word().prop_map(|a| Op::Contains(a, None)),
        ]
    }

    proptest! {
        #[test]
        fn agrees_with_a_hash_set(
            buckets in prop_oneof![Just(8usize), Just(16), Just(64)],
            pool in prop_oneof![Just(8u64), Just(64), Just(1_000)],
            ops in prop::collection::vec(op(), 0..1_500),
        ) {
            let word = |w: Option<u64>| w.map_or(1, |i| mix(i % pool));
            let mut used = UsedIds::with_recent_buckets(buckets);
            let mut oracle = HashSet::new();
            for op in ops {
                match op {
                    Op::Insert(a, b) => {
                        let f = fp(word(a), word(b));
                        let before = used.heap_bytes();
                        let fresh = used.insert(f);
                        prop_assert_eq!(fresh, oracle.insert(f));
                        if !fresh {
                            prop_assert_eq!(used.heap_bytes(), before);
                        }
                    }
                    Op::Contains(a, b) => {
                        let f = fp(word(a), word(b));
                        prop_assert_eq!(used.contains(&f), oracle.contains(&f));
                    }
                }
                prop_assert_eq!(used.len(), oracle.len());
            }
            used.check().unwrap();
            let all: HashSet<_> = used.iter().collect();
            prop_assert_eq!(all, oracle);
        }
    }
}
