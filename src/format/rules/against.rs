//! The rules that need the log before a rewrite as well as after it: what a provider
//! requires sent back exactly as it was received (the latest thinking, a compaction,
//! reasoning before the item it precedes), which one log alone cannot tell.

use std::collections::HashSet;

use super::prefix::followed_reasoning;
use super::{Rule, RuleViolation, Segment, check_rules, gemini, invalidated_thinking};
use crate::format::{Block, Control, Format, Message, Role, Transcript};

/// Checks `after`, a rewrite of `before` (the same conversation, compacted or edited),
/// against the provider rules ([`check_rules`] of `after`) and the rules that compare
/// the two, by the bytes of each block ([`Message::prints`]):
///
/// - [`Rule::AnthropicLatestThinkingModified`]: the latest assistant message of
///   `after` is one of `before` (the same other blocks) whose thinking differs
///   (changed, reordered, partly or wholly dropped);
/// - [`Rule::CompactionLost`]: the latest provider compaction of `before` is not in
///   `after` byte for byte;
/// - [`Rule::ResponsesEditedBeforeCompaction`]: an item of `after` before its latest
///   compaction item matches no item of `before`;
/// - [`Rule::ResponsesItemWithoutReasoning`]: an item of the current turn (after the
///   last user message) that followed a reasoning item in `before` follows another
///   one, or none, in `after` (reasoning of earlier turns may be dropped);
/// - [`Rule::GeminiMissingThoughtSignature`] also when `before` carries signatures and
///   `after` lost them all;
/// - [`Rule::ThinkingPrefixChanged`]: a thinking block or reasoning item of `after`
///   whose prefix the rewrite changed, or a Responses item with a server `id` whose
///   reasoning went ([`invalidated_thinking`]);
/// - [`Rule::ControlItemLost`]: a control block of `before`'s live history
///   (Anthropic), or its latest `configuration_update` (OpenAI), is not in `after`
///   byte for byte;
/// - [`Rule::ToolUnloaded`]: a tool `before` has loaded at its end is not loaded in
///   `after` ([`Transcript::loaded_tools`]);
/// - [`Rule::AnthropicTaskBudgetNotCarried`]: `before` sets a task budget and `after`
///   rewrites its history (its messages are not `before`'s followed by new ones)
///   without `remaining`;
/// - [`Rule::AnthropicProgrammaticAnswerLost`]: `before` answers the calls a
///   code-execution script waits on and `after` does not send those answers.
///
/// Violations name messages and lines of `after`; a lost compaction names where the
/// live history of `after` starts. **O(blocks)** expected, of both logs.
pub fn check_against(before: &Transcript, after: &Transcript) -> Vec<RuleViolation> {
    let mut out = check_rules(after);
    let seg = Segment::whole(&after.messages);
    match after.format {
        Format::AnthropicMessages | Format::ClaudeCode => {
            latest_thinking(before, after, &seg, &mut out);
            compaction_lost(before, after, &mut out);
            prefix_changed(before, after, &seg, &mut out);
            control_lost(before, after, &mut out);
            tools_unloaded(before, after, &mut out);
            task_budget(before, after, &mut out);
            script_answer_lost(before, after, &mut out);
        }
        Format::OpenAiResponses | Format::CodexRollout => {
            compaction_lost(before, after, &mut out);
            edited_before_compaction(before, after, &seg, &mut out);
            reasoning_kept(before, after, &seg, &mut out);
            prefix_changed(before, after, &seg, &mut out);
            control_lost(before, after, &mut out);
            tools_unloaded(before, after, &mut out);
        }
        Format::Gemini => {
            let signing = |t: &Transcript| t.messages.iter().any(|m| !m.signed.is_empty());
            if signing(before) && !signing(after) {
                gemini::signatures(&after.messages, true, &mut out);
            }
        }
        _ => {}
    }
    out.sort_by_key(|v| v.message);
    out
}

