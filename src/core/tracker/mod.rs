//! The incremental legal-cut tracker: the type, its constructors, getters and queries.
//! Every change of state is in [`input`](self::input) (appends, events, in-place
//! region replacement); admission (caps, strict mode) is one pure check in
//! [`admit`](self::admit).

mod admit;
mod input;

use crate::core::calls::CallBook;
use crate::core::config::{Limits, Mode};
use crate::core::error::{AppendError, Defer, RegionEnd, ReplaceError};
use crate::core::index::{LegalCuts, PrefixSums};
use crate::core::outcome::{Anomaly, Appended};
use crate::record::{CallId, Record};

/// An event-driven index of the legal compaction cuts of a conversation log.
///
/// # Call protocol
///
/// - **Input**: [`append`](Tracker::append) one record at a time, in log order, as the
///   turn streams in. **O(1)** amortized (plus hashing the call id of a tool record).
///   A refused record (an [`AppendError`]) leaves the tracker exactly as it was. A
///   record may also stream in ([`open`](Tracker::open), [`grow`](Tracker::grow),
///   [`close`](Tracker::close), or [`handle`](Tracker::handle) of an
///   [`Event`](crate::Event)), and a call the provider dropped may be withdrawn
///   ([`withdraw_call`](Tracker::withdraw_call)): it waits for no result.
/// - **Queries**, at any moment between appends: [`select_legal_cut`](Tracker::select_legal_cut)
///   (the seed's selector, **O(log n)**), [`is_legal_cut`](Tracker::is_legal_cut),
///   [`legal_cut_at_or_before`](Tracker::legal_cut_at_or_before),
///   [`legal_cut_at_or_after`](Tracker::legal_cut_at_or_after), [`pending_calls`](Tracker::pending_calls).
/// - **Compaction**: [`replace_region`](Tracker::replace_region) replaces records
///   `start..end` (both legal cuts) by one summary record in place, at a cost
///   proportional to the region; a [`RecordKind::Summary`](crate::RecordKind::Summary) record counts its covered
///   calls as called and answered. (The compaction layer drives both, keeping the
///   payloads beside the records.)
/// - **Getters**: [`len`](Tracker::len), [`total_tokens`](Tracker::total_tokens),
///   [`tokens_before`](Tracker::tokens_before), [`anomalies`](Tracker::anomalies).
///
/// The tracker never reads a file, a clock or the network; it keeps no payloads, only
/// token sums, cut positions and call ids.
///
/// # Legality
///
/// Positions are cuts between records: cut `c` (`0 <= c <= len`) keeps records `c..`
/// and compacts `..c`. Cut `c` is **legal** when
///
/// - (a) every `tool_use` before `c` has a `tool_result` before `c` (the seed's
///   `pending_calls_at` is empty), and
/// - (b) no `tool_result` before `c` answers a `tool_use` at or after `c` (the seed's
///   `orphan_results_at` is empty).
///
/// - (c) record `c` (if any) is not [bound to the previous
///   record](Record::bound_to_previous): cuts fall only between messages.
///
/// For one call id with its `tool_use` at `u` and its *first* `tool_result` at `r`, the
/// cuts this forbids are exactly those strictly after `min(u, r)` and at or before
/// `max(u, r)`; with no result yet, every cut after `u`. Later results with the same id
/// (duplicates) and results whose call never comes (orphans) forbid nothing, exactly as
/// in the seed.
///
/// # Invariants
///
/// Checked by [`check_invariants`](Tracker::check_invariants) (hidden; `assert_invariants`
/// panics on the first broken one), which the tests and fuzzers call after every step
/// and snapshot restore calls on what it read:
///
/// 1. `sums` has one inclusive prefix sum per record, never decreasing; the last is
///    `total_tokens`.
/// 2. `cuts` is strictly increasing, starts with 0, and holds exactly the legal cuts
///    `<= len` under the rules above, given the records appended so far. A
///    [withdrawn](Tracker::withdraw_call) call's record counts as an assistant record
///    for the cuts decided after its withdrawal; the cuts decided before stay (so
///    `cuts` may lack some of the cuts between it and the end, never holds an illegal
///    one, and is exact when every record after it is bound to the previous one).
/// 3. `len` is a legal cut if and only if no call is pending and the last record is not
///    open (still streaming, see [`open`](Tracker::open)).
/// 4. A call id is in at most one of: pending (use seen, no result), early (result seen,
///    no use), completed (both seen, covered by a summary, or withdrawn). Every pending call and
///    early result lies inside the log; an early result's duplicates follow it, in
///    order (a compaction that drops the first promotes the next).
///
/// Why positions are decided on arrival: when record `c - 1` is appended, cut `c` is
/// legal iff no call is pending then (rule (a)); rules (b) and (c) can only be broken
/// *later*: by a `tool_use` whose result already came at `r`, which forbids exactly
/// the cuts in `(r, c]`, or by a bound record at `c`, which forbids cut `c`. Either way
/// the cuts forbidden are the top of the list: they are popped, each at most once.
///
/// # Hashing
///
/// Call ids come from model output and may be hostile. Each id is hashed once, to a
/// 128-bit fingerprint under two random per-tracker seeds (foldhash's quality hash);
/// the tables are keyed by it. Without the seeds an attacker cannot aim collisions at
/// the tables, and two distinct ids share a fingerprint with probability about 2^-128.
/// Cost: about one pass over the id's bytes per seed.
#[derive(Clone)]
pub struct Tracker {
    // Private to `core`: only `input.rs` changes them (and snapshot restore builds
    // them, through `core::state`); `invariants.rs` checks every one.
    pub(in crate::core) sums: PrefixSums,
    pub(in crate::core) cuts: LegalCuts,
    pub(in crate::core) calls: CallBook,
    pub(in crate::core) anomalies: Anomalies,
    /// Whether the last record is open (still streaming; see [`Tracker::open`]): then
    /// cut `len` is not legal whatever is pending, and no record may be appended.
    pub(in crate::core) last_open: bool,
    pub(in crate::core) limits: Limits,
    pub(in crate::core) mode: Mode,
}

