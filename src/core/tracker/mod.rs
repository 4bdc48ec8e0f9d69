//! The incremental legal-cut tracker.

use crate::calls::{CallBook, ResultOutcome, SeenUse, UseOutcome};
use crate::error::{AppendError, Defer};
use crate::index::{LegalCuts, MAX_RECORDS, PrefixSums};
use crate::limits::Limits;
use crate::mode::Mode;
use crate::record::{CallId, Record, RecordKind};

/// An event-driven index of the legal compaction cuts of a conversation log.
///
/// # Call protocol
///
/// - **Input**: [`append`](Tracker::append) one record at a time, in log order, as the
///   turn streams in. **O(1)** amortized (plus hashing the call id of a tool record).
///   A refused record (an [`AppendError`]) leaves the tracker exactly as it was.
/// - **Queries**, at any moment between appends: [`select_legal_cut`](Tracker::select_legal_cut)
///   (the seed's selector, **O(log n)**), [`is_legal_cut`](Tracker::is_legal_cut),
///   [`legal_cut_at_or_before`](Tracker::legal_cut_at_or_before),
///   [`legal_cut_at_or_after`](Tracker::legal_cut_at_or_after), [`pending_calls`](Tracker::pending_calls).
/// - **Compaction**: [`replace_region`](Tracker::replace_region) replaces records
///   `start..end` (both legal cuts) by one summary record in place, at a cost
///   proportional to the region; a [`RecordKind::Summary`] record counts its covered
///   calls as called and answered. [`compact::Log`](crate::compact::Log) drives both.
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
/// Checked by `assert_invariants` (hidden), which the tests call after every step:
///
/// 1. `sums` has one inclusive prefix sum per record, never decreasing; the last is
///    `total_tokens`.
/// 2. `cuts` is strictly increasing, starts with 0, and holds exactly the legal cuts
///    `<= len` under the rules above, given the records appended so far.
/// 3. `len` is a legal cut if and only if no call is pending and the last record is not
///    open (still streaming, see [`event`](crate::event)).
/// 4. A call id is in at most one of: pending (use seen, no result), early (result seen,
///    no use), completed (both seen, or covered by a summary). Every pending call and
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
    // pub(crate) so that each feature (compaction, streaming, snapshots) can keep its
    // `impl Tracker` block in its own module; only this file's `append` and those
    // blocks mutate them, and `assert_invariants` checks every one.
    pub(crate) sums: PrefixSums,
    pub(crate) cuts: LegalCuts,
    pub(crate) calls: CallBook,
    pub(crate) anomalies: Anomalies,
    /// Whether the last record is open (still streaming; see `crate::event`): then cut
    /// `len` is not legal whatever is pending, and no record may be appended.
    pub(crate) last_open: bool,
    pub(crate) limits: Limits,
    pub(crate) mode: Mode,
}

/// What an accepted append did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Appended {
    /// The record's position.
    pub at: usize,
    /// Whether the cut right after it (`at + 1`) is legal now.
    pub cut_after_is_legal: bool,
    /// What was unusual about the record, if anything.
    pub anomaly: Option<Anomaly>,
}

