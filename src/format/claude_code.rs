//! Claude Code session JSONL: one record per line. `user` and `assistant` records
//! carry a raw Anthropic `message`, but one content block per assistant record
//! (parallel `tool_use` blocks are separate records sharing `message.id`) and, per
//! user record, the `tool_result` of one tool (with `sourceToolAssistantUUID`, the
//! assistant record that called it), written as soon as that tool finishes. The calls
//! and results of one API message therefore interleave in the file (use, use, result,
//! use, result, result, ...).
//!
//! The reader rebuilds the API messages as the request was built: assistant records
//! sharing `message.id` are one assistant message, wherever the results of its earlier
//! calls fell; the results answering that message (found by
//! `sourceToolAssistantUUID`, or by their `tool_use_id`) go into the one user message
//! after it, results first and text typed while the tools ran after them, as Claude
//! Code sends them. Other consecutive records of one role are merged (the API merges
//! consecutive same-role messages too). Every block keeps the line of its record.
//!
//! Claude Code sometimes writes a `tool_result` record before the record holding its
//! `tool_use`. Such an early result is remembered; when its call comes, the result
//! (with its record's line) moves into the user message after the call's assistant
//! message, whatever records sat between, so the pair reads the same with or without
//! them (a rewrite that drops a thinking line between them reads back paired).
//!
//! A `system` record with subtype `compact_boundary` and no `parentUuid` restarts the
//! history (Claude Code's own compaction); the `isCompactSummary` user record after it
//! opens the new history and is read as an earlier summary ([`Block::Summary`]). A
//! boundary that names a `parentUuid` keeps the chain (cutpoint writes one when a
//! pinned head stays before it), so the history goes on through it. `progress`,
//! `file-history-snapshot`, `queue-operation` and other records are not messages and
//! are skipped.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::anthropic::ReadContent;
use super::json_doc::{
    Inline, InlineContent, JsonStr, array_around, describe, lines, opt_str, text_of,
};
use super::shape::context;
use super::{
    Block, Format, FormatError, Message, Role, TokenCounter, fingerprint, summary_in_text,
};
use crate::CallId;

/// A line of the file. `M` is how its `message` is read: [`Inline`] on the one pass
/// of the common case, `&RawValue` on the slow path (see [`read`]).
#[derive(Deserialize)]
struct Line<'a, M> {
    #[serde(rename = "type", default)]
    kind: Option<&'a str>,
    #[serde(default)]
    subtype: Option<&'a str>,
    #[serde(default = "none")]
    message: Option<M>,
    #[serde(rename = "isSidechain", default)]
    sidechain: bool,
    #[serde(borrow, default)]
    uuid: Option<JsonStr<'a>>,
    #[serde(rename = "parentUuid", borrow, default)]
    parent: Option<JsonStr<'a>>,
    #[serde(rename = "sourceToolAssistantUUID", borrow, default)]
    source: Option<JsonStr<'a>>,
    #[serde(rename = "isCompactSummary", default)]
    compact_summary: bool,
}

fn none<M>() -> Option<M> {
    None
}

impl<'a, M> Line<'a, M> {
    /// The line without its message, and the message. **O(1)**.
    fn take_message(self) -> (Line<'a, ()>, Option<M>) {
        let Line {
            kind,
            subtype,
            message,
            sidechain,
            uuid,
            parent,
            source,
            compact_summary,
        } = self;
        let rest = Line {
            kind,
            subtype,
            message: None,
            sidechain,
            uuid,
            parent,
            source,
            compact_summary,
        };
        (rest, message)
    }
}

/// The `message` of a line as [`read`] has it: read with the line (its `content`
/// split into blocks, or a plain string, in the same pass), or as its own text.
enum LineMessage<'a> {
    Read(Msg<'a, ()>, ReadContent<'a>),
    Raw(&'a RawValue),
}

