//! `slide`: a sliding window over whole user turns (the Agent Framework's and ADK's
//! sliding window), the calls of the dropped turns kept in a ledger.

use super::{Blocked, Edit, Goal, Kind, LeftAlone, NoProgress, Regions, Skip, StepReport};
use crate::compact::{ArgumentPolicy, Log, Outcome, Payload, estimate_summary_tokens};

/// Drops whole oldest user turns, as few as bring the log down to the goal's target
/// (all it may without one), always keeping at least
/// [`keep_turns`](Slide::keep_turns) turns. The region runs from the first legal cut
/// at or after the pinned head to the start of a user turn, so the retained log goes
/// on with a user message. Its calls are not lost: when it holds any, it becomes a
/// ledger (a summary record with no prose listing every pair, earlier summaries
/// folded in); when it holds none, it is removed.
///
/// Kept records ([`Payload::Kept`](crate::compact::Payload::Kept)) in the region stay
/// where they are, with the pair or turn bound to them: each stretch between them
/// becomes a ledger of its own or is removed ([`Log::around_kept`]); a stretch whose
/// ledger would outweigh it stays as it is; with no pinned head, the user turn
/// before a kept record at the front stays too, so the log goes on with a user
/// message.
///
/// **O(log n + t + r)** for `t` turn starts and `r` records up to the turn chosen (the
/// turn starts come from the log's shape, each region's size from the prefix sums),
/// plus the region replacement; **O(r log t)** when kept records lie in the region.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Slide {
    /// The most recent user turns always kept. Default 1.
    pub keep_turns: usize,
}

/// A stretch of a slide: its plan, what it becomes, that outcome's tokens and the
/// units of its ledger.
type Stretch = (crate::compact::Plan, Outcome, u64, usize);

impl Default for Slide {
    fn default() -> Self {
        Slide { keep_turns: 1 }
    }
}

impl Slide {
    /// Keeps at least the last `turns` turns. **O(1)**.
    #[must_use]
    pub fn keep_turns(mut self, turns: usize) -> Self {
        self.keep_turns = turns;
        self
    }

    /// Runs the strategy (see the type docs for what and the cost).
    ///
    /// # Errors
    /// [`NoProgress`] when no whole turn can go (floors, `keep_turns`, calls in
    /// flight, nothing after the head). The log is then unchanged.
    pub fn run(&self, log: &mut Log, goal: &Goal) -> Result<StepReport, NoProgress> {
        self.run_sized(log, goal, |_| None)
    }

