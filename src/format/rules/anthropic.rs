//! Anthropic Messages rules (Claude Code too): a `tool_use` answered in the next
//! message, a `tool_result` answering the previous one, results before text, no
//! `system` role inside `messages`; and over the whole log, the placement of
//! `compaction` blocks.

use std::collections::HashSet;

use crate::format::Message;

use super::{Rule, RuleViolation, Segment};
use crate::CallId;
use crate::format::{Block, Role};

pub(super) fn check(seg: &Segment<'_>, out: &mut Vec<RuleViolation>) {
    for i in seg.indices() {
        let m = &seg.messages[i];
        match m.role {
            Role::System => out.push(seg.violation(
                Rule::AnthropicSystemInMessages,
                (i, 0),
                None,
                false,
                format!("messages.{i}: Unexpected role \"system\". The Messages API accepts a top-level `system` parameter, not \"system\" as an input message role."),
            )),
            Role::Assistant => {
                let next: HashSet<&CallId> = seg
                    .get(i + 1)
                    .filter(|n| n.role != Role::Assistant)
                    .map(|n| n.results().map(|(_, id)| id).collect())
                    .unwrap_or_default();
                for (k, id, _) in m.calls() {
                    if next.contains(id) {
                        continue;
                    }
                    let pending = !seg.answered_after(i, id) && seg.pending_at_end(i);
                    out.push(seg.violation(
                        Rule::AnthropicToolUseWithoutResult,
                        (i, k),
                        Some(id),
                        pending,
                        format!("messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the next message."),
                    ));
                }
            }
            _ => {
                let previous: HashSet<&CallId> = i
                    .checked_sub(1)
                    .and_then(|p| seg.get(p))
                    .filter(|p| p.role == Role::Assistant)
                    .map(|p| p.calls().map(|(_, id, _)| id).collect())
                    .unwrap_or_default();
                let mut text_seen = false;
                for (k, (block, _)) in m.blocks.iter().enumerate() {
                    let Block::Result { id, .. } = block else {
                        text_seen |= matches!(block, Block::Text | Block::Summary(_));
                        continue;
                    };
                    if !previous.contains(id) {
                        out.push(seg.violation(
                            Rule::AnthropicUnexpectedToolResult,
                            (i, k),
                            Some(id),
                            false,
                            format!("messages.{i}.content.{k}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."),
                        ));
                    }
                    if text_seen {
                        out.push(seg.violation(
                            Rule::AnthropicResultAfterText,
                            (i, k),
                            Some(id),
                            false,
                            format!("messages.{i}.content.{k}: `tool_result` blocks must come first in the user message, before any text"),
                        ));
                    }
                }
            }
        }
    }
}

/// The compaction blocks of the whole log: each the first block of its message, only
/// one, and nothing it summarized sent again after the latest. A message after the
/// latest block repeats a summarized one when it holds a call id, a result id or a
/// thinking block (by its bytes) of a message before the block: text may repeat
/// honestly, these cannot. **O(blocks)** expected.
pub(super) fn compaction(messages: &[Message], out: &mut Vec<RuleViolation>) {
    let seg = Segment::whole(messages);
    let mut first: Option<(usize, usize)> = None;
    let mut latest = None;
    for (i, m) in messages.iter().enumerate() {
        for k in (0..m.blocks.len()).filter(|&k| m.is_compaction(k)) {
            if k > 0 {
                out.push(seg.violation(
                    Rule::AnthropicCompactionMisplaced,
                    (i, k),
                    None,
                    false,
                    format!("messages.{i}.content.{k}: compaction_block_misplaced: a `compaction` block must come first; the API ignores every block before it"),
                ));
            }
            match first {
                None => first = Some((i, k)),
                Some((f, fk)) => out.push(seg.violation(
                    Rule::AnthropicCompactionRepeated,
                    (i, k),
                    None,
                    false,
                    format!("messages.{i}.content.{k}: a second `compaction` block (the first is in message {f}, line {}): exactly one is sent back; the API ignores every block before the latest, the earlier summary included (not refused)", messages[f].block_line(fk)),
                )),
            }
            latest = Some(i);
        }
    }
    let Some(c) = latest else {
        return;
    };
    let mut summarized: HashSet<&CallId> = HashSet::new();
    let mut thinking: HashSet<u64> = HashSet::new();
    for m in &messages[..c] {
        for (k, (b, _)) in m.blocks.iter().enumerate() {
            match b {
                Block::Call { id, .. } | Block::Result { id, .. } => {
                    summarized.insert(id);
                }
                Block::Reasoning if m.prints[k] != 0 => {
                    thinking.insert(m.prints[k]);
                }
                _ => {}
            }
        }
    }
    for (i, m) in messages.iter().enumerate().skip(c + 1) {
        let repeated = m.blocks.iter().enumerate().find(|(k, (b, _))| match b {
            Block::Call { id, .. } | Block::Result { id, .. } => summarized.contains(id),
            Block::Reasoning => thinking.contains(&m.prints[*k]),
            _ => false,
        });
        if let Some((k, (b, _))) = repeated {
            let id = match b {
                Block::Call { id, .. } | Block::Result { id, .. } => Some(id),
                _ => None,
            };
            out.push(seg.violation(
                Rule::AnthropicSummarizedAfterCompaction,
                (i, k),
                id,
                false,
                format!("messages.{i}: repeats a message the `compaction` block of message {c} (line {}) summarized: the summarized messages are removed; sent again they count twice (not refused)", messages[c].line),
            ));
        }
    }
}
