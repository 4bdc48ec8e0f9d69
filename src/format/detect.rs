//! `--format auto`: telling the format from the input's shape.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::{Format, FormatError, gemini_cli, json_doc};

/// The item `type`s of OpenAI Responses input (and Anthropic's `message` objects):
/// an element with any other `type` belongs to no format cutpoint reads.
const RESPONSES_TYPES: [&str; 26] = [
    "message",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "computer_call",
    "computer_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "reasoning",
    "web_search_call",
    "file_search_call",
    "image_generation_call",
    "code_interpreter_call",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "item_reference",
    "compaction",
    "tool_search_call",
    "tool_search_output",
];

/// What a text that starts with a byte order mark is told, by every reader and by
/// detection: JSON allows none (RFC 8259, section 8.1), so serde_json's own error
/// would be "expected value" at column 1 of the first line, and detection would see
/// no format at all. The CLI skips one before reading (and says so). **O(1)**.
pub(crate) fn byte_order_mark(text: &str) -> Option<FormatError> {
    text.starts_with('\u{feff}').then(|| FormatError::Invalid {
        line: 1,
        message: BYTE_ORDER_MARK.to_owned(),
    })
}

/// The message of [`byte_order_mark`]'s error, and of a records line that starts with one.
pub(crate) const BYTE_ORDER_MARK: &str = "the text starts with a byte order mark (U+FEFF), which JSON does not allow: remove it (the first three bytes, EF BB BF)";

/// How many messages or lines detection looks at.
const SAMPLE: usize = 200;

/// The format of an input given whole, as every front end judges it (the CLI's
/// `auto`, Python's `format="auto"`): [`detect`]'s answer; where no format claims it,
/// records JSONL (whose reader then names the bad line) when it may be records (not
/// UTF-8, empty, or a line of the first few hundred that is no JSON object or has a
/// `kind`), else `detect`'s error, saying what was seen. **O(len)** for a JSON
/// document, **O(sample)** for lines.
///
/// # Errors
/// [`FormatError::Undetected`], as [`detect`], for input that is not records either.
pub fn detect_input(bytes: &[u8]) -> Result<Format, FormatError> {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Ok(Format::Records);
    };
    if let Some(e) = byte_order_mark(text) {
        return Err(e);
    }
    detect(text).or_else(|e| match may_be_records(text) {
        true => Ok(Format::Records),
        false => Err(e),
    })
}

/// Whether `text`, which no format claims, may still be records JSONL: empty (an
/// empty log), or some line (of the first few hundred) is no JSON object, or has a
/// `kind` (a bad line the records reader names). **O(sample)**.
fn may_be_records(text: &str) -> bool {
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return true;
    }
    let first_line = trimmed.lines().next().unwrap_or("");
    let first_is_object = first_line.starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(first_line).is_ok();
    // A JSON document (an array, an object over several lines, a request body on one
    // line) is never records.
    if trimmed.starts_with('[')
        || (trimmed.starts_with('{') && !first_is_object)
        || is_one_line_document(text)
    {
        return false;
    }
    trimmed
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(SAMPLE)
        .any(
            |line| match serde_json::from_str::<serde_json::Value>(line) {
                Ok(serde_json::Value::Object(obj)) => obj.contains_key("kind"),
                _ => true,
            },
        )
}

