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

use super::json_doc::valid::Cursor;
use super::json_doc::{JsonStr, describe, opt_str, raw_text, result_line, string_or_json};
use super::{Block, Control, Parsed, Role, TokenCounter, ToolChange, Transcript, summary_in};
use crate::CallId;

/// One Responses item: an input item of a file, or an output item of a stream (the
/// live decoder reads the same struct). The fields that matter; the rest (encrypted
/// reasoning of a file, ...) is skipped without being copied (message content is
/// borrowed, and read only when it holds cutpoint's ledger).
#[derive(Debug, Default, Deserialize, PartialEq)]
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
    #[serde(borrow, default, deserialize_with = "raw_text")]
    operation: Option<&'a str>,
    #[serde(borrow, default)]
    name: Option<JsonStr<'a>>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    arguments: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    input: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    action: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    output: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    content: Option<&'a str>,
    #[serde(borrow, default)]
    pub(crate) encrypted_content: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    execution: Option<JsonStr<'a>>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(crate) tools: Option<&'a str>,
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
        arguments: Option<&'i str>,
        server: bool,
    },
    /// The answer to call `id`: a `<call>_output` item (with its `output`), a
    /// `tool_search_output` with a `call_id`, an `mcp_approval_response`.
    Result {
        id: &'i str,
        output: Option<&'i str>,
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
    pub(crate) fn arguments(&self) -> Option<&'a str> {
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

/// The members of an [`Item`]: its eight strings, then its seven raw members, in the
/// order of its fields ([`Item::scanned`] reads them by their place here).
const MEMBERS: [&str; 15] = [
    "type",
    "role",
    "id",
    "call_id",
    "approval_request_id",
    "name",
    "encrypted_content",
    "execution",
    "operation",
    "arguments",
    "input",
    "action",
    "output",
    "content",
    "tools",
];

impl<'a> Item<'a> {
    /// The item `text`, which must be valid JSON (a line's or a document's element
    /// that serde_json validated), walked once with [`Cursor`]. `None` for what the
    /// walk leaves to serde (the definition, [`item`]'s other reading): an item that
    /// is no object, a name written with escapes, a member given twice, a string
    /// member that is no plain string. When it gives an item, it is the one serde
    /// gives (`tests::the_walk_reads_what_serde_reads`). **O(len)**, each byte
    /// passed once.
    fn scanned(text: &'a str) -> Option<Item<'a>> {
        let mut item = Item::default();
        Cursor::new(text).struct_members(&MEMBERS, |k, c| {
            if k < 8 {
                let plain = c.plain_str()?.map(JsonStr::borrowed);
                *[
                    &mut item.kind,
                    &mut item.role,
                    &mut item.id,
                    &mut item.call_id,
                    &mut item.approval_request_id,
                    &mut item.name,
                    &mut item.encrypted_content,
                    &mut item.execution,
                ][k] = plain;
            } else {
                let text = c.value()?;
                *[
                    &mut item.operation,
                    &mut item.arguments,
                    &mut item.input,
                    &mut item.action,
                    &mut item.output,
                    &mut item.content,
                    &mut item.tools,
                ][k - 8] = (text != "null").then_some(text);
            }
            Some(())
        })?;
        Some(item)
    }
}

/// Parses one Responses input item. **O(len)**.
pub(crate) fn item<'a>(text: &'a str, counter: &dyn TokenCounter) -> Result<Parsed<'a>, String> {
    let (role, block, tokens, signed) = item_block(text, counter)?;
    Ok(Parsed {
        role,
        blocks: vec![(block, tokens, text)],
        signed: if signed { vec![0] } else { Vec::new() },
    })
}

