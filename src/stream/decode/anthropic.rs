//! Anthropic Messages streaming: `message_start`, `content_block_start` / `_delta` /
//! `_stop`, `message_delta` (stop reason, usage), `message_stop`, `ping`, `error`.
//!
//! One content block is one record, all bound to the first (one message): `text` and
//! `thinking` / `redacted_thinking` are assistant records, `tool_use` a call,
//! `server_tool_use` (and any `*_tool_use` block with an id) a server call answered by
//! the `*_tool_result` block that names it (`tool_use_id`), which is its result record.
//! `message_delta`'s `output_tokens` (the message's total) replaces the estimate;
//! `message_stop` ends the turn. A block still open at `message_stop` (the API sends
//! no `content_block_stop` for a `tool_use` cut off by `max_tokens`) stays open when it
//! is a call, flagged truncated under a length stop.
//!
//! A `fallback` block (a safety classifier refused mid-stream and the API retried on a
//! fallback model within the same response) is a control item, kept where it is
//! ([`Payload::Kept`](crate::compact::Payload::Kept)). The thinking and calls before
//! it were dropped by the API: the client sends no result for such a call. So, as the
//! Anthropic reader reads a finished message (text), each of them is
//! [`Detail::Dropped`](super::Detail::Dropped) before the `fallback` record opens: a
//! call still waiting for its result is withdrawn ([`Event::CallWithdrawn`]), thinking
//! loses its reasoning payload.

use std::collections::HashMap;

use serde::Deserialize;

use super::buffer::Frame;
use super::emit::{Emitter, Piece};
use super::{At, Content, ErrorBody, FALLBACK, Provider, RawUsage, StreamError, Usage};
use crate::CallId;
#[cfg(doc)]
use crate::Event;
use crate::format::anthropic::{BlockKind, RawBlock, is_script_caller, needs_id};
use crate::format::json_doc::{JsonStr, opt_str};

#[derive(Deserialize)]
struct Ev<'a> {
    #[serde(rename = "type", borrow)]
    kind: JsonStr<'a>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    content_block: Option<RawBlock<'a>>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    message: Option<Message>,
    #[serde(borrow, default)]
    error: Option<ErrorBody<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    text: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    partial_json: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    thinking: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    signature: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    stop_reason: Option<JsonStr<'a>>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    usage: Option<RawUsage>,
}

/// The state between events: the open block's index, the message's input usage and
/// stop reason, and what a `fallback` block would drop.
#[derive(Default)]
pub(crate) struct State {
    open_index: Option<u64>,
    /// The open call's `input` at its start (`{}`): its arguments if no delta comes.
    start_input: Option<String>,
    input: Usage,
    stop_reason: Option<String>,
    /// The message's thinking blocks and calls since its start or its last `fallback`
    /// block, in order: what the next `fallback` block drops.
    droppable: Vec<Droppable>,
    /// The calls among them, by id: their slot in `droppable`, to mark one answered
    /// when a result block in the stream names it.
    calls: HashMap<CallId, usize>,
}

/// A record of the message that a `fallback` block would drop.
struct Droppable {
    /// Its index in the response.
    index: usize,
    /// A call's id; `None` for thinking.
    call_id: Option<CallId>,
    /// A call answered in the stream since (a server call's result block): not
    /// pending, so there is nothing to withdraw.
    answered: bool,
}