/// Reads a line: in one pass when its message is an object whose `content`, if any,
/// is an array or a string without escapes (the line, the message and the content's
/// blocks read together), else (a string with escapes, another kind of message, or an
/// error) in two, the message kept as text for [`read`] to read or to name what is
/// wrong with it. **O(len)**.
fn parse_line(body: &str) -> Result<(Line<'_, ()>, Option<LineMessage<'_>>), String> {
    if let Ok(line) = serde_json::from_str::<Line<'_, Inline<Msg<'_, InlineContent<'_>>>>>(body) {
        match line.take_message() {
            (rest, None) => return Ok((rest, None)),
            (rest, Some(Inline::Read(Msg { role, id, content }))) => {
                if let Some(content) = ReadContent::inline(body, content) {
                    let msg = Msg {
                        role,
                        id,
                        content: None,
                    };
                    return Ok((rest, Some(LineMessage::Read(msg, content))));
                }
            }
            (_, Some(Inline::Other)) => {}
        }
    }
    let line: Line<'_, &RawValue> = serde_json::from_str(body).map_err(|e| describe(&e))?;
    let (rest, message) = line.take_message();
    Ok((rest, message.map(LineMessage::Raw)))
}

/// The text of a line's `message`, for the rare record that needs it (a summary's
/// count, a message without blocks): the line read again. **O(len)**.
fn message_text(body: &str) -> Result<&str, String> {
    let line: Line<'_, &RawValue> = serde_json::from_str(body).map_err(|e| describe(&e))?;
    line.message
        .map(RawValue::get)
        .ok_or_else(|| "the line has no message".to_owned())
}

/// Reads a line's `message` from its text (the slow path). **O(len)**.
fn read_msg(raw: &str) -> Result<Msg<'_>, String> {
    serde_json::from_str(raw).map_err(|e| format!("message: {}", describe(&e)))
}

/// A line's `message`; `C` is how its `content` is read: [`InlineContent`] on the one
/// pass of the common case, `&RawValue` on the slow path.
#[derive(Deserialize)]
struct Msg<'a, C = &'a RawValue> {
    #[serde(default)]
    role: Option<&'a str>,
    #[serde(borrow, default)]
    id: Option<JsonStr<'a>>,
    #[serde(default = "none")]
    content: Option<C>,
}

/// The assistant message being answered: the last one rebuilt.
struct Open {
    /// Its index.
    at: usize,
    /// Its `message.id`, if the records carry one.
    id: Option<String>,
    /// The `uuid`s of its records.
    uuids: HashSet<String>,
    /// Its calls' ids.
    calls: HashSet<CallId>,
    /// How many result blocks lead the user message right after it (where the next
    /// result goes); `None` until that message exists.
    leading_results: Option<usize>,
}

/// A result read before any call with its id: where it went, to move it when its
/// call comes.
struct Early {
    /// The message it was put in.
    at: usize,
    /// Its record's line and span.
    line: usize,
    span: Range<usize>,
}

/// One conversation of the file (the main one, or a subagent's sidechain).
#[derive(Default)]
struct Conversation {
    messages: Vec<Message>,
    open: Option<Open>,
    /// A compaction boundary was read and no message came after it yet.
    boundary: bool,
    /// Every call id read so far (since the last boundary).
    called: HashSet<CallId>,
    /// Results read before their call, by call id (since the last boundary).
    early: HashMap<CallId, Early>,
}

/// A record's blocks, each with its tokens and the fingerprint of its JSON text.
type Blocks = Vec<(Block, u64, u64)>;

impl Conversation {
    /// A new message for the record at `line`.
    fn push(&mut self, role: Role, line: usize, span: Range<usize>, blocks: Blocks) {
        self.messages.push(Message {
            starts_history: std::mem::take(&mut self.boundary),
            ..Message::printed(role, line, span, blocks)
        });
    }

    /// Whether the next record may merge into the last message: not across a
    /// compaction boundary.
    fn last_of(&mut self, role: Role) -> Option<&mut Message> {
        if self.boundary {
            return None;
        }
        self.messages.last_mut().filter(|m| m.role == role)
    }