    /// [`run`](Self::run), the chosen stretches' ledgers counted by `written` where it
    /// answers (a provider transcript's route:
    /// [`Summarizer::written_tokens`](super::Summarizer::written_tokens)), else by the
    /// estimate. How far to slide is chosen by the estimate, then moved one turn on
    /// while the ledgers as written still leave the log over the target. Same cost,
    /// plus one sizing per turn tried (one, or a few when the estimate is far off).
    pub(crate) fn run_sized(
        &self,
        log: &mut Log,
        goal: &Goal,
        mut written: impl FnMut(&Payload) -> Option<u64>,
    ) -> Result<StepReport, NoProgress> {
        let mut report = StepReport::new(Kind::Slide, log);
        let total = log.tracker().total_tokens();
        if goal.reached(total) {
            return Ok(report.finish(log, goal));
        }
        let span = Regions::of(log, &goal.floors, Kind::Slide)?;
        let mut left = LeftAlone::default();
        // The latest turn start a region may end at: keep `keep_turns` turns.
        let keep_from = match self.keep_turns {
            0 => log.len(),
            k => log.turn_start_from_end(k).unwrap_or(0),
        };
        left.add(Skip::KeptRecent, self.keep_turns.min(log.turn_count()));
        let t = log.tracker();
        let last = keep_from.min(span.end);
        let candidates: Vec<usize> = log
            .turn_starts_in(span.head + 1, last + 1)
            .filter(|&c| t.is_legal_cut(c))
            .collect();
        let Some(&furthest) = candidates.last() else {
            let by_floors = keep_from < span.end || log.turn_count() <= self.keep_turns;
            left.add(Skip::Floor, usize::from(by_floors));
            let reason = Blocked::by_floors(by_floors.then_some(keep_from.min(span.recent)));
            return Err(NoProgress::new(Kind::Slide, reason, log, left));
        };
        // The stretches of `head..c` between kept records (one when it holds none),
        // each with its plan, what it becomes, that outcome's tokens and its units.
        let stretches = |c: usize| -> Option<Vec<Stretch>> {
            let mut out = Vec::new();
            for r in span.user_first(log, log.around_kept(span.head, c)) {
                let plan = log.plan_region(r, ArgumentPolicy::Verbatim).ok()?;
                let units = log.units(&plan);
                let (outcome, tokens) = if units.is_empty() {
                    (Outcome::Removed, 0)
                } else {
                    let tokens = estimate_summary_tokens(None, &units);
                    (Outcome::Summary { text: None, tokens }, tokens)
                };
                out.push((plan, outcome, tokens, units.len()));
            }
            Some(out)
        };
        let size_after = |plans: &[Stretch]| {
            plans
                .iter()
                .fold(total, |a, (p, _, tokens, _)| a - p.region_tokens + tokens)
        };
        let mut chosen = furthest;
        if log.kept_in(span.head..furthest).is_some() {
            // Kept records in the stretch: candidates' stretches planned, bisecting
            // for an early candidate that meets the target (the size after falls
            // with the candidate but for a ledger's growth, so this is the earliest
            // one or close to it). **O(r log c)** for `c` candidates, only on logs
            // with walls.
            if let Some(target) = goal.target_tokens {
                let meets =
                    |i: usize| stretches(candidates[i]).is_some_and(|p| size_after(&p) <= target);
                let (mut lo, mut hi) = (0, candidates.len() - 1);
                if meets(hi) {
                    while lo < hi {
                        let mid = lo + (hi - lo) / 2;
                        if meets(mid) {
                            hi = mid;
                        } else {
                            lo = mid + 1;
                        }
                    }
                    chosen = candidates[hi];
                }
            }
        } else if let Some(target) = goal.target_tokens {
            // The ledger of the whole stretch once; each candidate's ledger is a prefix
            // of it (units come in atom order, atoms in log order).
            let Ok(plan) = log.plan_region(span.head..furthest, ArgumentPolicy::Verbatim) else {
                return Err(NoProgress::nothing_eligible(Kind::Slide, log, left));
            };
            let base = t.tokens_before(span.head).unwrap_or(0);
            let units = log.units(&plan);
            // Units before each position: atoms sorted by position, one unit per pair,
            // a folded summary's units at its position.
            let mut firsts: Vec<usize> = Vec::with_capacity(units.len());
            for atom in &plan.atoms {
                match atom {
                    crate::compact::Atom::Pair {
                        use_at, result_at, ..
                    } => firsts.push(*use_at.max(result_at)),
                    crate::compact::Atom::Summary { at, covered } => {
                        firsts.extend(std::iter::repeat_n(*at, covered.len()));
                    }
                    _ => {}
                }
            }
            for &c in &candidates {
                let k = firsts.partition_point(|&p| p < c).min(units.len());
                let ledger = if k == 0 {
                    0
                } else {
                    estimate_summary_tokens(None, &units[..k])
                };
                let dropped = t.tokens_before(c).unwrap_or(0) - base;
                if total - dropped + ledger <= target {
                    chosen = c;
                    break;
                }
            }
        }
        // The chosen stretches' ledgers as they will be written, where the summarizer
        // knows, and whether it did. The estimate chose the candidate; sized as
        // written, the log may still be over the target, and the next candidate is
        // tried (usually none or one), the last that could be planned kept.
        let mut sized_at = |c: usize| -> Option<(Vec<Stretch>, bool)> {
            let mut plans = stretches(c).filter(|p| !p.is_empty())?;
            let mut sized = false;
            for (plan, outcome, tokens, _) in &mut plans {
                if let Outcome::Summary { tokens: t, .. } = outcome {
                    if let Some(n) = written(&log.summary_payload(plan, None)) {
                        (*t, *tokens, sized) = (n, n, true);
                    }
                }
            }
            Some((plans, sized))
        };
        let mut at = candidates.iter().position(|&c| c == chosen).unwrap_or(0);
        let Some((mut plans, sized)) = sized_at(candidates[at]) else {
            let walled = log.kept_in(span.head..candidates[at]).is_some();
            left.add(Skip::Pinned, usize::from(walled));
            return Err(NoProgress::nothing_eligible(Kind::Slide, log, left));
        };
        let over = |p: &[Stretch]| goal.target_tokens.is_some_and(|t| size_after(p) > t);
        while sized && over(&plans) && at + 1 < candidates.len() {
            let Some((next, _)) = sized_at(candidates[at + 1]) else {
                break;
            };
            (plans, at) = (next, at + 1);
        }
        left.add(Skip::TargetMet, candidates.len() - 1 - at);
        let after = size_after(&plans);
        // A ledger no smaller than its stretch: beside a wall that stretch stays as it
        // is; with nothing else to drop, the step is refused.
        plans.retain(|(p, o, tokens, _)| {
            !(matches!(o, Outcome::Summary { .. }) && *tokens >= p.region_tokens)
        });
        if plans.is_empty() {
            return Err(NoProgress::new(
                Kind::Slide,
                Blocked::NotSmaller {
                    before: total,
                    after,
                },
                log,
                left,
            ));
        }
        for (plan, outcome, _, units) in &plans {
            let (start, end) = (plan.region.start, plan.region.end);
            report.dropped_turns += log.turn_starts_in(start, end).count();
            match outcome {
                Outcome::Removed => report.edits.push(Edit::Removed { start, end }),
                _ => {
                    report.summaries += 1;
                    report.summarized_calls += units;
                    report.edits.push(Edit::Replaced { start, end });
                }
            }
        }
        // Fresh plans between legal cuts, in order, disjoint, holding no kept record,
        // each shrinking the log: cannot be refused.
        let batch = plans.iter().map(|(p, o, _, _)| (p, o.clone())).collect();
        report.applied(log.apply_many(batch), log, goal, left)
    }
}
