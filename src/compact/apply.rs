//! Applying a plan: the region becomes one summary record, in the entries and in the
//! tracker, in place.

use super::summary::{first_line, pair_unit};
use super::{Atom, Entry, Log, Orphan, Payload, Plan, Unit, structure};
use crate::core::index::splice_many;
use crate::{Record, ReplaceError, Replacement};

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
    /// The region starts at or before the latest compaction record (a provider's
    /// native compaction, [`Log::live_from`]): it and the history before it are kept
    /// as they are.
    #[error(
        "region {start}..{end} starts at or before the compaction record at {compaction_at}; the live history starts there and it is kept as it is"
    )]
    Pinned {
        /// Start of the region.
        start: usize,
        /// End of the region.
        end: usize,
        /// Position of the latest compaction record.
        compaction_at: usize,
    },
    /// The region covers a kept record ([`Payload::Kept`]: a control item, a block
    /// that loaded a tool): it stays where it is; split the region around it
    /// ([`Log::around_kept`]).
    #[error(
        "region {start}..{end} covers the kept record at {at} (a control item or a block that loaded a tool); it stays where it is"
    )]
    Kept {
        /// Start of the region.
        start: usize,
        /// End of the region.
        end: usize,
        /// Position of the first kept record in it.
        at: usize,
    },
}

