//! In-place edits of entries that keep every record's kind, call id and binding: a
//! result's content replaced by a placeholder, a call's arguments by `{}`, a thinking
//! record cleared. Pairing never changes (a cleared result still answers its call);
//! only sizes and payloads do, and the tracker's prefix sums follow exactly
//! ([`Tracker::set_tokens`](crate::Tracker::set_tokens)).

use super::{Log, Payload};
use crate::TokensError;

/// One in-place edit for [`Log::rewrite_entries`]: entry `at` gets `tokens` tokens and
/// `payload`, its kind, call id and binding unchanged.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Rewrite {
    /// The entry.
    pub at: usize,
    /// Its new size.
    pub tokens: u64,
    /// Its new payload.
    pub payload: Payload,
}

/// Why [`Log::rewrite_entries`] refused a batch. The log is then unchanged.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// The tracker refused the sizes (a position out of range or out of order, an
    /// overflowing total).
    #[error(transparent)]
    Tokens(#[from] TokensError),
    /// The new payload does not fit the entry's kind (a result payload on a call, ...).
    #[error("entry {at}: a {payload} payload does not fit a {kind} record")]
    PayloadKind {
        /// The entry.
        at: usize,
        /// The record's kind.
        kind: &'static str,
        /// The payload offered.
        payload: &'static str,
    },
    /// The entry is the latest compaction record or before it ([`Log::live_from`]):
    /// kept as it is.
    #[error(
        "entry {at} is at or before the compaction record at {compaction_at}; it is kept as it is"
    )]
    Pinned {
        /// The entry.
        at: usize,
        /// Position of the latest compaction record.
        compaction_at: usize,
    },
    /// The entry is kept verbatim where it is ([`Payload::Kept`]: a control item, a
    /// block that loaded a tool).
    #[error("entry {at} is kept as it is (a control item or a block that loaded a tool)")]
    Kept {
        /// The entry.
        at: usize,
    },
}

fn payload_name(p: &Payload) -> &'static str {
    match p {
        Payload::Call { .. } => "call",
        Payload::Result { .. } => "result",
        Payload::Summary { .. } => "summary",
        Payload::Reasoning { .. } => "reasoning",
        Payload::Compaction(_) => "compaction",
        Payload::Kept => "kept",
        _ => "empty",
    }
}

impl Log {
    /// Gives entries new sizes and payloads in place, their records' kinds, call ids
    /// and bindings unchanged: `edits` in log order, each entry once. Returns the new
    /// total. **O(k + the tracker's [`set_tokens`](crate::Tracker::set_tokens))** for
    /// `k` edits (plus the payloads moved in): proportional to what changed, never a
    /// pass over the log.
    ///
    /// ```
    /// use cutpoint::compact::{Entry, Log, Payload, ResultStatus, Rewrite};
    /// use cutpoint::Record;
    /// let mut log = Log::from_entries([
    ///     Entry::from(Record::user(100)),
    ///     Entry::from(Record::tool_use("a", 10)),
    ///     Entry::new(Record::tool_result("a", 5_000), Payload::Result {
    ///         status: Some(ResultStatus::Ok),
    ///         content: Some("a long listing".into()),
    ///     }),
    /// ])?;
    /// let cleared = Payload::Result { status: Some(ResultStatus::Ok), content: Some("[cleared]".into()) };
    /// assert_eq!(log.rewrite_entries(vec![Rewrite { at: 2, tokens: 3, payload: cleared }])?, 113);
    /// assert_eq!(log.entries()[2].record.tokens(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`EditError`] when a position is out of range or out of order, at or before the
    /// latest compaction record or kept ([`Payload::Kept`]), a payload does not fit
    /// its record's kind (a compaction or kept payload fits none), or the total would overflow. The log is then
    /// unchanged.
    pub fn rewrite_entries(&mut self, edits: Vec<Rewrite>) -> Result<u64, EditError> {
        let len = self.entries.len();
        for e in &edits {
            let Some(entry) = self.entries.get(e.at) else {
                return Err(TokensError::OutOfRange { at: e.at, len }.into());
            };
            if let Some(compaction_at) = self.compaction.filter(|&c| e.at <= c) {
                return Err(EditError::Pinned {
                    at: e.at,
                    compaction_at,
                });
            }
            if entry.kept() {
                return Err(EditError::Kept { at: e.at });
            }
            let kind = entry.record.kind();
            let fits = match (&e.payload, kind) {
                (Payload::None, _) => true,
                (Payload::Call { .. }, crate::RecordKind::ToolUse(_))
                | (Payload::Result { .. }, crate::RecordKind::ToolResult(_))
                | (Payload::Reasoning { .. }, crate::RecordKind::Assistant) => true,
                (Payload::Summary { units, .. }, crate::RecordKind::Summary(ids)) => {
                    units.iter().map(|u| &u.call_id).eq(ids.iter())
                }
                _ => false,
            };
            if !fits {
                return Err(EditError::PayloadKind {
                    at: e.at,
                    kind: kind.name(),
                    payload: payload_name(&e.payload),
                });
            }
        }
        let sizes: Vec<(usize, u64)> = edits.iter().map(|e| (e.at, e.tokens)).collect();
        let total = self.tracker.set_tokens(&sizes)?;
        for e in edits {
            let entry = &mut self.entries[e.at];
            entry.record = entry.record.clone().with_tokens(e.tokens);
            entry.payload = e.payload;
        }
        self.changes += 1;
        Ok(total)
    }
}