    fn assistant(&mut self, line: usize, span: Range<usize>, blocks: Blocks, rec: &Record) {
        let same = self.open.as_ref().is_some_and(|o| {
            !self.boundary
                && match (&o.id, &rec.message_id) {
                    (Some(a), Some(b)) => a == b,
                    // Records without an id merge while nothing came after them.
                    (None, None) => o.at + 1 == self.messages.len(),
                    _ => false,
                }
        });
        let calls: HashSet<CallId> = blocks
            .iter()
            .filter_map(|(b, _, _)| match b {
                Block::Call { id, .. } => Some(id.clone()),
                _ => None,
            })
            .collect();
        self.called.extend(calls.iter().cloned());
        let early: Vec<Early> = calls
            .iter()
            .filter_map(|id| self.early.remove(id))
            .collect();
        if let (true, Some(open)) = (same, self.open.as_mut()) {
            let m = &mut self.messages[open.at];
            m.spans.push(span);
            for (block, tokens, print) in blocks {
                m.push_block(block, tokens, line, print);
            }
            open.uuids.extend(rec.uuid.clone());
            open.calls.extend(calls);
        } else {
            self.push(Role::Assistant, line, span, blocks);
            self.open = Some(Open {
                at: self.messages.len() - 1,
                id: rec.message_id.clone(),
                uuids: rec.uuid.iter().cloned().collect(),
                calls,
                leading_results: None,
            });
        }
        for e in early {
            self.answer_early(e);
        }
    }

    /// Moves the early result `e` (its call is in the open assistant message) into
    /// the user message right after that message, after the results already leading
    /// it. A result already after its call stays. **O(blocks of the two messages)**
    /// (plus a shift of the messages after `e.at` when its message empties).
    fn answer_early(&mut self, e: Early) {
        let Some(open_at) = self.open.as_ref().map(|o| o.at) else {
            return;
        };
        if e.at > open_at {
            return;
        }
        // Take the record's result blocks out of the message it went into.
        let from = &mut self.messages[e.at];
        let mut moved = Vec::new();
        let mut k = 0;
        while k < from.blocks.len() {
            if from.block_lines[k] == e.line && matches!(from.blocks[k].0, Block::Result { .. }) {
                let (block, tokens) = from.blocks.remove(k);
                from.block_lines.remove(k);
                let print = from.prints.remove(k);
                from.signed.retain(|&s| s != k);
                for s in &mut from.signed {
                    if *s > k {
                        *s -= 1;
                    }
                }
                moved.push((block, tokens, print));
            } else {
                k += 1;
            }
        }
        if moved.is_empty() {
            return;
        }
        if !from.block_lines.contains(&e.line) {
            from.spans.retain(|s| *s != e.span);
        }
        let mut open_at = open_at;
        if from.blocks.is_empty() {
            self.messages.remove(e.at);
            open_at -= 1;
            if let Some(o) = self.open.as_mut() {
                o.at = open_at;
            }
            for other in self.early.values_mut() {
                if other.at > e.at {
                    other.at -= 1;
                }
            }
        }
        let after = open_at + 1;
        let open = self.open.as_mut().expect("the open message was read above");
        match self
            .messages
            .get_mut(after)
            .filter(|m| m.role == Role::User)
        {
            Some(m) => {
                let leading = open.leading_results.get_or_insert(0);
                if !m.spans.contains(&e.span) {
                    m.spans.push(e.span.clone());
                }
                for (block, tokens, print) in moved {
                    m.blocks.insert(*leading, (block, tokens));
                    m.block_lines.insert(*leading, e.line);
                    m.prints.insert(*leading, print);
                    for s in &mut m.signed {
                        if *s >= *leading {
                            *s += 1;
                        }
                    }
                    *leading += 1;
                }
            }
            None => {
                let n = moved.len();
                self.messages
                    .insert(after, Message::printed(Role::User, e.line, e.span, moved));
                open.leading_results = Some(n);
                for other in self.early.values_mut() {
                    if other.at >= after {
                        other.at += 1;
                    }
                }
            }
        }
    }

    fn user(&mut self, line: usize, span: Range<usize>, blocks: Blocks, rec: &Record) {
        let early: Vec<CallId> = blocks
            .iter()
            .filter_map(|(b, _, _)| match b {
                Block::Result { id, .. } if !self.called.contains(id) => Some(id.clone()),
                _ => None,
            })
            .collect();
        self.place_user(line, span.clone(), blocks, rec);
        let at = self.messages.len() - 1;
        for id in early {
            self.early.entry(id).or_insert(Early {
                at,
                line,
                span: span.clone(),
            });
        }
    }