/// A record the tracker accepted but that a clean log would not contain. Anomalies are
/// not errors: the selector sees through them exactly as the seed does. A validator
/// over the whole log reports them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Anomaly {
    /// A `tool_result` arrived before any `tool_use` with its id.
    OrphanResult,
    /// A `tool_result` arrived for an id that already had a result.
    DuplicateResult,
    /// A `tool_use` arrived whose result came earlier, at `first_result`; every cut
    /// between the two became illegal.
    UseAfterResult {
        /// Position of the earlier result.
        first_result: usize,
    },
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

    /// Appends one record and decides whether the cut after it is legal.
    ///
    /// **O(1)** amortized, plus one hash of the call id for tool records. Cuts that a
    /// late `tool_use` makes illegal are removed here too; each cut is removed at most
    /// once over the log's life, so that cost is **O(1)** amortized as well.
    ///
    /// # Errors
    /// [`AppendError::DuplicateCall`] for a second `tool_use` with one id,
    /// [`AppendError::EmptyCallId`], [`AppendError::TokenOverflow`],
    /// [`AppendError::Full`], [`AppendError::RecordOpen`] (the last record is still
    /// streaming; close it first), [`AppendError::LimitExceeded`] (see [`Limits`]) and,
    /// in [`Mode::Strict`], [`AppendError::Violation`]. On error the tracker is exactly
    /// as it was before the call.
    #[inline]
    pub fn append(&mut self, record: Record) -> Result<Appended, AppendError> {
        let bound = record.is_bound_to_previous();
        let (kind, tokens) = record.into_parts();
        let kind = match kind {
            plain @ (RecordKind::User | RecordKind::Assistant) => {
                if let Some(appended) = self.push_plain(tokens, bound) {
                    // These variants own nothing; forgetting skips an out-of-line call
                    // to their drop glue (7% of an id-free append in a profile; 74
                    // against 54 M records/s in one back-to-back pair of
                    // `append/no_ids/1000` runs, where runs vary by +-15%).
                    std::mem::forget(plain);
                    return Ok(appended);
                }
                plain
            }
            other => other,
        };
        let record = Record::new(kind, tokens);
        self.push_record(
            if bound {
                record.bound_to_previous()
            } else {
                record
            },
            false,
        )
    }

    /// The fast path of [`append`](Tracker::append) for a closed record without a call
    /// id (user or assistant): exactly what `push_record` does for one, without
    /// building or matching the record's kind. `None` (and nothing changed) when any
    /// check fails; `push_record` then produces the error. **O(1)** amortized.
    #[inline]
    fn push_plain(&mut self, tokens: u64, bound: bool) -> Option<Appended> {
        let at = self.len();
        // The checks `admit` and `push_record` make for such a record: the records
        // cap, no open record, room in the index, no token overflow.
        if self.last_open || at >= self.limits.max_records.min(MAX_RECORDS) {
            return None;
        }
        let new_total = self.total_tokens().checked_add(tokens)?;
        let cut_after_is_legal = self.commit(at, new_total, bound, false);
        Some(Appended {
            at,
            cut_after_is_legal,
            anomaly: None,
        })
    }

    /// [`append`](Tracker::append), leaving the record open when `open` (see
    /// `crate::event`): everything is decided now except the cut after the record, which
    /// `close` decides. That split is exact because nothing but the open record's size
    /// can change before it closes.
    pub(crate) fn push_record(
        &mut self,
        record: Record,
        open: bool,
    ) -> Result<Appended, AppendError> {
        // Caps and strict mode (src/limits.rs, src/mode.rs); reads only.
        self.admit(&record)?;
        let at = self.len();
        if self.last_open {
            return Err(AppendError::RecordOpen {
                at,
                open_at: at - 1,
            });
        }
        if at >= MAX_RECORDS {
            return Err(AppendError::Full { at });
        }
        let bound = record.is_bound_to_previous();
        let (kind, tokens) = record.into_parts();
        let total = self.total_tokens();
        let new_total = total
            .checked_add(tokens)
            .ok_or(AppendError::TokenOverflow { at, tokens, total })?;
        // `at < MAX_RECORDS == u32::MAX`, checked above.
        let at32 = at as u32;

        let anomaly = match kind {
            RecordKind::User | RecordKind::Assistant => None,
            RecordKind::Summary(ids) => {
                self.record_summary(&ids, at)?;
                None
            }
            RecordKind::ToolUse(id) => {
                if id.is_empty() {
                    return Err(AppendError::EmptyCallId {
                        at,
                        kind: "tool_use",
                    });
                }
                let fp = self.calls.fingerprint(&id);
                // The one fallible step; on `Err` the book is unchanged. Nothing after
                // it can fail: the tracker changes from here on.
                match self.calls.try_use(fp, id, at32) {
                    Err((call_id, seen)) => {
                        let first_use = match seen {
                            SeenUse::Pending(p) => Some(p as usize),
                            SeenUse::Completed => None,
                        };
                        return Err(AppendError::DuplicateCall {
                            call_id,
                            at,
                            first_use,
                        });
                    }
                    Ok(UseOutcome::Pending) => None,
                    Ok(UseOutcome::AnsweredEarlier { first_result }) => {
                        if !cfg!(cutpoint_mutant = "ignore_orphan") {
                            self.cuts.revoke_after(first_result as usize);
                        }
                        self.anomalies.uses_after_result += 1;
                        Some(Anomaly::UseAfterResult {
                            first_result: first_result as usize,
                        })
                    }
                }
            }
            RecordKind::ToolResult(id) => {
                if id.is_empty() {
                    return Err(AppendError::EmptyCallId {
                        at,
                        kind: "tool_result",
                    });
                }
                let fp = self.calls.fingerprint(&id);
                match self.calls.record_result(fp, id, at32) {
                    ResultOutcome::Answered => None,
                    ResultOutcome::Duplicate => {
                        self.anomalies.duplicate_results += 1;
                        Some(Anomaly::DuplicateResult)
                    }
                    ResultOutcome::Orphan => {
                        self.anomalies.orphan_results += 1;
                        Some(Anomaly::OrphanResult)
                    }
                }
            }
        };

        let cut_after_is_legal = self.commit(at, new_total, bound, open);
        Ok(Appended {
            at,
            cut_after_is_legal,
            anomaly,
        })
    }

    /// The index side of accepting record `at` (whose calls are already booked): rule
    /// (c) for the cut before it, its prefix sum, and the cut after it, which is legal
    /// when the record is closed and no call is pending (rule (a)). Returns whether it
    /// is. **O(1)** amortized.
    #[inline]
    fn commit(&mut self, at: usize, new_total: u64, bound: bool, open: bool) -> bool {
        if bound && at > 0 {
            // Rule (c): the cut right before this record (the newest cut) is illegal.
            self.cuts.revoke_after(at - 1);
        }
        self.sums.push(new_total);
        self.last_open = open;
        let cut_after_is_legal = !open && self.cut_at_len_is_legal();
        if cut_after_is_legal {
            self.cuts.push(at + 1);
        }
        cut_after_is_legal
    }

    /// Rule (a) for cut `len`, decided when the last record is complete.
    #[inline]
    pub(crate) fn cut_at_len_is_legal(&self) -> bool {
        self.calls.pending_is_empty() || cfg!(cutpoint_mutant = "ignore_pending")
    }

    /// Number of records. **O(1)**.
    pub fn len(&self) -> usize {
        self.sums.len()
    }

    /// Whether no record has been appended. **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    /// Number of calls waiting for their result. **O(1)**.
    pub fn pending_count(&self) -> usize {
        self.calls.pending_len()
    }

    /// Counts of the anomalies accepted so far. **O(1)**.
    pub fn anomalies(&self) -> Anomalies {
        self.anomalies
    }

    /// Finds where to cut so that about `target_tokens` are compacted: the seed's
    /// `select_legal_cut`, without its rescans. **O(log n)**: one search of the block
    /// bases and one block for the target record, a gallop back from it for the
    /// floor, and one word of the legal-cut bitmap (a scan back through a stretch
    /// without legal cuts, **O(gap / 64)**); the first query after a compaction also
    /// rebuilds the bases' upper level, **O(n / 4096)** (see `src/index.rs`). Plus
    /// **O(k log k)** over the `k` pending calls when it defers.
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
            let t = self.sums.first_reaching(target_tokens);
            (t, t)
        };
        let floor = self.sums.floor(target_index, lookback_tokens);
        let best = self.cuts.at_or_before(target_index);
        if best >= floor {
            return Ok(best);
        }
        Err(Defer {
            target_tokens,
            lookback_tokens,
            target_index,
            floor,
            nearest_legal_below: Some(best).filter(|_| floor > 0),
            nearest_legal_above: self.cuts.at_or_after(target_index + 1),
            waiting_on: self.waiting_before(wanted),
        })
    }

    /// Pending calls whose `tool_use` lies before `cut`, in log order. **O(k log k)**.
    fn waiting_before(&self, cut: usize) -> Vec<CallId> {
        self.pending_calls()
            .into_iter()
            .filter(|p| p.at < cut)
            .map(|p| p.id.clone())
            .collect()
    }

    /// Heap bytes the tracker holds, tables included (an estimate for the hash tables,
    /// exact for the vectors). **O(k)** for the `k` ids kept as strings.
    pub fn heap_bytes(&self) -> usize {
        self.sums.heap_bytes() + self.cuts.heap_bytes() + self.calls.heap_bytes()
    }

    /// Number of calls answered so far (in either order). **O(1)**.
    pub fn completed_calls(&self) -> usize {
        self.calls.completed_len()
    }

    /// Checks every invariant listed in the type docs that can be checked without the
    /// records themselves; panics with a description of the first that fails. **O(n)**.
    /// For tests and fuzzers; the model tests also compare every cut to the reference.
    #[doc(hidden)]
    pub fn assert_invariants(&self) {
        let len = self.len();
        self.sums.assert_invariants();
        self.cuts.assert_invariants(len);
        self.calls.assert_invariants(len);
        if cfg!(cutpoint_mutant = "ignore_pending") {
            // The mutant breaks these on purpose; let the model tests catch it instead.
            return;
        }
        assert_eq!(
            self.cuts.last() == len,
            self.calls.pending_is_empty() && !self.last_open,
            "len is legal iff no call is pending and no record is open"
        );
        assert!(
            !self.last_open || len > 0,
            "an open record lies inside the log"
        );
        for p in self.calls.pending() {
            // Rule (a): no cut after a pending call is legal.
            assert!(
                self.cuts.last() <= p.at as usize,
                "cut {} is legal after pending call {} at {}",
                self.cuts.last(),
                p.id,
                p.at
            );
        }
    }
}
