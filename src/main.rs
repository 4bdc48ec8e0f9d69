//! The `cutpoint` command line: argument parsing and printing around the library.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use cutpoint::Tracker;
use cutpoint::jsonl::Reader;

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
    Cut {
        /// Tokens to compact: the cut lands where the prefix sum first reaches this.
        #[arg(long, value_name = "TOKENS")]
        target: u64,
        /// How far back from the target to look for a legal cut, in tokens.
        #[arg(long, value_name = "TOKENS")]
        lookback: u64,
        /// Input format.
        #[arg(long, value_enum, default_value_t = Format::Records)]
        format: Format,
        /// The log to read; `-` or nothing reads stdin.
        #[arg(value_name = "FILE")]
        file: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    /// cutpoint's records JSONL: {"kind":"tool_use","call_id":"a","tokens":12} per line.
    Records,
}

/// Exit codes, as documented in `--help`.
const EXIT_DEFER: u8 = 3;
const EXIT_BAD_INPUT: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Cut {
            target,
            lookback,
            format: Format::Records,
            file,
        } => cut(target, lookback, file),
    }
}

fn cut(target: u64, lookback: u64, file: Option<PathBuf>) -> ExitCode {
    let (name, input) = match open(file) {
        Ok(opened) => opened,
        Err(message) => return bad_input(&message),
    };
    let tracker = match read_tracker(&name, input) {
        Ok(tracker) => tracker,
        Err(message) => return bad_input(&message),
    };
    match tracker.select_legal_cut(target, lookback) {
        Ok(cut) => {
            let mut out = io::stdout().lock();
            // A closed stdout (e.g. `| head`) is not worth a panic.
            let _ = writeln!(out, "{cut}");
            ExitCode::SUCCESS
        }
        Err(defer) => {
            eprintln!("cutpoint: deferred: {defer}");
            ExitCode::from(EXIT_DEFER)
        }
    }
}

/// Opens `file`, or stdin for `-` or none; returns the name to print in errors.
fn open(file: Option<PathBuf>) -> Result<(String, Box<dyn BufRead>), String> {
    match file {
        None => Ok(("<stdin>".to_owned(), Box::new(io::stdin().lock()))),
        Some(path) if path.as_os_str() == "-" => {
            Ok(("<stdin>".to_owned(), Box::new(io::stdin().lock())))
        }
        Some(path) => {
            let name = path.display().to_string();
            let file = File::open(&path).map_err(|e| format!("{name}: cannot open: {e}"))?;
            Ok((name, Box::new(BufReader::with_capacity(1 << 16, file))))
        }
    }
}

/// Reads records JSONL into a tracker; errors as `FILE:LINE: what is wrong`.
fn read_tracker(name: &str, input: Box<dyn BufRead>) -> Result<Tracker, String> {
    let mut tracker = Tracker::new();
    for item in Reader::new(input) {
        let (line, record) =
            item.map_err(
                |e| match e.to_string().strip_prefix(&format!("line {}: ", e.line())) {
                    Some(rest) => format!("{name}:{}: {rest}", e.line()),
                    None => format!("{name}:{}: {e}", e.line()),
                },
            )?;
        tracker
            .append(record)
            .map_err(|e| format!("{name}:{line}: {e}"))?;
    }
    Ok(tracker)
}

fn bad_input(message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(EXIT_BAD_INPUT)
}
