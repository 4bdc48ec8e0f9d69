//! Codex rollout JSONL: lines `{"timestamp","type","payload"}`. Only
//! `type: "response_item"` lines are model history, one item per line, read as
//! OpenAI Responses items. A `type: "compacted"` line replaces all earlier history
//! with its `replacement_history`: it becomes one message that opens the new history.
//! `session_meta`, `turn_context`, `event_msg` and other lines are skipped.
//!
//! When the user interrupts a turn, Codex ends it with a user message of its own
//! whose text starts with `<turn_aborted>` ([`TURN_ABORTED`]); that message is marked
//! [`Message::aborts_turn`], so a reasoning item the interrupt left without its item
//! is not reported (see `docs/reasoning.md`, "Interrupted turns").

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::{describe, lines};
use super::{Block, FormatError, Message, Role, TokenCounter, fingerprint, openai_responses};

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", default)]
    kind: Option<&'a str>,
    #[serde(borrow, default)]
    payload: Option<&'a RawValue>,
}

/// How Codex's own interrupt note starts (a `response_item` user message).
pub(crate) const TURN_ABORTED: &str = "<turn_aborted>";

/// Whether the `response_item` payload `item` is Codex's interrupt note: a `user`
/// message whose first text part starts with [`TURN_ABORTED`]. **O(len)** of the
/// item, only for an item that holds the marker at all.
fn is_turn_aborted(item: &str) -> bool {
    #[derive(Deserialize)]
    struct Part<'a> {
        #[serde(borrow, default)]
        text: Option<std::borrow::Cow<'a, str>>,
    }
    #[derive(Deserialize)]
    struct Note<'a> {
        #[serde(default)]
        role: Option<&'a str>,
        #[serde(borrow, default)]
        content: Option<Vec<Part<'a>>>,
    }
    // Asked of every item: one searcher, built once (`str::contains` builds one
    // per call).
    static MARKER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(TURN_ABORTED));
    if MARKER.find(item.as_bytes()).is_none() {
        return false;
    }
    let Ok(note) = serde_json::from_str::<Note<'_>>(item) else {
        return false;
    };
    note.role == Some("user")
        && note
            .content
            .and_then(|parts| parts.into_iter().next())
            .and_then(|p| p.text)
            .is_some_and(|t| t.trim_start().starts_with(TURN_ABORTED))
}

#[derive(Deserialize)]
struct Compacted<'a> {
    #[serde(borrow, default)]
    replacement_history: Option<Vec<&'a RawValue>>,
}

/// Reads a Codex rollout. **O(len)**.
pub(crate) fn read(text: &str, counter: &dyn TokenCounter) -> Result<Vec<Message>, FormatError> {
    let mut messages = Vec::new();
    for (line, span) in lines(text) {
        let body = &text[span.clone()];
        let invalid = |message: String| FormatError::Invalid { line, message };
        let record: Line<'_> = serde_json::from_str(body).map_err(|e| invalid(describe(&e)))?;
        let Some(payload) = record.payload else {
            continue;
        };
        match record.kind {
            Some("response_item") => {
                // One item, one block: the message is built from it directly, and
                // marked signed when the item carries a server `id`, as a Responses
                // input's item is (the real rollouts carry none; before, a rollout's
                // were never marked, so an id whose reasoning went was kept).
                let (role, block, tokens, signed) =
                    openai_responses::item_block(payload.get(), counter)
                        .map_err(|m| invalid(format!("payload: {m}")))?;
                let print = fingerprint(payload.get());
                messages.push(Message {
                    signed: if signed { vec![0] } else { Vec::new() },
                    // Only a user message can be the note: the search is skipped for
                    // the calls, outputs and reasoning that make up most items.
                    aborts_turn: role == Role::User && is_turn_aborted(payload.get()),
                    ..Message::printed(role, line, span, [(block, tokens, print)])
                });
            }
            Some("compacted") => {
                let compacted: Compacted<'_> = serde_json::from_str(payload.get())
                    .map_err(|e| invalid(format!("payload: {}", describe(&e))))?;
                let mut blocks = Vec::new();
                // Items with a server `id` are signed, as on a `response_item` line.
                let mut signed = Vec::new();
                for (k, item) in compacted
                    .replacement_history
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                {
                    let (_, block, tokens, is_signed) =
                        openai_responses::item_block(item.get(), counter)
                            .map_err(|m| invalid(format!("replacement_history.{k}: {m}")))?;
                    if is_signed {
                        signed.push(blocks.len());
                    }
                    blocks.push((block, tokens, fingerprint(item.get())));
                }
                if blocks.is_empty() {
                    blocks.push((
                        Block::Text,
                        counter.count_json(payload.get()),
                        fingerprint(payload.get()),
                    ));
                }
                messages.push(Message {
                    starts_history: true,
                    signed,
                    ..Message::printed(Role::Compacted, line, span, blocks)
                });
            }
            _ => {}
        }
    }
    Ok(messages)
}

// Writing: what a rewrite of a Codex rollout must get right beyond the lines it
// copies (the context size Codex resumes with).

