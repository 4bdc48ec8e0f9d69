//! The repository's real OpenAI Chat transcripts (tests/fixtures/transcripts), read
//! and checked by `cutpoint::format`, as rig messages.

use std::collections::HashMap;
use std::path::PathBuf;

use cutpoint::format::{self, ByteEstimate, Format};
use rig_core::completion::Message;
use rig_core::message::{
    AssistantContent, AssistantMessage, CallId, Text, ToolCall, ToolFunction, ToolName, ToolResult,
    ToolResultContent, UserContent,
};
use serde_json::Value;

/// The fixtures folder of the workspace.
pub(crate) fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/transcripts")
}

/// Every OpenAI Chat request body of the fixtures (`openai-chat__*`, as
/// `cutpoint::format::detect` tells them too), with its name, rule violations (`check_rules`) and its messages as rig's.
pub(crate) fn openai_chat() -> Vec<(String, usize, Vec<Message>)> {
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(dir())
        .expect("the fixtures folder")
        .map(|e| e.expect("an entry").path())
        .collect();
    names.sort();
    for path in names {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // A `{"messages": [...]}` request body (not a trajectory file holding one).
        if !name.starts_with("openai-chat__") {
            continue;
        }
        assert_eq!(
            format::detect(&text).ok(),
            Some(Format::OpenAiChat),
            "{name}"
        );
        let t = format::read(&text, Format::OpenAiChat, &ByteEstimate)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let violations = format::check_rules(&t).len();
        out.push((name.clone(), violations, to_rig(&name, &text)));
    }
    assert!(out.len() >= 3, "the OpenAI Chat fixtures: {out:?}");
    out
}

/// An OpenAI Chat `{"messages": [...]}` document as rig messages: consecutive `tool`
/// messages become one user message of results, as rig holds them.
pub(crate) fn to_rig(name: &str, text: &str) -> Vec<Message> {
    let doc: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let messages = doc["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: no messages"));
    let mut names: HashMap<String, ToolName> = HashMap::new();
    let mut out: Vec<Message> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let text = m["content"].as_str().unwrap_or("").to_owned();
        match m["role"].as_str() {
            Some("system") => out.push(Message::System { content: text }),
            Some("user") => out.push(Message::User {
                content: vec![UserContent::Text(Text::new(text))],
            }),
            Some("assistant") => {
                let mut content = Vec::new();
                if !text.is_empty() {
                    content.push(AssistantContent::Text(Text::new(text)));
                }
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    let id = c["id"].as_str().unwrap_or_default().to_owned();
                    let tool = ToolName::new(c["function"]["name"].as_str().unwrap_or("?"))
                        .unwrap_or_else(|_| panic!("{name}: message {i}: empty tool name"));
                    let args = c["function"]["arguments"].as_str().unwrap_or("{}");
                    names.insert(id.clone(), tool.clone());
                    content.push(AssistantContent::ToolCall(ToolCall::from_wire(
                        id,
                        ToolFunction::parse(tool, args),
                    )));
                }
                out.push(Message::Assistant(AssistantMessage::new(content)));
            }
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or_default().to_owned();
                let tool = names
                    .get(&id)
                    .cloned()
                    .unwrap_or_else(|| panic!("{name}: message {i}: result of unknown {id}"));
                let result = UserContent::ToolResult(ToolResult {
                    call: CallId::from_wire(id),
                    name: tool,
                    content: vec![ToolResultContent::Text(Text::new(text))],
                    is_error: false,
                });
                match out.last_mut() {
                    Some(Message::User { content })
                        if content
                            .iter()
                            .all(|c| matches!(c, UserContent::ToolResult(_))) =>
                    {
                        content.push(result)
                    }
                    _ => out.push(Message::User {
                        content: vec![result],
                    }),
                }
            }
            other => panic!("{name}: message {i}: role {other:?}"),
        }
    }
    out
}
