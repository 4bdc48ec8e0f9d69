//! Fault injection (issue 13): every fault kind below is injected into every real
//! transcript of `tests/fixtures/transcripts/` and every recorded stream of
//! `tests/fixtures/streams/` (as the request a client sends back after it) that can
//! carry it, and into the natively compacted variants of them (a `compaction` block
//! inserted at a legal cut). Each injected fault must be caught: the faulted log breaks
//! the fault's rule more often than the untouched one ([`format::check_rules`], or
//! [`format::check_against`] with the log before for the faults only a comparison can
//! see). The untouched logs break none of the rules this issue added, and checking a
//! log against itself adds nothing to checking it alone. The table of kinds is in
//! `docs/formats.md`.

use std::collections::BTreeMap;
use std::ops::Range;

use cutpoint::format::{
    self, Block, ByteEstimate, Format, Role, Rule, Transcript, check_against, check_rules,
};
use cutpoint::stream::decode::{Content, Detail, StreamFormat, decode_all};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// One log to inject faults into.
pub(crate) struct Case {
    pub(crate) name: String,
    pub(crate) format: Format,
    pub(crate) text: String,
}

impl Case {
    pub(crate) fn read(&self) -> Transcript {
        read(&self.text, self.format, &self.name)
    }
}

fn read(text: &str, format: Format, name: &str) -> Transcript {
    format::read(text, format, &ByteEstimate).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The rules this issue added: no untouched log breaks them.
pub(crate) const NEW_RULES: [Rule; 18] = [
    Rule::AnthropicCompactionMisplaced,
    Rule::AnthropicCompactionRepeated,
    Rule::AnthropicSummarizedAfterCompaction,
    Rule::AnthropicLatestThinkingModified,
    Rule::CompactionLost,
    Rule::ResponsesEditedBeforeCompaction,
    Rule::GeminiMissingThoughtSignature,
    Rule::ResponsesItemWithoutReasoning,
    // Issue 21.
    Rule::AnthropicSystemMessagePlacement,
    Rule::AnthropicProgrammaticResultNotAlone,
    Rule::ResponsesCompactionTriggerMisplaced,
    Rule::ThinkingPrefixChanged,
    Rule::ControlItemLost,
    Rule::ToolUnloaded,
    Rule::AnthropicTaskBudgetNotCarried,
    Rule::AnthropicProgrammaticContainerMissing,
    Rule::AnthropicProgrammaticContainerExpired,
    Rule::AnthropicProgrammaticAnswerLost,
];

// ---- the logs ----------------------------------------------------------------------

pub(crate) fn transcript_cases() -> Vec<Case> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcripts");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the fixtures folder") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name == "SOURCES.md" {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable");
        // The OpenHands file is no format cutpoint reads (detection refuses it).
        let Ok(format) = format::detect(&text) else {
            continue;
        };
        out.push(Case { name, format, text });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// What a recorded response holds, as closed records in order.
fn closed(bytes: &[u8], format: StreamFormat) -> Vec<Content> {
    let (items, _) = decode_all(format, bytes);
    items
        .into_iter()
        .filter_map(|d| match d.detail {
            Detail::Closed(c) => Some(c),
            _ => None,
        })
        .collect()
}

fn object_or_empty(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

/// The request a client sends after a recorded response: a user message, the
/// response as the assistant's message (thinking and signatures as received) and, when
/// it called client tools, one result per call. `None` for a response with no record.
fn stream_case(name: &str, format: StreamFormat, bytes: &[u8]) -> Option<Case> {
    let contents = closed(bytes, format);
    if contents.is_empty() {
        return None;
    }
    let calls: Vec<(String, String)> = contents
        .iter()
        .filter_map(|c| match c {
            Content::Call {
                id,
                name,
                server: false,
                ..
            } => Some((id.to_string(), name.clone())),
            _ => None,
        })
        .collect();
    let (format, doc) = match format {
        StreamFormat::AnthropicSse => {
            let mut content = Vec::new();
            for c in &contents {
                content.push(match c {
                    Content::Text { text } => json!({"type": "text", "text": text}),
                    Content::Thinking {
                        signature,
                        redacted: true,
                        ..
                    } => json!({"type": "redacted_thinking", "data": signature}),
                    Content::Thinking {
                        text, signature, ..
                    } => json!({"type": "thinking", "thinking": text, "signature": signature}),
                    Content::Call {
                        id,
                        name,
                        arguments,
                        server,
                        ..
                    } => json!({
                        "type": if *server { "server_tool_use" } else { "tool_use" },
                        "id": id.to_string(), "name": name, "input": object_or_empty(arguments),
                    }),
                    Content::ServerResult { id, kind, content } => json!({
                        "type": kind, "tool_use_id": id.to_string(),
                        "content": serde_json::from_str::<Value>(content).unwrap_or(Value::Null),
                    }),
                    _ => continue,
                });
            }
            let mut messages = vec![
                json!({"role": "user", "content": "Go on."}),
                json!({"role": "assistant", "content": content}),
            ];
            if !calls.is_empty() {
                let results: Vec<Value> = calls
                    .iter()
                    .map(|(id, _)| json!({"type": "tool_result", "tool_use_id": id, "content": "done"}))
                    .collect();
                messages.push(json!({"role": "user", "content": results}));
            }
            (Format::AnthropicMessages, json!({ "messages": messages }))
        }
        StreamFormat::OpenAiResponsesStream => {
            let mut input = vec![json!({"type": "message", "role": "user", "content": "Go on."})];
            for (n, c) in contents.iter().enumerate() {
                input.push(match c {
                    Content::Text { text } => json!({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text}]}),
                    Content::Thinking {
                        text, signature, ..
                    } => json!({"type": "reasoning", "id": format!("rs_{n}"),
                        "summary": [{"type": "summary_text", "text": text}],
                        "encrypted_content": signature}),
                    Content::Call {
                        id,
                        name,
                        arguments,
                        ..
                    } => json!({"type": "function_call", "call_id": id.to_string(),
                        "name": name, "arguments": arguments}),
                    Content::Other { kind, .. } => json!({"type": kind, "id": format!("x_{n}")}),
                    _ => continue,
                });
            }
            for (id, _) in &calls {
                input
                    .push(json!({"type": "function_call_output", "call_id": id, "output": "done"}));
            }
            (Format::OpenAiResponses, json!({ "input": input }))
        }
        StreamFormat::GeminiStream => {
            let mut parts = Vec::new();
            for c in &contents {
                let mut part = match c {
                    Content::Text { text } => json!({"text": text}),
                    Content::Thinking {
                        text, signature, ..
                    } => {
                        let mut p = json!({"text": text, "thought": true});
                        if let Some(s) = signature {
                            p["thoughtSignature"] = json!(s);
                        }
                        p
                    }
                    Content::Call {
                        id,
                        name,
                        arguments,
                        signature,
                        ..
                    } => {
                        let mut call = json!({"name": name, "args": object_or_empty(arguments)});
                        if !id.contains('#') {
                            call["id"] = json!(id.to_string());
                        }
                        let mut p = json!({ "functionCall": call });
                        if let Some(s) = signature {
                            p["thoughtSignature"] = json!(s);
                        }
                        p
                    }
                    _ => continue,
                };
                if part.as_object().is_some_and(|o| o.is_empty()) {
                    part = json!({"text": ""});
                }
                parts.push(part);
            }
            let mut contents = vec![
                json!({"role": "user", "parts": [{"text": "Go on."}]}),
                json!({"role": "model", "parts": parts}),
            ];
            if !calls.is_empty() {
                let answers: Vec<Value> = calls
                    .iter()
                    .map(|(id, name)| {
                        let mut r = json!({"name": name, "response": {"result": "done"}});
                        if !id.contains('#') {
                            r["id"] = json!(id);
                        }
                        json!({ "functionResponse": r })
                    })
                    .collect();
                contents.push(json!({"role": "user", "parts": answers}));
            }
            (Format::Gemini, json!({ "contents": contents }))
        }
        StreamFormat::OpenAiChatStream => {
            let text: String = contents
                .iter()
                .filter_map(|c| match c {
                    Content::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            let tool_calls: Vec<Value> = contents
                .iter()
                .filter_map(|c| match c {
                    Content::Call {
                        id,
                        name,
                        arguments,
                        ..
                    } => Some(json!({"id": id.to_string(), "type": "function",
                        "function": {"name": name, "arguments": arguments}})),
                    _ => None,
                })
                .collect();
            let mut assistant = json!({"role": "assistant", "content": text});
            if !tool_calls.is_empty() {
                assistant["tool_calls"] = json!(tool_calls);
            }
            let mut messages = vec![json!({"role": "user", "content": "Go on."}), assistant];
            for (id, _) in &calls {
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": "done"}));
            }
            (Format::OpenAiChat, json!({ "messages": messages }))
        }
        _ => return None,
    };
    // One element per line, as a request body is often written.
    let key = doc.as_object().unwrap().keys().next().unwrap().clone();
    let elements: Vec<String> = doc[&key]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.to_string())
        .collect();
    let text = format!("{{\"{key}\": [\n{}\n]}}\n", elements.join(",\n"));
    Some(Case {
        name: format!("stream:{name}"),
        format,
        text,
    })
}

fn stream_cases() -> Vec<Case> {
    crate::streams::recordings()
        .into_iter()
        .filter_map(|(name, format, bytes)| stream_case(&name, format, &bytes))
        .collect()
}

/// The natively compacted variant of an Anthropic or Claude Code log: an assistant
/// message holding one `compaction` block inserted before the last legal cut of the
/// live history that starts a user turn (the first message of a stream's request).
pub(crate) fn compacted_variant(case: &Case) -> Option<Case> {
    let t = case.read();
    let cuts = t.legal_message_cuts().ok()?;
    let c = cuts.into_iter().rev().find(|&c| {
        t.messages.get(c).is_some_and(|m| {
            m.role == Role::User && m.blocks.iter().any(|(b, _)| matches!(b, Block::Text))
        }) && (case.format == Format::AnthropicMessages || c > t.live_from())
    })?;
    let block = r#"{"type":"compaction","content":"Summary of the conversation so far."}"#;
    let text = match case.format {
        Format::ClaudeCode => {
            let at = start_of(&t, c);
            let sidechain = case.text[at..]
                .lines()
                .next()?
                .contains("\"isSidechain\":true");
            let line = format!(
                r#"{{"type":"assistant","uuid":"fault-compaction","parentUuid":null,"isSidechain":{sidechain},"message":{{"id":"msg_fault_compaction","type":"message","role":"assistant","content":[{block}]}}}}"#
            );
            insert_before(&case.text, &t, c, &line)
        }
        Format::AnthropicMessages => insert_before(
            &case.text,
            &t,
            c,
            &format!(r#"{{"role":"assistant","content":[{block}]}}"#),
        ),
        _ => return None,
    };
    Some(Case {
        name: format!("{}+compaction", case.name),
        format: case.format,
        text,
    })
}

// ---- text surgery ------------------------------------------------------------------

fn start_of(t: &Transcript, i: usize) -> usize {
    t.messages[i].spans.iter().map(|s| s.start).min().unwrap()
}

fn end_of(t: &Transcript, i: usize) -> usize {
    t.messages[i].spans.iter().map(|s| s.end).max().unwrap()
}

/// `text` without the byte ranges `cut` (sorted, disjoint).
fn without(text: &str, cut: &[Range<usize>]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in cut {
        out.push_str(&text[at..r.start]);
        at = r.end;
    }
    out.push_str(&text[at..]);
    out
}

/// A JSONL line's range with its line ending.
fn with_newline(text: &str, span: &Range<usize>) -> Range<usize> {
    let end = text[span.end..]
        .find('\n')
        .map_or(text.len(), |n| span.end + n + 1);
    span.start..end
}

/// `text` without message `i` (all its lines, or its array element and a comma).
fn remove_message(text: &str, t: &Transcript, i: usize) -> String {
    if t.format.is_json_document() {
        let span = t.messages[i].spans[0].clone();
        let range = if i + 1 < t.messages.len() {
            span.start..start_of(t, i + 1)
        } else if i > 0 {
            end_of(t, i - 1)..span.end
        } else {
            span
        };
        return without(text, &[range]);
    }
    let mut spans: Vec<Range<usize>> = t.messages[i]
        .spans
        .iter()
        .map(|s| with_newline(text, s))
        .collect();
    spans.sort_by_key(|s| s.start);
    without(text, &spans)
}

fn insert_at(text: &str, at: usize, piece: &str) -> String {
    format!("{}{piece}{}", &text[..at], &text[at..])
}

/// `text` with `element` (a JSON text) inserted as a message before message `i`.
fn insert_before(text: &str, t: &Transcript, i: usize, element: &str) -> String {
    let at = start_of(t, i);
    if t.format.is_json_document() {
        insert_at(text, at, &format!("{element},\n"))
    } else {
        insert_at(text, at, &format!("{element}\n"))
    }
}

/// `text` with `element` inserted as a message after message `i`.
fn insert_after(text: &str, t: &Transcript, i: usize, element: &str) -> String {
    let at = end_of(t, i);
    if t.format.is_json_document() {
        insert_at(text, at, &format!(",\n{element}"))
    } else {
        insert_at(text, at, &format!("\n{element}"))
    }
}

/// The JSON text of every line or element of message `i`, joined by newlines (a JSONL
/// message) or its element (a JSON document).
fn message_text(text: &str, t: &Transcript, i: usize) -> String {
    let mut spans = t.messages[i].spans.clone();
    spans.sort_by_key(|s| s.start);
    spans
        .iter()
        .map(|s| &text[s.clone()])
        .collect::<Vec<_>>()
        .join(if t.format.is_json_document() {
            ",\n"
        } else {
            "\n"
        })
}

/// The byte offset of `part` (a slice of `whole`) in `whole`.
fn offset(whole: &str, part: &str) -> usize {
    part.as_ptr() as usize - whole.as_ptr() as usize
}

/// `text` with `marker` (a JSON key and the opening quote of its string value) found
/// at or after `from` and before `to`, its string value prefixed with `x`.
fn edit_string_after(text: &str, from: usize, to: usize, marker: &str) -> Option<String> {
    let at = text[from..to].find(marker)? + from + marker.len();
    Some(insert_at(text, at, "x"))
}

/// The ranges of the elements of the array `array` (a slice of `text`), in `text`.
fn elements(text: &str, array: &str) -> Vec<Range<usize>> {
    let raws: Vec<&RawValue> = serde_json::from_str(array).expect("an array");
    raws.iter()
        .map(|r| {
            let at = offset(text, r.get());
            at..at + r.get().len()
        })
        .collect()
}

/// The array under `key` of the object `object` (a slice of `text`), if any.
fn array_of<'a>(object: &'a str, key: &str) -> Option<&'a str> {
    let map: BTreeMap<&str, &RawValue> = serde_json::from_str(object).ok()?;
    let raw = map.get(key)?.get();
    raw.starts_with('[').then_some(raw)
}

