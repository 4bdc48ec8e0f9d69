//! Caps that keep a hostile or runaway stream from exhausting memory.
//!
//! What grows with the input, and what bounds it:
//!
//! | grows with                                  | bytes each         | capped by                        |
//! |---------------------------------------------|--------------------|----------------------------------|
//! | records (prefix sums, legal cuts)           | about 4.4          | [`Limits::max_records`]          |
//! | answered calls (fingerprints, filter)       | about 21           | [`Limits::max_records`] (below)  |
//! | open calls (pending calls, early results)   | about 64 (+ id past 38 bytes) | [`Limits::max_open_calls`] |
//! | one call id (of a call, result or summary)  | its length         | [`Limits::max_call_id_bytes`]    |
//! | one input line (readers only)               | its length         | [`Limits::max_line_bytes`]       |
//!
//! Summary records are checked too; see [`Limits`].
//!
//! With the defaults a tracker holds at most about 16.8 million records (about 4.4
//! bytes each: 75 MB) and fewer than 2 x 16.8 million answered calls (about 21 bytes
//! each: 700 MB, reached only when summaries cover as many calls as the records cap;
//! without summaries each answered call takes two records), before the up-to-2x growth
//! slack of vectors and tables; and at most 65,536 open calls whose
//! ids take at most 16 MiB. A record past a cap is refused with
//! [`AppendError::LimitExceeded`], which names the cap, its value and the position, and
//! leaves the tracker exactly as it was.

use std::fmt;

use crate::error::AppendError;
use crate::index::MAX_RECORDS;
use crate::record::{CallId, Record, RecordKind};
use crate::tracker::Tracker;

/// Configurable caps on what a [`Tracker`] (and a reader feeding it) will hold.
///
/// Fields are public so that a caller can change one and keep the other defaults:
///
/// ```
/// use cutpoint::{Limits, Record, Tracker};
/// let mut limits = Limits::default();
/// limits.max_records = 2;
/// let mut t = Tracker::with_limits(limits);
/// t.append(Record::user(1))?;
/// t.append(Record::user(1))?;
/// let refused = t.append(Record::user(1)).unwrap_err();
/// assert_eq!(refused.to_string(), "record 2: 3 records would pass the cap of 2 (Limits::max_records)");
/// assert_eq!(t.len(), 2);
/// # Ok::<(), cutpoint::AppendError>(())
/// ```
///
/// # Summary records
///
/// Summary records ([`RecordKind::Summary`]) meet the caps too. Each id a summary covers
/// must fit [`Limits::max_call_id_bytes`]. A summary opens no call (its ids count as
/// called and answered at once, and an id already open is refused), so it never
/// counts against [`Limits::max_open_calls`]; but one summary can cover any number of
/// calls, each remembered as an answered call. So a summary is refused
/// ([`Limit::AnsweredCalls`]) when the answered calls would pass
/// [`Limits::max_records`]. Every other answered call took a `tool_use` record of its
/// own, so a tracker appended from scratch remembers fewer than `2 * max_records`
/// answered calls: at most one per record, plus at most `max_records` covered by
/// summaries. (A tracker compacted in place with
/// [`replace_region`](Tracker::replace_region) keeps remembering the ids of the calls
/// it compacted away, 16 bytes each, so that a reused id is still caught; that grows
/// with everything the tracker ever saw, not with the log it holds now.)
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Limits {
    /// Records one log may hold. Default [`Limits::DEFAULT_MAX_RECORDS`]; values above
    /// [`MAX_RECORDS`] act as [`MAX_RECORDS`].
    pub max_records: usize,
    /// Calls open at once: `tool_use`s still waiting for their result plus
    /// `tool_result`s still waiting for their call. Each keeps its id as a string.
    /// Default [`Limits::DEFAULT_MAX_OPEN_CALLS`].
    pub max_open_calls: usize,
    /// Bytes of one call id. Default [`Limits::DEFAULT_MAX_CALL_ID_BYTES`].
    pub max_call_id_bytes: usize,
    /// Bytes of one input line, for the readers that feed a tracker (the tracker itself
    /// never sees lines). Default [`Limits::DEFAULT_MAX_LINE_BYTES`].
    pub max_line_bytes: usize,
}

impl Limits {
    /// 2^24 records: about 16.8 million, hundreds of times a long agent session.
    pub const DEFAULT_MAX_RECORDS: usize = 1 << 24;
    /// 65,536 open calls: far beyond any real turn's parallel tool calls.
    pub const DEFAULT_MAX_OPEN_CALLS: usize = 1 << 16;
    /// 256 bytes: provider ids are 30 to 40 (`toolu_…`, `call_…`, UUIDs).
    pub const DEFAULT_MAX_CALL_ID_BYTES: usize = 256;
    /// 1 MiB: a records JSONL line is a few dozen bytes; provider messages with large
    /// tool outputs fit too.
    pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;

