//! The core's error and outcome types: one enum per operation family (appending,
//! events, replacing a region), and [`Defer`], the selector's "no legal cut here".

use std::fmt;

use crate::record::CallId;

/// Why [`Tracker::append`](crate::Tracker::append) refused a record. A refused record
/// leaves the tracker exactly as it was.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppendError {
    /// A `tool_use` reused the id of an earlier `tool_use`. Pairing is by id, so the
    /// second call could never be told apart from the first.
    #[error("record {at}: tool_use id {call_id:?} was already used{}", match first_use {
        Some(p) => format!(" by the tool_use at record {p}, still pending"),
        None => " by an earlier, answered tool_use".to_owned(),
    })]
    DuplicateCall {
        /// The repeated id.
        call_id: CallId,
        /// Position the refused record would have taken.
        at: usize,
        /// Position of the first `tool_use` with this id when it is still pending.
        /// Answered calls are remembered by fingerprint only, so `None` there; a
        /// validator over the whole log names both positions.
        first_use: Option<usize>,
    },
    /// A summary record covers a call id that already appeared in the log (as a call,
    /// a result or another summary's call), or covers one id twice. A summary stands for
    /// whole pairs, so its ids must be new.
    #[error("record {at}: summary covers call id {call_id:?}, which the log already holds")]
    CoveredIdSeen {
        /// The repeated id.
        call_id: CallId,
        /// Position the refused record would have taken.
        at: usize,
    },
    /// A tool record (or a summary's covered id) with an empty call id.
    #[error("record {at}: {kind} has an empty call id")]
    EmptyCallId {
        /// Position the refused record would have taken.
        at: usize,
        /// Which kind of record carried it.
        kind: CallRecord,
    },
    /// The total token count would pass `u64::MAX`.
    #[error("record {at}: {tokens} tokens would overflow the log's total of {total}")]
    TokenOverflow {
        /// Position the refused record would have taken.
        at: usize,
        /// The record's token count.
        tokens: u64,
        /// The log's total before it.
        total: u64,
    },
    /// The last record is still open (streaming): close it before appending another.
    #[error("record {at}: the record at {open_at} is still open; close it first")]
    RecordOpen {
        /// Position the refused record would have taken.
        at: usize,
        /// Position of the open record.
        open_at: usize,
    },
    /// Appending the record would pass one of the tracker's [`Limits`](crate::Limits).
    #[error("record {at}: {value} {limit} would pass the cap of {max} (Limits::{field})", field = limit.field())]
    LimitExceeded {
        /// Position the refused record would have taken.
        at: usize,
        /// Which cap.
        limit: crate::Limit,
        /// The cap's value.
        max: usize,
        /// What the record would have made it (the count, or the id's length).
        value: usize,
    },
    /// In [`Mode::Strict`](crate::Mode::Strict), a record that breaks pairing: an
    /// orphan or duplicate result, or a call after its result.
    #[error("{0}")]
    Violation(crate::StrictViolation),
    /// The log already holds [`MAX_RECORDS`](crate::MAX_RECORDS) records.
    #[error("record {at}: the log is full ({max} records at most)", max = crate::MAX_RECORDS)]
    Full {
        /// Position the refused record would have taken.
        at: usize,
    },
    /// A `tool_result` for a call the provider dropped
    /// ([withdrawn](crate::Tracker::withdraw_call)): no result may come for it, and
    /// its `tool_use` is no longer a call in the log. Refused by the compaction
    /// layer's `Log`, which knows the withdrawn calls (a bare tracker counts such a
    /// result as a duplicate).
    #[error(
        "record {at}: tool_result for call {call_id:?}, which was withdrawn (the provider dropped its tool_use)"
    )]
    ResultForWithdrawnCall {
        /// The withdrawn call's id.
        call_id: CallId,
        /// Position the refused result would have taken.
        at: usize,
    },
}

/// Why no legal cut was found: compaction should wait for the next turn boundary.
///
/// Deferral is always safe; an illegal cut never is. Every cut in `floor..=target_index`
/// (the seed's search window) would split a `tool_use`/`tool_result` pair or a call
/// still in flight.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Defer {
    /// The token target asked for.
    pub target_tokens: u64,
    /// The lookback asked for.
    pub lookback_tokens: u64,
    /// The highest cut searched: the record where the prefix sum first reaches the
    /// target, or `len - 1` when the target covers the whole log and `len` is not legal.
    pub target_index: usize,
    /// The lowest cut searched (the seed's lookback floor).
    pub floor: usize,
    /// The nearest legal cut below `floor`, if any (cut 0 is always legal, so this is
    /// `None` only when `floor` is 0).
    pub nearest_legal_below: Option<usize>,
    /// The nearest legal cut above `target_index`, if one exists yet.
    pub nearest_legal_above: Option<usize>,
    /// Calls still unanswered whose `tool_use` lies before the cut that was wanted
    /// (`target_index`, or `len` when the target covered the whole log), in log order:
    /// what a deferred compaction waits for. Empty when the window is blocked only by
    /// pairs that are complete but straddle it.
    pub waiting_on: Vec<CallId>,
}

