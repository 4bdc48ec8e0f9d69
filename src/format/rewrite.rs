//! Compacting a transcript at a cut: the pinned head verbatim, one summary message in
//! the provider's shape, then the retained messages exactly as they were (byte for
//! byte, except the `parentUuid` links Claude Code resumes by). The provider shapes
//! of a summary message are [`summary_message`](super::summary_message)'s; a Claude
//! Code compaction boundary and its kept segment, in `format::claude_code`.
//!
//! A rewrite is a compaction on the one path: the live history's [`Log`] (built by
//! the one Transcript -> Log builder), [`Log::plan`] for the region, [`Log::apply`] for the summary (earlier summaries in the region folded in:
//! their prose, units and orphans, carried as data), and the one writer (`format::edit`),
//! which writes the strategies' edits too. So `--target` and `--strategy
//! summarize` write the same summary for the same region. A Codex `compacted`
//! message, or a message holding a provider's compaction block, is pinned: never
//! summarized; Claude Code's own `isCompactSummary` is folded (its prose kept ahead
//! of the new prose), and its `compact_boundary` gives way to the new one.

use super::build::{self, TranscriptLog};
use super::edit::{self, EditError};
use super::{DeferReport, Format, Role, Transcript};
use crate::compact::strategy::{Edit, Kind, StepReport};
use crate::compact::{Direction, Log, Orphan, Plan, PlanError, Unit, Window, estimate_tokens};
use crate::{AppendError, Defer};

/// Which message boundary a rewrite was asked to place.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Boundary {
    /// The end of the pinned head: the first summarized message.
    HeadEnd,
    /// The cut: the first retained message.
    Cut,
}

impl std::fmt::Display for Boundary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Boundary::HeadEnd => "end the pinned head",
            Boundary::Cut => "cut",
        })
    }
}

/// Why a compacted transcript could not be written.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RewriteError {
    /// The head is still open (a call in it, or right after it, is in flight): wait
    /// for the turn boundary.
    #[error("{0}")]
    Plan(PlanError),
    /// No legal cut in the window: wait for the turn boundary. The report names
    /// messages, with the token distance of the nearest legal cuts.
    #[error("{0}")]
    Deferred(Box<DeferReport>),
    /// The head or the cut is not a message boundary the transcript allows: it would
    /// split a tool call from its result, or a message a provider binds to the one
    /// before it, or it lies before the live history.
    #[error(
        "message {at} is not a legal place to {what}: it would split a tool call from its result or a bound pair, or it lies before the live history"
    )]
    NotLegal {
        /// The message index asked for.
        at: usize,
        /// Which boundary.
        what: Boundary,
    },
    /// The tracker refused the transcript's records (a log too long or too large).
    #[error(transparent)]
    Tracker(#[from] AppendError),
    /// `input` is not the text the transcript was read from (a span falls outside it).
    #[error(
        "the input is not the text this transcript was read from (message {message}'s bytes are not in it)"
    )]
    InputMismatch {
        /// The first message whose span does not fit.
        message: usize,
    },
    /// Records JSONL is compacted on its own log
    /// ([`Loaded::summarize`](super::loaded::Loaded::summarize)), not as a transcript.
    #[error("{0} is compacted on its log, not rewritten as a transcript")]
    Unsupported(Format),
    /// The one writer refused the compaction (a bug: please report it with the
    /// input).
    #[error(transparent)]
    Write(Box<EditError>),
    /// The cut lies before the end of the pinned head, or past the last message.
    #[error("cut {cut} is outside {head}..={len} (pinned head .. message count)")]
    OutOfRange {
        /// The cut asked for.
        cut: usize,
        /// End of the pinned head.
        head: usize,
        /// Message count.
        len: usize,
    },
}

impl From<EditError> for RewriteError {
    fn from(e: EditError) -> Self {
        match e {
            EditError::Tracker(e) => RewriteError::Tracker(e),
            EditError::Unsupported(format) => RewriteError::Unsupported(format),
            other => RewriteError::Write(Box::new(other)),
        }
    }
}

/// A head that would summarize a Codex `compacted` message, or a message holding a
/// provider's compaction block or item, is moved past it: that message replaces
/// everything before it on replay and holds what cannot be folded (an encrypted
/// compaction, sent back byte-identical), so it stays. **O(blocks)** of that message.
fn pin_compacted(t: &Transcript, head: usize) -> usize {
    match t.messages.get(head) {
        Some(m) if m.role == Role::Compacted || m.has_compaction() => head + 1,
        _ => head,
    }
}

/// The live history's log, for a rewrite: records JSONL is compacted on its own log
/// ([`Loaded::summarize`](super::loaded::Loaded::summarize)), not as a transcript.
fn log_of(t: &Transcript) -> Result<TranscriptLog, RewriteError> {
    if t.format == Format::Records {
        return Err(RewriteError::Unsupported(t.format));
    }
    Ok(build::log_of(t)?)
}

