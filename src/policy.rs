//! The trigger policy: the small object an agent loop consults after each event to
//! learn whether to compact now, where, or what to wait for.
//!
//! ```text
//!   total < threshold ───────────────────────────────▶ Nothing
//!   legal cut in the seed's window, past the head ───▶ CompactNow(head..cut)
//!   else a legal cut past the target already exists ─▶ CompactNow(head..cut), past_target
//!   else ────────────────────────────────────────────▶ Wait { waiting_on, resume_at }
//!                                                         │
//!                   Shared::legal_cut_ready(resume_at) ◀──┘ then decide again
//! ```
//!
//! Waiting follows the seed: when no legal cut lies within the lookback, compaction
//! waits for the next safe point rather than forcing an illegal cut. The next safe point
//! is the first legal cut past the target, which mid-turn appears the moment the last
//! pending result lands (cuts that are illegal now never become legal later; only new
//! ones appear). At that point the policy compacts past its target: more than asked,
//! never less than safe.
//!
//! [`TriggerPolicy::plan`] answers the same over a compaction [`Log`], with the
//! [`Plan`] for the cut (region, pair atoms, retained tail) ready for
//! [`Log::apply`](crate::compact::Log::apply).
//!
//! The policy is sans-IO and cheap: [`TriggerPolicy::decide`] is **O(log n)**, plus
//! **O(k log k)** over the `k` pending calls when it defers; [`TriggerPolicy::plan`]
//! adds **O(r)** for a region of `r` records.
//!
//! [`Compactor`] runs a whole [pipeline](crate::compact::pipeline) of strategies the
//! same way, after each event: it remembers the passes that made no progress and does
//! not run them again until the log changes, and it closes calls whose tool died
//! (pending longer than an age in records, or in the caller's clock) with a
//! synthesized "aborted" result, so that one dead tool never freezes compaction.

use std::fmt;

use crate::compact::pipeline::{Pipeline, PipelineReport, Progress};
use crate::compact::strategy::{AsyncSummarizer, LedgerOnly, Summarizer};
use crate::compact::{Age, ArgumentPolicy, Log, Plan, StaleCall};
use crate::{AppendError, CallId, Tracker};

/// When and where to compact, as fractions of a context budget.
///
/// - **threshold**: compact once the log holds at least `threshold × budget` tokens
///   (default 0.8);
/// - **keep**: aim to keep about `keep × budget` of the newest tokens raw (default 0.4;
///   keep it well below the threshold, or every event triggers again);
/// - **lookback**: how far before its target the cut may fall, the seed's lookback
///   (default 0.15, the seed's "15% of budget");
/// - **pinned head**: the first records (system prompt, task) are never compacted; the
///   compacted region starts at the first legal cut at or after them (default 0).
///
/// ```
/// use cutpoint::policy::{Decision, TriggerPolicy};
/// use cutpoint::{Record, Tracker};
/// let policy = TriggerPolicy::new(10_000)
///     .threshold(0.5)?
///     .keep(0.2)?
///     .lookback(0.5)?
///     .pinned_head(1);
/// let mut t = Tracker::new();
/// t.append(Record::user(1_000))?; // the task: pinned
/// t.append(Record::assistant(500))?;
/// assert_eq!(policy.decide(&t), Decision::Nothing);
/// t.append(Record::tool_use("toolu_1", 50))?;
/// t.append(Record::tool_result("toolu_1", 4_000))?;
/// let Decision::CompactNow(plan) = policy.decide(&t) else { panic!() };
/// assert_eq!((plan.head, plan.cut), (1, 2)); // never inside the pair
/// // A call in flight and a big result of another: wait for the call.
/// t.append(Record::tool_use("toolu_2", 50))?;
/// t.append(Record::tool_use("toolu_3", 50))?;
/// t.append(Record::tool_result("toolu_3", 9_000))?;
/// let policy = policy.lookback(0.1)?;
/// let Decision::Wait(wait) = policy.decide(&t) else { panic!() };
/// assert_eq!(wait.waiting_on, ["toolu_2"]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct TriggerPolicy {
    budget_tokens: u64,
    threshold: f64,
    keep: f64,
    lookback: f64,
    pinned_head: usize,
    arguments: ArgumentPolicy,
}

