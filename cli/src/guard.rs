//! What the CLI guards its input with: the caps and mode flags, and the line of each
//! call id's first `tool_use` and first `tool_result`, so that a repeated id names both
//! lines (the tracker keeps only fingerprints of answered calls).

use std::collections::HashMap;

use cutpoint::{AppendError, CallId, Limits, Mode, Record, RecordKind, StrictViolation, Tracker};

/// Input caps and strictness, for the subcommands that feed a tracker (`cut`,
/// `compact`).
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct InputOptions {
    /// Refuse records that break pairing (orphan or duplicate results, a call after its
    /// result) instead of accepting them as the seed does.
    #[arg(long)]
    strict: bool,
    #[command(flatten)]
    caps: Caps,
}

impl InputOptions {
    pub(crate) fn limits(&self) -> Limits {
        self.caps.limits()
    }

    pub(crate) fn mode(&self) -> Mode {
        if self.strict {
            Mode::Strict
        } else {
            Mode::Lenient
        }
    }
}

/// Input caps, shared by every subcommand that reads a log (`check` takes these
/// without `--strict`: it reports pairing violations rather than refusing them).
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct Caps {
    /// Most records a log may hold (summaries: also most calls answered).
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT_MAX_RECORDS)]
    max_records: usize,
    /// Most calls open at once (calls awaiting a result plus results awaiting a call).
    #[arg(long, value_name = "N", default_value_t = Limits::DEFAULT_MAX_OPEN_CALLS)]
    max_open_calls: usize,
    /// Longest call id, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::DEFAULT_MAX_CALL_ID_BYTES)]
    max_call_id_bytes: usize,
    /// Longest input line, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::DEFAULT_MAX_LINE_BYTES)]
    max_line_bytes: usize,
}

impl Caps {
    pub(crate) fn limits(&self) -> Limits {
        let mut limits = Limits::default();
        limits.max_records = self.max_records;
        limits.max_open_calls = self.max_open_calls;
        limits.max_call_id_bytes = self.max_call_id_bytes;
        limits.max_line_bytes = self.max_line_bytes;
        limits
    }
}

/// Holds a log that is read without judging its pairing (`check`) to the caps: a
/// lenient tracker fed every record, which stands in a plain record for one it refuses
/// for pairing, so that records, open calls and ids count as in `cut`. **O(1)**
/// amortized per record, plus the id's hashing.
pub(crate) struct CapGauge {
    tracker: Tracker,
}

impl CapGauge {
    pub(crate) fn new(limits: Limits) -> Self {
        CapGauge {
            tracker: Tracker::with_limits(limits),
        }
    }

    /// Counts `record`; the cap it would pass, if any.
    pub(crate) fn admit(&mut self, record: &Record) -> Result<(), AppendError> {
        match self.tracker.append(record.clone()) {
            Ok(_) => Ok(()),
            Err(e @ AppendError::LimitExceeded { .. }) => Err(e),
            // A pairing refusal (a reused or empty id, a summary covering a seen id, a
            // token overflow): the caps held, so a plain record takes its place.
            Err(_) => self.tracker.append(Record::user(0)).map(drop),
        }
    }
}

/// Lines of the first `tool_use` and first `tool_result` of each call id seen.
/// One entry per distinct id the tracker accepted, so it is bounded by the record cap
/// times the id cap. **O(len(id))** per tool record.
#[derive(Default)]
pub(crate) struct CallLines {
    lines: HashMap<CallId, FirstLines, foldhash::quality::RandomState>,
}

#[derive(Default, Clone, Copy)]
struct FirstLines {
    tool_use: Option<usize>,
    tool_result: Option<usize>,
}

impl CallLines {
    /// Notes an accepted record read on `line`.
    pub(crate) fn accepted(&mut self, record: &Record, line: usize) {
        let (id, is_use) = match record.kind() {
            RecordKind::ToolUse(id) => (id, true),
            RecordKind::ToolResult(id) => (id, false),
            _ => return,
        };
        let entry = match self.lines.get_mut(id.as_str()) {
            Some(entry) => entry,
            None => self.lines.entry(id.clone()).or_default(),
        };
        let slot = if is_use {
            &mut entry.tool_use
        } else {
            &mut entry.tool_result
        };
        slot.get_or_insert(line);
    }

    fn first(&self, id: &str) -> FirstLines {
        self.lines.get(id).copied().unwrap_or_default()
    }

    /// The message for a refused append, naming the earlier line when an id repeats.
    pub(crate) fn explain(&self, error: &AppendError) -> String {
        let on = |l: Option<usize>| l.map_or_else(String::new, |l| format!(" on line {l}"));
        match error {
            AppendError::DuplicateCall { call_id, .. } => format!(
                "tool_use id {call_id:?} repeats the tool_use{}; ids must be unique",
                on(self.first(call_id).tool_use)
            ),
            AppendError::Violation(StrictViolation::DuplicateResult { call_id, .. }) => format!(
                "tool_result {call_id:?} repeats the tool_result{} (--strict)",
                on(self.first(call_id).tool_result)
            ),
            AppendError::Violation(StrictViolation::UseAfterResult { call_id, .. }) => format!(
                "tool_use {call_id:?} comes after its tool_result{} (--strict)",
                on(self.first(call_id).tool_result)
            ),
            AppendError::Violation(StrictViolation::OrphanResult { call_id, .. }) => format!(
                "tool_result {call_id:?} has no tool_use before it (orphan result; --strict)"
            ),
            other => cap_message(other),
        }
    }
}

/// The message for a refused append that names no line: a passed cap names its flag.
pub(crate) fn cap_message(error: &AppendError) -> String {
    match error {
        AppendError::LimitExceeded {
            limit, max, value, ..
        } => format!(
            "{value} {limit} would pass the cap of {max} (--{})",
            limit.field().replace('_', "-")
        ),
        other => other.to_string(),
    }
}
