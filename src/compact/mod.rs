//! Schema-preserving compaction: replace a region of the log by one summary record
//! without ever splitting a `tool_use`/`tool_result` pair.
//!
//! ```text
//!   Log ──plan(&Policy)──▶ Plan { region, atoms, tail } ──(summarize the atoms)──▶
//!       ──apply(plan, text, tokens)──▶ region replaced by one summary record
//! ```
//!
//! - [`Log`] holds the records with their payloads ([`Entry`]) beside a [`Tracker`].
//! - [`Log::plan`] picks the region under a [`Window`]: it starts after the pinned head and ends at a
//!   legal cut chosen by the tracker (walking back from the token target as the seed
//!   does, or forward to the nearest legal cut past it). Both ends are legal cuts, so
//!   every pair lies wholly inside the region or wholly outside it. The plan lists the
//!   region's [`Atom`]s, each pair as one unit, ready for an LLM summarizer.
//! - [`Log::apply`] replaces the region by one [`RecordKind::Summary`] record whose
//!   [`Unit`]s list every covered pair: call id, tool name, arguments (verbatim by
//!   default), result status and first line. A summary already inside the region is
//!   folded into the new one, unit by unit, so compacting again (re-entry within the
//!   same turn) keeps every call exactly once. The tracker is updated in place at a
//!   cost proportional to the region ([`Tracker::replace_region`]), never rebuilt.
//!
//! The pairing structure is re-derived from the log on every plan, never carried over
//! from an earlier pass; [`validate()`] checks the result against the specification's
//! five conditions, and [`repair`] fixes what can be fixed, listing every change.
//!
//! [`summary_text`] is the one renderer of a summary's ledger: every provider rewrite
//! (`format::rewrite`) and the examples write their ledger lines with it.

mod apply;
mod edit;
mod live;
mod liveness;
pub mod pipeline;
mod plan;
mod repair;
pub mod replay;
pub mod strategy;
mod structure;
mod summary;
pub mod validate;

use std::collections::{HashMap, HashSet, VecDeque};

pub use apply::{Applied, ApplyError, Outcome};
pub use edit::{EditError, Rewrite};
pub use liveness::{Age, StaleCall};
pub use plan::{Atom, Direction, Plan, PlanError, Window};
pub use repair::{ABORTED_RESULT_TEXT, ABORTED_RESULT_TOKENS, Change, RepairReport, repair};
pub use summary::{
    ArgumentPolicy, Orphan, PROTECTED_FIELDS, SummaryParts, estimate_summary_tokens,
    estimate_tokens, first_line, shorten_arguments, summary_text,
};
#[cfg(feature = "formats")]
pub(crate) use summary::{FIRST_LINE_CHARS, LEDGER_HEADING, nth_char_start};
pub use validate::{
    CallState, Options, PairingStructure, Report, Violation, validate, validate_records,
};

use crate::{AppendError, Appended, CallId, Record, RecordKind, Tracker};

/// How a tool call ended, as a summary unit and a result payload record it.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum ResultStatus {
    /// The tool ran and returned.
    Ok,
    /// The tool reported an error.
    Error,
    /// The call never got a real result; [`repair`] inserted one.
    Aborted,
}

impl ResultStatus {
    /// `ok`, `error` or `aborted`. **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            ResultStatus::Ok => "ok",
            ResultStatus::Error => "error",
            ResultStatus::Aborted => "aborted",
        }
    }
}

/// One compacted pair inside a summary: what a model needs to interpret it later
/// ("called `bash {"command":"pytest -x"}` → error: 3 failed").
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Unit {
    /// The call's id.
    pub call_id: CallId,
    /// The tool's name, when the log recorded it.
    pub tool: Option<String>,
    /// The call's arguments as the log recorded them (JSON text, verbatim unless an
    /// [`ArgumentPolicy`] shortened long fields). `None` means they were lost, which
    /// [`validate()`] reports as argument loss; a call that was recorded
    /// without arguments gets `Some("null")`.
    pub arguments: Option<String>,
    /// How the call ended, when known.
    pub status: Option<ResultStatus>,
    /// The first line of the result, when known.
    pub first_line: Option<String>,
}

impl Unit {
    /// A unit that knows only its call id (arguments lost). **O(1)**.
    pub fn bare(call_id: CallId) -> Self {
        Unit {
            call_id,
            tool: None,
            arguments: None,
            status: None,
            first_line: None,
        }
    }
}

