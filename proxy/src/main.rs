//! `cutpoint-proxy`: [`cutpoint_proxy::cli::run`] on the process's arguments.

use clap::Parser;

fn main() -> std::process::ExitCode {
    cutpoint_proxy::cli::run(cutpoint_proxy::cli::Args::parse())
}
