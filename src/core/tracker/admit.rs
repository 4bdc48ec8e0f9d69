//! Admission: everything `append` refuses that the core pairing rules do not. One
//! pure check, first the caps ([`Limits`](crate::Limits)), then, in
//! [`Mode::Strict`], pairing violations. It reads the tracker and changes nothing, and
//! it takes the call id's fingerprint that `append` computed, so an id is hashed once
//! per append whatever the mode and caps.

use super::Tracker;
use crate::core::calls::Fingerprint;
use crate::core::config::{Limit, Mode};
use crate::core::error::{AppendError, StrictViolation};
use crate::core::index::MAX_RECORDS;
use crate::record::{CallId, RecordKind};

impl Tracker {
    /// Refuses a record of `kind` (whose call id, if any, fingerprints to `fp`) if
    /// appending it would pass a cap or, in strict mode, break pairing. Reads only.
    /// **O(1)** expected for tool records, **O(k)** for a summary of `k` ids (their
    /// lengths only).
    #[inline]
    pub(super) fn admit(
        &self,
        kind: &RecordKind,
        fp: Option<&Fingerprint>,
    ) -> Result<(), AppendError> {
        let at = self.len();
        let max_records = self.limits.max_records.min(MAX_RECORDS);
        if at >= max_records {
            return Err(exceeded(
                at,
                Limit::Records,
                max_records,
                at.saturating_add(1),
            ));
        }
        match (kind, fp) {
            (RecordKind::Summary(ids), _) => self.admit_summary(ids),
            (RecordKind::ToolUse(id), Some(fp)) => self.admit_tool(id, fp, true),
            (RecordKind::ToolResult(id), Some(fp)) => self.admit_tool(id, fp, false),
            _ => Ok(()),
        }
    }

    /// The id-length and open-call caps, then strict-mode pairing, for a `tool_use`
    /// (`is_use`) or `tool_result` with id `id`. Empty ids are left to `append`, which
    /// refuses them in both modes. **O(1)** expected.
    #[inline]
    fn admit_tool(&self, id: &CallId, fp: &Fingerprint, is_use: bool) -> Result<(), AppendError> {
        let at = self.len();
        let limits = &self.limits;
        if id.len() > limits.max_call_id_bytes {
            return Err(exceeded(
                at,
                Limit::CallIdBytes,
                limits.max_call_id_bytes,
                id.len(),
            ));
        }
        if id.is_empty() {
            return Ok(());
        }
        let open = self.calls.open_len();
        if open >= limits.max_open_calls && self.opens_a_call(fp, is_use) {
            return Err(exceeded(
                at,
                Limit::OpenCalls,
                limits.max_open_calls,
                open + 1,
            ));
        }
        if self.mode == Mode::Strict {
            if let Some(violation) = self.violation(id, fp, is_use) {
                return Err(AppendError::Violation(violation));
            }
        }
        Ok(())
    }

    /// Whether a record with this fingerprint would open a call: a `tool_use` not yet
    /// answered early (a reused id is refused as a duplicate call by `append` itself),
    /// or a `tool_result` that answers nothing known. **O(1)** expected.
    fn opens_a_call(&self, fp: &Fingerprint, is_use: bool) -> bool {
        if is_use {
            !self.calls.is_early(fp) && self.calls.seen_use(fp).is_none()
        } else {
            !self.calls.is_pending(fp) && !self.calls.is_completed(fp) && !self.calls.is_early(fp)
        }
    }

    /// The caps a summary covering `ids` must meet: each id within
    /// [`Limits::max_call_id_bytes`](crate::Limits::max_call_id_bytes), and the
    /// answered calls, these included, within
    /// [`Limits::max_records`](crate::Limits::max_records). Covered ids never open a
    /// call, so the open-call cap does not apply. **O(k)** for `k` ids (their lengths
    /// only; no hashing).
    fn admit_summary(&self, ids: &[CallId]) -> Result<(), AppendError> {
        let at = self.len();
        let limits = &self.limits;
        if let Some(long) = ids.iter().find(|id| id.len() > limits.max_call_id_bytes) {
            return Err(exceeded(
                at,
                Limit::CallIdBytes,
                limits.max_call_id_bytes,
                long.len(),
            ));
        }
        let max = limits.max_records.min(MAX_RECORDS);
        let answered = self.calls.completed_len().saturating_add(ids.len());
        if answered > max {
            return Err(exceeded(at, Limit::AnsweredCalls, max, answered));
        }
        Ok(())
    }

    /// The pairing violation a `tool_use` (`is_use`) or `tool_result` with id `id`
    /// would be, if any. **O(1)** expected.
    fn violation(&self, id: &CallId, fp: &Fingerprint, is_use: bool) -> Option<StrictViolation> {
        let at = self.len();
        let call_id = || id.clone();
        if is_use {
            return self
                .calls
                .early_at(fp)
                .map(|first_result| StrictViolation::UseAfterResult {
                    call_id: call_id(),
                    at,
                    first_result,
                });
        }
        if self.calls.is_pending(fp) {
            None
        } else if let Some(first) = self.calls.early_at(fp) {
            Some(StrictViolation::DuplicateResult {
                call_id: call_id(),
                at,
                first_result: Some(first),
            })
        } else if self.calls.is_completed(fp) {
            Some(StrictViolation::DuplicateResult {
                call_id: call_id(),
                at,
                first_result: None,
            })
        } else {
            Some(StrictViolation::OrphanResult {
                call_id: call_id(),
                at,
            })
        }
    }
}

/// A refusal for passing cap `limit` (of `max`) with `value`, at position `at`.
fn exceeded(at: usize, limit: Limit, max: usize, value: usize) -> AppendError {
    AppendError::LimitExceeded {
        at,
        limit,
        max,
        value,
    }
}
