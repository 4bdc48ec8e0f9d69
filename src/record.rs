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
/// Ids of up to [`CallId::INLINE`] bytes (every provider's call ids seen so far: 29-30
/// bytes) are stored inline, without a heap allocation; longer ones in a `Box<str>`.
/// So building, cloning and dropping a record with a typical id never touches the
/// allocator: measured in `cargo bench --bench append`, where freeing the ids the
/// tracker no longer needs was the largest cost of a realistic append after the hash
/// probes.
#[derive(Clone)]
pub struct CallId(Repr);

#[derive(Clone)]
enum Repr {
    /// `bytes[..len]` is the id, valid UTF-8 (it was copied from a `str`).
    Inline {
        len: u8,
        bytes: [u8; CallId::INLINE],
    },
    Heap(Box<str>),
}

impl CallId {
    /// The longest id stored inline, in bytes; longer ids take one heap allocation.
    pub const INLINE: usize = 38;

    /// Wraps a string as a call id. **O(len)**: an id of up to [`CallId::INLINE`]
    /// bytes is copied inline (an owned string's buffer is then freed); a longer
    /// `String` or `Box<str>` is kept as it is.
    pub fn new(id: impl Into<CallId>) -> Self {
        id.into()
    }

    fn inline(id: &str) -> Option<Self> {
        let len = id.len();
        if len > Self::INLINE {
            return None;
        }
        let mut bytes = [0; Self::INLINE];
        bytes[..len].copy_from_slice(id.as_bytes());
        // `len <= INLINE < 256`.
        Some(CallId(Repr::Inline {
            len: len as u8,
            bytes,
        }))
    }

    /// The id as a string slice. **O(1)** for a long id; **O(len)** for an inline one
    /// (its bytes are checked to be UTF-8 again, because this crate forbids `unsafe`:
    /// a few nanoseconds for a 30-byte ASCII id; the tracker hashes
    /// [`as_bytes`](CallId::as_bytes) instead).
    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Inline { len, bytes } => {
                // Copied from a `str` in `inline`, and never changed since.
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            Repr::Heap(id) => id,
        }
    }

    /// The id's bytes (UTF-8). **O(1)**.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Heap(id) => id.as_bytes(),
        }
    }

    /// The id's length in bytes. **O(1)**.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// Bytes this id holds on the heap: 0 when inline. **O(1)**.
    pub(crate) fn heap_bytes(&self) -> usize {
        match &self.0 {
            Repr::Inline { .. } => 0,
            Repr::Heap(id) => id.len(),
        }
    }

    /// Whether the id is the empty string (which the tracker refuses). **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.as_bytes().is_empty()
    }
}

impl PartialEq for CallId {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for CallId {}

impl std::hash::Hash for CallId {
    /// Hashes exactly as the `str` does (its bytes, then `0xff`: `Hasher::write_str`'s
    /// default), so that `Borrow<str>` lookups work, without re-checking UTF-8.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write(self.as_bytes());
        state.write_u8(0xff);
    }
}

impl PartialOrd for CallId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CallId {
    /// The order of the ids' strings (byte order).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl Deref for CallId {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for CallId {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for CallId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for CallId {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl From<&str> for CallId {
    fn from(id: &str) -> Self {
        CallId::inline(id).unwrap_or_else(|| CallId(Repr::Heap(id.into())))
    }
}

impl From<String> for CallId {
    fn from(id: String) -> Self {
        CallId::inline(&id).unwrap_or_else(|| CallId(Repr::Heap(id.into_boxed_str())))
    }
}

impl From<Box<str>> for CallId {
    fn from(id: Box<str>) -> Self {
        CallId::inline(&id).unwrap_or(CallId(Repr::Heap(id)))
    }
}

impl From<&String> for CallId {
    fn from(id: &String) -> Self {
        CallId::from(id.as_str())
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq<str> for CallId {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for CallId {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
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
    /// result) lives in the compaction layer (`cutpoint::compact`).
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

    /// Splits the record into its kind, token count and whether it is [bound to the
    /// previous record](Record::bound_to_previous). **O(1)**.
    pub fn into_parts(self) -> (RecordKind, u64, bool) {
        (self.kind, self.tokens, self.bound)
    }

    /// The same record with `tokens` tokens, its kind and binding kept. **O(1)**.
    #[must_use]
    pub fn with_tokens(mut self, tokens: u64) -> Self {
        self.tokens = tokens;
        self
    }
}

#[cfg(test)]
mod call_id_tests {
    use super::CallId;
    use std::collections::HashMap;

    /// Inline and heap ids behave as the strings they hold: equality across
    /// representations, `Borrow<str>` lookups, order, display.
    #[test]
    fn inline_and_heap_ids_behave_as_their_strings() {
        let short = "toolu_01A09q90qw90lq917835lq9";
        let long = "fc_0123456789abcdef0123456789abcdef0123456789abcdef";
        let edge = "x".repeat(CallId::INLINE);
        let over = "y".repeat(CallId::INLINE + 1);
        for id in [short, long, "", "é✓", edge.as_str(), over.as_str()] {
            let forms = [
                CallId::from(id),
                CallId::from(id.to_owned()),
                CallId::from(Box::<str>::from(id)),
                CallId::new(id),
            ];
            for f in &forms {
                assert_eq!(f.as_str(), id);
                assert_eq!(f.as_bytes(), id.as_bytes());
                assert_eq!(f.len(), id.len());
                assert_eq!(f, &forms[0]);
                assert_eq!(*f, id);
                assert_eq!(f.to_string(), id);
                assert_eq!(format!("{f:?}"), format!("{id:?}"));
                assert_eq!(
                    f.heap_bytes(),
                    if id.len() > CallId::INLINE {
                        id.len()
                    } else {
                        0
                    }
                );
            }
            let map: HashMap<CallId, u8> = HashMap::from([(forms[1].clone(), 1)]);
            assert_eq!(map.get(id), Some(&1), "Borrow<str> lookup of {id:?}");
        }
        let mut ids: Vec<CallId> = ["g", long, "a"].into_iter().map(CallId::from).collect();
        ids.sort();
        assert_eq!(
            ids.iter().map(CallId::as_str).collect::<Vec<_>>(),
            ["a", long, "g"]
        );
    }
}
