//! OpenAI Chat Completions streaming: `chat.completion.chunk` objects (choice 0 is
//! tracked), `[DONE]`, the usage chunk (`choices: []`), error objects inside chunks
//! and SSE `event: error` (OpenAI-compatible gateways send both).
//!
//! One response is one message, its records bound to the first: `reasoning` /
//! `reasoning_content` deltas make a thinking record, `content` (and `refusal`) a text
//! record, each tool call a `tool_use` record.
//!
//! **Parallel calls** stream as `tool_calls` deltas keyed by `index`, and the
//! protocol lets them interleave, but the tracker has one open record at a time. So
//! one call is *live* (its record open, its argument pieces streamed as deltas) and
//! the others wait, buffered by index with their pieces counted as they come. The live
//! call closes when its arguments form a complete JSON value and another call has
//! started (then the waiting call with the lowest index goes live, its buffered tokens
//! in one delta), or at `finish_reason`, when the waiting calls follow one after
//! another, complete, in index order. Calls that stream one after another (what the
//! API does) are therefore each live as they stream; interleaved ones are emitted in
//! index order as they complete. A piece for a call already closed is an error.
//! Every call is in the tracker before the response ends, and each is pending from
//! its `Opened` on, so no cut after a call is ever legal before its result; while the
//! message streams, its open record forbids every cut after the message's start
//! anyway.
//!
//! Usage (`completion_tokens`, from the usage chunk or a gateway's last chunk) is
//! reported when the response ends (`[DONE]`, or the input's end after a
//! `finish_reason`). Under `finish_reason: "length"` the call that received the last
//! argument piece is left open, flagged truncated.

use serde::Deserialize;

use super::buffer::Frame;
use super::emit::{Emitter, Piece};
use super::{At, Content, ErrorBody, Provider, RawUsage, StreamError, Usage};
use crate::CallId;
use crate::format::json_doc::{JsonStr, opt_str};
use crate::format::openai_chat::ToolCall;

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(borrow, default)]
    error: Option<ErrorBody<'a>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    delta: Option<ChoiceDelta<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<JsonStr<'a>>,
}

#[derive(Deserialize)]
struct ChoiceDelta<'a> {
    #[serde(borrow, default)]
    content: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    refusal: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    reasoning: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    reasoning_content: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCall<'a>>>,
}

/// Where a call of the response is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Slot {
    /// Buffered: not in the tracker yet.
    Waiting,
    /// Its record is open.
    Live,
    /// Its record is closed.
    Closed,
}

/// One call of the response, by its `index`.
struct Call {
    index: u64,
    id: String,
    name: String,
    arguments: String,
    /// Tokens of the pieces buffered while it waited.
    tokens: u64,
    json: JsonEnd,
    slot: Slot,
}

/// Tells, byte by byte, when a JSON text is one complete value (its outer brackets
/// closed). **O(1)** per byte.
#[derive(Default)]
struct JsonEnd {
    depth: u32,
    started: bool,
    complete: bool,
    in_string: bool,
    escaped: bool,
}

impl JsonEnd {
    fn feed(&mut self, text: &str) {
        for &b in text.as_bytes() {
            if self.in_string {
                match (self.escaped, b) {
                    (true, _) => self.escaped = false,
                    (false, b'\\') => self.escaped = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' | b'[' => {
                    self.depth += 1;
                    self.started = true;
                    self.complete = false;
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    self.complete = self.started && self.depth == 0;
                }
                _ => {}
            }
        }
    }
}

/// The response being read.
#[derive(Default)]
pub(crate) struct State {
    finish_reason: Option<String>,
    usage: Option<Usage>,
    calls: Vec<Call>,
    /// The slot of the live call.
    live: Option<usize>,
    /// The slot of the call that received the last argument piece.
    last_piece: Option<usize>,
}

impl Provider for State {
    fn frame(&mut self, frame: &Frame<'_>, out: &mut Emitter) -> Result<(), StreamError> {
        let at = At::of(frame);
        if frame.data.trim() == "[DONE]" {
            if out.responding() {
                self.settle(at, out)?;
                self.end(out, true);
            }
            return Ok(());
        }
        let chunk: Chunk<'_> = serde_json::from_str(frame.data).map_err(|e| at.json(&e))?;
        if chunk.error.is_some() || frame.name == "error" {
            return Err(at.provider_error(chunk.error.as_ref(), "error", frame.data));
        }
        if out.begin_response() {
            *self = State::default();
        }
        for choice in chunk.choices.into_iter().flatten() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                for text in [&delta.reasoning, &delta.reasoning_content] {
                    if let Some(text) = opt_str(text).filter(|t| !t.is_empty()) {
                        self.text(at, out, true, text)?;
                    }
                }
                for text in [&delta.content, &delta.refusal] {
                    if let Some(text) = opt_str(text).filter(|t| !t.is_empty()) {
                        self.text(at, out, false, text)?;
                    }
                }
                for call in delta.tool_calls.into_iter().flatten() {
                    self.call_delta(at, out, call)?;
                }
            }
            if let Some(reason) = opt_str(&choice.finish_reason) {
                self.finish_reason = Some(reason.to_owned());
                self.settle(at, out)?;
            }
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u.usage());
        }
        Ok(())
    }

    /// The end of input: a response whose `finish_reason` came is complete (the
    /// `[DONE]` line is optional); one without is interrupted.
    fn finish(&mut self, out: &mut Emitter) -> Result<(), StreamError> {
        if out.responding() {
            let complete = self.finish_reason.is_some();
            self.end(out, complete);
        }
        Ok(())
    }
}

