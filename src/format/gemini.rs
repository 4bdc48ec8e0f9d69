//! Google Gemini `contents`: `{"role":"user"|"model","parts":[…]}` with
//! `{"functionCall":{"name","args","id"?}}` parts in model turns and
//! `{"functionResponse":{"name","response","id"?}}` parts in user turns.
//!
//! Ids are optional in Gemini. A call without one gets `name#M.K` (message M, part
//! K); a response without one answers the first call of the previous turn with the
//! same name that no other response answered yet, or gets `name#unanswered.M.K`.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{describe, result_line};
use super::{Block, Message, Parsed, Role, TokenCounter, summary_in};
use crate::CallId;

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(default)]
    role: Option<String>,
    #[serde(borrow, default)]
    parts: Vec<&'a RawValue>,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(rename = "functionCall", alias = "function_call", borrow, default)]
    call: Option<Call<'a>>,
    #[serde(
        rename = "functionResponse",
        alias = "function_response",
        borrow,
        default
    )]
    response: Option<Response<'a>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(
        rename = "thoughtSignature",
        alias = "thought_signature",
        borrow,
        default
    )]
    signature: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Call<'a> {
    #[serde(default)]
    name: Option<String>,
    #[serde(borrow, default)]
    args: Option<&'a RawValue>,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(default)]
    name: Option<String>,
    #[serde(borrow, default)]
    response: Option<&'a RawValue>,
    #[serde(default)]
    id: Option<String>,
}

/// Names without ids are kept as `"\0name"` until [`assign_ids`] runs.
const NO_ID: char = '\0';

/// Parses one Gemini content. **O(len)**.
pub(crate) fn content<'a>(text: &'a str, counter: &dyn TokenCounter) -> Result<Parsed<'a>, String> {
    let content: Content<'_> = serde_json::from_str(text).map_err(|e| describe(&e))?;
    let role = match content.role.as_deref() {
        Some("user") | None => Role::User,
        Some("model") => Role::Assistant,
        Some("function" | "tool") => Role::User,
        Some(other) => return Err(format!("unknown role {other:?}")),
    };
    let mut blocks = Vec::with_capacity(content.parts.len());
    let mut signed = Vec::new();
    for (k, raw) in content.parts.into_iter().enumerate() {
        let part: Part<'_> =
            serde_json::from_str(raw.get()).map_err(|e| format!("parts.{k}: {}", describe(&e)))?;
        let tokens = counter.count(raw.get());
        if part.signature.is_some_and(|s| s.get() != "null") {
            signed.push(k);
        }
        let block = match (part.call, part.response) {
            (Some(call), _) => {
                let name = call.name.unwrap_or_default();
                Block::Call {
                    id: id_or_placeholder(call.id, &name),
                    name,
                    arguments: call.args.map(|a| a.get().to_owned()).unwrap_or_default(),
                }
            }
            (None, Some(resp)) => {
                let name = resp.name.unwrap_or_default();
                Block::Result {
                    id: id_or_placeholder(resp.id, &name),
                    first_line: result_line(resp.response),
                }
            }
            (None, None) if part.thought == Some(true) => Block::Reasoning,
            // A user turn's text holding cutpoint's ledger is an earlier summary.
            (None, None) if role == Role::User => summary_in(raw.get()).unwrap_or(Block::Text),
            (None, None) => Block::Text,
        };
        blocks.push((block, tokens, raw.get()));
    }
    if blocks.is_empty() {
        blocks.push((Block::Text, counter.count(text), text));
    }
    Ok(Parsed {
        role,
        blocks,
        signed,
    })
}

fn id_or_placeholder(id: Option<String>, name: &str) -> CallId {
    match id.filter(|id| !id.is_empty()) {
        Some(id) => CallId::from(id),
        None => CallId::from(format!("{NO_ID}{name}")),
    }
}

/// Gives every call and response without an id one (see the module doc).
/// **O(parts)** per pair of turns.
pub(crate) fn assign_ids(messages: &mut [Message]) {
    for m in 0..messages.len() {
        let (before, rest) = messages.split_at_mut(m);
        let previous = before.last();
        let mut taken: Vec<usize> = Vec::new();
        for (k, (block, _)) in rest[0].blocks.iter_mut().enumerate() {
            match block {
                Block::Call { id, name, .. } if id.starts_with(NO_ID) => {
                    *id = CallId::from(format!("{name}#{m}.{k}"));
                }
                Block::Result { id, .. } if id.starts_with(NO_ID) => {
                    let name = &id[NO_ID.len_utf8()..];
                    let answered = previous.and_then(|p| {
                        p.blocks.iter().enumerate().find_map(|(j, (b, _))| match b {
                            Block::Call { id, name: n, .. } if n == name && !taken.contains(&j) => {
                                Some((j, id.clone()))
                            }
                            _ => None,
                        })
                    });
                    *id = match answered {
                        Some((j, call)) => {
                            taken.push(j);
                            call
                        }
                        None => CallId::from(format!("{name}#unanswered.{m}.{k}")),
                    };
                }
                _ => {}
            }
        }
    }
}
