//! One checker for every policy's output, cutpoint's and rig-memory's alike: the
//! history a policy was given, the history it returned, the budget and the counter.
//!
//! - **broken pairs**: a tool result in the output whose call is not in an earlier
//!   assistant message of the output, or a call in the output whose result (present
//!   in the input) is not in the output;
//! - **pending calls dropped**: calls the input holds without a result (still
//!   running) that the output does not hold;
//! - **arguments lost**: calls of the input missing from the output whose id does not
//!   appear on a line of the output's text that also holds the call's arguments
//!   (as cutpoint's ledger writes them);
//! - **budget met**: the output's tokens by the counter are at most the budget.

use std::collections::{HashMap, HashSet};

use rig_core::completion::Message;
use rig_core::message::{AssistantContent, UserContent};
use rig_memory::TokenCounter;

use crate::convert::call_arguments;

/// What [`check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Checked {
    /// Messages in and out.
    pub messages_in: usize,
    /// Messages out.
    pub messages_out: usize,
    /// Tokens out, by the counter.
    pub tokens_out: u64,
    /// Whether `tokens_out <= budget`.
    pub budget_met: bool,
    /// Results without their call, and calls without their (existing) result.
    pub broken_pairs: usize,
    /// Calls pending in the input that the output dropped.
    pub pending_dropped: usize,
    /// Calls of the input that are not in the output.
    pub calls_removed: usize,
    /// Removed calls whose arguments cannot be found next to their id in the output.
    pub arguments_lost: usize,
    /// The first problem, for a message.
    pub first: Option<String>,
}

impl Checked {
    /// No broken pair, no pending call dropped, no arguments lost. **O(1)**.
    pub fn pairs_and_ledger_ok(&self) -> bool {
        self.broken_pairs == 0 && self.pending_dropped == 0 && self.arguments_lost == 0
    }
}

fn note(first: &mut Option<String>, what: impl FnOnce() -> String) {
    if first.is_none() {
        *first = Some(what());
    }
}

/// Checks `output` (what a policy returned) against `input` (what it was given).
/// **O(size of both)** expected.
pub fn check(
    input: &[Message],
    output: &[Message],
    budget: u64,
    counter: &dyn TokenCounter,
) -> Checked {
    let mut first = None;
    // The input's calls (id -> arguments) and answered ids.
    let mut calls_in: Vec<(String, String)> = Vec::new();
    let mut answered_in: HashSet<String> = HashSet::new();
    for m in input {
        match m {
            Message::Assistant(turn) => {
                for c in &turn.content {
                    if let AssistantContent::ToolCall(call) = c {
                        calls_in
                            .push((call.id.wire().into_owned(), call_arguments(&call.function)));
                    }
                }
            }
            Message::User { content } => {
                for c in content {
                    if let UserContent::ToolResult(r) = c {
                        answered_in.insert(r.call.wire().into_owned());
                    }
                }
            }
            Message::System { .. } => {}
        }
    }
    // The output: calls seen so far, results, and its text lines.
    let mut calls_out: HashSet<String> = HashSet::new();
    let mut results_out: HashSet<String> = HashSet::new();
    let mut broken = 0;
    let mut text = String::new();
    let mut tokens = 0u64;
    for (i, m) in output.iter().enumerate() {
        tokens += counter.count(m) as u64;
        match m {
            Message::Assistant(turn) => {
                for c in &turn.content {
                    match c {
                        AssistantContent::ToolCall(call) => {
                            calls_out.insert(call.id.wire().into_owned());
                        }
                        AssistantContent::Text(t) => {
                            text.push_str(&t.text);
                            text.push('\n');
                        }
                        _ => {}
                    }
                }
            }
            Message::User { content } => {
                for c in content {
                    match c {
                        UserContent::ToolResult(r) => {
                            let id = r.call.wire().into_owned();
                            if !calls_out.contains(&id) {
                                broken += 1;
                                note(&mut first, || {
                                    format!("message {i}: result of {id} without its call")
                                });
                            }
                            results_out.insert(id);
                        }
                        UserContent::Text(t) => {
                            text.push_str(&t.text);
                            text.push('\n');
                        }
                        _ => {}
                    }
                }
            }
            Message::System { content } => {
                text.push_str(content);
                text.push('\n');
            }
        }
    }
    for id in &calls_out {
        if answered_in.contains(id) && !results_out.contains(id) {
            broken += 1;
            note(&mut first, || format!("call {id} kept without its result"));
        }
    }
    // Removed calls; their ids' lines in the output text.
    let removed: HashMap<&str, &str> = calls_in
        .iter()
        .filter(|(id, _)| !calls_out.contains(id))
        .map(|(id, args)| (id.as_str(), args.as_str()))
        .collect();
    let mut pending_dropped = 0;
    for (id, _) in &calls_in {
        if !answered_in.contains(id) && !calls_out.contains(id) {
            pending_dropped += 1;
            note(&mut first, || format!("pending call {id} dropped"));
        }
    }
    let mut found: HashSet<&str> = HashSet::new();
    if !removed.is_empty() {
        for line in text.lines() {
            for word in line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
                if let Some((id, args)) = removed.get_key_value(word)
                    && line.contains(args)
                {
                    found.insert(id);
                }
            }
        }
    }
    let arguments_lost = removed.len() - found.len();
    if arguments_lost > 0 {
        note(&mut first, || {
            let id = removed
                .keys()
                .find(|id| !found.contains(*id))
                .copied()
                .unwrap_or("");
            format!("{arguments_lost} removed calls' arguments not in the output, e.g. {id}")
        });
    }
    Checked {
        messages_in: input.len(),
        messages_out: output.len(),
        tokens_out: tokens,
        budget_met: tokens <= budget,
        broken_pairs: broken,
        pending_dropped,
        calls_removed: removed.len(),
        arguments_lost,
        first,
    }
}
