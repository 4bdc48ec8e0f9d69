//! Provider formats and agent transcript files, read into one [`Transcript`] model.
//!
//! Every reader turns its input into **messages** (the unit a provider accepts or
//! rejects) and, for each message, cutpoint [`Record`]s: one per content block, every
//! record after a message's first [bound to the previous
//! one](Record::bound_to_previous), so the [`Tracker`] only ever yields
//! cuts at message boundaries. Messages a provider binds to the one before them are
//! bound as a whole (see [`Transcript::records`]). Each message keeps the byte spans
//! of its original JSON, so a compaction can re-emit retained messages byte-identically,
//! and the payload facts a summary ledger needs (tool name, arguments text, first line
//! of the result) are kept in [`Block`]s beside the records.
//!
//! | format | input | rules checked |
//! |---|---|---|
//! | [`Format::Records`] | cutpoint's records JSONL ([`records`]) | pairing only |
//! | [`Format::AnthropicMessages`] | JSON array / `{"messages": [...]}` | Anthropic Messages |
//! | [`Format::OpenAiChat`] | JSON array / `{"messages": [...]}` (also `history`) | OpenAI Chat Completions |
//! | [`Format::OpenAiResponses`] | JSON array / `{"input": [...]}` | OpenAI Responses |
//! | [`Format::Gemini`] | JSON array / `{"contents": [...]}` | Google Gemini |
//! | [`Format::ClaudeCode`] | Claude Code session JSONL | Anthropic Messages |
//! | [`Format::CodexRollout`] | Codex rollout JSONL | OpenAI Responses |
//!
//! Positions: [`Message::line`] is the 1-based line of the file where the message
//! starts (for JSON documents too, computed from its byte offset), and messages are
//! numbered from 0 in log order.

use std::fmt;
use std::ops::Range;

use crate::{AppendError, CallId, Record, Tracker};

mod anthropic;
mod build;
mod claude_code;
mod codex;
mod detect;
mod gemini;
mod json_doc;
mod openai_chat;
mod openai_responses;
pub mod records;
pub mod rewrite;
pub mod rules;
mod tokens;
mod usage;

pub use detect::detect;
pub use rules::{Rule, RuleViolation, check_rules};
#[cfg(feature = "tiktoken")]
pub use tokens::O200kBase;
pub use tokens::{ByteEstimate, TokenCounter};
pub use usage::reported_context_tokens;

/// The formats cutpoint reads. Non-exhaustive: later versions add formats.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Format {
    /// cutpoint's records JSONL (`{"kind":"tool_use","call_id":"a","tokens":12}` per line).
    Records,
    /// Anthropic Messages API request: `tool_use` / `tool_result` content blocks.
    AnthropicMessages,
    /// OpenAI Chat Completions request: `tool_calls` and role `tool` messages.
    OpenAiChat,
    /// OpenAI Responses API input items: `function_call`, `function_call_output`, ...
    OpenAiResponses,
    /// Google Gemini `contents`: `functionCall` / `functionResponse` parts.
    Gemini,
    /// Claude Code session JSONL (one content block per assistant record).
    ClaudeCode,
    /// Codex rollout JSONL (`response_item` lines are the history).
    CodexRollout,
}

impl Format {
    /// Every format, in the order the CLI lists them.
    pub const ALL: [Format; 7] = [
        Format::Records,
        Format::AnthropicMessages,
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Gemini,
        Format::ClaudeCode,
        Format::CodexRollout,
    ];