/// A fraction given to [`TriggerPolicy`] outside `0.0..=1.0` (or not a number).
#[derive(Clone, Copy, PartialEq, Debug, thiserror::Error)]
#[non_exhaustive]
#[error("policy {name} must be a fraction of the budget in 0.0..=1.0, got {value}")]
pub struct PolicyError {
    /// `threshold`, `keep` or `lookback`.
    pub name: &'static str,
    /// The value refused.
    pub value: f64,
}

/// What the agent loop should do now.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Decision {
    /// The log is under the threshold.
    Nothing,
    /// Compact records `head..cut` now; both cuts are legal.
    CompactNow(PlannedCut),
    /// Over the threshold, but no legal cut is usable yet: wait, then decide again.
    Wait(Wait),
}

/// What the agent loop should do now, with the compaction plan ready:
/// [`TriggerPolicy::plan`]'s answer.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Planned {
    /// The log is under the threshold.
    Nothing,
    /// Compact now: `plan` names the region `cut.head..cut.cut`, its pair atoms (for
    /// the summarizer) and where the retained tail starts; hand it to
    /// [`Log::apply`](crate::compact::Log::apply).
    CompactNow {
        /// Where, and why there (tokens, whether past the target).
        cut: PlannedCut,
        /// The region as the compaction layer applies it.
        plan: Plan,
    },
    /// Over the threshold, but no legal cut is usable yet: wait, then plan again.
    Wait(Wait),
}

/// Where to compact: records `head..cut` go into a summary, `..head` (pinned) and
/// `cut..` stay raw. Both `head` and `cut` are legal cuts, so no pair straddles either.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct PlannedCut {
    /// The first record compacted: the first legal cut at or after the pinned head.
    pub head: usize,
    /// The first record kept.
    pub cut: usize,
    /// Tokens of records `head..cut`.
    pub compacted_tokens: u64,
    /// Tokens of the log as it is now.
    pub total_tokens: u64,
    /// The cut lies past the token target: no legal cut was within the lookback, and
    /// this is the next safe point after it.
    pub past_target: bool,
}

/// Why the policy waits, and for what.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Wait {
    /// Why.
    pub reason: WaitReason,
    /// The calls in flight, in log order: every one must land before a new legal cut
    /// can appear (a legal cut past the log's end needs all of them answered).
    pub waiting_on: Vec<CallId>,
    /// Wait for a legal cut at or after this position (with the `stream` feature,
    /// `stream::Shared::legal_cut_ready`), then decide again. None exists when the
    /// policy waits.
    pub resume_at: usize,
    /// Tokens of the log as it is now.
    pub total_tokens: u64,
}

/// Why a [`Wait`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum WaitReason {
    /// Tool calls are in flight: every cut near the target would split a pair.
    CallsInFlight,
    /// The last record (at this position) is still streaming.
    RecordOpen {
        /// Position of the open record.
        at: usize,
    },
    /// Nothing lies between the pinned head and the end of the log; more records are
    /// needed.
    NothingAfterHead,
    /// Every stretch the cut would compact is bound to a kept record (at this
    /// position: a control item, a block that loaded a tool) that no summary may
    /// cover or move across; only [`TriggerPolicy::plan`] sees kept records.
    Kept {
        /// Position of the first kept record in the region.
        at: usize,
    },
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            WaitReason::CallsInFlight => f.write_str("calls in flight")?,
            WaitReason::RecordOpen { at } => write!(f, "record {at} still streaming")?,
            WaitReason::NothingAfterHead => f.write_str("nothing after the pinned head")?,
            WaitReason::Kept { at } => write!(
                f,
                "every record the cut would compact is bound to kept record {at}"
            )?,
        }
        crate::core::error::write_ids(f, ", waiting on ", &self.waiting_on)?;
        write!(f, "; resumes at the first legal cut >= {}", self.resume_at)
    }
}

fn fraction(name: &'static str, value: f64) -> Result<f64, PolicyError> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(PolicyError { name, value })
    }
}

impl TriggerPolicy {
    /// A policy for a context of `budget_tokens`, with the defaults above. **O(1)**.
    pub fn new(budget_tokens: u64) -> Self {
        TriggerPolicy {
            budget_tokens,
            threshold: 0.8,
            keep: 0.4,
            lookback: 0.15,
            pinned_head: 0,
            arguments: ArgumentPolicy::Verbatim,
        }
    }

    /// Compact once the log holds `fraction × budget` tokens. **O(1)**.
    ///
    /// # Errors
    /// [`PolicyError`] unless `0.0 <= fraction <= 1.0`.
    pub fn threshold(mut self, fraction_of_budget: f64) -> Result<Self, PolicyError> {
        self.threshold = fraction("threshold", fraction_of_budget)?;
        Ok(self)
    }

