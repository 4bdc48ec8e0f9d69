//! `cutpoint cut`: print the legal cut nearest a token target.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cutpoint::Tracker;
use cutpoint::format::{DeferReport, Format};

use crate::exit;
use crate::guard::InputOptions;
use crate::source::{self, FormatArg, Tokenizer};

/// Arguments of `cutpoint cut`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Tokens to compact: the search starts at the record where the prefix sum first
    /// reaches this.
    #[arg(long, value_name = "TOKENS")]
    target: u64,
    /// How far the walk back from the target may go, in tokens. The walk starts at the
    /// record where the target is reached and counts that record's own tokens first,
    /// then each record before it, while the sum stays within TOKENS; the largest legal
    /// cut in what it covered is printed, or the command defers (exit 3). A lookback
    /// smaller than the target record itself searches that record alone.
    #[arg(long, value_name = "TOKENS")]
    lookback: u64,
    /// Input format: auto, records, anthropic, openai-chat, openai-responses, gemini,
    /// claude-code, codex or gemini-cli. For records JSONL the cut is a record index; for the other
    /// formats it is a message index (records before it may be compacted).
    #[arg(long, value_name = "FORMAT", default_value = "auto", value_parser = source::parse_format)]
    format: FormatArg,
    /// How tokens are counted (provider formats; records carry their own counts).
    #[arg(long, value_enum, default_value_t = Tokenizer::Bytes)]
    tokenizer: Tokenizer,
    #[command(flatten)]
    input: InputOptions,
    /// The log to read; `-` or nothing reads stdin.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> ExitCode {
    match cut(&args) {
        Err(message) => exit::bad_input(&message),
        Ok(Ok(cut)) => {
            // A closed stdout (`| head`) is not worth a panic.
            let _ = writeln!(io::stdout().lock(), "{cut}");
            ExitCode::SUCCESS
        }
        Ok(Err(report)) => {
            eprintln!("cutpoint: deferred: {report}");
            ExitCode::from(exit::DEFER)
        }
    }
}

/// The cut (a record index for records JSONL; for the provider formats the tracker
/// runs over the live history's records and the cut is the first retained message),
/// or why it defers, in the same index space.
fn cut(args: &Args) -> Result<Result<usize, DeferReport>, String> {
    let source = source::open(args.file.as_deref(), args.format)?;
    let format = source.format(args.format)?;
    if format == Format::Records {
        let tracker: Tracker = source.tracker(&args.input)?;
        return Ok(tracker
            .select_legal_cut(args.target, args.lookback)
            .map_err(|d| DeferReport::records(&d, &tracker)));
    }
    let counter = args.tokenizer.counter()?;
    let transcript = source.transcript(format, counter.as_ref())?;
    let (tracker, owner) = transcript.tracker().map_err(|e| e.to_string())?;
    Ok(tracker
        .select_legal_cut(args.target, args.lookback)
        .map(|cut| transcript.message_at(&owner, cut))
        .map_err(|d| DeferReport::messages(&d, &tracker, &transcript, &owner)))
}
