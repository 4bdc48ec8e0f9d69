//! OpenAI Responses input items: role messages, `reasoning`, and calls paired with
//! their outputs by `call_id` (`function_call` / `function_call_output`,
//! `custom_tool_call`, `local_shell_call`, `computer_call`, ...). `web_search_call`
//! and other server-side calls have no output item and count as plain items.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{JsonStr, describe, opt_str, result_line, string_or_json};
use super::{Block, Parsed, Role, TokenCounter, summary_in};
use crate::CallId;

/// The fields of an item that matter; the rest (encrypted reasoning, ...) is skipped
/// without being copied (message content is borrowed, and read only when it holds
/// cutpoint's ledger).
#[derive(Deserialize)]
struct Item<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    role: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    call_id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    name: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    action: Option<&'a RawValue>,
    #[serde(borrow, default)]
    output: Option<&'a RawValue>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// Item types that are calls answered by a `<type>_output` item with the same
/// `call_id`.
pub(crate) const PAIRED_CALLS: [&str; 5] = [
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "computer_call",
    "shell_call",
];

/// Parses one Responses input item. **O(len)**.
pub(crate) fn item<'a>(text: &'a str, counter: &dyn TokenCounter) -> Result<Parsed<'a>, String> {
    let item: Item<'_> = serde_json::from_str(text).map_err(|e| describe(&e))?;
    let tokens = counter.count(text);
    let kind = opt_str(&item.kind).unwrap_or("message");
    let block = if PAIRED_CALLS.contains(&kind) {
        let id = opt_str(&item.call_id)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| format!("{kind} item without a call_id"))?;
        let arguments = match (item.arguments, item.input, item.action) {
            (Some(a), _, _) => string_or_json(Some(a)),
            (None, Some(i), _) => string_or_json(Some(i)),
            (None, None, a) => string_or_json(a),
        };
        Block::Call {
            id: CallId::from(id),
            name: opt_str(&item.name).unwrap_or(kind).to_owned(),
            arguments,
        }
    } else if let Some(call_kind) = kind.strip_suffix("_output") {
        if !PAIRED_CALLS.contains(&call_kind) {
            Block::Text
        } else {
            let id = opt_str(&item.call_id)
                .filter(|id| !id.is_empty())
                .ok_or_else(|| format!("{kind} item without a call_id"))?;
            Block::Result {
                id: CallId::from(id),
                first_line: result_line(item.output),
            }
        }
    } else if kind == "reasoning" {
        Block::Reasoning
    } else if kind == "compaction" {
        Block::Compaction
    } else {
        Block::Text
    };
    // A user message holding cutpoint's ledger is an earlier summary.
    let block = match (kind, opt_str(&item.role), item.content) {
        ("message", Some("user"), Some(content)) => summary_in(content.get()).unwrap_or(block),
        _ => block,
    };
    let role = match (kind, opt_str(&item.role)) {
        ("message", Some("user")) => Role::User,
        ("message", Some("assistant")) => Role::Assistant,
        ("message", Some("system" | "developer")) => Role::System,
        ("message", Some(other)) => return Err(format!("unknown role {other:?}")),
        _ => Role::Item,
    };
    Ok(Parsed {
        role,
        blocks: vec![(block, tokens, text)],
        signed: Vec::new(),
    })
}
