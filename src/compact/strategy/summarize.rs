//! `summarize`: the oldest region becomes one summary, with a hook (sync or async) so
//! that a real model can write the prose; the ledger of every covered pair is always
//! kept.

use std::future::Future;

use super::{Blocked, Edit, Goal, Kind, LeftAlone, NoProgress, Regions, StepReport};
use crate::compact::{ArgumentPolicy, Log, Outcome, Payload, Plan, Unit, estimate_tokens};

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

    /// What `summary` (the [`Payload::Summary`](crate::compact::Payload::Summary) a
    /// strategy is about to write: a summary, or a digest) counts once written and
    /// read back, where that is known. A provider transcript's route
    /// ([`Loaded::run`](crate::format::Loaded::run)) wraps the caller's summarizer to
    /// say it (the summary message in the transcript's shape, read with its counter),
    /// and [`Summarize`], [`Digest`](super::Digest) and [`Slide`](super::Slide) count
    /// by it instead of their estimate, so their step's count is the output's. `None`
    /// (the default): the estimate. **O(len)** of the summary where answered.
    fn written_tokens(&mut self, summary: &crate::compact::Payload) -> Option<u64> {
        let _ = summary;
        None
    }
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
/// would make the log bigger is not applied ([`Blocked::NotSmaller`]). Kept records
/// ([`Payload::Kept`](crate::compact::Payload::Kept)) in the region stay where they are: each stretch between them
/// becomes a summary of its own ([`Log::around_kept`]), the summarizer called once
/// per stretch.
///
/// **O(log n + r)** for a region of `r` records (a forward search of the prefix sums
/// for the target, then the region's atoms; re-searched a few times at most when the
/// ledger's own tokens push the log back over the target), plus the summarizer, plus
/// the region replacement ([`Log::apply`]). On a provider transcript's route each
/// candidate's ledger is also written and counted
/// ([`Summarizer::written_tokens`]): **O(r)** more per search.
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
        let sized = |p: &Payload| summarizer.written_tokens(p);
        let Some(prepared) = self.prepare(log, goal, sized)? else {
            return Ok(StepReport::new(Kind::Summarize, log).finish(log, goal));
        };
        let proses: Vec<Prose> = prepared
            .iter()
            .map(|p| {
                summarizer.summarize(&SummaryRequest {
                    log,
                    plan: &p.plan,
                    units: &p.units,
                })
            })
            .collect();
        let written = prepared
            .iter()
            .zip(&proses)
            .map(|(p, prose)| {
                summarizer.written_tokens(&log.summary_payload(&p.plan, prose.text.clone()))
            })
            .collect();
        Self::finish(log, goal, prepared, proses, written)
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
        let Some(prepared) = self.prepare(log, goal, |_| None)? else {
            return Ok(StepReport::new(Kind::Summarize, log).finish(log, goal));
        };
        let mut proses = Vec::with_capacity(prepared.len());
        for p in &prepared {
            proses.push(
                summarizer
                    .summarize(&SummaryRequest {
                        log,
                        plan: &p.plan,
                        units: &p.units,
                    })
                    .await,
            );
        }
        let written = vec![None; proses.len()];
        Self::finish(log, goal, prepared, proses, written)
    }

    /// Chooses the region, as its stretches between kept records (one when it holds
    /// none), each ledger counted as `written` says it will be written (the ledger
    /// alone, before any prose), else by the estimate; `None` when the target is met
    /// already.
    fn prepare(
        &self,
        log: &Log,
        goal: &Goal,
        mut written: impl FnMut(&Payload) -> Option<u64>,
    ) -> Result<Option<Vec<Prepared>>, NoProgress> {
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
        // A candidate region: its plan and its ledger's size: as written where
        // `written` says, else the estimate, without the units (an earlier summary
        // folded in is read, not cloned, once per candidate). Each stretch between
        // kept records is a region of its own ([`Log::around_kept`]).
        let mut plan_to = |end: usize| -> Option<Vec<(Plan, u64)>> {
            let walled = log.kept_in(span.head..end).is_some();
            let mut plans = Vec::new();
            for r in log.around_kept(span.head, end) {
                let plan = log.plan_region(r, self.arguments).ok()?;
                let ledger_tokens = written(&log.summary_payload(&plan, None))
                    .unwrap_or_else(|| log.units_estimate(&plan));
                // Beside a wall, a stretch its ledger would outweigh stays as it is.
                if walled && ledger_tokens >= plan.region_tokens {
                    continue;
                }
                plans.push((plan, ledger_tokens));
            }
            (!plans.is_empty()).then_some(plans)
        };
        let prepared = |plans: Vec<(Plan, u64)>| {
            plans
                .into_iter()
                .map(|(plan, ledger_tokens)| Prepared {
                    units: log.units(&plan),
                    plan,
                    ledger_tokens,
                })
                .collect()
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
            let Some(plans) = plan_to(cut) else {
                break;
            };
            let (region_tokens, ledger_tokens) = plans
                .iter()
                .fold((0u64, 0u64), |(r, l), (p, t)| (r + p.region_tokens, l + t));
            let saved = region_tokens.saturating_sub(ledger_tokens);
            if saved >= need || cut == span.end {
                return Ok(Some(prepared(plans)));
            }
            // What the kept records in the region hold is not saved either.
            let kept = t.tokens_before(cut).unwrap_or(0) - base - region_tokens;
            want = need + ledger_tokens + kept;
        }
        Ok(plan_to(span.end).map(prepared))
    }

    /// Applies the prepared regions with their prose; `written[i]`, where known, is
    /// what summary `i` counts as written ([`Summarizer::written_tokens`]), else the
    /// ledger's estimate plus the prose's.
    fn finish(
        log: &mut Log,
        goal: &Goal,
        prepared: Vec<Prepared>,
        proses: Vec<Prose>,
        written: Vec<Option<u64>>,
    ) -> Result<StepReport, NoProgress> {
        let mut report = StepReport::new(Kind::Summarize, log);
        let total = log.tracker().total_tokens();
        let mut after = total;
        let mut batch = Vec::with_capacity(prepared.len());
        for ((p, prose), written) in prepared.iter().zip(proses).zip(written) {
            let tokens = written.unwrap_or_else(|| {
                let prose_tokens = prose
                    .tokens
                    .unwrap_or_else(|| prose.text.as_deref().map_or(0, estimate_tokens));
                p.ledger_tokens.saturating_add(prose_tokens)
            });
            after = (after - p.plan.region_tokens).saturating_add(tokens);
            let region = p.plan.region.clone();
            report.dropped_turns += log.turn_starts_in(region.start, region.end).count();
            report.summaries += 1;
            report.summarized_calls += p.units.len();
            report.edits.push(Edit::Replaced {
                start: region.start,
                end: region.end,
            });
            let outcome = Outcome::Summary {
                text: prose.text,
                tokens,
            };
            batch.push((&p.plan, outcome));
        }
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
        // Fresh plans between legal cuts, in order, disjoint, holding no kept record
        // (the summarizer had no way to change the log), that shrink the log: cannot
        // be refused.
        report.applied(log.apply_many(batch), log, goal, LeftAlone::default())
    }
}