/// Whose native compaction: a provider's own compaction record (a records JSONL
/// `compaction` record, [`Payload::Compaction`]) or the keep-recent cut made for one
/// (`format::keep_recent_cut`). Non-exhaustive: later versions add providers.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum NativeCompaction {
    /// Anthropic compaction (on-demand `compaction: {"type": "summarize"}` or
    /// threshold): the messages before the cut are summarized into one `compaction`
    /// block, the ones after it follow that block unchanged.
    Anthropic,
    /// OpenAI Responses compaction: an encrypted `compaction` item; only items before
    /// the most recent one may be dropped.
    OpenAi,
}

/// What a record says, beyond its kind and size. The tracker never sees payloads.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub enum Payload {
    /// Nothing recorded (plain records, user and assistant text).
    #[default]
    None,
    /// A `tool_use`'s tool name and arguments (JSON text), as far as recorded.
    Call {
        /// The tool's name.
        name: Option<String>,
        /// The arguments, verbatim JSON text.
        arguments: Option<String>,
    },
    /// A `tool_result`'s status and content, as far as recorded.
    Result {
        /// How the call ended.
        status: Option<ResultStatus>,
        /// The output text.
        content: Option<String>,
    },
    /// A summary's text and the pairs it covers, one unit each, in log order.
    Summary {
        /// Prose from the summarizer, if any (with the prose of the earlier summaries
        /// it folded, ahead of it).
        text: Option<String>,
        /// The covered pairs.
        units: Vec<Unit>,
        /// The results its region held without their call ([`Orphan`]s), in log
        /// order, earlier summaries' included: listed, so that none is dropped without
        /// a word. Not calls: the record does not cover them.
        orphans: Vec<Orphan>,
    },
    /// Thinking or reasoning (an `assistant` record): an Anthropic `thinking` /
    /// `redacted_thinking` block, a Responses `reasoning` item, a Gemini thought part.
    /// Cleared in place by the `clear-thinking` strategy (its record then counts 0
    /// tokens; a provider rewrite drops the block). The record model has no thinking
    /// kind yet; [`Entry::reasoning`] is the one place that tells a thinking record.
    Reasoning {
        /// Whether it carries a signature (Anthropic `signature`, Gemini
        /// `thoughtSignature`, encrypted reasoning) that must go back unmodified while
        /// its turn is current.
        signed: bool,
    },
    /// A provider's native compaction (an `assistant` record): an Anthropic
    /// `compaction` block or an OpenAI `compaction` item. The live history starts at
    /// the latest one ([`Log::live_from`]): it and every record before it are pinned,
    /// never summarized, removed, cleared or edited. [`Entry::compaction`] is the one
    /// place that tells a compaction record.
    Compaction(NativeCompaction),
    /// A record kept verbatim where it is, of any kind: a provider's control item (an
    /// Anthropic mid-conversation `system` entry's `tool_addition`, `tool_removal`,
    /// `output_config` or `clear_at`, a `fallback` block, an OpenAI Responses
    /// `configuration_update` or `compaction_trigger`) or a block that loaded a tool (a
    /// `tool_reference` in a `tool_search_tool_result` or an ordinary `tool_result`). A
    /// **wall**: no strategy summarizes, removes, moves or edits it; a region ends before
    /// it or starts after it ([`Log::kept_in`]), so the pair it belongs to stays whole
    /// around it. [`Entry::kept`] is the one place that tells a kept record.
    Kept,
}

impl Payload {
    /// A summary's payload with no orphans: `text` and the `units` it covers.
    /// **O(1)**.
    pub fn summary(text: Option<String>, units: Vec<Unit>) -> Payload {
        Payload::Summary {
            text,
            units,
            orphans: Vec::new(),
        }
    }
}

/// A record with its payload: the unit the compaction layer stores.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Entry {
    /// The record the tracker sees.
    pub record: Record,
    /// What it says.
    pub payload: Payload,
}

impl Entry {
    /// An entry with a payload. **O(1)**.
    pub fn new(record: Record, payload: Payload) -> Self {
        Entry { record, payload }
    }

    /// Whether this is a thinking / reasoning record, and whether it is signed: an
    /// `assistant` record with a [`Payload::Reasoning`]. **O(1)**.
    pub fn reasoning(&self) -> Option<bool> {
        match (&self.payload, self.record.kind()) {
            (Payload::Reasoning { signed }, RecordKind::Assistant) => Some(*signed),
            _ => None,
        }
    }

