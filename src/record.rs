//! The typed record model: what a conversation log is made of.
//!
//! A log is a sequence of [`Record`]s. Each carries a [`RecordKind`] and a token count;
//! tool records also carry a [`CallId`] that links a `tool_use` to its `tool_result`.
//! Payloads (text, arguments, outputs) are deliberately absent: the tracker only needs
//! the pairing structure and the sizes. Adapters keep the payloads beside the records.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

/// The id that links a `tool_use` record to its `tool_result` (Anthropic `toolu_…`,
/// OpenAI `call_…`). Any non-empty string.
///
/// Cheap to move (one pointer and a length); cloning copies the string.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallId(Box<str>);

impl CallId {
    /// Wraps a string as a call id. **O(len)** for a `&str` (copies), **O(1)** amortized
    /// for a `String` (reuses its buffer, shrinking it if it has spare capacity).
    pub fn new(id: impl Into<Box<str>>) -> Self {
        CallId(id.into())
    }

    /// The id as a string slice. **O(1)**.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for CallId {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for CallId {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for CallId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for CallId {
    fn from(id: &str) -> Self {
        CallId(id.into())
    }
}

impl From<String> for CallId {
    fn from(id: String) -> Self {
        CallId(id.into_boxed_str())
    }
}

impl From<Box<str>> for CallId {
    fn from(id: Box<str>) -> Self {
        CallId(id)
    }
}

impl From<&String> for CallId {
    fn from(id: &String) -> Self {
        CallId(id.as_str().into())
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl PartialEq<str> for CallId {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for CallId {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

/// What a record is. Tool kinds carry the [`CallId`] that pairs them.
///
/// Non-exhaustive: later versions add kinds (summaries of compacted regions, for one);
/// match with a wildcard arm.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum RecordKind {
    /// A user turn (or any input that is not a tool result).
    User,
    /// Assistant output that is not a tool call: text, reasoning.
    Assistant,
    /// A tool call the assistant made; answered by a `ToolResult` with the same id.
    ToolUse(CallId),
    /// The answer to the `ToolUse` with the same id.
    ToolResult(CallId),
    /// A summary standing for a compacted region. It covers the listed calls as whole
    /// pairs (use and result), in log order: for pairing, each covered id counts as
    /// called and answered here, so a later `tool_result` with one is a duplicate and a
    /// later `tool_use` with one is refused. What each pair was (tool, arguments,
    /// result) lives in the compaction layer ([`compact`](crate::compact)).
    Summary(Box<[CallId]>),
}

impl RecordKind {
    /// The kind's name as the seed and the records JSONL format spell it:
    /// `user`, `assistant`, `tool_use`, `tool_result`, `summary`. **O(1)**.
    pub fn name(&self) -> &'static str {
        match self {
            RecordKind::User => "user",
            RecordKind::Assistant => "assistant",
            RecordKind::ToolUse(_) => "tool_use",
            RecordKind::ToolResult(_) => "tool_result",
            RecordKind::Summary(_) => "summary",
        }
    }

    /// The call id of a tool kind, `None` for the others. **O(1)**.
    pub fn call_id(&self) -> Option<&CallId> {
        match self {
            RecordKind::ToolUse(id) | RecordKind::ToolResult(id) => Some(id),
            RecordKind::User | RecordKind::Assistant | RecordKind::Summary(_) => None,
        }
    }

    /// The calls a summary covers; empty for the other kinds. **O(1)**.
    pub fn covered(&self) -> &[CallId] {
        match self {
            RecordKind::Summary(ids) => ids,
            _ => &[],
        }
    }
}

/// One record of a conversation log: a kind and a token count.
///
/// ```
/// use cutpoint::Record;
/// let call = Record::tool_use("toolu_01", 40);
/// let answer = Record::tool_result(String::from("toolu_01"), 900);
/// assert_eq!(call.call_id(), answer.call_id());
/// assert_eq!(answer.tokens(), 900);
/// ```
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Record {
    kind: RecordKind,
    tokens: u64,
    bound: bool,
}

impl Record {
    /// A record of any kind. **O(1)**.
    pub fn new(kind: RecordKind, tokens: u64) -> Self {
        Record {
            kind,
            tokens,
            bound: false,
        }
    }

    /// Binds this record to the one before it: no cut may fall between them. Formats
    /// use it for the records of one provider message (a message is the unit a provider
    /// accepts or rejects) and for items a provider binds together (a reasoning item and
    /// the call after it, a thinking block and its `tool_use`). The first record of a
    /// log cannot be bound to anything; there the flag is ignored. **O(1)**.
    ///
    /// ```
    /// use cutpoint::{Record, Tracker};
    /// let mut t = Tracker::new();
    /// t.append(Record::assistant(30))?; // thinking block
    /// t.append(Record::tool_use("toolu_1", 20).bound_to_previous())?;
    /// t.append(Record::tool_result("toolu_1", 20))?;
    /// assert!(!t.is_legal_cut(1));
    /// # Ok::<(), cutpoint::AppendError>(())
    /// ```
    #[must_use]
    pub fn bound_to_previous(mut self) -> Self {
        self.bound = true;
        self
    }

    /// Whether no cut may fall right before this record. **O(1)**.
    pub fn is_bound_to_previous(&self) -> bool {
        self.bound
    }

    /// A user record of `tokens` tokens. **O(1)**.
    pub fn user(tokens: u64) -> Self {
        Record::new(RecordKind::User, tokens)
    }

    /// An assistant record (text or reasoning, no tool call). **O(1)**.
    pub fn assistant(tokens: u64) -> Self {
        Record::new(RecordKind::Assistant, tokens)
    }

    /// A tool call with id `id`. Accepts `&str`, `String`, `Box<str>` or a [`CallId`].
    /// **O(1)** for owned ids, **O(len)** for borrowed ones (the id is copied).
    pub fn tool_use(id: impl Into<CallId>, tokens: u64) -> Self {
        Record::new(RecordKind::ToolUse(id.into()), tokens)
    }

    /// The result of the tool call with id `id`. Accepts the same id types as
    /// [`Record::tool_use`]. **O(1)** for owned ids, **O(len)** for borrowed ones.
    pub fn tool_result(id: impl Into<CallId>, tokens: u64) -> Self {
        Record::new(RecordKind::ToolResult(id.into()), tokens)
    }

    /// A summary of a compacted region covering the calls `covered` (see
    /// [`RecordKind::Summary`]). **O(k)** for `k` covered calls.
    pub fn summary(covered: impl IntoIterator<Item = CallId>, tokens: u64) -> Self {
        Record::new(RecordKind::Summary(covered.into_iter().collect()), tokens)
    }

    /// The record's kind. **O(1)**.
    pub fn kind(&self) -> &RecordKind {
        &self.kind
    }

    /// The record's token count. **O(1)**.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// The call id of a tool record, `None` for the others. **O(1)**.
    pub fn call_id(&self) -> Option<&CallId> {
        self.kind.call_id()
    }

    /// Splits the record into its kind and token count (dropping the bound flag).
    /// **O(1)**.
    pub fn into_parts(self) -> (RecordKind, u64) {
        (self.kind, self.tokens)
    }
}
