//! Lossless conversions between rig's [`Message`]s and cutpoint's records.
//!
//! One record per content part, in order; the parts after a message's first are
//! [bound to the previous record](Record::bound_to_previous), so no cut ever falls
//! inside a message and a message is one unit to every strategy:
//!
//! | rig | cutpoint record | payload |
//! |---|---|---|
//! | `System { content }` | `user` | none |
//! | `User` text, image, audio, video, document | `user` | none |
//! | `User` tool result | `tool_result(id)` | `Result { status: ok / error (is_error), content: its text }` |
//! | `Assistant` text, image, opaque item | `assistant` | none |
//! | `Assistant` reasoning | `assistant` | `Reasoning { signed: redacted or native item }` |
//! | `Assistant` tool call | `tool_use(id)` | `Call { name, arguments: the JSON object's text }` |
//! | a message with no parts | `user` / `assistant`, 0 tokens | none |
//!
//! The records carry the pairing structure and sizes; each record's rig part is kept
//! beside it (a [`History`] holds both), so turning the records back into messages
//! gives the very messages that went in ([`History::messages`]), metadata (the
//! assistant turn's origin and stop reason, provider `native` items, citations)
//! included. After a compaction, the parts the pipeline edited are rendered from the
//! record's payload (a cleared result's placeholder, `{}` arguments), cleared thinking
//! is dropped, and a summary record becomes one user text message holding
//! [`summary_text`]: the prose and the ledger line of every call it covers, arguments
//! verbatim.
//!
//! Call ids are rig's wire ids ([`rig_core::message::CallId::wire`]).

use std::collections::VecDeque;

use cutpoint::compact::pipeline::PipelineReport;
use cutpoint::compact::replay::InPlace;
use cutpoint::compact::{Entry, Log, Payload, ResultStatus, SummaryParts, summary_text};
use cutpoint::{AppendError, Record};
use rig_core::completion::Message;
use rig_core::message::{
    AssistantContent, AssistantMessage, Text, ToolFunction, ToolResultContent, UserContent,
};
use rig_memory::TokenCounter;

/// Why a history could not be built or kept in step.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConvertError {
    /// The tracker refused a part (a reused call id, an empty one, a cap).
    #[error("message {message}, part {part}: {source}")]
    Refused {
        /// Index of the message among those given to the history, from 0.
        message: usize,
        /// Index of the part in the message, from 0.
        part: usize,
        /// What the tracker said.
        source: AppendError,
    },
    /// A pipeline report names a record the history does not hold (it was not run on
    /// this history's log).
    #[error("pipeline step {step}: {what}")]
    Mismatch {
        /// Which step of the report.
        step: usize,
        /// What did not fit.
        what: String,
    },
}

/// One rig content part, as the record beside it stands for.
#[derive(Clone, Debug, PartialEq)]
enum Part {
    System(String),
    User(UserContent),
    Assistant(AssistantContent),
    /// A `User` message with no parts.
    EmptyUser,
    /// An `Assistant` message with no parts: its metadata is in the head.
    EmptyAssistant,
}

/// A record's rig part, and for a message's first part the assistant turn's metadata
/// (its `content` emptied).
#[derive(Clone, Debug, PartialEq)]
struct Slot {
    part: Part,
    turn: Option<AssistantMessage>,
    edited: Option<InPlace>,
}

/// A rig conversation as a compaction [`Log`] (records with payloads, beside their
/// incremental tracker) and the rig part of every record.
///
/// # Call protocol
/// - [`push`](History::push) messages as rig's history grows: **O(parts)** each (plus
///   the token counter), nothing is rescanned.
/// - Compact [`log_mut`](History::log_mut) with any strategy or pipeline of
///   `cutpoint::compact`, then [`replay`](History::replay) its report: **O(edits +
///   records moved)**.
/// - [`messages`](History::messages) renders the history back: **O(records)**.
pub struct History {
    log: Log,
    /// `slots[i]` is the part of `log.entries()[i]`; `None` for a summary record.
    slots: VecDeque<Option<Slot>>,
    counter: Box<dyn TokenCounter>,
    pushed: usize,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("records", &self.log.len())
            .field("tokens", &self.log.tracker().total_tokens())
            .field("messages_pushed", &self.pushed)
            .finish()
    }
}

