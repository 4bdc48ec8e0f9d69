//! `summarize`: the oldest region becomes one summary, with a hook (sync or async) so
//! that a real model can write the prose; the ledger of every covered pair is always
//! kept.

use std::future::Future;

use super::{Blocked, Edit, Goal, Kind, LeftAlone, NoProgress, Regions, StepReport};
use crate::compact::{ArgumentPolicy, Log, Outcome, Plan, Unit, estimate_tokens};

/// What a summarizer is asked to summarize: the region's [`Plan`] (its pair atoms and
/// position) and the [`Unit`]s its ledger will list, on the log as it is.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct SummaryRequest<'a> {
    /// The log.
    pub log: &'a Log,
    /// The region.
    pub plan: &'a Plan,
    /// The ledger's units: every pair of the region, earlier summaries' units folded in.
    pub units: &'a [Unit],
}

/// A summarizer's answer: prose to put before the ledger (or none), and its tokens
/// (estimated from its length when `None`).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Prose {
    /// The prose.
    pub text: Option<String>,
    /// Its tokens, as the caller's tokenizer counts them.
    pub tokens: Option<u64>,
}

impl Prose {
    /// No prose: the summary is the ledger alone (what to answer when a model fails:
    /// the ledger is kept either way). **O(1)**.
    pub fn none() -> Self {
        Prose::default()
    }

    /// `text`, its tokens estimated. **O(1)**.
    pub fn text(text: impl Into<String>) -> Self {
        Prose {
            text: Some(text.into()),
            tokens: None,
        }
    }
}

/// Writes the prose of a summary, synchronously. Closures
/// `FnMut(&SummaryRequest) -> Prose` are summarizers.
pub trait Summarizer {
    /// The prose for `request`'s region.
    fn summarize(&mut self, request: &SummaryRequest<'_>) -> Prose;
}

impl<F: FnMut(&SummaryRequest<'_>) -> Prose> Summarizer for F {
    fn summarize(&mut self, request: &SummaryRequest<'_>) -> Prose {
        self(request)
    }
}

/// The default summarizer: no prose, the ledger only.
#[derive(Clone, Copy, Debug, Default)]
pub struct LedgerOnly;

impl Summarizer for LedgerOnly {
    fn summarize(&mut self, _: &SummaryRequest<'_>) -> Prose {
        Prose::none()
    }
}

/// Writes the prose of a summary asynchronously (a model call). The log is not
/// changed while the future runs: the region is applied when it resolves.
pub trait AsyncSummarizer {
    /// The prose for `request`'s region.
    fn summarize(&mut self, request: &SummaryRequest<'_>) -> impl Future<Output = Prose>;
}

impl AsyncSummarizer for LedgerOnly {
    async fn summarize(&mut self, _: &SummaryRequest<'_>) -> Prose {
        Prose::none()
    }
}

/// Summarizes the oldest region: from the first legal cut at or after the pinned head
/// to the legal cut that brings the log down to the goal's target (the nearest one
/// past it; all the way to the floors without a target, or when the target is out of
/// reach), as one [`RecordKind::Summary`](crate::RecordKind::Summary) record: the
/// summarizer's prose, then the ledger of every pair in the region (call id, tool,
/// arguments, status, first line of the result), earlier summaries folded in unit by
/// unit. What `cutpoint compact --target` does, with a hook. A summary whose prose
/// would make the log bigger is not applied ([`Blocked::NotSmaller`]).
///
/// **O(log n + r)** for a region of `r` records (a forward search of the prefix sums
/// for the target, then the region's atoms; re-searched a few times at most when the
/// ledger's own tokens push the log back over the target), plus the summarizer, plus
/// the region replacement ([`Log::apply`]).
#[derive(Clone, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Summarize {
    /// How the ledger writes arguments. Default verbatim.
    pub arguments: ArgumentPolicy,
}

/// A region chosen, waiting for its prose.
struct Prepared {
    plan: Plan,
    units: Vec<Unit>,
    ledger_tokens: u64,
}

impl Summarize {
    /// Writes the ledger's arguments under `policy`. **O(1)**.
    #[must_use]
    pub fn arguments(mut self, policy: ArgumentPolicy) -> Self {
        self.arguments = policy;
        self
    }

    /// Runs the strategy with the ledger only ([`LedgerOnly`]). Cost: see the type
    /// docs (**O(log n + r)** plus the region replacement).
    ///
    /// # Errors
    /// As [`run_with`](Summarize::run_with).
    pub fn run(&self, log: &mut Log, goal: &Goal) -> Result<StepReport, NoProgress> {
        self.run_with(log, goal, &mut LedgerOnly)
    }

