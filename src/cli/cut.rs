//! `cutpoint cut`: print the legal cut nearest a token target.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use super::formats::{self, FormatArg, Tokenizer};
use super::input;

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
    /// Input format. For records JSONL the cut is a record index; for the other
    /// formats it is a message index (records before it may be compacted).
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,
    /// How tokens are counted (provider formats; records carry their own counts).
    #[arg(long, value_enum, default_value_t = Tokenizer::Bytes)]
    tokenizer: Tokenizer,
    #[command(flatten)]
    input: super::guard::InputOptions,
    /// The log to read; `-` or nothing reads stdin.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> ExitCode {
    let opened = match args.format {
        FormatArg::Records => input::open(args.file.as_deref()),
        FormatArg::Auto => match formats::load_bytes(args.file.as_deref()) {
            Err(message) => return input::bad_input(&message),
            Ok(loaded) => match formats::resolve(&loaded, args.format) {
                Err(message) => return input::bad_input(&message),
                Ok(format) if format != cutpoint::format::Format::Records => {
                    return run_transcript(args, Some(loaded), format);
                }
                Ok(_) => Ok(input::Input {
                    name: loaded.name,
                    reader: Box::new(io::Cursor::new(loaded.bytes)),
                }),
            },
        },
        other => {
            let Some(format) = other.format() else {
                return input::bad_input("cutpoint: no format");
            };
            return run_transcript(args, None, format);
        }
    };
    let tracker = match opened.and_then(|i| input::read_tracker(i, &args.input)) {
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

/// `cut` over a provider format: the tracker runs over the live history's records and
/// the cut printed is the index of the first retained message.
fn run_transcript(
    args: Args,
    loaded: Option<formats::LoadedBytes>,
    format: cutpoint::format::Format,
) -> ExitCode {
    let loaded = match loaded {
        Some(l) => formats::into_text(l),
        None => formats::load(args.file.as_deref()),
    };
    let counter = match formats::counter(args.tokenizer) {
        Ok(c) => c,
        Err(message) => return input::bad_input(&message),
    };
    let transcript =
        match loaded.and_then(|loaded| formats::parse_as(&loaded, format, counter.as_ref())) {
            Ok(t) => t,
            Err(message) => return input::bad_input(&message),
        };
    let (tracker, owner) = match formats::tracker(&transcript) {
        Ok(t) => t,
        Err(message) => return input::bad_input(&message),
    };
    match tracker.select_legal_cut(args.target, args.lookback) {
        Ok(cut) => {
            let message = formats::message_at(&transcript, &owner, cut);
            let _ = writeln!(io::stdout().lock(), "{message}");
            ExitCode::SUCCESS
        }
        Err(defer) => {
            eprintln!("cutpoint: deferred: {defer}");
            ExitCode::from(super::EXIT_DEFER)
        }
    }
}
