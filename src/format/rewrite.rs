//! Writing a compacted transcript back in its own format: the pinned head verbatim,
//! one summary message in the provider's shape, then the retained messages exactly as
//! they were (byte for byte, except the `parentUuid` links Claude Code resumes by).
//!
//! Both entry points plan on the compaction layer's [`Log`] over the live history's
//! entries (records with their payloads), so a rewrite summarizes exactly what a
//! records JSONL compaction would: every pair as a [`Unit`], an earlier summary inside
//! the region folded in unit by unit ([`Log::units`]: cutpoint's own summaries, read
//! back from their text, and Claude Code's `isCompactSummary`, whose prose is kept),
//! results without their call listed as [`Orphan`]s. A Codex `compacted` message is
//! pinned: never summarized. The summary's text is written by the one renderer,
//! [`SummaryParts::text`].
//!
//! A Claude Code rewrite mirrors Claude Code's own compaction: a `system` record with
//! subtype `compact_boundary`, then the `isCompactSummary` user record, both with
//! `uuid`s; the summary's `parentUuid` is the boundary, the boundary's is the last
//! record of the pinned head (`null` when nothing is pinned, as Claude Code writes
//! it), and every retained record whose `parentUuid` named a dropped record names
//! the summary instead, so following `parentUuid` from the last record runs through
//! the summary to the head.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::ops::Range;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::json_doc::{JsonStr, lines, offset_in, opt_str};
use super::{ByteEstimate, DeferReport, Format, Role, TokenCounter, Transcript, build};
use crate::compact::{
    Atom, Direction, Entry, Log, Orphan, Payload, Plan, PlanError, SummaryParts, Unit, Window,
};
use crate::{AppendError, CallId, Record};

/// Which message boundary a rewrite was asked to place.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Boundary {
    /// The end of the pinned head: the first summarized message.
    HeadEnd,
    /// The cut: the first retained message.
    Cut,
}

impl std::fmt::Display for Boundary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Boundary::HeadEnd => "end the pinned head",
            Boundary::Cut => "cut",
        })
    }
}

/// Why a compacted transcript could not be written.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RewriteError {
    /// The head is still open (a call in it, or right after it, is in flight): wait
    /// for the turn boundary.
    #[error("{0}")]
    Plan(PlanError),
    /// No legal cut in the window: wait for the turn boundary. The report names
    /// messages, with the token distance of the nearest legal cuts.
    #[error("{0}")]
    Deferred(Box<DeferReport>),
    /// The head or the cut is not a message boundary the transcript allows: it would
    /// split a tool call from its result, or a message a provider binds to the one
    /// before it, or it lies before the live history.
    #[error(
        "message {at} is not a legal place to {what}: it would split a tool call from its result or a bound pair, or it lies before the live history"
    )]
    NotLegal {
        /// The message index asked for.
        at: usize,
        /// Which boundary.
        what: Boundary,
    },
    /// The tracker refused the transcript's records (a log too long or too large).
    #[error(transparent)]
    Tracker(#[from] AppendError),
    /// `input` is not the text the transcript was read from (a span falls outside it).
    #[error(
        "the input is not the text this transcript was read from (message {message}'s bytes are not in it)"
    )]
    InputMismatch {
        /// The first message whose span does not fit.
        message: usize,
    },
    /// The cut lies before the end of the pinned head, or past the last message.
    #[error("cut {cut} is outside {head}..={len} (pinned head .. message count)")]
    OutOfRange {
        /// The cut asked for.
        cut: usize,
        /// End of the pinned head.
        head: usize,
        /// Message count.
        len: usize,
    },
}

/// The live history of a transcript as a compaction [`Log`], with the message of each
/// record and the original id of each renamed call.
struct Planner<'t> {
    t: &'t Transcript,
    log: Log,
    owner: Vec<usize>,
    renamed: HashMap<CallId, CallId>,
}

impl<'t> Planner<'t> {
    /// **O(len)** of the live history's payloads.
    fn new(t: &'t Transcript) -> Result<Self, RewriteError> {
        let built = build::entries(t, t.live_from());
        Ok(Planner {
            t,
            log: Log::from_entries(built.entries)?,
            owner: built.owner,
            renamed: built.renamed,
        })
    }

    /// The first record of message `m` (the record count for the end). **O(log n)**.
    fn record_of(&self, m: usize) -> usize {
        self.owner.partition_point(|&o| o < m)
    }

