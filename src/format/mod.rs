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
//! | [`Format::GeminiCli`] | Gemini CLI session `{"sessionId", "messages": [...]}` | Google Gemini |
//! | [`Format::ClaudeCode`] | Claude Code session JSONL | Anthropic Messages |
//! | [`Format::CodexRollout`] | Codex rollout JSONL | OpenAI Responses |
//!
//! Positions: [`Message::line`] is the 1-based line of the file where the message
//! starts and [`Message::block_line`] the line of each of its blocks (for JSON
//! documents too, computed from byte offsets with one index of the file's line
//! starts, so reading stays linear in the bytes); messages are numbered from 0 in log
//! order.

use std::fmt;
use std::ops::Range;

use smallvec::SmallVec;

use crate::compact::{LEDGER_HEADING, SummaryParts};
use crate::{AppendError, CallId, Record, Tracker};

pub(crate) mod anthropic;
mod attribute;
#[cfg_attr(
    not(feature = "testing"),
    expect(
        unreachable_pub,
        reason = "the one Transcript -> Log builder is public for the hidden `testing` \
                  feature (`testing::writers`), not the stable API"
    )
)]
pub(crate) mod build;
mod claude_code;
mod codex;
mod defer;
mod detect;
#[cfg_attr(
    not(feature = "testing"),
    expect(
        unreachable_pub,
        reason = "the writers beneath `Loaded::run` and `Loaded::summarize` are public for \
                  the hidden `testing` feature (`testing::writers`), not the stable API"
    )
)]
pub(crate) mod edit;
pub(crate) mod gemini;
mod gemini_cli;
pub(crate) mod json_doc;
pub mod loaded;
mod native;
pub(crate) mod openai_chat;
pub(crate) mod openai_responses;
pub mod records;
#[cfg_attr(
    not(feature = "testing"),
    expect(
        unreachable_pub,
        reason = "the writers beneath `Loaded::summarize` are public for the hidden \
                  `testing` feature (`testing::writers`), not the stable API"
    )
)]
pub(crate) mod rewrite;
pub mod rules;
mod shape;
mod tokens;
mod usage;

pub use defer::{DeferReport, IndexSpace, NearCut, defer_at_head};
pub use detect::{detect, detect_input, is_one_line_document, mismatch};
pub use edit::{Compacted, EditError, MAX_ROUNDS};
pub use loaded::{Checked, Finding, LoadError, Loaded};
pub use native::{Keep, NativeCompaction, NativeCut, NativeCutError, keep_recent_cut};
pub use rewrite::{Boundary, RewriteError, Rewritten};
pub use rules::{
    Invalidated, Rule, RuleViolation, check_against, check_rules, invalidated_thinking,
};
pub use shape::summary_message;
#[cfg(feature = "tiktoken")]
pub use tokens::O200kBase;
pub use tokens::{ByteEstimate, OPAQUE_PAYLOAD_TOKENS, TokenCounter, opaque_payloads};
pub use usage::{
    CalibrateError, CalibratedBudget, Calibration, UsagePoint, reported_context_tokens,
    usage_points,
};

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
    /// Gemini CLI session file (`{"sessionId", "messages": [{"type": "user" |
    /// "gemini", "content", "toolCalls": [...]}]}`): each call with its result.
    GeminiCli,
}