    /// Whose native compaction this is, if it is one: an `assistant` record with a
    /// [`Payload::Compaction`]. **O(1)**.
    pub fn compaction(&self) -> Option<NativeCompaction> {
        match (&self.payload, self.record.kind()) {
            (Payload::Compaction(native), RecordKind::Assistant) => Some(*native),
            _ => None,
        }
    }

    /// Whether this record is kept verbatim where it is ([`Payload::Kept`]): a wall no
    /// region may cover and no in-place edit may touch. **O(1)**.
    pub fn kept(&self) -> bool {
        matches!(self.payload, Payload::Kept)
    }

    /// The units of a summary entry: its payload's units, or bare units (arguments
    /// lost) for the covered ids when the payload has none. Empty for other kinds.
    /// **O(k)** for `k` units.
    pub fn units(&self) -> Vec<Unit> {
        match (&self.payload, self.record.kind()) {
            (Payload::Summary { units, .. }, RecordKind::Summary(_)) => units.clone(),
            (_, RecordKind::Summary(ids)) => ids.iter().cloned().map(Unit::bare).collect(),
            _ => Vec::new(),
        }
    }
}

impl From<Record> for Entry {
    fn from(record: Record) -> Self {
        Entry {
            record,
            payload: Payload::None,
        }
    }
}

/// A log that can be compacted in place: the entries, and a [`Tracker`] over their
/// records that stays exact through every compaction.
///
/// # Call protocol
/// - **Input**: [`append`](Log::append) entries as they stream in (**O(1)** amortized).
/// - **Compaction**: [`plan`](Log::plan) (**O(log n + r)** for a region of `r`
///   records) or [`plan_region`](Log::plan_region), hand the plan's atoms to a
///   summarizer, then [`apply`](Log::apply)
///   (**O(r + min(head, tail))** amortized), or several regions at once with
///   [`apply_many`](Log::apply_many). A plan goes stale once another plan is
///   applied; `apply` refuses stale plans. In-place edits that keep every record's
///   kind (results and inputs cleared, thinking cleared):
///   [`rewrite_entries`](Log::rewrite_entries). The [`strategy`] module and the
///   [`pipeline`] drive all of these.
/// - **Shape**, kept incrementally (see the definitions in
///   [`turn_starts`](Log::turn_starts)): [`message_count`](Log::message_count),
///   [`turn_count`](Log::turn_count), [`tool_group_count`](Log::tool_group_count),
///   [`turn_start_from_end`](Log::turn_start_from_end),
///   [`tool_group_start_from_end`](Log::tool_group_start_from_end), all **O(1)**.
/// - **Getters**: [`entries`](Log::entries), [`tracker`](Log::tracker),
///   [`changes`](Log::changes), [`compactions`](Log::compactions).
#[derive(Clone, Debug, Default)]
pub struct Log {
    entries: VecDeque<Entry>,
    tracker: Tracker,
    generation: u64,
    /// Every change so far (appends, events, compactions, edits).
    changes: u64,
    /// Records appended so far, never decreasing (a clock in records for liveness).
    appended: u64,
    structure: structure::Structure,
    /// Pending calls that reported an interim result: the `appended` count then.
    interim: HashMap<CallId, u64>,
    /// Calls the provider dropped ([`Event::CallWithdrawn`](crate::Event::CallWithdrawn)):
    /// a result naming one is refused. Empty unless a stream fell back.
    withdrawn: HashSet<CallId>,
    /// Position of the latest compaction record ([`Entry::compaction`]). Nothing at
    /// or before it is ever replaced, removed or edited, so it never moves.
    compaction: Option<usize>,
    /// Positions of the kept records ([`Entry::kept`]), increasing: walls no region
    /// covers. Shifted by every applied batch (none lies inside a region).
    kept: Vec<usize>,
}

impl Log {
    /// An empty log. **O(1)**.
    pub fn new() -> Self {
        Log::default()
    }

    /// An empty log whose tracker refuses what passes `limits` and follows `mode`
    /// (see [`Tracker::with_limits`], [`Tracker::in_mode`]). **O(1)**.
    pub fn with_limits(limits: crate::Limits, mode: crate::Mode) -> Self {
        Log {
            tracker: Tracker::with_limits(limits).in_mode(mode),
            ..Log::default()
        }
    }

