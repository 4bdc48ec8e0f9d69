//! The only place a tracker's state changes: appending records (and their fast path),
//! open records growing and closing, calls withdrawn, events, the caps and mode, and
//! replacing a compacted region in place.
//!
//! A record's trip: [`Tracker::append`] splits it into its parts (no rebuild),
//! hashes a tool record's call id **once** into a fingerprint, asks
//! [`admit`](super::admit) whether to take it (caps, then strict-mode pairing: a
//! pure check given that fingerprint), then books the call in the call book and
//! commits the position to the index. Nothing after admission can fail, so a refused
//! record leaves the tracker exactly as it was.

use super::{Anomaly, Appended, Tracker};
use crate::core::calls::{Fingerprint, ResultOutcome, SeenUse, UseOutcome};
use crate::core::config::{Limits, Mode};
use crate::core::error::{
    AppendError, CallRecord, EventError, OpenEvent, ReplaceError, TokensError,
};
use crate::core::event::{Event, Handled};
use crate::core::index::{MAX_RECORDS, Remap, Replacement};
use crate::record::{CallId, Record, RecordKind};

impl Tracker {
    /// Appends one record and decides whether the cut after it is legal.
    ///
    /// **O(1)** amortized, plus one hash of the call id for tool records (each id is
    /// hashed once per append, whatever the mode and caps). Cuts that a late
    /// `tool_use` makes illegal are removed here too; each cut is removed at most once
    /// over the log's life, so that cost is **O(1)** amortized as well.
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
        let (kind, tokens, bound) = record.into_parts();
        match kind {
            plain @ (RecordKind::User | RecordKind::Assistant) => {
                if let Some(appended) = self.push_plain(tokens, bound) {
                    // These variants own nothing; forgetting skips an out-of-line call
                    // to their drop glue (7% of an id-free append in a profile; 74
                    // against 54 M records/s in one back-to-back pair of
                    // `append/no_ids/1000` runs, where runs vary by +-15%).
                    std::mem::forget(plain);
                    return Ok(appended);
                }
                // A check failed: the general path produces the error.
                self.push(plain, tokens, bound, false)
            }
            other => self.push(other, tokens, bound, false),
        }
    }

    /// The fast path of [`append`](Tracker::append) for a closed record without a call
    /// id (user or assistant): exactly what `push` does for one, without building or
    /// matching the record's kind. `None` (and nothing changed) when any check fails;
    /// `push` then produces the error. **O(1)** amortized.
    #[inline]
    fn push_plain(&mut self, tokens: u64, bound: bool) -> Option<Appended> {
        let at = self.len();
        // The checks `admit` and `push` make for such a record: the records cap, no
        // open record, room in the index, no token overflow.
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

    /// [`append`](Tracker::append) of a record's parts, leaving it open when `open`
    /// (see [`open`](Tracker::open)): everything is decided now except the cut after
    /// the record, which `close` decides. That split is exact because nothing but the
    /// open record's size can change before it closes.
    fn push(
        &mut self,
        kind: RecordKind,
        tokens: u64,
        bound: bool,
        open: bool,
    ) -> Result<Appended, AppendError> {
        let at = self.len();
        // The one hash of a tool record's id: admission and the call book share it.
        let fp = kind.call_id().map(|id| self.calls.fingerprint(id));
        self.admit(&kind, fp.as_ref())?;
        if self.last_open {
            return Err(AppendError::RecordOpen {
                at,
                open_at: at - 1,
            });
        }
        if at >= MAX_RECORDS {
            return Err(AppendError::Full { at });
        }
        let total = self.total_tokens();
        let new_total = total
            .checked_add(tokens)
            .ok_or(AppendError::TokenOverflow { at, tokens, total })?;
        // `at < MAX_RECORDS == u32::MAX`, checked above.
        let at32 = at as u32;

        let anomaly = match (kind, fp) {
            (RecordKind::Summary(ids), _) => {
                self.record_summary(&ids, at)?;
                None
            }
            (RecordKind::ToolUse(id), Some(fp)) => self.book_use(id, fp, at32)?,
            (RecordKind::ToolResult(id), Some(fp)) => self.book_result(id, fp, at32)?,
            _ => None,
        };

        let cut_after_is_legal = self.commit(at, new_total, bound, open);
        Ok(Appended {
            at,
            cut_after_is_legal,
            anomaly,
        })
    }

    /// Books a `tool_use` at `at`: the one fallible step after admission (a reused id,
    /// an empty id); on `Err` nothing changed. **O(1)** amortized.
    #[inline]
    fn book_use(
        &mut self,
        id: CallId,
        fp: Fingerprint,
        at: u32,
    ) -> Result<Option<Anomaly>, AppendError> {
        non_empty(&id, at as usize, CallRecord::ToolUse)?;
        match self.calls.try_use(fp, id, at) {
            Err((call_id, seen)) => {
                let first_use = match seen {
                    SeenUse::Pending(p) => Some(p as usize),
                    SeenUse::Completed => None,
                };
                Err(AppendError::DuplicateCall {
                    call_id,
                    at: at as usize,
                    first_use,
                })
            }
            Ok(UseOutcome::Pending) => Ok(None),
            Ok(UseOutcome::AnsweredEarlier { first_result }) => {
                if !crate::core::mutant("ignore_orphan") {
                    self.cuts.revoke_after(first_result as usize);
                }
                self.anomalies.uses_after_result += 1;
                Ok(Some(Anomaly::UseAfterResult {
                    first_result: first_result as usize,
                }))
            }
        }
    }

    /// Books a `tool_result` at `at`; only an empty id is refused. **O(1)** amortized.
    #[inline]
    fn book_result(
        &mut self,
        id: CallId,
        fp: Fingerprint,
        at: u32,
    ) -> Result<Option<Anomaly>, AppendError> {
        non_empty(&id, at as usize, CallRecord::ToolResult)?;
        Ok(match self.calls.record_result(fp, id, at) {
            ResultOutcome::Answered => None,
            ResultOutcome::Duplicate => {
                self.anomalies.duplicate_results += 1;
                Some(Anomaly::DuplicateResult)
            }
            ResultOutcome::Orphan => {
                self.anomalies.orphan_results += 1;
                Some(Anomaly::OrphanResult)
            }
        })
    }

    /// Checks and records the ids a summary at `at` covers: each counts as called and
    /// answered there. Each id is hashed once; all are checked before any is recorded,
    /// so a refusal leaves the tracker as it was. **O(k)** expected for `k` ids.
    fn record_summary(&mut self, ids: &[CallId], at: usize) -> Result<(), AppendError> {
        let mut fps = Vec::with_capacity(ids.len());
        for id in ids {
            non_empty(id, at, CallRecord::Summary)?;
            let fp = self.calls.fingerprint(id);
            if self.calls.seen_any(&fp) || fps.contains(&fp) && ids.len() <= 16 {
                return Err(AppendError::CoveredIdSeen {
                    call_id: id.clone(),
                    at,
                });
            }
            fps.push(fp);
        }
        if ids.len() > 16 {
            // Large summaries: find repeats by sorting ids instead of the quadratic scan.
            let mut sorted: Vec<&CallId> = ids.iter().collect();
            sorted.sort_unstable();
            if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
                return Err(AppendError::CoveredIdSeen {
                    call_id: w[0].clone(),
                    at,
                });
            }
        }
        for fp in fps {
            self.calls.record_covered(fp);
        }
        Ok(())
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
    fn cut_at_len_is_legal(&self) -> bool {
        self.calls.pending_is_empty() || crate::core::mutant("ignore_pending")
    }

    /// Appends `record` open: it may grow ([`grow`](Tracker::grow)) and take its final
    /// size ([`set_last_tokens`](Tracker::set_last_tokens)) until
    /// [`close`](Tracker::close). A `tool_use` is pending from now on. The cut after an
    /// open record is never legal. **O(1)** amortized, as [`append`](Tracker::append).
    ///
    /// ```
    /// use cutpoint::{Record, Tracker};
    /// let mut t = Tracker::new();
    /// t.append(Record::user(100))?;
    /// t.open(Record::assistant(0))?;
    /// t.grow(40)?;
    /// assert!(!t.is_legal_cut(2)); // still streaming
    /// assert!(t.close()?);        // now complete, nothing pending
    /// assert!(t.is_legal_cut(2) && t.total_tokens() == 140);
    /// # Ok::<(), cutpoint::EventError>(())
    /// ```
    ///
    /// # Errors
    /// As [`append`](Tracker::append); on error the tracker is unchanged.
    pub fn open(&mut self, record: Record) -> Result<Appended, AppendError> {
        let (kind, tokens, bound) = record.into_parts();
        self.push(kind, tokens, bound, true)
    }

    /// Adds `tokens` to the open record and returns its size now. **O(1)**: only the
    /// last prefix sum changes, and no cut is affected (none after it is legal).
    ///
    /// # Errors
    /// [`EventError::NotOpen`] when no record is open, [`EventError::TokenOverflow`];
    /// on error the tracker is unchanged.
    pub fn grow(&mut self, tokens: u64) -> Result<u64, EventError> {
        let len = self.len();
        if !self.last_open {
            return Err(EventError::NotOpen {
                event: OpenEvent::Delta,
                len,
            });
        }
        let at = len - 1;
        let total = self
            .total_tokens()
            .checked_add(tokens)
            .ok_or(EventError::TokenOverflow {
                at,
                tokens,
                before: self.total_tokens(),
            })?;
        self.sums.set_last(total);
        Ok(self.sums.record(at))
    }

    /// Closes the open record and decides the cut after it: legal iff no call is
    /// pending, exactly as [`append`](Tracker::append) decides. Returns that decision.
    /// **O(1)**.
    ///
    /// # Errors
    /// [`EventError::NotOpen`] when no record is open; the tracker is unchanged.
    pub fn close(&mut self) -> Result<bool, EventError> {
        let len = self.len();
        if !self.last_open {
            return Err(EventError::NotOpen {
                event: OpenEvent::Close,
                len,
            });
        }
        self.last_open = false;
        let legal = self.cut_at_len_is_legal();
        if legal {
            self.cuts.push(len);
        }
        Ok(legal)
    }

    /// Replaces the size of the last record (open or closed) by `tokens`, the count a
    /// provider reports once a message is done. **O(1)**; no cut changes.
    ///
    /// # Errors
    /// [`EventError::EmptyLog`], [`EventError::TokenOverflow`]; on error the tracker is
    /// unchanged.
    pub fn set_last_tokens(&mut self, tokens: u64) -> Result<(), EventError> {
        let Some(at) = self.len().checked_sub(1) else {
            return Err(EventError::EmptyLog { tokens });
        };
        let before = self.sums.before(at);
        let total = before
            .checked_add(tokens)
            .ok_or(EventError::TokenOverflow { at, tokens, before })?;
        self.sums.set_last(total);
        Ok(())
    }

    /// Withdraws the pending call `id`: the provider dropped its `tool_use` (an
    /// Anthropic response that fell back to another model mid-stream drops every call
    /// before its `fallback` block), so no result will come and none is waited for.
    /// From now on the record counts as an assistant record: the call is no longer
    /// pending, and cut `len` becomes legal if no other call is pending and the last
    /// record is closed (an open record's close decides it, as usual). The id stays
    /// used: a later `tool_use` with it is refused as a reuse
    /// ([`AppendError::DuplicateCall`]), and a later result with it is a duplicate.
    /// Returns the position of the call's `tool_use`. **O(1)** expected, plus one hash
    /// of the id.
    ///
    /// **Cuts already decided stay as decided.** The cuts between the call and the end
    /// (`at + 1..len`) were decided while it was pending, so none of them is legal,
    /// and the tracker keeps no record kinds to decide them again. That is exact when
    /// every record after the call is [bound to the previous
    /// one](Record::bound_to_previous) (rule (c) forbids those cuts anyway): one
    /// message still streaming, the only case a stream decoder withdraws a call. Then
    /// (and if every call withdrawn before was withdrawn so too) its legal cuts and
    /// pending calls are exactly those of a tracker built from scratch with the call's
    /// record as an assistant record of the same size and binding
    /// (`tests/it/events.rs`, `withdrawn_calls_agree_with_the_reference`, checks this
    /// against the reference, and the safety of the other case).
    /// Otherwise it is still safe (no illegal cut becomes legal), at a cost: the cuts
    /// that only this call forbade between `at + 1` and `len - 1` stay illegal, so a
    /// compaction may have to end earlier than a rebuilt tracker would let it (until
    /// one compacts past them).
    ///
    /// ```
    /// use cutpoint::{CallId, Record, Tracker};
    /// let mut t = Tracker::new();
    /// t.append(Record::user(100))?;
    /// t.append(Record::assistant(10))?;
    /// t.append(Record::tool_use("toolu_1", 20).bound_to_previous())?;
    /// assert!(!t.is_legal_cut(3)); // the call waits for its result
    /// assert_eq!(t.withdraw_call(&CallId::from("toolu_1")), Ok(2));
    /// assert!(t.is_legal_cut(3) && t.pending_count() == 0);
    /// // A call that is not pending (any more) is refused; nothing changes.
    /// assert!(t.withdraw_call(&CallId::from("toolu_1")).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`EventError::NotPending`] when no call with this id is pending; the tracker is
    /// then unchanged.
    pub fn withdraw_call(&mut self, id: &CallId) -> Result<usize, EventError> {
        let fp = self.calls.fingerprint(id);
        let Some(at) = self.calls.withdraw(&fp) else {
            return Err(EventError::NotPending {
                call_id: id.clone(),
            });
        };
        let len = self.len();
        // Invariant 3: with the call pending, cut `len` was not legal.
        if !self.last_open && self.cut_at_len_is_legal() && self.cuts.last() < len {
            self.cuts.push(len);
        }
        Ok(at as usize)
    }

    /// Applies one event of a live turn. **O(1)** amortized (see each operation).
    ///
    /// ```
    /// use cutpoint::{Event, Record, Tracker};
    /// let mut t = Tracker::new();
    /// for event in [
    ///     Event::Record(Record::user(500)),
    ///     Event::Opened(Record::assistant(0)),
    ///     Event::Delta { tokens: 30 },
    ///     Event::Closed,
    ///     Event::Opened(Record::tool_use("toolu_1", 0).bound_to_previous()),
    ///     Event::Delta { tokens: 12 },
    ///     Event::Closed,
    ///     Event::UsageReported { tokens: 15 },
    ///     Event::TurnEnded,
    /// ] {
    ///     t.handle(event)?;
    /// }
    /// assert_eq!(t.total_tokens(), 545);
    /// assert_eq!(t.pending_count(), 1); // the tool runs now
    /// assert_eq!(t.legal_cuts().collect::<Vec<_>>(), [0, 1]);
    /// # Ok::<(), cutpoint::EventError>(())
    /// ```
    ///
    /// # Errors
    /// See [`EventError`]; a refused event leaves the tracker unchanged.
    pub fn handle(&mut self, event: Event) -> Result<Handled, EventError> {
        Ok(match event {
            Event::Record(record) => Handled::Appended(self.append(record)?),
            Event::Opened(record) => Handled::Opened(self.open(record)?),
            Event::Delta { tokens } => {
                let size = self.grow(tokens)?;
                Handled::Grew {
                    at: self.len() - 1,
                    tokens: size,
                }
            }
            Event::Closed => Handled::Closed {
                cut_after_is_legal: self.close()?,
                at: self.len() - 1,
            },
            Event::UsageReported { tokens } => {
                self.set_last_tokens(tokens)?;
                Handled::Resized {
                    at: self.len() - 1,
                    tokens,
                }
            }
            Event::TurnEnded => {
                if let Some(open_at) = self.open_record() {
                    return Err(EventError::TurnEndedWhileOpen { open_at });
                }
                Handled::TurnEnded {
                    len: self.len(),
                    pending: self.pending_count(),
                }
            }
            Event::CallWithdrawn(id) => {
                let at = self.withdraw_call(&id)?;
                Handled::Withdrawn {
                    at,
                    end_is_legal: self.is_legal_cut(self.len()),
                }
            }
        })
    }

    /// Replaces the caps. Records already held stay, even past a lowered cap; only
    /// later appends are checked. **O(1)**.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Switches mode; later appends follow it. Anomalies accepted earlier stay counted.
    /// **O(1)**.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// Replaces records `start..end` by one summary record of `summary_tokens` tokens,
    /// in place: prefix sums, legal cuts and pending calls stay exact, as if the
    /// compacted log had been appended from scratch (except [`anomalies`](Tracker::anomalies),
    /// which keep counting what was seen, compacted records included).
    ///
    /// **O(r + min(start, len - end) + p + q)** amortized for `r = end - start` removed
    /// records, `p` pending calls and `q` results still waiting for their call; never
    /// a pass over the whole log. With a pinned head of `h` records and the summary
    /// right after it, `start = h` and the cost is **O(r + h)**.
    ///
    /// Both ends must be legal cuts, so every pair lies wholly inside or wholly outside
    /// the region. The summary record the caller puts at `start` in its own copy of
    /// the log must cover exactly the calls whose `tool_use` lies in the region, plus
    /// those covered by summaries in it: the tracker keeps no records and cannot check
    /// that (the compaction layer's `Log::apply` does it). Results inside the region
    /// whose call never came are dropped with the region: a later `tool_use` with
    /// their id will be pending, as in the compacted log.
    ///
    /// ```
    /// use cutpoint::{Record, Tracker};
    /// let mut t = Tracker::from_records([
    ///     Record::user(100),
    ///     Record::tool_use("a", 10),
    ///     Record::tool_result("a", 500),
    ///     Record::user(50),
    /// ])?;
    /// t.replace_region(1, 3, 20)?;
    /// assert_eq!((t.len(), t.total_tokens()), (3, 170));
    /// assert_eq!(t.legal_cuts().collect::<Vec<_>>(), [0, 1, 2, 3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ReplaceError`] when the region is empty, out of range, not bounded by legal
    /// cuts, or the new total would overflow. The tracker is then unchanged.
    pub fn replace_region(
        &mut self,
        start: usize,
        end: usize,
        summary_tokens: u64,
    ) -> Result<(), ReplaceError> {
        if start >= end && end <= self.len() {
            return Err(ReplaceError::EmptyRegion { start, end });
        }
        self.replace_regions(&[Replacement::summary(start, end, summary_tokens)])
    }

    /// Replaces several regions at once, in place: each [`Replacement`] turns records
    /// `start..end` into one summary record of its tokens, or removes them (its
    /// `summary_tokens` is `None`). Prefix sums, legal cuts and pending calls stay exact,
    /// as if the resulting log had been appended from scratch, with two exceptions:
    /// [`anomalies`](Tracker::anomalies) keep counting what was seen, and the ids of the
    /// calls of a *removed* region stay used (a later `tool_use` reusing one is refused,
    /// as while the region was there; a tracker rebuilt from the shortened log would
    /// accept it). What the caller keeps beside the records (summaries covering exactly
    /// the calls of their region) is as for [`replace_region`](Tracker::replace_region).
    ///
    /// The regions are given in log order, disjoint (one may end where the next
    /// starts), every end a legal cut, all positions in the log as it is before the
    /// call. **O(R + min(e, len - s) + r / 64 + p + q)** amortized for `R` regions,
    /// the first starting at `s`, the last ending at `e`, `r` records removed in all,
    /// `p` pending calls and `q` results still waiting for their call: one pass over
    /// the shorter side, however many regions, never one per region.
    ///
    /// ```
    /// use cutpoint::{Record, Replacement, Tracker};
    /// let mut t = Tracker::from_records([
    ///     Record::user(100),
    ///     Record::tool_use("a", 10),
    ///     Record::tool_result("a", 500),
    ///     Record::user(50),
    ///     Record::tool_use("b", 10),
    ///     Record::tool_result("b", 700),
    ///     Record::user(5),
    /// ])?;
    /// // Both pairs become digests of 20 tokens; then the first user record goes.
    /// t.replace_regions(&[Replacement::summary(1, 3, 20), Replacement::summary(4, 6, 20)])?;
    /// assert_eq!((t.len(), t.total_tokens()), (5, 195));
    /// t.replace_regions(&[Replacement::removal(0, 1)])?;
    /// assert_eq!((t.len(), t.total_tokens()), (4, 95));
    /// assert_eq!(t.legal_cuts().collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`ReplaceError`] when a region is empty, out of range, not bounded by legal
    /// cuts, overlaps the one before it, or the new total would overflow. The tracker
    /// is then unchanged.
    pub fn replace_regions(&mut self, regions: &[Replacement]) -> Result<(), ReplaceError> {
        let mut previous_end = 0;
        let mut removed: u64 = 0;
        let mut added: u128 = 0;
        for r in regions {
            self.check_region(r.start, r.end)?;
            if r.start == r.end {
                return Err(ReplaceError::EmptyRegion {
                    start: r.start,
                    end: r.end,
                });
            }
            if r.start < previous_end {
                return Err(ReplaceError::Overlapping {
                    start: r.start,
                    previous_end,
                });
            }
            previous_end = r.end;
            removed += self.sums.before(r.end) - self.sums.before(r.start);
            added += u128::from(r.summary_tokens.unwrap_or(0));
        }
        let kept = self.total_tokens() - removed;
        if u128::from(kept) + added > u128::from(u64::MAX) {
            return Err(ReplaceError::TokenOverflow {
                summary_tokens: u64::try_from(added).unwrap_or(u64::MAX),
                kept,
            });
        }
        if regions.is_empty() {
            return Ok(());
        }
        self.sums.replace_many(regions);
        self.cuts.replace_many(regions);
        self.calls.replace_regions(&Remap::new(regions));
        Ok(())
    }

    /// Gives existing records new token counts, in place: `edits` are `(record,
    /// tokens)` pairs, records strictly increasing. Prefix sums stay exact; nothing
    /// else changes (legal cuts and calls do not depend on sizes), so the tracker is
    /// exactly one appended from scratch with those sizes. How the compaction layer
    /// clears tool results and inputs in place. Returns the new total.
    ///
    /// **O(k + 64 e + (l - f) + min(f, b - l))** for `k` edits falling in `e` blocks
    /// of 64 records, the first in block `f` and the last in block `l` of the `b`
    /// blocks: proportional to what changed, plus at most the block bases after the
    /// first changed block (the bases after the last one move on the shorter side).
    ///
    /// ```
    /// use cutpoint::{Record, Tracker};
    /// let mut t = Tracker::from_records([
    ///     Record::user(100),
    ///     Record::tool_use("a", 10),
    ///     Record::tool_result("a", 5_000),
    ///     Record::user(50),
    /// ])?;
    /// assert_eq!(t.set_tokens(&[(2, 12)])?, 172);
    /// assert_eq!(t.tokens_before(3), Some(122));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`TokensError`] when a record is out of range, the records are not strictly
    /// increasing, or the new total would overflow. The tracker is then unchanged.
    pub fn set_tokens(&mut self, edits: &[(usize, u64)]) -> Result<u64, TokensError> {
        let len = self.len();
        let mut total = u128::from(self.total_tokens());
        let mut previous: Option<usize> = None;
        for &(at, tokens) in edits {
            if at >= len {
                return Err(TokensError::OutOfRange { at, len });
            }
            if let Some(previous) = previous.filter(|&p| at <= p) {
                return Err(TokensError::NotIncreasing { at, previous });
            }
            previous = Some(at);
            total = total - u128::from(self.sums.record(at)) + u128::from(tokens);
        }
        let total = u64::try_from(total).map_err(|_| TokensError::TokenOverflow {
            total: total.min(u128::from(u64::MAX)) as u64,
        })?;
        self.sums.set_tokens(edits);
        Ok(total)
    }
}

