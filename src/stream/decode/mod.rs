//! Live provider streams decoded into tracker [`Event`]s, sans-IO: push the bytes of a
//! streaming response as they arrive, in any chunk split, and pull decoded items
//! (the shape of tokio-util's codecs: `Ok(None)` means "push more").
//!
//! ```text
//!   HTTP body bytes ──push──▶ Decoder ──next──▶ Decoded { event, detail }
//!                              │ framing: SSE / JSON array / JSON lines
//!                              │ provider events ─▶ records: open, delta*, close
//!                              │ tokens counted per delta, replaced by usage
//!                              ▼
//!                        Feed::feed(&decoded) into a Tracker or a compact::Log
//! ```
//!
//! | [`StreamFormat`] | provider stream |
//! |---|---|
//! | `anthropic-sse` | Anthropic Messages (`message_start`, `content_block_*`, `message_delta`, `message_stop`, `ping`, `error`) |
//! | `openai-chat-stream` | OpenAI Chat Completions chunks (`tool_calls` deltas by `index`, `finish_reason`, the usage chunk, `[DONE]`) |
//! | `openai-responses-stream` | OpenAI Responses events (`response.output_item.added` / `done`, argument and text deltas, `response.completed` / `incomplete` / `failed`, `error`) |
//! | `gemini-stream` | Gemini `streamGenerateContent` (SSE, a JSON array, or one object per line; `functionCall` with `args` or `partialArgs`, `thoughtSignature`, `usageMetadata`) |
//!
//! Each streamed content block (or Responses output item, or Gemini part run) becomes
//! one record: [`Event::Opened`] when it starts (a call's id and name are known then),
//! [`Event::Delta`] per piece of text or arguments (counted by the [`TokenCounter`] as
//! it arrives), [`Event::Closed`] when it ends, with the assembled [`Content`] (text,
//! thinking text and signature, a call's name and arguments) in the item's
//! [`Detail`]. The provider's usage replaces the estimate ([`Event::UsageReported`]);
//! [`Event::TurnEnded`] ends a response that completed with no record left open.
//! The full mapping per provider, the interrupted cases and the caps:
//! `docs/streams.md`.
//!
//! ```
//! use cutpoint::compact::Log;
//! use cutpoint::stream::decode::{Decoder, Feed, StreamFormat};
//!
//! let body = concat!(
//!     "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
//!     "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"ls\",\"input\":{}}}\n\n",
//!     "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"dir\\\":\"}}\n\n",
//!     "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"/tmp\\\"}\"}}\n\n",
//!     "data: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
//!     "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":21}}\n\n",
//!     "data: {\"type\":\"message_stop\"}\n\n",
//! );
//! let mut log = Log::new();
//! let mut decoder = Decoder::new(StreamFormat::AnthropicSse);
//! for chunk in body.as_bytes().chunks(7) {
//!     decoder.push(chunk);
//!     while let Some(item) = decoder.next()? {
//!         log.feed(&item)?;
//!     }
//! }
//! decoder.finish();
//! while let Some(item) = decoder.next()? {
//!     log.feed(&item)?;
//! }
//! assert_eq!(log.tracker().pending_count(), 1); // the call waits for its result
//! assert_eq!(log.tracker().total_tokens(), 21); // the usage replaced the estimate
//! assert_eq!(
//!     log.entries()[0].payload,
//!     cutpoint::compact::Payload::Call { name: Some("ls".into()), arguments: Some(r#"{"dir":"/tmp"}"#.into()) }
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod anthropic;
mod buffer;
mod emit;
mod feed;
mod frames;
mod gemini;
mod openai_chat;
mod openai_responses;
mod sse;

use std::fmt;

pub use feed::Feed;

use serde_json::value::RawValue;

use crate::compact::{Payload, ResultStatus};
use crate::format::json_doc::{JsonStr, opt_str, string_or_json};
use crate::format::{ByteEstimate, TokenCounter};
use crate::{CallId, Event};
use emit::Emitter;
use frames::Frames;