impl Format {
    /// Every format, in the order the CLI lists them.
    pub const ALL: [Format; 8] = [
        Format::Records,
        Format::AnthropicMessages,
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Gemini,
        Format::ClaudeCode,
        Format::CodexRollout,
        Format::GeminiCli,
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
            Format::GeminiCli => "gemini-cli",
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
                | Format::GeminiCli
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
    /// A provider's own compaction: an Anthropic `compaction` block or an OpenAI
    /// Responses `compaction` item (also inside a Codex `replacement_history`). The
    /// live history starts at the message holding it ([`Message::starts_history`]); it
    /// is sent back byte-identical, never summarized, moved or split.
    Compaction,
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
    /// An earlier compaction's summary, in a user message: cutpoint's own (its text
    /// holds the ledger [`SummaryParts::text`](crate::compact::SummaryParts::text)
    /// writes, read back into parts) or a runtime's (Claude Code's `isCompactSummary`
    /// record: all prose). It covers the calls its units list; a later compaction
    /// folds it into the new summary.
    Summary(SummaryParts),
    /// A control item: it changes how the provider treats the rest of the history
    /// (tools, output settings, configuration) or marks a provider event, and must stay
    /// where it was sent: never summarized, never moved, never dropped (see
    /// [`Message::is_pinned`]).
    Control(Control),
}

/// The kinds of [`Block::Control`]. Non-exhaustive: providers add control items.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Control {
    /// OpenAI Responses `compaction_trigger`: asks for a compaction; the last input
    /// item of a request, without an `id`, never persisted.
    CompactionTrigger,
    /// OpenAI Responses `configuration_update`: in effect until the next one; the
    /// latest must survive a client compaction.
    ConfigurationUpdate,
    /// Anthropic `tool_addition` in a mid-conversation system message (its
    /// `tool_reference` loads a tool).
    ToolAddition,
    /// Anthropic `tool_removal` in a mid-conversation system message (unloads a tool).
    ToolRemoval,
    /// Anthropic per-message `output_config` in a mid-conversation system message.
    OutputConfig,
    /// Anthropic `clear_at` reminder in a mid-conversation system message.
    ClearAt,
    /// Anthropic `fallback` block: a refused attempt retried on a fallback model; it
    /// stays in place (thinking and client `tool_use` blocks before the final one
    /// were dropped by the API, so they are read as text, not calls).
    Fallback,
}

impl Control {
    /// The provider's type name of the item or block. **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            Control::CompactionTrigger => "compaction_trigger",
            Control::ConfigurationUpdate => "configuration_update",
            Control::ToolAddition => "tool_addition",
            Control::ToolRemoval => "tool_removal",
            Control::OutputConfig => "output_config",
            Control::ClearAt => "clear_at",
            Control::Fallback => "fallback",
        }
    }
}

/// Facts about a block the [`Block`] kind does not carry, that provider rules need.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Note {
    /// An Anthropic `server_tool_use` block (the provider runs the call).
    ServerCall,
    /// An Anthropic `tool_use` with a `caller` bound to a server code-execution tool
    /// (programmatic tool calling): the message answering it holds only
    /// `tool_result` blocks.
    ProgrammaticCall,
    /// On a programmatic call ([`Note::ProgrammaticCall`]) of a Claude Code record:
    /// when the code-execution container the script waits in expires (the
    /// response's `container.expires_at`), in milliseconds since the Unix epoch. A
    /// result written after it answers a script that is gone.
    ContainerExpiresAt(i64),
    /// On a result answering a programmatic call with a
    /// [`Note::ContainerExpiresAt`]: the Claude Code record's `timestamp`, in
    /// milliseconds since the Unix epoch.
    WrittenAt(i64),
}

/// A tool loaded or unloaded by a block of the history: a `tool_reference` (in a
/// `tool_search_tool_result`, an ordinary `tool_result` or a `tool_addition`), a
/// `tool_removal`, or a tool an OpenAI `tool_search_output` lists. The tools loaded
/// at the end of a log are its **tool manifest**
/// ([`Transcript::loaded_tools`]); a compaction that drops the block that loaded a
/// tool unloads it.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct ToolChange {
    /// The message holding the block.
    pub message: usize,
    /// The block, in [`Message::blocks`].
    pub block: usize,
    /// The tool's name.
    pub tool: String,
    /// Loaded (`true`) or unloaded (`false`).
    pub loaded: bool,
}

impl Block {
    /// A runtime's own summary: `text` as prose, no units. **O(len)**.
    pub(crate) fn summary_of(text: &str) -> Block {
        Block::Summary(SummaryParts::new(text.to_owned(), Vec::new(), Vec::new()))
    }
}

