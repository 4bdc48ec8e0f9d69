//! A log read in any format, and the jobs the front ends (the CLI, the Python
//! binding) run on it: one entry point per job, records JSONL included, so that a
//! front end tells records JSONL from the other formats only where it reads them.
//!
//! | job | records JSONL | the other formats |
//! |---|---|---|
//! | [`Loaded::select_cut`] | the log's tracker; a record index | the live history's tracker; a message index |
//! | [`Loaded::native_cut`] | refused ([`NoNativeCompaction`]) | [`keep_recent_cut`] |
//! | [`Loaded::summarize`] | [`Log::plan`] and [`Log::apply`], written back line by line | one [`Log::plan`] and [`Log::apply`] on the live history's log, written back by the one writer, then the thinking kept valid |
//! | [`Loaded::run`] | [`Pipeline::run_to_budget`] on the log, written back line by line | the pipeline on the live history's log, written back by the one writer and read back, in rounds |
//! | [`Loaded::check`] | [`validate`](crate::compact::validate()): the five conditions | [`check_rules`], or [`check_against`] an original |
//!
//! Records JSONL is read either judged, into a compaction [`Log`] whose tracker
//! refuses what breaks its caps or mode ([`Loaded::Records`]), or as it is, without
//! judging its pairing ([`Loaded::Unjudged`]: what `check` reads, since it reports
//! what a log would refuse). The jobs that edit or cut judge an unjudged read first
//! ([`Log::from_entries`]).

use crate::format::rewrite::Rewritten;
use std::borrow::Cow;
use std::fmt;

use super::edit::{self, Compacted, EditError};
use super::records::{self, ReadError, Reader};
use super::rewrite::{self, RewriteError};
use super::{
    DeferReport, Format, FormatError, IndexSpace, Keep, NativeCompaction, NativeCut,
    NativeCutError, RuleViolation, TokenCounter, Transcript, check_against, check_rules,
    keep_recent_cut,
};
use crate::compact::pipeline::{Pipeline, Progress};
use crate::compact::strategy::{Prose, Summarizer, SummaryRequest};
use crate::compact::{self, ApplyError, Entry, Log, Unit, Window, estimate_summary_tokens};
use crate::{AppendError, CallId};

/// The lines of `text`: its newlines, and one more for a last line without one.
/// **O(len)**.
fn lines_in(text: &str) -> usize {
    let newlines = text.bytes().filter(|&b| b == b'\n').count();
    newlines + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

/// The prose that heads a summary on the provider formats when the caller gives none.
pub const DEFAULT_SUMMARY: &str = "Earlier conversation, compacted.";

/// A log read in one format, as the jobs take it.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Loaded<'a> {
    /// Records JSONL judged into a compaction log (one entry per line), and the input
    /// it was read from: empty when it was streamed rather than held whole.
    Records {
        /// The log.
        log: Box<Log>,
        /// The input's text, or `""`.
        input: &'a str,
    },
    /// Records JSONL as it was read, its pairing not judged, with the 1-based input
    /// line of each entry.
    Unjudged {
        /// The entries, in log order.
        entries: Vec<Entry>,
        /// `lines[i]` is the line of `entries[i]`.
        lines: Vec<usize>,
    },
    /// Any other format: the transcript and the text it was read from.
    Transcript {
        /// The transcript.
        transcript: Transcript,
        /// Its text.
        input: &'a str,
    },
}

