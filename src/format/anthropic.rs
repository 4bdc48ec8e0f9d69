//! Anthropic Messages: `{"role":"user"|"assistant"|"system","content":"…"|[blocks]}`,
//! with `tool_use` blocks in assistant messages and `tool_result` blocks in user
//! messages. A mid-conversation `system` message's control blocks (`tool_addition`,
//! `tool_removal`, `output_config`, `clear_at`) and an assistant's `fallback` blocks
//! are [`Block::Control`]: pinned where they are. The `tool_use` and thinking blocks
//! before a message's final `fallback` were dropped by the API (the attempt was
//! refused and retried), so they are read as text: such a call is not pending.
//!
//! [`annotate`] adds what the block kinds do not carry: server tool uses and
//! programmatic calls ([`Note`]), and the tool manifest ([`ToolChange`]).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::valid::{Cursor, non_null};
use super::json_doc::{
    InlineContent, JsonStr, LineIndex, describe, member, opt_str, raw_text, result_line,
};
use super::{
    Block, Control, Format, Note, Parsed, Role, TokenCounter, ToolChange, Transcript, summary_in,
};
use crate::CallId;

/// A message; `C` is how its `content` is read: [`InlineContent`] on the one pass of the
/// common case (an array split into its blocks, or a plain string, as the message is
/// read), `&RawValue` on the slow path (a string with escapes, or an error to name).
#[derive(Deserialize)]
struct Msg<'a, C = &'a RawValue> {
    #[serde(borrow)]
    role: &'a RawValue,
    #[serde(default = "none")]
    content: Option<C>,
}

fn none<C>() -> Option<C> {
    None
}

/// One content block, of a message in a file or of a stream's `content_block_start`
/// (the live decoder reads the same struct); every field a block kind may carry, the
/// rest ignored. A file's block is walked ([`RawBlock::scanned`]); this definition
/// reads what the walk leaves, and names every error.
#[derive(Deserialize, Default, Debug, PartialEq)]
pub(crate) struct RawBlock<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(crate) kind: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) name: Option<JsonStr<'a>>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(crate) input: Option<&'a str>,
    #[serde(borrow, default)]
    pub(crate) tool_use_id: Option<JsonStr<'a>>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(crate) content: Option<&'a str>,
    #[serde(borrow, default)]
    pub(crate) text: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) thinking: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) signature: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) data: Option<JsonStr<'a>>,
    /// A `fallback` block's model that declined (`{"model": ...}`).
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(crate) from: Option<&'a str>,
    /// A `fallback` block's model that continues (`{"model": ...}`).
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(crate) to: Option<&'a str>,
    /// A `tool_use`'s `caller` (programmatic tool calling: [`is_script_caller`]).
    #[serde(borrow, default, deserialize_with = "raw_text")]
    pub(crate) caller: Option<&'a str>,
}

/// Whether a `tool_use`'s `caller` (its JSON) names a server code-execution tool
/// (`{"type": "code_execution_20260120", ...}`): a call a script made, whose answer
/// holds only results and which the script waits on. **O(len)**.
pub(crate) fn is_script_caller(caller: &str) -> bool {
    #[derive(Deserialize)]
    struct Caller<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<JsonStr<'a>>,
    }
    serde_json::from_str::<Caller<'_>>(caller)
        .ok()
        .and_then(|c| opt_str(&c.kind).map(|k| k.starts_with("code_execution")))
        .unwrap_or(false)
}