/// The format of `text`, judged from its first lines (JSONL) or its first messages
/// (JSON documents). **O(len)** for a JSON document (one parse to find its messages),
/// **O(sample)** for JSONL.
///
/// # Errors
/// [`FormatError::Undetected`] when no format fits or more than one does (a log of
/// plain text messages is valid Anthropic and OpenAI Chat alike); it lists the formats.
pub fn detect(text: &str) -> Result<Format, FormatError> {
    if let Some(e) = byte_order_mark(text) {
        return Err(e);
    }
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return Err(undetected("the input is empty"));
    }
    // JSONL: the first line is a complete JSON object on its own, and either more
    // lines follow or it holds no messages (a request body captured on one line is
    // a JSON document, never records).
    if !is_one_line_document(text) {
        let first_line = trimmed.lines().next().unwrap_or("");
        if first_line.starts_with('{')
            && matches!(
                serde_json::from_str::<Value>(first_line),
                Ok(Value::Object(_))
            )
        {
            return detect_lines(trimmed);
        }
    }
    let doc = json_doc::split(text, Format::OpenAiChat)
        .map_err(|e| undetected(&format!("not JSON lines, and not a JSON document: {e}")))?;
    let holder = holder_keys(trimmed);
    let mut scores = Scores::default();
    let mut task_records = 0;
    for raw in doc.elements.iter().take(SAMPLE) {
        if let Ok(value) = serde_json::from_str::<Value>(raw.get()) {
            task_records += usize::from(is_task_record(&value));
            scores.add(&value);
        }
    }
    if task_records > 0 && task_records == doc.elements.len().min(SAMPLE) {
        return Err(undetected(&format!(
            "a tau-bench results file: {} task records, each holding one trajectory under `traj` (OpenAI Chat messages); read one trajectory at a time, e.g. `jq '{{messages: .[0].traj}}' FILE`",
            doc.elements.len()
        )));
    }
    match holder.key.as_deref() {
        Some("contents") => scores.gemini += 1,
        Some("input") => scores.responses += 1,
        _ => {}
    }
    if holder.session && holder.key.as_deref() == Some("messages") {
        scores.gemini_cli += 1;
    }
    scores.decide()
}

/// Whether `text` is one JSON object holding a message array (`messages`, `input`,
/// `contents` or `history`) on a single line: a request body as a proxy captures it,
/// which is a JSON document of its provider's format, never one line of JSONL.
/// **O(len)**: one syntax pass, the top-level values skipped as their bytes (no tree
/// is built: a request body is read whole right after).
pub fn is_one_line_document(text: &str) -> bool {
    let body = text.trim();
    if !body.starts_with('{') || body.contains('\n') {
        return false;
    }
    // The top-level members as their bytes; a key given twice keeps its last value,
    // as a tree would.
    let Ok(top) = serde_json::from_str::<HashMap<Cow<'_, str>, &RawValue>>(body) else {
        return false;
    };
    ["messages", "input", "contents", "history"]
        .iter()
        .any(|k| top.get(*k).is_some_and(|v| v.get().starts_with('[')))
}

/// What the top-level object says: the key holding the messages, and whether it is
/// a Gemini CLI session (`sessionId` / `projectHash`).
#[derive(Default)]
struct Holder {
    key: Option<String>,
    session: bool,
}

fn holder_keys(text: &str) -> Holder {
    #[derive(Deserialize)]
    struct Keys {
        #[serde(default)]
        messages: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        input: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        contents: Option<serde::de::IgnoredAny>,
        #[serde(rename = "sessionId", default)]
        session_id: Option<serde::de::IgnoredAny>,
        #[serde(rename = "projectHash", default)]
        project_hash: Option<serde::de::IgnoredAny>,
    }
    if !text.starts_with('{') {
        return Holder::default();
    }
    let Ok(keys) = serde_json::from_str::<Keys>(text) else {
        return Holder::default();
    };
    let key = if keys.messages.is_some() {
        Some("messages".into())
    } else if keys.contents.is_some() {
        Some("contents".into())
    } else {
        keys.input.map(|_| "input".into())
    };
    Holder {
        key,
        session: keys.session_id.is_some() || keys.project_hash.is_some(),
    }
}

/// A tau-bench task record: `{"task_id", "traj": [...], ...}`.
fn is_task_record(v: &Value) -> bool {
    v.get("traj").is_some_and(Value::is_array) && v.get("task_id").is_some()
}

/// Which JSON-lines format one line belongs to, by the keys only that format's lines
/// carry.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum LineKind {
    Records,
    ClaudeCode,
    Codex,
    /// None of cutpoint's: its `type`, if it has one.
    Other,
}

impl LineKind {
    /// The kind of the JSON object `obj`. **O(keys)**.
    fn of(obj: &serde_json::Map<String, Value>) -> LineKind {
        let kind = obj.get("type").and_then(Value::as_str);
        if obj.contains_key("kind") && obj.contains_key("tokens") {
            LineKind::Records
        } else if obj.contains_key("payload")
            && matches!(
                kind,
                Some("session_meta" | "response_item" | "turn_context" | "event_msg" | "compacted")
            )
        {
            LineKind::Codex
        } else if obj.contains_key("sessionId")
            || obj.contains_key("uuid")
            || (obj.contains_key("message") && matches!(kind, Some("user" | "assistant")))
        {
            LineKind::ClaudeCode
        } else {
            LineKind::Other
        }
    }

