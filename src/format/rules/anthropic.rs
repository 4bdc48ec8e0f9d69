//! Anthropic Messages rules (Claude Code too): a `tool_use` answered in the next
//! message, a `tool_result` answering the previous one, results before text, the
//! placement of mid-conversation `system` messages, a programmatic call's answer
//! holding only results; and over the whole log, the placement of `compaction`
//! blocks.

use std::collections::HashSet;

use crate::format::Message;

use super::{Rule, RuleViolation, Segment};
use crate::CallId;
use crate::format::{Block, Note, Role};

pub(super) fn check(seg: &Segment<'_>, out: &mut Vec<RuleViolation>) {
    for i in seg.indices() {
        let m = &seg.messages[i];
        match m.role {
            Role::System => placement(seg, i, out),
            Role::Assistant => {
                programmatic(seg, i, out);
                let next: HashSet<&CallId> = seg
                    .get(i + 1)
                    .filter(|n| n.role != Role::Assistant)
                    .map(|n| n.results().map(|(_, id)| id).collect())
                    .unwrap_or_default();
                seg.unanswered_calls(i, &next, Rule::AnthropicToolUseWithoutResult, out, |id| {
                    format!("messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.")
                });
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

/// Why the `system` message `i` is misplaced, if it is.
fn misplaced(seg: &Segment<'_>, i: usize) -> Option<String> {
    let Some(previous) = i.checked_sub(1).and_then(|p| seg.get(p)) else {
        return Some("it is the first message; a system message cannot open `messages` (use the top-level `system` field)".to_owned());
    };
    match previous.role {
        Role::System => {
            return Some(
                "it follows another system message; put both instructions in one".to_owned(),
            );
        }
        Role::Assistant => {
            let last = previous.blocks.len().saturating_sub(1);
            if previous.calls().next().is_some() {
                return Some("it comes between a `tool_use` and its `tool_result`".to_owned());
            }
            if !previous.has_note(last, Note::ServerCall) {
                return Some("it follows an assistant turn that does not end in a server tool use; it goes right after a user or tool-result turn".to_owned());
            }
        }
        _ => {}
    }
    match seg.get(i + 1) {
        Some(next) if next.role != Role::Assistant && next.role != Role::System => Some(
            "it is followed by a user turn; it goes right before an assistant turn or at the end"
                .to_owned(),
        ),
        _ => None,
    }
}

/// Mid-conversation system messages, by their placement rules.
fn placement(seg: &Segment<'_>, i: usize, out: &mut Vec<RuleViolation>) {
    if let Some(why) = misplaced(seg, i) {
        out.push(seg.violation(
            Rule::AnthropicSystemMessagePlacement,
            (i, 0),
            None,
            false,
            format!("messages.{i}: a mid-conversation system message is misplaced: {why}."),
        ));
    }
}

/// The answer to programmatic calls of assistant message `i` holds only results.
fn programmatic(seg: &Segment<'_>, i: usize, out: &mut Vec<RuleViolation>) {
    let m = &seg.messages[i];
    let Some((_, id, _)) = m
        .calls()
        .find(|(k, _, _)| m.has_note(*k, Note::ProgrammaticCall))
    else {
        return;
    };
    let Some(next) = seg.get(i + 1).filter(|n| n.role == Role::User) else {
        return;
    };
    if let Some(k) = next
        .blocks
        .iter()
        .position(|(b, _)| !matches!(b, Block::Result { .. }))
    {
        out.push(seg.violation(
            Rule::AnthropicProgrammaticResultNotAlone,
            (i + 1, k),
            Some(id),
            false,
            format!("messages.{}.content.{k}: the message answering a programmatic tool call (a `tool_use` with a code-execution `caller`, {id}) must hold only `tool_result` blocks", i + 1),
        ));
    }
}

/// A programmatic call a script waits on: its block in the assistant message, its
/// id, and the block of the answer that answers it.
pub(crate) type Waiting<'a> = (usize, &'a CallId, usize);

/// The last assistant message of `messages` and its programmatic calls that the
/// message after it answers (block index and id in the assistant message; the
/// answer's block index): the calls a code-execution script is waiting on when
/// the log is sent. `None` when there are none. **O(blocks of the two messages)**
/// after the walk back to the last assistant message.
pub(crate) fn waiting_script(messages: &[Message]) -> Option<(usize, Vec<Waiting<'_>>)> {
    let a = messages.iter().rposition(|m| m.role == Role::Assistant)?;
    let m = &messages[a];
    let answer = messages.get(a + 1)?;
    let calls: Vec<Waiting<'_>> = m
        .calls()
        .filter(|(k, _, _)| m.has_note(*k, Note::ProgrammaticCall))
        .filter_map(|(k, id, _)| {
            let r = answer.results().find(|(_, r)| *r == id)?.0;
            Some((k, id, r))
        })
        .collect();
    (!calls.is_empty()).then_some((a, calls))
}

/// A request answering a waiting script's calls names its `container`.
pub(super) fn container_missing(messages: &[Message], out: &mut Vec<RuleViolation>) {
    let Some((a, calls)) = waiting_script(messages) else {
        return;
    };
    let (k, id, _) = calls[0];
    out.push(Segment::whole(messages).violation(
        Rule::AnthropicProgrammaticContainerMissing,
        (a, k),
        Some(id),
        false,
        format!("container_id is required when there are pending tool uses generated by code execution with tools. (messages.{a}.content.{k}: `tool_use` {id} has a code-execution `caller` and messages.{} answers it; the request names no `container`)", a + 1),
    ));
}

/// The results of a waiting script's calls were written before its container
/// expired.
pub(super) fn container_expired(messages: &[Message], out: &mut Vec<RuleViolation>) {
    let Some((a, calls)) = waiting_script(messages) else {
        return;
    };
    let answer = &messages[a + 1];
    let note_at = |m: &Message, k: usize, written: bool| {
        m.notes.iter().find_map(|&(b, n)| match n {
            Note::ContainerExpiresAt(t) if b == k && !written => Some(t),
            Note::WrittenAt(t) if b == k && written => Some(t),
            _ => None,
        })
    };
    for (k, id, r) in calls {
        let (Some(expires), Some(written)) =
            (note_at(&messages[a], k, false), note_at(answer, r, true))
        else {
            continue;
        };
        if written > expires {
            out.push(Segment::whole(messages).violation(
                Rule::AnthropicProgrammaticContainerExpired,
                (a + 1, r),
                Some(id),
                false,
                format!("messages.{}.content.{r}: the result of programmatic call {id} was written {}s after the code-execution container it answers expired (`container.expires_at` of the response that made the call): the script waiting for it is gone", a + 1, (written - expires + 999) / 1000),
            ));
        }
    }
}
