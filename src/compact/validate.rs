//! The validator: checks a whole log against the seed's five conditions in **O(n)**
//! and names every violation with its position and call id.
//!
//! | condition | violations |
//! |---|---|
//! | 1. forward pairing | [`Violation::UnansweredCall`] (the log moved on), [`Violation::PendingAtEnd`] (mid-turn, allowed with [`Options::allow_pending`]) |
//! | 2. backward pairing | [`Violation::OrphanResult`], [`Violation::DuplicateResult`] (including a result for a call a summary already covers), [`Violation::DuplicateCall`] |
//! | 3. positional contiguity | [`Violation::ResultBeforeUse`], [`Violation::ResultAfterNextTurn`] |
//! | 4. argument fidelity | [`Violation::ArgumentLoss`] (a summary covering a call without its arguments) |
//! | 5. idempotence | [`PairingStructure`]: compacting must not change it |
//!
//! A result kept while its call was summarized is a [`Violation::DuplicateResult`]
//! with `by_summary` set (the summary's unit already answers the call); a result kept
//! while its call was dropped is a [`Violation::OrphanResult`].
//!
//! Turns: an *assistant turn* starts at an `assistant` or `tool_use` record that
//! follows a `user`, `tool_result` or `summary` record. A call's result must come
//! after the call and before the next assistant turn starts.

use std::collections::HashMap;
use std::fmt;

use super::{Entry, Payload, Unit};
use crate::{CallId, Record, RecordKind};

/// One way a log breaks the conditions. Positions are record indexes (0-based).
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Violation {
    /// A call with no result although the next assistant turn started at `moved_on_at`.
    UnansweredCall {
        /// The call.
        call_id: CallId,
        /// Its `tool_use`.
        at: usize,
        /// Where the next assistant turn starts.
        moved_on_at: usize,
    },
    /// A call with no result yet, in the last turn: legitimate mid-turn.
    PendingAtEnd {
        /// The call.
        call_id: CallId,
        /// Its `tool_use`.
        at: usize,
    },
    /// A result with no call anywhere in the log (or whose only call is a summary after it).
    OrphanResult {
        /// The result's id.
        call_id: CallId,
        /// The result.
        at: usize,
    },
    /// A second result for one call, or a result for a call a summary already covers.
    DuplicateResult {
        /// The id.
        call_id: CallId,
        /// The extra result.
        at: usize,
        /// The first result, or the covering summary.
        first_at: usize,
        /// Whether `first_at` is a summary.
        by_summary: bool,
    },
    /// A second call with one id (a second `tool_use`, or a summary covering an id
    /// already called or covered).
    DuplicateCall {
        /// The id.
        call_id: CallId,
        /// The second call or summary.
        at: usize,
        /// The first.
        first_at: usize,
    },
    /// A call's first result comes before the call.
    ResultBeforeUse {
        /// The id.
        call_id: CallId,
        /// The result.
        at: usize,
        /// The call.
        use_at: usize,
    },
    /// A call's first result comes after the next assistant turn started.
    ResultAfterNextTurn {
        /// The id.
        call_id: CallId,
        /// The result.
        at: usize,
        /// The call.
        use_at: usize,
        /// Where the next assistant turn started.
        turn_at: usize,
    },
    /// A summary covers a call without its arguments.
    ArgumentLoss {
        /// The call.
        call_id: CallId,
        /// The summary.
        at: usize,
    },
}