    /// The id a call had in the transcript.
    fn original(&self, id: &CallId) -> CallId {
        self.renamed.get(id).unwrap_or(id).clone()
    }

    /// What a summary of `plan`'s region says: the prose of the earlier summaries in
    /// it, then `prose` (once), the units of every pair and of every earlier summary
    /// (their own ids, as the transcript spells them), and the results without their
    /// call. **O(r)** plus the payloads.
    fn parts(&self, plan: &Plan, prose: &str) -> SummaryParts {
        let entries = self.log.entries();
        let mut texts: Vec<String> = Vec::new();
        let mut orphans: Vec<Orphan> = Vec::new();
        for atom in &plan.atoms {
            match atom {
                Atom::Summary { at, .. } => {
                    if let Some(Payload::Summary {
                        text: Some(text), ..
                    }) = entries.get(*at).map(|e| &e.payload)
                    {
                        if !text.trim().is_empty() {
                            texts.push(text.clone());
                        }
                    }
                    // The earlier summary's own orphans stay listed.
                    if let Some(super::Block::Summary(parts)) = self.block_at(*at) {
                        orphans.extend(parts.orphans.iter().cloned());
                    }
                }
                Atom::DroppedResult { at, call_id } => {
                    let first_line = match entries.get(*at).map(|e| &e.payload) {
                        Some(Payload::Result { content, .. }) => content.clone(),
                        _ => None,
                    };
                    orphans.push(Orphan {
                        call_id: self.original(call_id),
                        first_line,
                    });
                }
                Atom::Text { .. } | Atom::Pair { .. } => {}
            }
        }
        let earlier = texts.join("\n\n");
        let prose = if prose.is_empty() || earlier.ends_with(prose) {
            earlier
        } else if earlier.is_empty() {
            prose.to_owned()
        } else {
            format!("{earlier}\n\n{prose}")
        };
        let units = self
            .log
            .units(plan)
            .into_iter()
            .map(|u| Unit {
                call_id: self.original(&u.call_id),
                ..u
            })
            .collect();
        SummaryParts::new(prose, units, orphans)
    }

    /// The block record `at` stands for.
    fn block_at(&self, at: usize) -> Option<&'t super::Block> {
        let m = *self.owner.get(at)?;
        let first = self.record_of(m);
        self.t
            .messages
            .get(m)?
            .blocks
            .get(at - first)
            .map(|(b, _)| b)
    }
}

/// A head that would summarize a Codex `compacted` message, or a message holding a
/// provider's compaction block or item, is moved past it: that message replaces
/// everything before it on replay and holds what cannot be folded (an encrypted
/// compaction, sent back byte-identical), so it stays. **O(blocks)** of that message.
fn pin_compacted(t: &Transcript, head: usize) -> usize {
    match t.messages.get(head) {
        Some(m) if m.role == Role::Compacted || m.has_compaction() => head + 1,
        _ => head,
    }
}

/// The summary units of messages `range` (both ends legal cuts of the live history),
/// in log order: each pair with its tool name and arguments verbatim and the first
/// line of its result, and the units of every earlier summary in the range, folded
/// in place. A call id that comes back (OpenAI Chat) keeps its own id. **O(len)**.
///
/// # Errors
/// [`RewriteError::NotLegal`] when an end is not a legal cut of the live history;
/// [`RewriteError::Tracker`] when the tracker refuses the records.
pub fn ledger(t: &Transcript, range: Range<usize>) -> Result<Vec<Unit>, RewriteError> {
    let planner = Planner::new(t)?;
    let plan = plan_between(&planner, range.start, range.end)?;
    Ok(planner.parts(&plan, "").units)
}

/// The plan of messages `head..cut`, both legal cuts of the live history.
fn plan_between(p: &Planner<'_>, head: usize, cut: usize) -> Result<Plan, RewriteError> {
    let t = p.t;
    let live = t.live_from();
    let legal = |m: usize| m >= live && p.log.tracker().is_legal_cut(p.record_of(m));
    if head < cut {
        if !legal(head) {
            return Err(RewriteError::NotLegal {
                at: head,
                what: Boundary::HeadEnd,
            });
        }
        if !legal(cut) {
            return Err(RewriteError::NotLegal {
                at: cut,
                what: Boundary::Cut,
            });
        }
    }
    let (start, end) = (p.record_of(head.max(live)), p.record_of(cut.max(live)));
    p.log
        .plan_region(start..end, Default::default())
        .map_err(|_| RewriteError::NotLegal {
            at: cut,
            what: Boundary::Cut,
        })
}

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

