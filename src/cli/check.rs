//! `cutpoint check`: validate a log, printing `FILE:LINE: kind: call_id` per violation.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cutpoint::validate::{Options, validate};

use super::input::{self, Format};

/// Arguments of `cutpoint check`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Input format.
    #[arg(long, value_enum, default_value_t = Format::Records)]
    format: Format,
    /// Do not report calls still pending in the last turn (a log read mid-turn).
    #[arg(long)]
    allow_pending: bool,
    #[command(flatten)]
    caps: super::guard::Caps,
    /// The log to read; `-` or nothing reads stdin.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> ExitCode {
    let read = match input::open(args.file.as_deref())
        .and_then(|i| input::read_entries(i, args.format, args.caps.limits()))
    {
        Ok(read) => read,
        Err(message) => return input::bad_input(&message),
    };
    let options = if args.allow_pending {
        Options::allowing_pending()
    } else {
        Options::strict()
    };
    let report = validate(&read.entries, options);
    let mut out = io::stdout().lock();
    for v in &report.violations {
        // A closed stdout (`| head`) is not worth a panic.
        let _ = writeln!(
            out,
            "{}:{}: {}: {}",
            read.name,
            read.line(v.at()),
            v.kind(),
            v.call_id()
        );
    }
    if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "{}: {} violation{} (pairing structure {:016x})",
            read.name,
            report.violations.len(),
            if report.violations.len() == 1 {
                ""
            } else {
                "s"
            },
            report.structure.digest()
        );
        ExitCode::from(super::EXIT_VIOLATIONS)
    }
}