/// What a content block is, as the reader and the stream decoder both see it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum BlockKind<'b> {
    /// `text`.
    Text,
    /// `thinking`, or (`redacted`) `redacted_thinking`.
    Thinking { redacted: bool },
    /// `tool_use` (a client call), or any other `*_tool_use` (a `server` call,
    /// `server_tool_use`, `mcp_tool_use`, ...), with its `id` when not empty.
    Call { id: Option<&'b str>, server: bool },
    /// `tool_result` (a client call's result), or any other block naming a call by
    /// `tool_use_id` (a `server` tool's result block), with that id when not empty.
    Result { id: Option<&'b str>, server: bool },
    /// `compaction`: the provider's compaction.
    Compaction,
    /// Anything else (images, documents, citations, kinds added later).
    Other,
}

/// The members of a [`RawBlock`] as its walk reads them: strings first (`type` is
/// the definition's `kind`), then the members kept as JSON text.
const BLOCK_MEMBERS: [&str; 13] = [
    "type",
    "id",
    "name",
    "tool_use_id",
    "text",
    "thinking",
    "signature",
    "data",
    "input",
    "content",
    "from",
    "to",
    "caller",
];

impl<'a> RawBlock<'a> {
    /// The block `text` (valid JSON: an element of a message serde read) walked once
    /// ([`Cursor`]), or `None` for what the walk leaves to serde (the definition): a
    /// block that is no object, a name written with escapes, a member given twice, a
    /// string member that is no plain string. When it gives a block, it is the one
    /// serde gives (`tests::the_walk_reads_what_serde_reads`). **O(len)**, each byte
    /// passed once.
    pub(crate) fn scanned(text: &'a str) -> Option<RawBlock<'a>> {
        let mut b = RawBlock::default();
        Cursor::new(text).struct_members(&BLOCK_MEMBERS, |k, c| {
            if k < 4 {
                let plain = c.plain_str()?.map(JsonStr::borrowed);
                *[&mut b.kind, &mut b.id, &mut b.name, &mut b.tool_use_id][k] = plain;
            } else if k < 8 {
                // Texts the reader does not look at (the live decoder does), often
                // written with escapes: decoded as serde decodes them, on their own.
                let literal = c.value()?;
                let read = match literal {
                    "null" => None,
                    _ if !literal.contains('\\') => Some(JsonStr::borrowed(
                        literal.strip_prefix('"')?.strip_suffix('"')?,
                    )),
                    _ => Some(serde_json::from_str::<JsonStr<'a>>(literal).ok()?),
                };
                *[&mut b.text, &mut b.thinking, &mut b.signature, &mut b.data][k - 4] = read;
            } else {
                let text = non_null(c.value()?);
                *[
                    &mut b.input,
                    &mut b.content,
                    &mut b.from,
                    &mut b.to,
                    &mut b.caller,
                ][k - 8] = text;
            }
            Some(())
        })?;
        Some(b)
    }

    /// The block's type (empty when it has none). **O(1)**.
    pub(crate) fn kind(&self) -> &str {
        opt_str(&self.kind).unwrap_or_default()
    }

    /// What the block is (see [`BlockKind`]). **O(1)**.
    pub(crate) fn classify(&self) -> BlockKind<'_> {
        let kind = self.kind();
        let id_of = |s| opt_str(s).filter(|id: &&str| !id.is_empty());
        match kind {
            "text" => BlockKind::Text,
            "thinking" => BlockKind::Thinking { redacted: false },
            "redacted_thinking" => BlockKind::Thinking { redacted: true },
            "compaction" => BlockKind::Compaction,
            _ if kind.ends_with("tool_use") => BlockKind::Call {
                id: id_of(&self.id),
                server: kind != "tool_use",
            },
            _ if kind == "tool_result" || self.tool_use_id.is_some() => BlockKind::Result {
                id: id_of(&self.tool_use_id),
                server: kind != "tool_result",
            },
            _ => BlockKind::Other,
        }
    }
}

/// A call's or result's id from [`RawBlock::classify`], or the error naming the block
/// kind and the `field` it lacks (`an id`, `a tool_use_id`). **O(1)**.
pub(crate) fn needs_id<'i>(
    id: Option<&'i str>,
    kind: &str,
    field: &str,
) -> Result<&'i str, String> {
    id.ok_or_else(|| format!("{kind} block without {field}"))
}

/// A message walked once ([`Cursor`]): its role's JSON text and its content, as
/// [`parsed_message`] (the definition) reads them, or `None` for what the walk
/// leaves to it: a message that is no object or has no role, a name written with
/// escapes, a member given twice. **O(len)**, each byte passed once.
fn scanned_message(text: &str) -> Option<(&str, ReadContent<'_>)> {
    let (mut role, mut content) = (None, None);
    Cursor::new(text).struct_members(&["role", "content"], |k, c| {
        if k == 0 {
            role = Some(c.value()?);
            return Some(());
        }
        content = Some(match c.peek()? {
            b'[' => {
                let mut blocks = Vec::new();
                c.array(|c| {
                    blocks.push(c.value()?);
                    Some(())
                })?;
                ReadContent::Split(blocks)
            }
            _ => non_null(c.value()?).map_or(ReadContent::None, ReadContent::Str),
        });
        Some(())
    })?;
    Some((role?, content.unwrap_or(ReadContent::None)))
}