/// The provider streams the [`Decoder`] reads. Non-exhaustive: later versions add more.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum StreamFormat {
    /// Anthropic Messages streaming (`stream: true`).
    AnthropicSse,
    /// OpenAI Chat Completions streaming (`stream: true`), and compatible gateways.
    OpenAiChatStream,
    /// OpenAI Responses streaming (`stream: true`).
    OpenAiResponsesStream,
    /// Google Gemini `streamGenerateContent` (with or without `alt=sse`).
    GeminiStream,
}

impl StreamFormat {
    /// Every stream format, in the order the CLI lists them.
    pub const ALL: [StreamFormat; 4] = [
        StreamFormat::AnthropicSse,
        StreamFormat::OpenAiChatStream,
        StreamFormat::OpenAiResponsesStream,
        StreamFormat::GeminiStream,
    ];

    /// The name the CLI uses (`cutpoint watch --format NAME`). **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            StreamFormat::AnthropicSse => "anthropic-sse",
            StreamFormat::OpenAiChatStream => "openai-chat-stream",
            StreamFormat::OpenAiResponsesStream => "openai-responses-stream",
            StreamFormat::GeminiStream => "gemini-stream",
        }
    }

    /// The format named `name` (as [`StreamFormat::name`] spells it). **O(1)**.
    pub fn from_name(name: &str) -> Option<StreamFormat> {
        StreamFormat::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl fmt::Display for StreamFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How much a [`Decoder`] may buffer. Past a cap it stops with
/// [`StreamError::TooLarge`] instead of growing: hostile bytes cost at most these.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Caps {
    /// Bytes of one provider event: an SSE event's data (with the line being read),
    /// or one JSON object of the JSON framings. Default 16 MiB (a Responses
    /// `response.completed` event repeats the whole response, encrypted reasoning
    /// included).
    pub max_event_bytes: usize,
    /// Bytes of one record's assembled content (text, thinking, arguments). Default
    /// 64 MiB.
    pub max_record_bytes: usize,
    /// OpenAI Chat tool calls of one response (each buffered by `index`), and the
    /// depth of a Gemini `partialArgs` path. Default 1,024.
    pub max_calls: usize,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            max_event_bytes: 16 << 20,
            max_record_bytes: 64 << 20,
            max_calls: 1024,
        }
    }
}

/// Why a stream could not be decoded, or what error the provider streamed. Every
/// variant names the event (1-based, in stream order) and the byte offset it started
/// at. After an error the decoder is done: it yields nothing more.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StreamError {
    /// The bytes are not a stream in any of the framings (not UTF-8, a JSON array
    /// broken between its elements, ...).
    #[error("event {event} (byte {offset}): {message}")]
    Framing {
        /// The event being read.
        event: u64,
        /// The offending byte.
        offset: u64,
        /// What is wrong.
        message: String,
    },
    /// One event, or one record's content, passes a [`Caps`] value.
    #[error("event {event} (byte {offset}): the {what} passes the cap of {cap} bytes")]
    TooLarge {
        /// The event being read.
        event: u64,
        /// Where it starts.
        offset: u64,
        /// The cap.
        cap: usize,
        /// `event`, `record`, `calls` (for [`Caps::max_calls`]).
        what: &'static str,
    },
    /// An event that is not what the provider sends: not JSON, or not the shape its
    /// type has, or out of place (a delta for a block that is not open).
    #[error("event {event} (byte {offset}): {message}")]
    Malformed {
        /// The event.
        event: u64,
        /// Where it starts.
        offset: u64,
        /// What is wrong.
        message: String,
    },
    /// The provider streamed an error (Anthropic `error`, an OpenAI Chat chunk with an
    /// `error` object or an SSE `event: error`, Responses `error` / `response.failed`,
    /// a Gemini error object). Records stay as they were: a call left open is still
    /// open (see [`Feed::abort_open`]).
    #[error("event {event} (byte {offset}): the provider reported an error: {kind}: {message}")]
    Provider {
        /// The event.
        event: u64,
        /// Where it starts.
        offset: u64,
        /// The error's type or code, as the provider spelled it.
        kind: String,
        /// Its message.
        message: String,
    },
    /// The input ended inside an event.
    #[error("event {event} (byte {offset}): the input ended inside this event")]
    Truncated {
        /// The unfinished event.
        event: u64,
        /// Where it starts.
        offset: u64,
    },
}

impl StreamError {
    /// The event the error names (1-based). **O(1)**.
    pub fn event(&self) -> u64 {
        self.place().0
    }

