//! Live turns: records that stream in (open, grow, close) and the [`Event`]s an agent
//! loop feeds the tracker as a turn streams.
//!
//! A provider streams an assistant message block by block: a text block grows by
//! deltas; a `tool_use` block announces its id first and then streams its arguments.
//! The tracker follows that shape:
//!
//! ```text
//!   Opened(record) ─▶ Delta{tokens}* ─▶ Closed ─▶ ... ─▶ TurnEnded
//!         │                 │              │
//!         │                 │              └─ decides the cut after the record
//!         │                 └─ O(1): the last prefix sum grows
//!         └─ a tool_use is pending from here on (its id is known at block start)
//! ```
//!
//! While a record is open, **no cut after it is legal**: not cut `len`, whatever is
//! pending, because compacting a record that is still being written would keep its
//! tail or lose its head. Nothing else about the log can change while it is open (no
//! record may be appended after an open one), so the cut after it is decided exactly
//! at [`close`](Tracker::close), as [`append`](Tracker::append) would have decided it:
//! streaming a record as open, deltas and close leaves the tracker exactly as appending
//! the finished record does (`tests/events.rs` checks this against the reference).
//!
//! Everything here is sans-IO, like the rest of the core: the async adapter lives in
//! [`stream`](crate::stream) (feature `stream`).

use crate::error::AppendError;
use crate::record::Record;
use crate::tracker::{Appended, Tracker};

/// One step of a live turn. An agent loop maps its provider's stream onto these and
/// hands them to [`Tracker::handle`] (or to the [`stream`](crate::stream) adapter).
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
}

/// What [`Tracker::handle`] did with an [`Event`].
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
}

/// Why an [`Event`] was refused. A refused event leaves the tracker exactly as it was.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EventError {
    /// The record was refused (a repeated call id, a record appended while another is
    /// open, ...).
    #[error(transparent)]
    Append(#[from] AppendError),
    /// A delta or close arrived while no record was open.
    #[error("{event} at record {len}: no record is open")]
    NotOpen {
        /// `delta` or `close`.
        event: &'static str,
        /// Number of records in the log.
        len: usize,
    },
    /// The turn ended while a record was still open.
    #[error("turn ended while the record at {open_at} is still open")]
    TurnEndedWhileOpen {
        /// Position of the open record.
        open_at: usize,
    },
    /// A usage report arrived before any record.
    #[error("usage reported ({tokens} tokens) for an empty log")]
    EmptyLog {
        /// The reported size.
        tokens: u64,
    },
    /// The total token count would pass `u64::MAX`.
    #[error("record {at}: {tokens} tokens would overflow the log's total ({before} before it)")]
    TokenOverflow {
        /// Position of the record.
        at: usize,
        /// The record's new size, or the delta.
        tokens: u64,
        /// Tokens of the records before it.
        before: u64,
    },
}

impl Tracker {
    /// Appends `record` open: it may grow ([`grow`](Tracker::grow)) and take its final
    /// size ([`set_last_tokens`](Tracker::set_last_tokens)) until
    /// [`close`](Tracker::close). A `tool_use` is pending from now on. The cut after an
    /// open record is never legal. **O(1)** amortized, as [`append`](Tracker::append).
    ///
    /// ```
    /// use cutpoint::{Record, Tracker};
    /// let mut t = Tracker::new();
    /// t.append(Record::user(100))?;
    /// t.open(Record::assistant(0))?;
    /// t.grow(40)?;
    /// assert!(!t.is_legal_cut(2)); // still streaming
    /// assert!(t.close()?);        // now complete, nothing pending
    /// assert!(t.is_legal_cut(2) && t.total_tokens() == 140);
    /// # Ok::<(), cutpoint::EventError>(())
    /// ```
    ///
    /// # Errors
    /// As [`append`](Tracker::append); on error the tracker is unchanged.
    pub fn open(&mut self, record: Record) -> Result<Appended, AppendError> {
        self.push_record(record, true)
    }

    /// Adds `tokens` to the open record and returns its size now. **O(1)**: only the
    /// last prefix sum changes, and no cut is affected (none after it is legal).
    ///
    /// # Errors
    /// [`EventError::NotOpen`] when no record is open, [`EventError::TokenOverflow`];
    /// on error the tracker is unchanged.
    pub fn grow(&mut self, tokens: u64) -> Result<u64, EventError> {
        let len = self.len();
        if !self.last_open {
            return Err(EventError::NotOpen {
                event: "delta",
                len,
            });
        }
        let at = len - 1;
        let total = self
            .total_tokens()
            .checked_add(tokens)
            .ok_or(EventError::TokenOverflow {
                at,
                tokens,
                before: self.total_tokens(),
            })?;
        self.sums.set_last(total);
        Ok(self.sums.record(at))
    }

    /// Closes the open record and decides the cut after it: legal iff no call is
    /// pending, exactly as [`append`](Tracker::append) decides. Returns that decision.
    /// **O(1)**.
    ///
    /// # Errors
    /// [`EventError::NotOpen`] when no record is open; the tracker is unchanged.
    pub fn close(&mut self) -> Result<bool, EventError> {
        let len = self.len();
        if !self.last_open {
            return Err(EventError::NotOpen {
                event: "close",
                len,
            });
        }
        self.last_open = false;
        let legal = self.cut_at_len_is_legal();
        if legal {
            self.cuts.push(len);
        }
        Ok(legal)
    }