/// Why a text could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A records JSONL line is not a record.
    #[error(transparent)]
    Records(#[from] ReadError),
    /// The log's tracker refused a record (records JSONL).
    #[error(transparent)]
    Refused(#[from] AppendError),
    /// The text is not valid in its format (the other formats).
    #[error(transparent)]
    Format(#[from] FormatError),
}

/// Why no summary was written ([`Loaded::summarize`]).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SummarizeError {
    /// No legal cut near the target, the head still open, or the transcript refused
    /// (in the log's positions).
    #[error(transparent)]
    Rewrite(#[from] RewriteError),
    /// The summary could not be applied to the records log.
    #[error(transparent)]
    Apply(#[from] ApplyError),
    /// The output did not read back to be counted (a bug: every output reads back).
    #[error("the summarized log does not read back: {0}")]
    ReadBack(String),
    /// Keeping the thinking valid failed: [`EditError::ThinkingBound`] when neither
    /// stripping nor a simple compaction keeps it valid (a call still in flight: the
    /// caller defers).
    #[error(transparent)]
    Thinking(#[from] EditError),
}

/// The most summaries [`Loaded::summarize`] makes toward a budget: each asks for the region
/// to grow past the previous cut by what the last left over the budget, so the cut
/// only moves forward, and one that cannot move it ends the loop. Bounded so that a
/// pathological ledger cannot loop long.
pub const BUDGET_PASSES: usize = 8;

/// How many more tokens a region must take in to lose `over` tokens, when its summary
/// keeps about the share of a region's tokens this one's did: `summary / region` of
/// what it takes in comes back in the ledger, so it takes in
/// `over / (1 - summary / region)`. Twice `over` when the summary was as large as the
/// region. Estimating the ledger's growth makes a budget take two passes, typically,
/// where adding just `over` takes one pass per round of ledger growth. **O(1)**.
fn grow_by(over: u64, region: u64, summary: u64) -> u64 {
    let saved = region.saturating_sub(summary);
    if saved == 0 {
        return over.saturating_mul(2);
    }
    let grown = u128::from(over) * u128::from(region) / u128::from(saved);
    u64::try_from(grown).unwrap_or(u64::MAX).max(over)
}

/// Records JSONL asked for a provider's native compaction ([`Loaded::native_cut`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("records JSONL has no native compaction")]
#[non_exhaustive]
pub struct NoNativeCompaction;

/// `check` was asked to compare a records log with an original.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("--before compares provider formats; a records log is checked on its own")]
#[non_exhaustive]
pub struct NotComparable;

/// How [`Loaded::summarize`] counts a records summary's tokens: from the ledger it
/// lists.
pub type SummaryCount<'c> = &'c dyn Fn(&[Unit]) -> u64;

/// What [`Loaded::summarize`] is asked for: one summary at the window's target, or
/// with [`budget`](Self::budget) the one that brings the live history within it.
#[derive(Clone)]
#[non_exhaustive]
pub struct SummaryOptions<'c> {
    /// The window: its lookback, direction and argument policy, and, without a
    /// budget, its target (with a budget the target is set pass by pass).
    pub window: Window,
    /// The live history's budget in tokens, if any.
    pub budget: Option<u64>,
    /// Records (records JSONL) or messages of the live history (the other formats)
    /// pinned at the front, overriding `window.keep_head`.
    pub keep_head: usize,
    /// The summary's prose (the provider formats default to [`DEFAULT_SUMMARY`]).
    pub summary: Option<&'c str>,
    /// What a records summary counts for the ledger it lists (by default about a
    /// quarter of its bytes). Records JSONL only ([`Loaded::takes_summary_count`]):
    /// a provider format's summary message is counted as written.
    pub summary_tokens: Option<SummaryCount<'c>>,
    /// Keep thinking bound to its prefix valid (the default): what the summary
    /// invalidates is stripped, or the output is a simple compaction, or the summary
    /// is refused ([`EditError::ThinkingBound`]).
    pub keep_thinking_valid: bool,
}

impl fmt::Debug for SummaryOptions<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SummaryOptions")
            .field("window", &self.window)
            .field("budget", &self.budget)
            .field("keep_head", &self.keep_head)
            .field("summary", &self.summary)
            .field("summary_tokens", &self.summary_tokens.map(|_| "fn"))
            .field("keep_thinking_valid", &self.keep_thinking_valid)
            .finish()
    }
}

impl<'c> SummaryOptions<'c> {
    /// One summary at `window`'s target, no head pinned, the default prose, thinking
    /// kept valid. **O(1)**.
    pub fn at(window: Window) -> Self {
        SummaryOptions {
            window,
            budget: None,
            keep_head: 0,
            summary: None,
            summary_tokens: None,
            keep_thinking_valid: true,
        }
    }

    /// The summary that brings the live history within `budget` tokens, the cut
    /// searched from `window` (its lookback, direction and argument policy). **O(1)**.
    pub fn within(budget: u64, window: Window) -> Self {
        SummaryOptions {
            budget: Some(budget),
            ..SummaryOptions::at(window)
        }
    }

    /// Pins `n` records or messages of the live history. **O(1)**.
    pub fn keep_head(mut self, n: usize) -> Self {
        self.keep_head = n;
        self
    }

    /// The summary's prose. **O(1)**.
    pub fn summary(mut self, text: Option<&'c str>) -> Self {
        self.summary = text;
        self
    }

    /// What a records summary counts (records JSONL only,
    /// [`Loaded::takes_summary_count`]). **O(1)**.
    pub fn summary_tokens(mut self, count: Option<SummaryCount<'c>>) -> Self {
        self.summary_tokens = count;
        self
    }

    /// Whether to keep thinking valid (on by default). **O(1)**.
    pub fn keep_thinking_valid(mut self, on: bool) -> Self {
        self.keep_thinking_valid = on;
        self
    }
}

/// What keeping thinking valid did to a summary ([`Summarized::thinking`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum ThinkingStep {
    /// Nothing: the summary invalidated nothing, or the caller allowed it.
    Untouched,
    /// The thinking the summary invalidated was stripped.
    Stripped,
    /// The output is a simple compaction of the log instead (the whole live history
    /// past the head in one summary, the next instruction kept).
    Simple,
}

