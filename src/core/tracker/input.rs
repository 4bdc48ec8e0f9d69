//! The tracker's side of compaction: appending summary records and replacing a region
//! by one, in place.

use super::apply::ApplyError;
use crate::error::AppendError;
use crate::record::CallId;
use crate::tracker::Tracker;

impl Tracker {
    /// Checks and records the ids a summary at `at` covers: each counts as called and
    /// answered there. All ids are checked before any is recorded, so a refusal leaves
    /// the tracker as it was. **O(k)** expected for `k` ids.
    pub(crate) fn record_summary(&mut self, ids: &[CallId], at: usize) -> Result<(), AppendError> {
        let mut fps = Vec::with_capacity(ids.len());
        for id in ids {
            if id.is_empty() {
                return Err(AppendError::EmptyCallId {
                    at,
                    kind: "summary",
                });
            }
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
    /// that. [`Log::apply`](super::Log::apply) does it for you. Results inside the
    /// region whose call never came are dropped with the region: a later `tool_use`
    /// with their id will be pending, as in the compacted log.
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
    /// [`ApplyError`] when the region is empty, out of range, not bounded by legal
    /// cuts, or the new total would overflow. The tracker is then unchanged.
    pub fn replace_region(
        &mut self,
        start: usize,
        end: usize,
        summary_tokens: u64,
    ) -> Result<(), ApplyError> {
        let len = self.len();
        if end > len {
            return Err(ApplyError::OutOfRange { end, len });
        }
        if start >= end {
            return Err(ApplyError::EmptyRegion { start, end });
        }
        for (at, which) in [(start, "start"), (end, "end")] {
            if !self.is_legal_cut(at) {
                return Err(ApplyError::NotALegalCut { at, which });
            }
        }
        let removed = self.sums.before(end) - self.sums.before(start);
        let kept = self.total_tokens() - removed;
        kept.checked_add(summary_tokens)
            .ok_or(ApplyError::TokenOverflow {
                summary_tokens,
                kept,
            })?;
        self.sums.replace(start, end, summary_tokens);
        self.cuts.replace(start, end);
        // `end <= len <= MAX_RECORDS`, which fits in u32.
        self.calls.replace_region(start as u32, end as u32);
        Ok(())
    }
}
