//! Writing a compacted transcript back in its own format: the pinned head verbatim,
//! one summary message in the provider's shape, then the retained messages exactly as
//! they were (byte for byte).
//!
//! [`compact`] plans once, on the compaction layer's [`Log`] over the live history
//! (its tracker is the only one built), and writes the summary's ledger with the one
//! renderer every summary uses, [`summary_text`].

use serde_json::json;

use super::{Block, ByteEstimate, Format, TokenCounter, Transcript};
use crate::AppendError;
use crate::compact::{Entry, Log, PlanError, Unit, Window, summary_text};

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
    /// No legal cut in the window, or the head is still open: wait for the turn
    /// boundary.
    #[error("{0}")]
    Plan(#[from] PlanError),
    /// The head or the cut is not a message boundary the transcript allows: it would
    /// split a tool call from its result, or a message a provider binds to the one
    /// before it.
    #[error(
        "message {at} is not a legal place to {what}: it would split a tool call from its result or a bound pair"
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

/// The summary units of the tool pairs of messages `range`, in call order: each call
/// with its tool name and arguments verbatim, and the first line of its result when
/// the range holds one. A call id that comes back (OpenAI Chat) pairs with the latest
/// call. **O(blocks)**.
pub fn ledger(t: &Transcript, range: std::ops::Range<usize>) -> Vec<Unit> {
    let mut units: Vec<Unit> = Vec::new();
    for m in t.messages.get(range).unwrap_or(&[]) {
        for (block, _) in &m.blocks {
            match block {
                Block::Call {
                    id,
                    name,
                    arguments,
                } => units.push(Unit {
                    tool: (!name.is_empty()).then(|| name.clone()),
                    arguments: Some(arguments.clone()),
                    ..Unit::bare(id.clone())
                }),
                Block::Result { id, first_line } => {
                    if let Some(u) = units
                        .iter_mut()
                        .rev()
                        .find(|u| &u.call_id == id && u.first_line.is_none())
                    {
                        u.first_line = Some(first_line.clone());
                    }
                }
                _ => {}
            }
        }
    }
    units
}

/// The summary message as one JSON value (one line for JSONL formats), in the shape
/// of `format`: a user message for the chat formats, a `response_item` user message
/// for Codex, an `isCompactSummary` user record for Claude Code, a user record for
/// records JSONL. `tokens` is used by records JSONL only. **O(len)**.
pub fn summary_message(format: Format, text: &str, tokens: u64) -> String {
    summary_value(format, text, tokens).to_string()
}

fn summary_value(format: Format, text: &str, tokens: u64) -> serde_json::Value {
    match format {
        Format::Records => json!({"kind": "user", "tokens": tokens}),
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
            "type": "user", "isCompactSummary": true,
            "message": {"role": "user", "content": text}
        }),
        Format::CodexRollout => json!({
            "type": "response_item",
            "payload": {
                "type": "message", "role": "user",
                "content": [{"type": "input_text", "text": text}]
            }
        }),
    }
}

