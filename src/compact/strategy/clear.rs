//! `clear`: old tool results become a placeholder, in place (Anthropic's
//! `clear_tool_uses`, LangChain's context editing), with `clear_at_least` all or
//! nothing.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Blocked, Edit, Goal, Kind, LeftAlone, NoProgress, Skip, StepReport};
use crate::compact::{Log, Payload, Rewrite, estimate_tokens};
use crate::{CallId, RecordKind};

/// The text a cleared tool result holds.
pub const CLEARED_RESULT_TEXT: &str = "[tool result cleared to save context]";

/// The arguments a call holds once its input is cleared.
pub const CLEARED_INPUT: &str = "{}";

/// Tokens counted for a call whose input is cleared (its id, name and `{}`), unless
/// the call was smaller.
pub const CLEARED_INPUT_TOKENS: u64 = 12;

/// What each call's result and input count once cleared, measured where they are
/// written: a provider transcript's route ([`Loaded::run`](crate::format::Loaded::run))
/// writes its live history with every result and input cleared, reads it back with
/// its counter and records each block's count here, so that [`Clear`] chooses and
/// counts by what the output will read back as (a cleared OpenAI Chat tool message
/// keeps its role and id, a Codex item its line: a placeholder's estimate alone
/// missed 15-30 tokens a result, and clearing a small result could grow the log).
/// A call not listed falls back to the estimates ([`Clear::placeholder_tokens`],
/// [`CLEARED_INPUT_TOKENS`]), as every call of a [`Log`] run by hand does.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ClearedSizes {
    results: HashMap<CallId, u64>,
    inputs: HashMap<CallId, u64>,
}

impl ClearedSizes {
    /// No call measured. **O(1)**.
    pub fn new() -> Self {
        ClearedSizes::default()
    }

    /// Call `id`'s result counts `tokens` once cleared. **O(1)** amortized.
    pub fn result(&mut self, id: CallId, tokens: u64) {
        self.results.insert(id, tokens);
    }

    /// Call `id` counts `tokens` once its input is cleared. **O(1)** amortized.
    pub fn input(&mut self, id: CallId, tokens: u64) {
        self.inputs.insert(id, tokens);
    }

    /// Whether no call is measured. **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.results.is_empty() && self.inputs.is_empty()
    }
}

impl std::fmt::Debug for ClearedSizes {
    /// The counts only: the maps hold one entry per call of the log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClearedSizes")
            .field("results", &self.results.len())
            .field("inputs", &self.inputs.len())
            .finish()
    }
}

/// Which calls get their input cleared with their result.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub enum ClearInputs {
    /// None: arguments stay verbatim.
    #[default]
    None,
    /// Every call whose result is cleared.
    All,
    /// The calls of these tools whose result is cleared.
    Tools(Vec<String>),
}

/// Clears old tool results in place: each becomes [`CLEARED_RESULT_TEXT`], its call
/// and pairing untouched (a cleared result still answers its call), oldest first,
/// until the goal's target is met.
///
/// - the last [`keep_tool_uses`](Clear::keep_tool_uses) tool uses (and their results)
///   are kept, as are calls inside the floors or the pinned head;
/// - results of [`exclude_tools`](Clear::exclude_tools) are never touched;
/// - [`clear_inputs`](Clear::clear_inputs): a cleared call's arguments become `{}`;
/// - [`clear_at_least`](Clear::clear_at_least): all or nothing. When fewer tokens can
///   go, nothing changes ([`Blocked::BelowClearAtLeast`]): each clear breaks a
///   provider's prompt cache from that point on, so a small one is not worth it.
///   Unlike LangChain's, it does not stop early below the amount.
///
/// A result no bigger than the placeholder is left alone (so clearing twice changes
/// nothing). **O(r + e log e)** for the `r` records from the pinned head to the
/// floors (one pass; sizes are the records' own, never re-summed) and the `e` records
/// cleared, plus the tracker's in-place edit of those
/// ([`Tracker::set_tokens`](crate::Tracker::set_tokens)): no re-summing after each
/// clear.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Clear {
    /// The most recent tool uses kept whole. Default 3 (Anthropic's).
    pub keep_tool_uses: usize,
    /// Clear at least this many tokens, or nothing. Default 0.
    pub clear_at_least: u64,
    /// Tools whose results are never cleared.
    pub exclude_tools: Vec<String>,
    /// Which cleared calls also lose their input.
    pub clear_inputs: ClearInputs,
    /// Tokens counted for a cleared result (default: the placeholder's estimate),
    /// where [`sizes`](Clear::sizes) does not say.
    pub placeholder_tokens: u64,
    /// What each cleared result and input counts as written, where measured
    /// ([`ClearedSizes`]; set by the provider formats' route). `None`: the estimates.
    pub sizes: Option<Arc<ClearedSizes>>,
}

