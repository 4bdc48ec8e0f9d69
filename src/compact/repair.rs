//! Opt-in repair of logs that arrive broken. Never silent: every change is listed.

use super::validate::{Options, Violation, validate};
use super::{Entry, Payload, ResultStatus};
use crate::{CallId, Record};

/// Tokens counted for an inserted "aborted" result.
pub const ABORTED_RESULT_TOKENS: u64 = 16;

/// The text of an inserted "aborted" result.
pub const ABORTED_RESULT_TEXT: &str =
    "aborted: no result was recorded for this call (inserted by cutpoint repair)";

/// One change [`repair`] made.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Change {
    /// An "aborted" result was inserted for a call that was never answered, at this
    /// position of the repaired log (before the next assistant turn, or at the end).
    InsertedAborted {
        /// The call.
        call_id: CallId,
        /// Position in the repaired log.
        at: usize,
    },
    /// A result with no call was dropped (position in the input).
    DroppedOrphan {
        /// Its id.
        call_id: CallId,
        /// Position in the input.
        at: usize,
    },
    /// A second result (or one for a call a summary covers) was dropped (position in
    /// the input).
    DroppedDuplicate {
        /// Its id.
        call_id: CallId,
        /// Position in the input.
        at: usize,
    },
}

/// What [`repair`] changed, and what it could not.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct RepairReport {
    /// Every change: the drops in input order, then the insertions in output order.
    pub changes: Vec<Change>,
    /// Violations repair does not touch (repeated call ids, results out of position,
    /// argument loss): they need a human or the producer fixed.
    pub unrepaired: Vec<Violation>,
}

/// The synthesized "aborted" result for `call_id`: status [`ResultStatus::Aborted`],
/// [`ABORTED_RESULT_TEXT`], [`ABORTED_RESULT_TOKENS`] tokens. The one definition, for
/// [`repair`] and for closing dead calls (`Log::abort_calls`). **O(1)**.
pub(crate) fn aborted_result(call_id: CallId) -> Entry {
    Entry::new(
        Record::tool_result(call_id, ABORTED_RESULT_TOKENS),
        Payload::Result {
            status: Some(ResultStatus::Aborted),
            content: Some(ABORTED_RESULT_TEXT.to_owned()),
        },
    )
}

/// Repairs `log`: inserts a deterministic "aborted" result (status
/// [`ResultStatus::Aborted`], [`ABORTED_RESULT_TEXT`], with the call's own id, so the
/// same input always gives the same output) for every call left unanswered while the
/// log moved on, and, when `abort_pending` is set, for calls still pending at the end;
/// drops orphan results and second results. **O(n)** expected.
///
/// Repairing a repaired log changes nothing.
pub fn repair(log: Vec<Entry>, abort_pending: bool) -> (Vec<Entry>, RepairReport) {
    let options = Options {
        allow_pending: !abort_pending,
    };
    let found = validate(&log, options);
    let n = log.len();
    let mut drop = vec![false; n];
    // (insert before this input position, call position, id)
    let mut inserts: Vec<(usize, usize, CallId)> = Vec::new();
    let mut report = RepairReport::default();
    let mut dropped = Vec::new();
    for v in found.violations {
        match v {
            Violation::UnansweredCall {
                call_id,
                at,
                moved_on_at,
            } => inserts.push((moved_on_at, at, call_id)),
            Violation::PendingAtEnd { call_id, at } => inserts.push((n, at, call_id)),
            Violation::OrphanResult { call_id, at } => {
                drop[at] = true;
                dropped.push(Change::DroppedOrphan { call_id, at });
            }
            Violation::DuplicateResult { call_id, at, .. } => {
                drop[at] = true;
                dropped.push(Change::DroppedDuplicate { call_id, at });
            }
            other => report.unrepaired.push(other),
        }
    }
    inserts.sort_unstable();
    let mut out = Vec::with_capacity(n + inserts.len());
    let mut next = inserts.into_iter().peekable();
    let mut inserted = Vec::new();
    for (i, entry) in log.into_iter().map(Some).chain([None]).enumerate() {
        while let Some((_, _, call_id)) = next.next_if(|(before, _, _)| *before == i) {
            inserted.push(Change::InsertedAborted {
                call_id: call_id.clone(),
                at: out.len(),
            });
            out.push(aborted_result(call_id));
        }
        if let Some(entry) = entry.filter(|_| !drop[i]) {
            out.push(entry);
        }
    }
    report.changes = dropped;
    report.changes.extend(inserted);
    (out, report)
}