/// Counts of the [`Anomaly`]s seen so far.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Anomalies {
    /// Results that arrived before any `tool_use` with their id (some may have been
    /// answered since; see `uses_after_result`).
    pub orphan_results: u64,
    /// Results for an id that already had one.
    pub duplicate_results: u64,
    /// Calls whose result came before them.
    pub uses_after_result: u64,
}

/// A call whose `tool_use` was appended and whose `tool_result` was not.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PendingCall<'a> {
    /// The call's id.
    pub id: &'a CallId,
    /// Position of its `tool_use`.
    pub at: usize,
}

impl AsRef<Tracker> for Tracker {
    fn as_ref(&self) -> &Tracker {
        self
    }
}

impl Default for Tracker {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker")
            .field("len", &self.len())
            .field("total_tokens", &self.total_tokens())
            .field("legal_cuts", &self.cuts.len())
            .field("pending", &self.calls.pending_len())
            .field("anomalies", &self.anomalies)
            .field("last_open", &self.last_open)
            .finish()
    }
}

impl Tracker {
    /// An empty tracker: no records, cut 0 legal. **O(1)**, no allocation.
    pub fn new() -> Self {
        Tracker {
            sums: PrefixSums::default(),
            cuts: LegalCuts::default(),
            calls: CallBook::new(),
            anomalies: Anomalies::default(),
            last_open: false,
            limits: Limits::default(),
            mode: Mode::default(),
        }
    }

    /// An empty tracker with the given caps (and lenient [`Mode`]). **O(1)**.
    pub fn with_limits(limits: Limits) -> Self {
        Tracker {
            limits,
            ..Tracker::new()
        }
    }

    /// This tracker in `mode`, for chaining after a constructor. **O(1)**.
    ///
    /// ```
    /// use cutpoint::{AppendError, Mode, Record, Tracker, StrictViolation};
    /// let mut t = Tracker::new().in_mode(Mode::Strict);
    /// let refused = t.append(Record::tool_result("ghost", 5)).unwrap_err();
    /// assert!(matches!(refused, AppendError::Violation(StrictViolation::OrphanResult { at: 0, .. })));
    /// assert!(t.is_empty());
    /// ```
    #[must_use]
    pub fn in_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// A tracker holding `records`, appended in order. **O(n)**.
    ///
    /// # Errors
    /// The first [`AppendError`]; the records before it are not kept.
    pub fn from_records<I: IntoIterator<Item = Record>>(records: I) -> Result<Self, AppendError> {
        let mut tracker = Tracker::new();
        for record in records {
            tracker.append(record)?;
        }
        Ok(tracker)
    }