/// Writes `t` (read from `input`) compacted at message boundaries the caller chose:
/// messages `..head` verbatim, one summary message whose text is `summary` followed by
/// the ledger of `head..cut` (see the module doc), then messages `cut..`. `head` and
/// `cut` are message indices of the live history; both must be legal cuts
/// ([`legal_message_cuts`](Transcript::legal_message_cuts)), and `head <= cut`. A
/// head at a Codex `compacted` message moves past it (it is pinned). For JSONL, lines
/// that are not messages are kept up to the first summarized message and from the cut
/// on, and dropped in between; for JSON documents, the text around the message array
/// is kept. **O(len)**.
///
/// # Errors
/// [`RewriteError`] when `head` or `cut` is not a legal boundary, or out of range, or
/// `input` is not `t`'s text.
pub fn render(
    t: &Transcript,
    input: &str,
    head: usize,
    cut: usize,
    summary: &str,
) -> Result<String, RewriteError> {
    check_range(t, input, head, cut)?;
    let head = pin_compacted(t, head);
    let cut = cut.max(head);
    let planner = Planner::new(t)?;
    let plan = plan_between(&planner, head, cut)?;
    let parts = planner.parts(&plan, summary);
    Ok(write(t, input, head, cut, &parts, plan.region_tokens))
}

/// `head <= cut <= len`, and every span of `t` lies in `input`. **O(messages)**.
fn check_range(t: &Transcript, input: &str, head: usize, cut: usize) -> Result<(), RewriteError> {
    let len = t.messages.len();
    if head > cut || cut > len {
        return Err(RewriteError::OutOfRange { cut, head, len });
    }
    if let Some(message) = t
        .messages
        .iter()
        .position(|m| m.spans.iter().any(|s| input.get(s.clone()).is_none()))
    {
        return Err(RewriteError::InputMismatch { message });
    }
    if t.array_span
        .as_ref()
        .is_some_and(|a| input.get(a.clone()).is_none())
    {
        return Err(RewriteError::InputMismatch { message: 0 });
    }
    Ok(())
}

/// The rewrite itself, for a range [`check_range`] accepted and boundaries known to
/// be legal; `region_tokens` are the summarized tokens. **O(len)**.
fn write(
    t: &Transcript,
    input: &str,
    head: usize,
    cut: usize,
    parts: &SummaryParts,
    region_tokens: u64,
) -> String {
    let len = t.messages.len();
    let text = parts.text();
    let span = |m: usize| t.messages[m].spans.first().map_or(0..0, Clone::clone);
    // The neighbour whose context the summary takes: the first summarized (or
    // retained) message, or the last one.
    let neighbour = t
        .messages
        .get(head)
        .or(t.messages.last())
        .and_then(|m| m.spans.first())
        .map_or("", |s| &input[s.clone()]);
    let summary = match t.format {
        Format::Records => records_summary(parts, ByteEstimate.count(&text)),
        _ => {
            let mut value = summary_value(t.format, &text, ByteEstimate.count(&text));
            if let Value::Object(map) = &mut value {
                for (k, v) in context(t.format, neighbour) {
                    map.entry(k).or_insert(v);
                }
                if t.format == Format::GeminiCli {
                    let id = uuid(input, &[&text, "gemini-cli"]);
                    map.insert("id".to_owned(), Value::String(id));
                }
            }
            value.to_string()
        }
    };
    let mut out = String::with_capacity(input.len());
    match &t.array_span {
        Some(array) => {
            out.push_str(&input[..array.start]);
            out.push('[');
            let kept = (0..head).chain(std::iter::once(usize::MAX)).chain(cut..len);
            for (k, m) in kept.enumerate() {
                if k > 0 {
                    out.push(',');
                }
                if m == usize::MAX {
                    out.push_str(&summary);
                } else {
                    out.push_str(&input[span(m)]);
                }
            }
            out.push(']');
            out.push_str(&input[array.end..]);
        }
        None => {
            // Everything before the first message after the head (the head, and the
            // lines that are not messages up to there), except, for Claude Code, the
            // compaction boundary of an earlier summary folded into this one: the new
            // boundary takes its place.
            let prefix_end = if head < len {
                span(head).start
            } else {
                input.len()
            };
            let folds_summary = |m: &super::Message| {
                matches!(m.blocks.first(), Some((super::Block::Summary(_), _)))
            };
            let prefix_end = match t.messages.get(head) {
                Some(m) if t.format == Format::ClaudeCode && folds_summary(m) && head < cut => {
                    boundary_before(input, prefix_end)
                }
                _ => prefix_end,
            };
            let retained = if cut < len {
                span(cut).start
            } else {
                input.len()
            };
            out.push_str(&input[..prefix_end]);
            if prefix_end > 0 && !input[..prefix_end].ends_with('\n') {
                // A last line without its newline: end it before the summary.
                out.push('\n');
            }
            if t.format == Format::ClaudeCode {
                let chain = Chain::new(t, input, head, prefix_end..retained);
                let preserved = first_and_last_uuid(&input[retained..]);
                chain.write(&mut out, &summary, region_tokens, neighbour, preserved);
                chain.retained(&mut out, &input[retained..]);
                refresh_preserved_segment(&mut out);
            } else {
                out.push_str(&summary);
                out.push('\n');
                out.push_str(&input[retained..]);
            }
        }
    }
    out
}