    /// Keep about `fraction × budget` of the newest tokens raw. **O(1)**.
    ///
    /// # Errors
    /// [`PolicyError`] unless `0.0 <= fraction <= 1.0`.
    pub fn keep(mut self, fraction_of_budget: f64) -> Result<Self, PolicyError> {
        self.keep = fraction("keep", fraction_of_budget)?;
        Ok(self)
    }

    /// Let the cut fall up to `fraction × budget` tokens before its target. **O(1)**.
    ///
    /// # Errors
    /// [`PolicyError`] unless `0.0 <= fraction <= 1.0`.
    pub fn lookback(mut self, fraction_of_budget: f64) -> Result<Self, PolicyError> {
        self.lookback = fraction("lookback", fraction_of_budget)?;
        Ok(self)
    }

    /// Never compact the first `records` records. **O(1)**.
    #[must_use]
    pub fn pinned_head(mut self, records: usize) -> Self {
        self.pinned_head = records;
        self
    }

    /// How [`plan`](TriggerPolicy::plan)'s summaries write arguments (default
    /// verbatim). **O(1)**.
    #[must_use]
    pub fn arguments(mut self, arguments: ArgumentPolicy) -> Self {
        self.arguments = arguments;
        self
    }

    /// The context budget. **O(1)**.
    pub fn budget_tokens(&self) -> u64 {
        self.budget_tokens
    }

    fn tokens(&self, fraction: f64) -> u64 {
        // Budgets are far below 2^53, where f64 is exact; `as` saturates beyond.
        (self.budget_tokens as f64 * fraction).round() as u64
    }

    /// The log size at which the policy fires. **O(1)**.
    pub fn threshold_tokens(&self) -> u64 {
        self.tokens(self.threshold)
    }

    /// Decides what the loop should do with the log as `tracker` holds it now.
    /// **O(log n)**, plus **O(k log k)** over the `k` pending calls when it defers.
    ///
    /// Guarantees, checked by `tests/it/policy.rs`: a [`PlannedCut`]'s `head` and `cut` are
    /// legal cuts with `head < cut`; a [`Wait`] comes only when no legal cut at or
    /// after its `resume_at` exists (so waiting for one never resolves at once), and
    /// never when the log's end is a legal cut past the head.
    pub fn decide(&self, tracker: &Tracker) -> Decision {
        let total = tracker.total_tokens();
        if total < self.threshold_tokens() {
            return Decision::Nothing;
        }
        let len = tracker.len();
        let pinned = self.pinned_head.min(len);
        let Some(head) = tracker.legal_cut_at_or_after(pinned) else {
            return Decision::Wait(self.wait(tracker, pinned + 1));
        };
        let plan = |cut: usize, past_target: bool| {
            // Both are legal cuts, so `<= len`, and tokens_before answers.
            let before = |c: usize| tracker.tokens_before(c).unwrap_or(total);
            Decision::CompactNow(PlannedCut {
                head,
                cut,
                compacted_tokens: before(cut) - before(head),
                total_tokens: total,
                past_target,
            })
        };
        let target = total.saturating_sub(self.tokens(self.keep));
        if let Ok(cut) = tracker.select_legal_cut(target, self.tokens(self.lookback)) {
            if cut > head {
                return plan(cut, false);
            }
        }
        // No legal cut in the seed's window past the head: the next safe point past
        // the target (the forward search), and past the head.
        match tracker.select_legal_cut_forward(target, u64::MAX) {
            Ok(cut) if cut > head => plan(cut, true),
            Ok(_) => match tracker.legal_cut_at_or_after(head + 1) {
                Some(cut) => plan(cut, true),
                None => Decision::Wait(self.wait(tracker, head + 1)),
            },
            Err(defer) => Decision::Wait(self.wait(tracker, defer.target_index.max(head + 1))),
        }
    }

