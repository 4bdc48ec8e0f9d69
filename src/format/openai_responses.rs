//! OpenAI Responses input items: role messages, `reasoning`, and calls paired with
//! their outputs by `call_id` (`function_call` / `function_call_output`,
//! `custom_tool_call`, `local_shell_call`, `computer_call`, `apply_patch_call`, ...;
//! `tool_search_call` / `tool_search_output` when they carry a `call_id`), and
//! `mcp_approval_request` / `mcp_approval_response` paired by the request's `id` and
//! the response's `approval_request_id`. `compaction_trigger` and
//! `configuration_update` are control items ([`Block::Control`]). `web_search_call`
//! and other server-side calls have no output item and count as plain items. An item
//! with a server `id` is [signed](crate::format::Message::signed).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{JsonStr, describe, opt_str, result_line, string_or_json};
use super::{Block, Control, Parsed, Role, TokenCounter, ToolChange, Transcript, summary_in};
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
    id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    call_id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    approval_request_id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    operation: Option<&'a RawValue>,
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
pub(crate) const PAIRED_CALLS: [&str; 6] = [
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "computer_call",
    "shell_call",
    "apply_patch_call",
];

/// The id of an item field, if it is a non-empty string.
fn id_of<'s>(s: &'s Option<JsonStr<'_>>) -> Option<&'s str> {
    opt_str(s).filter(|id| !id.is_empty())
}

/// Parses one Responses input item. **O(len)**.
pub(crate) fn item<'a>(text: &'a str, counter: &dyn TokenCounter) -> Result<Parsed<'a>, String> {
    let item: Item<'_> = serde_json::from_str(text).map_err(|e| describe(&e))?;
    let tokens = counter.count(text);
    let kind = opt_str(&item.kind).unwrap_or("message");
    let block = if PAIRED_CALLS.contains(&kind) {
        let id = opt_str(&item.call_id)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| format!("{kind} item without a call_id"))?;
        let arguments = string_or_json(
            item.arguments
                .or(item.input)
                .or(item.action)
                .or(item.operation),
        );
        Block::Call {
            id: CallId::from(id),
            name: opt_str(&item.name).unwrap_or(kind).to_owned(),
            arguments,
        }
    } else if kind == "tool_search_output" {
        match id_of(&item.call_id) {
            Some(id) => Block::Result {
                id: CallId::from(id),
                first_line: String::new(),
            },
            None => Block::Text,
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
    } else if kind == "tool_search_call" && id_of(&item.call_id).is_some() {
        Block::Call {
            id: CallId::from(id_of(&item.call_id).unwrap_or_default()),
            name: "tool_search".to_owned(),
            arguments: string_or_json(item.arguments),
        }
    } else if kind == "mcp_approval_request" {
        let id = id_of(&item.id).ok_or("mcp_approval_request item without an id")?;
        Block::Call {
            id: CallId::from(id),
            name: opt_str(&item.name).unwrap_or(kind).to_owned(),
            arguments: string_or_json(item.arguments),
        }
    } else if kind == "mcp_approval_response" {
        let id = id_of(&item.approval_request_id)
            .ok_or("mcp_approval_response item without an approval_request_id")?;
        Block::Result {
            id: CallId::from(id),
            first_line: String::new(),
        }
    } else if kind == "compaction_trigger" {
        Block::Control(Control::CompactionTrigger)
    } else if kind == "configuration_update" {
        Block::Control(Control::ConfigurationUpdate)
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
        signed: if id_of(&item.id).is_some() {
            vec![0]
        } else {
            Vec::new()
        },
    })
}

/// Adds to `t` (read from `text` as OpenAI Responses or a Codex rollout) the tools a
/// `tool_search_output` item loads: every `name` of its `tools` ([`ToolChange`]).
/// **O(len)**: a substring search of every message, a second parse only of those
/// that hold an output.
pub(crate) fn annotate(text: &str, t: &mut Transcript) {
    #[derive(Deserialize)]
    struct Output {
        #[serde(rename = "type", default)]
        kind: Option<String>,
        #[serde(default)]
        tools: Vec<serde_json::Value>,
        #[serde(default)]
        payload: Option<Box<Output>>,
    }
    for (i, m) in t.messages.iter().enumerate() {
        let Some(span) = m.spans.first() else {
            continue;
        };
        let raw = &text[span.clone()];
        if !raw.contains("tool_search_output") {
            continue;
        }
        let Ok(mut o) = serde_json::from_str::<Output>(raw) else {
            continue;
        };
        // A Codex line holds the item under `payload`.
        if let Some(p) = o.payload.take() {
            o = *p;
        }
        if o.kind.as_deref() != Some("tool_search_output") {
            continue;
        }
        for tool in &o.tools {
            if let Some(name) = tool.get("name").and_then(|n| n.as_str()) {
                t.tools.push(ToolChange {
                    message: i,
                    block: 0,
                    tool: name.to_owned(),
                    loaded: true,
                });
            }
        }
    }
}