impl History {
    /// An empty history counting tokens with `counter` (the same counter a rig-memory
    /// token window would use). **O(1)**.
    pub fn new(counter: impl TokenCounter + 'static) -> Self {
        History {
            log: Log::new(),
            slots: VecDeque::new(),
            counter: Box::new(counter),
            pushed: 0,
        }
    }

    /// A history of `messages`. **O(parts)**.
    ///
    /// # Errors
    /// [`ConvertError::Refused`] naming the first message and part the tracker refused.
    pub fn from_messages(
        messages: impl IntoIterator<Item = Message>,
        counter: impl TokenCounter + 'static,
    ) -> Result<Self, ConvertError> {
        let mut h = History::new(counter);
        for m in messages {
            h.push(m)?;
        }
        Ok(h)
    }

    /// The compaction log (records, payloads, tracker). **O(1)**.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// The log, to run a strategy or pipeline on; then [`replay`](History::replay)
    /// its report. **O(1)**.
    pub fn log_mut(&mut self) -> &mut Log {
        &mut self.log
    }

    /// Messages pushed so far (compaction does not change it). **O(1)**.
    pub fn pushed(&self) -> usize {
        self.pushed
    }

    /// Tokens of the history as it is now, by its counter. **O(1)**.
    pub fn tokens(&self) -> u64 {
        self.log.tracker().total_tokens()
    }

    /// Appends one message: one record per part. **O(parts)** plus the counter.
    ///
    /// # Errors
    /// [`ConvertError::Refused`] naming the message and the part the tracker refused
    /// (a reused or empty call id, a cap). The parts before it stay appended (the
    /// tracker refuses a record, not a message), beside their records, and count as
    /// a message pushed; nothing after it is.
    pub fn push(&mut self, message: Message) -> Result<(), ConvertError> {
        let index = self.pushed;
        let (parts, turn, empty) = match message {
            Message::System { content } => (vec![Part::System(content)], None, Part::EmptyUser),
            Message::User { content } => (
                content.into_iter().map(Part::User).collect(),
                None,
                Part::EmptyUser,
            ),
            Message::Assistant(mut turn) => {
                let parts = std::mem::take(&mut turn.content)
                    .into_iter()
                    .map(Part::Assistant)
                    .collect();
                (parts, Some(turn), Part::EmptyAssistant)
            }
        };
        let parts = if parts.is_empty() { vec![empty] } else { parts };
        let overhead = self.overhead(&parts[0]);
        let mut entries = Vec::with_capacity(parts.len());
        for (k, part) in parts.iter().enumerate() {
            let tokens = self.part_tokens(part, overhead) + if k == 0 { overhead } else { 0 };
            let (record, payload) = record_of(part, tokens);
            let record = if k == 0 {
                record
            } else {
                record.bound_to_previous()
            };
            entries.push(Entry::new(record, payload));
        }
        let mut appended = 0;
        let mut refused = None;
        for (k, entry) in entries.into_iter().enumerate() {
            if let Err(source) = self.log.append(entry) {
                refused = Some((k, source));
                break;
            }
            appended += 1;
        }
        for (k, part) in parts.into_iter().take(appended).enumerate() {
            let turn = if k == 0 { turn.clone() } else { None };
            self.slots.push_back(Some(Slot {
                part,
                turn,
                edited: None,
            }));
        }
        if let Some((part, source)) = refused {
            self.pushed += usize::from(appended > 0);
            return Err(ConvertError::Refused {
                message: index,
                part,
                source,
            });
        }
        self.pushed += 1;
        Ok(())
    }