    /// Runs the strategy, `summarizer` writing the prose (see the type docs).
    /// **O(log n + r)** plus the summarizer and the region replacement.
    ///
    /// # Errors
    /// [`NoProgress`] when no region lies between the pinned head and the floors
    /// (floors, calls in flight, nothing after the head) or the summary would not be
    /// smaller. The log is then unchanged.
    pub fn run_with(
        &self,
        log: &mut Log,
        goal: &Goal,
        summarizer: &mut dyn Summarizer,
    ) -> Result<StepReport, NoProgress> {
        let Some(prepared) = self.prepare(log, goal)? else {
            return Ok(StepReport::new(Kind::Summarize, log).finish(log, goal));
        };
        let prose = summarizer.summarize(&SummaryRequest {
            log,
            plan: &prepared.plan,
            units: &prepared.units,
        });
        Self::finish(log, goal, prepared, prose)
    }

    /// As [`run_with`](Summarize::run_with), awaiting an asynchronous summarizer.
    /// **O(log n + r)** plus the summarizer and the region replacement.
    ///
    /// # Errors
    /// As [`run_with`](Summarize::run_with).
    pub async fn run_async<S: AsyncSummarizer>(
        &self,
        log: &mut Log,
        goal: &Goal,
        summarizer: &mut S,
    ) -> Result<StepReport, NoProgress> {
        let Some(prepared) = self.prepare(log, goal)? else {
            return Ok(StepReport::new(Kind::Summarize, log).finish(log, goal));
        };
        let prose = summarizer
            .summarize(&SummaryRequest {
                log,
                plan: &prepared.plan,
                units: &prepared.units,
            })
            .await;
        Self::finish(log, goal, prepared, prose)
    }

    /// Chooses the region; `None` when the target is met already.
    fn prepare(&self, log: &Log, goal: &Goal) -> Result<Option<Prepared>, NoProgress> {
        let total = log.tracker().total_tokens();
        if goal.reached(total) {
            return Ok(None);
        }
        let span = Regions::of(log, &goal.floors, Kind::Summarize)?;
        let t = log.tracker();
        let base = t.tokens_before(span.head).unwrap_or(0);
        let first = t
            .legal_cut_at_or_after(span.head + 1)
            .map_or(span.end, |c| c.min(span.end));
        // A candidate region: its plan and its ledger's estimate, without the units
        // (an earlier summary folded in is read, not cloned, once per candidate).
        let plan_to = |end: usize| -> Option<(Plan, u64)> {
            let plan = log.plan_region(span.head..end, self.arguments).ok()?;
            let ledger_tokens = log.units_estimate(&plan);
            Some((plan, ledger_tokens))
        };
        let prepared = |(plan, ledger_tokens): (Plan, u64)| Prepared {
            units: log.units(&plan),
            plan,
            ledger_tokens,
        };
        let Some(target) = goal.target_tokens else {
            return Ok(plan_to(span.end).map(prepared));
        };
        let need = total - target;
        let mut want = need;
        // The summary's own tokens push the log back up: search again past them. Each
        // round moves the cut forward; a few rounds at most (a ledger is much smaller
        // than what it covers), then everything up to the floors.
        for _ in 0..8 {
            let cut = t
                .select_legal_cut_forward(base.saturating_add(want), u64::MAX)
                .map_or(span.end, |c| c.clamp(first, span.end));
            let Some((plan, ledger_tokens)) = plan_to(cut) else {
                break;
            };
            let saved = plan.region_tokens.saturating_sub(ledger_tokens);
            if saved >= need || cut == span.end {
                return Ok(Some(prepared((plan, ledger_tokens))));
            }
            want = need + ledger_tokens;
        }
        Ok(plan_to(span.end).map(prepared))
    }

    /// Applies the region with its prose.
    fn finish(
        log: &mut Log,
        goal: &Goal,
        prepared: Prepared,
        prose: Prose,
    ) -> Result<StepReport, NoProgress> {
        let mut report = StepReport::new(Kind::Summarize, log);
        let total = log.tracker().total_tokens();
        let prose_tokens = prose
            .tokens
            .unwrap_or_else(|| prose.text.as_deref().map_or(0, estimate_tokens));
        let tokens = prepared.ledger_tokens.saturating_add(prose_tokens);
        let after = (total - prepared.plan.region_tokens).saturating_add(tokens);
        if after >= total {
            return Err(NoProgress::new(
                Kind::Summarize,
                Blocked::NotSmaller {
                    before: total,
                    after,
                },
                log,
                LeftAlone::default(),
            ));
        }
        let region = prepared.plan.region.clone();
        report.dropped_turns = log.turn_starts_in(region.start, region.end).count();
        report.summaries = 1;
        report.summarized_calls = prepared.units.len();
        report.edits.push(Edit::Replaced {
            start: region.start,
            end: region.end,
        });
        let outcome = Outcome::Summary {
            text: prose.text,
            tokens,
        };
        // A fresh plan between legal cuts (the summarizer had no way to change the log)
        // that shrinks the log: cannot be refused.
        report.applied(
            log.apply_many(vec![(&prepared.plan, outcome)]),
            log,
            goal,
            LeftAlone::default(),
        )
    }
}