/// A message's role (its JSON text) and content as serde reads them: in one pass
/// when the content is an array, a plain string or absent, else again with the
/// content raw. **O(len)**.
fn parsed_message(text: &str) -> Result<(&str, ReadContent<'_>), String> {
    let fast = serde_json::from_str::<Msg<'_, InlineContent<'_>>>(text)
        .ok()
        .and_then(|msg| Some((msg.role.get(), ReadContent::inline(text, msg.content)?)));
    if let Some(read) = fast {
        return Ok(read);
    }
    let msg: Msg<'_> = serde_json::from_str(text).map_err(|e| describe(&e))?;
    Ok((msg.role.get(), ReadContent::of(msg.content)?))
}

/// Parses one Anthropic message. **O(len)**.
pub(crate) fn message<'a>(text: &'a str, counter: &dyn TokenCounter) -> Result<Parsed<'a>, String> {
    let (role, content) = match scanned_message(text) {
        Some(read) => read,
        None => parsed_message(text)?,
    };
    let role = match serde_json::from_str::<&str>(role) {
        Ok("user") => Role::User,
        Ok("assistant") => Role::Assistant,
        Ok("system") => Role::System,
        _ => return Err(format!("unknown role {role}")),
    };
    let blocks = content.blocks(role, counter)?;
    Ok(Parsed {
        role,
        blocks: if blocks.is_empty() {
            vec![(Block::Text, counter.count_json(text), text)]
        } else {
            blocks
        },
        signed: Vec::new(),
    })
}

/// A message's `content` as the pass that read the message left it.
#[derive(Debug, PartialEq)]
pub(crate) enum ReadContent<'a> {
    None,
    /// An array, split into its blocks (their JSON texts).
    Split(Vec<&'a str>),
    /// Any other value (a string), as its JSON text.
    Str(&'a str),
}

impl<'a> ReadContent<'a> {
    /// A `content` read raw: an array split into its blocks. **O(len)**.
    pub(crate) fn of(content: Option<&'a RawValue>) -> Result<Self, String> {
        Ok(match content {
            None => ReadContent::None,
            Some(c) if c.get().starts_with('[') => ReadContent::Split(
                serde_json::from_str::<Vec<&RawValue>>(c.get())
                    .map_err(|e| format!("content: {}", describe(&e)))?
                    .into_iter()
                    .map(RawValue::get)
                    .collect(),
            ),
            Some(c) => ReadContent::Str(c.get()),
        })
    }

    /// The content read in the pass that read its message (`text`), if that pass
    /// could: `None` sends the reader to the slow path. **O(1)**.
    pub(crate) fn inline(text: &'a str, content: Option<InlineContent<'a>>) -> Option<Self> {
        Some(match content {
            None => ReadContent::None,
            Some(InlineContent::Split(raws)) => ReadContent::Split(raws),
            Some(InlineContent::Str(s)) => ReadContent::Str(InlineContent::literal(text, s)?),
            Some(InlineContent::Other) => return None,
        })
    }

    /// Its blocks, each with the JSON text it was read from (a string is one text
    /// block; a user message's text that holds cutpoint's ledger is an earlier
    /// summary). **O(len)**.
    pub(crate) fn blocks(
        self,
        role: Role,
        counter: &dyn TokenCounter,
    ) -> Result<Vec<(Block, u64, &'a str)>, String> {
        match self {
            ReadContent::None => Ok(Vec::new()),
            ReadContent::Split(raws) => blocks_of(raws, role, counter),
            ReadContent::Str(text) => Ok(vec![text_block(text, role, counter)]),
        }
    }
}

/// A content that is no array (a string) as one text block: an earlier summary when
/// it is a user's text holding cutpoint's ledger. **O(len)**.
fn text_block<'a>(json: &'a str, role: Role, counter: &dyn TokenCounter) -> (Block, u64, &'a str) {
    let block = match role {
        Role::User => summary_in(json).unwrap_or(Block::Text),
        _ => Block::Text,
    };
    (block, counter.count_json(json), json)
}