/// A summary written by [`Loaded::summarize`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Summarized {
    /// One line saying what was done, as `cutpoint compact` prints it.
    pub done: String,
    /// The log after it (the thinking step's output, if it ran) and what was
    /// summarized (for records JSONL too: its positions are records, and no orphans
    /// are listed); `head == cut` when nothing was compacted, the text then the input.
    /// After a simple compaction the ledger is empty (the simple compaction's own is
    /// in its text).
    pub summary: Rewritten,
    /// The thinking blocks and reasoning items of the text that the output invalidates
    /// for their provider's prefix binding (as
    /// [`Compacted::invalidated`]); empty for
    /// records JSONL, when nothing was compacted, and when thinking was kept valid.
    pub invalidated: Vec<super::Invalidated>,
    /// Tokens of the live history before.
    pub tokens_before: u64,
    /// Tokens of the live history after, by the counter given.
    pub tokens_after: u64,
    /// The summary message as written (a document's element, or the JSON lines of
    /// the summarized position: the summary's own, not a retained record the reader
    /// merges into its message; the summary record for records JSONL); `None` when
    /// nothing was compacted, and after a simple compaction.
    pub message: Option<String>,
    /// How many summaries were made to get here (1 without a budget).
    pub passes: usize,
    /// What keeping thinking valid did.
    pub thinking: ThinkingStep,
}

impl Summarized {
    /// A summary not yet counted or checked for thinking. **O(1)**.
    fn of(done: String, summary: Rewritten) -> Self {
        Summarized {
            done,
            summary,
            invalidated: Vec::new(),
            tokens_before: 0,
            tokens_after: 0,
            message: None,
            passes: 1,
            thinking: ThinkingStep::Untouched,
        }
    }

    /// Whether it compacted anything and the log got smaller. **O(1)**.
    pub fn shrank(&self) -> bool {
        let s = &self.summary;
        s.head < s.cut && self.tokens_after < self.tokens_before
    }
}

/// One violation [`Loaded::check`] found.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Finding {
    /// The rule's name: a provider rule's ([`Rule::name`](super::Rule::name)), or the
    /// kind of a records violation ([`compact::Violation::kind`]).
    pub rule: &'static str,
    /// The position of what breaks it: a message, or a record for records JSONL
    /// (see `space`).
    pub at: usize,
    /// What `at` counts.
    pub space: IndexSpace,
    /// The 1-based input line holding it.
    pub line: usize,
    /// The call id concerned, if any.
    pub call_id: Option<CallId>,
    /// A call still unanswered at the very end of the log (a turn in flight).
    pub pending_at_end: bool,
    /// The provider's error text, filled in (empty for records JSONL).
    pub text: String,
    /// The finding on one line, `LINE: rule: call_id text ...`.
    pub display: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.display)
    }
}

impl From<&RuleViolation> for Finding {
    fn from(v: &RuleViolation) -> Self {
        Finding {
            rule: v.rule.name(),
            at: v.message,
            space: IndexSpace::Messages,
            line: v.line,
            call_id: v.call_id.clone(),
            pending_at_end: v.pending_at_end,
            text: v.text.clone(),
            display: v.to_string(),
        }
    }
}

/// What [`Loaded::check`] found.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Checked {
    /// The format checked.
    pub format: Format,
    /// Its messages (records, for records JSONL).
    pub messages: usize,
    /// The violations, in log order.
    pub violations: Vec<Finding>,
    /// Records JSONL: the digest of its pairing structure
    /// ([`PairingStructure::digest`](crate::compact::PairingStructure::digest)).
    pub digest: Option<u64>,
}