/// One Responses input item as [`item`] reads it, its one block returned as it is
/// (no list: a Codex rollout line's message is built from it directly): the role,
/// the block, its tokens, and whether it carries a server `id`. **O(len)**.
pub(crate) fn item_block(
    text: &str,
    counter: &dyn TokenCounter,
) -> Result<(Role, Block, u64, bool), String> {
    let item = match Item::scanned(text) {
        Some(item) => item,
        None => serde_json::from_str(text).map_err(|e| describe(&e))?,
    };
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
            first_line: result_line(output),
        },
        ItemKind::Control(c) => Block::Control(c),
        ItemKind::Reasoning => Block::Reasoning,
        ItemKind::Compaction => Block::Compaction,
        ItemKind::Message | ItemKind::Other => Block::Text,
    };
    // A user message holding cutpoint's ledger is an earlier summary.
    let block = match (kind, opt_str(&item.role), item.content) {
        ("message", Some("user"), Some(content)) => summary_in(content).unwrap_or(block),
        _ => block,
    };
    let role = match (kind, opt_str(&item.role)) {
        ("message", Some("user")) => Role::User,
        ("message", Some("assistant")) => Role::Assistant,
        ("message", Some("system" | "developer")) => Role::System,
        ("message", Some(other)) => return Err(format!("unknown role {other:?}")),
        _ => Role::Item,
    };
    Ok((role, block, tokens, id_of(&item.id).is_some()))
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
    // One searcher for every message (`str::contains` builds one per call: 3% of
    // reading a Codex rollout).
    let marker = memchr::memmem::Finder::new("tool_search_output");
    for (i, m) in t.messages.iter().enumerate() {
        let Some(span) = m.spans.first() else {
            continue;
        };
        let raw = &text[span.clone()];
        if marker.find(raw.as_bytes()).is_none() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::json_doc::generate::{
        array, fixture, member, mostly, object, one_of, walk_agrees,
    };
    use proptest::prelude::*;

    /// A member's value as Responses items hold them, now and then one the walk
    /// leaves to serde or serde refuses.
    fn string() -> impl Strategy<Value = String> {
        mostly(
            &[
                "\"function_call\"",
                "\"call_1\"",
                "\"user\"",
                "\"\"",
                "null",
                "\"gAAAAB+/=\"",
            ],
            &["\"c\\u0031\"", "\"a\\nb\"", "7", "{}", "[\"x\"]"],
        )
    }

    fn kind() -> impl Strategy<Value = String> {
        mostly(
            &[
                "\"message\"",
                "\"function_call\"",
                "\"function_call_output\"",
                "\"custom_tool_call\"",
                "\"reasoning\"",
                "\"compaction\"",
                "\"tool_search_output\"",
                "\"mcp_approval_request\"",
            ],
            &["null", "\"web_search_call\"", "3"],
        )
    }

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            one_of(&[
                "\"{\\\"cmd\\\": [\\\"ls\\\"]}\"",
                "\"ends in \\\\\"",
                "null",
                "{\"output\": \"a\\nb\", \"k\": [1, -2.5e3, true]}",
                "[{\"type\": \"input_text\", \"text\": \"hi\"}]",
                "[]",
                "42",
            ]),
            array(string()),
        ]
    }

    fn item() -> impl Strategy<Value = String> {
        let mut members = vec![member(one_of(&["type"]), kind())];
        members.extend(MEMBERS[1..8].iter().map(|n| member(one_of(&[n]), string())));
        members.extend(MEMBERS[8..].iter().map(|n| member(one_of(&[n]), value())));
        members.push(member(
            mostly(&["status", "summary"], &["c\\u0061ll_id", "type\\\""]),
            value(),
        ));
        prop_oneof![30 => object(members), 1 => one_of(&["[\"message\"]", "\"x\"", "null"])]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5_000))]
        /// Whatever the one walk reads, serde_json reads the same.
        #[test]
        fn the_walk_reads_what_serde_reads(text in item()) {
            walk_agrees(&text, Item::scanned, serde_json::from_str::<Item<'_>>)?;
        }
    }

    /// Every item of the real Codex rollouts is walked whole, as serde reads it.
    #[test]
    fn the_walk_reads_the_real_rollouts_whole() {
        let mut items = 0;
        for path in [
            "codex__localpush__rollout-12-41-04-parallel7.jsonl",
            "codex__localpush__rollout-12-47-42-orphan-call.jsonl",
            "codex__localpush__rollout-12-54-34-compacted.jsonl",
            "codex__localpush__rollout-13-19-38-trailing-call.jsonl",
        ] {
            let text = fixture(path);
            for line in text.lines() {
                #[derive(serde::Deserialize)]
                struct Line<'a> {
                    #[serde(rename = "type")]
                    kind: &'a str,
                    #[serde(borrow)]
                    payload: &'a serde_json::value::RawValue,
                }
                let line: Line<'_> = serde_json::from_str(line).expect("a rollout line");
                if line.kind != "response_item" {
                    continue;
                }
                let raw = line.payload.get();
                let walked = Item::scanned(raw);
                assert!(walked.is_some(), "{path}: left to serde: {raw}");
                let parsed: Item<'_> = serde_json::from_str(raw).expect("an item");
                assert_eq!(walked, Some(parsed), "{path}");
                items += 1;
            }
        }
        assert!(items > 100, "{items} items");
    }
}