    fn place_user(&mut self, line: usize, span: Range<usize>, blocks: Blocks, rec: &Record) {
        // Does this record answer the open assistant message?
        let answers = self.open.as_ref().is_some_and(|o| {
            rec.source.as_ref().is_some_and(|s| o.uuids.contains(s))
                || blocks.iter().any(|(b, _, _)| match b {
                    Block::Result { id, .. } => o.calls.contains(id),
                    _ => false,
                })
        });
        let answer_at = self.open.as_ref().map(|o| o.at + 1);
        // An earlier summary always opens a message of its own.
        let merge = !rec.compact_summary && self.last_of(Role::User).is_some();
        if !merge {
            let leading = blocks
                .iter()
                .take_while(|(b, _, _)| matches!(b, Block::Result { .. }))
                .count();
            self.push(Role::User, line, span, blocks);
            if let Some(o) = self
                .open
                .as_mut()
                .filter(|o| o.at + 2 == self.messages.len())
            {
                o.leading_results = Some(leading);
            }
            return;
        }
        let at = self.messages.len() - 1;
        let m = &mut self.messages[at];
        m.spans.push(span);
        let leading = match self.open.as_mut() {
            Some(o) if answers && answer_at == Some(at) => o.leading_results.as_mut(),
            _ => None,
        };
        match leading {
            // Results first, as the request had them; text typed meanwhile after them.
            Some(leading) => {
                for (block, tokens, print) in blocks {
                    if matches!(block, Block::Result { .. }) {
                        m.blocks.insert(*leading, (block, tokens));
                        m.block_lines.insert(*leading, line);
                        m.prints.insert(*leading, print);
                        *leading += 1;
                    } else {
                        m.push_block(block, tokens, line, print);
                    }
                }
            }
            None => {
                for (block, tokens, print) in blocks {
                    m.push_block(block, tokens, line, print);
                }
            }
        }
    }

    /// Marks every message whose records interleave with an earlier message's as
    /// bound to the one before it: no cut may fall where the file does not split the
    /// two, so a rewrite can keep and drop whole lines. **O(messages)**.
    fn finish(mut self) -> Vec<Message> {
        let mut end = 0;
        for m in &mut self.messages {
            let start = m.spans.first().map_or(end, |s| s.start);
            if start < end {
                m.bound = true;
            }
            end = m.spans.iter().map(|s| s.end).fold(end, usize::max);
        }
        self.messages
    }
}

/// What a user or assistant record says besides its blocks.
struct Record {
    uuid: Option<String>,
    source: Option<String>,
    message_id: Option<String>,
    compact_summary: bool,
}