/// The blocks of an Anthropic `content` array, its elements already split (by
/// [`ReadContent::of`], or in the pass that read the message around them), as
/// [`ReadContent::blocks`] reads them. **O(len)**.
fn blocks_of<'a>(
    raws: Vec<&'a str>,
    role: Role,
    counter: &dyn TokenCounter,
) -> Result<Vec<(Block, u64, &'a str)>, String> {
    let text = |raw: &str| match role {
        Role::User => summary_in(raw).unwrap_or(Block::Text),
        _ => Block::Text,
    };
    let mut out = Vec::with_capacity(raws.len());
    for (k, raw) in raws.into_iter().enumerate() {
        let b = match RawBlock::scanned(raw) {
            Some(b) => b,
            None => {
                serde_json::from_str(raw).map_err(|e| format!("content.{k}: {}", describe(&e)))?
            }
        };
        let control = match (role, opt_str(&b.kind)) {
            (Role::System, Some("tool_addition")) => Some(Control::ToolAddition),
            (Role::System, Some("tool_removal")) => Some(Control::ToolRemoval),
            (Role::System, Some("output_config")) => Some(Control::OutputConfig),
            (Role::System, Some("clear_at")) => Some(Control::ClearAt),
            (_, Some("fallback")) => Some(Control::Fallback),
            _ => None,
        };
        let block = match control {
            Some(c) => Block::Control(c),
            None => match block(b, k)? {
                Block::Text => text(raw),
                other => other,
            },
        };
        out.push((block, counter.count_json(raw), raw));
    }
    // The attempt before the final `fallback` was refused: its thinking and calls were
    // dropped by the API, so none of them is pending or bound.
    if let Some(last) = out
        .iter()
        .rposition(|(b, _, _)| *b == Block::Control(Control::Fallback))
    {
        for (b, _, _) in &mut out[..last] {
            if matches!(b, Block::Call { .. } | Block::Reasoning) {
                *b = Block::Text;
            }
        }
    }
    Ok(out)
}

/// A message's content, as [`annotate`] reads it: a JSON document's message, or a
/// Claude Code record's `message`.
#[derive(Deserialize)]
struct Content<'a> {
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// A Claude Code record, as [`annotate`] reads it.
#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow, default)]
    message: Option<Content<'a>>,
}

/// The JSON of one content block, as [`annotate`] reads it.
#[derive(Deserialize)]
struct Annotated<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    caller: Option<&'a RawValue>,
}

/// What [`annotate`] looks for: a message, or a block, without any of these is not
/// parsed again. A programmatic call is marked by its caller's type
/// ([`is_script_caller`]: `code_execution…`), not by the `caller` member: Claude Code
/// writes `"caller":{"type":"direct"}` on every tool call it makes itself, and each
/// such record was read again for nothing. Like every marker, it is looked for as
/// written: a type spelled with escapes is not seen.
const MARKERS: [&str; 3] = [
    "\"tool_reference\"",
    "\"server_tool_use\"",
    "\"code_execution",
];