/// The fields a JSONL line of `format` carries besides its message, copied from the
/// first summarized line so the summary line looks like its neighbours: `timestamp`
/// (Codex, Claude Code) and `sessionId`, `cwd`, `version`, `isSidechain` (Claude Code:
/// a subagent's summary stays in the subagent's conversation).
pub(crate) fn line_context(
    format: Format,
    line: &str,
) -> serde_json::Map<String, serde_json::Value> {
    let keys: &[&str] = match format {
        Format::CodexRollout => &["timestamp"],
        Format::ClaudeCode => &["timestamp", "sessionId", "cwd", "version", "isSidechain"],
        _ => &[],
    };
    let mut out = serde_json::Map::new();
    if keys.is_empty() {
        return out;
    }
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str(line) {
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
/// the ledger of every tool pair in `head..cut`, then messages `cut..` byte-identical.
/// `head` and `cut` are message indices; both must be legal cuts
/// ([`legal_message_cuts`](Transcript::legal_message_cuts), which this checks by
/// building one tracker), and `head <= cut`. For JSONL, lines that are not messages are
/// kept up to the first summarized message and from the cut on, and dropped in
/// between; for JSON documents, the text around the message array is kept.
/// **O(len)**.
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
    let legal = t.legal_message_cuts()?;
    let is_legal = |m: usize| m < t.live_from() || legal.binary_search(&m).is_ok();
    if !is_legal(head) {
        return Err(RewriteError::NotLegal {
            at: head,
            what: Boundary::HeadEnd,
        });
    }
    if !is_legal(cut) {
        return Err(RewriteError::NotLegal {
            at: cut,
            what: Boundary::Cut,
        });
    }
    Ok(write(t, input, head, cut, summary))
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
/// be legal. **O(len)**.
fn write(t: &Transcript, input: &str, head: usize, cut: usize, summary: &str) -> String {
    let len = t.messages.len();
    let text = summary_text(summary, &ledger(t, head..cut));
    let span = |m: usize| t.messages[m].spans.first().map_or(0..0, Clone::clone);
    let mut value = summary_value(t.format, &text, ByteEstimate.count(&text));
    // The neighbour whose context the summary line takes: the first summarized (or
    // retained) message, or the last one.
    let neighbour = t.messages.get(head).or(t.messages.last());
    if let (Some(first), serde_json::Value::Object(map)) = (neighbour, &mut value) {
        if t.array_span.is_none() {
            let line = &input[first.spans.first().map_or(0..0, Clone::clone)];
            for (k, v) in line_context(t.format, line) {
                map.entry(k).or_insert(v);
            }
        }
    }
    let summary = value.to_string();
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
            // lines that are not messages up to there, such as a compaction boundary).
            let prefix_end = if head < len {
                span(head).start
            } else {
                input.len()
            };
            if prefix_end > 0 && !input[..prefix_end].ends_with('\n') {
                // A last line without its newline: end it before the summary.
                out.push_str(&input[..prefix_end]);
                out.push('\n');
            } else {
                out.push_str(&input[..prefix_end]);
            }
            out.push_str(&summary);
            out.push('\n');
            if cut < len {
                out.push_str(&input[span(cut).start..]);
            }
        }
    }
    out
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
    /// The summarized tool pairs, as the summary's ledger lists them.
    pub ledger: Vec<Unit>,
}

/// Compacts `t` (read from `input`): plans once with [`Log::plan`] over the live
/// history's records, `keep_head` messages of the live history pinned (overriding
/// `window.keep_head`, which counts records), and writes the result as [`render`]
/// does, without a second tracker (the plan's ends are legal cuts by construction).
/// `Ok(None)` when there is nothing to compact past the head. **O(len)**.
///
/// # Errors
/// [`RewriteError::Plan`] when the plan defers; [`RewriteError::Tracker`] when the
/// tracker refuses the records; [`RewriteError::InputMismatch`] when `input` is not
/// `t`'s text.
pub fn compact(
    t: &Transcript,
    input: &str,
    window: &Window,
    keep_head: usize,
    summary: &str,
) -> Result<Option<Rewritten>, RewriteError> {
    let (records, owner) = t.records(t.live_from());
    let log = Log::from_entries(records.into_iter().map(Entry::from))?;
    let head_message = t.live_from().saturating_add(keep_head);
    let mut window = window.clone();
    window.keep_head = owner.partition_point(|&m| m < head_message);
    let plan = log.plan(&window)?;
    if plan.region.is_empty() {
        return Ok(None);
    }
    let head = t.message_at(&owner, plan.region.start);
    let cut = t.message_at(&owner, plan.region.end);
    check_range(t, input, head, cut)?;
    Ok(Some(Rewritten {
        text: write(t, input, head, cut, summary),
        head,
        cut,
        tokens: plan.region_tokens,
        ledger: ledger(t, head..cut),
    }))
}
