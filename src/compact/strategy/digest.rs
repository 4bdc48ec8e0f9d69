//! `digest`: each old tool group becomes one ledger message (the Agent Framework's
//! tool-result collapse), without losing a call id or an argument.

use super::{Blocked, Edit, Goal, Kind, LeftAlone, NoProgress, Regions, Skip, StepReport};
use crate::RecordKind;
use crate::compact::{ArgumentPolicy, Log, Outcome, Payload, estimate_summary_tokens};

/// Collapses old tool groups, oldest first, until the goal's target is met: each
/// becomes one summary record whose ledger keeps, per call, its id, tool name,
/// arguments (verbatim; a string field longer than
/// [`max_argument_chars`](Digest::max_argument_chars) is shortened with a hash of its
/// full value, see [`ArgumentPolicy::ShortenWithHash`]; commands, paths and queries
/// never are), status and the first line of its result. Written by the one ledger
/// renderer ([`summary_text`](crate::compact::summary_text)) as a
/// [`RecordKind::Summary`] record, so every call stays accounted for.
///
/// What is digested: each stretch between two consecutive legal cuts, from the pinned
/// head to the floors, that holds a `tool_use` and only assistant records, calls and
/// results: one tool group, or overlapping ones taken together. A stretch holding user
/// input or a summary is left alone ([`Skip::HoldsUserInput`]), and so is one whose
/// digest would not be smaller ([`Skip::NotSmaller`]: the Agent Framework's collapse
/// can grow a log, agent-framework #7393). The assistant text inside a group goes with
/// it. A digest holds no tool group, so a digest of a digest changes nothing.
///
/// **O(r)** for the `r` records from the pinned head to the floors (one pass over the
/// legal cuts and the records between them, each group's size from the prefix sums in
/// **O(1)**), plus one batched region replacement for all groups
/// ([`Log::apply_many`]): never one pass per group.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Digest {
    /// The longest string argument field kept whole. Default 200.
    pub max_argument_chars: usize,
}

impl Default for Digest {
    fn default() -> Self {
        Digest {
            max_argument_chars: 200,
        }
    }
}

impl Digest {
    /// Shortens string argument fields past `chars` (with a hash). **O(1)**.
    #[must_use]
    pub fn max_argument_chars(mut self, chars: usize) -> Self {
        self.max_argument_chars = chars;
        self
    }

    /// Runs the strategy (see the type docs for what and the cost).
    ///
    /// # Errors
    /// [`NoProgress`] when no old tool group can be digested smaller (floors, calls in
    /// flight, nothing eligible). The log is then unchanged.
    pub fn run(&self, log: &mut Log, goal: &Goal) -> Result<StepReport, NoProgress> {
        self.run_sized(log, goal, |_| None)
    }

    /// [`run`](Self::run), each digest counted by `written` where it answers (a
    /// provider transcript's route:
    /// [`Summarizer::written_tokens`](super::Summarizer::written_tokens)), else by the
    /// estimate. Same cost, plus the sizing.
    pub(crate) fn run_sized(
        &self,
        log: &mut Log,
        goal: &Goal,
        mut written: impl FnMut(&Payload) -> Option<u64>,
    ) -> Result<StepReport, NoProgress> {
        let mut report = StepReport::new(Kind::Digest, log);
        let total = log.tracker().total_tokens();
        if goal.reached(total) {
            return Ok(report.finish(log, goal));
        }
        let span = Regions::of(log, &goal.floors, Kind::Digest)?;
        let policy = ArgumentPolicy::ShortenWithHash {
            max_chars: self.max_argument_chars,
        };
        let t = log.tracker();
        let mut left = LeftAlone::default();
        let mut plans = Vec::new();
        let mut saved: u64 = 0;
        let mut a = span.head;
        while a < span.end {
            let Some(b) = t.legal_cut_at_or_after(a + 1).filter(|&b| b <= span.end) else {
                break;
            };
            let mut calls = 0;
            let mut user = false;
            for e in log.entries().range(a..b) {
                match e.record.kind() {
                    RecordKind::ToolUse(_) => calls += 1,
                    RecordKind::Assistant | RecordKind::ToolResult(_) => {}
                    _ => user = true,
                }
            }
            if calls > 0 {
                if log.kept_in(a..b).is_some() {
                    left.add(Skip::Pinned, 1);
                } else if user {
                    left.add(Skip::HoldsUserInput, 1);
                } else if goal.reached(total - saved) {
                    left.add(Skip::TargetMet, 1);
                } else {
                    // Both ends are legal cuts in range: the plan is always made.
                    if let Ok(plan) = log.plan_region(a..b, policy) {
                        let units = log.units(&plan);
                        let tokens = written(&log.summary_payload(&plan, None))
                            .unwrap_or_else(|| estimate_summary_tokens(None, &units));
                        if tokens < plan.region_tokens {
                            saved += plan.region_tokens - tokens;
                            plans.push((plan, tokens, units.len()));
                        } else {
                            left.add(Skip::NotSmaller, 1);
                        }
                    }
                }
            }
            a = b;
        }
        let floor_groups = log.tool_group_count()
            - log
                .structure
                .groups
                .index_at_or_after(span.recent.min(log.len()));
        left.add(Skip::Floor, floor_groups);
        if plans.is_empty() {
            let by_floors = floor_groups > 0 && left.count(Skip::NotSmaller) == 0;
            let reason = Blocked::by_floors(by_floors.then_some(span.recent));
            return Err(NoProgress::new(Kind::Digest, reason, log, left));
        }
        for (plan, _, covered) in &plans {
            report.summaries += 1;
            report.summarized_calls += covered;
            report.edits.push(Edit::Replaced {
                start: plan.region.start,
                end: plan.region.end,
            });
        }
        let batch = plans
            .iter()
            .map(|(plan, tokens, _)| {
                (
                    plan,
                    Outcome::Summary {
                        text: None,
                        tokens: *tokens,
                    },
                )
            })
            .collect();
        // Fresh plans, in order, disjoint, between legal cuts, shrinking the log: the
        // batch cannot be refused.
        report.applied(log.apply_many(batch), log, goal, left)
    }
}
