//! Gemini CLI rules: Gemini's, on the turns the CLI sends for each message. A
//! `gemini` message with tool calls becomes a function call turn followed by a
//! function response turn built from the calls' results, so each call needs its
//! result in the same message (one response part per call part), and the log cannot
//! start with a call turn.

use std::collections::HashSet;

use super::gemini::{unanswered_call, unexpected_response};
use super::{Rule, RuleViolation, Segment};
use crate::CallId;
use crate::format::Role;

pub(super) fn check(seg: &Segment<'_>, out: &mut Vec<RuleViolation>) {
    if let Some(first) = seg.get(seg.start).filter(|m| m.role == Role::Assistant) {
        if let Some((k, id, _)) = first.calls().next() {
            out.push(seg.violation(
                Rule::GeminiCallTurnFirst,
                (seg.start, k),
                Some(id),
                false,
                "Please ensure that function call turn comes immediately after a user turn or after a function response turn.".to_owned(),
            ));
        }
    }
    for i in seg.indices() {
        let m = &seg.messages[i];
        let called: HashSet<&CallId> = m.calls().map(|(_, id, _)| id).collect();
        let answered: HashSet<&CallId> = m.results().map(|(_, id)| id).collect();
        let (calls, results) = (m.calls().count(), m.results().count());
        for (k, id, _) in m.calls() {
            if !answered.contains(id) {
                let pending = seg.still_pending(i, id);
                out.push(unanswered_call(seg, (i, k), id, calls, results, pending));
            }
        }
        for (k, id) in m.results() {
            if !called.contains(id) {
                out.push(unexpected_response(seg, (i, k), id, calls > 0));
            }
        }
    }
}