/// The prints of a message's blocks that are not reasoning, in order; empty when one
/// of them has no print of its own.
fn other_prints(m: &Message) -> Vec<u64> {
    let prints: Vec<u64> = m
        .blocks
        .iter()
        .zip(&m.prints)
        .filter(|((b, _), _)| !matches!(b, Block::Reasoning))
        .map(|(_, &p)| p)
        .collect();
    if prints.contains(&0) {
        Vec::new()
    } else {
        prints
    }
}

/// The prints of a message's reasoning blocks, in order.
fn reasoning_prints(m: &Message) -> Vec<u64> {
    m.blocks
        .iter()
        .zip(&m.prints)
        .filter(|((b, _), _)| matches!(b, Block::Reasoning))
        .map(|(_, &p)| p)
        .collect()
}

fn latest_thinking(
    before: &Transcript,
    after: &Transcript,
    seg: &Segment<'_>,
    out: &mut Vec<RuleViolation>,
) {
    let Some(i) = after
        .messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
    else {
        return;
    };
    let latest = &after.messages[i];
    let key = other_prints(latest);
    if key.is_empty() {
        return;
    }
    let Some(original) = before
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && other_prints(m) == key)
    else {
        return;
    };
    let (was, now) = (reasoning_prints(original), reasoning_prints(latest));
    if was == now {
        return;
    }
    let k = latest
        .blocks
        .iter()
        .position(|(b, _)| matches!(b, Block::Reasoning))
        .unwrap_or(0);
    out.push(seg.violation(
        Rule::AnthropicLatestThinkingModified,
        (i, k),
        None,
        false,
        format!(
            "messages.{i}.content.{k}: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. These blocks must remain as they were in the original response. ({} thinking blocks were received, {} of them are sent back unchanged)",
            was.len(),
            was.iter().zip(&now).take_while(|(a, b)| a == b).count()
        ),
    ));
}

/// The latest compaction block or item of `t`: (message, block, print).
fn latest_compaction(t: &Transcript) -> Option<(usize, usize, u64)> {
    t.messages.iter().enumerate().rev().find_map(|(i, m)| {
        (0..m.blocks.len())
            .rev()
            .find(|&k| m.is_compaction(k))
            .map(|k| (i, k, m.prints[k]))
    })
}

fn compaction_lost(before: &Transcript, after: &Transcript, out: &mut Vec<RuleViolation>) {
    let Some((b, bk, print)) = latest_compaction(before) else {
        return;
    };
    if print == 0 || after.messages.iter().any(|m| m.prints.contains(&print)) {
        return;
    }
    let at = after.live_from();
    let line = after.messages.get(at).map_or(1, |m| m.line);
    let was = before.messages[b].block_line(bk);
    let text = match after.format {
        Format::AnthropicMessages | Format::ClaudeCode => format!(
            "the `compaction` block of the original (message {b}, line {was}) is missing or changed: a request after a compaction sends its block back first, or the summary is gone (not refused)"
        ),
        _ => format!(
            "the `compaction` item of the original (message {b}, line {was}) is missing or changed: it must be sent back unmodified"
        ),
    };
    out.push(RuleViolation {
        rule: Rule::CompactionLost,
        message: at,
        line,
        call_id: None,
        pending_at_end: false,
        text,
    });
}

fn edited_before_compaction(
    before: &Transcript,
    after: &Transcript,
    seg: &Segment<'_>,
    out: &mut Vec<RuleViolation>,
) {
    let Some((c, ck, _)) = latest_compaction(after) else {
        return;
    };
    let known: HashSet<u64> = before
        .messages
        .iter()
        .flat_map(|m| m.prints.iter().copied())
        .collect();
    for (i, m) in after.messages.iter().enumerate().take(c + 1) {
        let end = if i == c { ck } else { m.blocks.len() };
        if let Some(k) = (0..end).find(|&k| m.prints[k] != 0 && !known.contains(&m.prints[k])) {
            out.push(seg.violation(
                Rule::ResponsesEditedBeforeCompaction,
                (i, k),
                None,
                false,
                format!("input[{i}]: items before the most recent `compaction` item (message {c}) may be dropped, not edited: this one matches no item of the original"),
            ));
        }
    }
}