/// The first record of message `m` (the record count for the end). **O(log n)**.
fn record_of(built: &TranscriptLog, m: usize) -> usize {
    built.owner.partition_point(|&o| o < m)
}

/// The plan of messages `head..cut`, both legal cuts of the live history.
#[cfg(feature = "testing")]
fn plan_between(
    t: &Transcript,
    built: &TranscriptLog,
    head: usize,
    cut: usize,
) -> Result<Plan, RewriteError> {
    let live = t.live_from();
    let legal = |m: usize| m >= live && built.log.tracker().is_legal_cut(record_of(built, m));
    if head < cut {
        if !legal(head) {
            return Err(RewriteError::NotLegal {
                at: head,
                what: Boundary::HeadEnd,
            });
        }
        if !legal(cut) {
            return Err(RewriteError::NotLegal {
                at: cut,
                what: Boundary::Cut,
            });
        }
    }
    let (start, end) = (
        record_of(built, head.max(live)),
        record_of(built, cut.max(live)),
    );
    built
        .log
        .plan_region(start..end, Default::default())
        .map_err(|_| RewriteError::NotLegal {
            at: cut,
            what: Boundary::Cut,
        })
}

/// The summary units of messages `range` (both ends legal cuts of the live history),
/// in log order: each pair with its tool name and arguments verbatim and the first
/// line of its result, and the units of every earlier summary in the range, folded
/// in place. A call id that comes back (OpenAI Chat) keeps its own id. **O(len)**.
///
/// # Errors
/// [`RewriteError::NotLegal`] when an end is not a legal cut of the live history;
/// [`RewriteError::Tracker`] when the tracker refuses the records.
#[cfg(feature = "testing")]
pub fn ledger(t: &Transcript, range: std::ops::Range<usize>) -> Result<Vec<Unit>, RewriteError> {
    let built = log_of(t)?;
    let plan = plan_between(t, &built, range.start, range.end)?;
    Ok(built
        .log
        .units(&plan)
        .into_iter()
        .map(|u| Unit {
            call_id: built.original(&u.call_id),
            ..u
        })
        .collect())
}

/// Writes `t` (read from `input`) compacted at message boundaries the caller chose:
/// messages `..head` verbatim, one summary message whose text is `summary` followed by
/// the ledger of `head..cut` (see the module doc), then messages `cut..`. `head` and
/// `cut` are message indices of the live history; both must be legal cuts
/// ([`legal_message_cuts`](Transcript::legal_message_cuts)), and `head <= cut`. A
/// head at a Codex `compacted` message moves past it (it is pinned). An empty region
/// (`head == cut`) summarizes nothing: the input comes back as it is. For JSONL, lines
/// that are not messages are kept up to the first summarized message and from the cut
/// on, and dropped in between; for JSON documents, the text around the message array
/// is kept. **O(len)**.
///
/// # Errors
/// [`RewriteError`] when `head` or `cut` is not a legal boundary, or out of range, or
/// `input` is not `t`'s text.
#[cfg(feature = "testing")]
pub fn render(
    t: &Transcript,
    input: &str,
    head: usize,
    cut: usize,
    summary: &str,
) -> Result<String, RewriteError> {
    check_range(t, input, head, cut)?;
    let head = pin_compacted(t, head);
    let cut = cut.max(head);
    let built = log_of(t)?;
    let plan = plan_between(t, &built, head, cut)?;
    Ok(write(t, input, built, &plan, summary)?.text)
}

/// `head <= cut <= len`, and every span of `t` lies in `input`. **O(messages)**.
fn check_range(t: &Transcript, input: &str, head: usize, cut: usize) -> Result<(), RewriteError> {
    let len = t.messages.len();
    if head > cut || cut > len {
        return Err(RewriteError::OutOfRange { cut, head, len });
    }
    if let Some(message) = t
        .messages
        .iter()
        .position(|m| m.spans.iter().any(|s| input.get(s.clone()).is_none()))
    {
        return Err(RewriteError::InputMismatch { message });
    }
    if t.array_span
        .as_ref()
        .is_some_and(|a| input.get(a.clone()).is_none())
    {
        return Err(RewriteError::InputMismatch { message: 0 });
    }
    Ok(())
}

