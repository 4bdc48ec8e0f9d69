//! Subcommands of the `cutpoint` binary, one per file, and what they share.

pub(crate) mod bench;
pub(crate) mod check;
pub(crate) mod check_formats;
pub(crate) mod compact;
pub(crate) mod compact_formats;
pub(crate) mod cut;
pub(crate) mod formats;
pub(crate) mod guard;
pub(crate) mod input;
pub(crate) mod stats;

/// Exit status for a compaction that must defer.
pub(crate) const EXIT_DEFER: u8 = 3;
/// Exit status for input that cannot be read or parsed.
pub(crate) const EXIT_BAD_INPUT: u8 = 2;
/// Exit status for a log with violations (`cutpoint check`).
pub(crate) const EXIT_VIOLATIONS: u8 = 1;
