//! Compaction strategies, each pair-atomic by construction, all on the one incremental
//! index: [`Clear`] (tool results, optionally inputs, in place), [`ClearThinking`]
//! (thinking of finished turns, in place), [`Digest`] (each old tool group becomes one
//! ledger message), [`Summarize`] (a region becomes one summary, with a summarizer
//! hook), [`Slide`] (whole oldest user turns go, their calls into a ledger) and
//! [`Truncate`] (the oldest region goes, no summary, the calls named: the last
//! resort). The [`pipeline`](super::pipeline) runs them in order under triggers.
//!
//! Every strategy:
//!
//! - works within a [`Goal`]: the [`Floors`] it must never cross (a pinned head, the
//!   most recent user turns and tool groups) and, optionally, a token target (stop
//!   once the log is at most that big, oldest first);
//! - reads the tracker and the log's shape ([`Log::turn_starts`] and friends): prefix
//!   sums, legal cuts, turn and group starts, never re-summing the log; edits in
//!   place ([`Log::rewrite_entries`]) or replaces all its regions in one batch
//!   ([`Log::apply_many`]);
//! - answers a [`StepReport`] (counts, tokens before and after, what it left alone and
//!   why, and its [`Edit`]s for a provider rewrite) or a typed [`NoProgress`] (why it
//!   could not shrink the log: floors, calls in flight, nothing eligible, ...), in
//!   which case the log is unchanged;
//! - keeps every call id of the log (retained, cleared in place, or listed in a
//!   digest's or summary's ledger), except [`Truncate`], which names every id it drops.
//!
//! Costs are stated per strategy; none is more than linear in the part of the log it
//! may touch, and the edits are applied in one pass over the shorter side.

use std::fmt;

use super::Log;
use crate::CallId;

mod clear;
pub(crate) mod clear_thinking;
mod digest;
mod slide;
mod summarize;
mod truncate;

pub use clear::{
    CLEARED_INPUT, CLEARED_INPUT_TOKENS, CLEARED_RESULT_TEXT, Clear, ClearInputs, ClearedSizes,
};
pub use clear_thinking::ClearThinking;
pub use digest::Digest;
pub use slide::Slide;
pub use summarize::{AsyncSummarizer, LedgerOnly, Prose, Summarize, Summarizer, SummaryRequest};
pub use truncate::Truncate;

/// Which strategy.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Kind {
    /// [`Clear`].
    Clear,
    /// [`ClearThinking`].
    ClearThinking,
    /// [`Digest`].
    Digest,
    /// [`Summarize`].
    Summarize,
    /// [`Slide`].
    Slide,
    /// [`Truncate`].
    Truncate,
}

impl Kind {
    /// Every strategy, gentlest first.
    pub const ALL: [Kind; 6] = [
        Kind::ClearThinking,
        Kind::Clear,
        Kind::Digest,
        Kind::Summarize,
        Kind::Slide,
        Kind::Truncate,
    ];

    /// The name the CLI uses: `clear`, `clear-thinking`, `digest`, `summarize`,
    /// `slide`, `truncate`. **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Clear => "clear",
            Kind::ClearThinking => "clear-thinking",
            Kind::Digest => "digest",
            Kind::Summarize => "summarize",
            Kind::Slide => "slide",
            Kind::Truncate => "truncate",
        }
    }

    /// The strategy named `name`. **O(1)**.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What no strategy may touch: hard floors.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Floors {
    /// Records pinned at the front (system prompt, task); a region starts at the first
    /// legal cut at or after them.
    pub keep_head: usize,
    /// The most recent user turns, kept verbatim (see [`Log::turn_starts`]). A log
    /// with fewer keeps all of them (from the first turn's start on).
    pub min_turns: usize,
    /// The most recent tool groups, kept verbatim. A log with fewer keeps all of them
    /// (from the first group's start on); a log with none has nothing to keep.
    pub min_tool_groups: usize,
}