/// Every block in log order: (message, block, print).
fn flat(t: &Transcript) -> impl Iterator<Item = (usize, usize, &Block, u64)> + '_ {
    t.messages.iter().enumerate().flat_map(|(i, m)| {
        m.blocks
            .iter()
            .zip(&m.prints)
            .enumerate()
            .map(move |(k, ((b, _), &p))| (i, k, b, p))
    })
}

fn reasoning_kept(
    before: &Transcript,
    after: &Transcript,
    seg: &Segment<'_>,
    out: &mut Vec<RuleViolation>,
) {
    // The same item may repeat without its reasoning (in a Codex
    // `replacement_history`): then any place is fine. A reasoning item with no text of
    // its own binds nothing.
    let needs = followed_reasoning(flat(before).map(|(_, _, b, p)| (b, p)), |r| r != 0);
    // Only the current turn: reasoning of earlier turns may be dropped (the API
    // ignores it), as Anthropic's thinking of finished turns may.
    let turn = after
        .messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .map_or(0, |u| u + 1);
    let mut previous: Option<(&Block, u64)> = None;
    for (i, k, b, p) in flat(after) {
        if i < turn {
            previous = Some((b, p));
            continue;
        }
        if let Some(Some(reasoning)) = needs.get(&p) {
            let kept = previous
                .filter(|(b, _)| matches!(b, Block::Reasoning))
                .is_some_and(|(_, q)| reasoning.contains(&q));
            if !kept {
                let id = match b {
                    Block::Call { id, .. } => Some(id),
                    _ => None,
                };
                out.push(seg.violation(
                    Rule::ResponsesItemWithoutReasoning,
                    (i, k),
                    id,
                    false,
                    format!("input[{i}]: Item was provided without its required 'reasoning' item (the one right before it in the original)"),
                ));
            }
        }
        previous = Some((b, p));
    }
}

/// Preserved thinking and reasoning items bound to a prefix the rewrite changed.
fn prefix_changed(
    before: &Transcript,
    after: &Transcript,
    seg: &Segment<'_>,
    out: &mut Vec<RuleViolation>,
) {
    let anthropic = matches!(after.format, Format::AnthropicMessages | Format::ClaudeCode);
    for v in invalidated_thinking(before, after) {
        let (i, k) = (v.message, v.block);
        let why = match v.changed_at {
            Some(p) => format!("the prefix before it changed at message {p}"),
            None => "the block itself is not one the provider produced".to_owned(),
        };
        let text = if anthropic {
            format!(
                "messages.{i}.content.{k}: Invalid `signature` in `thinking` block. The block is bound to a different conversation. ({why}; with `prefix_mismatch_behavior: \"drop_block\"` the block is dropped silently instead)"
            )
        } else if v.server_id {
            format!(
                "input[{i}]: the item carries a server `id` but the reasoning item before it was dropped or invalidated ({why}): refused; strip the `id`"
            )
        } else {
            format!(
                "input[{i}]: a reasoning item after a prefix change is dropped by the model ({why}; not refused)"
            )
        };
        out.push(seg.violation(Rule::ThinkingPrefixChanged, (i, k), None, false, text));
    }
}

/// The control blocks a rewrite must keep: every one of `before`'s live history
/// (Anthropic), or its latest `configuration_update` (OpenAI): (message, block,
/// print).
fn controls(t: &Transcript) -> Vec<(usize, usize, u64)> {
    let mut all = t
        .messages
        .iter()
        .enumerate()
        .skip(t.live_from())
        .flat_map(|(i, m)| {
            m.blocks
                .iter()
                .enumerate()
                .filter(|(k, (b, _))| matches!(b, Block::Control(_)) && m.prints[*k] != 0)
                .map(move |(k, (b, _))| (i, k, b, m.prints[k]))
        });
    match t.format {
        Format::OpenAiResponses | Format::CodexRollout => all
            .rfind(|(_, _, b, _)| **b == Block::Control(Control::ConfigurationUpdate))
            .map(|(i, k, _, p)| (i, k, p))
            .into_iter()
            .collect(),
        _ => all.map(|(i, k, _, p)| (i, k, p)).collect(),
    }
}