    /// The fixed cost of a message of this role by the counter (its count of an empty
    /// message). **O(1)** for the counters here.
    fn overhead(&self, first: &Part) -> u64 {
        let empty = match first {
            Part::Assistant(_) | Part::EmptyAssistant => {
                Message::Assistant(AssistantMessage::new(Vec::new()))
            }
            Part::System(_) => Message::System {
                content: String::new(),
            },
            _ => Message::User {
                content: Vec::new(),
            },
        };
        self.counter.count(&empty) as u64
    }

    /// The part's own tokens: the count of a message holding only it, less the
    /// message's fixed cost. **O(part)**.
    fn part_tokens(&self, part: &Part, overhead: u64) -> u64 {
        let alone = match part {
            Part::System(text) => Message::System {
                content: text.clone(),
            },
            Part::User(c) => Message::User {
                content: vec![c.clone()],
            },
            Part::Assistant(c) => Message::Assistant(AssistantMessage::new(vec![c.clone()])),
            Part::EmptyUser | Part::EmptyAssistant => return 0,
        };
        (self.counter.count(&alone) as u64).saturating_sub(overhead)
    }

    /// Replays a pipeline run on this history's log onto the parts beside it: regions
    /// that became summaries, records dropped, results, inputs and thinking cleared in
    /// place ([`cutpoint::compact::replay::replay`]). **O(parts + edits)** per step.
    ///
    /// # Errors
    /// [`ConvertError::Mismatch`] when the report does not fit (it came from another
    /// log); the parts no longer match the records then.
    pub fn replay(&mut self, report: &PipelineReport) -> Result<(), ConvertError> {
        let slots = Vec::from(std::mem::take(&mut self.slots));
        let slots = cutpoint::compact::replay::replay(
            slots,
            report.ran(),
            |slot, how| match slot {
                Some(slot) => {
                    slot.edited = Some(how);
                    Ok(())
                }
                None => Err("it names a summary, not a rig part".into()),
            },
            |_, summary| summary.then_some(None),
        )
        .map_err(|e| ConvertError::Mismatch {
            step: e.step,
            what: e.what,
        })?;
        self.slots = slots.into();
        if self.slots.len() != self.log.len() {
            return Err(ConvertError::Mismatch {
                step: report.ran().count(),
                what: format!(
                    "{} parts for {} records after the run",
                    self.slots.len(),
                    self.log.len()
                ),
            });
        }
        Ok(())
    }

    /// The history as rig messages: the original messages where nothing was
    /// compacted, summaries as user text with their ledger, edits rendered from the
    /// payloads. **O(records)**.
    pub fn messages(&self) -> Vec<Message> {
        let mut out = Vec::new();
        let mut current: Option<Building> = None;
        for (entry, slot) in self.log.entries().iter().zip(&self.slots) {
            if !entry.record.is_bound_to_previous()
                && let Some(b) = current.take()
            {
                out.push(b.finish());
            }
            let Some(slot) = slot else {
                // A summary record: one message of its own.
                if let Some(b) = current.take() {
                    out.push(b.finish());
                }
                out.push(summary_message(&entry.payload));
                continue;
            };
            let b = current.get_or_insert_with(|| Building::start(slot));
            b.add(slot, &entry.payload);
        }
        if let Some(b) = current.take() {
            out.push(b.finish());
        }
        out
    }
}

/// A message being rebuilt from its records.
enum Building {
    System(String),
    User(Vec<UserContent>),
    Assistant(AssistantMessage),
}

impl Building {
    fn start(slot: &Slot) -> Self {
        match &slot.part {
            Part::System(_) => Building::System(String::new()),
            Part::User(_) | Part::EmptyUser => Building::User(Vec::new()),
            Part::Assistant(_) | Part::EmptyAssistant => Building::Assistant(
                slot.turn
                    .clone()
                    .unwrap_or_else(|| AssistantMessage::new(Vec::new())),
            ),
        }
    }

