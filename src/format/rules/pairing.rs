//! Rules of the formats that pair calls by id across the whole input (OpenAI
//! Responses, records JSONL) and Gemini's turn rules.

use std::collections::HashSet;

use super::rules::{Rule, Segment, Violation};
use super::{Block, Role};
use crate::record::CallId;

pub(crate) fn responses(seg: &Segment<'_>, out: &mut Vec<Violation>) {
    let mut called: HashSet<&CallId> = HashSet::new();
    for i in seg.indices() {
        let m = &seg.messages[i];
        for (_, id, _) in m.calls() {
            called.insert(id);
            if !seg.answered_after(i, id) {
                out.push(seg.violation(
                    Rule::ResponsesNoOutput,
                    i,
                    Some(id),
                    seg.pending_at_end(i),
                    format!("No tool output found for function call {id}."),
                ));
            }
        }
        for (_, id) in m.results() {
            if !called.contains(id) {
                out.push(seg.violation(
                    Rule::ResponsesNoCall,
                    i,
                    Some(id),
                    false,
                    format!("No tool call found for function call output with call_id {id}."),
                ));
            }
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
                    last,
                    None,
                    seg.last,
                    "Item of type 'reasoning' was provided without its required following item."
                        .to_owned(),
                ),
            );
        }
    }
}

pub(crate) fn gemini(seg: &Segment<'_>, out: &mut Vec<Violation>) {
    let is_call_turn = |i: usize| {
        seg.get(i)
            .is_some_and(|m| m.role == Role::Assistant && m.calls().next().is_some())
    };
    if is_call_turn(seg.start) {
        let first = &seg.messages[seg.start];
        let id = first.calls().next().map(|(_, id, _)| id);
        out.push(seg.violation(
            Rule::GeminiCallTurnFirst,
            seg.start,
            id,
            false,
            "Please ensure that function call turn comes immediately after a user turn or after a function response turn.".to_owned(),
        ));
    }
    for i in seg.indices() {
        let m = &seg.messages[i];
        let results: Vec<&CallId> = m.results().map(|(_, id)| id).collect();
        if is_call_turn(i) {
            let next: HashSet<&CallId> = seg
                .get(i + 1)
                .map(|n| n.results().map(|(_, id)| id).collect())
                .unwrap_or_default();
            let calls = m.calls().count();
            for (_, id, _) in m.calls() {
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
                out.push(seg.violation(rule, i, Some(id), pending, text));
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
        for id in results {
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
                i,
                Some(id),
                false,
                "Please ensure that function response turn comes immediately after a function call turn.".to_owned(),
            ));
        }
    }
}

pub(crate) fn records(seg: &Segment<'_>, out: &mut Vec<Violation>) {
    let mut called: HashSet<&CallId> = HashSet::new();
    let mut answered: HashSet<&CallId> = HashSet::new();
    for i in seg.indices() {
        let m = &seg.messages[i];
        for (_, id, _) in m.calls() {
            called.insert(id);
            if !seg.answered_after(i, id) {
                out.push(seg.violation(
                    Rule::UnansweredCall,
                    i,
                    Some(id),
                    seg.pending_at_end(i),
                    "tool_use has no tool_result after it".to_owned(),
                ));
            }
        }
        for (_, id) in m.results() {
            if !called.contains(id) {
                out.push(seg.violation(
                    Rule::OrphanResult,
                    i,
                    Some(id),
                    false,
                    "tool_result has no tool_use before it".to_owned(),
                ));
            } else if !answered.insert(id) {
                out.push(seg.violation(
                    Rule::DuplicateResult,
                    i,
                    Some(id),
                    false,
                    "a second tool_result for this call".to_owned(),
                ));
            }
        }
    }
}