    /// [`decide`](TriggerPolicy::decide) on `log`'s tracker, with the compaction plan
    /// for its cut: the region `head..cut`, its pair atoms and the retained tail, ready
    /// for [`Log::apply`](crate::compact::Log::apply) (summaries write arguments as set
    /// by [`arguments`](TriggerPolicy::arguments)). **O(log n + r)** for a region of
    /// `r` records, plus **O(k log k)** when it defers.
    ///
    /// Where `head..cut` holds kept records ([`Entry::kept`](crate::compact::Entry::kept)),
    /// which `decide` cannot see, the cut is narrowed to the largest stretch between
    /// them (its `head`, `cut` and `compacted_tokens` say so), or it waits
    /// ([`WaitReason::Kept`]) when no stretch is left.
    ///
    /// ```
    /// use cutpoint::compact::{Entry, Log};
    /// use cutpoint::policy::{Planned, TriggerPolicy};
    /// use cutpoint::Record;
    /// let policy = TriggerPolicy::new(10_000).threshold(0.5)?.keep(0.2)?.pinned_head(1);
    /// let mut log = Log::new();
    /// for r in [
    ///     Record::user(1_000),
    ///     Record::assistant(500),
    ///     Record::tool_use("toolu_1", 50),
    ///     Record::tool_result("toolu_1", 4_000),
    ///     Record::user(100),
    /// ] {
    ///     log.append(Entry::from(r))?;
    /// }
    /// let Planned::CompactNow { cut, plan } = policy.plan(&log) else { panic!() };
    /// assert_eq!((cut.head, cut.cut), (1, 4));
    /// assert_eq!(plan.region, 1..4);
    /// assert_eq!(plan.covered().count(), 1); // the pair, as one unit
    /// log.apply(&plan, Some("ran toolu_1".into()), 40)?;
    /// assert_eq!(log.len(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn plan(&self, log: &Log) -> Planned {
        match self.decide(log.tracker()) {
            Decision::Nothing => Planned::Nothing,
            Decision::Wait(d) => Planned::Wait(d),
            // `decide` guarantees legal cuts `head < cut <= len` (tests/it/policy.rs), the
            // precondition of `plan_between`; `apply` checks them again regardless.
            Decision::CompactNow(mut cut) => {
                // One summary cannot stand on both sides of a kept record (a control
                // item, a block that loaded a tool): the largest stretch between them.
                let region = log.largest_around_kept(cut.head, cut.cut);
                if region.is_empty() {
                    let mut wait = self.wait(log.tracker(), cut.cut + 1);
                    wait.reason = WaitReason::Kept {
                        at: log.kept_in(cut.head..cut.cut).unwrap_or(cut.head),
                    };
                    return Planned::Wait(wait);
                }
                if region != (cut.head..cut.cut) {
                    let t = log.tracker();
                    let before = |c: usize| t.tokens_before(c).unwrap_or(cut.total_tokens);
                    cut.compacted_tokens = before(region.end) - before(region.start);
                    (cut.head, cut.cut) = (region.start, region.end);
                }
                Planned::CompactNow {
                    plan: log.plan_between(cut.head, cut.cut, self.arguments),
                    cut,
                }
            }
        }
    }

    fn wait(&self, tracker: &Tracker, resume_at: usize) -> Wait {
        let waiting_on: Vec<CallId> = tracker
            .pending_calls()
            .into_iter()
            .map(|p| p.id.clone())
            .collect();
        let reason = if !waiting_on.is_empty() {
            WaitReason::CallsInFlight
        } else if let Some(at) = tracker.open_record() {
            WaitReason::RecordOpen { at }
        } else {
            WaitReason::NothingAfterHead
        };
        Wait {
            reason,
            waiting_on,
            resume_at,
            total_tokens: tracker.total_tokens(),
        }
    }
}

/// A [`Pipeline`] run by an agent loop after each event: it remembers which passes
/// made no progress, so that none runs again until the log changes (no loop, ever:
/// Codex compacted again and again without progress, codex #23585), and it can close
/// calls whose tool died (an "aborted" result, as repair inserts), so that one dead
/// tool never freezes compaction (ADK #7236).
///
/// ```
/// use cutpoint::compact::pipeline::{Preset, Step};
/// use cutpoint::compact::strategy::Floors;
/// use cutpoint::compact::{Age, Entry, Log};
/// use cutpoint::policy::Compactor;
/// use cutpoint::Record;
/// let mut log = Log::new();
/// log.append(Entry::from(Record::user(1_000)))?;
/// log.append(Entry::from(Record::assistant(100)))?;
/// log.append(Entry::from(Record::tool_use("dead", 50).bound_to_previous()))?;
/// for _ in 0..4 {
///     log.append(Entry::from(Record::user(3_000)))?; // the loop went on without it
/// }
/// let pipeline = Preset::Aggressive.pipeline(8_000).floors(Floors::none().keep_head(1).min_turns(1));
/// let mut compactor = Compactor::new(pipeline);
/// let first = compactor.run(&mut log, None)?;
/// // The call in flight keeps every cut after it illegal: nothing can be compacted.
/// assert!(first.report.steps.iter().all(|s| !matches!(s, Step::Ran(r) if !r.edits.is_empty())));
/// // Asking again on the unchanged log runs none of the passes that failed.
/// let again = compactor.run(&mut log, None)?;
/// assert!(again.report.steps.iter().all(|s| matches!(s, Step::Stalled(_) | Step::NotTriggered(_))));
/// // Declaring calls dead after 3 records closes it, and compaction resumes.
/// let mut compactor = compactor.dead_after(Age::Records(3));
/// let done = compactor.run(&mut log, None)?;
/// assert_eq!(done.aborted.len(), 1);
/// assert!(done.report.met_budget());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct Compactor {
    pipeline: Pipeline,
    progress: Progress,
    dead_after_records: Option<u64>,
}