    /// The byte offset the error names. **O(1)**.
    pub fn offset(&self) -> u64 {
        self.place().1
    }

    /// The event and byte offset every variant names. **O(1)**.
    fn place(&self) -> (u64, u64) {
        match self {
            StreamError::Framing { event, offset, .. }
            | StreamError::TooLarge { event, offset, .. }
            | StreamError::Malformed { event, offset, .. }
            | StreamError::Provider { event, offset, .. }
            | StreamError::Truncated { event, offset } => (*event, *offset),
        }
    }
}

/// What a streamed record says, assembled from its deltas.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Content {
    /// Output text.
    Text {
        /// The text so far.
        text: String,
    },
    /// Thinking or reasoning: Anthropic `thinking` / `redacted_thinking`, a Responses
    /// `reasoning` item (its summary text), Chat `reasoning` deltas, Gemini thought
    /// parts.
    Thinking {
        /// The thinking (or summary) text.
        text: String,
        /// The signature that must go back with it: Anthropic `signature`, the opaque
        /// `data` of redacted thinking, Responses `encrypted_content`, a Gemini
        /// `thoughtSignature`.
        signature: Option<String>,
        /// Anthropic `redacted_thinking`.
        redacted: bool,
    },
    /// A tool call: a `tool_use` record.
    Call {
        /// Its id (Gemini calls without one get `NAME#R.K`: response `R` of the
        /// stream, record `K` of the response).
        id: CallId,
        /// The tool's name.
        name: String,
        /// The arguments' JSON text as streamed so far (Gemini `partialArgs` are
        /// assembled into one object).
        arguments: String,
        /// A call the provider runs itself (Anthropic `server_tool_use`), answered by
        /// a [`ServerResult`](Content::ServerResult) in the same stream.
        server: bool,
        /// A Gemini `thoughtSignature` carried by the call's part.
        signature: Option<String>,
        /// The response ended by a length limit (`max_tokens`, `length`,
        /// `max_output_tokens`, `MAX_TOKENS`) while the arguments streamed: they are
        /// cut off.
        truncated: bool,
        /// An Anthropic call a code-execution script made (its `caller` names a
        /// code-execution tool: programmatic tool calling). The script waits on its
        /// answer, so the call is [`Payload::Kept`]: no compaction covers it or the
        /// answer bound to it, as the file reader keeps the turn a script waits on.
        programmatic: bool,
    },
    /// The result of a server call, streamed by the provider (Anthropic
    /// `*_tool_result` blocks): a `tool_result` record.
    ServerResult {
        /// The call it answers.
        id: CallId,
        /// The block's type (`bash_code_execution_tool_result`, ...).
        kind: String,
        /// Its content's JSON text.
        content: String,
    },
    /// Any other block or item (Responses `web_search_call`, `tool_search_call`, ...),
    /// by its type.
    Other {
        /// The block's or item's type.
        kind: String,
        /// The tools it loads: a Responses `tool_search_output` that the server ran
        /// (no `call_id`), by the `name` of each of its `tools`, as the file reader
        /// reads them. Empty for every other item.
        loads: Vec<String>,
    },
}

impl Content {
    /// Text, none of it yet.
    pub(crate) fn text() -> Content {
        Content::Text {
            text: String::new(),
        }
    }

    /// Thinking, none of its text yet.
    pub(crate) fn thinking(signature: Option<String>, redacted: bool) -> Content {
        Content::Thinking {
            text: String::new(),
            signature,
            redacted,
        }
    }

    /// A server call's result, none of its content yet.
    pub(crate) fn server_result(id: &str, kind: &str) -> Content {
        Content::ServerResult {
            id: CallId::from(id),
            kind: kind.to_owned(),
            content: String::new(),
        }
    }

    /// Another block or item, by its type.
    pub(crate) fn other(kind: &str) -> Content {
        Content::Other {
            kind: kind.to_owned(),
            loads: Vec::new(),
        }
    }

