//! Decoded items into what an agent loop keeps: a bare [`Tracker`], or a
//! [`compact::Log`](Log) with every record's payload.

use super::{Content, Decoded, Detail};
use crate::compact::{
    ABORTED_RESULT_TEXT, ABORTED_RESULT_TOKENS, Entry, Log, Payload, ResultStatus,
};
use crate::{CallId, Event, EventError, Handled, Record, Tracker};

/// What takes [`Decoded`] items: a [`Tracker`] (the events) or a [`Log`] (the events
/// with each record's payload: a call's name and arguments, a server result's
/// content). A [dropped](Detail::Dropped) record changes a log as the provider
/// readers read the finished message: a withdrawn call becomes an `assistant` record
/// without payload ([`Log::handle`] of [`Event::CallWithdrawn`]), dropped thinking
/// loses its [`Payload::Reasoning`].
pub trait Feed {
    /// Applies one decoded item; `Ok(None)` for an item without an event. **O(1)**
    /// amortized, plus copying the payload into a log. A refused item changes
    /// nothing.
    ///
    /// # Errors
    /// The tracker's [`EventError`] (a record appended while one the caller left open
    /// is still open, a call id used twice, a cap).
    fn feed(&mut self, item: &Decoded) -> Result<Option<Handled>, EventError>;

    /// Closes a record the stream left open (a call cut off by a length limit, an
    /// error or the end of input) and, when it is a call, appends its result as
    /// [`compact::repair`](crate::compact::repair) would: status aborted,
    /// [`ABORTED_RESULT_TEXT`], [`ABORTED_RESULT_TOKENS`] tokens. Returns the aborted
    /// call's id; `Ok(None)` when no record is open (or the open one is not a call,
    /// which is just closed). **O(k)** over the `k` pending calls.
    ///
    /// # Errors
    /// The tracker's [`EventError`] on appending the result (a cap).
    fn abort_open(&mut self) -> Result<Option<CallId>, EventError>;
}

/// The call whose `tool_use` is the open record, if any. **O(k)**.
fn open_call(tracker: &Tracker) -> Option<CallId> {
    let at = tracker.open_record()?;
    tracker
        .pending_calls()
        .into_iter()
        .find(|p| p.at == at)
        .map(|p| p.id.clone())
}

impl Feed for Tracker {
    fn feed(&mut self, item: &Decoded) -> Result<Option<Handled>, EventError> {
        item.event.clone().map(|e| self.handle(e)).transpose()
    }

    fn abort_open(&mut self) -> Result<Option<CallId>, EventError> {
        if self.open_record().is_none() {
            return Ok(None);
        }
        let call = open_call(self);
        self.handle(Event::Closed)?;
        if let Some(id) = &call {
            self.append(Record::tool_result(id.clone(), ABORTED_RESULT_TOKENS))?;
        }
        Ok(call)
    }
}

impl Feed for Log {
    fn feed(&mut self, item: &Decoded) -> Result<Option<Handled>, EventError> {
        match (&item.event, &item.detail) {
            (Some(Event::Opened(record)), Detail::Opened(content)) => {
                // The arguments are not known yet: the payload gets them at close.
                let payload = match content {
                    Content::Call {
                        name,
                        programmatic: false,
                        ..
                    } => Payload::Call {
                        name: Some(name.clone()),
                        arguments: None,
                    },
                    other => other.payload(),
                };
                let appended = self.open(Entry::new(record.clone(), payload))?;
                Ok(Some(Handled::Opened(appended)))
            }
            (Some(Event::Closed), Detail::Closed(content)) => {
                let handled = self.handle(Event::Closed)?;
                self.set_last_payload(content.payload());
                Ok(Some(handled))
            }
            (None, Detail::Dropped { records_after, .. }) => {
                // Thinking the provider dropped: read as text, as the reader reads it.
                let back = records_after.saturating_add(1);
                if let Some(at) = self.len().checked_sub(back) {
                    self.reasoning_dropped(at);
                }
                Ok(None)
            }
            (None, Detail::Ended(ending)) => {
                // A call left open keeps the arguments that came.
                if let Some(content @ Content::Call { .. }) = &ending.left_open {
                    if self.tracker().open_record().is_some() {
                        self.set_last_payload(content.payload());
                    }
                }
                Ok(None)
            }
            (Some(event), _) => self.handle(event.clone()).map(Some),
            (None, _) => Ok(None),
        }
    }

    fn abort_open(&mut self) -> Result<Option<CallId>, EventError> {
        if self.tracker().open_record().is_none() {
            return Ok(None);
        }
        let call = open_call(self.tracker());
        self.handle(Event::Closed)?;
        if let Some(id) = &call {
            self.append(Entry::new(
                Record::tool_result(id.clone(), ABORTED_RESULT_TOKENS),
                Payload::Result {
                    status: Some(ResultStatus::Aborted),
                    content: Some(ABORTED_RESULT_TEXT.to_owned()),
                },
            ))?;
        }
        Ok(call)
    }
}