/// Where the Claude Code `compact_boundary` line right before byte `end` starts (blank
/// lines between allowed), or `end` when the line before is not one. **O(line)**.
fn boundary_before(input: &str, end: usize) -> usize {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<JsonStr<'a>>,
        #[serde(borrow, default)]
        subtype: Option<JsonStr<'a>>,
    }
    let before = input[..end].trim_end();
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    match serde_json::from_str::<Kind<'_>>(&before[start..]) {
        Ok(k)
            if opt_str(&k.kind) == Some("system")
                && opt_str(&k.subtype) == Some("compact_boundary") =>
        {
            start
        }
        _ => end,
    }
}

/// A records JSONL summary line: the units as `covers`, the prose as `text`.
fn records_summary(parts: &SummaryParts, tokens: u64) -> String {
    let entry = Entry::new(
        Record::summary(parts.units.iter().map(|u| u.call_id.clone()), tokens),
        Payload::Summary {
            text: Some(parts.prose.clone()),
            units: parts.units.clone(),
        },
    );
    let mut line = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = super::records::write_entry(&mut line, &entry);
    String::from_utf8_lossy(&line).trim_end().to_owned()
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

/// The links of a Claude Code line.
#[derive(Deserialize)]
struct Links<'a> {
    #[serde(borrow, default)]
    uuid: Option<JsonStr<'a>>,
    #[serde(rename = "parentUuid", borrow, default)]
    parent: Option<&'a RawValue>,
}

/// The `parentUuid` chain of a Claude Code rewrite (see the module doc).
struct Chain {
    /// The boundary's and the summary's ids.
    boundary: String,
    summary: String,
    /// The last record of the pinned head (the boundary's `parentUuid`), if a head
    /// of the live history is pinned.
    head: Option<String>,
    /// The last record before the boundary (its `logicalParentUuid`).
    logical: Option<String>,
    /// The ids of the dropped lines.
    dropped: HashSet<String>,
}

impl Chain {
    /// The chain of a rewrite keeping `input[..region.start]` and
    /// `input[region.end..]`. **O(len)**.
    fn new(t: &Transcript, input: &str, head: usize, region: Range<usize>) -> Chain {
        let uuid_of = |line: &str| {
            serde_json::from_str::<Links<'_>>(line)
                .ok()
                .and_then(|l| opt_str(&l.uuid).map(str::to_owned))
        };
        let prefix = &input[..region.start];
        let logical = lines(prefix)
            .filter_map(|(_, s)| uuid_of(&prefix[s]))
            .last();
        let head = (head > t.live_from()).then(|| logical.clone()).flatten();
        let cut = &input[region.clone()];
        let dropped = lines(cut).filter_map(|(_, s)| uuid_of(&cut[s])).collect();
        let key = &input[region];
        Chain {
            boundary: uuid(key, &["compact_boundary"]),
            summary: uuid(key, &["isCompactSummary"]),
            head,
            logical,
            dropped,
        }
    }

    /// The boundary and summary lines, `summary` being the summary record without its
    /// links.
    fn write(
        &self,
        out: &mut String,
        summary: &str,
        tokens: u64,
        neighbour: &str,
        preserved: Option<(String, String)>,
    ) {
        let boundary = claude_code_boundary(
            BoundaryLinks {
                parent: self.head.clone(),
                logical: self.logical.clone(),
                uuid: self.boundary.clone(),
                anchor: self.summary.clone(),
                preserved,
            },
            tokens,
            neighbour,
        );
        out.push_str(&boundary.to_string());
        out.push('\n');
        let mut record: Value =
            serde_json::from_str(summary).unwrap_or_else(|_| Value::String(summary.to_owned()));
        if let Value::Object(map) = &mut record {
            map.insert(
                "parentUuid".to_owned(),
                Value::String(self.boundary.clone()),
            );
            map.insert("uuid".to_owned(), Value::String(self.summary.clone()));
        }
        out.push_str(&record.to_string());
        out.push('\n');
    }

