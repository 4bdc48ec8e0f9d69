//! The `cutpoint` binary end to end, as one test binary: exit codes, output, errors,
//! hostile input, and the subcommands over the real transcripts.

mod check_cli;
mod cli;
mod cli_bench;
mod common;
mod compact_cli;
mod native_cli;
mod native_records_cli;
mod readers_cli;
mod reliability_cli;
mod sessions_cli;
mod strategy_cli;
mod watch_cli;
