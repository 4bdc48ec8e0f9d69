//! Records JSONL rules: pairing by id only.

use std::collections::HashSet;

use super::{Rule, RuleViolation, Segment};
use crate::CallId;

pub(super) fn check(seg: &Segment<'_>, out: &mut Vec<RuleViolation>) {
    let mut called: HashSet<&CallId> = HashSet::new();
    let mut answered: HashSet<&CallId> = HashSet::new();
    for i in seg.indices() {
        let m = &seg.messages[i];
        for (k, id, _) in m.calls() {
            called.insert(id);
            if !seg.answered_after(i, id) {
                out.push(seg.violation(
                    Rule::UnansweredCall,
                    (i, k),
                    Some(id),
                    seg.pending_at_end(i),
                    "tool_use has no tool_result after it".to_owned(),
                ));
            }
        }
        for (k, id) in m.results() {
            if !called.contains(id) {
                out.push(seg.violation(
                    Rule::OrphanResult,
                    (i, k),
                    Some(id),
                    false,
                    "tool_result has no tool_use before it".to_owned(),
                ));
            } else if !answered.insert(id) {
                out.push(seg.violation(
                    Rule::DuplicateResult,
                    (i, k),
                    Some(id),
                    false,
                    "a second tool_result for this call".to_owned(),
                ));
            }
        }
    }
}