/// Refuses an empty call id on a record of `kind` at `at`, in both modes.
fn non_empty(id: &CallId, at: usize, kind: CallRecord) -> Result<(), AppendError> {
    if id.is_empty() {
        return Err(AppendError::EmptyCallId { at, kind });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::Event;

    #[test]
    fn refused_events_change_nothing() {
        let mut t = Tracker::new();
        assert_eq!(
            t.handle(Event::Delta { tokens: 1 }),
            Err(EventError::NotOpen {
                event: OpenEvent::Delta,
                len: 0
            })
        );
        assert_eq!(
            t.handle(Event::UsageReported { tokens: 1 }),
            Err(EventError::EmptyLog { tokens: 1 })
        );
        t.open(Record::tool_use("a", 5)).unwrap();
        assert_eq!(
            t.append(Record::user(1)),
            Err(AppendError::RecordOpen { at: 1, open_at: 0 })
        );
        assert_eq!(
            t.handle(Event::TurnEnded),
            Err(EventError::TurnEndedWhileOpen { open_at: 0 })
        );
        assert!(matches!(
            t.grow(u64::MAX),
            Err(EventError::TokenOverflow { at: 0, .. })
        ));
        assert_eq!(t.len(), 1);
        assert_eq!(t.total_tokens(), 5);
        assert_eq!(t.open_record(), Some(0));
        t.assert_invariants();
        assert_eq!(t.close(), Ok(false), "the call is pending");
        assert_eq!(
            t.close(),
            Err(EventError::NotOpen {
                event: OpenEvent::Close,
                len: 1
            })
        );
        t.assert_invariants();
    }

    /// A user message, then one assistant message: text and two calls, `a` and `b`.
    fn two_calls() -> Tracker {
        let mut t = Tracker::new();
        t.append(Record::user(100)).unwrap();
        t.append(Record::assistant(10)).unwrap();
        t.append(Record::tool_use("a", 20).bound_to_previous())
            .unwrap();
        t.append(Record::tool_use("b", 30).bound_to_previous())
            .unwrap();
        t
    }

    /// What a refused withdrawal must leave as it was.
    fn state(t: &Tracker) -> (usize, u64, Vec<usize>, Vec<(String, usize)>, usize) {
        (
            t.len(),
            t.total_tokens(),
            t.legal_cuts().collect(),
            t.pending_calls()
                .iter()
                .map(|p| (p.id.to_string(), p.at))
                .collect(),
            t.completed_calls(),
        )
    }

    #[test]
    fn withdrawing_a_call_that_is_not_pending_changes_nothing() {
        let mut t = two_calls();
        t.append(Record::tool_result("b", 5)).unwrap();
        let before = state(&t);
        // Never called, answered, and an empty id.
        for id in ["nope", "b", ""] {
            assert_eq!(
                t.withdraw_call(&CallId::from(id)),
                Err(EventError::NotPending {
                    call_id: CallId::from(id)
                }),
                "{id:?}"
            );
            assert_eq!(state(&t), before, "{id:?}");
        }
        assert_eq!(t.withdraw_call(&CallId::from("a")), Ok(2));
        // Withdrawn already.
        let withdrawn = state(&t);
        let again = t.handle(Event::CallWithdrawn(CallId::from("a")));
        assert_eq!(
            again,
            Err(EventError::NotPending {
                call_id: CallId::from("a")
            })
        );
        assert!(again.unwrap_err().to_string().contains("\"a\""));
        assert_eq!(state(&t), withdrawn);
        t.assert_invariants();
    }

    #[test]
    fn withdrawing_the_last_pending_call_makes_the_end_legal() {
        let mut t = two_calls();
        assert_eq!(
            t.handle(Event::CallWithdrawn(CallId::from("a"))),
            Ok(Handled::Withdrawn {
                at: 2,
                end_is_legal: false
            }),
            "b still waits"
        );
        assert!(!t.is_legal_cut(4));
        assert_eq!(
            t.handle(Event::CallWithdrawn(CallId::from("b"))),
            Ok(Handled::Withdrawn {
                at: 3,
                end_is_legal: true
            })
        );
        assert_eq!(t.pending_count(), 0);
        assert_eq!(t.completed_calls(), 2);
        // Cuts 2 and 3 split the message (rule (c)), as in a log built from scratch.
        assert_eq!(t.legal_cuts().collect::<Vec<_>>(), [0, 1, 4]);
        t.assert_invariants();
    }

    #[test]
    fn a_call_withdrawn_while_open_leaves_the_end_to_its_close() {
        let mut t = Tracker::new();
        t.append(Record::user(100)).unwrap();
        t.open(Record::tool_use("a", 0)).unwrap();
        assert_eq!(t.withdraw_call(&CallId::from("a")), Ok(1));
        assert!(!t.is_legal_cut(2), "the record still streams");
        t.assert_invariants();
        assert_eq!(t.close(), Ok(true));
        assert!(t.is_legal_cut(2));
        t.assert_invariants();
    }

    #[test]
    fn a_withdrawn_id_stays_used() {
        let mut t = two_calls();
        t.withdraw_call(&CallId::from("a")).unwrap();
        t.withdraw_call(&CallId::from("b")).unwrap();
        // A new call reusing it is refused, as for an answered call.
        assert_eq!(
            t.append(Record::tool_use("a", 1)),
            Err(AppendError::DuplicateCall {
                call_id: CallId::from("a"),
                at: 4,
                first_use: None
            })
        );
        // A result for it is a duplicate (lenient), refused in strict mode.
        let appended = t.append(Record::tool_result("a", 1)).unwrap();
        assert_eq!(appended.anomaly, Some(Anomaly::DuplicateResult));
        assert!(appended.cut_after_is_legal);
        let mut strict = two_calls().in_mode(crate::Mode::Strict);
        strict.withdraw_call(&CallId::from("a")).unwrap();
        assert!(matches!(
            strict.append(Record::tool_result("a", 1)),
            Err(AppendError::Violation(_))
        ));
        // And a summary may not cover it.
        assert!(matches!(
            t.append(Record::summary([CallId::from("b")], 3)),
            Err(AppendError::CoveredIdSeen { .. })
        ));
        t.assert_invariants();
    }

    #[test]
    fn usage_replaces_the_estimate_of_a_closed_record() {
        let mut t = Tracker::new();
        t.append(Record::user(10)).unwrap();
        t.append(Record::assistant(99)).unwrap();
        t.set_last_tokens(7).unwrap();
        assert_eq!(t.total_tokens(), 17);
        assert_eq!(t.record_tokens(1), Some(7));
        assert_eq!(t.tokens_before(1), Some(10));
        t.assert_invariants();
    }
}
