//! `truncate`: the last resort. The oldest region goes, with no summary, and every
//! call id it held is named in the report.

use super::{Edit, Goal, Kind, LeftAlone, NoProgress, Regions, Skip, StepReport};
use crate::RecordKind;
use crate::compact::{ArgumentPolicy, Log, Outcome};

/// Drops the oldest region, from the first legal cut at or after the pinned head to
/// the nearest legal cut that brings the log down to the goal's target (all the way
/// to the floors without a target, or when the target is out of reach), with no
/// summary: what nothing else could keep. It never goes past the last user message
/// that starts at a legal cut: the latest request always stays (with no such message
/// after the head, it never drops everything after the head). Every call id the region held (its calls
/// and the calls its summaries cover) is named in
/// [`StepReport::dropped_calls`]; pairs go whole, so pairing stays intact for what is
/// left. With no pinned head the region ends where a user message starts (or at the
/// end), so the retained log starts with one. Kept records ([`Payload::Kept`](crate::compact::Payload::Kept))
/// inside the region stay where they are, with the pair or message bound to them:
/// the stretches between them go ([`Log::around_kept`]), and the end moves on past
/// what they keep; with no pinned head, the user turn before a kept record at the
/// front stays too, so the log still starts with a user message.
///
/// **O(log n + r + k)** for a region of `r` records (a forward search of the prefix
/// sums, then the region read once for its ids) and `k` user turns looked at from the
/// end for the latest one starting at a legal cut (usually 1), plus the region
/// replacement.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Truncate {}

impl Truncate {
    /// Runs the strategy (see the type docs for what and the cost).
    ///
    /// # Errors
    /// [`NoProgress`] when no region lies between the pinned head and the floors
    /// (floors, calls in flight, nothing after the head). The log is then unchanged.
    pub fn run(&self, log: &mut Log, goal: &Goal) -> Result<StepReport, NoProgress> {
        let mut report = StepReport::new(Kind::Truncate, log);
        let total = log.tracker().total_tokens();
        if goal.reached(total) {
            return Ok(report.finish(log, goal));
        }
        let span = Regions::of(log, &goal.floors, Kind::Truncate)?;
        let t = log.tracker();
        let len = log.len();
        let starts_user = |c: usize| {
            span.head > 0
                || c == len
                || log
                    .entries()
                    .get(c)
                    .is_some_and(|e| matches!(e.record.kind(), RecordKind::User))
        };
        let base = t.tokens_before(span.head).unwrap_or(0);
        let tokens_of = |r: &std::ops::Range<usize>| {
            t.tokens_before(r.end)
                .zip(t.tokens_before(r.start))
                .map_or(0, |(e, s)| e.saturating_sub(s))
        };
        // The latest request stays: the region never goes past the last user message
        // after the head (a log truncated to nothing, or to its pinned head, answers
        // nobody).
        let last_request = (1..)
            .map_while(|k| log.turn_start_from_end(k).filter(|&c| c >= span.head))
            .find(|&c| t.is_legal_cut(c));
        // The region's end for `want` tokens dropped past the head, and whether the
        // latest request held it back.
        let end_for = |want: u64| -> (usize, bool) {
            let mut end = match goal.target_tokens {
                Some(_) => t
                    .select_legal_cut_forward(base.saturating_add(want), u64::MAX)
                    .map_or(span.end, |c| c.clamp(span.head, span.end)),
                None => span.end,
            };
            while end < span.end && !starts_user(end) {
                end = t
                    .legal_cut_at_or_after(end + 1)
                    .map_or(span.end, |c| c.min(span.end));
            }
            if !starts_user(end) {
                // Walk back to a user message start.
                let mut c = end;
                while c > span.head && !(starts_user(c) && t.is_legal_cut(c)) {
                    c -= 1;
                }
                end = c;
            }
            let held = last_request.is_some_and(|last_user| end > last_user);
            if let Some(last_user) = last_request {
                end = end.min(last_user);
            } else if end == len {
                end = span.head;
            }
            (end, held)
        };
        let need = goal.target_tokens.map_or(0, |target| total - target);
        let (mut end, mut held) = end_for(need);
        // Kept records inside stay: search again past them (a few rounds; each moves
        // the end forward).
        for _ in 0..8 {
            let region = span.head..end.max(span.head);
            let kept = tokens_of(&region)
                - log
                    .around_kept(region.start, region.end)
                    .iter()
                    .map(tokens_of)
                    .sum::<u64>();
            if kept == 0 || goal.target_tokens.is_none() {
                break;
            }
            let (next, next_held) = end_for(need.saturating_add(kept));
            if next <= end {
                break;
            }
            (end, held) = (next, next_held);
        }
        let mut left = LeftAlone::default();
        if end <= span.head {
            return Err(NoProgress::nothing_eligible(Kind::Truncate, log, left));
        }
        // What stopped the region short of the floors: the target, met; the latest
        // request, which stays; or the floors themselves, the region ending at the
        // last user turn that starts before them.
        if end < span.end {
            // What goes: the region but its kept records.
            let dropped: u64 = log.around_kept(span.head, end).iter().map(tokens_of).sum();
            let why = if dropped >= need {
                Skip::TargetMet
            } else if held {
                Skip::KeptRecent
            } else {
                Skip::Floor
            };
            left.add(why, 1);
        }
        // The region without its kept records (each stays where it is, with what is
        // bound to it), as stretches between legal cuts.
        let mut plans = Vec::new();
        for r in span.user_first(log, log.around_kept(span.head, end)) {
            let Ok(plan) = log.plan_region(r, ArgumentPolicy::Verbatim) else {
                return Err(NoProgress::nothing_eligible(Kind::Truncate, log, left));
            };
            plans.push(plan);
        }
        if plans.is_empty() {
            left.add(Skip::Pinned, 1);
            return Err(NoProgress::nothing_eligible(Kind::Truncate, log, left));
        }
        for plan in &plans {
            // The calls of the stretch (pairs are whole inside it) and those its
            // summaries cover. Results without their call in it (orphans, repeats) go
            // too, but name no call.
            report.dropped_calls.extend(plan.covered().cloned());
            report.dropped_turns += log
                .turn_starts_in(plan.region.start, plan.region.end)
                .count();
            report.edits.push(Edit::Removed {
                start: plan.region.start,
                end: plan.region.end,
            });
        }
        // Fresh plans between legal cuts, in order, disjoint, holding no kept record:
        // cannot be refused.
        let batch = plans.iter().map(|p| (p, Outcome::Removed)).collect();
        report.applied(log.apply_many(batch), log, goal, left)
    }
}
