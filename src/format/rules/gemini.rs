//! Gemini rules: a function response turn right after its function call turn, with
//! as many response parts as call parts, and no call turn first; the thought
//! signatures of the current turn.

use std::collections::HashSet;

use super::{Rule, RuleViolation, Segment};
use crate::CallId;
use crate::format::{Block, Message, Role};

pub(super) fn check(seg: &Segment<'_>, out: &mut Vec<RuleViolation>) {
    let is_call_turn = |i: usize| {
        seg.get(i)
            .is_some_and(|m| m.role == Role::Assistant && m.calls().next().is_some())
    };
    if is_call_turn(seg.start) {
        let first = &seg.messages[seg.start];
        let (k, id) = first
            .calls()
            .next()
            .map_or((0, None), |(k, id, _)| (k, Some(id)));
        out.push(seg.violation(
            Rule::GeminiCallTurnFirst,
            (seg.start, k),
            id,
            false,
            "Please ensure that function call turn comes immediately after a user turn or after a function response turn.".to_owned(),
        ));
    }
    for i in seg.indices() {
        let m = &seg.messages[i];
        let results: Vec<(usize, &CallId)> = m.results().collect();
        if is_call_turn(i) {
            let next: HashSet<&CallId> = seg
                .get(i + 1)
                .map(|n| n.results().map(|(_, id)| id).collect())
                .unwrap_or_default();
            let calls = m.calls().count();
            for (k, id, _) in m.calls() {
                if next.contains(id) {
                    continue;
                }
                let pending = seg.get(i + 1).is_none() && seg.last;
                out.push(unanswered_call(seg, (i, k), id, calls, next.len(), pending));
            }
        }
        if results.is_empty() {
            continue;
        }
        let previous: HashSet<&CallId> = i
            .checked_sub(1)
            .filter(|&p| is_call_turn(p))
            .map(|p| seg.messages[p].calls().map(|(_, id, _)| id).collect())
            .unwrap_or_default();
        for (k, id) in results {
            if !previous.contains(id) {
                out.push(unexpected_response(seg, (i, k), id, !previous.is_empty()));
            }
        }
    }
}

/// A call of a function call turn (`calls` call parts) that the response turn (with
/// `responses` response parts) does not answer: rule 1 when there is no response turn,
/// rule 3 otherwise. Gemini CLI sessions share it.
pub(super) fn unanswered_call(
    seg: &Segment<'_>,
    at: (usize, usize),
    id: &CallId,
    calls: usize,
    responses: usize,
    pending: bool,
) -> RuleViolation {
    let (rule, text) = if responses == 0 {
        (
            Rule::GeminiResponseNotAfterCall,
            "Please ensure that function response turn comes immediately after a function call turn.".to_owned(),
        )
    } else {
        (
            Rule::GeminiPartCountMismatch,
            format!(
                "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn ({calls} calls, {responses} responses)."
            ),
        )
    };
    seg.violation(rule, at, Some(id), pending, text)
}

/// A response no call of its call turn asked for: rule 1 when there is no call turn
/// (`after_calls` false), rule 3 otherwise. Gemini CLI sessions share it.
pub(super) fn unexpected_response(
    seg: &Segment<'_>,
    at: (usize, usize),
    id: &CallId,
    after_calls: bool,
) -> RuleViolation {
    let rule = if after_calls {
        Rule::GeminiPartCountMismatch
    } else {
        Rule::GeminiResponseNotAfterCall
    };
    seg.violation(
        rule,
        at,
        Some(id),
        false,
        "Please ensure that function response turn comes immediately after a function call turn."
            .to_owned(),
    )
}

/// Thought signatures: in the current turn (the messages after the last user turn
/// that is not only function responses), the first `functionCall` part of each model
/// step carries a `thoughtSignature`. Checked when `signing` or when any part of the
/// log carries a signature (a thinking model's log; others need none). **O(blocks)**.
pub(super) fn signatures(messages: &[Message], signing: bool, out: &mut Vec<RuleViolation>) {
    if !signing && messages.iter().all(|m| m.signed.is_empty()) {
        return;
    }
    let seg = Segment::whole(messages);
    let turn = messages
        .iter()
        .rposition(|m| {
            m.role == Role::User
                && m.blocks
                    .iter()
                    .any(|(b, _)| !matches!(b, Block::Result { .. }))
        })
        .map_or(0, |u| u + 1);
    for (i, m) in messages.iter().enumerate().skip(turn) {
        if m.role != Role::Assistant {
            continue;
        }
        let Some((k, id, name)) = m.calls().next() else {
            continue;
        };
        if !m.signed.contains(&k) {
            out.push(seg.violation(
                Rule::GeminiMissingThoughtSignature,
                (i, k),
                Some(id),
                false,
                format!("Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `{name}`, position {}.", i + 1),
            ));
        }
    }
}