impl Floors {
    /// No floors. **O(1)**.
    pub fn none() -> Self {
        Floors::default()
    }

    /// Pins the first `records` records. **O(1)**.
    #[must_use]
    pub fn keep_head(mut self, records: usize) -> Self {
        self.keep_head = records;
        self
    }

    /// Keeps the last `turns` user turns. **O(1)**.
    #[must_use]
    pub fn min_turns(mut self, turns: usize) -> Self {
        self.min_turns = turns;
        self
    }

    /// Keeps the last `groups` tool groups. **O(1)**.
    #[must_use]
    pub fn min_tool_groups(mut self, groups: usize) -> Self {
        self.min_tool_groups = groups;
        self
    }

    /// The first record the floors protect at the end of `log`: the start of the
    /// `min_turns`-th turn from the end or of the `min_tool_groups`-th group from the
    /// end, whichever is earlier (the first turn's or group's start when the log has
    /// fewer; `len` when a floor is 0 or the log has no turn or group). **O(1)**.
    pub fn recent_from(&self, log: &Log) -> usize {
        let turns = self.min_turns.min(log.turn_count());
        let groups = self.min_tool_groups.min(log.tool_group_count());
        let len = log.len();
        let turn_floor = if turns == 0 {
            len
        } else {
            log.turn_start_from_end(turns).unwrap_or(len)
        };
        let group_floor = if groups == 0 {
            len
        } else {
            log.tool_group_start_from_end(groups).unwrap_or(len)
        };
        turn_floor.min(group_floor)
    }
}

/// What a strategy works towards.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Goal {
    /// Floors it must never cross.
    pub floors: Floors,
    /// Stop once the log holds at most this many tokens (oldest first); `None`: do
    /// everything the strategy may.
    pub target_tokens: Option<u64>,
}

impl Goal {
    /// Everything the strategy may, within `floors`. **O(1)**.
    pub fn within(floors: Floors) -> Self {
        Goal {
            floors,
            target_tokens: None,
        }
    }

    /// Stop once the log holds at most `tokens`. **O(1)**.
    #[must_use]
    pub fn target(mut self, tokens: u64) -> Self {
        self.target_tokens = Some(tokens);
        self
    }

    /// Whether `total` meets the target (always, without one). **O(1)**.
    pub fn met(&self, total: u64) -> bool {
        self.target_tokens.is_none_or(|t| total <= t)
    }

    /// Whether a target is set and `total` meets it: a strategy stops there.
    fn reached(&self, total: u64) -> bool {
        self.target_tokens.is_some_and(|t| total <= t)
    }
}

/// One edit a strategy made, in positions of the log as it was before the step (all
/// edits of one step refer to that same log). A provider rewrite replays them on the
/// transcript (`format::edit`).
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Edit {
    /// The tool result at `at` now holds the placeholder.
    ClearedResult {
        /// Its position.
        at: usize,
    },
    /// The call at `at` now has `{}` for arguments.
    ClearedInput {
        /// Its position.
        at: usize,
    },
    /// The thinking record at `at` was cleared (0 tokens; a rewrite drops the block).
    ClearedThinking {
        /// Its position.
        at: usize,
    },
    /// Records `start..end` became one summary record (a digest, a ledger or a
    /// summary), at `start`.
    Replaced {
        /// The first record replaced.
        start: usize,
        /// The first record kept after it.
        end: usize,
    },
    /// Records `start..end` were dropped.
    Removed {
        /// The first record dropped.
        start: usize,
        /// The first record kept after it.
        end: usize,
    },
}