/// `text` without element `k` of the array at `ranges` (its elements' ranges).
fn drop_element(text: &str, ranges: &[Range<usize>], k: usize) -> String {
    let range = if k + 1 < ranges.len() {
        ranges[k].start..ranges[k + 1].start
    } else if k > 0 {
        ranges[k - 1].end..ranges[k].end
    } else {
        ranges[k].clone()
    };
    without(text, &[range])
}

// ---- the fault kinds ---------------------------------------------------------------

/// A faulted log: the log before (the untouched one, or the prefix a fault needs) and
/// the log after.
struct Faulted {
    before: String,
    after: String,
}

impl Faulted {
    fn of(case: &Case, after: String) -> Option<Faulted> {
        Some(Faulted {
            before: case.text.clone(),
            after,
        })
    }
}

struct Kind {
    name: &'static str,
    /// Whether only a comparison with the log before can see it.
    against: bool,
    /// The rules that catch it.
    rules: &'static [Rule],
    inject: fn(&Case, &Transcript) -> Option<Faulted>,
}

/// The live messages of `t` holding results whose calls come in an earlier live message.
fn answered(t: &Transcript) -> Vec<(usize, usize)> {
    let live = t.live_from();
    let mut out = Vec::new();
    for r in live..t.messages.len() {
        for (_, id) in t.messages[r].results() {
            if let Some(c) = (live..r)
                .rev()
                .find(|&c| t.messages[c].calls().any(|(_, i, _)| i == id))
            {
                out.push((c, r));
            }
        }
    }
    out
}