/// Checks a `fallback` block's documented shape (the Anthropic SDKs'
/// `BetaFallbackBlock`: `from` and `to`, each `{"model": "..."}`, and a `trigger`,
/// which is not read): a block without them is not a fallback the API sends, and
/// dropping the calls before it on its word would lose pending calls. **O(len)**.
fn fallback_shape(block: &RawBlock<'_>) -> Result<(), String> {
    #[derive(Deserialize)]
    struct Hop<'a> {
        #[serde(borrow, default)]
        model: Option<JsonStr<'a>>,
    }
    for (field, raw) in [("from", block.from), ("to", block.to)] {
        let raw = raw.ok_or_else(|| format!("fallback block without `{field}`"))?;
        let hop: Hop<'_> = serde_json::from_str(raw)
            .map_err(|_| format!(r#"fallback block whose `{field}` is not {{"model": "..."}}"#))?;
        if hop.model.is_none() {
            return Err(format!("fallback block whose `{field}` names no model"));
        }
    }
    Ok(())
}

/// Stop reasons that mean the output hit a length limit.
const LENGTH_STOPS: [&str; 2] = ["max_tokens", "model_context_window_exceeded"];

impl Provider for State {
    fn frame(&mut self, frame: &Frame<'_>, out: &mut Emitter) -> Result<(), StreamError> {
        let at = At::of(frame);
        let ev: Ev<'_> = serde_json::from_str(frame.data).map_err(|e| at.json(&e))?;
        match ev.kind.as_str() {
            "message_start" => {
                out.start_response();
                *self = State {
                    input: ev.message.and_then(|m| m.usage).unwrap_or_default().usage(),
                    ..State::default()
                };
            }
            "content_block_start" => {
                let block = ev
                    .content_block
                    .ok_or_else(|| at.malformed("content_block_start without a content_block"))?;
                if !out.responding() {
                    return Err(at.malformed("content_block_start before message_start"));
                }
                if self.open_index.is_some() {
                    // Blocks stream one at a time; one still open ends here.
                    out.close();
                }
                self.start_input = None;
                self.open_index = Some(ev.index.unwrap_or(0));
                self.start(at, block, out)?;
            }
            "content_block_delta" => {
                let delta = ev
                    .delta
                    .ok_or_else(|| at.malformed("content_block_delta without a delta"))?;
                if self.open_index != ev.index.or(Some(0)) || self.open_index.is_none() {
                    return Err(at.malformed(format!(
                        "a delta for block {} while {}",
                        ev.index.unwrap_or(0),
                        match self.open_index {
                            Some(i) => format!("block {i} is open"),
                            None => "no block is open".to_owned(),
                        }
                    )));
                }
                let (piece, text) = match opt_str(&delta.kind) {
                    Some("text_delta") => (Piece::Text, delta.text),
                    Some("input_json_delta") => (Piece::Text, delta.partial_json),
                    Some("thinking_delta") => (Piece::Text, delta.thinking),
                    Some("signature_delta") => (Piece::Signature, delta.signature),
                    // citations_delta and later kinds carry nothing tracked.
                    _ => (Piece::Text, None),
                };
                if let Some(text) = text {
                    out.piece(at, piece, text.as_str())?;
                }
            }
            "content_block_stop" if self.open_index.is_some() => {
                let empty = matches!(
                    out.open_content(),
                    Some(Content::Call { arguments, .. }) if arguments.is_empty()
                );
                if let Some(input) = self.start_input.take().filter(|_| empty) {
                    out.piece(at, Piece::Text, &input)?;
                }
                out.close();
                self.open_index = None;
            }
            "message_delta" => {
                if let Some(reason) = ev.delta.as_ref().and_then(|d| opt_str(&d.stop_reason)) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(u) = ev.usage {
                    out.usage(self.usage(u));
                }
            }
            "message_stop" => {
                let length = self
                    .stop_reason
                    .as_deref()
                    .is_some_and(|r| LENGTH_STOPS.contains(&r));
                out.end(self.stop_reason.take(), true, length);
                self.open_index = None;
            }
            "error" => return Err(at.provider_error(ev.error.as_ref(), "error", "")),
            // ping, and event types added later.
            _ => {}
        }
        Ok(())
    }

    /// The end of input: a message still streaming is interrupted.
    fn finish(&mut self, out: &mut Emitter) -> Result<(), StreamError> {
        if out.responding() {
            out.end(self.stop_reason.take(), false, false);
        }
        Ok(())
    }
}

impl State {
    /// Opens the record a `content_block_start` announces, classified as the
    /// Anthropic reader classifies a message's block.
    fn start(&mut self, at: At, block: RawBlock<'_>, out: &mut Emitter) -> Result<(), StreamError> {
        if block.kind.is_none() {
            return Err(at.malformed("content_block_start with a block without a type"));
        }
        let kind = block.kind();
        let index = out.records();
        let bound = index > 0;
        let (content, initial) = match block.classify() {
            BlockKind::Text => (Content::text(), opt_str(&block.text)),
            BlockKind::Thinking { redacted: false } => {
                let signature = opt_str(&block.signature).filter(|s| !s.is_empty());
                let content = Content::thinking(signature.map(str::to_owned), false);
                self.droppable(index, None);
                (content, opt_str(&block.thinking))
            }
            BlockKind::Thinking { redacted: true } => {
                // Opaque: its data goes back as it came and is counted as its size.
                let data = opt_str(&block.data).unwrap_or_default();
                let content = Content::thinking(Some(data.to_owned()), true);
                self.droppable(index, None);
                return out.open(at, content, bound, out.count(data));
            }
            BlockKind::Call { id, server } => {
                let id = CallId::from(needs_id(id, kind, "an id").map_err(|m| at.malformed(m))?);
                // An input given whole at the start (not `{}`, which deltas replace,
                // or which stands when none come).
                let input = match block.input {
                    Some("{}") => {
                        self.start_input = Some("{}".to_owned());
                        None
                    }
                    input => input,
                };
                let name = opt_str(&block.name).unwrap_or_default();
                self.droppable(index, Some(id.clone()));
                // Programmatic tool calling: the file reader's test (`annotate`).
                let programmatic = !server && block.caller.is_some_and(is_script_caller);
                return out.open_call(at, bound, id, name, (server, programmatic), None, input);
            }
            BlockKind::Result { id, .. } => {
                let id = needs_id(id, kind, "a tool_use_id").map_err(|m| at.malformed(m))?;
                if let Some(slot) = self.calls.remove(id) {
                    self.droppable[slot].answered = true;
                }
                let content = Content::server_result(id, kind);
                (content, block.content)
            }
            BlockKind::Other if kind == FALLBACK => {
                fallback_shape(&block).map_err(|m| at.malformed(m))?;
                self.fallback(out);
                (Content::other(kind), None)
            }
            BlockKind::Compaction | BlockKind::Other => (Content::other(kind), None),
        };
        out.open_with(at, content, bound, initial)
    }

    /// Notes record `index` of the response, thinking or (with its id) a call, as one
    /// a `fallback` block would drop. **O(1)** amortized (plus copying the id).
    fn droppable(&mut self, index: usize, call_id: Option<CallId>) {
        if let Some(id) = &call_id {
            self.calls.insert(id.clone(), self.droppable.len());
        }
        self.droppable.push(Droppable {
            index,
            call_id,
            answered: false,
        });
    }

    /// A `fallback` block starts (no record is open: the block before it closed):
    /// every thinking block and call before it was dropped by the API. Each is
    /// [dropped](Emitter::dropped), in order: a call not answered in the stream is
    /// withdrawn. **O(k)** for the `k` records dropped.
    fn fallback(&mut self, out: &mut Emitter) {
        self.calls.clear();
        for d in std::mem::take(&mut self.droppable) {
            if !d.answered {
                out.dropped(d.index, d.call_id);
            }
        }
    }

    /// The message's usage: input from `message_start`, output from `message_delta`.
    fn usage(&self, u: RawUsage) -> Usage {
        let usage = u.usage();
        Usage {
            input_tokens: usage.input_tokens.or(self.input.input_tokens),
            cached_tokens: usage.cached_tokens.or(self.input.cached_tokens),
            ..usage
        }
    }
}