impl<'a> Loaded<'a> {
    /// Reads `input` as `format`: records JSONL judged into a [`Log`] (default caps,
    /// lenient; input plainly of another kind is [`FormatError::Mismatch`], as
    /// [`read`](super::read) says), any other format into a [`Transcript`] counted with `counter`.
    /// **O(len)**.
    ///
    /// # Errors
    /// [`LoadError`] naming the line.
    pub fn read(
        input: &'a str,
        format: Format,
        counter: &dyn TokenCounter,
    ) -> Result<Loaded<'a>, LoadError> {
        if format != Format::Records {
            return Ok(Loaded::Transcript {
                transcript: super::read(input, format, counter)?,
                input,
            });
        }
        if let Some(e) = super::mismatch(input, Format::Records) {
            return Err(e.into());
        }
        let mut log = Log::new();
        for item in Reader::new(input.as_bytes()).entries() {
            log.append(item?.1)?;
        }
        Ok(Loaded::Records {
            log: Box::new(log),
            input,
        })
    }

    /// Reads `input` as `format` for [`check`](Loaded::check): records JSONL as it
    /// is ([`Loaded::Unjudged`]), any other format as [`read`](Loaded::read) does.
    /// **O(len)**.
    ///
    /// # Errors
    /// As [`read`](Loaded::read).
    pub fn read_unjudged(
        input: &'a str,
        format: Format,
        counter: &dyn TokenCounter,
    ) -> Result<Loaded<'a>, LoadError> {
        if format != Format::Records {
            return Loaded::read(input, format, counter);
        }
        if let Some(e) = super::mismatch(input, Format::Records) {
            return Err(e.into());
        }
        let (mut entries, mut lines) = (Vec::new(), Vec::new());
        for item in Reader::new(input.as_bytes()).entries() {
            let (line, entry) = item?;
            entries.push(entry);
            lines.push(line);
        }
        Ok(Loaded::Unjudged { entries, lines })
    }

    /// Whether [`SummaryOptions::summary_tokens`] counts this log's summary: records
    /// JSONL, whose summary record carries the count it is given. A provider
    /// format's summary message is counted as it is written, by the counter
    /// [`summarize`](Self::summarize) takes, so a front end that is given a count
    /// for one refuses it rather than drop it. **O(1)**.
    pub fn takes_summary_count(&self) -> bool {
        !matches!(self, Loaded::Transcript { .. })
    }

    /// The format it was read as. **O(1)**.
    pub fn format(&self) -> Format {
        match self {
            Loaded::Transcript { transcript, .. } => transcript.format,
            _ => Format::Records,
        }
    }

    /// Tokens of the live history (the whole log, for records JSONL: the records'
    /// own counts). **O(1)** for a judged records log, **O(blocks)** otherwise.
    pub fn live_tokens(&self) -> u64 {
        match self {
            Loaded::Records { log, .. } => log.tracker().total_tokens(),
            Loaded::Unjudged { entries, .. } => entries
                .iter()
                .fold(0u64, |a, e| a.saturating_add(e.record.tokens())),
            Loaded::Transcript { transcript, .. } => transcript.live_tokens(),
        }
    }

    /// The first position of the live history (0 for records JSONL; for the other
    /// formats the message after the last compaction boundary) and the prefix sums
    /// of the live positions' tokens: `sums[k]` is the tokens before position
    /// `from + k`, the last the live history's total. **O(n)**.
    pub fn live_prefix(&self) -> (usize, Vec<u64>) {
        let (from, tokens): (usize, Vec<u64>) = match self {
            Loaded::Records { log, .. } => {
                (0, log.entries().iter().map(|e| e.record.tokens()).collect())
            }
            Loaded::Unjudged { entries, .. } => {
                (0, entries.iter().map(|e| e.record.tokens()).collect())
            }
            Loaded::Transcript { transcript, .. } => {
                let from = transcript.live_from();
                (
                    from,
                    transcript.messages[from..]
                        .iter()
                        .map(super::Message::tokens)
                        .collect(),
                )
            }
        };
        let mut sums = Vec::with_capacity(tokens.len() + 1);
        sums.push(0u64);
        for t in tokens {
            sums.push(sums[sums.len() - 1].saturating_add(t));
        }
        (from, sums)
    }

    /// Records JSONL judged (the records log itself, or an unjudged read appended to
    /// a new one) with its input, or the transcript with its text. **O(1)**, or
    /// **O(n)** to judge.
    fn view(&self) -> View<'_, 'a> {
        match self {
            Loaded::Records { log, input } => View::Records(Ok(Cow::Borrowed(log)), input),
            Loaded::Unjudged { entries, .. } => View::Records(
                Log::from_entries(entries.iter().cloned()).map(Cow::Owned),
                "",
            ),
            Loaded::Transcript { transcript, input } => View::Transcript(transcript, input),
        }
    }

    /// The legal cut nearest `target` within `lookback` tokens
    /// ([`Tracker::select_legal_cut`](crate::Tracker::select_legal_cut)): a record
    /// index for records JSONL, for the other formats the first retained message
    /// (the tracker runs over the live history's records). The inner `Err` is the
    /// deferral, told in the same positions. **O(log n + k)** on a judged log, plus
    /// **O(records)** to build a transcript's tracker.
    ///
    /// # Errors
    /// The tracker's [`AppendError`] (a transcript, or an unjudged log, too long or
    /// refused).
    pub fn select_cut(
        &self,
        target: u64,
        lookback: u64,
    ) -> Result<Result<usize, DeferReport>, AppendError> {
        let transcript = match self.view() {
            View::Records(log, _) => {
                let log = log?;
                let tracker = log.tracker();
                return Ok(tracker
                    .select_legal_cut(target, lookback)
                    .map_err(|d| DeferReport::records(&d, tracker)));
            }
            View::Transcript(transcript, _) => transcript,
        };
        let (tracker, owner) = transcript.tracker()?;
        Ok(tracker
            .select_legal_cut(target, lookback)
            .map(|cut| transcript.message_at(&owner, cut))
            .map_err(|d| DeferReport::messages(&d, &tracker, transcript, &owner)))
    }

    /// The keep-recent cut for a provider's own compaction ([`keep_recent_cut`]).
    /// **O(records)**.
    ///
    /// # Errors
    /// [`NoNativeCompaction`] for records JSONL; otherwise the inner
    /// [`NativeCutError`].
    pub fn native_cut(
        &self,
        kind: NativeCompaction,
        keep: Keep,
    ) -> Result<Result<NativeCut, NativeCutError>, NoNativeCompaction> {
        match self {
            Loaded::Transcript { transcript, .. } => Ok(keep_recent_cut(transcript, kind, keep)),
            _ => Err(NoNativeCompaction),
        }
    }

    /// The session's fit of the token estimate to the input tokens the file reports
    /// ([`Calibration::of`](super::Calibration::of)): `None` for records JSONL and the
    /// request documents, and for a Claude Code, Codex or Gemini CLI file that reports
    /// no usage. **O(len + messages)**.
    pub fn calibration(&self) -> Option<super::Calibration> {
        match self {
            Loaded::Transcript { transcript, input } => super::Calibration::of(input, transcript),
            _ => None,
        }
    }

    /// A budget in the provider's reported tokens, in the estimate's units by the
    /// session's [`calibration`](Loaded::calibration): what `cutpoint compact
    /// --calibrated` and Python's `calibrated=True` compact to. **O(len + messages)**.
    ///
    /// # Errors
    /// [`CalibrateError::NoUsage`](super::CalibrateError::NoUsage) when the log reports
    /// no usage; [`CalibrateError::OverheadOverBudget`](super::CalibrateError::OverheadOverBudget)
    /// when the session's overhead alone is over the budget.
    pub fn calibrated_budget(
        &self,
        reported: u64,
    ) -> Result<super::CalibratedBudget, super::CalibrateError> {
        self.calibration()
            .ok_or(super::CalibrateError::NoUsage {
                format: self.format().name(),
            })?
            .budget(reported)
    }

    /// The log as text, unchanged: the input it was read from, or, for records JSONL
    /// streamed rather than held whole, its entries written back as records JSONL.
    /// **O(1)** for held input, **O(len)** otherwise.
    pub fn text(&self) -> Cow<'a, str> {
        match self {
            Loaded::Transcript { input, .. } => Cow::Borrowed(input),
            Loaded::Records { input, .. } if !input.is_empty() => Cow::Borrowed(input),
            Loaded::Records { log, .. } => Cow::Owned(write_records(log)),
            Loaded::Unjudged { entries, .. } => {
                let mut out = Vec::new();
                for entry in entries {
                    // Writing to a Vec cannot fail.
                    let _ = records::write_entry(&mut out, entry);
                }
                Cow::Owned(String::from_utf8(out).unwrap_or_default())
            }
        }
    }

    /// Replaces the region before a legal cut by one summary and writes the log back
    /// in its format: the one summary route of every front end (`cutpoint compact
    /// --target`, `--keep` and `--budget` with no `--strategy`, Python's `summarize`).
    ///
    /// Without a budget, one summary at `opts.window`'s target. With one, the summary
    /// at the target the budget asks for (the live tokens over it, past the pinned
    /// head), and again with a larger target while the result is over the budget and
    /// the cut can still move (at most [`BUDGET_PASSES`] summaries, each from the
    /// input, never from an earlier output); the one with the fewest tokens after it
    /// is kept, which may still be over the budget. The live history after is counted
    /// with `counter`: a JSON document's summary element read alone (the retained
    /// messages keep their counts), JSON lines and records JSONL read back whole.
    /// Then, with `opts.keep_thinking_valid`, the thinking the summary invalidates for
    /// its prefix binding is stripped, or the output is a simple compaction
    /// ([`ThinkingStep`]), in the code the strategies' route uses. A log with nothing
    /// to compact past its head comes back as it came (`head == cut`). `Ok(None)`
    /// only with a budget: the log is within it already, or no summary makes it
    /// smaller. **O(len)** per pass.
    ///
    /// # Errors
    /// [`SummarizeError::Rewrite`] with [`RewriteError::Deferred`] (no legal cut in
    /// the window, or one reaching only the head) or [`RewriteError::Plan`] (the head
    /// still open), from the first pass (a later pass that defers ends the loop with
    /// the best so far); [`SummarizeError::Thinking`] with
    /// [`EditError::ThinkingBound`]: the caller waits. Any other error is the input's.
    pub fn summarize(
        &self,
        opts: &SummaryOptions<'_>,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Summarized>, SummarizeError> {
        let best = match opts.budget {
            None => Some(self.summary_counted(&opts.window, opts, counter)?),
            Some(budget) => self.summary_within(budget, opts, counter)?,
        };
        let Some(mut best) = best else {
            return Ok(None);
        };
        let View::Transcript(t, input) = self.view() else {
            return Ok(Some(best));
        };
        if best.summary.head == best.summary.cut {
            return Ok(Some(best));
        }
        // What the summary invalidates: the output read back (the blocks' tokens play
        // no part in it).
        let back = super::read(&best.summary.text, t.format, &super::ByteEstimate)
            .map_err(|e| SummarizeError::ReadBack(e.to_string()))?;
        best.invalidated = super::invalidated_thinking(t, &back);
        if !opts.keep_thinking_valid || best.invalidated.is_empty() {
            return Ok(Some(best));
        }
        let back = super::read(&best.summary.text, t.format, counter)
            .map_err(|e| SummarizeError::ReadBack(e.to_string()))?;
        let prose = opts.summary.unwrap_or(DEFAULT_SUMMARY);
        let mut summarizer = |_: &SummaryRequest<'_>| Prose::text(prose);
        let valid = edit::keep_valid(
            t,
            input,
            (opts.keep_head, 0),
            std::mem::take(&mut best.summary.text),
            back,
            &mut summarizer,
            counter,
        )?;
        best.summary.text = valid.text;
        best.tokens_after = valid.back.live_tokens();
        best.invalidated.clear();
        best.thinking = if valid.simple {
            best.summary.ledger.clear();
            best.summary.orphans.clear();
            best.message = None;
            ThinkingStep::Simple
        } else {
            ThinkingStep::Stripped
        };
        Ok(Some(best))
    }

    /// One summary at `window`'s target with the live history after it counted by
    /// `counter` (see [`summarize`](Self::summarize)). **O(len)**.
    fn summary_counted(
        &self,
        window: &Window,
        opts: &SummaryOptions<'_>,
        counter: &dyn TokenCounter,
    ) -> Result<Summarized, SummarizeError> {
        let before = self.live_tokens();
        let mut done = self.summary_at(window, opts)?;
        done.tokens_before = before;
        done.tokens_after = before;
        let s = &done.summary;
        if s.head == s.cut {
            return Ok(done);
        }
        let format = self.format();
        let (tokens_after, message) = if format.is_json_document() && format != Format::GeminiCli {
            // The summary element exactly as the rewrite writes it into a document
            // (the one ledger renderer's text in the format's shape), read alone:
            // no re-read of the whole output is needed.
            let text = compact::SummaryParts::new(
                opts.summary.unwrap_or(DEFAULT_SUMMARY).to_owned(),
                s.ledger.clone(),
                s.orphans.clone(),
            )
            .text();
            let message = super::summary_message(format, &text, super::ByteEstimate.count(&text));
            let alone = super::read(&format!("[{message}]"), format, counter)
                .map_err(|e| SummarizeError::ReadBack(e.to_string()))?;
            let kept = before.saturating_sub(s.tokens);
            (kept.saturating_add(alone.live_tokens()), Some(message))
        } else {
            // JSON lines (Gemini CLI's summary element takes an id and context from
            // its neighbour too): the output read back whole.
            let out = super::read(&s.text, format, counter)
                .map_err(|e| SummarizeError::ReadBack(e.to_string()))?;
            // The reader may merge the first retained record into the summary's
            // message (a Claude Code user record after the summary's): the summary is
            // the message's lines before the retained ones, which are the output's
            // last lines, as many as the input has from the cut on.
            let retained_from = match self.view() {
                View::Transcript(t, input) => {
                    let retained = t
                        .messages
                        .get(s.cut)
                        .and_then(|m| m.spans.first())
                        .map_or(0, |span| lines_in(input.get(span.start..).unwrap_or("")));
                    lines_in(&s.text).saturating_sub(retained)
                }
                _ => usize::MAX,
            };
            let message = out.messages.get(s.head).map(|m| {
                let own = m
                    .spans
                    .iter()
                    .filter(|r| lines_in(s.text.get(..r.start).unwrap_or("")) < retained_from);
                // Never nothing: a message of retained lines only is itself.
                let spans: Vec<_> = if own.clone().next().is_some() {
                    own.collect()
                } else {
                    m.spans.iter().collect()
                };
                spans
                    .into_iter()
                    .map(|r| s.text.get(r.clone()).unwrap_or_default())
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            (out.live_tokens(), message)
        };
        done.tokens_after = tokens_after;
        done.message = message;
        Ok(done)
    }

    /// The budget loop of [`summarize`](Self::summarize): each pass asks the region to
    /// grow past the previous cut by what the last left over the budget, so the cut
    /// only moves forward, and one that cannot move it ends the loop. **O(passes x
    /// len)**.
    fn summary_within(
        &self,
        budget: u64,
        opts: &SummaryOptions<'_>,
        counter: &dyn TokenCounter,
    ) -> Result<Option<Summarized>, SummarizeError> {
        let (live, prefix) = self.live_prefix();
        let before = prefix[prefix.len() - 1];
        if before <= budget {
            return Ok(None);
        }
        let tokens_before = |m: usize| prefix[m.saturating_sub(live).min(prefix.len() - 1)];
        let len = live + prefix.len() - 1;
        let mut target =
            (before - budget).saturating_add(tokens_before(live.saturating_add(opts.keep_head)));
        let mut best: Option<Summarized> = None;
        let mut last_cut = None;
        for pass in 1..=BUDGET_PASSES {
            let mut window = opts.window.clone();
            window.target_tokens = target;
            let done = match self.summary_counted(&window, opts, counter) {
                Ok(done) => done,
                Err(SummarizeError::Rewrite(RewriteError::Plan(_) | RewriteError::Deferred(_)))
                    if best.is_some() =>
                {
                    break;
                }
                Err(e) => return Err(e),
            };
            let s = &done.summary;
            let (cut, region, after) = (s.cut, s.tokens, done.tokens_after);
            if s.head == s.cut && last_cut.is_none() {
                // The head the log pins (a native compaction record in records JSONL,
                // which only its planner knows) lies past the target: count the
                // tokens to compact from there, once.
                let from_head = (before - budget).saturating_add(tokens_before(s.head));
                if from_head > target {
                    target = from_head;
                    last_cut = Some(s.head);
                    continue;
                }
            }
            if s.head == s.cut || last_cut.is_some_and(|c| c >= cut) {
                break;
            }
            last_cut = Some(cut);
            if best.as_ref().is_none_or(|b| after < b.tokens_after) {
                best = Some(Summarized {
                    passes: pass,
                    ..done
                });
            }
            if after <= budget || cut >= len {
                break;
            }
            // after = (before - region) + summary.
            let summary_tokens = (after + region).saturating_sub(before);
            target =
                tokens_before(cut).saturating_add(grow_by(after - budget, region, summary_tokens));
        }
        Ok(best.filter(Summarized::shrank))
    }

    /// One summary at `window`'s target, written back in the log's format, not yet
    /// counted ([`summarize`](Self::summarize)). **O(len)**.
    fn summary_at(
        &self,
        window: &Window,
        opts: &SummaryOptions<'_>,
    ) -> Result<Summarized, SummarizeError> {
        let (transcript, input) = match self.view() {
            View::Transcript(transcript, input) => (transcript, input),
            View::Records(log, _) => {
                let log = log.map_err(RewriteError::from)?.into_owned();
                let window = window.clone().keep_head(opts.keep_head);
                return summarize_records(log, &window, opts.summary, opts.summary_tokens);
            }
        };
        let summary = opts.summary.unwrap_or(DEFAULT_SUMMARY);
        let Some(done) = rewrite::compact(transcript, input, window, opts.keep_head, summary)?
        else {
            let head = transcript.live_from().saturating_add(opts.keep_head);
            return Ok(Summarized::of(
                "nothing to compact past the pinned head".to_owned(),
                Rewritten {
                    text: input.to_owned(),
                    head,
                    cut: head,
                    tokens: 0,
                    ledger: Vec::new(),
                    orphans: Vec::new(),
                },
            ));
        };
        let orphans = match done.orphans.len() {
            0 => String::new(),
            n => format!(", {n} orphan results listed"),
        };
        Ok(Summarized::of(
            format!(
                "summarized messages {}..{} ({} tokens, {} tool pairs{orphans})",
                done.head,
                done.cut,
                done.tokens,
                done.ledger.len()
            ),
            done,
        ))
    }

    /// Runs `pipeline` to its budget and writes the log back in its format: records
    /// JSONL by [`Pipeline::run_to_budget`] on the log (the records' own counts are
    /// the output's; the input comes back byte for byte when nothing was edited and
    /// it was held whole), the other formats through the one writer (read back with
    /// `counter`: while the output is over the budget and the last round changed
    /// something, the pipeline runs again on it, at most [`MAX_ROUNDS`](super::MAX_ROUNDS)
    /// rounds; a transcript within its budget comes back byte for byte). `keep_head` pins the first records or messages of the
    /// live history, with the pipeline's own floor. **O(len)** plus what the stages
    /// cost.
    ///
    /// ```
    /// use cutpoint::compact::pipeline::{Pipeline, Progress};
    /// use cutpoint::compact::strategy::{Clear, LedgerOnly, Strategy};
    /// use cutpoint::format::{self, ByteEstimate, Format, Loaded};
    /// let text = r#"[
    ///   {"role": "user", "content": "list the files"},
    ///   {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
    ///     "function": {"name": "ls", "arguments": "{}"}}]},
    ///   {"role": "tool", "tool_call_id": "c1", "content": "a.txt b.txt c.txt d.txt e.txt f.txt g.txt h.txt i.txt"},
    ///   {"role": "assistant", "content": "Nine files."},
    ///   {"role": "user", "content": "thanks"}
    /// ]"#;
    /// let loaded = Loaded::read(text, Format::OpenAiChat, &ByteEstimate)?;
    /// let clear = Strategy::Clear(Clear::default().keep_tool_uses(0));
    /// let pipeline = Pipeline::one(clear, None);
    /// let done = loaded.run(&pipeline, 0, &mut Progress::new(), &mut LedgerOnly, &ByteEstimate)?;
    /// assert!(done.text.contains("[tool result cleared to save context]"));
    /// assert!(done.report.tokens_after < done.report.tokens_before);
    /// // The report's count is the output's, read back.
    /// let back = format::read(&done.text, Format::OpenAiChat, &ByteEstimate)?;
    /// assert_eq!(done.report.tokens_after, back.live_tokens());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`EditError`]: [`EditError::Tracker`] when an unjudged records log is refused,
    /// else a message that cannot be re-read or an output that does not read back.
    pub fn run(
        &self,
        pipeline: &Pipeline,
        keep_head: usize,
        progress: &mut Progress,
        summarizer: &mut dyn Summarizer,
        counter: &dyn TokenCounter,
    ) -> Result<Compacted, EditError> {
        let (log, input) = match self.view() {
            View::Transcript(transcript, input) => {
                return edit::run(
                    transcript, input, pipeline, keep_head, progress, summarizer, counter,
                );
            }
            View::Records(log, input) => (log, input),
        };
        let mut log = log?.into_owned();
        let mut pipeline = pipeline.clone();
        pipeline.floors.keep_head = pipeline.floors.keep_head.max(keep_head);
        let report = pipeline.run_to_budget(&mut log, progress, summarizer);
        let edited = report.ran().any(|r| !r.edits.is_empty());
        // Nothing edited (within budget, or no stage could act): the input as it came.
        let text = if !edited && !input.is_empty() {
            input.to_owned()
        } else {
            write_records(&log)
        };
        let rounds = usize::from(!report.was_within_budget());
        // Records JSONL: no record is bound to its prefix by a signature.
        Ok(Compacted {
            text,
            report,
            rounds,
            invalidated: Vec::new(),
            simple: false,
        })
    }

    /// Whether `--before` may compare this log with an original: not records JSONL.
    /// **O(1)**.
    ///
    /// # Errors
    /// [`NotComparable`] for records JSONL.
    pub fn comparable(&self) -> Result<(), NotComparable> {
        match self {
            Loaded::Transcript { .. } => Ok(()),
            _ => Err(NotComparable),
        }
    }

    /// The log's violations: records JSONL against the five conditions of safe
    /// compaction ([`compact::validate()`]), every other format against its provider's
    /// rules ([`check_rules`]), or as a rewrite of `before` ([`check_against`]).
    /// With `allow_pending`, calls still unanswered at the very end are not
    /// violations. **O(len)**.
    ///
    /// # Errors
    /// [`NotComparable`] when `before` is given for records JSONL, or is not a
    /// transcript.
    pub fn check(
        &self,
        before: Option<&Loaded<'_>>,
        allow_pending: bool,
    ) -> Result<Checked, NotComparable> {
        let (entries, lines): (Vec<&Entry>, Option<&[usize]>) = match self {
            Loaded::Transcript { transcript, .. } => {
                let mut violations = match before {
                    None => check_rules(transcript),
                    Some(Loaded::Transcript {
                        transcript: original,
                        ..
                    }) => check_against(original, transcript),
                    Some(_) => return Err(NotComparable),
                };
                if allow_pending {
                    violations.retain(|v| !v.pending_at_end);
                }
                return Ok(Checked {
                    format: transcript.format,
                    messages: transcript.messages.len(),
                    violations: violations.iter().map(Finding::from).collect(),
                    digest: None,
                });
            }
            Loaded::Records { log, .. } => (log.entries().iter().collect(), None),
            Loaded::Unjudged { entries, lines } => (entries.iter().collect(), Some(lines)),
        };
        if before.is_some() {
            return Err(NotComparable);
        }
        let options = if allow_pending {
            compact::Options::allowing_pending()
        } else {
            compact::Options::strict()
        };
        let report = compact::validate(entries.iter().copied(), options);
        // The input line of record `at` (one past the last line for the end); a
        // judged log was read without its lines: its records count from 1.
        let line = |at: usize| match lines {
            Some(lines) => lines
                .get(at)
                .copied()
                .unwrap_or_else(|| lines.last().map_or(1, |l| l + 1)),
            None => at + 1,
        };
        let violations = report
            .violations
            .iter()
            .map(|v| {
                let line = line(v.at());
                Finding {
                    rule: v.kind(),
                    at: v.at(),
                    space: IndexSpace::Records,
                    line,
                    call_id: Some(v.call_id().clone()),
                    pending_at_end: matches!(v, compact::Violation::PendingAtEnd { .. }),
                    text: String::new(),
                    display: format!("{line}: {}: {}", v.kind(), v.call_id()),
                }
            })
            .collect();
        Ok(Checked {
            format: Format::Records,
            messages: entries.len(),
            violations,
            digest: Some(report.structure.digest()),
        })
    }
}

/// What a job reads: records JSONL judged, with its input (`""` when none is held),
/// or a transcript with its text.
#[allow(
    clippy::large_enum_variant,
    reason = "one view at a time, on the stack for the length of a job"
)]
enum View<'l, 'a> {
    Records(Result<Cow<'l, Log>, AppendError>, &'a str),
    Transcript(&'l Transcript, &'a str),
}