fn drop_result(case: &Case, t: &Transcript) -> Option<Faulted> {
    let (_, r) = *answered(t).last()?;
    Faulted::of(case, remove_message(&case.text, t, r))
}

fn drop_call(case: &Case, t: &Transcript) -> Option<Faulted> {
    let (c, _) = *answered(t).last()?;
    Faulted::of(case, remove_message(&case.text, t, c))
}

fn duplicate_result(case: &Case, t: &Transcript) -> Option<Faulted> {
    if !matches!(case.format, Format::AnthropicMessages | Format::Gemini) {
        return None;
    }
    let (_, r) = *answered(t).last()?;
    let copy = message_text(&case.text, t, r);
    Faulted::of(case, insert_after(&case.text, t, r, &copy))
}

fn system_in_messages(case: &Case, t: &Transcript) -> Option<Faulted> {
    if case.format != Format::AnthropicMessages || t.messages.is_empty() {
        return None;
    }
    // A mid-conversation system message cannot open `messages`.
    Faulted::of(
        case,
        insert_before(
            &case.text,
            t,
            0,
            r#"{"role":"system","content":"Be brief."}"#,
        ),
    )
}

fn is_responses(f: Format) -> bool {
    matches!(f, Format::OpenAiResponses | Format::CodexRollout)
}