/// `plan`'s region of `built` (the log of `t`) replaced by one summary with prose
/// `summary` ([`Log::apply`](crate::compact::Log::apply): earlier summaries folded),
/// written by the one writer. **O(len)**.
fn write(
    t: &Transcript,
    input: &str,
    mut built: TranscriptLog,
    plan: &Plan,
    summary: &str,
) -> Result<Rewritten, RewriteError> {
    let (head, cut) = (
        t.message_at(&built.owner, plan.region.start),
        t.message_at(&built.owner, plan.region.end),
    );
    if plan.region.is_empty() {
        // Nothing to summarize: a summary of nothing is not written.
        return Ok(Rewritten {
            text: input.to_owned(),
            head,
            cut,
            tokens: 0,
            ledger: Vec::new(),
            orphans: Vec::new(),
        });
    }
    let mut log = std::mem::take(&mut built.log);
    // The summary record's count, by the estimate (the written message is counted
    // again when the output is read), without collecting the units twice.
    let tokens = log
        .units_estimate(plan)
        .saturating_add(estimate_tokens(summary));
    let mut step = StepReport::new(Kind::Summarize, &log);
    step.edits.push(Edit::Replaced {
        start: plan.region.start,
        end: plan.region.end,
    });
    let applied = log
        .apply(plan, Some(summary.to_owned()), tokens)
        .map_err(|_| RewriteError::NotLegal {
            at: cut,
            what: Boundary::Cut,
        })?;
    let at = applied.summary_at;
    let (parts, _) = edit::summary_of(at.and_then(|at| log.entries().get(at)), &built.renamed)?;
    let text = edit::write(t, input, &built, &[&step], &log)?;
    Ok(Rewritten {
        text,
        head,
        cut,
        tokens: plan.region_tokens,
        ledger: parts.units,
        orphans: parts.orphans,
    })
}

/// A compaction written back in the transcript's format.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Rewritten {
    /// The compacted log, in the input's format.
    pub text: String,
    /// First summarized message (end of the pinned head).
    pub head: usize,
    /// First retained message.
    pub cut: usize,
    /// Tokens of the summarized messages.
    pub tokens: u64,
    /// The summarized tool pairs, as the summary's ledger lists them (earlier
    /// summaries' units included).
    pub ledger: Vec<Unit>,
    /// The results without their call the summary lists.
    pub orphans: Vec<Orphan>,
}

/// The plan of one summary on `log` at `window`, its deferrals told by `tell` (in
/// records or in messages): the one planning of `compact --target`, on records JSONL
/// and on the other formats alike. A target past the head that the walk back answers
/// with the head's end itself defers, as it does one record or message later (issue
/// 24); an empty plan is left only when nothing defers. **O(log n + r)**.
///
/// # Errors
/// [`RewriteError::Deferred`] when no legal cut lies in the window, or only the
/// head's end; [`RewriteError::Plan`] when the head is still open.
pub(crate) fn plan_summary(
    log: &Log,
    window: &Window,
    tell: impl Fn(&Defer) -> DeferReport,
) -> Result<Plan, RewriteError> {
    let plan = log.plan(window).map_err(|e| match e {
        PlanError::NoLegalCut(defer) => {
            let report = tell(&defer);
            RewriteError::Deferred(Box::new(if window.direction == Direction::Forward {
                report.searched_forward()
            } else {
                report
            }))
        }
        other => RewriteError::Plan(other),
    })?;
    if plan.region.is_empty() {
        if let Some(defer) = super::defer_at_head(log.tracker(), plan.region.start, window) {
            return Err(RewriteError::Deferred(Box::new(
                tell(&defer).reaching_only_the_head(),
            )));
        }
    }
    Ok(plan)
}

/// Compacts `t` (read from `input`): plans once with [`Log::plan`](crate::compact::Log::plan)
/// over the live history's log, `keep_head` messages of the live history pinned
/// (overriding `window.keep_head`, which counts records; a Codex `compacted` message
/// that opens the live history is pinned too), and writes the summary as [`render`]
/// does. `Ok(None)` when there is nothing to compact past the head. **O(len)**.
///
/// # Errors
/// [`RewriteError::Deferred`] (in messages) when no legal cut lies in the window;
/// [`RewriteError::Plan`] when the head is still open; [`RewriteError::Tracker`] when
/// the tracker refuses the records; [`RewriteError::InputMismatch`] when `input` is
/// not `t`'s text.
pub fn compact(
    t: &Transcript,
    input: &str,
    window: &Window,
    keep_head: usize,
    summary: &str,
) -> Result<Option<Rewritten>, RewriteError> {
    check_range(t, input, 0, 0)?;
    let built = log_of(t)?;
    let head_message = pin_compacted(t, t.live_from()).saturating_add(keep_head);
    let mut window = window.clone();
    window.keep_head = record_of(&built, head_message);
    let tracker = built.log.tracker();
    let plan = plan_summary(&built.log, &window, |defer| {
        DeferReport::messages(defer, tracker, t, &built.owner)
    })?;
    if plan.region.is_empty() {
        return Ok(None);
    }
    Ok(Some(write(t, input, built, &plan, summary)?))
}
