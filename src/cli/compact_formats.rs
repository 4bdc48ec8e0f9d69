//! `cutpoint compact` on the provider formats: the region is planned over the
//! transcript's records by [`Log::plan`], moved to message boundaries (the records are
//! bound so that both ends always are), and the log is written back in its own format:
//! the pinned head verbatim, one summary message in the provider's shape with the
//! ledger of every summarized tool pair, then the retained messages byte-identical.

use std::io::{self, Write};
use std::process::ExitCode;

use cutpoint::compact::{Direction, Entry, Log, Policy};
use cutpoint::format::{Format, compact};

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
    let transcript = match formats::parse_as(&loaded, format, &cutpoint::format::ByteEstimate) {
        Ok(t) => t,
        Err(e) => return input::bad_input(&e),
    };
    let (records, owner) = transcript.records(transcript.live_from());
    let log = match Log::from_entries(records.into_iter().map(Entry::from)) {
        Ok(log) => log,
        Err(e) => return input::bad_input(&format!("{}: {e}", loaded.name)),
    };
    // The head in records: every record of the first `keep_head` live messages.
    let head_message = transcript.live_from() + request.keep_head;
    let head_records = owner.partition_point(|&m| m < head_message);
    let mut policy = Policy::new(request.target).keep_head(head_records);
    if let Some(lookback) = request.lookback {
        policy = policy.lookback(lookback);
    }
    if request.forward {
        policy = policy.direction(Direction::Forward);
    }
    let plan = match log.plan(&policy) {
        Ok(plan) => plan,
        Err(deferral) => {
            eprintln!("cutpoint: deferred: {deferral}");
            return ExitCode::from(super::EXIT_DEFER);
        }
    };
    let mut out = io::stdout().lock();
    if plan.region.is_empty() {
        eprintln!("cutpoint: nothing to compact past the pinned head");
        let _ = out.write_all(loaded.text.as_bytes());
        return ExitCode::SUCCESS;
    }
    let head = transcript.message_at(&owner, plan.region.start);
    let cut = transcript.message_at(&owner, plan.region.end);
    let summary = request
        .summary
        .as_deref()
        .unwrap_or("Earlier conversation, compacted.");
    match compact::render(&transcript, &loaded.text, head, cut, summary) {
        Ok(text) => {
            eprintln!(
                "cutpoint: summarized messages {head}..{cut} ({} tokens, {} tool pairs)",
                plan.region_tokens,
                compact::ledger(&transcript, head..cut).len()
            );
            let _ = out.write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => input::bad_input(&format!("{}: {e}", loaded.name)),
    }
}