    /// The record kind's name this content is tracked as: `tool_use`, `tool_result` or
    /// `assistant`. **O(1)**.
    pub fn record_kind(&self) -> &'static str {
        match self {
            Content::Call { .. } => "tool_use",
            Content::ServerResult { .. } => "tool_result",
            _ => "assistant",
        }
    }

    /// The call id of a call or server result. **O(1)**.
    pub fn call_id(&self) -> Option<&CallId> {
        match self {
            Content::Call { id, .. } | Content::ServerResult { id, .. } => Some(id),
            _ => None,
        }
    }

    /// The payload a [`compact::Log`](crate::compact::Log) keeps for the record: a
    /// call's name and arguments, a server result's status and content
    /// ([`Payload::Kept`] when it loaded a tool: no compaction covers it), thinking as
    /// [`Payload::Reasoning`] (signed when it carries a signature or is redacted), so
    /// the compaction strategies know it; an Anthropic `fallback` block
    /// [`Payload::Kept`] (a control item, pinned where it is, as the Anthropic reader
    /// keeps it), and so is a programmatic call; nothing for text. **O(len)** (the
    /// text is copied).
    pub fn payload(&self) -> Payload {
        match self {
            Content::Call {
                programmatic: true, ..
            } => Payload::Kept,
            Content::Call {
                name, arguments, ..
            } => Payload::Call {
                name: Some(name.clone()),
                arguments: Some(arguments.clone()),
            },
            // A result that loaded a tool: kept where it is, as the file readers keep
            // it (the tool manifest stays what it was).
            Content::ServerResult { kind, content, .. } if loads_tools(kind, content) => {
                Payload::Kept
            }
            Content::Other { loads, .. } if !loads.is_empty() => Payload::Kept,
            Content::ServerResult { content, .. } => {
                #[derive(serde::Deserialize)]
                struct Typed<'a> {
                    #[serde(rename = "type", borrow, default)]
                    kind: Option<std::borrow::Cow<'a, str>>,
                }
                let failed = serde_json::from_str::<Typed<'_>>(content)
                    .ok()
                    .and_then(|t| t.kind)
                    .is_some_and(|k| k.ends_with("error"));
                Payload::Result {
                    status: Some(if failed {
                        ResultStatus::Error
                    } else {
                        ResultStatus::Ok
                    }),
                    content: Some(content.clone()),
                }
            }
            Content::Thinking {
                signature,
                redacted,
                ..
            } => Payload::Reasoning {
                signed: signature.is_some() || *redacted,
            },
            // An Anthropic `fallback` block: a control item, kept where it is, as the
            // Anthropic reader keeps it (`Block::Control`).
            Content::Other { kind, .. } if kind == FALLBACK => Payload::Kept,
            _ => Payload::None,
        }
    }
}

/// The type of an Anthropic `fallback` block: the response fell back to another model
/// mid-stream, and the thinking and calls before it were dropped.
pub(crate) const FALLBACK: &str = "fallback";

/// Whether a streamed server result (its block or item type, its content's JSON
/// text) loads a tool, read as the file readers read it: an Anthropic result holding
/// a `tool_reference` (`format::anthropic::tool_references`), a Responses
/// `tool_search_output` naming a tool in its `tools`
/// (`format::openai_responses::tool_names`). **O(content)**, and a substring search
/// only for a result that can load nothing.
fn loads_tools(kind: &str, content: &str) -> bool {
    let search = kind == "tool_search_output";
    if !search && !content.contains("tool_reference") {
        return false;
    }
    let Ok(value) = serde_json::from_str::<serde_json::Value>(content) else {
        return false;
    };
    if search {
        return value.as_array().is_some_and(|tools| {
            crate::format::openai_responses::tool_names(tools)
                .next()
                .is_some()
        });
    }
    let mut names = Vec::new();
    crate::format::anthropic::tool_references(&value, 0, &mut names);
    !names.is_empty()
}

/// The provider's usage report for a response, as far as it gives each number.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens of the request (Anthropic `input_tokens`, OpenAI `prompt_tokens` /
    /// `input_tokens`, Gemini `promptTokenCount`).
    pub input_tokens: Option<u64>,
    /// Tokens of the response, reasoning included (Anthropic `output_tokens`, OpenAI
    /// `completion_tokens` / `output_tokens`, Gemini `candidatesTokenCount` plus
    /// `thoughtsTokenCount`).
    pub output_tokens: Option<u64>,
    /// Of the output, reasoning or thinking tokens, when reported.
    pub reasoning_tokens: Option<u64>,
    /// Of the input, tokens read from the provider's cache, when reported.
    pub cached_tokens: Option<u64>,
}