/// Why a strategy left something alone.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Skip {
    /// In the pinned head, or kept where it is ([`Payload::Kept`](super::Payload::Kept): a control
    /// item, a block that loaded a tool, or a stretch holding one).
    Pinned,
    /// Protected by a floor (the most recent turns or tool groups).
    Floor,
    /// Among what the strategy itself keeps (its last tool uses, its last turns).
    KeptRecent,
    /// A tool the caller excluded.
    ExcludedTool,
    /// No smaller once rewritten (a result no bigger than the placeholder, a group
    /// whose digest is not smaller than the group).
    NotSmaller,
    /// In the current turn, or the latest assistant message (its thinking must go
    /// back unmodified).
    CurrentTurn,
    /// A tool group sharing a message with user input or a summary: digesting it
    /// would lose them.
    HoldsUserInput,
    /// The target was met before the strategy reached it.
    TargetMet,
}

impl Skip {
    /// A short name for reports: `pinned`, `floor`, `kept-recent`, `excluded-tool`,
    /// `not-smaller`, `current-turn`, `holds-user-input`, `target-met`. **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            Skip::Pinned => "pinned",
            Skip::Floor => "floor",
            Skip::KeptRecent => "kept-recent",
            Skip::ExcludedTool => "excluded-tool",
            Skip::NotSmaller => "not-smaller",
            Skip::CurrentTurn => "current-turn",
            Skip::HoldsUserInput => "holds-user-input",
            Skip::TargetMet => "target-met",
        }
    }
}

/// What a strategy left alone, counted by reason.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct LeftAlone(Vec<(Skip, usize)>);

impl LeftAlone {
    /// Counts one more item skipped for `why`. **O(reasons)**.
    pub(crate) fn add(&mut self, why: Skip, n: usize) {
        if n == 0 {
            return;
        }
        match self.0.iter_mut().find(|(w, _)| *w == why) {
            Some((_, c)) => *c += n,
            None => {
                self.0.push((why, n));
                self.0.sort_unstable();
            }
        }
    }

    /// How many were left alone for `why`. **O(reasons)**.
    pub fn count(&self, why: Skip) -> usize {
        self.0
            .iter()
            .find(|(w, _)| *w == why)
            .map_or(0, |(_, c)| *c)
    }

    /// Every reason with its count, in a fixed order. **O(1)**.
    pub fn iter(&self) -> impl Iterator<Item = (Skip, usize)> + '_ {
        self.0.iter().copied()
    }

    /// Whether nothing was left alone. **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for LeftAlone {
    /// `3 kept-recent, 1 floor` ([`Skip::name`]), in the fixed order; `nothing` when
    /// empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("nothing");
        }
        for (i, (why, n)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n} {}", why.name())?;
        }
        Ok(())
    }
}

/// What a strategy did.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct StepReport {
    /// Which strategy.
    pub kind: Kind,
    /// Tokens of the log before and after.
    pub tokens_before: u64,
    /// Tokens after.
    pub tokens_after: u64,
    /// Records before and after.
    pub records_before: usize,
    /// Records after.
    pub records_after: usize,
    /// Tool results replaced by the placeholder.
    pub cleared_results: usize,
    /// Calls whose arguments became `{}`.
    pub cleared_inputs: usize,
    /// Thinking records cleared.
    pub cleared_thinking: usize,
    /// The thinking blocks and reasoning items, bound to their prefix by the provider,
    /// that lie after this step's first edit in what the run wrote, as a transcript
    /// rewrite judges them (`format::invalidated_thinking`, attributed by
    /// `format::attribute`): the ones this step invalidates; 0 on a records log,
    /// where nothing is signed. With thinking kept valid, a later `clear-thinking`
    /// step strips them (its `cleared_thinking`).
    pub invalidated_thinking: usize,
    /// Regions that became a digest, a ledger or a summary.
    pub summaries: usize,
    /// Calls those summaries list (folded summaries' units included).
    pub summarized_calls: usize,
    /// User turns that went (slide, truncate) or were summarized.
    pub dropped_turns: usize,
    /// Calls dropped without a trace in the log ([`Truncate`] only): named here.
    pub dropped_calls: Vec<CallId>,
    /// Whether the goal's target is met (always, without one).
    pub met_target: bool,
    /// What it left alone, and why.
    pub left_alone: LeftAlone,
    /// The edits, for a provider rewrite.
    pub edits: Vec<Edit>,
}