/// The earlier summary a user message's text holds, if it holds cutpoint's ledger.
/// **O(len)**.
pub(crate) fn summary_in_text(text: &str) -> Option<Block> {
    if !holds_ledger(text) {
        return None;
    }
    SummaryParts::parse(text).map(Block::Summary)
}

/// [`summary_in_text`] for the JSON of a user message's content or text (a string,
/// or an array of blocks or parts with `text`): only a JSON text that holds the
/// ledger heading (which needs no escaping) is read as text. **O(len)**.
pub(crate) fn summary_in(raw: &str) -> Option<Block> {
    if !holds_ledger(raw) {
        return None;
    }
    summary_in_text(&json_doc::text_of(raw))
}

/// Whether `text` holds the ledger heading. Asked of every user message's text: one
/// searcher, built once (`str::contains` builds one per call). **O(len)**.
fn holds_ledger(text: &str) -> bool {
    static HEADING: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(LEDGER_HEADING));
    HEADING.find(text.as_bytes()).is_some()
}

/// One message of a transcript.
///
/// The per-block lists and the spans hold one entry inline ([`SmallVec`], no larger
/// than a `Vec`): most messages of a JSON-lines file are one block on one line, and
/// three allocations per message were a tenth of reading a Codex rollout
/// (docs/performance.md, "tenth pass").
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Message {
    /// Who it is from.
    pub role: Role,
    /// 1-based line of the input where it starts.
    pub line: usize,
    /// Byte ranges of the input that hold it: one for JSON documents, one per line
    /// for JSONL (a Claude Code message spans one record per content block).
    pub spans: SmallVec<[Range<usize>; 1]>,
    /// Its blocks, in order, with their token estimates. Never empty.
    pub blocks: Vec<(Block, u64)>,
    /// The 1-based line of the input where each block's JSON starts, one per block
    /// (`block_lines[k]` for `blocks[k]`): the line of the record holding it in JSONL
    /// (a rebuilt Claude Code message spans several records), of the block itself in a
    /// JSON document. Violations name it ([`Message::block_line`]).
    pub block_lines: SmallVec<[usize; 1]>,
    /// Whether a provider binds this message to the one before it (no cut between).
    pub bound: bool,
    /// Whether it is the first message after a compaction boundary of the file
    /// (Codex `compacted`, Claude Code `compact_boundary`) or the message holding a
    /// provider's [`Block::Compaction`]: history restarts here.
    pub starts_history: bool,
    /// A fingerprint of each block's JSON text, one per block (`prints[k]` for
    /// `blocks[k]`), 0 where the reader has no text of its own for the block:
    /// byte-identity of blocks across two versions of a log
    /// ([`rules::check_against`]).
    pub prints: SmallVec<[u64; 1]>,
    /// The blocks that carry a provider signature or server id binding them, by
    /// index, increasing: a Gemini `thoughtSignature` on the part itself; an OpenAI
    /// Responses item's server `id` (refused once the reasoning before it is gone).
    pub signed: Vec<usize>,
    /// Whether it is a runtime's own note that the user interrupted the turn before
    /// it (Codex writes a user message whose text starts with `<turn_aborted>`): the
    /// turn ended there, so a reasoning item right before it has no follower to wait
    /// for (see `docs/reasoning.md`, "Interrupted turns").
    pub aborts_turn: bool,
    /// Facts about some blocks the block kinds do not carry ([`Note`]), by block
    /// index, increasing.
    pub notes: Vec<(usize, Note)>,
}

impl Message {
    /// A message read from one line of JSONL, every block on that line, not bound to
    /// the one before it and not starting a history. **O(blocks)**.
    pub(crate) fn from_line(
        role: Role,
        line: usize,
        span: Range<usize>,
        blocks: Vec<(Block, u64)>,
    ) -> Message {
        // Room for as many blocks as `blocks` has room for: a message built block by
        // block (`printed`, a document's element) allocates each list once.
        let (mut block_lines, mut prints) = (
            SmallVec::with_capacity(blocks.capacity()),
            SmallVec::with_capacity(blocks.capacity()),
        );
        block_lines.resize(blocks.len(), line);
        prints.resize(blocks.len(), 0);
        Message {
            role,
            line,
            spans: smallvec::smallvec![span],
            block_lines,
            prints,
            signed: Vec::new(),
            notes: Vec::new(),
            blocks,
            bound: false,
            starts_history: false,
            aborts_turn: false,
        }
    }

