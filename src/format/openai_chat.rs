//! OpenAI Chat Completions: `{"role":…,"content":…,"tool_calls":[…]}` and
//! `{"role":"tool","tool_call_id":…,"content":…}`. SWE-agent trajectories store the
//! same messages with `tool_call_ids` (a list) on tool messages; both are read.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{JsonStr, describe, opt_str, result_line, string_or_json};
use super::{Block, Parsed, Role, TokenCounter, summary_in};
use crate::CallId;

#[derive(Deserialize)]
struct Msg<'a> {
    role: String,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<&'a RawValue>>,
    #[serde(default)]
    tool_call_id: Option<String>,
    #[serde(default)]
    tool_call_ids: Option<Vec<String>>,
}

/// One tool call of a message, or a piece of one in a stream's delta (by its
/// `index`; the live decoder reads the same struct).
#[derive(Deserialize)]
pub(crate) struct ToolCall<'a> {
    #[serde(default)]
    pub(crate) index: Option<u64>,
    #[serde(borrow, default)]
    pub(crate) id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) function: Option<Function<'a>>,
}

/// A tool call's `function`: its name, and its arguments (a JSON string, or a
/// gateway's JSON object).
#[derive(Deserialize)]
pub(crate) struct Function<'a> {
    #[serde(borrow, default)]
    pub(crate) name: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) arguments: Option<&'a RawValue>,
}

/// Parses one Chat Completions message. **O(len)**.
pub(crate) fn message<'a>(text: &'a str, counter: &dyn TokenCounter) -> Result<Parsed<'a>, String> {
    let msg: Msg<'_> = serde_json::from_str(text).map_err(|e| describe(&e))?;
    let role = match msg.role.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" | "developer" => Role::System,
        "tool" | "function" => Role::Tool,
        other => return Err(format!("unknown role {other:?}")),
    };
    let mut blocks = Vec::new();
    if role == Role::Tool {
        let ids: Vec<String> = match (msg.tool_call_id, msg.tool_call_ids) {
            (Some(id), _) => vec![id],
            (None, Some(ids)) => ids,
            (None, None) => return Err("tool message without a tool_call_id".to_owned()),
        };
        if ids.is_empty() || ids.iter().any(String::is_empty) {
            return Err("tool message with an empty tool_call_id".to_owned());
        }
        let first_line = result_line(msg.content.map(RawValue::get));
        let share = counter.count_json(text).div_ceil(ids.len() as u64);
        for id in ids {
            blocks.push((
                Block::Result {
                    id: CallId::from(id),
                    first_line: first_line.clone(),
                },
                share,
                text,
            ));
        }
        return Ok(Parsed {
            role,
            blocks,
            signed: Vec::new(),
        });
    }
    let has_content = msg
        .content
        .is_some_and(|c| !matches!(c.get(), "null" | "\"\"" | "[]"));
    let calls = msg.tool_calls.unwrap_or_default();
    if has_content || calls.is_empty() {
        let tokens = msg.content.map_or(1, |c| counter.count_json(c.get()));
        // A user message holding cutpoint's ledger is an earlier summary.
        let block = match (role, msg.content) {
            (Role::User, Some(c)) => summary_in(c.get()).unwrap_or(Block::Text),
            _ => Block::Text,
        };
        blocks.push((block, tokens, msg.content.map_or(text, RawValue::get)));
    }
    for (k, raw) in calls.into_iter().enumerate() {
        let call: ToolCall<'_> = serde_json::from_str(raw.get())
            .map_err(|e| format!("tool_calls.{k}: {}", describe(&e)))?;
        let id = opt_str(&call.id)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| format!("tool_calls.{k}: a tool call without an id"))?;
        let (name, arguments) = match call.function {
            Some(f) => (
                opt_str(&f.name).unwrap_or_default().to_owned(),
                string_or_json(f.arguments.map(RawValue::get)),
            ),
            None => (String::new(), String::new()),
        };
        blocks.push((
            Block::Call {
                id: CallId::from(id),
                name,
                arguments,
            },
            counter.count_json(raw.get()),
            raw.get(),
        ));
    }
    Ok(Parsed {
        role,
        blocks,
        signed: Vec::new(),
    })
}