/// [`Loaded::summarize`] on a records log: [`Log::plan`] and [`Log::apply`], the
/// deferrals told in records. **O(len)**.
fn summarize_records(
    mut log: Log,
    window: &Window,
    summary: Option<&str>,
    summary_tokens: Option<SummaryCount<'_>>,
) -> Result<Summarized, SummarizeError> {
    let plan = rewrite::plan_summary(&log, window, |defer| {
        DeferReport::records(defer, log.tracker())
    })?;
    let ledger = log.units(&plan);
    let tokens = summary_tokens.map_or_else(
        || estimate_summary_tokens(summary, &ledger),
        |count| count(&ledger),
    );
    let done = plan.to_string();
    log.apply(&plan, summary.map(str::to_owned), tokens)?;
    Ok(Summarized::of(
        done,
        Rewritten {
            text: write_records(&log),
            head: plan.region.start,
            cut: plan.region.end,
            tokens: plan.region_tokens,
            ledger,
            orphans: Vec::new(),
        },
    ))
}

/// A records log written back as records JSONL. **O(len)**.
fn write_records(log: &Log) -> String {
    let mut out = Vec::new();
    for entry in log.entries() {
        // Writing to a Vec cannot fail.
        let _ = records::write_entry(&mut out, entry);
    }
    // serde_json writes UTF-8.
    String::from_utf8(out).unwrap_or_default()
}