impl StepReport {
    /// An empty report of `kind` for `log` as it is. **O(1)**.
    pub(crate) fn new(kind: Kind, log: &Log) -> Self {
        StepReport {
            kind,
            tokens_before: log.tracker().total_tokens(),
            tokens_after: log.tracker().total_tokens(),
            records_before: log.len(),
            records_after: log.len(),
            cleared_results: 0,
            cleared_inputs: 0,
            cleared_thinking: 0,
            invalidated_thinking: 0,
            summaries: 0,
            summarized_calls: 0,
            dropped_turns: 0,
            dropped_calls: Vec::new(),
            met_target: true,
            left_alone: LeftAlone::default(),
            edits: Vec::new(),
        }
    }

    /// Tokens reclaimed. **O(1)**.
    pub fn reclaimed(&self) -> u64 {
        self.tokens_before.saturating_sub(self.tokens_after)
    }

    /// Fills in the sizes after the step. **O(1)**.
    pub(crate) fn finish(mut self, log: &Log, goal: &Goal) -> Self {
        self.tokens_after = log.tracker().total_tokens();
        self.records_after = log.len();
        self.met_target = goal.met(self.tokens_after);
        self
    }

    /// Ends a step with the log's answer to its edit (`edited`), which the log cannot
    /// refuse: each strategy says why where it edits. The report is finished, with
    /// `left`. A refusal would be a bug in the strategy: a debug build panics, a release
    /// build answers [`Blocked::NothingEligible`] (a refused edit leaves the log
    /// unchanged). **O(1)**.
    pub(crate) fn applied<T, E: fmt::Display>(
        mut self,
        edited: Result<T, E>,
        log: &Log,
        goal: &Goal,
        left: LeftAlone,
    ) -> Result<Self, NoProgress> {
        if let Err(e) = edited {
            debug_assert!(false, "{}'s edit is valid: {e}", self.kind);
            return Err(NoProgress::nothing_eligible(self.kind, log, left));
        }
        self.left_alone = left;
        Ok(self.finish(log, goal))
    }
}

/// Why a strategy could not shrink the log. The log is unchanged.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Blocked {
    /// Something is eligible, but only past a floor (or in the pinned head).
    Floors {
        /// The first record the floors protect.
        protected_from: usize,
    },
    /// Calls in flight: no legal cut lies past the head far enough to make a region.
    PendingCalls {
        /// The calls, in log order.
        waiting_on: Vec<CallId>,
    },
    /// Nothing the strategy applies to (no tool results, no thinking of a finished
    /// turn, no tool group, an empty region, ...).
    NothingEligible,
    /// [`Clear::clear_at_least`] asks for more than can be cleared: all or nothing.
    BelowClearAtLeast {
        /// Tokens that could be cleared.
        available: u64,
        /// Tokens asked for.
        at_least: u64,
    },
    /// The rewrite would not be smaller (a summary whose prose outweighs its region).
    NotSmaller {
        /// Tokens before.
        before: u64,
        /// Tokens it would have after.
        after: u64,
    },
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocked::Floors { protected_from } => write!(
                f,
                "the floors protect everything eligible (from record {protected_from} on)"
            ),
            Blocked::PendingCalls { waiting_on } => {
                f.write_str("calls in flight keep every cut past the head illegal")?;
                crate::core::error::write_ids(f, ": ", waiting_on)
            }
            Blocked::NothingEligible => f.write_str("nothing eligible"),
            Blocked::BelowClearAtLeast {
                available,
                at_least,
            } => write!(
                f,
                "only {available} tokens can be cleared, fewer than clear_at_least {at_least}; nothing cleared"
            ),
            Blocked::NotSmaller { before, after } => write!(
                f,
                "the result would not be smaller ({before} tokens before, {after} after)"
            ),
        }
    }
}

