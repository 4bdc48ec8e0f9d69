//! `cutpoint check` on records JSONL: the five conditions of safe compaction
//! ([`cutpoint::validate`]), one `FILE:LINE: kind: call_id` per violation. The
//! subcommand itself (every format, several files, `--json`) is in `check_formats.rs`.

use cutpoint::validate::{Options, validate};

use super::input::{self, Format, Input};

/// One violation of a records log: its input line, kind and call id.
pub(crate) struct RecordsViolation {
    pub(crate) line: usize,
    pub(crate) kind: &'static str,
    pub(crate) call_id: String,
    /// A call still pending in the last turn (reported unless `--allow-pending`).
    pub(crate) pending_at_end: bool,
}

/// The violations of a records log and the digest of its pairing structure.
pub(crate) struct RecordsReport {
    pub(crate) records: usize,
    pub(crate) violations: Vec<RecordsViolation>,
    pub(crate) digest: u64,
}

/// Reads and validates a records log. Errors read `FILE:LINE: what is wrong`.
pub(crate) fn check_records(
    input: Input,
    allow_pending: bool,
    limits: cutpoint::Limits,
) -> Result<RecordsReport, String> {
    let read = input::read_entries(input, Format::Records, limits)?;
    let options = if allow_pending {
        Options::allowing_pending()
    } else {
        Options::strict()
    };
    let report = validate(&read.entries, options);
    let violations = report
        .violations
        .iter()
        .map(|v| RecordsViolation {
            line: read.line(v.at()),
            kind: v.kind(),
            call_id: v.call_id().to_string(),
            pending_at_end: matches!(v, cutpoint::validate::Violation::PendingAtEnd { .. }),
        })
        .collect();
    Ok(RecordsReport {
        records: read.entries.len(),
        violations,
        digest: report.structure.digest(),
    })
}
