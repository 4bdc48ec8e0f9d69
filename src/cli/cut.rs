//! `cutpoint cut`: print the legal cut nearest a token target.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::input::{self, Format};

/// Arguments of `cutpoint cut`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Tokens to compact: the search starts at the record where the prefix sum first
    /// reaches this.
    #[arg(long, value_name = "TOKENS")]
    target: u64,
    /// How far back from the target to look for a legal cut, in tokens.
    #[arg(long, value_name = "TOKENS")]
    lookback: u64,
    /// Input format.
    #[arg(long, value_enum, default_value_t = Format::Records)]
    format: Format,
    #[command(flatten)]
    input: super::guard::InputOptions,
    /// The log to read; `-` or nothing reads stdin.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> ExitCode {
    let Format::Records = args.format;
    let tracker =
        match input::open(args.file.as_deref()).and_then(|i| input::read_tracker(i, &args.input)) {
            Ok(tracker) => tracker,
            Err(message) => return input::bad_input(&message),
        };
    match tracker.select_legal_cut(args.target, args.lookback) {
        Ok(cut) => {
            // A closed stdout (`| head`) is not worth a panic.
            let _ = writeln!(io::stdout().lock(), "{cut}");
            ExitCode::SUCCESS
        }
        Err(defer) => {
            eprintln!("cutpoint: deferred: {defer}");
            ExitCode::from(super::EXIT_DEFER)
        }
    }
}
