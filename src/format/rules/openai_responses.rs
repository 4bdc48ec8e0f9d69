//! OpenAI Responses rules (Codex too): calls and outputs paired by `call_id` across
//! the input, and a `reasoning` item bound to the item after it (one the model
//! produced: an output, an input message or another reasoning item is no follower),
//! except where the turn was interrupted: a reasoning item right before Codex's
//! `<turn_aborted>` note ([`Message::aborts_turn`](crate::format::Message::aborts_turn))
//! ended with its turn, and the session goes on from the next user message.

use super::{ById, Rule, RuleViolation, Segment};
use crate::format::{Block, Control, Format, Message};

/// `compaction_trigger`: the last input item of a request, with no `id`, never
/// persisted (so never in a Codex rollout, and never followed by another item).
pub(super) fn compaction_trigger(
    format: Format,
    messages: &[Message],
    out: &mut Vec<RuleViolation>,
) {
    let seg = Segment::whole(messages);
    for (i, m) in messages.iter().enumerate() {
        if m.blocks.first().map(|(b, _)| b) != Some(&Block::Control(Control::CompactionTrigger)) {
            continue;
        }
        let why = if format == Format::CodexRollout {
            Some(
                "a rollout persists it; it is sent once, as a request's last input item, and never stored",
            )
        } else if i + 1 < messages.len() {
            Some("it must be the final input item")
        } else if !m.signed.is_empty() {
            Some("it carries an `id`; it is never persisted, so it has none")
        } else {
            None
        };
        if let Some(why) = why {
            out.push(seg.violation(
                Rule::ResponsesCompactionTriggerMisplaced,
                (i, 0),
                None,
                false,
                format!("input[{i}]: `compaction_trigger` is misplaced: {why}."),
            ));
        }
    }
}

pub(super) fn check(seg: &Segment<'_>, out: &mut Vec<RuleViolation>) {
    ById {
        unanswered: (Rule::ResponsesNoOutput, |id| {
            format!("No tool output found for function call {id}.")
        }),
        orphan: (Rule::ResponsesNoCall, |id| {
            format!("No tool call found for function call output with call_id {id}.")
        }),
        duplicate: None,
    }
    .check(seg, out);
    for i in seg.indices() {
        let m = &seg.messages[i];
        if !matches!(m.blocks.last(), Some((Block::Reasoning, _))) {
            continue;
        }
        let Some(next) = seg.get(i + 1) else {
            continue;
        };
        if !next.follows_reasoning() && !next.aborts_turn {
            out.push(
                seg.violation(
                    Rule::ResponsesReasoningWithoutFollower,
                    (i, m.blocks.len() - 1),
                    None,
                    false,
                    "Item of type 'reasoning' was provided without its required following item."
                        .to_owned(),
                ),
            );
        }
    }
    if let Some(last) = seg.end.checked_sub(1).filter(|&l| l >= seg.start) {
        if matches!(
            seg.messages[last].blocks.last(),
            Some((Block::Reasoning, _))
        ) {
            out.push(
                seg.violation(
                    Rule::ResponsesReasoningWithoutFollower,
                    (last, seg.messages[last].blocks.len() - 1),
                    None,
                    seg.last,
                    "Item of type 'reasoning' was provided without its required following item."
                        .to_owned(),
                ),
            );
        }
    }
}