fn ends_in_reasoning(t: &Transcript, i: usize) -> bool {
    matches!(t.messages[i].blocks.last(), Some((Block::Reasoning, _)))
}

/// Whether message `i` is one a reasoning item may precede.
fn follower(t: &Transcript, i: usize) -> bool {
    t.messages.get(i).is_some_and(|m| m.follows_reasoning())
}

fn reasoning_follower_dropped(case: &Case, t: &Transcript) -> Option<Faulted> {
    if !is_responses(case.format) {
        return None;
    }
    let i = (t.live_from()..t.messages.len().saturating_sub(1))
        .rev()
        .find(|&i| ends_in_reasoning(t, i) && follower(t, i + 1) && !follower(t, i + 2))?;
    Faulted::of(case, remove_message(&case.text, t, i + 1))
}

fn reasoning_dropped(case: &Case, t: &Transcript) -> Option<Faulted> {
    if !is_responses(case.format) {
        return None;
    }
    // In the current turn: reasoning of earlier turns may be dropped.
    let turn = t
        .messages
        .iter()
        .rposition(|m| m.role == Role::User)
        .map_or(0, |u| u + 1)
        .max(t.live_from());
    let i = (turn..t.messages.len().saturating_sub(1))
        .rev()
        .find(|&i| {
            ends_in_reasoning(t, i) && t.messages[i].blocks.len() == 1 && follower(t, i + 1)
        })?;
    Faulted::of(case, remove_message(&case.text, t, i))
}

