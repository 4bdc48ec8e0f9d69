//! Anthropic Messages: `{"role":"user"|"assistant","content":"…"|[blocks]}`, with
//! `tool_use` blocks in assistant messages and `tool_result` blocks in user messages.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{JsonStr, describe, opt_str, result_line};
use super::{Block, Parsed, Role, TokenCounter, summary_in};
use crate::CallId;

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(borrow)]
    role: &'a RawValue,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// One content block; every field a block kind may carry, the rest ignored.
#[derive(Deserialize)]
pub(crate) struct RawBlock<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(crate) kind: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) name: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) tool_use_id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) content: Option<&'a RawValue>,
}

/// Parses one Anthropic message. **O(len)**.
pub(crate) fn message<'a>(text: &'a str, counter: &dyn TokenCounter) -> Result<Parsed<'a>, String> {
    let msg: Msg<'_> = serde_json::from_str(text).map_err(|e| describe(&e))?;
    let role = match serde_json::from_str::<&str>(msg.role.get()) {
        Ok("user") => Role::User,
        Ok("assistant") => Role::Assistant,
        Ok("system") => Role::System,
        _ => return Err(format!("unknown role {}", msg.role.get())),
    };
    let blocks = blocks(msg.content, role, counter)?;
    Ok(Parsed {
        role,
        blocks: if blocks.is_empty() {
            vec![(Block::Text, counter.count(text), text)]
        } else {
            blocks
        },
        signed: Vec::new(),
    })
}

/// The blocks of an Anthropic `content` of a message from `role` (a string is one
/// text block), each with the JSON text it was read from. A user message's text that
/// holds cutpoint's ledger is an earlier summary. **O(len)**.
pub(crate) fn blocks<'a>(
    content: Option<&'a RawValue>,
    role: Role,
    counter: &dyn TokenCounter,
) -> Result<Vec<(Block, u64, &'a str)>, String> {
    let Some(content) = content else {
        return Ok(Vec::new());
    };
    let text = |raw: &RawValue| match role {
        Role::User => summary_in(raw.get()).unwrap_or(Block::Text),
        _ => Block::Text,
    };
    if !content.get().starts_with('[') {
        return Ok(vec![(
            text(content),
            counter.count(content.get()),
            content.get(),
        )]);
    }
    let raws: Vec<&RawValue> =
        serde_json::from_str(content.get()).map_err(|e| format!("content: {}", describe(&e)))?;
    let mut out = Vec::with_capacity(raws.len());
    for (k, raw) in raws.into_iter().enumerate() {
        let b: RawBlock<'_> = serde_json::from_str(raw.get())
            .map_err(|e| format!("content.{k}: {}", describe(&e)))?;
        let block = match block(b, k)? {
            Block::Text => text(raw),
            other => other,
        };
        out.push((block, counter.count(raw.get()), raw.get()));
    }
    Ok(out)
}

/// One block as a [`Block`]: client `tool_use` / `tool_result` pair, thinking is
/// reasoning, a `compaction` block is the provider's compaction, everything else (text, images, server tools and their results) is text.
pub(crate) fn block(b: RawBlock<'_>, k: usize) -> Result<Block, String> {
    Ok(match opt_str(&b.kind) {
        Some("tool_use") => {
            let id = opt_str(&b.id)
                .filter(|id| !id.is_empty())
                .ok_or_else(|| format!("content.{k}: tool_use block without an id"))?;
            Block::Call {
                id: CallId::from(id),
                name: opt_str(&b.name).unwrap_or_default().to_owned(),
                arguments: b.input.map(|r| r.get().to_owned()).unwrap_or_default(),
            }
        }
        Some("tool_result") => {
            let id = opt_str(&b.tool_use_id)
                .filter(|id| !id.is_empty())
                .ok_or_else(|| format!("content.{k}: tool_result block without a tool_use_id"))?;
            Block::Result {
                id: CallId::from(id),
                first_line: result_line(b.content),
            }
        }
        Some("thinking" | "redacted_thinking") => Block::Reasoning,
        Some("compaction") => Block::Compaction,
        _ => Block::Text,
    })
}