impl fmt::Display for Defer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // An unbounded window (a forward search with no lookahead limit) is said so,
        // not as 18446744073709551615 tokens.
        let within = match self.lookback_tokens {
            u64::MAX => "any number of tokens".to_owned(),
            n => format!("{n} tokens"),
        };
        write!(
            f,
            "no pairing-legal cut within {within} of target {} (searched cuts {}..={}); defer compaction to the turn boundary",
            self.target_tokens, self.floor, self.target_index
        )?;
        write_waiting_on(f, &self.waiting_on)?;
        match self.nearest_legal_below {
            Some(c) => write!(f, "; nearest legal cut below: {c}")?,
            None => f.write_str("; no legal cut below")?,
        }
        if let Some(c) = self.nearest_legal_above {
            write!(f, "; nearest legal cut above: {c}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Defer {}

/// How many call ids a message lists before it counts the rest ([`write_ids`]).
pub(crate) const IDS_SHOWN: usize = 10;

/// `ids` joined by `, ` after `lead` (nothing when there are none), the first
/// [`IDS_SHOWN`] only and then `… and N more`: the one way every message lists call
/// ids, so a log with hundreds of blocking calls still gets a readable line.
/// **O(min(k, IDS_SHOWN))**.
pub(crate) fn write_ids(f: &mut fmt::Formatter<'_>, lead: &str, ids: &[CallId]) -> fmt::Result {
    for (i, id) in ids.iter().take(IDS_SHOWN).enumerate() {
        f.write_str(if i == 0 { lead } else { ", " })?;
        f.write_str(id)?;
    }
    if ids.len() > IDS_SHOWN {
        write!(f, " \u{2026} and {} more", ids.len() - IDS_SHOWN)?;
    }
    Ok(())
}

/// `; waiting on A, B` for the calls a deferral waits for (nothing when there are
/// none): the one wording every deferral message uses, capped as [`write_ids`] caps
/// it. **O(min(k, IDS_SHOWN))**.
pub(crate) fn write_waiting_on(f: &mut fmt::Formatter<'_>, ids: &[CallId]) -> fmt::Result {
    write_ids(f, "; waiting on ", ids)
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

/// Why an [`Event`](crate::Event) was refused. A refused event leaves the tracker exactly as it was.
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
        /// Which event.
        event: OpenEvent,
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
    /// A call was withdrawn ([`Event::CallWithdrawn`](crate::Event::CallWithdrawn))
    /// that is not pending: no `tool_use` with its id waits for a result (it never
    /// came, it was answered, or it was withdrawn already).
    #[error("call {call_id:?} is not pending, so it cannot be withdrawn")]
    NotPending {
        /// The id asked for.
        call_id: CallId,
    },
}

/// Which end of a region.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum RegionEnd {
    /// The first record replaced.
    Start,
    /// The first record kept after the region.
    End,
}

impl fmt::Display for RegionEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegionEnd::Start => "start",
            RegionEnd::End => "end",
        })
    }
}

/// Why [`Tracker::replace_region`](crate::Tracker::replace_region) refused a region.
/// The tracker is then unchanged.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplaceError {
    /// The region's `start` or `end` is not a legal cut (any more).
    #[error("the region's {which} {at} is not a legal cut")]
    NotALegalCut {
        /// The position.
        at: usize,
        /// Which end.
        which: RegionEnd,
    },
    /// The region holds no record (`start >= end`).
    #[error("the region {start}..{end} is empty")]
    EmptyRegion {
        /// Its start.
        start: usize,
        /// Its end.
        end: usize,
    },
    /// The region ends past the log.
    #[error("the region ends at {end}, past the log's {len} records")]
    OutOfRange {
        /// Its end.
        end: usize,
        /// The log's length.
        len: usize,
    },
    /// The summary's tokens would overflow the log's total.
    #[error("a summary of {summary_tokens} tokens would overflow the {kept} tokens kept")]
    TokenOverflow {
        /// The summary's tokens.
        summary_tokens: u64,
        /// The tokens outside the region.
        kept: u64,
    },
    /// A region of a batch starts before the one before it ends (regions must be in
    /// log order and disjoint).
    #[error(
        "the region starting at {start} overlaps the one before it, which ends at {previous_end}"
    )]
    Overlapping {
        /// Its start.
        start: usize,
        /// Where the region before it ends.
        previous_end: usize,
    },
}

/// Why [`Tracker::set_tokens`](crate::Tracker::set_tokens) refused a batch of edits.
/// The tracker is then unchanged.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokensError {
    /// An edited record lies past the log.
    #[error("record {at} is past the log's {len} records")]
    OutOfRange {
        /// The record asked for.
        at: usize,
        /// The log's length.
        len: usize,
    },
    /// The edited records are not strictly increasing.
    #[error(
        "record {at} comes after record {previous} in the edits; give each record once, in log order"
    )]
    NotIncreasing {
        /// The record out of order.
        at: usize,
        /// The record before it in the edits.
        previous: usize,
    },
    /// The new total would pass `u64::MAX`.
    #[error("the edits would make the log's total overflow (at least {total} tokens)")]
    TokenOverflow {
        /// The total, saturated.
        total: u64,
    },
}

/// The kinds of record that carry call ids, as errors name them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum CallRecord {
    /// A `tool_use`.
    ToolUse,
    /// A `tool_result`.
    ToolResult,
    /// A summary (for one of the calls it covers).
    Summary,
}

impl fmt::Display for CallRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CallRecord::ToolUse => "tool_use",
            CallRecord::ToolResult => "tool_result",
            CallRecord::Summary => "summary",
        })
    }
}

/// The events that need an open record, as [`EventError::NotOpen`] names them.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum OpenEvent {
    /// [`Event::Delta`](crate::Event::Delta): the open record grows.
    Delta,
    /// [`Event::Closed`](crate::Event::Closed): the open record closes.
    Close,
}

impl fmt::Display for OpenEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpenEvent::Delta => "delta",
            OpenEvent::Close => "close",
        })
    }
}
