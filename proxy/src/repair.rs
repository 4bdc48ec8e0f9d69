//! Repair mode's edit of a request body: what can be fixed without losing a call.
//!
//! Two faults are repaired, both named by the check's findings (never guessed from
//! the shape alone):
//!
//! - A call the history never answers (`anthropic/tool-use-without-result`,
//!   `openai-chat/tool-call-without-response`, `openai-responses/no-tool-output`,
//!   `pairing/unanswered-call`) gets an error result with the call's own id and
//!   [`ABORTED_RESULT_TEXT`], where the provider wants it: Anthropic, at the head of
//!   the next user message (a new one when the next message is not the user's);
//!   OpenAI Chat, a `tool` message after the calling message's run of tool messages;
//!   Responses, an output item right after its `function_call` or `custom_tool_call`.
//!   The call and its arguments stay; the model reads that it was aborted.
//! - A result whose call is nowhere in the request (`anthropic/unexpected-tool-result`,
//!   `openai-chat/tool-call-id-not-found`, `openai-chat/tool-without-tool-calls`,
//!   `openai-responses/no-tool-call`, `pairing/orphan-result`) is dropped (its message
//!   too, when nothing else is left in it): it answers no call, so no call is lost.
//!
//! Anything else is not repaired: a result whose call is elsewhere in the request (out
//! of place: moving it is not done), a duplicate result, a repeated call id, a call
//! of a kind no synthesized output can answer (a `computer_call` wants a screenshot),
//! thinking or compaction faults. Everything not edited keeps its bytes: the body's
//! members, and the history's untouched messages, are copied as they came.

use std::collections::{BTreeSet, HashSet};
use std::fmt;

use cutpoint::compact::ABORTED_RESULT_TEXT;
use cutpoint::format::Finding;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::Route;
use crate::body::{Element, Members, history_key, join};

/// The rules whose finding is a call to answer.
const UNANSWERED: &[&str] = &[
    "anthropic/tool-use-without-result",
    "openai-chat/tool-call-without-response",
    "openai-responses/no-tool-output",
    "pairing/unanswered-call",
];

/// The rules whose finding is a result to drop, when its call is nowhere.
const ORPHANED: &[&str] = &[
    "anthropic/unexpected-tool-result",
    "openai-chat/tool-call-id-not-found",
    "openai-chat/tool-without-tool-calls",
    "openai-responses/no-tool-call",
    "pairing/orphan-result",
];

/// What [`repair`] changed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Repaired {
    /// The repaired body.
    pub(crate) body: String,
    /// The calls answered with an aborted result, in history order.
    pub(crate) answered: Vec<String>,
    /// The call ids of the orphan results dropped, in history order.
    pub(crate) dropped: Vec<String>,
}

/// Why a request cannot be repaired: the first fault repair does not fix.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct NotRepaired(pub(crate) String);

impl fmt::Display for NotRepaired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Repairs `text`, a request for `route` whose check found `findings`: answers the
/// unanswered calls they name and drops the results without a call they name. The
/// caller reads the result back and checks it again before it forwards anything.
/// **O(len)**.
///
/// # Errors
/// [`NotRepaired`] naming the first finding repair does not fix, or the edit it
/// cannot make.
pub(crate) fn repair(
    route: Route,
    text: &str,
    findings: &[Finding],
) -> Result<Repaired, NotRepaired> {
    let mut answer: Vec<String> = Vec::new();
    let mut drop: BTreeSet<String> = BTreeSet::new();
    for f in findings {
        let Some(id) = f.call_id.as_ref().map(|c| c.to_string()) else {
            return Err(NotRepaired(format!("{} at {}: {}", f.rule, f.at, f.text)));
        };
        if UNANSWERED.contains(&f.rule) {
            if !answer.contains(&id) {
                answer.push(id);
            }
        } else if ORPHANED.contains(&f.rule) {
            drop.insert(id);
        } else {
            return Err(NotRepaired(format!(
                "{} at {}, call {id}: {}",
                f.rule, f.at, f.text
            )));
        }
    }
    let top: Members<'_> = serde_json::from_str(text)
        .map_err(|e| NotRepaired(format!("the body is not a JSON object: {e}")))?;
    let key = history_key(route);
    let history = top
        .get(key)
        .ok_or_else(|| NotRepaired(format!("the body has no `{key}`")))?;
    let items: Vec<&RawValue> = serde_json::from_str(history.get())
        .map_err(|e| NotRepaired(format!("`{key}` is not an array: {e}")))?;
    let values: Vec<Value> = items
        .iter()
        .map(|r| serde_json::from_str(r.get()).unwrap_or(Value::Null))
        .collect();
    let calls = call_ids(route, &values);
    if let Some(id) = drop.iter().find(|id| calls.contains(id.as_str())) {
        return Err(NotRepaired(format!(
            "the result for call {id} is out of place (its call is in the request); a result is not moved"
        )));
    }
    let mut edit = Edit {
        key,
        items: &items,
        values: &values,
        answered: Vec::new(),
        dropped: Vec::new(),
    };
    let elements = match route {
        Route::AnthropicMessages => edit.anthropic(&answer, &drop)?,
        Route::OpenAiChat => edit.chat(&answer, &drop)?,
        Route::OpenAiResponses => edit.responses(&answer, &drop)?,
    };
    let (answered, dropped) = (edit.answered, edit.dropped);
    if let Some(id) = answer.iter().find(|id| !answered.contains(id)) {
        return Err(NotRepaired(format!("call {id} was not found to answer")));
    }
    Ok(Repaired {
        body: top.write_with(key, &join(&elements)),
        answered,
        dropped,
    })
}