    /// The name the CLI uses (`--format NAME`). **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            Format::Records => "records",
            Format::AnthropicMessages => "anthropic",
            Format::OpenAiChat => "openai-chat",
            Format::OpenAiResponses => "openai-responses",
            Format::Gemini => "gemini",
            Format::ClaudeCode => "claude-code",
            Format::CodexRollout => "codex",
        }
    }

    /// The format named `name` (as [`Format::name`] spells it). **O(1)**.
    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether the format is one JSON document (rather than JSON lines). **O(1)**.
    pub fn is_json_document(self) -> bool {
        matches!(
            self,
            Format::AnthropicMessages
                | Format::OpenAiChat
                | Format::OpenAiResponses
                | Format::Gemini
        )
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Who a message is from, as the provider spells it (normalized).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Role {
    /// `user` (Gemini `user` turns too).
    User,
    /// `assistant` (Gemini `model`).
    Assistant,
    /// `system` or `developer` instructions.
    System,
    /// An OpenAI Chat `tool` message.
    Tool,
    /// A Responses / Codex item that is not a role message (calls, outputs, reasoning).
    Item,
    /// A history replacement written by a compaction (a Codex `compacted` line). Claude
    /// Code's `isCompactSummary` record is an ordinary user message that starts a new
    /// history ([`Message::starts_history`]).
    Compacted,
}

/// One content block (or item) of a message, with the payload facts a summary needs.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Block {
    /// Text or anything else that is neither a call nor a result (images, server tools,
    /// web searches, developer text).
    Text,
    /// A reasoning item or thinking block; providers bind it to what follows.
    Reasoning,
    /// A client tool call.
    Call {
        /// The call id (synthesized for Gemini calls without one: `name#message.part`).
        id: CallId,
        /// The tool's name.
        name: String,
        /// The arguments exactly as written: the JSON text of Anthropic `input` /
        /// Gemini `args`, the string of OpenAI `arguments`.
        arguments: String,
    },
    /// The result of a client tool call.
    Result {
        /// The call id it answers.
        id: CallId,
        /// The first line of the result's text as a summary unit keeps it
        /// ([`compact::first_line`](crate::compact::first_line)); empty if it has none.
        first_line: String,
    },
}

/// One message of a transcript.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Message {
    /// Who it is from.
    pub role: Role,
    /// 1-based line of the input where it starts.
    pub line: usize,
    /// Byte ranges of the input that hold it: one for JSON documents, one per line
    /// for JSONL (a Claude Code message spans one record per content block).
    pub spans: Vec<Range<usize>>,
    /// Its blocks, in order, with their token estimates. Never empty.
    pub blocks: Vec<(Block, u64)>,
    /// Whether a provider binds this message to the one before it (no cut between).
    pub bound: bool,
    /// Whether it is the first message after a compaction boundary of the file
    /// (Codex `compacted`, Claude Code `compact_boundary`): history restarts here.
    pub starts_history: bool,
}

impl Message {
    /// A message read from one span of the input (one JSON value or line), not bound
    /// to the one before it and not starting a history. **O(1)**.
    pub(crate) fn from_span(
        role: Role,
        line: usize,
        span: Range<usize>,
        blocks: Vec<(Block, u64)>,
    ) -> Message {
        Message {
            role,
            line,
            spans: vec![span],
            blocks,
            bound: false,
            starts_history: false,
        }
    }

    /// The message's tool calls: `(block index, id, name)`. **O(blocks)**.
    pub fn calls(&self) -> impl Iterator<Item = (usize, &CallId, &str)> + '_ {
        self.blocks
            .iter()
            .enumerate()
            .filter_map(|(k, (b, _))| match b {
                Block::Call { id, name, .. } => Some((k, id, name.as_str())),
                _ => None,
            })
    }

    /// The message's tool results: `(block index, id)`. **O(blocks)**.
    pub fn results(&self) -> impl Iterator<Item = (usize, &CallId)> + '_ {
        self.blocks
            .iter()
            .enumerate()
            .filter_map(|(k, (b, _))| match b {
                Block::Result { id, .. } => Some((k, id)),
                _ => None,
            })
    }

    /// Whether the message holds something other than calls, results and reasoning:
    /// a sign the conversation moved on. **O(blocks)**.
    pub fn has_text(&self) -> bool {
        self.blocks.iter().any(|(b, _)| matches!(b, Block::Text))
    }

    /// Tokens of all its blocks. **O(blocks)**.
    pub fn tokens(&self) -> u64 {
        self.blocks
            .iter()
            .fold(0u64, |a, (_, t)| a.saturating_add(*t))
    }
}

/// A transcript read from one input: its messages, in order.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Transcript {
    /// The format it was read as.
    pub format: Format,
    /// Its messages. Lines that are not messages (Claude Code `progress`, Codex
    /// `event_msg`, ...) are skipped.
    pub messages: Vec<Message>,
    /// For JSON documents: the byte range of the array holding the messages (brackets
    /// included); `None` for JSONL.
    pub array_span: Option<Range<usize>>,
    /// OpenAI Responses: the request names a `previous_response_id`, so outputs at the
    /// start may answer calls of the stored conversation (see [`check_rules`]).
    pub continues_previous_response: bool,
}

/// Why an input could not be read as a transcript.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The input is not valid for the format; `line` is 1-based.
    #[error("line {line}: {message}")]
    Invalid {
        /// Where.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// `--format auto` could not tell the format.
    #[error(
        "cannot tell the format ({why}); pass --format with one of: {}",
        format_list()
    )]
    Undetected {
        /// What was seen.
        why: String,
    },
}

