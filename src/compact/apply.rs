//! Applying a plan: the region becomes one summary record, in the entries and in the
//! tracker, in place.

use super::summary::pair_unit;
use super::{Atom, Entry, Log, Payload, Plan, Unit};
use crate::core::index::{Moved, splice_one};
use crate::{Record, ReplaceError};

/// Why a plan could not be applied (or a region not planned). The log and tracker are
/// then unchanged.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    /// The region is empty, out of range, not bounded by legal cuts (any more), or its
    /// summary would overflow the token total: the tracker refused it.
    #[error(transparent)]
    Region(#[from] ReplaceError),
    /// Another plan was applied since this one was made: plan again.
    #[error("stale plan: made before compaction {planned}, the log is at compaction {now}")]
    StalePlan {
        /// The number of compactions applied when the plan was made.
        planned: u64,
        /// The number applied now.
        now: u64,
    },
}

/// What [`Log::apply`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Applied {
    /// Position of the new summary record (`None` for an empty plan: nothing done).
    pub summary_at: Option<usize>,
    /// Records removed (the summary not counted).
    pub removed_records: usize,
    /// Tokens removed (the summary not counted).
    pub removed_tokens: u64,
    /// Calls the summary covers.
    pub covered_calls: usize,
}

impl Log {
    /// The units a summary of `plan`'s region would hold: each pair, and the units of
    /// summaries inside the region, in log order. **O(r)** plus the payloads' length.
    pub fn units(&self, plan: &Plan) -> Vec<Unit> {
        let mut units = Vec::new();
        for atom in &plan.atoms {
            match atom {
                Atom::Pair {
                    call_id,
                    use_at,
                    result_at,
                } => {
                    if let (Some(call), Some(result)) =
                        (self.entries.get(*use_at), self.entries.get(*result_at))
                    {
                        units.push(pair_unit(call_id, call, result, plan.arguments));
                    }
                }
                Atom::Summary { at, .. } => {
                    if let Some(entry) = self.entries.get(*at) {
                        units.extend(entry.units());
                    }
                }
                Atom::Text { .. } | Atom::DroppedResult { .. } => {}
            }
        }
        units
    }

    /// Replaces `plan`'s region by one summary record holding `text` and the units of
    /// every pair in the region, counted as `summary_tokens` tokens (the caller knows
    /// its tokenizer). **O(r + min(start, len - end))** amortized for a region of `r`
    /// records starting at `start` (plus the payloads copied into the units): the
    /// tracker is updated in place ([`Tracker::replace_region`](crate::Tracker::replace_region)),
    /// never rebuilt. An empty plan does nothing.
    ///
    /// # Errors
    /// [`ApplyError::StalePlan`] when another plan was applied since `plan` was made;
    /// the others when the region is no longer bounded by legal cuts or the tokens
    /// overflow. The log is then unchanged.
    pub fn apply(
        &mut self,
        plan: &Plan,
        text: Option<String>,
        summary_tokens: u64,
    ) -> Result<Applied, ApplyError> {
        if plan.generation != self.generation {
            return Err(ApplyError::StalePlan {
                planned: plan.generation,
                now: self.generation,
            });
        }
        let (start, end) = (plan.region.start, plan.region.end);
        if start == end {
            return Ok(Applied {
                summary_at: None,
                removed_records: 0,
                removed_tokens: 0,
                covered_calls: 0,
            });
        }
        let units = self.units(plan);
        let removed_tokens = self
            .tracker
            .tokens_before(end)
            .zip(self.tracker.tokens_before(start))
            .map_or(0, |(e, s)| e - s);
        self.tracker.replace_region(start, end, summary_tokens)?;
        let record = Record::summary(units.iter().map(|u| u.call_id.clone()), summary_tokens);
        let covered_calls = units.len();
        let entry = Entry::new(record, Payload::Summary { text, units });
        let side = Moved::shorter(self.entries.len(), start, end);
        splice_one(&mut self.entries, start, end, Some(entry), side, |_| {});
        self.generation += 1;
        Ok(Applied {
            summary_at: Some(start),
            removed_records: end - start,
            removed_tokens,
            covered_calls,
        })
    }
}
