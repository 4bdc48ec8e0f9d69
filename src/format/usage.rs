//! The provider's own token counts, where a transcript file records them.

use serde::Deserialize;

use super::Format;
use super::json_doc::lines;

/// The size of the context at the last model call, as the provider reported it: for
/// Claude Code, the last assistant record's `message.usage` (input, cache creation,
/// cache read and output tokens); for Codex, the last `token_count` event's
/// `last_token_usage.total_tokens`. `None` for other formats or when the file holds
/// no usage. Such numbers count what the provider saw (system prompt, tool
/// definitions, unredacted text), so they can exceed the transcript's own estimate by
/// far. **O(len)** in the worst case; it reads lines from the end and stops at the
/// first usage.
pub fn reported_context_tokens(text: &str, format: Format) -> Option<u64> {
    let all: Vec<std::ops::Range<usize>> = match format {
        Format::ClaudeCode | Format::CodexRollout => lines(text).map(|(_, span)| span).collect(),
        _ => return None,
    };
    all.into_iter().rev().find_map(|span| {
        let line = &text[span];
        match format {
            Format::ClaudeCode => claude_code(line),
            _ => codex(line),
        }
    })
}

fn claude_code(line: &str) -> Option<u64> {
    #[derive(Deserialize)]
    struct Line {
        #[serde(rename = "type")]
        kind: Option<String>,
        message: Option<Msg>,
    }
    #[derive(Deserialize)]
    struct Msg {
        usage: Option<Usage>,
    }
    #[derive(Deserialize)]
    struct Usage {
        #[serde(default)]
        input_tokens: u64,
        #[serde(default)]
        cache_creation_input_tokens: u64,
        #[serde(default)]
        cache_read_input_tokens: u64,
        #[serde(default)]
        output_tokens: u64,
    }
    if !line.contains("\"usage\"") {
        return None;
    }
    let parsed: Line = serde_json::from_str(line).ok()?;
    if parsed.kind.as_deref() != Some("assistant") {
        return None;
    }
    let u = parsed.message?.usage?;
    Some(
        u.input_tokens
            .saturating_add(u.cache_creation_input_tokens)
            .saturating_add(u.cache_read_input_tokens)
            .saturating_add(u.output_tokens),
    )
}

fn codex(line: &str) -> Option<u64> {
    #[derive(Deserialize)]
    struct Line {
        payload: Option<Payload>,
    }
    #[derive(Deserialize)]
    struct Payload {
        #[serde(rename = "type")]
        kind: Option<String>,
        info: Option<Info>,
    }
    #[derive(Deserialize)]
    struct Info {
        last_token_usage: Option<Last>,
    }
    #[derive(Deserialize)]
    struct Last {
        total_tokens: Option<u64>,
    }
    if !line.contains("\"token_count\"") {
        return None;
    }
    let parsed: Line = serde_json::from_str(line).ok()?;
    let payload = parsed.payload?;
    if payload.kind.as_deref() != Some("token_count") {
        return None;
    }
    payload.info?.last_token_usage?.total_tokens
}
