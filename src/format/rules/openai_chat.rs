//! OpenAI Chat Completions rules: each call answered in the run of `tool` messages
//! right after the assistant message that made it.

use std::collections::HashSet;

use super::{Rule, RuleViolation, Segment};
use crate::CallId;
use crate::format::Role;

pub(super) fn check(seg: &Segment<'_>, out: &mut Vec<RuleViolation>) {
    // The assistant message (index) owning the current run of tool messages.
    let mut owner: Option<usize> = None;
    for i in seg.indices() {
        let m = &seg.messages[i];
        if m.role != Role::Tool {
            owner = (m.role == Role::Assistant && m.calls().next().is_some()).then_some(i);
            if owner.is_some() {
                let mut run: HashSet<&CallId> = HashSet::new();
                for j in i + 1..seg.end {
                    let t = &seg.messages[j];
                    if t.role != Role::Tool {
                        break;
                    }
                    run.extend(t.results().map(|(_, id)| id));
                }
                seg.unanswered_calls(i, &run, Rule::ChatCallWithoutResponse, out, |id| {
                    format!("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {id}")
                });
            }
            continue;
        }
        for (k, id) in m.results() {
            match owner {
                None => out.push(seg.violation(
                    Rule::ChatToolWithoutCalls,
                    (i, k),
                    Some(id),
                    false,
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.".to_owned(),
                )),
                Some(o) if !seg.messages[o].calls().any(|(_, c, _)| c == id) => {
                    out.push(seg.violation(
                        Rule::ChatToolCallIdNotFound,
                        (i, k),
                        Some(id),
                        false,
                        format!("Invalid parameter: 'tool_call_id' of '{id}' not found in 'tool_calls' of previous message."),
                    ))
                }
                Some(_) => {}
            }
        }
    }
}