/// What one [`Compactor::run`] did.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Compacted {
    /// The calls closed as dead, before the pipeline ran (positions before closing).
    pub aborted: Vec<StaleCall>,
    /// The pipeline's run.
    pub report: PipelineReport,
}

impl Compactor {
    /// Runs `pipeline`, closing no call. **O(1)**.
    pub fn new(pipeline: Pipeline) -> Self {
        Compactor {
            pipeline,
            progress: Progress::new(),
            dead_after_records: None,
        }
    }

    /// Closes calls pending for more than `age` before each run (an age in records;
    /// an age in the caller's clock is passed to [`run`](Compactor::run) each time,
    /// since only the caller has a clock). **O(1)**.
    #[must_use]
    pub fn dead_after(mut self, age: Age<'static>) -> Self {
        if let Age::Records(n) = age {
            self.dead_after_records = Some(n);
        }
        self
    }

    /// The pipeline. **O(1)**.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Closes dead calls (by records, as set with [`dead_after`](Compactor::dead_after),
    /// and by `clock` when given), then runs every stage once, skipping those that made
    /// no progress on this very log before; summaries hold the ledger only. Costs what
    /// the stages cost, plus **O(k log k)** over `k` pending calls, plus closing
    /// ([`Log::abort_calls`]).
    ///
    /// # Errors
    /// [`AppendError`] when a synthesized result is refused (a cap); nothing ran then.
    pub fn run(&mut self, log: &mut Log, clock: Option<Age<'_>>) -> Result<Compacted, AppendError> {
        self.run_with(log, clock, &mut LedgerOnly)
    }

    /// As [`run`](Compactor::run), `summarizer` writing the summaries' prose. Same
    /// cost, plus the summarizer.
    ///
    /// # Errors
    /// As [`run`](Compactor::run).
    pub fn run_with(
        &mut self,
        log: &mut Log,
        clock: Option<Age<'_>>,
        summarizer: &mut dyn Summarizer,
    ) -> Result<Compacted, AppendError> {
        let aborted = self.close_dead(log, clock)?;
        let report = self.pipeline.run_with(log, &mut self.progress, summarizer);
        Ok(Compacted { aborted, report })
    }

    /// As [`run_with`](Compactor::run_with), awaiting an asynchronous summarizer. Same
    /// cost, plus the summarizer.
    ///
    /// # Errors
    /// As [`run`](Compactor::run).
    pub async fn run_async<S: AsyncSummarizer>(
        &mut self,
        log: &mut Log,
        clock: Option<Age<'_>>,
        summarizer: &mut S,
    ) -> Result<Compacted, AppendError> {
        let aborted = self.close_dead(log, clock)?;
        let report = self
            .pipeline
            .run_async(log, &mut self.progress, summarizer)
            .await;
        Ok(Compacted { aborted, report })
    }

    fn close_dead(
        &self,
        log: &mut Log,
        clock: Option<Age<'_>>,
    ) -> Result<Vec<StaleCall>, AppendError> {
        let mut stale = self
            .dead_after_records
            .map(|n| log.stale_calls(&Age::Records(n)))
            .unwrap_or_default();
        if let Some(clock) = clock {
            for s in log.stale_calls(&clock) {
                if !stale.iter().any(|t| t.call_id == s.call_id) {
                    stale.push(s);
                }
            }
        }
        if !stale.is_empty() {
            let ids: Vec<CallId> = stale.iter().map(|s| s.call_id.clone()).collect();
            log.abort_calls(&ids)?;
        }
        Ok(stale)
    }
}
