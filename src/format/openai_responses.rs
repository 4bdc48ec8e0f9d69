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

/// One Responses item: an input item of a file, or an output item of a stream (the
/// live decoder reads the same struct). The fields that matter; the rest (encrypted
/// reasoning of a file, ...) is skipped without being copied (message content is
/// borrowed, and read only when it holds cutpoint's ledger).
#[derive(Deserialize)]
pub(crate) struct Item<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    role: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) id: Option<JsonStr<'a>>,
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
    #[serde(borrow, default)]
    pub(crate) encrypted_content: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    execution: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) tools: Option<&'a RawValue>,
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

/// What an item is, as the reader and the stream decoder both see it.
pub(crate) enum ItemKind<'i> {
    /// A call: a [`PAIRED_CALLS`] item, an `mcp_approval_request` (by its `id`), a
    /// `tool_search_call` with a `call_id` (`server` when its `execution` is
    /// `server`).
    Call {
        id: &'i str,
        name: &'i str,
        arguments: Option<&'i RawValue>,
        server: bool,
    },
    /// The answer to call `id`: a `<call>_output` item (with its `output`), a
    /// `tool_search_output` with a `call_id`, an `mcp_approval_response`.
    Result {
        id: &'i str,
        output: Option<&'i RawValue>,
    },
    /// `compaction_trigger`, `configuration_update`.
    Control(Control),
    /// `reasoning`.
    Reasoning,
    /// `compaction`.
    Compaction,
    /// A role message (`message`, the type an item without one has).
    Message,
    /// Anything else (`web_search_call`, server-side calls, ...).
    Other,
}

impl<'a> Item<'a> {
    /// The item's type (`message` when it has none). **O(1)**.
    pub(crate) fn kind(&self) -> &str {
        opt_str(&self.kind).unwrap_or("message")
    }

    /// A call's arguments as given: `arguments`, `input` (custom tools), `action`
    /// (shell and computer calls) or `operation` (`apply_patch_call`). **O(1)**.
    pub(crate) fn arguments(&self) -> Option<&'a RawValue> {
        self.arguments
            .or(self.input)
            .or(self.action)
            .or(self.operation)
    }

    /// What the item is (see [`ItemKind`]). **O(1)**.
    ///
    /// # Errors
    /// A call or an output without the id that pairs it, named.
    pub(crate) fn classify(&self) -> Result<ItemKind<'_>, String> {
        let kind = self.kind();
        let call_id = id_of(&self.call_id);
        let needs_call_id = || call_id.ok_or_else(|| format!("{kind} item without a call_id"));
        let output_of = kind.strip_suffix("_output");
        Ok(match kind {
            _ if PAIRED_CALLS.contains(&kind) => ItemKind::Call {
                id: needs_call_id()?,
                name: opt_str(&self.name).unwrap_or(kind),
                arguments: self.arguments(),
                server: false,
            },
            "tool_search_call" if call_id.is_some() => ItemKind::Call {
                id: needs_call_id()?,
                name: "tool_search",
                arguments: self.arguments(),
                server: opt_str(&self.execution) == Some("server"),
            },
            "mcp_approval_request" => ItemKind::Call {
                id: id_of(&self.id).ok_or("mcp_approval_request item without an id")?,
                name: opt_str(&self.name).unwrap_or(kind),
                arguments: self.arguments(),
                server: false,
            },
            "tool_search_output" => match call_id {
                Some(id) => ItemKind::Result { id, output: None },
                None => ItemKind::Other,
            },
            _ if output_of.is_some_and(|call| PAIRED_CALLS.contains(&call)) => ItemKind::Result {
                id: needs_call_id()?,
                output: self.output,
            },
            "mcp_approval_response" => ItemKind::Result {
                id: id_of(&self.approval_request_id)
                    .ok_or("mcp_approval_response item without an approval_request_id")?,
                output: None,
            },
            "compaction_trigger" => ItemKind::Control(Control::CompactionTrigger),
            "configuration_update" => ItemKind::Control(Control::ConfigurationUpdate),
            "reasoning" => ItemKind::Reasoning,
            "compaction" => ItemKind::Compaction,
            "message" => ItemKind::Message,
            _ => ItemKind::Other,
        })
    }
}

/// Parses one Responses input item. **O(len)**.
pub(crate) fn item<'a>(text: &'a str, counter: &dyn TokenCounter) -> Result<Parsed<'a>, String> {
    let item: Item<'_> = serde_json::from_str(text).map_err(|e| describe(&e))?;
    let tokens = counter.count_json(text);
    let kind = item.kind();
    let block = match item.classify()? {
        ItemKind::Call {
            id,
            name,
            arguments,
            ..
        } => Block::Call {
            id: CallId::from(id),
            name: name.to_owned(),
            arguments: string_or_json(arguments),
        },
        ItemKind::Result { id, output } => Block::Result {
            id: CallId::from(id),
            first_line: result_line(output.map(RawValue::get)),
        },
        ItemKind::Control(c) => Block::Control(c),
        ItemKind::Reasoning => Block::Reasoning,
        ItemKind::Compaction => Block::Compaction,
        ItemKind::Message | ItemKind::Other => Block::Text,
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
        for name in tool_names(&o.tools) {
            t.tools.push(ToolChange {
                message: i,
                block: 0,
                tool: name.to_owned(),
                loaded: true,
            });
        }
    }
}

/// The tools a `tool_search_output`'s `tools` load: each one's `name`. The one
/// reading, for the file reader ([`annotate`]) and the live decoder. **O(tools)**.
pub(crate) fn tool_names(tools: &[serde_json::Value]) -> impl Iterator<Item = &str> {
    tools
        .iter()
        .filter_map(|tool| tool.get("name").and_then(|n| n.as_str()))
}