    /// The caps in force. **O(1)**.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The mode in force. **O(1)**.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Number of records. **O(1)**.
    pub fn len(&self) -> usize {
        self.sums.len()
    }

    /// Whether no record has been appended. **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Position of the open record, if the last record is open (see
    /// [`open`](Tracker::open)). **O(1)**.
    pub fn open_record(&self) -> Option<usize> {
        self.last_open.then(|| self.len() - 1)
    }

    /// Tokens of all records. **O(1)**.
    pub fn total_tokens(&self) -> u64 {
        self.sums.total()
    }

    /// Tokens of records `0..cut`, the part a cut at `cut` compacts. **O(1)**.
    /// `None` when `cut > len`.
    pub fn tokens_before(&self, cut: usize) -> Option<u64> {
        (cut <= self.len()).then(|| self.sums.before(cut))
    }

    /// Tokens of record `index`. **O(1)**. `None` when `index >= len`.
    pub fn record_tokens(&self, index: usize) -> Option<u64> {
        (index < self.len()).then(|| self.sums.record(index))
    }

    /// The first record whose inclusive prefix sum reaches `target_tokens` (the
    /// specification's *target index*), so cut `i + 1` is the first cut that compacts
    /// at least `target_tokens`. `None` when no record does (the log holds fewer
    /// tokens, or none). **O(log n)**, as [`select_legal_cut`](Tracker::select_legal_cut)'s
    /// first step.
    pub fn first_record_reaching(&self, target_tokens: u64) -> Option<usize> {
        (target_tokens <= self.total_tokens() && !self.is_empty())
            .then(|| self.sums.first_reaching(target_tokens))
    }

    /// Whether cutting at `cut` (keeping records `cut..`) splits no pair and leaves no
    /// call of the kept part unanswered by the compacted part. `false` when `cut > len`.
    /// **O(1)**: one bit.
    pub fn is_legal_cut(&self, cut: usize) -> bool {
        self.cuts.contains(cut)
    }

    /// The largest legal cut at or before `pos` (0 always is one). **O(1)** at or past
    /// the largest legal cut, else **O(1 + gap / 64)** for a stretch of `gap` positions
    /// without one (one word of the bitmap when cuts are dense).
    pub fn legal_cut_at_or_before(&self, pos: usize) -> usize {
        self.cuts.at_or_before(pos)
    }

    /// The smallest legal cut at or after `pos`, if one exists yet. **O(1 + gap / 64)**
    /// as [`legal_cut_at_or_before`](Tracker::legal_cut_at_or_before).
    pub fn legal_cut_at_or_after(&self, pos: usize) -> Option<usize> {
        self.cuts.at_or_after(pos)
    }

    /// Number of legal cuts, `0` and `len` included when legal. **O(1)**.
    pub fn legal_cut_count(&self) -> usize {
        self.cuts.len()
    }

