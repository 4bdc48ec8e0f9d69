//! Google Gemini `contents`: `{"role":"user"|"model","parts":[…]}` with
//! `{"functionCall":{"name","args","id"?}}` parts in model turns and
//! `{"functionResponse":{"name","response","id"?}}` parts in user turns.
//!
//! Ids are optional in Gemini. A call without one gets `name#M.K` (message M, part
//! K); a response without one answers the first call of the previous turn with the
//! same name that no other response answered yet, or gets `name#unanswered.M.K`.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{JsonStr, describe, opt_str, result_line};
use super::{Block, Message, Parsed, Role, TokenCounter, summary_in};
use crate::CallId;

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(default)]
    role: Option<String>,
    #[serde(borrow, default)]
    parts: Vec<&'a RawValue>,
}

/// One part of a content: of a file's `contents`, or of a streamed response's
/// candidate (the live decoder reads the same struct). Strings a file never reads
/// (`text`, `thoughtSignature`) stay raw JSON, unescaped only by the stream.
#[derive(Deserialize)]
pub(crate) struct Part<'a> {
    #[serde(borrow, default)]
    pub(crate) text: Option<&'a RawValue>,
    #[serde(default)]
    pub(crate) thought: Option<bool>,
    #[serde(
        rename = "thoughtSignature",
        alias = "thought_signature",
        borrow,
        default
    )]
    pub(crate) signature: Option<&'a RawValue>,
    #[serde(rename = "functionCall", alias = "function_call", borrow, default)]
    pub(crate) call: Option<Call<'a>>,
    #[serde(
        rename = "functionResponse",
        alias = "function_response",
        borrow,
        default
    )]
    pub(crate) response: Option<Response<'a>>,
    #[serde(rename = "executableCode", borrow, default)]
    pub(crate) code: Option<&'a RawValue>,
    #[serde(rename = "codeExecutionResult", borrow, default)]
    pub(crate) code_result: Option<&'a RawValue>,
}

/// A `functionCall`: whole (`args`), or streamed (`willContinue`, `partialArgs`); a
/// Gemini CLI session's `toolCalls` entry is one with its `result` beside it.
/// `R` is how a Gemini CLI `result` is read: raw, or its array split as the call is
/// read ([`Items`](super::json_doc::Items), `gemini_cli`'s one pass).
#[derive(Deserialize)]
pub(crate) struct Call<'a, R = &'a RawValue> {
    #[serde(borrow, default)]
    pub(crate) name: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) args: Option<&'a RawValue>,
    #[serde(rename = "partialArgs", borrow, default)]
    pub(crate) partial: Option<Vec<PartialArg<'a>>>,
    #[serde(rename = "willContinue", default)]
    pub(crate) will_continue: Option<bool>,
    /// The `functionResponse` parts (or other value) a Gemini CLI record keeps.
    #[serde(default = "none")]
    pub(crate) result: Option<R>,
}

fn none<R>() -> Option<R> {
    None
}

impl<'a, R> Call<'a, R> {
    /// The call with `result` in place of its own. **O(1)**.
    pub(crate) fn with_result<S>(self, result: Option<S>) -> Call<'a, S> {
        Call {
            name: self.name,
            id: self.id,
            args: self.args,
            partial: self.partial,
            will_continue: self.will_continue,
            result,
        }
    }
}

/// One streamed piece of a call's arguments: a value at a JSON path.
#[derive(Deserialize)]
pub(crate) struct PartialArg<'a> {
    #[serde(rename = "jsonPath", borrow)]
    pub(crate) path: JsonStr<'a>,
    #[serde(rename = "stringValue", borrow, default)]
    pub(crate) string: Option<JsonStr<'a>>,
    #[serde(rename = "numberValue", borrow, default)]
    pub(crate) number: Option<&'a RawValue>,
    #[serde(rename = "boolValue", default)]
    pub(crate) boolean: Option<bool>,
    #[serde(rename = "nullValue", borrow, default)]
    pub(crate) null: Option<&'a RawValue>,
    #[serde(rename = "willContinue", default)]
    pub(crate) will_continue: Option<bool>,
}

/// A `functionResponse`.
#[derive(Deserialize)]
pub(crate) struct Response<'a> {
    #[serde(borrow, default)]
    pub(crate) name: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) response: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) id: Option<JsonStr<'a>>,
}

/// The id of a call without one: `name#M.K` for part (or record) `K` of message
/// (or response) `M`. The reader, the Gemini CLI reader and the stream decoder all
/// name calls so. **O(len(name))**.
pub(crate) fn placeholder_id(name: &str, m: usize, k: usize) -> CallId {
    CallId::from(format!("{name}#{m}.{k}"))
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
        let tokens = counter.count_json(raw.get());
        if part.signature.is_some_and(|s| s.get() != "null") {
            signed.push(k);
        }
        let block = match (part.call, part.response) {
            (Some(call), _) => {
                let name = opt_str(&call.name).unwrap_or_default();
                Block::Call {
                    id: id_or_placeholder(opt_str(&call.id), name),
                    name: name.to_owned(),
                    arguments: call.args.map(|a| a.get().to_owned()).unwrap_or_default(),
                }
            }
            (None, Some(resp)) => Block::Result {
                id: id_or_placeholder(opt_str(&resp.id), opt_str(&resp.name).unwrap_or_default()),
                first_line: result_line(resp.response.map(RawValue::get)),
            },
            (None, None) if part.thought == Some(true) => Block::Reasoning,
            // A user turn's text holding cutpoint's ledger is an earlier summary.
            (None, None) if role == Role::User => summary_in(raw.get()).unwrap_or(Block::Text),
            (None, None) => Block::Text,
        };
        blocks.push((block, tokens, raw.get()));
    }
    if blocks.is_empty() {
        blocks.push((Block::Text, counter.count_json(text), text));
    }
    Ok(Parsed {
        role,
        blocks,
        signed,
    })
}

fn id_or_placeholder(id: Option<&str>, name: &str) -> CallId {
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
                    *id = placeholder_id(name, m, k);
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
