//! The `cutpoint` command line: argument parsing and printing around the library.
//! Each subcommand lives in its own file under `src/cli/`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cli;

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
    ///
    /// Exit status: 0 with the cut on stdout; 3 when compaction must defer (the reason
    /// on stderr); 2 on bad input (FILE:LINE: what is wrong).
    Cut(cli::cut::Args),
    /// Check logs: records JSONL against the five conditions of safe compaction, the
    /// provider formats against their provider's tool call rules.
    ///
    /// Prints FILE:LINE: rule: call_id [provider error text] per violation. Exit
    /// status: 0 clean; 1 violations; 2 unreadable input.
    Check(cli::check_formats::Args),
    /// Records, messages, tool pairs, tokens, legal cuts and the longest span no cut
    /// can split.
    Stats(cli::stats::Args),
    /// Compact a log: replace the region between the pinned head and the legal cut
    /// nearest the target by one summary record, and print the compacted log.
    ///
    /// Exit status: 0 with the log on stdout; 3 when compaction must defer (the reason
    /// on stderr); 2 on bad input.
    Compact(cli::compact::Args),
    /// Measure this machine on a generated realistic session: append rates, query
    /// latency, memory per record, and the speed-up over the specification's rescan.
    Bench(cli::bench::Args),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Cut(args) => cli::cut::run(args),
        Command::Check(args) => cli::check_formats::run(args),
        Command::Stats(args) => cli::stats::run(args),
        Command::Compact(args) => cli::compact::run(args),
        Command::Bench(args) => cli::bench::run(args),
    }
}