/// How a response ended.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Ending {
    /// The stop or finish reason as the provider spelled it (`tool_use`, `end_turn`,
    /// `tool_calls`, `length`, `completed`, `STOP`, ...), when it gave one.
    pub stop_reason: Option<String>,
    /// Whether the provider said the response ended. `false`: the input ended first
    /// (an interrupted stream).
    pub complete: bool,
    /// The record left open: a call whose arguments were cut off (by a length limit,
    /// then flagged [`truncated`](Content::Call::truncated), or by the input's end),
    /// or any record when the input ended inside it. Its content as far as it came.
    /// No cut after it is legal until it is closed ([`Feed::abort_open`]).
    pub left_open: Option<Content>,
}

/// What a decoded item says beyond its event.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Detail {
    /// Nothing more (a delta).
    None,
    /// With [`Event::Opened`]: what the record is, so far (a call's id and name).
    Opened(Content),
    /// With [`Event::Closed`]: the record's complete content.
    Closed(Content),
    /// The provider's usage. With [`Event::UsageReported`] (the response's last
    /// record takes the output tokens not already counted in the response's earlier
    /// records); without an event when the response has no record.
    Usage(Usage),
    /// The response ended. With [`Event::TurnEnded`] when it completed with no record
    /// left open; without an event otherwise.
    Ended(Ending),
    /// A record of the current response that the provider dropped: an Anthropic
    /// response fell back to another model mid-stream (a `fallback` block starts), and
    /// its thinking and calls before that block were dropped by the API, as the
    /// Anthropic reader reads them from a file (as text). With
    /// [`Event::CallWithdrawn`] for a call still waiting for its result (no result
    /// will come: the tracker stops waiting); without an event for thinking (a
    /// [`compact::Log`](crate::compact::Log) fed it forgets the record's
    /// [`Payload::Reasoning`]). The dropped records come in log order, before the
    /// `fallback` block's own record opens.
    Dropped {
        /// Records of the response after it so far: it is the log's record `len - 1 -
        /// records_after` when the response's records were fed as they came.
        records_after: usize,
        /// The withdrawn call's id; `None` for thinking.
        call_id: Option<CallId>,
    },
}

/// One decoded item: the event for the tracker (if any) and what it says.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Decoded {
    /// The event to hand the tracker ([`Feed::feed`] does).
    pub event: Option<Event>,
    /// What the item says.
    pub detail: Detail,
}

