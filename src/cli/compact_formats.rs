//! `cutpoint compact` on the provider formats: planned by
//! [`cutpoint::format::compact::compact_transcript`] and printed in the input's format.

use std::io::{self, Write};
use std::process::ExitCode;

use cutpoint::compact::{Direction, Policy};
use cutpoint::format::compact::{CompactError, compact_transcript};
use cutpoint::format::{ByteEstimate, Format};

use super::formats::{self, Loaded};
use super::input;

/// What `compact` asks of a provider-format log.
pub(crate) struct Request {
    pub(crate) target: u64,
    pub(crate) lookback: Option<u64>,
    /// Messages pinned at the front of the live history.
    pub(crate) keep_head: usize,
    pub(crate) forward: bool,
    pub(crate) summary: Option<String>,
}

/// Compacts `loaded` (in `format`, not records) and prints it. Exit status: 0 with the
/// log on stdout, 3 on deferral, 2 on bad input.
pub(crate) fn run(loaded: Loaded, format: Format, request: Request) -> ExitCode {
    let transcript = match formats::parse_as(&loaded, format, &ByteEstimate) {
        Ok(t) => t,
        Err(e) => return input::bad_input(&e),
    };
    let mut policy = Policy::new(request.target);
    if let Some(lookback) = request.lookback {
        policy = policy.lookback(lookback);
    }
    if request.forward {
        policy = policy.direction(Direction::Forward);
    }
    let summary = request
        .summary
        .as_deref()
        .unwrap_or("Earlier conversation, compacted.");
    let mut out = io::stdout().lock();
    match compact_transcript(
        &transcript,
        &loaded.text,
        &policy,
        request.keep_head,
        summary,
    ) {
        Ok(Some(done)) => {
            eprintln!(
                "cutpoint: summarized messages {}..{} ({} tokens, {} tool pairs)",
                done.head,
                done.cut,
                done.tokens,
                done.ledger.len()
            );
            // A closed stdout (`| head`) is not worth a panic.
            let _ = out.write_all(done.text.as_bytes());
            ExitCode::SUCCESS
        }
        Ok(None) => {
            eprintln!("cutpoint: nothing to compact past the pinned head");
            let _ = out.write_all(loaded.text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(CompactError::Deferred(deferral)) => {
            eprintln!("cutpoint: deferred: {deferral}");
            ExitCode::from(super::EXIT_DEFER)
        }
        Err(e) => input::bad_input(&format!("{}: {e}", loaded.name)),
    }
}