    /// The legal cuts in increasing order. **O(1)** to create, **O(1)** per item.
    pub fn legal_cuts(&self) -> impl DoubleEndedIterator<Item = usize> + ExactSizeIterator + '_ {
        self.cuts.iter()
    }

    /// The calls still waiting for their result, in log order. **O(k log k)** for `k`
    /// pending calls.
    pub fn pending_calls(&self) -> Vec<PendingCall<'_>> {
        let mut pending: Vec<PendingCall<'_>> = self
            .calls
            .pending()
            .map(|p| PendingCall {
                id: &p.id,
                at: p.at as usize,
            })
            .collect();
        pending.sort_unstable_by_key(|p| p.at);
        pending
    }

    /// The ids of the calls still waiting for their result whose `tool_use` lies
    /// before `cut`, in log order: what a compaction ending at `cut` waits for.
    /// **O(k log k)** for `k` pending calls.
    pub fn pending_before(&self, cut: usize) -> Vec<CallId> {
        self.pending_calls()
            .into_iter()
            .filter(|p| p.at < cut)
            .map(|p| p.id.clone())
            .collect()
    }

    /// Number of calls waiting for their result. **O(1)**.
    pub fn pending_count(&self) -> usize {
        self.calls.pending_len()
    }

    /// Counts of the anomalies accepted so far. **O(1)**.
    pub fn anomalies(&self) -> Anomalies {
        self.anomalies
    }

    /// Number of calls answered so far (in either order), covered by a summary, or
    /// [withdrawn](Tracker::withdraw_call). **O(1)**.
    pub fn completed_calls(&self) -> usize {
        self.calls.completed_len()
    }

    /// Heap bytes the tracker holds, tables included (an estimate for the hash tables,
    /// exact for the vectors). **O(k)** for the `k` ids kept as strings.
    pub fn heap_bytes(&self) -> usize {
        self.sums.heap_bytes() + self.cuts.heap_bytes() + self.calls.heap_bytes()
    }

    /// Whether `start..end` may be replaced: `start <= end <= len`, both legal cuts.
    /// An empty region (`start == end`) passes. **O(1)**.
    ///
    /// # Errors
    /// [`ReplaceError::OutOfRange`], [`ReplaceError::EmptyRegion`] (for `start > end`),
    /// [`ReplaceError::NotALegalCut`].
    pub fn check_region(&self, start: usize, end: usize) -> Result<(), ReplaceError> {
        let len = self.len();
        if end > len {
            return Err(ReplaceError::OutOfRange { end, len });
        }
        if start > end {
            return Err(ReplaceError::EmptyRegion { start, end });
        }
        for (at, which) in [(start, RegionEnd::Start), (end, RegionEnd::End)] {
            if !self.is_legal_cut(at) {
                return Err(ReplaceError::NotALegalCut { at, which });
            }
        }
        Ok(())
    }

    /// Finds where to cut so that about `target_tokens` are compacted: the seed's
    /// `select_legal_cut`, without its rescans. **O(log n)**: one search of the block
    /// bases and one block for the target record, and one word of the legal-cut
    /// bitmap (a scan back through a stretch without legal cuts, **O(gap / 64)**):
    /// about two dependent DRAM loads at 10^7 records (see `src/core/index/mod.rs`).
    /// The first query after a compaction also rebuilds the bases' upper level,
    /// **O(n / 4096)**. When it defers: a gallop back from the target for the floor,
    /// **O(log d)** for a floor `d` blocks back, and **O(k log k)** over the `k`
    /// pending calls.
    ///
    /// The procedure, exactly as the seed's:
    /// 1. the *target index* is the first record whose inclusive prefix sum reaches
    ///    `target_tokens`;
    /// 2. the *floor* walks back from that record while the running sum (starting with
    ///    the target record's own tokens) stays `<= lookback_tokens`; if the target
    ///    record alone exceeds the lookback, the floor is the target index itself;
    /// 3. the answer is the largest legal cut in `floor..=target_index`.
    ///
    /// **One deliberate difference from the seed:** when `target_tokens >= total_tokens`
    /// the seed returns `len` even while calls are pending, which would compact calls
    /// whose results are still to come (the seed's own first failure signature). This
    /// returns `len` only when `len` is a legal cut; otherwise it walks back from the
    /// last record as if that were the target record, and searches `floor..len`.
    ///
    /// ```
    /// use cutpoint::{Record, Tracker};
    /// let mut t = Tracker::new();
    /// t.append(Record::user(100)).unwrap();
    /// t.append(Record::tool_use("a", 10)).unwrap();
    /// t.append(Record::tool_result("a", 500)).unwrap();
    /// t.append(Record::user(50)).unwrap();
    /// // 300 tokens are reached inside the pair; the nearest legal cut walking back is 1.
    /// assert_eq!(t.select_legal_cut(300, 1000), Ok(1));
    /// // A lookback too short to reach cut 1 defers.
    /// assert!(t.select_legal_cut(300, 100).is_err());
    /// ```
    ///
    /// # Errors
    /// [`Defer`] when no legal cut lies in the window; it says what blocks.
    pub fn select_legal_cut(
        &self,
        target_tokens: u64,
        lookback_tokens: u64,
    ) -> Result<usize, Defer> {
        let len = self.len();
        let (target_index, wanted) = if target_tokens >= self.total_tokens() {
            if self.cuts.last() == len {
                return Ok(len);
            }
            // `len` is not legal, so len > 0 (cut 0 is always legal).
            (len - 1, len)
        } else {
            // The bitmap word near the target's block is requested while the block
            // itself loads (see `first_reaching_then`).
            let t = self
                .sums
                .first_reaching_then(target_tokens, |first| self.cuts.warm(first));
            (t, t)
        };
        let best = self.cuts.at_or_before(target_index);
        // The floor itself is found only to explain a deferral: whether `best` clears
        // it reads the sums on the lines just loaded, not a second block further back.
        if self
            .sums
            .within_lookback(target_index, lookback_tokens, best)
        {
            return Ok(best);
        }
        let floor = self.sums.floor(target_index, lookback_tokens);
        debug_assert!(best < floor);
        Err(Defer {
            target_tokens,
            lookback_tokens,
            target_index,
            floor,
            nearest_legal_below: Some(best).filter(|_| floor > 0),
            nearest_legal_above: self.cuts.at_or_after(target_index + 1),
            waiting_on: self.pending_before(wanted),
        })
    }

    /// The smallest legal cut that compacts at least `target_tokens` and no more than
    /// `target_tokens + lookahead_tokens`: the forward search, for callers that must
    /// get under a budget (the compaction layer's forward direction, the trigger
    /// policy). When the target covers the whole log the cut wanted is `len`.
    /// **O(log n)**, plus a scan of a stretch without legal cuts (**O(gap / 64)**), plus
    /// **O(k log k)** over the `k` pending calls when it defers.
    ///
    /// ```
    /// use cutpoint::{Record, Tracker};
    /// let t = Tracker::from_records([
    ///     Record::user(100),
    ///     Record::tool_use("a", 10),
    ///     Record::tool_result("a", 500),
    ///     Record::user(50),
    /// ])?;
    /// // 300 tokens are reached inside the pair: the nearest legal cut past it is 3.
    /// assert_eq!(t.select_legal_cut_forward(300, 1_000), Ok(3));
    /// // ... which compacts 610 tokens, more than 300 + 100.
    /// assert!(t.select_legal_cut_forward(300, 100).is_err());
    /// // With a call in flight at the end, nothing past the whole log is legal yet,
    /// // however far the search may go.
    /// let mut t = t;
    /// t.append(Record::tool_use("b", 10))?;
    /// let defer = t.select_legal_cut_forward(700, u64::MAX).unwrap_err();
    /// assert_eq!(defer.nearest_legal_below, Some(4));
    /// assert!(defer.to_string().starts_with(
    ///     "no pairing-legal cut within any number of tokens of target 700 (searched cuts 5..=5)"
    /// ));
    /// # Ok::<(), cutpoint::AppendError>(())
    /// ```
    ///
    /// # Errors
    /// [`Defer`] when no legal cut lies in the window; it says what blocks. Its
    /// `floor` and `target_index` are the cut wanted (the first past the target), its
    /// `nearest_legal_below` the nearest legal cut below that one, and its
    /// `nearest_legal_above` the first legal cut from it on, which may be the cut
    /// wanted itself when that one compacts more than the lookahead allows.
    pub fn select_legal_cut_forward(
        &self,
        target_tokens: u64,
        lookahead_tokens: u64,
    ) -> Result<usize, Defer> {
        let len = self.len();
        // As in `select_legal_cut`, a target covering the whole log wants `len`.
        let wanted = if target_tokens >= self.total_tokens() {
            len
        } else {
            self.sums.first_reaching(target_tokens) + 1
        };
        let found = self
            .cuts
            .at_or_after(wanted)
            .filter(|&c| self.sums.before(c) <= target_tokens.saturating_add(lookahead_tokens));
        // The window is the one cut wanted (`floor == target_index == wanted`): the
        // nearest legal cut below it lies strictly below (it was given as `wanted`
        // itself when that cut is legal but past the lookahead, "0 tokens short" of
        // a target it passes); the one above may be `wanted` itself.
        found.ok_or_else(|| Defer {
            target_tokens,
            lookback_tokens: lookahead_tokens,
            target_index: wanted,
            floor: wanted,
            nearest_legal_below: wanted.checked_sub(1).map(|w| self.cuts.at_or_before(w)),
            nearest_legal_above: self.cuts.at_or_after(wanted),
            waiting_on: self.pending_before(wanted),
        })
    }
}
