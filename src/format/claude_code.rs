//! Claude Code session JSONL: one record per line. `user` and `assistant` records
//! carry a raw Anthropic `message`, but one content block per assistant record
//! (parallel `tool_use` blocks are separate records sharing `message.id`) and one
//! `tool_result` per user record. Consecutive records of one role are merged back
//! into the API message they came from (the API merges consecutive same-role
//! messages too). A `system` record with subtype `compact_boundary` restarts the
//! history; the `isCompactSummary` user record after it opens the new history.
//! `progress`, `file-history-snapshot`, `queue-operation` and other records are not
//! messages and are skipped.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{describe, lines};
use super::{FormatError, Message, Role, TokenCounter, anthropic};

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", default)]
    kind: Option<&'a str>,
    #[serde(default)]
    subtype: Option<&'a str>,
    #[serde(borrow, default)]
    message: Option<&'a RawValue>,
    #[serde(rename = "isSidechain", default)]
    sidechain: bool,
}

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(default)]
    role: Option<&'a str>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// Reads a Claude Code session. **O(len)**.
///
/// Records with `isSidechain: true` belong to a subagent's conversation, which older
/// versions wrote into the main file: they are read as their own log, which is
/// returned only when the file holds nothing else (a subagent's own file).
pub(crate) fn read(text: &str, counter: &dyn TokenCounter) -> Result<Vec<Message>, FormatError> {
    let mut main: Vec<Message> = Vec::new();
    let mut side: Vec<Message> = Vec::new();
    let mut boundary = false;
    for (line, span) in lines(text) {
        let body = &text[span.clone()];
        let invalid = |message: String| FormatError::Invalid { line, message };
        let record: Line<'_> = serde_json::from_str(body).map_err(|e| invalid(describe(&e)))?;
        match (record.kind, record.subtype) {
            (Some("system"), Some("compact_boundary")) => {
                boundary = true;
                continue;
            }
            (Some("user" | "assistant"), _) => {}
            _ => continue,
        }
        let Some(raw) = record.message else {
            continue;
        };
        let msg: Msg<'_> = serde_json::from_str(raw.get())
            .map_err(|e| invalid(format!("message: {}", describe(&e))))?;
        let role = match msg.role.or(record.kind) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            other => return Err(invalid(format!("message with unknown role {other:?}"))),
        };
        let mut blocks =
            anthropic::blocks(msg.content, counter).map_err(|m| invalid(format!("message.{m}")))?;
        if blocks.is_empty() {
            blocks.push((super::Block::Text, counter.count(raw.get())));
        }
        let messages = if record.sidechain {
            &mut side
        } else {
            &mut main
        };
        match messages.last_mut() {
            Some(last) if last.role == role && (!boundary || record.sidechain) => {
                last.spans.push(span);
                last.blocks.extend(blocks);
            }
            _ => messages.push(Message {
                role,
                line,
                spans: vec![span],
                blocks,
                bound: false,
                starts_history: !record.sidechain && std::mem::take(&mut boundary),
            }),
        }
    }
    Ok(if main.is_empty() { side } else { main })
}
