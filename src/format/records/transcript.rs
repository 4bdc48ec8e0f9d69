//! Records JSONL as a transcript: one message per record, its `bound` flag kept.

use super::parse_entry;
use crate::RecordKind;
use crate::compact::{Payload, SummaryParts};
use crate::format::json_doc::lines;
use crate::format::{Block, FormatError, Message, Role};

/// Reads records JSONL. Token counts come from the records. **O(len)**.
pub(crate) fn read(text: &str) -> Result<Vec<Message>, FormatError> {
    let mut messages = Vec::new();
    for (line, span) in lines(text) {
        let entry = parse_entry(&text[span.clone()], line).map_err(|e| FormatError::Invalid {
            line,
            message: strip_line(&e.to_string(), line),
        })?;
        let units = entry.units();
        let (prose, orphans) = match entry.payload {
            Payload::Summary { text, orphans, .. } => (text.unwrap_or_default(), orphans),
            _ => (String::new(), Vec::new()),
        };
        let (kind, tokens, bound) = entry.record.into_parts();
        let (role, block) = match kind {
            RecordKind::ToolUse(id) => (
                Role::Assistant,
                Block::Call {
                    id,
                    name: String::new(),
                    arguments: String::new(),
                },
            ),
            RecordKind::ToolResult(id) => (
                Role::User,
                Block::Result {
                    id,
                    first_line: String::new(),
                },
            ),
            RecordKind::Assistant => (Role::Assistant, Block::Text),
            // A summary: its units (or bare ones for the ids it covers) and its text.
            RecordKind::Summary(_) => (
                Role::User,
                Block::Summary(SummaryParts::new(prose, units, orphans)),
            ),
            _ => (Role::User, Block::Text),
        };
        messages.push(Message {
            bound,
            ..Message::from_line(role, line, span, vec![(block, tokens)])
        });
    }
    Ok(messages)
}

fn strip_line(text: &str, line: usize) -> String {
    text.strip_prefix(&format!("line {line}: "))
        .unwrap_or(text)
        .to_owned()
}