fn control_lost(before: &Transcript, after: &Transcript, out: &mut Vec<RuleViolation>) {
    let kept: HashSet<u64> = after
        .messages
        .iter()
        .flat_map(|m| m.prints.iter().copied())
        .collect();
    let at = after.live_from();
    let line = after.messages.get(at).map_or(1, |m| m.line);
    for (i, k, p) in controls(before) {
        if kept.contains(&p) {
            continue;
        }
        let name = match &before.messages[i].blocks[k].0 {
            Block::Control(c) => c.name(),
            _ => "control",
        };
        let was = before.messages[i].block_line(k);
        out.push(RuleViolation {
            rule: Rule::ControlItemLost,
            message: at,
            line,
            call_id: None,
            pending_at_end: false,
            text: format!("the `{name}` control item of the original (message {i}, line {was}) is missing or changed: control items stay where they were sent, never summarized or moved"),
        });
    }
}

fn tools_unloaded(before: &Transcript, after: &Transcript, out: &mut Vec<RuleViolation>) {
    let now: HashSet<&str> = after.loaded_tools().into_iter().collect();
    let at = after.live_from();
    let line = after.messages.get(at).map_or(1, |m| m.line);
    let live = before.live_from();
    for tool in before.loaded_tools() {
        if now.contains(tool) {
            continue;
        }
        let from = before
            .tools
            .iter()
            .rev()
            .find(|c| c.loaded && c.tool == tool && c.message >= live)
            .map_or(0, |c| c.message);
        out.push(RuleViolation {
            rule: Rule::ToolUnloaded,
            message: at,
            line,
            call_id: None,
            pending_at_end: false,
            text: format!("the tool `{tool}` loaded by message {from} of the original is no longer loaded: the block that loaded it was cleared or summarized (pin it, or re-state the tool)"),
        });
    }
}

/// Whether `after`'s live history is `before`'s with messages appended (or the same):
/// the byte prints of every message of `before` come first, unchanged.
fn extends(before: &Transcript, after: &Transcript) -> bool {
    let was = &before.messages[before.live_from()..];
    let now = &after.messages[after.live_from()..];
    was.len() <= now.len() && was.iter().zip(now).all(|(a, b)| a.prints == b.prints)
}

fn task_budget(before: &Transcript, after: &Transcript, out: &mut Vec<RuleViolation>) {
    let Some(budget) = before.task_budget else {
        return;
    };
    if extends(before, after) || after.task_budget.is_some_and(|b| b.remaining.is_some()) {
        return;
    }
    let total = budget
        .total
        .map_or_else(|| "the total".to_owned(), |t| t.to_string());
    out.push(RuleViolation {
        rule: Rule::AnthropicTaskBudgetNotCarried,
        message: after.live_from(),
        line: 1,
        call_id: None,
        pending_at_end: false,
        text: format!("the original sets `output_config.task_budget` ({total} tokens) and this rewrite of its history passes no `remaining`: after a client compaction the budget left is carried in `remaining`, or the model's countdown restarts at `total` (not refused)"),
    });
}

/// The calls a code-execution script of `before` waits on, answered there, are
/// answered at the end of `after` too.
fn script_answer_lost(before: &Transcript, after: &Transcript, out: &mut Vec<RuleViolation>) {
    let Some((_, waiting)) = super::waiting_script(&before.messages) else {
        return;
    };
    let still = super::waiting_script(&after.messages);
    let answered: Vec<&crate::CallId> = still
        .as_ref()
        .map(|(_, c)| c.iter().map(|(_, id, _)| *id).collect())
        .unwrap_or_default();
    let Some(&(_, lost, _)) = waiting.iter().find(|(_, id, _)| !answered.contains(id)) else {
        return;
    };
    let at = after.messages.len().saturating_sub(1);
    out.push(RuleViolation {
        rule: Rule::AnthropicProgrammaticAnswerLost,
        message: at,
        line: after.messages.last().map_or(1, |m| m.line),
        call_id: Some(lost.clone()),
        pending_at_end: false,
        text: format!("the original answers programmatic call {lost}, which a code-execution script waits on, in its last message; this rewrite does not send that answer after the call, so the script never receives it"),
    });
}
