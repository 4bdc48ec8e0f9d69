//! The events of a live turn, as [`Event`] documents; [`Handled`] says what each did.
//! The operations behind them (open, grow, close, usage reports, withdrawals) are in
//! `tracker/input.rs`.

use super::outcome::Appended;
use crate::record::{CallId, Record};

/// One step of a live turn. An agent loop maps its provider's stream onto these and
/// hands them to [`Tracker::handle`](crate::Tracker::handle) (or to the async adapter,
/// feature `stream`).
///
/// A provider streams an assistant message block by block: a text block grows by
/// deltas; a `tool_use` block announces its id first and then streams its arguments.
/// The tracker follows that shape:
///
/// ```text
///   Opened(record) ─▶ Delta{tokens}* ─▶ Closed ─▶ ... ─▶ TurnEnded
///         │                 │              │
///         │                 │              └─ decides the cut after the record
///         │                 └─ O(1): the last prefix sum grows
///         └─ a tool_use is pending from here on (its id is known at block start)
/// ```
///
/// While a record is open, **no cut after it is legal**: not cut `len`, whatever is
/// pending, because compacting a record that is still being written would keep its
/// tail or lose its head. Nothing else about the log can change while it is open (no
/// record may be appended after an open one), so the cut after it is decided exactly
/// at [`close`](crate::Tracker::close), as [`append`](crate::Tracker::append) would
/// have decided it: streaming a record as open, deltas and close leaves the tracker
/// exactly as appending the finished record does (`tests/it/events.rs` checks this
/// against the reference). Everything here is sans-IO, like the rest of the core.
///
/// Non-exhaustive: match with a wildcard arm.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Event {
    /// A complete record in one piece: a user message, a tool result.
    Record(Record),
    /// A record starts streaming. Its kind is known now (a `tool_use` block carries its
    /// id at block start) and its token count is the estimate so far (often 0).
    Opened(Record),
    /// The open record grew by `tokens` (a running estimate).
    Delta {
        /// Tokens added.
        tokens: u64,
    },
    /// The open record is complete.
    Closed,
    /// The provider reported the exact size of the last record (open or closed): it
    /// replaces the running estimate.
    UsageReported {
        /// The record's size.
        tokens: u64,
    },
    /// The model's turn ended (its message is complete). No record may be left open;
    /// calls may still be pending (their tools run now).
    TurnEnded,
    /// The provider dropped a call it had streamed: no result will come for it, so it
    /// no longer waits for one (see [`Tracker::withdraw_call`](crate::Tracker::withdraw_call)).
    /// An Anthropic response that falls back to another model mid-stream (a
    /// `fallback` content block) drops every call before it; the stream decoder sends
    /// this for each.
    CallWithdrawn(CallId),
}

/// What [`Tracker::handle`](crate::Tracker::handle) did with an [`Event`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Handled {
    /// A complete record was appended.
    Appended(Appended),
    /// A record was opened (`cut_after_is_legal` is `false` until it closes).
    Opened(Appended),
    /// The open record at `at` now counts `tokens`.
    Grew {
        /// Position of the open record.
        at: usize,
        /// Its size now.
        tokens: u64,
    },
    /// The record at `at` closed.
    Closed {
        /// Its position.
        at: usize,
        /// Whether the cut right after it (`at + 1`) is legal now.
        cut_after_is_legal: bool,
    },
    /// The last record's size was replaced.
    Resized {
        /// Its position.
        at: usize,
        /// Its size now.
        tokens: u64,
    },
    /// The turn ended with `pending` calls still in flight.
    TurnEnded {
        /// Number of records in the log.
        len: usize,
        /// Calls whose result has not landed yet.
        pending: usize,
    },
    /// The call whose `tool_use` is at `at` was withdrawn: it waits for no result.
    Withdrawn {
        /// Position of its `tool_use`.
        at: usize,
        /// Whether cut `len` (the end of the log) is legal now: no other call is
        /// pending and the last record is closed.
        end_is_legal: bool,
    },
}
