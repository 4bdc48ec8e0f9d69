//! From messages to records: which messages a provider binds to the one before, and
//! the record sequence the tracker reads.

use std::collections::HashMap;

use super::{Block, Format, Role, Transcript, gemini};
use crate::{CallId, Record};

/// Assigns Gemini's missing ids and marks the messages a provider binds to the one
/// before them. **O(blocks)**.
///
/// - OpenAI Chat: a `tool` message (the run of tool messages stays with the assistant
///   message that called; a retained log never starts with one).
/// - OpenAI Responses and Codex: the item after a `reasoning` item ("Item 'rs_…' of
///   type 'reasoning' was provided without its required following item").
/// - Gemini: a function response turn ("function response turn comes immediately
///   after a function call turn").
/// - Anthropic and Claude Code: thinking blocks and their `tool_use` share a message,
///   which is bound already; nothing more.
///
/// A message that starts a new history (after a compaction boundary) is never bound.
pub(crate) fn finish(t: &mut Transcript) {
    if t.format == Format::Gemini {
        gemini::assign_ids(&mut t.messages);
    }
    let mut after_reasoning = false;
    for m in &mut t.messages {
        let bound = match t.format {
            Format::OpenAiChat => m.role == Role::Tool,
            Format::OpenAiResponses | Format::CodexRollout => after_reasoning,
            Format::Gemini => m.results().next().is_some(),
            _ => m.bound,
        };
        m.bound = bound && !m.starts_history;
        after_reasoning = matches!(m.blocks.last(), Some((Block::Reasoning, _)));
    }
}

/// See [`Transcript::records`].
pub(crate) fn records(t: &Transcript, from: usize) -> (Vec<Record>, Vec<usize>) {
    let mut records = Vec::new();
    let mut owner = Vec::new();
    // Original id -> the id its records carry: a reused id (OpenAI Chat pairs calls
    // with the run of tool messages right after them, so SWE-agent reuses ids across
    // turns) gets a `#N` suffix from its second call on, and the results after it
    // follow the renamed call.
    let mut current: HashMap<CallId, CallId> = HashMap::new();
    let mut uses: HashMap<CallId, usize> = HashMap::new();
    for (index, m) in t.messages.iter().enumerate().skip(from) {
        for (k, (block, tokens)) in m.blocks.iter().enumerate() {
            let plain = || match m.role {
                Role::Assistant | Role::Item => Record::assistant(*tokens),
                _ => Record::user(*tokens),
            };
            let record = match block {
                Block::Call { id, .. } if !id.is_empty() => {
                    let n = uses.entry(id.clone()).or_insert(0);
                    *n += 1;
                    let renamed = if *n == 1 {
                        id.clone()
                    } else {
                        CallId::from(format!("{id}#{n}"))
                    };
                    current.insert(id.clone(), renamed.clone());
                    Record::tool_use(renamed, *tokens)
                }
                Block::Result { id, .. } if !id.is_empty() => {
                    let renamed = current.get(id).unwrap_or(id).clone();
                    Record::tool_result(renamed, *tokens)
                }
                _ => plain(),
            };
            let bound = !records.is_empty() && (k > 0 || m.bound);
            records.push(if bound {
                record.bound_to_previous()
            } else {
                record
            });
            owner.push(index);
        }
    }
    (records, owner)
}
