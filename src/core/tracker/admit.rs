//! Strict and lenient modes: what a tracker does with a record that breaks pairing.
//!
//! Three events break the pairing of a clean log without making it unreadable:
//! a `tool_result` with no `tool_use` before it (an orphan), a second `tool_result` for
//! one id (a duplicate), and a `tool_use` whose result came before it. In
//! [`Mode::Lenient`] (the default) the tracker accepts them, as the seed does, counts
//! them in [`Anomalies`](crate::Anomalies) and reports each in
//! [`Appended::anomaly`](crate::Appended::anomaly). In [`Mode::Strict`] it refuses them
//! with [`AppendError::Violation`] and stays exactly as it was.
//!
//! A second `tool_use` with one id is refused in both modes
//! ([`AppendError::DuplicateCall`]): the two calls could never be told apart.

use std::fmt;

use crate::error::AppendError;
use crate::record::{CallId, Record, RecordKind};
use crate::tracker::Tracker;

/// How a tracker treats a record that breaks pairing.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Mode {
    /// Accept it, count it, report it in the [`Appended`](crate::Appended) outcome.
    /// The seed's behaviour, and the default.
    #[default]
    Lenient,
    /// Refuse it with [`AppendError::Violation`]; the tracker is unchanged.
    Strict,
}

/// A record that breaks pairing, as strict mode refuses it. Positions are record
/// indexes (0-based).
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum StrictViolation {
    /// A `tool_result` at `at` with no `tool_use` before it.
    OrphanResult {
        /// The result's id.
        call_id: CallId,
        /// Position the refused record would have taken.
        at: usize,
    },
    /// A second `tool_result` for one id.
    DuplicateResult {
        /// The repeated id.
        call_id: CallId,
        /// Position the refused record would have taken.
        at: usize,
        /// Position of the first result, when the tracker still knows it (it does while
        /// that result waits for its call; answered calls are kept as fingerprints only).
        first_result: Option<usize>,
    },
    /// A `tool_use` whose result came before it, at `first_result`.
    UseAfterResult {
        /// The call's id.
        call_id: CallId,
        /// Position the refused record would have taken.
        at: usize,
        /// Position of the earlier result.
        first_result: usize,
    },
}

impl StrictViolation {
    /// The id of the record that breaks pairing. **O(1)**.
    pub fn call_id(&self) -> &CallId {
        match self {
            StrictViolation::OrphanResult { call_id, .. }
            | StrictViolation::DuplicateResult { call_id, .. }
            | StrictViolation::UseAfterResult { call_id, .. } => call_id,
        }
    }

    /// Position the refused record would have taken. **O(1)**.
    pub fn at(&self) -> usize {
        match self {
            StrictViolation::OrphanResult { at, .. }
            | StrictViolation::DuplicateResult { at, .. }
            | StrictViolation::UseAfterResult { at, .. } => *at,
        }
    }
}

impl fmt::Display for StrictViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StrictViolation::OrphanResult { call_id, at } => write!(
                f,
                "record {at}: tool_result {call_id:?} has no tool_use before it (orphan result)"
            ),
            StrictViolation::DuplicateResult {
                call_id,
                at,
                first_result,
            } => {
                write!(
                    f,
                    "record {at}: tool_result {call_id:?} repeats an earlier result"
                )?;
                match first_result {
                    Some(p) => write!(f, " at record {p}"),
                    None => f.write_str(" (the call is answered)"),
                }
            }
            StrictViolation::UseAfterResult {
                call_id,
                at,
                first_result,
            } => write!(
                f,
                "record {at}: tool_use {call_id:?} comes after its result at record {first_result}"
            ),
        }
    }
}

impl Tracker {
    /// The mode in force. **O(1)**.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Switches mode; later appends follow it. Anomalies accepted earlier stay counted.
    /// **O(1)**.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// This tracker in `mode`, for chaining after a constructor. **O(1)**.
    ///
    /// ```
    /// use cutpoint::{AppendError, Mode, Record, Tracker, StrictViolation};
    /// let mut t = Tracker::new().in_mode(Mode::Strict);
    /// let refused = t.append(Record::tool_result("ghost", 5)).unwrap_err();
    /// assert!(matches!(refused, AppendError::Violation(StrictViolation::OrphanResult { at: 0, .. })));
    /// assert!(t.is_empty());
    /// ```
    #[must_use]
    pub fn in_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Everything `append` refuses that the core rules do not: the caps, then (strict
    /// mode) pairing violations. Called first thing in `append`, so a refused record
    /// leaves the tracker untouched. Reads only.
    ///
    /// **O(1)** in lenient mode (plus one hash of the id at the open-call cap);
    /// in strict mode one more hash of a tool record's id, so strict appends of tool
    /// records cost about twice the hashing of lenient ones.
    pub(crate) fn admit(&self, record: &Record) -> Result<(), AppendError> {
        self.check_limits(record)?;
        if self.mode == Mode::Strict {
            if let Some(violation) = self.violation(record) {
                return Err(AppendError::Violation(violation));
            }
        }
        Ok(())
    }

    /// The pairing violation `record` would be, if any. Empty ids are left to `append`,
    /// which refuses them in both modes. **O(len(id))**.
    fn violation(&self, record: &Record) -> Option<StrictViolation> {
        let at = self.len();
        match record.kind() {
            RecordKind::ToolUse(id) if !id.is_empty() => {
                let fp = self.calls.fingerprint(id);
                self.calls
                    .early_at(&fp)
                    .map(|first_result| StrictViolation::UseAfterResult {
                        call_id: id.clone(),
                        at,
                        first_result,
                    })
            }
            RecordKind::ToolResult(id) if !id.is_empty() => {
                let fp = self.calls.fingerprint(id);
                if self.calls.is_pending(&fp) {
                    None
                } else if let Some(first) = self.calls.early_at(&fp) {
                    Some(StrictViolation::DuplicateResult {
                        call_id: id.clone(),
                        at,
                        first_result: Some(first),
                    })
                } else if self.calls.is_completed(&fp) {
                    Some(StrictViolation::DuplicateResult {
                        call_id: id.clone(),
                        at,
                        first_result: None,
                    })
                } else {
                    Some(StrictViolation::OrphanResult {
                        call_id: id.clone(),
                        at,
                    })
                }
            }
            _ => None,
        }
    }
}