/// Appends to a rewritten rollout `out` the `token_count` event Codex writes after its
/// own compaction (`recompute_token_usage`): the last event's `total_token_usage` and
/// `model_context_window` carried, `last_token_usage` all zero but `total_tokens`,
/// which becomes `tokens`, the compacted history's size. Codex resumes its context
/// meter (and its auto-compaction threshold) from the last such event, so without it
/// a kept event would claim the context before the rewrite. Nothing when `out` holds
/// no `token_count` with `info` (the file reports no usage). **O(len)**: the lines
/// are searched from the end, one parse of each line naming a `token_count`.
pub(crate) fn recount(out: &mut String, tokens: u64) {
    use serde_json::{Value, json};
    let spans: Vec<std::ops::Range<usize>> = lines(out).map(|(_, span)| span).collect();
    let info = spans.iter().rev().find_map(|span| {
        let line = &out[span.clone()];
        if !line.contains("\"token_count\"") {
            return None;
        }
        let v: Value = serde_json::from_str(line).ok()?;
        (v["type"] == "event_msg" && v["payload"]["type"] == "token_count")
            .then(|| v["payload"]["info"].clone())
            .filter(Value::is_object)
    });
    let Some(info) = info else {
        return;
    };
    let timestamp = spans.iter().rev().find_map(|span| {
        let v: Value = serde_json::from_str(&out[span.clone()]).ok()?;
        v.get("timestamp").filter(|t| t.is_string()).cloned()
    });
    let mut recounted = json!({
        "total_token_usage": info["total_token_usage"],
        "last_token_usage": {
            "input_tokens": 0,
            "cached_input_tokens": 0,
            "output_tokens": 0,
            "reasoning_output_tokens": 0,
            "total_tokens": tokens,
        },
    });
    if let (Some(window), Value::Object(map)) = (info.get("model_context_window"), &mut recounted) {
        map.insert("model_context_window".to_owned(), window.clone());
    }
    let payload = json!({"type": "token_count", "info": recounted, "rate_limits": null});
    // In Codex's own order: timestamp, type, payload.
    let line = match timestamp {
        Some(t) => format!(r#"{{"timestamp":{t},"type":"event_msg","payload":{payload}}}"#),
        None => format!(r#"{{"type":"event_msg","payload":{payload}}}"#),
    };
    // The file's last newline stays as it was: present or not.
    if out.is_empty() || out.ends_with('\n') {
        out.push_str(&line);
        out.push('\n');
    } else {
        out.push('\n');
        out.push_str(&line);
    }
}

#[cfg(test)]
mod tests {
    use super::recount;

    #[test]
    fn recount_writes_codex_own_event_after_a_compaction() {
        let event = r#"{"timestamp":"T1","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":900,"total_tokens":950},"last_token_usage":{"input_tokens":400,"total_tokens":420},"model_context_window":1000},"rate_limits":null}}"#;
        let item = r#"{"timestamp":"T2","type":"response_item","payload":{"type":"message","role":"user","content":[]}}"#;
        let mut out = format!("{event}\n{item}\n");
        recount(&mut out, 77);
        let expected = concat!(
            r#"{"timestamp":"T2","type":"event_msg","payload":{"info":{"last_token_usage":{"cached_input_tokens":0,"input_tokens":0,"output_tokens":0,"reasoning_output_tokens":0,"total_tokens":77},"#,
            r#""model_context_window":1000,"total_token_usage":{"input_tokens":900,"total_tokens":950}},"rate_limits":null,"type":"token_count"}}"#,
        );
        // The payload's members come in the order serde_json's map keeps (sorted, or
        // as inserted where a crate of the build turns `preserve_order` on): the
        // lines are compared as JSON, the line's own order as text.
        let same = |got: &str, want: &str| {
            let (got, want): (Vec<&str>, Vec<&str>) =
                (got.lines().collect(), want.lines().collect());
            assert_eq!(got.len(), want.len(), "{got:?}");
            for (g, w) in got.iter().zip(&want) {
                let value = |t: &str| serde_json::from_str::<serde_json::Value>(t).unwrap();
                assert_eq!(value(g), value(w), "{g}");
            }
            assert!(
                got[got.len() - 1]
                    .starts_with(r#"{"timestamp":"T2","type":"event_msg","payload":"#)
            );
        };
        same(&out, &format!("{event}\n{item}\n{expected}\n"));
        assert!(out.ends_with('\n'));
        // Without a trailing newline, none is added at the end.
        let mut bare = format!("{event}\n{item}");
        recount(&mut bare, 77);
        same(&bare, &format!("{event}\n{item}\n{expected}"));
        assert!(!bare.ends_with('\n'));
        // A rollout that reports no usage (only `info: null`) gets nothing.
        let none = r#"{"timestamp":"T1","type":"event_msg","payload":{"type":"token_count","info":null,"rate_limits":null}}"#;
        let mut out = format!("{none}\n{item}\n");
        recount(&mut out, 77);
        assert_eq!(out, format!("{none}\n{item}\n"));
    }
}
