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

use super::json_doc::{Inline, Items, JsonStr, array_around, describe, opt_str, result_line};
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
        let (call, parts) = read_call(raw.get(), k)?;
        let name = opt_str(&call.name).unwrap_or_default();
        let id = opt_str(&call.id)
            .filter(|id| !id.is_empty())
            .map_or_else(|| gemini::placeholder_id(name, index, k), CallId::from);
        // The call's own bytes: the record without its result.
        let call_tokens = counter
            .count_json(raw.get())
            .saturating_sub(call.result.map_or(0, |r| counter.count_json(r)));
        blocks.push((
            Block::Call {
                id: id.clone(),
                name: name.to_owned(),
                arguments: call.args.map(|a| a.get().to_owned()).unwrap_or_default(),
            },
            call_tokens.max(1),
            raw.get(),
        ));
        let Some(result) = call.result.filter(|r| *r != "null") else {
            continue;
        };
        let mut answered = false;
        for &part in &parts {
            let Ok(gemini::Part {
                response: Some(response),
                ..
            }) = serde_json::from_str::<gemini::Part<'_>>(part)
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
                counter.count_json(part),
                part,
            ));
            answered = true;
        }
        if !answered {
            // A result without a functionResponse part (text, a string): still the
            // call's answer.
            let raw = serde_json::from_str::<&RawValue>(result).ok();
            results.push((
                Block::Result {
                    id,
                    first_line: result_line(raw),
                },
                counter.count_json(result),
                result,
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

/// A `toolCalls` entry (`k` of its message): the call, its `result`'s JSON text,
/// and the result's parts (the elements of an array, else the result itself). The
/// common case, a result array with elements, in one pass: the parts split as the
/// call is read. Any other result, or an error, is read the old way (the call with
/// its result raw, then the result's array), which names what is wrong. **O(len)**.
fn read_call(raw: &str, k: usize) -> Result<(gemini::Call<'_, &str>, Vec<&str>), String> {
    if let Ok(call) = serde_json::from_str::<gemini::Call<'_, Items<'_>>>(raw) {
        match call.result {
            None => return Ok((call.with_result(None), Vec::new())),
            Some(Inline::Read(ref parts)) => {
                if let Some(at) = array_around(raw, parts) {
                    let parts: Vec<&str> = parts.iter().map(|p| p.get()).collect();
                    return Ok((call.with_result(raw.get(at)), parts));
                }
            }
            Some(Inline::Other) => {}
        }
    }
    let call: gemini::Call<'_> =
        serde_json::from_str(raw).map_err(|e| format!("toolCalls.{k}: {}", describe(&e)))?;
    let result = call.result.map(RawValue::get);
    let parts: Vec<&str> = match result {
        Some(r) if r.starts_with('[') => serde_json::from_str::<Vec<&RawValue>>(r)
            .map_err(|e| format!("toolCalls.{k}.result: {}", describe(&e)))?
            .into_iter()
            .map(RawValue::get)
            .collect(),
        Some(r) => vec![r],
        None => Vec::new(),
    };
    Ok((call.with_result(result), parts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's name, its result's text and the result's parts.
    type Read<'a> = (Option<String>, Option<&'a str>, Vec<&'a str>);

    /// What `read_call` gave before it had a one-pass case: the call with its result
    /// raw, then the result's array read again.
    fn two_passes(raw: &str) -> Result<Read<'_>, String> {
        let call: gemini::Call<'_> = serde_json::from_str(raw).map_err(|e| describe(&e))?;
        let result = call.result.map(RawValue::get);
        let parts = match result {
            Some(r) if r.starts_with('[') => serde_json::from_str::<Vec<&RawValue>>(r)
                .map_err(|e| describe(&e))?
                .into_iter()
                .map(RawValue::get)
                .collect(),
            Some(r) => vec![r],
            None => Vec::new(),
        };
        Ok((opt_str(&call.name).map(str::to_owned), result, parts))
    }

    #[test]
    fn a_call_read_in_one_pass_is_the_call_read_in_two() {
        for raw in [
            r#"{"id":"c1","name":"ls","args":{},"result":[{"functionResponse":{"id":"c1","response":{"output":"a"}}}]}"#,
            "{\"name\":\"ls\",\"result\" : [ {\"functionResponse\":{}} ,\n {\"text\":\"]\"} ] ,\"status\":\"ok\"}",
            r#"{"name":"ls","result":[]}"#,
            r#"{"name":"ls","result":"just text"}"#,
            r#"{"name":"ls","result":{"functionResponse":{"response":{}}}}"#,
            r#"{"name":"ls","result":null}"#,
            r#"{"name":"ls"}"#,
            r#"{"name":"ls","result":[1,2}"#,
            r#"{"name":7,"result":[{}]}"#,
        ] {
            let one = read_call(raw, 0)
                .map(|(c, parts)| (opt_str(&c.name).map(str::to_owned), c.result, parts));
            let two = two_passes(raw);
            match (one, two) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{raw}"),
                (Err(a), Err(b)) => assert!(a.ends_with(&b), "{raw}: {a} / {b}"),
                (a, b) => panic!("{raw}: {a:?} / {b:?}"),
            }
        }
    }
}