/// Whether `raw` spells one of the [`MARKERS`], by their searchers, other than as a
/// member's name: Claude Code's `usage` has a `"server_tool_use": {…}` member on
/// every assistant record, which marks no block (a fifth of reading a Claude Code
/// session went to reading such records again). **O(len)**.
fn marked(markers: &[memchr::memmem::Finder<'static>], raw: &str) -> bool {
    markers.iter().any(|k| {
        k.find_iter(raw.as_bytes()).any(|at| {
            let after = raw.get(at + k.needle().len()..).unwrap_or("");
            !after.trim_start().starts_with(':')
        })
    })
}

/// The content blocks of message span `raw` (a record's `message.content` for
/// Claude Code), as their bytes; `None` when it holds no array of them. **O(len)**.
fn content_blocks(raw: &str, jsonl: bool) -> Option<Vec<&RawValue>> {
    let content = if jsonl {
        serde_json::from_str::<Line<'_>>(raw).ok()?.message?.content
    } else {
        serde_json::from_str::<Content<'_>>(raw).ok()?.content
    }?;
    serde_json::from_str(content.get()).ok()
}

/// Adds to `t` (read from `text` as Anthropic Messages or Claude Code) the facts the
/// block kinds do not carry: [`Note::ServerCall`] for `server_tool_use` blocks,
/// [`Note::ProgrammaticCall`] for a `tool_use` whose `caller` is a server
/// code-execution tool, and a [`ToolChange`] for each `tool_reference` (loaded; in a
/// `tool_removal`: unloaded). **O(len)**: a substring search of every message, and of
/// the blocks of a message that holds a marker; a block is parsed only when it holds
/// one, into a tree only when it is a result or a tool change.
pub(crate) fn annotate(text: &str, t: &mut Transcript) {
    let jsonl = t.format == Format::ClaudeCode;
    let mut lines: Option<LineIndex> = None;
    let markers = MARKERS.map(memchr::memmem::Finder::new);
    for (i, m) in t.messages.iter_mut().enumerate() {
        for span in &m.spans {
            let raw = &text[span.clone()];
            if !marked(&markers, raw) {
                continue;
            }
            // This record's container expiry, read once, when it holds a
            // programmatic call.
            let mut expiry: Option<Option<i64>> = None;
            let Some(content) = content_blocks(raw, jsonl) else {
                continue;
            };
            // The first block of this span: a JSON document's message is one span;
            // a Claude Code record's blocks are those read on its line.
            let first = if jsonl {
                let index = lines.get_or_insert_with(|| LineIndex::new(text));
                let line = index.line(span.start);
                match m.block_lines.iter().position(|&l| l == line) {
                    Some(f) => f,
                    None => continue,
                }
            } else {
                0
            };
            for (j, value) in content.iter().enumerate() {
                let k = first + j;
                if k >= m.blocks.len() {
                    break;
                }
                let value = value.get();
                if !marked(&markers, value) {
                    continue;
                }
                let Ok(b) = serde_json::from_str::<Annotated<'_>>(value) else {
                    continue;
                };
                let kind = opt_str(&b.kind).unwrap_or("");
                match kind {
                    "server_tool_use" => m.notes.push((k, Note::ServerCall)),
                    "tool_use"
                        if matches!(m.blocks[k].0, Block::Call { .. })
                            && b.caller.is_some_and(|c| is_script_caller(c.get())) =>
                    {
                        m.notes.push((k, Note::ProgrammaticCall));
                        if jsonl {
                            let expires = *expiry.get_or_insert_with(|| container_expiry(raw));
                            if let Some(at) = expires {
                                m.notes.push((k, Note::ContainerExpiresAt(at)));
                            }
                        }
                    }
                    _ => {}
                }
                // Only results and tool changes load tools (a call's input that
                // spells a reference loads nothing).
                if !(kind.ends_with("tool_result")
                    || kind == "tool_addition"
                    || kind == "tool_removal")
                {
                    continue;
                }
                let Ok(rest) =
                    serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(value)
                else {
                    continue;
                };
                let loaded = kind != "tool_removal";
                let mut names = Vec::new();
                // The block's members but the two read above.
                let rest = rest
                    .iter()
                    .filter(|(key, _)| !matches!(key.as_str(), "type" | "caller"));
                for (key, v) in rest {
                    if key == "tool_reference" {
                        if let Some(name) = reference_name(v) {
                            names.push(name);
                            continue;
                        }
                    }
                    tool_references(v, 0, &mut names);
                }
                t.tools.extend(names.into_iter().map(|tool| ToolChange {
                    message: i,
                    block: k,
                    tool,
                    loaded,
                }));
            }
        }
        m.notes.sort_unstable_by_key(|(k, _)| *k);
        m.notes.dedup();
    }
    if jsonl {
        written_at(text, t, lines.as_ref());
    }
}

/// When the container of the response recorded on Claude Code line `raw` expires
/// (`message.container.expires_at`), in milliseconds since the Unix epoch; `None`
/// when the line names none or not as an RFC 3339 time. **O(len)**.
fn container_expiry(raw: &str) -> Option<i64> {
    let message = member(raw, "message")?;
    time_of(member(member(message, "container")?, "expires_at")?)
}

