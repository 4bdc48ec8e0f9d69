//! A tracker's configuration: the caps that keep a hostile or runaway stream from
//! exhausting memory ([`Limits`]), and what it does with a record that breaks pairing
//! ([`Mode`]). Types only; the checks are in the tracker's admission step.
//!
//! # Caps
//!
//! What grows with the input, and what bounds it:
//!
//! | grows with                                  | bytes each         | capped by                        |
//! |---------------------------------------------|--------------------|----------------------------------|
//! | records (prefix sums, legal cuts)           | about 4.4          | [`Limits::max_records`]          |
//! | answered calls (fingerprints, filter)       | about 19           | [`Limits::max_records`] (below)  |
//! | open calls (pending calls, early results)   | about 64 (+ id past 38 bytes) | [`Limits::max_open_calls`] |
//! | one call id (of a call, result or summary)  | its length         | [`Limits::max_call_id_bytes`]    |
//! | one input line (readers only)               | its length         | [`Limits::max_line_bytes`]       |
//!
//! Summary records are checked too; see [`Limits`].
//!
//! With the defaults a tracker holds at most about 16.8 million records (about 4.4
//! bytes each: 75 MB) and fewer than 2 x 16.8 million answered calls (about 19 bytes
//! each: 640 MB, reached only when summaries cover as many calls as the records cap;
//! without summaries each answered call takes two records), before the up-to-2x growth
//! slack of vectors and tables; and at most 65,536 open calls whose
//! ids take at most 16 MiB. A record past a cap is refused with
//! [`AppendError::LimitExceeded`](crate::AppendError::LimitExceeded), which names the cap, its value and the position, and
//! leaves the tracker exactly as it was.

use std::fmt;

use super::index::MAX_RECORDS;

/// Configurable caps on what a [`Tracker`](crate::Tracker) (and a reader feeding it) will hold.
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
/// Summary records ([`RecordKind::Summary`](crate::RecordKind::Summary)) meet the caps too. Each id a summary covers
/// must fit [`Limits::max_call_id_bytes`]. A summary opens no call (its ids count as
/// called and answered at once, and an id already open is refused), so it never
/// counts against [`Limits::max_open_calls`]; but one summary can cover any number of
/// calls, each remembered as an answered call. So a summary is refused
/// ([`Limit::AnsweredCalls`]) when the answered calls would pass
/// [`Limits::max_records`]. Every other answered call took a `tool_use` record of its
/// own, so a tracker appended from scratch remembers fewer than `2 * max_records`
/// answered calls: at most one per record, plus at most `max_records` covered by
/// summaries. (A tracker compacted in place with
/// [`replace_region`](crate::Tracker::replace_region) keeps remembering the ids of the calls
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

/// How a tracker treats a record that breaks pairing.
///
/// Three events break the pairing of a clean log without making it unreadable: a
/// `tool_result` with no `tool_use` before it (an orphan), a second `tool_result` for
/// one id (a duplicate), and a `tool_use` whose result came before it. In
/// [`Mode::Lenient`] (the default) the tracker accepts them, as the specification's
/// code does, counts them in [`Anomalies`](crate::Anomalies) and reports each in
/// [`Appended::anomaly`](crate::Appended::anomaly). In [`Mode::Strict`] it refuses
/// them with [`AppendError::Violation`](crate::AppendError::Violation) and stays
/// exactly as it was.
///
/// A second `tool_use` with one id is refused in both modes
/// ([`AppendError::DuplicateCall`](crate::AppendError::DuplicateCall)): the two calls
/// could never be told apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Mode {
    /// Accept it, count it, report it in the [`Appended`](crate::Appended) outcome.
    /// The specification's behaviour, and the default.
    #[default]
    Lenient,
    /// Refuse it with [`AppendError::Violation`](crate::AppendError::Violation); the
    /// tracker is unchanged.
    Strict,
}
