//! Codex rollout JSONL: lines `{"timestamp","type","payload"}`. Only
//! `type: "response_item"` lines are model history, one item per line, read as
//! OpenAI Responses items. A `type: "compacted"` line replaces all earlier history
//! with its `replacement_history`: it becomes one message that opens the new history.
//! `session_meta`, `turn_context`, `event_msg` and other lines are skipped.
//!
//! When the user interrupts a turn, Codex ends it with a user message of its own
//! whose text starts with `<turn_aborted>` ([`TURN_ABORTED`]); that message is marked
//! [`Message::aborts_turn`], so a reasoning item the interrupt left without its item
//! is not reported (see `docs/reasoning.md`, "Interrupted turns").

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{describe, lines};
use super::{Block, FormatError, Message, Role, TokenCounter, fingerprint, openai_responses};

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", default)]
    kind: Option<&'a str>,
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
}

/// How Codex's own interrupt note starts (a `response_item` user message).
pub(crate) const TURN_ABORTED: &str = "<turn_aborted>";

/// Whether the `response_item` payload `item` is Codex's interrupt note: a `user`
/// message whose first text part starts with [`TURN_ABORTED`]. **O(len)** of the
/// item, only for an item that holds the marker at all.
fn is_turn_aborted(item: &str) -> bool {
    #[derive(Deserialize)]
    struct Part<'a> {
        #[serde(borrow, default)]
        text: Option<std::borrow::Cow<'a, str>>,
    }
    #[derive(Deserialize)]
    struct Note<'a> {
        #[serde(default)]
        role: Option<&'a str>,
        #[serde(borrow, default)]
        content: Option<Vec<Part<'a>>>,
    }
    if !item.contains(TURN_ABORTED) {
        return false;
    }
    let Ok(note) = serde_json::from_str::<Note<'_>>(item) else {
        return false;
    };
    note.role == Some("user")
        && note
            .content
            .and_then(|parts| parts.into_iter().next())
            .and_then(|p| p.text)
            .is_some_and(|t| t.trim_start().starts_with(TURN_ABORTED))
}

#[derive(Deserialize)]
struct Compacted<'a> {
    #[serde(borrow, default)]
    replacement_history: Option<Vec<&'a RawValue>>,
}

/// Reads a Codex rollout. **O(len)**.
pub(crate) fn read(text: &str, counter: &dyn TokenCounter) -> Result<Vec<Message>, FormatError> {
    let mut messages = Vec::new();
    for (line, span) in lines(text) {
        let body = &text[span.clone()];
        let invalid = |message: String| FormatError::Invalid { line, message };
        let record: Line<'_> = serde_json::from_str(body).map_err(|e| invalid(describe(&e)))?;
        let Some(payload) = record.payload else {
            continue;
        };
        match record.kind {
            Some("response_item") => {
                let parsed = openai_responses::item(payload.get(), counter)
                    .map_err(|m| invalid(format!("payload: {m}")))?;
                let role = parsed.role;
                messages.push(Message {
                    aborts_turn: is_turn_aborted(payload.get()),
                    ..Message::printed(role, line, span, parsed.into_blocks())
                });
            }
            Some("compacted") => {
                let compacted: Compacted<'_> = serde_json::from_str(payload.get())
                    .map_err(|e| invalid(format!("payload: {}", describe(&e))))?;
                let mut blocks = Vec::new();
                for (k, item) in compacted
                    .replacement_history
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                {
                    let parsed = openai_responses::item(item.get(), counter)
                        .map_err(|m| invalid(format!("replacement_history.{k}: {m}")))?;
                    blocks.extend(parsed.into_blocks());
                }
                if blocks.is_empty() {
                    blocks.push((
                        Block::Text,
                        counter.count_json(payload.get()),
                        fingerprint(payload.get()),
                    ));
                }
                messages.push(Message {
                    starts_history: true,
                    ..Message::printed(Role::Compacted, line, span, blocks)
                });
            }
            _ => {}
        }
    }
    Ok(messages)
}
