//! Records JSONL rules: pairing by id only.

use super::{ById, Rule, RuleViolation, Segment};

pub(super) fn check(seg: &Segment<'_>, out: &mut Vec<RuleViolation>) {
    ById {
        unanswered: (Rule::UnansweredCall, |_| {
            "tool_use has no tool_result after it".to_owned()
        }),
        orphan: (Rule::OrphanResult, |_| {
            "tool_result has no tool_use before it".to_owned()
        }),
        duplicate: Some((Rule::DuplicateResult, |_| {
            "a second tool_result for this call".to_owned()
        })),
    }
    .check(seg, out);
}