impl Blocked {
    /// [`Blocked::Floors`] when the floors are what kept a strategy from anything
    /// eligible (`protected_from` given), else [`Blocked::NothingEligible`]. **O(1)**.
    pub(crate) fn by_floors(protected_from: Option<usize>) -> Blocked {
        match protected_from {
            Some(protected_from) => Blocked::Floors { protected_from },
            None => Blocked::NothingEligible,
        }
    }

    /// A short name for reports: `floors`, `pending-calls`, `nothing-eligible`,
    /// `below-clear-at-least`, `not-smaller`. **O(1)**.
    pub fn name(&self) -> &'static str {
        match self {
            Blocked::Floors { .. } => "floors",
            Blocked::PendingCalls { .. } => "pending-calls",
            Blocked::NothingEligible => "nothing-eligible",
            Blocked::BelowClearAtLeast { .. } => "below-clear-at-least",
            Blocked::NotSmaller { .. } => "not-smaller",
        }
    }
}

/// A strategy's typed "no progress": which strategy, why, and what it left alone.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("{kind}: no progress: {reason}")]
#[non_exhaustive]
pub struct NoProgress {
    /// Which strategy.
    pub kind: Kind,
    /// Why.
    pub reason: Blocked,
    /// Tokens of the log (unchanged).
    pub tokens: u64,
    /// What it left alone, and why.
    pub left_alone: LeftAlone,
}

impl NoProgress {
    pub(crate) fn new(kind: Kind, reason: Blocked, log: &Log, left_alone: LeftAlone) -> Self {
        NoProgress {
            kind,
            reason,
            tokens: log.tracker().total_tokens(),
            left_alone,
        }
    }

    /// `kind` found nothing it applies to ([`Blocked::NothingEligible`]). **O(1)**.
    pub(crate) fn nothing_eligible(kind: Kind, log: &Log, left_alone: LeftAlone) -> Self {
        NoProgress::new(kind, Blocked::NothingEligible, log, left_alone)
    }
}

/// Where the strategies that replace regions may work: from the first legal cut at
/// or after the pinned head ([`Log::pinned_head`]) to the last legal cut before the floors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Regions {
    /// First legal cut at or after the pinned head.
    pub(crate) head: usize,
    /// Last legal cut at or before the first protected record (`>= head`).
    pub(crate) end: usize,
    /// The first record the floors protect.
    pub(crate) recent: usize,
}

impl Regions {
    /// The span, or why there is none. **O(1 + gap / 64)** (two legal-cut lookups),
    /// plus **O(k log k)** over `k` pending calls when it answers why not.
    pub(crate) fn of(log: &Log, floors: &Floors, kind: Kind) -> Result<Regions, NoProgress> {
        let t = log.tracker();
        let len = log.len();
        let recent = floors.recent_from(log);
        let pending = || Blocked::PendingCalls {
            waiting_on: t.pending_calls().iter().map(|p| p.id.clone()).collect(),
        };
        let Some(head) = t.legal_cut_at_or_after(log.pinned_head(floors.keep_head)) else {
            return Err(NoProgress::new(kind, pending(), log, LeftAlone::default()));
        };
        let end = t.legal_cut_at_or_before(recent.min(len)).max(head);
        if end > head {
            return Ok(Regions { head, end, recent });
        }
        let last_cut = t.legal_cut_at_or_before(len);
        let reason = if recent < len && last_cut > head {
            Blocked::Floors {
                protected_from: recent,
            }
        } else if last_cut <= head && t.pending_count() > 0 {
            pending()
        } else {
            Blocked::NothingEligible
        };
        Err(NoProgress::new(kind, reason, log, LeftAlone::default()))
    }