/// An RFC 3339 time given as a JSON string ([`unix_millis`]). **O(len)**.
fn time_of(json: &str) -> Option<i64> {
    unix_millis(&serde_json::from_str::<String>(json).ok()?)
}

/// Adds [`Note::WrittenAt`] to each result (of a Claude Code transcript read from
/// `text`) that answers a call carrying a [`Note::ContainerExpiresAt`]: the
/// `timestamp` of the record holding it. **O(programmatic calls)**, plus one parse
/// of each record holding such a result.
fn written_at(text: &str, t: &mut Transcript, lines: Option<&LineIndex>) {
    let Some(lines) = lines else {
        // No record was marked: no programmatic call.
        return;
    };
    for i in 1..t.messages.len() {
        let (before, after) = t.messages.split_at_mut(i);
        let call = &before[i - 1];
        let expiring: Vec<&CallId> = call
            .notes
            .iter()
            .filter(|(_, n)| matches!(n, Note::ContainerExpiresAt(_)))
            .filter_map(|&(k, _)| match &call.blocks.get(k)?.0 {
                Block::Call { id, .. } => Some(id),
                _ => None,
            })
            .collect();
        if expiring.is_empty() {
            continue;
        }
        let answer = &mut after[0];
        let mut notes = Vec::new();
        for (k, (b, _)) in answer.blocks.iter().enumerate() {
            let Block::Result { id, .. } = b else {
                continue;
            };
            if !expiring.contains(&id) {
                continue;
            }
            let line = answer.block_line(k);
            let stamp = answer
                .spans
                .iter()
                .find(|s| lines.line(s.start) == line)
                .and_then(|s| member(&text[s.clone()], "timestamp"))
                .and_then(time_of);
            if let Some(at) = stamp {
                notes.push((k, Note::WrittenAt(at)));
            }
        }
        answer.notes.extend(notes);
        answer.notes.sort_unstable_by_key(|(k, _)| *k);
    }
}

/// An RFC 3339 time (`2026-03-01T12:00:00.123Z`, `...+02:00`; a space or a `t`
/// for the `T`) in milliseconds since the Unix epoch; `None` for anything else,
/// a date out of range included. Digits past the milliseconds are dropped.
/// **O(len)**.
pub(crate) fn unix_millis(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let d = b.get(r)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0i64, |n, &c| n * 10 + i64::from(c - b'0')))
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut at = 19;
    let mut millis = 0;
    if b[at] == b'.' {
        let digits = b[at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        for (n, &c) in b[at + 1..at + 1 + digits.min(3)].iter().enumerate() {
            millis += i64::from(c - b'0') * [100, 10, 1][n];
        }
        at += 1 + digits;
    }
    let offset = match b.get(at..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (oh, om) = (num(at + 1..at + 3)?, num(at + 4..at + 6)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let o = (oh * 60 + om) * 60;
            if *sign == b'+' { o } else { -o }
        }
        _ => return None,
    };
    // Days from the civil date (H. Hinnant's `days_from_civil`).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((mo + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + h * 3600 + mi * 60 + sec - offset) * 1000) + millis)
}

/// The tool a reference names (`tool_name`, or `name`).
fn reference_name(v: &serde_json::Value) -> Option<String> {
    v.get("tool_name")
        .or_else(|| v.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_owned)
}

/// How deep [`tool_references`] looks into a block.
const MAX_DEPTH: usize = 6;

/// The `tool_name` of every `{"type":"tool_reference"}` object in `v`.
pub(crate) fn tool_references(v: &serde_json::Value, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        serde_json::Value::Array(items) => {
            for item in items {
                tool_references(item, depth + 1, out);
            }
        }
        serde_json::Value::Object(map) => {
            if map.get("type").and_then(|t| t.as_str()) == Some("tool_reference") {
                out.extend(reference_name(v));
                return;
            }
            for item in map.values() {
                tool_references(item, depth + 1, out);
            }
        }
        _ => {}
    }
}