/// The per-provider state machine behind a [`Decoder`]: what one provider's events
/// mean, said to the [`Emitter`] that makes the items.
trait Provider: Send + Sync {
    /// Reads one event (frame).
    fn frame(&mut self, frame: &buffer::Frame<'_>, out: &mut Emitter) -> Result<(), StreamError>;

    /// The end of input: a response still streaming ends as interrupted.
    fn finish(&mut self, out: &mut Emitter) -> Result<(), StreamError>;

    /// The stream's JSON array was closed (its `]` read). Only Gemini streams a
    /// response as an array, so only its end means anything.
    fn end_of_array(&mut self, _out: &mut Emitter) {}
}

/// A sans-IO decoder of one provider stream: [`push`](Decoder::push) bytes as they
/// arrive, in any split, and pull [`Decoded`] items with [`next`](Decoder::next)
/// until it answers `Ok(None)`; at the end of input call
/// [`finish`](Decoder::finish) and pull the rest. The items are the same whatever
/// the chunk split.
///
/// Memory: the bytes of the event being read (at most [`Caps::max_event_bytes`]), the
/// content of the open record (at most [`Caps::max_record_bytes`]; OpenAI Chat calls
/// waiting behind it, at most [`Caps::max_calls`]), the items not pulled yet, and for
/// an Anthropic response the position (and a call's id) of each of its thinking
/// blocks and calls so far, which a `fallback` block would drop ([`Detail::Dropped`]):
/// a few words per block, fewer than the block's own bytes.
pub struct Decoder {
    format: StreamFormat,
    frames: Frames,
    state: Box<dyn Provider>,
    out: Emitter,
    /// An error found while items were still queued: returned after them.
    error: Option<StreamError>,
    failed: bool,
    finalized: bool,
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("format", &self.format)
            .field("offset", &self.frames.offset())
            .field("events", &self.frames.frames())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Decoder {
    /// A decoder for `format`, counting tokens with [`ByteEstimate`] under the default
    /// [`Caps`]. **O(1)**.
    pub fn new(format: StreamFormat) -> Self {
        let caps = Caps::default();
        Decoder {
            format,
            frames: Frames::new(caps.max_event_bytes),
            state: match format {
                StreamFormat::AnthropicSse => Box::<anthropic::State>::default(),
                StreamFormat::OpenAiChatStream => Box::<openai_chat::State>::default(),
                StreamFormat::OpenAiResponsesStream => Box::<openai_responses::State>::default(),
                StreamFormat::GeminiStream => Box::<gemini::State>::default(),
            },
            out: Emitter::new(Box::new(ByteEstimate), caps),
            error: None,
            failed: false,
            finalized: false,
        }
    }

    /// The same decoder counting tokens with `counter`. Call before pushing bytes.
    /// **O(1)**.
    #[must_use]
    pub fn with_counter(mut self, counter: impl TokenCounter + Send + Sync + 'static) -> Self {
        self.out.set_counter(Box::new(counter));
        self
    }

    /// The same decoder under `caps`. Call before pushing bytes. **O(1)**.
    #[must_use]
    pub fn with_caps(mut self, caps: Caps) -> Self {
        self.frames = Frames::new(caps.max_event_bytes);
        self.out.set_caps(caps);
        self
    }

    /// The format it decodes. **O(1)**.
    pub fn format(&self) -> StreamFormat {
        self.format
    }

    /// Takes the next bytes of the stream. Bytes pushed after [`finish`](Decoder::finish)
    /// or an error are ignored. **O(len)** plus the unconsumed bytes of the event
    /// being read (moved to the buffer's front); pull items after each push.
    pub fn push(&mut self, bytes: &[u8]) {
        if !self.failed {
            self.frames.push(bytes);
        }
    }

    /// Marks the end of input: a last event without its final blank line is complete,
    /// and a response still in progress ends as interrupted ([`Ending::complete`]
    /// `false`). **O(1)**.
    pub fn finish(&mut self) {
        self.frames.finish();
    }

    /// The next decoded item; `Ok(None)` when more bytes are needed (or, after
    /// [`finish`](Decoder::finish), when the stream is done). **O(bytes of the events
    /// it reads)**: each byte is framed once and each event parsed once.
    ///
    /// # Errors
    /// A [`StreamError`] naming the event and byte offset; items decoded before it
    /// come first. After an error, `Ok(None)` for ever.
    #[expect(
        clippy::should_implement_trait,
        reason = "a fallible pull with `Ok(None)` for \"push more\", as tokio-util's codecs"
    )]
    pub fn next(&mut self) -> Result<Option<Decoded>, StreamError> {
        loop {
            if let Some(item) = self.out.pop() {
                return Ok(Some(item));
            }
            if let Some(e) = self.error.take() {
                self.failed = true;
                return Err(e);
            }
            if self.failed || self.finalized {
                return Ok(None);
            }
            let read = match self.frames.next() {
                Err(e) => Err(e),
                Ok(None) => Ok(None),
                // An SSE event whose last line the input ended inside, and whose data
                // is JSON cut short there: the stream was cut, as a JSON framing's
                // unfinished element is, not a malformed event.
                Ok(Some(frame)) if frame.unterminated && cut_json(frame.data) => {
                    Err(StreamError::Truncated {
                        event: frame.number,
                        offset: frame.offset,
                    })
                }
                Ok(Some(frame)) => Ok(Some(self.state.frame(&frame, &mut self.out))),
            };
            if self.frames.array_closed() && !matches!(read, Ok(Some(Err(_)))) {
                // The array's `]`: the response is complete, whether or not bytes after
                // it (an error of their own) came in the same chunk, so a split never
                // changes what is decoded.
                self.state.end_of_array(&mut self.out);
            }
            let result = match read {
                Err(e) => Err(e),
                Ok(Some(handled)) => handled,
                Ok(None) if self.frames.at_eof() => {
                    self.finalized = true;
                    let at = (self.frames.frames() + 1, self.frames.offset());
                    self.state.finish(&mut self.out).map_err(|mut e| {
                        if let StreamError::Malformed { event, offset, .. } = &mut e {
                            (*event, *offset) = at;
                        }
                        e
                    })
                }
                Ok(None) if self.out.is_empty() => return Ok(None),
                Ok(None) => Ok(()),
            };
            if let Err(e) = result {
                self.error = Some(e);
            }
        }
    }