impl Default for Clear {
    fn default() -> Self {
        Clear {
            keep_tool_uses: 3,
            clear_at_least: 0,
            exclude_tools: Vec::new(),
            clear_inputs: ClearInputs::None,
            placeholder_tokens: estimate_tokens(CLEARED_RESULT_TEXT),
            sizes: None,
        }
    }
}

impl Clear {
    /// Keeps the last `n` tool uses. **O(1)**.
    #[must_use]
    pub fn keep_tool_uses(mut self, n: usize) -> Self {
        self.keep_tool_uses = n;
        self
    }

    /// Clears at least `tokens` or nothing. **O(1)**.
    #[must_use]
    pub fn clear_at_least(mut self, tokens: u64) -> Self {
        self.clear_at_least = tokens;
        self
    }

    /// Never clears these tools' results. **O(1)**.
    #[must_use]
    pub fn exclude_tools<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tools: I) -> Self {
        self.exclude_tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// Clears the inputs of these calls too. **O(1)**.
    #[must_use]
    pub fn clear_inputs(mut self, which: ClearInputs) -> Self {
        self.clear_inputs = which;
        self
    }

    /// Counts each cleared result and input as `sizes` says. **O(1)**.
    #[must_use]
    pub fn sizes(mut self, sizes: Arc<ClearedSizes>) -> Self {
        self.sizes = Some(sizes);
        self
    }

    /// What call `id`'s result counts once cleared. **O(1)**.
    fn cleared_result(&self, id: &CallId) -> u64 {
        self.sizes
            .as_ref()
            .and_then(|s| s.results.get(id).copied())
            .unwrap_or(self.placeholder_tokens)
    }

    /// What call `id` counts once its input is cleared. **O(1)**.
    fn cleared_input(&self, id: &CallId) -> u64 {
        self.sizes
            .as_ref()
            .and_then(|s| s.inputs.get(id).copied())
            .unwrap_or(CLEARED_INPUT_TOKENS)
    }

    fn clears_input(&self, tool: Option<&str>) -> bool {
        match &self.clear_inputs {
            ClearInputs::None => false,
            ClearInputs::All => true,
            ClearInputs::Tools(names) => tool.is_some_and(|t| names.iter().any(|n| n == t)),
        }
    }

    /// Runs the strategy (see the type docs for what and the cost).
    ///
    /// # Errors
    /// [`NoProgress`]: nothing to clear ([`Blocked::NothingEligible`], or
    /// [`Blocked::Floors`] when only protected results would do), or less than
    /// `clear_at_least` ([`Blocked::BelowClearAtLeast`]). The log is then unchanged.
    pub fn run(&self, log: &mut Log, goal: &Goal) -> Result<StepReport, NoProgress> {
        let mut report = StepReport::new(Kind::Clear, log);
        let total = log.tracker().total_tokens();
        if goal.reached(total) {
            return Ok(report.finish(log, goal));
        }
        let len = log.len();
        let entries = log.entries();
        let mut left = LeftAlone::default();
        // The first kept tool use: the `keep_tool_uses`-th from the end.
        let mut kept_from = len;
        let mut seen = 0;
        while seen < self.keep_tool_uses && kept_from > 0 {
            kept_from -= 1;
            if matches!(entries[kept_from].record.kind(), RecordKind::ToolUse(_)) {
                seen += 1;
            }
        }
        if seen < self.keep_tool_uses {
            kept_from = 0;
        }
        left.add(Skip::KeptRecent, seen);
        let recent = goal.floors.recent_from(log);
        let head = log.pinned_head(goal.floors.keep_head);
        let calls_end = kept_from.min(recent);
        // Calls that may lose their result: id -> excluded.
        let mut calls: HashMap<&str, bool> = HashMap::new();
        // (position, old tokens, new tokens, is the result) in log order.
        let mut candidates: Vec<(usize, u64, u64, bool)> = Vec::new();
        let mut protected_results = 0;
        for (i, entry) in entries
            .iter()
            .enumerate()
            .skip(head)
            .take(recent.saturating_sub(head))
        {
            match entry.record.kind() {
                RecordKind::ToolUse(id) if i < calls_end => {
                    let tool = match &entry.payload {
                        Payload::Call { name, .. } => name.as_deref(),
                        _ => None,
                    };
                    let excluded = tool.is_some_and(|t| self.exclude_tools.iter().any(|x| x == t));
                    calls.insert(id.as_str(), excluded);
                    if excluded {
                        left.add(Skip::ExcludedTool, 1);
                    } else if self.clears_input(tool) {
                        let (old, new) = (entry.record.tokens(), self.cleared_input(id));
                        if old > new {
                            candidates.push((i, old, new, false));
                        }
                    }
                }
                // A block that loaded a tool stays as it is (and so does its call's
                // input: inputs are cleared only with their result).
                RecordKind::ToolResult(_) if entry.kept() => left.add(Skip::Pinned, 1),
                RecordKind::ToolResult(id) => match calls.get(id.as_str()) {
                    Some(false) => {
                        let (old, new) = (entry.record.tokens(), self.cleared_result(id));
                        if old > new {
                            candidates.push((i, old, new, true));
                        } else {
                            left.add(Skip::NotSmaller, 1);
                        }
                    }
                    Some(true) => {}
                    None => protected_results += 1,
                },
                _ => {}
            }
        }
        left.add(Skip::Pinned, head);
        // Inputs are cleared only with their result: drop input candidates whose
        // result is not a candidate.
        let cleared_result: std::collections::HashSet<&str> = candidates
            .iter()
            .filter(|c| c.3)
            .filter_map(|c| entries[c.0].record.call_id().map(|id| id.as_str()))
            .collect();
        candidates.retain(|c| {
            c.3 || entries[c.0]
                .record
                .call_id()
                .is_some_and(|id| cleared_result.contains(id.as_str()))
        });
        if candidates.is_empty() {
            let by_floors = recent < kept_from && protected_results > 0;
            let reason = Blocked::by_floors(by_floors.then_some(recent));
            return Err(NoProgress::new(Kind::Clear, reason, log, left));
        }
        // Oldest first, a call's input with its result, until the target is met and
        // at least `clear_at_least` is reclaimed.
        let mut chosen: Vec<(usize, u64, bool)> = Vec::new();
        let mut reclaimed: u64 = 0;
        let mut by_result: Vec<&(usize, u64, u64, bool)> =
            candidates.iter().filter(|c| c.3).collect();
        by_result.sort_unstable_by_key(|c| c.0);
        let input_of: HashMap<&str, &(usize, u64, u64, bool)> = candidates
            .iter()
            .filter(|c| !c.3)
            .filter_map(|c| entries[c.0].record.call_id().map(|id| (id.as_str(), c)))
            .collect();
        let mut skipped_for_target = 0;
        let mut inputs_taken: std::collections::HashSet<usize> = std::collections::HashSet::new();
        for c in by_result {
            let enough = reclaimed >= self.clear_at_least && goal.reached(total - reclaimed);
            if enough {
                skipped_for_target += 1;
                continue;
            }
            chosen.push((c.0, c.2, true));
            reclaimed += c.1 - c.2;
            if let Some(input) = entries[c.0]
                .record
                .call_id()
                .and_then(|id| input_of.get(id.as_str()))
                .filter(|input| inputs_taken.insert(input.0))
            {
                chosen.push((input.0, input.2, false));
                reclaimed += input.1 - input.2;
            }
        }
        left.add(Skip::TargetMet, skipped_for_target);
        if reclaimed < self.clear_at_least {
            return Err(NoProgress::new(
                Kind::Clear,
                Blocked::BelowClearAtLeast {
                    available: reclaimed,
                    at_least: self.clear_at_least,
                },
                log,
                left,
            ));
        }
        chosen.sort_unstable_by_key(|c| c.0);
        let mut rewrites = Vec::with_capacity(chosen.len());
        for &(at, tokens, is_result) in &chosen {
            let payload = match (&entries[at].payload, is_result) {
                (Payload::Result { status, .. }, true) => Payload::Result {
                    status: *status,
                    content: Some(CLEARED_RESULT_TEXT.to_owned()),
                },
                (_, true) => Payload::Result {
                    status: None,
                    content: Some(CLEARED_RESULT_TEXT.to_owned()),
                },
                (Payload::Call { name, .. }, false) => Payload::Call {
                    name: name.clone(),
                    arguments: Some(CLEARED_INPUT.to_owned()),
                },
                (_, false) => Payload::Call {
                    name: None,
                    arguments: Some(CLEARED_INPUT.to_owned()),
                },
            };
            if is_result {
                report.cleared_results += 1;
                report.edits.push(Edit::ClearedResult { at });
            } else {
                report.cleared_inputs += 1;
                report.edits.push(Edit::ClearedInput { at });
            }
            rewrites.push(Rewrite {
                at,
                tokens,
                payload,
            });
        }
        // Positions are in range and increasing, payloads fit their kinds, and the
        // total only shrinks: the edit cannot be refused.
        report.applied(log.rewrite_entries(rewrites), log, goal, left)
    }
}