/// Reads a Claude Code session. **O(len)** expected.
///
/// Records with `isSidechain: true` belong to a subagent's conversation, which older
/// versions wrote into the main file: they are read as their own log, which is
/// returned only when the file holds nothing else (a subagent's own file).
pub(crate) fn read(text: &str, counter: &dyn TokenCounter) -> Result<Vec<Message>, FormatError> {
    let mut main = Conversation::default();
    let mut side = Conversation::default();
    for (line, span) in lines(text) {
        let body = &text[span.clone()];
        let invalid = |message: String| FormatError::Invalid { line, message };
        let (record, message) = parse_line(body).map_err(invalid)?;
        let conversation = if record.sidechain {
            &mut side
        } else {
            &mut main
        };
        match (record.kind, record.subtype) {
            (Some("system"), Some("compact_boundary")) => {
                if opt_str(&record.parent).is_none() {
                    conversation.boundary = true;
                    conversation.open = None;
                    conversation.called.clear();
                    conversation.early.clear();
                }
                continue;
            }
            (Some("user" | "assistant"), _) => {}
            _ => continue,
        }
        let Some(message) = message else {
            continue;
        };
        // The message, and its content as the line's pass left it.
        let (msg, content, raw) = match message {
            LineMessage::Read(msg, content) => (msg, content, None),
            LineMessage::Raw(raw) => {
                let msg = read_msg(raw.get()).map_err(invalid)?;
                let content =
                    ReadContent::of(msg.content).map_err(|m| invalid(format!("message.{m}")))?;
                let msg = Msg {
                    role: msg.role,
                    id: msg.id,
                    content: None,
                };
                (msg, content, Some(raw.get()))
            }
        };
        let raw = || match raw {
            Some(raw) => Ok(raw),
            None => message_text(body).map_err(invalid),
        };
        let role = match msg.role.or(record.kind) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            other => return Err(invalid(format!("message with unknown role {other:?}"))),
        };
        let mut blocks: Blocks = if record.compact_summary && role == Role::User {
            // Claude Code's summary (or cutpoint's, in the same shape): its text.
            let text = match &content {
                ReadContent::None => String::new(),
                ReadContent::Str(json) => text_of(json),
                ReadContent::Split(raws) => array_around(body, raws)
                    .map(|at| text_of(&body[at]))
                    .unwrap_or_default(),
            };
            let raw = raw()?;
            vec![(
                summary_in_text(&text).unwrap_or_else(|| Block::summary_of(&text)),
                counter.count_json(raw),
                fingerprint(raw),
            )]
        } else {
            content
                .blocks(role, counter)
                .map_err(|m| invalid(format!("message.{m}")))?
                .into_iter()
                .map(|(b, t, at)| (b, t, fingerprint(at)))
                .collect()
        };
        if blocks.is_empty() {
            let raw = raw()?;
            blocks.push((Block::Text, counter.count_json(raw), fingerprint(raw)));
        }
        let rec = Record {
            uuid: opt_str(&record.uuid).map(str::to_owned),
            source: opt_str(&record.source).map(str::to_owned),
            message_id: opt_str(&msg.id).map(str::to_owned),
            compact_summary: record.compact_summary,
        };
        match role {
            Role::Assistant => conversation.assistant(line, span, blocks, &rec),
            _ => conversation.user(line, span, blocks, &rec),
        }
    }
    let main = main.finish();
    Ok(if main.is_empty() { side.finish() } else { main })
}

// Writing: what a rewrite of a Claude Code file must get right beyond the lines it
// copies (its compaction boundary and the kept segment Claude Code relinks on load).

/// Where the Claude Code `compact_boundary` line right before byte `end` starts (blank
/// lines between allowed), or `end` when the line before is not one. **O(line)**.
pub(crate) fn boundary_before(input: &str, end: usize) -> usize {
    let before = input[..end].trim_end();
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    if is_compact_boundary(&before[start..]) {
        start
    } else {
        end
    }
}

/// Whether a Claude Code line is a `compact_boundary` record (`type` `system`,
/// `subtype` `compact_boundary`). **O(line)**: a caller asking of many lines first
/// looks for the word.
pub(crate) fn is_compact_boundary(line: &str) -> bool {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<JsonStr<'a>>,
        #[serde(borrow, default)]
        subtype: Option<JsonStr<'a>>,
    }
    serde_json::from_str::<Kind<'_>>(line).is_ok_and(|k| {
        opt_str(&k.kind) == Some("system") && opt_str(&k.subtype) == Some("compact_boundary")
    })
}

/// The links of a Claude Code line.
#[derive(Deserialize)]
struct Links<'a> {
    #[serde(borrow, default)]
    uuid: Option<JsonStr<'a>>,
}

/// The links of a Claude Code `compact_boundary` line.
pub(crate) struct BoundaryLinks {
    /// Its `parentUuid`: `None` (a new history), or the last line of a pinned head.
    pub(crate) parent: Option<String>,
    /// Its `logicalParentUuid`: the last line before it.
    pub(crate) logical: Option<String>,
    /// Its own `uuid`.
    pub(crate) uuid: String,
    /// The summary line after it (the kept segment's anchor).
    pub(crate) anchor: String,
    /// The first and last line of the kept segment, if one is kept.
    pub(crate) preserved: Option<(String, String)>,
}