/// The latest assistant message with thinking and other blocks, answered by the
/// message after it, and the log up to that answer (the request that sends it back).
pub(crate) fn latest_thinking(case: &Case, t: &Transcript) -> Option<(usize, String)> {
    if !matches!(case.format, Format::AnthropicMessages | Format::ClaudeCode) {
        return None;
    }
    let l = (t.live_from()..t.messages.len().saturating_sub(1))
        .rev()
        .find(|&l| {
            let m = &t.messages[l];
            m.role == Role::Assistant
                && m.blocks.iter().any(|(b, _)| matches!(b, Block::Reasoning))
                && m.blocks.iter().any(|(b, _)| !matches!(b, Block::Reasoning))
                && !m.prints.contains(&0)
                && t.messages[l + 1].results().next().is_some()
        })?;
    if t.format.is_json_document() {
        return (l + 2 == t.messages.len()).then(|| (l, case.text.clone()));
    }
    let cut = (0..=l + 1).map(|i| end_of(t, i)).max()?;
    if (l + 2..t.messages.len()).any(|i| start_of(t, i) < cut) {
        return None;
    }
    let cut = with_newline(&case.text, &(cut..cut)).end;
    Some((l, case.text[..cut].to_owned()))
}

fn latest_thinking_dropped(case: &Case, t: &Transcript) -> Option<Faulted> {
    let (l, before) = latest_thinking(case, t)?;
    let bt = read(&before, case.format, &case.name);
    let m = &bt.messages[l];
    let after = if bt.format.is_json_document() {
        let span = m.spans[0].clone();
        let content = array_of(&before[span], "content")?;
        let ranges = elements(&before, content);
        let mut after = before.clone();
        for k in (0..m.blocks.len()).rev() {
            if matches!(m.blocks[k].0, Block::Reasoning) {
                after = drop_element(&after, &ranges, k);
            }
        }
        after
    } else {
        // One block per Claude Code record: the thinking records' lines go.
        let thinking: Vec<usize> = (0..m.blocks.len())
            .filter(|&k| matches!(m.blocks[k].0, Block::Reasoning))
            .map(|k| m.block_line(k))
            .collect();
        let others: Vec<usize> = (0..m.blocks.len())
            .filter(|&k| !matches!(m.blocks[k].0, Block::Reasoning))
            .map(|k| m.block_line(k))
            .collect();
        if thinking.iter().any(|l| others.contains(l)) {
            return None;
        }
        let mut spans: Vec<Range<usize>> = m
            .spans
            .iter()
            .filter(|s| thinking.contains(&(before[..s.start].matches('\n').count() + 1)))
            .map(|s| with_newline(&before, s))
            .collect();
        spans.sort_by_key(|s| s.start);
        without(&before, &spans)
    };
    Some(Faulted { before, after })
}

