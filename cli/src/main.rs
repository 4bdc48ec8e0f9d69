//! The `cutpoint` command line: argument parsing and printing around the library.
//! Each subcommand lives in its own file; `source.rs` is the one input loader they
//! share, `guard.rs` the caps and mode flags.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod check;
mod compact;
mod cut;
mod exit;
mod guard;
mod source;
mod stats;
mod strategy;
mod watch;

/// Find compaction cuts that never split a tool_use/tool_result pair.
#[derive(Parser)]
#[command(name = "cutpoint", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the legal cut nearest the token target: records before it may be compacted.
    /// With --for, the keep-recent cut for a provider's own compaction.
    ///
    /// Exit status: 0 with the cut on stdout; 3 when compaction must defer, or no cut
    /// meets the provider's conditions (the reason on stderr); 2 on bad input
    /// (FILE:LINE: what is wrong).
    Cut(cut::Args),
    /// Check logs: records JSONL against the five conditions of safe compaction, the
    /// provider formats against their provider's tool call rules.
    ///
    /// Prints FILE:LINE: rule: call_id [provider error text] per violation. Exit
    /// status: 0 clean; 1 violations; 2 unreadable input.
    Check(check::Args),
    /// Records, messages, tool pairs, tokens, legal cuts and the longest span no cut
    /// can split.
    Stats(stats::Args),
    /// Compact a log: replace the region between the pinned head and the legal cut
    /// nearest the target by one summary record (--target), or run a strategy or a
    /// pipeline of them towards a budget (--strategy), and print the compacted log.
    ///
    /// Exit status: 0 with the log on stdout; 3 when compaction must defer or the
    /// budget cannot be met without breaking a rule or a floor (the reason on stderr);
    /// 2 on bad input.
    Compact(Box<compact::Args>),
    /// Measure this machine on a generated realistic session: append rates, query
    /// latency, memory per record, and the speed-up over the specification's rescan.
    Bench(bench::Args),
    /// Follow a provider's streaming response (recorded, or live on stdin as it
    /// arrives) and print one JSON line per state change: call opened, arguments
    /// complete, call answered or left open, legal cut available, usage, turn ended;
    /// then a line of totals (tool_calls, open_calls, tokens).
    ///
    /// Exit status: 0 when the stream ended normally; 1 when it carried a provider
    /// error or ended before the response did; 2 on bad input (FILE: event N (byte
    /// B): what is wrong).
    Watch(watch::Args),
    /// Stand between an agent and its provider (feature `proxy`): check every
    /// request by the provider's rules (a 400 in the provider's error shape, not
    /// forwarded, for one that breaks a rule; --mode repair fixes what loses no
    /// call), compact over --budget with --mode compact, stream the answers back
    /// unchanged. See docs/proxy.md.
    #[cfg(feature = "proxy")]
    Proxy(cutpoint_proxy::cli::Args),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Cut(args) => cut::run(args),
        Command::Check(args) => check::run(args),
        Command::Stats(args) => stats::run(args),
        Command::Compact(args) => compact::run(*args),
        Command::Bench(args) => bench::run(args),
        Command::Watch(args) => watch::run(args),
        #[cfg(feature = "proxy")]
        Command::Proxy(args) => cutpoint_proxy::cli::run(args),
    }
}