/// A `compact_boundary` line as Claude Code writes its own: `compactMetadata` with the
/// trigger, the tokens before, and, when a tail is kept, the `preservedSegment`
/// (`headUuid`, `anchorUuid` the summary, `tailUuid`) that Claude Code relinks on load
/// (zeroing the kept lines' stale usage), with the context fields of `neighbour`. The
/// one writer of a boundary, for `--target` rewrites and strategies alike. **O(len)**
/// of `neighbour`.
pub(crate) fn compact_boundary(links: BoundaryLinks, tokens: u64, neighbour: &str) -> Value {
    let mut metadata = json!({"trigger": "manual", "preTokens": tokens});
    if let (Some((head, tail)), Value::Object(map)) = (&links.preserved, &mut metadata) {
        map.insert(
            "preservedSegment".to_owned(),
            json!({"headUuid": head, "anchorUuid": links.anchor, "tailUuid": tail}),
        );
    }
    let mut boundary = json!({
        "parentUuid": links.parent,
        "logicalParentUuid": links.logical,
        "type": "system",
        "subtype": "compact_boundary",
        "content": "Conversation compacted",
        "isMeta": false,
        "level": "info",
        "uuid": links.uuid,
        "compactMetadata": metadata,
    });
    if let Value::Object(map) = &mut boundary {
        for (k, v) in context(Format::ClaudeCode, neighbour) {
            map.entry(k).or_insert(v);
        }
    }
    boundary
}

/// The first and the last `uuid` of the lines of `text`, if any. **O(len)**.
pub(crate) fn first_and_last_uuid(text: &str) -> Option<(String, String)> {
    let mut first = None;
    let mut last = None;
    for (_, span) in lines(text) {
        let Ok(links) = serde_json::from_str::<Links<'_>>(&text[span]) else {
            continue;
        };
        if let Some(u) = opt_str(&links.uuid) {
            if first.is_none() {
                first = Some(u.to_owned());
            }
            last = Some(u.to_owned());
        }
    }
    Some((first?, last?))
}

/// Keeps the `preservedSegment` of the last `compact_boundary` line of a Claude Code
/// file true to the file: when a later compaction removed the segment's head or its
/// tail (it summarized lines after an earlier compaction's summary), the head becomes
/// the first line after the anchor and the tail the last line with a uuid, so that
/// Claude Code relinks what is there. A boundary without a segment, or whose head and
/// tail are both still there, is left byte for byte. **O(len)**; only lines naming a
/// boundary, the head or the tail are parsed before a refresh.
pub(crate) fn refresh_preserved_segment(out: &mut String) {
    // Only lines that name a boundary with a segment, or the segment's head, are
    // parsed: a file without a segment costs one substring scan.
    let last = lines(out)
        .filter(|(_, span)| {
            let line = &out[span.clone()];
            line.contains("\"compact_boundary\"") && line.contains("\"preservedSegment\"")
        })
        .last()
        .map(|(_, span)| span);
    let Some(span) = last else {
        return;
    };
    let Ok(mut boundary) = serde_json::from_str::<Value>(&out[span.clone()]) else {
        return;
    };
    let segment = &boundary["compactMetadata"]["preservedSegment"];
    let (Some(head), Some(anchor), Some(tail)) = (
        segment["headUuid"].as_str(),
        segment["anchorUuid"].as_str(),
        segment["tailUuid"].as_str(),
    ) else {
        return;
    };
    let (mut head_there, mut tail_there) = (false, false);
    for (_, s) in lines(out) {
        let line = &out[s];
        if !line.contains(head) && !line.contains(tail) {
            continue;
        }
        if let Ok(links) = serde_json::from_str::<Links<'_>>(line) {
            let u = opt_str(&links.uuid);
            head_there |= u == Some(head);
            tail_there |= u == Some(tail);
        }
    }
    if head_there && tail_there {
        return;
    }
    // The lines after the anchor's line.
    let rest = &out[span.end..];
    let after_anchor = lines(rest).find_map(|(_, s)| {
        let links = serde_json::from_str::<Links<'_>>(&rest[s.clone()]).ok()?;
        (opt_str(&links.uuid) == Some(anchor)).then_some(s.end)
    });
    let Some(from) = after_anchor else {
        return;
    };
    let Some((head, tail)) = first_and_last_uuid(&rest[from..]) else {
        return;
    };
    boundary["compactMetadata"]["preservedSegment"] =
        json!({"headUuid": head, "anchorUuid": anchor, "tailUuid": tail});
    out.replace_range(span, &boundary.to_string());
}