    /// The open record's content as far as it came (a call cut off, when the stream
    /// failed inside it). **O(1)**.
    pub fn open_content(&self) -> Option<&Content> {
        self.out.open_content()
    }

    /// Bytes of the stream consumed so far. **O(1)**.
    pub fn offset(&self) -> u64 {
        self.frames.offset()
    }

    /// Provider events (frames) read so far. **O(1)**.
    pub fn events(&self) -> u64 {
        self.frames.frames()
    }

    /// Bytes the decoder holds in its input buffer now (at most one event's worth
    /// beyond the last push once the items are pulled). **O(1)**.
    pub fn buffered(&self) -> usize {
        self.frames.held()
    }
}

/// Decodes a whole stream held in memory: every item, and the error that stopped it,
/// if any. **O(len)**.
pub fn decode_all(format: StreamFormat, bytes: &[u8]) -> (Vec<Decoded>, Option<StreamError>) {
    let mut decoder = Decoder::new(format);
    decoder.push(bytes);
    decoder.finish();
    let mut items = Vec::new();
    loop {
        match decoder.next() {
            Ok(Some(item)) => items.push(item),
            Ok(None) => return (items, None),
            Err(e) => return (items, Some(e)),
        }
    }
}

/// Where a provider handler stands: the frame it reads, for its errors.
#[derive(Clone, Copy)]
pub(crate) struct At {
    pub(crate) event: u64,
    pub(crate) offset: u64,
}

impl At {
    pub(crate) fn of(frame: &buffer::Frame<'_>) -> At {
        At {
            event: frame.number,
            offset: frame.offset,
        }
    }

    /// A [`StreamError::Malformed`] here.
    pub(crate) fn malformed(self, message: impl Into<String>) -> StreamError {
        StreamError::Malformed {
            event: self.event,
            offset: self.offset,
            message: message.into(),
        }
    }

    /// A [`StreamError::Provider`] here.
    pub(crate) fn provider(
        self,
        kind: impl Into<String>,
        message: impl Into<String>,
    ) -> StreamError {
        StreamError::Provider {
            event: self.event,
            offset: self.offset,
            kind: kind.into(),
            message: message.into(),
        }
    }

    /// A [`StreamError::TooLarge`] here: the `what` passes `cap`.
    pub(crate) fn too_large(self, cap: usize, what: &'static str) -> StreamError {
        StreamError::TooLarge {
            event: self.event,
            offset: self.offset,
            cap,
            what,
        }
    }

    /// A [`StreamError::Provider`] for the error object a provider streamed (`body`,
    /// if it sent one): its kind by [`ErrorBody::kind`] (else `kind`), its message
    /// (else `message`).
    pub(crate) fn provider_error(
        self,
        body: Option<&ErrorBody<'_>>,
        kind: &str,
        message: &str,
    ) -> StreamError {
        self.provider(
            body.and_then(ErrorBody::kind)
                .unwrap_or_else(|| kind.to_owned()),
            body.and_then(|b| opt_str(&b.message)).unwrap_or(message),
        )
    }

    /// A string the provider's shared struct keeps as raw JSON (a file's reader never
    /// unescapes it), read here: `None` for `null`, malformed here when not a string.
    /// **O(len)**.
    pub(crate) fn string<'a>(
        self,
        raw: Option<&'a RawValue>,
    ) -> Result<Option<JsonStr<'a>>, StreamError> {
        raw.map_or(Ok(None), |r| {
            serde_json::from_str(r.get()).map_err(|e| self.json(&e))
        })
    }

    /// A [`StreamError::Malformed`] for a JSON parse error here.
    pub(crate) fn json(self, e: &serde_json::Error) -> StreamError {
        self.malformed(format!(
            "not a valid event: {}",
            crate::format::json_doc::describe(e)
        ))
    }
}