impl Violation {
    /// The kind's name as the CLI prints it (`unanswered-call`, …). **O(1)**.
    pub fn kind(&self) -> &'static str {
        match self {
            Violation::UnansweredCall { .. } => "unanswered-call",
            Violation::PendingAtEnd { .. } => "pending-at-end",
            Violation::OrphanResult { .. } => "orphan-result",
            Violation::DuplicateResult { .. } => "duplicate-result",
            Violation::DuplicateCall { .. } => "duplicate-call",
            Violation::ResultBeforeUse { .. } => "result-before-use",
            Violation::ResultAfterNextTurn { .. } => "result-after-next-turn",
            Violation::ArgumentLoss { .. } => "argument-loss",
        }
    }

    /// The record the violation is reported at. **O(1)**.
    pub fn at(&self) -> usize {
        self.place().1
    }

    /// The call id concerned. **O(1)**.
    pub fn call_id(&self) -> &CallId {
        self.place().0
    }

    /// The call id and the record, which every variant has. **O(1)**.
    fn place(&self) -> (&CallId, usize) {
        match self {
            Violation::UnansweredCall { call_id, at, .. }
            | Violation::PendingAtEnd { call_id, at }
            | Violation::OrphanResult { call_id, at }
            | Violation::DuplicateResult { call_id, at, .. }
            | Violation::DuplicateCall { call_id, at, .. }
            | Violation::ResultBeforeUse { call_id, at, .. }
            | Violation::ResultAfterNextTurn { call_id, at, .. }
            | Violation::ArgumentLoss { call_id, at } => (call_id, *at),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "record {}: {}: {}",
            self.at(),
            self.kind(),
            self.call_id()
        )?;
        match self {
            Violation::UnansweredCall { moved_on_at, .. } => {
                write!(f, " (next assistant turn at {moved_on_at})")
            }
            Violation::DuplicateResult {
                first_at,
                by_summary,
                ..
            } => write!(
                f,
                " (already {} at {first_at})",
                if *by_summary {
                    "covered by the summary"
                } else {
                    "answered"
                }
            ),
            Violation::DuplicateCall { first_at, .. } => write!(f, " (first at {first_at})"),
            Violation::ResultBeforeUse { use_at, .. } => write!(f, " (called at {use_at})"),
            Violation::ResultAfterNextTurn {
                use_at, turn_at, ..
            } => write!(f, " (called at {use_at}, next turn at {turn_at})"),
            _ => Ok(()),
        }
    }
}

/// Validation options.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Options {
    /// Do not report calls still pending in the last turn (a log read mid-turn).
    pub allow_pending: bool,
}

impl Options {
    /// Reports everything. **O(1)**.
    pub fn strict() -> Self {
        Options::default()
    }

    /// Allows calls pending in the last turn. **O(1)**.
    pub fn allowing_pending() -> Self {
        Options {
            allow_pending: true,
        }
    }
}

/// Whether a call was answered (by a result or a summary) or is still waiting.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CallState {
    /// Answered by a result or covered by a summary.
    Answered,
    /// No result yet.
    Unanswered,
}

/// The seed's condition 5 made checkable: every call of the log (raw or covered by a
/// summary) with how many times it is called and whether it is answered, sorted by
/// id. Compaction must leave it unchanged: a pair straddling a cut that ends up both
/// summarized and retained shows up as a call counted twice.
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct PairingStructure {
    /// `(id, times called, state)`, sorted by id.
    pub calls: Vec<(CallId, u32, CallState)>,
}

impl PairingStructure {
    /// A 64-bit FNV-1a digest of the structure, stable across runs. **O(n)**.
    pub fn digest(&self) -> u64 {
        let mut h = super::summary::Fnv1a::new();
        for (id, times, state) in &self.calls {
            h.eat(id.as_bytes());
            h.eat(&[0]);
            h.eat(&times.to_le_bytes());
            h.eat(&[*state as u8]);
        }
        h.finish()
    }
}

/// Everything the validator found.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Report {
    /// The violations, sorted by position.
    pub violations: Vec<Violation>,
    /// The pairing structure (condition 5).
    pub structure: PairingStructure,
}

impl Report {
    /// Whether no violation was found. **O(1)**.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty()
    }

    /// How many violations of `kind` ([`Violation::kind`]) were found. **O(v)**.
    pub fn count(&self, kind: &str) -> usize {
        self.violations.iter().filter(|v| v.kind() == kind).count()
    }
}

/// Validates records only: conditions 1-3 and 5 (argument fidelity needs payloads;
/// see [`validate`]). **O(n)** expected.
pub fn validate_records(log: &[Record], options: Options) -> Report {
    check(log.len(), |i| &log[i], |_| None, options)
}

/// Validates entries: all five conditions. **O(n)** expected, plus the summaries'
/// units.
pub fn validate<'a, I>(log: I, options: Options) -> Report
where
    I: IntoIterator<Item = &'a Entry>,
{
    let entries: Vec<&Entry> = log.into_iter().collect();
    check(
        entries.len(),
        |i| &entries[i].record,
        |i| match &entries[i].payload {
            Payload::Summary { units, .. } => Some(units.as_slice()),
            _ => None,
        },
        options,
    )
}