    /// The retained lines, each verbatim except a `parentUuid` that named a dropped
    /// line, which names the summary instead. **O(len)**.
    fn retained(&self, out: &mut String, text: &str) {
        let mut copied = 0;
        for (_, span) in lines(text) {
            let line = &text[span.clone()];
            let Ok(links) = serde_json::from_str::<Links<'_>>(line) else {
                continue;
            };
            let Some(parent) = links.parent else {
                continue;
            };
            let Ok(id) = serde_json::from_str::<&str>(parent.get()) else {
                continue;
            };
            if !self.dropped.contains(id) {
                continue;
            }
            let Some(at) = offset_in(text, parent.get()) else {
                continue;
            };
            out.push_str(&text[copied..at]);
            out.push_str(&Value::String(self.summary.clone()).to_string());
            copied = at + parent.get().len();
        }
        out.push_str(&text[copied..]);
    }
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
pub(crate) fn claude_code_boundary(links: BoundaryLinks, tokens: u64, neighbour: &str) -> Value {
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

/// A compaction written back in the transcript's format.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Rewritten {
    /// The compacted log, in the input's format.
    pub text: String,
    /// First summarized message (end of the pinned head).
    pub head: usize,
    /// First retained message.
    pub cut: usize,
    /// Tokens of the summarized messages.
    pub tokens: u64,
    /// The summarized tool pairs, as the summary's ledger lists them (earlier
    /// summaries' units included).
    pub ledger: Vec<Unit>,
    /// The results without their call the summary lists.
    pub orphans: Vec<Orphan>,
}

/// Compacts `t` (read from `input`): plans once with [`Log::plan`] over the live
/// history's entries, `keep_head` messages of the live history pinned (overriding
/// `window.keep_head`, which counts records; a Codex `compacted` message that opens
/// the live history is pinned too), and writes the result as [`render`] does, without
/// a second tracker (the plan's ends are legal cuts by construction). `Ok(None)` when
/// there is nothing to compact past the head. **O(len)**.
///
/// # Errors
/// [`RewriteError::Deferred`] (in messages) when no legal cut lies in the window;
/// [`RewriteError::Plan`] when the head is still open; [`RewriteError::Tracker`] when
/// the tracker refuses the records; [`RewriteError::InputMismatch`] when `input` is
/// not `t`'s text.
pub fn compact(
    t: &Transcript,
    input: &str,
    window: &Window,
    keep_head: usize,
    summary: &str,
) -> Result<Option<Rewritten>, RewriteError> {
    let planner = Planner::new(t)?;
    let head_message = pin_compacted(t, t.live_from()).saturating_add(keep_head);
    let mut window = window.clone();
    window.keep_head = planner.record_of(head_message);
    let plan = planner.log.plan(&window).map_err(|e| match e {
        PlanError::NoLegalCut(defer) => {
            let report = DeferReport::messages(&defer, planner.log.tracker(), t, &planner.owner);
            RewriteError::Deferred(Box::new(if window.direction == Direction::Forward {
                report.searched_forward()
            } else {
                report
            }))
        }
        other => RewriteError::Plan(other),
    })?;
    if plan.region.is_empty() {
        // A target past the head that the walk back answers with the head's end
        // itself defers, as it does one message later (issue 24).
        let tracker = planner.log.tracker();
        return match super::defer_at_head(tracker, plan.region.start, &window) {
            Some(defer) => Err(RewriteError::Deferred(Box::new(
                DeferReport::messages(&defer, tracker, t, &planner.owner).reaching_only_the_head(),
            ))),
            None => Ok(None),
        };
    }
    let head = t.message_at(&planner.owner, plan.region.start);
    let cut = t.message_at(&planner.owner, plan.region.end);
    check_range(t, input, head, cut)?;
    let parts = planner.parts(&plan, summary);
    Ok(Some(Rewritten {
        text: write(t, input, head, cut, &parts, plan.region_tokens),
        head,
        cut,
        tokens: plan.region_tokens,
        ledger: parts.units,
        orphans: parts.orphans,
    }))
}
