//! Liveness: a call whose tool died stays pending forever, and every cut after it
//! stays illegal, which freezes compaction (ADK #7236). A call pending longer than a
//! caller-given age can be closed with a synthesized "aborted" result (the one
//! [`repair`](super::repair) inserts: [`ABORTED_RESULT_TEXT`](super::ABORTED_RESULT_TEXT),
//! status [`ResultStatus::Aborted`](super::ResultStatus::Aborted)). A long-running
//! tool's interim result is not its answer (ADK #5602): the caller reports it with
//! [`Log::note_interim`], which keeps the call pending and restarts its age in
//! records. Nothing here reads a clock: an age in time is measured against times the
//! caller passes in.

use super::Log;
use super::repair::aborted_result;
use crate::{AppendError, CallId, RecordKind};

/// How old a pending call may grow before it counts as dead.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub enum Age<'a> {
    /// More than this many records appended since the call (or since its last
    /// interim result).
    Records(u64),
    /// More than `max` units of the caller's clock between `now` and when the call was
    /// last heard from, as `last_heard` tells (its start, or its last interim result;
    /// `None` for a call the caller does not know, which is never stale by time).
    Clock {
        /// The caller's clock now.
        now: u64,
        /// The longest silence allowed.
        max: u64,
        /// When the caller last heard from a call.
        last_heard: &'a dyn Fn(&CallId) -> Option<u64>,
    },
}

impl std::fmt::Debug for Age<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Age::Records(n) => write!(f, "Records({n})"),
            Age::Clock { now, max, .. } => write!(f, "Clock {{ now: {now}, max: {max} }}"),
        }
    }
}

/// A pending call past its age.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct StaleCall {
    /// The call.
    pub call_id: CallId,
    /// Position of its `tool_use`.
    pub at: usize,
    /// Its age, in the unit asked for.
    pub age: u64,
}

impl Log {
    /// Reports an interim result of the pending call `call_id` (a long-running tool's
    /// progress): the call stays pending, and its age in records starts again. Returns
    /// whether the call is pending. **O(k)** for `k` pending calls.
    pub fn note_interim(&mut self, call_id: &CallId) -> bool {
        let pending = self.tracker.pending_calls().iter().any(|p| p.id == call_id);
        if pending {
            self.interim.insert(call_id.clone(), self.appended);
        }
        pending
    }

    /// The pending calls older than `age`, in log order. A call's age in records is
    /// the number of records after its `tool_use` (records after a pending call are
    /// never compacted, so compaction does not make it younger), or since its last
    /// [interim result](Log::note_interim). **O(k log k)** for `k` pending calls.
    pub fn stale_calls(&self, age: &Age<'_>) -> Vec<StaleCall> {
        let len = self.entries.len();
        self.tracker
            .pending_calls()
            .into_iter()
            .filter_map(|p| {
                let years = match age {
                    Age::Records(max) => {
                        let since_call = (len - p.at - 1) as u64;
                        let since_interim = self
                            .interim
                            .get(p.id)
                            .map_or(since_call, |&then| self.appended - then);
                        let a = since_call.min(since_interim);
                        (a > *max).then_some(a)
                    }
                    Age::Clock {
                        now,
                        max,
                        last_heard,
                    } => last_heard(p.id)
                        .map(|then| now.saturating_sub(then))
                        .filter(|a| a > max),
                }?;
                Some(StaleCall {
                    call_id: p.id.clone(),
                    at: p.at,
                    age: years,
                })
            })
            .collect()
    }

    /// Closes the pending calls `ids` with a synthesized aborted result each (the one
    /// [`repair`](super::repair) inserts), and returns the positions of the results
    /// in the log after the call. A result goes where the call's answer belongs: after
    /// the rest of the call's message, the results that follow it and the assistant
    /// records that go on from it, before the next user input or assistant turn (so
    /// no other call in flight is left behind by it). When that is the end of the log
    /// (the call's turn is the last one) it is appended,
    /// **O(k)** for `k` calls; otherwise the log is rebuilt once with the results in
    /// place, **O(n)** (a dead call in the middle of a log that went on: rare, and the
    /// only way the cuts after it become legal again). Ids that are not pending are
    /// skipped.
    ///
    /// # Errors
    /// [`AppendError`] when the tracker refuses a result (a cap); the log is then
    /// unchanged.
    pub fn abort_calls(&mut self, ids: &[CallId]) -> Result<Vec<usize>, AppendError> {
        let pending = self.tracker.pending_calls();
        let mut targets: Vec<(usize, CallId)> = pending
            .iter()
            .filter(|p| ids.contains(p.id))
            .map(|p| (p.at, p.id.clone()))
            .collect();
        if targets.is_empty() {
            return Ok(Vec::new());
        }
        targets.sort_unstable();
        let len = self.entries.len();
        // Where each call's answer belongs: after the rest of its message, the
        // results that follow it and any assistant records that go on from it, before
        // the next user input or assistant turn. Inserting there starts no new turn,
        // so no other call in flight is left behind by it.
        let assistant_side = |i: usize| {
            matches!(
                self.entries[i].record.kind(),
                RecordKind::Assistant | RecordKind::ToolUse(_)
            )
        };
        let answer_at = |at: usize| {
            let mut p = at + 1;
            while p < len {
                let r = &self.entries[p].record;
                let starts_turn = assistant_side(p) && !assistant_side(p - 1);
                let user_input = matches!(r.kind(), RecordKind::User | RecordKind::Summary(_))
                    && !r.is_bound_to_previous();
                if starts_turn || user_input {
                    break;
                }
                p += 1;
            }
            p
        };
        let inserts: Vec<(usize, CallId)> = targets
            .into_iter()
            .map(|(at, id)| (answer_at(at), id))
            .collect();
        if inserts.iter().all(|(before, _)| *before == len) {
            // Only the records cap or an open record can refuse a result for a
            // pending call: check both first, so that a refusal changes nothing.
            if let Some(open_at) = self.tracker.open_record() {
                return Err(AppendError::RecordOpen { at: len, open_at });
            }
            let max = self.tracker.limits().max_records.min(crate::MAX_RECORDS);
            if len + inserts.len() > max {
                return Err(AppendError::LimitExceeded {
                    at: max,
                    limit: crate::Limit::Records,
                    max,
                    value: max + 1,
                });
            }
            let mut out = Vec::with_capacity(inserts.len());
            for (_, id) in inserts {
                out.push(self.len());
                self.append(aborted_result(id))?;
            }
            return Ok(out);
        }
        let mut entries: Vec<super::Entry> = Vec::with_capacity(len + inserts.len());
        let mut out = Vec::with_capacity(inserts.len());
        let mut next = inserts.into_iter().peekable();
        for (i, entry) in self
            .entries
            .iter()
            .cloned()
            .map(Some)
            .chain([None])
            .enumerate()
        {
            while let Some((_, id)) = next.next_if(|(before, _)| *before == i) {
                out.push(entries.len());
                entries.push(aborted_result(id));
            }
            entries.extend(entry);
        }
        let mut log = Log::with_limits(*self.tracker.limits(), self.tracker.mode());
        for e in entries {
            log.append(e)?;
        }
        log.generation = self.generation + 1;
        log.changes = self.changes + 1;
        log.appended = self.appended + out.len() as u64;
        *self = log;
        Ok(out)
    }
}