impl State {
    /// A piece of text or reasoning: into the open record of that kind, or a new one.
    fn text(
        &mut self,
        at: At,
        out: &mut Emitter,
        thinking: bool,
        text: &str,
    ) -> Result<(), StreamError> {
        if !out.continues_text(thinking) {
            if let Some(live) = self.live.take() {
                // Text after a call: the call is done.
                self.calls[live].slot = Slot::Closed;
            }
            out.close();
            out.open_text(at, thinking)?;
        }
        out.piece(at, Piece::Text, text)
    }

    fn call_delta(
        &mut self,
        at: At,
        out: &mut Emitter,
        delta: ToolCall<'_>,
    ) -> Result<(), StreamError> {
        let index = delta.index.unwrap_or(0);
        let slot = match self.calls.iter().position(|c| c.index == index) {
            Some(slot) => slot,
            None => {
                if self.calls.len() >= out.caps().max_calls {
                    return Err(at.too_large(out.caps().max_calls, "calls"));
                }
                self.calls.push(Call {
                    index,
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                    tokens: 0,
                    json: JsonEnd::default(),
                    slot: Slot::Waiting,
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[slot];
        if let Some(id) = opt_str(&delta.id).filter(|id| !id.is_empty()) {
            if call.id.is_empty() {
                call.id = id.to_owned();
            }
        }
        let (name, piece) = match &delta.function {
            Some(f) => (opt_str(&f.name), at.string(f.arguments)?),
            None => (None, None),
        };
        let piece = opt_str(&piece);
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            if call.name.is_empty() {
                call.name = name.to_owned();
            }
        }
        if let Some(piece) = piece.filter(|p| !p.is_empty()) {
            match call.slot {
                Slot::Closed => {
                    return Err(at.malformed(format!(
                        "arguments for tool call {index} continue after the call was complete"
                    )));
                }
                Slot::Live => {
                    call.json.feed(piece);
                    out.piece(at, Piece::Text, piece)?;
                }
                Slot::Waiting => {
                    if call.arguments.len() + piece.len() > out.caps().max_record_bytes {
                        return Err(at.too_large(out.caps().max_record_bytes, "record"));
                    }
                    call.json.feed(piece);
                    call.arguments.push_str(piece);
                    call.tokens = call.tokens.saturating_add(out.count(piece));
                }
            }
            self.last_piece = Some(slot);
        }
        self.advance(at, out, false)
    }

    /// Moves calls on: the live call closes once complete if another waits; with none
    /// live, the lowest waiting index goes live. With `all`, every call is emitted.
    fn advance(&mut self, at: At, out: &mut Emitter, all: bool) -> Result<(), StreamError> {
        loop {
            let waiting = self
                .calls
                .iter()
                .enumerate()
                .filter(|(_, c)| c.slot == Slot::Waiting)
                .min_by_key(|(_, c)| c.index)
                .map(|(i, _)| i);
            match (self.live, waiting) {
                (Some(live), Some(_)) if all || self.calls[live].json.complete => {
                    self.calls[live].slot = Slot::Closed;
                    self.live = None;
                    out.close();
                }
                (None, Some(next)) => self.go_live(at, out, next)?,
                _ => return Ok(()),
            }
        }
    }

    /// Opens the record of call `slot`, with what it buffered.
    fn go_live(&mut self, at: At, out: &mut Emitter, slot: usize) -> Result<(), StreamError> {
        out.close();
        let call = &mut self.calls[slot];
        if call.id.is_empty() {
            return Err(at.malformed(format!("tool call {} has no id", call.index)));
        }
        let id = CallId::from(call.id.as_str());
        out.open_call(
            at,
            out.records() > 0,
            id,
            &call.name,
            (false, false),
            None,
            None,
        )?;
        let buffered = std::mem::take(&mut call.arguments);
        out.counted_piece(at, &buffered, call.tokens)?;
        call.slot = Slot::Live;
        self.live = Some(slot);
        Ok(())
    }

    /// `finish_reason` (or `[DONE]`): every call into the tracker, in index order;
    /// under `length`, the call with the last piece last and left open.
    fn settle(&mut self, at: At, out: &mut Emitter) -> Result<(), StreamError> {
        let length = self.finish_reason.as_deref() == Some("length");
        let cut = self
            .last_piece
            .filter(|&s| length && self.calls[s].slot != Slot::Closed);
        let Some(cut) = cut else {
            self.advance(at, out, true)?;
            if let Some(live) = self.live.take() {
                self.calls[live].slot = Slot::Closed;
            }
            // The last record (a call, or text) is complete.
            out.close();
            return Ok(());
        };
        if self.live == Some(cut) {
            if self.calls.iter().any(|c| c.slot == Slot::Waiting) {
                // Interleaved and cut: it cannot stay open with calls after it.
                if let Some(Content::Call { truncated, .. }) = out.open_content_mut() {
                    *truncated = true;
                }
                self.advance(at, out, true)?;
                if let Some(live) = self.live.take() {
                    self.calls[live].slot = Slot::Closed;
                }
                out.close();
            }
            return Ok(());
        }
        // Emit the others complete, then the cut call, left open.
        self.calls[cut].slot = Slot::Closed;
        self.advance(at, out, true)?;
        if let Some(live) = self.live.take() {
            self.calls[live].slot = Slot::Closed;
        }
        out.close();
        self.go_live(at, out, cut)
    }

    /// The response ends: usage, then the end.
    fn end(&mut self, out: &mut Emitter, complete: bool) {
        if complete {
            if let Some(u) = self.usage.take() {
                out.usage(u);
            }
        }
        let length = self.finish_reason.as_deref() == Some("length");
        out.end(self.finish_reason.take(), complete, length && complete);
    }
}
