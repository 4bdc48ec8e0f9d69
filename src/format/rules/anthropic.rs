//! Anthropic Messages rules (Claude Code too): a `tool_use` answered in the next
//! message, a `tool_result` answering the previous one, results before text, no
//! `system` role inside `messages`.

use std::collections::HashSet;

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