    /// A log holding `entries`, appended in order. **O(n)**.
    ///
    /// # Errors
    /// The first [`AppendError`] (the record's position is in it).
    pub fn from_entries<I: IntoIterator<Item = Entry>>(entries: I) -> Result<Self, AppendError> {
        let mut log = Log::new();
        for entry in entries {
            log.append(entry)?;
        }
        Ok(log)
    }

    /// Appends one entry; see [`Tracker::append`]. **O(1)** amortized. A refused entry
    /// leaves the log exactly as it was.
    ///
    /// # Errors
    /// Whatever [`Tracker::append`] refuses.
    pub fn append(&mut self, entry: Entry) -> Result<Appended, AppendError> {
        self.check_withdrawn(&entry.record)?;
        let appended = self.tracker.append(entry.record.clone())?;
        self.pushed(entry);
        Ok(appended)
    }

    /// Refuses a `tool_result` naming a withdrawn call
    /// ([`AppendError::ResultForWithdrawnCall`]). **O(1)**: nothing to look up unless
    /// a call was withdrawn.
    pub(crate) fn check_withdrawn(&self, record: &Record) -> Result<(), AppendError> {
        if self.withdrawn.is_empty() {
            return Ok(());
        }
        match record.kind() {
            RecordKind::ToolResult(id) if self.withdrawn.contains(id) => {
                Err(AppendError::ResultForWithdrawnCall {
                    call_id: id.clone(),
                    at: self.entries.len(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Books an entry the tracker accepted: the entries, the shape, the counters.
    /// **O(1)** amortized.
    pub(crate) fn pushed(&mut self, entry: Entry) {
        let at = self.entries.len();
        self.structure.push(&entry.record, at);
        if entry.compaction().is_some() {
            self.compaction = Some(at);
        }
        if entry.kept() {
            self.kept.push(at);
        }
        if !self.interim.is_empty() {
            if let RecordKind::ToolResult(id) = entry.record.kind() {
                self.interim.remove(id);
            }
        }
        self.entries.push_back(entry);
        self.appended += 1;
        self.changes += 1;
    }

    /// Changes made to this log so far: every append, event, compaction and in-place
    /// edit counts one. Equal counts mean an unchanged log: how the
    /// [policy](crate::policy) knows not to run a pass that made no progress again
    /// before something changed. **O(1)**.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Number of messages (see [`turn_starts`](Log::turn_starts)). **O(1)**.
    pub fn message_count(&self) -> usize {
        self.structure.messages
    }

    /// Number of user turns. **O(1)**.
    pub fn turn_count(&self) -> usize {
        self.structure.turns.len()
    }

    /// Number of tool groups. **O(1)**.
    pub fn tool_group_count(&self) -> usize {
        self.structure.groups.len()
    }

    /// Where the `k`-th user turn from the end starts (`k = 1`: the current turn).
    /// **O(1)**.
    pub fn turn_start_from_end(&self, k: usize) -> Option<usize> {
        self.structure.turns.nth_from_end(k)
    }

    /// Where the `k`-th tool group from the end starts (`k = 1`: the latest). **O(1)**.
    pub fn tool_group_start_from_end(&self, k: usize) -> Option<usize> {
        self.structure.groups.nth_from_end(k)
    }

    /// Where user turns start, increasing.
    ///
    /// - A **message** starts at every record not bound to the previous one (and at
    ///   record 0); a summary record is a message of its own.
    /// - A **user turn** starts at a `user` record that starts a message; tool
    ///   results, summaries and `user` records bound inside another message start no
    ///   turn; records before the first turn belong to none.
    /// - A **tool group** is an assistant message holding at least one `tool_use`
    ///   (it starts at that message's first record), with the results of its calls.
    ///
    /// Kept incrementally as records are appended (**O(1)** each) and renumbered
    /// through compactions at the cost of the compaction. **O(1)** per item.
    pub fn turn_starts(&self) -> impl Iterator<Item = usize> + '_ {
        self.structure.turns.iter()
    }

    /// Where tool groups start, increasing (see [`turn_starts`](Log::turn_starts)).
    /// **O(1)** per item.
    pub fn tool_group_starts(&self) -> impl Iterator<Item = usize> + '_ {
        self.structure.groups.iter()
    }

    /// The user turn starts in `from..to`, increasing. **O(log n)** to create,
    /// **O(1)** per item.
    pub fn turn_starts_in(&self, from: usize, to: usize) -> impl Iterator<Item = usize> + '_ {
        self.structure.turns.range(from, to)
    }

    /// Where the live history starts: the position of the latest compaction record
    /// ([`Entry::compaction`], a provider's native compaction), 0 when there is none,
    /// as `format::Transcript::live_from` answers for a provider transcript. The
    /// records before it are history the provider no longer receives. **O(1)**.
    pub fn live_from(&self) -> usize {
        self.compaction.unwrap_or(0)
    }

    /// The end of the pinned head for `keep_head` records asked: the larger of
    /// `keep_head` and the record after the latest compaction record (it and every
    /// record before it are never summarized, removed, cleared or edited), at most the
    /// log's length. The one place the pinned head is decided: [`Log::plan`], the
    /// strategies' regions and edits all start here (at the first legal cut at or
    /// after it when they replace regions). **O(1)**.
    pub fn pinned_head(&self, keep_head: usize) -> usize {
        keep_head
            .max(self.compaction.map_or(0, |c| c + 1))
            .min(self.entries.len())
    }

    /// The first kept record ([`Entry::kept`]) in `range`, if any: a region over
    /// `range` would cover a wall. **O(log k)** for `k` kept records.
    pub fn kept_in(&self, range: std::ops::Range<usize>) -> Option<usize> {
        let i = self.kept.partition_point(|&p| p < range.start);
        self.kept.get(i).copied().filter(|&p| p < range.end)
    }

    /// The positions of the kept records, increasing. **O(1)**.
    pub fn kept_positions(&self) -> &[usize] {
        &self.kept
    }

    /// `start..end` (both legal cuts) split around the kept records it holds: the
    /// maximal sub-ranges between legal cuts that hold none, in order, empty ones left
    /// out. What a strategy replaces or removes instead of `start..end`, each wall (and
    /// the pair or message bound to it) staying where it is between them.
    /// **O((1 + w) log k + gap / 64)** for `w` walls in the range.
    pub fn around_kept(&self, start: usize, end: usize) -> Vec<std::ops::Range<usize>> {
        let t = &self.tracker;
        let mut out = Vec::new();
        let mut a = start;
        while a < end {
            let Some(wall) = self.kept_in(a..end) else {
                out.push(a..end);
                break;
            };
            let b = t.legal_cut_at_or_before(wall).max(a);
            if b > a {
                out.push(a..b);
            }
            match t.legal_cut_at_or_after(wall + 1) {
                Some(next) => a = next,
                None => break,
            }
        }
        out
    }

    /// The entries, in log order. **O(1)**.
    pub fn entries(&self) -> &VecDeque<Entry> {
        &self.entries
    }

    /// The tracker over the entries' records. **O(1)**.
    pub fn tracker(&self) -> &Tracker {
        &self.tracker
    }

    /// Number of entries. **O(1)**.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the log is empty. **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks the tracker's invariants and that it describes the entries: one record
    /// per entry, same token counts. Panics with a description otherwise. **O(n)**.
    /// For tests and fuzzers.
    #[doc(hidden)]
    pub fn assert_invariants(&self) {
        self.tracker.assert_invariants();
        if let Err(broken) = self.structure.check(self.entries.iter().map(|e| &e.record)) {
            panic!("log shape: {broken}");
        }
        assert_eq!(
            self.entries.len(),
            self.tracker.len(),
            "one record per entry"
        );
        for (i, e) in self.entries.iter().enumerate() {
            assert_eq!(
                Some(e.record.tokens()),
                self.tracker.record_tokens(i),
                "tokens of entry {i}"
            );
            assert_eq!(
                e.kept(),
                self.kept.binary_search(&i).is_ok(),
                "entry {i} is listed as kept exactly when it is"
            );
            if let (Payload::Summary { units, .. }, RecordKind::Summary(ids)) =
                (&e.payload, e.record.kind())
            {
                assert!(
                    units.iter().map(|u| &u.call_id).eq(ids.iter()),
                    "summary {i} lists the units it covers"
                );
            }
        }
    }

    /// The entries, taking the log apart. **O(n)**.
    pub fn into_entries(self) -> Vec<Entry> {
        self.entries.into()
    }
}

impl AsRef<Tracker> for Log {
    fn as_ref(&self) -> &Tracker {
        &self.tracker
    }
}