    /// [`from_line`](Message::from_line) for blocks with their fingerprints
    /// ([`Message::prints`]). **O(blocks)**.
    pub(crate) fn printed(
        role: Role,
        line: usize,
        span: Range<usize>,
        blocks: impl IntoIterator<Item = (Block, u64, u64), IntoIter: ExactSizeIterator>,
    ) -> Message {
        let blocks = blocks.into_iter();
        let mut message = Message::from_line(role, line, span, Vec::with_capacity(blocks.len()));
        for (block, tokens, print) in blocks {
            message.push_block(block, tokens, line, print);
        }
        message
    }

    /// The 1-based line where block `k` starts (the message's line when `k` is out of
    /// range). **O(1)**.
    pub fn block_line(&self, k: usize) -> usize {
        self.block_lines.get(k).copied().unwrap_or(self.line)
    }

    /// Appends a block read on `line` from the JSON text whose fingerprint is
    /// `print`. **O(1)** amortized.
    pub(crate) fn push_block(&mut self, block: Block, tokens: u64, line: usize, print: u64) {
        self.blocks.push((block, tokens));
        self.block_lines.push(line);
        self.prints.push(print);
    }

    /// Whether block `k` is a provider's compaction. **O(1)**.
    pub fn is_compaction(&self, k: usize) -> bool {
        matches!(self.blocks.get(k), Some((Block::Compaction, _)))
    }

    /// Whether block `k` must stay where it is: a provider's compaction or a control
    /// item ([`Block::Control`]). **O(1)**.
    pub fn is_pinned(&self, k: usize) -> bool {
        matches!(
            self.blocks.get(k),
            Some((Block::Compaction | Block::Control(_), _))
        )
    }

    /// Whether block `k` carries `note`. **O(notes)**.
    pub fn has_note(&self, k: usize, note: Note) -> bool {
        self.notes.contains(&(k, note))
    }

