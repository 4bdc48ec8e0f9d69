//! Codex rollout JSONL: lines `{"timestamp","type","payload"}`. Only
//! `type: "response_item"` lines are model history, one item per line, read as
//! OpenAI Responses items. A `type: "compacted"` line replaces all earlier history
//! with its `replacement_history`: it becomes one message that opens the new history.
//! `session_meta`, `turn_context`, `event_msg` and other lines are skipped.
//!
//! Each line is read by a one-pass fast path ([`fast_line`], see [`super::scan`])
//! that falls back to the reference path ([`line`]) on anything unusual.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{describe, lines};
use super::openai_responses::{self, Item};
use super::scan::Cursor;
use super::{Block, FormatError, Message, Parsed, Role, TokenCounter};

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", default)]
    kind: Option<&'a str>,
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Compacted<'a> {
    #[serde(borrow, default)]
    replacement_history: Option<Vec<&'a RawValue>>,
}

/// What one line of a rollout is.
#[derive(Debug, PartialEq)]
enum Facts {
    /// Not history (or no payload).
    Skip,
    /// A `response_item`.
    Item(Parsed),
    /// A `compacted` line's blocks.
    Compacted(Vec<(Block, u64)>),
}

/// Reads a Codex rollout. **O(len)**.
pub(crate) fn read(text: &str, counter: &dyn TokenCounter) -> Result<Vec<Message>, FormatError> {
    let mut messages = Vec::new();
    for (line_no, span) in lines(text) {
        let body = &text[span.clone()];
        let facts = match fast_line(body, counter) {
            Some(facts) => facts,
            None => line(body, counter).map_err(|message| FormatError::Invalid {
                line: line_no,
                message,
            })?,
        };
        let (role, blocks, starts_history) = match facts {
            Facts::Skip => continue,
            Facts::Item(parsed) => (parsed.role, parsed.blocks, false),
            Facts::Compacted(blocks) => (Role::Compacted, blocks, true),
        };
        messages.push(Message {
            role,
            line: line_no,
            spans: vec![span],
            blocks,
            bound: false,
            starts_history,
        });
    }
    Ok(messages)
}

/// The reference reading of one line: the line as a struct, then its payload.
/// **O(len)**, two passes over the payload.
fn line(body: &str, counter: &dyn TokenCounter) -> Result<Facts, String> {
    let record: Line<'_> = serde_json::from_str(body).map_err(|e| describe(&e))?;
    let Some(payload) = record.payload else {
        return Ok(Facts::Skip);
    };
    match record.kind {
        Some("response_item") => openai_responses::item(payload.get(), counter)
            .map(Facts::Item)
            .map_err(|m| format!("payload: {m}")),
        Some("compacted") => {
            let compacted: Compacted<'_> = serde_json::from_str(payload.get())
                .map_err(|e| format!("payload: {}", describe(&e)))?;
            let mut blocks = Vec::new();
            for (k, item) in compacted
                .replacement_history
                .unwrap_or_default()
                .into_iter()
                .enumerate()
            {
                let parsed = openai_responses::item(item.get(), counter)
                    .map_err(|m| format!("replacement_history.{k}: {m}"))?;
                blocks.extend(parsed.blocks);
            }
            if blocks.is_empty() {
                blocks.push((Block::Text, counter.count(payload.get())));
            }
            Ok(Facts::Compacted(blocks))
        }
        _ => Ok(Facts::Skip),
    }
}