    /// No caps beyond what the index can address ([`MAX_RECORDS`]). For trusted input
    /// only. **O(1)**.
    pub fn unbounded() -> Self {
        Limits {
            max_records: MAX_RECORDS,
            max_open_calls: usize::MAX,
            max_call_id_bytes: usize::MAX,
            max_line_bytes: usize::MAX,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_records: Self::DEFAULT_MAX_RECORDS,
            max_open_calls: Self::DEFAULT_MAX_OPEN_CALLS,
            max_call_id_bytes: Self::DEFAULT_MAX_CALL_ID_BYTES,
            max_line_bytes: Self::DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// Which cap a refused record would have passed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Limit {
    /// [`Limits::max_records`].
    Records,
    /// [`Limits::max_open_calls`].
    OpenCalls,
    /// [`Limits::max_call_id_bytes`].
    CallIdBytes,
    /// [`Limits::max_line_bytes`].
    LineBytes,
    /// [`Limits::max_records`], counting answered calls: a summary covering more calls
    /// than the cap leaves room for (see [`Limits`], "Summary records").
    AnsweredCalls,
}

impl Limit {
    /// The field of [`Limits`] that sets this cap. **O(1)**.
    pub fn field(self) -> &'static str {
        match self {
            Limit::Records | Limit::AnsweredCalls => "max_records",
            Limit::OpenCalls => "max_open_calls",
            Limit::CallIdBytes => "max_call_id_bytes",
            Limit::LineBytes => "max_line_bytes",
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Limit::Records => "records",
            Limit::OpenCalls => "open calls",
            Limit::CallIdBytes => "call id bytes",
            Limit::LineBytes => "line bytes",
            Limit::AnsweredCalls => "answered calls",
        })
    }
}

impl Tracker {
    /// An empty tracker with the given caps (and lenient [`Mode`](crate::Mode)). **O(1)**.
    pub fn with_limits(limits: Limits) -> Self {
        let mut tracker = Tracker::new();
        tracker.limits = limits;
        tracker
    }

    /// The caps in force. **O(1)**.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Replaces the caps. Records already held stay, even past a lowered cap; only
    /// later appends are checked. **O(1)**.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Refuses `record` if appending it would pass a cap. Reads only. **O(1)**, plus
    /// one hash of the call id when the open-call cap is reached (to tell whether the
    /// record closes a call or opens one).
    pub(crate) fn check_limits(&self, record: &Record) -> Result<(), AppendError> {
        let at = self.len();
        let limits = &self.limits;
        let exceeded = |limit, max, value| {
            Err(AppendError::LimitExceeded {
                at,
                limit,
                max,
                value,
            })
        };
        let max_records = limits.max_records.min(MAX_RECORDS);
        if at >= max_records {
            return exceeded(Limit::Records, max_records, at.saturating_add(1));
        }
        let id = match record.kind() {
            RecordKind::ToolUse(id) | RecordKind::ToolResult(id) => id,
            RecordKind::Summary(ids) => return self.check_summary_limits(ids),
            RecordKind::User | RecordKind::Assistant => return Ok(()),
        };
        if id.len() > limits.max_call_id_bytes {
            return exceeded(Limit::CallIdBytes, limits.max_call_id_bytes, id.len());
        }
        let open = self.calls.open_len();
        if open >= limits.max_open_calls && !id.is_empty() {
            let fp = self.calls.fingerprint(id);
            let opens = match record.kind() {
                RecordKind::ToolUse(_) => {
                    // A reused id is refused as a duplicate call by `append` itself.
                    !self.calls.is_early(&fp) && self.calls.seen_use(&fp).is_none()
                }
                _ => {
                    !self.calls.is_pending(&fp)
                        && !self.calls.is_completed(&fp)
                        && !self.calls.is_early(&fp)
                }
            };
            if opens {
                return exceeded(Limit::OpenCalls, limits.max_open_calls, open + 1);
            }
        }
        Ok(())
    }

    /// The caps a summary covering `ids` must meet: each id within
    /// [`Limits::max_call_id_bytes`], and the answered calls, these included, within
    /// [`Limits::max_records`]. Covered ids never open a call, so the open-call cap
    /// does not apply. **O(k)** for `k` ids (their lengths only; no hashing).
    fn check_summary_limits(&self, ids: &[CallId]) -> Result<(), AppendError> {
        let at = self.len();
        let limits = &self.limits;
        if let Some(long) = ids.iter().find(|id| id.len() > limits.max_call_id_bytes) {
            return Err(AppendError::LimitExceeded {
                at,
                limit: Limit::CallIdBytes,
                max: limits.max_call_id_bytes,
                value: long.len(),
            });
        }
        let max = limits.max_records.min(MAX_RECORDS);
        let answered = self.calls.completed_len().saturating_add(ids.len());
        if answered > max {
            return Err(AppendError::LimitExceeded {
                at,
                limit: Limit::AnsweredCalls,
                max,
                value: answered,
            });
        }
        Ok(())
    }
}