fn latest_thinking_edited(case: &Case, t: &Transcript) -> Option<Faulted> {
    let (l, before) = latest_thinking(case, t)?;
    let bt = read(&before, case.format, &case.name);
    let (from, to) = (start_of(&bt, l), end_of(&bt, l));
    let after = edit_string_after(&before, from, to, r#""thinking":""#)
        .or_else(|| edit_string_after(&before, from, to, r#""data":""#))?;
    Some(Faulted { before, after })
}

fn signature_removed(case: &Case, t: &Transcript) -> Option<Faulted> {
    if case.format != Format::Gemini {
        return None;
    }
    let i = (0..t.messages.len()).rev().find(|&i| {
        let m = &t.messages[i];
        m.calls()
            .next()
            .is_some_and(|(k, _, _)| m.signed.contains(&k))
    })?;
    let k = t.messages[i].calls().next()?.0;
    let span = t.messages[i].spans[0].clone();
    let parts = array_of(&case.text[span], "parts")?;
    let part = elements(&case.text, parts)[k].clone();
    let key = r#""thoughtSignature":""#;
    let at = case.text[part.clone()].find(key)? + part.start;
    let value_end = case.text[at + key.len()..].find('"')? + at + key.len() + 1;
    // The key and its value, with the comma that joins it to its neighbour.
    let range = if case.text[..at].trim_end().ends_with(',') {
        case.text[..at].trim_end().len() - 1..value_end
    } else {
        let comma = case.text[value_end..].find(',')? + value_end + 1;
        at..comma
    };
    Faulted::of(case, without(&case.text, &[range]))
}

/// The message and block of the latest compaction of `t`.
fn compaction(t: &Transcript) -> Option<(usize, usize)> {
    (0..t.messages.len()).rev().find_map(|i| {
        (0..t.messages[i].blocks.len())
            .rev()
            .find(|&k| t.messages[i].is_compaction(k))
            .map(|k| (i, k))
    })
}

/// The ranges of message `i`'s blocks when they are one JSON array (an Anthropic
/// `content`, a Codex `replacement_history`), else `None`.
fn block_ranges(text: &str, t: &Transcript, i: usize) -> Option<Vec<Range<usize>>> {
    let m = &t.messages[i];
    if m.spans.len() != 1 {
        return None;
    }
    let whole = &text[m.spans[0].clone()];
    let array = match t.format {
        Format::CodexRollout => {
            let line: BTreeMap<&str, &RawValue> = serde_json::from_str(whole).ok()?;
            array_of(line.get("payload")?.get(), "replacement_history")?
        }
        Format::ClaudeCode => {
            let line: BTreeMap<&str, &RawValue> = serde_json::from_str(whole).ok()?;
            array_of(line.get("message")?.get(), "content")?
        }
        _ => array_of(whole, "content")?,
    };
    let ranges = elements(text, array);
    (ranges.len() == m.blocks.len()).then_some(ranges)
}

fn compaction_lost(case: &Case, t: &Transcript) -> Option<Faulted> {
    let (i, k) = compaction(t)?;
    let after = match t.messages[i].blocks.len() {
        1 => remove_message(&case.text, t, i),
        _ => drop_element(&case.text, &block_ranges(&case.text, t, i)?, k),
    };
    Faulted::of(case, after)
}

fn compaction_edited(case: &Case, t: &Transcript) -> Option<Faulted> {
    let (i, k) = compaction(t)?;
    let r = match t.messages[i].blocks.len() {
        1 => start_of(t, i)..end_of(t, i),
        _ => block_ranges(&case.text, t, i)?[k].clone(),
    };
    let after = edit_string_after(&case.text, r.start, r.end, r#""encrypted_content":""#)
        .or_else(|| edit_string_after(&case.text, r.start, r.end, r#""content":""#))?;
    Faulted::of(case, after)
}

fn edited_before_compaction(case: &Case, t: &Transcript) -> Option<Faulted> {
    if !is_responses(case.format) {
        return None;
    }
    let (c, _) = compaction(t)?;
    let after = (0..c).rev().find_map(|i| {
        let (from, to) = (start_of(t, i), end_of(t, i));
        edit_string_after(&case.text, from, to, r#""text":""#)
            .or_else(|| edit_string_after(&case.text, from, to, r#""arguments":""#))
    })?;
    Faulted::of(case, after)
}

fn is_anthropic(f: Format) -> bool {
    matches!(f, Format::AnthropicMessages | Format::ClaudeCode)
}

fn compaction_misplaced(case: &Case, t: &Transcript) -> Option<Faulted> {
    if !is_anthropic(case.format) {
        return None;
    }
    let (i, k) = compaction(t)?;
    let at = block_ranges(&case.text, t, i)?[k].start;
    Faulted::of(
        case,
        insert_at(&case.text, at, r#"{"type":"text","text":"Earlier:"},"#),
    )
}

fn compaction_repeated(case: &Case, t: &Transcript) -> Option<Faulted> {
    if !is_anthropic(case.format) {
        return None;
    }
    let (i, _) = compaction(t)?;
    let copy = message_text(&case.text, t, i)
        .replace("fault-compaction", "fault-compaction-2")
        .replace("msg_fault_compaction", "msg_fault_compaction_2");
    Faulted::of(case, insert_after(&case.text, t, i, &copy))
}

fn summarized_after_compaction(case: &Case, t: &Transcript) -> Option<Faulted> {
    if !is_anthropic(case.format) {
        return None;
    }
    let (c, _) = compaction(t)?;
    let i = (0..c)
        .rev()
        .find(|&i| t.messages[i].calls().next().is_some())?;
    let copy = message_text(&case.text, t, i);
    Faulted::of(case, insert_after(&case.text, t, c, &copy))
}

const UNANSWERED: &[Rule] = &[
    Rule::AnthropicToolUseWithoutResult,
    Rule::ResponsesNoOutput,
    Rule::ChatCallWithoutResponse,
    Rule::GeminiResponseNotAfterCall,
    Rule::GeminiPartCountMismatch,
];
const UNCALLED: &[Rule] = &[
    Rule::AnthropicUnexpectedToolResult,
    Rule::ResponsesNoCall,
    Rule::ChatToolWithoutCalls,
    Rule::ChatToolCallIdNotFound,
    Rule::GeminiResponseNotAfterCall,
    Rule::GeminiPartCountMismatch,
];

const KINDS: [Kind; 15] = [
    Kind {
        name: "result dropped",
        against: false,
        rules: UNANSWERED,
        inject: drop_result,
    },
    Kind {
        name: "call dropped",
        against: false,
        rules: UNCALLED,
        inject: drop_call,
    },
    Kind {
        name: "result duplicated",
        against: false,
        rules: UNCALLED,
        inject: duplicate_result,
    },
    Kind {
        name: "system message inserted first",
        against: false,
        rules: &[Rule::AnthropicSystemMessagePlacement],
        inject: system_in_messages,
    },
    Kind {
        name: "reasoning item's follower dropped",
        against: false,
        rules: &[Rule::ResponsesReasoningWithoutFollower],
        inject: reasoning_follower_dropped,
    },
    Kind {
        name: "reasoning item dropped before its item",
        against: true,
        rules: &[Rule::ResponsesItemWithoutReasoning],
        inject: reasoning_dropped,
    },
    Kind {
        name: "latest assistant thinking dropped",
        against: true,
        rules: &[Rule::AnthropicLatestThinkingModified],
        inject: latest_thinking_dropped,
    },
    Kind {
        name: "latest assistant thinking edited",
        against: true,
        rules: &[Rule::AnthropicLatestThinkingModified],
        inject: latest_thinking_edited,
    },
    Kind {
        name: "current-turn thought signature removed",
        against: true,
        rules: &[Rule::GeminiMissingThoughtSignature],
        inject: signature_removed,
    },
    Kind {
        name: "compaction dropped",
        against: true,
        rules: &[Rule::CompactionLost],
        inject: compaction_lost,
    },
    Kind {
        name: "compaction edited",
        against: true,
        rules: &[Rule::CompactionLost],
        inject: compaction_edited,
    },
    Kind {
        name: "item before the latest compaction edited",
        against: true,
        rules: &[Rule::ResponsesEditedBeforeCompaction],
        inject: edited_before_compaction,
    },
    Kind {
        name: "compaction block not first",
        against: false,
        rules: &[Rule::AnthropicCompactionMisplaced],
        inject: compaction_misplaced,
    },
    Kind {
        name: "second compaction block",
        against: false,
        rules: &[Rule::AnthropicCompactionRepeated],
        inject: compaction_repeated,
    },
    Kind {
        name: "summarized message left after the compaction",
        against: false,
        rules: &[Rule::AnthropicSummarizedAfterCompaction],
        inject: summarized_after_compaction,
    },
];

fn count(violations: &[format::RuleViolation], rules: &[Rule]) -> usize {
    violations
        .iter()
        .filter(|v| rules.contains(&v.rule))
        .count()
}

fn all_cases() -> Vec<Case> {
    let mut cases = transcript_cases();
    cases.extend(stream_cases());
    let variants: Vec<Case> = cases.iter().filter_map(compacted_variant).collect();
    cases.extend(variants);
    cases
}

#[test]
fn untouched_logs_break_none_of_the_new_rules() {
    let cases = all_cases();
    assert!(cases.len() > 40, "{} logs", cases.len());
    let streams = cases
        .iter()
        .filter(|c| c.name.starts_with("stream:") && !c.name.ends_with("+compaction"))
        .count();
    let compacted = cases
        .iter()
        .filter(|c| c.name.ends_with("+compaction"))
        .count();
    println!(
        "{} logs: {} transcripts, {streams} streams, {compacted} compacted variants",
        cases.len(),
        cases.len() - streams - compacted
    );
    for case in &cases {
        let t = case.read();
        let alone = check_rules(&t);
        assert_eq!(count(&alone, &NEW_RULES), 0, "{}: {alone:#?}", case.name);
        assert_eq!(check_against(&t, &t), alone, "{}", case.name);
    }
}

#[test]
fn every_injected_fault_is_caught() {
    let cases = all_cases();
    let mut injected: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut missed = Vec::new();
    for case in &cases {
        let t = case.read();
        for kind in &KINDS {
            let Some(faulted) = (kind.inject)(case, &t) else {
                continue;
            };
            assert_ne!(
                faulted.after, faulted.before,
                "{}: {}",
                case.name, kind.name
            );
            let before = read(&faulted.before, case.format, &case.name);
            let after = read(&faulted.after, case.format, &case.name);
            let (was, now) = if kind.against {
                (
                    check_against(&before, &before),
                    check_against(&before, &after),
                )
            } else {
                (check_rules(&before), check_rules(&after))
            };
            let entry = injected.entry(kind.name).or_default();
            entry.0 += 1;
            if count(&now, kind.rules) > count(&was, kind.rules) {
                entry.1 += 1;
            } else {
                missed.push(format!("{}: {}", kind.name, case.name));
            }
        }
    }
    assert!(
        missed.is_empty(),
        "faults not caught:\n{}",
        missed.join("\n")
    );
    for kind in &KINDS {
        let (n, caught) = injected.get(kind.name).copied().unwrap_or_default();
        assert!(n > 0, "no log carries the fault {:?}", kind.name);
        assert_eq!(n, caught, "{}", kind.name);
    }
    assert!(KINDS.len() >= 12);
    // The table in docs/formats.md, for the record.
    for (name, (n, caught)) in &injected {
        println!("| {name} | {n} | {caught} |");
    }
}