#[derive(Default)]
struct Seen {
    /// The first `tool_use` or covering summary, and whether it was a summary.
    first_call: Option<(usize, bool)>,
    times: u32,
    first_result: Option<usize>,
}

fn assistant_side(kind: &RecordKind) -> bool {
    matches!(kind, RecordKind::Assistant | RecordKind::ToolUse(_))
}

fn check<'a>(
    n: usize,
    record: impl Fn(usize) -> &'a Record,
    units: impl Fn(usize) -> Option<&'a [Unit]>,
    options: Options,
) -> Report {
    // next_turn[i]: where the first assistant turn after record i starts (n if none).
    let mut next_turn = vec![n; n];
    for i in (0..n.saturating_sub(1)).rev() {
        let starts = assistant_side(record(i + 1).kind()) && !assistant_side(record(i).kind());
        next_turn[i] = if starts { i + 1 } else { next_turn[i + 1] };
    }
    let mut violations = Vec::new();
    let mut seen: HashMap<&str, Seen> = HashMap::new();
    // Calls first: a result may come before its call.
    for i in 0..n {
        let kind = record(i).kind();
        let ids: &[CallId] = match kind {
            RecordKind::ToolUse(id) => std::slice::from_ref(id),
            RecordKind::Summary(ids) => ids,
            _ => continue,
        };
        let by_summary = matches!(kind, RecordKind::Summary(_));
        for id in ids {
            let s = seen.entry(id.as_str()).or_default();
            s.times += 1;
            match s.first_call {
                Some((first_at, _)) => violations.push(Violation::DuplicateCall {
                    call_id: id.clone(),
                    at: i,
                    first_at,
                }),
                None => s.first_call = Some((i, by_summary)),
            }
        }
        if let Some(units) = units(i) {
            for id in ids {
                let unit = units.iter().find(|u| u.call_id == *id);
                if unit.is_none_or(|u| u.arguments.is_none()) {
                    violations.push(Violation::ArgumentLoss {
                        call_id: id.clone(),
                        at: i,
                    });
                }
            }
        }
    }
    for i in 0..n {
        let RecordKind::ToolResult(id) = record(i).kind() else {
            continue;
        };
        let call_id = id.clone();
        let Some(s) = seen.get_mut(id.as_str()) else {
            violations.push(Violation::OrphanResult { call_id, at: i });
            continue;
        };
        match s.first_call {
            Some((c, true)) if c < i => violations.push(Violation::DuplicateResult {
                call_id,
                at: i,
                first_at: c,
                by_summary: true,
            }),
            Some((_, true)) | None => violations.push(Violation::OrphanResult { call_id, at: i }),
            Some((use_at, false)) => match s.first_result {
                Some(first_at) => violations.push(Violation::DuplicateResult {
                    call_id,
                    at: i,
                    first_at,
                    by_summary: false,
                }),
                None => {
                    s.first_result = Some(i);
                    if i < use_at {
                        violations.push(Violation::ResultBeforeUse {
                            call_id,
                            at: i,
                            use_at,
                        });
                    } else if next_turn[use_at] < i {
                        violations.push(Violation::ResultAfterNextTurn {
                            call_id,
                            at: i,
                            use_at,
                            turn_at: next_turn[use_at],
                        });
                    }
                }
            },
        }
    }
    let mut calls = Vec::with_capacity(seen.len());
    for (id, s) in &seen {
        let Some((at, by_summary)) = s.first_call else {
            continue;
        };
        let answered = by_summary || s.first_result.is_some();
        if !answered {
            let call_id = CallId::from(*id);
            if next_turn[at] < n {
                violations.push(Violation::UnansweredCall {
                    call_id,
                    at,
                    moved_on_at: next_turn[at],
                });
            } else if !options.allow_pending {
                violations.push(Violation::PendingAtEnd { call_id, at });
            }
        }
        let state = if answered {
            CallState::Answered
        } else {
            CallState::Unanswered
        };
        calls.push((CallId::from(*id), s.times, state));
    }
    calls.sort_unstable();
    violations.sort_by(|a, b| (a.at(), a.call_id()).cmp(&(b.at(), b.call_id())));
    Report {
        violations,
        structure: PairingStructure { calls },
    }
}