impl Log {
    /// Refuses a non-empty region that starts at or before the latest compaction
    /// record or covers a kept record. **O(log k)** for `k` kept records.
    pub(super) fn check_unpinned(&self, region: &std::ops::Range<usize>) -> Result<(), ApplyError> {
        if let Some(at) = self.kept_in(region.clone()) {
            return Err(ApplyError::Kept {
                start: region.start,
                end: region.end,
                at,
            });
        }
        match self.compaction {
            Some(at) if region.start < region.end && region.start <= at => {
                Err(ApplyError::Pinned {
                    start: region.start,
                    end: region.end,
                    compaction_at: at,
                })
            }
            _ => Ok(()),
        }
    }
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
    /// Walks the units a summary of `plan`'s region would hold, in log order, handing
    /// each to `each`: a pair's as it is made, an earlier summary's where they are
    /// (borrowed, not cloned), a summary without a payload's as bare units. The one
    /// walk behind [`units`](Log::units) and [`units_estimate`](Log::units_estimate).
    /// **O(r)** plus the units.
    fn each_unit(&self, plan: &Plan, mut each: impl FnMut(std::borrow::Cow<'_, Unit>)) {
        use std::borrow::Cow;
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
                        each(Cow::Owned(pair_unit(call_id, call, result, plan.arguments)));
                    }
                }
                Atom::Summary { at, .. } => match self.entries.get(*at) {
                    Some(Entry {
                        payload: Payload::Summary { units, .. },
                        record,
                    }) if matches!(record.kind(), crate::RecordKind::Summary(_)) => {
                        units.iter().for_each(|u| each(Cow::Borrowed(u)));
                    }
                    Some(entry) => entry.units().into_iter().for_each(|u| each(Cow::Owned(u))),
                    None => {}
                },
                Atom::Text { .. } | Atom::DroppedResult { .. } => {}
            }
        }
    }

    /// [`estimate_summary_tokens`](super::estimate_summary_tokens)`(None,
    /// &self.units(plan))` without collecting the units: an earlier summary's units
    /// in the region are read where they are, not cloned (a region that folds a
    /// ledger of many calls costs a walk over it, no allocation). **O(units)**.
    pub fn units_estimate(&self, plan: &Plan) -> u64 {
        let mut bytes = 0;
        self.each_unit(plan, |u| bytes += super::summary::unit_bytes(&u));
        super::summary::summary_tokens_of_bytes(bytes)
    }

    /// The units a summary of `plan`'s region would hold: each pair, and the units of
    /// summaries inside the region, in log order. **O(r)** plus the payloads' length.
    pub fn units(&self, plan: &Plan) -> Vec<Unit> {
        let mut units = Vec::new();
        self.each_unit(plan, |u| units.push(u.into_owned()));
        units
    }

    /// What a summary of `plan`'s region says besides its units: the prose of the
    /// earlier summaries in the region, in log order, then `prose` (once: not again
    /// when the earlier prose ends with it), and the region's orphan results (the
    /// earlier summaries' orphans where they stood, then each result without its
    /// call). The one fold of an earlier summary's prose and orphans, so that a later
    /// compaction carries them forward verbatim. **O(r)** plus the texts.
    pub fn folded(&self, plan: &Plan, prose: Option<String>) -> (Option<String>, Vec<Orphan>) {
        let mut texts: Vec<&str> = Vec::new();
        let mut orphans = Vec::new();
        for atom in &plan.atoms {
            match atom {
                Atom::Summary { at, .. } => {
                    if let Some(Payload::Summary {
                        text, orphans: o, ..
                    }) = self.entries.get(*at).map(|e| &e.payload)
                    {
                        texts.extend(text.as_deref().filter(|t| !t.trim().is_empty()));
                        orphans.extend(o.iter().cloned());
                    }
                }
                Atom::DroppedResult { at, call_id } => orphans.push(Orphan {
                    call_id: call_id.clone(),
                    first_line: match self.entries.get(*at).map(|e| &e.payload) {
                        Some(Payload::Result { content, .. }) => content.as_deref().map(first_line),
                        _ => None,
                    },
                }),
                Atom::Text { .. } | Atom::Pair { .. } => {}
            }
        }
        let earlier = texts.join("\n\n");
        let text = match prose {
            _ if earlier.is_empty() => prose,
            Some(p) if !p.is_empty() && !earlier.ends_with(p.as_str()) => {
                Some(format!("{earlier}\n\n{p}"))
            }
            _ => Some(earlier),
        };
        (text, orphans)
    }

    /// The payload a summary of `plan`'s region with prose `prose` holds, as
    /// [`apply`](Log::apply) writes it: the units of every pair in the region and the
    /// earlier summaries' prose and orphans folded in ([`folded`](Log::folded)). For
    /// sizing a summary before it is applied. **O(r)** plus the payloads copied.
    pub fn summary_payload(&self, plan: &Plan, prose: Option<String>) -> Payload {
        let (text, units, orphans) = self.summary_parts(plan, prose);
        Payload::Summary {
            text,
            units,
            orphans,
        }
    }

    /// [`summary_payload`](Log::summary_payload)'s text, units and orphans.
    fn summary_parts(
        &self,
        plan: &Plan,
        prose: Option<String>,
    ) -> (Option<String>, Vec<Unit>, Vec<Orphan>) {
        let units = self.units(plan);
        let (text, orphans) = self.folded(plan, prose);
        (text, units, orphans)
    }

    /// Replaces `plan`'s region by one summary record holding `text` and the units of
    /// every pair in the region, counted as `summary_tokens` tokens (the caller knows
    /// its tokenizer). **O(r + min(start, len - end))** amortized for a region of `r`
    /// records starting at `start` (plus the payloads copied into the units): the
    /// tracker is updated in place ([`Tracker::replace_region`](crate::Tracker::replace_region)),
    /// never rebuilt. An empty plan does nothing. The one-region case of
    /// [`apply_many`](Log::apply_many).
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
        let outcome = Outcome::Summary {
            text,
            tokens: summary_tokens,
        };
        let mut applied = self.apply_many(vec![(plan, outcome)])?;
        Ok(applied.pop().unwrap_or(Applied {
            summary_at: None,
            removed_records: 0,
            removed_tokens: 0,
            covered_calls: 0,
        }))
    }

    /// Applies several plans at once, all made on the log as it is now, their regions
    /// in log order and disjoint (one may end where the next starts): each becomes one
    /// summary record ([`Outcome::Summary`], its units listing every pair of the
    /// region, earlier summaries folded in) or nothing ([`Outcome::Removed`]: its calls
    /// are gone with it; the caller names them, from [`Plan::covered`]). Empty plans
    /// do nothing. One answer per plan, in order; `summary_at` is the summary's
    /// position in the log after the whole batch.
    ///
    /// **O(Σr + min(e, len - s))** amortized for regions of `r` records, the first
    /// starting at `s`, the last ending at `e` (plus the payloads copied into the
    /// units): the entries, the tracker
    /// ([`Tracker::replace_regions`](crate::Tracker::replace_regions)) and the shape
    /// move their shorter side once for the whole batch, never once per region.
    ///
    /// # Errors
    /// [`ApplyError::StalePlan`] when another plan was applied since one of these was
    /// made; [`ApplyError::Region`] when the regions overlap, are out of order or not
    /// bounded by legal cuts, or the tokens overflow; [`ApplyError::Pinned`] when one
    /// starts at or before the latest compaction record. The log is then unchanged.
    pub fn apply_many(&mut self, batch: Vec<(&Plan, Outcome)>) -> Result<Vec<Applied>, ApplyError> {
        if let Some((plan, _)) = batch.iter().find(|(p, _)| p.generation != self.generation) {
            return Err(ApplyError::StalePlan {
                planned: plan.generation,
                now: self.generation,
            });
        }
        for (plan, _) in &batch {
            self.check_unpinned(&plan.region)?;
        }
        let mut regions = Vec::with_capacity(batch.len());
        let mut items = Vec::with_capacity(batch.len());
        let mut answers = Vec::with_capacity(batch.len());
        let mut gone_messages = 0;
        let mut gone_before = 0;
        for (plan, outcome) in batch {
            let (start, end) = (plan.region.start, plan.region.end);
            let removed_tokens = self
                .tracker
                .tokens_before(end)
                .zip(self.tracker.tokens_before(start))
                .map_or(0, |(e, s)| e.saturating_sub(s));
            if start >= end {
                answers.push(Applied {
                    summary_at: None,
                    removed_records: 0,
                    removed_tokens: 0,
                    covered_calls: 0,
                });
                continue;
            }
            gone_messages += (start..end.min(self.entries.len()))
                .filter(|&i| structure::starts_message(&self.entries[i].record, i))
                .count();
            let (replacement, item, applied) = match outcome {
                Outcome::Summary { text, tokens } => {
                    let (text, units, orphans) = self.summary_parts(plan, text);
                    let record = Record::summary(units.iter().map(|u| u.call_id.clone()), tokens);
                    let applied = Applied {
                        summary_at: Some(start - gone_before),
                        removed_records: end - start,
                        removed_tokens,
                        covered_calls: units.len(),
                    };
                    let entry = Entry::new(
                        record,
                        Payload::Summary {
                            text,
                            units,
                            orphans,
                        },
                    );
                    (
                        Replacement::summary(start, end, tokens),
                        Some(entry),
                        applied,
                    )
                }
                Outcome::Removed => (
                    Replacement::removal(start, end),
                    None,
                    Applied {
                        summary_at: None,
                        removed_records: end - start,
                        removed_tokens,
                        covered_calls: 0,
                    },
                ),
            };
            gone_before += replacement.gone();
            regions.push(replacement);
            items.push(item);
            answers.push(applied);
        }
        if regions.is_empty() {
            return Ok(answers);
        }
        self.tracker.replace_regions(&regions)?;
        let spans: Vec<(usize, usize)> = regions.iter().map(|r| (r.start, r.end)).collect();
        splice_many(&mut self.entries, &spans, items);
        // No kept record lies inside a region: each moves back by what went before it.
        if !self.kept.is_empty() {
            let mut r = 0;
            let mut gone = 0;
            for p in &mut self.kept {
                while r < regions.len() && regions[r].end <= *p {
                    gone += regions[r].gone();
                    r += 1;
                }
                *p -= gone;
            }
        }
        let entries = &self.entries;
        self.structure
            .replace(&regions, gone_messages, entries.len(), |i| {
                &entries[i].record
            });
        self.generation += 1;
        self.changes += 1;
        Ok(answers)
    }
}

/// What a planned region becomes in [`Log::apply_many`].
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Outcome {
    /// One summary record holding `text` (prose, if any) and the units of every pair
    /// in the region, counted as `tokens` tokens.
    Summary {
        /// Prose, if any.
        text: Option<String>,
        /// The summary record's tokens.
        tokens: u64,
    },
    /// Nothing: the region and its calls are dropped.
    Removed,
}