/// One block as a [`Block`]: client `tool_use` / `tool_result` pair, thinking is
/// reasoning, a `compaction` block is the provider's compaction, everything else
/// (text, images, server tools and their results) is text.
pub(crate) fn block(b: RawBlock<'_>, k: usize) -> Result<Block, String> {
    let at = |m: String| format!("content.{k}: {m}");
    Ok(match b.classify() {
        BlockKind::Call { id, server: false } => Block::Call {
            id: CallId::from(needs_id(id, b.kind(), "an id").map_err(at)?),
            name: opt_str(&b.name).unwrap_or_default().to_owned(),
            arguments: b.input.map(str::to_owned).unwrap_or_default(),
        },
        BlockKind::Result { id, server: false } => Block::Result {
            id: CallId::from(needs_id(id, b.kind(), "a tool_use_id").map_err(at)?),
            first_line: result_line(b.content),
        },
        BlockKind::Thinking { .. } => Block::Reasoning,
        BlockKind::Compaction => Block::Compaction,
        _ => Block::Text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::json_doc::generate::{
        array, fixture, member, mostly, object, one_of, walk_agrees,
    };
    use proptest::prelude::*;

    fn kind() -> impl Strategy<Value = String> {
        mostly(
            &[
                "\"text\"",
                "\"tool_use\"",
                "\"tool_result\"",
                "\"thinking\"",
                "\"redacted_thinking\"",
                "\"server_tool_use\"",
                "\"web_search_tool_result\"",
                "\"compaction\"",
                "\"fallback\"",
                "\"image\"",
            ],
            &["null", "\"t\\u0065xt\"", "3", "{}"],
        )
    }

    /// An id or a name, now and then one the walk leaves to serde or serde refuses.
    fn string() -> impl Strategy<Value = String> {
        mostly(
            &["\"toolu_01\"", "\"Bash\"", "\"\"", "null"],
            &["\"c\\u0031\"", "\"a\\nb\"", "7", "[\"x\"]"],
        )
    }

    /// A text, thinking, signature or data: escapes are common, and serde refuses a
    /// lone surrogate or a value that is no string.
    fn text() -> impl Strategy<Value = String> {
        mostly(
            &[
                "\"plain\"",
                "\"line\\nnext \\\"quoted\\\" \\\\ \\t\"",
                "\"\\u00e9t\\u00e9 \\ud83d\\ude00\"",
                "\"EqQBCkgIARABGAIiQL+/=\"",
                "\"ends in \\\\\"",
                "\"\"",
                "null",
            ],
            &["\"\\ud800\"", "5", "{\"text\": \"x\"}", "[]"],
        )
    }

    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            one_of(&[
                "{\"command\": \"ls -la\", \"n\": [1, -2.5e3, true]}",
                "\"a result\\nsecond line\"",
                "[{\"type\": \"text\", \"text\": \"out\"}]",
                "{\"type\": \"code_execution_20260120\", \"tool_id\": \"x\"}",
                "{\"model\": \"claude\"}",
                "null",
                "[]",
                "{}",
                "42",
            ]),
            array(string()),
        ]
    }

    fn raw_block() -> impl Strategy<Value = String> {
        let mut members = vec![member(one_of(&["type"]), kind())];
        members.extend(
            BLOCK_MEMBERS[1..4]
                .iter()
                .map(|n| member(one_of(&[n]), string())),
        );
        members.extend(
            BLOCK_MEMBERS[4..8]
                .iter()
                .map(|n| member(one_of(&[n]), text())),
        );
        members.extend(
            BLOCK_MEMBERS[8..]
                .iter()
                .map(|n| member(one_of(&[n]), value())),
        );
        members.push(member(
            mostly(
                &["cache_control", "citations"],
                &["t\\u0065xt", "input\\\""],
            ),
            value(),
        ));
        prop_oneof![30 => object(members), 1 => one_of(&["[\"text\"]", "\"x\"", "null"])]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5_000))]
        /// Whatever the one walk reads, serde_json reads the same.
        #[test]
        fn the_walk_reads_what_serde_reads(text in raw_block()) {
            walk_agrees(&text, RawBlock::scanned, serde_json::from_str::<RawBlock<'_>>)?;
        }
    }

    fn anthropic_message() -> impl Strategy<Value = String> {
        let role = mostly(
            &["\"user\"", "\"assistant\"", "\"system\""],
            &["\"us\\u0065r\"", "5", "null", "\"tool\""],
        );
        let content = prop_oneof![
            3 => array(raw_block()),
            1 => one_of(&[
                "\"plain text\"",
                "\"two\\nlines\"",
                "\"\"",
                "null",
                "{\"type\": \"text\"}",
                "7",
                "[]",
            ]),
        ];
        let members = vec![
            member(one_of(&["role"]), role),
            member(one_of(&["content"]), content),
            member(
                mostly(
                    &["id", "model", "stop_reason"],
                    &["r\\u006fle", "content\\\""],
                ),
                value(),
            ),
        ];
        prop_oneof![30 => object(members), 1 => one_of(&["[\"user\"]", "\"x\"", "null"])]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3_000))]
        /// Whatever the walk of a message reads, serde_json reads the same.
        #[test]
        fn the_message_walk_reads_what_serde_reads(text in anthropic_message()) {
            walk_agrees(&text, scanned_message, parsed_message)?;
        }
    }

    /// Every message of the proxy's real Anthropic request is walked whole.
    #[test]
    fn the_message_walk_reads_a_real_request_whole() {
        let path = format!(
            "{}/proxy/tests/fixtures/anthropic-request__claude-reliability__python-to-rust-port.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).expect("the fixture");
        #[derive(Deserialize)]
        struct Request<'a> {
            #[serde(borrow)]
            messages: Vec<&'a RawValue>,
        }
        let request: Request<'_> = serde_json::from_str(&text).expect("a request");
        for raw in &request.messages {
            let walked = scanned_message(raw.get());
            assert!(walked.is_some(), "left to serde: {}", raw.get());
            assert_eq!(walked, parsed_message(raw.get()).ok());
        }
        assert!(request.messages.len() > 20, "{}", request.messages.len());
    }

    /// Every content block of the real Claude Code sessions is walked whole, as serde
    /// reads it.
    #[test]
    fn the_walk_reads_the_real_sessions_whole() {
        #[derive(Deserialize)]
        struct Line<'a> {
            #[serde(borrow, default)]
            message: Option<Content<'a>>,
        }
        let mut blocks = 0;
        for path in [
            "claude-code__spotter__4d5611e5-main.jsonl",
            "claude-code__claude-reliability__python-to-rust-port.jsonl",
            "claude-code__entireio-cli__1a-8a83a35a9b-0-interleaved-parallel.jsonl",
        ] {
            let text = fixture(path);
            for line in text.lines() {
                let line: Line<'_> = serde_json::from_str(line).expect("a session line");
                let Some(content) = line.message.and_then(|m| m.content) else {
                    continue;
                };
                if !content.get().starts_with('[') {
                    continue;
                }
                let raws: Vec<&RawValue> = serde_json::from_str(content.get()).expect("blocks");
                for raw in raws {
                    let walked = RawBlock::scanned(raw.get());
                    assert!(walked.is_some(), "{path}: left to serde: {}", raw.get());
                    let parsed: RawBlock<'_> = serde_json::from_str(raw.get()).expect("a block");
                    assert_eq!(walked, Some(parsed), "{path}");
                    blocks += 1;
                }
            }
        }
        assert!(blocks > 300, "{blocks} blocks");
    }

    #[test]
    fn a_marker_named_as_a_member_marks_nothing() {
        let markers = MARKERS.map(memchr::memmem::Finder::new);
        for (raw, expect) in [
            // Claude Code's usage on every assistant record.
            (
                r#"{"usage":{"server_tool_use":{"web_search_requests":0}}}"#,
                false,
            ),
            (r#"{"usage":{"server_tool_use" : {}}}"#, false),
            (r#"{"type":"server_tool_use","id":"srvtoolu_1"}"#, true),
            (r#"{"type" : "server_tool_use" }"#, true),
            // A call its own client made, and one a server script made.
            (r#"{"type":"tool_use","caller":{"type":"direct"}}"#, false),
            (
                r#"{"type":"tool_use","caller":{"type":"code_execution_20260120"}}"#,
                true,
            ),
            (r#"{"type":"tool_reference","tool_name":"q"}"#, true),
            // Both: one occurrence as a value is enough.
            (
                r#"{"server_tool_use":{},"content":[{"type":"server_tool_use"}]}"#,
                true,
            ),
        ] {
            assert_eq!(marked(&markers, raw), expect, "{raw}");
        }
    }
}
