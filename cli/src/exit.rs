//! Exit statuses, and how a subcommand stops on bad input.

use std::process::ExitCode;

/// A compaction that must defer (`cut`, `compact`).
pub(crate) const DEFER: u8 = 3;
/// Input that cannot be read or parsed.
pub(crate) const BAD_INPUT: u8 = 2;
/// A log with violations (`check`).
pub(crate) const VIOLATIONS: u8 = 1;

/// Prints `message` on stderr and returns the bad-input exit status.
pub(crate) fn bad_input(message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(BAD_INPUT)
}