fn format_list() -> String {
    Format::ALL.map(Format::name).join(", ")
}

/// Reads `text` as `format`, estimating tokens with `counter`. **O(len)**: one parse.
///
/// # Errors
/// [`FormatError::Invalid`] naming the line and what is wrong.
pub fn read(
    text: &str,
    format: Format,
    counter: &dyn TokenCounter,
) -> Result<Transcript, FormatError> {
    let mut continues_previous_response = false;
    let (messages, array_span) = match format {
        Format::Records => (records::transcript::read(text)?, None),
        Format::ClaudeCode => (claude_code::read(text, counter)?, None),
        Format::CodexRollout => (codex::read(text, counter)?, None),
        Format::AnthropicMessages
        | Format::OpenAiChat
        | Format::OpenAiResponses
        | Format::Gemini => {
            let doc = json_doc::split(text, format)?;
            continues_previous_response = doc.previous_response;
            let mut messages = Vec::with_capacity(doc.elements.len());
            let mut lines = json_doc::LineCounter::default();
            for (index, raw) in doc.elements.iter().enumerate() {
                let span = json_doc::span_of(text, raw);
                let line = lines.line_at(text, span.start);
                let parsed = match format {
                    Format::AnthropicMessages => anthropic::message(raw.get(), counter),
                    Format::OpenAiChat => openai_chat::message(raw.get(), counter),
                    Format::OpenAiResponses => openai_responses::item(raw.get(), counter),
                    _ => gemini::content(raw.get(), counter),
                }
                .map_err(|m| FormatError::Invalid {
                    line,
                    message: format!("message {index}: {m}"),
                })?;
                messages.push(Message::from_span(parsed.role, line, span, parsed.blocks));
            }
            (messages, Some(doc.array_span))
        }
    };
    let mut transcript = Transcript {
        format,
        messages,
        array_span,
        continues_previous_response,
    };
    build::finish(&mut transcript);
    Ok(transcript)
}

/// What a per-element parser returns: a role and blocks (never empty).
pub(crate) struct Parsed {
    pub(crate) role: Role,
    pub(crate) blocks: Vec<(Block, u64)>,
}

impl Transcript {
    /// Index of the first message of the live history: the one after the last
    /// compaction boundary of the file, 0 when there is none. **O(messages)**.
    pub fn live_from(&self) -> usize {
        self.messages
            .iter()
            .rposition(|m| m.starts_history)
            .unwrap_or(0)
    }

    /// The records of messages `from..`, in order, with the message index of each
    /// record: every record after a message's first is bound to the previous one, and
    /// so is the first record of a [bound](Message::bound) message (the first record
    /// overall never is). A reused call id gets a `#N` suffix from its second call on
    /// (the tracker pairs by id; the providers that allow reuse pair locally), and
    /// the results after that call carry the same suffix. **O(records)**.
    pub fn records(&self, from: usize) -> (Vec<Record>, Vec<usize>) {
        build::records(self, from)
    }

    /// A tracker over the live history's records ([`records`](Transcript::records)
    /// from [`live_from`](Transcript::live_from)), and the message index of each
    /// record. **O(records)**.
    ///
    /// # Errors
    /// The tracker's [`AppendError`] (a log too long or with too many tokens).
    pub fn tracker(&self) -> Result<(Tracker, Vec<usize>), AppendError> {
        let (records, owner) = self.records(self.live_from());
        Ok((Tracker::from_records(records)?, owner))
    }

    /// The message index a record cut of [`tracker`](Transcript::tracker) falls at:
    /// the message holding record `cut`, or the message count for the end. **O(1)**.
    pub fn message_at(&self, owner: &[usize], cut: usize) -> usize {
        owner.get(cut).copied().unwrap_or(self.messages.len())
    }

    /// The legal cuts of the live history as message indices, increasing: where a
    /// compaction may start keeping messages. **O(records)**.
    ///
    /// # Errors
    /// As [`tracker`](Transcript::tracker).
    pub fn legal_message_cuts(&self) -> Result<Vec<usize>, AppendError> {
        let (tracker, owner) = self.tracker()?;
        // Records are bound within a message, so legal record cuts fall only where a
        // message starts: each maps to a distinct message index.
        Ok(tracker
            .legal_cuts()
            .map(|c| self.message_at(&owner, c))
            .collect())
    }

    /// Total tokens of all messages. **O(blocks)**.
    pub fn total_tokens(&self) -> u64 {
        self.messages
            .iter()
            .fold(0u64, |a, m| a.saturating_add(m.tokens()))
    }
}
