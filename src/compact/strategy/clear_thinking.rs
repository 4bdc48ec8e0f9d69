//! `clear-thinking`: thinking of finished turns goes (Anthropic's
//! `clear_thinking`), never the current turn's.

use super::{Blocked, Edit, Goal, Kind, LeftAlone, NoProgress, Skip, StepReport};
use crate::compact::{Log, Rewrite};

/// Clears thinking / reasoning records ([`Entry::reasoning`](crate::compact::Entry::reasoning))
/// of finished user turns, in place, oldest first, until the goal's target is met: a
/// cleared record counts 0 tokens (a provider rewrite drops the block).
///
/// Never touched, whatever the settings (the rule of `docs/providers.md`: "thinking
/// blocks in the latest assistant message cannot be modified", Gemini's signatures of
/// the current turn): the current user turn, hence the latest assistant message and
/// every signature-bearing part of the current turn. The last
/// [`keep_turns`](ClearThinking::keep_turns) turns (at least 1, the current one) keep
/// their thinking (which keeps prompt-cache hits). A log with no user turn is all
/// current turn.
///
/// When the current turn holds no assistant message yet (the log ends with the user's
/// message), the latest assistant message is the previous turn's, and it keeps its
/// thinking too: a provider reads "the latest assistant message" of the request.
///
/// **O(r + e)** for the `r` records after the pinned head (one pass, which also counts
/// what the current turn keeps, and one back from the end to the latest assistant
/// message), plus the tracker's in-place edit of the `e` records
/// cleared. Cleared thinking counts 0 tokens, so clearing again
/// changes nothing.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct ClearThinking {
    /// The most recent user turns whose thinking is kept (at least 1). Default 1.
    pub keep_turns: usize,
}

impl Default for ClearThinking {
    fn default() -> Self {
        ClearThinking { keep_turns: 1 }
    }
}

impl ClearThinking {
    /// Keeps the thinking of the last `turns` turns (at least 1). **O(1)**.
    #[must_use]
    pub fn keep_turns(mut self, turns: usize) -> Self {
        self.keep_turns = turns;
        self
    }

    /// Runs the strategy (see the type docs for what and the cost).
    ///
    /// # Errors
    /// [`NoProgress`] when no finished turn holds thinking ([`Blocked::NothingEligible`],
    /// or [`Blocked::Floors`] when the floors protect it). The log is then unchanged.
    pub fn run(&self, log: &mut Log, goal: &Goal) -> Result<StepReport, NoProgress> {
        let mut report = StepReport::new(Kind::ClearThinking, log);
        let total = log.tracker().total_tokens();
        if goal.reached(total) {
            return Ok(report.finish(log, goal));
        }
        // The current turn (and the kept ones) start here; no turn at all: all current.
        // The latest assistant message is kept too when the current turn has none yet
        // (the log ends with the user's message).
        let turns_from = log.turn_start_from_end(self.keep_turns.max(1)).unwrap_or(0);
        let kept_from = turns_from.min(latest_assistant_message(log));
        let recent = goal.floors.recent_from(log);
        let head = log.pinned_head(goal.floors.keep_head);
        let mut left = LeftAlone::default();
        let mut rewrites = Vec::new();
        let mut reclaimed = 0;
        let mut protected = 0;
        for (i, entry) in log.entries().iter().enumerate().skip(head) {
            let Some(signed) = entry.reasoning() else {
                continue;
            };
            let tokens = entry.record.tokens();
            if tokens == 0 {
                continue;
            }
            if i >= kept_from {
                left.add(Skip::CurrentTurn, 1);
                continue;
            }
            if i >= recent {
                left.add(Skip::Floor, 1);
                protected += 1;
                continue;
            }
            if goal.reached(total - reclaimed) {
                left.add(Skip::TargetMet, 1);
                continue;
            }
            reclaimed += tokens;
            report.edits.push(Edit::ClearedThinking { at: i });
            rewrites.push(Rewrite {
                at: i,
                tokens: 0,
                payload: crate::compact::Payload::Reasoning { signed },
            });
        }
        if rewrites.is_empty() {
            let reason = Blocked::by_floors((protected > 0).then_some(recent));
            return Err(NoProgress::new(Kind::ClearThinking, reason, log, left));
        }
        report.cleared_thinking = rewrites.len();
        // In range, increasing, a reasoning payload on assistant records, the total
        // only shrinks: the edit cannot be refused.
        report.applied(log.rewrite_entries(rewrites), log, goal, left)
    }
}

/// Clears the thinking records at `positions` (increasing, each a
/// [reasoning](crate::compact::Entry::reasoning) record holding tokens), in place, as
/// [`ClearThinking`] clears them: what a rewrite uses to strip thinking it would
/// otherwise leave invalid. `None` when `positions` is empty or names anything else
/// (the log is then unchanged). **O(p)** plus the tracker's in-place edit.
#[cfg(feature = "formats")]
pub(crate) fn clear_at(log: &mut Log, positions: &[usize]) -> Option<StepReport> {
    let mut report = StepReport::new(Kind::ClearThinking, log);
    let mut rewrites = Vec::with_capacity(positions.len());
    for &at in positions {
        let entry = log.entries().get(at)?;
        let signed = entry.reasoning()?;
        if entry.record.tokens() == 0 {
            continue;
        }
        report.edits.push(Edit::ClearedThinking { at });
        rewrites.push(Rewrite {
            at,
            tokens: 0,
            payload: crate::compact::Payload::Reasoning { signed },
        });
    }
    if rewrites.is_empty() {
        return None;
    }
    report.cleared_thinking = rewrites.len();
    log.rewrite_entries(rewrites).ok()?;
    Some(report.finish(log, &Goal::within(crate::compact::strategy::Floors::none())))
}

/// Where the latest assistant message starts (the message of the last `assistant` or
/// `tool_use` record), or the log's length when it has none. **O(records from it to
/// the end)**.
fn latest_assistant_message(log: &Log) -> usize {
    let entries = log.entries();
    let Some(mut at) = entries.iter().rposition(|e| {
        matches!(
            e.record.kind(),
            crate::RecordKind::Assistant | crate::RecordKind::ToolUse(_)
        )
    }) else {
        return entries.len();
    };
    while at > 0 && entries[at].record.is_bound_to_previous() {
        at -= 1;
    }
    at
}
