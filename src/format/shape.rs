//! A summary message in each format's shape, and the context fields and ids that make
//! a written record look like its neighbours: what every writer of a summary uses
//! (the one writer, `format::edit`, and the summary's count in `format::loaded`).

use std::hash::BuildHasher;

use serde_json::{Map, Value, json};

use super::Format;

/// The summary message as one JSON value (one line for JSONL formats), in the shape
/// of `format`: a user message for the chat formats, a `response_item` user message
/// for Codex, an `isCompactSummary` user record for Claude Code, a `user` message for
/// Gemini CLI, a `summary` line for records JSONL (`tokens` is used by records JSONL
/// only). **O(len)**.
pub fn summary_message(format: Format, text: &str, tokens: u64) -> String {
    summary_value(format, text, tokens).to_string()
}

fn summary_value(format: Format, text: &str, tokens: u64) -> Value {
    match format {
        Format::Records => json!({"kind": "summary", "tokens": tokens, "text": text}),
        Format::AnthropicMessages => {
            json!({"role": "user", "content": [{"type": "text", "text": text}]})
        }
        Format::OpenAiChat => json!({"role": "user", "content": text}),
        Format::OpenAiResponses => json!({
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]
        }),
        Format::Gemini => json!({"role": "user", "parts": [{"text": text}]}),
        Format::ClaudeCode => json!({
            "type": "user", "isCompactSummary": true, "isVisibleInTranscriptOnly": true,
            "message": {"role": "user", "content": text}
        }),
        Format::CodexRollout => json!({
            "type": "response_item",
            "payload": {
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}]
            }
        }),
        Format::GeminiCli => json!({"type": "user", "content": text}),
    }
}

/// The summary message written in place of `first`, the first message of its run:
/// [`summary_message`]'s shape with `first`'s context fields ([`context`]) and, for
/// Gemini CLI, an `id` of its own. **O(len)** of `first` and `text`.
pub(crate) fn summary_record(format: Format, text: &str, tokens: u64, first: &str) -> Value {
    let mut value = summary_value(format, text, tokens);
    if let Value::Object(map) = &mut value {
        for (k, v) in context(format, first) {
            map.entry(k).or_insert(v);
        }
        if format == Format::GeminiCli {
            map.insert(
                "id".to_owned(),
                Value::String(uuid(first, &[text, "gemini-cli"])),
            );
        }
    }
    value
}

/// The fields a line (or element) of `format` carries besides its message, copied
/// from a neighbour so the summary looks like it: `timestamp` (Codex, Claude Code,
/// Gemini CLI) and, for Claude Code, `sessionId`, `cwd`, `version`, `gitBranch`,
/// `userType`, `slug` and `isSidechain` (a subagent's summary stays in the subagent's
/// conversation).
pub(crate) fn context(format: Format, neighbour: &str) -> Map<String, Value> {
    let keys: &[&str] = match format {
        Format::CodexRollout | Format::GeminiCli => &["timestamp"],
        Format::ClaudeCode => &[
            "timestamp",
            "sessionId",
            "cwd",
            "version",
            "gitBranch",
            "userType",
            "slug",
            "isSidechain",
        ],
        _ => &[],
    };
    let mut out = Map::new();
    if keys.is_empty() {
        return out;
    }
    if let Ok(Value::Object(map)) = serde_json::from_str(neighbour) {
        for k in keys {
            if let Some(v) = map.get(*k) {
                out.insert((*k).to_owned(), v.clone());
            }
        }
    }
    out
}

/// A deterministic UUID-shaped id for a record cutpoint writes: a hash of the input
/// and `salt`. **O(len)**.
pub(crate) fn uuid(input: &str, salt: &[&str]) -> String {
    let hash = |seed: u64| {
        let state = foldhash::fast::FixedState::with_seed(seed);
        state.hash_one((input, salt))
    };
    let (a, b) = (hash(0x5eed_0001), hash(0x5eed_0002));
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}