/// Every call id of the history (the ids results answer). **O(len)**.
fn call_ids(route: Route, values: &[Value]) -> HashSet<String> {
    let mut ids = HashSet::new();
    for v in values {
        match route {
            Route::AnthropicMessages => {
                for b in blocks(v) {
                    if b["type"] == "tool_use" || b["type"] == "server_tool_use" {
                        ids.extend(b["id"].as_str().map(str::to_owned));
                    }
                }
            }
            Route::OpenAiChat => {
                for c in v["tool_calls"].as_array().into_iter().flatten() {
                    ids.extend(c["id"].as_str().map(str::to_owned));
                }
            }
            Route::OpenAiResponses => {
                let kind = v["type"].as_str().unwrap_or("");
                if !kind.ends_with("_output") {
                    ids.extend(v["call_id"].as_str().map(str::to_owned));
                }
            }
        }
    }
    ids
}

/// A message's content blocks (none when its content is a string).
fn blocks(message: &Value) -> &[Value] {
    message["content"].as_array().map_or(&[], Vec::as_slice)
}

struct Edit<'a> {
    key: &'static str,
    items: &'a [&'a RawValue],
    values: &'a [Value],
    answered: Vec<String>,
    dropped: Vec<String>,
}

impl<'a> Edit<'a> {
    /// Anthropic Messages: results at the head of the next user message.
    fn anthropic(
        &mut self,
        answer: &[String],
        drop: &BTreeSet<String>,
    ) -> Result<Vec<Element<'a>>, NotRepaired> {
        let mut out = Vec::with_capacity(self.items.len() + 1);
        // Results owed to the next message: (call ids) from the assistant message before.
        let mut owed: Vec<String> = Vec::new();
        for (i, (raw, v)) in self.items.iter().zip(self.values).enumerate() {
            let is_user = v["role"] == "user";
            if !owed.is_empty() && !is_user {
                out.push(Element::New(
                    json!({"role": "user", "content": aborted_blocks(&owed)}).to_string(),
                ));
                self.answered.append(&mut owed);
            }
            if v["role"] == "assistant" {
                owed = blocks(v)
                    .iter()
                    .filter(|b| b["type"] == "tool_use")
                    .filter_map(|b| b["id"].as_str())
                    .filter(|id| answer.iter().any(|a| a == id))
                    .map(str::to_owned)
                    .collect();
                out.push(Element::Raw(raw));
                continue;
            }
            let drops = blocks(v).iter().any(|b| {
                b["type"] == "tool_result"
                    && b["tool_use_id"]
                        .as_str()
                        .is_some_and(|id| drop.contains(id))
            });
            if owed.is_empty() && !drops {
                out.push(Element::Raw(raw));
                continue;
            }
            let members: Members<'_> = serde_json::from_str(raw.get())
                .map_err(|e| NotRepaired(format!("{}.{i} is not an object: {e}", self.key)))?;
            // The content's elements kept, each with whether it is a tool result.
            let mut content: Vec<(Element<'_>, bool)> = match members.get("content") {
                Some(c) if c.get().trim_start().starts_with('[') => {
                    let raws: Vec<&RawValue> = serde_json::from_str(c.get())
                        .map_err(|e| NotRepaired(format!("{}.{i}.content: {e}", self.key)))?;
                    let mut kept = Vec::with_capacity(raws.len());
                    for (r, b) in raws.into_iter().zip(blocks(v)) {
                        let result = b["type"] == "tool_result";
                        match b["tool_use_id"].as_str() {
                            Some(id) if result && drop.contains(id) => {
                                self.dropped.push(id.to_owned());
                            }
                            _ => kept.push((Element::Raw(r), result)),
                        }
                    }
                    kept
                }
                // A string content: the text, after the results.
                Some(c) => {
                    let text = serde_json::from_str::<Value>(c.get()).unwrap_or_default();
                    vec![(
                        Element::New(json!({"type": "text", "text": text}).to_string()),
                        false,
                    )]
                }
                None => Vec::new(),
            };
            if !owed.is_empty() {
                // After the results already at its head: a result follows no text.
                let head = content.iter().take_while(|(_, result)| *result).count();
                let new = aborted_blocks(&owed)
                    .into_iter()
                    .map(|b| (Element::New(b.to_string()), true));
                content.splice(head..head, new);
                self.answered.append(&mut owed);
            }
            let content: Vec<Element<'_>> = content.into_iter().map(|(e, _)| e).collect();
            if content.is_empty() {
                continue;
            }
            out.push(Element::New(members.write_with("content", &join(&content))));
        }
        if !owed.is_empty() {
            out.push(Element::New(
                json!({"role": "user", "content": aborted_blocks(&owed)}).to_string(),
            ));
            self.answered.append(&mut owed);
        }
        Ok(out)
    }

    /// OpenAI Chat: a `tool` message after the calling message's run of tool messages.
    fn chat(
        &mut self,
        answer: &[String],
        drop: &BTreeSet<String>,
    ) -> Result<Vec<Element<'a>>, NotRepaired> {
        let mut out = Vec::with_capacity(self.items.len() + 1);
        let mut owed: Vec<String> = Vec::new();
        for (raw, v) in self.items.iter().zip(self.values) {
            let is_tool = v["role"] == "tool";
            if !is_tool {
                self.flush_chat(&mut out, &mut owed);
            }
            if is_tool
                && v["tool_call_id"]
                    .as_str()
                    .is_some_and(|id| drop.contains(id))
            {
                self.dropped
                    .push(v["tool_call_id"].as_str().unwrap_or("").to_owned());
                continue;
            }
            if v["role"] == "assistant" {
                owed = v["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["id"].as_str())
                    .filter(|id| answer.iter().any(|a| a == id))
                    .map(str::to_owned)
                    .collect();
            }
            out.push(Element::Raw(raw));
        }
        self.flush_chat(&mut out, &mut owed);
        Ok(out)
    }

    fn flush_chat(&mut self, out: &mut Vec<Element<'a>>, owed: &mut Vec<String>) {
        for id in owed.drain(..) {
            out.push(Element::New(
                json!({"role": "tool", "tool_call_id": id, "content": ABORTED_RESULT_TEXT})
                    .to_string(),
            ));
            self.answered.push(id);
        }
    }

    /// OpenAI Responses: an output item after its call, past the last reasoning item
    /// and the item it binds, so that no reasoning item's prefix changes (a reasoning
    /// item after a changed prefix is dropped by the model).
    fn responses(
        &mut self,
        answer: &[String],
        drop: &BTreeSet<String>,
    ) -> Result<Vec<Element<'a>>, NotRepaired> {
        let last_reasoning = self.values.iter().rposition(|v| v["type"] == "reasoning");
        let settled = last_reasoning.map_or(0, |r| r + 2);
        // The outputs owed, by the position they go after.
        let mut owed: Vec<(usize, String, String)> = Vec::new();
        for (at, v) in self.values.iter().enumerate() {
            let kind = v["type"].as_str().unwrap_or("");
            let Some(id) = v["call_id"].as_str() else {
                continue;
            };
            if kind.ends_with("_output")
                || !answer.iter().any(|a| a == id)
                || owed.iter().any(|(_, o, _)| o == id)
            {
                continue;
            }
            let output = match kind {
                "function_call" => "function_call_output",
                "custom_tool_call" => "custom_tool_call_output",
                other => {
                    return Err(NotRepaired(format!(
                        "call {id} is a {other}, which no synthesized output can answer"
                    )));
                }
            };
            let after = (at + 1).max(settled).min(self.values.len());
            owed.push((
                after,
                id.to_owned(),
                json!({"type": output, "call_id": id, "output": ABORTED_RESULT_TEXT}).to_string(),
            ));
        }
        self.answered = owed.iter().map(|(_, id, _)| id.clone()).collect();
        let mut out = Vec::with_capacity(self.items.len() + owed.len());
        let mut owed = owed.into_iter().peekable();
        for (at, (raw, v)) in self.items.iter().zip(self.values).enumerate() {
            while let Some((_, _, item)) = owed.next_if(|(after, _, _)| *after == at) {
                out.push(Element::New(item));
            }
            let id = v["call_id"].as_str();
            let kind = v["type"].as_str().unwrap_or("");
            if kind.ends_with("_output") && id.is_some_and(|id| drop.contains(id)) {
                self.dropped.push(id.unwrap_or("").to_owned());
                continue;
            }
            out.push(Element::Raw(raw));
        }
        out.extend(owed.map(|(_, _, item)| Element::New(item)));
        Ok(out)
    }
}

/// Anthropic error results for `ids`, in order.
fn aborted_blocks(ids: &[String]) -> Vec<Value> {
    ids.iter()
        .map(|id| {
            json!({
                "type": "tool_result",
                "tool_use_id": id,
                "content": ABORTED_RESULT_TEXT,
                "is_error": true,
            })
        })
        .collect()
}