    fn add(&mut self, slot: &Slot, payload: &Payload) {
        match (self, &slot.part) {
            (Building::System(s), Part::System(text)) => s.push_str(text),
            (Building::User(parts), Part::User(c)) => parts.push(match (c, slot.edited) {
                (UserContent::ToolResult(r), Some(InPlace::ClearedResult)) => {
                    let mut r = r.clone();
                    let content = match payload {
                        Payload::Result {
                            content: Some(c), ..
                        } => c.clone(),
                        _ => String::new(),
                    };
                    r.content = vec![ToolResultContent::Text(Text::new(content))];
                    UserContent::ToolResult(r)
                }
                _ => c.clone(),
            }),
            (Building::Assistant(turn), Part::Assistant(c)) => match (c, slot.edited) {
                (AssistantContent::Reasoning(_), Some(InPlace::ClearedThinking)) => {}
                (AssistantContent::ToolCall(call), Some(InPlace::ClearedInput)) => {
                    let mut call = call.clone();
                    let args = match payload {
                        Payload::Call {
                            arguments: Some(a), ..
                        } => a.as_str(),
                        _ => "{}",
                    };
                    call.function = ToolFunction::parse(call.function.name.clone(), args);
                    turn.content.push(AssistantContent::ToolCall(call));
                }
                _ => turn.content.push(c.clone()),
            },
            // Empty messages, and (never, since parts of one message share a role)
            // a part of another role: nothing to add.
            _ => {}
        }
    }

    fn finish(self) -> Message {
        match self {
            Building::System(content) => Message::System { content },
            Building::User(content) => Message::User { content },
            Building::Assistant(turn) => Message::Assistant(turn),
        }
    }
}

/// A summary record as a message: user text holding [`summary_text`].
fn summary_message(payload: &Payload) -> Message {
    let text = match payload {
        Payload::Summary {
            text,
            units,
            orphans,
        } => {
            let prose = text.as_deref().unwrap_or("");
            if orphans.is_empty() {
                summary_text(prose, units)
            } else {
                // The results its region held without their call, listed too.
                SummaryParts::new(prose.to_owned(), units.clone(), orphans.clone()).text()
            }
        }
        _ => String::new(),
    };
    Message::User {
        content: vec![UserContent::Text(Text::new(text))],
    }
}

/// The record (unbound) and payload of one part.
fn record_of(part: &Part, tokens: u64) -> (Record, Payload) {
    match part {
        Part::System(_) | Part::EmptyUser => (Record::user(tokens), Payload::None),
        Part::EmptyAssistant => (Record::assistant(tokens), Payload::None),
        Part::User(UserContent::ToolResult(r)) => (
            Record::tool_result(r.call.wire().into_owned(), tokens),
            Payload::Result {
                status: Some(if r.is_error {
                    ResultStatus::Error
                } else {
                    ResultStatus::Ok
                }),
                content: Some(result_text(&r.content)),
            },
        ),
        Part::User(_) => (Record::user(tokens), Payload::None),
        Part::Assistant(AssistantContent::ToolCall(call)) => (
            Record::tool_use(call.id.wire().into_owned(), tokens),
            Payload::Call {
                name: Some(call.function.name.to_string()),
                arguments: Some(call_arguments(&call.function)),
            },
        ),
        Part::Assistant(AssistantContent::Reasoning(r)) => (
            Record::assistant(tokens),
            Payload::Reasoning {
                signed: r.redacted || r.native.is_some(),
            },
        ),
        Part::Assistant(_) => (Record::assistant(tokens), Payload::None),
    }
}

/// A call's arguments as JSON text: the text the model sent when it was not an
/// object, else the object. **O(arguments)**.
pub fn call_arguments(function: &ToolFunction) -> String {
    match &function.invalid_arguments {
        Some(text) => text.clone(),
        None => serde_json::Value::Object(function.arguments.clone()).to_string(),
    }
}

/// A tool result's content as text: text items as they are, JSON items as JSON text,
/// images as `[image]`, one per line. **O(content)**.
pub fn result_text(content: &[ToolResultContent]) -> String {
    let mut out = String::new();
    for (i, c) in content.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        match c {
            ToolResultContent::Text(t) => out.push_str(&t.text),
            ToolResultContent::Json { value } => out.push_str(&value.to_string()),
            ToolResultContent::Image(_) => out.push_str("[image]"),
        }
    }
    out
}
