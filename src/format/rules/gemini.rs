//! Gemini rules: a function response turn right after its function call turn, with
//! as many response parts as call parts, and no call turn first.

use std::collections::HashSet;

use super::{Rule, RuleViolation, Segment};
use crate::CallId;
use crate::format::Role;

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
                let (rule, text) = if next.is_empty() {
                    (
                        Rule::GeminiResponseNotAfterCall,
                        "Please ensure that function response turn comes immediately after a function call turn.".to_owned(),
                    )
                } else {
                    (
                        Rule::GeminiPartCountMismatch,
                        format!(
                            "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn ({calls} calls, {} responses).",
                            next.len()
                        ),
                    )
                };
                out.push(seg.violation(rule, (i, k), Some(id), pending, text));
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
            if previous.contains(id) {
                continue;
            }
            let rule = if previous.is_empty() {
                Rule::GeminiResponseNotAfterCall
            } else {
                Rule::GeminiPartCountMismatch
            };
            out.push(seg.violation(
                rule,
                (i, k),
                Some(id),
                false,
                "Please ensure that function response turn comes immediately after a function call turn.".to_owned(),
            ));
        }
    }
}