    /// The JSON-lines kind of `format`, if it is a JSON-lines format. **O(1)**.
    fn of_format(format: Format) -> Option<LineKind> {
        match format {
            Format::Records => Some(LineKind::Records),
            Format::ClaudeCode => Some(LineKind::ClaudeCode),
            Format::CodexRollout => Some(LineKind::Codex),
            _ => None,
        }
    }
}

/// What the lines that belong to no format look like: their `type`s (at most
/// five), or their keys when they have no `type`.
#[derive(Default)]
struct Unknown {
    lines: usize,
    types: Vec<String>,
    keys: Vec<String>,
}

impl Unknown {
    fn add(&mut self, obj: &serde_json::Map<String, Value>) {
        self.lines += 1;
        match obj.get("type").and_then(Value::as_str) {
            Some(t) if !self.types.iter().any(|u| u == t) && self.types.len() < 5 => {
                self.types.push(t.to_owned());
            }
            Some(_) => {}
            None => {
                for k in obj.keys() {
                    if !self.keys.iter().any(|u| u == k) && self.keys.len() < 5 {
                        self.keys.push(k.clone());
                    }
                }
            }
        }
    }

    /// `N lines with `type`s "a", "b"` (or their keys). **O(1)**.
    fn seen(&self) -> String {
        let quoted = |v: &[String]| {
            v.iter()
                .map(|k| format!("{k:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let lines = match self.lines {
            1 => "1 line".to_owned(),
            n => format!("{n} lines"),
        };
        if !self.types.is_empty() {
            format!("{lines} with `type`s {}", quoted(&self.types))
        } else if !self.keys.is_empty() {
            format!("{lines} with keys {}", quoted(&self.keys))
        } else {
            format!("{lines}, each an empty object")
        }
    }
}

fn detect_lines(text: &str) -> Result<Format, FormatError> {
    let (mut records, mut claude, mut codex) = (0, 0, 0);
    let mut unknown = Unknown::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()).take(SAMPLE) {
        let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match LineKind::of(&obj) {
            LineKind::Records => records += 1,
            LineKind::ClaudeCode => claude += 1,
            LineKind::Codex => codex += 1,
            LineKind::Other => unknown.add(&obj),
        }
    }
    match (records > 0, claude > 0, codex > 0) {
        (true, false, false) => Ok(Format::Records),
        (false, true, false) => Ok(Format::ClaudeCode),
        (false, false, true) => Ok(Format::CodexRollout),
        (false, false, false) => Err(undetected(&format!(
            "JSON lines, but neither records, Claude Code nor Codex lines: {} of the first {SAMPLE} seen",
            unknown.seen()
        ))),
        _ => Err(undetected("JSON lines of more than one transcript format")),
    }
}

/// Whether `text` is JSON lines: its first line a complete JSON object on its own,
/// and not a one-line request body ([`is_one_line_document`]). **O(first line)**
/// (**O(len)** for a one-line input).
pub(crate) fn is_json_lines(text: &str) -> bool {
    let first_line = text.trim_start().lines().next().unwrap_or("");
    // A JSON value that starts with `{` is an object: its syntax checked, no tree built.
    first_line.starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(first_line).is_ok()
        && !is_one_line_document(text)
}

/// Why `text` is plainly not `format`, when it is not: a JSON document named as a
/// JSON-lines format, JSON lines named as a JSON document, or JSON lines none of
/// which carries the named format's keys (Copilot CLI logs named as Claude Code).
/// `None` lets the reader judge (and name the bad line). [`read`](super::read) asks
/// first; a reader of a stream may ask of its first bytes (a last line cut short is
/// left to the reader). **O(sample)** when `text`
/// is of the format (the scan stops at the first line of it), **O(len)** otherwise.
pub fn mismatch(text: &str, format: Format) -> Option<FormatError> {
    if let Some(e) = byte_order_mark(text) {
        return Some(e);
    }
    let trimmed = text.trim_start();
    if trimmed.is_empty() {
        return None;
    }
    let lines = is_json_lines(text);
    let why = match LineKind::of_format(format) {
        None if lines => format!(
            "JSON lines ({}), not one JSON document",
            match detect_lines(trimmed) {
                Ok(f) => format!("{f} lines"),
                Err(_) => "of no format cutpoint reads".to_owned(),
            }
        ),
        None => return None,
        Some(_) if !lines => {
            let document = trimmed.starts_with('[')
                || is_one_line_document(text)
                || (trimmed.starts_with('{')
                    && serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok());
            if !document {
                return None;
            }
            let shape = if trimmed.starts_with('[') {
                "a JSON array"
            } else {
                "a JSON object"
            };
            format!("{shape}, one JSON document, not JSON lines")
        }
        Some(want) => {
            let mut unknown = Unknown::default();
            let mut others: Vec<Format> = Vec::new();
            // The first bytes of a stream end inside a line, as a file cut short does:
            // that last line is judged by the lines before it, not left to the reader
            // (which would name line 1 of a Codex rollout named as records).
            let unfinished = (!trimmed.ends_with('\n'))
                .then(|| trimmed.lines().last())
                .flatten();
            for line in trimmed.lines().filter(|l| !l.trim().is_empty()) {
                let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line) else {
                    if unfinished.is_some_and(|last| std::ptr::eq(last, line)) {
                        break;
                    }
                    // A line that is no JSON object: the reader names it.
                    return None;
                };
                // A line with a `kind` may be a records line with a bad field: the
                // records reader names it.
                if want == LineKind::Records && obj.contains_key("kind") {
                    return None;
                }
                match LineKind::of(&obj) {
                    k if k == want => return None,
                    LineKind::Other => unknown.add(&obj),
                    LineKind::Records => others.push(Format::Records),
                    LineKind::ClaudeCode => others.push(Format::ClaudeCode),
                    LineKind::Codex => others.push(Format::CodexRollout),
                }
            }
            others.sort_by_key(|f| f.name());
            others.dedup();
            match (others.is_empty(), unknown.lines) {
                (false, _) => format!(
                    "no line of it is a {format} line; it holds {} lines",
                    others
                        .iter()
                        .map(|f| f.name())
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
                (true, 0) => return None,
                (true, _) => format!(
                    "no line of it is a {format} line: {}, a format cutpoint does not read",
                    unknown.seen()
                ),
            }
        }
    };
    let hint = match detect(text) {
        Ok(f) => format!("; it reads as {f}: pass --format {f} (or auto)"),
        Err(_) => String::new(),
    };
    Some(FormatError::Mismatch {
        format,
        why: format!("{why}{hint}"),
    })
}

#[derive(Default)]
struct Scores {
    anthropic: u32,
    chat: u32,
    responses: u32,
    gemini: u32,
    gemini_cli: u32,
    /// Item `type`s no format knows, as seen (at most a few).
    unknown: Vec<String>,
}

impl Scores {
    /// Counts the marks only one provider's messages carry.
    fn add(&mut self, v: &Value) {
        let Value::Object(m) = v else { return };
        let role = m.get("role").and_then(Value::as_str);
        let kind = m.get("type").and_then(Value::as_str);
        if let Some(k) = kind.filter(|_| role.is_none()) {
            if gemini_cli::TYPES.contains(&k) {
                self.gemini_cli += 1;
                return;
            }
        }
        if let Some(k) = kind.filter(|k| !RESPONSES_TYPES.contains(k)) {
            if !self.unknown.iter().any(|u| u == k) && self.unknown.len() < 5 {
                self.unknown.push(k.to_owned());
            }
            return;
        }
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
        if !self.unknown.is_empty() {
            let seen: Vec<String> = self.unknown.iter().map(|k| format!("{k:?}")).collect();
            return Err(undetected(&format!(
                "the items have `type`s no format cutpoint reads knows: {}",
                seen.join(", ")
            )));
        }
        let all = [
            (Format::AnthropicMessages, self.anthropic),
            (Format::OpenAiChat, self.chat),
            (Format::OpenAiResponses, self.responses),
            (Format::Gemini, self.gemini),
            (Format::GeminiCli, self.gemini_cli),
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
