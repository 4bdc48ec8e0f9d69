//! `--format auto`: telling the format from the input's shape.

use serde::Deserialize;
use serde_json::Value;

use super::{Format, FormatError, json_doc};

/// How many messages or lines detection looks at.
const SAMPLE: usize = 200;

/// The format of `text`, judged from its first lines (JSONL) or its first messages
/// (JSON documents). **O(len)** for a JSON document (one parse to find its messages),
/// **O(sample)** for JSONL.
///
/// # Errors
/// [`FormatError::Undetected`] when no format fits or more than one does (a log of
/// plain text messages is valid Anthropic and OpenAI Chat alike); it lists the formats.
pub fn detect(text: &str) -> Result<Format, FormatError> {
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(undetected("the input is empty"));
    }
    // JSONL: the first line is a complete JSON object on its own.
    let first_line = trimmed.lines().next().unwrap_or("");
    if first_line.starts_with('{') {
        if let Ok(Value::Object(first)) = serde_json::from_str::<Value>(first_line) {
            if trimmed.len() > first_line.len() || !first_line_holds_messages(&first) {
                return detect_lines(trimmed);
            }
        }
    }
    let doc = json_doc::split(text, Format::OpenAiChat)
        .map_err(|e| undetected(&format!("not JSON lines, and not a JSON document: {e}")))?;
    let holder_key = holder_key(trimmed);
    let mut scores = Scores::default();
    for raw in doc.elements.iter().take(SAMPLE) {
        if let Ok(value) = serde_json::from_str::<Value>(raw.get()) {
            scores.add(&value);
        }
    }
    match holder_key.as_deref() {
        Some("contents") => scores.gemini += 1,
        Some("input") => scores.responses += 1,
        _ => {}
    }
    scores.decide()
}

fn first_line_holds_messages(first: &serde_json::Map<String, Value>) -> bool {
    ["messages", "input", "contents", "history"]
        .iter()
        .any(|k| first.get(*k).is_some_and(Value::is_array))
}

fn holder_key(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Keys {
        #[serde(default)]
        messages: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        input: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        contents: Option<serde::de::IgnoredAny>,
    }
    if !text.starts_with('{') {
        return None;
    }
    let keys: Keys = serde_json::from_str(text).ok()?;
    if keys.messages.is_some() {
        Some("messages".into())
    } else if keys.contents.is_some() {
        Some("contents".into())
    } else {
        keys.input.map(|_| "input".into())
    }
}

fn detect_lines(text: &str) -> Result<Format, FormatError> {
    let (mut records, mut claude, mut codex) = (0, 0, 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()).take(SAMPLE) {
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let kind = obj.get("type").and_then(Value::as_str);
        if obj.contains_key("kind") && obj.contains_key("tokens") {
            records += 1;
        } else if obj.contains_key("payload")
            && matches!(
                kind,
                Some("session_meta" | "response_item" | "turn_context" | "event_msg" | "compacted")
            )
        {
            codex += 1;
        } else if obj.contains_key("sessionId")
            || obj.contains_key("uuid")
            || (obj.contains_key("message") && matches!(kind, Some("user" | "assistant")))
        {
            claude += 1;
        }
    }
    match (records > 0, claude > 0, codex > 0) {
        (true, false, false) => Ok(Format::Records),
        (false, true, false) => Ok(Format::ClaudeCode),
        (false, false, true) => Ok(Format::CodexRollout),
        (false, false, false) => Err(undetected(
            "JSON lines, but neither records, Claude Code nor Codex lines",
        )),
        _ => Err(undetected("JSON lines of more than one transcript format")),
    }
}

#[derive(Default)]
struct Scores {
    anthropic: u32,
    chat: u32,
    responses: u32,
    gemini: u32,
}

impl Scores {
    /// Counts the marks only one provider's messages carry.
    fn add(&mut self, v: &Value) {
        let Value::Object(m) = v else { return };
        let role = m.get("role").and_then(Value::as_str);
        let kind = m.get("type").and_then(Value::as_str);
        if m.contains_key("parts") || role == Some("model") {
            self.gemini += 1;
        }
        if m.contains_key("tool_calls")
            || m.contains_key("tool_call_id")
            || m.contains_key("tool_call_ids")
            || role == Some("tool")
            || m.get("content").is_some_and(Value::is_null)
        {
            self.chat += 1;
        }
        if kind.is_some_and(|k| k != "message") || m.contains_key("call_id") {
            self.responses += 1;
        }
        if let Some(Value::Array(blocks)) = m.get("content") {
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some(
                        "tool_use" | "tool_result" | "thinking" | "redacted_thinking"
                        | "server_tool_use",
                    ) => self.anthropic += 1,
                    Some("input_text" | "output_text") => self.responses += 1,
                    _ => {}
                }
            }
        }
    }

    fn decide(&self) -> Result<Format, FormatError> {
        let all = [
            (Format::AnthropicMessages, self.anthropic),
            (Format::OpenAiChat, self.chat),
            (Format::OpenAiResponses, self.responses),
            (Format::Gemini, self.gemini),
        ];
        let seen: Vec<Format> = all
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(f, _)| *f)
            .collect();
        match seen[..] {
            [one] => Ok(one),
            [] => Err(undetected(
                "the messages carry no tool calls or other marks of one provider",
            )),
            _ => Err(undetected(&format!(
                "the messages look like more than one of {}",
                seen.iter().map(|f| f.name()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

fn undetected(why: &str) -> FormatError {
    FormatError::Undetected {
        why: why.to_owned(),
    }
}