/// The fast reading of one line, in one pass: a `response_item` payload is parsed
/// where it lies instead of being skipped and parsed again. `None` when the line is
/// anything but the usual `{"timestamp":…,"type":…,"payload":{…}}` (keys in any order,
/// `type` before `payload` for the one-pass case), a `compacted` line, or not valid:
/// [`line`] then reads it. When it returns `Some`, [`line`] returns the same.
/// **O(len)**.
fn fast_line(body: &str, counter: &dyn TokenCounter) -> Option<Facts> {
    let mut c = Cursor::new(body);
    let mut obj = c.object()?;
    let mut kind: Option<Option<&str>> = None;
    let mut item: Option<(Item<'_>, &str)> = None;
    let mut payload: Option<&str> = None;
    while let Some(key) = c.key(&mut obj)? {
        match key {
            "type" if kind.is_none() => kind = Some(c.value::<Option<&str>>()?.0),
            "payload" if payload.is_none() => {
                if c.peek()? != b'{' {
                    return None;
                }
                if kind == Some(Some("response_item")) {
                    let (parsed, raw) = c.value::<Item<'_>>()?;
                    item = Some((parsed, raw));
                    payload = Some(raw);
                } else {
                    payload = Some(c.skip()?);
                }
            }
            "type" | "payload" => return None,
            _ => {
                c.skip()?;
            }
        }
    }
    c.end()?;
    if payload.is_none() {
        return Some(Facts::Skip);
    }
    match kind.flatten() {
        Some("response_item") => {
            let (parsed, raw) = item?;
            openai_responses::parsed(&parsed, raw, counter)
                .ok()
                .map(Facts::Item)
        }
        Some("compacted") => None,
        _ => Some(Facts::Skip),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::ByteEstimate;
    use proptest::prelude::*;

    fn fixture_lines() -> Vec<String> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/transcripts");
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).expect("fixtures") {
            let path = entry.expect("fixture").path();
            if path.to_string_lossy().contains("codex__") {
                let text = std::fs::read_to_string(&path).expect("fixture text");
                out.extend(text.lines().map(str::to_owned));
            }
        }
        out
    }

    /// The invariant of the fast path: when it answers, the reference path answers
    /// the same.
    fn agrees(body: &str) {
        if let Some(fast) = fast_line(body, &ByteEstimate) {
            assert_eq!(Ok(fast), line(body, &ByteEstimate), "{body}");
        }
    }

    #[test]
    fn fast_path_reads_every_fixture_line_but_compactions_like_the_reference() {
        for body in fixture_lines() {
            agrees(&body);
            let compacted = body.contains(r#""type":"compacted""#);
            assert_eq!(
                fast_line(&body, &ByteEstimate).is_some(),
                !compacted,
                "{body}"
            );
        }
    }

    #[test]
    fn fast_path_agrees_on_unusual_lines() {
        for body in [
            r#"{"payload":{"type":"message","role":"user"},"type":"response_item"}"#,
            r#"{"type":"response_item","payload":{"type":"message","role":"user"}}"#,
            r#"{"type":"response_item","payload":{"type":"message","role":"us\u0065r"}}"#,
            r#"{"type":"response_item","payload":{"type":"message","role":"tool"}}"#,
            r#"{"type":"response_item","payload":{"type":"function_call"}}"#,
            r#"{"type":"response_item","payload":{"type":"function_call","call_id":"a","arguments":"{\"x\":1}"}}"#,
            r#"{"type":"response_item","payload":null}"#,
            r#"{"type":"response_item"}"#,
            r#"{"type":null,"payload":{}}"#,
            r#"{"type":"event_msg","payload":[1]}"#,
            r#"{"type":"response_item","type":"x","payload":{}}"#,
            r#"{"type":"response_item","payload":{},"payload":{}}"#,
            r#"{"type":"response_item","payload":{"type":"reasoning","type":"x"}}"#,
            r#"["response_item",{"type":"message","role":"user"}]"#,
            r#"{"type":"compacted","payload":{"replacement_history":[]}}"#,
            r#"{"type":"event_msg","payload":{"a":[1,{"b":"c\n"}]}} "#,
        ] {
            agrees(body);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Random edits of real lines (JSON punctuation and escapes inserted, bytes
        /// cut): wherever the fast path still answers, it agrees.
        #[test]
        fn fast_path_agrees_on_edited_lines(
            pick in any::<prop::sample::Index>(),
            at in any::<prop::sample::Index>(),
            cut in 0usize..8,
            insert in prop::sample::select(vec!["", "{", "}", "[", "]", ",", ":", "\"", "\\", " ", "null", "1", "\"type\":\"x\","]),
        ) {
            let lines = fixture_lines();
            let body = &lines[pick.index(lines.len())];
            let mut at = at.index(body.len() + 1);
            while !body.is_char_boundary(at) {
                at -= 1;
            }
            let mut end = (at + cut).min(body.len());
            while !body.is_char_boundary(end) {
                end += 1;
            }
            let edited = format!("{}{insert}{}", &body[..at], &body[end..]);
            agrees(&edited);
        }
    }
}