    /// Replaces the size of the last record (open or closed) by `tokens`, the count a
    /// provider reports once a message is done. **O(1)**; no cut changes.
    ///
    /// # Errors
    /// [`EventError::EmptyLog`], [`EventError::TokenOverflow`]; on error the tracker is
    /// unchanged.
    pub fn set_last_tokens(&mut self, tokens: u64) -> Result<(), EventError> {
        let Some(at) = self.len().checked_sub(1) else {
            return Err(EventError::EmptyLog { tokens });
        };
        let before = self.sums.before(at);
        let total = before
            .checked_add(tokens)
            .ok_or(EventError::TokenOverflow { at, tokens, before })?;
        self.sums.set_last(total);
        Ok(())
    }

    /// Position of the open record, if the last record is open. **O(1)**.
    pub fn open_record(&self) -> Option<usize> {
        self.last_open.then(|| self.len() - 1)
    }

    /// Applies one event of a live turn. **O(1)** amortized (see each operation).
    ///
    /// ```
    /// use cutpoint::{Event, Record, Tracker};
    /// let mut t = Tracker::new();
    /// for event in [
    ///     Event::Record(Record::user(500)),
    ///     Event::Opened(Record::assistant(0)),
    ///     Event::Delta { tokens: 30 },
    ///     Event::Closed,
    ///     Event::Opened(Record::tool_use("toolu_1", 0).bound_to_previous()),
    ///     Event::Delta { tokens: 12 },
    ///     Event::Closed,
    ///     Event::UsageReported { tokens: 15 },
    ///     Event::TurnEnded,
    /// ] {
    ///     t.handle(event)?;
    /// }
    /// assert_eq!(t.total_tokens(), 545);
    /// assert_eq!(t.pending_count(), 1); // the tool runs now
    /// assert_eq!(t.legal_cuts().collect::<Vec<_>>(), [0, 1]);
    /// # Ok::<(), cutpoint::EventError>(())
    /// ```
    ///
    /// # Errors
    /// See [`EventError`]; a refused event leaves the tracker unchanged.
    pub fn handle(&mut self, event: Event) -> Result<Handled, EventError> {
        Ok(match event {
            Event::Record(record) => Handled::Appended(self.append(record)?),
            Event::Opened(record) => Handled::Opened(self.open(record)?),
            Event::Delta { tokens } => {
                let size = self.grow(tokens)?;
                Handled::Grew {
                    at: self.len() - 1,
                    tokens: size,
                }
            }
            Event::Closed => Handled::Closed {
                cut_after_is_legal: self.close()?,
                at: self.len() - 1,
            },
            Event::UsageReported { tokens } => {
                self.set_last_tokens(tokens)?;
                Handled::Resized {
                    at: self.len() - 1,
                    tokens,
                }
            }
            Event::TurnEnded => {
                if let Some(open_at) = self.open_record() {
                    return Err(EventError::TurnEndedWhileOpen { open_at });
                }
                Handled::TurnEnded {
                    len: self.len(),
                    pending: self.pending_count(),
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_events_change_nothing() {
        let mut t = Tracker::new();
        assert_eq!(
            t.handle(Event::Delta { tokens: 1 }),
            Err(EventError::NotOpen {
                event: "delta",
                len: 0
            })
        );
        assert_eq!(
            t.handle(Event::UsageReported { tokens: 1 }),
            Err(EventError::EmptyLog { tokens: 1 })
        );
        t.open(Record::tool_use("a", 5)).unwrap();
        assert_eq!(
            t.append(Record::user(1)),
            Err(AppendError::RecordOpen { at: 1, open_at: 0 })
        );
        assert_eq!(
            t.handle(Event::TurnEnded),
            Err(EventError::TurnEndedWhileOpen { open_at: 0 })
        );
        assert!(matches!(
            t.grow(u64::MAX),
            Err(EventError::TokenOverflow { at: 0, .. })
        ));
        assert_eq!(t.len(), 1);
        assert_eq!(t.total_tokens(), 5);
        assert_eq!(t.open_record(), Some(0));
        t.assert_invariants();
        assert_eq!(t.close(), Ok(false), "the call is pending");
        assert_eq!(
            t.close(),
            Err(EventError::NotOpen {
                event: "close",
                len: 1
            })
        );
        t.assert_invariants();
    }

    #[test]
    fn usage_replaces_the_estimate_of_a_closed_record() {
        let mut t = Tracker::new();
        t.append(Record::user(10)).unwrap();
        t.append(Record::assistant(99)).unwrap();
        t.set_last_tokens(7).unwrap();
        assert_eq!(t.total_tokens(), 17);
        assert_eq!(t.record_tokens(1), Some(7));
        assert_eq!(t.tokens_before(1), Some(10));
        t.assert_invariants();
    }
}
