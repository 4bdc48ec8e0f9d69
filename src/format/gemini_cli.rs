//! Gemini CLI session files: one JSON document
//! `{"sessionId", "projectHash", "startTime", "lastUpdated", "messages": [...]}` whose
//! messages are `{"id", "timestamp", "type": "user" | "gemini", "content", ...}`. A
//! `gemini` message holds the model's text, its `thoughts`, and its `toolCalls`, each
//! `{"id", "name", "args", "result": [{"functionResponse": {"id", "name",
//! "response"}}], "status", ...}`: the call and its result in one record. On resume
//! the CLI sends such a message as a `model` turn with the `functionCall` parts and a
//! `user` turn with the `functionResponse` parts, so one message here is one call
//! turn and its response turn, never split. `info`, `error` and `warning` messages
//! are the CLI's own notes (system messages here).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{JsonStr, describe, opt_str, result_line};
use super::{Block, Parsed, Role, TokenCounter, gemini, summary_in};
use crate::CallId;

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(rename = "toolCalls", borrow, default)]
    tool_calls: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    thoughts: Option<&'a RawValue>,
}

/// The message types of a Gemini CLI session.
pub(crate) const TYPES: [&str; 5] = ["user", "gemini", "info", "error", "warning"];

/// Parses message `index` of a session. A call without an id gets `name#index.k`
/// (call `k` of the message); a response without one answers its own call.
/// **O(len)**.
pub(crate) fn message<'a>(
    text: &'a str,
    index: usize,
    counter: &dyn TokenCounter,
) -> Result<Parsed<'a>, String> {
    let msg: Msg<'_> = serde_json::from_str(text).map_err(|e| describe(&e))?;
    let role = match opt_str(&msg.kind) {
        Some("user") => Role::User,
        Some("gemini") => Role::Assistant,
        Some("info" | "error" | "warning") => Role::System,
        other => return Err(format!("unknown message type {other:?}")),
    };
    let mut blocks = Vec::new();
    if let Some(t) = msg.thoughts.filter(|t| !matches!(t.get(), "null" | "[]")) {
        blocks.push((Block::Reasoning, counter.count_json(t.get()), t.get()));
    }
    if let Some(c) = msg
        .content
        .filter(|c| !matches!(c.get(), "null" | "\"\"" | "[]"))
    {
        let block = match role {
            Role::User => summary_in(c.get()).unwrap_or(Block::Text),
            _ => Block::Text,
        };
        blocks.push((block, counter.count_json(c.get()), c.get()));
    }
    let calls = msg.tool_calls.unwrap_or_default();
    let mut results = Vec::new();
    for (k, raw) in calls.into_iter().enumerate() {
        let call: gemini::Call<'_> = serde_json::from_str(raw.get())
            .map_err(|e| format!("toolCalls.{k}: {}", describe(&e)))?;
        let name = opt_str(&call.name).unwrap_or_default();
        let id = opt_str(&call.id)
            .filter(|id| !id.is_empty())
            .map_or_else(|| gemini::placeholder_id(name, index, k), CallId::from);
        // The call's own bytes: the record without its result.
        let call_tokens = counter
            .count_json(raw.get())
            .saturating_sub(call.result.map_or(0, |r| counter.count_json(r.get())));
        blocks.push((
            Block::Call {
                id: id.clone(),
                name: name.to_owned(),
                arguments: call.args.map(|a| a.get().to_owned()).unwrap_or_default(),
            },
            call_tokens.max(1),
            raw.get(),
        ));
        let Some(result) = call.result.filter(|r| r.get() != "null") else {
            continue;
        };
        let parts: Vec<&RawValue> = match result.get().as_bytes().first() {
            Some(b'[') => serde_json::from_str(result.get())
                .map_err(|e| format!("toolCalls.{k}.result: {}", describe(&e)))?,
            _ => vec![result],
        };
        let mut answered = false;
        for part in &parts {
            let Ok(gemini::Part {
                response: Some(response),
                ..
            }) = serde_json::from_str::<gemini::Part<'_>>(part.get())
            else {
                continue;
            };
            let answers = opt_str(&response.id)
                .filter(|r| !r.is_empty())
                .map_or_else(|| id.clone(), CallId::from);
            results.push((
                Block::Result {
                    id: answers,
                    first_line: result_line(response.response),
                },
                counter.count_json(part.get()),
                part.get(),
            ));
            answered = true;
        }
        if !answered {
            // A result without a functionResponse part (text, a string): still the
            // call's answer.
            results.push((
                Block::Result {
                    id,
                    first_line: result_line(Some(result)),
                },
                counter.count_json(result.get()),
                result.get(),
            ));
        }
    }
    // The response turn follows the call turn.
    blocks.extend(results);
    if blocks.is_empty() {
        blocks.push((Block::Text, counter.count_json(text), text));
    }
    Ok(Parsed {
        role,
        blocks,
        signed: Vec::new(),
    })
}