/// Whether `data` is the start of a JSON value cut short (it fails to parse only
/// because it ends early), or of OpenAI's `[DONE]`. **O(len)**.
fn cut_json(data: &str) -> bool {
    (data.len() < DONE.len() && DONE.starts_with(data))
        || serde_json::from_str::<serde::de::IgnoredAny>(data)
            .is_err_and(|e| e.classify() == serde_json::error::Category::Eof)
}

/// The data of the event OpenAI streams last.
const DONE: &str = "[DONE]";

/// The error object every provider streams, with the fields any of them names it by:
/// Anthropic `{type, message}`, OpenAI (Chat and Responses) `{type, code, message}`,
/// Gemini `{code, status, message}`. A `code` or `status` may be a number or a string.
#[derive(serde::Deserialize)]
pub(crate) struct ErrorBody<'a> {
    #[serde(rename = "type", borrow, default)]
    pub(crate) kind: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) status: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) code: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub(crate) message: Option<JsonStr<'a>>,
}

impl ErrorBody<'_> {
    /// The error's kind as the provider spelled it: its `type`, else its `status`,
    /// else its `code` (a string unquoted, a number as written). **O(len)**.
    pub(crate) fn kind(&self) -> Option<String> {
        [self.kind, self.status, self.code]
            .into_iter()
            .flatten()
            .find(|r| r.get() != "null")
            .map(|r| string_or_json(Some(r.get())))
    }
}

/// The usage object of every provider stream, with each one's names for the numbers:
/// Anthropic (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
/// `output_tokens_details.thinking_tokens`), OpenAI Chat (`prompt_tokens`,
/// `completion_tokens` and their `_details`), OpenAI Responses (`input_tokens`,
/// `output_tokens` and their `_details`), Gemini `usageMetadata` (`promptTokenCount`,
/// `candidatesTokenCount`, `thoughtsTokenCount`, `cachedContentTokenCount`).
#[derive(serde::Deserialize, Default, Clone, Copy)]
pub(crate) struct RawUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<UsageDetails>,
    #[serde(default)]
    input_tokens_details: Option<UsageDetails>,
    #[serde(default)]
    completion_tokens_details: Option<UsageDetails>,
    #[serde(default)]
    output_tokens_details: Option<UsageDetails>,
    #[serde(rename = "promptTokenCount", default)]
    prompt_token_count: Option<u64>,
    #[serde(rename = "candidatesTokenCount", default)]
    candidates_token_count: Option<u64>,
    #[serde(rename = "thoughtsTokenCount", default)]
    thoughts_token_count: Option<u64>,
    #[serde(rename = "cachedContentTokenCount", default)]
    cached_content_token_count: Option<u64>,
}

/// The `*_details` of a [`RawUsage`].
#[derive(serde::Deserialize, Default, Clone, Copy)]
struct UsageDetails {
    #[serde(default)]
    reasoning_tokens: Option<u64>,
    #[serde(default)]
    thinking_tokens: Option<u64>,
    #[serde(default)]
    cached_tokens: Option<u64>,
}

impl RawUsage {
    /// The numbers the provider gave, by whichever name it gave them (a Gemini
    /// output is its candidates' plus its thoughts' tokens). **O(1)**.
    pub(crate) fn usage(self) -> Usage {
        let gemini_output = match (self.candidates_token_count, self.thoughts_token_count) {
            (None, None) => None,
            (c, t) => Some(c.unwrap_or(0).saturating_add(t.unwrap_or(0))),
        };
        Usage {
            input_tokens: self
                .prompt_tokens
                .or(self.input_tokens)
                .or(self.prompt_token_count),
            output_tokens: self
                .completion_tokens
                .or(self.output_tokens)
                .or(gemini_output),
            reasoning_tokens: [self.completion_tokens_details, self.output_tokens_details]
                .into_iter()
                .flatten()
                .find_map(|d| d.reasoning_tokens.or(d.thinking_tokens))
                .or(self.thoughts_token_count),
            cached_tokens: [self.prompt_tokens_details, self.input_tokens_details]
                .into_iter()
                .flatten()
                .find_map(|d| d.cached_tokens)
                .or(self.cache_read_input_tokens)
                .or(self.cached_content_token_count),
        }
    }
}
