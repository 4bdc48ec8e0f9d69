//! Gemini CLI rules: Gemini's, on the turns the CLI sends for each message. A
//! `gemini` message with tool calls becomes a function call turn followed by a
//! function response turn built from the calls' results, so each call needs its
//! result in the same message (one response part per call part), and the log cannot
//! start with a call turn.

use std::collections::HashSet;

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
            if answered.contains(id) {
                continue;
            }
            let (rule, text) = if results == 0 {
                (
                    Rule::GeminiResponseNotAfterCall,
                    "Please ensure that function response turn comes immediately after a function call turn.".to_owned(),
                )
            } else {
                (
                    Rule::GeminiPartCountMismatch,
                    format!(
                        "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn ({calls} calls, {results} responses)."
                    ),
                )
            };
            let pending = !seg.answered_after(i, id) && seg.pending_at_end(i);
            out.push(seg.violation(rule, (i, k), Some(id), pending, text));
        }
        for (k, id) in m.results() {
            if called.contains(id) {
                continue;
            }
            let rule = if calls == 0 {
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