    /// Whether any block is a provider's compaction. **O(blocks)**.
    pub fn has_compaction(&self) -> bool {
        self.blocks
            .iter()
            .any(|(b, _)| matches!(b, Block::Compaction))
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

    /// Whether the message holds something other than calls, results and reasoning
    /// (text, or an earlier summary): a sign the conversation moved on. **O(blocks)**.
    pub fn has_text(&self) -> bool {
        self.blocks
            .iter()
            .any(|(b, _)| matches!(b, Block::Text | Block::Summary(_)))
    }

    /// Whether it can be the item an OpenAI Responses `reasoning` item precedes:
    /// something the model produced (an assistant message, a call, a server item), not
    /// an input, an output, a compaction or another reasoning item. **O(1)**.
    pub fn follows_reasoning(&self) -> bool {
        match self.role {
            Role::Assistant => true,
            Role::Item => !matches!(
                self.blocks.first(),
                Some((
                    Block::Result { .. } | Block::Reasoning | Block::Compaction | Block::Control(_),
                    _
                ))
            ),
            _ => false,
        }
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
    /// A fingerprint of what a provider's prefix holds before the messages (Anthropic
    /// `system` and `tools`, OpenAI `instructions` and `tools` of a request document),
    /// 0 when the input holds none: a change invalidates every thinking block
    /// ([`rules::invalidated_thinking`]).
    pub head_print: u64,
    /// The tools the history loads and unloads, in log order ([`ToolChange`]).
    pub tools: Vec<ToolChange>,
    /// An Anthropic request's `output_config.task_budget`, if it sets one.
    pub task_budget: Option<TaskBudget>,
    /// Whether a request object names a `container` (Anthropic programmatic tool
    /// calling: the request that answers calls a code-execution script made passes
    /// the container the script waits in); `None` where the input cannot say (JSON
    /// lines, a bare array of messages).
    pub names_container: Option<bool>,
}

/// An Anthropic task budget (`output_config.task_budget`, beta
/// `task-budgets-2026-03-13`): the tokens of the whole agentic loop, and after a
/// client compaction what is left of them (`remaining`), so the model's countdown
/// does not restart at `total`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct TaskBudget {
    /// `total`.
    pub total: Option<u64>,
    /// `remaining`.
    pub remaining: Option<u64>,
    /// The byte range of the `task_budget` object in the input, for the writer that
    /// carries `remaining` through a compaction.
    pub(crate) at: (usize, usize),
}

impl TaskBudget {
    /// What is left of the budget after a client compaction of a history of
    /// `consumed` tokens, as Claude Code carries it after its own compaction:
    /// `max(0, (remaining or total) - consumed)`; `None` without either. **O(1)**.
    pub fn remaining_after(&self, consumed: u64) -> Option<u64> {
        Some(self.remaining.or(self.total)?.saturating_sub(consumed))
    }
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
    /// The input is plainly not the format it was read as (a JSON document read as
    /// JSON lines, JSON lines of another kind): what it is instead.
    #[error("not {format} input: {why}")]
    Mismatch {
        /// The format it was read as.
        format: Format,
        /// What it is instead, and the format it reads as when one fits.
        why: String,
    },
}

fn format_list() -> String {
    Format::ALL.map(Format::name).join(", ")
}

/// Reads `text` as `format`, estimating tokens with `counter`. **O(len)**: one parse.
///
/// # Errors
/// [`FormatError::Invalid`] naming the line and what is wrong;
/// [`FormatError::Mismatch`] when the input is plainly of another kind (a JSON
/// document read as JSON lines, or the reverse, or JSON lines none of which is of
/// `format`), saying what it is.
pub fn read(
    text: &str,
    format: Format,
    counter: &dyn TokenCounter,
) -> Result<Transcript, FormatError> {
    if !format.is_json_document() {
        // JSON lines: asked first, at the cost of a line or two.
        if let Some(e) = detect::mismatch(text, format) {
            return Err(e);
        }
        return read_as(text, format, counter);
    }
    // A JSON document: asked only when it does not read. A text that reads as a
    // document is no mismatch (several JSON lines fail to parse as one document, and a
    // single line that is no document lacks the message array the reader needs),
    // and asking first cost two more passes over a one-line body: every request the
    // proxy reads.
    read_as(text, format, counter).map_err(|e| detect::mismatch(text, format).unwrap_or(e))
}

/// [`read`] once the input is known to be of `format`'s kind. **O(len)**.
fn read_as(
    text: &str,
    format: Format,
    counter: &dyn TokenCounter,
) -> Result<Transcript, FormatError> {
    let mut continues_previous_response = false;
    let mut head_print = 0;
    let mut task_budget = None;
    let mut names_container = None;
    let (messages, array_span) = match format {
        Format::Records => (records::transcript::read(text)?, None),
        Format::ClaudeCode => (claude_code::read(text, counter)?, None),
        Format::CodexRollout => (codex::read(text, counter)?, None),
        Format::AnthropicMessages
        | Format::OpenAiChat
        | Format::OpenAiResponses
        | Format::Gemini
        | Format::GeminiCli => {
            let doc = json_doc::split(text, format)?;
            continues_previous_response = doc.previous_response;
            head_print = doc.head_print;
            task_budget = doc.task_budget;
            names_container = doc.names_container;
            // One pass for every line number: the document's lines are indexed once.
            let lines = json_doc::LineIndex::new(text);
            let mut messages = Vec::with_capacity(doc.elements.len());
            for (index, raw) in doc.elements.iter().enumerate() {
                let span = json_doc::span_of(text, raw);
                let line = lines.line(span.start);
                let parsed = match format {
                    Format::AnthropicMessages => anthropic::message(raw.get(), counter),
                    Format::OpenAiChat => openai_chat::message(raw.get(), counter),
                    Format::OpenAiResponses => openai_responses::item(raw.get(), counter),
                    Format::GeminiCli => gemini_cli::message(raw.get(), index, counter),
                    _ => gemini::content(raw.get(), counter),
                }
                .map_err(|m| FormatError::Invalid {
                    line,
                    message: format!("message {index}: {m}"),
                })?;
                messages.push(parsed.into_message(text, &lines, span));
            }
            (messages, Some(doc.array_span))
        }
    };
    let mut transcript = Transcript {
        format,
        messages,
        array_span,
        continues_previous_response,
        head_print,
        tools: Vec::new(),
        task_budget,
        names_container,
    };
    match format {
        Format::AnthropicMessages | Format::ClaudeCode => {
            anthropic::annotate(text, &mut transcript)
        }
        Format::OpenAiResponses | Format::CodexRollout => {
            openai_responses::annotate(text, &mut transcript)
        }
        _ => {}
    }
    build::finish(&mut transcript);
    Ok(transcript)
}

/// What a per-element parser returns: a role and blocks (never empty), each with
/// the text its JSON was read from (a slice of the input, or the element itself for
/// a block that is the whole element), so that a JSON document's reader can name the
/// line of every block.
pub(crate) struct Parsed<'a> {
    pub(crate) role: Role,
    pub(crate) blocks: Vec<(Block, u64, &'a str)>,
    /// The blocks whose part carries a signature ([`Message::signed`]).
    pub(crate) signed: Vec<usize>,
}

/// The fingerprint of a block's JSON text ([`Message::prints`]): 64 bits of
/// foldhash's quality hash under a fixed seed, so equal texts give equal prints in
/// every process of one build (prints are compared, never stored). Never 0, which
/// means "no text of its own". **O(len)**, at several GB/s (SipHash, which it
/// replaced, cost 8% of reading a Gemini CLI session).
pub(crate) fn fingerprint(text: &str) -> u64 {
    use std::hash::BuildHasher;
    const SEED: u64 = 0x6375_7470_6f69_6e74; // "cutpoint"
    foldhash::quality::FixedState::with_seed(SEED)
        .hash_one(text)
        .max(1)
}

impl Parsed<'_> {
    /// The message of a JSON document's element at `span` of `text`: each block's
    /// line is where its JSON starts (the element's start for a block that is not a
    /// slice of `text`). **O(blocks log lines)**.
    fn into_message(self, text: &str, lines: &json_doc::LineIndex, span: Range<usize>) -> Message {
        let line = lines.line(span.start);
        let room = Vec::with_capacity(self.blocks.len());
        let mut message = Message::from_line(self.role, line, span, room);
        for (block, tokens, at) in self.blocks {
            let block_line = json_doc::offset_in(text, at).map_or(line, |o| lines.line(o));
            message.push_block(block, tokens, block_line, fingerprint(at));
        }
        message.signed = self.signed;
        message
    }
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

    /// Tokens of the live history (messages from
    /// [`live_from`](Transcript::live_from)): what its [`tracker`](Transcript::tracker)
    /// totals. **O(blocks)**.
    pub fn live_tokens(&self) -> u64 {
        self.messages[self.live_from()..]
            .iter()
            .fold(0u64, |a, m| a.saturating_add(m.tokens()))
    }

    /// The tool manifest: the tools loaded at the end of the live history (from
    /// [`live_from`](Transcript::live_from)), after each of its [`ToolChange`]s in
    /// order, sorted by name. **O(messages + changes log changes)**.
    pub fn loaded_tools(&self) -> Vec<&str> {
        let live = self.live_from();
        let mut loaded = std::collections::BTreeSet::new();
        for c in self.tools.iter().filter(|c| c.message >= live) {
            if c.loaded {
                loaded.insert(c.tool.as_str());
            } else {
                loaded.remove(c.tool.as_str());
            }
        }
        loaded.into_iter().collect()
    }

    /// Total tokens of all messages. **O(blocks)**.
    pub fn total_tokens(&self) -> u64 {
        self.messages
            .iter()
            .fold(0u64, |a, m| a.saturating_add(m.tokens()))
    }
}