    /// `stretches` (from [`Log::around_kept`] over `head..end`, to be removed) made to
    /// leave a log that starts with a user message, as a removal of the whole region
    /// does: with no pinned head (`head == 0`), a first stretch from the head that
    /// ends at a kept record not starting a user message ends instead at the last
    /// user message start inside it that is a legal cut, or is left out (the log
    /// then starts as it did). **O(r)** for the `r` records of that stretch.
    pub(crate) fn user_first(
        &self,
        log: &Log,
        mut stretches: Vec<std::ops::Range<usize>>,
    ) -> Vec<std::ops::Range<usize>> {
        let t = log.tracker();
        let starts_user = |c: usize| {
            c == log.len()
                || log
                    .entries()
                    .get(c)
                    .is_some_and(|e| matches!(e.record.kind(), crate::RecordKind::User))
        };
        let Some(first) = stretches.first_mut() else {
            return stretches;
        };
        if self.head > 0 || first.start != self.head || starts_user(first.end) {
            return stretches;
        }
        match (first.start + 1..first.end)
            .rev()
            .find(|&c| starts_user(c) && t.is_legal_cut(c))
        {
            Some(c) => first.end = c,
            None => {
                stretches.remove(0);
            }
        }
        stretches
    }
}

/// One strategy with its settings.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Strategy {
    /// [`Clear`].
    Clear(Clear),
    /// [`ClearThinking`].
    ClearThinking(ClearThinking),
    /// [`Digest`].
    Digest(Digest),
    /// [`Summarize`].
    Summarize(Summarize),
    /// [`Slide`].
    Slide(Slide),
    /// [`Truncate`].
    Truncate(Truncate),
}

impl Strategy {
    /// Which strategy. **O(1)**.
    pub fn kind(&self) -> Kind {
        match self {
            Strategy::Clear(_) => Kind::Clear,
            Strategy::ClearThinking(_) => Kind::ClearThinking,
            Strategy::Digest(_) => Kind::Digest,
            Strategy::Summarize(_) => Kind::Summarize,
            Strategy::Slide(_) => Kind::Slide,
            Strategy::Truncate(_) => Kind::Truncate,
        }
    }

    /// The strategy of `kind` with its defaults. **O(1)**.
    pub fn default_of(kind: Kind) -> Strategy {
        match kind {
            Kind::Clear => Strategy::Clear(Clear::default()),
            Kind::ClearThinking => Strategy::ClearThinking(ClearThinking::default()),
            Kind::Digest => Strategy::Digest(Digest::default()),
            Kind::Summarize => Strategy::Summarize(Summarize::default()),
            Kind::Slide => Strategy::Slide(Slide::default()),
            Kind::Truncate => Strategy::Truncate(Truncate::default()),
        }
    }

    /// Runs the strategy on `log` towards `goal`; [`Summarize`] writes the ledger only
    /// ([`LedgerOnly`]). Costs what the strategy costs: each states it (none is more
    /// than linear in the part of the log it may touch).
    ///
    /// # Errors
    /// [`NoProgress`] when it cannot shrink the log; the log is then unchanged.
    pub fn run(&self, log: &mut Log, goal: &Goal) -> Result<StepReport, NoProgress> {
        self.run_with(log, goal, &mut LedgerOnly)
    }

    /// As [`run`](Strategy::run), with `summarizer` writing [`Summarize`]'s prose.
    /// Costs what the strategy costs (each states it), plus the summarizer.
    ///
    /// # Errors
    /// [`NoProgress`] when it cannot shrink the log; the log is then unchanged.
    pub fn run_with(
        &self,
        log: &mut Log,
        goal: &Goal,
        summarizer: &mut dyn Summarizer,
    ) -> Result<StepReport, NoProgress> {
        match self {
            Strategy::Clear(s) => s.run(log, goal),
            Strategy::ClearThinking(s) => s.run(log, goal),
            Strategy::Digest(s) => s.run_sized(log, goal, |p| summarizer.written_tokens(p)),
            Strategy::Summarize(s) => s.run_with(log, goal, summarizer),
            Strategy::Slide(s) => s.run_sized(log, goal, |p| summarizer.written_tokens(p)),
            Strategy::Truncate(s) => s.run(log, goal),
        }
    }
}
